/* transpose.c — lt_transpose.h: a float32 matrix transposed into another, or added to it. */
#include "lt_transpose.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define TRANSPOSE_AVX 1
#endif

/* dst[c * ldd + r] = src[r * lds + c] (add: +=) for rows r0 .. r1 and columns c0 .. cols, element by element */
static void transpose_rest(const float *src, int64_t lds, int64_t cols, float *dst, int64_t ldd, int add, int64_t r0,
                           int64_t r1, int64_t c0) {
  for (int64_t r = r0; r < r1; r++)
    for (int64_t c = c0; c < cols; c++) {
      if (add) dst[c * ldd + r] += src[r * lds + c];
      else dst[c * ldd + r] = src[r * lds + c];
    }
}

#ifdef TRANSPOSE_AVX
/* in 8 x 8 blocks of eight 8-float rows: two rounds of unpacks and shuffles and one of 128-bit lane swaps (element
 * by element, the transposes around the direct convolution's GEMMs took 8% of the weight gradient's time) */
__attribute__((target("avx512f"))) static void transpose_avx(const float *src, int64_t lds, int64_t rows, int64_t cols,
                                                             float *dst, int64_t ldd, int add) {
  int64_t r0 = 0;
  for (; r0 + 8 <= rows; r0 += 8) {
    int64_t c0 = 0;
    for (; c0 + 8 <= cols; c0 += 8) {
      __m256 r[8], t[8], u[8];
      for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + (r0 + i) * lds + c0);
      for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
      }
      for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
      }
      /* column c0 + j: rows 0-3 from u[j % 4], rows 4-7 from u[4 + j % 4]; the low lanes for j < 4, the high ones
       * after (two loops: the lane selector must be a constant even where the compiler does not unroll, at -O0) */
      __m256 v[8];
      for (int j = 0; j < 4; j++) v[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
      for (int j = 0; j < 4; j++) v[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
      for (int j = 0; j < 8; j++) {
        float *d = dst + (c0 + j) * ldd + r0;
        if (add) v[j] = _mm256_add_ps(v[j], _mm256_loadu_ps(d));
        _mm256_storeu_ps(d, v[j]);
      }
    }
    transpose_rest(src, lds, cols, dst, ldd, add, r0, r0 + 8, c0);
  }
  transpose_rest(src, lds, cols, dst, ldd, add, r0, rows, 0);
}
#endif

void lt_transpose_f32(const float *src, int64_t lds, int64_t rows, int64_t cols, float *dst, int64_t ldd, int add) {
#ifdef TRANSPOSE_AVX
  if (__builtin_cpu_supports("avx512f")) {
    transpose_avx(src, lds, rows, cols, dst, ldd, add);
    return;
  }
#endif
  transpose_rest(src, lds, cols, dst, ldd, add, 0, rows, 0);
}
