/*
 * fuzz_lua.h — for fuzz targets that reach a reader through Lua (lt.load_bytes, read_csv, the checkpoint
 * metadata): one LuaJIT state with lutra for the whole run; each input is passed as a string to the
 * function that the target's Lua chunk returns, under pcall (a Lua error is a fine outcome; a crash, a
 * sanitizer report or a leak is a finding). After each input a full collection frees what it made, so
 * LeakSanitizer sees only real leaks; for the same reason a target's chunk keeps no tensor between inputs
 * (LuaJIT's heap is mmap'ed memory that LeakSanitizer does not scan: a tensor referenced only from there
 * looks leaked).
 */
#ifndef FUZZ_LUA_H
#define FUZZ_LUA_H

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>

#include "lutra.h"

static lua_State *fuzz_L;
static int fuzz_ref;

static void fuzz_lua_init(const char *chunk) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  lutra_preload(L);
  if (luaL_loadstring(L, chunk) || lua_pcall(L, 0, 1, 0) || !lua_isfunction(L, -1)) {
    fprintf(stderr, "fuzz target set-up failed: %s\n", lua_tostring(L, -1));
    abort();
  }
  fuzz_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  fuzz_L = L;
}

/* Returns 0 when the call succeeded, 1 when it raised (the message must be a string). */
static int fuzz_lua_call(const uint8_t *data, size_t size) {
  lua_State *L = fuzz_L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, fuzz_ref);
  lua_pushlstring(L, (const char *)data, size);
  int rc = lua_pcall(L, 1, 0, 0);
  if (rc) {
    if (lua_type(L, -1) != LUA_TSTRING) abort(); /* an error that is not a message */
    lua_pop(L, 1);
  }
  lua_gc(L, LUA_GCCOLLECT, 0);
  lua_gc(L, LUA_GCCOLLECT, 0);
  lutra_empty_cache();
  return rc != 0;
}

#endif
