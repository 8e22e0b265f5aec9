/*
 * test_conv_shift.c - conv_shift.c's implicit-GEMM kernels against plain
 * loops in double: loom__shift_gemm (the forward / data-gradient product)
 * and loom__shift_dw (the weight gradient) on images of 1x1 to 28x28
 * positions, both as one segment per sample (P a multiple of 16) and as
 * several samples packed in one segment (P = 1, 6, 49, 196: vectors that
 * straddle samples), row counts that are not multiples of the 8-row tile
 * and output-channel counts that are not multiples of the 3-channel tile,
 * column counts that end in a partial 48-column block, channel and segment
 * strides wider than the data, output rows with a stride wider than P, and
 * accumulation (out and dw added to); and stride 2 through the input's
 * phases (loom__shift_phases) against the strided convolution written out.
 * Also checks that nothing outside the named outputs is written.  Skipped (77) where the kernels are not built
 * (no AVX-512).
 */
#include "../src/internal.h"
#include "harness.h"

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffffff) / 16777216.0f - 0.5f;
}

/* x[c][j + delta_t] of segment data at column j (whole samples of h x w),
 * zero where the shifted position leaves the sample's image. */
static double tap(const float *seg, size_t ld, int c, size_t j, int t, int h, int w)
{
    size_t P = (size_t)h * w, p = j % P;
    int oh = (int)(p / (size_t)w) + t / 3 - 1, ow = (int)(p % (size_t)w) + t % 3 - 1;
    if (oh < 0 || oh >= h || ow < 0 || ow >= w)
        return 0.0;
    return seg[(size_t)c * ld + (j - p) + (size_t)oh * w + ow];
}

/* M output rows from C input channels, m samples of h x w in nseg segments
 * (m / nseg samples each); ld, gs, rs, ss widened by pad. */
static void one(int M, int C, int h, int w, int m, int nseg, size_t pad, int accum, uint64_t seed)
{
    const size_t P = (size_t)h * w, L = (size_t)(m / nseg) * P, ld = L + pad;
    const size_t gs = (size_t)C * ld + pad, rs = P + pad, ss = (size_t)M * rs + pad;
    const int K = C * 9;
    float *wt = malloc(sizeof(float) * (size_t)M * K);
    float *wp = malloc(sizeof(float) * loom__gemm_wpack_floats(M, K));
    float *src = malloc(sizeof(float) * gs * (size_t)nseg);
    const size_t gdy = (size_t)M * ld + pad; /* dy: M rows per segment, ld apart */
    float *dy = malloc(sizeof(float) * gdy * (size_t)nseg);
    float *out = malloc(sizeof(float) * ss * (size_t)m), *init = malloc(sizeof(float) * ss * (size_t)m);
    float *dw = malloc(sizeof(float) * (size_t)M * K), *dw0 = malloc(sizeof(float) * (size_t)M * K);
    uint16_t *mt = malloc(sizeof(uint16_t) * loom__shift_mask_count(L));
    if (!wt || !wp || !src || !dy || !out || !init || !dw || !dw0 || !mt) {
        CHECK(0, "out of memory");
        return;
    }
    for (size_t i = 0; i < (size_t)M * K; i++)
        wt[i] = frand(&seed), dw[i] = dw0[i] = accum ? frand(&seed) : 0.0f;
    for (size_t i = 0; i < gs * (size_t)nseg; i++)
        src[i] = frand(&seed);
    for (size_t i = 0; i < gdy * (size_t)nseg; i++)
        dy[i] = frand(&seed);
    for (size_t i = 0; i < ss * (size_t)m; i++)
        init[i] = out[i] = frand(&seed);
    loom__taps_t tp;
    loom__shift_taps(1, w, 0, &tp);
    loom__shift_masks(&tp, h, w, L, mt);
    loom__gemm_pack_w(M, K, wt, (size_t)K, wp);
    loom__shift_gemm(M, C, &tp, wp, mt, src, ld, gs, nseg, L, P, out, ss, rs, accum);
    loom__shift_dw(M, C, &tp, mt, dy, ld, gdy, src, ld, gs, nseg, L, dw);

    double err = 0.0, big = 1e-30;
    int untouched = 1;
    for (int s = 0; s < m; s++) {
        int g = s / (m / nseg);
        size_t j0 = (size_t)(s % (m / nseg)) * P;
        for (size_t i = 0; i < ss; i++) {
            size_t r = i / rs, p = i % rs;
            float got = out[(size_t)s * ss + i], was = init[(size_t)s * ss + i];
            if (r >= (size_t)M || p >= P) {
                untouched &= got == was;
                continue;
            }
            double ref = accum ? was : 0.0;
            for (int c = 0; c < C; c++)
                for (int t = 0; t < 9; t++)
                    ref += (double)wt[(size_t)r * K + c * 9 + t] *
                           tap(src + (size_t)g * gs, ld, c, j0 + p, t, h, w);
            err = fmax(err, fabs(got - ref));
            big = fmax(big, fabs(ref));
        }
    }
    CHECK(err / big < 1e-5, "gemm M=%d C=%d %dx%d m=%d nseg=%d pad=%zu accum=%d: error %.2g of %.2g",
          M, C, h, w, m, nseg, pad, accum, err, big);
    CHECK(untouched, "gemm M=%d C=%d %dx%d m=%d: wrote outside its rows", M, C, h, w, m);

    err = 0.0, big = 1e-30;
    for (int co = 0; co < M; co++)
        for (int c = 0; c < C; c++)
            for (int t = 0; t < 9; t++) {
                double ref = dw0[((size_t)co * C + c) * 9 + t];
                for (int g = 0; g < nseg; g++)
                    for (size_t j = 0; j < L; j++)
                        ref += (double)dy[(size_t)g * gdy + (size_t)co * ld + j] *
                               tap(src + (size_t)g * gs, ld, c, j, t, h, w);
                err = fmax(err, fabs(dw[((size_t)co * C + c) * 9 + t] - ref));
                big = fmax(big, fabs(ref));
            }
    CHECK(err / big < 1e-5, "dw cout=%d cin=%d %dx%d m=%d nseg=%d pad=%zu accum=%d: error %.2g of %.2g",
          M, C, h, w, m, nseg, pad, accum, err, big);
    free(wt), free(wp), free(src), free(dy), free(out), free(init), free(dw), free(dw0), free(mt);
}

/* Stride 2: m samples of C x 2h x 2w, their phases (loom__shift_phases)
 * read as one segment; the output h x w against the strided convolution
 * written out (input row 2*oh + ki - 1, column 2*ow + kj - 1). */
static void one2(int M, int C, int h, int w, int m, int accum, uint64_t seed)
{
    const int H = 2 * h, W = 2 * w, K = C * 9;
    const size_t P = (size_t)h * w, Lq = (size_t)m * P, HW = (size_t)H * W, xs = (size_t)C * HW + 3;
    float *x = malloc(sizeof(float) * xs * (size_t)m), *xq = malloc(sizeof(float) * (size_t)C * 4 * Lq);
    float *wt = malloc(sizeof(float) * (size_t)M * K);
    float *wp = malloc(sizeof(float) * loom__gemm_wpack_floats(M, K));
    float *out = malloc(sizeof(float) * (size_t)M * P * m), *init = malloc(sizeof(float) * (size_t)M * P * m);
    float *dy = malloc(sizeof(float) * (size_t)M * Lq), *dw = malloc(sizeof(float) * (size_t)M * K);
    float *dw0 = malloc(sizeof(float) * (size_t)M * K);
    uint16_t *mt = malloc(sizeof(uint16_t) * loom__shift_mask_count(Lq));
    if (!x || !xq || !wt || !wp || !out || !init || !dy || !dw || !dw0 || !mt) {
        CHECK(0, "out of memory");
        return;
    }
    for (size_t i = 0; i < xs * (size_t)m; i++)
        x[i] = frand(&seed);
    for (size_t i = 0; i < (size_t)M * K; i++)
        wt[i] = frand(&seed), dw[i] = dw0[i] = accum ? frand(&seed) : 0.0f;
    for (size_t i = 0; i < (size_t)M * P * m; i++)
        init[i] = out[i] = frand(&seed);
    for (size_t i = 0; i < (size_t)M * Lq; i++)
        dy[i] = frand(&seed);
    loom__taps_t tp;
    loom__shift_phases(x, xs, C, m, H, W, xq, Lq);
    loom__shift_taps(2, w, Lq, &tp);
    loom__shift_masks(&tp, h, w, Lq, mt);
    loom__gemm_pack_w(M, K, wt, (size_t)K, wp);
    loom__shift_gemm(M, C, &tp, wp, mt, xq, 4 * Lq, 0, 1, Lq, P, out, (size_t)M * P, P, accum);
    loom__shift_dw(M, C, &tp, mt, dy, Lq, 0, xq, 4 * Lq, 0, 1, Lq, dw);
    double ey = 0.0, by = 1e-30, ew = 0.0, bw = 1e-30;
    for (int co = 0; co < M; co++)
        for (int c = 0; c < C; c++)
            for (int t = 0; t < 9; t++) {
                double ref = dw0[((size_t)co * C + c) * 9 + t];
                for (int s = 0; s < m; s++)
                    for (size_t p = 0; p < P; p++) {
                        int ih = 2 * (int)(p / (size_t)w) + t / 3 - 1, iw = 2 * (int)(p % (size_t)w) + t % 3 - 1;
                        if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                            ref += (double)dy[(size_t)co * Lq + (size_t)s * P + p] *
                                   x[(size_t)s * xs + (size_t)c * HW + (size_t)ih * W + iw];
                    }
                ew = fmax(ew, fabs(dw[((size_t)co * C + c) * 9 + t] - ref));
                bw = fmax(bw, fabs(ref));
            }
    for (int s = 0; s < m; s++)
        for (int r = 0; r < M; r++)
            for (size_t p = 0; p < P; p++) {
                size_t o = ((size_t)s * M + r) * P + p;
                double ref = accum ? init[o] : 0.0;
                for (int c = 0; c < C; c++)
                    for (int t = 0; t < 9; t++) {
                        int ih = 2 * (int)(p / (size_t)w) + t / 3 - 1, iw = 2 * (int)(p % (size_t)w) + t % 3 - 1;
                        if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                            ref += (double)wt[(size_t)r * K + c * 9 + t] *
                                   x[(size_t)s * xs + (size_t)c * HW + (size_t)ih * W + iw];
                    }
                ey = fmax(ey, fabs(out[o] - ref));
                by = fmax(by, fabs(ref));
            }
    CHECK(ey / by < 1e-5, "stride 2 gemm M=%d C=%d %dx%d m=%d accum=%d: error %.2g of %.2g", M, C, H,
          W, m, accum, ey, by);
    CHECK(ew / bw < 1e-5, "stride 2 dw M=%d C=%d %dx%d m=%d accum=%d: error %.2g of %.2g", M, C, H, W,
          m, accum, ew, bw);
    free(x), free(xq), free(wt), free(wp), free(out), free(init), free(dy), free(dw), free(dw0), free(mt);
}

int main(void)
{
    if (!loom__gemm_wb_available()) {
        printf("conv_shift.c's kernels are not built here (no AVX-512): skipped\n");
        return 77;
    }
    /* M C h w m nseg: nseg == m is one sample per segment */
    static const int shapes[][6] = {
        {16, 16, 28, 28, 2, 2}, {32, 32, 14, 14, 3, 1}, {64, 64, 7, 7, 5, 1}, {16, 1, 28, 28, 1, 1},
        {1, 1, 1, 1, 3, 1},     {3, 2, 2, 3, 5, 1},     {13, 5, 4, 4, 3, 3},  {17, 7, 8, 2, 2, 2},
        {9, 4, 5, 7, 4, 1},     {2, 3, 1, 16, 2, 2},    {24, 3, 6, 8, 7, 7},  {5, 11, 3, 1, 9, 1},
        {8, 8, 16, 4, 1, 1},
    };
    uint64_t seed = 1;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int accum = 0; accum < 2; accum++) {
            const int *q = shapes[i];
            one(q[0], q[1], q[2], q[3], q[4], q[5], 0, accum, seed++);
            one(q[0], q[1], q[2], q[3], q[4], q[5], 21, accum, seed++);
        }
    /* stride 2: M C h w (output) m */
    static const int shapes2[][5] = {
        {32, 16, 14, 14, 3}, {64, 32, 7, 7, 4}, {1, 1, 1, 1, 2}, {5, 3, 3, 2, 5}, {17, 7, 4, 9, 2},
    };
    for (size_t i = 0; i < sizeof shapes2 / sizeof shapes2[0]; i++)
        for (int accum = 0; accum < 2; accum++) {
            const int *q = shapes2[i];
            one2(q[0], q[1], q[2], q[3], q[4], accum, seed++);
        }
    return t_done();
}
