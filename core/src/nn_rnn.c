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
 */
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

/* The saved workspace, one buffer: hp [T, B, P] = h_{t-1} per step; act [T, B, G*H] = the activated gates
 * (RNN: h itself); then LSTM: cp [T, B, H] = c_{t-1}, tc [T, B, H] = tanh(c_t), r [T, B, H] = o * tanh(c_t)
 * when projected; GRU: hn [T, B, H] = the recurrent part of the n gate (h W_hn^T + b_hn). */
typedef struct {
  float *hp, *act, *cp, *tc, *r, *hn;
} rnn_ws;

static int64_t ws_size(lt_rnn_mode m, int64_t T, int64_t B, int64_t H, int64_t P, int proj) {
  int64_t n = T * B * P + T * B * gates_of(m) * H;
  if (m == LT_RNN_LSTM) n += T * B * H * (proj ? 3 : 2);
  if (m == LT_RNN_GRU) n += T * B * H;
  return n;
}

static rnn_ws ws_map(float *base, lt_rnn_mode m, int64_t T, int64_t B, int64_t H, int64_t P, int proj) {
  rnn_ws w = { 0 };
  w.hp = base;
  w.act = w.hp + T * B * P;
  float *rest = w.act + T * B * gates_of(m) * H;
  if (m == LT_RNN_LSTM) {
    w.cp = rest;
    w.tc = w.cp + T * B * H;
    if (proj) w.r = w.tc + T * B * H;
  }
  if (m == LT_RNN_GRU) w.hn = rest;
  return w;
}

/* ---- the cells, per step over [B, H] rows (vectorised clones) ------------------------------------------------ */

/* g [B, H] = xg + gh pre-activation -> h (and act = h) */
LT_VECTOR_FN static void rnn_step(int relu, int64_t B, int64_t H, const float *g, float *h, float *act) {
  for (int64_t k = 0; k < B * H; k++) {
    float v = relu ? (g[k] > 0 ? g[k] : 0) : lt_tanhf(g[k]);
    h[k] = v;
    act[k] = v;
  }
}

/* one batch row of lstm_step; restrict: the rows never overlap, so GCC vectorises without runtime alias checks */
__attribute__((always_inline)) static inline void lstm_row(int64_t H, const float *restrict g, float *restrict c,
                                                           float *restrict a, float *restrict tc, float *restrict r) {
  for (int64_t j = 0; j < H; j++) {
    float i = lt_sigmoidf(g[j]), f = lt_sigmoidf(g[H + j]), gg = lt_tanhf(g[2 * H + j]);
    float o = lt_sigmoidf(g[3 * H + j]);
    float cn = f * c[j] + i * gg, t = lt_tanhf(cn);
    a[j] = i;
    a[H + j] = f;
    a[2 * H + j] = gg;
    a[3 * H + j] = o;
    c[j] = cn;
    tc[j] = t;
    r[j] = o * t;
  }
}

/* g [B, 4H] pre-activation, c [B, H] in: c_{t-1}, out: c_t; a [B, 4H] activated; tc = tanh(c_t); r = o tanh(c_t) */
LT_VECTOR_FN static void lstm_step(int64_t B, int64_t H, const float *g, float *c, float *a, float *tc, float *r) {
  for (int64_t b = 0; b < B; b++) lstm_row(H, g + b * 4 * H, c + b * H, a + b * 4 * H, tc + b * H, r + b * H);
}

/* one batch row of gru_step (restrict, as lstm_row) */
__attribute__((always_inline)) static inline void gru_row(int64_t H, const float *restrict x, const float *restrict gh,
                                                          const float *restrict hp, float *restrict h,
                                                          float *restrict a, float *restrict hn) {
  for (int64_t j = 0; j < H; j++) {
    float r = lt_sigmoidf(x[j] + gh[j]), z = lt_sigmoidf(x[H + j] + gh[H + j]);
    float n = lt_tanhf(x[2 * H + j] + r * gh[2 * H + j]);
    a[j] = r;
    a[H + j] = z;
    a[2 * H + j] = n;
    hn[j] = gh[2 * H + j];
    h[j] = (1 - z) * n + z * hp[j];
  }
}

/* x [B, 3H] input part, gh [B, 3H] recurrent part (with b_hh), hp = h_{t-1} -> h; a = r, z, n; hn = gh's n */
LT_VECTOR_FN static void gru_step(int64_t B, int64_t H, const float *x, const float *gh, const float *hp, float *h,
                                  float *a, float *hn) {
  for (int64_t b = 0; b < B; b++)
    gru_row(H, x + b * 3 * H, gh + b * 3 * H, hp + b * H, h + b * H, a + b * 3 * H, hn + b * H);
}

/* ---- backward cells: dh = gradient of h_t (or of r_t = o tanh(c_t) when projected) ------------------------ */

LT_VECTOR_FN static void rnn_step_back(int relu, int64_t n, const float *dh, const float *act, float *dg) {
  for (int64_t k = 0; k < n; k++) dg[k] = dh[k] * (relu ? (act[k] > 0 ? 1.0f : 0.0f) : 1 - act[k] * act[k]);
}

__attribute__((always_inline)) static inline void lstm_row_back(int64_t H, const float *restrict dh,
                                                                const float *restrict a, const float *restrict cp,
                                                                const float *restrict tc, float *restrict dc,
                                                                float *restrict dg) {
  for (int64_t j = 0; j < H; j++) {
    float i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j], t = tc[j];
    float d = dc[j] + dh[j] * o * (1 - t * t);
    dg[j] = d * g * i * (1 - i);
    dg[H + j] = d * cp[j] * f * (1 - f);
    dg[2 * H + j] = d * i * (1 - g * g);
    dg[3 * H + j] = dh[j] * t * o * (1 - o);
    dc[j] = d * f;
  }
}

/* dc in: the gradient reaching c_t from step t+1 (or c_n), out: the gradient of c_{t-1} */
LT_VECTOR_FN static void lstm_step_back(int64_t B, int64_t H, const float *dh, const float *a, const float *cp,
                                        const float *tc, float *dc, float *dg) {
  for (int64_t b = 0; b < B; b++)
    lstm_row_back(H, dh + b * H, a + b * 4 * H, cp + b * H, tc + b * H, dc + b * H, dg + b * 4 * H);
}

__attribute__((always_inline)) static inline void gru_row_back(int64_t H, const float *restrict dh,
                                                               const float *restrict a, const float *restrict hn,
                                                               const float *restrict hp, float *restrict dx,
                                                               float *restrict dgh, float *restrict dhp) {
  for (int64_t j = 0; j < H; j++) {
    float r = a[j], z = a[H + j], n = a[2 * H + j], d = dh[j];
    float dn = d * (1 - z) * (1 - n * n), dz = d * (hp[j] - n) * z * (1 - z), dr = dn * hn[j] * r * (1 - r);
    dx[j] = dr;
    dgh[j] = dr;
    dx[H + j] = dz;
    dgh[H + j] = dz;
    dx[2 * H + j] = dn;
    dgh[2 * H + j] = dn * r;
    dhp[j] = d * z;
  }
}

/* -> dx [B, 3H] (gradient of xg), dgh [B, 3H] (of gh), dhp = dh * z (the direct part of dh_{t-1}) */
LT_VECTOR_FN static void gru_step_back(int64_t B, int64_t H, const float *dh, const float *a, const float *hn,
                                       const float *hp, float *dx, float *dgh, float *dhp) {
  for (int64_t b = 0; b < B; b++)
    gru_row_back(H, dh + b * H, a + b * 3 * H, hn + b * H, hp + b * H, dx + b * 3 * H, dgh + b * 3 * H, dhp + b * H);
}

static void add_rows(float *dst, const float *src, int64_t n) {
  for (int64_t k = 0; k < n; k++) dst[k] += src[k];
}

/* y [B, n] = bias broadcast over rows (or 0), plus x [B, n] when given */
static void rows_init(float *y, const float *bias, const float *x, int64_t B, int64_t n) {
  for (int64_t b = 0; b < B; b++) {
    float *yb = y + b * n;
    if (x) memcpy(yb, x + b * n, sizeof(float) * (size_t)n);
    else memset(yb, 0, sizeof(float) * (size_t)n);
    if (bias) add_rows(yb, bias, n);
  }
}

/* ---- backward ------------------------------------------------------------------------------------------------ */

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

static int rnn_layer_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  lt_gemm_bf16_scope(c);
  if (lt_blas_ready(c)) return LT_ERR;
  lt_rnn_mode mode = (lt_rnn_mode)n->i[I_MODE];
  int64_t T = n->i[I_T], B = n->i[I_B], H = n->i[I_H], P = n->i[I_P], GH = gates_of(mode) * H;
  int rev = (int)n->i[I_REV];
  lt_tensor *in[IN_COUNT];
  for (int k = 0; k < IN_COUNT; k++) in[k] = n->i[I_SLOT0 + k] >= 0 ? n->inputs[n->i[I_SLOT0 + k]] : NULL;
  int proj = in[IN_WHR] != NULL;
  lt_tensor *g = lt_op_contiguous(c, gout);
  if (!g) return LT_ERR;
  const float *whh = lt_f32(n->saved[1]), *whr = proj ? lt_f32(n->saved[2]) : NULL;
  rnn_ws w = ws_map(lt_f32(n->saved[0]), mode, T, B, H, P, proj);
  const float *dout = lt_f32(g), *dcn = mode == LT_RNN_LSTM ? dout + T * B * P : NULL;

  int64_t sh_xg[3] = { T, B, GH }, sh_bp[2] = { B, P }, sh_bh[2] = { B, H };
  /* scratch: dgh [T, B, GH] (GRU), dht [T, B, P] (projected LSTM), per-step rows dh [B, P], dr [B, H], dc [B, H] */
  int64_t nscratch = (mode == LT_RNN_GRU ? T * B * GH : 0) + (proj ? T * B * P : 0) + B * P + 2 * B * H;
  lt_tensor *dxg = lt_tensor_new(c, LT_F32, 3, sh_xg);
  lt_tensor *dhrec = dxg ? lt_tensor_zeros(c, LT_F32, 2, sh_bp) : NULL;
  lt_tensor *dc = dhrec && mode == LT_RNN_LSTM ? lt_tensor_zeros(c, LT_F32, 2, sh_bh) : NULL;
  lt_tensor *scr = dhrec && (mode != LT_RNN_LSTM || dc) ? lt_tensor_new(c, LT_F32, 1, &nscratch) : NULL;
  if (!scr) {
    lt_tensor_release(g);
    lt_tensor_release(dxg);
    lt_tensor_release(dhrec);
    lt_tensor_release(dc);
    return LT_ERR;
  }
  float *pdx = lt_f32(dxg), *pdh = lt_f32(dhrec), *pdc = dc ? lt_f32(dc) : NULL;
  float *dgh = mode == LT_RNN_GRU ? lt_f32(scr) : pdx;
  float *dht = proj ? lt_f32(scr) + (mode == LT_RNN_GRU ? T * B * GH : 0) : NULL;
  float *dh = lt_f32(scr) + (mode == LT_RNN_GRU ? T * B * GH : 0) + (proj ? T * B * P : 0);
  float *dr = dh + B * P, *tmp = dr + B * H;
  if (pdc && dcn) memcpy(pdc, dcn, sizeof(float) * (size_t)(B * H));
  int small_m = recurrent_small_m(B, P, GH);
  /* W_hh [GH x P] is laid out along dh's columns already; packed into panels, each step's reads are contiguous
   * (a quarter faster at 32x256x1024), which pays for the copy from 3 steps */
  size_t wpk_bytes = small_m && T > 2 ? sizeof(float) * (size_t)lt_gemm_small_m_packed_size(P, GH) : 0;
  float *wpk = wpk_bytes ? lt_alloc(wpk_bytes) : NULL;
  if (wpk) lt_gemm_small_m_pack_n(whh, GH, P, wpk);

  for (int64_t s = T - 1; s >= 0; s--) {
    int64_t t = rev ? T - 1 - s : s;
    int64_t oP = t * B * P, oH = t * B * H, oG = t * B * GH;
    /* dh = dL/dh_t: the output's gradient plus what step t+1 sent back */
    for (int64_t k = 0; k < B * P; k++) dh[k] = dout[oP + k] + pdh[k];
    const float *dcell = dh; /* the gradient of the cell's own output (r_t when projected) */
    if (proj) {
      memcpy(dht + oP, dh, sizeof(float) * (size_t)(B * P));
      lt_blas_sgemm(0, 0, (int)B, (int)H, (int)P, 1, dh, (int)P, whr, (int)H, 0, dr, (int)H);
      dcell = dr;
    }
    switch (mode) {
      case LT_RNN_TANH:
      case LT_RNN_RELU: rnn_step_back(mode == LT_RNN_RELU, B * H, dcell, w.act + oG, pdx + oG); break;
      case LT_RNN_LSTM: lstm_step_back(B, H, dcell, w.act + oG, w.cp + oH, w.tc + oH, pdc, pdx + oG); break;
      case LT_RNN_GRU: gru_step_back(B, H, dcell, w.act + oG, w.hn + oH, w.hp + oP, pdx + oG, dgh + oG, tmp); break;
    }
    /* dh_{t-1} = dgh_t W_hh (+ dh_t z for GRU) */
    if (mode == LT_RNN_GRU) memcpy(pdh, tmp, sizeof(float) * (size_t)(B * P));
    if (wpk)
      lt_gemm_small_m(B, P, GH, dgh + oG, GH, wpk, LT_GEMM_SM_NR, LT_GEMM_SM_NR * GH, pdh, P, mode == LT_RNN_GRU,
                      small_m);
    else if (small_m) /* read in place */
      lt_gemm_small_m(B, P, GH, dgh + oG, GH, whh, P, LT_GEMM_SM_NR, pdh, P, mode == LT_RNN_GRU, small_m);
    else
      lt_blas_sgemm(0, 0, (int)B, (int)P, (int)GH, 1, dgh + oG, (int)GH, whh, (int)P, mode == LT_RNN_GRU ? 1 : 0, pdh,
                    (int)P);
  }

  if (wpk) lt_free(wpk, wpk_bytes);
  int st = LT_OK;
  if (in[IN_WHH] && in[IN_WHH]->requires_grad) {
    int64_t sh[2] = { GH, P };
    lt_tensor *d = lt_tensor_new(c, LT_F32, 2, sh);
    if (!d) st = LT_ERR;
    else {
      lt_blas_sgemm(1, 0, (int)GH, (int)P, (int)(T * B), 1, dgh, (int)GH, w.hp, (int)P, 0, lt_f32(d), (int)P);
      gin[n->i[I_SLOT0 + IN_WHH]] = d;
    }
  }
  if (st == LT_OK && in[IN_BHH] && in[IN_BHH]->requires_grad) {
    lt_tensor *d = lt_tensor_zeros(c, LT_F32, 1, &GH);
    if (!d) st = LT_ERR;
    else {
      for (int64_t r = 0; r < T * B; r++) add_rows(lt_f32(d), dgh + r * GH, GH);
      gin[n->i[I_SLOT0 + IN_BHH]] = d;
    }
  }
  if (st == LT_OK && proj && in[IN_WHR]->requires_grad) {
    int64_t sh[2] = { P, H };
    lt_tensor *d = lt_tensor_new(c, LT_F32, 2, sh);
    if (!d) st = LT_ERR;
    else {
      lt_blas_sgemm(1, 0, (int)P, (int)H, (int)(T * B), 1, dht, (int)P, w.r, (int)H, 0, lt_f32(d), (int)H);
      gin[n->i[I_SLOT0 + IN_WHR]] = d;
    }
  }
  if (in[IN_XG]->requires_grad) gin[n->i[I_SLOT0 + IN_XG]] = lt_tensor_retain(dxg);
  if (in[IN_H0]->requires_grad) gin[n->i[I_SLOT0 + IN_H0]] = lt_tensor_retain(dhrec);
  if (dc && in[IN_C0]->requires_grad) gin[n->i[I_SLOT0 + IN_C0]] = lt_tensor_retain(dc);
  lt_tensor_release(g);
  lt_tensor_release(dxg);
  lt_tensor_release(dhrec);
  lt_tensor_release(dc);
  lt_tensor_release(scr);
  return st;
}

/* ---- forward ------------------------------------------------------------------------------------------------- */

static int check_shape(lt_ctx *c, const char *what, const lt_tensor *t, int nd, const int64_t *want) {
  char got[128], exp[128];
  int ok = t->ndim == nd;
  for (int d = 0; ok && d < nd; d++) ok = t->shape[d] == want[d];
  if (ok) return lt_check_dtype(c, "rnn_layer", what, t, LT_F32);
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
  if (lt_check_dtype(c, "rnn_layer", "xg", xg, LT_F32)) return NULL;
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
  if (check_shape(c, "w_hh", w_hh, 2, s_whh) || (b_hh && check_shape(c, "b_hh", b_hh, 1, &GH)) ||
      check_shape(c, "h0", h0, 2, s_h0) || (c0 && check_shape(c, "c0", c0, 2, s_c0)) ||
      (w_hr && check_shape(c, "w_hr", w_hr, 2, s_whr)))
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
  out = lt_tensor_new(c, LT_F32, 1, &nout);
  ws = out ? lt_tensor_new(c, LT_F32, 1, &ntot) : NULL;
  if (!ws) goto fail;
  const float *px = lt_f32(cont[IN_XG]), *pw = lt_f32(cont[IN_WHH]);
  const float *pb = b_hh ? lt_f32(cont[IN_BHH]) : NULL, *pwr = proj ? lt_f32(cont[IN_WHR]) : NULL;
  float *po = lt_f32(out);
  rnn_ws w = ws_map(lt_f32(ws), mode, TS, B, H, P, proj);
  float *gates = lt_f32(ws) + nws, *cc = gates + B * GH;
  if (mode == LT_RNN_LSTM) memcpy(cc, lt_f32(cont[IN_C0]), sizeof(float) * (size_t)(B * H));
  const float *hprev = lt_f32(cont[IN_H0]);
  int small_m = recurrent_small_m(B, GH, P);
  size_t wpk_bytes = small_m ? sizeof(float) * (size_t)lt_gemm_small_m_packed_size(GH, P) : 0;
  float *wpk = small_m ? lt_alloc(wpk_bytes) : NULL; /* W_hh^T packed for every step's product */
  if (wpk) lt_gemm_small_m_pack_t(pw, GH, P, wpk);
  for (int64_t s = 0; s < T; s++) {
    int64_t t = reverse ? T - 1 - s : s;
    int64_t oP = t * B * P, ts = save ? t : 0; /* ts: this step's place in the workspace */
    int64_t wP = ts * B * P, oH = ts * B * H, oG = ts * B * GH, xG = t * B * GH;
    if (save) memcpy(w.hp + wP, hprev, sizeof(float) * (size_t)(B * P));
    /* gates = xg_t + b_hh + h_{t-1} W_hh^T (GRU keeps the recurrent part apart: r multiplies its n gate) */
    rows_init(gates, pb, mode == LT_RNN_GRU ? NULL : px + xG, B, GH);
    if (wpk) lt_gemm_small_m(B, GH, P, hprev, P, wpk, LT_GEMM_SM_NR, LT_GEMM_SM_NR * P, gates, GH, 1, small_m);
    else lt_blas_sgemm(0, 1, (int)B, (int)GH, (int)P, 1, hprev, (int)P, pw, (int)P, 1, gates, (int)GH);
    float *h = po + oP;
    switch (mode) {
      case LT_RNN_TANH:
      case LT_RNN_RELU: rnn_step(mode == LT_RNN_RELU, B, H, gates, h, w.act + oG); break;
      case LT_RNN_GRU: gru_step(B, H, px + xG, gates, hprev, h, w.act + oG, w.hn + oH); break;
      case LT_RNN_LSTM:
        if (save) memcpy(w.cp + oH, cc, sizeof(float) * (size_t)(B * H));
        lstm_step(B, H, gates, cc, w.act + oG, w.tc + oH, proj ? w.r + oH : h);
        if (proj) lt_blas_sgemm(0, 1, (int)B, (int)P, (int)H, 1, w.r + oH, (int)H, pwr, (int)H, 0, h, (int)P);
        break;
    }
    hprev = h;
  }
  if (mode == LT_RNN_LSTM) memcpy(po + T * B * P, cc, sizeof(float) * (size_t)(B * H));
  if (wpk) lt_free(wpk, wpk_bytes);

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
