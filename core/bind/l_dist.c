/*
 * l_dist.c — Lua binding of the MPI communication layer (core/src/lt_dist.h), registered as
 * `lutra.core._dist`; the user-facing API is lua/lutra/distributed.lua (lt.distributed).
 *   available() -> bool                      lutra/mpi.so loads (the first call loads it)
 *   set_module_path(path)                    where to look for it first (package.searchpath's answer)
 *   load_error() -> string                   why it did not load
 *   launched() -> bool, rank, world_size     started by mpirun (environment only; MPI untouched)
 *   init(), finalize(), is_initialized(), rank(), world_size(), barrier(), abort(code)
 *   broadcast(tensor, src) -> tensor         in place
 *   broadcast_string(s|nil, src) -> string   src's string on every rank
 *   all_reduce_numbers({v...}, op) -> {v...} op "sum" | "mean" | "max" | "min"
 *   all_reduce(list, op, bucket_bytes)       in place: float32, float64 in buckets (one dtype each), int64 one by one
 *   reducer(params, bucket_bytes, op, grads) -> reducer with :ready(i), :finish(), :stats(), :nbuckets(),
 *                                               :attach() (every backward reduces), :detach(), :free()
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "l_util.h"
#include "lt_dist.h"

#define REDUCER_MT "lutra.DistReducer"

typedef struct l_reducer {
  lt_dist_reducer *r;
} l_reducer;

static lt_dist_op check_op(lua_State *L, int idx, const char *fname) {
  const char *s = l_optstring(L, idx, "sum");
  if (!strcmp(s, "sum")) return LT_DIST_SUM;
  if (!strcmp(s, "mean")) return LT_DIST_MEAN;
  if (!strcmp(s, "max")) return LT_DIST_MAX;
  if (!strcmp(s, "min")) return LT_DIST_MIN;
  return (lt_dist_op)l_errorf(L, "%s: unknown op '%s' (expected sum, mean, max or min)", fname, s);
}

static int check_src(lua_State *L, int idx) {
  if (lua_isnoneornil(L, idx)) return 0;
  return (int)l_checkint(L, idx, "broadcast", "src (a rank)", 0, INT_MAX);
}

/* A byte count from a size in MiB (so possibly fractional: truncated), at least one float, finite. */
static size_t check_bytes(lua_State *L, int idx) {
  lua_Number v = l_optnumber(L, idx, 25.0 * (1 << 20));
  if (!(v >= 4 && v <= (lua_Number)L_INT_MAX)) /* NaN fails both; the cast of inf or 1e300 is undefined */
    return (size_t)l_errorf(L, "bucket size must be 4 to 2^53 bytes, got %g", (double)v);
  return (size_t)v;
}

/* The tensors of a list at idx, in a malloc'd array (borrowed references). */
static lt_tensor **check_list(lua_State *L, int idx, const char *fname, int *n) {
  l_checktype(L, idx, LUA_TTABLE);
  int m = (int)lua_objlen(L, idx);
  for (int i = 1; i <= m; i++) { /* check everything before allocating: errors longjmp */
    lua_rawgeti(L, idx, i);
    if (!l_f64_gate(L, l_totensor(L, -1), fname))
      l_errorf(L, "%s: element %d of the list is a %s, expected a tensor", fname, i, luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  lt_tensor **ts = malloc(sizeof *ts * (size_t)(m > 0 ? m : 1));
  if (!ts) luaL_error(L, "%s: out of memory", fname);
  for (int i = 1; i <= m; i++) {
    lua_rawgeti(L, idx, i);
    ts[i - 1] = l_totensor(L, -1);
    lua_pop(L, 1);
  }
  *n = m;
  return ts;
}

static int l_available(lua_State *L) {
  lua_pushboolean(L, lt_dist_available());
  return 1;
}
static int l_set_module_path(lua_State *L) {
  lt_dist_set_module_path(luaL_optstring(L, 1, NULL));
  return 0;
}
static int l_load_error(lua_State *L) {
  lua_pushstring(L, lt_dist_load_error());
  return 1;
}

static int l_launched(lua_State *L) {
  int r, w;
  lua_pushboolean(L, lt_dist_launched(&r, &w));
  lua_pushinteger(L, r);
  lua_pushinteger(L, w);
  return 3;
}

static int l_init(lua_State *L) {
  l_check(L, lt_dist_init(L_CTX(L)));
  return 0;
}
static int l_finalize(lua_State *L) {
  l_check(L, lt_dist_finalize(L_CTX(L)));
  return 0;
}
static int l_is_initialized(lua_State *L) {
  lua_pushboolean(L, lt_dist_is_initialized());
  return 1;
}
static int l_rank(lua_State *L) {
  lua_pushinteger(L, lt_dist_rank());
  return 1;
}
static int l_world_size(lua_State *L) {
  lua_pushinteger(L, lt_dist_world_size());
  return 1;
}
static int l_barrier(lua_State *L) {
  l_check(L, lt_dist_barrier(L_CTX(L)));
  return 0;
}
static int l_abort(lua_State *L) {
  lt_dist_abort(lua_isnoneornil(L, 1) ? 1 : (int)l_checkint(L, 1, "abort", "the exit code", 0, 255));
  return 0;
}

static int l_broadcast(lua_State *L) {
  lt_tensor *t = l_checktensor(L, 1, "broadcast");
  int src = check_src(L, 2);
  l_check(L, lt_dist_broadcast(L_CTX(L), t, src));
  lua_settop(L, 1);
  return 1;
}

static int l_broadcast_string(lua_State *L) {
  lt_ctx *c = L_CTX(L);
  int src = check_src(L, 2);
  size_t len = 0;
  const char *s = lua_isnil(L, 1) ? NULL : l_checklstring(L, 1, &len);
  double n = (double)len;
  if (!lt_dist_is_initialized()) return l_errorf(L, LT_E_DIST_NOT_INIT, "broadcast");
  int me = lt_dist_rank();
  if (me == src && !s) return l_errorf(L, "broadcast: the source rank %d has no string to send", src);
  l_check(L, lt_dist_broadcast_bytes(c, &n, sizeof n, src));
  len = (size_t)n;
  char *buf = malloc(len + 1);
  if (!buf) return luaL_error(L, "broadcast: out of memory");
  if (me == src) memcpy(buf, s, len);
  int rc = lt_dist_broadcast_bytes(c, buf, len, src);
  if (rc == LT_OK) lua_pushlstring(L, buf, len);
  free(buf);
  l_check(L, rc);
  return 1;
}

static int l_all_reduce_numbers(lua_State *L) {
  l_checktype(L, 1, LUA_TTABLE);
  lt_dist_op op = check_op(L, 2, "all_reduce");
  int n = (int)lua_objlen(L, 1);
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    if (lua_type(L, -1) != LUA_TNUMBER)
      l_errorf(L, "all_reduce: element %d is a %s, expected a number", i, luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  double small[16], *v = n <= 16 ? small : malloc(sizeof *v * (size_t)n);
  if (!v) return luaL_error(L, "all_reduce: out of memory");
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    v[i - 1] = lua_tonumber(L, -1);
    lua_pop(L, 1);
  }
  int rc = lt_dist_allreduce_scalars(L_CTX(L), v, n, op);
  if (rc == LT_OK) {
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
      lua_pushnumber(L, v[i]);
      lua_rawseti(L, -2, i + 1);
    }
  }
  if (v != small) free(v);
  l_check(L, rc);
  return 1;
}

static int l_all_reduce(lua_State *L) {
  lt_dist_op op = check_op(L, 2, "all_reduce");
  size_t bytes = check_bytes(L, 3);
  int n;
  lt_tensor **ts = check_list(L, 1, "all_reduce", &n);
  int rc = lt_dist_allreduce(L_CTX(L), n, ts, op, bytes);
  free(ts);
  l_check(L, rc);
  lua_settop(L, 1);
  return 1;
}

/* ---- reducer objects ------------------------------------------------------------------------------- */

static l_reducer *check_reducer(lua_State *L) {
  l_reducer *b = l_checkudata(L, 1, REDUCER_MT);
  if (!b->r) luaL_error(L, "gradient reducer: already freed");
  return b;
}

static int l_reducer_new(lua_State *L) {
  size_t bytes = check_bytes(L, 2);
  lt_dist_op op = check_op(L, 3, "reducer");
  int grads = lua_isnone(L, 4) ? 1 : lua_toboolean(L, 4);
  l_reducer *b = lua_newuserdata(L, sizeof *b);
  b->r = NULL;
  luaL_getmetatable(L, REDUCER_MT);
  lua_setmetatable(L, -2);
  int n;
  lt_tensor **ts = check_list(L, 1, "reducer", &n);
  b->r = lt_dist_reducer_new(L_CTX(L), n, ts, bytes, op, grads);
  free(ts);
  if (!b->r) return l_error(L);
  return 1;
}

static int l_reducer_ready(lua_State *L) {
  l_reducer *b = check_reducer(L);
  int i = (int)l_checkint(L, 2, "reducer:ready", "the bucket", 1, INT_MAX);
  l_check(L, lt_dist_bucket_ready(L_CTX(L), b->r, i - 1));
  return 0;
}

static int l_reducer_finish(lua_State *L) {
  l_reducer *b = check_reducer(L);
  l_check(L, lt_dist_reducer_finish(L_CTX(L), b->r));
  return 0;
}

static int l_reducer_attach(lua_State *L) {
  l_reducer *b = check_reducer(L);
  l_check(L, lt_dist_reducer_attach(L_CTX(L), b->r));
  return 0;
}

static int l_reducer_detach(lua_State *L) {
  l_reducer *b = check_reducer(L);
  lt_dist_reducer_detach(b->r);
  return 0;
}

static int l_reducer_nbuckets(lua_State *L) {
  l_reducer *b = check_reducer(L);
  lua_pushinteger(L, lt_dist_reducer_nbuckets(b->r));
  return 1;
}

static int l_reducer_stats(lua_State *L) {
  l_reducer *b = check_reducer(L);
  lt_dist_stats s;
  lt_dist_reducer_stats(b->r, &s);
  lua_createtable(L, 0, 6);
  lua_pushinteger(L, (lua_Integer)s.steps);
  lua_setfield(L, -2, "steps");
  lua_pushinteger(L, (lua_Integer)s.buckets);
  lua_setfield(L, -2, "buckets");
  lua_pushinteger(L, (lua_Integer)s.bytes);
  lua_setfield(L, -2, "bytes");
  lua_pushinteger(L, (lua_Integer)s.bytes_copied);
  lua_setfield(L, -2, "bytes_copied");
  lua_pushnumber(L, s.wait_seconds);
  lua_setfield(L, -2, "wait_seconds");
  lua_pushnumber(L, s.pack_seconds);
  lua_setfield(L, -2, "pack_seconds");
  lua_pushnumber(L, s.total_seconds);
  lua_setfield(L, -2, "total_seconds");
  return 1;
}

static int l_reducer_free(lua_State *L) {
  l_reducer *b = l_checkudata(L, 1, REDUCER_MT);
  lt_dist_reducer_free(b->r);
  b->r = NULL;
  return 0;
}

void l_dist_register(lua_State *L) {
  static const luaL_Reg methods[] = { { "ready", l_reducer_ready },   { "finish", l_reducer_finish },
                                      { "stats", l_reducer_stats },   { "nbuckets", l_reducer_nbuckets },
                                      { "free", l_reducer_free },     { "attach", l_reducer_attach },
                                      { "detach", l_reducer_detach }, { NULL, NULL } };
  luaL_newmetatable(L, REDUCER_MT);
  lua_newtable(L);
  l_setmethods(L, methods);
  lua_setfield(L, -2, "__index");
  l_push_upvalues(L);
  lua_pushcclosure(L, l_reducer_free, 2);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  static const luaL_Reg funcs[] = { { "available", l_available },
                                    { "set_module_path", l_set_module_path },
                                    { "load_error", l_load_error },
                                    { "launched", l_launched },
                                    { "init", l_init },
                                    { "finalize", l_finalize },
                                    { "is_initialized", l_is_initialized },
                                    { "rank", l_rank },
                                    { "world_size", l_world_size },
                                    { "barrier", l_barrier },
                                    { "abort", l_abort },
                                    { "broadcast", l_broadcast },
                                    { "broadcast_string", l_broadcast_string },
                                    { "all_reduce_numbers", l_all_reduce_numbers },
                                    { "all_reduce", l_all_reduce },
                                    { "reducer", l_reducer_new },
                                    { NULL, NULL } };
  lua_newtable(L);
  l_setfuncs(L, funcs);
  lua_setfield(L, -2, "_dist");
}
