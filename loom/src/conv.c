/*
 * conv.c - 2-D convolution (stride, padding, dilation, groups, optional bias)
 * as im2col + cblas_sgemm.
 *
 * Cost (per sample, forward): 2 * cout * (cin/groups) * kh * kw * ho * wo
 * FLOPs in sgemm, plus an im2col copy of (cin*kh*kw) * ho*wo floats.
 * Backward: twice the forward FLOPs (weight gradient and data gradient) and
 * one im2col + one col2im.
 *
 * Several samples are packed side by side in one column matrix (K rows,
 * nb*P columns) so that the sgemm is wide enough to keep the BLAS threads
 * busy on small images; a 1x1 stride-1 unpadded ungrouped convolution skips
 * im2col and multiplies the input directly.
 */
#include "internal.h"

#include <cblas.h>

#define COLS_TARGET 1024          /* columns of one packed sgemm (per thread) */
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

/* Samples packed in one column matrix (per thread). */
static int chunk_samples(size_t K, size_t P, int n, int nt)
{
    size_t nb = (COLS_TARGET + P - 1) / P, per = ((size_t)n + nt - 1) / nt;
    if (nb * K * P > COL_MAX_FLOATS)
        nb = COL_MAX_FLOATS / (K * P);
    if (nb < 1)
        nb = 1;
    if (nb > per)
        nb = per;
    return (int)nb;
}

typedef struct {
    const loom_conv_desc_t *d;
    int n, h, w, ho, wo, G, cg, cog, nb;
    size_t K, P, HW, nw, per_thread;
    const float *x, *weight, *dy;
    float *y, *dx, *dweight, *dbias, *ws;
    int accum_dx;
    int bwd_nt; /* threads that ran backward with private weight gradients */
} conv_job_t;

static size_t per_thread_ws(const loom_conv_desc_t *d, size_t K, size_t P, int nb, int nt)
{
    size_t nw = (size_t)d->cout * K, cog = (size_t)(d->cout / d->groups);
    size_t f = is_pointwise(d) ? 0 : 2 * K * (size_t)nb * P + cog * (size_t)nb * P;
    if (nt > 1)
        f += nw; /* private weight gradient */
    return (f + 15) & ~(size_t)15;
}

size_t loom_conv_workspace(const loom_conv_desc_t *d, int n, int h, int w)
{
    int nt = loom_get_threads();
    int ho = loom_conv_out_size(h, d->kh, d->stride_h, d->pad_h, d->dil_h);
    int wo = loom_conv_out_size(w, d->kw, d->stride_w, d->pad_w, d->dil_w);
    size_t K = (size_t)(d->cin / d->groups) * d->kh * d->kw, P = (size_t)ho * wo;
    return (size_t)nt * per_thread_ws(d, K, P, chunk_samples(K, P, n, nt), nt);
}

/* Column matrix rows for channels [c0, c0+cg) of one sample, written at
 * column offset col (row stride ld). */
static void im2col(const loom_conv_desc_t *d, const float *x, int h, int w, int ho, int wo,
                   int cg, float *col, size_t ld)
{
    const int kh = d->kh, kw = d->kw, sh = d->stride_h, sw = d->stride_w;
    const int ph = d->pad_h, pw = d->pad_w, dh = d->dil_h, dw = d->dil_w;
    size_t r = 0;
    for (int c = 0; c < cg; c++) {
        const float *xc = x + (size_t)c * h * w;
        for (int ki = 0; ki < kh; ki++) {
            for (int kj = 0; kj < kw; kj++, r++) {
                float *dst = col + r * ld;
                int off = kj * dw - pw;
                /* valid ow: 0 <= ow*sw + off < w */
                int ow0 = off >= 0 ? 0 : (-off + sw - 1) / sw;
                int ow1 = (w - off + sw - 1) / sw;
                if (ow1 > wo)
                    ow1 = wo;
                if (ow0 > ow1)
                    ow0 = ow1;
                for (int oh = 0; oh < ho; oh++) {
                    int ih = oh * sh - ph + ki * dh;
                    float *o = dst + (size_t)oh * wo;
                    if (ih < 0 || ih >= h) {
                        memset(o, 0, sizeof(float) * (size_t)wo);
                        continue;
                    }
                    const float *xr = xc + (size_t)ih * w + off;
                    for (int ow = 0; ow < ow0; ow++)
                        o[ow] = 0.0f;
                    if (sw == 1) {
                        memcpy(o + ow0, xr + ow0, sizeof(float) * (size_t)(ow1 - ow0));
                    } else {
                        for (int ow = ow0; ow < ow1; ow++)
                            o[ow] = xr[ow * sw];
                    }
                    for (int ow = ow1; ow < wo; ow++)
                        o[ow] = 0.0f;
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
    j->nb = chunk_samples(j->K, j->P, n, nt);
    j->per_thread = per_thread_ws(d, j->K, j->P, j->nb, nt);
    j->ws = ws;
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
    float *col = j->ws + (size_t)tid * j->per_thread, *tmp = col + 2 * K * (size_t)nb * P;
    for (size_t s0 = sb; s0 < se; s0 += (size_t)nb) {
        int m = (int)LOOM_MIN((size_t)nb, se - s0);
        size_t ld = (size_t)m * P;
        for (int g = 0; g < G; g++) {
            for (int s = 0; s < m; s++)
                im2col(d, j->x + ((s0 + s) * d->cin + (size_t)g * cg) * HW, j->h, j->w, j->ho, j->wo,
                       cg, col + (size_t)s * P, ld);
            const float *wg = j->weight + (size_t)g * cog * K;
            if (m == 1) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cog, (int)P, (int)K, 1.0f, wg,
                            (int)K, col, (int)ld, 0.0f, j->y + (s0 * d->cout + (size_t)g * cog) * P,
                            (int)P);
                continue;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cog, (int)ld, (int)K, 1.0f, wg,
                        (int)K, col, (int)ld, 0.0f, tmp, (int)ld);
            for (int s = 0; s < m; s++)
                for (int c = 0; c < cog; c++)
                    memcpy(j->y + ((s0 + s) * d->cout + (size_t)g * cog + c) * P,
                           tmp + (size_t)c * ld + (size_t)s * P, sizeof(float) * P);
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
    loom__parallel(fwd_task, &j);
    if (d->bias && bias) {
        j.dbias = (float *)bias; /* read only in forward */
        loom__parallel(bias_task, &j);
    }
}

static void bwd_task(void *arg, int tid, int nt)
{
    const conv_job_t *j = arg;
    const loom_conv_desc_t *d = j->d;
    const size_t K = j->K, P = j->P, HW = j->HW;
    const int G = j->G, cg = j->cg, cog = j->cog, nb = j->nb;
    float *base = j->ws + (size_t)tid * j->per_thread;
    float *dw = NULL;
    size_t sb, se;
    loom__range((size_t)j->n, tid, nt, &sb, &se);
    if (tid == 0)
        ((conv_job_t *)arg)->bwd_nt = nt;
    if (j->dweight) {
        if (nt > 1) {
            dw = base + (is_pointwise(d) ? 0 : 2 * K * (size_t)nb * P + (size_t)cog * nb * P);
            memset(dw, 0, sizeof(float) * j->nw);
        } else {
            dw = j->dweight;
        }
    }
    if (j->dx && !j->accum_dx && se > sb)
        memset(j->dx + sb * d->cin * HW, 0, sizeof(float) * (se - sb) * d->cin * HW);
    if (is_pointwise(d)) {
        for (size_t s = sb; s < se; s++) {
            const float *dys = j->dy + s * d->cout * P, *xs = j->x + s * d->cin * HW;
            if (dw)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d->cout, d->cin, (int)P, 1.0f,
                            dys, (int)P, xs, (int)HW, 1.0f, dw, d->cin);
            if (j->dx)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d->cin, (int)P, d->cout, 1.0f,
                            j->weight, d->cin, dys, (int)P, 1.0f, j->dx + s * d->cin * HW, (int)HW);
        }
        return;
    }
    float *col = base, *dcol = base + K * (size_t)nb * P, *dyg = base + 2 * K * (size_t)nb * P;
    for (size_t s0 = sb; s0 < se; s0 += (size_t)nb) {
        int m = (int)LOOM_MIN((size_t)nb, se - s0);
        size_t ld = (size_t)m * P;
        for (int g = 0; g < G; g++) {
            const float *dsrc;
            if (m == 1) {
                dsrc = j->dy + (s0 * d->cout + (size_t)g * cog) * P;
            } else {
                for (int s = 0; s < m; s++)
                    for (int c = 0; c < cog; c++)
                        memcpy(dyg + (size_t)c * ld + (size_t)s * P,
                               j->dy + ((s0 + s) * d->cout + (size_t)g * cog + c) * P,
                               sizeof(float) * P);
                dsrc = dyg;
            }
            if (dw) {
                for (int s = 0; s < m; s++)
                    im2col(d, j->x + ((s0 + s) * d->cin + (size_t)g * cg) * HW, j->h, j->w, j->ho,
                           j->wo, cg, col + (size_t)s * P, ld);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, cog, (int)K, (int)ld, 1.0f, dsrc,
                            (int)ld, col, (int)ld, 1.0f, dw + (size_t)g * cog * K, (int)K);
            }
            if (j->dx) {
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)K, (int)ld, cog, 1.0f,
                            j->weight + (size_t)g * cog * K, (int)K, dsrc, (int)ld, 0.0f, dcol,
                            (int)ld);
                for (int s = 0; s < m; s++)
                    col2im(d, dcol + (size_t)s * P, ld, j->h, j->w, j->ho, j->wo, cg,
                           j->dx + ((s0 + s) * d->cin + (size_t)g * cg) * HW);
            }
        }
    }
}

/* dweight += the threads' private sums, in thread order (deterministic). */
static void reduce_task(void *arg, int tid, int nt)
{
    const conv_job_t *j = arg;
    const loom_conv_desc_t *d = j->d;
    size_t off = is_pointwise(d) ? 0 : 2 * j->K * (size_t)j->nb * j->P + (size_t)j->cog * j->nb * j->P;
    size_t b, e;
    loom__range(j->nw, tid, nt, &b, &e);
    for (int t = 0; t < j->bwd_nt; t++) {
        const float *src = j->ws + (size_t)t * j->per_thread + off;
        for (size_t i = b; i < e; i++)
            j->dweight[i] += src[i];
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
    loom__parallel(bwd_task, &j);
    if (dweight && j.bwd_nt > 1)
        loom__parallel(reduce_task, &j);
}
