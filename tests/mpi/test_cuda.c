/*
 * test_cuda.c - the stream-ordering rules of test_stream.c on CUDA streams,
 * with device buffers through both paths (NCCL for large vectors, host
 * transfer for small ones, and each forced), bcast, allgather (and in place),
 * reduce_scatter and alltoall on device buffers, host buffers on a
 * CUDA-stream communicator, the nonblocking forms, and the device layer's
 * reduction kernels against a host reference. Exits 77 (skipped) when there is no GPU:
 * cudaGetDeviceCount fails or returns 0, or libweft has no CUDA device layer.
 *
 * "Compute" on the stream is cudaMemcpyAsync/cudaMemsetAsync plus host tasks
 * (weft_stream_enqueue), so this file needs no kernels of its own.
 * References: MPI's collective on host copies of the same inputs.
 *
 * Several ranks on one GPU: NCCL before 2.30 refuses them ("Duplicate GPU");
 * the communicator then falls back to host transfer on every rank, which this
 * test also accepts (the result must be right either way).
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "weft_cuda.h"

#define CK(call)                                                                       \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            mt_error(t, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            goto out;                                                                  \
        }                                                                              \
    } while (0)

static float value(int rank, int iter, size_t i)
{
    return (float)((rank + 1) * 8 + iter + (int)(i % 31)) * 0.25f;
}

/* Device buffers: H2D copy (compute before) -> allreduce -> D2H copy (after). */
static void run_device(mt_ctx_t *t, weft_comm_t c, cudaStream_t cs, size_t n, int nonblocking,
                       weft_op_t op, const char *what)
{
    float *h_in = NULL, *h_out = NULL, *ref = NULL, *d_in = NULL, *d_out = NULL;
    CK(cudaMallocHost((void **)&h_in, n * sizeof(float)));
    CK(cudaMallocHost((void **)&h_out, n * sizeof(float)));
    ref = malloc(n * sizeof(float));
    CK(cudaMalloc((void **)&d_in, n * sizeof(float)));
    CK(cudaMalloc((void **)&d_out, n * sizeof(float)));
    for (size_t i = 0; i < n; i++) h_in[i] = value(t->rank, nonblocking, i);
    MPI_Allreduce(h_in, ref, (int)n, MPI_FLOAT, op == WEFT_MAX ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD);
    if (op == WEFT_AVG)
        for (size_t i = 0; i < n; i++) ref[i] /= (float)t->size;
    CK(cudaMemsetAsync(d_out, 0, n * sizeof(float), cs));
    CK(cudaMemcpyAsync(d_in, h_in, n * sizeof(float), cudaMemcpyHostToDevice, cs));
    if (nonblocking) {
        weft_request_t req;
        MT_STATUS(t, weft_iallreduce(d_in, d_out, n, WEFT_FLOAT32, op, c, &req), WEFT_SUCCESS, what);
        MT_STATUS(t, weft_wait(&req), WEFT_SUCCESS, "weft_wait (stream waits)");
    } else {
        MT_STATUS(t, weft_allreduce(d_in, d_out, n, WEFT_FLOAT32, op, c), WEFT_SUCCESS, what);
    }
    CK(cudaMemcpyAsync(h_out, d_out, n * sizeof(float), cudaMemcpyDeviceToHost, cs));
    CK(cudaStreamSynchronize(cs));
    mt_compare(t, h_out, ref, n, WEFT_FLOAT32, 1e-5, what);
out:
    cudaFree(d_in);
    cudaFree(d_out);
    cudaFreeHost(h_in);
    cudaFreeHost(h_out);
    free(ref);
}

/* The other collectives on device buffers (host transfer through pinned
 * staging): each blocking and nonblocking, against MPI's collective on host
 * copies of the same inputs. Blocks the output must overwrite start as -1. */
enum {
    K_BCAST,
    K_ALLGATHER,
    K_ALLGATHER_IN_PLACE,
    K_REDUCE_SCATTER,
    K_REDUCE_SCATTER_IN_PLACE,
    K_ALLTOALL,
    K_COUNT
};
static const char *const kind_name[K_COUNT] = {"bcast",          "allgather",
                                               "allgather in place", "reduce_scatter",
                                               "reduce_scatter in place", "alltoall"};

static weft_status_t issue_coll(int kind, float *d_in, float *d_out, size_t n, int root,
                                weft_comm_t c, weft_request_t *req)
{
    switch (kind) {
    case K_BCAST:
        return req ? weft_ibcast(d_out, n, WEFT_FLOAT32, root, c, req)
                   : weft_bcast(d_out, n, WEFT_FLOAT32, root, c);
    case K_ALLGATHER:
    case K_ALLGATHER_IN_PLACE: {
        const void *in = kind == K_ALLGATHER ? (const void *)d_in : WEFT_IN_PLACE;
        return req ? weft_iallgather(in, d_out, n, WEFT_FLOAT32, c, req)
                   : weft_allgather(in, d_out, n, WEFT_FLOAT32, c);
    }
    case K_REDUCE_SCATTER:
    case K_REDUCE_SCATTER_IN_PLACE: {
        const void *in = kind == K_REDUCE_SCATTER ? (const void *)d_in : WEFT_IN_PLACE;
        return req ? weft_ireduce_scatter(in, d_out, n, WEFT_FLOAT32, WEFT_SUM, c, req)
                   : weft_reduce_scatter(in, d_out, n, WEFT_FLOAT32, WEFT_SUM, c);
    }
    default:
        return req ? weft_ialltoall(d_in, d_out, n, WEFT_FLOAT32, c, req)
                   : weft_alltoall(d_in, d_out, n, WEFT_FLOAT32, c);
    }
}

static void run_device_coll(mt_ctx_t *t, weft_comm_t c, cudaStream_t cs, size_t n, int kind,
                            int nonblocking)
{
    const size_t p = (size_t)t->size;
    const int root = t->size - 1;
    const size_t nin = kind == K_BCAST || kind == K_ALLGATHER ? n : n * p;
    /* in place, reduce_scatter reads the whole vector from the output buffer
     * and leaves its block at the start: nout counts what is compared */
    const size_t nout = kind == K_BCAST || kind == K_REDUCE_SCATTER ? n : n * p;
    char what[96];
    snprintf(what, sizeof what, "device %s%s, %zu elements", kind_name[kind],
             nonblocking ? " (nonblocking)" : "", n);
    float *h_in = malloc(nin * sizeof(float)), *h_out = malloc(nout * sizeof(float));
    float *ref = malloc(nout * sizeof(float)), *d_in = NULL, *d_out = NULL;
    if (h_in == NULL || h_out == NULL || ref == NULL) {
        mt_error(t, "%s: out of memory", what);
        goto out;
    }
    for (size_t i = 0; i < nin; i++) h_in[i] = value(t->rank, kind, i);
    for (size_t i = 0; i < nout; i++) h_out[i] = -1.0f; /* the output's start */
    switch (kind) {
    case K_BCAST:
        if (t->rank == root) memcpy(h_out, h_in, n * sizeof(float));
        memcpy(ref, h_in, n * sizeof(float));
        MPI_Bcast(ref, (int)n, MPI_FLOAT, root, MPI_COMM_WORLD);
        break;
    case K_ALLGATHER:
        MPI_Allgather(h_in, (int)n, MPI_FLOAT, ref, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case K_ALLGATHER_IN_PLACE: /* own block in place, the others to be overwritten */
        memcpy(h_out + (size_t)t->rank * n, h_in + (size_t)t->rank * n, n * sizeof(float));
        MPI_Allgather(h_in + (size_t)t->rank * n, (int)n, MPI_FLOAT, ref, (int)n, MPI_FLOAT,
                      MPI_COMM_WORLD);
        break;
    case K_REDUCE_SCATTER:
        MPI_Reduce_scatter_block(h_in, ref, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case K_REDUCE_SCATTER_IN_PLACE: /* the input in the output buffer; the rest is scratch */
        memcpy(h_out, h_in, n * p * sizeof(float));
        MPI_Reduce_scatter_block(h_in, ref, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    default:
        MPI_Alltoall(h_in, (int)n, MPI_FLOAT, ref, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
    }
    CK(cudaMalloc((void **)&d_in, nin * sizeof(float)));
    CK(cudaMalloc((void **)&d_out, nout * sizeof(float)));
    /* the inputs arrive on the stream, as a kernel's output would */
    CK(cudaMemcpyAsync(d_in, h_in, nin * sizeof(float), cudaMemcpyHostToDevice, cs));
    CK(cudaMemcpyAsync(d_out, h_out, nout * sizeof(float), cudaMemcpyHostToDevice, cs));
    if (nonblocking) {
        weft_request_t req;
        MT_STATUS(t, issue_coll(kind, d_in, d_out, n, root, c, &req), WEFT_SUCCESS, what);
        MT_STATUS(t, weft_wait(&req), WEFT_SUCCESS, "weft_wait (stream waits)");
    } else {
        MT_STATUS(t, issue_coll(kind, d_in, d_out, n, root, c, NULL), WEFT_SUCCESS, what);
    }
    CK(cudaMemcpyAsync(h_out, d_out, nout * sizeof(float), cudaMemcpyDeviceToHost, cs));
    CK(cudaStreamSynchronize(cs));
    /* reduce_scatter in place: only the block at the start is the result */
    mt_compare(t, h_out, ref, kind == K_REDUCE_SCATTER_IN_PLACE ? n : nout, WEFT_FLOAT32, 1e-6,
               what);
out:
    cudaFree(d_in);
    cudaFree(d_out);
    free(h_in);
    free(h_out);
    free(ref);
}

/* Host buffers on a CUDA-stream comm: a host task fills, a host task checks. */
typedef struct hbuf {
    float *buf;
    size_t n;
    int rank, size;
    long bad;
} hbuf_t;

static weft_status_t fill(void *arg)
{
    hbuf_t *h = arg;
    for (size_t i = 0; i < h->n; i++) h->buf[i] = value(h->rank, 7, i);
    return WEFT_SUCCESS;
}

static weft_status_t check(void *arg)
{
    hbuf_t *h = arg;
    for (size_t i = 0; i < h->n; i++) {
        float r = 0;
        for (int k = 0; k < h->size; k++) r += value(k, 7, i);
        if (h->buf[i] != r) h->bad++;
    }
    return WEFT_SUCCESS;
}

static void run_host_buffers(mt_ctx_t *t, weft_comm_t c, weft_stream_t s, size_t n)
{
    hbuf_t h = {malloc(n * sizeof(float)), n, t->rank, t->size, 0};
    MT_STATUS(t, weft_stream_enqueue(s, fill, &h), WEFT_SUCCESS, "enqueue fill");
    MT_STATUS(t, weft_allreduce(WEFT_IN_PLACE, h.buf, n, WEFT_FLOAT32, WEFT_SUM, c), WEFT_SUCCESS,
              "host buffers on a CUDA stream");
    MT_STATUS(t, weft_stream_enqueue(s, check, &h), WEFT_SUCCESS, "enqueue check");
    MT_STATUS(t, weft_stream_synchronize(s), WEFT_SUCCESS, "synchronize");
    MT_CHECK(t, h.bad == 0, "host buffers on a CUDA stream: %ld wrong", h.bad);
    free(h.buf);
}

int main(int argc, char **argv)
{
    mt_ctx_t tt, *t = &tt;
    int rc = mt_init(t, &argc, &argv);
    if (rc != 0) return rc;
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    int have = (e == cudaSuccess && ndev > 0 && weft_cuda_available()) ? 1 : 0, all = 0;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        char why[128];
        snprintf(why, sizeof why, "no GPU here (%s, %d devices, CUDA layer %s)",
                 e == cudaSuccess ? "ok" : cudaGetErrorString(e), ndev,
                 weft_cuda_available() ? "loaded" : "absent");
        return mt_skip(t, why);
    }
    cudaSetDevice(t->rank % ndev);

    weft_stream_t s = NULL;
    weft_comm_t c = NULL;
    cudaStream_t cs;
    if (cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking) != cudaSuccess) {
        mt_error(t, "cudaStreamCreate failed");
        return mt_finish(t);
    }
    MT_STATUS(t, weft_stream_wrap_cuda(cs, &s), WEFT_SUCCESS, "wrap");
    MT_STATUS(t, weft_comm_create(MPI_COMM_WORLD, s, &c), WEFT_SUCCESS, "comm on a CUDA stream");
    if (c != NULL) {
        size_t sizes[] = {1, 1000, 100000, 1 << 20};
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            /* automatic: host transfer below WEFT_NCCL_MIN_BYTES, NCCL above */
            run_device(t, c, cs, sizes[k], 0, WEFT_SUM, "device auto blocking");
            run_device(t, c, cs, sizes[k], 1, WEFT_SUM, "device auto nonblocking");
            run_device(t, c, cs, sizes[k], 0, WEFT_AVG, "device auto avg");
            run_device(t, c, cs, sizes[k], 0, WEFT_MAX, "device auto max");
            /* forced host transfer, then forced NCCL (may fall back, see above) */
            weft_comm_set_algo(c, WEFT_COLL_ALLREDUCE, WEFT_ALGO_RECURSIVE_DOUBLING);
            run_device(t, c, cs, sizes[k], 0, WEFT_SUM, "device host-transfer rd");
            weft_comm_set_algo(c, WEFT_COLL_ALLREDUCE, WEFT_ALGO_AUTO);
        }
        const size_t csizes[] = {1, 777, 70000};
        for (size_t k = 0; k < sizeof csizes / sizeof csizes[0]; k++)
            for (int kind = 0; kind < K_COUNT; kind++)
                for (int nb = 0; nb < 2; nb++) run_device_coll(t, c, cs, csizes[k], kind, nb);
        weft_algo_t a = WEFT_ALGO_AUTO;
        MT_STATUS(t, weft_query_algo(c, WEFT_COLL_ALLREDUCE, 1 << 20, WEFT_FLOAT32, &a), WEFT_SUCCESS,
                  "query");
        run_host_buffers(t, c, s, 5000);
        MT_STATUS(t, weft_comm_destroy(c), WEFT_SUCCESS, "comm destroy");
    }

    /* A Weft-owned CUDA stream, destroyed by Weft. */
    weft_stream_t s2 = NULL;
    MT_STATUS(t, weft_stream_create_cuda(&s2), WEFT_SUCCESS, "create cuda stream");
    if (s2) {
        cudaStream_t got;
        MT_STATUS(t, weft_stream_get_cuda(s2, &got), WEFT_SUCCESS, "get cuda");
        weft_comm_t c2;
        if (MT_STATUS(t, weft_comm_create(MPI_COMM_WORLD, s2, &c2), WEFT_SUCCESS, "comm 2")) {
            run_device(t, c2, got, 4096, 1, WEFT_SUM, "weft-owned cuda stream");
            MT_STATUS(t, weft_comm_destroy(c2), WEFT_SUCCESS, "comm 2 destroy");
        }
        MT_STATUS(t, weft_stream_destroy(s2), WEFT_SUCCESS, "destroy cuda stream");
    }
    MT_STATUS(t, weft_stream_destroy(s), WEFT_SUCCESS, "destroy wrapper");
    cudaStreamDestroy(cs);
    return mt_finish(t);
}
