/*
 * sys.h - the system layer every part of Weft may use and that uses no other
 * part: branch hints, the CPU pause, the clocks, futexes and the status
 * propagation macros (base/sys.c).
 */
#ifndef WEFT_SYS_H
#define WEFT_SYS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weft.h"

#define WEFT__UNUSED(x) ((void)(x))
#define WEFT__LIKELY(x) __builtin_expect(!!(x), 1)
#define WEFT__UNLIKELY(x) __builtin_expect(!!(x), 0)

/** One pause of a polling loop (x86 `pause`: frees the core's pipeline for a
 * sibling hyperthread and slows the loop's loads of a line another core
 * writes). Any thread. */
static inline void weft__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/** Monotonic seconds. Any thread. */
double weft__now(void);
/** The same clock at the kernel tick's resolution (a few ms), several times
 * cheaper to read: for the watchdog, which every progress pass checks. */
double weft__now_coarse(void);
/** Sleep while *word == expected, at most timeout_ns (0: no limit), or until
 * woken; returns early on a signal too, so callers re-check. Any thread. */
void weft__futex_wait(_Atomic uint32_t *word, uint32_t expected, long timeout_ns);
/** Wake every thread sleeping on word. Any thread. */
void weft__futex_wake(_Atomic uint32_t *word);
/** The same for a word in memory shared between processes (backends/shm's
 * doorbells): the kernel keys it by the mapping, not the address space. */
void weft__futex_wait_shared(_Atomic uint32_t *word, uint32_t expected, long timeout_ns);
void weft__futex_wake_shared(_Atomic uint32_t *word);

#define WEFT__CHECK(expr)                                                       \
    do {                                                                       \
        weft_status_t weft__st = (expr);                                       \
        if (WEFT__UNLIKELY(weft__st < 0)) return weft__st;                     \
    } while (0)

#define WEFT__CHECK_GOTO(expr, st, label)                                       \
    do {                                                                       \
        (st) = (expr);                                                         \
        if (WEFT__UNLIKELY((st) < 0)) goto label;                              \
    } while (0)


#endif /* WEFT_SYS_H */
