/*
 * ucx_raw_lat - UCX's own point-to-point latency on a worker of this
 * program's, against MPI_Send/MPI_Recv and against MPI_Isend/MPI_Irecv polled
 * with MPI_Test (the calls Weft's MPI transport makes), interleaved in the
 * same two processes (median over rounds, as every Weft benchmark). No Weft code runs in the
 * timed loops: this is the floor that Weft's UCX transport builds on, taken
 * beside MPI's, so that the difference between Weft over UCX and Weft over MPI
 * (weft_osu_transports) can be split into what Weft adds and what UCX itself
 * costs on a worker other than MPICH's (doc/notes/ucx_measurements.md). A fourth
 * variant, ucx-lock, is the raw UCX ping-pong with one locked read-modify-write
 * after each receive completes: the least a thread-safe progress engine does
 * there (publish the completion to another thread: Weft's counters and
 * progress lock; MPICH's mutex in MPI_Test). On x86 the locked instruction
 * waits for UCX's copy out of the shared-memory queue to finish, which the
 * plain loop overlaps with the next send.
 *
 *   mpiexec -n 2 ucx_raw_lat [-m MIN:MAX] [-i ITERS] [-x WARMUP] [-r ROUNDS] [--csv FILE]
 *
 * The UCX side: one context (UCP_FEATURE_TAG) and one worker
 * (UCS_THREAD_MODE_SERIALIZED), an endpoint to the peer from worker addresses
 * exchanged over MPI, ucp_tag_send_nbx / ucp_tag_recv_nbx (full tag mask),
 * each request polled to completion with ucp_worker_progress on the main
 * thread - the calls Weft's UCX transport makes, without its engine. Ranks
 * above 1 only join the timing barriers. Exit 2 on one rank (as weft_osu_p2p).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ucp/api/ucp.h>

#include "bench_common.h"

#define RAW_TAG 0x5eedULL

typedef struct raw {
    bench_ctx_t *b;
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_ep_h ep;
    size_t bytes;
    char *sbuf[4], *rbuf[4]; /* [0] UCX, [1] MPI_Send/MPI_Recv, [2] MPI_Test, [3] UCX + lock */
    int failed;              /* a UCX call failed (reported once) */
} raw_t;

static int ucx_fail(raw_t *r, const char *what, ucs_status_t s)
{
    if (!r->failed) bench_error(r->b, "%s (%zu bytes): %s", what, r->bytes, ucs_status_string(s));
    r->failed = 1;
    return 1;
}

/* Poll a request to completion on the main thread; 0 on success. */
static int wait_req(raw_t *r, ucs_status_ptr_t req, const char *what)
{
    if (req == NULL) return 0;
    if (UCS_PTR_IS_ERR(req)) return ucx_fail(r, what, UCS_PTR_STATUS(req));
    ucs_status_t s;
    while ((s = ucp_request_check_status(req)) == UCS_INPROGRESS) ucp_worker_progress(r->worker);
    ucp_request_free(req);
    return s == UCS_OK ? 0 : ucx_fail(r, what, s);
}

static int ucx_send(raw_t *r, int k)
{
    ucp_request_param_t p;
    p.op_attr_mask = 0;
    return wait_req(r, ucp_tag_send_nbx(r->ep, r->sbuf[k], r->bytes, RAW_TAG, &p),
                    "ucp_tag_send_nbx");
}

/* Bumped (locked add) after each receive of the ucx-lock variant. */
static _Atomic unsigned long g_published;

static int ucx_recv(raw_t *r, int k)
{
    ucp_request_param_t p;
    ucp_tag_recv_info_t info;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO;
    p.recv_info.tag_info = &info;
    int rc = wait_req(r, ucp_tag_recv_nbx(r->worker, r->rbuf[k], r->bytes, RAW_TAG, UINT64_MAX, &p),
                      "ucp_tag_recv_nbx");
    if (k == 3) atomic_fetch_add_explicit(&g_published, 1, memory_order_seq_cst);
    return rc;
}

/* MPI_Isend or MPI_Irecv, then MPI_Test until done: Weft's MPI transport's
 * calls (backends/mpi), without Weft's engine around them. */
static int mpi_test_step(raw_t *r, int send, int peer)
{
    MPI_Request req;
    int rc = send ? MPI_Isend(r->sbuf[2], (int)r->bytes, MPI_BYTE, peer, BENCH_MPI_TAG,
                              r->b->mpi_comm, &req)
                  : MPI_Irecv(r->rbuf[2], (int)r->bytes, MPI_BYTE, peer, BENCH_MPI_TAG,
                              r->b->mpi_comm, &req);
    const char *what = send ? "MPI_Isend" : "MPI_Irecv";
    for (int done = 0; rc == MPI_SUCCESS && !done;) {
        rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        what = "MPI_Test";
    }
    if (rc == MPI_SUCCESS) return 0;
    bench_error(r->b, "%s(%zu bytes) failed (MPI code %d)", what, r->bytes, rc);
    return 1;
}

typedef struct side {
    raw_t *r;
    /* the variant, and the index of its buffers: 0 raw UCX, 1 MPI_Send/MPI_Recv,
     * 2 MPI_Isend/MPI_Irecv + MPI_Test, 3 raw UCX + a locked add after each receive */
    int k;
} side_t;

/* One message of the ping-pong on side d (bench_pingpong's step). */
static int lat_step(void *ud, int send, int peer)
{
    side_t *d = ud;
    raw_t *r = d->r;
    if (d->k == 1) return bench_mpi_step(r->b, r->sbuf[1], r->rbuf[1], r->bytes, send, peer);
    if (d->k == 2) return mpi_test_step(r, send, peer);
    return send ? ucx_send(r, d->k) : ucx_recv(r, d->k);
}

static int lat_run(void *ud, long iters, int round)
{
    side_t *d = ud;
    (void)round;
    return bench_pingpong(d->r->b, iters, lat_step, d);
}

/* Context, worker, endpoint to the peer (ranks 0 and 1). Collective. */
static int raw_open(raw_t *r)
{
    const int me = r->b->rank;
    int ok = 1;
    ucp_config_t *config = NULL;
    ucp_address_t *addr = NULL;
    size_t addr_len = 0;
    ucs_status_t s = ucp_config_read(NULL, NULL, &config);
    if (s != UCS_OK) {
        ok = !ucx_fail(r, "ucp_config_read", s);
    } else {
        ucp_params_t params;
        memset(&params, 0, sizeof params);
        params.field_mask = UCP_PARAM_FIELD_FEATURES;
        params.features = UCP_FEATURE_TAG;
        s = ucp_init(&params, config, &r->ctx);
        ucp_config_release(config);
        if (s != UCS_OK) ok = !ucx_fail(r, "ucp_init", s);
    }
    if (ok) {
        ucp_worker_params_t wp;
        memset(&wp, 0, sizeof wp);
        wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
        wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
        s = ucp_worker_create(r->ctx, &wp, &r->worker);
        if (s != UCS_OK) ok = !ucx_fail(r, "ucp_worker_create", s);
    }
    if (ok && (s = ucp_worker_get_address(r->worker, &addr, &addr_len)) != UCS_OK)
        ok = !ucx_fail(r, "ucp_worker_get_address", s);

    /* Exchange address lengths, then addresses (ranks 0 and 1). */
    int all_ok = 0;
    if (MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, r->b->ctl) != MPI_SUCCESS || !all_ok) {
        if (addr) ucp_worker_release_address(r->worker, addr);
        return 1;
    }
    if (me <= 1) {
        const int peer = 1 - me;
        unsigned long mine = addr_len, theirs = 0;
        int rc = MPI_Sendrecv(&mine, 1, MPI_UNSIGNED_LONG, peer, 0, &theirs, 1, MPI_UNSIGNED_LONG,
                              peer, 0, r->b->ctl, MPI_STATUS_IGNORE);
        void *peer_addr = rc == MPI_SUCCESS ? malloc(theirs ? theirs : 1) : NULL;
        if (peer_addr == NULL) {
            ok = 0;
            bench_error(r->b, "address exchange failed (MPI code %d)", rc);
        } else if ((rc = MPI_Sendrecv(addr, (int)addr_len, MPI_BYTE, peer, 1, peer_addr,
                                      (int)theirs, MPI_BYTE, peer, 1, r->b->ctl,
                                      MPI_STATUS_IGNORE)) != MPI_SUCCESS) {
            ok = 0;
            bench_error(r->b, "address exchange failed (MPI code %d)", rc);
        } else {
            ucp_ep_params_t ep;
            memset(&ep, 0, sizeof ep);
            ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
            ep.address = peer_addr;
            if ((s = ucp_ep_create(r->worker, &ep, &r->ep)) != UCS_OK)
                ok = !ucx_fail(r, "ucp_ep_create", s);
        }
        free(peer_addr);
    }
    ucp_worker_release_address(r->worker, addr);
    if (MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, r->b->ctl) != MPI_SUCCESS) return 1;
    return all_ok ? 0 : 1;
}

/* Flush and close the endpoint (progressing until done), then - once both
 * sides closed - the worker and the context. Collective. */
static void raw_close(raw_t *r)
{
    if (r->ep != NULL) {
        ucp_request_param_t p;
        p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = 0; /* flush mode */
        (void)wait_req(r, ucp_ep_close_nbx(r->ep, &p), "ucp_ep_close_nbx");
    }
    /* Every rank: keep answering the peer's close until all closed. */
    MPI_Request barrier = MPI_REQUEST_NULL;
    int rc = MPI_Ibarrier(r->b->ctl, &barrier), done = 0;
    while (rc == MPI_SUCCESS && !done) {
        rc = MPI_Test(&barrier, &done, MPI_STATUS_IGNORE);
        if (r->worker != NULL) ucp_worker_progress(r->worker);
    }
    if (rc != MPI_SUCCESS) bench_error(r->b, "closing: MPI barrier failed (MPI code %d)", rc);
    if (r->worker != NULL) ucp_worker_destroy(r->worker);
    if (r->ctx != NULL) ucp_cleanup(r->ctx);
}

int main(int argc, char **argv)
{
    bench_ctx_t b;
    bench_opts_t o;
    int rc = bench_init(&b, &argc, &argv);
    if (rc != 0) return rc;
    bench_spec_t spec = {.prog = "ucx_raw_lat",
                         .what = "UCX's own ping-pong latency (a worker of its own, no Weft code), "
                                 "MPI_Send/MPI_Recv, MPI_Isend/MPI_Irecv polled with MPI_Test, and "
                                 "UCX again with a locked add after each receive, interleaved in the "
                                 "same processes.",
                         .extra_usage = "  (-T is not used: messages are bytes; -a is refused)\n",
                         .min_bytes = 4,
                         .max_bytes = 64u << 10,
                         .bytes_only = 1};
    rc = bench_parse(&b, argc, argv, &spec, &o);
    if (rc != BENCH_PARSE_OK) return bench_finalize(&b, rc);
    if (o.algo_given) {
        if (b.rank == 0)
            fprintf(stderr, "ucx_raw_lat: error: -a is not accepted (no collective is timed)\n"
                            "Try 'ucx_raw_lat --help'.\n");
        return bench_finalize(&b, 2);
    }
    if (b.size < 2) {
        if (b.rank == 0) fprintf(stderr, "ucx_raw_lat: needs at least 2 ranks\n");
        return bench_finalize(&b, 2);
    }

    raw_t r = {.b = &b};
    if (bench_alloc_pairs(&b, r.sbuf, r.rbuf, 4, o.max_bytes) != 0) {
        rc = 1;
        goto out_free;
    }
    for (int k = 0; k < 4; k++) bench_fill(r.sbuf[k], o.max_bytes, WEFT_UINT8, b.rank);
    if (raw_open(&r) != 0) {
        rc = 1;
        goto out_close;
    }

    bench_csv_t csv;
    if (bench_csv_open(&b, &csv, o.csv_path,
                       "size_bytes,ucx_raw_us,mpi_us,ucx_over_mpi,mpi_test_us,ucx_over_mpi_test,"
                       "ucx_lock_us,ucx_lock_over_mpi_test") != 0) {
        rc = 1;
        goto out_close;
    }
    bench_print_header(&b, &o, "UCX's own latency beside MPI's (ucx_raw_lat)", NULL);
    bench_printf(&b,
                 "# UCX workers in each process, in creation order: MPICH's (MPI_Init), Weft's "
                 "(only if bench_init's communicator runs over UCX: # Transport above), this "
                 "program's\n"
                 "# Latency (half round trip, us); mpi: MPI_Send/MPI_Recv, mpi-test: "
                 "MPI_Isend/MPI_Irecv + MPI_Test (as Weft's MPI transport), ucx-lock: "
                 "ucx-raw with a locked add after each receive\n"
                 "%-10s%14s%14s%12s%14s%14s%14s%14s\n",
                 "# Size", "ucx-raw", "mpi", "ucx/mpi", "mpi-test",
                 "ucx/mpi-test", "ucx-lock", "lock/mpi-test");
    side_t sides[4] = {{&r, 0}, {&r, 1}, {&r, 2}, {&r, 3}};
    BENCH_FOR_SIZES(&o, bytes)
    {
        r.bytes = bytes;
        bench_variant_t v[4] = {{"ucx-raw", lat_run, &sides[0], NULL},
                                {"mpi", lat_run, &sides[1], NULL},
                                {"mpi-test", lat_run, &sides[2], NULL},
                                {"ucx-lock", lat_run, &sides[3], NULL}};
        bench_result_t res[4];
        bench_timing_t tm = bench_timing_for(&o, bytes);
        if (bench_run_interleaved(&b, &tm, v, 4, res) != 0) {
            bench_error(&b, "latency, %zu bytes failed", bytes);
            rc = 1;
            break;
        }
        const double u = res[0].median_us / 2, m = res[1].median_us / 2, t = res[2].median_us / 2;
        const double l = res[3].median_us / 2;
        const double um = m > 0 ? u / m : NAN, ut = t > 0 ? u / t : NAN, lt = t > 0 ? l / t : NAN;
        bench_printf(&b, "%-10zu%14.3f%14.3f%12.3f%14.3f%14.3f%14.3f%14.3f\n", bytes, u, m, um, t,
                     ut, l, lt);
        bench_csv_row(&csv, "%zu,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f", bytes, u, m, um, t, ut, l, lt);
        bench_progress(&b, "ucx_raw_lat: %zu bytes done", bytes);
    }
    if (bench_csv_close(&csv) != 0) rc = 1;
out_close:
    raw_close(&r);
out_free:
    for (int k = 0; k < 4; k++) {
        free(r.sbuf[k]);
        free(r.rbuf[k]);
    }
    return bench_finalize(&b, rc);
}
