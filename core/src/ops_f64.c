/* ops_f64.c — the float64 kernels (ops_f64.h). */
#include "ops_f64.h"

#include <math.h>

#include "lt_iter.h"
#include "ops_ew_internal.h"
#include "ops_ew_kernels.h"

/* The float64 kernels, from the source the float32 ones share (ops_ew_kernels.h); a comparison writes a
 * float32 mask */
BINARY_SCALAR(bin_d, double, pow)
BINARY_KERNEL(binary_range_d, double, double, bin_d)
BINARY_KERNEL(compare_range_d, double, float, bin_d)

void lt_binary_f64(lt_binop op, int ndim, const int64_t *shape, lt_tensor *out, const lt_tensor *x,
                   const lt_tensor *y) {
  lt_iter it;
  ew_binary_iter(&it, ndim, shape, out, x, y);
  int64_t total = it.rows * it.n;
  if (total == 0) return;
  if (out->dtype == LT_F32) compare_range_d(op, &it, lt_f32(out), lt_f64(x), lt_f64(y), 0, total);
  else binary_range_d(op, &it, lt_f64(out), lt_f64(x), lt_f64(y), 0, total);
}

__attribute__((always_inline)) static inline double un_d(lt_unop op, double x) {
  switch (op) {
    case LT_NEG: return -x;
    case LT_EXP: return exp(x);
    case LT_LOG: return log(x);
    case LT_SQRT: return sqrt(x);
    case LT_ABS: return fabs(x);
    case LT_TANH: return tanh(x);
    case LT_SIGMOID: return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); /* no overflow either side */
    case LT_RELU: return x < 0 ? 0.0 : x; /* NaN stays NaN (and -0 stays -0), as PyTorch's */
    case LT_SIN: return sin(x);
    case LT_COS: return cos(x);
    case LT_GELU: return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440));
    case LT_RSQRT: return 1.0 / sqrt(x);
    case LT_SIGN: return (double)((x > 0) - (x < 0));
    case LT_LOG1P: return log1p(x);
    case LT_SQUARE: return x * x;
  }
  return 0;
}

UNARY_KERNEL(unary_range_d, double, un_d)

void lt_unary_f64(lt_unop op, lt_tensor *out, const lt_tensor *x) {
  const int64_t *st[2] = { out->stride, x->stride };
  lt_iter it;
  lt_iter_init(&it, x->ndim, x->shape, 2, st);
  int64_t total = it.rows * it.n;
  if (total > 0) unary_range_d(op, &it, lt_f64(out), lt_f64(x), 0, total);
}

void lt_unary_grad_f64(lt_unop op, const double *x, const double *y, const double *g, double *r, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    double v = x[i], d = 0;
    switch (op) {
      case LT_NEG: d = -1; break;
      case LT_EXP: d = y[i]; break;
      case LT_LOG: d = 1.0 / v; break;
      case LT_SQRT: d = 0.5 / y[i]; break;
      case LT_ABS: d = (double)((v > 0) - (v < 0)); break;
      case LT_TANH: d = 1.0 - y[i] * y[i]; break;
      case LT_SIGMOID: d = y[i] * (1.0 - y[i]); break;
      case LT_RELU: d = v <= 0 ? 0.0 : 1.0; break;
      case LT_SIN: d = cos(v); break;
      case LT_COS: d = -sin(v); break;
      case LT_GELU:
        d = 0.5 * (1.0 + erf(v * 0.70710678118654752440)) + v * exp(-0.5 * v * v) * 0.39894228040143267794;
        break;
      case LT_RSQRT: d = -0.5 * y[i] * y[i] * y[i]; break;
      case LT_SIGN: d = 0; break;
      case LT_LOG1P: d = 1.0 / (1.0 + v); break;
      case LT_SQUARE: d = 2.0 * v; break;
    }
    /* relu passes a NaN's gradient as PyTorch's: g where x is not <= 0 */
    r[i] = op == LT_RELU ? (v <= 0 ? 0.0 : g[i]) : op == LT_SIGN ? 0.0 : g[i] * d;
  }
}

void lt_reduce_f64(lt_redop op, const double *x, int64_t outer, int64_t n, int64_t inner, double *out, int64_t *idx) {
  for (int64_t o = 0; o < outer; o++)
    for (int64_t k = 0; k < inner; k++) {
      const double *p = x + o * n * inner + k;
      double acc = p[0];
      int64_t bi = 0;
      for (int64_t j = 1; j < n; j++) {
        double v = p[j * inner];
        if (op == LT_RSUM || op == LT_RMEAN) acc += v;
        else if (!isnan(acc) && (isnan(v) || (op == LT_RMAX ? v > acc : v < acc))) {
          acc = v;
          bi = j;
        }
      }
      out[o * inner + k] = op == LT_RMEAN ? acc / (double)n : acc;
      if (idx) idx[o * inner + k] = bi;
    }
}

void lt_share_ties_f64(const double *x, int64_t n, double best, double g, double *r) {
  int64_t ties = 0;
  for (int64_t j = 0; j < n; j++) ties += x[j] == best || (isnan(best) && isnan(x[j]));
  for (int64_t j = 0; j < n; j++)
    if (x[j] == best || (isnan(best) && isnan(x[j]))) r[j] = g / (double)ties;
}
