/*
 * ops_activation.c — SiLU, ELU, Softplus, Mish, Hardtanh, Hardswish, Hardsigmoid (forward and backward side
 * by side, one kernel per kind over contiguous float32, split over lutra's pool as ops_gelu.c is: each element
 * is computed by the same code whatever the split), and PReLU (a learned slope per channel, with its gradient).
 * The formulas and the values at the kinks are PyTorch 1.13's (aten/src/ATen/native/cpu/Activation.cpp).
 */
#include <math.h>

#include "lt_activation.h"
#include "lt_check.h"
#include "lt_errors.h"
#include "lt_ops.h"
#include "lt_pool.h"
#include "lt_simd.h"

static const char *const act_names[LT_AF_COUNT] = { "silu",     "elu",       "softplus",   "mish",
                                                    "hardtanh", "hardswish", "hardsigmoid" };
const char *lt_actfn_name(lt_actfn kind) { return act_names[kind]; }

typedef struct act_job {
  lt_actfn kind;
  const void *x, *g; /* input; incoming gradient (backward only); float32 or float64 (f64) */
  void *out;
  double p0, p1; /* rounded to float32 by its kernels */
  int64_t n;
  int f64;
} act_job;

/* The kernels over element type T (suffix S) and its maths (EXP, SIGMOID, TANH, LOG1P: lt_simd.h's fast
 * approximations for float32, libm for float64, asked for its precision): act_forward_range_S, and
 * act_backward_range_S (dL/dx = g * dy/dx, from the saved input). softplus1_S(v): log(1 + exp(v)) without
 * overflow: for large v it is v (PyTorch's softplus threshold plays this role there). */
// clang-format off
#define ACT_KERNELS(S, T, EXP, SIGMOID, TANH, LOG1P)                                                                  \
static inline T softplus1_##S(T v) { return v > (T)20 ? v : LOG1P(EXP(v)); }                                          \
                                                                                                                      \
LT_VECTOR_FN static void act_forward_range_##S(const act_job *j, int64_t lo, int64_t hi) {                            \
  const T *x = j->x;                                                                                                  \
  T *y = j->out, p0 = (T)j->p0, p1 = (T)j->p1;                                                                        \
  switch (j->kind) {                                                                                                  \
    case LT_AF_SILU:                                                                                                  \
      for (int64_t i = lo; i < hi; i++) y[i] = x[i] * SIGMOID(x[i]);                                                  \
      break;                                                                                                          \
    case LT_AF_ELU:                                                                                                   \
      for (int64_t i = lo; i < hi; i++) y[i] = x[i] > 0 ? x[i] : p0 * (EXP(x[i]) - (T)1.0);                           \
      break;                                                                                                          \
    case LT_AF_SOFTPLUS:                                                                                              \
      for (int64_t i = lo; i < hi; i++) y[i] = x[i] * p0 > p1 ? x[i] : LOG1P(EXP(x[i] * p0)) / p0;                    \
      break;                                                                                                          \
    case LT_AF_MISH:                                                                                                  \
      for (int64_t i = lo; i < hi; i++) y[i] = x[i] * TANH(softplus1_##S(x[i]));                                      \
      break;                                                                                                          \
    case LT_AF_HARDTANH:                                                                                              \
      for (int64_t i = lo; i < hi; i++) y[i] = x[i] < p0 ? p0 : (x[i] > p1 ? p1 : x[i]);                              \
      break;                                                                                                          \
    case LT_AF_HARDSWISH:                                                                                             \
      for (int64_t i = lo; i < hi; i++) {                                                                             \
        T r = x[i] + (T)3.0;                                                                                          \
        r = r < 0 ? 0 : (r > (T)6.0 ? (T)6.0 : r);                                                                    \
        y[i] = x[i] * r / (T)6.0;                                                                                     \
      }                                                                                                               \
      break;                                                                                                          \
    case LT_AF_HARDSIGMOID:                                                                                           \
      for (int64_t i = lo; i < hi; i++) {                                                                             \
        T r = x[i] + (T)3.0;                                                                                          \
        r = r < 0 ? 0 : (r > (T)6.0 ? (T)6.0 : r);                                                                    \
        y[i] = r / (T)6.0;                                                                                            \
      }                                                                                                               \
      break;                                                                                                          \
    case LT_AF_COUNT: break;                                                                                          \
  }                                                                                                                   \
}                                                                                                                     \
                                                                                                                      \
LT_VECTOR_FN static void act_backward_range_##S(const act_job *j, int64_t lo, int64_t hi) {                           \
  const T *x = j->x, *g = j->g;                                                                                       \
  T *r = j->out, p0 = (T)j->p0, p1 = (T)j->p1;                                                                        \
  switch (j->kind) {                                                                                                  \
    case LT_AF_SILU: /* s (1 + x (1 - s)) */                                                                          \
      for (int64_t i = lo; i < hi; i++) {                                                                             \
        T s = SIGMOID(x[i]);                                                                                          \
        r[i] = g[i] * s * ((T)1.0 + x[i] * ((T)1.0 - s));                                                             \
      }                                                                                                               \
      break;                                                                                                          \
    case LT_AF_ELU: /* alpha exp(x) below 0 */                                                                        \
      for (int64_t i = lo; i < hi; i++) r[i] = x[i] > 0 ? g[i] : g[i] * p0 * EXP(x[i]);                               \
      break;                                                                                                          \
    case LT_AF_SOFTPLUS: /* sigmoid(beta x), as z / (z + 1) with z = exp(beta x) */                                   \
      for (int64_t i = lo; i < hi; i++) {                                                                             \
        T z = EXP(x[i] * p0);                                                                                         \
        r[i] = x[i] * p0 > p1 ? g[i] : g[i] * z / (z + (T)1.0);                                                       \
      }                                                                                                               \
      break;                                                                                                          \
    case LT_AF_MISH: /* tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2) */                                                   \
      for (int64_t i = lo; i < hi; i++) {                                                                             \
        T t = TANH(softplus1_##S(x[i]));                                                                              \
        r[i] = g[i] * (t + x[i] * SIGMOID(x[i]) * ((T)1.0 - t * t));                                                  \
      }                                                                                                               \
      break;                                                                                                          \
    case LT_AF_HARDTANH: /* 0 at and beyond the bounds, as PyTorch's hardtanh_backward */                             \
      for (int64_t i = lo; i < hi; i++) r[i] = (x[i] <= p0 || x[i] >= p1) ? (T)0.0 : g[i];                            \
      break;                                                                                                          \
    case LT_AF_HARDSWISH: /* 0 below -3, x/3 + 1/2 on [-3, 3), 1 from 3 (PyTorch's vectorised kernel; its scalar      \
                             tail alone takes x/3 + 1/2 at 3) */                                                      \
      for (int64_t i = lo; i < hi; i++)                                                                              \
        r[i] = x[i] < -(T)3.0 ? (T)0.0 : (x[i] < (T)3.0 ? g[i] * (x[i] / (T)3.0 + (T)0.5) : g[i]);                   \
      break;                                                                                                          \
    case LT_AF_HARDSIGMOID: /* 1/6 strictly inside (-3, 3); PyTorch's one_sixth is 1.0f / 6.0f in float64 too */       \
      for (int64_t i = lo; i < hi; i++) r[i] = (x[i] > -(T)3.0 && x[i] < (T)3.0) ? g[i] * (T)(1.0f / 6.0f) : (T)0.0;  \
      break;                                                                                                          \
    case LT_AF_COUNT: break;                                                                                          \
  }                                                                                                                   \
}
// clang-format on
/* the logistic function in double, without overflow either side (as the float64 sigmoid op's) */
static inline double sigmoid_d(double x) { return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }
ACT_KERNELS(f, float, lt_expf, lt_sigmoidf, lt_tanhf, log1pf)
ACT_KERNELS(d, double, exp, sigmoid_d, tanh, log1p)

static void fwd_part(void *arg, int i, int nparts) {
  const act_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->n, i, nparts, 16, &lo, &hi);
  if (lo < hi && j->f64) act_forward_range_d(j, lo, hi);
  else if (lo < hi) act_forward_range_f(j, lo, hi);
}

static void bwd_part(void *arg, int i, int nparts) {
  const act_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->n, i, nparts, 16, &lo, &hi);
  if (lo < hi && j->f64) act_backward_range_d(j, lo, hi);
  else if (lo < hi) act_backward_range_f(j, lo, hi);
}

/* the transcendental kinds cost a few exp-sized units per element; the clamps one */
static void run(lt_ctx *c, lt_pool_fn fn, act_job *j) {
  int cost = (j->kind == LT_AF_HARDTANH || j->kind == LT_AF_HARDSWISH || j->kind == LT_AF_HARDSIGMOID) ? 1 : 3;
  int parts = lt_pool_parts(c->num_threads, j->n * cost, INT64_C(1) << 16);
  if (parts > 1) lt_pool_run(fn, j, parts);
  else fn(j, 0, 1);
}

/* node: i[0] = kind, f[0..1] = p0, p1 */
static int act_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *x = lt_op_contiguous(c, n->inputs[0]);
  lt_tensor *gc = x ? lt_op_contiguous(c, g) : NULL;
  lt_tensor *r = gc ? lt_tensor_new_like(c, x) : NULL;
  if (r) {
    const int f64 = x->dtype == LT_F64;
    act_job j = { (lt_actfn)n->i[0],
                  f64 ? (const void *)lt_f64(x) : lt_f32(x),
                  f64 ? (const void *)lt_f64(gc) : lt_f32(gc),
                  f64 ? (void *)lt_f64(r) : lt_f32(r),
                  n->f[0],
                  n->f[1],
                  lt_numel(x),
                  f64 };
    run(c, bwd_part, &j);
  }
  lt_tensor_release(x);
  lt_tensor_release(gc);
  gin[0] = r;
  return r ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_activation(lt_ctx *c, lt_actfn kind, lt_tensor *a, double p0, double p1) {
  if ((unsigned)kind >= LT_AF_COUNT) {
    lt_fail(c, "activation: unknown kind %d", (int)kind);
    return NULL;
  }
  const char *name = act_names[kind];
  if (lt_check_float(c, name, "input", a)) return NULL;
  if (kind == LT_AF_HARDTANH && !(p0 <= p1)) {
    lt_fail(c, "hardtanh: min_val %g must be less than or equal to max_val %g", p0, p1);
    return NULL;
  }
  if (kind == LT_AF_SOFTPLUS && p0 == 0) {
    lt_fail(c, "softplus: beta must not be 0");
    return NULL;
  }
  lt_tensor *x = lt_op_contiguous(c, a);
  lt_tensor *out = x ? lt_tensor_new_like(c, x) : NULL;
  if (out) {
    const int f64 = x->dtype == LT_F64;
    act_job j = { kind,        f64 ? (const void *)lt_f64(x) : lt_f32(x),
                  NULL,        f64 ? (void *)lt_f64(out) : lt_f32(out),
                  p0,          p1,
                  lt_numel(x), f64 };
    run(c, fwd_part, &j);
    lt_node *nd;
    if (lt_record(c, out, name, act_backward, 1, &a, &nd)) {
      lt_tensor_release(out);
      out = NULL;
    } else if (nd) {
      nd->i[0] = kind;
      nd->f[0] = p0;
      nd->f[1] = p1;
    }
  }
  lt_tensor_release(x);
  return out;
}

/* ---- PReLU ------------------------------------------------------------------------------------------ */

/* x viewed as [outer, C, inner] (C = 1 when one slope serves every element) */
static void prelu_layout(const lt_tensor *x, int64_t nw, int64_t *outer, int64_t *inner) {
  int64_t n = lt_numel(x);
  if (nw == 1) {
    *outer = 1;
    *inner = n;
    return;
  }
  *inner = 1;
  for (int d = 2; d < x->ndim; d++) *inner *= x->shape[d];
  *outer = *inner > 0 && nw > 0 ? n / (nw * *inner) : 0; /* 0 channels (weight [0]): nothing to do, no division */
}

/* prelu's loops over element type T (suffix S): y = x or slope * x; backward: gx likewise, and the slope's
 * gradient the sum of x g where x <= 0 (in double) */
// clang-format off
#define PRELU_KERNELS(S, T)                                                                                       \
  static void prelu_forward_##S(const T *px, const T *pw, T *py, int64_t nw, int64_t outer, int64_t inner) {      \
    for (int64_t o = 0; o < outer; o++)                                                                           \
      for (int64_t ch = 0; ch < nw; ch++) {                                                                       \
        int64_t base = (o * nw + ch) * inner;                                                                     \
        T s = pw[ch];                                                                                             \
        for (int64_t k = 0; k < inner; k++) py[base + k] = px[base + k] > 0 ? px[base + k] : s * px[base + k];   \
      }                                                                                                           \
  }                                                                                                               \
  static void prelu_backward_##S(const T *px, const T *pw, const T *pg, T *pgx, T *pgw, int64_t nw, int64_t outer, \
                                 int64_t inner) {                                                                 \
    for (int64_t ch = 0; ch < nw; ch++) {                                                                         \
      double acc = 0;                                                                                             \
      T s = pw[ch];                                                                                               \
      for (int64_t o = 0; o < outer; o++) {                                                                       \
        int64_t base = (o * nw + ch) * inner;                                                                     \
        for (int64_t k = 0; k < inner; k++) {                                                                     \
          T v = px[base + k], gv = pg[base + k];                                                                  \
          pgx[base + k] = v > 0 ? gv : s * gv;                                                                    \
          if (v <= 0) acc += (double)v * gv;                                                                      \
        }                                                                                                         \
      }                                                                                                           \
      pgw[ch] = (T)acc;                                                                                           \
    }                                                                                                             \
  }
// clang-format on
PRELU_KERNELS(f, float)
PRELU_KERNELS(d, double)

static int prelu_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *x = lt_op_contiguous(c, n->inputs[0]);
  lt_tensor *w = x ? lt_op_contiguous(c, n->inputs[1]) : NULL;
  lt_tensor *gc = w ? lt_op_contiguous(c, g) : NULL;
  lt_tensor *gx = gc ? lt_tensor_new_like(c, x) : NULL;
  lt_tensor *gw = gx ? lt_tensor_new_like(c, w) : NULL;
  if (gw) {
    int64_t nw = lt_numel(w), outer, inner;
    prelu_layout(x, nw, &outer, &inner);
    if (x->dtype == LT_F64)
      prelu_backward_d(lt_f64(x), lt_f64(w), lt_f64(gc), lt_f64(gx), lt_f64(gw), nw, outer, inner);
    else prelu_backward_f(lt_f32(x), lt_f32(w), lt_f32(gc), lt_f32(gx), lt_f32(gw), nw, outer, inner);
  }
  lt_tensor_release(x);
  lt_tensor_release(w);
  lt_tensor_release(gc);
  if (!gw) lt_tensor_release(gx);
  gin[0] = gw ? gx : NULL;
  gin[1] = gw;
  return gw ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_prelu(lt_ctx *c, lt_tensor *a, lt_tensor *w) {
  if (lt_check_float(c, "prelu", "input", a)) return NULL;
  if (w->dtype != a->dtype) {
    lt_fail(c, "prelu: input is %s and weight is %s: both must have the same float dtype", lt_dtype_name(a->dtype),
            lt_dtype_name(w->dtype));
    return NULL;
  }
  int64_t nw = lt_numel(w), channels = a->ndim >= 2 ? a->shape[1] : 1;
  if (w->ndim > 1 || (nw != 1 && nw != channels)) {
    char b1[128], b2[128];
    lt_fail(c, "prelu: weight %s must hold 1 slope or one per channel (dim 2 of the input %s: %lld)",
            lt_shape_str(w, b2, sizeof b2), lt_shape_str(a, b1, sizeof b1), (long long)channels);
    return NULL;
  }
  lt_tensor *x = lt_op_contiguous(c, a);
  lt_tensor *wc = x ? lt_op_contiguous(c, w) : NULL;
  lt_tensor *out = wc ? lt_tensor_new_like(c, x) : NULL;
  if (out) {
    int64_t outer, inner;
    prelu_layout(x, nw, &outer, &inner);
    if (x->dtype == LT_F64) prelu_forward_d(lt_f64(x), lt_f64(wc), lt_f64(out), nw, outer, inner);
    else prelu_forward_f(lt_f32(x), lt_f32(wc), lt_f32(out), nw, outer, inner);
    lt_tensor *ins[2] = { a, w };
    lt_node *nd;
    if (lt_record(c, out, "prelu", prelu_backward, 2, ins, &nd)) {
      lt_tensor_release(out);
      out = NULL;
    }
  }
  lt_tensor_release(x);
  lt_tensor_release(wc);
  return out;
}
