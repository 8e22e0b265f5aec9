/*
 * conv_wino.c - 3x3, stride 1, undilated, ungrouped convolution by
 * Winograd's minimal filtering F(4x4, 3x3) (Lavin and Gray 2016, "Fast
 * Algorithms for Convolutional Neural Networks"), forward and both
 * gradients.
 *
 * A 4x4 block of outputs is A^T [(G g G^T) . (B^T d B)] A, where d is the
 * 6x6 input tile under it, g the 3x3 kernel and "." the element-wise
 * product.  Summed over input channels, the element-wise products become 36
 * independent matrix products, one per position xi of the 6x6 transformed
 * tile:  M[xi] (cout x T) = U[xi] (cout x cin) * V[xi] (cin x T), T tiles.
 *
 * Cost per 4x4 output tile and (cin, cout) pair: 36 multiply-adds (in 36
 * sgemms) against 144 for im2col + sgemm; plus the transforms: about 150
 * flops per tile and input channel (B^T d B), 100 per tile and output
 * channel (A^T M A), and the weights' once per call.
 *
 * The three products of training:
 *   forward  y  = conv(x, g), padding p
 *   data     dx = conv(dy, g'), padding 2 - p, g' the kernel flipped in
 *                 both axes with cin and cout swapped (the same pass)
 *   weight   dg = G^T [sum over tiles (A dy A^T) . (B^T x B)] G, the adjoint
 *                 of the forward formula: per xi a product of dy's transform
 *                 (cout x T) with x's (cin x T)^T, summed over the tiles into
 *                 a private 36 x cout x cin array per thread, added in thread
 *                 order, then transformed back once.
 *
 * The batch's tile rows (sample, tile row) are split statically over the
 * threads; each thread transforms a chunk of whole tile rows at a time (T
 * tiles: its transforms stay in L2 for the 36 sgemms).  Every transform
 * runs along a tile row, vectorised over its tiles; input rows are split by
 * column phase first (AVX-512 permutes where available), so no tile is
 * gathered element by element.  No reduction depends on the timing: the
 * results are the same bits from run to run for a given thread count.
 */
#include "internal.h"

#include <cblas.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#define NX 36    /* transformed positions of a 6x6 tile */
/* Floats of one chunk's two transformed arrays (V and M, 36 x C x T each):
 * about 1.5 MB keeps them within the 2 MB L2 for the sgemms. */
#define CHUNK_FLOATS (384u * 1024u)
#define T_MIN 32

/* One pass (forward, data gradient or weight gradient): its input of C_in
 * channels of h x w, padding ph/pw, output grid ho x wo cut in 4x4 tiles. */
typedef struct {
    int n, h, w, ph, pw, ho, wo, th, tw;
    size_t rows; /* tile rows in the batch: n * th */
} grid_t;

static grid_t make_grid(int n, int h, int w, int ph, int pw)
{
    grid_t g;
    g.n = n, g.h = h, g.w = w, g.ph = ph, g.pw = pw;
    g.ho = h + 2 * ph - 2, g.wo = w + 2 * pw - 2;
    g.th = (g.ho + 3) / 4, g.tw = (g.wo + 3) / 4;
    g.rows = (size_t)n * (size_t)g.th;
    return g;
}

int loom__wino_applies(const loom_conv_desc_t *d)
{
    return d->kh == 3 && d->kw == 3 && d->stride_h == 1 && d->stride_w == 1 && d->dil_h == 1 &&
           d->dil_w == 1 && d->groups == 1 && d->pad_h <= 2 && d->pad_w <= 2;
}

static size_t row_scratch(int tw);

/* Tile rows per chunk for rows of tw tiles: about CHUNK_FLOATS of V and M,
 * at least T_MIN tiles, no more than a thread's share of the batch. */
static size_t chunk_rows(const loom_conv_desc_t *d, int tw, size_t rows, int nt)
{
    size_t t = CHUNK_FLOATS / ((size_t)NX * (size_t)(d->cin + d->cout));
    t = LOOM_MAX(t, (size_t)T_MIN);
    size_t r = LOOM_MAX(t / (size_t)tw, 1);
    return LOOM_MIN(r, (rows + (size_t)nt - 1) / (size_t)nt);
}

/* Workspace: shared U (36 x cout x cin, the transformed weights of the
 * pass), then per thread V (36 x max(cin, cout) x T), M (the same), the
 * weight gradient's private sums dU (36 x cout x cin) and the tile-row
 * scratch.  Offsets in floats; T = rows per chunk * tiles per row, the
 * larger of the passes' grids. */
typedef struct {
    size_t T, u, per_thread, v, m, du, scr;
} wlayout_t;

static size_t r16(size_t f) { return (f + 15) & ~(size_t)15; }

static wlayout_t wlayout(const loom_conv_desc_t *d, int n, int h, int w, int nt)
{
    wlayout_t L;
    grid_t g = make_grid(n, h, w, d->pad_h, d->pad_w);              /* forward, weight gradient */
    grid_t gd = make_grid(n, g.ho, g.wo, 2 - d->pad_h, 2 - d->pad_w); /* data gradient */
    size_t cm = (size_t)LOOM_MAX(d->cin, d->cout), nw = (size_t)NX * d->cin * d->cout;
    size_t tf = chunk_rows(d, g.tw, g.rows, nt) * (size_t)g.tw;
    size_t td = chunk_rows(d, gd.tw, gd.rows, nt) * (size_t)gd.tw;
    L.T = LOOM_MAX(tf, td);
    L.u = r16(nw);
    L.v = 0;
    L.m = r16(NX * cm * L.T);
    L.du = L.m + r16(NX * cm * L.T);
    L.scr = L.du + r16(nw);
    L.per_thread = L.scr + r16(row_scratch(LOOM_MAX(g.tw, gd.tw)));
    return L;
}

size_t loom__wino_workspace(const loom_conv_desc_t *d, int n, int h, int w, int nt)
{
    wlayout_t L = wlayout(d, n, h, w, nt);
    return L.u + (size_t)nt * L.per_thread;
}

/* ------------------------------------------------------------ transforms */
/* The transforms work on one tile row at a time (tw tiles side by side):
 * every vector operation runs along the row's tiles, over contiguous
 * arrays.  The input rows are first split by column phase (x = 4t + p), so
 * that the 6 columns of tile t are phases 0..3 at t and phases 0..1 at
 * t + 1, and no tile is gathered element by element. */

/* G g for one 3-vector (rows of G: (1/4 0 0), (-1/6 -1/6 -1/6),
 * (-1/6 1/6 -1/6), (1/24 1/12 1/6), (1/24 -1/12 1/6), (0 0 1)). */
static inline void g3(const float *g, int gs, float *out, int os)
{
    float g0 = g[0], g1 = g[gs], g2 = g[2 * gs];
    out[0] = 0.25f * g0;
    out[os] = -(g0 + g1 + g2) / 6.0f;
    out[2 * os] = -(g0 - g1 + g2) / 6.0f;
    out[3 * os] = g0 / 24.0f + g1 / 12.0f + g2 / 6.0f;
    out[4 * os] = g0 / 24.0f - g1 / 12.0f + g2 / 6.0f;
    out[5 * os] = g2;
}

/* G^T u for one 6-vector (the adjoint of g3). */
static inline void gt6(const float *u, int us, float *out, int os)
{
    float u0 = u[0], u1 = u[us], u2 = u[2 * us], u3 = u[3 * us], u4 = u[4 * us], u5 = u[5 * us];
    out[0] = 0.25f * u0 - (u1 + u2) / 6.0f + (u3 + u4) / 24.0f;
    out[os] = (u2 - u1) / 6.0f + (u3 - u4) / 12.0f;
    out[2 * os] = (u3 + u4 - u1 - u2) / 6.0f + u5;
}

/* Scratch of one tile row, per thread (floats): the phase-split rows
 * (6 x 4 x (tw+1)) and the vertically transformed ones (6 x 4 x (tw+1)). */
/* the largest of input_row_tf (48 (tw+1)), grad_row_tf (40 tw) and
 * output_row_tf (28 tw, read up to 15 past) */
static size_t row_scratch(int tw) { return 48 * ((size_t)tw + 1) + 64; }

#ifdef __AVX512F__
/* Lanes k of a 16-float block starting at index `start` with 0 <= start + k < n. */
static inline __mmask16 valid16(long start, long n)
{
    long lo = start < 0 ? -start : 0, hi = n - start;
    if (hi > 16)
        hi = 16;
    if (hi <= lo)
        return 0;
    return (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}
#endif

/* ph[p][t] = row[4t + p - off] (zero outside [0, w)) for t < nt, phases
 * p = 0..3 at ph + p*nt (row NULL: all zero).  With AVX-512: masked loads
 * straight from the row (nothing outside it is read) and two permutes per
 * phase and 16 tiles. */
static void split_phases(const float *row, int w, int off, float *ph, size_t nt)
{
    if (!row) {
        memset(ph, 0, sizeof(float) * 4 * nt);
        return;
    }
#ifdef __AVX512F__
    const __m512i i0 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
    const __m512i one = _mm512_set1_epi32(1);
    for (size_t t = 0; t < nt; t += 16) {
        long x = 4 * (long)t - off;
        /* masked-off lanes are not accessed, so the address may lie outside */
        const float *r = (const float *)((uintptr_t)row + (uintptr_t)(x * (long)sizeof(float)));
        __m512 a = _mm512_maskz_loadu_ps(valid16(x, w), r);
        __m512 b = _mm512_maskz_loadu_ps(valid16(x + 16, w), r + 16);
        __m512 c = _mm512_maskz_loadu_ps(valid16(x + 32, w), r + 32);
        __m512 d = _mm512_maskz_loadu_ps(valid16(x + 48, w), r + 48);
        __mmask16 mt = valid16((long)t, (long)nt);
        __m512i idx = i0;
        for (int p = 0; p < 4; p++, idx = _mm512_add_epi32(idx, one)) {
            __m512 lo = _mm512_permutex2var_ps(a, idx, b), hi = _mm512_permutex2var_ps(c, idx, d);
            _mm512_mask_storeu_ps(ph + (size_t)p * nt + t, mt, _mm512_mask_blend_ps(0xFF00, lo, hi));
        }
    }
#else
    for (int p = 0; p < 4; p++)
        for (size_t t = 0; t < nt; t++) {
            long x = 4 * (long)t + p - off;
            ph[(size_t)p * nt + t] = x >= 0 && x < w ? row[x] : 0.0f;
        }
#endif
}

/* dst[4t + b] = (or +=) q[b][t] for 4t + b < w (the inverse of
 * split_phases with off = 0); q's phases are nt >= w/4 long, readable up to
 * 15 floats past the last. */
static void merge_phases(const float *q, size_t nt, float *dst, int w, int accum)
{
#ifdef __AVX512F__
    const __m512i ilo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i ihi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const __m512i jlo = _mm512_setr_epi32(0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
    const __m512i jhi = _mm512_setr_epi32(8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31);
    for (size_t t = 0; 4 * (long)t < w; t += 16) {
        __m512 b0 = _mm512_loadu_ps(q + t), b1 = _mm512_loadu_ps(q + nt + t);
        __m512 b2 = _mm512_loadu_ps(q + 2 * nt + t), b3 = _mm512_loadu_ps(q + 3 * nt + t);
        /* e01l = b0[0] b1[0] b0[1] b1[1] ... b0[7] b1[7]; then pairs of pairs */
        __m512 e01l = _mm512_permutex2var_ps(b0, ilo, b1), e01h = _mm512_permutex2var_ps(b0, ihi, b1);
        __m512 e23l = _mm512_permutex2var_ps(b2, ilo, b3), e23h = _mm512_permutex2var_ps(b2, ihi, b3);
        __m512 v[4] = {_mm512_permutex2var_ps(e01l, jlo, e23l), _mm512_permutex2var_ps(e01l, jhi, e23l),
                       _mm512_permutex2var_ps(e01h, jlo, e23h), _mm512_permutex2var_ps(e01h, jhi, e23h)};
        for (int k = 0; k < 4; k++) {
            long x = 4 * (long)t + 16 * k;
            __mmask16 m = valid16(x, w);
            if (!m)
                break;
            if (accum)
                v[k] = _mm512_add_ps(v[k], _mm512_maskz_loadu_ps(m, dst + x));
            _mm512_mask_storeu_ps(dst + x, m, v[k]);
        }
    }
#else
    for (int x = 0; x < w; x++) {
        float v = q[(size_t)(x & 3) * nt + (size_t)(x >> 2)];
        dst[x] = accum ? dst[x] + v : v;
    }
#endif
}

/* V[xi][c][tb + t] = (B^T d B)[xi] for the tiles t < tw of tile row ti of
 * channel plane xc (h x w), for one channel c of C; V's rows are T long. */
static void input_row_tf(const grid_t *g, const float *xc, int ti, int c, int C, float *V, size_t T,
                         size_t tb, float *scr)
{
    const int tw = g->tw;
    const size_t nt = (size_t)tw + 1, ps = 4 * nt; /* ps: one row's 4 phases */
    float *ph = scr, *bt = scr + 6 * ps;
    for (int i = 0; i < 6; i++) {
        int y = 4 * ti - g->ph + i;
        split_phases(y >= 0 && y < g->h ? xc + (size_t)y * g->w : NULL, g->w, g->pw, ph + i * ps, nt);
    }
    /* vertical: bt[k] = sum_i B^T[k][i] ph[i], all phases and tiles at once;
     * rows of B^T: (4 0 -5 0 1 0), (0 -4 -4 1 1 0), (0 4 -4 -1 1 0),
     * (0 -2 -1 2 1 0), (0 2 -1 -2 1 0), (0 4 0 -5 0 1) */
    {
        const float *restrict d0 = ph, *restrict d1 = ph + ps, *restrict d2 = ph + 2 * ps;
        const float *restrict d3 = ph + 3 * ps, *restrict d4 = ph + 4 * ps, *restrict d5 = ph + 5 * ps;
        float *restrict o0 = bt, *restrict o1 = bt + ps, *restrict o2 = bt + 2 * ps;
        float *restrict o3 = bt + 3 * ps, *restrict o4 = bt + 4 * ps, *restrict o5 = bt + 5 * ps;
#pragma GCC ivdep
        for (size_t v = 0; v < ps; v++) {
            float a0 = d0[v], a1 = d1[v], a2 = d2[v], a3 = d3[v], a4 = d4[v], a5 = d5[v];
            o0[v] = 4.0f * a0 - 5.0f * a2 + a4;
            o1[v] = (a3 + a4) - 4.0f * (a1 + a2);
            o2[v] = (a4 - a3) + 4.0f * (a1 - a2);
            o3[v] = (a4 - a2) + 2.0f * (a3 - a1);
            o4[v] = (a4 - a2) - 2.0f * (a3 - a1);
            o5[v] = 4.0f * a1 - 5.0f * a3 + a5;
        }
    }
    /* horizontal: columns 0..5 of tile t are phases 0..3 at t, 0..1 at t+1 */
    for (int k = 0; k < 6; k++) {
        const float *restrict p0 = bt + k * ps, *restrict p1 = p0 + nt, *restrict p2 = p0 + 2 * nt;
        const float *restrict p3 = p0 + 3 * nt;
        float *restrict o = V + ((size_t)(k * 6) * C + c) * T + tb;
        const size_t os = (size_t)C * T;
#pragma GCC ivdep
        for (int t = 0; t < tw; t++) {
            float a0 = p0[t], a1 = p1[t], a2 = p2[t], a3 = p3[t], a4 = p0[t + 1], a5 = p1[t + 1];
            o[t] = 4.0f * a0 - 5.0f * a2 + a4;
            o[os + t] = (a3 + a4) - 4.0f * (a1 + a2);
            o[2 * os + t] = (a4 - a3) + 4.0f * (a1 - a2);
            o[3 * os + t] = (a4 - a2) + 2.0f * (a3 - a1);
            o[4 * os + t] = (a4 - a2) - 2.0f * (a3 - a1);
            o[5 * os + t] = 4.0f * a1 - 5.0f * a3 + a5;
        }
    }
}

/* Z[xi][c][tb + t] = (A y A^T)[xi] for the 4x4 tiles of tile row ti of the
 * output-shaped plane yc (ho x wo, zero past its edge); A y of a 4-vector
 * is (y0, y0+y1+y2+y3, y0-y1+y2-y3, y0+2y1+4y2+8y3, y0-2y1+4y2-8y3, y3). */
static void grad_row_tf(const grid_t *g, const float *yc, int ti, int c, int C, float *Z, size_t T,
                        size_t tb, float *scr)
{
    const int tw = g->tw;
    const size_t nt = (size_t)tw, ps = 4 * nt;
    float *ph = scr, *av = scr + 4 * ps;
    for (int i = 0; i < 4; i++) {
        int y = 4 * ti + i;
        split_phases(y < g->ho ? yc + (size_t)y * g->wo : NULL, g->wo, 0, ph + i * ps, nt);
    }
    { /* vertical: av[k] = sum_i A[k][i] ph[i] */
        const float *restrict y0 = ph, *restrict y1 = ph + ps, *restrict y2 = ph + 2 * ps;
        const float *restrict y3 = ph + 3 * ps;
        float *restrict o0 = av, *restrict o1 = av + ps, *restrict o2 = av + 2 * ps;
        float *restrict o3 = av + 3 * ps, *restrict o4 = av + 4 * ps, *restrict o5 = av + 5 * ps;
#pragma GCC ivdep
        for (size_t v = 0; v < ps; v++) {
            float a0 = y0[v], a1 = y1[v], a2 = y2[v], a3 = y3[v];
            float e = a0 + a2, od = a1 + a3, e4 = a0 + 4.0f * a2, o4v = 2.0f * a1 + 8.0f * a3;
            o0[v] = a0;
            o1[v] = e + od;
            o2[v] = e - od;
            o3[v] = e4 + o4v;
            o4[v] = e4 - o4v;
            o5[v] = a3;
        }
    }
    for (int k = 0; k < 6; k++) { /* horizontal: columns 0..3 are phases 0..3 */
        const float *restrict p0 = av + k * ps, *restrict p1 = p0 + nt, *restrict p2 = p0 + 2 * nt;
        const float *restrict p3 = p0 + 3 * nt;
        float *restrict o = Z + ((size_t)(k * 6) * C + c) * T + tb;
        const size_t os = (size_t)C * T;
#pragma GCC ivdep
        for (int t = 0; t < tw; t++) {
            float a0 = p0[t], a1 = p1[t], a2 = p2[t], a3 = p3[t];
            float e = a0 + a2, od = a1 + a3, e4 = a0 + 4.0f * a2, o4v = 2.0f * a1 + 8.0f * a3;
            o[t] = a0;
            o[os + t] = e + od;
            o[2 * os + t] = e - od;
            o[3 * os + t] = e4 + o4v;
            o[4 * os + t] = e4 - o4v;
            o[5 * os + t] = a3;
        }
    }
}

/* Output rows 4ti..4ti+3 of plane oc (ho x wo) = or += A^T M A of the tiles
 * of tile row ti; rows of A^T: (1 1 1 1 1 0), (0 1 -1 2 -2 0),
 * (0 1 1 4 4 0), (0 1 -1 8 -8 1). */
static void output_row_tf(const grid_t *g, const float *M, int c, int C, size_t T, size_t tb,
                          int ti, float *oc, int accum, float bias, float *scr)
{
    const int tw = g->tw;
    const size_t nt = (size_t)tw, ps = 6 * nt, os = (size_t)C * T;
    /* q[a][m][t]: A^T over k; ob[b][t]: one output row by column phase */
    float *q = scr, *ob = scr + 4 * ps;
    for (int m = 0; m < 6; m++) { /* vertical (over k) for column m */
        const float *restrict z0 = M + ((size_t)m * C + c) * T + tb;
        const float *restrict z1 = z0 + 6 * os, *restrict z2 = z0 + 12 * os, *restrict z3 = z0 + 18 * os;
        const float *restrict z4 = z0 + 24 * os, *restrict z5 = z0 + 30 * os;
        float *restrict o0 = q + m * nt, *restrict o1 = o0 + ps, *restrict o2 = o0 + 2 * ps;
        float *restrict o3 = o0 + 3 * ps;
#pragma GCC ivdep
        for (int t = 0; t < tw; t++) {
            float sp = z1[t] + z2[t], sm = z1[t] - z2[t], tp = z3[t] + z4[t], tm = z3[t] - z4[t];
            o0[t] = z0[t] + sp + tp;
            o1[t] = sm + 2.0f * tm;
            o2[t] = sp + 4.0f * tp;
            o3[t] = sm + 8.0f * tm + z5[t];
        }
    }
    for (int a = 0; a < 4; a++) { /* horizontal (over m), into one output row */
        int y = 4 * ti + a;
        if (y >= g->ho)
            break;
        const float *restrict z0 = q + a * ps, *restrict z1 = z0 + nt, *restrict z2 = z0 + 2 * nt;
        const float *restrict z3 = z0 + 3 * nt, *restrict z4 = z0 + 4 * nt, *restrict z5 = z0 + 5 * nt;
        float *restrict r0 = ob, *restrict r1 = ob + nt, *restrict r2 = ob + 2 * nt;
        float *restrict r3 = ob + 3 * nt;
#pragma GCC ivdep
        for (int t = 0; t < tw; t++) {
            float sp = z1[t] + z2[t], sm = z1[t] - z2[t], tp = z3[t] + z4[t], tm = z3[t] - z4[t];
            r0[t] = z0[t] + sp + tp + bias;
            r1[t] = sm + 2.0f * tm + bias;
            r2[t] = sp + 4.0f * tp + bias;
            r3[t] = sm + 8.0f * tm + z5[t] + bias;
        }
        merge_phases(ob, nt, oc + (size_t)y * g->wo, g->wo, accum);
    }
}

/* ------------------------------------------------------------- the jobs */
typedef struct {
    const loom_conv_desc_t *d;
    grid_t g;             /* the pass's grid */
    wlayout_t L;
    int cin, cout;        /* of the pass */
    int flip;             /* weight transform of the data-gradient pass */
    const float *weight, *src, *dy, *bias; /* bias: forward only, may be NULL */
    float *dst, *dweight, *ws;
    int accum;
    int nt_run;           /* threads that ran the weight-gradient pass */
} wjob_t;

static float *tws(const wjob_t *j, int tid) { return j->ws + j->L.u + (size_t)tid * j->L.per_thread; }

/* U[xi][a][b] = (G g G^T)[xi] of the pass's kernel (a: its output channel,
 * b: its input channel); flipped: g[a][b](i, j) = W[b][a](2-i, 2-j). */
static void weight_tf_task(void *arg, int tid, int nt)
{
    const wjob_t *j = arg;
    const int A = j->cout, B = j->cin;
    float *U = j->ws;
    size_t ab, ae;
    loom__range((size_t)A, tid, nt, &ab, &ae);
    for (size_t a = ab; a < ae; a++)
        for (int b = 0; b < B; b++) {
            float k[9], gk[18], u[NX];
            if (j->flip) {
                const float *w = j->weight + ((size_t)b * A + a) * 9;
                for (int t = 0; t < 9; t++)
                    k[t] = w[8 - t];
            } else {
                memcpy(k, j->weight + ((size_t)a * B + b) * 9, sizeof k);
            }
            for (int c = 0; c < 3; c++) /* columns: G k (6x3) */
                g3(k + c, 3, gk + c, 3);
            for (int r = 0; r < 6; r++) /* rows: (G k) G^T */
                g3(gk + r * 3, 1, u + r * 6, 1);
            for (int x = 0; x < NX; x++)
                U[((size_t)x * A + a) * B + b] = u[x];
        }
}

/* forward or data-gradient pass over this thread's tile rows */
static void conv_task(void *arg, int tid, int nt)
{
    const wjob_t *j = arg;
    const grid_t *g = &j->g;
    const size_t T = j->L.T, HWi = (size_t)g->h * g->w, HWo = (size_t)g->ho * g->wo;
    const size_t R = LOOM_MAX(T / (size_t)g->tw, 1);
    float *base = tws(j, tid), *V = base + j->L.v, *M = base + j->L.m, *scr = base + j->L.scr;
    size_t rb, re;
    loom__range(g->rows, tid, nt, &rb, &re);
    for (size_t r0 = rb; r0 < re; r0 += R) {
        size_t nr = LOOM_MIN(R, re - r0), cnt = nr * (size_t)g->tw;
        for (size_t rr = 0; rr < nr; rr++) {
            size_t s = (r0 + rr) / (size_t)g->th;
            int ti = (int)((r0 + rr) % (size_t)g->th);
            for (int c = 0; c < j->cin; c++)
                input_row_tf(g, j->src + (s * j->cin + c) * HWi, ti, c, j->cin, V, T,
                             rr * (size_t)g->tw, scr);
        }
        for (int x = 0; x < NX; x++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, j->cout, (int)cnt, j->cin, 1.0f,
                        j->ws + (size_t)x * j->cout * j->cin, j->cin, V + (size_t)x * j->cin * T,
                        (int)T, 0.0f, M + (size_t)x * j->cout * T, (int)T);
        for (size_t rr = 0; rr < nr; rr++) {
            size_t s = (r0 + rr) / (size_t)g->th;
            int ti = (int)((r0 + rr) % (size_t)g->th);
            for (int c = 0; c < j->cout; c++)
                output_row_tf(g, M, c, j->cout, T, rr * (size_t)g->tw, ti,
                              j->dst + (s * j->cout + c) * HWo, j->accum, j->bias ? j->bias[c] : 0.0f,
                              scr);
        }
    }
}

/* weight-gradient pass: this thread's dU = sum over its tiles of
 * (A dy A^T)[xi] (cout x T) * (B^T x B)[xi]^T (T x cin) */
static void dw_task(void *arg, int tid, int nt)
{
    const wjob_t *j = arg;
    const grid_t *g = &j->g;
    const size_t T = j->L.T, HWi = (size_t)g->h * g->w, HWo = (size_t)g->ho * g->wo;
    const size_t R = LOOM_MAX(T / (size_t)g->tw, 1);
    float *base = tws(j, tid), *V = base + j->L.v, *Z = base + j->L.m, *dU = base + j->L.du;
    float *scr = base + j->L.scr;
    size_t rb, re;
    if (tid == 0)
        ((wjob_t *)arg)->nt_run = nt;
    memset(dU, 0, sizeof(float) * NX * (size_t)j->cin * j->cout);
    loom__range(g->rows, tid, nt, &rb, &re);
    for (size_t r0 = rb; r0 < re; r0 += R) {
        size_t nr = LOOM_MIN(R, re - r0), cnt = nr * (size_t)g->tw;
        for (size_t rr = 0; rr < nr; rr++) {
            size_t s = (r0 + rr) / (size_t)g->th;
            int ti = (int)((r0 + rr) % (size_t)g->th);
            for (int c = 0; c < j->cin; c++)
                input_row_tf(g, j->src + (s * j->cin + c) * HWi, ti, c, j->cin, V, T,
                             rr * (size_t)g->tw, scr);
            for (int c = 0; c < j->cout; c++)
                grad_row_tf(g, j->dy + (s * j->cout + c) * HWo, ti, c, j->cout, Z, T,
                            rr * (size_t)g->tw, scr);
        }
        for (int x = 0; x < NX; x++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->cout, j->cin, (int)cnt, 1.0f,
                        Z + (size_t)x * j->cout * T, (int)T, V + (size_t)x * j->cin * T, (int)T,
                        1.0f, dU + (size_t)x * j->cout * j->cin, j->cin);
    }
}

/* dweight += G^T (sum of the threads' dU, in thread order) G */
static void dw_reduce_task(void *arg, int tid, int nt)
{
    const wjob_t *j = arg;
    const size_t pairs = (size_t)j->cout * j->cin;
    size_t b, e;
    loom__range(pairs, tid, nt, &b, &e);
    for (size_t p = b; p < e; p++) {
        float u[NX], t[18], k[9];
        for (int x = 0; x < NX; x++) {
            float s = 0.0f;
            for (int r = 0; r < j->nt_run; r++)
                s += tws(j, r)[j->L.du + (size_t)x * pairs + p];
            u[x] = s;
        }
        for (int c = 0; c < 6; c++) /* columns: G^T u (3x6) */
            gt6(u + c, 6, t + c, 6);
        for (int r = 0; r < 3; r++) /* rows: (G^T u) G */
            gt6(t + r * 6, 1, k + r * 3, 1);
        float *w = j->dweight + p * 9;
        for (int q = 0; q < 9; q++)
            w[q] += k[q];
    }
}

void loom__wino_forward(const loom_conv_desc_t *d, int n, int h, int w, const float *x,
                        const float *weight, const float *bias, float *y, float *ws)
{
    wjob_t j = {0};
    j.d = d;
    j.g = make_grid(n, h, w, d->pad_h, d->pad_w);
    j.L = wlayout(d, n, h, w, loom_get_threads());
    j.cin = d->cin, j.cout = d->cout;
    j.weight = weight, j.src = x, j.dst = y, j.ws = ws, j.bias = bias;
    loom__parallel(weight_tf_task, &j);
    loom__parallel(conv_task, &j);
}

void loom__wino_backward(const loom_conv_desc_t *d, int n, int h, int w, const float *x,
                         const float *weight, const float *dy, float *dx, int accum_dx,
                         float *dweight, float *ws)
{
    wjob_t j = {0};
    j.d = d;
    j.L = wlayout(d, n, h, w, loom_get_threads());
    j.ws = ws;
    grid_t fg = make_grid(n, h, w, d->pad_h, d->pad_w);
    if (dx) { /* dx = conv(dy, flipped kernel), padding 2 - p */
        j.g = make_grid(n, fg.ho, fg.wo, 2 - d->pad_h, 2 - d->pad_w);
        j.cin = d->cout, j.cout = d->cin, j.flip = 1;
        j.weight = weight, j.src = dy, j.dst = dx, j.accum = accum_dx;
        loom__parallel(weight_tf_task, &j);
        loom__parallel(conv_task, &j);
    }
    if (dweight) {
        j.g = fg;
        j.cin = d->cin, j.cout = d->cout, j.flip = 0;
        j.src = x, j.dy = dy, j.dweight = dweight;
        loom__parallel(dw_task, &j);
        loom__parallel(dw_reduce_task, &j);
    }
}
