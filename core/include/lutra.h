/*
 * lutra.h — the public C header, for programs that embed lutra in their own LuaJIT state.
 *
 *   lua_State *L = luaL_newstate();
 *   luaL_openlibs(L);
 *   lutra_preload(L);                       // package.preload["lutra"], ["lutra.core"], ["lutra.nn"], ...
 *   luaL_dostring(L, "lt = require 'lutra'");
 *   ...                                      // each frame: run:advance{seconds = 0.004}
 *
 * Or, Lua 5.1 style: lua_pushcfunction(L, luaopen_lutra); lua_call(L, 0, 1) leaves the module table.
 *
 * Nothing in lutra calls exit/abort or prints on its own unless asked; errors reach the host as Lua errors.
 * Memory: lutra_set_allocator routes every tensor buffer through the host's allocator; call it before the
 * first tensor is created.
 */
#ifndef LUTRA_H
#define LUTRA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct lua_State;

#define LUTRA_VERSION "0.1.0"

/* Registers lutra's modules (C core and embedded Lua sources) in package.preload. */
void lutra_preload(struct lua_State *L);

/* lua_CFunction: preloads, then returns require("lutra"). */
int luaopen_lutra(struct lua_State *L);

/* Host allocator. alloc must return memory aligned to at least `align` bytes (a power of two, <= 4096),
 * or NULL on failure (lutra then raises a Lua error). free receives the size given to alloc. */
typedef struct lutra_allocator {
  void *(*alloc)(void *ud, size_t size, size_t align);
  void (*free)(void *ud, void *ptr, size_t size);
  void *ud;
} lutra_allocator;

/* Returns 0 on success, -1 when tensors already exist (the allocator can only change while none is alive). */
int lutra_set_allocator(const lutra_allocator *a);

/* Async-signal-safe: asks a running fit/validate/test/predict to stop at the next batch boundary
 * (as Ctrl-C does). The run returns with trainer.interrupted = true. */
void lutra_interrupt(void);

#ifdef __cplusplus
}
#endif

#endif
