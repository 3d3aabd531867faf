/*
 * l_tb.c — TensorBoard event files (core/src/lt_tb.h) for lua/lutra/loggers/tensorboard.lua:
 *   core._tb_open(path, wall_time) -> writer, the path it created (path, or path.1 ... when path is taken;
 *                                                  the file starts with its file_version event)
 *   w:scalars(step, wall_time, tags, values)       one Event: a Summary with a simple_value per tag
 *   w:hparams(wall_time, names, values, metric_tags)  the HParams plugin's three summaries (lt_tb_hparams):
 *                                                  values[i] (a number, string or boolean) is names[i]'s
 *   w:flush(), w:close()                           (close is idempotent; __gc closes a forgotten writer)
 *   core._wall_time() -> seconds since the epoch (an Event's wall_time)
 */
#include <time.h>

#include "l_util.h"
#include "lt_tb.h"

#define TB_MT "lutra.TBWriter"

typedef struct tb_box {
  lt_tb_writer *w;
} tb_box;

static tb_box *check_open(lua_State *L) {
  tb_box *b = luaL_checkudata(L, 1, TB_MT);
  if (!b->w) luaL_error(L, "TensorBoardLogger: the event file is closed");
  return b;
}

static int l_tb_open(lua_State *L) {
  const char *path = l_checkstring(L, 1);
  double wall = luaL_checknumber(L, 2);
  tb_box *b = lua_newuserdata(L, sizeof *b); /* the box first (NULL), so __gc is safe on a failed open */
  b->w = NULL;
  luaL_getmetatable(L, TB_MT);
  lua_setmetatable(L, -2);
  b->w = lt_tb_open(L_CTX(L), path, wall);
  if (!b->w) return luaL_error(L, "%s", L_CTX(L)->err);
  lua_pushstring(L, lt_tb_path(b->w));
  return 2;
}

static int l_tb_scalars(lua_State *L) {
  tb_box *b = check_open(L);
  double step = luaL_checknumber(L, 2);
  double wall = luaL_checknumber(L, 3);
  luaL_checktype(L, 4, LUA_TTABLE);
  luaL_checktype(L, 5, LUA_TTABLE);
  int n = (int)lua_objlen(L, 4);
  if ((int)lua_objlen(L, 5) != n)
    return luaL_error(L, "TensorBoardLogger: %d tags but %d values", n, (int)lua_objlen(L, 5));
  if (!(step >= -9.0e15 && step <= 9.0e15)) return luaL_error(L, "TensorBoardLogger: step %f is not an integer", step);
  const char **tags = lua_newuserdata(L, sizeof *tags * (size_t)(n > 0 ? n : 1)); /* freed by the GC */
  float *vals = lua_newuserdata(L, sizeof *vals * (size_t)(n > 0 ? n : 1));
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, 4, i + 1);
    tags[i] = lua_tostring(L, -1); /* kept alive by the tags table */
    lua_pop(L, 1);
    lua_rawgeti(L, 5, i + 1);
    vals[i] = (float)lua_tonumber(L, -1);
    lua_pop(L, 1);
    if (!tags[i]) return luaL_error(L, "TensorBoardLogger: tag %d is not a string", i + 1);
  }
  if (lt_tb_scalars(L_CTX(L), b->w, (int64_t)step, wall, n, tags, vals)) return luaL_error(L, "%s", L_CTX(L)->err);
  return 0;
}

static int l_tb_hparams(lua_State *L) {
  tb_box *b = check_open(L);
  double wall = luaL_checknumber(L, 2);
  luaL_checktype(L, 3, LUA_TTABLE);
  luaL_checktype(L, 4, LUA_TTABLE);
  luaL_checktype(L, 5, LUA_TTABLE);
  int n = (int)lua_objlen(L, 3), nm = (int)lua_objlen(L, 5);
  if ((int)lua_objlen(L, 4) != n)
    return luaL_error(L, "TensorBoardLogger: %d hyper-parameter names but %d values", n, (int)lua_objlen(L, 4));
  lt_tb_hparam *hp = lua_newuserdata(L, sizeof *hp * (size_t)(n > 0 ? n : 1)); /* freed by the GC */
  const char **tags = lua_newuserdata(L, sizeof *tags * (size_t)(nm > 0 ? nm : 1));
  for (int i = 0; i < n; i++) { /* the strings stay alive in the argument tables */
    lua_rawgeti(L, 3, i + 1);
    hp[i].name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    lua_pop(L, 1);
    if (!hp[i].name) return luaL_error(L, "TensorBoardLogger: hyper-parameter name %d is not a string", i + 1);
    lua_rawgeti(L, 4, i + 1);
    int t = lua_type(L, -1);
    hp[i].number = 0;
    hp[i].string = NULL;
    hp[i].boolean = 0;
    if (t == LUA_TNUMBER) {
      hp[i].kind = LT_TB_HPARAM_NUMBER;
      hp[i].number = lua_tonumber(L, -1);
    } else if (t == LUA_TSTRING) {
      hp[i].kind = LT_TB_HPARAM_STRING;
      hp[i].string = lua_tostring(L, -1);
    } else if (t == LUA_TBOOLEAN) {
      hp[i].kind = LT_TB_HPARAM_BOOL;
      hp[i].boolean = lua_toboolean(L, -1);
    } else {
      return luaL_error(L, "TensorBoardLogger: hyper-parameter '%s' must be a number, string or boolean, got %s",
                        hp[i].name, lua_typename(L, t));
    }
    lua_pop(L, 1);
  }
  for (int i = 0; i < nm; i++) {
    lua_rawgeti(L, 5, i + 1);
    tags[i] = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    lua_pop(L, 1);
    if (!tags[i]) return luaL_error(L, "TensorBoardLogger: metric tag %d is not a string", i + 1);
  }
  if (lt_tb_hparams(L_CTX(L), b->w, wall, n, hp, nm, tags)) return luaL_error(L, "%s", L_CTX(L)->err);
  return 0;
}

static int l_tb_flush(lua_State *L) {
  tb_box *b = check_open(L);
  if (lt_tb_flush(L_CTX(L), b->w)) return luaL_error(L, "%s", L_CTX(L)->err);
  return 0;
}

static int l_tb_close(lua_State *L) {
  tb_box *b = luaL_checkudata(L, 1, TB_MT);
  lt_tb_writer *w = b->w;
  b->w = NULL;
  if (lt_tb_close(L_CTX(L), w)) return luaL_error(L, "%s", L_CTX(L)->err);
  return 0;
}

static int l_tb_gc(lua_State *L) {
  tb_box *b = luaL_checkudata(L, 1, TB_MT);
  lt_ctx scratch; /* a failed close at collection has nobody to tell */
  lt_ctx_init(&scratch);
  lt_tb_close(&scratch, b->w);
  b->w = NULL;
  return 0;
}

static int l_wall_time(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  lua_pushnumber(L, (lua_Number)ts.tv_sec + 1e-9 * (lua_Number)ts.tv_nsec);
  return 1;
}

void l_tb_register(lua_State *L) {
  static const luaL_Reg methods[] = { { "scalars", l_tb_scalars },
                                      { "hparams", l_tb_hparams },
                                      { "flush", l_tb_flush },
                                      { "close", l_tb_close },
                                      { NULL, NULL } };
  luaL_newmetatable(L, TB_MT);
  lua_newtable(L);
  l_setfuncs(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, l_tb_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  static const luaL_Reg funcs[] = { { "_tb_open", l_tb_open }, { "_wall_time", l_wall_time }, { NULL, NULL } };
  l_setfuncs(L, funcs);
}
