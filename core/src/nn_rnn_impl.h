/*
 * nn_rnn_impl.h — the type-parametrised body of nn_rnn.c: the fused cells (forward and backward) and the
 * recurrence over a sequence, written once and included twice by nn_rnn.c, for float32 and for float64.
 * The includer defines:
 *   R_T        the element type (float, double)
 *   R_(name)   the name of this type's copy (name##_f32, name##_f64)
 *   R_DT       the lt_dtype (LT_F32, LT_F64); R_DATA(t) its data pointer (lt_f32, lt_f64)
 *   R_SIGMOID, R_TANH   the activations (float32: lt_simd.h's fast ones; float64: libm, the precision asked for)
 *   R_GEMM     the row-major GEMM (lt_blas_sgemm, lt_blas_dgemm)
 *   R_SMALL_M  1 when the recurrent products may take lutra's small-M GEMM over a packed W_hh (float32 only)
 * The workspace layout and the node's slots are nn_rnn.c's (ws_size, I_*, IN_*).
 */

typedef struct {
  R_T *hp, *act, *cp, *tc, *r, *hn;
} R_(rnn_ws);

static R_(rnn_ws) R_(ws_map)(R_T *base, lt_rnn_mode m, int64_t T, int64_t B, int64_t H, int64_t P, int proj) {
  R_(rnn_ws) w = { 0 };
  w.hp = base;
  w.act = w.hp + T * B * P;
  R_T *rest = w.act + T * B * gates_of(m) * H;
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
LT_VECTOR_FN static void R_(rnn_step)(int relu, int64_t B, int64_t H, const R_T *g, R_T *h, R_T *act) {
  for (int64_t k = 0; k < B * H; k++) {
    R_T v = relu ? (g[k] > 0 ? g[k] : 0) : R_TANH(g[k]);
    h[k] = v;
    act[k] = v;
  }
}

/* one batch row of lstm_step; restrict: the rows never overlap, so GCC vectorises without runtime alias checks */
__attribute__((always_inline)) static inline void R_(lstm_row)(int64_t H, const R_T *restrict g, R_T *restrict c,
                                                               R_T *restrict a, R_T *restrict tc, R_T *restrict r) {
  for (int64_t j = 0; j < H; j++) {
    R_T i = R_SIGMOID(g[j]), f = R_SIGMOID(g[H + j]), gg = R_TANH(g[2 * H + j]);
    R_T o = R_SIGMOID(g[3 * H + j]);
    R_T cn = f * c[j] + i * gg, t = R_TANH(cn);
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
LT_VECTOR_FN static void R_(lstm_step)(int64_t B, int64_t H, const R_T *g, R_T *c, R_T *a, R_T *tc, R_T *r) {
  for (int64_t b = 0; b < B; b++) R_(lstm_row)(H, g + b * 4 * H, c + b * H, a + b * 4 * H, tc + b * H, r + b * H);
}

/* one batch row of gru_step (restrict, as lstm_row) */
__attribute__((always_inline)) static inline void R_(gru_row)(int64_t H, const R_T *restrict x, const R_T *restrict gh,
                                                              const R_T *restrict hp, R_T *restrict h, R_T *restrict a,
                                                              R_T *restrict hn) {
  for (int64_t j = 0; j < H; j++) {
    R_T r = R_SIGMOID(x[j] + gh[j]), z = R_SIGMOID(x[H + j] + gh[H + j]);
    R_T n = R_TANH(x[2 * H + j] + r * gh[2 * H + j]);
    a[j] = r;
    a[H + j] = z;
    a[2 * H + j] = n;
    hn[j] = gh[2 * H + j];
    h[j] = (1 - z) * n + z * hp[j];
  }
}

/* x [B, 3H] input part, gh [B, 3H] recurrent part (with b_hh), hp = h_{t-1} -> h; a = r, z, n; hn = gh's n */
LT_VECTOR_FN static void R_(gru_step)(int64_t B, int64_t H, const R_T *x, const R_T *gh, const R_T *hp, R_T *h, R_T *a,
                                      R_T *hn) {
  for (int64_t b = 0; b < B; b++)
    R_(gru_row)(H, x + b * 3 * H, gh + b * 3 * H, hp + b * H, h + b * H, a + b * 3 * H, hn + b * H);
}

/* ---- backward cells: dh = gradient of h_t (or of r_t = o tanh(c_t) when projected) ------------------------ */

LT_VECTOR_FN static void R_(rnn_step_back)(int relu, int64_t n, const R_T *dh, const R_T *act, R_T *dg) {
  for (int64_t k = 0; k < n; k++) dg[k] = dh[k] * (relu ? (act[k] > 0 ? (R_T)1 : (R_T)0) : 1 - act[k] * act[k]);
}

__attribute__((always_inline)) static inline void R_(lstm_row_back)(int64_t H, const R_T *restrict dh,
                                                                    const R_T *restrict a, const R_T *restrict cp,
                                                                    const R_T *restrict tc, R_T *restrict dc,
                                                                    R_T *restrict dg) {
  for (int64_t j = 0; j < H; j++) {
    R_T i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j], t = tc[j];
    R_T d = dc[j] + dh[j] * o * (1 - t * t);
    dg[j] = d * g * i * (1 - i);
    dg[H + j] = d * cp[j] * f * (1 - f);
    dg[2 * H + j] = d * i * (1 - g * g);
    dg[3 * H + j] = dh[j] * t * o * (1 - o);
    dc[j] = d * f;
  }
}

/* dc in: the gradient reaching c_t from step t+1 (or c_n), out: the gradient of c_{t-1} */
LT_VECTOR_FN static void R_(lstm_step_back)(int64_t B, int64_t H, const R_T *dh, const R_T *a, const R_T *cp,
                                            const R_T *tc, R_T *dc, R_T *dg) {
  for (int64_t b = 0; b < B; b++)
    R_(lstm_row_back)(H, dh + b * H, a + b * 4 * H, cp + b * H, tc + b * H, dc + b * H, dg + b * 4 * H);
}

__attribute__((always_inline)) static inline void R_(gru_row_back)(int64_t H, const R_T *restrict dh,
                                                                   const R_T *restrict a, const R_T *restrict hn,
                                                                   const R_T *restrict hp, R_T *restrict dx,
                                                                   R_T *restrict dgh, R_T *restrict dhp) {
  for (int64_t j = 0; j < H; j++) {
    R_T r = a[j], z = a[H + j], n = a[2 * H + j], d = dh[j];
    R_T dn = d * (1 - z) * (1 - n * n), dz = d * (hp[j] - n) * z * (1 - z), dr = dn * hn[j] * r * (1 - r);
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
LT_VECTOR_FN static void R_(gru_step_back)(int64_t B, int64_t H, const R_T *dh, const R_T *a, const R_T *hn,
                                           const R_T *hp, R_T *dx, R_T *dgh, R_T *dhp) {
  for (int64_t b = 0; b < B; b++) R_(gru_row_back)
  (H, dh + b * H, a + b * 3 * H, hn + b * H, hp + b * H, dx + b * 3 * H, dgh + b * 3 * H, dhp + b * H);
}

static void R_(add_rows)(R_T *dst, const R_T *src, int64_t n) {
  for (int64_t k = 0; k < n; k++) dst[k] += src[k];
}

/* y [B, n] = bias broadcast over rows (or 0), plus x [B, n] when given */
static void R_(rows_init)(R_T *y, const R_T *bias, const R_T *x, int64_t B, int64_t n) {
  for (int64_t b = 0; b < B; b++) {
    R_T *yb = y + b * n;
    if (x) memcpy(yb, x + b * n, sizeof(R_T) * (size_t)n);
    else memset(yb, 0, sizeof(R_T) * (size_t)n);
    if (bias) R_(add_rows)(yb, bias, n);
  }
}

/* ---- backward ------------------------------------------------------------------------------------------------ */

/* The gradients of one layer's node from g, the contiguous gradient of its flat output (nn_rnn.c's
 * rnn_layer_backward checked the BLAS and took g contiguous). */
static int R_(rnn_backward)(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_rnn_mode mode = (lt_rnn_mode)n->i[I_MODE];
  int64_t T = n->i[I_T], B = n->i[I_B], H = n->i[I_H], P = n->i[I_P], GH = gates_of(mode) * H;
  int rev = (int)n->i[I_REV];
  lt_tensor *in[IN_COUNT];
  for (int k = 0; k < IN_COUNT; k++) in[k] = n->i[I_SLOT0 + k] >= 0 ? n->inputs[n->i[I_SLOT0 + k]] : NULL;
  int proj = in[IN_WHR] != NULL;
  const R_T *whh = R_DATA(n->saved[1]), *whr = proj ? R_DATA(n->saved[2]) : NULL;
  R_(rnn_ws) w = R_(ws_map)(R_DATA(n->saved[0]), mode, T, B, H, P, proj);
  const R_T *dout = R_DATA(g), *dcn = mode == LT_RNN_LSTM ? dout + T * B * P : NULL;

  int64_t sh_xg[3] = { T, B, GH }, sh_bp[2] = { B, P }, sh_bh[2] = { B, H };
  /* scratch: dgh [T, B, GH] (GRU), dht [T, B, P] (projected LSTM), per-step rows dh [B, P], dr [B, H], dc [B, H] */
  int64_t nscratch = (mode == LT_RNN_GRU ? T * B * GH : 0) + (proj ? T * B * P : 0) + B * P + 2 * B * H;
  lt_tensor *dxg = lt_tensor_new(c, R_DT, 3, sh_xg);
  lt_tensor *dhrec = dxg ? lt_tensor_zeros(c, R_DT, 2, sh_bp) : NULL;
  lt_tensor *dc = dhrec && mode == LT_RNN_LSTM ? lt_tensor_zeros(c, R_DT, 2, sh_bh) : NULL;
  lt_tensor *scr = dhrec && (mode != LT_RNN_LSTM || dc) ? lt_tensor_new(c, R_DT, 1, &nscratch) : NULL;
  if (!scr) {
    lt_tensor_release(dxg);
    lt_tensor_release(dhrec);
    lt_tensor_release(dc);
    return LT_ERR;
  }
  R_T *pdx = R_DATA(dxg), *pdh = R_DATA(dhrec), *pdc = dc ? R_DATA(dc) : NULL;
  R_T *dgh = mode == LT_RNN_GRU ? R_DATA(scr) : pdx;
  R_T *dht = proj ? R_DATA(scr) + (mode == LT_RNN_GRU ? T * B * GH : 0) : NULL;
  R_T *dh = R_DATA(scr) + (mode == LT_RNN_GRU ? T * B * GH : 0) + (proj ? T * B * P : 0);
  R_T *dr = dh + B * P, *tmp = dr + B * H;
  if (pdc && dcn) memcpy(pdc, dcn, sizeof(R_T) * (size_t)(B * H));
#if R_SMALL_M
  int small_m = recurrent_small_m(B, P, GH);
  /* W_hh [GH x P] is laid out along dh's columns already; packed into panels, each step's reads are contiguous
   * (a quarter faster at 32x256x1024), which pays for the copy from 3 steps */
  size_t wpk_bytes = small_m && T > 2 ? sizeof(float) * (size_t)lt_gemm_small_m_packed_size(P, GH) : 0;
  float *wpk = wpk_bytes ? lt_alloc(wpk_bytes) : NULL;
  if (wpk) lt_gemm_small_m_pack_n(whh, GH, P, wpk);
#endif

  for (int64_t s = T - 1; s >= 0; s--) {
    int64_t t = rev ? T - 1 - s : s;
    int64_t oP = t * B * P, oH = t * B * H, oG = t * B * GH;
    /* dh = dL/dh_t: the output's gradient plus what step t+1 sent back */
    for (int64_t k = 0; k < B * P; k++) dh[k] = dout[oP + k] + pdh[k];
    const R_T *dcell = dh; /* the gradient of the cell's own output (r_t when projected) */
    if (proj) {
      memcpy(dht + oP, dh, sizeof(R_T) * (size_t)(B * P));
      R_GEMM(0, 0, (int)B, (int)H, (int)P, 1, dh, (int)P, whr, (int)H, 0, dr, (int)H);
      dcell = dr;
    }
    switch (mode) {
      case LT_RNN_TANH:
      case LT_RNN_RELU: R_(rnn_step_back)(mode == LT_RNN_RELU, B * H, dcell, w.act + oG, pdx + oG); break;
      case LT_RNN_LSTM: R_(lstm_step_back)(B, H, dcell, w.act + oG, w.cp + oH, w.tc + oH, pdc, pdx + oG); break;
      case LT_RNN_GRU: R_(gru_step_back)(B, H, dcell, w.act + oG, w.hn + oH, w.hp + oP, pdx + oG, dgh + oG, tmp); break;
    }
    /* dh_{t-1} = dgh_t W_hh (+ dh_t z for GRU) */
    if (mode == LT_RNN_GRU) memcpy(pdh, tmp, sizeof(R_T) * (size_t)(B * P));
#if R_SMALL_M
    if (wpk)
      lt_gemm_small_m(B, P, GH, dgh + oG, GH, wpk, LT_GEMM_SM_NR, LT_GEMM_SM_NR * GH, pdh, P, mode == LT_RNN_GRU,
                      small_m);
    else if (small_m) /* read in place */
      lt_gemm_small_m(B, P, GH, dgh + oG, GH, whh, P, LT_GEMM_SM_NR, pdh, P, mode == LT_RNN_GRU, small_m);
    else
#endif
      R_GEMM(0, 0, (int)B, (int)P, (int)GH, 1, dgh + oG, (int)GH, whh, (int)P, mode == LT_RNN_GRU ? 1 : 0, pdh, (int)P);
  }

#if R_SMALL_M
  if (wpk) lt_free(wpk, wpk_bytes);
#endif
  int st = LT_OK;
  if (in[IN_WHH] && in[IN_WHH]->requires_grad) {
    int64_t sh[2] = { GH, P };
    lt_tensor *d = lt_tensor_new(c, R_DT, 2, sh);
    if (!d) st = LT_ERR;
    else {
      R_GEMM(1, 0, (int)GH, (int)P, (int)(T * B), 1, dgh, (int)GH, w.hp, (int)P, 0, R_DATA(d), (int)P);
      gin[n->i[I_SLOT0 + IN_WHH]] = d;
    }
  }
  if (st == LT_OK && in[IN_BHH] && in[IN_BHH]->requires_grad) {
    lt_tensor *d = lt_tensor_zeros(c, R_DT, 1, &GH);
    if (!d) st = LT_ERR;
    else {
      for (int64_t r = 0; r < T * B; r++) R_(add_rows)(R_DATA(d), dgh + r * GH, GH);
      gin[n->i[I_SLOT0 + IN_BHH]] = d;
    }
  }
  if (st == LT_OK && proj && in[IN_WHR]->requires_grad) {
    int64_t sh[2] = { P, H };
    lt_tensor *d = lt_tensor_new(c, R_DT, 2, sh);
    if (!d) st = LT_ERR;
    else {
      R_GEMM(1, 0, (int)P, (int)H, (int)(T * B), 1, dht, (int)P, w.r, (int)H, 0, R_DATA(d), (int)H);
      gin[n->i[I_SLOT0 + IN_WHR]] = d;
    }
  }
  if (in[IN_XG]->requires_grad) gin[n->i[I_SLOT0 + IN_XG]] = lt_tensor_retain(dxg);
  if (in[IN_H0]->requires_grad) gin[n->i[I_SLOT0 + IN_H0]] = lt_tensor_retain(dhrec);
  if (dc && in[IN_C0]->requires_grad) gin[n->i[I_SLOT0 + IN_C0]] = lt_tensor_retain(dc);
  lt_tensor_release(dxg);
  lt_tensor_release(dhrec);
  lt_tensor_release(dc);
  lt_tensor_release(scr);
  return st;
}

/* ---- forward ------------------------------------------------------------------------------------------------- */

/* The recurrence over the contiguous inputs cont[IN_*] into out (outputs, then LSTM's c_n) and ws (the saved
 * workspace of TS steps, then this step's gates and the running c): nn_rnn.c's lt_nn_rnn_layer checked and
 * allocated them. */
static void R_(rnn_forward)(lt_rnn_mode mode, int64_t T, int64_t B, int64_t H, int64_t P, int save, int reverse,
                            lt_tensor *const *cont, lt_tensor *out, lt_tensor *ws, int64_t nws) {
  int64_t GH = gates_of(mode) * H, TS = save ? T : 1;
  int proj = cont[IN_WHR] != NULL;
  const R_T *px = R_DATA(cont[IN_XG]), *pw = R_DATA(cont[IN_WHH]);
  const R_T *pb = cont[IN_BHH] ? R_DATA(cont[IN_BHH]) : NULL, *pwr = proj ? R_DATA(cont[IN_WHR]) : NULL;
  R_T *po = R_DATA(out);
  R_(rnn_ws) w = R_(ws_map)(R_DATA(ws), mode, TS, B, H, P, proj);
  R_T *gates = R_DATA(ws) + nws, *cc = gates + B * GH;
  if (mode == LT_RNN_LSTM) memcpy(cc, R_DATA(cont[IN_C0]), sizeof(R_T) * (size_t)(B * H));
  const R_T *hprev = R_DATA(cont[IN_H0]);
#if R_SMALL_M
  int small_m = recurrent_small_m(B, GH, P);
  size_t wpk_bytes = small_m ? sizeof(float) * (size_t)lt_gemm_small_m_packed_size(GH, P) : 0;
  float *wpk = small_m ? lt_alloc(wpk_bytes) : NULL; /* W_hh^T packed for every step's product */
  if (wpk) lt_gemm_small_m_pack_t(pw, GH, P, wpk);
#endif
  for (int64_t s = 0; s < T; s++) {
    int64_t t = reverse ? T - 1 - s : s;
    int64_t oP = t * B * P, ts = save ? t : 0; /* ts: this step's place in the workspace */
    int64_t wP = ts * B * P, oH = ts * B * H, oG = ts * B * GH, xG = t * B * GH;
    if (save) memcpy(w.hp + wP, hprev, sizeof(R_T) * (size_t)(B * P));
    /* gates = xg_t + b_hh + h_{t-1} W_hh^T (GRU keeps the recurrent part apart: r multiplies its n gate) */
    R_(rows_init)(gates, pb, mode == LT_RNN_GRU ? NULL : px + xG, B, GH);
#if R_SMALL_M
    if (wpk) lt_gemm_small_m(B, GH, P, hprev, P, wpk, LT_GEMM_SM_NR, LT_GEMM_SM_NR * P, gates, GH, 1, small_m);
    else
#endif
      R_GEMM(0, 1, (int)B, (int)GH, (int)P, 1, hprev, (int)P, pw, (int)P, 1, gates, (int)GH);
    R_T *h = po + oP;
    switch (mode) {
      case LT_RNN_TANH:
      case LT_RNN_RELU: R_(rnn_step)(mode == LT_RNN_RELU, B, H, gates, h, w.act + oG); break;
      case LT_RNN_GRU: R_(gru_step)(B, H, px + xG, gates, hprev, h, w.act + oG, w.hn + oH); break;
      case LT_RNN_LSTM:
        if (save) memcpy(w.cp + oH, cc, sizeof(R_T) * (size_t)(B * H));
        R_(lstm_step)(B, H, gates, cc, w.act + oG, w.tc + oH, proj ? w.r + oH : h);
        if (proj) R_GEMM(0, 1, (int)B, (int)P, (int)H, 1, w.r + oH, (int)H, pwr, (int)H, 0, h, (int)P);
        break;
    }
    hprev = h;
  }
  if (mode == LT_RNN_LSTM) memcpy(po + T * B * P, cc, sizeof(R_T) * (size_t)(B * H));
#if R_SMALL_M
  if (wpk) lt_free(wpk, wpk_bytes);
#endif
}
