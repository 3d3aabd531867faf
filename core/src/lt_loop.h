/*
 * lt_loop.h — the training, evaluation and prediction loops (PyTorch Lightning 1.6's loops, in C).
 *
 *   fit_loop (one advance = one epoch)
 *     .epoch_loop (one advance = one batch)
 *        .batch_loop (one advance = one TBPTT split, or the whole batch)
 *           .optimizer_loop (one advance = one optimizer)   |  .manual_loop (manual optimization)
 *        .val_loop (one advance = one dataloader) -> .epoch_loop (one advance = one batch)
 *   validate_loop, test_loop (evaluation loops), predict_loop (-> .epoch_loop)
 *
 * Every loop follows Lightning's template (skip, reset, on_run_start, on_advance_start, advance,
 * on_advance_end, on_run_end, done) and counts its units with progress counters (ready, started,
 * processed, completed; total over the trainer's life and current for this run or epoch).
 *
 * The whole state of a run is data in these structs, not the C stack: a run of the fit loop can stop at
 * any training-batch boundary (a budget of batches or seconds, an interrupt) and a later call continues
 * exactly there without re-running start hooks. Each loop records where it is in its template (`phase`);
 * a loop stopped inside an advance resumes that advance.
 *
 * Use (the binding does this for the Lua trainer; tests/c/test_loops.c does it with a C host):
 *
 *   lt_loops lp;
 *   lt_loops_init(&lp, ctx, &host);
 *   lp.cfg = ...;                                // numbers the trainer computed from its options
 *   lt_loops_fit_begin(&lp);                     // a new fit run (not when continuing one)
 *   while ((rc = lt_loops_fit_advance(&lp, 1, 0)) == LT_PAUSE) { ... }   // one batch at a time
 *   lt_loops_eval_run(&lp, LT_KIND_TEST, 0);     // trainer:test
 */
#ifndef LT_LOOP_H
#define LT_LOOP_H

#include <stdatomic.h>
#include <stdint.h>

#include "lt_hooks.h"
#include "lt_optim.h"
#include "lt_prof.h"

/* Extra return codes of the run functions (LT_OK: the loop finished; LT_ERR: failed, message in ctx). */
enum { LT_PAUSE = 1, LT_INTERRUPTED = 2 };

#define LT_MAX_LOADERS 32
#define LT_MAX_SCHEDULERS 16
#define LT_MAX_OPTIMIZERS 16
#define LT_INF_BATCHES INT64_MAX

#define LT_PACE_WINDOW 9 /* batches whose median is the expected batch time */

typedef struct lt_counts {
  int64_t ready, started, processed, completed;
} lt_counts;
typedef struct lt_progress {
  lt_counts total, current;
} lt_progress;

static inline void lt_progress_ready(lt_progress *p) {
  p->total.ready++;
  p->current.ready++;
}
static inline void lt_progress_started(lt_progress *p) {
  p->total.started++;
  p->current.started++;
}
static inline void lt_progress_processed(lt_progress *p) {
  p->total.processed++;
  p->current.processed++;
}
static inline void lt_progress_completed(lt_progress *p) {
  p->total.completed++;
  p->current.completed++;
}
/* A new run: current counts from zero. */
static inline void lt_progress_reset_current(lt_progress *p) { p->current = (lt_counts){ 0, 0, 0, 0 }; }
/* Restart from a checkpoint: the unit that was not completed is done again. */
static inline void lt_progress_reset_on_restart(lt_progress *p) {
  p->current.ready = p->current.started = p->current.processed = p->current.completed;
  p->total.ready = p->total.started = p->total.processed = p->total.completed;
}

/* Where a loop is in its template. */
typedef enum lt_phase {
  LT_PHASE_IDLE = 0, /* not running: the next run starts with reset and on_run_start */
  LT_PHASE_RUNNING,  /* between advances */
  LT_PHASE_ADVANCE,  /* stopped inside an advance (a child loop paused): resume the advance */
} lt_phase;

/* The loop tree, in one table: X(ID, PARENT, SLOT, path, progress).
 *   ID        lt_loop_id: LT_LOOP_ID (a host names it by ID in lower case: "fit_epoch")
 *   PARENT    the loop it runs inside (NONE: a trainer's own loop)
 *   SLOT      SLOT: a host loop can take its place (trainer.fit_loop:connect{epoch_loop = ...}); it then has
 *             an lt_slot LT_SLOT_ID (in table order); RUN: that, and a host loop can run it as its child
 *             (lt_loops_run_slot); FIXED: neither
 *   path      where it lives in lt_loops; also its name ("fit_loop.epoch_loop"; the part after the last dot
 *             is its field in the parent)
 *   progress  its main progress counters (epochs, batches, splits, dataloaders, optimizer steps) */
#define LT_LOOP_LIST(X)                                                            \
  X(FIT, NONE, FIXED, fit_loop, epoch_progress)                                    \
  X(FIT_EPOCH, FIT, RUN, fit_loop.epoch_loop, batch_progress)                      \
  X(BATCH, FIT_EPOCH, RUN, fit_loop.epoch_loop.batch_loop, split_progress)         \
  X(OPTIMIZER, BATCH, RUN, fit_loop.epoch_loop.batch_loop.optimizer_loop, step)    \
  X(MANUAL, BATCH, RUN, fit_loop.epoch_loop.batch_loop.manual_loop, step)          \
  X(VAL, FIT_EPOCH, RUN, fit_loop.epoch_loop.val_loop, dataloader_progress)        \
  X(VAL_EPOCH, VAL, SLOT, fit_loop.epoch_loop.val_loop.epoch_loop, batch_progress) \
  X(VALIDATE, NONE, FIXED, validate_loop, dataloader_progress)                     \
  X(VALIDATE_EPOCH, VALIDATE, SLOT, validate_loop.epoch_loop, batch_progress)      \
  X(TEST, NONE, FIXED, test_loop, dataloader_progress)                             \
  X(TEST_EPOCH, TEST, SLOT, test_loop.epoch_loop, batch_progress)                  \
  X(PREDICT, NONE, FIXED, predict_loop, dataloader_progress)                       \
  X(PREDICT_EPOCH, PREDICT, SLOT, predict_loop.epoch_loop, batch_progress)

#define LT_LOOP_ENUM_(id, parent, slot, path, progress) LT_LOOP_##id,
typedef enum lt_loop_id { LT_LOOP_NONE = -1, LT_LOOP_LIST(LT_LOOP_ENUM_) LT_NLOOPS } lt_loop_id;
#undef LT_LOOP_ENUM_

/* Slots a host loop can take: the SLOT rows of LT_LOOP_LIST. */
#define LT_SLOT_ENUM_SLOT(id) LT_SLOT_##id,
#define LT_SLOT_ENUM_RUN(id) LT_SLOT_##id,
#define LT_SLOT_ENUM_FIXED(id)
#define LT_SLOT_ENUM_(id, parent, slot, path, progress) LT_SLOT_ENUM_##slot(id)
typedef enum lt_slot { LT_SLOT_NONE = -1, LT_LOOP_LIST(LT_SLOT_ENUM_) LT_NSLOTS } lt_slot;
#undef LT_SLOT_ENUM_
#undef LT_SLOT_ENUM_FIXED
#undef LT_SLOT_ENUM_RUN
#undef LT_SLOT_ENUM_SLOT

/* One row of LT_LOOP_LIST as data (lt_loop_table[id]). */
typedef struct lt_loop_info {
  const char *key;   /* "FIT_EPOCH" (hosts use it in lower case) */
  const char *name;  /* "fit_loop.epoch_loop" */
  lt_loop_id parent; /* LT_LOOP_NONE for the trainer's own loops */
  lt_slot slot;      /* LT_SLOT_NONE when a host loop cannot take its place */
  int runnable;      /* a host loop can run it (lt_loops_run_slot(slot)) */
} lt_loop_info;
extern const lt_loop_info lt_loop_table[LT_NLOOPS];

typedef struct lt_optimizer_loop {
  int phase, restarting;
  lt_progress step;      /* optimizer steps (ready, completed): global_step sums their total.completed */
  lt_progress zero_grad; /* optimizer_zero_grad calls */
  int position;          /* the optimizer being run (optimizer_position) */
  int loss_none;         /* the current closure's training_step returned no loss */
} lt_optimizer_loop;

typedef struct lt_manual_loop {
  int phase, restarting;
  lt_progress step; /* optimizer steps the user took (opt:step() through self:optimizers()) */
} lt_manual_loop;

typedef struct lt_batch_loop {
  int phase, restarting;
  int split_idx, num_splits;  /* TBPTT: the split being run and how many */
  lt_progress split_progress; /* splits (one per batch without TBPTT) */
  lt_optimizer_loop optimizer_loop;
  lt_manual_loop manual_loop;
} lt_batch_loop;

typedef struct lt_eval_epoch_loop {
  int phase, restarting;
  lt_progress batch_progress;
  int is_last_batch;
  int64_t dl_idx, max_batches;
} lt_eval_epoch_loop;

typedef struct lt_eval_loop {
  int phase, restarting;
  lt_kind kind;
  lt_slot epoch_slot;
  lt_progress dataloader_progress;
  int n_loaders;
  int64_t max_batches[LT_MAX_LOADERS];
  lt_eval_epoch_loop epoch_loop;
} lt_eval_loop;

typedef struct lt_train_epoch_loop {
  int phase, restarting;
  lt_progress batch_progress;
  int is_last_batch;
  lt_progress scheduler_progress;
  int64_t batches_that_stepped; /* the logger's step: once per batch that stepped */
  int64_t n_outputs;            /* training outputs kept this epoch */
  int64_t batch_idx;            /* of the batch being run */
  int stop_iteration;           /* on_train_batch_start returned -1 or the data ended */
  int resume_advance_end;       /* set by a checkpoint restore (lua/lutra/checkpoint/init.lua): when the epoch
                                     loop restarts, first finish the last completed batch (on_advance_end):
                                     1 = with its validation when one is due, 2 = without (it had run) */
  lt_batch_loop batch_loop;
  lt_eval_loop val_loop;
} lt_train_epoch_loop;

typedef struct lt_fit_loop {
  int phase, restarting;
  lt_progress epoch_progress;
  lt_train_epoch_loop epoch_loop;
} lt_fit_loop;

typedef enum lt_interval { LT_INTERVAL_STEP = 0, LT_INTERVAL_EPOCH } lt_interval;
typedef struct lt_sched_cfg {
  int interval, frequency, opt_idx, plateau;
} lt_sched_cfg;

/* What the trainer computed from its options and the data (Lightning's connectors do this). */
typedef struct lt_loop_cfg {
  int64_t max_epochs;           /* -1: no limit */
  int64_t min_epochs;           /* 0: none */
  int64_t max_steps;            /* -1: no limit */
  int64_t min_steps;            /* 0: none */
  int64_t num_training_batches; /* per epoch, after limit_train_batches / overfit_batches / fast_dev_run */
  int64_t val_check_batch;      /* validation every n training batches (LT_INF_BATCHES: epoch end only) */
  int64_t check_val_every_n_epoch;
  int enable_validation; /* a val loader, validation_step and limit_val_batches > 0 */
  /* the validation loaders come at the sanity check's start (LT_EV_SANITY_LOADERS, the data hooks' loaders):
   * the sanity check is due whatever the counts, which the event sets */
  int val_loaders_pending;
  int n_val_loaders;
  int64_t num_val_batches[LT_MAX_LOADERS];
  int64_t num_sanity_val_batches[LT_MAX_LOADERS];
  int n_eval_loaders; /* validate/test/predict run: loaders and their batches */
  int64_t num_eval_batches[LT_MAX_LOADERS];
  int64_t accumulate_grad_batches; /* the setting's one owner: the trainer reads it back (lp:get) */
  int n_optimizers;
  /* Lightning's optimizer frequencies ({optimizer = o, frequency = k} entries): when n_frequencies > 0,
   * one optimizer is active per batch, optimizer i for frequencies[i] consecutive batches in turn. */
  int n_frequencies;
  int frequencies[LT_MAX_OPTIMIZERS];
  int automatic_optimization;
  int tbptt_steps;             /* 0: off */
  double gradient_clip_val;    /* 0: off */
  int gradient_clip_algorithm; /* lt_clip_algo (lt_optim.h) */
  int n_schedulers;
  lt_sched_cfg sched[LT_MAX_SCHEDULERS];
} lt_loop_cfg;

typedef struct lt_loops {
  lt_ctx *c;
  const lt_host *host;
  lt_loop_cfg cfg;
  uint8_t defined[LT_NHOOKS]; /* some target defines the hook (host->refresh) */
  int keep_train_outputs;     /* the epoch-output rule's decision (host->refresh) */

  lt_fit_loop fit_loop;
  lt_eval_loop validate_loop, test_loop, predict_loop;
  uint8_t custom[LT_NSLOTS]; /* the slot is a host loop */

  /* trainer state */
  int should_stop;
  int sanity_checking;
  int fit_stage;     /* 0: no fit run, 1: running (fit_loop may be paused) */
  lt_kind eval_kind; /* the evaluation running (LT_KIND_TRAIN: none) */

  /* budget of the current fit advance */
  int64_t budget_batches; /* batches left (<= 0: no limit) */
  double deadline;        /* lt_loops_now() value to stop at (0: none) */
  int64_t batches_run;    /* training batches completed in this advance */
  int no_overrun;         /* a deadline stops before a batch expected to end after it */
  double batch_seconds;   /* a training batch's wall time, as expected from the last ones (0: unknown) */
  double recent_batch_seconds[LT_PACE_WINDOW]; /* the last batches' wall times, a ring (note_batch_time) */
  int recent_batches;                          /* how many of them are filled */
  int recent_next;                             /* the slot the next batch's time goes to */
  int check_interrupt;                         /* stop at a batch boundary on lt_interrupt_pending() */
  const atomic_int *stop_flag; /* with check_interrupt: this run's own flag instead (a background job's) */

  lt_tensor *closure_loss; /* the normalized loss of the running closure (owned) */
  lt_prof *prof;           /* the profiler (Trainer{profiler=}): timing points in the phases; NULL: off */
} lt_loops;

void lt_loops_init(lt_loops *lp, lt_ctx *c, const lt_host *host);
/* Releases what the loops hold (a closure loss left by an error). */
void lt_loops_clear(lt_loops *lp);

/* optimizer steps taken over all optimizers (trainer.global_step) */
int64_t lt_loops_global_step(const lt_loops *lp);
/* Lightning's _should_accumulate for the batch being run */
int lt_loops_should_accumulate(const lt_loops *lp);
/* With optimizer frequencies, the optimizer (0-based) that batch `batch_idx` trains; -1: every one does */
int lt_loops_active_optimizer(const lt_loops *lp, int64_t batch_idx);
/* trainer.current_epoch */
int64_t lt_loops_current_epoch(const lt_loops *lp);
/* A monotonic clock in seconds (for advance{seconds=}). */
double lt_loops_now(void);

/* --- fit -------------------------------------------------------------------------------------------- */
/* Prepares a fresh fit run (the fit loop idle, the sanity check to be done by the caller). */
void lt_loops_fit_begin(lt_loops *lp);
/* Runs the fit loop (on_train_start ... on_train_end) until it is done (LT_OK), a budget is spent
 * (LT_PAUSE: max_batches > 0 training batches, or `seconds` > 0 of wall time, checked at batch boundaries,
 * at least one batch; with lp->no_overrun no batch starts that the pace of the last ones says would end after
 * the deadline), an interrupt is pending (LT_INTERRUPTED), or a hook fails (LT_ERR). */
int lt_loops_fit_advance(lt_loops *lp, int64_t max_batches, double seconds);
/* The fit loop is done (after an LT_OK advance). */
int lt_loops_fit_done(const lt_loops *lp);
/* The sanity check: the fit's val loop over min(num_sanity_val_steps, batches) per loader, with
 * on_sanity_check_start/end (and LT_EV_SANITY_LOADERS after the start), then its progress reset. Does nothing
 * when not enabled or restarting, nor when no batch is due (unless cfg.val_loaders_pending). */
int lt_loops_sanity_check(lt_loops *lp);

/* --- evaluation and prediction ------------------------------------------------------------------ */
/* Runs validate_loop / test_loop / predict_loop (kind) over cfg.n_eval_loaders loaders. */
int lt_loops_eval_run(lt_loops *lp, lt_kind kind);

/* --- pieces the host calls back into ------------------------------------------------------------- */
/* The closure of the optimizer being run: training_step, zero_grad (first batch of an accumulation
 * window), backward, and, when `wrapped`, on_before_optimizer_step and the gradient clipping. *has_loss
 * tells whether training_step returned a loss. */
int lt_loops_closure(lt_loops *lp, int wrapped, int *has_loss);
/* Manual optimization: the user's opt:step() through self:optimizers() (before: ready; after: completed). */
void lt_loops_manual_step(lt_loops *lp, int after);
/* Runs one child loop of a host loop (custom loops: docs/reference/lutra.md, lt.Loop): the C loop in `slot`, to its end. */
int lt_loops_run_slot(lt_loops *lp, lt_slot slot);

/* The loop's main progress (LT_LOOP_LIST's progress column), phase and restarting (NULL: a bad id). */
lt_progress *lt_loops_progress(lt_loops *lp, lt_loop_id id);
int *lt_loops_phase(lt_loops *lp, lt_loop_id id);
int *lt_loops_restarting(lt_loops *lp, lt_loop_id id);
/* Sets restarting on the loop and every loop below it (load_state_dict). */
void lt_loops_set_restarting(lt_loops *lp, lt_loop_id id, int on);

#endif
