/*
 * shm_modes - a node allreduce of floats, two ways, against the memory floor,
 * in the same processes and the same run: the measurement behind the choice
 * of cross-memory attach for Weft's node shared-memory path
 * (backends/shm/node_shm.c; doc/notes/shm_modes.md has the results).
 *
 *   shm_modes [-p P] [-m MIN:MAX] [-r ROUNDS] [-i ITERS] [-x WARMUP] [-c CHUNK] [--thp]
 *
 * P processes (fork()ed, no MPI), each with its own input and output vector
 * of N bytes of float (malloc'd, touched by their process), N doubling from
 * MIN to MAX. Modes, interleaved round by round (the first mode rotates):
 *
 *   cma     Weft's scheme (lib/coll/shm_common.c): process r reduces block r
 *           of every input, in rank order, chunk by chunk: the peers' chunks
 *           read with process_vm_readv into a chunk-sized scratch, the sum
 *           written into its own output, each chunk published; then it reads
 *           every other block from its owner's output with process_vm_readv,
 *           straight into its own output, as the owner publishes the chunks.
 *           Memory traffic per process: the input once, the output once,
 *           plus the kernel's pinning of every remote page it reads.
 *   copyin  each process copies its input into its slot of a shared segment
 *           (a memfd: no name anywhere), all wait, process r reduces block r
 *           of every slot into a shared result area, chunk by chunk, each
 *           chunk published; then copies the whole result into its output.
 *           Traffic: the cma mode's plus a write and a read of every input
 *           byte (the copy in) and of every output byte (the result area).
 *   floor   every process at once computes c[i] = a[i] + b[i] over N bytes
 *           (three distinct touched vectors): what the memory system gives.
 *
 * Both allreduce modes start with every process having posted (Weft's
 * "addresses published" synchronisation) and end once every process is
 * done reading the others (Weft's WEFT__NODE_DONE), so an operation costs
 * what one of Weft's does. A sample: barrier, ITERS operations, each process
 * takes its own time; the sample is the maximum over processes; the table
 * has the median over ROUNDS samples, per operation, in microseconds.
 * Each mode's output is checked once per size, after the warm-up, against
 * the float sum in rank order computed directly (bit for bit).
 *
 * Buffers get madvise(MADV_NOHUGEPAGE), or MADV_HUGEPAGE with --thp (the
 * private buffers, 2 MiB aligned; the shared segment is shmem, which follows
 * /sys/kernel/mm/transparent_hugepage/shmem_enabled). The header says what
 * the kernel gave (AnonHugePages, ShmemPmdMapped of process 0).
 *
 * Synchronisation: progress words and a barrier in a shared anonymous
 * mapping, spinning then sched_yield (the processes may outnumber the cores).
 * Thread contract: every process is single-threaded; each function below runs
 * on its process's only thread, on that process's own proc_t.
 * Exit 0, 1 on a failed check or system call, 2 on a usage error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <weft.h>

#include "weft_cli.h"

#define PROG "shm_modes"
#define MAXP 64
#define MAX_ROUNDS 1000
#define HUGE_ALIGN ((size_t)2 << 20)
#define STAGE_POSTED 1u
#define STAGE_DONE 0xffffffffu

enum { M_CMA, M_COPYIN, M_FLOOR, NMODES };
static const char *const mode_name[NMODES] = {"cma", "copyin", "floor"};

/* One process's slot of the control mapping; the rank writes it, peers read. */
typedef struct slot {
    _Alignas(64) _Atomic uint64_t prog; /* (op sequence << 32) | stage: only grows */
    uint64_t in, out;                   /* this process's buffers, in its address space */
    int32_t pid;
    double sample, cpu;                 /* seconds per operation of the last sample:
                                         * elapsed, and on the CPU outside waits */
    long bad;                           /* elements that failed the check, per size */
    long huge_kb[2];                    /* AnonHugePages, ShmemPmdMapped (kB) */
} slot_t;

typedef struct ctl {
    _Alignas(64) _Atomic uint32_t bar_count;
    _Alignas(64) _Atomic uint32_t bar_gen;
    _Alignas(64) _Atomic int abort_flag; /* a process failed: everyone leaves */
    slot_t slot[MAXP];
} ctl_t;

typedef struct opts {
    int p;
    size_t lo, hi, chunk;
    long rounds, iters, warmup; /* iters 0: chosen per size */
    int thp;
} opts_t;

/* The state of one process (its own copy after fork). */
typedef struct proc {
    const opts_t *o;
    ctl_t *ctl;
    unsigned char *seg; /* the shared segment: P input slots, then the result */
    size_t seg_bytes;
    int r;
    uint64_t seq;       /* operations so far: the same count in every process */
    size_t n;           /* bytes of the current size */
    float *in, *out, *fa, *fb, *fc;
    unsigned char *ta, *tb; /* chunk scratch */
    double wait_cpu;        /* CPU seconds spent in waits that had to wait */
} proc_t;

static double cpu_now(void);

/* ---- failure ----------------------------------------------------------- */
/* Print once per process and tell the others to leave. Any process. */
static int fail(proc_t *pr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(proc_t *pr, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: process %d: ", PROG, pr->r);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    atomic_store_explicit(&pr->ctl->abort_flag, 1, memory_order_relaxed);
    return -1;
}

/* One step of a wait: pause, then yield; every 1024 steps see whether a
 * process failed (and process 0, whether a child ended early). -1 then. */
static int relax(proc_t *pr, unsigned *spin)
{
    unsigned k = (*spin)++;
    if (k < 64) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        return 0;
    }
    sched_yield();
    if ((k & 1023) != 0) return 0;
    if (atomic_load_explicit(&pr->ctl->abort_flag, memory_order_relaxed)) return -1;
    if (pr->r == 0) {
        int st = 0;
        pid_t w = waitpid(-1, &st, WNOHANG);
        /* (a child that passed the last barrier may exit cleanly while this
         * process still spins in it: the final waitpid then finds ECHILD) */
        if (w > 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
            return fail(pr, "child %d ended during the run (status 0x%x)", (int)w, st);
    }
    return 0;
}

/* Sense-reversing barrier over the P processes. 0, or -1 if one failed. */
static int barrier(proc_t *pr)
{
    ctl_t *c = pr->ctl;
    /* acquire: the generation read before arriving; it cannot move until we do */
    uint32_t gen = atomic_load_explicit(&c->bar_gen, memory_order_acquire);
    /* acq_rel: the last arriver sees every earlier arriver's writes */
    if (atomic_fetch_add_explicit(&c->bar_count, 1, memory_order_acq_rel) == (uint32_t)pr->o->p - 1) {
        atomic_store_explicit(&c->bar_count, 0, memory_order_relaxed);
        /* release: publishes all writes seen so far to the waiters */
        atomic_store_explicit(&c->bar_gen, gen + 1, memory_order_release);
        return 0;
    }
    unsigned spin = 0;
    const double c0 = cpu_now();
    /* acquire: pairs with the release above */
    while (atomic_load_explicit(&c->bar_gen, memory_order_acquire) == gen)
        if (relax(pr, &spin)) return -1;
    pr->wait_cpu += cpu_now() - c0;
    return 0;
}

/* Publish this process's stage of the current operation. */
static void publish(proc_t *pr, uint32_t stage)
{
    /* release: the chunk written before is visible to whoever sees the stage */
    atomic_store_explicit(&pr->ctl->slot[pr->r].prog, (pr->seq << 32) | stage, memory_order_release);
}

/* Wait until process q reached stage of the current operation. */
static int wait_stage(proc_t *pr, int q, uint32_t stage)
{
    const uint64_t want = (pr->seq << 32) | stage;
    _Atomic uint64_t *w = &pr->ctl->slot[q].prog;
    /* acquire: pairs with publish's release */
    if (atomic_load_explicit(w, memory_order_acquire) >= want) return 0;
    /* it has to wait: the CPU clock's cost hides in the wait */
    unsigned spin = 0;
    const double c0 = cpu_now();
    while (atomic_load_explicit(w, memory_order_acquire) < want)
        if (relax(pr, &spin)) return -1;
    pr->wait_cpu += cpu_now() - c0;
    return 0;
}

static int wait_all(proc_t *pr, uint32_t stage)
{
    for (int q = 0; q < pr->o->p; q++)
        if (q != pr->r && wait_stage(pr, q, stage)) return -1;
    return 0;
}

/* ---- the arithmetic ------------------------------------------------------ */
static void add3(float *restrict c, const float *restrict a, const float *restrict b, size_t cnt)
{
    for (size_t i = 0; i < cnt; i++) c[i] = a[i] + b[i];
}

static void add2(float *restrict c, const float *restrict a, size_t cnt)
{
    for (size_t i = 0; i < cnt; i++) c[i] += a[i];
}

/* Process q's input element i: not an integer, so the order of the sum shows. */
static float value(int q, size_t i)
{
    uint32_t h = (uint32_t)i * 2654435761u + (uint32_t)q * 40503u;
    return (float)(h >> 8) * (1.0f / 16777216.0f) + 0.5f * (float)q;
}

/* Byte range of block q (count floats cut into p blocks, as Weft does). */
static void block(const proc_t *pr, int q, size_t *lo, size_t *hi)
{
    const size_t cnt = pr->n / sizeof(float), p = (size_t)pr->o->p;
    *lo = cnt * (size_t)q / p * sizeof(float);
    *hi = cnt * (size_t)(q + 1) / p * sizeof(float);
}

/* len bytes at address src of process q into dst, by cross-memory attach. */
static int cma_read(proc_t *pr, int q, void *dst, uint64_t src, size_t len)
{
    unsigned char *d = dst;
    while (len > 0) {
        struct iovec l = {d, len}, rm = {(void *)(uintptr_t)src, len};
        ssize_t got = process_vm_readv(pr->ctl->slot[q].pid, &l, 1, &rm, 1, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0)
            return fail(pr, "process_vm_readv of %zu bytes from process %d: %s", len, q,
                        got < 0 ? strerror(errno) : "nothing read");
        d += got;
        src += (uint64_t)got;
        len -= (size_t)got;
    }
    return 0;
}

/* ---- the modes: one operation each --------------------------------------- */
/* Where process q's input bytes [off, off+len) are to be read from. */
static const float *cma_source(proc_t *pr, int q, size_t off, size_t len, unsigned char *tmp)
{
    if (q == pr->r) return (const float *)((const unsigned char *)pr->in + off);
    if (cma_read(pr, q, tmp, pr->ctl->slot[q].in + off, len)) return NULL;
    return (const float *)tmp;
}

static int op_cma(proc_t *pr)
{
    const int p = pr->o->p, r = pr->r;
    const size_t ch = pr->o->chunk;
    unsigned char *out = (unsigned char *)pr->out;
    publish(pr, STAGE_POSTED);
    if (wait_all(pr, STAGE_POSTED)) return -1;
    size_t lo, hi;
    block(pr, r, &lo, &hi);
    uint32_t ci = 0;
    for (size_t off = lo; off < hi; off += ch, ci++) {
        const size_t len = hi - off < ch ? hi - off : ch, cnt = len / sizeof(float);
        const float *a = cma_source(pr, 0, off, len, pr->ta);
        const float *b = a ? cma_source(pr, 1, off, len, pr->tb) : NULL;
        if (b == NULL) return -1;
        float *acc = (float *)(out + off);
        add3(acc, a, b, cnt);
        for (int q = 2; q < p; q++) {
            if ((a = cma_source(pr, q, off, len, pr->ta)) == NULL) return -1;
            add2(acc, a, cnt);
        }
        publish(pr, 2 + ci);
    }
    for (int k = 1; k < p; k++) {
        const int q = (r + k) % p;
        block(pr, q, &lo, &hi);
        ci = 0;
        for (size_t off = lo; off < hi; off += ch, ci++) {
            const size_t len = hi - off < ch ? hi - off : ch;
            if (wait_stage(pr, q, 2 + ci)) return -1;
            if (cma_read(pr, q, out + off, pr->ctl->slot[q].out + off, len)) return -1;
        }
    }
    publish(pr, STAGE_DONE);
    return wait_all(pr, STAGE_DONE);
}

static int op_copyin(proc_t *pr)
{
    const int p = pr->o->p, r = pr->r;
    const size_t ch = pr->o->chunk, n = pr->n;
    unsigned char *res = pr->seg + (size_t)p * n, *out = (unsigned char *)pr->out;
    memcpy(pr->seg + (size_t)r * n, pr->in, n);
    publish(pr, STAGE_POSTED);
    if (wait_all(pr, STAGE_POSTED)) return -1;
    size_t lo, hi;
    block(pr, r, &lo, &hi);
    uint32_t ci = 0;
    for (size_t off = lo; off < hi; off += ch, ci++) {
        const size_t len = hi - off < ch ? hi - off : ch, cnt = len / sizeof(float);
        float *acc = (float *)(res + off);
        add3(acc, (const float *)(pr->seg + off), (const float *)(pr->seg + n + off), cnt);
        for (int q = 2; q < p; q++) add2(acc, (const float *)(pr->seg + (size_t)q * n + off), cnt);
        publish(pr, 2 + ci);
    }
    for (int k = 0; k < p; k++) {
        const int q = (r + k) % p;
        block(pr, q, &lo, &hi);
        ci = 0;
        for (size_t off = lo; off < hi; off += ch, ci++) {
            const size_t len = hi - off < ch ? hi - off : ch;
            if (q != r && wait_stage(pr, q, 2 + ci)) return -1;
            memcpy(out + off, res + off, len);
        }
    }
    publish(pr, STAGE_DONE);
    return wait_all(pr, STAGE_DONE);
}

static int op_floor(proc_t *pr)
{
    add3(pr->fc, pr->fa, pr->fb, pr->n / sizeof(float));
    return 0;
}

static int run_op(proc_t *pr, int m)
{
    pr->seq++;
    switch (m) {
    case M_CMA: return op_cma(pr);
    case M_COPYIN: return op_copyin(pr);
    default: return op_floor(pr);
    }
}

/* ---- buffers --------------------------------------------------------------- */
static void *alloc_buf(proc_t *pr, size_t n, const char *what)
{
    void *b = NULL;
    /* whole pages (2 MiB ones with --thp): the advice covers no one else's bytes */
    const size_t al = pr->o->thp ? HUGE_ALIGN : (size_t)sysconf(_SC_PAGESIZE);
    const size_t len = (n + al - 1) / al * al;
    int rc = posix_memalign(&b, al, len);
    if (rc != 0) {
        fail(pr, "allocating %zu bytes for %s: %s", len, what, strerror(rc));
        return NULL;
    }
    if (madvise(b, len, pr->o->thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0) {
        fail(pr, "madvise of %s (%zu bytes): %s", what, len, strerror(errno));
        free(b);
        return NULL;
    }
    return b;
}

static void free_bufs(proc_t *pr)
{
    free(pr->in);
    free(pr->out);
    free(pr->fa);
    free(pr->fb);
    free(pr->fc);
    pr->in = pr->out = pr->fa = pr->fb = pr->fc = NULL;
}

/* Allocate and fill this process's buffers for n bytes. */
static int setup_size(proc_t *pr, size_t n)
{
    pr->n = n;
    const size_t cnt = n / sizeof(float);
    if (!(pr->in = alloc_buf(pr, n, "the input")) || !(pr->out = alloc_buf(pr, n, "the output")) ||
        !(pr->fa = alloc_buf(pr, n, "floor a")) || !(pr->fb = alloc_buf(pr, n, "floor b")) ||
        !(pr->fc = alloc_buf(pr, n, "floor c"))) {
        free_bufs(pr);
        return -1;
    }
    for (size_t i = 0; i < cnt; i++) {
        pr->in[i] = value(pr->r, i);
        pr->fa[i] = value(0, i);
        pr->fb[i] = value(1, i);
    }
    memset(pr->out, 0, n);
    memset(pr->fc, 0, n);
    slot_t *me = &pr->ctl->slot[pr->r];
    me->in = (uint64_t)(uintptr_t)pr->in;
    me->out = (uint64_t)(uintptr_t)pr->out;
    me->bad = 0;
    return 0;
}

/* Elements of this process's result of mode m that differ (bit for bit)
 * from the sum computed here. */
static long check(const proc_t *pr, int m)
{
    const size_t cnt = pr->n / sizeof(float);
    long bad = 0;
    for (size_t i = 0; i < cnt; i++) {
        float want, got;
        if (m == M_FLOOR) {
            want = pr->fa[i] + pr->fb[i];
            got = pr->fc[i];
        } else {
            want = value(0, i) + value(1, i);
            for (int q = 2; q < pr->o->p; q++) want += value(q, i);
            got = pr->out[i];
        }
        if (memcmp(&want, &got, sizeof want) != 0) {
            if (bad == 0)
                fprintf(stderr, "%s: process %d: %s, %zu bytes: element %zu is %.9g, not %.9g\n",
                        PROG, pr->r, mode_name[m], pr->n, i, (double)got, (double)want);
            bad++;
        }
    }
    return bad;
}

/* AnonHugePages and ShmemPmdMapped of this process, kB (-1 unknown). */
static void huge_kb(long kb[2])
{
    kb[0] = kb[1] = -1;
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (f == NULL) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        long v;
        if (sscanf(line, "AnonHugePages: %ld", &v) == 1) kb[0] = v;
        else if (sscanf(line, "ShmemPmdMapped: %ld", &v) == 1) kb[1] = v;
    }
    fclose(f);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double clock_s(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) return 0.0; /* (both clocks exist on Linux) */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static double now(void) { return clock_s(CLOCK_MONOTONIC); }
static double cpu_now(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

static double median(double *v, long n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}


/* ---- one process's run ----------------------------------------------------- */
/* Every size, every mode; process 0 prints. 0, or -1 after fail(). */
static int run(proc_t *pr)
{
    /* Peers read each other with process_vm_readv: allow it where the Yama
     * module would restrict it to ancestors (per process, not inherited;
     * EINVAL without Yama: fine). */
#if defined(PR_SET_PTRACER)
    (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
    const opts_t *o = pr->o;
    ctl_t *c = pr->ctl;
    double (*samples)[MAX_ROUNDS] = NULL; /* [mode]: elapsed, then [NMODES + mode]: CPU */
    if (pr->r == 0 && (samples = calloc(2 * NMODES, sizeof *samples)) == NULL)
        return fail(pr, "out of memory");
    pr->ta = malloc(o->chunk);
    pr->tb = malloc(o->chunk);
    int rc = -1;
    if (pr->ta == NULL || pr->tb == NULL) {
        fail(pr, "out of memory for the chunk scratch");
        goto out;
    }
    memset(pr->ta, 0, o->chunk);
    memset(pr->tb, 0, o->chunk);
    c->slot[pr->r].pid = (int32_t)getpid();
    if (barrier(pr)) goto out;
    if (pr->r == 0)
        printf("%8s %10s %10s %9s %9s %12s %11s %11s %11s %8s\n", "size", "cma_us", "copyin_us",
               "floor_us", "cma/floor", "copyin/floor", "cma_cpu", "copyin_cpu", "floor_cpu",
               "huge_MiB");
    for (size_t n = o->lo; n <= o->hi; n *= 2) {
        if (setup_size(pr, n)) goto out;
        huge_kb(c->slot[pr->r].huge_kb);
        if (barrier(pr)) goto out_size; /* every address posted */
        const long iters = o->iters > 0 ? o->iters : (long)((8u << 20) / n > 0 ? (8u << 20) / n : 1);
        long bad = 0;
        for (int m = 0; m < NMODES; m++) {
            for (long w = 0; w < o->warmup; w++)
                if (run_op(pr, m)) goto out_size;
            if (barrier(pr)) goto out_size;
            /* NaN everywhere a result goes (the result area too: a stale
             * correct result there would hide a read before the publish) */
            memset(m == M_FLOOR ? (void *)pr->fc : (void *)pr->out, 0xff, n);
            if (m == M_COPYIN) {
                size_t lo, hi;
                block(pr, pr->r, &lo, &hi);
                memset(pr->seg + (size_t)o->p * n + lo, 0xff, hi - lo);
            }
            if (barrier(pr) || run_op(pr, m) || barrier(pr)) goto out_size;
            bad += check(pr, m);
        }
        c->slot[pr->r].bad = bad;
        for (long k = 0; k < o->rounds; k++) {
            for (int j = 0; j < NMODES; j++) {
                const int m = (int)((k + j) % NMODES);
                if (barrier(pr)) goto out_size;
                pr->wait_cpu = 0;
                double t0 = now(), u0 = cpu_now();
                for (long i = 0; i < iters; i++)
                    if (run_op(pr, m)) goto out_size;
                c->slot[pr->r].sample = (now() - t0) / (double)iters;
                c->slot[pr->r].cpu = (cpu_now() - u0 - pr->wait_cpu) / (double)iters;
                if (barrier(pr)) goto out_size;
                if (pr->r == 0) {
                    double mx = 0, mc = 0;
                    for (int q = 0; q < o->p; q++) {
                        if (c->slot[q].sample > mx) mx = c->slot[q].sample;
                        if (c->slot[q].cpu > mc) mc = c->slot[q].cpu;
                    }
                    samples[m][k] = mx;
                    samples[NMODES + m][k] = mc;
                }
            }
        }
        if (barrier(pr)) goto out_size; /* nobody reads anybody's buffers after this */
        if (pr->r == 0) {
            long badall = 0;
            for (int q = 0; q < o->p; q++) badall += c->slot[q].bad;
            if (badall != 0) {
                fail(pr, "%zu bytes: %ld elements wrong over all processes and modes", n, badall);
                goto out_size;
            }
            double med[2 * NMODES];
            for (int m = 0; m < 2 * NMODES; m++) med[m] = median(samples[m], o->rounds);
            char sz[32];
            if (n >= (1u << 20)) snprintf(sz, sizeof sz, "%zuM", n >> 20);
            else snprintf(sz, sizeof sz, "%zuK", n >> 10);
            printf("%8s %10.1f %10.1f %9.1f %9.2f %12.2f %11.1f %11.1f %11.1f %8.1f\n", sz,
                   med[M_CMA] * 1e6, med[M_COPYIN] * 1e6, med[M_FLOOR] * 1e6,
                   med[M_CMA] / med[M_FLOOR], med[M_COPYIN] / med[M_FLOOR],
                   med[NMODES + M_CMA] * 1e6, med[NMODES + M_COPYIN] * 1e6,
                   med[NMODES + M_FLOOR] * 1e6,
                   c->slot[0].huge_kb[0] >= 0 ? (double)c->slot[0].huge_kb[0] / 1024.0 : -1.0);
            fflush(stdout);
        }
        free_bufs(pr);
        if (barrier(pr)) goto out; /* process 0's verdict before the next size */
        if (atomic_load_explicit(&c->abort_flag, memory_order_relaxed)) goto out;
        if (n > o->hi / 2) break;
        continue;
    out_size:
        free_bufs(pr);
        goto out;
    }
    rc = 0;
out:
    free(pr->ta);
    free(pr->tb);
    free(samples);
    return rc;
}

/* ---- command line ------------------------------------------------------------ */
static void usage(FILE *f)
{
    fprintf(f,
            "Usage: %s [OPTION]...\n"
            "Node allreduce of floats on P fork()ed processes: cross-memory attach (cma)\n"
            "against a copy into a shared segment (copyin) and the memory floor c = a + b\n"
            "(floor), interleaved; median over rounds of the slowest process, in us.\n"
            "  -p P             processes (2 .. %d; default 2)\n"
            "  -m MIN:MAX       bytes per process, doubling (default 256K:64M; multiples of 4)\n"
            "  -r ROUNDS        samples per mode and size (1 .. %d; default 9)\n"
            "  -i ITERS         operations per sample (default: 8M / size, at least 1)\n"
            "  -x WARMUP        untimed operations per mode and size (default 2)\n"
            "  -c CHUNK         bytes per published chunk (default 128K; multiple of 4)\n"
            "  --thp            madvise(MADV_HUGEPAGE) on the buffers (default MADV_NOHUGEPAGE)\n"
            "  -h, --help       this text\n"
            "  -V, --version    version and build options\n",
            PROG, MAXP, MAX_ROUNDS);
}

static int parse(int argc, char **argv, opts_t *o, int *done)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'}, {"version", no_argument, NULL, 'V'},
        {"thp", no_argument, NULL, 'T'},  {NULL, 0, NULL, 0}};
    int c;
    long v;
    opterr = 0;
    *done = 0;
    while ((c = getopt_long(argc, argv, ":p:m:r:i:x:c:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (weft_cli_parse_long(optarg, 2, MAXP, &v) != 0)
                return weft_cli_usage_error(PROG, "bad -p '%s' (2 .. %d)", optarg, MAXP);
            o->p = (int)v;
            break;
        case 'm':
            if (weft_cli_parse_range(optarg, &o->lo, &o->hi) != 0 || o->lo < 64 || o->lo % 4 ||
                o->hi > ((size_t)1 << 30))
                return weft_cli_usage_error(PROG, "bad -m '%s' (MIN:MAX, 64 .. 1G, multiples of 4)", optarg);
            break;
        case 'r':
            if (weft_cli_parse_long(optarg, 1, MAX_ROUNDS, &o->rounds) != 0)
                return weft_cli_usage_error(PROG, "bad -r '%s' (1 .. %d)", optarg, MAX_ROUNDS);
            break;
        case 'i':
        case 'x':
            if (weft_cli_parse_long(optarg, c == 'x' ? 0 : 1, 1000000, c == 'i' ? &o->iters : &o->warmup) != 0)
                return weft_cli_usage_error(PROG, "bad -%c '%s' (%d .. 1000000)", c, optarg, c == 'x' ? 0 : 1);
            break;
        case 'c':
            if (weft_cli_parse_size(optarg, &o->chunk) != 0 || o->chunk < 64 || o->chunk % 4 ||
                o->chunk > ((size_t)64 << 20))
                return weft_cli_usage_error(PROG, "bad -c '%s' (64 .. 64M, a multiple of 4)", optarg);
            break;
        case 'T': o->thp = 1; break;
        case 'h': usage(stdout); *done = 1; return 0;
        case 'V': weft_cli_version(stdout, PROG); *done = 1; return 0;
        default: return weft_cli_getopt_error(PROG, c, argv, longopts);
        }
    }
    if (optind < argc) return weft_cli_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
    return 0;
}

static void read_line(const char *path, char *buf, size_t len)
{
    snprintf(buf, len, "?");
    FILE *f = fopen(path, "r");
    if (f == NULL) return;
    if (fgets(buf, (int)len, f)) buf[strcspn(buf, "\n")] = '\0';
    fclose(f);
}

int main(int argc, char **argv)
{
    opts_t o = {.p = 2, .lo = 256u << 10, .hi = 64u << 20, .chunk = 128u << 10,
                .rounds = 9, .iters = 0, .warmup = 2, .thp = 0};
    int done = 0, urc = parse(argc, argv, &o, &done);
    if (urc != 0 || done) return urc;
    if (o.lo % 4 || o.hi % 4 || o.lo > o.hi)
        return weft_cli_usage_error(PROG, "sizes: MIN <= MAX, multiples of 4 (%zu:%zu)", o.lo, o.hi);

    /* The control mapping and the shared segment, mapped before fork: every
     * process sees them at the same address. The segment is a memfd (no name
     * in /dev/shm; it goes with the last mapping). */
    ctl_t *c = mmap(NULL, sizeof *c, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (c == MAP_FAILED) {
        fprintf(stderr, "%s: mmap of the control area: %s\n", PROG, strerror(errno));
        return 1;
    }
    const size_t seg_bytes = ((size_t)o.p + 1) * o.hi;
    int fd = memfd_create("weft-shm_modes", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)seg_bytes) != 0) {
        fprintf(stderr, "%s: memfd of %zu bytes: %s\n", PROG, seg_bytes, strerror(errno));
        if (fd >= 0) close(fd);
        munmap(c, sizeof *c);
        return 1;
    }
    unsigned char *seg = mmap(NULL, seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (seg == MAP_FAILED) {
        fprintf(stderr, "%s: mmap of the segment (%zu bytes): %s\n", PROG, seg_bytes, strerror(errno));
        munmap(c, sizeof *c);
        return 1;
    }
    if (madvise(seg, seg_bytes, o.thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0)
        fprintf(stderr, "%s: note: madvise of the segment: %s\n", PROG, strerror(errno));

    char thp_sys[128], shm_sys[128];
    read_line("/sys/kernel/mm/transparent_hugepage/enabled", thp_sys, sizeof thp_sys);
    read_line("/sys/kernel/mm/transparent_hugepage/shmem_enabled", shm_sys, sizeof shm_sys);
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) != 3) load[0] = load[1] = load[2] = -1;
    printf("# %s (Weft %s): node allreduce of float, %d processes, chunk %zu B, %ld rounds, "
           "warm-up %ld\n", PROG, weft_version_string(), o.p, o.chunk, o.rounds, o.warmup);
    printf("# pages: %s; THP enabled %s, shmem %s; %ld CPUs online, load %.2f %.2f %.2f\n",
           o.thp ? "MADV_HUGEPAGE" : "MADV_NOHUGEPAGE", thp_sys, shm_sys,
           sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2]);
    printf("# per operation, median over rounds of the slowest process: elapsed (_us) and "
           "on the CPU outside waits\n# (_cpu, us, user + system: the work, less sensitive to "
           "a loaded machine); huge_MiB: process 0's AnonHugePages\n");
    fflush(stdout);

    pid_t kids[MAXP];
    int nkids = 0, rc = 0;
    const pid_t parent = getpid();
    proc_t pr = {.o = &o, .ctl = c, .seg = seg, .seg_bytes = seg_bytes, .r = 0};
    for (int q = 1; q < o.p; q++) {
        pid_t k = fork();
        if (k < 0) {
            fail(&pr, "fork: %s", strerror(errno));
            rc = 1;
            break;
        }
        if (k == 0) {
            pr.r = q;
            /* die with process 0 (it may have ended before this line) */
            if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != parent) _exit(1);
            _exit(run(&pr) == 0 ? 0 : 1);
        }
        kids[nkids++] = k;
    }
    if (rc == 0 && run(&pr) != 0) rc = 1;
    if (rc != 0) /* the children leave on the abort flag; make sure */
        for (int k = 0; k < nkids; k++) (void)kill(kids[k], SIGTERM);
    for (int k = 0; k < nkids; k++) {
        int st = 0;
        pid_t w;
        while ((w = waitpid(kids[k], &st, 0)) < 0 && errno == EINTR) {}
        /* (relax may have reaped a child that ended early: ECHILD then, already failed) */
        if (w < 0 && errno != ECHILD) {
            fprintf(stderr, "%s: waitpid: %s\n", PROG, strerror(errno));
            rc = 1;
        } else if (w > 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
            if (rc == 0) fprintf(stderr, "%s: process %d failed (status 0x%x)\n", PROG, k + 1, st);
            rc = 1;
        }
    }
    munmap(seg, seg_bytes);
    munmap(c, sizeof *c);
    return rc;
}
