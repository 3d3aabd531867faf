/*
 * l_loop_output.c — the batch's outputs as on_train_batch_end and training_epoch_end see them (Lightning's):
 * built once per batch into the run's R table, by the dispatcher (before on_train_batch_end's targets) and by
 * the host table (when the epoch keeps outputs).
 */
#include "l_loop_call.h"

/* A training_step loss as the batch's outputs keep it (Lightning's): detached, divided by
 * accumulate_grad_batches under automatic optimization. A new reference, or NULL (ctx->err). */
lt_tensor *l_output_loss(l_loops *H, lt_tensor *t) {
  const lt_loop_cfg *cfg = &H->lp.cfg;
  lt_ctx *c = H->lp.c;
  lt_tensor *d = lt_op_detach(c, t);
  int64_t n = cfg->automatic_optimization && cfg->accumulate_grad_batches > 1 ? cfg->accumulate_grad_batches : 1;
  if (d && n > 1) {
    lt_tensor *q = lt_op_binary_scalar(c, LT_DIV, d, (double)n, 0);
    lt_tensor_release(d);
    d = q;
  }
  return d;
}

/* The batch's outputs as on_train_batch_end and training_epoch_end see them, into R[R_BATCH_OUT] (once
 * per batch). The common case (one optimizer, no TBPTT, training_step returned a tensor) is built here:
 * {loss = output_loss(loss)}; the others by env.batch_output (which calls lp:output_loss for the losses). */
int l_build_batch_output(l_loops *H, lua_State *L) {
  if (H->batch_out_built) return LT_OK;
  H->batch_out_built = 1; /* (a failure ends the run; the next attach clears it) */
  const lt_loop_cfg *cfg = &H->lp.cfg;
  int simple = cfg->tbptt_steps == 0 && (cfg->n_optimizers <= 1 || !cfg->automatic_optimization);
  if (simple) {
    push_R(H, L, R_TRAIN_OUT);
    lua_rawgeti(L, -1, 1);
    lt_tensor *t = l_totensor(L, -1);
    int nil = lua_isnil(L, -1);
    lua_pop(L, 2);
    if (nil) return LT_OK;
    if (t) {
      lt_tensor *d = l_output_loss(H, t);
      if (!d) return LT_ERR;
      lua_createtable(L, 0, 1);
      l_push_retained(L, d);
      lt_tensor_release(d);
      lua_setfield(L, -2, "loss");
      set_R(H, L, R_BATCH_OUT);
      return LT_OK;
    }
  }
  return l_call_env(H, L, "batch_output", 0, 0); /* sets R[R_BATCH_OUT] */
}
