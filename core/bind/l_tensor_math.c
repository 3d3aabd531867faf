/*
 * l_tensor_math.c — maths on tensors: binary ops with a tensor or a number on either side (also the + - * / ^
 * and unary minus metamethods), their in-place forms, unary maths and activations, leaky_relu, clamp, where,
 * matmul, linear, reductions (sum, mean, max, min, argmax) and softmax.
 */
#include <math.h>
#include <string.h>

#include "l_tensor.h"

/* ---- maths ------------------------------------------------------------------------------------ */

/* add and sub's alpha, PyTorch's `torch.add(x, y, alpha=2)`: a number third (as x:add_(y, 2) takes it) or
 * {alpha = 2}; the other ops take no third argument. Anything else there is an error: ignored, x:add(y, 2)
 * gave x + y and lt.add(x, y, {out = o}) left o untouched. Returns alpha (1 when not given). */
static double binary_alpha(lua_State *L, lt_binop op, const char *name) {
  static const char *const known[] = { "alpha", NULL };
  int takes_alpha = op == LT_ADD || op == LT_SUB;
  if (lua_gettop(L) > 3 || (!takes_alpha && !lua_isnoneornil(L, 3)))
    l_errorf(L, "%s: expected (input, other%s), got %d arguments", name, takes_alpha ? "[, alpha]" : "", lua_gettop(L));
  if (lua_isnoneornil(L, 3)) return 1;
  if (lua_type(L, 3) == LUA_TNUMBER) return lua_tonumber(L, 3);
  if (lua_istable(L, 3)) {
    lua_getfield(L, 3, "out");
    int has_out = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (has_out)
      l_errorf(L,
               "%s: option 'out' is not supported: use the result (y = lt.%s(a, b)), or update a tensor in place "
               "with a:%s_(b)",
               name, name, name);
  }
  l_check_opts(L, 3, name, known);
  lua_getfield(L, 3, "alpha");
  if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TNUMBER)
    l_errorf(L, "%s: option 'alpha' must be a number, got %s", name, luaL_typename(L, -1));
  double alpha = lua_isnil(L, -1) ? 1 : lua_tonumber(L, -1);
  lua_pop(L, 1);
  return alpha;
}

/* a op b where either may be a number (for metamethods and lt.add(x, 2)); add and sub scale b by alpha */
static int binary(lua_State *L, lt_binop op) {
  const char *name = lt_binop_name(op);
  lt_tensor *a = l_f64_gate(L, l_totensor(L, 1), name), *b = l_f64_gate(L, l_totensor(L, 2), name);
  lt_ctx *c = L_CTX(L);
  double alpha = binary_alpha(L, op, name);
  if (alpha != 1 && b && (a || lua_type(L, 1) == LUA_TNUMBER)) { /* a op alpha * b, differentiable in both */
    if (b->dtype == LT_I64 && !l_is_int64(alpha))                /* an integer in range; NaN is neither */
      l_errorf(L, "%s: alpha must be an integer within int64's range for an int64 tensor, got %.14g", name, alpha);
    lt_tensor *scaled = lt_op_binary_scalar(c, LT_MUL, b, alpha, 0);
    if (!scaled) return l_error(L);
    lt_tensor *r = a ? lt_op_binary(c, op, a, scaled) : lt_op_binary_scalar(c, op, scaled, lua_tonumber(L, 1), 1);
    lt_tensor_release(scaled);
    return l_push(L, r);
  }
  if (alpha != 1 && a && lua_type(L, 2) == LUA_TNUMBER)
    return l_push(L, lt_op_binary_scalar(c, op, a, alpha * lua_tonumber(L, 2), 0));
  if (a && b) return l_push(L, lt_op_binary(c, op, a, b));
  if (a && lua_type(L, 2) == LUA_TNUMBER) return l_push(L, lt_op_binary_scalar(c, op, a, lua_tonumber(L, 2), 0));
  if (b && lua_type(L, 1) == LUA_TNUMBER) return l_push(L, lt_op_binary_scalar(c, op, b, lua_tonumber(L, 1), 1));
  return l_errorf(L, "%s: expected tensors or numbers, got %s and %s", name, l_typename(L, 1), l_typename(L, 2));
}
static int l_add(lua_State *L) { return binary(L, LT_ADD); }
static int l_sub(lua_State *L) { return binary(L, LT_SUB); }
static int l_mul(lua_State *L) { return binary(L, LT_MUL); }
static int l_div(lua_State *L) { return binary(L, LT_DIV); }
static int l_pow(lua_State *L) { return binary(L, LT_POW); }
static int l_maximum(lua_State *L) { return binary(L, LT_MAXIMUM); }
static int l_minimum(lua_State *L) { return binary(L, LT_MINIMUM); }
static int l_eq(lua_State *L) { return binary(L, LT_EQ); }
static int l_ne(lua_State *L) { return binary(L, LT_NE); }
static int l_lt(lua_State *L) { return binary(L, LT_LT); }
static int l_le(lua_State *L) { return binary(L, LT_LE); }
static int l_gt(lua_State *L) { return binary(L, LT_GT); }
static int l_ge(lua_State *L) { return binary(L, LT_GE); }

static int inplace_binary(lua_State *L, lt_binop op) {
  lt_tensor *a = l_check_writable(L, T(1, lt_binop_name(op)), lt_binop_name(op));
  lt_tensor *b = l_f64_gate(L, l_totensor(L, 2), lt_binop_name(op));
  lt_ctx *c = L_CTX(L);
  if (b) {
    if (op == LT_ADD && !lua_isnoneornil(L, 3)) /* x:add_(y, alpha) */
      l_check(L, lt_op_axpy_(c, a, l_checknumber(L, 3), b));
    else l_check(L, lt_op_binary_(c, op, a, b));
  } else {
    l_check(L, lt_op_binary_scalar_(c, op, a, l_checknumber(L, 2)));
  }
  lua_settop(L, 1);
  return 1;
}
static int l_add_(lua_State *L) { return inplace_binary(L, LT_ADD); }
static int l_sub_(lua_State *L) { return inplace_binary(L, LT_SUB); }
static int l_mul_(lua_State *L) { return inplace_binary(L, LT_MUL); }
static int l_div_(lua_State *L) { return inplace_binary(L, LT_DIV); }
static int l_pow_(lua_State *L) { return inplace_binary(L, LT_POW); }

static int l_unm(lua_State *L) { return l_push(L, lt_op_unary(L_CTX(L), LT_NEG, T(1, "neg"))); }

#define UNARY(fn, OP, name)                                                                \
  static int fn(lua_State *L) { return l_push(L, lt_op_unary(L_CTX(L), OP, T(1, name))); } \
  static int fn##_(lua_State *L) {                                                         \
    l_check(L, lt_op_unary_(L_CTX(L), OP, l_check_writable(L, T(1, name "_"), name)));     \
    lua_settop(L, 1);                                                                      \
    return 1;                                                                              \
  }
UNARY(l_neg, LT_NEG, "neg")
UNARY(l_exp, LT_EXP, "exp")
UNARY(l_log, LT_LOG, "log")
UNARY(l_sqrt, LT_SQRT, "sqrt")
UNARY(l_abs, LT_ABS, "abs")
UNARY(l_tanh, LT_TANH, "tanh")
UNARY(l_sigmoid, LT_SIGMOID, "sigmoid")
UNARY(l_relu, LT_RELU, "relu")
UNARY(l_sin, LT_SIN, "sin")
UNARY(l_cos, LT_COS, "cos")
UNARY(l_gelu, LT_GELU, "gelu")
UNARY(l_rsqrt, LT_RSQRT, "rsqrt")
UNARY(l_sign, LT_SIGN, "sign")
UNARY(l_log1p, LT_LOG1P, "log1p")
UNARY(l_square, LT_SQUARE, "square")

static int l_leaky_relu(lua_State *L) {
  return l_push(L, lt_op_leaky_relu(L_CTX(L), T(1, "leaky_relu"), l_optnumber(L, 2, 0.01)));
}

static double opt_bound(lua_State *L, int idx, double def, const char *name) {
  if (lua_isnoneornil(L, idx)) return def;
  double v = l_checknumber(L, idx);
  if (v != v) l_errorf(L, "%s: %s is nan", name, idx == 2 ? "min" : "max");
  return v;
}

static int l_clamp(lua_State *L) {
  lt_tensor *t = T(1, "clamp");
  return l_push(L, lt_op_clamp(L_CTX(L), t, opt_bound(L, 2, -INFINITY, "clamp"), opt_bound(L, 3, INFINITY, "clamp")));
}
static int l_clamp_(lua_State *L) {
  lt_tensor *t = l_check_writable(L, T(1, "clamp_"), "clamp");
  l_check(L, lt_op_clamp_(L_CTX(L), t, opt_bound(L, 2, -INFINITY, "clamp_"), opt_bound(L, 3, INFINITY, "clamp_")));
  lua_settop(L, 1);
  return 1;
}

static int l_where(lua_State *L) {
  lt_tensor *cond = T(1, "where");
  lt_ctx *c = L_CTX(L);
  lt_tensor *a = l_f64_gate(L, l_totensor(L, 2), "where"), *b = l_f64_gate(L, l_totensor(L, 3), "where");
  /* a number takes the other operand's float dtype (PyTorch: a Python scalar does not promote, nor round a
   * float64 value to float32) */
  lt_dtype da = b && b->dtype == LT_F64 ? LT_F64 : LT_F32, db = a && a->dtype == LT_F64 ? LT_F64 : LT_F32;
  lt_tensor *ta = a ? lt_tensor_retain(a) : lt_tensor_scalar_of(c, da, l_checknumber(L, 2));
  lt_tensor *tb =
      b ? lt_tensor_retain(b) : (lua_isnumber(L, 3) ? lt_tensor_scalar_of(c, db, lua_tonumber(L, 3)) : NULL);
  if (!ta || !tb) {
    lt_tensor_release(ta);
    lt_tensor_release(tb);
    return l_errorf(L, "where: expected (cond, a, b) with a and b tensors or numbers");
  }
  lt_tensor *r = lt_op_where(c, cond, ta, tb);
  lt_tensor_release(ta);
  lt_tensor_release(tb);
  return l_push(L, r);
}

static int l_matmul(lua_State *L) { return l_push(L, lt_op_matmul(L_CTX(L), T(1, "matmul"), T(2, "matmul"))); }

/* linear(x, w[, b[, activation]]): activation nil, "relu", "gelu" or "gelu_tanh" (fused: one node, see
 * lt_op_linear_act) */
static int l_linear(lua_State *L) {
  lt_tensor *b = lua_isnoneornil(L, 3) ? NULL : T(3, "linear");
  lt_act act = LT_ACT_NONE;
  if (!lua_isnoneornil(L, 4)) {
    const char *a = l_checkstring(L, 4);
    if (!strcmp(a, "relu")) act = LT_ACT_RELU;
    else if (!strcmp(a, "gelu")) act = LT_ACT_GELU;
    else if (!strcmp(a, "gelu_tanh")) act = LT_ACT_GELU_TANH;
    else return l_errorf(L, "linear: unknown activation '%s' (expected \"relu\", \"gelu\", \"gelu_tanh\" or nil)", a);
  }
  return l_push(L, lt_op_linear_act(L_CTX(L), T(1, "linear"), T(2, "linear"), b, act));
}

/* sum/mean: (x[, dim[, keepdim]]) */
static int reduce(lua_State *L, lt_redop op, const char *name) {
  lt_tensor *t = T(1, name);
  int dim = l_optdim(L, 2, t->ndim, name, -1);
  int keep = lua_toboolean(L, 3);
  return l_push(L, lt_op_reduce(L_CTX(L), op, t, dim, keep));
}
static int l_sum(lua_State *L) { return reduce(L, LT_RSUM, "sum"); }
static int l_mean(lua_State *L) { return reduce(L, LT_RMEAN, "mean"); }

/* max/min: without dim the value; with dim (values, 1-based indices) like Torch7 */
static int reduce_idx(lua_State *L, lt_redop op, const char *name) {
  lt_tensor *t = T(1, name);
  if (lua_isnoneornil(L, 2)) return l_push(L, lt_op_reduce(L_CTX(L), op, t, -1, 0));
  if (l_totensor(L, 2)) return binary(L, op == LT_RMAX ? LT_MAXIMUM : LT_MINIMUM);
  int dim = l_checkdim(L, 2, t->ndim, name);
  lt_tensor *v = NULL, *i = NULL;
  l_check(L, lt_op_reduce_idx(L_CTX(L), op, t, dim, lua_toboolean(L, 3), &v, &i));
  l_push(L, v);
  /* 1-based for Lua; a new tensor, since the 0-based one is saved by the autograd node */
  lt_tensor *i1 = lt_op_binary_scalar(L_CTX(L), LT_ADD, i, 1.0, 0);
  lt_tensor_release(i);
  return 1 + l_push(L, i1);
}
static int l_max(lua_State *L) { return reduce_idx(L, LT_RMAX, "max"); }
static int l_min(lua_State *L) { return reduce_idx(L, LT_RMIN, "min"); }

static int l_argmax(lua_State *L) {
  lt_tensor *t = T(1, "argmax");
  int dim = l_optdim(L, 2, t->ndim, "argmax", -1);
  lt_tensor *i = lt_op_argmax(L_CTX(L), t, dim, lua_toboolean(L, 3));
  l_push(L, i);
  l_check(L, lt_op_binary_scalar_(L_CTX(L), LT_ADD, i, 1.0));
  return 1;
}

static int l_softmax(lua_State *L) {
  lt_tensor *t = T(1, "softmax");
  return l_push(L, lt_op_softmax(L_CTX(L), t, l_optdim(L, 2, t->ndim, "softmax", t->ndim ? t->ndim - 1 : 0)));
}
static int l_log_softmax(lua_State *L) {
  lt_tensor *t = T(1, "log_softmax");
  return l_push(L, lt_op_log_softmax(L_CTX(L), t, l_optdim(L, 2, t->ndim, "log_softmax", t->ndim ? t->ndim - 1 : 0)));
}

static const luaL_Reg methods[] = { { "add", l_add },
                                    { "sub", l_sub },
                                    { "mul", l_mul },
                                    { "div", l_div },
                                    { "pow", l_pow },
                                    { "maximum", l_maximum },
                                    { "minimum", l_minimum },
                                    { "eq", l_eq },
                                    { "ne", l_ne },
                                    { "lt", l_lt },
                                    { "le", l_le },
                                    { "gt", l_gt },
                                    { "ge", l_ge },
                                    { "add_", l_add_ },
                                    { "sub_", l_sub_ },
                                    { "mul_", l_mul_ },
                                    { "div_", l_div_ },
                                    { "pow_", l_pow_ },
                                    { "neg", l_neg },
                                    { "exp", l_exp },
                                    { "log", l_log },
                                    { "sqrt", l_sqrt },
                                    { "abs", l_abs },
                                    { "tanh", l_tanh },
                                    { "sigmoid", l_sigmoid },
                                    { "relu", l_relu },
                                    { "sin", l_sin },
                                    { "cos", l_cos },
                                    { "gelu", l_gelu },
                                    { "rsqrt", l_rsqrt },
                                    { "sign", l_sign },
                                    { "log1p", l_log1p },
                                    { "square", l_square },
                                    { "neg_", l_neg_ },
                                    { "exp_", l_exp_ },
                                    { "log_", l_log_ },
                                    { "sqrt_", l_sqrt_ },
                                    { "abs_", l_abs_ },
                                    { "tanh_", l_tanh_ },
                                    { "sigmoid_", l_sigmoid_ },
                                    { "relu_", l_relu_ },
                                    { "sin_", l_sin_ },
                                    { "cos_", l_cos_ },
                                    { "gelu_", l_gelu_ },
                                    { "rsqrt_", l_rsqrt_ },
                                    { "sign_", l_sign_ },
                                    { "log1p_", l_log1p_ },
                                    { "square_", l_square_ },
                                    { "leaky_relu", l_leaky_relu },
                                    { "clamp", l_clamp },
                                    { "clamp_", l_clamp_ },
                                    { "matmul", l_matmul },
                                    { "sum", l_sum },
                                    { "mean", l_mean },
                                    { "max", l_max },
                                    { "min", l_min },
                                    { "argmax", l_argmax },
                                    { "softmax", l_softmax },
                                    { "log_softmax", l_log_softmax },
                                    { NULL, NULL } };
static const luaL_Reg functions[] = { { "where", l_where }, { "linear", l_linear }, { NULL, NULL } };

/* Maths, with the arithmetic metamethods: expects the module table on top, after l_tensor_register. */
void l_tensor_math_register(lua_State *L) {
  l_tensor_add(L, NULL, methods, functions);
  static const luaL_Reg arith[] = { { "__add", l_add }, { "__sub", l_sub }, { "__mul", l_mul }, { "__div", l_div },
                                    { "__pow", l_pow }, { "__unm", l_unm }, { NULL, NULL } };
  lua_pushvalue(L, lua_upvalueindex(2)); /* the tensor metatable */
  l_setops(L, arith);
  lua_pop(L, 1);
}
