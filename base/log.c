/* log.c - level-gated logging to stderr, one line per call. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "weft_internal.h"

_Atomic int weft__log_level = WEFT__LOG_ERROR;

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
            weft__g.world_rank, msg, base, line);
}
