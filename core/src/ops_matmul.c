/* ops_matmul.c — matmul (1-D, 2-D, batched with broadcasting) and the fused linear layer, on sgemm.
 * Contiguous and transposed-contiguous operands go to the BLAS as they are: no copies. */
#include <limits.h>
#include <string.h>

#include "lt_blas.h"
#include "lt_errors.h"
#include "lt_gemm_bf16.h"
#include "lt_ops.h"

int lt_gemm(lt_ctx *c, int transa, int transb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
            int64_t lda, const float *b, int64_t ldb, float beta, float *cc, int64_t ldc) {
  lt_gemm_bf16_scope(c); /* matmul, bmm, linear, conv: autocast's precision */
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX)
    return lt_fail(c, LT_E_BLAS_SIZE);
  if (m == 0 || n == 0) return LT_OK;
  if (lt_blas_ready(c)) return LT_ERR;
  if (k == 0) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) cc[i * ldc + j] = beta == 0 ? 0 : beta * cc[i * ldc + j];
    return LT_OK;
  }
  lt_blas_sgemm(transa, transb, (int)m, (int)n, (int)k, alpha, a, (int)(lda ? lda : 1), b, (int)(ldb ? ldb : 1), beta,
                cc, (int)(ldc ? ldc : 1));
  return LT_OK;
}

/* How a 2-D slice (rows, cols, row stride, col stride) can be handed to the BLAS. */
static int blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int *trans, int64_t *ld) {
  if (cs == 1 && (rs >= cols || rows == 1)) {
    *trans = 0;
    *ld = rows == 1 ? (cols > 0 ? cols : 1) : rs;
    return 1;
  }
  if (rs == 1 && (cs >= rows || cols == 1)) {
    *trans = 1;
    *ld = cols == 1 ? (rows > 0 ? rows : 1) : cs;
    return 1;
  }
  return 0;
}

/* 2-D only: adds op(x) @ op(y) (x [r x k], y [k x s] after transposing by tx/ty) into the leaf gradient `acc`
 * [r x s] in one GEMM with beta = 1, when both operands have BLAS layouts; 0 when it cannot (the caller then
 * produces the gradient as usual). */
static int gemm_accumulate(lt_ctx *c, lt_tensor *acc, const lt_tensor *x, int tx, const lt_tensor *y, int ty, int *rc) {
  int64_t r = acc->shape[0], s = acc->shape[1], k = tx ? x->shape[0] : x->shape[1];
  int ta, tb;
  int64_t lda, ldb;
  /* op(x) [r x k] as stored: x's strides, swapped when x is used transposed */
  int64_t xrs = tx ? x->stride[1] : x->stride[0], xcs = tx ? x->stride[0] : x->stride[1];
  int64_t yrs = ty ? y->stride[1] : y->stride[0], ycs = ty ? y->stride[0] : y->stride[1];
  if (!blas_layout(r, k, xrs, xcs, &ta, &lda) || !blas_layout(k, s, yrs, ycs, &tb, &ldb)) return 0;
  *rc = lt_gemm(c, ta, tb, r, s, k, 1.0f, lt_f32(x), lda, lt_f32(y), ldb, 1.0f, lt_f32(acc), s);
  return 1;
}

/* The gradient of a matmul's operand `like`: l @ r^T (transpose_r) or l^T @ r, summed down to like's shape
 * where batch dims were broadcast. */
static lt_tensor *operand_grad(lt_ctx *c, lt_tensor *l, lt_tensor *r, int transpose_r, const lt_tensor *like) {
  lt_tensor *t = transpose_r ? r : l;
  lt_tensor *tt = lt_op_transpose(c, t, t->ndim - 2, t->ndim - 1);
  lt_tensor *g = tt ? lt_op_matmul(c, transpose_r ? l : tt, transpose_r ? tt : r) : NULL;
  lt_tensor_release(tt);
  if (g && !lt_same_shape(g, like)) {
    lt_tensor *s = lt_op_sum_to(c, g, like->ndim, like->shape);
    lt_tensor_release(g);
    g = s;
  }
  return g;
}

static int matmul_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *a = n->inputs[0], *b = n->inputs[1];
  /* a 2-D product whose operand is a leaf with a gradient already: add into it in the GEMM (see linear) */
  const lt_tensor *ops[3] = { a, b, g };
  int two_d = a->ndim == 2 && b->ndim == 2 && g->ndim == 2, rc = LT_OK;
  lt_tensor *aacc = two_d && a->requires_grad ? lt_grad_inplace_target(a, ops, 3) : NULL;
  lt_tensor *bacc = two_d && b->requires_grad ? lt_grad_inplace_target(b, ops, 3) : NULL;
  int a_done = aacc && gemm_accumulate(c, aacc, g, 0, b, 1, &rc); /* a.grad += g @ b^T */
  if (rc) return LT_ERR;
  int b_done = bacc && gemm_accumulate(c, bacc, a, 1, g, 0, &rc); /* b.grad += a^T @ g */
  if (rc) return LT_ERR;
  if (a->requires_grad && !a_done && !(gin[0] = operand_grad(c, g, b, 1, a))) return LT_ERR; /* g @ b^T */
  if (b->requires_grad && !b_done && !(gin[1] = operand_grad(c, a, g, 0, b))) return LT_ERR; /* a^T @ g */
  return LT_OK;
}

/* a [..., n, k] @ b [..., k, m], both at least 2-D. */
static lt_tensor *matmul_nd(lt_ctx *c, lt_tensor *a, lt_tensor *b) {
  char b1[128], b2[128];
  int na = a->ndim, nb = b->ndim;
  int64_t n = a->shape[na - 2], k = a->shape[na - 1], m = b->shape[nb - 1];
  if (b->shape[nb - 2] != k) {
    lt_fail(c, LT_E_MATMUL_SHAPE, lt_shape_str(a, b1, sizeof b1), lt_shape_str(b, b2, sizeof b2), na, nb - 1);
    return NULL;
  }
  /* broadcast batch dims */
  int nbatch = (na > nb ? na : nb) - 2;
  int64_t bshape[LT_MAX_DIM];
  for (int d = 0; d < nbatch; d++) {
    int da = d - (nbatch - (na - 2)), db = d - (nbatch - (nb - 2));
    int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      lt_fail(c, "matmul: batch dims of a %s and b %s cannot be broadcast", lt_shape_str(a, b1, sizeof b1),
              lt_shape_str(b, b2, sizeof b2));
      return NULL;
    }
    bshape[d] = sa == 1 ? sb : sa;
  }
  int64_t oshape[LT_MAX_DIM];
  memcpy(oshape, bshape, sizeof(int64_t) * (size_t)nbatch);
  oshape[nbatch] = n;
  oshape[nbatch + 1] = m;
  lt_tensor *out = lt_tensor_new(c, a->dtype, nbatch + 2, oshape);
  if (!out) return NULL;
  int f64 = a->dtype == LT_F64;
  int ta = 0, tb = 0;
  int64_t lda = 1, ldb = 1;
  lt_tensor *ac = NULL, *bc = NULL;
  if (!blas_layout(n, k, a->stride[na - 2], a->stride[na - 1], &ta, &lda)) {
    ac = lt_tensor_new(c, a->dtype, na, a->shape);
    if (!ac || lt_op_copy_(c, ac, a)) goto fail;
    blas_layout(n, k, ac->stride[na - 2], ac->stride[na - 1], &ta, &lda);
  }
  if (!blas_layout(k, m, b->stride[nb - 2], b->stride[nb - 1], &tb, &ldb)) {
    bc = lt_tensor_new(c, b->dtype, nb, b->shape);
    if (!bc || lt_op_copy_(c, bc, b)) goto fail;
    blas_layout(k, m, bc->stride[nb - 2], bc->stride[nb - 1], &tb, &ldb);
  }
  const lt_tensor *A = ac ? ac : a, *Bm = bc ? bc : b;
  int64_t nb_total = 1;
  for (int d = 0; d < nbatch; d++) nb_total *= bshape[d];
  for (int64_t bi = 0; bi < nb_total; bi++) {
    /* offsets of this batch in a and b (broadcast dims stay at 0) */
    int64_t rem = bi, offa = 0, offb = 0;
    for (int d = nbatch - 1; d >= 0; d--) {
      int64_t idx = rem % bshape[d];
      rem /= bshape[d];
      int da = d - (nbatch - (na - 2)), db = d - (nbatch - (nb - 2));
      if (da >= 0 && A->shape[da] != 1) offa += idx * A->stride[da];
      if (db >= 0 && Bm->shape[db] != 1) offb += idx * Bm->stride[db];
    }
    if (f64 ? lt_gemm_f64(c, ta, tb, n, m, k, 1.0, lt_f64(A) + offa, lda, lt_f64(Bm) + offb, ldb, 0.0,
                          lt_f64(out) + bi * n * m, m)
            : lt_gemm(c, ta, tb, n, m, k, 1.0f, lt_f32(A) + offa, lda, lt_f32(Bm) + offb, ldb, 0.0f,
                      lt_f32(out) + bi * n * m, m))
      goto fail;
  }
  lt_tensor_release(ac);
  lt_tensor_release(bc);
  lt_tensor *ins[2] = { a, b };
  lt_node *nd;
  if (lt_record(c, out, "matmul", matmul_backward, 2, ins, &nd)) {
    lt_tensor_release(out);
    return NULL;
  }
  /* a's gradient multiplies by b, b's by a: each operand is read only for the other's gradient */
  if (nd) nd->reads = (b->requires_grad ? LT_READS(0) : 0) | (a->requires_grad ? LT_READS(1) : 0);
  return out;
fail:
  lt_tensor_release(ac);
  lt_tensor_release(bc);
  lt_tensor_release(out);
  return NULL;
}

lt_tensor *lt_op_matmul(lt_ctx *c, lt_tensor *a, lt_tensor *b) {
  char b1[128], b2[128];
  if (a->dtype == LT_F64 || b->dtype == LT_F64) { /* float64 @ float64; a mix is an error, as PyTorch's */
    if (a->dtype != b->dtype) {
      lt_fail(c, "matmul: a is %s and b is %s: both must have the same float dtype", lt_dtype_name(a->dtype),
              lt_dtype_name(b->dtype));
      return NULL;
    }
  } else if (lt_check_dtype(c, "matmul", "a", a, LT_F32) || lt_check_dtype(c, "matmul", "b", b, LT_F32)) return NULL;
  if (a->ndim == 0 || b->ndim == 0) {
    lt_fail(c, "matmul: both arguments must have at least 1 dimension, got a %s and b %s",
            lt_shape_str(a, b1, sizeof b1), lt_shape_str(b, b2, sizeof b2));
    return NULL;
  }
  if (a->ndim == 1 && b->ndim == 1 && a->shape[0] != b->shape[0]) {
    lt_fail(c, LT_E_MATMUL_SHAPE, lt_shape_str(a, b1, sizeof b1), lt_shape_str(b, b2, sizeof b2), 1, 1);
    return NULL;
  }
  if (a->ndim >= 2 && b->ndim == 1 && a->shape[a->ndim - 1] != b->shape[0]) {
    lt_fail(c, LT_E_MATMUL_SHAPE, lt_shape_str(a, b1, sizeof b1), lt_shape_str(b, b2, sizeof b2), a->ndim, 1);
    return NULL;
  }
  if (a->ndim == 1 && b->ndim >= 2 && a->shape[0] != b->shape[b->ndim - 2]) {
    lt_fail(c, LT_E_MATMUL_SHAPE, lt_shape_str(a, b1, sizeof b1), lt_shape_str(b, b2, sizeof b2), 1, b->ndim - 1);
    return NULL;
  }
  /* 1-D operands: promote with a size-1 dim, multiply, drop it again (views carry the gradient) */
  lt_tensor *A = a->ndim == 1 ? lt_op_unsqueeze(c, a, 0) : lt_tensor_retain(a);
  lt_tensor *Bm = A ? (b->ndim == 1 ? lt_op_unsqueeze(c, b, 1) : lt_tensor_retain(b)) : NULL;
  lt_tensor *r = Bm ? matmul_nd(c, A, Bm) : NULL;
  lt_tensor_release(A);
  lt_tensor_release(Bm);
  if (r && (a->ndim == 1 || b->ndim == 1)) {
    lt_tensor *s = r;
    if (b->ndim == 1) {
      s = lt_op_squeeze(c, r, r->ndim - 1);
      lt_tensor_release(r);
      r = s;
    }
    if (r && a->ndim == 1) {
      s = lt_op_squeeze(c, r, r->ndim - (b->ndim == 1 ? 1 : 2));
      lt_tensor_release(r);
      r = s;
    }
  }
  return r;
}

/* ---- linear: y = x W^T + b, one GEMM with the bias preloaded into the output ------------------ */

/* The gradients of y = x W^T + b given dL/dy as a contiguous gc (taken over: released here); the arithmetic
 * is lt_linear_grads_f32's (ops_linear_grads.c). */
static int linear_grads(lt_ctx *c, lt_node *n, lt_tensor *gc, lt_tensor **gin) {
  lt_gemm_bf16_scope(c);
  if (lt_blas_ready(c)) return LT_ERR; /* its jobs call lt_blas_sgemm */
  lt_tensor *x = n->inputs[0], *w = n->inputs[1], *b = n->ninputs > 2 ? n->inputs[2] : NULL;
  int64_t out_f = w->shape[0], in_f = w->shape[1];
  int64_t rows = lt_numel(x) / (in_f ? in_f : 1);
  lt_tensor *xc = gc ? lt_op_contiguous(c, x) : NULL;
  lt_tensor *wc = xc ? lt_op_contiguous(c, w) : NULL;
  lt_tensor *gx = NULL, *gw = NULL, *gb = NULL;
  if (!wc) goto fail;
  if (rows > INT_MAX || in_f > INT_MAX || out_f > INT_MAX) {
    lt_fail(c, LT_E_BLAS_SIZE);
    goto fail;
  }
  /* gx [rows, in] = g [rows, out] @ W [out, in] */
  if (x->requires_grad && !(gx = lt_tensor_new(c, LT_F32, x->ndim, x->shape))) goto fail;
  const lt_tensor *const ops[3] = { gc, xc, wc };
  lt_tensor *wacc = w->requires_grad ? lt_grad_inplace_target(w, ops, 3) : NULL;
  /* W.grad += g^T @ x in the GEMM itself (gin[1] stays NULL), else gW [out, in] = g^T [out, rows] @ x [rows, in] */
  if (w->requires_grad && !wacc && !(gw = lt_tensor_new(c, LT_F32, 2, w->shape))) goto fail;
  if (b && b->requires_grad && !(gb = lt_tensor_zeros(c, LT_F32, 1, &out_f))) goto fail; /* column sums of g */
  if (rows > 0 && in_f > 0 && out_f > 0)
    lt_linear_grads_f32(c, lt_f32(gc), lt_f32(xc), lt_f32(wc), gx ? lt_f32(gx) : NULL,
                        wacc ? lt_f32(wacc)
                        : gw ? lt_f32(gw)
                             : NULL,
                        wacc ? 1.0f : 0.0f, gb ? lt_f32(gb) : NULL, rows, in_f, out_f);
  else if (gx || gw) { /* an empty product: zeros (beta = 0 on nothing summed) */
    if (gx) lt_op_fill_(c, gx, 0.0);
    if (gw) lt_op_fill_(c, gw, 0.0);
  }
  gin[0] = gx;
  gin[1] = gw;
  if (gb) gin[2] = gb;
  lt_tensor_release(gc);
  lt_tensor_release(xc);
  lt_tensor_release(wc);
  return LT_OK;
fail:
  lt_tensor_release(gx);
  lt_tensor_release(gw);
  lt_tensor_release(gb);
  lt_tensor_release(gc);
  lt_tensor_release(xc);
  lt_tensor_release(wc);
  return LT_ERR;
}

static int linear_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  return linear_grads(c, n, lt_op_contiguous(c, g), gin);
}

/* linear followed by ReLU in one node: dL/d(pre-activation) = g where the output is > 0, else 0 */
static int linear_relu_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  return linear_grads(c, n, lt_relu_grad(c, g, n->saved[0]), gin);
}

/* float64 linear: x @ W^T (+ b) (then relu) composed of the float64 ops, whose nodes carry the gradients */
static lt_tensor *linear_f64(lt_ctx *c, lt_tensor *x, lt_tensor *w, lt_tensor *b, lt_act act) {
  char b1[128], b2[128];
  if (x->dtype != LT_F64 || w->dtype != LT_F64 || (b && b->dtype != LT_F64)) {
    lt_fail(c, "linear: input is %s, weight %s, bias %s: all must have the same float dtype", lt_dtype_name(x->dtype),
            lt_dtype_name(w->dtype), b ? lt_dtype_name(b->dtype) : "none");
    return NULL;
  }
  if (w->ndim != 2 || x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1] ||
      (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))) {
    lt_fail(c, "linear: input %s, weight %s (must be [out x in], in = the input's last size) and bias %s do not fit",
            lt_shape_str(x, b1, sizeof b1), lt_shape_str(w, b2, sizeof b2), b ? "[out]" : "none");
    return NULL;
  }
  lt_tensor *wt = lt_op_transpose(c, w, 0, 1);
  lt_tensor *y = wt ? lt_op_matmul(c, x, wt) : NULL;
  lt_tensor_release(wt);
  if (y && b) {
    lt_tensor *yb = lt_op_binary(c, LT_ADD, y, b);
    lt_tensor_release(y);
    y = yb;
  }
  if (y && act == LT_ACT_GELU_TANH && lt_check_no_f64(c, "linear_gelu_tanh", y)) {
    lt_tensor_release(y);
    return NULL;
  }
  if (y && (act == LT_ACT_RELU || act == LT_ACT_GELU)) {
    lt_tensor *r = lt_op_unary(c, act == LT_ACT_RELU ? LT_RELU : LT_GELU, y);
    lt_tensor_release(y);
    y = r;
  }
  return y;
}

/* linear followed by GELU in one node: the node keeps the pre-activation (saved[0]); dL/d(pre-activation) =
 * g * gelu'(pre), in g's own buffer when the engine holds the only reference to it */
static int linear_gelu_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  const lt_tensor *pre = n->saved[0];
  lt_tensor *gc = lt_op_contiguous(c, g);
  lt_tensor *d = !gc ? NULL
                 : lt_is_contiguous(g) && g->refcount == 2 && g->storage->refcount == 1
                     ? lt_tensor_retain(gc) /* gc is g: the engine's reference and ours */
                     : lt_tensor_new(c, LT_F32, pre->ndim, pre->shape);
  if (d) lt_gelu_grad_f32(c, lt_f32(pre), lt_f32(gc), lt_f32(d), lt_numel(pre), n->i[0] == LT_ACT_GELU_TANH);
  lt_tensor_release(gc);
  return linear_grads(c, n, d, gin);
}

/* po [rows x out_f] = x [rows x in_f] W^T + b (b NULL: no bias), then the ReLU when relu. Where lutra's tile runs the
 * product, the bias and the ReLU are applied as it writes po (one pass over the output, on every thread of the
 * GEMM); elsewhere the bias is preloaded into po, the GEMM adds into it and the ReLU follows. The same bits either
 * way the tile runs it (lt_blas_linear_tile). */
static int linear_product(lt_ctx *c, int64_t rows, int64_t out_f, int64_t in_f, const float *x, const float *w,
                          const float *b, int relu, float *po) {
  lt_gemm_bf16_scope(c); /* autocast's precision, which lt_blas_linear_tile leaves to lt_gemm */
  if (rows > 0 && out_f > 0 && in_f > 0 && rows <= INT_MAX && out_f <= INT_MAX && in_f <= INT_MAX) {
    if (lt_blas_ready(c)) return LT_ERR;
    if (lt_blas_linear_tile((int)rows, (int)out_f, (int)in_f, x, (int)in_f, w, (int)in_f, b, relu, po, (int)out_f))
      return LT_OK;
  }
  if (b)
    for (int64_t r = 0; r < rows; r++) memcpy(po + r * out_f, b, sizeof(float) * (size_t)out_f);
  int rc = lt_gemm(c, 0, 1, rows, out_f, in_f, 1.0f, x, in_f, w, in_f, b ? 1.0f : 0.0f, po, out_f);
  if (!rc && relu) lt_relu_inplace_f32(po, rows * out_f);
  return rc;
}

static const char *act_op_name(lt_act act) {
  switch (act) {
    case LT_ACT_RELU: return "linear_relu";
    case LT_ACT_GELU: return "linear_gelu";
    case LT_ACT_GELU_TANH: return "linear_gelu_tanh";
    default: return "linear";
  }
}

lt_tensor *lt_op_linear_act(lt_ctx *c, lt_tensor *x, lt_tensor *w, lt_tensor *b, lt_act act) {
  char b1[128], b2[128];
  if (x->dtype == LT_F64 || w->dtype == LT_F64 || (b && b->dtype == LT_F64)) return linear_f64(c, x, w, b, act);
  if (lt_check_dtype(c, "linear", "input", x, LT_F32) || lt_check_dtype(c, "linear", "weight", w, LT_F32)) return NULL;
  if (w->ndim != 2) {
    lt_fail(c, "linear: weight must be 2-D [out x in], got %s", lt_shape_str(w, b1, sizeof b1));
    return NULL;
  }
  int64_t out_f = w->shape[0], in_f = w->shape[1];
  if (x->ndim < 1 || x->shape[x->ndim - 1] != in_f) {
    lt_fail(c, "linear: input has %lld features, expected %lld (input %s, weight %s)",
            (long long)(x->ndim ? x->shape[x->ndim - 1] : 0), (long long)in_f, lt_shape_str(x, b1, sizeof b1),
            lt_shape_str(w, b2, sizeof b2));
    return NULL;
  }
  if (b && (b->ndim != 1 || b->shape[0] != out_f || b->dtype != LT_F32)) {
    lt_fail(c, "linear: bias must be float32 [%lld], got %s", (long long)out_f, lt_shape_str(b, b1, sizeof b1));
    return NULL;
  }
  int64_t oshape[LT_MAX_DIM];
  memcpy(oshape, x->shape, sizeof oshape);
  oshape[x->ndim - 1] = out_f;
  lt_tensor *ins[3] = { x, w, b };
  int gelu = act == LT_ACT_GELU || act == LT_ACT_GELU_TANH;
  lt_tensor *out = lt_tensor_new(c, LT_F32, x->ndim, oshape);
  /* GELU with a backward to come: the GEMM writes the pre-activation, which the node keeps; without one the
   * GELU runs in place */
  int keep_pre = gelu && lt_needs_grad(c, b ? 3 : 2, ins);
  lt_tensor *pre = out && keep_pre ? lt_tensor_new(c, LT_F32, x->ndim, oshape) : NULL;
  lt_tensor *xc = out && (pre || !keep_pre) ? lt_op_contiguous(c, x) : NULL;
  lt_tensor *wc = xc ? lt_op_contiguous(c, w) : NULL;
  if (!wc) {
    lt_tensor_release(out);
    lt_tensor_release(pre);
    lt_tensor_release(xc);
    return NULL;
  }
  int64_t rows = lt_numel(x) / (in_f ? in_f : 1);
  float *po = lt_f32(pre ? pre : out);
  lt_tensor *bc = b ? lt_op_contiguous(c, b) : NULL;
  int rc = b && !bc ? LT_ERR
                    : linear_product(c, rows, out_f, in_f, lt_f32(xc), lt_f32(wc), bc ? lt_f32(bc) : NULL,
                                     act == LT_ACT_RELU, po);
  lt_tensor_release(bc);
  lt_tensor_release(xc);
  lt_tensor_release(wc);
  if (rc) {
    lt_tensor_release(out);
    lt_tensor_release(pre);
    return NULL;
  }
  /* GELU while the GEMM's output is in cache (the ReLU was applied with the product) */
  if (gelu) lt_gelu_f32(c, po, lt_f32(out), lt_numel(out), act == LT_ACT_GELU_TANH);
  lt_node *nd;
  if (lt_record(c, out, act_op_name(act),
                act == LT_ACT_RELU ? linear_relu_backward
                : gelu             ? linear_gelu_backward
                                   : linear_backward,
                b ? 3 : 2, ins, &nd)) {
    lt_tensor_release(out);
    lt_tensor_release(pre);
    return NULL;
  }
  /* x is read for the weight's gradient, w for the input's; the bias never */
  if (nd) nd->reads = (w->requires_grad ? LT_READS(0) : 0) | (x->requires_grad ? LT_READS(1) : 0);
  if (nd && gelu) {
    nd->i[0] = act;
    lt_node_save(nd, 0, pre);
  }
  lt_tensor_release(pre);
  if (nd && act == LT_ACT_RELU && lt_node_save_output(c, nd, 0, out)) {
    lt_tensor_release(out);
    return NULL;
  }
  return out;
}

lt_tensor *lt_op_linear(lt_ctx *c, lt_tensor *x, lt_tensor *w, lt_tensor *b) {
  return lt_op_linear_act(c, x, w, b, LT_ACT_NONE);
}
