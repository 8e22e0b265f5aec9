/*
 * algos.c - the registry of collective algorithms, built from the table
 * (algos.def): which implementation serves (collective, algorithm), the
 * algorithms of one collective in order, and the algorithms' names.
 * Selection (lib/select.c) looks algorithms up here and iterates over those
 * of one collective.
 *
 * To add an algorithm: its file lib/coll/<coll>_<name>.c defining
 * weft__<coll>_<name>_impl, one row in algos.def and, for a new name, one
 * value WEFT_ALGO_<NAME> in include/weft.h (the public enum).
 */
#include <stdio.h>
#include <string.h>

#include "algo.h"

#define WEFT__ALGO(coll, name) extern const weft__algo_impl_t weft__##coll##_##name##_impl;
#define WEFT__ALGO_DEVICE(coll, name) WEFT__ALGO(coll, name)
#define WEFT__ALGO_BACKEND(coll, name) WEFT__ALGO(coll, name)
#include "algos.def"
#undef WEFT__ALGO
#undef WEFT__ALGO_DEVICE
#undef WEFT__ALGO_BACKEND

typedef struct algo_row {
    const weft__algo_impl_t *impl;
    const char *coll;     /* as the row names it (checked against impl->kind by the unit tests) */
    const char *name;
    bool device_only;
} algo_row_t;

static const algo_row_t algo_table[] = {
#define WEFT__ALGO(coll, name) {&weft__##coll##_##name##_impl, #coll, #name, false},
#define WEFT__ALGO_DEVICE(coll, name) {&weft__##coll##_##name##_impl, #coll, #name, true},
#define WEFT__ALGO_BACKEND(coll, name) WEFT__ALGO(coll, name)
#include "algos.def"
#undef WEFT__ALGO
#undef WEFT__ALGO_DEVICE
#undef WEFT__ALGO_BACKEND
};

#define ALGO_TABLE_N (sizeof(algo_table) / sizeof(algo_table[0]))

/* Public names of enum values that no row uses (yet): they stay valid names. */
static const struct {
    weft_algo_t id;
    const char *name;
} reserved_names[] = {
    {WEFT_ALGO_AUTO, "auto"},
    {WEFT_ALGO_BRUCK, "bruck"},
};

#define RESERVED_N (sizeof(reserved_names) / sizeof(reserved_names[0]))

/* Per-collective lists, built once from algo_table (under pthread_once). */
static const weft__algo_impl_t *algo_lists[WEFT_COLL_COUNT][ALGO_TABLE_N + 1];
static int algo_list_n[WEFT_COLL_COUNT];
static uint64_t device_only_mask[WEFT_COLL_COUNT]; /* bit a: (coll, a) serves device buffers only */
/* (coll, algo) -> its implementation: the look-up of every issue is one
 * load (a scan of the table read one implementation struct per row, each
 * on a line of its own, on caches a device-style compute had cooled). */
static const weft__algo_impl_t *algo_index[WEFT_COLL_COUNT][WEFT_ALGO_COUNT];
static pthread_once_t algo_lists_once = PTHREAD_ONCE_INIT;

_Static_assert(WEFT_ALGO_COUNT <= 64, "device_only_mask holds one bit per algorithm");

static void build_lists(void)
{
    for (size_t i = 0; i < ALGO_TABLE_N; i++) {
        int k = (int)algo_table[i].impl->kind;
        if (k < 0 || k >= WEFT_COLL_COUNT) continue;
        algo_lists[k][algo_list_n[k]++] = algo_table[i].impl;
        const unsigned a = (unsigned)algo_table[i].impl->id;
        if (a < WEFT_ALGO_COUNT && algo_index[k][a] == NULL) algo_index[k][a] = algo_table[i].impl;
        if (algo_table[i].device_only && (unsigned)algo_table[i].impl->id < WEFT_ALGO_COUNT)
            device_only_mask[k] |= UINT64_C(1) << algo_table[i].impl->id;
    }
}

/* Thread contract: any thread (the index is built once under pthread_once). */
const weft__algo_impl_t *weft__algo_impl(weft_coll_t coll, weft_algo_t algo)
{
    if ((unsigned)coll >= WEFT_COLL_COUNT || (unsigned)algo >= WEFT_ALGO_COUNT) return NULL;
    pthread_once(&algo_lists_once, build_lists);
    return algo_index[coll][algo]; /* the first row for (coll, algo), as the scan found */
}

/* Thread contract: any thread (the lists are built once under pthread_once). */
const weft__algo_impl_t *const *weft__algo_list(weft_coll_t coll, int *n)
{
    if ((unsigned)coll >= WEFT_COLL_COUNT) {
        if (n) *n = 0;
        return NULL;
    }
    pthread_once(&algo_lists_once, build_lists);
    if (n) *n = algo_list_n[coll];
    return algo_lists[coll];
}

/* Thread contract: any thread. */
bool weft__algo_device_only(weft_coll_t coll, weft_algo_t algo)
{
    if ((unsigned)coll >= WEFT_COLL_COUNT || (unsigned)algo >= WEFT_ALGO_COUNT) return false;
    pthread_once(&algo_lists_once, build_lists);
    return (device_only_mask[coll] >> algo) & 1;
}

/* Thread contract: any thread. */
const char *weft_algo_name(weft_algo_t a)
{
    for (size_t i = 0; i < RESERVED_N; i++)
        if (reserved_names[i].id == a) return reserved_names[i].name;
    for (size_t i = 0; i < ALGO_TABLE_N; i++)
        if (algo_table[i].impl->id == a) return algo_table[i].name;
    return NULL;
}

/* Thread contract: any thread. */
weft_status_t weft_algo_from_name(const char *name, weft_algo_t *algo)
{
    if (name == NULL || algo == NULL) return WEFT_ERR_INVALID_ARG;
    for (size_t i = 0; i < RESERVED_N; i++)
        if (strcmp(name, reserved_names[i].name) == 0) {
            *algo = reserved_names[i].id;
            return WEFT_SUCCESS;
        }
    for (size_t i = 0; i < ALGO_TABLE_N; i++)
        if (strcmp(name, algo_table[i].name) == 0) {
            *algo = algo_table[i].impl->id;
            return WEFT_SUCCESS;
        }
    return WEFT_ERR_ALGORITHM;
}

/* Thread contract: any thread. */
size_t weft__algo_names(weft_coll_t coll, const char *sep, char *out, size_t cap)
{
    size_t len = 0;
    int n = 0;
    const weft__algo_impl_t *const *list = weft__algo_list(coll, &n);
    for (int i = -1; i < n; i++) {
        const char *name = i < 0 ? "auto" : weft_algo_name(list[i]->id);
        int w = snprintf(out != NULL && len < cap ? out + len : NULL,
                         out != NULL && len < cap ? cap - len : 0, "%s%s", i < 0 ? "" : sep,
                         name ? name : "?");
        if (w > 0) len += (size_t)w;
    }
    if (out != NULL && cap > 0 && len == 0) out[0] = '\0';
    return len;
}
