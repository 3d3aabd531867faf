/*
 * ops_softmax.c — softmax and log_softmax along a dim (numerically stable), with backward.
 *
 * A tensor is seen as outer x n x inner with the softmax over n: "rows" are the outer*inner independent
 * softmaxes. Contiguous rows (inner = 1) use the lane reductions of lt_simd.h; strided rows (a softmax over a
 * dim that is not the last) are computed a block of neighbouring rows at a time, vectorised across the rows.
 * Large tensors are split by rows on lutra's pool; each row is computed the same way whatever the split, so
 * results are bitwise the same on any number of threads. float32 and float64 run the same kernels
 * (ops_softmax_kernels.h, made once per type below); float64 takes libm's exp and log.
 */
#include <math.h>
#include <string.h>

#include "lt_errors.h"
#include "lt_ops.h"
#include "lt_pool.h"
#include "lt_simd.h"

/* Rows per block of the strided kernels: their per-row state stays in L1. */
#define SM_BLOCK 256
/* Split from this many elements (measured with bench/ew_threads.lua: a softmax costs a few ns per element on
 * one core, so from ~32K elements a split pays for the job hand-off even when the worker must be woken). */
#define SM_PAR_MIN (INT64_C(1) << 15)

static void dims3(const lt_tensor *a, int dim, int64_t *outer, int64_t *n, int64_t *inner) {
  *outer = 1;
  *inner = 1;
  for (int d = 0; d < dim; d++) *outer *= a->shape[d];
  *n = a->ndim ? a->shape[dim] : 1;
  for (int d = dim + 1; d < a->ndim; d++) *inner *= a->shape[d];
}

/* Rows of at most SM_SHORT classes (a [batch x classes] softmax) are computed SM_SHORT_ROWS rows at a time,
 * transposed into a scratch block so that every step runs across the rows, 16 to a vector: row by row, a row of
 * 16 is one vector whose max and sum are a few dependent shuffles each, and log_softmax's libm log of the sum cost
 * more than the rest of the row. */
#define SM_SHORT 32
#define SM_SHORT_ROWS 64
/* Short rows over a dim followed by fewer than this many elements are gathered into the same blocks: in place,
 * a block of neighbouring rows held only `inner` of them (inner 4: 2.8-6.7 ns an element, 0.5 for rows along the
 * last dim) */
#define SM_SMALL_INNER 16
/* The backward's gathered rows (two inputs to gather, one output to scatter) gain below 5 inner elements only
 * ([16384,4,4]: 573 -> 467 us; inner 7 even, inner 8 and 15 slower) */
#define SM_SMALL_INNER_BWD 5
/* Longer contiguous rows are taken this many at a time, each step for all of them (softmax_fwd) */
#define SM_PHASE_ROWS 8

/* Natural log of a float, branch-free so that a loop of it vectorises (Cephes' logf: the mantissa in
 * [sqrt(1/2), sqrt(2)), a degree-9 polynomial, the exponent times ln 2 in two parts; within 2 ulp). Used for the
 * sums of a softmax's exps, which are >= 1 or NaN; NaN and inf come back as they are. */
__attribute__((always_inline)) static inline float sm_logf(float x) {
  union {
    float f;
    uint32_t u;
  } b = { .f = x };
  float e = (float)((int32_t)((b.u >> 23) & 0xffu) - 127);
  b.u = (b.u & 0x007fffffu) | 0x3f800000u; /* the mantissa, in [1, 2) */
  float m = b.f > 1.41421356f ? b.f * 0.5f : b.f;
  e = b.f > 1.41421356f ? e + 1.0f : e;
  float f = m - 1.0f, z = f * f;
  float p = 7.0376836292e-2f;
  p = __builtin_fmaf(p, f, -1.1514610310e-1f);
  p = __builtin_fmaf(p, f, 1.1676998740e-1f);
  p = __builtin_fmaf(p, f, -1.2420140846e-1f);
  p = __builtin_fmaf(p, f, 1.4249322787e-1f);
  p = __builtin_fmaf(p, f, -1.6668057665e-1f);
  p = __builtin_fmaf(p, f, 2.0000714765e-1f);
  p = __builtin_fmaf(p, f, -2.4999993993e-1f);
  p = __builtin_fmaf(p, f, 3.3333331174e-1f);
  p = p * f * z;
  p = __builtin_fmaf(e, -2.12194440e-4f, p);
  p = __builtin_fmaf(-0.5f, z, p);
  float r = __builtin_fmaf(e, 0.693359375f, f + p);
  return x != x || x > 3.40282347e38f ? x : r;
}

/* exp of a softmax's argument: x - (the row max) <= 0, a log-probability <= 0, or NaN. lt_expf's steps (the same
 * bits for every such x) without what only positive arguments need (the clamp at ln(FLT_MAX), the overflow to
 * inf, 2^n as two factors for n = 128): 1.7x faster a vector, and the exps are most of a softmax's time. Correct
 * up to x = 88 (n <= 127); the callers never pass more than 0. */
__attribute__((always_inline)) static inline float sm_expf_nonpos(float x0) {
  float x = x0 < -87.3365447504019f ? -87.3365447504019f : x0;
  float n = __builtin_floorf(__builtin_fmaf(x, 1.44269504088896341f, 0.5f));
  float r = __builtin_fmaf(n, 2.12194440e-4f, __builtin_fmaf(n, -0.693359375f, x));
  float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = __builtin_fmaf(p, r, 1.3981999507e-3f);
  p = __builtin_fmaf(p, r, 8.3334519073e-3f);
  p = __builtin_fmaf(p, r, 4.1665795894e-2f);
  p = __builtin_fmaf(p, r, 1.6666665459e-1f);
  p = __builtin_fmaf(p, r, 5.0000001201e-1f);
  p = __builtin_fmaf(p, r2, r + 1.0f);
  /* 2^n from n's low mantissa bits after adding 1.5 * 2^23 (as lt_expf: no float-to-int conversion, which a
   * NaN would make undefined); n >= -126, so 2^n is a normal float and p * 2^n rounds once, as lt_expf's */
  union {
    float f;
    uint32_t u;
  } nb = { .f = n + 12582912.0f };
  union {
    uint32_t u;
    float f;
  } sc = { .u = (nb.u - 0x4B400000u + 127u) << 23 };
  float y = p * sc.f;
  return x0 < -87.3365447504019f ? 0.0f : y; /* exp(-inf) = 0: a -inf mask gives exact zeros */
}

/* The kernels, once per element type (ops_softmax_kernels.h) */
#define SM_T float
#define SM_FN(name) name##_f
#define SM_EXP(x) sm_expf_nonpos(x)
#define SM_LOG_SUM(s) sm_logf((float)(s))
#define SM_LONG 4096
#define SM_SUM_LONG(x, n) lt_sum_f32(x, n)
#define SM_DOT_LONG(g, y, n) lt_dot_f32(g, y, n)
#include "ops_softmax_kernels.h"

/* float64: libm's exp and log; the 16 double lanes keep their precision on rows of any length */
#define SM_T double
#define SM_FN(name) name##_d
#define SM_EXP(x) exp(x)
#define SM_LOG_SUM(s) log(s)
#define SM_LONG INT64_MAX
#define SM_SUM_LONG(x, n) row_dot_d(x, NULL, n)
#define SM_DOT_LONG(g, y, n) row_dot_d(g, y, n)
#include "ops_softmax_kernels.h"

/* One pass (forward when g is NULL) over all rows, split by rows on the pool. */
typedef struct sm_job {
  const void *x, *g; /* input (forward) or saved output (backward); incoming gradient (all of one dtype) */
  void *y;           /* output */
  int64_t rows, n, inner;
  int log_form, f64;
} sm_job;

static void sm_part(void *arg, int i, int nparts) {
  const sm_job *j = arg;
  int64_t lo, hi;
  /* strided rows: parts start at multiples of 16 rows, so (for most shapes) threads write separate cache lines */
  lt_pool_range(j->rows, i, nparts, j->inner > 1 ? 16 : 1, &lo, &hi);
  if (lo >= hi) return;
  if (j->f64) {
    if (j->g) softmax_bwd_d(j->x, j->g, j->y, j->n, j->inner, j->log_form, lo, hi);
    else softmax_fwd_d(j->x, j->y, j->n, j->inner, j->log_form, lo, hi);
  } else if (j->g) softmax_bwd_f(j->x, j->g, j->y, j->n, j->inner, j->log_form, lo, hi);
  else softmax_fwd_f(j->x, j->y, j->n, j->inner, j->log_form, lo, hi);
}

static void *sm_data(const lt_tensor *t) { return t->dtype == LT_F64 ? (void *)lt_f64(t) : (void *)lt_f32(t); }

static void sm_run(lt_ctx *c, sm_job *j) {
  int parts = lt_pool_parts(c->num_threads, j->rows * j->n, SM_PAR_MIN);
  if (parts > j->rows) parts = (int)j->rows;
  if (parts > 1) lt_pool_run(sm_part, j, parts);
  else if (j->rows > 0) sm_part(j, 0, 1);
}

static int softmax_backward(lt_ctx *c, lt_node *nd, lt_tensor *g, lt_tensor **gin) {
  int dim = (int)nd->i[0], log_form = (int)nd->i[1];
  lt_tensor *y = nd->saved[0];
  if (lt_check_dtype(c, log_form ? "log_softmax backward" : "softmax backward", "gradient", g, y->dtype)) return LT_ERR;
  lt_tensor *gc = lt_op_contiguous(c, g);
  lt_tensor *r = gc ? lt_tensor_new_like(c, y) : NULL;
  if (!r) {
    lt_tensor_release(gc);
    return LT_ERR;
  }
  int64_t outer, n, inner;
  dims3(y, dim, &outer, &n, &inner);
  sm_job j = { sm_data(y), sm_data(gc), sm_data(r), outer * inner, n, inner, log_form, y->dtype == LT_F64 };
  sm_run(c, &j);
  lt_tensor_release(gc);
  gin[0] = r;
  return LT_OK;
}

static lt_tensor *softmax_impl(lt_ctx *c, lt_tensor *a, int dim, int log_form) {
  const char *name = log_form ? "log_softmax" : "softmax";
  if (a->dtype != LT_F64 && lt_check_dtype(c, name, "input", a, LT_F32)) return NULL;
  if (a->ndim > 0 && (dim < 0 || dim >= a->ndim)) {
    lt_fail(c, LT_E_DIM_RANGE, name, dim + 1, a->ndim, a->ndim, a->ndim);
    return NULL;
  }
  lt_tensor *x = lt_op_contiguous(c, a);
  lt_tensor *y = x ? lt_tensor_new_like(c, x) : NULL;
  if (!y) {
    lt_tensor_release(x);
    return NULL;
  }
  int64_t outer, n, inner;
  dims3(x, dim, &outer, &n, &inner);
  sm_job j = { sm_data(x), NULL, sm_data(y), outer * inner, n, inner, log_form, x->dtype == LT_F64 };
  sm_run(c, &j);
  lt_tensor_release(x);
  lt_node *nd;
  if (lt_record(c, y, name, softmax_backward, 1, &a, &nd)) {
    lt_tensor_release(y);
    return NULL;
  }
  if (nd) {
    nd->i[0] = dim;
    nd->i[1] = log_form;
    nd->reads = 0; /* the backward reads the saved output only */
    if (lt_node_save_output(c, nd, 0, y)) {
      lt_tensor_release(y);
      return NULL;
    }
  }
  return y;
}

lt_tensor *lt_op_softmax(lt_ctx *c, lt_tensor *a, int dim) { return softmax_impl(c, a, dim, 0); }
lt_tensor *lt_op_log_softmax(lt_ctx *c, lt_tensor *a, int dim) { return softmax_impl(c, a, dim, 1); }
