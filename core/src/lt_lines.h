/*
 * lt_lines.h — a contiguous tensor seen as lines along one dim, for kernels that work a line at a time
 * (sort, scans, products, norms): outer * inner lines of n elements, `inner` apart.
 */
#ifndef LT_LINES_H
#define LT_LINES_H

#include "lt_tensor.h"

typedef struct lt_lines {
  int64_t outer, n, inner;
} lt_lines;

/* dim < 0 (or a 0-dim tensor): one line of every element */
static inline lt_lines lt_lines_of(const lt_tensor *t, int dim) {
  lt_lines l = { 1, 1, 1 };
  if (dim < 0 || t->ndim == 0) {
    l.n = lt_numel(t);
    return l;
  }
  for (int d = 0; d < dim; d++) l.outer *= t->shape[d];
  l.n = t->shape[dim];
  for (int d = dim + 1; d < t->ndim; d++) l.inner *= t->shape[d];
  return l;
}
static inline int64_t lt_lines_count(const lt_lines *l) { return l->outer * l->inner; }
/* offset of line k's first element (k in 0 .. outer * inner - 1) */
static inline int64_t lt_line_base(const lt_lines *l, int64_t k) {
  return (k / l->inner) * l->n * l->inner + k % l->inner;
}
/* shape of reducing dim (dim < 0: every dim) with or without keepdim; returns ndim */
static inline int lt_reduced_dims(const lt_tensor *a, int dim, int keepdim, int64_t *shape) {
  int k = 0;
  for (int d = 0; d < a->ndim; d++) {
    if (dim < 0 || d == dim) {
      if (keepdim) shape[k++] = 1;
    } else shape[k++] = a->shape[d];
  }
  return k;
}

#endif
