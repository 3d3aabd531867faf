/* ops_scan.c — cumsum, cumprod and prod (all elements or along a dim), each with its backward rule.
 * The kernels work on a contiguous copy, one line along the dim at a time (lt_lines.h); float32 and float64
 * sums and products accumulate in double, as torch's CPU kernels do. The backward rules of the products are exact
 * where inputs are zero. */
#include <string.h>

#include "lt_lines.h"
#include "lt_ops.h"

/* --- cumsum / cumprod ------------------------------------------------------------------------------- */

/* The float kernels are written once for float and double (T): each macro below defines both; they
 * accumulate in double either way. */
#define SCAN_KERNEL(NAME, T)                                        \
  static void NAME(const T *x, T *y, const lt_lines *l, int prod) { \
    for (int64_t k = 0, nl = lt_lines_count(l); k < nl; k++) {      \
      int64_t b = lt_line_base(l, k);                               \
      double acc = prod ? 1.0 : 0.0;                                \
      for (int64_t j = 0; j < l->n; j++) {                          \
        int64_t o = b + j * l->inner;                               \
        acc = prod ? acc * x[o] : acc + x[o];                       \
        y[o] = (T)acc;                                              \
      }                                                             \
    }                                                               \
  }
SCAN_KERNEL(scan_f32, float)
SCAN_KERNEL(scan_f64, double)

/* int64 wraps on overflow, as torch's does (unsigned arithmetic keeps it defined) */
static void scan_i64(const int64_t *x, int64_t *y, const lt_lines *l, int prod) {
  for (int64_t k = 0, nl = lt_lines_count(l); k < nl; k++) {
    int64_t b = lt_line_base(l, k);
    uint64_t acc = prod ? 1u : 0u;
    for (int64_t j = 0; j < l->n; j++) {
      int64_t o = b + j * l->inner;
      acc = prod ? acc * (uint64_t)x[o] : acc + (uint64_t)x[o];
      y[o] = (int64_t)acc;
    }
  }
}

/* cumsum's gradient: the reversed cumulative sum of g */
#define CUMSUM_GRAD(NAME, T)                                   \
  static void NAME(const T *pg, T *pr, const lt_lines *l) {    \
    for (int64_t k = 0, nl = lt_lines_count(l); k < nl; k++) { \
      int64_t b = lt_line_base(l, k);                          \
      double acc = 0;                                          \
      for (int64_t j = l->n - 1; j >= 0; j--) {                \
        acc += pg[b + j * l->inner];                           \
        pr[b + j * l->inner] = (T)acc;                         \
      }                                                        \
    }                                                          \
  }
CUMSUM_GRAD(cumsum_grad_f32, float)
CUMSUM_GRAD(cumsum_grad_f64, double)

static int cumsum_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *gc = lt_op_contiguous(c, g);
  lt_tensor *r = gc ? lt_tensor_new_like(c, gc) : NULL;
  if (!r) {
    lt_tensor_release(gc);
    return LT_ERR;
  }
  lt_lines l = lt_lines_of(gc, (int)n->i[0]);
  if (gc->dtype == LT_F64) cumsum_grad_f64(lt_f64(gc), lt_f64(r), &l);
  else cumsum_grad_f32(lt_f32(gc), lt_f32(r), &l);
  lt_tensor_release(gc);
  gin[0] = r;
  return LT_OK;
}

/* The operands of a product's backward: contiguous g and x, and the gradient buffer (x's shape); NULL when
 * one could not be made (nothing is left to release then). */
static lt_tensor *product_grad_operands(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gc, lt_tensor **xc) {
  *gc = lt_op_contiguous(c, g);
  *xc = lt_op_contiguous(c, n->inputs[0]);
  lt_tensor *r = *gc && *xc ? lt_tensor_new_like(c, *xc) : NULL;
  if (!r) {
    lt_tensor_release(*gc);
    lt_tensor_release(*xc);
  }
  return r;
}

/* cumprod's gradient, torch's way in O(n) per line: d y_j / d x_k = prod_{i <= j, i != k} x_i for j >= k.
 * Before the line's first zero z that is (sum_{j >= k} g_j y_j) / x_k; at z, a running product that skips x_z;
 * after z, zero (every product holds x_z). */
#define CUMPROD_GRAD(NAME, T)                                            \
  static void NAME(const T *pg, const T *px, T *pr, const lt_lines *l) { \
    for (int64_t k = 0, nl = lt_lines_count(l); k < nl; k++) {           \
      int64_t b = lt_line_base(l, k), s = l->inner, z = l->n;            \
      double y = 1.0, before_z = 1.0; /* y_j; y_{z-1} */                 \
      for (int64_t j = 0; j < l->n; j++) {                               \
        double x = px[b + j * s];                                        \
        if (x == 0 && z == l->n) {                                       \
          z = j;                                                         \
          before_z = y;                                                  \
        }                                                                \
        y *= x;                                                          \
        pr[b + j * s] = (T)y; /* y_j for now */                          \
      }                                                                  \
      double acc = 0;                                                    \
      for (int64_t j = l->n - 1; j >= 0; j--) {                          \
        acc += (double)pg[b + j * s] * pr[b + j * s];                    \
        pr[b + j * s] = j < z ? (T)(acc / px[b + j * s]) : (T)0;         \
      }                                                                  \
      if (z < l->n) {                                                    \
        double p = before_z, at = pg[b + z * s] * p;                     \
        for (int64_t j = z + 1; j < l->n; j++) {                         \
          p *= px[b + j * s];                                            \
          at += pg[b + j * s] * p;                                       \
        }                                                                \
        pr[b + z * s] = (T)at;                                           \
      }                                                                  \
    }                                                                    \
  }
CUMPROD_GRAD(cumprod_grad_f32, float)
CUMPROD_GRAD(cumprod_grad_f64, double)

static int cumprod_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *gc, *xc, *r = product_grad_operands(c, n, g, &gc, &xc);
  if (!r) return LT_ERR;
  lt_lines l = lt_lines_of(gc, (int)n->i[0]);
  if (xc->dtype == LT_F64) cumprod_grad_f64(lt_f64(gc), lt_f64(xc), lt_f64(r), &l);
  else cumprod_grad_f32(lt_f32(gc), lt_f32(xc), lt_f32(r), &l);
  lt_tensor_release(gc);
  lt_tensor_release(xc);
  gin[0] = r;
  return LT_OK;
}

static lt_tensor *scan(lt_ctx *c, lt_tensor *a, int dim, int prod) {
  lt_tensor *ac = lt_op_contiguous(c, a);
  lt_tensor *out = ac ? lt_tensor_new_like(c, ac) : NULL;
  if (!out) {
    lt_tensor_release(ac);
    return NULL;
  }
  lt_lines l = lt_lines_of(ac, dim);
  if (ac->dtype == LT_I64) scan_i64(lt_i64(ac), lt_i64(out), &l, prod);
  else if (ac->dtype == LT_F64) scan_f64(lt_f64(ac), lt_f64(out), &l, prod);
  else scan_f32(lt_f32(ac), lt_f32(out), &l, prod);
  lt_tensor_release(ac);
  lt_node *nd;
  if (lt_record(c, out, prod ? "cumprod" : "cumsum", prod ? cumprod_backward : cumsum_backward, 1, &a, &nd)) {
    lt_tensor_release(out);
    return NULL;
  }
  if (nd) {
    nd->i[0] = dim;
    if (!prod) nd->reads = 0; /* cumsum's gradient is a reversed cumsum of g */
  }
  return out;
}

lt_tensor *lt_op_cumsum(lt_ctx *c, lt_tensor *a, int dim) { return scan(c, a, dim, 0); }
lt_tensor *lt_op_cumprod(lt_ctx *c, lt_tensor *a, int dim) { return scan(c, a, dim, 1); }

/* --- prod ------------------------------------------------------------------------------------------ */

/* d prod / d x_k = prod_{i != k} x_i, as (product before k) * (product after k): exact with zeros */
#define PROD_GRAD(NAME, T)                                                             \
  static void NAME(const T *pg, const T *px, T *pr, const lt_lines *l) {               \
    for (int64_t k = 0, nl = lt_lines_count(l); k < nl; k++) {                         \
      int64_t b = lt_line_base(l, k), s = l->inner;                                    \
      double before = 1.0;                                                             \
      for (int64_t m = 0; m < l->n; m++) { /* pr holds the product before m for now */ \
        pr[b + m * s] = (T)before;                                                     \
        before *= px[b + m * s];                                                       \
      }                                                                                \
      double after = 1.0;                                                              \
      for (int64_t m = l->n - 1; m >= 0; m--) {                                        \
        pr[b + m * s] = (T)((double)pr[b + m * s] * after * pg[k]);                    \
        after *= px[b + m * s];                                                        \
      }                                                                                \
    }                                                                                  \
  }
PROD_GRAD(prod_grad_f32, float)
PROD_GRAD(prod_grad_f64, double)

static int prod_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *gc, *xc, *r = product_grad_operands(c, n, g, &gc, &xc);
  if (!r) return LT_ERR;
  lt_lines l = lt_lines_of(xc, (int)n->i[0]);
  if (xc->dtype == LT_F64) prod_grad_f64(lt_f64(gc), lt_f64(xc), lt_f64(r), &l);
  else prod_grad_f32(lt_f32(gc), lt_f32(xc), lt_f32(r), &l);
  lt_tensor_release(gc);
  lt_tensor_release(xc);
  gin[0] = r;
  return LT_OK;
}

/* the product of each line, accumulated in double */
#define PROD_LINES(NAME, T)                                          \
  static void NAME(const T *x, T *out, const lt_lines *l) {          \
    for (int64_t q = 0, nl = lt_lines_count(l); q < nl; q++) {       \
      int64_t b = lt_line_base(l, q);                                \
      double acc = 1;                                                \
      for (int64_t j = 0; j < l->n; j++) acc *= x[b + j * l->inner]; \
      out[q] = (T)acc;                                               \
    }                                                                \
  }
PROD_LINES(prod_lines_f32, float)
PROD_LINES(prod_lines_f64, double)

lt_tensor *lt_op_prod(lt_ctx *c, lt_tensor *a, int dim, int keepdim) {
  int64_t shape[LT_MAX_DIM];
  int k = lt_reduced_dims(a, dim, keepdim, shape);
  lt_tensor *ac = lt_op_contiguous(c, a);
  lt_tensor *out = ac ? lt_tensor_new(c, ac->dtype, k, shape) : NULL;
  if (!out) {
    lt_tensor_release(ac);
    return NULL;
  }
  lt_lines l = lt_lines_of(ac, dim);
  if (ac->dtype == LT_I64)
    for (int64_t q = 0, nl = lt_lines_count(&l); q < nl; q++) {
      int64_t b = lt_line_base(&l, q);
      uint64_t acc = 1;
      for (int64_t j = 0; j < l.n; j++) acc *= (uint64_t)lt_i64(ac)[b + j * l.inner];
      lt_i64(out)[q] = (int64_t)acc;
    }
  else if (ac->dtype == LT_F64) prod_lines_f64(lt_f64(ac), lt_f64(out), &l);
  else prod_lines_f32(lt_f32(ac), lt_f32(out), &l);
  lt_tensor_release(ac);
  lt_node *nd;
  if (lt_record(c, out, "prod", prod_backward, 1, &a, &nd)) {
    lt_tensor_release(out);
    return NULL;
  }
  if (nd) nd->i[0] = dim;
  return out;
}
