/*
 * l_json_line.c — Lua values to one line of JSON with Jansson, for the JSON-lines logger (lua/lutra/loggers/json_lines.lua):
 *   core._json_line(value) -> text (compact, object keys sorted, no newline)
 * A table whose keys are exactly 1..n is an array, any other an object (keys as strings); integers up to 2^53
 * are JSON integers, other numbers reals with the fewest digits (15 to 17, the most any of the line's reals needs)
 * that read back exactly; NaN and infinities, which JSON has no
 * literal for, are the strings "nan", "inf", "-inf". Functions, userdata and nesting deeper than 32 are errors.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l_util.h"

typedef struct conv {
  const char *err; /* what could not be written */
  int digits;      /* significant digits the reals need to read back exactly */
} conv;

static json_t *to_json(lua_State *L, int idx, int depth, conv *cv);

static json_t *number_json(lua_Number v, conv *cv) {
  if (v != v) return json_string("nan");
  if (isinf(v)) return json_string(v > 0 ? "inf" : "-inf");
  if (v == floor(v) && fabs(v) < 9007199254740992.0) return json_integer((json_int_t)v);
  int d = 15;
  char buf[40];
  for (; d < 17; d++) {
    snprintf(buf, sizeof buf, "%.*g", d, v);
    if (strtod(buf, NULL) == v) break;
  }
  if (d > cv->digits) cv->digits = d;
  return json_real(v);
}

static int is_array(lua_State *L, int idx, size_t *n) {
  size_t len = lua_objlen(L, idx), count = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    count++;
    if (lua_type(L, -1) != LUA_TNUMBER) {
      lua_pop(L, 1);
      return 0;
    }
  }
  *n = len;
  return len > 0 && count == len;
}

static json_t *table_json(lua_State *L, int idx, int depth, conv *cv) {
  size_t n;
  if (is_array(L, idx, &n)) {
    json_t *a = json_array();
    for (size_t i = 1; a && i <= n; i++) {
      lua_rawgeti(L, idx, (int)i);
      json_t *v = to_json(L, lua_gettop(L), depth + 1, cv);
      lua_pop(L, 1);
      if (!v || json_array_append_new(a, v)) {
        json_decref(a);
        return NULL;
      }
    }
    return a;
  }
  json_t *o = json_object();
  lua_pushnil(L);
  while (o && lua_next(L, idx)) {
    lua_pushvalue(L, -2); /* a copy of the key: tostring on it must not confuse lua_next */
    const char *k = lua_tostring(L, -1);
    json_t *v = k ? to_json(L, lua_gettop(L) - 1, depth + 1, cv) : NULL;
    if (!k) cv->err = "a key that is not a string or a number";
    if (!v || json_object_set_new(o, k, v)) {
      lua_pop(L, 3);
      json_decref(o);
      return NULL;
    }
    lua_pop(L, 2);
  }
  return o;
}

static json_t *to_json(lua_State *L, int idx, int depth, conv *cv) {
  if (depth > 32) {
    cv->err = "nesting deeper than 32 (a cycle?)";
    return NULL;
  }
  switch (lua_type(L, idx)) {
    case LUA_TNIL: return json_null();
    case LUA_TBOOLEAN: return json_boolean(lua_toboolean(L, idx));
    case LUA_TNUMBER: return number_json(lua_tonumber(L, idx), cv);
    case LUA_TSTRING: {
      size_t len;
      const char *s = lua_tolstring(L, idx, &len);
      json_t *v = json_stringn(s, len);
      if (!v) cv->err = "a string that is not UTF-8";
      return v;
    }
    case LUA_TTABLE: return table_json(L, idx, depth, cv);
    default: cv->err = lua_typename(L, lua_type(L, idx)); return NULL;
  }
}

static int l_json_line(lua_State *L) {
  luaL_checkany(L, 1);
  conv cv = { NULL, 1 };
  json_t *v = to_json(L, 1, 0, &cv);
  if (!v) return luaL_error(L, "json_line: cannot write %s as JSON", cv.err ? cv.err : "a value (out of memory)");
  char *text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY | JSON_REAL_PRECISION(cv.digits));
  json_decref(v);
  if (!text) return luaL_error(L, "json_line: out of memory");
  lua_pushstring(L, text);
  free(text);
  return 1;
}

void l_json_line_register(lua_State *L) {
  static const luaL_Reg fns[] = { { "_json_line", l_json_line }, { NULL, NULL } };
  l_setfuncs(L, fns);
}
