/*
 * l_tensor_shape.c — a tensor's shape and its views: queries (shape, size, stride, dim, numel, dtype, item,
 * totable), views (view, reshape, t, transpose, permute, narrow, select, unsqueeze, squeeze, expand, flatten),
 * copies and conversions (contiguous, clone, detach, float, long, type), and joins and gathers (cat, stack,
 * gather, index_select). Dims and indices are 1-based here and 0-based in the core.
 */
#include "l_tensor.h"

/* ---- queries ---------------------------------------------------------------------------------- */

/* pushes the n sizes (a shape or strides) as a Lua array */
static int push_dims(lua_State *L, const int64_t *v, int n) {
  lua_createtable(L, n, 0);
  for (int d = 0; d < n; d++) {
    lua_pushinteger(L, (lua_Integer)v[d]);
    lua_rawseti(L, -2, d + 1);
  }
  return 1;
}

static int l_shape(lua_State *L) {
  lt_tensor *t = T(1, "shape");
  return push_dims(L, t->shape, t->ndim);
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
  return push_dims(L, t->stride, t->ndim);
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
    else if (t->dtype == LT_F64) lua_pushnumber(L, ((double *)t->storage->data)[off]);
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

/* storage identity, for tests of view sharing */
static int l_data_ptr(lua_State *L) {
  lt_tensor *t = T(1, "data_ptr");
  lua_pushlightuserdata(L, (char *)t->storage->data + t->offset * (int64_t)lt_dtype_size(t->dtype));
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
static int l_double(lua_State *L) { return to_dtype(L, T(1, "double"), "double", LT_F64); }
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

/* ---- joins and gathers ------------------------------------------------------------------------- */

static int gather_list(lua_State *L, const char *name, lt_tensor ***out) {
  l_checktype(L, 1, LUA_TTABLE);
  int n = (int)lua_objlen(L, 1);
  if (n == 0) return l_errorf(L, "%s: expected a non-empty list of tensors", name);
  lt_tensor **ts = lua_newuserdata(L, sizeof *ts * (size_t)n); /* freed by the GC, even on error */
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, 1, i + 1);
    ts[i] = l_f64_gate(L, l_totensor(L, -1), name);
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

static const luaL_Reg accessors[] = { { "shape", l_shape },       { "size", l_size },
                                      { "stride", l_stride },     { "dim", l_dim },
                                      { "nDimension", l_dim },    { "numel", l_numel },
                                      { "nElement", l_numel },    { "dtype", l_dtype },
                                      { "item", l_item },         { "totable", l_totable },
                                      { "tolist", l_totable },    { "is_contiguous", l_is_contiguous },
                                      { "data_ptr", l_data_ptr }, { NULL, NULL } };
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
                                    { "double", l_double },
                                    { "long", l_long },
                                    { "int64", l_int64 },
                                    { "type", l_type },
                                    { "gather", l_gather },
                                    { "index_select", l_index_select },
                                    { NULL, NULL } };
static const luaL_Reg functions[] = { { "cat", l_cat }, { "stack", l_stack }, { NULL, NULL } };

/* Queries, views, conversions, joins: expects the module table on top, after l_tensor_register. */
void l_tensor_shape_register(lua_State *L) { l_tensor_add(L, accessors, methods, functions); }
