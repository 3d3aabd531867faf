/* bench_share.c — what sharing tensors between threads costs the core: a retain/release pair of one
 * tensor and an lt_alloc/lt_free pair through the size-class cache, on one thread and on two threads at
 * once (both on the same tensor; both through the one cache lock). Prints nanoseconds per pair, the median
 * of 5 rounds. The figures behind the choices of docs/design-states.md (atomic refcounts, one locked cache).
 *   build/bin/release/bench_share */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "lt_alloc.h"
#include "lt_tensor.h"

#define PAIRS 4000000
#define ROUNDS 5

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct job {
  int kind; /* 0: retain/release of `t`; 1: alloc/free of `bytes` */
  lt_tensor *t;
  size_t bytes;
  pthread_barrier_t *start;
  double ns; /* per pair, measured by this thread */
} job;

static void *run(void *arg) {
  job *j = arg;
  if (j->start) pthread_barrier_wait(j->start);
  double t0 = now();
  if (j->kind == 0) {
    for (int i = 0; i < PAIRS; i++) lt_tensor_release(lt_tensor_retain(j->t));
  } else {
    for (int i = 0; i < PAIRS; i++) {
      void *p = lt_alloc(j->bytes);
      if (!p) abort();
      *(volatile char *)p = 1;
      lt_free(p, j->bytes);
    }
  }
  j->ns = (now() - t0) / PAIRS * 1e9;
  return NULL;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median over ROUNDS of the per-pair time, with nthreads threads doing the same work at once (their mean). */
static double measure(int kind, lt_tensor *t, int nthreads) {
  double r[ROUNDS];
  for (int k = 0; k < ROUNDS; k++) {
    pthread_barrier_t b;
    pthread_barrier_init(&b, NULL, (unsigned)nthreads);
    pthread_t th[2];
    job jobs[2];
    for (int i = 0; i < nthreads; i++) {
      jobs[i] = (job){ kind, t, 4096, &b, 0 };
      pthread_create(&th[i], NULL, run, &jobs[i]);
    }
    double sum = 0;
    for (int i = 0; i < nthreads; i++) {
      pthread_join(th[i], NULL);
      sum += jobs[i].ns;
    }
    pthread_barrier_destroy(&b);
    r[k] = sum / nthreads;
  }
  qsort(r, ROUNDS, sizeof *r, cmp);
  return r[ROUNDS / 2];
}

int main(void) {
  lt_ctx ctx;
  lt_ctx_init(&ctx);
  int64_t shape[1] = { 16 };
  lt_tensor *t = lt_tensor_zeros(&ctx, LT_F32, 1, shape);
  if (!t) return 1;
  printf("%-28s %10s %10s\n", "ns per pair (median of 5)", "1 thread", "2 threads");
  printf("%-28s %10.1f %10.1f\n", "retain+release, one tensor", measure(0, t, 1), measure(0, t, 2));
  printf("%-28s %10.1f %10.1f\n", "lt_alloc+lt_free, 4 KiB", measure(1, NULL, 1), measure(1, NULL, 2));
  lt_tensor_release(t);
  return 0;
}
