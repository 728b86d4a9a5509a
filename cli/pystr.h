/* pystr: strings as Python string literals, for the code ckplan emits. Every string that
 * comes from an input (a model's or a node's name, a path, a plan's planner) reaches emitted
 * Python through this function alone, never inside a docstring, a comment or an f-string,
 * so that no name can end the literal, start a line of code or stop the module from
 * parsing. */
#ifndef CK_PYSTR_H
#define CK_PYSTR_H

#include <stdio.h>

/* s as a double-quoted Python literal that evaluates to s, written in ASCII alone: printable
 * ASCII is kept ('"' and '\' escaped), every other character is an escape (\xNN, \uNNNN,
 * \UNNNNNNNN: newlines, Unicode line separators and '\N' sequences included). A byte that is
 * not part of UTF-8 becomes \udcNN, as Python's surrogateescape decodes it, so the bytes
 * come back with s.encode("utf-8", "surrogateescape"). */
void ck_pystr_put(FILE *out, const char *s);

#endif
