/* size.c — the checks of lt_size.h that fail with a message (the arithmetic itself is inline there), and sizes
 * as text (lt_dims_str, declared in lt_tensor.h) for those messages and every other. */
#include "lt_size.h"

#include <stdio.h>

#include "lt_errors.h"
#include "lt_tensor.h"

char *lt_dims_str(int ndim, const int64_t *shape, char *buf, size_t n) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, n - k, "[");
  for (int d = 0; d < ndim && k < n; d++)
    k += (size_t)snprintf(buf + k, n - k, d ? " x %lld" : "%lld", (long long)shape[d]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

int64_t lt_size_span(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++)
    if (shape[d] < 0 || lt_size_mul(n, shape[d] > 0 ? shape[d] : 1, &n)) return -1;
  return n;
}

int lt_check_size(lt_ctx *c, const char *op, int ndim, const int64_t *shape) {
  if (lt_size_span(ndim, shape) >= 0) return LT_OK;
  char b[256];
  return lt_fail(c, LT_E_SIZE, op, lt_dims_str(ndim, shape, b, sizeof b));
}

int lt_check_bytes(lt_ctx *c, const char *op, int ndim, const int64_t *shape, int64_t n, int64_t elem_size,
                   int64_t *bytes) {
  if (!lt_size_mul(n, elem_size, bytes)) return LT_OK;
  char b[256];
  return lt_fail(c, LT_E_SIZE_BYTES, op, lt_dims_str(ndim, shape, b, sizeof b));
}
