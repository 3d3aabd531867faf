/*
 * nn_loss.c — fused losses with their backward rules: cross_entropy (log-softmax + NLL in one pass,
 * class weights, ignore_index, label smoothing), nll_loss, mse_loss, l1_loss and
 * binary_cross_entropy_with_logits (stable form, optional pos_weight). Sums are taken in double; every loss
 * takes float32 or float64 (its loops are written once for both, as macros over the element type).
 *
 * Class dimension is dim 2 (Lua) of [N, C] or [N, C, d...]; targets are [N] or [N, d...], 0-based
 * here (the binding converts from Lua's 1-based classes) and printed 1-based in messages.
 */
#include <math.h>
#include <string.h>

#include "lt_errors.h"
#include "lt_nn.h"
#include "lt_simd.h"

/* ---- shared pieces ---------------------------------------------------------------------------- */

/* checks logits/target shapes of the class losses; N * inner samples, C classes */
static int class_dims(lt_ctx *c, const char *op, const char *what, lt_tensor *x, lt_tensor *t, lt_tensor *w, int64_t *N,
                      int64_t *C, int64_t *inner) {
  char b1[128], b2[128];
  if ((x->dtype != LT_F64 && lt_check_dtype(c, op, what, x, LT_F32)) || lt_check_dtype(c, op, "target", t, LT_I64))
    return LT_ERR;
  if (x->ndim < 2)
    return lt_fail(c, "%s: %s must be [batch x classes] (or [batch x classes x d...]), got %s", op, what,
                   lt_shape_str(x, b1, sizeof b1));
  int ok = t->ndim == x->ndim - 1 && t->shape[0] == x->shape[0];
  for (int d = 2; ok && d < x->ndim; d++) ok = t->shape[d - 1] == x->shape[d];
  if (!ok)
    return lt_fail(c, "%s: target %s does not match %s %s (expected the %s's shape without dim 2)", op,
                   lt_shape_str(t, b1, sizeof b1), what, lt_shape_str(x, b2, sizeof b2), what);
  *N = x->shape[0];
  *C = x->shape[1];
  *inner = 1;
  for (int d = 2; d < x->ndim; d++) *inner *= x->shape[d];
  if (w) {
    if (lt_is_float(w->dtype) && w->dtype != x->dtype)
      return lt_fail(c, "%s: %s is %s and weight is %s: both must have the same float dtype", op, what,
                     lt_dtype_name(x->dtype), lt_dtype_name(w->dtype));
    if (lt_check_dtype(c, op, "weight", w, x->dtype)) return LT_ERR;
    if (w->ndim != 1 || w->shape[0] != *C)
      return lt_fail(c, "%s: weight must be [%lld] (one per class), got %s", op, (long long)*C,
                     lt_shape_str(w, b1, sizeof b1));
  }
  return LT_OK;
}

static int check_targets(lt_ctx *c, const char *op, const int64_t *t, int64_t n, int64_t C, int64_t ignore) {
  for (int64_t s = 0; s < n; s++)
    if (t[s] != ignore && (t[s] < 0 || t[s] >= C))
      return lt_fail(c, "%s: target %lld is out of range 1..%lld (class targets are 1-based)", op,
                     (long long)(t[s] + 1), (long long)C);
  return LT_OK;
}

/* output of a loss: 0-dim for mean/sum, the per-sample shape for none */
static lt_tensor *loss_out_dt(lt_ctx *c, lt_reduction red, int ndim, const int64_t *shape, lt_dtype dt) {
  return red == LT_REDUCE_NONE ? lt_tensor_new(c, dt, ndim, shape) : lt_tensor_new(c, dt, 0, NULL);
}

/* upstream gradient of sample s: gout[s] for none, the scalar otherwise (pg float or double) */
#define GO_AT(pg, red, s) ((double)((red) == LT_REDUCE_NONE ? (pg)[s] : (pg)[0]))

/* the class losses' inputs made contiguous: logits *xc, targets *tc and the class weights *wc (NULL without);
 * LT_ERR, with nothing held, when one cannot be allocated */
static int class_inputs(lt_ctx *c, lt_tensor *x, lt_tensor *target, lt_tensor *weight, lt_tensor **xc, lt_tensor **tc,
                        lt_tensor **wc) {
  *xc = lt_op_contiguous(c, x);
  *tc = *xc ? lt_op_contiguous(c, target) : NULL;
  *wc = *tc && weight ? lt_op_contiguous(c, weight) : NULL;
  if (*tc && (*wc || !weight)) return LT_OK;
  lt_tensor_release(*xc);
  lt_tensor_release(*tc);
  return LT_ERR;
}

static void class_inputs_release(lt_tensor *xc, lt_tensor *tc, lt_tensor *wc) {
  lt_tensor_release(xc);
  lt_tensor_release(tc);
  lt_tensor_release(wc);
}

/* the class losses' nodes keep i = {red, ignore, N, C, inner}, which their backward rules read */
static void class_node_dims(lt_node *nd, lt_reduction red, int64_t ignore, int64_t N, int64_t C, int64_t inner) {
  nd->i[0] = red;
  nd->i[1] = ignore;
  nd->i[2] = N;
  nd->i[3] = C;
  nd->i[4] = inner;
}

/* ---- cross_entropy ------------------------------------------------------------------------------ */

/* log-sum-exp of a contiguous row of C logits (the common [N x C] case): lt_simd.h's max, and exps summed in 16
 * float lanes (libm's double exp per logit ran scalar: the GPT's [1024 x 65] loss took ~0.5 ms). A NaN
 * makes it NaN; a row of -inf is NaN too, as before. */
LT_VECTOR_FN static double row_lse(const float *x, int64_t C) {
  float mx = lt_max_f32(x, C), acc[16] = { 0 }, tail = 0;
  int64_t j = 0;
  for (; j + 16 <= C; j += 16)
    for (int k = 0; k < 16; k++) acc[k] += lt_expf(x[j + k] - mx);
  for (; j < C; j++) tail += lt_expf(x[j] - mx);
  double se = tail;
  for (int k = 0; k < 16; k++) se += acc[k];
  return (double)mx + log(se);
}

/* float64's: libm's exp, for its precision */
static double row_lse_f64(const double *x, int64_t C) {
  double mx = -INFINITY, se = 0;
  for (int64_t j = 0; j < C; j++) mx = x[j] > mx || isnan(x[j]) ? x[j] : mx;
  for (int64_t j = 0; j < C; j++) se += exp(x[j] - mx);
  return mx + log(se);
}

/* Gradient of one contiguous row: g_j = a (p_j - [j == t]) + b (W p_j - w_j), p = exp(x - lse). */
LT_VECTOR_FN static void row_grad(const float *x, float *g, int64_t C, int64_t t, float lse, float a, float b, float W,
                                  const float *w) {
  if (b == 0.0f)
    for (int64_t j = 0; j < C; j++) g[j] = a * lt_expf(x[j] - lse);
  else
    for (int64_t j = 0; j < C; j++) {
      float p = lt_expf(x[j] - lse);
      g[j] = a * p + b * (W * p - (w ? w[j] : 1.0f));
    }
  g[t] -= a;
}
static void row_grad_f64(const double *x, double *g, int64_t C, int64_t t, double lse, double a, double b, double W,
                         const double *w) {
  for (int64_t j = 0; j < C; j++) {
    double p = exp(x[j] - lse);
    g[j] = a * p + (b != 0 ? b * (W * p - (w ? w[j] : 1.0)) : 0);
  }
  g[t] -= a;
}

/* cross_entropy's loops, written once for float and double (T, accessor P, contiguous-row kernels ROW_LSE
 * and ROW_GRAD); sums in double either way */
#define CE_BACKWARD_LOOP(T, P, ROW_GRAD)                                                    \
  {                                                                                         \
    const T *px = P(xc), *pg = P(gc), *lse = P(n->saved[0]);                                \
    const int64_t *pt = lt_i64(n->saved[1]);                                                \
    const T *pw = n->saved[2] ? P(n->saved[2]) : NULL;                                      \
    double W = 0;                                                                           \
    if (pw)                                                                                 \
      for (int64_t k = 0; k < C; k++) W += pw[k];                                           \
    else W = (double)C;                                                                     \
    T *po = P(gx);                                                                          \
    for (int64_t i = 0; i < N; i++)                                                         \
      for (int64_t k = 0; k < inner; k++) {                                                 \
        int64_t s = i * inner + k, base = i * C * inner + k;                                \
        int64_t t = pt[s];                                                                  \
        if (t == ignore) {                                                                  \
          for (int64_t j = 0; j < C; j++) po[base + j * inner] = 0;                         \
          continue;                                                                         \
        }                                                                                   \
        double go = GO_AT(pg, red, s);                                                      \
        double a = (1 - eps) * (pw ? pw[t] : 1.0) * sn * go, b = eps / (double)C * ss * go; \
        double l = lse[s];                                                                  \
        if (inner == 1) {                                                                   \
          ROW_GRAD(px + base, po + base, C, t, (T)l, (T)a, (T)b, (T)W, pw);                 \
          continue;                                                                         \
        }                                                                                   \
        for (int64_t j = 0; j < C; j++) {                                                   \
          double p = exp((double)px[base + j * inner] - l);                                 \
          double gj = a * (p - (j == t)) + (b != 0 ? b * (W * p - (pw ? pw[j] : 1.0)) : 0); \
          po[base + j * inner] = (T)gj;                                                     \
        }                                                                                   \
      }                                                                                     \
  }
#define CE_FORWARD_LOOP(T, P, ROW_LSE)                                                                \
  {                                                                                                   \
    const T *px = P(xc), *pw = wc ? P(wc) : NULL;                                                     \
    T *pl = P(lse), *po = P(out);                                                                     \
    for (int64_t i = 0; i < N; i++)                                                                   \
      for (int64_t k = 0; k < inner; k++) {                                                           \
        int64_t s = i * inner + k, base = i * C * inner + k;                                          \
        double l;                                                                                     \
        if (inner == 1) {                                                                             \
          l = ROW_LSE(px + base, C);                                                                  \
        } else {                                                                                      \
          double mx = -INFINITY;                                                                      \
          for (int64_t j = 0; j < C; j++) mx = px[base + j * inner] > mx ? px[base + j * inner] : mx; \
          double se = 0;                                                                              \
          for (int64_t j = 0; j < C; j++) se += exp((double)px[base + j * inner] - mx);               \
          l = mx + log(se);                                                                           \
        }                                                                                             \
        pl[s] = (T)l;                                                                                 \
        int64_t t = pt[s];                                                                            \
        if (t == ignore) {                                                                            \
          if (red == LT_REDUCE_NONE) po[s] = 0;                                                       \
          continue;                                                                                   \
        }                                                                                             \
        double wt = pw ? pw[t] : 1.0;                                                                 \
        double nll = wt * (l - px[base + t * inner]);                                                 \
        double smooth = 0;                                                                            \
        if (eps > 0)                                                                                  \
          for (int64_t j = 0; j < C; j++) smooth += (pw ? pw[j] : 1.0) * (l - px[base + j * inner]);  \
        wsum += wt;                                                                                   \
        tot_nll += nll;                                                                               \
        tot_smooth += smooth;                                                                         \
        if (red == LT_REDUCE_NONE) po[s] = (T)((1 - eps) * nll + eps / (double)C * smooth);           \
      }                                                                                               \
  }

/* node: i = {red, ignore, N, C, inner}; f = {eps, nll scale, smooth scale};
 * saved = {lse [N*inner], target (0-based, contiguous), weight or NULL} */
static int cross_entropy_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  lt_tensor *x = n->inputs[0];
  lt_reduction red = (lt_reduction)n->i[0];
  int64_t ignore = n->i[1], N = n->i[2], C = n->i[3], inner = n->i[4];
  double eps = n->f[0], sn = n->f[1], ss = n->f[2];
  lt_tensor *gc = lt_op_contiguous(c, gout);
  lt_tensor *xc = gc ? lt_op_contiguous(c, x) : NULL;
  lt_tensor *gx = xc ? lt_tensor_new(c, x->dtype, x->ndim, x->shape) : NULL;
  if (!gx) {
    lt_tensor_release(gc);
    lt_tensor_release(xc);
    return LT_ERR;
  }
  if (x->dtype == LT_F64) CE_BACKWARD_LOOP(double, lt_f64, row_grad_f64)
  else CE_BACKWARD_LOOP(float, lt_f32, row_grad)
  lt_tensor_release(gc);
  lt_tensor_release(xc);
  gin[0] = gx;
  return LT_OK;
}

lt_tensor *lt_nn_cross_entropy(lt_ctx *c, lt_tensor *x, lt_tensor *target, lt_tensor *weight, int64_t ignore,
                               double eps, lt_reduction red) {
  const char *op = "cross_entropy";
  int64_t N, C, inner;
  if (class_dims(c, op, "input", x, target, weight, &N, &C, &inner)) return NULL;
  if (!(eps >= 0 && eps <= 1)) {
    lt_fail(c, "cross_entropy: label_smoothing must be between 0 and 1, got %g", eps);
    return NULL;
  }
  lt_tensor *xc, *tc, *wc;
  if (class_inputs(c, x, target, weight, &xc, &tc, &wc)) return NULL;
  int64_t ns = N * inner;
  lt_tensor *lse = lt_tensor_new(c, x->dtype, 1, &ns);
  lt_tensor *out = lse ? loss_out_dt(c, red, target->ndim, target->shape, x->dtype) : NULL;
  if (!out) goto fail;
  const int64_t *pt = lt_i64(tc);
  if (check_targets(c, op, pt, ns, C, ignore)) goto fail;
  double tot_nll = 0, tot_smooth = 0, wsum = 0;
  if (x->dtype == LT_F64) CE_FORWARD_LOOP(double, lt_f64, row_lse_f64)
  else CE_FORWARD_LOOP(float, lt_f32, row_lse)
  double sn = 1, ss = 1;
  if (red == LT_REDUCE_MEAN) {
    /* both terms over the targets' total weight (their count when unweighted): ignored targets count
     * in neither, as in PyTorch */
    sn = 1.0 / wsum;
    ss = 1.0 / wsum;
  }
  double total = (1 - eps) * tot_nll * sn + eps / (double)C * tot_smooth * ss;
  if (red != LT_REDUCE_NONE && x->dtype == LT_F64) lt_f64(out)[0] = total;
  else if (red != LT_REDUCE_NONE) lt_f32(out)[0] = (float)total;
  lt_node *nd;
  if (lt_record(c, out, op, cross_entropy_backward, 1, &x, &nd)) goto fail;
  if (nd) {
    class_node_dims(nd, red, ignore, N, C, inner);
    nd->f[0] = eps;
    nd->f[1] = sn;
    nd->f[2] = ss;
    lt_node_save(nd, 0, lse);
    lt_node_save(nd, 1, tc);
    if (wc) lt_node_save(nd, 2, wc);
  }
  class_inputs_release(xc, tc, wc);
  lt_tensor_release(lse);
  return out;
fail:
  class_inputs_release(xc, tc, wc);
  lt_tensor_release(lse);
  lt_tensor_release(out);
  return NULL;
}

/* ---- nll_loss ----------------------------------------------------------------------------------- */

/* nll_loss's loops, written once for float and double (T, accessor P); sums in double */
#define NLL_BACKWARD_LOOP(T, P)                                                                     \
  {                                                                                                 \
    const T *pg = P(gc), *pw = n->saved[1] ? P(n->saved[1]) : NULL;                                 \
    const int64_t *pt = lt_i64(n->saved[0]);                                                        \
    T *po = P(gx);                                                                                  \
    for (int64_t i = 0; i < N; i++)                                                                 \
      for (int64_t k = 0; k < inner; k++) {                                                         \
        int64_t s = i * inner + k, t = pt[s];                                                       \
        if (t == ignore) continue;                                                                  \
        po[i * C * inner + t * inner + k] = (T)(-(pw ? pw[t] : 1.0) * n->f[0] * GO_AT(pg, red, s)); \
      }                                                                                             \
  }
#define NLL_FORWARD_LOOP(T, P)                                                                \
  {                                                                                           \
    const T *px = P(xc), *pw = wc ? P(wc) : NULL;                                             \
    T *po = P(out);                                                                           \
    for (int64_t i = 0; i < N; i++)                                                           \
      for (int64_t k = 0; k < inner; k++) {                                                   \
        int64_t s = i * inner + k, t = pt[s];                                                 \
        if (t == ignore) {                                                                    \
          if (red == LT_REDUCE_NONE) po[s] = 0;                                               \
          continue;                                                                           \
        }                                                                                     \
        double wt = pw ? pw[t] : 1.0, l = -wt * px[i * C * inner + t * inner + k];            \
        wsum += wt;                                                                           \
        tot += l;                                                                             \
        if (red == LT_REDUCE_NONE) po[s] = (T)l;                                              \
      }                                                                                       \
    if (red != LT_REDUCE_NONE) po[0] = (T)(tot * (red == LT_REDUCE_MEAN ? 1.0 / wsum : 1.0)); \
  }

/* node: i = {red, ignore, N, C, inner}; f = {scale}; saved = {target, weight or NULL} */
static int nll_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  lt_tensor *x = n->inputs[0];
  lt_reduction red = (lt_reduction)n->i[0];
  int64_t ignore = n->i[1], N = n->i[2], C = n->i[3], inner = n->i[4];
  lt_tensor *gc = lt_op_contiguous(c, gout);
  lt_tensor *gx = gc ? lt_tensor_zeros(c, x->dtype, x->ndim, x->shape) : NULL;
  if (!gx) {
    lt_tensor_release(gc);
    return LT_ERR;
  }
  if (x->dtype == LT_F64) NLL_BACKWARD_LOOP(double, lt_f64)
  else NLL_BACKWARD_LOOP(float, lt_f32)
  lt_tensor_release(gc);
  gin[0] = gx;
  return LT_OK;
}

lt_tensor *lt_nn_nll_loss(lt_ctx *c, lt_tensor *x, lt_tensor *target, lt_tensor *weight, int64_t ignore,
                          lt_reduction red) {
  const char *op = "nll_loss";
  int64_t N, C, inner;
  if (class_dims(c, op, "input", x, target, weight, &N, &C, &inner)) return NULL;
  lt_tensor *xc, *tc, *wc;
  if (class_inputs(c, x, target, weight, &xc, &tc, &wc)) return NULL;
  lt_tensor *out = loss_out_dt(c, red, target->ndim, target->shape, x->dtype);
  if (!out) goto fail;
  const int64_t *pt = lt_i64(tc);
  int64_t ns = N * inner;
  if (check_targets(c, op, pt, ns, C, ignore)) goto fail;
  double tot = 0, wsum = 0;
  if (x->dtype == LT_F64) NLL_FORWARD_LOOP(double, lt_f64)
  else NLL_FORWARD_LOOP(float, lt_f32)
  double scale = red == LT_REDUCE_MEAN ? 1.0 / wsum : 1.0;
  lt_node *nd;
  if (lt_record(c, out, op, nll_backward, 1, &x, &nd)) goto fail;
  if (nd) {
    nd->reads = 0; /* x only for its shape; the targets and weights are saved */
    class_node_dims(nd, red, ignore, N, C, inner);
    nd->f[0] = scale;
    lt_node_save(nd, 0, tc);
    if (wc) lt_node_save(nd, 1, wc);
  }
  class_inputs_release(xc, tc, wc);
  return out;
fail:
  class_inputs_release(xc, tc, wc);
  lt_tensor_release(out);
  return NULL;
}

/* ---- elementwise losses: mse, l1, bce_with_logits, bce, smooth_l1, huber -------------------------- */

typedef enum { PW_MSE, PW_L1, PW_BCE, PW_BCE_PROB, PW_SMOOTH_L1, PW_HUBER } pw_kind;

static const char *pw_name(pw_kind k) {
  static const char *const names[] = {
    "mse_loss", "l1_loss", "binary_cross_entropy_with_logits", "binary_cross_entropy", "smooth_l1_loss", "huber_loss"
  };
  return names[k];
}

static inline double log_clamped(double v) {
  double l = log(v);
  return l < -100 ? -100 : l;
} /* PyTorch's BCE */

static inline double softplus_neg(double x) { return log1p(exp(-fabs(x))) + (x < 0 ? -x : 0); } /* log(1+e^-x) */

/* a: smooth_l1's beta, huber's delta */
static inline double pw_loss(pw_kind k, double x, double y, double pw, double a) {
  double z = fabs(x - y);
  switch (k) {
    case PW_MSE: return (x - y) * (x - y);
    case PW_L1: return z;
    case PW_BCE_PROB: return -(y * log_clamped(x) + (1 - y) * log_clamped(1 - x));
    case PW_SMOOTH_L1: return z < a ? 0.5 * z * z / a : z - 0.5 * a;
    case PW_HUBER: return z < a ? 0.5 * z * z : a * (z - 0.5 * a);
    default: return (1 - y) * x + (1 + (pw - 1) * y) * softplus_neg(x);
  }
}

/* d loss / dx and d loss / dy */
static inline void pw_grad(pw_kind k, double x, double y, double pw, double a, double *gx, double *gy) {
  double d = x - y, z = fabs(d), sg = d > 0 ? 1 : d < 0 ? -1 : 0;
  switch (k) {
    case PW_MSE:
      *gx = 2 * (x - y);
      *gy = -*gx;
      break;
    case PW_L1:
      *gx = x > y ? 1 : x < y ? -1 : 0;
      *gy = -*gx;
      break;
    case PW_BCE_PROB: { /* PyTorch: (x - y) / max(x(1-x), 1e-12) */
      double den = (1 - x) * x;
      *gx = (x - y) / (den > 1e-12 ? den : 1e-12);
      *gy = log_clamped(1 - x) - log_clamped(x);
      break;
    }
    case PW_SMOOTH_L1:
      *gx = z < a ? d / a : sg;
      *gy = -*gx;
      break;
    case PW_HUBER:
      *gx = z < a ? d : a * sg;
      *gy = -*gx;
      break;
    default: {
      double lw = 1 + (pw - 1) * y, sneg = 1 / (1 + exp(x)); /* sigmoid(-x) */
      *gx = (1 - y) - lw * sneg;
      *gy = -x + (pw - 1) * softplus_neg(x);
    }
  }
}

/* The elementwise losses work in double whatever the dtype (float64 inputs lose nothing): their loops are
 * written once for the element type T with accessor P (lt_f32 or lt_f64), and instantiated for both. */
#define PW_BACKWARD_LOOP(T, P)                                                   \
  {                                                                              \
    const T *px = P(xc), *py = P(yc), *pg = P(gc);                               \
    const T *ppw = n->saved[0] ? P(n->saved[0]) : NULL;                          \
    T *ogx = gx ? P(gx) : NULL, *ogy = gy ? P(gy) : NULL;                        \
    for (int64_t i = 0, m = lt_numel(xc); i < m; i++) {                          \
      double a, b, go = (double)(red == LT_REDUCE_NONE ? pg[i] : pg[0]) * scale; \
      pw_grad(kind, px[i], py[i], ppw ? ppw[i % npw] : 1.0, n->f[1], &a, &b);    \
      if (ogx) ogx[i] = (T)(a * go);                                             \
      if (ogy) ogy[i] = (T)(b * go);                                             \
    }                                                                            \
  }
#define PW_FORWARD_LOOP(T, P)                                              \
  {                                                                        \
    const T *px = P(xc), *py = P(yc), *ppw = pc ? P(pc) : NULL;            \
    T *po = P(out);                                                        \
    for (int64_t i = 0; i < m; i++) {                                      \
      double l = pw_loss(kind, px[i], py[i], ppw ? ppw[i % npw] : 1.0, a); \
      if (red == LT_REDUCE_NONE) po[i] = (T)l;                             \
      else tot += l;                                                       \
    }                                                                      \
    if (red != LT_REDUCE_NONE) po[0] = (T)(tot * scale);                   \
  }

/* node: i = {kind, red, pw_n}; f = {scale, beta | delta}; saved = {pos_weight contiguous or NULL} */
static int pointwise_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  lt_tensor *x = n->inputs[0], *y = n->inputs[1];
  pw_kind kind = (pw_kind)n->i[0];
  lt_reduction red = (lt_reduction)n->i[1];
  int64_t npw = n->i[2];
  lt_tensor *gc = lt_op_contiguous(c, gout);
  lt_tensor *xc = gc ? lt_op_contiguous(c, x) : NULL;
  lt_tensor *yc = xc ? lt_op_contiguous(c, y) : NULL;
  lt_tensor *gx = yc && x->requires_grad ? lt_tensor_new(c, x->dtype, x->ndim, x->shape) : NULL;
  lt_tensor *gy = yc && y->requires_grad ? lt_tensor_new(c, y->dtype, y->ndim, y->shape) : NULL;
  if (!yc || (x->requires_grad && !gx) || (y->requires_grad && !gy)) {
    lt_tensor_release(gc);
    lt_tensor_release(xc);
    lt_tensor_release(yc);
    lt_tensor_release(gx);
    lt_tensor_release(gy);
    return LT_ERR;
  }
  double scale = n->f[0];
  if (xc->dtype == LT_F64) PW_BACKWARD_LOOP(double, lt_f64)
  else PW_BACKWARD_LOOP(float, lt_f32)
  lt_tensor_release(gc);
  lt_tensor_release(xc);
  lt_tensor_release(yc);
  gin[0] = gx;
  gin[1] = gy;
  return LT_OK;
}

static lt_tensor *pointwise_loss(lt_ctx *c, pw_kind kind, lt_tensor *x, lt_tensor *y, lt_tensor *pos_weight, double a,
                                 lt_reduction red) {
  char b1[128], b2[128];
  const char *op = pw_name(kind);
  if (x->dtype == LT_F64 || y->dtype == LT_F64) { /* float64 input and target (and pos_weight) */
    if (x->dtype != y->dtype || (pos_weight && pos_weight->dtype != x->dtype)) {
      lt_fail(c, "%s: input is %s and target %s%s%s: all must have the same float dtype", op, lt_dtype_name(x->dtype),
              lt_dtype_name(y->dtype), pos_weight ? ", pos_weight " : "",
              pos_weight ? lt_dtype_name(pos_weight->dtype) : "");
      return NULL;
    }
  } else if (lt_check_dtype(c, op, "input", x, LT_F32) || lt_check_dtype(c, op, "target", y, LT_F32)) return NULL;
  if (!lt_same_shape(x, y)) {
    lt_fail(c, "%s: input %s and target %s must have the same shape", op, lt_shape_str(x, b1, sizeof b1),
            lt_shape_str(y, b2, sizeof b2));
    return NULL;
  }
  int64_t npw = 1;
  if (pos_weight) {
    int64_t last = x->ndim ? x->shape[x->ndim - 1] : 1;
    if (lt_check_dtype(c, op, "pos_weight", pos_weight, x->dtype)) return NULL;
    npw = lt_numel(pos_weight);
    if (pos_weight->ndim > 1 || (npw != last && npw != 1)) {
      lt_fail(c, "%s: pos_weight must be [%lld] (one per class, the input's last dim) or [1], got %s", op,
              (long long)last, lt_shape_str(pos_weight, b1, sizeof b1));
      return NULL;
    }
  }
  lt_tensor *xc = lt_op_contiguous(c, x);
  lt_tensor *yc = xc ? lt_op_contiguous(c, y) : NULL;
  lt_tensor *pc = yc && pos_weight ? lt_op_contiguous(c, pos_weight) : NULL;
  lt_tensor *out = yc && (pc || !pos_weight) ? loss_out_dt(c, red, x->ndim, x->shape, x->dtype) : NULL;
  if (!out) {
    lt_tensor_release(xc);
    lt_tensor_release(yc);
    lt_tensor_release(pc);
    return NULL;
  }
  int64_t m = lt_numel(xc);
  double tot = 0;
  const float *pf = x->dtype == LT_F64 ? NULL : lt_f32(xc);
  const double *pd = x->dtype == LT_F64 ? lt_f64(xc) : NULL;
  for (int64_t i = 0; kind == PW_BCE_PROB && i < m; i++)
    if (!(pf ? pf[i] >= 0 && pf[i] <= 1 : pd[i] >= 0 && pd[i] <= 1)) {
      lt_fail(c, "%s: all elements of input should be between 0 and 1 (element %lld is %g)", op, (long long)i + 1,
              pf ? (double)pf[i] : pd[i]);
      lt_tensor_release(xc);
      lt_tensor_release(yc);
      lt_tensor_release(pc);
      lt_tensor_release(out);
      return NULL;
    }
  double scale = red == LT_REDUCE_MEAN ? 1.0 / (double)m : 1.0;
  if (x->dtype == LT_F64) PW_FORWARD_LOOP(double, lt_f64)
  else PW_FORWARD_LOOP(float, lt_f32)
  lt_tensor_release(xc);
  lt_tensor_release(yc);
  lt_tensor *ins[2] = { x, y };
  lt_node *nd;
  if (lt_record(c, out, op, pointwise_backward, 2, ins, &nd)) {
    lt_tensor_release(out);
    lt_tensor_release(pc);
    return NULL;
  }
  if (nd) {
    nd->i[0] = kind;
    nd->i[1] = red;
    nd->i[2] = npw;
    nd->f[0] = scale;
    nd->f[1] = a;
    if (pc) lt_node_save(nd, 0, pc);
  }
  lt_tensor_release(pc);
  return out;
}

lt_tensor *lt_nn_mse_loss(lt_ctx *c, lt_tensor *x, lt_tensor *y, lt_reduction red) {
  return pointwise_loss(c, PW_MSE, x, y, NULL, 0, red);
}
lt_tensor *lt_nn_l1_loss(lt_ctx *c, lt_tensor *x, lt_tensor *y, lt_reduction red) {
  return pointwise_loss(c, PW_L1, x, y, NULL, 0, red);
}
lt_tensor *lt_nn_bce_with_logits(lt_ctx *c, lt_tensor *x, lt_tensor *y, lt_tensor *pos_weight, lt_reduction red) {
  return pointwise_loss(c, PW_BCE, x, y, pos_weight, 0, red);
}
lt_tensor *lt_nn_binary_cross_entropy(lt_ctx *c, lt_tensor *x, lt_tensor *y, lt_reduction red) {
  return pointwise_loss(c, PW_BCE_PROB, x, y, NULL, 0, red);
}
lt_tensor *lt_nn_smooth_l1_loss(lt_ctx *c, lt_tensor *x, lt_tensor *y, double beta, lt_reduction red) {
  if (!(beta >= 0)) {
    lt_fail(c, "smooth_l1_loss: beta must be >= 0, got %g", beta);
    return NULL;
  }
  return pointwise_loss(c, PW_SMOOTH_L1, x, y, NULL, beta, red);
}
lt_tensor *lt_nn_huber_loss(lt_ctx *c, lt_tensor *x, lt_tensor *y, double delta, lt_reduction red) {
  if (!(delta > 0)) {
    lt_fail(c, "huber_loss: delta must be > 0, got %g", delta);
    return NULL;
  }
  return pointwise_loss(c, PW_HUBER, x, y, NULL, delta, red);
}
