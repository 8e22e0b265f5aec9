/*
 * transport_select.c - which point-to-point transport a new communicator
 * uses, from WEFT_TRANSPORT (read once into weft__cfg.transport):
 *
 *   mpi   MPI point-to-point (backends/mpi), always built;
 *   ucx   UCP tag matching (backends/ucx); WEFT_ERR_UNSUPPORTED if UCX is not
 *         built in;
 *   auto  (default, also an empty value) UCX when built in, else MPI. The rule
 *         and the measurements behind it are in doc/ucx.md.
 *
 * Compiled with and without UCX: weft__transport_ucx() is NULL without it.
 */
#include <string.h>
#include <strings.h>

#include "weft_internal.h"

/** See weft_internal.h. Any thread (reads weft__cfg, set once at init). */
const weft__transport_t *weft__transport_choose(weft_status_t *st)
{
    const char *want = weft__cfg.transport;
    const weft__transport_t *ucx = weft__transport_ucx();

    *st = WEFT_SUCCESS;
    if (want[0] == '\0' || strcasecmp(want, "auto") == 0)
        return ucx != NULL ? ucx : &weft__transport_mpi;
    if (strcasecmp(want, "mpi") == 0) return &weft__transport_mpi;
    if (strcasecmp(want, "ucx") == 0) {
        if (ucx != NULL) return ucx;
        WEFT__ERROR("WEFT_TRANSPORT=ucx: this Weft was built without UCX (configure with "
                    "-Ducx=enabled and libucx-dev installed, or use WEFT_TRANSPORT=mpi|auto)");
        *st = WEFT_ERR_UNSUPPORTED;
        return NULL;
    }
    WEFT__ERROR("WEFT_TRANSPORT=%s: unknown transport (expected auto, mpi or ucx)", want);
    *st = WEFT_ERR_INVALID_ARG;
    return NULL;
}
