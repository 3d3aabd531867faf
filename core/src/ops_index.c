/* ops_index.c — gather and index_select (0-based int64 indices here; the binding converts from Lua's
 * 1-based ones), with scatter-add backward rules; float32, float64 (autograd) and int64 data. */
#include <string.h>

#include "lt_errors.h"
#include "lt_ops.h"
#include "lt_pool.h"
#include "lt_simd.h"

static int check_index_tensor(lt_ctx *c, const char *op, const lt_tensor *idx) {
  return lt_check_dtype(c, op, "index", idx, LT_I64);
}

/* r[..., idx[..., j, ...], ...] += g[..., j, ...] along dim: gather's gradient, for float and double */
#define GATHER_GRAD(NAME, T)                                                                \
  static void NAME(T *pr, const T *pg, const lt_tensor *idx, int dim, const int64_t *rst) { \
    for (int64_t i = 0, N = lt_numel(idx); i < N; i++) {                                    \
      int64_t rem = i, off = 0;                                                             \
      int64_t ix = lt_get_flat_i64(idx, i);                                                 \
      for (int d = idx->ndim - 1; d >= 0; d--) {                                            \
        int64_t k = rem % idx->shape[d];                                                    \
        rem /= idx->shape[d];                                                               \
        off += (d == dim ? ix : k) * rst[d];                                                \
      }                                                                                     \
      pr[off] += pg[i];                                                                     \
    }                                                                                       \
  }
GATHER_GRAD(gather_grad_f32, float)
GATHER_GRAD(gather_grad_f64, double)

/* out[..., j, ...] = a[..., idx[..., j, ...], ...] along dim; idx has a's ndim, sizes <= a's off dim */
static int gather_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *a = n->inputs[0], *idx = n->saved[0];
  int dim = (int)n->i[0];
  lt_tensor *r = lt_tensor_zeros(c, a->dtype, a->ndim, a->shape);
  lt_tensor *gc = r ? lt_op_contiguous(c, g) : NULL;
  if (!gc) {
    lt_tensor_release(r);
    return LT_ERR;
  }
  int64_t rst[LT_MAX_DIM];
  lt_contiguous_strides(a->ndim, a->shape, rst);
  if (a->dtype == LT_F64) gather_grad_f64(lt_f64(r), lt_f64(gc), idx, dim, rst);
  else gather_grad_f32(lt_f32(r), lt_f32(gc), idx, dim, rst);
  lt_tensor_release(gc);
  gin[0] = r;
  return LT_OK;
}

lt_tensor *lt_op_gather(lt_ctx *c, lt_tensor *a, int dim, lt_tensor *idx) {
  char b1[128], b2[128];
  if (check_index_tensor(c, "gather", idx)) return NULL;
  if (dim < 0 || dim >= a->ndim) {
    lt_fail(c, LT_E_DIM_RANGE, "gather", dim + 1, a->ndim, a->ndim, a->ndim);
    return NULL;
  }
  if (idx->ndim != a->ndim) {
    lt_fail(c, "gather: index %s must have as many dims as the input %s", lt_shape_str(idx, b1, sizeof b1),
            lt_shape_str(a, b2, sizeof b2));
    return NULL;
  }
  for (int d = 0; d < a->ndim; d++)
    if (d != dim && idx->shape[d] > a->shape[d]) {
      lt_fail(c, "gather: index %s is larger than the input %s in dim %d", lt_shape_str(idx, b1, sizeof b1),
              lt_shape_str(a, b2, sizeof b2), d + 1);
      return NULL;
    }
  lt_tensor *out = lt_tensor_new(c, a->dtype, idx->ndim, idx->shape);
  if (!out) return NULL;
  int64_t N = lt_numel(idx);
  for (int64_t i = 0; i < N; i++) {
    int64_t rem = i, off = a->offset;
    int64_t ix = lt_get_flat_i64(idx, i);
    if (ix < 0 || ix >= a->shape[dim]) {
      lt_fail(c, LT_E_INDEX_RANGE, "gather", (long long)ix + 1, (long long)a->shape[dim], dim + 1);
      lt_tensor_release(out);
      return NULL;
    }
    for (int d = idx->ndim - 1; d >= 0; d--) {
      int64_t k = rem % idx->shape[d];
      rem /= idx->shape[d];
      off += (d == dim ? ix : k) * a->stride[d];
    }
    if (a->dtype == LT_F32) lt_f32(out)[i] = ((float *)a->storage->data)[off];
    else lt_i64(out)[i] = ((int64_t *)a->storage->data)[off]; /* int64, or float64's bits */
  }
  if (lt_is_float(a->dtype)) {
    lt_node *nd;
    if (lt_record(c, out, "gather", gather_backward, 1, &a, &nd)) {
      lt_tensor_release(out);
      return NULL;
    }
    if (nd) {
      nd->i[0] = dim;
      nd->reads = 0; /* only the saved index (and a's shape) */
      lt_node_save(nd, 0, idx);
    }
  }
  return out;
}

/* r[o, idx[j], :] += g[o, j, :]: index_select's gradient, for float and double */
#define INDEX_SELECT_GRAD(NAME, T)                                                                        \
  static void NAME(T *pr, const T *pg, const lt_tensor *idx, int64_t outer, int64_t len, int64_t inner) { \
    int64_t k = lt_numel(idx);                                                                            \
    for (int64_t o = 0; o < outer; o++)                                                                   \
      for (int64_t j = 0; j < k; j++) {                                                                   \
        int64_t ix = lt_get_flat_i64(idx, j);                                                             \
        T *dst = pr + (o * len + ix) * inner;                                                             \
        const T *src = pg + (o * k + j) * inner;                                                          \
        for (int64_t q = 0; q < inner; q++) dst[q] += src[q];                                             \
      }                                                                                                   \
  }
INDEX_SELECT_GRAD(index_select_grad_f32, float)
INDEX_SELECT_GRAD(index_select_grad_f64, double)

static int index_select_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *a = n->inputs[0], *idx = n->saved[0];
  int dim = (int)n->i[0];
  lt_tensor *r = lt_tensor_zeros(c, a->dtype, a->ndim, a->shape);
  lt_tensor *gc = r ? lt_op_contiguous(c, g) : NULL;
  if (!gc) {
    lt_tensor_release(r);
    return LT_ERR;
  }
  int64_t outer = 1, inner = 1, len = a->shape[dim];
  for (int d = 0; d < dim; d++) outer *= a->shape[d];
  for (int d = dim + 1; d < a->ndim; d++) inner *= a->shape[d];
  if (a->dtype == LT_F64) index_select_grad_f64(lt_f64(r), lt_f64(gc), idx, outer, len, inner);
  else index_select_grad_f32(lt_f32(r), lt_f32(gc), idx, outer, len, inner);
  lt_tensor_release(gc);
  gin[0] = r;
  return LT_OK;
}

/* Rows a gather asks the memory for ahead of the one it copies: a batch of rows picked at random from a data set
 * larger than the caches waits on the memory's latency for each row; with the next rows' loads under way the
 * copy runs nearer the memory's bandwidth (a 64-row batch of 784 floats from 60000 rows: ~30% less CPU time).
 * Of a row only the first GATHER_AHEAD_BYTES, its page's translation and first lines: the hardware prefetcher
 * follows a row once it is read. Whole rows 8 ahead (up to 4 KB each) kept more lines in flight than the core
 * tracks, and the prefetches themselves stalled (28% of the gather's CPU time on an AMD EPYC Zen 4); the first
 * 256 bytes of 16 rows ahead, with copy_row's vector moves, took that batch from 52 to 33 us. */
#define GATHER_AHEAD 16
#define GATHER_AHEAD_BYTES 256
/* Only rows of a cache line or more from a source larger than a core's L2: below that a row is as near as the
 * prefetch would bring it, and the look-ahead's index read would be the row's cost doubled. */
#define GATHER_AHEAD_MIN_SOURCE ((uint64_t)1 << 20)

/* n bytes from src to dst in 64-byte vector moves: glibc's memmove takes `rep movsb` from 2 KB up, which ran
 * the copies of a gathered batch (64 rows of 3136 bytes) ~15% slower on an AMD EPYC Zen 4 */
LT_VECTOR_FN static void copy_row(char *restrict dst, const char *restrict src, size_t n) {
  size_t i = 0;
  for (; i + 64 <= n; i += 64) memcpy(dst + i, src + i, 64);
  if (i < n) memcpy(dst + i, src + i, n - i);
}

/* Asks for row j of the index's rows (when in range; a bad index is reported when its row is copied). */
static void prefetch_row(const lt_tensor *idx, int64_t j, const char *src, int64_t len, size_t row) {
  int64_t ix = lt_get_flat_i64(idx, j);
  if (ix < 0 || ix >= len) return;
  const char *p = src + ix * (int64_t)row;
  size_t n = row < GATHER_AHEAD_BYTES ? row : GATHER_AHEAD_BYTES;
  for (size_t i = 0; i < n; i += 64) __builtin_prefetch(p + i, 0, 0);
}

/* Splitting a gather pays from this many bytes (a 64-row batch of 3 KB rows, ~33 us, gains from two threads). */
#define GATHER_PAR_MIN_BYTES ((int64_t)128 << 10)

typedef struct gather_job {
  const lt_tensor *idx; /* checked: every index in [0, len) */
  const char *src;
  char *dst;
  int64_t outer, k, len;
  size_t row; /* bytes of a row (inner * element size) */
  int ahead;  /* prefetch rows ahead (a plain gather from a large source) */
} gather_job;

/* rows [lo, hi) of the index: dst's row j (of each outer block) = src's row idx[j] */
static void gather_rows(void *arg, int64_t lo, int64_t hi) {
  const gather_job *g = arg;
  if (g->ahead)
    for (int64_t j = lo; j < hi && j < lo + GATHER_AHEAD; j++) prefetch_row(g->idx, j, g->src, g->len, g->row);
  for (int64_t j = lo; j < hi; j++) {
    if (g->ahead && j + GATHER_AHEAD < hi) prefetch_row(g->idx, j + GATHER_AHEAD, g->src, g->len, g->row);
    int64_t ix = lt_get_flat_i64(g->idx, j);
    for (int64_t o = 0; o < g->outer; o++)
      copy_row(g->dst + (size_t)(o * g->k + j) * g->row, g->src + (size_t)(o * g->len + ix) * g->row, g->row);
  }
}

lt_tensor *lt_op_index_select(lt_ctx *c, lt_tensor *a, int dim, lt_tensor *idx) {
  char b1[128];
  if (check_index_tensor(c, "index_select", idx)) return NULL;
  if (dim < 0 || dim >= a->ndim) {
    lt_fail(c, LT_E_DIM_RANGE, "index_select", dim + 1, a->ndim, a->ndim, a->ndim);
    return NULL;
  }
  if (idx->ndim > 1) {
    lt_fail(c, "index_select: index must be 1-D, got %s", lt_shape_str(idx, b1, sizeof b1));
    return NULL;
  }
  int64_t k = lt_numel(idx);
  int64_t shape[LT_MAX_DIM];
  memcpy(shape, a->shape, sizeof shape);
  shape[dim] = k;
  lt_tensor *ac = lt_op_contiguous(c, a);
  lt_tensor *out = ac ? lt_tensor_new(c, a->dtype, a->ndim, shape) : NULL;
  if (!out) {
    lt_tensor_release(ac);
    return NULL;
  }
  int64_t outer = 1, inner = 1, len = a->shape[dim];
  for (int d = 0; d < dim; d++) outer *= a->shape[d];
  for (int d = dim + 1; d < a->ndim; d++) inner *= a->shape[d];
  size_t es = lt_dtype_size(a->dtype);
  const char *src = (const char *)ac->storage->data + ac->offset * (int64_t)es;
  char *dst = (char *)out->storage->data;
  size_t row = (size_t)inner * es;
  int ahead = outer == 1 && row >= 64 && (uint64_t)len * row > GATHER_AHEAD_MIN_SOURCE;
  for (int64_t j = 0; j < k; j++) { /* every index checked before a row is copied: the parts need not fail */
    int64_t ix = lt_get_flat_i64(idx, j);
    if (ix < 0 || ix >= len) {
      lt_fail(c, LT_E_INDEX_RANGE, "index_select", (long long)ix + 1, (long long)len, dim + 1);
      lt_tensor_release(ac);
      lt_tensor_release(out);
      return NULL;
    }
  }
  gather_job gj = { idx, src, dst, outer, k, len, row, ahead };
  /* split only whole rows of a plain gather (outer == 1), and only when they are many bytes: a batch of 256
   * rows of 3 KB waits on the memory for each row, and two cores keep twice the loads in flight */
  int parts = outer == 1 ? lt_pool_parts(c->num_threads, k * (int64_t)row, GATHER_PAR_MIN_BYTES) : 1;
  lt_pool_for(parts, k, 1, gather_rows, &gj);
  lt_tensor_release(ac);
  if (lt_is_float(a->dtype)) {
    lt_node *nd;
    if (lt_record(c, out, "index_select", index_select_backward, 1, &a, &nd)) {
      lt_tensor_release(out);
      return NULL;
    }
    if (nd) {
      nd->i[0] = dim;
      nd->reads = 0; /* only the saved index (and a's shape) */
      lt_node_save(nd, 0, idx);
    }
  }
  return out;
}
