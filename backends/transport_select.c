/*
 * transport_select.c - which point-to-point transport a new communicator
 * uses: the one weft_comm_create_ex asks for, or by default the one
 * WEFT_TRANSPORT names (parsed once, by weft_init, into weft__cfg.transport):
 *
 *   mpi   MPI point-to-point (backends/mpi), always built;
 *   ucx   UCP tag matching (backends/ucx); WEFT_ERR_UNSUPPORTED if UCX is not
 *         built in;
 *   auto  (default, also an empty value; WEFT_TRANSPORT_DEFAULT in
 *         weft__cfg.transport) UCX when built in, else MPI. The rule
 *         and the measurements behind it are in doc/ucx.md.
 *
 * Compiled with and without UCX: weft__transport_ucx() is NULL without it.
 */
#include "comm.h"
#include "config.h"
#include "log.h"
#include "transport.h"

/** See weft_internal.h. Any thread (reads weft__cfg, set once at init). */
const weft__transport_t *weft__transport_choose(weft_transport_t want, weft_status_t *st)
{
    const weft__transport_t *ucx = weft__transport_ucx();
    const char *asked = "weft_comm_create_ex: WEFT_TRANSPORT_UCX";

    *st = WEFT_SUCCESS;
    if (want == WEFT_TRANSPORT_DEFAULT) {
        want = weft__cfg.transport;
        if (want == WEFT_TRANSPORT_DEFAULT) return ucx != NULL ? ucx : &weft__transport_mpi;
        asked = "WEFT_TRANSPORT=ucx";
    }
    if (want == WEFT_TRANSPORT_MPI) return &weft__transport_mpi;
    if (want == WEFT_TRANSPORT_UCX) {
        if (ucx != NULL) return ucx;
        WEFT__ERROR("%s: this Weft was built without UCX (configure with -Ducx=enabled and "
                    "libucx-dev installed, or use the MPI transport)", asked);
        *st = WEFT_ERR_UNSUPPORTED;
        return NULL;
    }
    WEFT__ERROR("weft_comm_create_ex: unknown transport %d", (int)want);
    *st = WEFT_ERR_INVALID_ARG;
    return NULL;
}

/** The public value for a transport object. Any thread. */
weft_transport_t weft__transport_id(const weft__transport_t *tp)
{
    return tp == &weft__transport_mpi ? WEFT_TRANSPORT_MPI : WEFT_TRANSPORT_UCX;
}

const char *weft_transport_name(weft_transport_t transport)
{
    switch (transport) {
    case WEFT_TRANSPORT_DEFAULT: return "default";
    case WEFT_TRANSPORT_MPI: return "mpi";
    case WEFT_TRANSPORT_UCX: return "ucx";
    default: return NULL;
    }
}
