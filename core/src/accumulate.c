/*
 * accumulate.c — adding into tensors, the kernels gradients are accumulated with: a += alpha * b (autograd's
 * accumulation, and x:add_(y, alpha) after lt_op_axpy_'s checks), out = a + b (the engine's sum of two
 * gradients it may not write into), and sum_to (a gradient summed down to the shape of an input that was
 * broadcast). They record nothing and call no op, so autograd needs nothing of the ops layer. Split over the
 * pool like the elementwise kernels (ops_ew_internal.h): bitwise the same on any number of threads.
 */
#include "lt_accumulate.h"

#include "lt_errors.h"
#include "lt_simd.h"
#include "lt_iter.h"
#include "ops_ew_internal.h"

LT_VECTOR_FN static void axpy_range(const lt_iter *it, float *pa, const float *pb, float al, int64_t lo, int64_t hi) {
  EW_SEGMENTS(it, lo, hi, o0, o1, o2, len) {
    float *x = pa + o0;
    const float *y = pb + o1;
    if (it->s[0] == 1 && it->s[1] == 1) {
      if (al == 1.0f)
        for (int64_t i = 0; i < len; i++) x[i] += y[i];
      else
        for (int64_t i = 0; i < len; i++) x[i] += al * y[i];
    } else {
      for (int64_t i = 0; i < len; i++) x[i * it->s[0]] += al * y[i * it->s[1]];
    }
  }
  EW_SEGMENTS_END;
}

static void axpy_part(void *arg, int i, int nparts) {
  const ew_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->total, i, nparts, 16, &lo, &hi);
  if (lo < hi) axpy_range(&j->it, j->po, j->px, *j->py, lo, hi);
}

void lt_axpy_f32(lt_ctx *c, lt_tensor *a, float al, const lt_tensor *b) {
  int ndim = a->ndim;
  const int64_t *shape = a->shape;
  int64_t sa[LT_MAX_DIM], sb[LT_MAX_DIM];
  lt_broadcast_strides(a, ndim, shape, sa);
  lt_broadcast_strides(b, ndim, shape, sb);
  const int64_t *st[2] = { sa, sb };
  lt_mark_modified(a);
  ew_job j = { .po = lt_f32(a), .px = lt_f32(b), .py = &al };
  lt_iter_init(&j.it, ndim, shape, 2, st);
  j.total = j.it.rows * j.it.n;
  if (j.total == 0) return;
  int parts = overlaps(a, b) ? 1 : ew_parts(c, j.total, 1);
  if (parts > 1) lt_pool_run(axpy_part, &j, parts);
  else axpy_range(&j.it, j.po, j.px, al, 0, j.total);
}

LT_VECTOR_FN static void add_range(const lt_iter *it, float *po, const float *pa, const float *pb, int64_t lo,
                                   int64_t hi) {
  EW_SEGMENTS(it, lo, hi, o0, o1, o2, len) {
    float *y = po + o0;
    const float *x = pa + o1, *z = pb + o2;
    if (it->s[0] == 1 && it->s[1] == 1 && it->s[2] == 1)
      for (int64_t i = 0; i < len; i++) y[i] = x[i] + z[i];
    else
      for (int64_t i = 0; i < len; i++) y[i * it->s[0]] = x[i * it->s[1]] + z[i * it->s[2]];
  }
  EW_SEGMENTS_END;
}

static void add_part(void *arg, int i, int nparts) {
  const ew_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->total, i, nparts, 16, &lo, &hi);
  if (lo < hi) add_range(&j->it, j->po, j->px, j->py, lo, hi);
}

void lt_add_f32(lt_ctx *c, lt_tensor *out, const lt_tensor *a, const lt_tensor *b) {
  const int64_t *st[3] = { out->stride, a->stride, b->stride };
  ew_job j = { .po = lt_f32(out), .px = lt_f32(a), .py = lt_f32(b) };
  lt_iter_init(&j.it, out->ndim, out->shape, 3, st);
  j.total = j.it.rows * j.it.n;
  if (j.total == 0) return;
  int parts = ew_parts(c, j.total, 1);
  if (parts > 1) lt_pool_run(add_part, &j, parts);
  else add_range(&j.it, j.po, j.px, j.py, 0, j.total);
}

/* ---- float64: plain strided loops, on one thread (float64 is asked for its precision) ---------------- */

void lt_axpy_f64(lt_tensor *a, double alpha, const lt_tensor *b) {
  int64_t sa[LT_MAX_DIM], sb[LT_MAX_DIM];
  lt_broadcast_strides(a, a->ndim, a->shape, sa);
  lt_broadcast_strides(b, a->ndim, a->shape, sb);
  const int64_t *st[2] = { sa, sb };
  lt_iter it;
  lt_iter_init(&it, a->ndim, a->shape, 2, st);
  lt_mark_modified(a);
  double *pa = lt_f64(a);
  const double *pb = lt_f64(b);
  LT_ITER_ROWS(&it, o0, o1, o2) {
    for (int64_t i = 0; i < it.n; i++) pa[o0 + i * it.s[0]] += alpha * pb[o1 + i * it.s[1]];
  }
  LT_ITER_ROWS_END(&it, o0, o1, o2);
}

void lt_add_f64(lt_tensor *out, const lt_tensor *a, const lt_tensor *b) {
  const int64_t *st[3] = { out->stride, a->stride, b->stride };
  lt_iter it;
  lt_iter_init(&it, out->ndim, out->shape, 3, st);
  double *po = lt_f64(out);
  const double *pa = lt_f64(a), *pb = lt_f64(b);
  LT_ITER_ROWS(&it, o0, o1, o2) {
    for (int64_t i = 0; i < it.n; i++) po[o0 + i * it.s[0]] = pa[o1 + i * it.s[1]] + pb[o2 + i * it.s[2]];
  }
  LT_ITER_ROWS_END(&it, o0, o1, o2);
}

/* The iteration of a sum into out over g's shape: out (operand 0) broadcast to it, so that each of g's elements
 * (operand 1) meets the element of out it adds to. */
static void sum_to_iter(lt_iter *it, const lt_tensor *out, const lt_tensor *g) {
  int64_t so[LT_MAX_DIM];
  lt_broadcast_strides(out, g->ndim, g->shape, so);
  const int64_t *st[2] = { so, g->stride };
  lt_iter_init(it, g->ndim, g->shape, 2, st);
}

static void sum_to_f64(lt_tensor *out, const lt_tensor *g) {
  lt_iter it;
  sum_to_iter(&it, out, g);
  double *po = lt_f64(out);
  const double *pg = lt_f64(g);
  LT_ITER_ROWS(&it, o0, o1, o2) {
    for (int64_t i = 0; i < it.n; i++) po[o0 + i * it.s[0]] += pg[o1 + i * it.s[1]];
  }
  LT_ITER_ROWS_END(&it, o0, o1, o2);
}

LT_VECTOR_FN lt_tensor *lt_op_sum_to(lt_ctx *c, lt_tensor *g, int ndim, const int64_t *shape) {
  char b1[128], b2[128];
  if (ndim > g->ndim) goto bad;
  for (int d = 0; d < ndim; d++) {
    int64_t gs = g->shape[d + g->ndim - ndim];
    if (shape[d] != gs && shape[d] != 1) goto bad;
  }
  lt_tensor *out = lt_tensor_zeros(c, g->dtype == LT_F64 ? LT_F64 : LT_F32, ndim, shape);
  if (!out) return NULL;
  if (g->dtype == LT_F64) {
    sum_to_f64(out, g);
    return out;
  }
  lt_iter it;
  sum_to_iter(&it, out, g);
  float *po = lt_f32(out);
  const float *pg = lt_f32(g);
  LT_ITER_ROWS(&it, o0, o1, o2) {
    float *y = po + o0;
    const float *x = pg + o1;
    if (it.s[0] == 0) {
      double s = 0;
      if (it.s[1] == 1) s = lt_sum_f32(x, it.n);
      else
        for (int64_t i = 0; i < it.n; i++) s += x[i * it.s[1]];
      y[0] += (float)s;
    } else if (it.s[0] == 1 && it.s[1] == 1) {
      for (int64_t i = 0; i < it.n; i++) y[i] += x[i];
    } else {
      for (int64_t i = 0; i < it.n; i++) y[i * it.s[0]] += x[i * it.s[1]];
    }
  }
  LT_ITER_ROWS_END(&it, o0, o1, o2);
  return out;
bad:
  lt_fail(c, "sum_to: cannot reduce %s to %s", lt_shape_str(g, b1, sizeof b1), lt_dims_str(ndim, shape, b2, sizeof b2));
  return NULL;
}

lt_tensor *lt_sum_to_like(lt_ctx *c, lt_tensor *t, const lt_tensor *like) {
  if (!t) return NULL;
  if (lt_same_shape(t, like)) return t;
  lt_tensor *r = lt_op_sum_to(c, t, like->ndim, like->shape);
  lt_tensor_release(t);
  return r;
}
