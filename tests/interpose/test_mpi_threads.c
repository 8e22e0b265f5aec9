/*
 * test_mpi_threads.c - a plain MPI program (no Weft header) whose threads
 * make nonblocking collectives at the same time, each on a communicator of
 * its own, as a framework's background thread does beside the main one
 * (MPI_THREAD_MULTIPLE). Under LD_PRELOAD=libweft-mpi.so the calls go to
 * Weft and their requests through the interposer's table, its requests
 * started ahead, the completion callback's release and the keeper thread,
 * from several program threads at once.
 *
 * Each thread, per iteration: an MPI_Iallreduce of ints (sum) and an
 * MPI_Ibcast of 64 KiB of chars from a root that moves with the iteration,
 * completed in turn by MPI_Wait on each, MPI_Waitall, MPI_Test loops and
 * MPI_Waitany; every fourth iteration sleeps between the calls and the
 * completion (the operation then ends while the thread sleeps, as under a
 * device's compute). Results against values computed here (the sum over the
 * ranks' known inputs, the root's pattern); every request must come back
 * MPI_REQUEST_NULL. Errors are summed over ranks; rank 0 prints the count.
 *
 *   mpiexec -n 2 [-genv LD_PRELOAD .../libweft-mpi.so] test_mpi_threads [--iters N]
 *
 * Exit 0 when every check held, 1 otherwise, 77 when MPI cannot give
 * MPI_THREAD_MULTIPLE (nothing to test). Thread contract: main makes the
 * communicators and joins the threads; each thread uses only its own.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

enum { NTHREADS = 3, NINT = 1001, NCHAR = 64 * 1024 };

static int rank, size;
static long iters = 200;

typedef struct worker {
    int id;
    MPI_Comm comm;
    long errors;
} worker_t;

static void fail(worker_t *w, long it, const char *what)
{
    if (w->errors++ < 5) fprintf(stderr, "rank %d thread %d iteration %ld: %s\n", rank, w->id, it, what);
}

static int ok(int rc) { return rc == MPI_SUCCESS; }

static char pattern(int t, long it, long i) { return (char)((t * 31 + it * 7 + i * 13) & 0x7f); }

/* Complete q[0..1] the way iteration it asks for; 0 when an MPI call failed. */
static int complete(MPI_Request q[2], long it)
{
    int done = 0, idx = -1;
    switch (it % 4) {
    case 0: return ok(MPI_Wait(&q[0], MPI_STATUS_IGNORE)) && ok(MPI_Wait(&q[1], MPI_STATUS_IGNORE));
    case 1: {
        MPI_Status st[2]; /* (MPI_STATUSES_IGNORE: a GCC 12 false warning) */
        return ok(MPI_Waitall(2, q, st));
    }
    case 2:
        for (int k = 0; k < 2; k++) {
            done = 0;
            while (!done) {
                if (!ok(MPI_Test(&q[k], &done, MPI_STATUS_IGNORE))) return 0;
                if (!done) sched_yield();
            }
        }
        return 1;
    default:
        for (int k = 0; k < 2; k++)
            if (!ok(MPI_Waitany(2, q, &idx, MPI_STATUS_IGNORE)) || idx == MPI_UNDEFINED) return 0;
        return 1;
    }
}

static void *run(void *arg)
{
    worker_t *w = arg;
    int *in = malloc(sizeof(int) * NINT), *out = malloc(sizeof(int) * NINT);
    char *b = malloc(NCHAR);
    if (in == NULL || out == NULL || b == NULL) {
        fail(w, -1, "out of memory");
        goto out;
    }
    const int tsum = size * (size - 1) / 2;
    for (long it = 0; it < iters; it++) {
        const int root = (int)((it + w->id) % size);
        for (int i = 0; i < NINT; i++) {
            in[i] = rank * 1000 + w->id * 100 + (int)(it % 50) + i;
            out[i] = -1;
        }
        for (long i = 0; i < NCHAR; i++) b[i] = rank == root ? pattern(w->id, it, i) : 0;
        MPI_Request q[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
        if (!ok(MPI_Iallreduce(in, out, NINT, MPI_INT, MPI_SUM, w->comm, &q[0])) ||
            !ok(MPI_Ibcast(b, NCHAR, MPI_CHAR, root, w->comm, &q[1]))) {
            fail(w, it, "a nonblocking call failed");
            break;
        }
        if (it % 4 == 3) { /* device-style: the operations end while this thread sleeps */
            struct timespec ts = {0, 200 * 1000};
            nanosleep(&ts, NULL);
        }
        if (!complete(q, it)) {
            fail(w, it, "a completion call failed");
            break;
        }
        if (q[0] != MPI_REQUEST_NULL || q[1] != MPI_REQUEST_NULL) fail(w, it, "a request was not released");
        for (int i = 0; i < NINT; i++)
            if (out[i] != 1000 * tsum + size * (w->id * 100 + (int)(it % 50) + i)) {
                fail(w, it, "wrong allreduce result");
                break;
            }
        for (long i = 0; i < NCHAR; i++)
            if (b[i] != pattern(w->id, it, i)) {
                fail(w, it, "wrong bcast data");
                break;
            }
    }
out:
    free(in);
    free(out);
    free(b);
    return NULL;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
            iters = strtol(argv[++i], NULL, 10);
        } else {
            fprintf(stderr, "usage: test_mpi_threads [--iters N]\n");
            return 2;
        }
    }
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0) printf("test_mpi_threads: MPI gives thread level %d: skipped\n", provided);
        MPI_Finalize();
        return 77;
    }
    worker_t w[NTHREADS];
    pthread_t th[NTHREADS];
    long errors = 0;
    for (int t = 0; t < NTHREADS; t++) { /* collective, in the same order on every rank */
        w[t] = (worker_t){.id = t, .errors = 0};
        if (MPI_Comm_dup(MPI_COMM_WORLD, &w[t].comm) != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 1);
        /* a first blocking call creates the communicator's Weft side in order
         * (doc/mpi_interposition.md: creation on first use is collective) */
        if (MPI_Barrier(w[t].comm) != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int started = 0;
    for (int t = 0; t < NTHREADS; t++) {
        if (pthread_create(&th[t], NULL, run, &w[t]) != 0) {
            fprintf(stderr, "rank %d: pthread_create failed\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        started++;
    }
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < NTHREADS; t++) {
        errors += w[t].errors;
        MPI_Comm_free(&w[t].comm);
    }
    long total = 0;
    MPI_Allreduce(&errors, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_mpi_threads: %d ranks, %d threads, %ld iterations, %ld errors\n", size, NTHREADS,
               iters, total);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
