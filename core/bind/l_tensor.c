/*
 * l_tensor.c — the tensor userdata: creation functions (lt.zeros ...), queries, views, maths,
 * in-place ops and autograd, as Lua methods and lt.* functions. Dims and indices are 1-based here
 * and 0-based in the core; index-valued tensors are converted at this boundary.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "l_names.h"
#include "l_util.h"
#include "lt_alloc.h"
#include "lt_blas.h"
#include "lt_fpmode.h"
#include "lt_pool.h"

#define T(i, name) l_checktensor(L, (i), (name))

/* ---- lifecycle ------------------------------------------------------------------------------ */

static int l_gc(lua_State *L) {
  l_box *b = lua_touserdata(L, 1);
  if (b && b->t) {
    lt_tensor_release(b->t);
    b->t = NULL;
  }
  return 0;
}

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
        } else lt_f32(t)[(*pos)++] = (float)v;
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
  lt_dtype dt = l_checkdtype(L, 2, LT_F32, "tensor");
  lt_tensor *src = l_totensor(L, 1);
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

static int creation(lua_State *L, const char *name, int kind) {
  int64_t shape[LT_MAX_DIM];
  int ndim = l_checkshape(L, 1, shape, name);
  int next = lua_istable(L, 1) ? 2 : ndim + 1;
  lt_ctx *c = L_CTX(L);
  l_check_new_shape(L, ndim, shape, name);
  lt_tensor *t = NULL;
  switch (kind) {
    case 0: t = lt_tensor_zeros(c, l_checkdtype(L, next, LT_F32, name), ndim, shape); break;
    case 1: t = lt_op_full(c, l_checkdtype(L, next, LT_F32, name), ndim, shape, 1.0); break;
    case 2: t = lt_tensor_new(c, l_checkdtype(L, next, LT_F32, name), ndim, shape); break;
    case 3: t = lt_op_rand(c, ndim, shape); break;
    case 4: t = lt_op_randn(c, ndim, shape); break;
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
  lt_dtype dt = l_checkdtype(L, 3, LT_F32, "full");
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
  int all_int = a == floor(a) && b == floor(b) && step == floor(step);
  lt_dtype dt = l_checkdtype(L, 4, all_int && lua_isstring(L, 4) ? LT_I64 : LT_F32, "arange");
  lt_tensor *t = lt_op_arange(L_CTX(L), a, b, step, dt);
  if (!t) return l_error_as(L, "arange"); /* an allocation failure is arange's */
  return l_push(L, t);
}

static int l_eye(lua_State *L) {
  int64_t n = l_checkint(L, 1, "eye", "n", 0, L_INT_MAX);
  int64_t m = lua_isnoneornil(L, 2) ? n : l_checkint(L, 2, "eye", "m", 0, L_INT_MAX);
  lt_tensor *t = lt_op_eye(L_CTX(L), n, m);
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

/* ---- queries ---------------------------------------------------------------------------------- */

static int l_shape(lua_State *L) {
  lt_tensor *t = T(1, "shape");
  lua_createtable(L, t->ndim, 0);
  for (int d = 0; d < t->ndim; d++) {
    lua_pushinteger(L, (lua_Integer)t->shape[d]);
    lua_rawseti(L, -2, d + 1);
  }
  return 1;
}

static int l_size(lua_State *L) {
  lt_tensor *t = T(1, "size");
  if (lua_isnoneornil(L, 2)) return l_shape(L);
  int d = l_checkdim(L, 2, t->ndim, "size");
  lua_pushinteger(L, t->ndim ? (lua_Integer)t->shape[d] : 1);
  return 1;
}

static int l_stride(lua_State *L) {
  lt_tensor *t = T(1, "stride");
  lua_createtable(L, t->ndim, 0);
  for (int d = 0; d < t->ndim; d++) {
    lua_pushinteger(L, (lua_Integer)t->stride[d]);
    lua_rawseti(L, -2, d + 1);
  }
  return 1;
}

static int l_len(lua_State *L) {
  lt_tensor *t = T(1, "__len");
  if (t->ndim == 0) return l_errorf(L, "#: a 0-dim tensor has no length (use x:item())");
  lua_pushinteger(L, (lua_Integer)t->shape[0]);
  return 1;
}

static int l_dim(lua_State *L) {
  lua_pushinteger(L, T(1, "dim")->ndim);
  return 1;
}
static int l_numel(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)lt_numel(T(1, "numel")));
  return 1;
}
static int l_dtype(lua_State *L) {
  lua_pushstring(L, lt_dtype_name(T(1, "dtype")->dtype));
  return 1;
}
static int l_is_contiguous(lua_State *L) {
  lua_pushboolean(L, lt_is_contiguous(T(1, "is_contiguous")));
  return 1;
}

static int l_item(lua_State *L) {
  lt_tensor *t = T(1, "item");
  if (lt_numel(t) != 1) {
    char b[128];
    return l_errorf(L, "item: the tensor has %lld elements (shape %s), item() needs exactly one",
                    (long long)lt_numel(t), lt_shape_str(t, b, sizeof b));
  }
  /* an int64 tensor's value is a Lua integer (5.3+ prints it without ".0") */
  if (t->dtype == LT_I64) lua_pushinteger(L, (lua_Integer)lt_get_flat_i64(t, 0));
  else lua_pushnumber(L, lt_get_flat(t, 0));
  return 1;
}

static void push_table_rec(lua_State *L, const lt_tensor *t, int d, int64_t off) {
  if (d == t->ndim) {
    if (t->dtype == LT_I64) lua_pushinteger(L, (lua_Integer)((int64_t *)t->storage->data)[off]);
    else lua_pushnumber(L, ((float *)t->storage->data)[off]);
    return;
  }
  lua_createtable(L, (int)t->shape[d], 0);
  for (int64_t i = 0; i < t->shape[d]; i++) {
    push_table_rec(L, t, d + 1, off + i * t->stride[d]);
    lua_rawseti(L, -2, (int)i + 1);
  }
}

/* nested Lua tables as torch's tolist (a 0-dim tensor gives its number) */
static int l_totable(lua_State *L) {
  lt_tensor *t = T(1, "totable");
  push_table_rec(L, t, 0, t->offset);
  return 1;
}

/* ---- views ------------------------------------------------------------------------------------ */

static int l_view(lua_State *L) {
  lt_tensor *t = T(1, "view");
  int64_t shape[LT_MAX_DIM];
  int n = l_checkshape_only(L, 2, shape, "view");
  return l_push(L, lt_op_view(L_CTX(L), t, n, shape));
}

static int l_reshape(lua_State *L) {
  lt_tensor *t = T(1, "reshape");
  int64_t shape[LT_MAX_DIM];
  int n = l_checkshape_only(L, 2, shape, "reshape");
  return l_push(L, lt_op_reshape(L_CTX(L), t, n, shape));
}

static int l_t(lua_State *L) {
  lt_tensor *t = T(1, "t");
  if (t->ndim > 2) {
    char b[128];
    return l_errorf(L, "t: expects a tensor with <= 2 dims, got %s (use transpose(d1, d2))",
                    lt_shape_str(t, b, sizeof b));
  }
  if (t->ndim < 2) return l_push(L, lt_op_view(L_CTX(L), t, t->ndim, t->shape));
  return l_push(L, lt_op_transpose(L_CTX(L), t, 0, 1));
}

static int l_transpose(lua_State *L) {
  lt_tensor *t = T(1, "transpose");
  int d1 = l_checkdim_nz(L, 2, t->ndim, "transpose"), d2 = l_checkdim_nz(L, 3, t->ndim, "transpose");
  return l_push(L, lt_op_transpose(L_CTX(L), t, d1, d2));
}

static int l_permute(lua_State *L) {
  lt_tensor *t = T(1, "permute");
  int perm[LT_MAX_DIM];
  int64_t dims[LT_MAX_DIM];
  int n = l_checkshape_only(L, 2, dims, "permute");
  if (n != t->ndim) return l_errorf(L, "permute: %d dims given for a %d-dimensional tensor", n, t->ndim);
  for (int d = 0; d < n; d++) {
    int64_t v = dims[d];
    perm[d] = (int)(v < 0 ? t->ndim + v : v - 1);
  }
  return l_push(L, lt_op_permute(L_CTX(L), t, perm));
}

static int l_narrow(lua_State *L) {
  lt_tensor *t = T(1, "narrow");
  int d = l_checkdim_nz(L, 2, t->ndim, "narrow");
  int64_t start = l_checkint(L, 3, "narrow", "start", -L_INT_MAX, L_INT_MAX);
  int64_t len = l_checkint(L, 4, "narrow", "length", -L_INT_MAX, L_INT_MAX);
  if (start < 1) return l_errorf(L, "narrow: start %lld is out of range (1-based)", (long long)start);
  return l_push(L, lt_op_narrow(L_CTX(L), t, d, start - 1, len));
}

static int l_select(lua_State *L) {
  lt_tensor *t = T(1, "select");
  int d = l_checkdim_nz(L, 2, t->ndim, "select");
  int64_t i = l_checkint(L, 3, "select", "index", -L_INT_MAX, L_INT_MAX);
  if (i < 0 && t->ndim) i += t->shape[d] + 1;
  return l_push(L, lt_op_select(L_CTX(L), t, d, i - 1));
}

static int l_unsqueeze(lua_State *L) {
  lt_tensor *t = T(1, "unsqueeze");
  int d = l_checkdim(L, 2, t->ndim + 1, "unsqueeze");
  return l_push(L, lt_op_unsqueeze(L_CTX(L), t, d));
}

static int l_squeeze(lua_State *L) {
  lt_tensor *t = T(1, "squeeze");
  int d = l_optdim(L, 2, t->ndim, "squeeze", -1);
  return l_push(L, lt_op_squeeze(L_CTX(L), t, d));
}

static int l_expand(lua_State *L) {
  lt_tensor *t = T(1, "expand");
  int64_t shape[LT_MAX_DIM];
  int n = l_checkshape_only(L, 2, shape, "expand");
  return l_push(L, lt_op_expand(L_CTX(L), t, n, shape));
}

static int l_flatten(lua_State *L) {
  lt_tensor *t = T(1, "flatten");
  if (t->ndim == 0) return l_push(L, lt_op_reshape(L_CTX(L), t, 1, (int64_t[]){ 1 }));
  int s = l_optdim(L, 2, t->ndim, "flatten", 0), e = l_optdim(L, 3, t->ndim, "flatten", t->ndim - 1);
  if (s > e) return l_errorf(L, "flatten: start dim %d is after end dim %d", s + 1, e + 1);
  int64_t shape[LT_MAX_DIM];
  int k = 0;
  for (int d = 0; d < s; d++) shape[k++] = t->shape[d];
  int64_t m = 1;
  for (int d = s; d <= e; d++) m *= t->shape[d];
  shape[k++] = m;
  for (int d = e + 1; d < t->ndim; d++) shape[k++] = t->shape[d];
  return l_push(L, lt_op_reshape(L_CTX(L), t, k, shape));
}

static int l_contiguous(lua_State *L) { return l_push(L, lt_op_contiguous(L_CTX(L), T(1, "contiguous"))); }
static int l_clone(lua_State *L) { return l_push(L, lt_op_clone(L_CTX(L), T(1, "clone"))); }
static int l_detach(lua_State *L) { return l_push(L, lt_op_detach(L_CTX(L), T(1, "detach"))); }
/* a conversion's failure (a NaN to int64) is named by the function called: the core's op is "to int64" */
static int to_dtype(lua_State *L, lt_tensor *t, const char *fname, lt_dtype dt) {
  lt_tensor *r = lt_op_to_dtype(L_CTX(L), t, dt);
  if (!r) return l_error_as(L, fname);
  return l_push(L, r);
}
static int l_float(lua_State *L) { return to_dtype(L, T(1, "float"), "float", LT_F32); }
static int l_long(lua_State *L) { return to_dtype(L, T(1, "long"), "long", LT_I64); }
static int l_int64(lua_State *L) { return to_dtype(L, T(1, "int64"), "int64", LT_I64); }
static int l_type(lua_State *L) {
  lt_tensor *t = T(1, "type");
  if (lua_isnoneornil(L, 2)) {
    lua_pushstring(L, lt_dtype_name(t->dtype));
    return 1;
  }
  return to_dtype(L, t, "type", l_checkdtype(L, 2, LT_F32, "type"));
}

/* ---- maths ------------------------------------------------------------------------------------ */

/* lt_op_binary_scalar(_) computes an int64 tensor with an integral scalar in int64 (except div and pow, which
 * give float32): such a scalar must be an int64 value. Said here under the op's name (the core refuses it too,
 * in the fill_ that makes the scalar tensor). */
static double scalar_for(lua_State *L, const lt_tensor *t, lt_binop op, double s, const char *suffix) {
  if (t->dtype == LT_I64 && op != LT_DIV && op != LT_POW && s == floor(s) && !l_is_int64(s))
    l_errorf(L, "%s%s: the scalar %.14g is outside int64's range (the tensor is int64: convert it with :float() first)",
             lt_binop_name(op), suffix, s);
  return s;
}

/* a op b where either may be a number (for metamethods and lt.add(x, 2)) */
static int binary(lua_State *L, lt_binop op) {
  const char *name = lt_binop_name(op);
  lt_tensor *a = l_totensor(L, 1), *b = l_totensor(L, 2);
  lt_ctx *c = L_CTX(L);
  if (a && b) return l_push(L, lt_op_binary(c, op, a, b));
  if (a && lua_type(L, 2) == LUA_TNUMBER)
    return l_push(L, lt_op_binary_scalar(c, op, a, scalar_for(L, a, op, lua_tonumber(L, 2), ""), 0));
  if (b && lua_type(L, 1) == LUA_TNUMBER)
    return l_push(L, lt_op_binary_scalar(c, op, b, scalar_for(L, b, op, lua_tonumber(L, 1), ""), 1));
  return l_errorf(L, "%s: expected tensors or numbers, got %s and %s", name, luaL_typename(L, 1), luaL_typename(L, 2));
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

/* An expand()ed view has several elements at one address: an in-place update would apply to each address
 * as many times as it is shared (x:expand(2, 3):add_(1) adds 2), so such writes are errors, as in PyTorch. */
static lt_tensor *check_writable(lua_State *L, lt_tensor *t, const char *name) {
  for (int d = 0; d < t->ndim; d++)
    if (t->stride[d] == 0 && t->shape[d] > 1)
      l_errorf(L,
               "%s_: the tensor's elements overlap in memory (an expand()ed view: dim %d has stride 0); "
               "call :clone() first",
               name, d + 1);
  return t;
}

static int inplace_binary(lua_State *L, lt_binop op) {
  lt_tensor *a = check_writable(L, T(1, lt_binop_name(op)), lt_binop_name(op));
  lt_tensor *b = l_totensor(L, 2);
  lt_ctx *c = L_CTX(L);
  if (b) {
    if (op == LT_ADD && !lua_isnoneornil(L, 3)) /* x:add_(y, alpha) */
      l_check(L, lt_op_axpy_(c, a, l_checknumber(L, 3), b));
    else l_check(L, lt_op_binary_(c, op, a, b));
  } else {
    l_check(L, lt_op_binary_scalar_(c, op, a, scalar_for(L, a, op, l_checknumber(L, 2), "_")));
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
    l_check(L, lt_op_unary_(L_CTX(L), OP, check_writable(L, T(1, name "_"), name)));       \
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
  lt_tensor *t = check_writable(L, T(1, "clamp_"), "clamp");
  l_check(L, lt_op_clamp_(L_CTX(L), t, opt_bound(L, 2, -INFINITY, "clamp_"), opt_bound(L, 3, INFINITY, "clamp_")));
  lua_settop(L, 1);
  return 1;
}

static int l_where(lua_State *L) {
  lt_tensor *cond = T(1, "where");
  lt_ctx *c = L_CTX(L);
  lt_tensor *a = l_totensor(L, 2), *b = l_totensor(L, 3);
  lt_tensor *ta = a ? lt_tensor_retain(a) : lt_tensor_scalar(c, l_checknumber(L, 2));
  lt_tensor *tb = b ? lt_tensor_retain(b) : (lua_isnumber(L, 3) ? lt_tensor_scalar(c, lua_tonumber(L, 3)) : NULL);
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

/* linear(x, w[, b[, activation]]): activation nil or "relu" (fused: one node, see lt_op_linear_act) */
static int l_linear(lua_State *L) {
  lt_tensor *b = lua_isnoneornil(L, 3) ? NULL : T(3, "linear");
  lt_act act = LT_ACT_NONE;
  if (!lua_isnoneornil(L, 4)) {
    const char *a = l_checkstring(L, 4);
    if (strcmp(a, "relu") != 0) return l_errorf(L, "linear: unknown activation '%s' (expected \"relu\" or nil)", a);
    act = LT_ACT_RELU;
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

static int gather_list(lua_State *L, const char *name, lt_tensor ***out) {
  l_checktype(L, 1, LUA_TTABLE);
  int n = (int)lua_objlen(L, 1);
  if (n == 0) return l_errorf(L, "%s: expected a non-empty list of tensors", name);
  lt_tensor **ts = lua_newuserdata(L, sizeof *ts * (size_t)n); /* freed by the GC, even on error */
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, 1, i + 1);
    ts[i] = l_totensor(L, -1);
    if (!ts[i])
      return l_errorf(L, "%s: element %d of the list is a %s, expected a tensor", name, i + 1, luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  *out = ts;
  return n;
}

static int l_cat(lua_State *L) {
  lt_tensor **ts;
  lua_settop(L, 2);
  int n = gather_list(L, "cat", &ts); /* pushes the list buffer at index 3 */
  for (int i = 0; i < n; i++)
    if (ts[i]->ndim == 0)
      return l_errorf(L, "cat: tensor %d is 0-dimensional and cannot be concatenated (use lt.stack)", i + 1);
  int dim = l_optdim(L, 2, ts[0]->ndim, "cat", 0);
  return l_push(L, lt_op_cat(L_CTX(L), n, ts, dim));
}

static int l_stack(lua_State *L) {
  lt_tensor **ts;
  lua_settop(L, 2);
  int n = gather_list(L, "stack", &ts);
  for (int i = 1; i < n; i++)
    if (ts[i]->dtype != ts[0]->dtype)
      return l_errorf(L, "stack: tensor %d is %s, tensor 1 is %s (all must have the same dtype)", i + 1,
                      lt_dtype_name(ts[i]->dtype), lt_dtype_name(ts[0]->dtype));
  int dim = l_optdim(L, 2, ts[0]->ndim + 1, "stack", 0);
  return l_push(L, lt_op_stack(L_CTX(L), n, ts, dim));
}

static int l_gather(lua_State *L) {
  lt_tensor *t = T(1, "gather");
  int dim = l_checkdim_nz(L, 2, t->ndim, "gather");
  lt_tensor *idx = l_index_from_lua(L, T(3, "gather"), "gather");
  lt_tensor *r = lt_op_gather(L_CTX(L), t, dim, idx);
  lt_tensor_release(idx);
  return l_push(L, r);
}

static int l_index_select(lua_State *L) {
  lt_tensor *t = T(1, "index_select");
  int dim = l_checkdim_nz(L, 2, t->ndim, "index_select");
  lt_tensor *idx = l_index_from_lua(L, T(3, "index_select"), "index_select");
  lt_tensor *r = lt_op_index_select(L_CTX(L), t, dim, idx);
  lt_tensor_release(idx);
  return l_push(L, r);
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
  return ret_self(L, lt_op_copy_(L_CTX(L), check_writable(L, T(1, "copy_"), "copy"), T(2, "copy_")));
}
static int l_uniform_(lua_State *L) {
  return ret_self(L, lt_op_uniform_(L_CTX(L), T(1, "uniform_"), l_optnumber(L, 2, 0), l_optnumber(L, 3, 1)));
}
static int l_normal_(lua_State *L) {
  return ret_self(L, lt_op_normal_(L_CTX(L), T(1, "normal_"), l_optnumber(L, 2, 0), l_optnumber(L, 3, 1)));
}

/* ---- autograd --------------------------------------------------------------------------------- */

static int l_requires_grad(lua_State *L) {
  lt_tensor *t = T(1, "requires_grad");
  if (lua_isnone(L, 2)) {
    lua_pushboolean(L, t->requires_grad);
    return 1;
  }
  int on = lua_toboolean(L, 2);
  if (t->grad_fn && !on)
    return l_errorf(L, "requires_grad: cannot turn off grad on a result of an op (use x:detach())");
  if (on && t->dtype != LT_F32)
    return l_errorf(L, "requires_grad: only float32 tensors can require grad, got %s", lt_dtype_name(t->dtype));
  t->requires_grad = on;
  lua_settop(L, 1);
  return 1;
}

static int l_param(lua_State *L) {
  lt_tensor *t = T(1, "param");
  if (t->dtype != LT_F32)
    return l_errorf(L, "param: only float32 tensors can require grad, got %s", lt_dtype_name(t->dtype));
  lt_tensor *r = t->grad_fn ? lt_op_detach(L_CTX(L), t) : lt_tensor_retain(t);
  if (!r) return l_error(L);
  r->requires_grad = 1;
  return l_push(L, r);
}

static int l_backward(lua_State *L) {
  lt_tensor *t = T(1, "backward");
  lt_tensor *g = lua_isnoneornil(L, 2) ? NULL : T(2, "backward");
  l_check(L, lt_backward(L_CTX(L), t, g));
  l_gc_account(L, L_STATE(L));
  return 0;
}

static int l_zero_grad(lua_State *L) {
  lt_tensor *t = T(1, "zero_grad");
  if (lua_toboolean(L, 2)) {
    lt_tensor_release(t->grad);
    t->grad = NULL;
  } /* set_to_none */
  else if (t->grad)
    l_check(L, lt_op_zero_(L_CTX(L), t->grad));
  lua_settop(L, 1);
  return 1;
}

static int l_is_leaf(lua_State *L) {
  lua_pushboolean(L, T(1, "is_leaf")->grad_fn == NULL);
  return 1;
}
static int l_grad_fn(lua_State *L) {
  lt_tensor *t = T(1, "grad_fn");
  if (t->grad_fn) lua_pushstring(L, t->grad_fn->op);
  else lua_pushnil(L);
  return 1;
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
    if (!src && t->dtype == LT_I64 && !l_is_int64(v))
      return l_errorf(L, "index: value %.14g is not an int64 value (the tensor is int64)", v);
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

/* ---- module-level ---------------------------------------------------------------------------- */

static int l_is_tensor(lua_State *L) {
  lua_pushboolean(L, l_totensor(L, 1) != NULL);
  return 1;
}

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

static int l_set_grad_enabled(lua_State *L) {
  lt_ctx *c = L_CTX(L);
  int was = c->grad_enabled;
  c->grad_enabled = lua_toboolean(L, 1);
  lua_pushboolean(L, was);
  return 1;
}
static int l_is_grad_enabled(lua_State *L) {
  lua_pushboolean(L, L_CTX(L)->grad_enabled);
  return 1;
}

static int l_set_num_threads(lua_State *L) {
  int n = (int)l_checkint(L, 1, "set_num_threads", "n", 1, 4096);
  L_CTX(L)->num_threads = n;
  lt_blas_set_threads(n);
  return 0;
}
static int l_get_num_threads(lua_State *L) {
  lua_pushinteger(L, L_CTX(L)->num_threads);
  return 1;
}

static int l_set_flush_denormal(lua_State *L) {
  int on = lua_toboolean(L, 1);
  L_CTX(L)->flush_denormal = on;                 /* lutra's mode while it computes */
  lt_pool_set_flush_denormal(on);                /* and on its pool's threads */
  lua_pushboolean(L, lt_set_flush_denormal(on)); /* and on this thread from now on: the user asked */
  return 1;
}

static int l_blas_info(lua_State *L) {
  const lt_blas_info *I = lt_blas_get_info();
  lua_createtable(L, 0, 7);
  lua_pushstring(L, I->library);
  lua_setfield(L, -2, "library");
  lua_pushstring(L, I->coretype);
  lua_setfield(L, -2, "coretype");
  lua_pushstring(L, I->corename);
  lua_setfield(L, -2, "corename");
  lua_pushstring(L, I->config);
  lua_setfield(L, -2, "config");
  lua_pushstring(L, I->reason);
  lua_setfield(L, -2, "reason");
  lua_pushstring(L, I->cpu_features);
  lua_setfield(L, -2, "cpu_features");
  lua_pushinteger(L, I->threads);
  lua_setfield(L, -2, "threads");
  return 1;
}

static int l_memory_stats(lua_State *L) {
  lt_alloc_stats s;
  lt_alloc_get_stats(&s);
  lua_createtable(L, 0, 6);
  lua_pushinteger(L, (lua_Integer)s.live_bytes);
  lua_setfield(L, -2, "live_bytes");
  lua_pushinteger(L, (lua_Integer)s.cached_bytes);
  lua_setfield(L, -2, "cached_bytes");
  lua_pushinteger(L, (lua_Integer)s.total_allocated);
  lua_setfield(L, -2, "total_allocated");
  lua_pushinteger(L, (lua_Integer)s.system_allocs);
  lua_setfield(L, -2, "system_allocs");
  lua_pushinteger(L, (lua_Integer)s.cache_hits);
  lua_setfield(L, -2, "cache_hits");
  lua_pushinteger(L, (lua_Integer)lt_tensor_live_count());
  lua_setfield(L, -2, "live_tensors");
  return 1;
}

static int l_empty_cache(lua_State *L) {
  (void)L;
  lt_alloc_trim();
  return 0;
}

/* storage identity, for tests of view sharing */
static int l_data_ptr(lua_State *L) {
  lt_tensor *t = T(1, "data_ptr");
  lua_pushlightuserdata(L, (char *)t->storage->data + t->offset * (int64_t)lt_dtype_size(t->dtype));
  return 1;
}

/* accessors: registered plainly (not timed as ops by the advanced profiler: they compute nothing) */
static const luaL_Reg accessors[] = { { "shape", l_shape },       { "size", l_size },
                                      { "stride", l_stride },     { "dim", l_dim },
                                      { "nDimension", l_dim },    { "numel", l_numel },
                                      { "nElement", l_numel },    { "dtype", l_dtype },
                                      { "item", l_item },         { "totable", l_totable },
                                      { "tolist", l_totable },    { "is_contiguous", l_is_contiguous },
                                      { "data_ptr", l_data_ptr }, { "requires_grad", l_requires_grad },
                                      { "is_leaf", l_is_leaf },   { NULL, NULL } };
static const luaL_Reg methods[] = { { "view", l_view },
                                    { "reshape", l_reshape },
                                    { "t", l_t },
                                    { "transpose", l_transpose },
                                    { "permute", l_permute },
                                    { "narrow", l_narrow },
                                    { "select", l_select },
                                    { "unsqueeze", l_unsqueeze },
                                    { "squeeze", l_squeeze },
                                    { "expand", l_expand },
                                    { "flatten", l_flatten },
                                    { "contiguous", l_contiguous },
                                    { "clone", l_clone },
                                    { "detach", l_detach },
                                    { "float", l_float },
                                    { "long", l_long },
                                    { "int64", l_int64 },
                                    { "type", l_type },
                                    { "add", l_add },
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
                                    { "gather", l_gather },
                                    { "index_select", l_index_select },
                                    { "zero_", l_zero_ },
                                    { "fill_", l_fill_ },
                                    { "copy_", l_copy_ },
                                    { "uniform_", l_uniform_ },
                                    { "normal_", l_normal_ },
                                    { "backward", l_backward },
                                    { "zero_grad", l_zero_grad },
                                    { "grad_fn", l_grad_fn },
                                    { NULL, NULL } };

/* lt.* functions (in addition to every method, which is also exported as lt.name(x, ...)) */
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
                                      { "param", l_param },
                                      { "cat", l_cat },
                                      { "stack", l_stack },
                                      { "where", l_where },
                                      { "linear", l_linear },
                                      { "is_tensor", l_is_tensor },
                                      { "manual_seed", l_manual_seed },
                                      { "get_rng_state", l_get_rng_state },
                                      { "set_rng_state", l_set_rng_state },
                                      { "random_integer", l_random_integer },
                                      { "randperm", l_randperm },
                                      { "set_grad_enabled", l_set_grad_enabled },
                                      { "is_grad_enabled", l_is_grad_enabled },
                                      { "set_num_threads", l_set_num_threads },
                                      { "get_num_threads", l_get_num_threads },
                                      { "set_flush_denormal", l_set_flush_denormal },
                                      { "blas_info", l_blas_info },
                                      { "memory_stats", l_memory_stats },
                                      { "empty_cache", l_empty_cache },
                                      { NULL, NULL } };

/* Expects the module table on top; the two upvalues must be pushable (called from luaopen). */
void l_tensor_register(lua_State *L) {
  int mod = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(2)); /* metatable */
  int mt = lua_gettop(L);
  lua_newtable(L); /* methods */
  int meth = lua_gettop(L);
  l_setmethods(L, accessors);
  l_setopmethods(L, methods);
  /* every method is also lt.name(x, ...) */
  for (const luaL_Reg *f = accessors; f->name; f++) {
    lua_getfield(L, meth, f->name);
    lua_setfield(L, mod, f->name);
  }
  for (const luaL_Reg *f = methods; f->name; f++) {
    lua_getfield(L, meth, f->name);
    lua_setfield(L, mod, f->name);
  }
  lua_pushvalue(L, mod);
  l_setops(L, functions);
  lua_pop(L, 1);
  /* metamethods */
  lua_pushvalue(L, meth);
  lua_setfield(L, mt, "methods");
  l_push_upvalues(L);
  lua_pushvalue(L, meth);
  lua_pushcclosure(L, l_index, 3);
  lua_setfield(L, mt, "__index");
  static const luaL_Reg meta[] = { { "__gc", l_gc }, { "__newindex", l_newindex }, { "__len", l_len }, { NULL, NULL } };
  static const luaL_Reg arith[] = { { "__add", l_add }, { "__sub", l_sub }, { "__mul", l_mul }, { "__div", l_div },
                                    { "__pow", l_pow }, { "__unm", l_unm }, { NULL, NULL } };
  lua_pushvalue(L, mt);
  l_setfuncs(L, meta);
  l_setops(L, arith);
  lua_pop(L, 1);
  lua_pushstring(L, "lutra.Tensor");
  lua_setfield(L, mt, "__name");
  lua_settop(L, mod);
}
