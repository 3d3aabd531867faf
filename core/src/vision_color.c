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

/* torchvision's _rgb2hsv, hue moved, _hsv2rgb (float32, [0, 1]) */
static void hue_pixelf(float *r, float *g, float *b, float shift) {
  float R = *r, G = *g, B = *b;
  float maxc = fmaxf(R, fmaxf(G, B)), minc = fminf(R, fminf(G, B));
  float cr = maxc - minc, eq = maxc == minc;
  float s = cr / (eq ? 1.0f : maxc), crd = eq ? 1.0f : cr;
  float rc = (maxc - R) / crd, gc = (maxc - G) / crd, bc = (maxc - B) / crd;
  float hr = maxc == R ? bc - gc : 0.0f;
  float hg = (maxc == G && maxc != R) ? 2.0f + rc - bc : 0.0f;
  float hb = (maxc != G && maxc != R) ? 4.0f + gc - rc : 0.0f;
  float h = fmodf((hr + hg + hb) / 6.0f + 1.0f, 1.0f);
  h = fmodf(h + shift, 1.0f);
  if (h < 0) h += 1.0f;
  float v = maxc, hi = floorf(h * 6.0f), f = h * 6.0f - hi;
  int i = (int)hi % 6;
  float p = fminf(fmaxf(v * (1.0f - s), 0.0f), 1.0f), q = fminf(fmaxf(v * (1.0f - s * f), 0.0f), 1.0f);
  float t = fminf(fmaxf(v * (1.0f - s * (1.0f - f)), 0.0f), 1.0f);
  float o[6][3] = { { v, t, p }, { q, v, p }, { p, v, t }, { p, q, v }, { t, p, v }, { v, p, q } };
  *r = o[i][0], *g = o[i][1], *b = o[i][2];
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
  if (out) memcpy(lt_f32(out), lt_f32(x), (size_t)lt_numel(x) * sizeof(float));
  lt_tensor_release(x);
  if (!out) return NULL;
  int64_t np = out->shape[1] * out->shape[2];
  float *p = lt_f32(out);
  /* numpy's np.uint8(hue_factor * 255): truncation, then modulo 256 */
  unsigned shift = (unsigned)((int)(hue_factor * 255.0) & 255);
  for (int64_t i = 0; i < np; i++) {
    if (pixels) hue_pixel8(p + i, p + np + i, p + 2 * np + i, shift);
    else hue_pixelf(p + i, p + np + i, p + 2 * np + i, (float)hue_factor);
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
  lt_tensor *out = lt_tensor_new(c, LT_F32, 3, shape);
  if (out) {
    const float *s = lt_f32(p);
    float *o = lt_f32(out);
    /* the 2-D kernel is the outer product ky x kx, summed as torchvision's conv2d does it */
    for (int64_t k = 0; k < ch; k++)
      for (int64_t y = 0; y < h; y++)
        for (int64_t xx = 0; xx < w; xx++) {
          float acc = 0.0f;
          for (int i = 0; i < ky; i++) {
            const float *row = s + (k * ph + y + i) * pw + xx;
            for (int j = 0; j < kx; j++) acc += kys[i] * kxs[j] * row[j];
          }
          o[(k * h + y) * w + xx] = pixels ? fminf(fmaxf(roundf(acc), 0.0f), 255.0f) : acc;
        }
  }
  lt_tensor_release(p);
  return out;
}
