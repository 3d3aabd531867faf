/* l_nn.c — Lua binding for conv2d, pooling, batch/layer norm, embedding, dropout and the fused losses. */
#include "l_util.h"

void l_nn_register(lua_State *L) {
  (void)L; /* functions are registered here as this area is built */
}
