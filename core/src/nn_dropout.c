/*
 * nn_dropout.c — inverted dropout: y = x * mask, mask in {0, 1/(1-p)} drawn from the context's RNG
 * (so lt.manual_seed reproduces it); backward multiplies by the same saved mask. float32 or float64 (the mask and
 * the output in the input's dtype, the draws the same for both): the loops are written once over the element
 * type (DROPOUT_KERNELS).
 */
#include "lt_check.h"
#include "lt_errors.h"
#include "lt_nn.h"

static int dropout_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  gin[0] = lt_op_binary(c, LT_MUL, gout, n->saved[0]);
  return gin[0] ? LT_OK : LT_ERR;
}

/* mask_S fills n mask values (0 or keep) from the context's RNG, 24-bit uniforms two per draw; apply_S: y = x * m */
#define DROPOUT_KERNELS(S, T)                                               \
  static void mask_##S(lt_ctx *c, T *pm, int64_t n, double p) {             \
    const T keep = p >= 1 ? (T)0 : (T)(1.0 / (1.0 - p));                    \
    const uint64_t thresh = (uint64_t)(p * 16777216.0);                     \
    int64_t i = 0;                                                          \
    for (; i + 1 < n; i += 2) {                                             \
      uint64_t r = lt_rng_next(&c->rng);                                    \
      pm[i] = (r >> 40) < thresh ? (T)0 : keep;                             \
      pm[i + 1] = ((r >> 16) & 0xffffff) < thresh ? (T)0 : keep;            \
    }                                                                       \
    if (i < n) pm[i] = (lt_rng_next(&c->rng) >> 40) < thresh ? (T)0 : keep; \
  }                                                                         \
  static void apply_##S(const T *px, const T *pm, T *po, int64_t n) {       \
    for (int64_t j = 0; j < n; j++) po[j] = px[j] * pm[j];                  \
  }
DROPOUT_KERNELS(f, float)
DROPOUT_KERNELS(d, double)

lt_tensor *lt_nn_dropout(lt_ctx *c, lt_tensor *x, double p, int training) {
  if (lt_check_float(c, "dropout", "input", x)) return NULL;
  if (!(p >= 0 && p <= 1)) {
    lt_fail(c, "dropout: probability has to be between 0 and 1, got %g", p);
    return NULL;
  }
  if (!training || p == 0) return lt_tensor_retain(x);
  const int f64 = x->dtype == LT_F64;
  lt_tensor *mask = lt_tensor_new(c, x->dtype, x->ndim, x->shape);
  if (!mask) return NULL;
  int64_t n = lt_numel(mask);
  if (f64) mask_d(c, lt_f64(mask), n, p);
  else mask_f(c, lt_f32(mask), n, p);
  lt_tensor *xc = lt_op_contiguous(c, x);
  lt_tensor *out = xc ? lt_tensor_new(c, x->dtype, x->ndim, x->shape) : NULL;
  if (!out) {
    lt_tensor_release(xc);
    lt_tensor_release(mask);
    return NULL;
  }
  if (f64) apply_d(lt_f64(xc), lt_f64(mask), lt_f64(out), n);
  else apply_f(lt_f32(xc), lt_f32(mask), lt_f32(out), n);
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
