/*
 * loom_mesh.h - the mesh-tangling problem and its segmentation model.
 *
 * Data: a 2-D structured mesh of h x w quadrilateral cells on the unit
 * square is moved by a synthetic flow (Gaussian vortices plus sinks, a
 * different flow per sample, all from a seed) with midpoint time steps.  A
 * sample is the mesh at a random time t: 18 features per cell and a target
 * of 1 where the cell is tangled or about to be, i.e. where its smallest
 * corner Jacobian, within `lookahead` further steps, falls to tau times the
 * undeformed cell area or below (non-positive or tiny).
 *
 * Features (channel: meaning), each scaled to about unit range:
 *   0-1 centroid x, y          2-3 centroid displacement since t=0
 *   4-5 mean node velocity     6   area / reference area
 *   7   min corner Jacobian / reference area
 *   8   log aspect ratio (longest / shortest edge)
 *   9   skew (largest |cos| of a corner angle)
 *   10-13 change of 6-9 over the last step
 *   14-15 du/dx, dv/dy         16  vorticity     17 corner-Jacobian spread
 *
 * Model: fully convolutional.  Four stages of (conv 3x3 + ReLU + batch norm)
 * x 2, stages 1-3 entering with a stride-2 conv, a 1x1 head to 64 channels
 * and a pixel shuffle by 8 back to full resolution, plus a 1x1 head on the
 * full-resolution stage-0 features added to it: one logit per cell.
 * The sigmoid is fused into the loss (BCE on logits); a cell is predicted
 * tangled when its logit is > 0 (sigmoid > 0.5).
 */
#ifndef LOOM_MESH_H
#define LOOM_MESH_H

#include "loom.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_MESH_CHANNELS 18

typedef struct {
    int h, w;          /* cells */
    uint64_t seed;
    int steps_max;     /* the sample time t is drawn in [steps_max/4, steps_max] */
    int lookahead;     /* steps looked ahead for the target */
    float dt;
    float tau;         /* tangled: min corner Jacobian <= tau * reference area */
} loom_mesh_desc_t;
#define LOOM_MESH_DESC_INIT { 128, 128, 1, 20, 3, 0.04f, 0.1f }

/* Sample `index` of the stream: x [18, h, w], y [h, w] (0 or 1). */
int loom_mesh_sample(const loom_mesh_desc_t *d, uint64_t index, float *x, float *y);

/* Writes samples first..first+count-1 to a file / reads them back
 * ("LOOMMESH" | u32 version | u32 h, w, count | u64 seed | floats | crc32). */
int loom_mesh_write(const loom_mesh_desc_t *d, uint64_t first, int count, const char *path);
typedef struct {
    int h, w, count;
    float *x, *y; /* count * 18 * h * w, count * h * w */
} loom_mesh_set_t;
int loom_mesh_read(loom_mesh_set_t *s, const char *path);
void loom_mesh_set_free(loom_mesh_set_t *s);

/* The model for input [batch, 18, h, w] (h, w multiples of 8); width scales
 * the stage widths 64/128/256/256 (1: full size; 0.125: the CPU default). */
int loom_mesh_model_create(loom_model_t **out, loom_shape_t input, float width, uint64_t seed);

/* Per-pixel BCE on logits with positive-class weight pos_weight.  Returns
 * the SUM of the n losses; dx (may be NULL) gets d(sum/norm)/dx.  counts
 * (may be NULL) accumulate true positives, false positives, false negatives. */
double loom_mesh_bce(size_t n, const float *logits, const float *target, float pos_weight,
                     double norm, float *dx, long counts[3]);

#ifdef __cplusplus
}
#endif
#endif /* LOOM_MESH_H */
