/*
 * lt_check.h — the argument checks every op family shares (ops_check.c): below the ops and autograd, which both
 * use them.
 */
#ifndef LT_CHECK_H
#define LT_CHECK_H

#include "lt_tensor.h"

/* LT_OK when t has dtype want, else the message names op and what ("input", "the tensor updated in place") */
int lt_check_dtype(lt_ctx *c, const char *op, const char *what, const lt_tensor *t, lt_dtype want);
/* LT_OK when t is float32 or float64 (an op with kernels for both), else the message names op and what */
int lt_check_float(lt_ctx *c, const char *op, const char *what, const lt_tensor *t);
/* The one refusal of float64 by an op that has no float64 kernel yet: LT_OK unless t is float64. The binding
 * calls it for every tensor argument of a function not declared float64-capable (l_checktensor), and
 * lt_check_dtype for a float32-only check, so no float32 kernel reads doubles. */
int lt_check_no_f64(lt_ctx *c, const char *op, const lt_tensor *t);
/* refuses an in-place update of a tensor that requires grad while grad mode is on */
int lt_check_inplace(lt_ctx *c, const char *op, const lt_tensor *t);
/* the broadcast shape of a and b into ndim/shape, or a message naming op and both shapes */
int lt_broadcast_shape(lt_ctx *c, const char *op, const lt_tensor *a, const lt_tensor *b, int *ndim, int64_t *shape);

#endif
