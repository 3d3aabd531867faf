/* l_io.c — Lua binding for safetensors checkpoint files and atomic writes. */
#include "l_util.h"

void l_io_register(lua_State *L) {
  (void)L; /* functions are registered here as this area is built */
}
