/*
 * nn_conv.c — 2-D convolution by im2col + GEMM, forward and backward side by side.
 *
 * Per batch item the input plane stack [C, H, W] is unfolded into col [C*kh*kw, Ho*Wo] (one buffer,
 * reused for every item), then out_n [O, Ho*Wo] = W [O, C*kh*kw] @ col (+ bias preloaded, beta = 1).
 * Backward: gW += g_n @ col^T, gcol = W^T @ g_n folded back (col2im) into gx_n, gb = sums of g.
 * A 1x1 kernel with stride 1 and no padding skips the unfolding (col is the input itself).
 */
#include <string.h>

#include "lt_errors.h"
#include "lt_nn.h"

typedef struct conv_geom {
  int64_t N, C, H, W, O, KH, KW, SH, SW, PH, PW, HO, WO;
} conv_geom;
_Static_assert(sizeof(conv_geom) <= sizeof(((lt_node *)0)->i), "conv_geom must fit in a node's integer slots");

static int64_t geom_k(const conv_geom *g) { return g->C * g->KH * g->KW; }
static int64_t geom_p(const conv_geom *g) { return g->HO * g->WO; }
static int geom_direct(const conv_geom *g) {
  return g->KH == 1 && g->KW == 1 && g->SH == 1 && g->SW == 1 && g->PH == 0 && g->PW == 0;
}

/* range of output columns ow whose input column ow*S - P + k lies in [0, W) */
static void valid_range(int64_t k, int64_t S, int64_t P, int64_t W, int64_t WO, int64_t *lo, int64_t *hi) {
  int64_t a = P - k; /* need ow*S >= a */
  int64_t l = a <= 0 ? 0 : (a + S - 1) / S;
  int64_t b = W - 1 + P - k; /* need ow*S <= b */
  int64_t h = b < 0 ? 0 : b / S + 1;
  if (h > WO) h = WO;
  if (l > h) l = h;
  *lo = l;
  *hi = h;
}

static void im2col(const conv_geom *g, const float *x, float *col) {
  const int64_t P = geom_p(g);
  for (int64_t ch = 0; ch < g->C; ch++)
    for (int64_t ki = 0; ki < g->KH; ki++)
      for (int64_t kj = 0; kj < g->KW; kj++) {
        float *row = col + ((ch * g->KH + ki) * g->KW + kj) * P;
        int64_t lo, hi;
        valid_range(kj, g->SW, g->PW, g->W, g->WO, &lo, &hi);
        for (int64_t oh = 0; oh < g->HO; oh++) {
          float *dst = row + oh * g->WO;
          int64_t ih = oh * g->SH - g->PH + ki;
          if (ih < 0 || ih >= g->H) { memset(dst, 0, sizeof(float) * (size_t)g->WO); continue; }
          const float *src = x + (ch * g->H + ih) * g->W - g->PW + kj;
          for (int64_t ow = 0; ow < lo; ow++) dst[ow] = 0;
          if (g->SW == 1) memcpy(dst + lo, src + lo, sizeof(float) * (size_t)(hi - lo));
          else
            for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow * g->SW];
          for (int64_t ow = hi; ow < g->WO; ow++) dst[ow] = 0;
        }
      }
}

/* the adjoint of im2col: gx += fold(col) (gx must start zeroed) */
static void col2im(const conv_geom *g, const float *col, float *gx) {
  const int64_t P = geom_p(g);
  for (int64_t ch = 0; ch < g->C; ch++)
    for (int64_t ki = 0; ki < g->KH; ki++)
      for (int64_t kj = 0; kj < g->KW; kj++) {
        const float *row = col + ((ch * g->KH + ki) * g->KW + kj) * P;
        int64_t lo, hi;
        valid_range(kj, g->SW, g->PW, g->W, g->WO, &lo, &hi);
        for (int64_t oh = 0; oh < g->HO; oh++) {
          int64_t ih = oh * g->SH - g->PH + ki;
          if (ih < 0 || ih >= g->H) continue;
          const float *src = row + oh * g->WO;
          float *dst = gx + (ch * g->H + ih) * g->W - g->PW + kj;
          for (int64_t ow = lo; ow < hi; ow++) dst[ow * g->SW] += src[ow];
        }
      }
}

static void geom_from_node(const lt_node *n, conv_geom *g) {
  memcpy(g, n->i, sizeof *g);
}

static int conv2d_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  lt_tensor *x = n->inputs[0], *w = n->inputs[1], *b = n->ninputs > 2 ? n->inputs[2] : NULL;
  conv_geom g;
  geom_from_node(n, &g);
  const int64_t K = geom_k(&g), P = geom_p(&g);
  const int direct = geom_direct(&g);
  int need_x = x->requires_grad, need_w = w->requires_grad, need_b = b && b->requires_grad;
  lt_tensor *gc = lt_op_contiguous(c, gout), *xc = NULL, *wc = NULL, *col = NULL, *gcol = NULL;
  lt_tensor *gx = NULL, *gw = NULL, *gb = NULL;
  int64_t colshape[2] = { K, P };
  if (!gc) goto fail;
  if (need_w && !(xc = lt_op_contiguous(c, x))) goto fail;
  if (need_x && !(wc = lt_op_contiguous(c, w))) goto fail;
  if (need_w && !direct && !(col = lt_tensor_new(c, LT_F32, 2, colshape))) goto fail;
  if (need_x && !direct && !(gcol = lt_tensor_new(c, LT_F32, 2, colshape))) goto fail;
  if (need_x && !(gx = lt_tensor_zeros(c, LT_F32, 4, x->shape))) goto fail;
  if (need_w && !(gw = lt_tensor_zeros(c, LT_F32, 4, w->shape))) goto fail;
  const float *pg = lt_f32(gc);
  for (int64_t i = 0; i < g.N; i++) {
    const float *gi = pg + i * g.O * P;
    if (need_w) {
      const float *xi = lt_f32(xc) + i * g.C * g.H * g.W;
      const float *cp = direct ? xi : lt_f32(col);
      if (!direct) im2col(&g, xi, lt_f32(col));
      if (lt_gemm(c, 0, 1, g.O, K, P, 1.0f, gi, P, cp, P, 1.0f, lt_f32(gw), K)) goto fail;
    }
    if (need_x) {
      float *gxi = lt_f32(gx) + i * g.C * g.H * g.W;
      float *gp = direct ? gxi : lt_f32(gcol);
      if (lt_gemm(c, 1, 0, K, P, g.O, 1.0f, lt_f32(wc), K, gi, P, 0.0f, gp, P)) goto fail;
      if (!direct) col2im(&g, gp, gxi);
    }
  }
  if (need_b) {
    if (!(gb = lt_tensor_zeros(c, LT_F32, 1, &g.O))) goto fail;
    float *pb = lt_f32(gb);
    for (int64_t i = 0; i < g.N; i++)
      for (int64_t o = 0; o < g.O; o++) {
        const float *r = pg + (i * g.O + o) * P;
        double s = 0;
        for (int64_t p = 0; p < P; p++) s += r[p];
        pb[o] += (float)s;
      }
  }
  gin[0] = gx;
  gin[1] = gw;
  if (n->ninputs > 2) gin[2] = gb;
  lt_tensor_release(gc); lt_tensor_release(xc); lt_tensor_release(wc);
  lt_tensor_release(col); lt_tensor_release(gcol);
  return LT_OK;
fail:
  lt_tensor_release(gc); lt_tensor_release(xc); lt_tensor_release(wc);
  lt_tensor_release(col); lt_tensor_release(gcol);
  lt_tensor_release(gx); lt_tensor_release(gw); lt_tensor_release(gb);
  return LT_ERR;
}

lt_tensor *lt_nn_conv2d(lt_ctx *c, lt_tensor *x, lt_tensor *w, lt_tensor *b, int sh, int sw, int ph, int pw) {
  char b1[128], b2[128];
  if (lt_check_dtype(c, "conv2d", "input", x, LT_F32) || lt_check_dtype(c, "conv2d", "weight", w, LT_F32))
    return NULL;
  if (b && lt_check_dtype(c, "conv2d", "bias", b, LT_F32)) return NULL;
  if (w->ndim != 4) {
    lt_fail(c, "conv2d: weight must be 4-D [out_channels x in_channels x kh x kw], got %s", lt_shape_str(w, b1, sizeof b1));
    return NULL;
  }
  if (x->ndim != 4) {
    lt_fail(c, "conv2d: input must be 4-D [batch x channels x height x width], got %s", lt_shape_str(x, b1, sizeof b1));
    return NULL;
  }
  if (x->shape[1] != w->shape[1]) {
    lt_fail(c, "conv2d: input has %lld channels, expected %lld (input %s, weight %s)", (long long)x->shape[1],
            (long long)w->shape[1], lt_shape_str(x, b1, sizeof b1), lt_shape_str(w, b2, sizeof b2));
    return NULL;
  }
  if (sh < 1 || sw < 1 || ph < 0 || pw < 0) {
    lt_fail(c, "conv2d: stride must be >= 1 and padding >= 0, got stride %dx%d, padding %dx%d", sh, sw, ph, pw);
    return NULL;
  }
  if (b && (b->ndim != 1 || b->shape[0] != w->shape[0])) {
    lt_fail(c, "conv2d: bias must be [%lld], got %s", (long long)w->shape[0], lt_shape_str(b, b1, sizeof b1));
    return NULL;
  }
  conv_geom g = { x->shape[0], x->shape[1], x->shape[2], x->shape[3], w->shape[0], w->shape[2], w->shape[3],
                  sh, sw, ph, pw, 0, 0 };
  if (g.H + 2 * g.PH < g.KH || g.W + 2 * g.PW < g.KW) {
    lt_fail(c, "conv2d: kernel %lldx%lld is larger than the padded input %lldx%lld (input %s)", (long long)g.KH,
            (long long)g.KW, (long long)(g.H + 2 * g.PH), (long long)(g.W + 2 * g.PW), lt_shape_str(x, b1, sizeof b1));
    return NULL;
  }
  g.HO = (g.H + 2 * g.PH - g.KH) / g.SH + 1;
  g.WO = (g.W + 2 * g.PW - g.KW) / g.SW + 1;
  const int64_t K = geom_k(&g), P = geom_p(&g);
  const int direct = geom_direct(&g);
  int64_t oshape[4] = { g.N, g.O, g.HO, g.WO }, colshape[2] = { K, P };
  lt_tensor *out = lt_tensor_new(c, LT_F32, 4, oshape);
  lt_tensor *xc = out ? lt_op_contiguous(c, x) : NULL;
  lt_tensor *wc = xc ? lt_op_contiguous(c, w) : NULL;
  lt_tensor *bc = wc && b ? lt_op_contiguous(c, b) : NULL;
  lt_tensor *col = wc && !direct ? lt_tensor_new(c, LT_F32, 2, colshape) : NULL;
  if (!wc || (b && !bc) || (!direct && !col)) goto fail;
  for (int64_t i = 0; i < g.N; i++) {
    const float *xi = lt_f32(xc) + i * g.C * g.H * g.W;
    float *oi = lt_f32(out) + i * g.O * P;
    if (!direct) im2col(&g, xi, lt_f32(col));
    if (b) {
      const float *pb = lt_f32(bc);
      for (int64_t o = 0; o < g.O; o++)
        for (int64_t p = 0; p < P; p++) oi[o * P + p] = pb[o];
    }
    if (lt_gemm(c, 0, 0, g.O, P, K, 1.0f, lt_f32(wc), K, direct ? xi : lt_f32(col), P, b ? 1.0f : 0.0f, oi, P))
      goto fail;
  }
  lt_tensor_release(xc); lt_tensor_release(wc); lt_tensor_release(bc); lt_tensor_release(col);
  lt_tensor *ins[3] = { x, w, b };
  lt_node *nd;
  if (lt_record(c, out, "conv2d", conv2d_backward, b ? 3 : 2, ins, &nd)) { lt_tensor_release(out); return NULL; }
  if (nd) memcpy(nd->i, &g, sizeof g);
  return out;
fail:
  lt_tensor_release(out); lt_tensor_release(xc); lt_tensor_release(wc); lt_tensor_release(bc);
  lt_tensor_release(col);
  return NULL;
}
