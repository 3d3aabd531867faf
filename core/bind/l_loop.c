/* l_loop.c — Lua binding for the training/evaluation/prediction loops and the hook dispatch for Lua tables. */
#include "l_util.h"

void l_loop_register(lua_State *L) {
  (void)L; /* functions are registered here as this area is built */
}
