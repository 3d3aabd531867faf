/*
 * lt_conv.h — the checks and window arithmetic the convolution kernels share (nn_conv.c, nn_conv_general.c).
 */
#ifndef LT_CONV_H
#define LT_CONV_H

#include <stdint.h>

#include "lt_ctx.h"
#include "lt_ops.h"
#include "lt_tensor.h"

/* The sizes a convolution derives from its input, weight and options: its output oshape [N x O x HO x WO] and the
 * unfolded input [K x PH x PW] of one item (K rows of PH*PW positions) must hold at most 2^62 elements each
 * (lt_size.h), checked before any of them is computed or allocated; fails naming op and the shape. */
int lt_conv_check_sizes(lt_ctx *c, const char *op, const int64_t *oshape, int64_t K, int64_t PH, int64_t PW);

/* LT_OK when input x, weight w and bias b (or NULL) are all float32 or all float64; else a message naming op and
 * the dtypes ("conv2d: input is float32 and weight is float64: both must have the same float dtype") */
int lt_conv_check_dtypes(lt_ctx *c, const char *op, const lt_tensor *x, const lt_tensor *w, const lt_tensor *b);

/* Threads for a convolution's batch split (nn_conv.c, nn_conv_general.c): on more than one thread the batch of N
 * items is cut into one range per thread, each running the one-thread kernel on its own scratch, when every range
 * has at least 4M multiply-adds (O output channels x K unfolded rows x P positions per item). 1 (no split) under
 * autocast (its bf16 GEMM threads itself), when a GEMM size of the split would pass an int (lt_gemm's bound, checked
 * here so that a part cannot raise an error), or when the BLAS does not load (the one-part path then reports it). */
int lt_conv_split_parts(lt_ctx *c, int64_t N, int64_t O, int64_t K, int64_t P);

/* nn_conv.c's tuned float32 conv2d (no dilation, one group) with its fused activation. lt_nn_conv2d_act
 * (nn_conv_general.c) is the entry every caller uses: it sends float64 to the general im2col + dgemm path, so the
 * tuned file never calls the general one and the two do not call each other around a loop. */
lt_tensor *lt_nn_conv2d_f32_act(lt_ctx *c, lt_tensor *x, lt_tensor *w, lt_tensor *b, int sh, int sw, int ph, int pw,
                                lt_act act);
/* the same for a dilated kernel (stride, padding, dilation: [2] each), one group, no activation */
lt_tensor *lt_nn_conv2d_f32_dilated(lt_ctx *c, lt_tensor *x, lt_tensor *w, lt_tensor *b, const int *stride,
                                    const int *padding, const int *dilation);

/* range [lo, hi) of output positions o (of nout) whose input position o*S - P + off lies in [0, n): the columns an
 * unfolded kernel tap at offset off reads from the input, the rest being padding */
static inline void lt_conv_valid_range(int64_t off, int64_t S, int64_t P, int64_t n, int64_t nout, int64_t *lo,
                                       int64_t *hi) {
  int64_t a = P - off; /* need o*S >= a */
  int64_t l = a <= 0 ? 0 : (a + S - 1) / S;
  int64_t b = n - 1 + P - off; /* need o*S <= b */
  int64_t h = b < 0 ? 0 : b / S + 1;
  if (h > nout) h = nout;
  if (l > h) l = h;
  *lo = l;
  *hi = h;
}

#endif
