/*
 * ops_ew_kernels.h — the binary and unary ops' kernels written once for every floating element type. Binary:
 * the maths of each op on two elements (BINARY_SCALAR) and the walk of an element range as rows
 * (BINARY_KERNEL, over ops_ew_internal.h's EW_SEGMENTS and EW_BINARY_ROW); only the pow function differs
 * between float32 and float64 (powf, pow). Unary: the walk (UNARY_KERNEL); the maths stays per dtype, as
 * float32 uses fast vectorising approximations (lt_simd.h) that float64, asked for its precision, must not.
 * ops_binary.c and ops_unary.c make the float32 kernels from these macros, ops_f64.c the float64 ones.
 */
#ifndef OPS_EW_KERNELS_H
#define OPS_EW_KERNELS_H

#include <math.h>

#include "lt_ops.h"
#include "lt_simd.h"
#include "ops_ew_internal.h"

/* static inline T NAME(lt_binop op, T x, T y): op applied to two elements; comparisons give 0 or 1. NaN
 * wins maximum and minimum, as PyTorch's. */
// clang-format off
#define BINARY_SCALAR(NAME, T, POW)                                                                 \
  __attribute__((always_inline)) static inline T NAME(lt_binop op, T x, T y) {                      \
    switch (op) {                                                                                   \
      case LT_ADD: return x + y;                                                                    \
      case LT_SUB: return x - y;                                                                    \
      case LT_MUL: return x * y;                                                                    \
      case LT_DIV: return x / y;                                                                    \
      case LT_POW: return POW(x, y);                                                                \
      case LT_MAXIMUM: return x >= y || isnan(x) ? x : y;                                           \
      case LT_MINIMUM: return x <= y || isnan(x) ? x : y;                                           \
      case LT_EQ: return x == y;                                                                    \
      case LT_NE: return x != y;                                                                    \
      case LT_LT: return x < y;                                                                     \
      case LT_LE: return x <= y;                                                                    \
      case LT_GT: return x > y;                                                                     \
      case LT_GE: return x >= y;                                                                    \
    }                                                                                               \
    return 0;                                                                                       \
  }

/* One op's case of a range walker: its own copy of the row loop, so each op's loops vectorise. */
#define BINARY_CASE(ROW, OP)                                                                        \
  case OP:                                                                                          \
    EW_SEGMENTS(it, lo, hi, o0, o1, o2, len) {                                                      \
      ROW(OP, po + o0, it->s[0], px + o1, it->s[1], py + o2, it->s[2], len);                        \
    }                                                                                               \
    EW_SEGMENTS_END;                                                                                \
    break;

/* static void NAME(lt_binop op, const lt_iter *it, TO *po, const T *px, const T *py, int64_t lo, int64_t hi):
 * elements [lo, hi) of the iteration it (operands po, px, py at its three strides) computed with SCALAR
 * (a BINARY_SCALAR over T); the result converts to TO. Compiled for each vector width (LT_VECTOR_FN). Its row
 * loop (NAME##_row) is a function of its own, inlined into each op's case. */
#define BINARY_KERNEL(NAME, T, TO, SCALAR)                                                          \
  __attribute__((always_inline)) static inline void NAME##_row(lt_binop op, TO *o, int64_t so, const T *x, \
                                                               int64_t sx, const T *y, int64_t sy, int64_t n) { \
    EW_BINARY_ROW(o, so, x, sx, y, sy, n, SCALAR, op);                                              \
  }                                                                                                 \
  LT_VECTOR_FN static void NAME(lt_binop op, const lt_iter *it, TO *po, const T *px, const T *py,   \
                                int64_t lo, int64_t hi) {                                           \
    switch (op) {                                                                                   \
      BINARY_CASE(NAME##_row, LT_ADD) BINARY_CASE(NAME##_row, LT_SUB)                               \
      BINARY_CASE(NAME##_row, LT_MUL) BINARY_CASE(NAME##_row, LT_DIV)                               \
      BINARY_CASE(NAME##_row, LT_POW) BINARY_CASE(NAME##_row, LT_MAXIMUM)                           \
      BINARY_CASE(NAME##_row, LT_MINIMUM) BINARY_CASE(NAME##_row, LT_EQ)                            \
      BINARY_CASE(NAME##_row, LT_NE) BINARY_CASE(NAME##_row, LT_LT)                                 \
      BINARY_CASE(NAME##_row, LT_LE) BINARY_CASE(NAME##_row, LT_GT)                                 \
      BINARY_CASE(NAME##_row, LT_GE)                                                                \
    }                                                                                               \
  }
/* static void NAME(lt_unop op, const lt_iter *it, T *po, const T *px, int64_t lo, int64_t hi): elements
 * [lo, hi) of the iteration it (operands po, px at its first two strides) computed with SCALAR(op, x), a
 * function over T; compiled for each vector width (LT_VECTOR_FN). */
#define UNARY_CASE(SCALAR, OP)                                                                      \
  case OP:                                                                                          \
    EW_SEGMENTS(it, lo, hi, o0, o1, o2, len) {                                                      \
      EW_UNARY_ROW(po + o0, it->s[0], px + o1, it->s[1], len, SCALAR, OP);                          \
    }                                                                                               \
    EW_SEGMENTS_END;                                                                                \
    break;

#define UNARY_KERNEL(NAME, T, SCALAR)                                                               \
  LT_VECTOR_FN static void NAME(lt_unop op, const lt_iter *it, T *po, const T *px, int64_t lo, int64_t hi) { \
    switch (op) {                                                                                   \
      UNARY_CASE(SCALAR, LT_NEG) UNARY_CASE(SCALAR, LT_EXP) UNARY_CASE(SCALAR, LT_LOG)              \
      UNARY_CASE(SCALAR, LT_SQRT) UNARY_CASE(SCALAR, LT_ABS) UNARY_CASE(SCALAR, LT_TANH)            \
      UNARY_CASE(SCALAR, LT_SIGMOID) UNARY_CASE(SCALAR, LT_RELU) UNARY_CASE(SCALAR, LT_SIN)         \
      UNARY_CASE(SCALAR, LT_COS) UNARY_CASE(SCALAR, LT_GELU) UNARY_CASE(SCALAR, LT_RSQRT)           \
      UNARY_CASE(SCALAR, LT_SIGN) UNARY_CASE(SCALAR, LT_LOG1P) UNARY_CASE(SCALAR, LT_SQUARE)        \
    }                                                                                               \
  }
// clang-format on

#endif
