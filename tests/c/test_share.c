/* test_share.c — tensors shared by threads (core/src/tensor.c): several threads retain and release one tensor,
 * and make and drop views of its storage, at the same time; afterwards the counts are back where they
 * started, and dropping the last references frees the tensor and its storage exactly once. A tensor that
 * another thread held is freed by whichever thread lets go last, and that thread sees what the others wrote
 * into it. Run in the release and the ASan builds (tests/run --config asan): a lost update shows as a count off
 * by some, or as a use after free. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "lt_alloc.h"
#include "lt_tensor.h"

#include "check.h"

#define THREADS 4
#define ROUNDS 2000000

typedef struct arg {
  lt_tensor *t;
  pthread_barrier_t *start;
  int failed_alias; /* an alias that could not be made (out of memory) */
} arg;

/* Retains and releases `t` itself, and makes and drops a view of its storage, ROUNDS times. */
static void *churn(void *p) {
  arg *a = p;
  lt_ctx ctx;
  lt_ctx_init(&ctx);
  pthread_barrier_wait(a->start);
  for (int i = 0; i < ROUNDS; i++) {
    lt_tensor *r = lt_tensor_retain(a->t);
    lt_tensor_release(r);
    if (i % 8 == 0) {
      lt_tensor *v = lt_tensor_alias(&ctx, a->t, a->t->ndim, a->t->shape, a->t->stride, a->t->offset);
      if (!v) a->failed_alias = 1;
      lt_tensor_release(v);
    }
  }
  return NULL;
}

/* Holds a reference of its own, writes into the storage, then lets go: the main thread drops its reference
 * before this one, so this thread frees the tensor. */
typedef struct last {
  lt_tensor *t;
  atomic_int *go;
} last;

static void *write_and_release(void *p) {
  last *l = p;
  while (!atomic_load(l->go)) {}
  float *x = lt_f32(l->t);
  for (int64_t i = 0; i < lt_numel(l->t); i++) x[i] = (float)i;
  lt_tensor_release(l->t);
  return NULL;
}

int main(void) {
  lt_ctx ctx;
  lt_ctx_init(&ctx);
  int64_t shape[2] = { 64, 16 };
  int64_t live0 = lt_tensor_live_count();
  lt_alloc_stats st0;
  lt_alloc_get_stats(&st0);

  /* counts after concurrent retain/release and views */
  lt_tensor *t = lt_tensor_zeros(&ctx, LT_F32, 2, shape);
  CHECK(t != NULL, "a tensor to share");
  if (!t) return 1;
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, THREADS);
  pthread_t th[THREADS];
  arg args[THREADS];
  for (int i = 0; i < THREADS; i++) {
    args[i] = (arg){ t, &start, 0 };
    pthread_create(&th[i], NULL, churn, &args[i]);
  }
  int alias_ok = 1;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    alias_ok &= !args[i].failed_alias;
  }
  pthread_barrier_destroy(&start);
  CHECK(alias_ok, "every view was made");
  CHECK(atomic_load(&t->refcount) == 1, "the tensor's count is back to 1 after 4 threads x 2000000 retain/release");
  CHECK(atomic_load(&t->storage->refcount) == 1,
        "the storage's count is back to 1 after 4 threads made and dropped views");
  CHECK(lt_tensor_live_count() == live0 + 1, "every view was freed, the tensor was not");
  lt_tensor_release(t);
  CHECK(lt_tensor_live_count() == live0, "the last release freed the tensor");
  lt_alloc_stats st1;
  lt_alloc_get_stats(&st1);
  CHECK(st1.live_bytes == st0.live_bytes, "the storage and every header went back to the allocator");

  /* the last reference dropped on another thread, after it wrote */
  int ok = 1;
  for (int round = 0; round < 200 && ok; round++) {
    lt_tensor *u = lt_tensor_zeros(&ctx, LT_F32, 2, shape);
    if (!u) {
      ok = 0;
      break;
    }
    atomic_int go = 0;
    last l = { lt_tensor_retain(u), &go };
    pthread_t w;
    pthread_create(&w, NULL, write_and_release, &l);
    lt_tensor *view = lt_tensor_alias(&ctx, u, u->ndim, u->shape, u->stride, u->offset); /* keeps the storage */
    lt_tensor_release(u);
    atomic_store(&go, 1);
    pthread_join(w, NULL);
    if (!view) {
      ok = 0;
      break;
    }
    ok &= atomic_load(&view->storage->refcount) == 1;
    ok &= lt_f32(view)[lt_numel(view) - 1] == (float)(lt_numel(view) - 1);
    lt_tensor_release(view);
  }
  CHECK(ok, "a tensor released last by another thread is freed by it; its writes are seen through a view");
  CHECK(lt_tensor_live_count() == live0, "no tensor left alive");

  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
