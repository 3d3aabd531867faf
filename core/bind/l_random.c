/*
 * l_random.c — random tensors and their kin as lt.* functions: randint, multinomial (1-based results),
 * bernoulli (also p:bernoulli()), poisson, randn_like, rand_like, full_like, linspace. All draw from lutra's RNG, so
 * lt.manual_seed makes them reproducible (kernels in core/src/ops_random.c).
 */
#include <string.h>

#include "l_util.h"

/* lt.randint(low, high, {size}) or lt.randint(high, {size}): int64 uniform in [low, high) */
static int l_randint(lua_State *L) {
  int64_t low = 0, high;
  int size_at;
  if (lua_istable(L, 2)) {
    high = l_checkint(L, 1, "randint", "high", -L_INT_MAX, L_INT_MAX);
    size_at = 2;
  } else {
    low = l_checkint(L, 1, "randint", "low", -L_INT_MAX, L_INT_MAX);
    high = l_checkint(L, 2, "randint", "high", -L_INT_MAX, L_INT_MAX);
    size_at = 3;
  }
  if (!lua_istable(L, size_at))
    return l_errorf(L, "randint: expected the size as a table, randint(low, high, {size}), got %s",
                    luaL_typename(L, size_at));
  int64_t shape[LT_MAX_DIM];
  int ndim = l_checkshape_only(L, size_at, shape, "randint");
  l_check_new_shape(L, ndim, shape, "randint");
  return l_push(L, lt_op_randint(L_CTX(L), low, high, ndim, shape));
}

/* lt.multinomial(p, n[, {replacement = false}]) -> int64 1-based categories, [n] or [rows x n] */
static int l_multinomial(lua_State *L) {
  lt_tensor *p = l_checktensor(L, 1, "multinomial");
  int64_t n = l_checkint(L, 2, "multinomial", "num_samples", 1, L_INT_MAX);
  int replacement = 0;
  static const char *const known[] = { "replacement", NULL };
  l_check_opts(L, 3, "multinomial", known);
  if (!lua_isnoneornil(L, 3)) {
    lua_getfield(L, 3, "replacement");
    if (!lua_isnil(L, -1)) {
      if (!lua_isboolean(L, -1)) return l_errorf(L, "multinomial: option 'replacement' must be a boolean");
      replacement = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);
  }

  lt_tensor *r = lt_op_multinomial(L_CTX(L), p, n, replacement);
  if (!r) return l_error_as(L, "multinomial");
  int64_t *pi = lt_i64(r);
  for (int64_t i = 0, m = lt_numel(r); i < m; i++) pi[i] += 1;
  return l_push(L, r);
}

static int l_bernoulli(lua_State *L) { return l_push(L, lt_op_bernoulli(L_CTX(L), l_checktensor(L, 1, "bernoulli"))); }

/* lt.poisson(rates): a draw per element, in the rates' float dtype (no gradient: PyTorch's is zero) */
static int l_poisson(lua_State *L) {
  lt_tensor *r = lt_op_poisson(L_CTX(L), l_checktensor(L, 1, "poisson"));
  if (!r) return l_error_as(L, "poisson");
  return l_push(L, r);
}

/* randn_like and rand_like of a float64 x are float64 (drawn in double), as torch's; float32 otherwise */
static int random_like(lua_State *L, int normal) {
  lt_tensor *t = l_checktensor(L, 1, normal ? "randn_like" : "rand_like");
  if (t->dtype != LT_F64)
    return l_push(L, normal ? lt_op_randn(L_CTX(L), t->ndim, t->shape) : lt_op_rand(L_CTX(L), t->ndim, t->shape));
  lt_tensor *r = lt_tensor_new(L_CTX(L), LT_F64, t->ndim, t->shape);
  if (r && (normal ? lt_op_normal_(L_CTX(L), r, 0.0, 1.0) : lt_op_uniform_(L_CTX(L), r, 0.0, 1.0))) {
    lt_tensor_release(r);
    r = NULL;
  }
  return l_push(L, r);
}
static int l_randn_like(lua_State *L) { return random_like(L, 1); }
static int l_rand_like(lua_State *L) { return random_like(L, 0); }

/* lt.full_like(x, value[, dtype = x's]) */
static int l_full_like(lua_State *L) {
  lt_tensor *t = l_checktensor(L, 1, "full_like");
  double v = l_checknumber(L, 2);
  lt_dtype dt = l_checkdtype(L, 3, t->dtype, "full_like");
  if (dt == LT_I64 && !l_is_int64(v)) return l_errorf(L, "full_like: value %.14g is not an int64 value", v);
  return l_push(L, lt_op_full(L_CTX(L), dt, t->ndim, t->shape, v));
}

static int l_linspace(lua_State *L) {
  double a = l_checknumber(L, 1), b = l_checknumber(L, 2);
  int64_t n = l_checkint(L, 3, "linspace", "steps", 0, L_INT_MAX);
  lt_tensor *r = lt_op_linspace(L_CTX(L), a, b, n, l_checkdtype(L, 4, L_DEFAULT_DTYPE(L), "linspace"));
  if (!r) return l_error_as(L, "linspace"); /* an allocation failure is linspace's */
  return l_push(L, r);
}

void l_random_register(lua_State *L) {
  static const luaL_Reg fns[] = {
    { "randint", l_randint },       { "multinomial", l_multinomial }, { "bernoulli", l_bernoulli },
    { "randn_like", l_randn_like }, { "rand_like", l_rand_like },     { "full_like", l_full_like },
    { "linspace", l_linspace },     { "poisson", l_poisson },         { NULL, NULL }
  };
  l_setops(L, fns);
  /* p:bernoulli() and p:multinomial(n) too, as torch's methods */
  static const luaL_Reg meth[] = { { "bernoulli", l_bernoulli }, { "multinomial", l_multinomial }, { NULL, NULL } };
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_getfield(L, -1, "methods");
  l_setopmethods(L, meth);
  lua_pop(L, 2);
}
