/* ops_softmax.c — softmax and log_softmax along a dim (numerically stable), with backward. */
#include <math.h>

#include "lt_errors.h"
#include "lt_ops.h"
#include "lt_simd.h"

static void dims3(const lt_tensor *a, int dim, int64_t *outer, int64_t *n, int64_t *inner) {
  *outer = 1; *inner = 1;
  for (int d = 0; d < dim; d++) *outer *= a->shape[d];
  *n = a->ndim ? a->shape[dim] : 1;
  for (int d = dim + 1; d < a->ndim; d++) *inner *= a->shape[d];
}

LT_VECTOR_FN static void softmax_rows(const float *x, float *y, int64_t outer, int64_t n, int64_t inner,
                                     int log_form) {
  if (inner == 1) { /* the common case: contiguous rows, vectorised */
    for (int64_t o = 0; o < outer; o++) {
      const float *px = x + o * n;
      float *py = y + o * n;
      float mx = -INFINITY;
      for (int64_t j = 0; j < n; j++) mx = px[j] > mx ? px[j] : mx;
      for (int64_t j = 0; j < n; j++) py[j] = lt_expf(px[j] - mx);
      double s = lt_sum_f32(py, n);
      if (log_form) {
        float lse = mx + (float)log(s);
        for (int64_t j = 0; j < n; j++) py[j] = px[j] - lse;
      } else {
        float inv = (float)(1.0 / s);
        for (int64_t j = 0; j < n; j++) py[j] *= inv;
      }
    }
    return;
  }
  for (int64_t o = 0; o < outer; o++)
    for (int64_t k = 0; k < inner; k++) {
      const float *px = x + o * n * inner + k;
      float *py = y + o * n * inner + k;
      float mx = -INFINITY;
      for (int64_t j = 0; j < n; j++) mx = px[j * inner] > mx ? px[j * inner] : mx;
      double s = 0;
      for (int64_t j = 0; j < n; j++) s += lt_expf(px[j * inner] - mx);
      if (log_form) {
        float lse = mx + (float)log(s);
        for (int64_t j = 0; j < n; j++) py[j * inner] = px[j * inner] - lse;
      } else {
        float inv = (float)(1.0 / s);
        for (int64_t j = 0; j < n; j++) py[j * inner] = expf(px[j * inner] - mx) * inv;
      }
    }
}

LT_VECTOR_FN static void softmax_grad_rows(const float *py, const float *pg, float *pr, int64_t outer, int64_t n,
                                          int64_t inner, int log_form);

static int softmax_backward(lt_ctx *c, lt_node *nd, lt_tensor *g, lt_tensor **gin) {
  int dim = (int)nd->i[0], log_form = (int)nd->i[1];
  lt_tensor *y = nd->saved[0];
  lt_tensor *gc = lt_op_contiguous(c, g);
  lt_tensor *r = gc ? lt_tensor_new_like(c, y) : NULL;
  if (!r) { lt_tensor_release(gc); return LT_ERR; }
  int64_t outer, n, inner;
  dims3(y, dim, &outer, &n, &inner);
  softmax_grad_rows(lt_f32(y), lt_f32(gc), lt_f32(r), outer, n, inner, log_form);
  lt_tensor_release(gc);
  gin[0] = r;
  return LT_OK;
}

LT_VECTOR_FN static void softmax_grad_rows(const float *py, const float *pg, float *pr, int64_t outer, int64_t n,
                                          int64_t inner, int log_form) {
  for (int64_t o = 0; o < outer; o++)
    for (int64_t k = 0; k < inner; k++) {
      int64_t base = o * n * inner + k;
      double s = 0;
      if (log_form) { /* dx = g - softmax * sum(g) */
        for (int64_t j = 0; j < n; j++) s += pg[base + j * inner];
        for (int64_t j = 0; j < n; j++) pr[base + j * inner] = pg[base + j * inner] - lt_expf(py[base + j * inner]) * (float)s;
      } else { /* dx = y * (g - sum(g*y)) */
        for (int64_t j = 0; j < n; j++) s += (double)pg[base + j * inner] * py[base + j * inner];
        for (int64_t j = 0; j < n; j++) pr[base + j * inner] = py[base + j * inner] * (pg[base + j * inner] - (float)s);
      }
    }
}

static lt_tensor *softmax_impl(lt_ctx *c, lt_tensor *a, int dim, int log_form) {
  const char *name = log_form ? "log_softmax" : "softmax";
  if (lt_check_dtype(c, name, "input", a, LT_F32)) return NULL;
  if (a->ndim > 0 && (dim < 0 || dim >= a->ndim)) {
    lt_fail(c, LT_E_DIM_RANGE, name, dim + 1, a->ndim, a->ndim, a->ndim);
    return NULL;
  }
  lt_tensor *x = lt_op_contiguous(c, a);
  lt_tensor *y = x ? lt_tensor_new_like(c, x) : NULL;
  if (!y) { lt_tensor_release(x); return NULL; }
  int64_t outer, n, inner;
  dims3(x, dim, &outer, &n, &inner);
  softmax_rows(lt_f32(x), lt_f32(y), outer, n, inner, log_form);
  lt_tensor_release(x);
  lt_node *nd;
  if (lt_record(c, y, name, softmax_backward, 1, &a, &nd)) { lt_tensor_release(y); return NULL; }
  if (nd) {
    nd->i[0] = dim;
    nd->i[1] = log_form;
    if (lt_node_save_output(c, nd, 0, y)) { lt_tensor_release(y); return NULL; }
  }
  return y;
}

lt_tensor *lt_op_softmax(lt_ctx *c, lt_tensor *a, int dim) { return softmax_impl(c, a, dim, 0); }
lt_tensor *lt_op_log_softmax(lt_ctx *c, lt_tensor *a, int dim) { return softmax_impl(c, a, dim, 1); }
