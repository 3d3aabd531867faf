/* ops_create.c — creation, filling, copies and dtype conversion (random tensors: ops_random.c). */
#include <math.h>
#include <string.h>

#include "lt_errors.h"
#include "lt_iter.h"
#include "lt_ops.h"
#include "lt_simd.h"

lt_tensor *lt_op_full(lt_ctx *c, lt_dtype dt, int ndim, const int64_t *shape, double v) {
  lt_tensor *t = lt_tensor_new(c, dt, ndim, shape);
  if (t && lt_op_fill_(c, t, v)) {
    lt_tensor_release(t);
    return NULL;
  }
  if (t) t->storage->version = 0; /* a new tensor starts at version 0 (as PyTorch's): its first fill is no change */
  return t;
}

lt_tensor *lt_op_arange(lt_ctx *c, double a, double b, double step, lt_dtype dt) {
  if (!isfinite(a) || !isfinite(b) || !isfinite(step)) {
    lt_fail(c, "arange: start, end and step must be finite, got %g, %g, %g", a, b, step);
    return NULL;
  }
  if (step == 0) {
    lt_fail(c, "arange: step must be nonzero");
    return NULL;
  }
  double count = ceil((b - a) / step);
  if (count > (double)((int64_t)1 << 40)) { /* before the cast below, which would be undefined past 2^63 */
    lt_fail(c, "arange: [%g, %g) with step %g has %g elements: too many to allocate", a, b, step, count);
    return NULL;
  }
  if ((step > 0 && b < a) || (step < 0 && b > a)) {
    lt_fail(c, "arange: the range [%g, %g) is empty or reversed for step %g", a, b, step);
    return NULL;
  }
  int64_t n = (int64_t)ceil((b - a) / step);
  if (n < 0) n = 0;
  /* int64 values: the first and the last must lie in int64's range (the cast of one outside is undefined) */
  if (dt == LT_I64 && n > 0) {
    double last = a + (double)(n - 1) * step;
    double lo = a < last ? a : last, hi = a < last ? last : a;
    if (lo < -0x1p63 || hi >= 0x1p63) {
      lt_fail(c, "arange: int64 values must lie in -2^63..2^63-1, got [%g, %g) with step %g", a, b, step);
      return NULL;
    }
  }
  lt_tensor *t = lt_tensor_new(c, dt, 1, &n);
  if (!t) return NULL;
  for (int64_t i = 0; i < n; i++) {
    double v = a + (double)i * step;
    if (dt == LT_I64) lt_i64(t)[i] = (int64_t)v; /* between a and last (rounding is monotonic): in range */
    else if (dt == LT_F64) lt_f64(t)[i] = v;
    else lt_f32(t)[i] = (float)v;
  }
  return t;
}

lt_tensor *lt_op_eye(lt_ctx *c, int64_t n, int64_t m, lt_dtype dt) {
  int64_t shape[2] = { n, m };
  lt_tensor *t = lt_tensor_zeros(c, dt, 2, shape);
  if (!t) return NULL;
  for (int64_t i = 0; i < n && i < m; i++) {
    if (dt == LT_I64) lt_i64(t)[i * m + i] = 1;
    else if (dt == LT_F64) lt_f64(t)[i * m + i] = 1.0;
    else lt_f32(t)[i * m + i] = 1.0f;
  }
  return t;
}

int lt_op_fill_(lt_ctx *c, lt_tensor *t, double v) {
  if (lt_check_inplace(c, "fill_", t)) return LT_ERR;
  if (t->dtype == LT_I64) {
    /* NaN fails the first test, +-inf and 2^63 the range: their casts to int64 are undefined */
    if (!(v == floor(v) && v >= -0x1p63 && v < 0x1p63)) return lt_fail(c, LT_E_NOT_INT64, "fill_", v);
    lt_mark_modified(t);
    int64_t iv = (int64_t)v, *p = lt_i64(t);
    LT_FOR_EACH_ELEMENT(t, o, p[o] = iv);
  } else if (t->dtype == LT_F64) {
    lt_mark_modified(t);
    double *p = lt_f64(t);
    LT_FOR_EACH_ELEMENT(t, o, p[o] = v);
  } else {
    lt_mark_modified(t);
    float fv = (float)v, *p = lt_f32(t);
    if (lt_is_contiguous(t)) {
      int64_t n = lt_numel(t);
      for (int64_t i = 0; i < n; i++) p[i] = fv;
    } else {
      LT_FOR_EACH_ELEMENT(t, o, p[o] = fv);
    }
  }
  return LT_OK;
}

int lt_op_zero_(lt_ctx *c, lt_tensor *t) {
  if (lt_check_inplace(c, "zero_", t)) return LT_ERR;
  if (lt_is_contiguous(t)) {
    lt_mark_modified(t);
    memset((char *)t->storage->data + t->offset * (int64_t)lt_dtype_size(t->dtype), 0,
           (size_t)lt_numel(t) * lt_dtype_size(t->dtype));
    return LT_OK;
  }
  return lt_op_fill_(c, t, 0.0);
}

/* The strided copy of one dtype pair: TD, TS are the C types, PD, PS the accessors. */
#define COPY_ROWS(TD, PD, TS, PS)                                                         \
  {                                                                                       \
    TD *pd = PD(dst);                                                                     \
    const TS *ps = PS(src);                                                               \
    LT_ITER_ROWS(&it, o0, o1, o2) {                                                       \
      for (int64_t i = 0; i < it.n; i++) pd[o0 + i * it.s[0]] = (TD)ps[o1 + i * it.s[1]]; \
    }                                                                                     \
    LT_ITER_ROWS_END(&it, o0, o1, o2);                                                    \
  }
/* dst's dtype TD from any source dtype */
#define COPY_FROM_ANY(TD, PD)                              \
  switch (src->dtype) {                                    \
    case LT_F32: COPY_ROWS(TD, PD, float, lt_f32) break;   \
    case LT_F64: COPY_ROWS(TD, PD, double, lt_f64) break;  \
    case LT_I64: COPY_ROWS(TD, PD, int64_t, lt_i64) break; \
  }

/* dst <- src (broadcast), converting dtype (float64 to float32 rounds to nearest, as C's conversion and
 * PyTorch's do; to int64 truncates, after the caller checked the values fit). No autograd. */
LT_VECTOR_FN static void copy_raw(lt_tensor *dst, const lt_tensor *src) {
  int64_t sd[LT_MAX_DIM], ss[LT_MAX_DIM];
  lt_broadcast_strides(dst, dst->ndim, dst->shape, sd);
  lt_broadcast_strides(src, dst->ndim, dst->shape, ss);
  const int64_t *st[2] = { sd, ss };
  lt_iter it;
  lt_iter_init(&it, dst->ndim, dst->shape, 2, st);
  if (dst->dtype == LT_F32 && src->dtype == LT_F32) { /* the common case: memcpy of contiguous rows */
    float *pd = lt_f32(dst);
    const float *ps = lt_f32(src);
    LT_ITER_ROWS(&it, o0, o1, o2) {
      if (it.s[0] == 1 && it.s[1] == 1) memcpy(pd + o0, ps + o1, (size_t)it.n * sizeof(float));
      else
        for (int64_t i = 0; i < it.n; i++) pd[o0 + i * it.s[0]] = ps[o1 + i * it.s[1]];
    }
    LT_ITER_ROWS_END(&it, o0, o1, o2);
  } else if (dst->dtype == src->dtype) { /* int64 or float64: 8-byte words, bit for bit (a NaN keeps its payload) */
    COPY_ROWS(int64_t, lt_i64, int64_t, lt_i64)
  } else if (dst->dtype == LT_F32) {
    COPY_FROM_ANY(float, lt_f32)
  } else if (dst->dtype == LT_F64) {
    COPY_FROM_ANY(double, lt_f64)
  } else {
    COPY_FROM_ANY(int64_t, lt_i64)
  }
}

/* float -> int64 of NaN, +-inf or |v| >= 2^63 is undefined in C (x86 gives INT64_MIN): find the first such
 * value so the conversion fails with a message instead of writing garbage. Returns its flat index, or -1. */
static int64_t first_unrepresentable(const lt_tensor *src, double *bad) {
  if (src->dtype == LT_I64) return -1;
  for (int64_t i = 0, n = lt_numel(src); i < n; i++) {
    double v = lt_get_flat(src, i);
    if (!(v >= -0x1p63 && v < 0x1p63)) {
      *bad = v;
      return i;
    }
  }
  return -1;
}

static int fail_unrepresentable(lt_ctx *c, const char *op, int64_t i, double v) {
  return lt_fail(c, "%s: element %lld (flat, 1-based) is %g, which has no int64 value", op, (long long)i + 1, v);
}

int lt_op_copy_(lt_ctx *c, lt_tensor *dst, lt_tensor *src) {
  if (lt_check_inplace(c, "copy_", dst)) return LT_ERR;
  int ndim;
  int64_t shape[LT_MAX_DIM];
  if (lt_broadcast_shape(c, "copy_", dst, src, &ndim, shape)) return LT_ERR;
  int ok = ndim == dst->ndim;
  for (int d = 0; d < ndim && ok; d++) ok = shape[d] == dst->shape[d];
  if (!ok) {
    char b1[128], b2[128];
    return lt_fail(c, "copy_: source %s cannot be copied into %s", lt_shape_str(src, b1, sizeof b1),
                   lt_shape_str(dst, b2, sizeof b2));
  }
  double bad;
  int64_t at = dst->dtype == LT_I64 ? first_unrepresentable(src, &bad) : -1;
  if (at >= 0) return fail_unrepresentable(c, "copy_", at, bad);
  lt_mark_modified(dst);
  if (src->storage == dst->storage && !(src->offset == dst->offset && lt_is_contiguous(src) && lt_is_contiguous(dst))) {
    /* overlapping memory: go through a temporary */
    lt_tensor *tmp = lt_tensor_new(c, src->dtype, src->ndim, src->shape);
    if (!tmp) return LT_ERR;
    copy_raw(tmp, src);
    copy_raw(dst, tmp);
    lt_tensor_release(tmp);
    return LT_OK;
  }
  copy_raw(dst, src);
  return LT_OK;
}

static int identity_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  (void)c;
  (void)n;
  gin[0] = lt_tensor_retain(g);
  return LT_OK;
}

lt_tensor *lt_op_clone(lt_ctx *c, lt_tensor *t) {
  lt_tensor *out = lt_tensor_new_like(c, t);
  if (!out) return NULL;
  copy_raw(out, t);
  lt_node *nd;
  if (lt_is_float(t->dtype) && lt_record(c, out, "clone", identity_backward, 1, &t, &nd)) {
    lt_tensor_release(out);
    return NULL;
  }
  if (lt_is_float(t->dtype) && nd) nd->reads = 0; /* clone then change: what the error message advises */
  return out;
}

lt_tensor *lt_op_contiguous(lt_ctx *c, lt_tensor *t) {
  if (lt_is_contiguous(t)) return lt_tensor_retain(t);
  return lt_op_clone(c, t);
}

static int to_dtype_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  gin[0] = lt_op_to_dtype(c, g, (lt_dtype)n->i[0]);
  return gin[0] ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_to_dtype(lt_ctx *c, lt_tensor *t, lt_dtype dt) {
  if (t->dtype == dt) return lt_tensor_retain(t);
  double bad;
  int64_t at = dt == LT_I64 ? first_unrepresentable(t, &bad) : -1;
  if (at >= 0) {
    fail_unrepresentable(c, "to int64", at, bad);
    return NULL;
  }
  lt_tensor *out = lt_tensor_new(c, dt, t->ndim, t->shape);
  if (!out) return NULL;
  copy_raw(out, t);
  /* float32 <-> float64 is differentiable (the gradient converted back, as PyTorch's); conversions to or from
   * int64 carry no gradient */
  lt_node *nd;
  if (lt_is_float(dt) && lt_is_float(t->dtype)) {
    if (lt_record(c, out, "to", to_dtype_backward, 1, &t, &nd)) {
      lt_tensor_release(out);
      return NULL;
    }
    if (nd) {
      nd->reads = 0;
      nd->i[0] = t->dtype;
    }
  }
  return out;
}

lt_tensor *lt_op_detach(lt_ctx *c, lt_tensor *t) {
  return lt_tensor_alias(c, t, t->ndim, t->shape, t->stride, t->offset);
}
