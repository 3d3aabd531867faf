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
 */
#include <math.h>
#include <string.h>

#include "lt_ctx.h"
#include "lt_errors.h"
#include "lt_nn.h"
#include "lt_simd.h"

typedef struct gn_geom {
  int64_t N, C, G, S; /* S: positions per channel */
} gn_geom;

/* Row loops in float lanes (compiled per CPU); the sums end in double (lt_sum_f32, lt_dot_f32). */
/* sum of (x - m)^2 over a row: the second pass of a two-pass variance (no cancellation when |mean| >> std) */
LT_VECTOR_FN static double sq_dev_sum(const float *x, int64_t n, float m) {
  double total = 0;
  for (int64_t b = 0; b < n; b += 4096) {
    const int64_t e = b + 4096 < n ? b + 4096 : n;
    float acc[16] = { 0 };
    int64_t i = b;
    for (; i + 16 <= e; i += 16)
      for (int l = 0; l < 16; l++) acc[l] += (x[i + l] - m) * (x[i + l] - m);
    for (; i < e; i++) acc[0] += (x[i] - m) * (x[i] - m);
    for (int l = 0; l < 16; l++) total += acc[l];
  }
  return total;
}

/* y = x * scale + shift over a row */
LT_VECTOR_FN static void affine_row(float *restrict y, const float *restrict x, int64_t n, float scale, float shift) {
  for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale + shift;
}

/* gx = rstd * (g * w - md - (x - mean) * rstd * mdx) over a row */
LT_VECTOR_FN static void input_grad_row(float *restrict gx, const float *restrict g, const float *restrict x, int64_t n,
                                        float w, float mean, float rstd, float md, float mdx) {
  for (int64_t i = 0; i < n; i++) gx[i] = rstd * (g[i] * w - md - (x[i] - mean) * rstd * mdx);
}

static int gn_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  lt_tensor *x = n->inputs[0], *w = n->inputs[1], *b = n->inputs[2];
  gn_geom g;
  memcpy(&g, n->i, sizeof g);
  const int64_t Cg = g.C / g.G, M = Cg * g.S;
  lt_tensor *gc = lt_op_contiguous(c, gout), *xc = gc ? lt_op_contiguous(c, x) : NULL;
  lt_tensor *wc = xc && w ? lt_op_contiguous(c, w) : NULL;
  lt_tensor *gx = NULL, *gw = NULL, *gb = NULL;
  if (!xc || (w && !wc)) goto fail;
  if (x->requires_grad && !(gx = lt_tensor_new(c, LT_F32, x->ndim, x->shape))) goto fail;
  if (w && w->requires_grad && !(gw = lt_tensor_zeros(c, LT_F32, 1, &g.C))) goto fail;
  if (b && b->requires_grad && !(gb = lt_tensor_zeros(c, LT_F32, 1, &g.C))) goto fail;
  const float *px = lt_f32(xc), *py = lt_f32(gc), *pw = w ? lt_f32(wc) : NULL, *st = lt_f32(n->saved[0]);
  for (int64_t row = 0; row < g.N * g.G; row++) {
    const float mean = st[2 * row], rstd = st[2 * row + 1];
    const int64_t c0 = (row % g.G) * Cg;
    const float *xr = px + row * M, *gr = py + row * M;
    double sd = 0, sdx = 0; /* sums of dxhat and dxhat * xhat over the row */
    for (int64_t k = 0; k < Cg; k++) {
      const float wk = pw ? pw[c0 + k] : 1.0f;
      /* sum g and sum g * xhat = rstd * (sum g*x - mean * sum g) */
      const double sg = lt_sum_f32(gr + k * g.S, g.S);
      const double sgx = rstd * (lt_dot_f32(gr + k * g.S, xr + k * g.S, g.S) - (double)mean * sg);
      sd += wk * sg;
      sdx += wk * sgx;
      if (gw) lt_f32(gw)[c0 + k] += (float)sgx;
      if (gb) lt_f32(gb)[c0 + k] += (float)sg;
    }
    if (!gx) continue;
    const float md = (float)(sd / (double)M), mdx = (float)(sdx / (double)M);
    float *out = lt_f32(gx) + row * M;
    for (int64_t k = 0; k < Cg; k++)
      input_grad_row(out + k * g.S, gr + k * g.S, xr + k * g.S, g.S, pw ? pw[c0 + k] : 1.0f, mean, rstd, md, mdx);
  }
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
  if (lt_check_dtype(c, "group_norm", "input", x, LT_F32)) return NULL;
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
  lt_tensor *out = xc ? lt_tensor_new(c, LT_F32, x->ndim, x->shape) : NULL;
  lt_tensor *stats = out ? lt_tensor_new(c, LT_F32, 2, sshape) : NULL;
  if (stats && weight) wc = lt_op_contiguous(c, weight);
  if (stats && bias) bc = lt_op_contiguous(c, bias);
  if (!stats || (weight && !wc) || (bias && !bc)) goto fail;
  const float *px = lt_f32(xc), *pw = weight ? lt_f32(wc) : NULL, *pb = bias ? lt_f32(bc) : NULL;
  float *po = lt_f32(out), *st = lt_f32(stats);
  for (int64_t row = 0; row < rows; row++) {
    const float *xr = px + row * M;
    const float fm = (float)(lt_sum_f32(xr, M) / (double)M);
    const double var = sq_dev_sum(xr, M, fm) / (double)M;
    const float rstd = (float)(1.0 / sqrt(var + eps));
    st[2 * row] = fm;
    st[2 * row + 1] = rstd;
    const int64_t c0 = (row % groups) * (g.C / groups);
    for (int64_t k = 0; k < g.C / groups; k++) { /* (x - mean) * rstd * w + b as one multiply-add */
      const float scale = rstd * (pw ? pw[c0 + k] : 1.0f), bk = pb ? pb[c0 + k] : 0.0f;
      affine_row(po + row * M + k * g.S, xr + k * g.S, g.S, scale, bk - fm * scale);
    }
  }
  for (int64_t gr = 0; running_mean && gr < groups; gr++) { /* batch averages of the row statistics */
    double sm = 0, sv = 0;
    for (int64_t i = 0; i < g.N; i++) {
      const int64_t row = i * groups + gr;
      sm += st[2 * row];
      sv += sq_dev_sum(px + row * M, M, st[2 * row]) / (double)(M - 1);
    }
    float *rm = lt_f32(running_mean) + gr * running_mean->stride[0],
          *rv = lt_f32(running_var) + gr * running_var->stride[0];
    *rm = (float)((1 - momentum) * *rm + momentum * sm / (double)g.N);
    *rv = (float)((1 - momentum) * *rv + momentum * sv / (double)g.N);
  }
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
