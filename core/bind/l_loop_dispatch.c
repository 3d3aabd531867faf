/*
 * l_loop_dispatch.c — the hook dispatcher of the loops' binding: which targets each hook has, and the one
 * function every hook call goes through (l_hook_dispatch), with one error rule.
 *
 * Targets: at run start and at each training epoch start, `refresh` builds per hook the list of targets that
 * define it — the datamodule for its hooks, the callbacks in the order the trainer gives (env.cb_order:
 * built-in ModelCheckpoint last), then the model — holding registry references to the functions, and fills
 * lp->defined. An absent hook is an empty list the core does not even call. "Is hook h defined on t" is
 * asked in one place, hook_fn (also core._hook_defined for the trainer's checks before a run).
 *
 * Calls: l_hook_dispatch calls each target of a hook with the arguments its caller gives (a pusher), through
 * l_docall and the one message handler (l_msgh.h). Its callers:
 *   - the C loops: host->call = l_hook_call_host (arguments from lt_hook_args, push_args below);
 *   - training_step and the evaluation steps (l_loop_host.c, through l_hook_call);
 *   - the hooks whose arguments live in Lua (TG_LUA: the epoch-end hooks with outputs, lr_scheduler_step,
 *     on_X_model_eval/train, toggle/untoggle_optimizer): env.hook_args builds them, the dispatcher calls the
 *     targets, env.hook_after runs the default when no target defines the hook (lua/lutra/trainer/host.lua);
 *   - the trainer's own calls (setup, on_fit_start, configure_optimizers, ..., on_exception), lp:call_hook.
 * One target's hook outside the lists, with or without a run (lutra.checkpoint's hooks), goes through
 * core._call_hook_target: the same handler and error rule, raised instead of kept.
 * The error rule: a target that raises fails the call with "<hook>[ (callback #i)| (datamodule)]: <message>"
 * and its traceback (the rule: l_hook_error_msg in l_loop_call.c); the message is kept in the registry (it
 * may be longer than ctx->err) for fit_advance's ("error", message). In the collecting mode (on_exception)
 * every target runs and the failures are gathered instead.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "l_loop_call.h"

uint8_t l_hook_targets[LT_NHOOKS];

static void fill_hook_targets(void) {
  uint8_t *tg = l_hook_targets;
  for (int h = 0; h < LT_NHOOKS; h++) tg[h] = TG_CB | TG_MODEL;
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
  for (size_t i = 0; i < sizeof model_only / sizeof *model_only; i++) tg[model_only[i]] = TG_MODEL;
  tg[LT_HOOK_ON_SANITY_CHECK_START] = TG_CB;
  tg[LT_HOOK_ON_SANITY_CHECK_END] = TG_CB;
  tg[LT_HOOK_ON_EXCEPTION] = TG_CB;
  /* the hooks whose arguments live in Lua: the one declaration (core._seam().hooks[name].lua_side) */
  static const lt_hook lua_side[] = {
    LT_HOOK_TRAINING_EPOCH_END,       LT_HOOK_ON_TRAIN_EPOCH_END,        LT_HOOK_VALIDATION_EPOCH_END,
    LT_HOOK_TEST_EPOCH_END,           LT_HOOK_ON_PREDICT_EPOCH_END,      LT_HOOK_LR_SCHEDULER_STEP,
    LT_HOOK_ON_VALIDATION_MODEL_EVAL, LT_HOOK_ON_VALIDATION_MODEL_TRAIN, LT_HOOK_ON_TEST_MODEL_EVAL,
    LT_HOOK_ON_TEST_MODEL_TRAIN,      LT_HOOK_ON_PREDICT_MODEL_EVAL,     LT_HOOK_ON_PREDICT_MODEL_TRAIN,
    LT_HOOK_TOGGLE_OPTIMIZER,         LT_HOOK_UNTOGGLE_OPTIMIZER,
  };
  for (size_t i = 0; i < sizeof lua_side / sizeof *lua_side; i++) tg[lua_side[i]] |= TG_LUA;
  /* the datamodule's hooks (lua/lutra/data/datamodule.lua) */
  tg[LT_HOOK_PREPARE_DATA] |= TG_DM;
  tg[LT_HOOK_SETUP] |= TG_DM;
  tg[LT_HOOK_TEARDOWN] |= TG_DM;
  static const lt_hook data_hooks[] = { LT_HOOK_TRAIN_DATALOADER, LT_HOOK_VAL_DATALOADER, LT_HOOK_TEST_DATALOADER,
                                        LT_HOOK_PREDICT_DATALOADER };
  for (size_t i = 0; i < sizeof data_hooks / sizeof *data_hooks; i++) tg[data_hooks[i]] = TG_MODEL | TG_DM | TG_DM_ONLY;
}

/* Once per process: every Lua state that opens lutra calls this, maybe in several threads at once, and the
 * table is read by the states already running loops. */
void l_hook_targets_init(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, fill_hook_targets);
}

/* Pushes obj[name] when it is a function (obj at index idx), else pushes nothing and returns 0: the one
 * answer to "does this target define hook name". */
static int hook_fn(lua_State *L, int idx, const char *name) {
  lua_getfield(L, idx, name);
  if (lua_isfunction(L, -1)) return 1;
  lua_pop(L, 1);
  return 0;
}

/* The message of a hook that failed outside the dispatch lists (the error value on top, as l_msgh left it):
 * the one error rule (l_hook_error_msg), the position of the error() that raised it dropped from the first
 * line (it is in the traceback) and suffix put after that line. Leaves the message, or the loops' sentinel. */
static void target_error(lua_State *L, const char *hook, int cb, const char *suffix) {
  int named = lua_istable(L, -1); /* a hook error of an inner call: its message as it is */
  if (!l_hook_error_msg(L, NULL, -1) || named) return;
  const char *msg = lua_tostring(L, -1);
  const char *tb = strstr(msg, "\nstack traceback:\n");
  size_t head = tb ? (size_t)(tb - msg) : strlen(msg);
  const char *p = msg;
  while (p < msg + head && *p != ':') p++; /* "<chunk>.lua:<line>: " */
  if (*p == ':' && p - msg > 4 && strncmp(p - 4, ".lua", 4) == 0 && p[1] >= '0' && p[1] <= '9') {
    const char *q = p + 1;
    while (*q >= '0' && *q <= '9') q++;
    if (q[0] == ':' && q[1] == ' ') {
      head -= (size_t)(q + 2 - msg);
      msg = q + 2;
    }
  }
  lua_pushlstring(L, msg, head);
  l_hook_where_fmt(L, hook, cb);
  lua_pushstring(L, suffix);
  lua_pushstring(L, msg + head);
  lua_concat(L, 3);
  lua_remove(L, -2);
}

/* core._call_hook_target(obj, hook, i, suffix, ...) -> obj[hook](obj, ...)'s results, nothing when obj does not
 * define hook (hook_fn): one target's hook called outside the run's lists, so with no run attached
 * (lutra.checkpoint's on_save_checkpoint / on_load_checkpoint: a checkpoint is saved and loaded outside fit
 * too). Through the one message handler; a failure raises "<hook>[ (callback #i)]: <message><suffix>" and
 * its traceback (i nil: the model; suffix nil: none). */
static int l_call_hook_target(lua_State *L) {
  const char *hook = luaL_checkstring(L, 2);
  int cb = lua_isnoneornil(L, 3) ? -1 : (int)luaL_checkinteger(L, 3) - 1;
  const char *suffix = luaL_optstring(L, 4, "");
  int t = lua_type(L, 1);
  if (!(t == LUA_TTABLE || t == LUA_TUSERDATA) || !hook_fn(L, 1, hook)) return 0;
  int nargs = lua_gettop(L) - 5; /* the arguments after suffix; the function is on top */
  lua_pushcfunction(L, l_msgh);
  lua_insert(L, 5); /* handler, arguments, function */
  lua_insert(L, 6); /* handler, function, arguments */
  lua_pushvalue(L, 1);
  lua_insert(L, 7); /* handler, function, obj, arguments */
  if (lua_pcall(L, nargs + 1, LUA_MULTRET, 5) != 0) {
    target_error(L, hook, cb, suffix);
    return lua_error(L);
  }
  return lua_gettop(L) - 5;
}

/* ---- the dispatcher ------------------------------------------------------------------------------------ */

/* A hook target's call up to its own arguments: the handler (its index is returned), the function, then
 * (callback, trainer, model) for a callback, (dm) for the datamodule or (model) for the model. */
static int push_target(l_loops *H, lua_State *L, const l_target *t) {
  int handler = l_push_handler(H, L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, t->fn_ref);
  if (t->cb == TARGET_DM) {
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

/* The one way a hook is called: each target of h, in dispatch order, gets its own arguments (push_target)
 * and then the hook's, which push(H, L, h, t, ctx) pushes (returning how many): from the C loops'
 * lt_hook_args (push_c_args) or copied from the stack (push_stack_args), so the loops' calls move nothing
 * more than one call each. res > 0: the index of a slot that receives the first result of the model's (or,
 * for a data hook, the datamodule's) call; res == RES_TOP: that result is left on top instead, in the
 * slot its handler had (nil when no such target ran), so the per-batch steps push no slot before the call
 * and clear none after. errors == 0: the first failure stops the call (LT_ERR, the message kept: failed;
 * nothing left); errors = the index of a table: every target runs and each failure's message is appended
 * there (on_exception's mode). The stack is left as it was (but the result with RES_TOP). */
#define RES_TOP (-1)
static inline __attribute__((always_inline)) int dispatch(l_loops *H, lua_State *L, lt_hook h, l_push_args push,
                                                          const void *ctx, int res, int errors) {
  int kept = 0; /* RES_TOP: a result is on top */
  for (int i = 0; i < H->ntargets[h]; i++) {
    const l_target *t = &H->targets[h][i];
    int handler = push_target(H, L, t);
    push(H, L, h, t, ctx);
    if (H->lp.prof) lt_prof_enter(H->lp.prof, t->prof_row);
    int rc = l_docall(H, L, handler, 1, h, lt_hook_names[h], t->cb);
    if (H->lp.prof) lt_prof_exit(H->lp.prof);
    if (rc != LT_OK) {
      if (!errors) {
        if (kept) lua_pop(L, 1);
        return LT_ERR;
      }
      lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_err); /* collected, not kept */
      luaL_unref(L, LUA_REGISTRYINDEX, H->ref_err);
      H->ref_err = LUA_NOREF;
      lua_rawseti(L, errors, (int)lua_objlen(L, errors) + 1);
      continue;
    }
    if (t->cb < 0 && res == RES_TOP) { /* the result into the handler's slot: the top */
      lua_replace(L, handler);
      if (kept) lua_remove(L, handler - 1); /* a datamodule's result before the model's */
      kept = 1;
      continue;
    }
    if (res > 0 && t->cb < 0) lua_replace(L, res);
    lua_settop(L, handler - 1);
  }
  if (res == RES_TOP && !kept) lua_pushnil(L);
  return LT_OK;
}

int l_hook_dispatch(l_loops *H, lua_State *L, lt_hook h, l_push_args push, const void *ctx, int res, int errors) {
  return dispatch(H, L, h, push, ctx, res, errors);
}

/* The arguments given on the stack (l_stack_args: nargs values from index first), for a target; an
 * on_train_epoch_end target without an outputs parameter gets them less the last (the outputs). */
int l_push_stack_args(l_loops *H, lua_State *L, lt_hook h, const l_target *t, const void *ctx) {
  (void)H;
  (void)h;
  const l_stack_args *sa = ctx;
  int m = t->trim && sa->nargs > 0 ? sa->nargs - 1 : sa->nargs;
  for (int k = 0; k < m; k++) lua_pushvalue(L, sa->first + k);
  return m;
}

/* The arguments after the target's own of the hooks the C loops call, from their lt_hook_args (ctx). */
static int push_c_args(l_loops *H, lua_State *L, lt_hook h, const l_target *t, const void *ctx) {
  (void)t;
  const lt_hook_args *a = ctx;
  const lt_loop_cfg *cfg = &H->lp.cfg;
  switch (h) {
    case LT_HOOK_TRAINING_STEP: /* (batch or split, batch_idx[, optimizer_idx][, hiddens]) */
      if (cfg->tbptt_steps > 0) {
        push_R(H, L, R_SPLITS);
        lua_rawgeti(L, -1, a->split_idx + 1);
        lua_remove(L, -2);
      } else {
        push_R(H, L, R_TRAIN_BATCH);
      }
      lua_pushinteger(L, (lua_Integer)a->batch_idx);
      if (cfg->automatic_optimization && cfg->n_optimizers > 1) {
        lua_pushinteger(L, a->optimizer_idx);
        if (cfg->tbptt_steps == 0) return 3;
        push_R(H, L, R_HIDDENS);
        return 4;
      }
      if (cfg->tbptt_steps == 0) return 2;
      push_R(H, L, R_HIDDENS);
      return 3;
    case LT_HOOK_VALIDATION_STEP:
    case LT_HOOK_TEST_STEP:
    case LT_HOOK_PREDICT_STEP: /* (batch, batch_idx[, dataloader_idx]) */
      push_R(H, L, R_EVAL_BATCH);
      lua_pushinteger(L, (lua_Integer)a->batch_idx);
      if (a->n_dataloaders <= 1) return 2;
      lua_pushinteger(L, (lua_Integer)a->dataloader_idx);
      return 3;
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
    case LT_HOOK_ON_BEFORE_ZERO_GRAD: l_push_optimizer(H, L, a->optimizer_idx); return 1;
    case LT_HOOK_OPTIMIZER_ZERO_GRAD:
      lua_pushinteger(L, (lua_Integer)a->epoch);
      lua_pushinteger(L, (lua_Integer)a->batch_idx);
      l_push_optimizer(H, L, a->optimizer_idx);
      lua_pushinteger(L, a->optimizer_idx);
      return 4;
    case LT_HOOK_ON_BEFORE_BACKWARD: push_R(H, L, R_LOSS); return 1;
    case LT_HOOK_BACKWARD:
      push_R(H, L, R_LOSS);
      l_push_optimizer(H, L, a->optimizer_idx);
      lua_pushinteger(L, a->optimizer_idx);
      return 3;
    case LT_HOOK_ON_BEFORE_OPTIMIZER_STEP:
      l_push_optimizer(H, L, a->optimizer_idx);
      lua_pushinteger(L, a->optimizer_idx);
      return 2;
    case LT_HOOK_CONFIGURE_GRADIENT_CLIPPING:
      l_push_optimizer(H, L, a->optimizer_idx);
      lua_pushinteger(L, a->optimizer_idx);
      if (cfg->gradient_clip_val > 0) {
        lua_pushnumber(L, cfg->gradient_clip_val);
        lua_pushstring(L, cfg->gradient_clip_algorithm == LT_CLIP_VALUE ? "value" : "norm");
      } else {
        lua_pushnil(L);
        lua_pushnil(L);
      }
      return 4;
    case LT_HOOK_OPTIMIZER_STEP:
      lua_pushinteger(L, (lua_Integer)a->epoch);
      lua_pushinteger(L, (lua_Integer)a->batch_idx);
      l_push_optimizer(H, L, a->optimizer_idx);
      lua_pushinteger(L, a->optimizer_idx);
      push_R(H, L, R_CLOSURE);
      return 5;
    default: return 0;
  }
}

/* The hooks whose arguments live in Lua (TG_LUA): env.hook_args(name, batch_idx, dl, opt_idx, sched_idx)
 * returns them, the dispatcher calls the targets, env.hook_after(name, result, n_targets, sched_idx) checks
 * the result or runs the default. Leaves nothing. */
static int call_lua_side(l_loops *H, lua_State *L, lt_hook h, const lt_hook_args *a) {
  int base = lua_gettop(L);
  const char *name = lt_hook_names[h];
  lua_pushnil(L); /* the result slot */
  lua_pushstring(L, name);
  lua_pushinteger(L, (lua_Integer)a->batch_idx);
  lua_pushinteger(L, (lua_Integer)a->dataloader_idx);
  lua_pushinteger(L, a->optimizer_idx);
  lua_pushinteger(L, a->scheduler_idx);
  if (l_call_env_as(H, L, "hook_args", 5, LUA_MULTRET, h, name) != LT_OK) goto fail;
  l_stack_args sa = { base + 2, lua_gettop(L) - base - 1 };
  if (l_hook_dispatch(H, L, h, l_push_stack_args, &sa, base + 1, 0) != LT_OK) goto fail;
  lua_settop(L, base + 1);
  lua_pushstring(L, name);
  lua_insert(L, -2);
  lua_pushinteger(L, H->ntargets[h]);
  lua_pushinteger(L, a->scheduler_idx);
  if (l_call_env_as(H, L, "hook_after", 4, 0, h, name) != LT_OK) goto fail;
  lua_settop(L, base);
  return LT_OK;
fail:
  lua_settop(L, base);
  return LT_ERR;
}

/* Calls hook h with the C loops' arguments a; with keep, leaves the model's first result on the stack (nil
 * when it has none). */
int l_hook_call(l_loops *H, lua_State *L, lt_hook h, const lt_hook_args *a, int keep) {
  return dispatch(H, L, h, push_c_args, a, keep ? RES_TOP : 0, 0); /* (push_c_args inlined) */
}

/* host->call: a hook of the C loops. The loops call it only for a defined hook (lp->defined), but for the
 * Lua-side ones whose default lives in Lua. */
int l_hook_call_host(void *ud, lt_hook h, lt_hook_args *a) {
  l_loops *H = ud;
  lua_State *L = H->L;
  if (l_hook_targets[h] & TG_LUA) return call_lua_side(H, L, h, a);
  if (h == LT_HOOK_ON_TRAIN_BATCH_END && l_build_batch_output(H, L) != LT_OK) return LT_ERR;
  int loss_slot = h == LT_HOOK_ON_BEFORE_BACKWARD || h == LT_HOOK_BACKWARD;
  if (loss_slot) {
    l_push_retained(L, a->loss);
    set_R(H, L, R_LOSS);
  }
  int in = H->in_opt_step;
  if (h == LT_HOOK_OPTIMIZER_STEP) H->in_opt_step = 1;
  int batch_start = h == LT_HOOK_ON_TRAIN_BATCH_START;
  int rc = dispatch(H, L, h, push_c_args, a, batch_start ? RES_TOP : 0, 0); /* l_hook_call, inlined */
  H->in_opt_step = in;
  if (loss_slot) {
    lua_pushnil(L);
    set_R(H, L, R_LOSS);
  }
  if (rc != LT_OK) return LT_ERR;
  if (batch_start) { /* the model's on_train_batch_start returning -1 skips the rest of the epoch (Lightning's) */
    if (lua_type(L, -1) == LUA_TNUMBER && lua_tonumber(L, -1) == -1) a->ret = -1;
    lua_pop(L, 1);
  }
  return LT_OK;
}

void l_push_optimizer(l_loops *H, lua_State *L, int idx) {
  push_R(H, L, R_OPTIMIZERS);
  if (lua_istable(L, -1)) lua_rawgeti(L, -1, idx + 1);
  else lua_pushnil(L);
  lua_remove(L, -2);
}

/* ---- the targets ---------------------------------------------------------------------------------------- */

void l_clear_targets(l_loops *H, lua_State *L) {
  for (int h = 0; h < LT_NHOOKS; h++) {
    for (int i = 0; i < H->ntargets[h]; i++) luaL_unref(L, LUA_REGISTRYINDEX, H->targets[h][i].fn_ref);
    H->ntargets[h] = 0;
    H->lp.defined[h] = 0;
  }
}

/* core._hook_defined(obj, name) -> whether obj defines hook name (for the trainer's checks before the lists
 * exist: "the model has no training_step", which loaders come from hooks) */
static int l_hook_defined(lua_State *L) {
  const char *name = luaL_checkstring(L, 2);
  int t = lua_type(L, 1);
  lua_pushboolean(L, (t == LUA_TTABLE || t == LUA_TUSERDATA) && hook_fn(L, 1, name));
  return 1;
}
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

/* host->refresh: the targets of every hook, from env.datamodule, env.cb_order and the model. */
int l_refresh_targets(void *ud, lt_loops *lp, int epoch_start) {
  l_loops *H = ud;
  lua_State *L = H->L;
  l_clear_targets(H, L);
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
    if ((l_hook_targets[h] & TG_DM) && H->ref_dm != LUA_NOREF) {
      lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_dm);
      if (hook_fn(L, -1, name)) {
        l_target *t = &H->targets[h][H->ntargets[h]++];
        t->cb = TARGET_DM;
        t->trim = 0;
        t->fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        t->prof_row = H->lp.prof ? prof_action(H, L, TARGET_DM, h) : -1;
      }
      lua_pop(L, 1);
    }
    if (l_hook_targets[h] & TG_CB) {
      for (int i = 0; i < ncb; i++) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, H->cb_refs[i]);
        if (hook_fn(L, -1, name)) {
          l_target *t = &H->targets[h][H->ntargets[h]++];
          t->cb = i;
          t->trim = h == LT_HOOK_ON_TRAIN_EPOCH_END && fn_nparams(L) < 4;
          t->fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
          t->prof_row = H->lp.prof ? prof_action(H, L, i, h) : -1;
        }
        lua_pop(L, 1);
      }
    }
    if ((l_hook_targets[h] & TG_MODEL) && !((l_hook_targets[h] & TG_DM_ONLY) && H->ref_dm != LUA_NOREF)) {
      lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_model);
      if (hook_fn(L, -1, name)) {
        l_target *t = &H->targets[h][H->ntargets[h]++];
        t->cb = -1;
        t->trim = h == LT_HOOK_ON_TRAIN_EPOCH_END && fn_nparams(L) < 2;
        t->fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        t->prof_row = H->lp.prof ? prof_action(H, L, -1, h) : -1;
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
    if (old && l_call_env(H, L, "deprecated_outputs", 0, 0) != LT_OK) return LT_ERR;
  }
  return LT_OK;
}
/* Registers core._hook_defined and core._call_hook_target (into the table on top). */
void l_loop_dispatch_register(lua_State *L) {
  static const luaL_Reg funcs[] = { { "_hook_defined", l_hook_defined },
                                    { "_call_hook_target", l_call_hook_target },
                                    { NULL, NULL } };
  l_setfuncs(L, funcs);
}
