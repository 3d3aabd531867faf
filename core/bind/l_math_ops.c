/*
 * l_math_ops.c — bindings of sorting, scans, products, norms, triangles and more elementwise maths
 * (core/src/ops_sort.c, ops_scan.c, ops_math.c) as tensor methods and lt.* functions. Dims are 1-based
 * here; argsort's indices come back 1-based. sort, topk, logsumexp, any/all, flip, roll, repeat and the
 * other compositions live in lua/lutra/tensor/ (sort.lua, reduce.lua, shape.lua, compare.lua).
 */
#include <math.h>
#include <string.h>

#include "l_util.h"

#define T(i, name) l_checktensor(L, (i), (name))

static int opt_bool(lua_State *L, int idx, const char *fname, const char *key, int def) {
  if (lua_isnoneornil(L, idx)) return def;
  lua_getfield(L, idx, key);
  int t = lua_type(L, -1), v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (t == LUA_TNIL) return def;
  if (t != LUA_TBOOLEAN) l_errorf(L, "%s: option %s must be a boolean, got %s", fname, key, lua_typename(L, t));
  return v;
}

static int last_dim(const lt_tensor *t) { return t->ndim ? t->ndim - 1 : 0; }

/* argsort(x[, dim = -1][, {descending = false, stable = true}]): 1-based int64 indices (always stable) */
static int l_argsort(lua_State *L) {
  lt_tensor *t = T(1, "argsort");
  int oi = lua_istable(L, 2) ? 2 : 3;
  int dim = lua_istable(L, 2) ? last_dim(t) : l_optdim(L, 2, t->ndim, "argsort", last_dim(t));
  static const char *const known[] = { "descending", "stable", NULL };
  l_check_opts(L, oi, "argsort", known);
  int desc = opt_bool(L, oi, "argsort", "descending", 0);
  (void)opt_bool(L, oi, "argsort", "stable", 1); /* every sort here is stable */
  lt_tensor *i = lt_op_argsort(L_CTX(L), t, dim, desc);
  l_push(L, i);
  l_check(L, lt_op_binary_scalar_(L_CTX(L), LT_ADD, i, 1.0));
  return 1;
}

/* core._topk_indices(x, k, dim): 1-based int64 indices of topk (lua/lutra/tensor/sort.lua checks the
 * arguments and gathers the values) */
static int l_topk_indices(lua_State *L) {
  lt_tensor *t = T(1, "topk");
  int64_t k = l_checkint(L, 2, "topk", "k", 0, L_INT_MAX);
  int dim = l_checkdim(L, 3, t->ndim, "topk");
  lt_tensor *i = lt_op_topk_indices(L_CTX(L), t, dim, k, lua_toboolean(L, 4));
  l_push(L, i);
  l_check(L, lt_op_binary_scalar_(L_CTX(L), LT_ADD, i, 1.0));
  return 1;
}

static int l_cumsum(lua_State *L) {
  lt_tensor *t = T(1, "cumsum");
  return l_push(L, lt_op_cumsum(L_CTX(L), t, l_checkdim(L, 2, t->ndim, "cumsum")));
}
static int l_cumprod(lua_State *L) {
  lt_tensor *t = T(1, "cumprod");
  return l_push(L, lt_op_cumprod(L_CTX(L), t, l_checkdim(L, 2, t->ndim, "cumprod")));
}

/* prod(x[, dim[, keepdim]]) */
static int l_prod(lua_State *L) {
  lt_tensor *t = T(1, "prod");
  int dim = l_optdim(L, 2, t->ndim, "prod", -1);
  return l_push(L, lt_op_prod(L_CTX(L), t, dim, lua_toboolean(L, 3)));
}

/* norm(x[, p = 2 | "fro" | math.huge | -math.huge][, dim[, keepdim]]) */
static int l_norm(lua_State *L) {
  lt_tensor *t = T(1, "norm");
  double p = 2;
  if (lua_type(L, 2) == LUA_TSTRING) {
    const char *s = lua_tostring(L, 2);
    if (strcmp(s, "fro") != 0)
      return l_errorf(L, "norm: unknown p '%s' (expected a number, math.huge, -math.huge or \"fro\")", s);
  } else if (!lua_isnoneornil(L, 2)) {
    p = l_checknumber(L, 2);
    if (p != p) return l_errorf(L, "norm: p is nan");
  }
  int dim = l_optdim(L, 3, t->ndim, "norm", -1);
  return l_push(L, lt_op_pnorm(L_CTX(L), t, p, dim, lua_toboolean(L, 4)));
}

static int tri(lua_State *L, int upper) {
  const char *name = upper ? "triu" : "tril";
  lt_tensor *t = T(1, name);
  int64_t k = lua_isnoneornil(L, 2) ? 0 : l_checkint(L, 2, name, "diagonal", -L_INT_MAX, L_INT_MAX);
  return l_push(L, lt_op_tri(L_CTX(L), t, k, upper));
}
static int l_tril(lua_State *L) { return tri(L, 0); }
static int l_triu(lua_State *L) { return tri(L, 1); }

#define MATH(fn, OP, name) \
  static int fn(lua_State *L) { return l_push(L, lt_op_math(L_CTX(L), OP, T(1, name))); }
MATH(l_floor, LT_FLOOR, "floor")
MATH(l_ceil, LT_CEIL, "ceil")
MATH(l_round, LT_ROUND, "round")
MATH(l_trunc, LT_TRUNC, "trunc")
MATH(l_frac, LT_FRAC, "frac")
MATH(l_erf, LT_ERF, "erf")
MATH(l_erfinv, LT_ERFINV, "erfinv")
MATH(l_reciprocal, LT_RECIPROCAL, "reciprocal")
MATH(l_expm1, LT_EXPM1, "expm1")

static int l_isnan(lua_State *L) { return l_push(L, lt_op_classify(L_CTX(L), LT_ISNAN, T(1, "isnan"))); }
static int l_isinf(lua_State *L) { return l_push(L, lt_op_classify(L_CTX(L), LT_ISINF, T(1, "isinf"))); }
static int l_isfinite(lua_State *L) { return l_push(L, lt_op_classify(L_CTX(L), LT_ISFINITE, T(1, "isfinite"))); }

static const luaL_Reg methods[] = { { "argsort", l_argsort },   { "cumsum", l_cumsum }, { "cumprod", l_cumprod },
                                    { "prod", l_prod },         { "norm", l_norm },     { "tril", l_tril },
                                    { "triu", l_triu },         { "floor", l_floor },   { "ceil", l_ceil },
                                    { "round", l_round },       { "trunc", l_trunc },   { "frac", l_frac },
                                    { "erf", l_erf },           { "erfinv", l_erfinv }, { "reciprocal", l_reciprocal },
                                    { "expm1", l_expm1 },       { "isnan", l_isnan },   { "isinf", l_isinf },
                                    { "isfinite", l_isfinite }, { NULL, NULL } };

static const luaL_Reg functions[] = { { "_topk_indices", l_topk_indices }, { NULL, NULL } };

/* Expects the module table on top (after l_tensor_register made the methods table); every method is also
 * lt.name(x, ...). */
void l_math_ops_register(lua_State *L) {
  int mod = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(2)); /* the tensor metatable */
  lua_getfield(L, -1, "methods");
  int meth = lua_gettop(L);
  l_setopmethods(L, methods);
  for (const luaL_Reg *f = methods; f->name; f++) {
    lua_getfield(L, meth, f->name);
    lua_setfield(L, mod, f->name);
  }
  lua_settop(L, mod);
  l_setops(L, functions);
}
