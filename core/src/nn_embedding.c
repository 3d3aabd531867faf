/*
 * nn_embedding.c — embedding lookup: rows of w [n, d] gathered by 0-based int64 indices of any shape;
 * backward scatter-adds into a zero [n, d] gradient (repeated indices accumulate). An optional
 * padding row (padding_idx >= 0) gets no gradient. float32 or float64: the output and the gradient have the
 * weight's dtype (the scatter written once over the element type, EMB_SCATTER).
 */
#include <string.h>

#include "lt_check.h"
#include "lt_errors.h"
#include "lt_nn.h"

/* each looked-up row's gradient added into its weight row, but the padding row's */
#define EMB_SCATTER(T, pg, pw)                           \
  {                                                      \
    const T *src = (pg);                                 \
    T *dst = (pw);                                       \
    for (int64_t s = 0, m = lt_numel(idx); s < m; s++) { \
      if (pi[s] == pad) continue;                        \
      T *row = dst + pi[s] * d;                          \
      const T *g = src + s * d;                          \
      for (int64_t j = 0; j < d; j++) row[j] += g[j];    \
    }                                                    \
  }

/* node: inputs {w}; saved[0] = indices (contiguous); i[0] = padding_idx or -1 */
static int embedding_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  lt_tensor *w = n->inputs[0], *idx = n->saved[0];
  int64_t pad = n->i[0], d = w->shape[1];
  lt_tensor *gc = lt_op_contiguous(c, gout);
  lt_tensor *gw = gc ? lt_tensor_zeros(c, w->dtype, 2, w->shape) : NULL;
  if (!gw) {
    lt_tensor_release(gc);
    return LT_ERR;
  }
  const int64_t *pi = lt_i64(idx);
  if (w->dtype == LT_F64) {
    EMB_SCATTER(double, lt_f64(gc), lt_f64(gw))
  } else {
    EMB_SCATTER(float, lt_f32(gc), lt_f32(gw))
  }
  lt_tensor_release(gc);
  gin[0] = gw;
  return LT_OK;
}

lt_tensor *lt_nn_embedding_pad(lt_ctx *c, lt_tensor *idx, lt_tensor *w, int64_t padding_idx) {
  char b1[128];
  if (lt_check_dtype(c, "embedding", "indices", idx, LT_I64) || lt_check_float(c, "embedding", "weight", w))
    return NULL;
  if (w->ndim != 2) {
    lt_fail(c, "embedding: weight must be 2-D [num_embeddings x embedding_dim], got %s",
            lt_shape_str(w, b1, sizeof b1));
    return NULL;
  }
  if (idx->ndim >= LT_MAX_DIM) {
    lt_fail(c, "embedding: indices have %d dims, at most %d are supported", idx->ndim, LT_MAX_DIM - 1);
    return NULL;
  }
  int64_t n = w->shape[0], d = w->shape[1];
  lt_tensor *ic = lt_op_contiguous(c, idx);
  if (!ic) return NULL;
  const int64_t *pi = lt_i64(ic);
  int64_t m = lt_numel(ic);
  for (int64_t s = 0; s < m; s++)
    if (pi[s] < 0 || pi[s] >= n) {
      lt_fail(c, "embedding: index %lld is out of range 1..%lld (indices are 1-based)", (long long)(pi[s] + 1),
              (long long)n);
      lt_tensor_release(ic);
      return NULL;
    }
  int64_t oshape[LT_MAX_DIM];
  memcpy(oshape, idx->shape, sizeof(int64_t) * (size_t)idx->ndim);
  oshape[idx->ndim] = d;
  lt_tensor *wc = lt_op_contiguous(c, w);
  lt_tensor *out = wc ? lt_tensor_new(c, w->dtype, idx->ndim + 1, oshape) : NULL;
  if (!out) {
    lt_tensor_release(ic);
    lt_tensor_release(wc);
    return NULL;
  }
  const size_t row = lt_dtype_size(w->dtype) * (size_t)d;
  const int f64 = w->dtype == LT_F64;
  const char *pw = f64 ? (const char *)lt_f64(wc) : (const char *)lt_f32(wc);
  char *po = f64 ? (char *)lt_f64(out) : (char *)lt_f32(out);
  for (int64_t s = 0; s < m; s++) memcpy(po + (size_t)s * row, pw + (size_t)pi[s] * row, row);
  lt_tensor_release(wc);
  lt_node *nd;
  if (lt_record(c, out, "embedding", embedding_backward, 1, &w, &nd)) {
    lt_tensor_release(ic);
    lt_tensor_release(out);
    return NULL;
  }
  if (nd) {
    nd->reads = 0; /* the weight only for its shape; the indices are saved */
    nd->i[0] = padding_idx;
    lt_node_save(nd, 0, ic);
  }
  lt_tensor_release(ic);
  return out;
}

lt_tensor *lt_nn_embedding(lt_ctx *c, lt_tensor *idx, lt_tensor *w) { return lt_nn_embedding_pad(c, idx, w, -1); }
