/* gemm_bf16_kernel.c — the AVX512-BF16 parts of the bf16 GEMM (lt_gemm_bf16.h): packing with rounding to
 * bf16 and the 6 x 64 register tile. Every function here is compiled for AVX512-BF16 by its target attribute
 * (the rest of the build stays generic); gemm_bf16.c calls them only after CPUID said the CPU has it.
 *
 * The tile keeps C[6 x 64] in 24 fp32 vectors; for each pair of k it loads B's 64 columns (4 vectors of 16 words,
 * a word = the bf16 of k and k + 1), broadcasts each row's word of A and adds both products into every lane with
 * vdpbf16ps. Packing rounds with vcvtneps2bf16 (round-to-nearest-even, NaN stays NaN) and lays the pairs out as
 * the tile reads them: A row by row (a row's pairs are adjacent), B pair by pair (a pair's columns are adjacent).
 * Where the source runs the other way (A transposed, B not transposed... see each) 16 x 16 blocks of words are
 * transposed in registers. */
#include "lt_gemm_bf16.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

/* 16 fp32 -> 16 bf16 in the low halves of 16 words */
BF16_TARGET static inline __m512i low_words(__m512 x) { return _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x)); }

/* words of (even, odd) k: lane l = bf16(odd[l]) << 16 | bf16(even[l]) */
BF16_TARGET static inline __m512i pair_words(__m512 even, __m512 odd) {
  return _mm512_or_si512(low_words(even), _mm512_slli_epi32(low_words(odd), 16));
}

/* 32 consecutive fp32 (k, k + 1, ...) -> 16 pair words */
BF16_TARGET static inline __m512i run_words(__m512 lo, __m512 hi) { return (__m512i)_mm512_cvtne2ps_pbh(hi, lo); }

static inline __mmask16 first_n(int n) { return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

/* r[i] (row i of a 16 x 16 block of 32-bit words) -> r[i] = column i */
BF16_TARGET static void transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  /* r[4g + c] now holds element c of each row 4g..4g+3, per 128-bit lane */
  for (int h = 0; h < 2; h++)
    for (int c = 0; c < 4; c++) {
      t[8 * h + c] = _mm512_shuffle_i32x4(r[8 * h + c], r[8 * h + 4 + c], 0x88);
      t[8 * h + 4 + c] = _mm512_shuffle_i32x4(r[8 * h + c], r[8 * h + 4 + c], 0xdd);
    }
  for (int c = 0; c < 8; c++) {
    r[c] = _mm512_shuffle_i32x4(t[c], t[8 + c], 0x88);
    r[8 + c] = _mm512_shuffle_i32x4(t[c], t[8 + c], 0xdd);
  }
}

BF16_TARGET void lt_bf16_pack_a(int transa, const float *a, int lda, int mc, int kc, uint32_t *ap) {
  const int kp = (kc + 1) / 2;
  if (!transa) { /* a row's k are adjacent: convert runs of 32 */
    for (int i = 0; i < mc; i++) {
      const float *src = a + (size_t)i * lda;
      uint32_t *dst = ap + (size_t)i * kp;
      for (int p0 = 0; p0 < kp; p0 += 16) {
        int k0 = 2 * p0;
        __m512 lo = _mm512_maskz_loadu_ps(first_n(kc - k0), src + k0);
        __m512 hi = _mm512_maskz_loadu_ps(first_n(kc - k0 - 16), src + k0 + 16);
        _mm512_mask_storeu_epi32(dst + p0, first_n(kp - p0), run_words(lo, hi));
      }
    }
    return;
  }
  /* A stored [k x m]: a k's rows are adjacent; 16 rows x 16 pairs at a time, transposed to rows */
  for (int i0 = 0; i0 < mc; i0 += 16) {
    __mmask16 mi = first_n(mc - i0);
    for (int p0 = 0; p0 < kp; p0 += 16) {
      __m512i w[16];
      for (int q = 0; q < 16; q++) {
        int k = 2 * (p0 + q);
        if (k >= kc) {
          w[q] = _mm512_setzero_si512();
          continue;
        }
        __m512 even = _mm512_maskz_loadu_ps(mi, a + (size_t)k * lda + i0);
        __m512 odd = k + 1 < kc ? _mm512_maskz_loadu_ps(mi, a + (size_t)(k + 1) * lda + i0) : _mm512_setzero_ps();
        w[q] = pair_words(even, odd);
      }
      transpose16(w);
      for (int r = 0; r < 16 && i0 + r < mc; r++)
        _mm512_mask_storeu_epi32(ap + (size_t)(i0 + r) * kp + p0, first_n(kp - p0), w[r]);
    }
  }
}

BF16_TARGET void lt_bf16_pack_b(int transb, const float *b, int ldb, int kc, int nc, uint32_t *bp) {
  const int kp = (kc + 1) / 2;
  for (int j0 = 0; j0 < nc; j0 += LT_BF16_NR) {
    uint32_t *panel = bp + (size_t)(j0 / LT_BF16_NR) * kp * LT_BF16_NR;
    if (!transb) { /* a k's columns are adjacent: two rows of k make 16 words per load */
      for (int p = 0; p < kp; p++) {
        const float *even = b + (size_t)(2 * p) * ldb + j0, *odd = even + ldb;
        int has_odd = 2 * p + 1 < kc;
        for (int v = 0; v < 4; v++) {
          __mmask16 m = first_n(nc - j0 - 16 * v);
          __m512 e = _mm512_maskz_loadu_ps(m, even + 16 * v);
          __m512 o = has_odd ? _mm512_maskz_loadu_ps(m, odd + 16 * v) : _mm512_setzero_ps();
          _mm512_storeu_si512(panel + (size_t)p * LT_BF16_NR + 16 * v, pair_words(e, o));
        }
      }
      continue;
    }
    /* B stored [n x k]: a column's k are adjacent; 16 columns x 16 pairs at a time, transposed to pairs */
    for (int v = 0; v < 4; v++) {
      int jj = j0 + 16 * v;
      for (int p0 = 0; p0 < kp; p0 += 16) {
        int k0 = 2 * p0;
        __mmask16 mlo = first_n(kc - k0), mhi = first_n(kc - k0 - 16);
        __m512i w[16];
        for (int r = 0; r < 16; r++) {
          if (jj + r >= nc) {
            w[r] = _mm512_setzero_si512();
            continue;
          }
          const float *src = b + (size_t)(jj + r) * ldb + k0;
          w[r] = run_words(_mm512_maskz_loadu_ps(mlo, src), _mm512_maskz_loadu_ps(mhi, src + 16));
        }
        transpose16(w);
        for (int q = 0; q < 16 && p0 + q < kp; q++)
          _mm512_storeu_si512(panel + (size_t)(p0 + q) * LT_BF16_NR + 16 * v, w[q]);
      }
    }
  }
}

#define BH(x) ((__m512bh)(x))
#define ROW(i)                                           \
  do {                                                   \
    __m512i a_ = _mm512_set1_epi32((int)r##i[p]);        \
    c##i##0 = _mm512_dpbf16_ps(c##i##0, BH(a_), BH(b0)); \
    c##i##1 = _mm512_dpbf16_ps(c##i##1, BH(a_), BH(b1)); \
    c##i##2 = _mm512_dpbf16_ps(c##i##2, BH(a_), BH(b2)); \
    c##i##3 = _mm512_dpbf16_ps(c##i##3, BH(a_), BH(b3)); \
  } while (0)
#define ZERO4(i) __m512 c##i##0 = _mm512_setzero_ps(), c##i##1 = c##i##0, c##i##2 = c##i##0, c##i##3 = c##i##0
#define SAVE4(i)         \
  do {                   \
    acc[i][0] = c##i##0; \
    acc[i][1] = c##i##1; \
    acc[i][2] = c##i##2; \
    acc[i][3] = c##i##3; \
  } while (0)

BF16_TARGET void lt_bf16_tile(int kp, const uint32_t *ap, int mr, const uint32_t *bp, int nr, float alpha, float beta,
                              float *c, int ldc) {
  /* rows past mr read row 0 again (their sums are not stored): no padding needed in the packed A */
  const uint32_t *r0 = ap, *r1 = ap + (size_t)(mr > 1) * kp, *r2 = ap + (size_t)(mr > 2) * 2 * kp,
                 *r3 = ap + (size_t)(mr > 3) * 3 * kp, *r4 = ap + (size_t)(mr > 4) * 4 * kp,
                 *r5 = ap + (size_t)(mr > 5) * 5 * kp;
  ZERO4(0);
  ZERO4(1);
  ZERO4(2);
  ZERO4(3);
  ZERO4(4);
  ZERO4(5);
  for (int p = 0; p < kp; p++) {
    const uint32_t *bq = bp + (size_t)p * LT_BF16_NR;
    __m512i b0 = _mm512_loadu_si512(bq), b1 = _mm512_loadu_si512(bq + 16), b2 = _mm512_loadu_si512(bq + 32),
            b3 = _mm512_loadu_si512(bq + 48);
    ROW(0);
    ROW(1);
    ROW(2);
    ROW(3);
    ROW(4);
    ROW(5);
  }
  __m512 acc[6][4];
  SAVE4(0);
  SAVE4(1);
  SAVE4(2);
  SAVE4(3);
  SAVE4(4);
  SAVE4(5);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int i = 0; i < mr; i++) {
    float *row = c + (size_t)i * ldc;
    for (int v = 0; v < 4; v++) {
      __mmask16 m = first_n(nr - 16 * v);
      if (!m) break;
      __m512 x = _mm512_mul_ps(va, acc[i][v]);
      if (beta != 0.0f) x = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, row + 16 * v), x);
      _mm512_mask_storeu_ps(row + 16 * v, m, x);
    }
  }
}

#else /* not x86-64 GCC/clang: never called (lt_gemm_bf16_supported is 0) */
void lt_bf16_pack_a(int transa, const float *a, int lda, int mc, int kc, uint32_t *ap) {
  (void)transa, (void)a, (void)lda, (void)mc, (void)kc, (void)ap;
}
void lt_bf16_pack_b(int transb, const float *b, int ldb, int kc, int nc, uint32_t *bp) {
  (void)transb, (void)b, (void)ldb, (void)kc, (void)nc, (void)bp;
}
void lt_bf16_tile(int kp, const uint32_t *ap, int mr, const uint32_t *bp, int nr, float alpha, float beta, float *c,
                  int ldc) {
  (void)kp, (void)ap, (void)mr, (void)bp, (void)nr, (void)alpha, (void)beta, (void)c, (void)ldc;
}
#endif
