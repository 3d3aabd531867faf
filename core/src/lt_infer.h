/*
 * lt_infer.h — inference plans: a fixed list of kernel calls over float buffers the plan owns, for a model
 * run again and again on inputs of one shape (a game asking a policy for an action every frame).
 *
 *   lt_infer_plan *p = lt_infer_new(c);
 *   int x = lt_infer_buffer(c, p, 32), h = lt_infer_buffer(c, p, 64);       // [1 x 32] in, [1 x 64] out
 *   lt_infer_step s = { .op = LT_INFER_LINEAR, .in = x, .out = h, .rows = 1, .n_in = 32, .n_out = 64,
 *                       .t = { weight, bias } };                              // weight [64 x 32], bias [64]
 *   if (lt_infer_add(c, p, &s) != LT_OK) ... c->err names the step and the shapes ...
 *   ... write the input into lt_f32(lt_infer_buf(p, x)) ...
 *   if (lt_infer_run(c, p) != LT_OK) ...                                       // no allocation
 *   lt_infer_free(p);
 *
 * Every check happens in lt_infer_add (shapes, dtypes, contiguity), so lt_infer_run is only the kernels. The
 * parameters are the model's own tensors, retained, not copied: a step reads them through their storage at
 * each run, so in-place changes (an optimizer step, a load) are seen by the next run. Batch-1 shapes run tight
 * loops (no BLAS call, no thread hand-off); a GEMM large enough to pay goes to BLAS.
 */
#ifndef LT_INFER_H
#define LT_INFER_H

#include "lt_tensor.h"

typedef enum lt_infer_op {
  LT_INFER_LINEAR,    /* rows x n_in -> rows x n_out; t = {weight [n_out x n_in], bias [n_out] or NULL} */
  LT_INFER_ACT,       /* elementwise activation over n_in elements (act, a, b) */
  LT_INFER_SOFTMAX,   /* rows = outer, n_in = size of the dim, geo[0] = inner; a = 1 for log_softmax */
  LT_INFER_LAYERNORM, /* rows x n_in, normalised over n_in; t = {weight or NULL, bias or NULL}; a = eps */
  LT_INFER_BATCHNORM, /* rows = N, n_in = C, geo[0] = spatial; t = {mean, var, weight or NULL, bias or NULL}; a = eps */
  LT_INFER_EMBEDDING, /* rows indices (1-based, stored as floats) -> rows x n_out; t = {weight [geo[0] x n_out]} */
  LT_INFER_CONV,      /* 2-d convolution (Conv1d has H = 1): geo = LT_INFER_GEO_*; t = {weight, bias or NULL} */
  LT_INFER_POOL,      /* 2-d max or average pooling: geo = LT_INFER_GEO_*; act = LT_INFER_POOL_MAX or _AVG */
  LT_INFER_BINARY,    /* out[i] = in[i] (act) y[i % n_out] over n_in elements, y the buffer geo[0] or, when geo[0] < 0,
                         the tensor t[0]; b != 0: y (act) in[i] instead (the operands swapped) */
  LT_INFER_CELL,      /* one step of an LSTM/GRU/RNN cell; act = LT_INFER_CELL_*; rows = batch, n_in = input,
                         n_out = hidden; state buffers geo[0] (h) and geo[1] (c, LSTM); t = {w_ih, w_hh, b_ih, b_hh} */
  LT_INFER_STRIDED,   /* a strided copy (transpose, permute, narrow, cat, stack, chunk): geo = LT_INFER_STRIDED_* */
  LT_INFER_MATMUL,    /* batched product out[b] = a * op(A[b]) op(B[b]), A the input buffer: geo = LT_INFER_MM_* */
  LT_INFER_GROUPNORM, /* rows = N, n_in = C, geo[0] = spatial, geo[1] = groups; t = {weight or NULL, bias or NULL};
                         a = eps (InstanceNorm: groups = C) */
  LT_INFER_CONVT,     /* 2-d transposed convolution (ConvTranspose2d): geo = LT_INFER_GEO_*; t = {weight [Cin x Cout/G x
                         KH x KW], bias or NULL} */
  LT_INFER_SEQ,       /* one direction of one LSTM/GRU/RNN layer over a whole sequence from a zero state: act, n_in,
                         n_out as LT_INFER_CELL; geo = LT_INFER_SEQ_*; t = {w_ih, w_hh, b_ih, b_hh, w_hr (LSTM proj)} */
} lt_infer_op;

typedef enum lt_infer_act {
  LT_INFER_RELU,
  LT_INFER_LEAKY_RELU, /* a = negative slope */
  LT_INFER_TANH,
  LT_INFER_SIGMOID,
  LT_INFER_GELU,
  LT_INFER_GELU_TANH,
  LT_INFER_SILU,
  LT_INFER_ELU,      /* a = alpha */
  LT_INFER_SOFTPLUS, /* a = beta, b = threshold */
  LT_INFER_HARDTANH, /* a = min, b = max */
  LT_INFER_PRELU,    /* t[0] = weight [1] or [channels]; geo[0] = channels, geo[1] = inner size */
  LT_INFER_COPY,     /* out = in (a reshape between buffers) */
  LT_INFER_AFFINE,   /* a * x + b (a tensor and a number: x + 2, x * 0.5, 1 - x) */
  LT_INFER_RDIV,     /* a / x */
  LT_INFER_EXP,
  LT_INFER_LOG,
  LT_INFER_ABS,
  LT_INFER_SQRT,
  LT_INFER_MISH,
  LT_INFER_HARDSWISH,
  LT_INFER_HARDSIGMOID,
} lt_infer_act;

/* the adaptive kinds take PyTorch's windows [floor(i*H/OH), ceil((i+1)*H/OH)); their K, S, P, D are 1, 1, 0, 1 */
enum {
  LT_INFER_POOL_MAX = 0,
  LT_INFER_POOL_AVG = 1,
  LT_INFER_POOL_AVG_EXCLUDE_PAD = 2,
  LT_INFER_POOL_ADAPTIVE_MAX = 3,
  LT_INFER_POOL_ADAPTIVE_AVG = 4
};
enum { LT_INFER_ADD = 0, LT_INFER_SUB = 1, LT_INFER_MUL = 2, LT_INFER_DIV = 3 };
enum { LT_INFER_CELL_LSTM = 0, LT_INFER_CELL_GRU = 1, LT_INFER_CELL_RNN_TANH = 2, LT_INFER_CELL_RNN_RELU = 3 };

#define LT_INFER_NPARAMS 5

/* Geometry of LT_INFER_CONV and LT_INFER_POOL (pool: C = Cin = Cout, groups 1, no weight). */
enum {
  LT_INFER_GEO_N,
  LT_INFER_GEO_CIN,
  LT_INFER_GEO_H,
  LT_INFER_GEO_W,
  LT_INFER_GEO_COUT,
  LT_INFER_GEO_OH,
  LT_INFER_GEO_OW,
  LT_INFER_GEO_KH,
  LT_INFER_GEO_KW,
  LT_INFER_GEO_SH,
  LT_INFER_GEO_SW,
  LT_INFER_GEO_PH,
  LT_INFER_GEO_PW,
  LT_INFER_GEO_DH,
  LT_INFER_GEO_DW,
  LT_INFER_GEO_GROUPS,
  LT_INFER_GEO_COUNT
};

/* Geometry of LT_INFER_STRIDED (up to 4 dims; strides and offsets in elements, all >= 0):
 * out[out_off + sum i_d * out_stride_d] = in[in_off + sum i_d * in_stride_d] for every index i < shape. */
enum {
  LT_INFER_STRIDED_NDIM,
  LT_INFER_STRIDED_SHAPE,   /* 4 entries */
  LT_INFER_STRIDED_IN = 5,  /* 4 entries */
  LT_INFER_STRIDED_OUT = 9, /* 4 entries */
  LT_INFER_STRIDED_IN_OFF = 13,
  LT_INFER_STRIDED_OUT_OFF = 14,
  LT_INFER_STRIDED_MAX_DIM = 4
};

/* Geometry of LT_INFER_MATMUL: B is the buffer geo[MM_B], or the tensor t[0] when it is < 0. A is [M x K] (or
 * stored [K x M] with TRANS_A), B [K x N] (stored [N x K] with TRANS_B); batch b reads A at b * A_STRIDE and B at
 * b * B_STRIDE (0: one matrix for every batch); out is [batch x M x N] contiguous. */
enum {
  LT_INFER_MM_B,
  LT_INFER_MM_BATCH,
  LT_INFER_MM_M,
  LT_INFER_MM_K,
  LT_INFER_MM_N,
  LT_INFER_MM_TRANS_A,
  LT_INFER_MM_TRANS_B,
  LT_INFER_MM_A_STRIDE,
  LT_INFER_MM_B_STRIDE
};

/* Geometry of LT_INFER_SEQ: x_t of batch row b at in + t * X_T + b * X_B (n_in values), h_t written at out +
 * OUT_OFF + t * OUT_T + b * OUT_B (PROJ values when PROJ > 0, else n_out); REVERSE runs t from T-1 down to 0.
 * STATE is a buffer of B * (2 * n_out + PROJ) + 2 * G * n_out + n_out floats (h, c, gates, scratch), zeroed by
 * each run. */
enum {
  LT_INFER_SEQ_T,
  LT_INFER_SEQ_B,
  LT_INFER_SEQ_X_T,
  LT_INFER_SEQ_X_B,
  LT_INFER_SEQ_OUT_T,
  LT_INFER_SEQ_OUT_B,
  LT_INFER_SEQ_OUT_OFF,
  LT_INFER_SEQ_REVERSE,
  LT_INFER_SEQ_STATE,
  LT_INFER_SEQ_PROJ
};

typedef struct lt_infer_step {
  lt_infer_op op;
  int in, out;                    /* buffer indexes */
  int64_t rows, n_in, n_out;      /* per op, above */
  int act;                        /* lt_infer_act, pool kind or cell kind */
  float a, b;                     /* activation / norm parameters */
  lt_tensor *t[LT_INFER_NPARAMS]; /* parameters, retained by the plan */
  int64_t geo[LT_INFER_GEO_COUNT];
} lt_infer_step;

typedef struct lt_infer_plan {
  int nsteps, cap;
  lt_infer_step *steps;
  int nbufs, bufcap;
  lt_tensor **bufs; /* contiguous float32, [numel] each */
  int flush_denormal;
} lt_infer_plan;

lt_infer_plan *lt_infer_new(lt_ctx *c);
/* A new zero-filled buffer of numel floats; returns its index, or -1 with the message in c->err. */
int lt_infer_buffer(lt_ctx *c, lt_infer_plan *p, int64_t numel);
static inline lt_tensor *lt_infer_buf(const lt_infer_plan *p, int i) { return p->bufs[i]; }
/* Checks the step against its buffers and parameters and appends it (retaining the parameters). */
int lt_infer_add(lt_ctx *c, lt_infer_plan *p, const lt_infer_step *s);
/* Runs every step in order. Allocates nothing; the caller wrote the input buffer. Fails only on data a step
 * cannot take (an Embedding index out of range), with the message in c->err. */
int lt_infer_run(lt_ctx *c, const lt_infer_plan *p);
/* Zero-fills the buffers that carry recurrent state (LT_INFER_CELL's h and c). */
void lt_infer_reset_state(const lt_infer_plan *p);
void lt_infer_free(lt_infer_plan *p);

#endif
