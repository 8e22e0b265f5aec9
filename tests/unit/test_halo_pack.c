/*
 * test_halo_pack.c - Check suite for lib/halo_pack.c: whole and piecewise
 * pack/unpack of a box of a [outer][e0][e1][e2] buffer. No MPI needed.
 *
 * Reference: the box's elements in packing order (outer, then dims 0, 1, 2,
 * the last fastest), computed element by element from the box's bounds with
 * no knowledge of how the library merges runs. Pieces are cut at arbitrary
 * byte offsets (not on rows or elements), as a transport cuts its fragments.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "halo.h"

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint64_t rnd(void)
{
    uint64_t x = (rng_state += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

typedef struct box {
    weft__halo_layout_t l;
    weft__halo_region_t r;
} box_t;

/* A random layout and a random box inside it; faces of every dimension,
 * whole planes and single cells all come up. */
static box_t random_box(void)
{
    box_t b;
    memset(&b, 0, sizeof b);
    b.l.outer = 1 + rnd() % 5;
    b.l.esize = 4;
    b.l.dtype = WEFT_FLOAT32;
    size_t elems = b.l.outer;
    for (int d = 0; d < 3; d++) {
        b.l.ext[d] = 1 + rnd() % 9;
        int whole = rnd() % 3 == 0;
        b.r.len[d] = whole ? b.l.ext[d] : 1 + rnd() % b.l.ext[d];
        b.r.start[d] = rnd() % (b.l.ext[d] - b.r.len[d] + 1);
        elems *= b.r.len[d];
    }
    b.r.bytes = elems * b.l.esize;
    return b;
}

/* Byte offset in the buffer of the k-th element of the box in packing order. */
static size_t ref_offset(const box_t *b, size_t k)
{
    size_t i2 = k % b->r.len[2];
    k /= b->r.len[2];
    size_t i1 = k % b->r.len[1];
    k /= b->r.len[1];
    size_t i0 = k % b->r.len[0];
    size_t o = k / b->r.len[0];
    size_t x0 = b->r.start[0] + i0, x1 = b->r.start[1] + i1, x2 = b->r.start[2] + i2;
    return (((o * b->l.ext[0] + x0) * b->l.ext[1] + x1) * b->l.ext[2] + x2) * b->l.esize;
}

static size_t buf_bytes(const box_t *b)
{
    return b->l.outer * b->l.ext[0] * b->l.ext[1] * b->l.ext[2] * b->l.esize;
}

static void fill_random(unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)rnd();
}

/* The reference packed image of the box. */
static void ref_pack(const box_t *b, const unsigned char *buf, unsigned char *out)
{
    size_t n = b->r.bytes / b->l.esize;
    for (size_t k = 0; k < n; k++) memcpy(out + k * b->l.esize, buf + ref_offset(b, k), b->l.esize);
}

START_TEST(test_pack_whole_and_pieces)
{
    for (int iter = 0; iter < 400; iter++) {
        box_t b = random_box();
        size_t nb = buf_bytes(&b);
        unsigned char *buf = malloc(nb), *want = malloc(b.r.bytes + 1);
        unsigned char *got = malloc(b.r.bytes + 16);
        ck_assert_ptr_nonnull(buf);
        ck_assert_ptr_nonnull(want);
        ck_assert_ptr_nonnull(got);
        fill_random(buf, nb);
        ref_pack(&b, buf, want);

        memset(got, 0xA5, b.r.bytes + 16);
        weft__halo_pack(buf, &b.l, &b.r, got);
        ck_assert_mem_eq(got, want, b.r.bytes);

        /* pieces of random length (1 .. 37 bytes), the last one clipped */
        memset(got, 0xA5, b.r.bytes + 16);
        size_t off = 0;
        while (off < b.r.bytes) {
            size_t max = 1 + rnd() % 37;
            size_t n = weft__halo_pack_part(buf, &b.l, &b.r, off, got + off, max);
            /* exactly min(max, what is left): the contract in halo.h */
            ck_assert_uint_eq(n, max < b.r.bytes - off ? max : b.r.bytes - off);
            off += n;
        }
        ck_assert_uint_eq(off, b.r.bytes);
        ck_assert_mem_eq(got, want, b.r.bytes);
        ck_assert_uint_eq(got[b.r.bytes], 0xA5); /* nothing written past the end */
        ck_assert_uint_eq(weft__halo_pack_part(buf, &b.l, &b.r, b.r.bytes, got, 8), 0);
        free(buf);
        free(want);
        free(got);
    }
}
END_TEST

START_TEST(test_unpack_pieces)
{
    for (int iter = 0; iter < 400; iter++) {
        box_t b = random_box();
        size_t nb = buf_bytes(&b);
        unsigned char *before = malloc(nb), *buf = malloc(nb), *want = malloc(nb);
        unsigned char *img = malloc(b.r.bytes);
        ck_assert_ptr_nonnull(before);
        ck_assert_ptr_nonnull(buf);
        ck_assert_ptr_nonnull(want);
        ck_assert_ptr_nonnull(img);
        fill_random(before, nb);
        fill_random(img, b.r.bytes);
        /* reference: the box's elements replaced, everything else untouched */
        memcpy(want, before, nb);
        for (size_t k = 0; k < b.r.bytes / b.l.esize; k++)
            memcpy(want + ref_offset(&b, k), img + k * b.l.esize, b.l.esize);

        memcpy(buf, before, nb);
        weft__halo_unpack(buf, &b.l, &b.r, img);
        ck_assert_mem_eq(buf, want, nb);

        memcpy(buf, before, nb);
        size_t off = 0;
        while (off < b.r.bytes) {
            size_t n = 1 + rnd() % 29;
            if (n > b.r.bytes - off) n = b.r.bytes - off;
            weft__halo_unpack_part(buf, &b.l, &b.r, off, img + off, n);
            off += n;
        }
        ck_assert_mem_eq(buf, want, nb);
        free(before);
        free(buf);
        free(want);
        free(img);
    }
}
END_TEST

static Suite *halo_pack_suite(void)
{
    Suite *s = suite_create("halo_pack");
    TCase *tc = tcase_create("pack");
    tcase_add_test(tc, test_pack_whole_and_pieces);
    tcase_add_test(tc, test_unpack_pieces);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(halo_pack_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
