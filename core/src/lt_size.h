/*
 * lt_size.h — checked arithmetic for element counts, stride products and byte sizes.
 *
 * Every count, stride and byte size the core derives from sizes the user gave (creation, views, expand,
 * broadcasting, cat, conv/pool output sizes, file headers) is computed here, so that a product past the limit
 * is an error naming the op and the shape, never a wrapped int64 (undefined behaviour, and a tensor whose
 * numel is 4 where 2^64 + 4 elements were asked for). The limit, 2^62, leaves room for the sums of offsets
 * and strides the kernels compute from checked sizes, and for a byte count of int64 elements of a size
 * below it, so those need no checks of their own.
 */
#ifndef LT_SIZE_H
#define LT_SIZE_H

#include <stdint.h>

#include "lt_ctx.h"

#define LT_SIZE_LIMIT (INT64_C(1) << 62)

/* *r = a * b; 1 (and *r untouched) when a or b is negative or the product is past LT_SIZE_LIMIT. */
static inline int lt_size_mul(int64_t a, int64_t b, int64_t *r) {
  int64_t p;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &p) || p > LT_SIZE_LIMIT) return 1;
  *r = p;
  return 0;
}

/* *r = a + b; 1 (and *r untouched) when a or b is negative or the sum is past LT_SIZE_LIMIT. */
static inline int lt_size_add(int64_t a, int64_t b, int64_t *r) {
  int64_t s;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &s) || s > LT_SIZE_LIMIT) return 1;
  *r = s;
  return 0;
}

/* The product of the sizes with sizes 0 counted as 1 (as PyTorch counts them: the contiguous strides of
 * [2^40 x 2^40 x 2^40 x 0] would overflow), or -1 when it is past LT_SIZE_LIMIT or a size is negative. */
int64_t lt_size_span(int ndim, const int64_t *shape);

/* LT_OK when lt_size_span(ndim, shape) is within the limit; otherwise fails with LT_E_SIZE naming op and
 * the shape. */
int lt_check_size(lt_ctx *c, const char *op, int ndim, const int64_t *shape);

/* *bytes = n * elem_size (n >= 0 elements); fails with LT_E_SIZE_BYTES naming op and the shape when it is past
 * LT_SIZE_LIMIT. */
int lt_check_bytes(lt_ctx *c, const char *op, int ndim, const int64_t *shape, int64_t n, int64_t elem_size,
                   int64_t *bytes);

#endif
