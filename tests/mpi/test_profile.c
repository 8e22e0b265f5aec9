/*
 * test_profile.c - a known sequence of calls for the profiler and the trace.
 *
 * Run by tests/mpi/run_obs.sh under WEFT_PROFILE and WEFT_TRACE; the files are
 * then checked by tests/mpi/check_obs.py, which knows this sequence:
 *
 *   profiling off: 1 allreduce of 8 B (recursive_doubling)  -> not counted
 *   profiling on (weft_profile_enable(1), or WEFT_PROFILE at init):
 *     3 allreduce of 4 B, recursive_doubling                -> bucket 4, calls 3
 *     2 allreduce of 4096 B, ring                           -> bucket 4096, calls 2
 *     1 iallreduce of 12 B + weft_wait (automatic choice)   -> bucket 16, calls 1, waits 1
 *     1 bcast of 100 B (uint8) from rank 0                  -> bucket 128, calls 1
 *   weft_profile_dump(DUMP.RANK.json) in between (this rank only, so far).
 *
 * It also checks results and the error paths of weft_profile_dump /
 * weft_profile_enable (bad arguments return an error, never crash).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

static void allreduce_n(mt_ctx_t *t, int n, size_t count, weft_algo_t algo)
{
    float *buf = malloc(count * sizeof(float));
    if (buf == NULL) {
        mt_error(t, "out of memory");
        return;
    }
    MT_STATUS(t, weft_comm_set_algo(t->comm, WEFT_COLL_ALLREDUCE, algo), WEFT_SUCCESS, "set_algo");
    for (int k = 0; k < n; k++) {
        for (size_t i = 0; i < count; i++) buf[i] = (float)(t->rank + 1);
        MT_STATUS(t, weft_allreduce(WEFT_IN_PLACE, buf, count, WEFT_FLOAT32, WEFT_SUM, t->comm),
                  WEFT_SUCCESS, "allreduce");
        float want = (float)t->size * (float)(t->size + 1) / 2.0f;
        MT_CHECK(t, buf[0] == want && buf[count - 1] == want, "allreduce gave %g, want %g",
                 (double)buf[0], (double)want);
    }
    MT_STATUS(t, weft_comm_set_algo(t->comm, WEFT_COLL_ALLREDUCE, WEFT_ALGO_AUTO), WEFT_SUCCESS,
              "set_algo auto");
    free(buf);
}

int main(int argc, char **argv)
{
    mt_ctx_t t;
    int rc = mt_init(&t, &argc, &argv);
    if (rc != 0) return rc;

    /* Error paths first: never a crash. */
    MT_STATUS(&t, weft_profile_dump(NULL), WEFT_ERR_INVALID_ARG, "dump(NULL)");
    MT_STATUS(&t, weft_profile_dump(""), WEFT_ERR_INVALID_ARG, "dump(\"\")");
    MT_CHECK(&t, weft_profile_dump("/nonexistent-dir/weft/p.json") != WEFT_SUCCESS,
             "dump to a missing directory succeeded");

    /* Not counted: profiling switched off around it. */
    MT_STATUS(&t, weft_profile_enable(0), WEFT_SUCCESS, "profile_enable(0)");
    allreduce_n(&t, 1, 2, WEFT_ALGO_RECURSIVE_DOUBLING);
    MT_STATUS(&t, weft_profile_enable(1), WEFT_SUCCESS, "profile_enable(1)");

    allreduce_n(&t, 3, 1, WEFT_ALGO_RECURSIVE_DOUBLING);
    allreduce_n(&t, 2, 1024, WEFT_ALGO_RING);

    /* A dump of this rank's table so far. */
    const char *dump = getenv("WEFT_TEST_DUMP");
    if (dump != NULL && *dump) {
        char path[1024];
        snprintf(path, sizeof path, "%s.%d.json", dump, t.rank);
        MT_STATUS(&t, weft_profile_dump(path), WEFT_SUCCESS, "profile_dump");
    }

    float v[3] = {1, 2, 3};
    weft_request_t req = WEFT_REQUEST_NULL;
    MT_STATUS(&t, weft_iallreduce(WEFT_IN_PLACE, v, 3, WEFT_FLOAT32, WEFT_SUM, t.comm, &req),
              WEFT_SUCCESS, "iallreduce");
    MT_STATUS(&t, weft_wait(&req), WEFT_SUCCESS, "wait");
    MT_CHECK(&t, v[2] == 3.0f * (float)t.size, "iallreduce gave %g", (double)v[2]);

    unsigned char b[100];
    memset(b, t.rank == 0 ? 7 : 0, sizeof b);
    MT_STATUS(&t, weft_bcast(b, sizeof b, WEFT_UINT8, 0, t.comm), WEFT_SUCCESS, "bcast");
    MT_CHECK(&t, b[0] == 7 && b[99] == 7, "bcast gave %d", b[0]);

    return mt_finish(&t);
}
