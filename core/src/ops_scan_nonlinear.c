/*
 * ops_scan_nonlinear.c — cummax / cummin (values and indices) and logcumsumexp along a dim, float32 and float64 from one
 * body each (the line loops are generated for both element types), with their backward rules. Like ops_scan.c they
 * work on a contiguous copy one line at a time (lt_lines.h).
 */
#include <math.h>

#include "lt_lines.h"
#include "lt_ops.h"

/* a scan's dim (0-based; a 0-dim tensor has dim 0, as PyTorch's): LT_ERR with the message when out of range */
static int check_scan_dim(lt_ctx *c, const char *name, const lt_tensor *a, int dim) {
  if (dim < 0 || (a->ndim > 0 && dim >= a->ndim) || (a->ndim == 0 && dim != 0))
    return lt_fail(c, "%s: dim %d is out of range for a tensor with %d dims", name, dim + 1, a->ndim);
  return LT_OK;
}

/* ---- cummax / cummin ------------------------------------------------------------------------------------------ */

/* the running extreme of each line and where it came from: a later equal value takes over (>= / <=, as PyTorch's),
 * a NaN takes over and stays until the next NaN */
#define CUMEXT_LINES(T, SUFFIX, ISNAN)                                                      \
  static void cumext_##SUFFIX(const T *x, T *y, int64_t *idx, const lt_lines *l, int max) { \
    for (int64_t k = 0, nl = lt_lines_count(l); k < nl; k++) {                              \
      int64_t b = lt_line_base(l, k), bi = 0;                                               \
      T best = x[b];                                                                        \
      for (int64_t j = 0; j < l->n; j++) {                                                  \
        T v = x[b + j * l->inner];                                                          \
        if (ISNAN(v) || (!ISNAN(best) && (max ? v >= best : v <= best))) {                  \
          best = v;                                                                         \
          bi = j;                                                                           \
        }                                                                                   \
        y[b + j * l->inner] = best;                                                         \
        idx[b + j * l->inner] = bi;                                                         \
      }                                                                                     \
    }                                                                                       \
  }
#define NEVER_NAN(v) ((void)(v), 0)
CUMEXT_LINES(float, f32, isnan)
CUMEXT_LINES(double, f64, isnan)
CUMEXT_LINES(int64_t, i64, NEVER_NAN)

/* the gradient of each value goes to the element it came from: r[line, idx_j] += g_j */
#define CUMEXT_GRAD(T, SUFFIX)                                                                           \
  static void cumext_grad_##SUFFIX(const T *g, const int64_t *idx, T *r, const lt_lines *l) {            \
    for (int64_t k = 0, nl = lt_lines_count(l); k < nl; k++) {                                           \
      int64_t b = lt_line_base(l, k);                                                                    \
      for (int64_t j = 0; j < l->n; j++) r[b + idx[b + j * l->inner] * l->inner] += g[b + j * l->inner]; \
    }                                                                                                    \
  }
CUMEXT_GRAD(float, f32)
CUMEXT_GRAD(double, f64)

static int cumext_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *x = n->inputs[0];
  lt_tensor *gc = lt_op_to_dtype(c, g, x->dtype);
  lt_tensor *gcc = gc ? lt_op_contiguous(c, gc) : NULL;
  lt_tensor *r = gcc ? lt_tensor_zeros(c, x->dtype, x->ndim, x->shape) : NULL;
  if (r) {
    lt_lines l = lt_lines_of(r, (int)n->i[0]);
    const int64_t *idx = lt_i64(n->saved[0]);
    if (x->dtype == LT_F64) cumext_grad_f64(lt_f64(gcc), idx, lt_f64(r), &l);
    else cumext_grad_f32(lt_f32(gcc), idx, lt_f32(r), &l);
  }
  lt_tensor_release(gc);
  lt_tensor_release(gcc);
  gin[0] = r;
  return r ? LT_OK : LT_ERR;
}

int lt_op_cumext(lt_ctx *c, lt_tensor *a, int dim, int max, lt_tensor **values, lt_tensor **indices) {
  const char *name = max ? "cummax" : "cummin";
  *values = *indices = NULL;
  if (check_scan_dim(c, name, a, dim)) return LT_ERR;
  lt_tensor *x = lt_op_contiguous(c, a);
  lt_tensor *v = x ? lt_tensor_new_like(c, x) : NULL;
  lt_tensor *i = v ? lt_tensor_new(c, LT_I64, x->ndim, x->shape) : NULL;
  if (!i) {
    lt_tensor_release(x);
    lt_tensor_release(v);
    return LT_ERR;
  }
  lt_lines l = lt_lines_of(x, a->ndim ? dim : -1);
  if (x->dtype == LT_F64) cumext_f64(lt_f64(x), lt_f64(v), lt_i64(i), &l, max);
  else if (x->dtype == LT_I64) cumext_i64(lt_i64(x), lt_i64(v), lt_i64(i), &l, max);
  else cumext_f32(lt_f32(x), lt_f32(v), lt_i64(i), &l, max);
  lt_tensor_release(x);
  lt_node *nd = NULL;
  if (a->dtype != LT_I64 && lt_record(c, v, name, cumext_backward, 1, &a, &nd)) {
    lt_tensor_release(v);
    lt_tensor_release(i);
    return LT_ERR;
  }
  if (nd) {
    nd->reads = 0; /* the gradient needs the indices only */
    nd->i[0] = a->ndim ? dim : -1;
    lt_node_save(nd, 0, i);
  }
  *values = v;
  *indices = i;
  return LT_OK;
}

/* ---- logcumsumexp ------------------------------------------------------------------------------------------- */

/* log(e^a + e^b) without overflow: the larger plus log1p of the smaller's share; -inf with -inf is -inf */
static inline double log_add_exp(double a, double b) {
  double m = a > b ? a : b, d = a > b ? b - a : a - b;
  if (m == -INFINITY) return -INFINITY;
  if (isnan(a) || isnan(b)) return NAN;
  return m + log1p(exp(d));
}

/* y_j = log(e^y_{j-1} + e^x_j), accumulated in double; backward: r_j = e^(x_j - y_j) T_j with
 * T_j = g_j + e^(y_j - y_{j+1}) T_{j+1}, whose factors are <= 1 (y grows along the line), so nothing overflows */
#define LCSE_LINES(T, SUFFIX)                                                                   \
  static void lcse_##SUFFIX(const T *x, T *y, const lt_lines *l) {                              \
    for (int64_t k = 0, nl = lt_lines_count(l); k < nl; k++) {                                  \
      int64_t b = lt_line_base(l, k);                                                           \
      double acc = -INFINITY;                                                                   \
      for (int64_t j = 0; j < l->n; j++) {                                                      \
        acc = log_add_exp(acc, (double)x[b + j * l->inner]);                                    \
        y[b + j * l->inner] = (T)acc;                                                           \
      }                                                                                         \
    }                                                                                           \
  }                                                                                             \
  static void lcse_grad_##SUFFIX(const T *x, const T *y, const T *g, T *r, const lt_lines *l) { \
    for (int64_t k = 0, nl = lt_lines_count(l); k < nl; k++) {                                  \
      int64_t b = lt_line_base(l, k);                                                           \
      double t = 0, next_y = 0;                                                                 \
      for (int64_t j = l->n - 1; j >= 0; j--) {                                                 \
        int64_t o = b + j * l->inner;                                                           \
        double yj = y[o];                                                                       \
        double f = j == l->n - 1 || yj == next_y ? 1.0 : exp(yj - next_y);                      \
        t = g[o] + (j == l->n - 1 ? 0.0 : f * t);                                               \
        r[o] = x[o] == -INFINITY ? 0 : (T)(exp((double)x[o] - yj) * t);                         \
        next_y = yj;                                                                            \
      }                                                                                         \
    }                                                                                           \
  }
LCSE_LINES(float, f32)
LCSE_LINES(double, f64)

static int lcse_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *x = lt_op_contiguous(c, n->inputs[0]);
  lt_tensor *y = x ? lt_op_contiguous(c, n->saved[0]) : NULL;
  lt_tensor *gc = y ? lt_op_to_dtype(c, g, x->dtype) : NULL;
  lt_tensor *gcc = gc ? lt_op_contiguous(c, gc) : NULL;
  lt_tensor *r = gcc ? lt_tensor_new_like(c, x) : NULL;
  if (r) {
    lt_lines l = lt_lines_of(x, (int)n->i[0]);
    if (x->dtype == LT_F64) lcse_grad_f64(lt_f64(x), lt_f64(y), lt_f64(gcc), lt_f64(r), &l);
    else lcse_grad_f32(lt_f32(x), lt_f32(y), lt_f32(gcc), lt_f32(r), &l);
  }
  lt_tensor_release(x);
  lt_tensor_release(y);
  lt_tensor_release(gc);
  lt_tensor_release(gcc);
  gin[0] = r;
  return r ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_logcumsumexp(lt_ctx *c, lt_tensor *a, int dim) {
  if (check_scan_dim(c, "logcumsumexp", a, dim)) return NULL;
  lt_tensor *fa = lt_op_to_dtype(c, a, a->dtype == LT_F64 ? LT_F64 : LT_F32);
  lt_tensor *x = fa ? lt_op_contiguous(c, fa) : NULL;
  lt_tensor *out = x ? lt_tensor_new_like(c, x) : NULL;
  if (out) {
    lt_lines l = lt_lines_of(x, a->ndim ? dim : -1);
    if (x->dtype == LT_F64) lcse_f64(lt_f64(x), lt_f64(out), &l);
    else lcse_f32(lt_f32(x), lt_f32(out), &l);
    lt_node *nd;
    if (lt_record(c, out, "logcumsumexp", lcse_backward, 1, &fa, &nd)) {
      lt_tensor_release(out);
      out = NULL;
    } else if (nd) {
      nd->i[0] = a->ndim ? dim : -1;
      if (lt_node_save_output(c, nd, 0, out)) {
        lt_tensor_release(out);
        out = NULL;
      }
    }
  }
  lt_tensor_release(x);
  lt_tensor_release(fa);
  return out;
}
