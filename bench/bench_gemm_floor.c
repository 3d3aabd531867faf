/* bench_gemm_floor.c — the GEMM-only floor of a training step: replays exactly the cblas_sgemm calls
 * (shapes, transposes, beta) that one lutra training step makes, with nothing else, through the same
 * lt_blas_sgemm (same OpenBLAS kernel family, same thread count). Its time per step is the least a
 * step can cost with this BLAS; bench/run compares every training step with it.
 *   bench_gemm_floor mlp|lenet BATCH [rounds [mode [serve]]]   (threads: OPENBLAS_NUM_THREADS, default = cores)
 * serve: prints READY, then answers "run N" on stdin with "DONE seconds 0" (N steps' GEMMs), as the training
 * processes of bench/run do, so the floor is measured in the same alternating blocks.
 * mode: lutra (default: lt_blas_sgemm as a training step calls it: large calls split over lutra's pool),
 * single (one thread), openblas (OpenBLAS's own threads, as PyTorch uses it; lutra's pool at 1 thread).
 * Prints one line: "gemm_floor model=mlp batch=64 ms_per_step=... mflop_per_step=... gflops=..." and
 * one "gemm ..." line per call (time and GFLOP/s of that shape alone). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lt_alloc.h"
#include "lt_blas.h"
#include "lt_fpmode.h"

typedef struct call { int ta, tb, m, n, k; float beta; float *a, *b, *c; } call;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float *buf(size_t n) {
  float *p = lt_alloc(sizeof(float) * n);
  for (size_t i = 0; i < n; i++) p[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
  return p;
}

static int ncalls;
static call calls[256];

/* C [m, n] (+)= op(A) op(B), row-major, contiguous operands */
static void add(int ta, int tb, int m, int n, int k, float beta) {
  call *c = &calls[ncalls++];
  c->ta = ta; c->tb = tb; c->m = m; c->n = n; c->k = k; c->beta = beta;
  c->a = buf((size_t)m * k);
  c->b = buf((size_t)k * n);
  c->c = buf((size_t)m * n);
}

/* rows [r0, r1) and columns [c0, c1) of the call's C */
static void run_part(const call *c, int r0, int r1, int c0, int c1) {
  int lda = c->ta ? c->m : c->k, ldb = c->tb ? c->k : c->n;
  const float *a = c->ta ? c->a + r0 : c->a + (size_t)r0 * lda;
  const float *b = c->tb ? c->b + (size_t)c0 * ldb : c->b + c0;
  lt_blas_sgemm(c->ta, c->tb, r1 - r0, c1 - c0, c->k, 1.0f, a, lda, b, ldb, c->beta, c->c + (size_t)r0 * c->n + c0,
                c->n);
}

static void run(const call *c) { run_part(c, 0, c->m, 0, c->n); }

/* lt.linear: forward y = x W^T (+ bias preloaded, beta 1); backward gx = g W (when the input needs it),
 * gW = g^T x */
static void linear(int B, int in, int out, int need_gx) {
  add(0, 1, B, out, in, 1.0f);
  if (need_gx) add(0, 0, B, in, out, 0.0f);
  add(1, 0, out, in, B, 0.0f);
}

/* nn_conv.c: the batch in chunks of items whose unfolded input col [K, m*P] fits 64K floats; per chunk:
 * forward tmp [O, m*P] = W [O, K] @ col; backward gW += g [O, m*P] @ col^T, gcol [K, m*P] = W^T @ g (when the
 * input needs it) */
static void conv(int B, int C, int O, int k, int HO, int WO, int need_gx) {
  int K = C * k * k, P = HO * WO, items = 65536 / (K * P);
  if (items < 1) items = 1;
  if (items > B) items = B;
  for (int i0 = 0; i0 < B; i0 += items) {
    int m = B - i0 < items ? B - i0 : items;
    add(0, 0, O, m * P, K, 0.0f);
  }
  for (int i0 = 0; i0 < B; i0 += items) {
    int m = B - i0 < items ? B - i0 : items;
    add(0, 1, O, K, m * P, 1.0f);
    if (need_gx) add(1, 0, K, m * P, O, 0.0f);
  }
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: bench_gemm_floor mlp|lenet BATCH [rounds]\n");
    return 2;
  }
  const char *model = argv[1];
  int B = atoi(argv[2]), rounds = argc > 3 ? atoi(argv[3]) : 9;
  const char *mode = argc > 4 ? argv[4] : "lutra";
  if (B < 1 || rounds < 1) return 2;
  lt_set_flush_denormal(1);
  int threads = lt_blas_get_info()->threads;
  if (!strcmp(mode, "single")) lt_blas_set_threads(1);
  else if (!strcmp(mode, "openblas")) {
    void *h = dlopen(lt_blas_get_info()->library, RTLD_NOW | RTLD_LOCAL);
    void (*set)(int) = h ? (void (*)(int))dlsym(h, "openblas_set_num_threads") : NULL;
    if (!set) {
      fprintf(stderr, "bench_gemm_floor: no openblas_set_num_threads in %s\n", lt_blas_get_info()->library);
      return 2;
    }
    lt_blas_set_threads(1);
    set(threads);
  } else if (strcmp(mode, "lutra")) {
    fprintf(stderr, "bench_gemm_floor: unknown mode '%s' (lutra, single, openblas)\n", mode);
    return 2;
  }
  if (!strcmp(model, "mlp")) {
    linear(B, 784, 512, 0);
    linear(B, 512, 256, 1);
    linear(B, 256, 10, 1);
  } else if (!strcmp(model, "lenet")) {
    conv(B, 1, 6, 5, 28, 28, 0);
    conv(B, 6, 16, 5, 10, 10, 1);
    linear(B, 400, 120, 1);
    linear(B, 120, 84, 1);
    linear(B, 84, 10, 1);
  } else {
    fprintf(stderr, "bench_gemm_floor: unknown model '%s' (mlp, lenet)\n", model);
    return 2;
  }
  double flop = 0;
  for (int i = 0; i < ncalls; i++) flop += 2.0 * calls[i].m * calls[i].n * calls[i].k;
  const lt_blas_info *I = lt_blas_get_info();
  /* repetitions per round: about 0.2 s of work at 100 GFLOP/s */
  int reps = (int)(2e10 / flop) + 3;
  for (int r = 0; r < reps; r++)
    for (int i = 0; i < ncalls; i++) run(&calls[i]);
  if (argc > 5 && !strcmp(argv[5], "serve")) {
    printf("READY\n");
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
      int n = 0;
      if (sscanf(line, "run %d", &n) != 1) break;
      double t0 = now();
      for (int r = 0; r < n; r++)
        for (int i = 0; i < ncalls; i++) run(&calls[i]);
      printf("DONE %.9f 0\n", now() - t0);
      fflush(stdout);
    }
    printf("RESULT mflop_per_step=%.2f\n", flop * 1e-6);
    return 0;
  }
  double *t = malloc(sizeof(double) * (size_t)rounds);
  for (int round = 0; round < rounds; round++) {
    double t0 = now();
    for (int r = 0; r < reps; r++)
      for (int i = 0; i < ncalls; i++) run(&calls[i]);
    t[round] = (now() - t0) / reps;
  }
  qsort(t, (size_t)rounds, sizeof *t, cmp);
  double med = t[rounds / 2];
  printf("gemm_floor model=%s batch=%d ms_per_step=%.4f mflop_per_step=%.2f gflops=%.1f coretype=%s corename=%s "
         "threads=%d mode=%s\n",
         model, B, med * 1e3, flop * 1e-6, flop / med * 1e-9, I->coretype, I->corename,
         strcmp(mode, "single") ? threads : 1, mode);
  for (int i = 0; i < ncalls; i++) {
    const call *c = &calls[i];
    int seen = 0;
    for (int j = 0; j < i; j++)
      seen |= calls[j].ta == c->ta && calls[j].tb == c->tb && calls[j].m == c->m && calls[j].n == c->n &&
              calls[j].k == c->k;
    if (seen) continue;
    double best = 1e9;
    for (int round = 0; round < 5; round++) {
      double t0 = now();
      for (int r = 0; r < reps; r++) run(c);
      double dt = (now() - t0) / reps;
      if (dt < best) best = dt;
    }
    printf("gemm %c%c m=%d n=%d k=%d beta=%g us=%.2f gflops=%.1f\n", c->ta ? 'T' : 'N', c->tb ? 'T' : 'N', c->m,
           c->n, c->k, (double)c->beta, best * 1e6, 2.0 * c->m * c->n * c->k / best * 1e-9);
  }
  free(t);
  return 0;
}
