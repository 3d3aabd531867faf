/*
 * l_msgh.c — lutra's one message handler (l_msgh.h), after lua.c's msghandler.
 */
#include <string.h>

#include "l_compat.h" /* the Lua headers, and luaL_traceback on PUC 5.1 */
#include "l_msgh.h"

char l_err_sentinel; /* the loops' "already kept" error (l_loop_call.c) */

static int is_hook_error(lua_State *L) {
  if (lua_touserdata(L, 1) == &l_err_sentinel) return 1;
  if (!lua_istable(L, 1)) return 0;
  lua_getfield(L, 1, "lutra_hook_error");
  int is = !lua_isnil(L, -1);
  lua_pop(L, 1);
  return is;
}

int l_msgh_with(lua_State *L, int (*hint)(lua_State *L)) {
  if (is_hook_error(L)) return 1;
  lua_settop(L, 1);
  if (!lua_isstring(L, 1)) { /* a non-string error object: its __tostring, else its type */
    if (!luaL_callmeta(L, 1, "__tostring") || !lua_isstring(L, -1))
      lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    lua_replace(L, 1);
    lua_settop(L, 1);
  }
  if (hint && hint(L)) { /* "message: hint" */
    lua_pushvalue(L, 1);
    lua_pushliteral(L, ": ");
    lua_pushvalue(L, -3);
    lua_concat(L, 3);
    lua_replace(L, 1);
    lua_settop(L, 1);
  }
  const char *msg = lua_tostring(L, 1);
  if (strstr(msg, "\nstack traceback:\n") == NULL) luaL_traceback(L, L, msg, 1);
  return 1;
}

int l_msgh(lua_State *L) { return l_msgh_with(L, NULL); }
