/*
 * nn_rnn.c — one direction of one recurrent layer (Elman RNN tanh/relu, GRU, LSTM with optional projection)
 * over a whole sequence, as a single autograd node. The input projection of every step, xg = x W_ih^T + b_ih
 * [T, B, G*H] (G = 1, 3 or 4 gates), is one GEMM done by the caller; this kernel runs the recurrence
 *   gh_t = h_{t-1} W_hh^T + b_hh      (one GEMM per step: the only sequential part)
 * and the fused cell of the mode, in PyTorch's gate orders and formulas:
 *   RNN:  h = act(xg + gh)
 *   GRU:  r = s(xr + hr), z = s(xz + hz), n = tanh(xn + r * hn), h = (1 - z) * n + z * h_{t-1}
 *   LSTM: i, f, g, o = s, s, tanh, s of (xg + gh); c = f * c_{t-1} + i * g; h = o * tanh(c) [then h W_hr^T]
 * Steps run from t = 1 to T, or from T down to 1 for the reverse direction of a bidirectional layer.
 * The result is one flat tensor: the outputs [T, B, P] (P = proj_size or H), then for LSTM the last cell
 * state [B, H]; callers take views (the last hidden state is an output row). The backward walks the steps
 * back once (one GEMM per step for the recurrent gradient) and batches what does not depend on order over
 * all steps: dW_hh = sum_t dgh_t^T h_{t-1} and dW_hr = sum_t dh_t^T r_t are one GEMM each.
 * float32 and float64 run the same code (nn_rnn_impl.h, included once per dtype); float32 has the fast
 * activations of lt_simd.h and lutra's small-M GEMM route, float64 libm's activations and dgemm.
 */
#include <math.h>
#include <string.h>

#include "lt_alloc.h"
#include "lt_blas.h"
#include "lt_gemm_bf16.h"
#include "lt_gemm_small_m.h"
#include "lt_errors.h"
#include "lt_pool.h"
#include "lt_nn.h"
#include "lt_simd.h"

/* Logical inputs; node->i[SLOT0 + k] holds the position of input k in node->inputs, or -1 when absent. */
enum { IN_XG, IN_WHH, IN_BHH, IN_H0, IN_C0, IN_WHR, IN_COUNT };
enum { I_MODE, I_T, I_B, I_H, I_P, I_REV, I_SLOT0 };

static int gates_of(lt_rnn_mode m) { return m == LT_RNN_LSTM ? 4 : m == LT_RNN_GRU ? 3 : 1; }

/* The saved workspace, one buffer (of the layer's dtype): hp [T, B, P] = h_{t-1} per step; act [T, B, G*H] = the
 * activated gates (RNN: h itself); then LSTM: cp [T, B, H] = c_{t-1}, tc [T, B, H] = tanh(c_t), r [T, B, H] =
 * o * tanh(c_t) when projected; GRU: hn [T, B, H] = the recurrent part of the n gate (h W_hn^T + b_hn). Its size
 * in elements: */
static int64_t ws_size(lt_rnn_mode m, int64_t T, int64_t B, int64_t H, int64_t P, int proj) {
  int64_t n = T * B * P + T * B * gates_of(m) * H;
  if (m == LT_RNN_LSTM) n += T * B * H * (proj ? 3 : 2);
  if (m == LT_RNN_GRU) n += T * B * H;
  return n;
}

/* The recurrent products ([B x k] x W_hh, once per step) run lutra's small-M GEMM over a W_hh packed once per
 * sequence (lt_gemm_small_m.h) when the CPU has it, B is a batch of rows (OpenBLAS repacks W_hh for each step,
 * which costs most when B is small) and autocast does not send them to the bf16 GEMM; 0 keeps lt_blas_sgemm.
 * Returns the threads to split each product over. */
#define RNN_SMALL_M_MAX_ROWS 128
static int recurrent_small_m(int64_t m, int64_t n, int64_t k) {
  if (m > RNN_SMALL_M_MAX_ROWS || !lt_gemm_small_m_ok()) return 0;
  if (lt_gemm_bf16_mode() == LT_AUTOCAST_BF16 && lt_gemm_bf16_wants((int)m, (int)n, (int)k) && lt_gemm_bf16_active())
    return 0;
  return lt_blas_threads_pay(m, n, k) ? lt_pool_threads() : 1;
}

/* the float64 activations: libm, as PyTorch's double kernels */
static inline double sigmoid_f64(double x) { return 1.0 / (1.0 + exp(-x)); }

#define R_T float
#define R_(name) name##_f32
#define R_DT LT_F32
#define R_DATA lt_f32
#define R_SIGMOID lt_sigmoidf
#define R_TANH lt_tanhf
#define R_GEMM lt_blas_sgemm
#define R_SMALL_M 1
#include "nn_rnn_impl.h"
#undef R_T
#undef R_
#undef R_DT
#undef R_DATA
#undef R_SIGMOID
#undef R_TANH
#undef R_GEMM
#undef R_SMALL_M

#define R_T double
#define R_(name) name##_f64
#define R_DT LT_F64
#define R_DATA lt_f64
#define R_SIGMOID sigmoid_f64
#define R_TANH tanh
#define R_GEMM lt_blas_dgemm
#define R_SMALL_M 0
#include "nn_rnn_impl.h"

static int rnn_layer_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  lt_gemm_bf16_scope(c);
  if (lt_blas_ready(c)) return LT_ERR;
  lt_tensor *g = lt_op_contiguous(c, gout);
  if (!g) return LT_ERR;
  int st = g->dtype == LT_F64 ? rnn_backward_f64(c, n, g, gin) : rnn_backward_f32(c, n, g, gin);
  lt_tensor_release(g);
  return st;
}

/* ---- forward ------------------------------------------------------------------------------------------------- */

/* t's shape is want and its dtype xg's (PyTorch refuses a mix of float32 and float64 in a recurrent layer) */
static int check_shape(lt_ctx *c, const char *what, const lt_tensor *t, int nd, const int64_t *want,
                       const lt_tensor *xg) {
  char got[128], exp[128];
  int ok = t->ndim == nd;
  for (int d = 0; ok && d < nd; d++) ok = t->shape[d] == want[d];
  if (ok && t->dtype != xg->dtype)
    return lt_fail(c, "rnn_layer: xg is %s and %s is %s: both must have the same float dtype", lt_dtype_name(xg->dtype),
                   what, lt_dtype_name(t->dtype));
  if (ok) return LT_OK;
  return lt_fail(c, "rnn_layer: %s must be %s, got %s", what, lt_dims_str(nd, want, exp, sizeof exp),
                 lt_shape_str(t, got, sizeof got));
}

lt_tensor *lt_nn_rnn_layer(lt_ctx *c, lt_rnn_mode mode, lt_tensor *xg, lt_tensor *w_hh, lt_tensor *b_hh, lt_tensor *h0,
                           lt_tensor *c0, lt_tensor *w_hr, int reverse) {
  lt_gemm_bf16_scope(c); /* the recurrent products: autocast's precision */
  char b1[128];
  if (lt_blas_ready(c)) return NULL;
  if (mode < LT_RNN_TANH || mode > LT_RNN_LSTM) {
    lt_fail(c, "rnn_layer: unknown mode %d", (int)mode);
    return NULL;
  }
  if (xg->dtype != LT_F64 && lt_check_dtype(c, "rnn_layer", "xg", xg, LT_F32)) return NULL;
  int G = gates_of(mode);
  if (xg->ndim != 3 || xg->shape[2] % G != 0 || xg->shape[0] < 1 || xg->shape[2] < G) {
    lt_fail(c, "rnn_layer: xg must be [seq x batch x %d*hidden] with seq >= 1, got %s", G,
            lt_shape_str(xg, b1, sizeof b1));
    return NULL;
  }
  if (mode != LT_RNN_LSTM && (c0 || w_hr)) {
    lt_fail(c, "rnn_layer: a cell state and a projection exist only for LSTM");
    return NULL;
  }
  if (mode == LT_RNN_LSTM && !c0) {
    lt_fail(c, "rnn_layer: LSTM needs the initial cell state c0");
    return NULL;
  }
  int64_t T = xg->shape[0], B = xg->shape[1], H = xg->shape[2] / G, GH = G * H;
  int64_t P = w_hr ? w_hr->shape[0] : H;
  int64_t s_whh[2] = { GH, P }, s_h0[2] = { B, P }, s_c0[2] = { B, H }, s_whr[2] = { P, H };
  if (w_hr && w_hr->ndim != 2) {
    lt_fail(c, "rnn_layer: w_hr must be [proj x hidden], got %s", lt_shape_str(w_hr, b1, sizeof b1));
    return NULL;
  }
  if (check_shape(c, "w_hh", w_hh, 2, s_whh, xg) || (b_hh && check_shape(c, "b_hh", b_hh, 1, &GH, xg)) ||
      check_shape(c, "h0", h0, 2, s_h0, xg) || (c0 && check_shape(c, "c0", c0, 2, s_c0, xg)) ||
      (w_hr && check_shape(c, "w_hr", w_hr, 2, s_whr, xg)))
    return NULL;
  lt_tensor *given[IN_COUNT] = { xg, w_hh, b_hh, h0, c0, w_hr }, *cont[IN_COUNT] = { 0 };
  lt_tensor *out = NULL, *ws = NULL;
  for (int k = 0; k < IN_COUNT; k++)
    if (given[k] && !(cont[k] = lt_op_contiguous(c, given[k]))) goto fail;
  int proj = w_hr != NULL;
  int64_t pos = 0, slots[IN_COUNT]; /* the inputs given, in order, and where each logical input is among them */
  lt_tensor *ins[IN_COUNT];
  for (int k = 0; k < IN_COUNT; k++) {
    slots[k] = given[k] ? pos : -1;
    if (given[k]) ins[pos++] = given[k];
  }
  /* Forward only (no_grad, eval, nothing requiring a gradient): the workspace holds one step, overwritten at
   * each step, and nothing backward would need is kept or copied. */
  int save = lt_needs_grad(c, (int)pos, ins);
  int64_t TS = save ? T : 1; /* steps the workspace holds */
  int64_t nout = T * B * P + (mode == LT_RNN_LSTM ? B * H : 0), nws = ws_size(mode, TS, B, H, P, proj);
  int64_t nstep = B * GH + (mode == LT_RNN_LSTM ? B * H : 0); /* this step's gates, the running c */
  int64_t ntot = nws + nstep;
  out = lt_tensor_new(c, xg->dtype, 1, &nout);
  ws = out ? lt_tensor_new(c, xg->dtype, 1, &ntot) : NULL;
  if (!ws) goto fail;
  if (xg->dtype == LT_F64) rnn_forward_f64(mode, T, B, H, P, save, reverse, cont, out, ws, nws);
  else rnn_forward_f32(mode, T, B, H, P, save, reverse, cont, out, ws, nws);

  lt_node *nd;
  if (lt_record(c, out, "rnn_layer", rnn_layer_backward, (int)pos, ins, &nd)) goto fail;
  if (nd) {
    nd->reads = 0; /* the weights it multiplies by and the workspace are in saved[] */
    nd->i[I_MODE] = mode;
    nd->i[I_T] = T;
    nd->i[I_B] = B;
    nd->i[I_H] = H;
    nd->i[I_P] = P;
    nd->i[I_REV] = reverse != 0;
    for (int k = 0; k < IN_COUNT; k++) nd->i[I_SLOT0 + k] = slots[k];
    /* the workspace, and the weights the backward multiplies by (contiguous; the tensors themselves when so) */
    lt_node_save(nd, 0, ws);
    lt_node_save(nd, 1, cont[IN_WHH]);
    if (proj) lt_node_save(nd, 2, cont[IN_WHR]);
  }
  for (int k = 0; k < IN_COUNT; k++) lt_tensor_release(cont[k]);
  lt_tensor_release(ws);
  return out;
fail:
  for (int k = 0; k < IN_COUNT; k++) lt_tensor_release(cont[k]);
  lt_tensor_release(out);
  lt_tensor_release(ws);
  return NULL;
}
