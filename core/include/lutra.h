/*
 * lutra.h — the public C header, for programs that embed lutra in their own LuaJIT state.
 *
 *   lutra_set_allocator(&my_allocator);     // optional, before the first tensor
 *   lua_State *L = luaL_newstate();
 *   luaL_openlibs(L);
 *   lutra_preload(L);                       // package.preload["lutra"], ["lutra.core"], ["lutra.nn"], ...
 *   luaL_dostring(L, "lt = require 'lutra'");
 *   ...                                      // run = trainer:fit_run(model, loader)
 *   ...                                      // each frame: run:advance{seconds = 0.004} through lua_pcall
 *   lua_close(L);
 *   lutra_empty_cache();                    // the allocator gets back the buffers lutra kept for reuse
 *
 * Or, Lua 5.1 style: lua_pushcfunction(L, luaopen_lutra); lua_call(L, 0, 1) leaves the module table.
 * A complete host: examples/embed/host.c (a world at 60 frames per second that a model learns online).
 *
 * Nothing in lutra calls exit/abort or prints on its own unless asked (an embedding host's Trainer shows no
 * progress bar and no model summary by default); errors reach the host as Lua errors. advance{seconds = s}
 * starts no batch that the pace of the last ones says would end after s, so a frame budget holds.
 * Memory: lutra_set_allocator routes every tensor buffer through the host's allocator; call it before the
 * first tensor is created. The first time lutra parses JSON (a checkpoint's header) it installs libjansson's
 * allocation functions (json_set_alloc_funcs, process-wide): they are malloc/free underneath, so a host that
 * uses Jansson itself is not affected, and they let lutra report an allocation failure as out of memory.
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

/* Drops a pending lutra_interrupt request that no run has seen (Ctrl-C pressed while no fit ran): a REPL
 * calls it when it returns to the prompt, so the request does not stop the next fit at its first batch. */
void lutra_interrupt_clear(void);

/* Async-signal-safe: nonzero while a fit/validate/test/predict (or a run:advance) is running in some
 * Lua state of this process (a SIGINT handler uses it to decide between lutra_interrupt and its own stop). */
int lutra_run_active(void);

/* Returns every buffer held in lutra's size-class cache to the allocator (lutra_set_allocator's, or the
 * system's). Buffers of live tensors stay; after lua_close of every state using lutra, the host's allocator
 * has got everything back. The Lua form is lt.empty_cache(). */
void lutra_empty_cache(void);

/* Floating-point mode. The host's MXCSR (flush-to-zero, denormals-are-zero) is the host's: loading lutra
 * does not change it. lutra flushes denormals in its own computations only: on its pool's threads, and on
 * the calling thread during backward, an optimizer step (the Trainer's too) and a kernel run on the pool,
 * putting the caller's mode back before it returns. Lua code and the Lua API always run in the caller's
 * mode (the Trainer's hooks included): under DAZ, LuaJIT's tables mistake denormal keys for 0. lt.set_flush_denormal(true) sets FTZ/DAZ on
 * the calling thread for good (for a program that wants it everywhere); lt.set_flush_denormal(false) turns
 * lutra's flushing off too (denormals are then computed, slowly). */

/* Quiet in hosts. Outside the `lutra` binary and a plain lua/luajit running a script, lutra writes nothing
 * to stdout or stderr that it was not asked for: no model summary, no progress bar, no warnings (asked:
 * Trainer{enable_progress_bar = true, enable_model_summary = true}, a callback's verbose = true). The answer,
 * in order: lt.set_interactive(bool) from Lua; else the environment's LUTRA_QUIET (1 quiet, 0 interactive);
 * else this function's last call (the `lutra` binary calls it with 1); else a program that called
 * lutra_preload is quiet; else only a plain interpreter running a script is interactive. */
void lutra_set_interactive(int on);

#ifdef __cplusplus
}
#endif

#endif
