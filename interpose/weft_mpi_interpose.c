/*
 * weft_mpi_interpose.c - libweft-mpi.so: unmodified MPI programs on Weft.
 *
 *   LD_PRELOAD=/path/libweft-mpi.so mpiexec -n N ./any_mpi_program
 *
 * Defines MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast,
 * MPI_Reduce, MPI_Alltoall, MPI_Gather, MPI_Scatter, MPI_Allgatherv,
 * MPI_Alltoallv, MPI_Gatherv, MPI_Scatterv, MPI_Reduce_scatter, MPI_Barrier,
 * their nonblocking forms, the MPI-4 large-count (_c) forms of all but the
 * barriers, MPI_Init, MPI_Init_thread, MPI_Query_thread and
 * MPI_Finalize, and with MPICH the completion calls MPI_Wait, MPI_Waitall,
 * MPI_Waitany, MPI_Waitsome, MPI_Testall, MPI_Testany and MPI_Testsome
 * (MPI's profiling interface, PMPI). A call goes to Weft when
 * Weft serves it (built-in datatypes and operations, intracommunicators,
 * contiguous data, MPI_IN_PLACE); everything else goes to its PMPI_ entry
 * unchanged. It uses only Weft's public API (weft.h, weft_mpi.h); libweft
 * calls the PMPI_ entries for its own traffic, so it never re-enters here.
 * doc/mpi_interposition.md is the contract; the rules in short:
 *
 *  - One Weft communicator per MPI communicator, created on its first served
 *    call (collective: weft_comm_create), kept as an attribute of a keyval of
 *    our own (not copied by MPI_Comm_dup) and destroyed by the attribute's
 *    delete callback when the program frees the communicator, or in
 *    MPI_Finalize (in creation order) before weft_finalize and PMPI_Finalize.
 *  - The decision to serve a call is taken from the call's own arguments on
 *    each rank, and MPI's rules make those agree across ranks for reductions
 *    (same count, datatype, op). For the data-moving collectives each rank
 *    looks at its own type layout: a program that describes one message with
 *    a contiguous datatype on one rank and a non-contiguous one on another
 *    would split between Weft and MPI (WEFT_MPI_CALLS limits what is served).
 *  - Nonblocking calls return generalized requests, so every MPI completion
 *    call works: with MPICH (MPIX_Grequest_start, started ahead) the
 *    interposed MPI_Wait/MPI_Waitall wait on ours with weft_wait and, done
 *    without error, hand back MPI_REQUEST_NULL at once (the MPI request is
 *    completed and freed later, off the program's path), MPI_Waitany/
 *    MPI_Waitsome test them and sleep on a doorbell Weft's completion
 *    callback rings (bounded pauses when MPI requests are mixed in),
 *    MPI_Testall/Testany/Testsome test them with weft_test (MPI_Test is
 *    MPICH's, which polls them), and MPICH's own call then does the rest;
 *    elsewhere Weft's completion callback completes them
 *    (weft_request_on_complete + MPI_Grequest_complete).
 *  - A Weft failure is returned as an MPI error code of the matching class
 *    through the communicator's error handler (MPI_Comm_call_errhandler).
 *  - WEFT_MPI_VERBOSE=1: at MPI_Finalize each rank prints, per call site,
 *    how many calls Weft served and how many fell through to MPI, and why.
 *
 * Thread contract: as MPI's with MPI_THREAD_MULTIPLE (Weft needs it, so MPI
 * is always initialised with it underneath); collectives on one
 * communicator ordered by the program, as MPI requires.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>
#include <weft_mpi.h>

/* With MPICH, requests of ours are completed by poll and wait functions
 * (MPIX_Grequest_start) and the completion calls; elsewhere by Weft's
 * completion callback (below, "nonblocking calls"). */
#if defined(MPICH) && !defined(WMPI_COMPLETE_ON_ENGINE)
#define WMPI_POLL 1
#else
#define WMPI_POLL 0
#endif

#define WMPI_EXPORT __attribute__((visibility("default")))
#define WMPI_LIKELY(x) __builtin_expect(!!(x), 1)
#define WMPI_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- the intercepted calls and the reasons for falling through ------------ */
enum wmpi_call {
    C_ALLREDUCE, C_IALLREDUCE, C_REDUCE_SCATTER_BLOCK, C_IREDUCE_SCATTER_BLOCK,
    C_ALLGATHER, C_IALLGATHER, C_BCAST, C_IBCAST, C_REDUCE, C_IREDUCE,
    C_ALLTOALL, C_IALLTOALL, C_GATHER, C_IGATHER, C_SCATTER, C_ISCATTER,
    C_ALLGATHERV, C_IALLGATHERV, C_ALLTOALLV, C_IALLTOALLV,
    C_GATHERV, C_IGATHERV, C_SCATTERV, C_ISCATTERV, C_REDUCE_SCATTER, C_IREDUCE_SCATTER,
    C_BARRIER, C_IBARRIER, C_COUNT
};
static const char *const call_names[C_COUNT] = {
    "MPI_Allreduce", "MPI_Iallreduce", "MPI_Reduce_scatter_block", "MPI_Ireduce_scatter_block",
    "MPI_Allgather", "MPI_Iallgather", "MPI_Bcast", "MPI_Ibcast", "MPI_Reduce", "MPI_Ireduce",
    "MPI_Alltoall", "MPI_Ialltoall", "MPI_Gather", "MPI_Igather", "MPI_Scatter", "MPI_Iscatter",
    "MPI_Allgatherv", "MPI_Iallgatherv", "MPI_Alltoallv", "MPI_Ialltoallv",
    "MPI_Gatherv", "MPI_Igatherv", "MPI_Scatterv", "MPI_Iscatterv",
    "MPI_Reduce_scatter", "MPI_Ireduce_scatter", "MPI_Barrier", "MPI_Ibarrier"};
/* The short names WEFT_MPI_CALLS takes ("allreduce" covers MPI_Iallreduce too; a
 * name is matched whole: "reduce_scatter" is not "reduce_scatter_block"). */
static const char *const call_keys[C_COUNT / 2] = {
    "allreduce", "reduce_scatter_block", "allgather", "bcast", "reduce", "alltoall", "gather",
    "scatter", "allgatherv", "alltoallv", "gatherv", "scatterv", "reduce_scatter", "barrier"};
_Static_assert(C_COUNT % 2 == 0 && C_COUNT / 2 <= 32, "a blocking and a nonblocking form per key");

enum wmpi_reason {
    R_WEFT = 0,      /* served by Weft */
    R_INACTIVE,      /* Weft is not running (before MPI_Init, after MPI_Finalize, failed start) */
    R_DISABLED,      /* not in WEFT_MPI_CALLS */
    R_BAD_COMM,      /* MPI_COMM_NULL or not a communicator: MPI reports it */
    R_INTERCOMM,
    R_COMM_CREATE,   /* weft_comm_create failed on this communicator */
    R_REDUCE_TYPE,   /* not a built-in datatype Weft reduces */
    R_OP,            /* user-defined op, or one Weft lacks (MPI_LAND, MPI_MAXLOC, ...) */
    R_OP_TYPE,       /* op not defined on the datatype (MPI reports it) */
    R_LAYOUT,        /* datatype not contiguous (derived with gaps, lb != 0, ...) */
    R_SIZES,         /* send and receive blocks differ in size (MPI reports it) */
    R_ARG,           /* negative count, root out of range, NULL buffer: MPI reports it */
    R_COUNT
};
static const char *const reason_text[R_COUNT] = {
    "Weft", "Weft not running", "not in WEFT_MPI_CALLS", "invalid communicator",
    "intercommunicator", "Weft communicator could not be created",
    "datatype not reduced by Weft", "operation not served by Weft (user-defined or missing)",
    "operation not defined on the datatype", "non-contiguous datatype",
    "send and receive sizes differ", "invalid argument (left to MPI to report)"};

/* ---- global state ---------------------------------------------------------------- */
/* One communicator's Weft side; the attribute value of wmpi_keyval. */
typedef struct wmpi_comm {
    weft_comm_t wc;          /* NULL: the communicator is served by MPI (reason) */
    int reason;
    MPI_Comm mpi;            /* the program's communicator */
    int rank, size;          /* this rank's and the size in it (fixed for its life) */
    atomic_int pending;      /* nonblocking operations whose Weft request is not released */
    int callback;            /* WMPI_POLL: greq_comm_done is wc's completion callback */
    unsigned long seq;       /* creation order, for MPI_Finalize */
    struct wmpi_comm *next;  /* live list (creation order) or zombie list */
} wmpi_comm_t;

/* Written by MPI_Init, MPI_Init_thread and MPI_Finalize on the main thread while no other thread
 * makes MPI calls (MPI's own rule for those calls); read everywhere. */
/* What every served call reads, on one cache line of its own (separate
 * variables landed on two lines and two pages). */
static struct {
    _Alignas(64) atomic_int active; /* Weft is up and serving calls */
    int verbose;
    unsigned enabled;               /* bit per call_keys entry */
    _Atomic(wmpi_comm_t *) world;   /* MPI_COMM_WORLD's entry: the common case, no lookup */
} wmpi_hot = {.enabled = (1u << (C_COUNT / 2)) - 1};
static int wmpi_keyval = MPI_KEYVAL_INVALID;
static int wmpi_asked_level = MPI_THREAD_SINGLE; /* what the program asked for */

static pthread_mutex_t wmpi_list_lock = PTHREAD_MUTEX_INITIALIZER;
static wmpi_comm_t *wmpi_live;           /* entries of live communicators, creation order */
static wmpi_comm_t *wmpi_zombies;        /* freed with operations in flight: destroyed at finalize */
static unsigned long wmpi_next_seq;

static void wmpi_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void wmpi_log(const char *fmt, ...)
{
    int rank = -1;
    int init = 0, fin = 0;
    if (PMPI_Initialized(&init) == MPI_SUCCESS && init && PMPI_Finalized(&fin) == MPI_SUCCESS &&
        !fin)
        (void)PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[weft-mpi %d] %s\n", rank, line);
}

/* ---- WEFT_MPI_VERBOSE: per call site counts ----------------------------------------- */
#define SITE_SLOTS 1024
typedef struct site {
    const void *ra;      /* return address in the caller: the call site */
    int call, reason;
    unsigned long n;
} site_t;
/* SITE_SLOTS entries, allocated only when WEFT_MPI_VERBOSE asks (read_env):
 * 24 KiB of static storage would put a page between the globals that every
 * served call reads. */
static site_t *sites;
static unsigned long sites_lost;
static pthread_mutex_t sites_lock = PTHREAD_MUTEX_INITIALIZER;

static void site_note(const void *ra, int call, int reason)
{
    uintptr_t h = ((uintptr_t)ra >> 2) * 31u + (uintptr_t)call * 7u + (uintptr_t)reason;
    pthread_mutex_lock(&sites_lock);
    for (unsigned i = 0; i < SITE_SLOTS; i++) {
        site_t *s = &sites[(h + i) % SITE_SLOTS];
        if (s->n == 0) {
            s->ra = ra;
            s->call = call;
            s->reason = reason;
        }
        if (s->ra == ra && s->call == call && s->reason == reason) {
            s->n++;
            pthread_mutex_unlock(&sites_lock);
            return;
        }
    }
    sites_lost++;
    pthread_mutex_unlock(&sites_lock);
}

static int site_cmp(const void *a, const void *b)
{
    const site_t *x = a, *y = b;
    if (x->n == 0 || y->n == 0) return (x->n == 0) - (y->n == 0);
    if (x->ra != y->ra) return (uintptr_t)x->ra < (uintptr_t)y->ra ? -1 : 1;
    if (x->call != y->call) return x->call - y->call;
    return x->reason - y->reason;
}

/* Printed at MPI_Finalize, one line per (site, call, outcome). */
static void sites_report(void)
{
    if (sites == NULL) return;
    pthread_mutex_lock(&sites_lock);
    qsort(sites, SITE_SLOTS, sizeof sites[0], site_cmp);
    for (unsigned i = 0; i < SITE_SLOTS && sites[i].n > 0; i++) {
        const site_t *s = &sites[i];
        Dl_info di;
        const char *obj = "?", *sym = NULL;
        uintptr_t off = (uintptr_t)s->ra;
        if (dladdr(s->ra, &di) != 0) {
            if (di.dli_fname) {
                const char *slash = strrchr(di.dli_fname, '/');
                obj = slash ? slash + 1 : di.dli_fname;
            }
            if (di.dli_sname) {
                sym = di.dli_sname;
                off = (uintptr_t)s->ra - (uintptr_t)di.dli_saddr;
            } else {
                off = (uintptr_t)s->ra - (uintptr_t)di.dli_fbase;
            }
        }
        char where[256];
        if (sym) snprintf(where, sizeof where, "%s(%s+0x%lx)", obj, sym, (unsigned long)off);
        else snprintf(where, sizeof where, "%s(+0x%lx)", obj, (unsigned long)off);
        if (s->reason == R_WEFT)
            wmpi_log("%s at %s: %lu to Weft", call_names[s->call], where, s->n);
        else
            wmpi_log("%s at %s: %lu to MPI (%s)", call_names[s->call], where, s->n,
                     reason_text[s->reason]);
    }
    if (sites_lost) wmpi_log("%lu calls not counted (call site table full)", sites_lost);
    memset(sites, 0, SITE_SLOTS * sizeof sites[0]);
    sites_lost = 0;
    pthread_mutex_unlock(&sites_lock);
}

#define NOTE(call, reason)                                                         \
    do {                                                                           \
        if (WMPI_UNLIKELY(wmpi_hot.verbose))                                           \
            site_note(__builtin_extract_return_addr(__builtin_return_address(0)),  \
                      (call), (reason));                                           \
    } while (0)

/* ---- errors ------------------------------------------------------------------------------ */
static int mpi_class_of(weft_status_t st)
{
    switch (st) {
    case WEFT_SUCCESS: return MPI_SUCCESS;
    case WEFT_ERR_INVALID_ARG: return MPI_ERR_ARG;
    case WEFT_ERR_DATATYPE: return MPI_ERR_TYPE;
    case WEFT_ERR_OP: return MPI_ERR_OP;
    case WEFT_ERR_COUNT_OVERFLOW: return MPI_ERR_COUNT;
    case WEFT_ERR_INVALID_COMM: return MPI_ERR_COMM;
    case WEFT_ERR_NO_MEMORY: return MPI_ERR_NO_MEM;
    case WEFT_ERR_INVALID_REQUEST: return MPI_ERR_REQUEST;
    case WEFT_ERR_INTERNAL: return MPI_ERR_INTERN;
    default: return MPI_ERR_OTHER;
    }
}

/* A Weft failure on comm, as MPI reports one: through comm's error handler
 * (which aborts under MPI_ERRORS_ARE_FATAL), then the code is returned. */
static int weft_failed(MPI_Comm comm, int call, weft_status_t st)
{
    int code = mpi_class_of(st);
    wmpi_log("%s: Weft failed: %s (%s); returned as MPI error class %d", call_names[call],
             weft_status_name(st), weft_strerror(st), code);
    int rc = PMPI_Comm_call_errhandler(comm, code);
    if (rc != MPI_SUCCESS) wmpi_log("MPI_Comm_call_errhandler failed (%d)", rc);
    return code;
}

/* ---- datatypes and operations --------------------------------------------------------- */
typedef struct { MPI_Datatype mpi; weft_datatype_t weft; } dt_map_t;
static dt_map_t dt_map[24];
static int dt_map_n;

static void dt_add(MPI_Datatype t, weft_datatype_t w, size_t bytes)
{
    int sz = 0;
    if (t == MPI_DATATYPE_NULL || PMPI_Type_size(t, &sz) != MPI_SUCCESS || (size_t)sz != bytes)
        return; /* e.g. MPI_LONG where long is not 8 bytes */
    dt_map[dt_map_n].mpi = t;
    dt_map[dt_map_n].weft = w;
    dt_map_n++;
}

/* The named (predefined) types whose elements lie densely (size == extent ==
 * true extent, lower bounds 0), with their sizes: what the data-moving calls
 * take without asking MPI. The reduction types first (dt_map, most common
 * first), then the others a program moves (MPI_CHAR above all: OSU's
 * benchmarks move MPI_CHAR, and asking MPICH for its size and both extents
 * made up about a third of such a call's issue). Named types are never freed, so their
 * handles stay theirs; a derived type's handle may be reused after
 * MPI_Type_free and is always asked about. */
/* Open-addressed by handle (at most half full): a served call finds its
 * type in one or two probes, one cache line. */
#define MV_SLOTS 128
typedef struct { MPI_Datatype mpi; size_t size; } mv_map_t; /* size 0: empty slot */
static mv_map_t mv_map[MV_SLOTS];
static int mv_map_n;

static size_t mv_home(MPI_Datatype t)
{
    uint64_t k = 0;
    memcpy(&k, &t, sizeof t < sizeof k ? sizeof t : sizeof k);
    return (size_t)((k * 0x9E3779B97F4A7C15ull) >> 57) & (MV_SLOTS - 1);
}

/* The size of named type t, or 0 when it is not in the map. */
static size_t mv_size(MPI_Datatype t)
{
    for (size_t j = mv_home(t); mv_map[j].size != 0; j = (j + 1) & (MV_SLOTS - 1))
        if (mv_map[j].mpi == t) return mv_map[j].size;
    return 0;
}

static void mv_add(MPI_Datatype t)
{
    int sz = 0;
    MPI_Aint lb = 0, ext = 0, tlb = 0, text = 0;
    if (t == MPI_DATATYPE_NULL || 2 * (mv_map_n + 1) > MV_SLOTS) return;
    if (mv_size(t) != 0) return; /* an alias (MPI_INT32_T may be MPI_INT) */
    if (PMPI_Type_size(t, &sz) != MPI_SUCCESS || sz <= 0 ||
        PMPI_Type_get_extent(t, &lb, &ext) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(t, &tlb, &text) != MPI_SUCCESS || lb != 0 || tlb != 0 ||
        ext != (MPI_Aint)sz || text != (MPI_Aint)sz)
        return; /* e.g. MPI_LONG_DOUBLE where its extent is padded */
    size_t j = mv_home(t);
    while (mv_map[j].size != 0) j = (j + 1) & (MV_SLOTS - 1);
    mv_map[j].mpi = t;
    mv_map[j].size = (size_t)sz;
    mv_map_n++;
}

/* After dt_map_init. */
static void mv_map_init(void)
{
    mv_map_n = 0;
    memset(mv_map, 0, sizeof mv_map);
    for (int i = 0; i < dt_map_n; i++) mv_add(dt_map[i].mpi);
    const MPI_Datatype more[] = {
        MPI_CHAR, MPI_WCHAR, MPI_LONG_DOUBLE, MPI_C_BOOL, MPI_C_FLOAT_COMPLEX,
        MPI_C_DOUBLE_COMPLEX, MPI_C_LONG_DOUBLE_COMPLEX, MPI_AINT, MPI_OFFSET, MPI_COUNT,
        MPI_PACKED, MPI_CXX_BOOL, MPI_CXX_FLOAT_COMPLEX, MPI_CXX_DOUBLE_COMPLEX,
        MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT, MPI_2INT, MPI_SHORT_INT};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) mv_add(more[i]);
}

/* The built-in types Weft reduces, most common first. After PMPI_Init. */
static void dt_map_init(void)
{
    dt_map_n = 0;
    dt_add(MPI_FLOAT, WEFT_FLOAT32, 4);
    dt_add(MPI_DOUBLE, WEFT_FLOAT64, 8);
    dt_add(MPI_INT, WEFT_INT32, 4);
    dt_add(MPI_LONG, WEFT_INT64, 8);
    dt_add(MPI_INT32_T, WEFT_INT32, 4);
    dt_add(MPI_INT64_T, WEFT_INT64, 8);
    dt_add(MPI_UNSIGNED, WEFT_UINT32, 4);
    dt_add(MPI_UINT32_T, WEFT_UINT32, 4);
    dt_add(MPI_UNSIGNED_LONG, WEFT_UINT64, 8);
    dt_add(MPI_UINT64_T, WEFT_UINT64, 8);
    dt_add(MPI_LONG_LONG, WEFT_INT64, 8);
    dt_add(MPI_UNSIGNED_LONG_LONG, WEFT_UINT64, 8);
    dt_add(MPI_SHORT, WEFT_INT16, 2);
    dt_add(MPI_INT16_T, WEFT_INT16, 2);
    dt_add(MPI_UNSIGNED_SHORT, WEFT_UINT16, 2);
    dt_add(MPI_UINT16_T, WEFT_UINT16, 2);
    dt_add(MPI_INT8_T, WEFT_INT8, 1);
    dt_add(MPI_SIGNED_CHAR, WEFT_INT8, 1);
    dt_add(MPI_UINT8_T, WEFT_UINT8, 1);
    dt_add(MPI_UNSIGNED_CHAR, WEFT_UINT8, 1);
    dt_add(MPI_BYTE, WEFT_UINT8, 1); /* bitwise operations only (below) */
    mv_map_init();
}

/* The reason a reduction (count, type, op) is not Weft's, or R_WEFT with its
 * Weft datatype and op. Depends only on arguments MPI requires to be the same
 * on every rank. */
static int reduce_args(MPI_Count count, MPI_Datatype t, MPI_Op op, weft_datatype_t *wt, weft_op_t *wop)
{
    if (count < 0) return R_ARG;
    int i = 0;
    while (i < dt_map_n && dt_map[i].mpi != t) i++;
    if (i == dt_map_n) return R_REDUCE_TYPE;
    weft_datatype_t w = dt_map[i].weft;
    int is_float = w == WEFT_FLOAT32 || w == WEFT_FLOAT64;
    int bitwise = 0;
    if (op == MPI_SUM) *wop = WEFT_SUM;
    else if (op == MPI_MAX) *wop = WEFT_MAX;
    else if (op == MPI_MIN) *wop = WEFT_MIN;
    else if (op == MPI_PROD) *wop = WEFT_PROD;
    else if (op == MPI_BAND) { *wop = WEFT_BAND; bitwise = 1; }
    else if (op == MPI_BOR) { *wop = WEFT_BOR; bitwise = 1; }
    else if (op == MPI_BXOR) { *wop = WEFT_BXOR; bitwise = 1; }
    else return R_OP;
    if (bitwise && is_float) return R_OP_TYPE;
    if (!bitwise && t == MPI_BYTE) return R_OP_TYPE;
    *wt = w;
    return R_WEFT;
}

/* Bytes of count elements of t if they lie contiguously from the buffer's
 * address (size == extent == true extent, both lower bounds 0): R_WEFT, else
 * the reason. */
static int contig_bytes(MPI_Count count, MPI_Datatype t, size_t *bytes)
{
    if (count < 0) return R_ARG;
    size_t sz = mv_size(t); /* the named types without asking MPI */
    if (sz == 0) {
        int isz = 0;
        MPI_Aint lb = 0, ext = 0, tlb = 0, text = 0;
        if (t == MPI_DATATYPE_NULL || PMPI_Type_size(t, &isz) != MPI_SUCCESS ||
            PMPI_Type_get_extent(t, &lb, &ext) != MPI_SUCCESS ||
            PMPI_Type_get_true_extent(t, &tlb, &text) != MPI_SUCCESS)
            return R_ARG;
        if (lb != 0 || tlb != 0 || ext != (MPI_Aint)isz || text != (MPI_Aint)isz) return R_LAYOUT;
        sz = (size_t)isz;
    }
    if (sz > 0 && (uint64_t)count > SIZE_MAX / sz) return R_ARG; /* MPI's own call reports it */
    *bytes = (size_t)count * sz;
    return R_WEFT;
}

/* ---- communicators ---------------------------------------------------------------------- */
static int delete_fn(MPI_Comm comm, int keyval, void *attr, void *extra);

/* Unlink e from the live list. */
static void live_remove(wmpi_comm_t *e)
{
    pthread_mutex_lock(&wmpi_list_lock);
    for (wmpi_comm_t **p = &wmpi_live; *p; p = &(*p)->next) {
        if (*p == e) {
            *p = e->next;
            break;
        }
    }
    e->next = NULL;
    pthread_mutex_unlock(&wmpi_list_lock);
}

/* Create comm's entry: collective over comm (weft_comm_create), on the first
 * intercepted call on it, which every rank makes in the same order. */
#if WMPI_POLL
static void greq_comm_setup(wmpi_comm_t *e);
#endif

static int comm_create(MPI_Comm comm, wmpi_comm_t **out)
{
    int inter = 0, rank = 0, size = 0;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS ||
        PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS || PMPI_Comm_size(comm, &size) != MPI_SUCCESS)
        return R_BAD_COMM;
    /* one cache line: every served call reads it */
    wmpi_comm_t *e = aligned_alloc(64, (sizeof *e + 63) / 64 * 64);
    if (e != NULL) memset(e, 0, sizeof *e);
    if (e == NULL) {
        wmpi_log("out of memory for a communicator's entry: the call goes to MPI");
        return R_COMM_CREATE;
    }
    e->mpi = comm;
    e->rank = rank;
    e->size = size;
    atomic_init(&e->pending, 0);
    if (inter) {
        e->reason = R_INTERCOMM;
    } else {
        weft_status_t st = weft_comm_create(comm, NULL, &e->wc);
        if (st != WEFT_SUCCESS) {
            wmpi_log("weft_comm_create failed: %s; this communicator's calls go to MPI",
                     weft_strerror(st));
            e->wc = NULL;
            e->reason = R_COMM_CREATE;
        }
#if WMPI_POLL
        if (e->wc != NULL) greq_comm_setup(e);
#endif
    }
    int rc = PMPI_Comm_set_attr(comm, wmpi_keyval, e);
    if (rc != MPI_SUCCESS) {
        /* Every rank got here with the same comm; a failing set_attr is local,
         * so serve this one call and forget the Weft side afterwards would
         * split the ranks. Keep the entry out of MPI and fall through. */
        wmpi_log("MPI_Comm_set_attr failed (%d): this communicator's calls go to MPI", rc);
        if (e->wc != NULL) (void)weft_comm_destroy(e->wc);
        free(e);
        return R_COMM_CREATE;
    }
    pthread_mutex_lock(&wmpi_list_lock);
    e->seq = wmpi_next_seq++;
    wmpi_comm_t **p = &wmpi_live;
    while (*p) p = &(*p)->next;
    *p = e;
    pthread_mutex_unlock(&wmpi_list_lock);
    if (comm == MPI_COMM_WORLD) atomic_store_explicit(&wmpi_hot.world, e, memory_order_release);
    *out = e;
    return e->wc != NULL ? R_WEFT : e->reason;
}

/* R_WEFT when Weft runs and serves this call, else the reason. */
static inline int call_check(int call)
{
    if (WMPI_UNLIKELY(!atomic_load_explicit(&wmpi_hot.active, memory_order_acquire)))
        return R_INACTIVE;
    if (WMPI_UNLIKELY(!(wmpi_hot.enabled & (1u << (call / 2))))) return R_DISABLED;
    return R_WEFT;
}

/* The entry serving comm (R_WEFT) or the reason the call goes to MPI. After
 * call_check said R_WEFT. */
static inline int comm_lookup(MPI_Comm comm, wmpi_comm_t **out)
{
    /* acquire: pairs with comm_create's release store of a complete entry */
    wmpi_comm_t *e = comm == MPI_COMM_WORLD
                         ? atomic_load_explicit(&wmpi_hot.world, memory_order_acquire) : NULL;
    if (e == NULL) {
        if (comm == MPI_COMM_NULL) return R_BAD_COMM;
        int flag = 0;
        void *v = NULL;
        if (PMPI_Comm_get_attr(comm, wmpi_keyval, &v, &flag) != MPI_SUCCESS) return R_BAD_COMM;
        if (!flag) return comm_create(comm, out);
        e = v;
    }
    *out = e;
    return e->wc != NULL ? R_WEFT : e->reason;
}

/* Destroy e's Weft communicator and free e. Collective over the
 * communicator (weft_comm_destroy is), so every rank must take the same way:
 * the ranks agree (on Weft's own duplicate, with MPI) whether any of them
 * still has a nonblocking call's completion to run on it (the program may
 * free a communicator before it waits). If so, every rank keeps it as a
 * zombie, destroyed in MPI_Finalize in the order the zombies were made. */
static void comm_retire(wmpi_comm_t *e)
{
    /* A program that also uses Weft itself may have called weft_finalize,
     * which freed every Weft communicator, ours included. */
    if (e->wc == NULL || !weft_initialized()) {
        free(e);
        return;
    }
    MPI_Comm dup = MPI_COMM_NULL;
    int mine = atomic_load_explicit(&e->pending, memory_order_acquire) > 0, any = 1;
    if (weft_comm_get_mpi(e->wc, &dup) != WEFT_SUCCESS ||
        PMPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, dup) != MPI_SUCCESS) {
        wmpi_log("could not agree on a freed communicator's operations: Weft's side stays "
                 "until MPI_Finalize");
        any = 1;
    }
    if (any) {
        e->next = NULL;
        pthread_mutex_lock(&wmpi_list_lock);
        wmpi_comm_t **p = &wmpi_zombies;
        while (*p) p = &(*p)->next;
        *p = e;
        pthread_mutex_unlock(&wmpi_list_lock);
        return;
    }
    weft_status_t st = weft_comm_destroy(e->wc);
    if (st != WEFT_SUCCESS) wmpi_log("weft_comm_destroy failed: %s", weft_strerror(st));
    free(e);
}

/* The attribute's delete callback: MPI_Comm_free of the program's
 * communicator, or our own MPI_Comm_delete_attr in MPI_Finalize. */
static int delete_fn(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)keyval;
    (void)extra;
    wmpi_comm_t *e = attr;
    if (comm == MPI_COMM_WORLD) atomic_store_explicit(&wmpi_hot.world, NULL, memory_order_release);
    live_remove(e);
    comm_retire(e);
    return MPI_SUCCESS;
}

/* ---- init and finalize ------------------------------------------------------------------ */
static void read_env(void)
{
    const char *v = getenv("WEFT_MPI_VERBOSE");
    wmpi_hot.verbose = v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
    if (wmpi_hot.verbose && sites == NULL && (sites = calloc(SITE_SLOTS, sizeof *sites)) == NULL) {
        wmpi_log("out of memory for WEFT_MPI_VERBOSE's call sites: not counted");
        wmpi_hot.verbose = 0;
    }
    v = getenv("WEFT_MPI_CALLS");
    if (v == NULL || v[0] == '\0' || strcmp(v, "all") == 0) return;
    unsigned mask = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int i = 0; i < C_COUNT / 2; i++) {
            if (strcmp(tok, call_keys[i]) == 0) {
                mask |= 1u << i;
                found = 1;
            }
        }
        if (strcmp(tok, "none") == 0) found = 1;
        if (!found) wmpi_log("WEFT_MPI_CALLS: unknown call '%s' ignored", tok);
    }
    wmpi_hot.enabled = mask;
}

/* MPI underneath with MPI_THREAD_MULTIPLE, then Weft. A failure to start Weft
 * leaves every call to MPI (and says so); only MPI's own failure is returned. */
static int wmpi_start(int *argc, char ***argv, int required, int *provided)
{
    int got = MPI_THREAD_SINGLE;
    int rc = PMPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &got);
    if (rc != MPI_SUCCESS) return rc;
    wmpi_asked_level = required;
    if (provided) *provided = required < got ? required : got;
    read_env();
    dt_map_init();
    if (got < MPI_THREAD_MULTIPLE) {
        wmpi_log("MPI gives thread level %d, Weft needs MPI_THREAD_MULTIPLE: every call goes to MPI",
                 got);
        return MPI_SUCCESS;
    }
    rc = PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_fn, &wmpi_keyval, NULL);
    if (rc != MPI_SUCCESS) {
        wmpi_log("MPI_Comm_create_keyval failed (%d): every call goes to MPI", rc);
        return MPI_SUCCESS;
    }
    weft_status_t st = weft_init(NULL);
    if (st != WEFT_SUCCESS) {
        wmpi_log("weft_init failed: %s: every call goes to MPI", weft_strerror(st));
        (void)PMPI_Comm_free_keyval(&wmpi_keyval);
        return MPI_SUCCESS;
    }
    if (wmpi_hot.verbose) wmpi_log("Weft %s serves this process's MPI collectives", weft_version_string());
    atomic_store_explicit(&wmpi_hot.active, 1, memory_order_release);
    return MPI_SUCCESS;
}

WMPI_EXPORT int MPI_Init(int *argc, char ***argv)
{
    return wmpi_start(argc, argv, MPI_THREAD_SINGLE, NULL);
}

WMPI_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    return wmpi_start(argc, argv, required, provided);
}

/* The level the program asked for (never more than MPI gives). */
WMPI_EXPORT int MPI_Query_thread(int *provided)
{
    int got = 0;
    int rc = PMPI_Query_thread(&got);
    if (rc == MPI_SUCCESS && provided != NULL)
        *provided = wmpi_asked_level < got ? wmpi_asked_level : got;
    return rc;
}

#if WMPI_POLL
static void keeper_stop(void);
static void greq_housekeep(int fill);
#endif

WMPI_EXPORT int MPI_Finalize(void)
{
    if (atomic_load_explicit(&wmpi_hot.active, memory_order_acquire)) {
        /* Weft's communicators go before weft_finalize and PMPI_Finalize
         * (which deletes MPI_COMM_WORLD's attributes itself, too late):
         * delete our attribute on every communicator still alive, in the
         * order they were created (collective, the same on every rank). */
        for (;;) {
            pthread_mutex_lock(&wmpi_list_lock);
            wmpi_comm_t *e = wmpi_live;
            pthread_mutex_unlock(&wmpi_list_lock);
            if (e == NULL) break;
            int rc = PMPI_Comm_delete_attr(e->mpi, wmpi_keyval);
            if (rc != MPI_SUCCESS) { /* delete_fn did not run: do its work */
                wmpi_log("MPI_Comm_delete_attr failed (%d)", rc);
                live_remove(e);
                comm_retire(e);
            }
        }
        pthread_mutex_lock(&wmpi_list_lock);
        wmpi_comm_t *z = wmpi_zombies;
        wmpi_zombies = NULL;
        pthread_mutex_unlock(&wmpi_list_lock);
        /* weft_comm_destroy waits for their operations; the callbacks that
         * touch e have run once weft_finalize joined the engine */
        for (wmpi_comm_t *e = z; e && weft_initialized(); e = e->next) {
            weft_status_t st = weft_comm_destroy(e->wc);
            if (st != WEFT_SUCCESS) wmpi_log("weft_comm_destroy failed: %s", weft_strerror(st));
        }
        if (wmpi_hot.verbose) sites_report();
        atomic_store_explicit(&wmpi_hot.active, 0, memory_order_release);
        if (weft_initialized()) { /* else the program finalised Weft itself */
            weft_status_t st = weft_finalize();
            if (st != WEFT_SUCCESS) wmpi_log("weft_finalize: %s", weft_strerror(st));
        }
        while (z) {
            wmpi_comm_t *n = z->next;
            free(z);
            z = n;
        }
#if WMPI_POLL
        keeper_stop();     /* no callback runs any more: nothing wakes the keeper */
        greq_housekeep(0); /* the retired and the ready requests */
#endif
        int rc = PMPI_Comm_free_keyval(&wmpi_keyval);
        if (rc != MPI_SUCCESS) wmpi_log("MPI_Comm_free_keyval failed (%d)", rc);
    } else if (wmpi_hot.verbose) {
        sites_report();
    }
    return PMPI_Finalize();
}

/* ---- nonblocking calls: generalized requests ------------------------------------------ */
/* One nonblocking call served by Weft: the MPI request the program holds is
 * a generalized request. With MPICH (MPIX_Grequest_start), MPI_Test and
 * friends call greq_poll and MPI_Wait/MPI_Waitall call greq_wait on the
 * program's thread: they test or wait on the Weft request there (weft_test,
 * weft_wait, which also step the operation on that thread, as a Weft program
 * waiting on it does) and complete the MPI request. Elsewhere Weft's
 * completion callback (weft_request_on_complete) completes it from the engine
 * thread with MPI_Grequest_complete (also with -DWMPI_COMPLETE_ON_ENGINE).
 * Why not the callback with MPICH: measured here (doc/mpi_interposition.md),
 * a 64 KiB ialltoall + MPI_Wait took 17-50 ms that way against about 10 us
 * for the blocking call on the same run: the operation then moves only when
 * the engine thread gets a core, while the waiting thread spins in MPICH.
 * Either way the engine progresses the operation while the program computes. */

typedef struct greq {
    /* Incarnation: changes when the MPI request is freed (greq_release), kept
     * when the record is reused (greq_zero), so that a thread's cache of
     * the requests it issued (greq_recent) knows a record that moved on.
     * Records are one cache line each (greq_new): a served call and its wait
     * touch it after a device-style compute, when every line is a miss. */
    _Alignas(64) _Atomic unsigned gen;
    weft_request_t wr;
    MPI_Request mpi;
    weft_status_t st;   /* the operation's status, written before MPI_Grequest_complete */
    _Atomic int completed; /* completed for MPI's view (MPI_Grequest_complete called, or retired) */
    unsigned char armed;   /* WMPI_POLL: the completion callback is registered (once) */
    unsigned char slot;    /* WMPI_POLL: SLOT_NONE, SLOT_RESERVED or SLOT_TRACKED (in the table) */
    unsigned char counted; /* WMPI_POLL: counted in greq_nlive (greq_lock) */
    /* WMPI_POLL: who releases the Weft request (greq_weft). The completion
     * callback does when it runs first (on the engine thread while the
     * program computes), so that the program's wait finds it released. */
    _Atomic int claim;    /* 1: a thread is releasing (or testing) wr */
    _Atomic int released; /* wr is released, its status in wst */
    weft_status_t wst;
    _Atomic int refs;     /* the MPI request's, and the registered callback's: g returns
                           * to the pool when both are dropped (greq_put) */
    wmpi_comm_t *e;
    struct greq *next;  /* the pool of free records */
} greq_t;
_Static_assert(sizeof(greq_t) == 64, "a record is one cache line");

/* A new record (one aligned cache line, zeroed: incarnation 0), or NULL. */
static greq_t *greq_new(void)
{
    greq_t *g = aligned_alloc(64, sizeof(greq_t));
    if (g != NULL) memset(g, 0, sizeof *g);
    return g;
}

/* Records of requests and, with WMPI_POLL, the requests handed out and not
 * yet freed, by handle: MPI_Wait/MPI_Waitall wait on the Weft request as a
 * waiter (weft_wait: drives progress, the engine naps meanwhile) before
 * MPICH completes the MPI request. MPICH 4.0's MPI_Wait never calls
 * greq_wait: it polls greq_poll from its progress loop and yields between
 * polls, which handed the core to Weft's still-polling engine for a whole
 * time slice (about 4 ms) - doc/mpi_interposition.md.
 *
 * The table is open-addressed (linear probing, deletion by moving later
 * entries of the run back), at most half full, so a lookup costs the same
 * however many requests are open (a list made MPI_Waitall over n of ours
 * cost n^2). greq_begin reserves a slot before the Weft call, so that
 * handing the request out cannot fail after the operation started. Freed
 * records are kept for the next call (greq_put). All under
 * greq_lock; greq_nlive lets the completion calls skip the lock when
 * nothing of ours is open. */
static pthread_mutex_t greq_lock = PTHREAD_MUTEX_INITIALIZER;
static greq_t *greq_pool; /* free records, linked by next */
static int greq_npool;
enum { SLOT_NONE, SLOT_RESERVED, SLOT_TRACKED };
#if WMPI_POLL
/* MPICH's side of a generalized request off the program's path. Measured
 * after a device-style compute (doc/mpi_interposition.md, lab/wait_cost),
 * MPICH's MPIX_Grequest_start, MPI_Grequest_complete and MPI_Wait of the
 * completed request cost 1.4 - 2.5 us together, more than Weft's own issue and wait,
 * and all of it on the program's thread. So the requests are started ahead
 * (greq_ready: up to GREQ_READY, each with its record as extra state), and an
 * MPI_Wait/MPI_Waitall that finds its operation done without error gives the
 * program MPI_REQUEST_NULL at once and leaves the MPI request, completed in
 * Weft, on greq_retired (the record stays in the table, marked complete,
 * until greq_housekeep takes it out). greq_housekeep completes and
 * frees the retired requests and starts new ones: on the keeper, a thread of
 * ours that the completion callback wakes when it runs on Weft's engine
 * thread (so while the program computes, in the usual case); on the
 * program's thread once GREQ_RETIRED_MAX wait (the callbacks ran on the
 * program's threads, inside its waits); in MPI_Finalize for what is left.
 * Not on the engine thread itself: MPICH's global lock may be held for
 * milliseconds by a program thread spinning in a blocking MPI call, and the
 * engine must keep moving Weft's other operations meanwhile (measured with
 * MPI_Grequest_complete in the callback: 17 - 50 ms stalls,
 * doc/mpi_interposition.md). A retired request stays allocated in MPICH
 * until it is freed, so its handle is not reused while the program may still
 * hold a copy of it in its own variables: the handle it was given is the one
 * MPI_Wait overwrote. greq_ready under greq_lock, greq_retired a lock-free
 * stack, greq_next one slot; MPICH is called outside greq_lock (its free
 * function takes greq_lock under MPICH's lock). */
#define GREQ_READY 4
#define GREQ_RETIRED_MAX 16
static greq_t *greq_ready;
static int greq_nready;
/* One more started ahead, already counted as open (greq_count_locked), for a
 * served call to take with one exchange instead of greq_lock (greq_housekeep
 * fills it, greq_take_ready empties it). */
static _Atomic(greq_t *) greq_next;
static _Atomic(greq_t *) greq_retired;          /* a stack: pushed without a lock (greq_retire) */
static _Atomic int greq_nretired;               /* about greq_retired's length (a hint) */
static _Atomic int greq_work;                   /* a hint: retired requests, or ready ones short */
/* Thread-local state in the initial-exec model: a plain %fs-relative load
 * rather than a call to __tls_get_addr per access (this library is loaded
 * with the program, preloaded or linked; measured, the calls were a fifth of
 * an MPI_Wait after a device-style compute). */
#define WMPI_TLS _Thread_local __attribute__((tls_model("initial-exec")))
static WMPI_TLS int greq_program_thread;   /* this thread made or waited on a call of ours */
/* The requests this thread handed out last, so that its MPI_Wait finds the
 * record without greq_lock and the table (greq_recent_take). */
#define GREQ_RECENT 4
typedef struct greq_recent {
    MPI_Request mpi;
    unsigned gen; /* the record's incarnation when handed out */
    greq_t *g;
} greq_recent_t;
static WMPI_TLS _Alignas(64) greq_recent_t greq_recent[GREQ_RECENT]; /* one line */
static WMPI_TLS unsigned greq_recent_next;
static greq_t **greq_tab;                     /* greq_cap slots (a power of two), NULL: empty */
static size_t greq_cap, greq_count, greq_reserved;
static _Atomic int greq_nlive;

static size_t greq_slot(MPI_Request r, size_t mask)
{
    uint64_t k = 0;
    memcpy(&k, &r, sizeof r < sizeof k ? sizeof r : sizeof k);
    return (size_t)((k * 0x9E3779B97F4A7C15ull) >> 29) & mask;
}

/* Room for one more entry (greq_lock held): 0, or -1 without memory. */
static int greq_reserve_locked(void)
{
    size_t need = greq_count + greq_reserved + 1;
    if (2 * need > greq_cap) {
        size_t cap = greq_cap ? greq_cap : 64;
        while (2 * need > cap) cap *= 2;
        greq_t **t = calloc(cap, sizeof *t);
        if (t == NULL) return -1;
        for (size_t i = 0; i < greq_cap; i++) {
            if (greq_tab[i] == NULL) continue;
            size_t j = greq_slot(greq_tab[i]->mpi, cap - 1);
            while (t[j] != NULL) j = (j + 1) & (cap - 1);
            t[j] = greq_tab[i];
        }
        free(greq_tab);
        greq_tab = t;
        greq_cap = cap;
    }
    greq_reserved++;
    return 0;
}

/* Enter g into its reserved slot (greq_lock held). */
static void greq_insert_locked(greq_t *g)
{
    greq_reserved--;
    size_t mask = greq_cap - 1, j = greq_slot(g->mpi, mask);
    while (greq_tab[j] != NULL) j = (j + 1) & mask;
    greq_tab[j] = g;
    g->slot = SLOT_TRACKED;
    greq_count++;
}

/* g, being handed out, counted as open (greq_nlive: greq_lock held). */
static void greq_count_locked(greq_t *g)
{
    g->counted = 1;
    atomic_fetch_add_explicit(&greq_nlive, 1, memory_order_relaxed);
}

/* g is handed out now: in the table and counted (a request started ahead
 * is both already: greq_housekeep, greq_take_ready). */
static void greq_track(greq_t *g)
{
    if (g->counted) return;
    pthread_mutex_lock(&greq_lock);
    if (g->slot != SLOT_TRACKED) greq_insert_locked(g);
    greq_count_locked(g);
    pthread_mutex_unlock(&greq_lock);
}

/* Remove g (greq_lock held; nothing when it was never entered). */
static void greq_untrack_locked(greq_t *g)
{
    if (greq_cap == 0) return;
    size_t mask = greq_cap - 1, j = greq_slot(g->mpi, mask);
    while (greq_tab[j] != NULL && greq_tab[j] != g) j = (j + 1) & mask;
    if (greq_tab[j] == NULL) return;
    greq_tab[j] = NULL;
    greq_count--;
    if (g->counted) { /* handed out (one started ahead and never used is not) */
        g->counted = 0;
        atomic_fetch_sub_explicit(&greq_nlive, 1, memory_order_relaxed);
    }
    /* Move back the entries of the run after j that may no longer be
     * reachable from their home slot across the hole. */
    for (size_t k = (j + 1) & mask; greq_tab[k] != NULL; k = (k + 1) & mask) {
        size_t home = greq_slot(greq_tab[k]->mpi, mask);
        /* k's entry stays if its home lies cyclically in (j, k] */
        if (j <= k ? (home > j && home <= k) : (home > j || home <= k)) continue;
        greq_tab[j] = greq_tab[k];
        greq_tab[k] = NULL;
        j = k;
    }
}

/* The record in the table under handle r, or NULL (greq_lock held). */
static greq_t *greq_lookup_locked(MPI_Request r)
{
    if (greq_cap == 0) return NULL;
    const size_t mask = greq_cap - 1;
    for (size_t j = greq_slot(r, mask); greq_tab[j] != NULL; j = (j + 1) & mask)
        if (greq_tab[j]->mpi == r) return greq_tab[j];
    return NULL;
}

/* The live, not yet completed request of ours behind r, or NULL. */
static greq_t *greq_find(MPI_Request r)
{
    greq_program_thread = 1;
    if (r == MPI_REQUEST_NULL || atomic_load_explicit(&greq_nlive, memory_order_relaxed) == 0)
        return NULL;
    pthread_mutex_lock(&greq_lock);
    greq_t *g = greq_lookup_locked(r);
    pthread_mutex_unlock(&greq_lock);
    return g != NULL && !g->completed ? g : NULL;
}
#endif

/* A record (new or from the pool) made ready for a request: zeroed but for
 * its incarnation, one reference (the MPI request's). */
static void greq_zero(greq_t *g)
{
    memset((char *)g + sizeof g->gen, 0, sizeof *g - sizeof g->gen);
    _Static_assert(offsetof(greq_t, gen) == 0, "gen first: greq_zero keeps it");
    atomic_init(&g->completed, 0);
    atomic_init(&g->claim, 0);
    atomic_init(&g->released, 0);
    atomic_init(&g->refs, 1);
}

/* A zeroed record with (WMPI_POLL) a slot reserved for it, or NULL. */
static greq_t *greq_alloc(void)
{
    pthread_mutex_lock(&greq_lock);
    greq_t *g = greq_pool;
#if WMPI_POLL
    if (greq_reserve_locked() != 0) {
        pthread_mutex_unlock(&greq_lock);
        return NULL;
    }
#endif
    if (g != NULL) {
        greq_pool = g->next;
        greq_npool--;
    }
    pthread_mutex_unlock(&greq_lock);
    if (g == NULL) g = greq_new();
    if (g != NULL) greq_zero(g);
#if WMPI_POLL
    if (g == NULL) {
        pthread_mutex_lock(&greq_lock);
        greq_reserved--;
        pthread_mutex_unlock(&greq_lock);
    } else {
        g->slot = SLOT_RESERVED;
    }
#endif
    return g;
}

/* Drop a reference to g; the last one gives it to the pool. Records are
 * never freed (as many as were open at once, reused): a thread's cache of
 * the requests it issued (greq_recent) reads a record's incarnation without
 * a lock, so a record's memory must stay a record. */
static void greq_put(greq_t *g)
{
    if (atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) != 1) return;
    pthread_mutex_lock(&greq_lock);
    g->next = greq_pool;
    greq_pool = g;
    greq_npool++;
    pthread_mutex_unlock(&greq_lock);
}

/* The MPI request is gone: g out of the table (or its reservation back, when
 * it was never handed out), and the MPI request's reference dropped. */
static void greq_release(greq_t *g)
{
    pthread_mutex_lock(&greq_lock);
#if WMPI_POLL
    if (g->slot == SLOT_TRACKED) greq_untrack_locked(g);
    else if (g->slot == SLOT_RESERVED) greq_reserved--;
    g->slot = SLOT_NONE;
#endif
    pthread_mutex_unlock(&greq_lock);
    /* release: a cache entry that still sees the old incarnation also sees
     * the record as it was */
    atomic_fetch_add_explicit(&g->gen, 1u, memory_order_release);
    greq_put(g);
}

/* The status of a collective completed by Weft: no source, tag or elements,
 * not cancelled (in_array: MPI_ERROR too, as MPICH's MPI_Waitall sets it). */
static int greq_status(MPI_Status *status, int in_array)
{
    if (status == MPI_STATUS_IGNORE) return MPI_SUCCESS;
    if (in_array) status->MPI_ERROR = MPI_SUCCESS;
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    int rc = PMPI_Status_set_elements(status, MPI_BYTE, 0);
    if (rc == MPI_SUCCESS) rc = PMPI_Status_set_cancelled(status, 0);
    return rc;
}

/* In MPI_Wait/MPI_Test/... on the program's thread, after completion. */
static int greq_query(void *extra, MPI_Status *status)
{
    greq_t *g = extra;
    int rc = greq_status(status, 0);
    return rc != MPI_SUCCESS ? rc : mpi_class_of(g->st);
}

static int greq_free(void *extra)
{
    greq_t *g = extra;
    greq_release(g);
    return MPI_SUCCESS;
}

/* A collective cannot be cancelled (MPI: erroneous); nothing to do. */
static int greq_cancel(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

/* g's Weft request is released: its communicator's count of operations in
 * flight drops, on the releasing thread (the completion callback, usually:
 * not the program's wait). g->e is not read after this (comm_retire may free
 * it once the count is 0; a check of g->e against NULL is all that follows). */
static void greq_unpend(greq_t *g)
{
    /* release: the operation's effects before the count that comm_retire reads */
    atomic_fetch_sub_explicit(&g->e->pending, 1, memory_order_release);
}

/* The Weft request is released with status st: complete the MPI request.
 * g may be freed by the program from the PMPI_Grequest_complete on. */
static int greq_finish(greq_t *g, weft_status_t st)
{
    g->st = st;
    g->completed = 1;
    return PMPI_Grequest_complete(g->mpi);
}

#if WMPI_POLL
/* The thread holding g's claim released its Weft request with status s:
 * publish it (greq_weft's readers, the wait) and drop the in-flight count. */
static void greq_released(greq_t *g, weft_status_t s)
{
    g->wst = s;
    atomic_store_explicit(&g->released, 1, memory_order_release);
    greq_unpend(g);
}

/* Release g's Weft request on a program thread: wait = 1, wait for it
 * (weft_wait); wait = 0, only if its operation is done (weft_test). Returns
 * 1 with its status in *st once released, else 0. The completion callback
 * (greq_completed) releases it first when it can: a CAS on claim decides who
 * calls weft_wait or weft_test on wr (one of them only, as Weft requires), and
 * the program's wait then costs an atomic read. Another thread holding the
 * claim is releasing a finished request (the callback) or testing one (a
 * concurrent MPI_Test, erroneous in MPI but harmless here): a wait yields
 * until it let go. */
static int greq_weft(greq_t *g, int wait, weft_status_t *st)
{
    for (;;) {
        if (atomic_load_explicit(&g->released, memory_order_acquire)) {
            *st = g->wst;
            return 1;
        }
        int free_claim = 0;
        if (atomic_compare_exchange_strong_explicit(&g->claim, &free_claim, 1, memory_order_acquire,
                                                    memory_order_relaxed)) {
            weft_status_t s;
            if (wait) {
                s = weft_wait(&g->wr);
            } else {
                int done = 0;
                s = weft_test(&g->wr, &done);
                if (!done && s == WEFT_SUCCESS) {
                    atomic_store_explicit(&g->claim, 0, memory_order_release);
                    return 0;
                }
            }
            greq_released(g, s);
            *st = s;
            return 1;
        }
        if (!wait) return 0;
        sched_yield();
    }
}

/* MPICH's MPI_Test/MPI_Testany/...: on the program's thread, while the MPI
 * request is incomplete. */
static int greq_poll(void *extra, MPI_Status *status)
{
    (void)status;
    greq_t *g = extra;
    if (g->completed || g->e == NULL) return MPI_SUCCESS; /* e NULL: started ahead, no call yet */
    greq_program_thread = 1; /* a completion callback run by this weft_test leaves MPICH alone */
    weft_status_t st = WEFT_SUCCESS;
    if (!greq_weft(g, 0, &st)) return MPI_SUCCESS;
    return greq_finish(g, st);
}

/* MPICH's MPI_Wait/MPI_Waitall on requests of this kind (MPICH's global lock
 * is not held: an engine over the MPI transport still progresses). */
static int greq_wait(int count, void **states, double timeout, MPI_Status *status)
{
    (void)timeout;
    (void)status;
    int rc = MPI_SUCCESS;
    greq_program_thread = 1;
    for (int i = 0; i < count; i++) {
        greq_t *g = states[i];
        if (g->completed || g->e == NULL) continue;
        weft_status_t st = WEFT_SUCCESS;
        (void)greq_weft(g, 1, &st);
        int r = greq_finish(g, st);
        if (rc == MPI_SUCCESS) rc = r;
    }
    return rc;
}

/* The doorbell of MPI_Waitany/MPI_Waitsome (below). */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;   /* initialised by doorbell_init, on CLOCK_MONOTONIC if it can */
    unsigned long gen;     /* rings so far */
} doorbell = {.lock = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t doorbell_once = PTHREAD_ONCE_INIT;
static clockid_t doorbell_clock = CLOCK_REALTIME; /* the clock of the condition's deadlines */
static int doorbell_ok;                            /* the condition variable is initialised */

/* Once, before the first request is armed (greq_end, arm_ours), so before
 * any ring or wait: pthread_once publishes it to every thread that calls it
 * after. */
static void doorbell_init(void)
{
    pthread_condattr_t a;
    int attr = pthread_condattr_init(&a) == 0;
    if (attr && pthread_condattr_setclock(&a, CLOCK_MONOTONIC) == 0 &&
        pthread_cond_init(&doorbell.cond, &a) == 0) {
        doorbell_clock = CLOCK_MONOTONIC;
        doorbell_ok = 1;
    } else if (pthread_cond_init(&doorbell.cond, NULL) == 0) {
        doorbell_ok = 1;
    } else {
        wmpi_log("pthread_cond_init failed: waits on requests of ours poll with pauses");
    }
    if (attr) pthread_condattr_destroy(&a);
}

/* In Weft's completion callback of an armed request (greq_completed): on
 * the engine thread (or a thread driving progress), outside Weft's progress
 * lock. It does not touch the request (the program may have freed it by
 * then): it only rings. */
static void doorbell_ring(void *arg, weft_status_t status)
{
    (void)arg;
    (void)status;
    pthread_mutex_lock(&doorbell.lock);
    doorbell.gen++;
    if (doorbell_ok) pthread_cond_broadcast(&doorbell.cond);
    pthread_mutex_unlock(&doorbell.lock);
}

static void greq_completed(void *arg, weft_status_t status);
static void greq_housekeep(int fill);

/* Register the completion callback on g (its own reference first: the
 * callback may run at once). */
static void greq_arm(greq_t *g)
{
    atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
    g->armed = weft_request_on_complete(g->wr, greq_completed, g) == WEFT_SUCCESS;
    if (!g->armed) atomic_fetch_sub_explicit(&g->refs, 1, memory_order_relaxed); /* never runs */
}

/* A request started ahead, in the table since its start (greq_housekeep),
 * or NULL. Nobody looks it up before the program has it; a failed call
 * frees it (greq_end), which removes it. */
static greq_t *greq_take_ready(void)
{
    if (atomic_load_explicit(&greq_work, memory_order_relaxed) < 0) return NULL; /* finalising */
    /* acquire: the record as greq_housekeep left it */
    greq_t *g = atomic_exchange_explicit(&greq_next, NULL, memory_order_acquire);
    if (g != NULL) {
        atomic_store_explicit(&greq_work, 1, memory_order_relaxed);
        return g;
    }
    pthread_mutex_lock(&greq_lock);
    g = greq_ready;
    if (g != NULL) {
        greq_ready = g->next;
        greq_nready--;
        g->next = NULL;
        greq_count_locked(g);
    }
    pthread_mutex_unlock(&greq_lock);
    if (g != NULL) atomic_store_explicit(&greq_work, 1, memory_order_relaxed);
    return g;
}

/* g's operation is done without error and its Weft request released: its
 * MPI request goes to greq_retired, still to be completed and freed, and g
 * stops being an open request of ours (completed). No lock: the retiring
 * thread is the one completing the request (MPI's contract), g stays in the
 * table until greq_housekeep takes it out (lookups pass over completed
 * records), and the list is a stack that one exchange empties. */
static void greq_retire(greq_t *g)
{
    g->st = WEFT_SUCCESS;
    atomic_store_explicit(&g->completed, 1, memory_order_relaxed);
    greq_t *top = atomic_load_explicit(&greq_retired, memory_order_relaxed);
    do {
        g->next = top;
        /* release: g's fields to the housekeeper's exchange (acquire) */
    } while (!atomic_compare_exchange_weak_explicit(&greq_retired, &top, g, memory_order_release,
                                                    memory_order_relaxed));
    const int n = atomic_fetch_add_explicit(&greq_nretired, 1, memory_order_relaxed) + 1;
    atomic_store_explicit(&greq_work, 1, memory_order_relaxed);
    if (n >= GREQ_RETIRED_MAX) greq_housekeep(1); /* the keeper has not kept up (or cannot run) */
}

/* Remember g, just handed out as r, in this thread's cache (greq_recent). */
static void greq_remember(greq_t *g, MPI_Request r)
{
    greq_recent_t *c = &greq_recent[greq_recent_next++ % GREQ_RECENT];
    c->mpi = r;
    c->g = g;
    c->gen = atomic_load_explicit(&g->gen, memory_order_relaxed);
}

/* The open request of ours behind r if this thread issued it lately, or
 * NULL (then greq_find decides). The entry is used up either way. */
static greq_t *greq_recent_take(MPI_Request r)
{
    for (int i = 0; i < GREQ_RECENT; i++) {
        greq_recent_t *c = &greq_recent[i];
        if (c->g == NULL || c->mpi != r) continue;
        greq_t *g = c->g;
        c->g = NULL;
        /* acquire: pairs with greq_release's increment. The same incarnation:
         * the MPI request r is still allocated, so the program's r is it. */
        if (atomic_load_explicit(&g->gen, memory_order_acquire) != c->gen ||
            atomic_load_explicit(&g->completed, memory_order_relaxed))
            return NULL;
        return g;
    }
    return NULL;
}

/* Complete and free the retired requests; with fill, start requests until
 * GREQ_READY wait (else free the waiting ones too: MPI_Finalize). On any
 * thread outside MPICH and outside greq_lock. */
static void greq_housekeep(int fill)
{
    pthread_mutex_lock(&greq_lock);
    /* greq_work first: a retirement after the exchange sets it again */
    atomic_store_explicit(&greq_work, fill ? 0 : -1, memory_order_relaxed);
    /* acquire: pairs with greq_retire's push */
    greq_t *r = atomic_exchange_explicit(&greq_retired, NULL, memory_order_acquire), *ready = NULL;
    int taken = 0;
    for (greq_t *g = r; g != NULL; g = g->next, taken++) {
        greq_untrack_locked(g);
        g->slot = SLOT_NONE;
    }
    atomic_fetch_sub_explicit(&greq_nretired, taken, memory_order_relaxed);
    int want = fill ? GREQ_READY - greq_nready : 0;
    if (!fill) {
        ready = greq_ready;
        greq_ready = NULL;
        greq_nready = 0;
        greq_t *n = atomic_exchange_explicit(&greq_next, NULL, memory_order_acquire);
        if (n != NULL) {
            n->next = ready;
            ready = n;
        }
    }
    if (want > 0) greq_nready += want; /* claimed here, so that two threads do not both start them */
    pthread_mutex_unlock(&greq_lock);
    for (int pass = 0; pass < 2; pass++) {
        for (greq_t *g = pass ? ready : r, *next; g != NULL; g = next) {
            next = g->next;
            MPI_Request q = g->mpi;
            /* MPI_Request_free calls greq_free, which gives g back */
            if (PMPI_Grequest_complete(q) != MPI_SUCCESS || PMPI_Request_free(&q) != MPI_SUCCESS)
                wmpi_log("could not free a completed request");
        }
    }
    int started = 0;
    for (; started < want; started++) {
        pthread_mutex_lock(&greq_lock);
        greq_t *g = greq_pool;
        if (g != NULL) {
            greq_pool = g->next;
            greq_npool--;
        }
        pthread_mutex_unlock(&greq_lock);
        if (g == NULL && (g = greq_new()) == NULL) break;
        greq_zero(g);
        if (PMPIX_Grequest_start(greq_query, greq_free, greq_cancel, greq_poll, greq_wait, g,
                                 &g->mpi) != MPI_SUCCESS) {
            greq_release(g); /* SLOT_NONE: straight back to the pool */
            break;
        }
        /* Into the table now, off the program's path (its lookups skip it:
         * nobody has its handle before greq_take_ready hands it out). */
        pthread_mutex_lock(&greq_lock);
        const int room = greq_reserve_locked() == 0;
        if (room) {
            greq_insert_locked(g);
            g->next = greq_ready;
            greq_ready = g;
        }
        pthread_mutex_unlock(&greq_lock);
        if (!room) { /* no memory for the table: give it back and stop */
            MPI_Request q = g->mpi;
            if (PMPI_Grequest_complete(q) != MPI_SUCCESS || PMPI_Request_free(&q) != MPI_SUCCESS)
                wmpi_log("could not free a request started ahead");
            break;
        }
    }
    pthread_mutex_lock(&greq_lock);
    if (started < want) greq_nready -= want - started;
    /* Refill greq_next from the list (counted as open now: a lookup may
     * meet it before anyone has its handle, which no one then asks for). */
    if (fill && greq_ready != NULL && atomic_load_explicit(&greq_next, memory_order_relaxed) == NULL) {
        greq_t *n = greq_ready;
        greq_ready = n->next;
        greq_nready--;
        n->next = NULL;
        greq_count_locked(n);
        /* release: n's fields to the taker's exchange. Still empty: only a
         * holder of greq_lock fills it, takers only empty it. */
        atomic_store_explicit(&greq_next, n, memory_order_release);
    }
    pthread_mutex_unlock(&greq_lock);
}
#else
/* Weft's completion callback: on the engine thread (or a thread driving
 * progress), outside Weft's progress lock. */
static void greq_done(void *arg, weft_status_t status)
{
    greq_t *g = arg;
    weft_status_t w = weft_wait(&g->wr);
    greq_unpend(g);
    int rc = greq_finish(g, status != WEFT_SUCCESS ? status : w);
    if (rc != MPI_SUCCESS) wmpi_log("MPI_Grequest_complete failed (%d)", rc);
}
#endif

#if WMPI_POLL
/* The completion callback of every nonblocking call on e's Weft communicator
 * (weft_comm_set_on_complete): in place from the issue, with no call and no
 * look-up of the request per operation. req is &g->wr of the call's record. */
static void greq_comm_done(void *arg, weft_request_t *req, weft_status_t status)
{
    (void)arg;
    greq_completed((greq_t *)(void *)((char *)req - offsetof(greq_t, wr)), status);
}

/* comm_create: e's Weft communicator completes its requests through
 * greq_comm_done (else each call registers greq_completed: greq_end). */
static void greq_comm_setup(wmpi_comm_t *e)
{
    (void)pthread_once(&doorbell_once, doorbell_init); /* the callback rings it */
    weft_status_t st = weft_comm_set_on_complete(e->wc, greq_comm_done, NULL);
    e->callback = st == WEFT_SUCCESS;
    if (!e->callback)
        wmpi_log("weft_comm_set_on_complete: %s; each call registers its callback",
                 weft_strerror(st));
}

/* Before the Weft call on a communicator whose callback is set: the
 * callback's own reference to g (it runs once the call succeeded). g is
 * this thread's alone until the call hands the operation to the engine (the
 * MPI request's reference is its only one): a store, no atomic increment. */
static void greq_arm_next(greq_t *g)
{
    g->armed = g->e->callback;
    if (g->armed) atomic_store_explicit(&g->refs, 2, memory_order_relaxed);
}
#endif

/* Before the Weft call: the generalized request. */
static int greq_begin(MPI_Comm comm, int call, wmpi_comm_t *e, greq_t **out)
{
    greq_t *g = NULL;
#if WMPI_POLL
    greq_program_thread = 1;
    g = greq_take_ready(); /* started ahead by greq_housekeep */
#endif
    if (g == NULL) {
        g = greq_alloc();
        if (g == NULL) return weft_failed(comm, call, WEFT_ERR_NO_MEMORY);
#if WMPI_POLL
        int rc = PMPIX_Grequest_start(greq_query, greq_free, greq_cancel, greq_poll, greq_wait, g,
                                      &g->mpi);
#else
        int rc = PMPI_Grequest_start(greq_query, greq_free, greq_cancel, g, &g->mpi);
#endif
        if (rc != MPI_SUCCESS) {
            greq_release(g);
            return rc;
        }
    }
    g->e = e;
#if WMPI_POLL
    greq_arm_next(g);
#endif
    /* before the call: its release (greq_unpend) may come first */
    atomic_fetch_add_explicit(&e->pending, 1, memory_order_relaxed);
    *out = g;
    return MPI_SUCCESS;
}

/* After the Weft call that returned st into g->wr: hand the request out, or
 * report st (no request then, as for any failed MPI call). */
static int greq_end(MPI_Comm comm, int call, greq_t *g, weft_status_t st, MPI_Request *request)
{
    MPI_Request r = g->mpi;
    if (st != WEFT_SUCCESS) {
#if WMPI_POLL
        if (g->armed) { /* the callback never runs: the call failed */
            atomic_fetch_sub_explicit(&g->refs, 1, memory_order_relaxed);
            g->armed = 0;
        }
#endif
        atomic_fetch_sub_explicit(&g->e->pending, 1, memory_order_relaxed); /* never released */
        g->st = st;
        g->completed = 1;
        if (PMPI_Grequest_complete(r) != MPI_SUCCESS || PMPI_Request_free(&r) != MPI_SUCCESS)
            wmpi_log("%s: could not release the request of a failed call", call_names[call]);
        return weft_failed(comm, call, st);
    }
#if !WMPI_POLL
    st = weft_request_on_complete(g->wr, greq_done, g);
    if (st != WEFT_SUCCESS) { /* not expected for a live request without a stream */
        wmpi_log("%s: weft_request_on_complete: %s; completing it here", call_names[call],
                 weft_strerror(st));
        greq_done(g, weft_wait(&g->wr));
    }
#else
    greq_track(g);
    /* The callback (the communicator's: greq_begin) rings the doorbell and
     * does greq_housekeep's work; registered now where it is not set. */
    if (!g->armed) {
        (void)pthread_once(&doorbell_once, doorbell_init);
        greq_arm(g);
    }
    greq_remember(g, r);
#endif
    *request = r;
    return MPI_SUCCESS;
}

#if WMPI_POLL
/* The completion calls on arrays that hold requests of ours (the thread
 * contract is MPI's: a request is completed by one thread at a time).
 *
 * MPI_Wait and MPI_Waitall: a request of ours is waited on in Weft
 * (weft_wait, as a waiter) unless the completion callback released it
 * already; done without error, the program gets MPI_REQUEST_NULL and the
 * collective's status from us and the MPI request goes to greq_retired
 * (MPICH is not entered, nor any lock when the request is in the thread's
 * greq_recent: wait_fast); with an error it is completed and
 * MPICH's call reports it. Requests of other kinds are MPICH's alone:
 * MPI_Waitall hands MPICH the array (ours MPI_REQUEST_NULL by then) when
 * anything else is in it.
 *
 * MPI_Waitany and MPI_Waitsome: one active request left, ours, is waited on
 * as by MPI_Wait. Otherwise the caller loops: test ours (weft_test),
 * then MPICH's MPI_Testany/MPI_Testsome on the whole array (which tests and
 * progresses the others and returns the statuses), then sleeps on the
 * doorbell, a condition variable that Weft's completion callback of each of
 * our requests in the array rings (greq_completed, registered by
 * weft_request_on_complete when the call is made): when every active request is ours, until one
 * completes; when MPI requests are mixed in, MPI progresses only inside MPI
 * calls, so the sleep is bounded (a few polls with sched_yield, then 5 us
 * doubling to 250 us) and a Weft completion still ends it at once. Nothing
 * spins: on an oversubscribed node the engine and the peers get the core.
 *
 * MPI_Testall, MPI_Testany and MPI_Testsome test our requests with
 * weft_test (completing the finished ones) and hand the array to MPICH,
 * whose answer, statuses and MPI_UNDEFINED/MPI_REQUEST_NULL rules are the
 * program's. MPI_Test is not interposed: libweft itself calls MPI_Test (the
 * MPI transport's polling, the MPI passthrough algorithm), which would then
 * pass through here on the engine's hot path; MPICH's MPI_Test polls our
 * request's greq_poll (weft_test) itself. */

/* The keeper: a thread that runs greq_housekeep when woken (keeper_wake),
 * started on the first wake, stopped by MPI_Finalize (keeper_stop). */
enum { KEEPER_NONE, KEEPER_RUNNING, KEEPER_FAILED, KEEPER_STOPPED };
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    int state; /* KEEPER_* */
    int wake;  /* work was announced since the keeper last looked */
} keeper = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void *keeper_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&keeper.lock);
    for (;;) {
        while (!keeper.wake && keeper.state == KEEPER_RUNNING)
            pthread_cond_wait(&keeper.cond, &keeper.lock);
        if (keeper.state != KEEPER_RUNNING) break;
        keeper.wake = 0;
        pthread_mutex_unlock(&keeper.lock);
        greq_housekeep(1);
        pthread_mutex_lock(&keeper.lock);
    }
    pthread_mutex_unlock(&keeper.lock);
    return NULL;
}

/* Have the keeper do greq_housekeep's work (on Weft's engine thread: never
 * blocks for long, never enters MPICH). */
static void keeper_wake(void)
{
    pthread_mutex_lock(&keeper.lock);
    if (keeper.state == KEEPER_NONE) {
        int rc = pthread_create(&keeper.thread, NULL, keeper_main, NULL);
        keeper.state = rc == 0 ? KEEPER_RUNNING : KEEPER_FAILED;
        if (rc != 0)
            wmpi_log("cannot start the request keeper thread (%s): the program's waits free "
                     "MPI's requests instead", strerror(rc));
    }
    if (keeper.state == KEEPER_RUNNING && !keeper.wake) {
        keeper.wake = 1;
        pthread_cond_signal(&keeper.cond);
    }
    pthread_mutex_unlock(&keeper.lock);
}

/* MPI_Finalize, once no completion callback can run any more. */
static void keeper_stop(void)
{
    pthread_mutex_lock(&keeper.lock);
    const int running = keeper.state == KEEPER_RUNNING;
    keeper.state = KEEPER_STOPPED;
    pthread_cond_signal(&keeper.cond);
    pthread_mutex_unlock(&keeper.lock);
    if (running) {
        int rc = pthread_join(keeper.thread, NULL);
        if (rc != 0) wmpi_log("pthread_join of the request keeper failed (%s)", strerror(rc));
    }
}

/* The completion callback of every request of ours (arg: its record, one
 * reference held for this call): releases the Weft request unless a program
 * thread is at it (greq_weft), rings the doorbell and, on a thread other than
 * the program's (Weft's engine), wakes the keeper when there is housekeeping
 * to do. On a program thread it does not: a wake-up would cost that thread's
 * wait a system call, and its own waits housekeep once GREQ_RETIRED_MAX
 * requests are retired. */
static void greq_completed(void *arg, weft_status_t status)
{
    greq_t *g = arg;
    int free_claim = 0;
    if (atomic_compare_exchange_strong_explicit(&g->claim, &free_claim, 1, memory_order_acquire,
                                                memory_order_relaxed)) {
        greq_released(g, weft_wait(&g->wr)); /* done: returns at once */
    }
    doorbell_ring(NULL, status);
    if (!greq_program_thread && atomic_load_explicit(&greq_work, memory_order_relaxed) > 0)
        keeper_wake();
    greq_put(g);
}

static unsigned long doorbell_read(void)
{
    pthread_mutex_lock(&doorbell.lock);
    unsigned long g = doorbell.gen;
    pthread_mutex_unlock(&doorbell.lock);
    return g;
}

/* Sleep until the doorbell rings after `seen`, or ns nanoseconds (ns < 0:
 * no limit). */
static void doorbell_wait(unsigned long seen, long ns)
{
    struct timespec dl;
    if (!doorbell_ok) { /* no condition variable: a pause, then the caller polls */
        struct timespec t = {0, ns >= 0 && ns < 50000L ? ns : 50000L};
        nanosleep(&t, NULL);
        return;
    }
    if (ns >= 0) {
        clock_gettime(doorbell_clock, &dl);
        dl.tv_nsec += ns;
        while (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&doorbell.lock);
    while (doorbell.gen == seen) {
        int rc = ns < 0 ? pthread_cond_wait(&doorbell.cond, &doorbell.lock)
                        : pthread_cond_timedwait(&doorbell.cond, &doorbell.lock, &dl);
        if (rc == ETIMEDOUT || (rc != 0 && rc != EINTR)) break;
    }
    pthread_mutex_unlock(&doorbell.lock);
}

/* Complete g by weft_wait (a waiter: it drives progress while the engine naps). */
static void wait_greq(greq_t *g)
{
    weft_status_t st = WEFT_SUCCESS;
    (void)greq_weft(g, 1, &st);
    int rc = greq_finish(g, st);
    if (rc != MPI_SUCCESS) wmpi_log("MPI_Grequest_complete failed (%d)", rc);
}

/* Complete g if its operation is done (weft_test; never blocks). */
static void test_greq(greq_t *g)
{
    if (g->completed) return;
    weft_status_t st = WEFT_SUCCESS;
    if (!greq_weft(g, 0, &st)) return;
    int rc = greq_finish(g, st);
    if (rc != MPI_SUCCESS) wmpi_log("MPI_Grequest_complete failed (%d)", rc);
}

static void test_ours(int count, const MPI_Request reqs[])
{
    for (int i = 0; reqs != NULL && i < count; i++) {
        greq_t *g = greq_find(reqs[i]);
        if (g != NULL) test_greq(g);
    }
}

/* Wait for *request if it is ours. Done without error: *request is
 * MPI_REQUEST_NULL, status filled, and 1 returned (greq_retire); else 0,
 * the MPI request completed for MPICH's call to report (or not ours). */
static int wait_fast(MPI_Request *request, MPI_Status *status, int in_array)
{
    if (*request == MPI_REQUEST_NULL) return 0;
    greq_t *g = greq_recent_take(*request);
    if (g == NULL && (g = greq_find(*request)) == NULL) return 0;
    weft_status_t st = WEFT_SUCCESS;
    (void)greq_weft(g, 1, &st); /* released already (the callback): an atomic read */
    if (st != WEFT_SUCCESS) {
        int rc = greq_finish(g, st);
        if (rc != MPI_SUCCESS) wmpi_log("MPI_Grequest_complete failed (%d)", rc);
        return 0;
    }
    greq_retire(g);
    *request = MPI_REQUEST_NULL;
    if (greq_status(status, in_array) != MPI_SUCCESS) wmpi_log("MPI_Status_set_elements failed");
    return 1;
}

WMPI_EXPORT int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    if (request != NULL && wait_fast(request, status, 0)) return MPI_SUCCESS;
    return PMPI_Wait(request, status);
}

WMPI_EXPORT int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    int left = 0; /* requests MPICH still has to complete, or whose empty status it writes */
    for (int i = 0; requests != NULL && i < count; i++)
        if (requests[i] == MPI_REQUEST_NULL ||
            !wait_fast(&requests[i], statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i],
                       1))
            left++;
    if (left == 0 && requests != NULL && count > 0) return MPI_SUCCESS;
    return PMPI_Waitall(count, requests, statuses);
}

/* The requests of an array: ours still open (the last one in *one), and
 * others that are not MPI_REQUEST_NULL. */
static void classify(int count, const MPI_Request reqs[], int *ours, int *others, greq_t **one)
{
    *ours = *others = 0;
    *one = NULL;
    for (int i = 0; reqs != NULL && i < count; i++) {
        if (reqs[i] == MPI_REQUEST_NULL) continue;
        greq_t *g = greq_find(reqs[i]);
        if (g != NULL) {
            ++*ours;
            *one = g;
        } else {
            ++*others;
        }
    }
}

/* Register the doorbell on our open requests of the array that are not
 * armed yet (their registration failed when the call was made). Returns 1
 * when every one of them will ring it. */
static int arm_ours(int count, const MPI_Request reqs[])
{
    int all = 1;
    (void)pthread_once(&doorbell_once, doorbell_init);
    for (int i = 0; i < count; i++) {
        greq_t *g = greq_find(reqs[i]);
        if (g == NULL || g->armed) continue;
        greq_arm(g);
        if (!g->armed) all = 0; /* released already (then tested done) or refused: poll */
    }
    return all && doorbell_ok;
}

/* Between two polls of a wait on a mixed array: the doorbell with a bound
 * (a few yields first); on ours only (sure to ring), without one. */
static void wait_pause(unsigned long seen, unsigned pass, int bounded)
{
    if (!bounded) {
        doorbell_wait(seen, -1);
    } else if (pass < 4) {
        sched_yield();
    } else {
        unsigned sh = pass - 4 < 6 ? pass - 4 : 6; /* 5 us .. 320 us, capped at 250 */
        long ns = 5000L << sh;
        doorbell_wait(seen, ns < 250000L ? ns : 250000L);
    }
}

/* MPI_Waitany / MPI_Waitsome on an array with requests of ours: poll, pause,
 * poll (above). some = 0: Testany's (index, status); 1: Testsome's. */
static int wait_any_or_some(int some, int count, MPI_Request reqs[], int *index, int *outcount,
                            int indices[], MPI_Status *statuses)
{
    int ours, others;
    greq_t *one;
    classify(count, reqs, &ours, &others, &one);
    if (ours == 1 && others == 0) { /* the last open request, ours: as MPI_Wait */
        wait_greq(one);
        return some ? PMPI_Waitsome(count, reqs, outcount, indices, statuses)
                    : PMPI_Waitany(count, reqs, index, statuses);
    }
    const int armed = arm_ours(count, reqs); /* also with others: a Weft completion ends a pause */
    const int bounded = others > 0 || !armed;
    for (unsigned pass = 0;; pass++) {
        unsigned long seen = doorbell_read(); /* a completion after this ends the pause */
        test_ours(count, reqs);
        int rc, flag = 0;
        if (some) {
            rc = PMPI_Testsome(count, reqs, outcount, indices, statuses);
            flag = rc != MPI_SUCCESS || *outcount != 0; /* MPI_UNDEFINED: nothing active */
        } else {
            rc = PMPI_Testany(count, reqs, index, &flag, statuses);
            flag = flag || rc != MPI_SUCCESS;
        }
        if (flag) return rc;
        wait_pause(seen, pass, bounded);
    }
}

WMPI_EXPORT int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    int ours, others;
    greq_t *one;
    classify(count, requests, &ours, &others, &one);
    if (ours == 0) return PMPI_Waitany(count, requests, index, status);
    return wait_any_or_some(0, count, requests, index, NULL, NULL, status);
}

WMPI_EXPORT int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                             MPI_Status statuses[])
{
    int ours, others;
    greq_t *one;
    classify(incount, requests, &ours, &others, &one);
    if (ours == 0) return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
    return wait_any_or_some(1, incount, requests, NULL, outcount, indices, statuses);
}

WMPI_EXPORT int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
    test_ours(count, requests);
    return PMPI_Testall(count, requests, flag, statuses);
}

WMPI_EXPORT int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag,
                            MPI_Status *status)
{
    test_ours(count, requests);
    return PMPI_Testany(count, requests, index, flag, status);
}

WMPI_EXPORT int MPI_Testsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                             MPI_Status statuses[])
{
    test_ours(incount, requests);
    return PMPI_Testsome(incount, requests, outcount, indices, statuses);
}
#endif

/* The Weft side of one call, as its arguments resolved. */
typedef struct wargs {
    const void *s;
    void *r;
    size_t n;
    weft_datatype_t t;
    weft_op_t op;
    wmpi_comm_t *e;
} wargs_t;

static inline const void *in_place(const void *buf)
{
    return buf == MPI_IN_PLACE ? WEFT_IN_PLACE : buf;
}

/* Significant buffer NULL with data: MPI reports it. */
static inline int null_buf(const void *buf, size_t n)
{
    return n > 0 && buf == NULL;
}

/* This rank and the size of the communicator of entry e (kept in the entry:
 * no MPI call on the issue path). */
static int rank_size(const wmpi_comm_t *e, int *rank, int *size)
{
    *rank = e->rank;
    *size = e->size;
    return 1;
}

/* ---- allreduce ------------------------------------------------------------------------ */
static int allreduce_args(int call, const void *sbuf, void *rbuf, MPI_Count count, MPI_Datatype t,
                          MPI_Op op, MPI_Comm comm, wargs_t *a)
{
    int why = call_check(call);
    if (why == R_WEFT) why = reduce_args(count, t, op, &a->t, &a->op);
    if (why == R_WEFT) why = comm_lookup(comm, &a->e);
    if (why == R_WEFT && (null_buf(rbuf, (size_t)count) || null_buf(sbuf, (size_t)count)))
        why = R_ARG;
    a->s = in_place(sbuf);
    a->r = rbuf;
    a->n = (size_t)count;
    return why;
}

/* Each entry point below is written once, as a macro over its count type
 * (CT), and defined twice: the classic form (int counts, SFX empty) and
 * MPI-4's large-count form (MPI_Count counts, SFX _c; mpi4py 4 calls those). */
#define WMPI_DEF_ALLREDUCE(SFX, CT)                                                                    \
WMPI_EXPORT int MPI_Allreduce##SFX(const void *sbuf, void *rbuf, CT count, MPI_Datatype t, MPI_Op op,  \
                              MPI_Comm comm)                                                           \
{                                                                                                      \
    wargs_t a;                                                                                         \
    int why = allreduce_args(C_ALLREDUCE, sbuf, rbuf, count, t, op, comm, &a);                         \
    NOTE(C_ALLREDUCE, why);                                                                            \
    if (why != R_WEFT) return PMPI_Allreduce##SFX(sbuf, rbuf, count, t, op, comm);                     \
    weft_status_t st = weft_allreduce(a.s, a.r, a.n, a.t, a.op, a.e->wc);                              \
    return WMPI_LIKELY(st == WEFT_SUCCESS) ? MPI_SUCCESS : weft_failed(comm, C_ALLREDUCE, st);         \
}
WMPI_DEF_ALLREDUCE(, int)
WMPI_DEF_ALLREDUCE(_c, MPI_Count)

#define WMPI_DEF_IALLREDUCE(SFX, CT)                                                                    \
WMPI_EXPORT int MPI_Iallreduce##SFX(const void *sbuf, void *rbuf, CT count, MPI_Datatype t, MPI_Op op,  \
                               MPI_Comm comm, MPI_Request *req)                                         \
{                                                                                                       \
    wargs_t a;                                                                                          \
    int why = allreduce_args(C_IALLREDUCE, sbuf, rbuf, count, t, op, comm, &a);                         \
    NOTE(C_IALLREDUCE, why);                                                                            \
    if (why != R_WEFT) return PMPI_Iallreduce##SFX(sbuf, rbuf, count, t, op, comm, req);                \
    greq_t *g = NULL;                                                                                   \
    int rc = greq_begin(comm, C_IALLREDUCE, a.e, &g);                                                   \
    if (rc != MPI_SUCCESS) return rc;                                                                   \
    return greq_end(comm, C_IALLREDUCE, g,                                                              \
                    weft_iallreduce(a.s, a.r, a.n, a.t, a.op, a.e->wc, &g->wr), req);                   \
}
WMPI_DEF_IALLREDUCE(, int)
WMPI_DEF_IALLREDUCE(_c, MPI_Count)

/* ---- reduce_scatter_block ---------------------------------------------------------------- */
static int rsb_args(int call, const void *sbuf, void *rbuf, MPI_Count count, MPI_Datatype t, MPI_Op op,
                    MPI_Comm comm, wargs_t *a)
{
    int why = call_check(call);
    if (why == R_WEFT) why = reduce_args(count, t, op, &a->t, &a->op);
    if (why == R_WEFT) why = comm_lookup(comm, &a->e);
    if (why == R_WEFT && (null_buf(rbuf, (size_t)count) || null_buf(sbuf, (size_t)count)))
        why = R_ARG;
    a->s = in_place(sbuf);
    a->r = rbuf;
    a->n = (size_t)count;
    return why;
}

#define WMPI_DEF_REDUCE_SCATTER_BLOCK(SFX, CT)                                                         \
WMPI_EXPORT int MPI_Reduce_scatter_block##SFX(const void *sbuf, void *rbuf, CT count, MPI_Datatype t,  \
                                         MPI_Op op, MPI_Comm comm)                                     \
{                                                                                                      \
    wargs_t a;                                                                                         \
    int why = rsb_args(C_REDUCE_SCATTER_BLOCK, sbuf, rbuf, count, t, op, comm, &a);                    \
    NOTE(C_REDUCE_SCATTER_BLOCK, why);                                                                 \
    if (why != R_WEFT) return PMPI_Reduce_scatter_block##SFX(sbuf, rbuf, count, t, op, comm);          \
    weft_status_t st = weft_reduce_scatter(a.s, a.r, a.n, a.t, a.op, a.e->wc);                         \
    return st == WEFT_SUCCESS ? MPI_SUCCESS : weft_failed(comm, C_REDUCE_SCATTER_BLOCK, st);           \
}
WMPI_DEF_REDUCE_SCATTER_BLOCK(, int)
WMPI_DEF_REDUCE_SCATTER_BLOCK(_c, MPI_Count)

#define WMPI_DEF_IREDUCE_SCATTER_BLOCK(SFX, CT)                                                         \
WMPI_EXPORT int MPI_Ireduce_scatter_block##SFX(const void *sbuf, void *rbuf, CT count, MPI_Datatype t,  \
                                          MPI_Op op, MPI_Comm comm, MPI_Request *req)                   \
{                                                                                                       \
    wargs_t a;                                                                                          \
    int why = rsb_args(C_IREDUCE_SCATTER_BLOCK, sbuf, rbuf, count, t, op, comm, &a);                    \
    NOTE(C_IREDUCE_SCATTER_BLOCK, why);                                                                 \
    if (why != R_WEFT) return PMPI_Ireduce_scatter_block##SFX(sbuf, rbuf, count, t, op, comm, req);     \
    greq_t *g = NULL;                                                                                   \
    int rc = greq_begin(comm, C_IREDUCE_SCATTER_BLOCK, a.e, &g);                                        \
    if (rc != MPI_SUCCESS) return rc;                                                                   \
    return greq_end(comm, C_IREDUCE_SCATTER_BLOCK, g,                                                   \
                    weft_ireduce_scatter(a.s, a.r, a.n, a.t, a.op, a.e->wc, &g->wr), req);              \
}
WMPI_DEF_IREDUCE_SCATTER_BLOCK(, int)
WMPI_DEF_IREDUCE_SCATTER_BLOCK(_c, MPI_Count)

/* ---- reduce ------------------------------------------------------------------------------ */
static int reduce_call_args(int call, const void *sbuf, void *rbuf, MPI_Count count, MPI_Datatype t,
                            MPI_Op op, int root, MPI_Comm comm, wargs_t *a)
{
    int why = call_check(call);
    if (why == R_WEFT) why = reduce_args(count, t, op, &a->t, &a->op);
    if (why == R_WEFT) why = comm_lookup(comm, &a->e);
    int rank = 0, size = 0;
    if (why == R_WEFT && !rank_size(a->e, &rank, &size)) why = R_BAD_COMM;
    if (why == R_WEFT && (root < 0 || root >= size)) why = R_ARG;
    if (why == R_WEFT && (null_buf(sbuf, (size_t)count) ||
                          (rank == root && null_buf(rbuf, (size_t)count))))
        why = R_ARG;
    if (why == R_WEFT && rank != root && sbuf == MPI_IN_PLACE) why = R_ARG;
    a->s = in_place(sbuf);
    a->r = rank == root ? rbuf : NULL;
    a->n = (size_t)count;
    return why;
}

#define WMPI_DEF_REDUCE(SFX, CT)                                                                    \
WMPI_EXPORT int MPI_Reduce##SFX(const void *sbuf, void *rbuf, CT count, MPI_Datatype t, MPI_Op op,  \
                           int root, MPI_Comm comm)                                                 \
{                                                                                                   \
    wargs_t a;                                                                                      \
    int why = reduce_call_args(C_REDUCE, sbuf, rbuf, count, t, op, root, comm, &a);                 \
    NOTE(C_REDUCE, why);                                                                            \
    if (why != R_WEFT) return PMPI_Reduce##SFX(sbuf, rbuf, count, t, op, root, comm);               \
    weft_status_t st = weft_reduce(a.s, a.r, a.n, a.t, a.op, root, a.e->wc);                        \
    return st == WEFT_SUCCESS ? MPI_SUCCESS : weft_failed(comm, C_REDUCE, st);                      \
}
WMPI_DEF_REDUCE(, int)
WMPI_DEF_REDUCE(_c, MPI_Count)

#define WMPI_DEF_IREDUCE(SFX, CT)                                                                    \
WMPI_EXPORT int MPI_Ireduce##SFX(const void *sbuf, void *rbuf, CT count, MPI_Datatype t, MPI_Op op,  \
                            int root, MPI_Comm comm, MPI_Request *req)                               \
{                                                                                                    \
    wargs_t a;                                                                                       \
    int why = reduce_call_args(C_IREDUCE, sbuf, rbuf, count, t, op, root, comm, &a);                 \
    NOTE(C_IREDUCE, why);                                                                            \
    if (why != R_WEFT) return PMPI_Ireduce##SFX(sbuf, rbuf, count, t, op, root, comm, req);          \
    greq_t *g = NULL;                                                                                \
    int rc = greq_begin(comm, C_IREDUCE, a.e, &g);                                                   \
    if (rc != MPI_SUCCESS) return rc;                                                                \
    return greq_end(comm, C_IREDUCE, g,                                                              \
                    weft_ireduce(a.s, a.r, a.n, a.t, a.op, root, a.e->wc, &g->wr), req);             \
}
WMPI_DEF_IREDUCE(, int)
WMPI_DEF_IREDUCE(_c, MPI_Count)

/* ---- bcast ------------------------------------------------------------------------------- */
static int bcast_args(int call, void *buf, MPI_Count count, MPI_Datatype t, int root, MPI_Comm comm,
                      wargs_t *a)
{
    int why = call_check(call);
    if (why == R_WEFT) why = contig_bytes(count, t, &a->n);
    if (why == R_WEFT) why = comm_lookup(comm, &a->e);
    int rank = 0, size = 0;
    if (why == R_WEFT && !rank_size(a->e, &rank, &size)) why = R_BAD_COMM;
    if (why == R_WEFT && (root < 0 || root >= size || null_buf(buf, a->n))) why = R_ARG;
    a->r = buf;
    a->t = WEFT_UINT8;
    return why;
}

#define WMPI_DEF_BCAST(SFX, CT)                                                               \
WMPI_EXPORT int MPI_Bcast##SFX(void *buf, CT count, MPI_Datatype t, int root, MPI_Comm comm)  \
{                                                                                             \
    wargs_t a;                                                                                \
    int why = bcast_args(C_BCAST, buf, count, t, root, comm, &a);                             \
    NOTE(C_BCAST, why);                                                                       \
    if (why != R_WEFT) return PMPI_Bcast##SFX(buf, count, t, root, comm);                     \
    weft_status_t st = weft_bcast(a.r, a.n, a.t, root, a.e->wc);                              \
    return st == WEFT_SUCCESS ? MPI_SUCCESS : weft_failed(comm, C_BCAST, st);                 \
}
WMPI_DEF_BCAST(, int)
WMPI_DEF_BCAST(_c, MPI_Count)

#define WMPI_DEF_IBCAST(SFX, CT)                                                                 \
WMPI_EXPORT int MPI_Ibcast##SFX(void *buf, CT count, MPI_Datatype t, int root, MPI_Comm comm,    \
                           MPI_Request *req)                                                     \
{                                                                                                \
    wargs_t a;                                                                                   \
    int why = bcast_args(C_IBCAST, buf, count, t, root, comm, &a);                               \
    NOTE(C_IBCAST, why);                                                                         \
    if (why != R_WEFT) return PMPI_Ibcast##SFX(buf, count, t, root, comm, req);                  \
    greq_t *g = NULL;                                                                            \
    int rc = greq_begin(comm, C_IBCAST, a.e, &g);                                                \
    if (rc != MPI_SUCCESS) return rc;                                                            \
    return greq_end(comm, C_IBCAST, g, weft_ibcast(a.r, a.n, a.t, root, a.e->wc, &g->wr), req);  \
}
WMPI_DEF_IBCAST(, int)
WMPI_DEF_IBCAST(_c, MPI_Count)

/* ---- allgather and alltoall (blocks of bytes) -------------------------------------------- */
/* The receive block (rcount of rtype per rank) and, unless in place, the send
 * block, which must hold the same bytes. */
static int blocks_args(int call, const void *sbuf, MPI_Count scount, MPI_Datatype st, void *rbuf,
                       MPI_Count rcount, MPI_Datatype rt, MPI_Comm comm, wargs_t *a)
{
    int why = call_check(call);
    size_t sbytes = 0;
    if (why == R_WEFT) why = contig_bytes(rcount, rt, &a->n);
    if (why == R_WEFT && sbuf != MPI_IN_PLACE) why = contig_bytes(scount, st, &sbytes);
    if (why == R_WEFT && sbuf != MPI_IN_PLACE && sbytes != a->n) why = R_SIZES;
    if (why == R_WEFT) why = comm_lookup(comm, &a->e);
    if (why == R_WEFT && (null_buf(rbuf, a->n) || null_buf(sbuf, a->n))) why = R_ARG;
    a->s = in_place(sbuf);
    a->r = rbuf;
    a->t = WEFT_UINT8;
    return why;
}

/* Allgather and alltoall take the same arguments (a block per rank on each
 * side): one definition each for the blocking and the nonblocking form. */
#define WMPI_DEF_BLOCKS(NAME, CALL, WFN, SFX, CT) \
WMPI_EXPORT int MPI_##NAME##SFX(const void *sbuf, CT scount, MPI_Datatype stype, void *rbuf,     \
                              CT rcount, MPI_Datatype rtype, MPI_Comm comm)                         \
{                                                                                                   \
    wargs_t a;                                                                                      \
    int why = blocks_args(CALL, sbuf, scount, stype, rbuf, rcount, rtype, comm, &a);         \
    NOTE(CALL, why);                                                                         \
    if (why != R_WEFT) return PMPI_##NAME##SFX(sbuf, scount, stype, rbuf, rcount, rtype, comm);  \
    weft_status_t st = WFN(a.s, a.r, a.n, a.t, a.e->wc);                                 \
    return st == WEFT_SUCCESS ? MPI_SUCCESS : weft_failed(comm, CALL, st);                   \
}
#define WMPI_DEF_IBLOCKS(NAME, CALL, WFN, SFX, CT) \
WMPI_EXPORT int MPI_##NAME##SFX(const void *sbuf, CT scount, MPI_Datatype stype, void *rbuf,  \
                               CT rcount, MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)    \
{                                                                                                 \
    wargs_t a;                                                                                    \
    int why = blocks_args(CALL, sbuf, scount, stype, rbuf, rcount, rtype, comm, &a);      \
    NOTE(CALL, why);                                                                      \
    if (why != R_WEFT)                                                                            \
        return PMPI_##NAME##SFX(sbuf, scount, stype, rbuf, rcount, rtype, comm, req);         \
    greq_t *g = NULL;                                                                             \
    int rc = greq_begin(comm, CALL, a.e, &g);                                             \
    if (rc != MPI_SUCCESS) return rc;                                                             \
    return greq_end(comm, CALL, g, WFN(a.s, a.r, a.n, a.t, a.e->wc, &g->wr),  \
                    req);                                                                         \
}
WMPI_DEF_BLOCKS(Allgather, C_ALLGATHER, weft_allgather, , int)
WMPI_DEF_BLOCKS(Allgather, C_ALLGATHER, weft_allgather, _c, MPI_Count)
WMPI_DEF_IBLOCKS(Iallgather, C_IALLGATHER, weft_iallgather, , int)
WMPI_DEF_IBLOCKS(Iallgather, C_IALLGATHER, weft_iallgather, _c, MPI_Count)
WMPI_DEF_BLOCKS(Alltoall, C_ALLTOALL, weft_alltoall, , int)
WMPI_DEF_BLOCKS(Alltoall, C_ALLTOALL, weft_alltoall, _c, MPI_Count)
WMPI_DEF_IBLOCKS(Ialltoall, C_IALLTOALL, weft_ialltoall, , int)
WMPI_DEF_IBLOCKS(Ialltoall, C_IALLTOALL, weft_ialltoall, _c, MPI_Count)

/* ---- allgatherv and alltoallv (blocks of their own lengths, in bytes) --------------------- */
/* MPI's counts and displacements (int, or MPI_Count and MPI_Aint for the _c
 * forms; in elements of the datatype) become the byte lengths and offsets
 * (size_t) that Weft takes, the blocks moved as bytes as allgather's are. The
 * arrays are on the stack up to WMPI_VSTACK ranks, malloc'ed beyond; Weft copies
 * them during the call, so they are freed as soon as it returned, the
 * nonblocking call's too. */
#ifndef WMPI_VSTACK
#define WMPI_VSTACK 64 /* the tests build a variant with 1: the malloc'ed arrays on 2 ranks */
#endif
typedef struct vargs {
    size_t *slen, *soff;     /* alltoallv's send blocks (NULL: allgatherv, or in place) */
    size_t *rlen, *roff;     /* the receive blocks (reduce_scatter: rlen, the counts in
                              * elements, and no roff) */
    size_t *heap;            /* the malloc'ed arrays, or NULL */
    weft_status_t st;        /* WEFT_ERR_NO_MEMORY: no room for the arrays, and the rooted
                              * forms' WEFT_ERR_INVALID_ARG (served: reported) */
    int root;                /* gatherv, scatterv: the root (rlen, roff: its blocks, there only) */
    size_t stack[4 * WMPI_VSTACK];
} vargs_t;

/* k (1, 2 or 4) arrays of p entries in v: 1, or 0 (v->st set) without memory. */
static int vargs_alloc(vargs_t *v, int p, int k)
{
    size_t *arr = v->stack;
    if (p > WMPI_VSTACK) {
        arr = v->heap = malloc((size_t)k * (size_t)p * sizeof *arr);
        if (arr == NULL) {
            v->st = WEFT_ERR_NO_MEMORY;
            return 0;
        }
    }
    v->rlen = arr;
    v->roff = k > 1 ? arr + p : NULL;
    v->slen = k > 2 ? arr + 2 * (size_t)p : NULL;
    v->soff = k > 2 ? arr + 3 * (size_t)p : NULL;
    return 1;
}

static void vargs_free(vargs_t *v)
{
    free(v->heap);
    v->heap = NULL;
}

/* p counts and displacements (int, or with large MPI_Count and MPI_Aint) of
 * elements of es bytes into byte lengths and offsets; *any: nonzero when a
 * block holds data. MPI allows negative displacements (the memory before the
 * buffer's address) and Weft's are offsets from the buffer: the offsets are
 * then taken from the lowest block, *shift (bytes, <= 0) moves the buffer's
 * address there, so that every rank serves the call whatever its own
 * displacements (ranks that took different ways would wait for each other).
 * An empty block's displacement is never looked at, as in MPI. R_ARG for a
 * missing array, a negative count or a block whose bytes would not fit a
 * ptrdiff_t (MPI reports or handles them). */
static int v_bytes(int p, const void *counts, const void *displs, int large, size_t es,
                   size_t *len, size_t *off, size_t *any, ptrdiff_t *shift)
{
    *any = 0;
    *shift = 0;
    if (p > 0 && (counts == NULL || displs == NULL)) return R_ARG;
    const MPI_Count lim = (MPI_Count)(es > 1 ? PTRDIFF_MAX / es : PTRDIFF_MAX);
    MPI_Count lo = 0; /* the lowest displacement of a block that holds data, or 0 */
    for (int pass = 0; pass < 2; pass++)
        for (int r = 0; r < p; r++) {
            MPI_Count c = large ? ((const MPI_Count *)counts)[r]
                                : (MPI_Count)((const int *)counts)[r];
            MPI_Count d = large ? (MPI_Count)((const MPI_Aint *)displs)[r]
                                : (MPI_Count)((const int *)displs)[r];
            if (c < 0 || c > lim || (c > 0 && (d > lim || d < -lim))) return R_ARG;
            if (pass == 0) {
                if (c > 0 && d < lo) lo = d;
                continue;
            }
            if (c > 0 && (d - lo > lim || c > lim - (d - lo))) return R_ARG;
            len[r] = (size_t)c * es;
            off[r] = c > 0 ? (size_t)(d - lo) * es : 0;
            *any |= len[r];
        }
    *shift = (ptrdiff_t)lo * (ptrdiff_t)es;
    return R_WEFT;
}

/* allgatherv: the receive type's elements by recvcounts and displs; unless
 * in place, the send block must hold recvcounts[rank]'s bytes. */
static int allgatherv_args(int call, const void *sbuf, MPI_Count scount, MPI_Datatype stype,
                           void *rbuf, const void *rcounts, const void *displs, int large,
                           MPI_Datatype rtype, MPI_Comm comm, wargs_t *a, vargs_t *v)
{
    v->heap = NULL;
    v->st = WEFT_SUCCESS;
    const int placed = sbuf == MPI_IN_PLACE;
    size_t es = 0, sbytes = 0, rany = 0;
    ptrdiff_t rshift = 0;
    int rank = 0, size = 0;
    int why = call_check(call);
    if (why == R_WEFT) why = contig_bytes(1, rtype, &es);
    if (why == R_WEFT && !placed) why = contig_bytes(scount, stype, &sbytes);
    if (why == R_WEFT) why = comm_lookup(comm, &a->e);
    if (why == R_WEFT && !rank_size(a->e, &rank, &size)) why = R_BAD_COMM;
    if (why == R_WEFT && !vargs_alloc(v, size, 2)) return R_WEFT; /* v->st: reported */
    if (why == R_WEFT)
        why = v_bytes(size, rcounts, displs, large, es, v->rlen, v->roff, &rany, &rshift);
    if (why == R_WEFT && !placed && sbytes != v->rlen[rank]) why = R_SIZES;
    if (why == R_WEFT && (null_buf(rbuf, rany) || null_buf(sbuf, sbytes))) why = R_ARG;
    if (why != R_WEFT) vargs_free(v);
    a->s = in_place(sbuf);
    a->r = why == R_WEFT && rshift ? (char *)rbuf + rshift : rbuf;
    a->n = placed || why != R_WEFT ? 0 : sbytes;
    a->t = WEFT_UINT8;
    return why;
}

/* alltoallv: each side by its own type (in place: the receive side only);
 * this rank's block to itself must hold the same bytes on both sides. */
static int alltoallv_args(int call, const void *sbuf, const void *scounts, const void *sdispls,
                          MPI_Datatype stype, void *rbuf, const void *rcounts,
                          const void *rdispls, MPI_Datatype rtype, int large, MPI_Comm comm,
                          wargs_t *a, vargs_t *v)
{
    v->heap = NULL;
    v->st = WEFT_SUCCESS;
    const int placed = sbuf == MPI_IN_PLACE;
    size_t res = 0, ses = 0, rany = 0, sany = 0;
    ptrdiff_t rshift = 0, sshift = 0;
    int rank = 0, size = 0;
    int why = call_check(call);
    if (why == R_WEFT) why = contig_bytes(1, rtype, &res);
    if (why == R_WEFT && !placed) why = contig_bytes(1, stype, &ses);
    if (why == R_WEFT) why = comm_lookup(comm, &a->e);
    if (why == R_WEFT && !rank_size(a->e, &rank, &size)) why = R_BAD_COMM;
    if (why == R_WEFT && !vargs_alloc(v, size, placed ? 2 : 4)) return R_WEFT; /* v->st: reported */
    if (why == R_WEFT)
        why = v_bytes(size, rcounts, rdispls, large, res, v->rlen, v->roff, &rany, &rshift);
    if (why == R_WEFT && !placed)
        why = v_bytes(size, scounts, sdispls, large, ses, v->slen, v->soff, &sany, &sshift);
    if (why == R_WEFT && !placed && v->slen[rank] != v->rlen[rank]) why = R_SIZES;
    if (why == R_WEFT && (null_buf(rbuf, rany) || null_buf(sbuf, sany))) why = R_ARG;
    if (why != R_WEFT) vargs_free(v);
    a->s = placed || why != R_WEFT || !sshift ? in_place(sbuf) : (const char *)sbuf + sshift;
    a->r = why == R_WEFT && rshift ? (char *)rbuf + rshift : rbuf;
    a->t = WEFT_UINT8;
    return why;
}

/* reduce_scatter: a reduction (datatype and op as reduce_scatter_block's)
 * whose result is cut into blocks of recvcounts[r] elements, end to end. The
 * counts (int, or MPI_Count with large) become the size_t array Weft takes
 * (v->rlen, in elements; on the stack up to WMPI_VSTACK ranks, malloc'ed
 * beyond, freed as soon as the Weft call returned). MPI requires the same
 * recvcounts on every rank, so the fall-through decided from them is the
 * same on every rank: a NULL array, a negative count, or a vector whose
 * bytes would not fit a ptrdiff_t go to MPI unchanged (MPI reports them).
 * In place, recvbuf holds the whole vector and the result lands at its
 * start. */
static int reduce_scatter_args(int call, const void *sbuf, void *rbuf, const void *rcounts,
                               int large, MPI_Datatype t, MPI_Op op, MPI_Comm comm, wargs_t *a,
                               vargs_t *v)
{
    v->heap = NULL;
    v->st = WEFT_SUCCESS;
    v->rlen = v->roff = v->slen = v->soff = NULL;
    const int placed = sbuf == MPI_IN_PLACE;
    int rank = 0, size = 0;
    size_t total = 0, own = 0;
    int why = call_check(call);
    if (why == R_WEFT) why = reduce_args(0, t, op, &a->t, &a->op);
    if (why == R_WEFT) why = comm_lookup(comm, &a->e);
    if (why == R_WEFT && !rank_size(a->e, &rank, &size)) why = R_BAD_COMM;
    if (why == R_WEFT && size > 0 && rcounts == NULL) why = R_ARG;
    if (why == R_WEFT && !vargs_alloc(v, size, 1)) return R_WEFT; /* v->st: reported */
    if (why == R_WEFT) {
        const MPI_Count lim = (MPI_Count)(PTRDIFF_MAX / weft_datatype_size(a->t));
        MPI_Count sum = 0;
        for (int r = 0; r < size && why == R_WEFT; r++) {
            MPI_Count c = large ? ((const MPI_Count *)rcounts)[r]
                                : (MPI_Count)((const int *)rcounts)[r];
            if (c < 0 || c > lim - sum) {
                why = R_ARG;
            } else {
                v->rlen[r] = (size_t)c;
                sum += c;
            }
        }
        if (why == R_WEFT) {
            total = (size_t)sum;
            own = v->rlen[rank];
        }
    }
    if (why == R_WEFT && (placed ? null_buf(rbuf, total)
                                 : (null_buf(sbuf, total) || null_buf(rbuf, own))))
        why = R_ARG;
    if (why != R_WEFT) vargs_free(v);
    a->s = in_place(sbuf);
    a->r = rbuf; /* NULL where this rank's block is empty: Weft takes it, as MPI does */
    a->n = total;
    return why;
}

/* The Weft call of a served v-form (wr: the nonblocking forms' request). */
static weft_status_t v_issue(int call, const wargs_t *a, const vargs_t *v, weft_request_t *wr)
{
    weft_comm_t wc = a->e->wc;
    switch (call) {
    case C_ALLGATHERV: return weft_allgatherv(a->s, a->n, a->r, v->rlen, v->roff, a->t, wc);
    case C_IALLGATHERV: return weft_iallgatherv(a->s, a->n, a->r, v->rlen, v->roff, a->t, wc, wr);
    case C_ALLTOALLV:
        return weft_alltoallv(a->s, v->slen, v->soff, a->r, v->rlen, v->roff, a->t, wc);
    case C_IALLTOALLV:
        return weft_ialltoallv(a->s, v->slen, v->soff, a->r, v->rlen, v->roff, a->t, wc, wr);
    case C_GATHERV:
        return weft_gatherv(a->s, a->n, a->r, v->rlen, v->roff, a->t, v->root, wc);
    case C_IGATHERV:
        return weft_igatherv(a->s, a->n, a->r, v->rlen, v->roff, a->t, v->root, wc, wr);
    case C_SCATTERV:
        return weft_scatterv(a->s, v->rlen, v->roff, a->r, a->n, a->t, v->root, wc);
    case C_ISCATTERV:
        return weft_iscatterv(a->s, v->rlen, v->roff, a->r, a->n, a->t, v->root, wc, wr);
    case C_REDUCE_SCATTER: return weft_reduce_scatterv(a->s, a->r, v->rlen, a->t, a->op, wc);
    case C_IREDUCE_SCATTER:
        return weft_ireduce_scatterv(a->s, a->r, v->rlen, a->t, a->op, wc, wr);
    default: return WEFT_ERR_INTERNAL;
    }
}

/* A served v-form, blocking (req NULL) or with a generalized request; the
 * arrays are freed as soon as the Weft call returned. */
static int v_serve(MPI_Comm comm, int call, const wargs_t *a, vargs_t *v, MPI_Request *req)
{
    if (v->st != WEFT_SUCCESS) return weft_failed(comm, call, v->st);
    if (req == NULL) {
        weft_status_t st = v_issue(call, a, v, NULL);
        vargs_free(v);
        return st == WEFT_SUCCESS ? MPI_SUCCESS : weft_failed(comm, call, st);
    }
    greq_t *g = NULL;
    int rc = greq_begin(comm, call, a->e, &g);
    if (rc != MPI_SUCCESS) {
        vargs_free(v);
        return rc;
    }
    weft_status_t st = v_issue(call, a, v, &g->wr);
    vargs_free(v);
    return greq_end(comm, call, g, st, req);
}

/* Each defined twice: int counts and displacements (LARGE 0), and the _c
 * forms' MPI_Count counts and MPI_Aint displacements (LARGE 1). */
#define WMPI_DEF_ALLGATHERV(NAME, CALL, NB, SFX, CT, DT, LARGE)                                   \
WMPI_EXPORT int MPI_##NAME##SFX(const void *sbuf, CT scount, MPI_Datatype stype, void *rbuf,      \
                                const CT rcounts[], const DT displs[], MPI_Datatype rtype,        \
                                MPI_Comm comm WMPI_REQ_PARAM_##NB)                                \
{                                                                                                 \
    wargs_t a;                                                                                    \
    vargs_t v;                                                                                    \
    int why = allgatherv_args(CALL, sbuf, scount, stype, rbuf, rcounts, displs, LARGE, rtype,     \
                              comm, &a, &v);                                                      \
    NOTE(CALL, why);                                                                              \
    if (why != R_WEFT)                                                                            \
        return PMPI_##NAME##SFX(sbuf, scount, stype, rbuf, rcounts, displs, rtype,                \
                                comm WMPI_REQ_ARG_##NB);                                          \
    return v_serve(comm, CALL, &a, &v, WMPI_REQ_##NB);                                            \
}
#define WMPI_DEF_ALLTOALLV(NAME, CALL, NB, SFX, CT, DT, LARGE)                                    \
WMPI_EXPORT int MPI_##NAME##SFX(const void *sbuf, const CT scounts[], const DT sdispls[],         \
                                MPI_Datatype stype, void *rbuf, const CT rcounts[],               \
                                const DT rdispls[], MPI_Datatype rtype,                           \
                                MPI_Comm comm WMPI_REQ_PARAM_##NB)                                \
{                                                                                                 \
    wargs_t a;                                                                                    \
    vargs_t v;                                                                                    \
    int why = alltoallv_args(CALL, sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype,  \
                             LARGE, comm, &a, &v);                                                \
    NOTE(CALL, why);                                                                              \
    if (why != R_WEFT)                                                                            \
        return PMPI_##NAME##SFX(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype,     \
                                comm WMPI_REQ_ARG_##NB);                                          \
    return v_serve(comm, CALL, &a, &v, WMPI_REQ_##NB);                                            \
}
/* The nonblocking forms' extra request argument (NB 1), or none (NB 0). */
#define WMPI_REQ_PARAM_0
#define WMPI_REQ_PARAM_1 , MPI_Request *req
#define WMPI_REQ_ARG_0
#define WMPI_REQ_ARG_1 , req
#define WMPI_REQ_0 NULL
#define WMPI_REQ_1 req
WMPI_DEF_ALLGATHERV(Allgatherv, C_ALLGATHERV, 0, , int, int, 0)
WMPI_DEF_ALLGATHERV(Allgatherv, C_ALLGATHERV, 0, _c, MPI_Count, MPI_Aint, 1)
WMPI_DEF_ALLGATHERV(Iallgatherv, C_IALLGATHERV, 1, , int, int, 0)
WMPI_DEF_ALLGATHERV(Iallgatherv, C_IALLGATHERV, 1, _c, MPI_Count, MPI_Aint, 1)
WMPI_DEF_ALLTOALLV(Alltoallv, C_ALLTOALLV, 0, , int, int, 0)
WMPI_DEF_ALLTOALLV(Alltoallv, C_ALLTOALLV, 0, _c, MPI_Count, MPI_Aint, 1)
WMPI_DEF_ALLTOALLV(Ialltoallv, C_IALLTOALLV, 1, , int, int, 0)
WMPI_DEF_ALLTOALLV(Ialltoallv, C_IALLTOALLV, 1, _c, MPI_Count, MPI_Aint, 1)

/* ---- reduce_scatter (a reduction cut into blocks of their own lengths) -------------------- */
/* int recvcounts (LARGE 0), or the _c forms' MPI_Count (LARGE 1). */
#define WMPI_DEF_REDUCE_SCATTER(NAME, CALL, NB, SFX, CT, LARGE)                                   \
WMPI_EXPORT int MPI_##NAME##SFX(const void *sbuf, void *rbuf, const CT rcounts[], MPI_Datatype t, \
                                MPI_Op op, MPI_Comm comm WMPI_REQ_PARAM_##NB)                     \
{                                                                                                 \
    wargs_t a;                                                                                    \
    vargs_t v;                                                                                    \
    int why = reduce_scatter_args(CALL, sbuf, rbuf, rcounts, LARGE, t, op, comm, &a, &v);         \
    NOTE(CALL, why);                                                                              \
    if (why != R_WEFT)                                                                            \
        return PMPI_##NAME##SFX(sbuf, rbuf, rcounts, t, op, comm WMPI_REQ_ARG_##NB);              \
    return v_serve(comm, CALL, &a, &v, WMPI_REQ_##NB);                                            \
}
WMPI_DEF_REDUCE_SCATTER(Reduce_scatter, C_REDUCE_SCATTER, 0, , int, 0)
WMPI_DEF_REDUCE_SCATTER(Reduce_scatter, C_REDUCE_SCATTER, 0, _c, MPI_Count, 1)
WMPI_DEF_REDUCE_SCATTER(Ireduce_scatter, C_IREDUCE_SCATTER, 1, , int, 0)
WMPI_DEF_REDUCE_SCATTER(Ireduce_scatter, C_IREDUCE_SCATTER, 1, _c, MPI_Count, 1)

/* ---- gather and scatter (rooted blocks) ---------------------------------------------------- */
/* The root's side (many blocks) is mine_* at the root and ignored
 * elsewhere; the one-block side is one_*. For gather: one = send, many =
 * receive, in place = sendbuf at the root; for scatter the other way round. */
static int rooted_args(int call, const void *one_buf, MPI_Count one_count, MPI_Datatype one_type,
                       const void *many_buf, MPI_Count many_count, MPI_Datatype many_type, int root,
                       MPI_Comm comm, wargs_t *a)
{
    int why = call_check(call);
    int rank = 0, size = 0;
    if (why == R_WEFT) why = comm_lookup(comm, &a->e);
    if (why == R_WEFT && !rank_size(a->e, &rank, &size)) why = R_BAD_COMM;
    if (why == R_WEFT && (root < 0 || root >= size)) why = R_ARG;
    if (why != R_WEFT) return why;
    size_t one = 0, many = 0;
    int placed = one_buf == MPI_IN_PLACE;
    if (rank == root) {
        why = contig_bytes(many_count, many_type, &many);
        if (why == R_WEFT && !placed) why = contig_bytes(one_count, one_type, &one);
        if (why == R_WEFT && !placed && one != many) why = R_SIZES;
        if (why == R_WEFT && (null_buf(many_buf, many) || null_buf(one_buf, many))) why = R_ARG;
        a->n = many;
    } else {
        if (placed) return R_ARG;
        why = contig_bytes(one_count, one_type, &one);
        if (why == R_WEFT && null_buf(one_buf, one)) why = R_ARG;
        a->n = one;
    }
    a->t = WEFT_UINT8;
    return why;
}

#define WMPI_DEF_GATHER(SFX, CT)                                                                         \
WMPI_EXPORT int MPI_Gather##SFX(const void *sbuf, CT scount, MPI_Datatype stype, void *rbuf, CT rcount,  \
                           MPI_Datatype rtype, int root, MPI_Comm comm)                                  \
{                                                                                                        \
    wargs_t a;                                                                                           \
    int why = rooted_args(C_GATHER, sbuf, scount, stype, rbuf, rcount, rtype, root, comm, &a);           \
    NOTE(C_GATHER, why);                                                                                 \
    if (why != R_WEFT) return PMPI_Gather##SFX(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);    \
    weft_status_t st = weft_gather(in_place(sbuf), rbuf, a.n, a.t, root, a.e->wc);                       \
    return st == WEFT_SUCCESS ? MPI_SUCCESS : weft_failed(comm, C_GATHER, st);                           \
}
WMPI_DEF_GATHER(, int)
WMPI_DEF_GATHER(_c, MPI_Count)

#define WMPI_DEF_IGATHER(SFX, CT)                                                                \
WMPI_EXPORT int MPI_Igather##SFX(const void *sbuf, CT scount, MPI_Datatype stype, void *rbuf,    \
                            CT rcount, MPI_Datatype rtype, int root, MPI_Comm comm,              \
                            MPI_Request *req)                                                    \
{                                                                                                \
    wargs_t a;                                                                                   \
    int why = rooted_args(C_IGATHER, sbuf, scount, stype, rbuf, rcount, rtype, root, comm, &a);  \
    NOTE(C_IGATHER, why);                                                                        \
    if (why != R_WEFT)                                                                           \
        return PMPI_Igather##SFX(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req);     \
    greq_t *g = NULL;                                                                            \
    int rc = greq_begin(comm, C_IGATHER, a.e, &g);                                               \
    if (rc != MPI_SUCCESS) return rc;                                                            \
    return greq_end(comm, C_IGATHER, g,                                                          \
                    weft_igather(in_place(sbuf), rbuf, a.n, a.t, root, a.e->wc, &g->wr), req);   \
}
WMPI_DEF_IGATHER(, int)
WMPI_DEF_IGATHER(_c, MPI_Count)

#define WMPI_DEF_SCATTER(SFX, CT)                                                                       \
WMPI_EXPORT int MPI_Scatter##SFX(const void *sbuf, CT scount, MPI_Datatype stype, void *rbuf,           \
                            CT rcount, MPI_Datatype rtype, int root, MPI_Comm comm)                     \
{                                                                                                       \
    wargs_t a;                                                                                          \
    int why = rooted_args(C_SCATTER, rbuf, rcount, rtype, sbuf, scount, stype, root, comm, &a);         \
    NOTE(C_SCATTER, why);                                                                               \
    if (why != R_WEFT) return PMPI_Scatter##SFX(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);  \
    weft_status_t st = weft_scatter(sbuf, (void *)in_place(rbuf), a.n, a.t, root, a.e->wc);             \
    return st == WEFT_SUCCESS ? MPI_SUCCESS : weft_failed(comm, C_SCATTER, st);                         \
}
WMPI_DEF_SCATTER(, int)
WMPI_DEF_SCATTER(_c, MPI_Count)

#define WMPI_DEF_ISCATTER(SFX, CT)                                                                 \
WMPI_EXPORT int MPI_Iscatter##SFX(const void *sbuf, CT scount, MPI_Datatype stype, void *rbuf,     \
                             CT rcount, MPI_Datatype rtype, int root, MPI_Comm comm,               \
                             MPI_Request *req)                                                     \
{                                                                                                  \
    wargs_t a;                                                                                     \
    int why = rooted_args(C_ISCATTER, rbuf, rcount, rtype, sbuf, scount, stype, root, comm, &a);   \
    NOTE(C_ISCATTER, why);                                                                         \
    if (why != R_WEFT)                                                                             \
        return PMPI_Iscatter##SFX(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req);      \
    greq_t *g = NULL;                                                                              \
    int rc = greq_begin(comm, C_ISCATTER, a.e, &g);                                                \
    if (rc != MPI_SUCCESS) return rc;                                                              \
    return greq_end(comm, C_ISCATTER, g,                                                           \
                    weft_iscatter(sbuf, (void *)in_place(rbuf), a.n, a.t, root, a.e->wc, &g->wr),  \
                    req);                                                                          \
}
WMPI_DEF_ISCATTER(, int)
WMPI_DEF_ISCATTER(_c, MPI_Count)

/* ---- gatherv and scatterv (rooted blocks of their own lengths) ------------------------------- */
/* As rooted_args: the one-block side is this rank's own (gatherv: send,
 * scatterv: receive; in place at the root: one_buf == MPI_IN_PLACE, its count
 * and type ignored), the many-block side is the root's, by its counts and
 * displacements (into v->rlen and v->roff, at the root only: NULL elsewhere,
 * as MPI allows).
 *
 * Whether the call goes to Weft is decided from what every rank shares
 * alone: the call enabled, the communicator, the root, and the datatypes'
 * layout (a program describes a message with the same layout on both sides:
 * the file's head). The root's arrays are seen by the root only and a rank's
 * own count by itself only: a fall-through decided from them would send
 * that rank to MPI and the others to Weft, each waiting for the other. Their
 * errors (a NULL array, a negative count, a block that overflows, a count
 * other than the root's array says, a NULL buffer with data, MPI_IN_PLACE
 * off the root) are the served call's failure instead: v->st =
 * WEFT_ERR_INVALID_ARG, reported by v_serve through the communicator's error
 * handler, as MPI reports erroneous arguments (MPI_ERRORS_ARE_FATAL aborts
 * the job; with MPI_ERRORS_RETURN the other ranks' call may not complete, as
 * with MPI's own erroneous calls). */
static int rooted_v_args(int call, const void *one_buf, MPI_Count one_count,
                         MPI_Datatype one_type, const void *many_buf, const void *counts,
                         const void *displs, int large, MPI_Datatype many_type, int root,
                         MPI_Comm comm, wargs_t *a, vargs_t *v)
{
    v->heap = NULL;
    v->st = WEFT_SUCCESS;
    v->rlen = v->roff = v->slen = v->soff = NULL;
    v->root = root;
    a->s = NULL;
    a->r = NULL;
    a->n = 0;
    a->t = WEFT_UINT8;
    const int gather = call == C_GATHERV || call == C_IGATHERV;
    const int placed = one_buf == MPI_IN_PLACE;
    int rank = 0, size = 0;
    size_t one_es = 0, many_es = 0;
    int why = call_check(call);
    if (why == R_WEFT) why = comm_lookup(comm, &a->e);
    if (why == R_WEFT && !rank_size(a->e, &rank, &size)) why = R_BAD_COMM;
    if (why == R_WEFT && (root < 0 || root >= size)) why = R_ARG;
    if (why == R_WEFT && rank == root) why = contig_bytes(1, many_type, &many_es);
    if (why == R_WEFT && !placed) why = contig_bytes(1, one_type, &one_es);
    if (why != R_WEFT) return why;
    /* served from here on: what is wrong is reported, never a fall-through */
    const char *bad = NULL;
    size_t own = 0;
    const char *many = many_buf;
    if (placed) {
        if (rank != root) bad = "MPI_IN_PLACE on a rank other than the root";
    } else if (one_count < 0 || (one_es > 0 && one_count > (MPI_Count)(PTRDIFF_MAX / one_es))) {
        bad = "this rank's count is negative or overflows";
    } else {
        own = (size_t)one_count * one_es;
        if (null_buf(one_buf, own)) bad = "NULL buffer for this rank's block";
    }
    if (bad == NULL && rank == root) {
        size_t any = 0;
        ptrdiff_t shift = 0;
        if (!vargs_alloc(v, size, 2)) return R_WEFT; /* v->st: reported */
        if (v_bytes(size, counts, displs, large, many_es, v->rlen, v->roff, &any, &shift) != R_WEFT)
            bad = "the root's counts or displacements are NULL, negative or overflow";
        else if (!placed && own != v->rlen[rank])
            bad = "the root's own block differs in size from its entry in the counts";
        else if (null_buf(many_buf, any))
            bad = "NULL buffer at the root for blocks that are not empty";
        else
            many += shift; /* negative displacements: the lowest block's address */
    }
    if (bad != NULL) {
        wmpi_log("%s: %s: reported as an error", call_names[call], bad);
        vargs_free(v);
        v->st = WEFT_ERR_INVALID_ARG;
        return R_WEFT;
    }
    const void *one = placed ? WEFT_IN_PLACE : one_buf;
    const void *root_side = rank == root ? many : NULL;
    a->s = gather ? one : root_side;
    a->r = (void *)(gather ? root_side : one);
    a->n = own;
    return R_WEFT;
}

/* As WMPI_DEF_ALLGATHERV: int arrays (LARGE 0), or MPI_Count and MPI_Aint (LARGE 1). */
#define WMPI_DEF_GATHERV(NAME, CALL, NB, SFX, CT, DT, LARGE)                                      \
WMPI_EXPORT int MPI_##NAME##SFX(const void *sbuf, CT scount, MPI_Datatype stype, void *rbuf,      \
                                const CT rcounts[], const DT displs[], MPI_Datatype rtype,        \
                                int root, MPI_Comm comm WMPI_REQ_PARAM_##NB)                      \
{                                                                                                 \
    wargs_t a;                                                                                    \
    vargs_t v;                                                                                    \
    int why = rooted_v_args(CALL, sbuf, scount, stype, rbuf, rcounts, displs, LARGE, rtype,      \
                            root, comm, &a, &v);                                                  \
    NOTE(CALL, why);                                                                              \
    if (why != R_WEFT)                                                                            \
        return PMPI_##NAME##SFX(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root,          \
                                comm WMPI_REQ_ARG_##NB);                                          \
    return v_serve(comm, CALL, &a, &v, WMPI_REQ_##NB);                                            \
}
#define WMPI_DEF_SCATTERV(NAME, CALL, NB, SFX, CT, DT, LARGE)                                     \
WMPI_EXPORT int MPI_##NAME##SFX(const void *sbuf, const CT scounts[], const DT displs[],          \
                                MPI_Datatype stype, void *rbuf, CT rcount, MPI_Datatype rtype,    \
                                int root, MPI_Comm comm WMPI_REQ_PARAM_##NB)                      \
{                                                                                                 \
    wargs_t a;                                                                                    \
    vargs_t v;                                                                                    \
    int why = rooted_v_args(CALL, rbuf, rcount, rtype, sbuf, scounts, displs, LARGE, stype,      \
                            root, comm, &a, &v);                                                  \
    NOTE(CALL, why);                                                                              \
    if (why != R_WEFT)                                                                            \
        return PMPI_##NAME##SFX(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root,          \
                                comm WMPI_REQ_ARG_##NB);                                          \
    return v_serve(comm, CALL, &a, &v, WMPI_REQ_##NB);                                            \
}
WMPI_DEF_GATHERV(Gatherv, C_GATHERV, 0, , int, int, 0)
WMPI_DEF_GATHERV(Gatherv, C_GATHERV, 0, _c, MPI_Count, MPI_Aint, 1)
WMPI_DEF_GATHERV(Igatherv, C_IGATHERV, 1, , int, int, 0)
WMPI_DEF_GATHERV(Igatherv, C_IGATHERV, 1, _c, MPI_Count, MPI_Aint, 1)
WMPI_DEF_SCATTERV(Scatterv, C_SCATTERV, 0, , int, int, 0)
WMPI_DEF_SCATTERV(Scatterv, C_SCATTERV, 0, _c, MPI_Count, MPI_Aint, 1)
WMPI_DEF_SCATTERV(Iscatterv, C_ISCATTERV, 1, , int, int, 0)
WMPI_DEF_SCATTERV(Iscatterv, C_ISCATTERV, 1, _c, MPI_Count, MPI_Aint, 1)

/* ---- barrier ---------------------------------------------------------------------------- */
WMPI_EXPORT int MPI_Barrier(MPI_Comm comm)
{
    wmpi_comm_t *e = NULL;
    int why = call_check(C_BARRIER);
    if (why == R_WEFT) why = comm_lookup(comm, &e);
    NOTE(C_BARRIER, why);
    if (why != R_WEFT) return PMPI_Barrier(comm);
    weft_status_t st = weft_barrier(e->wc);
    return st == WEFT_SUCCESS ? MPI_SUCCESS : weft_failed(comm, C_BARRIER, st);
}

WMPI_EXPORT int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req)
{
    wmpi_comm_t *e = NULL;
    int why = call_check(C_IBARRIER);
    if (why == R_WEFT) why = comm_lookup(comm, &e);
    NOTE(C_IBARRIER, why);
    if (why != R_WEFT) return PMPI_Ibarrier(comm, req);
    greq_t *g = NULL;
    int rc = greq_begin(comm, C_IBARRIER, e, &g);
    if (rc != MPI_SUCCESS) return rc;
    return greq_end(comm, C_IBARRIER, g, weft_ibarrier(e->wc, &g->wr), req);
}

