/* module_so.c — the entry point of lutra/core.so for plain `luajit` (require "lutra.core"). */
#include <lua.h>

int luaopen_lutra_core(lua_State *L);

__attribute__((visibility("default"))) int luaopen_lutra_core_so(lua_State *L);
int luaopen_lutra_core_so(lua_State *L) { return luaopen_lutra_core(L); }
