/* test_oom.c — backward when an allocation fails: failing the k-th allocation of a backward pass, for every k
 * (that one only) until the pass needs no more, must give LT_ERR with a message or every gradient, never a gradient silently
 * missing. The failures come from a host allocator (lt_alloc_set_allocator) with the buffer cache off. */
#include <stdlib.h>
#include <string.h>

#include "lt_alloc.h"
#include "lt_nn.h"
#include "lt_ops.h"

#include "check.h"

static long countdown = -1; /* allocations left before the one that fails (only that one); -1: none fails */

static void *host_alloc(void *ud, size_t size, size_t align) {
  (void)ud;
  if (countdown == 0) { countdown = -1; return NULL; }
  if (countdown > 0) countdown--;
  return aligned_alloc(align, (size + align - 1) / align * align);
}

static void host_free(void *ud, void *p, size_t size) {
  (void)ud; (void)size;
  free(p);
}

static lt_tensor *filled(lt_ctx *c, int ndim, const int64_t *shape, float start, int grad) {
  lt_tensor *t = lt_tensor_new(c, LT_F32, ndim, shape);
  float *p = lt_f32(t);
  for (int64_t i = 0; i < lt_numel(t); i++) p[i] = start + 0.37f * (float)((i * 7) % 11);
  t->requires_grad = grad;
  return t;
}

int main(void) {
  lt_allocator a = { host_alloc, host_free, NULL };
  CHECK(lt_alloc_set_allocator(&a) == 0, "host allocator installed");
  lt_alloc_set_cache_limit(0);
  lt_ctx ctx, *c = &ctx;
  lt_ctx_init(c);

  int64_t sx[3] = { 4, 3, 2 }, sc[1] = { 3 };
  int errors = 0, silent = 0, complete = 0;
  for (long k = 0; k < 200 && !complete; k++) {
    lt_tensor *x = filled(c, 3, sx, -1.0f, 1), *w = filled(c, 1, sc, 0.5f, 1), *b = filled(c, 1, sc, 0.1f, 1);
    lt_tensor *r = filled(c, 3, sx, 0.2f, 0);
    lt_tensor *y = lt_nn_batch_norm(c, x, NULL, NULL, w, b, 1, 0.1, 1e-5);
    lt_tensor *yr = y ? lt_op_binary(c, LT_MUL, y, r) : NULL;
    lt_tensor *s = yr ? lt_op_reduce(c, LT_RSUM, yr, -1, 0) : NULL;
    if (!s) { CHECK(0, "forward of batch_norm"); break; }
    countdown = k;
    c->err[0] = 0;
    int rc = lt_backward(c, s, NULL);
    long left = countdown;
    countdown = -1;
    if (rc != LT_OK) errors += c->err[0] != 0 ? 1 : 0;
    else if (!x->grad || !w->grad || !b->grad) silent++;
    else if (left > 0) complete = 1; /* no allocation failed: every later k passes too */
    lt_tensor *all[] = { x, w, b, r, y, yr, s };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) lt_tensor_release(all[i]);
  }
  CHECK(errors > 0, "a failed allocation in batch_norm's backward is an error with a message");
  CHECK(silent == 0, "no backward succeeds with a gradient missing");
  CHECK(complete, "with enough memory the backward completes with every gradient");
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
