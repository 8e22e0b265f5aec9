/*
 * allgather_shm.c - allgather over the node's shared-memory path: ranks of one node
 * read each other's buffers directly (lib/coll/coll_shm.h, shm_common.c).
 */
#include "coll_shm.h"

WEFT__SHM_IMPL(allgather, WEFT__OP_ALLGATHER, WEFT_ALGO_SHM);
