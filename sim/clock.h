/* clock: wall time for measurements, and the median that turns repeated measurements
 * into one figure robust to the occasional slow repetition. */
#ifndef CK_CLOCK_H
#define CK_CLOCK_H

#include <stddef.h>

/* Seconds on a monotonic clock (differences are meaningful, the origin is not). */
double ck_clock_seconds(void);

/* The median of v[0..n), n >= 1 (the upper one of the two middle values when n is even).
 * Sorts v in place. */
double ck_clock_median(double *v, size_t n);

#endif
