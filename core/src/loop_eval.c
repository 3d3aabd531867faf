/*
 * loop_eval.c — the evaluation loop (validation inside fit, validate, test) and the prediction loop, each
 * over its dataloaders (one advance = one loader) with an epoch loop below (one advance = one batch).
 * Lightning 1.6's evaluation_loop.py, evaluation_epoch_loop.py, prediction_loop.py and
 * prediction_epoch_loop.py. Gradients are off while they run.
 */
#include "lt_interrupt.h"
#include "lt_loop.h"
#include "loop_internal.h"

const char *const lt_loop_names[LT_NLOOPS] = {
  "fit_loop", "fit_loop.epoch_loop", "fit_loop.epoch_loop.batch_loop",
  "fit_loop.epoch_loop.batch_loop.optimizer_loop", "fit_loop.epoch_loop.batch_loop.manual_loop",
  "fit_loop.epoch_loop.val_loop", "fit_loop.epoch_loop.val_loop.epoch_loop", "validate_loop",
  "validate_loop.epoch_loop", "test_loop", "test_loop.epoch_loop", "predict_loop", "predict_loop.epoch_loop",
};

static int eval_epoch_run(lt_loops *lp, lt_eval_loop *V) {
  lt_eval_epoch_loop *EE = &V->epoch_loop;
  const lt_eval_hooks *H = lt_eval_hooks_of(V->kind);
  if (lp->custom[V->epoch_slot]) return lt__run_custom(lp, V->epoch_slot);
  if (EE->restarting) lt_progress_reset_on_restart(&EE->batch_progress);
  else lt_progress_reset_current(&EE->batch_progress);
  EE->is_last_batch = 0;
  EE->phase = LT_PHASE_RUNNING;
  LT_TRY(lp->host->data_start(lp->host->ud, V->kind, EE->dl_idx));
  while (EE->batch_progress.current.completed < EE->max_batches) {
    if (lp->check_interrupt && lp->eval_kind != LT_KIND_TRAIN && lt_interrupt_pending()) return LT_INTERRUPTED;
    int got = 0;
    LT_TRY(lp->host->data_next(lp->host->ud, V->kind, EE->dl_idx, &got));
    if (!got) break;
    lt_hook_args a = lt__args(lp);
    a.kind = V->kind;
    a.batch_idx = EE->batch_progress.current.ready;
    a.dataloader_idx = EE->dl_idx;
    a.n_dataloaders = V->n_loaders;
    EE->is_last_batch = a.batch_idx + 1 >= EE->max_batches;
    lt_progress_ready(&EE->batch_progress);
    LT_TRY(lt__call_if(lp, H->batch_start, &a));
    lt_progress_started(&EE->batch_progress);
    LT_TRY(lp->host->eval_step(lp->host->ud, &a));
    lt_progress_processed(&EE->batch_progress);
    LT_TRY(lt__call_if(lp, H->batch_end, &a));
    lt_progress_completed(&EE->batch_progress);
    LT_TRY(lt__event(lp, LT_EV_EVAL_BATCH_END, &a));
    EE->restarting = 0;
  }
  EE->restarting = 0;
  EE->phase = LT_PHASE_IDLE;
  return LT_OK;
}

static int eval_loop_body(lt_loops *lp, lt_eval_loop *V) {
  const lt_eval_hooks *H = lt_eval_hooks_of(V->kind);
  int predict = V->kind == LT_KIND_PREDICT;
  lt_hook_args a = lt__args(lp);
  a.kind = V->kind;
  a.n_dataloaders = V->n_loaders;
  /* reset */
  if (V->restarting) lt_progress_reset_on_restart(&V->dataloader_progress);
  else lt_progress_reset_current(&V->dataloader_progress);
  V->phase = LT_PHASE_RUNNING;
  /* on_run_start */
  LT_TRY(lt__event(lp, LT_EV_EVAL_START, &a));
  LT_TRY(lt__call(lp, H->model_eval, &a)); /* the host's default puts the model in eval mode */
  LT_TRY(lt__call_if(lp, H->start, &a));
  LT_TRY(lt__call_if(lp, H->epoch_start, &a));
  while (V->dataloader_progress.current.completed < V->n_loaders) {
    int64_t dl = V->dataloader_progress.current.completed;
    lt_progress_ready(&V->dataloader_progress);
    lt_progress_started(&V->dataloader_progress);
    V->epoch_loop.dl_idx = dl;
    V->epoch_loop.max_batches = dl < LT_MAX_LOADERS ? V->max_batches[dl] : 0;
    LT_TRY(eval_epoch_run(lp, V));
    lt_progress_processed(&V->dataloader_progress);
    a.dataloader_idx = dl;
    LT_TRY(lt__event(lp, LT_EV_EVAL_DATALOADER_END, &a));
    lt_progress_completed(&V->dataloader_progress);
    V->restarting = 0;
  }
  a.dataloader_idx = -1;
  /* on_run_end */
  if (!predict && lp->defined[H->epoch_end_model]) LT_TRY(lt__call(lp, H->epoch_end_model, &a));
  LT_TRY(lt__call_if(lp, H->epoch_end, &a));
  LT_TRY(lt__event(lp, LT_EV_EVAL_EPOCH_END, &a));
  LT_TRY(lt__call_if(lp, H->end, &a));
  if (!predict) LT_TRY(lt__call(lp, H->model_train, &a)); /* back to train mode */
  LT_TRY(lt__event(lp, LT_EV_EVAL_END, &a));
  V->restarting = 0;
  V->phase = LT_PHASE_IDLE;
  return LT_OK;
}

int lt__eval_loop_run(lt_loops *lp, lt_eval_loop *V) {
  int64_t total = 0; /* skip: no batch anywhere */
  for (int i = 0; i < V->n_loaders && i < LT_MAX_LOADERS; i++) total += V->max_batches[i];
  if (total <= 0) return LT_OK;
  int was = lp->c->grad_enabled;
  lt_kind outer = lp->eval_kind;
  lp->c->grad_enabled = 0;
  if (outer == LT_KIND_TRAIN && V != &lp->fit_loop.epoch_loop.val_loop) lp->eval_kind = V->kind;
  int rc = eval_loop_body(lp, V);
  lp->c->grad_enabled = was;
  lp->eval_kind = outer;
  return rc;
}

int lt_loops_eval_run(lt_loops *lp, lt_kind kind) {
  lt_eval_loop *V = kind == LT_KIND_VAL ? &lp->validate_loop : kind == LT_KIND_TEST ? &lp->test_loop
                  : kind == LT_KIND_PREDICT ? &lp->predict_loop : NULL;
  if (!V) return lt_fail(lp->c, "loops: no evaluation loop for kind %d", (int)kind);
  V->n_loaders = lp->cfg.n_eval_loaders;
  for (int i = 0; i < V->n_loaders && i < LT_MAX_LOADERS; i++) V->max_batches[i] = lp->cfg.num_eval_batches[i];
  V->phase = LT_PHASE_IDLE;
  V->epoch_loop.phase = LT_PHASE_IDLE;
  return lt__eval_loop_run(lp, V);
}

/* ---- accessors ------------------------------------------------------------------------------------------ */

lt_progress *lt_loops_progress(lt_loops *lp, lt_loop_id id) {
  lt_train_epoch_loop *E = &lp->fit_loop.epoch_loop;
  switch (id) {
  case LT_LOOP_FIT: return &lp->fit_loop.epoch_progress;
  case LT_LOOP_FIT_EPOCH: return &E->batch_progress;
  case LT_LOOP_BATCH: return &E->batch_loop.split_progress;
  case LT_LOOP_OPTIMIZER: return &E->batch_loop.optimizer_loop.step;
  case LT_LOOP_MANUAL: return &E->batch_loop.manual_loop.step;
  case LT_LOOP_VAL: return &E->val_loop.dataloader_progress;
  case LT_LOOP_VAL_EPOCH: return &E->val_loop.epoch_loop.batch_progress;
  case LT_LOOP_VALIDATE: return &lp->validate_loop.dataloader_progress;
  case LT_LOOP_VALIDATE_EPOCH: return &lp->validate_loop.epoch_loop.batch_progress;
  case LT_LOOP_TEST: return &lp->test_loop.dataloader_progress;
  case LT_LOOP_TEST_EPOCH: return &lp->test_loop.epoch_loop.batch_progress;
  case LT_LOOP_PREDICT: return &lp->predict_loop.dataloader_progress;
  case LT_LOOP_PREDICT_EPOCH: return &lp->predict_loop.epoch_loop.batch_progress;
  default: return NULL;
  }
}

#define LOOP_FIELD(lp, id, field)                                                          \
  switch (id) {                                                                             \
  case LT_LOOP_FIT: return &(lp)->fit_loop.field;                                           \
  case LT_LOOP_FIT_EPOCH: return &(lp)->fit_loop.epoch_loop.field;                          \
  case LT_LOOP_BATCH: return &(lp)->fit_loop.epoch_loop.batch_loop.field;                   \
  case LT_LOOP_OPTIMIZER: return &(lp)->fit_loop.epoch_loop.batch_loop.optimizer_loop.field; \
  case LT_LOOP_MANUAL: return &(lp)->fit_loop.epoch_loop.batch_loop.manual_loop.field;      \
  case LT_LOOP_VAL: return &(lp)->fit_loop.epoch_loop.val_loop.field;                       \
  case LT_LOOP_VAL_EPOCH: return &(lp)->fit_loop.epoch_loop.val_loop.epoch_loop.field;      \
  case LT_LOOP_VALIDATE: return &(lp)->validate_loop.field;                                 \
  case LT_LOOP_VALIDATE_EPOCH: return &(lp)->validate_loop.epoch_loop.field;                \
  case LT_LOOP_TEST: return &(lp)->test_loop.field;                                         \
  case LT_LOOP_TEST_EPOCH: return &(lp)->test_loop.epoch_loop.field;                        \
  case LT_LOOP_PREDICT: return &(lp)->predict_loop.field;                                   \
  case LT_LOOP_PREDICT_EPOCH: return &(lp)->predict_loop.epoch_loop.field;                  \
  default: return NULL;                                                                     \
  }

int *lt_loops_phase(lt_loops *lp, lt_loop_id id) { LOOP_FIELD(lp, id, phase) }
int *lt_loops_restarting(lt_loops *lp, lt_loop_id id) { LOOP_FIELD(lp, id, restarting) }

void lt_loops_set_restarting(lt_loops *lp, lt_loop_id id, int on) {
  static const int below[LT_NLOOPS][6] = {
    [LT_LOOP_FIT] = { LT_LOOP_FIT_EPOCH, -1 },
    [LT_LOOP_FIT_EPOCH] = { LT_LOOP_BATCH, LT_LOOP_VAL, -1 },
    [LT_LOOP_BATCH] = { LT_LOOP_OPTIMIZER, LT_LOOP_MANUAL, -1 },
    [LT_LOOP_OPTIMIZER] = { -1 },
    [LT_LOOP_MANUAL] = { -1 },
    [LT_LOOP_VAL] = { LT_LOOP_VAL_EPOCH, -1 },
    [LT_LOOP_VAL_EPOCH] = { -1 },
    [LT_LOOP_VALIDATE] = { LT_LOOP_VALIDATE_EPOCH, -1 },
    [LT_LOOP_VALIDATE_EPOCH] = { -1 },
    [LT_LOOP_TEST] = { LT_LOOP_TEST_EPOCH, -1 },
    [LT_LOOP_TEST_EPOCH] = { -1 },
    [LT_LOOP_PREDICT] = { LT_LOOP_PREDICT_EPOCH, -1 },
    [LT_LOOP_PREDICT_EPOCH] = { -1 },
  };
  int *r = lt_loops_restarting(lp, id);
  if (!r) return;
  *r = on;
  for (int i = 0; i < 6 && below[id][i] > 0; i++)
    lt_loops_set_restarting(lp, (lt_loop_id)below[id][i], on);
}
