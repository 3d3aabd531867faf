/*
 * lt_hooks.h — the hooks the loops call and the interface through which they call them.
 *
 * The loops (lt_loop.h) never know what a model or a callback is. They call `host->call(ud, hook, args)`
 * for an event, and the host runs every target that defines the hook, in dispatch order (for lutra's Lua
 * binding: callbacks in list order, the built-in ModelCheckpoint last, then the model). Before calling,
 * the loops test `lp->defined[hook]`, a byte per hook that the host fills when a run starts and again at
 * each epoch start (`host->refresh`): an absent hook costs one load and a branch.
 *
 * The host also does what needs the user's language: fetching batches, running training_step and the
 * evaluation steps, stepping and zeroing optimizers (the binding does that in C for lutra's optimizers),
 * and the bookkeeping of outputs and logged metrics (events). A C host (tests/c/test_loops.c) implements
 * the same table with C functions.
 */
#ifndef LT_HOOKS_H
#define LT_HOOKS_H

#include <stdint.h>

#include "lt_tensor.h"

/* Every hook (docs/reference/hooks.md, callbacks.md), in one list: X(ID, "name"). The loops call most of
 * them. The stage hooks around the loops (prepare_data, configure_callbacks, setup, teardown,
 * configure_optimizers, on_fit_start, on_fit_end) are called by the trainer through the same per-hook target lists (core/bind/l_loop.c,
 * lp:call_hook); on_exception by the trainer over its callbacks (their errors ignored: the first error wins);
 * on_save_checkpoint / on_load_checkpoint by lua/lutra/checkpoint/init.lua. */
/* kept as written: the list is laid out by hand, two hooks a line */
// clang-format off
#define LT_HOOK_LIST(X)                                                                                      \
  X(PREPARE_DATA, "prepare_data") X(CONFIGURE_CALLBACKS, "configure_callbacks") X(SETUP, "setup")             \
  X(TEARDOWN, "teardown") X(CONFIGURE_OPTIMIZERS, "configure_optimizers")                                     \
  X(ON_FIT_START, "on_fit_start") X(ON_FIT_END, "on_fit_end")                                                 \
  X(ON_SANITY_CHECK_START, "on_sanity_check_start") X(ON_SANITY_CHECK_END, "on_sanity_check_end")             \
  X(ON_TRAIN_START, "on_train_start") X(ON_TRAIN_END, "on_train_end")                                         \
  X(ON_TRAIN_EPOCH_START, "on_train_epoch_start") X(ON_TRAIN_EPOCH_END, "on_train_epoch_end")                 \
  X(ON_TRAIN_BATCH_START, "on_train_batch_start") X(ON_TRAIN_BATCH_END, "on_train_batch_end")                 \
  X(TRAINING_STEP, "training_step") X(TRAINING_EPOCH_END, "training_epoch_end")                               \
  X(ON_VALIDATION_START, "on_validation_start") X(ON_VALIDATION_END, "on_validation_end")                     \
  X(ON_VALIDATION_EPOCH_START, "on_validation_epoch_start")                                                   \
  X(ON_VALIDATION_EPOCH_END, "on_validation_epoch_end")                                                       \
  X(ON_VALIDATION_BATCH_START, "on_validation_batch_start")                                                   \
  X(ON_VALIDATION_BATCH_END, "on_validation_batch_end") X(VALIDATION_STEP, "validation_step")                 \
  X(VALIDATION_EPOCH_END, "validation_epoch_end") X(ON_VALIDATION_MODEL_EVAL, "on_validation_model_eval")     \
  X(ON_VALIDATION_MODEL_TRAIN, "on_validation_model_train")                                                   \
  X(ON_TEST_START, "on_test_start") X(ON_TEST_END, "on_test_end")                                             \
  X(ON_TEST_EPOCH_START, "on_test_epoch_start") X(ON_TEST_EPOCH_END, "on_test_epoch_end")                     \
  X(ON_TEST_BATCH_START, "on_test_batch_start") X(ON_TEST_BATCH_END, "on_test_batch_end")                     \
  X(TEST_STEP, "test_step") X(TEST_EPOCH_END, "test_epoch_end")                                               \
  X(ON_TEST_MODEL_EVAL, "on_test_model_eval") X(ON_TEST_MODEL_TRAIN, "on_test_model_train")                   \
  X(ON_PREDICT_START, "on_predict_start") X(ON_PREDICT_END, "on_predict_end")                                 \
  X(ON_PREDICT_EPOCH_START, "on_predict_epoch_start") X(ON_PREDICT_EPOCH_END, "on_predict_epoch_end")         \
  X(ON_PREDICT_BATCH_START, "on_predict_batch_start") X(ON_PREDICT_BATCH_END, "on_predict_batch_end")         \
  X(PREDICT_STEP, "predict_step") X(PREDICT_EPOCH_END, "predict_epoch_end")                                   \
  X(ON_PREDICT_MODEL_EVAL, "on_predict_model_eval") X(ON_PREDICT_MODEL_TRAIN, "on_predict_model_train")       \
  X(ON_BEFORE_ZERO_GRAD, "on_before_zero_grad") X(OPTIMIZER_ZERO_GRAD, "optimizer_zero_grad")                 \
  X(ON_BEFORE_BACKWARD, "on_before_backward") X(BACKWARD, "backward") X(ON_AFTER_BACKWARD, "on_after_backward") \
  X(ON_BEFORE_OPTIMIZER_STEP, "on_before_optimizer_step")                                                     \
  X(CONFIGURE_GRADIENT_CLIPPING, "configure_gradient_clipping") X(OPTIMIZER_STEP, "optimizer_step")           \
  X(LR_SCHEDULER_STEP, "lr_scheduler_step")                                                                   \
  X(TOGGLE_OPTIMIZER, "toggle_optimizer") X(UNTOGGLE_OPTIMIZER, "untoggle_optimizer")                         \
  X(ON_SAVE_CHECKPOINT, "on_save_checkpoint") X(ON_LOAD_CHECKPOINT, "on_load_checkpoint")                     \
  X(ON_EXCEPTION, "on_exception")                                                                             \
  /* the data hooks (a lt.DataModule's, else the model's): lua/lutra/data/datamodule.lua */                       \
  X(TRAIN_DATALOADER, "train_dataloader") X(VAL_DATALOADER, "val_dataloader")                                 \
  X(TEST_DATALOADER, "test_dataloader") X(PREDICT_DATALOADER, "predict_dataloader")
// clang-format on

#define LT_HOOK_ENUM_(id, name) LT_HOOK_##id,
typedef enum lt_hook { LT_HOOK_LIST(LT_HOOK_ENUM_) LT_NHOOKS } lt_hook;
#undef LT_HOOK_ENUM_

extern const char *const lt_hook_names[LT_NHOOKS];
/* The hook id of a name, or -1. */
int lt_hook_from_name(const char *name);

/* Which data a loop reads; also selects the evaluation hooks. */
typedef enum lt_kind { LT_KIND_TRAIN = 0, LT_KIND_VAL, LT_KIND_TEST, LT_KIND_PREDICT, LT_NKINDS } lt_kind;
extern const char *const lt_kind_names[LT_NKINDS]; /* "train", "validation", "test", "predict" */

/* The hooks of one evaluation kind (validation, test, predict). */
typedef struct lt_eval_hooks {
  lt_hook start, end, epoch_start, epoch_end, batch_start, batch_end, step, epoch_end_model, model_eval, model_train;
} lt_eval_hooks;
const lt_eval_hooks *lt_eval_hooks_of(lt_kind kind);

/* Arguments of a hook call; which fields a hook reads is its signature (docs/reference/hooks.md). Counters are 0-based. */
typedef struct lt_hook_args {
  int64_t batch_idx;
  int64_t dataloader_idx; /* -1: not passed (a single loader, for *_step) */
  int64_t epoch;
  int optimizer_idx; /* -1: not passed (one optimizer) */
  int split_idx;     /* TBPTT split of the batch */
  int scheduler_idx; /* lr_scheduler_step: which scheduler config (0-based) */
  int stage;         /* setup/teardown: lt_stage */
  lt_kind kind;
  int n_dataloaders; /* evaluation: how many loaders the run has */
  lt_tensor *loss;   /* on_before_backward / backward: the (normalized) loss */
  int ret;           /* out: on_train_batch_start's -1, a kept output, ... */
} lt_hook_args;

typedef enum lt_stage { LT_STAGE_FIT = 0, LT_STAGE_VALIDATE, LT_STAGE_TEST, LT_STAGE_PREDICT } lt_stage;
extern const char *const lt_stage_names[4];

/* Events: points where the host does its own bookkeeping (no user hook). */
typedef enum lt_event {
  LT_EV_TRAIN_EPOCH_START = 0,   /* a training epoch starts (logger connector: new epoch results) */
  LT_EV_TRAIN_BATCH_END,         /* after on_train_batch_end: keep the output (set a->ret = 1 when kept) and
                                  log step metrics at the logging interval */
  LT_EV_TRAIN_BATCH_DONE,        /* end of the batch (after in-epoch validation): save loggers */
  LT_EV_TRAIN_EPOCH_END_REACHED, /* the last batch ran: epoch-level values become visible */
  LT_EV_TRAIN_EPOCH_END,         /* after on_train_epoch_end: metrics updated; the kept outputs can go */
  LT_EV_TRAIN_EPOCH_LOG,         /* log the epoch metrics to the logger */
  LT_EV_EVAL_START,              /* an evaluation run starts (a->kind) */
  LT_EV_EVAL_BATCH_END,          /* after on_X_batch_end: log step metrics */
  LT_EV_EVAL_DATALOADER_END,     /* one dataloader done (a->dataloader_idx): its epoch metrics */
  LT_EV_EVAL_EPOCH_END,          /* after on_X_epoch_end: the run's epoch metrics, logged */
  LT_EV_EVAL_END,                /* the run is over (its outputs can go) */
  LT_EV_SANITY_LOADERS,          /* the sanity check started (after on_sanity_check_start): the host may load the
                                  validation loaders now and set the cfg's validation counts */
  LT_EV_FIT_LOADERS,             /* the fit loop starts (before on_train_start): the host may load the training
                                  loaders (and validation loaders not loaded yet) now and set the cfg's counts */
  LT_NEVENTS
} lt_event;

struct lt_loops;

typedef struct lt_host {
  void *ud;
  /* Rebuilds the dispatch lists: fills lp->defined, and lp->keep_train_outputs when epoch_start.
   * The core calls it at each training epoch start; the host also calls it when a run starts. */
  int (*refresh)(void *ud, struct lt_loops *lp, int epoch_start);
  /* Calls hook h on every target that defines it, in dispatch order. The hooks with a default that
   * the host implements (on_X_model_eval/train, lr_scheduler_step, toggle/untoggle_optimizer) are called
   * even when not defined. */
  int (*call)(void *ud, lt_hook h, lt_hook_args *a);
  /* Starts a pass over loader dl of the kind; the next data_next yields its first batch. */
  int (*data_start)(void *ud, lt_kind kind, int64_t dl);
  /* Makes the next batch current; *got = 0 when the loader is exhausted. */
  int (*data_next)(void *ud, lt_kind kind, int64_t dl, int *got);
  /* TBPTT: splits the current batch into *n pieces along the time dim (tbptt_steps > 0 only). */
  int (*split_batch)(void *ud, int tbptt_steps, int *n);
  /* training_step on the current batch (split a->split_idx) for optimizer a->optimizer_idx (-1 under
   * manual optimization). *loss gets the returned loss (borrowed: the host keeps it alive until the
   * next training_step) or NULL when there is none. */
  int (*training_step)(void *ud, lt_hook_args *a, lt_tensor **loss);
  /* validation_step / test_step / predict_step (a->kind) on the current batch; keeps the output when
   * the epoch-end hook wants it. */
  int (*eval_step)(void *ud, lt_hook_args *a);
  /* The default update and zero_grad of optimizer i (a lutra optimizer: lt_optim_step). */
  int (*optimizer_step)(void *ud, int opt_idx);
  int (*zero_grad)(void *ud, int opt_idx);
  /* The parameters of optimizer i (for the default gradient clipping). */
  int (*opt_params)(void *ud, int opt_idx, int *n, lt_tensor *const **params);
  /* Host bookkeeping (lt_event). May be NULL. */
  int (*event)(void *ud, lt_event ev, lt_hook_args *a);
  /* A slot taken by a host loop object (custom loop, lt.Loop): run it to its end. May be NULL. */
  int (*run_custom)(void *ud, int slot, lt_hook_args *a);
} lt_host;

#endif
