/*
 * lt_transpose.h — a float32 matrix transposed into another (or added to it), in 8 x 8 AVX blocks where the CPU
 * has AVX-512F (the VL forms of its 256-bit shuffles), element by element elsewhere. Used around GEMMs whose
 * operand or result is the other way round: a convolution's gradients (nn_conv.c), the tile's products computed
 * as C^T (gemm_small_m.c).
 */
#ifndef LT_TRANSPOSE_H
#define LT_TRANSPOSE_H

#include <stdint.h>

/* dst [cols x rows] (row stride ldd) = src [rows x cols] (row stride lds) transposed (add: dst += it) */
void lt_transpose_f32(const float *src, int64_t lds, int64_t rows, int64_t cols, float *dst, int64_t ldd, int add);
/* the same, each element then given its source row's bias (bias[r]; NULL: none) and, when relu, the ReLU
 * (y < 0 ? 0 : y): dst[c][r] = relu((add ? dst[c][r] : 0) + src[r][c] + bias[r]), summed in that order. A Linear
 * layer's epilogue, when its product was computed transposed (lt_gemm_small_m_gemm_nt). */
void lt_transpose_ep_f32(const float *src, int64_t lds, int64_t rows, int64_t cols, float *dst, int64_t ldd, int add,
                         const float *bias, int relu);

#endif
