/*
 * infer_layers.c — GroupNorm (and InstanceNorm, one group per channel) as a plan step (lt_infer.h): statistics
 * over each group of C/G channels x spatial values of one sample, then the per-channel weight and bias.
 */
#include <math.h>

#include "infer_ops.h"

int lt_infer_check_groupnorm(lt_ctx *c, const lt_infer_plan *p, const lt_infer_step *s) {
  int64_t N = s->rows, C = s->n_in, S = s->geo[0], G = s->geo[1];
  if (S <= 0 || G <= 0 || C % G != 0)
    return lt_fail(c, "lt.infer: GroupNorm: %lld channels in %lld groups (spatial size %lld)", (long long)C,
                   (long long)G, (long long)S);
  return lt_infer_check_buf_at_least(c, p, s, s->in, N * C * S, "input") ||
         lt_infer_check_buf_at_least(c, p, s, s->out, N * C * S, "output") ||
         lt_infer_check_param(c, s, 0, "weight", C, 1) || lt_infer_check_param(c, s, 1, "bias", C, 1);
}

void lt_infer_run_groupnorm(const lt_infer_plan *p, const lt_infer_step *s) {
  int64_t N = s->rows, C = s->n_in, S = s->geo[0], G = s->geo[1], Cg = C / G, n = Cg * S;
  const float *x = lt_f32(p->bufs[s->in]);
  const float *w = s->t[0] ? lt_f32(s->t[0]) : NULL, *b = s->t[1] ? lt_f32(s->t[1]) : NULL;
  float *y = lt_f32(p->bufs[s->out]);
  for (int64_t r = 0; r < N * G; r++) {
    const float *xg = x + r * n;
    float *yg = y + r * n;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; i++) mean += xg[i];
    mean /= (double)n;
    for (int64_t i = 0; i < n; i++) var += (xg[i] - mean) * (xg[i] - mean);
    float inv = (float)(1.0 / sqrt(var / (double)n + (double)s->a)), mu = (float)mean;
    for (int64_t cc = 0; cc < Cg; cc++) {
      int64_t ch = (r % G) * Cg + cc;
      float scale = inv * (w ? w[ch] : 1.0f), shift = (b ? b[ch] : 0.0f) - mu * scale;
      for (int64_t i = 0; i < S; i++) yg[cc * S + i] = xg[cc * S + i] * scale + shift;
    }
  }
}
