/*
 * l_scatter_reduce.c — x:scatter_reduce(dim, index, src, reduce[, {include_self = true}]) and scatter_reduce_
 * (the result written into x, returning x), also lt.scatter_reduce(x, ...): PyTorch 1.13's, reduce one of "sum",
 * "prod", "mean", "amax", "amin". The kernel and its backward are core/src/ops_scatter_reduce.c; index is int64
 * and 1-based here.
 */
#include <string.h>

#include "l_tensor.h"

static int parse_reduce(lua_State *L, int i, const char *fname) {
  if (lua_type(L, i) != LUA_TSTRING)
    return l_errorf(L, "%s: reduce must be one of \"sum\", \"prod\", \"mean\", \"amax\", \"amin\", got %s", fname,
                    luaL_typename(L, i));
  const char *s = lua_tostring(L, i);
  for (int r = 0; r < LT_SR_COUNT; r++)
    if (!strcmp(s, lt_scatter_reduce_names[r])) return r;
  return l_errorf(L, "%s: reduce must be one of \"sum\", \"prod\", \"mean\", \"amax\", \"amin\", got '%s'", fname, s);
}

static int parse_include_self(lua_State *L, int i, const char *fname) {
  static const char *const known[] = { "include_self", NULL };
  l_check_opts(L, i, fname, known);
  if (lua_isnoneornil(L, i)) return 1;
  lua_getfield(L, i, "include_self");
  int t = lua_type(L, -1), include_self = t == LUA_TNIL || lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (t != LUA_TNIL && t != LUA_TBOOLEAN)
    return l_errorf(L, "%s: option 'include_self' must be a boolean, got %s", fname, lua_typename(L, t));
  return include_self;
}

static int scatter_reduce(lua_State *L, const char *fname, int inplace) {
  lt_tensor *x = l_checktensor(L, 1, fname);
  int dim = l_checkdim_nz(L, 2, x->ndim, fname);
  lt_tensor *idx1 = l_checktensor(L, 3, fname);
  lt_tensor *src = l_checktensor(L, 4, fname);
  int reduce = parse_reduce(L, 5, fname);
  int include_self = parse_include_self(L, 6, fname);
  if (inplace) l_check_writable(L, x, fname);
  lt_tensor *idx = l_index_from_lua(L, idx1, fname);
  lt_ctx *c = L_CTX(L);
  lt_tensor *r = lt_op_scatter_reduce(c, x, dim, idx, src, reduce, include_self);
  lt_tensor_release(idx);
  if (!r) return l_error_as(L, fname);
  if (!inplace) return l_push(L, r);
  int st = lt_op_copy_(c, x, r);
  lt_tensor_release(r);
  if (st) return l_error_as(L, fname);
  lua_settop(L, 1);
  return 1;
}
static int l_scatter_reduce(lua_State *L) { return scatter_reduce(L, "scatter_reduce", 0); }
static int l_scatter_reduce_(lua_State *L) { return scatter_reduce(L, "scatter_reduce_", 1); }

static const luaL_Reg methods[] = { { "scatter_reduce", l_scatter_reduce },
                                    { "scatter_reduce_", l_scatter_reduce_ },
                                    { NULL, NULL } };

/* Registers both as tensor methods, scatter_reduce also as lt.scatter_reduce (expects the module table on top). */
void l_scatter_reduce_register(lua_State *L) {
  int mod = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_getfield(L, -1, "methods");
  l_setopmethods(L, methods);
  lua_getfield(L, -1, "scatter_reduce");
  lua_setfield(L, mod, "scatter_reduce");
  lua_settop(L, mod);
}
