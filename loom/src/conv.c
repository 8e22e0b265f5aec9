/*
 * conv.c - 2-D convolution (stride, padding, dilation, groups, optional bias)
 * as im2col + cblas_sgemm.
 *
 * Cost (per sample, forward): 2 * cout * (cin/groups) * kh * kw * ho * wo
 * FLOPs in sgemm, plus an im2col copy of (cin*kh*kw) * ho*wo floats.
 * Backward: twice the forward FLOPs (weight gradient and data gradient).
 * Stride 1 with dx wanted (pad <= dil*(k-1), not the ungrouped 1x1 fast path
 * of is_pointwise): one im2col of dy, which
 * feeds both products (dx_by_correlation, bwd_task); otherwise one im2col of
 * x and, for dx, one col2im.
 *
 * Several samples are packed side by side in one column matrix (K rows,
 * nb*P columns) so that the sgemm is wide enough on small images; a 1x1
 * stride-1 unpadded ungrouped convolution skips im2col and multiplies the
 * input directly.  Where AVX-512 is available, the two weights-times-columns
 * products (forward, and dx by correlation) run in conv_gemm.c's kernel,
 * which reads the column matrix in place and writes each sample's rows
 * directly (no packing copy of the column matrix, no unpacking of the
 * output); the weight gradient stays with cblas_sgemm.  3x3 stride-1
 * convolutions with padding 1 (use_shift) write no column matrix at all:
 * conv_shift.c reads the shifted input in place for the forward, the data
 * gradient (on dy, with the flipped weights) and the weight gradient.
 */
#include "internal.h"

#include <cblas.h>

/* Columns of one packed sgemm (per thread).  On ResNet-20 (28x28, batch 128,
 * 2 threads) 512 and 784 ran 4-6% faster than 1024 and 256 (alternating
 * runs on the shared 2-core VM): the column matrix of 64 channels at 7x7
 * (576 rows) then stays within the 2 MB L2, and 28x28 images (784 columns)
 * are multiplied one per sgemm, straight into y. */
#define COLS_TARGET 512
/* Where loom__gemm_wb multiplies (use_wb) and images are under 512 pixels,
 * 1568 columns: measured 4-7% faster per forward call than 512 on
 * ResNet-20's 14x14 and 7x7 layers (one thread, CPU time, alternating
 * builds), backward about even; the kernel streams the column matrix from
 * L2 in 48-column blocks, so it does not need the 512-column chunk to stay
 * there. */
#define COLS_TARGET_WB 1568
/* The implicit-GEMM path (conv_shift.c) on images of a multiple of 16
 * pixels reads the samples in place, one segment each; its weight gradient
 * sums over a chunk's columns in registers and reduces across lanes once per
 * chunk, so chunks of at least 3136 columns (4 samples at 28x28) keep that
 * reduction small. */
#define COLS_TARGET_SEG 3136
#define COL_MAX_FLOATS (4u << 20) /* cap of one thread's column buffer */

int loom_conv_out_size(int in, int k, int stride, int pad, int dil)
{
    int span = dil * (k - 1) + 1;
    if (stride <= 0 || in + 2 * pad < span)
        return 0;
    return (in + 2 * pad - span) / stride + 1;
}

int loom_conv_check(const loom_conv_desc_t *d, int h, int w)
{
    if (d->cin <= 0 || d->cout <= 0 || d->kh <= 0 || d->kw <= 0 || d->groups <= 0)
        return loom_error(LOOM_ERR_INVALID, "conv: channels, kernel and groups must be positive");
    if (d->cin % d->groups || d->cout % d->groups)
        return loom_error(LOOM_ERR_INVALID, "conv: groups (%d) must divide cin (%d) and cout (%d)",
                          d->groups, d->cin, d->cout);
    if (d->stride_h <= 0 || d->stride_w <= 0 || d->dil_h <= 0 || d->dil_w <= 0 ||
        d->pad_h < 0 || d->pad_w < 0)
        return loom_error(LOOM_ERR_INVALID, "conv: stride and dilation must be positive, padding >= 0");
    if (loom_conv_out_size(h, d->kh, d->stride_h, d->pad_h, d->dil_h) <= 0 ||
        loom_conv_out_size(w, d->kw, d->stride_w, d->pad_w, d->dil_w) <= 0)
        return loom_error(LOOM_ERR_INVALID, "conv: kernel %dx%d (dilation %d) larger than padded input %dx%d",
                          d->kh, d->kw, d->dil_h, h, w);
    return LOOM_OK;
}

static int is_pointwise(const loom_conv_desc_t *d)
{
    return d->kh == 1 && d->kw == 1 && d->stride_h == 1 && d->stride_w == 1 && d->pad_h == 0 &&
           d->pad_w == 0 && d->groups == 1;
}

/* The data gradient of a stride-1 convolution is itself a stride-1
 * convolution: dy, zero-padded by dil*(k-1) - pad, correlated with the
 * spatially flipped kernel with input and output channels swapped.  Computed
 * that way (im2col of dy, one sgemm writing dx) it needs no col2im
 * scatter-add and no zeroing of dx.  Strided convolutions keep col2im. */
static int dx_by_correlation(const loom_conv_desc_t *d)
{
    return !is_pointwise(d) && d->stride_h == 1 && d->stride_w == 1 &&
           d->pad_h <= d->dil_h * (d->kh - 1) && d->pad_w <= d->dil_w * (d->kw - 1);
}

/* The convolution that maps dy to dx (see dx_by_correlation). */
static loom_conv_desc_t flipped_desc(const loom_conv_desc_t *d)
{
    loom_conv_desc_t t = *d;
    t.cin = d->cout, t.cout = d->cin;
    t.pad_h = d->dil_h * (d->kh - 1) - d->pad_h;
    t.pad_w = d->dil_w * (d->kw - 1) - d->pad_w;
    t.bias = 0;
    return t;
}

/* Samples packed in one column matrix (per thread). */
static int use_wb(int M, int K);
static int use_shift(const loom_conv_desc_t *d, int h, int w);

static int chunk_samples(const loom_conv_desc_t *d, int h, int w, size_t K, size_t P, int n, int nt)
{
    size_t target = P < 512 && use_wb(d->cout / d->groups, (int)K) ? COLS_TARGET_WB : COLS_TARGET;
    if (use_shift(d, h, w))
        target = P % 16 ? COLS_TARGET_WB : COLS_TARGET_SEG;
    size_t nb = (target + P - 1) / P, per = ((size_t)n + nt - 1) / nt;
    if (nb * K * P > COL_MAX_FLOATS)
        nb = COL_MAX_FLOATS / (K * P);
    if (nb < 1)
        nb = 1;
    if (nb > per)
        nb = per;
    return (int)nb;
}

/* Workspace: a shared part (the flipped weights of dx_by_correlation, or
 * the weights packed for loom__gemm_wb: forward's, or the flipped ones), then
 * one part per thread, laid out as
 *   col   im2col of x, K x nb*P (forward; weight gradient as dy * col^T),
 *         or x of the packed samples, cg x nb*HW (weight gradient as
 *         im2col(dy) * x^T, see bwd_task)
 *   aux   col2im path: W^T dy, K x nb*P; correlation path: the im2col of
 *         dy, cog*kh*kw x nb*HW
 *   dyg   cog x nb*P    dy of the packed samples (weight gradient as
 *                       dy * col^T)
 *   tmp   cog x nb*P (correlation path: at least cg x nb*HW, its dx): sgemm
 *         output of the packed samples
 *   dw    cout*K        private weight gradient (several threads, or the
 *                       flipped layout of bwd_task)
 * (a pointwise convolution uses only dw).  Offsets are in floats. */
typedef struct {
    size_t shared, per_thread, col, aux, dyg, tmp, dw, mask;
    int corr; /* dx_by_correlation: the layout above is the correlation path's */
    int shift; /* use_shift: col and dyg hold x and dy of the packed samples
                  (where P % 16 != 0), mask the masks of conv_shift.c; no aux
                  or tmp; dw in the standard layout */
    int shift2; /* use_shift2: the layout of im2col (for dx), col holding x's
                   phases and dyg the packed dy for the forward and the weight
                   gradient, then mask */
} ws_layout_t;

static size_t round16(size_t f) { return (f + 15) & ~(size_t)15; }

/* Whether the product of an M x K weight matrix with the column matrix runs
 * in loom__gemm_wb: where it is built, and for weights of at most 128 x 1152
 * floats with K <= 1152 (its 48-column blocks of B and the packed weights
 * then stay in L2; measured 85-95 GFLOP/s on one core there against 30-40 for
 * cblas_sgemm, and half of cblas_sgemm's speed on ResNet-18's 256- and
 * 512-channel layers, which keep it). */
static int use_wb(int M, int K)
{
    return loom__gemm_wb_available() && K <= 1152 && (long)M * K <= 128L * 1152;
}

/* The implicit-GEMM path of conv_shift.c: 3x3, stride 1, padding 1,
 * ungrouped, where loom__gemm_wb's size limits hold for the forward and the
 * data-gradient weights. */
static int use_shift(const loom_conv_desc_t *d, int h, int w)
{
    return d->stride_h == 1 && loom__shift_applies(d, h, w) && use_wb(d->cout, d->cin * 9) &&
           use_wb(d->cin, d->cout * 9);
}

/* The same for stride 2 on even sizes (conv_shift.c's phases): forward,
 * weight gradient, and the data gradient phase by phase (at most 4 taps per
 * phase, so loom__gemm_wb's limit on its weights holds where the forward's
 * does). */
static int use_shift2(const loom_conv_desc_t *d, int h, int w)
{
    return d->stride_h == 2 && loom__shift_applies(d, h, w) && use_wb(d->cout, d->cin * 9) &&
           use_wb(d->cin, d->cout * 4);
}

/* Floats of the four phases' packed data-gradient weights (use_shift2),
 * then room for one phase's weights before packing (cin x 4*cout). */
static size_t dx2_pack_floats(const loom_conv_desc_t *d)
{
    return loom__gemm_wpack_floats(d->cin, d->cout * 9) + (size_t)d->cin * d->cout * 4;
}

static ws_layout_t ws_layout(const loom_conv_desc_t *d, int h, int w, size_t K, size_t P, int nb,
                             int nt)
{
    ws_layout_t L = {0}; /* col at offset 0 */
    if (use_shift(d, h, w)) {
        size_t nw = (size_t)d->cout * K, f = 0, N = (size_t)nb * P;
        L.shift = L.corr = 1;
        if (P % 16) { /* packed copies of x and dy */
            L.dyg = f = round16((size_t)d->cin * N);
            f = round16(f + (size_t)d->cout * N);
        }
        L.mask = f;
        f = round16(f + (loom__shift_mask_count(N) + 1) / 2);
        L.dw = f;
        if (nt > 1)
            f += nw;
        L.per_thread = round16(f);
        L.shared = round16(LOOM_MAX(loom__gemm_wpack_floats(d->cout, (int)K),
                                    loom__gemm_wpack_floats(d->cin, d->cout * 9)));
        return L;
    }
    const int corr = L.corr = dx_by_correlation(d);
    size_t nw = (size_t)d->cout * K, cog = (size_t)(d->cout / d->groups);
    size_t cg = (size_t)(d->cin / d->groups), HW = (size_t)h * w, f = 0;
    size_t colf = K * (size_t)nb * P, auxf = colf, tmpf = cog * (size_t)nb * P;
    if (corr) {
        colf = LOOM_MAX(colf, cg * (size_t)nb * HW);
        auxf = LOOM_MAX(auxf, cog * d->kh * d->kw * (size_t)nb * HW);
        tmpf = LOOM_MAX(tmpf, cg * (size_t)nb * HW);
    }
    if (!is_pointwise(d)) {
        L.aux = f = round16(colf);
        L.dyg = f = round16(f + auxf);
        L.tmp = f = round16(f + cog * (size_t)nb * P);
        f = round16(f + tmpf);
    }
    L.dw = f;
    if (nt > 1 || corr)
        f += nw; /* private weight gradient */
    L.per_thread = round16(f);
    L.shared = corr ? round16(nw) : 0;
    if (!is_pointwise(d)) { /* packed weights (wpack_floats) */
        size_t G = (size_t)d->groups, fw = 0, kf = cog * d->kh * d->kw;
        if (use_wb((int)cog, (int)K))
            fw = G * loom__gemm_wpack_floats((int)cog, (int)K);
        if (corr && use_wb((int)cg, (int)kf))
            fw = LOOM_MAX(fw, G * loom__gemm_wpack_floats((int)cg, (int)kf));
        L.shared = round16(LOOM_MAX(L.shared, fw));
    }
    if (use_shift2(d, h, w)) { /* five mask tables: the 3x3 taps, the data gradient's phases */
        L.shift2 = 1;
        L.mask = L.per_thread;
        L.per_thread = round16(L.per_thread + 5 * ((loom__shift_mask_count((size_t)nb * P) + 1) / 2));
        L.shared = LOOM_MAX(L.shared, round16(dx2_pack_floats(d)));
    }
    return L;
}

static _Atomic int conv_algo = LOOM_CONV_AUTO;

void loom_conv_set_algo(loom_conv_algo_t algo) { conv_algo = (int)algo; }
loom_conv_algo_t loom_conv_get_algo(void) { return (loom_conv_algo_t)conv_algo; }

/* LOOM_CONV_AUTO: Winograd where loom_conv_bench measured it faster than
 * im2col + sgemm on this machine (doc/notes/loom_measurements.md): outputs of
 * at least 24x24, and at least 32 channels on the side whose count sizes the
 * sgemms against the transforms (input channels for forward, output
 * channels for backward).  Smaller images and channel counts (ResNet-20,
 * ResNet-18's 14x14 and 7x7 stages) keep im2col, where the transforms cost
 * more than the multiplications they save. */
int loom_conv_winograd_passes(const loom_conv_desc_t *d, int n, int h, int w)
{
    (void)n;
    if (!loom__wino_applies(d))
        return 0;
    switch ((loom_conv_algo_t)conv_algo) {
    case LOOM_CONV_IM2COL: return 0;
    case LOOM_CONV_WINOGRAD: return 3;
    default: break;
    }
    int ho = loom_conv_out_size(h, 3, 1, d->pad_h, 1), wo = loom_conv_out_size(w, 3, 1, d->pad_w, 1);
    if ((long)ho * wo < 24 * 24)
        return 0;
    return (d->cin >= 32 ? 1 : 0) | (d->cout >= 32 ? 2 : 0);
}

size_t loom_conv_workspace(const loom_conv_desc_t *d, int n, int h, int w)
{
    int nt = loom_get_threads();
    int ho = loom_conv_out_size(h, d->kh, d->stride_h, d->pad_h, d->dil_h);
    int wo = loom_conv_out_size(w, d->kw, d->stride_w, d->pad_w, d->dil_w);
    size_t K = (size_t)(d->cin / d->groups) * d->kh * d->kw, P = (size_t)ho * wo;
    ws_layout_t L = ws_layout(d, h, w, K, P, chunk_samples(d, h, w, K, P, n, nt), nt);
    size_t f = L.shared + (size_t)nt * L.per_thread;
    if (loom__wino_applies(d)) /* whichever algorithm the setting picks later */
        f = LOOM_MAX(f, loom__wino_workspace(d, n, h, w, nt));
    return f;
}

typedef struct {
    const loom_conv_desc_t *d;
    int n, h, w, ho, wo, G, cg, cog, nb;
    size_t K, P, HW, nw;
    ws_layout_t L;
    const float *x, *weight, *dy;
    float *y, *dx, *dweight, *dbias, *ws;
    const float *wpack; /* weights packed for loom__gemm_wb (shared workspace), or NULL */
    loom__taps_t taps;  /* use_shift: conv_shift.c's taps (stride 1) */
    loom__taps_t dx2_taps[4]; /* use_shift2: the data gradient's phases */
    size_t dx2_off[4];        /* and their packed weights (shared workspace offsets) */
    int accum_dx;
    int bwd_nt; /* threads that ran backward with private weight gradients */
} conv_job_t;

/* Zeroes o[0..n): n is 0 to 3 in the common cases (the padding columns of
 * one output row), where a memset call costs more than the stores. */
static inline void zero_few(float *o, int n)
{
    switch (n) {
    case 3: o[2] = 0.0f; /* fall through */
    case 2: o[1] = 0.0f; /* fall through */
    case 1: o[0] = 0.0f; /* fall through */
    case 0: break;
    default: memset(o, 0, sizeof(float) * (size_t)n);
    }
}

/* Zeroes columns [c0, c1) of rows [0, nrows) of a matrix of row stride ld;
 * most often one column (3x3 kernels, padding 1). */
static void zero_cols(float *o, int nrows, int ld, int c0, int c1)
{
    if (c1 > c0)
        for (int r = 0; r < nrows; r++)
            zero_few(o + (size_t)r * ld + c0, c1 - c0);
}

/* Column matrix of m samples: rows (c, ki, kj) for the cg channels at x
 * (sample s at x + s*xs), sample s at columns [s*P, (s+1)*P) (P = ho*wo,
 * row stride ld).  The geometry of a row is worked out once for all m
 * samples (7x7 images have 49 columns per sample and row). */
static void im2col(const loom_conv_desc_t *d, const float *x, size_t xs, int m, int h, int w,
                   int ho, int wo, int cg, float *col, size_t ld)
{
    const int kh = d->kh, kw = d->kw, sh = d->stride_h, sw = d->stride_w;
    const int ph = d->pad_h, pw = d->pad_w, dh = d->dil_h, dw = d->dil_w;
    const size_t P = (size_t)ho * wo, HW = (size_t)h * w;
    /* Stride 1 with as many output as input columns: the row of one tap is
     * the input plane shifted by a constant, so it is one contiguous copy
     * plus zeros at the borders, rather than one short copy per output row
     * (7 to 28 floats in ResNet-20, where the calls cost more than the
     * copying). */
    const int flat = sh == 1 && sw == 1 && wo == w;
    size_t r = 0;
    for (int c = 0; c < cg; c++) {
        const float *xc = x + (size_t)c * HW;
        for (int ki = 0; ki < kh; ki++) {
            /* valid oh: 0 <= oh*sh + a < h */
            int a = ki * dh - ph;
            int oh0 = a >= 0 ? 0 : (-a + sh - 1) / sh;
            int oh1 = h - a <= 0 ? 0 : (h - a + sh - 1) / sh;
            oh1 = LOOM_MIN(oh1, ho), oh0 = LOOM_MIN(oh0, oh1);
            for (int kj = 0; kj < kw; kj++, r++) {
                float *row = col + r * ld;
                /* valid ow: 0 <= ow*sw + off < w */
                int off = kj * dw - pw;
                int ow0 = off >= 0 ? 0 : (sw == 1 ? -off : (-off + sw - 1) / sw);
                int ow1 = w - off <= 0 ? 0 : (sw == 1 ? w - off : (w - off + sw - 1) / sw);
                ow1 = LOOM_MIN(ow1, wo), ow0 = LOOM_MIN(ow0, ow1);
                /* flat: dst[i] = src[i + delta] for i in [fb, fe), the rows
                 * with a valid oh clipped to the plane; the clipped entries
                 * have an invalid column and are zeroed with the others. */
                ptrdiff_t delta = (ptrdiff_t)a * w + off;
                ptrdiff_t fb = (ptrdiff_t)oh0 * wo, fe = (ptrdiff_t)oh1 * wo;
                if (fb + delta < 0)
                    fb = -delta;
                if (fe + delta > (ptrdiff_t)HW)
                    fe = (ptrdiff_t)HW - delta;
                for (int s = 0; s < m; s++) {
                    float *dst = row + (size_t)s * P;
                    const float *src = xc + (size_t)s * xs;
                    if (oh0 > 0) /* rows of an invalid oh */
                        memset(dst, 0, sizeof(float) * (size_t)oh0 * wo);
                    if (oh1 < ho)
                        memset(dst + (size_t)oh1 * wo, 0, sizeof(float) * (size_t)(ho - oh1) * wo);
                    if (flat) {
                        if (fe > fb)
                            memcpy(dst + fb, src + fb + delta, sizeof(float) * (size_t)(fe - fb));
                        zero_cols(dst + (size_t)oh0 * wo, oh1 - oh0, wo, 0, ow0);
                        zero_cols(dst + (size_t)oh0 * wo, oh1 - oh0, wo, ow1, wo);
                        continue;
                    }
                    for (int oh = oh0; oh < oh1; oh++) {
                        float *o = dst + (size_t)oh * wo;
                        const float *xr = src + (size_t)(oh * sh + a) * w + off;
                        zero_few(o, ow0);
                        if (sw == 1)
                            memcpy(o + ow0, xr + ow0, sizeof(float) * (size_t)(ow1 - ow0));
                        else
                            for (int ow = ow0; ow < ow1; ow++)
                                o[ow] = xr[ow * sw];
                        zero_few(o + ow1, wo - ow1);
                    }
                }
            }
        }
    }
}

/* Adds the column matrix back into x (the adjoint of im2col). */
static void col2im(const loom_conv_desc_t *d, const float *col, size_t ld, int h, int w,
                   int ho, int wo, int cg, float *x)
{
    const int kh = d->kh, kw = d->kw, sh = d->stride_h, sw = d->stride_w;
    const int ph = d->pad_h, pw = d->pad_w, dh = d->dil_h, dw = d->dil_w;
    size_t r = 0;
    for (int c = 0; c < cg; c++) {
        float *xc = x + (size_t)c * h * w;
        for (int ki = 0; ki < kh; ki++) {
            for (int kj = 0; kj < kw; kj++, r++) {
                const float *src = col + r * ld;
                int off = kj * dw - pw;
                int ow0 = off >= 0 ? 0 : (-off + sw - 1) / sw;
                int ow1 = (w - off + sw - 1) / sw;
                if (ow1 > wo)
                    ow1 = wo;
                if (ow0 > ow1)
                    ow0 = ow1;
                for (int oh = 0; oh < ho; oh++) {
                    int ih = oh * sh - ph + ki * dh;
                    if (ih < 0 || ih >= h)
                        continue;
                    const float *s = src + (size_t)oh * wo;
                    float *xr = xc + (size_t)ih * w + off;
                    if (sw == 1) {
                        for (int ow = ow0; ow < ow1; ow++)
                            xr[ow] += s[ow];
                    } else {
                        for (int ow = ow0; ow < ow1; ow++)
                            xr[ow * sw] += s[ow];
                    }
                }
            }
        }
    }
}

static void job_init(conv_job_t *j, const loom_conv_desc_t *d, int n, int h, int w, float *ws)
{
    int nt = loom_get_threads();
    memset(j, 0, sizeof *j);
    j->d = d;
    j->n = n, j->h = h, j->w = w;
    j->ho = loom_conv_out_size(h, d->kh, d->stride_h, d->pad_h, d->dil_h);
    j->wo = loom_conv_out_size(w, d->kw, d->stride_w, d->pad_w, d->dil_w);
    j->G = d->groups, j->cg = d->cin / d->groups, j->cog = d->cout / d->groups;
    j->K = (size_t)j->cg * d->kh * d->kw, j->P = (size_t)j->ho * j->wo, j->HW = (size_t)h * w;
    j->nw = (size_t)d->cout * j->K;
    j->nb = chunk_samples(d, h, w, j->K, j->P, n, nt);
    j->L = ws_layout(d, h, w, j->K, j->P, j->nb, nt);
    j->ws = ws;
    if (j->L.shift)
        loom__shift_taps(1, w, 0, &j->taps);
}

/* Backward through the flipped weights (flip_task wrote them to the shared
 * workspace): dx by correlation, with the private weight gradients in the
 * flipped layout. */
static int flipped(const conv_job_t *j) { return j->L.corr && j->dx; }

/* The private weight gradients are in the flipped layout (bwd_task). */
static int dw_flipped(const conv_job_t *j) { return flipped(j) && !j->L.shift; }

static float *thread_ws(const conv_job_t *j, int tid)
{
    return j->ws + j->L.shared + (size_t)tid * j->L.per_thread;
}

/* Copies (or adds, accum) the packed sgemm output tmp (rows c of m samples
 * side by side, P columns each, row stride ld) into the per-sample layout
 * out[s][c0 + c] of C channels. */
static void unpack(const float *tmp, size_t ld, int m, int rows, size_t P, float *out, int C,
                   int c0, int accum)
{
    for (int s = 0; s < m; s++)
        for (int c = 0; c < rows; c++) {
            const float *src = tmp + (size_t)c * ld + (size_t)s * P;
            float *dst = out + ((size_t)s * C + c0 + c) * P;
            if (accum)
                for (size_t p = 0; p < P; p++)
                    dst[p] += src[p];
            else
                memcpy(dst, src, sizeof(float) * P);
        }
}

static void fwd_task(void *arg, int tid, int nt)
{
    const conv_job_t *j = arg;
    const loom_conv_desc_t *d = j->d;
    const size_t K = j->K, P = j->P, HW = j->HW;
    const int G = j->G, cg = j->cg, cog = j->cog, nb = j->nb;
    size_t sb, se;
    loom__range((size_t)j->n, tid, nt, &sb, &se);
    if (is_pointwise(d)) {
        for (size_t s = sb; s < se; s++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d->cout, (int)P, d->cin, 1.0f,
                        j->weight, d->cin, j->x + s * d->cin * HW, (int)HW, 0.0f,
                        j->y + s * d->cout * P, (int)P);
        return;
    }
    float *base = thread_ws(j, tid), *col = base + j->L.col, *tmp = base + j->L.tmp;
    for (size_t s0 = sb; s0 < se; s0 += (size_t)nb) {
        int m = (int)LOOM_MIN((size_t)nb, se - s0);
        size_t ld = (size_t)m * P;
        for (int g = 0; g < G; g++) {
            im2col(d, j->x + (s0 * d->cin + (size_t)g * cg) * HW, d->cin * HW, m, j->h, j->w, j->ho,
                   j->wo, cg, col, ld);
            if (j->wpack) { /* packed by loom_conv_forward; straight into y */
                loom__gemm_wb(cog, (int)K, j->wpack + (size_t)g * loom__gemm_wpack_floats(cog, (int)K),
                              col, ld, m, P, j->y + (s0 * d->cout + (size_t)g * cog) * P,
                              (size_t)d->cout * P, P, 0);
                continue;
            }
            const float *wg = j->weight + (size_t)g * cog * K;
            if (m == 1) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cog, (int)P, (int)K, 1.0f, wg,
                            (int)K, col, (int)ld, 0.0f, j->y + (s0 * d->cout + (size_t)g * cog) * P,
                            (int)P);
                continue;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cog, (int)ld, (int)K, 1.0f, wg,
                        (int)K, col, (int)ld, 0.0f, tmp, (int)ld);
            unpack(tmp, ld, m, cog, P, j->y + s0 * d->cout * P, d->cout, g * cog, 0);
        }
    }
}

/* The segments of conv_shift.c for samples [s0, s0+m) of a tensor of C
 * channels (src, sample stride C*P): the samples in place, one segment each,
 * where P is a multiple of 16; else copied side by side into buf (C rows of
 * m*P), one segment. */
typedef struct {
    const float *p;
    size_t ld, gs, L;
    int nseg;
} segs_t;

static segs_t shift_segs(const conv_job_t *j, const float *src, int C, size_t s0, int m, float *buf)
{
    const size_t P = j->P;
    segs_t g;
    if (P % 16 == 0 && !j->L.shift2) {
        g.p = src + s0 * C * P, g.ld = P, g.gs = (size_t)C * P, g.L = P, g.nseg = m;
        return g;
    }
    const size_t N = (size_t)m * P;
    for (int c = 0; c < C; c++)
        for (int s = 0; s < m; s++)
            memcpy(buf + (size_t)c * N + (size_t)s * P, src + ((s0 + s) * C + c) * P,
                   sizeof(float) * P);
    g.p = buf, g.ld = N, g.gs = 0, g.L = N, g.nseg = 1;
    return g;
}

/* The mask table of the thread's workspace, for segments of L columns
 * (recomputed only when L changes: the last, shorter chunk). */
static const uint16_t *shift_mask(const conv_job_t *j, const loom__taps_t *tp, float *base,
                                  size_t L, size_t *have)
{
    uint16_t *mt = (uint16_t *)(base + j->L.mask);
    if (*have != L)
        loom__shift_masks(tp, j->ho, j->wo, L, mt), *have = L;
    return mt;
}

/* Thread contract (both): thread tid owns samples [sb, se) (static split),
 * writes only their y or dx and its own part of the workspace; reads the
 * packed weights in the shared part.  Backward adds the weight gradient to
 * a private copy when there are several threads (summed in thread order by
 * reduce_task). */
static void shift_fwd_task(void *arg, int tid, int nt)
{
    const conv_job_t *j = arg;
    const loom_conv_desc_t *d = j->d;
    float *base = thread_ws(j, tid);
    size_t sb, se, have = 0;
    loom__range((size_t)j->n, tid, nt, &sb, &se);
    for (size_t s0 = sb; s0 < se; s0 += (size_t)j->nb) {
        int m = (int)LOOM_MIN((size_t)j->nb, se - s0);
        segs_t x = shift_segs(j, j->x, d->cin, s0, m, base + j->L.col);
        const uint16_t *mt = shift_mask(j, &j->taps, base, x.L, &have);
        loom__shift_gemm(d->cout, d->cin, &j->taps, j->wpack, mt, x.p, x.ld, x.gs, x.nseg, x.L, j->P,
                         j->y + s0 * d->cout * j->P, (size_t)d->cout * j->P, j->P, 0);
    }
}

static void shift_bwd_task(void *arg, int tid, int nt)
{
    const conv_job_t *j = arg;
    const loom_conv_desc_t *d = j->d;
    float *base = thread_ws(j, tid), *dw = NULL;
    size_t sb, se, have = 0;
    loom__range((size_t)j->n, tid, nt, &sb, &se);
    if (tid == 0)
        ((conv_job_t *)arg)->bwd_nt = nt;
    if (j->dweight) {
        dw = nt > 1 ? base + j->L.dw : j->dweight;
        if (nt > 1)
            memset(dw, 0, sizeof(float) * j->nw);
    }
    for (size_t s0 = sb; s0 < se; s0 += (size_t)j->nb) {
        int m = (int)LOOM_MIN((size_t)j->nb, se - s0);
        segs_t g = shift_segs(j, j->dy, d->cout, s0, m, base + j->L.dyg);
        const uint16_t *mt = shift_mask(j, &j->taps, base, g.L, &have);
        if (dw) {
            segs_t x = shift_segs(j, j->x, d->cin, s0, m, base + j->L.col);
            loom__shift_dw(d->cout, d->cin, &j->taps, mt, g.p, g.ld, g.gs, x.p, x.ld, x.gs, g.nseg,
                           g.L, dw);
        }
        if (j->dx) /* dx by correlation with the flipped weights that flip_task packed */
            loom__shift_gemm(d->cin, d->cout, &j->taps, j->wpack, mt, g.p, g.ld, g.gs, g.nseg, g.L,
                             j->P, j->dx + s0 * d->cin * j->HW, (size_t)d->cin * j->HW, j->HW,
                             j->accum_dx);
    }
}

/* Stride 2 (use_shift2): x's phases of samples [s0, s0+m) into the
 * thread's col, and their taps (Lq = m*P columns per phase). */
static const float *shift2_phases(const conv_job_t *j, float *base, size_t s0, int m,
                                  loom__taps_t *tp)
{
    const size_t Lq = (size_t)m * j->P;
    float *xq = base + j->L.col;
    loom__shift_phases(j->x + s0 * j->d->cin * j->HW, (size_t)j->d->cin * j->HW, j->d->cin, m,
                       j->h, j->w, xq, Lq);
    loom__shift_taps(2, j->wo, Lq, tp);
    return xq;
}

/* Thread contract (both): as shift_fwd_task / shift_bwd_task; the weight
 * gradient only (dx runs in bwd_task afterwards). */
static void shift2_fwd_task(void *arg, int tid, int nt)
{
    const conv_job_t *j = arg;
    const loom_conv_desc_t *d = j->d;
    float *base = thread_ws(j, tid);
    size_t sb, se, have = 0;
    loom__range((size_t)j->n, tid, nt, &sb, &se);
    for (size_t s0 = sb; s0 < se; s0 += (size_t)j->nb) {
        int m = (int)LOOM_MIN((size_t)j->nb, se - s0);
        loom__taps_t tp;
        const float *xq = shift2_phases(j, base, s0, m, &tp);
        const size_t Lq = (size_t)m * j->P;
        const uint16_t *mt = shift_mask(j, &tp, base, Lq, &have);
        loom__shift_gemm(d->cout, d->cin, &tp, j->wpack, mt, xq, 4 * Lq, 0, 1, Lq, j->P,
                         j->y + s0 * d->cout * j->P, (size_t)d->cout * j->P, j->P, 0);
    }
}

static void shift2_dw_task(void *arg, int tid, int nt)
{
    const conv_job_t *j = arg;
    const loom_conv_desc_t *d = j->d;
    float *base = thread_ws(j, tid), *dw = nt > 1 ? base + j->L.dw : j->dweight;
    size_t sb, se, have = 0;
    loom__range((size_t)j->n, tid, nt, &sb, &se);
    if (tid == 0)
        ((conv_job_t *)arg)->bwd_nt = nt;
    if (nt > 1)
        memset(dw, 0, sizeof(float) * j->nw);
    for (size_t s0 = sb; s0 < se; s0 += (size_t)j->nb) {
        int m = (int)LOOM_MIN((size_t)j->nb, se - s0);
        loom__taps_t tp;
        const float *xq = shift2_phases(j, base, s0, m, &tp);
        const size_t Lq = (size_t)m * j->P;
        segs_t g = shift_segs(j, j->dy, d->cout, s0, m, base + j->L.dyg);
        const uint16_t *mt = shift_mask(j, &tp, base, Lq, &have);
        loom__shift_dw(d->cout, d->cin, &tp, mt, g.p, g.ld, g.gs, xq, 4 * Lq, 0, 1, Lq, dw);
    }
}

/* The data gradient of use_shift2, phase by phase (loom__shift_taps_dx2),
 * with the weights loom_conv_backward packed (shared workspace: phase
 * (a, b) at dx2_off[2a+b]).  Two phases of one row parity are computed into
 * the thread's col, then interleaved into dx.  Thread contract: as
 * shift_fwd_task (samples [sb, se), their dx, the thread's workspace). */
static void shift2_dx_task(void *arg, int tid, int nt)
{
    const conv_job_t *j = arg;
    const loom_conv_desc_t *d = j->d;
    float *base = thread_ws(j, tid);
    const size_t mask_f = (loom__shift_mask_count((size_t)j->nb * j->P) + 1) / 2;
    size_t sb, se, have[4] = {0};
    loom__range((size_t)j->n, tid, nt, &sb, &se);
    for (size_t s0 = sb; s0 < se; s0 += (size_t)j->nb) {
        int m = (int)LOOM_MIN((size_t)j->nb, se - s0);
        const size_t Lq = (size_t)m * j->P;
        segs_t g = shift_segs(j, j->dy, d->cout, s0, m, base + j->L.dyg);
        for (int a = 0; a < 2; a++) {
            float *q[2];
            for (int b = 0; b < 2; b++) {
                const int ph = 2 * a + b;
                uint16_t *mt = (uint16_t *)(base + j->L.mask + (size_t)(1 + ph) * mask_f);
                if (have[ph] != Lq)
                    loom__shift_masks(&j->dx2_taps[ph], j->ho, j->wo, Lq, mt), have[ph] = Lq;
                q[b] = base + j->L.col + (size_t)b * d->cin * Lq;
                loom__shift_gemm(d->cin, d->cout, &j->dx2_taps[ph], j->ws + j->dx2_off[ph], mt, g.p,
                                 g.ld, g.gs, g.nseg, g.L, j->P, q[b], (size_t)d->cin * j->P, j->P, 0);
            }
            loom__shift_merge(q[0], q[1], j->P, d->cin, m, j->h, j->w, a,
                              j->dx + s0 * d->cin * j->HW, (size_t)d->cin * j->HW, j->accum_dx);
        }
    }
}

static void bias_task(void *arg, int tid, int nt)
{
    const conv_job_t *j = arg;
    size_t cb, ce;
    loom__range((size_t)j->d->cout, tid, nt, &cb, &ce);
    for (size_t c = cb; c < ce; c++) {
        if (j->y) { /* forward: add */
            float b = j->dbias[c];
            for (int s = 0; s < j->n; s++) {
                float *yc = j->y + ((size_t)s * j->d->cout + c) * j->P;
                for (size_t p = 0; p < j->P; p++)
                    yc[p] += b;
            }
        } else { /* backward: sum over samples in order */
            float acc = 0.0f;
            for (int s = 0; s < j->n; s++) {
                const float *g = j->dy + ((size_t)s * j->d->cout + c) * j->P;
                float part = 0.0f;
                for (size_t p = 0; p < j->P; p++)
                    part += g[p];
                acc += part;
            }
            j->dbias[c] += acc;
        }
    }
}

void loom_conv_forward(const loom_conv_desc_t *d, int n, int h, int w, const float *x,
                       const float *weight, const float *bias, float *y, float *ws)
{
    conv_job_t j;
    job_init(&j, d, n, h, w, ws);
    j.x = x, j.weight = weight, j.y = y;
    if (loom_conv_winograd_passes(d, n, h, w) & 1) { /* adds the bias itself */
        loom__wino_forward(d, n, h, w, x, weight, d->bias ? bias : NULL, y, ws);
        return;
    }
    if (!is_pointwise(d) && use_wb(j.cog, (int)j.K)) {
        size_t per = loom__gemm_wpack_floats(j.cog, (int)j.K);
        for (int g = 0; g < j.G; g++) /* at most cout x K floats: not worth a dispatch */
            loom__gemm_pack_w(j.cog, (int)j.K, weight + (size_t)g * j.cog * j.K, j.K, ws + g * per);
        j.wpack = ws;
    }
    loom__parallel(j.L.shift ? shift_fwd_task : j.L.shift2 ? shift2_fwd_task : fwd_task, &j);
    if (d->bias && bias) {
        j.dbias = (float *)bias; /* read only in forward */
        loom__parallel(bias_task, &j);
    }
}

/* W'[g][ci][co][kh-1-i][kw-1-j] = W[g*cog + co][ci][i][j]: the weights of
 * the convolution that maps dy to dx (dx_by_correlation), as G blocks of
 * cg rows and cog*kh*kw columns. */
static void flip_task(void *arg, int tid, int nt)
{
    const conv_job_t *j = arg;
    const int kk = j->d->kh * j->d->kw, cg = j->cg, cog = j->cog;
    float *wf = j->ws; /* the shared part */
    size_t b, e;
    loom__range((size_t)j->d->cout, tid, nt, &b, &e);
    if (j->wpack) { /* loom__gemm_wb's layout: blocks of 8 rows (ci) interleaved by k = co*kk + t */
        const int Kf = cog * kk;
        const size_t per = loom__gemm_wpack_floats(cg, Kf);
        for (size_t o = b; o < e; o++) {
            size_t g = o / (size_t)cog, co = o % (size_t)cog;
            float *wg = wf + g * per;
            for (int ci = 0; ci < cg; ci++) {
                const float *src = j->weight + (o * cg + ci) * kk;
                float *dst = wg + ((size_t)(ci / 8) * Kf + co * kk) * 8 + ci % 8;
                for (int t = 0; t < kk; t++)
                    dst[(size_t)(kk - 1 - t) * 8] = src[t];
            }
        }
        /* the zero rows that pad cg to a multiple of 8 */
        for (size_t o = b; o < e && cg % 8; o++) {
            size_t g = o / (size_t)cog, co = o % (size_t)cog;
            float *wg = wf + g * per + ((size_t)(cg / 8) * Kf + co * kk) * 8;
            for (int t = 0; t < kk; t++)
                for (int r = cg % 8; r < 8; r++)
                    wg[(size_t)t * 8 + r] = 0.0f;
        }
        return;
    }
    for (size_t o = b; o < e; o++) {
        size_t g = o / (size_t)cog, co = o % (size_t)cog;
        for (int ci = 0; ci < cg; ci++) {
            const float *src = j->weight + (o * cg + ci) * kk;
            float *dst = wf + ((g * cg + ci) * cog + co) * kk;
            for (int t = 0; t < kk; t++)
                dst[kk - 1 - t] = src[t];
        }
    }
}

/* Thread contract: thread tid owns samples [sb, se) (static split), writes
 * only their dx and its own part of the workspace, and adds its weight
 * gradient into a private copy (summed in thread order by reduce_task) when
 * there are several threads or the copy is in the flipped layout.  Reads the
 * shared flipped weights.
 *
 * Correlation path with dx wanted: the im2col of dy serves both products.
 * Its row (co, kh-1-i, kw-1-j) at input position q is the dy that meets
 * x[ci][q] through weight (co, ci, i, j), so the weight gradient is
 * im2col(dy) * x^T, a (cog*kh*kw) x cg matrix per group: the flipped layout,
 * turned back by reduce_task.  This saves the im2col of x that the product
 * dy * im2col(x)^T would need. */
static void bwd_task(void *arg, int tid, int nt)
{
    const conv_job_t *j = arg;
    const loom_conv_desc_t *d = j->d;
    const size_t K = j->K, P = j->P, HW = j->HW;
    const int G = j->G, cg = j->cg, cog = j->cog, nb = j->nb, kk = d->kh * d->kw;
    float *base = thread_ws(j, tid);
    float *dw = NULL;
    size_t sb, se;
    loom__range((size_t)j->n, tid, nt, &sb, &se);
    if (tid == 0)
        ((conv_job_t *)arg)->bwd_nt = nt;
    if (j->dweight) {
        if (nt > 1 || flipped(j)) {
            dw = base + j->L.dw;
            memset(dw, 0, sizeof(float) * j->nw);
        } else {
            dw = j->dweight;
        }
    }
    if (is_pointwise(d)) {
        for (size_t s = sb; s < se; s++) {
            const float *dys = j->dy + s * d->cout * P, *xs = j->x + s * d->cin * HW;
            if (dw)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d->cout, d->cin, (int)P, 1.0f,
                            dys, (int)P, xs, (int)HW, 1.0f, dw, d->cin);
            if (j->dx)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d->cin, (int)P, d->cout, 1.0f,
                            j->weight, d->cin, dys, (int)P, j->accum_dx ? 1.0f : 0.0f,
                            j->dx + s * d->cin * HW, (int)HW);
        }
        return;
    }
    if (j->dx && !j->L.corr && !j->accum_dx && se > sb) /* col2im adds */
        memset(j->dx + sb * d->cin * HW, 0, sizeof(float) * (se - sb) * d->cin * HW);
    float *col = base + j->L.col, *aux = base + j->L.aux, *dyg = base + j->L.dyg;
    float *tmp = base + j->L.tmp;
    const loom_conv_desc_t dt = flipped(j) ? flipped_desc(d) : *d; /* dy -> dx, once per job */
    for (size_t s0 = sb; s0 < se; s0 += (size_t)nb) {
        int m = (int)LOOM_MIN((size_t)nb, se - s0);
        size_t ld = (size_t)m * P, ldx = (size_t)m * HW;
        for (int g = 0; g < G; g++) {
            const float *dyc = j->dy + (s0 * d->cout + (size_t)g * cog) * P;
            const float *xc = j->x + (s0 * d->cin + (size_t)g * cg) * HW;
            float *dxc = j->dx ? j->dx + (s0 * d->cin + (size_t)g * cg) * HW : NULL;
            if (flipped(j)) {
                im2col(&dt, dyc, d->cout * P, m, j->ho, j->wo, j->h, j->w, cog, aux, ldx);
                if (dw) {
                    /* x of the m samples as a cg x ldx matrix */
                    const float *xsrc = xc;
                    size_t ldb = HW;
                    if (m > 1) {
                        for (int s = 0; s < m; s++)
                            for (int c = 0; c < cg; c++)
                                memcpy(col + (size_t)c * ldx + (size_t)s * HW,
                                       xc + ((size_t)s * d->cin + c) * HW, sizeof(float) * HW);
                        xsrc = col, ldb = ldx;
                    }
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, cog * kk, cg, (int)ldx,
                                1.0f, aux, (int)ldx, xsrc, (int)ldb, 1.0f, dw + (size_t)g * cog * K,
                                cg);
                }
                if (j->wpack) { /* flip_task packed it; straight into dx */
                    loom__gemm_wb(cg, cog * kk, j->wpack + (size_t)g * loom__gemm_wpack_floats(cg, cog * kk),
                                  aux, ldx, m, HW, j->dx + (s0 * d->cin + (size_t)g * cg) * HW,
                                  (size_t)d->cin * HW, HW, j->accum_dx);
                    continue;
                }
                const float *wf = j->ws + (size_t)g * cg * cog * kk; /* flip_task's */
                if (m == 1) {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cg, (int)HW, cog * kk,
                                1.0f, wf, cog * kk, aux, (int)ldx, j->accum_dx ? 1.0f : 0.0f, dxc,
                                (int)HW);
                } else {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cg, (int)ldx, cog * kk,
                                1.0f, wf, cog * kk, aux, (int)ldx, 0.0f, tmp, (int)ldx);
                    unpack(tmp, ldx, m, cg, HW, j->dx + s0 * d->cin * HW, d->cin, g * cg,
                           j->accum_dx);
                }
                continue;
            }
            /* dy of the m samples as a cog x ld matrix */
            const float *dsrc = dyc;
            if (m > 1) {
                for (int s = 0; s < m; s++)
                    for (int c = 0; c < cog; c++)
                        memcpy(dyg + (size_t)c * ld + (size_t)s * P,
                               dyc + ((size_t)s * d->cout + c) * P, sizeof(float) * P);
                dsrc = dyg;
            }
            if (dw) {
                im2col(d, xc, d->cin * HW, m, j->h, j->w, j->ho, j->wo, cg, col, ld);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, cog, (int)K, (int)ld, 1.0f, dsrc,
                            (int)ld, col, (int)ld, 1.0f, dw + (size_t)g * cog * K, (int)K);
            }
            if (dxc) {
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)K, (int)ld, cog, 1.0f,
                            j->weight + (size_t)g * cog * K, (int)K, dsrc, (int)ld, 0.0f, aux,
                            (int)ld);
                for (int s = 0; s < m; s++)
                    col2im(d, aux + (size_t)s * P, ld, j->h, j->w, j->ho, j->wo, cg,
                           dxc + (size_t)s * d->cin * HW);
            }
        }
    }
}

/* dweight += the threads' private sums, in thread order (deterministic),
 * turned from the flipped layout [g][co][kh-1-i][kw-1-j][ci] when flipped(). */
static void reduce_task(void *arg, int tid, int nt)
{
    const conv_job_t *j = arg;
    const int kk = j->d->kh * j->d->kw, cg = j->cg;
    size_t b, e;
    loom__range(j->nw, tid, nt, &b, &e);
    for (int t = 0; t < j->bwd_nt; t++) {
        const float *src = thread_ws(j, t) + j->L.dw;
        if (!dw_flipped(j)) {
            for (size_t i = b; i < e; i++)
                j->dweight[i] += src[i];
            continue;
        }
        /* i = (o*cg + ci)*kk + tap, o = g*cog + co; the source is
         * src[g*cog*kk*cg + (co*kk + kk-1-tap)*cg + ci] = src[(o*kk + kk-1-tap)*cg + ci] */
        /* (o, ci, tap) of i = b, then counted along: no division per element */
        size_t tap = b % (size_t)kk, ci = b / (size_t)kk % (size_t)cg, o = b / (size_t)kk / (size_t)cg;
        for (size_t i = b; i < e; i++) {
            j->dweight[i] += src[(o * kk + (size_t)kk - 1 - tap) * cg + ci];
            if (++tap == (size_t)kk) {
                tap = 0;
                if (++ci == (size_t)cg) ci = 0, o++;
            }
        }
    }
}

void loom_conv_backward(const loom_conv_desc_t *d, int n, int h, int w, const float *x,
                        const float *weight, const float *dy, float *dx, int accum_dx,
                        float *dweight, float *dbias, float *ws)
{
    conv_job_t j;
    job_init(&j, d, n, h, w, ws);
    j.x = x, j.weight = weight, j.dy = dy, j.dx = dx, j.accum_dx = accum_dx, j.dweight = dweight;
    if (d->bias && dbias) {
        j.dbias = dbias;
        loom__parallel(bias_task, &j);
    }
    if (loom_conv_winograd_passes(d, n, h, w) & 2) {
        loom__wino_backward(d, n, h, w, x, weight, dy, dx, accum_dx, dweight, ws);
        return;
    }
    if (flipped(&j)) {
        if (use_wb(j.cg, j.cog * d->kh * d->kw))
            j.wpack = ws; /* flip_task writes loom__gemm_wb's layout */
        loom__parallel(flip_task, &j);
    }
    if (j.L.shift2) {
        if (dweight)
            loom__parallel(shift2_dw_task, &j);
        if (dx) { /* the phases' weights: W'[ci][co*n + t] = W[co][ci][kt[t]], packed */
            size_t off = 0;
            float *tmp = ws + dx2_pack_floats(d) - (size_t)d->cin * d->cout * 4;
            for (int ph = 0; ph < 4; ph++) {
                int kt[9], n = loom__shift_taps_dx2(ph / 2, ph % 2, j.wo, &j.dx2_taps[ph], kt);
                for (int ci = 0; ci < d->cin; ci++)
                    for (int co = 0; co < d->cout; co++)
                        for (int t = 0; t < n; t++)
                            tmp[((size_t)ci * d->cout + co) * n + t] =
                                weight[((size_t)co * d->cin + ci) * 9 + kt[t]];
                j.dx2_off[ph] = off;
                loom__gemm_pack_w(d->cin, d->cout * n, tmp, (size_t)d->cout * n, ws + off);
                off += loom__gemm_wpack_floats(d->cin, d->cout * n);
            }
            loom__parallel(shift2_dx_task, &j);
        }
    } else {
        loom__parallel(j.L.shift ? shift_bwd_task : bwd_task, &j);
    }
    if (dweight && (j.bwd_nt > 1 || dw_flipped(&j)))
        loom__parallel(reduce_task, &j);
}
