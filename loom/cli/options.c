/* options.c - the table-driven getopt_long parser (options.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getopt_long */
#endif
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int cli_usage_error(const char *prog, FILE *f, const char *fmt, ...)
{
    if (f) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(f, "%s: ", prog);
        vfprintf(f, fmt, ap);
        fprintf(f, "\nRun '%s --help' for the options.\n", prog);
        va_end(ap);
    }
    return 2;
}

static int whole(const char *v, double lo, double hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || (double)x < lo || (double)x > hi)
        return -1;
    *out = x;
    return 0;
}

static int number(const char *v, double lo, double hi, double *out)
{
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x) || x < lo || x > hi)
        return -1;
    *out = x;
    return 0;
}

static int in_choices(const char *v, const char *choices)
{
    size_t n = strlen(v);
    for (const char *p = choices; *p;) {
        size_t k = strcspn(p, "|");
        if (k == n && !strncmp(p, v, n))
            return 1;
        p += k;
        if (*p == '|')
            p++;
    }
    return 0;
}

/* One option's value into args; 0 or a usage error (2). */
static int store(const cli_opt_t *o, const char *v, void *args, const char *prog, FILE *ef)
{
    char *base = args;
    long l;
    double d;
    switch (o->kind) {
    case CLI_FLAG:
        *(int *)(base + o->off) = 1;
        return 0;
    case CLI_INT:
    case CLI_LONG:
        if (whole(v, o->lo, o->hi, &l) < 0)
            return cli_usage_error(prog, ef, "--%s needs a whole number in %.17g..%.17g (got '%s')",
                                   o->name, o->lo, o->hi, v);
        if (o->kind == CLI_INT)
            *(int *)(base + o->off) = (int)l;
        else
            *(long *)(base + o->off) = l;
        return 0;
    case CLI_NUM:
        if (number(v, o->lo, o->hi, &d) < 0)
            return cli_usage_error(prog, ef, "--%s needs a number in [%g, %g] (got '%s')", o->name,
                                   o->lo, o->hi, v);
        *(double *)(base + o->off) = d;
        return 0;
    case CLI_STR:
        if (!*v)
            return cli_usage_error(prog, ef, "--%s needs a non-empty value", o->name);
        *(const char **)(base + o->off) = v;
        return 0;
    case CLI_CHOICE:
        if (!in_choices(v, o->choices))
            return cli_usage_error(prog, ef, "--%s must be one of %s (got '%s')", o->name,
                                   o->choices, v);
        *(const char **)(base + o->off) = v;
        return 0;
    case CLI_GRID: {
        int h = 0, w = 0;
        char c = 0;
        if (sscanf(v, "%dx%d%c", &h, &w, &c) != 2 || h < o->lo || w < o->lo || h > o->hi || w > o->hi)
            return cli_usage_error(prog, ef, "--%s wants HxW with H and W in %g..%g, e.g. 2x1 "
                                   "(got '%s')", o->name, o->lo, o->hi, v);
        *(int *)(base + o->off) = h;
        *(int *)(base + o->off2) = w;
        return 0;
    }
    case CLI_LIST: {
        double *arr = (double *)(base + o->off);
        int n = 0;
        const char *p = v;
        for (;;) {
            char *end = NULL;
            errno = 0;
            d = strtod(p, &end);
            if (errno || end == p || !(d > 0) || !isfinite(d) || n == (int)o->hi)
                return cli_usage_error(prog, ef, "--%s wants positive numbers separated by commas, "
                                       "at most %g (got '%s')", o->name, o->hi, v);
            arr[n++] = d;
            if (*end == '\0')
                break;
            if (*end != ',')
                return cli_usage_error(prog, ef, "--%s wants positive numbers separated by commas, "
                                       "at most %g (got '%s')", o->name, o->hi, v);
            p = end + 1;
        }
        *(int *)(base + o->off2) = n;
        return 0;
    }
    }
    return 0;
}

void cli_help(const cli_opt_t *tab, unsigned cmd, const char *prog, const char *synopsis, FILE *f)
{
    fprintf(f, "Usage: %s\n", synopsis);
    const char *groups[32];
    int ng = 0;
    for (const cli_opt_t *o = tab; o->name; o++) {
        if (!(o->cmds & cmd))
            continue;
        int seen = 0;
        for (int i = 0; i < ng; i++)
            seen |= !strcmp(groups[i], o->group);
        if (!seen && ng < 32)
            groups[ng++] = o->group;
    }
    for (int g = 0; g < ng; g++) {
        fprintf(f, "\n%s:\n", groups[g]);
        for (const cli_opt_t *o = tab; o->name; o++) {
            if (!(o->cmds & cmd) || strcmp(o->group, groups[g]) != 0)
                continue;
            char left[64];
            snprintf(left, sizeof left, "--%s%s%s", o->name, o->meta ? " " : "",
                     o->meta ? o->meta : "");
            fprintf(f, "  %-24s %s\n", left, o->help);
        }
    }
    fprintf(f, "\n  %-24s %s\n  %-24s %s\n", "--help", "this text", "--version",
            "print the version");
    (void)prog;
}

int cli_parse(const cli_opt_t *tab, unsigned cmd, const char *prog, const char *synopsis,
              const char *version, int argc, char **argv, void *args, int print)
{
    FILE *ef = print ? stderr : NULL;
    int n = 0;
    for (const cli_opt_t *o = tab; o->name; o++)
        n++;
    struct option *lo = calloc((size_t)n + 3, sizeof *lo);
    if (!lo) {
        if (ef)
            fprintf(ef, "%s: out of memory\n", prog);
        return 2;
    }
    int k = 0;
    for (int i = 0; i < n; i++) {
        lo[k++] = (struct option){tab[i].name,
                                  tab[i].kind == CLI_FLAG ? no_argument : required_argument, NULL,
                                  1000 + i};
    }
    lo[k++] = (struct option){"help", no_argument, NULL, 'h'};
    lo[k++] = (struct option){"version", no_argument, NULL, 'V'};
    lo[k] = (struct option){NULL, 0, NULL, 0};
    int rc = 0, c;
    opterr = 0;
    optind = 0; /* glibc: full re-initialisation */
    /* '+': stop at the first non-option (reported below); ':': missing values
     * come back as ':' */
    while (rc == 0 && (c = getopt_long(argc, argv, "+:h", lo, NULL)) != -1) {
        const char *bad = argv[optind - 1];
        if (c == 'h') {
            if (print)
                cli_help(tab, cmd, prog, synopsis, stdout);
            rc = 1;
        } else if (c == 'V') {
            if (print)
                printf("%s\n", version);
            rc = 1;
        } else if (c == ':') {
            rc = cli_usage_error(prog, ef, "option %s needs a value", bad);
        } else if (c == '?') {
            if (optopt && optopt < 1000)
                rc = cli_usage_error(prog, ef, "unknown option '-%c'", optopt);
            else if (optopt >= 1000)
                rc = cli_usage_error(prog, ef, "option '--%s' takes no value", tab[optopt - 1000].name);
            else
                rc = cli_usage_error(prog, ef, "unknown option '%s'", bad);
        } else {
            const cli_opt_t *o = &tab[c - 1000];
            if (!(o->cmds & cmd))
                rc = cli_usage_error(prog, ef, "option '--%s' does not apply here", o->name);
            else
                rc = store(o, optarg, args, prog, ef);
        }
    }
    if (rc == 0 && optind < argc)
        rc = cli_usage_error(prog, ef, "unexpected argument '%s'", argv[optind]);
    free(lo);
    return rc;
}
