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
 * Bounded: the buffer holds TRACE_CAPACITY events (about 64 bytes each,
 * allocated up front as virtual memory, resident as it fills). When it is full
 * later events are dropped and counted; the count is written in the file
 * ("otherData": {"dropped": N}) and reported at finalize. The trace therefore
 * always covers the start of the run.
 *
 * Thread contract: events are appended from any thread (a slot is reserved
 * with one atomic fetch-add, then written by its owner only). The step-time
 * table is touched only on the engine side (progress lock held). Writing
 * happens in weft_finalize after the engine stopped, with no other thread in
 * Weft.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft_internal.h"

#define TRACE_CAPACITY (1u << 20)
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
} ev_t;

static struct {
    ev_t *ev;
    _Atomic uint32_t next;    /* slots reserved (may exceed capacity) */
    _Atomic uint64_t dropped;
    struct { const weft__op_t *op; double t; } step[STEP_SLOTS];
} T;

static ev_t *reserve(void)
{
    if (T.ev == NULL) return NULL;
    uint32_t i = atomic_fetch_add_explicit(&T.next, 1, memory_order_relaxed);
    if (i >= TRACE_CAPACITY) {
        /* keep `next` from wrapping around on very long runs */
        atomic_store_explicit(&T.next, TRACE_CAPACITY, memory_order_relaxed);
        atomic_fetch_add_explicit(&T.dropped, 1, memory_order_relaxed);
        return NULL;
    }
    return &T.ev[i];
}

static void op_event(const weft__op_t *op, const char *cat, double ts, double dur, int a, int b)
{
    ev_t *e = reserve();
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
}

weft_status_t weft__trace_init(void)
{
    if (T.ev == NULL) {
        T.ev = malloc((size_t)TRACE_CAPACITY * sizeof(ev_t));
        if (T.ev == NULL) {
            WEFT__ERROR("trace: cannot allocate %u events", TRACE_CAPACITY);
            return WEFT_ERR_NO_MEMORY;
        }
    }
    atomic_store_explicit(&T.next, 0, memory_order_relaxed);
    atomic_store_explicit(&T.dropped, 0, memory_order_relaxed);
    memset(T.step, 0, sizeof T.step);
    return WEFT_SUCCESS;
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
    op_event(op, "start", op->t_issue, op->t_start - op->t_issue, 0, 0);
    if (st != WEFT_INPROGRESS) {
        /* All the work happened inside start(): that is the op's one step. */
        op_event(op, "step", op->t_start, weft__now() - op->t_start, op->phase, op->stepno);
        return;
    }
    double *t = step_slot(op, 1);
    if (t) *t = op->t_start;
}

void weft__trace_step(const weft__op_t *op, int phase, int stepno, double t_end)
{
    double *t = step_slot(op, 0);
    double t0 = t ? *t : op->t_start;
    op_event(op, "step", t0, t_end - t0, phase, stepno);
    if (t) *t = t_end;
}

void weft__trace_done(const weft__op_t *op, weft_status_t st, double t_end)
{
    /* An op that never started (failed at once, finalize) spans from issue. */
    double t0 = op->started ? op->t_start : op->t_issue;
    op_event(op, "complete", t0, t_end - t0, (int)st, 0);
    step_forget(op);
}

void weft__trace_span(const weft__comm_t *c, const char *cat, const char *what, double t0,
                      double t1)
{
    ev_t *e = reserve();
    if (e == NULL) return;
    *e = (ev_t){.ts = t0, .dur = t1 > t0 ? t1 - t0 : 0, .cat = cat, .what = what,
                .kind = -1, .algo = -1, .comm = c ? c->id : -1};
}

/* ---- writing ----------------------------------------------------------------------- */
static void trace_path(char *out, size_t cap, int rank)
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
    uint32_t n = atomic_load_explicit(&T.next, memory_order_relaxed);
    if (n > TRACE_CAPACITY) n = TRACE_CAPACITY;
    uint64_t dropped = atomic_load_explicit(&T.dropped, memory_order_relaxed);
    int rank = weft__g.world_rank;
    char path[1100];
    trace_path(path, sizeof path, rank);
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
    for (uint32_t i = 0; i < n; i++) {
        int c = T.ev[i].comm;
        if (c < 0 || c >= MAXNAMED || named[c]) continue;
        named[c] = 1;
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                   "\"args\":{\"name\":\"comm %d\"}}", rank, c, c);
    }
    for (uint32_t i = 0; i < n; i++) {
        fputs(",\n", f);
        write_event(f, &T.ev[i], rank);
    }
    fprintf(f, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"weft_version\":\"%s\",\"rank\":%d,"
               "\"events\":%u,\"capacity\":%u,\"dropped\":%llu}}\n",
            weft_version_string(), rank, n, TRACE_CAPACITY, (unsigned long long)dropped);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) WEFT__ERROR("WEFT_TRACE: writing %s failed", path);
    if (dropped)
        WEFT__WARN("WEFT_TRACE: buffer full (%u events): %llu later events were dropped from %s",
                   TRACE_CAPACITY, (unsigned long long)dropped, path);
out:
    free(T.ev);
    T.ev = NULL;
}
