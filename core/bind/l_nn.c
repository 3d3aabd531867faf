/*
 * l_nn.c — Lua binding for conv2d, pooling, batch/layer norm, embedding, dropout and the fused losses.
 *
 * The functions land in `lutra.core._nn` (positional arguments, no option tables); lua/lutra/F/init.lua
 * wraps them with PyTorch-style options and checks. Class targets, ignore_index and embedding indices
 * arrive 1-based and are shifted to 0-based here.
 */
#include <math.h>
#include <string.h>

#include "l_util.h"
#include "lt_nn.h"

#define T(i, name) l_checktensor(L, (i), (name))

static lt_tensor *opt_tensor(lua_State *L, int idx, const char *fname) {
  return lua_isnoneornil(L, idx) ? NULL : T(idx, fname);
}

/* A kernel size, stride or padding: an int (the core checks the ranges that depend on the op). */
static int check_int(lua_State *L, int idx, const char *fname, const char *what) {
  return (int)l_checkint(L, idx, fname, what, -((int64_t)1 << 30), (int64_t)1 << 30);
}

/* eps of the norms: finite and >= 0 (a negative eps puts NaN in the output without a word). */
static double check_eps(lua_State *L, int idx, const char *fname) {
  double eps = l_optnumber(L, idx, 1e-5);
  if (!(eps >= 0 && eps < INFINITY)) l_errorf(L, "%s: eps must be a finite number >= 0, got %g", fname, eps);
  return eps;
}

static lt_reduction check_reduction(lua_State *L, int idx, const char *fname) {
  const char *s = l_optstring(L, idx, "mean");
  if (!strcmp(s, "mean")) return LT_REDUCE_MEAN;
  if (!strcmp(s, "sum")) return LT_REDUCE_SUM;
  if (!strcmp(s, "none")) return LT_REDUCE_NONE;
  luaL_error(L, "%s: reduction must be \"mean\", \"sum\" or \"none\", got \"%s\"", fname, s);
  return LT_REDUCE_MEAN;
}

/* 1-based int64 targets/indices -> a 0-based copy (the core checks the upper range and reports it 1-based);
 * other dtypes are passed through retained so the core reports the dtype. Values below -2^53 are neither a
 * class, an index nor an ignore_index (those are checked to lie within +-2^53), and INT64_MIN - 1 would
 * overflow: refused here, by name. */
static lt_tensor *shift_index(lua_State *L, lt_tensor *t, const char *fname, const char *what, const char *whats) {
  if (t->dtype != LT_I64) return lt_tensor_retain(t);
  return l_shift_1based(L, t, -L_INT_MAX, fname, what, whats);
}

static int l_conv2d(lua_State *L) {
  lt_tensor *x = T(1, "conv2d"), *w = T(2, "conv2d"), *b = opt_tensor(L, 3, "conv2d");
  int sh = check_int(L, 4, "conv2d", "stride"), sw = check_int(L, 5, "conv2d", "stride");
  int ph = check_int(L, 6, "conv2d", "padding"), pw = check_int(L, 7, "conv2d", "padding");
  lt_act act = LT_ACT_NONE;
  if (!lua_isnoneornil(L, 8)) { /* activation: nil or "relu" (fused) */
    const char *a = l_checkstring(L, 8);
    if (strcmp(a, "relu") != 0) return l_errorf(L, "conv2d: unknown activation '%s' (expected \"relu\" or nil)", a);
    act = LT_ACT_RELU;
  }
  return l_push(L, lt_nn_conv2d_act(L_CTX(L), x, w, b, sh, sw, ph, pw, act));
}

static int l_max_pool2d(lua_State *L) {
  const char *fn = "max_pool2d";
  lt_tensor *x = T(1, fn);
  int kh = check_int(L, 2, fn, "kernel_size"), kw = check_int(L, 3, fn, "kernel_size");
  int sh = check_int(L, 4, fn, "stride"), sw = check_int(L, 5, fn, "stride");
  int ph = check_int(L, 6, fn, "padding"), pw = check_int(L, 7, fn, "padding");
  /* optional dilation (args 9, 10; 1 without) */
  int dh = lua_isnoneornil(L, 9) ? 1 : check_int(L, 9, fn, "dilation");
  int dw = lua_isnoneornil(L, 10) ? 1 : check_int(L, 10, fn, "dilation");
  return l_push(L, lt_nn_max_pool2d_dilated(L_CTX(L), x, kh, kw, sh, sw, ph, pw, dh, dw, lua_toboolean(L, 8)));
}

static int l_avg_pool2d(lua_State *L) {
  const char *fn = "avg_pool2d";
  lt_tensor *x = T(1, fn);
  int kh = check_int(L, 2, fn, "kernel_size"), kw = check_int(L, 3, fn, "kernel_size");
  int sh = check_int(L, 4, fn, "stride"), sw = check_int(L, 5, fn, "stride");
  int ph = check_int(L, 6, fn, "padding"), pw = check_int(L, 7, fn, "padding");
  int cip = lua_isnoneornil(L, 8) ? 1 : lua_toboolean(L, 8);
  return l_push(L, lt_nn_avg_pool2d(L_CTX(L), x, kh, kw, sh, sw, ph, pw, cip, lua_toboolean(L, 9)));
}

static int l_dropout(lua_State *L) {
  lt_tensor *x = T(1, "dropout");
  double p = l_optnumber(L, 2, 0.5);
  int training = lua_isnoneornil(L, 3) ? 1 : lua_toboolean(L, 3);
  return l_push(L, lt_nn_dropout(L_CTX(L), x, p, training));
}

/* (x, target, weight|nil, ignore_index|nil (1-based), label_smoothing, reduction) */
static int l_cross_entropy(lua_State *L) {
  lt_tensor *x = T(1, "cross_entropy"), *t = T(2, "cross_entropy"), *w = opt_tensor(L, 3, "cross_entropy");
  int64_t ignore = lua_isnoneornil(L, 4) ? LT_NO_IGNORE
                                         : l_checkint(L, 4, "cross_entropy", "ignore_index", -L_INT_MAX, L_INT_MAX) - 1;
  double eps = l_optnumber(L, 5, 0.0);
  lt_reduction red = check_reduction(L, 6, "cross_entropy");
  lt_tensor *t0 = shift_index(L, t, "cross_entropy", "target", "targets");
  lt_tensor *r = lt_nn_cross_entropy(L_CTX(L), x, t0, w, ignore, eps, red);
  lt_tensor_release(t0);
  return l_push(L, r);
}

/* (logp, target, weight|nil, ignore_index|nil, reduction) */
static int l_nll_loss(lua_State *L) {
  lt_tensor *x = T(1, "nll_loss"), *t = T(2, "nll_loss"), *w = opt_tensor(L, 3, "nll_loss");
  int64_t ignore =
      lua_isnoneornil(L, 4) ? LT_NO_IGNORE : l_checkint(L, 4, "nll_loss", "ignore_index", -L_INT_MAX, L_INT_MAX) - 1;
  lt_reduction red = check_reduction(L, 5, "nll_loss");
  lt_tensor *t0 = shift_index(L, t, "nll_loss", "target", "targets");
  lt_tensor *r = lt_nn_nll_loss(L_CTX(L), x, t0, w, ignore, red);
  lt_tensor_release(t0);
  return l_push(L, r);
}

static int l_mse_loss(lua_State *L) {
  lt_tensor *x = T(1, "mse_loss"), *y = T(2, "mse_loss");
  return l_push(L, lt_nn_mse_loss(L_CTX(L), x, y, check_reduction(L, 3, "mse_loss")));
}

static int l_l1_loss(lua_State *L) {
  lt_tensor *x = T(1, "l1_loss"), *y = T(2, "l1_loss");
  return l_push(L, lt_nn_l1_loss(L_CTX(L), x, y, check_reduction(L, 3, "l1_loss")));
}

/* (x, y, pos_weight|nil, reduction) */
static int l_bce_with_logits(lua_State *L) {
  const char *fn = "binary_cross_entropy_with_logits";
  lt_tensor *x = T(1, fn), *y = T(2, fn), *pw = opt_tensor(L, 3, fn);
  return l_push(L, lt_nn_bce_with_logits(L_CTX(L), x, y, pw, check_reduction(L, 4, fn)));
}

/* (p, y, reduction) */
static int l_binary_cross_entropy(lua_State *L) {
  const char *fn = "binary_cross_entropy";
  lt_tensor *x = T(1, fn), *y = T(2, fn);
  return l_push(L, lt_nn_binary_cross_entropy(L_CTX(L), x, y, check_reduction(L, 3, fn)));
}

/* (x, y, beta, reduction) */
static int l_smooth_l1_loss(lua_State *L) {
  const char *fn = "smooth_l1_loss";
  lt_tensor *x = T(1, fn), *y = T(2, fn);
  return l_push(L, lt_nn_smooth_l1_loss(L_CTX(L), x, y, l_optnumber(L, 3, 1.0), check_reduction(L, 4, fn)));
}

/* (x, y, delta, reduction) */
static int l_huber_loss(lua_State *L) {
  const char *fn = "huber_loss";
  lt_tensor *x = T(1, fn), *y = T(2, fn);
  return l_push(L, lt_nn_huber_loss(L_CTX(L), x, y, l_optnumber(L, 3, 1.0), check_reduction(L, 4, fn)));
}

/* (x, running_mean|nil, running_var|nil, weight|nil, bias|nil, training, momentum, eps) */
static int l_batch_norm(lua_State *L) {
  const char *fn = "batch_norm";
  lt_tensor *x = T(1, fn), *rm = opt_tensor(L, 2, fn), *rv = opt_tensor(L, 3, fn);
  lt_tensor *w = opt_tensor(L, 4, fn), *b = opt_tensor(L, 5, fn);
  int training = lua_toboolean(L, 6);
  double momentum = l_optnumber(L, 7, 0.1), eps = check_eps(L, 8, fn);
  if (!(momentum > -INFINITY && momentum < INFINITY))
    return l_errorf(L, "batch_norm: momentum must be finite, got %g", momentum);
  return l_push(L, lt_nn_batch_norm(L_CTX(L), x, rm, rv, w, b, training, momentum, eps));
}

/* (x, k, weight|nil, bias|nil, eps) */
static int l_layer_norm(lua_State *L) {
  const char *fn = "layer_norm";
  lt_tensor *x = T(1, fn);
  int k = check_int(L, 2, fn, "the number of normalized dims");
  lt_tensor *w = opt_tensor(L, 3, fn), *b = opt_tensor(L, 4, fn);
  return l_push(L, lt_nn_layer_norm(L_CTX(L), x, k, w, b, check_eps(L, 5, fn)));
}

/* (indices 1-based int64, weight[, padding_idx 1-based]) */
static int l_embedding(lua_State *L) {
  lt_tensor *idx = T(1, "embedding"), *w = T(2, "embedding");
  int64_t pad = -1;
  if (!lua_isnoneornil(L, 3)) { /* 1-based; negative counts from the end, as PyTorch's */
    int64_t n = w->ndim == 2 ? w->shape[0] : 0, p = l_checkint(L, 3, "embedding", "padding_idx", -L_INT_MAX, L_INT_MAX);
    if (p == 0 || p > n || p < -n)
      return l_errorf(L, "embedding: padding_idx %lld is out of range 1..%lld (or -%lld..-1)", (long long)p,
                      (long long)n, (long long)n);
    pad = p > 0 ? p - 1 : n + p;
  }
  lt_tensor *i0 = shift_index(L, idx, "embedding", "index", "indices");
  lt_tensor *r = lt_nn_embedding_pad(L_CTX(L), i0, w, pad);
  lt_tensor_release(i0);
  return l_push(L, r);
}

static const luaL_Reg nn_funcs[] = { { "batch_norm", l_batch_norm },
                                     { "layer_norm", l_layer_norm },
                                     { "embedding", l_embedding },
                                     { "conv2d", l_conv2d },
                                     { "max_pool2d", l_max_pool2d },
                                     { "avg_pool2d", l_avg_pool2d },
                                     { "dropout", l_dropout },
                                     { "cross_entropy", l_cross_entropy },
                                     { "nll_loss", l_nll_loss },
                                     { "mse_loss", l_mse_loss },
                                     { "l1_loss", l_l1_loss },
                                     { "binary_cross_entropy_with_logits", l_bce_with_logits },
                                     { "binary_cross_entropy", l_binary_cross_entropy },
                                     { "smooth_l1_loss", l_smooth_l1_loss },
                                     { "huber_loss", l_huber_loss },
                                     { NULL, NULL } };

void l_nn_register(lua_State *L) {
  lua_newtable(L);
  l_setops(L, nn_funcs);
  lua_setfield(L, -2, "_nn");
}
