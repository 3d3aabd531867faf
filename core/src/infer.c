/*
 * infer.c — inference plans (lt_infer.h): checking steps when they are added, and running them.
 *
 * The kernels here are written for the small shapes of a model asked once per frame: a [1 x 32] x [64 x 32]^T
 * product is ~2000 multiply-adds, less than the cost of entering BLAS and far less than a hand-off to its threads,
 * so rows are computed by lt_infer_matvec (infer_common.c: four weight rows at a time, eight lanes each, under
 * LT_VECTOR_FN). Only a product large enough to pay (LINEAR_BLAS_MACS) goes to BLAS.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lt_alloc.h"
#include "lt_blas.h"
#include "lt_fpmode.h"
#include "infer_ops.h"
#include "lt_infer.h"
#include "lt_simd.h"

/* multiply-adds of one Linear step from which BLAS beats the tight loops (rows > 1 only) */
#define LINEAR_BLAS_MACS (1 << 20)

#define op_names lt_infer_op_names
#define check_param lt_infer_check_param

lt_infer_plan *lt_infer_new(lt_ctx *c) {
  lt_infer_plan *p = calloc(1, sizeof *p);
  if (!p) {
    lt_fail(c, "lt.infer: out of memory");
    return NULL;
  }
  p->flush_denormal = c->flush_denormal;
  return p;
}

int lt_infer_buffer(lt_ctx *c, lt_infer_plan *p, int64_t numel) {
  if (p->nbufs == p->bufcap) {
    int cap = p->bufcap ? 2 * p->bufcap : 8;
    lt_tensor **b = realloc(p->bufs, (size_t)cap * sizeof *b);
    if (!b) return lt_fail(c, "lt.infer: out of memory"), -1;
    p->bufs = b;
    p->bufcap = cap;
  }
  lt_tensor *t = lt_tensor_zeros(c, LT_F32, 1, &numel);
  if (!t) return -1;
  p->bufs[p->nbufs] = t;
  return p->nbufs++;
}

/* ---- checks ---------------------------------------------------------------------------------------------- */

static int check_buf(lt_ctx *c, const lt_infer_plan *p, const lt_infer_step *s, int b, int64_t numel,
                     const char *what) {
  if (b < 0 || b >= p->nbufs) return lt_fail(c, "lt.infer: %s: %s buffer %d does not exist", op_names[s->op], what, b);
  if (lt_numel(p->bufs[b]) != numel)
    return lt_fail(c, "lt.infer: %s: %s buffer holds %lld values, the step needs %lld", op_names[s->op], what,
                   (long long)lt_numel(p->bufs[b]), (long long)numel);
  return LT_OK;
}

static int positive(const lt_infer_step *s, int n) {
  for (int i = 0; i < n; i++)
    if (s->geo[i] <= 0) return 0;
  return 1;
}

static int check_step(lt_ctx *c, const lt_infer_plan *p, const lt_infer_step *s) {
  const int64_t *g = s->geo;
  int64_t R = s->rows, I = s->n_in, O = s->n_out;
  if (R < 0 || I < 0 || O < 0) return lt_fail(c, "lt.infer: %s: negative size", op_names[s->op]);
  switch (s->op) {
    case LT_INFER_LINEAR:
      if (check_buf(c, p, s, s->in, R * I, "input") || check_buf(c, p, s, s->out, R * O, "output")) return LT_ERR;
      if (check_param(c, s, 0, "weight", O * I, 0) || check_param(c, s, 1, "bias", O, 1)) return LT_ERR;
      if (R > 1 && R * I * O >= LINEAR_BLAS_MACS) return lt_blas_ready(c);
      return LT_OK;
    case LT_INFER_ACT:
      if (s->act < LT_INFER_RELU || s->act > LT_INFER_HARDSIGMOID)
        return lt_fail(c, "lt.infer: unknown activation %d", s->act);
      if (s->act == LT_INFER_PRELU) {
        if (g[0] <= 0 || g[1] <= 0 || I % (g[0] * g[1]) != 0)
          return lt_fail(c, "lt.infer: PReLU: %lld values do not split into %lld channels", (long long)I,
                         (long long)g[0]);
        if (check_param(c, s, 0, "weight", lt_numel(s->t[0] ? s->t[0] : p->bufs[0]), 0)) return LT_ERR;
        if (lt_numel(s->t[0]) != 1 && lt_numel(s->t[0]) != g[0])
          return lt_fail(c, "lt.infer: PReLU: %lld slopes for %lld channels", (long long)lt_numel(s->t[0]),
                         (long long)g[0]);
      }
      return check_buf(c, p, s, s->in, I, "input") || check_buf(c, p, s, s->out, I, "output");
    case LT_INFER_SOFTMAX:
      return check_buf(c, p, s, s->in, R * I * g[0], "input") || check_buf(c, p, s, s->out, R * I * g[0], "output");
    case LT_INFER_LAYERNORM:
      return check_buf(c, p, s, s->in, R * I, "input") || check_buf(c, p, s, s->out, R * I, "output") ||
             check_param(c, s, 0, "weight", I, 1) || check_param(c, s, 1, "bias", I, 1);
    case LT_INFER_BATCHNORM:
      return check_buf(c, p, s, s->in, R * I * g[0], "input") || check_buf(c, p, s, s->out, R * I * g[0], "output") ||
             check_param(c, s, 0, "running_mean", I, 0) || check_param(c, s, 1, "running_var", I, 0) ||
             check_param(c, s, 2, "weight", I, 1) || check_param(c, s, 3, "bias", I, 1);
    case LT_INFER_EMBEDDING:
      return check_buf(c, p, s, s->in, R, "input") || check_buf(c, p, s, s->out, R * O, "output") ||
             check_param(c, s, 0, "weight", g[0] * O, 0);
    case LT_INFER_CONV:
    case LT_INFER_POOL: {
      int conv = s->op == LT_INFER_CONV;
      if (!positive(s, LT_INFER_GEO_KW + 1) || g[LT_INFER_GEO_SH] <= 0 || g[LT_INFER_GEO_SW] <= 0 ||
          g[LT_INFER_GEO_DH] <= 0 || g[LT_INFER_GEO_DW] <= 0 || g[LT_INFER_GEO_PH] < 0 || g[LT_INFER_GEO_PW] < 0)
        return lt_fail(c, "lt.infer: %s: bad geometry", op_names[s->op]);
      int64_t N = g[LT_INFER_GEO_N], Ci = g[LT_INFER_GEO_CIN], Co = g[LT_INFER_GEO_COUT];
      int64_t G = conv ? g[LT_INFER_GEO_GROUPS] : 1;
      if (G <= 0 || Ci % G || Co % G || (!conv && Ci != Co))
        return lt_fail(c, "lt.infer: %s: %lld -> %lld channels in %lld groups", op_names[s->op], (long long)Ci,
                       (long long)Co, (long long)G);
      if (check_buf(c, p, s, s->in, N * Ci * g[LT_INFER_GEO_H] * g[LT_INFER_GEO_W], "input") ||
          check_buf(c, p, s, s->out, N * Co * g[LT_INFER_GEO_OH] * g[LT_INFER_GEO_OW], "output"))
        return LT_ERR;
      if (!conv) return LT_OK;
      return check_param(c, s, 0, "weight", Co * (Ci / G) * g[LT_INFER_GEO_KH] * g[LT_INFER_GEO_KW], 0) ||
             check_param(c, s, 1, "bias", Co, 1);
    }
    case LT_INFER_BINARY:
      if (s->act < LT_INFER_ADD || s->act > LT_INFER_DIV) return lt_fail(c, "lt.infer: unknown operation %d", s->act);
      if (O <= 0 || I % O != 0)
        return lt_fail(c, "lt.infer: elementwise operation: %lld values do not repeat %lld", (long long)I,
                       (long long)O);
      if (check_buf(c, p, s, s->in, I, "input") || check_buf(c, p, s, s->out, I, "output")) return LT_ERR;
      if (g[0] >= 0) return check_buf(c, p, s, (int)g[0], O, "second operand");
      return check_param(c, s, 0, "second operand", O, 0);
    case LT_INFER_CELL: {
      int64_t G = s->act == LT_INFER_CELL_LSTM ? 4 : s->act == LT_INFER_CELL_GRU ? 3 : 1;
      if (s->act < LT_INFER_CELL_LSTM || s->act > LT_INFER_CELL_RNN_RELU)
        return lt_fail(c, "lt.infer: unknown cell %d", s->act);
      if (check_buf(c, p, s, s->in, R * I, "input") || check_buf(c, p, s, s->out, R * O, "output") ||
          check_buf(c, p, s, (int)g[0], R * O, "hidden state") ||
          (s->act == LT_INFER_CELL_LSTM && check_buf(c, p, s, (int)g[1], R * O, "cell state")) ||
          check_buf(c, p, s, (int)g[2], 2 * G * O, "gates"))
        return LT_ERR;
      return check_param(c, s, 0, "weight_ih", G * O * I, 0) || check_param(c, s, 1, "weight_hh", G * O * O, 0) ||
             check_param(c, s, 2, "bias_ih", G * O, 1) || check_param(c, s, 3, "bias_hh", G * O, 1);
    }
    case LT_INFER_STRIDED: return lt_infer_check_strided(c, p, s);
    case LT_INFER_MATMUL: return lt_infer_check_matmul(c, p, s);
    case LT_INFER_GROUPNORM: return lt_infer_check_groupnorm(c, p, s);
    case LT_INFER_CONVT: return lt_infer_check_convt(c, p, s);
    case LT_INFER_SEQ: return lt_infer_check_seq(c, p, s);
  }
  return lt_fail(c, "lt.infer: unknown step %d", (int)s->op);
}

int lt_infer_add(lt_ctx *c, lt_infer_plan *p, const lt_infer_step *s) {
  if (check_step(c, p, s) != LT_OK) return LT_ERR;
  if (p->nsteps == p->cap) {
    int cap = p->cap ? 2 * p->cap : 8;
    lt_infer_step *st = realloc(p->steps, (size_t)cap * sizeof *st);
    if (!st) return lt_fail(c, "lt.infer: out of memory");
    p->steps = st;
    p->cap = cap;
  }
  lt_infer_step *d = &p->steps[p->nsteps++];
  *d = *s;
  for (int k = 0; k < LT_INFER_NPARAMS; k++)
    if (d->t[k]) lt_tensor_retain(d->t[k]);
  return LT_OK;
}

void lt_infer_free(lt_infer_plan *p) {
  if (!p) return;
  for (int i = 0; i < p->nsteps; i++)
    for (int k = 0; k < LT_INFER_NPARAMS; k++)
      if (p->steps[i].t[k]) lt_tensor_release(p->steps[i].t[k]);
  for (int i = 0; i < p->nbufs; i++) lt_tensor_release(p->bufs[i]);
  free(p->steps);
  free(p->bufs);
  free(p);
}

void lt_infer_reset_state(const lt_infer_plan *p) {
  for (int i = 0; i < p->nsteps; i++) {
    const lt_infer_step *s = &p->steps[i];
    if (s->op != LT_INFER_CELL) continue;
    memset(lt_f32(p->bufs[s->geo[0]]), 0, (size_t)(s->rows * s->n_out) * sizeof(float));
    if (s->act == LT_INFER_CELL_LSTM)
      memset(lt_f32(p->bufs[s->geo[1]]), 0, (size_t)(s->rows * s->n_out) * sizeof(float));
  }
}

/* ---- kernels --------------------------------------------------------------------------------------------- */

static void run_linear(const lt_infer_plan *p, const lt_infer_step *s) {
  const float *x = lt_f32(p->bufs[s->in]), *W = lt_f32(s->t[0]), *b = s->t[1] ? lt_f32(s->t[1]) : NULL;
  float *y = lt_f32(p->bufs[s->out]);
  int64_t R = s->rows, I = s->n_in, O = s->n_out;
  if (R > 1 && R * I * O >= LINEAR_BLAS_MACS) {
    lt_blas_sgemm(0, 1, (int)R, (int)O, (int)I, 1.0f, x, (int)I, W, (int)I, 0.0f, y, (int)O);
    if (b)
      for (int64_t r = 0; r < R; r++)
        for (int64_t o = 0; o < O; o++) y[r * O + o] += b[o];
    return;
  }
  for (int64_t r = 0; r < R; r++) lt_infer_matvec(W, x + r * I, b, I, O, y + r * O);
}

LT_VECTOR_FN static void run_act(const lt_infer_plan *p, const lt_infer_step *s) {
  const float *x = lt_f32(p->bufs[s->in]);
  float *y = lt_f32(p->bufs[s->out]);
  int64_t n = s->n_in;
  float a = s->a, b = s->b;
  switch ((lt_infer_act)s->act) {
    case LT_INFER_RELU:
      for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0.0f;
      break;
    case LT_INFER_LEAKY_RELU:
      for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : a * x[i];
      break;
    case LT_INFER_TANH:
      for (int64_t i = 0; i < n; i++) y[i] = lt_tanhf(x[i]);
      break;
    case LT_INFER_SIGMOID:
      for (int64_t i = 0; i < n; i++) y[i] = lt_sigmoidf(x[i]);
      break;
    case LT_INFER_GELU:
      for (int64_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + lt_erff(x[i] * 0.70710678118654752f));
      break;
    case LT_INFER_GELU_TANH:
      for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + lt_tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
      }
      break;
    case LT_INFER_SILU:
      for (int64_t i = 0; i < n; i++) y[i] = x[i] * lt_sigmoidf(x[i]);
      break;
    case LT_INFER_ELU:
      for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : a * (expf(x[i]) - 1.0f);
      break;
    case LT_INFER_SOFTPLUS:
      for (int64_t i = 0; i < n; i++) y[i] = x[i] * a > b ? x[i] : log1pf(expf(a * x[i])) / a;
      break;
    case LT_INFER_HARDTANH:
      for (int64_t i = 0; i < n; i++) y[i] = x[i] < a ? a : x[i] > b ? b : x[i];
      break;
    case LT_INFER_PRELU: {
      const float *w = lt_f32(s->t[0]);
      int64_t C = s->geo[0], inner = s->geo[1], one = lt_numel(s->t[0]) == 1;
      for (int64_t i = 0; i < n; i++) {
        float slope = one ? w[0] : w[(i / inner) % C];
        y[i] = x[i] > 0 ? x[i] : slope * x[i];
      }
      break;
    }
    case LT_INFER_COPY:
      if (x != y) memcpy(y, x, (size_t)n * sizeof *y);
      break;
    case LT_INFER_AFFINE:
      for (int64_t i = 0; i < n; i++) y[i] = a * x[i] + b;
      break;
    case LT_INFER_RDIV:
      for (int64_t i = 0; i < n; i++) y[i] = a / x[i];
      break;
    case LT_INFER_EXP:
      for (int64_t i = 0; i < n; i++) y[i] = expf(x[i]);
      break;
    case LT_INFER_LOG:
      for (int64_t i = 0; i < n; i++) y[i] = logf(x[i]);
      break;
    case LT_INFER_ABS:
      for (int64_t i = 0; i < n; i++) y[i] = fabsf(x[i]);
      break;
    case LT_INFER_SQRT:
      for (int64_t i = 0; i < n; i++) y[i] = sqrtf(x[i]);
      break;
    case LT_INFER_MISH: /* x tanh(softplus(x)), softplus with PyTorch's threshold 20 */
      for (int64_t i = 0; i < n; i++) y[i] = x[i] * lt_tanhf(x[i] > 20.0f ? x[i] : log1pf(expf(x[i])));
      break;
    case LT_INFER_HARDSWISH:
      for (int64_t i = 0; i < n; i++) {
        float r6 = x[i] + 3.0f < 0 ? 0 : x[i] + 3.0f > 6.0f ? 6.0f : x[i] + 3.0f;
        y[i] = x[i] * r6 / 6.0f;
      }
      break;
    case LT_INFER_HARDSIGMOID:
      for (int64_t i = 0; i < n; i++) {
        float r6 = x[i] + 3.0f < 0 ? 0 : x[i] + 3.0f > 6.0f ? 6.0f : x[i] + 3.0f;
        y[i] = r6 / 6.0f;
      }
      break;
  }
}

/* out = in (op) y, y repeating every n_out values (a bias row, a per-feature scale); b swaps the operands */
LT_VECTOR_FN static void run_binary(const lt_infer_plan *p, const lt_infer_step *s) {
  const float *x = lt_f32(p->bufs[s->in]);
  const float *yv = s->geo[0] >= 0 ? lt_f32(p->bufs[s->geo[0]]) : lt_f32(s->t[0]);
  float *out = lt_f32(p->bufs[s->out]);
  int64_t n = s->n_in, m = s->n_out;
  int swap = s->b != 0;
  for (int64_t r = 0; r < n; r += m) {
    const float *xr = x + r;
    float *o = out + r;
    switch (s->act) {
      case LT_INFER_ADD:
        for (int64_t i = 0; i < m; i++) o[i] = xr[i] + yv[i];
        break;
      case LT_INFER_SUB:
        if (swap)
          for (int64_t i = 0; i < m; i++) o[i] = yv[i] - xr[i];
        else
          for (int64_t i = 0; i < m; i++) o[i] = xr[i] - yv[i];
        break;
      case LT_INFER_MUL:
        for (int64_t i = 0; i < m; i++) o[i] = xr[i] * yv[i];
        break;
      default:
        if (swap)
          for (int64_t i = 0; i < m; i++) o[i] = yv[i] / xr[i];
        else
          for (int64_t i = 0; i < m; i++) o[i] = xr[i] / yv[i];
    }
  }
}

static void run_softmax(const lt_infer_plan *p, const lt_infer_step *s) {
  const float *x = lt_f32(p->bufs[s->in]);
  float *y = lt_f32(p->bufs[s->out]);
  int64_t outer = s->rows, n = s->n_in, inner = s->geo[0];
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) {
      const float *xr = x + o * n * inner + j;
      float *yr = y + o * n * inner + j;
      float m = -INFINITY;
      for (int64_t i = 0; i < n; i++) m = xr[i * inner] > m ? xr[i * inner] : m;
      double sum = 0;
      for (int64_t i = 0; i < n; i++) sum += expf(xr[i * inner] - m);
      if (s->a != 0) {
        float lse = m + (float)log(sum);
        for (int64_t i = 0; i < n; i++) yr[i * inner] = xr[i * inner] - lse;
      } else {
        float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < n; i++) yr[i * inner] = expf(xr[i * inner] - m) * inv;
      }
    }
}

static void run_layernorm(const lt_infer_plan *p, const lt_infer_step *s) {
  const float *x = lt_f32(p->bufs[s->in]);
  float *y = lt_f32(p->bufs[s->out]);
  const float *w = s->t[0] ? lt_f32(s->t[0]) : NULL, *b = s->t[1] ? lt_f32(s->t[1]) : NULL;
  int64_t n = s->n_in;
  for (int64_t r = 0; r < s->rows; r++) {
    const float *xr = x + r * n;
    float *yr = y + r * n;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; i++) mean += xr[i];
    mean /= (double)n;
    for (int64_t i = 0; i < n; i++) var += (xr[i] - mean) * (xr[i] - mean);
    float inv = (float)(1.0 / sqrt(var / (double)n + s->a)), m = (float)mean;
    for (int64_t i = 0; i < n; i++) {
      float v = (xr[i] - m) * inv;
      yr[i] = (w ? v * w[i] : v) + (b ? b[i] : 0.0f);
    }
  }
}

static void run_batchnorm(const lt_infer_plan *p, const lt_infer_step *s) {
  const float *x = lt_f32(p->bufs[s->in]);
  float *y = lt_f32(p->bufs[s->out]);
  const float *mean = lt_f32(s->t[0]), *var = lt_f32(s->t[1]);
  const float *w = s->t[2] ? lt_f32(s->t[2]) : NULL, *b = s->t[3] ? lt_f32(s->t[3]) : NULL;
  int64_t C = s->n_in, S = s->geo[0];
  for (int64_t n = 0; n < s->rows; n++)
    for (int64_t ch = 0; ch < C; ch++) {
      float scale = 1.0f / sqrtf(var[ch] + s->a), shift;
      if (w) scale *= w[ch];
      shift = (b ? b[ch] : 0.0f) - mean[ch] * scale;
      const float *xs = x + (n * C + ch) * S;
      float *ys = y + (n * C + ch) * S;
      for (int64_t i = 0; i < S; i++) ys[i] = xs[i] * scale + shift;
    }
}

static int run_embedding(lt_ctx *c, const lt_infer_plan *p, const lt_infer_step *s) {
  const float *x = lt_f32(p->bufs[s->in]), *W = lt_f32(s->t[0]);
  float *y = lt_f32(p->bufs[s->out]);
  int64_t D = s->n_out, V = s->geo[0];
  for (int64_t r = 0; r < s->rows; r++) {
    float v = x[r];
    if (!(v >= 1 && v <= (float)V) || v != floorf(v))
      return lt_fail(c, "lt.infer: Embedding: index %g is out of range [1, %lld] (input position %lld)", (double)v,
                     (long long)V, (long long)r + 1);
    memcpy(y + r * D, W + ((int64_t)v - 1) * D, (size_t)D * sizeof *y);
  }
  return LT_OK;
}

static void run_conv(const lt_infer_plan *p, const lt_infer_step *s) {
  lt_infer_conv_geo q = lt_infer_conv_geo_of(s->geo);
  const float *x = lt_f32(p->bufs[s->in]), *W = lt_f32(s->t[0]), *b = s->t[1] ? lt_f32(s->t[1]) : NULL;
  float *y = lt_f32(p->bufs[s->out]);
  for (int64_t n = 0; n < q.N; n++)
    for (int64_t oc = 0; oc < q.Co; oc++) {
      float *yo = y + (n * q.Co + oc) * q.OH * q.OW;
      float bias = b ? b[oc] : 0.0f;
      for (int64_t i = 0; i < q.OH * q.OW; i++) yo[i] = bias;
      int64_t ic0 = (oc / q.Cog) * q.Cig;
      for (int64_t ic = 0; ic < q.Cig; ic++) {
        const float *xi = x + (n * q.Ci + ic0 + ic) * q.H * q.W;
        for (int64_t ki = 0; ki < q.KH; ki++)
          for (int64_t kj = 0; kj < q.KW; kj++) {
            float w = W[((oc * q.Cig + ic) * q.KH + ki) * q.KW + kj];
            for (int64_t oh = 0; oh < q.OH; oh++) {
              int64_t ih = oh * q.SH - q.PH + ki * q.DH;
              if (ih < 0 || ih >= q.H) continue;
              const float *xr = xi + ih * q.W;
              float *yr = yo + oh * q.OW;
              for (int64_t ow = 0; ow < q.OW; ow++) {
                int64_t iw = ow * q.SW - q.PW + kj * q.DW;
                if (iw >= 0 && iw < q.W) yr[ow] += w * xr[iw];
              }
            }
          }
      }
    }
}

/* PyTorch's pooling windows: a window may reach past the input into the padding, or (ceil_mode) past that;
 * average pooling divides by the window clipped to input + padding, or to the input alone (count_include_pad
 * false). */
/* one window [h0, h1) x [w0, w1) of an adaptive pool (never empty, never past the input) */
static float adaptive(const float *xp, int64_t H, int64_t Wd, int64_t h0, int64_t h1, int64_t w0, int64_t w1, int max) {
  (void)H;
  double sum = 0;
  float r = -INFINITY;
  for (int64_t ih = h0; ih < h1; ih++)
    for (int64_t iw = w0; iw < w1; iw++) {
      float v = xp[ih * Wd + iw];
      if (v > r || v != v) r = v;
      sum += v;
    }
  return max ? r : (float)(sum / (double)((h1 - h0) * (w1 - w0)));
}

static void run_pool(const lt_infer_plan *p, const lt_infer_step *s) {
  const int64_t *g = s->geo;
  int64_t NC = g[LT_INFER_GEO_N] * g[LT_INFER_GEO_CIN], H = g[LT_INFER_GEO_H], Wd = g[LT_INFER_GEO_W];
  int64_t OH = g[LT_INFER_GEO_OH], OW = g[LT_INFER_GEO_OW], KH = g[LT_INFER_GEO_KH], KW = g[LT_INFER_GEO_KW];
  int64_t SH = g[LT_INFER_GEO_SH], SW = g[LT_INFER_GEO_SW], PH = g[LT_INFER_GEO_PH], PW = g[LT_INFER_GEO_PW];
  int64_t DH = g[LT_INFER_GEO_DH], DW = g[LT_INFER_GEO_DW];
  const float *x = lt_f32(p->bufs[s->in]);
  float *y = lt_f32(p->bufs[s->out]);
  for (int64_t nc = 0; nc < NC; nc++) {
    const float *xp = x + nc * H * Wd;
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t h0 = oh * SH - PH, w0 = ow * SW - PW;
        float r;
        if (s->act == LT_INFER_POOL_ADAPTIVE_MAX || s->act == LT_INFER_POOL_ADAPTIVE_AVG) {
          r = adaptive(xp, H, Wd, oh * H / OH, ((oh + 1) * H + OH - 1) / OH, ow * Wd / OW,
                       ((ow + 1) * Wd + OW - 1) / OW, s->act == LT_INFER_POOL_ADAPTIVE_MAX);
        } else if (s->act == LT_INFER_POOL_MAX) {
          r = -INFINITY;
          for (int64_t ki = 0; ki < KH; ki++) {
            int64_t ih = h0 + ki * DH;
            if (ih < 0 || ih >= H) continue;
            for (int64_t kj = 0; kj < KW; kj++) {
              int64_t iw = w0 + kj * DW;
              if (iw < 0 || iw >= Wd) continue;
              float v = xp[ih * Wd + iw];
              if (v > r || v != v) r = v;
            }
          }
        } else {
          int64_t h1 = h0 + KH < H + PH ? h0 + KH : H + PH, w1 = w0 + KW < Wd + PW ? w0 + KW : Wd + PW;
          int64_t size = (h1 - h0) * (w1 - w0);
          int64_t hs = h0 < 0 ? 0 : h0, ws = w0 < 0 ? 0 : w0, he = h1 < H ? h1 : H, we = w1 < Wd ? w1 : Wd;
          if (s->act == LT_INFER_POOL_AVG_EXCLUDE_PAD) size = (he - hs) * (we - ws);
          double sum = 0;
          for (int64_t ih = hs; ih < he; ih++)
            for (int64_t iw = ws; iw < we; iw++) sum += xp[ih * Wd + iw];
          r = (float)(sum / (double)size);
        }
        y[(nc * OH + oh) * OW + ow] = r;
      }
  }
}

static void run_cell(const lt_infer_plan *p, const lt_infer_step *s) {
  int64_t I = s->n_in, Hd = s->n_out, G = s->act == LT_INFER_CELL_LSTM ? 4 : s->act == LT_INFER_CELL_GRU ? 3 : 1;
  const float *x = lt_f32(p->bufs[s->in]), *Wih = lt_f32(s->t[0]), *Whh = lt_f32(s->t[1]);
  const float *bih = s->t[2] ? lt_f32(s->t[2]) : NULL, *bhh = s->t[3] ? lt_f32(s->t[3]) : NULL;
  float *h = lt_f32(p->bufs[s->geo[0]]), *cst = s->act == LT_INFER_CELL_LSTM ? lt_f32(p->bufs[s->geo[1]]) : NULL;
  float *gi = lt_f32(p->bufs[s->geo[2]]), *gh = gi + G * Hd, *y = lt_f32(p->bufs[s->out]);
  for (int64_t r = 0; r < s->rows; r++) {
    float *hr = h + r * Hd;
    lt_infer_matvec(Wih, x + r * I, bih, I, G * Hd, gi);
    lt_infer_matvec(Whh, hr, bhh, Hd, G * Hd, gh);
    lt_infer_cell_update(s->act, gi, gh, hr, cst ? cst + r * Hd : NULL, hr, Hd);
    memcpy(y + r * Hd, hr, (size_t)Hd * sizeof *y);
  }
}

int lt_infer_run(lt_ctx *c, const lt_infer_plan *p) {
  unsigned fp = lt_fp_enter(p->flush_denormal);
  int rc = LT_OK;
  for (int i = 0; i < p->nsteps && rc == LT_OK; i++) {
    const lt_infer_step *s = &p->steps[i];
    switch (s->op) {
      case LT_INFER_LINEAR: run_linear(p, s); break;
      case LT_INFER_ACT: run_act(p, s); break;
      case LT_INFER_SOFTMAX: run_softmax(p, s); break;
      case LT_INFER_LAYERNORM: run_layernorm(p, s); break;
      case LT_INFER_BATCHNORM: run_batchnorm(p, s); break;
      case LT_INFER_EMBEDDING: rc = run_embedding(c, p, s); break;
      case LT_INFER_CONV: run_conv(p, s); break;
      case LT_INFER_POOL: run_pool(p, s); break;
      case LT_INFER_BINARY: run_binary(p, s); break;
      case LT_INFER_CELL: run_cell(p, s); break;
      case LT_INFER_STRIDED: lt_infer_run_strided(p, s); break;
      case LT_INFER_MATMUL: lt_infer_run_matmul(p, s); break;
      case LT_INFER_GROUPNORM: lt_infer_run_groupnorm(p, s); break;
      case LT_INFER_CONVT: lt_infer_run_convt(p, s); break;
      case LT_INFER_SEQ: lt_infer_run_seq(p, s); break;
    }
  }
  lt_fp_leave(fp);
  return rc;
}
