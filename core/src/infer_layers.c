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

/* ConvTranspose2d: each input value spreads over the output through the kernel (the adjoint of a convolution);
 * output_padding only makes the output larger (rows and columns that get the bias alone). */
int lt_infer_check_convt(lt_ctx *c, const lt_infer_plan *p, const lt_infer_step *s) {
  const int64_t *g = s->geo;
  for (int k = 0; k < LT_INFER_GEO_COUNT; k++)
    if (g[k] < (k == LT_INFER_GEO_PH || k == LT_INFER_GEO_PW ? 0 : 1))
      return lt_fail(c, "lt.infer: transposed convolution: bad geometry");
  int64_t Ci = g[LT_INFER_GEO_CIN], Co = g[LT_INFER_GEO_COUT], G = g[LT_INFER_GEO_GROUPS];
  if (Ci % G || Co % G)
    return lt_fail(c, "lt.infer: transposed convolution: %lld -> %lld channels in %lld groups", (long long)Ci,
                   (long long)Co, (long long)G);
  int64_t N = g[LT_INFER_GEO_N];
  return lt_infer_check_buf_at_least(c, p, s, s->in, N * Ci * g[LT_INFER_GEO_H] * g[LT_INFER_GEO_W], "input") ||
         lt_infer_check_buf_at_least(c, p, s, s->out, N * Co * g[LT_INFER_GEO_OH] * g[LT_INFER_GEO_OW], "output") ||
         lt_infer_check_param(c, s, 0, "weight", Ci * (Co / G) * g[LT_INFER_GEO_KH] * g[LT_INFER_GEO_KW], 0) ||
         lt_infer_check_param(c, s, 1, "bias", Co, 1);
}

void lt_infer_run_convt(const lt_infer_plan *p, const lt_infer_step *s) {
  lt_infer_conv_geo q = lt_infer_conv_geo_of(s->geo);
  const float *x = lt_f32(p->bufs[s->in]), *w = lt_f32(s->t[0]), *b = s->t[1] ? lt_f32(s->t[1]) : NULL;
  float *y = lt_f32(p->bufs[s->out]);
  for (int64_t n = 0; n < q.N; n++) {
    for (int64_t co = 0; co < q.Co; co++) {
      float *yo = y + (n * q.Co + co) * q.OH * q.OW;
      for (int64_t i = 0; i < q.OH * q.OW; i++) yo[i] = b ? b[co] : 0.0f;
    }
    for (int64_t ci = 0; ci < q.Ci; ci++) {
      const float *xi = x + (n * q.Ci + ci) * q.H * q.W;
      int64_t gr = ci / q.Cig;
      for (int64_t col = 0; col < q.Cog; col++) {
        float *yo = y + (n * q.Co + gr * q.Cog + col) * q.OH * q.OW;
        const float *wk = w + (ci * q.Cog + col) * q.KH * q.KW;
        for (int64_t ki = 0; ki < q.KH; ki++)
          for (int64_t kj = 0; kj < q.KW; kj++) {
            float wv = wk[ki * q.KW + kj];
            for (int64_t ih = 0; ih < q.H; ih++) {
              int64_t oh = ih * q.SH - q.PH + ki * q.DH;
              if (oh < 0 || oh >= q.OH) continue;
              for (int64_t iw = 0; iw < q.W; iw++) {
                int64_t ow = iw * q.SW - q.PW + kj * q.DW;
                if (ow >= 0 && ow < q.OW) yo[oh * q.OW + ow] += wv * xi[ih * q.W + iw];
              }
            }
          }
      }
    }
  }
}
