/* transpose.c — lt_transpose.h: a float32 matrix transposed into another, or added to it, with a Linear layer's
 * bias and ReLU on the way (lt_transpose_ep_f32). */
#include "lt_transpose.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define TRANSPOSE_AVX 1
#endif

/* What a transposed element goes through before it is stored: dst's element added (add), then the bias of its
 * source row (bias: NULL for none), then the ReLU (y < 0 ? 0 : y: NaN and -0 kept, as lt_relu_inplace_f32). */
typedef struct epilogue {
  int add, relu;
  const float *bias;
} epilogue;

/* dst[c * ldd + r] = src[r * lds + c] through the epilogue, for rows r0 .. r1 and columns c0 .. cols, element by
 * element */
static void transpose_rest(const float *src, int64_t lds, int64_t cols, float *dst, int64_t ldd, const epilogue *e,
                           int64_t r0, int64_t r1, int64_t c0) {
  for (int64_t r = r0; r < r1; r++)
    for (int64_t c = c0; c < cols; c++) {
      float v = src[r * lds + c];
      if (e->add) v += dst[c * ldd + r];
      if (e->bias) v += e->bias[r];
      if (e->relu) v = v < 0.0f ? 0.0f : v;
      dst[c * ldd + r] = v;
    }
}

#ifdef TRANSPOSE_AVX
/* in 8 x 8 blocks of eight 8-float rows: two rounds of unpacks and shuffles and one of 128-bit lane swaps (element
 * by element, the transposes around the direct convolution's GEMMs took 8% of the weight gradient's time) */
__attribute__((target("avx512f"))) static void transpose_avx(const float *src, int64_t lds, int64_t rows, int64_t cols,
                                                             float *dst, int64_t ldd, const epilogue *e) {
  const __m256 zero = _mm256_setzero_ps();
  int64_t r0 = 0;
  for (; r0 + 8 <= rows; r0 += 8) {
    /* the bias of source rows r0 .. r0 + 7: the columns of each destination row this block writes */
    const __m256 bias = e->bias ? _mm256_loadu_ps(e->bias + r0) : zero;
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
        if (e->add) v[j] = _mm256_add_ps(v[j], _mm256_loadu_ps(d));
        if (e->bias) v[j] = _mm256_add_ps(v[j], bias);
        if (e->relu) /* y < 0 ? 0 : y (an ordered compare: NaN is not below 0 and stays) */
          v[j] = _mm256_blendv_ps(v[j], zero, _mm256_cmp_ps(v[j], zero, _CMP_LT_OQ));
        _mm256_storeu_ps(d, v[j]);
      }
    }
    transpose_rest(src, lds, cols, dst, ldd, e, r0, r0 + 8, c0);
  }
  transpose_rest(src, lds, cols, dst, ldd, e, r0, rows, 0);
}
#endif

static void transpose(const float *src, int64_t lds, int64_t rows, int64_t cols, float *dst, int64_t ldd,
                      const epilogue *e) {
#ifdef TRANSPOSE_AVX
  if (__builtin_cpu_supports("avx512f")) {
    transpose_avx(src, lds, rows, cols, dst, ldd, e);
    return;
  }
#endif
  transpose_rest(src, lds, cols, dst, ldd, e, 0, rows, 0);
}

void lt_transpose_f32(const float *src, int64_t lds, int64_t rows, int64_t cols, float *dst, int64_t ldd, int add) {
  transpose(src, lds, rows, cols, dst, ldd, &(epilogue){ .add = add });
}

void lt_transpose_ep_f32(const float *src, int64_t lds, int64_t rows, int64_t cols, float *dst, int64_t ldd, int add,
                         const float *bias, int relu) {
  transpose(src, lds, rows, cols, dst, ldd, &(epilogue){ .add = add, .relu = relu, .bias = bias });
}
