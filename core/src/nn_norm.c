/*
 * nn_norm.c — batch normalisation and layer normalisation, forward and backward, statistics in double.
 *
 * batch_norm: x [N, C, ...] seen as [N, C, inner]; per channel over M = N*inner values. Training uses
 * the batch mean and biased variance and updates the running stats in place (unbiased variance,
 * `momentum` is the weight of the new value); eval uses the running stats. layer_norm: the last k dims
 * are one row of M values. Both save (mean, 1/sqrt(var+eps)) per group for the backward.
 */
#include <math.h>
#include <string.h>

#include "lt_errors.h"
#include "lt_nn.h"
#include "lt_simd.h"

int lt_nn_check_norm_vec(lt_ctx *c, const char *op, const char *what, const lt_tensor *t, int64_t n, const char *per,
                         const lt_tensor *x) {
  char b1[128], b2[128];
  if (!t) return LT_OK;
  if (lt_check_dtype(c, op, what, t, LT_F32)) return LT_ERR;
  if (t->ndim != 1 || t->shape[0] != n)
    return lt_fail(c, "%s: %s must be [%lld] (one per %s), got %s (input %s)", op, what, (long long)n, per,
                   lt_shape_str(t, b1, sizeof b1), lt_shape_str(x, b2, sizeof b2));
  return LT_OK;
}

static inline float vec_at(const lt_tensor *t, int64_t i) { return t ? lt_f32(t)[i * t->stride[0]] : 1.0f; }

/* The buffers of a norm's backward (node inputs {x, w, b}): gout and x made contiguous (gc, xc), and a gradient for
 * each input that wants one (NULL for the others), gw and gb zeroed when the backward accumulates into them. */
typedef struct norm_grads {
  lt_tensor *gc, *xc, *gx, *gw, *gb;
} norm_grads;

/* LT_ERR, with nothing held, when a buffer cannot be allocated */
static int norm_grads_new(lt_ctx *c, const lt_node *n, lt_tensor *gout, int zero_wb, norm_grads *r) {
  lt_tensor *x = n->inputs[0], *w = n->inputs[1], *b = n->inputs[2];
  lt_tensor *(*wb_new)(lt_ctx *, lt_dtype, int, const int64_t *) = zero_wb ? lt_tensor_zeros : lt_tensor_new;
  norm_grads g;
  g.gc = lt_op_contiguous(c, gout);
  g.xc = g.gc ? lt_op_contiguous(c, x) : NULL;
  g.gx = g.xc && x->requires_grad ? lt_tensor_new(c, LT_F32, x->ndim, x->shape) : NULL;
  g.gw = g.xc && w && w->requires_grad ? wb_new(c, LT_F32, w->ndim, w->shape) : NULL;
  g.gb = g.xc && b && b->requires_grad ? wb_new(c, LT_F32, b->ndim, b->shape) : NULL;
  if (!g.xc || (x->requires_grad && !g.gx) || (w && w->requires_grad && !g.gw) || (b && b->requires_grad && !g.gb)) {
    lt_tensor_release(g.gc);
    lt_tensor_release(g.xc);
    lt_tensor_release(g.gx);
    lt_tensor_release(g.gw);
    lt_tensor_release(g.gb);
    return LT_ERR;
  }
  *r = g;
  return LT_OK;
}

/* hands the gradients to the engine (gin) and releases the contiguous copies */
static int norm_grads_done(const norm_grads *g, lt_tensor **gin) {
  lt_tensor_release(g->gc);
  lt_tensor_release(g->xc);
  gin[0] = g->gx;
  gin[1] = g->gw;
  gin[2] = g->gb;
  return LT_OK;
}

/* ---- batch_norm --------------------------------------------------------------------------------- */

/* node: inputs {x, w, b}; i = {training, N, C, inner}; saved[0] = [2, C]: mean, invstd */
static int batch_norm_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  const lt_tensor *w = n->inputs[1];
  int training = (int)n->i[0];
  int64_t N = n->i[1], C = n->i[2], inner = n->i[3], M = N * inner;
  const float *mean = lt_f32(n->saved[0]), *invstd = mean + C;
  norm_grads ng; /* gw, gb: [C], each channel's written once */
  if (norm_grads_new(c, n, gout, 0, &ng)) return LT_ERR;
  lt_tensor *gx = ng.gx, *gw = ng.gw, *gb = ng.gb;
  const float *px = lt_f32(ng.xc), *pg = lt_f32(ng.gc);
  for (int64_t ch = 0; ch < C; ch++) {
    double m = mean[ch], is = invstd[ch], sg = 0, sgx = 0;
    for (int64_t i = 0; i < N; i++) {
      const float *xr = px + (i * C + ch) * inner, *gr = pg + (i * C + ch) * inner;
      for (int64_t k = 0; k < inner; k++) {
        sg += gr[k];
        sgx += gr[k] * ((xr[k] - m) * is);
      }
    }
    if (gw) lt_f32(gw)[ch] = (float)sgx;
    if (gb) lt_f32(gb)[ch] = (float)sg;
    if (gx) {
      double scale = vec_at(w, ch) * is;
      float *ox = lt_f32(gx);
      for (int64_t i = 0; i < N; i++) {
        const float *xr = px + (i * C + ch) * inner, *gr = pg + (i * C + ch) * inner;
        float *o = ox + (i * C + ch) * inner;
        for (int64_t k = 0; k < inner; k++) {
          if (training) {
            double xh = (xr[k] - m) * is;
            o[k] = (float)(scale * (gr[k] - sg / (double)M - xh * sgx / (double)M));
          } else {
            o[k] = (float)(scale * gr[k]);
          }
        }
      }
    }
  }
  return norm_grads_done(&ng, gin);
}

lt_tensor *lt_nn_batch_norm(lt_ctx *c, lt_tensor *x, lt_tensor *rm, lt_tensor *rv, lt_tensor *w, lt_tensor *b,
                            int training, double momentum, double eps) {
  char b1[128];
  const char *op = "batch_norm";
  if (lt_check_dtype(c, op, "input", x, LT_F32)) return NULL;
  if (x->ndim < 2) {
    lt_fail(c, "batch_norm: input must be [batch x channels] or [batch x channels x ...], got %s",
            lt_shape_str(x, b1, sizeof b1));
    return NULL;
  }
  int64_t N = x->shape[0], C = x->shape[1], inner = 1;
  for (int d = 2; d < x->ndim; d++) inner *= x->shape[d];
  int64_t M = N * inner;
  if (lt_nn_check_norm_vec(c, op, "weight", w, C, "channel", x) ||
      lt_nn_check_norm_vec(c, op, "bias", b, C, "channel", x) ||
      lt_nn_check_norm_vec(c, op, "running_mean", rm, C, "channel", x) ||
      lt_nn_check_norm_vec(c, op, "running_var", rv, C, "channel", x))
    return NULL;
  if (!training && (!rm || !rv)) {
    lt_fail(c, "batch_norm: eval mode needs running_mean and running_var");
    return NULL;
  }
  if ((rm == NULL) != (rv == NULL)) {
    lt_fail(c, "batch_norm: give both running_mean and running_var, or neither");
    return NULL;
  }
  if (training && M <= 1) {
    lt_fail(c, "batch_norm: expected more than 1 value per channel when training, got input %s",
            lt_shape_str(x, b1, sizeof b1));
    return NULL;
  }
  int64_t sshape[2] = { 2, C };
  lt_tensor *xc = lt_op_contiguous(c, x);
  lt_tensor *stats = xc ? lt_tensor_new(c, LT_F32, 2, sshape) : NULL;
  lt_tensor *out = stats ? lt_tensor_new(c, LT_F32, x->ndim, x->shape) : NULL;
  if (!out) {
    lt_tensor_release(xc);
    lt_tensor_release(stats);
    return NULL;
  }
  const float *px = lt_f32(xc);
  float *po = lt_f32(out), *mean = lt_f32(stats), *invstd = mean + C;
  for (int64_t ch = 0; ch < C; ch++) {
    double m, v;
    if (training) {
      double s = 0, ss = 0;
      for (int64_t i = 0; i < N; i++) {
        const float *xr = px + (i * C + ch) * inner;
        for (int64_t k = 0; k < inner; k++) s += xr[k];
      }
      m = s / (double)M;
      for (int64_t i = 0; i < N; i++) {
        const float *xr = px + (i * C + ch) * inner;
        for (int64_t k = 0; k < inner; k++) ss += (xr[k] - m) * (xr[k] - m);
      }
      v = ss / (double)M;
      if (rm) {
        float *prm = lt_f32(rm) + ch * rm->stride[0], *prv = lt_f32(rv) + ch * rv->stride[0];
        *prm = (float)((1 - momentum) * *prm + momentum * m);
        *prv = (float)((1 - momentum) * *prv + momentum * ss / (double)(M - 1));
      }
    } else {
      m = vec_at(rm, ch);
      v = vec_at(rv, ch);
    }
    double is = 1.0 / sqrt(v + eps);
    mean[ch] = (float)m;
    invstd[ch] = (float)is;
    double wc = w ? vec_at(w, ch) : 1.0, bc = b ? lt_f32(b)[ch * b->stride[0]] : 0.0;
    for (int64_t i = 0; i < N; i++) {
      const float *xr = px + (i * C + ch) * inner;
      float *o = po + (i * C + ch) * inner;
      for (int64_t k = 0; k < inner; k++) o[k] = (float)((xr[k] - m) * is * wc + bc);
    }
  }
  lt_tensor_release(xc);
  if (training && rm) { /* the running statistics were updated in place */
    lt_mark_modified(rm);
    lt_mark_modified(rv);
  }
  lt_tensor *ins[3] = { x, w, b };
  lt_node *nd;
  if (lt_record(c, out, op, batch_norm_backward, 3, ins, &nd)) goto fail;
  if (nd) {
    nd->reads = LT_READS(0) | LT_READS(1); /* x and the weight, not the bias */
    nd->i[0] = training;
    nd->i[1] = N;
    nd->i[2] = C;
    nd->i[3] = inner;
    lt_node_save(nd, 0, stats);
  }
  lt_tensor_release(stats);
  return out;
fail:
  lt_tensor_release(stats);
  lt_tensor_release(out);
  return NULL;
}

/* ---- layer_norm --------------------------------------------------------------------------------- */

/* One row of M elements: mean and 1/std (the variance from the deviations, two passes), then
 * y = (x - mean) / std * w + b. In float with the 16-lane sums of lt_simd.h (the double sums of a row are
 * scalar chains: the GPT's [1024 x 128] layer norm ran at ~2 ns an element); w, b may be NULL. */
LT_VECTOR_FN static void ln_row_forward(const float *x, float *y, int64_t M, const float *w, const float *b, double eps,
                                        float *mean, float *invstd) {
  const float m = (float)(lt_sum_f32(x, M) / (double)M);
  float acc[16] = { 0 }, tail = 0;
  int64_t j = 0;
  for (; j + 16 <= M; j += 16)
    for (int k = 0; k < 16; k++) acc[k] += (x[j + k] - m) * (x[j + k] - m);
  for (; j < M; j++) tail += (x[j] - m) * (x[j] - m);
  double ss = tail;
  for (int k = 0; k < 16; k++) ss += acc[k];
  const float is = (float)(1.0 / sqrt(ss / (double)M + eps));
  *mean = m;
  *invstd = is;
  if (w && b)
    for (j = 0; j < M; j++) y[j] = (x[j] - m) * is * w[j] + b[j];
  else if (w)
    for (j = 0; j < M; j++) y[j] = (x[j] - m) * is * w[j];
  else if (b)
    for (j = 0; j < M; j++) y[j] = (x[j] - m) * is + b[j];
  else
    for (j = 0; j < M; j++) y[j] = (x[j] - m) * is;
}

/* Backward of one row: with xh = (x - mean) * is and gh = g * w, dx = is * (gh - mean(gh) - xh * mean(gh * xh));
 * gw += g * xh and gb += g (both accumulate over the rows; NULL when not wanted; dx NULL likewise). */
LT_VECTOR_FN static void ln_row_backward(const float *x, const float *g, float *dx, int64_t M, const float *w, float m,
                                         float is, float *gw, float *gb) {
  float a1[16] = { 0 }, a2[16] = { 0 }, t1 = 0, t2 = 0;
  int64_t j = 0;
  for (; j + 16 <= M; j += 16)
    for (int k = 0; k < 16; k++) {
      float xh = (x[j + k] - m) * is, gh = g[j + k] * (w ? w[j + k] : 1.0f);
      a1[k] += gh;
      a2[k] += gh * xh;
    }
  for (; j < M; j++) {
    float xh = (x[j] - m) * is, gh = g[j] * (w ? w[j] : 1.0f);
    t1 += gh;
    t2 += gh * xh;
  }
  double s1 = t1, s2 = t2;
  for (int k = 0; k < 16; k++) {
    s1 += a1[k];
    s2 += a2[k];
  }
  if (gw)
    for (j = 0; j < M; j++) gw[j] += g[j] * ((x[j] - m) * is);
  if (gb)
    for (j = 0; j < M; j++) gb[j] += g[j];
  if (dx) {
    const float c1 = (float)(s1 / (double)M), c2 = (float)(s2 / (double)M);
    for (j = 0; j < M; j++) {
      float xh = (x[j] - m) * is, gh = g[j] * (w ? w[j] : 1.0f);
      dx[j] = is * (gh - c1 - xh * c2);
    }
  }
}

/* node: inputs {x, w, b}; i = {R, M}; saved[0] = [2, R]: mean, invstd; w, b contiguous copies in saved[1..2] */
static int layer_norm_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  int64_t R = n->i[0], M = n->i[1];
  const float *mean = lt_f32(n->saved[0]), *invstd = mean + R;
  const float *pw = n->saved[1] ? lt_f32(n->saved[1]) : NULL;
  norm_grads ng; /* gw, gb zeroed: every row adds into them */
  if (norm_grads_new(c, n, gout, 1, &ng)) return LT_ERR;
  const float *px = lt_f32(ng.xc), *pg = lt_f32(ng.gc);
  float *ow = ng.gw ? lt_f32(ng.gw) : NULL, *ob = ng.gb ? lt_f32(ng.gb) : NULL, *ox = ng.gx ? lt_f32(ng.gx) : NULL;
  for (int64_t r = 0; r < R; r++)
    ln_row_backward(px + r * M, pg + r * M, ox ? ox + r * M : NULL, M, pw, mean[r], invstd[r], ow, ob);
  return norm_grads_done(&ng, gin);
}

lt_tensor *lt_nn_layer_norm(lt_ctx *c, lt_tensor *x, int k, lt_tensor *w, lt_tensor *b, double eps) {
  char b1[128], b2[128];
  const char *op = "layer_norm";
  if (lt_check_dtype(c, op, "input", x, LT_F32)) return NULL;
  if (w && lt_check_dtype(c, op, "weight", w, LT_F32)) return NULL;
  if (b && lt_check_dtype(c, op, "bias", b, LT_F32)) return NULL;
  if (k < 1 || k > x->ndim) {
    lt_fail(c, "layer_norm: cannot normalise over the last %d dims of an input of shape %s", k,
            lt_shape_str(x, b1, sizeof b1));
    return NULL;
  }
  const int64_t *nshape = x->shape + (x->ndim - k);
  for (int t = 0; t < 2; t++) {
    lt_tensor *p = t ? b : w;
    if (!p) continue;
    int ok = p->ndim == k;
    for (int d = 0; ok && d < k; d++) ok = p->shape[d] == nshape[d];
    if (!ok) {
      lt_fail(c, "layer_norm: %s is %s, expected the input's last %d dims %s", t ? "bias" : "weight",
              lt_shape_str(p, b1, sizeof b1), k, lt_dims_str(k, nshape, b2, sizeof b2));
      return NULL;
    }
  }
  int64_t M = 1;
  for (int d = 0; d < k; d++) M *= nshape[d];
  int64_t R = M ? lt_numel(x) / M : 0, sshape[2] = { 2, R };
  lt_tensor *xc = lt_op_contiguous(c, x);
  lt_tensor *wc = xc && w ? lt_op_contiguous(c, w) : NULL;
  lt_tensor *bc = xc && b ? lt_op_contiguous(c, b) : NULL;
  lt_tensor *stats = xc && (wc || !w) && (bc || !b) ? lt_tensor_new(c, LT_F32, 2, sshape) : NULL;
  lt_tensor *out = stats ? lt_tensor_new(c, LT_F32, x->ndim, x->shape) : NULL;
  if (!out) goto fail;
  const float *px = lt_f32(xc), *pw = wc ? lt_f32(wc) : NULL, *pb = bc ? lt_f32(bc) : NULL;
  float *po = lt_f32(out), *mean = lt_f32(stats), *invstd = mean + R;
  for (int64_t r = 0; r < R; r++) ln_row_forward(px + r * M, po + r * M, M, pw, pb, eps, mean + r, invstd + r);
  lt_tensor *ins[3] = { x, w, b };
  lt_node *nd;
  if (lt_record(c, out, op, layer_norm_backward, 3, ins, &nd)) goto fail;
  if (nd) {
    nd->reads = LT_READS(0); /* x; the weight is read from saved[1] */
    nd->i[0] = R;
    nd->i[1] = M;
    lt_node_save(nd, 0, stats);
    if (wc) lt_node_save(nd, 1, wc);
  }
  lt_tensor_release(xc);
  lt_tensor_release(wc);
  lt_tensor_release(bc);
  lt_tensor_release(stats);
  return out;
fail:
  lt_tensor_release(xc);
  lt_tensor_release(wc);
  lt_tensor_release(bc);
  lt_tensor_release(stats);
  lt_tensor_release(out);
  return NULL;
}
