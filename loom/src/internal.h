/* internal.h - helpers shared by Loom's source files (not installed). */
#ifndef LOOM_INTERNAL_H
#define LOOM_INTERNAL_H

#include "loom.h"

#include <stdlib.h>
#include <string.h>

#define LOOM_MAX(a, b) ((a) > (b) ? (a) : (b))
#define LOOM_MIN(a, b) ((a) < (b) ? (a) : (b))

/* Check-and-propagate: jumps to label with status st set. */
#define LOOM_CHECK_GOTO(expr, st, label) \
    do {                                 \
        (st) = (expr);                   \
        if ((st) < 0)                    \
            goto label;                  \
    } while (0)

void *loom__alloc(size_t bytes);   /* 64-byte aligned, zeroed; NULL on failure */
void loom__free(void *p);

/* Runs fn(arg, tid, nthreads) on every Loom thread (the caller is tid 0) and
 * returns when all are done.  Called from inside a task, runs inline. */
typedef void (*loom__task_fn)(void *arg, int tid, int nthreads);
void loom__parallel(loom__task_fn fn, void *arg);
/* Static split of [0, n) into nt parts: part tid is [begin, end). */
void loom__range(size_t n, int tid, int nt, size_t *begin, size_t *end);

/* Winograd F(4x4, 3x3) convolution (conv_wino.c), used by conv.c for 3x3
 * stride-1 undilated ungrouped convolutions with padding at most 2.
 * Forward overwrites y, adding bias (NULL: none) to it; backward overwrites dx or adds to it
 * (accum_dx), adds to dweight; dx or dweight may be NULL.  Thread: the
 * model's (they split the work over Loom's threads themselves). */
int loom__wino_applies(const loom_conv_desc_t *d);
size_t loom__wino_workspace(const loom_conv_desc_t *d, int n, int h, int w, int nthreads);
void loom__wino_forward(const loom_conv_desc_t *d, int n, int h, int w, const float *x,
                        const float *weight, const float *bias, float *y, float *ws);
void loom__wino_backward(const loom_conv_desc_t *d, int n, int h, int w, const float *x,
                         const float *weight, const float *dy, float *dx, int accum_dx,
                         float *dweight, float *ws);

/* The weights-times-columns product of im2col convolution (conv_gemm.c):
 * out[s][r][p] (+= if accum) sum_k W[r][k] * B[k][s*P + p] for r < M, s < m,
 * p < P, row r of sample s at out + s*ss + r*rs; B row-major with leading
 * dimension ldb, read in place; W packed first by loom__gemm_pack_w into
 * loom__gemm_wpack_floats(M, K) floats.  Available (nonzero) only where the
 * compiler targets AVX-512; elsewhere loom__gemm_wb does nothing.  Thread: any
 * (each call writes only the outputs it names). */
int loom__gemm_wb_available(void);
size_t loom__gemm_wpack_floats(int M, int K);
void loom__gemm_pack_w(int M, int K, const float *w, size_t ldw, float *wp);
void loom__gemm_wb(int M, int K, const float *wp, const float *b, size_t ldb, int m, size_t P,
                   float *out, size_t ss, size_t rs, int accum);

/* 3x3 convolutions with padding 1, ungrouped, stride 1 or (on even
 * sizes) 2, as implicit GEMM (conv_shift.c).  The source is read in
 * segments (segment g's channel c at src + g*gs + c*ld, L columns of whole
 * output images of P positions); tap t of output column j is src[c*ld + j +
 * off[t]], zero where the tap leaves the source plane (the mask table of
 * loom__shift_masks, loom__shift_mask_count(L) entries).  Stride 1: the
 * source is the input (or dy).  Stride 2: the input's four phases (even/odd
 * rows x columns) of ho x wo each, laid out by loom__shift_phases as [c][phase]
 * [Lq] (ld = 4*Lq).  loom__shift_gemm: out[s][r][p] (+= if accum)
 * sum_{c<C,t<9} W[r][c*9+t] * tap for the nseg*L columns (sample s row r at
 * out + s*ss + r*rs), W packed by loom__gemm_pack_w (M x 9C).
 * loom__shift_dw (9 taps only): dw[co][ci][t] += sum over the columns of
 * dy[co][j] * tap (dy as segments of the same shape).  Available where loom__gemm_wb is
 * (loom__shift_applies is 0 elsewhere).  Thread: any (each call writes only
 * what it names). */
typedef struct {
    int n;                    /* taps: 9 (loom__shift_taps), fewer for loom__shift_taps_dx2 */
    ptrdiff_t off[9];         /* offset of tap t from the column in its channel's row */
    signed char di[9], dj[9]; /* its shift in rows and columns of the source plane */
} loom__taps_t;
int loom__shift_applies(const loom_conv_desc_t *d, int h, int w);
void loom__shift_taps(int stride, int wo, size_t Lq, loom__taps_t *tp);
void loom__shift_phases(const float *x, size_t xs, int C, int m, int h, int w, float *xq, size_t Lq);
/* The stride-2 data gradient, phase by phase: phase (a, b) of dx (rows 2i+a,
 * columns 2j+b) is a loom__shift_gemm over dy (packed, [co][Lq]) with the n
 * (1, 2 or 4) taps that reach it, kernel taps kt[0..n) (weights packed as
 * W'[ci][co*n + t] = W[co][ci][kt[t]]); returns n.  loom__shift_merge writes
 * (or adds) phases (a, 0) and (a, 1) of m samples ([s][c][qs] each) into the
 * rows 2i+a of dx (sample stride xs). */
int loom__shift_taps_dx2(int a, int b, int wo, loom__taps_t *tp, int kt[9]);
void loom__shift_merge(const float *q0, const float *q1, size_t qs, int C, int m, int h, int w,
                       int a, float *dx, size_t xs, int accum);
size_t loom__shift_mask_count(size_t L);
void loom__shift_masks(const loom__taps_t *tp, int h, int w, size_t L, uint16_t *mt);
void loom__shift_gemm(int M, int C, const loom__taps_t *tp, const float *wp, const uint16_t *mt,
                      const float *src, size_t ld, size_t gs, int nseg, size_t L, size_t P,
                      float *out, size_t ss, size_t rs, int accum);
void loom__shift_dw(int cout, int cin, const loom__taps_t *tp, const uint16_t *mt, const float *dy,
                    size_t ldy, size_t gdy, const float *x, size_t ldx, size_t gx, int nseg, size_t L,
                    float *dw);

/* Fused layers for the single-process executor (model.c; layers.c): batch
 * norm whose output goes through an in-place ReLU (forward writes
 * max(0, bn(x)); backward takes dy of the ReLU's output ry and counts it where
 * ry > 0), a residual add followed by one (forward y = max(0, a + b); backward
 * relu_backward2 writes or adds, per acc0/acc1, the masked dy into both
 * inputs' gradients, either may be NULL).  Thread: the model's (they split the
 * work over Loom's threads). */
void loom__bn_forward_relu(const loom_bn_desc_t *d, int training, loom_shape_t s, const float *x,
                           const float *gamma, const float *beta, float *running_mean,
                           float *running_var, float *save_mean, float *save_invstd, float *y);
void loom__bn_backward_relu(loom_shape_t s, const float *x, const float *gamma,
                            const float *save_mean, const float *save_invstd, const float *ry,
                            const float *dy, float *dx, int accum_dx, float *dgamma, float *dbeta);
void loom__add_relu_forward(size_t n, const float *a, const float *b, float *y);
void loom__relu_backward2(size_t n, const float *y, const float *dy, float *d0, int acc0, float *d1,
                          int acc1);

/* The ReLUs that model.c's fusion plan folded into their producer, and a
 * switch back to running every layer alone (for tests comparing the two).
 * Thread: the model's. */
int loom__model_fused_count(const loom_model_t *m);
void loom__model_unfuse(loom_model_t *m);

/* y = x or y += x, split over the Loom threads. */
void loom__copy_or_add(size_t n, const float *x, float *y, int accum);
/* Batch-norm sums over one channel's slice of one sample (layers.c): in
 * SUM_LANES fixed-order float lanes, so they vectorise and stay
 * deterministic; the lanes are combined in double. Shared by the
 * single-process batch norm and the spatial one (spatial.c). Any thread. */
double loom__sum_f(const float *x, size_t n);
double loom__sum_sq_dev(const float *x, size_t n, float m);
void loom__sum_dy_dyx(const float *g, const float *x, size_t n, float m, double *sg, double *sgx);

/* Backward of the layers with no parameters and no neighbourhood (relu,
 * sigmoid, add, pixel shuffle, scale), shared by the single-process and the
 * spatial executors: `is` is the input shape at the batch run, in/accum the
 * layer's inputs and whether their gradients are added to, r the shuffle
 * factor, alpha the scale, dx (NULL: not needed)
 * the first input's gradient. Returns 1 if `type` is one of them, 0 if not
 * (nothing done). Thread: the model's. */
int loom__backward_plain(loom_model_t *m, loom_op_type_t type, const int in[2],
                         const int accum[2], loom_shape_t is, int r, float alpha,
                         const float *y, const float *dy, float *dx, int acc);

/* Little-endian fields of Loom's file formats (checkpoints, saved weights). Any thread. */
static inline void loom__put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static inline void loom__put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint32_t loom__get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static inline uint64_t loom__get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#endif
