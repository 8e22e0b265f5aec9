/*
 * conv_gemm.c - the weights-times-columns product of im2col convolution,
 * written for the shapes of small convolutions (few output rows, a long
 * column matrix that is already in cache) so that nothing is copied twice:
 *
 *   out[s][r][p] (+)= sum_k W[r][k] * B[k][s*P + p]   r < M, k < K, s < m, p < P
 *
 * B is the column matrix as im2col wrote it (row-major, K x m*P, leading
 * dimension ldb): the micro-kernel reads it in place, 48 columns (three
 * 16-float vectors) by K rows at a time, instead of copying it into packed
 * panels first as a general sgemm does (OpenBLAS's "itcopy"); W is small
 * (at most 64 x 576 in ResNet-20) and is copied once per call into blocks
 * of 8 rows interleaved by k.  The results go straight to each sample's
 * rows of out (row r of sample s at out + s*ss + r*rs), so the packed
 * samples need no unpacking copy either.
 *
 * Cost: 2*M*K*m*P flops (M rounded up to 8), in a register tile of 8 rows x
 * 48 columns: per k, 3 vector loads of B and 8 broadcasts of W for 24
 * vector multiply-adds; B's 48-column block (K x 192 bytes, at most 110 KB)
 * is read once per 8 rows of W from L1/L2.  Plus M*K floats of weight
 * packing per call.
 *
 * Only with AVX-512 (loom__gemm_wb_available); elsewhere conv.c keeps
 * cblas_sgemm and an unpacking copy.  Summation order over k is fixed (one
 * chain per output), so results are the same bits from run to run.
 */
#include "internal.h"

#ifdef __AVX512F__
#include <immintrin.h>

#include "conv_store.h"
#endif

#define MR 8  /* rows of W per register tile */
#define NV 3  /* 16-float vectors of columns per register tile */
#define NR (16 * NV)
#define PF 6  /* rows of B prefetched ahead */

int loom__gemm_wb_available(void)
{
#ifdef __AVX512F__
    return 1;
#else
    return 0;
#endif
}

size_t loom__gemm_wpack_floats(int M, int K) { return (size_t)(M + MR - 1) / MR * MR * (size_t)K; }

/* wp[(ib*K + k)*MR + r] = W[ib*MR + r][k], zero for rows >= M. */
void loom__gemm_pack_w(int M, int K, const float *w, size_t ldw, float *wp)
{
    int nb = (M + MR - 1) / MR;
    for (int ib = 0; ib < nb; ib++)
        for (int r = 0; r < MR; r++) {
            int row = ib * MR + r;
            float *dst = wp + (size_t)ib * K * MR + r;
            if (row < M) {
                const float *src = w + (size_t)row * ldw;
                for (int k = 0; k < K; k++)
                    dst[(size_t)k * MR] = src[k];
            } else {
                for (int k = 0; k < K; k++)
                    dst[(size_t)k * MR] = 0.0f;
            }
        }
}

/* Thread contract: any thread; reads wp and b, writes only the M x (m*P)
 * outputs it names (callers give each thread its own samples). */
void loom__gemm_wb(int M, int K, const float *wp, const float *b, size_t ldb, int m, size_t P,
                   float *out, size_t ss, size_t rs, int accum)
{
#ifdef __AVX512F__
    const size_t N = (size_t)m * P;
    const int nb = (M + MR - 1) / MR;
    for (size_t j0 = 0; j0 < N; j0 += NR) {
        int ncol = (int)LOOM_MIN((size_t)NR, N - j0);
        int nlane[NV];
        __mmask16 km[NV];
        for (int v = 0; v < NV; v++) {
            int l = ncol - 16 * v;
            nlane[v] = l < 0 ? 0 : (l > 16 ? 16 : l);
            km[v] = (__mmask16)((1u << nlane[v]) - 1u);
        }
        const float *bj = b + j0;
        for (int ib = 0; ib < nb; ib++) {
            const float *wb = wp + (size_t)ib * K * MR;
            __m512 c[MR][NV];
            for (int r = 0; r < MR; r++)
                for (int v = 0; v < NV; v++)
                    c[r][v] = _mm512_setzero_ps();
            if (ncol == NR) {
                for (int k = 0; k < K; k++) {
                    const float *bk = bj + (size_t)k * ldb;
                    /* B's rows are ldb apart: fetch the row PF ahead into L1 */
                    const char *pf = (const char *)(bk + PF * ldb);
                    _mm_prefetch(pf, _MM_HINT_T0);
                    _mm_prefetch(pf + 64, _MM_HINT_T0);
                    _mm_prefetch(pf + 128, _MM_HINT_T0);
                    _mm_prefetch(pf + 188, _MM_HINT_T0);
                    __m512 b0 = _mm512_loadu_ps(bk), b1 = _mm512_loadu_ps(bk + 16),
                           b2 = _mm512_loadu_ps(bk + 32);
                    const float *wk = wb + (size_t)k * MR;
                    for (int r = 0; r < MR; r++) {
                        __m512 a = _mm512_set1_ps(wk[r]);
                        c[r][0] = _mm512_fmadd_ps(a, b0, c[r][0]);
                        c[r][1] = _mm512_fmadd_ps(a, b1, c[r][1]);
                        c[r][2] = _mm512_fmadd_ps(a, b2, c[r][2]);
                    }
                }
            } else { /* the last, partial block: masked loads never read past a row */
                for (int k = 0; k < K; k++) {
                    const float *bk = bj + (size_t)k * ldb;
                    __m512 b0 = _mm512_maskz_loadu_ps(km[0], bk),
                           b1 = _mm512_maskz_loadu_ps(km[1], bk + 16),
                           b2 = _mm512_maskz_loadu_ps(km[2], bk + 32);
                    const float *wk = wb + (size_t)k * MR;
                    for (int r = 0; r < MR; r++) {
                        __m512 a = _mm512_set1_ps(wk[r]);
                        c[r][0] = _mm512_fmadd_ps(a, b0, c[r][0]);
                        c[r][1] = _mm512_fmadd_ps(a, b1, c[r][1]);
                        c[r][2] = _mm512_fmadd_ps(a, b2, c[r][2]);
                    }
                }
            }
            int rows = LOOM_MIN(MR, M - ib * MR);
            for (int r = 0; r < rows; r++)
                for (int v = 0; v < NV; v++)
                    if (nlane[v] > 0)
                        loom__store_lanes(c[r][v], j0 + 16 * (size_t)v, nlane[v], P, out, ss, rs,
                                    ib * MR + r, accum);
        }
    }
#else
    (void)M, (void)K, (void)wp, (void)b, (void)ldb, (void)m, (void)P, (void)out, (void)ss,
        (void)rs, (void)accum;
#endif
}
