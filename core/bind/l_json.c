/*
 * l_json.c — JSON text to Lua values with Jansson (core/src/lt_json.h), for the checkpoint metadata:
 * registered in `lutra.core._io` as
 *
 *   json_decode(text) -> value | nil, message, "memory"|"syntax"
 *   json_live() -> n        Jansson's blocks not freed (a leak check for tests)
 *
 * Objects become tables with string keys, arrays tables 1..n, numbers Lua numbers (integers exactly up
 * to 2^53), null nil, duplicate object keys are a syntax error. An allocation failure (Jansson's) is
 * reported as "memory", never as a result: lutra.checkpoint turns it into an out-of-memory error.
 */
#include <jansson.h>
#include <string.h>

#include "l_util.h"
#include "lt_json.h"

static void push_json(lua_State *L, const json_t *v) {
  luaL_checkstack(L, 4, "JSON nested too deeply");
  switch (json_typeof(v)) {
    case JSON_OBJECT: {
      lua_createtable(L, 0, (int)json_object_size(v));
      const char *k;
      json_t *x;
      json_object_foreach((json_t *)v, k, x) {
        if (json_is_null(x)) continue;
        lua_pushlstring(L, k, strlen(k));
        push_json(L, x);
        lua_rawset(L, -3);
      }
      break;
    }
    case JSON_ARRAY: {
      size_t n = json_array_size(v);
      lua_createtable(L, (int)n, 0);
      for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(v, i);
        if (json_is_null(x)) continue;
        push_json(L, x);
        lua_rawseti(L, -2, (int)i + 1);
      }
      break;
    }
    case JSON_STRING: lua_pushlstring(L, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER: lua_pushnumber(L, (lua_Number)json_integer_value(v)); break;
    case JSON_REAL: lua_pushnumber(L, json_real_value(v)); break;
    case JSON_TRUE: lua_pushboolean(L, 1); break;
    case JSON_FALSE: lua_pushboolean(L, 0); break;
    case JSON_NULL: lua_pushnil(L); break;
  }
}

/* Builds the Lua value in a protected call, so a Lua allocation failure does not leak the parsed tree. */
static int build(lua_State *L) {
  push_json(L, lua_touserdata(L, 1));
  return 1;
}

static int l_json_decode(lua_State *L) {
  size_t len;
  const char *s = l_checklstring(L, 1, &len);
  json_error_t jerr;
  int oom;
  json_t *root = lt_json_loadb(s, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr, &oom);
  if (!root) {
    lua_pushnil(L);
    if (oom) lua_pushfstring(L, "out of memory parsing %d bytes of JSON", (int)len);
    else lua_pushfstring(L, "%s at byte %d", jerr.text, jerr.position);
    lua_pushstring(L, oom ? "memory" : "syntax");
    return 3;
  }
  lua_pushcfunction(L, build);
  lua_pushlightuserdata(L, root);
  int status = lua_pcall(L, 1, 1, 0);
  json_decref(root);
  if (status) return lua_error(L);
  return 1;
}

static int l_json_live(lua_State *L) {
  lua_pushnumber(L, (lua_Number)lt_json_live_blocks());
  return 1;
}

void l_json_register(lua_State *L) {
  static const luaL_Reg funcs[] = { { "json_decode", l_json_decode }, { "json_live", l_json_live }, { NULL, NULL } };
  l_setfuncs(L, funcs);
}
