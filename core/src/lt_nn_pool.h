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

/* the spreading loop of lt_nn_avg_pool_backward over element type T */
#define LT_NN_AVG_POOL_SPREAD(T, pg, px, planes, H, W, HO, WO, geom, window) \
  const T *src = (pg);                                                       \
  T *dst = (px);                                                             \
  for (int64_t pl = 0; pl < (planes); pl++) {                                \
    T *plane = dst + pl * (H) * (W);                                         \
    for (int64_t oh = 0; oh < (HO); oh++)                                    \
      for (int64_t ow = 0; ow < (WO); ow++) {                                \
        int64_t h0, h1, w0, w1;                                              \
        const double div = window(geom, oh, ow, &h0, &h1, &w0, &w1);         \
        const T v = (T)(src[(pl * (HO) + oh) * (WO) + ow] / div);            \
        for (int64_t ih = h0; ih < h1; ih++)                                 \
          for (int64_t iw = w0; iw < w1; iw++) plane[ih * (W) + iw] += v;    \
      }                                                                      \
  }

/* The average pools' backward, float32 or float64 (the input's dtype). n: the pool's node (inputs[0]: the
 * input); gout: [N x C x HO x WO]. Static inline so that the pool's window function inlines into the loop. */
static inline int lt_nn_avg_pool_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin, const void *geom,
                                          lt_nn_avg_window_fn window) {
  const lt_tensor *x = n->inputs[0];
  lt_tensor *gc;
  lt_tensor *gx = lt_nn_pool_grad_buffers(c, gout, x, &gc);
  if (!gx) return LT_ERR;
  const int64_t planes = x->shape[0] * x->shape[1], H = x->shape[2], W = x->shape[3];
  const int64_t HO = gc->shape[2], WO = gc->shape[3];
  if (x->dtype == LT_F64) {
    LT_NN_AVG_POOL_SPREAD(double, lt_f64(gc), lt_f64(gx), planes, H, W, HO, WO, geom, window)
  } else {
    LT_NN_AVG_POOL_SPREAD(float, lt_f32(gc), lt_f32(gx), planes, H, W, HO, WO, geom, window)
  }
  lt_tensor_release(gc);
  gin[0] = gx;
  return LT_OK;
}

#endif
