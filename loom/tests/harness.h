/* harness.h - a minimal test harness: CHECK counts, a summary line that
 * meson and CI read ("N passed, N failed"), exit status 1 on any failure. */
#ifndef LOOM_TEST_HARNESS_H
#define LOOM_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int t_pass, t_fail;

#define CHECK(cond, ...)                                       \
    do {                                                       \
        if (cond) {                                            \
            t_pass++;                                          \
        } else {                                               \
            t_fail++;                                          \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                      \
            fprintf(stderr, "\n");                             \
        }                                                      \
    } while (0)

static inline int t_done(void)
{
    printf("%d passed, %d failed\n", t_pass, t_fail);
    return t_fail ? 1 : 0;
}

/* max |a-b| / max(1e-3 + |b|) style relative error over n values */
static inline double t_relerr(const double *a, const double *b, size_t n)
{
    double num = 0.0, den = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (d > num)
            num = d;
        if (fabs(b[i]) > den)
            den = fabs(b[i]);
    }
    return num / den;
}

#endif
