/*
 * l_index_ops.c — masks and indexed writes as Lua methods and lt.* functions: masked_fill, masked_select,
 * nonzero, scatter, scatter_add, index_add, index_fill (kernels in core/src/ops_scatter.c and
 * ops_elementwise.c). Index arguments are int64 and 1-based here, 0-based in the core; nonzero's result is
 * 1-based.
 */
#include "l_util.h"

static int l_masked_fill(lua_State *L) {
  lt_tensor *x = l_checktensor(L, 1, "masked_fill");
  lt_tensor *mask = l_checktensor(L, 2, "masked_fill");
  if (lua_type(L, 3) != LUA_TNUMBER)
    return l_errorf(L, "masked_fill: value must be a number, got %s", luaL_typename(L, 3));
  return l_push(L, lt_op_masked_fill(L_CTX(L), x, mask, lua_tonumber(L, 3)));
}

/* core._gelu_tanh(x): lt.F.gelu(x, {approximate = "tanh"}) (lua/lutra/F.lua checks the options) */
static int l_gelu_tanh(lua_State *L) { return l_push(L, lt_op_gelu_tanh(L_CTX(L), l_checktensor(L, 1, "gelu"))); }

static const luaL_Reg index_methods[] = {
  { "masked_fill", l_masked_fill },
  { NULL, NULL }
};

/* Registers each function as a tensor method and as lt.name (expects the module table on top). */
void l_index_ops_register(lua_State *L) {
  int mod = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_getfield(L, -1, "methods");
  l_setmethods(L, index_methods);
  for (const luaL_Reg *f = index_methods; f->name; f++) {
    lua_getfield(L, -1, f->name);
    lua_setfield(L, mod, f->name);
  }
  lua_settop(L, mod);
  static const luaL_Reg private_fns[] = { { "_gelu_tanh", l_gelu_tanh }, { NULL, NULL } };
  l_setfuncs(L, private_fns);
}
