/*
 * ops_check.c — the argument checks every op family shares: dtype, in-place on a tensor that requires grad,
 * and the broadcast shape of two operands (lt_check.h). Below the ops and autograd: it calls no op.
 */
#include "lt_check.h"

#include "lt_errors.h"
#include "lt_size.h"

int lt_check_no_f64(lt_ctx *c, const char *op, const lt_tensor *t) {
  return t->dtype == LT_F64 ? lt_fail(c, LT_E_NO_F64, op) : LT_OK;
}

int lt_check_dtype(lt_ctx *c, const char *op, const char *what, const lt_tensor *t, lt_dtype want) {
  if (t->dtype == want) return LT_OK;
  if (want == LT_F32 && t->dtype == LT_F64) return lt_check_no_f64(c, op, t);
  return lt_fail(c, LT_E_DTYPE, op, what, lt_dtype_name(want), lt_dtype_name(t->dtype));
}

int lt_check_float(lt_ctx *c, const char *op, const char *what, const lt_tensor *t) {
  if (t->dtype == LT_F32 || t->dtype == LT_F64) return LT_OK;
  return lt_fail(c, LT_E_DTYPE, op, what, "float32 or float64", lt_dtype_name(t->dtype));
}

int lt_check_inplace(lt_ctx *c, const char *op, const lt_tensor *t) {
  if (c->grad_enabled && t->requires_grad) return lt_fail(c, LT_E_INPLACE_GRAD, op);
  return LT_OK;
}

int lt_broadcast_shape(lt_ctx *c, const char *op, const lt_tensor *a, const lt_tensor *b, int *ndim, int64_t *shape) {
  int n = a->ndim > b->ndim ? a->ndim : b->ndim;
  for (int d = 0; d < n; d++) {
    int da = d - (n - a->ndim), db = d - (n - b->ndim);
    int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      char b1[128], b2[128];
      return lt_fail(c, LT_E_BROADCAST, op, lt_shape_str(a, b1, sizeof b1), lt_shape_str(b, b2, sizeof b2));
    }
    shape[d] = sa == 1 ? sb : sa;
  }
  *ndim = n;
  return lt_check_size(c, op, n, shape); /* [2^31 x 1] + [1 x 2^32] has 2^63 elements */
}
