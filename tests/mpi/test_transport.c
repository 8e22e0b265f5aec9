/*
 * test_transport.c - point-to-point through Weft's public API
 * (weft_send / weft_recv / weft_sendrecv / weft_isend / weft_irecv), run
 * under each transport (WEFT_TRANSPORT=mpi and =ucx, see meson.build).
 *
 * Every payload byte is a function of (source rank, tag, index, salt)
 * computed again by the receiver, so a message delivered to the wrong
 * receive, truncated, reordered or corrupted is found.
 *
 *   1. ring sendrecv, sizes 0 B .. 4 MiB (float64 and uint8 counts);
 *   2. blocking send/recv between pairs, zero-byte messages with NULL buffers;
 *   3. many messages in flight: 96 receives posted (reverse tag order) before
 *      the matching sends, sizes 0 .. ~96 KiB, one waitall;
 *   4. same (peer, tag) messages match in posting order;
 *   5. large messages sent before the receive is posted (unexpected),
 *      progressed by the engine while the caller sits in MPI_Barrier;
 *   6. two communicators, same peers and tags: no cross-matching;
 *   7. two threads, each with its own communicator, exchanging concurrently;
 *      then (three rounds) two threads creating communicators concurrently (on two MPI
 *      duplicates) and exchanging on them;
 *   8. errors: invalid peer, and a message larger than the receive buffer,
 *      on a throw-away communicator.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

/* One payload per (sender, tag, salt): mpitest's byte payload. */
static uint32_t salt_of(int tag, unsigned salt) { return (uint32_t)tag * 65599u ^ salt * 97u; }

static void fill(uint8_t *buf, size_t n, int src, int tag, unsigned salt)
{
    mt_fill_bytes(buf, n, src, salt_of(tag, salt));
}

/* Number of bytes of buf that differ from the expected payload. */
static size_t count_bad(const uint8_t *buf, size_t n, int src, int tag, unsigned salt)
{
    return mt_bad_bytes(buf, n, src, salt_of(tag, salt));
}

static void check_payload(mt_ctx_t *t, const uint8_t *buf, size_t n, int src, int tag,
                          unsigned salt, const char *what)
{
    size_t bad = count_bad(buf, n, src, tag, salt);
    MT_CHECK(t, bad == 0, "%s: %zu of %zu bytes wrong (src %d tag %d)", what, bad, n, src, tag);
}

/* 1. ring sendrecv over every size */
static void test_ring_sizes(mt_ctx_t *t)
{
    const size_t sizes[] = {0, 1, 3, 8, 63, 64, 1000, 4096, 8193, 65536, 100000,
                            1u << 20, (1u << 20) + 8, 4u << 20};
    int right = (t->rank + 1) % t->size, left = (t->rank + t->size - 1) % t->size;
    uint8_t *sb = malloc(4u << 20), *rb = malloc((4u << 20) + 64);
    if (!sb || !rb) {
        mt_error(t, "out of memory");
        goto out;
    }
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k];
        int tag = (int)k + 10;
        fill(sb, n, t->rank, tag, 1);
        memset(rb, 0xA5, n + 64);
        weft_status_t st;
        if (n % 8 == 0 && n > 0) /* count in float64 elements */
            st = weft_sendrecv(sb, n / 8, right, tag, rb, n / 8, left, tag, WEFT_FLOAT64,
                               t->comm);
        else
            st = weft_sendrecv(sb, n, right, tag, rb, n, left, tag, WEFT_UINT8, t->comm);
        if (!MT_STATUS(t, st, WEFT_SUCCESS, "weft_sendrecv ring")) continue;
        check_payload(t, rb, n, left, tag, 1, "ring sendrecv");
        size_t spill = 0;
        for (size_t i = n; i < n + 64; i++) spill += rb[i] != 0xA5;
        MT_CHECK(t, spill == 0, "ring sendrecv of %zu bytes wrote past the message", n);
    }
out:
    free(sb);
    free(rb);
}

/* 2. blocking send/recv between pairs (2k, 2k+1), including NULL zero-byte */
static void test_pairs(mt_ctx_t *t)
{
    int partner = t->rank ^ 1;
    if (partner >= t->size) return;
    const size_t n = 12345;
    uint8_t *sb = malloc(n), *rb = malloc(n);
    if (!sb || !rb) {
        mt_error(t, "out of memory");
        goto out;
    }
    fill(sb, n, t->rank, 7, 2);
    memset(rb, 0, n);
    weft_status_t st;
    if (t->rank % 2 == 0) {
        st = weft_send(sb, n, WEFT_UINT8, partner, 7, t->comm);
        MT_STATUS(t, st, WEFT_SUCCESS, "weft_send");
        st = weft_recv(rb, n, WEFT_UINT8, partner, 7, t->comm);
        MT_STATUS(t, st, WEFT_SUCCESS, "weft_recv");
        st = weft_send(NULL, 0, WEFT_UINT8, partner, 8, t->comm);
        MT_STATUS(t, st, WEFT_SUCCESS, "weft_send 0 B");
        st = weft_recv(NULL, 0, WEFT_FLOAT32, partner, 9, t->comm);
        MT_STATUS(t, st, WEFT_SUCCESS, "weft_recv 0 B");
    } else {
        st = weft_recv(rb, n, WEFT_UINT8, partner, 7, t->comm);
        MT_STATUS(t, st, WEFT_SUCCESS, "weft_recv");
        st = weft_send(sb, n, WEFT_UINT8, partner, 7, t->comm);
        MT_STATUS(t, st, WEFT_SUCCESS, "weft_send");
        st = weft_recv(NULL, 0, WEFT_UINT8, partner, 8, t->comm);
        MT_STATUS(t, st, WEFT_SUCCESS, "weft_recv 0 B");
        st = weft_send(NULL, 0, WEFT_FLOAT32, partner, 9, t->comm);
        MT_STATUS(t, st, WEFT_SUCCESS, "weft_send 0 B");
    }
    check_payload(t, rb, n, partner, 7, 2, "pair send/recv");
out:
    free(sb);
    free(rb);
}

/* 3. many messages in flight, receives posted first in reverse tag order */
#define NMANY 96
static size_t many_size(int k) { return k % 7 == 0 ? 0 : (size_t)((k * 7919) % 98304); }

static void test_many(mt_ctx_t *t)
{
    int right = (t->rank + 1) % t->size, left = (t->rank + t->size - 1) % t->size;
    uint8_t *sb[NMANY] = {0}, *rb[NMANY] = {0};
    weft_request_t reqs[2 * NMANY];
    int nreq = 0;
    for (int k = 0; k < NMANY; k++) {
        size_t n = many_size(k);
        sb[k] = malloc(n + 1);
        rb[k] = malloc(n + 1);
        if (!sb[k] || !rb[k]) {
            mt_error(t, "out of memory");
            goto out;
        }
        fill(sb[k], n, t->rank, 1000 + k, 3);
        memset(rb[k], 0, n + 1);
    }
    for (int k = NMANY - 1; k >= 0; k--) {
        weft_status_t st = weft_irecv(rb[k], many_size(k), WEFT_UINT8, left, 1000 + k, t->comm,
                                      &reqs[nreq]);
        if (MT_STATUS(t, st, WEFT_SUCCESS, "weft_irecv many")) nreq++;
    }
    for (int k = 0; k < NMANY; k++) {
        weft_status_t st = weft_isend(sb[k], many_size(k), WEFT_UINT8, right, 1000 + k, t->comm,
                                      &reqs[nreq]);
        if (MT_STATUS(t, st, WEFT_SUCCESS, "weft_isend many")) nreq++;
    }
    MT_CHECK(t, nreq == 2 * NMANY, "only %d of %d requests issued", nreq, 2 * NMANY);
    weft_status_t st = weft_waitall((size_t)nreq, reqs);
    MT_STATUS(t, st, WEFT_SUCCESS, "weft_waitall many");
    for (int i = 0; i < nreq; i++)
        MT_CHECK(t, reqs[i] == WEFT_REQUEST_NULL, "request %d not released by waitall", i);
    for (int k = 0; k < NMANY; k++) check_payload(t, rb[k], many_size(k), left, 1000 + k, 3, "many");
out:
    for (int k = 0; k < NMANY; k++) {
        free(sb[k]);
        free(rb[k]);
    }
}

/* 4. same (peer, tag): match in posting order */
#define NORDER 16
static void test_order(mt_ctx_t *t)
{
    int right = (t->rank + 1) % t->size, left = (t->rank + t->size - 1) % t->size;
    enum { N = 3000 };
    static uint8_t sb[NORDER][N], rb[NORDER][N];
    weft_request_t reqs[2 * NORDER];
    int nreq = 0;
    for (int k = 0; k < NORDER; k++) {
        fill(sb[k], N, t->rank, 55, 100u + (unsigned)k); /* salt = sequence number */
        memset(rb[k], 0, N);
    }
    for (int k = 0; k < NORDER; k++)
        if (MT_STATUS(t, weft_irecv(rb[k], N, WEFT_UINT8, left, 55, t->comm, &reqs[nreq]),
                      WEFT_SUCCESS, "weft_irecv order"))
            nreq++;
    for (int k = 0; k < NORDER; k++)
        if (MT_STATUS(t, weft_isend(sb[k], N, WEFT_UINT8, right, 55, t->comm, &reqs[nreq]),
                      WEFT_SUCCESS, "weft_isend order"))
            nreq++;
    MT_STATUS(t, weft_waitall((size_t)nreq, reqs), WEFT_SUCCESS, "weft_waitall order");
    for (int k = 0; k < NORDER; k++) {
        size_t bad = count_bad(rb[k], N, left, 55, 100u + (unsigned)k);
        MT_CHECK(t, bad == 0, "same-tag message %d arrived out of order or corrupted", k);
    }
}

/* 5. unexpected large messages, progressed while the caller is in MPI */
static void test_unexpected(mt_ctx_t *t)
{
    int right = (t->rank + 1) % t->size, left = (t->rank + t->size - 1) % t->size;
    const size_t n = (2u << 20) + 3;
    uint8_t *sb = malloc(n), *rb = malloc(n);
    weft_request_t sreq = WEFT_REQUEST_NULL;
    if (!sb || !rb) {
        mt_error(t, "out of memory");
        goto out;
    }
    fill(sb, n, t->rank, 77, 5);
    memset(rb, 0, n);
    MT_STATUS(t, weft_isend(sb, n, WEFT_UINT8, right, 77, t->comm, &sreq), WEFT_SUCCESS,
              "weft_isend unexpected");
    MPI_Barrier(MPI_COMM_WORLD); /* every send issued before any receive */
    MT_STATUS(t, weft_recv(rb, n, WEFT_UINT8, left, 77, t->comm), WEFT_SUCCESS,
              "weft_recv unexpected");
    MT_STATUS(t, weft_wait(&sreq), WEFT_SUCCESS, "weft_wait unexpected send");
    check_payload(t, rb, n, left, 77, 5, "unexpected");
out:
    free(sb);
    free(rb);
}

/* 6. two communicators over the same ranks, same tags */
static void test_two_comms(mt_ctx_t *t)
{
    weft_comm_t c2 = NULL;
    int right = (t->rank + 1) % t->size, left = (t->rank + t->size - 1) % t->size;
    enum { N = 5000 };
    static uint8_t sa[N], sb2[N], ra[N], rb2[N];
    weft_request_t reqs[4];
    if (!MT_STATUS(t, weft_comm_create(MPI_COMM_WORLD, NULL, &c2), WEFT_SUCCESS,
                   "weft_comm_create second"))
        return;
    fill(sa, N, t->rank, 9, 11);
    fill(sb2, N, t->rank, 9, 22);
    memset(ra, 0, N);
    memset(rb2, 0, N);
    /* Receive on c2 first, send on the world comm first: a transport that
     * ignored the communicator would cross the two messages. */
    int ok = MT_STATUS(t, weft_irecv(rb2, N, WEFT_UINT8, left, 9, c2, &reqs[0]), WEFT_SUCCESS,
                       "irecv c2");
    ok &= MT_STATUS(t, weft_irecv(ra, N, WEFT_UINT8, left, 9, t->comm, &reqs[1]), WEFT_SUCCESS,
                    "irecv c1");
    ok &= MT_STATUS(t, weft_isend(sa, N, WEFT_UINT8, right, 9, t->comm, &reqs[2]), WEFT_SUCCESS,
                    "isend c1");
    ok &= MT_STATUS(t, weft_isend(sb2, N, WEFT_UINT8, right, 9, c2, &reqs[3]), WEFT_SUCCESS,
                    "isend c2");
    if (ok) {
        MT_STATUS(t, weft_waitall(4, reqs), WEFT_SUCCESS, "waitall two comms");
        check_payload(t, ra, N, left, 9, 11, "comm 1 message");
        check_payload(t, rb2, N, left, 9, 22, "comm 2 message");
    }
    MT_STATUS(t, weft_comm_destroy(c2), WEFT_SUCCESS, "weft_comm_destroy second");
}

/* 7. two threads, one communicator each */
typedef struct thr_arg {
    mt_ctx_t *t;
    weft_comm_t comm;
    MPI_Comm create_from; /* != MPI_COMM_NULL: the thread creates/destroys comm */
    int id;
    long errors;
} thr_arg_t;

static void *thr_main(void *p)
{
    thr_arg_t *a = p;
    int rank = a->t->rank, size = a->t->size;
    if (a->create_from != MPI_COMM_NULL) {
        weft_status_t cst = weft_comm_create(a->create_from, NULL, &a->comm);
        if (cst != WEFT_SUCCESS) {
            fprintf(stderr, "[%d] thread %d: weft_comm_create: %s\n", rank, a->id,
                    weft_strerror(cst));
            a->errors++;
            return NULL;
        }
    }
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    enum { N = 20000, ITERS = 40 };
    uint8_t *sb = malloc(N), *rb = malloc(N);
    if (!sb || !rb) {
        a->errors++;
        goto out;
    }
    for (int it = 0; it < ITERS; it++) {
        size_t n = (size_t)((it * 4099 + a->id * 333) % N);
        int tag = it;
        fill(sb, n, rank, tag, 200u + (unsigned)a->id);
        memset(rb, 0, n);
        weft_status_t st = weft_sendrecv(sb, n, right, tag, rb, n, left, tag, WEFT_UINT8,
                                         a->comm);
        if (st != WEFT_SUCCESS) {
            fprintf(stderr, "[%d] thread %d: weft_sendrecv: %s\n", rank, a->id,
                    weft_strerror(st));
            a->errors++;
            break;
        }
        if (count_bad(rb, n, left, tag, 200u + (unsigned)a->id) != 0) {
            fprintf(stderr, "[%d] thread %d iter %d: wrong payload\n", rank, a->id, it);
            a->errors++;
        }
    }
out:
    free(sb);
    free(rb);
    if (a->create_from != MPI_COMM_NULL && a->comm != NULL) {
        weft_status_t dst = weft_comm_destroy(a->comm);
        if (dst != WEFT_SUCCESS) {
            fprintf(stderr, "[%d] thread %d: weft_comm_destroy: %s\n", rank, a->id,
                    weft_strerror(dst));
            a->errors++;
        }
        a->comm = NULL;
    }
    return NULL;
}

static void test_threads(mt_ctx_t *t)
{
    enum { NT = 2 };
    thr_arg_t args[NT];
    pthread_t th[NT];
    int started[NT] = {0};
    int created = 1;
    for (int i = 0; i < NT; i++) {
        args[i] = (thr_arg_t){.t = t, .comm = NULL, .create_from = MPI_COMM_NULL, .id = i,
                              .errors = 0};
        if (!MT_STATUS(t, weft_comm_create(MPI_COMM_WORLD, NULL, &args[i].comm), WEFT_SUCCESS,
                       "weft_comm_create (thread)"))
            created = 0;
    }
    if (created) {
        for (int i = 0; i < NT; i++) {
            started[i] = pthread_create(&th[i], NULL, thr_main, &args[i]) == 0;
            MT_CHECK(t, started[i], "pthread_create %d", i);
        }
        for (int i = 0; i < NT; i++)
            if (started[i]) pthread_join(th[i], NULL);
        for (int i = 0; i < NT; i++)
            MT_CHECK(t, args[i].errors == 0, "thread %d: %ld errors", i, args[i].errors);
    }
    for (int i = 0; i < NT; i++)
        if (args[i].comm != NULL)
            MT_STATUS(t, weft_comm_destroy(args[i].comm), WEFT_SUCCESS,
                      "weft_comm_destroy (thread)");

    /* Creation and destruction on the threads, concurrently, three times: one
     * thread's destroy then overlaps the other's traffic and the next
     * creation (the endpoints the two communicators share must survive it). */
    for (int round = 0; round < 3; round++) {
        MPI_Comm dups[NT];
        int ndup = 0;
        for (int i = 0; i < NT; i++) {
            if (MPI_Comm_dup(MPI_COMM_WORLD, &dups[i]) != MPI_SUCCESS) {
                mt_error(t, "MPI_Comm_dup failed");
                break;
            }
            ndup++;
        }
        if (ndup == NT) {
            for (int i = 0; i < NT; i++) {
                args[i] = (thr_arg_t){.t = t, .comm = NULL, .create_from = dups[i],
                                      .id = 10 + 2 * round + i, .errors = 0};
                started[i] = pthread_create(&th[i], NULL, thr_main, &args[i]) == 0;
                MT_CHECK(t, started[i], "pthread_create (create) %d", i);
            }
            for (int i = 0; i < NT; i++)
                if (started[i]) pthread_join(th[i], NULL);
            for (int i = 0; i < NT; i++)
                MT_CHECK(t, args[i].errors == 0, "round %d thread %d (own comm): %ld errors",
                         round, i, args[i].errors);
        }
        for (int i = 0; i < ndup; i++) MPI_Comm_free(&dups[i]);
        if (ndup != NT) break;
    }
}

/* 8. errors on a throw-away communicator */
static void test_errors(mt_ctx_t *t)
{
    weft_comm_t c3 = NULL;
    uint8_t small[16], big[64];
    if (!MT_STATUS(t, weft_comm_create(MPI_COMM_WORLD, NULL, &c3), WEFT_SUCCESS,
                   "weft_comm_create (errors)"))
        return;
    weft_status_t st = weft_send(big, 1, WEFT_UINT8, t->size, 1, c3);
    MT_CHECK(t, st < 0, "send to rank %d (out of range) returned %s", t->size,
             weft_status_name(st));
    st = weft_recv(small, 1, WEFT_UINT8, -5, 1, c3);
    MT_CHECK(t, st < 0, "recv from rank -5 returned %s", weft_status_name(st));

    /* MPICH raises errors found while completing a request (MPI_Test of the
     * truncated receive, under WEFT_TRANSPORT=mpi) on MPI_COMM_WORLD's error
     * handler: an application that wants such errors returned, as this test
     * does, says so. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (t->size >= 2 && t->rank < 2) {
        /* rank 0 sends 64 bytes, rank 1 receives into 16: must fail, not overrun */
        memset(big, 0x11, sizeof(big));
        memset(small, 0, sizeof(small));
        if (t->rank == 0) {
            st = weft_send(big, sizeof(big), WEFT_UINT8, 1, 3, c3);
            MT_CHECK(t, st == WEFT_SUCCESS || st < 0, "truncated send: %s",
                     weft_status_name(st));
        } else {
            st = weft_recv(small, sizeof(small), WEFT_UINT8, 0, 3, c3);
            MT_CHECK(t, st < 0, "receive of 64 bytes into 16 returned %s", weft_status_name(st));
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    (void)weft_comm_destroy(c3); /* may report the comm's sticky error */
}

int main(int argc, char **argv)
{
    mt_ctx_t t;
    int rc = mt_init(&t, &argc, &argv);
    if (rc != 0) return rc;
    mt_info(&t, "test_transport on %d ranks", t.size);

    test_ring_sizes(&t);
    test_pairs(&t);
    test_many(&t);
    test_order(&t);
    test_unexpected(&t);
    test_two_comms(&t);
    test_threads(&t);
    test_errors(&t);
    /* the world comm still works after the failures on c3 */
    test_ring_sizes(&t);
    return mt_finish(&t);
}
