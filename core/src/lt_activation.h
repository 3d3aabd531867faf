/*
 * lt_activation.h — the elementwise activations of PyTorch's vocabulary beyond relu/gelu/tanh/sigmoid
 * (ops_activation.c), forward and backward in C, and PReLU with its learned slope per channel.
 *
 *   lt_tensor *y = lt_op_activation(c, LT_AF_SOFTPLUS, x, 1.0, 20.0);   // beta, threshold
 *   lt_tensor *z = lt_op_prelu(c, x, w);                                   // w: [1] or [C], C = x's dim 2
 */
#ifndef LT_ACTIVATION_H
#define LT_ACTIVATION_H

#include "lt_tensor.h"

/* The scalar arguments p0, p1 of each kind (unused ones are ignored). */
typedef enum lt_actfn {
  LT_AF_SILU,        /* x sigmoid(x) */
  LT_AF_ELU,         /* p0 = alpha */
  LT_AF_SOFTPLUS,    /* p0 = beta, p1 = threshold: x where beta x > threshold */
  LT_AF_MISH,        /* x tanh(softplus(x)) */
  LT_AF_HARDTANH,    /* p0 = min_val, p1 = max_val (min_val <= max_val) */
  LT_AF_HARDSWISH,   /* x relu6(x + 3) / 6 */
  LT_AF_HARDSIGMOID, /* relu6(x + 3) / 6 */
  LT_AF_COUNT
} lt_actfn;

const char *lt_actfn_name(lt_actfn kind);
lt_tensor *lt_op_activation(lt_ctx *c, lt_actfn kind, lt_tensor *x, double p0, double p1);
/* y = x > 0 ? x : w[channel] x; the channel is dim 2 (1-based) of x, or one slope for every element */
lt_tensor *lt_op_prelu(lt_ctx *c, lt_tensor *x, lt_tensor *w);

#endif
