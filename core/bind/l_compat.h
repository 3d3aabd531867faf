/*
 * l_compat.h — one Lua C API for the binding whichever Lua it is compiled against: LuaJIT 2.1 (the default)
 * or PUC Lua 5.1, 5.3, 5.4 (premake5.lua --lua=5.x, which defines LUTRA_LUA_PUC). The binding is written in
 * the 5.1/LuaJIT dialect; this header maps the names that 5.2+ renamed or dropped. Every binding file gets
 * the Lua headers through here (via l_util.h).
 */
#ifndef L_COMPAT_H
#define L_COMPAT_H

#include <lauxlib.h>
#include <lua.h>

/* luaconf.h of 5.3/5.4 defines l_floor as a macro for Lua's own sources; the binding's l_floor is the
 * tensor op (core/bind/l_math_ops.c). */
#undef l_floor

#if LUA_VERSION_NUM >= 502
/* #t without __len */
#define lua_objlen(L, i) lua_rawlen((L), (i))
/* The binding keeps a table beside some userdata (an optimizer's param groups: core/bind/l_optim.c) as its
 * environment; 5.2+ calls it the user value (5.4: the first user value, which lua_newuserdata reserves). */
#define lua_getfenv(L, i) lua_getuservalue((L), (i))
#define lua_setfenv(L, i) lua_setuservalue((L), (i))
#endif

#if defined(LUTRA_LUA_PUC) && LUA_VERSION_NUM == 501
/* LuaJIT and 5.2+ have it; PUC 5.1 does not (core/bind/l_compat.c). */
#define luaL_traceback l_compat_traceback
void l_compat_traceback(lua_State *L, lua_State *L1, const char *msg, int level);
#endif

#if defined(LUTRA_LUA_PUC)
/* Where an error of the binding points. LuaJIT drops the frame of a Lua function that tail-calls a C function
 * (lutra's wrappers end in `return C.op(...)`), so luaL_error's position is the user's line or none; PUC Lua
 * keeps it, and the same error would point into lutra's own Lua files. l_compat_error gives no position when
 * the caller is one of them (a source under .../lutra/), as LuaJIT shows it (core/bind/l_compat.c). */
#define luaL_error l_compat_error
int l_compat_error(lua_State *L, const char *fmt, ...);
#endif
/* core._newproxy() -> a new empty userdata with its own empty metatable: LuaJIT's and 5.1's newproxy(true),
 * which 5.2+ dropped (lua/lutra/data/init.lua makes its objects from it so that # and tostring work). */
int l_compat_newproxy(lua_State *L);

#endif
