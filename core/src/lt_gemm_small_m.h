/*
 * lt_gemm_small_m.h — a GEMM for few rows against a weight that is reused many times: the recurrent products of
 * an RNN layer (h_{t-1} W_hh^T forward, dgh_t W_hh backward: [batch x 4*hidden] x [hidden], once per timestep).
 * OpenBLAS packs the whole weight again on every call (15% of an LSTM step); here the weight is packed once per
 * sequence (or read in place, when it is already laid out along C's columns) and each step runs a register tile
 * of 8 rows x 32 columns over it, C's columns split over lutra's pool. The same tile reads a convolution's input
 * in place (lt_gemm_small_m_rows, nn_conv.c) and runs the float32 GEMMs where it beats OpenBLAS
 * (lt_gemm_small_m_gemm / _nt, chosen by lt_blas_sgemm in blas.c).
 *
 * AVX-512 only, chosen at run time: lt_gemm_small_m_ok() says whether the CPU has it (else the caller keeps
 * lt_blas_sgemm). Sums run along k in order, one fused multiply-add per term, so a result does not depend on the
 * thread count or on where its row sits in a tile.
 */
#ifndef LT_GEMM_SMALL_M_H
#define LT_GEMM_SMALL_M_H

#include <stdint.h>

/* Columns per panel of a packed B (and per register tile). */
#define LT_GEMM_SM_NR 32
/* The same, for callers that cannot read a C constant (bench/rnn_gemm.lua through the FFI): a packed B's ldb, and
 * its panel_stride is this times k. */
int64_t lt_gemm_small_m_nr(void);

/* Whether this CPU runs the kernel (AVX-512F, checked once). */
int lt_gemm_small_m_ok(void);
/* Floats of the packed form of a [n x k] weight used transposed (panels of LT_GEMM_SM_NR columns, zero-padded). */
int64_t lt_gemm_small_m_packed_size(int64_t n, int64_t k);
/* w [n x k] row-major (ld k), to be used as B = w^T [k x n]: panel q holds, for each p < k, w[q*NR + jj][p]. */
void lt_gemm_small_m_pack_t(const float *w, int64_t n, int64_t k, float *packed);
/* b [k x n] row-major (ld n), used as B as it is: panel q holds, for each p < k, b[p][q*NR + jj]. */
void lt_gemm_small_m_pack_n(const float *b, int64_t k, int64_t n, float *packed);
/* C [m x n] = A [m x k] B (+ C when accumulate), row-major A (lda) and C (ldc). B's column panel q (columns
 * q*NR ..) starts at b + q * panel_stride and its row p at + p * ldb: a packed B has panel_stride = NR * k and
 * ldb = NR; a row-major [k x n] B read in place has panel_stride = NR and ldb = n. threads: parts on the pool. */
void lt_gemm_small_m(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                     int64_t panel_stride, float *c, int64_t ldc, int accumulate, int threads);
/* The same on one thread with A gathered: C [m x n] (+ C when accumulate) = A B, where A's element (i, p) is at
 * a + aoff[i] + acol[p] (aoff NULL: + i * lda; acol NULL: + p), B's column panel q (columns q*NR ..) at
 * b + q * bpanel (bpanel 0: + q * NR, B's columns in place) and its row p at + p * ldb, and C's row i at c + coff[i]
 * (coff NULL: + i * ldc). A convolution reads its input this way without unfolding it: a row of A is an output
 * position (or a kernel tap), a column a kernel tap (or a position), each an offset into the zero-padded input
 * (nn_conv.c, "the input read in place"). */
typedef struct lt_gemm_rows {
  int64_t m, n, k;
  const float *a;
  int64_t lda;
  const int64_t *aoff, *acol;
  const float *b;
  int64_t ldb, bpanel;
  float *c;
  int64_t ldc;
  const int64_t *coff;
  int accumulate;
} lt_gemm_rows;
void lt_gemm_small_m_rows(const lt_gemm_rows *g);

/* The tile as a general GEMM where it beats OpenBLAS (lt_blas_sgemm decides, core/src/blas.c): C [m x n] = op(A) B
 * (+ C when accumulate), row-major, B [k x n] read in place (ldb), op(A) = A [m x k] (lda) or, when transa, A
 * stored [k x m] (lda) read transposed in place. C's column panels split over `threads` of the pool; every
 * element is summed along k in order, so the bits do not depend on the split. C is not read unless accumulate
 * (a NaN in it stays out). Returns 0 when it did not run (no memory for the transposed A's offsets), else 1. */
int lt_gemm_small_m_gemm(int transa, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                         int64_t ldb, float *c, int64_t ldc, int accumulate, int threads);
/* C [m x n] = A B^T (+ C when accumulate), A [m x k] (lda) and B [n x k] (ldb) row-major (a Linear layer's x W^T),
 * computed as C^T = B A^T: A^T packed into the tile's panels (m x k floats: fewer than B's n x k when m is the
 * batch), B's rows read in place, each part's rows of C^T transposed into its columns of C. The same sums along k in
 * order as lt_gemm_small_m_gemm, split over `threads` by C's columns. A Linear layer's epilogue on the way into C
 * (lt_transpose_ep_f32): bias [n] (or NULL) added to each row, then the ReLU when relu. Returns 0 when it did not run
 * (no memory for the packed A and C^T), else 1. */
int lt_gemm_small_m_gemm_nt(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                            float *c, int64_t ldc, int accumulate, const float *bias, int relu, int threads);

#endif
