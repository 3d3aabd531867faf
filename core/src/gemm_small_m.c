/* gemm_small_m.c — lt_gemm_small_m.h: the packed-weight GEMM of the RNN layers' recurrent products. The tile
 * (compiled for AVX-512F by its target attribute; called only after CPUID said the CPU has it) keeps C[8 x 32]
 * in 16 vectors; for each k it loads B's 32 columns (two vectors) and broadcasts each row's A[i][k] into a fused
 * multiply-add. 16 independent sums cover the FMA units' latency; a packed panel of k = 256 is 32 KB and stays in
 * L1 while the tiles of its rows run. */
#include "lt_gemm_small_m.h"

#include <string.h>

#include "lt_pool.h"

#define NR LT_GEMM_SM_NR
#define MR 8

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define SM_TARGET __attribute__((target("avx512f,fma")))

static inline __mmask16 first_n(int64_t n) {
  return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* C[mr x nc] (+)= A[mr x k] B[k x nc], nc <= NR (the lanes past nc are neither read from C nor written) */
SM_TARGET __attribute__((always_inline)) static inline void tile(int mr, int64_t k, const float *a, int64_t lda,
                                                                 const float *b, int64_t ldb, float *c, int64_t ldc,
                                                                 int64_t nc, int accumulate) {
  __m512 acc0[MR], acc1[MR];
  for (int i = 0; i < mr; i++) acc0[i] = acc1[i] = _mm512_setzero_ps();
  __mmask16 m0 = first_n(nc), m1 = first_n(nc - 16);
  for (int64_t p = 0; p < k; p++) {
    __m512 b0 = _mm512_maskz_loadu_ps(m0, b + p * ldb), b1 = _mm512_maskz_loadu_ps(m1, b + p * ldb + 16);
    for (int i = 0; i < mr; i++) {
      __m512 ai = _mm512_set1_ps(a[i * lda + p]);
      acc0[i] = _mm512_fmadd_ps(ai, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(ai, b1, acc1[i]);
    }
  }
  for (int i = 0; i < mr; i++) {
    float *ci = c + i * ldc;
    if (accumulate) {
      acc0[i] = _mm512_add_ps(acc0[i], _mm512_maskz_loadu_ps(m0, ci));
      acc1[i] = _mm512_add_ps(acc1[i], _mm512_maskz_loadu_ps(m1, ci + 16));
    }
    _mm512_mask_storeu_ps(ci, m0, acc0[i]);
    _mm512_mask_storeu_ps(ci + 16, m1, acc1[i]);
  }
}

/* every row block of one column panel: the panel stays in L1 across them */
SM_TARGET static void panel(int64_t m, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                            int64_t ldc, int64_t nc, int accumulate) {
  int64_t i = 0;
  for (; i + MR <= m; i += MR) tile(MR, k, a + i * lda, lda, b, ldb, c + i * ldc, ldc, nc, accumulate);
  switch (m - i) { /* the rest of the rows: constant row counts, so the sums stay in registers */
    case 7: tile(7, k, a + i * lda, lda, b, ldb, c + i * ldc, ldc, nc, accumulate); break;
    case 6: tile(6, k, a + i * lda, lda, b, ldb, c + i * ldc, ldc, nc, accumulate); break;
    case 5: tile(5, k, a + i * lda, lda, b, ldb, c + i * ldc, ldc, nc, accumulate); break;
    case 4: tile(4, k, a + i * lda, lda, b, ldb, c + i * ldc, ldc, nc, accumulate); break;
    case 3: tile(3, k, a + i * lda, lda, b, ldb, c + i * ldc, ldc, nc, accumulate); break;
    case 2: tile(2, k, a + i * lda, lda, b, ldb, c + i * ldc, ldc, nc, accumulate); break;
    case 1: tile(1, k, a + i * lda, lda, b, ldb, c + i * ldc, ldc, nc, accumulate); break;
    default: break;
  }
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
static void panel(int64_t m, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc,
                  int64_t nc, int accumulate) {
  (void)m, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)c, (void)ldc, (void)nc, (void)accumulate;
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
    panel(j->m, j->k, j->a, j->lda, j->b + q * j->panel_stride, j->ldb, j->c + q * NR, j->ldc, nc, j->accumulate);
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
