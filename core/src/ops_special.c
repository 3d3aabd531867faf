/*
 * ops_special.c — the special functions and more elementwise maths (lt_op_fn: tan, asin ... digamma, the list in
 * lt_ops.h's LT_FN_LIST), float32 and float64, with their backward rules. Each op is one pair of per-element
 * functions in double: its value (fn_value) and g times its derivative (fn_grad); both element types run them
 * through the same row loops (ops_ew_internal.h's EW_SEGMENTS and EW_UNARY_ROW), so there is one body per op.
 * Domain errors give NaN (or +-inf at poles) as PyTorch's do, never an error. Large tensors are split over the pool
 * like the other elementwise kernels.
 */
#include <math.h>
#include <stdio.h>

#include "special_math.h"
#include "lt_ops.h"
#include "ops_ew_internal.h"

#define FN_NAME(e, name) name,
static const char *const fn_names[] = { LT_FN_LIST(FN_NAME) };
#undef FN_NAME

const char *lt_fnop_name(lt_fnop op) { return op >= 0 && op < LT_FN_COUNT ? fn_names[op] : "?"; }

#define LN2 0.69314718055994530942
#define LN10 2.30258509299404568402
#define RAD2DEG 57.295779513082320877 /* 180 / pi */
#define DEG2RAD 0.017453292519943295769

/* the value of op at x; p is logit's eps */
__attribute__((always_inline)) static inline double fn_value(lt_fnop op, double p, double x) {
  switch (op) {
    case LT_FN_TAN: return tan(x);
    case LT_FN_ASIN: return asin(x);
    case LT_FN_ACOS: return acos(x);
    case LT_FN_ATAN: return atan(x);
    case LT_FN_SINH: return sinh(x);
    case LT_FN_COSH: return cosh(x);
    case LT_FN_ASINH: return asinh(x);
    case LT_FN_ACOSH: return acosh(x);
    case LT_FN_ATANH: return atanh(x);
    case LT_FN_SINC: return fn_sinc(x);
    case LT_FN_RAD2DEG: return x * RAD2DEG;
    case LT_FN_DEG2RAD: return x * DEG2RAD;
    case LT_FN_ERFC: return erfc(x);
    case LT_FN_LOG2: return log2(x);
    case LT_FN_LOG10: return log10(x);
    case LT_FN_EXP2: return exp2(x);
    case LT_FN_LOGIT: return fn_logit(x, p);
    case LT_FN_LGAMMA: {
      int sign; /* lgamma_r: glibc's lgamma writes the global signgam, which the pool's threads would share */
      return lgamma_r(x, &sign);
    }
    case LT_FN_DIGAMMA: return fn_digamma(x);
    case LT_FN_COUNT: break;
  }
  return NAN;
}

/* g * op'(x), y = op(x) (read only by the ops fn_saves_output names), as PyTorch 1.13's derivatives.yaml */
__attribute__((always_inline)) static inline double fn_grad(lt_fnop op, double x, double y, double g, double p) {
  switch (op) {
    case LT_FN_TAN: return g * (1 + y * y);
    case LT_FN_ASIN: return g / sqrt(1 - x * x);
    case LT_FN_ACOS: return -g / sqrt(1 - x * x);
    case LT_FN_ATAN: return g / (x * x + 1);
    case LT_FN_SINH: return g * cosh(x);
    case LT_FN_COSH: return g * sinh(x);
    case LT_FN_ASINH: return g / sqrt(x * x + 1);
    case LT_FN_ACOSH: return g / sqrt(x * x - 1);
    case LT_FN_ATANH: return g / (1 - x * x);
    case LT_FN_SINC: return g * fn_sinc_deriv(x);
    case LT_FN_RAD2DEG: return g * RAD2DEG;
    case LT_FN_DEG2RAD: return g * DEG2RAD;
    case LT_FN_ERFC: return g * -1.12837916709551257390 * exp(-x * x); /* -2/sqrt(pi) e^(-x^2) */
    case LT_FN_LOG2: return g / (x * LN2);
    case LT_FN_LOG10: return g / (x * LN10);
    case LT_FN_EXP2: return g * y * LN2;
    case LT_FN_LOGIT: return fn_logit_grad(x, g, p);
    case LT_FN_LGAMMA: return g * fn_digamma(x);
    case LT_FN_DIGAMMA: return g * fn_trigamma(x);
    case LT_FN_COUNT: break;
  }
  return NAN;
}

/* the backward reads the output instead of the input */
static int fn_saves_output(lt_fnop op) { return op == LT_FN_TAN || op == LT_FN_EXP2; }
/* the backward reads neither (a constant factor) */
static int fn_reads_nothing(lt_fnop op) { return op == LT_FN_RAD2DEG || op == LT_FN_DEG2RAD; }

/* Work per element relative to a one-flop op (EW_PAR_MIN): libm calls, ~5-20 ns an element */
static int fn_cost(lt_fnop op) { return fn_reads_nothing(op) ? 1 : 8; }

/* the elements of a float32 or float64 tensor, from its first */
static void *fn_data(const lt_tensor *t) { return t->dtype == LT_F64 ? (void *)lt_f64(t) : (void *)lt_f32(t); }

/* ---- the loops, the same for float and double ------------------------------------------------------------- */

typedef struct fn_job {
  lt_fnop op;
  double p;
  lt_dtype dt;
  lt_iter it; /* forward: out, x */
  void *po;
  const void *px, *py, *pg; /* backward: contiguous x, y (or NULL), g into po */
  int64_t total;
} fn_job;

/* forward: elements [lo, hi) of the iteration */
static void fn_part(void *arg, int i, int nparts) {
  const fn_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->total, i, nparts, 16, &lo, &hi);
  if (lo >= hi) return;
  const lt_iter *it = &j->it;
  lt_fnop op = j->op;
  double p = j->p;
  EW_SEGMENTS(it, lo, hi, o0, o1, o2, len) {
    if (j->dt == LT_F64)
      EW_UNARY_ROW((double *)j->po + o0, it->s[0], (const double *)j->px + o1, it->s[1], len, fn_value, op, p);
    else EW_UNARY_ROW((float *)j->po + o0, it->s[0], (const float *)j->px + o1, it->s[1], len, fn_value, op, p);
  }
  EW_SEGMENTS_END;
}

/* backward: r[i] = fn_grad at element i of the contiguous x, y, g, for i in [lo, hi), with T the element type */
#define FN_GRAD_ROW(T, j, lo, hi)                                                                         \
  do {                                                                                                    \
    const T *x = (j)->px, *y = (j)->py, *g = (j)->pg;                                                     \
    T *r = (j)->po;                                                                                       \
    for (int64_t i = (lo); i < (hi); i++) r[i] = (T)fn_grad((j)->op, x[i], y ? y[i] : 0.0, g[i], (j)->p); \
  } while (0)

static void fn_grad_part(void *arg, int i, int nparts) {
  const fn_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->total, i, nparts, 16, &lo, &hi);
  if (lo >= hi) return;
  if (j->dt == LT_F64) FN_GRAD_ROW(double, j, lo, hi);
  else FN_GRAD_ROW(float, j, lo, hi);
}

/* out = op(x): same shape and dtype (float32 or float64), any strides; out may be x */
static void fn_forward(lt_ctx *c, lt_fnop op, double p, lt_tensor *out, const lt_tensor *x) {
  const int64_t *st[2] = { out->stride, x->stride };
  fn_job j = { .op = op, .p = p, .dt = x->dtype, .po = fn_data(out), .px = fn_data(x) };
  lt_iter_init(&j.it, x->ndim, x->shape, 2, st);
  j.total = j.it.rows * j.it.n;
  if (j.total == 0) return;
  int parts = overlaps(out, x) ? 1 : ew_parts(c, j.total, fn_cost(op));
  if (parts > 1) lt_pool_run(fn_part, &j, parts);
  else fn_part(&j, 0, 1);
}

static int fn_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_fnop op = (lt_fnop)n->i[0];
  lt_tensor *x = lt_op_contiguous(c, n->inputs[0]);
  lt_tensor *y = n->saved[0] ? lt_op_contiguous(c, n->saved[0]) : NULL;
  lt_tensor *gc = x ? lt_op_to_dtype(c, g, x->dtype) : NULL;
  lt_tensor *gcc = gc ? lt_op_contiguous(c, gc) : NULL;
  lt_tensor *r = gcc && (y || !n->saved[0]) ? lt_tensor_new_like(c, x) : NULL;
  if (r) {
    fn_job j = { .op = op,
                 .p = n->f[0],
                 .dt = x->dtype,
                 .po = fn_data(r),
                 .px = fn_data(x),
                 .py = y ? fn_data(y) : NULL,
                 .pg = fn_data(gcc),
                 .total = lt_numel(x) };
    int parts = ew_parts(c, j.total, fn_cost(op));
    if (parts > 1) lt_pool_run(fn_grad_part, &j, parts);
    else if (j.total) fn_grad_part(&j, 0, 1);
  }
  lt_tensor_release(x);
  lt_tensor_release(y);
  lt_tensor_release(gc);
  lt_tensor_release(gcc);
  gin[0] = r;
  return r ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_fn(lt_ctx *c, lt_fnop op, lt_tensor *a, double p) {
  if (op < 0 || op >= LT_FN_COUNT) {
    lt_fail(c, "fn: unknown op %d", (int)op);
    return NULL;
  }
  /* int64 computes in float32 (PyTorch's promotion of integers for these) */
  lt_tensor *fa = lt_op_to_dtype(c, a, a->dtype == LT_F64 ? LT_F64 : LT_F32);
  if (!fa) return NULL;
  lt_tensor *out = lt_tensor_new(c, fa->dtype, fa->ndim, fa->shape);
  if (out) {
    fn_forward(c, op, p, out, fa);
    lt_node *nd;
    if (lt_record(c, out, fn_names[op], fn_backward, 1, &fa, &nd)) {
      lt_tensor_release(out);
      out = NULL;
    } else if (nd) {
      nd->i[0] = op;
      nd->f[0] = p;
      if (fn_saves_output(op) || fn_reads_nothing(op)) nd->reads = 0;
      if (fn_saves_output(op) && lt_node_save_output(c, nd, 0, out)) {
        lt_tensor_release(out);
        out = NULL;
      }
    }
  }
  lt_tensor_release(fa);
  return out;
}

int lt_op_fn_(lt_ctx *c, lt_fnop op, lt_tensor *a, double p) {
  if (op < 0 || op >= LT_FN_COUNT) return lt_fail(c, "fn_: unknown op %d", (int)op);
  char name[32];
  snprintf(name, sizeof name, "%s_", fn_names[op]);
  if (lt_check_inplace(c, name, a)) return LT_ERR;
  if (a->dtype != LT_F64 && lt_check_dtype(c, name, "the tensor updated in place", a, LT_F32)) return LT_ERR;
  lt_mark_modified(a);
  fn_forward(c, op, p, a, a);
  return LT_OK;
}
