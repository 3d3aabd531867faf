/*
 * test_infer.c — inference plans (core/src/lt_infer.h) without Lua: a Linear + ReLU + Linear plan against the
 * same arithmetic in double, the weights read at each run (an in-place change is seen), an Embedding index out
 * of range failing with its message, steps with wrong buffers or parameters refused when added, and no
 * allocation by lt_infer_run (lutra's allocator counters unchanged over 1000 runs).
 * Prints "ok - ..." / "not ok - ..." per check and a final "N passed, M failed".
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "lt_alloc.h"
#include "lt_infer.h"

static lt_tensor *filled(lt_ctx *c, int ndim, const int64_t *shape, float scale) {
  lt_tensor *t = lt_tensor_new(c, LT_F32, ndim, shape);
  float *d = lt_f32(t);
  for (int64_t i = 0; i < lt_numel(t); i++) d[i] = scale * (float)sin((double)i * 0.7 + ndim);
  return t;
}

/* y = W2 relu(W1 x + b1) + b2 in double */
static void reference(const float *x, const lt_tensor *W1, const lt_tensor *b1, const lt_tensor *W2,
                      const lt_tensor *b2, int I, int Hd, int O, double *y) {
  double h[64];
  for (int j = 0; j < Hd; j++) {
    double s = lt_f32(b1)[j];
    for (int i = 0; i < I; i++) s += (double)lt_f32(W1)[j * I + i] * x[i];
    h[j] = s > 0 ? s : 0;
  }
  for (int o = 0; o < O; o++) {
    double s = lt_f32(b2)[o];
    for (int j = 0; j < Hd; j++) s += (double)lt_f32(W2)[o * Hd + j] * h[j];
    y[o] = s;
  }
}

static double max_diff(const float *a, const double *b, int n) {
  double m = 0;
  for (int i = 0; i < n; i++) m = fmax(m, fabs(a[i] - b[i]));
  return m;
}

int main(void) {
  lt_ctx c;
  lt_ctx_init(&c);
  enum { I = 13, Hd = 37, O = 5 }; /* sizes that leave tails after the 4-row, 8-lane blocks */
  lt_tensor *W1 = filled(&c, 2, (int64_t[]){ Hd, I }, 0.3f), *b1 = filled(&c, 1, (int64_t[]){ Hd }, 0.1f);
  lt_tensor *W2 = filled(&c, 2, (int64_t[]){ O, Hd }, 0.2f), *b2 = filled(&c, 1, (int64_t[]){ O }, 0.1f);

  lt_infer_plan *p = lt_infer_new(&c);
  int x = lt_infer_buffer(&c, p, I), h = lt_infer_buffer(&c, p, Hd), a = lt_infer_buffer(&c, p, Hd);
  int y = lt_infer_buffer(&c, p, O);
  lt_infer_step s1 = { .op = LT_INFER_LINEAR, .in = x, .out = h, .rows = 1, .n_in = I, .n_out = Hd, .t = { W1, b1 } };
  lt_infer_step s2 = { .op = LT_INFER_ACT, .act = LT_INFER_RELU, .in = h, .out = a, .n_in = Hd };
  lt_infer_step s3 = { .op = LT_INFER_LINEAR, .in = a, .out = y, .rows = 1, .n_in = Hd, .n_out = O, .t = { W2, b2 } };
  CHECK(lt_infer_add(&c, p, &s1) == LT_OK && lt_infer_add(&c, p, &s2) == LT_OK && lt_infer_add(&c, p, &s3) == LT_OK,
        "Linear, ReLU, Linear added");

  float *xin = lt_f32(lt_infer_buf(p, x));
  for (int i = 0; i < I; i++) xin[i] = (float)cos(i);
  double want[O];
  CHECK(lt_infer_run(&c, p) == LT_OK, "the plan runs");
  reference(xin, W1, b1, W2, b2, I, Hd, O, want);
  CHECK(max_diff(lt_f32(lt_infer_buf(p, y)), want, O) < 1e-5, "outputs equal the arithmetic in double to 1e-5");

  lt_f32(W2)[3] *= -2.0f; /* an in-place change of a weight: the next run reads it */
  lt_infer_run(&c, p);
  reference(xin, W1, b1, W2, b2, I, Hd, O, want);
  CHECK(max_diff(lt_f32(lt_infer_buf(p, y)), want, O) < 1e-5, "an in-place weight change is seen by the next run");

  lt_alloc_stats before, after;
  lt_alloc_get_stats(&before);
  for (int k = 0; k < 1000; k++) lt_infer_run(&c, p);
  lt_alloc_get_stats(&after);
  CHECK(after.total_allocated == before.total_allocated && after.system_allocs == before.system_allocs &&
            after.cache_hits == before.cache_hits,
        "1000 runs allocate nothing from lutra's allocator");

  /* refusals when a step is added */
  lt_infer_step bad = s1;
  bad.n_in = I + 1;
  CHECK(lt_infer_add(&c, p, &bad) == LT_ERR && strstr(c.err, "input buffer holds 13 values, the step needs 14"),
        "a step larger than its buffer is refused");
  bad = s1;
  bad.t[0] = W2;
  CHECK(lt_infer_add(&c, p, &bad) == LT_ERR && strstr(c.err, "lt.infer: Linear: weight [5 x 37] has 185 elements, "
                                                              "expected 481"),
        "a weight of the wrong size is refused, with its shape");
  bad = s2;
  bad.out = 99;
  CHECK(lt_infer_add(&c, p, &bad) == LT_ERR && strstr(c.err, "output buffer 99 does not exist"),
        "a buffer that does not exist is refused");

  /* an Embedding: 1-based indices stored as floats; out of range fails at run time with the position */
  lt_tensor *E = filled(&c, 2, (int64_t[]){ 4, 3 }, 1.0f);
  lt_infer_plan *q = lt_infer_new(&c);
  int ix = lt_infer_buffer(&c, q, 2), ey = lt_infer_buffer(&c, q, 6);
  lt_infer_step se = { .op = LT_INFER_EMBEDDING, .in = ix, .out = ey, .rows = 2, .n_out = 3, .geo = { 4 }, .t = { E } };
  CHECK(lt_infer_add(&c, q, &se) == LT_OK, "Embedding added");
  lt_f32(lt_infer_buf(q, ix))[0] = 4, lt_f32(lt_infer_buf(q, ix))[1] = 1;
  CHECK(lt_infer_run(&c, q) == LT_OK && lt_f32(lt_infer_buf(q, ey))[0] == lt_f32(E)[9] &&
            lt_f32(lt_infer_buf(q, ey))[3] == lt_f32(E)[0],
        "Embedding rows 4 and 1");
  lt_f32(lt_infer_buf(q, ix))[1] = 5;
  CHECK(lt_infer_run(&c, q) == LT_ERR &&
            strcmp(c.err, "lt.infer: Embedding: index 5 is out of range [1, 4] (input position 2)") == 0,
        "an index out of range fails with its position");

  lt_infer_free(p);
  lt_infer_free(q);
  lt_tensor_release(W1), lt_tensor_release(b1), lt_tensor_release(W2), lt_tensor_release(b2), lt_tensor_release(E);
  CHECK(lt_tensor_live_count() == 0, "every tensor released (the plans held their own references)");
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
