/* gemm_small_m.c — lt_gemm_small_m.h: the packed-weight GEMM of the RNN layers' recurrent products, the
 * convolutions' in-place products and the GEMMs lt_blas_sgemm gives it. The tile
 * (compiled for AVX-512F by its target attribute; called only after CPUID said the CPU has it) keeps C[8 x 32]
 * in 16 vectors; for each k it loads B's 32 columns (two vectors) and broadcasts each row's A[i][k] into a fused
 * multiply-add. 16 independent sums cover the FMA units' latency; a packed panel of k = 256 is 32 KB and stays in
 * L1 while the tiles of its rows run. */
#include "lt_gemm_small_m.h"

#include <stdlib.h>
#include <string.h>

#include "lt_pool.h"
#include "lt_transpose.h"

#define NR LT_GEMM_SM_NR
#define MR 8

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define SM_TARGET __attribute__((target("avx512f,fma")))

static inline __mmask16 first_n(int64_t n) {
  return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* C[mr x nc] (+)= A[mr x k] B[k x nc], nc <= NR (the lanes past nc are neither read from C nor written). A's element
 * (i, p) is at ar[i] + p, or + acol[p] when ACOL (a constant after inlining); B's row p at b + p * ldb; C's row i at
 * cr[i]. */
SM_TARGET __attribute__((always_inline)) static inline void tile(int mr, int64_t k, const float *const *ar,
                                                                 const int64_t *acol, const float *b, int64_t ldb,
                                                                 float *const *cr, int64_t nc, int accumulate,
                                                                 const int ACOL) {
  __m512 acc0[MR], acc1[MR];
  const float *a[MR];
  for (int i = 0; i < mr; i++) acc0[i] = acc1[i] = _mm512_setzero_ps(), a[i] = ar[i];
  __mmask16 m0 = first_n(nc), m1 = first_n(nc - 16);
  const int full = nc == NR; /* whole panels load without masks (the masks spilled: 96 against 114 GFLOP/s) */
  for (int64_t p = 0; p < k; p++) {
    const float *bp = b + p * ldb;
    const int64_t col = ACOL ? acol[p] : p;
    __m512 b0, b1;
    if (full) b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
    else b0 = _mm512_maskz_loadu_ps(m0, bp), b1 = _mm512_maskz_loadu_ps(m1, bp + 16);
    for (int i = 0; i < mr; i++) {
      __m512 ai = _mm512_set1_ps(a[i][col]);
      acc0[i] = _mm512_fmadd_ps(ai, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(ai, b1, acc1[i]);
    }
  }
  for (int i = 0; i < mr; i++) {
    float *ci = cr[i];
    if (accumulate) {
      acc0[i] = _mm512_add_ps(acc0[i], _mm512_maskz_loadu_ps(m0, ci));
      acc1[i] = _mm512_add_ps(acc1[i], _mm512_maskz_loadu_ps(m1, ci + 16));
    }
    _mm512_mask_storeu_ps(ci, m0, acc0[i]);
    _mm512_mask_storeu_ps(ci + 16, m1, acc1[i]);
  }
}

/* every row block of one column panel: the panel stays in L1 across them. A's row i at a + aoff[i] (aoff NULL:
 * a + i * lda), C's at c + coff[i] (coff NULL: c + i * ldc); A's columns and B as in tile. */
SM_TARGET __attribute__((always_inline)) static inline void panel_g(const lt_gemm_rows *g, const float *b, float *c,
                                                                    int64_t nc, const int ACOL) {
  const int64_t m = g->m, k = g->k, lda = g->lda, ldb = g->ldb, ldc = g->ldc, *aoff = g->aoff, *acol = g->acol;
  const int64_t *coff = g->coff;
  const float *a = g->a;
  const int accumulate = g->accumulate;
  for (int64_t i = 0; i < m; i += MR) {
    const float *ar[MR];
    float *cr[MR];
    const int mr = m - i < MR ? (int)(m - i) : MR;
    for (int r = 0; r < mr; r++) {
      ar[r] = aoff ? a + aoff[i + r] : a + (i + r) * lda;
      cr[r] = coff ? c + coff[i + r] : c + (i + r) * ldc;
    }
    switch (mr) { /* constant row counts, so the sums stay in registers */
      case 8: tile(8, k, ar, acol, b, ldb, cr, nc, accumulate, ACOL); break;
      case 7: tile(7, k, ar, acol, b, ldb, cr, nc, accumulate, ACOL); break;
      case 6: tile(6, k, ar, acol, b, ldb, cr, nc, accumulate, ACOL); break;
      case 5: tile(5, k, ar, acol, b, ldb, cr, nc, accumulate, ACOL); break;
      case 4: tile(4, k, ar, acol, b, ldb, cr, nc, accumulate, ACOL); break;
      case 3: tile(3, k, ar, acol, b, ldb, cr, nc, accumulate, ACOL); break;
      case 2: tile(2, k, ar, acol, b, ldb, cr, nc, accumulate, ACOL); break;
      default: tile(1, k, ar, acol, b, ldb, cr, nc, accumulate, ACOL); break;
    }
  }
}

SM_TARGET static void panel(const lt_gemm_rows *g, const float *b, float *c, int64_t nc) { panel_g(g, b, c, nc, 0); }

SM_TARGET static void panel_acol(const lt_gemm_rows *g, const float *b, float *c, int64_t nc) {
  panel_g(g, b, c, nc, 1);
}

int lt_gemm_small_m_ok(void) {
  static int ok = -1;
  int v = __atomic_load_n(&ok, __ATOMIC_RELAXED);
  if (v < 0) {
    __builtin_cpu_init();
    v = __builtin_cpu_supports("avx512f") != 0;
    __atomic_store_n(&ok, v, __ATOMIC_RELAXED);
  }
  return v;
}
#else
int lt_gemm_small_m_ok(void) { return 0; }
static void panel(const lt_gemm_rows *g, const float *b, float *c, int64_t nc) { (void)g, (void)b, (void)c, (void)nc; }
static void panel_acol(const lt_gemm_rows *g, const float *b, float *c, int64_t nc) {
  (void)g, (void)b, (void)c, (void)nc;
}
#endif

int64_t lt_gemm_small_m_nr(void) { return NR; }

int64_t lt_gemm_small_m_packed_size(int64_t n, int64_t k) { return (n + NR - 1) / NR * NR * k; }

void lt_gemm_small_m_pack_t(const float *w, int64_t n, int64_t k, float *packed) {
  for (int64_t q = 0; q < n; q += NR) {
    float *dst = packed + q * k;
    for (int64_t jj = 0; jj < NR; jj++) {
      const float *src = q + jj < n ? w + (q + jj) * k : NULL;
      for (int64_t p = 0; p < k; p++) dst[p * NR + jj] = src ? src[p] : 0.0f;
    }
  }
}

void lt_gemm_small_m_pack_n(const float *b, int64_t k, int64_t n, float *packed) {
  for (int64_t q = 0; q < n; q += NR) {
    float *dst = packed + q * k;
    int64_t nc = n - q < NR ? n - q : NR;
    for (int64_t p = 0; p < k; p++) {
      memcpy(dst + p * NR, b + p * n + q, sizeof(float) * (size_t)nc);
      for (int64_t jj = nc; jj < NR; jj++) dst[p * NR + jj] = 0.0f;
    }
  }
}

typedef struct sm_job {
  int64_t m, n, k, lda, ldb, panel_stride, ldc;
  const float *a, *b;
  float *c;
  int accumulate;
} sm_job;

static void sm_part(void *arg, int i, int nparts) {
  const sm_job *j = arg;
  int64_t panels = (j->n + NR - 1) / NR, lo, hi;
  lt_pool_range(panels, i, nparts, 1, &lo, &hi);
  for (int64_t q = lo; q < hi; q++) {
    int64_t nc = j->n - q * NR < NR ? j->n - q * NR : NR;
    const lt_gemm_rows g = {
      .m = j->m, .k = j->k, .a = j->a, .lda = j->lda, .ldb = j->ldb, .ldc = j->ldc, .accumulate = j->accumulate
    };
    panel(&g, j->b + q * j->panel_stride, j->c + q * NR, nc);
  }
}

void lt_gemm_small_m(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                     int64_t panel_stride, float *c, int64_t ldc, int accumulate, int threads) {
  if (m <= 0 || n <= 0) return;
  sm_job j = { m, n, k, lda, ldb, panel_stride, ldc, a, b, c, accumulate };
  int64_t panels = (n + NR - 1) / NR;
  int parts = threads < panels ? threads : (int)panels;
  if (parts > 1) lt_pool_run(sm_part, &j, parts);
  else sm_part(&j, 0, 1);
}

/* Blocks of rows and of k: a panel's block of B (KB rows of 32 floats: 32 KB) stays in L1 while the tiles of a
 * block of rows run over it, the sums of C carried from one block of k to the next through C (L1/L2). Without
 * them a convolution's k of 1024-4096 taps streamed B from L2 for every tile. A packed B (bpanel, ldb = 32) keeps
 * the block in consecutive lines: rows 1 KB apart (O = 256 in place) fell into 8 of L1's 64 sets. */
#define RB 128
#define KB 256

void lt_gemm_small_m_rows(const lt_gemm_rows *g) {
  for (int64_t r0 = 0; r0 < g->m; r0 += RB)
    for (int64_t q = 0; q < g->n; q += NR) {
      const int64_t nc = g->n - q < NR ? g->n - q : NR;
      int64_t k0 = 0;
      do { /* at least once: with k = 0 the rows of C are zeros (or kept, when accumulating) */
        lt_gemm_rows s = *g;
        s.m = g->m - r0 < RB ? g->m - r0 : RB;
        s.k = g->k - k0 < KB ? g->k - k0 : KB;
        if (s.k < 0) s.k = 0;
        if (g->aoff) s.aoff = g->aoff + r0;
        else s.a = g->a + r0 * g->lda;
        if (g->acol) s.acol = g->acol + k0;
        else s.a += k0;
        if (g->coff) s.coff = g->coff + r0;
        else s.c = g->c + r0 * g->ldc;
        s.accumulate = g->accumulate || k0 > 0;
        const float *bq = g->b + k0 * g->ldb + q / NR * (g->bpanel ? g->bpanel : NR);
        if (s.acol) panel_acol(&s, bq, s.c + q, nc);
        else panel(&s, bq, s.c + q, nc);
      } while ((k0 += KB) < g->k);
    }
}

/* ---- the tile as a general GEMM, B read in place (lt_gemm_small_m_gemm) ------------------------------------ */

typedef struct gemm_job {
  lt_gemm_rows g; /* the whole product */
  int64_t panels;
} gemm_job;

/* C's column panels [lo, hi) of the product */
static void gemm_panels(void *arg, int64_t lo, int64_t hi) {
  const gemm_job *j = arg;
  lt_gemm_rows s = j->g;
  int64_t c0 = lo * NR, c1 = hi * NR < j->g.n ? hi * NR : j->g.n;
  s.n = c1 - c0;
  s.b = j->g.b + c0;
  s.c = j->g.c + c0;
  lt_gemm_small_m_rows(&s);
}

int lt_gemm_small_m_gemm(int transa, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                         int64_t ldb, float *c, int64_t ldc, int accumulate, int threads) {
  if (m <= 0 || n <= 0) return 1;
  int64_t *offs = NULL;
  if (transa) { /* op(A)'s element (i, p) is A's (p, i): rows i apart by one float, columns by lda */
    offs = malloc(sizeof(int64_t) * (size_t)(m + k));
    if (!offs) return 0;
    for (int64_t i = 0; i < m; i++) offs[i] = i;
    for (int64_t p = 0; p < k; p++) offs[m + p] = p * lda;
  }
  gemm_job j = { .g = { .m = m,
                        .n = n,
                        .k = k,
                        .a = a,
                        .lda = lda,
                        .aoff = offs,
                        .acol = offs ? offs + m : NULL,
                        .b = b,
                        .ldb = ldb,
                        .c = c,
                        .ldc = ldc,
                        .accumulate = accumulate },
                 .panels = (n + NR - 1) / NR };
  lt_pool_for(threads < j.panels ? threads : (int)j.panels, j.panels, 1, gemm_panels, &j);
  free(offs);
  return 1;
}

/* ---- C = A B^T as C^T = B A^T (lt_gemm_small_m_gemm_nt) ---------------------------------------------------- */

typedef struct nt_job {
  int64_t m, n, k, lda, ldb, ldc;
  const float *a, *b;
  float *c;
  int accumulate, relu;
  const float *bias; /* [n] or NULL: added to C's columns as they are written, before the ReLU */
  float *ap;         /* A^T in the tile's panels: panel q, row p holds A[q*NR .. q*NR + 31][p] */
  float *t;          /* C^T [n x m] */
} nt_job;

/* panels [lo, hi) of A^T (lanes past m are never loaded: the tile masks a partial panel) */
static void nt_pack(void *arg, int64_t lo, int64_t hi) {
  const nt_job *j = arg;
  for (int64_t q = lo; q < hi; q++) {
    int64_t rows = j->m - q * NR < NR ? j->m - q * NR : NR;
    lt_transpose_f32(j->a + q * NR * j->lda, j->lda, rows, j->k, j->ap + q * NR * j->k, NR, 0);
  }
}

/* rows [lo, hi) of C^T = B A^T, then into C's columns [lo, hi) with the bias and the ReLU (while they are in cache) */
static void nt_rows(void *arg, int64_t lo, int64_t hi) {
  const nt_job *j = arg;
  const lt_gemm_rows g = { .m = hi - lo,
                           .n = j->m,
                           .k = j->k,
                           .a = j->b + lo * j->ldb,
                           .lda = j->ldb,
                           .b = j->ap,
                           .ldb = NR,
                           .bpanel = NR * j->k,
                           .c = j->t + lo * j->m,
                           .ldc = j->m };
  lt_gemm_small_m_rows(&g);
  lt_transpose_ep_f32(j->t + lo * j->m, j->m, hi - lo, j->m, j->c + lo, j->ldc, j->accumulate,
                      j->bias ? j->bias + lo : NULL, j->relu);
}

int lt_gemm_small_m_gemm_nt(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                            float *c, int64_t ldc, int accumulate, const float *bias, int relu, int threads) {
  if (m <= 0 || n <= 0) return 1;
  int64_t panels = (m + NR - 1) / NR;
  float *ap = malloc(sizeof(float) * (size_t)(panels * NR * k + n * m));
  if (!ap) return 0;
  nt_job j = { m, n, k, lda, ldb, ldc, a, b, c, accumulate, relu, bias, ap, ap + panels * NR * k };
  lt_pool_for(threads < panels ? threads : (int)panels, panels, 1, nt_pack, &j);
  /* C's columns by whole 64-byte lines per part: no line of C written by two threads */
  lt_pool_for(threads, n, 16, nt_rows, &j);
  free(ap);
  return 1;
}
