/*
 * allreduce_shm.c - allreduce over the node's shared-memory path: ranks of one node
 * read each other's buffers directly (lib/coll/coll_shm.h, shm_common.c).
 */
#include "coll_shm.h"

WEFT__SHM_IMPL(allreduce, WEFT__OP_ALLREDUCE, WEFT_ALGO_SHM);
