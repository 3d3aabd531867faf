/*
 * lt_blas.h — OpenBLAS, loaded at run time so that lutra chooses its kernel family first.
 *
 * Debian's OpenBLAS 0.3.21 does not recognise recent AVX-512 Xeons and falls back to its slowest
 * ("Prescott") kernels. OpenBLAS reads OPENBLAS_CORETYPE once, when it is loaded, so lutra detects the
 * CPU's features (cpuid + xgetbv), sets OPENBLAS_CORETYPE to the best family the CPU really supports
 * unless the user already set it, and only then dlopens the library. Without any BLAS a plain C GEMM
 * keeps everything working (slowly), and lt.blas_info() says so.
 */
#ifndef LT_BLAS_H
#define LT_BLAS_H

#include <stdint.h>

#include "lt_ctx.h"

typedef struct lt_blas_info {
  const char *library;    /* path that was loaded, or "builtin" */
  char coretype[32];      /* the kernel family OpenBLAS was told, or "" */
  char corename[64];      /* what OpenBLAS reports it uses */
  char config[256];       /* openblas_get_config() */
  const char *reason;     /* why this family: "user" (OPENBLAS_CORETYPE was set), "cpu features", ... */
  char cpu_features[128]; /* "avx512f avx512bw ... avx2 fma" */
  int threads;
  const char *threads_reason; /* why that many at start: "online", "affinity", "cgroup quota" (lt_cpus.h) */
} lt_blas_info;

void lt_blas_init(void); /* idempotent, thread-safe */
const lt_blas_info *lt_blas_get_info(void);
void lt_blas_set_threads(int n);
int lt_blas_cpu_count(void);
/* Whether an [m x k] x [k x n] GEMM is large enough that lt_blas_sgemm runs it on every thread (smaller ones,
 * and thin ones, run faster on one: core/src/blas.c says what was measured). */
int lt_blas_threads_pay(int64_t m, int64_t n, int64_t k);
/* Between these, OpenBLAS runs every GEMM on the thread that calls it (its thread count held at one), so the
 * parts of a job on lutra's pool (lt_pool.h) may each call lt_blas_sgemm: GEMMs run side by side on the
 * pool's threads instead of one at a time on OpenBLAS's. Called by the thread submitting the job. */
void lt_blas_serial_begin(void);
void lt_blas_serial_end(void);
/* LT_OK when OpenBLAS can have the workspace its GEMMs need, else fails with "out of memory: GEMM workspace ...".
 * OpenBLAS 0.3.21 maps one 128 MiB buffer for each thread that runs a GEMM, the first time that thread runs one,
 * and when the map fails it retries forever (driver/others/memory.c, blas_memory_alloc): under `ulimit -v` the
 * first GEMM never returned. So before the first GEMM lutra maps as many buffers as OpenBLAS may run threads
 * (then unmaps them); once that succeeded for this thread count the check is one load. Ops that call
 * lt_blas_sgemm call this first (lt_gemm does). */
int lt_blas_ready(lt_ctx *c);
/* Row-major sgemm, C = alpha * op(A) op(B) + beta * C. */
void lt_blas_sgemm(int transa, int transb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                   int ldb, float beta, float *c, int ldc);
/* A Linear layer's forward in one pass over C when lutra's tile runs it (lt_gemm_small_m_gemm_nt, on AVX-512 CPUs):
 * C [m x n] = relu?(x [m x k] w [n x k]^T + bias [n]), the bias (or NULL) and the ReLU applied as the product is
 * written. It runs where lt_blas_sgemm would put x w^T on the tile (packing x costs less than OpenBLAS packing w),
 * with the same bits as lt_blas_sgemm with the bias preloaded into C (beta 1) then lt_relu_inplace_f32; with a bias
 * also where packing x costs up to twice that (blas.c says why), where lt_blas_sgemm would use OpenBLAS. Returns 0,
 * having done nothing, elsewhere (the caller then does those three steps), else 1. */
int lt_blas_linear_tile(int m, int n, int k, const float *x, int ldx, const float *w, int ldw, const float *bias,
                        int relu, float *c, int ldc);
/* Row-major dgemm (float64), the same contract; cblas_dgemm of the loaded library, or a plain C loop. */
void lt_blas_dgemm(int transa, int transb, int m, int n, int k, double alpha, const double *a, int lda, const double *b,
                   int ldb, double beta, double *c, int ldc);
/* The float64 GEMM of the ops (matmul, conv): lt_blas_dgemm on int64 sizes, C = alpha * op(A) op(B) + beta * C.
 * Fails with LT_E_BLAS_SIZE past 2^31, returns at once for an empty C, and for k = 0 scales C by beta. */
int lt_gemm_f64(lt_ctx *c, int transa, int transb, int64_t m, int64_t n, int64_t k, double alpha, const double *a,
                int64_t lda, const double *b, int64_t ldb, double beta, double *cc, int64_t ldc);

#endif
