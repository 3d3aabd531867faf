/*
 * l_loop.c — the loops (core/src/lt_loop.h) as a Lua object, and the hook dispatch for Lua tables: the
 * lt_host implementation that lua/lutra/trainer.lua drives.
 *
 * Dispatch: at run start and at each training epoch start, `refresh` builds per hook the list of targets
 * that define it — the callbacks in the order the trainer gives (env.cb_order: built-in ModelCheckpoint
 * last), then the model — holding registry references to the functions. A hook call walks its list; an
 * absent hook is an empty list the core does not even call. The common training step enters Lua only for
 * the data iterator and training_step: zero_grad, backward and the update of lutra optimizers run in C.
 *
 * Hooks whose arguments live on the Lua side (the epoch-end hooks with outputs, lr_scheduler_step and
 * its monitor, on_X_model_eval/train with their defaults) go to `env.hook(name, ...)` in Lua, which builds
 * the arguments and calls the targets back through the same lists (lp:call_hook), as do the hooks the
 * trainer calls around the loops (setup, on_fit_start, configure_optimizers, ...): one dispatcher.
 *
 * Values of the running step live in a Lua table R (slots below) so nothing is left on the C stack
 * between batches. Errors: a hook that raises is reported as "<hook>[ (callback #i)]: <message>" with
 * the Lua traceback; the message is kept in the registry (it may be longer than ctx->err) and fit_advance
 * returns ("error", message) so the trainer can run on_exception before raising it.
 */
#include <stdlib.h>
#include <string.h>

#include "l_optim.h"
#include "l_prof.h"
#include "l_run.h"
#include "l_util.h"
#include "lt_interrupt.h"
#include "lt_loop.h"

/* The slots of the run's R table: X(ID, "name"), R_ID in C, R[core._seam().run.name] in Lua. */
#define R_SLOT_LIST(X)                                                                                        \
  X(TRAIN_BATCH, "train_batch")   /* the current training batch */                                            \
  X(TRAIN_OUT, "train_out")       /* training_step's raw returns of this batch, per (split, optimizer) */     \
  X(TRAIN_ITER, "train_iter")     /* the training loader's iterator */                                        \
  X(EVAL_BATCH, "eval_batch")     /* the current evaluation batch */                                          \
  X(EVAL_OUT, "eval_out")         /* the last evaluation step's output */                                     \
  X(EVAL_ITER, "eval_iter")       /* the evaluation loader's iterator */                                      \
  X(OPTIMIZERS, "optimizers")     /* the run's optimizers list */                                             \
  X(LOG_DIRTY, "log_dirty")       /* self:log logged step values since the last step event */                 \
  X(EVAL_OUTPUTS, "eval_outputs") /* kept evaluation outputs, one list per dataloader */                      \
  X(CLOSURE, "closure")           /* the optimizer closure given to a user's optimizer_step */                \
  X(BATCH_OUT, "batch_out")       /* the batch's outputs once built (on_train_batch_end, the kept outputs) */ \
  X(LOSS, "loss")                 /* the loss box shared by the targets of on_before_backward / backward */

#define R_SLOT_ENUM_(id, name) R_##id,
enum { R_NONE_ = 0, R_SLOT_LIST(R_SLOT_ENUM_) R_NSLOTS_END, R_NSLOTS = R_NSLOTS_END - 1 };
#undef R_SLOT_ENUM_

/* which targets a hook has; TG_DM: the run's datamodule (env.datamodule), called first, as Lightning's
 * _call_lightning_datamodule_hook before the callbacks' and the model's; TG_DM_ONLY: with a datamodule, the
 * model's hook is not called (the *_dataloader hooks: the datamodule is the data's one source) */
enum { TG_CB = 1, TG_MODEL = 2, TG_LUA = 4 /* dispatched by env.hook in Lua */, TG_DM = 8, TG_DM_ONLY = 16 };

static uint8_t hook_targets[LT_NHOOKS];

static void init_hook_targets(void) {
  for (int h = 0; h < LT_NHOOKS; h++) hook_targets[h] = TG_CB | TG_MODEL;
  static const lt_hook model_only[] = {
    LT_HOOK_PREPARE_DATA,
    LT_HOOK_CONFIGURE_CALLBACKS,
    LT_HOOK_CONFIGURE_OPTIMIZERS,
    LT_HOOK_TRAINING_STEP,
    LT_HOOK_TRAINING_EPOCH_END,
    LT_HOOK_VALIDATION_STEP,
    LT_HOOK_VALIDATION_EPOCH_END,
    LT_HOOK_TEST_STEP,
    LT_HOOK_TEST_EPOCH_END,
    LT_HOOK_PREDICT_STEP,
    LT_HOOK_PREDICT_EPOCH_END,
    LT_HOOK_ON_VALIDATION_MODEL_EVAL,
    LT_HOOK_ON_VALIDATION_MODEL_TRAIN,
    LT_HOOK_ON_TEST_MODEL_EVAL,
    LT_HOOK_ON_TEST_MODEL_TRAIN,
    LT_HOOK_ON_PREDICT_MODEL_EVAL,
    LT_HOOK_ON_PREDICT_MODEL_TRAIN,
    LT_HOOK_OPTIMIZER_ZERO_GRAD,
    LT_HOOK_BACKWARD,
    LT_HOOK_CONFIGURE_GRADIENT_CLIPPING,
    LT_HOOK_OPTIMIZER_STEP,
    LT_HOOK_LR_SCHEDULER_STEP,
    LT_HOOK_TOGGLE_OPTIMIZER,
    LT_HOOK_UNTOGGLE_OPTIMIZER,
  };
  for (size_t i = 0; i < sizeof model_only / sizeof *model_only; i++) hook_targets[model_only[i]] = TG_MODEL;
  hook_targets[LT_HOOK_ON_SANITY_CHECK_START] = TG_CB;
  hook_targets[LT_HOOK_ON_SANITY_CHECK_END] = TG_CB;
  hook_targets[LT_HOOK_ON_EXCEPTION] = TG_CB;
  static const lt_hook lua_side[] = {
    LT_HOOK_TRAINING_EPOCH_END,       LT_HOOK_ON_TRAIN_EPOCH_END,        LT_HOOK_VALIDATION_EPOCH_END,
    LT_HOOK_TEST_EPOCH_END,           LT_HOOK_ON_PREDICT_EPOCH_END,      LT_HOOK_LR_SCHEDULER_STEP,
    LT_HOOK_ON_VALIDATION_MODEL_EVAL, LT_HOOK_ON_VALIDATION_MODEL_TRAIN, LT_HOOK_ON_TEST_MODEL_EVAL,
    LT_HOOK_ON_TEST_MODEL_TRAIN,      LT_HOOK_ON_PREDICT_MODEL_EVAL,     LT_HOOK_ON_PREDICT_MODEL_TRAIN,
    LT_HOOK_TOGGLE_OPTIMIZER,         LT_HOOK_UNTOGGLE_OPTIMIZER,
  };
  for (size_t i = 0; i < sizeof lua_side / sizeof *lua_side; i++) hook_targets[lua_side[i]] |= TG_LUA;
  /* the datamodule's hooks (lua/lutra/datamodule.lua) */
  hook_targets[LT_HOOK_PREPARE_DATA] |= TG_DM;
  hook_targets[LT_HOOK_SETUP] |= TG_DM;
  hook_targets[LT_HOOK_TEARDOWN] |= TG_DM;
  static const lt_hook data_hooks[] = { LT_HOOK_TRAIN_DATALOADER, LT_HOOK_VAL_DATALOADER, LT_HOOK_TEST_DATALOADER,
                                        LT_HOOK_PREDICT_DATALOADER };
  for (size_t i = 0; i < sizeof data_hooks / sizeof *data_hooks; i++)
    hook_targets[data_hooks[i]] = TG_MODEL | TG_DM | TG_DM_ONLY;
}

typedef struct l_target {
  int fn_ref;
  int cb;       /* -1: the model; TARGET_DM: the datamodule; else index into cb_refs */
  int trim;     /* on_train_epoch_end without an outputs parameter: called without its last argument */
  int prof_row; /* the profiler's action "[Callback]<name>.<hook>" (-1: not profiling) */
} l_target;

#define TARGET_DM (-2)

typedef struct l_loops {
  lt_loops lp;
  lt_host host;
  lua_State *L;
  int ref_env, ref_R, ref_trainer, ref_model, ref_msgh, ref_err;
  int ref_dm; /* the run's datamodule (env.datamodule at the last refresh), or LUA_NOREF */
  int ncb, cb_cap;
  int *cb_refs;
  l_target *targets[LT_NHOOKS];
  int ntargets[LT_NHOOKS];
  int cur_hook;    /* the hook running (for self:log's checks), -1 outside */
  int running;     /* runs of the C loops on the stack (with_state): > 0 inside a hook */
  int in_opt_step; /* optimizer_step is running: its closure may be called */
  int nopts;
  lt_optimizer *opts[LT_MAX_OPTIMIZERS];
  lt_tensor **params;
  int params_cap;
  int log_every_n_steps;
  int has_logger;
  int nil_step_warned; /* env.nil_training_step was called in this fit (once per fit, reset by fit_begin) */
} l_loops;

static char err_sentinel; /* raised (as a light userdata) by the closure: the message is already kept */

#define LOOPS_MT "lutra.Loops"

static void release_refs(struct l_loops *H, lua_State *L);

/* ---- small helpers --------------------------------------------------------------------------------- */

static void push_R(l_loops *H, lua_State *L, int slot) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_R);
  lua_rawgeti(L, -1, slot);
  lua_remove(L, -2);
}

static void set_R(l_loops *H, lua_State *L, int slot) { /* pops the value */
  lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_R);
  lua_insert(L, -2);
  lua_rawseti(L, -2, slot);
  lua_pop(L, 1);
}

static void push_tensor(lua_State *L, lt_tensor *t) { l_push_retained(L, t); }

/* Message handler: a traceback, unless the error is already a formatted lutra hook error. */
static int l_msgh(lua_State *L) {
  if (lua_touserdata(L, 1) == &err_sentinel) return 1;
  if (lua_istable(L, 1)) {
    lua_getfield(L, 1, "lutra_hook_error");
    int is = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (is) return 1;
  }
  const char *msg = lua_tostring(L, 1);
  if (!msg) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_isstring(L, -1)) msg = lua_tostring(L, -1);
    else msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* After a failed pcall (error value on top): keep the formatted message, set ctx->err. */
static int failed(l_loops *H, lua_State *L, const char *what, int cb) {
  lt_ctx *c = H->lp.c;
  if (lua_touserdata(L, -1) == &err_sentinel) { /* already reported by an inner call */
    lua_pop(L, 1);
    return LT_ERR;
  }
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "msg");
    lua_remove(L, -2);
  } else if (cb == TARGET_DM) {
    lua_pushfstring(L, "%s (datamodule): %s", what, lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
    lua_remove(L, -2);
  } else if (cb >= 0) {
    lua_pushfstring(L, "%s (callback #%d): %s", what, cb + 1, lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
    lua_remove(L, -2);
  } else if (what) {
    lua_pushfstring(L, "%s: %s", what, lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
    lua_remove(L, -2);
  }
  const char *msg = lua_tostring(L, -1);
  lt_fail(c, "%.1000s", msg ? msg : "error");
  luaL_unref(L, LUA_REGISTRYINDEX, H->ref_err);
  H->ref_err = luaL_ref(L, LUA_REGISTRYINDEX);
  return LT_ERR;
}

/* The one protected call of the binding (as `docall` in Lua's lua.c), in two steps so the per-batch calls
 * move no stack slots: push_handler pushes the message handler (returns its index), the caller pushes the
 * function and its nargs arguments above it, docall makes `hook` the running hook (for self:log's checks;
 * -1 keeps the current one), calls and restores the hook. On success the handler stays under the nres
 * results (the caller's lua_settop(L, handler - 1) removes both); on failure docall keeps the message,
 * prefixed "<what>[ (callback #cb+1)]: " (failed), leaves nothing of the call (not the handler either) and
 * returns LT_ERR. */
static int push_handler(l_loops *H, lua_State *L) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_msgh);
  return lua_gettop(L);
}

static int docall(l_loops *H, lua_State *L, int handler, int nres, int hook, const char *what, int cb) {
  int prev = H->cur_hook;
  if (hook >= 0) H->cur_hook = hook;
  int rc = lua_pcall(L, lua_gettop(L) - handler - 1, nres, handler);
  H->cur_hook = prev;
  if (rc) {
    rc = failed(H, L, what, cb);
    lua_settop(L, handler - 1);
    return rc;
  }
  return LT_OK;
}

/* env[name](...) with nargs arguments on the stack, through docall; leaves nres results (no handler). */
static int call_env_as(l_loops *H, lua_State *L, const char *name, int nargs, int nres, int hook, const char *what) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_env);
  lua_getfield(L, -1, name);
  lua_remove(L, -2);
  lua_insert(L, -nargs - 1); /* function, args... */
  int h = push_handler(H, L) - nargs - 1;
  lua_insert(L, h); /* handler, function, args... */
  if (docall(H, L, h, nres, hook, what, -1) != LT_OK) return LT_ERR;
  lua_remove(L, h);
  return LT_OK;
}

static int call_env(l_loops *H, lua_State *L, const char *name, int nargs, int nres) {
  return call_env_as(H, L, name, nargs, nres, -1, NULL);
}

/* "<kind> dataloader", the prefix of a data error */
static const char *const loader_what[LT_NKINDS] = { "train dataloader", "validation dataloader", "test dataloader",
                                                    "predict dataloader" };

static void push_optimizer(l_loops *H, lua_State *L, int idx) {
  push_R(H, L, R_OPTIMIZERS);
  if (lua_istable(L, -1)) lua_rawgeti(L, -1, idx + 1);
  else lua_pushnil(L);
  lua_remove(L, -2);
}

/* The arguments after self (model) or (self, trainer, model) (callbacks) of the hooks the C side calls. */
static int push_args(l_loops *H, lua_State *L, lt_hook h, const lt_hook_args *a) {
  switch (h) {
    case LT_HOOK_ON_TRAIN_BATCH_START:
      push_R(H, L, R_TRAIN_BATCH);
      lua_pushinteger(L, (lua_Integer)a->batch_idx);
      return 2;
    case LT_HOOK_ON_TRAIN_BATCH_END:
      push_R(H, L, R_BATCH_OUT);
      push_R(H, L, R_TRAIN_BATCH);
      lua_pushinteger(L, (lua_Integer)a->batch_idx);
      return 3;
    case LT_HOOK_ON_VALIDATION_BATCH_START:
    case LT_HOOK_ON_TEST_BATCH_START:
    case LT_HOOK_ON_PREDICT_BATCH_START:
      push_R(H, L, R_EVAL_BATCH);
      lua_pushinteger(L, (lua_Integer)a->batch_idx);
      lua_pushinteger(L, (lua_Integer)a->dataloader_idx);
      return 3;
    case LT_HOOK_ON_VALIDATION_BATCH_END:
    case LT_HOOK_ON_TEST_BATCH_END:
    case LT_HOOK_ON_PREDICT_BATCH_END:
      push_R(H, L, R_EVAL_OUT);
      push_R(H, L, R_EVAL_BATCH);
      lua_pushinteger(L, (lua_Integer)a->batch_idx);
      lua_pushinteger(L, (lua_Integer)a->dataloader_idx);
      return 4;
    case LT_HOOK_ON_BEFORE_ZERO_GRAD: push_optimizer(H, L, a->optimizer_idx); return 1;
    case LT_HOOK_OPTIMIZER_ZERO_GRAD:
      lua_pushinteger(L, (lua_Integer)a->epoch);
      lua_pushinteger(L, (lua_Integer)a->batch_idx);
      push_optimizer(H, L, a->optimizer_idx);
      lua_pushinteger(L, a->optimizer_idx);
      return 4;
    case LT_HOOK_ON_BEFORE_BACKWARD: push_R(H, L, R_LOSS); return 1;
    case LT_HOOK_BACKWARD:
      push_R(H, L, R_LOSS);
      push_optimizer(H, L, a->optimizer_idx);
      lua_pushinteger(L, a->optimizer_idx);
      return 3;
    case LT_HOOK_ON_BEFORE_OPTIMIZER_STEP:
      push_optimizer(H, L, a->optimizer_idx);
      lua_pushinteger(L, a->optimizer_idx);
      return 2;
    case LT_HOOK_CONFIGURE_GRADIENT_CLIPPING:
      push_optimizer(H, L, a->optimizer_idx);
      lua_pushinteger(L, a->optimizer_idx);
      if (H->lp.cfg.gradient_clip_val > 0) {
        lua_pushnumber(L, H->lp.cfg.gradient_clip_val);
        lua_pushstring(L, H->lp.cfg.gradient_clip_algorithm == LT_CLIP_VALUE ? "value" : "norm");
      } else {
        lua_pushnil(L);
        lua_pushnil(L);
      }
      return 4;
    case LT_HOOK_OPTIMIZER_STEP:
      lua_pushinteger(L, (lua_Integer)a->epoch);
      lua_pushinteger(L, (lua_Integer)a->batch_idx);
      push_optimizer(H, L, a->optimizer_idx);
      lua_pushinteger(L, a->optimizer_idx);
      push_R(H, L, R_CLOSURE);
      return 5;
    default: return 0;
  }
}

/* A hook target's call up to its own arguments: the handler (its index is returned), the function, then
 * (callback, trainer, model) for a callback or (model) for the model. */
static int push_target(l_loops *H, lua_State *L, const l_target *t) {
  int handler = push_handler(H, L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, t->fn_ref);
  if (t->cb == TARGET_DM) { /* a datamodule's hook gets (dm, ...) */
    lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_dm);
    return handler;
  }
  if (t->cb >= 0) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, H->cb_refs[t->cb]);
    lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_trainer);
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_model);
  return handler;
}

static int call_target(l_loops *H, lua_State *L, lt_hook h, const l_target *t, lt_hook_args *a) {
  int handler = push_target(H, L, t);
  push_args(H, L, h, a);
  if (H->lp.prof) lt_prof_enter(H->lp.prof, t->prof_row);
  int rc = docall(H, L, handler, 1, h, lt_hook_names[h], t->cb);
  if (H->lp.prof) lt_prof_exit(H->lp.prof);
  if (rc != LT_OK) return LT_ERR;
  if (h == LT_HOOK_ON_TRAIN_BATCH_START && t->cb < 0 && lua_type(L, -1) == LUA_TNUMBER && lua_tonumber(L, -1) == -1)
    a->ret = -1;
  lua_settop(L, handler - 1);
  return LT_OK;
}

/* ---- the lt_host implementation ----------------------------------------------------------------------- */

static void clear_targets(l_loops *H, lua_State *L) {
  for (int h = 0; h < LT_NHOOKS; h++) {
    for (int i = 0; i < H->ntargets[h]; i++) luaL_unref(L, LUA_REGISTRYINDEX, H->targets[h][i].fn_ref);
    H->ntargets[h] = 0;
    H->lp.defined[h] = 0;
  }
}

/* The number of named parameters of the function on top (LuaJIT's C API has no nparams), through
 * lutra._compat.nparams (debug.getinfo's nparams, or read from string.dump under PUC 5.1, whose getinfo has
 * none); 0 when unknown. The epoch-output rule: an on_train_epoch_end that takes outputs gets them
 * (Lightning's signature check). */
static int fn_nparams(lua_State *L) {
  int top = lua_gettop(L);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "lutra._compat");
  int n = 0;
  if (lua_pcall(L, 1, 1, 0) == 0 && lua_istable(L, -1)) {
    lua_getfield(L, -1, "nparams");
    lua_pushvalue(L, top);
    if (lua_pcall(L, 1, 1, 0) == 0) n = (int)lua_tointeger(L, -1);
  }
  lua_settop(L, top);
  return n;
}

/* The profiler's action of target cb (-1: the model, TARGET_DM: the datamodule) of hook h:
 * "[Callback]<env.prof_names[cb+1]>.<hook>", "[LightningModule]<env.prof_names.model>.<hook>",
 * "[LightningDataModule]<env.prof_names.datamodule>.<hook>" (names the Lua profiler gives; a callback's state key). */
static int prof_action(l_loops *H, lua_State *L, int cb, lt_hook h) {
  int top = lua_gettop(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_env);
  lua_getfield(L, -1, "prof_names");
  const char *name = NULL;
  if (lua_istable(L, -1)) {
    if (cb >= 0) lua_rawgeti(L, -1, cb + 1);
    else lua_getfield(L, -1, cb == TARGET_DM ? "datamodule" : "model");
    name = lua_tostring(L, -1);
  }
  char buf[LT_PROF_NAME];
  const char *hook = lt_hook_names[h];
  if (cb >= 0) snprintf(buf, sizeof buf, "[Callback]%s.%s", name ? name : "Callback", hook);
  else if (cb == TARGET_DM) snprintf(buf, sizeof buf, "[LightningDataModule]%s.%s", name ? name : "DataModule", hook);
  else snprintf(buf, sizeof buf, "[LightningModule]%s.%s", name ? name : "LightningModule", hook);
  lua_settop(L, top);
  return lt_prof_action(H->lp.prof, buf);
}

static int h_refresh(void *ud, lt_loops *lp, int epoch_start) {
  l_loops *H = ud;
  lua_State *L = H->L;
  clear_targets(H, L);
  for (int i = 0; i < H->ncb; i++) luaL_unref(L, LUA_REGISTRYINDEX, H->cb_refs[i]);
  H->ncb = 0;
  luaL_unref(L, LUA_REGISTRYINDEX, H->ref_dm);
  H->ref_dm = LUA_NOREF;
  lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_env);
  lua_getfield(L, -1, "datamodule");
  if (lua_istable(L, -1)) H->ref_dm = luaL_ref(L, LUA_REGISTRYINDEX);
  else lua_pop(L, 1);
  lua_getfield(L, -1, "cb_order");
  int ncb = lua_istable(L, -1) ? (int)lua_objlen(L, -1) : 0;
  if (ncb > H->cb_cap) {
    int *p = realloc(H->cb_refs, sizeof(int) * (size_t)ncb);
    if (!p) {
      lua_pop(L, 2);
      return lt_fail(lp->c, "loops: out of memory");
    }
    H->cb_refs = p;
    H->cb_cap = ncb;
    for (int h = 0; h < LT_NHOOKS; h++) {
      l_target *q = realloc(H->targets[h], sizeof(l_target) * (size_t)(ncb + 2));
      if (!q) {
        lua_pop(L, 2);
        return lt_fail(lp->c, "loops: out of memory");
      }
      H->targets[h] = q;
    }
  }
  for (int i = 0; i < ncb; i++) {
    lua_rawgeti(L, -1, i + 1);
    H->cb_refs[i] = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  H->ncb = ncb;
  lua_pop(L, 2);
  for (int h = 0; h < LT_NHOOKS; h++) {
    if (!H->targets[h]) { /* first refresh: room for the datamodule and the model */
      H->targets[h] = malloc(sizeof(l_target) * (size_t)(H->cb_cap + 2));
      if (!H->targets[h]) return lt_fail(lp->c, "loops: out of memory");
    }
    const char *name = lt_hook_names[h];
    if ((hook_targets[h] & TG_DM) && H->ref_dm != LUA_NOREF) {
      lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_dm);
      lua_getfield(L, -1, name);
      if (lua_isfunction(L, -1)) {
        l_target *t = &H->targets[h][H->ntargets[h]++];
        t->cb = TARGET_DM;
        t->trim = 0;
        t->fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        t->prof_row = H->lp.prof ? prof_action(H, L, TARGET_DM, h) : -1;
      } else {
        lua_pop(L, 1);
      }
      lua_pop(L, 1);
    }
    if (hook_targets[h] & TG_CB) {
      for (int i = 0; i < ncb; i++) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, H->cb_refs[i]);
        lua_getfield(L, -1, name);
        if (lua_isfunction(L, -1)) {
          l_target *t = &H->targets[h][H->ntargets[h]++];
          t->cb = i;
          t->trim = h == LT_HOOK_ON_TRAIN_EPOCH_END && fn_nparams(L) < 4;
          t->fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
          t->prof_row = H->lp.prof ? prof_action(H, L, i, h) : -1;
        } else {
          lua_pop(L, 1);
        }
        lua_pop(L, 1);
      }
    }
    if ((hook_targets[h] & TG_MODEL) && !((hook_targets[h] & TG_DM_ONLY) && H->ref_dm != LUA_NOREF)) {
      lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_model);
      lua_getfield(L, -1, name);
      if (lua_isfunction(L, -1)) {
        l_target *t = &H->targets[h][H->ntargets[h]++];
        t->cb = -1;
        t->trim = h == LT_HOOK_ON_TRAIN_EPOCH_END && fn_nparams(L) < 2;
        t->fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        t->prof_row = H->lp.prof ? prof_action(H, L, -1, h) : -1;
      } else {
        lua_pop(L, 1);
      }
      lua_pop(L, 1);
    }
    lp->defined[h] = H->ntargets[h] > 0;
  }
  if (epoch_start) { /* the epoch-output rule: training_epoch_end, or an on_train_epoch_end taking outputs */
    int old = 0;
    for (int i = 0; i < H->ntargets[LT_HOOK_ON_TRAIN_EPOCH_END]; i++)
      if (!H->targets[LT_HOOK_ON_TRAIN_EPOCH_END][i].trim) old = 1;
    lp->keep_train_outputs = H->ntargets[LT_HOOK_TRAINING_EPOCH_END] > 0 || old;
    if (old && call_env(H, L, "deprecated_outputs", 0, 0) != LT_OK) return LT_ERR;
  }
  return LT_OK;
}

static const char *kind_name(lt_kind k) { return lt_kind_names[k]; }

/* A training_step loss as the batch's outputs keep it (Lightning's): detached, divided by
 * accumulate_grad_batches under automatic optimization. A new reference, or NULL (ctx->err). */
static lt_tensor *output_loss(l_loops *H, lt_tensor *t) {
  const lt_loop_cfg *cfg = &H->lp.cfg;
  lt_ctx *c = H->lp.c;
  lt_tensor *d = lt_op_detach(c, t);
  int64_t n = cfg->automatic_optimization && cfg->accumulate_grad_batches > 1 ? cfg->accumulate_grad_batches : 1;
  if (d && n > 1) {
    lt_tensor *q = lt_op_binary_scalar(c, LT_DIV, d, (double)n, 0);
    lt_tensor_release(d);
    d = q;
  }
  return d;
}

/* The batch's outputs as on_train_batch_end and training_epoch_end see them, into R[R_BATCH_OUT] (once
 * per batch). The common case (one optimizer, no TBPTT, training_step returned a tensor) is built here:
 * {loss = output_loss(loss)}; the others by env.batch_output (which calls lp:output_loss for the losses). */
static int build_batch_output(l_loops *H, lua_State *L) {
  push_R(H, L, R_BATCH_OUT);
  int have = !lua_isnil(L, -1);
  lua_pop(L, 1);
  if (have) return LT_OK;
  const lt_loop_cfg *cfg = &H->lp.cfg;
  int simple = cfg->tbptt_steps == 0 && (cfg->n_optimizers <= 1 || !cfg->automatic_optimization);
  if (simple) {
    push_R(H, L, R_TRAIN_OUT);
    lua_rawgeti(L, -1, 1);
    lt_tensor *t = l_totensor(L, -1);
    int nil = lua_isnil(L, -1);
    lua_pop(L, 2);
    if (nil) return LT_OK;
    if (t) {
      lt_tensor *d = output_loss(H, t);
      if (!d) return LT_ERR;
      lua_createtable(L, 0, 1);
      push_tensor(L, d);
      lt_tensor_release(d);
      lua_setfield(L, -2, "loss");
      set_R(H, L, R_BATCH_OUT);
      return LT_OK;
    }
  }
  return call_env(H, L, "batch_output", 0, 0); /* sets R[R_BATCH_OUT] */
}

static int h_call(void *ud, lt_hook h, lt_hook_args *a) {
  l_loops *H = ud;
  lua_State *L = H->L;
  if (hook_targets[h] & TG_LUA) {
    lua_pushstring(L, lt_hook_names[h]);
    lua_pushinteger(L, (lua_Integer)a->batch_idx);
    lua_pushinteger(L, (lua_Integer)a->dataloader_idx);
    lua_pushinteger(L, a->optimizer_idx);
    lua_pushinteger(L, a->scheduler_idx);
    return call_env_as(H, L, "hook", 5, 0, h, lt_hook_names[h]);
  }
  if (h == LT_HOOK_ON_TRAIN_BATCH_END && build_batch_output(H, L) != LT_OK) return LT_ERR;
  int loss_slot = h == LT_HOOK_ON_BEFORE_BACKWARD || h == LT_HOOK_BACKWARD;
  if (loss_slot) {
    push_tensor(L, a->loss);
    set_R(H, L, R_LOSS);
  }
  int in = H->in_opt_step;
  if (h == LT_HOOK_OPTIMIZER_STEP) H->in_opt_step = 1;
  int rc = LT_OK;
  for (int i = 0; i < H->ntargets[h] && rc == LT_OK; i++) rc = call_target(H, L, h, &H->targets[h][i], a);
  H->in_opt_step = in;
  if (loss_slot) {
    lua_pushnil(L);
    set_R(H, L, R_LOSS);
  }
  return rc;
}

static int h_data_start(void *ud, lt_kind kind, int64_t dl) {
  l_loops *H = ud;
  lua_State *L = H->L;
  lua_pushstring(L, kind_name(kind));
  lua_pushinteger(L, (lua_Integer)dl);
  return call_env_as(H, L, "data_start", 2, 0, -1, loader_what[kind]);
}

static int h_data_next(void *ud, lt_kind kind, int64_t dl, int *got) {
  l_loops *H = ud;
  lua_State *L = H->L;
  (void)dl;
  int train = kind == LT_KIND_TRAIN;
  int handler = push_handler(H, L);
  push_R(H, L, train ? R_TRAIN_ITER : R_EVAL_ITER);
  if (docall(H, L, handler, 1, -1, loader_what[kind], -1) != LT_OK) return LT_ERR;
  *got = !lua_isnil(L, -1);
  set_R(H, L, train ? R_TRAIN_BATCH : R_EVAL_BATCH);
  lua_settop(L, handler - 1);
  return LT_OK;
}

static int h_split_batch(void *ud, int tbptt_steps, int *n) {
  l_loops *H = ud;
  lua_State *L = H->L;
  lua_pushinteger(L, tbptt_steps);
  if (call_env(H, L, "split_batch", 1, 1) != LT_OK) return LT_ERR;
  *n = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  return LT_OK;
}

/* Reads training_step's return value (top of the stack) into *loss. */
static int classify_output(l_loops *H, lua_State *L, lt_tensor **loss) {
  int automatic = H->lp.cfg.automatic_optimization;
  int t = lua_type(L, -1);
  *loss = NULL;
  if (t == LUA_TNIL) { /* a skipped batch: with automatic optimization, said once per fit */
    if (!automatic || H->nil_step_warned) return LT_OK;
    H->nil_step_warned = 1;
    return call_env(H, L, "nil_training_step", 0, 0);
  }
  lt_tensor *x = l_totensor(L, -1);
  if (x) {
    *loss = x;
    return LT_OK;
  }
  if (t == LUA_TTABLE) {
    lua_getfield(L, -1, "loss");
    x = l_totensor(L, -1);
    int nil = lua_isnil(L, -1);
    const char *tn = luaL_typename(L, -1);
    lua_pop(L, 1);
    if (x) {
      *loss = x;
      return LT_OK;
    }
    if (!nil) return lt_fail(H->lp.c, "training_step: the returned table's 'loss' must be a tensor, got a %s", tn);
    if (automatic)
      return lt_fail(H->lp.c, "training_step: the returned table has no 'loss' field (automatic optimization needs "
                              "one; return nil to skip the batch)");
    return LT_OK;
  }
  return lt_fail(H->lp.c, "training_step must return a loss tensor, a table with a 'loss' field, or nil; got a %s",
                 luaL_typename(L, -1));
}

static int h_training_step(void *ud, lt_hook_args *a, lt_tensor **loss) {
  l_loops *H = ud;
  lua_State *L = H->L;
  int nopt = H->lp.cfg.n_optimizers > 0 ? H->lp.cfg.n_optimizers : 1;
  int opt = a->optimizer_idx >= 0 ? a->optimizer_idx : 0;
  int slot = a->split_idx * nopt + opt + 1;
  int base = lua_gettop(L);
  if (H->lp.cfg.tbptt_steps > 0) {
    lua_pushinteger(L, (lua_Integer)a->batch_idx);
    lua_pushinteger(L, a->optimizer_idx);
    lua_pushinteger(L, a->split_idx);
    if (call_env_as(H, L, "tbptt_training_step", 3, 1, LT_HOOK_TRAINING_STEP, "training_step") != LT_OK) return LT_ERR;
  } else {
    if (H->ntargets[LT_HOOK_TRAINING_STEP] == 0) return lt_fail(H->lp.c, "fit: the model has no training_step");
    int handler = push_handler(H, L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, H->targets[LT_HOOK_TRAINING_STEP][0].fn_ref);
    lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_model);
    push_R(H, L, R_TRAIN_BATCH);
    lua_pushinteger(L, (lua_Integer)a->batch_idx);
    if (H->lp.cfg.automatic_optimization && H->lp.cfg.n_optimizers > 1) lua_pushinteger(L, a->optimizer_idx);
    if (docall(H, L, handler, 1, LT_HOOK_TRAINING_STEP, "training_step", -1) != LT_OK) return LT_ERR;
  }
  /* keep the output alive in R[R_TRAIN_OUT][slot] */
  push_R(H, L, R_TRAIN_OUT);
  lua_pushvalue(L, -2);
  lua_rawseti(L, -2, slot);
  lua_pop(L, 1);
  int rc = classify_output(H, L, loss);
  lua_settop(L, base);
  return rc;
}

static int h_eval_step(void *ud, lt_hook_args *a) {
  l_loops *H = ud;
  lua_State *L = H->L;
  const lt_eval_hooks *E = lt_eval_hooks_of(a->kind);
  int base = lua_gettop(L);
  lt_hook step = E->step;
  if (H->ntargets[step] == 0) {
    if (a->kind != LT_KIND_PREDICT) return lt_fail(H->lp.c, "the model has no %s", lt_hook_names[step]);
    push_R(H, L, R_EVAL_BATCH);
    lua_pushinteger(L, (lua_Integer)a->batch_idx);
    lua_pushinteger(L, (lua_Integer)a->dataloader_idx);
    if (call_env_as(H, L, "default_predict_step", 3, 1, step, lt_hook_names[step]) != LT_OK) return LT_ERR;
  } else {
    int handler = push_handler(H, L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, H->targets[step][0].fn_ref);
    lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_model);
    push_R(H, L, R_EVAL_BATCH);
    lua_pushinteger(L, (lua_Integer)a->batch_idx);
    if (a->n_dataloaders > 1) lua_pushinteger(L, (lua_Integer)a->dataloader_idx);
    if (docall(H, L, handler, 1, step, lt_hook_names[step], -1) != LT_OK) return LT_ERR;
  }
  int keep = a->kind == LT_KIND_PREDICT || H->lp.defined[E->epoch_end_model];
  if (keep && !lua_isnil(L, -1)) {
    push_R(H, L, R_EVAL_OUTPUTS);
    lua_rawgeti(L, -1, (int)a->dataloader_idx + 1);
    if (!lua_istable(L, -1)) {
      lua_pop(L, 1);
      lua_newtable(L);
      lua_pushvalue(L, -1);
      lua_rawseti(L, -3, (int)a->dataloader_idx + 1);
    }
    lua_pushvalue(L, -3);
    lua_rawseti(L, -2, (int)lua_objlen(L, -2) + 1);
    lua_pop(L, 2);
  }
  set_R(H, L, R_EVAL_OUT);
  lua_settop(L, base);
  return LT_OK;
}

static int lua_opt_method(l_loops *H, int opt_idx, const char *method) {
  lua_State *L = H->L;
  int handler = push_handler(H, L);
  push_optimizer(H, L, opt_idx);
  if (lua_isnil(L, -1)) {
    lua_settop(L, handler - 1);
    return lt_fail(H->lp.c, "fit: no optimizer %d (configure_optimizers returned %d)", opt_idx + 1, H->nopts);
  }
  lua_getfield(L, -1, method);
  lua_insert(L, -2);
  char what[64];
  snprintf(what, sizeof what, "optimizer %d:%s", opt_idx + 1, method);
  if (docall(H, L, handler, 0, -1, what, -1) != LT_OK) return LT_ERR;
  lua_settop(L, handler - 1);
  return LT_OK;
}

static int h_optimizer_step(void *ud, int opt_idx) {
  l_loops *H = ud;
  lt_optimizer *o = opt_idx < H->nopts ? H->opts[opt_idx] : NULL;
  if (o) return lt_optim_step(H->lp.c, o) ? lt_fail_prefix(H->lp.c, "optimizer step") : LT_OK;
  return lua_opt_method(H, opt_idx, "step");
}

static int h_zero_grad(void *ud, int opt_idx) {
  l_loops *H = ud;
  lt_optimizer *o = opt_idx < H->nopts ? H->opts[opt_idx] : NULL;
  if (o) return lt_optim_zero_grad(H->lp.c, o, 0);
  return lua_opt_method(H, opt_idx, "zero_grad");
}

static int reserve_params(l_loops *H, int n) {
  if (n <= H->params_cap) return LT_OK;
  lt_tensor **p = realloc(H->params, sizeof(lt_tensor *) * (size_t)n);
  if (!p) return lt_fail(H->lp.c, "loops: out of memory");
  H->params = p;
  H->params_cap = n;
  return LT_OK;
}

static int h_opt_params(void *ud, int opt_idx, int *n, lt_tensor *const **params) {
  l_loops *H = ud;
  lua_State *L = H->L;
  lt_optimizer *o = opt_idx < H->nopts ? H->opts[opt_idx] : NULL;
  *n = 0;
  if (o) {
    int total = lt_optim_num_params(o);
    if (reserve_params(H, total)) return LT_ERR;
    for (int g = 0; g < lt_optim_num_groups(o); g++)
      for (int i = 0; i < lt_optim_group_size(o, g); i++) H->params[(*n)++] = lt_optim_group_param(o, g, i);
    *params = H->params;
    return LT_OK;
  }
  lua_pushinteger(L, opt_idx);
  if (call_env(H, L, "opt_params", 1, 1) != LT_OK) return LT_ERR;
  int m = lua_istable(L, -1) ? (int)lua_objlen(L, -1) : 0;
  if (reserve_params(H, m)) {
    lua_pop(L, 1);
    return LT_ERR;
  }
  for (int i = 1; i <= m; i++) {
    lua_rawgeti(L, -1, i);
    lt_tensor *t = l_totensor(L, -1);
    lua_pop(L, 1);
    if (t) H->params[(*n)++] = t; /* kept alive by the optimizer's param groups */
  }
  lua_pop(L, 1);
  *params = H->params;
  return LT_OK;
}

static int log_dirty(l_loops *H, lua_State *L) {
  push_R(H, L, R_LOG_DIRTY);
  int d = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return d;
}

static int h_event(void *ud, lt_event ev, lt_hook_args *a) {
  l_loops *H = ud;
  lua_State *L = H->L;
  switch (ev) {
    case LT_EV_TRAIN_BATCH_END:
      if (H->lp.keep_train_outputs) {
        if (build_batch_output(H, L) != LT_OK) return LT_ERR;
        if (call_env(H, L, "keep_output", 0, 1) != LT_OK) return LT_ERR;
        if (lua_toboolean(L, -1)) a->ret = 1;
        lua_pop(L, 1);
      }
      lua_pushnil(L);
      set_R(H, L, R_BATCH_OUT);
      if (log_dirty(H, L)) {
        lua_pushstring(L, "train_step");
        return call_env(H, L, "event", 1, 0);
      }
      return LT_OK;
    case LT_EV_TRAIN_BATCH_DONE: {
      int64_t n = H->log_every_n_steps > 0 ? H->log_every_n_steps : 1;
      if (!H->has_logger || H->lp.fit_loop.epoch_loop.batches_that_stepped % n != 0) return LT_OK;
      lua_pushstring(L, "save_logger");
      return call_env(H, L, "event", 1, 0);
    }
    case LT_EV_EVAL_BATCH_END:
      if (!log_dirty(H, L)) return LT_OK;
      lua_pushstring(L, "eval_step");
      lua_pushinteger(L, (lua_Integer)a->dataloader_idx);
      lua_pushinteger(L, (lua_Integer)a->batch_idx);
      return call_env(H, L, "event", 3, 0);
    default: {
      static const char *const names[LT_NEVENTS] = {
        [LT_EV_TRAIN_EPOCH_START] = "train_epoch_start",
        [LT_EV_TRAIN_EPOCH_END_REACHED] = "train_epoch_end_reached",
        [LT_EV_TRAIN_EPOCH_END] = "train_epoch_end",
        [LT_EV_TRAIN_EPOCH_LOG] = "train_epoch_log",
        [LT_EV_EVAL_START] = "eval_start",
        [LT_EV_EVAL_DATALOADER_END] = "eval_dataloader_end",
        [LT_EV_EVAL_EPOCH_END] = "eval_epoch_end",
        [LT_EV_EVAL_END] = "eval_end",
        [LT_EV_SANITY_LOADERS] = "sanity_loaders",
        [LT_EV_FIT_LOADERS] = "fit_loaders",
      };
      lua_pushstring(L, names[ev]);
      lua_pushinteger(L, (lua_Integer)a->dataloader_idx);
      lua_pushstring(L, kind_name(a->kind));
      return call_env(H, L, "event", 3, 0);
    }
  }
}

static int h_run_custom(void *ud, int slot, lt_hook_args *a) {
  l_loops *H = ud;
  (void)a;
  lua_pushinteger(H->L, slot);
  return call_env(H, H->L, "run_custom", 1, 0);
}

/* ---- the optimizer closure given to a user's optimizer_step ------------------------------------------- */

static int l_opt_closure(lua_State *L) {
  l_loops *H = lua_touserdata(L, lua_upvalueindex(3));
  if (!H->in_opt_step) return luaL_error(L, "optimizer_closure: may only be called inside optimizer_step");
  lua_State *saved = H->L;
  H->L = L;
  int has = 0;
  int rc = lt_loops_closure(&H->lp, 1, &has);
  H->L = saved;
  if (rc != LT_OK) {
    if (H->ref_err == LUA_NOREF) { /* a core failure: keep its message like a hook's */
      lua_pushstring(L, H->lp.c->err);
      H->ref_err = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    lua_pushlightuserdata(L, &err_sentinel);
    return lua_error(L);
  }
  if (has && H->lp.closure_loss) return l_push(L, lt_op_detach(L_CTX(L), H->lp.closure_loss));
  lua_pushnil(L);
  return 1;
}

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
  lt_loops_clear(&H->lp);
  free_prof(H);
  H->lp.c = NULL;
  return 0;
}

static void release_refs(l_loops *H, lua_State *L) {
  clear_targets(H, L);
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
  H->ref_env = H->ref_R = H->ref_trainer = H->ref_model = H->ref_msgh = H->ref_err = H->ref_dm = LUA_NOREF;
  luaL_getmetatable(L, LOOPS_MT);
  lua_setmetatable(L, -2);
  H->host =
      (lt_host){ H,           h_refresh,        h_call,      h_data_start, h_data_next, h_split_batch, h_training_step,
                 h_eval_step, h_optimizer_step, h_zero_grad, h_opt_params, h_event,     h_run_custom };
  lt_loops_init(&H->lp, L_CTX(L), &H->host);
  H->cur_hook = -1;
  H->log_every_n_steps = 50;
  H->L = L;
  lua_pushcfunction(L, l_msgh);
  H->ref_msgh = luaL_ref(L, LUA_REGISTRYINDEX);
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
  return 0;
}

static int l_detach(lua_State *L) {
  l_loops *H = check_idle_loops(L, "detach");
  release_refs(H, L);
  lt_loops_clear(&H->lp);
  return 0;
}

static int with_state(lua_State *L, l_loops *H, int (*fn)(l_loops *, void *), void *arg) {
  lua_State *saved = H->L;
  H->L = L;
  l_run_enter();
  H->running++;
  /* No lt_fp_enter here: the loops' C work calls the Lua API and the hooks' Lua code, which must run in the
   * caller's floating-point mode. Under DAZ LuaJIT reads a denormal double as 0 where it asks "is this
   * number an integer?", so a table's denormal keys (jit.profile's registry entries) land on key 0 when the
   * table grows: the sampler's thread was unanchored and collected, and the advanced profiler crashed. The
   * computing parts (backward, the optimizer step, the pool's kernels) enter lutra's mode themselves. */
  int rc = fn(H, arg);
  H->running--;
  l_run_leave();
  H->L = saved;
  return rc;
}

static int do_refresh(l_loops *H, void *arg) { return h_refresh(H, &H->lp, arg != NULL); }

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

/* lp:set_cfg{...}: the numbers the trainer computed (lt_loop_cfg). */
/* lp:set_epoch_data{num_training_batches=, val_check_batch=, num_val_batches=, num_sanity_val_batches=,
 * enable_validation=, val_loaders_pending=, accumulate_grad_batches=}: the loaders' sizes again inside a run:
 * when the data hooks' loaders arrive (the sanity_loaders and fit_loaders events) and at a training epoch
 * start (reload_dataloaders_every_n_epochs, GradientAccumulationScheduler: lua/lutra/trainer.lua's
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
  int64_t acc = opt_int(L, 2, "accumulate_grad_batches", c->accumulate_grad_batches);
  if (acc < 1) return luaL_error(L, "set_epoch_data: accumulate_grad_batches must be >= 1, got %d", (int)acc);
  c->accumulate_grad_batches = acc;
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
  c->accumulate_grad_batches = opt_int(L, 2, "accumulate_grad_batches", c->accumulate_grad_batches);
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
 * targets (callbacks in dispatch order, then the model: the lists the C loops call) through docall;
 * callbacks get (cb, trainer, model, ...), the model (model, ...). The trainer's one way to call a hook. */
static int l_call_hook(lua_State *L) {
  l_loops *H = check_loops(L);
  const char *name = l_checkstring(L, 2);
  int h = lt_hook_from_name(name);
  if (h < 0) return luaL_error(L, "loops: unknown hook '%s'", name);
  if (H->ref_R == LUA_NOREF) return luaL_error(L, "loops: call_hook('%s') outside a run", name);
  int nargs = lua_gettop(L) - 2;
  lua_pushnil(L); /* the model's result */
  int res = lua_gettop(L);
  lua_State *saved = H->L;
  H->L = L;
  for (int i = 0; i < H->ntargets[h]; i++) {
    const l_target *t = &H->targets[h][i];
    int handler = push_target(H, L, t);
    int m = t->trim && nargs > 0 ? nargs - 1 : nargs;
    for (int k = 0; k < m; k++) lua_pushvalue(L, 3 + k);
    if (H->lp.prof) lt_prof_enter(H->lp.prof, t->prof_row);
    int rc = docall(H, L, handler, 1, h, lt_hook_names[h], t->cb);
    if (H->lp.prof) lt_prof_exit(H->lp.prof);
    if (rc != LT_OK) {
      H->L = saved;
      return raise_status(L, H, LT_ERR);
    }
    if (t->cb < 0) lua_replace(L, res); /* the model's (or, for a data hook, the datamodule's) result */
    lua_settop(L, handler - 1);
  }
  H->L = saved;
  lua_pushinteger(L, H->ntargets[h]);
  return 2;
}

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
static int l_output_loss(lua_State *L) {
  l_loops *H = check_loops(L);
  lt_tensor *t = l_checktensor(L, 2, "output_loss");
  return l_push(L, output_loss(H, t)); /* (NULL: raises ctx's error) */
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
 *   run   = {train_batch = 1, ...}                           (the R table's slots, R_SLOT_LIST) */
static int l_seam(lua_State *L) {
  lua_createtable(L, 0, 2);
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
  init_hook_targets();
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
                                      /* the profiler */
                                      { "profiler", l_profiler },
                                      { "profiler_clock", l_profiler_clock },
                                      { "profiler_ops", l_profiler_ops },
                                      { "profiler_enter", l_profiler_enter },
                                      { "profiler_exit", l_profiler_exit },
                                      { "profiler_rows", l_profiler_rows },
                                      { "profiler_reset", l_profiler_reset },
                                      { "output_loss", l_output_loss },
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
}
