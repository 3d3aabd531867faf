/*
 * loop_fit.c — the fit loop and its children: training epoch loop, batch loop (TBPTT splits), optimizer
 * loop (automatic optimization, with the closure) and manual loop. Lightning 1.6's fit_loop.py,
 * training_epoch_loop.py, training_batch_loop.py, optimizer_loop.py and manual_loop.py, as resumable C
 * state machines (see lt_loop.h).
 */
#include <time.h>

#include "lt_interrupt.h"
#include "lt_loop.h"
#include "lt_ops.h"
#include "lt_optim.h"
#include "loop_internal.h"

/* ---- shared helpers ------------------------------------------------------------------------------- */

double lt_loops_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int64_t lt_loops_global_step(const lt_loops *lp) {
  const lt_batch_loop *B = &lp->fit_loop.epoch_loop.batch_loop;
  return B->optimizer_loop.step.total.completed + B->manual_loop.step.total.completed;
}

int64_t lt_loops_current_epoch(const lt_loops *lp) { return lp->fit_loop.epoch_progress.current.completed; }

static void init_eval(lt_eval_loop *V, lt_kind kind, lt_slot slot) {
  V->kind = kind;
  V->epoch_slot = slot;
}

void lt_loops_init(lt_loops *lp, lt_ctx *c, const lt_host *host) {
  *lp = (lt_loops){ 0 };
  lp->c = c;
  lp->host = host;
  lp->cfg.max_epochs = 1000;
  lp->cfg.max_steps = -1;
  lp->cfg.check_val_every_n_epoch = 1;
  lp->cfg.val_check_batch = LT_INF_BATCHES;
  lp->cfg.accumulate_grad_batches = 1;
  lp->cfg.n_optimizers = 1;
  lp->cfg.automatic_optimization = 1;
  lp->eval_kind = LT_KIND_TRAIN;
  init_eval(&lp->fit_loop.epoch_loop.val_loop, LT_KIND_VAL, LT_SLOT_VAL_EPOCH);
  init_eval(&lp->validate_loop, LT_KIND_VAL, LT_SLOT_VALIDATE_EPOCH);
  init_eval(&lp->test_loop, LT_KIND_TEST, LT_SLOT_TEST_EPOCH);
  init_eval(&lp->predict_loop, LT_KIND_PREDICT, LT_SLOT_PREDICT_EPOCH);
}

void lt_loops_clear(lt_loops *lp) {
  if (lp->closure_loss) lt_tensor_release(lp->closure_loss);
  lp->closure_loss = NULL;
}

/* The budget of this advance, checked before each training batch. */
static int budget_stop(lt_loops *lp) {
  if (lp->check_interrupt &&
      (lp->stop_flag ? atomic_load_explicit(lp->stop_flag, memory_order_relaxed) : lt_interrupt_pending()))
    return LT_INTERRUPTED;
  if (lp->batches_run > 0) {
    if (lp->budget_batches > 0 && lp->batches_run >= lp->budget_batches) return LT_PAUSE;
    /* no_overrun: stop when the next batch, at the pace of the last ones, would end after the deadline */
    if (lp->deadline > 0 && lt_loops_now() + (lp->no_overrun ? lp->batch_seconds : 0) >= lp->deadline) return LT_PAUSE;
  }
  return LT_OK;
}

/* The expected wall time of a batch: the median of the last LT_PACE_WINDOW. One slow batch (a host's GC
 * pause, a page fault, another process) leaves it where it was, so it does not cut the following advances
 * down to one batch each; a lasting change of pace is believed after half the window. */
static void note_batch_time(lt_loops *lp, double t) {
  lp->recent_batch_seconds[lp->recent_next] = t;
  lp->recent_next = (lp->recent_next + 1) % LT_PACE_WINDOW;
  if (lp->recent_batches < LT_PACE_WINDOW) lp->recent_batches++;
  double v[LT_PACE_WINDOW];
  int n = lp->recent_batches;
  for (int i = 0; i < n; i++) { /* insertion sort of at most LT_PACE_WINDOW values */
    double x = lp->recent_batch_seconds[i];
    int j = i;
    for (; j > 0 && v[j - 1] > x; j--) v[j] = v[j - 1];
    v[j] = x;
  }
  lp->batch_seconds = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int max_reached(int64_t cur, int64_t max) { return max != -1 && cur >= max; }

/* ---- training epoch loop: conditions -------------------------------------------------------------- */

static int num_ready_batches_reached(const lt_loops *lp) {
  const lt_train_epoch_loop *E = &lp->fit_loop.epoch_loop;
  return E->batch_progress.current.ready == lp->cfg.num_training_batches || E->is_last_batch;
}

/* The accumulation window's length (the binding checks the setting is >= 1; 1 for a config never set). */
static int64_t accumulate_n(const lt_loops *lp) {
  return lp->cfg.accumulate_grad_batches > 0 ? lp->cfg.accumulate_grad_batches : 1;
}

/* Lightning's _should_accumulate: not the end of an accumulation window nor the epoch's last batch. */
int lt__should_accumulate(const lt_loops *lp) {
  const lt_train_epoch_loop *E = &lp->fit_loop.epoch_loop;
  int window_done = (E->batch_idx + 1) % accumulate_n(lp) == 0;
  return !(window_done || num_ready_batches_reached(lp));
}

int lt_loops_should_accumulate(const lt_loops *lp) { return lt__should_accumulate(lp); }

static int training_done(const lt_loops *lp) {
  return max_reached(lt_loops_global_step(lp), lp->cfg.max_steps) || num_ready_batches_reached(lp);
}

static int epoch_done(const lt_loops *lp) {
  const lt_train_epoch_loop *E = &lp->fit_loop.epoch_loop;
  return E->stop_iteration || training_done(lp) || lp->should_stop;
}

static int should_check_val(const lt_loops *lp) {
  const lt_train_epoch_loop *E = &lp->fit_loop.epoch_loop;
  const lt_loop_cfg *cfg = &lp->cfg;
  if (!cfg->enable_validation) return 0;
  int64_t every = cfg->check_val_every_n_epoch > 0 ? cfg->check_val_every_n_epoch : 1;
  if ((lt_loops_current_epoch(lp) + 1) % every != 0) return 0;
  int inf = cfg->val_check_batch == LT_INF_BATCHES;
  if (E->is_last_batch && inf) return 1;
  if (lp->should_stop) return 1;
  if (inf) return E->is_last_batch;
  return (E->batch_idx + 1) % cfg->val_check_batch == 0;
}

/* Lightning's _get_active_optimizers: with optimizer frequencies, the one optimizer active at batch
 * `batch_idx` (batches cycle through optimizer 0 for frequencies[0] batches, then 1, ...); -1: all are. */
int lt_loops_active_optimizer(const lt_loops *lp, int64_t batch_idx) {
  const lt_loop_cfg *cfg = &lp->cfg;
  if (cfg->n_frequencies <= 0) return -1;
  int64_t cycle = 0;
  for (int i = 0; i < cfg->n_frequencies; i++) cycle += cfg->frequencies[i];
  int64_t place = cycle > 0 ? batch_idx % cycle : 0;
  for (int i = 0; i < cfg->n_frequencies; i++) {
    if (place < cfg->frequencies[i]) return i;
    place -= cfg->frequencies[i];
  }
  return cfg->n_frequencies - 1;
}

/* Lightning's update_lr_schedulers / _update_learning_rates. */
static int update_lr_schedulers(lt_loops *lp, int interval, int plateau) {
  lt_train_epoch_loop *E = &lp->fit_loop.epoch_loop;
  if (interval == LT_INTERVAL_STEP && lt__should_accumulate(lp)) return LT_OK;
  if (!lp->cfg.automatic_optimization) return LT_OK;
  /* only the schedulers of the active optimizer; Lightning picks it here by the batch count over all
   * epochs (total_batch_idx), while the optimizer loop uses the batch index within the epoch */
  int active = lt_loops_active_optimizer(lp, E->batch_progress.total.ready - 1);
  for (int i = 0; i < lp->cfg.n_schedulers; i++) {
    const lt_sched_cfg *s = &lp->cfg.sched[i];
    if (plateau != s->plateau || s->interval != interval) continue;
    if (active >= 0 && s->opt_idx != active) continue;
    int64_t idx = (interval == LT_INTERVAL_STEP ? E->batch_idx : lt_loops_current_epoch(lp)) + 1;
    int64_t freq = s->frequency > 0 ? s->frequency : 1;
    if (idx % freq != 0) continue;
    lt_hook_args a = lt__args(lp);
    a.scheduler_idx = i;
    a.optimizer_idx = s->opt_idx;
    lt_progress_ready(&E->scheduler_progress);
    LT_TRY(lt__call(lp, LT_HOOK_LR_SCHEDULER_STEP, &a));
    lt_progress_completed(&E->scheduler_progress);
  }
  return LT_OK;
}

/* ---- the closure and the optimizer loop ------------------------------------------------------------ */

int lt_loops_closure(lt_loops *lp, int wrapped, int *has_loss) {
  lt_train_epoch_loop *E = &lp->fit_loop.epoch_loop;
  lt_optimizer_loop *O = &E->batch_loop.optimizer_loop;
  lt_hook_args a = lt__args(lp);
  a.optimizer_idx = O->position;
  a.split_idx = E->batch_loop.split_idx;
  lt_tensor *loss = NULL;
  *has_loss = 0;
  lt_loops_clear(lp);
  LT_PROF_TRY(lp, LT_PROF_TRAINING_STEP, lp->host->training_step(lp->host->ud, &a, &loss));
  *has_loss = loss != NULL;
  O->loss_none = loss == NULL;
  int64_t n = accumulate_n(lp);
  if (E->batch_idx % n == 0) { /* the first batch of an accumulation window */
    lt_progress_ready(&O->zero_grad);
    LT_TRY(lt__call_if(lp, LT_HOOK_ON_BEFORE_ZERO_GRAD, &a));
    lt_progress_started(&O->zero_grad);
    if (lp->defined[LT_HOOK_OPTIMIZER_ZERO_GRAD]) LT_TRY(lt__call(lp, LT_HOOK_OPTIMIZER_ZERO_GRAD, &a));
    else LT_PROF_TRY(lp, LT_PROF_ZERO_GRAD, lp->host->zero_grad(lp->host->ud, O->position));
    lt_progress_completed(&O->zero_grad);
  }
  if (loss) {
    lp->closure_loss = n > 1 ? lt_op_binary_scalar(lp->c, LT_DIV, loss, (double)n, 0) : lt_tensor_retain(loss);
    if (!lp->closure_loss) return LT_ERR;
    a.loss = lp->closure_loss;
    LT_TRY(lt__call_if(lp, LT_HOOK_ON_BEFORE_BACKWARD, &a));
    /* a micro-batch that does not step keeps its gradients local (no data-parallel sync) */
    lp->c->grad_sync_off = lt__should_accumulate(lp);
    int rc;
    if (lp->defined[LT_HOOK_BACKWARD]) {
      rc = lt__call(lp, LT_HOOK_BACKWARD, &a);
    } else {
      int was = lp->c->grad_enabled;
      lp->c->grad_enabled = 1;
      LT_PROF_IN(lp, LT_PROF_BACKWARD);
      rc = lt_backward(lp->c, lp->closure_loss, NULL);
      LT_PROF_OUT(lp);
      lp->c->grad_enabled = was;
      if (rc) rc = lt_fail_prefix(lp->c, "training_step's loss");
    }
    lp->c->grad_sync_off = 0;
    LT_TRY(rc);
    LT_TRY(lt__call_if(lp, LT_HOOK_ON_AFTER_BACKWARD, &a));
  }
  if (wrapped) { /* the precision plugin's _after_closure */
    LT_TRY(lt__call_if(lp, LT_HOOK_ON_BEFORE_OPTIMIZER_STEP, &a));
    if (lp->defined[LT_HOOK_CONFIGURE_GRADIENT_CLIPPING]) {
      LT_TRY(lt__call(lp, LT_HOOK_CONFIGURE_GRADIENT_CLIPPING, &a));
    } else if (lp->cfg.gradient_clip_val > 0) {
      int np = 0;
      lt_tensor *const *params = NULL;
      LT_TRY(lp->host->opt_params(lp->host->ud, O->position, &np, &params));
      LT_PROF_TRY(lp, LT_PROF_CLIP_GRADIENTS,
                  lt_clip_gradients(lp->c, np, params, lp->cfg.gradient_clip_val, lp->cfg.gradient_clip_algorithm));
    }
  }
  return LT_OK;
}

static int run_optimization(lt_loops *lp) {
  lt_optimizer_loop *O = &lp->fit_loop.epoch_loop.batch_loop.optimizer_loop;
  int has_loss;
  if (lt__should_accumulate(lp)) return lt_loops_closure(lp, 0, &has_loss);
  lt_progress_ready(&O->step);
  if (lp->defined[LT_HOOK_OPTIMIZER_STEP]) {
    lt_hook_args a = lt__args(lp);
    a.optimizer_idx = O->position;
    a.split_idx = lp->fit_loop.epoch_loop.batch_loop.split_idx;
    LT_TRY(lt__call(lp, LT_HOOK_OPTIMIZER_STEP, &a)); /* the host's closure calls lt_loops_closure */
  } else {
    LT_TRY(lt_loops_closure(lp, 1, &has_loss));
    if (has_loss) LT_PROF_TRY(lp, LT_PROF_OPTIMIZER_STEP, lp->host->optimizer_step(lp->host->ud, O->position));
  }
  lt_progress_completed(&O->step);
  return LT_OK;
}

/* With several optimizers, the model's toggle_optimizer(optimizer, idx) runs before each one's optimization
 * and untoggle_optimizer(idx) after (the host's default: only that optimizer's parameters require grad). */
static int run_toggled(lt_loops *lp, int idx) {
  if (lp->cfg.n_optimizers <= 1) return run_optimization(lp);
  lt_hook_args a = lt__args(lp);
  a.optimizer_idx = idx;
  LT_TRY(lt__call(lp, LT_HOOK_TOGGLE_OPTIMIZER, &a));
  LT_TRY(run_optimization(lp));
  a = lt__args(lp);
  a.optimizer_idx = idx;
  return lt__call(lp, LT_HOOK_UNTOGGLE_OPTIMIZER, &a);
}

static int optimizer_loop_run(lt_loops *lp) {
  lt_optimizer_loop *O = &lp->fit_loop.epoch_loop.batch_loop.optimizer_loop;
  if (lp->custom[LT_SLOT_OPTIMIZER]) return lt__run_custom(lp, LT_SLOT_OPTIMIZER);
  int active = lt_loops_active_optimizer(lp, lp->fit_loop.epoch_loop.batch_idx);
  int first = active >= 0 ? active : 0, end = active >= 0 ? active + 1 : lp->cfg.n_optimizers;
  if (O->restarting) {
    lt_progress_reset_on_restart(&O->step);
    lt_progress_reset_on_restart(&O->zero_grad);
  } else {
    O->position = first;
  }
  if (O->position < first || O->position >= end) O->position = first;
  O->phase = LT_PHASE_RUNNING;
  while (O->position < end) {
    LT_TRY(run_toggled(lp, O->position));
    O->position++;
    O->restarting = 0;
  }
  O->restarting = 0;
  O->phase = LT_PHASE_IDLE;
  return LT_OK;
}

static int manual_loop_run(lt_loops *lp) {
  lt_batch_loop *B = &lp->fit_loop.epoch_loop.batch_loop;
  if (lp->custom[LT_SLOT_MANUAL]) return lt__run_custom(lp, LT_SLOT_MANUAL);
  lt_hook_args a = lt__args(lp);
  a.split_idx = B->split_idx;
  lt_tensor *loss = NULL;
  B->manual_loop.phase = LT_PHASE_RUNNING;
  LT_PROF_TRY(lp, LT_PROF_TRAINING_STEP, lp->host->training_step(lp->host->ud, &a, &loss));
  B->manual_loop.phase = LT_PHASE_IDLE;
  B->manual_loop.restarting = 0;
  return LT_OK;
}

void lt_loops_manual_step(lt_loops *lp, int after) {
  lt_manual_loop *M = &lp->fit_loop.epoch_loop.batch_loop.manual_loop;
  if (after) lt_progress_completed(&M->step);
  else lt_progress_ready(&M->step);
}

/* ---- batch loop -------------------------------------------------------------------------------------- */

static int batch_loop_run(lt_loops *lp) {
  lt_batch_loop *B = &lp->fit_loop.epoch_loop.batch_loop;
  if (lp->custom[LT_SLOT_BATCH]) return lt__run_custom(lp, LT_SLOT_BATCH);
  B->num_splits = 1;
  if (lp->cfg.tbptt_steps > 0) LT_TRY(lp->host->split_batch(lp->host->ud, lp->cfg.tbptt_steps, &B->num_splits));
  lt_progress_reset_current(&B->split_progress);
  B->split_idx = 0;
  B->phase = LT_PHASE_RUNNING;
  while (B->split_idx < B->num_splits) {
    lt_progress_ready(&B->split_progress);
    lt_progress_started(&B->split_progress);
    if (lp->cfg.automatic_optimization) LT_TRY(optimizer_loop_run(lp));
    else LT_TRY(manual_loop_run(lp));
    lt_progress_processed(&B->split_progress);
    lt_progress_completed(&B->split_progress);
    B->split_idx++;
  }
  B->phase = LT_PHASE_IDLE;
  B->restarting = 0;
  return LT_OK;
}

/* ---- training epoch loop ------------------------------------------------------------------------------ */

/* One batch (TrainingEpochLoop.advance). Sets E->stop_iteration when the epoch must end at once. */
static int train_epoch_advance(lt_loops *lp) {
  lt_train_epoch_loop *E = &lp->fit_loop.epoch_loop;
  int got = 0;
  LT_PROF_TRY(lp, LT_PROF_TRAIN_NEXT, lp->host->data_next(lp->host->ud, LT_KIND_TRAIN, 0, &got));
  if (!got) { /* the loader ended before num_training_batches */
    E->stop_iteration = 1;
    return LT_OK;
  }
  E->batch_idx = E->batch_progress.current.ready;
  E->is_last_batch = E->batch_idx + 1 >= lp->cfg.num_training_batches;
  lt_progress_ready(&E->batch_progress);
  lt_hook_args a = lt__args(lp);
  if (lp->defined[LT_HOOK_ON_TRAIN_BATCH_START]) {
    LT_TRY(lt__call(lp, LT_HOOK_ON_TRAIN_BATCH_START, &a));
    if (a.ret == -1) {
      lt_progress_processed(&E->batch_progress);
      E->stop_iteration = 1;
      return LT_OK;
    }
  }
  lt_progress_started(&E->batch_progress);
  LT_TRY(batch_loop_run(lp));
  lt_progress_processed(&E->batch_progress);
  LT_TRY(update_lr_schedulers(lp, LT_INTERVAL_STEP, 0));
  if (num_ready_batches_reached(lp)) LT_TRY(update_lr_schedulers(lp, LT_INTERVAL_EPOCH, 0));
  a = lt__args(lp);
  LT_TRY(lt__call_if(lp, LT_HOOK_ON_TRAIN_BATCH_END, &a));
  lt_progress_completed(&E->batch_progress);
  a.ret = 0;
  LT_TRY(lt__event(lp, LT_EV_TRAIN_BATCH_END, &a));
  if (a.ret == 1) E->n_outputs++;
  return LT_OK;
}

static int train_epoch_on_advance_end(lt_loops *lp, int skip_val) {
  lt_train_epoch_loop *E = &lp->fit_loop.epoch_loop;
  if (!skip_val && should_check_val(lp)) {
    lt_eval_loop *V = &E->val_loop;
    V->n_loaders = lp->cfg.n_val_loaders;
    for (int i = 0; i < V->n_loaders && i < LT_MAX_LOADERS; i++) V->max_batches[i] = lp->cfg.num_val_batches[i];
    LT_TRY(lt__eval_loop_run(lp, V));
  }
  LT_TRY(update_lr_schedulers(lp, LT_INTERVAL_STEP, 1));
  if (!lt__should_accumulate(lp)) E->batches_that_stepped++;
  lt_hook_args a = lt__args(lp);
  return lt__event(lp, LT_EV_TRAIN_BATCH_DONE, &a);
}

static int train_epoch_run(lt_loops *lp) {
  lt_train_epoch_loop *E = &lp->fit_loop.epoch_loop;
  if (E->phase == LT_PHASE_IDLE) {
    if (lp->custom[LT_SLOT_FIT_EPOCH]) return lt__run_custom(lp, LT_SLOT_FIT_EPOCH);
    lt_optimizer_loop *O = &E->batch_loop.optimizer_loop;
    int restart = E->restarting;
    if (restart) { /* reset */
      lt_progress_reset_on_restart(&E->batch_progress);
      lt_progress_reset_on_restart(&E->scheduler_progress);
      lt_progress_reset_on_restart(&O->step);
      lt_progress_reset_on_restart(&O->zero_grad);
    } else {
      lt_progress_reset_current(&E->batch_progress);
      lt_progress_reset_current(&E->scheduler_progress);
      lt_progress_reset_current(&O->step);
      lt_progress_reset_current(&O->zero_grad);
      E->val_loop.epoch_loop.batch_progress.total = (lt_counts){ 0, 0, 0, 0 };
    }
    E->n_outputs = 0;
    E->stop_iteration = 0;
    E->is_last_batch = 0;
    /* on_run_start (a restart with nothing left of the epoch starts no pass over the data) */
    if (!restart || !epoch_done(lp)) LT_TRY(lp->host->data_start(lp->host->ud, LT_KIND_TRAIN, 0));
    E->phase = LT_PHASE_RUNNING;
    if (restart && E->resume_advance_end) { /* a checkpoint taken after the last completed batch's step */
      int skip_val = E->resume_advance_end == 2;
      E->resume_advance_end = 0;
      E->batch_idx = E->batch_progress.current.completed - 1;
      LT_TRY(train_epoch_on_advance_end(lp, skip_val));
    }
  }
  while (!epoch_done(lp)) {
    LT_TRY(budget_stop(lp));
    double t0 = lt_loops_now();
    LT_TRY(train_epoch_advance(lp));
    note_batch_time(lp, lt_loops_now() - t0);
    if (E->stop_iteration) break;
    LT_TRY(train_epoch_on_advance_end(lp, 0));
    lp->batches_run++;
    E->restarting = 0;
  }
  E->restarting = 0;
  E->phase = LT_PHASE_IDLE;
  return LT_OK;
}

/* ---- fit loop ------------------------------------------------------------------------------------------- */

static int fit_done(lt_loops *lp) {
  lt_fit_loop *F = &lp->fit_loop;
  if (lp->cfg.num_training_batches == 0) return 1;
  int64_t gs = lt_loops_global_step(lp);
  int stop_steps = max_reached(gs, lp->cfg.max_steps);
  int stop_epochs = max_reached(F->epoch_progress.current.processed, lp->cfg.max_epochs);
  int stop = 0;
  if (lp->should_stop) {
    stop = 1;
    if (lp->cfg.min_epochs > 0 && F->epoch_progress.current.processed < lp->cfg.min_epochs) stop = 0;
    if (lp->cfg.min_steps > 0 && gs < lp->cfg.min_steps) stop = 0;
    lp->should_stop = stop;
  }
  return stop_steps || stop || stop_epochs;
}

int lt_loops_fit_done(const lt_loops *lp) { return lp->fit_stage == 0; }

static int fit_on_advance_end(lt_loops *lp) {
  lt_fit_loop *F = &lp->fit_loop;
  lt_train_epoch_loop *E = &F->epoch_loop;
  lt_hook_args a = lt__args(lp);
  if (E->batch_progress.current.ready == 0 && !lp->custom[LT_SLOT_FIT_EPOCH]) {
    /* an epoch with no batch: no epoch-end hooks, no logs */
    lt_progress_processed(&F->epoch_progress);
    lt_progress_completed(&F->epoch_progress);
    return lt__event(lp, LT_EV_TRAIN_EPOCH_END, &a);
  }
  LT_TRY(lt__event(lp, LT_EV_TRAIN_EPOCH_END_REACHED, &a));
  if (lp->defined[LT_HOOK_TRAINING_EPOCH_END] && E->n_outputs > 0) LT_TRY(lt__call(lp, LT_HOOK_TRAINING_EPOCH_END, &a));
  lt_progress_processed(&F->epoch_progress);
  LT_TRY(lt__call_if(lp, LT_HOOK_ON_TRAIN_EPOCH_END, &a));
  LT_TRY(lt__event(lp, LT_EV_TRAIN_EPOCH_END, &a));
  if (num_ready_batches_reached(lp)) LT_TRY(update_lr_schedulers(lp, LT_INTERVAL_EPOCH, 1));
  E->batches_that_stepped--; /* loggers expect the epoch metrics at the last batch's step */
  a = lt__args(lp);
  int rc = lt__event(lp, LT_EV_TRAIN_EPOCH_LOG, &a);
  E->batches_that_stepped++;
  LT_TRY(rc);
  lt_progress_completed(&F->epoch_progress);
  return LT_OK;
}

void lt_loops_fit_begin(lt_loops *lp) {
  lt_loops_clear(lp);
  lp->fit_loop.phase = LT_PHASE_IDLE;
  lp->fit_loop.epoch_loop.phase = LT_PHASE_IDLE;
  lp->fit_loop.epoch_loop.batch_loop.phase = LT_PHASE_IDLE;
  lp->fit_loop.epoch_loop.val_loop.phase = LT_PHASE_IDLE;
  lp->fit_stage = 1;
}

static int fit_run(lt_loops *lp) {
  lt_fit_loop *F = &lp->fit_loop;
  lt_hook_args a = lt__args(lp);
  if (F->phase == LT_PHASE_IDLE) {
    if (fit_done(lp)) return LT_OK; /* skip */
    if (F->restarting) lt_progress_reset_on_restart(&F->epoch_progress);
    /* on_run_start: the loaders (Lightning's reset_train_dataloader; the counts may change) */
    LT_TRY(lt__event(lp, LT_EV_FIT_LOADERS, &a));
    LT_TRY(lt__call_if(lp, LT_HOOK_ON_TRAIN_START, &a));
    F->phase = LT_PHASE_RUNNING;
  }
  while (F->phase == LT_PHASE_ADVANCE || !fit_done(lp)) {
    if (F->phase == LT_PHASE_RUNNING) { /* on_advance_start */
      LT_TRY(lp->host->refresh(lp->host->ud, lp, 1));
      lt_progress_ready(&F->epoch_progress);
      a = lt__args(lp);
      LT_TRY(lt__event(lp, LT_EV_TRAIN_EPOCH_START, &a));
      LT_TRY(lt__call_if(lp, LT_HOOK_ON_TRAIN_EPOCH_START, &a));
      lt_progress_started(&F->epoch_progress);
      F->phase = LT_PHASE_ADVANCE;
    }
    LT_TRY(train_epoch_run(lp));
    F->phase = LT_PHASE_RUNNING;
    LT_TRY(fit_on_advance_end(lp));
    F->restarting = 0;
  }
  F->restarting = 0;
  F->phase = LT_PHASE_IDLE;
  a = lt__args(lp);
  return lt__call_if(lp, LT_HOOK_ON_TRAIN_END, &a);
}

int lt_loops_fit_advance(lt_loops *lp, int64_t max_batches, double seconds) {
  if (!lp->fit_stage) return LT_OK;
  lp->budget_batches = max_batches;
  lp->deadline = seconds > 0 ? lt_loops_now() + seconds : 0;
  lp->batches_run = 0;
  int rc = fit_run(lp);
  lt_loops_clear(lp);
  if (rc == LT_OK) lp->fit_stage = 0;
  return rc;
}

int lt_loops_sanity_check(lt_loops *lp) {
  lt_eval_loop *V = &lp->fit_loop.epoch_loop.val_loop;
  if (!lp->cfg.enable_validation || V->restarting) return LT_OK;
  int64_t any = 0;
  for (int i = 0; i < lp->cfg.n_val_loaders && i < LT_MAX_LOADERS; i++) any += lp->cfg.num_sanity_val_batches[i];
  if (any <= 0 && !lp->cfg.val_loaders_pending) return LT_OK;
  lt_hook_args a = lt__args(lp);
  lt_rng saved = lp->c->rng; /* Lightning's isolate_rng: the sanity check does not move the RNG */
  lp->sanity_checking = 1;
  int rc = lt__call_if(lp, LT_HOOK_ON_SANITY_CHECK_START, &a);
  if (rc == LT_OK) rc = lt__event(lp, LT_EV_SANITY_LOADERS, &a); /* the counts below may come only now */
  if (rc == LT_OK && lp->cfg.enable_validation) {
    V->n_loaders = lp->cfg.n_val_loaders;
    for (int i = 0; i < V->n_loaders && i < LT_MAX_LOADERS; i++) V->max_batches[i] = lp->cfg.num_sanity_val_batches[i];
    rc = lt__eval_loop_run(lp, V);
  }
  if (rc == LT_OK) rc = lt__call_if(lp, LT_HOOK_ON_SANITY_CHECK_END, &a);
  lp->sanity_checking = 0;
  lp->c->rng = saved;
  /* _reset_progress(val_loop) */
  V->dataloader_progress = (lt_progress){ { 0, 0, 0, 0 }, { 0, 0, 0, 0 } };
  V->epoch_loop.batch_progress = (lt_progress){ { 0, 0, 0, 0 }, { 0, 0, 0, 0 } };
  return rc;
}

/* ---- child loops run by a host loop ------------------------------------------------------------------ */

int lt_loops_run_slot(lt_loops *lp, lt_slot slot) {
  switch (slot) {
    case LT_SLOT_FIT_EPOCH: {
      uint8_t was = lp->custom[slot];
      lp->custom[slot] = 0;
      int rc = train_epoch_run(lp);
      lp->custom[slot] = was;
      return rc;
    }
    case LT_SLOT_BATCH: return batch_loop_run(lp);
    case LT_SLOT_OPTIMIZER: return optimizer_loop_run(lp);
    case LT_SLOT_MANUAL: return manual_loop_run(lp);
    case LT_SLOT_VAL: {
      lt_eval_loop *V = &lp->fit_loop.epoch_loop.val_loop;
      V->n_loaders = lp->cfg.n_val_loaders;
      for (int i = 0; i < V->n_loaders && i < LT_MAX_LOADERS; i++) V->max_batches[i] = lp->cfg.num_val_batches[i];
      return lt__eval_loop_run(lp, V);
    }
    default: return lt_fail(lp->c, "loops: slot %d cannot be run from a custom loop", (int)slot);
  }
}
