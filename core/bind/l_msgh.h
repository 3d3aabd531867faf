/*
 * l_msgh.h — lutra's one message handler for lua_pcall, as lua.c's msghandler: used by every protected call of
 * the binding (the hooks, core/bind/l_loop_dispatch.c) and of the `lutra` binary (core/cli/docall.c).
 */
#ifndef L_MSGH_H
#define L_MSGH_H

#include <lua.h>

/* raised (as a light userdata) by the loops' optimizer closure: the message is kept already */
extern char l_err_sentinel;

/* The error object as a message with a traceback ("message\nstack traceback:..."): a non-string object
 * through its __tostring, else "(error object is a <type> value)"; a message that carries a traceback
 * already (a hook's error re-raised by an outer call) gets no second one. An error that is a lutra hook
 * error (a table {lutra_hook_error = true, msg = ...}, or the loops' sentinel) passes as it is: its message
 * is formatted and kept already. */
int l_msgh(lua_State *L);
/* The same, with hint: called with the message at index 1, it may push a text to append as
 * "message: text" (returns 1) or push nothing (returns 0). */
int l_msgh_with(lua_State *L, int (*hint)(lua_State *L));

#endif
