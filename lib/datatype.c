/* datatype.c - datatype and operation tables and names (the MPI mappings are in
 * lib/mpi_interop.c). Any thread. */
#include <string.h>

#include "weft_internal.h"

static const struct {
    const char *name;
    size_t size;
    int integer;
} dtypes[WEFT_DATATYPE_COUNT] = {
    [WEFT_INT8] = {"int8", 1, 1},       [WEFT_UINT8] = {"uint8", 1, 1},
    [WEFT_INT32] = {"int32", 4, 1},     [WEFT_UINT32] = {"uint32", 4, 1},
    [WEFT_INT64] = {"int64", 8, 1},     [WEFT_UINT64] = {"uint64", 8, 1},
    [WEFT_FLOAT16] = {"float16", 2, 0}, [WEFT_BFLOAT16] = {"bfloat16", 2, 0},
    [WEFT_FLOAT32] = {"float32", 4, 0}, [WEFT_FLOAT64] = {"float64", 8, 0},
};

static const char *const op_names[WEFT_OP_COUNT] = {
    [WEFT_SUM] = "sum", [WEFT_PROD] = "prod", [WEFT_MIN] = "min", [WEFT_MAX] = "max",
    [WEFT_AVG] = "avg", [WEFT_BAND] = "band", [WEFT_BOR] = "bor", [WEFT_BXOR] = "bxor",
};

static int dtype_valid(weft_datatype_t d) { return (unsigned)d < WEFT_DATATYPE_COUNT; }

size_t weft__dtype_size(weft_datatype_t d) { return dtype_valid(d) ? dtypes[d].size : 0; }
size_t weft_datatype_size(weft_datatype_t d) { return weft__dtype_size(d); }
const char *weft_datatype_name(weft_datatype_t d) { return dtype_valid(d) ? dtypes[d].name : NULL; }
const char *weft_op_name(weft_op_t op) { return (unsigned)op < WEFT_OP_COUNT ? op_names[op] : NULL; }

weft_status_t weft__check_dtype_op(weft_datatype_t d, weft_op_t op)
{
    if (!dtype_valid(d)) return WEFT_ERR_DATATYPE;
    if ((unsigned)op >= WEFT_OP_COUNT) return WEFT_ERR_OP;
    if ((op == WEFT_BAND || op == WEFT_BOR || op == WEFT_BXOR) && !dtypes[d].integer)
        return WEFT_ERR_DATATYPE;
    return WEFT_SUCCESS;
}

static const char *const algo_names[WEFT_ALGO_COUNT] = {
    [WEFT_ALGO_AUTO] = "auto",
    [WEFT_ALGO_RING] = "ring",
    [WEFT_ALGO_RECURSIVE_DOUBLING] = "recursive_doubling",
    [WEFT_ALGO_RABENSEIFNER] = "rabenseifner",
    [WEFT_ALGO_TREE] = "tree",
    [WEFT_ALGO_MPI] = "mpi",
    [WEFT_ALGO_BINOMIAL] = "binomial",
    [WEFT_ALGO_SCATTER_ALLGATHER] = "scatter_allgather",
    [WEFT_ALGO_RECURSIVE_HALVING] = "recursive_halving",
    [WEFT_ALGO_PAIRWISE] = "pairwise",
    [WEFT_ALGO_BRUCK] = "bruck",
    [WEFT_ALGO_DISSEMINATION] = "dissemination",
    [WEFT_ALGO_LINEAR] = "linear",
    [WEFT_ALGO_NCCL] = "nccl",
};

const char *weft_algo_name(weft_algo_t a) { return (unsigned)a < WEFT_ALGO_COUNT ? algo_names[a] : NULL; }

weft_status_t weft_algo_from_name(const char *name, weft_algo_t *algo)
{
    if (name == NULL || algo == NULL) return WEFT_ERR_INVALID_ARG;
    for (int i = 0; i < WEFT_ALGO_COUNT; i++) {
        if (strcmp(name, algo_names[i]) == 0) {
            *algo = (weft_algo_t)i;
            return WEFT_SUCCESS;
        }
    }
    return WEFT_ERR_ALGORITHM;
}

static const char *const kind_names[WEFT__OP_KIND_COUNT] = {
    [WEFT__OP_ALLREDUCE] = "allreduce", [WEFT__OP_REDUCE_SCATTER] = "reduce_scatter",
    [WEFT__OP_ALLGATHER] = "allgather", [WEFT__OP_BCAST] = "bcast",
    [WEFT__OP_REDUCE] = "reduce",       [WEFT__OP_ALLTOALL] = "alltoall",
    [WEFT__OP_GATHER] = "gather",       [WEFT__OP_SCATTER] = "scatter",
    [WEFT__OP_BARRIER] = "barrier",     [WEFT__OP_SEND] = "send",
    [WEFT__OP_RECV] = "recv",           [WEFT__OP_HALO] = "halo",
    [WEFT__OP_STREAM] = "stream",
};

const char *weft__opkind_name(weft__opkind_t k)
{
    return (unsigned)k < WEFT__OP_KIND_COUNT && kind_names[k] ? kind_names[k] : "unknown";
}
