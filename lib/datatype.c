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
    [WEFT_INT16] = {"int16", 2, 1},     [WEFT_UINT16] = {"uint16", 2, 1},
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

bool weft__dtype_is_int(weft_datatype_t d) { return dtype_valid(d) && dtypes[d].integer; }

weft_status_t weft__check_dtype_op(weft_datatype_t d, weft_op_t op)
{
    if (!dtype_valid(d)) return WEFT_ERR_DATATYPE;
    if ((unsigned)op >= WEFT_OP_COUNT) return WEFT_ERR_OP;
    if ((op == WEFT_BAND || op == WEFT_BOR || op == WEFT_BXOR) && !dtypes[d].integer)
        return WEFT_ERR_DATATYPE;
    return WEFT_SUCCESS;
}


/* The collectives' kinds are their weft_coll_t values: named by weft__coll_name. */
static const char *const kind_names[WEFT__OP_KIND_COUNT] = {
    [WEFT__OP_SEND] = "send", [WEFT__OP_RECV] = "recv", [WEFT__OP_HALO] = "halo",
    [WEFT__OP_STREAM] = "stream",
};

const char *weft__opkind_name(weft__opkind_t k)
{
    if ((unsigned)k < WEFT_COLL_COUNT) return weft__coll_name((weft_coll_t)k);
    return (unsigned)k < WEFT__OP_KIND_COUNT && kind_names[k] ? kind_names[k] : "unknown";
}
