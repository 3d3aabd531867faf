/*
 * special_math.h — the per-element special functions of ops_special.c that libm lacks: digamma and its derivative
 * (trigamma), sinc with its derivative, logit with its eps. Written in double; the float32 kernels call them
 * too and round, so both dtypes come from one body. The series follow PyTorch 1.13's (aten/src/ATen/native/
 * Math.h: calc_digamma, calc_trigamma) so float64 results match it to the last bits, not just to the function.
 */
#ifndef SPECIAL_MATH_H
#define SPECIAL_MATH_H

#include <math.h>

#define FN_PI 3.14159265358979323846

/* digamma: reflection for x < 0, recurrence up to x >= 10, then the asymptotic series; the poles (0, negative
 * integers): -inf at +0 and +inf at -0 (the sign of the approach), NaN at negative integers, as PyTorch's */
static inline double fn_digamma(double x) {
  static const double PSI_10 = 2.25175258906672110764;
  if (x == 0) return copysign(INFINITY, -x);
  if (x < 0) {
    if (x == trunc(x)) return NAN;
    double q, r = modf(x, &q);
    return fn_digamma(1 - x) - FN_PI / tan(FN_PI * r);
  }
  double result = 0;
  while (x < 10) {
    result -= 1 / x;
    x += 1;
  }
  if (x == 10) return result + PSI_10;
  static const double A[] = { 8.33333333333333333333E-2,  -2.10927960927960927961E-2, 7.57575757575757575758E-3,
                              -4.16666666666666666667E-3, 3.96825396825396825397E-3,  -8.33333333333333333333E-3,
                              8.33333333333333333333E-2 };
  double y = 0;
  if (x < 1.0e17) {
    double z = 1.0 / (x * x), s = A[0];
    for (int i = 1; i <= 6; i++) s = s * z + A[i];
    y = z * s;
  }
  return result + log(x) - (0.5 / x) - y;
}

/* trigamma (digamma's derivative): reflection below 0.5, six steps of the recurrence, then the series */
static inline double fn_trigamma(double x) {
  double sign = +1, result = 0;
  if (x < 0.5) {
    sign = -1;
    double s = sin(FN_PI * x);
    result -= (FN_PI * FN_PI) / (s * s);
    x = 1 - x;
  }
  for (int i = 0; i < 6; ++i) {
    result += 1 / (x * x);
    x += 1;
  }
  double ixx = 1 / (x * x);
  result += (1 + 1 / (2 * x) + ixx * (1. / 6 - ixx * (1. / 30 - ixx * (1. / 42)))) / x;
  return sign * result;
}

/* sin(pi x) / (pi x), 1 at 0 */
static inline double fn_sinc(double x) {
  if (x == 0) return 1;
  double px = FN_PI * x;
  return sin(px) / px;
}
/* (cos(pi x) - sinc(x)) / x, 0 at 0 (the limit) */
static inline double fn_sinc_deriv(double x) {
  if (x == 0) return 0;
  double px = FN_PI * x;
  return (px * cos(px) - sin(px)) / (px * x);
}

/* log(z / (1 - z)) with z = x clamped to [eps, 1 - eps] (eps < 0: no clamp) */
static inline double fn_logit(double x, double eps) {
  double z = eps < 0 ? x : x < eps ? eps : x > 1 - eps ? 1 - eps : x;
  return log(z / (1 - z));
}
/* g / (x (1 - x)); where the clamp held x it is 0 (eps >= 0), and NaN outside [0, 1] without eps */
static inline double fn_logit_grad(double x, double g, double eps) {
  if (eps < 0) return x < 0 || x > 1 ? NAN : g / (x * (1 - x));
  return x < eps || x > 1 - eps ? 0 : g / (x * (1 - x));
}

#endif
