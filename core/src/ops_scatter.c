/*
 * ops_scatter.c — indexed writes and mask selections, forward and backward side by side: scatter (a tensor or
 * a value), scatter_add, index_add, index_fill, masked_select, nonzero. Indices are 0-based int64 here (the
 * binding converts Lua's 1-based ones); the data is float32 or float64 (the loops are written once for both,
 * SCATTER_LOOP and MASKED_LOOPS). Each op writes into a contiguous copy of x, as PyTorch's out-of-place forms do.
 */
#include <string.h>

#include "lt_errors.h"
#include "lt_ops.h"
#include "lt_scatter_walk.h"

/* x float32 or float64 */
static int check_float_input(lt_ctx *c, const char *op, const lt_tensor *x) {
  return x->dtype == LT_F64 ? LT_OK : lt_check_dtype(c, op, "input", x, LT_F32);
}

/* t (src, source) has x's float dtype, as PyTorch's scatter and index_add require */
static int check_same_float(lt_ctx *c, const char *op, const char *what, const lt_tensor *x, const lt_tensor *t) {
  if (t->dtype == x->dtype) return LT_OK;
  if (!lt_is_float(t->dtype)) return lt_check_dtype(c, op, what, t, x->dtype);
  return lt_fail(c, "%s: input is %s and %s is %s: both must have the same float dtype", op, lt_dtype_name(x->dtype),
                 what, lt_dtype_name(t->dtype));
}

static int index_checks(lt_ctx *c, const char *op, const lt_tensor *x, int dim, const lt_tensor *idx) {
  if (check_float_input(c, op, x) || lt_check_dtype(c, op, "index", idx, LT_I64)) return LT_ERR;
  if (dim < 0 || dim >= x->ndim) return lt_fail(c, LT_E_DIM_RANGE, op, dim + 1, x->ndim, x->ndim, x->ndim);
  return LT_OK;
}

static int index_value_check(lt_ctx *c, const char *op, int64_t v, int64_t n, int dim) {
  if (v < 0 || v >= n)
    return lt_fail(c, "%s: index %lld is out of range for dim %d of size %lld (indices are 1-based)", op,
                   (long long)(v + 1), dim + 1, (long long)n);
  return LT_OK;
}

/* ---- scatter, scatter_add ---------------------------------------------------------------------------- */

/* The gradient of src is g gathered at the index, in src's leading corner (src may be larger than the index:
 * its other elements were not read, their gradient is 0). Takes gs. */
static lt_tensor *src_grad(lt_ctx *c, lt_tensor *gs, const lt_tensor *src) {
  if (!gs || lt_same_shape(gs, src)) return gs;
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

static const int64_t no_src[LT_MAX_DIM]; /* a value's strides: the walk reads src at offset 0, unused */

/* out[..., idx[i], ...] = (or +=) src[i] (or value) along dim, out contiguous; for float and double */
#define SCATTER_LOOP(NAME, T)                                                                                      \
  static void NAME(T *po, const int64_t *ost, const lt_tensor *idx, int dim, const lt_tensor *src, T v, int add) { \
    const T *ps = src ? (const T *)src->storage->data + src->offset : NULL;                                        \
    for (int64_t i = 0, N = lt_numel(idx); i < N; i++) {                                                           \
      int64_t soff, off = lt_scatter_at(idx, dim, i, ost, src ? src->stride : no_src, &soff);                      \
      T s = src ? ps[soff] : v;                                                                                    \
      if (add) po[off] += s;                                                                                       \
      else po[off] = s;                                                                                            \
    }                                                                                                              \
  }
SCATTER_LOOP(scatter_f32, float)
SCATTER_LOOP(scatter_f64, double)

/* node: i[0] dim, i[1] 1 when src is a tensor, i[2] add; saved[0] the 0-based index */
static int scatter_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  int dim = (int)n->i[0], has_src = (int)n->i[1], add = (int)n->i[2];
  lt_tensor *idx = n->saved[0];
  if (n->inputs[0]->requires_grad) gin[0] = add ? lt_tensor_retain(g) : lt_op_scatter(c, g, dim, idx, NULL, 0.0, 0);
  if (has_src && n->inputs[1]->requires_grad) gin[1] = src_grad(c, lt_op_gather(c, g, dim, idx), n->inputs[1]);
  return ((n->inputs[0]->requires_grad && !gin[0]) || (has_src && n->inputs[1]->requires_grad && !gin[1])) ? LT_ERR
                                                                                                           : LT_OK;
}

lt_tensor *lt_op_scatter(lt_ctx *c, lt_tensor *x, int dim, lt_tensor *idx, lt_tensor *src, double value, int add) {
  const char *op = add ? "scatter_add" : "scatter";
  char b1[128], b2[128];
  if (index_checks(c, op, x, dim, idx)) return NULL;
  if (src && check_same_float(c, op, "src", x, src)) return NULL;
  if (idx->ndim != x->ndim || (src && src->ndim != x->ndim)) {
    lt_fail(c, "%s: index %s and %s must have as many dims as the input %s", op, lt_shape_str(idx, b1, sizeof b1),
            src ? "src" : "the input", lt_shape_str(x, b2, sizeof b2));
    return NULL;
  }
  for (int d = 0; d < x->ndim; d++)
    if ((d != dim && idx->shape[d] > x->shape[d]) || (src && idx->shape[d] > src->shape[d])) {
      lt_fail(c, "%s: index %s is larger than the %s in dim %d", op, lt_shape_str(idx, b1, sizeof b1),
              d != dim && idx->shape[d] > x->shape[d] ? "input" : "src", d + 1);
      return NULL;
    }
  int64_t N = lt_numel(idx);
  for (int64_t i = 0; i < N; i++)
    if (index_value_check(c, op, lt_get_flat_i64(idx, i), x->shape[dim], dim)) return NULL;
  lt_tensor *out = lt_tensor_new(c, x->dtype, x->ndim, x->shape);
  if (!out) return NULL;
  if (lt_op_copy_(c, out, x)) {
    lt_tensor_release(out);
    return NULL;
  }
  int64_t ost[LT_MAX_DIM];
  lt_contiguous_strides(x->ndim, x->shape, ost);
  if (x->dtype == LT_F64) scatter_f64(lt_f64(out), ost, idx, dim, src, value, add);
  else scatter_f32(lt_f32(out), ost, idx, dim, src, (float)value, add);
  lt_tensor *ins[2] = { x, src };
  lt_node *nd;
  if (lt_record(c, out, op, scatter_backward, src ? 2 : 1, ins, &nd)) {
    lt_tensor_release(out);
    return NULL;
  }
  if (nd) {
    nd->reads = 0; /* the backward reads only the saved index */
    nd->i[0] = dim;
    nd->i[1] = src != NULL;
    nd->i[2] = add;
    lt_node_save(nd, 0, idx);
  }
  return out;
}

/* ---- index_add, index_fill ------------------------------------------------------------------------- */

static int check_index_vector(lt_ctx *c, const char *op, const lt_tensor *x, int dim, const lt_tensor *idx) {
  char b1[128];
  if (index_checks(c, op, x, dim, idx)) return LT_ERR;
  if (idx->ndim > 1) return lt_fail(c, "%s: index must be 1-D, got %s", op, lt_shape_str(idx, b1, sizeof b1));
  for (int64_t i = 0, n = lt_numel(idx); i < n; i++)
    if (index_value_check(c, op, lt_get_flat_i64(idx, i), x->shape[dim], dim)) return LT_ERR;
  return LT_OK;
}

/* Calls fn on the slice (a view of out along dim at index) for every index entry j. */
typedef int (*slice_fn)(lt_ctx *c, lt_tensor *slice, int64_t j, void *arg);
static int for_each_slice(lt_ctx *c, lt_tensor *out, int dim, const lt_tensor *idx, slice_fn fn, void *arg) {
  for (int64_t j = 0, n = lt_numel(idx); j < n; j++) {
    lt_tensor *s = lt_op_select(c, out, dim, lt_get_flat_i64(idx, j));
    if (!s) return LT_ERR;
    int rc = fn(c, s, j, arg);
    lt_tensor_release(s);
    if (rc) return LT_ERR;
  }
  return LT_OK;
}

typedef struct add_arg {
  lt_tensor *src;
  int dim;
  double alpha;
} add_arg;
static int add_slice(lt_ctx *c, lt_tensor *s, int64_t j, void *arg) {
  add_arg *a = arg;
  lt_tensor *row = lt_op_select(c, a->src, a->dim, j);
  if (!row) return LT_ERR;
  int rc = lt_op_axpy_(c, s, a->alpha, row);
  lt_tensor_release(row);
  return rc;
}
static int fill_slice(lt_ctx *c, lt_tensor *s, int64_t j, void *arg) {
  (void)j;
  return lt_op_fill_(c, s, *(double *)arg);
}

static lt_tensor *copy_of(lt_ctx *c, lt_tensor *x) {
  lt_tensor *out = lt_tensor_new(c, x->dtype, x->ndim, x->shape);
  if (out && lt_op_copy_(c, out, x)) {
    lt_tensor_release(out);
    return NULL;
  }
  return out;
}

/* node: i[0] dim, f[0] alpha; saved[0] the index */
static int index_add_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  if (n->inputs[0]->requires_grad) gin[0] = lt_tensor_retain(g);
  if (n->inputs[1]->requires_grad) {
    lt_tensor *sel = lt_op_index_select(c, g, (int)n->i[0], n->saved[0]);
    gin[1] = sel ? lt_op_binary_scalar(c, LT_MUL, sel, n->f[0], 0) : NULL;
    lt_tensor_release(sel);
    if (!gin[1]) return LT_ERR;
  }
  return LT_OK;
}

lt_tensor *lt_op_index_add(lt_ctx *c, lt_tensor *x, int dim, lt_tensor *idx, lt_tensor *src, double alpha) {
  char b1[128], b2[128];
  if (check_index_vector(c, "index_add", x, dim, idx) || check_same_float(c, "index_add", "source", x, src))
    return NULL;
  int ok = src->ndim == x->ndim && src->shape[dim] == lt_numel(idx);
  for (int d = 0; ok && d < x->ndim; d++) ok = d == dim || src->shape[d] == x->shape[d];
  if (!ok) {
    lt_fail(c, "index_add: source %s must be the input %s with dim %d of the index's size %lld",
            lt_shape_str(src, b1, sizeof b1), lt_shape_str(x, b2, sizeof b2), dim + 1, (long long)lt_numel(idx));
    return NULL;
  }
  lt_tensor *out = copy_of(c, x);
  add_arg a = { src, dim, alpha };
  int mode = c->grad_enabled;
  c->grad_enabled = 0; /* the slices are views of a fresh tensor: no graph for the writes themselves */
  int rc = out ? for_each_slice(c, out, dim, idx, add_slice, &a) : LT_ERR;
  c->grad_enabled = mode;
  if (rc) {
    lt_tensor_release(out);
    return NULL;
  }
  lt_tensor *ins[2] = { x, src };
  lt_node *nd;
  if (lt_record(c, out, "index_add", index_add_backward, 2, ins, &nd)) {
    lt_tensor_release(out);
    return NULL;
  }
  if (nd) {
    nd->reads = 0; /* the backward reads only the saved index */
    nd->i[0] = dim;
    nd->f[0] = alpha;
    lt_node_save(nd, 0, idx);
  }
  return out;
}

static int index_fill_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  gin[0] = lt_op_index_fill(c, g, (int)n->i[0], n->saved[0], 0.0);
  return gin[0] ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_index_fill(lt_ctx *c, lt_tensor *x, int dim, lt_tensor *idx, double value) {
  if (check_index_vector(c, "index_fill", x, dim, idx)) return NULL;
  lt_tensor *out = copy_of(c, x);
  int mode = c->grad_enabled;
  c->grad_enabled = 0;
  int rc = out ? for_each_slice(c, out, dim, idx, fill_slice, &value) : LT_ERR;
  c->grad_enabled = mode;
  if (rc) {
    lt_tensor_release(out);
    return NULL;
  }
  lt_node *nd;
  if (lt_record(c, out, "index_fill", index_fill_backward, 1, &x, &nd)) {
    lt_tensor_release(out);
    return NULL;
  }
  if (nd) {
    nd->reads = 0; /* the backward reads only the saved index */
    nd->i[0] = dim;
    lt_node_save(nd, 0, idx);
  }
  return out;
}

/* ---- masked_select, nonzero ------------------------------------------------------------------------- */

/* masked_select's two loops for float and double: the selection of xs where m != 0, and its gradient (g's
 * values put back at the selected positions) */
#define MASKED_LOOPS(SELECT, SPREAD, T)                                \
  static void SELECT(const float *pm, const T *px, int64_t N, T *po) { \
    for (int64_t i = 0, k = 0; i < N; i++)                             \
      if (pm[i] != 0.0f) po[k++] = px[i];                              \
  }                                                                    \
  static void SPREAD(const float *pm, const T *pg, int64_t N, T *pf) { \
    for (int64_t i = 0, k = 0; i < N; i++)                             \
      if (pm[i] != 0.0f) pf[i] = pg[k++];                              \
  }
MASKED_LOOPS(masked_pick_f32, masked_spread_f32, float)
MASKED_LOOPS(masked_pick_f64, masked_spread_f64, double)

/* x and mask broadcast to one shape; saved[0] the float32 mask over it. The gradient puts g's values back at
 * the selected positions and sums them down to x's shape. */
static int masked_select_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *m = n->saved[0], *x = n->inputs[0];
  lt_tensor *full = lt_tensor_zeros(c, x->dtype, m->ndim, m->shape);
  lt_tensor *gc = full ? lt_op_contiguous(c, g) : NULL;
  if (!gc) {
    lt_tensor_release(full);
    return LT_ERR;
  }
  if (x->dtype == LT_F64) masked_spread_f64(lt_f32(m), lt_f64(gc), lt_numel(m), lt_f64(full));
  else masked_spread_f32(lt_f32(m), lt_f32(gc), lt_numel(m), lt_f32(full));
  lt_tensor_release(gc);
  gin[0] = lt_op_sum_to(c, full, x->ndim, x->shape);
  lt_tensor_release(full);
  return gin[0] ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_masked_select(lt_ctx *c, lt_tensor *x, lt_tensor *mask) {
  int nd;
  int64_t shape[LT_MAX_DIM];
  if (check_float_input(c, "masked_select", x)) return NULL;
  if (lt_broadcast_shape(c, "masked_select", x, mask, &nd, shape)) return NULL;
  lt_tensor *m = lt_tensor_new(c, LT_F32, nd, shape), *xs = m ? lt_tensor_new(c, x->dtype, nd, shape) : NULL;
  if (!xs || lt_op_copy_(c, m, mask) || lt_op_copy_(c, xs, x)) {
    lt_tensor_release(m);
    lt_tensor_release(xs);
    return NULL;
  }
  const float *pm = lt_f32(m);
  int64_t N = lt_numel(m), cnt = 0;
  for (int64_t i = 0; i < N; i++) cnt += pm[i] != 0.0f;
  lt_tensor *out = lt_tensor_new(c, x->dtype, 1, &cnt);
  if (out) {
    if (x->dtype == LT_F64) masked_pick_f64(pm, lt_f64(xs), N, lt_f64(out));
    else masked_pick_f32(pm, lt_f32(xs), N, lt_f32(out));
    lt_node *node;
    if (lt_record(c, out, "masked_select", masked_select_backward, 1, &x, &node)) {
      lt_tensor_release(out);
      out = NULL;
    } else if (node) {
      node->reads = 0; /* only the saved mask */
      lt_node_save(node, 0, m);
    }
  }
  lt_tensor_release(m);
  lt_tensor_release(xs);
  return out;
}

lt_tensor *lt_op_nonzero(lt_ctx *c, lt_tensor *x) {
  int64_t N = lt_numel(x), cnt = 0;
  for (int64_t i = 0; i < N; i++) cnt += lt_get_flat(x, i) != 0;
  int64_t shape[2] = { cnt, x->ndim };
  lt_tensor *out = lt_tensor_new(c, LT_I64, 2, shape);
  if (!out) return NULL;
  int64_t *po = lt_i64(out);
  for (int64_t i = 0, k = 0; i < N; i++) {
    if (lt_get_flat(x, i) == 0) continue;
    int64_t rem = i;
    for (int d = x->ndim - 1; d >= 0; d--) {
      po[k * x->ndim + d] = rem % x->shape[d];
      rem /= x->shape[d];
    }
    k++;
  }
  return out;
}
