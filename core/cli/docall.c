/*
 * docall.c — the protected calls of the `lutra` binary, as lua.c's docall/msghandler/report: one function owns
 * "push the handler under the function, pcall, remove it". Apart from main.c so that the script runner (main.c)
 * and the REPL (repl.c) both use it and the REPL does not depend on main.c.
 */
#include <stdio.h>

#include <lua.h>
#include <lauxlib.h>

#include "cli.h"
#include "l_msgh.h"

/* An error raised by ipairs or pairs (LuaJIT's "table expected, got userdata"), the function at level 1, whose
 * first argument is a lutra data object: pushes lutra.data._not_a_table's text for it ("DataLoader is not a
 * table: iterate it with loader:iter() ..."); returns whether it pushed one. The handler runs before the stack
 * unwinds, so the call's argument is still there. Nothing is loaded: no lutra.data, no such object. */
static int cli_not_a_table_hint(lua_State *L)
{
  lua_Debug ar;
  int top = lua_gettop(L), is_iter;
  if (!lua_getstack(L, 1, &ar) || !lua_getinfo(L, "f", &ar)) return 0;
  lua_getglobal(L, "ipairs");
  lua_getglobal(L, "pairs");
  is_iter = lua_rawequal(L, -3, -2) || lua_rawequal(L, -3, -1);
  lua_settop(L, top);
  if (!is_iter || lua_getlocal(L, &ar, 1) == NULL) return 0;
  if (lua_type(L, -1) == LUA_TUSERDATA) {
    lua_getfield(L, LUA_REGISTRYINDEX, "_LOADED");
    lua_getfield(L, -1, "lutra.data");
    if (lua_istable(L, -1)) {
      lua_getfield(L, -1, "_not_a_table");
      lua_pushvalue(L, top + 1);
      if (lua_pcall(L, 1, 1, 0) == 0 && lua_type(L, -1) == LUA_TSTRING) {
        lua_replace(L, top + 1);
        lua_settop(L, top + 1);
        return 1;
      }
    }
  }
  lua_settop(L, top);
  return 0;
}

/* lutra's one message handler (core/bind/l_msgh.c, which leaves out nameless C frames such as the binary's own
 * entry point) with the hint above */
int cli_traceback(lua_State *L)
{
  l_msgh_with(L, cli_not_a_table_hint);
  if (lua_istable(L, -1)) { /* a lutra hook error that reached the top: its message (named, with its traceback) */
    lua_getfield(L, -1, "msg");
    if (lua_isstring(L, -1)) lua_replace(L, -2);
    else lua_pop(L, 1);
  }
  return 1;
}

int cli_docall(lua_State *L, int nargs, int nresults)
{
  int base = lua_gettop(L) - nargs; /* the function's index */
  int status;
  lua_pushcfunction(L, cli_traceback);
  lua_insert(L, base);
  status = lua_pcall(L, nargs, nresults, base);
  lua_remove(L, base);
  if (status != 0) lua_gc(L, LUA_GCCOLLECT, 0); /* an error may leave large garbage behind */
  return status;
}

void cli_report(lua_State *L, const char *prefix)
{
  const char *msg = lua_tostring(L, -1);
  if (msg == NULL) msg = "(error object is not a string)";
  fprintf(stderr, "%s%s\n", prefix, msg);
  fflush(stderr);
  lua_pop(L, 1);
}
