/*
 * test_asym.c - collectives with bad arguments on some ranks only.
 *
 * Always: what every rank can check alike (the root's vector of a gather or
 * scatter overflowing) is refused on every rank, and a call that one rank
 * refused keeps its place in the communicator's order, so that the next
 * collective never matches the refused call's messages.
 *
 * With WEFT_CHECK_ARGS=1 (doc/config.md): a bad or mismatched argument on
 * any one rank fails the call on every rank, at once, and the next
 * collective is unaffected.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

static void next_works(mt_ctx_t *t, const char *after)
{
    long x = t->rank + 1, want = (long)t->size * (t->size + 1) / 2;
    char what[160];
    snprintf(what, sizeof what, "allreduce after %s", after);
    MT_STATUS(t, weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_INT64, WEFT_SUM, t->comm), WEFT_SUCCESS,
              what);
    MT_CHECK(t, x == want, "%s: %ld, want %ld", what, x, want);
}

/* Count overflow of the root's whole vector: refused on every rank. */
static void test_overflow_everywhere(mt_ctx_t *t)
{
    float s = 1, r = 0;
    size_t huge = SIZE_MAX / (4u * (size_t)t->size) + 1;
    weft_request_t q = WEFT_REQUEST_NULL;
    MT_STATUS(t, weft_gather(&s, &r, huge, WEFT_FLOAT32, 0, t->comm), WEFT_ERR_COUNT_OVERFLOW,
              "gather, root's vector overflows");
    MT_STATUS(t, weft_igather(&s, &r, huge, WEFT_FLOAT32, t->size - 1, t->comm, &q),
              WEFT_ERR_COUNT_OVERFLOW, "igather, root's vector overflows");
    MT_STATUS(t, weft_scatter(&s, &r, huge, WEFT_FLOAT32, 0, t->comm), WEFT_ERR_COUNT_OVERFLOW,
              "scatter, root's vector overflows");
    MT_STATUS(t, weft_iscatter(&s, &r, huge, WEFT_FLOAT32, t->size - 1, t->comm, &q),
              WEFT_ERR_COUNT_OVERFLOW, "iscatter, root's vector overflows");
    next_works(t, "overflowing gathers and scatters");
}

/* The root alone refuses a small gather (NULL receive buffer); the others'
 * sends complete (small, eager). The next gather must deliver its own data,
 * not the refused one's. */
static void test_refusal_keeps_order(mt_ctx_t *t)
{
    if (t->size < 2) return;
    const int root = 0;
    int32_t mine = 1000 + t->rank;
    int32_t *all = calloc((size_t)t->size, sizeof *all);
    if (!all) {
        mt_error(t, "out of memory");
        return;
    }
    weft_status_t st = weft_gather(&mine, t->rank == root ? NULL : all, 1, WEFT_INT32, root, t->comm);
    if (t->rank == root)
        MT_STATUS(t, st, WEFT_ERR_INVALID_ARG, "gather with a NULL receive buffer at the root");
    else
        MT_STATUS(t, st, WEFT_SUCCESS, "gather whose root refused (eager send)");
    mine = 2000 + t->rank;
    MT_STATUS(t, weft_gather(&mine, all, 1, WEFT_INT32, root, t->comm), WEFT_SUCCESS, "next gather");
    if (t->rank == root)
        for (int q = 0; q < t->size; q++)
            MT_CHECK(t, all[q] == 2000 + q, "next gather: rank %d's block %d, want %d (the refused "
                     "call's data?)", q, all[q], 2000 + q);
    free(all);
    next_works(t, "a refused gather");
}

/* WEFT_CHECK_ARGS=1: one rank's bad or different argument fails the call on
 * every rank. */
static void expect_all_fail(mt_ctx_t *t, weft_status_t st, int bad_rank, const char *what)
{
    if (t->size == 1 && strstr(what, "differs") != NULL) {
        /* alone, a rank cannot differ from the others: a valid call */
        MT_STATUS(t, st, WEFT_SUCCESS, what);
        return;
    }
    if (t->rank == bad_rank)
        MT_CHECK(t, st < 0, "%s: the bad rank got %s", what, weft_status_name(st));
    else
        MT_STATUS(t, st, WEFT_ERR_INVALID_ARG, what);
}

static void test_checked(mt_ctx_t *t)
{
    const int p = t->size, me = t->rank, bad = p - 1;
    const int is_bad = me == bad;
    float *s = calloc(64 * (size_t)p, sizeof *s), *r = calloc(64 * (size_t)p, sizeof *r);
    if (!s || !r) {
        mt_error(t, "out of memory");
        free(s);
        free(r);
        return;
    }
    weft_request_t q = WEFT_REQUEST_NULL;
    /* NULL buffer on one rank */
    expect_all_fail(t, weft_allreduce(is_bad ? NULL : s, r, 4, WEFT_FLOAT32, WEFT_SUM, t->comm), bad,
                    "allreduce, NULL send buffer on one rank");
    next_works(t, "allreduce with a NULL buffer");
    expect_all_fail(t, weft_iallreduce(s, is_bad ? NULL : r, 4, WEFT_FLOAT32, WEFT_SUM, t->comm, &q),
                    bad, "iallreduce, NULL receive buffer on one rank");
    /* a different count, datatype, operation or root on one rank */
    expect_all_fail(t, weft_allreduce(s, r, is_bad ? 5 : 4, WEFT_FLOAT32, WEFT_SUM, t->comm), bad,
                    "allreduce, count differs on one rank");
    expect_all_fail(t, weft_allreduce(s, r, 4, is_bad ? WEFT_INT32 : WEFT_FLOAT32, WEFT_SUM, t->comm),
                    bad, "allreduce, datatype differs on one rank");
    expect_all_fail(t, weft_allreduce(s, r, 4, WEFT_FLOAT32, is_bad ? WEFT_MAX : WEFT_SUM, t->comm),
                    bad, "allreduce, operation differs on one rank");
    expect_all_fail(t, weft_allreduce(s, r, 4, WEFT_FLOAT32, is_bad ? WEFT_BAND : WEFT_SUM, t->comm),
                    bad, "allreduce, bitwise operation on floats on one rank");
    next_works(t, "allreduce mismatches");
    expect_all_fail(t, weft_bcast(s, 4, WEFT_FLOAT32, is_bad ? p : 0, t->comm), bad,
                    "bcast, root out of range on one rank");
    if (p > 1)
        expect_all_fail(t, weft_bcast(s, 4, WEFT_FLOAT32, is_bad ? 1 : 0, t->comm), bad,
                        "bcast, root differs on one rank");
    expect_all_fail(t, weft_ibcast(s, is_bad ? 3 : 4, WEFT_FLOAT32, 0, t->comm, &q), bad,
                    "ibcast, count differs on one rank");
    MT_STATUS(t, weft_wait(&q), WEFT_SUCCESS, "wait (a valid ibcast when alone)");
    expect_all_fail(t, weft_reduce(s, r, 4, WEFT_FLOAT32, WEFT_SUM, is_bad ? -1 : 0, t->comm), bad,
                    "reduce, root -1 on one rank");
    expect_all_fail(t, weft_reduce_scatter(s, r, is_bad ? 2 : 1, WEFT_FLOAT32, WEFT_SUM, t->comm), bad,
                    "reduce_scatter, count differs on one rank");
    expect_all_fail(t, weft_allgather(s, is_bad ? NULL : r, 1, WEFT_FLOAT32, t->comm), bad,
                    "allgather, NULL receive buffer on one rank");
    expect_all_fail(t, weft_ialltoall(s, r, 1, is_bad ? (weft_datatype_t)99 : WEFT_FLOAT32, t->comm, &q),
                    bad, "ialltoall, unknown datatype on one rank");
    expect_all_fail(t, weft_gather(s, r, is_bad ? 2 : 1, WEFT_FLOAT32, 0, t->comm), bad,
                    "gather, count differs on one rank");
    expect_all_fail(t, weft_scatter(s, r, 1, WEFT_FLOAT32, is_bad ? p + 3 : 0, t->comm), bad,
                    "scatter, root out of range on one rank");
    /* the root alone passes bad buffers */
    expect_all_fail(t, weft_gather(s, me == 0 ? NULL : r, 1, WEFT_FLOAT32, 0, t->comm), 0,
                    "gather, NULL receive buffer at the root");
    next_works(t, "every mismatch");
    /* and a fully valid call of each kind still works in this mode */
    for (int i = 0; i < 4; i++) s[i] = (float)(me + i);
    MT_STATUS(t, weft_allreduce(s, r, 4, WEFT_FLOAT32, WEFT_SUM, t->comm), WEFT_SUCCESS,
              "valid allreduce, checked");
    for (int i = 0; i < 4; i++)
        MT_CHECK(t, r[i] == (float)(p * (p - 1) / 2 + p * i), "checked allreduce [%d] = %g", i,
                 (double)r[i]);
    free(s);
    free(r);
}

int main(int argc, char **argv)
{
    mt_ctx_t t;
    int rc = mt_init(&t, &argc, &argv);
    if (rc != 0) return rc;
    const char *chk = getenv("WEFT_CHECK_ARGS");
    test_overflow_everywhere(&t);
    if (chk && strcmp(chk, "1") == 0) test_checked(&t);
    else test_refusal_keeps_order(&t);
    return mt_finish(&t);
}
