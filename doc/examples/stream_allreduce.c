/*
 * stream_allreduce.c - the stream pipeline model on a CPU: a host stream runs
 * "compute" tasks, and an allreduce on a communicator bound to that stream
 * sits between them in stream order. The host thread only enqueues work and
 * synchronises once at the end, exactly as a GPU program does with kernels
 * and a CUDA stream.
 *
 *   mpiexec -n 2 ./stream_allreduce
 *
 * Exit status 0 when every rank's result is right, 1 otherwise.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "weft.h"
#include "weft_mpi.h"
#include "weft_stream.h"

#define N 4096

typedef struct work {
    float *grad;   /* this rank's "gradient" */
    int rank, size;
    int step;
    long wrong;    /* set by the check task */
} work_t;

/* Compute before the collective: produce this rank's gradient. */
static weft_status_t produce(void *arg)
{
    work_t *w = arg;
    for (int i = 0; i < N; i++) w->grad[i] = (float)(w->rank + 1) * (float)(i % 8 + w->step);
    return WEFT_SUCCESS;
}

/* Compute after the collective: it must see the sum over ranks. */
static weft_status_t consume(void *arg)
{
    work_t *w = arg;
    float ranks = (float)w->size * (float)(w->size + 1) / 2.0f; /* sum of rank + 1 */
    for (int i = 0; i < N; i++)
        if (w->grad[i] != ranks * (float)(i % 8 + w->step)) w->wrong++;
    return WEFT_SUCCESS;
}

int main(int argc, char **argv)
{
    int provided, rank, size, rc = 1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "MPI does not give MPI_THREAD_MULTIPLE\n");
        MPI_Finalize();
        return 77;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    weft_stream_t stream = NULL;
    weft_comm_t comm = NULL;
    weft_status_t st = weft_init(NULL);
    if (st == WEFT_SUCCESS) st = weft_stream_create_host(&stream);
    if (st == WEFT_SUCCESS) st = weft_comm_create(MPI_COMM_WORLD, stream, &comm);
    if (st != WEFT_SUCCESS) {
        fprintf(stderr, "rank %d: setup failed: %s\n", rank, weft_strerror(st));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    enum { STEPS = 5 };
    work_t w[STEPS];
    for (int s = 0; s < STEPS; s++) {
        w[s] = (work_t){malloc(N * sizeof(float)), rank, size, s, 0};
        /* enqueue: produce -> allreduce (in place) -> consume; nothing blocks */
        st = weft_stream_enqueue(stream, produce, &w[s]);
        if (st == WEFT_SUCCESS)
            st = weft_allreduce(WEFT_IN_PLACE, w[s].grad, N, WEFT_FLOAT32, WEFT_SUM, comm);
        if (st == WEFT_SUCCESS) st = weft_stream_enqueue(stream, consume, &w[s]);
        if (st != WEFT_SUCCESS) break;
    }
    /* the only place the host waits */
    weft_status_t sst = weft_stream_synchronize(stream);
    if (st == WEFT_SUCCESS) st = sst;

    long wrong = 0;
    for (int s = 0; s < STEPS; s++) {
        wrong += w[s].wrong;
        free(w[s].grad);
    }
    long total = 0;
    MPI_Allreduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    int bad = st != WEFT_SUCCESS, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (st != WEFT_SUCCESS) fprintf(stderr, "rank %d: %s\n", rank, weft_strerror(st));
    if (rank == 0)
        printf("stream_allreduce: %d ranks, %d steps of %d floats: %s (%ld wrong)\n", size, STEPS,
               N, (total == 0 && !anybad) ? "ok" : "FAILED", total);
    rc = (total == 0 && !anybad) ? 0 : 1;

    weft_comm_destroy(comm);
    weft_stream_destroy(stream);
    weft_finalize();
    MPI_Finalize();
    return rc;
}
