/*
 * model.c - a model is a list of operations over numbered activations.
 *
 * Building: each loom_add_* checks its input's shape, computes the output
 * shape and registers the parameters it owns.  loom_model_finish allocates
 * one flat array of parameters, one of gradients, one of buffers (batch-norm
 * running statistics), each activation, and a pool of activation-gradient
 * buffers shared by activations whose gradients are never live at once
 * (planned once, in backward order).  Nothing is allocated per step.
 *
 * Backward iterates the operations in reverse.  When an activation is read by
 * two operations (a residual block's input), the first of them to run
 * backward writes its gradient and the second adds to it (accum flags
 * planned at finish), so no gradient buffer is ever cleared per step.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>

#define MAX_IN 2

typedef struct {
    loom_op_type_t type;
    char name[48];
    int in[MAX_IN], nin, out;
    int inplace;
    loom_shape_t in_shape, out_shape; /* at the full batch */
    loom_conv_desc_t conv;
    loom_pool_desc_t pool;
    loom_bn_desc_t bn;
    float p;
    int r;
    int pw, pb;     /* parameter indices (weight/gamma, bias/beta), -1 none */
    int brm, brv;   /* buffer indices (running mean/var), -1 none */
    float *aux;     /* save_mean+save_invstd (bn) or mask (dropout) */
    int32_t *argmax;
    int accum[MAX_IN];
    double flops;   /* per sample */
    /* Fusion (plan_fusion): a batch norm or residual add whose output goes
     * straight through an in-place ReLU applies the ReLU itself (relu_fused),
     * and that ReLU does nothing (fused_away), forward and backward. */
    int relu_fused, fused_away;
} op_t;

typedef struct {
    loom_shape_t shape; /* at the full batch */
    float *data;
    int producer;       /* op index, -1 for the input */
    int consumers;
    int grad_slot;      /* -1: no gradient */
} act_t;

typedef struct {
    char name[48];
    size_t offset, count;
} buf_t;

typedef struct {
    float *data;
    size_t count;
} slot_t;

struct loom_model {
    char name[32];
    op_t *ops;
    int nops, cap_ops;
    act_t *acts;
    int nacts, cap_acts;
    loom_param_t *params;
    int nparams, cap_params;
    buf_t *bufs;
    int nbufs, cap_bufs;
    slot_t *slots;
    int nslots;
    size_t param_floats, buf_floats;
    float *flat, *gflat, *bflat, *ws;
    size_t ws_floats;
    int ws_threads; /* thread count the workspace was sized for */
    int output;
    int finished;
    int *op_grad_slot_of; /* unused placeholder for growth */
    loom_rng_t rng;
    int profile;
    double prof[LOOM_OP_COUNT_][2];
    loom_backward_hook_t bwd_hook; /* called after each layer's backward */
    void *bwd_hook_arg;
};

static const char *op_names[LOOM_OP_COUNT_] = {
    "conv", "batchnorm", "relu", "maxpool", "avgpool", "gap", "fc", "add", "dropout",
    "pixel_shuffle", "sigmoid", "scale"};

const char *loom_op_name(loom_op_type_t t)
{
    return (unsigned)t < LOOM_OP_COUNT_ ? op_names[t] : "unknown";
}

#define GROW(arr, n, cap)                                              \
    do {                                                               \
        if ((n) == (cap)) {                                            \
            int nc_ = (cap) ? 2 * (cap) : 16;                          \
            void *p_ = realloc((arr), sizeof(*(arr)) * (size_t)nc_);   \
            if (!p_)                                                   \
                return loom_error(LOOM_ERR_NOMEM, "model: out of memory"); \
            (arr) = p_;                                                \
            (cap) = nc_;                                               \
        }                                                              \
    } while (0)

int loom_model_create(loom_model_t **out, const char *name, loom_shape_t input)
{
    if (!out || input.n <= 0 || input.c <= 0 || input.h <= 0 || input.w <= 0)
        return loom_error(LOOM_ERR_INVALID, "model: input shape must be positive (got %dx%dx%dx%d)",
                          input.n, input.c, input.h, input.w);
    loom_model_t *m = calloc(1, sizeof *m);
    if (!m)
        return loom_error(LOOM_ERR_NOMEM, "model: out of memory");
    snprintf(m->name, sizeof m->name, "%s", name ? name : "model");
    m->acts = calloc(16, sizeof *m->acts);
    if (!m->acts) {
        free(m);
        return loom_error(LOOM_ERR_NOMEM, "model: out of memory");
    }
    m->cap_acts = 16;
    m->nacts = 1;
    m->acts[0] = (act_t){.shape = input, .producer = -1, .grad_slot = -1};
    m->output = -1;
    loom_rng_seed(&m->rng, 0);
    *out = m;
    return LOOM_OK;
}

void loom_model_destroy(loom_model_t *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->nacts; i++)
        loom__free(m->acts[i].data);
    for (int i = 0; i < m->nslots; i++)
        loom__free(m->slots[i].data);
    for (int i = 0; i < m->nops; i++) {
        loom__free(m->ops[i].aux);
        loom__free(m->ops[i].argmax);
    }
    loom__free(m->flat);
    loom__free(m->gflat);
    loom__free(m->bflat);
    loom__free(m->ws);
    free(m->slots);
    free(m->ops);
    free(m->acts);
    free(m->params);
    free(m->bufs);
    free(m);
}

int loom_input(const loom_model_t *m)
{
    (void)m;
    return 0;
}

static int check_act(loom_model_t *m, int x, const char *name)
{
    if (!m)
        return loom_error(LOOM_ERR_INVALID, "model: NULL model");
    if (m->finished)
        return loom_error(LOOM_ERR_INVALID, "%s: model already finished", name);
    if (x < 0 || x >= m->nacts)
        return loom_error(LOOM_ERR_INVALID, "%s: no activation %d", name, x);
    return LOOM_OK;
}

static int add_param(loom_model_t *m, const char *op, const char *suffix, size_t count, int decay)
{
    GROW(m->params, m->nparams, m->cap_params);
    loom_param_t *p = &m->params[m->nparams];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%.34s.%.12s", op, suffix);
    p->count = count;
    p->offset = m->param_floats;
    p->decay = decay;
    m->param_floats += count;
    return m->nparams++;
}

static int add_buf(loom_model_t *m, const char *op, const char *suffix, size_t count)
{
    GROW(m->bufs, m->nbufs, m->cap_bufs);
    buf_t *b = &m->bufs[m->nbufs];
    snprintf(b->name, sizeof b->name, "%.34s.%.12s", op, suffix);
    b->count = count;
    b->offset = m->buf_floats;
    m->buf_floats += count;
    return m->nbufs++;
}

/* Appends an op reading in[0..nin) and writing a new activation of shape
 * out (or in place on in[0]); returns the op index. */
static int push_op(loom_model_t *m, loom_op_type_t type, const char *name, const int *in, int nin,
                   loom_shape_t out, int inplace)
{
    GROW(m->ops, m->nops, m->cap_ops);
    if (!inplace)
        GROW(m->acts, m->nacts, m->cap_acts);
    op_t *o = &m->ops[m->nops];
    memset(o, 0, sizeof *o);
    o->type = type;
    snprintf(o->name, sizeof o->name, "%s", name && name[0] ? name : op_names[type]);
    o->nin = nin;
    for (int i = 0; i < nin; i++) {
        o->in[i] = in[i];
        m->acts[in[i]].consumers++;
    }
    o->in_shape = m->acts[in[0]].shape;
    o->out_shape = out;
    o->pw = o->pb = o->brm = o->brv = -1;
    o->inplace = inplace;
    if (inplace) {
        o->out = in[0];
    } else {
        o->out = m->nacts;
        m->acts[m->nacts++] = (act_t){.shape = out, .producer = m->nops, .grad_slot = -1};
    }
    return m->nops++;
}

int loom_add_conv(loom_model_t *m, const char *name, int x, int cout, int k, int stride, int pad,
                  int dil, int groups, int bias)
{
    int st = check_act(m, x, "conv");
    if (st < 0)
        return st;
    loom_shape_t s = m->acts[x].shape;
    loom_conv_desc_t d = {.cin = s.c, .cout = cout, .kh = k, .kw = k, .stride_h = stride,
                          .stride_w = stride, .pad_h = pad, .pad_w = pad, .dil_h = dil,
                          .dil_w = dil, .groups = groups, .bias = bias};
    if ((st = loom_conv_check(&d, s.h, s.w)) < 0) {
        char why[512]; /* loom_error writes the buffer loom_last_error reads */
        snprintf(why, sizeof why, "%s", loom_last_error());
        return loom_error(st, "%s: %s", name, why);
    }
    loom_shape_t o = {s.n, cout, loom_conv_out_size(s.h, k, stride, pad, dil),
                      loom_conv_out_size(s.w, k, stride, pad, dil)};
    int oi = push_op(m, LOOM_OP_CONV, name, &x, 1, o, 0);
    if (oi < 0)
        return oi;
    op_t *op = &m->ops[oi];
    op->conv = d;
    op->pw = add_param(m, op->name, "weight", (size_t)cout * (s.c / groups) * k * k, 1);
    if (op->pw < 0)
        return op->pw;
    if (bias && (op->pb = add_param(m, op->name, "bias", (size_t)cout, 0)) < 0)
        return op->pb;
    op->flops = 2.0 * cout * (s.c / groups) * k * k * (double)o.h * o.w;
    return op->out;
}

int loom_add_bn(loom_model_t *m, const char *name, int x)
{
    int st = check_act(m, x, "batchnorm");
    if (st < 0)
        return st;
    loom_shape_t s = m->acts[x].shape;
    int oi = push_op(m, LOOM_OP_BN, name, &x, 1, s, 0);
    if (oi < 0)
        return oi;
    op_t *op = &m->ops[oi];
    op->bn = (loom_bn_desc_t){1e-5f, 0.1f};
    if ((op->pw = add_param(m, op->name, "weight", (size_t)s.c, 0)) < 0 ||
        (op->pb = add_param(m, op->name, "bias", (size_t)s.c, 0)) < 0 ||
        (op->brm = add_buf(m, op->name, "running_mean", (size_t)s.c)) < 0 ||
        (op->brv = add_buf(m, op->name, "running_var", (size_t)s.c)) < 0)
        return LOOM_ERR_NOMEM;
    return op->out;
}

/* In place when x was written by the previous op and nobody read it yet. */
static int can_inplace(const loom_model_t *m, int x)
{
    return x > 0 && m->acts[x].producer == m->nops - 1 && m->acts[x].consumers == 0;
}

/* An elementwise activation of x: same shape, in place when possible. */
static int add_activation(loom_model_t *m, loom_op_type_t t, const char *what, const char *name,
                          int x)
{
    int st = check_act(m, x, what);
    if (st < 0)
        return st;
    int oi = push_op(m, t, name, &x, 1, m->acts[x].shape, can_inplace(m, x));
    return oi < 0 ? oi : m->ops[oi].out;
}

int loom_add_relu(loom_model_t *m, const char *name, int x)
{
    return add_activation(m, LOOM_OP_RELU, "relu", name, x);
}

int loom_add_sigmoid(loom_model_t *m, const char *name, int x)
{
    return add_activation(m, LOOM_OP_SIGMOID, "sigmoid", name, x);
}

static int add_pool(loom_model_t *m, loom_op_type_t t, const char *name, int x, int k, int stride,
                    int pad)
{
    int st = check_act(m, x, op_names[t]);
    if (st < 0)
        return st;
    loom_shape_t s = m->acts[x].shape;
    if (k <= 0 || stride <= 0 || pad < 0 || 2 * pad > k)
        return loom_error(LOOM_ERR_INVALID, "%s: bad pooling window k=%d stride=%d pad=%d", name, k,
                          stride, pad);
    int ho = loom_conv_out_size(s.h, k, stride, pad, 1), wo = loom_conv_out_size(s.w, k, stride, pad, 1);
    if (ho <= 0 || wo <= 0)
        return loom_error(LOOM_ERR_INVALID, "%s: window %d larger than input %dx%d", name, k, s.h, s.w);
    int oi = push_op(m, t, name, &x, 1, (loom_shape_t){s.n, s.c, ho, wo}, 0);
    if (oi < 0)
        return oi;
    m->ops[oi].pool = (loom_pool_desc_t){k, k, stride, stride, pad, pad};
    return m->ops[oi].out;
}

int loom_add_maxpool(loom_model_t *m, const char *name, int x, int k, int stride, int pad)
{
    return add_pool(m, LOOM_OP_MAXPOOL, name, x, k, stride, pad);
}

int loom_add_avgpool(loom_model_t *m, const char *name, int x, int k, int stride, int pad)
{
    return add_pool(m, LOOM_OP_AVGPOOL, name, x, k, stride, pad);
}

int loom_add_gap(loom_model_t *m, const char *name, int x)
{
    int st = check_act(m, x, "gap");
    if (st < 0)
        return st;
    loom_shape_t s = m->acts[x].shape;
    int oi = push_op(m, LOOM_OP_GAP, name, &x, 1, (loom_shape_t){s.n, s.c, 1, 1}, 0);
    return oi < 0 ? oi : m->ops[oi].out;
}

int loom_add_fc(loom_model_t *m, const char *name, int x, int out)
{
    int st = check_act(m, x, "fc");
    if (st < 0)
        return st;
    if (out <= 0)
        return loom_error(LOOM_ERR_INVALID, "%s: output size must be positive", name);
    loom_shape_t s = m->acts[x].shape;
    int in = s.c * s.h * s.w;
    int oi = push_op(m, LOOM_OP_FC, name, &x, 1, (loom_shape_t){s.n, out, 1, 1}, 0);
    if (oi < 0)
        return oi;
    op_t *op = &m->ops[oi];
    if ((op->pw = add_param(m, op->name, "weight", (size_t)in * out, 1)) < 0 ||
        (op->pb = add_param(m, op->name, "bias", (size_t)out, 0)) < 0)
        return LOOM_ERR_NOMEM;
    op->flops = 2.0 * in * out;
    return op->out;
}

int loom_add_add(loom_model_t *m, const char *name, int a, int b)
{
    int st = check_act(m, a, "add");
    if (st < 0 || (st = check_act(m, b, "add")) < 0)
        return st;
    loom_shape_t sa = m->acts[a].shape, sb = m->acts[b].shape;
    if (memcmp(&sa, &sb, sizeof sa) != 0)
        return loom_error(LOOM_ERR_INVALID, "%s: shapes differ (%dx%dx%d vs %dx%dx%d)", name, sa.c,
                          sa.h, sa.w, sb.c, sb.h, sb.w);
    int in[2] = {a, b};
    int oi = push_op(m, LOOM_OP_ADD, name, in, 2, sa, 0);
    return oi < 0 ? oi : m->ops[oi].out;
}

int loom_add_dropout(loom_model_t *m, const char *name, int x, float p)
{
    int st = check_act(m, x, "dropout");
    if (st < 0)
        return st;
    if (!(p >= 0.0f && p < 1.0f))
        return loom_error(LOOM_ERR_INVALID, "%s: dropout probability must be in [0, 1)", name);
    int oi = push_op(m, LOOM_OP_DROPOUT, name, &x, 1, m->acts[x].shape, 0);
    if (oi < 0)
        return oi;
    m->ops[oi].p = p;
    return m->ops[oi].out;
}

int loom_add_pixel_shuffle(loom_model_t *m, const char *name, int x, int r)
{
    int st = check_act(m, x, "pixel_shuffle");
    if (st < 0)
        return st;
    loom_shape_t s = m->acts[x].shape;
    if (r <= 0 || s.c % (r * r))
        return loom_error(LOOM_ERR_INVALID, "%s: channels %d not divisible by r*r (r=%d)", name, s.c, r);
    int oi = push_op(m, LOOM_OP_PIXEL_SHUFFLE, name, &x, 1,
                     (loom_shape_t){s.n, s.c / (r * r), s.h * r, s.w * r}, 0);
    if (oi < 0)
        return oi;
    m->ops[oi].r = r;
    return m->ops[oi].out;
}

int loom_add_scale(loom_model_t *m, const char *name, int x, float alpha)
{
    int st = check_act(m, x, "scale");
    if (st < 0)
        return st;
    if (!isfinite(alpha))
        return loom_error(LOOM_ERR_INVALID, "%s: scale must be finite", name);
    int oi = push_op(m, LOOM_OP_SCALE, name, &x, 1, m->acts[x].shape, can_inplace(m, x));
    if (oi < 0)
        return oi;
    m->ops[oi].p = alpha;
    return m->ops[oi].out;
}

/* ------------------------------------------------------------ finishing */
static int slot_get(loom_model_t *m, size_t count, unsigned char *busy)
{
    int best = -1;
    for (int i = 0; i < m->nslots; i++)
        if (!busy[i] && m->slots[i].count >= count &&
            (best < 0 || m->slots[i].count < m->slots[best].count))
            best = i;
    if (best < 0) {
        /* grow the largest free slot, or make a new one */
        for (int i = 0; i < m->nslots; i++)
            if (!busy[i] && (best < 0 || m->slots[i].count > m->slots[best].count))
                best = i;
        if (best < 0) {
            best = m->nslots++;
            m->slots[best].count = 0;
        }
        m->slots[best].count = count;
    }
    busy[best] = 1;
    return best;
}

static void init_params(loom_model_t *m, uint64_t seed)
{
    loom_rng_t r;
    loom_rng_seed(&r, seed);
    for (int i = 0; i < m->nops; i++) {
        op_t *o = &m->ops[i];
        if (o->type == LOOM_OP_CONV) {
            loom_param_t *w = &m->params[o->pw];
            double fan_out = (double)o->conv.cout * o->conv.kh * o->conv.kw;
            float sd = (float)sqrt(2.0 / fan_out);
            for (size_t k = 0; k < w->count; k++)
                w->data[k] = sd * loom_rng_normal(&r);
            if (o->pb >= 0)
                memset(m->params[o->pb].data, 0, sizeof(float) * m->params[o->pb].count);
        } else if (o->type == LOOM_OP_FC) {
            loom_param_t *w = &m->params[o->pw], *b = &m->params[o->pb];
            int in = o->in_shape.c * o->in_shape.h * o->in_shape.w;
            float bound = 1.0f / sqrtf((float)in);
            for (size_t k = 0; k < w->count; k++)
                w->data[k] = bound * (2.0f * loom_rng_uniform(&r) - 1.0f);
            for (size_t k = 0; k < b->count; k++)
                b->data[k] = bound * (2.0f * loom_rng_uniform(&r) - 1.0f);
        } else if (o->type == LOOM_OP_BN) {
            loom_param_t *g = &m->params[o->pw], *b = &m->params[o->pb];
            for (size_t k = 0; k < g->count; k++) {
                g->data[k] = 1.0f;
                b->data[k] = 0.0f;
            }
            float *rm = m->bflat + m->bufs[o->brm].offset, *rv = m->bflat + m->bufs[o->brv].offset;
            for (size_t k = 0; k < m->bufs[o->brm].count; k++) {
                rm[k] = 0.0f;
                rv[k] = 1.0f;
            }
        }
    }
    loom_rng_seed(&m->rng, seed ^ 0xD1B54A32D192ED03ull);
}

/* Marks each batch norm or residual add followed by an in-place ReLU of its
 * output (the ReLU is its only reader: in place means nothing read the
 * output before) so that the single-process executor runs the pair as one
 * layer (layers.c: loom__bn_forward_relu, loom__add_relu_forward and their
 * backward), saving the ReLU's passes over the activation and its gradient.
 * The op list itself is unchanged (op_info, the spatial executor, the
 * backward hook still see every layer). */
static void plan_fusion(loom_model_t *m)
{
    for (int i = 0; i + 1 < m->nops; i++) {
        op_t *o = &m->ops[i], *r = &m->ops[i + 1];
        if ((o->type == LOOM_OP_BN || o->type == LOOM_OP_ADD) && r->type == LOOM_OP_RELU &&
            r->inplace && r->in[0] == o->out && !o->inplace) {
            o->relu_fused = 1;
            r->fused_away = 1;
        }
    }
}

/* internal.h: the test's switch back to one layer at a time */
void loom__model_unfuse(loom_model_t *m)
{
    for (int i = 0; i < m->nops; i++)
        m->ops[i].relu_fused = m->ops[i].fused_away = 0;
}

int loom__model_fused_count(const loom_model_t *m)
{
    int n = 0;
    for (int i = 0; i < m->nops; i++)
        n += m->ops[i].fused_away;
    return n;
}

int loom_model_finish(loom_model_t *m, int output, uint64_t seed)
{
    int st = check_act(m, output, "finish");
    unsigned char *busy = NULL;
    if (st < 0)
        return st;
    if (m->nops == 0)
        return loom_error(LOOM_ERR_INVALID, "model: no layers");
    m->output = output;
    st = LOOM_ERR_NOMEM;
    m->flat = loom__alloc(sizeof(float) * m->param_floats);
    m->gflat = loom__alloc(sizeof(float) * m->param_floats);
    m->bflat = loom__alloc(sizeof(float) * m->buf_floats);
    if (!m->flat || !m->gflat || !m->bflat)
        goto fail;
    for (int i = 0; i < m->nparams; i++) {
        m->params[i].data = m->flat + m->params[i].offset;
        m->params[i].grad = m->gflat + m->params[i].offset;
    }
    for (int i = 0; i < m->nacts; i++) {
        m->acts[i].data = loom__alloc(sizeof(float) * loom_shape_count(m->acts[i].shape));
        if (!m->acts[i].data)
            goto fail;
    }
    for (int i = 0; i < m->nops; i++) {
        op_t *o = &m->ops[i];
        size_t c = loom_shape_count(o->in_shape);
        if (o->type == LOOM_OP_CONV) {
            size_t ws = loom_conv_workspace(&o->conv, o->in_shape.n, o->in_shape.h, o->in_shape.w);
            m->ws_floats = LOOM_MAX(m->ws_floats, ws);
        } else if (o->type == LOOM_OP_BN) {
            if (!(o->aux = loom__alloc(sizeof(float) * 2 * (size_t)o->in_shape.c)))
                goto fail;
        } else if (o->type == LOOM_OP_DROPOUT) {
            if (!(o->aux = loom__alloc(sizeof(float) * c)))
                goto fail;
        } else if (o->type == LOOM_OP_MAXPOOL) {
            if (!(o->argmax = loom__alloc(sizeof(int32_t) * loom_shape_count(o->out_shape))))
                goto fail;
        }
    }
    if (!(m->ws = loom__alloc(sizeof(float) * m->ws_floats)))
        goto fail;
    m->ws_threads = loom_get_threads();

    /* Plan the gradient buffers in backward order. */
    m->slots = calloc((size_t)m->nacts + 1, sizeof *m->slots);
    busy = calloc((size_t)m->nacts + 1, 1);
    if (!m->slots || !busy)
        goto fail;
    m->acts[output].grad_slot = slot_get(m, loom_shape_count(m->acts[output].shape), busy);
    for (int i = m->nops - 1; i >= 0; i--) {
        op_t *o = &m->ops[i];
        if (m->acts[o->out].grad_slot < 0) {
            st = loom_error(LOOM_ERR_INVALID, "model: output of layer %s is never used", o->name);
            goto fail;
        }
        if (o->inplace)
            continue;
        for (int j = 0; j < o->nin; j++) {
            act_t *a = &m->acts[o->in[j]];
            if (o->in[j] == 0)
                continue; /* the input needs no gradient */
            if (a->grad_slot < 0) {
                a->grad_slot = slot_get(m, loom_shape_count(a->shape), busy);
                o->accum[j] = 0;
            } else {
                o->accum[j] = 1;
            }
        }
        busy[m->acts[o->out].grad_slot] = 0;
    }
    for (int i = 0; i < m->nslots; i++)
        if (!(m->slots[i].data = loom__alloc(sizeof(float) * m->slots[i].count)))
            goto fail;
    free(busy);
    plan_fusion(m);
    init_params(m, seed);
    m->finished = 1;
    return LOOM_OK;
fail:
    free(busy);
    if (st == LOOM_ERR_NOMEM)
        loom_error(st, "model %s: out of memory allocating parameters or activations", m->name);
    return st;
}

/* -------------------------------------------------------------- queries */
const char *loom_model_name(const loom_model_t *m) { return m->name; }
loom_shape_t loom_model_input_shape(const loom_model_t *m) { return m->acts[0].shape; }
loom_shape_t loom_model_output_shape(const loom_model_t *m) { return m->acts[m->output].shape; }
float *loom_model_input(loom_model_t *m) { return m->acts[0].data; }
float *loom_model_output(loom_model_t *m) { return m->acts[m->output].data; }
float *loom_model_doutput(loom_model_t *m) { return m->slots[m->acts[m->output].grad_slot].data; }
int loom_model_num_params(const loom_model_t *m) { return m->nparams; }
loom_param_t *loom_model_param(loom_model_t *m, int i)
{
    return i >= 0 && i < m->nparams ? &m->params[i] : NULL;
}
size_t loom_model_param_count(const loom_model_t *m) { return m->param_floats; }
float *loom_model_params(loom_model_t *m) { return m->flat; }
float *loom_model_grads(loom_model_t *m) { return m->gflat; }
size_t loom_model_buffer_count(const loom_model_t *m) { return m->buf_floats; }
float *loom_model_buffers(loom_model_t *m) { return m->bflat; }
void loom_model_set_seed(loom_model_t *m, uint64_t seed) { loom_rng_seed(&m->rng, seed); }

loom_rng_t *loom_model_rng(loom_model_t *m) { return &m->rng; }
void loom_model_zero_grad(loom_model_t *m) { memset(m->gflat, 0, sizeof(float) * m->param_floats); }

double loom_model_flops(const loom_model_t *m)
{
    double f = 0.0;
    for (int i = 0; i < m->nops; i++)
        f += m->ops[i].flops;
    return f;
}

unsigned char *loom_model_decay_mask(const loom_model_t *m)
{
    unsigned char *mask = calloc(m->param_floats ? m->param_floats : 1, 1);
    if (!mask) {
        loom_error(LOOM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < m->nparams; i++)
        if (m->params[i].decay)
            memset(mask + m->params[i].offset, 1, m->params[i].count);
    return mask;
}

/* Names and extents of the buffers, for checkpoints. */
int loom__model_buffer_info(const loom_model_t *m, int i, const char **name, size_t *offset,
                            size_t *count)
{
    if (i < 0 || i >= m->nbufs)
        return -1;
    *name = m->bufs[i].name;
    *offset = m->bufs[i].offset;
    *count = m->bufs[i].count;
    return m->nbufs;
}

int loom__model_num_buffers(const loom_model_t *m) { return m->nbufs; }

/* ---------------------------------------------------------------- running */
static loom_shape_t at(loom_shape_t s, int n)
{
    s.n = n;
    return s;
}

static float *gradp(loom_model_t *m, int act)
{
    int sl = m->acts[act].grad_slot;
    return sl >= 0 ? m->slots[sl].data : NULL;
}

/* The conv workspace depends on the thread count: resize it if that changed. */
static int ensure_workspace(loom_model_t *m)
{
    if (m->ws_threads == loom_get_threads())
        return LOOM_OK;
    size_t need = 0;
    for (int i = 0; i < m->nops; i++)
        if (m->ops[i].type == LOOM_OP_CONV)
            need = LOOM_MAX(need, loom_conv_workspace(&m->ops[i].conv, m->ops[i].in_shape.n,
                                                      m->ops[i].in_shape.h, m->ops[i].in_shape.w));
    float *ws = loom__alloc(sizeof(float) * need);
    if (!ws)
        return loom_error(LOOM_ERR_NOMEM, "model %s: out of memory for the workspace", m->name);
    loom__free(m->ws);
    m->ws = ws;
    m->ws_floats = need;
    m->ws_threads = loom_get_threads();
    return LOOM_OK;
}

int loom_model_forward(loom_model_t *m, int n, int training)
{
    if (!m || !m->finished)
        return loom_error(LOOM_ERR_INVALID, "forward: model not finished");
    if (ensure_workspace(m) < 0)
        return LOOM_ERR_NOMEM;
    if (n <= 0 || n > m->acts[0].shape.n)
        return loom_error(LOOM_ERR_INVALID, "forward: batch %d outside 1..%d", n, m->acts[0].shape.n);
    for (int i = 0; i < m->nops; i++) {
        op_t *o = &m->ops[i];
        double t0 = m->profile ? loom_now() : 0.0;
        const float *x = m->acts[o->in[0]].data;
        float *y = m->acts[o->out].data;
        loom_shape_t is = at(o->in_shape, n);
        size_t cnt = loom_shape_count(is);
        switch (o->type) {
        case LOOM_OP_CONV:
            loom_conv_forward(&o->conv, n, is.h, is.w, x, m->params[o->pw].data,
                              o->pb >= 0 ? m->params[o->pb].data : NULL, y, m->ws);
            break;
        case LOOM_OP_BN:
            (o->relu_fused ? loom__bn_forward_relu : loom_bn_forward)(
                &o->bn, training, is, x, m->params[o->pw].data, m->params[o->pb].data,
                m->bflat + m->bufs[o->brm].offset, m->bflat + m->bufs[o->brv].offset, o->aux,
                o->aux + is.c, y);
            break;
        case LOOM_OP_RELU:
            if (!o->fused_away)
                loom_relu_forward(cnt, x, y);
            break;
        case LOOM_OP_SIGMOID: loom_sigmoid_forward(cnt, x, y); break;
        case LOOM_OP_MAXPOOL: loom_maxpool_forward(&o->pool, is, x, y, o->argmax); break;
        case LOOM_OP_AVGPOOL: loom_avgpool_forward(&o->pool, is, x, y); break;
        case LOOM_OP_GAP: loom_gap_forward(is, x, y); break;
        case LOOM_OP_FC:
            loom_fc_forward(n, is.c * is.h * is.w, o->out_shape.c, x, m->params[o->pw].data,
                            m->params[o->pb].data, y);
            break;
        case LOOM_OP_ADD:
            (o->relu_fused ? loom__add_relu_forward : loom_add_forward)(cnt, x, m->acts[o->in[1]].data,
                                                                         y);
            break;
        case LOOM_OP_DROPOUT:
            if (training && o->p > 0.0f)
                loom_dropout_forward(cnt, o->p, &m->rng, x, y, o->aux);
            else
                memcpy(y, x, sizeof(float) * cnt);
            break;
        case LOOM_OP_PIXEL_SHUFFLE: loom_pixel_shuffle_forward(is, o->r, x, y); break;
        case LOOM_OP_SCALE: loom_scale_forward(cnt, o->p, x, y); break;
        default: return loom_error(LOOM_ERR_INTERNAL, "forward: bad op type %d", (int)o->type);
        }
        if (m->profile)
            m->prof[o->type][0] += loom_now() - t0;
    }
    return LOOM_OK;
}

int loom_model_backward(loom_model_t *m, int n)
{
    if (!m || !m->finished)
        return loom_error(LOOM_ERR_INVALID, "backward: model not finished");
    if (n <= 0 || n > m->acts[0].shape.n)
        return loom_error(LOOM_ERR_INVALID, "backward: batch %d outside 1..%d", n, m->acts[0].shape.n);
    if (ensure_workspace(m) < 0)
        return LOOM_ERR_NOMEM;
    size_t ready = m->param_floats; /* gradients at [ready, end) are final */
    for (int i = m->nops - 1; i >= 0; i--) {
        op_t *o = &m->ops[i];
        double t0 = m->profile ? loom_now() : 0.0;
        const float *x = m->acts[o->in[0]].data;
        const float *y = m->acts[o->out].data;
        const float *dy = gradp(m, o->out);
        float *dx = o->inplace ? gradp(m, o->out) : gradp(m, o->in[0]);
        int acc = o->inplace ? 0 : o->accum[0];
        loom_shape_t is = at(o->in_shape, n);
        size_t cnt = loom_shape_count(is);
        switch (o->type) {
        case LOOM_OP_CONV:
            loom_conv_backward(&o->conv, n, is.h, is.w, x, m->params[o->pw].data, dy, dx, acc,
                               m->params[o->pw].grad, o->pb >= 0 ? m->params[o->pb].grad : NULL,
                               m->ws);
            break;
        case LOOM_OP_BN:
            if (o->relu_fused) /* dy is the ReLU's, y its output */
                loom__bn_backward_relu(is, x, m->params[o->pw].data, o->aux, o->aux + is.c, y, dy,
                                       dx, acc, m->params[o->pw].grad, m->params[o->pb].grad);
            else
                loom_bn_backward(is, x, m->params[o->pw].data, o->aux, o->aux + is.c, dy, dx, acc,
                                 m->params[o->pw].grad, m->params[o->pb].grad);
            break;
        case LOOM_OP_RELU:
            if (o->fused_away) /* its producer's backward applies it */
                break;
            if (dx)
                loom_relu_backward(cnt, y, dy, dx, acc);
            break;
        case LOOM_OP_ADD:
            if (o->relu_fused) {
                float *d0 = o->in[0] == 0 ? NULL : gradp(m, o->in[0]);
                float *d1 = o->in[1] == 0 ? NULL : gradp(m, o->in[1]);
                loom__relu_backward2(cnt, y, dy, d0, o->accum[0], d1, o->accum[1]);
            } else {
                loom__backward_plain(m, o->type, o->in, o->accum, is, o->r, o->p, y, dy, dx, acc);
            }
            break;
        case LOOM_OP_MAXPOOL:
            if (dx)
                loom_maxpool_backward(&o->pool, is, dy, o->argmax, dx, acc);
            break;
        case LOOM_OP_AVGPOOL:
            if (dx)
                loom_avgpool_backward(&o->pool, is, dy, dx, acc);
            break;
        case LOOM_OP_GAP:
            if (dx)
                loom_gap_backward(is, dy, dx, acc);
            break;
        case LOOM_OP_FC:
            loom_fc_backward(n, is.c * is.h * is.w, o->out_shape.c, x, m->params[o->pw].data, dy,
                             dx, acc, m->params[o->pw].grad, m->params[o->pb].grad);
            break;
        case LOOM_OP_DROPOUT:
            if (dx) {
                if (o->p > 0.0f)
                    loom_dropout_backward(cnt, o->aux, dy, dx, acc);
                else if (acc)
                    for (size_t k = 0; k < cnt; k++)
                        dx[k] += dy[k];
                else
                    memcpy(dx, dy, sizeof(float) * cnt);
            }
            break;
        default: /* relu, sigmoid, add, pixel shuffle, scale: shared with spatial.c */
            if (!loom__backward_plain(m, o->type, o->in, o->accum, is, o->r, o->p, y, dy, dx, acc))
                return loom_error(LOOM_ERR_INTERNAL, "backward: bad op type %d", (int)o->type);
        }
        if (m->profile)
            m->prof[o->type][1] += loom_now() - t0;
        if (o->pw >= 0 && m->params[o->pw].offset < ready)
            ready = m->params[o->pw].offset;
        if (o->pb >= 0 && m->params[o->pb].offset < ready)
            ready = m->params[o->pb].offset;
        if (m->bwd_hook) {
            int hs = m->bwd_hook(m->bwd_hook_arg, i, ready);
            if (hs < 0)
                return hs;
        }
    }
    return LOOM_OK;
}

void loom_model_set_backward_hook(loom_model_t *m, loom_backward_hook_t fn, void *arg)
{
    m->bwd_hook = fn;
    m->bwd_hook_arg = arg;
}

/* ---------------------------------------------------------------- summary */
void loom_model_summary(const loom_model_t *m, FILE *f)
{
    size_t act_floats = 0, grad_floats = 0;
    fprintf(f, "Model %s: input %dx%dx%d, batch %d\n", m->name, m->acts[0].shape.c,
            m->acts[0].shape.h, m->acts[0].shape.w, m->acts[0].shape.n);
    fprintf(f, "%-4s %-28s %-13s %-16s %12s %14s\n", "#", "layer", "type", "output (CxHxW)",
            "params", "FLOPs");
    for (int i = 0; i < m->nops; i++) {
        const op_t *o = &m->ops[i];
        size_t np = 0;
        if (o->pw >= 0)
            np += m->params[o->pw].count;
        if (o->pb >= 0)
            np += m->params[o->pb].count;
        char shp[40];
        snprintf(shp, sizeof shp, "%dx%dx%d", o->out_shape.c, o->out_shape.h, o->out_shape.w);
        fprintf(f, "%-4d %-28s %-13s %-16s %12zu %14.0f%s\n", i, o->name, op_names[o->type], shp, np,
                o->flops, o->inplace ? "  (in place)" : "");
    }
    for (int i = 0; i < m->nacts; i++)
        act_floats += loom_shape_count(m->acts[i].shape);
    for (int i = 0; i < m->nslots; i++)
        grad_floats += m->slots[i].count;
    fprintf(f, "Total: %d layers, %zu parameters (%d tensors), %.3f GFLOPs per sample forward "
               "(conv and fc, 2 per multiply-add)\n",
            m->nops, m->param_floats, m->nparams, loom_model_flops(m) * 1e-9);
    fprintf(f, "Memory: activations %.1f MiB, activation gradients %.1f MiB (%d shared buffers), "
               "workspace %.1f MiB\n",
            act_floats * 4.0 / 1048576.0, grad_floats * 4.0 / 1048576.0, m->nslots,
            m->ws_floats * 4.0 / 1048576.0);
}

/* ---------------------------------------------------------------- profile */
void loom_model_set_profile(loom_model_t *m, int on) { m->profile = on; }
void loom_model_profile_reset(loom_model_t *m) { memset(m->prof, 0, sizeof m->prof); }

void loom_model_profile_print(const loom_model_t *m, FILE *f, int steps, int batch)
{
    double total = 0.0;
    for (int t = 0; t < LOOM_OP_COUNT_; t++)
        total += m->prof[t][0] + m->prof[t][1];
    if (steps <= 0 || total <= 0.0)
        return;
    fprintf(f, "# Profile by layer type (%d steps of batch %d, %d threads)\n", steps, batch,
            loom_get_threads());
    fprintf(f, "# %-14s %12s %12s %12s %7s\n", "type", "fwd ms/step", "bwd ms/step", "total ms",
            "share");
    for (int t = 0; t < LOOM_OP_COUNT_; t++) {
        double a = m->prof[t][0], b = m->prof[t][1];
        if (a + b <= 0.0)
            continue;
        fprintf(f, "# %-14s %12.2f %12.2f %12.2f %6.1f%%\n", op_names[t], 1e3 * a / steps,
                1e3 * b / steps, 1e3 * (a + b) / steps, 100.0 * (a + b) / total);
    }
    fprintf(f, "# %-14s %12s %12s %12.2f %6.1f%%\n", "all layers", "", "", 1e3 * total / steps,
            100.0);
}

/* ------------------------------------------------- introspection (parallel) */
int loom_model_num_ops(const loom_model_t *m) { return m->nops; }

int loom_model_op_info(loom_model_t *m, int i, loom_op_info_t *info)
{
    if (!m || !info || i < 0 || i >= m->nops)
        return loom_error(LOOM_ERR_INVALID, "model: no layer %d", i);
    const op_t *o = &m->ops[i];
    memset(info, 0, sizeof *info);
    info->type = o->type;
    info->name = o->name;
    info->nin = o->nin;
    for (int j = 0; j < o->nin; j++) {
        info->in[j] = o->in[j];
        info->accum[j] = o->accum[j];
    }
    info->out = o->out;
    info->inplace = o->inplace;
    info->in_shape = o->in_shape;
    info->out_shape = o->out_shape;
    info->conv = o->conv;
    info->pool = o->pool;
    info->bn = o->bn;
    info->p = o->p;
    info->r = o->r;
    info->weight = o->pw >= 0 ? &m->params[o->pw] : NULL;
    info->bias = o->pb >= 0 ? &m->params[o->pb] : NULL;
    info->running_mean = o->brm >= 0 ? m->bflat + m->bufs[o->brm].offset : NULL;
    info->running_var = o->brv >= 0 ? m->bflat + m->bufs[o->brv].offset : NULL;
    info->aux = o->aux;
    return LOOM_OK;
}

float *loom_model_act(loom_model_t *m, int act)
{
    return act >= 0 && act < m->nacts ? m->acts[act].data : NULL;
}

float *loom_model_act_grad(loom_model_t *m, int act)
{
    return act >= 0 && act < m->nacts ? gradp(m, act) : NULL;
}

int loom__backward_plain(loom_model_t *m, loom_op_type_t type, const int in[2],
                         const int accum[2], loom_shape_t is, int r, float alpha,
                         const float *y, const float *dy, float *dx, int acc)
{
    size_t cnt = loom_shape_count(is);
    switch (type) {
    case LOOM_OP_RELU:
        if (dx)
            loom_relu_backward(cnt, y, dy, dx, acc);
        return 1;
    case LOOM_OP_SIGMOID:
        if (dx)
            loom_sigmoid_backward(cnt, y, dy, dx, acc);
        return 1;
    case LOOM_OP_ADD:
        for (int j = 0; j < 2; j++) {
            float *d = in[j] == 0 ? NULL : loom_model_act_grad(m, in[j]);
            if (d)
                loom__copy_or_add(cnt, dy, d, accum[j]);
        }
        return 1;
    case LOOM_OP_PIXEL_SHUFFLE:
        if (dx)
            loom_pixel_shuffle_backward(is, r, dy, dx, acc);
        return 1;
    case LOOM_OP_SCALE:
        if (dx)
            loom_scale_backward(cnt, alpha, dy, dx, acc);
        return 1;
    default: return 0;
    }
}

size_t loom_model_memory_bytes(const loom_model_t *m)
{
    size_t f = m->param_floats * 2 + m->buf_floats + m->ws_floats;
    for (int i = 0; i < m->nacts; i++)
        f += loom_shape_count(m->acts[i].shape);
    for (int i = 0; i < m->nslots; i++)
        f += m->slots[i].count;
    return f * sizeof(float);
}

size_t loom_model_activation_bytes(const loom_model_t *m)
{
    size_t f = 0;
    for (int i = 0; i < m->nacts; i++)
        f += loom_shape_count(m->acts[i].shape);
    for (int i = 0; i < m->nslots; i++)
        f += m->slots[i].count;
    return f * sizeof(float);
}

/* The convolution workspace (scratch between layers), for executors that run
 * the model's convolutions themselves. */
float *loom_model_workspace(loom_model_t *m, size_t *floats)
{
    if (ensure_workspace(m) < 0)
        return NULL;
    *floats = m->ws_floats;
    return m->ws;
}
