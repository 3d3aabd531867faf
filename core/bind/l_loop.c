/*
 * l_loop.c — the loops (core/src/lt_loop.h) as a Lua object, which lua/lutra/trainer/init.lua drives: attach the
 * run's env, trainer and model, set the configuration, advance the fit, run the evaluation loops, call a hook
 * (lp:call_hook, through the dispatcher of l_loop_dispatch.c), read and restore the progress counters, the
 * profiler; and core._seam, the contract between these loops and the Lua side.
 *
 * Errors: a run that fails returns ("error", message) so the trainer can run on_exception before raising it;
 * the message names the hook ("<hook>[ (callback #i)]: ...", l_loop_dispatch.c) and carries its traceback.
 */
#include <stdlib.h>
#include <string.h>

#include "l_loop_call.h"
#include "l_optim.h"
#include "l_prof.h"
#include "l_run.h"
#include "lt_interrupt.h"
#include "l_background.h"

#define LOOPS_MT "lutra.Loops"

static void release_refs(l_loops *H, lua_State *L);
static int run_guarded(lua_State *L);

/* ---- the Lua object ------------------------------------------------------------------------------------- */

static l_loops *check_loops(lua_State *L) {
  l_loops *H = luaL_checkudata(L, 1, LOOPS_MT);
  if (!H->lp.c) luaL_error(L, "loops: the object was freed");
  return H;
}

/* The loops' state is one struct: a second run, or a new configuration or set of references, from inside a
 * hook of a running one would pull it from under the outer run (the trainer refuses these first, naming the
 * hook; this is the binding's own guard, for any caller). */
static l_loops *check_idle_loops(lua_State *L, const char *what) {
  l_loops *H = check_loops(L);
  if (H->running > 0) luaL_error(L, "loops: %s while the loops are running (from inside one of their hooks)", what);
  return H;
}

/* Frees the profiler, first taking it from the context when the ops are timed into it. */
static void free_prof(l_loops *H) {
  if (H->lp.c->prof && H->lp.c->prof == H->lp.prof) {
    H->lp.c->prof = NULL;
    l_prof_update_watch(H->lp.c);
  }
  lt_prof_free(H->lp.prof);
  H->lp.prof = NULL;
}

static int l_loops_gc(lua_State *L) {
  l_loops *H = luaL_checkudata(L, 1, LOOPS_MT);
  if (!H->lp.c) return 0;
  release_refs(H, L);
  for (int h = 0; h < LT_NHOOKS; h++) free(H->targets[h]);
  free(H->cb_refs);
  free(H->params);
  luaL_unref(L, LUA_REGISTRYINDEX, H->ref_msgh);
  luaL_unref(L, LUA_REGISTRYINDEX, H->ref_guarded);
  lt_loops_clear(&H->lp);
  free_prof(H);
  H->lp.c = NULL;
  return 0;
}

static void release_refs(l_loops *H, lua_State *L) {
  l_clear_targets(H, L);
  for (int i = 0; i < H->ncb; i++) luaL_unref(L, LUA_REGISTRYINDEX, H->cb_refs[i]);
  H->ncb = 0;
  int *refs[] = { &H->ref_env, &H->ref_R, &H->ref_trainer, &H->ref_model, &H->ref_err, &H->ref_dm };
  for (size_t i = 0; i < sizeof refs / sizeof *refs; i++) {
    luaL_unref(L, LUA_REGISTRYINDEX, *refs[i]);
    *refs[i] = LUA_NOREF;
  }
}

/* core._loops_new() */
static int l_loops_new(lua_State *L) {
  l_loops *H = lua_newuserdata(L, sizeof *H);
  memset(H, 0, sizeof *H);
  H->ref_env = H->ref_R = H->ref_trainer = H->ref_model = H->ref_msgh = H->ref_err = H->ref_dm = H->ref_guarded =
      LUA_NOREF;
  luaL_getmetatable(L, LOOPS_MT);
  lua_setmetatable(L, -2);
  H->host = l_loop_host(H);
  lt_loops_init(&H->lp, L_CTX(L), &H->host);
  H->cur_hook = -1;
  H->log_every_n_steps = 50;
  H->L = L;
  lua_pushcfunction(L, l_msgh);
  H->ref_msgh = luaL_ref(L, LUA_REGISTRYINDEX);
  l_push_upvalues(L); /* the binding's upvalues (l_util.h): the loops' C code reads tensors through them */
  lua_pushcclosure(L, run_guarded, 2);
  H->ref_guarded = luaL_ref(L, LUA_REGISTRYINDEX);
  return 1;
}

/* lp:attach(env, trainer, model): holds them (and a new slot table env.R) while a run lasts. The
 * references form a cycle through the registry, so lp:detach() must follow the run. */
static int l_attach(lua_State *L) {
  l_loops *H = check_idle_loops(L, "attach");
  l_checktype(L, 2, LUA_TTABLE);
  luaL_checkany(L, 4);
  release_refs(H, L);
  lua_pushvalue(L, 2);
  H->ref_env = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushvalue(L, 3);
  H->ref_trainer = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushvalue(L, 4);
  H->ref_model = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_createtable(L, R_NSLOTS, 0);
  lua_newtable(L);
  lua_rawseti(L, -2, R_TRAIN_OUT);
  lua_newtable(L);
  lua_rawseti(L, -2, R_EVAL_OUTPUTS);
  l_push_upvalues(L);
  lua_pushvalue(L, 1); /* the closure holds the loops object (released with R at detach) */
  lua_pushcclosure(L, l_opt_closure, 3);
  lua_rawseti(L, -2, R_CLOSURE);
  lua_pushvalue(L, -1);
  lua_setfield(L, 2, "R"); /* env.R: the slots, for the Lua side */
  H->ref_R = luaL_ref(L, LUA_REGISTRYINDEX);
  H->batch_out_built = 0;
  return 0;
}

static int l_detach(lua_State *L) {
  l_loops *H = check_idle_loops(L, "detach");
  release_refs(H, L);
  lt_loops_clear(&H->lp);
  return 0;
}

/* One run of the C loops, protected: the loops' C code calls the Lua API between its hooks' protected calls
 * (a table's fields, new strings and tables), and any of these may raise (out of memory, an __index that
 * errs). Raised through with_state unprotected, the error skipped its l_run_leave and H->running--: the
 * process-wide run count stayed raised for good (lutra_run_active() true with no run, so a host's Ctrl-C
 * was ignored) and these loops refused every later call as "while the loops are running". Caught here, it
 * is the run's failure like a hook's. */
typedef struct {
  l_loops *H;
  int (*fn)(l_loops *, void *);
  void *arg;
  int rc;
} guarded_call;

static int run_guarded(lua_State *L) {
  guarded_call *g = lua_touserdata(L, 1);
  lua_pop(L, 1);
  g->rc = g->fn(g->H, g->arg);
  return 0;
}

static int with_state(lua_State *L, l_loops *H, int (*fn)(l_loops *, void *), void *arg) {
  lua_State *saved = H->L;
  guarded_call g = { H, fn, arg, LT_ERR };
  lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_guarded);
  lua_pushlightuserdata(L, &g);
  H->L = L;
  l_run_enter();
  H->running++;
  /* No lt_fp_enter here: the loops' C work calls the Lua API and the hooks' Lua code, which must run in the
   * caller's floating-point mode. Under DAZ LuaJIT reads a denormal double as 0 where it asks "is this
   * number an integer?", so a table's denormal keys (jit.profile's registry entries) land on key 0 when the
   * table grows: the sampler's thread was unanchored and collected, and the advanced profiler crashed. The
   * computing parts (backward, the optimizer step, the pool's kernels) enter lutra's mode themselves. */
  int raised = lua_pcall(L, 1, 0, 0);
  H->running--;
  l_run_leave();
  H->L = saved;
  if (!raised) return g.rc;
  /* the run's failure, as a hook's is: its error object is what push_status gives the trainer, which ends
   * the run (on_exception, detach) as for any failed run */
  luaL_unref(L, LUA_REGISTRYINDEX, H->ref_err);
  H->ref_err = luaL_ref(L, LUA_REGISTRYINDEX);
  return LT_ERR;
}

static int do_refresh(l_loops *H, void *arg) { return l_refresh_targets(H, &H->lp, arg != NULL); }

/* Pushes the status of a run: "done" | "pause" | "interrupted" | "error", message. */
static int push_status(lua_State *L, l_loops *H, int rc) {
  switch (rc) {
    case LT_OK: lua_pushstring(L, "done"); return 1;
    case LT_PAUSE: lua_pushstring(L, "pause"); return 1;
    case LT_INTERRUPTED: lua_pushstring(L, "interrupted"); return 1;
    default:
      lua_pushstring(L, "error");
      if (H->ref_err != LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_err);
        luaL_unref(L, LUA_REGISTRYINDEX, H->ref_err);
        H->ref_err = LUA_NOREF;
      } else {
        lua_pushstring(L, H->lp.c->err);
      }
      return 2;
  }
}

/* Raises the failure of a run or a hook call (rc != LT_OK) as a hook error {lutra_hook_error = true, msg = ...}:
 * the trainer reports it as it is (its message names the hook already). */
static int raise_status(lua_State *L, l_loops *H, int rc) {
  push_status(L, H, rc);
  lua_newtable(L);
  lua_pushboolean(L, 1);
  lua_setfield(L, -2, "lutra_hook_error");
  lua_insert(L, -2);
  lua_setfield(L, -2, "msg");
  return lua_error(L);
}

static int l_refresh(lua_State *L) {
  l_loops *H = check_idle_loops(L, "refresh");
  int rc = with_state(L, H, do_refresh, lua_toboolean(L, 2) ? (void *)1 : NULL);
  return push_status(L, H, rc);
}

/* A number as int64 without undefined casts: finite values truncate, infinities saturate, NaN is an error. */
static int64_t to_int64(lua_State *L, lua_Number v, const char *what) {
  if (v != v) luaL_error(L, "loops: %s is NaN", what);
  if (v >= 0x1p63) return INT64_MAX;
  if (v <= -0x1p63) return INT64_MIN;
  return (int64_t)v;
}

static int64_t opt_int(lua_State *L, int t, const char *k, int64_t def) {
  lua_getfield(L, t, k);
  int64_t v = lua_isnumber(L, -1) ? to_int64(L, lua_tonumber(L, -1), k) : def;
  lua_pop(L, 1);
  return v;
}

static void read_int_list(lua_State *L, int t, const char *k, int64_t *dst, int *n) {
  lua_getfield(L, t, k);
  int m = lua_istable(L, -1) ? (int)lua_objlen(L, -1) : 0;
  if (m > LT_MAX_LOADERS) m = LT_MAX_LOADERS;
  for (int i = 0; i < m; i++) {
    lua_rawgeti(L, -1, i + 1);
    lua_Number v = lua_tonumber(L, -1);
    dst[i] = v >= 9.0e18 ? LT_INF_BATCHES : (int64_t)v;
    lua_pop(L, 1);
  }
  if (n) *n = m;
  lua_pop(L, 1);
}

static int has_table(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  int is = lua_istable(L, -1);
  lua_pop(L, 1);
  return is;
}

/* accumulate_grad_batches of the table at index 2, if given: the loops' config is the setting's one owner
 * (the trainer reads it back through lp:get). */
static void read_accumulate(lua_State *L, lt_loop_cfg *c) {
  lua_getfield(L, 2, "accumulate_grad_batches");
  if (!lua_isnil(L, -1)) {
    lua_Number v = lua_tonumber(L, -1);
    if (lua_type(L, -1) != LUA_TNUMBER)
      l_errorf(L, "Trainer: accumulate_grad_batches must be an integer >= 1, got a %s", luaL_typename(L, -1));
    if (!(v >= 1 && v <= 0x1p62) || v != floor(v))
      l_errorf(L, "Trainer: accumulate_grad_batches must be an integer >= 1, got %.17g", v);
    c->accumulate_grad_batches = (int64_t)v;
  }
  lua_pop(L, 1);
}

/* lp:set_cfg{...}: the numbers the trainer computed (lt_loop_cfg). */
/* lp:set_epoch_data{num_training_batches=, val_check_batch=, num_val_batches=, num_sanity_val_batches=,
 * enable_validation=, val_loaders_pending=, accumulate_grad_batches=}: the loaders' sizes again inside a run:
 * when the data hooks' loaders arrive (the sanity_loaders and fit_loaders events) and at a training epoch
 * start (reload_dataloaders_every_n_epochs, GradientAccumulationScheduler: lua/lutra/trainer/init.lua's
 * reload_dataloaders, from the train_epoch_start event, before the epoch's first fetch). */
static int l_set_epoch_data(lua_State *L) {
  l_loops *H = check_loops(L);
  l_checktype(L, 2, LUA_TTABLE);
  lt_loop_cfg *c = &H->lp.cfg;
  static const char *const keys[] = { "num_training_batches", "val_check_batch" };
  int64_t *dst[] = { &c->num_training_batches, &c->val_check_batch };
  for (int i = 0; i < 2; i++) {
    lua_getfield(L, 2, keys[i]);
    if (lua_isnumber(L, -1)) {
      lua_Number v = lua_tonumber(L, -1);
      *dst[i] = v >= 9.0e18 ? LT_INF_BATCHES : (int64_t)v;
    }
    lua_pop(L, 1);
  }
  c->enable_validation = (int)opt_int(L, 2, "enable_validation", c->enable_validation);
  c->val_loaders_pending = (int)opt_int(L, 2, "val_loaders_pending", c->val_loaders_pending);
  /* only the lists given: {accumulate_grad_batches = n} alone keeps the validation loaders */
  if (has_table(L, 2, "num_val_batches")) read_int_list(L, 2, "num_val_batches", c->num_val_batches, &c->n_val_loaders);
  if (has_table(L, 2, "num_sanity_val_batches"))
    read_int_list(L, 2, "num_sanity_val_batches", c->num_sanity_val_batches, NULL);
  /* GradientAccumulationScheduler (lua/lutra/callbacks/grad_accum.lua): the factor of this epoch */
  read_accumulate(L, c);
  return 0;
}

static int l_set_cfg(lua_State *L) {
  l_loops *H = check_idle_loops(L, "set_cfg");
  l_checktype(L, 2, LUA_TTABLE);
  lt_loop_cfg *c = &H->lp.cfg;
  c->max_epochs = opt_int(L, 2, "max_epochs", c->max_epochs);
  c->min_epochs = opt_int(L, 2, "min_epochs", c->min_epochs);
  c->max_steps = opt_int(L, 2, "max_steps", c->max_steps);
  c->min_steps = opt_int(L, 2, "min_steps", c->min_steps);
  lua_getfield(L, 2, "num_training_batches");
  if (lua_isnumber(L, -1)) {
    lua_Number v = lua_tonumber(L, -1);
    c->num_training_batches = v >= 9.0e18 ? LT_INF_BATCHES : (int64_t)v;
  }
  lua_pop(L, 1);
  lua_getfield(L, 2, "val_check_batch");
  if (lua_isnumber(L, -1)) {
    lua_Number v = lua_tonumber(L, -1);
    c->val_check_batch = v >= 9.0e18 ? LT_INF_BATCHES : (int64_t)v;
  }
  lua_pop(L, 1);
  c->check_val_every_n_epoch = opt_int(L, 2, "check_val_every_n_epoch", c->check_val_every_n_epoch);
  c->enable_validation = (int)opt_int(L, 2, "enable_validation", c->enable_validation);
  c->val_loaders_pending = (int)opt_int(L, 2, "val_loaders_pending", c->val_loaders_pending);
  read_int_list(L, 2, "num_val_batches", c->num_val_batches, &c->n_val_loaders);
  int n = 0;
  read_int_list(L, 2, "num_sanity_val_batches", c->num_sanity_val_batches, &n);
  if (has_table(L, 2, "num_eval_batches"))
    read_int_list(L, 2, "num_eval_batches", c->num_eval_batches, &c->n_eval_loaders);
  read_accumulate(L, c);
  c->n_optimizers = (int)opt_int(L, 2, "n_optimizers", c->n_optimizers);
  lua_getfield(L, 2, "frequencies"); /* {k1, k2, ...} one per optimizer, or {} (every optimizer, every batch) */
  if (lua_istable(L, -1)) {
    int m = (int)lua_objlen(L, -1);
    if (m > LT_MAX_OPTIMIZERS) return luaL_error(L, "fit: at most %d optimizer frequencies", LT_MAX_OPTIMIZERS);
    for (int i = 0; i < m; i++) {
      lua_rawgeti(L, -1, i + 1);
      c->frequencies[i] = (int)lua_tointeger(L, -1);
      lua_pop(L, 1);
    }
    c->n_frequencies = m;
  }
  lua_pop(L, 1);
  c->automatic_optimization = (int)opt_int(L, 2, "automatic_optimization", c->automatic_optimization);
  c->tbptt_steps = (int)opt_int(L, 2, "tbptt_steps", c->tbptt_steps);
  lua_getfield(L, 2, "gradient_clip_val");
  if (lua_isnumber(L, -1)) c->gradient_clip_val = lua_tonumber(L, -1);
  lua_pop(L, 1);
  c->gradient_clip_algorithm = (int)opt_int(L, 2, "gradient_clip_algorithm", c->gradient_clip_algorithm);
  H->log_every_n_steps = (int)opt_int(L, 2, "log_every_n_steps", H->log_every_n_steps);
  H->has_logger = (int)opt_int(L, 2, "has_logger", H->has_logger);
  lua_getfield(L, 2, "schedulers");
  if (lua_istable(L, -1)) {
    int m = (int)lua_objlen(L, -1);
    if (m > LT_MAX_SCHEDULERS) return luaL_error(L, "fit: at most %d lr schedulers are supported", LT_MAX_SCHEDULERS);
    for (int i = 0; i < m; i++) {
      lua_rawgeti(L, -1, i + 1);
      int t = lua_gettop(L);
      c->sched[i].interval = (int)opt_int(L, t, "interval", 1);
      c->sched[i].frequency = (int)opt_int(L, t, "frequency", 1);
      c->sched[i].opt_idx = (int)opt_int(L, t, "opt_idx", 0);
      c->sched[i].plateau = (int)opt_int(L, t, "plateau", 0);
      lua_pop(L, 1);
    }
    c->n_schedulers = m;
  }
  lua_pop(L, 1);
  return 0;
}

/* lp:set_optimizers(list) */
static int l_set_optimizers(lua_State *L) {
  l_loops *H = check_idle_loops(L, "set_optimizers");
  l_checktype(L, 2, LUA_TTABLE);
  int n = (int)lua_objlen(L, 2);
  if (n > LT_MAX_OPTIMIZERS) return luaL_error(L, "fit: at most %d optimizers are supported", LT_MAX_OPTIMIZERS);
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, 2, i + 1);
    H->opts[i] = l_tooptimizer(L, -1);
    lua_pop(L, 1);
  }
  H->nopts = n;
  if (H->ref_R == LUA_NOREF) return luaL_error(L, "loops: set_optimizers before attach");
  lua_pushvalue(L, 2);
  set_R(H, L, R_OPTIMIZERS);
  return 0;
}

static int l_fit_begin(lua_State *L) {
  l_loops *H = check_idle_loops(L, "fit_begin");
  lt_loops_fit_begin(&H->lp);
  H->nil_step_warned = 0;
  return 0;
}

typedef struct {
  int64_t batches;
  double seconds;
} adv_args;
static int do_advance(l_loops *H, void *arg) {
  adv_args *a = arg;
  return lt_loops_fit_advance(&H->lp, a->batches, a->seconds);
}

/* lp:fit_advance(max_batches, seconds, check_interrupt[, no_overrun]) -> status[, message] */
static int l_fit_advance(lua_State *L) {
  l_loops *H = check_idle_loops(L, "fit_advance");
  adv_args a = { to_int64(L, l_optnumber(L, 2, 0), "advance's batches"), l_optnumber(L, 3, 0) };
  H->lp.check_interrupt = lua_toboolean(L, 4);
  H->lp.stop_flag = l_background_stop_flag(L);
  H->lp.no_overrun = lua_toboolean(L, 5);
  int rc = with_state(L, H, do_advance, &a);
  lua_settop(L, 1);
  return push_status(L, H, rc);
}

static int do_sanity(l_loops *H, void *arg) {
  (void)arg;
  return lt_loops_sanity_check(&H->lp);
}
static int l_sanity_check(lua_State *L) {
  l_loops *H = check_idle_loops(L, "sanity_check");
  int rc = with_state(L, H, do_sanity, NULL);
  return push_status(L, H, rc);
}

static int do_eval(l_loops *H, void *arg) { return lt_loops_eval_run(&H->lp, *(lt_kind *)arg); }
/* lp:eval_run("validation"|"test"|"predict", check_interrupt) */
static int l_eval_run(lua_State *L) {
  l_loops *H = check_idle_loops(L, "eval_run");
  static const char *const kinds[] = { "train", "validation", "test", "predict", NULL };
  lt_kind k = (lt_kind)luaL_checkoption(L, 2, NULL, kinds);
  H->lp.check_interrupt = lua_toboolean(L, 3);
  int rc = with_state(L, H, do_eval, &k);
  return push_status(L, H, rc);
}

static int do_slot(l_loops *H, void *arg) { return lt_loops_run_slot(&H->lp, *(lt_slot *)arg); }
static int l_run_slot(lua_State *L) {
  l_loops *H = check_loops(L);
  lt_slot s = (lt_slot)luaL_checkinteger(L, 2);
  if (s < 0 || s >= LT_NSLOTS) return luaL_error(L, "loops: bad slot %d", (int)s);
  int rc = with_state(L, H, do_slot, &s);
  if (rc == LT_OK) return 0;
  return raise_status(L, H, rc); /* a child run by a custom loop failed: its caller reports it */
}

static int l_set_custom(lua_State *L) {
  l_loops *H = check_loops(L);
  int s = (int)luaL_checkinteger(L, 2);
  if (s < 0 || s >= LT_NSLOTS) return luaL_error(L, "loops: bad slot %d", s);
  H->lp.custom[s] = (uint8_t)lua_toboolean(L, 3);
  return 0;
}

static int l_manual_step(lua_State *L) {
  l_loops *H = check_loops(L);
  lt_loops_manual_step(&H->lp, lua_toboolean(L, 2));
  return 0;
}

/* lp:call_hook(name, ...) -> the model's first result, the number of targets called: the hook on its
 * targets (the lists the C loops call), through the dispatcher (l_hook_dispatch): callbacks get
 * (cb, trainer, model, ...), the model (model, ...). The trainer's one way to call a hook; a failure raises a
 * hook error {lutra_hook_error = true, msg = "<hook>[ (callback #i)]: ..."}.
 * lp:call_hook_all(name, ...) -> {messages}: every target runs, whatever the others raise; their errors are
 * returned (on_exception: the error being reported wins). */
static int call_hook(lua_State *L, int collect) {
  l_loops *H = check_loops(L);
  const char *name = l_checkstring(L, 2);
  int h = lt_hook_from_name(name);
  if (h < 0) return luaL_error(L, "loops: unknown hook '%s'", name);
  if (H->ref_R == LUA_NOREF) return luaL_error(L, "loops: call_hook('%s') outside a run", name);
  int nargs = lua_gettop(L) - 2;
  int errors = 0;
  if (collect) {
    lua_newtable(L);
    errors = lua_gettop(L);
  }
  lua_pushnil(L); /* the model's result */
  int res = lua_gettop(L);
  l_stack_args sa = { 3, nargs };
  lua_State *saved = H->L;
  H->L = L;
  int rc = l_hook_dispatch(H, L, (lt_hook)h, l_push_stack_args, &sa, res, errors);
  H->L = saved;
  if (rc != LT_OK) return raise_status(L, H, LT_ERR);
  if (collect) {
    lua_settop(L, errors);
    return 1;
  }
  lua_pushinteger(L, H->ntargets[h]);
  return 2;
}
static int l_call_hook(lua_State *L) { return call_hook(L, 0); }
static int l_call_hook_all(lua_State *L) { return call_hook(L, 1); }

/* ---- the profiler (lt_prof.h): lp:profiler(on), lp:profiler_clock(running), lp:profiler_rows() ---------- */

/* lp:profiler(true|false): creates (empty) or frees the profiler; the dispatch lists get its actions at the
 * next refresh */
static int l_profiler(lua_State *L) {
  l_loops *H = check_loops(L);
  int on = lua_toboolean(L, 2);
  if (on && !H->lp.prof) {
    H->lp.prof = lt_prof_new();
    if (!H->lp.prof) return luaL_error(L, "profiler: out of memory");
  } else if (!on && H->lp.prof) {
    free_prof(H);
  }
  return 0;
}

/* lp:profiler_ops(true|false): times every forward op and backward kernel into the profiler (lt_prof.h's
 * "[op] name" and "[backward] name" rows; profiler="advanced") or stops doing so */
static int l_profiler_ops(lua_State *L) {
  l_loops *H = check_loops(L);
  lt_ctx *c = H->lp.c;
  if (lua_toboolean(L, 2)) c->prof = H->lp.prof;
  else if (c->prof == H->lp.prof) c->prof = NULL;
  l_prof_update_watch(c);
  return 0;
}

/* lp:profiler_clock(true|false): starts or stops the profiler's clock (the time of a run's advances) */
static int l_profiler_clock(lua_State *L) {
  l_loops *H = check_loops(L);
  if (!H->lp.prof) return 0;
  if (lua_toboolean(L, 2)) lt_prof_start(H->lp.prof);
  else lt_prof_stop(H->lp.prof);
  return 0;
}

/* lp:profiler_enter(action) / lp:profiler_exit(): an action of the trainer's own (checkpoint saving, ...) */
static int l_profiler_enter(lua_State *L) {
  l_loops *H = check_loops(L);
  const char *name = l_checkstring(L, 2);
  if (!H->lp.prof) return 0;
  int row = lt_prof_action(H->lp.prof, name);
  if (row < 0) return luaL_error(L, "profiler: out of memory");
  lt_prof_enter(H->lp.prof, row);
  return 0;
}
static int l_profiler_exit(lua_State *L) {
  l_loops *H = check_loops(L);
  if (H->lp.prof) lt_prof_exit(H->lp.prof);
  return 0;
}

/* lp:profiler_rows() -> {{action=, count=, total=}, ...} in the order the actions were first seen */
static int l_profiler_rows(lua_State *L) {
  l_loops *H = check_loops(L);
  const lt_prof *p = H->lp.prof;
  lua_newtable(L);
  for (int i = 0; p && i < p->nrows; i++) {
    l_push_time_row(L, "action", p->rows[i].name, p->rows[i].count, p->rows[i].total);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int l_profiler_reset(lua_State *L) {
  l_loops *H = check_loops(L);
  if (H->lp.prof) lt_prof_reset(H->lp.prof);
  return 0;
}

/* lp:output_loss(loss) -> the loss as the batch's outputs keep it (output_loss) */
static int l_lp_output_loss(lua_State *L) {
  l_loops *H = check_loops(L);
  lt_tensor *t = l_checktensor(L, 2, "output_loss");
  return l_push(L, l_output_loss(H, t)); /* (NULL: raises ctx's error) */
}

/* lp:state() -> the trainer-level numbers, in one table */
static int l_loops_state(lua_State *L) {
  l_loops *H = check_loops(L);
  lt_loops *lp = &H->lp;
  lua_createtable(L, 0, 12);
  lua_pushinteger(L, (lua_Integer)lt_loops_global_step(lp));
  lua_setfield(L, -2, "global_step");
  lua_pushinteger(L, (lua_Integer)lt_loops_current_epoch(lp));
  lua_setfield(L, -2, "current_epoch");
  lua_pushboolean(L, lp->should_stop);
  lua_setfield(L, -2, "should_stop");
  lua_pushboolean(L, lp->sanity_checking);
  lua_setfield(L, -2, "sanity_checking");
  lua_pushinteger(L, (lua_Integer)lp->fit_loop.epoch_loop.batches_that_stepped);
  lua_setfield(L, -2, "batches_that_stepped");
  lua_pushinteger(L, (lua_Integer)lp->fit_loop.epoch_loop.batch_idx);
  lua_setfield(L, -2, "batch_idx");
  lua_pushboolean(L, lp->fit_loop.epoch_loop.is_last_batch);
  lua_setfield(L, -2, "is_last_batch");
  lua_pushinteger(L, lp->fit_loop.epoch_loop.batch_loop.optimizer_loop.position);
  lua_setfield(L, -2, "optimizer_position");
  lua_pushinteger(L, lp->fit_loop.epoch_loop.batch_loop.split_idx);
  lua_setfield(L, -2, "split_idx");
  lua_pushboolean(L, lp->fit_stage);
  lua_setfield(L, -2, "fit_running");
  lua_pushboolean(L, lp->keep_train_outputs);
  lua_setfield(L, -2, "keep_train_outputs");
  lua_pushinteger(L, (lua_Integer)lp->fit_loop.epoch_loop.n_outputs);
  lua_setfield(L, -2, "n_outputs");
  lua_pushboolean(L, lt_loops_should_accumulate(lp));
  lua_setfield(L, -2, "should_accumulate");
  return 1;
}

static int l_get(lua_State *L) {
  l_loops *H = check_loops(L);
  const char *k = l_checkstring(L, 2);
  lt_loops *lp = &H->lp;
  if (!strcmp(k, "global_step")) lua_pushinteger(L, (lua_Integer)lt_loops_global_step(lp));
  else if (!strcmp(k, "current_epoch")) lua_pushinteger(L, (lua_Integer)lt_loops_current_epoch(lp));
  else if (!strcmp(k, "should_stop")) lua_pushboolean(L, lp->should_stop);
  else if (!strcmp(k, "sanity_checking")) lua_pushboolean(L, lp->sanity_checking);
  else if (!strcmp(k, "current_hook")) {
    if (H->cur_hook >= 0) lua_pushstring(L, lt_hook_names[H->cur_hook]);
    else lua_pushnil(L);
  } else if (!strcmp(k, "batches_that_stepped"))
    lua_pushinteger(L, (lua_Integer)lp->fit_loop.epoch_loop.batches_that_stepped);
  else if (!strcmp(k, "batch_idx")) lua_pushinteger(L, (lua_Integer)lp->fit_loop.epoch_loop.batch_idx);
  else if (!strcmp(k, "active_optimizer"))
    lua_pushinteger(L, lt_loops_active_optimizer(lp, lp->fit_loop.epoch_loop.batch_idx));
  else if (!strcmp(k, "fit_running")) lua_pushboolean(L, lp->fit_stage);
  else if (!strcmp(k, "accumulate_grad_batches")) lua_pushinteger(L, (lua_Integer)lp->cfg.accumulate_grad_batches);
  else if (!strcmp(k, "should_accumulate")) lua_pushboolean(L, lt_loops_should_accumulate(lp));
  else if (!strcmp(k, "eval_dl")) {
    const lt_eval_loop *V = lp->eval_kind == LT_KIND_VAL       ? &lp->validate_loop
                            : lp->eval_kind == LT_KIND_TEST    ? &lp->test_loop
                            : lp->eval_kind == LT_KIND_PREDICT ? &lp->predict_loop
                                                               : &lp->fit_loop.epoch_loop.val_loop;
    lua_pushinteger(L, (lua_Integer)V->epoch_loop.dl_idx);
  } else return luaL_error(L, "loops: unknown field '%s'", k);
  return 1;
}

static int l_set(lua_State *L) {
  l_loops *H = check_loops(L);
  const char *k = l_checkstring(L, 2);
  lt_loops *lp = &H->lp;
  if (!strcmp(k, "should_stop")) lp->should_stop = lua_toboolean(L, 3);
  else if (!strcmp(k, "current_hook")) H->cur_hook = lua_isnil(L, 3) ? -1 : lt_hook_from_name(l_checkstring(L, 3));
  else if (!strcmp(k, "batches_that_stepped"))
    lp->fit_loop.epoch_loop.batches_that_stepped = to_int64(L, l_checknumber(L, 3), k);
  else if (!strcmp(k, "optimizer_position"))
    lp->fit_loop.epoch_loop.batch_loop.optimizer_loop.position =
        (int)l_checkint(L, 3, "loops", k, 0, LT_MAX_OPTIMIZERS);
  else if (!strcmp(k, "is_last_batch")) lp->fit_loop.epoch_loop.is_last_batch = lua_toboolean(L, 3);
  else if (!strcmp(k, "batch_idx")) lp->fit_loop.epoch_loop.batch_idx = to_int64(L, l_checknumber(L, 3), k);
  else if (!strcmp(k, "resume_advance_end"))
    lp->fit_loop.epoch_loop.resume_advance_end = (int)l_checkint(L, 3, "loops", k, 0, 2);
  else return luaL_error(L, "loops: unknown field '%s'", k);
  return 0;
}

static void push_counts(lua_State *L, const lt_counts *c) {
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, (lua_Integer)c->ready);
  lua_setfield(L, -2, "ready");
  lua_pushinteger(L, (lua_Integer)c->started);
  lua_setfield(L, -2, "started");
  lua_pushinteger(L, (lua_Integer)c->processed);
  lua_setfield(L, -2, "processed");
  lua_pushinteger(L, (lua_Integer)c->completed);
  lua_setfield(L, -2, "completed");
}

static void read_counts(lua_State *L, int t, lt_counts *c) {
  c->ready = opt_int(L, t, "ready", 0);
  c->started = opt_int(L, t, "started", 0);
  c->processed = opt_int(L, t, "processed", 0);
  c->completed = opt_int(L, t, "completed", 0);
}

static lt_progress *check_progress(lua_State *L, l_loops *H, int idx, const char *which) {
  int id = (int)luaL_checkinteger(L, idx);
  if (id < 0 || id >= LT_NLOOPS) luaL_error(L, "loops: bad loop id %d", id);
  lt_batch_loop *B = &H->lp.fit_loop.epoch_loop.batch_loop;
  if (which && !strcmp(which, "zero_grad")) return &B->optimizer_loop.zero_grad;
  if (which && !strcmp(which, "scheduler")) return &H->lp.fit_loop.epoch_loop.scheduler_progress;
  return lt_loops_progress(&H->lp, (lt_loop_id)id);
}

/* lp:progress(id[, "zero_grad"|"scheduler"]) -> {total={...}, current={...}} */
static int l_progress(lua_State *L) {
  l_loops *H = check_loops(L);
  lt_progress *p = check_progress(L, H, 2, l_optstring(L, 3, NULL));
  lua_createtable(L, 0, 2);
  push_counts(L, &p->total);
  lua_setfield(L, -2, "total");
  push_counts(L, &p->current);
  lua_setfield(L, -2, "current");
  return 1;
}

/* lp:set_progress(id, {total=..., current=...}[, which]) */
static int l_set_progress(lua_State *L) {
  l_loops *H = check_loops(L);
  l_checktype(L, 3, LUA_TTABLE);
  lt_progress *p = check_progress(L, H, 2, l_optstring(L, 4, NULL));
  lua_getfield(L, 3, "total");
  if (lua_istable(L, -1)) read_counts(L, lua_gettop(L), &p->total);
  lua_pop(L, 1);
  lua_getfield(L, 3, "current");
  if (lua_istable(L, -1)) read_counts(L, lua_gettop(L), &p->current);
  lua_pop(L, 1);
  return 0;
}

static int l_restarting(lua_State *L) {
  l_loops *H = check_loops(L);
  int id = (int)luaL_checkinteger(L, 2);
  int *r = lt_loops_restarting(&H->lp, (lt_loop_id)id);
  if (!r) return luaL_error(L, "loops: bad loop id %d", id);
  if (lua_gettop(L) >= 3) {
    lt_loops_set_restarting(&H->lp, (lt_loop_id)id, lua_toboolean(L, 3));
    return 0;
  }
  lua_pushboolean(L, *r);
  return 1;
}

static int l_phase(lua_State *L) {
  l_loops *H = check_loops(L);
  int id = (int)luaL_checkinteger(L, 2);
  int *p = lt_loops_phase(&H->lp, (lt_loop_id)id);
  if (!p) return luaL_error(L, "loops: bad loop id %d", id);
  static const char *const names[] = { "idle", "running", "advance" };
  lua_pushstring(L, names[*p]);
  return 1;
}

/* core._seam() -> the contract between these loops and lua/lutra/trainer, from the tables that define it:
 *   loops = {{key = "fit_epoch", id = 1, name = "fit_loop.epoch_loop", field = "epoch_loop",
 *             parent = "fit" | nil, slot = 0 | nil, runnable = true}, ...}  (LT_LOOP_LIST, in id order)
 *   run   = {train_batch = 1, ...}                           (the R table's slots, R_SLOT_LIST)
 *   hooks = {[name] = {lua_side = true | false}, ...}        (l_hook_targets: arguments built in Lua) */
static int l_seam(lua_State *L) {
  lua_createtable(L, 0, 3);
  lua_createtable(L, LT_NLOOPS, 0);
  for (int i = 0; i < LT_NLOOPS; i++) {
    const lt_loop_info *info = &lt_loop_table[i];
    lua_createtable(L, 0, 6);
    char key[32];
    size_t n = strlen(info->key);
    if (n >= sizeof key) n = sizeof key - 1;
    for (size_t k = 0; k < n; k++) {
      char ch = info->key[k];
      key[k] = (char)(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
    }
    lua_pushlstring(L, key, n);
    lua_setfield(L, -2, "key");
    lua_pushinteger(L, i);
    lua_setfield(L, -2, "id");
    lua_pushstring(L, info->name);
    lua_setfield(L, -2, "name");
    const char *dot = strrchr(info->name, '.');
    lua_pushstring(L, dot ? dot + 1 : info->name);
    lua_setfield(L, -2, "field");
    if (info->parent != LT_LOOP_NONE) {
      lua_rawgeti(L, -2, info->parent + 1);
      lua_getfield(L, -1, "key");
      lua_setfield(L, -3, "parent");
      lua_pop(L, 1);
    }
    if (info->slot != LT_SLOT_NONE) {
      lua_pushinteger(L, info->slot);
      lua_setfield(L, -2, "slot");
    }
    lua_pushboolean(L, info->runnable);
    lua_setfield(L, -2, "runnable");
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "loops");
  lua_createtable(L, 0, R_NSLOTS);
#define R_SLOT_FIELD_(id, name) \
  lua_pushinteger(L, R_##id);   \
  lua_setfield(L, -2, name);
  R_SLOT_LIST(R_SLOT_FIELD_)
#undef R_SLOT_FIELD_
  lua_setfield(L, -2, "run");
  lua_createtable(L, 0, LT_NHOOKS);
  for (int h = 0; h < LT_NHOOKS; h++) {
    lua_createtable(L, 0, 1);
    lua_pushboolean(L, (l_hook_targets[h] & TG_LUA) != 0);
    lua_setfield(L, -2, "lua_side");
    lua_setfield(L, -2, lt_hook_names[h]);
  }
  lua_setfield(L, -2, "hooks");
  return 1;
}

/* core._clip_gradients(params, val, "norm"|"value") */
static int l_clip_gradients(lua_State *L) {
  l_checktype(L, 1, LUA_TTABLE);
  double val = l_checknumber(L, 2);
  const char *algo = l_optstring(L, 3, "norm");
  int n = (int)lua_objlen(L, 1);
  lt_tensor **ps = lua_newuserdata(L, sizeof(lt_tensor *) * (size_t)(n > 0 ? n : 1)); /* freed by the GC */
  int m = 0;
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    lt_tensor *t = l_checktensor(L, -1, "clip_gradients");
    ps[m++] = t;
    lua_pop(L, 1);
  }
  l_check(L, lt_clip_gradients(L_CTX(L), m, ps, val, strcmp(algo, "value") == 0 ? LT_CLIP_VALUE : LT_CLIP_NORM));
  return 0;
}

void l_loop_register(lua_State *L) {
  l_hook_targets_init();
  static const luaL_Reg methods[] = { { "attach", l_attach },
                                      { "detach", l_detach },
                                      { "refresh", l_refresh },
                                      { "set_cfg", l_set_cfg },
                                      { "set_optimizers", l_set_optimizers },
                                      { "fit_begin", l_fit_begin },
                                      { "fit_advance", l_fit_advance },
                                      { "sanity_check", l_sanity_check },
                                      { "set_epoch_data", l_set_epoch_data }, /* lightning: reload loaders */
                                      { "eval_run", l_eval_run },
                                      { "run_slot", l_run_slot },
                                      { "set_custom", l_set_custom },
                                      { "call_hook", l_call_hook },
                                      { "call_hook_all", l_call_hook_all },
                                      /* the profiler */
                                      { "profiler", l_profiler },
                                      { "profiler_clock", l_profiler_clock },
                                      { "profiler_ops", l_profiler_ops },
                                      { "profiler_enter", l_profiler_enter },
                                      { "profiler_exit", l_profiler_exit },
                                      { "profiler_rows", l_profiler_rows },
                                      { "profiler_reset", l_profiler_reset },
                                      { "output_loss", l_lp_output_loss },
                                      { "manual_step", l_manual_step },
                                      { "state", l_loops_state },
                                      { "get", l_get },
                                      { "set", l_set },
                                      { "progress", l_progress },
                                      { "set_progress", l_set_progress },
                                      { "restarting", l_restarting },
                                      { "phase", l_phase },
                                      { NULL, NULL } };
  luaL_newmetatable(L, LOOPS_MT);
  lua_newtable(L);
  l_setfuncs(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, l_loops_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  static const luaL_Reg funcs[] = {
    { "_loops_new", l_loops_new }, { "_seam", l_seam }, { "_clip_gradients", l_clip_gradients }, { NULL, NULL }
  };
  l_setfuncs(L, funcs);
  l_loop_dispatch_register(L);
}
