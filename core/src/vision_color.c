/*
 * vision_color.c — the filters of lt.vision whose arithmetic is not a few tensor ops: the hue shift (Pillow's 8-bit
 * HSV round trip on pixel images, torchvision's float HSV on [0, 1] images) and the Gaussian blur (torchvision's
 * gaussian_blur: a normalised float32 kernel, reflect padding, rounded on pixel images).
 */
#include <math.h>
#include <string.h>

#include "lt_alloc.h"
#include "lt_errors.h"
#include "lt_ops.h"
#include "lt_vision.h"

static unsigned char clip8i(int v) { return v < 0 ? 0 : v > 255 ? 255 : (unsigned char)v; }

/* Pillow's Convert.c rgb2hsv_row / hsv2rgb_row with the hue moved by `shift` (mod 256) in between */
static void hue_pixel8(float *r, float *g, float *b, unsigned shift) {
  unsigned char R = (unsigned char)*r, G = (unsigned char)*g, B = (unsigned char)*b;
  unsigned char maxc = R > G ? (R > B ? R : B) : (G > B ? G : B), minc = R < G ? (R < B ? R : B) : (G < B ? G : B);
  unsigned char uh = 0, us = 0, uv = maxc;
  if (minc != maxc) {
    float cr = (float)(maxc - minc), s = cr / (float)maxc;
    float rc = (float)(maxc - R) / cr, gc = (float)(maxc - G) / cr, bc = (float)(maxc - B) / cr, h;
    if (R == maxc) h = bc - gc; /* (Pillow adds the constants in double, then stores a float) */
    else if (G == maxc) h = (float)(2.0 + rc - bc);
    else h = (float)(4.0 + gc - rc);
    h = (float)fmod(h / 6.0 + 1.0, 1.0);
    uh = clip8i((int)(h * 255.0));
    us = clip8i((int)(s * 255.0));
  }
  uh = (unsigned char)(uh + shift);
  if (us == 0) {
    *r = *g = *b = uv;
    return;
  }
  int i = (int)floor((float)uh * 6.0 / 255.0);
  float f = (float)((float)uh * 6.0 / 255.0 - (float)i), fs = (float)(us / 255.0);
  unsigned char p = clip8i((int)round(uv * (1.0 - fs))), q = clip8i((int)round(uv * (1.0 - fs * f)));
  unsigned char t = clip8i((int)round(uv * (1.0 - fs * (1.0 - f))));
  unsigned char o[6][3] = { { uv, t, p }, { q, uv, p }, { p, uv, t }, { p, q, uv }, { t, p, uv }, { uv, p, q } };
  *r = o[i % 6][0], *g = o[i % 6][1], *b = o[i % 6][2];
}

/* torchvision's _rgb2hsv, hue moved, _hsv2rgb ([0, 1]) in the image's dtype: T float with the f-suffixed maths, or
 * double */
#define HUE_PIXEL(T, NAME, MAX, MIN, FLOOR, FMOD)                                                 \
  static void NAME(T *r, T *g, T *b, T shift) {                                                   \
    T R = *r, G = *g, B = *b;                                                                     \
    T maxc = MAX(R, MAX(G, B)), minc = MIN(R, MIN(G, B));                                         \
    T cr = maxc - minc, eq = maxc == minc;                                                        \
    T s = cr / (eq ? (T)1 : maxc), crd = eq ? (T)1 : cr;                                          \
    T rc = (maxc - R) / crd, gc = (maxc - G) / crd, bc = (maxc - B) / crd;                        \
    T hr = maxc == R ? bc - gc : (T)0;                                                            \
    T hg = (maxc == G && maxc != R) ? (T)2 + rc - bc : (T)0;                                      \
    T hb = (maxc != G && maxc != R) ? (T)4 + gc - rc : (T)0;                                      \
    T h = FMOD((hr + hg + hb) / (T)6 + (T)1, (T)1);                                               \
    h = FMOD(h + shift, (T)1);                                                                    \
    if (h < 0) h += (T)1;                                                                         \
    T v = maxc, hi = FLOOR(h * (T)6), f = h * (T)6 - hi;                                          \
    int i = (int)hi % 6;                                                                          \
    T p = MIN(MAX(v * ((T)1 - s), (T)0), (T)1), q = MIN(MAX(v * ((T)1 - s * f), (T)0), (T)1);     \
    T t = MIN(MAX(v * ((T)1 - s * ((T)1 - f)), (T)0), (T)1);                                      \
    T o[6][3] = { { v, t, p }, { q, v, p }, { p, v, t }, { p, q, v }, { t, p, v }, { v, p, q } }; \
    *r = o[i][0], *g = o[i][1], *b = o[i][2];                                                     \
  }
HUE_PIXEL(float, hue_pixel_f32, fmaxf, fminf, floorf, fmodf)
HUE_PIXEL(double, hue_pixel_f64, fmax, fmin, floor, fmod)

/* a double image's pixel through the 8-bit path: its values are whole numbers 0..255, exact in float */
static void hue_pixel8_f64(double *r, double *g, double *b, unsigned shift) {
  float R = (float)*r, G = (float)*g, B = (float)*b;
  hue_pixel8(&R, &G, &B, shift);
  *r = R, *g = G, *b = B;
}

lt_tensor *lt_vision_adjust_hue(lt_ctx *c, lt_tensor *img, double hue_factor, int pixels) {
  if (!(hue_factor >= -0.5 && hue_factor <= 0.5)) {
    lt_fail(c, "adjust_hue: hue_factor %g is not in [-0.5, 0.5]", hue_factor);
    return NULL;
  }
  lt_tensor *x = lt_vision_image_arg(c, "adjust_hue", img);
  if (!x) return NULL;
  if (x->shape[0] == 1) return x; /* gray images have no hue (torchvision returns them as they are) */
  if (x->shape[0] != 3) {
    lt_fail(c, "adjust_hue: expected an image of 1 or 3 channels, got %lld", (long long)x->shape[0]);
    lt_tensor_release(x);
    return NULL;
  }
  lt_tensor *out = lt_tensor_new_like(c, x);
  size_t es = lt_dtype_size(x->dtype);
  if (out)
    memcpy((char *)out->storage->data + out->offset * es, (char *)x->storage->data + x->offset * es,
           (size_t)lt_numel(x) * es);
  lt_tensor_release(x);
  if (!out) return NULL;
  int64_t np = out->shape[1] * out->shape[2];
  /* numpy's np.uint8(hue_factor * 255): truncation, then modulo 256 */
  unsigned shift = (unsigned)((int)(hue_factor * 255.0) & 255);
  if (out->dtype == LT_F64) {
    double *p = lt_f64(out);
    for (int64_t i = 0; i < np; i++) {
      if (pixels) hue_pixel8_f64(p + i, p + np + i, p + 2 * np + i, shift);
      else hue_pixel_f64(p + i, p + np + i, p + 2 * np + i, hue_factor);
    }
    return out;
  }
  float *p = lt_f32(out);
  for (int64_t i = 0; i < np; i++) {
    if (pixels) hue_pixel8(p + i, p + np + i, p + 2 * np + i, shift);
    else hue_pixel_f32(p + i, p + np + i, p + 2 * np + i, (float)hue_factor);
  }
  return out;
}

/* torchvision's _get_gaussian_kernel1d in float32 */
static void gauss1d(float *k, int n, double sigma) {
  float half = (float)(n - 1) * 0.5f, sum = 0.0f;
  for (int i = 0; i < n; i++) {
    float x = n == 1 ? -half : -half + (2.0f * half) * (float)i / (float)(n - 1);
    float xs = x / (float)sigma;
    k[i] = expf(-0.5f * xs * xs);
    sum += k[i];
  }
  for (int i = 0; i < n; i++) k[i] /= sum;
}

lt_tensor *lt_vision_gaussian_blur(lt_ctx *c, lt_tensor *img, int kx, int ky, double sx, double sy, int pixels) {
  if (kx < 1 || ky < 1 || kx % 2 == 0 || ky % 2 == 0 || kx > 1023 || ky > 1023) {
    lt_fail(c, "gaussian_blur: kernel_size (%d, %d) must be odd and positive (at most 1023)", kx, ky);
    return NULL;
  }
  if (!(sx > 0 && sy > 0) || !isfinite(sx) || !isfinite(sy)) {
    lt_fail(c, "gaussian_blur: sigma (%g, %g) must be positive and finite", sx, sy);
    return NULL;
  }
  lt_tensor *x = lt_vision_image_arg(c, "gaussian_blur", img);
  if (!x) return NULL;
  int64_t h = x->shape[1], w = x->shape[2];
  if (kx / 2 >= w || ky / 2 >= h) {
    lt_fail(c,
            "gaussian_blur: kernel_size (%d, %d) needs an image larger than half of it (reflect padding), got "
            "%lld x %lld pixels",
            kx, ky, (long long)h, (long long)w);
    lt_tensor_release(x);
    return NULL;
  }
  int64_t pad[4] = { kx / 2, ky / 2, kx / 2, ky / 2 };
  double zero = 0.0;
  lt_tensor *p = lt_vision_pad(c, x, pad, LT_PAD_REFLECT, &zero, 1);
  lt_tensor_release(x);
  if (!p) return NULL;
  float kxs[1023], kys[1023];
  gauss1d(kxs, kx, sx);
  gauss1d(kys, ky, sy);
  int64_t ch = p->shape[0], ph = p->shape[1], pw = p->shape[2];
  int64_t shape[3] = { ch, h, w };
  lt_tensor *out = lt_tensor_new(c, p->dtype, 3, shape);
  /* the 2-D kernel is the outer product ky x kx, summed as torchvision's conv2d does it: in float32 for float32
   * images and for pixel images of either dtype (torchvision blurs a PIL image as a float32 tensor); for float64
   * images torchvision casts the float32 1-D kernels to double and sums in double. ACC is the sum's type. */
#define BLUR_PLANES(T, GET, ACC)                                                            \
  do {                                                                                      \
    const T *s = GET(p);                                                                    \
    T *o = GET(out);                                                                        \
    for (int64_t k = 0; k < ch; k++)                                                        \
      for (int64_t y = 0; y < h; y++)                                                       \
        for (int64_t xx = 0; xx < w; xx++) {                                                \
          ACC acc = 0;                                                                      \
          for (int i = 0; i < ky; i++) {                                                    \
            const T *row = s + (k * ph + y + i) * pw + xx;                                  \
            for (int j = 0; j < kx; j++) acc += (ACC)kys[i] * (ACC)kxs[j] * (ACC)row[j];    \
          }                                                                                 \
          o[(k * h + y) * w + xx] = (T)(pixels ? fmin(fmax(round(acc), 0.0), 255.0) : acc); \
        }                                                                                   \
  } while (0)
  if (out && out->dtype == LT_F64 && !pixels) BLUR_PLANES(double, lt_f64, double);
  else if (out && out->dtype == LT_F64) BLUR_PLANES(double, lt_f64, float);
  else if (out) BLUR_PLANES(float, lt_f32, float);
#undef BLUR_PLANES
  lt_tensor_release(p);
  return out;
}
