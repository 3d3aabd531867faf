/*
 * vision_geom.c — padding and rotation of images (lt_vision.h), with torchvision's numbers on PIL images: Pad's four
 * modes as numpy's pad (reflect and symmetric mirror about the edge pixel and the edge) and RandomRotation as
 * Pillow's rotate (an affine map from each output pixel's centre back to the source, nearest pixel).
 */
#include <math.h>

#include "lt_ops.h"
#include "lt_vision.h"

/* source index for position i in [-pad, n + pad) of a side of n, by mode (n >= 1; the caller checked the pad) */
static int64_t fold(int64_t i, int64_t n, lt_pad_mode mode) {
  if (i >= 0 && i < n) return i;
  if (mode == LT_PAD_EDGE) return i < 0 ? 0 : n - 1;
  if (mode == LT_PAD_REFLECT) {
    if (n == 1) return 0;
    int64_t p = 2 * (n - 1);
    i %= p;
    if (i < 0) i += p;
    return i < n ? i : p - i;
  }
  /* symmetric */
  int64_t p = 2 * n;
  i %= p;
  if (i < 0) i += p;
  return i < n ? i : p - 1 - i;
}

lt_tensor *lt_vision_pad(lt_ctx *c, lt_tensor *img, const int64_t pad[4], lt_pad_mode mode, const double *fill,
                         int nfill) {
  lt_tensor *x = lt_vision_image_arg(c, "pad", img);
  if (!x) return NULL;
  int64_t ch = x->shape[0], h = x->shape[1], w = x->shape[2];
  static const char *names[] = { "constant", "edge", "reflect", "symmetric" };
  for (int i = 0; i < 4; i++) {
    int64_t side = i % 2 ? h : w;
    if (pad[i] < 0 || pad[i] > 1 << 20) {
      lt_tensor_release(x);
      lt_fail(c, "pad: padding %lld must be between 0 and 2^20", (long long)pad[i]);
      return NULL;
    }
    if ((mode == LT_PAD_REFLECT && pad[i] >= side) || (mode == LT_PAD_SYMMETRIC && pad[i] > side)) {
      lt_tensor_release(x);
      lt_fail(c, "pad: padding %lld is too large for mode '%s' on a side of %lld pixels (at most %lld)",
              (long long)pad[i], names[mode], (long long)side, (long long)(mode == LT_PAD_REFLECT ? side - 1 : side));
      return NULL;
    }
  }
  if (mode == LT_PAD_CONSTANT && nfill != 1 && nfill != ch) {
    lt_tensor_release(x);
    lt_fail(c, "pad: fill has %d values for an image of %lld channels (expected 1 or %lld)", nfill, (long long)ch,
            (long long)ch);
    return NULL;
  }
  int64_t oh = h + pad[1] + pad[3], ow = w + pad[0] + pad[2];
  int64_t shape[3] = { ch, oh, ow };
  lt_tensor *out = lt_tensor_new(c, x->dtype, 3, shape);
#define PAD_PLANES(T, GET)                                                                                \
  do {                                                                                                    \
    const T *s = GET(x);                                                                                  \
    T *o = GET(out);                                                                                      \
    for (int64_t k = 0; k < ch; k++) {                                                                    \
      T f = mode == LT_PAD_CONSTANT ? (T)fill[nfill == 1 ? 0 : k] : (T)0;                                 \
      for (int64_t y = 0; y < oh; y++) {                                                                  \
        int64_t sy = y - pad[1];                                                                          \
        int inside_y = sy >= 0 && sy < h;                                                                 \
        if (mode != LT_PAD_CONSTANT) sy = fold(sy, h, mode);                                              \
        for (int64_t xx = 0; xx < ow; xx++) {                                                             \
          int64_t sx = xx - pad[0];                                                                       \
          T *d = o + (k * oh + y) * ow + xx;                                                              \
          if (mode == LT_PAD_CONSTANT) *d = inside_y && sx >= 0 && sx < w ? s[(k * h + sy) * w + sx] : f; \
          else *d = s[(k * h + sy) * w + fold(sx, w, mode)];                                              \
        }                                                                                                 \
      }                                                                                                   \
    }                                                                                                     \
  } while (0)
  if (out && x->dtype == LT_F64) PAD_PLANES(double, lt_f64);
  else if (out) PAD_PLANES(float, lt_f32);
#undef PAD_PLANES
  lt_tensor_release(x);
  return out;
}

static double round15(double v) { return round(v * 1e15) / 1e15; } /* Python's round(v, 15) */

lt_tensor *lt_vision_rotate(lt_ctx *c, lt_tensor *img, double degrees, int expand, const double *center,
                            const double *fill, int nfill) {
  if (!isfinite(degrees)) {
    lt_fail(c, "rotate: the angle must be a finite number of degrees, got %g", degrees);
    return NULL;
  }
  lt_tensor *x = lt_vision_image_arg(c, "rotate", img);
  if (!x) return NULL;
  int64_t ch = x->shape[0], h = x->shape[1], w = x->shape[2];
  if (nfill != 1 && nfill != ch) {
    lt_tensor_release(x);
    lt_fail(c, "rotate: fill has %d values for an image of %lld channels (expected 1 or %lld)", nfill, (long long)ch,
            (long long)ch);
    return NULL;
  }
  /* Pillow's Image.rotate: the matrix maps output coordinates to source coordinates */
  double cx = center ? center[0] : (double)w / 2.0, cy = center ? center[1] : (double)h / 2.0;
  double a = -fmod(degrees, 360.0) * M_PI / 180.0;
  double m[6] = { round15(cos(a)), round15(sin(a)), 0.0, round15(-sin(a)), round15(cos(a)), 0.0 };
  m[2] = m[0] * -cx + m[1] * -cy + cx;
  m[5] = m[3] * -cx + m[4] * -cy + cy;
  int64_t ow = w, oh = h;
  if (expand) {
    double xs[4] = { 0, (double)w, (double)w, 0 }, ys[4] = { 0, 0, (double)h, (double)h };
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int i = 0; i < 4; i++) {
      double tx = m[0] * xs[i] + m[1] * ys[i] + m[2], ty = m[3] * xs[i] + m[4] * ys[i] + m[5];
      x0 = fmin(x0, tx), x1 = fmax(x1, tx), y0 = fmin(y0, ty), y1 = fmax(y1, ty);
    }
    ow = (int64_t)(ceil(x1) - floor(x0));
    oh = (int64_t)(ceil(y1) - floor(y0));
    double dx = -(double)(ow - w) / 2.0, dy = -(double)(oh - h) / 2.0;
    double t2 = m[0] * dx + m[1] * dy + m[2], t5 = m[3] * dx + m[4] * dy + m[5];
    m[2] = t2, m[5] = t5;
  }
  int64_t shape[3] = { ch, oh, ow };
  lt_tensor *out = lt_tensor_new(c, x->dtype, 3, shape);
  /* Pillow's affine_transform, nearest: sample at each output pixel's centre, truncating toward -1 outside */
#define ROTATE_PLANES(T, GET)                                                                      \
  do {                                                                                             \
    const T *s = GET(x);                                                                           \
    T *o = GET(out);                                                                               \
    double xo = m[2] + m[1] * 0.5 + m[0] * 0.5, yo = m[5] + m[4] * 0.5 + m[3] * 0.5;               \
    for (int64_t y = 0; y < oh; y++) {                                                             \
      double xx = xo, yy = yo;                                                                     \
      for (int64_t px = 0; px < ow; px++) {                                                        \
        int64_t xi = xx < 0.0 ? -1 : (int64_t)xx, yi = yy < 0.0 ? -1 : (int64_t)yy;                \
        int in = xi >= 0 && xi < w && yi >= 0 && yi < h;                                           \
        for (int64_t k = 0; k < ch; k++)                                                           \
          o[(k * oh + y) * ow + px] = in ? s[(k * h + yi) * w + xi] : (T)fill[nfill == 1 ? 0 : k]; \
        xx += m[0];                                                                                \
        yy += m[3];                                                                                \
      }                                                                                            \
      xo += m[1];                                                                                  \
      yo += m[4];                                                                                  \
    }                                                                                              \
  } while (0)
  if (out && x->dtype == LT_F64) ROTATE_PLANES(double, lt_f64);
  else if (out) ROTATE_PLANES(float, lt_f32);
#undef ROTATE_PLANES
  lt_tensor_release(x);
  return out;
}
