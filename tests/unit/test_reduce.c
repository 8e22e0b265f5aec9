/*
 * test_reduce.c - Check suite for lib/reduce.c (weft__reduce, weft__reduce3,
 * weft__scale_avg). No MPI needed.
 *
 * References are computed independently of the library:
 *  - integers: exact, in 64-bit unsigned arithmetic wrapped to the type;
 *  - float32: the operation in double rounded to float (correctly rounded,
 *    since 53 >= 2*24 + 2 makes the double rounding harmless);
 *  - float64: the operation in __float128 rounded to double (113 >= 2*53 + 2);
 *  - float16 / bfloat16: decoded with ldexp, operated on in double, rounded
 *    to the 16-bit format with a separate round-to-nearest-even encoder.
 *    The library's float32 intermediate is also harmless (24 >= 2*11 + 2),
 *    so a single OP of two 16-bit values must match the reference bit for bit.
 *  - any NaN result must be the canonical quiet NaN; MIN/MAX of -0 and +0
 *    are -0 and +0.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "weft_internal.h"

/* ---- deterministic random bits ---------------------------------------------- */
static uint64_t rng_state = 0x1234567887654321ull;
static uint64_t rnd(void)
{
    uint64_t x = (rng_state += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static size_t esize(weft_datatype_t dt)
{
    static const size_t s[WEFT_DATATYPE_COUNT] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 2, 2};
    return s[dt];
}
static int is_int(weft_datatype_t dt)
{
    return dt <= WEFT_UINT64 || dt == WEFT_INT16 || dt == WEFT_UINT16;
}
static int is_signed_int(weft_datatype_t dt)
{
    return dt == WEFT_INT8 || dt == WEFT_INT16 || dt == WEFT_INT32 || dt == WEFT_INT64;
}
static int valid(weft_datatype_t dt, weft_op_t op)
{
    return is_int(dt) || op <= WEFT_AVG;
}

/* ---- independent 16-bit float codecs --------------------------------------- */
static double small_to_double(uint16_t h, int mb, int eb)
{
    int bias = (1 << (eb - 1)) - 1;
    unsigned emask = (1u << eb) - 1, e = (h >> mb) & emask, m = h & ((1u << mb) - 1);
    double v = e == emask ? (m ? NAN : INFINITY)
               : e == 0   ? ldexp((double)m, 1 - bias - mb)
                          : ldexp((double)(m | (1u << mb)), (int)e - bias - mb);
    return (h >> (mb + eb)) & 1u ? -v : v;
}

static uint16_t double_to_small(double d, int mb, int eb)
{
    int bias = (1 << (eb - 1)) - 1, e2;
    unsigned emask = (1u << eb) - 1;
    uint16_t sign = signbit(d) ? (uint16_t)(1u << (mb + eb)) : 0;
    double a = fabs(d), q;
    if (isnan(d)) return (uint16_t)((emask << mb) | (1u << (mb - 1))); /* canonical */
    if (isinf(a)) return (uint16_t)(sign | (emask << mb));
    if (a == 0.0) return sign;
    (void)frexp(a, &e2);
    int e = e2 - 1;
    if (e < 1 - bias) return (uint16_t)(sign | (unsigned)nearbyint(ldexp(a, mb - (1 - bias))));
    q = nearbyint(ldexp(a, mb - e));
    if (q >= ldexp(1.0, mb + 1)) { q /= 2; e++; }
    if (e > bias) return (uint16_t)(sign | (emask << mb));
    return (uint16_t)(sign | ((unsigned)(e + bias) << mb) | ((unsigned)q - (1u << mb)));
}

static double h2d(uint16_t h, weft_datatype_t dt)
{
    return dt == WEFT_FLOAT16 ? small_to_double(h, 10, 5) : small_to_double(h, 7, 8);
}
static uint16_t d2h(double d, weft_datatype_t dt)
{
    return dt == WEFT_FLOAT16 ? double_to_small(d, 10, 5) : double_to_small(d, 7, 8);
}

/* Reference MIN/MAX on doubles with Weft's NaN and signed-zero rules. */
static double ref_minmax(double a, double b, int is_max)
{
    if (isnan(a) || isnan(b)) return NAN;
    if (a == b) return (signbit(a) && signbit(b)) || (!is_max && (signbit(a) || signbit(b)))
                           ? -fabs(a) : fabs(a);
    return (a < b) == !is_max ? a : b;
}

/* ---- reference for one element ------------------------------------------------ */
static void ref_elem(void *out, const void *pa, const void *pb, weft_datatype_t dt, weft_op_t op)
{
    if (is_int(dt)) {
        uint64_t a = 0, b = 0, r = 0;
        int64_t sa = 0, sb = 0;
        size_t es = esize(dt);
        memcpy(&a, pa, es);
        memcpy(&b, pb, es);
        /* sign-extend for comparisons */
        if (is_signed_int(dt)) {
            int sh = 64 - 8 * (int)es;
            sa = (int64_t)(a << sh) >> sh;
            sb = (int64_t)(b << sh) >> sh;
        }
        switch (op) {
        case WEFT_SUM: case WEFT_AVG: r = a + b; break;
        case WEFT_PROD: r = a * b; break;
        case WEFT_MIN: r = is_signed_int(dt) ? (sa < sb ? a : b) : (a < b ? a : b); break;
        case WEFT_MAX: r = is_signed_int(dt) ? (sa > sb ? a : b) : (a > b ? a : b); break;
        case WEFT_BAND: r = a & b; break;
        case WEFT_BOR: r = a | b; break;
        case WEFT_BXOR: r = a ^ b; break;
        default: break;
        }
        memcpy(out, &r, es); /* little endian: the low bytes */
        return;
    }
    if (dt == WEFT_FLOAT32) {
        float a, b, r;
        memcpy(&a, pa, 4);
        memcpy(&b, pb, 4);
        double x = a, y = b;
        switch (op) {
        case WEFT_SUM: case WEFT_AVG: r = (float)(x + y); break;
        case WEFT_PROD: r = (float)(x * y); break;
        case WEFT_MIN: r = (float)ref_minmax(x, y, 0); break;
        default: r = (float)ref_minmax(x, y, 1); break;
        }
        if (isnan(r)) r = __builtin_nanf("");
        memcpy(out, &r, 4);
        return;
    }
    if (dt == WEFT_FLOAT64) {
        double a, b, r;
        memcpy(&a, pa, 8);
        memcpy(&b, pb, 8);
        __float128 x = a, y = b;
        switch (op) {
        case WEFT_SUM: case WEFT_AVG: r = (double)(x + y); break;
        case WEFT_PROD: r = (double)(x * y); break;
        case WEFT_MIN: r = ref_minmax(a, b, 0); break;
        default: r = ref_minmax(a, b, 1); break;
        }
        if (isnan(r)) r = __builtin_nan("");
        memcpy(out, &r, 8);
        return;
    }
    /* float16 / bfloat16 */
    uint16_t ha, hb, hr;
    memcpy(&ha, pa, 2);
    memcpy(&hb, pb, 2);
    double x = h2d(ha, dt), y = h2d(hb, dt), r;
    switch (op) {
    case WEFT_SUM: case WEFT_AVG: r = x + y; break; /* exact in double */
    case WEFT_PROD: r = x * y; break;               /* exact in double */
    case WEFT_MIN: r = ref_minmax(x, y, 0); break;
    default: r = ref_minmax(x, y, 1); break;
    }
    hr = d2h(r, dt);
    memcpy(out, &hr, 2);
}

/* Random element bits; for floats a mix of ordinary values and specials. */
static void rand_elem(void *dst, weft_datatype_t dt)
{
    uint64_t h = rnd();
    size_t es = esize(dt);
    if (is_int(dt) || (h & 7) == 0) { /* 1 in 8 float elements: raw bits (NaN, Inf, subnormal) */
        uint64_t v = rnd();
        memcpy(dst, &v, es);
        return;
    }
    double v = ldexp((double)(int64_t)(rnd() >> 11) - ldexp(1.0, 52), -52 + (int)(h >> 8) % 20 - 10);
    if ((h & 0xf0) == 0x10) v = 0.0 * ((h & 0x100) ? -1.0 : 1.0); /* signed zeros */
    switch (dt) {
    case WEFT_FLOAT32: { float f = (float)v; memcpy(dst, &f, 4); break; }
    case WEFT_FLOAT64: memcpy(dst, &v, 8); break;
    default: { uint16_t x = d2h(v, dt); memcpy(dst, &x, 2); break; }
    }
}

#define N_ELEMS 1037 /* odd: vector loops plus remainders, and > one 16-bit block */

static void check_one(weft_datatype_t dt, weft_op_t op)
{
    size_t es = esize(dt), nb = N_ELEMS * es;
    unsigned char *a = malloc(nb), *b = malloc(nb), *ref = malloc(nb), *out = malloc(nb),
                  *out2 = malloc(nb), *io = malloc(nb);
    ck_assert(a && b && ref && out && out2 && io);
    for (size_t i = 0; i < N_ELEMS; i++) {
        rand_elem(a + i * es, dt);
        rand_elem(b + i * es, dt);
        if (i % 97 == 5) memcpy(b + i * es, a + i * es, es); /* equal operands */
        ref_elem(ref + i * es, a + i * es, b + i * es, dt, op);
    }
    weft__reduce3(out, a, b, N_ELEMS, dt, op);
    weft__reduce3(out2, b, a, N_ELEMS, dt, op);
    memcpy(io, a, nb);
    weft__reduce(io, b, N_ELEMS, dt, op);
    for (size_t i = 0; i < N_ELEMS; i++) {
        if (memcmp(out + i * es, ref + i * es, es) != 0) {
            uint64_t g = 0, r = 0, x = 0, y = 0;
            memcpy(&g, out + i * es, es);
            memcpy(&r, ref + i * es, es);
            memcpy(&x, a + i * es, es);
            memcpy(&y, b + i * es, es);
            ck_abort_msg("%s %s element %zu: a=%#llx b=%#llx got %#llx expected %#llx",
                         weft_datatype_name(dt), weft_op_name(op), i, (unsigned long long)x,
                         (unsigned long long)y, (unsigned long long)g, (unsigned long long)r);
        }
    }
    ck_assert_msg(memcmp(out, out2, nb) == 0, "%s %s: a OP b differs from b OP a",
                  weft_datatype_name(dt), weft_op_name(op));
    ck_assert_msg(memcmp(out, io, nb) == 0, "%s %s: weft__reduce differs from weft__reduce3",
                  weft_datatype_name(dt), weft_op_name(op));
    /* Aliased outputs: out == a, out == b, out == a == b. */
    memcpy(io, a, nb);
    weft__reduce3(io, io, b, N_ELEMS, dt, op);
    ck_assert_msg(memcmp(out, io, nb) == 0, "%s %s: out == a", weft_datatype_name(dt),
                  weft_op_name(op));
    memcpy(io, b, nb);
    weft__reduce3(io, a, io, N_ELEMS, dt, op);
    ck_assert_msg(memcmp(out, io, nb) == 0, "%s %s: out == b", weft_datatype_name(dt),
                  weft_op_name(op));
    for (size_t i = 0; i < N_ELEMS; i++) ref_elem(ref + i * es, a + i * es, a + i * es, dt, op);
    memcpy(io, a, nb);
    weft__reduce3(io, io, io, N_ELEMS, dt, op);
    ck_assert_msg(memcmp(ref, io, nb) == 0, "%s %s: out == a == b", weft_datatype_name(dt),
                  weft_op_name(op));
    memcpy(io, a, nb);
    weft__reduce(io, io, N_ELEMS, dt, op);
    ck_assert_msg(memcmp(ref, io, nb) == 0, "%s %s: reduce(x, x)", weft_datatype_name(dt),
                  weft_op_name(op));
    free(a); free(b); free(ref); free(out); free(out2); free(io);
}

/* Every valid (dtype, op) pair; loop index = dtype * WEFT_OP_COUNT + op. */
START_TEST(test_pairs)
{
    weft_datatype_t dt = (weft_datatype_t)(_i / WEFT_OP_COUNT);
    weft_op_t op = (weft_op_t)(_i % WEFT_OP_COUNT);
    if (!valid(dt, op)) return;
    check_one(dt, op);
}
END_TEST

/* Counts 0..70 on every pair: remainders of the vector loops, nothing written past count. */
START_TEST(test_lengths)
{
    for (int d = 0; d < WEFT_DATATYPE_COUNT; d++) {
        size_t es = esize(d);
        for (size_t n = 0; n <= 70; n++) {
            unsigned char a[80 * 8], b[80 * 8], out[80 * 8];
            for (size_t i = 0; i < sizeof(a); i++) { a[i] = (unsigned char)rnd(); b[i] = (unsigned char)rnd(); }
            memset(out, 0xA5, sizeof(out));
            weft__reduce3(out, a, b, n, d, WEFT_MAX);
            for (size_t i = n * es; i < sizeof(out); i++)
                ck_assert_msg(out[i] == 0xA5, "dtype %d count %zu wrote byte %zu", d, n, i);
            for (size_t i = 0; i < n; i++) {
                unsigned char r[8];
                ref_elem(r, a + i * es, b + i * es, d, WEFT_MAX);
                ck_assert_msg(memcmp(r, out + i * es, es) == 0, "dtype %d count %zu elem %zu", d, n, i);
            }
        }
    }
}
END_TEST

/* Every float16 / bfloat16 value survives the widen/narrow round trip (max(x, x) = x). */
START_TEST(test_small_roundtrip)
{
    weft_datatype_t dts[2] = {WEFT_FLOAT16, WEFT_BFLOAT16};
    uint16_t *a = malloc(65536 * 2), *o = malloc(65536 * 2);
    ck_assert(a && o);
    for (int k = 0; k < 2; k++) {
        for (unsigned i = 0; i < 65536; i++) a[i] = (uint16_t)i;
        weft__reduce3(o, a, a, 65536, dts[k], WEFT_MAX);
        uint16_t qnan = dts[k] == WEFT_FLOAT16 ? 0x7e00 : 0x7fc0;
        for (unsigned i = 0; i < 65536; i++) {
            int nan = isnan(h2d((uint16_t)i, dts[k]));
            ck_assert_msg(o[i] == (nan ? qnan : i), "%s %#x -> %#x", weft_datatype_name(dts[k]),
                          i, o[i]);
        }
    }
    free(a);
    free(o);
}
END_TEST

/* Named rounding cases: ties to even, overflow to Inf, subnormals, NaN. */
START_TEST(test_small_rounding)
{
    struct { weft_datatype_t dt; weft_op_t op; uint16_t a, b, want; } c[] = {
        {WEFT_FLOAT16, WEFT_SUM, 0x3c00, 0x1000, 0x3c00}, /* 1 + 2^-11: tie, even is 1 */
        {WEFT_FLOAT16, WEFT_SUM, 0x3c01, 0x1000, 0x3c02}, /* (1+2^-10) + 2^-11: tie up to even */
        {WEFT_FLOAT16, WEFT_SUM, 0x3c00, 0x1001, 0x3c01}, /* just above the tie */
        {WEFT_FLOAT16, WEFT_SUM, 0x7bff, 0x4c00, 0x7c00}, /* 65504 + 16 = 65520 -> Inf */
        {WEFT_FLOAT16, WEFT_SUM, 0x7bff, 0x4800, 0x7bff}, /* 65504 + 8 -> 65504 */
        {WEFT_FLOAT16, WEFT_SUM, 0x0001, 0x0001, 0x0002}, /* subnormal + subnormal */
        {WEFT_FLOAT16, WEFT_SUM, 0x03ff, 0x0001, 0x0400}, /* largest subnormal + min -> min normal */
        {WEFT_FLOAT16, WEFT_PROD, 0x0001, 0x3800, 0x0000}, /* 2^-24 * 0.5: tie -> 0 */
        {WEFT_FLOAT16, WEFT_PROD, 0x0003, 0x3800, 0x0002}, /* 1.5 * 2^-24: tie -> 2 */
        {WEFT_FLOAT16, WEFT_PROD, 0x8001, 0x3800, 0x8000}, /* -> -0 */
        {WEFT_FLOAT16, WEFT_SUM, 0x7c00, 0xfc00, 0x7e00}, /* Inf - Inf = NaN */
        {WEFT_FLOAT16, WEFT_SUM, 0x7c01, 0x3c00, 0x7e00}, /* sNaN + 1 = canonical NaN */
        {WEFT_FLOAT16, WEFT_MIN, 0x8000, 0x0000, 0x8000}, /* min(-0, +0) = -0 */
        {WEFT_FLOAT16, WEFT_MAX, 0x8000, 0x0000, 0x0000}, /* max(-0, +0) = +0 */
        {WEFT_FLOAT16, WEFT_MIN, 0x7e00, 0x3c00, 0x7e00}, /* min(NaN, 1) = NaN */
        {WEFT_FLOAT16, WEFT_MAX, 0x3c00, 0xfe00, 0x7e00}, /* max(1, -NaN) = NaN */
        {WEFT_BFLOAT16, WEFT_SUM, 0x3f80, 0x3b80, 0x3f80}, /* 1 + 2^-8: tie, even is 1 */
        {WEFT_BFLOAT16, WEFT_SUM, 0x3f81, 0x3b80, 0x3f82}, /* tie up to even */
        {WEFT_BFLOAT16, WEFT_SUM, 0x7f7f, 0x7b80, 0x7f80}, /* max + half ulp -> Inf */
        {WEFT_BFLOAT16, WEFT_SUM, 0x0001, 0x0001, 0x0002}, /* subnormals */
        {WEFT_BFLOAT16, WEFT_SUM, 0x7f80, 0xff80, 0x7fc0}, /* Inf - Inf */
        {WEFT_BFLOAT16, WEFT_MIN, 0x8000, 0x0000, 0x8000},
        {WEFT_BFLOAT16, WEFT_MAX, 0xffc1, 0x0000, 0x7fc0},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        uint16_t o1, o2;
        weft__reduce3(&o1, &c[i].a, &c[i].b, 1, c[i].dt, c[i].op);
        weft__reduce3(&o2, &c[i].b, &c[i].a, 1, c[i].dt, c[i].op);
        ck_assert_msg(o1 == c[i].want && o2 == c[i].want, "case %zu: %#x OP %#x = %#x / %#x, want %#x",
                      i, c[i].a, c[i].b, o1, o2, c[i].want);
    }
}
END_TEST

/* Many random 16-bit pairs, all ops, against the double reference. */
START_TEST(test_small_random)
{
    enum { N = 1 << 16 };
    uint16_t *a = malloc(N * 2), *b = malloc(N * 2), *o = malloc(N * 2);
    ck_assert(a && b && o);
    weft_datatype_t dts[2] = {WEFT_FLOAT16, WEFT_BFLOAT16};
    for (int k = 0; k < 2; k++)
        for (int op = WEFT_SUM; op <= WEFT_MAX; op++) {
            for (int i = 0; i < N; i++) {
                uint64_t r = rnd();
                a[i] = (uint16_t)r;
                /* half the time b is near a (cancellation, ties), else random */
                b[i] = (r >> 63) ? (uint16_t)(r >> 16) : (uint16_t)((a[i] ^ 0x8000) + ((r >> 20) & 7) - 3);
            }
            weft__reduce3(o, a, b, N, dts[k], (weft_op_t)op);
            for (int i = 0; i < N; i++) {
                uint16_t want;
                ref_elem(&want, &a[i], &b[i], dts[k], (weft_op_t)op);
                ck_assert_msg(o[i] == want, "%s op %d: %#x, %#x -> %#x, want %#x",
                              weft_datatype_name(dts[k]), op, a[i], b[i], o[i], want);
            }
        }
    free(a); free(b); free(o);
}
END_TEST

START_TEST(test_scale_avg)
{
    int8_t i8[4] = {-7, 7, -128, 127};
    weft__scale_avg(i8, 4, WEFT_INT8, 2);
    ck_assert(i8[0] == -3 && i8[1] == 3 && i8[2] == -64 && i8[3] == 63);
    uint8_t u8[3] = {250, 255, 1};
    weft__scale_avg(u8, 3, WEFT_UINT8, 3);
    ck_assert(u8[0] == 83 && u8[1] == 85 && u8[2] == 0);
    u8[0] = 250;
    weft__scale_avg(u8, 1, WEFT_UINT8, 300); /* divisor wider than the type */
    ck_assert_int_eq(u8[0], 0);
    int8_t i8b = 100;
    weft__scale_avg(&i8b, 1, WEFT_INT8, 200);
    ck_assert_int_eq(i8b, 0);
    int16_t i16[3] = {-32768, 32767, -5};
    weft__scale_avg(i16, 3, WEFT_INT16, 4);
    ck_assert(i16[0] == -8192 && i16[1] == 8191 && i16[2] == -1);
    uint16_t u16 = 65535;
    weft__scale_avg(&u16, 1, WEFT_UINT16, 70000); /* divisor wider than the type */
    ck_assert_uint_eq(u16, 0);
    u16 = 65535;
    weft__scale_avg(&u16, 1, WEFT_UINT16, 2);
    ck_assert_uint_eq(u16, 32767);
    int32_t i32[2] = {-2147483647 - 1, 2147483647};
    weft__scale_avg(i32, 2, WEFT_INT32, 4);
    ck_assert(i32[0] == -536870912 && i32[1] == 536870911);
    uint32_t u32 = 4000000000u;
    weft__scale_avg(&u32, 1, WEFT_UINT32, 3);
    ck_assert_uint_eq(u32, 1333333333u);
    int64_t i64 = -9000000000000000001ll;
    weft__scale_avg(&i64, 1, WEFT_INT64, 10);
    ck_assert(i64 == -900000000000000000ll);
    uint64_t u64 = 18000000000000000000ull;
    weft__scale_avg(&u64, 1, WEFT_UINT64, 7);
    ck_assert(u64 == 18000000000000000000ull / 7);

    float f[1037];
    double d[1037];
    for (int i = 0; i < 1037; i++) { f[i] = (float)(i * 0.37 - 100); d[i] = i * 0.37 - 100; }
    weft__scale_avg(f, 1037, WEFT_FLOAT32, 3);
    weft__scale_avg(d, 1037, WEFT_FLOAT64, 3);
    for (int i = 0; i < 1037; i++) {
        ck_assert(f[i] == (float)((double)(float)(i * 0.37 - 100) / 3.0));
        ck_assert(d[i] == (i * 0.37 - 100) / 3.0);
    }
    weft_datatype_t dts[2] = {WEFT_FLOAT16, WEFT_BFLOAT16};
    for (int k = 0; k < 2; k++) {
        uint16_t h[1200], ref[1200];
        for (int i = 0; i < 1200; i++) {
            h[i] = (uint16_t)rnd();
            double x = h2d(h[i], dts[k]);
            ref[i] = d2h(x / 6.0, dts[k]);
        }
        weft__scale_avg(h, 1200, dts[k], 6);
        for (int i = 0; i < 1200; i++)
            ck_assert_msg(h[i] == ref[i], "%s elem %d: %#x want %#x", weft_datatype_name(dts[k]),
                          i, h[i], ref[i]);
    }
    /* n <= 0 and n == 1 leave the buffer alone */
    float g = 5.0f;
    weft__scale_avg(&g, 1, WEFT_FLOAT32, 0);
    weft__scale_avg(&g, 1, WEFT_FLOAT32, -2);
    weft__scale_avg(&g, 1, WEFT_FLOAT32, 1);
    ck_assert(g == 5.0f);
}
END_TEST

/* Undefined pairs and unknown values are refused without touching memory. */
START_TEST(test_invalid)
{
    float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, o[4] = {9, 9, 9, 9};
    int lvl = atomic_load(&weft__log_level);
    atomic_store(&weft__log_level, 0); /* expected errors: keep the output clean */
    weft__reduce(a, b, 4, WEFT_FLOAT32, WEFT_BXOR);
    weft__reduce3(o, a, b, 4, WEFT_FLOAT32, WEFT_BAND);
    weft__reduce(a, b, 4, (weft_datatype_t)99, WEFT_SUM);
    weft__reduce(a, b, 4, WEFT_FLOAT32, (weft_op_t)-1);
    weft__scale_avg(a, 4, (weft_datatype_t)99, 2);
    atomic_store(&weft__log_level, lvl);
    ck_assert(a[0] == 1 && a[3] == 4 && o[0] == 9 && o[3] == 9);
}
END_TEST

static Suite *reduce_suite(void)
{
    Suite *s = suite_create("reduce");
    TCase *tc = tcase_create("kernels");
    tcase_add_loop_test(tc, test_pairs, 0, WEFT_DATATYPE_COUNT * WEFT_OP_COUNT);
    tcase_add_test(tc, test_lengths);
    tcase_add_test(tc, test_small_roundtrip);
    tcase_add_test(tc, test_small_rounding);
    tcase_add_test(tc, test_small_random);
    tcase_add_test(tc, test_scale_avg);
    tcase_add_test(tc, test_invalid);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(reduce_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
