/*
 * ops_binary.c — broadcasting binary ops (arithmetic, maximum/minimum, comparisons), their scalar forms and
 * a += alpha * b (its kernel: accumulate.c), with their backward rules. Forward loops run over merged strided rows (lt_iter.h) so
 * contiguous and bias-like broadcasts are unit-stride loops the compiler vectorises; large float32 kernels are
 * split over the pool (ops_ew_internal.h).
 */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "lt_errors.h"
#include "lt_ops.h"
#include "lt_simd.h"
#include "ops_ew_internal.h"
#include "ops_ew_kernels.h"
#include "ops_f64.h"
#include "ops_stream.h"

static const char *const binop_names[] = { "add", "sub", "mul", "div", "pow", "maximum", "minimum",
                                           "eq",  "ne",  "lt",  "le",  "gt",  "ge" };
const char *lt_binop_name(lt_binop op) { return binop_names[op]; }

static int is_compare(lt_binop op) { return op >= LT_EQ; }

/* ---- scalar maths, shared by forward loops ---------------------------------------------------- */

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

/* The float32 kernels, from the source the float64 ones share (ops_ew_kernels.h) */
BINARY_SCALAR(bin_f, float, powf)
BINARY_KERNEL(binary_range, float, float, bin_f)

static void binary_part(void *arg, int i, int nparts) {
  const ew_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->total, i, nparts, 16, &lo, &hi);
  if (lo < hi) binary_range((lt_binop)j->op, &j->it, j->po, j->px, j->py, lo, hi);
}

/* A new result this large (bytes; twice a core's L2 cache, at least 2 MB) of add, sub, mul or div is written
 * with streaming stores (ops_stream.c says why): rows of unit stride whose operands are rows or numbers, as
 * `a + b` and `x + bias` are. */
static int64_t stream_min_bytes(void) {
  static int64_t cached;
  int64_t v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (v == 0) {
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    v = 2 * (l2 > 0 ? (int64_t)l2 : INT64_C(1) << 20);
    if (v < (INT64_C(2) << 20)) v = INT64_C(2) << 20;
    __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
  }
  return v;
}

static int streams(lt_binop op, const lt_iter *it, int64_t total) {
  return op <= LT_DIV && it->s[0] == 1 && (it->s[1] == 0 || it->s[1] == 1) && (it->s[2] == 0 || it->s[2] == 1) &&
         (it->s[1] | it->s[2]) && total * (int64_t)sizeof(float) >= stream_min_bytes();
}

static void binary_range_streamed(lt_binop op, const lt_iter *it, float *po, const float *px, const float *py,
                                  int64_t lo, int64_t hi) {
  EW_SEGMENTS(it, lo, hi, o0, o1, o2, len) {
    lt_stream_binary_row(op, po + o0, px + o1, it->s[1], py + o2, it->s[2], len);
  }
  EW_SEGMENTS_END;
  lt_stream_fence();
}

static void binary_streamed_part(void *arg, int i, int nparts) {
  const ew_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->total, i, nparts, 16, &lo, &hi);
  if (lo < hi) binary_range_streamed((lt_binop)j->op, &j->it, j->po, j->px, j->py, lo, hi);
}

/* out = x op y over a common shape; all float32; out may alias x (in-place). */
static void binary_f32(lt_ctx *c, lt_binop op, int ndim, const int64_t *shape, lt_tensor *out, const lt_tensor *x,
                       const lt_tensor *y) {
  ew_job j = { .op = op, .po = lt_f32(out), .px = lt_f32(x), .py = lt_f32(y) };
  ew_binary_iter(&j.it, ndim, shape, out, x, y);
  j.total = j.it.rows * j.it.n;
  if (j.total == 0) return;
  int partial = overlaps(out, x) || overlaps(out, y); /* out shares memory with an operand, not element for element */
  int parts = partial ? 1 : ew_parts(c, j.total, op == LT_POW ? 4 : 1);
  /* into an operand's memory (x:add_(y), out == x), the lines are in the cache already (just read): streaming them
   * out would only make the next read of the result go to memory (b:add_(bias) on 4 MB: 237 us streamed) */
  int writes_operand = out->storage == x->storage || out->storage == y->storage;
  int stream = !writes_operand && streams(op, &j.it, j.total);
  if (parts > 1) lt_pool_run(stream ? binary_streamed_part : binary_part, &j, parts);
  else if (stream) binary_range_streamed(op, &j.it, j.po, j.px, j.py, 0, j.total);
  else binary_range(op, &j.it, j.po, j.px, j.py, 0, j.total);
}

/* int64 operands; out is int64 (arithmetic) or float32 (comparison masks). */
static void binary_i64(lt_binop op, int ndim, const int64_t *shape, lt_tensor *out, const lt_tensor *x,
                       const lt_tensor *y) {
  lt_iter it;
  ew_binary_iter(&it, ndim, shape, out, x, y);
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

static int binary_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_binop op = (lt_binop)n->i[0];
  lt_tensor *a = n->inputs[0], *b = n->inputs[1], *out = n->saved[0];
  int need_a = a->requires_grad, need_b = b->requires_grad;
  switch (op) {
    case LT_ADD:
      if (need_a) gin[0] = lt_sum_to_like(c, lt_tensor_retain(g), a);
      if (need_b) gin[1] = lt_sum_to_like(c, lt_tensor_retain(g), b);
      break;
    case LT_SUB:
      if (need_a) gin[0] = lt_sum_to_like(c, lt_tensor_retain(g), a);
      if (need_b) gin[1] = lt_sum_to_like(c, lt_op_unary(c, LT_NEG, g), b);
      break;
    case LT_MUL:
      if (need_a) gin[0] = lt_sum_to_like(c, lt_op_binary(c, LT_MUL, g, b), a);
      if (need_b) gin[1] = lt_sum_to_like(c, lt_op_binary(c, LT_MUL, g, a), b);
      break;
    case LT_DIV:
      if (need_a) gin[0] = lt_sum_to_like(c, lt_op_binary(c, LT_DIV, g, b), a);
      if (need_b) { /* -g * out / b */
        lt_tensor *t = lt_op_binary(c, LT_MUL, g, out);
        lt_tensor *u = t ? lt_op_binary(c, LT_DIV, t, b) : NULL;
        lt_tensor_release(t);
        if (u && lt_op_unary_(c, LT_NEG, u)) {
          lt_tensor_release(u);
          u = NULL;
        }
        gin[1] = lt_sum_to_like(c, u, b);
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
        gin[0] = lt_sum_to_like(c, r, a);
      }
      if (need_b) { /* g * out * log(a) */
        lt_tensor *la = lt_op_unary(c, LT_LOG, a);
        lt_tensor *p = la ? lt_op_binary(c, LT_MUL, la, out) : NULL;
        lt_tensor *r = p ? lt_op_binary(c, LT_MUL, p, g) : NULL;
        lt_tensor_release(la);
        lt_tensor_release(p);
        gin[1] = lt_sum_to_like(c, r, b);
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
      if (need_a) gin[0] = lt_sum_to_like(c, lt_op_binary(c, LT_MUL, g, mask), a);
      if (need_b) {
        lt_tensor *inv = lt_op_binary_scalar(c, LT_SUB, mask, 1.0, 1);
        gin[1] = lt_sum_to_like(c, inv ? lt_op_binary(c, LT_MUL, g, inv) : NULL, b);
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
  /* mixed or integer division: compute in float32, or float64 when either is, as PyTorch's type promotion does */
  lt_dtype ft = a->dtype == LT_F64 || b->dtype == LT_F64 ? LT_F64 : LT_F32;
  lt_tensor *fa = lt_op_to_dtype(c, a, ft);
  lt_tensor *fb = fa ? lt_op_to_dtype(c, b, ft) : NULL;
  lt_tensor *out = fb ? lt_tensor_new(c, is_compare(op) ? LT_F32 : ft, ndim, shape) : NULL;
  if (out) {
    if (ft == LT_F64) lt_binary_f64(op, ndim, shape, out, fa, fb);
    else binary_f32(c, op, ndim, shape, out, fa, fb);
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
  if (a->dtype == LT_F32 && b->dtype == LT_F64)
    return lt_fail(c, "%s_: cannot update a float32 tensor in place with a float64 operand (convert it with :float())",
                   name);
  if (a->dtype == LT_F64 && is_compare(op))
    return lt_fail(c, "%s_: cannot update a float64 tensor in place with a comparison's float32 mask", name);
  lt_tensor *fb = lt_op_to_dtype(c, b, a->dtype);
  if (!fb) return LT_ERR;
  lt_mark_modified(a);
  if (a->dtype == LT_F64) lt_binary_f64(op, ndim, shape, a, a, fb);
  else binary_f32(c, op, ndim, shape, a, a, fb);
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
    if (!(s >= -0x1p63 && s < 0x1p63)) { /* +-inf, 2^63 and beyond: no int64 holds them */
      lt_fail(c, LT_E_INT64_SCALAR, name, "", s);
      return NULL;
    }
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
  /* a Lua number does not promote: a float32 tensor stays float32, as PyTorch's Python scalars */
  lt_dtype ft = a->dtype == LT_F64 ? LT_F64 : LT_F32;
  lt_tensor *fa = lt_op_to_dtype(c, a, ft);
  if (!fa) return NULL;
  lt_tensor *out = lt_tensor_new(c, is_compare(op) ? LT_F32 : ft, a->ndim, a->shape);
  lt_tensor sv = { 0 };
  lt_storage ss = { 1, sizeof(float), NULL, 0 };
  float sval = (float)s;
  double dval = s;
  ss.data = ft == LT_F64 ? (void *)&dval : (void *)&sval;
  sv.refcount = 1;
  sv.storage = &ss;
  sv.dtype = ft;
  if (out) {
    if (ft == LT_F64) lt_binary_f64(op, a->ndim, a->shape, out, scalar_first ? &sv : fa, scalar_first ? fa : &sv);
    else if (scalar_first) binary_f32(c, op, a->ndim, a->shape, out, &sv, fa);
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
    if (!(s >= -0x1p63 && s < 0x1p63)) return lt_fail(c, LT_E_INT64_SCALAR, name, "_", s);
    lt_tensor *sv = lt_op_full(c, LT_I64, 0, NULL, s);
    if (!sv) return LT_ERR;
    lt_mark_modified(a);
    binary_i64(op, a->ndim, a->shape, a, a, sv);
    lt_tensor_release(sv);
    return LT_OK;
  }
  if (a->dtype == LT_F64 && is_compare(op))
    return lt_fail(c, "%s_: cannot update a float64 tensor in place with a comparison's float32 mask", name);
  lt_tensor sv = { 0 };
  lt_storage ss = { 1, sizeof(float), NULL, 0 };
  float sval = (float)s;
  double dval = s;
  ss.data = a->dtype == LT_F64 ? (void *)&dval : (void *)&sval;
  sv.refcount = 1;
  sv.storage = &ss;
  sv.dtype = a->dtype;
  lt_mark_modified(a);
  if (a->dtype == LT_F64) lt_binary_f64(op, a->ndim, a->shape, a, a, &sv);
  else binary_f32(c, op, a->ndim, a->shape, a, a, &sv);
  return LT_OK;
}

int lt_op_axpy_(lt_ctx *c, lt_tensor *a, double alpha, lt_tensor *b) {
  if (lt_check_inplace(c, "add_", a)) return LT_ERR;
  int f64 = a->dtype == LT_F64 && b->dtype == LT_F64;
  if (!f64 && (lt_check_dtype(c, "add_", "the tensor updated in place", a, LT_F32) ||
               lt_check_dtype(c, "add_", "the added tensor", b, LT_F32)))
    return LT_ERR;
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
  if (a->dtype == LT_F64) lt_axpy_f64(a, alpha, b);
  else lt_axpy_f32(c, a, (float)alpha, b);
  return LT_OK;
}
