#include "cli/human.h"

#include <stdio.h>

void ck_format_seconds(double t, char *buf, size_t len)
{
    if (t < 1e-3)
        snprintf(buf, len, "%.1f us", t * 1e6);
    else if (t < 1)
        snprintf(buf, len, "%.2f ms", t * 1e3);
    else
        snprintf(buf, len, "%.3f s", t);
}
