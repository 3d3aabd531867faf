/* test_core.c — the core without Lua: tensors, views, broadcasting, autograd, errors, allocator. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lt_alloc.h"
#include "lt_ops.h"
#include "lt_pool.h"

#include "check.h"

static lt_tensor *from(lt_ctx *c, int ndim, const int64_t *shape, const float *v) {
  lt_tensor *t = lt_tensor_new(c, LT_F32, ndim, shape);
  memcpy(lt_f32(t), v, sizeof(float) * (size_t)lt_numel(t));
  return t;
}

int main(void) {
  lt_ctx ctx, *c = &ctx;
  lt_ctx_init(c);

  /* matmul forward and backward through the BLAS */
  int64_t s23[2] = { 2, 3 }, s32[2] = { 3, 2 };
  lt_tensor *a = from(c, 2, s23, (float[]){ 1, 2, 3, 4, 5, 6 });
  lt_tensor *b = from(c, 2, s32, (float[]){ 1, 0, 0, 1, 1, 1 });
  a->requires_grad = 1;
  b->requires_grad = 1;
  lt_tensor *m = lt_op_matmul(c, a, b);
  CHECK(m && m->shape[0] == 2 && m->shape[1] == 2, "matmul shape");
  float *pm = lt_f32(m);
  CHECK(pm[0] == 4 && pm[1] == 5 && pm[2] == 10 && pm[3] == 11, "matmul values");
  lt_tensor *s = lt_op_reduce(c, LT_RSUM, m, -1, 0);
  CHECK(lt_backward(c, s, NULL) == LT_OK, "backward runs");
  /* d sum(A B) / dA = ones @ B^T : rows of B summed */
  float *ga = lt_f32(a->grad);
  CHECK(ga[0] == 1 && ga[1] == 1 && ga[2] == 2 && ga[3] == 1 && ga[4] == 1 && ga[5] == 2, "matmul grad a");
  float *gb = lt_f32(b->grad);
  CHECK(gb[0] == 5 && gb[2] == 7 && gb[4] == 9, "matmul grad b");
  CHECK(s->grad_fn->released, "backward released the graph");
  CHECK(lt_backward(c, s, NULL) == LT_ERR && strstr(c->err, "already freed"), "second backward is an error");

  /* broadcasting error message */
  int64_t s4[1] = { 4 };
  lt_tensor *v4 = lt_tensor_zeros(c, LT_F32, 1, s4);
  lt_tensor *bad = lt_op_binary(c, LT_ADD, a, v4);
  CHECK(!bad && !strcmp(c->err, "add: shapes [2 x 3] and [4] cannot be broadcast (sizes must match or be 1 in each dim, from the last)"),
        "broadcast error names op and shapes");

  /* matmul error message */
  lt_tensor *bad2 = lt_op_matmul(c, a, a);
  CHECK(!bad2 && !strcmp(c->err, "matmul: shape mismatch: a is [2 x 3], b is [2 x 3] (a:size(2) must equal b:size(1))"),
        "matmul error names both shapes");

  /* views share storage */
  lt_tensor *tr = lt_op_transpose(c, a, 0, 1);
  CHECK(tr->storage == a->storage && !lt_is_contiguous(tr), "transpose is a view");
  lt_tensor *row = lt_op_select(c, a, 0, 1);
  CHECK(lt_f32(row)[0] == 4, "select row 2");

  /* out of memory is an error, not a crash */
  int64_t huge[2] = { INT64_C(1) << 31, INT64_C(1) << 31 }; /* 2^62 elements, 2^64 bytes (lt_size.h) */
  lt_tensor *h = lt_tensor_new(c, LT_F32, 2, huge);
  CHECK(!h && strstr(c->err, "tensor: the result [2147483648 x 2147483648] needs more than 2^62 bytes"),
        "huge shape is refused");
  int64_t big[1] = { INT64_C(1) << 44 };
  lt_tensor *h2 = lt_tensor_new(c, LT_F32, 1, big);
  CHECK(!h2 && strstr(c->err, "out of memory"), "failed allocation is an error");

  /* size-class cache: freeing then allocating the same size reuses the buffer */
  lt_alloc_stats st0, st1;
  void *p = lt_alloc(100000);
  lt_free(p, 100000);
  lt_alloc_get_stats(&st0);
  void *q = lt_alloc(100000);
  lt_alloc_get_stats(&st1);
  CHECK(q == p && st1.system_allocs == st0.system_allocs, "cache reuses a freed buffer");
  CHECK(((uintptr_t)q % LT_ALIGN) == 0, "buffers are 64-byte aligned");
  lt_free(q, 100000);

  /* elementwise kernels on lt_pool (2 threads): a large op gives the one-thread result; an in-place update of
   * an expanded (stride-0) view, which the binding refuses but a C host can make, stays on one thread: every
   * element adds 1 to the same float in order */
  {
    lt_pool_set_threads(2);
    c->num_threads = 2;
    int64_t n1[1] = { 1 }, big[1] = { 200000 }, huge[1] = { 2000000 }; /* exact in float up to 2^24 */
    lt_tensor *one = lt_tensor_zeros(c, LT_F32, 1, n1);
    lt_tensor *rep = lt_broadcast_alias(c, one, 1, huge);
    CHECK(rep && lt_op_binary_scalar_(c, LT_ADD, rep, 1.0) == LT_OK && lt_f32(one)[0] == 2000000.0f,
          "in-place update of a stride-0 view: sequential, every element counted");
    lt_tensor *x = lt_tensor_new(c, LT_F32, 1, big);
    for (int64_t i = 0; i < big[0]; i++) lt_f32(x)[i] = (float)(i % 1000) * 0.01f - 3.0f;
    lt_tensor *e2 = lt_op_unary(c, LT_SIGMOID, x);
    c->num_threads = 1;
    lt_tensor *e1 = lt_op_unary(c, LT_SIGMOID, x);
    CHECK(e1 && e2 && !memcmp(lt_f32(e1), lt_f32(e2), sizeof(float) * (size_t)big[0]),
          "sigmoid over 200K elements: 2 threads give the 1-thread bits");
    lt_tensor *tmp[] = { one, rep, x, e1, e2 };
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) lt_tensor_release(tmp[i]);
    lt_pool_set_threads(1);
  }

  /* version counters: an operand a backward reads, changed in place through a view after the forward, fails
   * the backward (graph kept, nothing accumulated); an operand it does not read may change */
  {
    int64_t n3[1] = { 3 };
    lt_tensor *x = from(c, 1, n3, (float[]){ 1, 2, 3 });
    lt_tensor *k = from(c, 1, n3, (float[]){ 10, 20, 30 });
    x->requires_grad = 1;
    lt_tensor *prod = lt_op_binary(c, LT_MUL, x, k), *sum = lt_op_binary(c, LT_ADD, x, k);
    lt_tensor *kv = lt_op_narrow(c, k, 0, 1, 1);
    CHECK(k->storage->version == 0 && lt_op_fill_(c, kv, 5.0) == LT_OK && k->storage->version == 1,
          "a write through a view bumps the shared version");
    lt_tensor *loss = lt_op_reduce(c, LT_RSUM, prod, -1, 0);
    CHECK(lt_backward(c, loss, NULL) == LT_ERR &&
              !strcmp(c->err, "backward: mul's input 2 was modified in place (version 0 -> 1) after it was saved; "
                              "clone it before changing it") &&
              !x->grad && !loss->grad_fn->released,
          "backward of x * k after k changed: error naming mul's input 2, graph kept");
    lt_tensor *loss2 = lt_op_reduce(c, LT_RSUM, sum, -1, 0);
    CHECK(lt_backward(c, loss2, NULL) == LT_OK && x->grad && lt_f32(x->grad)[1] == 1,
          "add reads neither operand: its backward runs after k changed");
    lt_tensor *tmp[] = { x, k, prod, sum, kv, loss, loss2 };
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) lt_tensor_release(tmp[i]);
  }

  /* lt_accumulate_grad, open to a C host: a gradient of another shape or dtype is an error naming backward and
   * both, and leaves the leaf's gradient as it was; one of the leaf's shape is added in */
  {
    int64_t n3[1] = { 3 }, n2[1] = { 2 };
    lt_tensor *leaf = from(c, 1, n3, (float[]){ 0, 0, 0 });
    lt_tensor *g3 = from(c, 1, n3, (float[]){ 1, 2, 3 }), *g2 = from(c, 1, n2, (float[]){ 1, 2 });
    lt_tensor *gi = lt_tensor_zeros(c, LT_I64, 1, n3);
    leaf->requires_grad = 1;
    CHECK(lt_accumulate_grad(c, leaf, g3) == LT_OK && lt_accumulate_grad(c, leaf, g3) == LT_OK &&
              lt_f32(leaf->grad)[2] == 6,
          "accumulate_grad adds a gradient of the leaf's shape");
    CHECK(lt_accumulate_grad(c, leaf, g2) == LT_ERR &&
              !strcmp(c->err, "backward: a gradient of shape [2] cannot be added to one of shape [3]") &&
              lt_f32(leaf->grad)[2] == 6,
          "accumulate_grad of another shape: an error naming both shapes, nothing added");
    CHECK(lt_accumulate_grad(c, leaf, gi) == LT_ERR && strstr(c->err, "backward") && strstr(c->err, "int64"),
          "accumulate_grad of an int64 gradient: an error naming backward and the dtype");
    lt_tensor *tmp[] = { leaf, g3, g2, gi };
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) lt_tensor_release(tmp[i]);
  }

  lt_tensor *all[] = { a, b, m, s, v4, tr, row };
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) lt_tensor_release(all[i]);
  CHECK(lt_tensor_live_count() == 0, "every tensor released");

  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
