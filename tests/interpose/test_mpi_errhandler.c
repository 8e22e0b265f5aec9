/*
 * test_mpi_errhandler.c - a plain MPI program: a collective that cannot
 * complete (rank 1 skips an MPI_Allreduce that rank 0 makes) must come back
 * on rank 0 as an MPI error through the communicator's error handler, once
 * the library's hang watchdog gives up, not hang. Run only under
 * libweft-mpi.so with WEFT_TIMEOUT set (MPI alone would wait for ever, as the
 * program is erroneous on purpose); 2 ranks.
 * Also checks that an invalid root and a negative count of a vector
 * collective are reported as MPI reports them.
 * Exit 0 on success, 1 on failure, 2 on bad usage.
 */
#include <stdio.h>
#include <string.h>

#include <mpi.h>

static int handler_calls, handler_code;

static void handler(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    handler_calls++;
    handler_code = *code;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            printf("usage: mpiexec -n 2 [LD_PRELOAD=libweft-mpi.so] %s\n"
                   "A collective that cannot complete must return an MPI error.\n", argv[0]);
            return 0;
        }
        if (!strcmp(argv[i], "--version")) { printf("test_mpi_errhandler 0.1.0\n"); return 0; }
        fprintf(stderr, "%s: unknown option '%s'\n", argv[0], argv[i]);
        return 2;
    }
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 1;
    int rank, size, errors = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "run on 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    MPI_Comm c;
    MPI_Errhandler eh;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &c) != MPI_SUCCESS ||
        MPI_Comm_create_errhandler(handler, &eh) != MPI_SUCCESS ||
        MPI_Comm_set_errhandler(c, eh) != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: setting up the communicator failed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* invalid root: an error of class MPI_ERR_ROOT, as MPI reports it */
    int v = 1, cls = 0;
    int rc = MPI_Bcast(&v, 1, MPI_INT, size, c);
    MPI_Error_class(rc, &cls);
    if (rc == MPI_SUCCESS || cls != MPI_ERR_ROOT || handler_calls != 1) {
        fprintf(stderr, "rank %d: MPI_Bcast to root %d returned %d (class %d), handler ran %d "
                        "times\n", rank, size, rc, cls, handler_calls);
        errors++;
    }
    /* first use of c by a valid call: every rank */
    int s = 0;
    if (MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, c) != MPI_SUCCESS || s != 2) {
        fprintf(stderr, "rank %d: MPI_Allreduce gave %d\n", rank, s);
        errors++;
    }
    /* a negative count in a vector collective: MPI's own error (MPI_ERR_COUNT)
     * through the handler, on every rank */
    int cnts[2] = {1, -1}, dsps[2] = {0, 1}, out[2] = {0, 0};
    handler_calls = 0;
    rc = MPI_Allgatherv(&v, 1, MPI_INT, out, cnts, dsps, MPI_INT, c);
    MPI_Error_class(rc, &cls);
    if (rc == MPI_SUCCESS || cls != MPI_ERR_COUNT || handler_calls != 1) {
        fprintf(stderr, "rank %d: MPI_Allgatherv with a negative count returned %d (class %d), "
                        "handler ran %d times\n", rank, rc, cls, handler_calls);
        errors++;
    }
    handler_calls = 0;
    rc = MPI_Alltoallv(dsps, cnts, dsps, MPI_INT, out, cnts, dsps, MPI_INT, c);
    MPI_Error_class(rc, &cls);
    if (rc == MPI_SUCCESS || cls != MPI_ERR_COUNT || handler_calls != 1) {
        fprintf(stderr, "rank %d: MPI_Alltoallv with a negative count returned %d (class %d), "
                        "handler ran %d times\n", rank, rc, cls, handler_calls);
        errors++;
    }
    handler_calls = 0;
    if (rank == 0) { /* rank 1 never joins this one */
        rc = MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, c);
        MPI_Error_class(rc, &cls);
        if (rc == MPI_SUCCESS || handler_calls != 1 || handler_code != rc) {
            fprintf(stderr, "rank 0: an allreduce rank 1 skipped returned %d (class %d), handler "
                            "ran %d times with %d\n", rc, cls, handler_calls, handler_code);
            errors++;
        } else {
            char msg[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(rc, msg, &len);
            printf("rank 0: the skipped allreduce returned class %d (%s)\n", cls, msg);
        }
    }
    MPI_Errhandler_free(&eh);
    int all = 0;
    MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Comm_free(&c);
    MPI_Finalize();
    if (rank == 0) printf("test_mpi_errhandler: %d errors\n", all);
    return all == 0 ? 0 : 1;
}
