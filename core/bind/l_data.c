/* l_data.c — Lua binding for IDX file reading and dataset batching. */
#include "l_util.h"

void l_data_register(lua_State *L) {
  (void)L; /* functions are registered here as this area is built */
}
