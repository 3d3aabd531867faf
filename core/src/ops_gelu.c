/*
 * ops_gelu.c — GELU's tanh approximation, F.gelu(x, {approximate = "tanh"}):
 *   y = 0.5 x (1 + tanh(k (x + 0.044715 x^3))), k = sqrt(2 / pi)
 * forward and backward side by side, contiguous float32, split over lutra's pool (each element computed by the
 * same code whatever the split, so results are bitwise the same on any thread count). The exact GELU is the
 * unary op LT_GELU (ops_unary.c); both forms are also the epilogue of Linear (lt_gelu_f32, lt_gelu_grad_f32:
 * ops_matmul.c's linear_gelu), the exact one with the arithmetic of LT_GELU's forward and backward.
 */
#include "lt_errors.h"
#include "lt_ops.h"
#include "lt_pool.h"
#include "lt_simd.h"

#define GELU_K 0.7978845608028654f
#define GELU_C 0.044715f

typedef struct gelu_job {
  const float *x, *g;
  float *out;
  int64_t n;
  int exact; /* 0.5 x (1 + erf(x / sqrt 2)) instead of the tanh form */
} gelu_job;

/* The exact form, as ops_unary.c's LT_GELU computes it (so a fused Linear matches Linear then GELU) */
LT_VECTOR_FN static void gelu_exact_range(const gelu_job *j, int64_t lo, int64_t hi) {
  const float *x = j->x;
  float *y = j->out;
  for (int64_t i = lo; i < hi; i++) {
    float h = 0.5f * x[i];
    y[i] = __builtin_fmaf(h, lt_erff(x[i] * 0.70710678118654752f), h);
  }
}

/* d/dx = Phi(x) + x phi(x) */
LT_VECTOR_FN static void gelu_exact_grad_range(const gelu_job *j, int64_t lo, int64_t hi) {
  const float *x = j->x, *g = j->g;
  float *r = j->out;
  for (int64_t i = lo; i < hi; i++) {
    float v = x[i];
    float cdf = 0.5f * (1.0f + lt_erff(v * 0.70710678118654752f));
    float pdf = lt_expf(-0.5f * v * v) * 0.39894228040143268f;
    r[i] = g[i] * (cdf + v * pdf);
  }
}

LT_VECTOR_FN static void gelu_tanh_range(const gelu_job *j, int64_t lo, int64_t hi) {
  const float *x = j->x;
  float *y = j->out;
  for (int64_t i = lo; i < hi; i++) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + lt_tanhf(GELU_K * (v + GELU_C * v * v * v)));
  }
}

/* dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3c x^2), t = tanh(k (x + c x^3)) */
LT_VECTOR_FN static void gelu_tanh_grad_range(const gelu_job *j, int64_t lo, int64_t hi) {
  const float *x = j->x, *g = j->g;
  float *r = j->out;
  for (int64_t i = lo; i < hi; i++) {
    float v = x[i], t = lt_tanhf(GELU_K * (v + GELU_C * v * v * v));
    r[i] = g[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_C * v * v));
  }
}

static void fwd_part(void *arg, int i, int nparts) {
  const gelu_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->n, i, nparts, 16, &lo, &hi);
  if (lo >= hi) return;
  if (j->exact) gelu_exact_range(j, lo, hi);
  else gelu_tanh_range(j, lo, hi);
}

static void bwd_part(void *arg, int i, int nparts) {
  const gelu_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->n, i, nparts, 16, &lo, &hi);
  if (lo >= hi) return;
  if (j->exact) gelu_exact_grad_range(j, lo, hi);
  else gelu_tanh_grad_range(j, lo, hi);
}

static void run(lt_ctx *c, lt_pool_fn fn, gelu_job *j) {
  int parts = lt_pool_parts(c->num_threads, j->n * 3, INT64_C(1) << 16);
  if (parts > 1) lt_pool_run(fn, j, parts);
  else fn(j, 0, 1);
}

void lt_gelu_f32(lt_ctx *c, const float *x, float *y, int64_t n, int tanh_form) {
  gelu_job j = { x, NULL, y, n, !tanh_form };
  run(c, fwd_part, &j);
}

void lt_gelu_grad_f32(lt_ctx *c, const float *x, const float *g, float *r, int64_t n, int tanh_form) {
  gelu_job j = { x, g, r, n, !tanh_form };
  run(c, bwd_part, &j);
}

static int gelu_tanh_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *x = lt_op_contiguous(c, n->inputs[0]);
  lt_tensor *gc = x ? lt_op_contiguous(c, g) : NULL;
  lt_tensor *r = gc ? lt_tensor_new_like(c, x) : NULL;
  if (r) {
    gelu_job j = { lt_f32(x), lt_f32(gc), lt_f32(r), lt_numel(x), 0 };
    run(c, bwd_part, &j);
  }
  lt_tensor_release(x);
  lt_tensor_release(gc);
  gin[0] = r;
  return r ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_gelu_tanh(lt_ctx *c, lt_tensor *a) {
  if (lt_check_dtype(c, "gelu", "input", a, LT_F32)) return NULL;
  lt_tensor *x = lt_op_contiguous(c, a);
  lt_tensor *out = x ? lt_tensor_new_like(c, x) : NULL;
  if (out) {
    gelu_job j = { lt_f32(x), NULL, lt_f32(out), lt_numel(x), 0 };
    run(c, fwd_part, &j);
    lt_node *nd;
    if (lt_record(c, out, "gelu_tanh", gelu_tanh_backward, 1, &a, &nd)) {
      lt_tensor_release(out);
      out = NULL;
    }
  }
  lt_tensor_release(x);
  return out;
}
