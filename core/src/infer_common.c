/*
 * infer_common.c — what the plan steps' files share (infer_ops.h): the steps' names for messages, the checks of a
 * parameter and of a buffer, the batch-1 matrix-vector product, and a recurrent cell's state update. It calls no
 * other infer file; infer.c and the step files call it.
 */
#include "infer_ops.h"
#include "lt_simd.h"

/* in the order of lt_infer_op */
const char *const lt_infer_op_names[] = { "Linear",
                                          "activation",
                                          "softmax",
                                          "LayerNorm",
                                          "BatchNorm",
                                          "Embedding",
                                          "convolution",
                                          "pooling",
                                          "elementwise operation",
                                          "recurrent cell",
                                          "strided copy",
                                          "matmul",
                                          "GroupNorm",
                                          "transposed convolution",
                                          "recurrent layer" };
#define op_names lt_infer_op_names

/* a parameter of the step: present (unless optional), float32, contiguous, numel values */
int lt_infer_check_param(lt_ctx *c, const lt_infer_step *s, int k, const char *what, int64_t numel, int optional) {
  const lt_tensor *t = s->t[k];
  const char *op = op_names[s->op];
  if (!t) return optional ? LT_OK : lt_fail(c, "lt.infer: %s: %s is missing", op, what);
  char sh[64];
  if (t->dtype != LT_F32)
    return lt_fail(c, "lt.infer: %s: %s is %s, expected float32 (convert the model with m:float())", op, what,
                   lt_dtype_name(t->dtype));
  if (!lt_is_contiguous(t))
    return lt_fail(c, "lt.infer: %s: %s %s is not contiguous (assign it a contiguous tensor: w:contiguous())", op, what,
                   lt_shape_str(t, sh, sizeof sh));
  if (lt_numel(t) != numel)
    return lt_fail(c, "lt.infer: %s: %s %s has %lld elements, expected %lld", op, what, lt_shape_str(t, sh, sizeof sh),
                   (long long)lt_numel(t), (long long)numel);
  return LT_OK;
}

/* a buffer read or written only in part (a strided copy into a slice, one operand of a batched product) */
int lt_infer_check_buf_at_least(lt_ctx *c, const lt_infer_plan *p, const lt_infer_step *s, int b, int64_t numel,
                                const char *what) {
  if (b < 0 || b >= p->nbufs) return lt_fail(c, "lt.infer: %s: %s buffer %d does not exist", op_names[s->op], what, b);
  if (lt_numel(p->bufs[b]) < numel)
    return lt_fail(c, "lt.infer: %s: %s buffer holds %lld values, the step reaches %lld", op_names[s->op], what,
                   (long long)lt_numel(p->bufs[b]), (long long)numel);
  return LT_OK;
}

static inline float fold8(const float *a) { return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])); }

/* y[o] = b[o] + sum_i W[o, i] x[i] for o < O (b may be NULL): four weight rows at a time, eight lanes each. */
LT_VECTOR_FN void lt_infer_matvec(const float *restrict W, const float *restrict x, const float *restrict b, int64_t I,
                                  int64_t O, float *restrict y) {
  int64_t o = 0, I8 = I & ~(int64_t)7;
  for (; o + 4 <= O; o += 4) {
    const float *w0 = W + o * I, *w1 = w0 + I, *w2 = w1 + I, *w3 = w2 + I;
    float a0[8] = { 0 }, a1[8] = { 0 }, a2[8] = { 0 }, a3[8] = { 0 };
    for (int64_t i = 0; i < I8; i += 8)
      for (int k = 0; k < 8; k++) {
        float v = x[i + k];
        a0[k] += w0[i + k] * v;
        a1[k] += w1[i + k] * v;
        a2[k] += w2[i + k] * v;
        a3[k] += w3[i + k] * v;
      }
    float s0 = fold8(a0), s1 = fold8(a1), s2 = fold8(a2), s3 = fold8(a3);
    for (int64_t i = I8; i < I; i++) {
      s0 += w0[i] * x[i];
      s1 += w1[i] * x[i];
      s2 += w2[i] * x[i];
      s3 += w3[i] * x[i];
    }
    y[o] = s0 + (b ? b[o] : 0.0f);
    y[o + 1] = s1 + (b ? b[o + 1] : 0.0f);
    y[o + 2] = s2 + (b ? b[o + 2] : 0.0f);
    y[o + 3] = s3 + (b ? b[o + 3] : 0.0f);
  }
  for (; o < O; o++) {
    const float *w = W + o * I;
    float a[8] = { 0 };
    for (int64_t i = 0; i < I8; i += 8)
      for (int k = 0; k < 8; k++) a[k] += w[i + k] * x[i + k];
    float s = fold8(a);
    for (int64_t i = I8; i < I; i++) s += w[i] * x[i];
    y[o] = s + (b ? b[o] : 0.0f);
  }
}

/* The gates of one cell step (gi = W_ih x + b_ih, gh = W_hh h + b_hh, G * Hd each) into the new state: h and c
 * updated in place; hout (h itself, or scratch for an LSTM with a projection) gets o * tanh(c) for an LSTM. */
void lt_infer_cell_update(int kind, const float *gi, const float *gh, float *h, float *c, float *hout, int64_t Hd) {
  switch (kind) {
    case LT_INFER_CELL_LSTM:
      for (int64_t j = 0; j < Hd; j++) {
        float i = lt_sigmoidf(gi[j] + gh[j]), f = lt_sigmoidf(gi[Hd + j] + gh[Hd + j]);
        float gg = lt_tanhf(gi[2 * Hd + j] + gh[2 * Hd + j]), o = lt_sigmoidf(gi[3 * Hd + j] + gh[3 * Hd + j]);
        c[j] = f * c[j] + i * gg;
        hout[j] = o * lt_tanhf(c[j]);
      }
      break;
    case LT_INFER_CELL_GRU:
      for (int64_t j = 0; j < Hd; j++) {
        float rr = lt_sigmoidf(gi[j] + gh[j]), z = lt_sigmoidf(gi[Hd + j] + gh[Hd + j]);
        float nn = lt_tanhf(gi[2 * Hd + j] + rr * gh[2 * Hd + j]);
        h[j] = (1.0f - z) * nn + z * h[j];
      }
      break;
    case LT_INFER_CELL_RNN_TANH:
      for (int64_t j = 0; j < Hd; j++) h[j] = lt_tanhf(gi[j] + gh[j]);
      break;
    default:
      for (int64_t j = 0; j < Hd; j++) h[j] = gi[j] + gh[j] > 0 ? gi[j] + gh[j] : 0.0f;
  }
}
