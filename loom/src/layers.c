/*
 * layers.c - the non-convolution layers: batch normalisation, ReLU, sigmoid,
 * max/average/global-average pooling, fully connected (sgemm), residual add,
 * dropout and pixel shuffle.  Each has a forward and a backward function;
 * backward functions overwrite dx, or add to it when accum_dx is set (an
 * activation read by two layers receives the sum of both gradients).
 */
#include "internal.h"

#include <cblas.h>
#include <float.h>
#include <math.h>

static inline void put(float *dst, float v, int accum) { *dst = accum ? *dst + v : v; }

/* ------------------------------------------------------------ batch norm */
/* The batch norm + ReLU fusion (loom__bn_forward_relu, loom__bn_backward_relu):
 * y = max(0, bn(x)) in the same pass that writes y, and backward takes dy of
 * the ReLU's output, counting it only where that output (ry) is positive,
 * inside the passes that read dy anyway: the ReLU's own read-modify-write
 * passes over the activation (forward) and its gradient (backward) go.  Same
 * values, same bits as the two layers one after the other. */
typedef struct {
    const loom_bn_desc_t *d;
    int training, accum_dx;
    int relu;          /* forward: y = max(0, bn(x)) */
    const float *ry;   /* backward: the fused ReLU's output (dy counts where ry > 0), or NULL */
    loom_shape_t s;
    const float *x, *gamma, *beta, *save_mean, *save_invstd, *dy;
    float *running_mean, *running_var, *save_mean_out, *save_invstd_out, *y, *dx, *dgamma, *dbeta;
} bn_job_t;

/* Sums over one channel's slice of one sample.  Float reductions written as
 * one dependent chain are not vectorised (that would reassociate them) and
 * run at one add per 4 cycles; SUM_LANES independent partial sums in a
 * fixed order vectorise, stay deterministic, and (being short) are at least
 * as accurate as the single chain.  The lanes are combined in double. */
#define SUM_LANES 32

static double lanes_total(const float *acc)
{
    double t = 0.0;
    for (int k = 0; k < SUM_LANES; k++)
        t += acc[k];
    return t;
}

/* sum of x[0..n) (internal.h) */
double loom__sum_f(const float *x, size_t n)
{
    float acc[SUM_LANES] = {0};
    size_t i = 0;
    for (; i + SUM_LANES <= n; i += SUM_LANES)
        for (int k = 0; k < SUM_LANES; k++)
            acc[k] += x[i + k];
    for (int k = 0; i < n; i++, k++)
        acc[k] += x[i];
    return lanes_total(acc);
}

/* sum of (x - m)^2 over x[0..n) (internal.h) */
double loom__sum_sq_dev(const float *x, size_t n, float m)
{
    float acc[SUM_LANES] = {0};
    size_t i = 0;
    for (; i + SUM_LANES <= n; i += SUM_LANES)
        for (int k = 0; k < SUM_LANES; k++) {
            float t = x[i + k] - m;
            acc[k] += t * t;
        }
    for (int k = 0; i < n; i++, k++) {
        float t = x[i] - m;
        acc[k] += t * t;
    }
    return lanes_total(acc);
}

/* *sg += sum of g, *sgx += sum of g * (x - m), over [0, n) (internal.h) */
void loom__sum_dy_dyx(const float *g, const float *x, size_t n, float m, double *sg, double *sgx)
{
    float a[SUM_LANES] = {0}, b[SUM_LANES] = {0};
    size_t i = 0;
    for (; i + SUM_LANES <= n; i += SUM_LANES)
        for (int k = 0; k < SUM_LANES; k++) {
            a[k] += g[i + k];
            b[k] += g[i + k] * (x[i + k] - m);
        }
    for (int k = 0; i < n; i++, k++) {
        a[k] += g[i];
        b[k] += g[i] * (x[i] - m);
    }
    *sg += lanes_total(a);
    *sgx += lanes_total(b);
}

/* loom__sum_dy_dyx with g counted only where ry > 0 (the fused ReLU's mask). */
static void sum_dy_dyx_masked(const float *g, const float *ry, const float *x, size_t n, float m,
                              double *sg, double *sgx)
{
    float a[SUM_LANES] = {0}, b[SUM_LANES] = {0};
    size_t i = 0;
    for (; i + SUM_LANES <= n; i += SUM_LANES)
        for (int k = 0; k < SUM_LANES; k++) {
            float gk = ry[i + k] > 0.0f ? g[i + k] : 0.0f;
            a[k] += gk;
            b[k] += gk * (x[i + k] - m);
        }
    for (int k = 0; i < n; i++, k++) {
        float gk = ry[i] > 0.0f ? g[i] : 0.0f;
        a[k] += gk;
        b[k] += gk * (x[i] - m);
    }
    *sg += lanes_total(a);
    *sgx += lanes_total(b);
}

static void bn_fwd_task(void *arg, int tid, int nt)
{
    const bn_job_t *j = arg;
    const loom_bn_desc_t *d = j->d;
    const loom_shape_t s = j->s;
    const int training = j->training;
    const float *x = j->x, *gamma = j->gamma, *beta = j->beta;
    float *running_mean = j->running_mean, *running_var = j->running_var;
    float *save_mean = j->save_mean_out, *save_invstd = j->save_invstd_out, *y = j->y;
    const size_t HW = (size_t)s.h * s.w, M = (size_t)s.n * HW;
    size_t cb, ce;
    loom__range((size_t)s.c, tid, nt, &cb, &ce);
    for (int c = (int)cb; c < (int)ce; c++) {
        float mean, invstd;
        if (training) {
            /* Two passes (mean, then squared deviations): the second and the
             * normalisation below read the channel from L2 (n*HW floats,
             * 400 KB for 128 x 28x28), so the exact two-pass variance costs
             * little more than a one-pass formula and has no cancellation. */
            double sum = 0.0, sq = 0.0;
            for (int i = 0; i < s.n; i++)
                sum += loom__sum_f(x + ((size_t)i * s.c + c) * HW, HW);
            double dm = sum / (double)M;
            for (int i = 0; i < s.n; i++)
                sq += loom__sum_sq_dev(x + ((size_t)i * s.c + c) * HW, HW, (float)dm);
            double var = sq / (double)M;
            mean = (float)dm;
            invstd = (float)(1.0 / sqrt(var + d->eps));
            if (save_mean)
                save_mean[c] = mean;
            if (save_invstd)
                save_invstd[c] = invstd;
            if (running_mean && running_var) {
                double unbiased = M > 1 ? var * (double)M / (double)(M - 1) : var;
                running_mean[c] = (1.0f - d->momentum) * running_mean[c] + d->momentum * mean;
                running_var[c] =
                    (1.0f - d->momentum) * running_var[c] + d->momentum * (float)unbiased;
            }
        } else {
            mean = running_mean[c];
            invstd = 1.0f / sqrtf(running_var[c] + d->eps);
        }
        float a = gamma[c] * invstd, b = beta[c] - mean * a;
        for (int i = 0; i < s.n; i++) {
            const float *xc = x + ((size_t)i * s.c + c) * HW;
            float *yc = y + ((size_t)i * s.c + c) * HW;
            if (j->relu)
                for (size_t p = 0; p < HW; p++) {
                    float v = xc[p] * a + b;
                    yc[p] = v > 0.0f ? v : 0.0f;
                }
            else
                for (size_t p = 0; p < HW; p++)
                    yc[p] = xc[p] * a + b;
        }
    }
}

static void bn_forward(const loom_bn_desc_t *d, int training, loom_shape_t s, const float *x,
                       const float *gamma, const float *beta, float *running_mean,
                       float *running_var, float *save_mean, float *save_invstd, float *y, int relu)
{
    bn_job_t j = {.d = d, .training = training, .relu = relu, .s = s, .x = x, .gamma = gamma,
                  .beta = beta, .running_mean = running_mean, .running_var = running_var,
                  .save_mean_out = save_mean, .save_invstd_out = save_invstd, .y = y};
    loom__parallel(bn_fwd_task, &j);
}

void loom_bn_forward(const loom_bn_desc_t *d, int training, loom_shape_t s, const float *x,
                     const float *gamma, const float *beta, float *running_mean,
                     float *running_var, float *save_mean, float *save_invstd, float *y)
{
    bn_forward(d, training, s, x, gamma, beta, running_mean, running_var, save_mean, save_invstd, y,
               0);
}

void loom__bn_forward_relu(const loom_bn_desc_t *d, int training, loom_shape_t s, const float *x,
                           const float *gamma, const float *beta, float *running_mean,
                           float *running_var, float *save_mean, float *save_invstd, float *y)
{
    bn_forward(d, training, s, x, gamma, beta, running_mean, running_var, save_mean, save_invstd, y,
               1);
}

static void bn_bwd_task(void *arg, int tid, int nt)
{
    const bn_job_t *j = arg;
    const loom_shape_t s = j->s;
    const float *x = j->x, *gamma = j->gamma, *save_mean = j->save_mean,
                *save_invstd = j->save_invstd, *dy = j->dy, *ry = j->ry;
    float *dx = j->dx, *dgamma = j->dgamma, *dbeta = j->dbeta;
    const int accum_dx = j->accum_dx;
    const size_t HW = (size_t)s.h * s.w, M = (size_t)s.n * HW;
    size_t cb, ce;
    loom__range((size_t)s.c, tid, nt, &cb, &ce);
    for (int c = (int)cb; c < (int)ce; c++) {
        const float mean = save_mean[c], invstd = save_invstd[c];
        double sdy = 0.0, sdyx = 0.0;
        for (int i = 0; i < s.n; i++) {
            size_t o = ((size_t)i * s.c + c) * HW;
            if (ry)
                sum_dy_dyx_masked(dy + o, ry + o, x + o, HW, mean, &sdy, &sdyx);
            else
                loom__sum_dy_dyx(dy + o, x + o, HW, mean, &sdy, &sdyx);
        }
        float sum_dy = (float)sdy, sum_dy_xhat = (float)(sdyx * invstd);
        if (dgamma)
            dgamma[c] += sum_dy_xhat;
        if (dbeta)
            dbeta[c] += sum_dy;
        if (!dx)
            continue;
        /* dx = gamma*invstd * (dy - mean(dy) - xhat*mean(dy*xhat)) */
        float k = gamma[c] * invstd;
        float mdy = sum_dy / (float)M, mdx = sum_dy_xhat / (float)M;
        float kx = k * mdx * invstd; /* coefficient of (x - mean) */
        float k0 = -k * mdy + kx * mean;
        for (int i = 0; i < s.n; i++) {
            const float *xc = x + ((size_t)i * s.c + c) * HW;
            const float *gc = dy + ((size_t)i * s.c + c) * HW;
            float *oc = dx + ((size_t)i * s.c + c) * HW;
            if (ry) {
                const float *rc = ry + ((size_t)i * s.c + c) * HW;
                if (accum_dx)
                    for (size_t p = 0; p < HW; p++)
                        oc[p] += k * (rc[p] > 0.0f ? gc[p] : 0.0f) - kx * xc[p] + k0;
                else
                    for (size_t p = 0; p < HW; p++)
                        oc[p] = k * (rc[p] > 0.0f ? gc[p] : 0.0f) - kx * xc[p] + k0;
            } else if (accum_dx) {
                for (size_t p = 0; p < HW; p++)
                    oc[p] += k * gc[p] - kx * xc[p] + k0;
            } else {
                for (size_t p = 0; p < HW; p++)
                    oc[p] = k * gc[p] - kx * xc[p] + k0;
            }
        }
    }
}

void loom_bn_backward(loom_shape_t s, const float *x, const float *gamma,
                      const float *save_mean, const float *save_invstd, const float *dy,
                      float *dx, int accum_dx, float *dgamma, float *dbeta)
{
    bn_job_t j = {.s = s, .x = x, .gamma = gamma, .save_mean = save_mean,
                  .save_invstd = save_invstd, .dy = dy, .dx = dx, .accum_dx = accum_dx,
                  .dgamma = dgamma, .dbeta = dbeta};
    loom__parallel(bn_bwd_task, &j);
}

void loom__bn_backward_relu(loom_shape_t s, const float *x, const float *gamma,
                            const float *save_mean, const float *save_invstd, const float *ry,
                            const float *dy, float *dx, int accum_dx, float *dgamma, float *dbeta)
{
    bn_job_t j = {.s = s, .x = x, .gamma = gamma, .save_mean = save_mean,
                  .save_invstd = save_invstd, .ry = ry, .dy = dy, .dx = dx, .accum_dx = accum_dx,
                  .dgamma = dgamma, .dbeta = dbeta};
    loom__parallel(bn_bwd_task, &j);
}

/* ---------------------------------------------------------- element-wise */
typedef struct {
    int op, accum;
    size_t n;
    const float *a, *b;
    float *y;
    float *y2; /* op 5: the second destination (NULL: none) */
    int accum2;
} ew_job_t;

static void ew_task(void *arg, int tid, int nt)
{
    const ew_job_t *j = arg;
    size_t b, e;
    loom__range(j->n, tid, nt, &b, &e);
    b &= ~(size_t)15; /* 64-byte aligned parts */
    e = tid == nt - 1 ? j->n : (e & ~(size_t)15);
    const float *x = j->a, *g = j->b;
    float *y = j->y;
    switch (j->op) {
    case 0: /* relu */
        for (size_t i = b; i < e; i++)
            y[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case 1: /* relu backward: x = y, g = dy */
        if (j->accum)
            for (size_t i = b; i < e; i++)
                y[i] += x[i] > 0.0f ? g[i] : 0.0f;
        else
            for (size_t i = b; i < e; i++)
                y[i] = x[i] > 0.0f ? g[i] : 0.0f;
        break;
    case 2: /* add */
        for (size_t i = b; i < e; i++)
            y[i] = x[i] + g[i];
        break;
    case 3: /* copy or accumulate */
        if (j->accum)
            for (size_t i = b; i < e; i++)
                y[i] += x[i];
        else
            memcpy(y + b, x + b, sizeof(float) * (e - b));
        break;
    case 4: /* add + relu */
        for (size_t i = b; i < e; i++) {
            float v = x[i] + g[i];
            y[i] = v > 0.0f ? v : 0.0f;
        }
        break;
    case 5: { /* relu backward into two gradients (x = relu output, g = dy) */
        float *y2 = j->y2;
        const int a1 = j->accum, a2 = j->accum2;
        if (!y2) { /* one of them only: op 1 */
            ew_job_t one = *j;
            one.op = 1;
            ew_task(&one, tid, nt);
            break;
        }
        for (size_t i = b; i < e; i++) {
            float v = x[i] > 0.0f ? g[i] : 0.0f;
            y[i] = a1 ? y[i] + v : v;
            y2[i] = a2 ? y2[i] + v : v;
        }
        break;
    }
    }
}

static void ew_run(ew_job_t *j)
{
    if (j->n < 4096)
        ew_task(j, 0, 1);
    else
        loom__parallel(ew_task, j);
}

void loom__add_relu_forward(size_t n, const float *a, const float *b, float *y)
{
    ew_job_t j = {.op = 4, .n = n, .a = a, .b = b, .y = y};
    ew_run(&j);
}

void loom__relu_backward2(size_t n, const float *y, const float *dy, float *d0, int acc0, float *d1,
                          int acc1)
{
    if (!d0) /* the one wanted, if any, as d0 */
        d0 = d1, acc0 = acc1, d1 = NULL;
    if (!d0)
        return;
    ew_job_t j = {.op = 5, .n = n, .a = y, .b = dy, .y = d0, .accum = acc0, .y2 = d1, .accum2 = acc1};
    ew_run(&j);
}

static void ew(int op, size_t n, const float *a, const float *b, float *y, int accum)
{
    ew_job_t j = {op, accum, n, a, b, y, NULL, 0};
    if (n < 4096)
        ew_task(&j, 0, 1);
    else
        loom__parallel(ew_task, &j);
}

void loom__copy_or_add(size_t n, const float *x, float *y, int accum) { ew(3, n, x, NULL, y, accum); }

void loom_relu_forward(size_t n, const float *x, float *y) { ew(0, n, x, NULL, y, 0); }

void loom_relu_backward(size_t n, const float *y, const float *dy, float *dx, int accum_dx)
{
    ew(1, n, y, dy, dx, accum_dx);
}

void loom_sigmoid_forward(size_t n, const float *x, float *y)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        y[i] = v >= 0.0f ? 1.0f / (1.0f + expf(-v)) : expf(v) / (1.0f + expf(v));
    }
}

void loom_sigmoid_backward(size_t n, const float *y, const float *dy, float *dx, int accum_dx)
{
    for (size_t i = 0; i < n; i++)
        put(&dx[i], dy[i] * y[i] * (1.0f - y[i]), accum_dx);
}

void loom_add_forward(size_t n, const float *a, const float *b, float *y) { ew(2, n, a, b, y, 0); }

/* --------------------------------------------------------------- pooling */
static int pool_out(int in, int k, int s, int p) { return loom_conv_out_size(in, k, s, p, 1); }

/* Input rows [*h0, *h1) and columns [*w0, *w1) under output (oh, ow)'s window,
 * clipped to the input (the padding holds nothing).  The window walks of the
 * three pooling kernels below all go through it. */
static void pool_window(const loom_pool_desc_t *d, loom_shape_t s, int oh, int ow, int *h0, int *h1,
                        int *w0, int *w1)
{
    int hs = oh * d->stride_h - d->pad_h, ws = ow * d->stride_w - d->pad_w;
    *h0 = hs < 0 ? 0 : hs;
    *h1 = hs + d->kh < s.h ? hs + d->kh : s.h;
    *w0 = ws < 0 ? 0 : ws;
    *w1 = ws + d->kw < s.w ? ws + d->kw : s.w;
}

typedef struct {
    const loom_pool_desc_t *d;
    loom_shape_t s;
    const float *x;
    float *y;
    int32_t *argmax;
    int ho, wo;
} maxpool_job_t;

/* Planes [b, e) of the job: each window scanned in row-major order, the
 * first tap taken and a later one only when strictly greater (so the first
 * maximum wins, as the reference); branch-free selects, the window bounds
 * of a row computed once per output row. */
static void maxpool_task(void *arg, int tid, int nt)
{
    const maxpool_job_t *j = arg;
    const loom_pool_desc_t *d = j->d;
    const loom_shape_t s = j->s;
    const int ho = j->ho, wo = j->wo, W = s.w;
    size_t b, e;
    loom__range((size_t)s.n * s.c, tid, nt, &b, &e);
    for (size_t nc = b; nc < e; nc++) {
        const float *xc = j->x + nc * s.h * s.w;
        float *yc = j->y + nc * ho * wo;
        int32_t *ac = j->argmax + nc * ho * wo;
        for (int oh = 0; oh < ho; oh++) {
            int h0, h1, w0, w1;
            pool_window(d, s, oh, 0, &h0, &h1, &w0, &w1);
            for (int ow = 0; ow < wo; ow++) {
                const int ws = ow * d->stride_w - d->pad_w;
                w0 = ws < 0 ? 0 : ws;
                w1 = ws + d->kw < W ? ws + d->kw : W;
                float *yo = &yc[oh * wo + ow];
                int32_t *ao = &ac[oh * wo + ow];
                if (h0 >= h1 || w0 >= w1) { /* the window holds only padding */
                    *yo = 0.0f;
                    *ao = -1;
                    continue;
                }
                float best = xc[h0 * W + w0];
                int32_t bi = h0 * W + w0;
                for (int iw = w0 + 1; iw < w1; iw++) {
                    const float v = xc[h0 * W + iw];
                    const int gt = v > best;
                    best = gt ? v : best;
                    bi = gt ? h0 * W + iw : bi;
                }
                for (int ih = h0 + 1; ih < h1; ih++)
                    for (int iw = w0; iw < w1; iw++) {
                        const float v = xc[ih * W + iw];
                        const int gt = v > best;
                        best = gt ? v : best;
                        bi = gt ? ih * W + iw : bi;
                    }
                *yo = best;
                *ao = bi;
            }
        }
    }
}

void loom_maxpool_forward(const loom_pool_desc_t *d, loom_shape_t s, const float *x, float *y,
                          int32_t *argmax)
{
    maxpool_job_t j = {d, s, x, y, argmax, pool_out(s.h, d->kh, d->stride_h, d->pad_h),
                       pool_out(s.w, d->kw, d->stride_w, d->pad_w)};
    loom__parallel(maxpool_task, &j);
}

typedef struct {
    loom_shape_t s;
    const float *dy;
    const int32_t *argmax;
    float *dx;
    int accum, hw_out;
} maxpool_bwd_job_t;

/* Planes [b, e): each output's gradient to its argmax (planes are disjoint). */
static void maxpool_bwd_task(void *arg, int tid, int nt)
{
    const maxpool_bwd_job_t *j = arg;
    const size_t hw = (size_t)j->s.h * j->s.w;
    size_t b, e;
    loom__range((size_t)j->s.n * j->s.c, tid, nt, &b, &e);
    for (size_t nc = b; nc < e; nc++) {
        float *xc = j->dx + nc * hw;
        const float *gc = j->dy + nc * j->hw_out;
        const int32_t *ac = j->argmax + nc * j->hw_out;
        if (!j->accum) memset(xc, 0, sizeof(float) * hw);
        for (int i = 0; i < j->hw_out; i++)
            if (ac[i] >= 0) xc[ac[i]] += gc[i];
    }
}

void loom_maxpool_backward(const loom_pool_desc_t *d, loom_shape_t s, const float *dy,
                           const int32_t *argmax, float *dx, int accum_dx)
{
    const int ho = pool_out(s.h, d->kh, d->stride_h, d->pad_h);
    const int wo = pool_out(s.w, d->kw, d->stride_w, d->pad_w);
    maxpool_bwd_job_t j = {s, dy, argmax, dx, accum_dx, ho * wo};
    loom__parallel(maxpool_bwd_task, &j);
}

void loom_avgpool_forward(const loom_pool_desc_t *d, loom_shape_t s, const float *x, float *y)
{
    const int ho = pool_out(s.h, d->kh, d->stride_h, d->pad_h);
    const int wo = pool_out(s.w, d->kw, d->stride_w, d->pad_w);
    const float inv = 1.0f / (float)(d->kh * d->kw);
    for (size_t nc = 0; nc < (size_t)s.n * s.c; nc++) {
        const float *xc = x + nc * s.h * s.w;
        float *yc = y + nc * ho * wo;
        for (int oh = 0; oh < ho; oh++)
            for (int ow = 0; ow < wo; ow++) {
                float acc = 0.0f;
                int h0, h1, w0, w1;
                pool_window(d, s, oh, ow, &h0, &h1, &w0, &w1);
                for (int ih = h0; ih < h1; ih++)
                    for (int iw = w0; iw < w1; iw++)
                        acc += xc[ih * s.w + iw];
                yc[oh * wo + ow] = acc * inv;
            }
    }
}

void loom_avgpool_backward(const loom_pool_desc_t *d, loom_shape_t s, const float *dy, float *dx,
                           int accum_dx)
{
    const int ho = pool_out(s.h, d->kh, d->stride_h, d->pad_h);
    const int wo = pool_out(s.w, d->kw, d->stride_w, d->pad_w);
    const float inv = 1.0f / (float)(d->kh * d->kw);
    if (!accum_dx)
        memset(dx, 0, sizeof(float) * loom_shape_count(s));
    for (size_t nc = 0; nc < (size_t)s.n * s.c; nc++) {
        float *xc = dx + nc * s.h * s.w;
        const float *gc = dy + nc * ho * wo;
        for (int oh = 0; oh < ho; oh++)
            for (int ow = 0; ow < wo; ow++) {
                float g = gc[oh * wo + ow] * inv;
                int h0, h1, w0, w1;
                pool_window(d, s, oh, ow, &h0, &h1, &w0, &w1);
                for (int ih = h0; ih < h1; ih++)
                    for (int iw = w0; iw < w1; iw++)
                        xc[ih * s.w + iw] += g;
            }
    }
}

void loom_gap_forward(loom_shape_t s, const float *x, float *y)
{
    const size_t HW = (size_t)s.h * s.w;
    const float inv = 1.0f / (float)HW;
    for (size_t nc = 0; nc < (size_t)s.n * s.c; nc++) {
        const float *xc = x + nc * HW;
        float acc = 0.0f;
        for (size_t p = 0; p < HW; p++)
            acc += xc[p];
        y[nc] = acc * inv;
    }
}

void loom_gap_backward(loom_shape_t s, const float *dy, float *dx, int accum_dx)
{
    const size_t HW = (size_t)s.h * s.w;
    const float inv = 1.0f / (float)HW;
    for (size_t nc = 0; nc < (size_t)s.n * s.c; nc++) {
        float g = dy[nc] * inv, *xc = dx + nc * HW;
        if (accum_dx)
            for (size_t p = 0; p < HW; p++)
                xc[p] += g;
        else
            for (size_t p = 0; p < HW; p++)
                xc[p] = g;
    }
}

/* -------------------------------------------------------- fully connected */
void loom_fc_forward(int n, int in, int out, const float *x, const float *weight,
                     const float *bias, float *y)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, weight, in, 0.0f,
                y, out);
    if (bias)
        for (int i = 0; i < n; i++)
            for (int o = 0; o < out; o++)
                y[(size_t)i * out + o] += bias[o];
}

void loom_fc_backward(int n, int in, int out, const float *x, const float *weight,
                      const float *dy, float *dx, int accum_dx, float *dweight, float *dbias)
{
    if (dweight)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy, out, x, in, 1.0f,
                    dweight, in);
    if (dbias)
        for (int i = 0; i < n; i++)
            for (int o = 0; o < out; o++)
                dbias[o] += dy[(size_t)i * out + o];
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dy, out, weight, in,
                    accum_dx ? 1.0f : 0.0f, dx, in);
}

/* ---------------------------------------------------------------- dropout */
void loom_dropout_forward(size_t n, float p, loom_rng_t *rng, const float *x, float *y,
                          float *mask)
{
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    for (size_t i = 0; i < n; i++) {
        float m = loom_rng_uniform(rng) < p ? 0.0f : scale;
        mask[i] = m;
        y[i] = x[i] * m;
    }
}

void loom_dropout_backward(size_t n, const float *mask, const float *dy, float *dx, int accum_dx)
{
    for (size_t i = 0; i < n; i++)
        put(&dx[i], dy[i] * mask[i], accum_dx);
}

/* ---------------------------------------------------------- pixel shuffle */
/* y[n][c][h*r+i][w*r+j] = x[n][c*r*r + i*r + j][h][w] */
void loom_pixel_shuffle_forward(loom_shape_t in, int r, const float *x, float *y)
{
    const int co = in.c / (r * r), H = in.h, W = in.w, Wo = W * r;
    for (int n = 0; n < in.n; n++)
        for (int c = 0; c < co; c++)
            for (int i = 0; i < r; i++)
                for (int j = 0; j < r; j++) {
                    const float *xc = x + (((size_t)n * in.c) + (size_t)c * r * r + i * r + j) * H * W;
                    float *yc = y + ((size_t)n * co + c) * (size_t)H * r * Wo;
                    for (int h = 0; h < H; h++)
                        for (int w = 0; w < W; w++)
                            yc[(size_t)(h * r + i) * Wo + w * r + j] = xc[h * W + w];
                }
}

void loom_pixel_shuffle_backward(loom_shape_t in, int r, const float *dy, float *dx, int accum_dx)
{
    const int co = in.c / (r * r), H = in.h, W = in.w, Wo = W * r;
    for (int n = 0; n < in.n; n++)
        for (int c = 0; c < co; c++)
            for (int i = 0; i < r; i++)
                for (int j = 0; j < r; j++) {
                    float *xc = dx + (((size_t)n * in.c) + (size_t)c * r * r + i * r + j) * H * W;
                    const float *yc = dy + ((size_t)n * co + c) * (size_t)H * r * Wo;
                    for (int h = 0; h < H; h++)
                        for (int w = 0; w < W; w++)
                            put(&xc[h * W + w], yc[(size_t)(h * r + i) * Wo + w * r + j], accum_dx);
                }
}

void loom_scale_forward(size_t n, float alpha, const float *x, float *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = alpha * x[i];
}

void loom_scale_backward(size_t n, float alpha, const float *dy, float *dx, int accum_dx)
{
    if (accum_dx)
        for (size_t i = 0; i < n; i++)
            dx[i] += alpha * dy[i];
    else
        for (size_t i = 0; i < n; i++)
            dx[i] = alpha * dy[i];
}
