/*
 * lt_ops.h — tensor operations. Differentiable ops record an autograd node when grad mode is on and an
 * input requires grad; their backward rules live next to their forward code.
 *
 * Each op returns a new reference or NULL with the message in c->err (see lt_tensor.h). In-place ops end
 * with an underscore, return LT_OK/LT_ERR, never record autograd, and refuse tensors that require grad
 * while grad mode is on. dims are 0-based and already normalised (the binding maps 1-based/negative dims).
 */
#ifndef LT_OPS_H
#define LT_OPS_H

#include "lt_accumulate.h"
#include "lt_check.h"
#include "lt_tensor.h"

/* --- creation and filling (ops_create.c; rand, randn, uniform_, normal_: ops_random.c) -------- */
lt_tensor *lt_op_full(lt_ctx *c, lt_dtype dt, int ndim, const int64_t *shape, double v);
lt_tensor *lt_op_arange(lt_ctx *c, double a, double b, double step, lt_dtype dt);
lt_tensor *lt_op_eye(lt_ctx *c, int64_t n, int64_t m, lt_dtype dt);
lt_tensor *lt_op_rand(lt_ctx *c, int ndim, const int64_t *shape);
lt_tensor *lt_op_randn(lt_ctx *c, int ndim, const int64_t *shape);
int lt_op_fill_(lt_ctx *c, lt_tensor *t, double v);
int lt_op_zero_(lt_ctx *c, lt_tensor *t);
int lt_op_uniform_(lt_ctx *c, lt_tensor *t, double a, double b);
int lt_op_normal_(lt_ctx *c, lt_tensor *t, double mean, double std);
/* n values of N(mean, std^2) from c->rng, the same for a seed on any number of threads (ops_random.c) */
void lt_normal_fill_f32(lt_ctx *c, float *p, int64_t n, double mean, double std);
/* int64 values uniform in [low, high) */
lt_tensor *lt_op_randint(lt_ctx *c, int64_t low, int64_t high, int ndim, const int64_t *shape);
lt_tensor *lt_op_bernoulli(lt_ctx *c, lt_tensor *p);   /* 0/1 float32, p in [0, 1] */
lt_tensor *lt_op_poisson(lt_ctx *c, lt_tensor *rates); /* ops_poisson.c: rates' dtype, rates finite >= 0 */
/* n 0-based category indices per row of p (1-D or 2-D weights) */
lt_tensor *lt_op_multinomial(lt_ctx *c, lt_tensor *p, int64_t n, int replacement);
lt_tensor *lt_op_linspace(lt_ctx *c, double a, double b, int64_t n, lt_dtype dt); /* float32 or float64 */
int lt_op_copy_(lt_ctx *c, lt_tensor *dst, lt_tensor *src);                       /* broadcasts src, converts dtype */
lt_tensor *lt_op_clone(lt_ctx *c, lt_tensor *t);                                  /* differentiable, contiguous */
lt_tensor *lt_op_contiguous(lt_ctx *c, lt_tensor *t);            /* retains t when already contiguous */
lt_tensor *lt_op_to_dtype(lt_ctx *c, lt_tensor *t, lt_dtype dt); /* copy; retains when same dtype */
lt_tensor *lt_op_detach(lt_ctx *c, lt_tensor *t);                /* shares storage, no grad */

/* --- views and shape (ops_shape.c) -------------------------------------------------------------- */
lt_tensor *lt_op_view(lt_ctx *c, lt_tensor *t, int ndim, const int64_t *shape);    /* one size may be -1 */
lt_tensor *lt_op_reshape(lt_ctx *c, lt_tensor *t, int ndim, const int64_t *shape); /* view or copy */
lt_tensor *lt_op_transpose(lt_ctx *c, lt_tensor *t, int d1, int d2);
lt_tensor *lt_op_permute(lt_ctx *c, lt_tensor *t, const int *perm);
lt_tensor *lt_op_narrow(lt_ctx *c, lt_tensor *t, int dim, int64_t start, int64_t len); /* start 0-based */
lt_tensor *lt_op_select(lt_ctx *c, lt_tensor *t, int dim, int64_t index);              /* 0-based */
lt_tensor *lt_op_unsqueeze(lt_ctx *c, lt_tensor *t, int dim);
lt_tensor *lt_op_squeeze(lt_ctx *c, lt_tensor *t, int dim); /* dim -1: every size-1 dim */
lt_tensor *lt_op_expand(lt_ctx *c, lt_tensor *t, int ndim, const int64_t *shape);
lt_tensor *lt_op_cat(lt_ctx *c, int n, lt_tensor *const *ts, int dim);
lt_tensor *lt_op_stack(lt_ctx *c, int n, lt_tensor *const *ts, int dim);

/* --- elementwise: binary (ops_binary.c), unary, activations (ops_unary.c), where (ops_where.c) -- */
typedef enum lt_binop {
  LT_ADD,
  LT_SUB,
  LT_MUL,
  LT_DIV,
  LT_POW,
  LT_MAXIMUM,
  LT_MINIMUM,
  LT_EQ,
  LT_NE,
  LT_LT,
  LT_LE,
  LT_GT,
  LT_GE
} lt_binop;
lt_tensor *lt_op_binary(lt_ctx *c, lt_binop op, lt_tensor *a, lt_tensor *b); /* broadcasting */
lt_tensor *lt_op_binary_scalar(lt_ctx *c, lt_binop op, lt_tensor *a, double s, int scalar_first);
int lt_op_binary_(lt_ctx *c, lt_binop op, lt_tensor *a, lt_tensor *b); /* a op= b */
int lt_op_binary_scalar_(lt_ctx *c, lt_binop op, lt_tensor *a, double s);
/* a += alpha * b (b broadcast to a); the workhorse of gradient accumulation and optimizers */
int lt_op_axpy_(lt_ctx *c, lt_tensor *a, double alpha, lt_tensor *b);

typedef enum lt_unop {
  LT_NEG,
  LT_EXP,
  LT_LOG,
  LT_SQRT,
  LT_ABS,
  LT_TANH,
  LT_SIGMOID,
  LT_RELU,
  LT_SIN,
  LT_COS,
  LT_GELU,
  LT_RSQRT,
  LT_SIGN,
  LT_LOG1P,
  LT_SQUARE
} lt_unop;
lt_tensor *lt_op_unary(lt_ctx *c, lt_unop op, lt_tensor *a);
int lt_op_unary_(lt_ctx *c, lt_unop op, lt_tensor *a);
/* GELU with the tanh approximation (ops_gelu.c); the exact one is lt_op_unary(LT_GELU) */
lt_tensor *lt_op_gelu_tanh(lt_ctx *c, lt_tensor *a);
lt_tensor *lt_op_leaky_relu(lt_ctx *c, lt_tensor *a, double slope);
lt_tensor *lt_op_clamp(lt_ctx *c, lt_tensor *a, double lo, double hi); /* +-INFINITY for none */
int lt_op_clamp_(lt_ctx *c, lt_tensor *a, double lo, double hi);
lt_tensor *lt_op_where(lt_ctx *c, lt_tensor *cond, lt_tensor *a, lt_tensor *b);
/* x with value where mask (0/1) is set, both broadcast; differentiable in x */
lt_tensor *lt_op_masked_fill(lt_ctx *c, lt_tensor *x, lt_tensor *mask, double value);
const char *lt_binop_name(lt_binop op);

/* --- reductions (ops_reduce.c) ------------------------------------------------------------------ */
typedef enum lt_redop { LT_RSUM, LT_RMEAN, LT_RMAX, LT_RMIN } lt_redop;
/* dim < 0: over all elements (result 0-dim, or all-ones shape with keepdim) */
lt_tensor *lt_op_reduce(lt_ctx *c, lt_redop op, lt_tensor *a, int dim, int keepdim);
/* max/min along dim with their indices (0-based int64 here; the binding shows them 1-based) */
int lt_op_reduce_idx(lt_ctx *c, lt_redop op, lt_tensor *a, int dim, int keepdim, lt_tensor **values,
                     lt_tensor **indices);
lt_tensor *lt_op_argmax(lt_ctx *c, lt_tensor *a, int dim, int keepdim); /* dim < 0: flat index */
/* lt_op_sum_to, the reverse of broadcasting: lt_accumulate.h */

/* --- linear algebra (ops_matmul.c) -------------------------------------------------------------- */
lt_tensor *lt_op_matmul(lt_ctx *c, lt_tensor *a, lt_tensor *b);
/* y = x W^T + b, x [..., in], W [out, in], b [out] or NULL (fused, one GEMM) */
lt_tensor *lt_op_linear(lt_ctx *c, lt_tensor *x, lt_tensor *w, lt_tensor *b);
/* linear followed by an activation in one node: the activation runs on the GEMM's output while it is in
 * cache, and its backward masks the gradient in place (nn.Sequential fuses Linear, ReLU pairs into this). */
typedef enum lt_act { LT_ACT_NONE = 0, LT_ACT_RELU, LT_ACT_GELU, LT_ACT_GELU_TANH } lt_act;
/* For the GELU epilogues (ops_gelu.c): y = gelu(x) and r = g * gelu'(x) over n contiguous floats, exact (erf,
 * as LT_GELU) or the tanh form, split over the pool; y may be x and r may be g. */
void lt_gelu_f32(lt_ctx *c, const float *x, float *y, int64_t n, int tanh_form);
void lt_gelu_grad_f32(lt_ctx *c, const float *x, const float *g, float *r, int64_t n, int tanh_form);
/* For those fused ops (ops_unary.c): ReLU in place over n floats, and the gradient through the ReLU of
 * output y given g, contiguous, computed in place when the caller holds the only reference to a contiguous g
 * (a backward's incoming gradient usually is). */
void lt_relu_inplace_f32(float *y, int64_t n);
lt_tensor *lt_relu_grad(lt_ctx *c, lt_tensor *g, const lt_tensor *y);
lt_tensor *lt_op_linear_act(lt_ctx *c, lt_tensor *x, lt_tensor *w, lt_tensor *b, lt_act act);
/* raw sgemm on contiguous (or transposed-contiguous) 2-D operands: C = alpha*op(A)op(B) + beta*C */
int lt_gemm(lt_ctx *c, int transa, int transb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
            int64_t lda, const float *b, int64_t ldb, float beta, float *cc, int64_t ldc);
/* The linear layer's gradients from contiguous g [rows x out], x [rows x in], W [out x in] (ops_linear_grads.c):
 * gx = g W, gw = g^T x + beta_w gw, gb += column sums of g (gb zeroed by the caller); any of gx, gw, gb may be
 * NULL. Every size > 0 and <= INT_MAX. */
void lt_linear_grads_f32(lt_ctx *c, const float *g, const float *x, const float *w, float *gx, float *gw, float beta_w,
                         float *gb, int64_t rows, int64_t in_f, int64_t out_f);

/* --- softmax family and indexing (ops_softmax.c, ops_index.c) ------------------------------------ */
lt_tensor *lt_op_softmax(lt_ctx *c, lt_tensor *a, int dim);
lt_tensor *lt_op_log_softmax(lt_ctx *c, lt_tensor *a, int dim);
lt_tensor *lt_op_gather(lt_ctx *c, lt_tensor *a, int dim, lt_tensor *index);       /* index 0-based int64 */
lt_tensor *lt_op_index_select(lt_ctx *c, lt_tensor *a, int dim, lt_tensor *index); /* index 0-based int64 */

/* --- sorting, scans, products, norms, triangles and more elementwise maths (ops_sort.c, ops_scan.c,
 * ops_math.c). dim < 0 where allowed: over all elements (the tensor seen flat). ----------------------- */
/* 0-based int64 indices that sort a along dim; stable (ties keep their order); NaN sorts as the largest */
lt_tensor *lt_op_argsort(lt_ctx *c, lt_tensor *a, int dim, int descending);
/* the first m of argsort(a, dim, largest) (the m largest or smallest), in sorted order, by selection */
lt_tensor *lt_op_topk_indices(lt_ctx *c, lt_tensor *a, int dim, int64_t m, int largest);
lt_tensor *lt_op_cumsum(lt_ctx *c, lt_tensor *a, int dim);
lt_tensor *lt_op_cumprod(lt_ctx *c, lt_tensor *a, int dim);
lt_tensor *lt_op_prod(lt_ctx *c, lt_tensor *a, int dim, int keepdim);
/* (sum |x|^p)^(1/p); p may be INFINITY, -INFINITY or 0 (the count of non-zeros) */
lt_tensor *lt_op_pnorm(lt_ctx *c, lt_tensor *a, double p, int dim, int keepdim);
/* tril (upper 0) / triu (upper 1) of the last two dims, diagonal offset as torch */
lt_tensor *lt_op_tri(lt_ctx *c, lt_tensor *a, int64_t diagonal, int upper);
typedef enum lt_mathop {
  LT_FLOOR,
  LT_CEIL,
  LT_ROUND,
  LT_TRUNC,
  LT_FRAC,
  LT_ERF,
  LT_ERFINV,
  LT_RECIPROCAL,
  LT_EXPM1
} lt_mathop;
lt_tensor *lt_op_math(lt_ctx *c, lt_mathop op, lt_tensor *a);
typedef enum lt_classop { LT_ISNAN, LT_ISINF, LT_ISFINITE } lt_classop;
lt_tensor *lt_op_classify(lt_ctx *c, lt_classop op, lt_tensor *a); /* float32 0/1, like comparisons */

/* --- more elementwise maths, float32 and float64 from one body, differentiable (ops_special.c; the special
 * functions' series: special_math.h). int64 input computes in float32, as PyTorch promotes. --------------------- */
// clang-format off
#define LT_FN_LIST(X) \
  X(LT_FN_TAN, "tan") X(LT_FN_ASIN, "asin") X(LT_FN_ACOS, "acos") X(LT_FN_ATAN, "atan") \
  X(LT_FN_SINH, "sinh") X(LT_FN_COSH, "cosh") X(LT_FN_ASINH, "asinh") X(LT_FN_ACOSH, "acosh") \
  X(LT_FN_ATANH, "atanh") X(LT_FN_SINC, "sinc") X(LT_FN_RAD2DEG, "rad2deg") X(LT_FN_DEG2RAD, "deg2rad") \
  X(LT_FN_ERFC, "erfc") X(LT_FN_LOG2, "log2") X(LT_FN_LOG10, "log10") X(LT_FN_EXP2, "exp2") \
  X(LT_FN_LOGIT, "logit") X(LT_FN_LGAMMA, "lgamma") X(LT_FN_DIGAMMA, "digamma")
// clang-format on
#define LT_FN_ENUM(e, name) e,
typedef enum lt_fnop { LT_FN_LIST(LT_FN_ENUM) LT_FN_COUNT } lt_fnop;
#undef LT_FN_ENUM
const char *lt_fnop_name(lt_fnop op);
/* p: logit's eps (x clamped to [eps, 1 - eps] first; a negative eps: none, as None in PyTorch); 0 for the others */
lt_tensor *lt_op_fn(lt_ctx *c, lt_fnop op, lt_tensor *a, double p);
int lt_op_fn_(lt_ctx *c, lt_fnop op, lt_tensor *a, double p);
/* Binary maths with broadcasting (ops_special_binary.c): float64 when either operand is, int64 when both are (not
 * atan2 or copysign, which give float32), float32 otherwise. floor_divide has no gradient (as PyTorch's). */
// clang-format off
#define LT_FN2_LIST(X) \
  X(LT_FN2_ATAN2, "atan2") X(LT_FN2_FMOD, "fmod") X(LT_FN2_REMAINDER, "remainder") \
  X(LT_FN2_FLOOR_DIVIDE, "floor_divide") X(LT_FN2_FMAX, "fmax") X(LT_FN2_FMIN, "fmin") X(LT_FN2_COPYSIGN, "copysign")
// clang-format on
#define LT_FN2_ENUM(e, name) e,
typedef enum lt_fn2op { LT_FN2_LIST(LT_FN2_ENUM) LT_FN2_COUNT } lt_fn2op;
#undef LT_FN2_ENUM
const char *lt_fn2op_name(lt_fn2op op);
lt_tensor *lt_op_fn2(lt_ctx *c, lt_fn2op op, lt_tensor *a, lt_tensor *b);
int lt_op_fn2_(lt_ctx *c, lt_fn2op op, lt_tensor *a, lt_tensor *b); /* a = a op b (b broadcast to a) */

/* --- the scans that are not sums or products (ops_scan_nonlinear.c), float32 and float64, along dim (0-based) */
/* cummax (max 1) or cummin: the running extreme and the 0-based int64 index it came from (the last of equal values;
 * a NaN wins and stays, as PyTorch's); differentiable in the values (the gradient goes to those indices). int64
 * input: values and indices, no gradient. */
int lt_op_cumext(lt_ctx *c, lt_tensor *a, int dim, int max, lt_tensor **values, lt_tensor **indices);
/* log(cumsum(exp(x))) along dim, without overflow; differentiable */
lt_tensor *lt_op_logcumsumexp(lt_ctx *c, lt_tensor *a, int dim);

/* --- indexed writes and mask selections (ops_scatter.c); indices 0-based int64, data float32 --------- */
/* x with src's elements (or value when src is NULL) written (add: added) at index along dim */
lt_tensor *lt_op_scatter(lt_ctx *c, lt_tensor *x, int dim, lt_tensor *index, lt_tensor *src, double value, int add);
lt_tensor *lt_op_index_add(lt_ctx *c, lt_tensor *x, int dim, lt_tensor *index, lt_tensor *src, double alpha);
lt_tensor *lt_op_index_fill(lt_ctx *c, lt_tensor *x, int dim, lt_tensor *index, double value);
lt_tensor *lt_op_masked_select(lt_ctx *c, lt_tensor *x, lt_tensor *mask); /* 1-D, differentiable in x */
lt_tensor *lt_op_nonzero(lt_ctx *c, lt_tensor *x);                        /* [n x ndim] int64, 0-based */

#endif
