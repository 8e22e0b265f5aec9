/* weft_cli.c - see weft_cli.h. */
#include "weft_cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "weft.h"

#ifndef WEFT_BUILD_TYPE
#define WEFT_BUILD_TYPE "unknown"
#endif
#ifndef WEFT_BUILD_COMPILER
#define WEFT_BUILD_COMPILER "unknown"
#endif
#ifndef WEFT_BUILD_OPTIONS
#define WEFT_BUILD_OPTIONS "unknown"
#endif
#ifndef WEFT_BUILD_BACKENDS
#define WEFT_BUILD_BACKENDS "unknown"
#endif
#ifndef WEFT_BUILD_MPI
#define WEFT_BUILD_MPI "unknown"
#endif

void weft_cli_version(FILE *f, const char *prog)
{
    fprintf(f, "%s (Weft) %s\n", prog, weft_version_string());
    fprintf(f, "library: libweft %s loaded; built against the %d.%d.%d header\n",
            weft_version_string(), WEFT_VERSION_MAJOR, WEFT_VERSION_MINOR, WEFT_VERSION_PATCH);
    fprintf(f, "build: %s, %s; MPI %s; backends %s; options %s\n", WEFT_BUILD_TYPE,
            WEFT_BUILD_COMPILER, WEFT_BUILD_MPI, WEFT_BUILD_BACKENDS, WEFT_BUILD_OPTIONS);
    fflush(f);
}

int weft_cli_usage_error(const char *prog, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: error: ", prog);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help'.\n", prog);
    fflush(stderr);
    return WEFT_CLI_USAGE;
}

/* The long option argv[optind - 1] names, or NULL. */
static const struct option *long_named(const char *arg, const struct option *longopts, size_t *len)
{
    if (arg == NULL || strncmp(arg, "--", 2) != 0) return NULL;
    const char *eq = strchr(arg + 2, '=');
    *len = eq ? (size_t)(eq - (arg + 2)) : strlen(arg + 2);
    for (const struct option *o = longopts; o && o->name; o++)
        if (strlen(o->name) == *len && strncmp(o->name, arg + 2, *len) == 0) return o;
    return NULL;
}

int weft_cli_getopt_error(const char *prog, int c, char *const argv[],
                          const struct option *longopts)
{
    /* getopt_long leaves the option's text in argv[optind - 1] when it was
     * a long one; optopt is 0 for an unknown long option, else the value
     * of the option that failed (a short option's letter). */
    const char *arg = optind > 0 ? argv[optind - 1] : NULL;
    size_t len = 0;
    const struct option *o = long_named(arg, longopts, &len);
    int was_long = o != NULL && o->val == optopt;
    if (c == ':') {
        if (was_long) return weft_cli_usage_error(prog, "option '--%s' needs a value", o->name);
        return weft_cli_usage_error(prog, "option '-%c' needs a value", optopt);
    }
    if (optopt == 0)
        return weft_cli_usage_error(prog, "unknown option '%s'", arg ? arg : "?");
    if (was_long && o->has_arg == no_argument)
        return weft_cli_usage_error(prog, "option '--%s' takes no value", o->name);
    if (optopt > ' ' && optopt < 127)
        return weft_cli_usage_error(prog, "unknown option '-%c'", optopt);
    return weft_cli_usage_error(prog, "bad option '%s'", arg ? arg : "?");
}

int weft_cli_parse_size(const char *s, size_t *out)
{
    if (s == NULL || *s < '0' || *s > '9') return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s) return -1;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (shift && *end == 'i') end++; /* KiB, MiB, GiB */
    if (shift && (*end == 'b' || *end == 'B')) end++;
    if (*end != '\0') return -1;
    if (v > (unsigned long long)(SIZE_MAX >> shift)) return -1;
    *out = (size_t)v << shift;
    return 0;
}

int weft_cli_parse_range(const char *s, size_t *lo, size_t *hi)
{
    if (s == NULL) return -1;
    const char *colon = strchr(s, ':');
    size_t a = *lo, b;
    if (colon) {
        char buf[64];
        size_t n = (size_t)(colon - s);
        if (n == 0 || n >= sizeof buf) return -1;
        memcpy(buf, s, n);
        buf[n] = '\0';
        if (weft_cli_parse_size(buf, &a) != 0) return -1;
        if (weft_cli_parse_size(colon + 1, &b) != 0) return -1;
    } else if (weft_cli_parse_size(s, &b) != 0) {
        return -1;
    }
    if (a > b) return -1;
    *lo = a;
    *hi = b;
    return 0;
}

int weft_cli_parse_long(const char *s, long lo, long hi, long *out)
{
    if (s == NULL || *s == '\0') return -1;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int weft_cli_parse_double(const char *s, double lo, double hi, double *out)
{
    if (s == NULL || *s == '\0') return -1;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

const char *weft_cli_thp_mode(char *buf, size_t len)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char line[128] = "";
    int got = f != NULL && fgets(line, sizeof line, f) != NULL;
    if (f != NULL) fclose(f);
    const char *open = got ? strchr(line, '[') : NULL;
    const char *close = open ? strchr(open, ']') : NULL;
    if (close == NULL || close - open < 2 || (size_t)(close - open) > len) return "unknown";
    snprintf(buf, len, "%.*s", (int)(close - open - 1), open + 1);
    return buf;
}
