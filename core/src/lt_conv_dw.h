/*
 * lt_conv_dw.h — direct depthwise convolution (nn_conv_depthwise.c): groups = input channels, each input channel
 * c feeding its M output channels c*M .. c*M+M-1 through its own KH x KW window (stride, padding, dilation).
 * nn_conv_general.c sends its three passes here when a group holds one input channel; the kernels skip the
 * im2col buffer and the per-plane GEMMs, vectorise along the output row and run planes on lutra's pool.
 */
#ifndef LT_CONV_DW_H
#define LT_CONV_DW_H

#include <stdint.h>

#include "lt_ctx.h"

/* the largest kernel (KH * KW taps) the kernels take: the weight gradient keeps a channel's taps on the stack;
 * depthwise kernels are 3x3 to 7x7, larger ones stay on the GEMM path */
#define LT_CONV_DW_MAX_TAPS 64

typedef struct lt_dw_geom {
  int64_t N, C, M;      /* batch, input channels, outputs per input channel (O = C * M) */
  int64_t H, W, HO, WO; /* input and output planes */
  int64_t KH, KW, SH, SW, PH, PW, DH, DW;
} lt_dw_geom;

/* y [N, C*M, HO, WO] = the convolution of x [N, C, H, W] with w [C*M, 1, KH, KW] (y overwritten) */
void lt_conv_dw_forward(lt_ctx *c, const lt_dw_geom *g, const float *x, const float *w, float *y);
/* gx [N, C, H, W] += its adjoint applied to gy [N, C*M, HO, WO] */
void lt_conv_dw_input_grad(lt_ctx *c, const lt_dw_geom *g, const float *gy, const float *w, float *gx);
/* gw [C*M, 1, KH, KW] += the weight gradient of x and gy over the batch (each channel's sum in a fixed order) */
void lt_conv_dw_weight_grad(lt_ctx *c, const lt_dw_geom *g, const float *x, const float *gy, float *gw);

#endif
