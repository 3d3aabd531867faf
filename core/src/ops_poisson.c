/*
 * ops_poisson.c — lt.poisson(rates): one Poisson draw per element from lutra's RNG (lt.manual_seed), in the
 * rates' dtype (float32 or float64), as torch.poisson. Knuth's product of uniforms below rate 10, and Hörmann's
 * PTRS (transformed rejection with squeeze, 1993) from 10 up, where the product would take ~rate draws: the
 * pair numpy and PyTorch use. The draws are not PyTorch's (another generator); their distribution is.
 * No gradient: PyTorch's is zero.
 */
#include <math.h>

#include "lt_errors.h"
#include "lt_iter.h"
#include "lt_ops.h"

static double draw_small(lt_rng *r, double rate) { /* rate < 10: count uniforms until their product < e^-rate */
  double limit = exp(-rate), prod = lt_rng_uniform(r);
  int64_t k = 0;
  while (prod > limit) {
    k++;
    prod *= lt_rng_uniform(r);
  }
  return (double)k;
}

static double draw_ptrs(lt_rng *r, double rate) { /* rate >= 10 */
  double slam = sqrt(rate), loglam = log(rate);
  double b = 0.931 + 2.53 * slam, a = -0.059 + 0.02483 * b, invalpha = 1.1239 + 1.1328 / (b - 3.4),
         vr = 0.9277 - 3.6224 / (b - 2);
  for (;;) {
    double U = lt_rng_uniform(r) - 0.5, V = lt_rng_uniform(r), us = 0.5 - fabs(U);
    double k = floor((2 * a / us + b) * U + rate + 0.43);
    if (us >= 0.07 && V <= vr) return k;
    if (k < 0 || (us < 0.013 && V > us)) continue;
    if (log(V) + log(invalpha) - log(a / (us * us) + b) <= -rate + k * loglam - lgamma(k + 1)) return k;
  }
}

lt_tensor *lt_op_poisson(lt_ctx *c, lt_tensor *rates) {
  if (rates->dtype == LT_I64) {
    lt_fail(c, "poisson: rates must be float32 or float64, got int64");
    return NULL;
  }
  lt_tensor *x = lt_op_contiguous(c, rates);
  lt_tensor *out = x ? lt_tensor_new(c, rates->dtype, rates->ndim, rates->shape) : NULL;
  int64_t n = out ? lt_numel(out) : 0;
  for (int64_t i = 0; out && i < n; i++) {
    double rate = x->dtype == LT_F64 ? lt_f64(x)[i] : (double)lt_f32(x)[i];
    if (!(rate >= 0) || isinf(rate)) { /* NaN fails the first test */
      if (isnan(rate)) lt_fail(c, "poisson: rates must be finite and >= 0, got NaN at element %lld", (long long)i + 1);
      else lt_fail(c, "poisson: rates must be finite and >= 0, got %g at element %lld", rate, (long long)i + 1);
      lt_tensor_release(out);
      out = NULL;
      break;
    }
    double k = rate == 0 ? 0 : rate < 10 ? draw_small(&c->rng, rate) : draw_ptrs(&c->rng, rate);
    if (out->dtype == LT_F64) lt_f64(out)[i] = k;
    else lt_f32(out)[i] = (float)k;
  }
  lt_tensor_release(x);
  return out;
}
