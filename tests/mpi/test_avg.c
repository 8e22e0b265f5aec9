/*
 * test_avg.c - WEFT_AVG where the plain sum overflows the type: int8, uint8,
 * int32, uint32 are summed in 64 bits and float16 in float32, so the average
 * is right (doc/api.md, "Averages"). References are computed here in int64 /
 * double from every rank's known input, independently of the library.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

/* Rank r's input element i: large values whose sum overflows the type. */
static double input(weft_datatype_t dt, int r, size_t i)
{
    switch (dt) {
    case WEFT_INT8: return 100 + (double)((r + (int)i) % 27);            /* up to 126 */
    case WEFT_UINT8: return 200 + (double)((r * 7 + (int)i) % 55);       /* up to 254 */
    case WEFT_INT16: return 30000 + (double)((r * 3 + (int)i) % 2700);   /* up to 32699 */
    case WEFT_UINT16: return 60000 + (double)((r * 5 + (int)i) % 5500);  /* up to 65499 */
    case WEFT_INT32: return (double)(1 << 30) + (double)(r * 1000 + (int)i); /* ~2^30 */
    case WEFT_UINT32: return 3.5e9 + (double)(r * 1000 + (int)i);        /* > 2^31 */
    case WEFT_FLOAT16: return 60000 - 32 * (double)((r + (int)i) % 8);   /* exact in f16 */
    default: return 0;
    }
}

/* The expected average (integers: truncating division of the exact sum). */
static double expect(weft_datatype_t dt, int p, size_t i)
{
    double s = 0;
    long long si = 0;
    for (int r = 0; r < p; r++) {
        s += input(dt, r, i);
        si += (long long)input(dt, r, i);
    }
    if (dt == WEFT_FLOAT16) return s / p;
    return (double)(si / p);
}

static void put(void *buf, weft_datatype_t dt, size_t i, double v)
{
    switch (dt) {
    case WEFT_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case WEFT_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case WEFT_INT16: ((int16_t *)buf)[i] = (int16_t)v; break;
    case WEFT_UINT16: ((uint16_t *)buf)[i] = (uint16_t)v; break;
    case WEFT_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case WEFT_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case WEFT_FLOAT16: mt_set(buf, i, dt, v); break;
    default: break;
    }
}

static double get(const void *buf, weft_datatype_t dt, size_t i)
{
    switch (dt) {
    case WEFT_INT8: return ((const int8_t *)buf)[i];
    case WEFT_UINT8: return ((const uint8_t *)buf)[i];
    case WEFT_INT16: return ((const int16_t *)buf)[i];
    case WEFT_UINT16: return ((const uint16_t *)buf)[i];
    case WEFT_INT32: return ((const int32_t *)buf)[i];
    case WEFT_UINT32: return ((const uint32_t *)buf)[i];
    case WEFT_FLOAT16: return mt_get(buf, i, dt);
    default: return 0;
    }
}

/* Compare out[i] (i < n) with the average of element base + i. float16:
 * within one half-precision rounding (2^-11 relative) of the exact mean. */
static void check(mt_ctx_t *t, const char *what, weft_datatype_t dt, const void *out, size_t n,
                  size_t base)
{
    for (size_t i = 0; i < n; i++) {
        double want = expect(dt, t->size, base + i), got = get(out, dt, i);
        int ok = dt == WEFT_FLOAT16 ? fabs(got - want) <= want * 0x1p-11 : got == want;
        MT_CHECK(t, ok, "%s %s [%zu]: %.17g, want %.17g", what, weft_datatype_name(dt), base + i, got,
                 want);
        if (!ok) return;
    }
}

static void run(mt_ctx_t *t, weft_datatype_t dt)
{
    const size_t n = 37, es = weft_datatype_size(dt), p = (size_t)t->size;
    char *in = calloc(n * p, es), *out = calloc(n * p, es);
    if (!in || !out) {
        mt_error(t, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n * p; i++) put(in, dt, i, input(dt, t->rank, i));
    /* allreduce: out of place, in place, nonblocking */
    MT_STATUS(t, weft_allreduce(in, out, n, dt, WEFT_AVG, t->comm), WEFT_SUCCESS, "allreduce avg");
    check(t, "allreduce", dt, out, n, 0);
    memcpy(out, in, n * es);
    MT_STATUS(t, weft_allreduce(WEFT_IN_PLACE, out, n, dt, WEFT_AVG, t->comm), WEFT_SUCCESS,
              "allreduce avg in place");
    check(t, "allreduce in place", dt, out, n, 0);
    weft_request_t r = WEFT_REQUEST_NULL;
    memset(out, 0, n * es);
    MT_STATUS(t, weft_iallreduce(in, out, n, dt, WEFT_AVG, t->comm, &r), WEFT_SUCCESS, "iallreduce");
    MT_STATUS(t, weft_wait(&r), WEFT_SUCCESS, "wait");
    check(t, "iallreduce", dt, out, n, 0);
    /* reduce_scatter: block `rank` of the n*p vector */
    memset(out, 0, n * es);
    MT_STATUS(t, weft_reduce_scatter(in, out, n, dt, WEFT_AVG, t->comm), WEFT_SUCCESS,
              "reduce_scatter avg");
    check(t, "reduce_scatter", dt, out, n, (size_t)t->rank * n);
    /* reduce to the last rank */
    const int root = t->size - 1;
    memset(out, 0, n * es);
    MT_STATUS(t, weft_reduce(in, t->rank == root ? out : NULL, n, dt, WEFT_AVG, root, t->comm),
              WEFT_SUCCESS, "reduce avg");
    if (t->rank == root) check(t, "reduce", dt, out, n, 0);
done:
    free(in);
    free(out);
}

int main(int argc, char **argv)
{
    mt_ctx_t t;
    int rc = mt_init(&t, &argc, &argv);
    if (rc != 0) return rc;
    const weft_datatype_t dts[] = {WEFT_INT8, WEFT_UINT8, WEFT_INT16, WEFT_UINT16,
                                   WEFT_INT32, WEFT_UINT32, WEFT_FLOAT16};
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) run(&t, dts[k]);
    return mt_finish(&t);
}
