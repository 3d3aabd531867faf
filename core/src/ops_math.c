/* ops_math.c — more elementwise maths (floor ceil round trunc frac erf erfinv reciprocal expm1, with their
 * gradients), isnan/isinf/isfinite, tril/triu and p-norms, each with its backward rule next to it. */
#include <math.h>
#include <string.h>

#include "lt_lines.h"
#include "lt_ops.h"

/* --- rounding and special functions ------------------------------------------------------------------ */

static const char *const math_names[] = { "floor", "ceil",   "round",      "trunc", "frac",
                                          "erf",   "erfinv", "reciprocal", "expm1" };

/* Inverse error function: Giles' single-precision approximation ("Approximating the erfinv function",
 * 2010), then one Newton step in double, which makes it exact to float32 rounding. */
static double erfinv_d(double x) {
  if (x <= -1.0 || x >= 1.0) return x == -1.0 ? -INFINITY : x == 1.0 ? INFINITY : NAN;
  double w = -log((1.0 - x) * (1.0 + x)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double y = p * x;
  for (int i = 0; i < 2; i++) y -= (erf(y) - x) / (1.1283791670955126 * exp(-y * y));
  return y;
}

static float math_f(lt_mathop op, float x) {
  switch (op) {
    case LT_FLOOR: return floorf(x);
    case LT_CEIL: return ceilf(x);
    case LT_ROUND: return nearbyintf(x); /* half to even in the default rounding mode, as torch.round */
    case LT_TRUNC: return truncf(x);
    case LT_FRAC: return x - truncf(x);
    case LT_ERF: return erff(x);
    case LT_ERFINV: return (float)erfinv_d(x);
    case LT_RECIPROCAL: return 1.0f / x;
    case LT_EXPM1: return expm1f(x);
  }
  return x;
}

/* float64's: libm's double functions */
static double math_d(lt_mathop op, double x) {
  switch (op) {
    case LT_FLOOR: return floor(x);
    case LT_CEIL: return ceil(x);
    case LT_ROUND: return nearbyint(x);
    case LT_TRUNC: return trunc(x);
    case LT_FRAC: return x - trunc(x);
    case LT_ERF: return erf(x);
    case LT_ERFINV: return erfinv_d(x);
    case LT_RECIPROCAL: return 1.0 / x;
    case LT_EXPM1: return expm1(x);
  }
  return x;
}

/* y is the op's output; the rounding ops have a zero gradient, frac's is 1, as torch's. One source for float
 * and double (T). */
#define MATH_GRAD(NAME, T)                                                      \
  static T NAME(lt_mathop op, T x, T y, T g) {                                  \
    switch (op) {                                                               \
      case LT_FLOOR:                                                            \
      case LT_CEIL:                                                             \
      case LT_ROUND:                                                            \
      case LT_TRUNC: return (T)0;                                               \
      case LT_FRAC: return g;                                                   \
      case LT_ERF: return (T)(g * 1.1283791670955126 * exp(-(double)x * x));    \
      case LT_ERFINV: return (T)(g * 0.88622692545275801 * exp((double)y * y)); \
      case LT_RECIPROCAL: return -g * y * y;                                    \
      case LT_EXPM1: return g * (y + (T)1);                                     \
    }                                                                           \
    return g;                                                                   \
  }
MATH_GRAD(math_grad, float)
MATH_GRAD(math_grad_d, double)

/* the loops over contiguous x (and y, g), for float and double */
#define MATH_LOOPS(FWD, BWD, T, FN, GRAD)                                                  \
  static void FWD(lt_mathop op, const T *px, T *po, int64_t n) {                           \
    for (int64_t i = 0; i < n; i++) po[i] = FN(op, px[i]);                                 \
  }                                                                                        \
  static void BWD(lt_mathop op, const T *px, const T *py, const T *pg, T *pr, int64_t n) { \
    for (int64_t i = 0; i < n; i++) pr[i] = GRAD(op, px[i], py ? py[i] : (T)0, pg[i]);     \
  }
MATH_LOOPS(math_fwd_f32, math_bwd_f32, float, math_f, math_grad)
MATH_LOOPS(math_fwd_f64, math_bwd_f64, double, math_d, math_grad_d)

static int math_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_mathop op = (lt_mathop)n->i[0];
  lt_tensor *x = lt_op_contiguous(c, n->inputs[0]);
  lt_tensor *y = n->saved[0] ? lt_op_contiguous(c, n->saved[0]) : NULL;
  lt_tensor *gc = lt_op_contiguous(c, g);
  lt_tensor *r = x && (y || !n->saved[0]) && gc ? lt_tensor_new_like(c, x) : NULL;
  if (r && x->dtype == LT_F64) math_bwd_f64(op, lt_f64(x), y ? lt_f64(y) : NULL, lt_f64(gc), lt_f64(r), lt_numel(x));
  else if (r) math_bwd_f32(op, lt_f32(x), y ? lt_f32(y) : NULL, lt_f32(gc), lt_f32(r), lt_numel(x));
  lt_tensor_release(x);
  lt_tensor_release(y);
  lt_tensor_release(gc);
  gin[0] = r;
  return r ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_math(lt_ctx *c, lt_mathop op, lt_tensor *a) {
  /* an int64 tensor is already whole: the rounding ops give it back (as torch's) */
  if (a->dtype == LT_I64 && op <= LT_TRUNC) return lt_op_clone(c, a);
  lt_tensor *fa = lt_op_to_dtype(c, a, a->dtype == LT_F64 ? LT_F64 : LT_F32);
  lt_tensor *fc = fa ? lt_op_contiguous(c, fa) : NULL;
  lt_tensor *out = fc ? lt_tensor_new_like(c, fc) : NULL;
  if (out) {
    if (fc->dtype == LT_F64) math_fwd_f64(op, lt_f64(fc), lt_f64(out), lt_numel(fc));
    else math_fwd_f32(op, lt_f32(fc), lt_f32(out), lt_numel(fc));
    lt_node *nd;
    if (lt_record(c, out, math_names[op], math_backward, 1, &fa, &nd)) {
      lt_tensor_release(out);
      out = NULL;
    } else if (nd) {
      nd->i[0] = op;
      /* math_grad reads x for erf, the output for erfinv, reciprocal and expm1, neither for the others */
      nd->reads = op == LT_ERF ? LT_READS(0) : 0;
      int needs_y = op == LT_ERFINV || op == LT_RECIPROCAL || op == LT_EXPM1;
      if (needs_y && lt_node_save_output(c, nd, 0, out)) {
        lt_tensor_release(out);
        out = NULL;
      }
    }
  }
  lt_tensor_release(fc);
  lt_tensor_release(fa);
  return out;
}

lt_tensor *lt_op_classify(lt_ctx *c, lt_classop op, lt_tensor *a) {
  lt_tensor *out = lt_tensor_new(c, LT_F32, a->ndim, a->shape);
  if (!out) return NULL;
  float *po = lt_f32(out);
  for (int64_t i = 0, N = lt_numel(a); i < N; i++) {
    double v = a->dtype == LT_I64 ? 0.0 : lt_get_flat(a, i); /* an int64 is always finite */
    po[i] = (float)(op == LT_ISNAN ? isnan(v) != 0 : op == LT_ISINF ? isinf(v) != 0 : isfinite(v) != 0);
  }
  return out;
}

/* --- tril / triu ------------------------------------------------------------------------------------- */

/* the gradient keeps the same triangle of g */
static int tri_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  gin[0] = lt_op_tri(c, g, n->i[0], (int)n->i[1]);
  return gin[0] ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_tri(lt_ctx *c, lt_tensor *a, int64_t diagonal, int upper) {
  const char *op = upper ? "triu" : "tril";
  if (a->ndim < 2) {
    char b[128];
    lt_fail(c, "%s: expects a tensor with at least 2 dims, got %s", op, lt_shape_str(a, b, sizeof b));
    return NULL;
  }
  lt_tensor *r = lt_tensor_new(c, a->dtype, a->ndim, a->shape); /* contiguous, then zeroed outside the triangle */
  if (r && lt_op_copy_(c, r, a)) {
    lt_tensor_release(r);
    r = NULL;
  }
  if (!r) return NULL;
  int64_t rows = a->shape[a->ndim - 2], cols = a->shape[a->ndim - 1], n = lt_numel(a);
  int64_t mats = rows > 0 && cols > 0 ? n / (rows * cols) : 0;
  size_t es = lt_dtype_size(r->dtype);
  char *p = (char *)r->storage->data + r->offset * (int64_t)es;
  for (int64_t m = 0; m < mats; m++)
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < cols; j++)
        if (upper ? j - i < diagonal : j - i > diagonal) memset(p + ((m * rows + i) * cols + j) * (int64_t)es, 0, es);
  lt_node *nd;
  if (lt_record(c, r, op, tri_backward, 1, &a, &nd)) {
    lt_tensor_release(r);
    return NULL;
  }
  if (nd) {
    nd->reads = 0; /* the gradient is g's triangle */
    nd->i[0] = diagonal;
    nd->i[1] = upper;
  }
  return r;
}

/* --- p-norms ----------------------------------------------------------------------------------------- */

/* the p-norm of one line, for float and double (T, its fabs FABS) */
#define LINE_NORM(NAME, T, FABS)                                                                    \
  static double NAME(const T *x, int64_t b, int64_t s, int64_t n, double p) {                       \
    const T *v = x + b;                                                                             \
    double acc = 0;                                                                                 \
    /* the common p first, each its own branch-free loop (a NaN goes through the sums by itself) */ \
    if (p == 2) {                                                                                   \
      for (int64_t j = 0; j < n; j++) acc += (double)v[j * s] * v[j * s];                           \
      return sqrt(acc);                                                                             \
    }                                                                                               \
    if (p == 1) {                                                                                   \
      for (int64_t j = 0; j < n; j++) acc += FABS(v[j * s]);                                        \
      return acc;                                                                                   \
    }                                                                                               \
    acc = p == -INFINITY ? INFINITY : 0.0;                                                          \
    for (int64_t j = 0; j < n; j++) {                                                               \
      double a = fabs((double)v[j * s]);                                                            \
      if (isnan(a)) return NAN;                                                                     \
      if (p == INFINITY) acc = a > acc ? a : acc;                                                   \
      else if (p == -INFINITY) acc = a < acc ? a : acc;                                             \
      else if (p == 0) acc += a != 0;                                                               \
      else acc += pow(a, p);                                                                        \
    }                                                                                               \
    if (isinf(p) || p == 0) return acc;                                                             \
    return pow(acc, 1.0 / p);                                                                       \
  }
LINE_NORM(line_norm, float, fabsf)
LINE_NORM(line_norm_d, double, fabs)

/* the p-norm's gradient along each line, for float and double (T) */
#define PNORM_GRAD(NAME, T)                                                                     \
  static void NAME(const T *px, const T *pg, const T *py, T *pr, const lt_lines *l, double p) { \
    for (int64_t k = 0, nl = lt_lines_count(l); k < nl; k++) {                                  \
      int64_t b = lt_line_base(l, k), s = l->inner;                                             \
      double y = py[k], gk = pg[k], count = 0;                                                  \
      if (isinf(p))                                                                             \
        for (int64_t j = 0; j < l->n; j++) count += (T)fabs((double)px[b + j * s]) == (T)y;     \
      for (int64_t j = 0; j < l->n; j++) {                                                      \
        double x = px[b + j * s], sg = (x > 0) - (x < 0), v;                                    \
        if (p == 1) v = sg;                                                                     \
        else if (isinf(p)) v = fabs(x) == y ? sg / count : 0.0;                                 \
        else if (y == 0) v = 0.0;                                                               \
        else if (p == 2) v = x / y;                                                             \
        else v = x * pow(fabs(x), p - 2) / pow(y, p - 1);                                       \
        pr[b + j * s] = (T)(v * gk);                                                            \
      }                                                                                         \
    }                                                                                           \
  }
PNORM_GRAD(pnorm_grad, float)
PNORM_GRAD(pnorm_grad_d, double)

/* torch 1.13's rules: p = 1: sign(x); p = +-inf: sign(x) shared among the elements that reach the norm;
 * other p: x |x|^(p-2) / norm^(p-1), zero where the norm is zero; p = 0: no gradient */
static int pnorm_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  double p = n->f[0];
  lt_tensor *xc = lt_op_contiguous(c, n->inputs[0]), *gc = lt_op_contiguous(c, g);
  lt_tensor *yc = lt_op_contiguous(c, n->saved[0]);
  lt_tensor *r = xc && gc && yc ? lt_tensor_zeros(c, xc->dtype, xc->ndim, xc->shape) : NULL;
  if (r && p != 0) {
    lt_lines l = lt_lines_of(xc, (int)n->i[0]);
    if (xc->dtype == LT_F64) pnorm_grad_d(lt_f64(xc), lt_f64(gc), lt_f64(yc), lt_f64(r), &l, p);
    else pnorm_grad(lt_f32(xc), lt_f32(gc), lt_f32(yc), lt_f32(r), &l, p);
  }
  lt_tensor_release(xc);
  lt_tensor_release(gc);
  lt_tensor_release(yc);
  gin[0] = r;
  return r ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_pnorm(lt_ctx *c, lt_tensor *a, double p, int dim, int keepdim) {
  if (a->dtype == LT_I64) {
    lt_fail(c, "norm: expects a float32 or float64 tensor, got %s (convert it with :float())", lt_dtype_name(a->dtype));
    return NULL;
  }
  int64_t shape[LT_MAX_DIM];
  int k = lt_reduced_dims(a, dim, keepdim, shape);
  lt_tensor *ac = lt_op_contiguous(c, a);
  lt_tensor *out = ac ? lt_tensor_new(c, a->dtype, k, shape) : NULL;
  if (!out) {
    lt_tensor_release(ac);
    return NULL;
  }
  lt_lines l = lt_lines_of(ac, dim);
  for (int64_t q = 0, nl = lt_lines_count(&l); q < nl; q++)
    if (ac->dtype == LT_F64) lt_f64(out)[q] = line_norm_d(lt_f64(ac), lt_line_base(&l, q), l.inner, l.n, p);
    else lt_f32(out)[q] = (float)line_norm(lt_f32(ac), lt_line_base(&l, q), l.inner, l.n, p);
  lt_tensor_release(ac);
  lt_node *nd;
  if (lt_record(c, out, "norm", pnorm_backward, 1, &a, &nd)) {
    lt_tensor_release(out);
    return NULL;
  }
  if (nd) {
    nd->i[0] = dim;
    nd->f[0] = p;
    if (lt_node_save_output(c, nd, 0, out)) {
      lt_tensor_release(out);
      return NULL;
    }
  }
  return out;
}
