/* limits: reading the limits that an environment variable may change (CKPLAN_MAX_INPUT_MB,
 * CKPLAN_MAX_JSON_DEPTH, CKPLAN_MAX_STAGES; docs/reliability.md lists them all). Each limit's
 * default and message live with the reader it protects. */
#ifndef CK_LIMITS_H
#define CK_LIMITS_H

/* The positive whole number in the environment variable `name`, or `dflt` when the variable
 * is unset or holds anything else. */
unsigned long ck_limits_from_env(const char *name, unsigned long dflt);

#endif
