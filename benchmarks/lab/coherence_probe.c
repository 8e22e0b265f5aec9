/*
 * coherence_probe.c - what a staged hand-off between two cores costs: one
 * thread (the writer, on CPU A) fills a buffer, the other (the reader, on
 * CPU B) copies it out, in turns, as the node path's staged mode does with
 * its staging areas (doc/design.md, the shared-memory path's staged mode). With one buffer the
 * writer rewrites lines the reader has just read (still in the reader's
 * cache: every write is a coherence round trip); with N buffers used in
 * rotation it rewrites lines read N turns ago. Printed per size and N: the
 * writer's and the reader's rate and the time of one turn (write + copy),
 * medians over rounds; one run also shows how the host placed the vCPUs
 * (doc/notes/node_measurements.md: a slow placement is slow at every N).
 *
 * Lab program (not installed): plain C and two threads, Weft only for the
 * command-line conventions and --version. Thread contract: main starts the
 * reader and both hand turns over through one atomic word.
 *
 * Exit 0, 1 on a failed system call, 2 on a usage error.
 */
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "weft_cli.h"

#define PROG "coherence_probe"
#define MAX_BUFS 64
#define MAX_ROUNDS 101

typedef struct opts {
    size_t lo, hi;     /* buffer sizes, doubling */
    long bufs[8];      /* rotation lengths to run */
    int nbufs;
    long rounds, iters;
    long cpu_w, cpu_r; /* -1: not pinned */
} opts_t;

typedef struct shared {
    unsigned char *buf[MAX_BUFS];
    unsigned char *dst;
    size_t bytes;
    long nbuf, iters;
    _Atomic long turn;  /* 2k: the writer's turn k; 2k + 1: the reader's */
    double read_s;      /* the reader's copy time over the sample */
    long cpu;
    int pin_failed;
} shared_t;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int pin(long cpu)
{
    if (cpu < 0) return 0;
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET((int)cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

/* Spin briefly, then yield: the other thread has a core of its own when pinned. */
static void await(_Atomic long *w, long v)
{
    for (unsigned k = 0; atomic_load_explicit(w, memory_order_acquire) != v; k++)
        if (k > 256) sched_yield();
}

static void *reader(void *arg)
{
    shared_t *s = arg;
    if (pin(s->cpu) != 0) s->pin_failed = 1;
    for (long i = 0; i < s->iters; i++) {
        await(&s->turn, 2 * i + 1);
        double t0 = now();
        memcpy(s->dst, s->buf[i % s->nbuf], s->bytes);
        s->read_s += now() - t0;
        atomic_store_explicit(&s->turn, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: %s [OPTION]...\n"
            "Two threads hand buffers over as a staged copy does: the writer fills one, the\n"
            "reader copies it out, in turns; with N buffers in rotation the writer rewrites\n"
            "lines the reader read N turns ago. Medians over rounds of the writer's and the\n"
            "reader's GB/s and of the time of one turn.\n"
            "  -m MIN:MAX       buffer bytes, doubling (default 64K:512K; multiples of 64)\n"
            "  -n N[,N...]      rotation lengths (1 .. %d; default 1,8)\n"
            "  -r ROUNDS        samples per size and N (1 .. %d; default 7)\n"
            "  -i ITERS         turns per sample (default: 64M / size, at least 16)\n"
            "  -c A,B           the writer's and the reader's CPU (default 0,1;\n"
            "                   -1,-1: not pinned)\n"
            "  -h, --help       this text\n"
            "  -V, --version    version and build options\n",
            PROG, MAX_BUFS, MAX_ROUNDS);
}

static int parse(int argc, char **argv, opts_t *o, int *done)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'}, {"version", no_argument, NULL, 'V'}, {NULL, 0, NULL, 0}};
    *o = (opts_t){.lo = 64 << 10, .hi = 512 << 10, .bufs = {1, 8}, .nbufs = 2, .rounds = 7,
                  .cpu_w = 0, .cpu_r = 1};
    int c;
    while ((c = getopt_long(argc, argv, "m:n:r:i:c:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'm':
            if (weft_cli_parse_range(optarg, &o->lo, &o->hi) != 0 || o->lo < 64 || o->lo % 64 ||
                o->hi % 64 || o->hi > (1ul << 30))
                return weft_cli_usage_error(
                    PROG, "bad -m '%s' (MIN:MAX, 64 .. 1G, multiples of 64)", optarg);
            break;
        case 'n': {
            o->nbufs = 0;
            char *save = NULL, *copy = strdup(optarg);
            if (copy == NULL) return weft_cli_usage_error(PROG, "out of memory");
            for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                long v = 0;
                if (o->nbufs == 8 || weft_cli_parse_long(tok, 1, MAX_BUFS, &v) != 0) {
                    free(copy);
                    return weft_cli_usage_error(PROG, "bad -n '%s' (up to 8 of 1 .. %d)", optarg,
                                                MAX_BUFS);
                }
                o->bufs[o->nbufs++] = v;
            }
            free(copy);
            if (o->nbufs == 0) return weft_cli_usage_error(PROG, "bad -n '%s'", optarg);
            break;
        }
        case 'r':
            if (weft_cli_parse_long(optarg, 1, MAX_ROUNDS, &o->rounds) != 0)
                return weft_cli_usage_error(PROG, "bad -r '%s' (1 .. %d)", optarg, MAX_ROUNDS);
            break;
        case 'i':
            if (weft_cli_parse_long(optarg, 1, 100000000, &o->iters) != 0)
                return weft_cli_usage_error(PROG, "bad -i '%s' (1 .. 100000000)", optarg);
            break;
        case 'c':
            if (sscanf(optarg, "%ld,%ld", &o->cpu_w, &o->cpu_r) != 2 || o->cpu_w < -1 ||
                o->cpu_r < -1 || o->cpu_w >= CPU_SETSIZE || o->cpu_r >= CPU_SETSIZE)
                return weft_cli_usage_error(PROG, "bad -c '%s' (A,B: CPU numbers, or -1)", optarg);
            break;
        case 'h': usage(stdout); *done = 1; return 0;
        case 'V': weft_cli_version(stdout, PROG); *done = 1; return 0;
        default: return weft_cli_getopt_error(PROG, c, argv, longopts);
        }
    }
    if (optind < argc) return weft_cli_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
    return 0;
}

/* One sample: iters turns over nbuf buffers of bytes. */
static int sample(shared_t *s, double *w_s, double *r_s, double *turn_s)
{
    pthread_t th;
    s->read_s = 0;
    s->pin_failed = 0;
    atomic_store(&s->turn, 0);
    int rc = pthread_create(&th, NULL, reader, s);
    if (rc != 0) {
        fprintf(stderr, "%s: pthread_create: %s\n", PROG, strerror(rc));
        return 1;
    }
    double write_s = 0, t0 = now();
    for (long i = 0; i < s->iters; i++) {
        await(&s->turn, 2 * i);
        double a = now();
        memset(s->buf[i % s->nbuf], (int)(i & 0xff), s->bytes);
        write_s += now() - a;
        atomic_store_explicit(&s->turn, 2 * i + 1, memory_order_release);
    }
    await(&s->turn, 2 * s->iters);
    double all = now() - t0;
    rc = pthread_join(th, NULL);
    if (rc != 0) {
        fprintf(stderr, "%s: pthread_join: %s\n", PROG, strerror(rc));
        return 1;
    }
    if (s->pin_failed) {
        fprintf(stderr, "%s: cannot pin the reader to CPU %ld\n", PROG, s->cpu);
        return 1;
    }
    const double bytes = (double)s->bytes * (double)s->iters;
    *w_s = bytes / write_s / 1e9;
    *r_s = bytes / s->read_s / 1e9;
    *turn_s = all / (double)s->iters * 1e6;
    return 0;
}

int main(int argc, char **argv)
{
    opts_t o;
    int done = 0;
    int rc = parse(argc, argv, &o, &done);
    if (rc != 0 || done) return rc;
    if (pin(o.cpu_w) != 0) {
        fprintf(stderr, "%s: cannot pin the writer to CPU %ld\n", PROG, o.cpu_w);
        return 1;
    }
    long most = 1;
    for (int k = 0; k < o.nbufs; k++)
        if (o.bufs[k] > most) most = o.bufs[k];
    shared_t s = {.cpu = o.cpu_r};
    for (long k = 0; k < most; k++)
        if (posix_memalign((void **)&s.buf[k], 4096, o.hi) != 0) s.buf[k] = NULL;
    if (posix_memalign((void **)&s.dst, 4096, o.hi) != 0) s.dst = NULL;
    int ok = s.dst != NULL;
    for (long k = 0; k < most; k++) ok = ok && s.buf[k] != NULL;
    if (!ok) {
        fprintf(stderr, "%s: cannot allocate %ld buffers of %zu bytes\n", PROG, most + 1, o.hi);
        rc = 1;
        goto out;
    }
    for (long k = 0; k < most; k++) memset(s.buf[k], 1, o.hi);
    memset(s.dst, 1, o.hi);
    printf("# %s: writer on CPU %ld, reader on CPU %ld; medians of %ld rounds\n", PROG, o.cpu_w,
           o.cpu_r, o.rounds);
    printf("%-10s %5s %12s %12s %12s\n", "# bytes", "bufs", "write_GBps", "read_GBps", "turn_us");
    for (size_t b = o.lo; b <= o.hi; b *= 2) {
        for (int k = 0; k < o.nbufs; k++) {
            double w[MAX_ROUNDS], r[MAX_ROUNDS], t[MAX_ROUNDS];
            s.bytes = b;
            s.nbuf = o.bufs[k];
            s.iters = o.iters > 0 ? o.iters : (long)((64ul << 20) / b);
            if (s.iters < 16) s.iters = 16;
            for (long i = 0; i < o.rounds; i++)
                if (sample(&s, &w[i], &r[i], &t[i]) != 0) {
                    rc = 1;
                    goto out;
                }
            qsort(w, (size_t)o.rounds, sizeof *w, cmp_double);
            qsort(r, (size_t)o.rounds, sizeof *r, cmp_double);
            qsort(t, (size_t)o.rounds, sizeof *t, cmp_double);
            const long mid = o.rounds / 2;
            printf("%-10zu %5ld %12.1f %12.1f %12.1f\n", b, s.nbuf, w[mid], r[mid], t[mid]);
            fflush(stdout);
        }
        if (b > o.hi / 2) break; /* no overflow past MAX */
    }
out:
    for (long k = 0; k < most; k++) free(s.buf[k]);
    free(s.dst);
    return rc;
}
