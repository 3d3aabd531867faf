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
  const float *base;
  int64_t *off; /* [nbh] */
  int64_t rs;   /* row stride (>= cols, the GEMM's leading dimension) */
} att_mat;

/* The same, written: the gradients dq, dk, dv, laid out as their inputs (see dense_like). */
typedef struct att_out {
  float *base;
  int64_t *off; /* [nbh] */
  int64_t rs;
} att_out;

/* Zeroes rows x cols of m's bh matrix. */
static void zero_rows(const att_out *m, int64_t bh, int64_t rows, int64_t cols) {
  float *p = m->base + m->off[bh];
  if (m->rs == cols) memset(p, 0, sizeof(float) * (size_t)(rows * cols));
  else
    for (int64_t r = 0; r < rows; r++) memset(p + r * m->rs, 0, sizeof(float) * (size_t)cols);
}

typedef struct att_mask {
  const float *f;   /* float32 mask, or NULL */
  const int64_t *i; /* int64 mask, or NULL */
  int binary;       /* 1: non-zero means masked (-inf); 0: added to the scores */
  int64_t *off;     /* [nbh] */
  int64_t sl, ss;   /* strides along L and S (0 where broadcast) */
} att_mask;

typedef struct att_geom {
  int64_t nbh, L, S, E, Ev;
  float scale;
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

/* Adds the mask to the n scores of row i of bh (masked entries become -inf). */
static void apply_mask(const att_mask *m, int64_t bh, int64_t i, float *row, int64_t n) {
  int64_t o = m->off[bh] + i * m->sl;
  if (m->i) {
    for (int64_t j = 0; j < n; j++)
      if (m->i[o + j * m->ss]) row[j] = -INFINITY;
  } else if (m->binary) {
    for (int64_t j = 0; j < n; j++)
      if (m->f[o + j * m->ss] != 0.0f) row[j] = -INFINITY;
  } else {
    for (int64_t j = 0; j < n; j++) row[j] += m->f[o + j * m->ss];
  }
}

/* The scores of rows [i0, i1) of bh into P [br x se] (ld se), each row's first visible() entries masked. */
static void scores(const att_geom *g, int64_t bh, int64_t i0, int64_t i1, int64_t se, float *P) {
  const float *q = g->q.base + g->q.off[bh] + i0 * g->q.rs, *k = g->k.base + g->k.off[bh];
  lt_blas_sgemm(0, 1, (int)(i1 - i0), (int)se, (int)g->E, g->scale, q, (int)g->q.rs, k, (int)g->k.rs, 0.0f, P, (int)se);
  if (g->m.off)
    for (int64_t i = i0; i < i1; i++) apply_mask(&g->m, bh, i, P + (i - i0) * se, visible(g, i));
}

/* Row softmax in place over the n visible entries (the rest of the se-wide row set to 0); returns the
 * log-sum-exp. A row with every entry -inf (all masked) is NaN, as PyTorch's softmax of such a row. */
LT_VECTOR_FN static float softmax_row(float *row, int64_t n, int64_t se) {
  float mx = lt_max_f32(row, n);
  if (mx == -INFINITY) {
    for (int64_t j = 0; j < se; j++) row[j] = NAN;
    return NAN;
  }
  /* exp in its own loop, which vectorises; the sum in lt_sum_f32's fixed lane order */
  for (int64_t j = 0; j < n; j++) row[j] = lt_expf(row[j] - mx);
  double s = lt_sum_f32(row, n);
  float inv = (float)(1.0 / s);
  for (int64_t j = 0; j < n; j++) row[j] *= inv;
  for (int64_t j = n; j < se; j++) row[j] = 0.0f;
  return mx + (float)log(s);
}

/* Weights of a row from the saved lse: exp(score - lse) over the n visible entries, 0 beyond. */
LT_VECTOR_FN static void weights_row(float *row, int64_t n, int64_t se, float lse) {
  for (int64_t j = 0; j < n; j++) row[j] = lt_expf(row[j] - lse);
  for (int64_t j = n; j < se; j++) row[j] = 0.0f;
}

/* Pd = P * keep / (1 - p) for row i of bh (into dst, which may be row itself). */
static void dropout_row(const att_geom *g, int64_t bh, int64_t i, const float *row, float *dst, int64_t n) {
  const uint32_t thresh = (uint32_t)(g->p * 16777216.0);
  const float inv_keep = g->p >= 1 ? 0.0f : (float)(1.0 / (1.0 - g->p));
  const uint64_t base = ((uint64_t)bh * (uint64_t)g->L + (uint64_t)i) * (uint64_t)g->S;
  for (int64_t j = 0; j < n; j++) dst[j] = keep_at(g->seed, base + (uint64_t)j, thresh) ? row[j] * inv_keep : 0.0f;
}

/* --- forward -------------------------------------------------------------------------------------------- */

/* bh in [b0, b1): out [nbh x L x Ev] contiguous, lse [nbh x L], w [nbh x L x S] or NULL; P scratch
 * [ATT_BR x S] */
static void sdpa_forward(const att_geom *g, int64_t b0, int64_t b1, float *out, float *lse, float *w, float *P) {
  for (int64_t bh = b0; bh < b1; bh++) {
    for (int64_t i0 = 0; i0 < g->L; i0 += ATT_BR) {
      int64_t i1 = i0 + ATT_BR < g->L ? i0 + ATT_BR : g->L, br = i1 - i0;
      int64_t se = g->causal ? (i1 < g->S ? i1 : g->S) : g->S;
      scores(g, bh, i0, i1, se, P);
      for (int64_t i = i0; i < i1; i++) {
        float *row = P + (i - i0) * se;
        int64_t n = visible(g, i);
        lse[bh * g->L + i] = softmax_row(row, n, se);
        if (g->p > 0) dropout_row(g, bh, i, row, row, n);
        if (w) {
          float *wr = w + (bh * g->L + i) * g->S;
          memcpy(wr, row, sizeof(float) * (size_t)se);
          memset(wr + se, 0, sizeof(float) * (size_t)(g->S - se));
        }
      }
      lt_blas_sgemm(0, 0, (int)br, (int)g->Ev, (int)se, 1.0f, P, (int)se, g->v.base + g->v.off[bh], (int)g->v.rs, 0.0f,
                    out + (bh * g->L + i0) * g->Ev, (int)g->Ev);
    }
  }
}

/* --- backward ------------------------------------------------------------------------------------------- */

/* bh in [b0, b1): dO [nbh x L x Ev] (rows of stride dO->rs), O [nbh x L x Ev] contiguous; dq [nbh x L x E],
 * dk [nbh x S x E], dv [nbh x S x Ev] (zeroed here; any may be NULL when not needed); scratch P, Pd, dP each
 * [ATT_BR x S] */
static void sdpa_backward(const att_geom *g, int64_t b0, int64_t b1, const att_mat *dO, const float *O,
                          const float *lse, const att_out *dq, const att_out *dk, const att_out *dv, float *P,
                          float *Pd, float *dP) {
  const int64_t L = g->L, S = g->S, E = g->E, Ev = g->Ev;
  for (int64_t bh = b0; bh < b1; bh++) {
    float *dkb = dk ? dk->base + dk->off[bh] : NULL, *dvb = dv ? dv->base + dv->off[bh] : NULL;
    if (dkb) zero_rows(dk, bh, S, E);
    if (dvb) zero_rows(dv, bh, S, Ev);
    const float *kb = g->k.base + g->k.off[bh], *vb = g->v.base + g->v.off[bh];
    for (int64_t i0 = 0; i0 < L; i0 += ATT_BR) {
      int64_t i1 = i0 + ATT_BR < L ? i0 + ATT_BR : L, br = i1 - i0;
      int64_t se = g->causal ? (i1 < S ? i1 : S) : S;
      const float *dOb = dO->base + dO->off[bh] + i0 * dO->rs, *Ob = O + (bh * L + i0) * Ev;
      const int ldo = (int)dO->rs;
      const float *qb = g->q.base + g->q.off[bh] + i0 * g->q.rs;
      scores(g, bh, i0, i1, se, P);
      for (int64_t i = i0; i < i1; i++) {
        float *row = P + (i - i0) * se;
        int64_t n = visible(g, i);
        weights_row(row, n, se, lse[bh * L + i]);
        if (g->p > 0) {
          dropout_row(g, bh, i, row, Pd + (i - i0) * se, n);
          for (int64_t j = n; j < se; j++) Pd[(i - i0) * se + j] = 0.0f;
        }
      }
      const float *Pdrop = g->p > 0 ? Pd : P;
      if (dvb) lt_blas_sgemm(1, 0, (int)se, (int)Ev, (int)br, 1.0f, Pdrop, (int)se, dOb, ldo, 1.0f, dvb, (int)dv->rs);
      if (!dq && !dkb) continue;
      lt_blas_sgemm(0, 1, (int)br, (int)se, (int)Ev, 1.0f, dOb, ldo, vb, (int)g->v.rs, 0.0f, dP, (int)se);
      for (int64_t i = i0; i < i1; i++) {
        float *pr = P + (i - i0) * se, *dr = dP + (i - i0) * se;
        int64_t n = visible(g, i);
        if (g->p > 0) dropout_row(g, bh, i, dr, dr, n);
        float D = (float)lt_dot_f32(dOb + (i - i0) * dO->rs, Ob + (i - i0) * Ev, Ev);
        for (int64_t j = 0; j < n; j++) dr[j] = pr[j] * (dr[j] - D);
        for (int64_t j = n; j < se; j++) dr[j] = 0.0f;
      }
      if (dq)
        lt_blas_sgemm(0, 0, (int)br, (int)E, (int)se, g->scale, dP, (int)se, kb, (int)g->k.rs, 0.0f,
                      dq->base + dq->off[bh] + i0 * dq->rs, (int)dq->rs);
      if (dkb)
        lt_blas_sgemm(1, 0, (int)se, (int)E, (int)br, g->scale, dP, (int)se, qb, (int)g->q.rs, 1.0f, dkb, (int)dk->rs);
    }
  }
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
  float *scratch;       /* [nparts x per] */
  int64_t per;          /* scratch floats per part */
  float *out, *lse, *w; /* forward */
  att_mat dO;           /* backward */
  const float *O, *lse_in;
  const att_out *dq, *dk, *dv;
} att_job;

static void forward_part(void *arg, int i, int n) {
  const att_job *j = arg;
  int64_t b0, b1;
  lt_pool_range(j->g->nbh, i, n, 1, &b0, &b1);
  if (b0 < b1) sdpa_forward(j->g, b0, b1, j->out, j->lse, j->w, j->scratch + (int64_t)i * j->per);
}

static void backward_part(void *arg, int i, int n) {
  const att_job *j = arg;
  int64_t b0, b1, ns = (int64_t)ATT_BR * j->g->S;
  lt_pool_range(j->g->nbh, i, n, 1, &b0, &b1);
  float *P = j->scratch + (int64_t)i * j->per;
  if (b0 < b1) sdpa_backward(j->g, b0, b1, &j->dO, j->O, j->lse_in, j->dq, j->dk, j->dv, P, P + ns, P + 2 * ns);
}

static float *scratch(lt_ctx *c, int64_t n) {
  float *p = lt_alloc(sizeof(float) * (size_t)n);
  if (!p) lt_fail(c, LT_E_OOM, sizeof(float) * (size_t)n);
  return p;
}

/* Runs fn over every bh, with `per` floats of scratch for each part. */
static int run_units(lt_ctx *c, const att_geom *g, lt_pool_fn fn, att_job *j, int64_t per) {
  lt_gemm_bf16_scope(c); /* the products of the forward and the backward: autocast's precision */
  int64_t work = g->nbh * g->L * g->S * (g->E + g->Ev);
  int parts = lt_pool_parts(c->num_threads, work, ATT_PAR_MIN_MACS);
  if (parts > g->nbh) parts = g->nbh > 0 ? (int)g->nbh : 1;
  j->g = g;
  j->per = per;
  j->scratch = scratch(c, parts * per);
  if (!j->scratch) return LT_ERR;
  if (parts > 1) {
    lt_blas_serial_begin();
    lt_pool_run(fn, j, parts);
    lt_blas_serial_end();
  } else {
    fn(j, 0, 1);
  }
  lt_free(j->scratch, sizeof(float) * (size_t)(parts * per));
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

/* 1 when every element of the float32 mask is 0 or 1 */
static int mask_is_binary(const lt_tensor *m) {
  int64_t n = lt_numel(m);
  if (lt_is_contiguous(m)) {
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
    if (lt_check_dtype(c, OP, names[i], in[i], LT_F32)) return LT_ERR;
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
  if (m->dtype != LT_F32 && m->dtype != LT_I64)
    return lt_fail(c, OP ": attn_mask must be float32 or int64, got %s", lt_dtype_name(m->dtype));
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
  g->scale = (float)(scale > 0 ? scale : 1.0 / sqrt((double)g->E));
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
    mats[i]->base = (const float *)ts[i]->storage->data;
    mats[i]->off = s->offs + i * nbh;
    mats[i]->rs = row_stride(ts[i]);
    batch_offsets(ts[i], nb, q->shape, nbh, mats[i]->off);
  }
  if (m) {
    g->m.off = s->offs + 3 * nbh;
    batch_offsets(m, nb, q->shape, nbh, g->m.off);
    if (m->dtype == LT_I64) g->m.i = (const int64_t *)m->storage->data;
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
  return lt_tensor_new(c, LT_F32, like->ndim, shape);
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
  if (t->stride[n - 1] != 1 && t->shape[n - 1] != 1) return lt_tensor_new(c, LT_F32, n, shape);
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
  lt_tensor *base = lt_tensor_new(c, LT_F32, n, pshape);
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
  att_job j = { .O = lt_f32(nd->saved[0]), .lse_in = lt_f32(nd->saved[1]) };
  if (ok) {
    j.dO = (att_mat){ (const float *)go->storage->data, offs + 3 * g.nbh, row_stride(go) };
    batch_offsets(go, nb, q->shape, g.nbh, offs + 3 * g.nbh);
    const att_out **dst[3] = { &j.dq, &j.dk, &j.dv };
    for (int i = 0; i < 3; i++) {
      if (!grads[i]) continue;
      outs[i] = (att_out){ (float *)grads[i]->storage->data, offs + i * g.nbh, row_stride(grads[i]) };
      batch_offsets(grads[i], nb, q->shape, g.nbh, outs[i].off);
      *dst[i] = &outs[i];
    }
  }
  if (!ok || run_units(c, &g, backward_part, &j, 3 * (int64_t)ATT_BR * S)) {
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
  lt_tensor *lse = out ? lt_tensor_new(c, LT_F32, q->ndim - 1, lshape) : NULL;
  lt_tensor *w = lse && weights ? contiguous_shape(c, q, L, S) : NULL;
  att_job j = { .out = out ? lt_f32(out) : NULL, .lse = lse ? lt_f32(lse) : NULL, .w = w ? lt_f32(w) : NULL };
  if (!(lse && (w || !weights)) || (L > 0 && run_units(c, &g, forward_part, &j, (int64_t)ATT_BR * S))) {
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
