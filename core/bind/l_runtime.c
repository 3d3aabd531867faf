/*
 * l_runtime.c — lt.* functions about the process rather than a tensor: compute threads (lutra's pool and
 * OpenBLAS together), flushing denormals, which BLAS was loaded and why, and the allocator's counters and cache.
 */
#include "l_util.h"
#include "lt_alloc.h"
#include "lt_blas.h"
#include "lt_fpmode.h"
#include "lt_pool.h"

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
  lua_createtable(L, 0, 8);
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
  lua_pushstring(L, I->threads_reason ? I->threads_reason : "online");
  lua_setfield(L, -2, "threads_reason");
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

static const luaL_Reg functions[] = { { "set_num_threads", l_set_num_threads },
                                      { "get_num_threads", l_get_num_threads },
                                      { "set_flush_denormal", l_set_flush_denormal },
                                      { "blas_info", l_blas_info },
                                      { "memory_stats", l_memory_stats },
                                      { "empty_cache", l_empty_cache },
                                      { NULL, NULL } };

/* Expects the module table on top. */
void l_runtime_register(lua_State *L) { l_setops(L, functions); }
