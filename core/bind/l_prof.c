/*
 * l_prof.c — the context's watches of the autograd ops (lt_ctx.watch, core/src/autograd.c), for the trainer:
 *   core._detect_anomaly(on)      an op whose forward output or backward gradient is NaN/inf fails, named
 * (the time per op and backward kernel is the loops' profiler's: lp:profiler_ops in l_loop.c)
 */
#include "l_prof.h"

#include "l_util.h"

void l_prof_update_watch(lt_ctx *c) { c->watch = c->detect_anomaly || c->prof != NULL; }

static int l_detect_anomaly(lua_State *L) {
  lt_ctx *c = L_CTX(L);
  lua_pushboolean(L, c->detect_anomaly);
  if (!lua_isnoneornil(L, 1)) c->detect_anomaly = lua_toboolean(L, 1);
  l_prof_update_watch(c);
  return 1;
}

void l_push_time_row(lua_State *L, const char *key, const char *name, int64_t count, double total) {
  lua_createtable(L, 0, 3);
  lua_pushstring(L, name);
  lua_setfield(L, -2, key);
  lua_pushnumber(L, (lua_Number)count);
  lua_setfield(L, -2, "count");
  lua_pushnumber(L, total);
  lua_setfield(L, -2, "total");
}

void l_prof_register(lua_State *L) {
  static const luaL_Reg fns[] = { { "_detect_anomaly", l_detect_anomaly }, { NULL, NULL } };
  l_setfuncs(L, fns);
}
