/*
 * l_nn_vision.c — Lua binding for the vision kernels: grouped/dilated conv2d, conv_transpose2d, adaptive
 * average and max pooling, group normalisation.
 *
 * The functions land in `lutra.core._vision` with positional arguments (pairs as two integers);
 * lua/lutra/F/vision.lua wraps them with PyTorch-style options and checks.
 */
#include <math.h>

#include "l_util.h"
#include "lt_nn.h"

#define T(i, name) l_checktensor(L, (i), (name))

static lt_tensor *opt_tensor(lua_State *L, int idx, const char *fname) {
  return lua_isnoneornil(L, idx) ? NULL : T(idx, fname);
}

/* an {h, w} pair from two consecutive arguments (the core checks the ranges) */
static void check_pair(lua_State *L, int idx, const char *fname, const char *what, int *out) {
  for (int k = 0; k < 2; k++) out[k] = (int)l_checkint(L, idx + k, fname, what, -((int64_t)1 << 30), (int64_t)1 << 30);
}

/* (x, w, b|nil, sh, sw, ph, pw, dh, dw, groups) */
static int l_conv2d(lua_State *L) {
  const char *fn = "conv2d";
  lt_tensor *x = T(1, fn), *w = T(2, fn), *b = opt_tensor(L, 3, fn);
  int s[2], p[2], d[2];
  check_pair(L, 4, fn, "stride", s);
  check_pair(L, 6, fn, "padding", p);
  check_pair(L, 8, fn, "dilation", d);
  int groups = (int)l_checkint(L, 10, fn, "groups", -((int64_t)1 << 30), (int64_t)1 << 30);
  return l_push(L, lt_nn_conv2d_ex(L_CTX(L), x, w, b, s, p, d, groups));
}

/* (x, w, b|nil, sh, sw, ph, pw, oph, opw, dh, dw, groups) */
static int l_conv_transpose2d(lua_State *L) {
  const char *fn = "conv_transpose2d";
  lt_tensor *x = T(1, fn), *w = T(2, fn), *b = opt_tensor(L, 3, fn);
  int s[2], p[2], op[2], d[2];
  check_pair(L, 4, fn, "stride", s);
  check_pair(L, 6, fn, "padding", p);
  check_pair(L, 8, fn, "output_padding", op);
  check_pair(L, 10, fn, "dilation", d);
  int groups = (int)l_checkint(L, 12, fn, "groups", -((int64_t)1 << 30), (int64_t)1 << 30);
  return l_push(L, lt_nn_conv_transpose2d(L_CTX(L), x, w, b, s, p, op, d, groups));
}

/* (x, oh, ow) */
static int l_adaptive_avg_pool2d(lua_State *L) {
  const char *fn = "adaptive_avg_pool2d";
  lt_tensor *x = T(1, fn);
  int o[2];
  check_pair(L, 2, fn, "output_size", o);
  return l_push(L, lt_nn_adaptive_avg_pool2d(L_CTX(L), x, o[0], o[1]));
}

/* (x, oh, ow) -> out, indices (0-based flat positions within each plane) */
static int l_adaptive_max_pool2d(lua_State *L) {
  const char *fn = "adaptive_max_pool2d";
  lt_tensor *x = T(1, fn), *ind = NULL;
  int o[2];
  check_pair(L, 2, fn, "output_size", o);
  l_push(L, lt_nn_adaptive_max_pool2d(L_CTX(L), x, o[0], o[1], &ind));
  l_push(L, ind);
  return 2;
}

/* (x, groups, weight|nil, bias|nil, eps, running_mean|nil, running_var|nil, momentum) */
static int l_group_norm(lua_State *L) {
  const char *fn = "group_norm";
  lt_tensor *x = T(1, fn);
  int64_t groups = l_checkint(L, 2, fn, "num_groups", -L_INT_MAX, L_INT_MAX);
  lt_tensor *w = opt_tensor(L, 3, fn), *b = opt_tensor(L, 4, fn);
  double eps = l_optnumber(L, 5, 1e-5), momentum = l_optnumber(L, 8, 0.1);
  if (!(eps >= 0 && eps < INFINITY)) return l_errorf(L, "%s: eps must be a finite number >= 0, got %g", fn, eps);
  if (!(momentum > -INFINITY && momentum < INFINITY))
    return l_errorf(L, "%s: momentum must be finite, got %g", fn, momentum);
  lt_tensor *rm = opt_tensor(L, 6, fn), *rv = opt_tensor(L, 7, fn);
  return l_push(L, lt_nn_group_norm(L_CTX(L), x, groups, w, b, eps, rm, rv, momentum));
}

static const luaL_Reg vision_funcs[] = { { "conv2d", l_conv2d },
                                         { "conv_transpose2d", l_conv_transpose2d },
                                         { "adaptive_avg_pool2d", l_adaptive_avg_pool2d },
                                         { "adaptive_max_pool2d", l_adaptive_max_pool2d },
                                         { "group_norm", l_group_norm },
                                         { NULL, NULL } };

void l_nn_vision_register(lua_State *L) {
  lua_newtable(L);
  l_setops(L, vision_funcs);
  lua_setfield(L, -2, "_vision");
}
