/*
 * ops_softmax.c — softmax and log_softmax along a dim (numerically stable), with backward.
 *
 * A tensor is seen as outer x n x inner with the softmax over n: "rows" are the outer*inner independent
 * softmaxes. Contiguous rows (inner = 1) use the lane reductions of lt_simd.h; strided rows (a softmax over a
 * dim that is not the last) are computed a block of neighbouring rows at a time, vectorised across the rows.
 * Large tensors are split by rows on lutra's pool; each row is computed the same way whatever the split, so
 * results are bitwise the same on any number of threads.
 */
#include <math.h>

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

/* Sum of a row of a few classes (the common [batch x classes] case): one chain of double adds, where
 * lt_sum_f32 would add its 16 empty lanes on top. */
__attribute__((always_inline)) static inline double sum_short(const float *x, int64_t n) {
  double s = 0;
  for (int64_t j = 0; j < n; j++) s += x[j];
  return s;
}

/* Sums of 16 float lanes (+ the tail) as a tree of double adds: four dependent adds, where a chain over the lanes
 * is sixteen (on rows of 64, a quarter of the row's time). The order is fixed, so a row's result does not depend
 * on where it sits or which thread computes it. */
__attribute__((always_inline)) static inline double lanes_sum(const float *acc, float tail) {
  double d[8];
  for (int k = 0; k < 8; k++) d[k] = (double)acc[k] + (double)acc[k + 8];
  for (int k = 0; k < 4; k++) d[k] += d[k + 4];
  return ((d[0] + d[2]) + (d[1] + d[3])) + tail;
}

/* y[j] = exp(x[j] - mx) (store 1) or only their sum (store 0), in one pass; returns the sum */
__attribute__((always_inline)) static inline double exp_sum(const float *x, float *y, int64_t n, float mx, int store) {
  float acc[16] = { 0 }, tail = 0;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int k = 0; k < 16; k++) {
      float e = lt_expf(x[j + k] - mx);
      if (store) y[j + k] = e;
      acc[k] += e;
    }
  for (; j < n; j++) {
    float e = lt_expf(x[j] - mx);
    if (store) y[j] = e;
    tail += e;
  }
  return lanes_sum(acc, tail);
}

/* sum of g[j] (y NULL) or of g[j] * y[j] */
__attribute__((always_inline)) static inline double row_dot(const float *g, const float *y, int64_t n) {
  float acc[16] = { 0 }, tail = 0;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int k = 0; k < 16; k++) acc[k] += y ? g[j + k] * y[j + k] : g[j + k];
  for (; j < n; j++) tail += y ? g[j] * y[j] : g[j];
  return lanes_sum(acc, tail);
}

/* Rows of at most SM_SHORT classes (a [batch x classes] softmax) are computed SM_SHORT_ROWS rows at a time,
 * transposed into a scratch block so that every step runs across the rows, 16 to a vector: row by row, a row of
 * 16 is one vector whose max and sum are a few dependent shuffles each, and log_softmax's libm log of the sum cost
 * more than the rest of the row. */
#define SM_SHORT 32
#define SM_SHORT_ROWS 64

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

/* For m side-by-side rows stored as columns (element j of row k at p[j * ld + k]): each row's max (NaN when
 * the row has one) and sum of exp(v - max). Both blocked paths below use it, ld a constant or the inner size. */
__attribute__((always_inline)) static inline void cols_max_expsum(const float *p, int64_t ld, int64_t n, int64_t m,
                                                                  float *mx, double *s, int32_t *bad) {
  for (int64_t k = 0; k < m; k++) {
    mx[k] = -INFINITY;
    s[k] = 0;
    bad[k] = 0;
  }
  for (int64_t j = 0; j < n; j++)
    for (int64_t k = 0; k < m; k++) {
      float v = p[j * ld + k];
      mx[k] = v > mx[k] ? v : mx[k];
      bad[k] |= v != v;
    }
  for (int64_t k = 0; k < m; k++) mx[k] = bad[k] ? NAN : mx[k];
  for (int64_t j = 0; j < n; j++)
    for (int64_t k = 0; k < m; k++) s[k] += lt_expf(p[j * ld + k] - mx[k]);
}

/* Forward rows [lo, hi) of n <= SM_SHORT classes each (contiguous rows), a block of rows at a time. */
__attribute__((always_inline)) static inline void softmax_fwd_short(const float *x, float *y, int64_t n, int log_form,
                                                                    int64_t lo, int64_t hi) {
  float t[SM_SHORT * SM_SHORT_ROWS], mx[SM_SHORT_ROWS], f[SM_SHORT_ROWS];
  double s[SM_SHORT_ROWS];
  int32_t bad[SM_SHORT_ROWS];
  for (int64_t r = lo; r < hi; r += SM_SHORT_ROWS) {
    int64_t m = hi - r < SM_SHORT_ROWS ? hi - r : SM_SHORT_ROWS;
    const float *px = x + r * n;
    float *py = y + r * n;
    for (int64_t k = 0; k < m; k++)
      for (int64_t j = 0; j < n; j++) t[j * SM_SHORT_ROWS + k] = px[k * n + j];
    cols_max_expsum(t, SM_SHORT_ROWS, n, m, mx, s, bad);
    if (log_form) {
      for (int64_t k = 0; k < m; k++) f[k] = mx[k] + sm_logf((float)s[k]); /* the log-sum-exp */
      for (int64_t k = 0; k < m; k++)
        for (int64_t j = 0; j < n; j++) py[k * n + j] = px[k * n + j] - f[k];
    } else {
      for (int64_t k = 0; k < m; k++) f[k] = (float)(1.0 / s[k]);
      for (int64_t k = 0; k < m; k++) /* exp again: along the row it vectorises, a transposed read does not */
        for (int64_t j = 0; j < n; j++) py[k * n + j] = lt_expf(px[k * n + j] - mx[k]) * f[k];
    }
  }
}

/* Rows [lo, hi) of the forward pass. A NaN in a row makes the whole row NaN (lt_max_f32 returns NaN); a row
 * of -inf is NaN too, and -inf entries among finite ones get exact zeros, all as in PyTorch. */
LT_VECTOR_FN static void softmax_fwd(const float *x, float *y, int64_t n, int64_t inner, int log_form, int64_t lo,
                                     int64_t hi) {
  if (inner == 1 && n <= SM_SHORT) {
    softmax_fwd_short(x, y, n, log_form, lo, hi);
    return;
  }
  if (inner == 1) {
    for (int64_t r = lo; r < hi; r++) {
      const float *px = x + r * n;
      float *py = y + r * n;
      float mx = lt_max_f32(px, n);
      double s;
      if (n < 16) { /* a row of a few classes: one chain of double adds */
        for (int64_t j = 0; j < n; j++) py[j] = lt_expf(px[j] - mx);
        s = sum_short(py, n);
      } else s = n <= 4096 ? exp_sum(px, py, n, mx, !log_form) : (exp_sum(px, py, n, mx, 1), lt_sum_f32(py, n));
      if (log_form) {
        float lse = mx + (float)log(s);
        for (int64_t j = 0; j < n; j++) py[j] = px[j] - lse;
      } else {
        float inv = (float)(1.0 / s);
        for (int64_t j = 0; j < n; j++) py[j] *= inv;
      }
    }
    return;
  }
  float mx[SM_BLOCK];
  double s[SM_BLOCK];
  int32_t bad[SM_BLOCK];
  for (int64_t r = lo; r < hi;) {
    int64_t o = r / inner, k0 = r % inner, m = inner - k0;
    if (m > hi - r) m = hi - r;
    if (m > SM_BLOCK) m = SM_BLOCK;
    const float *px = x + o * n * inner + k0;
    float *py = y + o * n * inner + k0;
    cols_max_expsum(px, inner, n, m, mx, s, bad);
    if (log_form) {
      for (int64_t k = 0; k < m; k++) mx[k] += (float)log(s[k]); /* now the log-sum-exp */
      for (int64_t j = 0; j < n; j++)
        for (int64_t k = 0; k < m; k++) py[j * inner + k] = px[j * inner + k] - mx[k];
    } else {
      float inv[SM_BLOCK];
      for (int64_t k = 0; k < m; k++) inv[k] = (float)(1.0 / s[k]);
      for (int64_t j = 0; j < n; j++)
        for (int64_t k = 0; k < m; k++) py[j * inner + k] = lt_expf(px[j * inner + k] - mx[k]) * inv[k];
    }
    r += m;
  }
}

/* Rows [lo, hi) of the backward pass, from the saved output y: softmax dx = y * (g - sum(g*y)), log_softmax
 * dx = g - exp(y) * sum(g). */
LT_VECTOR_FN static void softmax_bwd(const float *py, const float *pg, float *pr, int64_t n, int64_t inner,
                                     int log_form, int64_t lo, int64_t hi) {
  if (inner == 1) {
    for (int64_t r = lo; r < hi; r++) {
      const float *y = py + r * n, *g = pg + r * n;
      float *d = pr + r * n;
      if (log_form) {
        float s = (float)(n <= 4096 ? row_dot(g, NULL, n) : lt_sum_f32(g, n));
        for (int64_t j = 0; j < n; j++) d[j] = g[j] - lt_expf(y[j]) * s;
      } else {
        float s = (float)(n <= 4096 ? row_dot(g, y, n) : lt_dot_f32(g, y, n));
        for (int64_t j = 0; j < n; j++) d[j] = y[j] * (g[j] - s);
      }
    }
    return;
  }
  double s[SM_BLOCK];
  float sf[SM_BLOCK];
  for (int64_t r = lo; r < hi;) {
    int64_t o = r / inner, k0 = r % inner, m = inner - k0;
    if (m > hi - r) m = hi - r;
    if (m > SM_BLOCK) m = SM_BLOCK;
    int64_t base = o * n * inner + k0;
    const float *y = py + base, *g = pg + base;
    float *d = pr + base;
    for (int64_t k = 0; k < m; k++) s[k] = 0;
    if (log_form) {
      for (int64_t j = 0; j < n; j++)
        for (int64_t k = 0; k < m; k++) s[k] += g[j * inner + k];
      for (int64_t k = 0; k < m; k++) sf[k] = (float)s[k];
      for (int64_t j = 0; j < n; j++)
        for (int64_t k = 0; k < m; k++) d[j * inner + k] = g[j * inner + k] - lt_expf(y[j * inner + k]) * sf[k];
    } else {
      for (int64_t j = 0; j < n; j++)
        for (int64_t k = 0; k < m; k++) s[k] += (double)g[j * inner + k] * y[j * inner + k];
      for (int64_t k = 0; k < m; k++) sf[k] = (float)s[k];
      for (int64_t j = 0; j < n; j++)
        for (int64_t k = 0; k < m; k++) d[j * inner + k] = y[j * inner + k] * (g[j * inner + k] - sf[k]);
    }
    r += m;
  }
}

/* One pass (forward when g is NULL) over all rows, split by rows on the pool. */
typedef struct sm_job {
  const float *x, *g; /* input (forward) or saved output (backward); incoming gradient */
  float *y;           /* output */
  int64_t rows, n, inner;
  int log_form;
} sm_job;

static void sm_part(void *arg, int i, int nparts) {
  const sm_job *j = arg;
  int64_t lo, hi;
  /* strided rows: parts start at multiples of 16 rows, so (for most shapes) threads write separate cache lines */
  lt_pool_range(j->rows, i, nparts, j->inner > 1 ? 16 : 1, &lo, &hi);
  if (lo >= hi) return;
  if (j->g) softmax_bwd(j->x, j->g, j->y, j->n, j->inner, j->log_form, lo, hi);
  else softmax_fwd(j->x, j->y, j->n, j->inner, j->log_form, lo, hi);
}

static void sm_run(lt_ctx *c, sm_job *j) {
  int parts = lt_pool_parts(c->num_threads, j->rows * j->n, SM_PAR_MIN);
  if (parts > j->rows) parts = (int)j->rows;
  if (parts > 1) lt_pool_run(sm_part, j, parts);
  else if (j->rows > 0) sm_part(j, 0, 1);
}

static int softmax_backward(lt_ctx *c, lt_node *nd, lt_tensor *g, lt_tensor **gin) {
  int dim = (int)nd->i[0], log_form = (int)nd->i[1];
  lt_tensor *y = nd->saved[0];
  lt_tensor *gc = lt_op_contiguous(c, g);
  lt_tensor *r = gc ? lt_tensor_new_like(c, y) : NULL;
  if (!r) {
    lt_tensor_release(gc);
    return LT_ERR;
  }
  int64_t outer, n, inner;
  dims3(y, dim, &outer, &n, &inner);
  sm_job j = { lt_f32(y), lt_f32(gc), lt_f32(r), outer * inner, n, inner, log_form };
  sm_run(c, &j);
  lt_tensor_release(gc);
  gin[0] = r;
  return LT_OK;
}

static lt_tensor *softmax_impl(lt_ctx *c, lt_tensor *a, int dim, int log_form) {
  const char *name = log_form ? "log_softmax" : "softmax";
  if (lt_check_dtype(c, name, "input", a, LT_F32)) return NULL;
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
  sm_job j = { lt_f32(x), NULL, lt_f32(y), outer * inner, n, inner, log_form };
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
