/*
 * test_states.c — a C host with two lua_States that both load lutra (docs/reference/thread.md): values carried
 * from one state to the other on one thread (core._carry_pack in A, core._carry_unpack in B: a tensor arrives
 * as the same storage, a function with its upvalues, lutra's functions by name), either state closed first
 * with the other still using the shared tensor, and workers of both states (lt.thread) trading tensors, with
 * a worker blocked in receive stopped and joined when its state closes (no thread left: /proc/self/task).
 * Run in the release and ASan builds (tests/run --config asan).
 */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "lt_tensor.h"
#include "lutra.h"

#include "check.h"

static int tasks(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

static lua_State *new_state(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  lutra_preload(L);
  if (luaL_dostring(L, "lt = require 'lutra'; core = require 'lutra.core'")) printf("# %s\n", lua_tostring(L, -1));
  return L;
}

/* runs code in L; returns 1 when it ran, printing the error otherwise */
static int run(lua_State *L, const char *code) {
  if (luaL_dostring(L, code)) {
    printf("# error: %s\n", lua_tostring(L, -1));
    lua_pop(L, 1);
    return 0;
  }
  return 1;
}

static void *global_ptr(lua_State *L, const char *name) {
  lua_getglobal(L, name);
  void *p = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return p;
}

static int global_true(lua_State *L, const char *name) {
  lua_getglobal(L, name);
  int v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

/* A packs, B unpacks; closes `first` (0: A, 1: B) first, then checks the other still reads the tensor */
static void two_states_one_thread(int first) {
  int64_t live0 = lt_tensor_live_count();
  lua_State *A = new_state(), *B = new_state();
  CHECK(run(A, "x = lt.arange(1, 1001):float(); ptr = x:data_ptr(); local k = 2\n"
               "local function twice(v) return v * k end\n"
               "msg = core._carry_pack({x = x, again = x, s = 'a\\0b', f = twice, zeros = lt.zeros, n = 3})"),
        "A packs a table with a tensor, a string with a zero byte, a function with an upvalue, lt.zeros");
  lua_pushlightuserdata(B, global_ptr(A, "msg"));
  lua_setglobal(B, "msg");
  CHECK(run(B, "r = core._carry_unpack(msg); msg = nil; ptr = r.x:data_ptr()\n"
               "ok = r.again == r.x and r.s == 'a\\0b' and r.f(21) == 42 and r.zeros == lt.zeros and r.n == 3\n"
               "  and r.x:requires_grad() == false and r.x:sum():item() == 500500"),
        "B unpacks it");
  CHECK(global_true(B, "ok"), "the values are equal in B, the tensor detached, the function runs with its upvalue");
  CHECK(global_ptr(A, "ptr") == global_ptr(B, "ptr"), "the tensor is the same storage in both states (zero copy)");
  lua_State *other = first == 0 ? B : A;
  lua_close(first == 0 ? A : B);
  CHECK(run(other, "ok = x and x:sum():item() == 500500 or r.x:sum():item() == 500500") && global_true(other, "ok"),
        first == 0 ? "B reads the tensor after A closed" : "A reads the tensor after B closed");
  lua_close(other);
  CHECK(lt_tensor_live_count() == live0, "every tensor freed once both states closed");
}

/* both states spawn workers; a worker gets a tensor from its state and sends back its sum; each state has a
 * worker blocked in receive when it closes */
static void workers_of_two_states(int first) {
  int t0 = tasks();
  lua_State *A = new_state(), *B = new_state();
  const char *code = "x = lt.ones(256, 256)\n"
                     "w = lt.thread.spawn(function()\n"
                     "  local lt = require 'lutra'\n"
                     "  local t = lt.thread.parent:receive()\n"
                     "  lt.thread.parent:send({ sum = t:sum():item(), ptr = t:data_ptr() == nil })\n"
                     "  lt.thread.parent:receive() -- waits until the state closes\n"
                     "end)\n"
                     "w:send(x)\n"
                     "local r = w:receive(10)\n"
                     "ok = r and r.sum == 65536";
  CHECK(run(A, code) && global_true(A, "ok"), "a worker of A sums A's tensor");
  CHECK(run(B, code) && global_true(B, "ok"), "a worker of B sums B's tensor");
  CHECK(tasks() >= t0 + 2, "two worker threads run");
  lua_close(first == 0 ? A : B);
  lua_close(first == 0 ? B : A);
  CHECK(tasks() == t0, "no worker thread left once both states closed (blocked workers stopped and joined)");
}

static void *nothing(void *arg) { return arg; }

int main(void) {
  /* a thread started and joined first: a sanitizer's own background thread, which starts with the first
   * thread, is then in every count taken below */
  pthread_t t;
  if (pthread_create(&t, NULL, nothing, NULL) == 0) pthread_join(t, NULL);
  two_states_one_thread(0);
  two_states_one_thread(1);
  workers_of_two_states(0);
  workers_of_two_states(1);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
