/*
 * l_infer.c — the C half of lt.infer (core/src/lt_infer.h), for lua/lutra/infer/:
 *   core._infer_new() -> plan                        an empty plan (its buffers and steps come next)
 *   plan:buffer(numel) -> index                      a zero-filled buffer of numel floats (indexes from 0)
 *   plan:view(index, {sizes}) -> tensor              the buffer seen as a tensor of that shape (shares it)
 *   plan:add{op=, act=, in=, out=, rows=, n_in=, n_out=, a=, b=, t={...}, geo={...}}
 *                                                    appends a step, checked (names in the tables below)
 *   plan:run_tensor(x, in)                           copies tensor x into buffer `in`, runs every step
 *   plan:run_table(xs, ys, in, out)                  reads Lua numbers xs[1..n] into buffer `in`, runs, writes
 *                                                    buffer `out` into ys[1..m]; allocates nothing once ys has
 *                                                    its m slots
 *   plan:reset_state(), plan:free()                  (free is idempotent; __gc frees a forgotten plan)
 */
#include <string.h>

#include "l_util.h"
#include "lt_infer.h"

#define INFER_MT "lutra.InferPlan"

typedef struct infer_box {
  lt_infer_plan *p;
} infer_box;

static lt_infer_plan *check_plan(lua_State *L) {
  infer_box *b = luaL_checkudata(L, 1, INFER_MT);
  if (!b->p) luaL_error(L, "lt.infer: the plan was freed");
  return b->p;
}

static int check_index(lua_State *L, const lt_infer_plan *p, int arg) {
  lua_Integer i = luaL_checkinteger(L, arg);
  if (i < 0 || i >= p->nbufs) return luaL_error(L, "lt.infer: buffer %d does not exist", (int)i);
  return (int)i;
}

static int l_infer_new(lua_State *L) {
  infer_box *b = lua_newuserdata(L, sizeof *b); /* the box first (NULL), so __gc is safe on a failed new */
  b->p = NULL;
  luaL_getmetatable(L, INFER_MT);
  lua_setmetatable(L, -2);
  b->p = lt_infer_new(L_CTX(L));
  if (!b->p) return luaL_error(L, "%s", L_CTX(L)->err);
  return 1;
}

static int l_infer_buffer(lua_State *L) {
  lt_infer_plan *p = check_plan(L);
  lua_Integer n = luaL_checkinteger(L, 2);
  int i = lt_infer_buffer(L_CTX(L), p, (int64_t)n);
  if (i < 0) return luaL_error(L, "%s", L_CTX(L)->err);
  lua_pushinteger(L, i);
  return 1;
}

static int l_infer_view(lua_State *L) {
  lt_infer_plan *p = check_plan(L);
  int i = check_index(L, p, 2);
  luaL_checktype(L, 3, LUA_TTABLE);
  int nd = (int)lua_objlen(L, 3);
  if (nd > LT_MAX_DIM) return luaL_error(L, "lt.infer: %d dims, at most %d", nd, LT_MAX_DIM);
  int64_t shape[LT_MAX_DIM], stride[LT_MAX_DIM], n = 1;
  for (int d = 0; d < nd; d++) {
    lua_rawgeti(L, 3, d + 1);
    shape[d] = (int64_t)luaL_checkinteger(L, -1);
    lua_pop(L, 1);
    n *= shape[d];
  }
  int64_t s = 1;
  for (int d = nd - 1; d >= 0; d--) {
    stride[d] = s;
    s *= shape[d];
  }
  lt_tensor *buf = lt_infer_buf(p, i);
  if (n != lt_numel(buf))
    return luaL_error(L, "lt.infer: a view of %d values over a buffer of %d", (int)n, (int)lt_numel(buf));
  return l_push(L, lt_tensor_alias(L_CTX(L), buf, nd, shape, stride, 0));
}

/* in the order of lt_infer_op, lt_infer_act and the LT_INFER_ADD.. enum (lt_infer.h) */
static const char *const op_list[] = { "linear",    "act",   "softmax", "layernorm", "batchnorm", "embedding",
                                       "conv",      "pool",  "binary",  "cell",      "strided",   "matmul",
                                       "groupnorm", "convt", "seq",     NULL };
static const char *const act_list[] = { "relu",   "leaky_relu", "tanh",        "sigmoid",  "gelu",  "gelu_tanh",
                                        "silu",   "elu",        "softplus",    "hardtanh", "prelu", "copy",
                                        "affine", "rdiv",       "exp",         "log",      "abs",   "sqrt",
                                        "mish",   "hardswish",  "hardsigmoid", NULL };
static const char *const binary_list[] = { "add", "sub", "mul", "div", NULL };
static const char *const pool_list[] = { "max", "avg", "avg_exclude_pad", "adaptive_max", "adaptive_avg", NULL };
static const char *const cell_list[] = { "lstm", "gru", "rnn_tanh", "rnn_relu", NULL };

static int field_option(lua_State *L, const char *key, const char *const *list) {
  lua_getfield(L, 2, key);
  const char *s = lua_tostring(L, -1);
  int found = -1;
  for (int i = 0; s && list[i]; i++)
    if (strcmp(s, list[i]) == 0) found = i;
  if (found < 0) return luaL_error(L, "lt.infer: step field %s: unknown value %s", key, s ? s : "(none)");
  lua_pop(L, 1);
  return found;
}

static lua_Number field_number(lua_State *L, const char *key, lua_Number def) {
  lua_getfield(L, 2, key);
  lua_Number v = lua_isnil(L, -1) ? def : luaL_checknumber(L, -1);
  lua_pop(L, 1);
  return v;
}

static int l_infer_add(lua_State *L) {
  lt_infer_plan *p = check_plan(L);
  luaL_checktype(L, 2, LUA_TTABLE);
  lt_infer_step s;
  memset(&s, 0, sizeof s);
  s.op = (lt_infer_op)field_option(L, "op", op_list);
  if (s.op == LT_INFER_ACT) s.act = field_option(L, "act", act_list);
  if (s.op == LT_INFER_POOL) s.act = field_option(L, "act", pool_list);
  if (s.op == LT_INFER_CELL || s.op == LT_INFER_SEQ) s.act = field_option(L, "act", cell_list);
  if (s.op == LT_INFER_BINARY) s.act = field_option(L, "act", binary_list);
  s.in = (int)field_number(L, "in", -1);
  s.out = (int)field_number(L, "out", -1);
  s.rows = (int64_t)field_number(L, "rows", 1);
  s.n_in = (int64_t)field_number(L, "n_in", 0);
  s.n_out = (int64_t)field_number(L, "n_out", 0);
  s.a = (float)field_number(L, "a", 0);
  s.b = (float)field_number(L, "b", 0);
  lua_getfield(L, 2, "t");
  if (lua_istable(L, -1))
    for (int k = 0; k < LT_INFER_NPARAMS; k++) {
      lua_rawgeti(L, -1, k + 1);
      s.t[k] = l_totensor(L, -1); /* false/nil: absent; the table keeps the tensors alive until add retains */
      lua_pop(L, 1);
    }
  lua_pop(L, 1);
  lua_getfield(L, 2, "geo");
  if (lua_istable(L, -1))
    for (int k = 0; k < LT_INFER_GEO_COUNT; k++) {
      lua_rawgeti(L, -1, k + 1);
      s.geo[k] = (int64_t)lua_tonumber(L, -1);
      lua_pop(L, 1);
    }
  lua_pop(L, 1);
  if (lt_infer_add(L_CTX(L), p, &s) != LT_OK) return luaL_error(L, "%s", L_CTX(L)->err);
  return 0;
}

static int run(lua_State *L, const lt_infer_plan *p) {
  if (lt_infer_run(L_CTX(L), p) != LT_OK) return luaL_error(L, "%s", L_CTX(L)->err);
  return 0;
}

/* x into dst, element by element in row-major order (any strides, float32 or int64). */
static void copy_in(const lt_tensor *x, float *dst) {
  if (x->dtype == LT_F32 && lt_is_contiguous(x)) {
    memcpy(dst, lt_f32(x), (size_t)lt_numel(x) * sizeof *dst);
    return;
  }
  int64_t n = lt_numel(x), idx[LT_MAX_DIM] = { 0 }, off = x->offset;
  for (int64_t k = 0; k < n; k++) {
    dst[k] =
        x->dtype == LT_F32 ? ((const float *)x->storage->data)[off] : (float)((const int64_t *)x->storage->data)[off];
    for (int d = x->ndim - 1; d >= 0; d--) {
      off += x->stride[d];
      if (++idx[d] < x->shape[d]) break;
      off -= x->stride[d] * x->shape[d];
      idx[d] = 0;
    }
  }
}

static int l_infer_run_tensor(lua_State *L) {
  lt_infer_plan *p = check_plan(L);
  lt_tensor *x = l_checktensor(L, 2, "plan");
  lt_tensor *buf = lt_infer_buf(p, check_index(L, p, 3));
  if (x->storage != buf->storage) { /* the plan's own input view is already in place */
    if (lt_numel(x) != lt_numel(buf)) {
      char sh[64];
      return luaL_error(L, "plan: input %s has %d values, the plan was compiled for %d", lt_shape_str(x, sh, sizeof sh),
                        (int)lt_numel(x), (int)lt_numel(buf));
    }
    copy_in(x, lt_f32(buf));
  }
  return run(L, p);
}

static int l_infer_run_table(lua_State *L) {
  lt_infer_plan *p = check_plan(L);
  lt_tensor *in = lt_infer_buf(p, check_index(L, p, 4)), *out = lt_infer_buf(p, check_index(L, p, 5));
  luaL_checktype(L, 3, LUA_TTABLE);
  float *x = lt_f32(in);
  int64_t n = lt_numel(in), m = lt_numel(out);
  lt_tensor *xt = l_f64_gate(L, l_totensor(L, 2), "plan:run");
  if (xt) {
    if (lt_numel(xt) != n)
      return luaL_error(L, "plan:run: input tensor has %d values, the plan was compiled for %d", (int)lt_numel(xt),
                        (int)n);
    if (xt->storage != in->storage) copy_in(xt, x);
  } else {
    luaL_checktype(L, 2, LUA_TTABLE);
    if ((int64_t)lua_objlen(L, 2) != n)
      return luaL_error(L, "plan:run: input table has %d numbers, the plan was compiled for %d", (int)lua_objlen(L, 2),
                        (int)n);
    for (int64_t i = 0; i < n; i++) {
      lua_rawgeti(L, 2, (int)i + 1);
      if (lua_type(L, -1) != LUA_TNUMBER)
        return luaL_error(L, "plan:run: input[%d] is a %s, expected a number", (int)i + 1, luaL_typename(L, -1));
      x[i] = (float)lua_tonumber(L, -1);
      lua_pop(L, 1);
    }
  }
  run(L, p);
  const float *y = lt_f32(out);
  for (int64_t i = 0; i < m; i++) {
    lua_pushnumber(L, y[i]);
    lua_rawseti(L, 3, (int)i + 1);
  }
  return 0;
}

/* the element offset of a tensor in its storage (lt.infer's tracer places views inside a plan buffer with it) */
static int l_infer_offset(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)l_checktensor(L, 1, "offset")->offset);
  return 1;
}

static int l_infer_reset_state(lua_State *L) {
  lt_infer_reset_state(check_plan(L));
  return 0;
}

static int l_infer_free(lua_State *L) {
  infer_box *b = luaL_checkudata(L, 1, INFER_MT);
  lt_infer_free(b->p);
  b->p = NULL;
  return 0;
}

void l_infer_register(lua_State *L) {
  static const luaL_Reg methods[] = { { "buffer", l_infer_buffer },
                                      { "view", l_infer_view },
                                      { "add", l_infer_add },
                                      { "run_tensor", l_infer_run_tensor },
                                      { "run_table", l_infer_run_table },
                                      { "reset_state", l_infer_reset_state },
                                      { "free", l_infer_free },
                                      { NULL, NULL } };
  luaL_newmetatable(L, INFER_MT);
  lua_newtable(L);
  l_setfuncs(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, l_infer_free);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  static const luaL_Reg funcs[] = { { "_infer_new", l_infer_new },
                                    { "_infer_offset", l_infer_offset },
                                    { NULL, NULL } };
  l_setfuncs(L, funcs);
}
