/*
 * l_attention.c — Lua binding of scaled dot-product attention (core/src/nn_attention.c), in
 * `lutra.core._attention`; lua/lutra/F/attention.lua checks the options and wraps it as
 * lt.F.scaled_dot_product_attention.
 */
#include "l_util.h"
#include "lt_attention.h"

/* (q, k, v, attn_mask|nil, dropout_p, is_causal, scale|nil, need_weights) -> out[, weights] */
static int l_sdpa(lua_State *L) {
  const char *fn = "scaled_dot_product_attention";
  lt_tensor *q = l_checktensor(L, 1, fn), *k = l_checktensor(L, 2, fn), *v = l_checktensor(L, 3, fn);
  lt_tensor *m = lua_isnoneornil(L, 4) ? NULL : l_checktensor(L, 4, fn);
  double p = l_optnumber(L, 5, 0.0), scale = l_optnumber(L, 7, 0.0);
  int causal = lua_toboolean(L, 6), need_weights = lua_toboolean(L, 8);
  lt_tensor *w = NULL;
  lt_tensor *out = lt_nn_sdpa(L_CTX(L), q, k, v, m, causal, p, scale, need_weights ? &w : NULL);
  l_push(L, out);
  if (!need_weights) return 1;
  l_push(L, w);
  return 2;
}

static const luaL_Reg attention_funcs[] = { { "sdpa", l_sdpa }, { NULL, NULL } };

void l_attention_register(lua_State *L) {
  lua_newtable(L);
  l_setops(L, attention_funcs);
  lua_setfield(L, -2, "_attention");
}
