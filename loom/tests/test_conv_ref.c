/*
 * test_conv_ref.c - the im2col + sgemm convolution against a direct naive
 * loop (in double) for many shapes: strides, paddings, odd sizes, groups,
 * dilation, bias, 1x1 fast path, stride-1 data gradients by correlation, and
 * batches that span several packed column chunks (and conv_shift.c's chunks
 * of samples read in place); the 3x3 stride-1 shapes
 * also under each algorithm setting (im2col, Winograd F(4x4,3x3), auto).  Forward output and all
 * three backward gradients, overwriting dx, then accumulating into it, then
 * the weight gradient alone (dx NULL).
 */
#include "harness.h"
#include "loom.h"

#include <string.h>

static void naive(const loom_conv_desc_t *d, int n, int h, int w, const float *x, const float *wt,
                  const float *b, const float *dy, double *y, double *dx, double *dw, double *db)
{
    int ho = loom_conv_out_size(h, d->kh, d->stride_h, d->pad_h, d->dil_h);
    int wo = loom_conv_out_size(w, d->kw, d->stride_w, d->pad_w, d->dil_w);
    int cg = d->cin / d->groups, og = d->cout / d->groups;
    for (int s = 0; s < n; s++)
        for (int co = 0; co < d->cout; co++) {
            int g = co / og;
            for (int oh = 0; oh < ho; oh++)
                for (int ow = 0; ow < wo; ow++) {
                    size_t yi = (((size_t)s * d->cout + co) * ho + oh) * wo + ow;
                    double acc = d->bias ? b[co] : 0.0;
                    double gy = dy[yi];
                    if (d->bias)
                        db[co] += gy;
                    for (int c = 0; c < cg; c++)
                        for (int ki = 0; ki < d->kh; ki++)
                            for (int kj = 0; kj < d->kw; kj++) {
                                int ih = oh * d->stride_h - d->pad_h + ki * d->dil_h;
                                int iw = ow * d->stride_w - d->pad_w + kj * d->dil_w;
                                if (ih < 0 || ih >= h || iw < 0 || iw >= w)
                                    continue;
                                size_t xi = (((size_t)s * d->cin + g * cg + c) * h + ih) * w + iw;
                                size_t wi = (((size_t)co * cg + c) * d->kh + ki) * d->kw + kj;
                                acc += (double)x[xi] * wt[wi];
                                dx[xi] += gy * wt[wi];
                                dw[wi] += gy * x[xi];
                            }
                    y[yi] = acc;
                }
        }
}

static double maxrel(const float *a, const double *b, size_t n)
{
    double num = 0.0, den = 1e-3;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs(a[i] - b[i]));
        den = fmax(den, fabs(b[i]));
    }
    return num / den;
}

static loom_rng_t rng;

static void run(int n, int cin, int cout, int kh, int kw, int sh, int sw, int ph, int pw, int dh,
                int dw_, int g, int bias, int h, int w)
{
    loom_conv_desc_t d = {cin, cout, kh, kw, sh, sw, ph, pw, dh, dw_, g, bias};
    if (loom_conv_check(&d, h, w) != 0) {
        CHECK(0, "shape rejected: %s", loom_last_error());
        return;
    }
    int ho = loom_conv_out_size(h, kh, sh, ph, dh), wo = loom_conv_out_size(w, kw, sw, pw, dw_);
    size_t nx = (size_t)n * cin * h * w, nw = (size_t)cout * (cin / g) * kh * kw;
    size_t ny = (size_t)n * cout * ho * wo;
    float *x = malloc(nx * 4), *wt = malloc(nw * 4), *b = malloc(cout * 4), *y = malloc(ny * 4);
    float *dy = malloc(ny * 4), *dx = malloc(nx * 4), *dwt = calloc(nw, 4), *db = calloc(cout, 4);
    float *ws = calloc(loom_conv_workspace(&d, n, h, w) + 1, 4);
    double *ry = calloc(ny, 8), *rdx = calloc(nx, 8), *rdw = calloc(nw, 8), *rdb = calloc(cout, 8);
    for (size_t i = 0; i < nx; i++) x[i] = loom_rng_normal(&rng);
    for (size_t i = 0; i < nw; i++) wt[i] = loom_rng_normal(&rng);
    for (int i = 0; i < cout; i++) b[i] = loom_rng_normal(&rng);
    for (size_t i = 0; i < ny; i++) dy[i] = loom_rng_normal(&rng);
    for (size_t i = 0; i < nx; i++) dx[i] = 123.0f; /* must be overwritten */
    loom_conv_forward(&d, n, h, w, x, wt, b, y, ws);
    loom_conv_backward(&d, n, h, w, x, wt, dy, dx, 0, dwt, db, ws);
    naive(&d, n, h, w, x, wt, b, dy, ry, rdx, rdw, rdb);
    double ey = maxrel(y, ry, ny), ex = maxrel(dx, rdx, nx), ew = maxrel(dwt, rdw, nw);
    double eb = bias ? maxrel(db, rdb, cout) : 0.0;
    CHECK(ey < 1e-4 && ex < 1e-4 && ew < 1e-4 && eb < 1e-4,
          "n=%d cin=%d cout=%d k=%dx%d s=%d,%d p=%d,%d d=%d,%d g=%d bias=%d %dx%d: y %.1e dx %.1e "
          "dw %.1e db %.1e", n, cin, cout, kh, kw, sh, sw, ph, pw, dh, dw_, g, bias, h, w, ey, ex, ew, eb);
    /* a second backward adds to everything (accum_dx for dx): twice the reference */
    loom_conv_backward(&d, n, h, w, x, wt, dy, dx, 1, dwt, db, ws);
    for (size_t i = 0; i < nx; i++) rdx[i] *= 2.0;
    for (size_t i = 0; i < nw; i++) rdw[i] *= 2.0;
    for (int i = 0; i < cout; i++) rdb[i] *= 2.0;
    ex = maxrel(dx, rdx, nx), ew = maxrel(dwt, rdw, nw), eb = bias ? maxrel(db, rdb, cout) : 0.0;
    CHECK(ex < 1e-4 && ew < 1e-4 && eb < 1e-4,
          "accumulating: n=%d cin=%d cout=%d k=%dx%d s=%d,%d p=%d,%d d=%d,%d g=%d %dx%d: dx %.1e "
          "dw %.1e db %.1e", n, cin, cout, kh, kw, sh, sw, ph, pw, dh, dw_, g, h, w, ex, ew, eb);
    /* without dx (a first layer): the weight gradient alone, three times the reference */
    loom_conv_backward(&d, n, h, w, x, wt, dy, NULL, 0, dwt, NULL, ws);
    for (size_t i = 0; i < nw; i++) rdw[i] *= 1.5;
    ew = maxrel(dwt, rdw, nw);
    CHECK(ew < 1e-4, "no dx: n=%d cin=%d cout=%d k=%dx%d s=%d,%d p=%d,%d d=%d,%d g=%d %dx%d: dw %.1e",
          n, cin, cout, kh, kw, sh, sw, ph, pw, dh, dw_, g, h, w, ew);
    free(x), free(wt), free(b), free(y), free(dy), free(dx), free(dwt), free(db), free(ws);
    free(ry), free(rdx), free(rdw), free(rdb);
}

int main(void)
{
    loom_set_threads(2);
    loom_rng_seed(&rng, 3);
    /* n cin cout kh kw sh sw ph pw dh dw g bias h w */
    run(2, 3, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 8, 8);
    run(2, 3, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 9, 7);
    run(3, 4, 4, 5, 5, 1, 1, 2, 2, 1, 1, 1, 1, 11, 13);
    run(1, 2, 3, 7, 7, 2, 2, 3, 3, 1, 1, 1, 0, 15, 15);
    run(2, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2, 1, 6, 6);
    run(2, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6, 0, 5, 7);
    run(2, 4, 8, 3, 3, 1, 1, 2, 2, 2, 2, 1, 0, 9, 9);
    run(2, 4, 4, 3, 3, 2, 1, 0, 1, 1, 3, 2, 1, 10, 11);
    run(2, 5, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 7, 5);
    run(2, 5, 6, 1, 1, 2, 2, 0, 0, 1, 1, 1, 0, 7, 5);
    run(3, 4, 6, 2, 3, 3, 2, 0, 1, 1, 1, 1, 1, 13, 9);
    run(2, 2, 2, 3, 3, 1, 1, 0, 0, 1, 1, 1, 0, 3, 3);
    run(2, 3, 3, 4, 4, 1, 1, 3, 3, 1, 1, 1, 0, 2, 2);   /* kernel larger than input, padded */
    run(6, 3, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 32, 32); /* several packed chunks */
    run(70, 2, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 8, 8);  /* several chunks, partial last */
    run(5, 8, 16, 3, 3, 2, 2, 1, 1, 1, 1, 4, 1, 12, 12);
    run(2, 16, 16, 1, 1, 1, 1, 0, 0, 1, 1, 4, 0, 5, 5); /* grouped 1x1 */
    /* stride 1: data gradient by correlation with the flipped kernel */
    run(1, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 28, 28);   /* one sample: sgemm into dx */
    run(9, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 7, 7);       /* several packed, 2 threads */
    run(3, 4, 6, 3, 3, 1, 1, 0, 0, 1, 1, 1, 0, 10, 12);     /* unpadded: dx larger than dy */
    run(3, 4, 6, 3, 5, 1, 1, 1, 2, 1, 1, 1, 1, 9, 10);      /* non-square kernel */
    run(3, 4, 4, 3, 3, 1, 1, 3, 1, 2, 1, 2, 0, 8, 9);       /* dilation, grouped */
    run(2, 3, 4, 1, 1, 1, 1, 1, 0, 1, 1, 1, 0, 5, 6);       /* pad > dil*(k-1): col2im */
    run(2, 16, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 5, 5);     /* pointwise */
    /* conv_gemm.c's kernel takes weights of at most 128 x 1152 (K <= 1152),
     * cblas_sgemm the rest: both sides of the limit, forward and dx */
    run(3, 128, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 5, 6);     /* K = 1152: the kernel */
    run(3, 129, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 5, 6);     /* K = 1161: sgemm forward */
    run(2, 9, 130, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 4, 7);     /* dx K = 1170: sgemm */
    run(2, 64, 131, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 4, 4);    /* 131 x 576 weights: sgemm */
    run(2, 16, 129, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 6, 6);    /* 129 x 144 weights: sgemm */
    /* conv_shift.c (3x3, stride 1, padding 1): samples in place where h*w is a
     * multiple of 16, several chunks of 4 per thread and a partial last one;
     * packed samples elsewhere; stride 2 (forward and weight gradient from
     * the input's phases); one thread (the weight gradient added straight
     * into dweight) and two */
    run(11, 3, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 28, 28);
    run(40, 2, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 4, 4);
    run(21, 5, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 28, 28); /* stride 2 on even sizes: phases */
    run(3, 4, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 8, 10);
    loom_set_threads(1);
    run(11, 3, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 28, 28);
    run(9, 7, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 7, 7);
    run(21, 5, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 14, 14);
    loom_set_threads(2);
    /* 3x3 stride 1 under each algorithm setting: im2col + sgemm, and
     * Winograd F(4x4, 3x3) (forward, dx by the flipped kernel, dW in the
     * transformed domain) against the same direct reference: paddings 0, 1
     * and 2 (the data gradient's padding is 2 - p), odd and non-square
     * sizes, outputs not a multiple of the 4x4 tile, batch 1, channel counts
     * not multiples of anything, rows of more than 16 tiles, batches over
     * several chunks and both threads, bias */
    static const int wshapes[][8] = {
        /* n cin cout ph pw bias h w */
        {1, 1, 1, 1, 1, 0, 1, 1},     {1, 3, 2, 0, 0, 0, 3, 3},     {2, 3, 5, 0, 0, 1, 13, 11},
        {1, 5, 7, 1, 1, 1, 9, 6},     {3, 4, 6, 2, 2, 0, 9, 10},    {2, 6, 3, 1, 2, 1, 7, 12},
        {2, 17, 33, 1, 1, 1, 11, 13}, {1, 33, 17, 1, 1, 0, 28, 28}, {2, 3, 4, 1, 1, 0, 70, 67},
        {2, 2, 3, 0, 1, 1, 66, 5},    {20, 8, 8, 1, 1, 0, 14, 14},  {5, 40, 36, 1, 1, 1, 24, 25},
    };
    static const loom_conv_algo_t algos[] = {LOOM_CONV_WINOGRAD, LOOM_CONV_IM2COL, LOOM_CONV_AUTO};
    for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++) {
        loom_conv_set_algo(algos[a]);
        for (size_t i = 0; i < sizeof wshapes / sizeof wshapes[0]; i++) {
            const int *q = wshapes[i];
            loom_conv_desc_t d = {q[1], q[2], 3, 3, 1, 1, q[3], q[4], 1, 1, 1, q[5]};
            int want = algos[a] == LOOM_CONV_WINOGRAD ? 3 : algos[a] == LOOM_CONV_IM2COL ? 0 : -1;
            int got = loom_conv_winograd_passes(&d, q[0], q[6], q[7]);
            CHECK(want < 0 || got == want, "setting %d: winograd passes %d, expected %d", (int)algos[a],
                  got, want);
            run(q[0], q[1], q[2], 3, 3, 1, 1, q[3], q[4], 1, 1, 1, q[5], q[6], q[7]);
        }
    }
    /* Winograd is never used where it does not apply */
    loom_conv_set_algo(LOOM_CONV_WINOGRAD);
    static const loom_conv_desc_t nw[] = {
        {4, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0}, {4, 4, 3, 3, 1, 1, 2, 2, 2, 2, 1, 0},
        {4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0}, {4, 4, 5, 5, 1, 1, 2, 2, 1, 1, 1, 0},
        {4, 4, 3, 3, 1, 1, 3, 3, 1, 1, 1, 0}, {4, 4, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof nw / sizeof nw[0]; i++)
        CHECK(loom_conv_winograd_passes(&nw[i], 2, 9, 9) == 0, "winograd chosen for shape %zu", i);
    run(2, 4, 4, 3, 3, 1, 1, 3, 3, 1, 1, 1, 0, 6, 7); /* padding 3: im2col even when forced */
    loom_conv_set_algo(LOOM_CONV_AUTO);
    CHECK(loom_conv_get_algo() == LOOM_CONV_AUTO, "algorithm setting not restored");
    /* invalid shapes are refused, not crashed on */
    loom_conv_desc_t bad = {3, 4, 3, 3, 1, 1, 0, 0, 1, 1, 2, 0};
    CHECK(loom_conv_check(&bad, 8, 8) < 0, "groups not dividing channels accepted");
    loom_conv_desc_t big = {3, 4, 9, 9, 1, 1, 0, 0, 1, 1, 1, 0};
    CHECK(loom_conv_check(&big, 8, 8) < 0, "kernel larger than input accepted");
    return t_done();
}
