/*
 * halo.h - private types of the halo exchange (lib/halo.c) and its pack /
 * unpack kernels (lib/halo_pack.c). Pack and unpack are separate functions
 * over a region descriptor so that a device layer can supply its own.
 */
#ifndef WEFT_HALO_PRIV_H
#define WEFT_HALO_PRIV_H

#include "weft_halo.h"
#include "weft_internal.h"

/* A buffer's layout, normalised to [outer][e0][e1][e2] (missing spatial
 * dimensions have extent 1, leading dimensions multiply into outer). */
typedef struct weft__halo_layout {
    size_t outer;
    size_t ext[3];
    size_t esize;
    weft_datatype_t dtype;
} weft__halo_layout_t;

/* A box of the buffer: all of outer, start[d] .. start[d] + len[d] - 1. */
typedef struct weft__halo_region {
    size_t start[3], len[3];
    size_t bytes; /* outer * len0 * len1 * len2 * esize */
} weft__halo_region_t;

/** 1 if region is one contiguous run of buf (then *offset is its byte
 * offset): it can be sent from / received into buf without staging. */
int weft__halo_contiguous(const weft__halo_layout_t *l, const weft__halo_region_t *r, size_t *offset);
/** Copy region of buf into the contiguous out. Any thread. */
void weft__halo_pack(const void *buf, const weft__halo_layout_t *l, const weft__halo_region_t *r,
                     void *out);
/** Copy the contiguous in into region of buf. Any thread. */
void weft__halo_unpack(void *buf, const weft__halo_layout_t *l, const weft__halo_region_t *r,
                       const void *in);
/** Bytes [offset, offset + min(max, rest)) of the packed region into out;
 * returns how many (0 past the end). Offsets need not fall on rows or
 * elements: a transport packs its own fragments with it. Any thread. */
size_t weft__halo_pack_part(const void *buf, const weft__halo_layout_t *l,
                            const weft__halo_region_t *r, size_t offset, void *out, size_t max);
/** The reverse: bytes [offset, offset + len) of the packed region from in into
 * buf (clipped to the region). Any thread. */
void weft__halo_unpack_part(void *buf, const weft__halo_layout_t *l, const weft__halo_region_t *r,
                            size_t offset, const void *in, size_t len);
/** Add the contiguous in into region of buf (SUM in l->dtype). Any thread. */
void weft__halo_unpack_add(void *buf, const weft__halo_layout_t *l, const weft__halo_region_t *r,
                           const void *in);

#endif /* WEFT_HALO_PRIV_H */
