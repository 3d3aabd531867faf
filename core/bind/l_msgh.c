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

/* A traceback line of a C function that has no name ("[C]: at 0x55..." in LuaJIT, "[C]: in ?" in PUC Lua):
 * the binary's entry point, the loops' protected run (l_loop.c). It names no function and no line a user
 * could act on, so lutra's tracebacks leave it out. */
static int is_nameless_c_frame(const char *line, size_t len) {
  static const char *const forms[] = { "\t[C]: at 0x", "\t[C]: in ?" };
  for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) {
    size_t n = strlen(forms[i]);
    if (len >= n && memcmp(line, forms[i], n) == 0) return 1;
  }
  return 0;
}

/* replaces the string at index 1 by itself less its nameless C frames */
static void drop_nameless_c_frames(lua_State *L) {
  size_t len;
  const char *s = lua_tolstring(L, 1, &len), *end = s + len;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  while (s < end) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    const char *next = nl ? nl + 1 : end;
    if (!is_nameless_c_frame(s, (size_t)(next - s))) luaL_addlstring(&b, s, (size_t)(next - s));
    s = next;
  }
  luaL_pushresult(&b);
  /* a last frame dropped leaves the line before it with its newline */
  len = lua_objlen(L, -1);
  if (len > 0 && lua_tostring(L, -1)[len - 1] == '\n') {
    lua_pushlstring(L, lua_tostring(L, -1), len - 1);
    lua_remove(L, -2);
  }
  lua_replace(L, 1);
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
  if (strstr(msg, "\nstack traceback:\n") == NULL) {
    luaL_traceback(L, L, msg, 1);
    lua_replace(L, 1);
    drop_nameless_c_frames(L);
  }
  return 1;
}

int l_msgh(lua_State *L) { return l_msgh_with(L, NULL); }
