/* human: figures and text as the commands print them for people. (Sizes: ck_size_format.) */
#ifndef CK_HUMAN_H
#define CK_HUMAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A duration in seconds as "12.3 us", "4.56 ms" or "7.890 s". */
void ck_human_seconds(double t, char *buf, size_t len);

/* A count with thousands separated: "124,439,808" (len >= 27 holds any). */
void ck_human_count(uint64_t n, char *buf, size_t len);

/* Text that came from an input file or the command line, made safe to show on a terminal:
 * control characters (C0, DEL, and U+0080-U+009F, which terminals obey too) become \xNN or
 * \u00NN, Unicode's line and paragraph separators \u2028 and \u2029, and bytes that are
 * not UTF-8 \xNN, so that a name can neither move the cursor, recolour the screen nor start
 * a line of its own (in a terminal, or in a comment of emitted code read line by line). Other text, UTF-8 included, is kept.
 * Writes at most len - 1 bytes and a NUL (len >= 1), never cutting an escape or a character
 * in two. */
void ck_human_terminal_text(const char *s, char *buf, size_t len);
/* The same, written whole to out. */
void ck_human_put_terminal_text(FILE *out, const char *s);

#endif
