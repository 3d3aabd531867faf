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
 * The per-step scalars are computed in double, as PyTorch's Python code does, and enter the float32 loop
 * once; NAdam's mu_product and ASGD's eta and mu are float32 values (0-dim float tensors in PyTorch).
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

typedef struct more_args {
  const lt_optim_hparams *h;
  float *p, *a, *b; /* a, b: the kind's two state buffers (b may be NULL) */
  const float *g;
  float c1, c2, c3; /* per-step scalars (see each kernel) */
} more_args;

#define SIGN(h) ((h)->maximize ? -1.0f : 1.0f)

/* a = sum; c1 = -clr */
OPTIM_VECTOR_FN
static void adagrad_range(void *arg, int64_t lo, int64_t hi) {
  const more_args *x = arg;
  const float sg = SIGN(x->h), wd = (float)x->h->weight_decay, eps = (float)x->h->eps, nclr = x->c1;
  float *restrict p = x->p, *restrict sum = x->a;
  const float *restrict g = x->g;
  for (int64_t i = lo; i < hi; i++) {
    float d = sg * g[i] + wd * p[i];
    float s = sum[i] + d * d;
    sum[i] = s;
    p[i] += nclr * d / (sqrtf(s) + eps);
  }
}

/* a = square_avg, b = acc_delta */
OPTIM_VECTOR_FN
static void adadelta_range(void *arg, int64_t lo, int64_t hi) {
  const more_args *x = arg;
  const float sg = SIGN(x->h), wd = (float)x->h->weight_decay, eps = (float)x->h->eps, rho = (float)x->h->rho,
              rho1 = (float)(1.0 - x->h->rho), lr = (float)x->h->lr;
  float *restrict p = x->p, *restrict sq = x->a, *restrict acc = x->b;
  const float *restrict g = x->g;
  for (int64_t i = lo; i < hi; i++) {
    float d = sg * g[i] + wd * p[i];
    float s = sq[i] * rho + rho1 * d * d;
    sq[i] = s;
    float delta = sqrtf(acc[i] + eps) / sqrtf(s + eps) * d;
    acc[i] = acc[i] * rho + rho1 * delta * delta;
    p[i] -= lr * delta;
  }
}

/* a = exp_avg, b = exp_inf; c1 = -lr/bc1 */
OPTIM_VECTOR_FN
static void adamax_range(void *arg, int64_t lo, int64_t hi) {
  const more_args *x = arg;
  const float sg = SIGN(x->h), wd = (float)x->h->weight_decay, eps = (float)x->h->eps, b1 = (float)x->h->beta1,
              c1 = (float)(1.0 - x->h->beta1), b2 = (float)x->h->beta2, nclr = x->c1;
  float *restrict p = x->p, *restrict m = x->a, *restrict u = x->b;
  const float *restrict g = x->g;
  for (int64_t i = lo; i < hi; i++) {
    float d = sg * g[i] + wd * p[i];
    float mi = m[i] * b1 + c1 * d;
    float ui = u[i] * b2, ad = fabsf(d) + eps;
    ui = ui > ad ? ui : ad;
    m[i] = mi;
    u[i] = ui;
    p[i] += nclr * mi / ui;
  }
}

/* Adam's moment updates, shared by NAdam and RAdam (neither has maximize in PyTorch 1.13):
 * d = g + wd*p; m = b1*m + (1-b1)*d; v = b2*v + (1-b2)*d^2 */
typedef struct moments {
  float wd, eps, b1, k1, b2, k2;
} moments;

static inline moments moments_of(const lt_optim_hparams *h) {
  return (moments){ (float)h->weight_decay,  (float)h->eps,   (float)h->beta1,
                    (float)(1.0 - h->beta1), (float)h->beta2, (float)(1.0 - h->beta2) };
}

static inline __attribute__((always_inline)) float moments_step(const moments *k, float g, float p, float *m,
                                                                float *v) {
  float d = g + k->wd * p;
  *m = *m * k->b1 + k->k1 * d;
  *v = *v * k->b2 + k->k2 * d * d;
  return d;
}

/* a = exp_avg, b = exp_avg_sq; c1 = bias_correction2, c2 = -lr*(1-mu)/(1-mu_product),
 * c3 = -lr*mu_next/(1-mu_product_next) */
OPTIM_VECTOR_FN
static void nadam_range(void *arg, int64_t lo, int64_t hi) {
  const more_args *x = arg;
  const moments k = moments_of(x->h);
  const float eps = k.eps, bc2 = x->c1, cg = x->c2, cm = x->c3;
  float *restrict p = x->p, *restrict m = x->a, *restrict v = x->b;
  const float *restrict g = x->g;
  for (int64_t i = lo; i < hi; i++) {
    float d = moments_step(&k, g[i], p[i], &m[i], &v[i]);
    float mi = m[i], vi = v[i];
    float denom = sqrtf(vi / bc2) + eps;
    float pi = p[i] + cg * d / denom;
    p[i] = pi + cm * mi / denom;
  }
}

/* a = exp_avg, b = exp_avg_sq; c1 = bias_correction1, c2 = sqrt(bias_correction2), c3 = rect (0: no
 * rectification, the SMA is too short). `rectify` is a constant in each call: two branch-free loops. */
static inline __attribute__((always_inline)) void radam_loop(const more_args *x, int64_t lo, int64_t hi,
                                                             const int rectify) {
  const moments k = moments_of(x->h);
  const float eps = k.eps, lr = (float)x->h->lr, bc1 = x->c1, sbc2 = x->c2, rect = x->c3;
  float *restrict p = x->p, *restrict m = x->a, *restrict v = x->b;
  const float *restrict g = x->g;
  for (int64_t i = lo; i < hi; i++) {
    moments_step(&k, g[i], p[i], &m[i], &v[i]);
    float mi = m[i], vi = v[i];
    if (rectify) p[i] -= mi / bc1 * lr * (sbc2 / (sqrtf(vi) + eps)) * rect;
    else p[i] -= mi / bc1 * lr;
  }
}

OPTIM_VECTOR_FN
static void radam_range(void *arg, int64_t lo, int64_t hi) {
  const more_args *x = arg;
  if (x->c3 > 0) radam_loop(x, lo, hi, 1);
  else radam_loop(x, lo, hi, 0);
}

/* a = ax; c1 = 1 - lambd*eta, c2 = eta, c3 = mu */
OPTIM_VECTOR_FN
static void asgd_range(void *arg, int64_t lo, int64_t hi) {
  const more_args *x = arg;
  const float sg = SIGN(x->h), wd = (float)x->h->weight_decay, decay = x->c1, eta = x->c2, mu = x->c3;
  float *restrict p = x->p, *restrict ax = x->a;
  const float *restrict g = x->g;
  for (int64_t i = lo; i < hi; i++) {
    float d = sg * g[i] + wd * p[i];
    float pi = p[i] * decay - eta * d;
    p[i] = pi;
    ax[i] = mu != 1.0f ? ax[i] + (pi - ax[i]) * mu : pi;
  }
}

/* ---- the step ------------------------------------------------------------------------------------------ */

static int ensure(lt_ctx *c, lt_optim_state *s, lt_optim_buf b, const lt_tensor *like, double fill) {
  if (s->buf[b]) return LT_OK;
  s->buf[b] = fill == 0 ? lt_tensor_zeros(c, LT_F32, like->ndim, like->shape)
                        : lt_op_full(c, LT_F32, like->ndim, like->shape, fill);
  return s->buf[b] ? LT_OK : LT_ERR;
}

int lt_optim_adaptive_step(lt_ctx *c, lt_optim_kind k, const lt_optim_hparams *h, lt_optim_state *s,
                           const lt_tensor *like, float *p, const float *g, int64_t n) {
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
    s->scalar[LT_OPTIM_ETA] = (float)h->lr;
    s->scalar[LT_OPTIM_MU] = 1.0;
  }
  x.a = lt_f32(s->buf[ba]);
  x.b = bb < LT_OPTIM_NBUFS ? lt_f32(s->buf[bb]) : NULL;
  s->step += 1;
  const double step = s->step, b1 = h->beta1, b2 = h->beta2;
  switch (k) {
    case LT_OPTIM_ADAGRAD:
      x.c1 = (float)(-(h->lr / (1 + (step - 1) * h->lr_decay)));
      fn = adagrad_range;
      break;
    case LT_OPTIM_ADADELTA: fn = adadelta_range; break;
    case LT_OPTIM_ADAMAX:
      x.c1 = (float)(-(h->lr / (1 - pow(b1, step))));
      fn = adamax_range;
      break;
    case LT_OPTIM_NADAM: {
      double mu = b1 * (1. - 0.5 * pow(0.96, step * h->momentum_decay));
      double mu_next = b1 * (1. - 0.5 * pow(0.96, (step + 1) * h->momentum_decay));
      float mp = (float)s->scalar[LT_OPTIM_MU_PRODUCT] * (float)mu; /* float32, as PyTorch's 0-dim tensor */
      float mp_next = mp * (float)mu * (float)mu_next;
      s->scalar[LT_OPTIM_MU_PRODUCT] = mp;
      x.c1 = (float)(1 - pow(b2, step));
      x.c2 = (float)(-h->lr * (1. - mu) / (1. - (double)mp));
      x.c3 = (float)(-h->lr * mu_next / (1. - (double)mp_next));
      fn = nadam_range;
      break;
    }
    case LT_OPTIM_RADAM: {
      double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
      double rho_inf = 2 / (1 - b2) - 1;
      double rho_t = rho_inf - 2 * step * pow(b2, step) / bc2;
      x.c1 = (float)bc1;
      x.c2 = (float)sqrt(bc2);
      x.c3 =
          rho_t > 5. ? (float)sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) : 0;
      fn = radam_range;
      break;
    }
    default: { /* ASGD */
      double eta = s->scalar[LT_OPTIM_ETA];
      x.c1 = (float)(1 - h->lambd * eta);
      x.c2 = (float)eta;
      x.c3 = (float)s->scalar[LT_OPTIM_MU];
      s->scalar[LT_OPTIM_ETA] = (float)(h->lr / pow(1 + h->lambd * h->lr * step, h->alpha));
      s->scalar[LT_OPTIM_MU] = (float)(1 / fmax(1, step - h->t0));
      fn = asgd_range;
      break;
    }
  }
  lt_optim_parallel(c, fn, &x, n);
  return LT_OK;
}
