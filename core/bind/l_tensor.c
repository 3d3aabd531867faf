/*
 * l_tensor.c — the tensor userdata: its box and metatable (__gc, #x, x.grad, x[i], x[i] = v, the method
 * lookup with the nearest name for a missing one), the check for writes into an expand()ed view, and how a
 * topic adds its methods and lt.* functions (l_tensor_add: l_tensor_create.c, l_tensor_shape.c,
 * l_tensor_math.c, l_tensor_grad.c, each registered after this file by l_module.c). Dims and indices are 1-based
 * here and 0-based in the core.
 */
#include <string.h>

#include "l_names.h"
#include "lt_errors.h"
#include "l_tensor.h"

/* ---- lifecycle ------------------------------------------------------------------------------ */

static int l_gc(lua_State *L) {
  l_box *b = lua_touserdata(L, 1);
  if (b && b->t) {
    lt_tensor_release(b->t);
    b->t = NULL;
  }
  return 0;
}

static int l_len(lua_State *L) {
  lt_tensor *t = T(1, "__len");
  if (t->ndim == 0) return l_errorf(L, "#: a 0-dim tensor has no length (use x:item())");
  lua_pushinteger(L, (lua_Integer)t->shape[0]);
  return 1;
}

/* An expand()ed view has several elements at one address: an in-place update would apply to each address
 * as many times as it is shared (x:expand(2, 3):add_(1) adds 2), so such writes are errors, as in PyTorch. */
lt_tensor *l_check_writable(lua_State *L, lt_tensor *t, const char *name) {
  for (int d = 0; d < t->ndim; d++)
    if (t->stride[d] == 0 && t->shape[d] > 1)
      l_errorf(L,
               "%s_: the tensor's elements overlap in memory (an expand()ed view: dim %d has stride 0); "
               "call :clone() first",
               name, d + 1);
  return t;
}

/* x[key] for a key that is neither a name nor a row number (Torch7's x[{1, {2, 3}}], x[mask]): the tensor method
 * written in Lua (lua/lutra/tensor_index.lua) answers or raises saying how; nargs: 2 (x, key) or 3 (x, key, v) */
static int l_index_lua(lua_State *L, const char *method, int nargs) {
  lua_settop(L, nargs);
  if (luaL_getmetafield(L, 1, "methods")) {
    lua_getfield(L, -1, method);
    lua_remove(L, -2);
  } else lua_pushnil(L);
  if (lua_isnil(L, -1))
    return l_errorf(L, "index: a tensor is indexed by a row number x[i] (got a %s)", luaL_typename(L, 2));
  lua_insert(L, 1);
  lua_call(L, nargs, nargs == 2 ? 1 : 0);
  return nargs == 2 ? 1 : 0;
}

/* x.grad, x[i], then methods */
static int l_index(lua_State *L) {
  lt_tensor *t = l_totensor(L, 1);
  if (!t && l_is_released_box(L, 1)) return l_errorf(L, "index: %s", L_RELEASED_BOX);
  if (lua_type(L, 2) == LUA_TSTRING) {
    size_t len;
    const char *k = lua_tolstring(L, 2, &len);
    if (len == 4 && !memcmp(k, "grad", 4)) {
      if (t && t->grad) l_push_retained(L, t->grad);
      else lua_pushnil(L);
      return 1;
    }
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(3));
    /* a name no tensor has is an error with the nearest method (x:topk2() would be a bare nil call);
     * private names ('_...') stay nil, for feature checks */
    if (lua_isnil(L, -1) && t && k[0] != '_') {
      luaL_where(L, 1);
      l_missing_name_push(L, "tensor", "method ", k, lua_upvalueindex(3), 0);
      lua_concat(L, 2);
      return lua_error(L);
    }
    return 1;
  }
  if (lua_type(L, 2) == LUA_TNUMBER && t) {
    if (t->ndim == 0) return l_errorf(L, "index: cannot index a 0-dim tensor (use x:item())");
    int64_t i = l_checkint(L, 2, "index", "row index", -L_INT_MAX, L_INT_MAX);
    if (i < 0) i += t->shape[0] + 1;
    return l_push(L, lt_op_select(L_CTX(L), t, 0, i - 1));
  }
  if (t && !lua_isnil(L, 2)) return l_index_lua(L, "_index_key", 2); /* x[{1, {2, 3}}], x[mask] */
  lua_pushnil(L);
  return 1;
}

/* x.grad = g (or nil); x[i] = v / tensor */
static int l_newindex(lua_State *L) {
  lt_tensor *t = T(1, "__newindex");
  if (lua_type(L, 2) == LUA_TSTRING && !strcmp(lua_tostring(L, 2), "grad")) {
    lt_tensor *g = lua_isnil(L, 3) ? NULL : T(3, "grad");
    if (g && g->dtype != t->dtype)
      return l_errorf(L, "grad: assigned gradient is %s, the tensor is %s", lt_dtype_name(g->dtype),
                      lt_dtype_name(t->dtype));
    if (g && !lt_same_shape(g, t)) {
      char b1[128], b2[128];
      return l_errorf(L, "grad: assigned gradient has shape %s, the tensor has %s", lt_shape_str(g, b1, sizeof b1),
                      lt_shape_str(t, b2, sizeof b2));
    }
    lt_tensor_release(t->grad);
    t->grad = g ? lt_tensor_retain(g) : NULL;
    return 0;
  }
  if (lua_type(L, 2) == LUA_TNUMBER) {
    if (t->ndim == 0) return l_errorf(L, "index: cannot index a 0-dim tensor");
    int64_t i = l_checkint(L, 2, "index", "row index", -L_INT_MAX, L_INT_MAX);
    if (i < 0) i += t->shape[0] + 1;
    /* the value is checked before the row view exists: an error raised after would leak it */
    lt_tensor *src = l_totensor(L, 3);
    double v = src ? 0 : l_checknumber(L, 3);
    if (!src && t->dtype == LT_I64 && !l_is_int64(v)) return l_errorf(L, LT_E_NOT_INT64, "index", v);
    lt_ctx *c = L_CTX(L);
    lt_tensor *row = lt_op_select(c, t, 0, i - 1);
    if (!row) return l_error(L);
    int rc = src ? lt_op_copy_(c, row, src) : lt_op_fill_(c, row, v);
    lt_tensor_release(row);
    l_check(L, rc);
    return 0;
  }
  if (lua_type(L, 2) != LUA_TSTRING && !lua_isnil(L, 2)) return l_index_lua(L, "_newindex_key", 3); /* x[{..}] = v */
  return l_errorf(L, "tensor: cannot set field '%s' (tensors only accept x.grad = ..., x[i] = ... and x[{...}] = ...)",
                  lua_tostring(L, 2) ? lua_tostring(L, 2) : luaL_typename(L, 2));
}

static int l_is_tensor(lua_State *L) {
  lua_pushboolean(L, l_totensor(L, 1) != NULL);
  return 1;
}

/* core._release(x) -> whether x held a tensor: lets go of it now (l_release_box; lua/lutra/nn/sequential.lua says
 * when that is safe) */
static int l_release(lua_State *L) {
  lua_pushboolean(L, l_release_box(L, 1));
  return 1;
}

void l_tensor_add(lua_State *L, const luaL_Reg *plain, const luaL_Reg *ops, const luaL_Reg *fns) {
  int mod = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(2)); /* the tensor metatable */
  lua_getfield(L, -1, "methods");
  int meth = lua_gettop(L);
  if (plain) l_setmethods(L, plain);
  if (ops) l_setopmethods(L, ops);
  /* every method is also lt.name(x, ...) */
  for (const luaL_Reg *f = plain; f && f->name; f++) {
    lua_getfield(L, meth, f->name);
    lua_setfield(L, mod, f->name);
  }
  for (const luaL_Reg *f = ops; f && f->name; f++) {
    lua_getfield(L, meth, f->name);
    lua_setfield(L, mod, f->name);
  }
  lua_settop(L, mod);
  if (fns) l_setops(L, fns);
}

/* Expects the module table on top; the two upvalues must be pushable (called from luaopen). */
void l_tensor_register(lua_State *L) {
  int mod = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(2)); /* metatable */
  int mt = lua_gettop(L);
  lua_newtable(L); /* methods, filled by each topic below */
  int meth = lua_gettop(L);
  lua_pushvalue(L, meth);
  lua_setfield(L, mt, "methods");
  l_push_upvalues(L);
  lua_pushvalue(L, meth);
  lua_pushcclosure(L, l_index, 3);
  lua_setfield(L, mt, "__index");
  static const luaL_Reg meta[] = { { "__gc", l_gc }, { "__newindex", l_newindex }, { "__len", l_len }, { NULL, NULL } };
  lua_pushvalue(L, mt);
  l_setfuncs(L, meta);
  lua_pop(L, 1);
  lua_pushstring(L, "lutra.Tensor");
  lua_setfield(L, mt, "__name");
  lua_settop(L, mod);
  static const luaL_Reg box_functions[] = { { "is_tensor", l_is_tensor }, { "_release", l_release }, { NULL, NULL } };
  l_setops(L, box_functions);
}
