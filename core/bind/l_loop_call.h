/*
 * l_loop_call.h — how the loops' binding calls into Lua (core/bind/l_loop_call.c): the protected call through
 * the one message handler (l_msgh.h) and the one error rule, and the trainer's env functions.
 */
#ifndef L_LOOP_CALL_H
#define L_LOOP_CALL_H

#include "l_loops.h"

/* After a failed pcall (error value on top): keeps the formatted message (l_hook_error_msg), sets the loops'
 * error. */
int l_hook_failed(l_loops *H, lua_State *L, const char *what, int cb);

/* The one protected call of the binding (as `docall` in Lua's lua.c), in two steps so the per-batch calls
 * move no stack slots: l_push_handler pushes the message handler (returns its index), the caller pushes the
 * function and its nargs arguments above it, l_docall makes `hook` the running hook (for self:log's checks;
 * -1 keeps the current one), calls and restores the hook. On success the handler stays under the nres
 * results (the caller's lua_settop(L, handler - 1) removes both); on failure l_docall keeps the message,
 * prefixed "<what>[ (callback #cb+1)]: " (l_hook_failed), leaves nothing of the call (not the handler
 * either) and returns LT_ERR. Inline: they are on every batch's path. l_docall_fn: the same with the
 * function at index fn, above the handler with other values between them (the dispatcher's targets share
 * one handler, a kept result under their calls); on failure it leaves nothing from the handler up. */
static inline int l_push_handler(l_loops *H, lua_State *L) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_msgh);
  return lua_gettop(L);
}

static inline int l_docall_fn(l_loops *H, lua_State *L, int handler, int fn, int nres, int hook, const char *what,
                              int cb) {
  int prev = H->cur_hook;
  if (hook >= 0) H->cur_hook = hook;
  int rc = lua_pcall(L, lua_gettop(L) - fn, nres, handler);
  H->cur_hook = prev;
  if (rc) {
    rc = l_hook_failed(H, L, what, cb);
    lua_settop(L, handler - 1);
    return rc;
  }
  return LT_OK;
}

static inline int l_docall(l_loops *H, lua_State *L, int handler, int nres, int hook, const char *what, int cb) {
  return l_docall_fn(H, L, handler, handler + 1, nres, hook, what, cb);
}

/* Replaces the message on top with "<what> (callback #cb+1): <msg>" (cb -1: "<what>: <msg>"; TARGET_DM:
 * "<what> (datamodule): <msg>"): the one place the target of a failed hook is named. */
void l_hook_where_fmt(lua_State *L, const char *what, int cb);
/* The one error rule: replaces the error value on top (as the message handler left it) with the failed hook's
 * message and returns 1: a hook error of an inner call ({lutra_hook_error = true, msg = ...}) is named
 * already and gives its msg; any other value is named by l_hook_where_fmt (what NULL: left as it is). The
 * loops' sentinel (an inner failure whose message the loops kept already) stays on top: returns 0. */
int l_hook_error_msg(lua_State *L, const char *what, int cb);
/* env[name](...) with the nargs arguments on top, through l_docall as hook (-1: the current one), failures
 * named what; leaves nres results (no handler). l_call_env: the same, unnamed, as the current hook. */
int l_call_env_as(l_loops *H, lua_State *L, const char *name, int nargs, int nres, int hook, const char *what);
int l_call_env(l_loops *H, lua_State *L, const char *name, int nargs, int nres);

#endif
