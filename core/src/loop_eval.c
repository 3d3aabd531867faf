/*
 * loop_eval.c — the evaluation loop (validation inside fit, validate, test) and the prediction loop, each
 * over its dataloaders (one advance = one loader) with an epoch loop below (one advance = one batch).
 * Lightning 1.6's evaluation_loop.py, evaluation_epoch_loop.py, prediction_loop.py and
 * prediction_epoch_loop.py. Gradients are off while they run.
 */
#include "lt_interrupt.h"
#include "lt_loop.h"
#include "loop_internal.h"

#define SLOT_OF_SLOT(id) LT_SLOT_##id, 0
#define SLOT_OF_RUN(id) LT_SLOT_##id, 1
#define SLOT_OF_FIXED(id) LT_SLOT_NONE, 0
#define LOOP_INFO_(id, parent, slot, path, progress) \
  [LT_LOOP_##id] = { #id, #path, LT_LOOP_##parent, SLOT_OF_##slot(id) },
const lt_loop_info lt_loop_table[LT_NLOOPS] = { LT_LOOP_LIST(LOOP_INFO_) };
#undef LOOP_INFO_
#undef SLOT_OF_FIXED
#undef SLOT_OF_RUN
#undef SLOT_OF_SLOT

/* the profiler's rows of an evaluation kind's data fetch and step */
static const int prof_next[LT_NKINDS] = { LT_PROF_TRAIN_NEXT, LT_PROF_VAL_NEXT, LT_PROF_TEST_NEXT,
                                          LT_PROF_PREDICT_NEXT };
static const int prof_step[LT_NKINDS] = { LT_PROF_TRAINING_STEP, LT_PROF_VALIDATION_STEP, LT_PROF_TEST_STEP,
                                          LT_PROF_PREDICT_STEP };

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
    LT_PROF_TRY(lp, prof_next[V->kind], lp->host->data_next(lp->host->ud, V->kind, EE->dl_idx, &got));
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
    LT_PROF_TRY(lp, prof_step[V->kind], lp->host->eval_step(lp->host->ud, &a));
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
  lt_eval_loop *V = kind == LT_KIND_VAL       ? &lp->validate_loop
                    : kind == LT_KIND_TEST    ? &lp->test_loop
                    : kind == LT_KIND_PREDICT ? &lp->predict_loop
                                              : NULL;
  if (!V) return lt_fail(lp->c, "loops: no evaluation loop for kind %d", (int)kind);
  V->n_loaders = lp->cfg.n_eval_loaders;
  for (int i = 0; i < V->n_loaders && i < LT_MAX_LOADERS; i++) V->max_batches[i] = lp->cfg.num_eval_batches[i];
  V->phase = LT_PHASE_IDLE;
  V->epoch_loop.phase = LT_PHASE_IDLE;
  return lt__eval_loop_run(lp, V);
}

/* ---- accessors ------------------------------------------------------------------------------------------ */

/* kept as written: clang-format 14 breaks these one-line case macros and the switches over them */
// clang-format off
#define LOOP_FIELD_(id, parent, slot, path, progress) case LT_LOOP_##id: return &lp->path.FIELD;
#define LOOP_PROGRESS_(id, parent, slot, path, progress) case LT_LOOP_##id: return &lp->path.progress;
lt_progress *lt_loops_progress(lt_loops *lp, lt_loop_id id) {
  switch (id) { LT_LOOP_LIST(LOOP_PROGRESS_) default: return NULL; }
}
#undef LOOP_PROGRESS_
#define FIELD phase
int *lt_loops_phase(lt_loops *lp, lt_loop_id id) {
  switch (id) { LT_LOOP_LIST(LOOP_FIELD_) default: return NULL; }
}
#undef FIELD
#define FIELD restarting
int *lt_loops_restarting(lt_loops *lp, lt_loop_id id) {
  switch (id) { LT_LOOP_LIST(LOOP_FIELD_) default: return NULL; }
}
#undef FIELD
#undef LOOP_FIELD_
// clang-format on

void lt_loops_set_restarting(lt_loops *lp, lt_loop_id id, int on) {
  int *r = lt_loops_restarting(lp, id);
  if (!r) return;
  *r = on;
  for (int child = id + 1; child < LT_NLOOPS; child++) /* children follow their parent in the table */
    if (lt_loop_table[child].parent == id) lt_loops_set_restarting(lp, (lt_loop_id)child, on);
}
