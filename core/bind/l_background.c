/*
 * l_background.c — the C half of lt.background (lua/lutra/background.lua, docs/reference/background.md): the
 * job record the host and the job's state share. The job runs in an lt.thread worker; both states hold a box
 * of the same record (one reference each): its status (atomics written by the job at each step boundary), the
 * stop flag its fit loop checks, the "wanted" flag by which the host asks for a publication, and the double
 * buffer of weights (lt_snapshot.h) with the layout of the job's state dict. The worker finds the record by
 * its id in a process-wide list (a number is all that crosses to the worker; a pointer that Lua code could
 * forge never does).
 */
#include "l_background.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lt_snapshot.h"

enum { BG_STARTING, BG_RUNNING, BG_DONE, BG_STOPPED, BG_ERROR };
static const char *const state_names[] = { "starting", "running", "done", "stopped", "error", NULL };

typedef struct bg_job {
  atomic_int refs;
  int id;
  atomic_int stop;   /* the fit loop ends at the next batch boundary (l_background_stop_flag) */
  atomic_int wanted; /* the host asked for weights: publish at the next step boundary */
  atomic_int state;  /* BG_* */
  _Atomic int64_t global_step, current_epoch;
  pthread_mutex_t mu; /* error; the layout and snapshot are set once under it */
  char *error;        /* the job's error with its traceback (BG_ERROR) */
  /* the layout of the job's state dict, set once by the job (under mu) before `snap` is stored (release):
   * whoever loads a non-NULL `snap` (acquire) may read the layout without the lock */
  _Atomic(lt_snapshot *) snap;
  int n;
  char **names;
  lt_dtype *dtype;
  int *ndim;
  int64_t (*shape)[LT_MAX_DIM];
  size_t *nbytes;
  struct bg_job *next; /* the process-wide list (attach by id) */
} bg_job;

typedef struct bg_box {
  bg_job *j;
} bg_box;

#define JOB_MT "lutra.background.job"

static pthread_mutex_t jobs_mu = PTHREAD_MUTEX_INITIALIZER;
static bg_job *jobs;
static int last_id;

static void job_release(bg_job *j) {
  pthread_mutex_lock(&jobs_mu);
  if (atomic_fetch_sub(&j->refs, 1) != 1) {
    pthread_mutex_unlock(&jobs_mu);
    return;
  }
  for (bg_job **p = &jobs; *p; p = &(*p)->next)
    if (*p == j) {
      *p = j->next;
      break;
    }
  pthread_mutex_unlock(&jobs_mu);
  lt_snapshot_free(atomic_load(&j->snap));
  for (int i = 0; i < j->n; i++) free(j->names ? j->names[i] : NULL);
  free(j->names);
  free(j->dtype);
  free(j->ndim);
  free(j->shape);
  free(j->nbytes);
  free(j->error);
  pthread_mutex_destroy(&j->mu);
  free(j);
}

static void push_box(lua_State *L, bg_job *j) {
  bg_box *b = lua_newuserdata(L, sizeof *b);
  b->j = j;
  luaL_getmetatable(L, JOB_MT);
  lua_setmetatable(L, -2);
}

/* the box at idx, or NULL (luaL_testudata is not in Lua 5.1) */
static bg_box *test_box(lua_State *L, int idx) {
  bg_box *b = lua_touserdata(L, idx);
  if (!b || !lua_getmetatable(L, idx)) return NULL;
  luaL_getmetatable(L, JOB_MT);
  int same = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return same ? b : NULL;
}

static bg_job *check_job(lua_State *L, const char *fname) {
  bg_box *b = test_box(L, 1);
  if (!b || !b->j) l_errorf(L, "%s: expected a background job, got %s", fname, luaL_typename(L, 1));
  return b->j;
}

static int job_gc(lua_State *L) {
  bg_box *b = test_box(L, 1);
  if (b && b->j) {
    job_release(b->j);
    b->j = NULL;
  }
  return 0;
}

/* core._bg_new() -> job, id (the host's box) */
static int l_bg_new(lua_State *L) {
  bg_job *j = calloc(1, sizeof *j);
  if (!j) return l_errorf(L, "lt.background: out of memory");
  atomic_init(&j->refs, 1);
  pthread_mutex_init(&j->mu, NULL);
  pthread_mutex_lock(&jobs_mu);
  j->id = ++last_id;
  j->next = jobs;
  jobs = j;
  pthread_mutex_unlock(&jobs_mu);
  push_box(L, j);
  lua_pushinteger(L, j->id);
  return 2;
}

static const char stop_key = 0; /* registry: the box of the job this state runs */

/* core._bg_attach(id) -> job (in the job's state; its fit loops stop on the job's flag from now on) */
static int l_bg_attach(lua_State *L) {
  lua_Integer id = luaL_checkinteger(L, 1);
  pthread_mutex_lock(&jobs_mu);
  bg_job *j = jobs;
  while (j && j->id != id) j = j->next;
  if (j) atomic_fetch_add(&j->refs, 1);
  pthread_mutex_unlock(&jobs_mu);
  if (!j) return l_errorf(L, "lt.background: job %d no longer exists (its handle was collected)", (int)id);
  push_box(L, j);
  lua_pushlightuserdata(L, (void *)&stop_key);
  lua_pushvalue(L, -2);
  lua_rawset(L, LUA_REGISTRYINDEX);
  return 1;
}

const atomic_int *l_background_stop_flag(lua_State *L) {
  lua_pushlightuserdata(L, (void *)&stop_key);
  lua_rawget(L, LUA_REGISTRYINDEX);
  bg_box *b = test_box(L, -1);
  lua_pop(L, 1);
  return b && b->j ? &b->j->stop : NULL;
}

/* A contiguous tensor at index i of the list at idx, or an error naming the key. */
static lt_tensor *list_tensor(lua_State *L, int idx, int i, const char *fname, const char *name) {
  lua_rawgeti(L, idx, i);
  lt_tensor *t = l_totensor(L, -1);
  lua_pop(L, 1); /* the list keeps it */
  if (!t) l_errorf(L, "%s: key '%s' is not a tensor", fname, name);
  if (!lt_is_contiguous(t)) l_errorf(L, "%s: key '%s' is not contiguous", fname, name);
  return t;
}

static size_t tensor_bytes(const lt_tensor *t) { return (size_t)lt_numel(t) * lt_dtype_size(t->dtype); }
static void *tensor_data(const lt_tensor *t) {
  return (char *)t->storage->data + (size_t)t->offset * lt_dtype_size(t->dtype);
}

/* job:_layout(names, tensors): the job's state dict, once, before the first publication */
static int l_bg_layout(lua_State *L) {
  bg_job *j = check_job(L, "lt.background");
  luaL_checktype(L, 2, LUA_TTABLE);
  luaL_checktype(L, 3, LUA_TTABLE);
  if (atomic_load(&j->snap)) return l_errorf(L, "lt.background: the layout is set already");
  int n = (int)lua_objlen(L, 2);
  char **names = calloc((size_t)n + 1, sizeof *names);
  lt_dtype *dtype = calloc((size_t)n + 1, sizeof *dtype);
  int *ndim = calloc((size_t)n + 1, sizeof *ndim);
  int64_t(*shape)[LT_MAX_DIM] = calloc((size_t)n + 1, sizeof *shape);
  size_t *nbytes = calloc((size_t)n + 1, sizeof *nbytes);
  int ok = names && dtype && ndim && shape && nbytes;
  for (int i = 0; ok && i < n; i++) {
    lua_rawgeti(L, 2, i + 1);
    const char *name = lua_tostring(L, -1);
    names[i] = strdup(name ? name : "?");
    lua_pop(L, 1);
    lua_rawgeti(L, 3, i + 1);
    lt_tensor *t = l_totensor(L, -1);
    lua_pop(L, 1);
    ok = names[i] && t;
    if (!ok) break;
    dtype[i] = t->dtype;
    ndim[i] = t->ndim;
    memcpy(shape[i], t->shape, sizeof shape[i]);
    nbytes[i] = tensor_bytes(t);
  }
  lt_snapshot *s = ok ? lt_snapshot_new(n, nbytes) : NULL;
  if (!s) {
    for (int i = 0; names && i < n; i++) free(names[i]);
    free(names);
    free(dtype);
    free(ndim);
    free(shape);
    free(nbytes);
    return l_errorf(L, "lt.background: cannot keep the weights' layout (out of memory or not tensors)");
  }
  pthread_mutex_lock(&j->mu);
  j->n = n;
  j->names = names;
  j->dtype = dtype;
  j->ndim = ndim;
  j->shape = shape;
  j->nbytes = nbytes;
  atomic_store_explicit(&j->snap, s, memory_order_release);
  pthread_mutex_unlock(&j->mu);
  return 0;
}

/* job:_publish(tensors, step) -> true, or false when the host holds the only free buffer (next time) */
static int l_bg_publish(lua_State *L) {
  bg_job *j = check_job(L, "lt.background");
  luaL_checktype(L, 2, LUA_TTABLE);
  int64_t step = (int64_t)luaL_checknumber(L, 3);
  lt_snapshot *snap = atomic_load_explicit(&j->snap, memory_order_acquire);
  if (!snap) return l_errorf(L, "lt.background: publish before the layout");
  int b = lt_snapshot_write_begin(snap);
  if (b < 0) {
    lua_pushboolean(L, 0);
    return 1;
  }
  for (int i = 0; i < j->n; i++) {
    lt_tensor *t = list_tensor(L, 2, i + 1, "lt.background", j->names[i]);
    if (tensor_bytes(t) != j->nbytes[i] || t->dtype != j->dtype[i])
      return l_errorf(L, "lt.background: the job's key '%s' changed its shape or dtype during the fit", j->names[i]);
    memcpy(lt_snapshot_block(snap, b, i), tensor_data(t), j->nbytes[i]);
  }
  atomic_store(&j->wanted, 0);
  lt_snapshot_publish(snap, b, step);
  lua_pushboolean(L, 1);
  return 1;
}

/* job:_step(global_step, current_epoch) -> the host wants weights (at each step boundary, in the job) */
static int l_bg_step(lua_State *L) {
  bg_job *j = check_job(L, "lt.background");
  atomic_store(&j->global_step, (int64_t)luaL_checknumber(L, 2));
  atomic_store(&j->current_epoch, (int64_t)luaL_checknumber(L, 3));
  lua_pushboolean(L, atomic_load(&j->wanted));
  return 1;
}

/* job:_set_state(state[, error]) */
static int l_bg_set_state(lua_State *L) {
  bg_job *j = check_job(L, "lt.background");
  int st = luaL_checkoption(L, 2, NULL, state_names);
  if (st == BG_ERROR) {
    const char *e = luaL_optstring(L, 3, "(no message)");
    pthread_mutex_lock(&j->mu);
    if (!j->error) j->error = strdup(e);
    pthread_mutex_unlock(&j->mu);
  }
  atomic_store(&j->state, st);
  return 0;
}

/* job:_stop(): the fit loop ends at its next batch boundary */
static int l_bg_stop(lua_State *L) {
  atomic_store(&check_job(L, "stop")->stop, 1);
  return 0;
}

/* job:_status([t]) -> t: {state, global_step, current_epoch, error} (t filled in place when given) */
static int l_bg_status(lua_State *L) {
  bg_job *j = check_job(L, "status");
  if (lua_istable(L, 2)) lua_settop(L, 2);
  else if (lua_isnoneornil(L, 2)) {
    lua_settop(L, 1);
    lua_createtable(L, 0, 4);
  } else return l_errorf(L, "status: argument #1 must be a table to fill, got %s", luaL_typename(L, 2));
  int st = atomic_load(&j->state);
  lua_pushstring(L, state_names[st]);
  lua_setfield(L, 2, "state");
  lua_pushinteger(L, (lua_Integer)atomic_load(&j->global_step));
  lua_setfield(L, 2, "global_step");
  lua_pushinteger(L, (lua_Integer)atomic_load(&j->current_epoch));
  lua_setfield(L, 2, "current_epoch");
  if (st == BG_ERROR) {
    pthread_mutex_lock(&j->mu);
    lua_pushstring(L, j->error);
    pthread_mutex_unlock(&j->mu);
  } else lua_pushnil(L);
  lua_setfield(L, 2, "error");
  return 1;
}

/* job:_layout_get() -> {{name=, dtype=, shape={...}}, ...}, or nil before the job published its layout */
static int l_bg_layout_get(lua_State *L) {
  bg_job *j = check_job(L, "load_into");
  if (!atomic_load_explicit(&j->snap, memory_order_acquire)) return 0;
  lua_createtable(L, j->n, 0);
  for (int i = 0; i < j->n; i++) {
    lua_createtable(L, 0, 3);
    lua_pushstring(L, j->names[i]);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, lt_dtype_name(j->dtype[i]));
    lua_setfield(L, -2, "dtype");
    lua_createtable(L, j->ndim[i], 0);
    for (int d = 0; d < j->ndim[i]; d++) {
      lua_pushinteger(L, (lua_Integer)j->shape[i][d]);
      lua_rawseti(L, -2, d + 1);
    }
    lua_setfield(L, -2, "shape");
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int push_starting(lua_State *L) {
  lua_pushnil(L);
  lua_pushliteral(L, "starting");
  return 2;
}

/* job:_ask() -> nil, "starting": asks for weights before the host has matched a model (no layout yet) */
static int l_bg_ask(lua_State *L) {
  atomic_store(&check_job(L, "load_into")->wanted, 1);
  return push_starting(L);
}

/* job:_load(tensors) -> the snapshot's global_step, or nil, "starting" before the first publication. The
 * tensors (the host's, in the layout's order, matched by background.lua) get the latest snapshot; asks the
 * job for a fresh one at its next step boundary. Allocates nothing. */
static int l_bg_load(lua_State *L) {
  bg_job *j = check_job(L, "load_into");
  luaL_checktype(L, 2, LUA_TTABLE);
  atomic_store(&j->wanted, 1);
  lt_snapshot *snap = atomic_load_explicit(&j->snap, memory_order_acquire);
  if (!snap) return push_starting(L);
  if ((int)lua_objlen(L, 2) != j->n) return l_errorf(L, "load_into: expected %d tensors", j->n);
  for (int i = 0; i < j->n; i++) { /* checked before taking the buffer: an error leaves nothing held */
    lt_tensor *t = list_tensor(L, 2, i + 1, "load_into", j->names[i]);
    if (tensor_bytes(t) != j->nbytes[i] || t->dtype != j->dtype[i])
      return l_errorf(L, "load_into: key '%s': the model's tensor changed its shape or dtype", j->names[i]);
  }
  int64_t step = 0;
  int b = lt_snapshot_acquire(snap, &step);
  if (b < 0) return push_starting(L);
  for (int i = 0; i < j->n; i++) {
    lua_rawgeti(L, 2, i + 1);
    lt_tensor *t = l_totensor(L, -1);
    lua_pop(L, 1);
    memcpy(tensor_data(t), lt_snapshot_block(snap, b, i), j->nbytes[i]);
    lt_mark_modified(t);
  }
  lt_snapshot_release(snap, b);
  lua_pushinteger(L, (lua_Integer)step);
  return 1;
}

void l_background_register(lua_State *L) {
  luaL_newmetatable(L, JOB_MT);
  static const luaL_Reg methods[] = { { "_layout", l_bg_layout },
                                      { "_publish", l_bg_publish },
                                      { "_step", l_bg_step },
                                      { "_set_state", l_bg_set_state },
                                      { "_stop", l_bg_stop },
                                      { "_status", l_bg_status },
                                      { "_layout_get", l_bg_layout_get },
                                      { "_load", l_bg_load },
                                      { "_ask", l_bg_ask },
                                      { NULL, NULL } };
  lua_newtable(L);
  l_setmethods(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, job_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  static const luaL_Reg funcs[] = { { "_bg_new", l_bg_new }, { "_bg_attach", l_bg_attach }, { NULL, NULL } };
  l_setfuncs(L, funcs);
}
