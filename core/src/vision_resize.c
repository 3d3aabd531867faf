/*
 * vision_resize.c — lt_vision_resize (lt_vision.h): PIL's resampling (Pillow's Resample.c, the numbers torchvision's
 * Resize gives on PIL images). Bilinear is a triangle filter whose support is scaled by the downscale factor (so
 * shrinking averages every source pixel: antialias), normalised per output pixel, applied horizontally then
 * vertically. On pixel images each pass rounds to 8 bits with Pillow's fixed-point coefficients (22 bits), as the
 * intermediate image of Pillow is 8-bit; float images keep double coefficients and no rounding, and sum in double
 * for either dtype (a float64 image's result is double throughout).
 */
#include <math.h>
#include <string.h>

#include "lt_alloc.h"
#include "lt_errors.h"
#include "lt_ops.h"
#include "lt_vision.h"

#define PRECISION_BITS (32 - 8 - 2)

typedef struct taps {
  int64_t ksize;
  int64_t *bounds; /* per output: first source index, count */
  double *k;       /* per output: ksize weights */
  int32_t *ki;     /* the same in fixed point (pixel images) */
  size_t bytes_b, bytes_k, bytes_ki;
} taps;

static void taps_free(taps *t) {
  if (t->bounds) lt_free(t->bounds, t->bytes_b);
  if (t->k) lt_free(t->k, t->bytes_k);
  if (t->ki) lt_free(t->ki, t->bytes_ki);
}

static double triangle(double x) {
  if (x < 0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

/* Pillow's precompute_coeffs for the whole source range [0, in) */
static int taps_init(lt_ctx *c, taps *t, int64_t in, int64_t out) {
  memset(t, 0, sizeof *t);
  double scale = (double)in / (double)out, fscale = scale < 1.0 ? 1.0 : scale, support = fscale;
  t->ksize = (int64_t)ceil(support) * 2 + 1;
  t->bytes_b = (size_t)out * 2 * sizeof(int64_t);
  t->bytes_k = (size_t)(out * t->ksize) * sizeof(double);
  t->bytes_ki = (size_t)(out * t->ksize) * sizeof(int32_t);
  t->bounds = lt_alloc(t->bytes_b);
  t->k = lt_alloc(t->bytes_k);
  t->ki = lt_alloc(t->bytes_ki);
  if (!t->bounds || !t->k || !t->ki) {
    taps_free(t);
    return lt_fail(c, LT_E_OOM, t->bytes_k);
  }
  for (int64_t o = 0; o < out; o++) {
    double center = ((double)o + 0.5) * scale, ww = 0.0, ss = 1.0 / fscale;
    int64_t lo = (int64_t)(center - support + 0.5), hi = (int64_t)(center + support + 0.5);
    if (lo < 0) lo = 0;
    if (hi > in) hi = in;
    hi -= lo;
    double *k = t->k + o * t->ksize;
    int32_t *ki = t->ki + o * t->ksize;
    for (int64_t x = 0; x < hi; x++) {
      double w = triangle(((double)(x + lo) - center + 0.5) * ss);
      k[x] = w;
      ww += w;
    }
    for (int64_t x = 0; x < hi; x++) {
      if (ww != 0.0) k[x] /= ww;
      ki[x] = (int32_t)(k[x] < 0 ? k[x] * (1 << PRECISION_BITS) - 0.5 : k[x] * (1 << PRECISION_BITS) + 0.5);
    }
    for (int64_t x = hi; x < t->ksize; x++) k[x] = 0, ki[x] = 0;
    t->bounds[2 * o] = lo;
    t->bounds[2 * o + 1] = hi;
  }
  return LT_OK;
}

static double clip8(int64_t ss) {
  ss >>= PRECISION_BITS;
  return ss < 0 ? 0.0 : ss > 255 ? 255.0 : (double)ss;
}

/* one pass along a line of n taps.out outputs: src[lo * step], dst[o * ostep]; T is float or double (the image's
 * dtype), the sums double either way */
#define RESIZE_PASS(T, NAME)                                                                                    \
  static void NAME(const taps *t, int64_t out, const T *src, int64_t step, T *dst, int64_t ostep, int pixels) { \
    for (int64_t o = 0; o < out; o++) {                                                                         \
      int64_t lo = t->bounds[2 * o], n = t->bounds[2 * o + 1];                                                  \
      if (pixels) {                                                                                             \
        const int32_t *k = t->ki + o * t->ksize;                                                                \
        int64_t ss = (int64_t)1 << (PRECISION_BITS - 1);                                                        \
        for (int64_t x = 0; x < n; x++) ss += (int64_t)src[(lo + x) * step] * k[x];                             \
        dst[o * ostep] = (T)clip8(ss);                                                                          \
      } else {                                                                                                  \
        const double *k = t->k + o * t->ksize;                                                                  \
        double ss = 0.0;                                                                                        \
        for (int64_t x = 0; x < n; x++) ss += (double)src[(lo + x) * step] * k[x];                              \
        dst[o * ostep] = (T)ss;                                                                                 \
      }                                                                                                         \
    }                                                                                                           \
  }
RESIZE_PASS(float, pass_f32)
RESIZE_PASS(double, pass_f64)

static lt_tensor *resize_bilinear(lt_ctx *c, lt_tensor *x, int64_t oh, int64_t ow, int pixels) {
  int64_t ch = x->shape[0], h = x->shape[1], w = x->shape[2];
  taps th, tv;
  if (taps_init(c, &th, w, ow)) return NULL;
  if (taps_init(c, &tv, h, oh)) {
    taps_free(&th);
    return NULL;
  }
  int64_t mid_shape[3] = { ch, h, ow }, out_shape[3] = { ch, oh, ow };
  lt_tensor *mid = lt_tensor_new(c, x->dtype, 3, mid_shape);
  lt_tensor *out = mid ? lt_tensor_new(c, x->dtype, 3, out_shape) : NULL;
#define RESIZE_PLANES(T, GET, PASS)                                                                                 \
  do {                                                                                                              \
    const T *s = GET(x);                                                                                            \
    T *m = GET(mid), *o = GET(out);                                                                                 \
    for (int64_t k = 0; k < ch; k++) {                                                                              \
      for (int64_t y = 0; y < h; y++) PASS(&th, ow, s + (k * h + y) * w, 1, m + (k * h + y) * ow, 1, pixels);       \
      for (int64_t xx = 0; xx < ow; xx++) PASS(&tv, oh, m + k * h * ow + xx, ow, o + k * oh * ow + xx, ow, pixels); \
    }                                                                                                               \
  } while (0)
  if (out && x->dtype == LT_F64) RESIZE_PLANES(double, lt_f64, pass_f64);
  else if (out) RESIZE_PLANES(float, lt_f32, pass_f32);
#undef RESIZE_PLANES
  if (mid) lt_tensor_release(mid);
  taps_free(&th);
  taps_free(&tv);
  return out;
}

#define NEAREST_PLANES(T, GET)                                  \
  do {                                                          \
    const T *s = GET(x);                                        \
    T *o = GET(out);                                            \
    for (int64_t k = 0; k < ch; k++)                            \
      for (int64_t y = 0; y < oh; y++) {                        \
        int64_t yi = (int64_t)(((double)y + 0.5) * sy);         \
        if (yi > h - 1) yi = h - 1;                             \
        for (int64_t xx = 0; xx < ow; xx++) {                   \
          int64_t xi = (int64_t)(((double)xx + 0.5) * sx);      \
          if (xi > w - 1) xi = w - 1;                           \
          o[(k * oh + y) * ow + xx] = s[(k * h + yi) * w + xi]; \
        }                                                       \
      }                                                         \
  } while (0)

static lt_tensor *resize_nearest(lt_ctx *c, lt_tensor *x, int64_t oh, int64_t ow) {
  int64_t ch = x->shape[0], h = x->shape[1], w = x->shape[2];
  int64_t shape[3] = { ch, oh, ow };
  lt_tensor *out = lt_tensor_new(c, x->dtype, 3, shape);
  if (!out) return NULL;
  double sy = (double)h / (double)oh, sx = (double)w / (double)ow;
  if (x->dtype == LT_F64) NEAREST_PLANES(double, lt_f64);
  else NEAREST_PLANES(float, lt_f32);
  return out;
}

/* the checks every kernel of lt_vision.h makes on its image; returns a contiguous reference or NULL */
lt_tensor *lt_vision_image_arg(lt_ctx *c, const char *op, lt_tensor *img) {
  char b[128];
  if (img->dtype != LT_F32 && img->dtype != LT_F64) {
    lt_fail(c, "%s: expected a float32 or float64 image [C x H x W], got dtype %s", op, lt_dtype_name(img->dtype));
    return NULL;
  }
  if (img->ndim != 3 || img->shape[1] < 1 || img->shape[2] < 1 || img->shape[0] < 1) {
    lt_fail(c, "%s: expected an image [channels x height x width] with at least one pixel, got %s", op,
            lt_shape_str(img, b, sizeof b));
    return NULL;
  }
  return lt_op_contiguous(c, img);
}

lt_tensor *lt_vision_resize(lt_ctx *c, lt_tensor *img, int64_t oh, int64_t ow, lt_resize_mode mode, int pixels) {
  if (oh < 1 || ow < 1 || oh > 1 << 20 || ow > 1 << 20) {
    lt_fail(c, "resize: the output size [%lld x %lld] must be between 1 and 2^20 pixels a side", (long long)oh,
            (long long)ow);
    return NULL;
  }
  lt_tensor *x = lt_vision_image_arg(c, "resize", img);
  if (!x) return NULL;
  lt_tensor *out = mode == LT_RESIZE_NEAREST ? resize_nearest(c, x, oh, ow) : resize_bilinear(c, x, oh, ow, pixels);
  lt_tensor_release(x);
  return out;
}
