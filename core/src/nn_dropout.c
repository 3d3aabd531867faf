/*
 * nn_dropout.c — inverted dropout: y = x * mask, mask in {0, 1/(1-p)} drawn from the context's RNG
 * (so lt.manual_seed reproduces it); backward multiplies by the same saved mask.
 */
#include "lt_errors.h"
#include "lt_nn.h"

static int dropout_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  gin[0] = lt_op_binary(c, LT_MUL, gout, n->saved[0]);
  return gin[0] ? LT_OK : LT_ERR;
}

lt_tensor *lt_nn_dropout(lt_ctx *c, lt_tensor *x, double p, int training) {
  if (lt_check_dtype(c, "dropout", "input", x, LT_F32)) return NULL;
  if (!(p >= 0 && p <= 1)) {
    lt_fail(c, "dropout: probability has to be between 0 and 1, got %g", p);
    return NULL;
  }
  if (!training || p == 0) return lt_tensor_retain(x);
  lt_tensor *mask = lt_tensor_new(c, LT_F32, x->ndim, x->shape);
  if (!mask) return NULL;
  float *pm = lt_f32(mask);
  const float keep = p >= 1 ? 0.0f : (float)(1.0 / (1.0 - p));
  /* 24-bit uniforms, two per RNG draw */
  const uint64_t thresh = (uint64_t)(p * 16777216.0);
  int64_t n = lt_numel(mask), i = 0;
  for (; i + 1 < n; i += 2) {
    uint64_t r = lt_rng_next(&c->rng);
    pm[i] = (r >> 40) < thresh ? 0.0f : keep;
    pm[i + 1] = ((r >> 16) & 0xffffff) < thresh ? 0.0f : keep;
  }
  if (i < n) pm[i] = (lt_rng_next(&c->rng) >> 40) < thresh ? 0.0f : keep;
  lt_tensor *xc = lt_op_contiguous(c, x);
  lt_tensor *out = xc ? lt_tensor_new(c, LT_F32, x->ndim, x->shape) : NULL;
  if (!out) {
    lt_tensor_release(xc);
    lt_tensor_release(mask);
    return NULL;
  }
  const float *px = lt_f32(xc);
  float *po = lt_f32(out);
  for (int64_t j = 0; j < n; j++) po[j] = px[j] * pm[j];
  lt_tensor_release(xc);
  lt_node *nd;
  if (lt_record(c, out, "dropout", dropout_backward, 1, &x, &nd)) {
    lt_tensor_release(out);
    lt_tensor_release(mask);
    return NULL;
  }
  if (nd) {
    nd->reads = 0; /* the saved mask */
    lt_node_save(nd, 0, mask);
  }
  lt_tensor_release(mask);
  return out;
}
