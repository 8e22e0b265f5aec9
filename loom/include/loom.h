/*
 * loom.h - Loom, a small CNN training runtime in C (float32, NCHW, CPU).
 *
 * Layers are plain functions with an explicit forward and backward (the
 * kernels below); a model is a list of operations over numbered activation
 * slots that the trainer iterates forward and then backward.  Every parameter
 * tensor has its own gradient tensor, and all of them live in two flat arrays
 * (loom_model_params / loom_model_grads) so that a later data-parallel trainer
 * can bucket and all-reduce them.
 *
 * Errors are values: every fallible function returns loom_status_t (0 ok,
 * negative error) and records a message readable with loom_last_error().
 * Nothing aborts on bad input.
 *
 * Threads: Loom's compute runs on the calling thread; matrix products run on
 * OpenBLAS, whose thread count (loom_set_threads) is the single thread
 * setting.  Loom never starts threads inside BLAS calls; the only thread of
 * its own is the data loader's, which prepares the next batch.
 */
#ifndef LOOM_H
#define LOOM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_VERSION_MAJOR 0
#define LOOM_VERSION_MINOR 1
#define LOOM_VERSION_HEX ((LOOM_VERSION_MAJOR << 16) | LOOM_VERSION_MINOR)
unsigned loom_version(void);

/* ---------------------------------------------------------------- status */
typedef enum {
    LOOM_OK = 0,
    LOOM_ERR_INVALID = -1,  /* bad argument or shape */
    LOOM_ERR_NOMEM = -2,    /* allocation failed */
    LOOM_ERR_IO = -3,       /* file missing or unreadable */
    LOOM_ERR_FORMAT = -4,   /* file corrupt (magic, size, checksum, value) */
    LOOM_ERR_MISMATCH = -5, /* file valid but for another model */
    LOOM_ERR_INTERNAL = -6
} loom_status_t;

const char *loom_strerror(int status);
/* The message of the last error on this thread (thread-local). */
const char *loom_last_error(void);
/* Record an error message (printf-like) and return status. */
int loom_error(int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Sets how many threads Loom's kernels use (the caller's included): Loom
 * splits the work itself and keeps OpenBLAS to one thread. The only thread
 * setting of Loom. */
void loom_set_threads(int n);
int loom_get_threads(void);
double loom_now(void); /* monotonic seconds */

/* ------------------------------------------------------------------ rng */
/* A small deterministic generator (xoshiro128+ seeded by splitmix64). */
typedef struct {
    uint64_t s[2];
} loom_rng_t;
void loom_rng_seed(loom_rng_t *r, uint64_t seed);
uint64_t loom_rng_u64(loom_rng_t *r);
float loom_rng_uniform(loom_rng_t *r);        /* [0, 1) */
float loom_rng_normal(loom_rng_t *r);         /* N(0, 1) */
uint32_t loom_rng_below(loom_rng_t *r, uint32_t n); /* [0, n) */

/* --------------------------------------------------------------- shapes */
typedef struct {
    int n, c, h, w;
} loom_shape_t;

static inline size_t loom_shape_count(loom_shape_t s)
{
    return (size_t)s.n * (size_t)s.c * (size_t)s.h * (size_t)s.w;
}

/* ------------------------------------------------------- layer kernels */
/* Convolution.  x: [n, cin, h, w], weight: [cout, cin/groups, kh, kw],
 * y: [n, cout, ho, wo] with ho = (h + 2*pad_h - dil_h*(kh-1) - 1)/stride_h + 1. */
typedef struct {
    int cin, cout, kh, kw;
    int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
    int groups;
    int bias; /* nonzero: a bias of cout values */
} loom_conv_desc_t;

int loom_conv_out_size(int in, int k, int stride, int pad, int dil);
int loom_conv_check(const loom_conv_desc_t *d, int h, int w);
/* Floats of scratch memory that forward/backward need for n samples. */
size_t loom_conv_workspace(const loom_conv_desc_t *d, int n, int h, int w);
void loom_conv_forward(const loom_conv_desc_t *d, int n, int h, int w,
                       const float *x, const float *weight, const float *bias,
                       float *y, float *ws);
/* dx (may be NULL: not needed) is overwritten, or added to when accum_dx;
 * dweight and dbias are always added to (gradients accumulate). */
void loom_conv_backward(const loom_conv_desc_t *d, int n, int h, int w,
                        const float *x, const float *weight, const float *dy,
                        float *dx, int accum_dx, float *dweight, float *dbias,
                        float *ws);

/* How the 3x3 convolutions of stride 1 (no dilation, no groups, padding at
 * most 2) are computed: LOOM_CONV_AUTO (the default) picks per layer shape,
 * LOOM_CONV_IM2COL forces im2col + sgemm (with AVX-512, its implicit form
 * for padding 1: the shifted input read in place), LOOM_CONV_WINOGRAD
 * Winograd's F(4x4, 3x3) (forward and both gradients; doc/loom.md,
 * "Convolution").  Other convolutions always use im2col + sgemm (or that
 * implicit form, for 3x3 padding 1 stride 2 on even sizes).  loom_conv_workspace covers
 * every choice.  Process-wide; thread: set it while no convolution runs. */
typedef enum { LOOM_CONV_AUTO = 0, LOOM_CONV_IM2COL = 1, LOOM_CONV_WINOGRAD = 2 } loom_conv_algo_t;
void loom_conv_set_algo(loom_conv_algo_t algo);
loom_conv_algo_t loom_conv_get_algo(void);
/* Which passes of this shape run Winograd's algorithm under the current
 * setting: bit 0 (1) forward, bit 1 (2) backward (both gradients).  Any thread. */
int loom_conv_winograd_passes(const loom_conv_desc_t *d, int n, int h, int w);

/* Batch normalisation over (n, h, w) per channel. */
typedef struct {
    float eps, momentum; /* running = (1-momentum)*running + momentum*batch */
} loom_bn_desc_t;
/* training: computes batch statistics, stores mean/invstd in save_mean and
 * save_invstd ([c] each), updates running stats.  Inference uses running. */
void loom_bn_forward(const loom_bn_desc_t *d, int training, loom_shape_t s,
                     const float *x, const float *gamma, const float *beta,
                     float *running_mean, float *running_var,
                     float *save_mean, float *save_invstd, float *y);
void loom_bn_backward(loom_shape_t s, const float *x, const float *gamma,
                      const float *save_mean, const float *save_invstd,
                      const float *dy, float *dx, int accum_dx,
                      float *dgamma, float *dbeta);

/* Element-wise; y may equal x (in place) for relu and sigmoid. */
void loom_relu_forward(size_t n, const float *x, float *y);
/* Uses the output y; dx may equal dy. */
void loom_relu_backward(size_t n, const float *y, const float *dy, float *dx, int accum_dx);
void loom_sigmoid_forward(size_t n, const float *x, float *y);
void loom_sigmoid_backward(size_t n, const float *y, const float *dy, float *dx, int accum_dx);

typedef struct {
    int kh, kw, stride_h, stride_w, pad_h, pad_w;
} loom_pool_desc_t;
/* Max pooling keeps the flat input index of each maximum in argmax. */
void loom_maxpool_forward(const loom_pool_desc_t *d, loom_shape_t s, const float *x,
                          float *y, int32_t *argmax);
void loom_maxpool_backward(const loom_pool_desc_t *d, loom_shape_t s, const float *dy,
                           const int32_t *argmax, float *dx, int accum_dx);
/* Average pooling divides by the full window (padding counted). */
void loom_avgpool_forward(const loom_pool_desc_t *d, loom_shape_t s, const float *x, float *y);
void loom_avgpool_backward(const loom_pool_desc_t *d, loom_shape_t s, const float *dy,
                           float *dx, int accum_dx);
/* Global average pooling: [n, c, h, w] -> [n, c, 1, 1]. */
void loom_gap_forward(loom_shape_t s, const float *x, float *y);
void loom_gap_backward(loom_shape_t s, const float *dy, float *dx, int accum_dx);

/* Fully connected: x [n, in], weight [out, in], y [n, out]. */
void loom_fc_forward(int n, int in, int out, const float *x, const float *weight,
                     const float *bias, float *y);
void loom_fc_backward(int n, int in, int out, const float *x, const float *weight,
                      const float *dy, float *dx, int accum_dx, float *dweight, float *dbias);

/* Residual add y = a + b (y may alias a). */
void loom_add_forward(size_t n, const float *a, const float *b, float *y);

/* Scale by a constant y = alpha * x (EDSR's residual scaling); y may equal
 * x.  Backward dx = alpha * dy (dx may equal dy).  Any thread. */
void loom_scale_forward(size_t n, float alpha, const float *x, float *y);
void loom_scale_backward(size_t n, float alpha, const float *dy, float *dx, int accum_dx);

/* Dropout with probability p (inverted: kept values scaled by 1/(1-p)).
 * mask receives the per-element scale (0 or 1/(1-p)). */
void loom_dropout_forward(size_t n, float p, loom_rng_t *rng, const float *x,
                          float *y, float *mask);
void loom_dropout_backward(size_t n, const float *mask, const float *dy, float *dx, int accum_dx);

/* Pixel shuffle: [n, c*r*r, h, w] -> [n, c, h*r, w*r]. */
void loom_pixel_shuffle_forward(loom_shape_t in, int r, const float *x, float *y);
void loom_pixel_shuffle_backward(loom_shape_t in, int r, const float *dy, float *dx, int accum_dx);

/* ----------------------------------------------------------------- losses */
/* Each returns the mean loss and writes the gradient of that mean to dx
 * (dx may be NULL).  Losses are accumulated in double. */
float loom_softmax_xent(int n, int k, const float *logits, const int32_t *labels,
                        float *dlogits, int *correct);
float loom_bce_logits(size_t n, const float *x, const float *target, float *dx);
float loom_mse(size_t n, const float *x, const float *target, float *dx);
float loom_l1(size_t n, const float *x, const float *target, float *dx);

/* ------------------------------------------------------------------ model */
typedef enum {
    LOOM_OP_CONV,
    LOOM_OP_BN,
    LOOM_OP_RELU,
    LOOM_OP_MAXPOOL,
    LOOM_OP_AVGPOOL,
    LOOM_OP_GAP,
    LOOM_OP_FC,
    LOOM_OP_ADD,
    LOOM_OP_DROPOUT,
    LOOM_OP_PIXEL_SHUFFLE,
    LOOM_OP_SIGMOID,
    LOOM_OP_SCALE,
    LOOM_OP_COUNT_
} loom_op_type_t;
const char *loom_op_name(loom_op_type_t t);

/* A parameter tensor and its gradient (views into the model's flat arrays). */
typedef struct {
    char name[48];
    float *data, *grad;
    size_t count, offset; /* offset in the flat arrays */
    int decay;            /* weight decay applies */
} loom_param_t;

typedef struct loom_model loom_model_t;

/* Builder.  Activation 0 is the input.  Each add_* returns the id of its
 * output activation (>= 0) or a negative status (message set). */
int loom_model_create(loom_model_t **out, const char *name, loom_shape_t input);
void loom_model_destroy(loom_model_t *m);
int loom_input(const loom_model_t *m);
int loom_add_conv(loom_model_t *m, const char *name, int x, int cout, int k, int stride,
                  int pad, int dil, int groups, int bias);
int loom_add_bn(loom_model_t *m, const char *name, int x);
int loom_add_relu(loom_model_t *m, const char *name, int x);   /* in place */
int loom_add_sigmoid(loom_model_t *m, const char *name, int x);
int loom_add_maxpool(loom_model_t *m, const char *name, int x, int k, int stride, int pad);
int loom_add_avgpool(loom_model_t *m, const char *name, int x, int k, int stride, int pad);
int loom_add_gap(loom_model_t *m, const char *name, int x);
int loom_add_fc(loom_model_t *m, const char *name, int x, int out);
int loom_add_add(loom_model_t *m, const char *name, int a, int b);
int loom_add_dropout(loom_model_t *m, const char *name, int x, float p);
int loom_add_pixel_shuffle(loom_model_t *m, const char *name, int x, int r);
/* y = alpha * x, in place when possible (like relu); no parameters.  Thread:
 * the model's, like every builder call. */
int loom_add_scale(loom_model_t *m, const char *name, int x, float alpha);
/* Ends building: marks the output, allocates parameters and activations for
 * the input batch size, and initialises weights from seed. */
int loom_model_finish(loom_model_t *m, int output, uint64_t seed);

const char *loom_model_name(const loom_model_t *m);
loom_shape_t loom_model_input_shape(const loom_model_t *m);
loom_shape_t loom_model_output_shape(const loom_model_t *m);
float *loom_model_input(loom_model_t *m);  /* write the batch here */
float *loom_model_output(loom_model_t *m); /* logits after forward */
float *loom_model_doutput(loom_model_t *m);/* loss gradient goes here */
int loom_model_num_params(const loom_model_t *m);
loom_param_t *loom_model_param(loom_model_t *m, int i);
size_t loom_model_param_count(const loom_model_t *m); /* floats */
float *loom_model_params(loom_model_t *m);             /* flat parameters */
float *loom_model_grads(loom_model_t *m);              /* flat gradients */
/* Non-trained state saved with the weights (batch-norm running stats). */
size_t loom_model_buffer_count(const loom_model_t *m);
float *loom_model_buffers(loom_model_t *m);
double loom_model_flops(const loom_model_t *m); /* forward FLOPs per sample */

/* Forward on the first n samples (n <= batch of the input shape). */
int loom_model_forward(loom_model_t *m, int n, int training);
/* Backward from loom_model_doutput; adds to the gradients. */
int loom_model_backward(loom_model_t *m, int n);
void loom_model_zero_grad(loom_model_t *m);
void loom_model_set_seed(loom_model_t *m, uint64_t seed); /* dropout stream */
/* The dropout stream itself, read and restored by checkpoints.  Thread: the
 * model's. */
loom_rng_t *loom_model_rng(loom_model_t *m);
/* Backward hook: called after layer `op` ran backward, with ready_from such
 * that the flat gradients [ready_from, param_count) are final for this step
 * (parameters lie in layer order, backward runs in reverse).  A negative
 * return stops the backward pass with that status.  fn NULL: no hook.
 * Activation gradients are not part of this promise: a ReLU that
 * loom_model_finish fused into the batch norm or residual add before it
 * (doc/loom.md, "Performance") is applied in that layer's backward, so at
 * the ReLU's own call its input gradient is still its output's. */
typedef int (*loom_backward_hook_t)(void *arg, int op, size_t ready_from);
void loom_model_set_backward_hook(loom_model_t *m, loom_backward_hook_t fn, void *arg);

/* Introspection, for executors that run a model's layers themselves (the
 * spatially parallel one).  Pointers stay valid while the model lives. */
typedef struct {
    loom_op_type_t type;
    const char *name;
    int in[2], nin, out, inplace;
    int accum[2];               /* backward adds to (1) or writes (0) in[j]'s gradient */
    loom_shape_t in_shape, out_shape;
    loom_conv_desc_t conv;
    loom_pool_desc_t pool;
    loom_bn_desc_t bn;
    float p;                    /* dropout probability; scale: alpha */
    int r;
    loom_param_t *weight, *bias; /* NULL: none (batch norm: gamma, beta) */
    float *running_mean, *running_var;
    float *aux;                 /* batch norm: save_mean[c], save_invstd[c] */
} loom_op_info_t;
int loom_model_num_ops(const loom_model_t *m);
int loom_model_op_info(loom_model_t *m, int i, loom_op_info_t *info);
float *loom_model_act(loom_model_t *m, int act);      /* activation act's data */
float *loom_model_act_grad(loom_model_t *m, int act); /* its gradient buffer, NULL if none */
/* Bytes of activations plus activation gradients (the model's accounting). */
size_t loom_model_activation_bytes(const loom_model_t *m);
/* Everything the model allocated: parameters, gradients, buffers,
 * activations, activation gradients, workspace. */
size_t loom_model_memory_bytes(const loom_model_t *m);
/* The model's convolution workspace and its size in floats (NULL: out of
 * memory), for executors that run its convolutions themselves. */
float *loom_model_workspace(loom_model_t *m, size_t *floats);
void loom_model_summary(const loom_model_t *m, FILE *f);

/* Per-layer-type timing (forward and backward seconds). */
void loom_model_set_profile(loom_model_t *m, int on);
void loom_model_profile_print(const loom_model_t *m, FILE *f, int steps, int batch);
void loom_model_profile_reset(loom_model_t *m);

/* --------------------------------------------------------------- resnets */
/* name: resnet18, resnet34, resnet50 (ImageNet shape) or resnetN with
 * N = 6k+2 (resnet8, resnet20, resnet32, ...: 16/32/64 channels, for 28x28
 * or 32x32 inputs).  input: [batch, channels, h, w]. */
int loom_resnet_create(loom_model_t **out, const char *name, loom_shape_t input,
                       int classes, uint64_t seed);

/* ------------------------------------------------------------------ edsr */
/* EDSR (Lim et al. 2017): a 3x3 head convolution to `feats` channels,
 * `blocks` residual blocks (conv-relu-conv, output scaled by res_scale,
 * added to the block input; no batch norm), a 3x3 body convolution added to
 * the head's output (global skip), the upsampler (3x3 conv to 4*feats
 * channels + pixel shuffle 2, once for x2 and twice for x4; 9*feats + pixel
 * shuffle 3 for x3) and a 3x3 tail convolution to the input's channels.
 * Every convolution is 3x3, stride 1, pad 1, with bias.  res_scale 1 adds
 * no scaling layer.  input: [batch, channels, h, w] (low resolution); the
 * output is [batch, channels, scale*h, scale*w].  Names: "edsr" is the
 * paper's baseline (16 blocks, 64 features, res_scale 1), "edsr-paper" the
 * paper's large model (32, 256, 0.1): loom_edsr_config fills them. */
typedef struct {
    int blocks, feats, scale;
    float res_scale;
} loom_edsr_desc_t;
/* Known name: fills d (scale 2) and returns LOOM_OK; else LOOM_ERR_INVALID.
 * Any thread. */
int loom_edsr_config(const char *name, loom_edsr_desc_t *d);
/* Builds and finishes the model (weights uniform in +-1/sqrt(fan_in), from
 * seed); *out set only on success.  Any thread (the new model is the
 * caller's). */
int loom_edsr_create(loom_model_t **out, const char *name, const loom_edsr_desc_t *d,
                     loom_shape_t input, uint64_t seed);

/* ----------------------------------------------------------- optimisers */
typedef enum { LOOM_SGD, LOOM_ADAM } loom_optim_kind_t;
typedef enum { LOOM_SCHED_CONST, LOOM_SCHED_STEP, LOOM_SCHED_COSINE } loom_sched_kind_t;

typedef struct {
    loom_optim_kind_t kind;
    float lr, momentum, weight_decay;
    int nesterov;
    float beta1, beta2, eps;   /* Adam */
    loom_sched_kind_t sched;
    long total_steps;          /* for cosine */
    long warmup_steps;         /* linear warm-up from 0 */
    long step_size;            /* for step: multiply by gamma every step_size */
    float gamma;
    float min_lr;              /* cosine floor */
} loom_optim_desc_t;
#define LOOM_OPTIM_DESC_INIT                                                          \
    { LOOM_SGD, 0.1f, 0.9f, 5e-4f, 0, 0.9f, 0.999f, 1e-8f, LOOM_SCHED_CONST, 0, 0, 0, \
      0.1f, 0.0f }

typedef struct loom_optim loom_optim_t;
int loom_optim_create(loom_optim_t **out, const loom_optim_desc_t *d, size_t nparams);
void loom_optim_destroy(loom_optim_t *o);
float loom_optim_lr(const loom_optim_t *o); /* learning rate of the next step */
/* One update of params from grads (flat arrays of nparams floats). */
void loom_optim_step(loom_optim_t *o, float *params, const float *grads,
                     const unsigned char *decay_mask);
long loom_optim_steps(const loom_optim_t *o);
/* The optimiser's state, for checkpoints: moment k (0: SGD momentum buffer
 * or Adam's first moment, 1: Adam's second moment) as nparams floats, NULL
 * where the optimiser has none; and the step count, which with the
 * descriptor fixes the schedule.  Restoring both (memcpy into the moments,
 * loom_optim_set_steps) resumes the exact update sequence.  Thread: the
 * optimiser's (not concurrent with loom_optim_step). */
float *loom_optim_moment(loom_optim_t *o, int k);
size_t loom_optim_size(const loom_optim_t *o); /* nparams */
void loom_optim_set_steps(loom_optim_t *o, long t);
/* Per-float mask: 1 where weight decay applies (built from the model). */
unsigned char *loom_model_decay_mask(const loom_model_t *m);

/* -------------------------------------------------------------------- data */
typedef struct {
    int count, channels, rows, cols;
    uint8_t *images; /* count * channels * rows * cols */
    int32_t *labels; /* count */
    int classes;
} loom_dataset_t;

/* Reads an IDX pair (images idx3 + labels idx1, gzip or plain). */
int loom_idx_load(loom_dataset_t *ds, const char *images_path, const char *labels_path,
                  int classes);
/* Reads Fashion-MNIST (train or test) from dir (NULL: Debian's
 * /usr/share/datasets/fashion-mnist). */
int loom_fashion_mnist_load(loom_dataset_t *ds, const char *dir, int train);
void loom_dataset_free(loom_dataset_t *ds);
#define LOOM_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

/* Background loader: one thread prepares batch k+1 while batch k trains. */
typedef struct {
    const loom_dataset_t *ds; /* NULL: synthetic (random tensors, no I/O) */
    int batch;
    int limit;       /* use the first limit samples (0: all) */
    int shuffle, augment; /* augment: random crop (pad) + horizontal flip */
    int pad;         /* crop padding (e.g. 4) */
    float mean, std; /* normalisation of x/255 */
    uint64_t seed;
    int drop_last;
    loom_shape_t synth; /* synthetic: [batch, c, h, w] */
    int synth_classes;
    int synth_batches;  /* batches per epoch in synthetic mode */
} loom_loader_desc_t;

typedef struct loom_loader loom_loader_t;
int loom_loader_create(loom_loader_t **out, const loom_loader_desc_t *d);
void loom_loader_destroy(loom_loader_t *l);
int loom_loader_batches(const loom_loader_t *l); /* per epoch */
/* Starts an epoch (reshuffles with seed+epoch). */
int loom_loader_start_epoch(loom_loader_t *l, int epoch);
/* Starts an epoch at batch `first` (0 <= first <= batches): the batches
 * handed out are exactly those an uninterrupted epoch hands out from there
 * (shuffle and augmentation depend on (seed, epoch, batch) only), which is
 * how a resumed run continues.  Thread: the consumer's. */
int loom_loader_start_epoch_at(loom_loader_t *l, int epoch, int first);
/* Copies the next batch into x and labels; returns its size, 0 at epoch end,
 * or a negative status. */
int loom_loader_next(loom_loader_t *l, float *x, int32_t *labels);

/* ------------------------------------------------- super-resolution data */
/* A float image, planes [c][h][w], values in [0, 1]. */
typedef struct {
    int c, h, w;
    float *data;
} loom_image_t;

/* Reads a PNG (8 or 16 bits; gray, gray+alpha, palette, RGB, RGBA) as 3
 * planes in [0, 1]: gray replicated to RGB, alpha dropped.  LOOM_ERR_IO if
 * unreadable, LOOM_ERR_FORMAT if not a PNG.  Any thread (one image each). */
int loom_png_load(loom_image_t *img, const char *path);
void loom_image_free(loom_image_t *img);

/* Bicubic resize of c planes [c][h][w] to [c][ho][wo]: Keys' cubic (a =
 * -0.5) with symmetric (mirrored) borders, the same sampling grid as
 * MATLAB's imresize; antialias nonzero widens the kernel by 1/scale when
 * shrinking (what imresize does by default).  No clamping.  Any thread. */
void loom_resize_bicubic(int c, int h, int w, const float *x, int ho, int wo, float *y,
                         int antialias);

/* PSNR in dB on the luma of two RGB images [3][h][w] in [0, 1] (ITU-R
 * BT.601: Y = 16 + 65.481 R + 128.553 G + 24.966 B, peak 255), each value
 * clamped to [0, 1] and rounded to 8 bits first (as when saved), with
 * `border` pixels cropped on every side.  Returns the mean squared error
 * of Y through *mse when mse is not NULL; infinity for identical images. */
double loom_psnr_y(int h, int w, const float *a, const float *b, int border, double *mse);

/* ------------------------------------------------------------- checkpoint */
/* Binary format (little-endian), see doc/loom.md:
 *   "LOOMCKPT" | u32 version | u32 header_bytes | char model[32] |
 *   u32 ntensors | u64 total_floats | per tensor: char name[48], u64 count |
 *   float data[total_floats] | u32 crc32 of everything before it. */
#define LOOM_CKPT_VERSION 1
int loom_checkpoint_save(loom_model_t *m, const char *path);
int loom_checkpoint_load(loom_model_t *m, const char *path);

#ifdef __cplusplus
}
#endif
#endif /* LOOM_H */
