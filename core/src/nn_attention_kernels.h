/*
 * nn_attention_kernels.h — the attention kernels of nn_attention.c over one element type, included once per
 * dtype (float32 and float64: one source for both). Before including, nn_attention.c defines
 *   T         the element type (float or double)
 *   ATT_FN(x) the name of function x for this type (x##_f32, x##_f64)
 *   ATT_GEMM  the row-major GEMM (lt_blas_sgemm, lt_blas_dgemm)
 *   ATT_EXP   exp (float32: lt_simd.h's fast lt_expf; float64: libm's exp)
 *   ATT_MAX, ATT_SUM, ATT_DOT  a contiguous row's max (NaN if any), sum and dot product, the sums in double
 * and undefines them after. It defines ATT_FN(forward_part) and ATT_FN(backward_part) for run_units.
 */
/* Zeroes rows x cols of m's bh matrix. */
static void ATT_FN(zero_rows)(const att_out *m, int64_t bh, int64_t rows, int64_t cols) {
  T *p = (T *)m->base + m->off[bh];
  if (m->rs == cols) memset(p, 0, sizeof(T) * (size_t)(rows * cols));
  else
    for (int64_t r = 0; r < rows; r++) memset(p + r * m->rs, 0, sizeof(T) * (size_t)cols);
}

/* Adds the mask to the n scores of row i of bh (masked entries become -inf). */
static void ATT_FN(apply_mask)(const att_mask *m, int64_t bh, int64_t i, T *row, int64_t n) {
  int64_t o = m->off[bh] + i * m->sl;
  if (m->i) {
    for (int64_t j = 0; j < n; j++)
      if (m->i[o + j * m->ss]) row[j] = -INFINITY;
  } else if (m->d) { /* a float64 mask */
    if (m->binary) {
      for (int64_t j = 0; j < n; j++)
        if (m->d[o + j * m->ss] != 0.0) row[j] = -INFINITY;
    } else {
      for (int64_t j = 0; j < n; j++) row[j] += (T)m->d[o + j * m->ss];
    }
  } else if (m->binary) {
    for (int64_t j = 0; j < n; j++)
      if (m->f[o + j * m->ss] != 0.0f) row[j] = -INFINITY;
  } else {
    for (int64_t j = 0; j < n; j++) row[j] += m->f[o + j * m->ss];
  }
}

/* The scores of rows [i0, i1) of bh into P [br x se] (ld se), each row's first visible() entries masked. */
static void ATT_FN(scores)(const att_geom *g, int64_t bh, int64_t i0, int64_t i1, int64_t se, T *P) {
  const T *q = (const T *)g->q.base + g->q.off[bh] + i0 * g->q.rs, *k = (const T *)g->k.base + g->k.off[bh];
  ATT_GEMM(0, 1, (int)(i1 - i0), (int)se, (int)g->E, (T)g->scale, q, (int)g->q.rs, k, (int)g->k.rs, 0, P, (int)se);
  if (g->m.off)
    for (int64_t i = i0; i < i1; i++) ATT_FN(apply_mask)(&g->m, bh, i, P + (i - i0) * se, visible(g, i));
}

/* Row softmax in place over the n visible entries (the rest of the se-wide row set to 0); returns the
 * log-sum-exp. A row with every entry -inf (all masked) is NaN, as PyTorch's softmax of such a row. */
LT_VECTOR_FN static T ATT_FN(softmax_row)(T *row, int64_t n, int64_t se) {
  T mx = ATT_MAX(row, n);
  if (mx == -INFINITY) {
    for (int64_t j = 0; j < se; j++) row[j] = NAN;
    return NAN;
  }
  /* exp in its own loop, which vectorises; the sum in ATT_SUM's fixed order */
  for (int64_t j = 0; j < n; j++) row[j] = ATT_EXP(row[j] - mx);
  double s = ATT_SUM(row, n);
  T inv = (T)(1.0 / s);
  for (int64_t j = 0; j < n; j++) row[j] *= inv;
  for (int64_t j = n; j < se; j++) row[j] = 0;
  return mx + (T)log(s);
}

/* Weights of a row from the saved lse: exp(score - lse) over the n visible entries, 0 beyond. */
LT_VECTOR_FN static void ATT_FN(weights_row)(T *row, int64_t n, int64_t se, T lse) {
  for (int64_t j = 0; j < n; j++) row[j] = ATT_EXP(row[j] - lse);
  for (int64_t j = n; j < se; j++) row[j] = 0;
}

/* Pd = P * keep / (1 - p) for row i of bh (into dst, which may be row itself). */
static void ATT_FN(dropout_row)(const att_geom *g, int64_t bh, int64_t i, const T *row, T *dst, int64_t n) {
  const uint32_t thresh = (uint32_t)(g->p * 16777216.0);
  const T inv_keep = g->p >= 1 ? (T)0 : (T)(1.0 / (1.0 - g->p));
  const uint64_t base = ((uint64_t)bh * (uint64_t)g->L + (uint64_t)i) * (uint64_t)g->S;
  for (int64_t j = 0; j < n; j++) dst[j] = keep_at(g->seed, base + (uint64_t)j, thresh) ? row[j] * inv_keep : (T)0;
}

/* --- forward -------------------------------------------------------------------------------------------- */

/* bh in [b0, b1): out [nbh x L x Ev] contiguous, lse [nbh x L], w [nbh x L x S] or NULL; P scratch
 * [ATT_BR x S] */
static void ATT_FN(sdpa_forward)(const att_geom *g, int64_t b0, int64_t b1, T *out, T *lse, T *w, T *P) {
  for (int64_t bh = b0; bh < b1; bh++) {
    for (int64_t i0 = 0; i0 < g->L; i0 += ATT_BR) {
      int64_t i1 = i0 + ATT_BR < g->L ? i0 + ATT_BR : g->L, br = i1 - i0;
      int64_t se = g->causal ? (i1 < g->S ? i1 : g->S) : g->S;
      ATT_FN(scores)(g, bh, i0, i1, se, P);
      for (int64_t i = i0; i < i1; i++) {
        T *row = P + (i - i0) * se;
        int64_t n = visible(g, i);
        lse[bh * g->L + i] = ATT_FN(softmax_row)(row, n, se);
        if (g->p > 0) ATT_FN(dropout_row)(g, bh, i, row, row, n);
        if (w) {
          T *wr = w + (bh * g->L + i) * g->S;
          memcpy(wr, row, sizeof(T) * (size_t)se);
          memset(wr + se, 0, sizeof(T) * (size_t)(g->S - se));
        }
      }
      ATT_GEMM(0, 0, (int)br, (int)g->Ev, (int)se, 1, P, (int)se, (const T *)g->v.base + g->v.off[bh], (int)g->v.rs, 0,
               out + (bh * g->L + i0) * g->Ev, (int)g->Ev);
    }
  }
}

/* --- backward ------------------------------------------------------------------------------------------- */

/* bh in [b0, b1): dO [nbh x L x Ev] (rows of stride dO->rs), O [nbh x L x Ev] contiguous; dq [nbh x L x E],
 * dk [nbh x S x E], dv [nbh x S x Ev] (zeroed here; any may be NULL when not needed); scratch P, Pd, dP each
 * [ATT_BR x S] */
static void ATT_FN(sdpa_backward)(const att_geom *g, int64_t b0, int64_t b1, const att_mat *dO, const T *O,
                                  const T *lse, const att_out *dq, const att_out *dk, const att_out *dv, T *P, T *Pd,
                                  T *dP) {
  const int64_t L = g->L, S = g->S, E = g->E, Ev = g->Ev;
  for (int64_t bh = b0; bh < b1; bh++) {
    T *dkb = dk ? (T *)dk->base + dk->off[bh] : NULL, *dvb = dv ? (T *)dv->base + dv->off[bh] : NULL;
    if (dkb) ATT_FN(zero_rows)(dk, bh, S, E);
    if (dvb) ATT_FN(zero_rows)(dv, bh, S, Ev);
    const T *kb = (const T *)g->k.base + g->k.off[bh], *vb = (const T *)g->v.base + g->v.off[bh];
    for (int64_t i0 = 0; i0 < L; i0 += ATT_BR) {
      int64_t i1 = i0 + ATT_BR < L ? i0 + ATT_BR : L, br = i1 - i0;
      int64_t se = g->causal ? (i1 < S ? i1 : S) : S;
      const T *dOb = (const T *)dO->base + dO->off[bh] + i0 * dO->rs, *Ob = O + (bh * L + i0) * Ev;
      const int ldo = (int)dO->rs;
      const T *qb = (const T *)g->q.base + g->q.off[bh] + i0 * g->q.rs;
      ATT_FN(scores)(g, bh, i0, i1, se, P);
      for (int64_t i = i0; i < i1; i++) {
        T *row = P + (i - i0) * se;
        int64_t n = visible(g, i);
        ATT_FN(weights_row)(row, n, se, lse[bh * L + i]);
        if (g->p > 0) {
          ATT_FN(dropout_row)(g, bh, i, row, Pd + (i - i0) * se, n);
          for (int64_t j = n; j < se; j++) Pd[(i - i0) * se + j] = 0;
        }
      }
      const T *Pdrop = g->p > 0 ? Pd : P;
      if (dvb) ATT_GEMM(1, 0, (int)se, (int)Ev, (int)br, 1, Pdrop, (int)se, dOb, ldo, 1, dvb, (int)dv->rs);
      if (!dq && !dkb) continue;
      ATT_GEMM(0, 1, (int)br, (int)se, (int)Ev, 1, dOb, ldo, vb, (int)g->v.rs, 0, dP, (int)se);
      for (int64_t i = i0; i < i1; i++) {
        T *pr = P + (i - i0) * se, *dr = dP + (i - i0) * se;
        int64_t n = visible(g, i);
        if (g->p > 0) ATT_FN(dropout_row)(g, bh, i, dr, dr, n);
        T D = (T)ATT_DOT(dOb + (i - i0) * dO->rs, Ob + (i - i0) * Ev, Ev);
        for (int64_t j = 0; j < n; j++) dr[j] = pr[j] * (dr[j] - D);
        for (int64_t j = n; j < se; j++) dr[j] = 0;
      }
      if (dq)
        ATT_GEMM(0, 0, (int)br, (int)E, (int)se, (T)g->scale, dP, (int)se, kb, (int)g->k.rs, 0,
                 (T *)dq->base + dq->off[bh] + i0 * dq->rs, (int)dq->rs);
      if (dkb)
        ATT_GEMM(1, 0, (int)se, (int)E, (int)br, (T)g->scale, dP, (int)se, qb, (int)g->q.rs, 1, dkb, (int)dk->rs);
    }
  }
}

/* --- the parts a job runs on lutra's pool (att_job, run_units in nn_attention.c) -------------------------- */

static void ATT_FN(forward_part)(void *arg, int i, int n) {
  const att_job *j = arg;
  int64_t b0, b1;
  lt_pool_range(j->g->nbh, i, n, 1, &b0, &b1);
  if (b0 < b1)
    ATT_FN(sdpa_forward)(j->g, b0, b1, (T *)j->out, (T *)j->lse, (T *)j->w, (T *)j->scratch + (int64_t)i * j->per);
}

static void ATT_FN(backward_part)(void *arg, int i, int n) {
  const att_job *j = arg;
  int64_t b0, b1, ns = (int64_t)ATT_BR * j->g->S;
  lt_pool_range(j->g->nbh, i, n, 1, &b0, &b1);
  T *P = (T *)j->scratch + (int64_t)i * j->per;
  if (b0 < b1) ATT_FN(sdpa_backward)
  (j->g, b0, b1, &j->dO, (const T *)j->O, (const T *)j->lse_in, j->dq, j->dk, j->dv, P, P + ns, P + 2 * ns);
}
