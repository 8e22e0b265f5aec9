/*
 * test_recv_reduce.c - Check suite for lib/recv_reduce.c: a message handed to
 * weft__rr_unpack in pieces cut at arbitrary byte offsets (inside elements,
 * as a transport cuts its fragments), in order, reversed and shuffled, must
 * give out = a OP message exactly. No MPI needed.
 *
 * Reference: computed element by element in plain C for each (type, op) pair
 * below, independently of the library's kernels. The pieces are copied to an
 * odd address first, so the unaligned path is taken as well.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "weft_internal.h"

static uint64_t rng_state = 0x13198a2e03707344ull;
static uint64_t rnd(void)
{
    uint64_t x = (rng_state += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

typedef struct pair {
    weft_datatype_t dt;
    weft_op_t op;
} pair_t;

static const pair_t pairs[] = {
    {WEFT_FLOAT32, WEFT_SUM}, {WEFT_FLOAT64, WEFT_MAX}, {WEFT_INT32, WEFT_BXOR},
    {WEFT_INT8, WEFT_SUM},    {WEFT_UINT64, WEFT_MIN},  {WEFT_FLOAT32, WEFT_AVG},
};

/* Random operands with exact float sums (small integers). */
static void fill(void *buf, size_t n, weft_datatype_t dt)
{
    for (size_t i = 0; i < n; i++) {
        long v = (long)(rnd() % 2001) - 1000;
        switch (dt) {
        case WEFT_FLOAT32: ((float *)buf)[i] = (float)v * 0.25f; break;
        case WEFT_FLOAT64: ((double *)buf)[i] = (double)v * 0.5; break;
        case WEFT_INT32: ((int32_t *)buf)[i] = (int32_t)rnd(); break;
        case WEFT_INT8: ((int8_t *)buf)[i] = (int8_t)rnd(); break;
        case WEFT_UINT64: ((uint64_t *)buf)[i] = rnd(); break;
        default: ck_abort_msg("fill: datatype %d not in the table", (int)dt);
        }
    }
}

/* want[i] = a[i] OP m[i], element by element (AVG sums: the divide comes later). */
static void reference(void *want, const void *a, const void *m, size_t n, pair_t p)
{
    for (size_t i = 0; i < n; i++) {
        switch (p.dt) {
        case WEFT_FLOAT32:
            ((float *)want)[i] = ((const float *)a)[i] + ((const float *)m)[i];
            break;
        case WEFT_FLOAT64: {
            double x = ((const double *)a)[i], y = ((const double *)m)[i];
            ((double *)want)[i] = x > y ? x : y;
            break;
        }
        case WEFT_INT32:
            ((int32_t *)want)[i] = ((const int32_t *)a)[i] ^ ((const int32_t *)m)[i];
            break;
        case WEFT_INT8:
            ((int8_t *)want)[i] =
                (int8_t)(uint8_t)((uint8_t)((const int8_t *)a)[i] + (uint8_t)((const int8_t *)m)[i]);
            break;
        case WEFT_UINT64: {
            uint64_t x = ((const uint64_t *)a)[i], y = ((const uint64_t *)m)[i];
            ((uint64_t *)want)[i] = x < y ? x : y;
            break;
        }
        default: ck_abort_msg("reference: datatype %d not in the table", (int)p.dt);
        }
    }
}

/* Cut [0, bytes) into npieces at random distinct offsets: cuts[0] = 0 ...
 * cuts[npieces] = bytes. Returns npieces. */
static int cut(size_t bytes, size_t *cuts, int maxpieces)
{
    int np = 1 + (int)(rnd() % (uint64_t)maxpieces);
    if ((size_t)np > bytes) np = (int)bytes;
    cuts[0] = 0;
    cuts[np] = bytes;
    for (int i = 1; i < np; i++) cuts[i] = 1 + rnd() % (bytes - 1);
    /* sort and make distinct (insertion sort: np is small) */
    for (int i = 2; i < np; i++)
        for (int j = i; j > 1 && cuts[j] < cuts[j - 1]; j--) {
            size_t t = cuts[j];
            cuts[j] = cuts[j - 1];
            cuts[j - 1] = t;
        }
    int k = 1;
    for (int i = 1; i < np; i++)
        if (cuts[i] != cuts[k - 1]) cuts[k++] = cuts[i];
    cuts[k] = bytes;
    return k;
}

/* Deliver pieces in `order` (indices into cuts) through an odd address. */
static void deliver(weft__rr_t *rr, const unsigned char *msg, const size_t *cuts,
                    const int *order, int np)
{
    unsigned char *odd = malloc(rr->d.bytes + 1);
    ck_assert_ptr_nonnull(odd);
    for (int i = 0; i < np; i++) {
        int k = order[i];
        size_t off = cuts[k], len = cuts[k + 1] - cuts[k];
        memcpy(odd + 1, msg + off, len);
        rr->d.unpack(&rr->d, off, odd + 1, len);
    }
    free(odd);
}

/* Orders that keep at most WEFT__RR_EDGES elements open: in order, reversed,
 * and shuffles of neighbouring pieces only. */
static void make_order(int *order, int np, int kind)
{
    for (int i = 0; i < np; i++) order[i] = kind == 1 ? np - 1 - i : i;
    if (kind == 2)
        for (int i = 0; i + 1 < np; i += 2)
            if (rnd() & 1) {
                int t = order[i];
                order[i] = order[i + 1];
                order[i + 1] = t;
            }
}

START_TEST(test_pieces_any_order)
{
    enum { MAXP = 64 };
    for (int iter = 0; iter < 600; iter++) {
        pair_t p = pairs[rnd() % (sizeof pairs / sizeof pairs[0])];
        size_t es = weft_datatype_size(p.dt), n = 1 + rnd() % 3000, bytes = n * es;
        unsigned char *a = malloc(bytes), *m = malloc(bytes), *out = malloc(bytes),
                      *want = malloc(bytes);
        ck_assert(a && m && out && want);
        fill(a, n, p.dt);
        fill(m, n, p.dt);
        reference(want, a, m, n, p);
        size_t cuts[MAXP + 1];
        int order[MAXP];
        int np = cut(bytes, cuts, MAXP);
        int kind = iter % 3, in_place = (iter / 3) % 2;
        make_order(order, np, kind);
        weft__rr_t rr;
        void *dst = in_place ? (void *)a : (void *)out;
        weft__rr_init(&rr, dst, a, n, p.dt, p.op);
        deliver(&rr, m, cuts, order, np);
        ck_assert_msg(!weft__rr_failed(&rr), "iter %d: %d pieces, order kind %d", iter, np, kind);
        ck_assert_msg(memcmp(dst, want, bytes) == 0,
                      "iter %d: dtype %d op %d, %zu elements, %d pieces, order %d, in place %d",
                      iter, (int)p.dt, (int)p.op, n, np, kind, in_place);
        free(a);
        free(m);
        free(out);
        free(want);
    }
}
END_TEST

/* Every piece three bytes long, the even-numbered ones first (offsets 0, 6,
 * 12, ...), then the odd-numbered ones: far more than
 * WEFT__RR_EDGES elements are open at once. The receive must report it. */
START_TEST(test_too_many_open_elements)
{
    enum { N = 64 };
    float a[N], m[N], out[N];
    for (int i = 0; i < N; i++) a[i] = m[i] = (float)i;
    weft__rr_t rr;
    weft__rr_init(&rr, out, a, N, WEFT_FLOAT32, WEFT_SUM);
    size_t bytes = sizeof m;
    for (int pass = 0; pass < 2; pass++)
        for (size_t off = pass * 3; off < bytes; off += 6) {
            size_t len = bytes - off < 3 ? bytes - off : 3;
            rr.d.unpack(&rr.d, off, (const unsigned char *)m + off, len);
        }
    ck_assert(weft__rr_failed(&rr));
}
END_TEST

/* An element left partly received (a truncated message) is reported. */
START_TEST(test_incomplete)
{
    double a[4] = {1, 2, 3, 4}, m[4] = {1, 1, 1, 1}, out[4];
    weft__rr_t rr;
    weft__rr_init(&rr, out, a, 4, WEFT_FLOAT64, WEFT_SUM);
    rr.d.unpack(&rr.d, 0, m, 13); /* element 1 is left with 5 of its 8 bytes */
    ck_assert(weft__rr_failed(&rr));
    ck_assert(out[0] == 2.0);
}
END_TEST

static Suite *recv_reduce_suite(void)
{
    Suite *s = suite_create("recv_reduce");
    TCase *tc = tcase_create("pieces");
    tcase_add_test(tc, test_pieces_any_order);
    tcase_add_test(tc, test_too_many_open_elements);
    tcase_add_test(tc, test_incomplete);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(recv_reduce_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
