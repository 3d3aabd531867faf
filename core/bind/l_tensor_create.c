/*
 * l_tensor_create.c — making and filling tensors: lt.tensor from nested tables, numbers or tensors, zeros,
 * ones, full, arange, eye, *_like, the in-place fills (zero_, fill_, copy_, uniform_, normal_), lutra's
 * random generator (manual_seed, the RNG state, random_integer, randperm), and the default dtype
 * (set_default_dtype / get_default_dtype: what every creation without a dtype makes, L_DEFAULT_DTYPE).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "l_tensor.h"

/* ---- creation --------------------------------------------------------------------------------- */

static int fill_from_table(lua_State *L, int idx, int depth, int64_t *shape, int *ndim, lt_tensor *t, int64_t *pos) {
  int64_t n = (int64_t)lua_objlen(L, idx);
  if (depth >= LT_MAX_DIM) return l_errorf(L, "tensor: nested tables deeper than %d", LT_MAX_DIM);
  if (t == NULL) { /* first pass: shape */
    if (depth >= *ndim) {
      shape[depth] = n;
      *ndim = depth + 1;
    }
  } else if (shape[depth] != n) {
    return l_errorf(L, "tensor: ragged nested table: expected %lld elements at depth %d, got %lld",
                    (long long)shape[depth], depth + 1, (long long)n);
  }
  for (int64_t i = 1; i <= n; i++) {
    lua_rawgeti(L, idx, (int)i);
    int ty = lua_type(L, -1);
    if (ty == LUA_TTABLE) {
      if (t && depth + 1 >= *ndim)
        return l_errorf(L, "tensor: ragged nested table: a table where a number was expected at depth %d", depth + 1);
      fill_from_table(L, lua_gettop(L), depth + 1, shape, ndim, t, pos);
    } else if (ty == LUA_TNUMBER || ty == LUA_TBOOLEAN) {
      double v = ty == LUA_TBOOLEAN ? (double)lua_toboolean(L, -1) : lua_tonumber(L, -1);
      if (t) {
        if (depth + 1 != *ndim)
          return l_errorf(L, "tensor: ragged nested table: a number where a table was expected at depth %d", depth + 1);
        if (t->dtype == LT_I64) {
          if (!l_is_int64(v))
            return l_errorf(L, "tensor: element %d at depth %d is %.14g, which is not an int64 value", (int)i,
                            depth + 1, v);
          lt_i64(t)[(*pos)++] = (int64_t)v;
        } else if (t->dtype == LT_F64) lt_f64(t)[(*pos)++] = v; /* a Lua number is a double: kept exactly */
        else lt_f32(t)[(*pos)++] = (float)v;
      }
    } else {
      return l_errorf(L, "tensor: element %d at depth %d is a %s, expected a number or a table", (int)i, depth + 1,
                      luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    if (!t && ty == LUA_TTABLE) break; /* the shape comes from the first element at each depth */
  }
  return 0;
}

static int l_tensor_new(lua_State *L) {
  lt_tensor *src = l_totensor(L, 1);
  lt_dtype dt =
      l_checkdtype(L, 2, src ? src->dtype : L_DEFAULT_DTYPE(L), "tensor"); /* a tensor keeps its dtype, as torch's */
  if (src) {
    lt_tensor *r = lt_op_to_dtype(L_CTX(L), src, dt);
    if (r == src) {
      lt_tensor_release(r);
      r = lt_op_clone(L_CTX(L), src);
    }
    if (!r) return l_error_as(L, "tensor");
    if (r->grad_fn) {
      lt_node_release(r->grad_fn);
      r->grad_fn = NULL;
      r->requires_grad = 0;
    }
    return l_push(L, r);
  }
  if (lua_type(L, 1) == LUA_TNUMBER) {
    double v = lua_tonumber(L, 1);
    if (dt == LT_I64 && !l_is_int64(v)) return l_errorf(L, "tensor: value %.14g is not an int64 value", v);
    lt_tensor *t = lt_op_full(L_CTX(L), dt, 0, NULL, v);
    return l_push(L, t);
  }
  if (!lua_istable(L, 1))
    return l_errorf(L, "tensor: expected a nested table of numbers, a number or a tensor, got %s", luaL_typename(L, 1));
  int64_t shape[LT_MAX_DIM] = { 0 };
  int ndim = 0;
  fill_from_table(L, 1, 0, shape, &ndim, NULL, NULL);
  if (ndim == 1 && shape[0] == 0) ndim = 1;
  lt_tensor *t = lt_tensor_new(L_CTX(L), dt, ndim, shape);
  if (!t) return l_error(L);
  l_push(L, t); /* owned by Lua before filling, so an error while filling cannot leak it */
  int64_t pos = 0;
  fill_from_table(L, 1, 0, shape, &ndim, t, &pos);
  return 1;
}

/* rand / randn: a float dtype only (PyTorch: "not implemented for 'Long'") */
static lt_dtype float_dtype(lua_State *L, int idx, const char *name) {
  lt_dtype dt = l_checkdtype(L, idx, L_DEFAULT_DTYPE(L), name);
  if (dt == LT_I64) l_errorf(L, "%s: dtype must be float32 or float64, got int64", name);
  return dt;
}

static int creation(lua_State *L, const char *name, int kind) {
  int64_t shape[LT_MAX_DIM];
  int ndim = l_checkshape(L, 1, shape, name);
  int next = lua_istable(L, 1) ? 2 : ndim + 1;
  lt_ctx *c = L_CTX(L);
  l_check_new_shape(L, ndim, shape, name);
  lt_dtype dt = kind >= 3 ? float_dtype(L, next, name) : l_checkdtype(L, next, L_DEFAULT_DTYPE(L), name);
  lt_tensor *t = NULL;
  switch (kind) {
    case 0: t = lt_tensor_zeros(c, dt, ndim, shape); break;
    case 1: t = lt_op_full(c, dt, ndim, shape, 1.0); break;
    case 2: t = lt_tensor_new(c, dt, ndim, shape); break;
    case 3:
    case 4:
      t = lt_tensor_new(c, dt, ndim, shape);
      if (t && (kind == 3 ? lt_op_uniform_(c, t, 0.0, 1.0) : lt_op_normal_(c, t, 0.0, 1.0))) {
        lt_tensor_release(t);
        t = NULL;
      }
      if (t) t->storage->version = 0; /* a new tensor, as lt_op_full's */
      break;
  }
  if (!t) return l_error_as(L, name);
  return l_push(L, t);
}
static int l_zeros(lua_State *L) { return creation(L, "zeros", 0); }
static int l_ones(lua_State *L) { return creation(L, "ones", 1); }
static int l_empty(lua_State *L) { return creation(L, "empty", 2); }
static int l_rand(lua_State *L) { return creation(L, "rand", 3); }
static int l_randn(lua_State *L) { return creation(L, "randn", 4); }

static int l_full(lua_State *L) {
  int64_t shape[LT_MAX_DIM];
  if (!lua_istable(L, 1)) l_errorf(L, "bad argument #1 to 'full' (shape table expected, got %s)", luaL_typename(L, 1));
  int ndim = l_checkshape(L, 1, shape, "full");
  l_check_new_shape(L, ndim, shape, "full");
  double v = l_checknumber(L, 2);
  lt_dtype dt = l_checkdtype(L, 3, L_DEFAULT_DTYPE(L), "full");
  if (dt == LT_I64 && !l_is_int64(v)) return l_errorf(L, "full: value %.14g is not an int64 value", v);
  lt_tensor *t = lt_op_full(L_CTX(L), dt, ndim, shape, v);
  if (!t) return l_error_as(L, "full");
  return l_push(L, t);
}

static int l_arange(lua_State *L) {
  double a = l_checknumber(L, 1);
  double b;
  if (lua_isnoneornil(L, 2)) {
    b = a;
    a = 0;
  } else b = l_checknumber(L, 2);
  double step = l_optnumber(L, 3, 1.0);
  lt_dtype dt = l_checkdtype(L, 4, L_DEFAULT_DTYPE(L), "arange");
  lt_tensor *t = lt_op_arange(L_CTX(L), a, b, step, dt);
  if (!t) return l_error_as(L, "arange"); /* an allocation failure is arange's */
  return l_push(L, t);
}

static int l_eye(lua_State *L) {
  int64_t n = l_checkint(L, 1, "eye", "n", 0, L_INT_MAX);
  int64_t m = lua_isnoneornil(L, 2) ? n : l_checkint(L, 2, "eye", "m", 0, L_INT_MAX);
  lt_tensor *t = lt_op_eye(L_CTX(L), n, m, l_checkdtype(L, 3, L_DEFAULT_DTYPE(L), "eye"));
  if (!t) return l_error_as(L, "eye"); /* the core's "tensor: the result [...] ..." is eye's */
  return l_push(L, t);
}

static int like(lua_State *L, const char *name, double v) {
  lt_tensor *t = T(1, name);
  lt_tensor *r = lt_op_full(L_CTX(L), t->dtype, t->ndim, t->shape, v);
  return l_push(L, r);
}
static int l_zeros_like(lua_State *L) { return like(L, "zeros_like", 0.0); }
static int l_ones_like(lua_State *L) { return like(L, "ones_like", 1.0); }

/* ---- the default dtype ----------------------------------------------------------------------------- */

/* lt.set_default_dtype("float64" | "float32"): PyTorch's torch.set_default_dtype, floating types only. It is
 * this Lua state's (a worker state lutra starts copies its parent's at its start: l_thread.c). */
static int l_set_default_dtype(lua_State *L) {
  const char *s = lua_type(L, 1) == LUA_TSTRING ? lua_tostring(L, 1) : NULL;
  if (!s) return l_errorf(L, "set_default_dtype: expected \"float32\" or \"float64\", got %s", luaL_typename(L, 1));
  if (!strcmp(s, "int64") || !strcmp(s, "long"))
    return l_errorf(L, "set_default_dtype: only floating-point types are supported as the default type, got '%s'", s);
  if (strcmp(s, "float32") && strcmp(s, "float") && strcmp(s, "float64") && strcmp(s, "double"))
    return l_errorf(L, "set_default_dtype: unknown dtype '%s' (expected \"float32\" or \"float64\")", s);
  L_CTX(L)->default_dtype = (int)l_checkdtype(L, 1, LT_F32, "set_default_dtype");
  return 0;
}

static int l_get_default_dtype(lua_State *L) {
  lua_pushstring(L, L_DEFAULT_DTYPE(L) == LT_F64 ? "float64" : "float32");
  return 1;
}

/* ---- in-place fills ------------------------------------------------------------------------- */

static int ret_self(lua_State *L, int status) {
  l_check(L, status);
  lua_settop(L, 1);
  return 1;
}
static int l_zero_(lua_State *L) { return ret_self(L, lt_op_zero_(L_CTX(L), T(1, "zero_"))); }
static int l_fill_(lua_State *L) {
  lt_tensor *t = T(1, "fill_");
  double v = l_checknumber(L, 2);
  if (t->dtype == LT_I64 && !l_is_int64(v)) return l_errorf(L, "fill_: value %.14g is not an int64 value", v);
  return ret_self(L, lt_op_fill_(L_CTX(L), t, v));
}
static int l_copy_(lua_State *L) {
  return ret_self(L, lt_op_copy_(L_CTX(L), l_check_writable(L, T(1, "copy_"), "copy"), T(2, "copy_")));
}
static int l_uniform_(lua_State *L) {
  return ret_self(L, lt_op_uniform_(L_CTX(L), T(1, "uniform_"), l_optnumber(L, 2, 0), l_optnumber(L, 3, 1)));
}
static int l_normal_(lua_State *L) {
  return ret_self(L, lt_op_normal_(L_CTX(L), T(1, "normal_"), l_optnumber(L, 2, 0), l_optnumber(L, 3, 1)));
}

/* ---- the random generator --------------------------------------------------------------------- */

static int l_manual_seed(lua_State *L) {
  lua_Number s = l_checknumber(L, 1);
  if (!l_is_int64(s)) return l_errorf(L, "manual_seed: the seed must be an integer, got %.14g", s);
  lt_rng_seed(&L_CTX(L)->rng, (uint64_t)(int64_t)s);
  return 0;
}

static int l_get_rng_state(lua_State *L) {
  lt_rng *r = &L_CTX(L)->rng;
  char buf[80];
  snprintf(buf, sizeof buf, "%016llx%016llx%016llx%016llx", (unsigned long long)r->s[0], (unsigned long long)r->s[1],
           (unsigned long long)r->s[2], (unsigned long long)r->s[3]);
  lua_pushstring(L, buf);
  return 1;
}

static int l_set_rng_state(lua_State *L) {
  const char *s = l_checkstring(L, 1);
  if (strlen(s) != 64) return l_errorf(L, "set_rng_state: expected a 64-character hex string from get_rng_state()");
  lt_rng r;
  for (int i = 0; i < 4; i++) {
    char part[17];
    memcpy(part, s + 16 * i, 16);
    part[16] = 0;
    char *end;
    r.s[i] = strtoull(part, &end, 16);
    if (*end) return l_errorf(L, "set_rng_state: '%s' is not hexadecimal", part);
  }
  L_CTX(L)->rng = r;
  return 0;
}

static int l_random_integer(lua_State *L) { /* lt.random_integer(n) in 1..n, from lutra's RNG */
  lua_Number n = (lua_Number)l_checkint(L, 1, "random_integer", "n", 1, L_INT_MAX);
  lua_pushinteger(L, (lua_Integer)(lt_rng_below(&L_CTX(L)->rng, (uint64_t)n) + 1));
  return 1;
}

static int l_randperm(lua_State *L) { /* 1-based permutation as int64 tensor (Fisher-Yates) */
  int64_t n = l_checkint(L, 1, "randperm", "n", 0, L_INT_MAX);
  lt_tensor *t = lt_tensor_new(L_CTX(L), LT_I64, 1, &n);
  if (!t) return l_error_as(L, "randperm");
  int64_t *p = lt_i64(t);
  for (int64_t i = 0; i < n; i++) p[i] = i + 1;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)lt_rng_below(&L_CTX(L)->rng, (uint64_t)(i + 1));
    int64_t tmp = p[i];
    p[i] = p[j];
    p[j] = tmp;
  }
  return l_push(L, t);
}

static const luaL_Reg methods[] = { { "zero_", l_zero_ },       { "fill_", l_fill_ },     { "copy_", l_copy_ },
                                    { "uniform_", l_uniform_ }, { "normal_", l_normal_ }, { NULL, NULL } };
static const luaL_Reg functions[] = { { "tensor", l_tensor_new },
                                      { "zeros", l_zeros },
                                      { "ones", l_ones },
                                      { "empty", l_empty },
                                      { "rand", l_rand },
                                      { "randn", l_randn },
                                      { "full", l_full },
                                      { "arange", l_arange },
                                      { "eye", l_eye },
                                      { "zeros_like", l_zeros_like },
                                      { "ones_like", l_ones_like },
                                      { "manual_seed", l_manual_seed },
                                      { "get_rng_state", l_get_rng_state },
                                      { "set_rng_state", l_set_rng_state },
                                      { "random_integer", l_random_integer },
                                      { "randperm", l_randperm },
                                      { "set_default_dtype", l_set_default_dtype },
                                      { "get_default_dtype", l_get_default_dtype },
                                      { NULL, NULL } };

/* Creation, fills and the RNG: expects the module table on top, after l_tensor_register. */
void l_tensor_create_register(lua_State *L) { l_tensor_add(L, NULL, methods, functions); }
