/* envlimit: limits that the environment can change (CKPLAN_MAX_INPUT_MB and the like;
 * docs/reliability.md lists them). */
#ifndef CK_ENVLIMIT_H
#define CK_ENVLIMIT_H

/* The value of environment variable `name` when it is a whole number above 0, else dflt. */
unsigned long ck_env_limit(const char *name, unsigned long dflt);

#endif
