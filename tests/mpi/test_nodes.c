/*
 * test_nodes.c - the nodes MPI sees, and traffic between them
 * (mpiexec -n N mpi_nodes [NODES PPN [BYTES]]).
 *
 * What is checked, on every run:
 *  - MPI_Get_processor_name: the ranks with one name are the ranks of one
 *    node, and that name is the host name (gethostname) of each of them;
 *  - MPI_Comm_split_type(MPI_COMM_TYPE_SHARED): its members are exactly the
 *    ranks with this rank's processor name;
 *  - with NODES and PPN given (scripts/multinode.sh --nodes NODES --ppn PPN):
 *    there are NODES names, PPN ranks each, node i holding ranks
 *    i*PPN .. i*PPN+PPN-1 (mpiexec -ppn's order);
 *  - a message of BYTES bytes (default 16 MiB) from rank 0 to the first rank
 *    of the last node through MPI_Send, and one back through weft_send on
 *    the world communicator (Weft's transport), each compared byte for byte
 *    with what the sender wrote. Under multinode.sh these cross the veth of
 *    node 0 in opposite directions, MPI's out and Weft's in, which
 *    tests/mpi/run_multinode.sh checks with the veth's byte counters.
 * Rank 0 prints each rank's processor name and SHARED size. Every function
 * here runs on the main thread (the one that initialised MPI and Weft).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpitest.h"

/* Each rank's processor name, nul-terminated in MPI_MAX_PROCESSOR_NAME bytes. */
static char *gather_names(mt_ctx_t *t)
{
    char mine[MPI_MAX_PROCESSOR_NAME];
    memset(mine, 0, sizeof mine);
    int len = 0;
    char *all = calloc((size_t)t->size, MPI_MAX_PROCESSOR_NAME);
    if (all == NULL) {
        mt_error(t, "out of memory");
        return NULL;
    }
    if (MPI_Get_processor_name(mine, &len) != MPI_SUCCESS || len <= 0 ||
        len >= MPI_MAX_PROCESSOR_NAME) {
        mt_error(t, "MPI_Get_processor_name failed (length %d)", len);
        mine[0] = '\0';
    }
    char host[256] = {0};
    if (gethostname(host, sizeof host - 1) != 0) mt_error(t, "gethostname failed");
    MT_CHECK(t, strcmp(host, mine) == 0, "processor name '%s', host name '%s'", mine, host);
    if (MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME,
                      MPI_CHAR, MPI_COMM_WORLD) != MPI_SUCCESS) {
        mt_error(t, "MPI_Allgather of the names failed");
        free(all);
        return NULL;
    }
    return all;
}

#define NAME(all, r) ((all) + (size_t)(r) * MPI_MAX_PROCESSOR_NAME)

/* The SHARED communicator holds exactly the ranks named as this one. */
static void check_shared(mt_ctx_t *t, const char *all)
{
    MPI_Comm node = MPI_COMM_NULL;
    int nsize = 0;
    int *members = NULL;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) !=
            MPI_SUCCESS ||
        MPI_Comm_size(node, &nsize) != MPI_SUCCESS) {
        mt_error(t, "MPI_Comm_split_type(SHARED) failed");
        goto out;
    }
    members = malloc((size_t)nsize * sizeof *members);
    if (members == NULL) {
        mt_error(t, "out of memory");
        goto out;
    }
    if (MPI_Allgather(&t->rank, 1, MPI_INT, members, 1, MPI_INT, node) != MPI_SUCCESS) {
        mt_error(t, "MPI_Allgather on the node failed");
        goto out;
    }
    int named = 0;
    for (int r = 0; r < t->size; r++) named += strcmp(NAME(all, r), NAME(all, t->rank)) == 0;
    MT_CHECK(t, nsize == named, "SHARED size %d, %d ranks named '%s'", nsize, named,
             NAME(all, t->rank));
    for (int i = 0; i < nsize; i++)
        MT_CHECK(t, strcmp(NAME(all, members[i]), NAME(all, t->rank)) == 0,
                 "rank %d in this rank's SHARED communicator is named '%s', not '%s'", members[i],
                 NAME(all, members[i]), NAME(all, t->rank));
    /* the table the tests' logs show */
    int *sizes = t->rank == 0 ? malloc((size_t)t->size * sizeof *sizes) : NULL;
    if (t->rank == 0 && sizes == NULL) mt_error(t, "out of memory");
    if (MPI_Gather(&nsize, 1, MPI_INT, sizes, 1, MPI_INT, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        mt_error(t, "MPI_Gather failed");
    else if (sizes != NULL)
        for (int r = 0; r < t->size; r++)
            printf("rank %d: processor name %s, MPI_COMM_TYPE_SHARED size %d\n", r, NAME(all, r),
                   sizes[r]);
    free(sizes);
out:
    free(members);
    if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
}

/* NODES names of PPN consecutive ranks each. */
static void check_layout(mt_ctx_t *t, const char *all, int nodes, int ppn)
{
    if (t->size != nodes * ppn) {
        mt_error(t, "%d ranks, expected %d nodes x %d", t->size, nodes, ppn);
        return;
    }
    for (int r = 0; r < t->size; r++) {
        int first = r / ppn * ppn; /* the node's first rank */
        MT_CHECK(t, strcmp(NAME(all, r), NAME(all, first)) == 0,
                 "rank %d is on '%s', rank %d (same node) on '%s'", r, NAME(all, r), first,
                 NAME(all, first));
        if (first > 0)
            MT_CHECK(t, strcmp(NAME(all, first), NAME(all, first - ppn)) != 0,
                     "ranks %d and %d (other nodes) are both on '%s'", first, first - ppn,
                     NAME(all, first));
    }
    for (int a = 0; a < nodes; a++)
        for (int b = 0; b < a; b++)
            MT_CHECK(t, strcmp(NAME(all, a * ppn), NAME(all, b * ppn)) != 0,
                     "nodes %d and %d are both '%s'", a, b, NAME(all, a * ppn));
}

/* BYTES from rank 0 to `far` through MPI, and back through Weft. */
static void cross(mt_ctx_t *t, int far, size_t bytes)
{
    enum { TAG = 41 };
    if (far == 0 || (t->rank != 0 && t->rank != far)) return;
    uint8_t *buf = malloc(bytes);
    if (buf == NULL) {
        mt_error(t, "out of memory (%zu bytes)", bytes);
        return;
    }
    const int peer = t->rank == 0 ? far : 0;
    const uint32_t salt_mpi = 1, salt_weft = 2;
    if (bytes > (size_t)INT32_MAX) {
        mt_error(t, "%zu bytes is more than one MPI_Send carries here", bytes);
    } else if (t->rank == 0) {
        mt_fill_bytes(buf, bytes, 0, salt_mpi);
        if (MPI_Send(buf, (int)bytes, MPI_BYTE, peer, TAG, MPI_COMM_WORLD) != MPI_SUCCESS)
            mt_error(t, "MPI_Send to %d failed", peer);
        memset(buf, 0, bytes);
        if (MT_STATUS(t, weft_recv(buf, bytes, WEFT_UINT8, peer, TAG, t->comm), WEFT_SUCCESS,
                      "weft_recv")) {
            size_t bad = mt_bad_bytes(buf, bytes, peer, salt_weft);
            MT_CHECK(t, bad == 0, "%zu of %zu bytes from rank %d through Weft differ", bad, bytes,
                     peer);
        }
    } else {
        memset(buf, 0, bytes);
        if (MPI_Recv(buf, (int)bytes, MPI_BYTE, peer, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS) {
            mt_error(t, "MPI_Recv from %d failed", peer);
        } else {
            size_t bad = mt_bad_bytes(buf, bytes, peer, salt_mpi);
            MT_CHECK(t, bad == 0, "%zu of %zu bytes from rank %d through MPI differ", bad, bytes,
                     peer);
        }
        mt_fill_bytes(buf, bytes, t->rank, salt_weft);
        MT_STATUS(t, weft_send(buf, bytes, WEFT_UINT8, peer, TAG, t->comm), WEFT_SUCCESS,
                  "weft_send");
    }
    free(buf);
}

int main(int argc, char **argv)
{
    mt_ctx_t t;
    int rc = mt_init(&t, &argc, &argv);
    if (rc != 0) return rc;
    int nodes = 0, ppn = 0;
    long bytes = 16L << 20;
    if (argc >= 3) {
        nodes = atoi(argv[1]);
        ppn = atoi(argv[2]);
        if (argc >= 4) bytes = atol(argv[3]);
        if (nodes < 1 || ppn < 1 || bytes < 1) {
            if (t.rank == 0) fprintf(stderr, "usage: mpi_nodes [NODES PPN [BYTES]]\n");
            mt_error(&t, "bad arguments");
            return mt_finish(&t);
        }
    }
    char *all = gather_names(&t);
    if (all != NULL) {
        check_shared(&t, all);
        if (nodes > 0) check_layout(&t, all, nodes, ppn);
        /* the first rank of the last node: another node than rank 0's
         * when there are several */
        int far = t.size - 1;
        while (far > 0 && strcmp(NAME(all, far - 1), NAME(all, t.size - 1)) == 0) far--;
        if (far == 0) far = t.size - 1; /* one node: any other rank */
        cross(&t, far, (size_t)bytes);
        if (t.rank == 0 && far != 0)
            printf("%zu bytes rank 0 -> %d through MPI, back through Weft\n", (size_t)bytes, far);
    }
    free(all);
    return mt_finish(&t);
}
