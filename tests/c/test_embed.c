/*
 * test_embed.c — lutra embedded the way a game embeds it (docs/guide-embedding.md): the program creates its own
 * lua_State, routes lutra's memory through its own allocator, opens lutra both ways (lutra_preload +
 * require, and luaopen_lutra), trains with the Trainer (whole fits and run:advance{batches=1} called from
 * C), and checks: the loss, that the allocator saw every buffer and got all of them back after lua_close,
 * that errors reach the host as Lua errors with their messages, that lutra printed nothing on stdout, and
 * lutra_interrupt / lutra_run_active from C.
 *
 * stdout is redirected to a file while lutra runs, so the results are kept and printed at the end:
 * "ok - ..." / "not ok - ..." lines, then "N passed, M failed"; the exit status is 1 when one failed.
 */
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "lutra.h"

/* ---- results, printed once stdout is back ---------------------------------------------------------- */

#define MAX_RESULTS 128
static char results[MAX_RESULTS][256];
static int n_results, passed, failed;

static void record(int ok, int line, const char *fmt, ...) {
  char what[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (ok) passed++;
  else failed++;
  if (n_results < MAX_RESULTS) {
    if (ok) snprintf(results[n_results++], sizeof results[0], "ok - %s", what);
    else snprintf(results[n_results++], sizeof results[0], "not ok - %s (test_embed.c:%d)", what, line);
  }
}
#define CHECK(cond, ...) record((cond) ? 1 : 0, __LINE__, __VA_ARGS__)

/* ---- the host's allocator ----------------------------------------------------------------------------- */

typedef struct counter {
  long long live, peak, allocs, frees, bad_frees;
} counter;

static void *c_alloc(void *ud, size_t size, size_t align) {
  counter *k = ud;
  void *p = NULL;
  if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1) != 0) return NULL;
  k->live += (long long)size;
  k->allocs++;
  if (k->live > k->peak) k->peak = k->live;
  return p;
}

static void c_free(void *ud, void *p, size_t size) {
  counter *k = ud;
  if (!p) { k->bad_frees++; return; }
  k->live -= (long long)size;
  k->frees++;
  free(p);
}

/* ---- helpers ------------------------------------------------------------------------------------------- */

/* Runs a chunk; returns the lua_pcall status and leaves the results (or the
 * error message) on the stack. */
static int run(lua_State *L, const char *code, int nres) {
  int st = luaL_loadstring(L, code);
  if (st != 0) return st;
  return lua_pcall(L, 0, nres, 0);
}

static void print_error(lua_State *L, const char *what) {
  fprintf(stderr, "test_embed: %s: %s\n", what, lua_isstring(L, -1) ? lua_tostring(L, -1) : "(no message)");
}

static int host_interrupt(lua_State *L) { (void)L; lutra_interrupt(); return 0; }
static int host_run_active(lua_State *L) { lua_pushboolean(L, lutra_run_active()); return 1; }

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb; (void)flag; (void)ftw;
  return remove(path);
}

/* the training chunks */
static const char *TRAIN_FIT =
  "local lt = require 'lutra'\n"
  "lt.manual_seed(0)\n"
  "local x = lt.randn(256, 2)\n"
  "local y = x:matmul(lt.tensor{{2}, {-3}}) + 1\n"
  "local loader = lt.data.DataLoader(lt.data.TensorDataset(x, y), {batch_size = 32, shuffle = true, seed = 1})\n"
  "local model = {lin = lt.nn.Linear(2, 1)}\n"
  "function model:training_step(b) return lt.F.mse_loss(self.lin(b[1]), b[2]) end\n"
  "function model:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), {lr = 0.1}) end\n"
  /* every default (logger, checkpoints, summary, progress bar) except where files go */
  "local trainer = lt.Trainer{max_epochs = 15, default_root_dir = ROOT}\n"
  "trainer:fit(model, loader)\n"
  "local loss = lt.no_grad(function() return lt.F.mse_loss(model.lin(x), y):item() end)\n"
  "local bar, summary = false, false\n"
  "for _, cb in ipairs(trainer.callbacks) do\n"
  "  if lt.Trainer._is_instance(cb, lt.callbacks.ProgressBar) then bar = true end\n"
  "  if lt.Trainer._is_instance(cb, lt.callbacks.ModelSummary) then summary = true end\n"
  "end\n"
  "return loss, trainer.global_step, bar, summary, require('lutra.core').embedded()\n";

static const char *STEPWISE =
  "local lt = require 'lutra'\n"
  "lt.manual_seed(1)\n"
  "local x = lt.randn(64, 3)\n"
  "local y = x:sum(2, true)\n"
  "local loader = lt.data.DataLoader(lt.data.TensorDataset(x, y), {batch_size = 8})\n"
  "local model = {lin = lt.nn.Linear(3, 1)}\n"
  "function model:training_step(b) return lt.F.mse_loss(self.lin(b[1]), b[2]) end\n"
  "function model:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), {lr = 0.05}) end\n"
  "trainer = lt.Trainer{max_epochs = 2, logger = false, enable_checkpointing = false}\n"
  "run = trainer:fit_run(model, loader)\n";

static const char *INTERRUPT =
  "local lt = require 'lutra'\n"
  "local loader = lt.data.DataLoader(lt.data.TensorDataset(lt.randn(40, 2), lt.randn(40, 1)), {batch_size = 5})\n"
  "local model = {lin = lt.nn.Linear(2, 1), active = {}}\n"
  "function model:training_step(b, i)\n"
  "  self.active[#self.active + 1] = host_run_active()\n"
  "  if i == 2 and not self.asked then self.asked = true; host_interrupt() end\n"
  "  return lt.F.mse_loss(self.lin(b[1]), b[2])\n"
  "end\n"
  "function model:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), {lr = 0.05}) end\n"
  "local trainer = lt.Trainer{max_epochs = 1, logger = false, enable_checkpointing = false}\n"
  "trainer:fit(model, loader)\n"
  "local first_interrupted, first_step = trainer.interrupted, trainer.global_step\n"
  "trainer:fit(model, loader)\n"
  "local all_active = #model.active > 0\n"
  "for _, a in ipairs(model.active) do all_active = all_active and a end\n"
  "return first_interrupted, first_step, trainer.interrupted, trainer.global_step, all_active\n";

int main(void) {
  counter k = { 0 };
  lutra_allocator al = { c_alloc, c_free, &k };

  /* 1. the allocator, before anything of lutra exists */
  CHECK(lutra_set_allocator(&al) == 0, "lutra_set_allocator returns 0 before the first tensor");
  CHECK(!lutra_run_active(), "lutra_run_active() is 0 before any run");

  char root[] = "/tmp/lutra_embed_XXXXXX";
  if (!mkdtemp(root)) { perror("mkdtemp"); return 1; }

  /* lutra runs with stdout redirected to a file: whatever it prints is caught */
  fflush(stdout);
  FILE *capture = tmpfile();
  int saved_stdout = dup(STDOUT_FILENO);
  if (!capture || saved_stdout < 0 || dup2(fileno(capture), STDOUT_FILENO) < 0) { perror("redirect"); return 1; }

  /* 2. lutra_preload + require in the host's own state */
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  lutra_preload(L);
  lua_pushstring(L, root);
  lua_setglobal(L, "ROOT");
  lua_register(L, "host_interrupt", host_interrupt);
  lua_register(L, "host_run_active", host_run_active);

  int st = run(L, "local lt = require 'lutra'; keep = lt.ones(1000); return lt.version, keep:sum():item()", 2);
  CHECK(st == 0 && !strcmp(lua_tostring(L, -2), LUTRA_VERSION) && lua_tonumber(L, -1) == 1000,
        "lutra_preload + require 'lutra' in the host's state: version %s and a tensor op", LUTRA_VERSION);
  if (st) print_error(L, "require");
  lua_settop(L, 0);
  CHECK(k.allocs > 0 && k.live >= 4000, "the host allocator got the tensor's buffer (%lld allocations)", k.allocs);
  counter other = { 0 };
  lutra_allocator al2 = { c_alloc, c_free, &other };
  CHECK(lutra_set_allocator(&al2) == -1, "lutra_set_allocator returns -1 while tensors are alive");

  /* 3. a whole fit with the Trainer's defaults: the loss, and no output */
  st = run(L, TRAIN_FIT, 5);
  if (st) print_error(L, "fit");
  CHECK(st == 0, "trainer:fit from the host runs");
  if (st == 0) {
    double loss = lua_tonumber(L, 1);
    CHECK(loss < 1e-3, "the model learned y = 2 x1 - 3 x2 + 1: mse %.2g < 1e-3", loss);
    CHECK(lua_tointeger(L, 2) == 15 * 8, "global_step is 15 epochs x 8 batches (%d)", (int)lua_tointeger(L, 2));
    CHECK(!lua_toboolean(L, 3) && !lua_toboolean(L, 4), "an embedding host's Trainer has no progress bar or summary");
    CHECK(lua_toboolean(L, 5), "lutra.core.embedded() is true in a host that called lutra_preload");
  }
  lua_settop(L, 0);

  /* the allocator's view matches lutra's own accounting: every buffer went through it */
  st = run(L, "collectgarbage(); collectgarbage(); local s = require('lutra').memory_stats()\n"
              "return s.live_bytes + s.cached_bytes", 1);
  CHECK(st == 0 && (long long)lua_tonumber(L, -1) == k.live,
        "live + cached bytes (%.0f) equal what the host allocator holds (%lld)", lua_tonumber(L, -1), k.live);
  lua_settop(L, 0);

  /* 4. run:advance{batches=1} from C, repeatedly */
  st = run(L, STEPWISE, 0);
  if (st) print_error(L, "stepwise setup");
  int steps_ok = st == 0, n_adv = 0, done = 0;
  while (steps_ok && !done && n_adv < 100) {
    lua_getglobal(L, "run");
    lua_getfield(L, -1, "advance");
    lua_pushvalue(L, -2);
    lua_newtable(L);
    lua_pushinteger(L, 1);
    lua_setfield(L, -2, "batches");
    if (lua_pcall(L, 2, 1, 0) != 0) { print_error(L, "advance"); steps_ok = 0; break; }
    done = lua_toboolean(L, -1);
    lua_settop(L, 0);
    n_adv++;
    lua_getglobal(L, "trainer");
    lua_getfield(L, -1, "global_step");
    if (lua_tointeger(L, -1) != n_adv) steps_ok = 0; /* one optimizer step per advance */
    lua_settop(L, 0);
  }
  CHECK(steps_ok && done && n_adv == 16, "16 calls of run:advance{batches=1} through lua_pcall: one step each, then done (%d)",
        n_adv);

  /* 5. errors reach the host as Lua errors */
  st = run(L, "local lt = require 'lutra'; return lt.zeros(2, 3):matmul(lt.zeros(4, 5))", 1);
  CHECK(st == LUA_ERRRUN && lua_isstring(L, -1) &&
          strstr(lua_tostring(L, -1), "matmul: shape mismatch: a is [2 x 3], b is [4 x 5] (a:size(2) must equal b:size(1))"),
        "a bad op is a Lua error with the op's message");
  lua_settop(L, 0);
  st = run(L, "local lt = require 'lutra'\n"
              "local loader = lt.data.DataLoader(lt.data.TensorDataset(lt.randn(4, 2)), {batch_size = 2})\n"
              "local m = {lin = lt.nn.Linear(2, 1)}\n"
              "function m:training_step(b) error('the model broke') end\n"
              "function m:configure_optimizers() return lt.optim.SGD(lt.nn.parameters(self), {lr = 0.1}) end\n"
              "local run = lt.Trainer{logger = false, enable_checkpointing = false}:fit_run(m, loader)\n"
              "return run:advance{batches = 1}", 1);
  CHECK(st == LUA_ERRRUN && lua_isstring(L, -1) && strstr(lua_tostring(L, -1), "training_step") &&
          strstr(lua_tostring(L, -1), "the model broke"),
        "an error in a hook reaches lua_pcall with the hook's name and message");
  lua_settop(L, 0);
  st = run(L, "return require('lutra').ones(2, 2):sum():item()", 1);
  CHECK(st == 0 && lua_tonumber(L, -1) == 4, "the state works after the errors");
  lua_settop(L, 0);

  /* 6. lutra_interrupt and lutra_run_active from C functions the model calls */
  st = run(L, INTERRUPT, 5);
  if (st) print_error(L, "interrupt");
  CHECK(st == 0 && lua_toboolean(L, 1) && lua_tointeger(L, 2) == 3,
        "lutra_interrupt() in batch 3 stops fit at the next batch boundary (trainer.interrupted, global_step %d)",
        (int)lua_tointeger(L, 2));
  CHECK(st == 0 && !lua_toboolean(L, 3) && lua_tointeger(L, 4) == 8, "fit again continues to the end (global_step %d)",
        (int)lua_tointeger(L, 4));
  CHECK(st == 0 && lua_toboolean(L, 5), "lutra_run_active() is nonzero inside training_step");
  lua_settop(L, 0);
  CHECK(!lutra_run_active(), "lutra_run_active() is 0 after the runs");

  /* 7. luaopen_lutra in a second state (Lua 5.1 style), while the first one lives */
  lua_State *L2 = luaL_newstate();
  luaL_openlibs(L2);
  lua_pushcfunction(L2, luaopen_lutra);
  st = lua_pcall(L2, 0, 1, 0);
  int open_ok = st == 0 && lua_istable(L2, -1);
  if (open_ok) {
    lua_getfield(L2, -1, "version");
    open_ok = lua_isstring(L2, -1) && !strcmp(lua_tostring(L2, -1), LUTRA_VERSION);
    lua_pop(L2, 1);
  }
  CHECK(open_ok, "luaopen_lutra leaves the module table");
  lua_setglobal(L2, "opened");
  st = run(L2, "local lt = require 'lutra'; return rawequal(lt, opened), lt.arange(1, 5):sum():item()", 2);
  CHECK(st == 0 && lua_toboolean(L2, -2) && lua_tonumber(L2, -1) == 10,
        "require 'lutra' after luaopen_lutra gives the same table, and ops work");
  lua_settop(L2, 0);

  /* 8. lua_close gives every buffer back */
  lua_close(L2);
  lua_close(L);
  lutra_empty_cache();

  /* stdout back: nothing may have been written by lutra */
  fflush(stdout);
  dup2(saved_stdout, STDOUT_FILENO);
  close(saved_stdout);
  long printed = ftell(capture) >= 0 ? (fseek(capture, 0, SEEK_END), ftell(capture)) : -1;
  char head[200] = "";
  if (printed > 0) {
    rewind(capture);
    size_t n = fread(head, 1, sizeof head - 1, capture);
    head[n] = 0;
    for (size_t i = 0; i < n; i++) if (head[i] == '\n') head[i] = '|';
  }
  fclose(capture);
  CHECK(printed == 0, "lutra printed nothing on stdout (%ld bytes%s%s)", printed, printed > 0 ? ": " : "", head);

  CHECK(k.live == 0 && k.allocs == k.frees && k.bad_frees == 0,
        "after lua_close + lutra_empty_cache the host allocator has everything back (live %lld, %lld allocs, %lld frees)",
        k.live, k.allocs, k.frees);
  CHECK(k.peak > 0, "peak %.2f MiB through the host allocator", (double)k.peak / 1048576.0);
  CHECK(lutra_set_allocator(NULL) == 0, "lutra_set_allocator(NULL) restores the system allocator once nothing is alive");
  CHECK(other.allocs == 0, "the allocator refused while tensors lived was never used");

  /* the default logger wrote its files under default_root_dir, not into the working directory */
  char logs[sizeof root + 32];
  snprintf(logs, sizeof logs, "%s/lutra_logs", root);
  struct stat sb;
  CHECK(stat(logs, &sb) == 0 && S_ISDIR(sb.st_mode), "the Trainer's default logger wrote under default_root_dir");
  nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);

  for (int i = 0; i < n_results; i++) printf("%s\n", results[i]);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
