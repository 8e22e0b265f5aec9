/*
 * loss.c - softmax cross-entropy, binary cross-entropy with logits, mean
 * squared error and L1.  Each returns the mean loss (accumulated in double)
 * and writes the gradient of that mean.
 */
#include "internal.h"

#include <math.h>

float loom_softmax_xent(int n, int k, const float *logits, const int32_t *labels, float *dlogits,
                        int *correct)
{
    double total = 0.0;
    int ok = 0;
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * k;
        int arg = 0;
        float mx = z[0];
        for (int j = 1; j < k; j++)
            if (z[j] > mx) {
                mx = z[j];
                arg = j;
            }
        double se = 0.0;
        for (int j = 0; j < k; j++)
            se += exp((double)z[j] - mx);
        int y = labels[i];
        double logp = (double)z[y] - mx - log(se);
        total -= logp;
        ok += arg == y;
        if (dlogits) {
            float *g = dlogits + (size_t)i * k;
            for (int j = 0; j < k; j++) {
                double p = exp((double)z[j] - mx) / se;
                g[j] = (float)((p - (j == y)) / n);
            }
        }
    }
    if (correct)
        *correct = ok;
    return (float)(total / n);
}

float loom_bce_logits(size_t n, const float *x, const float *t, float *dx)
{
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        /* max(v,0) - v*t + log(1 + exp(-|v|)) */
        total += (v > 0 ? v : 0) - v * t[i] + log1p(exp(-fabs(v)));
        if (dx) {
            double s = v >= 0 ? 1.0 / (1.0 + exp(-v)) : exp(v) / (1.0 + exp(v));
            dx[i] = (float)((s - t[i]) / (double)n);
        }
    }
    return (float)(total / (double)n);
}

float loom_mse(size_t n, const float *x, const float *t, float *dx)
{
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)x[i] - t[i];
        total += d * d;
        if (dx)
            dx[i] = (float)(2.0 * d / (double)n);
    }
    return (float)(total / (double)n);
}

float loom_l1(size_t n, const float *x, const float *t, float *dx)
{
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)x[i] - t[i];
        total += fabs(d);
        if (dx)
            dx[i] = (float)((d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0) / (double)n);
    }
    return (float)(total / (double)n);
}
