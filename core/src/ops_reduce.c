/* ops_reduce.c — sum, mean, max, min (all elements or along a dim, keepdim), argmax, and sum_to
 * (the reverse of broadcasting, used by every broadcasting op's backward). A large sum or mean along a dim is
 * split by output elements on lutra's pool: each output is summed in the same order whatever the split, so
 * results do not depend on the thread count. A sum of all elements stays on one thread (a split would change
 * its order). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "lt_errors.h"
#include "lt_iter.h"
#include "lt_ops.h"
#include "lt_pool.h"
#include "lt_simd.h"
#include "ops_f64.h"

static const char *const red_names[] = { "sum", "mean", "max", "min" };

/* Output shape of reducing `dim` (dim < 0: everything). */
static int reduced_shape(const lt_tensor *a, int dim, int keepdim, int64_t *shape) {
  int k = 0;
  for (int d = 0; d < a->ndim; d++) {
    if (dim < 0 || d == dim) {
      if (keepdim) shape[k++] = 1;
    } else {
      shape[k++] = a->shape[d];
    }
  }
  return k;
}

static void split_dims(const lt_tensor *a, int dim, int64_t *outer, int64_t *n, int64_t *inner) {
  if (dim < 0) {
    *outer = 1;
    *n = lt_numel(a);
    *inner = 1;
    return;
  }
  *outer = 1;
  *inner = 1;
  for (int d = 0; d < dim; d++) *outer *= a->shape[d];
  *n = a->shape[dim];
  for (int d = dim + 1; d < a->ndim; d++) *inner *= a->shape[d];
}

/* gradient of sum/mean: g broadcast back over the reduced dims, scaled */
static int sum_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *in = n->inputs[0];
  int dim = (int)n->i[0];
  /* g as keepdim shape, then broadcast to the input's shape */
  int64_t ks[LT_MAX_DIM], kst[LT_MAX_DIM];
  lt_tensor *gc = lt_op_contiguous(c, g);
  if (!gc) return LT_ERR;
  int k = reduced_shape(in, dim, 1, ks);
  lt_contiguous_strides(k, ks, kst);
  lt_tensor *gk = lt_tensor_alias(c, gc, k, ks, kst, gc->offset);
  lt_tensor_release(gc);
  if (!gk) return LT_ERR;
  lt_tensor *r = lt_tensor_new(c, g->dtype, in->ndim, in->shape);
  if (r && lt_op_copy_(c, r, gk)) {
    lt_tensor_release(r);
    r = NULL;
  }
  lt_tensor_release(gk);
  if (r && n->f[0] != 1.0) lt_op_binary_scalar_(c, LT_MUL, r, n->f[0]);
  gin[0] = r;
  return r ? LT_OK : LT_ERR;
}

/* over all elements, the gradient of max/min is shared evenly among the elements equal to the result (as
 * PyTorch's evenly_distribute_backward); the input recorded is the contiguous float32 copy that was reduced */
static void share_among_ties(const float *x, int64_t numel, float best, float g, float *pr) {
  int64_t ties = 0;
  for (int64_t j = 0; j < numel; j++) ties += x[j] == best || (isnan(best) && isnan(x[j]));
  for (int64_t j = 0; j < numel; j++)
    if (x[j] == best || (isnan(best) && isnan(x[j]))) pr[j] = g / (float)ties;
}

/* gradient of max/min values: along a dim g goes to the chosen (first) element, over all elements it is shared */
static int select_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *in = n->inputs[0], *idx = n->saved[0];
  int dim = (int)n->i[0];
  int64_t outer, len, inner;
  split_dims(in, dim, &outer, &len, &inner);
  lt_tensor *gc = lt_op_contiguous(c, g);
  lt_tensor *r = gc ? lt_tensor_zeros(c, in->dtype, in->ndim, in->shape) : NULL;
  if (!r) {
    lt_tensor_release(gc);
    return LT_ERR;
  }
  if (in->dtype == LT_F64) {
    const double *pg = lt_f64(gc), *px = lt_f64(in);
    const int64_t *pi = lt_i64(idx);
    double *pr = lt_f64(r);
    if (dim < 0) lt_share_ties_f64(px, len, px[pi[0]], pg[0], pr);
    else
      for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < inner; k++) pr[(o * len + pi[o * inner + k]) * inner + k] += pg[o * inner + k];
    lt_tensor_release(gc);
    gin[0] = r;
    return LT_OK;
  }
  const float *pg = lt_f32(gc);
  const int64_t *pi = lt_i64(idx);
  float *pr = lt_f32(r);
  if (dim < 0) share_among_ties(lt_f32(in), len, lt_f32(in)[pi[0]], pg[0], pr);
  else
    for (int64_t o = 0; o < outer; o++)
      for (int64_t k = 0; k < inner; k++) pr[(o * len + pi[o * inner + k]) * inner + k] += pg[o * inner + k];
  lt_tensor_release(gc);
  gin[0] = r;
  return LT_OK;
}

static int check_reduce(lt_ctx *c, const char *name, const lt_tensor *a, int dim) {
  if (dim >= a->ndim && !(a->ndim == 0 && dim == 0))
    return lt_fail(c, LT_E_DIM_RANGE, name, dim + 1, a->ndim, a->ndim, a->ndim);
  return LT_OK;
}

/* Sums (means) along the dim for outputs [lo, hi) of the outer*inner outputs of a contiguous float tensor. */
LT_VECTOR_FN static void sum_range(const float *x, int64_t n, int64_t inner, int mean, float *out, int64_t lo,
                                   int64_t hi) {
  if (inner == 1) {
    for (int64_t o = lo; o < hi; o++) {
      double s = lt_sum_f32(x + o * n, n);
      out[o] = (float)(mean ? s / (double)n : s);
    }
    return;
  }
  for (int64_t u = lo; u < hi;) {
    int64_t o = u / inner, k0 = u % inner, m = inner - k0 < hi - u ? inner - k0 : hi - u;
    float *acc = out + u;
    memset(acc, 0, sizeof(float) * (size_t)m);
    for (int64_t j = 0; j < n; j++) {
      const float *row = x + (o * n + j) * inner + k0;
      for (int64_t k = 0; k < m; k++) acc[k] += row[k];
    }
    if (mean)
      for (int64_t k = 0; k < m; k++) acc[k] /= (float)n;
    u += m;
  }
}

typedef struct sum_job {
  const float *x;
  float *out;
  int64_t units, n, inner;
  int mean;
} sum_job;

static void sum_part(void *arg, int i, int nparts) {
  const sum_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->units, i, nparts, 16, &lo, &hi);
  if (lo < hi) sum_range(j->x, j->n, j->inner, j->mean, j->out, lo, hi);
}

/* As elementwise kernels (ops_ew_internal.h EW_PAR_MIN): one add per element, a split pays from ~64K. */
#define SUM_PAR_MIN (INT64_C(1) << 16)

/* Computes values (and 0-based indices for max/min) along dim of a contiguous float tensor. */
LT_VECTOR_FN static void reduce_f32(lt_ctx *c, lt_redop op, const float *x, int64_t outer, int64_t n, int64_t inner,
                                    float *out, int64_t *idx) {
  if (op == LT_RSUM || op == LT_RMEAN) {
    sum_job j = { x, out, outer * inner, n, inner, op == LT_RMEAN };
    int parts = lt_pool_parts(c->num_threads, j.units * n, SUM_PAR_MIN);
    if (parts > 1 && j.units >= 2 * 16) lt_pool_run(sum_part, &j, parts);
    else sum_range(x, n, inner, j.mean, out, 0, j.units);
    return;
  }
  int is_max = op == LT_RMAX;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t k = 0; k < inner; k++) {
      const float *p = x + o * n * inner + k;
      float best = p[0];
      int64_t bi = 0;
      for (int64_t j = 1; j < n; j++) {
        float v = p[j * inner];
        if (isnan(best)) break;
        if (isnan(v) || (is_max ? v > best : v < best)) {
          best = v;
          bi = j;
        }
      }
      out[o * inner + k] = best;
      if (idx) idx[o * inner + k] = bi;
    }
}

static void reduce_i64(lt_redop op, const int64_t *x, int64_t outer, int64_t n, int64_t inner, int64_t *out,
                       int64_t *idx) {
  for (int64_t o = 0; o < outer; o++)
    for (int64_t k = 0; k < inner; k++) {
      const int64_t *p = x + o * n * inner + k;
      int64_t acc = p[0], bi = 0;
      for (int64_t j = 1; j < n; j++) {
        int64_t v = p[j * inner];
        if (op == LT_RSUM) acc = (int64_t)((uint64_t)acc + (uint64_t)v); /* wraps on overflow, as PyTorch's */
        else if (op == LT_RMAX ? v > acc : v < acc) {
          acc = v;
          bi = j;
        }
      }
      out[o * inner + k] = acc;
      if (idx) idx[o * inner + k] = bi;
    }
}

static int reduce_impl(lt_ctx *c, lt_redop op, lt_tensor *a, int dim, int keepdim, lt_tensor **values,
                       lt_tensor **indices) {
  const char *name = red_names[op];
  if (check_reduce(c, name, a, dim)) return LT_ERR;
  if (a->ndim == 0) dim = -1;
  int64_t outer, n, inner;
  split_dims(a, dim, &outer, &n, &inner);
  if (n == 0 && (op == LT_RMAX || op == LT_RMIN)) {
    char b[128];
    return lt_fail(c, "%s: cannot reduce an empty dimension (shape %s)", name, lt_shape_str(a, b, sizeof b));
  }
  int64_t shape[LT_MAX_DIM];
  int k = reduced_shape(a, dim, keepdim, shape);
  int as_float = a->dtype != LT_I64 || op == LT_RMEAN;
  lt_dtype ft = a->dtype == LT_F64 ? LT_F64 : LT_F32;
  lt_tensor *src = as_float ? lt_op_to_dtype(c, a, ft) : lt_tensor_retain(a);
  lt_tensor *x = src ? lt_op_contiguous(c, src) : NULL;
  lt_tensor_release(src);
  if (!x) return LT_ERR;
  lt_tensor *out = lt_tensor_new(c, as_float ? ft : LT_I64, k, shape);
  lt_tensor *idx = (out && (op == LT_RMAX || op == LT_RMIN)) ? lt_tensor_new(c, LT_I64, k, shape) : NULL;
  if (!out || ((op == LT_RMAX || op == LT_RMIN) && !idx)) {
    lt_tensor_release(x);
    lt_tensor_release(out);
    lt_tensor_release(idx);
    return LT_ERR;
  }
  if (as_float) {
    if (n == 0) memset(out->storage->data, 0, out->storage->nbytes);
    else if (ft == LT_F64) lt_reduce_f64(op, lt_f64(x), outer, n, inner, lt_f64(out), idx ? lt_i64(idx) : NULL);
    else reduce_f32(c, op, lt_f32(x), outer, n, inner, lt_f32(out), idx ? lt_i64(idx) : NULL);
    if (n == 0 && op == LT_RMEAN) lt_op_fill_(c, out, NAN);
  } else {
    if (n == 0) memset(lt_i64(out), 0, sizeof(int64_t) * (size_t)(outer * inner));
    else reduce_i64(op, lt_i64(x), outer, n, inner, lt_i64(out), idx ? lt_i64(idx) : NULL);
  }
  if (as_float) {
    lt_node *nd;
    int is_sel = op == LT_RMAX || op == LT_RMIN;
    if (lt_record(c, out, name, is_sel ? select_backward : sum_backward, 1, &x, &nd)) {
      lt_tensor_release(x);
      lt_tensor_release(out);
      lt_tensor_release(idx);
      return LT_ERR;
    }
    if (nd) {
      nd->i[0] = dim;
      nd->f[0] = op == LT_RMEAN ? 1.0 / (double)n : 1.0;
      /* sum and mean spread g; max/min along a dim route it by the saved indices, over all elements they
       * look for the ties in the input */
      nd->reads = is_sel && dim < 0 ? LT_READS(0) : 0;
      if (is_sel) lt_node_save(nd, 0, idx);
    }
  }
  lt_tensor_release(x);
  *values = out;
  if (indices) *indices = idx;
  else lt_tensor_release(idx);
  return LT_OK;
}

lt_tensor *lt_op_reduce(lt_ctx *c, lt_redop op, lt_tensor *a, int dim, int keepdim) {
  lt_tensor *v = NULL;
  if (reduce_impl(c, op, a, dim, keepdim, &v, NULL)) return NULL;
  return v;
}

int lt_op_reduce_idx(lt_ctx *c, lt_redop op, lt_tensor *a, int dim, int keepdim, lt_tensor **values,
                     lt_tensor **indices) {
  if (op != LT_RMAX && op != LT_RMIN) return lt_fail(c, "%s: has no indices", red_names[op]);
  return reduce_impl(c, op, a, dim, keepdim, values, indices);
}

lt_tensor *lt_op_argmax(lt_ctx *c, lt_tensor *a, int dim, int keepdim) {
  lt_tensor *v = NULL, *i = NULL;
  int saved = c->grad_enabled;
  c->grad_enabled = 0;
  int rc = reduce_impl(c, LT_RMAX, a, dim, keepdim, &v, &i);
  c->grad_enabled = saved;
  if (rc) return NULL;
  lt_tensor_release(v);
  return i;
}
