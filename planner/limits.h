/* limits: the limits that an environment variable may change, by name (the registry:
 * docs/reliability.md lists them all), and reading them. Each limit's default and message
 * live with the reader it protects. */
#ifndef CK_LIMITS_H
#define CK_LIMITS_H

#include <stdbool.h>

typedef enum {
    CK_LIMIT_INPUT_MB,      /* CKPLAN_MAX_INPUT_MB: the size of an input file */
    CK_LIMIT_JSON_DEPTH,    /* CKPLAN_MAX_JSON_DEPTH: JSON nesting */
    CK_LIMIT_STAGES,        /* CKPLAN_MAX_STAGES: stages of a chain */
    CK_LIMIT_GRAPH_NODES,   /* CKPLAN_MAX_GRAPH_NODES: nodes of a Checkmate graph */
    CK_LIMIT_SCHEDULE_OPS,  /* CKPLAN_MAX_SCHEDULE_OPS: operations of a schedule */
    CK_N_LIMITS
} ck_limit;

/* The environment variable that changes limit l. */
const char *ck_limits_name(ck_limit l);

/* Whether text is a positive whole number: decimal digits only (no sign, space or other
 * character), not all zeros, at most ULONG_MAX; then *out receives it. */
bool ck_limits_parse(const char *text, unsigned long *out);

/* Limit l: its variable's value when that is a positive whole number, else `dflt` (unset,
 * or set to anything else, which the command line warns about: ck_limits_invalid). */
unsigned long ck_limits_get(ck_limit l, unsigned long dflt);

/* Whether l's variable is set to something other than a positive whole number; then
 * *value receives what it holds. */
bool ck_limits_invalid(ck_limit l, const char **value);

#endif
