/* log.c - level-gated logging to stderr, one line per call. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

_Atomic int weft__log_level = WEFT__LOG_ERROR;
_Atomic int weft__log_rank;

static const char *const level_names[] = {"off", "error", "warn", "info", "debug"};

void weft__log_write(int level, const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    /* One fprintf per line so lines from several threads do not interleave. */
    fprintf(stderr, "[weft %s rank %d] %s (%s:%d)\n", level_names[level < 0 || level > 4 ? 0 : level],
            atomic_load_explicit(&weft__log_rank, memory_order_relaxed), msg, base, line);
}
