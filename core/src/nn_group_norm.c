/*
 * nn_group_norm.c — group normalisation (GroupNorm; InstanceNorm is the case groups = channels), forward and
 * backward side by side.
 *
 * x [N, C, S...] is seen as [N, G, M] with M = (C/G) * S: each (item, group) row is normalised with its own mean
 * and biased variance, then channel c gets weight[c] and bias[c]. The forward saves each row's mean and 1/std
 * ([N*G, 2]) for the backward:
 *   xhat = (x - mean) * rstd,  dxhat = gy * weight[c],
 *   gx = rstd * (dxhat - mean_row(dxhat) - xhat * mean_row(dxhat * xhat)),
 *   gweight[c] = sum over items and positions of gy * xhat,  gbias[c] = sum of gy.
 * Optional running statistics [G] (InstanceNorm's track_running_stats) are updated in place with the batch's
 * average of the row means and of the unbiased row variances, with momentum the weight of the new value.
 * float32 or float64: input, weight, bias, running statistics, output and gradients share one dtype (an error names
 * both where they differ); the kernels are written once over the element type (GN_KERNELS).
 */
#include <math.h>
#include <string.h>

#include "lt_ctx.h"
#include "lt_errors.h"
#include "lt_nn.h"
#include "lt_pool.h"
#include "lt_simd.h"

typedef struct gn_geom {
  int64_t N, C, G, S; /* S: positions per channel */
} gn_geom;

/* The row loops and the two passes over element type T (D: f32 or f64, lt_D reads a tensor's data; SUM, DOT: the
 * row sums ending in double): float32's in float lanes compiled per CPU, float64's in double throughout.
 *   sq_dev_sum_D: sum of (x - m)^2 over a row, the second pass of a two-pass variance (no cancellation when
 *                 |mean| >> std);  affine_row_D: y = x * scale + shift;
 *   input_grad_row_D: gx = rstd * (g * w - md - (x - mean) * rstd * mdx);
 *   gn_forward_D: normalises rows [r0, r1), saves (mean, rstd) per row in st; gn_running_D: updates the running
 *                 statistics from the saved ones;
 *   gn_backward_D: the gradients of x, weight and bias (each NULL when not wanted) of groups [g0, g1), items in
 *                 order: a channel's weight and bias gradients add the items in the same order whatever the range. */
// clang-format off
#define GN_KERNELS(D, T, SUM, DOT)                                                                                 \
LT_VECTOR_FN static double sq_dev_sum_##D(const T *x, int64_t n, T m) {                                            \
  double total = 0;                                                                                                \
  for (int64_t b = 0; b < n; b += 4096) {                                                                          \
    const int64_t e = b + 4096 < n ? b + 4096 : n;                                                                 \
    T acc[16] = { 0 };                                                                                             \
    int64_t i = b;                                                                                                 \
    for (; i + 16 <= e; i += 16)                                                                                   \
      for (int l = 0; l < 16; l++) acc[l] += (x[i + l] - m) * (x[i + l] - m);                                      \
    for (; i < e; i++) acc[0] += (x[i] - m) * (x[i] - m);                                                          \
    for (int l = 0; l < 16; l++) total += acc[l];                                                                  \
  }                                                                                                                \
  return total;                                                                                                    \
}                                                                                                                  \
LT_VECTOR_FN static void affine_row_##D(T *restrict y, const T *restrict x, int64_t n, T scale, T shift) {          \
  for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale + shift;                                                     \
}                                                                                                                  \
LT_VECTOR_FN static void input_grad_row_##D(T *restrict gx, const T *restrict g, const T *restrict x, int64_t n,   \
                                            T w, T mean, T rstd, T md, T mdx) {                                    \
  for (int64_t i = 0; i < n; i++) gx[i] = rstd * (g[i] * w - md - (x[i] - mean) * rstd * mdx);                     \
}                                                                                                                  \
__attribute__((noinline)) static void gn_forward_##D(const gn_geom *gp, const lt_tensor *xc, const lt_tensor *wc, const lt_tensor *bc,       \
                           lt_tensor *out, lt_tensor *stats, double eps, int64_t r0, int64_t r1) {                  \
  const gn_geom g = *gp;                                                                                           \
  const int64_t groups = g.G, M = (g.C / groups) * g.S;                                                            \
  const T *px = lt_##D(xc), *pw = wc ? lt_##D(wc) : NULL, *pb = bc ? lt_##D(bc) : NULL;                            \
  T *po = lt_##D(out), *st = lt_##D(stats);                                                                        \
  for (int64_t row = r0; row < r1; row++) {                                                                        \
    const T *xr = px + row * M;                                                                                    \
    const T fm = (T)(SUM(xr, M) / (double)M);                                                                      \
    const double var = sq_dev_sum_##D(xr, M, fm) / (double)M;                                                      \
    const T rstd = (T)(1.0 / sqrt(var + eps));                                                                     \
    st[2 * row] = fm;                                                                                              \
    st[2 * row + 1] = rstd;                                                                                        \
    const int64_t c0 = (row % groups) * (g.C / groups);                                                            \
    for (int64_t k = 0; k < g.C / groups; k++) { /* (x - mean) * rstd * w + b as one multiply-add */               \
      const T scale = rstd * (pw ? pw[c0 + k] : (T)1), bk = pb ? pb[c0 + k] : (T)0;                                \
      affine_row_##D(po + row * M + k * g.S, xr + k * g.S, g.S, scale, bk - fm * scale);                           \
    }                                                                                                              \
  }                                                                                                                \
}                                                                                                                  \
static void gn_running_##D(const gn_geom *gp, const lt_tensor *xc, const lt_tensor *stats, lt_tensor *running_mean, \
                           lt_tensor *running_var, double momentum) {                                              \
  const gn_geom g = *gp;                                                                                           \
  const int64_t groups = g.G, M = (g.C / groups) * g.S;                                                            \
  const T *px = lt_##D(xc), *st = lt_##D(stats);                                                                   \
  for (int64_t gr = 0; gr < groups; gr++) { /* batch averages of the row statistics */                             \
    double sm = 0, sv = 0;                                                                                         \
    for (int64_t i = 0; i < g.N; i++) {                                                                            \
      const int64_t row = i * groups + gr;                                                                         \
      sm += st[2 * row];                                                                                           \
      sv += sq_dev_sum_##D(px + row * M, M, st[2 * row]) / (double)(M - 1);                                        \
    }                                                                                                              \
    T *rm = lt_##D(running_mean) + gr * running_mean->stride[0], *rv = lt_##D(running_var) + gr * running_var->stride[0]; \
    *rm = (T)((1 - momentum) * *rm + momentum * sm / (double)g.N);                                                 \
    *rv = (T)((1 - momentum) * *rv + momentum * sv / (double)g.N);                                                 \
  }                                                                                                                \
}                                                                                                                  \
__attribute__((noinline)) static void gn_backward_##D(const gn_geom *gp, const lt_tensor *xc, const lt_tensor *gc, const lt_tensor *wc,      \
                            const lt_tensor *stats, lt_tensor *gx, lt_tensor *gw, lt_tensor *gb, int64_t g0, int64_t g1) { \
  const gn_geom g = *gp;                                                                                           \
  const int64_t Cg = g.C / g.G, M = Cg * g.S;                                                                      \
  const T *px = lt_##D(xc), *py = lt_##D(gc), *pw = wc ? lt_##D(wc) : NULL, *st = lt_##D(stats);                   \
  for (int64_t it = 0; it < g.N * (g1 - g0); it++) { /* items in order, groups [g0, g1) of each */                \
    const int64_t row = (it / (g1 - g0)) * g.G + g0 + it % (g1 - g0);                                             \
    const T mean = st[2 * row], rstd = st[2 * row + 1];                                                            \
    const int64_t c0 = (row % g.G) * Cg;                                                                           \
    const T *xr = px + row * M, *gr = py + row * M;                                                                \
    double sd = 0, sdx = 0; /* sums of dxhat and dxhat * xhat over the row */                                      \
    for (int64_t k = 0; k < Cg; k++) {                                                                             \
      const T wk = pw ? pw[c0 + k] : (T)1;                                                                         \
      /* sum g and sum g * xhat = rstd * (sum g*x - mean * sum g) */                                               \
      const double sg = SUM(gr + k * g.S, g.S);                                                                    \
      const double sgx = rstd * (DOT(gr + k * g.S, xr + k * g.S, g.S) - (double)mean * sg);                        \
      sd += wk * sg;                                                                                               \
      sdx += wk * sgx;                                                                                             \
      if (gw) lt_##D(gw)[c0 + k] += (T)sgx;                                                                        \
      if (gb) lt_##D(gb)[c0 + k] += (T)sg;                                                                         \
    }                                                                                                              \
    if (!gx) continue;                                                                                             \
    const T md = (T)(sd / (double)M), mdx = (T)(sdx / (double)M);                                                  \
    T *out = lt_##D(gx) + row * M;                                                                                 \
    for (int64_t k = 0; k < Cg; k++)                                                                               \
      input_grad_row_##D(out + k * g.S, gr + k * g.S, xr + k * g.S, g.S, pw ? pw[c0 + k] : (T)1, mean, rstd, md,   \
                         mdx);                                                                                     \
  }                                                                                                                \
}
// clang-format on
GN_KERNELS(f32, float, lt_sum_f32, lt_dot_f32)
GN_KERNELS(f64, double, lt_sum_f64, lt_dot_f64)

/* The rows (forward) or the groups (backward: each group's channels own their weight and bias gradients) over the
 * pool's threads, a range each, when the work pays; every row is computed as on one thread, so the bits do not
 * depend on the thread count. */
typedef struct gn_job {
  const gn_geom *g;
  const lt_tensor *x, *w, *b, *gy, *stats;
  lt_tensor *out, *gx, *gw, *gb, *st; /* st: the forward's stats */
  double eps;
  int backward;
} gn_job;

static void gn_part(void *arg, int part, int nparts) {
  const gn_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->backward ? j->g->G : j->g->N * j->g->G, part, nparts, 1, &lo, &hi);
  if (lo >= hi) return;
  const int f64 = j->x->dtype == LT_F64;
  if (j->backward && f64) gn_backward_f64(j->g, j->x, j->gy, j->w, j->stats, j->gx, j->gw, j->gb, lo, hi);
  else if (j->backward) gn_backward_f32(j->g, j->x, j->gy, j->w, j->stats, j->gx, j->gw, j->gb, lo, hi);
  else if (f64) gn_forward_f64(j->g, j->x, j->w, j->b, j->out, j->st, j->eps, lo, hi);
  else gn_forward_f32(j->g, j->x, j->w, j->b, j->out, j->st, j->eps, lo, hi);
}

#define GN_PAR_MIN (INT64_C(1) << 16) /* elements below which a pool hand-off does not pay */

static void gn_run(lt_ctx *c, gn_job *j) {
  const int64_t units = j->backward ? j->g->G : j->g->N * j->g->G;
  int parts = lt_pool_parts(c->num_threads, j->g->N * j->g->C * j->g->S, GN_PAR_MIN);
  if (parts > units) parts = (int)units;
  if (parts > 1) lt_pool_run(gn_part, j, parts);
  else gn_part(j, 0, 1);
}

static int gn_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  lt_tensor *x = n->inputs[0], *w = n->inputs[1], *b = n->inputs[2];
  gn_geom g;
  memcpy(&g, n->i, sizeof g);
  lt_tensor *gc = lt_op_contiguous(c, gout), *xc = gc ? lt_op_contiguous(c, x) : NULL;
  lt_tensor *wc = xc && w ? lt_op_contiguous(c, w) : NULL;
  lt_tensor *gx = NULL, *gw = NULL, *gb = NULL;
  if (!xc || (w && !wc)) goto fail;
  if (x->requires_grad && !(gx = lt_tensor_new(c, x->dtype, x->ndim, x->shape))) goto fail;
  if (w && w->requires_grad && !(gw = lt_tensor_zeros(c, x->dtype, 1, &g.C))) goto fail;
  if (b && b->requires_grad && !(gb = lt_tensor_zeros(c, x->dtype, 1, &g.C))) goto fail;
  gn_job j = { .g = &g, .x = xc, .w = wc, .gy = gc, .stats = n->saved[0], .gx = gx, .gw = gw, .gb = gb, .backward = 1 };
  gn_run(c, &j);
  gin[0] = gx;
  gin[1] = gw;
  gin[2] = gb;
  lt_tensor_release(gc);
  lt_tensor_release(xc);
  lt_tensor_release(wc);
  return LT_OK;
fail:
  lt_tensor_release(gc);
  lt_tensor_release(xc);
  lt_tensor_release(wc);
  lt_tensor_release(gx);
  lt_tensor_release(gw);
  lt_tensor_release(gb);
  return LT_ERR;
}

lt_tensor *lt_nn_group_norm(lt_ctx *c, lt_tensor *x, int64_t groups, lt_tensor *weight, lt_tensor *bias, double eps,
                            lt_tensor *running_mean, lt_tensor *running_var, double momentum) {
  char b1[128];
  if (lt_check_float(c, "group_norm", "input", x)) return NULL;
  if (x->ndim < 2) {
    lt_fail(c, "group_norm: input must be [batch x channels x ...], got %s", lt_shape_str(x, b1, sizeof b1));
    return NULL;
  }
  gn_geom g = { x->shape[0], x->shape[1], groups, 1 };
  for (int d = 2; d < x->ndim; d++) g.S *= x->shape[d];
  if (groups < 1 || g.C % groups) {
    lt_fail(c, "group_norm: channels %lld are not divisible by num_groups %lld (input %s)", (long long)g.C,
            (long long)groups, lt_shape_str(x, b1, sizeof b1));
    return NULL;
  }
  if (lt_nn_check_norm_vec(c, "group_norm", "weight", weight, g.C, "channel", x) ||
      lt_nn_check_norm_vec(c, "group_norm", "bias", bias, g.C, "channel", x) ||
      lt_nn_check_norm_vec(c, "group_norm", "running_mean", running_mean, groups, "group", x) ||
      lt_nn_check_norm_vec(c, "group_norm", "running_var", running_var, groups, "group", x))
    return NULL;
  if ((running_mean == NULL) != (running_var == NULL)) {
    lt_fail(c, "group_norm: give both running_mean and running_var, or neither");
    return NULL;
  }
  const int64_t M = (g.C / groups) * g.S, rows = g.N * groups, sshape[2] = { rows, 2 };
  if (running_mean && M < 2) {
    lt_fail(c, "group_norm: running statistics need more than 1 value per instance, got input %s",
            lt_shape_str(x, b1, sizeof b1));
    return NULL;
  }
  lt_tensor *xc = lt_op_contiguous(c, x), *wc = NULL, *bc = NULL;
  lt_tensor *out = xc ? lt_tensor_new(c, x->dtype, x->ndim, x->shape) : NULL;
  lt_tensor *stats = out ? lt_tensor_new(c, x->dtype, 2, sshape) : NULL;
  if (stats && weight) wc = lt_op_contiguous(c, weight);
  if (stats && bias) bc = lt_op_contiguous(c, bias);
  if (!stats || (weight && !wc) || (bias && !bc)) goto fail;
  gn_job j = { .g = &g, .x = xc, .w = wc, .b = bc, .out = out, .st = stats, .eps = eps };
  gn_run(c, &j);
  if (running_mean && x->dtype == LT_F64) gn_running_f64(&g, xc, stats, running_mean, running_var, momentum);
  else if (running_mean) gn_running_f32(&g, xc, stats, running_mean, running_var, momentum);
  lt_tensor_release(xc);
  lt_tensor_release(wc);
  lt_tensor_release(bc);
  lt_tensor *ins[3] = { x, weight, bias };
  lt_node *nd;
  if (lt_record(c, out, "group_norm", gn_backward, 3, ins, &nd)) {
    lt_tensor_release(out);
    lt_tensor_release(stats);
    return NULL;
  }
  if (nd) {
    nd->reads = LT_READS(0) | LT_READS(1); /* x and the weight, not the bias */
    memcpy(nd->i, &g, sizeof g);
    lt_node_save(nd, 0, stats);
  }
  lt_tensor_release(stats);
  return out;
fail:
  lt_tensor_release(xc);
  lt_tensor_release(wc);
  lt_tensor_release(bc);
  lt_tensor_release(out);
  lt_tensor_release(stats);
  return NULL;
}
