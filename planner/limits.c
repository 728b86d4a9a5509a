#include "planner/limits.h"

#include <limits.h>
#include <stdlib.h>

static const char *const names[CK_N_LIMITS] = {
    [CK_LIMIT_INPUT_MB] = "CKPLAN_MAX_INPUT_MB",
    [CK_LIMIT_JSON_DEPTH] = "CKPLAN_MAX_JSON_DEPTH",
    [CK_LIMIT_STAGES] = "CKPLAN_MAX_STAGES",
    [CK_LIMIT_GRAPH_NODES] = "CKPLAN_MAX_GRAPH_NODES",
    [CK_LIMIT_SCHEDULE_OPS] = "CKPLAN_MAX_SCHEDULE_OPS",
};

const char *ck_limits_name(ck_limit l)
{
    return names[l];
}

/* By hand, not strtoul: it takes leading space, a sign ("-1" wraps to ULONG_MAX) and "+". */
bool ck_limits_parse(const char *text, unsigned long *out)
{
    unsigned long n = 0;
    if (!text || !*text)
        return false;
    for (const char *c = text; *c; c++) {
        unsigned d = (unsigned)(*c - '0');
        if (*c < '0' || *c > '9' || n > (ULONG_MAX - d) / 10)
            return false;
        n = n * 10 + d;
    }
    *out = n;
    return n > 0;
}

unsigned long ck_limits_get(ck_limit l, unsigned long dflt)
{
    unsigned long n;
    return ck_limits_parse(getenv(names[l]), &n) ? n : dflt;
}

bool ck_limits_invalid(ck_limit l, const char **value)
{
    unsigned long n;
    *value = getenv(names[l]);
    return *value && !ck_limits_parse(*value, &n);
}
