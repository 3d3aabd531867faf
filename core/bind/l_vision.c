/*
 * l_vision.c — core._images: the C side of lt.vision (lua/lutra/vision/): image decoding and the pixel kernels of
 * core/src/vision_*.c (lt_vision.h). The Lua layer checks the options and names the public function; these check
 * types and ranges again so a direct call cannot crash.
 *   decode(bytes, mode 0..4, what)                  -> [C x H x W] pixel image
 *   resize(img, oh, ow, nearest, pixels)
 *   pad(img, left, top, right, bottom, mode 0..3, fill_list)
 *   rotate(img, degrees, expand, cx|nil, cy|nil, fill_list)
 *   gaussian_blur(img, kx, ky, sigma_x, sigma_y, pixels)
 *   adjust_hue(img, factor, pixels)
 */
#include "l_util.h"
#include "lt_vision.h"

#define MAX_FILL 4

static int l_decode(lua_State *L) {
  size_t n;
  const char *bytes = l_checklstring(L, 1, &n);
  int mode = (int)l_checkint(L, 2, "decode_image", "mode", 0, 4);
  const char *what = l_optstring(L, 3, "decode_image");
  return l_push(L, lt_image_decode(L_CTX(L), what, bytes, n, (lt_image_mode)mode));
}

static int l_resize(lua_State *L) {
  lt_tensor *t = l_checktensor(L, 1, "resize");
  int64_t oh = l_checkint(L, 2, "resize", "height", 1, 1 << 20), ow = l_checkint(L, 3, "resize", "width", 1, 1 << 20);
  lt_resize_mode m = lua_toboolean(L, 4) ? LT_RESIZE_NEAREST : LT_RESIZE_BILINEAR;
  return l_push(L, lt_vision_resize(L_CTX(L), t, oh, ow, m, lua_toboolean(L, 5)));
}

static int check_fill(lua_State *L, int idx, double *fill, const char *fname) {
  l_checktype(L, idx, LUA_TTABLE);
  int n = (int)lua_objlen(L, idx);
  if (n < 1 || n > MAX_FILL) return l_errorf(L, "%s: fill must hold 1 to %d numbers, got %d", fname, MAX_FILL, n);
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, idx, i + 1);
    if (!lua_isnumber(L, -1)) return l_errorf(L, "%s: fill value %d is not a number", fname, i + 1);
    fill[i] = lua_tonumber(L, -1);
    lua_pop(L, 1);
  }
  return n;
}

static int l_pad(lua_State *L) {
  lt_tensor *t = l_checktensor(L, 1, "pad");
  int64_t pad[4];
  for (int i = 0; i < 4; i++) pad[i] = l_checkint(L, 2 + i, "pad", "padding", 0, 1 << 20);
  int mode = (int)l_checkint(L, 6, "pad", "padding_mode", 0, 3);
  double fill[MAX_FILL];
  int nfill = check_fill(L, 7, fill, "pad");
  return l_push(L, lt_vision_pad(L_CTX(L), t, pad, (lt_pad_mode)mode, fill, nfill));
}

static int l_rotate(lua_State *L) {
  lt_tensor *t = l_checktensor(L, 1, "rotate");
  double deg = l_checknumber(L, 2), center[2];
  int expand = lua_toboolean(L, 3), has_center = !lua_isnoneornil(L, 4);
  if (has_center) center[0] = l_checknumber(L, 4), center[1] = l_checknumber(L, 5);
  double fill[MAX_FILL];
  int nfill = check_fill(L, 6, fill, "rotate");
  return l_push(L, lt_vision_rotate(L_CTX(L), t, deg, expand, has_center ? center : NULL, fill, nfill));
}

static int l_gaussian_blur(lua_State *L) {
  lt_tensor *t = l_checktensor(L, 1, "gaussian_blur");
  int kx = (int)l_checkint(L, 2, "gaussian_blur", "kernel_size", 1, 1023);
  int ky = (int)l_checkint(L, 3, "gaussian_blur", "kernel_size", 1, 1023);
  double sx = l_checknumber(L, 4), sy = l_checknumber(L, 5);
  return l_push(L, lt_vision_gaussian_blur(L_CTX(L), t, kx, ky, sx, sy, lua_toboolean(L, 6)));
}

static int l_adjust_hue(lua_State *L) {
  lt_tensor *t = l_checktensor(L, 1, "adjust_hue");
  return l_push(L, lt_vision_adjust_hue(L_CTX(L), t, l_checknumber(L, 2), lua_toboolean(L, 3)));
}

void l_vision_register(lua_State *L) {
  static const luaL_Reg fns[] = { { "decode", l_decode },
                                  { "resize", l_resize },
                                  { "pad", l_pad },
                                  { "rotate", l_rotate },
                                  { "gaussian_blur", l_gaussian_blur },
                                  { "adjust_hue", l_adjust_hue },
                                  { NULL, NULL } };
  lua_newtable(L);
  l_setfuncs(L, fns);
  lua_setfield(L, -2, "_images");
}
