/*
 * nn_conv_general.c — grouped and dilated 2-D convolution and its transpose, forward and backward side by side.
 *
 * One geometry describes a convolution from x [N, C, H, W] to y [N, O, HO, WO] with weight [O, C/G, KH, KW]
 * in G groups. Three passes on it do all the work, per item and per group, by im2col + GEMM (conv_run):
 *   CONV_FORWARD      y  = W @ im2col(x)                       (the convolution)
 *   CONV_INPUT_GRAD   gx = col2im(W^T @ gy)                    (its adjoint in x)
 *   CONV_WEIGHT_GRAD  gW += gy @ im2col(x)^T
 * The transposed convolution is the adjoint of a convolution: its forward is CONV_INPUT_GRAD of the convolution
 * that maps its output space back to its input space (with the same weight tensor, [Cin, Cout/G, KH, KW]), its
 * input gradient is CONV_FORWARD and its weight gradient CONV_WEIGHT_GRAD with the roles of x and gy swapped.
 * float32 with one group, dilated or not, goes to nn_conv.c's tuned kernel instead (lt_nn_conv2d_ex dispatches), so
 * here run groups and float64; one input channel per group (depthwise) goes to the direct kernels of
 * nn_conv_depthwise.c (conv_run dispatches).
 */
#include <string.h>

#include "lt_alloc.h"
#include "lt_blas.h"
#include "lt_conv.h"
#include "lt_conv_dw.h"
#include "lt_ctx.h"
#include "lt_errors.h"
#include "lt_nn.h"
#include "lt_pool.h"
#include "lt_simd.h"
#include "lt_size.h"

typedef struct gconv_geom {
  int64_t N, C, H, W, O, KH, KW, SH, SW, PH, PW, DH, DW, HO, WO, G;
  int64_t T; /* 1: the node is a transposed convolution, whose adjoint this geometry describes */
} gconv_geom;
_Static_assert(sizeof(gconv_geom) <= sizeof(((lt_node *)0)->i), "gconv_geom must fit in a node's integer slots");

static int64_t g_cg(const gconv_geom *g) { return g->C / g->G; }             /* input channels per group */
static int64_t g_og(const gconv_geom *g) { return g->O / g->G; }             /* output channels per group */
static int64_t g_kg(const gconv_geom *g) { return g_cg(g) * g->KH * g->KW; } /* rows of one group's col */
static int64_t g_p(const gconv_geom *g) { return g->HO * g->WO; }

/* the first element of a contiguous tensor, in its dtype */
static void *data(const lt_tensor *t) { return (char *)t->storage->data + (size_t)t->offset * lt_dtype_size(t->dtype); }

static void *conv_scratch(lt_ctx *c, size_t es, int64_t n) {
  void *p = lt_alloc(es * (size_t)n);
  if (!p) lt_fail(c, LT_E_OOM, es * (size_t)n);
  return p;
}

/* The three passes, per chunk of nb items and per group, over one col buffer [Kg, nb*P] (item i's columns at
 * i*P) and one buffer t [Og, nb*P] of the chunk's outputs, so each GEMM spans the chunk (wide enough for
 * OpenBLAS's kernels and threads even on 4x4 planes); the items' unfolds and folds run on lutra's pool:
 *   CONV_FORWARD      y [N, O, HO, WO] = conv(x [N, C, H, W], w)          (in = x, other = w, out = y, overwritten)
 *   CONV_INPUT_GRAD   gx [N, C, H, W] += the adjoint of conv applied to gy (in = gy, other = w, out = gx)
 *   CONV_WEIGHT_GRAD  gw [O, C/G, KH, KW] += gy @ im2col(x)^T over the batch (in = x, other = gy, out = gw) */
typedef enum conv_pass { CONV_FORWARD, CONV_INPUT_GRAD, CONV_WEIGHT_GRAD } conv_pass;

#define CONV_CHUNK_FLOATS (INT64_C(1) << 18) /* col buffer per chunk: 1 MiB, in cache next to the GEMM's panels */
#define CONV_PAR_MIN (INT64_C(1) << 15)      /* floats unfolded or folded below which the pool does not pay */
#define CONV_CHUNK_MAX_P 512                 /* output planes (HO*WO) from which items go one at a time */

/* Threads for one pass: the batch cut into one range of items per thread (lt_conv_split_parts), each running the
 * one-thread pass on its own scratch (conv_unfold.h's conv_run): chunks whose GEMMs alone were split kept the
 * unfolds and gathers on the caller and had each thread pack the shared operand. */
static int conv_split_parts(lt_ctx *c, const gconv_geom *g) {
  return lt_conv_split_parts(c, g->N, g->O, g_kg(g), g_p(g));
}

/* the kernels of both dtypes from one source (conv_unfold.h): *_f32 and *_f64 */
#define CONV_T float
#define CONV_SFX f32
#define CONV_GEMM lt_gemm
#define CONV_SUM lt_sum_f32 /* vector lanes, then double */
#include "conv_unfold.h"
#undef CONV_T
#undef CONV_SFX
#undef CONV_GEMM
#undef CONV_SUM
#define CONV_T double
#define CONV_SFX f64
#define CONV_GEMM lt_gemm_f64
#define CONV_SUM lt_sum_f64
#include "conv_unfold.h"
#undef CONV_T
#undef CONV_SFX
#undef CONV_GEMM
#undef CONV_SUM

/* a pass in the tensors' dtype (in, other and out share it); float32 depthwise (groups of one input channel)
 * takes the direct kernels, with no col buffer and no per-plane GEMMs. One group of one channel does not: there
 * the "channel multiplier" is every output channel (a transposed convolution to 1 channel, as a DCGAN's last
 * layer, 32->1 k4 s2: 5x slower in the direct kernel's stride-2 scatter than one GEMM per item) */
static int conv_run(lt_ctx *c, const gconv_geom *g, conv_pass pass, lt_dtype dt, const void *in, const void *other,
                    void *out) {
  if (dt == LT_F64) return conv_run_f64(c, g, pass, in, other, out, NULL, NULL);
  if (g_cg(g) == 1 && g->G > 1 && g->KH * g->KW <= LT_CONV_DW_MAX_TAPS) {
    const lt_dw_geom d = { g->N,  g->C,  g_og(g), g->H,  g->W,  g->HO, g->WO, g->KH,
                           g->KW, g->SH, g->SW,   g->PH, g->PW, g->DH, g->DW };
    switch (pass) {
      case CONV_FORWARD: lt_conv_dw_forward(c, &d, in, other, out); break;
      case CONV_INPUT_GRAD: lt_conv_dw_input_grad(c, &d, in, other, out); break;
      case CONV_WEIGHT_GRAD: lt_conv_dw_weight_grad(c, &d, in, other, out); break;
    }
    return LT_OK;
  }
  return conv_run_f32(c, g, pass, in, other, out, NULL, NULL);
}

/* CONV_FORWARD into out and CONV_WEIGHT_GRAD of (in, wg_gy) into wg_out: one unfold of in for both on the GEMM
 * path, two passes where conv_run takes the depthwise kernels */
static int conv_run_fwd_wg(lt_ctx *c, const gconv_geom *g, lt_dtype dt, const void *in, const void *w, void *out,
                           const void *wg_gy, void *wg_out) {
  if (dt == LT_F64) return conv_run_f64(c, g, CONV_FORWARD, in, w, out, wg_gy, wg_out);
  if (g_cg(g) == 1 && g->G > 1)
    return conv_run(c, g, CONV_FORWARD, dt, in, w, out) || conv_run(c, g, CONV_WEIGHT_GRAD, dt, in, wg_gy, wg_out);
  return conv_run_f32(c, g, CONV_FORWARD, in, w, out, wg_gy, wg_out);
}

/* y [N, Ch, P] += b[ch] in y's dtype */
static void add_bias(lt_tensor *y, const lt_tensor *b, int64_t N, int64_t Ch, int64_t P) {
  if (y->dtype == LT_F64) add_bias_f64(lt_f64(y), lt_f64(b), N, Ch, P);
  else add_bias_f32(lt_f32(y), lt_f32(b), N, Ch, P);
}

/* gb [Ch] = sums of gy [N, Ch, P] over the batch and the plane */
static lt_tensor *bias_grad(lt_ctx *c, const lt_tensor *gy, int64_t N, int64_t Ch, int64_t P) {
  lt_tensor *gb = lt_tensor_new(c, gy->dtype, 1, &Ch);
  if (!gb) return NULL;
  if (gy->dtype == LT_F64) bias_sums_f64(lt_f64(gy), N, Ch, P, lt_f64(gb));
  else bias_sums_f32(lt_f32(gy), N, Ch, P, lt_f32(gb));
  return gb;
}

/* the checks both ops share: dtypes, ranks, the bias, the group counts and the scalar options */
static int check_common(lt_ctx *c, const char *op, lt_tensor *x, lt_tensor *w, lt_tensor *b, int64_t bias_len,
                        const int *s, const int *p, const int *d, int groups) {
  char b1[128], b2[128];
  if (lt_conv_check_dtypes(c, op, x, w, b)) return LT_ERR;
  if (x->ndim != 4)
    return lt_fail(c, "%s: input must be 4-D [batch x channels x height x width], got %s", op,
                   lt_shape_str(x, b1, sizeof b1));
  if (w->ndim != 4) return lt_fail(c, "%s: weight must be 4-D, got %s", op, lt_shape_str(w, b1, sizeof b1));
  if (w->shape[2] < 1 || w->shape[3] < 1)
    return lt_fail(c, "%s: the kernel must be at least 1x1, got weight %s", op, lt_shape_str(w, b1, sizeof b1));
  if (s[0] < 1 || s[1] < 1 || p[0] < 0 || p[1] < 0 || d[0] < 1 || d[1] < 1)
    return lt_fail(c,
                   "%s: stride and dilation must be >= 1 and padding >= 0, got stride %dx%d, padding %dx%d, "
                   "dilation %dx%d",
                   op, s[0], s[1], p[0], p[1], d[0], d[1]);
  if (groups < 1) return lt_fail(c, "%s: groups must be >= 1, got %d", op, groups);
  if (x->shape[1] % groups)
    return lt_fail(c, "%s: input channels %lld are not divisible by groups %d (input %s)", op, (long long)x->shape[1],
                   groups, lt_shape_str(x, b1, sizeof b1));
  if (b && (b->ndim != 1 || b->shape[0] != bias_len))
    return lt_fail(c, "%s: bias must be [%lld], got %s (weight %s)", op, (long long)bias_len,
                   lt_shape_str(b, b1, sizeof b1), lt_shape_str(w, b2, sizeof b2));
  return LT_OK;
}

/* the contiguous copies (or retained originals) of x, w and b; NULL b stays NULL */
static int contiguous3(lt_ctx *c, lt_tensor *x, lt_tensor *w, lt_tensor *b, lt_tensor **xc, lt_tensor **wc,
                       lt_tensor **bc) {
  *xc = lt_op_contiguous(c, x);
  *wc = *xc ? lt_op_contiguous(c, w) : NULL;
  *bc = *wc && b ? lt_op_contiguous(c, b) : NULL;
  if (*wc && (!b || *bc)) return LT_OK;
  lt_tensor_release(*xc);
  lt_tensor_release(*wc);
  return LT_ERR;
}

/* ---- convolution ------------------------------------------------------------------------------------------ */

/* Both ops' backward: the convolution's gradients, or (transposed) those of its adjoint (see the top of the file) */
static int gconv_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  lt_tensor *x = n->inputs[0], *w = n->inputs[1], *b = n->ninputs > 2 ? n->inputs[2] : NULL;
  gconv_geom g;
  memcpy(&g, n->i, sizeof g);
  lt_tensor *gc = lt_op_contiguous(c, gout), *xc = NULL, *wc = NULL, *gx = NULL, *gw = NULL, *gb = NULL;
  if (!gc) return LT_ERR;
  const lt_dtype dt = gc->dtype;
  const void *gy = data(gc);
  if (g.T && x->requires_grad && w->requires_grad) { /* both gradients unfold gy: once */
    if (!(wc = lt_op_contiguous(c, w)) || !(xc = lt_op_contiguous(c, x)) || !(gx = lt_tensor_new(c, dt, 4, x->shape)) ||
        !(gw = lt_tensor_zeros(c, dt, 4, w->shape)) ||
        conv_run_fwd_wg(c, &g, dt, gy, data(wc), data(gx), data(xc), data(gw)))
      goto fail;
  } else if (x->requires_grad) {
    if (!(wc = lt_op_contiguous(c, w))) goto fail;
    if (g.T ? !(gx = lt_tensor_new(c, dt, 4, x->shape)) || conv_run(c, &g, CONV_FORWARD, dt, gy, data(wc), data(gx))
            : !(gx = lt_tensor_zeros(c, dt, 4, x->shape)) ||
                  conv_run(c, &g, CONV_INPUT_GRAD, dt, gy, data(wc), data(gx)))
      goto fail;
  }
  if (w->requires_grad && !gw) {
    if (!(xc = lt_op_contiguous(c, x)) || !(gw = lt_tensor_zeros(c, dt, 4, w->shape))) goto fail;
    if (g.T ? conv_run(c, &g, CONV_WEIGHT_GRAD, dt, gy, data(xc), data(gw))
            : conv_run(c, &g, CONV_WEIGHT_GRAD, dt, data(xc), gy, data(gw)))
      goto fail;
  }
  /* the bias is on the output: the convolution's [N, O, P], the transpose's [N, C, H*W] */
  if (b && b->requires_grad &&
      !(gb = g.T ? bias_grad(c, gc, g.N, g.C, g.H * g.W) : bias_grad(c, gc, g.N, g.O, g_p(&g))))
    goto fail;
  gin[0] = gx;
  gin[1] = gw;
  if (b) gin[2] = gb;
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
  return LT_ERR;
}

/* Both ops' forward on their geometry: the convolution (CONV_FORWARD into [N, O, HO, WO]) or, when g->T, the
 * transpose (CONV_INPUT_GRAD of its adjoint into [N, C, H, W]); the bias added; the node recorded */
static lt_tensor *run_forward(lt_ctx *c, const char *op, const gconv_geom *g, lt_tensor *x, lt_tensor *w,
                              lt_tensor *b) {
  const int64_t oshape[4] = { g->N, g->T ? g->C : g->O, g->T ? g->H : g->HO, g->T ? g->W : g->WO };
  lt_tensor *xc, *wc, *bc;
  if (contiguous3(c, x, w, b, &xc, &wc, &bc)) return NULL;
  lt_tensor *out = g->T ? lt_tensor_zeros(c, x->dtype, 4, oshape) : lt_tensor_new(c, x->dtype, 4, oshape);
  int rc =
      out ? conv_run(c, g, g->T ? CONV_INPUT_GRAD : CONV_FORWARD, x->dtype, data(xc), data(wc), data(out)) : LT_ERR;
  if (!rc && b) add_bias(out, bc, g->N, oshape[1], oshape[2] * oshape[3]);
  lt_tensor_release(xc);
  lt_tensor_release(wc);
  lt_tensor_release(bc);
  lt_tensor *ins[3] = { x, w, b };
  lt_node *nd = NULL;
  if (rc || lt_record(c, out, op, gconv_backward, b ? 3 : 2, ins, &nd)) {
    lt_tensor_release(out);
    return NULL;
  }
  if (nd) {
    nd->reads = (w->requires_grad ? LT_READS(0) : 0) | (x->requires_grad ? LT_READS(1) : 0); /* x for gw, w for gx */
    memcpy(nd->i, g, sizeof *g);
  }
  return out;
}

lt_tensor *lt_nn_conv2d(lt_ctx *c, lt_tensor *x, lt_tensor *w, lt_tensor *b, int sh, int sw, int ph, int pw) {
  return lt_nn_conv2d_act(c, x, w, b, sh, sw, ph, pw, LT_ACT_NONE);
}

/* float32: the tuned kernel with the activation fused; float64: im2col + dgemm here, then the activation as its op */
lt_tensor *lt_nn_conv2d_act(lt_ctx *c, lt_tensor *x, lt_tensor *w, lt_tensor *b, int sh, int sw, int ph, int pw,
                            lt_act act) {
  if (lt_conv_check_dtypes(c, "conv2d", x, w, b)) return NULL;
  if (x->dtype != LT_F64) return lt_nn_conv2d_f32_act(c, x, w, b, sh, sw, ph, pw, act);
  const int s[2] = { sh, sw }, p[2] = { ph, pw }, d[2] = { 1, 1 };
  lt_tensor *y = lt_nn_conv2d_ex(c, x, w, b, s, p, d, 1);
  if (!y || act != LT_ACT_RELU) return y;
  lt_tensor *r = lt_op_unary(c, LT_RELU, y);
  lt_tensor_release(y);
  return r;
}

lt_tensor *lt_nn_conv2d_ex(lt_ctx *c, lt_tensor *x, lt_tensor *w, lt_tensor *b, const int *stride, const int *padding,
                           const int *dilation, int groups) {
  const char *op = "conv2d";
  char b1[128], b2[128];
  if (check_common(c, op, x, w, b, w->ndim == 4 ? w->shape[0] : 0, stride, padding, dilation, groups)) return NULL;
  /* float32 without dilation or groups: the tuned kernel (and its fused forms); dilated, below, once the sizes hold */
  if (x->dtype == LT_F32 && dilation[0] == 1 && dilation[1] == 1 && groups == 1)
    return lt_nn_conv2d_f32_act(c, x, w, b, stride[0], stride[1], padding[0], padding[1], LT_ACT_NONE);
  if (w->shape[0] % groups) {
    lt_fail(c, "%s: out_channels %lld are not divisible by groups %d (weight %s)", op, (long long)w->shape[0], groups,
            lt_shape_str(w, b1, sizeof b1));
    return NULL;
  }
  if (x->shape[1] / groups != w->shape[1]) { /* x->shape[1] is a multiple of groups (check_common) */
    lt_fail(c, "%s: input has %lld channels, expected weight's %lld x %d groups (input %s, weight %s)", op,
            (long long)x->shape[1], (long long)w->shape[1], groups, lt_shape_str(x, b1, sizeof b1),
            lt_shape_str(w, b2, sizeof b2));
    return NULL;
  }
  gconv_geom g = {
    x->shape[0], x->shape[1], x->shape[2], x->shape[3], w->shape[0], w->shape[2], w->shape[3], stride[0], stride[1],
    padding[0],  padding[1],  dilation[0], dilation[1], 0,           0,           groups,      0
  };
  /* the dilated kernel's extent; past 2^62 it is larger than any padded input (H <= 2^62, padding < 2^31) */
  int64_t eh = LT_SIZE_LIMIT, ew = LT_SIZE_LIMIT;
  if (!lt_size_mul(g.DH, g.KH - 1, &eh)) eh++;
  if (!lt_size_mul(g.DW, g.KW - 1, &ew)) ew++;
  if (g.H + 2 * g.PH < eh || g.W + 2 * g.PW < ew) {
    lt_fail(c,
            "%s: output size would be <= 0: dilated kernel %lldx%lld is larger than the padded input %lldx%lld "
            "(input %s, weight %s)",
            op, (long long)eh, (long long)ew, (long long)(g.H + 2 * g.PH), (long long)(g.W + 2 * g.PW),
            lt_shape_str(x, b1, sizeof b1), lt_shape_str(w, b2, sizeof b2));
    return NULL;
  }
  g.HO = (g.H + 2 * g.PH - eh) / g.SH + 1;
  g.WO = (g.W + 2 * g.PW - ew) / g.SW + 1;
  /* float32, one group, dilated: the tuned kernel too (a dilated wide layer reads its input in place there: 64->64 k3
   * d2 on 28x28 was 0.78x PyTorch here on im2col + OpenBLAS) */
  if (x->dtype == LT_F32 && groups == 1) return lt_nn_conv2d_f32_dilated(c, x, w, b, stride, padding, dilation);
  const int64_t oshape[4] = { g.N, g.O, g.HO, g.WO };
  if (lt_conv_check_sizes(c, op, oshape, g_kg(&g), g.HO, g.WO)) return NULL;
  return run_forward(c, op, &g, x, w, b);
}

/* ---- transposed convolution ------------------------------------------------------------------------------- */
/* The node keeps the geometry of the adjoint convolution (from the output space [N, Cout, HO, WO] back to the
 * input space [N, Cin, H, W]) with T = 1. */

/* (n - 1) s - 2 p + d (k - 1) + op + 1, a transposed convolution's output size (n >= 0, k >= 1, the options
 * checked); 1 when a term is past 2^62 */
static int transpose_out_size(int64_t n, int64_t k, int64_t s, int64_t p, int64_t op, int64_t d, int64_t *out) {
  int64_t a, b;
  if (lt_size_mul(d, k - 1, &b) || lt_size_add(b, op + 1, &b)) return 1;
  if (n == 0) a = b - s;
  else if (lt_size_mul(n - 1, s, &a) || lt_size_add(a, b, &a)) return 1;
  *out = a - 2 * p;
  return 0;
}

lt_tensor *lt_nn_conv_transpose2d(lt_ctx *c, lt_tensor *x, lt_tensor *w, lt_tensor *b, const int *stride,
                                  const int *padding, const int *output_padding, const int *dilation, int groups) {
  const char *op = "conv_transpose2d";
  char b1[128], b2[128];
  int64_t cout = 0; /* past 2^62: no bias matches, and the output check below names it */
  if (w->ndim == 4 && lt_size_mul(w->shape[1], groups, &cout)) cout = LT_SIZE_LIMIT + 1;
  if (check_common(c, op, x, w, b, cout, stride, padding, dilation, groups)) return NULL;
  if (x->shape[1] != w->shape[0]) {
    lt_fail(c,
            "%s: input has %lld channels, expected %lld (input %s, weight %s [in_channels x out_channels/groups x "
            "kh x kw])",
            op, (long long)x->shape[1], (long long)w->shape[0], lt_shape_str(x, b1, sizeof b1),
            lt_shape_str(w, b2, sizeof b2));
    return NULL;
  }
  for (int k = 0; k < 2; k++)
    if (output_padding[k] < 0 || (output_padding[k] >= stride[k] && output_padding[k] >= dilation[k])) {
      lt_fail(c, "%s: output_padding %dx%d must be >= 0 and smaller than either stride %dx%d or dilation %dx%d", op,
              output_padding[0], output_padding[1], stride[0], stride[1], dilation[0], dilation[1]);
      return NULL;
    }
  const int64_t H = x->shape[2], W = x->shape[3], KH = w->shape[2], KW = w->shape[3];
  int64_t HO, WO;
  if (transpose_out_size(H, KH, stride[0], padding[0], output_padding[0], dilation[0], &HO) ||
      transpose_out_size(W, KW, stride[1], padding[1], output_padding[1], dilation[1], &WO)) {
    lt_fail(c, "%s: an output size is past 2^62 (input %s, weight %s, stride %dx%d, dilation %dx%d)", op,
            lt_shape_str(x, b1, sizeof b1), lt_shape_str(w, b2, sizeof b2), stride[0], stride[1], dilation[0],
            dilation[1]);
    return NULL;
  }
  if (HO < 1 || WO < 1) {
    lt_fail(c, "%s: output size %lldx%lld is <= 0 (input %s, weight %s, stride %dx%d, padding %dx%d, dilation %dx%d)",
            op, (long long)HO, (long long)WO, lt_shape_str(x, b1, sizeof b1), lt_shape_str(w, b2, sizeof b2), stride[0],
            stride[1], padding[0], padding[1], dilation[0], dilation[1]);
    return NULL;
  }
  /* the adjoint convolution: [N, Cout, HO, WO] -> [N, Cin, H, W], weight [Cin, Cout/G, KH, KW] */
  gconv_geom g = { x->shape[0], cout,       HO,          WO,          x->shape[1], KH, KW,     stride[0], stride[1],
                   padding[0],  padding[1], dilation[0], dilation[1], H,           W,  groups, 1 };
  const int64_t oshape[4] = { g.N, cout, HO, WO };
  if (lt_conv_check_sizes(c, op, oshape, g_kg(&g), H, W)) return NULL;
  return run_forward(c, op, &g, x, w, b);
}
