/*
 * lt_attention.h — scaled dot-product attention, forward and backward in one kernel (nn_attention.c).
 *
 *   // q [B.., L, E], k [B.., S, E], v [B.., S, Ev] -> [B.., L, Ev]
 *   lt_tensor *o = lt_nn_sdpa(c, q, k, v, NULL, 1, 0.0, 0.0, NULL);      // causal, scale 1/sqrt(E)
 *
 * The L x S weights are never kept: the forward computes them a block of query rows at a time into a
 * scratch buffer and saves one log-sum-exp per row; the backward recomputes them from q and k. Causal
 * masking (query i sees keys 1..i, the top-left aligned lower triangle) skips the keys a block cannot see.
 * Dropout on the weights draws its mask from a counter-based hash of one seed taken from c->rng, so the
 * backward regenerates it instead of storing it.
 */
#ifndef LT_ATTENTION_H
#define LT_ATTENTION_H

#include "lt_ops.h"

/* q, k, v: float32 or float64, one dtype (the output's and the gradients'). mask: NULL, or broadcastable to
 * [B.., L, S]: an int64 tensor (non-zero = masked), a float tensor (float32 or float64, whatever q's dtype) of only
 * 0 and 1 (1 = masked), or any other float tensor (added to the scaled scores). No gradient reaches it.
 * scale <= 0 means 1/sqrt(E). weights: NULL, or receives the [B.., L, S] weights used (after dropout; no
 * autograd). A row whose keys are all masked is NaN, as in PyTorch. */
lt_tensor *lt_nn_sdpa(lt_ctx *c, lt_tensor *q, lt_tensor *k, lt_tensor *v, lt_tensor *mask, int is_causal,
                      double dropout_p, double scale, lt_tensor **weights);

#endif
