/*
 * conv_shift.c - 3x3 convolutions with padding 1, stride 1 (the output the
 * size of the input) or stride 2 on even sizes, as implicit GEMM: the rows
 * of the column matrix are never written.  Row (c, t) of im2col, tap t = (ki, kj), is channel c of
 * the input shifted by delta_t = (ki-1)*w + (kj-1) floats, with the lanes
 * whose shifted position falls outside the image set to zero; the kernels
 * here read it so, with AVX-512 masked loads, from the input itself:
 *
 *   loom__shift_gemm  out[s][r][p] (+)= sum_{c,t} W[r][c*9+t] * x[s][c][p+delta_t]
 *                     (forward with the weights; the data gradient of a
 *                     stride-1 convolution with the flipped weights on dy)
 *   loom__shift_dw    dw[co][ci][t] += sum_{s,p} dy[s][co][p] * x[s][ci][p+delta_t]
 *                     (the weight gradient)
 *
 * The input is read as segments: segment g's channel c at base + g*gs +
 * c*ld, L columns each, whole samples of P = h*w positions (one sample per
 * segment where P is a multiple of 16; elsewhere the caller packs m samples
 * side by side into one segment, so no vector straddles two images' rows).
 * The masks depend only on the column's position in its sample, so one
 * table (loom__shift_masks) serves every segment: 9 taps x 16 lanes per
 * 16-column vector, lanes at or past L cleared.
 *
 * Stride 2: the input split into its four phases (even/odd rows x columns,
 * loom__shift_phases) makes each tap a shifted read of one phase (offsets
 * and masks from a loom__taps_t instead of delta_t), so the same kernels
 * serve forward and weight gradient; the data gradient is computed phase by
 * phase of dx (loom__shift_taps_dx2: 1, 2 or 4 taps, shifts of dy by 0 or 1)
 * and interleaved back (loom__shift_merge).
 *
 * Cost: loom__shift_gemm, 2*M*C*9*L flops per segment in conv_gemm.c's
 * register tile (8 rows x 48 columns, 24 multiply-adds per k; 3 masked
 * loads, 3 mask loads and 8 broadcasts), the input block (C rows of 48 + 2w
 * + 2 floats) read from L1 once per 8 rows of W.  loom__shift_dw, 2*cout*
 * cin*9*L flops per segment in a tile of 3 output channels x 9 taps (27
 * accumulators over 16 lanes; per vector 3 loads of dy, 9 masked loads of x
 * and their 9 masks), reduced across lanes once per (tile, input channel,
 * call).  Against im2col + sgemm this saves writing and reading the column
 * matrix (9 times the input) and, for the weight gradient, the sgemm's
 * packing copies.  Summation order is fixed: results are the same bits from
 * run to run; loom__shift_gemm sums over k in im2col's row order, so it
 * gives the bits of loom__gemm_wb on the column matrix.
 *
 * Only with AVX-512 (loom__gemm_wb_available); conv.c uses it only then.
 */
#include "internal.h"

#ifdef __AVX512F__
#include <immintrin.h>

#include "conv_store.h"
#endif

#define MR 8  /* rows of W per register tile (loom__gemm_pack_w's blocks) */
#define NV 3  /* 16-float vectors per register tile */
#define NR (16 * NV)
#define KK 9  /* taps */
#define CT 3  /* output channels per weight-gradient tile */

#ifdef __AVX512F__
#define INLINE static inline __attribute__((always_inline))
#endif

int loom__shift_applies(const loom_conv_desc_t *d, int h, int w)
{
    if (!loom__gemm_wb_available() || d->kh != 3 || d->kw != 3 || d->pad_h != 1 ||
        d->pad_w != 1 || d->dil_h != 1 || d->dil_w != 1 || d->groups != 1 ||
        d->stride_h != d->stride_w)
        return 0;
    if (d->stride_h == 1)
        return 1;
    return d->stride_h == 2 && h % 2 == 0 && w % 2 == 0;
}

void loom__shift_taps(int stride, int wo, size_t Lq, loom__taps_t *tp)
{
    tp->n = KK;
    for (int t = 0; t < KK; t++) {
        int ki = t / 3, kj = t % 3;
        if (stride == 1) {
            tp->di[t] = (signed char)(ki - 1), tp->dj[t] = (signed char)(kj - 1);
            tp->off[t] = (ptrdiff_t)(ki - 1) * wo + (kj - 1);
            continue;
        }
        /* input row 2*oh + ki - 1: phase a = (ki != 1), row oh - (ki == 0) of it */
        int a = ki != 1, b = kj != 1;
        tp->di[t] = (signed char)-(ki == 0), tp->dj[t] = (signed char)-(kj == 0);
        tp->off[t] = (ptrdiff_t)((size_t)(2 * a + b) * Lq) + (ptrdiff_t)tp->di[t] * wo + tp->dj[t];
    }
}

/* d0[j] = r[2j], d1[j] = r[2j+1] for j < n. */
static void split_row(const float *r, int n, float *d0, float *d1)
{
    int j = 0;
#ifdef __AVX512F__
    const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
    for (; j < n; j += 16) { /* 32 inputs to 16 + 16 outputs, the last ones masked */
        int k = LOOM_MIN(16, n - j), lo = LOOM_MIN(16, 2 * k), hi = 2 * k - lo;
        __m512 a = _mm512_maskz_loadu_ps((__mmask16)((1u << lo) - 1u), r + 2 * j);
        __m512 b = _mm512_maskz_loadu_ps((__mmask16)((1u << hi) - 1u), r + 2 * j + 16);
        __mmask16 km = (__mmask16)((1u << k) - 1u);
        _mm512_mask_storeu_ps(d0 + j, km, _mm512_permutex2var_ps(a, ev, b));
        _mm512_mask_storeu_ps(d1 + j, km, _mm512_permutex2var_ps(a, od, b));
    }
#endif
    for (; j < n; j++)
        d0[j] = r[2 * j], d1[j] = r[2 * j + 1];
}

/* Phase a of the stride-2 data gradient's rows: a = 0 takes kernel row 1
 * at the same dy row, a = 1 kernel row 0 from the next dy row and kernel
 * row 2 from the same one (input row 2*i + a = 2*oh + k - 1). */
static int dx2_rows(int a, int k[2], int e[2])
{
    if (a == 0) {
        k[0] = 1, e[0] = 0;
        return 1;
    }
    k[0] = 0, e[0] = 1, k[1] = 2, e[1] = 0;
    return 2;
}

int loom__shift_taps_dx2(int a, int b, int wo, loom__taps_t *tp, int kt[9])
{
    int ki[2], ei[2], kj[2], ej[2], ni = dx2_rows(a, ki, ei), nj = dx2_rows(b, kj, ej), n = 0;
    for (int u = 0; u < ni; u++)
        for (int v = 0; v < nj; v++, n++) {
            kt[n] = ki[u] * 3 + kj[v];
            tp->di[n] = (signed char)ei[u], tp->dj[n] = (signed char)ej[v];
            tp->off[n] = (ptrdiff_t)ei[u] * wo + ej[v];
        }
    tp->n = n;
    return n;
}

/* d[2j] = p0[j], d[2j+1] = p1[j] for j < n, or added (accum). */
static void merge_row(const float *p0, const float *p1, int n, float *d, int accum)
{
    int j = 0;
#ifdef __AVX512F__
    const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
    for (; j < n; j += 16) {
        int k = LOOM_MIN(16, n - j), nlo = LOOM_MIN(16, 2 * k), nhi = 2 * k - nlo;
        __mmask16 km = (__mmask16)((1u << k) - 1u), klo = (__mmask16)((1u << nlo) - 1u),
                  khi = (__mmask16)((1u << nhi) - 1u);
        __m512 a = _mm512_maskz_loadu_ps(km, p0 + j), b = _mm512_maskz_loadu_ps(km, p1 + j);
        __m512 x0 = _mm512_permutex2var_ps(a, lo, b), x1 = _mm512_permutex2var_ps(a, hi, b);
        if (accum) {
            x0 = _mm512_add_ps(x0, _mm512_maskz_loadu_ps(klo, d + 2 * j));
            x1 = _mm512_add_ps(x1, _mm512_maskz_loadu_ps(khi, d + 2 * j + 16));
        }
        _mm512_mask_storeu_ps(d + 2 * j, klo, x0);
        _mm512_mask_storeu_ps(d + 2 * j + 16, khi, x1);
    }
#endif
    for (; j < n; j++) {
        d[2 * j] = accum ? d[2 * j] + p0[j] : p0[j];
        d[2 * j + 1] = accum ? d[2 * j + 1] + p1[j] : p1[j];
    }
}

void loom__shift_merge(const float *q0, const float *q1, size_t qs, int C, int m, int h, int w,
                       int a, float *dx, size_t xs, int accum)
{
    const int ho = h / 2, wo = w / 2;
    for (int s = 0; s < m; s++)
        for (int c = 0; c < C; c++) {
            size_t o = ((size_t)s * C + c) * qs;
            float *dc = dx + (size_t)s * xs + (size_t)c * h * w;
            for (int i = 0; i < ho; i++)
                merge_row(q0 + o + (size_t)i * wo, q1 + o + (size_t)i * wo, wo,
                          dc + (size_t)(2 * i + a) * w, accum);
        }
}

void loom__shift_phases(const float *x, size_t xs, int C, int m, int h, int w, float *xq, size_t Lq)
{
    const int ho = h / 2, wo = w / 2;
    const size_t Pq = (size_t)ho * wo;
    for (int c = 0; c < C; c++)
        for (int s = 0; s < m; s++) {
            const float *src = x + (size_t)s * xs + (size_t)c * h * w;
            float *dst = xq + (size_t)c * 4 * Lq + (size_t)s * Pq;
            for (int a = 0; a < 2; a++)
                for (int i = 0; i < ho; i++) {
                    float *d0 = dst + (size_t)(2 * a) * Lq + (size_t)i * wo;
                    split_row(src + (size_t)(2 * i + a) * w, wo, d0, d0 + Lq);
                }
        }
}

size_t loom__shift_mask_count(size_t L) { return (L + NR - 1) / NR * NV * KK; }

void loom__shift_masks(const loom__taps_t *tp, int h, int w, size_t L, uint16_t *mt)
{
    const size_t P = (size_t)h * w, nvec = (L + NR - 1) / NR * NV;
    for (size_t v = 0; v < nvec; v++) {
        uint16_t m[KK] = {0};
        for (int l = 0; l < 16; l++) {
            size_t j = v * 16 + (size_t)l;
            if (j >= L)
                break;
            size_t p = j % P;
            int oh = (int)(p / (size_t)w), ow = (int)(p % (size_t)w);
            for (int t = 0; t < tp->n; t++) {
                int ih = oh + tp->di[t], iw = ow + tp->dj[t];
                if (ih >= 0 && ih < h && iw >= 0 && iw < w)
                    m[t] |= (uint16_t)(1u << l);
            }
        }
        memcpy(mt + v * KK, m, sizeof m);
    }
}

#ifdef __AVX512F__
/* Where a block's vectors go: vector v's nl[v] lanes start at o[v] (row 0)
 * when they lie in one sample (whole[v]), else at output column J[v]. */
typedef struct {
    float *o[NV];
    size_t J[NV];
    int nl[NV], whole[NV];
} dest_t;

/* One 8 x (16*nv) block of loom__shift_gemm (nv a constant where it is
 * inlined): rows [r0, r0+rows) of the output; b is the segment's channel 0
 * plus the block's first column. */
INLINE void gemm_block(const int nv, const int nt, int C, const ptrdiff_t *dl, const float *wb,
                       const uint16_t *mt, const float *b, size_t ld, int r0, int rows,
                       const dest_t *dst, size_t P, float *out, size_t ss, size_t rs, int accum)
{
    __m512 c[MR][NV];
    _Pragma("GCC unroll 9")
    for (int r = 0; r < MR; r++)
        _Pragma("GCC unroll 9")
        for (int v = 0; v < nv; v++)
            c[r][v] = _mm512_setzero_ps();
    for (int ch = 0; ch < C; ch++) {
        const float *bc = b + (size_t)ch * ld;
        const float *wc = wb + (size_t)ch * nt * MR;
        _Pragma("GCC unroll 9")
        for (int t = 0; t < nt; t++) {
            const float *bk = bc + dl[t];
            __m512 bv[NV];
            _Pragma("GCC unroll 9")
            for (int v = 0; v < nv; v++)
                bv[v] = _mm512_maskz_loadu_ps((__mmask16)mt[v * KK + t], bk + 16 * v);
            const float *wk = wc + t * MR;
            _Pragma("GCC unroll 9")
            for (int r = 0; r < MR; r++) {
                __m512 a = _mm512_set1_ps(wk[r]);
                _Pragma("GCC unroll 9")
                for (int v = 0; v < nv; v++)
                    c[r][v] = _mm512_fmadd_ps(a, bv[v], c[r][v]);
            }
        }
    }
    _Pragma("GCC unroll 9")
    for (int r = 0; r < MR; r++)
        _Pragma("GCC unroll 9")
        for (int v = 0; v < nv; v++) {
            if (r >= rows)
                continue;
            if (!dst->whole[v]) {
                loom__store_lanes(c[r][v], dst->J[v], dst->nl[v], P, out, ss, rs, r0 + r, accum);
                continue;
            }
            float *o = dst->o[v] + (size_t)(r0 + r) * rs;
            __mmask16 k = (__mmask16)((1u << dst->nl[v]) - 1u);
            __m512 y = c[r][v];
            if (accum)
                y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(k, o));
            _mm512_mask_storeu_ps(o, k, y);
        }
}
#endif

/* Thread contract: any thread; reads wp, mt and the segments, writes only
 * the M x (nseg*L) outputs it names. */
void loom__shift_gemm(int M, int C, const loom__taps_t *tp, const float *wp, const uint16_t *mt,
                      const float *src, size_t ld, size_t gs, int nseg, size_t L, size_t P,
                      float *out, size_t ss, size_t rs, int accum)
{
#ifdef __AVX512F__
    const ptrdiff_t *off = tp->off;
    const int nb = (M + MR - 1) / MR;
    const size_t K = (size_t)C * tp->n;
    for (int g = 0; g < nseg; g++) {
        const float *sg = src + (size_t)g * gs;
        for (size_t j0 = 0; j0 < L; j0 += NR) {
            const int ncol = (int)LOOM_MIN((size_t)NR, L - j0), nv = (ncol + 15) / 16;
            const uint16_t *mb = mt + j0 / 16 * KK;
            dest_t dst;
            for (int v = 0; v < nv; v++) { /* one division per vector, not per row */
                size_t J = (size_t)g * L + j0 + 16 * (size_t)v, s = J / P, p = J - s * P;
                dst.nl[v] = LOOM_MIN(16, ncol - 16 * v);
                dst.J[v] = J;
                dst.whole[v] = p + (size_t)dst.nl[v] <= P;
                dst.o[v] = out + s * ss + p;
            }
            for (int ib = 0; ib < nb; ib++) {
                const float *wb = wp + (size_t)ib * K * MR;
                const int rows = LOOM_MIN(MR, M - ib * MR);
                if (tp->n == KK && nv == 3) /* the 3x3 taps: their loop unrolled */
                    gemm_block(3, KK, C, off, wb, mb, sg + j0, ld, ib * MR, rows, &dst, P, out,
                               ss, rs, accum);
                else if (tp->n == KK && nv == 2)
                    gemm_block(2, KK, C, off, wb, mb, sg + j0, ld, ib * MR, rows, &dst, P, out,
                               ss, rs, accum);
                else if (tp->n == KK)
                    gemm_block(1, KK, C, off, wb, mb, sg + j0, ld, ib * MR, rows, &dst, P, out,
                               ss, rs, accum);
                else if (nv == 3)
                    gemm_block(3, tp->n, C, off, wb, mb, sg + j0, ld, ib * MR, rows, &dst, P, out,
                               ss, rs, accum);
                else if (nv == 2)
                    gemm_block(2, tp->n, C, off, wb, mb, sg + j0, ld, ib * MR, rows, &dst, P, out,
                               ss, rs, accum);
                else
                    gemm_block(1, tp->n, C, off, wb, mb, sg + j0, ld, ib * MR, rows, &dst, P, out,
                               ss, rs, accum);
            }
        }
    }
#else
    (void)M, (void)C, (void)tp, (void)wp, (void)mt, (void)src, (void)ld, (void)gs, (void)nseg,
        (void)L, (void)P, (void)out, (void)ss, (void)rs, (void)accum;
#endif
}

#ifdef __AVX512F__
/* The weight gradient of nco (constant where inlined) output channels from
 * co, input channel ci: 9 taps each, summed over all segments' columns. */
INLINE void dw_tile(const int nco, int cin, const ptrdiff_t *dl, const uint16_t *mt,
                    const float *dy, size_t ldy, size_t gdy, const float *x, size_t gx,
                    int nseg, size_t L, float *dw)
{
    const size_t nvec = (L + 15) / 16;
    __m512 acc[CT][KK];
    _Pragma("GCC unroll 9")
    for (int o = 0; o < nco; o++)
        _Pragma("GCC unroll 9")
        for (int t = 0; t < KK; t++)
            acc[o][t] = _mm512_setzero_ps();
    for (int g = 0; g < nseg; g++) {
        const float *dg = dy + (size_t)g * gdy, *xg = x + (size_t)g * gx;
        for (size_t v = 0; v < nvec; v++) {
            const uint16_t *mv = mt + v * KK;
            const __mmask16 kc = (__mmask16)mv[4]; /* the centre tap: the lanes before L */
            __m512 d[CT];
            _Pragma("GCC unroll 9")
            for (int o = 0; o < nco; o++)
                d[o] = _mm512_maskz_loadu_ps(kc, dg + (size_t)o * ldy + v * 16);
            const float *xv = xg + v * 16;
            _Pragma("GCC unroll 9")
            for (int t = 0; t < KK; t++) {
                __m512 xs = _mm512_maskz_loadu_ps((__mmask16)mv[t], xv + dl[t]);
                _Pragma("GCC unroll 9")
                for (int o = 0; o < nco; o++)
                    acc[o][t] = _mm512_fmadd_ps(d[o], xs, acc[o][t]);
            }
        }
    }
    _Pragma("GCC unroll 9")
    for (int o = 0; o < nco; o++)
        _Pragma("GCC unroll 9")
        for (int t = 0; t < KK; t++)
            dw[((size_t)o * cin) * KK + t] += _mm512_reduce_add_ps(acc[o][t]);
}
#endif

/* Thread contract: any thread; reads mt, dy and x, adds to dw (the caller's,
 * one per thread). */
void loom__shift_dw(int cout, int cin, const loom__taps_t *tp, const uint16_t *mt, const float *dy,
                    size_t ldy, size_t gdy, const float *x, size_t ldx, size_t gx, int nseg,
                    size_t L, float *dw)
{
#ifdef __AVX512F__
    const ptrdiff_t *off = tp->off;
    for (int co = 0; co < cout; co += CT) {
        const int nco = LOOM_MIN(CT, cout - co);
        const float *dc = dy + (size_t)co * ldy;
        for (int ci = 0; ci < cin; ci++) {
            const float *xc = x + (size_t)ci * ldx;
            float *o = dw + ((size_t)co * cin + ci) * KK;
            if (nco == 3)
                dw_tile(3, cin, off, mt, dc, ldy, gdy, xc, gx, nseg, L, o);
            else if (nco == 2)
                dw_tile(2, cin, off, mt, dc, ldy, gdy, xc, gx, nseg, L, o);
            else
                dw_tile(1, cin, off, mt, dc, ldy, gdy, xc, gx, nseg, L, o);
        }
    }
#else
    (void)cout, (void)cin, (void)tp, (void)mt, (void)dy, (void)ldy, (void)gdy, (void)x, (void)ldx,
        (void)gx, (void)nseg, (void)L, (void)dw;
#endif
}
