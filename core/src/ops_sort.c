/* ops_sort.c — argsort along a dim: a stable merge sort of each line's indices (ties keep their order, as
 * torch.sort(stable=True)), NaN ordered above every number as in torch. sort and topk are built on it in
 * the binding: their values are a gather of the input at these indices, so gradients flow through gather. */
#include <math.h>
#include <string.h>

#include "lt_alloc.h"
#include "lt_errors.h"
#include "lt_lines.h"
#include "lt_ops.h"

typedef struct sort_keys {
  const float *f;
  const int64_t *i;
  int64_t base, stride;
  int descending;
} sort_keys;

/* 1 when element p must come strictly before element q */
static int before(const sort_keys *k, int64_t p, int64_t q) {
  int64_t op = k->base + p * k->stride, oq = k->base + q * k->stride;
  if (k->i) return k->descending ? k->i[op] > k->i[oq] : k->i[op] < k->i[oq];
  float a = k->f[op], b = k->f[oq];
  int na = isnan(a), nb = isnan(b);
  if (na || nb) return k->descending ? na && !nb : nb && !na;
  return k->descending ? a > b : a < b;
}

/* bottom-up merge sort of idx[0..n) (tmp: n scratch slots); returns the buffer holding the result */
static int64_t *merge_sort(const sort_keys *k, int64_t *idx, int64_t *tmp, int64_t n) {
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, o = lo;
      while (i < mid && j < hi) tmp[o++] = before(k, idx[j], idx[i]) ? idx[j++] : idx[i++];
      while (i < mid) tmp[o++] = idx[i++];
      while (j < hi) tmp[o++] = idx[j++];
    }
    int64_t *s = idx; idx = tmp; tmp = s;
  }
  return idx;
}

lt_tensor *lt_op_argsort(lt_ctx *c, lt_tensor *a, int dim, int descending) {
  lt_tensor *ac = lt_op_contiguous(c, a);
  lt_tensor *out = ac ? lt_tensor_new(c, LT_I64, ac->ndim, ac->shape) : NULL;
  lt_lines l = lt_lines_of(a, dim);
  size_t nbytes = sizeof(int64_t) * (size_t)(2 * l.n + 1);
  int64_t *buf = out ? lt_alloc(nbytes) : NULL;
  if (!buf) {
    if (out) lt_fail(c, LT_E_OOM, nbytes);
    lt_tensor_release(ac);
    lt_tensor_release(out);
    return NULL;
  }
  sort_keys k = { ac->dtype == LT_F32 ? lt_f32(ac) : NULL, ac->dtype == LT_I64 ? lt_i64(ac) : NULL, 0, l.inner,
                  descending };
  int64_t *po = lt_i64(out);
  for (int64_t q = 0, nl = lt_lines_count(&l); q < nl; q++) {
    k.base = lt_line_base(&l, q);
    for (int64_t j = 0; j < l.n; j++) buf[j] = j;
    const int64_t *s = merge_sort(&k, buf, buf + l.n, l.n);
    for (int64_t j = 0; j < l.n; j++) po[k.base + j * l.inner] = s[j];
  }
  lt_free(buf, nbytes);
  lt_tensor_release(ac);
  return out;
}
