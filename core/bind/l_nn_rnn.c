/*
 * l_nn_rnn.c — Lua binding of the recurrent layer kernel (core/src/nn_rnn.c) as lutra.core._nn.rnn_layer;
 * lua/lutra/nn/rnn.lua builds RNN, GRU, LSTM and the cells on it.
 */
#include <string.h>

#include "l_util.h"
#include "lt_nn.h"

static lt_tensor *opt_tensor(lua_State *L, int idx) {
  return lua_isnoneornil(L, idx) ? NULL : l_checktensor(L, idx, "rnn_layer");
}

/* (mode "rnn_tanh"|"rnn_relu"|"gru"|"lstm", xg, w_hh, b_hh|nil, h0, c0|nil, w_hr|nil, reverse) -> flat result */
static int l_rnn_layer(lua_State *L) {
  static const char *const modes[] = { "rnn_tanh", "rnn_relu", "gru", "lstm", NULL };
  static const lt_rnn_mode ids[] = { LT_RNN_TANH, LT_RNN_RELU, LT_RNN_GRU, LT_RNN_LSTM };
  const char *m = l_checkstring(L, 1);
  int k = 0;
  while (modes[k] && strcmp(modes[k], m) != 0) k++;
  if (!modes[k])
    return l_errorf(L, "rnn_layer: unknown mode '%s' (expected \"rnn_tanh\", \"rnn_relu\", \"gru\" or \"lstm\")", m);
  lt_tensor *xg = l_checktensor(L, 2, "rnn_layer"), *whh = l_checktensor(L, 3, "rnn_layer");
  lt_tensor *bhh = opt_tensor(L, 4), *h0 = l_checktensor(L, 5, "rnn_layer"), *c0 = opt_tensor(L, 6);
  lt_tensor *whr = opt_tensor(L, 7);
  return l_push(L, lt_nn_rnn_layer(L_CTX(L), ids[k], xg, whh, bhh, h0, c0, whr, lua_toboolean(L, 8)));
}

/* Adds the functions to the module's _nn table (l_nn.c creates it). */
void l_nn_rnn_register(lua_State *L) {
  static const luaL_Reg fns[] = { { "rnn_layer", l_rnn_layer }, { NULL, NULL } };
  lua_getfield(L, -1, "_nn");
  l_setfuncs(L, fns);
  lua_pop(L, 1);
}
