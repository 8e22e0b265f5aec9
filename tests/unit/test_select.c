/*
 * Unit tests for selection (lib/select.c, lib/tuning.c) and the algorithm
 * table (lib/coll/algos.def, algos.c): the table's rows agree with their
 * implementations and names; weft__select_explain says which algorithm and
 * why for each step of the precedence (per communicator, environment, tuning
 * rule N, cost model with every candidate's cost, the device rule), checked
 * against cases built to hit each step.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "measure.h"
#include "tuning.h"
#include "weft_internal.h"

static const weft__cost_t cost = {.alpha = 2e-6, .beta = 2e-10, .gamma = 2.5e-10};

/* The device rule asks the NCCL backend only whether it can reduce: a
 * backend with that entry alone (NCCL has no bitwise ops). */
static bool fake_supports(weft_datatype_t dt, weft_op_t op)
{
    (void)dt;
    return op != WEFT_BAND && op != WEFT_BOR && op != WEFT_BXOR;
}
static const weft__nccl_backend_t fake_nccl = {.supports = fake_supports};

static void reset_config(void)
{
    for (int i = 0; i < WEFT_COLL_COUNT; i++) {
        char name[64];
        snprintf(name, sizeof name, "WEFT_%s_ALGO", weft__coll_name((weft_coll_t)i));
        for (char *c = name; *c; c++)
            if (*c >= 'a' && *c <= 'z') *c = (char)(*c - 'a' + 'A');
        unsetenv(name);
    }
    unsetenv("WEFT_TUNING_FILE");
    unsetenv("WEFT_NCCL_MIN_BYTES");
    ck_assert_int_eq(weft__config_load(), WEFT_SUCCESS);
    weft__tuning_clear();
}

START_TEST(table_rows_agree)
{
    int total = 0;
    for (int c = 0; c < WEFT_COLL_COUNT; c++) {
        int n = 0;
        const weft__algo_impl_t *const *list = weft__algo_list((weft_coll_t)c, &n);
        ck_assert_int_ge(n, 1); /* every collective has an algorithm */
        ck_assert_int_le(n, WEFT__SELECT_MAX_CAND);
        ck_assert_ptr_null(list[n]);
        char names[512];
        size_t need = weft__algo_names((weft_coll_t)c, ", ", names, sizeof names);
        ck_assert_uint_eq(need, strlen(names));
        ck_assert(strncmp(names, "auto", 4) == 0);
        for (int i = 0; i < n; i++, total++) {
            ck_assert_int_eq((int)list[i]->kind, c);
            ck_assert_ptr_eq(weft__algo_impl((weft_coll_t)c, list[i]->id), list[i]);
            ck_assert_ptr_nonnull(list[i]->start);
            ck_assert_ptr_nonnull(list[i]->step);
            const char *name = weft_algo_name(list[i]->id);
            ck_assert_ptr_nonnull(name);
            weft_algo_t back;
            ck_assert_int_eq(weft_algo_from_name(name, &back), WEFT_SUCCESS);
            ck_assert_int_eq(back, list[i]->id);
            char word[64];
            snprintf(word, sizeof word, ", %s", name);
            ck_assert_ptr_nonnull(strstr(names, word));
            /* no id twice in one collective */
            for (int j = 0; j < i; j++) ck_assert_int_ne(list[j]->id, list[i]->id);
        }
        /* cut at the capacity, still terminated, same length asked */
        char small[8];
        ck_assert_uint_eq(weft__algo_names((weft_coll_t)c, ", ", small, sizeof small), need);
        ck_assert_uint_eq(strlen(small), need < sizeof small ? need : sizeof small - 1);
    }
    ck_assert_int_ge(total, 17);
    char names[256];
    weft__algo_names(WEFT_COLL_ALLREDUCE, "|", names, sizeof names);
    const char *first = "auto|ring|recursive_doubling|rabenseifner|tree|mpi|nccl"; /* table order */
    ck_assert(strncmp(names, first, strlen(first)) == 0);
    ck_assert(weft__algo_device_only(WEFT_COLL_ALLREDUCE, WEFT_ALGO_NCCL));
    ck_assert(!weft__algo_device_only(WEFT_COLL_ALLREDUCE, WEFT_ALGO_RING));
    ck_assert(!weft__algo_device_only((weft_coll_t)99, WEFT_ALGO_RING));
    ck_assert_uint_eq(weft__algo_names((weft_coll_t)99, ", ", names, sizeof names), 4); /* "auto" */
}
END_TEST

START_TEST(explain_cost_model)
{
    reset_config();
    const weft__select_comm_t sc = {.size = 8, .cost = cost, .forced = WEFT_ALGO_AUTO};
    for (size_t bytes = 4; bytes <= (64u << 20); bytes *= 16) {
        weft__select_explain_t ex;
        memset(&ex, 0xff, sizeof ex);
        weft_algo_t a = weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, bytes, WEFT_FLOAT32,
                                             WEFT_SUM, WEFT__MEM_HOST, &ex);
        double best = 0;
        ck_assert_int_eq(a, weft__select_model(WEFT_COLL_ALLREDUCE, 8, bytes, WEFT_FLOAT32, &cost,
                                               &best));
        ck_assert_int_eq(ex.algo, a);
        ck_assert_int_eq(ex.source, WEFT__SELECT_MODEL);
        ck_assert_str_eq(weft__select_source_name(ex.source), "model");
        ck_assert_int_eq(ex.rule, -1);
        ck_assert_int_eq(ex.replaced, WEFT_ALGO_AUTO);
        ck_assert_int_eq(ex.model, a);
        ck_assert(ex.model_cost == best);
        /* every algorithm of the collective is listed; the chosen one is the
         * cheapest candidate (first on ties); explicit-only ones are NAN */
        int n = 0;
        const weft__algo_impl_t *const *list = weft__algo_list(WEFT_COLL_ALLREDUCE, &n);
        ck_assert_int_eq(ex.ncand, n);
        double min = INFINITY;
        weft_algo_t argmin = WEFT_ALGO_AUTO;
        for (int i = 0; i < n; i++) {
            ck_assert_int_eq(ex.cand[i].algo, list[i]->id);
            if (list[i]->cost == NULL) {
                ck_assert(isnan(ex.cand[i].cost));
                continue;
            }
            ck_assert(ex.cand[i].cost == list[i]->cost(8, bytes, &cost));
            if (ex.cand[i].cost < min) min = ex.cand[i].cost, argmin = ex.cand[i].algo;
        }
        ck_assert_int_eq(argmin, a);
        ck_assert(min == ex.model_cost);
    }
    /* reduce_bcast costs the tree's plus n gamma: the model never picks it */
    for (int p = 1; p <= 4096; p = p < 8 ? p + 1 : p * 2)
        for (size_t bytes = 0; bytes <= (1u << 30); bytes = bytes ? bytes * 4 : 1)
            ck_assert_int_ne(weft__select_model(WEFT_COLL_ALLREDUCE, p, bytes, WEFT_FLOAT32, &cost,
                                                NULL), WEFT_ALGO_REDUCE_BCAST);
    /* a datatype an algorithm cannot serve makes it no candidate */
    weft__select_explain_t ex;
    weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, 4096, WEFT_FLOAT16, WEFT_SUM, WEFT__MEM_HOST,
                         &ex);
    for (int i = 0; i < ex.ncand; i++)
        if (ex.cand[i].algo == WEFT_ALGO_MPI) ck_assert(isnan(ex.cand[i].cost));
}
END_TEST

START_TEST(explain_forced_env_rule)
{
    reset_config();
    weft__select_comm_t sc = {.size = 4, .cost = cost, .forced = WEFT_ALGO_TREE};
    weft__select_explain_t ex;
    /* per communicator beats the environment */
    setenv("WEFT_ALLREDUCE_ALGO", "ring", 1);
    ck_assert_int_eq(weft__config_load(), WEFT_SUCCESS);
    ck_assert_int_eq(weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, 100, WEFT_FLOAT32, WEFT_SUM,
                                          WEFT__MEM_HOST, &ex), WEFT_ALGO_TREE);
    ck_assert_int_eq(ex.source, WEFT__SELECT_COMM);
    ck_assert_str_eq(weft__select_source_name(ex.source), "comm");
    sc.forced = WEFT_ALGO_AUTO;
    ck_assert_int_eq(weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, 100, WEFT_FLOAT32, WEFT_SUM,
                                          WEFT__MEM_HOST, &ex), WEFT_ALGO_RING);
    ck_assert_int_eq(ex.source, WEFT__SELECT_ENV);
    ck_assert_int_eq(ex.algo, WEFT_ALGO_RING);
    /* the environment beats a rule; without it, the first matching rule */
    char path[] = "/tmp/weft_select_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "weft-tuning 1\n"
               "# comment\n"
               "rule allreduce 8 0 inf ring\n"           /* rule 0, line 3: another size */
               "rule allreduce * 0 1000 tree\n"          /* rule 1, line 4 */
               "rule allreduce * 0 inf mpi\n"            /* rule 2, line 5: not float16 */
               "rule allreduce * 1001 inf rabenseifner\n" /* rule 3, line 6 */
               "rule bcast 4 0 inf scatter_allgather\n"); /* rule 4, line 7 */
    fclose(f);
    ck_assert_int_eq(weft__tuning_parse(path), WEFT_SUCCESS);
    unlink(path);
    ck_assert_int_eq(weft__tuning_nrules(), 5);
    ck_assert_int_eq(weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, 100, WEFT_FLOAT32, WEFT_SUM,
                                          WEFT__MEM_HOST, &ex), WEFT_ALGO_RING);
    ck_assert_int_eq(ex.source, WEFT__SELECT_ENV);
    unsetenv("WEFT_ALLREDUCE_ALGO");
    ck_assert_int_eq(weft__config_load(), WEFT_SUCCESS);
    const struct {
        weft_coll_t coll;
        size_t bytes;
        weft_datatype_t dt;
        weft_algo_t algo;
        int rule, line;
    } cases[] = {
        {WEFT_COLL_ALLREDUCE, 100, WEFT_FLOAT32, WEFT_ALGO_TREE, 1, 4},
        {WEFT_COLL_ALLREDUCE, 1000, WEFT_FLOAT32, WEFT_ALGO_TREE, 1, 4},
        {WEFT_COLL_ALLREDUCE, 1001, WEFT_FLOAT32, WEFT_ALGO_MPI, 2, 5},
        {WEFT_COLL_ALLREDUCE, 1001, WEFT_FLOAT16, WEFT_ALGO_RABENSEIFNER, 3, 6},
        {WEFT_COLL_BCAST, 1, WEFT_FLOAT16, WEFT_ALGO_SCATTER_ALLGATHER, 4, 7},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_int_eq(weft__select_explain(&sc, cases[i].coll, cases[i].bytes, cases[i].dt,
                                              WEFT_SUM, WEFT__MEM_HOST, &ex), cases[i].algo);
        ck_assert_int_eq(ex.source, WEFT__SELECT_RULE);
        ck_assert_int_eq(ex.rule, cases[i].rule);
        ck_assert_int_eq(ex.rule_line, cases[i].line);
        ck_assert_int_eq(weft__tuning_rule_line(cases[i].rule), cases[i].line);
    }
    /* no rule for 2 ranks' bcast: the model */
    sc.size = 2;
    weft__select_explain(&sc, WEFT_COLL_BCAST, 1, WEFT_FLOAT32, WEFT_SUM, WEFT__MEM_HOST, &ex);
    ck_assert_int_eq(ex.source, WEFT__SELECT_MODEL);
    ck_assert_int_eq(ex.algo, ex.model);
    /* the same answer without an explanation */
    sc.size = 4;
    ck_assert_int_eq(weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, 1001, WEFT_FLOAT16, WEFT_SUM,
                                          WEFT__MEM_HOST, NULL), WEFT_ALGO_RABENSEIFNER);
    weft__tuning_clear();
}
END_TEST

START_TEST(explain_device_rule)
{
    reset_config();
    weft__select_comm_t sc = {.size = 2, .cost = cost, .forced = WEFT_ALGO_AUTO, .nccl = &fake_nccl};
    const size_t big = weft__cfg.nccl_min_bytes, small = big / 2;
    weft__select_explain_t ex;
    /* NCCL named for host buffers: the cost model's algorithm runs */
    setenv("WEFT_ALLREDUCE_ALGO", "nccl", 1);
    ck_assert_int_eq(weft__config_load(), WEFT_SUCCESS);
    weft_algo_t a = weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, big, WEFT_FLOAT32, WEFT_SUM,
                                         WEFT__MEM_HOST, &ex);
    ck_assert_int_eq(a, ex.model);
    ck_assert_int_ne(a, WEFT_ALGO_NCCL);
    ck_assert_int_eq(ex.source, WEFT__SELECT_ENV);
    ck_assert_int_eq(ex.replaced, WEFT_ALGO_NCCL);
    unsetenv("WEFT_ALLREDUCE_ALGO");
    ck_assert_int_eq(weft__config_load(), WEFT_SUCCESS);
    /* forced on the communicator for device buffers without NCCL: stays NCCL
     * (the call fails with WEFT_ERR_UNSUPPORTED); for host buffers: the model */
    sc.forced = WEFT_ALGO_NCCL;
    sc.nccl = NULL;
    ck_assert_int_eq(weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, big, WEFT_FLOAT32, WEFT_SUM,
                                          WEFT__MEM_DEVICE, &ex), WEFT_ALGO_NCCL);
    ck_assert_int_eq(ex.source, WEFT__SELECT_COMM);
    ck_assert_int_ne(weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, big, WEFT_FLOAT32, WEFT_SUM,
                                          WEFT__MEM_HOST, &ex), WEFT_ALGO_NCCL);
    ck_assert_int_eq(ex.replaced, WEFT_ALGO_NCCL);
    sc.forced = WEFT_ALGO_AUTO;
    sc.nccl = &fake_nccl;
    /* the device rule: NCCL from WEFT_NCCL_MIN_BYTES on, device buffers only */
    ck_assert_int_eq(weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, big, WEFT_FLOAT32, WEFT_SUM,
                                          WEFT__MEM_DEVICE, &ex), WEFT_ALGO_NCCL);
    ck_assert_int_eq(ex.source, WEFT__SELECT_DEVICE);
    ck_assert_str_eq(weft__select_source_name(ex.source), "device");
    ck_assert_int_eq(weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, small, WEFT_FLOAT32, WEFT_SUM,
                                          WEFT__MEM_DEVICE, &ex), ex.model);
    ck_assert_int_eq(ex.source, WEFT__SELECT_MODEL);
    ck_assert_int_ne(weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, big, WEFT_FLOAT32, WEFT_SUM,
                                          WEFT__MEM_HOST, NULL), WEFT_ALGO_NCCL);
    /* not for an op NCCL cannot reduce, not on a comm without NCCL */
    ck_assert_int_ne(weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, big, WEFT_INT32, WEFT_BXOR,
                                          WEFT__MEM_DEVICE, NULL), WEFT_ALGO_NCCL);
    sc.nccl = NULL;
    ck_assert_int_ne(weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, big, WEFT_FLOAT32, WEFT_SUM,
                                          WEFT__MEM_DEVICE, NULL), WEFT_ALGO_NCCL);
    sc.nccl = &fake_nccl;
    /* something forced: no device rule; NCCL forced: NCCL at any size */
    sc.forced = WEFT_ALGO_RING;
    ck_assert_int_eq(weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, big, WEFT_FLOAT32, WEFT_SUM,
                                          WEFT__MEM_DEVICE, &ex), WEFT_ALGO_RING);
    sc.forced = WEFT_ALGO_NCCL;
    ck_assert_int_eq(weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, 4, WEFT_FLOAT32, WEFT_SUM,
                                          WEFT__MEM_DEVICE, &ex), WEFT_ALGO_NCCL);
    ck_assert_int_eq(ex.source, WEFT__SELECT_COMM);
    ck_assert_int_eq(ex.replaced, WEFT_ALGO_AUTO);
    /* the device rule for the other collectives NCCL serves; never alltoall */
    sc.forced = WEFT_ALGO_AUTO;
    const weft_coll_t nc[] = {WEFT_COLL_BCAST, WEFT_COLL_ALLGATHER, WEFT_COLL_REDUCE_SCATTER};
    for (size_t i = 0; i < sizeof nc / sizeof nc[0]; i++) {
        ck_assert_int_eq(weft__select_explain(&sc, nc[i], big, WEFT_FLOAT32, WEFT_SUM,
                                              WEFT__MEM_DEVICE, &ex), WEFT_ALGO_NCCL);
        ck_assert_int_eq(ex.source, WEFT__SELECT_DEVICE);
        ck_assert_int_ne(weft__select_explain(&sc, nc[i], small, WEFT_FLOAT32, WEFT_SUM,
                                              WEFT__MEM_DEVICE, NULL), WEFT_ALGO_NCCL);
        ck_assert_int_ne(weft__select_explain(&sc, nc[i], big, WEFT_FLOAT32, WEFT_SUM,
                                              WEFT__MEM_HOST, NULL), WEFT_ALGO_NCCL);
        ck_assert_ptr_nonnull(weft__algo_impl(nc[i], WEFT_ALGO_NCCL));
    }
    ck_assert_int_ne(weft__select_explain(&sc, WEFT_COLL_ALLTOALL, big, WEFT_FLOAT32, WEFT_SUM,
                                          WEFT__MEM_DEVICE, NULL), WEFT_ALGO_NCCL);
}
END_TEST

/* The shared-memory path: an algorithm whose cost is INFINITY on a
 * communicator (shm without the path) is never the model's choice, and a
 * forced choice of it gives way to the model's (replaced); with the path
 * (alpha_shm > 0) it is a candidate like any other. */
START_TEST(explain_shm_gives_way)
{
    reset_config();
    weft__select_comm_t sc = {.size = 2, .cost = cost, .forced = WEFT_ALGO_SHM};
    const weft_coll_t colls[] = {WEFT_COLL_ALLREDUCE, WEFT_COLL_REDUCE_SCATTER,
                                 WEFT_COLL_ALLGATHER, WEFT_COLL_BCAST, WEFT_COLL_REDUCE};
    for (size_t c = 0; c < sizeof colls / sizeof colls[0]; c++) {
        for (size_t bytes = 4; bytes <= (64u << 20); bytes *= 64) {
            weft__select_explain_t ex;
            sc.cost = cost; /* no path */
            sc.forced = WEFT_ALGO_SHM;
            weft_algo_t a = weft__select_explain(&sc, colls[c], bytes, WEFT_FLOAT32, WEFT_SUM,
                                                 WEFT__MEM_HOST, &ex);
            ck_assert_int_ne(a, WEFT_ALGO_SHM);
            ck_assert_int_eq(a, ex.model);
            ck_assert_int_eq(ex.replaced, WEFT_ALGO_SHM);
            ck_assert_int_eq(ex.source, WEFT__SELECT_COMM);
            /* with the path, forced: it runs */
            sc.cost.alpha_shm = 3e-7;
            sc.cost.beta_shm = 1e-10;
            a = weft__select_explain(&sc, colls[c], bytes, WEFT_FLOAT32, WEFT_SUM,
                                     WEFT__MEM_HOST, &ex);
            ck_assert_int_eq(a, WEFT_ALGO_SHM);
            ck_assert_int_eq(ex.replaced, WEFT_ALGO_AUTO);
            /* and the model picks it where it is cheapest: a path whose
             * alpha and beta beat the transport's by far */
            sc.forced = WEFT_ALGO_AUTO;
            ck_assert_msg(weft__select_explain(&sc, colls[c], bytes, WEFT_FLOAT32, WEFT_SUM,
                                               WEFT__MEM_HOST, NULL) == WEFT_ALGO_SHM,
                          "%s, %zu bytes: the model does not pick shm",
                          weft__coll_name(colls[c]), bytes);
            /* a communicator across nodes never runs it */
            sc.cost.nnodes = 2;
            ck_assert_int_ne(weft__select_explain(&sc, colls[c], bytes, WEFT_FLOAT32, WEFT_SUM,
                                                  WEFT__MEM_HOST, NULL), WEFT_ALGO_SHM);
        }
    }
}
END_TEST

/* The hierarchical algorithms: never on one node (nor on nodes of different
 * sizes), where a forced choice of them gives way to the model; chosen for
 * large messages when the cross-node links are much slower than the nodes'. */
START_TEST(hierarchical_selection)
{
    reset_config();
    static const weft_coll_t colls[] = {WEFT_COLL_ALLREDUCE, WEFT_COLL_BCAST, WEFT_COLL_BARRIER};
    weft__cost_t c = {.alpha = 5e-6, .beta = 1e-9, .gamma = 2.5e-10, .alpha_node = 5e-7,
                      .beta_node = 5e-11};
    /* one node (nnodes 0 or 1), or nodes of different sizes (ppn 0) */
    const struct { int nnodes, ppn; } one[] = {{0, 0}, {1, 8}, {1, 0}, {3, 0}};
    for (size_t k = 0; k < sizeof one / sizeof one[0]; k++) {
        c.nnodes = one[k].nnodes;
        c.ppn = one[k].ppn;
        for (size_t ci = 0; ci < 3; ci++)
            for (int p = 1; p <= 1024; p *= 2)
                for (size_t bytes = 0; bytes <= (1u << 30); bytes = bytes ? bytes * 8 : 1) {
                    if (c.ppn > 0) c.ppn = p; /* one node holding every rank */
                    ck_assert_int_ne(weft__select_model(colls[ci], p, bytes, WEFT_FLOAT32, &c, NULL),
                                     WEFT_ALGO_HIERARCHICAL);
                    weft__select_comm_t sc = {.size = p, .cost = c, .forced = WEFT_ALGO_HIERARCHICAL};
                    weft__select_explain_t ex;
                    weft_algo_t a = weft__select_explain(&sc, colls[ci], bytes, WEFT_FLOAT32, WEFT_SUM,
                                                         WEFT__MEM_HOST, &ex);
                    ck_assert_int_ne(a, WEFT_ALGO_HIERARCHICAL);
                    ck_assert_int_eq(a, ex.model);
                    ck_assert_int_eq(ex.replaced, WEFT_ALGO_HIERARCHICAL);
                    ck_assert_int_eq(ex.source, WEFT__SELECT_COMM);
                }
    }
    /* 4 nodes x 8 ranks, cross-node beta 20x the node's: hierarchical for
     * large messages; forced, it stays */
    c.nnodes = 4;
    c.ppn = 8;
    for (size_t bytes = 16u << 20; bytes <= (1u << 30); bytes *= 4) {
        ck_assert_int_eq(weft__select_model(WEFT_COLL_ALLREDUCE, 32, bytes, WEFT_FLOAT32, &c, NULL),
                         WEFT_ALGO_HIERARCHICAL);
    }
    /* bcast: its phases are binomial trees, chosen at medium sizes (large
     * ones go to scatter_allgather, which moves 2n bytes, not lg N n) */
    ck_assert_int_eq(weft__select_model(WEFT_COLL_BCAST, 32, 64u << 10, WEFT_FLOAT32, &c, NULL),
                     WEFT_ALGO_HIERARCHICAL);
    ck_assert_int_eq(weft__select_model(WEFT_COLL_BARRIER, 32, 0, WEFT_FLOAT32, &c, NULL),
                     WEFT_ALGO_HIERARCHICAL);
    weft__select_comm_t sc = {.size = 32, .cost = c, .forced = WEFT_ALGO_HIERARCHICAL};
    weft__select_explain_t ex;
    ck_assert_int_eq(weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, 64, WEFT_FLOAT32, WEFT_SUM,
                                          WEFT__MEM_HOST, &ex), WEFT_ALGO_HIERARCHICAL);
    ck_assert_int_eq(ex.replaced, WEFT_ALGO_AUTO);
    /* a size that is not nnodes x ppn cannot be that machine */
    sc.size = 31;
    ck_assert_int_ne(weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, 64, WEFT_FLOAT32, WEFT_SUM,
                                          WEFT__MEM_HOST, NULL), WEFT_ALGO_HIERARCHICAL);
    /* the node figures matter: with cross-node links as fast as the nodes'
     * (and their latency much lower), flat algorithms win small messages */
    c.alpha = c.alpha_node = 1e-6;
    c.beta = c.beta_node = 1e-10;
    ck_assert_int_ne(weft__select_model(WEFT_COLL_ALLREDUCE, 32, 8, WEFT_FLOAT32, &c, NULL),
                     WEFT_ALGO_HIERARCHICAL);
}
END_TEST

/* Predicted seconds of algo among ex's candidates (NAN if absent). */
static double cand_cost(const weft__select_explain_t *ex, weft_algo_t algo)
{
    for (int i = 0; i < ex->ncand; i++)
        if (ex->cand[i].algo == algo) return ex->cand[i].cost;
    return NAN;
}

/* The node path against the transport's algorithms on one node when their
 * costs are close (on 2 ranks the allreduce costs have the same terms): a
 * large operation's prediction is the path's cross-memory-attach cost less
 * 10 %, so the path is taken while that upper bound is at most about 10 %
 * above the best of them, and not beyond. */
START_TEST(shm_preferred_within_margin)
{
    reset_config();
    weft__select_comm_t sc = {.size = 2, .cost = cost};
    sc.cost.nnodes = 1;
    for (size_t bytes = 1u << 20; bytes <= (64u << 20); bytes *= 4) {
        weft__select_explain_t ex;
        const double dn = (double)bytes;
        sc.cost.alpha_shm = cost.alpha;
        sc.cost.beta_shm = 1.05 * cost.beta; /* 5 % dearer per byte */
        /* the path's cross-memory-attach cost on 2 ranks: 2 alpha + n beta + n/2 gamma */
        double bound = 2 * sc.cost.alpha_shm + dn * sc.cost.beta_shm + 0.5 * dn * cost.gamma;
        weft_algo_t a = weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, bytes, WEFT_FLOAT32,
                                             WEFT_SUM, WEFT__MEM_HOST, &ex);
        const double ring = cand_cost(&ex, WEFT_ALGO_RING);
        ck_assert_msg(bound > ring && bound < 1.1 * ring, "%zu bytes: bound %.4g, ring %.4g",
                      bytes, bound, ring);
        ck_assert_msg(fabs(cand_cost(&ex, WEFT_ALGO_SHM) - 0.9 * bound) <= 1e-9 * bound,
                      "%zu bytes: the path predicted %.6g, its bound less 10 %% is %.6g", bytes,
                      cand_cost(&ex, WEFT_ALGO_SHM), 0.9 * bound);
        ck_assert_msg(a == WEFT_ALGO_SHM && ex.model == WEFT_ALGO_SHM,
                      "%zu bytes: the model picks %s over a path whose bound is %.1f %% above it",
                      bytes, weft_algo_name(a), 100.0 * (bound / ring - 1));
        sc.cost.beta_shm = 1.3 * cost.beta; /* 30 % dearer: the transport's ring */
        bound = 2 * sc.cost.alpha_shm + dn * sc.cost.beta_shm + 0.5 * dn * cost.gamma;
        a = weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, bytes, WEFT_FLOAT32, WEFT_SUM,
                                 WEFT__MEM_HOST, &ex);
        ck_assert_msg(a != WEFT_ALGO_SHM, "%zu bytes: the model picks a path whose bound is "
                      "%.1f %% above ring", bytes, 100.0 * (bound / cand_cost(&ex, WEFT_ALGO_RING) - 1));
    }
}
END_TEST

/* The hierarchical allreduce on the node's shared-memory path: 2 nodes x 2
 * ranks whose transport is as slow inside a node as across (TCP
 * everywhere, as in the multinode setup). Over the transport its phases
 * inside the nodes cost what a flat Rabenseifner's exchanges do, so it
 * does not win; on the path (alpha_shm > 0: the comm has it) only the
 * inter-node phase crosses the transport and it is chosen from 1 MiB up.
 * The flat shm algorithm still cannot run across nodes. */
START_TEST(hierarchical_shm_selection)
{
    reset_config();
    weft__cost_t c = {.alpha = 3e-5, .beta = 2.5e-9, .gamma = 2.5e-10, .alpha_node = 3e-5,
                      .beta_node = 2.5e-9, .nnodes = 2, .ppn = 2};
    weft__select_comm_t sc = {.size = 4, .cost = c, .forced = WEFT_ALGO_AUTO};
    weft__select_explain_t ex;
    for (size_t bytes = 1u << 20; bytes <= (256u << 20); bytes *= 4) {
        sc.cost = c; /* no path */
        weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, bytes, WEFT_FLOAT32, WEFT_SUM,
                             WEFT__MEM_HOST, &ex);
        const double over_tp = cand_cost(&ex, WEFT_ALGO_HIERARCHICAL);
        const double raben = cand_cost(&ex, WEFT_ALGO_RABENSEIFNER);
        ck_assert_msg(over_tp >= 0.95 * raben, "%zu bytes: hierarchical over the transport "
                      "predicted %.3g s, Rabenseifner %.3g s", bytes, over_tp, raben);
        sc.cost.alpha_shm = 2e-7;
        sc.cost.beta_shm = 1.2e-10;
        weft_algo_t a = weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, bytes, WEFT_FLOAT32,
                                             WEFT_SUM, WEFT__MEM_HOST, &ex);
        ck_assert_msg(a == WEFT_ALGO_HIERARCHICAL, "%zu bytes: the model picks %s", bytes,
                      weft_algo_name(a));
        const double on_path = cand_cost(&ex, WEFT_ALGO_HIERARCHICAL);
        /* the transport carries n/2 bytes per rank instead of 1.5 n */
        ck_assert_msg(on_path < 0.6 * raben && on_path < 0.6 * over_tp,
                      "%zu bytes: on the path %.3g s, over the transport %.3g s, "
                      "Rabenseifner %.3g s", bytes, on_path, over_tp, raben);
        ck_assert(isinf(cand_cost(&ex, WEFT_ALGO_SHM)) || isnan(cand_cost(&ex, WEFT_ALGO_SHM)));
        /* forced shm gives way on a comm across nodes, path or not */
        sc.forced = WEFT_ALGO_SHM;
        ck_assert_int_ne(weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, bytes, WEFT_FLOAT32,
                                              WEFT_SUM, WEFT__MEM_HOST, &ex), WEFT_ALGO_SHM);
        ck_assert_int_eq(ex.replaced, WEFT_ALGO_SHM);
        sc.forced = WEFT_ALGO_AUTO;
    }
    /* a path as slow as the transport (alpha_shm, beta_shm = the node's
     * figures): no better than the rings over the transport */
    sc.cost = c;
    sc.cost.alpha_shm = c.alpha_node;
    sc.cost.beta_shm = c.beta_node;
    weft__select_explain(&sc, WEFT_COLL_ALLREDUCE, 16u << 20, WEFT_FLOAT32, WEFT_SUM,
                         WEFT__MEM_HOST, &ex);
    ck_assert_double_ge(cand_cost(&ex, WEFT_ALGO_HIERARCHICAL),
                        0.95 * cand_cost(&ex, WEFT_ALGO_RABENSEIFNER));
}
END_TEST

/* The process-wide figures: one set for one-node comms, one for multi-node
 * comms, never mixed; a tuning file's node figures serve one-node comms. */
START_TEST(cost_remember_kinds)
{
    reset_config();
    ck_assert_int_eq(weft__select_load(), WEFT_SUCCESS); /* no tuning file: nothing known */
    weft__cost_t got;
    ck_assert(!weft__select_cost_known(false, &got));
    ck_assert(!weft__select_cost_known(true, &got));
    const weft__cost_t one = {.alpha = 1e-6, .beta = 1e-10, .gamma = 3e-10, .nnodes = 1, .ppn = 4};
    weft__select_cost_remember(&one);
    ck_assert(weft__select_cost_known(false, &got));
    ck_assert(got.alpha == one.alpha && got.beta == one.beta);
    ck_assert(!weft__select_cost_known(true, &got)); /* a one-node comm says nothing of links across nodes */
    const weft__cost_t multi = {.alpha = 5e-6, .beta = 1e-9, .gamma = 3e-10, .alpha_node = 7e-7,
                                .beta_node = 6e-11, .nnodes = 2, .ppn = 2};
    weft__select_cost_remember(&multi);
    ck_assert(weft__select_cost_known(true, &got));
    ck_assert(got.alpha == multi.alpha && got.beta_node == multi.beta_node);
    ck_assert(weft__select_cost_known(false, &got));
    ck_assert(got.alpha == one.alpha); /* the one-node set stays as measured */
    /* a multi-node measurement first: its node figures serve one-node comms */
    ck_assert_int_eq(weft__select_load(), WEFT_SUCCESS);
    weft__select_cost_remember(&multi);
    ck_assert(weft__select_cost_known(false, &got));
    ck_assert(got.alpha == multi.alpha_node && got.beta == multi.beta_node);
    ck_assert(got.alpha_node == 0 && got.nnodes == 0);
    /* a tuning file with node figures */
    char path[] = "/tmp/weft_select_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "weft-tuning 1\nalpha 4e-6\nbeta 8e-10\ngamma 2e-10\nalpha_node 4e-7\n"
               "beta_node 4e-11\n");
    fclose(f);
    setenv("WEFT_TUNING_FILE", path, 1);
    ck_assert_int_eq(weft__config_load(), WEFT_SUCCESS);
    ck_assert_int_eq(weft__select_load(), WEFT_SUCCESS);
    unlink(path);
    ck_assert(weft__select_cost_known(true, &got));
    ck_assert(got.alpha == 4e-6 && got.beta == 8e-10 && got.alpha_node == 4e-7 &&
              got.beta_node == 4e-11);
    ck_assert(weft__select_cost_known(false, &got));
    ck_assert(got.alpha == 4e-7 && got.beta == 4e-11 && got.gamma == 2e-10 && got.alpha_node == 0);
    weft__select_cost_remember(&one); /* the file's figures stay */
    ck_assert(weft__select_cost_known(false, &got) && got.alpha == 4e-7);
    unsetenv("WEFT_TUNING_FILE");
    ck_assert_int_eq(weft__config_load(), WEFT_SUCCESS);
    ck_assert_int_eq(weft__select_load(), WEFT_SUCCESS);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("select");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, table_rows_agree);
    tcase_add_test(tc, explain_cost_model);
    tcase_add_test(tc, explain_forced_env_rule);
    tcase_add_test(tc, explain_device_rule);
    tcase_add_test(tc, explain_shm_gives_way);
    tcase_add_test(tc, shm_preferred_within_margin);
    tcase_add_test(tc, hierarchical_selection);
    tcase_add_test(tc, hierarchical_shm_selection);
    tcase_add_test(tc, cost_remember_kinds);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
