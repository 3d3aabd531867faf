/*
 * l_index_ops.c — masks and indexed writes as Lua methods and lt.* functions: masked_fill, masked_select,
 * nonzero, scatter, scatter_add, index_add, index_fill (kernels in core/src/ops_scatter.c and
 * ops_where.c). Index arguments are int64 and 1-based here, 0-based in the core; nonzero's result is
 * 1-based.
 */
#include <string.h>

#include "l_util.h"

static int l_masked_fill(lua_State *L) {
  lt_tensor *x = l_checktensor(L, 1, "masked_fill");
  lt_tensor *mask = l_checktensor(L, 2, "masked_fill");
  if (lua_type(L, 3) != LUA_TNUMBER)
    return l_errorf(L, "masked_fill: value must be a number, got %s", luaL_typename(L, 3));
  return l_push(L, lt_op_masked_fill(L_CTX(L), x, mask, lua_tonumber(L, 3)));
}

/* The arguments are checked before the 0-based index copy exists: an error raised after would leak it. */
static int push_released(lua_State *L, lt_tensor *r, lt_tensor *idx) {
  lt_tensor_release(idx);
  return l_push(L, r);
}

/* x:scatter(dim, index, src | value), x:scatter_add(dim, index, src) */
static int scatter_common(lua_State *L, const char *fname, int add) {
  lt_tensor *x = l_checktensor(L, 1, fname);
  int dim = l_checkdim_nz(L, 2, x->ndim, fname);
  lt_tensor *idx1 = l_checktensor(L, 3, fname);
  lt_tensor *src = l_f64_gate(L, l_totensor(L, 4), fname);
  double v = 0;
  if (!src) {
    if (add || lua_type(L, 4) != LUA_TNUMBER)
      return l_errorf(L, "%s: src must be a tensor%s, got %s", fname, add ? "" : " or a number", luaL_typename(L, 4));
    v = lua_tonumber(L, 4);
  }
  if (!lua_isnone(L, 5)) return l_errorf(L, "%s: takes (dim, index, src); the reduce option is not supported", fname);
  lt_tensor *idx = l_index_from_lua(L, idx1, fname);
  return push_released(L, lt_op_scatter(L_CTX(L), x, dim, idx, src, v, add), idx);
}
static int l_scatter(lua_State *L) { return scatter_common(L, "scatter", 0); }
static int l_scatter_add(lua_State *L) { return scatter_common(L, "scatter_add", 1); }

/* x:index_add(dim, index, source[, {alpha = 1}]) */
static int l_index_add(lua_State *L) {
  lt_tensor *x = l_checktensor(L, 1, "index_add");
  int dim = l_checkdim_nz(L, 2, x->ndim, "index_add");
  lt_tensor *idx1 = l_checktensor(L, 3, "index_add");
  lt_tensor *src = l_checktensor(L, 4, "index_add");
  double alpha = 1;
  static const char *const known[] = { "alpha", NULL };
  l_check_opts(L, 5, "index_add", known);
  if (!lua_isnoneornil(L, 5)) {
    lua_getfield(L, 5, "alpha");
    if (!lua_isnil(L, -1)) {
      if (lua_type(L, -1) != LUA_TNUMBER) return l_errorf(L, "index_add: option 'alpha' must be a number");
      alpha = lua_tonumber(L, -1);
    }
    lua_pop(L, 1);
  }

  lt_tensor *idx = l_index_from_lua(L, idx1, "index_add");
  return push_released(L, lt_op_index_add(L_CTX(L), x, dim, idx, src, alpha), idx);
}

/* x:index_fill(dim, index, value) */
static int l_index_fill(lua_State *L) {
  lt_tensor *x = l_checktensor(L, 1, "index_fill");
  int dim = l_checkdim_nz(L, 2, x->ndim, "index_fill");
  lt_tensor *idx1 = l_checktensor(L, 3, "index_fill");
  if (lua_type(L, 4) != LUA_TNUMBER)
    return l_errorf(L, "index_fill: value must be a number, got %s", luaL_typename(L, 4));
  double v = lua_tonumber(L, 4);
  lt_tensor *idx = l_index_from_lua(L, idx1, "index_fill");
  return push_released(L, lt_op_index_fill(L_CTX(L), x, dim, idx, v), idx);
}

static int l_masked_select(lua_State *L) {
  lt_tensor *x = l_checktensor(L, 1, "masked_select");
  return l_push(L, lt_op_masked_select(L_CTX(L), x, l_checktensor(L, 2, "masked_select")));
}

/* x:nonzero() -> [n x ndim] int64, 1-based (a 0-dim x gives [n x 0]) */
static int l_nonzero(lua_State *L) {
  lt_tensor *r = lt_op_nonzero(L_CTX(L), l_checktensor(L, 1, "nonzero"));
  if (!r) return l_error(L);
  int64_t *p = lt_i64(r);
  for (int64_t i = 0, n = lt_numel(r); i < n; i++) p[i] += 1;
  return l_push(L, r);
}

/* core._gelu_tanh(x): lt.F.gelu(x, {approximate = "tanh"}) (lua/lutra/F/init.lua checks the options) */
static int l_gelu_tanh(lua_State *L) { return l_push(L, lt_op_gelu_tanh(L_CTX(L), l_checktensor(L, 1, "gelu"))); }

static const luaL_Reg index_methods[] = { { "masked_fill", l_masked_fill }, { "masked_select", l_masked_select },
                                          { "nonzero", l_nonzero },         { "scatter", l_scatter },
                                          { "scatter_add", l_scatter_add }, { "index_add", l_index_add },
                                          { "index_fill", l_index_fill },   { NULL, NULL } };

/* Registers each function as a tensor method and as lt.name (expects the module table on top). */
void l_index_ops_register(lua_State *L) {
  int mod = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_getfield(L, -1, "methods");
  l_setopmethods(L, index_methods);
  for (const luaL_Reg *f = index_methods; f->name; f++) {
    lua_getfield(L, -1, f->name);
    lua_setfield(L, mod, f->name);
  }
  lua_settop(L, mod);
  static const luaL_Reg private_fns[] = { { "_gelu_tanh", l_gelu_tanh }, { NULL, NULL } };
  l_setops(L, private_fns);
}
