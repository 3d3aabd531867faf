/*
 * nn_lstm.c — the fused LSTM cell: from the pre-activation gates [B, 4H] (x W_ih^T + b_ih + h W_hh^T +
 * b_hh, gate order i, f, g, o) and the previous cell state [B, H], one pass computes
 *   c' = sigmoid(f) * c + sigmoid(i) * tanh(g),   h' = sigmoid(o) * tanh(c')
 * and returns them side by side as one tensor [B, 2H] (h' in columns 1..H, c' in H+1..2H; callers take
 * narrow views, through which gradients flow back). The backward is one pass too.
 */
#include <math.h>
#include <string.h>

#include "lt_errors.h"
#include "lt_nn.h"

static inline float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

/* node: inputs {gates, c_prev}; saved[0] = activated gates [B, 4H]; saved[1] = the output [B, 2H] */
static int lstm_cell_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  lt_tensor *gates = n->inputs[0], *cprev = n->inputs[1];
  int64_t B = n->i[0], H = n->i[1];
  lt_tensor *gc = lt_op_contiguous(c, gout);
  lt_tensor *cp = gc ? lt_op_contiguous(c, cprev) : NULL;
  lt_tensor *gg = cp && gates->requires_grad ? lt_tensor_new(c, LT_F32, 2, gates->shape) : NULL;
  lt_tensor *gcp = cp && cprev->requires_grad ? lt_tensor_new(c, LT_F32, 2, cprev->shape) : NULL;
  if (!cp || (gates->requires_grad && !gg) || (cprev->requires_grad && !gcp)) {
    lt_tensor_release(gc);
    lt_tensor_release(cp);
    lt_tensor_release(gg);
    lt_tensor_release(gcp);
    return LT_ERR;
  }
  const float *act = lt_f32(n->saved[0]), *out = lt_f32(n->saved[1]), *pg = lt_f32(gc), *pc = lt_f32(cp);
  float *og = gg ? lt_f32(gg) : NULL, *oc = gcp ? lt_f32(gcp) : NULL;
  for (int64_t b = 0; b < B; b++) {
    const float *a = act + b * 4 * H, *o2 = out + b * 2 * H, *g2 = pg + b * 2 * H;
    for (int64_t j = 0; j < H; j++) {
      float i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j];
      float cn = o2[H + j], tc = tanhf(cn);
      float dh = g2[j], dc = g2[H + j] + dh * o * (1 - tc * tc);
      if (og) {
        float *r = og + b * 4 * H;
        r[j] = dc * g * i * (1 - i);
        r[H + j] = dc * pc[b * H + j] * f * (1 - f);
        r[2 * H + j] = dc * i * (1 - g * g);
        r[3 * H + j] = dh * tc * o * (1 - o);
      }
      if (oc) oc[b * H + j] = dc * f;
    }
  }
  lt_tensor_release(gc);
  lt_tensor_release(cp);
  gin[0] = gg;
  gin[1] = gcp;
  return LT_OK;
}

lt_tensor *lt_nn_lstm_cell(lt_ctx *c, lt_tensor *gates, lt_tensor *cprev) {
  char b1[128], b2[128];
  if (lt_check_dtype(c, "lstm_cell", "gates", gates, LT_F32) || lt_check_dtype(c, "lstm_cell", "c", cprev, LT_F32))
    return NULL;
  if (gates->ndim != 2 || cprev->ndim != 2 || gates->shape[0] != cprev->shape[0] ||
      gates->shape[1] != 4 * cprev->shape[1]) {
    lt_fail(c, "lstm_cell: gates must be [batch x 4*hidden] and c [batch x hidden], got gates %s and c %s",
            lt_shape_str(gates, b1, sizeof b1), lt_shape_str(cprev, b2, sizeof b2));
    return NULL;
  }
  int64_t B = cprev->shape[0], H = cprev->shape[1], oshape[2] = { B, 2 * H };
  lt_tensor *gc = lt_op_contiguous(c, gates);
  lt_tensor *cp = gc ? lt_op_contiguous(c, cprev) : NULL;
  lt_tensor *act = cp ? lt_tensor_new(c, LT_F32, 2, gates->shape) : NULL;
  lt_tensor *out = act ? lt_tensor_new(c, LT_F32, 2, oshape) : NULL;
  if (!out) goto fail;
  const float *pg = lt_f32(gc), *pc = lt_f32(cp);
  float *pa = lt_f32(act), *po = lt_f32(out);
  for (int64_t b = 0; b < B; b++) {
    const float *g4 = pg + b * 4 * H;
    float *a = pa + b * 4 * H, *o2 = po + b * 2 * H;
    for (int64_t j = 0; j < H; j++) {
      float i = sigm(g4[j]), f = sigm(g4[H + j]), g = tanhf(g4[2 * H + j]), o = sigm(g4[3 * H + j]);
      float cn = f * pc[b * H + j] + i * g;
      a[j] = i;
      a[H + j] = f;
      a[2 * H + j] = g;
      a[3 * H + j] = o;
      o2[j] = o * tanhf(cn);
      o2[H + j] = cn;
    }
  }
  lt_tensor_release(gc);
  lt_tensor_release(cp);
  lt_tensor *ins[2] = { gates, cprev };
  lt_node *nd;
  if (lt_record(c, out, "lstm_cell", lstm_cell_backward, 2, ins, &nd)) {
    lt_tensor_release(act);
    lt_tensor_release(out);
    return NULL;
  }
  if (nd) {
    nd->i[0] = B;
    nd->i[1] = H;
    lt_node_save(nd, 0, act);
    if (lt_node_save_output(c, nd, 1, out)) {
      lt_tensor_release(act);
      lt_tensor_release(out);
      return NULL;
    }
  }
  lt_tensor_release(act);
  return out;
fail:
  lt_tensor_release(gc);
  lt_tensor_release(cp);
  lt_tensor_release(act);
  lt_tensor_release(out);
  return NULL;
}
