/*
 * ops_where.c — where and masked_fill: one select kernel over broadcast operands, with their backward rules,
 * split over the pool like the other elementwise kernels (ops_ew_internal.h).
 */
#include <string.h>

#include "lt_ops.h"
#include "lt_simd.h"
#include "ops_ew_internal.h"

/* The one kernel of where and masked_fill, over out's shape with cond (a float32 mask) and src broadcast to it:
 * masked_fill: out = cond ? v : src (one pass from src); where: out = cond ? src : out, after out was filled
 * from the other branch. Written once for float32 and float64 (SELECT_KERNEL); the float32 one is split over
 * the pool like the other elementwise kernels (bitwise the same). */
// clang-format off
#define SELECT_JOB(NAME, T)                                                                         \
  typedef struct NAME {                                                                             \
    lt_iter it;                                                                                     \
    T *po;                                                                                          \
    const float *pc;                                                                                \
    const T *ps;                                                                                    \
    T v;                                                                                            \
    int fill; /* 1: masked_fill, 0: where */                                                        \
    int64_t total;                                                                                  \
  } NAME;

#define SELECT_KERNEL(NAME, JOB, T)                                                                 \
  LT_VECTOR_FN static void NAME(const JOB *j, int64_t lo, int64_t hi) {                             \
    T *po = j->po, v = j->v;                                                                        \
    const float *pc = j->pc;                                                                        \
    const T *ps = j->ps;                                                                            \
    EW_SEGMENTS(&j->it, lo, hi, o0, o1, o2, len) {                                                  \
      T *y = po + o0;                                                                               \
      const float *m = pc + o1;                                                                     \
      const T *x = ps + o2;                                                                         \
      int64_t s0 = j->it.s[0], s1 = j->it.s[1], s2 = j->it.s[2];                                    \
      if (j->fill) {                                                                                \
        if (s0 == 1 && s1 == 1 && s2 == 1)                                                          \
          for (int64_t i = 0; i < len; i++) y[i] = m[i] != 0.0f ? v : x[i];                         \
        else if (s0 == 1 && s1 == 0 && s2 == 1) {                                                   \
          if (m[0] != 0.0f)                                                                         \
            for (int64_t i = 0; i < len; i++) y[i] = v;                                             \
          else                                                                                      \
            for (int64_t i = 0; i < len; i++) y[i] = x[i];                                          \
        } else                                                                                      \
          for (int64_t i = 0; i < len; i++) y[i * s0] = m[i * s1] != 0.0f ? v : x[i * s2];          \
      } else {                                                                                      \
        if (s0 == 1 && s1 == 1 && s2 == 1)                                                          \
          for (int64_t i = 0; i < len; i++) y[i] = m[i] != 0.0f ? x[i] : y[i];                      \
        else                                                                                        \
          for (int64_t i = 0; i < len; i++) y[i * s0] = m[i * s1] != 0.0f ? x[i * s2] : y[i * s0];  \
      }                                                                                             \
    }                                                                                               \
    EW_SEGMENTS_END;                                                                                \
  }
// clang-format on
SELECT_JOB(select_job, float)
SELECT_JOB(select_job_d, double)
SELECT_KERNEL(select_range, select_job, float)
SELECT_KERNEL(select_range_d, select_job_d, double)

static void select_part(void *arg, int i, int nparts) {
  const select_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->total, i, nparts, 16, &lo, &hi);
  if (lo < hi) select_range(j, lo, hi);
}

/* out is fresh and contiguous; cond float32, src out's dtype (float32 or float64), both broadcastable to out
 * (checked by the callers). float64 runs on one thread, as its other elementwise kernels. */
static int select_run(lt_ctx *c, lt_tensor *out, const lt_tensor *cond, const lt_tensor *src, double v, int fill) {
  lt_tensor *cc = lt_broadcast_alias(c, cond, out->ndim, out->shape);
  lt_tensor *cs = cc ? lt_broadcast_alias(c, src, out->ndim, out->shape) : NULL;
  if (!cs) {
    lt_tensor_release(cc);
    return LT_ERR;
  }
  const int64_t *st[3] = { out->stride, cc->stride, cs->stride };
  if (out->dtype == LT_F64) {
    select_job_d j = { .po = lt_f64(out), .pc = lt_f32(cc), .ps = lt_f64(cs), .v = v, .fill = fill };
    lt_iter_init(&j.it, out->ndim, out->shape, 3, st);
    j.total = j.it.rows * j.it.n;
    if (j.total > 0) select_range_d(&j, 0, j.total);
    lt_tensor_release(cc);
    lt_tensor_release(cs);
    return LT_OK;
  }
  select_job j = { .po = lt_f32(out), .pc = lt_f32(cc), .ps = lt_f32(cs), .v = (float)v, .fill = fill };
  lt_iter_init(&j.it, out->ndim, out->shape, 3, st);
  j.total = j.it.rows * j.it.n;
  if (j.total > 0) {
    int parts = ew_parts(c, j.total, 1);
    if (parts > 1) lt_pool_run(select_part, &j, parts);
    else select_range(&j, 0, j.total);
  }
  lt_tensor_release(cc);
  lt_tensor_release(cs);
  return LT_OK;
}

static int where_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *cond = n->saved[0];
  lt_tensor *a = n->inputs[0], *b = n->inputs[1];
  lt_tensor *zero = lt_tensor_scalar(c, 0.0);
  if (!zero) return LT_ERR;
  if (a->requires_grad) gin[0] = lt_sum_to_like(c, lt_op_where(c, cond, g, zero), a);
  if (b->requires_grad) gin[1] = lt_sum_to_like(c, lt_op_where(c, cond, zero, g), b);
  lt_tensor_release(zero);
  return ((a->requires_grad && !gin[0]) || (b->requires_grad && !gin[1])) ? LT_ERR : LT_OK;
}

lt_tensor *lt_op_where(lt_ctx *c, lt_tensor *cond, lt_tensor *a, lt_tensor *b) {
  int nd1, nd2;
  int64_t s1[LT_MAX_DIM], s2[LT_MAX_DIM];
  if (lt_broadcast_shape(c, "where", a, b, &nd1, s1)) return NULL;
  lt_tensor tmp = { .ndim = nd1 };
  memcpy(tmp.shape, s1, sizeof s1);
  if (lt_broadcast_shape(c, "where", cond, &tmp, &nd2, s2)) return NULL;
  /* float64 when either branch is, as PyTorch's type promotion */
  lt_dtype ft = a->dtype == LT_F64 || b->dtype == LT_F64 ? LT_F64 : LT_F32;
  lt_tensor *fa = lt_op_to_dtype(c, a, ft);
  lt_tensor *fb = fa ? lt_op_to_dtype(c, b, ft) : NULL;
  lt_tensor *fc = fb ? lt_op_to_dtype(c, cond, LT_F32) : NULL;
  lt_tensor *out = fc ? lt_tensor_new(c, ft, nd2, s2) : NULL;
  /* out = b, then the elements where cond is set come from a */
  if (out && (lt_op_copy_(c, out, fb) || select_run(c, out, fc, fa, 0.0, 0))) {
    lt_tensor_release(out);
    out = NULL;
  }
  if (out) {
    lt_tensor *ins[2] = { fa, fb };
    lt_node *nd;
    if (lt_record(c, out, "where", where_backward, 2, ins, &nd)) {
      lt_tensor_release(out);
      out = NULL;
    } else if (nd) {
      nd->reads = 0; /* the backward reads only the condition */
      lt_node_save(nd, 0, cond);
    }
  }
  lt_tensor_release(fa);
  lt_tensor_release(fb);
  lt_tensor_release(fc);
  return out;
}

static int masked_fill_backward(lt_ctx *c, lt_node *n, lt_tensor *g, lt_tensor **gin) {
  lt_tensor *x = n->inputs[0];
  lt_tensor *r = lt_op_masked_fill(c, g, n->saved[0], 0.0);  /* no gradient where the value was written */
  gin[0] = r ? lt_op_sum_to(c, r, x->ndim, x->shape) : NULL; /* x may have been broadcast to the mask */
  lt_tensor_release(r);
  return gin[0] ? LT_OK : LT_ERR;
}

lt_tensor *lt_op_masked_fill(lt_ctx *c, lt_tensor *x, lt_tensor *mask, double value) {
  if (x->dtype != LT_F64 && lt_check_dtype(c, "masked_fill", "input", x, LT_F32)) return NULL;
  int nd;
  int64_t shape[LT_MAX_DIM];
  if (lt_broadcast_shape(c, "masked_fill", x, mask, &nd, shape)) return NULL; /* both broadcast, as torch's */
  lt_tensor *fm = lt_op_to_dtype(c, mask, LT_F32);
  lt_tensor *out = fm ? lt_tensor_new(c, x->dtype, nd, shape) : NULL;
  if (out && select_run(c, out, fm, x, value, 1)) {
    lt_tensor_release(out);
    out = NULL;
  }
  if (out) {
    lt_node *node;
    if (lt_record(c, out, "masked_fill", masked_fill_backward, 1, &x, &node)) {
      lt_tensor_release(out);
      out = NULL;
    } else if (node) {
      node->reads = 0; /* the backward reads only the mask */
      lt_node_save(node, 0, fm);
    }
  }
  lt_tensor_release(fm);
  return out;
}
