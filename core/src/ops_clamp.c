/*
 * ops_clamp.c — clamp and clamp_ with autograd: float32 through ops_unary.c's one-pass rows (split over the pool),
 * float64 as maximum then minimum with the bounds through the binary kernels both dtypes share. Its own file: the
 * binary ops' backward calls the unary ops, so ops_unary.c must not call the binary ops (tests/core_layers_spec.lua).
 */
#include "lt_ops.h"
#include "ops_ew_internal.h"

/* float64 clamp: maximum then minimum with the bounds, the binary kernels both dtypes share (NaN stays NaN,
 * as in the float32 kernel and PyTorch's); its gradient passes where lo <= x <= hi. No second kernel. */
static lt_tensor *clamp_f64(lt_ctx *c, lt_tensor *a, double lo, double hi) {
  lt_tensor *d = lt_op_detach(c, a);
  lt_tensor *t = d ? lt_op_binary_scalar(c, LT_MAXIMUM, d, lo, 0) : NULL;
  lt_tensor *out = t ? lt_op_binary_scalar(c, LT_MINIMUM, t, hi, 0) : NULL;
  lt_tensor_release(d);
  lt_tensor_release(t);
  return out;
}

static lt_tensor *clamp_grad_f64(lt_ctx *c, lt_tensor *x, lt_tensor *g, double lo, double hi) {
  lt_tensor *ge = lt_op_binary_scalar(c, LT_GE, x, lo, 0); /* float32 masks: g * mask stays float64 */
  lt_tensor *le = ge ? lt_op_binary_scalar(c, LT_LE, x, hi, 0) : NULL;
  lt_tensor *m = le ? lt_op_binary(c, LT_MUL, ge, le) : NULL;
  lt_tensor *r = m ? lt_op_binary(c, LT_MUL, g, m) : NULL;
  lt_tensor_release(ge);
  lt_tensor_release(le);
  lt_tensor_release(m);
  return r;
}

static int clamp_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  if (n->inputs[0]->dtype == LT_F64) {
    gin[0] = clamp_grad_f64(c, n->inputs[0], g, n->f[0], n->f[1]);
    return gin[0] ? LT_OK : LT_ERR;
  }
  lt_tensor *x = lt_op_contiguous(c, n->inputs[0]);
  lt_tensor *gc = x ? lt_op_contiguous(c, g) : NULL;
  lt_tensor *r = gc ? lt_tensor_new_like(c, x) : NULL;
  if (r) { lt_clamp_grad_rows_f32(c, lt_f32(x), lt_f32(gc), lt_f32(r), lt_numel(x), n->f[0], n->f[1]); }
  lt_tensor_release(x);
  lt_tensor_release(gc);
  gin[0] = r;
  return r ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_clamp(lt_ctx *c, lt_tensor *a, double lo, double hi) {
  int f64 = a->dtype == LT_F64;
  if (!f64 && lt_check_dtype(c, "clamp", "input", a, LT_F32)) return NULL;
  if (lo > hi) {
    lt_fail(c, "clamp: min %g is greater than max %g", lo, hi);
    return NULL;
  }
  lt_tensor *x = f64 ? lt_tensor_retain(a) : lt_op_contiguous(c, a);
  lt_tensor *out = !x ? NULL : f64 ? clamp_f64(c, x, lo, hi) : lt_tensor_new_like(c, x);
  if (out) {
    if (!f64) lt_clamp_rows_f32(c, lt_f32(x), lt_f32(out), lt_numel(x), lo, hi);
    lt_node *nd;
    if (lt_record(c, out, "clamp", clamp_backward, 1, &a, &nd)) {
      lt_tensor_release(out);
      out = NULL;
    } else if (nd) {
      nd->f[0] = lo;
      nd->f[1] = hi;
    }
  }
  lt_tensor_release(x);
  return out;
}

int lt_op_clamp_(lt_ctx *c, lt_tensor *a, double lo, double hi) {
  if (lt_check_inplace(c, "clamp_", a)) return LT_ERR;
  if (a->dtype != LT_F64 && lt_check_dtype(c, "clamp_", "the tensor updated in place", a, LT_F32)) return LT_ERR;
  if (lo > hi) return lt_fail(c, "clamp_: min %g is greater than max %g", lo, hi);
  if (a->dtype == LT_F64)
    return lt_op_binary_scalar_(c, LT_MAXIMUM, a, lo) ? LT_ERR : lt_op_binary_scalar_(c, LT_MINIMUM, a, hi);
  lt_mark_modified(a);
  if (lt_is_contiguous(a)) {
    lt_clamp_rows_f32(c, lt_f32(a), lt_f32(a), lt_numel(a), lo, hi);
    return LT_OK;
  }
  const int64_t *st[1] = { a->stride };
  lt_iter it;
  lt_iter_init(&it, a->ndim, a->shape, 1, st);
  float l = (float)lo, h = (float)hi, *p = lt_f32(a);
  LT_ITER_ROWS(&it, o0, o1, o2) {
    for (int64_t i = 0; i < it.n; i++) {
      float *v = p + o0 + i * it.s[0];
      *v = *v < l ? l : (*v > h ? h : *v);
    }
  }
  LT_ITER_ROWS_END(&it, o0, o1, o2);
  return LT_OK;
}
