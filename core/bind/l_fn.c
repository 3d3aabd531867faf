/*
 * l_fn.c — bindings of the elementwise maths of core/src/ops_fn.c and ops_fn_binary.c as tensor methods and lt.*
 * functions: x:tan(), x:tan_(), lt.atan2(y, x) ..., with PyTorch's aliases (arcsin ... arctan2). The binary ones
 * take a tensor or a number on either side. Aliases of older ops (fix, sgn, clip, clamp_min/max, float_power)
 * are lua/lutra/tensor/pointwise_more.lua's.
 */
#include <math.h>

#include "l_tensor.h"

/* ---- unary: x:name([p]) and x:name_([p]); p is logit's eps ------------------------------------------------- */

static double fn_param(lua_State *L, lt_fnop op, const char *name) {
  if (op != LT_FN_LOGIT || lua_isnoneornil(L, 2)) return op == LT_FN_LOGIT ? -1.0 : 0.0;
  double eps = l_checknumber(L, 2);
  if (!(eps >= 0 && eps <= 1)) l_errorf(L, "%s: eps must be in [0, 1] (or nil for none), got %g", name, eps);
  return eps;
}

static int fn_unary(lua_State *L, lt_fnop op) {
  const char *name = lt_fnop_name(op);
  lt_tensor *t = T(1, name);
  return l_push(L, lt_op_fn(L_CTX(L), op, t, fn_param(L, op, name)));
}

static int fn_unary_(lua_State *L, lt_fnop op, const char *name_) {
  lt_tensor *t = l_check_writable(L, T(1, name_), lt_fnop_name(op));
  l_check(L, lt_op_fn_(L_CTX(L), op, t, fn_param(L, op, name_)));
  lua_settop(L, 1);
  return 1;
}

#define FN_BIND(e, name)                                    \
  static int l_##e(lua_State *L) { return fn_unary(L, e); } \
  static int l_##e##_(lua_State *L) { return fn_unary_(L, e, name "_"); }
LT_FN_LIST(FN_BIND)
#undef FN_BIND

/* ---- binary: lt.name(a, b) and a:name_(b), a tensor or a number on either side (not both numbers) ---------- */

/* the number at i as a 0-dim tensor that keeps `like`'s dtype (int64 only for an integral number:
 * lt.remainder(int64_tensor, 2.5) computes in float32, as PyTorch's); NULL with the core's message when out of
 * memory */
static lt_tensor *scalar_like(lua_State *L, int i, const lt_tensor *like) {
  double v = lua_tonumber(L, i);
  lt_dtype dt = like->dtype == LT_I64 && v == floor(v) && l_is_int64(v) ? LT_I64
                : like->dtype == LT_F64                                 ? LT_F64
                                                                        : LT_F32;
  return lt_op_full(L_CTX(L), dt, 0, NULL, v);
}

static int fn_binary(lua_State *L, lt_fn2op op) {
  const char *name = lt_fn2op_name(op);
  lt_tensor *ta = l_f64_gate(L, l_totensor(L, 1), name), *tb = l_f64_gate(L, l_totensor(L, 2), name);
  const lt_tensor *like = ta ? ta : tb;
  if (!like || (!ta && lua_type(L, 1) != LUA_TNUMBER) || (!tb && lua_type(L, 2) != LUA_TNUMBER))
    return l_errorf(L, "%s: expected tensors or numbers (at least one tensor), got %s and %s", name,
                    luaL_typename(L, 1), luaL_typename(L, 2));
  lt_tensor *a = ta ? lt_tensor_retain(ta) : scalar_like(L, 1, like);
  lt_tensor *b = a ? (tb ? lt_tensor_retain(tb) : scalar_like(L, 2, like)) : NULL;
  lt_tensor *r = b ? lt_op_fn2(L_CTX(L), op, a, b) : NULL;
  lt_tensor_release(a);
  lt_tensor_release(b);
  return l_push(L, r);
}

static int fn_binary_(lua_State *L, lt_fn2op op, const char *name_) {
  lt_tensor *a = l_check_writable(L, T(1, name_), lt_fn2op_name(op));
  lt_tensor *tb = l_f64_gate(L, l_totensor(L, 2), name_);
  if (!tb && lua_type(L, 2) != LUA_TNUMBER)
    return l_errorf(L, "%s: expected a tensor or a number, got %s", name_, luaL_typename(L, 2));
  lt_tensor *b = tb ? lt_tensor_retain(tb) : scalar_like(L, 2, a);
  if (!b) return l_error(L);
  int st = lt_op_fn2_(L_CTX(L), op, a, b);
  lt_tensor_release(b);
  l_check(L, st);
  lua_settop(L, 1);
  return 1;
}

#define FN2_BIND(e, name)                                    \
  static int l_##e(lua_State *L) { return fn_binary(L, e); } \
  static int l_##e##_(lua_State *L) { return fn_binary_(L, e, name "_"); }
LT_FN2_LIST(FN2_BIND)
#undef FN2_BIND

/* ---- registration ------------------------------------------------------------------------------------------ */

#define FN_REG(e, name) { name, l_##e }, { name "_", l_##e##_ },
static const luaL_Reg methods[] = { LT_FN_LIST(FN_REG) LT_FN2_LIST(FN_REG)
                                    /* PyTorch's aliases */
                                    { "arcsin", l_LT_FN_ASIN },
                                    { "arcsin_", l_LT_FN_ASIN_ },
                                    { "arccos", l_LT_FN_ACOS },
                                    { "arccos_", l_LT_FN_ACOS_ },
                                    { "arctan", l_LT_FN_ATAN },
                                    { "arctan_", l_LT_FN_ATAN_ },
                                    { "arcsinh", l_LT_FN_ASINH },
                                    { "arcsinh_", l_LT_FN_ASINH_ },
                                    { "arccosh", l_LT_FN_ACOSH },
                                    { "arccosh_", l_LT_FN_ACOSH_ },
                                    { "arctanh", l_LT_FN_ATANH },
                                    { "arctanh_", l_LT_FN_ATANH_ },
                                    { "arctan2", l_LT_FN2_ATAN2 },
                                    { "arctan2_", l_LT_FN2_ATAN2_ },
                                    { NULL, NULL } };
#undef FN_REG

/* Expects the module table on top, after l_tensor_register made the methods table. */
void l_fn_register(lua_State *L) { l_tensor_add(L, NULL, methods, NULL); }
