/* l_compat.c — the parts of the Lua C API that PUC Lua 5.1 lacks, and where errors point under PUC Lua (see l_compat.h). */
#include "l_compat.h"

#if defined(LUTRA_LUA_PUC) && LUA_VERSION_NUM == 501
#include <string.h>

/* luaL_traceback as in 5.2: msg (if any), then "stack traceback:" and one line per frame of L1 from level,
 * the middle of a deep stack elided. Pushes the string on L. */
void l_compat_traceback(lua_State *L, lua_State *L1, const char *msg, int level) {
  enum { FIRST = 12, LAST = 10 };
  lua_Debug ar;
  int top = lua_gettop(L);
  int depth = level;
  while (lua_getstack(L1, depth, &ar)) depth++;
  if (msg) lua_pushfstring(L, "%s\n", msg);
  lua_pushliteral(L, "stack traceback:");
  for (int lv = level; lua_getstack(L1, lv, &ar); lv++) {
    if (lv - level == FIRST && depth - lv > LAST + 1) {
      lua_pushliteral(L, "\n\t...");
      lv = depth - LAST - 1;
      continue;
    }
    lua_getinfo(L1, "Snl", &ar);
    lua_pushfstring(L, "\n\t%s:", ar.short_src);
    if (ar.currentline > 0) lua_pushfstring(L, "%d:", ar.currentline);
    if (*ar.namewhat) lua_pushfstring(L, " in function '%s'", ar.name);
    else if (*ar.what == 'm') lua_pushliteral(L, " in main chunk");
    else if (*ar.what == 'C') lua_pushliteral(L, " in ?");
    else lua_pushfstring(L, " in function <%s:%d>", ar.short_src, ar.linedefined);
    lua_concat(L, lua_gettop(L) - top);
  }
  lua_concat(L, lua_gettop(L) - top);
}
#endif

int l_compat_newproxy(lua_State *L) {
  lua_newuserdata(L, 0);
  lua_newtable(L);
  lua_setmetatable(L, -2);
  return 1;
}

#if defined(LUTRA_LUA_PUC)
#include <stdarg.h>
#include <string.h>

#undef luaL_error
int l_compat_error(lua_State *L, const char *fmt, ...) {
  lua_Debug ar;
  int internal = 0;
  if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "S", &ar) && ar.source[0] == '@') {
    internal = strstr(ar.source, "/lutra/") != NULL;
  }
  va_list ap;
  va_start(ap, fmt);
  if (!internal) luaL_where(L, 1);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  if (!internal) lua_concat(L, 2);
  return lua_error(L);
}
#endif
