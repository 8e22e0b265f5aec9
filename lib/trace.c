/*
 * trace.c - a Chrome/Perfetto trace of the engine's timeline (WEFT_TRACE).
 *
 * Events are kept in memory and written at weft_finalize, one file per rank:
 * WEFT_TRACE=out.json gives out.RANK.json; a path without ".json" gets
 * ".RANK.json" appended. The file is a JSON object {"traceEvents": [...]}
 * that chrome://tracing and ui.perfetto.dev load. Every event is a complete
 * event (ph "X", ts and dur in microseconds of CLOCK_MONOTONIC, so files of
 * ranks on one node line up), with pid = rank in MPI_COMM_WORLD and tid = the
 * communicator's id; "M" events name them. Per operation:
 *   cat "issue"    name "issue <op>"       at issue (dur 0)
 *   cat "start"    name "queued <op>"      issue -> start (time waiting to start)
 *   cat "step"     name "step P.S"         one per algorithm step (phase P, step S),
 *                                          from the previous step boundary
 *   cat "complete" name "<op> <algorithm>" start -> completion
 * and, outside operations: cat "wait" (a caller blocked in weft_wait or a
 * blocking call) and cat "stream" (weft__obs_stream_wait).
 *
 * Bounded: the buffer holds WEFT_TRACE_EVENTS events per rank (default 1 Mi,
 * about 64 bytes each, allocated up front as virtual memory, resident as it
 * fills). WEFT_TRACE_KEEP says what a full buffer keeps: "first" (default)
 * drops later events and so covers the start of the run; "last" is a ring
 * that overwrites the oldest and so covers its end. Either way the count
 * of events lost is written in the file ("otherData": {"dropped": N}) and
 * reported at finalize.
 *
 * Clocks: at weft_init every rank learns the offset of its clock from rank
 * 0's (trace_sync_clock: 0 on rank 0's node, which shares its clock; measured
 * by round trips between node leaders elsewhere; WEFT_TRACE_CLOCK=measure
 * measures on every rank) and writes it as
 * otherData.clock_offset_us; `weft-trace merge` adds it
 * to the rank's timestamps to put all ranks on one timeline. The files of
 * one run share otherData.run_id.
 *
 * Thread contract: events are appended from any thread (a slot is reserved
 * with one atomic fetch-add, claimed with an atomic exchange of its busy
 * flag, written, then published with its sequence number; a writer that
 * finds its slot still claimed by a writer a whole ring earlier drops its
 * event and counts it). The step-time
 * table is touched only on the engine side (progress lock held). Writing
 * happens in weft_finalize after the engine stopped, with no other thread in
 * Weft.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "weft_internal.h"

#define STEP_SLOTS 4096u /* open-addressed: op -> time of its last step boundary */
#define STEP_PROBE 16u

typedef struct ev {
    double ts, dur;        /* seconds (weft__now) */
    const char *cat;       /* constant strings */
    const char *what;      /* constant, or NULL: built from kind/algo */
    uint64_t bytes;
    uint32_t tag;
    int16_t kind, algo;    /* -1: not an operation event */
    int32_t comm;
    int32_t a, b;          /* step: phase, step; complete: status */
    uint64_t seq;          /* reservation index + 1 once written; 0 never written */
    _Atomic uint32_t busy; /* claimed by a writer */
} ev_t;

static struct {
    ev_t *ev;
    uint64_t cap;             /* slots (WEFT_TRACE_EVENTS) */
    int keep_last;            /* WEFT_TRACE_KEEP=last: a ring */
    _Atomic uint64_t next;    /* slots reserved (may exceed cap) */
    _Atomic uint64_t dropped; /* events not recorded (first: buffer full; last: slot busy) */
    double clock_offset;      /* seconds to add to this rank's clock to get rank 0's */
    double clock_rtt;         /* the round trip the offset came from (0 on rank 0) */
    unsigned long long run_id;
    struct { const weft__op_t *op; double t; } step[STEP_SLOTS];
} T;

/* A slot to write, claimed, with its reservation index in *seq; NULL if the
 * event is dropped. Every non-NULL reserve is followed by publish(). */
static ev_t *reserve(uint64_t *seq)
{
    if (T.ev == NULL) return NULL;
    uint64_t i = atomic_fetch_add_explicit(&T.next, 1, memory_order_relaxed);
    if (i >= T.cap && !T.keep_last) {
        atomic_fetch_add_explicit(&T.dropped, 1, memory_order_relaxed);
        return NULL;
    }
    ev_t *e = &T.ev[i % T.cap];
    /* acquire: the previous writer's fields are complete before ours go in */
    if (atomic_exchange_explicit(&e->busy, 1, memory_order_acquire) != 0) {
        atomic_fetch_add_explicit(&T.dropped, 1, memory_order_relaxed);
        return NULL;
    }
    *seq = i;
    return e;
}

/* release: the fields are complete before the slot can be claimed again
 * (finalize reads after the engine and every caller left Weft). */
static void publish(ev_t *e, uint64_t seq)
{
    e->seq = seq + 1;
    atomic_store_explicit(&e->busy, 0, memory_order_release);
}

static void op_event(const weft__op_t *op, const char *cat, double ts, double dur, int a, int b)
{
    uint64_t seq;
    ev_t *e = reserve(&seq);
    if (e == NULL) return;
    e->ts = ts;
    e->dur = dur > 0 ? dur : 0;
    e->cat = cat;
    e->what = NULL;
    e->bytes = op->bytes;
    e->tag = op->tag;
    e->kind = (int16_t)op->kind;
    e->algo = (int16_t)op->algo;
    e->comm = op->comm ? op->comm->id : -1;
    e->a = a;
    e->b = b;
    publish(e, seq);
}

/* Ranks of one node read the same CLOCK_MONOTONIC (one kernel): their offset
 * from their node's first rank is exactly 0, and measuring it through MPI
 * would only add noise (an oversubscribed node's round trips take
 * milliseconds). So the first rank of each node (the leaders) measures its
 * offset from rank 0's clock, and passes it to the ranks of its node: rank 0
 * answers each leader's pings in turn with its clock, and a leader keeps the
 * offset of its fastest round trip, rank 0's time at the reply minus the
 * midpoint of the round trip (error at most half that round trip).
 * Collective over MPI_COMM_WORLD. */
#define SYNC_ROUNDS 16
static weft_status_t trace_sync_clock(void)
{
    weft_status_t st = WEFT_SUCCESS;
    weft__ctl_t *world = weft__ctl_world(), *node = NULL, *leaders = NULL;
    double sync[2] = {0, 0}; /* offset, round trip */
    /* WEFT_TRACE_CLOCK=measure: every rank measures (each its own "node"). */
    if (weft__cfg.trace_clock_measure)
        WEFT__CHECK(weft__ctl_split(world, weft__g.world_rank, 0, &node));
    else
        WEFT__CHECK(weft__ctl_split_node(world, &node));
    int node_rank = weft__ctl_rank(node);
    /* World rank 0 is rank 0 of its node (key 0 keeps MPI_COMM_WORLD's order)
     * and so rank 0 of the leaders. */
    WEFT__CHECK_GOTO(weft__ctl_split(world, node_rank == 0 ? 0 : -1, weft__g.world_rank, &leaders),
                     st, out);
    if (leaders != NULL) {
        int lr = weft__ctl_rank(leaders), ln = weft__ctl_size(leaders);
        if (lr == 0) {
            for (int r = 1; r < ln; r++) {
                for (int k = 0; k < SYNC_ROUNDS; k++) {
                    char ping;
                    WEFT__CHECK_GOTO(weft__ctl_recv(leaders, &ping, 1, r, 0), st, out);
                    double t = weft__now();
                    WEFT__CHECK_GOTO(weft__ctl_send(leaders, &t, sizeof t, r, 0), st, out);
                }
            }
        } else {
            double best = -1;
            for (int k = 0; k < SYNC_ROUNDS; k++) {
                char ping = 0;
                double t_root = 0;
                double t0 = weft__now();
                WEFT__CHECK_GOTO(weft__ctl_send(leaders, &ping, 1, 0, 0), st, out);
                WEFT__CHECK_GOTO(weft__ctl_recv(leaders, &t_root, sizeof t_root, 0, 0), st, out);
                double t1 = weft__now();
                if (best < 0 || t1 - t0 < best) {
                    best = t1 - t0;
                    sync[0] = t_root - 0.5 * (t0 + t1);
                }
            }
            sync[1] = best;
        }
    }
    WEFT__CHECK_GOTO(weft__ctl_bcast(node, sync, sizeof sync, 0), st, out);
    if (weft__g.world_rank == 0)
        T.run_id = ((unsigned long long)getpid() << 32) ^ (unsigned long long)(weft__now() * 1e6);
    WEFT__CHECK_GOTO(weft__ctl_bcast(world, &T.run_id, sizeof T.run_id, 0), st, out);
    T.clock_offset = sync[0];
    T.clock_rtt = sync[1];
out:
    weft__ctl_free(&leaders);
    weft__ctl_free(&node);
    return st;
}

/* weft_init, on every rank of MPI_COMM_WORLD (collective: the clock sync). */
weft_status_t weft__trace_init(void)
{
    if (T.ev == NULL) {
        T.cap = weft__cfg.trace_events > 0 ? weft__cfg.trace_events : 1024;
        T.ev = calloc((size_t)T.cap, sizeof(ev_t));
        if (T.ev == NULL) {
            WEFT__ERROR("trace: cannot allocate %llu events (WEFT_TRACE_EVENTS)",
                        (unsigned long long)T.cap);
            return WEFT_ERR_NO_MEMORY;
        }
    }
    T.keep_last = weft__cfg.trace_keep_last;
    atomic_store_explicit(&T.next, 0, memory_order_relaxed);
    atomic_store_explicit(&T.dropped, 0, memory_order_relaxed);
    memset(T.step, 0, sizeof T.step);
    weft_status_t st = trace_sync_clock();
    if (st != WEFT_SUCCESS) {
        free(T.ev);
        T.ev = NULL;
    }
    return st;
}

/* ---- step boundaries (engine side) ------------------------------------------------ */
static size_t step_hash(const weft__op_t *op) { return ((uintptr_t)op >> 6) * 2654435761u; }

static double *step_slot(const weft__op_t *op, int insert)
{
    size_t h = step_hash(op);
    for (unsigned i = 0; i < STEP_PROBE; i++) {
        size_t k = (h + i) % STEP_SLOTS;
        if (T.step[k].op == op) return &T.step[k].t;
        if (insert && T.step[k].op == NULL) {
            T.step[k].op = op;
            return &T.step[k].t;
        }
    }
    return NULL; /* table crowded: the step falls back to the op's start time */
}

static void step_forget(const weft__op_t *op)
{
    size_t h = step_hash(op);
    for (unsigned i = 0; i < STEP_PROBE; i++) {
        size_t k = (h + i) % STEP_SLOTS;
        if (T.step[k].op == op) {
            T.step[k].op = NULL;
            return;
        }
    }
}

/* ---- events ---------------------------------------------------------------------- */
void weft__trace_issue(const weft__op_t *op) { op_event(op, "issue", op->t_issue, 0, 0, 0); }

void weft__trace_start(const weft__op_t *op, weft_status_t st)
{
    op_event(op, "start", op->t_issue, op->task.t_start - op->t_issue, 0, 0);
    if (st != WEFT_INPROGRESS) {
        /* All the work happened inside start(): that is the op's one step. */
        op_event(op, "step", op->task.t_start, weft__now() - op->task.t_start, op->phase, op->stepno);
        return;
    }
    double *t = step_slot(op, 1);
    if (t) *t = op->task.t_start;
}

void weft__trace_step(const weft__op_t *op, int phase, int stepno, double t_end)
{
    double *t = step_slot(op, 0);
    double t0 = t ? *t : op->task.t_start;
    op_event(op, "step", t0, t_end - t0, phase, stepno);
    if (t) *t = t_end;
}

void weft__trace_done(const weft__op_t *op, weft_status_t st, double t_end)
{
    /* An op that never started (failed at once, finalize) spans from issue. */
    double t0 = op->task.started ? op->task.t_start : op->t_issue;
    op_event(op, "complete", t0, t_end - t0, (int)st, 0);
    step_forget(op);
}

void weft__trace_span(const weft__comm_t *c, const char *cat, const char *what, double t0,
                      double t1)
{
    uint64_t seq;
    ev_t *e = reserve(&seq);
    if (e == NULL) return;
    e->ts = t0;
    e->dur = t1 > t0 ? t1 - t0 : 0;
    e->cat = cat;
    e->what = what;
    e->bytes = 0;
    e->tag = 0;
    e->kind = -1;
    e->algo = -1;
    e->comm = c ? c->id : -1;
    e->a = e->b = 0;
    publish(e, seq);
}

/* ---- writing ----------------------------------------------------------------------- */
void weft__trace_file(char *out, size_t cap, int rank)
{
    const char *p = weft__cfg.trace_path;
    size_t n = strlen(p);
    if (n > 5 && strcmp(p + n - 5, ".json") == 0)
        snprintf(out, cap, "%.*s.%d.json", (int)(n - 5), p, rank);
    else
        snprintf(out, cap, "%s.%d.json", p, rank);
}

/* A JSON string from a constant name: only [A-Za-z0-9_ .:-] are expected; any
 * other byte is replaced so the file stays valid JSON. */
static void put_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        fputc(ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\' ? ch : '?', f);
    }
    fputc('"', f);
}

static void write_event(FILE *f, const ev_t *e, int rank)
{
    const char *op = e->kind >= 0 ? weft__opkind_name((weft__opkind_t)e->kind) : NULL;
    const char *algo = e->algo >= 0 ? weft_algo_name((weft_algo_t)e->algo) : NULL;
    if (op == NULL) op = "op";
    if (algo == NULL) algo = "none";
    char name[96];
    if (e->what) snprintf(name, sizeof name, "%s", e->what);
    else if (!strcmp(e->cat, "issue")) snprintf(name, sizeof name, "issue %s", op);
    else if (!strcmp(e->cat, "start")) snprintf(name, sizeof name, "queued %s", op);
    else if (!strcmp(e->cat, "step")) snprintf(name, sizeof name, "step %d.%d", e->a, e->b);
    else snprintf(name, sizeof name, "%s %s", op, algo);
    fputs("{\"name\":", f);
    put_str(f, name);
    fputs(",\"cat\":", f);
    put_str(f, e->cat);
    fprintf(f, ",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f", rank, e->comm,
            1e6 * e->ts, 1e6 * e->dur);
    if (e->kind >= 0) {
        fprintf(f, ",\"args\":{\"op\":\"%s\",\"algorithm\":\"%s\",\"bytes\":%llu,\"seq\":%u", op, algo,
                (unsigned long long)e->bytes, e->tag);
        if (!strcmp(e->cat, "step")) fprintf(f, ",\"phase\":%d,\"step\":%d", e->a, e->b);
        if (!strcmp(e->cat, "complete")) fprintf(f, ",\"status\":%d", e->a);
        fputc('}', f);
    }
    fputc('}', f);
}

void weft__trace_fini(void)
{
    if (T.ev == NULL) return;
    uint64_t n = atomic_load_explicit(&T.next, memory_order_relaxed);
    uint64_t first = n > T.cap ? n - T.cap : 0; /* ring: the last cap reservations */
    if (!T.keep_last && n > T.cap) n = T.cap, first = 0;
    uint64_t dropped = atomic_load_explicit(&T.dropped, memory_order_relaxed);
    uint64_t overwritten = T.keep_last ? first : 0;
    int rank = weft__g.world_rank;
    char path[1100];
    weft__trace_file(path, sizeof path, rank);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        WEFT__ERROR("WEFT_TRACE: cannot write %s: %s", path, strerror(errno));
        goto out;
    }
    fprintf(f, "{\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
               "\"args\":{\"name\":\"weft rank %d\"}}",
            rank, rank);
    /* Name each communicator's track once. */
    enum { MAXNAMED = 1024 };
    static unsigned char named[MAXNAMED];
    memset(named, 0, sizeof named);
    uint64_t written = 0;
    for (uint64_t j = first; j < n; j++) {
        const ev_t *e = &T.ev[j % T.cap];
        if (e->seq != j + 1) continue; /* dropped (slot busy) */
        int c = e->comm;
        if (c < 0 || c >= MAXNAMED || named[c]) continue;
        named[c] = 1;
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                   "\"args\":{\"name\":\"comm %d\"}}", rank, c, c);
    }
    for (uint64_t j = first; j < n; j++) {
        const ev_t *e = &T.ev[j % T.cap];
        if (e->seq != j + 1) continue;
        fputs(",\n", f);
        write_event(f, e, rank);
        written++;
    }
    fprintf(f, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"weft_version\":\"%s\",\"rank\":%d,"
               "\"ranks\":%d,\"run_id\":\"%llx\",\"clock\":\"CLOCK_MONOTONIC\",\"clock_sync\":\"%s\","
               "\"clock_offset_us\":%.3f,\"clock_rtt_us\":%.3f,\"events\":%llu,\"capacity\":%llu,"
               "\"keep\":\"%s\",\"dropped\":%llu,\"overwritten\":%llu}}\n",
            weft_version_string(), rank, weft__g.world_size, T.run_id,
            weft__cfg.trace_clock_measure ? "measured" : "shared on a node, measured across",
            1e6 * T.clock_offset,
            1e6 * T.clock_rtt, (unsigned long long)written, (unsigned long long)T.cap,
            T.keep_last ? "last" : "first", (unsigned long long)dropped,
            (unsigned long long)overwritten);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) WEFT__ERROR("WEFT_TRACE: writing %s failed", path);
    if (dropped || overwritten)
        WEFT__WARN("WEFT_TRACE: buffer of %llu events full: %llu %s events %s from %s",
                   (unsigned long long)T.cap, (unsigned long long)(dropped + overwritten),
                   T.keep_last ? "earlier" : "later",
                   T.keep_last ? "overwritten (WEFT_TRACE_KEEP=last)" : "dropped", path);
out:
    free(T.ev);
    T.ev = NULL;
}
