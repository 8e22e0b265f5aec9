/*
 * transport.c - the transport table: which point-to-point transports Weft
 * knows, which are built in, and which one a new communicator uses: the one
 * weft_comm_create_ex asks for, or by default the one WEFT_TRANSPORT names
 * (parsed once, by weft_init, into weft__cfg.transport):
 *
 *   ucx   UCP tag matching (backends/ucx); WEFT_ERR_UNSUPPORTED if UCX is not
 *         built in;
 *   mpi   MPI point-to-point (backends/mpi), always built;
 *   auto  (default, also an empty value; WEFT_TRANSPORT_DEFAULT) the first
 *         row built in: UCX when built in, else MPI. The rule and the
 *         measurements behind it are in doc/ucx.md.
 *
 * Thread contract: any thread, except weft__transport_shutdown_all
 * (weft_finalize).
 */
#include <stdatomic.h>
#include <string.h>

#include "log.h"
#include "transport.h"

static const weft__transport_row_t rows[] = {
    {WEFT_TRANSPORT_UCX, "ucx", "UCX", weft__transport_ucx, weft__transport_ucx_shutdown,
     "configure with -Ducx=enabled and libucx-dev installed, or use the MPI transport"},
    {WEFT_TRANSPORT_MPI, "mpi", "MPI", weft__transport_mpi, NULL, "always built"},
};
enum { NROWS = sizeof rows / sizeof rows[0] };

/* A communicator was opened on row i since weft_init (its shutdown is due). */
static _Atomic int used[NROWS];

const weft__transport_row_t *weft__transport_table(int *n)
{
    *n = NROWS;
    return rows;
}

static int row_of_id(weft_transport_t id)
{
    for (int i = 0; i < NROWS; i++)
        if (rows[i].id == id) return i;
    return -1;
}

const weft__transport_t *weft__transport_choose(weft_transport_t want, weft_transport_t configured,
                                                weft_status_t *st)
{
    int from_env = 0;

    *st = WEFT_SUCCESS;
    if (want == WEFT_TRANSPORT_DEFAULT) {
        want = configured;
        from_env = 1;
        if (want == WEFT_TRANSPORT_DEFAULT) {
            for (int i = 0; i < NROWS; i++) {
                const weft__transport_t *tp = rows[i].get();
                if (tp == NULL) continue;
                atomic_store_explicit(&used[i], 1, memory_order_relaxed);
                return tp;
            }
            WEFT__ERROR("WEFT_TRANSPORT=auto: no transport is built in");
            *st = WEFT_ERR_UNSUPPORTED;
            return NULL;
        }
    }
    int i = row_of_id(want);
    if (i < 0) {
        WEFT__ERROR("weft_comm_create_ex: unknown transport %d", (int)want);
        *st = WEFT_ERR_INVALID_ARG;
        return NULL;
    }
    const weft__transport_t *tp = rows[i].get();
    if (tp == NULL) {
        if (from_env)
            WEFT__ERROR("WEFT_TRANSPORT=%s: this Weft was built without %s (%s)", rows[i].name,
                        rows[i].label, rows[i].missing);
        else
            WEFT__ERROR("weft_comm_create_ex: WEFT_TRANSPORT_%s: this Weft was built without %s "
                        "(%s)", rows[i].label, rows[i].label, rows[i].missing);
        *st = WEFT_ERR_UNSUPPORTED;
        return NULL;
    }
    atomic_store_explicit(&used[i], 1, memory_order_relaxed);
    return tp;
}

weft_transport_t weft__transport_id(const weft__transport_t *tp)
{
    for (int i = 0; i < NROWS; i++)
        if (rows[i].get() == tp) return rows[i].id;
    return WEFT_TRANSPORT_DEFAULT; /* not a transport of the table: a caller's bug */
}

weft_status_t weft__transport_from_name(const char *name, weft_transport_t *out)
{
    if (name == NULL) return WEFT_ERR_INVALID_ARG;
    if (name[0] == '\0' || strcmp(name, "auto") == 0) {
        *out = WEFT_TRANSPORT_DEFAULT;
        return WEFT_SUCCESS;
    }
    for (int i = 0; i < NROWS; i++) {
        if (strcmp(name, rows[i].name) == 0) {
            *out = rows[i].id;
            return WEFT_SUCCESS;
        }
    }
    return WEFT_ERR_INVALID_ARG;
}

void weft__transport_shutdown_all(void)
{
    /* Every built row's shutdown runs on every rank, whether this rank
     * opened a communicator on it or not: a shutdown may be collective over
     * the world (UCX's is), and another rank may have used the transport. */
    for (int i = 0; i < NROWS; i++) {
        atomic_store_explicit(&used[i], 0, memory_order_relaxed);
        if (rows[i].shutdown != NULL) rows[i].shutdown();
    }
}

const char *weft_transport_name(weft_transport_t transport)
{
    if (transport == WEFT_TRANSPORT_DEFAULT) return "default";
    int i = row_of_id(transport);
    return i < 0 ? NULL : rows[i].name;
}
