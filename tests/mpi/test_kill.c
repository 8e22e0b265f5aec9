/*
 * test_kill.c - the program run_kill.sh kills a rank of (mpiexec -n 4).
 *
 * Every rank runs collectives in a loop on one communicator - an allreduce
 * compared with its known sum, a broadcast from a rotating root, an
 * allgather, a barrier - and prints "ready RANK PID" once all ranks are in
 * the loop. run_kill.sh then kills one rank with SIGKILL. A survivor's
 * collective can no longer complete: it must come back with an error within
 * WEFT_TIMEOUT (the hang watchdog) or from the transport, and the survivor
 * then prints "survivor RANK: ..." to stderr, finalises Weft and exits 3
 * (MPI is not finalised: MPI_Finalize waits for the dead peer). The launcher
 * may end the job first when it sees the dead rank: either way the job ends.
 *
 * Usage: mpi_kill_loop [--max-seconds S]   (default 60: if nobody is killed
 * by then, every rank stops and the run fails with exit 1)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpitest.h"

#define COUNT 4096

static void usage(FILE *f, const char *prog)
{
    fprintf(f, "usage: %s [--max-seconds S] [--help] [--version]\n"
               "Collectives in a loop until a rank dies (run by tests/mpi/run_kill.sh).\n", prog);
}

/* A failed collective: report it and leave (exit 3, see above). */
static void survivor_exit(mt_ctx_t *t, const char *what, long round, weft_status_t st,
                          double since_ok)
{
    fprintf(stderr, "survivor %d: %s of round %ld failed after %.2f s: %s (%s)\n", t->rank, what,
            round, since_ok, weft_status_name(st), weft_strerror(st));
    fflush(stderr);
    weft_comm_destroy(t->comm);
    weft_status_t fst = weft_finalize();
    fprintf(stderr, "survivor %d: weft_finalize: %s\n", t->rank, weft_status_name(fst));
    fflush(stderr);
    exit(3);
}

int main(int argc, char **argv)
{
    double max_s = 60;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            usage(stdout, argv[0]);
            return 0;
        } else if (!strcmp(argv[i], "--version")) {
            printf("mpi_kill_loop (Weft tests) %s\n", weft_version_string());
            return 0;
        } else if (!strcmp(argv[i], "--max-seconds") && i + 1 < argc) {
            char *end;
            max_s = strtod(argv[++i], &end);
            if (*end || !(max_s > 0)) {
                fprintf(stderr, "%s: --max-seconds: not a positive number: %s\n", argv[0], argv[i]);
                return 2;
            }
        } else {
            fprintf(stderr, "%s: unknown option or missing value: %s\n", argv[0], argv[i]);
            usage(stderr, argv[0]);
            return 2;
        }
    }
    mt_ctx_t t;
    int rc = mt_init(&t, &argc, &argv);
    if (rc != 0) return rc;

    int32_t *x = malloc((COUNT + 1) * sizeof *x), *sum = malloc((COUNT + 1) * sizeof *sum);
    int32_t *all = malloc((size_t)t.size * sizeof *all), b[16];
    MT_CHECK(&t, x && sum && all, "out of memory");
    if (!x || !sum || !all) return mt_finish(&t);
    MT_STATUS(&t, weft_barrier(t.comm), WEFT_SUCCESS, "barrier before the loop");
    printf("ready %d %ld\n", t.rank, (long)getpid());
    fflush(stdout);

    double last_ok = MPI_Wtime();
    for (long round = 0;; round++) {
        weft_status_t st;
        for (int i = 0; i < COUNT; i++) x[i] = (int32_t)(t.rank + 1) * (i % 7 + 1) + (int32_t)(round % 5);
        /* the last element: 1 where this rank wants to stop (all stop together) */
        x[COUNT] = t.errors > 0 || mt_elapsed(&t) > max_s;
        if ((st = weft_allreduce(x, sum, COUNT + 1, WEFT_INT32, WEFT_SUM, t.comm)) != WEFT_SUCCESS)
            survivor_exit(&t, "allreduce", round, st, MPI_Wtime() - last_ok);
        int32_t ranks = (int32_t)(t.size * (t.size + 1) / 2);
        for (int i = 0; i < COUNT; i++)
            if (sum[i] != ranks * (i % 7 + 1) + (int32_t)(t.size * (round % 5))) {
                mt_error(&t, "round %ld: allreduce element %d is %d", round, i, (int)sum[i]);
                break;
            }
        int root = (int)(round % t.size);
        for (int i = 0; i < 16; i++) b[i] = t.rank == root ? (int32_t)(round + i) : -1;
        if ((st = weft_bcast(b, 16, WEFT_INT32, root, t.comm)) != WEFT_SUCCESS)
            survivor_exit(&t, "bcast", round, st, MPI_Wtime() - last_ok);
        MT_CHECK(&t, b[0] == (int32_t)round && b[15] == (int32_t)(round + 15), "round %ld: bcast", round);
        int32_t mine = (int32_t)(t.rank * 1000 + round % 1000);
        if ((st = weft_allgather(&mine, all, 1, WEFT_INT32, t.comm)) != WEFT_SUCCESS)
            survivor_exit(&t, "allgather", round, st, MPI_Wtime() - last_ok);
        for (int r = 0; r < t.size; r++)
            MT_CHECK(&t, all[r] == (int32_t)(r * 1000 + round % 1000), "round %ld: allgather[%d]", round, r);
        if ((st = weft_barrier(t.comm)) != WEFT_SUCCESS)
            survivor_exit(&t, "barrier", round, st, MPI_Wtime() - last_ok);
        last_ok = MPI_Wtime();
        if (sum[COUNT] > 0) break;
    }
    if (!t.errors) mt_error(&t, "no rank was killed within %.0f s", max_s);
    free(x);
    free(sum);
    free(all);
    return mt_finish(&t);
}
