/*
 * node_shm.c - the node's shared-memory path (backends/node.h).
 *
 * The segment: one slot per rank, each on its own cache lines: the rank's
 * progress word and published addresses (written by the rank, read by its
 * peers), its doorbell (written by the peers that wake it) and two inline
 * areas. It is a memfd of the node's first rank, which the others open
 * through /proc/<pid>/fd: no name in /dev/shm, so nothing outlives the
 * processes, however they end.
 *
 * Why cross-memory attach (process_vm_readv) and not a copy into a shared
 * segment: a reduction that reads a peer's buffer directly reads every input
 * byte once and writes every output byte once; staging through a segment adds
 * a write and a read of every byte (the copy in), which for allreduce is
 * about half again the memory traffic of the whole operation, and memory
 * bandwidth is what large collectives on one node are bound by, where the
 * ranks saturate it. Measured on the 2-core machine, which they do not
 * saturate (benchmarks/lab/shm_modes, doc/notes/shm_modes.md): with 4 KiB
 * pages the kernel's per-page pinning made CMA cost 1.1 to 1.5x copy-in's
 * CPU; with huge pages CMA cost 0.7 to 0.9x from 8 MiB up.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ctl.h"
#include "log.h"
#include "node.h"
#include "progress.h"

#define MAGIC 0x5745465453484d31ull /* "WEFTSHM1" */

typedef struct slot {
    _Alignas(64) _Atomic uint64_t prog; /* (seq << 32) | stage: only grows */
    uint64_t sbuf, rbuf;                /* this rank's buffers in its own address space */
    int32_t pid;
    _Alignas(64) _Atomic uint32_t bell; /* doorbell: peers add 1 after they publish */
    _Atomic uint32_t sleeping;          /* the rank sleeps (or is about to) on bell */
    float trial[WEFT__NODE_MODE_KINDS][WEFT__NODE_CLASSES][WEFT__NODE_TRIALS]; /* seconds */
    _Alignas(64) unsigned char inl[2][WEFT__NODE_INLINE];
} slot_t;

typedef struct segment {
    uint64_t magic;
    int32_t size;
    _Alignas(64) slot_t slot[];
} segment_t;

struct weft__node {
    segment_t *seg;
    size_t seg_bytes;
    size_t slots_bytes;  /* the header and the slots; the staging areas follow */
    size_t stage_bytes;  /* one rank's staging area */
    size_t stage_chunk;  /* bytes of a block (weft__node_stage_chunk) */
    weft__node_modes_t modes; /* engine side: the staged/cross-memory policy's state */
    size_t stage_next;   /* engine side: weft__node_stage_take's rotation */
    int rank, size, id;
    pid_t *pid;          /* peers' process ids */
    uint64_t next_seq;   /* engine side: the last number handed out */
    uint64_t done_seq;   /* engine side: operations finished here */
    /* The own doorbell as it was before the first wait since the last idle
     * wait that found a peer behind (armed): a publish after it changed
     * the doorbell, so the idle wait sleeps only while nothing was
     * published since. Written engine side, read by the idle wait (any
     * thread); an older value only makes the sleep end at once. */
    _Atomic uint32_t bell_seen;
    _Atomic int armed;
    int users;           /* idle waits sleeping on its doorbell (under idle_mu) */
    struct weft__node *next_open; /* the process's open nodes (idle wait) */
};

/* ---- the idle wait (weft__progress_idle_set): one per process ------------------ */
/* Sleep on the doorbell of the node whose operation waited last. Several
 * threads may sleep at once (a caller in its wait, the engine in its
 * backoff); `users` counts them, under idle_mu, so that weft__node_close
 * does not unmap a node while a sleeper holds its doorbell (a sleep is
 * short: the backoff's). */
static pthread_mutex_t idle_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(weft__node_t *) last_waiter; /* the node whose wait found nothing: engine side */
static int idle_registered;      /* under idle_mu */

static bool idle_wait(void *arg, long timeout_ns)
{
    WEFT__UNUSED(arg);
    if (pthread_mutex_lock(&idle_mu) != 0) return false;
    weft__node_t *n = atomic_load_explicit(&last_waiter, memory_order_acquire);
    /* only after a wait found a peer behind (else: not waiting on the node) */
    if (n == NULL || !atomic_load_explicit(&n->armed, memory_order_acquire)) {
        pthread_mutex_unlock(&idle_mu);
        return false;
    }
    n->users++;
    pthread_mutex_unlock(&idle_mu);
    slot_t *me = &n->seg->slot[n->rank];
    /* seq_cst: pairs with the publisher's add to bell and load of sleeping */
    atomic_fetch_add_explicit(&me->sleeping, 1, memory_order_seq_cst);
    weft__futex_wait_shared(&me->bell, atomic_load_explicit(&n->bell_seen, memory_order_relaxed),
                            timeout_ns);
    atomic_fetch_sub_explicit(&me->sleeping, 1, memory_order_relaxed);
    /* the next wait that finds a peer behind takes a fresh sample */
    atomic_store_explicit(&n->armed, 0, memory_order_relaxed);
    if (pthread_mutex_lock(&idle_mu) == 0) {
        n->users--;
        pthread_mutex_unlock(&idle_mu);
    }
    return true;
}

/* ---- opening ------------------------------------------------------------------ */
static weft_status_t sys_fail(const char *what, int id)
{
    WEFT__DEBUG("comm %d: shared-memory path off: %s: %s", id, what, strerror(errno));
    return WEFT_ERR_UNSUPPORTED;
}

/* Map the segment: the first rank creates it, the others open it through
 * /proc. Collective over ctl. */
static weft_status_t map_segment(struct weft__ctl *ctl, weft__node_t *n, int *ok)
{
    int fd = -1;
    long who[2] = {0, -1}; /* pid, fd of the first rank */
    *ok = 1;
    if (n->rank == 0) {
        fd = (int)memfd_create("weft-node", MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, (off_t)n->seg_bytes) != 0) {
            sys_fail("memfd", n->id);
            *ok = 0;
        } else {
            who[0] = (long)getpid();
            who[1] = fd;
        }
    }
    WEFT__CHECK(weft__ctl_bcast(ctl, who, sizeof who, 0));
    if (who[1] < 0) {
        *ok = 0;
        return WEFT_SUCCESS;
    }
    if (n->rank != 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/fd/%ld", who[0], who[1]);
        fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            sys_fail(path, n->id);
            *ok = 0;
        }
    }
    if (fd >= 0) {
        void *p = mmap(NULL, n->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            sys_fail("mmap", n->id);
            *ok = 0;
        } else {
            n->seg = p;
        }
    }
    /* Every rank opened it (or failed) before the first closes its fd. */
    int all = 0;
    WEFT__CHECK(weft__ctl_allreduce(ctl, ok, &all, 1, WEFT__CTL_INT, WEFT__CTL_MIN));
    if (fd >= 0 && close(fd) != 0) WEFT__WARN("comm %d: close(memfd): %s", n->id, strerror(errno));
    *ok = all;
    return WEFT_SUCCESS;
}

/* Can this rank read every peer's memory? Each rank publishes a cookie's
 * address and value; every rank reads every peer's. */
static weft_status_t check_reads(struct weft__ctl *ctl, weft__node_t *n, int *ok)
{
    static _Thread_local uint64_t cookie;
    cookie = ((uint64_t)getpid() << 20) ^ 0x5a5a5a5aull;
    uint64_t mine[3] = {(uint64_t)(uintptr_t)&cookie, cookie, (uint64_t)getpid()};
    uint64_t *all = malloc(sizeof mine * (size_t)n->size);
    if (all == NULL) return WEFT_ERR_NO_MEMORY;
    weft_status_t st = weft__ctl_allgather(ctl, mine, all, sizeof mine);
    if (st == WEFT_SUCCESS) {
        for (int q = 0; q < n->size; q++) {
            n->pid[q] = (pid_t)all[3 * q + 2];
            if (q == n->rank) continue;
            uint64_t v = 0;
            struct iovec l = {&v, sizeof v}, r = {(void *)(uintptr_t)all[3 * q], sizeof v};
            ssize_t got = process_vm_readv(n->pid[q], &l, 1, &r, 1, 0);
            if (got != (ssize_t)sizeof v || v != all[3 * q + 1]) {
                sys_fail("process_vm_readv of a peer", n->id);
                *ok = 0;
            }
        }
    }
    free(all);
    WEFT__CHECK(st);
    int both = 0;
    WEFT__CHECK(weft__ctl_allreduce(ctl, ok, &both, 1, WEFT__CTL_INT, WEFT__CTL_MIN));
    *ok = both;
    return WEFT_SUCCESS;
}

/* The path's cost between ranks 0 and 1 (the others wait): alpha from flag
 * round trips through the segment (the fastest batch of BATCH: on a node
 * with more ranks than cores, a mean would measure how often the peer was
 * descheduled, as lib/measure.c says of its ping-pongs), beta from the
 * fastest of READS reads of a 1 MiB buffer of the peer's. Both ranks agree
 * on the larger figures. Collective over ctl. */
static weft_status_t measure(struct weft__ctl *ctl, weft__node_t *n, weft__node_cost_t *cost)
{
    enum { TRIPS = 200, BATCH = 20, BYTES = 1 << 20, READS = 8 };
    double v[2] = {0, 0};
    void *buf = NULL, *tmp = NULL;
    if (n->rank < 2) {
        if (posix_memalign(&buf, 64, BYTES) != 0 || posix_memalign(&tmp, 64, BYTES) != 0) {
            free(buf);
            return WEFT_ERR_NO_MEMORY;
        }
        memset(buf, 1, BYTES);
        memset(tmp, 0, BYTES);
    }
    uint64_t addr[2] = {(uint64_t)(uintptr_t)buf, 0}, all[2 * 2] = {0, 0, 0, 0};
    weft_status_t st = WEFT_SUCCESS;
    /* the addresses of ranks 0 and 1 (others send 0 and read nothing) */
    uint64_t *every = malloc(sizeof addr * (size_t)n->size);
    if (every == NULL) st = WEFT_ERR_NO_MEMORY;
    if (st == WEFT_SUCCESS) st = weft__ctl_allgather(ctl, addr, every, sizeof addr);
    if (st == WEFT_SUCCESS) memcpy(all, every, sizeof all);
    free(every);
    if (st == WEFT_SUCCESS && n->rank < 2) {
        const int peer = 1 - n->rank;
        slot_t *me = &n->seg->slot[n->rank], *pe = &n->seg->slot[peer];
        /* ping-pong on the progress words (sequence 0: before any operation) */
        double t0 = weft__now(), fastest = 1e30;
        for (uint64_t k = 1; k <= TRIPS; k++) {
            if (n->rank == 0) atomic_store_explicit(&me->prog, k, memory_order_release);
            for (unsigned spin = 0; atomic_load_explicit(&pe->prog, memory_order_acquire) < k; spin++) {
                if (spin < 64) weft__cpu_relax();
                else sched_yield();
            }
            if (n->rank == 1) atomic_store_explicit(&me->prog, k, memory_order_release);
            if (k % BATCH == 0) {
                const double t = weft__now(), one = (t - t0) / (2.0 * BATCH);
                if (one < fastest) fastest = one;
                t0 = t;
            }
        }
        v[0] = fastest;
        double best = 1e30;
        for (int k = 0; k < READS; k++) {
            double t = weft__now();
            struct iovec l = {tmp, BYTES}, r = {(void *)(uintptr_t)all[2 * peer], BYTES};
            if (process_vm_readv(n->pid[peer], &l, 1, &r, 1, 0) != BYTES) {
                st = sys_fail("process_vm_readv (measurement)", n->id);
                break;
            }
            t = weft__now() - t;
            if (t < best) best = t;
        }
        v[1] = best / BYTES;
        /* (the words stay below operation 1's: (1 << 32) | stage) */
    }
    int ok = st == WEFT_SUCCESS, allok = 0;
    WEFT__CHECK(weft__ctl_allreduce(ctl, &ok, &allok, 1, WEFT__CTL_INT, WEFT__CTL_MIN));
    double agreed[2] = {0, 0};
    WEFT__CHECK(weft__ctl_allreduce(ctl, v, agreed, 2, WEFT__CTL_DOUBLE, WEFT__CTL_MAX));
    free(buf);
    free(tmp);
    if (!allok) return st != WEFT_SUCCESS ? st : WEFT_ERR_COMM_BROKEN;
    cost->alpha = agreed[0];
    cost->beta = agreed[1];
    return WEFT_SUCCESS;
}

/* Figures measured in this process, by the pair of processes (node ranks 0
 * and 1, by pid) they were measured between: a communicator over the same
 * node's ranks again (every group torch makes, every split) reuses them
 * instead of measuring for some 25 ms. A ring of COST_CACHE entries, under
 * cost_mu (communicators may be made by several threads at once). */
enum { COST_CACHE = 16 };
static struct {
    pid_t a, b; /* a < b */
    weft__node_cost_t cost;
} cost_cache[COST_CACHE];
static unsigned cost_next; /* entries written so far (the ring's cursor) */
static pthread_mutex_t cost_mu = PTHREAD_MUTEX_INITIALIZER;

static bool cost_lookup(pid_t p, pid_t q, weft__node_cost_t *out)
{
    const pid_t a = p < q ? p : q, b = p < q ? q : p;
    bool found = false;
    if (pthread_mutex_lock(&cost_mu) != 0) return false;
    const unsigned used = cost_next < COST_CACHE ? cost_next : COST_CACHE;
    for (unsigned i = 0; i < used && !found; i++)
        if (cost_cache[i].a == a && cost_cache[i].b == b) {
            *out = cost_cache[i].cost;
            found = true;
        }
    pthread_mutex_unlock(&cost_mu);
    return found;
}

static void cost_store(pid_t p, pid_t q, const weft__node_cost_t *c)
{
    if (pthread_mutex_lock(&cost_mu) != 0) return;
    const unsigned i = cost_next++ % COST_CACHE;
    cost_cache[i].a = p < q ? p : q;
    cost_cache[i].b = p < q ? q : p;
    cost_cache[i].cost = *c;
    pthread_mutex_unlock(&cost_mu);
}

/* The path's figures: the ones measured before between the same two
 * processes if every rank still has them (agreed: the larger of each, as
 * measure() agrees), else measured now. Collective over ctl. */
static weft_status_t cached_or_measure(struct weft__ctl *ctl, weft__node_t *n,
                                       weft__node_cost_t *cost)
{
    weft__node_cost_t c = {0, 0};
    int have = cost_lookup(n->pid[0], n->pid[1], &c), all_have = 0;
    WEFT__CHECK(weft__ctl_allreduce(ctl, &have, &all_have, 1, WEFT__CTL_INT, WEFT__CTL_MIN));
    if (all_have) {
        double v[2] = {c.alpha, c.beta}, agreed[2] = {0, 0};
        WEFT__CHECK(weft__ctl_allreduce(ctl, v, agreed, 2, WEFT__CTL_DOUBLE, WEFT__CTL_MAX));
        cost->alpha = agreed[0];
        cost->beta = agreed[1];
        return WEFT_SUCCESS;
    }
    WEFT__CHECK(measure(ctl, n, cost));
    cost_store(n->pid[0], n->pid[1], cost);
    return WEFT_SUCCESS;
}

weft_status_t weft__node_open(struct weft__ctl *ctl, int id, weft__node_t **out,
                              weft__node_cost_t *cost)
{
    *out = NULL;
    weft__node_t *n = calloc(1, sizeof *n);
    const int size = weft__ctl_size(ctl);
    int ok = n != NULL;
    weft_status_t st = WEFT_SUCCESS;
    if (n != NULL) {
        n->rank = weft__ctl_rank(ctl);
        n->size = size;
        n->id = id;
        n->slots_bytes = sizeof(segment_t) + (size_t)size * sizeof(slot_t);
        const size_t per_round = ((size_t)size + 1) * WEFT__NODE_STAGE_AREAS;
        size_t chunk = WEFT__NODE_STAGE_BUDGET / per_round / 64 * 64;
        if (chunk > WEFT__NODE_STAGE_CHUNK) chunk = WEFT__NODE_STAGE_CHUNK;
        n->stage_chunk = chunk < 64 ? 64 : chunk;
        n->stage_bytes = per_round * n->stage_chunk;
        n->seg_bytes = n->slots_bytes + (size_t)size * n->stage_bytes;
        n->pid = calloc((size_t)size, sizeof(pid_t));
        ok = n->pid != NULL;
    }
    /* Agree first on whether every rank has its memory: the steps below are
     * collective. */
    int all = 0;
    WEFT__CHECK_GOTO(weft__ctl_allreduce(ctl, &ok, &all, 1, WEFT__CTL_INT, WEFT__CTL_MIN), st, fail);
    if (!all) {
        st = ok ? WEFT_ERR_COMM_BROKEN : WEFT_ERR_NO_MEMORY;
        goto fail;
    }
#if defined(PR_SET_PTRACER)
    /* Where Yama restricts cross-memory reads to a process's ancestors, allow
     * them from any process of ours (EINVAL without Yama: nothing to do). */
    (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
    WEFT__CHECK_GOTO(map_segment(ctl, n, &ok), st, fail);
    if (!ok) goto off;
    if (n->rank == 0) {
        n->seg->magic = MAGIC;
        n->seg->size = size;
    }
    slot_t *me = &n->seg->slot[n->rank];
    atomic_store_explicit(&me->prog, 0, memory_order_relaxed);
    me->pid = (int32_t)getpid();
    /* Touch this rank's staging areas now: a staged operation's first
     * rounds would otherwise pay the page faults, and the mode trials
     * (lib/coll/shm_common.c) would time them. */
    memset((unsigned char *)n->seg + n->slots_bytes + (size_t)n->rank * n->stage_bytes, 0,
           n->stage_bytes);
    WEFT__CHECK_GOTO(check_reads(ctl, n, &ok), st, fail);
    if (!ok) goto off;
    WEFT__CHECK_GOTO(weft__ctl_barrier(ctl, NULL, NULL), st, fail);
    if (n->seg->magic != MAGIC || n->seg->size != size) {
        WEFT__ERROR("comm %d: the node's segment is not Weft's", id);
        st = WEFT_ERR_INTERNAL;
        goto fail;
    }
    /* Map the peers' staging areas into this process now (a read per page),
     * for the same reason as the touch above. */
    {
        volatile const unsigned char *areas = (unsigned char *)n->seg + n->slots_bytes;
        unsigned char sum = 0;
        for (size_t off = 0; off < (size_t)size * n->stage_bytes; off += 4096) sum ^= areas[off];
        (void)sum;
    }
    if (cost->alpha <= 0) WEFT__CHECK_GOTO(cached_or_measure(ctl, n, cost), st, fail);
    WEFT__CHECK_GOTO(weft__ctl_barrier(ctl, NULL, NULL), st, fail);
    if (pthread_mutex_lock(&idle_mu) == 0) {
        if (!idle_registered) weft__progress_idle_set(idle_wait, NULL);
        idle_registered = 1;
        pthread_mutex_unlock(&idle_mu);
    }
    WEFT__DEBUG("comm %d: shared-memory path on, %d ranks, alpha %.3g s, beta %.3g s/B", id, size,
                cost->alpha, cost->beta);
    *out = n;
    return WEFT_SUCCESS;
off:
    st = WEFT_SUCCESS; /* no path: not an error */
fail:
    weft__node_close(&n);
    return st;
}

void weft__node_close(weft__node_t **node)
{
    weft__node_t *n = *node;
    *node = NULL;
    if (n == NULL) return;
    if (pthread_mutex_lock(&idle_mu) == 0) {
        weft__node_t *expect = n;
        atomic_compare_exchange_strong(&last_waiter, &expect, NULL);
        while (n->users > 0) { /* a sleeper still holds the doorbell: its sleep ends soon */
            pthread_mutex_unlock(&idle_mu);
            sched_yield();
            if (pthread_mutex_lock(&idle_mu) != 0) break;
        }
        pthread_mutex_unlock(&idle_mu);
    }
    if (n->seg != NULL && munmap(n->seg, n->seg_bytes) != 0)
        WEFT__WARN("comm %d: munmap: %s", n->id, strerror(errno));
    free(n->pid);
    free(n);
}

/* ---- operations ------------------------------------------------------------- */
int weft__node_rank(const weft__node_t *n) { return n->rank; }
int weft__node_size(const weft__node_t *n) { return n->size; }

uint64_t weft__node_begin(weft__node_t *n) { return ++n->next_seq; }

bool weft__node_turn(const weft__node_t *n, uint64_t seq) { return n->done_seq + 1 == seq; }

void weft__node_end(weft__node_t *n, uint64_t seq)
{
    if (seq > n->done_seq) n->done_seq = seq;
}

static inline uint64_t word(uint64_t seq, uint32_t stage) { return (seq << 32) | stage; }

void weft__node_publish(weft__node_t *n, uint64_t seq, uint32_t stage)
{
    atomic_store_explicit(&n->seg->slot[n->rank].prog, word(seq, stage), memory_order_release);
    /* Ring every peer's doorbell; wake those that sleep. The add is
     * unconditional: a peer about to sleep compares the doorbell with what
     * it saw before it last looked at the progress words. */
    for (int q = 0; q < n->size; q++) {
        if (q == n->rank) continue;
        slot_t *s = &n->seg->slot[q];
        atomic_fetch_add_explicit(&s->bell, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&s->sleeping, memory_order_seq_cst))
            weft__futex_wake_shared(&s->bell);
    }
}

void weft__node_post(weft__node_t *n, uint64_t seq, const void *sbuf, void *rbuf)
{
    slot_t *me = &n->seg->slot[n->rank];
    me->sbuf = (uint64_t)(uintptr_t)sbuf;
    me->rbuf = (uint64_t)(uintptr_t)rbuf;
    weft__node_publish(n, seq, 1); /* release: the addresses before the stage */
}

bool weft__node_reached(weft__node_t *n, int peer, uint64_t seq, uint32_t stage)
{
    /* the doorbell first: a publish after this load changes it */
    const uint32_t bell = atomic_load_explicit(&n->seg->slot[n->rank].bell, memory_order_seq_cst);
    if (atomic_load_explicit(&n->seg->slot[peer].prog, memory_order_acquire) >= word(seq, stage))
        return true;
    if (!atomic_load_explicit(&n->armed, memory_order_relaxed)) {
        atomic_store_explicit(&n->bell_seen, bell, memory_order_relaxed);
        atomic_store_explicit(&n->armed, 1, memory_order_release);
    }
    if (atomic_load_explicit(&last_waiter, memory_order_relaxed) != n) /* (a poll loop: no store) */
        atomic_store_explicit(&last_waiter, n, memory_order_release);
    return false;
}

bool weft__node_all_reached(weft__node_t *n, uint64_t seq, uint32_t stage)
{
    for (int q = 0; q < n->size; q++)
        if (q != n->rank && !weft__node_reached(n, q, seq, stage)) return false;
    return true;
}

void weft__node_peer_bufs(const weft__node_t *n, int peer, uint64_t *sbuf, uint64_t *rbuf)
{
    const slot_t *s = &n->seg->slot[peer];
    *sbuf = s->sbuf;
    *rbuf = s->rbuf;
}

size_t weft__node_stage_chunk(const weft__node_t *n) { return n->stage_chunk; }

weft__node_modes_t *weft__node_modes(weft__node_t *n) { return &n->modes; }

size_t weft__node_stage_take(weft__node_t *n, size_t rounds)
{
    const size_t base = n->stage_next;
    n->stage_next = (base + rounds) % WEFT__NODE_STAGE_AREAS;
    return base;
}

/* The trial words are plain: a peer reads them only after an acquire of
 * the stage this rank publishes (release) after writing them. */
void weft__node_trial_put(weft__node_t *n, int kind, int cls, int k, double s)
{
    n->seg->slot[n->rank].trial[kind][cls][k] = (float)s;
}

double weft__node_trial_get(const weft__node_t *n, int peer, int kind, int cls, int k)
{
    return n->seg->slot[peer].trial[kind][cls][k];
}

void *weft__node_stage(weft__node_t *n, int peer, size_t t, int result)
{
    unsigned char *base = (unsigned char *)n->seg + n->slots_bytes + (size_t)peer * n->stage_bytes;
    const size_t in_bytes = (size_t)n->size * n->stage_chunk, a = t % WEFT__NODE_STAGE_AREAS;
    if (result) return base + WEFT__NODE_STAGE_AREAS * in_bytes + a * n->stage_chunk;
    return base + a * in_bytes;
}

void *weft__node_inline(weft__node_t *n, int peer, uint64_t seq)
{
    return n->seg->slot[peer].inl[seq & 1];
}

bool weft__node_inline_free(weft__node_t *n, uint64_t seq)
{
    return seq < 3 || weft__node_all_reached(n, seq - 1, 1);
}

weft_status_t weft__node_read(weft__node_t *n, int peer, void *dst, uint64_t src, size_t len)
{
    while (len > 0) {
        struct iovec l = {dst, len}, r = {(void *)(uintptr_t)src, len};
        ssize_t got = process_vm_readv(n->pid[peer], &l, 1, &r, 1, 0);
        if (got <= 0) {
            if (got < 0 && errno == EINTR) continue;
            WEFT__ERROR("comm %d: reading rank %d's memory (pid %d): %s", n->id, peer,
                        (int)n->pid[peer], got < 0 ? strerror(errno) : "nothing read");
            return WEFT_ERR_COMM_BROKEN;
        }
        dst = (char *)dst + got;
        src += (uint64_t)got;
        len -= (size_t)got;
    }
    return WEFT_SUCCESS;
}
