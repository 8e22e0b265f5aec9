/*
 * halo_pack.c - host pack/unpack of a strided box of a halo buffer into or
 * out of a contiguous staging buffer. The innermost contiguous run is merged
 * across dimensions the box spans completely, so faces of the slow
 * dimensions become one memcpy per leading index.
 *
 * Thread contract: pure functions of their arguments; any thread.
 */
#include <string.h>

#include "halo.h"

enum { PACK, UNPACK, ADD };

/* Run length (elements) of the contiguous pieces, and how many loop levels
 * (0..3 spatial dims) remain outside it. */
static size_t run_len(const weft__halo_layout_t *l, const weft__halo_region_t *r, int *levels)
{
    size_t run = r->len[2];
    int lv = 2;
    while (lv > 0 && r->len[lv] == l->ext[lv]) {
        run *= r->len[lv - 1];
        lv--;
    }
    *levels = lv; /* dims 0 .. lv-1 are looped over; dim lv is folded into run */
    return run;
}

static inline void move(int mode, char *buf, char *stage, size_t bytes, size_t n,
                        const weft__halo_layout_t *l)
{
    if (mode == PACK) memcpy(stage, buf, bytes);
    else if (mode == UNPACK) memcpy(buf, stage, bytes);
    else weft__reduce(buf, stage, n, l->dtype, WEFT_SUM);
}

/* The strided cases (levels 1 and 2: one run per row, e.g. a face of the
 * fastest dimension): rows are (o, a, b) with b the innermost loop; the
 * loops are specialised on direction and a constant run size so that the
 * copy compiles to a move or two instead of a memcpy call per row. */
#define ROWS(COPY)                                                                 \
    for (size_t o = 0; o < l->outer; o++)                                          \
        for (size_t a = 0; a < na; a++) {                                          \
            char *row = buf + (o * e0 + s0) * stride0 + a * stride_a + first;      \
            for (size_t b = 0; b < nb; b++, row += stride_b, stage += rb) {        \
                COPY;                                                              \
            }                                                                      \
        }
#define ROWS_SIZED(MODE, N)                                                        \
    do {                                                                           \
        if ((MODE) == PACK) ROWS(memcpy(stage, row, (N)))                          \
        else ROWS(memcpy(row, stage, (N)))                                         \
    } while (0)

static void walk_rows(int mode, char *buf, const weft__halo_layout_t *l, const weft__halo_region_t *r,
                      char *stage, size_t rb, size_t run, int levels)
{
    size_t es = l->esize, s0 = r->start[0];
    size_t e0 = l->ext[0], e1 = l->ext[1], e2 = l->ext[2];
    size_t stride0 = e1 * e2 * es;                             /* one step of dimension 0 */
    size_t first = (r->start[1] * e2 + r->start[2]) * es;      /* offset inside a dim-0 slice */
    size_t na, nb, stride_a, stride_b;
    if (levels == 2) { na = r->len[0]; stride_a = stride0; nb = r->len[1]; stride_b = e2 * es; }
    else { na = 1; stride_a = 0; nb = r->len[0]; stride_b = stride0; }
    if (mode == ADD) {
        ROWS(weft__reduce(row, stage, run, l->dtype, WEFT_SUM));
        return;
    }
    switch (rb) {
    case 1: ROWS_SIZED(mode, 1); break;
    case 2: ROWS_SIZED(mode, 2); break;
    case 4: ROWS_SIZED(mode, 4); break;
    case 8: ROWS_SIZED(mode, 8); break;
    case 12: ROWS_SIZED(mode, 12); break;
    case 16: ROWS_SIZED(mode, 16); break;
    case 24: ROWS_SIZED(mode, 24); break;
    case 32: ROWS_SIZED(mode, 32); break;
    default: ROWS_SIZED(mode, rb); break;
    }
}

static void walk(int mode, char *buf, const weft__halo_layout_t *l, const weft__halo_region_t *r,
                 char *stage)
{
    int levels;
    size_t run = run_len(l, r, &levels);
    size_t es = l->esize, rb = run * es;
    if (rb == 0) return;
    if (levels > 0) {
        walk_rows(mode, buf, l, r, stage, rb, run, levels);
        return;
    }
    size_t e0 = l->ext[0], e1 = l->ext[1], e2 = l->ext[2];
    for (size_t o = 0; o < l->outer; o++, stage += rb)
        move(mode, buf + (((o * e0 + r->start[0]) * e1 + r->start[1]) * e2 + r->start[2]) * es, stage,
             rb, run, l);
}

/* ---- piecewise pack / unpack (a transport's own fragments) --------------------- */
/* The rows of a region in packing order: row k = (o, a, b), k = (o*na + a)*nb + b,
 * at base + o*so + a*sa + b*sb, rb bytes each (the same order walk() uses). */
typedef struct rows {
    char *base;
    size_t rb, na, nb, so, sa, sb, nrows;
} rows_t;

static void rows_init(rows_t *w, char *buf, const weft__halo_layout_t *l,
                      const weft__halo_region_t *r)
{
    int levels;
    size_t run = run_len(l, r, &levels);
    size_t es = l->esize, e0 = l->ext[0], e1 = l->ext[1], e2 = l->ext[2];
    size_t stride0 = e1 * e2 * es;
    w->rb = run * es;
    w->so = e0 * stride0;
    if (levels == 0) {
        w->base = buf + ((r->start[0] * e1 + r->start[1]) * e2 + r->start[2]) * es;
        w->na = w->nb = 1;
        w->sa = w->sb = 0;
    } else {
        w->base = buf + r->start[0] * stride0 + (r->start[1] * e2 + r->start[2]) * es;
        if (levels == 2) {
            w->na = r->len[0], w->sa = stride0, w->nb = r->len[1], w->sb = e2 * es;
        } else {
            w->na = 1, w->sa = 0, w->nb = r->len[0], w->sb = stride0;
        }
    }
    w->nrows = w->rb ? l->outer * w->na * w->nb : 0;
}

/* Copy bytes [offset, offset + len) of the packed region between the buffer
 * and `flat` (to flat when pack): a partial first row, whole rows, a partial
 * last row. Whole rows go through a copy of constant size for the common
 * row sizes (a memcpy call per 4-byte row made a 12 KiB face 6 us slower). */
#define NEXT_ROW(w, o, a, b)                                                       \
    do {                                                                           \
        if (++(b) == (w)->nb) {                                                    \
            (b) = 0;                                                               \
            if (++(a) == (w)->na) {                                                \
                (a) = 0;                                                           \
                (o)++;                                                             \
            }                                                                      \
        }                                                                          \
    } while (0)
#define ROW_AT(w, o, a, b) ((w)->base + (o) * (w)->so + (a) * (w)->sa + (b) * (w)->sb)
#define WHOLE_ROWS(N)                                                              \
    do {                                                                           \
        for (size_t i = 0; i < m; i++, flat += (N)) {                              \
            char *row_ = ROW_AT(w, o, a, b);                                       \
            if (pack) memcpy(flat, row_, (N));                                     \
            else memcpy(row_, flat, (N));                                          \
            NEXT_ROW(w, o, a, b);                                                  \
        }                                                                          \
    } while (0)

static void rows_copy(const rows_t *w, size_t offset, char *flat, size_t len, int pack)
{
    if (w->rb == 0 || len == 0) return;
    size_t rb = w->rb, k = offset / rb, in = offset % rb;
    size_t b = k % w->nb, a = (k / w->nb) % w->na, o = k / (w->nb * w->na);
    if (in > 0) { /* the first row, from inside */
        size_t n = rb - in < len ? rb - in : len;
        char *row = ROW_AT(w, o, a, b) + in;
        if (pack) memcpy(flat, row, n);
        else memcpy(row, flat, n);
        flat += n;
        len -= n;
        NEXT_ROW(w, o, a, b);
        k++;
    }
    size_t m = len / rb;
    if (m > w->nrows - k) m = w->nrows - k;
    switch (rb) {
    case 4: WHOLE_ROWS(4); break;
    case 8: WHOLE_ROWS(8); break;
    case 12: WHOLE_ROWS(12); break;
    case 16: WHOLE_ROWS(16); break;
    case 24: WHOLE_ROWS(24); break;
    case 32: WHOLE_ROWS(32); break;
    default: WHOLE_ROWS(rb); break;
    }
    len -= m * rb;
    k += m;
    if (len > 0 && k < w->nrows) { /* the last row, up to inside */
        char *row = ROW_AT(w, o, a, b);
        if (pack) memcpy(flat, row, len);
        else memcpy(row, flat, len);
    }
}

size_t weft__halo_pack_part(const void *buf, const weft__halo_layout_t *l,
                            const weft__halo_region_t *r, size_t offset, void *out, size_t max)
{
    if (offset >= r->bytes) return 0;
    size_t n = r->bytes - offset < max ? r->bytes - offset : max;
    if (offset == 0 && n == r->bytes) { /* whole region: the specialised walk */
        weft__halo_pack(buf, l, r, out);
        return n;
    }
    rows_t w;
    rows_init(&w, (char *)buf, l, r);
    rows_copy(&w, offset, out, n, 1);
    return n;
}

void weft__halo_unpack_part(void *buf, const weft__halo_layout_t *l, const weft__halo_region_t *r,
                            size_t offset, const void *in, size_t len)
{
    if (offset >= r->bytes) return;
    if (len > r->bytes - offset) len = r->bytes - offset;
    if (offset == 0 && len == r->bytes) {
        weft__halo_unpack(buf, l, r, in);
        return;
    }
    rows_t w;
    rows_init(&w, buf, l, r);
    rows_copy(&w, offset, (char *)in, len, 0);
}

int weft__halo_contiguous(const weft__halo_layout_t *l, const weft__halo_region_t *r, size_t *offset)
{
    int levels;
    size_t run = run_len(l, r, &levels);
    /* one run per leading index; one run in all if there is one leading index
     * or the region spans every spatial dimension fully */
    if (levels != 0 || (l->outer > 1 && run != l->ext[0] * l->ext[1] * l->ext[2])) return 0;
    *offset = ((r->start[0] * l->ext[1] + r->start[1]) * l->ext[2] + r->start[2]) * l->esize;
    return 1;
}

void weft__halo_pack(const void *buf, const weft__halo_layout_t *l, const weft__halo_region_t *r,
                     void *out)
{
    walk(PACK, (char *)buf, l, r, out);
}

void weft__halo_unpack(void *buf, const weft__halo_layout_t *l, const weft__halo_region_t *r,
                       const void *in)
{
    walk(UNPACK, buf, l, r, (char *)in);
}

void weft__halo_unpack_add(void *buf, const weft__halo_layout_t *l, const weft__halo_region_t *r,
                           const void *in)
{
    walk(ADD, buf, l, r, (char *)in);
}
