/*
 * test_p2p.c - point-to-point send/recv/sendrecv through the engine
 * (mpiexec -n 1..4): a ring exchange (blocking sendrecv, nonblocking
 * isend/irecv), several messages with one tag arriving in order, tags
 * received out of their sending order, zero-byte messages, messages that
 * overlap collectives on the same communicator without mixing with their
 * traffic, the payload compared with what MPI_Sendrecv on MPI_COMM_WORLD
 * delivers, and bad peers/tags refused.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

#define N 5000

static void ring(mt_ctx_t *t)
{
    int p = t->size, r = t->rank, right = (r + 1) % p, left = (r + p - 1) % p;
    double *s = malloc(N * sizeof *s), *g = malloc(N * sizeof *g), *ref = malloc(N * sizeof *ref);
    if (!s || !g || !ref) {
        mt_error(t, "out of memory");
        goto out;
    }
    mt_fill(s, N, WEFT_FLOAT64, WEFT_SUM, r, 1);
    MPI_Sendrecv(s, N, MPI_DOUBLE, right, 7, ref, N, MPI_DOUBLE, left, 7, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);

    memset(g, 0, N * sizeof *g);
    if (MT_STATUS(t, weft_sendrecv(s, N, right, 3, g, N, left, 3, WEFT_FLOAT64, t->comm),
                  WEFT_SUCCESS, "sendrecv"))
        mt_compare(t, g, ref, N, WEFT_FLOAT64, 0.0, "sendrecv ring");

    weft_request_t req[2];
    memset(g, 0, N * sizeof *g);
    MT_STATUS(t, weft_irecv(g, N, WEFT_FLOAT64, left, 99, t->comm, &req[0]), WEFT_SUCCESS, "irecv");
    MT_STATUS(t, weft_isend(s, N, WEFT_FLOAT64, right, 99, t->comm, &req[1]), WEFT_SUCCESS, "isend");
    if (MT_STATUS(t, weft_waitall(2, req), WEFT_SUCCESS, "waitall ring"))
        mt_compare(t, g, ref, N, WEFT_FLOAT64, 0.0, "isend/irecv ring");

    /* blocking send/recv: even ranks send first, odd receive first */
    memset(g, 0, N * sizeof *g);
    weft_status_t a, b;
    if (p == 1) {
        weft_request_t rq;
        a = weft_irecv(g, N, WEFT_FLOAT64, 0, 5, t->comm, &rq);
        b = weft_send(s, N, WEFT_FLOAT64, 0, 5, t->comm);
        if (a == WEFT_SUCCESS) a = weft_wait(&rq);
    } else if (r % 2 == 0) {
        a = weft_send(s, N, WEFT_FLOAT64, right, 5, t->comm);
        b = weft_recv(g, N, WEFT_FLOAT64, left, 5, t->comm);
    } else {
        b = weft_recv(g, N, WEFT_FLOAT64, left, 5, t->comm);
        a = weft_send(s, N, WEFT_FLOAT64, right, 5, t->comm);
    }
    if (MT_STATUS(t, a, WEFT_SUCCESS, "send") & MT_STATUS(t, b, WEFT_SUCCESS, "recv"))
        mt_compare(t, g, ref, N, WEFT_FLOAT64, 0.0, "send/recv ring");
out:
    free(s), free(g), free(ref);
}

/* Rank 0 -> rank last: tags 1,2,3 sent in order, received 3,1,2; then five
 * messages with one tag that must arrive in sending order; then an empty one. */
static void ordering(mt_ctx_t *t)
{
    int last = t->size - 1;
    int v[8] = {0};
    weft_request_t rq[8];
    int ns = 0, nr = 0;
    if (t->rank == last) {
        MT_STATUS(t, weft_irecv(&v[2], 1, WEFT_INT32, 0, 3, t->comm, &rq[nr++]), WEFT_SUCCESS, "irecv t3");
        MT_STATUS(t, weft_irecv(&v[0], 1, WEFT_INT32, 0, 1, t->comm, &rq[nr++]), WEFT_SUCCESS, "irecv t1");
        MT_STATUS(t, weft_irecv(&v[1], 1, WEFT_INT32, 0, 2, t->comm, &rq[nr++]), WEFT_SUCCESS, "irecv t2");
    }
    if (t->rank == 0) {
        static int w[3] = {10, 20, 30};
        for (int i = 0; i < 3; i++)
            MT_STATUS(t, weft_isend(&w[i], 1, WEFT_INT32, last, i + 1, t->comm, &rq[nr + ns++]),
                      WEFT_SUCCESS, "isend tags");
    }
    MT_STATUS(t, weft_waitall((size_t)(nr + ns), rq), WEFT_SUCCESS, "waitall tags");
    if (t->rank == last)
        MT_CHECK(t, v[0] == 10 && v[1] == 20 && v[2] == 30, "tag matching gave %d %d %d", v[0], v[1], v[2]);

    /* Five messages with one tag, sent before any receive is posted:
     * nonblocking, as a blocking send may wait for its receive (over the MPI
     * transport it does for a message to itself, on one rank). */
    int same[5];
    weft_request_t sq[5];
    int nsq = 0;
    for (int i = 0; i < 5; i++) {
        if (t->rank == 0) {
            same[i] = 100 + i;
            MT_STATUS(t, weft_isend(&same[i], 1, WEFT_INT32, last, 77, t->comm, &sq[nsq++]),
                      WEFT_SUCCESS, "send same tag");
        }
    }
    if (t->rank == last) {
        for (int i = 0; i < 5; i++) {
            int x = -1;
            MT_STATUS(t, weft_recv(&x, 1, WEFT_INT32, 0, 77, t->comm), WEFT_SUCCESS, "recv same tag");
            MT_CHECK(t, x == 100 + i, "message %d with one tag arrived as %d", i, x);
        }
    }
    MT_STATUS(t, weft_waitall((size_t)nsq, sq), WEFT_SUCCESS, "waitall same tag");

    /* A blocking send behind nonblocking ones with the same tag must not
     * overtake them (a blocking call starts on the caller's thread only
     * when nothing else is in flight). Not to itself: see above. */
    if (last > 0) {
        int behind[3] = {200, 201, 202};
        nsq = 0;
        if (t->rank == 0) {
            for (int i = 0; i < 2; i++)
                MT_STATUS(t, weft_isend(&behind[i], 1, WEFT_INT32, last, 78, t->comm, &sq[nsq++]),
                          WEFT_SUCCESS, "isend before a send");
            MT_STATUS(t, weft_send(&behind[2], 1, WEFT_INT32, last, 78, t->comm), WEFT_SUCCESS,
                      "send behind isends");
        }
        if (t->rank == last) {
            for (int i = 0; i < 3; i++) {
                int x = -1;
                MT_STATUS(t, weft_recv(&x, 1, WEFT_INT32, 0, 78, t->comm), WEFT_SUCCESS,
                          "recv behind");
                MT_CHECK(t, x == 200 + i, "message %d behind isends arrived as %d", i, x);
            }
        }
        MT_STATUS(t, weft_waitall((size_t)nsq, sq), WEFT_SUCCESS, "waitall behind");
    }
    /* zero-byte message, NULL buffer allowed with count 0 */
    weft_request_t z[2];
    int nz = 0;
    if (t->rank == last)
        MT_STATUS(t, weft_irecv(NULL, 0, WEFT_INT32, 0, 0, t->comm, &z[nz++]), WEFT_SUCCESS, "irecv empty");
    if (t->rank == 0)
        MT_STATUS(t, weft_isend(NULL, 0, WEFT_INT32, last, 0, t->comm, &z[nz++]), WEFT_SUCCESS, "isend empty");
    MT_STATUS(t, weft_waitall((size_t)nz, z), WEFT_SUCCESS, "waitall empty");
}

/* Point-to-point traffic in flight across collectives on the same comm. */
static void with_collectives(mt_ctx_t *t)
{
    int p = t->size, r = t->rank, right = (r + 1) % p, left = (r + p - 1) % p;
    /* user tags 0 and 1 equal the low bits of collective tags: they must not match */
    int got[2] = {-1, -1}, sent[2] = {r * 10, r * 10 + 1};
    weft_request_t rq[4];
    MT_STATUS(t, weft_irecv(&got[0], 1, WEFT_INT32, left, 0, t->comm, &rq[0]), WEFT_SUCCESS, "irecv");
    MT_STATUS(t, weft_irecv(&got[1], 1, WEFT_INT32, left, 1, t->comm, &rq[1]), WEFT_SUCCESS, "irecv");
    long sum = 0, one = 1;
    MT_STATUS(t, weft_allreduce(&one, &sum, 1, WEFT_INT64, WEFT_SUM, t->comm), WEFT_SUCCESS, "allreduce");
    MT_CHECK(t, sum == p, "allreduce under p2p gave %ld", sum);
    int b = r == 0 ? 4321 : 0;
    MT_STATUS(t, weft_bcast(&b, 1, WEFT_INT32, 0, t->comm), WEFT_SUCCESS, "bcast");
    MT_CHECK(t, b == 4321, "bcast under p2p gave %d", b);
    MT_STATUS(t, weft_isend(&sent[1], 1, WEFT_INT32, right, 1, t->comm, &rq[2]), WEFT_SUCCESS, "isend");
    MT_STATUS(t, weft_isend(&sent[0], 1, WEFT_INT32, right, 0, t->comm, &rq[3]), WEFT_SUCCESS, "isend");
    MT_STATUS(t, weft_waitall(4, rq), WEFT_SUCCESS, "waitall");
    MT_CHECK(t, got[0] == left * 10 && got[1] == left * 10 + 1, "p2p across collectives gave %d %d",
             got[0], got[1]);
}

static void errors(mt_ctx_t *t)
{
    int x = 0;
    weft_request_t rq;
    MT_STATUS(t, weft_send(&x, 1, WEFT_INT32, t->size, 0, t->comm), WEFT_ERR_INVALID_ARG, "send peer=p");
    MT_STATUS(t, weft_recv(&x, 1, WEFT_INT32, -1, 0, t->comm), WEFT_ERR_INVALID_ARG, "recv peer=-1");
    MT_STATUS(t, weft_isend(&x, 1, WEFT_INT32, 0, -1, t->comm, &rq), WEFT_ERR_INVALID_ARG, "isend tag=-1");
    MT_STATUS(t, weft_irecv(&x, 1, WEFT_INT32, 0, 1 << 27, t->comm, &rq), WEFT_ERR_INVALID_ARG,
              "irecv tag=2^27");
    MT_STATUS(t, weft_send(NULL, 1, WEFT_INT32, 0, 0, t->comm), WEFT_ERR_INVALID_ARG, "send NULL");
    MT_STATUS(t, weft_send(&x, 1, (weft_datatype_t)77, 0, 0, t->comm), WEFT_ERR_DATATYPE, "send dtype");
    MT_STATUS(t, weft_send(&x, SIZE_MAX / 2, WEFT_INT32, 0, 0, t->comm), WEFT_ERR_COUNT_OVERFLOW,
              "send overflow");
    MT_STATUS(t, weft_recv(&x, 1, WEFT_INT32, 0, 0, NULL), WEFT_ERR_INVALID_COMM, "recv NULL comm");
    MT_STATUS(t, weft_isend(&x, 1, WEFT_INT32, 0, 0, t->comm, NULL), WEFT_ERR_INVALID_ARG, "isend NULL req");
    MT_STATUS(t, weft_sendrecv(&x, 1, 0, 0, &x, 1, t->size + 5, 0, WEFT_INT32, t->comm),
              WEFT_ERR_INVALID_ARG, "sendrecv bad src");
}

int main(int argc, char **argv)
{
    mt_ctx_t t;
    int rc = mt_init(&t, &argc, &argv);
    if (rc != 0) return rc;
    errors(&t);
    ring(&t);
    ordering(&t);
    with_collectives(&t);
    return mt_finish(&t);
}
