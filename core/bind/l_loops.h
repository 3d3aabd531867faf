/*
 * l_loops.h — what the parts of the loops' binding share; not part of the module's API.
 *
 *   l_loop_dispatch.c  the hook dispatcher: which targets a hook has (hook_targets, refresh) and the one
 *                      function that calls them (l_hook_dispatch)
 *   l_loop_host.c      the rest of the lt_host table for Lua: batches, training_step and the evaluation steps,
 *                      optimizers, bookkeeping events, the optimizer closure
 *   l_loop.c           the loops as a Lua object (core._loops_new, lp:fit_advance, lp:call_hook, ...)
 *   l_loop_output.c    the batch's outputs as on_train_batch_end and training_epoch_end see them
 *   l_loop_call.c      below them all: the protected call, the error rule, the env functions (l_loop_call.h)
 *
 * The calls run one way: l_loop.c -> l_loop_host.c -> l_loop_dispatch.c -> l_loop_output.c -> l_loop_call.c.
 *
 * Values of the running step live in a Lua table R (the slots below) so nothing is left on the C stack
 * between batches.
 */
#ifndef L_LOOPS_H
#define L_LOOPS_H

#include "l_msgh.h"
#include "l_util.h"
#include "lt_loop.h"
#include "lt_optim.h"

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
  X(LOSS, "loss")                 /* the loss box shared by the targets of on_before_backward / backward */   \
  X(SPLITS, "splits")             /* truncated backprop: the batch's splits along time */                     \
  X(HIDDENS, "hiddens")           /* truncated backprop: the hiddens the last split's training_step returned */

#define R_SLOT_ENUM_(id, name) R_##id,
enum { R_NONE_ = 0, R_SLOT_LIST(R_SLOT_ENUM_) R_NSLOTS_END, R_NSLOTS = R_NSLOTS_END - 1 };
#undef R_SLOT_ENUM_

/* which targets a hook has; TG_DM: the run's datamodule (env.datamodule), called first, as Lightning's
 * _call_lightning_datamodule_hook before the callbacks' and the model's; TG_DM_ONLY: with a datamodule, the
 * model's hook is not called (the *_dataloader hooks: the datamodule is the data's one source); TG_LUA: its
 * arguments (and defaults) live in Lua: env.hook_args / env.hook_after (lua/lutra/trainer/host.lua) */
enum { TG_CB = 1, TG_MODEL = 2, TG_LUA = 4, TG_DM = 8, TG_DM_ONLY = 16 };
extern uint8_t l_hook_targets[LT_NHOOKS];

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
  int ref_guarded; /* l_loop.c's run_guarded, made once: with_state calls it with no allocation per run */
  int ref_dm;      /* the run's datamodule (env.datamodule at the last refresh), or LUA_NOREF */
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
  int batch_out_built; /* R[R_BATCH_OUT] holds this batch's outputs (l_build_batch_output ran; the batch's end
                        * event clears both): a batch that built none clears nothing */
} l_loops;

static inline void push_R(l_loops *H, lua_State *L, int slot) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_R);
  lua_rawgeti(L, -1, slot);
  lua_remove(L, -2);
}

static inline void set_R(l_loops *H, lua_State *L, int slot) { /* pops the value */
  lua_rawgeti(L, LUA_REGISTRYINDEX, H->ref_R);
  lua_insert(L, -2);
  lua_rawseti(L, -2, slot);
  lua_pop(L, 1);
}

/* ---- l_loop_dispatch.c ---- */
void l_hook_targets_init(void);
void l_push_optimizer(l_loops *H, lua_State *L, int idx);
/* pushes the arguments of hook h after target t's own; returns how many */
typedef int (*l_push_args)(l_loops *H, lua_State *L, lt_hook h, const l_target *t, const void *ctx);
typedef struct l_stack_args {
  int first, nargs; /* the arguments on the stack: nargs values from index first */
} l_stack_args;
int l_hook_dispatch(l_loops *H, lua_State *L, lt_hook h, l_push_args push, const void *ctx, int res, int errors);
int l_push_stack_args(l_loops *H, lua_State *L, lt_hook h, const l_target *t, const void *ctx);
int l_hook_call(l_loops *H, lua_State *L, lt_hook h, const lt_hook_args *a, int keep);
void l_clear_targets(l_loops *H, lua_State *L);
int l_refresh_targets(void *ud, lt_loops *lp, int epoch_start);
int l_hook_call_host(void *ud, lt_hook h, lt_hook_args *a);
void l_loop_dispatch_register(lua_State *L);

/* ---- l_loop_host.c ---- */
lt_host l_loop_host(l_loops *H);
int l_opt_closure(lua_State *L);

/* ---- l_loop_output.c ---- */
lt_tensor *l_output_loss(l_loops *H, lt_tensor *t);
int l_build_batch_output(l_loops *H, lua_State *L);

#endif
