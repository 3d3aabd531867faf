/* ops_shape.c — views (view, transpose, permute, narrow, select, squeeze, expand) and cat/stack,
 * each with its backward rule. Views share storage with their base. */
#include <stdlib.h>
#include <string.h>

#include "lt_errors.h"
#include "lt_ops.h"
#include "lt_size.h"

/* --- view / reshape ------------------------------------------------------------------------------ */

static int view_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *in = n->inputs[0];
  gin[0] = lt_op_reshape(c, g, in->ndim, in->shape);
  return gin[0] ? LT_OK : LT_ERR;
}

static int infer_shape(lt_ctx *c, const char *op, const lt_tensor *t, int ndim, const int64_t *shape, int64_t *out) {
  int64_t known = 1;
  int infer = -1, zero = 0, big = 0;
  char b1[128], b2[128];
  if (ndim > LT_MAX_DIM)
    return lt_fail(c, "%s: %d dimensions requested, at most %d are supported", op, ndim, LT_MAX_DIM);
  for (int d = 0; d < ndim; d++) {
    if (shape[d] == -1) {
      if (infer >= 0)
        return lt_fail(c, "%s: only one size may be -1, got %s", op, lt_dims_str(ndim, shape, b1, sizeof b1));
      infer = d;
    } else if (shape[d] < 0) {
      return lt_fail(c, "%s: invalid size %lld in %s", op, (long long)shape[d],
                     lt_dims_str(ndim, shape, b1, sizeof b1));
    } else if (shape[d] == 0) {
      zero = 1;
    } else if (known > INT64_MAX / shape[d]) {
      big = 1; /* more elements than an int64 counts: no tensor has them (the product would overflow) */
    } else {
      known *= shape[d];
    }
    out[d] = shape[d];
  }
  if (zero) known = 0;
  else if (big) known = -1; /* matches no numel, and no divisor below */
  int64_t n = lt_numel(t);
  if (infer >= 0) {
    if (known <= 0 || n % known != 0)
      return lt_fail(c, LT_E_VIEW_NUMEL, op, lt_dims_str(ndim, shape, b1, sizeof b1), (long long)n,
                     lt_shape_str(t, b2, sizeof b2));
    out[infer] = n / known;
  } else if (known != n) {
    return lt_fail(c, LT_E_VIEW_NUMEL, op, lt_dims_str(ndim, shape, b1, sizeof b1), (long long)n,
                   lt_shape_str(t, b2, sizeof b2));
  }
  return lt_check_size(c, op, ndim, out); /* a shape with a 0 holds 0 elements, but its strides must fit */
}

static lt_tensor *make_view(lt_ctx *c, lt_tensor *t, int ndim, const int64_t *shape, const int64_t *stride,
                            int64_t offset, const char *op, lt_backward_fn bw, lt_node **node) {
  lt_tensor *v = lt_tensor_alias(c, t, ndim, shape, stride, offset);
  if (!v) return NULL;
  if (lt_record(c, v, op, bw, 1, &t, node)) {
    lt_tensor_release(v);
    return NULL;
  }
  if (*node) (*node)->reads = 0; /* a view's gradient needs only shapes */
  return v;
}

/* Strides that show t with shape sh without copying, as torch's view computes them: the new shape must split
 * or merge only runs of dims that are laid out back to back in t (a [B, T, 3C] narrow seen as [B, T, 3, C]).
 * Returns 0 when no such strides exist. */
static int view_strides(const lt_tensor *t, int ndim, const int64_t *sh, int64_t *st) {
  if (t->ndim == 0 || lt_numel(t) == 0) {
    lt_contiguous_strides(ndim, sh, st);
    return 1;
  }
  int vd = ndim - 1;
  int64_t base = t->stride[t->ndim - 1], tn = 1, vn = 1;
  for (int td = t->ndim - 1; td >= 0; td--) {
    tn *= t->shape[td];
    /* the end of a run of back-to-back dims: the new dims over it get strides from its innermost stride */
    if (td == 0 || (t->shape[td - 1] != 1 && t->stride[td - 1] != tn * base)) {
      while (vd >= 0 && (vn < tn || sh[vd] == 1)) {
        st[vd] = vn * base;
        vn *= sh[vd];
        vd--;
      }
      if (vn != tn) return 0;
      if (td > 0) {
        base = t->stride[td - 1];
        tn = 1;
        vn = 1;
      }
    }
  }
  return vd == -1;
}

/* op names the user's call in messages: reshape of a contiguous tensor is a view, but the user wrote reshape */
static lt_tensor *view_as(lt_ctx *c, const char *op, lt_tensor *t, int ndim, const int64_t *shape) {
  int64_t sh[LT_MAX_DIM], st[LT_MAX_DIM];
  if (infer_shape(c, op, t, ndim, shape, sh)) return NULL;
  if (!view_strides(t, ndim, sh, st)) {
    char b1[128];
    lt_fail(c, LT_E_VIEW_STRIDE, lt_dims_str(ndim, sh, b1, sizeof b1));
    return NULL;
  }
  lt_node *nd;
  return make_view(c, t, ndim, sh, st, t->offset, "view", view_backward, &nd);
}

lt_tensor *lt_op_view(lt_ctx *c, lt_tensor *t, int ndim, const int64_t *shape) {
  return view_as(c, "view", t, ndim, shape);
}

lt_tensor *lt_op_reshape(lt_ctx *c, lt_tensor *t, int ndim, const int64_t *shape) {
  if (lt_is_contiguous(t)) return view_as(c, "reshape", t, ndim, shape);
  int64_t sh[LT_MAX_DIM];
  if (infer_shape(c, "reshape", t, ndim, shape, sh)) return NULL;
  lt_tensor *ct = lt_op_contiguous(c, t);
  if (!ct) return NULL;
  lt_tensor *v = lt_op_view(c, ct, ndim, sh);
  lt_tensor_release(ct);
  return v;
}

/* --- transpose / permute ----------------------------------------------------------------------- */

static int permute_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  int inv[LT_MAX_DIM];
  for (int d = 0; d < n->out_ndim; d++) inv[n->i[d]] = d;
  gin[0] = lt_op_permute(c, g, inv);
  return gin[0] ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_permute(lt_ctx *c, lt_tensor *t, const int *perm) {
  int64_t sh[LT_MAX_DIM], st[LT_MAX_DIM];
  int seen[LT_MAX_DIM] = { 0 };
  for (int d = 0; d < t->ndim; d++) {
    if (perm[d] < 0 || perm[d] >= t->ndim || seen[perm[d]]++) {
      lt_fail(c, "permute: the dims must be a permutation of 1..%d", t->ndim);
      return NULL;
    }
    sh[d] = t->shape[perm[d]];
    st[d] = t->stride[perm[d]];
  }
  lt_node *nd;
  lt_tensor *v = make_view(c, t, t->ndim, sh, st, t->offset, "permute", permute_backward, &nd);
  if (v && nd)
    for (int d = 0; d < t->ndim; d++) nd->i[d] = perm[d];
  return v;
}

lt_tensor *lt_op_transpose(lt_ctx *c, lt_tensor *t, int d1, int d2) {
  int bad = d1 < 0 || d1 >= t->ndim ? d1 : (d2 < 0 || d2 >= t->ndim ? d2 : -2);
  if (bad != -2) {
    lt_fail(c, LT_E_DIM_RANGE, "transpose", bad + 1, t->ndim, t->ndim, t->ndim);
    return NULL;
  }
  int perm[LT_MAX_DIM];
  for (int d = 0; d < t->ndim; d++) perm[d] = d;
  perm[d1] = d2;
  perm[d2] = d1;
  return lt_op_permute(c, t, perm);
}

/* --- narrow / select --------------------------------------------------------------------------- */

/* gradient of a slice: zeros of the input's shape with g written into the slice; or g added into the slice
 * of the input's gradient summed so far, when there is one to add into (the other slices of the same
 * tensor, as q, k and v of one projection: one buffer instead of a zeroed one per slice and their sum) */
static int slice_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *in = n->inputs[0];
  int dim = (int)n->i[0];
  int64_t start = n->i[1], len = n->i[2];
  int is_select = (int)n->i[3];
  const lt_tensor *ops[1] = { g };
  lt_tensor *acc = lt_grad_inplace_target(in, ops, 1);
  lt_tensor *z = acc ? lt_tensor_retain(acc) : lt_tensor_zeros(c, g->dtype, in->ndim, in->shape);
  if (!z) return LT_ERR;
  int64_t sh[LT_MAX_DIM];
  memcpy(sh, z->shape, sizeof sh);
  sh[dim] = len;
  lt_tensor *region = lt_tensor_alias(c, z, z->ndim, sh, z->stride, z->offset + z->stride[dim] * start);
  lt_tensor *gv = NULL;
  if (region && is_select) {
    int64_t gsh[LT_MAX_DIM], gst[LT_MAX_DIM];
    for (int d = 0, k = 0; d < z->ndim; d++) {
      if (d == dim) {
        gsh[d] = 1;
        gst[d] = 0;
      } else {
        gsh[d] = g->shape[k];
        gst[d] = g->stride[k];
        k++;
      }
    }
    gv = lt_tensor_alias(c, g, z->ndim, gsh, gst, g->offset);
  } else if (region) {
    gv = lt_tensor_retain(g);
  }
  int rc = !(region && gv) ? LT_ERR : acc ? lt_op_axpy_(c, region, 1.0, gv) : lt_op_copy_(c, region, gv);
  lt_tensor_release(region);
  lt_tensor_release(gv);
  if (rc || acc) {
    lt_tensor_release(z);
    return rc ? LT_ERR : LT_OK;
  }
  gin[0] = z;
  return LT_OK;
}

lt_tensor *lt_op_narrow(lt_ctx *c, lt_tensor *t, int dim, int64_t start, int64_t len) {
  char b1[128];
  if (dim < 0 || dim >= t->ndim) {
    lt_fail(c, LT_E_DIM_RANGE, "narrow", dim + 1, t->ndim, t->ndim, t->ndim);
    return NULL;
  }
  if (start < 0 || len < 0 || start + len > t->shape[dim]) {
    lt_fail(c, "narrow: start %lld and length %lld do not fit dim %d of size %lld (shape %s)", (long long)start + 1,
            (long long)len, dim + 1, (long long)t->shape[dim], lt_shape_str(t, b1, sizeof b1));
    return NULL;
  }
  int64_t sh[LT_MAX_DIM];
  memcpy(sh, t->shape, sizeof sh);
  sh[dim] = len;
  lt_node *nd;
  lt_tensor *v =
      make_view(c, t, t->ndim, sh, t->stride, t->offset + start * t->stride[dim], "narrow", slice_backward, &nd);
  if (v && nd) {
    nd->i[0] = dim;
    nd->i[1] = start;
    nd->i[2] = len;
    nd->i[3] = 0;
  }
  return v;
}

lt_tensor *lt_op_select(lt_ctx *c, lt_tensor *t, int dim, int64_t index) {
  if (dim < 0 || dim >= t->ndim) {
    lt_fail(c, LT_E_DIM_RANGE, "select", dim + 1, t->ndim, t->ndim, t->ndim);
    return NULL;
  }
  if (index < 0 || index >= t->shape[dim]) {
    lt_fail(c, LT_E_INDEX_RANGE, "select", (long long)index + 1, (long long)t->shape[dim], dim + 1);
    return NULL;
  }
  int64_t sh[LT_MAX_DIM], st[LT_MAX_DIM];
  for (int d = 0, k = 0; d < t->ndim; d++) {
    if (d == dim) continue;
    sh[k] = t->shape[d];
    st[k] = t->stride[d];
    k++;
  }
  lt_node *nd;
  lt_tensor *v =
      make_view(c, t, t->ndim - 1, sh, st, t->offset + index * t->stride[dim], "select", slice_backward, &nd);
  if (v && nd) {
    nd->i[0] = dim;
    nd->i[1] = index;
    nd->i[2] = 1;
    nd->i[3] = 1;
  }
  return v;
}

/* --- unsqueeze / squeeze / expand ----------------------------------------------------------------- */

lt_tensor *lt_op_unsqueeze(lt_ctx *c, lt_tensor *t, int dim) {
  if (dim < 0 || dim > t->ndim) {
    lt_fail(c, LT_E_DIM_RANGE, "unsqueeze", dim + 1, t->ndim + 1, t->ndim + 1, t->ndim + 1);
    return NULL;
  }
  if (t->ndim >= LT_MAX_DIM) {
    lt_fail(c, "unsqueeze: at most %d dimensions are supported", LT_MAX_DIM);
    return NULL;
  }
  int64_t sh[LT_MAX_DIM], st[LT_MAX_DIM];
  for (int d = 0, k = 0; d <= t->ndim; d++) {
    if (d == dim) {
      sh[d] = 1;
      st[d] = d < t->ndim ? t->stride[k] * t->shape[k] : 1;
    } else {
      sh[d] = t->shape[k];
      st[d] = t->stride[k];
      k++;
    }
  }
  lt_node *nd;
  return make_view(c, t, t->ndim + 1, sh, st, t->offset, "unsqueeze", view_backward, &nd);
}

lt_tensor *lt_op_squeeze(lt_ctx *c, lt_tensor *t, int dim) {
  int64_t sh[LT_MAX_DIM], st[LT_MAX_DIM];
  int k = 0;
  if (dim >= t->ndim) {
    lt_fail(c, LT_E_DIM_RANGE, "squeeze", dim + 1, t->ndim, t->ndim, t->ndim);
    return NULL;
  }
  for (int d = 0; d < t->ndim; d++) {
    int drop = t->shape[d] == 1 && (dim < 0 || dim == d);
    if (drop) continue;
    sh[k] = t->shape[d];
    st[k] = t->stride[d];
    k++;
  }
  lt_node *nd;
  return make_view(c, t, k, sh, st, t->offset, "squeeze", view_backward, &nd);
}

static int expand_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *in = n->inputs[0];
  gin[0] = lt_op_sum_to(c, g, in->ndim, in->shape);
  return gin[0] ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_expand(lt_ctx *c, lt_tensor *t, int ndim, const int64_t *shape) {
  char b1[128], b2[128];
  if (ndim < t->ndim || ndim > LT_MAX_DIM) {
    lt_fail(c, "expand: cannot expand %s to %s", lt_shape_str(t, b1, sizeof b1),
            lt_dims_str(ndim, shape, b2, sizeof b2));
    return NULL;
  }
  int64_t sh[LT_MAX_DIM];
  for (int d = 0; d < ndim; d++) {
    int td = d - (ndim - t->ndim);
    int64_t want = shape[d] == -1 && td >= 0 ? t->shape[td] : shape[d];
    if (want < 0) { /* (-1 keeps a dim's size; a new leading dim has none to keep) */
      lt_fail(c, "expand: cannot expand %s to %s (size %lld of dim %d is negative%s)", lt_shape_str(t, b1, sizeof b1),
              lt_dims_str(ndim, shape, b2, sizeof b2), (long long)want, d + 1,
              want == -1 ? ": -1 keeps a size only for the tensor's own dims" : "");
      return NULL;
    }
    if (td >= 0 && t->shape[td] != 1 && t->shape[td] != want) {
      lt_fail(c, "expand: cannot expand %s to %s (dim %d has size %lld, not 1)", lt_shape_str(t, b1, sizeof b1),
              lt_dims_str(ndim, shape, b2, sizeof b2), td + 1, (long long)t->shape[td]);
      return NULL;
    }
    if (want < 0) {
      lt_fail(c, "expand: cannot expand %s to %s (size %lld of dim %d is negative)", lt_shape_str(t, b1, sizeof b1),
              lt_dims_str(ndim, shape, b2, sizeof b2), (long long)want, d + 1);
      return NULL;
    }
    sh[d] = want;
  }
  if (lt_check_size(c, "expand", ndim, sh)) return NULL;
  lt_tensor *v = lt_broadcast_alias(c, t, ndim, sh);
  if (!v) return NULL;
  lt_node *nd;
  if (lt_record(c, v, "expand", expand_backward, 1, &t, &nd)) {
    lt_tensor_release(v);
    return NULL;
  }
  if (nd) nd->reads = 0;
  return v;
}

/* --- cat / stack ------------------------------------------------------------------------------ */

static int cat_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  int dim = (int)n->i[0];
  int64_t start = 0;
  for (int i = 0; i < n->ninputs; i++) {
    lt_tensor *in = n->inputs[i];
    int64_t len = in->shape[dim];
    if (in->requires_grad) {
      int64_t sh[LT_MAX_DIM];
      memcpy(sh, g->shape, sizeof sh);
      sh[dim] = len;
      gin[i] = lt_tensor_alias(c, g, g->ndim, sh, g->stride, g->offset + start * g->stride[dim]);
      if (!gin[i]) return LT_ERR;
    }
    start += len;
  }
  return LT_OK;
}

lt_tensor *lt_op_cat(lt_ctx *c, int n, lt_tensor *const *ts, int dim) {
  char b1[128], b2[128];
  if (n <= 0) {
    lt_fail(c, "cat: expected a non-empty list of tensors");
    return NULL;
  }
  const lt_tensor *t0 = ts[0];
  if (dim < 0 || dim >= t0->ndim) {
    lt_fail(c, LT_E_DIM_RANGE, "cat", dim + 1, t0->ndim, t0->ndim, t0->ndim);
    return NULL;
  }
  int64_t sh[LT_MAX_DIM];
  memcpy(sh, t0->shape, sizeof sh);
  sh[dim] = 0;
  for (int i = 0; i < n; i++) {
    const lt_tensor *t = ts[i];
    int ok = t->ndim == t0->ndim && t->dtype == t0->dtype;
    for (int d = 0; d < t0->ndim && ok; d++) ok = d == dim || t->shape[d] == t0->shape[d];
    if (!ok) {
      lt_fail(c, "cat: tensor %d has shape %s (%s), tensor 1 has %s (%s); all sizes but dim %d must match", i + 1,
              lt_shape_str(t, b1, sizeof b1), lt_dtype_name(t->dtype), lt_shape_str(t0, b2, sizeof b2),
              lt_dtype_name(t0->dtype), dim + 1);
      return NULL;
    }
    if (__builtin_add_overflow(sh[dim], t->shape[dim], &sh[dim])) sh[dim] = INT64_MAX; /* fails the check below */
  }
  if (lt_check_size(c, "cat", t0->ndim, sh)) return NULL;
  lt_tensor *out = lt_tensor_new(c, t0->dtype, t0->ndim, sh);
  if (!out) return NULL;
  int64_t start = 0;
  int saved = c->grad_enabled;
  c->grad_enabled = 0;
  for (int i = 0; i < n; i++) {
    int64_t rs[LT_MAX_DIM];
    memcpy(rs, sh, sizeof rs);
    rs[dim] = ts[i]->shape[dim];
    lt_tensor *region = lt_tensor_alias(c, out, out->ndim, rs, out->stride, start * out->stride[dim]);
    int rc = region ? lt_op_copy_(c, region, ts[i]) : LT_ERR;
    lt_tensor_release(region);
    if (rc) {
      c->grad_enabled = saved;
      lt_tensor_release(out);
      return NULL;
    }
    start += ts[i]->shape[dim];
  }
  c->grad_enabled = saved;
  lt_node *nd;
  if (lt_is_float(t0->dtype) && lt_record(c, out, "cat", cat_backward, n, ts, &nd)) {
    lt_tensor_release(out);
    return NULL;
  }
  if (out->grad_fn) {
    out->grad_fn->i[0] = dim;
    out->grad_fn->reads = 0; /* the gradient is g split by sizes */
  }
  return out;
}

lt_tensor *lt_op_stack(lt_ctx *c, int n, lt_tensor *const *ts, int dim) {
  if (n <= 0) {
    lt_fail(c, "stack: expected a non-empty list of tensors");
    return NULL;
  }
  for (int i = 1; i < n; i++)
    if (!lt_same_shape(ts[i], ts[0])) {
      char b1[128], b2[128];
      lt_fail(c, "stack: tensor %d has shape %s, tensor 1 has %s (all must match)", i + 1,
              lt_shape_str(ts[i], b1, sizeof b1), lt_shape_str(ts[0], b2, sizeof b2));
      return NULL;
    }
  if (dim < 0 || dim > ts[0]->ndim) {
    lt_fail(c, LT_E_DIM_RANGE, "stack", dim + 1, ts[0]->ndim + 1, ts[0]->ndim + 1, ts[0]->ndim + 1);
    return NULL;
  }
  lt_tensor **us = calloc((size_t)n, sizeof *us);
  if (!us) {
    lt_fail(c, LT_E_OOM, sizeof *us * (size_t)n);
    return NULL;
  }
  lt_tensor *out = NULL;
  int i;
  for (i = 0; i < n; i++)
    if (!(us[i] = lt_op_unsqueeze(c, ts[i], dim))) break;
  if (i == n) out = lt_op_cat(c, n, us, dim);
  for (int k = 0; k < n; k++) lt_tensor_release(us[k]);
  free(us);
  return out;
}
