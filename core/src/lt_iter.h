/*
 * lt_iter.h — strided iteration over up to three operands that share a (broadcast) shape.
 *
 * Dims that are laid out back to back in every operand are merged first, so a contiguous tensor is one
 * flat loop and a [N x M] + [M] bias add is N rows of a unit-stride loop. Use:
 *
 *   lt_iter it; lt_iter_init(&it, ndim, shape, 2, strides);
 *   LT_ITER_ROWS(&it, o0, o1, o2) {          // o* : element offsets of the row's start
 *     for (int64_t i = 0; i < it.n; i++) out[o0 + i * it.s[0]] = in[o1 + i * it.s[1]];
 *   } LT_ITER_ROWS_END(&it, o0, o1, o2);
 */
#ifndef LT_ITER_H
#define LT_ITER_H

#include <stdint.h>

#include "lt_tensor.h"

typedef struct lt_iter {
  int nops;
  int ndim; /* after merging, >= 1 */
  int64_t shape[LT_MAX_DIM];
  int64_t stride[3][LT_MAX_DIM];
  int64_t n;    /* length of the innermost row */
  int64_t s[3]; /* innermost strides */
  int64_t rows; /* number of rows */
} lt_iter;

static inline void lt_iter_init(lt_iter *it, int ndim, const int64_t *shape, int nops, const int64_t *const *strides) {
  it->nops = nops;
  int k = 0;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] == 1) continue; /* size-1 dims do not move */
    int merge = k > 0;
    for (int o = 0; o < nops && merge; o++)
      if (it->stride[o][k - 1] != strides[o][d] * shape[d]) merge = 0;
    if (merge) {
      it->shape[k - 1] *= shape[d];
      for (int o = 0; o < nops; o++) it->stride[o][k - 1] = strides[o][d];
    } else {
      it->shape[k] = shape[d];
      for (int o = 0; o < nops; o++) it->stride[o][k] = strides[o][d];
      k++;
    }
  }
  if (k == 0) {
    it->shape[0] = 1;
    for (int o = 0; o < nops; o++) it->stride[o][0] = 0;
    k = 1;
  }
  for (int d = 0; d < ndim; d++)
    if (shape[d] == 0) { it->shape[0] = 0; }
  for (int o = nops; o < 3; o++)
    for (int d = 0; d < k; d++) it->stride[o][d] = 0;
  it->ndim = k;
  it->n = it->shape[k - 1];
  for (int o = 0; o < 3; o++) it->s[o] = it->stride[o][k - 1];
  it->rows = 1;
  for (int d = 0; d < k - 1; d++) it->rows *= it->shape[d];
  if (it->n == 0) it->rows = 0;
}

#define LT_ITER_ROWS(it, o0, o1, o2) \
  {                                  \
    int64_t _ix[LT_MAX_DIM] = { 0 }; \
    int64_t o0 = 0, o1 = 0, o2 = 0;  \
    for (int64_t _r = 0; _r < (it)->rows; _r++) {

#define LT_ITER_ROWS_END(it, o0, o1, o2)         \
  for (int _d = (it)->ndim - 2; _d >= 0; _d--) { \
    _ix[_d]++;                                   \
    o0 += (it)->stride[0][_d];                   \
    o1 += (it)->stride[1][_d];                   \
    o2 += (it)->stride[2][_d];                   \
    if (_ix[_d] < (it)->shape[_d]) break;        \
    o0 -= (it)->stride[0][_d] * _ix[_d];         \
    o1 -= (it)->stride[1][_d] * _ix[_d];         \
    o2 -= (it)->stride[2][_d] * _ix[_d];         \
    _ix[_d] = 0;                                 \
  }                                              \
  }                                              \
  (void)o0;                                      \
  (void)o1;                                      \
  (void)o2;                                      \
  }

/* Visits every element of t (any layout) in row-major logical order. */
#define LT_FOR_EACH_ELEMENT(t, off, body)              \
  do {                                                 \
    const int64_t *_st[1] = { (t)->stride };           \
    lt_iter _it;                                       \
    lt_iter_init(&_it, (t)->ndim, (t)->shape, 1, _st); \
    LT_ITER_ROWS(&_it, _o0, _o1, _o2) {                \
      for (int64_t _i = 0; _i < _it.n; _i++) {         \
        int64_t off = _o0 + _i * _it.s[0];             \
        body;                                          \
      }                                                \
    }                                                  \
    LT_ITER_ROWS_END(&_it, _o0, _o1, _o2);             \
  } while (0)

/* Strides of t as seen through a broadcast to (ndim, shape): missing or size-1 dims get stride 0. */
static inline void lt_broadcast_strides(const lt_tensor *t, int ndim, const int64_t *shape, int64_t *out) {
  int off = ndim - t->ndim;
  for (int d = 0; d < ndim; d++) {
    int td = d - off;
    out[d] = (td < 0 || (t->shape[td] == 1 && shape[d] != 1)) ? 0 : t->stride[td];
  }
}

#endif
