/*
 * reduce.h - datatypes and element-wise reductions (lib/datatype.c,
 * lib/reduce.c). Pure functions, any thread.
 */
#ifndef WEFT_REDUCE_H
#define WEFT_REDUCE_H

#include <stdbool.h>
#include <stddef.h>

#include "weft.h"

/* ---- datatypes and reductions (lib/datatype.c, lib/reduce.c) ----------- */
size_t weft__dtype_size(weft_datatype_t dtype);
/** WEFT_SUCCESS if op is defined on dtype (bitwise ops on integers only). */
weft_status_t weft__check_dtype_op(weft_datatype_t dtype, weft_op_t op);
/** Is dtype one of the integer types? (false for an unknown one) */
bool weft__dtype_is_int(weft_datatype_t dtype);
/**
 * inout[i] = inout[i] OP in[i], i < count. AVG reduces as SUM (the caller
 * divides once at the end with weft__scale_avg). float16/bfloat16 reduce in
 * float32. Deterministic; symmetric in its two operands (a OP b == b OP a,
 * bit for bit), which keeps every rank's result identical. Any thread.
 */
void weft__reduce(void *inout, const void *in, size_t count, weft_datatype_t dtype, weft_op_t op);
/** out[i] = a[i] OP b[i] (out may alias a or b). */
void weft__reduce3(void *out, const void *a, const void *b, size_t count, weft_datatype_t dtype,
                   weft_op_t op);
/** buf[i] /= n for AVG (integers: truncating division). */
void weft__scale_avg(void *buf, size_t count, weft_datatype_t dtype, int n);
/**
 * AVG without overflow: int8/int16/int32 are summed in int64, uint8/uint16/uint32 in
 * uint64, float16 in float32 (weft__avg_wide; other types are their own).
 * weft__avg_widen converts an input to the wide type; weft__avg_narrow
 * divides the wide sum by n and converts back (integers: C's truncating
 * division, whose result always fits). Any thread.
 */
weft_datatype_t weft__avg_wide(weft_datatype_t dtype);
void weft__avg_widen(void *dst, const void *src, size_t count, weft_datatype_t dtype);
void weft__avg_narrow(void *dst, const void *src, size_t count, weft_datatype_t dtype, int n);

#endif /* WEFT_REDUCE_H */
