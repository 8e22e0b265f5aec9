/*
 * test_conv_gemm.c - loom__gemm_wb, the weights-times-columns product of
 * im2col convolution (conv_gemm.c), against a plain loop in double: row
 * counts that are not multiples of the 8-row tile (1, 3, 13, 17), column
 * counts that end in a partial 48-column block, samples of P = 1, 7, 49,
 * 196, 784 columns so that blocks straddle samples, a leading dimension of
 * B wider than its columns, output rows with a stride wider than P, and
 * accumulation (the result added to what out held).  Skipped (77) where the
 * kernel is not built (no AVX-512).
 */
#include "../src/internal.h"
#include "harness.h"

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffffff) / 16777216.0f - 0.5f;
}

static void one(int M, int K, int m, size_t P, size_t pad_ld, size_t pad_rs, int accum, uint64_t seed)
{
    size_t N = (size_t)m * P, ldb = N + pad_ld, rs = P + pad_rs, ss = (size_t)M * rs + 5;
    float *w = malloc(sizeof(float) * (size_t)M * K), *b = malloc(sizeof(float) * (size_t)K * ldb);
    float *wp = malloc(sizeof(float) * loom__gemm_wpack_floats(M, K));
    float *out = malloc(sizeof(float) * ss * (size_t)m), *init = malloc(sizeof(float) * ss * (size_t)m);
    if (!w || !b || !wp || !out || !init) {
        CHECK(0, "out of memory");
        return;
    }
    for (size_t i = 0; i < (size_t)M * K; i++)
        w[i] = frand(&seed);
    for (size_t i = 0; i < (size_t)K * ldb; i++)
        b[i] = frand(&seed);
    for (size_t i = 0; i < ss * (size_t)m; i++)
        init[i] = out[i] = frand(&seed);
    loom__gemm_pack_w(M, K, w, (size_t)K, wp);
    loom__gemm_wb(M, K, wp, b, ldb, m, P, out, ss, rs, accum);
    double err = 0.0, big = 1e-30;
    int untouched = 1;
    for (int s = 0; s < m; s++)
        for (size_t i = 0; i < ss; i++) {
            size_t r = i / rs, p = i % rs;
            float got = out[(size_t)s * ss + i], was = init[(size_t)s * ss + i];
            if (r >= (size_t)M || p >= P) { /* padding between rows and samples */
                untouched &= got == was;
                continue;
            }
            double ref = accum ? was : 0.0;
            for (int k = 0; k < K; k++)
                ref += (double)w[(size_t)r * K + k] * b[(size_t)k * ldb + (size_t)s * P + p];
            err = fmax(err, fabs(got - ref));
            big = fmax(big, fabs(ref));
        }
    CHECK(err / big < 1e-5, "M=%d K=%d m=%d P=%zu ld+%zu rs+%zu accum=%d: error %.2g of %.2g", M, K,
          m, P, pad_ld, pad_rs, accum, err, big);
    CHECK(untouched, "M=%d K=%d m=%d P=%zu: wrote outside its rows", M, K, m, P);
    free(w), free(b), free(wp), free(out), free(init);
}

int main(void)
{
    if (!loom__gemm_wb_available()) {
        printf("loom__gemm_wb is not built here (no AVX-512): skipped\n");
        return 77;
    }
    static const struct { int M, K, m; size_t P; } shapes[] = {
        {16, 144, 1, 784}, {32, 288, 3, 196}, {64, 576, 11, 49}, {1, 9, 2, 7},  {3, 27, 5, 7},
        {13, 50, 4, 49},   {17, 5, 1, 1},     {8, 1, 3, 16},     {9, 64, 2, 48}, {24, 31, 7, 13},
        {16, 144, 2, 100}, {40, 3, 1, 47},
    };
    uint64_t seed = 1;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int accum = 0; accum < 2; accum++) {
            one(shapes[i].M, shapes[i].K, shapes[i].m, shapes[i].P, 0, 0, accum, seed++);
            one(shapes[i].M, shapes[i].K, shapes[i].m, shapes[i].P, 19, 3, accum, seed++);
        }
    return t_done();
}
