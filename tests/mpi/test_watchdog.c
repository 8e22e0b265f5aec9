/*
 * test_watchdog.c - the hang watchdog and bounded finalize (mpiexec -n 2,
 * WEFT_TIMEOUT=2 set by meson).
 *
 * 1. Rank 0 issues an allreduce on a communicator that rank 1 never joins:
 *    the request fails with WEFT_ERR_TIMEOUT within a few seconds, the
 *    communicator reports the sticky error, and later calls on it fail at
 *    once with WEFT_ERR_COMM_BROKEN. Another communicator keeps working.
 * 2. Rank 0 issues another such allreduce and calls weft_finalize without
 *    waiting: finalize returns within the bound, it does not hang.
 */
#include <stdio.h>
#include <stdlib.h>

#include "mpitest.h"

int main(int argc, char **argv)
{
    mt_ctx_t t;
    int rc = mt_init(&t, &argc, &argv);
    if (rc != 0) return rc;
    if (t.size != 2) return mt_skip(&t, "needs exactly 2 ranks");
    const char *to = getenv("WEFT_TIMEOUT");
    if (to == NULL || atof(to) <= 0 || atof(to) > 10)
        return mt_skip(&t, "needs WEFT_TIMEOUT between 0 and 10 s");
    double timeout = atof(to);

    weft_comm_t lonely, good;
    MT_STATUS(&t, weft_comm_create(MPI_COMM_WORLD, NULL, &lonely), WEFT_SUCCESS, "create lonely");
    MT_STATUS(&t, weft_comm_create(MPI_COMM_WORLD, NULL, &good), WEFT_SUCCESS, "create good");

    float x[16] = {1}, y[16];
    if (t.rank == 0) {
        weft_request_t req;
        double t0 = MPI_Wtime();
        MT_STATUS(&t, weft_iallreduce(x, y, 16, WEFT_FLOAT32, WEFT_SUM, lonely, &req), WEFT_SUCCESS,
                  "iallreduce nobody joins");
        MT_STATUS(&t, weft_wait(&req), WEFT_ERR_TIMEOUT, "wait on a stuck allreduce");
        double dt = MPI_Wtime() - t0;
        MT_CHECK(&t, dt >= timeout * 0.9 && dt < timeout + 5, "watchdog fired after %.2f s", dt);
        MT_CHECK(&t, req == WEFT_REQUEST_NULL, "request released after the timeout");
        MT_STATUS(&t, weft_comm_get_error(lonely), WEFT_ERR_TIMEOUT, "sticky comm error");
        t0 = MPI_Wtime();
        MT_STATUS(&t, weft_allreduce(x, y, 16, WEFT_FLOAT32, WEFT_SUM, lonely), WEFT_ERR_COMM_BROKEN,
                  "allreduce on a broken comm");
        MT_CHECK(&t, MPI_Wtime() - t0 < 1.0, "broken comm fails fast");
    }
    /* Rank 1 waits here (in MPI, not Weft) while rank 0 is stuck: otherwise
     * its allreduce below would wait for rank 0 longer than WEFT_TIMEOUT. */
    MPI_Barrier(MPI_COMM_WORLD);
    /* The other communicator is unaffected. */
    float one = 1, sum = 0;
    MT_STATUS(&t, weft_allreduce(&one, &sum, 1, WEFT_FLOAT32, WEFT_SUM, good), WEFT_SUCCESS,
              "allreduce on a healthy comm");
    MT_CHECK(&t, sum == 2.0f, "healthy comm sum %g", sum);
    MT_STATUS(&t, weft_comm_get_error(good), WEFT_SUCCESS, "no error on the healthy comm");
    MT_STATUS(&t, weft_comm_destroy(lonely), WEFT_SUCCESS, "destroy the broken comm");
    MT_STATUS(&t, weft_comm_destroy(good), WEFT_SUCCESS, "destroy the healthy comm");

    /* Finalize with an op that can never complete: bounded, no hang. The
     * errors are summed with MPI afterwards, since Weft is gone then. */
    weft_comm_t stuck;
    MT_STATUS(&t, weft_comm_create(MPI_COMM_WORLD, NULL, &stuck), WEFT_SUCCESS, "create stuck");
    weft_request_t req = WEFT_REQUEST_NULL;
    if (t.rank == 0)
        MT_STATUS(&t, weft_iallreduce(x, y, 16, WEFT_FLOAT32, WEFT_SUM, stuck, &req), WEFT_SUCCESS,
                  "iallreduce before finalize");
    double t0 = MPI_Wtime();
    weft_status_t fst = weft_finalize();
    double dt = MPI_Wtime() - t0;
    if (t.rank == 0) {
        MT_CHECK(&t, dt < timeout + 5, "finalize took %.2f s", dt);
        /* The op was either failed by the watchdog (reported, finalize then
         * succeeds) or by finalize itself. */
        MT_CHECK(&t, fst == WEFT_SUCCESS || fst == WEFT_ERR_FINALIZING, "finalize returned %s",
                 weft_status_name(fst));
        MT_STATUS(&t, weft_wait(&req), WEFT_ERR_NOT_INITIALIZED, "wait after finalize");
    } else {
        MT_STATUS(&t, fst, WEFT_SUCCESS, "finalize with nothing in flight");
    }
    long more = 0;
    MPI_Allreduce(&t.errors, &more, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (t.rank == 0) {
        if (more == 0) printf("mpi_watchdog: No Errors\n");
        else printf("mpi_watchdog: Found %ld errors\n", more);
    }
    MPI_Finalize();
    return more == 0 ? 0 : 1;
}
