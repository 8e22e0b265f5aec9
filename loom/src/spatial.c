/*
 * spatial.c - spatial parallelism: each sample's height and width split over
 * a grid of ranks, the model's layers run on tiles with halo exchanges.
 *
 * Convolution on a tile (kernel k, stride s, pad p = (k-1)/2): the input tile
 * of rows [oy, oy+h) (oy and h multiples of s) produces output rows
 * [oy/s, (oy+h)/s).  Its windows read rows oy-p .. oy+h-s-p+k-1, so the tile
 * is copied into a buffer with a halo of lo = p rows below and
 * hi = max(0, k-s-p) rows above (the same along the width), the halo is
 * filled from the neighbours (weft_halo_exchange, corners included; at the
 * edge of the global image it stays zero: the padding), and the convolution
 * runs unpadded on that buffer.  Backward computes the gradient of the whole
 * buffer, then weft_halo_start_accumulate sends each halo cell's gradient to
 * the rank that owns the cell (added there) while the weight gradient is
 * computed; weft_halo_wait before the input gradient is used.  The forward
 * exchange is not overlapped (the whole tile is one GEMM).  Halo volume per convolution and direction:
 * about n*c*(lo+hi)*(h + w) values (a face per neighbour).
 *
 * Batch norm sums its per-channel statistics over the group (weft_allreduce
 * in double): forward the sums for the mean, then the centred squares for the
 * variance (the same two passes as the single-process kernel); backward the
 * sums of dy and dy*xhat.  gamma/beta gradients stay this rank's part, like
 * the convolution weights: the group sum is the unsplit gradient.
 */
#include "internal.h"
#include "loom_par.h"
#include "weft_halo.h"

#include <math.h>

typedef struct {
    loom_op_info_t in;        /* the model's layer */
    loom_conv_desc_t cd;      /* convolution with the padding removed */
    int lo, hi;               /* halo widths */
    int h, w;                 /* input tile */
    int hp, wp;               /* tile + halo */
    float *xp;                /* padded input (kept for backward) */
    size_t padded;            /* floats of xp */
    weft_halo_plan_t plan;    /* NULL: no halo (1x1 kernel or 1 rank) */
    double *stats;            /* batch norm: 2*c+1 doubles */
    double count;             /* batch norm: pixels of the group per channel */
} layer_t;

struct loom_spatial {
    loom_model_t *m;
    weft_comm_t comm;
    int nl;
    layer_t *l;
    float *ws;                /* the model's workspace, or ours if larger */
    int own_ws;
    float *dxp;               /* gradient of a padded input: one, shared by the layers */
    size_t ws_floats, dxp_floats, extra_bytes;
    long gcount0;             /* global pixels per sample at the input */
    loom_backward_hook_t hook;
    void *hook_arg;
    double wait_s;
};

void loom_spatial_split(int extent, int parts, int align, int index, int *offset, int *size)
{
    int units = extent / align, base = units / parts, extra = units % parts;
    int before = index * base + (index < extra ? index : extra);
    *offset = before * align;
    *size = (base + (index < extra)) * align;
}

static int werr(int ws, const char *what, const char *layer)
{
    return loom_error(LOOM_ERR_INTERNAL, "spatial: %s at layer %s: %s", what, layer,
                      weft_strerror((weft_status_t)ws));
}

int loom_spatial_create(loom_spatial_t **out, loom_model_t *m, weft_comm_t comm, int sh, int sw,
                        int oy, int ox, int gh, int gw)
{
    int size = 0, rank = 0, st = LOOM_OK, ws;
    if (!out || !m || !comm || sh <= 0 || sw <= 0)
        return loom_error(LOOM_ERR_INVALID, "spatial: bad arguments");
    if ((ws = weft_comm_size(comm, &size)) != WEFT_SUCCESS || (ws = weft_comm_rank(comm, &rank)) != WEFT_SUCCESS)
        return loom_weft_error(ws, "spatial: communicator");
    if (size != sh * sw)
        return loom_error(LOOM_ERR_INVALID, "spatial: grid %dx%d needs %d ranks, the group has %d",
                          sh, sw, sh * sw, size);
    loom_spatial_t *s = calloc(1, sizeof *s);
    int nops = loom_model_num_ops(m);
    if (!s || !(s->l = calloc((size_t)nops, sizeof *s->l))) {
        free(s);
        return loom_error(LOOM_ERR_NOMEM, "spatial: out of memory");
    }
    s->m = m;
    s->comm = comm;
    s->nl = nops;
    s->gcount0 = (long)gh * gw;
    /* Tile extents and offsets of every activation, at its resolution. */
    int nacts = 0;
    for (int i = 0; i < nops; i++) {
        loom_op_info_t in;
        loom_model_op_info(m, i, &in);
        nacts = LOOM_MAX(nacts, in.out + 1);
    }
    int *aoy = calloc((size_t)nacts * 4, sizeof(int));
    if (!aoy) {
        st = loom_error(LOOM_ERR_NOMEM, "spatial: out of memory");
        goto fail;
    }
    int *aox = aoy + nacts, *agh = aox + nacts, *agw = agh + nacts;
    loom_shape_t is0 = loom_model_input_shape(m);
    aoy[0] = oy;
    aox[0] = ox;
    agh[0] = gh;
    agw[0] = gw;
    for (int i = 0; i < nops && st == LOOM_OK; i++) {
        layer_t *L = &s->l[i];
        loom_model_op_info(m, i, &L->in);
        loom_op_info_t *o = &L->in;
        int a = o->in[0];
        L->h = o->in_shape.h;
        L->w = o->in_shape.w;
        int y0 = aoy[a], x0 = aox[a], Gh = agh[a], Gw = agw[a];
        int ny0 = y0, nx0 = x0, nGh = Gh, nGw = Gw;
        switch (o->type) {
        case LOOM_OP_CONV: {
            const loom_conv_desc_t *d = &o->conv;
            int k = d->kh, sd = d->stride_h, p = d->pad_h;
            if (d->kh != d->kw || d->stride_h != d->stride_w || d->pad_h != d->pad_w || !(k & 1) ||
                p != (k - 1) / 2 || d->dil_h != 1 || d->dil_w != 1) {
                st = loom_error(LOOM_ERR_INVALID,
                                "spatial: layer %s: only square odd kernels with pad (k-1)/2 and no "
                                "dilation can be split", o->name);
                break;
            }
            if (y0 % sd || x0 % sd || L->h % sd || L->w % sd || Gh % sd || Gw % sd) {
                st = loom_error(LOOM_ERR_INVALID,
                                "spatial: layer %s: stride %d does not divide the tile %dx%d at "
                                "(%d,%d) of %dx%d (choose sizes that are multiples of the total stride)",
                                o->name, sd, L->h, L->w, y0, x0, Gh, Gw);
                break;
            }
            L->lo = p;
            L->hi = LOOM_MAX(0, k - sd - p);
            L->hp = L->h + L->lo + L->hi;
            L->wp = L->w + L->lo + L->hi;
            L->cd = *d;
            L->cd.pad_h = L->cd.pad_w = 0;
            if (loom_conv_out_size(L->hp, k, sd, 0, 1) != o->out_shape.h ||
                loom_conv_out_size(L->wp, k, sd, 0, 1) != o->out_shape.w) {
                st = loom_error(LOOM_ERR_INTERNAL, "spatial: layer %s: tile output shape mismatch",
                                o->name);
                break;
            }
            size_t cnt = (size_t)o->in_shape.n * o->in_shape.c * L->hp * L->wp;
            L->xp = loom__alloc(sizeof(float) * cnt);
            L->padded = cnt;
            s->dxp_floats = LOOM_MAX(s->dxp_floats, cnt);
            if (!L->xp) {
                st = loom_error(LOOM_ERR_NOMEM, "spatial: out of memory for the halo buffers of %s",
                                o->name);
                break;
            }
            s->extra_bytes += sizeof(float) * cnt;
            s->ws_floats = LOOM_MAX(s->ws_floats, loom_conv_workspace(&L->cd, o->in_shape.n, L->hp, L->wp));
            if (L->lo + L->hi > 0 && size > 1) {
                weft_halo_params_t hp = WEFT_HALO_PARAMS_INITIALIZER;
                hp.ndims = 2;
                hp.grid[0] = sh;
                hp.grid[1] = sw;
                hp.nlead = 2;
                hp.lead[0] = (size_t)o->in_shape.n;
                hp.lead[1] = (size_t)o->in_shape.c;
                hp.local[0] = (size_t)L->h;
                hp.local[1] = (size_t)L->w;
                hp.width_lo[0] = hp.width_lo[1] = L->lo;
                hp.width_hi[0] = hp.width_hi[1] = L->hi;
                hp.dtype = WEFT_FLOAT32;
                hp.corners = 1;
                if ((ws = weft_halo_plan_create(comm, &hp, &L->plan)) != WEFT_SUCCESS) {
                    L->plan = NULL;
                    st = werr(ws, "weft_halo_plan_create", o->name);
                    break;
                }
            }
            ny0 = y0 / sd;
            nx0 = x0 / sd;
            nGh = Gh / sd;
            nGw = Gw / sd;
            break;
        }
        case LOOM_OP_BN:
            if (!(L->stats = malloc(sizeof(double) * (2 * (size_t)o->in_shape.c + 1))))
                st = loom_error(LOOM_ERR_NOMEM, "spatial: out of memory");
            break;
        case LOOM_OP_PIXEL_SHUFFLE:
            ny0 = y0 * o->r;
            nx0 = x0 * o->r;
            nGh = Gh * o->r;
            nGw = Gw * o->r;
            break;
        case LOOM_OP_RELU:
        case LOOM_OP_SIGMOID:
        case LOOM_OP_SCALE:
            break;
        case LOOM_OP_ADD:
            if (aoy[o->in[1]] != y0 || agh[o->in[1]] != Gh) {
                st = loom_error(LOOM_ERR_INVALID, "spatial: layer %s adds tiles of different layouts",
                                o->name);
            }
            break;
        default:
            st = loom_error(LOOM_ERR_INVALID, "spatial: layer %s (%s) cannot be split spatially yet",
                            o->name, loom_op_name(o->type));
        }
        if (st == LOOM_OK && !o->inplace) {
            aoy[o->out] = ny0;
            aox[o->out] = nx0;
            agh[o->out] = nGh;
            agw[o->out] = nGw;
        }
    }
    free(aoy);
    (void)is0;
    if (st == LOOM_OK) {
        /* the padded convolutions have the model's output sizes: its
         * workspace normally fits; take our own only if it does not */
        size_t have = 0;
        float *mws = loom_model_workspace(m, &have);
        if (mws && have >= s->ws_floats) {
            s->ws = mws;
        } else if ((s->ws = loom__alloc(sizeof(float) * (s->ws_floats ? s->ws_floats : 1)))) {
            s->own_ws = 1;
            s->extra_bytes += sizeof(float) * s->ws_floats;
        } else {
            st = loom_error(LOOM_ERR_NOMEM, "spatial: out of memory for the workspace");
        }
    }
    if (st == LOOM_OK && s->dxp_floats) {
        if (!(s->dxp = loom__alloc(sizeof(float) * s->dxp_floats)))
            st = loom_error(LOOM_ERR_NOMEM, "spatial: out of memory for the halo gradients");
        s->extra_bytes += sizeof(float) * s->dxp_floats;
    }
    if (st < 0)
        goto fail;
    *out = s;
    return LOOM_OK;
fail:
    loom_spatial_destroy(s);
    return st;
}

void loom_spatial_destroy(loom_spatial_t *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->nl; i++) {
        if (s->l[i].plan)
            weft_halo_plan_destroy(s->l[i].plan);
        loom__free(s->l[i].xp);
        free(s->l[i].stats);
    }
    if (s->own_ws)
        loom__free(s->ws);
    loom__free(s->dxp);
    free(s->l);
    free(s);
}

void loom_spatial_set_backward_hook(loom_spatial_t *s, loom_backward_hook_t fn, void *arg)
{
    s->hook = fn;
    s->hook_arg = arg;
}

double loom_spatial_wait_seconds(const loom_spatial_t *s) { return s->wait_s; }
size_t loom_spatial_extra_bytes(const loom_spatial_t *s) { return s->extra_bytes; }

/* x [nc, h, w] -> interior of xp [nc, h+lo+hi, w+lo+hi] (halo untouched). */
static void pad_in(const layer_t *L, size_t nc, const float *x, float *xp)
{
    for (size_t q = 0; q < nc; q++)
        for (int r = 0; r < L->h; r++)
            memcpy(xp + (q * L->hp + (size_t)(r + L->lo)) * L->wp + L->lo,
                   x + (q * L->h + (size_t)r) * L->w, sizeof(float) * (size_t)L->w);
}

static void unpad_out(const layer_t *L, size_t nc, const float *xp, float *x, int accum)
{
    for (size_t q = 0; q < nc; q++)
        for (int r = 0; r < L->h; r++) {
            const float *src = xp + (q * L->hp + (size_t)(r + L->lo)) * L->wp + L->lo;
            float *dst = x + (q * L->h + (size_t)r) * L->w;
            if (accum)
                for (int c = 0; c < L->w; c++)
                    dst[c] += src[c];
            else
                memcpy(dst, src, sizeof(float) * (size_t)L->w);
        }
}

static int allreduce_d(loom_spatial_t *s, double *v, size_t n, const char *layer)
{
    double t0 = loom_now();
    int ws = weft_allreduce(WEFT_IN_PLACE, v, n, WEFT_FLOAT64, WEFT_SUM, s->comm);
    s->wait_s += loom_now() - t0;
    return ws == WEFT_SUCCESS ? LOOM_OK : werr(ws, "batch-norm weft_allreduce", layer);
}

static int bn_forward(loom_spatial_t *s, layer_t *L, int training, const float *x, float *y)
{
    const loom_op_info_t *o = &L->in;
    loom_shape_t sh = o->in_shape;
    const int C = sh.c;
    const size_t HW = (size_t)sh.h * sh.w;
    const float *gamma = o->weight->data, *beta = o->bias->data;
    float *mean_s = o->aux, *invstd_s = o->aux + C;
    double *st = L->stats;
    if (training) {
        /* pass 1: sums and the pixel count of the group */
        double cnt = (double)sh.n * HW;
        for (int c = 0; c < C; c++) {
            double sum = 0.0;
            for (int i = 0; i < sh.n; i++)
                sum += loom__sum_f(x + ((size_t)i * C + c) * HW, HW);
            st[c] = sum;
        }
        st[C] = cnt;
        int r = allreduce_d(s, st, (size_t)C + 1, o->name);
        if (r < 0)
            return r;
        double M = L->count = st[C];
        for (int c = 0; c < C; c++)
            mean_s[c] = (float)(st[c] / M);
        /* pass 2: centred squares */
        for (int c = 0; c < C; c++) {
            double sq = 0.0;
            float fm = mean_s[c];
            for (int i = 0; i < sh.n; i++)
                sq += loom__sum_sq_dev(x + ((size_t)i * C + c) * HW, HW, fm);
            st[c] = sq;
        }
        if ((r = allreduce_d(s, st, (size_t)C, o->name)) < 0)
            return r;
        for (int c = 0; c < C; c++) {
            double var = st[c] / M;
            invstd_s[c] = (float)(1.0 / sqrt(var + o->bn.eps));
            double unbiased = M > 1 ? var * M / (M - 1) : var;
            o->running_mean[c] = (1.0f - o->bn.momentum) * o->running_mean[c] + o->bn.momentum * mean_s[c];
            o->running_var[c] =
                (1.0f - o->bn.momentum) * o->running_var[c] + o->bn.momentum * (float)unbiased;
        }
    }
    for (int c = 0; c < C; c++) {
        float mean = training ? mean_s[c] : o->running_mean[c];
        float invstd = training ? invstd_s[c] : 1.0f / sqrtf(o->running_var[c] + o->bn.eps);
        float a = gamma[c] * invstd, b = beta[c] - mean * a;
        for (int i = 0; i < sh.n; i++) {
            const float *xc = x + ((size_t)i * C + c) * HW;
            float *yc = y + ((size_t)i * C + c) * HW;
            for (size_t p = 0; p < HW; p++)
                yc[p] = xc[p] * a + b;
        }
    }
    return LOOM_OK;
}

static int bn_backward(loom_spatial_t *s, layer_t *L, const float *x, const float *dy, float *dx,
                       int accum)
{
    const loom_op_info_t *o = &L->in;
    loom_shape_t sh = o->in_shape;
    const int C = sh.c;
    const size_t HW = (size_t)sh.h * sh.w;
    const float *gamma = o->weight->data, *mean_s = o->aux, *invstd_s = o->aux + C;
    double *st = L->stats;
    for (int c = 0; c < C; c++) {
        double sdy = 0.0, sdyx = 0.0;
        for (int i = 0; i < sh.n; i++)
            loom__sum_dy_dyx(dy + ((size_t)i * C + c) * HW, x + ((size_t)i * C + c) * HW, HW,
                             mean_s[c], &sdy, &sdyx);
        /* this rank's share of dgamma/dbeta (the group sum is the whole) */
        o->weight->grad[c] += (float)(sdyx * invstd_s[c]);
        o->bias->grad[c] += (float)sdy;
        st[c] = sdy;
        st[C + c] = sdyx;
    }
    int r = allreduce_d(s, st, 2 * (size_t)C, o->name);
    if (r < 0 || !dx)
        return r;
    double M = L->count;
    for (int c = 0; c < C; c++) {
        float invstd = invstd_s[c], mean = mean_s[c];
        float sum_dy = (float)st[c], sum_dy_xhat = (float)(st[C + c] * invstd);
        float k = gamma[c] * invstd;
        float mdy = sum_dy / (float)M, mdx = sum_dy_xhat / (float)M;
        float kx = k * mdx * invstd, k0 = -k * mdy + kx * mean;
        for (int i = 0; i < sh.n; i++) {
            const float *xc = x + ((size_t)i * C + c) * HW, *gc = dy + ((size_t)i * C + c) * HW;
            float *oc = dx + ((size_t)i * C + c) * HW;
            if (accum)
                for (size_t p = 0; p < HW; p++)
                    oc[p] += k * gc[p] - kx * xc[p] + k0;
            else
                for (size_t p = 0; p < HW; p++)
                    oc[p] = k * gc[p] - kx * xc[p] + k0;
        }
    }
    return LOOM_OK;
}

static int halo_exchange(loom_spatial_t *s, layer_t *L, float *buf)
{
    if (!L->plan)
        return LOOM_OK;
    double t0 = loom_now();
    int ws = weft_halo_exchange(L->plan, buf);
    s->wait_s += loom_now() - t0;
    return ws == WEFT_SUCCESS ? LOOM_OK : werr(ws, "weft_halo_exchange", L->in.name);
}

int loom_spatial_forward(loom_spatial_t *s, int n, int training)
{
    loom_model_t *m = s->m;
    if (n != loom_model_input_shape(m).n)
        return loom_error(LOOM_ERR_INVALID, "spatial: batch %d must equal the model's batch %d", n,
                          loom_model_input_shape(m).n);
    for (int i = 0; i < s->nl; i++) {
        layer_t *L = &s->l[i];
        const loom_op_info_t *o = &L->in;
        const float *x = loom_model_act(m, o->in[0]);
        float *y = loom_model_act(m, o->out);
        size_t cnt = loom_shape_count(o->in_shape);
        int st = LOOM_OK;
        switch (o->type) {
        case LOOM_OP_CONV: {
            size_t nc = (size_t)o->in_shape.n * o->in_shape.c;
            pad_in(L, nc, x, L->xp);
            if ((st = halo_exchange(s, L, L->xp)) < 0)
                return st;
            loom_conv_forward(&L->cd, o->in_shape.n, L->hp, L->wp, L->xp, o->weight->data,
                              o->bias ? o->bias->data : NULL, y, s->ws);
            break;
        }
        case LOOM_OP_BN:
            if ((st = bn_forward(s, L, training, x, y)) < 0)
                return st;
            break;
        case LOOM_OP_RELU: loom_relu_forward(cnt, x, y); break;
        case LOOM_OP_SIGMOID: loom_sigmoid_forward(cnt, x, y); break;
        case LOOM_OP_ADD: loom_add_forward(cnt, x, loom_model_act(m, o->in[1]), y); break;
        case LOOM_OP_PIXEL_SHUFFLE: loom_pixel_shuffle_forward(o->in_shape, o->r, x, y); break;
        case LOOM_OP_SCALE: loom_scale_forward(cnt, o->p, x, y); break;
        default: return loom_error(LOOM_ERR_INTERNAL, "spatial: layer %s not supported", o->name);
        }
    }
    return LOOM_OK;
}

int loom_spatial_backward(loom_spatial_t *s, int n)
{
    loom_model_t *m = s->m;
    if (n != loom_model_input_shape(m).n)
        return loom_error(LOOM_ERR_INVALID, "spatial: batch %d must equal the model's batch %d", n,
                          loom_model_input_shape(m).n);
    size_t ready = loom_model_param_count(m);
    for (int i = s->nl - 1; i >= 0; i--) {
        layer_t *L = &s->l[i];
        const loom_op_info_t *o = &L->in;
        const float *x = loom_model_act(m, o->in[0]);
        const float *y = loom_model_act(m, o->out);
        const float *dy = loom_model_act_grad(m, o->out);
        float *dx = o->inplace ? loom_model_act_grad(m, o->out)
                    : o->in[0] == 0 ? NULL : loom_model_act_grad(m, o->in[0]);
        int acc = o->inplace ? 0 : o->accum[0];
        int st = LOOM_OK;
        switch (o->type) {
        case LOOM_OP_CONV: {
            size_t nc = (size_t)o->in_shape.n * o->in_shape.c;
            float *dW = o->weight->grad, *db = o->bias ? o->bias->grad : NULL;
            if (!dx) {
                loom_conv_backward(&L->cd, o->in_shape.n, L->hp, L->wp, L->xp, o->weight->data, dy,
                                   NULL, 0, dW, db, s->ws);
                break;
            }
            /* input gradient first; its halo travels to the owners while the
             * weight gradient is computed */
            loom_conv_backward(&L->cd, o->in_shape.n, L->hp, L->wp, L->xp, o->weight->data, dy,
                               s->dxp, 0, NULL, NULL, s->ws);
            int ws = L->plan ? weft_halo_start_accumulate(L->plan, s->dxp) : WEFT_SUCCESS;
            if (ws != WEFT_SUCCESS)
                return werr(ws, "weft_halo_start_accumulate", o->name);
            loom_conv_backward(&L->cd, o->in_shape.n, L->hp, L->wp, L->xp, o->weight->data, dy,
                               NULL, 0, dW, db, s->ws);
            if (L->plan) {
                double t0 = loom_now();
                ws = weft_halo_wait(L->plan);
                s->wait_s += loom_now() - t0;
                if (ws != WEFT_SUCCESS)
                    return werr(ws, "weft_halo_wait (accumulate)", o->name);
            }
            unpad_out(L, nc, s->dxp, dx, acc);
            break;
        }
        case LOOM_OP_BN:
            if ((st = bn_backward(s, L, x, dy, dx, acc)) < 0)
                return st;
            break;
        default:
            if (!loom__backward_plain(m, o->type, o->in, o->accum, o->in_shape, o->r, o->p, y, dy,
                                      dx, acc))
                return loom_error(LOOM_ERR_INTERNAL, "spatial: layer %s not supported", o->name);
            break;
        }
        if (o->weight && o->weight->offset < ready)
            ready = o->weight->offset;
        if (o->bias && o->bias->offset < ready)
            ready = o->bias->offset;
        if (s->hook && (st = s->hook(s->hook_arg, i, ready)) < 0)
            return st;
    }
    return LOOM_OK;
}
