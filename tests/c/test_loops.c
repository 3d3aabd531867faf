/*
 * test_loops.c — the C loops (core/src/lt_loop.h) driven by a host written in C, without Lua: hook order,
 * counters, accumulation, -1 from on_train_batch_start, max_steps, should_stop with min_epochs, validation
 * schedule and sanity check, stepwise advances equal to one run (bitwise), interrupts, errors and the
 * progress they leave, evaluation with several loaders, gradient clipping.
 * Prints "ok - ..." / "not ok - ..." per check and a final "N passed, M failed".
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lt_interrupt.h"
#include "lt_loop.h"
#include "lt_ops.h"

static int npass, nfail;

static void check(int cond, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s - ", cond ? "ok" : "not ok");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  if (cond) npass++;
  else nfail++;
}

/* ---- a host in C: one weight w, batches x = batch number + 1, loss = (w*x - 2x)^2 -------------------- */

typedef struct host {
  lt_ctx *c;
  lt_loops *lp;
  lt_tensor *w;
  lt_tensor *loss;          /* the last training_step's loss (the host keeps it) */
  int64_t n_batches[LT_NKINDS];
  int64_t pos[LT_NKINDS];
  char log[16384];          /* hook names, space separated */
  int define_all;           /* define every hook, or only a few */
  int stop_at;              /* on_train_batch_start returns -1 at this batch (-1: never) */
  int fail_at_batch_end;    /* on_train_batch_end fails at this batch (-1: never) */
  int interrupt_at_step;    /* request an interrupt when global_step reaches it (-1: never) */
  int stop_every_batch;     /* set should_stop in on_train_batch_end */
  int late_loaders;         /* the loaders' counts come with the loaders events (a datamodule's hooks) */
  int steps, zero_grads, eval_steps, events[LT_NEVENTS];
  double lr;
} host;

static void logf_(host *h, const char *fmt, ...) {
  size_t n = strlen(h->log);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(h->log + n, sizeof h->log - n, fmt, ap);
  va_end(ap);
}

static int h_refresh(void *ud, lt_loops *lp, int epoch_start) {
  host *h = ud;
  for (int i = 0; i < LT_NHOOKS; i++) lp->defined[i] = (uint8_t)h->define_all;
  lp->defined[LT_HOOK_ON_TRAIN_BATCH_START] = 1;
  lp->defined[LT_HOOK_ON_TRAIN_BATCH_END] = 1;
  /* these have C defaults: keep them to the core */
  lp->defined[LT_HOOK_OPTIMIZER_STEP] = lp->defined[LT_HOOK_BACKWARD] = 0;
  lp->defined[LT_HOOK_OPTIMIZER_ZERO_GRAD] = lp->defined[LT_HOOK_CONFIGURE_GRADIENT_CLIPPING] = 0;
  if (epoch_start) lp->keep_train_outputs = 0;
  return LT_OK;
}

static int h_call(void *ud, lt_hook hk, lt_hook_args *a) {
  host *h = ud;
  switch (hk) {
  case LT_HOOK_ON_TRAIN_BATCH_START:
    logf_(h, "tbs%lld ", (long long)a->batch_idx);
    if (a->batch_idx == h->stop_at) a->ret = -1;
    break;
  case LT_HOOK_ON_TRAIN_BATCH_END:
    logf_(h, "tbe%lld ", (long long)a->batch_idx);
    if (a->batch_idx == h->fail_at_batch_end) return lt_fail(h->c, "on_train_batch_end: failed on purpose");
    if (h->interrupt_at_step >= 0 && lt_loops_global_step(h->lp) == h->interrupt_at_step) lt_interrupt_request();
    if (h->stop_every_batch) h->lp->should_stop = 1;
    break;
  case LT_HOOK_ON_VALIDATION_BATCH_START: case LT_HOOK_ON_TEST_BATCH_START:
    logf_(h, "%s%lld/%lld ", hk == LT_HOOK_ON_TEST_BATCH_START ? "test" : "val", (long long)a->batch_idx,
          (long long)a->dataloader_idx);
    break;
  case LT_HOOK_ON_VALIDATION_MODEL_EVAL: case LT_HOOK_ON_VALIDATION_MODEL_TRAIN:
  case LT_HOOK_ON_TEST_MODEL_EVAL: case LT_HOOK_ON_TEST_MODEL_TRAIN:
  case LT_HOOK_ON_PREDICT_MODEL_EVAL: case LT_HOOK_LR_SCHEDULER_STEP:
    if (h->define_all) logf_(h, "%s ", lt_hook_names[hk]);
    break;
  default:
    logf_(h, "%s ", lt_hook_names[hk]);
  }
  return LT_OK;
}

static int h_data_start(void *ud, lt_kind kind, int64_t dl) {
  host *h = ud;
  (void)dl;
  h->pos[kind] = 0;
  return LT_OK;
}

static int h_data_next(void *ud, lt_kind kind, int64_t dl, int *got) {
  host *h = ud;
  (void)dl;
  *got = h->pos[kind] < h->n_batches[kind];
  if (*got) h->pos[kind]++;
  return LT_OK;
}

static int h_split(void *ud, int steps, int *n) { (void)ud; (void)steps; *n = 1; return LT_OK; }

static int h_training_step(void *ud, lt_hook_args *a, lt_tensor **loss) {
  host *h = ud;
  logf_(h, "ts ");
  double x = (double)h->pos[LT_KIND_TRAIN];
  lt_tensor *wx = lt_op_binary_scalar(h->c, LT_MUL, h->w, x, 0);
  lt_tensor *d = wx ? lt_op_binary_scalar(h->c, LT_SUB, wx, 2 * x, 0) : NULL;
  lt_tensor *sq = d ? lt_op_unary(h->c, LT_SQUARE, d) : NULL;
  lt_tensor *l = sq ? lt_op_reduce(h->c, LT_RSUM, sq, -1, 0) : NULL;
  lt_tensor_release(wx);
  lt_tensor_release(d);
  lt_tensor_release(sq);
  if (!l) return LT_ERR;
  if (h->loss) lt_tensor_release(h->loss);
  h->loss = l;
  *loss = l;
  (void)a;
  return LT_OK;
}

static int h_eval_step(void *ud, lt_hook_args *a) {
  host *h = ud;
  (void)a;
  h->eval_steps++;
  return LT_OK;
}

static int h_opt_step(void *ud, int k) {
  host *h = ud;
  (void)k;
  h->steps++;
  logf_(h, "step ");
  if (!h->w->grad) return LT_OK;
  int was = h->c->grad_enabled;
  h->c->grad_enabled = 0; /* an update is not recorded */
  int rc = lt_op_axpy_(h->c, h->w, -h->lr, h->w->grad);
  h->c->grad_enabled = was;
  return rc;
}

static int h_zero_grad(void *ud, int k) {
  host *h = ud;
  (void)k;
  h->zero_grads++;
  logf_(h, "zg ");
  return h->w->grad ? lt_op_zero_(h->c, h->w->grad) : LT_OK;
}

static int h_opt_params(void *ud, int k, int *n, lt_tensor *const **params) {
  host *h = ud;
  (void)k;
  *n = 1;
  *params = &h->w;
  return LT_OK;
}

static int h_event(void *ud, lt_event ev, lt_hook_args *a) {
  host *h = ud;
  (void)a;
  h->events[ev]++;
  if (!h->late_loaders) return LT_OK;
  lt_loop_cfg *cfg = &h->lp->cfg;
  if (ev == LT_EV_SANITY_LOADERS) { /* the validation loader: 3 batches, a sanity check of 2 */
    logf_(h, "sanity_loaders ");
    cfg->val_loaders_pending = 0;
    cfg->n_val_loaders = 1;
    cfg->num_val_batches[0] = h->n_batches[LT_KIND_VAL] = 3;
    cfg->num_sanity_val_batches[0] = 2;
    cfg->enable_validation = 1;
  } else if (ev == LT_EV_FIT_LOADERS) { /* the training loader: 2 batches */
    logf_(h, "fit_loaders ");
    cfg->num_training_batches = cfg->val_check_batch = h->n_batches[LT_KIND_TRAIN] = 2;
  }
  return LT_OK;
}

static const lt_host HOST_VT = { NULL, h_refresh, h_call, h_data_start, h_data_next, h_split, h_training_step,
                                 h_eval_step, h_opt_step, h_zero_grad, h_opt_params, h_event, NULL };

typedef struct fixture { lt_ctx c; host h; lt_host vt; lt_loops lp; } fixture;

static void setup(fixture *f, int64_t ntrain, int64_t nval) {
  memset(f, 0, sizeof *f);
  lt_ctx_init(&f->c);
  f->vt = HOST_VT;
  f->vt.ud = &f->h;
  f->h.c = &f->c;
  f->h.lp = &f->lp;
  int64_t shape[1] = { 1 };
  f->h.w = lt_tensor_zeros(&f->c, LT_F32, 1, shape);
  f->h.w->requires_grad = 1;
  f->h.stop_at = f->h.fail_at_batch_end = f->h.interrupt_at_step = -1;
  f->h.lr = 0.01;
  f->h.n_batches[LT_KIND_TRAIN] = ntrain;
  f->h.n_batches[LT_KIND_VAL] = nval;
  lt_loops_init(&f->lp, &f->c, &f->vt);
  f->lp.cfg.max_epochs = 2;
  f->lp.cfg.num_training_batches = ntrain;
  f->lp.cfg.val_check_batch = ntrain > 0 ? ntrain : 1;
  f->lp.cfg.n_val_loaders = nval > 0 ? 1 : 0;
  f->lp.cfg.num_val_batches[0] = nval;
  f->lp.cfg.num_sanity_val_batches[0] = nval < 2 ? nval : 2;
  f->lp.cfg.enable_validation = nval > 0;
}

static void teardown(fixture *f) {
  lt_loops_clear(&f->lp);
  lt_tensor_release(f->h.w);
  if (f->h.loss) lt_tensor_release(f->h.loss);
}

static int fit(fixture *f) {
  lt_loops_fit_begin(&f->lp);
  if (f->h.lp->host->refresh(f->h.lp->host->ud, f->h.lp, 0)) return LT_ERR;
  int rc = lt_loops_sanity_check(&f->lp);
  if (rc) return rc;
  return lt_loops_fit_advance(&f->lp, 0, 0);
}

static float wval(fixture *f) { return lt_f32(f->h.w)[0]; }

int main(void) {
  fixture f;

  /* 1. a plain fit: order of the per-batch calls, counters */
  setup(&f, 3, 0);
  f.h.define_all = 1;
  int rc = fit(&f);
  check(rc == LT_OK, "fit runs to the end");
  if (rc != LT_OK) printf("# %s\n# log: %s\n", f.c.err, f.h.log);
  check(lt_loops_global_step(&f.lp) == 6 && lt_loops_current_epoch(&f.lp) == 2, "2 epochs x 3 batches: 6 steps, epoch 2");
  {
    const char *want = "on_train_start on_train_epoch_start tbs0 ts on_before_zero_grad zg on_before_backward "
                       "on_after_backward on_before_optimizer_step step tbe0 tbs1 ";
    check(strncmp(f.h.log, want, strlen(want)) == 0, "per batch: on_train_batch_start, training_step, zero_grad, "
          "backward, on_before_optimizer_step, step, on_train_batch_end");
    check(strstr(f.h.log, "tbe2 on_train_epoch_end on_train_epoch_start tbs0") != NULL, "epoch end then next epoch");
  }
  check(f.h.events[LT_EV_TRAIN_EPOCH_END] == 2 && f.h.events[LT_EV_TRAIN_BATCH_END] == 6, "events per epoch and batch");
  check(f.lp.fit_loop.epoch_loop.batches_that_stepped == 6, "batches_that_stepped counts batches that stepped");
  check(lt_loops_fit_done(&f.lp), "the fit is done");
  float w_full = wval(&f);
  teardown(&f);

  /* 2. stepwise: advances of one batch give the same weight, bit for bit */
  setup(&f, 3, 0);
  f.h.define_all = 1;
  lt_loops_fit_begin(&f.lp);
  f.vt.refresh(f.vt.ud, &f.lp, 0); /* the host builds its dispatch lists when a run starts */
  int advances = 0;
  while ((rc = lt_loops_fit_advance(&f.lp, 1, 0)) == LT_PAUSE) advances++;
  check(rc == LT_OK && advances == 5, "6 batches one at a time: 5 pauses then done (got %d)", advances);
  check(memcmp(&w_full, lt_f32(f.h.w), sizeof(float)) == 0, "stepwise weight equals the full run bitwise");
  int starts = 0;
  for (const char *p = f.h.log; (p = strstr(p, "on_train_start")); p++) starts++;
  check(starts == 1, "start hooks run once over many advances (%d)", starts);

  teardown(&f);

  /* 3. accumulation: 2 over 4 batches -> zero_grad on 0 and 2, steps on 1 and 3 */
  setup(&f, 4, 0);
  f.lp.cfg.max_epochs = 1;
  f.lp.cfg.accumulate_grad_batches = 2;
  fit(&f);
  check(f.h.steps == 2 && f.h.zero_grads == 2, "accumulate 2 over 4: 2 steps, 2 zero_grads");
  check(strstr(f.h.log, "tbs0 ts zg tbe0 tbs1 ts step tbe1") != NULL, "accumulating batch: no step; stepping: no zero_grad");
  teardown(&f);

  /* 4. -1 from on_train_batch_start at batch 1 */
  setup(&f, 4, 0);
  f.lp.cfg.max_epochs = 1;
  f.h.stop_at = 1;
  fit(&f);
  lt_progress *bp = &f.lp.fit_loop.epoch_loop.batch_progress;
  check(f.h.steps == 1 && strstr(f.h.log, "tbs1 ") != NULL && strstr(f.h.log, "tbs2") == NULL,
        "-1 at batch 1 ends the epoch at once");

  check(bp->current.ready == 2 && bp->current.processed == 2 && bp->current.completed == 1,
        "-1: the batch is processed but not completed");
  teardown(&f);

  /* 5. max_steps mid-epoch */
  setup(&f, 4, 0);
  f.lp.cfg.max_epochs = 10;
  f.lp.cfg.max_steps = 5;
  fit(&f);
  check(lt_loops_global_step(&f.lp) == 5 && lt_loops_current_epoch(&f.lp) == 2, "max_steps 5 stops in epoch 2");
  teardown(&f);

  /* 6. should_stop with min_epochs */
  setup(&f, 4, 0);
  f.lp.cfg.max_epochs = 10;
  f.lp.cfg.min_epochs = 3;
  f.h.stop_every_batch = 1;
  fit(&f);
  check(lt_loops_global_step(&f.lp) == 3 && lt_loops_current_epoch(&f.lp) == 3 && f.lp.should_stop,
        "should_stop every batch with min_epochs 3: 3 epochs of one batch");
  teardown(&f);

  /* 7. validation each epoch after the last batch, and the sanity check */
  setup(&f, 2, 3);
  f.h.define_all = 1;
  fit(&f);
  check(f.h.eval_steps == 2 + 3 * 2, "sanity 2 + 2 validations of 3 batches (got %d)", f.h.eval_steps);
  check(strstr(f.h.log, "on_sanity_check_start on_validation_model_eval on_validation_start on_validation_epoch_start "
                        "val0/0 on_validation_batch_end val1/0 on_validation_batch_end validation_epoch_end "
                        "on_validation_epoch_end on_validation_end on_validation_model_train on_sanity_check_end "
                        "on_train_start") == f.h.log, "the sanity check runs 2 batches of the validation loop first");
  check(strstr(f.h.log, "tbe1 on_validation_model_eval on_validation_start") != NULL,
        "in-epoch validation after the last on_train_batch_end");
  check(strstr(f.h.log, "on_validation_model_train on_train_epoch_end") != NULL, "validation before the epoch end");
  check(f.lp.fit_loop.epoch_loop.val_loop.dataloader_progress.total.completed == 2,
        "the sanity check leaves no validation progress");
  teardown(&f);

  /* 8. val_check_batch 2 of 5 batches, check_val_every_n_epoch 2 */
  setup(&f, 5, 1);
  f.lp.cfg.max_epochs = 4;
  f.lp.cfg.val_check_batch = 2;
  f.lp.cfg.check_val_every_n_epoch = 2;
  f.lp.cfg.num_sanity_val_batches[0] = 0;
  fit(&f);
  check(f.h.eval_steps == 4, "validation at batches 2 and 4 of epochs 2 and 4 (got %d)", f.h.eval_steps);
  teardown(&f);

  /* 9. interrupt at a batch boundary, then continue */
  setup(&f, 3, 0);
  f.lp.check_interrupt = 1;
  f.h.interrupt_at_step = 2;
  lt_loops_fit_begin(&f.lp);
  rc = lt_loops_fit_advance(&f.lp, 0, 0);
  check(rc == LT_INTERRUPTED && lt_loops_global_step(&f.lp) == 2, "interrupt stops after the batch that requested it");
  lt_interrupt_clear();
  f.h.interrupt_at_step = -1;
  rc = lt_loops_fit_advance(&f.lp, 0, 0);
  check(rc == LT_OK && lt_loops_global_step(&f.lp) == 6, "the run continues to the end after an interrupt");
  check(memcmp(&w_full, lt_f32(f.h.w), sizeof(float)) == 0, "interrupted and continued equals uninterrupted");
  teardown(&f);

  /* 10. a failing hook: LT_ERR, message, counters */
  setup(&f, 4, 0);
  f.lp.cfg.max_epochs = 1;
  f.h.fail_at_batch_end = 2;
  rc = fit(&f);
  bp = &f.lp.fit_loop.epoch_loop.batch_progress;
  check(rc == LT_ERR && strcmp(f.c.err, "on_train_batch_end: failed on purpose") == 0, "a failing hook fails the run");
  check(bp->current.ready == 3 && bp->current.processed == 3 && bp->current.completed == 2 &&
        lt_loops_global_step(&f.lp) == 3, "progress says batch 3 was processed, not completed");
  teardown(&f);

  /* 11. evaluation with two loaders */
  setup(&f, 1, 0);
  f.h.define_all = 1;
  f.h.n_batches[LT_KIND_TEST] = 2;
  f.lp.cfg.n_eval_loaders = 2;
  f.lp.cfg.num_eval_batches[0] = 2;
  f.lp.cfg.num_eval_batches[1] = 1;
  f.lp.c->grad_enabled = 1;
  f.vt.refresh(f.vt.ud, &f.lp, 0);
  rc = lt_loops_eval_run(&f.lp, LT_KIND_TEST);
  check(rc == LT_OK && f.h.eval_steps == 3, "test over two loaders of 2 and 1 batches");
  check(strstr(f.h.log, "test0/0 on_test_batch_end test1/0 on_test_batch_end test0/1 on_test_batch_end "
                        "test_epoch_end on_test_epoch_end") != NULL, "dataloader_idx in the batch hooks");
  check(f.lp.test_loop.dataloader_progress.total.completed == 2 && f.c.grad_enabled == 1,
        "two loaders completed; grad mode restored");
  teardown(&f);

  /* 12. gradient clipping by norm and value */
  {
    lt_ctx c;
    lt_ctx_init(&c);
    int64_t shape[1] = { 2 };
    lt_tensor *p = lt_tensor_zeros(&c, LT_F32, 1, shape);
    p->grad = lt_tensor_zeros(&c, LT_F32, 1, shape);
    lt_f32(p->grad)[0] = 30;
    lt_f32(p->grad)[1] = 40;
    lt_clip_gradients(&c, 1, &p, 5, LT_CLIP_NORM);
    check(fabsf(lt_f32(p->grad)[0] - 3) < 1e-4f && fabsf(lt_f32(p->grad)[1] - 4) < 1e-4f, "clip by norm 5: (3, 4)");
    lt_f32(p->grad)[0] = -9;
    lt_clip_gradients(&c, 1, &p, 2, LT_CLIP_VALUE);
    check(lt_f32(p->grad)[0] == -2 && lt_f32(p->grad)[1] == 2, "clip by value 2");
    lt_tensor_release(p);
  }

  /* 13. an empty loader: the fit loop is skipped */
  setup(&f, 0, 0);
  rc = fit(&f);
  check(rc == LT_OK && f.h.log[0] == 0, "no training batches: no hook at all");
  teardown(&f);

  /* 14. loaders that come with the events (after on_sanity_check_start, before on_train_start): the
   * provisional counts run a sanity check and do not skip the fit loop, the events' counts are used */
  setup(&f, 0, 0);
  f.h.define_all = 1;
  f.h.late_loaders = 1;
  f.lp.cfg.num_training_batches = f.lp.cfg.val_check_batch = LT_INF_BATCHES;
  f.lp.cfg.enable_validation = f.lp.cfg.val_loaders_pending = 1;
  rc = fit(&f);
  check(rc == LT_OK && f.h.eval_steps == 2 + 3 * 2, "sanity 2 + 2 validations of 3 batches (got %d)", f.h.eval_steps);
  check(lt_loops_global_step(&f.lp) == 4, "2 epochs x 2 batches from the fit_loaders event");
  check(strstr(f.h.log, "on_sanity_check_start sanity_loaders on_validation_model_eval") == f.h.log,
        "the validation counts come after on_sanity_check_start");
  check(strstr(f.h.log, "on_sanity_check_end fit_loaders on_train_start on_train_epoch_start") != NULL,
        "the training counts come before on_train_start");
  check(f.h.events[LT_EV_SANITY_LOADERS] == 1 && f.h.events[LT_EV_FIT_LOADERS] == 1, "each event once");
  teardown(&f);

  printf("%d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
