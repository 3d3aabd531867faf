/*
 * l_io.c — Lua binding for safetensors checkpoint files and atomic writes, registered as
 * `lutra.core._io` (the user-facing API is lua/lutra/checkpoint/init.lua: lt.save, lt.load, checkpoints):
 *
 *   save(path, names, tensors, meta)     names: list of strings, tensors: list of tensors (same length,
 *                                        float32 or int64, any layout), meta: {key = string} (written in
 *                                        key order). Atomic; raises "save: <path>: <what is wrong>".
 *   load(path) -> names, tensors, meta, checksum_verified
 *                                        names in file order, tensors {name = tensor} (fresh copies),
 *                                        meta {key = string}. Raises "load: <path>: <what is wrong>".
 *   save_bytes(names, tensors, meta[, name]) -> string   the bytes save would write ("save: <name>: ...")
 *   load_bytes(s[, name]) -> as load     from bytes ("load: <name>: ..."; name defaults to "(bytes)")
 *   json_decode(text) -> value | nil, message, "memory"|"syntax"   (l_json.c)
 *   fault_arm(n), fault_seen()           allocation-failure injection for tests (l_fault.c)
 *   write_atomic(path, string)           a whole text file, atomically ("write: <path>: ...").
 *   read_all(path) -> string             a whole file ("read: <path>: ...").
 *   mkdirs(path)                         mkdir -p (raises "mkdir: <path>: <strerror>")
 *   listdir(path) -> {names} | nil, msg  entries except . and .. (unsorted)
 *   stat(path) -> nil | {type = "file"|"dir"|"other", size, mtime (seconds, with ns fraction)}
 *   writable_dir(path) -> bool           a directory where this process may create files
 *   isatty(fd) -> bool
 *   term_width(fd) -> columns | nil      the terminal's width (TIOCGWINSZ)
 *   now() -> seconds                     monotonic clock
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "l_util.h"
#include "lt_fileio.h"
#include "lt_safetensors.h"

typedef struct st_meta_sort {
  const char *key, *value;
} st_meta_sort;

static int cmp_meta(const void *a, const void *b) {
  return strcmp(((const st_meta_sort *)a)->key, ((const st_meta_sort *)b)->key);
}

/* Everything save allocates, released in one place (also before raising). */
typedef struct save_work {
  lt_st_tensor *ts;
  lt_tensor **held; /* contiguous references */
  int64_t (*shapes)[LT_MAX_DIM];
  st_meta_sort *md;
  size_t n, nmd;
} save_work;

/* Pushes the bytes (upvalue-free helper run under lua_pcall: a Lua allocation failure must not leak them). */
static int push_bytes(lua_State *L) {
  lua_pushlstring(L, lua_touserdata(L, 1), *(size_t *)lua_touserdata(L, 2));
  return 1;
}

static void save_work_free(save_work *w) {
  if (w->held)
    for (size_t i = 0; i < w->n; i++)
      if (w->held[i]) lt_tensor_release(w->held[i]);
  free(w->held);
  free(w->ts);
  free(w->shapes);
  free(w->md);
  memset(w, 0, sizeof *w);
}

/* Writes the file of names (a list at stack index ni), tensors (ti) and metadata (mi, may be nil) to path,
 * or, with path NULL, pushes it as a string. Messages say "save: <name>: ...". */
static int save_to(lua_State *L, const char *path, const char *name, int ni, int ti, int mi) {
  l_checktype(L, ni, LUA_TTABLE);
  l_checktype(L, ti, LUA_TTABLE);
  if (!lua_isnoneornil(L, mi)) l_checktype(L, mi, LUA_TTABLE);
  lt_ctx *c = L_CTX(L);
  size_t n = lua_objlen(L, ni);
  if (lua_objlen(L, ti) != n)
    return l_errorf(L, "save: %s: %d names for %d tensors", name, (int)n, (int)lua_objlen(L, ti));
  /* pass 1: check types (may raise; nothing allocated yet) */
  for (size_t i = 1; i <= n; i++) {
    lua_rawgeti(L, ni, (int)i);
    if (lua_type(L, -1) != LUA_TSTRING) return l_errorf(L, "save: %s: name %d is not a string", name, (int)i);
    lua_rawgeti(L, ti, (int)i);
    if (!l_totensor(L, -1))
      return l_errorf(L, "save: %s: entry '%s' is a %s, expected a tensor", name, lua_tostring(L, -2),
                      luaL_typename(L, -1));
    lua_pop(L, 2);
  }
  size_t nmd = 0;
  if (lua_istable(L, mi)) {
    lua_pushnil(L);
    while (lua_next(L, mi)) {
      if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
        return l_errorf(L, "save: %s: metadata keys and values must be strings", name);
      nmd++;
      lua_pop(L, 1);
    }
  }
  /* pass 2: build (no Lua errors from here until save_work_free) */
  save_work w = { 0 };
  w.n = n;
  w.nmd = nmd;
  w.ts = calloc(n ? n : 1, sizeof *w.ts);
  w.held = calloc(n ? n : 1, sizeof *w.held);
  w.shapes = calloc(n ? n : 1, sizeof *w.shapes);
  w.md = calloc(nmd ? nmd : 1, sizeof *w.md);
  if (!w.ts || !w.held || !w.shapes || !w.md) {
    save_work_free(&w);
    return l_errorf(L, "save: %s: out of memory", name);
  }
  for (size_t i = 0; i < n; i++) {
    lua_rawgeti(L, ni, (int)i + 1);
    lua_rawgeti(L, ti, (int)i + 1);
    const char *tname = lua_tostring(L, -2); /* stays alive: the names table holds it */
    lt_tensor *t = l_totensor(L, -1);
    lua_pop(L, 2);
    lt_tensor *ct = lt_op_contiguous(c, t);
    if (!ct) {
      save_work_free(&w);
      return l_errorf(L, "save: %s: %s", name, c->err);
    }
    w.held[i] = ct;
    for (int d = 0; d < ct->ndim; d++) w.shapes[i][d] = ct->shape[d];
    w.ts[i].name = tname;
    w.ts[i].dtype = ct->dtype == LT_I64 ? "I64" : ct->dtype == LT_F64 ? "F64" : "F32";
    w.ts[i].ndim = ct->ndim;
    w.ts[i].shape = w.shapes[i];
    w.ts[i].data = (const char *)ct->storage->data + ct->offset * (int64_t)lt_dtype_size(ct->dtype);
    w.ts[i].nbytes = (size_t)lt_numel(ct) * lt_dtype_size(ct->dtype);
  }
  if (nmd) {
    size_t k = 0;
    lua_pushnil(L);
    while (lua_next(L, mi)) {
      w.md[k].key = lua_tostring(L, -2);
      w.md[k].value = lua_tostring(L, -1);
      k++;
      lua_pop(L, 1);
    }
    qsort(w.md, nmd, sizeof *w.md, cmp_meta);
  }
  lt_st_meta *meta = (lt_st_meta *)w.md; /* same layout: two const char * */
  char err[1024];
  void *bytes = NULL;
  size_t len = 0;
  int rc = path ? lt_st_save(path, w.ts, n, meta, nmd, err, sizeof err)
                : lt_st_save_mem(name, w.ts, n, meta, nmd, &bytes, &len, err, sizeof err);
  save_work_free(&w);
  if (rc) {
    lua_pushstring(L, err);
    return lua_error(L);
  }
  if (!path) {
    lua_pushcfunction(L, push_bytes);
    lua_pushlightuserdata(L, bytes);
    lua_pushlightuserdata(L, &len);
    int status = lua_pcall(L, 2, 1, 0);
    free(bytes);
    if (status) return lua_error(L);
    return 1;
  }
  return 0;
}

static int l_io_save(lua_State *L) { return save_to(L, l_checkstring(L, 1), lua_tostring(L, 1), 2, 3, 4); }

/* save_bytes(names, tensors, meta[, name]) -> string: the file save would write. */
static int l_io_save_bytes(lua_State *L) {
  return save_to(L, NULL, lua_isnoneornil(L, 4) ? "(bytes)" : l_checkstring(L, 4), 1, 2, 3);
}

/* Pushes the names, tensors, meta and checksum_verified of a loaded file and frees it (also on error). */
static int push_loaded(lua_State *L, const char *name, lt_st_file *f) {
  lt_ctx *c = L_CTX(L);
  char err[1024];
  /* check dtypes and ranks first, so no error is raised with tensors half built */
  for (size_t i = 0; i < f->ntensors; i++) {
    const lt_st_tensor *s = &f->tensors[i];
    if (strcmp(s->dtype, "F32") && strcmp(s->dtype, "F64") && strcmp(s->dtype, "I64")) {
      snprintf(err, sizeof err, "load: %s: tensor '%s' has dtype %s; lutra reads F32, F64 and I64 tensors", name,
               s->name, s->dtype);
      lt_st_free(f);
      lua_pushstring(L, err);
      return lua_error(L);
    }
    if (s->ndim > LT_MAX_DIM) {
      snprintf(err, sizeof err, "load: %s: tensor '%s' has %d dimensions; lutra tensors have at most %d", name, s->name,
               s->ndim, LT_MAX_DIM);
      lt_st_free(f);
      lua_pushstring(L, err);
      return lua_error(L);
    }
  }
  lua_createtable(L, (int)f->ntensors, 0);
  int names = lua_gettop(L);
  lua_createtable(L, 0, (int)f->ntensors);
  int tensors = lua_gettop(L);
  for (size_t i = 0; i < f->ntensors; i++) {
    const lt_st_tensor *s = &f->tensors[i];
    lt_dtype dt = !strcmp(s->dtype, "I64") ? LT_I64 : !strcmp(s->dtype, "F64") ? LT_F64 : LT_F32;
    lt_tensor *t = lt_tensor_new(c, dt, s->ndim, s->shape);
    if (!t) {
      snprintf(err, sizeof err, "load: %s: %s", name, c->err);
      lt_st_free(f);
      lua_pushstring(L, err);
      return lua_error(L);
    }
    if (s->nbytes) memcpy(t->storage->data, s->data, s->nbytes);
    lua_pushstring(L, s->name);
    lua_pushvalue(L, -1);
    lua_rawseti(L, names, (int)i + 1);
    l_push(L, t); /* takes the reference; t is not NULL here */
    lua_rawset(L, tensors);
  }
  lua_createtable(L, 0, (int)f->nmeta);
  for (size_t i = 0; i < f->nmeta; i++) {
    lua_pushstring(L, f->meta[i].value);
    lua_setfield(L, -2, f->meta[i].key);
  }
  lua_pushboolean(L, f->checksum_verified);
  lt_st_free(f);
  return 4;
}

static int l_io_load(lua_State *L) {
  const char *path = l_checkstring(L, 1);
  lt_st_file f;
  char err[1024];
  if (lt_st_load(path, &f, err, sizeof err)) {
    lua_pushstring(L, err);
    return lua_error(L);
  }
  return push_loaded(L, path, &f);
}

/* load_bytes(s[, name]) -> as load; messages say "load: <name>: ..." (default "(bytes)"). */
static int l_io_load_bytes(lua_State *L) {
  size_t len;
  const char *s = l_checklstring(L, 1, &len);
  const char *name = lua_isnoneornil(L, 2) ? "(bytes)" : l_checkstring(L, 2);
  lt_st_file f;
  char err[1024];
  if (lt_st_load_mem(name, s, len, &f, err, sizeof err)) { /* f points into s, which the stack holds */
    lua_pushstring(L, err);
    return lua_error(L);
  }
  return push_loaded(L, name, &f);
}

static int l_io_write_atomic(lua_State *L) {
  const char *path = l_checkstring(L, 1);
  size_t len;
  const char *s = l_checklstring(L, 2, &len);
  lt_chunk ch = { s, len };
  char err[1024];
  if (lt_file_write_atomic("write", path, &ch, 1, err, sizeof err)) {
    lua_pushstring(L, err);
    return lua_error(L);
  }
  return 0;
}

static int l_io_read_all(lua_State *L) {
  const char *path = l_checkstring(L, 1);
  void *buf;
  size_t len;
  char err[1024];
  if (lt_file_read_all("read", path, &buf, &len, err, sizeof err)) {
    lua_pushstring(L, err);
    return lua_error(L);
  }
  lua_pushlstring(L, buf, len);
  lt_file_free(buf);
  return 1;
}

static int l_io_mkdirs(lua_State *L) {
  size_t len;
  const char *path = l_checklstring(L, 1, &len);
  if (len == 0 || len >= 4096) return l_errorf(L, "mkdir: '%s': invalid path", path);
  char buf[4096];
  memcpy(buf, path, len + 1);
  for (size_t i = 1; i <= len; i++) {
    if (buf[i] != '/' && buf[i] != 0) continue;
    char saved = buf[i];
    buf[i] = 0;
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
      int e = errno;
      return l_errorf(L, "mkdir: %s: %s", buf, strerror(e));
    }
    buf[i] = saved;
  }
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
    return l_errorf(L, "mkdir: %s: exists and is not a directory", path);
  return 0;
}

static int l_io_listdir(lua_State *L) {
  const char *path = l_checkstring(L, 1);
  DIR *d = opendir(path);
  if (!d) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", path, strerror(errno));
    return 2;
  }
  lua_newtable(L);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    lua_pushstring(L, e->d_name); /* may raise on OOM only; the DIR leaks then, as any C buffer would */
    lua_rawseti(L, -2, ++n);
  }
  closedir(d);
  return 1;
}

static int l_io_stat(lua_State *L) {
  const char *path = l_checkstring(L, 1);
  struct stat st;
  if (stat(path, &st) != 0) return 0;
  lua_createtable(L, 0, 3);
  lua_pushstring(L, S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "dir" : "other");
  lua_setfield(L, -2, "type");
  lua_pushinteger(L, (lua_Integer)st.st_size);
  lua_setfield(L, -2, "size");
  lua_pushnumber(L, (lua_Number)st.st_mtim.tv_sec + 1e-9 * (lua_Number)st.st_mtim.tv_nsec);
  lua_setfield(L, -2, "mtime");
  return 1;
}

static int l_io_writable_dir(lua_State *L) {
  const char *path = l_checkstring(L, 1);
  struct stat st;
  lua_pushboolean(L, stat(path, &st) == 0 && S_ISDIR(st.st_mode) && access(path, W_OK | X_OK) == 0);
  return 1;
}

static int l_io_isatty(lua_State *L) {
  lua_pushboolean(L, isatty((int)l_checkint(L, 1, "isatty", "fd", 0, INT_MAX)) == 1);
  return 1;
}

static int l_io_term_width(lua_State *L) {
  struct winsize ws;
  if (ioctl((int)l_checkint(L, 1, "term_width", "fd", 0, INT_MAX), TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0) return 0;
  lua_pushinteger(L, ws.ws_col);
  return 1;
}

static int l_io_now(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (lua_Number)ts.tv_sec + 1e-9 * (lua_Number)ts.tv_nsec);
  return 1;
}

void l_json_register(lua_State *L);  /* l_json.c: json_decode */
void l_fault_register(lua_State *L); /* l_fault.c: fault_arm, fault_seen (tests) */

void l_io_register(lua_State *L) {
  static const luaL_Reg funcs[] = { { "save", l_io_save },
                                    { "load", l_io_load },
                                    { "save_bytes", l_io_save_bytes },
                                    { "load_bytes", l_io_load_bytes },
                                    { "write_atomic", l_io_write_atomic },
                                    { "read_all", l_io_read_all },
                                    { "mkdirs", l_io_mkdirs },
                                    { "listdir", l_io_listdir },
                                    { "stat", l_io_stat },
                                    { "writable_dir", l_io_writable_dir },
                                    { "isatty", l_io_isatty },
                                    { "term_width", l_io_term_width },
                                    { "now", l_io_now },
                                    { NULL, NULL } };
  lua_newtable(L);
  l_setfuncs(L, funcs);
  l_json_register(L);
  l_fault_register(L);
  lua_setfield(L, -2, "_io");
}
