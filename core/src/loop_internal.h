/* loop_internal.h — helpers shared by the loop files (loop_*.c); not part of the core's API. */
#ifndef LOOP_INTERNAL_H
#define LOOP_INTERNAL_H

#include <math.h>

#include "lt_loop.h"

#define LT_TRY(x)                 \
  do {                            \
    int rc_ = (x);                \
    if (rc_ != LT_OK) return rc_; \
  } while (0)

static inline int lt__call(lt_loops *lp, lt_hook h, lt_hook_args *a) { return lp->host->call(lp->host->ud, h, a); }
static inline int lt__call_if(lt_loops *lp, lt_hook h, lt_hook_args *a) {
  return lp->defined[h] ? lp->host->call(lp->host->ud, h, a) : LT_OK;
}
static inline int lt__event(lt_loops *lp, lt_event e, lt_hook_args *a) {
  return lp->host->event ? lp->host->event(lp->host->ud, e, a) : LT_OK;
}
static inline int lt__run_custom(lt_loops *lp, int slot) {
  if (!lp->host->run_custom) return lt_fail(lp->c, "loops: slot %d is custom but the host runs no custom loops", slot);
  lt_hook_args a = { 0 };
  return lp->host->run_custom(lp->host->ud, slot, &a);
}

/* A hook's arguments with no index set and the fit loop's epoch and batch. Here, reading the counters
 * itself (the same as lt_loops_current_epoch), so that loop_eval.c needs nothing from loop_fit.c: the fit
 * loop runs the evaluation loop, not the other way round. */
static inline lt_hook_args lt__args(const lt_loops *lp) {
  lt_hook_args a = { 0 };
  a.dataloader_idx = -1;
  a.optimizer_idx = -1;
  a.scheduler_idx = -1;
  a.epoch = lp->fit_loop.epoch_progress.current.completed;
  a.batch_idx = lp->fit_loop.epoch_loop.batch_idx;
  return a;
}

/* The profiler's timing points around a phase (lt_prof.h): one test when profiling is off. */
#define LT_PROF_IN(lp, row)                           \
  do {                                                \
    if ((lp)->prof) lt_prof_enter((lp)->prof, (row)); \
  } while (0)
#define LT_PROF_OUT(lp)                       \
  do {                                        \
    if ((lp)->prof) lt_prof_exit((lp)->prof); \
  } while (0)
/* rc = call, inside the row's timing, then LT_TRY(rc) */
#define LT_PROF_TRY(lp, row, call)  \
  do {                              \
    LT_PROF_IN(lp, row);            \
    int prc_ = (call);              \
    LT_PROF_OUT(lp);                \
    if (prc_ != LT_OK) return prc_; \
  } while (0)

int lt__should_accumulate(const lt_loops *lp);
int lt__eval_loop_run(lt_loops *lp, lt_eval_loop *V);

#endif
