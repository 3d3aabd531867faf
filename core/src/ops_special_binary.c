/*
 * ops_special_binary.c — binary maths with broadcasting (lt_op_fn2: atan2, fmod, remainder, floor_divide, fmax, fmin,
 * copysign), float32 and float64 from one body per op, int64 where PyTorch keeps int64, with their backward
 * rules. Each op is a per-element value (fn2_value) and the pair of partial derivatives (fn2_grad), in double;
 * every element type runs them through the same row loops (ops_ew_internal.h's EW_SEGMENTS and EW_BINARY_ROW).
 */
#include <math.h>
#include <stdio.h>

#include "lt_ops.h"
#include "ops_ew_internal.h"

#define FN2_NAME(e, name) name,
static const char *const fn2_names[] = { LT_FN2_LIST(FN2_NAME) };
#undef FN2_NAME

const char *lt_fn2op_name(lt_fn2op op) { return op >= 0 && op < LT_FN2_COUNT ? fn2_names[op] : "?"; }

/* floor(a / b) as PyTorch's div(rounding_mode = "floor") computes it: from fmod, so that a == b * q + r holds */
static inline double floor_div(double a, double b) {
  if (b == 0) return a / b;
  double mod = fmod(a, b), div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
  if (div == 0) return copysign(0.0, a / b);
  double q = floor(div);
  return div - q > 0.5 ? q + 1 : q;
}

__attribute__((always_inline)) static inline double fn2_value(lt_fn2op op, double a, double b) {
  switch (op) {
    case LT_FN2_ATAN2: return atan2(a, b);
    case LT_FN2_FMOD: return fmod(a, b);
    case LT_FN2_REMAINDER: { /* the sign of the divisor, as Python's % */
      double m = fmod(a, b);
      return m != 0 && (b < 0) != (m < 0) ? m + b : m;
    }
    case LT_FN2_FLOOR_DIVIDE: return floor_div(a, b);
    case LT_FN2_FMAX: return fmax(a, b); /* a NaN loses to a number */
    case LT_FN2_FMIN: return fmin(a, b);
    case LT_FN2_COPYSIGN: return copysign(a, b);
    case LT_FN2_COUNT: break;
  }
  return NAN;
}

/* the gradients g * d/da and g * d/db at (a, b) with y = op(a, b), as PyTorch 1.13's derivatives.yaml */
__attribute__((always_inline)) static inline void fn2_grad(lt_fn2op op, double a, double b, double y, double g,
                                                           double *ga, double *gb) {
  switch (op) {
    case LT_FN2_ATAN2: {
      double r = 1 / (a * a + b * b);
      *ga = g * b * r;
      *gb = g * -a * r;
      return;
    }
    case LT_FN2_FMOD: /* a - b trunc(a / b) */
      *ga = g;
      *gb = -g * trunc(a / b);
      return;
    case LT_FN2_REMAINDER: /* a - b floor(a / b) */
      *ga = g;
      *gb = -g * floor_div(a, b);
      return;
    case LT_FN2_FMAX:
    case LT_FN2_FMIN: { /* to a where it won (ties and a NaN b included), else to b */
      int to_a = (op == LT_FN2_FMAX ? a >= b : a <= b) || isnan(b);
      *ga = to_a ? g : 0;
      *gb = to_a ? 0 : g;
      return;
    }
    case LT_FN2_COPYSIGN: /* +-g: the sign y / a, 0 where a is 0; nothing flows to b */
      *ga = a == 0 ? 0 : g * (y / a);
      *gb = 0;
      return;
    case LT_FN2_FLOOR_DIVIDE: /* not recorded */
    case LT_FN2_COUNT: break;
  }
  *ga = *gb = 0;
}

/* int64 forms; *zero set when a division by zero was met (PyTorch raises ZeroDivisionError) */
static inline int64_t fn2_value_i64(int *zero, lt_fn2op op, int64_t a, int64_t b) {
  switch (op) {
    case LT_FN2_FMAX: return a > b ? a : b;
    case LT_FN2_FMIN: return a < b ? a : b;
    default: break;
  }
  if (b == 0) {
    *zero = 1;
    return 0;
  }
  if (b == -1) /* INT64_MIN / -1 overflows in C: the wrapped results */
    return op == LT_FN2_FLOOR_DIVIDE ? wrap_sub(0, a) : 0;
  int64_t q = a / b, r = a % b;
  switch (op) {
    case LT_FN2_FMOD: return r;
    case LT_FN2_REMAINDER: return r != 0 && (b < 0) != (r < 0) ? r + b : r;
    case LT_FN2_FLOOR_DIVIDE: return r != 0 && (b < 0) != (r < 0) ? q - 1 : q;
    default: return 0;
  }
}

static int fn2_int_capable(lt_fn2op op) { return op != LT_FN2_ATAN2 && op != LT_FN2_COPYSIGN; }

/* ---- the loops, the same for float and double ------------------------------------------------------------- */

typedef struct fn2_job {
  lt_fn2op op;
  lt_dtype dt;
  lt_iter it; /* forward: out, a, b; backward: g (contiguous, as ra and rb), a, b */
  void *po, *pa_grad, *pb_grad;
  const void *pa, *pb, *py, *pg;
  int64_t total;
} fn2_job;

/* forward: elements [lo, hi) of the iteration */
static void fn2_part(void *arg, int i, int nparts) {
  const fn2_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->total, i, nparts, 16, &lo, &hi);
  if (lo >= hi) return;
  const lt_iter *it = &j->it;
  lt_fn2op op = j->op;
  EW_SEGMENTS(it, lo, hi, o0, o1, o2, len) {
    if (j->dt == LT_F64)
      EW_BINARY_ROW((double *)j->po + o0, it->s[0], (const double *)j->pa + o1, it->s[1], (const double *)j->pb + o2,
                    it->s[2], len, fn2_value, op);
    else
      EW_BINARY_ROW((float *)j->po + o0, it->s[0], (const float *)j->pa + o1, it->s[1], (const float *)j->pb + o2,
                    it->s[2], len, fn2_value, op);
  }
  EW_SEGMENTS_END;
}

/* backward: both partials at elements [lo, hi) of the iteration, with T the element type */
#define FN2_GRAD_RANGE(T, j, lo, hi)                                                                        \
  do {                                                                                                      \
    const lt_iter *it = &(j)->it;                                                                           \
    const T *pg = (j)->pg, *py = (j)->py, *pa = (j)->pa, *pb = (j)->pb;                                     \
    T *ra = (j)->pa_grad, *rb = (j)->pb_grad;                                                               \
    EW_SEGMENTS(it, lo, hi, o0, o1, o2, len) {                                                              \
      for (int64_t i = 0; i < len; i++) {                                                                   \
        int64_t k = o0 + i * it->s[0];                                                                      \
        double ga, gb;                                                                                      \
        fn2_grad((j)->op, pa[o1 + i * it->s[1]], pb[o2 + i * it->s[2]], py ? py[k] : 0.0, pg[k], &ga, &gb); \
        if (ra) ra[k] = (T)ga;                                                                              \
        if (rb) rb[k] = (T)gb;                                                                              \
      }                                                                                                     \
    }                                                                                                       \
    EW_SEGMENTS_END;                                                                                        \
  } while (0)

static void fn2_grad_part(void *arg, int i, int nparts) {
  const fn2_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->total, i, nparts, 16, &lo, &hi);
  if (lo >= hi) return;
  if (j->dt == LT_F64) FN2_GRAD_RANGE(double, j, lo, hi);
  else FN2_GRAD_RANGE(float, j, lo, hi);
}

static void *fn2_data(const lt_tensor *t) {
  return t->dtype == LT_F64 ? (void *)lt_f64(t) : t->dtype == LT_I64 ? (void *)lt_i64(t) : (void *)lt_f32(t);
}

/* out = a op b, all three of out's dtype; out may be a (in place, when a has the broadcast shape) */
static int fn2_forward(lt_ctx *c, lt_fn2op op, const char *name, int ndim, const int64_t *shape, lt_tensor *out,
                       const lt_tensor *a, const lt_tensor *b) {
  fn2_job j = { .op = op, .dt = out->dtype, .po = fn2_data(out), .pa = fn2_data(a), .pb = fn2_data(b) };
  ew_binary_iter(&j.it, ndim, shape, out, a, b);
  j.total = j.it.rows * j.it.n;
  if (j.total == 0) return LT_OK;
  if (out->dtype == LT_I64) {
    int64_t *po = j.po;
    const int64_t *pa = j.pa, *pb = j.pb;
    int64_t s0 = j.it.s[0], s1 = j.it.s[1], s2 = j.it.s[2]; /* locals: the int64 stores could alias j.it */
    int zero = 0;
    EW_SEGMENTS(&j.it, 0, j.total, o0, o1, o2, len) {
      EW_BINARY_ROW(po + o0, s0, pa + o1, s1, pb + o2, s2, len, fn2_value_i64, &zero, op);
    }
    EW_SEGMENTS_END;
    return zero ? lt_fail(c,
                          "%s: division by zero in int64 (PyTorch's ZeroDivisionError; use float tensors "
                          "for IEEE results)",
                          name)
                : LT_OK;
  }
  int parts = overlaps(out, a) || overlaps(out, b) ? 1 : ew_parts(c, j.total, 8);
  if (parts > 1) lt_pool_run(fn2_part, &j, parts);
  else fn2_part(&j, 0, 1);
  return LT_OK;
}

static int fn2_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_fn2op op = (lt_fn2op)n->i[0];
  lt_tensor *a = n->inputs[0], *b = n->inputs[1], *y = n->saved[0];
  int need_a = a->requires_grad, need_b = b->requires_grad && op != LT_FN2_COPYSIGN;
  lt_tensor *gc = lt_op_to_dtype(c, g, a->dtype);
  lt_tensor *gcc = gc ? lt_op_contiguous(c, gc) : NULL;
  lt_tensor *yc = gcc && y ? lt_op_contiguous(c, y) : NULL;
  lt_tensor *ra = gcc && need_a ? lt_tensor_new_like(c, gcc) : NULL;
  lt_tensor *rb = gcc && need_b ? lt_tensor_new_like(c, gcc) : NULL;
  int ok = gcc && (!y || yc) && (!need_a || ra) && (!need_b || rb);
  if (ok) {
    fn2_job j = { .op = op,
                  .dt = gcc->dtype,
                  .pa = fn2_data(a),
                  .pb = fn2_data(b),
                  .pg = fn2_data(gcc),
                  .py = yc ? fn2_data(yc) : NULL,
                  .pa_grad = ra ? fn2_data(ra) : NULL,
                  .pb_grad = rb ? fn2_data(rb) : NULL };
    ew_binary_iter(&j.it, gcc->ndim, gcc->shape, gcc, a, b);
    j.total = j.it.rows * j.it.n;
    int parts = ew_parts(c, j.total, 4);
    if (parts > 1) lt_pool_run(fn2_grad_part, &j, parts);
    else if (j.total) fn2_grad_part(&j, 0, 1);
    if (need_a) gin[0] = lt_sum_to_like(c, ra, a);
    if (need_b) gin[1] = lt_sum_to_like(c, rb, b);
    ra = rb = NULL; /* given to lt_sum_to_like */
    /* copysign's sign operand gets zeros, as PyTorch's (a gradient, not none) */
    if (op == LT_FN2_COPYSIGN && b->requires_grad) gin[1] = lt_tensor_zeros(c, b->dtype, b->ndim, b->shape);
    ok = (!need_a || gin[0]) && (!need_b || gin[1]) && (op != LT_FN2_COPYSIGN || !b->requires_grad || gin[1]);
  }
  lt_tensor_release(gc);
  lt_tensor_release(gcc);
  lt_tensor_release(yc);
  lt_tensor_release(ra);
  lt_tensor_release(rb);
  return ok ? LT_OK : LT_ERR;
}

/* The dtype both operands compute in: float64 when either is, int64 when both are and the op keeps integers */
static lt_dtype fn2_dtype(lt_fn2op op, const lt_tensor *a, const lt_tensor *b) {
  if (a->dtype == LT_F64 || b->dtype == LT_F64) return LT_F64;
  if (a->dtype == LT_I64 && b->dtype == LT_I64 && fn2_int_capable(op)) return LT_I64;
  return LT_F32;
}

lt_tensor *lt_op_fn2(lt_ctx *c, lt_fn2op op, lt_tensor *a, lt_tensor *b) {
  if (op < 0 || op >= LT_FN2_COUNT) {
    lt_fail(c, "fn2: unknown op %d", (int)op);
    return NULL;
  }
  const char *name = fn2_names[op];
  int ndim;
  int64_t shape[LT_MAX_DIM];
  if (lt_broadcast_shape(c, name, a, b, &ndim, shape)) return NULL;
  lt_dtype dt = fn2_dtype(op, a, b);
  lt_tensor *ca = lt_op_to_dtype(c, a, dt), *cb = ca ? lt_op_to_dtype(c, b, dt) : NULL;
  lt_tensor *out = cb ? lt_tensor_new(c, dt, ndim, shape) : NULL;
  if (out && fn2_forward(c, op, name, ndim, shape, out, ca, cb)) {
    lt_tensor_release(out);
    out = NULL;
  }
  if (out && dt != LT_I64 && op != LT_FN2_FLOOR_DIVIDE) {
    lt_tensor *ins[2] = { ca, cb };
    lt_node *nd;
    if (lt_record(c, out, name, fn2_backward, 2, ins, &nd)) {
      lt_tensor_release(out);
      out = NULL;
    } else if (nd) {
      nd->i[0] = op;
      if (op == LT_FN2_COPYSIGN) nd->reads = LT_READS(0); /* and the saved output */
      if (op == LT_FN2_COPYSIGN && lt_node_save_output(c, nd, 0, out)) {
        lt_tensor_release(out);
        out = NULL;
      }
    }
  }
  lt_tensor_release(ca);
  lt_tensor_release(cb);
  return out;
}

int lt_op_fn2_(lt_ctx *c, lt_fn2op op, lt_tensor *a, lt_tensor *b) {
  if (op < 0 || op >= LT_FN2_COUNT) return lt_fail(c, "fn2_: unknown op %d", (int)op);
  char name[32];
  snprintf(name, sizeof name, "%s_", fn2_names[op]);
  if (lt_check_inplace(c, name, a)) return LT_ERR;
  int ndim;
  int64_t shape[LT_MAX_DIM];
  if (lt_broadcast_shape(c, name, a, b, &ndim, shape)) return LT_ERR;
  int same = ndim == a->ndim;
  for (int d = 0; same && d < ndim; d++) same = shape[d] == a->shape[d];
  char sa[128], sb[128];
  if (!same)
    return lt_fail(c, "%s: the broadcast of %s and %s is larger than the tensor updated in place", name,
                   lt_shape_str(a, sa, sizeof sa), lt_shape_str(b, sb, sizeof sb));
  lt_dtype dt = fn2_dtype(op, a, b);
  if (a->dtype == LT_I64 && dt != LT_I64)
    return lt_fail(c,
                   "%s: the result is %s, which cannot be written into the int64 tensor (convert it with "
                   ":float() first)",
                   name, lt_dtype_name(dt));
  lt_tensor *cb = lt_op_to_dtype(c, b, a->dtype);
  if (!cb) return LT_ERR;
  lt_mark_modified(a);
  int st = fn2_forward(c, op, name, ndim, shape, a, a, cb);
  lt_tensor_release(cb);
  return st;
}
