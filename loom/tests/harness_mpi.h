/* harness_mpi.h - harness.h for the multi-rank Loom tests: Weft and MPI up
 * (weft_init initialises MPI with MPI_THREAD_MULTIPLE), Loom on one thread,
 * and a verdict that fails every rank when any rank failed. */
#ifndef LOOM_TEST_HARNESS_MPI_H
#define LOOM_TEST_HARNESS_MPI_H

#include <mpi.h>

#include "harness.h"
#include "loom.h"
#include "weft.h"

/* weft_init from main's arguments; 0, or 1 (printed) when it failed. */
static inline int t_mpi_init(int *argc, char ***argv, int *rank, int *size)
{
    weft_init_params_t ip = WEFT_INIT_PARAMS_INITIALIZER;
    ip.argc = argc;
    ip.argv = argv;
    int ws = weft_init(&ip);
    if (ws != WEFT_SUCCESS) {
        fprintf(stderr, "weft_init: %s\n", weft_strerror(ws));
        return 1;
    }
    loom_set_threads(1);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return 0;
}

/* The summary line ("ranks P: N passed, N failed"), weft_finalize, and the
 * exit status: 1 if any rank failed a check. Collective. */
static inline int t_mpi_done(int rank, int size)
{
    int fails = t_fail, all = 0;
    MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("ranks %d: ", size);
    int rc = t_done();
    weft_finalize();
    return all ? 1 : rc;
}

#endif
