/*
 * conv_store.h - the output store shared by Loom's AVX-512 convolution
 * kernels (conv_gemm.c, conv_shift.c): the nl first lanes of a vector go to
 * output column j (of the whole call: sample j / P, pixel j % P) of row r,
 * where a sample's rows start every ss floats and its rows lie rs apart.
 * Include after <immintrin.h>, under __AVX512F__.
 */
#ifndef LOOM_CONV_STORE_H
#define LOOM_CONV_STORE_H

#include <stddef.h>

/* Stores (accum = 0) or adds the nl first lanes of v: one masked store when
 * they lie in one sample, else lane by lane. Any thread (writes only those
 * lanes' outputs). */
static inline void loom__store_lanes(__m512 v, size_t j, int nl, size_t P, float *out, size_t ss,
                                     size_t rs, int r, int accum)
{
    size_t s = j / P, p = j - s * P;
    if (p + (size_t)nl <= P) {
        float *o = out + s * ss + (size_t)r * rs + p;
        __mmask16 k = (__mmask16)((1u << nl) - 1u);
        if (accum)
            v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, o));
        _mm512_mask_storeu_ps(o, k, v);
        return;
    }
    float t[16];
    _mm512_storeu_ps(t, v);
    for (int l = 0; l < nl; l++) {
        float *o = out + s * ss + (size_t)r * rs + p;
        *o = accum ? *o + t[l] : t[l];
        if (++p == P)
            p = 0, s++;
    }
}

#endif /* LOOM_CONV_STORE_H */
