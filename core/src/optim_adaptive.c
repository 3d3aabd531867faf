/*
 * optim_adaptive.c — the fused steps of the adaptive-rate optimizers Adagrad, Adadelta, Adamax, NAdam, RAdam,
 * and of ASGD (PyTorch 1.13's single-tensor rules; d = grad (negated under maximize) + weight_decay * p):
 *
 *   Adagrad:  sum += d^2; p -= lr/(1 + (step-1)*lr_decay) * d / (sqrt(sum) + eps)
 *   Adadelta: sq = rho*sq + (1-rho)*d^2; delta = sqrt(acc + eps)/sqrt(sq + eps) * d;
 *             acc = rho*acc + (1-rho)*delta^2; p -= lr*delta
 *   Adamax:   m = b1*m + (1-b1)*d; u = max(b2*u, |d| + eps); p -= lr/(1-b1^step) * m/u
 *   NAdam:    mu_t = b1*(1 - 0.5*0.96^(step*momentum_decay)); mu_product *= mu_t; m, v as Adam;
 *             denom = sqrt(v/bc2) + eps; p -= lr*(1-mu_t)/(1-mu_product) * d/denom
 *                                      + lr*mu_{t+1}/(1-mu_product*mu_{t+1}) * m/denom
 *   RAdam:    m, v as Adam; rho_t = rho_inf - 2*step*b2^step/bc2; rho_t > 5: p -= m/bc1*lr*sqrt(bc2)/(sqrt(v)+eps)*rect
 *             else p -= m/bc1*lr
 *   ASGD:     p = p*(1 - lambd*eta) - eta*d; ax = mu == 1 ? p : ax + (p - ax)*mu;
 *             eta = lr/(1 + lambd*lr*step)^alpha; mu = 1/max(1, step - t0)
 *
 * The per-step scalars are computed in double, as PyTorch's Python code does, and enter the loop once, rounded
 * to the parameter's dtype; NAdam's mu_product and ASGD's eta and mu are float32 values whatever the parameter's
 * dtype (PyTorch 1.13 keeps them in 0-dim tensors of the default dtype). Each rule is one source for float32 and
 * float64 parameters (ADAPTIVE_KERNELS); the state buffers are in the parameter's dtype.
 * The defaults, hyper-parameter names and checks of these kinds live here too.
 */
#include <math.h>
#include <string.h>

#include "lt_errors.h"
#include "lt_ops.h"
#include "optim_internal.h"

void lt_optim_adaptive_defaults(lt_optim_kind k, lt_optim_hparams *h) {
  switch (k) {
    case LT_OPTIM_ADAGRAD:
      h->lr = 1e-2;
      h->eps = 1e-10;
      break;
    case LT_OPTIM_ADADELTA:
      h->lr = 1.0;
      h->rho = 0.9;
      h->eps = 1e-6;
      break;
    case LT_OPTIM_ADAMAX: h->lr = 2e-3; break;
    case LT_OPTIM_NADAM:
      h->lr = 2e-3;
      h->momentum_decay = 4e-3;
      break;
    case LT_OPTIM_RADAM: h->lr = 1e-3; break;
    case LT_OPTIM_ASGD:
      h->lr = 1e-2;
      h->lambd = 1e-4;
      h->alpha = 0.75;
      h->t0 = 1e6;
      break;
    default: break;
  }
}

const char *const *lt_optim_adaptive_hparam_names(lt_optim_kind k) {
  static const char *const adagrad[] = { "lr",       "lr_decay", "weight_decay", "initial_accumulator_value", "eps",
                                         "maximize", NULL };
  static const char *const adadelta[] = { "lr", "rho", "eps", "weight_decay", "maximize", NULL };
  static const char *const adamax[] = { "lr", "betas", "eps", "weight_decay", "maximize", NULL };
  static const char *const nadam[] = { "lr", "betas", "eps", "weight_decay", "momentum_decay", NULL };
  static const char *const radam[] = { "lr", "betas", "eps", "weight_decay", NULL };
  static const char *const asgd[] = { "lr", "lambd", "alpha", "t0", "weight_decay", "maximize", NULL };
  switch (k) {
    case LT_OPTIM_ADAGRAD: return adagrad;
    case LT_OPTIM_ADADELTA: return adadelta;
    case LT_OPTIM_ADAMAX: return adamax;
    case LT_OPTIM_NADAM: return nadam;
    case LT_OPTIM_RADAM: return radam;
    default: return asgd;
  }
}

/* Checks beyond the shared ones of lt_optim_check_hparams (lr, weight_decay, eps, betas). */
int lt_optim_adaptive_check_hparams(lt_ctx *c, lt_optim_kind k, const lt_optim_hparams *h) {
  const char *n = lt_optim_kind_name(k);
  if (k == LT_OPTIM_ADAGRAD && !(h->lr_decay >= 0))
    return lt_fail(c, "%s: invalid lr_decay value: %g (lr_decay must be >= 0)", n, h->lr_decay);
  if (k == LT_OPTIM_ADAGRAD && !(h->initial_accumulator_value >= 0))
    return lt_fail(c, "%s: invalid initial_accumulator_value value: %g (initial_accumulator_value must be >= 0)", n,
                   h->initial_accumulator_value);
  if (k == LT_OPTIM_ADADELTA && !(h->rho >= 0 && h->rho <= 1))
    return lt_fail(c, "%s: invalid rho value: %g (rho must be in [0, 1])", n, h->rho);
  if (k == LT_OPTIM_NADAM && !(h->momentum_decay >= 0))
    return lt_fail(c, "%s: invalid momentum_decay value: %g (momentum_decay must be >= 0)", n, h->momentum_decay);
  return LT_OK;
}

/* ---- kernels over elements [lo, hi) ------------------------------------------------------------------- */

/* p, g and the kind's two state buffers a, b (b may be NULL) are arrays of the parameter's dtype; c1..c3 are the
 * per-step scalars (see each kernel), computed in double and rounded to the dtype once in the kernel. */
typedef struct more_args {
  const lt_optim_hparams *h;
  void *p, *a, *b;
  const void *g;
  double c1, c2, c3;
} more_args;

/* Each rule is written once (ADAPTIVE_KERNELS) and made for float32 (sqrtf, fabsf) and float64 (sqrt, fabs): the
 * arithmetic runs in the parameter's dtype, as PyTorch's does. */
// clang-format off
#define ADAPTIVE_KERNELS(SFX, T, SQRT, FABS)                                                        \
  /* a = sum; c1 = -clr */                                                                          \
  OPTIM_VECTOR_FN                                                                                   \
  static void adagrad_range##SFX(void *arg, int64_t lo, int64_t hi) {                               \
    const more_args *x = arg;                                                                       \
    const T sg = x->h->maximize ? (T)-1.0 : (T)1.0, wd = (T)x->h->weight_decay, eps = (T)x->h->eps, \
            nclr = (T)x->c1;                                                                        \
    T *restrict p = x->p, *restrict sum = x->a;                                                     \
    const T *restrict g = x->g;                                                                     \
    for (int64_t i = lo; i < hi; i++) {                                                             \
      T d = sg * g[i] + wd * p[i];                                                                  \
      T s = sum[i] + d * d;                                                                         \
      sum[i] = s;                                                                                   \
      p[i] += nclr * d / (SQRT(s) + eps);                                                           \
    }                                                                                               \
  }                                                                                                 \
                                                                                                    \
  /* a = square_avg, b = acc_delta */                                                               \
  OPTIM_VECTOR_FN                                                                                   \
  static void adadelta_range##SFX(void *arg, int64_t lo, int64_t hi) {                              \
    const more_args *x = arg;                                                                       \
    const T sg = x->h->maximize ? (T)-1.0 : (T)1.0, wd = (T)x->h->weight_decay, eps = (T)x->h->eps, \
            rho = (T)x->h->rho, rho1 = (T)(1.0 - x->h->rho), lr = (T)x->h->lr;                      \
    T *restrict p = x->p, *restrict sq = x->a, *restrict acc = x->b;                                \
    const T *restrict g = x->g;                                                                     \
    for (int64_t i = lo; i < hi; i++) {                                                             \
      T d = sg * g[i] + wd * p[i];                                                                  \
      T s = sq[i] * rho + rho1 * d * d;                                                             \
      sq[i] = s;                                                                                    \
      T delta = SQRT(acc[i] + eps) / SQRT(s + eps) * d;                                             \
      acc[i] = acc[i] * rho + rho1 * delta * delta;                                                 \
      p[i] -= lr * delta;                                                                           \
    }                                                                                               \
  }                                                                                                 \
                                                                                                    \
  /* a = exp_avg, b = exp_inf; c1 = -lr/bc1 */                                                      \
  OPTIM_VECTOR_FN                                                                                   \
  static void adamax_range##SFX(void *arg, int64_t lo, int64_t hi) {                                \
    const more_args *x = arg;                                                                       \
    const T sg = x->h->maximize ? (T)-1.0 : (T)1.0, wd = (T)x->h->weight_decay, eps = (T)x->h->eps, \
            b1 = (T)x->h->beta1, c1 = (T)(1.0 - x->h->beta1), b2 = (T)x->h->beta2, nclr = (T)x->c1; \
    T *restrict p = x->p, *restrict m = x->a, *restrict u = x->b;                                   \
    const T *restrict g = x->g;                                                                     \
    for (int64_t i = lo; i < hi; i++) {                                                             \
      T d = sg * g[i] + wd * p[i];                                                                  \
      T mi = m[i] * b1 + c1 * d;                                                                    \
      T ui = u[i] * b2, ad = FABS(d) + eps;                                                         \
      ui = ui > ad ? ui : ad;                                                                       \
      m[i] = mi;                                                                                    \
      u[i] = ui;                                                                                    \
      p[i] += nclr * mi / ui;                                                                       \
    }                                                                                               \
  }                                                                                                 \
                                                                                                    \
  /* a = exp_avg, b = exp_avg_sq; c1 = bias_correction2, c2 = -lr*(1-mu)/(1-mu_product),           \
   * c3 = -lr*mu_next/(1-mu_product_next). The moments are Adam's (NAdam has no maximize in 1.13). */ \
  OPTIM_VECTOR_FN                                                                                   \
  static void nadam_range##SFX(void *arg, int64_t lo, int64_t hi) {                                 \
    const more_args *x = arg;                                                                       \
    const T wd = (T)x->h->weight_decay, eps = (T)x->h->eps, b1 = (T)x->h->beta1,                    \
            k1 = (T)(1.0 - x->h->beta1), b2 = (T)x->h->beta2, k2 = (T)(1.0 - x->h->beta2);          \
    const T bc2 = (T)x->c1, cg = (T)x->c2, cm = (T)x->c3;                                           \
    T *restrict p = x->p, *restrict m = x->a, *restrict v = x->b;                                   \
    const T *restrict g = x->g;                                                                     \
    for (int64_t i = lo; i < hi; i++) {                                                             \
      T d = g[i] + wd * p[i];                                                                       \
      T mi = m[i] * b1 + k1 * d, vi = v[i] * b2 + k2 * d * d;                                       \
      m[i] = mi;                                                                                    \
      v[i] = vi;                                                                                    \
      T denom = SQRT(vi / bc2) + eps;                                                               \
      T pi = p[i] + cg * d / denom;                                                                 \
      p[i] = pi + cm * mi / denom;                                                                  \
    }                                                                                               \
  }                                                                                                 \
                                                                                                    \
  /* a = exp_avg, b = exp_avg_sq; c1 = bias_correction1, c2 = sqrt(bias_correction2), c3 = rect (0: no \
   * rectification, the SMA is too short). `rectify` is a constant in each call: two branch-free loops. */ \
  static inline __attribute__((always_inline)) void radam_loop##SFX(const more_args *x, int64_t lo, int64_t hi, \
                                                                    const int rectify) {            \
    const T wd = (T)x->h->weight_decay, eps = (T)x->h->eps, b1 = (T)x->h->beta1,                    \
            k1 = (T)(1.0 - x->h->beta1), b2 = (T)x->h->beta2, k2 = (T)(1.0 - x->h->beta2);          \
    const T lr = (T)x->h->lr, bc1 = (T)x->c1, sbc2 = (T)x->c2, rect = (T)x->c3;                     \
    T *restrict p = x->p, *restrict m = x->a, *restrict v = x->b;                                   \
    const T *restrict g = x->g;                                                                     \
    for (int64_t i = lo; i < hi; i++) {                                                             \
      T d = g[i] + wd * p[i];                                                                       \
      T mi = m[i] * b1 + k1 * d, vi = v[i] * b2 + k2 * d * d;                                       \
      m[i] = mi;                                                                                    \
      v[i] = vi;                                                                                    \
      if (rectify) p[i] -= mi / bc1 * lr * (sbc2 / (SQRT(vi) + eps)) * rect;                        \
      else p[i] -= mi / bc1 * lr;                                                                   \
    }                                                                                               \
  }                                                                                                 \
                                                                                                    \
  OPTIM_VECTOR_FN                                                                                   \
  static void radam_range##SFX(void *arg, int64_t lo, int64_t hi) {                                 \
    const more_args *x = arg;                                                                       \
    if (x->c3 > 0) radam_loop##SFX(x, lo, hi, 1);                                                   \
    else radam_loop##SFX(x, lo, hi, 0);                                                             \
  }                                                                                                 \
                                                                                                    \
  /* a = ax; c1 = 1 - lambd*eta, c2 = eta, c3 = mu */                                               \
  OPTIM_VECTOR_FN                                                                                   \
  static void asgd_range##SFX(void *arg, int64_t lo, int64_t hi) {                                  \
    const more_args *x = arg;                                                                       \
    const T sg = x->h->maximize ? (T)-1.0 : (T)1.0, wd = (T)x->h->weight_decay, decay = (T)x->c1,   \
            eta = (T)x->c2, mu = (T)x->c3;                                                          \
    T *restrict p = x->p, *restrict ax = x->a;                                                      \
    const T *restrict g = x->g;                                                                     \
    for (int64_t i = lo; i < hi; i++) {                                                             \
      T d = sg * g[i] + wd * p[i];                                                                  \
      T pi = p[i] * decay - eta * d;                                                                \
      p[i] = pi;                                                                                    \
      ax[i] = mu != (T)1.0 ? ax[i] + (pi - ax[i]) * mu : pi;                                        \
    }                                                                                               \
  }
// clang-format on
ADAPTIVE_KERNELS(_f32, float, sqrtf, fabsf)
ADAPTIVE_KERNELS(_f64, double, sqrt, fabs)

/* v rounded to float32 (the value of PyTorch's 0-dim float tensors). Through a volatile: GCC 12 at -O3 drops the
 * pair of conversions in `s->scalar[a] = (float)x; s->scalar[b] = (float)y;` when it vectorises the two stores
 * (measured: ASGD's eta kept unrounded, float64 parameters off torch's by 1e-9 from step 2). */
static double as_f32(double v) {
  volatile float f = (float)v;
  return f;
}

/* ---- the step ------------------------------------------------------------------------------------------ */

static int ensure(lt_ctx *c, lt_optim_state *s, lt_optim_buf b, const lt_tensor *like, double fill) {
  if (s->buf[b]) return LT_OK;
  s->buf[b] = fill == 0 ? lt_tensor_zeros(c, like->dtype, like->ndim, like->shape)
                        : lt_op_full(c, like->dtype, like->ndim, like->shape, fill);
  return s->buf[b] ? LT_OK : LT_ERR;
}

int lt_optim_adaptive_step(lt_ctx *c, lt_optim_kind k, const lt_optim_hparams *h, lt_optim_state *s,
                           const lt_tensor *like, void *p, const void *g, int64_t n) {
  more_args x = { .h = h, .p = p, .g = g };
  lt_optim_range_fn fn = NULL;
  lt_optim_buf ba = LT_OPTIM_EXP_AVG, bb = LT_OPTIM_EXP_AVG_SQ;
  double fill = 0;
  switch (k) {
    case LT_OPTIM_ADAGRAD:
      ba = LT_OPTIM_SUM;
      bb = LT_OPTIM_NBUFS;
      fill = h->initial_accumulator_value;
      break;
    case LT_OPTIM_ADADELTA:
      ba = LT_OPTIM_SQUARE_AVG;
      bb = LT_OPTIM_ACC_DELTA;
      break;
    case LT_OPTIM_ADAMAX: bb = LT_OPTIM_EXP_INF; break;
    case LT_OPTIM_NADAM:
    case LT_OPTIM_RADAM: break;
    case LT_OPTIM_ASGD:
      ba = LT_OPTIM_AX;
      bb = LT_OPTIM_NBUFS;
      break;
    default: return lt_fail(c, "optimizer: unknown kind %d", (int)k);
  }
  if (ensure(c, s, ba, like, fill) || (bb < LT_OPTIM_NBUFS && ensure(c, s, bb, like, 0))) return LT_ERR;
  if (!s->initialized) { /* PyTorch's initial scalar state */
    s->scalar[LT_OPTIM_MU_PRODUCT] = 1.0;
    s->scalar[LT_OPTIM_ETA] = as_f32(h->lr);
    s->scalar[LT_OPTIM_MU] = 1.0;
  }
  const int f64 = like->dtype == LT_F64;
  x.a = f64 ? (void *)lt_f64(s->buf[ba]) : (void *)lt_f32(s->buf[ba]);
  x.b = bb == LT_OPTIM_NBUFS ? NULL : f64 ? (void *)lt_f64(s->buf[bb]) : (void *)lt_f32(s->buf[bb]);
  s->step += 1;
  const double step = s->step, b1 = h->beta1, b2 = h->beta2;
  switch (k) {
    case LT_OPTIM_ADAGRAD:
      x.c1 = -(h->lr / (1 + (step - 1) * h->lr_decay));
      fn = f64 ? adagrad_range_f64 : adagrad_range_f32;
      break;
    case LT_OPTIM_ADADELTA: fn = f64 ? adadelta_range_f64 : adadelta_range_f32; break;
    case LT_OPTIM_ADAMAX:
      x.c1 = -(h->lr / (1 - pow(b1, step)));
      fn = f64 ? adamax_range_f64 : adamax_range_f32;
      break;
    case LT_OPTIM_NADAM: {
      double mu = b1 * (1. - 0.5 * pow(0.96, step * h->momentum_decay));
      double mu_next = b1 * (1. - 0.5 * pow(0.96, (step + 1) * h->momentum_decay));
      float mp = (float)s->scalar[LT_OPTIM_MU_PRODUCT] * (float)mu; /* float32, as PyTorch's 0-dim tensor */
      float mp_next = mp * (float)mu * (float)mu_next;
      s->scalar[LT_OPTIM_MU_PRODUCT] = mp;
      x.c1 = 1 - pow(b2, step);
      x.c2 = -h->lr * (1. - mu) / (1. - (double)mp);
      x.c3 = -h->lr * mu_next / (1. - (double)mp_next);
      fn = f64 ? nadam_range_f64 : nadam_range_f32;
      break;
    }
    case LT_OPTIM_RADAM: {
      double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
      double rho_inf = 2 / (1 - b2) - 1;
      double rho_t = rho_inf - 2 * step * pow(b2, step) / bc2;
      x.c1 = bc1;
      x.c2 = sqrt(bc2);
      x.c3 = rho_t > 5. ? sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) : 0;
      fn = f64 ? radam_range_f64 : radam_range_f32;
      break;
    }
    default: { /* ASGD */
      double eta = s->scalar[LT_OPTIM_ETA];
      x.c1 = 1 - h->lambd * eta;
      x.c2 = eta;
      x.c3 = s->scalar[LT_OPTIM_MU];
      s->scalar[LT_OPTIM_ETA] = as_f32(h->lr / pow(1 + h->lambd * h->lr * step, h->alpha));
      s->scalar[LT_OPTIM_MU] = as_f32(1 / fmax(1, step - h->t0));
      fn = f64 ? asgd_range_f64 : asgd_range_f32;
      break;
    }
  }
  lt_optim_parallel(c, fn, &x, n);
  return LT_OK;
}
