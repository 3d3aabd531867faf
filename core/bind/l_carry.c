/*
 * l_carry.c — encoding Lua values into messages that another Lua state decodes (l_carry.h), the way Lua Lanes
 * carries values between its lanes: copies of data, functions as their bytecode plus copies of their
 * upvalues, and functions and tables of the standard library and of lutra by name (a C function's upvalues
 * belong to one state, so its pointer must never cross). Within one message a table or function reached
 * twice (a shared subtable, a cycle, a recursive local function) is decoded as one object: every table and
 * function gets an id when first seen, and a second sighting is a reference to that id.
 */
#include "l_carry.h"

#include <stdlib.h>
#include <string.h>

#if LUA_VERSION_NUM >= 502 || !defined(LUTRA_LUA_PUC)
#define L_CARRY_UPVALUEID 1 /* LuaJIT and 5.2+: shared upvalue cells can be joined again */
#endif

enum {
  T_NIL,
  T_FALSE,
  T_TRUE,
  T_INT,     /* lua_Integer (5.3+) */
  T_NUM,     /* lua_Number */
  T_STR,     /* u64 length, bytes */
  T_TENSOR,  /* u32 index into m->tensors */
  T_TABLE,   /* (key, value)... T_END, then a metatable value or T_NIL */
  T_FUNC,    /* u64 length, bytecode, u8 number of upvalues, each a value or T_JOIN */
  T_JOIN,    /* u32 function id, u8 upvalue: this upvalue is that function's upvalue cell */
  T_REF,     /* u32 id of a table or function already decoded */
  T_NAME,    /* u8 parts, each u64 length + bytes: module name, then keys */
  T_GLOBALS, /* the sender's global table: the receiver's */
  T_REBUILD, /* a lutra userdata proxy: its rebuild function (a T_NAME) and its argument, then called */
  T_END
};

#define CARRY_MAX_DEPTH 200

/* ---- encoding ---------------------------------------------------------------------------------- */

typedef struct path_frame {
  const char *kind; /* "argument #%d", "key", "upvalue", "the metatable", "the environment" */
  int num;          /* argument number or numeric key */
  const char *str;  /* key or upvalue name */
  char where[96];   /* for upvalues: the function's source:line */
  int is_num_key;
} path_frame;

typedef struct enc {
  l_msg m;
  size_t cap;
  int tcap;
  int depth;
  int nids;    /* tables and functions numbered so far */
  int ids;     /* stack index: source object -> id */
  int names;   /* stack index: object -> name (the name table) */
  int upvals;  /* stack index: upvalue cell -> function id * 256 + upvalue number */
  int globals; /* stack index of the sender's global table */
  const char *fname, *what;
  path_frame path[CARRY_MAX_DEPTH + 2];
} enc;

static void put(lua_State *L, enc *e, const void *p, size_t n) {
  if (e->m.len + n > e->cap) {
    size_t cap = e->cap ? e->cap : 256;
    while (cap < e->m.len + n) cap *= 2;
    char *b = realloc(e->m.buf, cap);
    if (!b) l_errorf(L, "%s: out of memory carrying a value (%zu bytes)", e->fname, cap);
    e->m.buf = b;
    e->cap = cap;
  }
  memcpy(e->m.buf + e->m.len, p, n);
  e->m.len += n;
}
static void put_u8(lua_State *L, enc *e, int v) {
  unsigned char c = (unsigned char)v;
  put(L, e, &c, 1);
}
static void put_u32(lua_State *L, enc *e, uint32_t v) { put(L, e, &v, sizeof v); }
static void put_u64(lua_State *L, enc *e, uint64_t v) { put(L, e, &v, sizeof v); }
static void put_str(lua_State *L, enc *e, const char *s, size_t n) {
  put_u64(L, e, n);
  put(L, e, s, n);
}

/* The error naming where the value sits: "argument #1, key 'x', upvalue 'cfg' of the function at a.lua:3" */
static int refuse(lua_State *L, enc *e, const char *why) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 0; i <= e->depth; i++) {
    path_frame *f = &e->path[i];
    char piece[256];
    if (i == 0) snprintf(piece, sizeof piece, f->kind, f->num);
    else if (f->str && !strcmp(f->kind, "upvalue"))
      snprintf(piece, sizeof piece, ", upvalue '%s' of the function at %s", f->str, f->where);
    else if (!strcmp(f->kind, "key") && f->is_num_key) snprintf(piece, sizeof piece, ", key %d", f->num);
    else if (!strcmp(f->kind, "key") && f->str) snprintf(piece, sizeof piece, ", key '%.100s'", f->str);
    else snprintf(piece, sizeof piece, ", %s", f->kind);
    luaL_addstring(&b, piece);
  }
  luaL_pushresult(&b);
  return l_errorf(L, "%s: cannot carry %s: %s", e->fname, lua_tostring(L, -1), why);
}

static void encode(lua_State *L, enc *e, int idx);

static path_frame *push_frame(lua_State *L, enc *e, const char *kind) {
  if (e->depth >= CARRY_MAX_DEPTH) refuse(L, e, "nested deeper than 200 levels");
  path_frame *f = &e->path[++e->depth];
  memset(f, 0, sizeof *f);
  f->kind = kind;
  return f;
}

/* the value at idx was seen before in this message: writes a reference and returns 1 */
static int seen(lua_State *L, enc *e, int idx) {
  lua_pushvalue(L, idx);
  lua_rawget(L, e->ids);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_pushvalue(L, idx);
    lua_pushinteger(L, e->nids++);
    lua_rawset(L, e->ids);
    return 0;
  }
  uint32_t id = (uint32_t)lua_tointeger(L, -1);
  lua_pop(L, 1);
  put_u8(L, e, T_REF);
  put_u32(L, e, id);
  return 1;
}

/* a function or table of the standard library or of lutra: written as its name, returns 1 */
static int named(lua_State *L, enc *e, int idx) {
  lua_pushvalue(L, idx);
  lua_rawget(L, e->names);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return 0;
  }
  size_t n;
  const char *s = lua_tolstring(L, -1, &n); /* parts separated by '\0' */
  int parts = 1;
  for (size_t i = 0; i < n; i++) parts += s[i] == '\0';
  put_u8(L, e, T_NAME);
  put_u8(L, e, parts);
  for (const char *p = s; parts-- > 0; p += strlen(p) + 1) put_str(L, e, p, strlen(p));
  lua_pop(L, 1);
  return 1;
}

static void encode_tensor(lua_State *L, enc *e, lt_tensor *t) {
  lt_tensor *a = lt_tensor_alias(L_CTX(L), t, t->ndim, t->shape, t->stride, t->offset);
  if (!a) l_error_as(L, e->fname);
  if (e->m.ntensors == e->tcap) {
    int cap = e->tcap ? 2 * e->tcap : 4;
    lt_tensor **ts = realloc(e->m.tensors, (size_t)cap * sizeof *ts);
    if (!ts) {
      lt_tensor_release(a);
      l_errorf(L, "%s: out of memory carrying a tensor", e->fname);
    }
    e->m.tensors = ts;
    e->tcap = cap;
  }
  e->m.tensors[e->m.ntensors] = a;
  put_u8(L, e, T_TENSOR);
  put_u32(L, e, (uint32_t)e->m.ntensors++);
}

static void encode_table(lua_State *L, enc *e, int idx) {
  put_u8(L, e, T_TABLE);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    path_frame *f = push_frame(L, e, "key");
    int kt = lua_type(L, -2);
    if (kt == LUA_TSTRING) f->str = lua_tostring(L, -2);
    else if (kt == LUA_TNUMBER) {
      lua_Number k = lua_tonumber(L, -2);
      f->is_num_key = k == (int)k;
      f->num = (int)k;
      if (!f->is_num_key) f->kind = "a number key";
    } else f->kind = "a key";
    encode(L, e, lua_gettop(L) - 1);
    encode(L, e, lua_gettop(L));
    e->depth--;
    lua_pop(L, 1);
  }
  put_u8(L, e, T_END);
  if (lua_getmetatable(L, idx)) {
    push_frame(L, e, "the metatable");
    encode(L, e, lua_gettop(L));
    e->depth--;
    lua_pop(L, 1);
  } else put_u8(L, e, T_NIL);
}

static int dump_writer(lua_State *L, const void *p, size_t n, void *ud) {
  enc *e = ud;
  put(L, e, p, n);
  return 0;
}

static void encode_function(lua_State *L, enc *e, int idx) {
#ifdef L_CARRY_UPVALUEID
  int id = e->nids - 1; /* given by seen(): names this function's upvalue cells for the ones joined later */
#endif
  put_u8(L, e, T_FUNC);
  size_t at = e->m.len;
  put_u64(L, e, 0); /* the length, patched below */
  lua_pushvalue(L, idx);
#if LUA_VERSION_NUM >= 503
  int bad = lua_dump(L, dump_writer, e, 0);
#else
  int bad = lua_dump(L, dump_writer, e);
#endif
  lua_pop(L, 1);
  if (bad) refuse(L, e, "its bytecode could not be written");
  uint64_t n = e->m.len - at - sizeof(uint64_t);
  memcpy(e->m.buf + at, &n, sizeof n);
  lua_Debug ar;
  lua_pushvalue(L, idx);
  lua_getinfo(L, ">S", &ar);
  char where[96];
  snprintf(where, sizeof where, "%s:%d", ar.short_src, ar.linedefined);
  int nups = 0;
  while (lua_getupvalue(L, idx, nups + 1)) {
    lua_pop(L, 1);
    nups++;
  }
  put_u8(L, e, nups);
  for (int i = 1; i <= nups; i++) {
    const char *name = lua_getupvalue(L, idx, i);
#ifdef L_CARRY_UPVALUEID
    void *cell = lua_upvalueid(L, idx, i);
    lua_pushlightuserdata(L, cell);
    lua_rawget(L, e->upvals);
    if (!lua_isnil(L, -1)) { /* a cell already carried with another function: joined again */
      lua_Integer where_id = lua_tointeger(L, -1);
      lua_pop(L, 2);
      put_u8(L, e, T_JOIN);
      put_u32(L, e, (uint32_t)(where_id / 256));
      put_u8(L, e, (int)(where_id % 256));
      continue;
    }
    lua_pop(L, 1);
    lua_pushlightuserdata(L, cell);
    lua_pushinteger(L, (lua_Integer)id * 256 + i);
    lua_rawset(L, e->upvals);
#endif
    if (name && !strcmp(name, "_ENV")) { /* 5.2+: the receiver's globals, as on 5.1 (below) */
      lua_pop(L, 1);
      put_u8(L, e, T_GLOBALS);
      continue;
    }
    path_frame *f = push_frame(L, e, "upvalue");
    f->str = name && *name ? name : "?";
    snprintf(f->where, sizeof f->where, "%s", where);
    encode(L, e, lua_gettop(L));
    e->depth--;
    lua_pop(L, 1);
  }
  /* Lua 5.1/LuaJIT: the environment (getfenv) is not carried either: the function gets the receiving state's
   * globals, as a function loaded there would. Environments (5.1's or an _ENV upvalue) are mostly proxies of
   * the globals (a test runner's, a sandbox's), whose copy would drag the whole sender's state along. */
}

/* A userdata whose metatable has __lutra_carry (lutra's proxies: TensorDataset, Subset, DataLoader) crosses as
 * its constructor: __lutra_carry(obj) returns a rebuild function of lutra's (carried by name) and one argument
 * (its fields: tensors shared, the rest copied), and the receiver calls rebuild(arg). Returns 0 for any other
 * userdata. */
static int encode_rebuilt(lua_State *L, enc *e, int idx) {
  if (!lua_getmetatable(L, idx)) return 0;
  lua_getfield(L, -1, "__lutra_carry");
  lua_remove(L, -2);
  if (!lua_isfunction(L, -1)) {
    lua_pop(L, 1);
    return 0;
  }
  if (seen(L, e, idx)) {
    lua_pop(L, 1);
    return 1;
  }
  lua_pushvalue(L, idx);
  lua_call(L, 1, 2);
  int top = lua_gettop(L);
  put_u8(L, e, T_REBUILD);
  push_frame(L, e, "its constructor");
  if (!lua_isfunction(L, top - 1) || !named(L, e, top - 1))
    refuse(L, e, "its rebuild function is not one of lutra's (a lutra object's class is damaged)");
  encode(L, e, top);
  e->depth--;
  lua_pop(L, 2);
  return 1;
}

static void encode(lua_State *L, enc *e, int idx) {
  if (!lua_checkstack(L, 8)) refuse(L, e, "the Lua stack is full");
  int t = lua_type(L, idx);
  switch (t) {
    case LUA_TNIL: put_u8(L, e, T_NIL); return;
    case LUA_TBOOLEAN: put_u8(L, e, lua_toboolean(L, idx) ? T_TRUE : T_FALSE); return;
    case LUA_TNUMBER: {
#if LUA_VERSION_NUM >= 503
      if (lua_isinteger(L, idx)) {
        lua_Integer v = lua_tointeger(L, idx);
        put_u8(L, e, T_INT);
        put(L, e, &v, sizeof v);
        return;
      }
#endif
      lua_Number v = lua_tonumber(L, idx);
      put_u8(L, e, T_NUM);
      put(L, e, &v, sizeof v);
      return;
    }
    case LUA_TSTRING: {
      size_t n;
      const char *s = lua_tolstring(L, idx, &n);
      put_u8(L, e, T_STR);
      put_str(L, e, s, n);
      return;
    }
    case LUA_TTABLE:
      if (lua_rawequal(L, idx, e->globals)) {
        put_u8(L, e, T_GLOBALS);
        return;
      }
      if (named(L, e, idx) || seen(L, e, idx)) return;
      encode_table(L, e, idx);
      return;
    case LUA_TFUNCTION:
      if (named(L, e, idx)) return;
      if (lua_iscfunction(L, idx)) refuse(L, e, "a C function that is not lutra's nor the standard library's");
      if (seen(L, e, idx)) return;
      encode_function(L, e, idx);
      return;
    case LUA_TUSERDATA: {
      lt_tensor *x = l_totensor(L, idx);
      if (x) {
        if (seen(L, e, idx)) return;
        encode_tensor(L, e, x);
        return;
      }
      if (encode_rebuilt(L, e, idx)) return;
      refuse(L, e, "a userdata that is not a tensor nor one of lutra's data objects cannot cross to another state");
      return;
    }
    case LUA_TTHREAD: refuse(L, e, "a coroutine cannot cross to another state"); return;
    case LUA_TLIGHTUSERDATA: refuse(L, e, "a light userdata cannot cross to another state"); return;
    default:
      if (!strcmp(lua_typename(L, t), "cdata")) refuse(L, e, "a cdata (LuaJIT FFI) cannot cross to another state");
      refuse(L, e, lua_pushfstring(L, "a %s cannot cross to another state", lua_typename(L, t)));
  }
}

/* ---- the name table: the standard library's and lutra's functions and tables -------------------- */

static const char *const std_modules[] = { "_G",          "string",      "table",         "math",    "io",
                                           "os",          "coroutine",   "utf8",          "bit",     "bit32",
                                           "jit",         "debug",       "ffi",           "package", "table.new",
                                           "table.clear", "jit.profile", "string.buffer", NULL };

static int is_carried_module(const char *name) {
  for (int i = 0; std_modules[i]; i++)
    if (!strcmp(name, std_modules[i])) return 1;
  return !strncmp(name, "lutra", 5) && (name[5] == '\0' || name[5] == '.');
}

/* names[value] = "module\0key[\0key]" unless the value has a name already (the first found wins) */
static void name_value(lua_State *L, int names, int vidx, const char *name, size_t n) {
  int t = lua_type(L, vidx);
  if (t != LUA_TFUNCTION && t != LUA_TTABLE) return;
  lua_pushvalue(L, vidx);
  lua_rawget(L, names);
  int has = !lua_isnil(L, -1);
  lua_pop(L, 1);
  if (has) return;
  lua_pushvalue(L, vidx);
  lua_pushlstring(L, name, n);
  lua_rawset(L, names);
}

/* the string keys of the table at tidx, named prefix\0key; depth 1 or 2 */
static void name_fields(lua_State *L, int names, int tidx, const char *prefix, size_t plen, int depth) {
  if (!lua_checkstack(L, 8)) return;
  lua_pushnil(L);
  while (lua_next(L, tidx)) {
    if (lua_type(L, -2) == LUA_TSTRING) {
      size_t kn;
      const char *k = lua_tolstring(L, -2, &kn);
      char name[512];
      if (plen + 1 + kn < sizeof name && !memchr(k, '\0', kn)) {
        memcpy(name, prefix, plen);
        name[plen] = '\0';
        memcpy(name + plen + 1, k, kn);
        size_t n = plen + 1 + kn;
        /* of the globals, only the C functions (print, pairs): the host's own globals are its data */
        int global = plen == 2 && !memcmp(prefix, "_G", 2);
        if (!global || lua_iscfunction(L, -1)) name_value(L, names, lua_gettop(L), name, n);
        if (!global && depth < 2 && lua_type(L, -1) == LUA_TTABLE)
          name_fields(L, names, lua_gettop(L), name, n, depth + 1);
      }
    }
    lua_pop(L, 1);
  }
}

/* Pushes the name table, rebuilt when modules were loaded since it was built (package.loaded counted) */
static void push_names(lua_State *L) {
  static const char key = 0; /* registry key: {names = ..., count = ...} */
  lua_getglobal(L, "package");
  int loaded_count = -1;
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "loaded");
    lua_remove(L, -2);
  }
  int loaded = lua_gettop(L);
  if (lua_istable(L, loaded)) {
    loaded_count = 0;
    lua_pushnil(L);
    while (lua_next(L, loaded)) {
      loaded_count++;
      lua_pop(L, 1);
    }
  }
  lua_pushlightuserdata(L, (void *)&key);
  lua_rawget(L, LUA_REGISTRYINDEX);
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "count");
    int same = lua_tointeger(L, -1) == loaded_count;
    lua_pop(L, 1);
    if (same) {
      lua_getfield(L, -1, "names");
      lua_remove(L, -2);
      lua_remove(L, loaded);
      return;
    }
  }
  lua_pop(L, 1);
  lua_newtable(L); /* names */
  int names = lua_gettop(L);
  if (lua_istable(L, loaded)) {
    /* lutra first (lutra.core is the same table, with fewer names: lutra adds its Lua functions), then the
     * modules (a module reached as a field of another is named as the module), then their fields */
    lua_getfield(L, loaded, "lutra");
    name_value(L, names, lua_gettop(L), "lutra", 5);
    lua_pop(L, 1);
    for (int pass = 0; pass < 2; pass++) {
      lua_pushnil(L);
      while (lua_next(L, loaded)) {
        if (lua_type(L, -2) == LUA_TSTRING && lua_istable(L, -1) && is_carried_module(lua_tostring(L, -2))) {
          size_t n;
          const char *m = lua_tolstring(L, -2, &n);
          if (pass == 0) name_value(L, names, lua_gettop(L), m, n);
          else name_fields(L, names, lua_gettop(L), m, n, 1);
        }
        lua_pop(L, 1);
      }
    }
  }
  lua_newtable(L);
  lua_pushvalue(L, names);
  lua_setfield(L, -2, "names");
  lua_pushinteger(L, loaded_count);
  lua_setfield(L, -2, "count");
  lua_pushlightuserdata(L, (void *)&key);
  lua_insert(L, -2);
  lua_rawset(L, LUA_REGISTRYINDEX);
  lua_remove(L, loaded);
}

/* the encoder lives in a userdata while it works, so that an error (a refused value) frees its buffer */
static int enc_gc(lua_State *L) {
  enc *e = lua_touserdata(L, 1);
  free(e->m.buf);
  for (int i = 0; i < e->m.ntensors; i++) lt_tensor_release(e->m.tensors[i]);
  free(e->m.tensors);
  memset(&e->m, 0, sizeof e->m);
  return 0;
}

l_msg *l_carry_encode(lua_State *L, int first, int n, const char *fname, const char *what) {
  if (first < 0) first = lua_gettop(L) + first + 1;
  luaL_checkstack(L, 16, fname);
  int top = lua_gettop(L);
  enc *e = lua_newuserdata(L, sizeof *e);
  memset(e, 0, sizeof *e);
  lua_newtable(L);
  lua_pushcfunction(L, enc_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  int ud = lua_gettop(L);
  e->fname = fname;
  e->what = what ? what : "argument #%d";
  lua_newtable(L);
  e->ids = lua_gettop(L);
  push_names(L);
  e->names = lua_gettop(L);
  lua_newtable(L);
  e->upvals = lua_gettop(L);
#if LUA_VERSION_NUM >= 502
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
#else
  lua_pushvalue(L, LUA_GLOBALSINDEX);
#endif
  e->globals = lua_gettop(L);
  for (int i = 0; i < n; i++) {
    e->depth = 0;
    e->path[0].kind = e->what;
    e->path[0].num = i + 1;
    encode(L, e, first + i);
  }
  l_msg *m = malloc(sizeof *m);
  if (!m) l_errorf(L, "%s: out of memory carrying a value", fname);
  *m = e->m;
  m->nvalues = n;
  m->next = NULL;
  memset(&e->m, 0, sizeof e->m); /* the message owns the buffer and the tensors now */
  lua_settop(L, top);
  (void)ud;
  return m;
}

void l_msg_free(l_msg *m) {
  if (!m) return;
  free(m->buf);
  for (int i = 0; i < m->ntensors; i++) lt_tensor_release(m->tensors[i]);
  free(m->tensors);
  free(m);
}

/* ---- decoding ---------------------------------------------------------------------------------- */

typedef struct dec {
  const l_msg *m;
  size_t at;
  int refs; /* stack index: id -> object */
  int nrefs;
  const char *fname;
} dec;

static int corrupt(lua_State *L, dec *d) { return l_errorf(L, "%s: a carried message is damaged", d->fname); }

static const void *get(lua_State *L, dec *d, size_t n) {
  if (d->at + n > d->m->len) corrupt(L, d);
  const void *p = d->m->buf + d->at;
  d->at += n;
  return p;
}
static int get_u8(lua_State *L, dec *d) { return *(const unsigned char *)get(L, d, 1); }
static uint32_t get_u32(lua_State *L, dec *d) {
  uint32_t v;
  memcpy(&v, get(L, d, sizeof v), sizeof v);
  return v;
}
static uint64_t get_u64(lua_State *L, dec *d) {
  uint64_t v;
  memcpy(&v, get(L, d, sizeof v), sizeof v);
  return v;
}

static void decode(lua_State *L, dec *d);

static void keep_ref(lua_State *L, dec *d) {
  lua_pushvalue(L, -1);
  lua_rawseti(L, d->refs, d->nrefs++);
}

/* t[k] with its metatable's __index (lutra's namespaces load their submodules on first use) */
static int index_field(lua_State *L) {
  lua_gettable(L, 1);
  return 1;
}

static void decode_name(lua_State *L, dec *d) {
  int parts = get_u8(L, d);
  char shown[512] = "";
  for (int i = 0; i < parts; i++) {
    size_t n = (size_t)get_u64(L, d);
    const char *s = get(L, d, n);
    size_t used = strlen(shown);
    snprintf(shown + used, sizeof shown - used, "%s%.*s", i ? "." : "", (int)n, s);
    if (i == 0) {
      if (n == 2 && !memcmp(s, "_G", 2)) {
#if LUA_VERSION_NUM >= 502
        lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
#else
        lua_pushvalue(L, LUA_GLOBALSINDEX);
#endif
        continue;
      }
      lua_getglobal(L, "require");
      lua_pushlstring(L, s, n);
      if (lua_pcall(L, 1, 1, 0))
        l_errorf(L, "%s: the module '%s' of a carried value does not load here: %s", d->fname, shown,
                 lua_tostring(L, -1));
    } else {
      if (!lua_istable(L, -1)) lua_pushnil(L);
      else {
        lua_pushlstring(L, s, n);
        lua_rawget(L, -2);
        if (lua_isnil(L, -1)) { /* a lazy name not loaded yet here (lt.data): indexed through its metatable */
          lua_pop(L, 1);
          lua_pushcfunction(L, index_field);
          lua_pushvalue(L, -2);
          lua_pushlstring(L, s, n);
          if (lua_pcall(L, 2, 1, 0)) {
            lua_pop(L, 1);
            lua_pushnil(L);
          }
        }
      }
      lua_remove(L, -2);
    }
    if (lua_isnil(L, -1)) l_errorf(L, "%s: '%s' of a carried value does not exist here", d->fname, shown);
  }
}

static void decode_function(lua_State *L, dec *d) {
  size_t n = (size_t)get_u64(L, d);
  const char *code = get(L, d, n);
#ifndef LUTRA_LUA_PUC
  if (n > 4 && (code[4] & 0x04)) { /* LuaJIT's BCDUMP_F_FFI: 64-bit or complex literals, which need ffi loaded */
    lua_getglobal(L, "require");
    lua_pushstring(L, "ffi");
    if (lua_pcall(L, 1, 0, 0)) lua_pop(L, 1);
  }
#endif
#if LUA_VERSION_NUM >= 502
  int bad = luaL_loadbufferx(L, code, n, "=carried", "b");
#else
  int bad = luaL_loadbuffer(L, code, n, "=carried");
#endif
  if (bad) l_errorf(L, "%s: a carried function does not load: %s", d->fname, lua_tostring(L, -1));
  int f = lua_gettop(L);
  keep_ref(L, d);
  int nups = get_u8(L, d);
  for (int i = 1; i <= nups; i++) {
    if (d->at < d->m->len && d->m->buf[d->at] == T_JOIN) {
      d->at++;
      uint32_t id = get_u32(L, d);
      int up = get_u8(L, d);
#ifdef L_CARRY_UPVALUEID
      lua_rawgeti(L, d->refs, (int)id);
      if (!lua_isfunction(L, -1)) corrupt(L, d);
      lua_upvaluejoin(L, f, i, lua_gettop(L), up);
      lua_pop(L, 1);
#else
      (void)id, (void)up;
#endif
      continue;
    }
    decode(L, d);
    if (!lua_setupvalue(L, f, i)) lua_pop(L, 1);
  }
}

static void decode(lua_State *L, dec *d) {
  if (!lua_checkstack(L, 8)) l_errorf(L, "%s: the Lua stack is full", d->fname);
  int tag = get_u8(L, d);
  switch (tag) {
    case T_NIL: lua_pushnil(L); return;
    case T_FALSE: lua_pushboolean(L, 0); return;
    case T_TRUE: lua_pushboolean(L, 1); return;
    case T_INT: {
      lua_Integer v;
      memcpy(&v, get(L, d, sizeof v), sizeof v);
      lua_pushinteger(L, v);
      return;
    }
    case T_NUM: {
      lua_Number v;
      memcpy(&v, get(L, d, sizeof v), sizeof v);
      lua_pushnumber(L, v);
      return;
    }
    case T_STR: {
      size_t n = (size_t)get_u64(L, d);
      lua_pushlstring(L, get(L, d, n), n);
      return;
    }
    case T_TENSOR: {
      uint32_t i = get_u32(L, d);
      if ((int)i >= d->m->ntensors) corrupt(L, d);
      lt_tensor *t = d->m->tensors[i];
      /* the storage counts in this state's GC pacing: the sender's box may keep it alive for a while, and
     * l_push counts a storage only when it has one reference (l_util.c) */
      L_STATE(L)->gc_debt += t->storage ? t->storage->nbytes : 0;
      l_push(L, lt_tensor_retain(t));
      keep_ref(L, d);
      return;
    }
    case T_TABLE: {
      lua_newtable(L);
      keep_ref(L, d);
      int t = lua_gettop(L);
      while (d->at < d->m->len && d->m->buf[d->at] != T_END) {
        decode(L, d);
        decode(L, d);
        if (lua_isnil(L, -2)) corrupt(L, d);
        lua_rawset(L, t);
      }
      get(L, d, 1); /* T_END */
      decode(L, d); /* the metatable or nil */
      if (lua_istable(L, -1)) lua_setmetatable(L, t);
      else lua_pop(L, 1);
      return;
    }
    case T_FUNC: decode_function(L, d); return;
    case T_REF: {
      uint32_t id = get_u32(L, d);
      if ((int)id >= d->nrefs) corrupt(L, d);
      lua_rawgeti(L, d->refs, (int)id);
      return;
    }
    case T_NAME: decode_name(L, d); return;
    case T_REBUILD: {
      int id = d->nrefs++; /* numbered before its contents, as the encoder did */
      decode(L, d);        /* the rebuild function */
      if (!lua_isfunction(L, -1)) corrupt(L, d);
      decode(L, d); /* its argument */
      lua_call(L, 1, 1);
      lua_pushvalue(L, -1);
      lua_rawseti(L, d->refs, id);
      return;
    }
    case T_GLOBALS:
#if LUA_VERSION_NUM >= 502
      lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
#else
      lua_pushvalue(L, LUA_GLOBALSINDEX);
#endif
      return;
    default: corrupt(L, d);
  }
}

int l_carry_decode(lua_State *L, const l_msg *m, const char *fname) {
  luaL_checkstack(L, m->nvalues + 16, fname);
  lua_newtable(L);
  dec d = { m, 0, lua_gettop(L), 0, fname };
  for (int i = 0; i < m->nvalues; i++) decode(L, &d);
  lua_remove(L, d.refs);
  return m->nvalues;
}

/* ---- for tests: a message made in one state and read in another (core._carry_pack/_carry_unpack) ---- */

/* core._carry_pack(...) -> a light userdata owning a message of the arguments (tests/c/test_states.c hands it
 * to another state; core._carry_unpack reads and frees it) */
static int l_carry_pack(lua_State *L) {
  l_msg *m = l_carry_encode(L, 1, lua_gettop(L), "_carry_pack", NULL);
  lua_pushlightuserdata(L, m);
  return 1;
}

/* the message being read, freed by __gc if decoding raises */
static int msg_box_gc(lua_State *L) {
  l_msg **b = lua_touserdata(L, 1);
  l_msg_free(*b);
  *b = NULL;
  return 0;
}

static int l_carry_unpack(lua_State *L) {
  if (!lua_islightuserdata(L, 1)) return l_typeerror(L, 1, "light userdata");
  l_msg **b = lua_newuserdata(L, sizeof *b);
  *b = lua_touserdata(L, 1);
  lua_newtable(L);
  lua_pushcfunction(L, msg_box_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  int n = l_carry_decode(L, *b, "_carry_unpack");
  l_msg_free(*b);
  *b = NULL;
  return n;
}

void l_carry_register(lua_State *L) {
  static const luaL_Reg funcs[] = { { "_carry_pack", l_carry_pack },
                                    { "_carry_unpack", l_carry_unpack },
                                    { NULL, NULL } };
  l_setfuncs(L, funcs);
}
