/*
 * sr_data.c - what super-resolution training needs besides the model:
 * photographs read from PNG (libpng), bicubic resizing as MATLAB's imresize
 * does it (the low-resolution inputs of the SR benchmarks are made that
 * way), and PSNR on the luma channel.
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>

void loom_image_free(loom_image_t *img)
{
    if (!img)
        return;
    free(img->data);
    memset(img, 0, sizeof *img);
}

/* libpng warnings (e.g. about colour profiles) are not errors: ignored. */
static void png_quiet(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

int loom_png_load(loom_image_t *img, const char *path)
{
    if (!img || !path)
        return loom_error(LOOM_ERR_INVALID, "png: NULL argument");
    memset(img, 0, sizeof *img);
    FILE *f = fopen(path, "rb");
    if (!f)
        return loom_error(LOOM_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    unsigned char sig[8];
    if (fread(sig, 1, 8, f) != 8 || png_sig_cmp(sig, 0, 8)) {
        fclose(f);
        return loom_error(LOOM_ERR_FORMAT, "%s: not a PNG file", path);
    }
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    /* volatile: modified between setjmp and a longjmp back */
    unsigned char *volatile rows = NULL;
    png_bytep *volatile rowp = NULL;
    float *volatile data = NULL;
    if (!png || !info) {
        png_destroy_read_struct(&png, NULL, NULL);
        fclose(f);
        return loom_error(LOOM_ERR_NOMEM, "png: out of memory");
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        fclose(f);
        free(rows);
        free(rowp);
        free(data);
        return loom_error(LOOM_ERR_FORMAT, "%s: corrupt PNG", path);
    }
    png_set_error_fn(png, NULL, NULL, png_quiet);
    png_init_io(png, f);
    png_set_sig_bytes(png, 8);
    png_read_info(png, info);
    int ct = png_get_color_type(png, info), bd = png_get_bit_depth(png, info);
    if (ct == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (ct == PNG_COLOR_TYPE_GRAY && bd < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (png_get_valid(png, info, PNG_INFO_tRNS))
        png_set_tRNS_to_alpha(png);
    if (bd == 16)
        png_set_strip_16(png);
    if (ct == PNG_COLOR_TYPE_GRAY || ct == PNG_COLOR_TYPE_GRAY_ALPHA)
        png_set_gray_to_rgb(png);
    png_set_strip_alpha(png);
    png_read_update_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    size_t rb = png_get_rowbytes(png, info);
    if (w == 0 || h == 0 || w > 65536 || h > 65536 || rb != (size_t)w * 3) {
        png_destroy_read_struct(&png, &info, NULL);
        fclose(f);
        return loom_error(LOOM_ERR_FORMAT, "%s: unsupported PNG layout (%ux%u, %zu bytes a row)",
                          path, (unsigned)w, (unsigned)h, rb);
    }
    rows = malloc(rb * h);
    rowp = malloc(sizeof(png_bytep) * h);
    data = malloc(sizeof(float) * 3 * (size_t)w * h);
    if (!rows || !rowp || !data) {
        png_destroy_read_struct(&png, &info, NULL);
        fclose(f);
        free(rows);
        free(rowp);
        free(data);
        return loom_error(LOOM_ERR_NOMEM, "%s: out of memory", path);
    }
    for (png_uint_32 y = 0; y < h; y++)
        rowp[y] = rows + rb * y;
    png_read_image(png, rowp);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    fclose(f);
    size_t hw = (size_t)w * h;
    for (size_t p = 0; p < hw; p++)
        for (int c = 0; c < 3; c++)
            data[(size_t)c * hw + p] = rows[3 * p + (size_t)c] / 255.0f;
    free(rows);
    free(rowp);
    img->c = 3;
    img->h = (int)h;
    img->w = (int)w;
    img->data = data;
    return LOOM_OK;
}

/* Keys' cubic convolution kernel, a = -0.5. */
static double cubic(double x)
{
    double ax = fabs(x), a2 = ax * ax, a3 = a2 * ax;
    if (ax <= 1.0)
        return 1.5 * a3 - 2.5 * a2 + 1.0;
    if (ax <= 2.0)
        return -0.5 * a3 + 2.5 * a2 - 4.0 * ax + 2.0;
    return 0.0;
}

static int mirror(int i, int n)
{
    /* symmetric padding: ... 1 0 | 0 1 ... n-1 | n-1 n-2 ... */
    int p = 2 * n;
    i %= p;
    if (i < 0)
        i += p;
    return i < n ? i : p - 1 - i;
}

/* The taps of one dimension: for each output index, taps source indices and
 * weights (normalised to sum 1), as imresize's contributions(). */
static int weights(int in, int out, int antialias, int *taps, int **idx, double **wt)
{
    double scale = (double)out / in;
    double kw = 4.0, ks = 1.0;
    if (scale < 1.0 && antialias) {
        kw = 4.0 / scale;
        ks = scale;
    }
    int P = (int)ceil(kw) + 2;
    *idx = malloc(sizeof(int) * (size_t)out * P);
    *wt = malloc(sizeof(double) * (size_t)out * P);
    if (!*idx || !*wt) {
        free(*idx);
        free(*wt);
        return loom_error(LOOM_ERR_NOMEM, "resize: out of memory");
    }
    for (int o = 0; o < out; o++) {
        double u = (o + 1) / scale + 0.5 * (1.0 - 1.0 / scale); /* 1-based, as MATLAB */
        int left = (int)floor(u - kw / 2.0);
        double sum = 0.0;
        for (int k = 0; k < P; k++) {
            int j = left + k; /* 1-based */
            double wv = ks * cubic(ks * (u - j));
            (*idx)[o * P + k] = mirror(j - 1, in);
            (*wt)[o * P + k] = wv;
            sum += wv;
        }
        for (int k = 0; k < P; k++)
            (*wt)[o * P + k] = sum != 0.0 ? (*wt)[o * P + k] / sum : 0.0;
    }
    *taps = P;
    return LOOM_OK;
}

void loom_resize_bicubic(int c, int h, int w, const float *x, int ho, int wo, float *y,
                         int antialias)
{
    int ph = 0, pw = 0, *ih = NULL, *iw = NULL;
    double *wh = NULL, *ww = NULL;
    double *tmp = malloc(sizeof(double) * (size_t)ho * w);
    if (!tmp || weights(h, ho, antialias, &ph, &ih, &wh) < 0 ||
        weights(w, wo, antialias, &pw, &iw, &ww) < 0) {
        /* no status to return: fill with NaN so that the caller sees it */
        for (size_t i = 0; i < (size_t)c * ho * wo; i++)
            y[i] = NAN;
        goto out;
    }
    for (int ch = 0; ch < c; ch++) {
        const float *xc = x + (size_t)ch * h * w;
        float *yc = y + (size_t)ch * ho * wo;
        /* rows first (imresize resizes the dimension that shrinks most first;
         * for equal factors the order does not matter beyond rounding) */
        for (int o = 0; o < ho; o++)
            for (int col = 0; col < w; col++) {
                double s = 0.0;
                for (int k = 0; k < ph; k++)
                    s += wh[o * ph + k] * xc[(size_t)ih[o * ph + k] * w + col];
                tmp[(size_t)o * w + col] = s;
            }
        for (int r = 0; r < ho; r++)
            for (int o = 0; o < wo; o++) {
                double s = 0.0;
                for (int k = 0; k < pw; k++)
                    s += ww[o * pw + k] * tmp[(size_t)r * w + iw[o * pw + k]];
                yc[(size_t)r * wo + o] = (float)s;
            }
    }
out:
    free(tmp);
    free(ih);
    free(iw);
    free(wh);
    free(ww);
}

static double q8(float v)
{
    double x = v < 0.0f ? 0.0 : v > 1.0f ? 1.0 : v;
    return floor(x * 255.0 + 0.5);
}

double loom_psnr_y(int h, int w, const float *a, const float *b, int border, double *mse)
{
    size_t hw = (size_t)h * w;
    double se = 0.0;
    long n = 0;
    for (int i = border; i < h - border; i++)
        for (int j = border; j < w - border; j++) {
            size_t p = (size_t)i * w + j;
            double ya = 16.0 + (65.481 * q8(a[p]) + 128.553 * q8(a[hw + p]) +
                                24.966 * q8(a[2 * hw + p])) / 255.0;
            double yb = 16.0 + (65.481 * q8(b[p]) + 128.553 * q8(b[hw + p]) +
                                24.966 * q8(b[2 * hw + p])) / 255.0;
            se += (ya - yb) * (ya - yb);
            n++;
        }
    double m = n ? se / n : 0.0;
    if (mse)
        *mse = m;
    return m > 0.0 ? 10.0 * log10(255.0 * 255.0 / m) : INFINITY;
}
