/* bench_matmul.c — lutra's matmul against a raw cblas_sgemm call on the same square sizes, one thread
 * setting; prints GFLOP/s of both and their ratio (issue bar: >= 0.95 from 256x256 up). */
#include <stdio.h>
#include <time.h>

#include "lt_blas.h"
#include "lt_fpmode.h"
#include "lt_ops.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void) {
  lt_ctx ctx;
  lt_ctx_init(&ctx);
  lt_set_flush_denormal(1);
  const lt_blas_info *I = lt_blas_get_info();
  printf("BLAS: %s, coretype %s (%s), threads %d\n", I->library, I->coretype, I->corename, I->threads);
  printf("%6s %12s %12s %8s\n", "n", "sgemm GF/s", "matmul GF/s", "ratio");
  int sizes[] = { 64, 128, 256, 512, 1024 };
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    int64_t n = sizes[s], shape[2] = { n, n };
    lt_tensor *a = lt_op_randn(&ctx, 2, shape), *b = lt_op_randn(&ctx, 2, shape);
    lt_tensor *cc = lt_tensor_new(&ctx, LT_F32, 2, shape);
    double flop = 2.0 * n * n * n;
    int reps = (int)(2e9 / flop) + 3;
    double best_raw = 1e9, best_op = 1e9;
    for (int round = 0; round < 5; round++) {
      double t0 = now();
      for (int r = 0; r < reps; r++)
        lt_blas_sgemm(0, 0, (int)n, (int)n, (int)n, 1.0f, lt_f32(a), (int)n, lt_f32(b), (int)n, 0.0f, lt_f32(cc), (int)n);
      double t1 = now();
      for (int r = 0; r < reps; r++) lt_tensor_release(lt_op_matmul(&ctx, a, b));
      double t2 = now();
      if ((t1 - t0) / reps < best_raw) best_raw = (t1 - t0) / reps;
      if ((t2 - t1) / reps < best_op) best_op = (t2 - t1) / reps;
    }
    printf("%6lld %12.1f %12.1f %8.3f\n", (long long)n, flop / best_raw * 1e-9, flop / best_op * 1e-9, best_raw / best_op);
    lt_tensor_release(a);
    lt_tensor_release(b);
    lt_tensor_release(cc);
  }
  return 0;
}
