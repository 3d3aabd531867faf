/*
 * nn_pool.c — 2-D max and average pooling (floor mode, optional padding), forward and backward.
 * Max pooling saves the flat position (within the H*W plane) of each window's maximum, so backward
 * is a scatter; padded cells never win. Average pooling divides like PyTorch: by the window clipped
 * to the padded input (count_include_pad) or by the number of real cells.
 */
#include <math.h>
#include <string.h>

#include "lt_errors.h"
#include "lt_nn.h"

typedef struct pool_geom { int64_t N, C, H, W, KH, KW, SH, SW, PH, PW, HO, WO, count_pad; } pool_geom;
_Static_assert(sizeof(pool_geom) <= sizeof(((lt_node *)0)->i), "pool_geom must fit in a node's integer slots");

static int pool_check(lt_ctx *c, const char *op, lt_tensor *x, int kh, int kw, int sh, int sw, int ph, int pw,
                      pool_geom *g) {
  char b1[128];
  if (lt_check_dtype(c, op, "input", x, LT_F32)) return LT_ERR;
  if (x->ndim != 4)
    return lt_fail(c, "%s: input must be 4-D [batch x channels x height x width], got %s", op,
                   lt_shape_str(x, b1, sizeof b1));
  if (kh < 1 || kw < 1 || sh < 1 || sw < 1 || ph < 0 || pw < 0)
    return lt_fail(c, "%s: kernel and stride must be >= 1 and padding >= 0, got kernel %dx%d, stride %dx%d, padding %dx%d",
                   op, kh, kw, sh, sw, ph, pw);
  if (2 * ph > kh || 2 * pw > kw)
    return lt_fail(c, "%s: padding %dx%d must be at most half the kernel %dx%d", op, ph, pw, kh, kw);
  pool_geom r = { x->shape[0], x->shape[1], x->shape[2], x->shape[3], kh, kw, sh, sw, ph, pw, 0, 0, 0 };
  if (r.H + 2 * ph < kh || r.W + 2 * pw < kw)
    return lt_fail(c, "%s: kernel %dx%d is larger than the padded input %lldx%lld (input %s)", op, kh, kw,
                   (long long)(r.H + 2 * ph), (long long)(r.W + 2 * pw), lt_shape_str(x, b1, sizeof b1));
  r.HO = (r.H + 2 * ph - kh) / sh + 1;
  r.WO = (r.W + 2 * pw - kw) / sw + 1;
  *g = r;
  return LT_OK;
}

/* ---- max ---------------------------------------------------------------------------------------- */

static int max_pool_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  pool_geom g;
  memcpy(&g, n->i, sizeof g);
  lt_tensor *gc = lt_op_contiguous(c, gout);
  lt_tensor *gx = gc ? lt_tensor_zeros(c, LT_F32, 4, n->inputs[0]->shape) : NULL;
  if (!gx) { lt_tensor_release(gc); return LT_ERR; }
  const int64_t *idx = lt_i64(n->saved[0]);
  const float *pg = lt_f32(gc);
  float *px = lt_f32(gx);
  const int64_t P = g.HO * g.WO, HW = g.H * g.W;
  for (int64_t pl = 0; pl < g.N * g.C; pl++)
    for (int64_t p = 0; p < P; p++) px[pl * HW + idx[pl * P + p]] += pg[pl * P + p];
  lt_tensor_release(gc);
  gin[0] = gx;
  return LT_OK;
}

lt_tensor *lt_nn_max_pool2d(lt_ctx *c, lt_tensor *x, int kh, int kw, int sh, int sw, int ph, int pw) {
  pool_geom g;
  if (pool_check(c, "max_pool2d", x, kh, kw, sh, sw, ph, pw, &g)) return NULL;
  int64_t oshape[4] = { g.N, g.C, g.HO, g.WO };
  lt_tensor *xc = lt_op_contiguous(c, x);
  lt_tensor *out = xc ? lt_tensor_new(c, LT_F32, 4, oshape) : NULL;
  lt_tensor *ind = out ? lt_tensor_new(c, LT_I64, 4, oshape) : NULL;
  if (!ind) { lt_tensor_release(xc); lt_tensor_release(out); return NULL; }
  const float *px = lt_f32(xc);
  float *po = lt_f32(out);
  int64_t *pi = lt_i64(ind);
  const int64_t HW = g.H * g.W;
  for (int64_t pl = 0; pl < g.N * g.C; pl++) {
    const float *plane = px + pl * HW;
    for (int64_t oh = 0; oh < g.HO; oh++) {
      int64_t h0 = oh * g.SH - g.PH, h1 = h0 + g.KH;
      if (h0 < 0) h0 = 0;
      if (h1 > g.H) h1 = g.H;
      for (int64_t ow = 0; ow < g.WO; ow++) {
        int64_t w0 = ow * g.SW - g.PW, w1 = w0 + g.KW;
        if (w0 < 0) w0 = 0;
        if (w1 > g.W) w1 = g.W;
        float best = -INFINITY;
        int64_t bi = h0 * g.W + w0;
        for (int64_t ih = h0; ih < h1; ih++)
          for (int64_t iw = w0; iw < w1; iw++) {
            float v = plane[ih * g.W + iw];
            if (v > best || isnan(v)) { best = v; bi = ih * g.W + iw; if (isnan(v)) goto done; }
          }
      done:
        po[(pl * g.HO + oh) * g.WO + ow] = best;
        pi[(pl * g.HO + oh) * g.WO + ow] = bi;
      }
    }
  }
  lt_tensor_release(xc);
  lt_node *nd;
  if (lt_record(c, out, "max_pool2d", max_pool_backward, 1, &x, &nd)) goto fail;
  if (nd) {
    memcpy(nd->i, &g, sizeof g);
    lt_node_save(nd, 0, ind);
  }
  lt_tensor_release(ind);
  return out;
fail:
  lt_tensor_release(out);
  lt_tensor_release(ind);
  return NULL;
}

/* ---- average ------------------------------------------------------------------------------------ */

/* window of output (oh, ow): clipped bounds and the divisor */
static double avg_window(const pool_geom *g, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1, int64_t *w0,
                         int64_t *w1) {
  int64_t hs = oh * g->SH - g->PH, ws = ow * g->SW - g->PW;
  int64_t he = hs + g->KH, we = ws + g->KW;
  if (he > g->H + g->PH) he = g->H + g->PH;
  if (we > g->W + g->PW) we = g->W + g->PW;
  int64_t padded = (he - hs) * (we - ws);
  if (hs < 0) hs = 0;
  if (ws < 0) ws = 0;
  if (he > g->H) he = g->H;
  if (we > g->W) we = g->W;
  *h0 = hs; *h1 = he; *w0 = ws; *w1 = we;
  return (double)(g->count_pad ? padded : (he - hs) * (we - ws));
}

static int avg_pool_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  pool_geom g;
  memcpy(&g, n->i, sizeof g);
  lt_tensor *gc = lt_op_contiguous(c, gout);
  lt_tensor *gx = gc ? lt_tensor_zeros(c, LT_F32, 4, n->inputs[0]->shape) : NULL;
  if (!gx) { lt_tensor_release(gc); return LT_ERR; }
  const float *pg = lt_f32(gc);
  float *px = lt_f32(gx);
  for (int64_t pl = 0; pl < g.N * g.C; pl++) {
    float *plane = px + pl * g.H * g.W;
    for (int64_t oh = 0; oh < g.HO; oh++)
      for (int64_t ow = 0; ow < g.WO; ow++) {
        int64_t h0, h1, w0, w1;
        double div = avg_window(&g, oh, ow, &h0, &h1, &w0, &w1);
        float v = (float)(pg[(pl * g.HO + oh) * g.WO + ow] / div);
        for (int64_t ih = h0; ih < h1; ih++)
          for (int64_t iw = w0; iw < w1; iw++) plane[ih * g.W + iw] += v;
      }
  }
  lt_tensor_release(gc);
  gin[0] = gx;
  return LT_OK;
}

lt_tensor *lt_nn_avg_pool2d(lt_ctx *c, lt_tensor *x, int kh, int kw, int sh, int sw, int ph, int pw,
                            int count_include_pad) {
  pool_geom g;
  if (pool_check(c, "avg_pool2d", x, kh, kw, sh, sw, ph, pw, &g)) return NULL;
  g.count_pad = count_include_pad != 0;
  int64_t oshape[4] = { g.N, g.C, g.HO, g.WO };
  lt_tensor *xc = lt_op_contiguous(c, x);
  lt_tensor *out = xc ? lt_tensor_new(c, LT_F32, 4, oshape) : NULL;
  if (!out) { lt_tensor_release(xc); return NULL; }
  const float *px = lt_f32(xc);
  float *po = lt_f32(out);
  for (int64_t pl = 0; pl < g.N * g.C; pl++) {
    const float *plane = px + pl * g.H * g.W;
    for (int64_t oh = 0; oh < g.HO; oh++)
      for (int64_t ow = 0; ow < g.WO; ow++) {
        int64_t h0, h1, w0, w1;
        double div = avg_window(&g, oh, ow, &h0, &h1, &w0, &w1), s = 0;
        for (int64_t ih = h0; ih < h1; ih++)
          for (int64_t iw = w0; iw < w1; iw++) s += plane[ih * g.W + iw];
        po[(pl * g.HO + oh) * g.WO + ow] = (float)(s / div);
      }
  }
  lt_tensor_release(xc);
  lt_node *nd;
  if (lt_record(c, out, "avg_pool2d", avg_pool_backward, 1, &x, &nd)) { lt_tensor_release(out); return NULL; }
  if (nd) memcpy(nd->i, &g, sizeof g);
  return out;
}
