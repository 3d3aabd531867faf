/*
 * ops_elementwise.c — broadcasting binary ops, scalar ops, unary maths and activations, with their
 * backward rules. Forward loops run over merged strided rows (lt_iter.h) so contiguous and bias-like
 * broadcasts are unit-stride loops the compiler vectorises. Large float32 kernels are split into element
 * ranges on lutra's pool (lt_pool.h); each element is computed by the same code whatever the split, so results
 * are bitwise the same on any number of threads.
 */
#include <math.h>
#include <string.h>

#include "lt_errors.h"
#include "lt_iter.h"
#include "lt_ops.h"
#include "lt_pool.h"
#include "lt_simd.h"
#include "lt_size.h"

static const char *const binop_names[] = { "add", "sub", "mul", "div", "pow", "maximum", "minimum",
                                           "eq",  "ne",  "lt",  "le",  "gt",  "ge" };
static const char *const unop_names[] = { "neg", "exp", "log",  "sqrt",  "abs",  "tanh",  "sigmoid", "relu",
                                          "sin", "cos", "gelu", "rsqrt", "sign", "log1p", "square" };
const char *lt_binop_name(lt_binop op) { return binop_names[op]; }

static int is_compare(lt_binop op) { return op >= LT_EQ; }

int lt_check_dtype(lt_ctx *c, const char *op, const char *what, const lt_tensor *t, lt_dtype want) {
  if (t->dtype == want) return LT_OK;
  return lt_fail(c, LT_E_DTYPE, op, what, lt_dtype_name(want), lt_dtype_name(t->dtype));
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

/* ---- splitting over threads ------------------------------------------------------------------- */

/* Elementwise work of at least this many units (elements x the op's cost below) runs on the pool. Measured with
 * bench/ew_threads.lua on this 2-vCPU machine (1 vs 2 threads): with the worker awake a split of a one-flop op
 * (add, relu, x * 2) gains 1.5x at 16K elements and 1.7-2x from 32K; with the worker asleep (woken through a
 * futex, as after a GEMM) it gains nothing below ~100K and ~1.1-1.7x above. From 64K the split pays in the
 * first case and costs at most a few percent in the second. */
#define EW_PAR_MIN (INT64_C(1) << 16)

static int ew_parts(lt_ctx *c, int64_t n, int cost) { return lt_pool_parts(c->num_threads, n * cost, EW_PAR_MIN); }

/* Walks flat elements [lo, hi) of an iteration (row-major over its merged dims; lo < hi, it->n > 0) as row
 * segments: o0..o2 are a segment's start offsets in the operands, len its length. The body sees a segment
 * exactly as LT_ITER_ROWS would show (part of) a row, so a kernel can be split at any element. */
/* kept as written: clang-format 14 does not reach a fixed point on these macros */
// clang-format off
#define EW_SEGMENTS(it, lo, hi, o0, o1, o2, len)                                                    \
  {                                                                                                 \
    const lt_iter *_it = (it);                                                                      \
    int64_t _ix[LT_MAX_DIM] = { 0 }, _b[3] = { 0, 0, 0 };                                           \
    int64_t _e = (lo), _end = (hi), _j = _e % _it->n, _r = _e / _it->n;                             \
    for (int _d = _it->ndim - 2; _d >= 0; _d--) {                                                   \
      _ix[_d] = _r % _it->shape[_d];                                                                \
      _r /= _it->shape[_d];                                                                         \
      for (int _k = 0; _k < 3; _k++) _b[_k] += _ix[_d] * _it->stride[_k][_d];                       \
    }                                                                                               \
    while (_e < _end) {                                                                             \
      int64_t len = _it->n - _j < _end - _e ? _it->n - _j : _end - _e;                              \
      int64_t o0 = _b[0] + _j * _it->s[0], o1 = _b[1] + _j * _it->s[1], o2 = _b[2] + _j * _it->s[2]; \
      (void)o0; (void)o1; (void)o2;

#define EW_SEGMENTS_END                                                                             \
      _e += len;                                                                                    \
      _j = 0;                                                                                       \
      for (int _d = _it->ndim - 2; _d >= 0; _d--) {                                                 \
        _ix[_d]++;                                                                                  \
        for (int _k = 0; _k < 3; _k++) _b[_k] += _it->stride[_k][_d];                               \
        if (_ix[_d] < _it->shape[_d]) break;                                                        \
        for (int _k = 0; _k < 3; _k++) _b[_k] -= _it->stride[_k][_d] * _ix[_d];                     \
        _ix[_d] = 0;                                                                                \
      }                                                                                             \
    }                                                                                               \
  }
// clang-format on

/* An in-place update whose other operand shares storage with it but is not the same view (x:add_(x:t())), or
 * whose target repeats elements (a stride-0 dim: the binding refuses those, a C host might not), reads or
 * writes what another thread may be writing: such calls stay on one thread, as before. */
static int overlaps(const lt_tensor *out, const lt_tensor *in) {
  for (int d = 0; d < out->ndim; d++)
    if (out->shape[d] > 1 && out->stride[d] == 0) return 1;
  if (out == in || out->storage != in->storage) return 0;
  if (out->offset != in->offset || out->ndim != in->ndim) return 1;
  for (int d = 0; d < out->ndim; d++)
    if (out->shape[d] != in->shape[d] || (out->shape[d] > 1 && out->stride[d] != in->stride[d])) return 1;
  return 0;
}

/* ---- scalar maths, shared by forward loops ---------------------------------------------------- */

__attribute__((always_inline)) static inline float bin_f(lt_binop op, float x, float y) {
  switch (op) {
    case LT_ADD: return x + y;
    case LT_SUB: return x - y;
    case LT_MUL: return x * y;
    case LT_DIV: return x / y;
    case LT_POW: return powf(x, y);
    case LT_MAXIMUM: return x >= y || isnan(x) ? x : y;
    case LT_MINIMUM: return x <= y || isnan(x) ? x : y;
    case LT_EQ: return x == y;
    case LT_NE: return x != y;
    case LT_LT: return x < y;
    case LT_LE: return x <= y;
    case LT_GT: return x > y;
    case LT_GE: return x >= y;
  }
  return 0;
}

/* int64 arithmetic wraps around on overflow, as PyTorch's does: computed in uint64 (defined behaviour in C)
 * and converted back (two's complement on every target GCC supports). */
static inline int64_t wrap_add(int64_t x, int64_t y) { return (int64_t)((uint64_t)x + (uint64_t)y); }
static inline int64_t wrap_sub(int64_t x, int64_t y) { return (int64_t)((uint64_t)x - (uint64_t)y); }
static inline int64_t wrap_mul(int64_t x, int64_t y) { return (int64_t)((uint64_t)x * (uint64_t)y); }

static inline int64_t bin_i(lt_binop op, int64_t x, int64_t y) {
  switch (op) {
    case LT_ADD: return wrap_add(x, y);
    case LT_SUB: return wrap_sub(x, y);
    case LT_MUL: return wrap_mul(x, y);
    case LT_MAXIMUM: return x >= y ? x : y;
    case LT_MINIMUM: return x <= y ? x : y;
    case LT_EQ: return x == y;
    case LT_NE: return x != y;
    case LT_LT: return x < y;
    case LT_LE: return x <= y;
    case LT_GT: return x > y;
    case LT_GE: return x >= y;
    default: return 0;
  }
}

/* Row loop for float32: specialised on unit/zero strides so each case vectorises. */
__attribute__((always_inline)) static inline void bin_row_f(lt_binop op, float *o, int64_t so, const float *x,
                                                            int64_t sx, const float *y, int64_t sy, int64_t n) {
  if (so == 1 && sx == 1 && sy == 1) {
    for (int64_t i = 0; i < n; i++) o[i] = bin_f(op, x[i], y[i]);
  } else if (so == 1 && sx == 1 && sy == 0) {
    float v = y[0];
    for (int64_t i = 0; i < n; i++) o[i] = bin_f(op, x[i], v);
  } else if (so == 1 && sx == 0 && sy == 1) {
    float v = x[0];
    for (int64_t i = 0; i < n; i++) o[i] = bin_f(op, v, y[i]);
  } else {
    for (int64_t i = 0; i < n; i++) o[i * so] = bin_f(op, x[i * sx], y[i * sy]);
  }
}

#define BIN_CASE(OP)                                                               \
  case OP:                                                                         \
    EW_SEGMENTS(it, lo, hi, o0, o1, o2, len) {                                     \
      bin_row_f(OP, po + o0, it->s[0], px + o1, it->s[1], py + o2, it->s[2], len); \
    }                                                                              \
    EW_SEGMENTS_END;                                                               \
    break;

LT_VECTOR_FN static void binary_range(lt_binop op, const lt_iter *it, float *po, const float *px, const float *py,
                                      int64_t lo, int64_t hi) {
  switch (op) {
    // clang-format off
    BIN_CASE(LT_ADD) BIN_CASE(LT_SUB) BIN_CASE(LT_MUL) BIN_CASE(LT_DIV) BIN_CASE(LT_POW) BIN_CASE(LT_MAXIMUM)
    BIN_CASE(LT_MINIMUM) BIN_CASE(LT_EQ) BIN_CASE(LT_NE) BIN_CASE(LT_LT) BIN_CASE(LT_LE) BIN_CASE(LT_GT)
    BIN_CASE(LT_GE)
    // clang-format on
  }
}

/* One elementwise kernel over an iteration, split into element ranges on the pool. */
typedef struct ew_job {
  int op;
  lt_iter it;
  float *po;
  const float *px, *py;
  int64_t total;
} ew_job;

static void binary_part(void *arg, int i, int nparts) {
  const ew_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->total, i, nparts, 16, &lo, &hi);
  if (lo < hi) binary_range((lt_binop)j->op, &j->it, j->po, j->px, j->py, lo, hi);
}

/* out = x op y over a common shape; all float32; out may alias x (in-place). */
static void binary_f32(lt_ctx *c, lt_binop op, int ndim, const int64_t *shape, lt_tensor *out, const lt_tensor *x,
                       const lt_tensor *y) {
  int64_t so[LT_MAX_DIM], sx[LT_MAX_DIM], sy[LT_MAX_DIM];
  lt_broadcast_strides(out, ndim, shape, so);
  lt_broadcast_strides(x, ndim, shape, sx);
  lt_broadcast_strides(y, ndim, shape, sy);
  const int64_t *st[3] = { so, sx, sy };
  ew_job j = { .op = op, .po = lt_f32(out), .px = lt_f32(x), .py = lt_f32(y) };
  lt_iter_init(&j.it, ndim, shape, 3, st);
  j.total = j.it.rows * j.it.n;
  if (j.total == 0) return;
  int parts = overlaps(out, x) || overlaps(out, y) ? 1 : ew_parts(c, j.total, op == LT_POW ? 4 : 1);
  if (parts > 1) lt_pool_run(binary_part, &j, parts);
  else binary_range(op, &j.it, j.po, j.px, j.py, 0, j.total);
}

/* int64 operands; out is int64 (arithmetic) or float32 (comparison masks). */
static void binary_i64(lt_binop op, int ndim, const int64_t *shape, lt_tensor *out, const lt_tensor *x,
                       const lt_tensor *y) {
  int64_t so[LT_MAX_DIM], sx[LT_MAX_DIM], sy[LT_MAX_DIM];
  lt_broadcast_strides(out, ndim, shape, so);
  lt_broadcast_strides(x, ndim, shape, sx);
  lt_broadcast_strides(y, ndim, shape, sy);
  const int64_t *st[3] = { so, sx, sy };
  lt_iter it;
  lt_iter_init(&it, ndim, shape, 3, st);
  const int64_t *px = lt_i64(x), *py = lt_i64(y);
  LT_ITER_ROWS(&it, o0, o1, o2) {
    for (int64_t i = 0; i < it.n; i++) {
      int64_t v = bin_i(op, px[o1 + i * it.s[1]], py[o2 + i * it.s[2]]);
      if (out->dtype == LT_F32) lt_f32(out)[o0 + i * it.s[0]] = (float)v;
      else lt_i64(out)[o0 + i * it.s[0]] = v;
    }
  }
  LT_ITER_ROWS_END(&it, o0, o1, o2);
}

/* ---- backward rules --------------------------------------------------------------------------- */

/* helper: op result reduced to the input's shape; consumes t */
static lt_tensor *to_shape(lt_ctx *c, lt_tensor *t, const lt_tensor *like) {
  if (!t) return NULL;
  if (lt_same_shape(t, like)) return t;
  lt_tensor *r = lt_op_sum_to(c, t, like->ndim, like->shape);
  lt_tensor_release(t);
  return r;
}

static int binary_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_binop op = (lt_binop)n->i[0];
  lt_tensor *a = n->inputs[0], *b = n->inputs[1], *out = n->saved[0];
  int need_a = a->requires_grad, need_b = b->requires_grad;
  switch (op) {
    case LT_ADD:
      if (need_a) gin[0] = to_shape(c, lt_tensor_retain(g), a);
      if (need_b) gin[1] = to_shape(c, lt_tensor_retain(g), b);
      break;
    case LT_SUB:
      if (need_a) gin[0] = to_shape(c, lt_tensor_retain(g), a);
      if (need_b) gin[1] = to_shape(c, lt_op_unary(c, LT_NEG, g), b);
      break;
    case LT_MUL:
      if (need_a) gin[0] = to_shape(c, lt_op_binary(c, LT_MUL, g, b), a);
      if (need_b) gin[1] = to_shape(c, lt_op_binary(c, LT_MUL, g, a), b);
      break;
    case LT_DIV:
      if (need_a) gin[0] = to_shape(c, lt_op_binary(c, LT_DIV, g, b), a);
      if (need_b) { /* -g * out / b */
        lt_tensor *t = lt_op_binary(c, LT_MUL, g, out);
        lt_tensor *u = t ? lt_op_binary(c, LT_DIV, t, b) : NULL;
        lt_tensor_release(t);
        if (u && lt_op_unary_(c, LT_NEG, u)) {
          lt_tensor_release(u);
          u = NULL;
        }
        gin[1] = to_shape(c, u, b);
      }
      break;
    case LT_POW:
      if (need_a) { /* g * b * a^(b-1) */
        lt_tensor *bm1 = lt_op_binary_scalar(c, LT_SUB, b, 1.0, 0);
        lt_tensor *p = bm1 ? lt_op_binary(c, LT_POW, a, bm1) : NULL;
        lt_tensor *q = p ? lt_op_binary(c, LT_MUL, p, b) : NULL;
        lt_tensor *r = q ? lt_op_binary(c, LT_MUL, q, g) : NULL;
        lt_tensor_release(bm1);
        lt_tensor_release(p);
        lt_tensor_release(q);
        gin[0] = to_shape(c, r, a);
      }
      if (need_b) { /* g * out * log(a) */
        lt_tensor *la = lt_op_unary(c, LT_LOG, a);
        lt_tensor *p = la ? lt_op_binary(c, LT_MUL, la, out) : NULL;
        lt_tensor *r = p ? lt_op_binary(c, LT_MUL, p, g) : NULL;
        lt_tensor_release(la);
        lt_tensor_release(p);
        gin[1] = to_shape(c, r, b);
      }
      break;
    case LT_MAXIMUM:
    case LT_MINIMUM: { /* the gradient goes to the operand that was chosen; on ties each gets half (PyTorch) */
      lt_tensor *win = lt_op_binary(c, op == LT_MAXIMUM ? LT_GT : LT_LT, a, b);
      lt_tensor *tie = win ? lt_op_binary(c, LT_EQ, a, b) : NULL;
      lt_tensor *mask = tie && !lt_op_binary_scalar_(c, LT_MUL, tie, 0.5) ? lt_op_binary(c, LT_ADD, win, tie) : NULL;
      lt_tensor_release(win);
      lt_tensor_release(tie);
      if (!mask) return LT_ERR;
      if (need_a) gin[0] = to_shape(c, lt_op_binary(c, LT_MUL, g, mask), a);
      if (need_b) {
        lt_tensor *inv = lt_op_binary_scalar(c, LT_SUB, mask, 1.0, 1);
        gin[1] = to_shape(c, inv ? lt_op_binary(c, LT_MUL, g, inv) : NULL, b);
        lt_tensor_release(inv);
      }
      lt_tensor_release(mask);
      break;
    }
    default: break;
  }
  if ((need_a && !gin[0]) || (need_b && !gin[1])) return LT_ERR;
  return LT_OK;
}

/* ---- binary forward --------------------------------------------------------------------------- */

/* The inputs binary_backward reads for the gradients that will be asked for (node->reads), as PyTorch saves
 * an operand only for a formula that uses it: a * b reads b for a's gradient and a for b's. */
static unsigned binary_reads(lt_binop op, int need_a, int need_b) {
  switch (op) {
    case LT_MUL: return (need_b ? LT_READS(0) : 0) | (need_a ? LT_READS(1) : 0);
    case LT_DIV: return LT_READS(1);                              /* g / b, and -g out / b */
    case LT_POW: return LT_READS(0) | (need_a ? LT_READS(1) : 0); /* g b a^(b-1), and g out log a */
    case LT_MAXIMUM:
    case LT_MINIMUM: return LT_READS(0) | LT_READS(1);
    default: return 0; /* add, sub */
  }
}

lt_tensor *lt_op_binary(lt_ctx *c, lt_binop op, lt_tensor *a, lt_tensor *b) {
  const char *name = binop_names[op];
  int ndim;
  int64_t shape[LT_MAX_DIM];
  if (lt_broadcast_shape(c, name, a, b, &ndim, shape)) return NULL;
  if (a->dtype == LT_I64 && b->dtype == LT_I64 && op != LT_DIV && op != LT_POW) {
    lt_tensor *out = lt_tensor_new(c, is_compare(op) ? LT_F32 : LT_I64, ndim, shape);
    if (out) binary_i64(op, ndim, shape, out, a, b);
    return out;
  }
  /* mixed or integer division: compute in float32, as PyTorch's type promotion does */
  lt_tensor *fa = lt_op_to_dtype(c, a, LT_F32);
  lt_tensor *fb = fa ? lt_op_to_dtype(c, b, LT_F32) : NULL;
  lt_tensor *out = fb ? lt_tensor_new(c, LT_F32, ndim, shape) : NULL;
  if (out) {
    binary_f32(c, op, ndim, shape, out, fa, fb);
    if (!is_compare(op)) {
      lt_tensor *ins[2] = { fa, fb };
      lt_node *nd;
      if (lt_record(c, out, name, binary_backward, 2, ins, &nd)) {
        lt_tensor_release(out);
        out = NULL;
      } else if (nd) {
        int need_a = fa->requires_grad, need_b = fb->requires_grad;
        nd->i[0] = op;
        nd->reads = binary_reads(op, need_a, need_b);
        if ((op == LT_DIV || op == LT_POW) && need_b && lt_node_save_output(c, nd, 0, out)) {
          lt_tensor_release(out);
          out = NULL;
        }
      }
    }
  }
  lt_tensor_release(fa);
  lt_tensor_release(fb);
  return out;
}

int lt_op_binary_(lt_ctx *c, lt_binop op, lt_tensor *a, lt_tensor *b) {
  const char *name = binop_names[op];
  if (lt_check_inplace(c, name, a)) return LT_ERR;
  int ndim;
  int64_t shape[LT_MAX_DIM];
  if (lt_broadcast_shape(c, name, a, b, &ndim, shape)) return LT_ERR;
  /* the result must keep a's shape */
  int keeps_shape = ndim == a->ndim;
  for (int d = 0; d < ndim && keeps_shape; d++) keeps_shape = a->shape[d] == shape[d];
  if (!keeps_shape) {
    char b1[128], b2[128];
    return lt_fail(c, "%s_: the result would have shape %s, but the tensor updated in place is %s", name,
                   lt_dims_str(ndim, shape, b1, sizeof b1), lt_shape_str(a, b2, sizeof b2));
  }
  if (a->dtype == LT_I64) {
    if (b->dtype != LT_I64 || op == LT_DIV || op == LT_POW || is_compare(op))
      return lt_fail(c, "%s_: cannot update an int64 tensor in place with a %s result", name,
                     b->dtype == LT_I64 ? "float32" : lt_dtype_name(b->dtype));
    lt_mark_modified(a);
    binary_i64(op, ndim, shape, a, a, b);
    return LT_OK;
  }
  lt_tensor *fb = lt_op_to_dtype(c, b, LT_F32);
  if (!fb) return LT_ERR;
  lt_mark_modified(a);
  binary_f32(c, op, ndim, shape, a, a, fb);
  lt_tensor_release(fb);
  return LT_OK;
}

/* ---- scalar forms ----------------------------------------------------------------------------- */

static int scalar_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_binop op = (lt_binop)n->i[0];
  int first = (int)n->i[1];
  double s = n->f[0];
  lt_tensor *a = n->inputs[0], *out = n->saved[0];
  lt_tensor *r = NULL;
  switch (op) {
    case LT_ADD: r = lt_tensor_retain(g); break;
    case LT_SUB: r = first ? lt_op_unary(c, LT_NEG, g) : lt_tensor_retain(g); break;
    case LT_MUL: r = lt_op_binary_scalar(c, LT_MUL, g, s, 0); break;
    case LT_DIV:
      if (!first) r = lt_op_binary_scalar(c, LT_DIV, g, s, 0);
      else { /* d(s/a) = -s/a^2 = -out/a */ lt_tensor *t = lt_op_binary(c, LT_DIV, out, a);
        r = t ? lt_op_binary(c, LT_MUL, t, g) : NULL;
        lt_tensor_release(t);
        if (r && lt_op_unary_(c, LT_NEG, r)) {
          lt_tensor_release(r);
          r = NULL;
        }
      }
      break;
    case LT_POW:
      if (!first) { /* g * s * a^(s-1) */
        lt_tensor *p = lt_op_binary_scalar(c, LT_POW, a, s - 1.0, 0);
        if (p && lt_op_binary_scalar_(c, LT_MUL, p, s)) {
          lt_tensor_release(p);
          p = NULL;
        }
        r = p ? lt_op_binary(c, LT_MUL, p, g) : NULL;
        lt_tensor_release(p);
      } else { /* g * out * ln(s) */
        lt_tensor *p = lt_op_binary(c, LT_MUL, g, out);
        if (p && lt_op_binary_scalar_(c, LT_MUL, p, log(s))) {
          lt_tensor_release(p);
          p = NULL;
        }
        r = p;
      }
      break;
    case LT_MAXIMUM:
    case LT_MINIMUM: {
      lt_tensor *mask = lt_op_binary_scalar(c, op == LT_MAXIMUM ? LT_GE : LT_LE, a, s, 0);
      r = mask ? lt_op_binary(c, LT_MUL, g, mask) : NULL;
      lt_tensor_release(mask);
      break;
    }
    default: break;
  }
  gin[0] = r;
  return r ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_binary_scalar(lt_ctx *c, lt_binop op, lt_tensor *a, double s, int scalar_first) {
  const char *name = binop_names[op];
  if (a->dtype == LT_I64 && s == floor(s) && op != LT_DIV && op != LT_POW) {
    lt_tensor *out = lt_tensor_new(c, is_compare(op) ? LT_F32 : LT_I64, a->ndim, a->shape);
    if (!out) return NULL;
    lt_tensor *sv = lt_op_full(c, LT_I64, 0, NULL, s);
    if (!sv) {
      lt_tensor_release(out);
      return NULL;
    }
    if (scalar_first) binary_i64(op, a->ndim, a->shape, out, sv, a);
    else binary_i64(op, a->ndim, a->shape, out, a, sv);
    lt_tensor_release(sv);
    return out;
  }
  lt_tensor *fa = lt_op_to_dtype(c, a, LT_F32);
  if (!fa) return NULL;
  lt_tensor *out = lt_tensor_new(c, LT_F32, a->ndim, a->shape);
  lt_tensor sv = { 0 };
  lt_storage ss = { 1, sizeof(float), NULL, 0 };
  float sval = (float)s;
  ss.data = &sval;
  sv.refcount = 1;
  sv.storage = &ss;
  sv.dtype = LT_F32;
  if (out) {
    if (scalar_first) binary_f32(c, op, a->ndim, a->shape, out, &sv, fa);
    else binary_f32(c, op, a->ndim, a->shape, out, fa, &sv);
    if (!is_compare(op)) {
      lt_node *nd;
      if (lt_record(c, out, name, scalar_backward, 1, &fa, &nd)) {
        lt_tensor_release(out);
        out = NULL;
      } else if (nd) {
        nd->i[0] = op;
        nd->i[1] = scalar_first;
        nd->f[0] = s;
        /* s / a reads a and the output, a ^ s reads a, s ^ a the output, max/min a (scalar_backward) */
        int reads_a =
            (op == LT_DIV && scalar_first) || (op == LT_POW && !scalar_first) || op == LT_MAXIMUM || op == LT_MINIMUM;
        nd->reads = reads_a ? LT_READS(0) : 0;
        if ((op == LT_DIV || op == LT_POW) && scalar_first && lt_node_save_output(c, nd, 0, out)) {
          lt_tensor_release(out);
          out = NULL;
        }
      }
    }
  }
  lt_tensor_release(fa);
  return out;
}

int lt_op_binary_scalar_(lt_ctx *c, lt_binop op, lt_tensor *a, double s) {
  const char *name = binop_names[op];
  if (lt_check_inplace(c, name, a)) return LT_ERR;
  if (a->dtype == LT_I64) {
    if (s != floor(s) || op == LT_DIV || op == LT_POW || is_compare(op))
      return lt_fail(c, "%s_: cannot update an int64 tensor in place with a non-integer result", name);
    lt_tensor *sv = lt_op_full(c, LT_I64, 0, NULL, s);
    if (!sv) return LT_ERR;
    lt_mark_modified(a);
    binary_i64(op, a->ndim, a->shape, a, a, sv);
    lt_tensor_release(sv);
    return LT_OK;
  }
  lt_tensor sv = { 0 };
  lt_storage ss = { 1, sizeof(float), NULL, 0 };
  float sval = (float)s;
  ss.data = &sval;
  sv.refcount = 1;
  sv.storage = &ss;
  sv.dtype = LT_F32;
  lt_mark_modified(a);
  binary_f32(c, op, a->ndim, a->shape, a, a, &sv);
  return LT_OK;
}

LT_VECTOR_FN static void axpy_range(const lt_iter *it, float *pa, const float *pb, float al, int64_t lo, int64_t hi) {
  EW_SEGMENTS(it, lo, hi, o0, o1, o2, len) {
    float *x = pa + o0;
    const float *y = pb + o1;
    if (it->s[0] == 1 && it->s[1] == 1) {
      if (al == 1.0f)
        for (int64_t i = 0; i < len; i++) x[i] += y[i];
      else
        for (int64_t i = 0; i < len; i++) x[i] += al * y[i];
    } else {
      for (int64_t i = 0; i < len; i++) x[i * it->s[0]] += al * y[i * it->s[1]];
    }
  }
  EW_SEGMENTS_END;
}

static void axpy_part(void *arg, int i, int nparts) {
  const ew_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->total, i, nparts, 16, &lo, &hi);
  if (lo < hi) axpy_range(&j->it, j->po, j->px, *j->py, lo, hi);
}

int lt_op_axpy_(lt_ctx *c, lt_tensor *a, double alpha, lt_tensor *b) {
  if (lt_check_inplace(c, "add_", a)) return LT_ERR;
  if (lt_check_dtype(c, "add_", "the tensor updated in place", a, LT_F32)) return LT_ERR;
  if (lt_check_dtype(c, "add_", "the added tensor", b, LT_F32)) return LT_ERR;
  int ndim;
  int64_t shape[LT_MAX_DIM];
  if (lt_broadcast_shape(c, "add_", a, b, &ndim, shape)) return LT_ERR;
  if (ndim != a->ndim) {
    char b1[128], b2[128];
    return lt_fail(c, "add_: %s cannot be added in place into %s", lt_shape_str(b, b1, sizeof b1),
                   lt_shape_str(a, b2, sizeof b2));
  }
  for (int d = 0; d < ndim; d++)
    if (shape[d] != a->shape[d]) {
      char b1[128], b2[128];
      return lt_fail(c, "add_: %s cannot be added in place into %s", lt_shape_str(b, b1, sizeof b1),
                     lt_shape_str(a, b2, sizeof b2));
    }
  int64_t sa[LT_MAX_DIM], sb[LT_MAX_DIM];
  lt_broadcast_strides(a, ndim, shape, sa);
  lt_broadcast_strides(b, ndim, shape, sb);
  const int64_t *st[2] = { sa, sb };
  float al = (float)alpha;
  lt_mark_modified(a);
  ew_job j = { .po = lt_f32(a), .px = lt_f32(b), .py = &al };
  lt_iter_init(&j.it, ndim, shape, 2, st);
  j.total = j.it.rows * j.it.n;
  if (j.total == 0) return LT_OK;
  int parts = overlaps(a, b) ? 1 : ew_parts(c, j.total, 1);
  if (parts > 1) lt_pool_run(axpy_part, &j, parts);
  else axpy_range(&j.it, j.po, j.px, al, 0, j.total);
  return LT_OK;
}

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

#define UN_CASE(OP)                                                                    \
  case OP:                                                                             \
    EW_SEGMENTS(it, lo, hi, o0, o1, o2, len) {                                         \
      float *y = po + o0;                                                              \
      const float *x = px + o1;                                                        \
      if (it->s[0] == 1 && it->s[1] == 1)                                              \
        for (int64_t i = 0; i < len; i++) y[i] = un_f(OP, x[i]);                       \
      else                                                                             \
        for (int64_t i = 0; i < len; i++) y[i * it->s[0]] = un_f(OP, x[i * it->s[1]]); \
    }                                                                                  \
    EW_SEGMENTS_END;                                                                   \
    break;

LT_VECTOR_FN static void unary_range(lt_unop op, const lt_iter *it, float *po, const float *px, int64_t lo,
                                     int64_t hi) {
  switch (op) {
    // clang-format off
    UN_CASE(LT_NEG) UN_CASE(LT_EXP) UN_CASE(LT_LOG) UN_CASE(LT_SQRT) UN_CASE(LT_ABS) UN_CASE(LT_TANH)
    UN_CASE(LT_SIGMOID) UN_CASE(LT_RELU) UN_CASE(LT_SIN) UN_CASE(LT_COS) UN_CASE(LT_GELU) UN_CASE(LT_RSQRT)
    UN_CASE(LT_SIGN) UN_CASE(LT_LOG1P) UN_CASE(LT_SQUARE)
    // clang-format on
  }
}

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
  grad_job j = { op, lt_f32(x), y ? lt_f32(y) : NULL, lt_f32(gc), lt_f32(r), lt_numel(x) };
  int parts = ew_parts(c, j.n, unary_cost(op));
  if (parts > 1) lt_pool_run(unary_grad_part, &j, parts);
  else unary_grad_kernel(op, j.px, j.py, j.pg, j.pr, j.n);
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
  lt_tensor *fa = lt_op_to_dtype(c, a, LT_F32);
  if (!fa) return NULL;
  lt_tensor *out = lt_tensor_new(c, LT_F32, fa->ndim, fa->shape);
  if (out) {
    unary_f32(c, op, out, fa);
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
  if (lt_check_dtype(c, unop_names[op], "the tensor updated in place", a, LT_F32)) return LT_ERR;
  lt_mark_modified(a);
  unary_f32(c, op, a, a);
  return LT_OK;
}

/* ---- leaky_relu, clamp, where ------------------------------------------------------------------ */

/* The contiguous one-pass kernels of leaky_relu and clamp, forward and backward. */
typedef enum { MAP_LEAKY, MAP_LEAKY_GRAD, MAP_CLAMP, MAP_CLAMP_GRAD } map_kind;
typedef struct map_job {
  map_kind kind;
  const float *px, *pg; /* input, incoming gradient (backward) */
  float *po;
  float a, b; /* slope, or min and max */
  int64_t n;
} map_job;

LT_VECTOR_FN static void map_range(const map_job *j, int64_t lo, int64_t hi) {
  const float *px = j->px, *pg = j->pg;
  float *po = j->po, a = j->a, b = j->b;
  switch (j->kind) {
    case MAP_LEAKY:
      for (int64_t i = lo; i < hi; i++) po[i] = px[i] > 0 ? px[i] : a * px[i];
      break;
    case MAP_LEAKY_GRAD:
      for (int64_t i = lo; i < hi; i++) po[i] = px[i] > 0 ? pg[i] : a * pg[i];
      break;
    case MAP_CLAMP:
      for (int64_t i = lo; i < hi; i++) po[i] = px[i] < a ? a : (px[i] > b ? b : px[i]);
      break;
    case MAP_CLAMP_GRAD:
      for (int64_t i = lo; i < hi; i++) po[i] = (px[i] >= a && px[i] <= b) ? pg[i] : 0.0f;
      break;
  }
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
    map_job j = { MAP_LEAKY_GRAD, lt_f32(x), lt_f32(gc), lt_f32(r), (float)n->f[0], 0, lt_numel(x) };
    map_run(c, &j);
  }
  lt_tensor_release(x);
  lt_tensor_release(gc);
  gin[0] = r;
  return r ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_leaky_relu(lt_ctx *c, lt_tensor *a, double slope) {
  if (lt_check_dtype(c, "leaky_relu", "input", a, LT_F32)) return NULL;
  lt_tensor *x = lt_op_contiguous(c, a);
  lt_tensor *out = x ? lt_tensor_new_like(c, x) : NULL;
  if (out) {
    map_job j = { MAP_LEAKY, lt_f32(x), NULL, lt_f32(out), (float)slope, 0, lt_numel(x) };
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

static int clamp_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *x = lt_op_contiguous(c, n->inputs[0]);
  lt_tensor *gc = x ? lt_op_contiguous(c, g) : NULL;
  lt_tensor *r = gc ? lt_tensor_new_like(c, x) : NULL;
  if (r) {
    map_job j = { MAP_CLAMP_GRAD, lt_f32(x), lt_f32(gc), lt_f32(r), (float)n->f[0], (float)n->f[1], lt_numel(x) };
    map_run(c, &j);
  }
  lt_tensor_release(x);
  lt_tensor_release(gc);
  gin[0] = r;
  return r ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_clamp(lt_ctx *c, lt_tensor *a, double lo, double hi) {
  if (lt_check_dtype(c, "clamp", "input", a, LT_F32)) return NULL;
  if (lo > hi) {
    lt_fail(c, "clamp: min %g is greater than max %g", lo, hi);
    return NULL;
  }
  lt_tensor *x = lt_op_contiguous(c, a);
  lt_tensor *out = x ? lt_tensor_new_like(c, x) : NULL;
  if (out) {
    map_job j = { MAP_CLAMP, lt_f32(x), NULL, lt_f32(out), (float)lo, (float)hi, lt_numel(x) };
    map_run(c, &j);
    lt_node *nd;
    if (lt_record(c, out, "clamp", clamp_backward, 1, &a, &nd)) {
      lt_tensor_release(out);
      out = NULL;
    } else if (nd) {
      nd->f[0] = lo;
      nd->f[1] = hi;
    }
  }
  lt_tensor_release(x);
  return out;
}

int lt_op_clamp_(lt_ctx *c, lt_tensor *a, double lo, double hi) {
  if (lt_check_inplace(c, "clamp_", a)) return LT_ERR;
  if (lt_check_dtype(c, "clamp_", "the tensor updated in place", a, LT_F32)) return LT_ERR;
  if (lo > hi) return lt_fail(c, "clamp_: min %g is greater than max %g", lo, hi);
  lt_mark_modified(a);
  if (lt_is_contiguous(a)) {
    map_job j = { MAP_CLAMP, lt_f32(a), NULL, lt_f32(a), (float)lo, (float)hi, lt_numel(a) };
    map_run(c, &j);
    return LT_OK;
  }
  const int64_t *st[1] = { a->stride };
  lt_iter it;
  lt_iter_init(&it, a->ndim, a->shape, 1, st);
  float l = (float)lo, h = (float)hi, *p = lt_f32(a);
  LT_ITER_ROWS(&it, o0, o1, o2) {
    for (int64_t i = 0; i < it.n; i++) {
      float *v = p + o0 + i * it.s[0];
      *v = *v < l ? l : (*v > h ? h : *v);
    }
  }
  LT_ITER_ROWS_END(&it, o0, o1, o2);
  return LT_OK;
}

/* The one kernel of where and masked_fill, over out's shape with cond and src broadcast to it (float32):
 * masked_fill: out = cond ? v : src (one pass from src); where: out = cond ? src : out, after out was filled
 * from the other branch. Split over the pool like the other elementwise kernels (bitwise the same). */
typedef struct select_job {
  lt_iter it;
  float *po;
  const float *pc, *ps;
  float v;
  int fill; /* 1: masked_fill, 0: where */
  int64_t total;
} select_job;

LT_VECTOR_FN static void select_range(const select_job *j, int64_t lo, int64_t hi) {
  float *po = j->po, v = j->v;
  const float *pc = j->pc, *ps = j->ps;
  EW_SEGMENTS(&j->it, lo, hi, o0, o1, o2, len) {
    float *y = po + o0;
    const float *m = pc + o1, *x = ps + o2;
    int64_t s0 = j->it.s[0], s1 = j->it.s[1], s2 = j->it.s[2];
    if (j->fill) {
      if (s0 == 1 && s1 == 1 && s2 == 1)
        for (int64_t i = 0; i < len; i++) y[i] = m[i] != 0.0f ? v : x[i];
      else if (s0 == 1 && s1 == 0 && s2 == 1) {
        if (m[0] != 0.0f)
          for (int64_t i = 0; i < len; i++) y[i] = v;
        else
          for (int64_t i = 0; i < len; i++) y[i] = x[i];
      } else
        for (int64_t i = 0; i < len; i++) y[i * s0] = m[i * s1] != 0.0f ? v : x[i * s2];
    } else {
      if (s0 == 1 && s1 == 1 && s2 == 1)
        for (int64_t i = 0; i < len; i++) y[i] = m[i] != 0.0f ? x[i] : y[i];
      else
        for (int64_t i = 0; i < len; i++) y[i * s0] = m[i * s1] != 0.0f ? x[i * s2] : y[i * s0];
    }
  }
  EW_SEGMENTS_END;
}

static void select_part(void *arg, int i, int nparts) {
  const select_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->total, i, nparts, 16, &lo, &hi);
  if (lo < hi) select_range(j, lo, hi);
}

/* out is fresh and contiguous; cond and src float32, broadcastable to out (checked by the callers). */
static int select_run(lt_ctx *c, lt_tensor *out, const lt_tensor *cond, const lt_tensor *src, float v, int fill) {
  lt_tensor *cc = lt_broadcast_alias(c, cond, out->ndim, out->shape);
  lt_tensor *cs = cc ? lt_broadcast_alias(c, src, out->ndim, out->shape) : NULL;
  if (!cs) {
    lt_tensor_release(cc);
    return LT_ERR;
  }
  const int64_t *st[3] = { out->stride, cc->stride, cs->stride };
  select_job j = { .po = lt_f32(out), .pc = lt_f32(cc), .ps = lt_f32(cs), .v = v, .fill = fill };
  lt_iter_init(&j.it, out->ndim, out->shape, 3, st);
  j.total = j.it.rows * j.it.n;
  if (j.total > 0) {
    int parts = ew_parts(c, j.total, 1);
    if (parts > 1) lt_pool_run(select_part, &j, parts);
    else select_range(&j, 0, j.total);
  }
  lt_tensor_release(cc);
  lt_tensor_release(cs);
  return LT_OK;
}

static int where_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *cond = n->saved[0];
  lt_tensor *a = n->inputs[0], *b = n->inputs[1];
  lt_tensor *zero = lt_tensor_scalar(c, 0.0);
  if (!zero) return LT_ERR;
  if (a->requires_grad) gin[0] = to_shape(c, lt_op_where(c, cond, g, zero), a);
  if (b->requires_grad) gin[1] = to_shape(c, lt_op_where(c, cond, zero, g), b);
  lt_tensor_release(zero);
  return ((a->requires_grad && !gin[0]) || (b->requires_grad && !gin[1])) ? LT_ERR : LT_OK;
}

lt_tensor *lt_op_where(lt_ctx *c, lt_tensor *cond, lt_tensor *a, lt_tensor *b) {
  int nd1, nd2;
  int64_t s1[LT_MAX_DIM], s2[LT_MAX_DIM];
  if (lt_broadcast_shape(c, "where", a, b, &nd1, s1)) return NULL;
  lt_tensor tmp = { .ndim = nd1 };
  memcpy(tmp.shape, s1, sizeof s1);
  if (lt_broadcast_shape(c, "where", cond, &tmp, &nd2, s2)) return NULL;
  lt_tensor *fa = lt_op_to_dtype(c, a, LT_F32);
  lt_tensor *fb = fa ? lt_op_to_dtype(c, b, LT_F32) : NULL;
  lt_tensor *fc = fb ? lt_op_to_dtype(c, cond, LT_F32) : NULL;
  lt_tensor *out = fc ? lt_tensor_new(c, LT_F32, nd2, s2) : NULL;
  /* out = b, then the elements where cond is set come from a */
  if (out && (lt_op_copy_(c, out, fb) || select_run(c, out, fc, fa, 0.0f, 0))) {
    lt_tensor_release(out);
    out = NULL;
  }
  if (out) {
    lt_tensor *ins[2] = { fa, fb };
    lt_node *nd;
    if (lt_record(c, out, "where", where_backward, 2, ins, &nd)) {
      lt_tensor_release(out);
      out = NULL;
    } else if (nd) {
      nd->reads = 0; /* the backward reads only the condition */
      lt_node_save(nd, 0, cond);
    }
  }
  lt_tensor_release(fa);
  lt_tensor_release(fb);
  lt_tensor_release(fc);
  return out;
}

static int masked_fill_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *x = n->inputs[0];
  lt_tensor *r = lt_op_masked_fill(c, g, n->saved[0], 0.0);  /* no gradient where the value was written */
  gin[0] = r ? lt_op_sum_to(c, r, x->ndim, x->shape) : NULL; /* x may have been broadcast to the mask */
  lt_tensor_release(r);
  return gin[0] ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_masked_fill(lt_ctx *c, lt_tensor *x, lt_tensor *mask, double value) {
  if (lt_check_dtype(c, "masked_fill", "input", x, LT_F32)) return NULL;
  int nd;
  int64_t shape[LT_MAX_DIM];
  if (lt_broadcast_shape(c, "masked_fill", x, mask, &nd, shape)) return NULL; /* both broadcast, as torch's */
  lt_tensor *fm = lt_op_to_dtype(c, mask, LT_F32);
  lt_tensor *out = fm ? lt_tensor_new(c, LT_F32, nd, shape) : NULL;
  if (out && select_run(c, out, fm, x, (float)value, 1)) {
    lt_tensor_release(out);
    out = NULL;
  }
  if (out) {
    lt_node *node;
    if (lt_record(c, out, "masked_fill", masked_fill_backward, 1, &x, &node)) {
      lt_tensor_release(out);
      out = NULL;
    } else if (node) {
      node->reads = 0; /* the backward reads only the mask */
      lt_node_save(node, 0, fm);
    }
  }
  lt_tensor_release(fm);
  return out;
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
