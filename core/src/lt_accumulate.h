/*
 * lt_accumulate.h — adding into tensors (accumulate.c), below both the ops and autograd: the kernels a gradient is
 * accumulated with. They record nothing and check nothing but what they say: the callers check the arguments.
 */
#ifndef LT_ACCUMULATE_H
#define LT_ACCUMULATE_H

#include "lt_tensor.h"

/* a += alpha * b: float32, b broadcastable to a's shape, any strides. Marks a modified. Split over the pool unless
 * a and b share memory other than as the same view, or a repeats elements (a stride-0 dim). */
void lt_axpy_f32(lt_ctx *c, lt_tensor *a, float alpha, const lt_tensor *b);
/* out = a + b: float32, all three of one shape, any strides; out shares no memory with a or b (a fresh tensor). */
void lt_add_f32(lt_ctx *c, lt_tensor *out, const lt_tensor *a, const lt_tensor *b);
/* the same two for float64 tensors */
void lt_axpy_f64(lt_tensor *a, double alpha, const lt_tensor *b);
void lt_add_f64(lt_tensor *out, const lt_tensor *a, const lt_tensor *b);
/* Sums g down to `shape` (the reverse of broadcasting): a new float32 tensor. */
lt_tensor *lt_op_sum_to(lt_ctx *c, lt_tensor *g, int ndim, const int64_t *shape);
/* t summed down to like's shape, or t itself when it has it; consumes t (NULL passes through). For backward
 * rules of ops that broadcast their inputs. */
lt_tensor *lt_sum_to_like(lt_ctx *c, lt_tensor *t, const lt_tensor *like);

#endif
