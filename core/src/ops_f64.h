/*
 * ops_f64.h — the float64 kernels (ops_f64.c), beside the float32 ones of each family: elementwise binary and
 * unary maths with their gradients, and sums along a dim (the float64 accumulation kernels autograd uses are
 * accumulate.c's). The elementwise walks are the float32 kernels' own source (ops_ew_kernels.h); the maths
 * is libm's double functions: float64 is asked for its precision, and the float32 kernels' fast
 * approximations would lose it. The ops that call them (ops_binary.c, ops_unary.c,
 * ops_reduce.c) dispatch on dtype; every other op refuses float64 (lt_check_no_f64).
 */
#ifndef OPS_F64_H
#define OPS_F64_H

#include "lt_ops.h"

/* out = x op y over the broadcast shape; x, y float64; out float64 (float32 0/1 for comparisons, as lutra's
 * masks are). out may alias x. */
void lt_binary_f64(lt_binop op, int ndim, const int64_t *shape, lt_tensor *out, const lt_tensor *x, const lt_tensor *y);
/* out = f(x), same shape, float64; out may alias x */
void lt_unary_f64(lt_unop op, lt_tensor *out, const lt_tensor *x);
/* r = g * f'(x) for contiguous float64 x, y = f(x) (or NULL when the op does not save it), g, r */
void lt_unary_grad_f64(lt_unop op, const double *x, const double *y, const double *g, double *r, int64_t n);
/* sum, mean, max or min along the middle dim of a contiguous x seen as [outer x n x inner] (n > 0); idx gets
 * max/min's 0-based first index (may be NULL); NaN wins max and min, as PyTorch's */
void lt_reduce_f64(lt_redop op, const double *x, int64_t outer, int64_t n, int64_t inner, double *out, int64_t *idx);
/* the gradient of max/min over all n elements of x: g shared evenly among the elements equal to best */
void lt_share_ties_f64(const double *x, int64_t n, double best, double g, double *r);

#endif
