/*
 * ops_unary.c — unary maths and activations (neg, exp, log ... gelu, square), leaky_relu and clamp, and the
 * ReLU fused into the op before it, with their backward rules. The kernels are split over the pool like the
 * other elementwise kernels (ops_ew_internal.h).
 */
#include <math.h>

#include "lt_ops.h"
#include "lt_simd.h"
#include "ops_ew_internal.h"
#include "ops_ew_kernels.h"
#include "ops_f64.h"

static const char *const unop_names[] = { "neg", "exp", "log",  "sqrt",  "abs",  "tanh",  "sigmoid", "relu",
                                          "sin", "cos", "gelu", "rsqrt", "sign", "log1p", "square" };

/* ---- unary ------------------------------------------------------------------------------------ */

static inline float gelu_f(float x) { /* 0.5 x (1 + erf(x / sqrt 2)) */
  float h = 0.5f * x;
  return __builtin_fmaf(h, lt_erff(x * 0.70710678118654752f), h);
}

__attribute__((always_inline)) static inline float un_f(lt_unop op, float x) {
  switch (op) {
    case LT_NEG: return -x;
    case LT_EXP: return lt_expf(x);
    case LT_LOG: return logf(x);
    case LT_SQRT: return sqrtf(x);
    case LT_ABS: return fabsf(x);
    case LT_TANH: return lt_tanhf(x);
    case LT_SIGMOID: return lt_sigmoidf(x);
    case LT_RELU: return x < 0 ? 0.0f : x; /* NaN stays NaN (and -0 stays -0), as PyTorch's */
    case LT_SIN: return sinf(x);
    case LT_COS: return cosf(x);
    case LT_GELU: return gelu_f(x);
    case LT_RSQRT: return 1.0f / sqrtf(x);
    case LT_SIGN: return (float)((x > 0) - (x < 0));
    case LT_LOG1P: return log1pf(x);
    case LT_SQUARE: return x * x;
  }
  return 0;
}

/* the float32 walk, from the source the float64 one shares (ops_ew_kernels.h) */
UNARY_KERNEL(unary_range, float, un_f)

/* Work per element relative to a one-flop op: lt_expf-based ops vectorise (~0.6 ns an element on one core,
 * twice a one-flop op), libm calls do not (log: ~5 ns). */
static int unary_cost(lt_unop op) {
  switch (op) {
    case LT_EXP:
    case LT_TANH:
    case LT_SIGMOID:
    case LT_SQRT:
    case LT_RSQRT: return 2;
    case LT_GELU: return 3; /* lt_erff + lt_expf, vectorised */
    case LT_LOG:
    case LT_SIN:
    case LT_COS:
    case LT_LOG1P: return 4;
    default: return 1;
  }
}

static void unary_part(void *arg, int i, int nparts) {
  const ew_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->total, i, nparts, 16, &lo, &hi);
  if (lo < hi) unary_range((lt_unop)j->op, &j->it, j->po, j->px, lo, hi);
}

static void unary_f32(lt_ctx *c, lt_unop op, lt_tensor *out, const lt_tensor *x) {
  const int64_t *st[2] = { out->stride, x->stride };
  ew_job j = { .op = op, .po = lt_f32(out), .px = lt_f32(x) };
  lt_iter_init(&j.it, x->ndim, x->shape, 2, st);
  j.total = j.it.rows * j.it.n;
  if (j.total == 0) return;
  int parts = overlaps(out, x) ? 1 : ew_parts(c, j.total, unary_cost(op));
  if (parts > 1) lt_pool_run(unary_part, &j, parts);
  else unary_range(op, &j.it, j.po, j.px, 0, j.total);
}

LT_VECTOR_FN static void unary_grad_kernel(lt_unop op, const float *px, const float *py, const float *pg, float *pr,
                                           int64_t N);

typedef struct grad_job {
  lt_unop op;
  const float *px, *py, *pg;
  float *pr;
  int64_t n;
} grad_job;

static void unary_grad_part(void *arg, int i, int nparts) {
  const grad_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->n, i, nparts, 16, &lo, &hi);
  if (lo < hi) unary_grad_kernel(j->op, j->px + lo, j->py ? j->py + lo : NULL, j->pg + lo, j->pr + lo, hi - lo);
}

/* One fused pass: gin = g * f'(x), using the saved output where that is cheaper. */
static int unary_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_unop op = (lt_unop)n->i[0];
  lt_tensor *x = lt_op_contiguous(c, n->inputs[0]);
  lt_tensor *y = n->saved[0] ? lt_op_contiguous(c, n->saved[0]) : NULL;
  lt_tensor *gc = lt_op_contiguous(c, g);
  lt_tensor *r = (x && gc) ? lt_tensor_new_like(c, x) : NULL;
  if (!r || (n->saved[0] && !y)) {
    lt_tensor_release(x);
    lt_tensor_release(y);
    lt_tensor_release(gc);
    lt_tensor_release(r);
    return LT_ERR;
  }
  if (x->dtype == LT_F64) {
    lt_unary_grad_f64(op, lt_f64(x), y ? lt_f64(y) : NULL, lt_f64(gc), lt_f64(r), lt_numel(x));
  } else {
    grad_job j = { op, lt_f32(x), y ? lt_f32(y) : NULL, lt_f32(gc), lt_f32(r), lt_numel(x) };
    int parts = ew_parts(c, j.n, unary_cost(op));
    if (parts > 1) lt_pool_run(unary_grad_part, &j, parts);
    else unary_grad_kernel(op, j.px, j.py, j.pg, j.pr, j.n);
  }
  lt_tensor_release(x);
  lt_tensor_release(y);
  lt_tensor_release(gc);
  gin[0] = r;
  return LT_OK;
}

LT_VECTOR_FN static void unary_grad_kernel(lt_unop op, const float *px, const float *py, const float *pg, float *pr,
                                           int64_t N) {
  switch (op) {
    case LT_NEG:
      for (int64_t i = 0; i < N; i++) pr[i] = -pg[i];
      break;
    case LT_EXP:
      for (int64_t i = 0; i < N; i++) pr[i] = pg[i] * py[i];
      break;
    case LT_LOG:
      for (int64_t i = 0; i < N; i++) pr[i] = pg[i] / px[i];
      break;
    case LT_SQRT:
      for (int64_t i = 0; i < N; i++) pr[i] = pg[i] * 0.5f / py[i];
      break;
    case LT_ABS:
      for (int64_t i = 0; i < N; i++) pr[i] = pg[i] * (float)((px[i] > 0) - (px[i] < 0));
      break;
    case LT_TANH:
      for (int64_t i = 0; i < N; i++) pr[i] = pg[i] * (1.0f - py[i] * py[i]);
      break;
    case LT_SIGMOID:
      for (int64_t i = 0; i < N; i++) pr[i] = pg[i] * py[i] * (1.0f - py[i]);
      break;
    case LT_RELU:
      for (int64_t i = 0; i < N; i++) pr[i] = px[i] <= 0 ? 0.0f : pg[i]; /* a NaN passes g, as PyTorch's */
      break;
    case LT_SIN:
      for (int64_t i = 0; i < N; i++) pr[i] = pg[i] * cosf(px[i]);
      break;
    case LT_COS:
      for (int64_t i = 0; i < N; i++) pr[i] = -pg[i] * sinf(px[i]);
      break;
    case LT_GELU:
      for (int64_t i = 0; i < N; i++) {
        float v = px[i];
        float cdf = 0.5f * (1.0f + lt_erff(v * 0.70710678118654752f));
        float pdf = lt_expf(-0.5f * v * v) * 0.39894228040143268f;
        pr[i] = pg[i] * (cdf + v * pdf);
      }
      break;
    case LT_RSQRT:
      for (int64_t i = 0; i < N; i++) pr[i] = -0.5f * pg[i] * py[i] * py[i] * py[i];
      break;
    case LT_SIGN:
      for (int64_t i = 0; i < N; i++) pr[i] = 0.0f;
      break;
    case LT_LOG1P:
      for (int64_t i = 0; i < N; i++) pr[i] = pg[i] / (1.0f + px[i]);
      break;
    case LT_SQUARE:
      for (int64_t i = 0; i < N; i++) pr[i] = 2.0f * px[i] * pg[i];
      break;
  }
}

static int unary_saves_output(lt_unop op) {
  return op == LT_EXP || op == LT_SQRT || op == LT_TANH || op == LT_SIGMOID || op == LT_RSQRT;
}

lt_tensor *lt_op_unary(lt_ctx *c, lt_unop op, lt_tensor *a) {
  const char *name = unop_names[op];
  if (a->dtype == LT_I64 && (op == LT_NEG || op == LT_ABS || op == LT_SIGN || op == LT_SQUARE)) {
    lt_tensor *out = lt_tensor_new_like(c, a);
    if (!out) return NULL;
    int64_t *po = lt_i64(out);
    for (int64_t i = 0, n = lt_numel(a); i < n; i++) {
      int64_t v = lt_get_flat_i64(a, i), neg = wrap_sub(0, v); /* -INT64_MIN wraps to itself, as in PyTorch */
      po[i] = op == LT_NEG    ? neg
              : op == LT_ABS  ? (v < 0 ? neg : v)
              : op == LT_SIGN ? (v > 0) - (v < 0)
                              : wrap_mul(v, v);
    }
    return out;
  }
  lt_tensor *fa = lt_op_to_dtype(c, a, a->dtype == LT_F64 ? LT_F64 : LT_F32);
  if (!fa) return NULL;
  lt_tensor *out = lt_tensor_new(c, fa->dtype, fa->ndim, fa->shape);
  if (out) {
    if (fa->dtype == LT_F64) lt_unary_f64(op, out, fa);
    else unary_f32(c, op, out, fa);
    lt_node *nd;
    if (lt_record(c, out, name, unary_backward, 1, &fa, &nd)) {
      lt_tensor_release(out);
      out = NULL;
    } else if (nd) {
      nd->i[0] = op;
      /* the backward of these reads the saved output (or nothing: neg), not the input */
      if (unary_saves_output(op) || op == LT_NEG) nd->reads = 0;
      if (unary_saves_output(op) && lt_node_save_output(c, nd, 0, out)) {
        lt_tensor_release(out);
        out = NULL;
      }
    }
  }
  lt_tensor_release(fa);
  return out;
}

int lt_op_unary_(lt_ctx *c, lt_unop op, lt_tensor *a) {
  if (lt_check_inplace(c, unop_names[op], a)) return LT_ERR;
  if (a->dtype != LT_F64 && lt_check_dtype(c, unop_names[op], "the tensor updated in place", a, LT_F32)) return LT_ERR;
  lt_mark_modified(a);
  if (a->dtype == LT_F64) lt_unary_f64(op, a, a);
  else unary_f32(c, op, a, a);
  return LT_OK;
}

/* ---- leaky_relu, clamp's rows, where ------------------------------------------------------------------ */

/* The contiguous one-pass kernels of leaky_relu and clamp, forward and backward. */
typedef enum { MAP_LEAKY, MAP_LEAKY_GRAD, MAP_CLAMP, MAP_CLAMP_GRAD } map_kind;
typedef struct map_job {
  map_kind kind;
  const void *px, *pg; /* input, incoming gradient (backward): float32, or float64 when f64 */
  void *po;
  double a, b; /* slope, or min and max (rounded to float32 by its kernel) */
  int64_t n;
  int f64;
} map_job;

/* map_range_S: elements [lo, hi) of a map job over element type T (suffix S) */
// clang-format off
#define MAP_KERNEL(S, T)                                                                                              \
LT_VECTOR_FN static void map_range_##S(const map_job *j, int64_t lo, int64_t hi) {                                    \
  const T *px = j->px, *pg = j->pg;                                                                                   \
  T *po = j->po, a = (T)j->a, b = (T)j->b;                                                                            \
  switch (j->kind) {                                                                                                  \
    case MAP_LEAKY:                                                                                                   \
      for (int64_t i = lo; i < hi; i++) po[i] = px[i] > 0 ? px[i] : a * px[i];                                        \
      break;                                                                                                          \
    case MAP_LEAKY_GRAD:                                                                                              \
      for (int64_t i = lo; i < hi; i++) po[i] = px[i] > 0 ? pg[i] : a * pg[i];                                        \
      break;                                                                                                          \
    case MAP_CLAMP:                                                                                                   \
      for (int64_t i = lo; i < hi; i++) po[i] = px[i] < a ? a : (px[i] > b ? b : px[i]);                              \
      break;                                                                                                          \
    case MAP_CLAMP_GRAD:                                                                                              \
      for (int64_t i = lo; i < hi; i++) po[i] = (px[i] >= a && px[i] <= b) ? pg[i] : (T)0;                            \
      break;                                                                                                          \
  }                                                                                                                   \
}
// clang-format on
MAP_KERNEL(f, float)
MAP_KERNEL(d, double)

static void map_range(const map_job *j, int64_t lo, int64_t hi) {
  if (j->f64) map_range_d(j, lo, hi);
  else map_range_f(j, lo, hi);
}

static void map_part(void *arg, int i, int nparts) {
  const map_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->n, i, nparts, 16, &lo, &hi);
  if (lo < hi) map_range(j, lo, hi);
}

static void map_run(lt_ctx *c, const map_job *j) {
  int parts = ew_parts(c, j->n, 1);
  if (parts > 1) lt_pool_run(map_part, (void *)j, parts);
  else map_range(j, 0, j->n);
}

static int leaky_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *x = lt_op_contiguous(c, n->inputs[0]);
  lt_tensor *gc = x ? lt_op_contiguous(c, g) : NULL;
  lt_tensor *r = gc ? lt_tensor_new_like(c, x) : NULL;
  if (r) {
    const int f64 = x->dtype == LT_F64;
    map_job j = { MAP_LEAKY_GRAD,
                  f64 ? (const void *)lt_f64(x) : lt_f32(x),
                  f64 ? (const void *)lt_f64(gc) : lt_f32(gc),
                  f64 ? (void *)lt_f64(r) : lt_f32(r),
                  n->f[0],
                  0,
                  lt_numel(x),
                  f64 };
    map_run(c, &j);
  }
  lt_tensor_release(x);
  lt_tensor_release(gc);
  gin[0] = r;
  return r ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_leaky_relu(lt_ctx *c, lt_tensor *a, double slope) {
  if (lt_check_float(c, "leaky_relu", "input", a)) return NULL;
  lt_tensor *x = lt_op_contiguous(c, a);
  lt_tensor *out = x ? lt_tensor_new_like(c, x) : NULL;
  if (out) {
    const int f64 = x->dtype == LT_F64;
    map_job j = { MAP_LEAKY,   f64 ? (const void *)lt_f64(x) : lt_f32(x),
                  NULL,        f64 ? (void *)lt_f64(out) : lt_f32(out),
                  slope,       0,
                  lt_numel(x), f64 };
    map_run(c, &j);
    lt_node *nd;
    if (lt_record(c, out, "leaky_relu", leaky_backward, 1, &a, &nd)) {
      lt_tensor_release(out);
      out = NULL;
    } else if (nd) nd->f[0] = slope;
  }
  lt_tensor_release(x);
  return out;
}

/* clamp's float32 one-pass rows over n contiguous elements (the op itself is in ops_clamp.c, which also uses the
 * binary ops for float64: kept out of this file, whose ops the binary ops' backward calls) */
void lt_clamp_rows_f32(lt_ctx *c, const float *x, float *out, int64_t n, double lo, double hi) {
  map_job j = { MAP_CLAMP, x, NULL, out, lo, hi, n, 0 };
  map_run(c, &j);
}

void lt_clamp_grad_rows_f32(lt_ctx *c, const float *x, const float *g, float *r, int64_t n, double lo, double hi) {
  map_job j = { MAP_CLAMP_GRAD, x, g, r, lo, hi, n, 0 };
  map_run(c, &j);
}

/* ---- ReLU fused into the op before it (linear, conv2d: lt_act) ------------------------------------------ */

LT_VECTOR_FN void lt_relu_inplace_f32(float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = y[i] < 0.0f ? 0.0f : y[i]; /* NaN stays NaN, as PyTorch's */
}

LT_VECTOR_FN static void relu_mask(int64_t n, const float *restrict y, const float *g, float *r) { /* r may be g */
  for (int64_t i = 0; i < n; i++) r[i] = y[i] <= 0.0f ? 0.0f : g[i];
}

lt_tensor *lt_relu_grad(lt_ctx *c, lt_tensor *g, const lt_tensor *y) {
  lt_tensor *r;
  if (lt_is_contiguous(g) && g->refcount == 1 && g->storage->refcount == 1) r = lt_tensor_retain(g);
  else r = lt_tensor_new(c, LT_F32, g->ndim, g->shape);
  lt_tensor *gc = r ? lt_op_contiguous(c, g) : NULL;
  if (!gc) {
    lt_tensor_release(r);
    return NULL;
  }
  relu_mask(lt_numel(y), lt_f32(y), lt_f32(gc), lt_f32(r));
  lt_tensor_release(gc);
  return r;
}
