/*
 * algos.c - the registry of collective algorithms: which implementation
 * serves (collective, algorithm). Selection (lib/select.c) looks algorithms
 * up here and iterates over those of one collective.
 *
 * To add an algorithm: declare its impl below and add one line to the
 * table. The impl's own `kind` field says which collective it serves.
 */
#include "algo.h"

/* Allreduce */
extern const weft__algo_impl_t weft__allreduce_ring_impl;
extern const weft__algo_impl_t weft__allreduce_recursive_doubling_impl;
extern const weft__algo_impl_t weft__allreduce_rabenseifner_impl;
extern const weft__algo_impl_t weft__allreduce_tree_impl;
extern const weft__algo_impl_t weft__allreduce_mpi_impl;
extern const weft__algo_impl_t weft__allreduce_nccl_impl; /* lib/stream.c: device buffers */

/* The other collectives (lib/coll/<coll>_<algo>.c) */
extern const weft__algo_impl_t weft__reduce_scatter_ring_impl;
extern const weft__algo_impl_t weft__reduce_scatter_recursive_halving_impl;
extern const weft__algo_impl_t weft__allgather_ring_impl;
extern const weft__algo_impl_t weft__allgather_recursive_doubling_impl;
extern const weft__algo_impl_t weft__bcast_binomial_impl;
extern const weft__algo_impl_t weft__bcast_scatter_allgather_impl;
extern const weft__algo_impl_t weft__reduce_binomial_impl;
extern const weft__algo_impl_t weft__alltoall_pairwise_impl;
extern const weft__algo_impl_t weft__gather_linear_impl;
extern const weft__algo_impl_t weft__scatter_linear_impl;
extern const weft__algo_impl_t weft__barrier_dissemination_impl;

/* One line per algorithm, grouped by collective (the order within a
 * collective is the order weft__algo_list returns). */
static const weft__algo_impl_t *const algo_table[] = {
    &weft__allreduce_ring_impl,
    &weft__allreduce_recursive_doubling_impl,
    &weft__allreduce_rabenseifner_impl,
    &weft__allreduce_tree_impl,
    &weft__allreduce_mpi_impl,
    &weft__allreduce_nccl_impl,
    &weft__reduce_scatter_ring_impl,
    &weft__reduce_scatter_recursive_halving_impl,
    &weft__allgather_ring_impl,
    &weft__allgather_recursive_doubling_impl,
    &weft__bcast_binomial_impl,
    &weft__bcast_scatter_allgather_impl,
    &weft__reduce_binomial_impl,
    &weft__alltoall_pairwise_impl,
    &weft__gather_linear_impl,
    &weft__scatter_linear_impl,
    &weft__barrier_dissemination_impl,
};

#define ALGO_TABLE_N (sizeof(algo_table) / sizeof(algo_table[0]))

/* Per-collective lists, built once from algo_table (under pthread_once). */
static const weft__algo_impl_t *algo_lists[WEFT_COLL_COUNT][ALGO_TABLE_N + 1];
static int algo_list_n[WEFT_COLL_COUNT];
static pthread_once_t algo_lists_once = PTHREAD_ONCE_INIT;

static void build_lists(void)
{
    for (size_t i = 0; i < ALGO_TABLE_N; i++) {
        int k = (int)algo_table[i]->kind;
        if (k < 0 || k >= WEFT_COLL_COUNT) continue;
        algo_lists[k][algo_list_n[k]++] = algo_table[i];
    }
}

/* Thread contract: any thread (the table is constant). */
const weft__algo_impl_t *weft__algo_impl(weft_coll_t coll, weft_algo_t algo)
{
    for (size_t i = 0; i < ALGO_TABLE_N; i++)
        if ((int)algo_table[i]->kind == (int)coll && algo_table[i]->id == algo)
            return algo_table[i];
    return NULL;
}

/* Thread contract: any thread (the lists are built once under pthread_once). */
const weft__algo_impl_t *const *weft__algo_list(weft_coll_t coll, int *n)
{
    if ((unsigned)coll >= WEFT_COLL_COUNT) {
        if (n) *n = 0;
        return NULL;
    }
    pthread_once(&algo_lists_once, build_lists);
    if (n) *n = algo_list_n[coll];
    return algo_lists[coll];
}
