/*
 * lt_nn_pool.h — what the backward passes of the 2-D pools (nn_pool.c, nn_pool_adaptive.c) share: their
 * buffers, and the average pools' spreading of each output's gradient over its window. The average pools differ
 * only in their windows, which each passes as a function:
 *
 *   static double my_window(const void *geom, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1, int64_t *w0,
 *                           int64_t *w1);   // rows [h0, h1) x columns [w0, w1) of the plane; returns the divisor
 *   return lt_nn_avg_pool_backward(c, n, gout, gin, &g, my_window);
 */
#ifndef LT_NN_POOL_H
#define LT_NN_POOL_H

#include <stdint.h>

#include "lt_alloc.h"
#include "lt_errors.h"
#include "lt_nn.h"

/* A zeroed gradient (x's dtype) for the pool's [N x C x H x W] input x, and in *gc the output gradient made
 * contiguous (the caller releases it); NULL, with nothing held, when either cannot be allocated. */
static inline lt_tensor *lt_nn_pool_grad_buffers(lt_ctx *c, lt_tensor *gout, const lt_tensor *x, lt_tensor **gc) {
  *gc = lt_op_contiguous(c, gout);
  lt_tensor *gx = *gc ? lt_tensor_zeros(c, x->dtype, 4, x->shape) : NULL;
  if (!gx) lt_tensor_release(*gc);
  return gx;
}

typedef double (*lt_nn_avg_window_fn)(const void *geom, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1, int64_t *w0,
                                      int64_t *w1);

/* One output cell's window: rows [h0, h1) x columns [w0, w1) of the plane, and the divisor of its sum */
typedef struct lt_nn_avg_win {
  int64_t h0, h1, w0, w1;
  double div;
} lt_nn_avg_win;

/* The backward of an average pool from its windows' table (HO*WO entries, row-major; the same for every plane): gin[0]
 * = each output's gradient / its divisor, added over its window. The planes are split over the pool when the work
 * pays. In nn_pool.c. */
int lt_nn_avg_pool_backward_table(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin, const lt_nn_avg_win *win);

/* The average pools' backward, float32 or float64 (the input's dtype). n: the pool's node (inputs[0]: the
 * input); gout: [N x C x HO x WO]. The windows are the same in every plane, so they are asked of `window` once per
 * output cell into a table (not once per cell of every plane, as the spreading loop did before the pool split it). */
static inline int lt_nn_avg_pool_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin, const void *geom,
                                          lt_nn_avg_window_fn window) {
  const int64_t HO = gout->shape[2], WO = gout->shape[3];
  const size_t bytes = sizeof(lt_nn_avg_win) * (size_t)(HO * WO);
  lt_nn_avg_win *win = lt_alloc(bytes);
  if (!win) return lt_fail(c, LT_E_OOM, bytes);
  for (int64_t oh = 0; oh < HO; oh++)
    for (int64_t ow = 0; ow < WO; ow++) {
      lt_nn_avg_win *e = win + oh * WO + ow;
      e->div = window(geom, oh, ow, &e->h0, &e->h1, &e->w0, &e->w1);
    }
  int rc = lt_nn_avg_pool_backward_table(c, n, gout, gin, win);
  lt_free(win, bytes);
  return rc;
}

#endif
