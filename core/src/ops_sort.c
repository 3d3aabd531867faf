/* ops_sort.c — argsort and topk's indices along a dim (float32, float64 or int64 keys): a stable merge sort of each line's indices (ties keep
 * their order, as torch.sort(stable=True)), NaN ordered above every number as in torch; topk selects its k
 * first (quickselect) and sorts only those. sort and topk are built on them in lua/lutra/tensor/sort.lua:
 * their values are a gather of the input at these indices, so gradients flow through gather. */
#include <math.h>
#include <string.h>

#include "lt_alloc.h"
#include "lt_errors.h"
#include "lt_lines.h"
#include "lt_ops.h"

typedef struct sort_keys {
  const float *f; /* the keys: exactly one of f, d, i is set */
  const double *d;
  const int64_t *i;
  int64_t base, stride;
  int descending;
  int ties_by_index; /* the merge must compare indices of equal keys: its input is not in index order */
} sort_keys;

/* a before b, NaN above every number; float keys are widened to double exactly */
static inline int float_before(double a, double b, int descending) {
  int na = isnan(a), nb = isnan(b);
  if (na || nb) return descending ? na && !nb : nb && !na;
  return descending ? a > b : a < b;
}

/* 1 when element p must come strictly before element q */
static int before(const sort_keys *k, int64_t p, int64_t q) {
  int64_t op = k->base + p * k->stride, oq = k->base + q * k->stride;
  if (k->i) return k->descending ? k->i[op] > k->i[oq] : k->i[op] < k->i[oq];
  if (k->d) return float_before(k->d[op], k->d[oq], k->descending);
  return float_before(k->f[op], k->f[oq], k->descending);
}

/* the sort's total order: before(), and for equal keys the lower index first (what the stable sort gives) */
static int ranks_before(const sort_keys *k, int64_t p, int64_t q) {
  if (before(k, p, q)) return 1;
  if (before(k, q, p)) return 0;
  return p < q;
}

/* bottom-up merge sort of idx[0..n) (tmp: n scratch slots); returns the buffer holding the result */
static int64_t *merge_sort(const sort_keys *k, int64_t *idx, int64_t *tmp, int64_t n) {
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, o = lo;
      while (i < mid && j < hi) {
        int right = k->ties_by_index ? ranks_before(k, idx[j], idx[i]) : before(k, idx[j], idx[i]);
        tmp[o++] = right ? idx[j++] : idx[i++];
      }
      while (i < mid) tmp[o++] = idx[i++];
      while (j < hi) tmp[o++] = idx[j++];
    }
    int64_t *s = idx;
    idx = tmp;
    tmp = s;
  }
  return idx;
}

/* Quickselect: moves the m first of idx[0..n) in ranks_before order to idx[0..m), in some order. Under a
 * total order the result does not depend on the pivots, so topk is deterministic. */
static void select_first(const sort_keys *ks, int64_t *idx, int64_t n, int64_t m) {
  int64_t lo = 0, hi = n - 1;
  while (lo < hi) {
    int64_t pv = idx[lo + (hi - lo) / 2], i = lo, j = hi;
    while (i <= j) {
      while (ranks_before(ks, idx[i], pv)) i++;
      while (ranks_before(ks, pv, idx[j])) j--;
      if (i <= j) {
        int64_t t = idx[i];
        idx[i++] = idx[j];
        idx[j--] = t;
      }
    }
    if (m - 1 <= j) hi = j;
    else if (m - 1 >= i) lo = i;
    else break;
  }
}

/* m = -1: the whole sort (argsort); else the m first along dim (topk), the output's dim of size m */
static lt_tensor *sorted_indices(lt_ctx *c, lt_tensor *a, int dim, int descending, int64_t m) {
  lt_tensor *ac = lt_op_contiguous(c, a);
  lt_lines l = lt_lines_of(a, dim);
  int64_t shape[LT_MAX_DIM];
  memcpy(shape, a->shape, sizeof shape);
  if (m >= 0 && a->ndim > 0) shape[dim] = m;
  int64_t keep = m >= 0 ? m : l.n;
  lt_tensor *out = ac ? lt_tensor_new(c, LT_I64, a->ndim, shape) : NULL;
  size_t nbytes = sizeof(int64_t) * (size_t)(2 * l.n + 1);
  int64_t *buf = out ? lt_alloc(nbytes) : NULL;
  if (!buf) {
    if (out) lt_fail(c, LT_E_OOM, nbytes);
    lt_tensor_release(ac);
    lt_tensor_release(out);
    return NULL;
  }
  sort_keys k = { ac->dtype == LT_F32 ? lt_f32(ac) : NULL,
                  ac->dtype == LT_F64 ? lt_f64(ac) : NULL,
                  ac->dtype == LT_I64 ? lt_i64(ac) : NULL,
                  0,
                  l.inner,
                  descending,
                  0 };
  lt_lines lo = l; /* the output's lines */
  lo.n = keep;
  int64_t *po = lt_i64(out);
  for (int64_t q = 0, nl = lt_lines_count(&l); q < nl; q++) {
    k.base = lt_line_base(&l, q);
    k.ties_by_index = 0;
    for (int64_t j = 0; j < l.n; j++) buf[j] = j;
    int64_t len = l.n;
    if (keep < l.n) { /* select first: the sort then runs over the m chosen only */
      select_first(&k, buf, l.n, keep);
      len = keep;
      k.ties_by_index = 1;
    }
    const int64_t *s = merge_sort(&k, buf, buf + l.n, len);
    int64_t ob = lt_line_base(&lo, q);
    for (int64_t j = 0; j < keep; j++) po[ob + j * lo.inner] = s[j];
  }
  lt_free(buf, nbytes);
  lt_tensor_release(ac);
  return out;
}

lt_tensor *lt_op_topk_indices(lt_ctx *c, lt_tensor *a, int dim, int64_t m, int largest) {
  int64_t n = a->ndim ? a->shape[dim] : 1;
  if (m < 0 || m > n) {
    lt_fail(c, "topk: k (%lld) is larger than the size of dim %d (%lld)", (long long)m, dim + 1, (long long)n);
    return NULL;
  }
  return sorted_indices(c, a, dim, largest, m);
}

lt_tensor *lt_op_argsort(lt_ctx *c, lt_tensor *a, int dim, int descending) {
  return sorted_indices(c, a, dim, descending, -1);
}
