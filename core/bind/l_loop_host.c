/*
 * l_loop_host.c — the lt_host table for Lua (core/src/lt_hooks.h), but for the dispatch of hooks
 * (l_loop_dispatch.c): the loaders' batches, training_step and the evaluation steps (their outputs kept in
 * the run's R table), the optimizers' step and zero_grad (in C for lutra's optimizers), the bookkeeping
 * events (env.event in lua/lutra/trainer/host.lua), custom loops, and the optimizer closure a user's
 * optimizer_step gets.
 */
#include <stdlib.h>
#include <string.h>

#include "l_loop_call.h"
#include "l_optim.h"

/* "<kind> dataloader", the prefix of a data error */
static const char *const loader_what[LT_NKINDS] = { "train dataloader", "validation dataloader", "test dataloader",
                                                    "predict dataloader" };

static const char *kind_name(lt_kind k) { return lt_kind_names[k]; }

static int h_data_start(void *ud, lt_kind kind, int64_t dl) {
  l_loops *H = ud;
  lua_State *L = H->L;
  lua_pushstring(L, kind_name(kind));
  lua_pushinteger(L, (lua_Integer)dl);
  return l_call_env_as(H, L, "data_start", 2, 0, -1, loader_what[kind]);
}

static int h_data_next(void *ud, lt_kind kind, int64_t dl, int *got) {
  l_loops *H = ud;
  lua_State *L = H->L;
  (void)dl;
  int train = kind == LT_KIND_TRAIN;
  lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_R); /* R under the call: one lookup for the iterator and the batch */
  int r = lua_gettop(L);
  int handler = l_push_handler(H, L);
  lua_rawgeti(L, r, train ? R_TRAIN_ITER : R_EVAL_ITER);
  int rc = l_docall(H, L, handler, 1, -1, loader_what[kind], -1);
  if (rc == LT_OK) {
    *got = !lua_isnil(L, -1);
    lua_rawseti(L, r, train ? R_TRAIN_BATCH : R_EVAL_BATCH);
  }
  lua_settop(L, r - 1);
  return rc;
}

static int h_split_batch(void *ud, int tbptt_steps, int *n) {
  l_loops *H = ud;
  lua_State *L = H->L;
  lua_pushinteger(L, tbptt_steps);
  if (l_call_env(H, L, "split_batch", 1, 1) != LT_OK) return LT_ERR;
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
    return l_call_env(H, L, "nil_training_step", 0, 0);
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
  if (H->ntargets[LT_HOOK_TRAINING_STEP] == 0) return lt_fail(H->lp.c, "fit: the model has no training_step");
  if (l_hook_call(H, L, LT_HOOK_TRAINING_STEP, a, 1) != LT_OK) return LT_ERR;
  if (H->lp.cfg.tbptt_steps > 0) { /* the hiddens for the next split: env.keep_hiddens(output) */
    lua_pushvalue(L, -1);
    if (l_call_env_as(H, L, "keep_hiddens", 1, 0, LT_HOOK_TRAINING_STEP, "training_step") != LT_OK) {
      lua_settop(L, base);
      return LT_ERR;
    }
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
    if (l_call_env_as(H, L, "default_predict_step", 3, 1, step, lt_hook_names[step]) != LT_OK) return LT_ERR;
  } else if (l_hook_call(H, L, step, a, 1) != LT_OK) {
    return LT_ERR;
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
  int handler = l_push_handler(H, L);
  l_push_optimizer(H, L, opt_idx);
  if (lua_isnil(L, -1)) {
    lua_settop(L, handler - 1);
    return lt_fail(H->lp.c, "fit: no optimizer %d (configure_optimizers returned %d)", opt_idx + 1, H->nopts);
  }
  lua_getfield(L, -1, method);
  lua_insert(L, -2);
  char what[64];
  snprintf(what, sizeof what, "optimizer %d:%s", opt_idx + 1, method);
  if (l_docall(H, L, handler, 0, -1, what, -1) != LT_OK) return LT_ERR;
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
  if (l_call_env(H, L, "opt_params", 1, 1) != LT_OK) return LT_ERR;
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
        if (l_build_batch_output(H, L) != LT_OK) return LT_ERR;
        if (l_call_env(H, L, "keep_output", 0, 1) != LT_OK) return LT_ERR;
        if (lua_toboolean(L, -1)) a->ret = 1;
        lua_pop(L, 1);
      }
      if (H->batch_out_built) {
        lua_pushnil(L);
        set_R(H, L, R_BATCH_OUT);
        H->batch_out_built = 0;
      }
      if (log_dirty(H, L)) {
        lua_pushstring(L, "train_step");
        return l_call_env(H, L, "event", 1, 0);
      }
      return LT_OK;
    case LT_EV_TRAIN_BATCH_DONE: {
      int64_t n = H->log_every_n_steps > 0 ? H->log_every_n_steps : 1;
      if (!H->has_logger || H->lp.fit_loop.epoch_loop.batches_that_stepped % n != 0) return LT_OK;
      lua_pushstring(L, "save_logger");
      return l_call_env(H, L, "event", 1, 0);
    }
    case LT_EV_EVAL_BATCH_END:
      if (!log_dirty(H, L)) return LT_OK;
      lua_pushstring(L, "eval_step");
      lua_pushinteger(L, (lua_Integer)a->dataloader_idx);
      lua_pushinteger(L, (lua_Integer)a->batch_idx);
      return l_call_env(H, L, "event", 3, 0);
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
      return l_call_env(H, L, "event", 3, 0);
    }
  }
}

static int h_run_custom(void *ud, int slot, lt_hook_args *a) {
  l_loops *H = ud;
  (void)a;
  lua_pushinteger(H->L, slot);
  return l_call_env(H, H->L, "run_custom", 1, 0);
}

lt_host l_loop_host(l_loops *H) {
  return (lt_host){
    H,           l_refresh_targets, l_hook_call_host, h_data_start, h_data_next, h_split_batch, h_training_step,
    h_eval_step, h_optimizer_step,  h_zero_grad,      h_opt_params, h_event,     h_run_custom
  };
}

/* ---- the optimizer closure given to a user's optimizer_step ------------------------------------------- */

int l_opt_closure(lua_State *L) {
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
    lua_pushlightuserdata(L, &l_err_sentinel);
    return lua_error(L);
  }
  if (has && H->lp.closure_loss) return l_push(L, lt_op_detach(L_CTX(L), H->lp.closure_loss));
  lua_pushnil(L);
  return 1;
}