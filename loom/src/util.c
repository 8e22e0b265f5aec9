/* util.c - status strings, error messages, threads setting, time, rng. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <math.h>
#include <sys/mman.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

unsigned loom_version(void) { return LOOM_VERSION_HEX; }

static _Thread_local char last_error[512];

const char *loom_strerror(int status)
{
    switch (status) {
    case LOOM_OK: return "success";
    case LOOM_ERR_INVALID: return "invalid argument";
    case LOOM_ERR_NOMEM: return "out of memory";
    case LOOM_ERR_IO: return "input/output error";
    case LOOM_ERR_FORMAT: return "corrupt or malformed file";
    case LOOM_ERR_MISMATCH: return "file does not match the model";
    case LOOM_ERR_INTERNAL: return "internal error";
    default: return "unknown error";
    }
}

const char *loom_last_error(void) { return last_error[0] ? last_error : "no error"; }

int loom_error(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

/* Arrays of 2 MiB and more (the flat parameters and gradients, large
 * activations) are 2 MiB-aligned and advised MADV_HUGEPAGE before their first
 * touch, as PyTorch's CPU allocator and numpy do for theirs: fewer TLB misses
 * for the kernels, and the gradients Weft reduces across the ranks of a node
 * are read by cross-memory attach, whose cost is pinning every page of them
 * (a 2 MiB page is pinned as one; doc/design.md, "Nodes"). Advice only:
 * where the kernel gives none (THP "never", fragmented memory) the array has
 * small pages, as before. */
#define LOOM_HUGE_BYTES ((size_t)2 << 20)

void *loom__alloc(size_t bytes)
{
    void *p = NULL;
    if (bytes == 0)
        bytes = 64;
    bytes = (bytes + 63) & ~(size_t)63;
    const int huge = bytes >= LOOM_HUGE_BYTES;
    if (posix_memalign(&p, huge ? LOOM_HUGE_BYTES : 64, bytes) != 0)
        return NULL;
    if (huge)
        (void)madvise(p, bytes, MADV_HUGEPAGE); /* advice: a refusal leaves small pages */
    memset(p, 0, bytes);
    return p;
}

void loom__free(void *p) { free(p); }

double loom_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void loom_rng_seed(loom_rng_t *r, uint64_t seed)
{
    uint64_t x = seed;
    r->s[0] = splitmix64(&x);
    r->s[1] = splitmix64(&x);
    if (r->s[0] == 0 && r->s[1] == 0)
        r->s[1] = 1;
}

/* xoroshiro128+ */
uint64_t loom_rng_u64(loom_rng_t *r)
{
    uint64_t s0 = r->s[0], s1 = r->s[1];
    uint64_t res = s0 + s1;
    s1 ^= s0;
    r->s[0] = ((s0 << 24) | (s0 >> 40)) ^ s1 ^ (s1 << 16);
    r->s[1] = (s1 << 37) | (s1 >> 27);
    return res;
}

float loom_rng_uniform(loom_rng_t *r) { return (float)(loom_rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

uint32_t loom_rng_below(loom_rng_t *r, uint32_t n)
{
    return (uint32_t)(((loom_rng_u64(r) >> 32) * (uint64_t)n) >> 32);
}

float loom_rng_normal(loom_rng_t *r)
{
    /* Box-Muller in double, one value per call (deterministic). */
    double u1 = ((double)(loom_rng_u64(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (double)(loom_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
