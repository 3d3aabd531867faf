/*
 * lt_scatter_walk.h — where element i of a scatter index points, for scatter/scatter_add (ops_scatter.c) and
 * scatter_reduce (ops_scatter_reduce.c): index element i (row-major over the index's shape, its coordinates k)
 * addresses out at k with the coordinate of dim replaced by the index's value, and src at k.
 */
#ifndef LT_SCATTER_WALK_H
#define LT_SCATTER_WALK_H

#include "lt_tensor.h"

/* The offset into out (strides ost) that index element i addresses along dim, and in *soff the offset into src
 * (strides sst; a scatter of a value passes zeros). Indices are 0-based and already checked against out's shape.
 * No branch on src: plan_make walks every index element of scatter_reduce twice per step (forward, backward). */
static inline int64_t lt_scatter_at(const lt_tensor *idx, int dim, int64_t i, const int64_t *ost, const int64_t *sst,
                                    int64_t *soff) {
  int64_t rem = i, off = 0, so = 0, ix = lt_get_flat_i64(idx, i);
  for (int d = idx->ndim - 1; d >= 0; d--) {
    int64_t k = rem % idx->shape[d];
    rem /= idx->shape[d];
    off += (d == dim ? ix : k) * ost[d];
    so += k * sst[d];
  }
  *soff = so;
  return off;
}

#endif
