/* l_optim.c — Lua binding for optimizer objects with fused C update steps. */
#include "l_util.h"

void l_optim_register(lua_State *L) {
  (void)L; /* functions are registered here as this area is built */
}
