/*
 * lt_errors.h — the texts of the core's error messages, in one place so they stay consistent.
 * Shapes print as Lua users see them ("[64 x 256]"), dims 1-based, and each message starts with the op.
 */
#ifndef LT_ERRORS_H
#define LT_ERRORS_H

#define LT_E_OOM "out of memory: could not allocate %zu bytes"
/* op, shape: an element count or byte size past 2^62 (lt_size.h) */
#define LT_E_SIZE "%s: the result %s has more than 2^62 elements"
#define LT_E_SIZE_BYTES "%s: the result %s needs more than 2^62 bytes"
/* op, a shape, b shape, hint */
#define LT_E_BROADCAST "%s: shapes %s and %s cannot be broadcast (sizes must match or be 1 in each dim, from the last)"
/* op, which, expected dtype, got dtype */
#define LT_E_DTYPE "%s: %s must be %s, got %s"
/* op: an op that has no float64 kernel yet, given a float64 tensor (lt_check_no_f64) */
#define LT_E_NO_F64 "%s: float64 is not supported yet (float32 only)"
/* a number that an int64 tensor would hold: NaN, +-inf and values outside [-2^63, 2^63) have no int64 (casting
 * them is undefined) */
#define LT_E_NOT_INT64 "%s: value %.14g is not an int64 value (the tensor is int64)"
/* an integral number with an int64 tensor in add/sub/mul/...: computed in int64, so it must be one (PyTorch: an
 * overflow error); %s%s: the op's name and "_" for the in-place form */
#define LT_E_INT64_SCALAR \
  "%s%s: the scalar %.14g is outside int64's range (the tensor is int64: convert it with :float() first)"
#define LT_E_DTYPE_MATCH "%s: dtypes differ: a is %s, b is %s (convert one with :float() or :long())"
/* op, dim (1-based), ndim */
#define LT_E_DIM_RANGE "%s: dim %d out of range for a %d-dimensional tensor (expected 1..%d, or -%d..-1)"
/* op, index (1-based), size, dim (1-based) */
#define LT_E_INDEX_RANGE "%s: index %lld out of range 1..%lld of dim %d"
#define LT_E_BLAS_SIZE "matmul: sizes beyond 2^31 are not supported by the BLAS"
#define LT_E_MATMUL_SHAPE "matmul: shape mismatch: a is %s, b is %s (a:size(%d) must equal b:size(%d))"
#define LT_E_INPLACE_GRAD \
  "%s: in-place operation on a tensor that requires grad (use it inside lt.no_grad, or on x:detach())"
#define LT_E_VIEW_NUMEL "%s: shape %s is invalid for a tensor of %lld elements (shape %s)"
#define LT_E_VIEW_STRIDE \
  "view: the tensor's layout is not compatible with shape %s (call :contiguous() first, or use :reshape())"
#define LT_E_NO_GRAD_FN \
  "backward: the tensor does not require grad and has no grad_fn (did you call x:requires_grad(true)?)"
#define LT_E_BACKWARD_SCALAR \
  "backward: grad can be implicitly created only for a tensor with one element, got shape %s (pass a gradient)"
/* op, which saved tensor ("input 2", "output", "saved tensor 1"), version when saved, version now */
#define LT_E_MODIFIED_INPLACE \
  "backward: %s's %s was modified in place (version %lld -> %lld) after it was saved; clone it before changing it"
#define LT_E_GRAPH_FREED "backward: the graph of this result was already freed by an earlier backward() (%s)"

#endif
