/*
 * nn_norm.c — batch normalisation and layer normalisation, forward and backward, statistics in double.
 *
 * batch_norm: x [N, C, ...] seen as [N, C, inner]; per channel over M = N*inner values. Training uses
 * the batch mean and biased variance and updates the running stats in place (unbiased variance,
 * `momentum` is the weight of the new value); eval uses the running stats. layer_norm: the last k dims
 * are one row of M values. Both save (mean, 1/sqrt(var+eps)) per group for the backward.
 * float32 or float64: the input, weight, bias, running statistics, output and gradients share one dtype (an error
 * names both where they differ, as PyTorch refuses the mix); the kernels are written once over the element type
 * (BN_KERNELS, LN_KERNELS).
 */
#include <math.h>
#include <string.h>

#include "lt_check.h"
#include "lt_errors.h"
#include "lt_nn.h"
#include "lt_simd.h"

int lt_nn_check_norm_vec(lt_ctx *c, const char *op, const char *what, const lt_tensor *t, int64_t n, const char *per,
                         const lt_tensor *x) {
  char b1[128], b2[128];
  if (!t) return LT_OK;
  if (t->dtype != x->dtype)
    return lt_fail(c, "%s: input is %s and %s is %s: both must have the same float dtype", op, lt_dtype_name(x->dtype),
                   what, lt_dtype_name(t->dtype));
  if (t->ndim != 1 || t->shape[0] != n)
    return lt_fail(c, "%s: %s must be [%lld] (one per %s), got %s (input %s)", op, what, (long long)n, per,
                   lt_shape_str(t, b1, sizeof b1), lt_shape_str(x, b2, sizeof b2));
  return LT_OK;
}

/* element i of a 1-D float32 or float64 vector (t's dtype), or 1 when t is NULL */
static inline double vec_at(const lt_tensor *t, int64_t i) {
  if (!t) return 1.0;
  return t->dtype == LT_F64 ? lt_f64(t)[i * t->stride[0]] : (double)lt_f32(t)[i * t->stride[0]];
}

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
  g.gx = g.xc && x->requires_grad ? lt_tensor_new(c, x->dtype, x->ndim, x->shape) : NULL;
  g.gw = g.xc && w && w->requires_grad ? wb_new(c, x->dtype, w->ndim, w->shape) : NULL;
  g.gb = g.xc && b && b->requires_grad ? wb_new(c, x->dtype, b->ndim, b->shape) : NULL;
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

/* The batch norm's channel loops over element type T (S: f32 or f64, lt_S reads a tensor's data), statistics in
 * double: bn_forward_S (batch or running statistics, the running ones updated in place when training) and
 * bn_backward_S. */
// clang-format off
#define BN_KERNELS(S, T)                                                                                        \
static void bn_backward_##S(const norm_grads *ng, const lt_tensor *w, int training, int64_t N, int64_t C,          \
                            int64_t inner, const T *mean, const T *invstd) {                                       \
  const int64_t M = N * inner;                                                                                     \
  const T *px = lt_##S(ng->xc), *pg = lt_##S(ng->gc);                                                              \
  for (int64_t ch = 0; ch < C; ch++) {                                                                             \
    double m = mean[ch], is = invstd[ch], sg = 0, sgx = 0;                                                         \
    for (int64_t i = 0; i < N; i++) {                                                                              \
      const T *xr = px + (i * C + ch) * inner, *gr = pg + (i * C + ch) * inner;                                    \
      for (int64_t k = 0; k < inner; k++) {                                                                        \
        sg += gr[k];                                                                                               \
        sgx += gr[k] * ((xr[k] - m) * is);                                                                         \
      }                                                                                                            \
    }                                                                                                              \
    if (ng->gw) lt_##S(ng->gw)[ch] = (T)sgx;                                                                       \
    if (ng->gb) lt_##S(ng->gb)[ch] = (T)sg;                                                                        \
    if (!ng->gx) continue;                                                                                         \
    double scale = vec_at(w, ch) * is;                                                                             \
    T *ox = lt_##S(ng->gx);                                                                                        \
    for (int64_t i = 0; i < N; i++) {                                                                              \
      const T *xr = px + (i * C + ch) * inner, *gr = pg + (i * C + ch) * inner;                                    \
      T *o = ox + (i * C + ch) * inner;                                                                            \
      for (int64_t k = 0; k < inner; k++) {                                                                        \
        if (training) {                                                                                            \
          double xh = (xr[k] - m) * is;                                                                            \
          o[k] = (T)(scale * (gr[k] - sg / (double)M - xh * sgx / (double)M));                                     \
        } else {                                                                                                   \
          o[k] = (T)(scale * gr[k]);                                                                               \
        }                                                                                                          \
      }                                                                                                            \
    }                                                                                                              \
  }                                                                                                                \
}                                                                                                                  \
static void bn_forward_##S(const lt_tensor *xc, lt_tensor *out, lt_tensor *rm, lt_tensor *rv, const lt_tensor *w,  \
                           const lt_tensor *b, int training, double momentum, double eps, int64_t N, int64_t C,    \
                           int64_t inner, T *mean, T *invstd) {                                                    \
  const int64_t M = N * inner;                                                                                     \
  const T *px = lt_##S(xc);                                                                                        \
  T *po = lt_##S(out);                                                                                             \
  for (int64_t ch = 0; ch < C; ch++) {                                                                             \
    double m, v;                                                                                                   \
    if (training) {                                                                                                \
      double s = 0, ss = 0;                                                                                        \
      for (int64_t i = 0; i < N; i++) {                                                                            \
        const T *xr = px + (i * C + ch) * inner;                                                                   \
        for (int64_t k = 0; k < inner; k++) s += xr[k];                                                            \
      }                                                                                                            \
      m = s / (double)M;                                                                                           \
      for (int64_t i = 0; i < N; i++) {                                                                            \
        const T *xr = px + (i * C + ch) * inner;                                                                   \
        for (int64_t k = 0; k < inner; k++) ss += (xr[k] - m) * (xr[k] - m);                                       \
      }                                                                                                            \
      v = ss / (double)M;                                                                                          \
      if (rm) {                                                                                                    \
        T *prm = lt_##S(rm) + ch * rm->stride[0], *prv = lt_##S(rv) + ch * rv->stride[0];                          \
        *prm = (T)((1 - momentum) * *prm + momentum * m);                                                          \
        *prv = (T)((1 - momentum) * *prv + momentum * ss / (double)(M - 1));                                       \
      }                                                                                                            \
    } else {                                                                                                       \
      m = vec_at(rm, ch);                                                                                          \
      v = vec_at(rv, ch);                                                                                          \
    }                                                                                                              \
    double is = 1.0 / sqrt(v + eps);                                                                               \
    mean[ch] = (T)m;                                                                                               \
    invstd[ch] = (T)is;                                                                                            \
    double wc = w ? vec_at(w, ch) : 1.0, bc = b ? vec_at(b, ch) : 0.0;                                             \
    for (int64_t i = 0; i < N; i++) {                                                                              \
      const T *xr = px + (i * C + ch) * inner;                                                                     \
      T *o = po + (i * C + ch) * inner;                                                                            \
      for (int64_t k = 0; k < inner; k++) o[k] = (T)((xr[k] - m) * is * wc + bc);                                  \
    }                                                                                                              \
  }                                                                                                                \
}
// clang-format on
BN_KERNELS(f32, float)
BN_KERNELS(f64, double)

/* node: inputs {x, w, b}; i = {training, N, C, inner}; saved[0] = [2, C]: mean, invstd (x's dtype) */
static int batch_norm_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  const lt_tensor *w = n->inputs[1];
  int training = (int)n->i[0];
  int64_t N = n->i[1], C = n->i[2], inner = n->i[3];
  norm_grads ng; /* gw, gb: [C], each channel's written once */
  if (norm_grads_new(c, n, gout, 0, &ng)) return LT_ERR;
  if (n->inputs[0]->dtype == LT_F64)
    bn_backward_f64(&ng, w, training, N, C, inner, lt_f64(n->saved[0]), lt_f64(n->saved[0]) + C);
  else bn_backward_f32(&ng, w, training, N, C, inner, lt_f32(n->saved[0]), lt_f32(n->saved[0]) + C);
  return norm_grads_done(&ng, gin);
}

lt_tensor *lt_nn_batch_norm(lt_ctx *c, lt_tensor *x, lt_tensor *rm, lt_tensor *rv, lt_tensor *w, lt_tensor *b,
                            int training, double momentum, double eps) {
  char b1[128];
  const char *op = "batch_norm";
  if (lt_check_float(c, op, "input", x)) return NULL;
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
  lt_tensor *stats = xc ? lt_tensor_new(c, x->dtype, 2, sshape) : NULL;
  lt_tensor *out = stats ? lt_tensor_new(c, x->dtype, x->ndim, x->shape) : NULL;
  if (!out) {
    lt_tensor_release(xc);
    lt_tensor_release(stats);
    return NULL;
  }
  if (x->dtype == LT_F64)
    bn_forward_f64(xc, out, rm, rv, w, b, training, momentum, eps, N, C, inner, lt_f64(stats), lt_f64(stats) + C);
  else bn_forward_f32(xc, out, rm, rv, w, b, training, momentum, eps, N, C, inner, lt_f32(stats), lt_f32(stats) + C);
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

/* The layer norm's row kernels over element type T (S: f32 or f64), in T's 16-lane sums (float32's vectorise:
 * the double sums of a row are scalar chains, and the GPT's [1024 x 128] layer norm ran at ~2 ns an element).
 * ln_row_forward_S: one row of M elements: mean and 1/std (the variance from the deviations, two passes), then
 * y = (x - mean) / std * w + b; w, b may be NULL.
 * ln_row_backward_S: with xh = (x - mean) * is and gh = g * w, dx = is * (gh - mean(gh) - xh * mean(gh * xh));
 * gw += g * xh and gb += g (both accumulate over the rows; NULL when not wanted; dx NULL likewise). */
static inline double row_sum_f32(const float *x, int64_t n) { return lt_sum_f32(x, n); }
static inline double row_sum_f64(const double *x, int64_t n) { return lt_sum_f64(x, n); }
// clang-format off
#define LN_KERNELS(S, T)                                                                                            \
LT_VECTOR_FN static void ln_row_forward_##S(const T *x, T *y, int64_t M, const T *w, const T *b, double eps, T *mean,\
                                             T *invstd) {                                                           \
  const T m = (T)(row_sum_##S(x, M) / (double)M);                                                                   \
  T acc[16] = { 0 }, tail = 0;                                                                                      \
  int64_t j = 0;                                                                                                    \
  for (; j + 16 <= M; j += 16)                                                                                      \
    for (int k = 0; k < 16; k++) acc[k] += (x[j + k] - m) * (x[j + k] - m);                                         \
  for (; j < M; j++) tail += (x[j] - m) * (x[j] - m);                                                               \
  double ss = tail;                                                                                                 \
  for (int k = 0; k < 16; k++) ss += acc[k];                                                                        \
  const T is = (T)(1.0 / sqrt(ss / (double)M + eps));                                                               \
  *mean = m;                                                                                                        \
  *invstd = is;                                                                                                     \
  if (w && b)                                                                                                       \
    for (j = 0; j < M; j++) y[j] = (x[j] - m) * is * w[j] + b[j];                                                   \
  else if (w)                                                                                                       \
    for (j = 0; j < M; j++) y[j] = (x[j] - m) * is * w[j];                                                          \
  else if (b)                                                                                                       \
    for (j = 0; j < M; j++) y[j] = (x[j] - m) * is + b[j];                                                          \
  else                                                                                                              \
    for (j = 0; j < M; j++) y[j] = (x[j] - m) * is;                                                                 \
}                                                                                                                   \
LT_VECTOR_FN static void ln_row_backward_##S(const T *x, const T *g, T *dx, int64_t M, const T *w, T m, T is, T *gw,\
                                              T *gb) {                                                              \
  T a1[16] = { 0 }, a2[16] = { 0 }, t1 = 0, t2 = 0;                                                                 \
  int64_t j = 0;                                                                                                    \
  for (; j + 16 <= M; j += 16)                                                                                      \
    for (int k = 0; k < 16; k++) {                                                                                  \
      T xh = (x[j + k] - m) * is, gh = g[j + k] * (w ? w[j + k] : (T)1);                                            \
      a1[k] += gh;                                                                                                  \
      a2[k] += gh * xh;                                                                                             \
    }                                                                                                               \
  for (; j < M; j++) {                                                                                              \
    T xh = (x[j] - m) * is, gh = g[j] * (w ? w[j] : (T)1);                                                          \
    t1 += gh;                                                                                                       \
    t2 += gh * xh;                                                                                                  \
  }                                                                                                                 \
  double s1 = t1, s2 = t2;                                                                                          \
  for (int k = 0; k < 16; k++) {                                                                                    \
    s1 += a1[k];                                                                                                    \
    s2 += a2[k];                                                                                                    \
  }                                                                                                                 \
  if (gw)                                                                                                           \
    for (j = 0; j < M; j++) gw[j] += g[j] * ((x[j] - m) * is);                                                      \
  if (gb)                                                                                                           \
    for (j = 0; j < M; j++) gb[j] += g[j];                                                                          \
  if (dx) {                                                                                                         \
    const T c1 = (T)(s1 / (double)M), c2 = (T)(s2 / (double)M);                                                     \
    for (j = 0; j < M; j++) {                                                                                       \
      T xh = (x[j] - m) * is, gh = g[j] * (w ? w[j] : (T)1);                                                        \
      dx[j] = is * (gh - c1 - xh * c2);                                                                             \
    }                                                                                                               \
  }                                                                                                                 \
}
// clang-format on
LN_KERNELS(f32, float)
LN_KERNELS(f64, double)

/* node: inputs {x, w, b}; i = {R, M}; saved[0] = [2, R]: mean, invstd; w, b contiguous copies in saved[1..2] */
#define LN_BACKWARD_ROWS(S, T)                                                                                    \
  {                                                                                                               \
    const T *mean = lt_##S(n->saved[0]), *invstd = mean + R, *pw = n->saved[1] ? lt_##S(n->saved[1]) : NULL;      \
    const T *px = lt_##S(ng.xc), *pg = lt_##S(ng.gc);                                                             \
    T *ow = ng.gw ? lt_##S(ng.gw) : NULL, *ob = ng.gb ? lt_##S(ng.gb) : NULL, *ox = ng.gx ? lt_##S(ng.gx) : NULL; \
    for (int64_t r = 0; r < R; r++)                                                                               \
      ln_row_backward_##S(px + r * M, pg + r * M, ox ? ox + r * M : NULL, M, pw, mean[r], invstd[r], ow, ob);     \
  }
static int layer_norm_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  int64_t R = n->i[0], M = n->i[1];
  norm_grads ng; /* gw, gb zeroed: every row adds into them */
  if (norm_grads_new(c, n, gout, 1, &ng)) return LT_ERR;
  if (n->inputs[0]->dtype == LT_F64) LN_BACKWARD_ROWS(f64, double)
  else LN_BACKWARD_ROWS(f32, float)
  return norm_grads_done(&ng, gin);
}

lt_tensor *lt_nn_layer_norm(lt_ctx *c, lt_tensor *x, int k, lt_tensor *w, lt_tensor *b, double eps) {
  char b1[128], b2[128];
  const char *op = "layer_norm";
  if (lt_check_float(c, op, "input", x)) return NULL;
  for (int t = 0; t < 2; t++) {
    const lt_tensor *p = t ? b : w;
    if (p && p->dtype != x->dtype) {
      lt_fail(c, "layer_norm: input is %s and %s is %s: both must have the same float dtype", lt_dtype_name(x->dtype),
              t ? "bias" : "weight", lt_dtype_name(p->dtype));
      return NULL;
    }
  }
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
  lt_tensor *stats = xc && (wc || !w) && (bc || !b) ? lt_tensor_new(c, x->dtype, 2, sshape) : NULL;
  lt_tensor *out = stats ? lt_tensor_new(c, x->dtype, x->ndim, x->shape) : NULL;
  if (!out) goto fail;
  if (x->dtype == LT_F64) {
    const double *px = lt_f64(xc), *pw = wc ? lt_f64(wc) : NULL, *pb = bc ? lt_f64(bc) : NULL;
    double *po = lt_f64(out), *mean = lt_f64(stats), *invstd = mean + R;
    for (int64_t r = 0; r < R; r++) ln_row_forward_f64(px + r * M, po + r * M, M, pw, pb, eps, mean + r, invstd + r);
  } else {
    const float *px = lt_f32(xc), *pw = wc ? lt_f32(wc) : NULL, *pb = bc ? lt_f32(bc) : NULL;
    float *po = lt_f32(out), *mean = lt_f32(stats), *invstd = mean + R;
    for (int64_t r = 0; r < R; r++) ln_row_forward_f32(px + r * M, po + r * M, M, pw, pb, eps, mean + r, invstd + r);
  }
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
