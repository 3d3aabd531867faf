/*
 * lt_gemm_bf16.h — lutra's bfloat16 GEMM for autocast (lt.autocast, Trainer{precision = "bf16-mixed"}).
 *
 * C = alpha op(A) op(B) + beta C with fp32 operands and result: the operands are rounded to bfloat16
 * (round-to-nearest-even) while they are packed, and the products are summed in fp32 by AVX512-BF16's
 * vdpbf16ps. The kernels are compiled for that target alone (gemm_bf16_kernel.c) and chosen at run time by
 * CPUID, so the rest of the build stays generic. Where the CPU lacks AVX512-BF16 (or LUTRA_BF16_GEMM=0 in the
 * environment, or lt_gemm_bf16_force_fp32) autocast computes in fp32 and says so once on stderr.
 *
 * The GEMM entry point (lt_blas_sgemm, blas.c) sends a call here when the calling thread is inside an autocast
 * region (lt_gemm_bf16_scope) and the product is large enough to pay for its packing (lt_gemm_bf16_wants).
 */
#ifndef LT_GEMM_BF16_H
#define LT_GEMM_BF16_H

#include <stdint.h>

#include "lt_ctx.h"

/* The precisions of lt_ctx.autocast. */
enum { LT_AUTOCAST_OFF = 0, LT_AUTOCAST_BF16 = 1 };

/* 1 when this CPU and OS run the AVX512-BF16 kernels (checked once). */
int lt_gemm_bf16_supported(void);
/* 1 when autocast's products really run in bf16: supported and not forced to fp32. */
int lt_gemm_bf16_active(void);
/* Tests and benchmarks: on = 1 sends every autocast product down the fp32 path (as on a CPU without
 * AVX512-BF16); 0 undoes it (LUTRA_BF16_GEMM=0 in the environment forces it from the start). */
void lt_gemm_bf16_force_fp32(int on);

/* The calling thread's GEMM precision (LT_AUTOCAST_*): set by the ops autocast applies to, for their products,
 * and carried to the pool's workers for the length of a job (pool.c). In gemm_bf16_mode.c, which calls nothing:
 * the pool and the GEMM both read it. */
int lt_gemm_bf16_mode(void);
void lt_gemm_bf16_set_mode(int mode);
/* The ops' one-line hook: for the rest of the enclosing block the thread's GEMMs use c->autocast's precision,
 * the previous one is back when the block ends (however it ends). */
static inline int lt_gemm_bf16_enter(const lt_ctx *c) {
  int old = lt_gemm_bf16_mode();
  if (c->autocast != old) lt_gemm_bf16_set_mode(c->autocast);
  return old;
}
static inline void lt_gemm_bf16_leave(const int *old) {
  if (*old != lt_gemm_bf16_mode()) lt_gemm_bf16_set_mode(*old);
}
#define lt_gemm_bf16_scope(c) \
  int lt_autocast_saved_ __attribute__((cleanup(lt_gemm_bf16_leave), unused)) = lt_gemm_bf16_enter(c)

/* Whether an [m x k] x [k x n] product is worth the bf16 path: matrix-vector products, outer products and
 * small products stay fp32 (the packing would cost more than the faster kernel saves). */
int lt_gemm_bf16_wants(int m, int n, int k);
/* Row-major, as lt_blas_sgemm; call only when lt_gemm_bf16_active(). Splits over the pool's threads when
 * threads > 1 (1 inside a pool job). LT_ERR, C untouched, when its packing buffers cannot be had (the caller
 * computes in fp32 then). */
int lt_gemm_bf16(int transa, int transb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                 int ldb, float beta, float *c, int ldc, int threads);

/* The AVX512-BF16 parts (gemm_bf16_kernel.c), for gemm_bf16.c. Packed operands are 32-bit words, each the two
 * bf16 of a pair of k (low half the even k); kp = (k + 1) / 2 pairs, an odd k padded with a zero. */
#define LT_BF16_MR 6  /* rows of the register tile */
#define LT_BF16_NR 64 /* columns of the register tile (4 vectors of 16) */
/* A block of op(A): rows [0, mc) x k [0, kc), `a` at its element (0, 0) -> ap[i * kp + p] */
void lt_bf16_pack_a(int transa, const float *a, int lda, int mc, int kc, uint32_t *ap);
/* B block of op(B): k [0, kc) x columns [0, nc), `b` at its element (0, 0) -> panels of 64 columns,
 * bp[(j / 64) * kp * 64 + p * 64 + j % 64], the last panel's columns past nc zero */
void lt_bf16_pack_b(int transb, const float *b, int ldb, int kc, int nc, uint32_t *bp);
/* C[mr x nr] (mr <= 6, nr <= 64) = alpha * ap-rows x bp-panel + beta * C (beta = 0: C is not read) */
void lt_bf16_tile(int kp, const uint32_t *ap, int mr, const uint32_t *bp, int nr, float alpha, float beta, float *c,
                  int ldc);

#endif
