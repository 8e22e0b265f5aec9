/*
 * bcast_shm.c - bcast over the node's shared-memory path: ranks of one node
 * read each other's buffers directly (lib/coll/coll_shm.h, shm_common.c).
 */
#include "coll_shm.h"

WEFT__SHM_IMPL(bcast, WEFT__OP_BCAST, WEFT_ALGO_SHM);
