/*
 * ops_activation.c — SiLU, ELU, Softplus, Mish, Hardtanh, Hardswish, Hardsigmoid (forward and backward side
 * by side, one kernel per kind over contiguous float32, split over lutra's pool as ops_gelu.c is: each element
 * is computed by the same code whatever the split), and PReLU (a learned slope per channel, with its gradient).
 * The formulas and the values at the kinks are PyTorch 1.13's (aten/src/ATen/native/cpu/Activation.cpp).
 */
#include <math.h>

#include "lt_activation.h"
#include "lt_errors.h"
#include "lt_ops.h"
#include "lt_pool.h"
#include "lt_simd.h"

static const char *const act_names[LT_AF_COUNT] = { "silu",     "elu",       "softplus",   "mish",
                                                    "hardtanh", "hardswish", "hardsigmoid" };
const char *lt_actfn_name(lt_actfn kind) { return act_names[kind]; }

typedef struct act_job {
  lt_actfn kind;
  const float *x, *g; /* input; incoming gradient (backward only) */
  float *out;
  float p0, p1;
  int64_t n;
} act_job;

/* log(1 + exp(v)) without overflow: for large v it is v (PyTorch's softplus threshold plays this role there) */
static inline float softplus1(float v) { return v > 20.0f ? v : log1pf(lt_expf(v)); }

LT_VECTOR_FN static void act_forward_range(const act_job *j, int64_t lo, int64_t hi) {
  const float *x = j->x;
  float *y = j->out, p0 = j->p0, p1 = j->p1;
  switch (j->kind) {
    case LT_AF_SILU:
      for (int64_t i = lo; i < hi; i++) y[i] = x[i] * lt_sigmoidf(x[i]);
      break;
    case LT_AF_ELU:
      for (int64_t i = lo; i < hi; i++) y[i] = x[i] > 0 ? x[i] : p0 * (lt_expf(x[i]) - 1.0f);
      break;
    case LT_AF_SOFTPLUS:
      for (int64_t i = lo; i < hi; i++) y[i] = x[i] * p0 > p1 ? x[i] : log1pf(lt_expf(x[i] * p0)) / p0;
      break;
    case LT_AF_MISH:
      for (int64_t i = lo; i < hi; i++) y[i] = x[i] * lt_tanhf(softplus1(x[i]));
      break;
    case LT_AF_HARDTANH:
      for (int64_t i = lo; i < hi; i++) y[i] = x[i] < p0 ? p0 : (x[i] > p1 ? p1 : x[i]);
      break;
    case LT_AF_HARDSWISH:
      for (int64_t i = lo; i < hi; i++) {
        float r = x[i] + 3.0f;
        r = r < 0 ? 0 : (r > 6.0f ? 6.0f : r);
        y[i] = x[i] * r / 6.0f;
      }
      break;
    case LT_AF_HARDSIGMOID:
      for (int64_t i = lo; i < hi; i++) {
        float r = x[i] + 3.0f;
        r = r < 0 ? 0 : (r > 6.0f ? 6.0f : r);
        y[i] = r / 6.0f;
      }
      break;
    case LT_AF_COUNT: break;
  }
}

/* dL/dx = g * dy/dx, from the saved input */
LT_VECTOR_FN static void act_backward_range(const act_job *j, int64_t lo, int64_t hi) {
  const float *x = j->x, *g = j->g;
  float *r = j->out, p0 = j->p0, p1 = j->p1;
  switch (j->kind) {
    case LT_AF_SILU: /* s (1 + x (1 - s)) */
      for (int64_t i = lo; i < hi; i++) {
        float s = lt_sigmoidf(x[i]);
        r[i] = g[i] * s * (1.0f + x[i] * (1.0f - s));
      }
      break;
    case LT_AF_ELU: /* alpha exp(x) below 0 */
      for (int64_t i = lo; i < hi; i++) r[i] = x[i] > 0 ? g[i] : g[i] * p0 * lt_expf(x[i]);
      break;
    case LT_AF_SOFTPLUS: /* sigmoid(beta x), as z / (z + 1) with z = exp(beta x) */
      for (int64_t i = lo; i < hi; i++) {
        float z = lt_expf(x[i] * p0);
        r[i] = x[i] * p0 > p1 ? g[i] : g[i] * z / (z + 1.0f);
      }
      break;
    case LT_AF_MISH: /* tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2) */
      for (int64_t i = lo; i < hi; i++) {
        float t = lt_tanhf(softplus1(x[i]));
        r[i] = g[i] * (t + x[i] * lt_sigmoidf(x[i]) * (1.0f - t * t));
      }
      break;
    case LT_AF_HARDTANH: /* 0 at and beyond the bounds, as PyTorch's hardtanh_backward */
      for (int64_t i = lo; i < hi; i++) r[i] = (x[i] <= p0 || x[i] >= p1) ? 0.0f : g[i];
      break;
    case LT_AF_HARDSWISH: /* 0 below -3, x/3 + 1/2 on [-3, 3), 1 from 3 (PyTorch's vectorised kernel; its scalar
                             tail alone takes x/3 + 1/2 at 3) */
      for (int64_t i = lo; i < hi; i++) r[i] = x[i] < -3.0f ? 0.0f : (x[i] < 3.0f ? g[i] * (x[i] / 3.0f + 0.5f) : g[i]);
      break;
    case LT_AF_HARDSIGMOID: /* 1/6 strictly inside (-3, 3) */
      for (int64_t i = lo; i < hi; i++) r[i] = (x[i] > -3.0f && x[i] < 3.0f) ? g[i] / 6.0f : 0.0f;
      break;
    case LT_AF_COUNT: break;
  }
}

static void fwd_part(void *arg, int i, int nparts) {
  const act_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->n, i, nparts, 16, &lo, &hi);
  if (lo < hi) act_forward_range(j, lo, hi);
}

static void bwd_part(void *arg, int i, int nparts) {
  const act_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->n, i, nparts, 16, &lo, &hi);
  if (lo < hi) act_backward_range(j, lo, hi);
}

/* the transcendental kinds cost a few exp-sized units per element; the clamps one */
static void run(lt_ctx *c, lt_pool_fn fn, act_job *j) {
  int cost = (j->kind == LT_AF_HARDTANH || j->kind == LT_AF_HARDSWISH || j->kind == LT_AF_HARDSIGMOID) ? 1 : 3;
  int parts = lt_pool_parts(c->num_threads, j->n * cost, INT64_C(1) << 16);
  if (parts > 1) lt_pool_run(fn, j, parts);
  else fn(j, 0, 1);
}

/* node: i[0] = kind, f[0..1] = p0, p1 */
static int act_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *x = lt_op_contiguous(c, n->inputs[0]);
  lt_tensor *gc = x ? lt_op_contiguous(c, g) : NULL;
  lt_tensor *r = gc ? lt_tensor_new_like(c, x) : NULL;
  if (r) {
    act_job j = { (lt_actfn)n->i[0], lt_f32(x), lt_f32(gc), lt_f32(r), (float)n->f[0], (float)n->f[1], lt_numel(x) };
    run(c, bwd_part, &j);
  }
  lt_tensor_release(x);
  lt_tensor_release(gc);
  gin[0] = r;
  return r ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_activation(lt_ctx *c, lt_actfn kind, lt_tensor *a, double p0, double p1) {
  if ((unsigned)kind >= LT_AF_COUNT) {
    lt_fail(c, "activation: unknown kind %d", (int)kind);
    return NULL;
  }
  const char *name = act_names[kind];
  if (lt_check_dtype(c, name, "input", a, LT_F32)) return NULL;
  if (kind == LT_AF_HARDTANH && !(p0 <= p1)) {
    lt_fail(c, "hardtanh: min_val %g must be less than or equal to max_val %g", p0, p1);
    return NULL;
  }
  if (kind == LT_AF_SOFTPLUS && p0 == 0) {
    lt_fail(c, "softplus: beta must not be 0");
    return NULL;
  }
  lt_tensor *x = lt_op_contiguous(c, a);
  lt_tensor *out = x ? lt_tensor_new_like(c, x) : NULL;
  if (out) {
    act_job j = { kind, lt_f32(x), NULL, lt_f32(out), (float)p0, (float)p1, lt_numel(x) };
    run(c, fwd_part, &j);
    lt_node *nd;
    if (lt_record(c, out, name, act_backward, 1, &a, &nd)) {
      lt_tensor_release(out);
      out = NULL;
    } else if (nd) {
      nd->i[0] = kind;
      nd->f[0] = p0;
      nd->f[1] = p1;
    }
  }
  lt_tensor_release(x);
  return out;
}

/* ---- PReLU ------------------------------------------------------------------------------------------ */

/* x viewed as [outer, C, inner] (C = 1 when one slope serves every element) */
static void prelu_layout(const lt_tensor *x, int64_t nw, int64_t *outer, int64_t *inner) {
  int64_t n = lt_numel(x);
  if (nw == 1) {
    *outer = 1;
    *inner = n;
    return;
  }
  *inner = 1;
  for (int d = 2; d < x->ndim; d++) *inner *= x->shape[d];
  *outer = *inner > 0 && nw > 0 ? n / (nw * *inner) : 0; /* 0 channels (weight [0]): nothing to do, no division */
}

static int prelu_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *x = lt_op_contiguous(c, n->inputs[0]);
  lt_tensor *w = x ? lt_op_contiguous(c, n->inputs[1]) : NULL;
  lt_tensor *gc = w ? lt_op_contiguous(c, g) : NULL;
  lt_tensor *gx = gc ? lt_tensor_new_like(c, x) : NULL;
  lt_tensor *gw = gx ? lt_tensor_new_like(c, w) : NULL;
  if (gw) {
    int64_t nw = lt_numel(w), outer, inner;
    prelu_layout(x, nw, &outer, &inner);
    const float *px = lt_f32(x), *pw = lt_f32(w), *pg = lt_f32(gc);
    float *pgx = lt_f32(gx), *pgw = lt_f32(gw);
    for (int64_t ch = 0; ch < nw; ch++) {
      double acc = 0; /* dL/dw[ch] = sum of x g where x <= 0 */
      float s = pw[ch];
      for (int64_t o = 0; o < outer; o++) {
        int64_t base = (o * nw + ch) * inner;
        for (int64_t k = 0; k < inner; k++) {
          float v = px[base + k], gv = pg[base + k];
          pgx[base + k] = v > 0 ? gv : s * gv;
          if (v <= 0) acc += (double)v * gv;
        }
      }
      pgw[ch] = (float)acc;
    }
  }
  lt_tensor_release(x);
  lt_tensor_release(w);
  lt_tensor_release(gc);
  if (!gw) lt_tensor_release(gx);
  gin[0] = gw ? gx : NULL;
  gin[1] = gw;
  return gw ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_prelu(lt_ctx *c, lt_tensor *a, lt_tensor *w) {
  if (lt_check_dtype(c, "prelu", "input", a, LT_F32) || lt_check_dtype(c, "prelu", "weight", w, LT_F32)) return NULL;
  int64_t nw = lt_numel(w), channels = a->ndim >= 2 ? a->shape[1] : 1;
  if (w->ndim > 1 || (nw != 1 && nw != channels)) {
    char b1[128], b2[128];
    lt_fail(c, "prelu: weight %s must hold 1 slope or one per channel (dim 2 of the input %s: %lld)",
            lt_shape_str(w, b2, sizeof b2), lt_shape_str(a, b1, sizeof b1), (long long)channels);
    return NULL;
  }
  lt_tensor *x = lt_op_contiguous(c, a);
  lt_tensor *wc = x ? lt_op_contiguous(c, w) : NULL;
  lt_tensor *out = wc ? lt_tensor_new_like(c, x) : NULL;
  if (out) {
    int64_t outer, inner;
    prelu_layout(x, nw, &outer, &inner);
    const float *px = lt_f32(x), *pw = lt_f32(wc);
    float *py = lt_f32(out);
    for (int64_t o = 0; o < outer; o++)
      for (int64_t ch = 0; ch < nw; ch++) {
        int64_t base = (o * nw + ch) * inner;
        float s = pw[ch];
        for (int64_t k = 0; k < inner; k++) py[base + k] = px[base + k] > 0 ? px[base + k] : s * px[base + k];
      }
    lt_tensor *ins[2] = { a, w };
    lt_node *nd;
    if (lt_record(c, out, "prelu", prelu_backward, 2, ins, &nd)) {
      lt_tensor_release(out);
      out = NULL;
    }
  }
  lt_tensor_release(x);
  lt_tensor_release(wc);
  return out;
}
