/*
 * ops_scatter_reduce.c — PyTorch 1.13's scatter_reduce(dim, index, src, reduce, include_self): each src element
 * src[i] (at the positions of index's elements) is reduced into out[.., index[i], ..] by sum, prod, mean, amax or
 * amin; include_self = false leaves x's value out of every position that receives one. Forward and backward
 * side by side, the backward as torch 1.13's formulas (tools/autograd/FunctionsManual.cpp,
 * scatter_reduce_backward): amax/amin share the gradient evenly among the ties, prod divides by the factor with
 * its zeros treated apart, mean divides by the count. One body for float and double (SR_KERNELS); indices are
 * 0-based here, the binding converts Lua's 1-based ones.
 */
#include <string.h>

#include "lt_alloc.h"
#include "lt_errors.h"
#include "lt_ops.h"
#include "lt_scatter_walk.h"

const char *const lt_scatter_reduce_names[LT_SR_COUNT] = { "sum", "prod", "mean", "amax", "amin" };

/* where index element i points: o[i] into out (contiguous, x's shape) and s[i] into src (its strides) */
typedef struct sr_plan {
  int64_t n, *o, *s;
} sr_plan;

static int plan_make(lt_ctx *c, sr_plan *p, const lt_tensor *out, int dim, const lt_tensor *idx, const lt_tensor *src) {
  int64_t ost[LT_MAX_DIM];
  lt_contiguous_strides(out->ndim, out->shape, ost);
  p->n = lt_numel(idx);
  p->o = lt_alloc((size_t)p->n * sizeof(int64_t));
  p->s = lt_alloc((size_t)p->n * sizeof(int64_t));
  if (!p->o || !p->s) {
    lt_free(p->o, (size_t)p->n * sizeof(int64_t));
    lt_free(p->s, (size_t)p->n * sizeof(int64_t));
    return lt_fail(c, "scatter_reduce: out of memory");
  }
  for (int64_t i = 0; i < p->n; i++) {
    int64_t soff;
    p->o[i] = lt_scatter_at(idx, dim, i, ost, src->stride, &soff);
    p->s[i] = soff;
  }
  return LT_OK;
}

static void plan_free(sr_plan *p) {
  lt_free(p->o, (size_t)p->n * sizeof(int64_t));
  lt_free(p->s, (size_t)p->n * sizeof(int64_t));
}

/* forward: out holds a contiguous copy of x; touched (numel bytes, zeroed) marks the positions that receive */
#define SR_FORWARD(T, NAME)                                                                                        \
  static void NAME(T *out, const T *src, const sr_plan *p, int reduce, int include_self, unsigned char *touched) { \
    for (int64_t i = 0; i < p->n; i++) {                                                                           \
      T v = src[p->s[i]], *q = out + p->o[i];                                                                      \
      if (!include_self && !touched[p->o[i]]) {                                                                    \
        *q = v; /* the first value received replaces x's */                                                        \
      } else if (reduce == LT_SR_SUM || reduce == LT_SR_MEAN) {                                                    \
        *q += v;                                                                                                   \
      } else if (reduce == LT_SR_PROD) {                                                                           \
        *q *= v;                                                                                                   \
      } else if (reduce == LT_SR_AMAX) {                                                                           \
        *q = (v > *q || v != v) ? v : *q; /* NaN wins, as torch's */                                               \
      } else {                                                                                                     \
        *q = (v < *q || v != v) ? v : *q;                                                                          \
      }                                                                                                            \
      touched[p->o[i]] = 1;                                                                                        \
    }                                                                                                              \
  }
SR_FORWARD(float, sr_forward_f32)
SR_FORWARD(double, sr_forward_f64)

/* the count each position is divided by for mean: x's 1 when included, +1 per value received, 0 -> 1 */
static double *mean_counts(const sr_plan *p, int include_self, int64_t numel) {
  double *n = lt_alloc((size_t)numel * sizeof *n);
  if (!n) return NULL;
  for (int64_t k = 0; k < numel; k++) n[k] = include_self ? 1.0 : 0.0;
  for (int64_t i = 0; i < p->n; i++) n[p->o[i]] += 1.0;
  for (int64_t k = 0; k < numel; k++) n[k] = n[k] == 0 ? 1.0 : n[k];
  return n;
}

/* backward: g, x, res contiguous (x's shape); gx (numel) and gs (index-shaped, one per index element) written */
#define SR_BACKWARD(T, NAME)                                                                                            \
  static int NAME(const T *g, const T *x, const T *res, const T *src, const sr_plan *p, int reduce, int include_self,   \
                  int64_t numel, T *gx, T *gs) {                                                                        \
    if (reduce == LT_SR_SUM) {                                                                                          \
      memcpy(gx, g, (size_t)numel * sizeof(T));                                                                         \
      for (int64_t i = 0; i < p->n; i++) gs[i] = g[p->o[i]];                                                            \
    } else if (reduce == LT_SR_MEAN) {                                                                                  \
      double *cnt = mean_counts(p, include_self, numel);                                                                \
      if (!cnt) return LT_ERR;                                                                                          \
      for (int64_t k = 0; k < numel; k++) gx[k] = g[k] / (T)cnt[k];                                                     \
      for (int64_t i = 0; i < p->n; i++) gs[i] = g[p->o[i]] / (T)cnt[p->o[i]];                                          \
      lt_free(cnt, (size_t)numel * sizeof *cnt);                                                                        \
    } else if (reduce == LT_SR_AMAX || reduce == LT_SR_AMIN) {                                                          \
      /* N = (x == res) + the received values equal to res; the gradient g / N goes to each of them */                  \
      T *N = lt_alloc((size_t)numel * sizeof(T));                                                                       \
      if (!N) return LT_ERR;                                                                                            \
      for (int64_t k = 0; k < numel; k++) N[k] = (T)(x[k] == res[k]);                                                   \
      for (int64_t i = 0; i < p->n; i++) N[p->o[i]] += (T)(src[p->s[i]] == res[p->o[i]]);                               \
      for (int64_t k = 0; k < numel; k++) gx[k] = (T)(x[k] == res[k]) * (g[k] / N[k]);                                  \
      for (int64_t i = 0; i < p->n; i++) gs[i] = (T)(src[p->s[i]] == res[p->o[i]]) * (g[p->o[i]] / N[p->o[i]]);         \
      lt_free(N, (size_t)numel * sizeof(T));                                                                            \
    } else { /* prod */                                                                                                 \
      /* ms: the product with x's zeros taken as 1 (gx = g * ms / x'); mz: with src's lone zeros taken as 1;          \
       * zeros: how many zeros each position receives */ \
      T *ms = lt_alloc((size_t)numel * sizeof(T)), *mz = lt_alloc((size_t)numel * sizeof(T));                           \
      int64_t *zeros = lt_alloc((size_t)numel * sizeof(int64_t));                                                       \
      unsigned char *seen = lt_alloc((size_t)numel);                                                                    \
      if (!ms || !mz || !zeros || !seen) {                                                                              \
        lt_free(ms, (size_t)numel * sizeof(T));                                                                         \
        lt_free(mz, (size_t)numel * sizeof(T));                                                                         \
        lt_free(zeros, (size_t)numel * sizeof(int64_t));                                                                \
        lt_free(seen, (size_t)numel);                                                                                   \
        return LT_ERR;                                                                                                  \
      }                                                                                                                 \
      for (int64_t k = 0; k < numel; k++) {                                                                             \
        ms[k] = x[k] == 0 ? (T)1 : x[k];                                                                                \
        mz[k] = x[k];                                                                                                   \
        zeros[k] = 0;                                                                                                   \
        seen[k] = 0;                                                                                                    \
      }                                                                                                                 \
      for (int64_t i = 0; i < p->n; i++) zeros[p->o[i]] += src[p->s[i]] == 0;                                           \
      for (int64_t i = 0; i < p->n; i++) {                                                                              \
        int64_t o = p->o[i];                                                                                            \
        T v = src[p->s[i]], vz = (v == 0 && zeros[o] == 1) ? (T)1 : v;                                                  \
        if (!include_self && !seen[o]) {                                                                                \
          ms[o] = v;                                                                                                    \
          mz[o] = vz;                                                                                                   \
          seen[o] = 1;                                                                                                  \
        } else {                                                                                                        \
          ms[o] *= v;                                                                                                   \
          mz[o] *= vz;                                                                                                  \
        }                                                                                                               \
      }                                                                                                                 \
      for (int64_t k = 0; k < numel; k++) gx[k] = g[k] * ms[k] / (x[k] == 0 ? (T)1 : x[k]);                             \
      for (int64_t i = 0; i < p->n; i++) {                                                                              \
        int64_t o = p->o[i];                                                                                            \
        T v = src[p->s[i]];                                                                                             \
        gs[i] = (v == 0 && zeros[o] == 1) ? g[o] * mz[o] : (g[o] * res[o]) / (v == 0 ? (T)1 : v);                       \
      }                                                                                                                 \
      lt_free(ms, (size_t)numel * sizeof(T));                                                                           \
      lt_free(mz, (size_t)numel * sizeof(T));                                                                           \
      lt_free(zeros, (size_t)numel * sizeof(int64_t));                                                                  \
      lt_free(seen, (size_t)numel);                                                                                     \
    }                                                                                                                   \
    if (!include_self)                                                                                                  \
      for (int64_t i = 0; i < p->n; i++) gx[p->o[i]] = 0; /* x's values there were not used */                          \
    return LT_OK;                                                                                                       \
  }
SR_BACKWARD(float, sr_backward_f32)
SR_BACKWARD(double, sr_backward_f64)

/* gs (index-shaped) into src's shape: zeros where no index element reads src (src may be larger) */
static lt_tensor *src_shaped(lt_ctx *c, lt_tensor *gs, const lt_tensor *src) {
  if (lt_same_shape(gs, src)) return gs;
  lt_tensor *r = lt_tensor_zeros(c, src->dtype, src->ndim, src->shape);
  lt_tensor *corner = r ? lt_tensor_retain(r) : NULL;
  for (int d = 0; corner && d < src->ndim; d++) {
    lt_tensor *v = lt_op_narrow(c, corner, d, 0, gs->shape[d]);
    lt_tensor_release(corner);
    corner = v;
  }
  if (!corner || lt_op_copy_(c, corner, gs)) {
    lt_tensor_release(r);
    r = NULL;
  }
  lt_tensor_release(corner);
  lt_tensor_release(gs);
  return r;
}

/* node: i[0] dim, i[1] reduce, i[2] include_self; saved[0] the 0-based index, saved[1] the output */
static int scatter_reduce_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  int dim = (int)n->i[0], reduce = (int)n->i[1], include_self = (int)n->i[2];
  lt_tensor *x = n->inputs[0], *src = n->inputs[1], *idx = n->saved[0];
  lt_tensor *gc = lt_op_contiguous(c, g), *xc = lt_op_contiguous(c, x), *rc = lt_op_contiguous(c, n->saved[1]);
  lt_tensor *gx = gc ? lt_tensor_new_like(c, gc) : NULL;
  lt_tensor *gs = gx ? lt_tensor_new(c, x->dtype, idx->ndim, idx->shape) : NULL;
  sr_plan p = { 0, NULL, NULL };
  int rc_ = !gc || !xc || !rc || !gs ? LT_ERR : plan_make(c, &p, xc, dim, idx, src);
  if (rc_ == LT_OK) {
    int64_t numel = lt_numel(xc);
    rc_ = x->dtype == LT_F64 ? sr_backward_f64(lt_f64(gc), lt_f64(xc), lt_f64(rc), lt_f64(src), &p, reduce,
                                               include_self, numel, lt_f64(gx), lt_f64(gs))
                             : sr_backward_f32(lt_f32(gc), lt_f32(xc), lt_f32(rc), lt_f32(src), &p, reduce,
                                               include_self, numel, lt_f32(gx), lt_f32(gs));
    if (rc_) lt_fail(c, "scatter_reduce: out of memory in the backward");
    plan_free(&p);
  }
  lt_tensor_release(gc);
  lt_tensor_release(xc);
  lt_tensor_release(rc);
  if (rc_ == LT_OK && x->requires_grad) gin[0] = lt_tensor_retain(gx);
  if (rc_ == LT_OK && src->requires_grad) {
    gin[1] = src_shaped(c, lt_tensor_retain(gs), src);
    if (!gin[1]) rc_ = LT_ERR;
  }
  lt_tensor_release(gx);
  lt_tensor_release(gs);
  return rc_;
}

lt_tensor *lt_op_scatter_reduce(lt_ctx *c, lt_tensor *x, int dim, lt_tensor *idx, lt_tensor *src, int reduce,
                                int include_self) {
  const char *op = "scatter_reduce";
  char b1[128], b2[128];
  if (x->dtype == LT_I64) {
    lt_fail(c, "scatter_reduce: the input must be float32 or float64, got int64");
    return NULL;
  }
  if (src->dtype != x->dtype) {
    lt_fail(c, "scatter_reduce: the input is %s and src is %s: both must have the same dtype", lt_dtype_name(x->dtype),
            lt_dtype_name(src->dtype));
    return NULL;
  }
  if (lt_check_dtype(c, op, "index", idx, LT_I64)) return NULL;
  if (dim < 0 || dim >= x->ndim) {
    lt_fail(c, LT_E_DIM_RANGE, op, dim + 1, x->ndim, x->ndim, x->ndim);
    return NULL;
  }
  if (idx->ndim != x->ndim || src->ndim != x->ndim) {
    lt_fail(c, "%s: index %s and src must have as many dims as the input %s", op, lt_shape_str(idx, b1, sizeof b1),
            lt_shape_str(x, b2, sizeof b2));
    return NULL;
  }
  for (int d = 0; d < x->ndim; d++)
    if ((d != dim && idx->shape[d] > x->shape[d]) || idx->shape[d] > src->shape[d]) {
      lt_fail(c, "%s: index %s is larger than the %s in dim %d", op, lt_shape_str(idx, b1, sizeof b1),
              d != dim && idx->shape[d] > x->shape[d] ? "input" : "src", d + 1);
      return NULL;
    }
  int64_t N = lt_numel(idx);
  for (int64_t i = 0; i < N; i++) {
    int64_t v = lt_get_flat_i64(idx, i);
    if (v < 0 || v >= x->shape[dim]) {
      lt_fail(c, "%s: index %lld is out of range for dim %d of size %lld (indices are 1-based)", op, (long long)(v + 1),
              dim + 1, (long long)x->shape[dim]);
      return NULL;
    }
  }
  lt_tensor *out = lt_tensor_new(c, x->dtype, x->ndim, x->shape);
  if (!out) return NULL;
  int64_t numel = lt_numel(out);
  unsigned char *touched = lt_alloc((size_t)numel);
  sr_plan p = { 0, NULL, NULL };
  if (!touched || lt_op_copy_(c, out, x) || plan_make(c, &p, out, dim, idx, src)) {
    if (!touched) lt_fail(c, "scatter_reduce: out of memory");
    lt_free(touched, (size_t)numel);
    lt_tensor_release(out);
    return NULL;
  }
  memset(touched, 0, (size_t)numel);
  if (x->dtype == LT_F64) sr_forward_f64(lt_f64(out), lt_f64(src), &p, reduce, include_self, touched);
  else sr_forward_f32(lt_f32(out), lt_f32(src), &p, reduce, include_self, touched);
  lt_free(touched, (size_t)numel);
  if (reduce == LT_SR_MEAN) {
    double *cnt = mean_counts(&p, include_self, numel);
    if (!cnt) {
      plan_free(&p);
      lt_tensor_release(out);
      lt_fail(c, "scatter_reduce: out of memory");
      return NULL;
    }
    for (int64_t k = 0; k < numel; k++) {
      if (x->dtype == LT_F64) lt_f64(out)[k] /= cnt[k];
      else lt_f32(out)[k] /= (float)cnt[k];
    }
    lt_free(cnt, (size_t)numel * sizeof *cnt);
  }
  plan_free(&p);
  lt_tensor *ins[2] = { x, src };
  lt_node *nd;
  if (lt_record(c, out, op, scatter_reduce_backward, 2, ins, &nd)) {
    lt_tensor_release(out);
    return NULL;
  }
  if (nd) {
    nd->i[0] = dim;
    nd->i[1] = reduce;
    nd->i[2] = include_self;
    lt_node_save(nd, 0, idx);
    if (lt_node_save_output(c, nd, 1, out)) {
      lt_tensor_release(out);
      return NULL;
    }
  }
  return out;
}
