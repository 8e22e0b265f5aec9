/*
 * test_comm_transport.c - a transport chosen per communicator
 * (weft_comm_create_ex, weft_comm_get_transport, weft_transport_name).
 *
 *   1. names of the transport values;
 *   2. the default communicator's transport follows WEFT_TRANSPORT (run with it
 *      unset and with WEFT_TRANSPORT=mpi, see meson.build);
 *   3. one communicator per transport in the same process: each reports the
 *      transport it was asked for; allreduce on both at once (nonblocking,
 *      interleaved), 1 to 131072 float64, against MPI_Allreduce, bitwise
 *      (mt_fill's values rounded to multiples of 1/8, whose sums are exact in
 *      any order); a ring sendrecv on both at once with a
 *      payload each receiver recomputes;
 *   4. errors, none of which may hang: a params block too small, an unknown
 *      transport, ranks asking for different transports (every rank gets
 *      WEFT_ERR_INVALID_ARG), UCX asked for in a build without it; NULL
 *      arguments of weft_comm_get_transport; a communicator created after the
 *      failures works;
 *   5. weft_finalize and weft_init again, twice, with a UCX communicator (MPI
 *      without UCX) in each life: UCX's worker and its shared endpoints are
 *      torn down and started anew; an allreduce checked in each.
 * With MT_UCX_UNUSABLE=1 (meson.build runs it so with WEFT_TRANSPORT=mpi and
 * WEFT_UCX_TLS=bogus: UCX's settings for Weft's context alone) steps 3 - 5
 * give way to 6: every rank's UCX communicator fails with WEFT_ERR_UCX, again
 * fast, and again after weft_finalize + weft_init; MPI (whose context reads
 * UCX_TLS, not WEFT_UCX_TLS) and an MPI-transport communicator keep working.
 * MT_HAVE_UCX is defined by meson.build when the UCX transport is built.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

#ifdef MT_HAVE_UCX
#define HAVE_UCX 1
#else
#define HAVE_UCX 0
#endif

/* 1. */
static void test_names(mt_ctx_t *t)
{
    const char *d = weft_transport_name(WEFT_TRANSPORT_DEFAULT);
    const char *m = weft_transport_name(WEFT_TRANSPORT_MPI);
    const char *u = weft_transport_name(WEFT_TRANSPORT_UCX);
    MT_CHECK(t, d && strcmp(d, "default") == 0, "name of DEFAULT: %s", d ? d : "(null)");
    MT_CHECK(t, m && strcmp(m, "mpi") == 0, "name of MPI: %s", m ? m : "(null)");
    MT_CHECK(t, u && strcmp(u, "ucx") == 0, "name of UCX: %s", u ? u : "(null)");
    MT_CHECK(t, weft_transport_name(WEFT_TRANSPORT_COUNT) == NULL, "name of COUNT not NULL");
    MT_CHECK(t, weft_transport_name((weft_transport_t)-1) == NULL, "name of -1 not NULL");
}

/* 2. */
static void test_default(mt_ctx_t *t)
{
    const char *env = getenv("WEFT_TRANSPORT");
    weft_transport_t want = HAVE_UCX ? WEFT_TRANSPORT_UCX : WEFT_TRANSPORT_MPI;
    if (env && strcmp(env, "mpi") == 0) want = WEFT_TRANSPORT_MPI;
    weft_transport_t got = WEFT_TRANSPORT_DEFAULT;
    if (MT_STATUS(t, weft_comm_get_transport(t->comm, &got), WEFT_SUCCESS, "get_transport"))
        MT_CHECK(t, got == want, "default comm: transport %s, expected %s (WEFT_TRANSPORT=%s)",
                 weft_transport_name(got), weft_transport_name(want), env ? env : "(unset)");
}

static weft_status_t create_with(weft_transport_t tp, weft_comm_t *c)
{
    weft_comm_params_t p = WEFT_COMM_PARAMS_INITIALIZER;
    p.transport = tp;
    return weft_comm_create_ex(MPI_COMM_WORLD, NULL, &p, c);
}

/* A new communicator over transport tp does a correct allreduce (checked),
 * then is destroyed. */
static void comm_works(mt_ctx_t *t, weft_transport_t tp, const char *when)
{
    weft_comm_t c = NULL;
    if (!MT_STATUS(t, create_with(tp, &c), WEFT_SUCCESS, "weft_comm_create_ex")) {
        MT_CHECK(t, 0, "no %s-transport communicator %s", weft_transport_name(tp), when);
        return;
    }
    int mine = t->rank + 1, sum = 0;
    MT_STATUS(t, weft_allreduce(&mine, &sum, 1, WEFT_INT32, WEFT_SUM, c), WEFT_SUCCESS,
              "allreduce on the new comm");
    MT_CHECK(t, sum == t->size * (t->size + 1) / 2, "allreduce over %s %s: %d, expected %d",
             weft_transport_name(tp), when, sum, t->size * (t->size + 1) / 2);
    MT_STATUS(t, weft_comm_destroy(c), WEFT_SUCCESS, "weft_comm_destroy");
}

/* Destroy the harness communicator, weft_finalize, weft_init, and create the
 * harness communicator again (for mt_finish). Returns 0 if Weft is up again. */
static int restart_weft(mt_ctx_t *t)
{
    MT_STATUS(t, weft_comm_destroy(t->comm), WEFT_SUCCESS, "weft_comm_destroy (harness comm)");
    t->comm = NULL;
    if (!MT_STATUS(t, weft_finalize(), WEFT_SUCCESS, "weft_finalize") ||
        !MT_STATUS(t, weft_init(NULL), WEFT_SUCCESS, "weft_init again"))
        return -1;
    return MT_STATUS(t, weft_comm_create(MPI_COMM_WORLD, NULL, &t->comm), WEFT_SUCCESS,
                     "weft_comm_create (harness comm again)") ? 0 : -1;
}

/* 3. */
static void test_both(mt_ctx_t *t)
{
    weft_comm_t c[2] = {NULL, NULL};
    const weft_transport_t tp[2] = {WEFT_TRANSPORT_MPI, WEFT_TRANSPORT_UCX};
    const int n_tp = HAVE_UCX ? 2 : 1;
    for (int k = 0; k < n_tp; k++) {
        if (!MT_STATUS(t, create_with(tp[k], &c[k]), WEFT_SUCCESS, "weft_comm_create_ex"))
            goto out;
        weft_transport_t got = WEFT_TRANSPORT_DEFAULT;
        MT_STATUS(t, weft_comm_get_transport(c[k], &got), WEFT_SUCCESS, "get_transport");
        MT_CHECK(t, got == tp[k], "comm asked for %s reports %s", weft_transport_name(tp[k]),
                 weft_transport_name(got));
    }

    const size_t counts[] = {1, 3, 1024, 8192, 131072};
    for (size_t s = 0; s < sizeof counts / sizeof counts[0]; s++) {
        size_t n = counts[s];
        double *in[2] = {NULL, NULL}, *out[2] = {NULL, NULL}, *ref = malloc(n * sizeof(double));
        weft_request_t req[2] = {WEFT_REQUEST_NULL, WEFT_REQUEST_NULL};
        int ok = ref != NULL;
        for (int k = 0; k < n_tp && ok; k++) {
            in[k] = malloc(n * sizeof(double));
            out[k] = malloc(n * sizeof(double));
            ok = in[k] && out[k];
        }
        if (!ok) {
            mt_error(t, "out of memory");
        } else {
            for (int k = 0; k < n_tp; k++) {
                mt_fill(in[k], n, WEFT_FLOAT64, WEFT_SUM, t->rank, (uint64_t)k);
                /* Multiples of 1/8 in [-1, 1): any order of summing them is
                 * exact, so the comparison with MPI can be bitwise whatever
                 * algorithm either side chose. */
                for (size_t i = 0; i < n; i++) in[k][i] = ldexp(round(ldexp(in[k][i], 3)), -3);
                for (size_t i = 0; i < n; i++) out[k][i] = -1e300;
            }
            /* both in flight at once, on the two transports */
            for (int k = 0; k < n_tp; k++)
                MT_STATUS(t, weft_iallreduce(in[k], out[k], n, WEFT_FLOAT64, WEFT_SUM, c[k], &req[k]),
                          WEFT_SUCCESS, "weft_iallreduce");
            for (int k = n_tp - 1; k >= 0; k--)
                MT_STATUS(t, weft_wait(&req[k]), WEFT_SUCCESS, "weft_wait");
            for (int k = 0; k < n_tp; k++) {
                char what[64];
                snprintf(what, sizeof what, "allreduce of %zu float64 over %s", n,
                         weft_transport_name(tp[k]));
                if (MPI_Allreduce(in[k], ref, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) !=
                    MPI_SUCCESS)
                    mt_error(t, "MPI_Allreduce (reference) failed");
                else
                    mt_compare(t, out[k], ref, n, WEFT_FLOAT64, 0.0, what);
            }
        }
        for (int k = 0; k < 2; k++) {
            free(in[k]);
            free(out[k]);
        }
        free(ref);
    }

    /* ring sendrecv on both at once */
    const size_t nb = 100000;
    int right = (t->rank + 1) % t->size, left = (t->rank + t->size - 1) % t->size;
    uint8_t *sb[2] = {NULL, NULL}, *rb[2] = {NULL, NULL};
    weft_request_t r[4] = {WEFT_REQUEST_NULL, WEFT_REQUEST_NULL, WEFT_REQUEST_NULL,
                           WEFT_REQUEST_NULL};
    for (int k = 0; k < n_tp; k++) {
        sb[k] = malloc(nb);
        rb[k] = calloc(nb, 1);
        if (!sb[k] || !rb[k]) {
            mt_error(t, "out of memory");
            goto free_ring;
        }
        mt_fill_bytes(sb[k], nb, t->rank, (uint32_t)k);
    }
    for (int k = 0; k < n_tp; k++) {
        MT_STATUS(t, weft_irecv(rb[k], nb, WEFT_UINT8, left, 5, c[k], &r[2 * k]), WEFT_SUCCESS,
                  "weft_irecv");
        MT_STATUS(t, weft_isend(sb[k], nb, WEFT_UINT8, right, 5, c[k], &r[2 * k + 1]),
                  WEFT_SUCCESS, "weft_isend");
    }
    MT_STATUS(t, weft_waitall((size_t)(2 * n_tp), r), WEFT_SUCCESS, "weft_waitall");
    for (int k = 0; k < n_tp; k++) {
        const size_t bad = mt_bad_bytes(rb[k], nb, left, (uint32_t)k);
        MT_CHECK(t, bad == 0, "ring over %s: %zu of %zu bytes wrong", weft_transport_name(tp[k]),
                 bad, nb);
    }
free_ring:
    for (int k = 0; k < 2; k++) {
        free(sb[k]);
        free(rb[k]);
    }
out:
    for (int k = 0; k < 2; k++)
        if (c[k]) MT_STATUS(t, weft_comm_destroy(c[k]), WEFT_SUCCESS, "weft_comm_destroy");
}

/* 4. */
static void test_errors(mt_ctx_t *t)
{
    weft_comm_t c = NULL;
    weft_comm_params_t p = WEFT_COMM_PARAMS_INITIALIZER;

    p.size = 0;
    MT_STATUS(t, weft_comm_create_ex(MPI_COMM_WORLD, NULL, &p, &c), WEFT_ERR_INVALID_ARG,
              "params.size 0");
    MT_CHECK(t, c == NULL, "a failed create set the handle");
    p.size = sizeof p;
    MT_STATUS(t, weft_comm_create_ex(MPI_COMM_WORLD, NULL, &p, NULL), WEFT_ERR_INVALID_ARG,
              "NULL out");

    p.transport = (weft_transport_t)99;
    MT_STATUS(t, weft_comm_create_ex(MPI_COMM_WORLD, NULL, &p, &c), WEFT_ERR_INVALID_ARG,
              "unknown transport");
    MT_CHECK(t, c == NULL, "a failed create set the handle");

    if (HAVE_UCX && t->size > 1) {
        /* rank 0 asks for MPI, the others for UCX */
        p.transport = t->rank == 0 ? WEFT_TRANSPORT_MPI : WEFT_TRANSPORT_UCX;
        MT_STATUS(t, weft_comm_create_ex(MPI_COMM_WORLD, NULL, &p, &c), WEFT_ERR_INVALID_ARG,
                  "ranks asking for different transports");
        MT_CHECK(t, c == NULL, "a failed create set the handle");
    }
    if (!HAVE_UCX) {
        p.transport = WEFT_TRANSPORT_UCX;
        MT_STATUS(t, weft_comm_create_ex(MPI_COMM_WORLD, NULL, &p, &c), WEFT_ERR_UNSUPPORTED,
                  "UCX in a build without it");
        MT_CHECK(t, c == NULL, "a failed create set the handle");
    }

    weft_transport_t got;
    MT_STATUS(t, weft_comm_get_transport(NULL, &got), WEFT_ERR_INVALID_COMM, "get_transport(NULL)");
    MT_STATUS(t, weft_comm_get_transport(t->comm, NULL), WEFT_ERR_INVALID_ARG,
              "get_transport(comm, NULL)");

    /* still usable: a communicator with the other transport than the default */
    comm_works(t, WEFT_TRANSPORT_MPI, "after the failures");
}

/* 5. */
static void test_reinit(mt_ctx_t *t)
{
    for (int life = 0; life < 2; life++) {
        if (restart_weft(t) != 0) return;
        comm_works(t, HAVE_UCX ? WEFT_TRANSPORT_UCX : WEFT_TRANSPORT_MPI,
                   life ? "in a third life" : "after weft_init again");
    }
}

/* 6. */
static void test_ucx_unusable(mt_ctx_t *t)
{
    for (int life = 0; life < 2; life++) {
        for (int attempt = 0; attempt < 2; attempt++) { /* the second fails fast */
            weft_comm_t c = NULL;
            MT_STATUS(t, create_with(WEFT_TRANSPORT_UCX, &c), WEFT_ERR_UCX,
                      "UCX comm with an unusable WEFT_UCX_TLS");
            MT_CHECK(t, c == NULL, "a failed create set the handle (life %d, attempt %d)", life,
                     attempt);
        }
        int one = 1, sum = 0;
        MT_CHECK(t, MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS &&
                        sum == t->size,
                 "MPI_Allreduce after the failed UCX start: %d, expected %d", sum, t->size);
        comm_works(t, WEFT_TRANSPORT_MPI,
                   life ? "after weft_init again" : "after the failed UCX start");
        if (life == 0 && restart_weft(t) != 0) return;
    }
}

int main(int argc, char **argv)
{
    mt_ctx_t t;
    int rc = mt_init(&t, &argc, &argv);
    if (rc != 0) return rc;
    const char *unusable = getenv("MT_UCX_UNUSABLE");
    test_names(&t);
    test_default(&t);
    if (unusable && strcmp(unusable, "1") == 0) {
        if (HAVE_UCX) test_ucx_unusable(&t);
        return mt_finish(&t);
    }
    test_both(&t);
    test_errors(&t);
    test_reinit(&t);
    return mt_finish(&t);
}
