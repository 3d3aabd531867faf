/*
 * lt_simd.h — what makes elementwise loops fast without giving up portability.
 *
 * LT_VECTOR_FN compiles a function three times (baseline x86-64, AVX2+FMA, AVX-512) and picks the
 * best at load time (GCC target_clones), so the plain C loops inside vectorise to the CPU at hand.
 * lt_expf is a branch-free exp (Cephes-style range reduction + degree-6 polynomial, < 2 ulp on
 * [-87, 88]) that vectorises, where libm's expf does not. Row reductions (lt_sum_f32, lt_max_f32,
 * lt_dot_f32) keep 16 lanes so they vectorise too, in a fixed order: a row's result does not depend on
 * where the row sits or which thread computes it.
 */
#ifndef LT_SIMD_H
#define LT_SIMD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* (not under ThreadSanitizer: the clones' load-time resolvers run before its runtime starts, and crash) */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(LT_NO_CLONES) && \
    !defined(__SANITIZE_THREAD__)
#define LT_VECTOR_FN __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define LT_VECTOR_FN
#endif

__attribute__((always_inline)) static inline float lt_expf(float x0) {
  float x = x0 < -87.3365447504019f ? -87.3365447504019f : x0; /* ternaries vectorise; fmaxf does not */
  x = x > 88.7228391116729996f ? 88.7228391116729996f : x;     /* ln(FLT_MAX); a NaN passes both */
  /* exp(x) = 2^n * exp(r), n = floor(x / ln2 + 1/2), r = x - n ln2 */
  /* explicit fmaf (see lt_erff below): -std=c11 turns contraction off, and fmaf rounds alike on every CPU */
  float n = __builtin_floorf(__builtin_fmaf(x, 1.44269504088896341f, 0.5f));
  float r = __builtin_fmaf(n, 2.12194440e-4f, __builtin_fmaf(n, -0.693359375f, x));
  float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = __builtin_fmaf(p, r, 1.3981999507e-3f);
  p = __builtin_fmaf(p, r, 8.3334519073e-3f);
  p = __builtin_fmaf(p, r, 4.1665795894e-2f);
  p = __builtin_fmaf(p, r, 1.6666665459e-1f);
  p = __builtin_fmaf(p, r, 5.0000001201e-1f);
  p = __builtin_fmaf(p, r2, r + 1.0f);
  /* 2^n without converting n to an int, which is undefined for a NaN (UBSan's float-cast-overflow): n plus
   * 1.5 * 2^23 holds n in its low mantissa bits, read as unsigned (for a NaN they are garbage, but p is NaN then
   * and so is the result). n runs from -126 to 128 and a float's exponent from -126 to 127, so 2^n is two
   * factors 2^(a - 63) 2^(b - 64) with a + b = n + 127 (one factor meant clamping x at 88.38: exp(88.5) came out
   * 12% low). Both products are exact but the last, so the result is the same as p * 2^n rounded once. */
  union {
    float f;
    uint32_t u;
  } nb = { .f = n + 12582912.0f };
  uint32_t e = nb.u - 0x4B400000u + 127u, a = e >> 1, b = e - a;
  union {
    uint32_t u;
    float f;
  } s1 = { .u = (a + 64u) << 23 }, s2 = { .u = (b + 63u) << 23 };
  float y = p * s1.f * s2.f;
  /* Out of range: exp(-inf) = 0 (a softmax over a -inf mask gives exact zeros, as PyTorch's), results below
   * FLT_MIN are flushed as lutra's compute threads flush denormals, and overflow is inf. NaN stays NaN. */
  y = x0 < -87.3365447504019f ? 0.0f : y;
  return x0 > 88.7228391116729996f ? __builtin_inff() : y;
}

/* erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), the formula PyTorch's vectorised CPU erf uses, so GELU
 * matches it; branch-free, so it vectorises where libm's erff does not. The steps are explicit fmaf: lutra builds
 * with -std=c11, which turns off FMA contraction, and fmaf rounds the same on every CPU (a hardware FMA, or
 * libm's on a CPU without one), so results stay bitwise the same across the clones of LT_VECTOR_FN. */
__attribute__((always_inline)) static inline float lt_erff(float x) {
  float ax = __builtin_fabsf(x);
  float t = 1.0f / __builtin_fmaf(0.3275911f, ax, 1.0f);
  float r = __builtin_fmaf(
      __builtin_fmaf(__builtin_fmaf(__builtin_fmaf(1.061405429f, t, -1.453152027f), t, 1.421413741f), t, -0.284496736f),
      t, 0.254829592f);
  float y = __builtin_fmaf(-r * t, lt_expf(-ax * ax), 1.0f);
  return __builtin_copysignf(y, x);
}

__attribute__((always_inline)) static inline float lt_sigmoidf(float x) { return 1.0f / (1.0f + lt_expf(-x)); }

__attribute__((always_inline)) static inline float lt_tanhf(float x) {
  float ax = __builtin_fabsf(x);
  float small = x * (1.0f + x * x * (-0.333333333f + x * x * 0.133333333f));
  float e = lt_expf(2.0f * ax);
  float big = __builtin_copysignf(1.0f - 2.0f / (e + 1.0f), x);
  return ax < 0.0625f ? small : big;
}

/* Sum of a contiguous row: 16 float lanes per 4096-element block (vectorises), blocks added in double. */
static inline double lt_sum_f32(const float *x, int64_t n) {
  double total = 0;
  for (int64_t b = 0; b < n; b += 4096) {
    int64_t e = b + 4096 < n ? b + 4096 : n;
    float acc[16] = { 0 };
    int64_t i = b;
    for (; i + 16 <= e; i += 16)
      for (int k = 0; k < 16; k++) acc[k] += x[i + k];
    float tail = 0;
    for (; i < e; i++) tail += x[i];
    double s = tail;
    for (int k = 0; k < 16; k++) s += acc[k];
    total += s;
  }
  return total;
}

/* Largest element of a contiguous row; NaN if the row holds a NaN (as PyTorch's max, so a softmax over such a
 * row is all NaN); -inf for an empty row. A single running max is a dependency chain GCC leaves scalar
 * (it may not reorder NaN comparisons); 16 independent lanes become vector compares and blends, and NaNs are
 * flagged on the side because a vector max drops them; the lanes fold as a tree. Rows shorter than 16 take
 * the scalar chain. */
static inline float lt_max_f32(const float *x, int64_t n) {
  float m = -__builtin_inff();
  int32_t any = 0;
  int64_t i = 0;
  if (n >= 16) {
    float acc[16];
    int32_t nan[16];
    for (int k = 0; k < 16; k++) {
      acc[k] = x[k];
      nan[k] = x[k] != x[k];
    }
    for (i = 16; i + 16 <= n; i += 16) {
#pragma GCC unroll 1 /* fully unrolled, the lanes' conditionals stay scalar branches; as a loop they vectorise */
      for (int k = 0; k < 16; k++) {
        float v = x[i + k];
        acc[k] = v > acc[k] ? v : acc[k];
        nan[k] |= v != v;
      }
    }
    for (int w = 8; w >= 1; w /= 2) /* fold the lanes as a tree */
      for (int k = 0; k < w; k++) {
        acc[k] = acc[k + w] > acc[k] ? acc[k + w] : acc[k];
        nan[k] |= nan[k + w];
      }
    m = acc[0];
    any = nan[0];
  }
  for (; i < n; i++) {
    m = x[i] > m ? x[i] : m;
    any |= x[i] != x[i];
  }
  return any ? __builtin_nanf("") : m;
}

/* Dot product of two contiguous rows, in the lanes-and-blocks order of lt_sum_f32. */
static inline double lt_dot_f32(const float *x, const float *y, int64_t n) {
  double total = 0;
  for (int64_t b = 0; b < n; b += 4096) {
    int64_t e = b + 4096 < n ? b + 4096 : n;
    float acc[16] = { 0 };
    int64_t i = b;
    for (; i + 16 <= e; i += 16)
      for (int k = 0; k < 16; k++) acc[k] += x[i + k] * y[i + k];
    float tail = 0;
    for (; i < e; i++) tail += x[i] * y[i];
    double s = tail;
    for (int k = 0; k < 16; k++) s += acc[k];
    total += s;
  }
  return total;
}

/* float64 rows: plain loops in index order (float64 is asked for its precision, not its speed); the max is NaN
 * if the row holds one, as lt_max_f32's */
static inline double lt_sum_f64(const double *x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += x[i];
  return s;
}
static inline double lt_dot_f64(const double *x, const double *y, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += x[i] * y[i];
  return s;
}
static inline double lt_max_f64(const double *x, int64_t n) {
  double m = -INFINITY;
  int any = 0;
  for (int64_t i = 0; i < n; i++) {
    m = x[i] > m ? x[i] : m;
    any |= x[i] != x[i];
  }
  return any ? NAN : m;
}

#endif
