/*
 * ops_stream.h — large float32 results of the one-flop arithmetic ops written with non-temporal stores
 * (ops_stream.c says why and when it pays).
 */
#ifndef OPS_STREAM_H
#define OPS_STREAM_H

#include <stdint.h>

#include "lt_ops.h"

/* o[i] = x[i sx] op y[i sy] for i < n, o unit-stride, streamed; op add, sub, mul or div, sx and sy 0 or 1 and
 * not both 0. Returns 0 (nothing written) for anything else, or where there is no streamed path. */
int lt_stream_binary_row(lt_binop op, float *o, const float *x, int64_t sx, const float *y, int64_t sy, int64_t n);
/* Orders a thread's streamed stores before its later stores: call before anyone else may read the result. */
void lt_stream_fence(void);

#endif
