/*
 * l_prof.c — the context's watches of the autograd ops (lt_ctx.watch, core/src/autograd.c), for the trainer:
 *   core._detect_anomaly(on)      an op whose forward output or backward gradient is NaN/inf fails, named
 *   core._op_profile(on)          time per backward kernel on (a fresh table) or off
 *   core._op_profile_rows()       {{op=, count=, total=}, ...} (seconds), in the order the ops were first seen
 */
#include "l_prof.h"

#include "l_util.h"

static void update_watch(lt_ctx *c) { c->watch = c->detect_anomaly || c->op_prof != NULL; }

static int l_detect_anomaly(lua_State *L) {
  lt_ctx *c = L_CTX(L);
  lua_pushboolean(L, c->detect_anomaly);
  if (!lua_isnoneornil(L, 1)) c->detect_anomaly = lua_toboolean(L, 1);
  update_watch(c);
  return 1;
}

static char op_prof_key; /* registry[&op_prof_key]: the userdata holding the table while it is on */

static int l_op_profile(lua_State *L) {
  lt_ctx *c = L_CTX(L);
  c->op_prof = NULL;
  lua_pushlightuserdata(L, &op_prof_key);
  lua_pushnil(L);
  if (lua_toboolean(L, 1)) {
    lua_pop(L, 1);
    lt_op_prof *p = lua_newuserdata(L, sizeof *p);
    lt_op_prof_init(p);
    c->op_prof = p;
  }
  lua_rawset(L, LUA_REGISTRYINDEX);
  update_watch(c);
  return 0;
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

static int l_op_profile_rows(lua_State *L) {
  const lt_op_prof *p = L_CTX(L)->op_prof;
  lua_newtable(L);
  for (int i = 0; p && i < p->nrows; i++) {
    l_push_time_row(L, "op", p->rows[i].op, p->rows[i].count, p->rows[i].total);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

void l_prof_register(lua_State *L) {
  static const luaL_Reg fns[] = { { "_detect_anomaly", l_detect_anomaly },
                                  { "_op_profile", l_op_profile },
                                  { "_op_profile_rows", l_op_profile_rows },
                                  { NULL, NULL } };
  l_setfuncs(L, fns);
}
