/*
 * ops_softmax_kernels.h — softmax and log_softmax's forward and backward rows, written once for float and
 * double. ops_softmax.c includes it once per element type, after defining:
 *   SM_T              the element type (float, double)
 *   SM_FN(name)       name with the type's suffix (the functions here are static, one set per type)
 *   SM_EXP(x)         exp of one element, called only with x <= 0 or NaN (x minus its row's max, or a log-
 *                     probability): float32's sm_expf_nonpos (ops_softmax.c) relies on it and returns garbage
 *                     for x > 88; float64 uses libm's exp, as float64 is asked for its precision
 *   SM_LOG_SUM(s)     log of a (double) sum of exps, in loops over rows that vectorise
 *   SM_LONG           rows longer than this take SM_SUM_LONG / SM_DOT_LONG for their sums, where 16 lanes of
 *                     SM_T would lose precision (float32 from 4096)
 *   SM_SUM_LONG(x, n), SM_DOT_LONG(g, y, n)
 * The sums of exps are doubles for both types. The file has no include guard on purpose, and undefines these
 * parameters at its end, so the next type defines them afresh.
 */

/* The 16 lanes of the row sums as 16 / SM_VL vectors of 32 bytes (GCC's vector extension): registers, where an
 * array of 16 that the vectoriser updated in place stayed in memory, and each vector of a row waited on the
 * store and reload of the previous one (a third of a 64-wide row's time). 32 bytes, not 64: wider vectors than
 * the AVX2 clone's registers are split through the stack there. */
#define SM_VL (32 / (int)sizeof(SM_T))
typedef SM_T SM_FN(vec) __attribute__((vector_size(32)));
typedef double SM_FN(dvec) __attribute__((vector_size(SM_VL * sizeof(double))));

/* Sums of 16 lanes (+ the tail) as a tree of double adds: four dependent adds, where a chain over the lanes
 * is sixteen (on rows of 64, a quarter of the row's time). The order is fixed, so a row's result does not depend
 * on where it sits or which thread computes it. */
__attribute__((always_inline)) static inline double SM_FN(lanes_sum)(const SM_FN(vec) * acc, SM_T tail) {
  SM_FN(dvec) h[8 / SM_VL];
  for (int q = 0; q < 8 / SM_VL; q++) /* lanes k and k + 8, k < 8 */
    h[q] = __builtin_convertvector(acc[q], SM_FN(dvec)) + __builtin_convertvector(acc[q + 8 / SM_VL], SM_FN(dvec));
  double d[8];
  for (int k = 0; k < 8; k++) d[k] = h[k / SM_VL][k % SM_VL];
  for (int k = 0; k < 4; k++) d[k] += d[k + 4];
  return ((d[0] + d[2]) + (d[1] + d[3])) + tail;
}

/* The largest element of a contiguous row, NaN if it holds one (as PyTorch's max, so that the row's softmax is
 * all NaN), -inf if empty. The same 16 lanes in registers (lt_max_f32's array was folded through the stack, a
 * sixth of a 64-wide row's forward time); NaNs are flagged on the side because a compare-and-select drops them. */
typedef __typeof__((SM_FN(vec)){ 0 } > (SM_FN(vec)){ 0 }) SM_FN(mask);
/* *a = max(*a, *b) lane by lane (pointers: a vector passed by value breaks the baseline clone's ABI) */
__attribute__((always_inline)) static inline void SM_FN(vmax)(SM_FN(vec) * a, const SM_FN(vec) * b) {
  SM_FN(mask) gt = *b > *a;
  *a = (SM_FN(vec))(((SM_FN(mask)) * b & gt) | ((SM_FN(mask)) * a & ~gt));
}
__attribute__((always_inline)) static inline SM_T SM_FN(row_max)(const SM_T *x, int64_t n) {
  SM_T m = -INFINITY;
  int64_t i = 0, bad = 0;
  if (n >= 16) {
    SM_FN(vec) acc[16 / SM_VL];
    SM_FN(mask) nan[16 / SM_VL];
    for (int q = 0; q < 16 / SM_VL; q++) {
      memcpy(&acc[q], x + q * SM_VL, sizeof acc[q]);
      nan[q] = acc[q] != acc[q];
    }
    for (i = 16; i + 16 <= n; i += 16)
      for (int q = 0; q < 16 / SM_VL; q++) {
        SM_FN(vec) v;
        memcpy(&v, x + i + q * SM_VL, sizeof v);
        SM_FN(vmax)(&acc[q], &v);
        nan[q] |= v != v;
      }
    for (int w = 16 / SM_VL / 2; w >= 1; w /= 2) /* fold the vectors as a tree, then the lanes */
      for (int q = 0; q < w; q++) {
        SM_FN(vmax)(&acc[q], &acc[q + w]);
        nan[q] |= nan[q + w];
      }
    SM_T l[SM_VL];
    for (int k = 0; k < SM_VL; k++) {
      l[k] = acc[0][k];
      bad |= nan[0][k];
    }
    for (int w = SM_VL / 2; w >= 1; w /= 2)
      for (int k = 0; k < w; k++) l[k] = l[k + w] > l[k] ? l[k + w] : l[k];
    m = l[0];
  }
  for (; i < n; i++) {
    m = x[i] > m ? x[i] : m;
    bad |= x[i] != x[i];
  }
  return bad ? (SM_T)NAN : m;
}

/* sum of g[j] (y NULL) or of g[j] * y[j] */
__attribute__((always_inline)) static inline double SM_FN(row_dot)(const SM_T *g, const SM_T *y, int64_t n) {
  SM_FN(vec) acc[16 / SM_VL] = { 0 };
  SM_T tail = 0;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int q = 0; q < 16 / SM_VL; q++) {
      SM_FN(vec) a, b;
      memcpy(&a, g + j + q * SM_VL, sizeof a);
      if (y) {
        memcpy(&b, y + j + q * SM_VL, sizeof b);
        a *= b;
      }
      acc[q] += a;
    }
  for (; j < n; j++) tail += y ? g[j] * y[j] : g[j];
  return SM_FN(lanes_sum)(acc, tail);
}

/* Column sums below add up to this many terms in SM_T (as the 16 lanes of a contiguous row do), then in double:
 * converting every term to double took as long as the rest of a strided backward. */
#define SM_COL_CHUNK (SM_LONG / 16)

/* For m side-by-side rows stored as columns (element j of row k at p[j * ld + k]): each row's max (NaN when
 * the row has one) and sum of exp(v - max), the exps also stored at e (same layout) unless e is NULL. Both
 * blocked paths below use it, ld a constant or the inner size; m <= SM_BLOCK. */
__attribute__((always_inline)) static inline void
SM_FN(cols_max_expsum)(const SM_T *p, int64_t ld, int64_t n, int64_t m, SM_T *mx, double *s, int32_t *bad, SM_T *e) {
  SM_T part[SM_BLOCK];
  for (int64_t k = 0; k < m; k++) {
    mx[k] = -INFINITY;
    s[k] = 0;
    bad[k] = 0;
  }
  for (int64_t j = 0; j < n; j++)
    for (int64_t k = 0; k < m; k++) {
      SM_T v = p[j * ld + k];
      mx[k] = v > mx[k] ? v : mx[k];
      bad[k] |= v != v;
    }
  for (int64_t k = 0; k < m; k++) mx[k] = bad[k] ? NAN : mx[k];
  /* each chunk's partial sums start from its first term, not from a zeroed array (GCC made that a rep stos, a
   * tenth of a strided pass over rows of 4) */
  for (int64_t j0 = 0; j0 < n; j0 += SM_COL_CHUNK) {
    int64_t j1 = n - j0 > SM_COL_CHUNK ? j0 + SM_COL_CHUNK : n;
    for (int64_t j = j0; j < j1; j++)
      for (int64_t k = 0; k < m; k++) {
        SM_T v = SM_EXP(p[j * ld + k] - mx[k]);
        if (e) e[j * ld + k] = v;
        part[k] = j > j0 ? part[k] + v : v;
      }
    for (int64_t k = 0; k < m; k++) s[k] += part[k];
  }
}

/* For m side-by-side rows stored as columns (as above): sf[k] = the sum of row k of g (y NULL) or of g * y */
__attribute__((always_inline)) static inline void SM_FN(cols_dot)(const SM_T *g, const SM_T *y, int64_t ld, int64_t n,
                                                                  int64_t m, SM_T *sf) {
  double s[SM_BLOCK];
  SM_T part[SM_BLOCK];
  for (int64_t j0 = 0; j0 < n; j0 += SM_COL_CHUNK) { /* (no zeroed arrays, as above) */
    int64_t j1 = n - j0 > SM_COL_CHUNK ? j0 + SM_COL_CHUNK : n;
    for (int64_t j = j0; j < j1; j++)
      for (int64_t k = 0; k < m; k++) {
        SM_T v = y ? g[j * ld + k] * y[j * ld + k] : g[j * ld + k];
        part[k] = j > j0 ? part[k] + v : v;
      }
    for (int64_t k = 0; k < m; k++) s[k] = (j0 ? s[k] : 0.0) + part[k];
  }
  for (int64_t k = 0; k < m; k++) sf[k] = n ? (SM_T)s[k] : 0;
}

/* Forward rows [lo, hi) of n <= SM_SHORT classes each (contiguous rows), a block of rows at a time. */
__attribute__((always_inline)) static inline void SM_FN(softmax_fwd_short)(const SM_T *x, SM_T *y, int64_t n,
                                                                           int log_form, int64_t lo, int64_t hi) {
  SM_T t[SM_SHORT * SM_SHORT_ROWS], mx[SM_SHORT_ROWS], f[SM_SHORT_ROWS];
  double s[SM_SHORT_ROWS];
  int32_t bad[SM_SHORT_ROWS];
  for (int64_t r = lo; r < hi; r += SM_SHORT_ROWS) {
    int64_t m = hi - r < SM_SHORT_ROWS ? hi - r : SM_SHORT_ROWS;
    const SM_T *px = x + r * n;
    SM_T *py = y + r * n;
    for (int64_t k = 0; k < m; k++)
      for (int64_t j = 0; j < n; j++) t[j * SM_SHORT_ROWS + k] = px[k * n + j];
    SM_FN(cols_max_expsum)(t, SM_SHORT_ROWS, n, m, mx, s, bad, NULL);
    if (log_form) {
      for (int64_t k = 0; k < m; k++) f[k] = mx[k] + SM_LOG_SUM(s[k]); /* the log-sum-exp */
      for (int64_t k = 0; k < m; k++)
        for (int64_t j = 0; j < n; j++) py[k * n + j] = px[k * n + j] - f[k];
    } else {
      for (int64_t k = 0; k < m; k++) f[k] = (SM_T)(1.0 / s[k]);
      for (int64_t k = 0; k < m; k++) /* exp again: along the row it vectorises, a transposed read does not */
        for (int64_t j = 0; j < n; j++) py[k * n + j] = SM_EXP(px[k * n + j] - mx[k]) * f[k];
    }
  }
}

/* Offsets of rows r .. r + m - 1 (a row's elements at base[k] + j * inner) */
__attribute__((always_inline)) static inline void SM_FN(row_bases)(int64_t *base, int64_t r, int64_t m, int64_t n,
                                                                   int64_t inner) {
  for (int64_t k = 0; k < m; k++) base[k] = (r + k) / inner * n * inner + (r + k) % inner;
}

/* Forward rows [lo, hi) of n <= SM_SHORT classes over a dim followed by 1 < inner < SM_SMALL_INNER elements: a
 * block of rows gathered into a scratch, so that the max, exps, sums and scaling run SM_SHORT_ROWS rows to a
 * vector (taken in place, a block held `inner` rows and left most of each vector empty). */
__attribute__((always_inline)) static inline void
SM_FN(softmax_fwd_gathered)(const SM_T *x, SM_T *y, int64_t n, int64_t inner, int log_form, int64_t lo, int64_t hi) {
  SM_T t[SM_SHORT * SM_SHORT_ROWS], mx[SM_SHORT_ROWS], f[SM_SHORT_ROWS];
  double s[SM_SHORT_ROWS];
  int32_t bad[SM_SHORT_ROWS];
  int64_t base[SM_SHORT_ROWS];
  for (int64_t r = lo; r < hi; r += SM_SHORT_ROWS) {
    int64_t m = hi - r < SM_SHORT_ROWS ? hi - r : SM_SHORT_ROWS;
    SM_FN(row_bases)(base, r, m, n, inner);
    for (int64_t k = 0; k < m; k++)
      for (int64_t j = 0; j < n; j++) t[j * SM_SHORT_ROWS + k] = x[base[k] + j * inner];
    SM_FN(cols_max_expsum)(t, SM_SHORT_ROWS, n, m, mx, s, bad, log_form ? NULL : t);
    if (log_form) {
      for (int64_t k = 0; k < m; k++) f[k] = mx[k] + SM_LOG_SUM(s[k]); /* t holds x: x - the log-sum-exp */
      for (int64_t j = 0; j < n; j++)
        for (int64_t k = 0; k < m; k++) t[j * SM_SHORT_ROWS + k] -= f[k];
    } else {
      for (int64_t k = 0; k < m; k++) f[k] = (SM_T)(1.0 / s[k]);
      for (int64_t j = 0; j < n; j++)
        for (int64_t k = 0; k < m; k++) t[j * SM_SHORT_ROWS + k] *= f[k];
    }
    for (int64_t k = 0; k < m; k++)
      for (int64_t j = 0; j < n; j++) y[base[k] + j * inner] = t[j * SM_SHORT_ROWS + k];
  }
}

/* Backward of the rows softmax_fwd_gathered computes, gathered the same way (y, g) */
__attribute__((always_inline)) static inline void SM_FN(softmax_bwd_gathered)(const SM_T *py, const SM_T *pg, SM_T *pr,
                                                                              int64_t n, int64_t inner, int log_form,
                                                                              int64_t lo, int64_t hi) {
  SM_T ty[SM_SHORT * SM_SHORT_ROWS], tg[SM_SHORT * SM_SHORT_ROWS], sf[SM_SHORT_ROWS];
  int64_t base[SM_SHORT_ROWS];
  for (int64_t r = lo; r < hi; r += SM_SHORT_ROWS) {
    int64_t m = hi - r < SM_SHORT_ROWS ? hi - r : SM_SHORT_ROWS;
    SM_FN(row_bases)(base, r, m, n, inner);
    for (int64_t k = 0; k < m; k++)
      for (int64_t j = 0; j < n; j++) {
        ty[j * SM_SHORT_ROWS + k] = py[base[k] + j * inner];
        tg[j * SM_SHORT_ROWS + k] = pg[base[k] + j * inner];
      }
    SM_FN(cols_dot)(tg, log_form ? NULL : ty, SM_SHORT_ROWS, n, m, sf);
    if (log_form)
      for (int64_t j = 0; j < n; j++)
        for (int64_t k = 0; k < m; k++) tg[j * SM_SHORT_ROWS + k] -= SM_EXP(ty[j * SM_SHORT_ROWS + k]) * sf[k];
    else
      for (int64_t j = 0; j < n; j++)
        for (int64_t k = 0; k < m; k++)
          tg[j * SM_SHORT_ROWS + k] = ty[j * SM_SHORT_ROWS + k] * (tg[j * SM_SHORT_ROWS + k] - sf[k]);
    for (int64_t k = 0; k < m; k++)
      for (int64_t j = 0; j < n; j++) pr[base[k] + j * inner] = tg[j * SM_SHORT_ROWS + k];
  }
}

/* Rows [lo, hi) of the forward pass. A NaN in a row makes the whole row NaN (row_max returns NaN); a row
 * of -inf is NaN too, and -inf entries among finite ones get exact zeros, all as in PyTorch. */
LT_VECTOR_FN static void SM_FN(softmax_fwd)(const SM_T *x, SM_T *y, int64_t n, int64_t inner, int log_form, int64_t lo,
                                            int64_t hi) {
  if (inner == 1 && n <= SM_SHORT) {
    SM_FN(softmax_fwd_short)(x, y, n, log_form, lo, hi);
    return;
  }
  if (inner > 1 && inner < SM_SMALL_INNER && n <= SM_SHORT) {
    SM_FN(softmax_fwd_gathered)(x, y, n, inner, log_form, lo, hi);
    return;
  }
  if (inner == 1) {
    /* SM_PHASE_ROWS rows at a time, each step for all of them before the next: a row alone is a chain (max, its
     * lanes folded, the exps' sum folded, a division, the scaling) that leaves the core waiting; the rows' chains
     * side by side overlap */
    for (int64_t r0 = lo; r0 < hi; r0 += SM_PHASE_ROWS) {
      int64_t m = hi - r0 < SM_PHASE_ROWS ? hi - r0 : SM_PHASE_ROWS;
      const SM_T *x0 = x + r0 * n;
      SM_T *y0 = y + r0 * n;
      SM_T mx[SM_PHASE_ROWS];
      double s[SM_PHASE_ROWS];
      for (int64_t k = 0; k < m; k++) mx[k] = SM_FN(row_max)(x0 + k * n, n);
      /* the exps stored (log_softmax overwrites them below), then summed from L1: the sum's vectors are loads,
       * where summing the exps as they were made read 32-byte halves of 64-byte results through the stack */
      for (int64_t k = 0; k < m; k++)
        for (int64_t j = 0; j < n; j++) y0[k * n + j] = SM_EXP(x0[k * n + j] - mx[k]);
      for (int64_t k = 0; k < m; k++)
        s[k] = n <= SM_LONG ? SM_FN(row_dot)(y0 + k * n, NULL, n) : SM_SUM_LONG(y0 + k * n, n);
      SM_T f[SM_PHASE_ROWS]; /* the log-sum-exps (log_softmax) or 1 / sum */
      if (log_form)
        for (int64_t k = 0; k < m; k++) f[k] = mx[k] + SM_LOG_SUM(s[k]);
      else
        for (int64_t k = 0; k < m; k++) f[k] = (SM_T)(1.0 / s[k]);
      for (int64_t k = 0; k < m; k++) {
        const SM_T *px = x0 + k * n;
        SM_T *py = y0 + k * n;
        if (log_form)
          for (int64_t j = 0; j < n; j++) py[j] = px[j] - f[k];
        else
          for (int64_t j = 0; j < n; j++) py[j] *= f[k];
      }
    }
    return;
  }
  SM_T mx[SM_BLOCK];
  double s[SM_BLOCK];
  int32_t bad[SM_BLOCK];
  for (int64_t r = lo; r < hi;) {
    int64_t o = r / inner, k0 = r % inner, m = inner - k0;
    if (m > hi - r) m = hi - r;
    if (m > SM_BLOCK) m = SM_BLOCK;
    const SM_T *px = x + o * n * inner + k0;
    SM_T *py = y + o * n * inner + k0;
    /* softmax: each exp computed once, stored in the output and scaled there (the block stays in L1) */
    SM_FN(cols_max_expsum)(px, inner, n, m, mx, s, bad, log_form ? NULL : py);
    if (log_form) {
      for (int64_t k = 0; k < m; k++) mx[k] += SM_LOG_SUM(s[k]); /* now the log-sum-exp */
      for (int64_t j = 0; j < n; j++)
        for (int64_t k = 0; k < m; k++) py[j * inner + k] = px[j * inner + k] - mx[k];
    } else {
      SM_T inv[SM_BLOCK];
      for (int64_t k = 0; k < m; k++) inv[k] = (SM_T)(1.0 / s[k]);
      for (int64_t j = 0; j < n; j++)
        for (int64_t k = 0; k < m; k++) py[j * inner + k] *= inv[k];
    }
    r += m;
  }
}

/* Rows [lo, hi) of the backward pass, from the saved output y: softmax dx = y * (g - sum(g*y)), log_softmax
 * dx = g - exp(y) * sum(g). */
LT_VECTOR_FN static void SM_FN(softmax_bwd)(const SM_T *py, const SM_T *pg, SM_T *pr, int64_t n, int64_t inner,
                                            int log_form, int64_t lo, int64_t hi) {
  if (inner > 1 && inner < SM_SMALL_INNER_BWD && n <= SM_SHORT) {
    SM_FN(softmax_bwd_gathered)(py, pg, pr, n, inner, log_form, lo, hi);
    return;
  }
  if (inner == 1) {
    for (int64_t r = lo; r < hi; r++) {
      const SM_T *y = py + r * n, *g = pg + r * n;
      SM_T *d = pr + r * n;
      if (log_form) {
        SM_T s = (SM_T)(n <= SM_LONG ? SM_FN(row_dot)(g, NULL, n) : SM_SUM_LONG(g, n));
        for (int64_t j = 0; j < n; j++) d[j] = g[j] - SM_EXP(y[j]) * s;
      } else {
        SM_T s = (SM_T)(n <= SM_LONG ? SM_FN(row_dot)(g, y, n) : SM_DOT_LONG(g, y, n));
        for (int64_t j = 0; j < n; j++) d[j] = y[j] * (g[j] - s);
      }
    }
    return;
  }
  SM_T sf[SM_BLOCK];
  for (int64_t r = lo; r < hi;) {
    int64_t o = r / inner, k0 = r % inner, m = inner - k0;
    if (m > hi - r) m = hi - r;
    if (m > SM_BLOCK) m = SM_BLOCK;
    int64_t base = o * n * inner + k0;
    const SM_T *y = py + base, *g = pg + base;
    SM_T *d = pr + base;
    SM_FN(cols_dot)(g, log_form ? NULL : y, inner, n, m, sf);
    if (log_form) {
      for (int64_t j = 0; j < n; j++)
        for (int64_t k = 0; k < m; k++) d[j * inner + k] = g[j * inner + k] - SM_EXP(y[j * inner + k]) * sf[k];
    } else {
      for (int64_t j = 0; j < n; j++)
        for (int64_t k = 0; k < m; k++) d[j * inner + k] = y[j * inner + k] * (g[j * inner + k] - sf[k]);
    }
    r += m;
  }
}

#undef SM_VL
#undef SM_COL_CHUNK
#undef SM_T
#undef SM_FN
#undef SM_EXP
#undef SM_LOG_SUM
#undef SM_LONG
#undef SM_SUM_LONG
#undef SM_DOT_LONG
