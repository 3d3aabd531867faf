/*
 * nn_attention.c — scaled dot-product attention (F.scaled_dot_product_attention), forward and backward side
 * by side, as PyTorch's math: weights = softmax(scale * q k^T + mask), out = dropout(weights) v.
 *
 * Shapes: q [B.., L, E], k [B.., S, E], v [B.., S, Ev]; the batch dims B.. are flattened into bh. Each (bh,
 * block of ATT_BR query rows) is one unit: the scores of the block are one GEMM into a scratch [br x se]
 * buffer, where se is the number of keys the block can see (all S, or with is_causal only the first i1);
 * the row softmax runs in place; a second GEMM gives the output rows. Only the output and one log-sum-exp per
 * query row (lse, [bh x L]) are saved: the backward recomputes a block's weights as exp(score - lse), which
 * costs one GEMM and saves the [bh x L x S] weights (and any mask tensor) from living until backward.
 *
 * Backward of one block (P the weights, Pd = P * keep / (1 - p) the dropped ones, dO the output gradient):
 *   dV += Pd^T dO;  dPd = dO V^T;  dP = dPd * keep / (1 - p);  D_i = sum_j P_ij dP_ij = dO_i . O_i
 *   dS = P * (dP - D);  dQ = scale dS K;  dK += scale dS^T Q
 *
 * q, k and v are used in place when their last dim is contiguous (the heads of a fused qkv projection are
 * strided views): the GEMMs take the row stride as their leading dimension.
 *
 * float32 or float64 (q, k and v share one dtype; the output, the saved lse and the gradients are in it): the
 * kernels are written once in nn_attention_kernels.h, included for each (float64 through dgemm and libm's exp).
 */
#include <math.h>
#include <string.h>

#include "lt_alloc.h"
#include "lt_attention.h"
#include "lt_blas.h"
#include "lt_gemm_bf16.h"
#include "lt_errors.h"
#include "lt_pool.h"
#include "lt_simd.h"

#define OP "scaled_dot_product_attention"
/* query rows per unit: a block's scores (ATT_BR x S floats) stay in L2 for S up to a few thousand */
#define ATT_BR 64

/* A [rows x cols] matrix per bh: element (r, c) of bh at base[off[bh] + r * rs + c]. */
typedef struct att_mat {
  const void *base; /* float or double: the inputs' dtype */
  int64_t *off;     /* [nbh] */
  int64_t rs;       /* row stride (>= cols, the GEMM's leading dimension) */
} att_mat;

/* The same, written: the gradients dq, dk, dv, laid out as their inputs (see dense_like). */
typedef struct att_out {
  void *base;
  int64_t *off; /* [nbh] */
  int64_t rs;
} att_out;

typedef struct att_mask {
  const float *f;   /* float32 mask, or NULL */
  const double *d;  /* float64 mask, or NULL */
  const int64_t *i; /* int64 mask, or NULL */
  int binary;       /* 1: non-zero means masked (-inf); 0: added to the scores */
  int64_t *off;     /* [nbh] */
  int64_t sl, ss;   /* strides along L and S (0 where broadcast) */
} att_mask;

typedef struct att_geom {
  int64_t nbh, L, S, E, Ev;
  double scale; /* float32's rounded to float */
  int causal;
  double p;      /* dropout probability */
  uint64_t seed; /* of the dropout hash */
  att_mat q, k, v;
  att_mask m;
} att_geom;

/* keys row i may see */
static inline int64_t visible(const att_geom *g, int64_t i) { return g->causal ? (i + 1 < g->S ? i + 1 : g->S) : g->S; }

/* splitmix64's finaliser over (seed, element index): the keep decision of weight (bh, i, j), the same in the
 * forward and the backward whatever the order of evaluation */
static inline int keep_at(uint64_t seed, uint64_t idx, uint32_t thresh) {
  uint64_t z = seed + idx * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (uint32_t)(z >> 40) >= thresh;
}

/* --- the (bh) units on lutra's pool ---------------------------------------------------------------------- */

/* Units are whole (bh) slices (a backward unit accumulates dK and dV over its query blocks), split over the
 * pool's threads when there are at least this many multiply-adds in all: each thread runs its units' GEMMs
 * (64-row blocks: far below the size OpenBLAS would thread) with OpenBLAS held at one thread, instead of the
 * whole kernel running on one core. Every unit is computed by the same code on any thread: the results do not
 * depend on the thread count. */
#define ATT_PAR_MIN_MACS (INT64_C(1) << 20)

typedef struct att_job {
  const att_geom *g;
  void *scratch;       /* [nparts x per] elements of the inputs' dtype */
  int64_t per;         /* scratch elements per part */
  size_t elem;         /* bytes per element: 4 or 8 */
  void *out, *lse, *w; /* forward */
  att_mat dO;          /* backward */
  const void *O, *lse_in;
  const att_out *dq, *dk, *dv;
} att_job;

#define T float
#define ATT_FN(x) x##_f32
#define ATT_GEMM lt_blas_sgemm
#define ATT_EXP lt_expf
#define ATT_MAX lt_max_f32
#define ATT_SUM lt_sum_f32
#define ATT_DOT lt_dot_f32
#include "nn_attention_kernels.h"
#undef T
#undef ATT_FN
#undef ATT_GEMM
#undef ATT_EXP
#undef ATT_MAX
#undef ATT_SUM
#undef ATT_DOT

#define T double
#define ATT_FN(x) x##_f64
#define ATT_GEMM lt_blas_dgemm
#define ATT_EXP exp
#define ATT_MAX lt_max_f64
#define ATT_SUM lt_sum_f64
#define ATT_DOT lt_dot_f64
#include "nn_attention_kernels.h"
#undef T
#undef ATT_FN
#undef ATT_GEMM
#undef ATT_EXP
#undef ATT_MAX
#undef ATT_SUM
#undef ATT_DOT

/* t's first element (lt_f32 or lt_f64 by its dtype) */
static inline void *elems(const lt_tensor *t) {
  return (char *)t->storage->data + (size_t)t->offset * lt_dtype_size(t->dtype);
}

static void *scratch(lt_ctx *c, int64_t n, size_t elem) {
  void *p = lt_alloc(elem * (size_t)n);
  if (!p) lt_fail(c, LT_E_OOM, elem * (size_t)n);
  return p;
}

/* Runs fn over every bh, with `per` elements of scratch (j->elem bytes each) for each part. */
static int run_units(lt_ctx *c, const att_geom *g, lt_pool_fn fn, att_job *j, int64_t per) {
  lt_gemm_bf16_scope(c); /* the products of the forward and the backward: autocast's precision */
  int64_t work = g->nbh * g->L * g->S * (g->E + g->Ev);
  int parts = lt_pool_parts(c->num_threads, work, ATT_PAR_MIN_MACS);
  if (parts > g->nbh) parts = g->nbh > 0 ? (int)g->nbh : 1;
  j->g = g;
  j->per = per;
  j->scratch = scratch(c, parts * per, j->elem);
  if (!j->scratch) return LT_ERR;
  if (parts > 1) {
    lt_blas_serial_begin();
    lt_pool_run(fn, j, parts);
    lt_blas_serial_end();
  } else {
    fn(j, 0, 1);
  }
  lt_free(j->scratch, j->elem * (size_t)(parts * per));
  return LT_OK;
}

/* --- setup: shapes, layouts, masks ---------------------------------------------------------------------- */

/* Per-bh element offsets of t (batch dims 0..nb-1 of shape bshape, size-1 dims of t broadcast; t may have
 * fewer dims than nb + 2, aligned at the right). */
static void batch_offsets(const lt_tensor *t, int nb, const int64_t *bshape, int64_t nbh, int64_t *off) {
  int lead = nb + 2 - t->ndim; /* batch dims t does not have */
  for (int64_t bh = 0; bh < nbh; bh++) {
    int64_t r = bh, o = t->offset;
    for (int d = nb - 1; d >= 0; d--) {
      int64_t idx = r % bshape[d];
      r /= bshape[d];
      int td = d - lead;
      if (td >= 0 && t->shape[td] != 1) o += idx * t->stride[td];
    }
    off[bh] = o;
  }
}

/* t as rows x cols matrices per bh when its last dim is contiguous and rows do not overlap; else a contiguous
 * copy. Returns a new reference (t itself retained when usable). */
static lt_tensor *gemm_ready(lt_ctx *c, lt_tensor *t) {
  int n = t->ndim;
  int64_t rows = t->shape[n - 2], cols = t->shape[n - 1];
  int last_ok = cols == 1 || t->stride[n - 1] == 1;
  int rows_ok = rows == 1 || t->stride[n - 2] >= (cols > 1 ? cols : 1);
  if (last_ok && rows_ok && t->stride[n - 2] < INT32_MAX) return lt_tensor_retain(t);
  return lt_op_contiguous(c, t);
}

static int64_t row_stride(const lt_tensor *t) {
  int n = t->ndim;
  int64_t cols = t->shape[n - 1];
  return t->shape[n - 2] == 1 ? (cols > 0 ? cols : 1) : t->stride[n - 2];
}

/* 1 when every element of the float mask is 0 or 1 */
static int mask_is_binary(const lt_tensor *m) {
  int64_t n = lt_numel(m);
  if (m->dtype == LT_F32 && lt_is_contiguous(m)) {
    const float *p = lt_f32(m);
    for (int64_t i = 0; i < n; i++)
      if (p[i] != 0.0f && p[i] != 1.0f) return 0;
    return 1;
  }
  for (int64_t i = 0; i < n; i++) {
    double v = lt_get_flat(m, i);
    if (v != 0.0 && v != 1.0) return 0;
  }
  return 1;
}

static int check_shapes(lt_ctx *c, const lt_tensor *q, const lt_tensor *k, const lt_tensor *v, const lt_tensor *m) {
  char a[96], b[96], d[96];
  const lt_tensor *in[3] = { q, k, v };
  const char *names[3] = { "query", "key", "value" };
  for (int i = 0; i < 3; i++) {
    if (lt_check_float(c, OP, names[i], in[i])) return LT_ERR;
    if (in[i]->dtype != q->dtype)
      return lt_fail(c, OP ": query is %s and %s is %s: both must have the same float dtype", lt_dtype_name(q->dtype),
                     names[i], lt_dtype_name(in[i]->dtype));
    if (in[i]->ndim < 2)
      return lt_fail(c, OP ": %s must have at least 2 dims [.. x length x features], got %s", names[i],
                     lt_shape_str(in[i], a, sizeof a));
  }
  lt_shape_str(q, a, sizeof a);
  lt_shape_str(k, b, sizeof b);
  lt_shape_str(v, d, sizeof d);
  int n = q->ndim;
  if (k->ndim != n || v->ndim != n)
    return lt_fail(c, OP ": query %s, key %s and value %s must have the same number of dims", a, b, d);
  for (int i = 0; i < n - 2; i++)
    if (k->shape[i] != q->shape[i] || v->shape[i] != q->shape[i])
      return lt_fail(c, OP ": query %s, key %s and value %s must have the same batch dims (dims 1..%d)", a, b, d,
                     n - 2);
  if (k->shape[n - 1] != q->shape[n - 1])
    return lt_fail(c, OP ": key %s must have query's feature size %lld (query %s, dim %d)", b,
                   (long long)q->shape[n - 1], a, n);
  if (v->shape[n - 2] != k->shape[n - 2])
    return lt_fail(c, OP ": value %s must have key's length %lld (key %s, dim %d)", d, (long long)k->shape[n - 2], b,
                   n - 1);
  if (k->shape[n - 2] == 0 || q->shape[n - 1] == 0)
    return lt_fail(c, OP ": key %s has no positions or no features (attention needs at least one of each)", b);
  if (!m) return LT_OK;
  if (m->dtype != LT_F32 && m->dtype != LT_F64 && m->dtype != LT_I64)
    return lt_fail(c, OP ": attn_mask must be float32, float64 or int64, got %s", lt_dtype_name(m->dtype));
  int64_t want[LT_MAX_DIM];
  for (int i = 0; i < n - 2; i++) want[i] = q->shape[i];
  want[n - 2] = q->shape[n - 2];
  want[n - 1] = k->shape[n - 2];
  int ok = m->ndim >= 1 && m->ndim <= n;
  for (int i = 0; ok && i < m->ndim; i++) {
    int64_t s = m->shape[m->ndim - 1 - i], w = want[n - 1 - i];
    ok = s == w || s == 1;
  }
  if (!ok)
    return lt_fail(
        c, OP ": attn_mask %s cannot be broadcast to the weights' shape %s ([.. x L x S] from query %s, key %s)",
        lt_shape_str(m, a, sizeof a), lt_dims_str(n, want, d, sizeof d), lt_shape_str(q, b, sizeof b),
        lt_shape_str(k, d + 48, 48));
  return LT_OK;
}

/* --- the op --------------------------------------------------------------------------------------------- */

typedef struct att_state {
  lt_tensor *q, *k, *v, *m; /* GEMM-ready references */
  int64_t *offs;            /* 4 x nbh */
  int64_t nbh;
} att_state;

static void state_free(att_state *s) {
  lt_tensor_release(s->q);
  lt_tensor_release(s->k);
  lt_tensor_release(s->v);
  lt_tensor_release(s->m);
  if (s->offs) lt_free(s->offs, sizeof(int64_t) * (size_t)(4 * s->nbh));
  memset(s, 0, sizeof *s);
}

/* Fills g from the inputs (shapes already checked); s owns what g points into. */
static int geom_init(lt_ctx *c, att_geom *g, att_state *s, lt_tensor *q, lt_tensor *k, lt_tensor *v, lt_tensor *m,
                     int causal, double p, double scale, int binary) {
  memset(s, 0, sizeof *s);
  if (lt_blas_ready(c)) return LT_ERR; /* forward and backward run GEMMs (lt_blas.h) */
  int n = q->ndim, nb = n - 2;
  int64_t nbh = 1;
  for (int i = 0; i < nb; i++) nbh *= q->shape[i];
  memset(g, 0, sizeof *g);
  g->nbh = nbh;
  g->L = q->shape[n - 2];
  g->S = k->shape[n - 2];
  g->E = q->shape[n - 1];
  g->Ev = v->shape[n - 1];
  g->scale = scale > 0 ? scale : 1.0 / sqrt((double)g->E);
  if (q->dtype == LT_F32) g->scale = (float)g->scale; /* the GEMMs' float alpha, saved for the backward */
  g->causal = causal;
  g->p = p;
  s->nbh = nbh;
  s->q = gemm_ready(c, q);
  s->k = s->q ? gemm_ready(c, k) : NULL;
  s->v = s->k ? gemm_ready(c, v) : NULL;
  s->m = m && s->v ? lt_tensor_retain(m) : NULL;
  s->offs = s->v ? lt_alloc(sizeof(int64_t) * (size_t)(4 * nbh)) : NULL;
  if (!s->offs) {
    if (s->v) lt_fail(c, LT_E_OOM, sizeof(int64_t) * (size_t)(4 * nbh));
    state_free(s);
    return LT_ERR;
  }
  att_mat *mats[3] = { &g->q, &g->k, &g->v };
  lt_tensor *ts[3] = { s->q, s->k, s->v };
  for (int i = 0; i < 3; i++) {
    mats[i]->base = ts[i]->storage->data;
    mats[i]->off = s->offs + i * nbh;
    mats[i]->rs = row_stride(ts[i]);
    batch_offsets(ts[i], nb, q->shape, nbh, mats[i]->off);
  }
  if (m) {
    g->m.off = s->offs + 3 * nbh;
    batch_offsets(m, nb, q->shape, nbh, g->m.off);
    if (m->dtype == LT_I64) g->m.i = (const int64_t *)m->storage->data;
    else if (m->dtype == LT_F64) g->m.d = (const double *)m->storage->data;
    else g->m.f = (const float *)m->storage->data;
    g->m.binary = binary;
    int md = m->ndim;
    g->m.ss = m->shape[md - 1] == 1 ? 0 : m->stride[md - 1];
    g->m.sl = md < 2 || m->shape[md - 2] == 1 ? 0 : m->stride[md - 2];
  }
  return LT_OK;
}

static lt_tensor *contiguous_shape(lt_ctx *c, const lt_tensor *like, int64_t rows, int64_t cols) {
  int64_t shape[LT_MAX_DIM];
  memcpy(shape, like->shape, sizeof(int64_t) * (size_t)like->ndim);
  shape[like->ndim - 2] = rows;
  shape[like->ndim - 1] = cols;
  return lt_tensor_new(c, like->dtype, like->ndim, shape);
}

/* A new [.., rows, cols] tensor (t's batch dims) laid out in memory as t is (its dims ordered by t's strides,
 * the last innermost): the gradient of a head of a fused projection ([B x H x L x E] seen in a [B x L x H x E]
 * buffer) comes out in that buffer's order, so undoing the head split on it (transpose, view) copies nothing.
 * A contiguous t gives a contiguous tensor. */
static lt_tensor *dense_like(lt_ctx *c, const lt_tensor *t, int64_t rows, int64_t cols) {
  int n = t->ndim, perm[LT_MAX_DIM];
  int64_t shape[LT_MAX_DIM], pshape[LT_MAX_DIM], stride[LT_MAX_DIM];
  memcpy(shape, t->shape, sizeof(int64_t) * (size_t)n);
  shape[n - 2] = rows;
  shape[n - 1] = cols;
  if (t->stride[n - 1] != 1 && t->shape[n - 1] != 1) return lt_tensor_new(c, t->dtype, n, shape);
  /* the dims before the last, outermost first: by stride, larger first; size-1 dims and ties keep their
   * order (insertion sort: a stable sort of at most LT_MAX_DIM - 1 dims) */
  for (int i = 0; i < n - 1; i++) {
    int d = i, j = i;
    int64_t sd = t->shape[d] == 1 ? INT64_MAX : t->stride[d];
    while (j > 0) {
      int e = perm[j - 1];
      int64_t se = t->shape[e] == 1 ? INT64_MAX : t->stride[e];
      if (se >= sd) break;
      perm[j] = e;
      j--;
    }
    perm[j] = d;
  }
  perm[n - 1] = n - 1;
  for (int i = 0; i < n; i++) pshape[i] = shape[perm[i]];
  lt_tensor *base = lt_tensor_new(c, t->dtype, n, pshape);
  if (!base) return NULL;
  int64_t acc = 1;
  for (int i = n - 1; i >= 0; i--) {
    stride[perm[i]] = acc;
    acc *= pshape[i];
  }
  lt_tensor *out = lt_tensor_alias(c, base, n, shape, stride, 0);
  lt_tensor_release(base);
  return out;
}

/* node: inputs q, k, v; saved[0] the output, saved[1] lse, saved[2] the mask (or NULL); i[0] causal, i[1] seed,
 * i[2] binary mask; f[0] p, f[1] the scale used */
static int sdpa_backward_node(lt_ctx *c, lt_node *nd, lt_tensor *gout, lt_tensor **gin) {
  lt_tensor *q = nd->inputs[0], *k = nd->inputs[1], *v = nd->inputs[2];
  att_geom g;
  att_state s;
  if (geom_init(c, &g, &s, q, k, v, nd->saved[2], (int)nd->i[0], nd->f[0], nd->f[1], (int)nd->i[2])) return LT_ERR;
  g.seed = (uint64_t)nd->i[1];
  const int64_t L = g.L, S = g.S;
  lt_tensor *go = gemm_ready(c, gout); /* rows in place: the gradient of a head split undone by a transpose */
  int need[3] = { q->requires_grad, k->requires_grad, v->requires_grad };
  lt_tensor *grads[3] = { go && need[0] ? dense_like(c, q, L, g.E) : NULL,
                          go && need[1] ? dense_like(c, k, S, g.E) : NULL,
                          go && need[2] ? dense_like(c, v, S, g.Ev) : NULL };
  int nb = q->ndim - 2;
  int64_t *offs = go ? lt_alloc(sizeof(int64_t) * (size_t)(4 * g.nbh)) : NULL;
  int ok = offs && (grads[0] || !need[0]) && (grads[1] || !need[1]) && (grads[2] || !need[2]);
  if (go && !offs) lt_fail(c, LT_E_OOM, sizeof(int64_t) * (size_t)(4 * g.nbh));
  att_out outs[3];
  const int f64 = q->dtype == LT_F64;
  att_job j = { .O = elems(nd->saved[0]), .lse_in = elems(nd->saved[1]), .elem = lt_dtype_size(q->dtype) };
  if (ok) {
    j.dO = (att_mat){ go->storage->data, offs + 3 * g.nbh, row_stride(go) };
    batch_offsets(go, nb, q->shape, g.nbh, offs + 3 * g.nbh);
    const att_out **dst[3] = { &j.dq, &j.dk, &j.dv };
    for (int i = 0; i < 3; i++) {
      if (!grads[i]) continue;
      outs[i] = (att_out){ grads[i]->storage->data, offs + i * g.nbh, row_stride(grads[i]) };
      batch_offsets(grads[i], nb, q->shape, g.nbh, outs[i].off);
      *dst[i] = &outs[i];
    }
  }
  if (!ok || run_units(c, &g, f64 ? backward_part_f64 : backward_part_f32, &j, 3 * (int64_t)ATT_BR * S)) {
    if (offs) lt_free(offs, sizeof(int64_t) * (size_t)(4 * g.nbh));
    lt_tensor_release(go);
    for (int i = 0; i < 3; i++) lt_tensor_release(grads[i]);
    state_free(&s);
    return LT_ERR;
  }
  lt_free(offs, sizeof(int64_t) * (size_t)(4 * g.nbh));
  lt_tensor_release(go);
  state_free(&s);
  lt_tensor *dq = grads[0], *dk = grads[1], *dv = grads[2];
  gin[0] = dq;
  gin[1] = dk;
  gin[2] = dv;
  return LT_OK;
}

lt_tensor *lt_nn_sdpa(lt_ctx *c, lt_tensor *q, lt_tensor *k, lt_tensor *v, lt_tensor *mask, int is_causal,
                      double dropout_p, double scale, lt_tensor **weights) {
  if (weights) *weights = NULL;
  if (check_shapes(c, q, k, v, mask)) return NULL;
  if (!(dropout_p >= 0 && dropout_p <= 1)) {
    lt_fail(c, OP ": dropout_p must be between 0 and 1, got %g", dropout_p);
    return NULL;
  }
  if (!(scale >= 0 && scale < INFINITY)) {
    lt_fail(c, OP ": scale must be a finite number > 0, got %g", scale);
    return NULL;
  }
  int binary = mask && (mask->dtype == LT_I64 || mask_is_binary(mask));
  att_geom g;
  att_state s;
  if (geom_init(c, &g, &s, q, k, v, mask, is_causal, dropout_p, scale, binary)) return NULL;
  if (dropout_p > 0) g.seed = lt_rng_next(&c->rng);
  const int64_t L = g.L, S = g.S;
  lt_tensor *out = contiguous_shape(c, q, L, g.Ev);
  int64_t lshape[LT_MAX_DIM];
  memcpy(lshape, q->shape, sizeof(int64_t) * (size_t)(q->ndim - 1));
  lt_tensor *lse = out ? lt_tensor_new(c, q->dtype, q->ndim - 1, lshape) : NULL;
  lt_tensor *w = lse && weights ? contiguous_shape(c, q, L, S) : NULL;
  att_job j = { .out = out ? elems(out) : NULL,
                .lse = lse ? elems(lse) : NULL,
                .w = w ? elems(w) : NULL,
                .elem = lt_dtype_size(q->dtype) };
  lt_pool_fn part = q->dtype == LT_F64 ? forward_part_f64 : forward_part_f32;
  if (!(lse && (w || !weights)) || (L > 0 && run_units(c, &g, part, &j, (int64_t)ATT_BR * S))) {
    lt_tensor_release(out);
    lt_tensor_release(lse);
    lt_tensor_release(w);
    state_free(&s);
    return NULL;
  }
  state_free(&s);
  lt_tensor *inputs[3] = { q, k, v };
  lt_node *nd;
  if (lt_record(c, out, OP, sdpa_backward_node, 3, inputs, &nd)) goto fail;
  if (nd) {
    nd->i[0] = is_causal;
    nd->i[1] = (int64_t)g.seed;
    nd->i[2] = binary;
    nd->f[0] = dropout_p;
    nd->f[1] = g.scale;
    if (lt_node_save_output(c, nd, 0, out)) goto fail;
    lt_node_save(nd, 1, lse);
    if (mask) lt_node_save(nd, 2, mask);
  }
  lt_tensor_release(lse);
  if (weights) *weights = w;
  return out;
fail:
  lt_tensor_release(out);
  lt_tensor_release(lse);
  lt_tensor_release(w);
  return NULL;
}
