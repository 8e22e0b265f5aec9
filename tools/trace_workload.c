/*
 * trace_workload - a short, deterministic Weft-only run for the trace tests
 * (tools/test_trace.sh): N allreduces of 4 .. 4096 bytes on one communicator,
 * each rank checking the sums against the closed form. Not installed.
 *
 *   mpiexec -n P trace_workload [N]      (default N = 200)
 */
#include <stdio.h>
#include <stdlib.h>

#include "weft_mpi.h"

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 200;
    if (argc > 2 || n < 1 || n > 1000000) {
        fprintf(stderr, "usage: trace_workload [N]\n");
        return 2;
    }
    weft_init_params_t params = WEFT_INIT_PARAMS_INITIALIZER;
    params.argc = &argc;
    params.argv = &argv;
    weft_status_t st = weft_init(&params);
    if (st != WEFT_SUCCESS) {
        fprintf(stderr, "trace_workload: weft_init: %s\n", weft_strerror(st));
        return 1;
    }
    int rc = 0, rank = 0, size = 1;
    weft_comm_t comm = NULL;
    st = weft_comm_create(MPI_COMM_WORLD, NULL, &comm);
    if (st == WEFT_SUCCESS) st = weft_comm_rank(comm, &rank);
    if (st == WEFT_SUCCESS) st = weft_comm_size(comm, &size);
    int buf[1024];
    for (long i = 0; i < n && st == WEFT_SUCCESS; i++) {
        size_t count = (size_t)1 << (i % 11); /* 1 .. 1024 ints */
        for (size_t k = 0; k < count; k++) buf[k] = rank + (int)k;
        weft_request_t req;
        st = weft_iallreduce(WEFT_IN_PLACE, buf, count, WEFT_INT32, WEFT_SUM, comm, &req);
        if (st == WEFT_SUCCESS) st = weft_wait(&req);
        for (size_t k = 0; k < count && st == WEFT_SUCCESS; k++)
            if (buf[k] != size * (size - 1) / 2 + size * (int)k) {
                fprintf(stderr, "trace_workload: rank %d: wrong sum at %zu\n", rank, k);
                rc = 1;
                break;
            }
        if (rc) break;
    }
    if (st != WEFT_SUCCESS) {
        fprintf(stderr, "trace_workload: rank %d: %s\n", rank, weft_strerror(st));
        rc = 1;
    }
    if (comm != NULL && weft_comm_destroy(comm) != WEFT_SUCCESS) rc = 1;
    if (weft_finalize() != WEFT_SUCCESS) rc = 1;
    return rc;
}
