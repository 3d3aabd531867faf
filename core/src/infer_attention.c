/*
 * infer_attention.c — the plan steps attention is built from (lt_infer.h): a strided copy, which is every
 * transpose, permute, narrow, chunk, cat and stack of a traced forward (the plan keeps values contiguous in its
 * buffers, so a view that changes the order becomes one copy), and a batched matrix product (q k^T, w v, matmul,
 * bmm). Softmax, masks and projections are the existing steps; lua/lutra/infer/attention.lua puts them together.
 */
#include <string.h>

#include "infer_ops.h"
#include "lt_blas.h"
#include "lt_simd.h"

/* multiply-adds of one batch item from which BLAS beats the loops below */
#define MATMUL_BLAS_MACS (1 << 18)

int lt_infer_check_strided(lt_ctx *c, const lt_infer_plan *p, const lt_infer_step *s) {
  const int64_t *g = s->geo;
  int64_t nd = g[LT_INFER_STRIDED_NDIM];
  if (nd < 1 || nd > LT_INFER_STRIDED_MAX_DIM)
    return lt_fail(c, "lt.infer: strided copy: %lld dims, expected 1 to %d", (long long)nd, LT_INFER_STRIDED_MAX_DIM);
  int64_t hi_in = g[LT_INFER_STRIDED_IN_OFF], hi_out = g[LT_INFER_STRIDED_OUT_OFF];
  if (hi_in < 0 || hi_out < 0) return lt_fail(c, "lt.infer: strided copy: negative offset");
  for (int d = 0; d < nd; d++) {
    int64_t n = g[LT_INFER_STRIDED_SHAPE + d], si = g[LT_INFER_STRIDED_IN + d], so = g[LT_INFER_STRIDED_OUT + d];
    if (n <= 0 || si < 0 || so < 0) return lt_fail(c, "lt.infer: strided copy: bad size or stride in dim %d", d + 1);
    hi_in += (n - 1) * si;
    hi_out += (n - 1) * so;
  }
  if (lt_infer_check_buf_at_least(c, p, s, s->in, hi_in + 1, "input") ||
      lt_infer_check_buf_at_least(c, p, s, s->out, hi_out + 1, "output"))
    return LT_ERR;
  if (s->in == s->out) return lt_fail(c, "lt.infer: strided copy: input and output are the same buffer");
  return LT_OK;
}

void lt_infer_run_strided(const lt_infer_plan *p, const lt_infer_step *s) {
  const int64_t *g = s->geo;
  int64_t nd = g[LT_INFER_STRIDED_NDIM], n[4] = { 1, 1, 1, 1 }, si[4] = { 0 }, so[4] = { 0 };
  for (int d = 0; d < nd; d++) { /* right-aligned: the last dim is index 3 */
    int k = 4 - (int)nd + d;
    n[k] = g[LT_INFER_STRIDED_SHAPE + d];
    si[k] = g[LT_INFER_STRIDED_IN + d];
    so[k] = g[LT_INFER_STRIDED_OUT + d];
  }
  const float *x = lt_f32(p->bufs[s->in]) + g[LT_INFER_STRIDED_IN_OFF];
  float *y = lt_f32(p->bufs[s->out]) + g[LT_INFER_STRIDED_OUT_OFF];
  for (int64_t a = 0; a < n[0]; a++)
    for (int64_t b = 0; b < n[1]; b++)
      for (int64_t c = 0; c < n[2]; c++) {
        const float *xr = x + a * si[0] + b * si[1] + c * si[2];
        float *yr = y + a * so[0] + b * so[1] + c * so[2];
        if (si[3] == 1 && so[3] == 1) memcpy(yr, xr, (size_t)n[3] * sizeof *yr);
        else
          for (int64_t d = 0; d < n[3]; d++) yr[d * so[3]] = xr[d * si[3]];
      }
}

int lt_infer_check_matmul(lt_ctx *c, const lt_infer_plan *p, const lt_infer_step *s) {
  const int64_t *g = s->geo;
  int64_t nb = g[LT_INFER_MM_BATCH], M = g[LT_INFER_MM_M], K = g[LT_INFER_MM_K], N = g[LT_INFER_MM_N];
  int64_t sa = g[LT_INFER_MM_A_STRIDE], sb = g[LT_INFER_MM_B_STRIDE];
  if (nb <= 0 || M <= 0 || K <= 0 || N <= 0 || sa < 0 || sb < 0)
    return lt_fail(c, "lt.infer: matmul: bad geometry (batch %lld, %lld x %lld by %lld x %lld)", (long long)nb,
                   (long long)M, (long long)K, (long long)K, (long long)N);
  if (lt_infer_check_buf_at_least(c, p, s, s->in, (nb - 1) * sa + M * K, "first operand") ||
      lt_infer_check_buf_at_least(c, p, s, s->out, nb * M * N, "output"))
    return LT_ERR;
  int64_t nbn = (nb - 1) * sb + K * N;
  if (g[LT_INFER_MM_B] >= 0) {
    if (lt_infer_check_buf_at_least(c, p, s, (int)g[LT_INFER_MM_B], nbn, "second operand")) return LT_ERR;
    if (g[LT_INFER_MM_B] == s->out) return lt_fail(c, "lt.infer: matmul: an operand is the output buffer");
  } else if (lt_infer_check_param(c, s, 0, "second operand", s->t[0] ? lt_numel(s->t[0]) : nbn, 0)) {
    return LT_ERR;
  } else if (lt_numel(s->t[0]) < nbn) {
    return lt_fail(c, "lt.infer: matmul: the second operand has %lld values, the step reads %lld",
                   (long long)lt_numel(s->t[0]), (long long)nbn);
  }
  if (s->in == s->out) return lt_fail(c, "lt.infer: matmul: an operand is the output buffer");
  if (M * K * N >= MATMUL_BLAS_MACS) return lt_blas_ready(c);
  return LT_OK;
}

/* y [M x N] = a * op(A) op(B); ta/tb: A stored [K x M], B stored [N x K] */
LT_VECTOR_FN static void matmul1(const float *restrict A, const float *restrict B, int64_t M, int64_t K, int64_t N,
                                 int ta, int tb, float a, float *restrict y) {
  if (M * K * N >= MATMUL_BLAS_MACS) {
    lt_blas_sgemm(ta, tb, (int)M, (int)N, (int)K, a, A, ta ? (int)M : (int)K, B, tb ? (int)K : (int)N, 0.0f, y, (int)N);
    return;
  }
  for (int64_t m = 0; m < M; m++) {
    float *yr = y + m * N;
    if (tb && !ta) { /* rows of B are the dot products' second vectors */
      lt_infer_matvec(B, A + m * K, NULL, K, N, yr);
    } else {
      memset(yr, 0, (size_t)N * sizeof *yr);
      for (int64_t k = 0; k < K; k++) {
        float av = ta ? A[k * M + m] : A[m * K + k];
        if (tb)
          for (int64_t n = 0; n < N; n++) yr[n] += av * B[n * K + k];
        else {
          const float *br = B + k * N;
          for (int64_t n = 0; n < N; n++) yr[n] += av * br[n];
        }
      }
    }
    if (a != 1.0f)
      for (int64_t n = 0; n < N; n++) yr[n] *= a;
  }
}

void lt_infer_run_matmul(const lt_infer_plan *p, const lt_infer_step *s) {
  const int64_t *g = s->geo;
  const float *A = lt_f32(p->bufs[s->in]);
  const float *B = g[LT_INFER_MM_B] >= 0 ? lt_f32(p->bufs[g[LT_INFER_MM_B]]) : lt_f32(s->t[0]);
  float *y = lt_f32(p->bufs[s->out]);
  int64_t M = g[LT_INFER_MM_M], K = g[LT_INFER_MM_K], N = g[LT_INFER_MM_N];
  for (int64_t b = 0; b < g[LT_INFER_MM_BATCH]; b++)
    matmul1(A + b * g[LT_INFER_MM_A_STRIDE], B + b * g[LT_INFER_MM_B_STRIDE], M, K, N, (int)g[LT_INFER_MM_TRANS_A],
            (int)g[LT_INFER_MM_TRANS_B], s->a, y + b * M * N);
}
