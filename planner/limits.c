#include "planner/limits.h"

#include <stdlib.h>

unsigned long ck_limits_from_env(const char *name, unsigned long dflt)
{
    const char *v = getenv(name);
    char *end;
    unsigned long n = v ? strtoul(v, &end, 10) : 0;
    return v && *v && !*end && n > 0 ? n : dflt;
}
