/*
 * mesh_data.c - the mesh-tangling data: a structured mesh moved by a
 * synthetic flow, per-cell features and a "tangled soon" target.
 * See loom_mesh.h for the problem and the feature list.
 *
 * Cost per sample: (t + lookahead) midpoint steps over (h+1)(w+1) nodes with
 * a handful of flow features each, then one pass over the cells per
 * geometry evaluation: O((h*w) * (steps + 1)).
 */
#include "internal.h"
#include "loom_mesh.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <zlib.h>

enum { MAX_FEATURES = 8 };

typedef struct {
    float cx, cy, r2inv, s; /* centre, 1/r^2, strength */
    int sink;               /* 0: vortex (rotation), 1: radial sink/source */
} feature_t;

typedef struct {
    int nf;
    feature_t f[MAX_FEATURES];
} flow_t;

static void flow_make(flow_t *fl, loom_rng_t *r)
{
    fl->nf = 3 + (int)loom_rng_below(r, 4);
    for (int k = 0; k < fl->nf; k++) {
        feature_t *f = &fl->f[k];
        float rad = 0.06f + 0.16f * loom_rng_uniform(r);
        f->cx = 0.1f + 0.8f * loom_rng_uniform(r);
        f->cy = 0.1f + 0.8f * loom_rng_uniform(r);
        f->r2inv = 1.0f / (rad * rad);
        f->sink = k >= fl->nf - 1 - (int)loom_rng_below(r, 2) && k > 0;
        if (f->sink)
            f->s = -(0.8f + 1.6f * loom_rng_uniform(r));
        else
            f->s = (loom_rng_uniform(r) < 0.5f ? -1.0f : 1.0f) * (2.0f + 6.0f * loom_rng_uniform(r));
    }
}

static void flow_vel(const flow_t *fl, float x, float y, float *u, float *v)
{
    float a = 0.0f, b = 0.0f;
    for (int k = 0; k < fl->nf; k++) {
        const feature_t *f = &fl->f[k];
        float dx = x - f->cx, dy = y - f->cy;
        float g = f->s * expf(-(dx * dx + dy * dy) * f->r2inv);
        if (f->sink) {
            a += g * dx;
            b += g * dy;
        } else {
            a -= g * dy;
            b += g * dx;
        }
    }
    *u = a;
    *v = b;
}

/* One midpoint step of every node. */
static void advance(const flow_t *fl, size_t nn, float *px, float *py, float dt)
{
    for (size_t i = 0; i < nn; i++) {
        float u, v, um, vm;
        flow_vel(fl, px[i], py[i], &u, &v);
        flow_vel(fl, px[i] + 0.5f * dt * u, py[i] + 0.5f * dt * v, &um, &vm);
        px[i] += dt * um;
        py[i] += dt * vm;
    }
}

typedef struct {
    float area, jmin, jmax, aspect, skew;
} geom_t;

static float cross(float ax, float ay, float bx, float by) { return ax * by - ay * bx; }

/* Corners a=(i,j) b=(i,j+1) c=(i+1,j+1) d=(i+1,j), counter-clockwise. */
static geom_t cell_geom(const float *px, const float *py, int w, int i, int j)
{
    int W = w + 1;
    size_t ia = (size_t)i * W + j, ib = ia + 1, ic = ia + W + 1, id = ia + W;
    float X[4] = {px[ia], px[ib], px[ic], px[id]}, Y[4] = {py[ia], py[ib], py[ic], py[id]};
    geom_t g = {0.0f, INFINITY, -INFINITY, 0.0f, 0.0f};
    float emin = INFINITY, emax = 0.0f;
    for (int k = 0; k < 4; k++) {
        int n = (k + 1) & 3, p = (k + 3) & 3;
        float ex = X[n] - X[k], ey = Y[n] - Y[k], fx = X[p] - X[k], fy = Y[p] - Y[k];
        float jac = cross(ex, ey, fx, fy);
        g.jmin = fminf(g.jmin, jac);
        g.jmax = fmaxf(g.jmax, jac);
        float le = sqrtf(ex * ex + ey * ey), lf = sqrtf(fx * fx + fy * fy);
        emin = fminf(emin, le);
        emax = fmaxf(emax, le);
        float c = (le > 0 && lf > 0) ? fabsf(ex * fx + ey * fy) / (le * lf) : 1.0f;
        g.skew = fmaxf(g.skew, c);
        g.area += 0.5f * cross(X[k], Y[k], X[n], Y[n]);
    }
    g.aspect = emin > 0 ? emax / emin : 1e3f;
    return g;
}

static float clampf(float v) { return v > 10.0f ? 10.0f : v < -10.0f ? -10.0f : v; }

int loom_mesh_sample(const loom_mesh_desc_t *d, uint64_t index, float *x, float *y)
{
    if (!d || !x || !y || d->h <= 0 || d->w <= 0 || d->steps_max < 1 || d->lookahead < 0 ||
        !(d->dt > 0.0f))
        return loom_error(LOOM_ERR_INVALID, "mesh: bad generator settings (h=%d w=%d steps=%d)",
                          d ? d->h : 0, d ? d->w : 0, d ? d->steps_max : 0);
    int h = d->h, w = d->w, W = w + 1;
    size_t nn = (size_t)(h + 1) * W, hw = (size_t)h * w;
    float *buf = malloc(sizeof(float) * (6 * nn + hw));
    if (!buf)
        return loom_error(LOOM_ERR_NOMEM, "mesh: out of memory for a %dx%d sample", h, w);
    float *px = buf, *py = px + nn, *qx = py + nn, *qy = qx + nn, *x0 = qy + nn, *y0 = x0 + nn;
    float *jfut = y0 + nn;
    loom_rng_t r;
    loom_rng_seed(&r, d->seed * 0x9E3779B97F4A7C15ull + index + 1);
    flow_t fl;
    flow_make(&fl, &r);
    int t = d->steps_max / 4 + (int)loom_rng_below(&r, (uint32_t)(d->steps_max - d->steps_max / 4 + 1));
    if (t < 1)
        t = 1;
    for (int i = 0; i <= h; i++)
        for (int j = 0; j <= w; j++) {
            x0[(size_t)i * W + j] = (float)j / w;
            y0[(size_t)i * W + j] = (float)i / h;
        }
    memcpy(px, x0, sizeof(float) * nn);
    memcpy(py, y0, sizeof(float) * nn);
    for (int s = 0; s < t - 1; s++)
        advance(&fl, nn, px, py, d->dt);
    memcpy(qx, px, sizeof(float) * nn); /* positions at t-1 */
    memcpy(qy, py, sizeof(float) * nn);
    advance(&fl, nn, px, py, d->dt); /* positions at t */
    const float aref = 1.0f / ((float)h * w), hx = 1.0f / w, hy = 1.0f / h;
    for (int i = 0; i < h; i++)
        for (int j = 0; j < w; j++) {
            size_t c = (size_t)i * w + j, ia = (size_t)i * W + j;
            size_t nd[4] = {ia, ia + 1, ia + W + 1, ia + W};
            geom_t g = cell_geom(px, py, w, i, j), gp = cell_geom(qx, qy, w, i, j);
            float cx = 0, cy = 0, dx0 = 0, dy0 = 0, u = 0, v = 0, us[4], vs[4];
            for (int k = 0; k < 4; k++) {
                cx += 0.25f * px[nd[k]];
                cy += 0.25f * py[nd[k]];
                dx0 += 0.25f * (px[nd[k]] - x0[nd[k]]);
                dy0 += 0.25f * (py[nd[k]] - y0[nd[k]]);
                flow_vel(&fl, px[nd[k]], py[nd[k]], &us[k], &vs[k]);
                u += 0.25f * us[k];
                v += 0.25f * vs[k];
            }
            /* gradients in reference coordinates (a-b along x, a-d along y) */
            float dudx = 0.5f * (us[1] + us[2] - us[0] - us[3]) / hx;
            float dvdy = 0.5f * (vs[3] + vs[2] - vs[0] - vs[1]) / hy;
            float dvdx = 0.5f * (vs[1] + vs[2] - vs[0] - vs[3]) / hx;
            float dudy = 0.5f * (us[3] + us[2] - us[0] - us[1]) / hy;
            float f[LOOM_MESH_CHANNELS] = {
                2.0f * cx - 1.0f, 2.0f * cy - 1.0f, 10.0f * dx0, 10.0f * dy0, u, v,
                g.area / aref, g.jmin / aref, logf(g.aspect), g.skew,
                (g.area - gp.area) / aref * 10.0f, (g.jmin - gp.jmin) / aref * 10.0f,
                (logf(g.aspect) - logf(gp.aspect)) * 10.0f, (g.skew - gp.skew) * 10.0f,
                0.1f * dudx, 0.1f * dvdy, 0.1f * (dvdx - dudy), (g.jmax - g.jmin) / aref};
            for (int k = 0; k < LOOM_MESH_CHANNELS; k++)
                x[(size_t)k * hw + c] = isfinite(f[k]) ? clampf(f[k]) : 10.0f;
            jfut[c] = g.jmin;
        }
    /* Target: smallest corner Jacobian from t to t + lookahead. */
    for (int s = 0; s < d->lookahead; s++) {
        advance(&fl, nn, px, py, d->dt);
        for (int i = 0; i < h; i++)
            for (int j = 0; j < w; j++) {
                geom_t g = cell_geom(px, py, w, i, j);
                size_t c = (size_t)i * w + j;
                jfut[c] = fminf(jfut[c], g.jmin);
            }
    }
    for (size_t c = 0; c < hw; c++)
        y[c] = jfut[c] <= d->tau * aref ? 1.0f : 0.0f;
    free(buf);
    return LOOM_OK;
}

/* ------------------------------------------------------------------ files */
/* zlib's CRC-32 (the same polynomial and conditioning as the bit-serial
 * loop that wrote version 1 files, so those still load); chunked because
 * crc32's length is a uInt. */
static uint32_t crc32_update(uint32_t crc, const void *p, size_t n)
{
    const unsigned char *b = p;
    uLong c = crc;
    while (n > 0) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, b, k);
        b += k;
        n -= k;
    }
    return (uint32_t)c;
}

#define MESH_MAGIC "LOOMMESH"
#define MESH_VERSION 1u

int loom_mesh_write(const loom_mesh_desc_t *d, uint64_t first, int count, const char *path)
{
    if (!d || !path || count <= 0)
        return loom_error(LOOM_ERR_INVALID, "mesh write: bad arguments");
    size_t nx = (size_t)LOOM_MESH_CHANNELS * d->h * d->w, ny = (size_t)d->h * d->w;
    float *x = malloc(sizeof(float) * (nx + ny));
    if (!x)
        return loom_error(LOOM_ERR_NOMEM, "mesh write: out of memory");
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(x);
        return loom_error(LOOM_ERR_IO, "mesh write: cannot create %s: %s", path, strerror(errno));
    }
    int st = LOOM_OK;
    uint32_t crc = 0, hdr[4] = {MESH_VERSION, (uint32_t)d->h, (uint32_t)d->w, (uint32_t)count};
    uint64_t seed = d->seed;
    int ok = fwrite(MESH_MAGIC, 1, 8, f) == 8 && fwrite(hdr, sizeof hdr, 1, f) == 1 &&
             fwrite(&seed, sizeof seed, 1, f) == 1;
    crc = crc32_update(crc, MESH_MAGIC, 8);
    crc = crc32_update(crc, hdr, sizeof hdr);
    crc = crc32_update(crc, &seed, sizeof seed);
    for (int i = 0; ok && i < count; i++) {
        if ((st = loom_mesh_sample(d, first + (uint64_t)i, x, x + nx)) < 0)
            break;
        ok = fwrite(x, sizeof(float), nx + ny, f) == nx + ny;
        crc = crc32_update(crc, x, sizeof(float) * (nx + ny));
    }
    if (ok && st == LOOM_OK)
        ok = fwrite(&crc, sizeof crc, 1, f) == 1;
    if (fclose(f) != 0)
        ok = 0;
    free(x);
    if (st < 0)
        return st;
    if (!ok)
        return loom_error(LOOM_ERR_IO, "mesh write: cannot write %s", path);
    return LOOM_OK;
}

void loom_mesh_set_free(loom_mesh_set_t *s)
{
    if (!s)
        return;
    free(s->x);
    free(s->y);
    memset(s, 0, sizeof *s);
}

int loom_mesh_read(loom_mesh_set_t *s, const char *path)
{
    memset(s, 0, sizeof *s);
    FILE *f = fopen(path, "rb");
    if (!f)
        return loom_error(LOOM_ERR_IO, "mesh read: cannot open %s: %s", path, strerror(errno));
    char magic[8];
    uint32_t hdr[4], crc = 0, fcrc;
    uint64_t seed;
    int st = LOOM_ERR_FORMAT;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, MESH_MAGIC, 8) != 0 ||
        fread(hdr, sizeof hdr, 1, f) != 1 || fread(&seed, sizeof seed, 1, f) != 1 ||
        hdr[0] != MESH_VERSION || hdr[1] == 0 || hdr[2] == 0 || hdr[3] == 0 || hdr[1] > 65536 ||
        hdr[2] > 65536 || hdr[3] > (1u << 24)) {
        loom_error(st, "mesh read: %s is not a Loom mesh file (version %u)", path, MESH_VERSION);
        goto fail;
    }
    crc = crc32_update(crc, magic, 8);
    crc = crc32_update(crc, hdr, sizeof hdr);
    crc = crc32_update(crc, &seed, sizeof seed);
    s->h = (int)hdr[1];
    s->w = (int)hdr[2];
    s->count = (int)hdr[3];
    size_t nx = (size_t)LOOM_MESH_CHANNELS * s->h * s->w, ny = (size_t)s->h * s->w;
    s->x = malloc(sizeof(float) * nx * s->count);
    s->y = malloc(sizeof(float) * ny * s->count);
    if (!s->x || !s->y) {
        st = loom_error(LOOM_ERR_NOMEM, "mesh read: out of memory for %d samples", s->count);
        goto fail;
    }
    for (int i = 0; i < s->count; i++) {
        float *xi = s->x + nx * i, *yi = s->y + ny * i;
        if (fread(xi, sizeof(float), nx, f) != nx || fread(yi, sizeof(float), ny, f) != ny) {
            loom_error(st, "mesh read: %s is truncated (sample %d of %d)", path, i, s->count);
            goto fail;
        }
        crc = crc32_update(crc, xi, sizeof(float) * nx);
        crc = crc32_update(crc, yi, sizeof(float) * ny);
    }
    if (fread(&fcrc, sizeof fcrc, 1, f) != 1 || fcrc != crc) {
        loom_error(st, "mesh read: %s: checksum mismatch", path);
        goto fail;
    }
    fclose(f);
    return LOOM_OK;
fail:
    fclose(f);
    loom_mesh_set_free(s);
    return st;
}
