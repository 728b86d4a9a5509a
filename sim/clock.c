#include "sim/clock.h"

#include <stdlib.h>
#include <time.h>

double ck_clock_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double ck_clock_median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, compare_doubles);
    return v[n / 2];
}
