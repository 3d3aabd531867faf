/*
 * l_special.c — bindings of the special functions and elementwise maths of core/src/ops_special.c and
 * ops_special_binary.c as tensor methods and lt.*
 * functions: x:tan(), x:tan_(), lt.atan2(y, x) ..., with PyTorch's aliases (arcsin ... arctan2). The binary ones
 * take a tensor or a number on either side. Aliases of older ops (fix, sgn, clip, clamp_min/max, float_power)
 * are lua/lutra/tensor/pointwise_aliases.lua's.
 */
#include <math.h>
#include <stdio.h>

#include "l_tensor.h"

/* ---- unary: x:name([p]) and x:name_([p]); p is logit's eps ------------------------------------------------- */

static double fn_param(lua_State *L, lt_fnop op, const char *name) {
  if (op != LT_FN_LOGIT || lua_isnoneornil(L, 2)) return op == LT_FN_LOGIT ? -1.0 : 0.0;
  double eps = l_checknumber(L, 2);
  if (!(eps >= 0 && eps <= 1)) l_errorf(L, "%s: eps must be in [0, 1] (or nil for none), got %g", name, eps);
  return eps;
}

/* name: the name called (an alias's own, as arcsin); the float64 gate asks under the op's name */
static int fn_unary(lua_State *L, lt_fnop op, const char *name) {
  lt_tensor *t = T(1, lt_fnop_name(op));
  lt_tensor *r = lt_op_fn(L_CTX(L), op, t, fn_param(L, op, name));
  if (!r) return l_error_as(L, name);
  return l_push(L, r);
}

/* The two names of an in-place call: the op's own (the float64 gate asks under it) and the one called (an alias's,
 * for its errors), each with its '_' */
typedef struct inplace_names {
  char op[40], called[40];
} inplace_names;

static inplace_names names_of_inplace(const char *op_name, const char *called) {
  inplace_names n;
  snprintf(n.op, sizeof n.op, "%s_", op_name);
  snprintf(n.called, sizeof n.called, "%s_", called);
  return n;
}

/* name: the name called without its '_' */
static int fn_unary_(lua_State *L, lt_fnop op, const char *name) {
  inplace_names n = names_of_inplace(lt_fnop_name(op), name);
  lt_tensor *t = l_check_writable(L, T(1, n.op), name);
  if (lt_op_fn_(L_CTX(L), op, t, fn_param(L, op, n.called))) return l_error_as(L, n.called);
  lua_settop(L, 1);
  return 1;
}

#define FN_BIND(e, name)                                          \
  static int l_##e(lua_State *L) { return fn_unary(L, e, name); } \
  static int l_##e##_(lua_State *L) { return fn_unary_(L, e, name); }
LT_FN_LIST(FN_BIND)
#undef FN_BIND

/* PyTorch's other names: the same ops, their errors named as called */
#define FN_ALIAS(fn, e, alias)                                      \
  static int l_##fn(lua_State *L) { return fn_unary(L, e, alias); } \
  static int l_##fn##_(lua_State *L) { return fn_unary_(L, e, alias); }
FN_ALIAS(arcsin, LT_FN_ASIN, "arcsin")
FN_ALIAS(arccos, LT_FN_ACOS, "arccos")
FN_ALIAS(arctan, LT_FN_ATAN, "arctan")
FN_ALIAS(arcsinh, LT_FN_ASINH, "arcsinh")
FN_ALIAS(arccosh, LT_FN_ACOSH, "arccosh")
FN_ALIAS(arctanh, LT_FN_ATANH, "arctanh")
#undef FN_ALIAS

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

/* a value's type for messages: "tensor" for a tensor */
static const char *type_of(lua_State *L, int i) { return l_totensor(L, i) ? "tensor" : l_typename(L, i); }

static int fn_binary(lua_State *L, lt_fn2op op, const char *name) {
  const char *gate = lt_fn2op_name(op);
  lt_tensor *ta = l_f64_gate(L, l_totensor(L, 1), gate), *tb = l_f64_gate(L, l_totensor(L, 2), gate);
  const lt_tensor *like = ta ? ta : tb;
  if (!like || (!ta && lua_type(L, 1) != LUA_TNUMBER) || (!tb && lua_type(L, 2) != LUA_TNUMBER))
    return l_errorf(L, "%s: expected tensors or numbers (at least one tensor), got %s and %s", name, type_of(L, 1),
                    type_of(L, 2));
  lt_tensor *a = ta ? lt_tensor_retain(ta) : scalar_like(L, 1, like);
  lt_tensor *b = a ? (tb ? lt_tensor_retain(tb) : scalar_like(L, 2, like)) : NULL;
  lt_tensor *r = b ? lt_op_fn2(L_CTX(L), op, a, b) : NULL;
  lt_tensor_release(a);
  lt_tensor_release(b);
  if (!r) return l_error_as(L, name);
  return l_push(L, r);
}

/* name: the name called without its '_' */
static int fn_binary_(lua_State *L, lt_fn2op op, const char *name) {
  inplace_names n = names_of_inplace(lt_fn2op_name(op), name);
  lt_tensor *a = l_check_writable(L, T(1, n.op), name);
  lt_tensor *tb = l_f64_gate(L, l_totensor(L, 2), n.op);
  if (!tb && lua_type(L, 2) != LUA_TNUMBER)
    return l_errorf(L, "%s: expected a tensor or a number, got %s", n.called, type_of(L, 2));
  lt_tensor *b = tb ? lt_tensor_retain(tb) : scalar_like(L, 2, a);
  if (!b) return l_error_as(L, n.called);
  int st = lt_op_fn2_(L_CTX(L), op, a, b);
  lt_tensor_release(b);
  if (st) return l_error_as(L, n.called);
  lua_settop(L, 1);
  return 1;
}

#define FN2_BIND(e, name)                                          \
  static int l_##e(lua_State *L) { return fn_binary(L, e, name); } \
  static int l_##e##_(lua_State *L) { return fn_binary_(L, e, name); }
LT_FN2_LIST(FN2_BIND)
#undef FN2_BIND
static int l_arctan2(lua_State *L) { return fn_binary(L, LT_FN2_ATAN2, "arctan2"); }
static int l_arctan2_(lua_State *L) { return fn_binary_(L, LT_FN2_ATAN2, "arctan2"); }

/* ---- scans: x:cummax(dim) -> values, 1-based indices; x:logcumsumexp(dim) -------------------------------------- */

static int cumext(lua_State *L, int max) {
  const char *name = max ? "cummax" : "cummin";
  lt_tensor *t = T(1, name);
  if (lua_isnoneornil(L, 2)) return l_errorf(L, "%s: dim is required (as in torch.%s)", name, name);
  int dim = l_checkdim(L, 2, t->ndim, name);
  lt_tensor *v = NULL, *i = NULL;
  l_check(L, lt_op_cumext(L_CTX(L), t, dim, max, &v, &i));
  l_push(L, v);
  /* 1-based for Lua; a new tensor, since the 0-based one is saved by the autograd node */
  lt_tensor *i1 = lt_op_binary_scalar(L_CTX(L), LT_ADD, i, 1.0, 0);
  lt_tensor_release(i);
  return 1 + l_push(L, i1);
}
static int l_cummax(lua_State *L) { return cumext(L, 1); }
static int l_cummin(lua_State *L) { return cumext(L, 0); }

static int l_logcumsumexp(lua_State *L) {
  lt_tensor *t = T(1, "logcumsumexp");
  if (lua_isnoneornil(L, 2)) return l_errorf(L, "logcumsumexp: dim is required (as in torch.logcumsumexp)");
  return l_push(L, lt_op_logcumsumexp(L_CTX(L), t, l_checkdim(L, 2, t->ndim, "logcumsumexp")));
}

/* ---- registration ------------------------------------------------------------------------------------------ */

#define FN_REG(e, name) { name, l_##e }, { name "_", l_##e##_ },
static const luaL_Reg methods[] = { LT_FN_LIST(FN_REG) LT_FN2_LIST(FN_REG)
                                    /* PyTorch's aliases */
                                    { "arcsin", l_arcsin },
                                    { "arcsin_", l_arcsin_ },
                                    { "arccos", l_arccos },
                                    { "arccos_", l_arccos_ },
                                    { "arctan", l_arctan },
                                    { "arctan_", l_arctan_ },
                                    { "arcsinh", l_arcsinh },
                                    { "arcsinh_", l_arcsinh_ },
                                    { "arccosh", l_arccosh },
                                    { "arccosh_", l_arccosh_ },
                                    { "arctanh", l_arctanh },
                                    { "arctanh_", l_arctanh_ },
                                    { "arctan2", l_arctan2 },
                                    { "arctan2_", l_arctan2_ },
                                    { "cummax", l_cummax },
                                    { "cummin", l_cummin },
                                    { "logcumsumexp", l_logcumsumexp },
                                    { NULL, NULL } };
#undef FN_REG

/* Expects the module table on top, after l_tensor_register made the methods table. */
void l_special_register(lua_State *L) { l_tensor_add(L, NULL, methods, NULL); }
