/*
 * l_image.c — core._write_png(path, img): the PNG writer of core/src/image_png.c for lua/lutra/utils/init.lua
 * (lt.utils.save_image builds the grid and checks the options; img is float32 or float64 [C x H x W], C = 1, 3 or 4).
 */
#include "l_util.h"
#include "lt_image.h"

static int l_write_png(lua_State *L) {
  const char *path = l_checkstring(L, 1);
  l_check(L, lt_png_write(L_CTX(L), path, l_checktensor(L, 2, "save_image")));
  return 0;
}

void l_image_register(lua_State *L) {
  static const luaL_Reg fns[] = { { "_write_png", l_write_png }, { NULL, NULL } };
  l_setfuncs(L, fns);
}
