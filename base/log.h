/*
 * log.h - level-gated logging. Levels: 0 off, 1 error (default), 2 warn,
 * 3 info, 4 debug. WEFT_LOG_MAX_LEVEL compiles out everything above it.
 * Log an error once, where it is found, with context; callers up the stack
 * only propagate the status.
 */
#ifndef WEFT_LOG_H
#define WEFT_LOG_H

#include <stdatomic.h>

#ifndef WEFT_LOG_MAX_LEVEL
#define WEFT_LOG_MAX_LEVEL 4
#endif

enum { WEFT__LOG_OFF = 0, WEFT__LOG_ERROR = 1, WEFT__LOG_WARN = 2, WEFT__LOG_INFO = 3,
       WEFT__LOG_DEBUG = 4 };

extern _Atomic int weft__log_level;
/** The rank every line names: the world rank, set by weft_init (0 before). */
extern _Atomic int weft__log_rank;

/** Write one line to stderr, prefixed with level and rank. Any thread. */
void weft__log_write(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define WEFT__LOG(level, ...)                                                           \
    do {                                                                               \
        if ((level) <= WEFT_LOG_MAX_LEVEL &&                                           \
            (level) <= atomic_load_explicit(&weft__log_level, memory_order_relaxed))   \
            weft__log_write((level), __FILE__, __LINE__, __VA_ARGS__);                 \
    } while (0)

#define WEFT__ERROR(...) WEFT__LOG(WEFT__LOG_ERROR, __VA_ARGS__)
#define WEFT__WARN(...) WEFT__LOG(WEFT__LOG_WARN, __VA_ARGS__)
#define WEFT__INFO(...) WEFT__LOG(WEFT__LOG_INFO, __VA_ARGS__)
#define WEFT__DEBUG(...) WEFT__LOG(WEFT__LOG_DEBUG, __VA_ARGS__)

#endif /* WEFT_LOG_H */
