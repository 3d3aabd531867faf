/*
 * l_thread.c — lt.thread's workers (docs/reference/thread.md): a fresh Lua
 * state with lutra loaded, on an OS thread of its own, running a carried
 * function (l_carry.c), with two message queues to its parent. A worker never
 * calls into its parent's state: everything crosses as a message copied in C.
 * No thread outlives its owner: the worker's handle, when closed or collected
 * (the parent state closing collects it too), stops the worker (a flag, a
 * wake-up of its queue, a count hook that raises in its Lua code) and joins its
 * thread.
 */
#include "l_carry.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lualib.h>

#include "lt_blas.h"
#include "lt_pool.h"

enum { W_RUNNING, W_DONE, W_ERROR };

typedef struct queue {
  l_msg *head, *tail;
} queue;

typedef struct worker {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* on CLOCK_MONOTONIC: timeouts ignore changes of the wall clock */
  queue to_worker, to_parent;
  atomic_int refs; /* the parent's handle and the thread */
  atomic_int stop;
  int finished;       /* the worker's function has ended: its queue to the parent gets
                   nothing more */
  int state;          /* W_* */
  l_msg *result;      /* fn's returns, or the error value when it crosses (a table) */
  char *error, *tb;   /* the error as text and the worker's traceback */
  l_msg *boot;        /* fn and its arguments */
  char *path, *cpath; /* the parent's package.path and package.cpath */
  lua_State *WL;      /* the worker's state while it runs (for the stop hook), under mu */
  int default_dtype;  /* the parent's lt.get_default_dtype() at spawn: the worker starts with it, as a forked
                         PyTorch DataLoader worker keeps torch's default dtype */
  pthread_t th;
  int started, joined, id;
} worker;

typedef struct handle {
  worker *w;
} handle;

#define HANDLE_MT "lutra.thread.worker"

static void queue_put(queue *q, l_msg *m) {
  m->next = NULL;
  if (q->tail) q->tail->next = m;
  else q->head = m;
  q->tail = m;
}
static l_msg *queue_take(queue *q) {
  l_msg *m = q->head;
  if (m) {
    q->head = m->next;
    if (!q->head) q->tail = NULL;
  }
  return m;
}
static void queue_free(queue *q) {
  l_msg *m;
  while ((m = queue_take(q))) l_msg_free(m);
}

static void worker_release(worker *w) {
  if (atomic_fetch_sub(&w->refs, 1) != 1) return;
  queue_free(&w->to_worker);
  queue_free(&w->to_parent);
  l_msg_free(w->result);
  l_msg_free(w->boot);
  free(w->error);
  free(w->tb);
  free(w->path);
  free(w->cpath);
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
  free(w);
}

/* ---- waiting on a queue
 * -------------------------------------------------------------------------- */

static double check_timeout(lua_State *L, int idx, const char *fname) {
  if (lua_isnoneornil(L, idx)) return -1; /* no timeout: wait */
  if (!lua_isnumber(L, idx))
    return l_errorf(L, "%s: the timeout must be a number of seconds, got %s", fname, luaL_typename(L, idx));
  double t = lua_tonumber(L, idx);
  if (!(t >= 0)) return l_errorf(L, "%s: the timeout must be >= 0 seconds, got %g", fname, t);
  return t;
}

/* Waits under w->mu until q has a message, `done` is set, the stop flag is set,
 * or timeout_s passed (< 0: none). Returns the message or NULL. */
static l_msg *wait_take(worker *w, queue *q, const int *done, double timeout_s, int stoppable) {
  struct timespec until;
  if (timeout_s > 0) {
    clock_gettime(CLOCK_MONOTONIC, &until);
    double s = (double)until.tv_sec + until.tv_nsec * 1e-9 + timeout_s;
    if (s > 1e15) s = 1e15;
    until.tv_sec = (time_t)s;
    until.tv_nsec = (long)((s - (double)until.tv_sec) * 1e9);
  }
  for (;;) {
    l_msg *m = queue_take(q);
    if (m || *done || (stoppable && atomic_load(&w->stop)) || timeout_s == 0) return m;
    if (timeout_s < 0) pthread_cond_wait(&w->cv, &w->mu);
    else if (pthread_cond_timedwait(&w->cv, &w->mu, &until) == ETIMEDOUT) return queue_take(q);
  }
}

/* decodes m (freed whatever happens: it sits in a userdata with __gc while
 * decoding) */
static int msg_box_gc(lua_State *L) {
  l_msg **b = lua_touserdata(L, 1);
  l_msg_free(*b);
  *b = NULL;
  return 0;
}
static int push_msg(lua_State *L, l_msg *m, const char *fname) {
  l_msg **b = lua_newuserdata(L, sizeof *b);
  *b = m;
  lua_newtable(L);
  lua_pushcfunction(L, msg_box_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  int box = lua_gettop(L);
  int n = l_carry_decode(L, m, fname);
  l_msg_free(m);
  *b = NULL;
  lua_remove(L, box);
  return n;
}

static int receive_from(lua_State *L, worker *w, queue *q, const int *done, double timeout_s, int in_worker,
                        const char *fname) {
  pthread_mutex_lock(&w->mu);
  l_msg *m = wait_take(w, q, done, timeout_s, in_worker);
  int closed = !m && *done;
  pthread_mutex_unlock(&w->mu);
  if (!m && in_worker && atomic_load(&w->stop)) return l_errorf(L, "lt.thread: stopped by the parent");
  if (!m) {
    lua_pushnil(L);
    lua_pushstring(L, closed ? "closed" : "timeout");
    return 2;
  }
  return push_msg(L, m, fname);
}

static void send_to(worker *w, queue *q, l_msg *m) {
  pthread_mutex_lock(&w->mu);
  queue_put(q, m);
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

/* ---- the worker's thread
 * ------------------------------------------------------------------------ */

static const char worker_key = 0; /* registry: the worker this state runs (light userdata) */

static worker *current_worker(lua_State *L) {
  lua_pushlightuserdata(L, (void *)&worker_key);
  lua_rawget(L, LUA_REGISTRYINDEX);
  worker *w = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return w;
}

static void stop_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  luaL_error(L, "lt.thread: stopped by the parent");
}

/* The worker a private entry of a worker's state is given: only lt.thread's boot code calls them, with the worker
 * as a light userdata; anything else (a tensor, a table from a user who found the name) is an error, not a worker
 * struct read from foreign memory. */
static worker *worker_arg(lua_State *L, const char *fname) {
  if (lua_type(L, 1) != LUA_TLIGHTUSERDATA)
    l_errorf(L, "%s: lutra's internal entry for lt.thread's workers, not for calls (got %s)", fname,
             luaL_typename(L, 1));
  return lua_touserdata(L, 1);
}

/* core._thread_run(w): in the worker's state, with lutra loaded: decodes fn and
 * its arguments, calls fn and keeps its returns as the worker's result */
static int l_thread_run(lua_State *L) {
  worker *w = worker_arg(L, "_thread_run");
  lua_pushlightuserdata(L, (void *)&worker_key);
  lua_pushlightuserdata(L, w);
  lua_rawset(L, LUA_REGISTRYINDEX);
  L_STATE(L)->ctx.num_threads = 1; /* a worker starts with one compute thread
                                      (the host's fills the other core) */
  L_STATE(L)->ctx.default_dtype = w->default_dtype;
  lua_settop(L, 0);
  int n = l_carry_decode(L, w->boot, "lt.thread.spawn");
  lua_call(L, n - 1, LUA_MULTRET);
  l_msg *r = l_carry_encode(L, 1, lua_gettop(L), "lt.thread", "return value #%d");
  pthread_mutex_lock(&w->mu);
  w->result = r;
  w->state = W_DONE;
  pthread_mutex_unlock(&w->mu);
  return 0;
}

/* core._thread_fail(w, err): the error value kept as a message when it is a
 * table that crosses */
static int l_thread_fail(lua_State *L) {
  worker *w = worker_arg(L, "_thread_fail");
  l_msg *m = l_carry_encode(L, 2, 1, "lt.thread", NULL);
  pthread_mutex_lock(&w->mu);
  w->result = m;
  pthread_mutex_unlock(&w->mu);
  return 0;
}

/* the message handler of the worker's pcall: {error, traceback} */
static int worker_traceback(lua_State *L) {
  lua_createtable(L, 2, 0);
  lua_pushvalue(L, 1);
  lua_rawseti(L, -2, 1);
  luaL_traceback(L, L, NULL, 1);
  lua_rawseti(L, -2, 2);
  return 1;
}

static int worker_boot(lua_State *L) {
  worker *w = lua_touserdata(L, 1);
  lua_getglobal(L, "package");
  lua_pushstring(L, w->path);
  lua_setfield(L, -2, "path");
  lua_pushstring(L, w->cpath);
  lua_setfield(L, -2, "cpath");
  lua_pop(L, 1);
  /* lutra whole, not only its core: a name carried as "lutra.core.x" may be one that lutra's Lua layer adds to
   * the core table (the same table as lutra's) */
  lua_getglobal(L, "require");
  lua_pushstring(L, "lutra");
  lua_call(L, 1, 0);
  lua_getglobal(L, "require");
  lua_pushstring(L, "lutra.core");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "_thread_run");
  lua_pushlightuserdata(L, w);
  lua_call(L, 1, 0);
  return 0;
}

static void worker_failed(lua_State *L, worker *w) {
  /* the handler's {error, traceback}; a bare message when the handler itself
   * failed */
  int top = lua_gettop(L);
  if (lua_istable(L, top)) {
    lua_rawgeti(L, top, 1);
    lua_rawgeti(L, top, 2);
  } else {
    lua_pushvalue(L, top);
    lua_pushnil(L);
  }
  if (lua_istable(L, top + 1)) { /* a structured error crosses as a table when it can */
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "loaded");
    lua_getfield(L, -1, "lutra.core");
    if (lua_istable(L, -1)) {
      lua_getfield(L, -1, "_thread_fail");
      lua_pushlightuserdata(L, w);
      lua_pushvalue(L, top + 1);
      lua_pcall(L, 2, 0, 0);
    }
    lua_settop(L, top + 2);
  }
  const char *msg = lua_tostring(L, top + 1), *tb = lua_tostring(L, top + 2);
  pthread_mutex_lock(&w->mu);
  w->state = W_ERROR;
  w->error = strdup(msg ? msg : lua_istable(L, top + 1) ? "(an error table that cannot cross)" : "(no message)");
  w->tb = tb ? strdup(tb) : NULL;
  pthread_mutex_unlock(&w->mu);
  lua_settop(L, top - 1);
}

/* What makes lutra loadable in a worker's new state (l_module.c's l_preload_modules, handed over at registration:
 * the module opener registers this file, so this file does not call back into it). Set before any worker starts,
 * and again (the same function) by every state that opens lutra, maybe in another thread: atomic. */
typedef void (*opener_fn)(lua_State *L);
static _Atomic(opener_fn) open_lutra;

static void *worker_main(void *arg) {
  worker *w = arg;
  lt_blas_serial_begin(); /* while several states live, OpenBLAS stays at one
                             thread (their GEMMs would fight) */
  lua_State *L = luaL_newstate();
  if (!L) {
    pthread_mutex_lock(&w->mu);
    w->state = W_ERROR;
    w->error = strdup("cannot create a Lua state (out of memory)");
    pthread_mutex_unlock(&w->mu);
  } else {
    luaL_openlibs(L);
    atomic_load_explicit(&open_lutra, memory_order_relaxed)(L);
    pthread_mutex_lock(&w->mu);
    w->WL = L;
    if (atomic_load(&w->stop)) lua_sethook(L, stop_hook, LUA_MASKCOUNT, 1);
    pthread_mutex_unlock(&w->mu);
    lua_pushcfunction(L, worker_traceback);
    lua_pushcfunction(L, worker_boot);
    lua_pushlightuserdata(L, w);
    int status = lua_pcall(L, 1, 0, 1);
    pthread_mutex_lock(&w->mu);
    w->WL = NULL; /* the parent sets no more hooks */
    pthread_mutex_unlock(&w->mu);
    lua_sethook(L, NULL, 0, 0);
    if (status) worker_failed(L, w);
    lua_close(L); /* its own workers are stopped and joined here */
  }
  pthread_mutex_lock(&w->mu);
  w->finished = 1;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  lt_blas_serial_end();
  worker_release(w);
  return NULL;
}

/* ---- the parent's side
 * ----------------------------------------------------------------------------
 */

static void stop_and_join(worker *w) {
  if (!w->started || w->joined) return;
  atomic_store(&w->stop, 1);
  pthread_mutex_lock(&w->mu);
  if (w->WL && !w->finished) lua_sethook(w->WL, stop_hook, LUA_MASKCOUNT, 1);
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->th, NULL);
  w->joined = 1;
}

static void wait_join(worker *w) {
  if (!w->started || w->joined) return;
  pthread_join(w->th, NULL);
  w->joined = 1;
}

static const char counter_key = 0; /* registry: workers spawned by this state */

static char *package_string(lua_State *L, const char *field) {
  lua_getglobal(L, "package");
  const char *s = NULL;
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, field);
    s = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  char *r = strdup(s ? s : "");
  lua_pop(L, 1);
  return r;
}

/* core._thread_spawn(fn, ...) -> worker */
static int l_thread_spawn(lua_State *L) {
  if (lua_type(L, 1) != LUA_TFUNCTION || lua_iscfunction(L, 1))
    return l_errorf(L, "lt.thread.spawn: argument #1 must be a Lua function, got %s",
                    lua_type(L, 1) == LUA_TFUNCTION ? "a C function" : luaL_typename(L, 1));
  l_msg *boot = l_carry_encode(L, 1, lua_gettop(L), "lt.thread.spawn", NULL);
  handle *h = lua_newuserdata(L, sizeof *h);
  h->w = NULL;
  luaL_getmetatable(L, HANDLE_MT);
  lua_setmetatable(L, -2);
  worker *w = calloc(1, sizeof *w);
  if (!w) {
    l_msg_free(boot);
    return l_errorf(L, "lt.thread.spawn: out of memory");
  }
  pthread_mutex_init(&w->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&w->cv, &ca);
  pthread_condattr_destroy(&ca);
  atomic_init(&w->refs, 1);
  atomic_init(&w->stop, 0);
  w->boot = boot;
  w->default_dtype = L_CTX(L)->default_dtype;
  w->path = package_string(L, "path");
  w->cpath = package_string(L, "cpath");
  h->w = w;
  lua_pushlightuserdata(L, (void *)&counter_key);
  lua_rawget(L, LUA_REGISTRYINDEX);
  w->id = (int)lua_tointeger(L, -1) + 1;
  lua_pop(L, 1);
  lua_pushlightuserdata(L, (void *)&counter_key);
  lua_pushinteger(L, w->id);
  lua_rawset(L, LUA_REGISTRYINDEX);
  atomic_fetch_add(&w->refs, 1); /* the thread's */
  sigset_t old;
  lt_spawn_mask(&old);
  int bad = pthread_create(&w->th, NULL, worker_main, w);
  lt_spawn_unmask(&old);
  if (bad) {
    atomic_fetch_sub(&w->refs, 1);
    return l_errorf(L, "lt.thread.spawn: cannot start a thread (%s)", strerror(bad));
  }
  w->started = 1;
  return 1;
}

static handle *test_handle(lua_State *L, int idx) {
  handle *h = lua_touserdata(L, idx);
  if (!h || !lua_getmetatable(L, idx)) return NULL;
  luaL_getmetatable(L, HANDLE_MT);
  int same = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return same ? h : NULL;
}

static worker *check_worker(lua_State *L, const char *fname) {
  handle *h = test_handle(L, 1);
  if (!h) l_errorf(L, "%s: expected a worker (lt.thread.spawn), got %s", fname, luaL_typename(L, 1));
  if (!h->w) l_errorf(L, "%s: the worker was closed", fname);
  return h->w;
}

static int w_send(lua_State *L) {
  worker *w = check_worker(L, "send");
  if (lua_gettop(L) < 2) lua_settop(L, 2);
  l_msg *m = l_carry_encode(L, 2, 1, "send", NULL);
  pthread_mutex_lock(&w->mu);
  int done = w->finished;
  pthread_mutex_unlock(&w->mu);
  if (done) {
    l_msg_free(m);
    lua_pushnil(L);
    lua_pushstring(L, "closed");
    return 2;
  }
  send_to(w, &w->to_worker, m);
  lua_pushboolean(L, 1);
  return 1;
}

static int w_receive(lua_State *L) {
  worker *w = check_worker(L, "receive");
  double t = check_timeout(L, 2, "receive");
  return receive_from(L, w, &w->to_parent, &w->finished, t, 0, "receive");
}

static int w_join(lua_State *L) {
  worker *w = check_worker(L, "join");
  wait_join(w);
  if (w->state == W_ERROR) {
    if (w->result) { /* a table error crossed: raised as it was */
      l_carry_decode(L, w->result, "join");
      return lua_error(L);
    }
    const char *tb = w->tb ? w->tb : "";
    if (!strncmp(tb, "stack traceback:", 16)) tb += 16;
    return l_errorf(L, "lt.thread: worker %d failed: %s\nworker traceback:%s", w->id, w->error ? w->error : "?", tb);
  }
  return w->result ? l_carry_decode(L, w->result, "join") : 0;
}

static int w_status(lua_State *L) {
  worker *w = check_worker(L, "status");
  pthread_mutex_lock(&w->mu);
  int st = w->finished ? w->state : W_RUNNING;
  pthread_mutex_unlock(&w->mu);
  lua_pushstring(L, st == W_DONE ? "done" : st == W_ERROR ? "error" : "running");
  return 1;
}

static int w_id(lua_State *L) {
  lua_pushinteger(L, check_worker(L, "id")->id);
  return 1;
}

/* w:close() and __gc: stop, join, let go */
static int w_close(lua_State *L) {
  handle *h = test_handle(L, 1);
  if (!h || !h->w) return 0;
  worker *w = h->w;
  h->w = NULL;
  stop_and_join(w);
  worker_release(w);
  return 0;
}

static int w_tostring(lua_State *L) {
  handle *h = test_handle(L, 1);
  if (h && h->w) lua_pushfstring(L, "lt.thread worker %d", h->w->id);
  else lua_pushstring(L, "lt.thread worker (closed)");
  return 1;
}

/* ---- the worker's side: lt.thread.parent
 * ---------------------------------------------------------- */

static int l_thread_psend(lua_State *L) {
  worker *w = current_worker(L);
  if (!w) return l_errorf(L, "lt.thread.parent: not in a worker");
  if (lua_gettop(L) < 1) lua_settop(L, 1);
  if (atomic_load(&w->stop)) return l_errorf(L, "lt.thread: stopped by the parent");
  send_to(w, &w->to_parent, l_carry_encode(L, 1, 1, "send", NULL));
  lua_pushboolean(L, 1);
  return 1;
}

static const int never = 0;

static int l_thread_preceive(lua_State *L) {
  worker *w = current_worker(L);
  if (!w) return l_errorf(L, "lt.thread.parent: not in a worker");
  double t = check_timeout(L, 1, "receive");
  return receive_from(L, w, &w->to_worker, &never, t, 1, "receive");
}

/* core._thread_id() -> this worker's id, or nil in a state that is not a worker
 */
static int l_thread_id(lua_State *L) {
  worker *w = current_worker(L);
  if (!w) return 0;
  lua_pushinteger(L, w->id);
  return 1;
}

void l_thread_register(lua_State *L, void (*preload)(lua_State *L)) {
  atomic_store_explicit(&open_lutra, preload, memory_order_relaxed);
  /* The methods are set again each time lutra's core is opened in this state (busted reloads it between spec
   * files): they are closures over the tensor metatable of this opening, which l_totensor compares with, so
   * methods kept from an earlier opening would take this opening's tensors for foreign userdata. */
  luaL_newmetatable(L, HANDLE_MT);
  static const luaL_Reg methods[] = { { "send", w_send },     { "receive", w_receive }, { "join", w_join },
                                      { "status", w_status }, { "close", w_close },     { "id", w_id },
                                      { NULL, NULL } };
  lua_newtable(L);
  l_setmethods(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, w_close);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, w_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  static const luaL_Reg funcs[] = { { "_thread_spawn", l_thread_spawn },
                                    { "_thread_run", l_thread_run },
                                    { "_thread_fail", l_thread_fail },
                                    { "_thread_psend", l_thread_psend },
                                    { "_thread_preceive", l_thread_preceive },
                                    { "_thread_id", l_thread_id },
                                    { NULL, NULL } };
  l_setfuncs(L, funcs);
}
