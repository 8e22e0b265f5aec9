/*
 * options.h - the one option parser of Loom's programs (getopt_long over a
 * table): the `loom` command's subcommands and the benchmark programs of
 * loom/benchmarks describe their options as rows of a table; the parser,
 * the range checks, the messages and the --help text come from the rows.
 *
 * A bad command line prints one message naming the option, then where the
 * options are ("Run 'loom train --help'"), and makes the program exit 2.
 * Thread: the main thread (getopt_long keeps global state).
 */
#ifndef LOOM_CLI_OPTIONS_H
#define LOOM_CLI_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

typedef enum {
    CLI_FLAG,   /* no value: the int field becomes 1 */
    CLI_INT,    /* int in [lo, hi] */
    CLI_LONG,   /* long in [lo, hi] */
    CLI_NUM,    /* finite double in [lo, hi] */
    CLI_STR,    /* const char *, any text */
    CLI_CHOICE, /* const char *, one of choices ("a|b|c") */
    CLI_GRID,   /* HxW: two ints (fields h then w), each in [lo, hi] */
    CLI_LIST    /* comma-separated positive numbers: a double array of hi slots, count in the int
                   field at off2 */
} cli_kind_t;

typedef struct {
    const char *name;    /* long name without the dashes */
    cli_kind_t kind;
    size_t off;          /* the field's offset in the program's argument struct */
    double lo, hi;
    size_t off2;         /* CLI_GRID: the W field; CLI_LIST: the count field */
    const char *choices; /* CLI_CHOICE */
    unsigned cmds;       /* bit mask of the subcommands that take it */
    const char *meta;    /* the value's name in --help ("N", "FILE") */
    const char *help;    /* one line; the default in parentheses */
    const char *group;   /* --help heading the option is listed under */
} cli_opt_t;

#define CLI_END { NULL, CLI_FLAG, 0, 0, 0, 0, NULL, 0, NULL, NULL, NULL }

/* Parses argv[1..argc) for the subcommand with bit `cmd` (named `prog`, e.g.
 * "loom train"), writing into args.  Returns 0 to run, 1 when --help or
 * --version was printed (print nonzero: this rank prints), 2 on a bad command
 * line (message printed when print is nonzero).  version: the line printed
 * by --version. */
int cli_parse(const cli_opt_t *tab, unsigned cmd, const char *prog, const char *synopsis,
              const char *version, int argc, char **argv, void *args, int print);
/* The options of `cmd`, grouped, one line each. */
void cli_help(const cli_opt_t *tab, unsigned cmd, const char *prog, const char *synopsis, FILE *f);
/* Prints "PROG: message" and the help pointer on f; returns 2. */
int cli_usage_error(const char *prog, FILE *f, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
