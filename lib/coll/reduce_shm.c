/*
 * reduce_shm.c - reduce over the node's shared-memory path: ranks of one node
 * read each other's buffers directly (lib/coll/coll_shm.h, shm_common.c).
 */
#include "coll_shm.h"

WEFT__SHM_IMPL(reduce, WEFT__OP_REDUCE, WEFT_ALGO_SHM);
