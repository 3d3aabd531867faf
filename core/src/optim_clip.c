/*
 * optim_clip.c — the default gradient clipping over a set of parameters' grads (Lightning's clip_gradients,
 * run by the fit loop when gradient_clip_val is set and the model defines no configure_gradient_clipping, and
 * by core._clip_gradients): by value, or by their total 2-norm as torch.nn.utils.clip_grad_norm_. Grads may be
 * float32 or float64 (each keeps its dtype; the norm is summed in double).
 */
#include <math.h>

#include "lt_ops.h"
#include "lt_optim.h"

int lt_clip_gradients(lt_ctx *c, int n, lt_tensor *const *params, double val, int algo) {
  if (!(val > 0)) return LT_OK;
  if (algo == LT_CLIP_VALUE) {
    for (int i = 0; i < n; i++)
      if (params[i]->grad && lt_op_clamp_(c, params[i]->grad, -val, val)) return LT_ERR;
    return LT_OK;
  }
  double total = 0; /* torch.nn.utils.clip_grad_norm_ with norm_type 2 */
  for (int i = 0; i < n; i++) {
    lt_tensor *g = params[i]->grad;
    if (!g) continue;
    int64_t m = lt_numel(g);
    if (lt_is_contiguous(g) && g->dtype == LT_F64) {
      const double *p = lt_f64(g);
      for (int64_t j = 0; j < m; j++) total += p[j] * p[j];
    } else if (lt_is_contiguous(g) && g->dtype == LT_F32) {
      const float *p = lt_f32(g);
      for (int64_t j = 0; j < m; j++) total += (double)p[j] * p[j];
    } else {
      for (int64_t j = 0; j < m; j++) {
        double v = lt_get_flat(g, j);
        total += v * v;
      }
    }
  }
  double norm = sqrt(total);
  double coef = val / (norm + 1e-6);
  if (coef >= 1.0) return LT_OK;
  for (int i = 0; i < n; i++) {
    lt_tensor *g = params[i]->grad;
    if (g && lt_op_binary_scalar_(c, LT_MUL, g, coef)) return LT_ERR; /* float32 grads: coef rounded, as torch's */
  }
  return LT_OK;
}
