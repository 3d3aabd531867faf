/*
 * l_loop_call.c — how the loops' binding calls into Lua (l_loop_call.h): the one error rule for a hook or env
 * function that raises ("<hook>[ (callback #i)| (datamodule)]: <message>", kept for the loops' status) and
 * the calls of the trainer's env functions (lua/lutra/trainer/host.lua). Below the dispatcher
 * (l_loop_dispatch.c), the host table (l_loop_host.c) and the batch outputs (l_loop_output.c), which all call
 * through it; it calls none of them.
 */
#include "l_loop_call.h" /* what each function does: there, once */

/* ---- the error rule ------------------------------------------------------------------------------------ */

void l_hook_where_fmt(lua_State *L, const char *what, int cb) {
  const char *msg = lua_tostring(L, -1) ? lua_tostring(L, -1) : "?";
  if (cb == TARGET_DM) lua_pushfstring(L, "%s (datamodule): %s", what, msg);
  else if (cb >= 0) lua_pushfstring(L, "%s (callback #%d): %s", what, cb + 1, msg);
  else lua_pushfstring(L, "%s: %s", what, msg);
  lua_remove(L, -2);
}

int l_hook_error_msg(lua_State *L, const char *what, int cb) {
  if (lua_touserdata(L, -1) == &l_err_sentinel) return 0;
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "msg");
    lua_remove(L, -2);
  } else if (what) {
    l_hook_where_fmt(L, what, cb);
  }
  return 1;
}

int l_hook_failed(l_loops *H, lua_State *L, const char *what, int cb) {
  if (!l_hook_error_msg(L, what, cb)) { /* already reported by an inner call */
    lua_pop(L, 1);
    return LT_ERR;
  }
  const char *msg = lua_tostring(L, -1);
  lt_fail(H->lp.c, "%.1000s", msg ? msg : "error");
  luaL_unref(L, LUA_REGISTRYINDEX, H->ref_err);
  H->ref_err = luaL_ref(L, LUA_REGISTRYINDEX);
  return LT_ERR;
}

/* ---- env functions, through the protected call (l_push_handler, l_docall: l_loop_call.h) ------------- */

int l_call_env_as(l_loops *H, lua_State *L, const char *name, int nargs, int nres, int hook, const char *what) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_env);
  lua_getfield(L, -1, name);
  lua_remove(L, -2);
  lua_insert(L, -nargs - 1); /* function, args... */
  int h = l_push_handler(H, L) - nargs - 1;
  lua_insert(L, h); /* handler, function, args... */
  if (l_docall(H, L, h, nres, hook, what, -1) != LT_OK) return LT_ERR;
  lua_remove(L, h);
  return LT_OK;
}

int l_call_env(l_loops *H, lua_State *L, const char *name, int nargs, int nres) {
  return l_call_env_as(H, L, name, nargs, nres, -1, NULL);
}
