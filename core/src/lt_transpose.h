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

#endif
