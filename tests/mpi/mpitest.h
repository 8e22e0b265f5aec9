/*
 * mpitest.h - small helpers shared by Weft's multi-rank test programs.
 *
 * A test program looks like:
 *
 *     int main(int argc, char **argv) {
 *         mt_ctx_t t;
 *         int rc = mt_init(&t, &argc, &argv);   // MPI + Weft + a world comm
 *         if (rc != 0) return rc;               // 77 (skip) or 1 (failure)
 *         ... MT_CHECK(cond, "what %d", x); mt_compare(...); ...
 *         return mt_finish(&t);                 // errors summed on rank 0
 *     }
 *
 * Every helper is for the test's main thread unless it says otherwise.
 * The value generators and float16/bfloat16 conversions here are written
 * independently of lib/reduce.c so that tests compare the library with a
 * separate reference.
 */
#ifndef WEFT_MPITEST_H
#define WEFT_MPITEST_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "weft.h"
#include "weft_mpi.h"

typedef struct mt_ctx {
    int rank, size;      /* in MPI_COMM_WORLD */
    weft_comm_t comm;    /* Weft communicator over MPI_COMM_WORLD (no stream) */
    long errors;         /* this rank's error count */
    double t0;           /* MPI_Wtime() at mt_init */
    const char *name;    /* program name for messages */
} mt_ctx_t;

/**
 * MPI_Init_thread(MPI_THREAD_MULTIPLE), weft_init, weft_comm_create on
 * MPI_COMM_WORLD. Returns 0, 77 when the test cannot run here (MPI without
 * MPI_THREAD_MULTIPLE), or 1 on failure (MPI is finalised in both cases).
 */
int mt_init(mt_ctx_t *t, int *argc, char ***argv);

/**
 * Sum the error counts on rank 0, print "No Errors" / "Found N errors" there,
 * destroy the comm, finalise Weft and MPI. Returns the exit code for main:
 * 0 when every rank had no error, 1 otherwise (the same on every rank).
 */
int mt_finish(mt_ctx_t *t);

/** Like mt_finish, but every rank must call it: exit 77 ("cannot run here"). */
int mt_skip(mt_ctx_t *t, const char *why);

/** Count one error on this rank and print it with the rank (printf format). */
void mt_error(mt_ctx_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Print on rank 0 only when MT_VERBOSE is set in the environment. */
void mt_info(mt_ctx_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Count an error with file:line and the failed condition when cond is false. */
#define MT_CHECK(t, cond, ...)                                                     \
    do {                                                                           \
        if (!(cond)) mt_check_fail((t), __FILE__, __LINE__, #cond, __VA_ARGS__);   \
    } while (0)
void mt_check_fail(mt_ctx_t *t, const char *file, int line, const char *cond, const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));

/** Check a Weft status: counts an error and prints it when st != expected. */
#define MT_STATUS(t, st, expected, what)                                           \
    mt_status_check((t), (st), (expected), (what), __FILE__, __LINE__)
int mt_status_check(mt_ctx_t *t, weft_status_t st, weft_status_t expected, const char *what,
                    const char *file, int line);

/** MPI datatype for a Weft datatype (MPI_DATATYPE_NULL for float16/bfloat16). */
MPI_Datatype mt_mpi_dtype(weft_datatype_t dt);
/** MPI op for a Weft op (AVG -> MPI_SUM). */
MPI_Op mt_mpi_op(weft_op_t op);
/** Element size in bytes (0 if unknown). */
size_t mt_dtype_size(weft_datatype_t dt);
int mt_dtype_is_int(weft_datatype_t dt);
int mt_dtype_is_float(weft_datatype_t dt);
/** Is op defined on dt (bitwise ops on integers only)? */
int mt_op_valid(weft_datatype_t dt, weft_op_t op);

/** float16 / bfloat16 bits <-> double, independent of the library. */
double mt_half_to_double(uint16_t h);
uint16_t mt_double_to_half(double d);
double mt_bf16_to_double(uint16_t h);
uint16_t mt_double_to_bf16(double d);

/** Element i of buf (any Weft dtype) as a double (exact for int32 / float*). */
double mt_get(const void *buf, size_t i, weft_datatype_t dt);
/** Store v into element i (rounded / truncated to the type). */
void mt_set(void *buf, size_t i, weft_datatype_t dt, double v);

/**
 * Fill buf with count deterministic values that depend on (rank, seed, i)
 * and are chosen for op so that p <= 64 ranks never overflow an integer type
 * nor lose exactness needlessly: SUM/AVG small signed values, PROD values in
 * {-1, 1, 2} (at most a few 2s across ranks), MIN/MAX spread values,
 * bitwise ops random bits. Floats are multiples of 1/8 (exact in half).
 */
void mt_fill(void *buf, size_t count, weft_datatype_t dt, weft_op_t op, int rank,
             uint64_t seed);

/**
 * Byte payloads for point-to-point checks: mt_fill_bytes writes n bytes that
 * depend on (src, salt, i), so that a receiver recomputes what rank src sent
 * (salt tells apart the messages of one sender: tag, round, transport);
 * mt_bad_bytes counts the bytes of buf that differ from that payload.
 */
void mt_fill_bytes(uint8_t *buf, size_t n, int src, uint32_t salt);
size_t mt_bad_bytes(const uint8_t *buf, size_t n, int src, uint32_t salt);

/**
 * Compare got with ref element by element: integers bit-exact; floats with
 * |got - ref| <= rtol * max(|ref|, 1) (rtol = 0: bitwise; NaN == NaN).
 * Counts one error (and prints up to 5 mismatches) if any differ. Returns
 * the number of mismatching elements.
 */
size_t mt_compare(mt_ctx_t *t, const void *got, const void *ref, size_t count,
                  weft_datatype_t dt, double rtol, const char *what);

/**
 * 1 if every rank holds the same `bytes` bytes in buf (collective over
 * MPI_COMM_WORLD: a checksum and the full contents of rank 0 compared).
 * Counts an error on each differing rank.
 */
int mt_same_on_all(mt_ctx_t *t, const void *buf, size_t bytes, const char *what);

/** Unit roundoff of a floating datatype (2^-24 for float32, ...), 0 for ints. */
double mt_eps(weft_datatype_t dt);

/** Seconds since mt_init. */
double mt_elapsed(const mt_ctx_t *t);

/** malloc (bytes, at least 1) filled with 0xa5; out of memory aborts the job
 * (the test cannot go on). */
void *mt_xmalloc(mt_ctx_t *t, size_t bytes);
/** A Weft call's status st checked as `what`; nb: then weft_wait(req), whose
 * status is checked too and which must release the request. 1 if all passed. */
int mt_call_done(mt_ctx_t *t, weft_status_t st, int nb, weft_request_t *req, const char *what);

/**
 * Can a hierarchical algorithm run on t->comm: does it span at least two
 * nodes with as many ranks each? The nodes are found with MPI alone (groups of
 * WEFT_NODE_RANKS consecutive ranks, else MPI_COMM_TYPE_SHARED), independently
 * of the library's topology. Collective over MPI_COMM_WORLD on the first call
 * (every rank must make it); the answer is cached.
 */
int mt_hier_runs(mt_ctx_t *t);
/**
 * Does the node's shared-memory path serve t->comm: more than one rank, all
 * on one node (found as for mt_hier_runs), WEFT_SHM not 0? Elsewhere a forced
 * shm gives way to the cost model. Collective on the first call (shared with
 * mt_hier_runs); cached.
 */
int mt_shm_runs(mt_ctx_t *t);
/**
 * Should t->comm have opened the node's shared-memory path (WEFT_SHM not 0,
 * nodes of equal size found as for mt_hier_runs): all ranks on one node
 * (the shm algorithms), or nodes of two or more ranks each (the
 * hierarchical allreduce's phases inside the nodes)? Collective on the
 * first call (shared with mt_hier_runs); cached.
 */
int mt_node_path_expected(mt_ctx_t *t);
/**
 * Has this process mapped a node segment ("memfd:weft-node" in
 * /proc/self/maps)? 1 yes, 0 no, -1 when the maps cannot be read (an error
 * is counted).
 */
int mt_node_path_mapped(mt_ctx_t *t);

/** Integer environment variable, or dflt if unset/unparsable. */
long mt_env_long(const char *name, long dflt);

#endif /* WEFT_MPITEST_H */
