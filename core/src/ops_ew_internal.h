/*
 * ops_ew_internal.h — what the elementwise kernels share (ops_binary.c, ops_unary.c, ops_where.c, and
 * accumulate.c below them): when a kernel is split over lutra's pool, the walk of an element range as strided
 * row segments, the row loops every element type shares (float32 and float64 kernels from one source: see
 * ops_ew_kernels.h), the in-place overlap test, int64 arithmetic that wraps, and the job of a one-kernel split. Large float32 kernels are split into element
 * ranges on the pool (lt_pool.h); each element is computed by the same code whatever the split, so results are
 * bitwise the same on any number of threads.
 */
#ifndef OPS_EW_INTERNAL_H
#define OPS_EW_INTERNAL_H

#include "lt_iter.h"
#include "lt_pool.h"
#include "lt_tensor.h"

/* ---- splitting over threads ------------------------------------------------------------------- */

/* Elementwise work of at least this many units (elements x the op's cost below) runs on the pool (the cost: 1 for a one-flop op, unary_cost in ops_unary.c, 4 for pow). Measured with
 * bench/ew_threads.lua on this 2-vCPU machine (1 vs 2 threads): with the worker awake a split of a one-flop op
 * (add, relu, x * 2) gains 1.5x at 16K elements and 1.7-2x from 32K; with the worker asleep (woken through a
 * futex, as after a GEMM) it gains nothing below ~100K and ~1.1-1.7x above. From 64K the split pays in the
 * first case and costs at most a few percent in the second. */
#define EW_PAR_MIN (INT64_C(1) << 16)

static inline int ew_parts(lt_ctx *c, int64_t n, int cost) {
  return lt_pool_parts(c->num_threads, n * cost, EW_PAR_MIN);
}

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

/* The iteration of out = x op y over their broadcast shape (operands 0, 1, 2: out, x and y, each seen at that
 * shape; lt_iter_init keeps its own copy of the strides). */
static inline void ew_binary_iter(lt_iter *it, int ndim, const int64_t *shape, const lt_tensor *out, const lt_tensor *x,
                                  const lt_tensor *y) {
  int64_t so[LT_MAX_DIM], sx[LT_MAX_DIM], sy[LT_MAX_DIM];
  lt_broadcast_strides(out, ndim, shape, so);
  lt_broadcast_strides(x, ndim, shape, sx);
  lt_broadcast_strides(y, ndim, shape, sy);
  const int64_t *st[3] = { so, sx, sy };
  lt_iter_init(it, ndim, shape, 3, st);
}

/* ---- one source for every element type ---------------------------------------------------------------- */

/* One row of a binary elementwise kernel, for any element type: o[i so] = F(ARGS..., x[i sx], y[i sy]) for
 * i < n, with the all-unit-stride and broadcast-scalar cases written out so each one vectorises. The result
 * converts to o's element type (a float64 comparison writes a float32 mask). The float32 and float64 kernels
 * are both made from this one loop (ops_ew_kernels.h); F is a function or a function-like macro, ARGS
 * what it takes before the two elements (the op, for a kernel that switches on it). The strides and n are
 * read more than once: pass plain values. */
// clang-format off
#define EW_BINARY_ROW(o, so, x, sx, y, sy, n, F, ...)                                               \
  do {                                                                                              \
    __typeof__(&(o)[0]) _o = (o);                                                                   \
    const __typeof__((x)[0]) *_x = (x);                                                             \
    const __typeof__((y)[0]) *_y = (y);                                                             \
    if ((so) == 1 && (sx) == 1 && (sy) == 1) {                                                      \
      for (int64_t _i = 0; _i < (n); _i++) _o[_i] = F(__VA_ARGS__, _x[_i], _y[_i]);                 \
    } else if ((so) == 1 && (sx) == 1 && (sy) == 0) {                                               \
      __typeof__(_y[0]) _v = _y[0];                                                                 \
      for (int64_t _i = 0; _i < (n); _i++) _o[_i] = F(__VA_ARGS__, _x[_i], _v);                     \
    } else if ((so) == 1 && (sx) == 0 && (sy) == 1) {                                               \
      __typeof__(_x[0]) _v = _x[0];                                                                 \
      for (int64_t _i = 0; _i < (n); _i++) _o[_i] = F(__VA_ARGS__, _v, _y[_i]);                     \
    } else {                                                                                        \
      for (int64_t _i = 0; _i < (n); _i++) _o[_i * (so)] = F(__VA_ARGS__, _x[_i * (sx)], _y[_i * (sy)]); \
    }                                                                                               \
  } while (0)

/* One row of a unary elementwise kernel, for any element type: o[i so] = F(ARGS..., x[i sx]) for i < n, the
 * unit-stride case written out so it vectorises. */
#define EW_UNARY_ROW(o, so, x, sx, n, F, ...)                                                       \
  do {                                                                                              \
    __typeof__(&(o)[0]) _o = (o);                                                                   \
    const __typeof__((x)[0]) *_x = (x);                                                             \
    if ((so) == 1 && (sx) == 1)                                                                     \
      for (int64_t _i = 0; _i < (n); _i++) _o[_i] = F(__VA_ARGS__, _x[_i]);                         \
    else                                                                                            \
      for (int64_t _i = 0; _i < (n); _i++) _o[_i * (so)] = F(__VA_ARGS__, _x[_i * (sx)]);           \
  } while (0)
// clang-format on

/* An in-place update whose other operand shares storage with it but is not the same view (x:add_(x:t())), or
 * whose target repeats elements (a stride-0 dim: the binding refuses those, a C host might not), reads or
 * writes what another thread may be writing: such calls stay on one thread, as before. */
static inline int overlaps(const lt_tensor *out, const lt_tensor *in) {
  for (int d = 0; d < out->ndim; d++)
    if (out->shape[d] > 1 && out->stride[d] == 0) return 1;
  if (out == in || out->storage != in->storage) return 0;
  if (out->offset != in->offset || out->ndim != in->ndim) return 1;
  for (int d = 0; d < out->ndim; d++)
    if (out->shape[d] != in->shape[d] || (out->shape[d] > 1 && out->stride[d] != in->stride[d])) return 1;
  return 0;
}

/* int64 arithmetic wraps around on overflow, as PyTorch's does: computed in uint64 (defined behaviour in C)
 * and converted back (two's complement on every target GCC supports). */
static inline int64_t wrap_add(int64_t x, int64_t y) { return (int64_t)((uint64_t)x + (uint64_t)y); }
static inline int64_t wrap_sub(int64_t x, int64_t y) { return (int64_t)((uint64_t)x - (uint64_t)y); }
static inline int64_t wrap_mul(int64_t x, int64_t y) { return (int64_t)((uint64_t)x * (uint64_t)y); }

/* One elementwise kernel over an iteration, split into element ranges on the pool. */
typedef struct ew_job {
  int op;
  lt_iter it;
  float *po;
  const float *px, *py;
  int64_t total;
} ew_job;

/* ops_unary.c: clamp's float32 rows over n contiguous elements (ops_clamp.c) */
void lt_clamp_rows_f32(lt_ctx *c, const float *x, float *out, int64_t n, double lo, double hi);
void lt_clamp_grad_rows_f32(lt_ctx *c, const float *x, const float *g, float *r, int64_t n, double lo, double hi);

#endif
