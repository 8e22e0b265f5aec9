/*
 * ucx_none.c - a build without UCX: there is no UCX transport.
 * The transport table (backends/transport.c) reports WEFT_TRANSPORT=ucx as
 * unsupported and lets auto use MPI.
 */
#include "transport.h"

/** NULL: UCX is not built in. Any thread. */
const weft__transport_t *weft__transport_ucx(void) { return NULL; }

/** Nothing to destroy. weft_finalize only. */
void weft__transport_ucx_shutdown(void) {}
