/*
 * l_carry.h — Lua values carried between Lua states (lt.thread, docs/reference/thread.md): a value is encoded
 * in the sending state into a message (a C buffer of tagged entries that points into no Lua state) and
 * decoded in the receiving one. What crosses: nil, booleans, numbers (integers kept as integers on 5.3+),
 * strings, tensors (the same storage, a new detached header), tables (nested, shared and cyclic ones kept as
 * they are, metatables carried by the same rules), Lua functions (bytecode and carried upvalues), and the
 * standard library's and lutra's functions and tables by name. Anything else is an error naming the path.
 */
#ifndef L_CARRY_H
#define L_CARRY_H

#include "l_util.h"

typedef struct l_msg {
  char *buf; /* the tagged entries (l_carry.c) */
  size_t len;
  lt_tensor **tensors; /* detached headers, one reference each, released with the message */
  int ntensors;
  int nvalues;
  struct l_msg *next; /* for the queues of l_thread.c */
} l_msg;

/* Encodes the n values at stack indices first..first+n-1 into a new message. Must run in a closure of the
 * binding (it recognises tensors by lutra's metatable). On a value that cannot cross, raises
 * "fname: cannot carry argument #2, key 'x': a coroutine cannot cross to another state" (what[i] names the
 * i-th value: NULL for "argument #i", or e.g. "the result #%d"). */
l_msg *l_carry_encode(lua_State *L, int first, int n, const char *fname, const char *what);
/* Pushes the message's values (nvalues of them) in the receiving state; in a closure of the binding. The
 * message stays the caller's (decode takes its own references to the tensors). Raises when a name carried
 * (a module function) does not exist in this state or bytecode does not load. */
int l_carry_decode(lua_State *L, const l_msg *m, const char *fname);
void l_msg_free(l_msg *m);

void l_carry_register(lua_State *L);

#endif
