/* tensor.c — storage, tensor and autograd node lifecycle, shapes, and element access. */
#include "lt_tensor.h"

#include <string.h>

#include "lt_alloc.h"
#include "lt_errors.h"
#include "lt_size.h"

static int64_t live_tensors;

size_t lt_dtype_size(lt_dtype d) { return d == LT_F32 ? 4 : 8; }
const char *lt_dtype_name(lt_dtype d) { return d == LT_I64 ? "int64" : d == LT_F64 ? "float64" : "float32"; }

int64_t lt_tensor_live_count(void) { return __atomic_load_n(&live_tensors, __ATOMIC_RELAXED); }

static lt_storage *storage_new(lt_ctx *c, size_t nbytes) {
  lt_storage *s = lt_alloc(sizeof *s);
  if (!s) {
    lt_fail(c, LT_E_OOM, sizeof *s);
    return NULL;
  }
  s->data = lt_alloc(nbytes);
  if (!s->data) {
    lt_free(s, sizeof *s);
    lt_fail(c, LT_E_OOM, nbytes);
    return NULL;
  }
  atomic_init(&s->refcount, 1); /* not yet seen by another thread */
  s->nbytes = nbytes;
  s->version = 0;
  return s;
}

/* Reference counts as in any shared-ownership runtime: a new reference is made from one the caller holds, so
 * the increment needs no ordering (relaxed); the decrement releases this thread's writes to the object, and the
 * one that reaches zero acquires everyone's before the memory goes back (acq_rel). Most tensors die with one
 * reference: then no other thread holds one, so none can take or drop one concurrently, and an acquire load
 * replaces the locked read-modify-write (tens of ns each here; bench/bench_share.c). */
static void ref_inc(_Atomic int64_t *n) { atomic_fetch_add_explicit(n, 1, memory_order_relaxed); }
static int64_t ref_dec(_Atomic int64_t *n) {
  if (atomic_load_explicit(n, memory_order_acquire) == 1) return 0;
  return atomic_fetch_sub_explicit(n, 1, memory_order_acq_rel) - 1;
}

static void storage_release(lt_storage *s) {
  if (s && ref_dec(&s->refcount) == 0) {
    lt_free(s->data, s->nbytes);
    lt_free(s, sizeof *s);
  }
}

void lt_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride) {
  int64_t st = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    stride[d] = st;
    st *= shape[d] > 0 ? shape[d] : 1;
  }
}

static lt_tensor *header_new(lt_ctx *c) {
  lt_tensor *t = lt_alloc(sizeof *t);
  if (!t) {
    lt_fail(c, LT_E_OOM, sizeof *t);
    return NULL;
  }
  memset(t, 0, sizeof *t);
  atomic_init(&t->refcount, 1);
  __atomic_add_fetch(&live_tensors, 1, __ATOMIC_RELAXED);
  return t;
}

lt_tensor *lt_tensor_new(lt_ctx *c, lt_dtype dt, int ndim, const int64_t *shape) {
  if (ndim < 0 || ndim > LT_MAX_DIM) {
    lt_fail(c, "tensor: %d dimensions requested, at most %d are supported", ndim, LT_MAX_DIM);
    return NULL;
  }
  int64_t n = 1, nbytes;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 0) {
      char buf[128];
      lt_fail(c, "tensor: size %lld of dim %d is negative (shape %s)", (long long)shape[d], d + 1,
              lt_dims_str(ndim, shape, buf, sizeof buf));
      return NULL;
    }
  }
  if (lt_check_size(c, "tensor", ndim, shape)) return NULL;
  for (int d = 0; d < ndim; d++) n *= shape[d]; /* within the span just checked (zeros count as 1 there) */
  if (lt_check_bytes(c, "tensor", ndim, shape, n, (int64_t)lt_dtype_size(dt), &nbytes)) return NULL;
  lt_tensor *t = header_new(c);
  if (!t) return NULL;
  t->storage = storage_new(c, (size_t)nbytes);
  if (!t->storage) {
    lt_tensor_release(t);
    return NULL;
  }
  t->ndim = ndim;
  t->dtype = dt;
  if (ndim) memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim); /* shape may be NULL for 0-dim */
  lt_contiguous_strides(ndim, shape, t->stride);
  return t;
}

lt_tensor *lt_tensor_new_like(lt_ctx *c, const lt_tensor *t) { return lt_tensor_new(c, t->dtype, t->ndim, t->shape); }

lt_tensor *lt_tensor_zeros(lt_ctx *c, lt_dtype dt, int ndim, const int64_t *shape) {
  lt_tensor *t = lt_tensor_new(c, dt, ndim, shape);
  if (t) memset(t->storage->data, 0, t->storage->nbytes);
  return t;
}

lt_tensor *lt_tensor_scalar(lt_ctx *c, double v) {
  lt_tensor *t = lt_tensor_new(c, LT_F32, 0, NULL);
  if (t) lt_f32(t)[0] = (float)v;
  return t;
}

lt_tensor *lt_tensor_scalar_of(lt_ctx *c, lt_dtype dt, double v) {
  if (dt != LT_F64) return lt_tensor_scalar(c, v);
  lt_tensor *t = lt_tensor_new(c, LT_F64, 0, NULL);
  if (t) lt_f64(t)[0] = v;
  return t;
}

lt_tensor *lt_tensor_alias(lt_ctx *c, const lt_tensor *base, int ndim, const int64_t *shape, const int64_t *stride,
                           int64_t offset) {
  /* the ops that make views check their shapes naming themselves; this guards the ones that derive a shape */
  if (lt_check_size(c, "view", ndim, shape)) return NULL;
  lt_tensor *t = header_new(c);
  if (!t) return NULL;
  t->storage = base->storage;
  ref_inc(&t->storage->refcount);
  t->offset = offset;
  t->ndim = ndim;
  t->dtype = base->dtype;
  memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
  memcpy(t->stride, stride, sizeof(int64_t) * (size_t)ndim);
  return t;
}

lt_tensor *lt_broadcast_alias(lt_ctx *c, const lt_tensor *t, int ndim, const int64_t *shape) {
  int64_t st[LT_MAX_DIM];
  int off = ndim - t->ndim;
  for (int d = 0; d < ndim; d++) {
    int td = d - off;
    st[d] = (td < 0 || (t->shape[td] == 1 && shape[d] != 1)) ? 0 : t->stride[td];
  }
  return lt_tensor_alias(c, t, ndim, shape, st, t->offset);
}

lt_tensor *lt_tensor_retain(lt_tensor *t) {
  if (t) ref_inc(&t->refcount);
  return t;
}

/* A tensor holds its node (grad_fn) and a node holds tensors (inputs, saved, its gradient): the two are
 * released together, here. */
void lt_node_free_graph(lt_node *n) {
  for (int i = 0; i < n->ninputs; i++) {
    lt_tensor_release(n->inputs[i]);
    n->inputs[i] = NULL;
  }
  for (int i = 0; i < 3; i++) {
    lt_tensor_release(n->saved[i]);
    n->saved[i] = NULL;
  }
  lt_tensor_release(n->grad_acc);
  n->grad_acc = NULL;
}

void lt_node_release(lt_node *n) {
  if (!n || --n->refcount > 0) return;
  lt_node_free_graph(n);
  if (n->inputs != n->inline_inputs) lt_free(n->inputs, sizeof(lt_tensor *) * (size_t)n->ninputs);
  lt_free(n, sizeof *n);
}

void lt_tensor_release(lt_tensor *t) {
  if (!t || ref_dec(&t->refcount) > 0) return;
  storage_release(t->storage);
  lt_tensor_release(t->grad);
  if (t->grad_fn) lt_node_release(t->grad_fn);
  lt_free(t, sizeof *t);
  __atomic_sub_fetch(&live_tensors, 1, __ATOMIC_RELAXED);
}

int64_t lt_numel(const lt_tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

int lt_is_contiguous(const lt_tensor *t) {
  int64_t st = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (t->shape[d] != 1 && t->stride[d] != st) return 0;
    st *= t->shape[d];
  }
  return 1;
}

char *lt_shape_str(const lt_tensor *t, char *buf, size_t n) { return lt_dims_str(t->ndim, t->shape, buf, n); }

int lt_same_shape(const lt_tensor *a, const lt_tensor *b) {
  if (a->ndim != b->ndim) return 0;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

static int64_t flat_offset(const lt_tensor *t, int64_t i) {
  int64_t off = t->offset;
  for (int d = t->ndim - 1; d >= 0; d--) {
    int64_t s = t->shape[d];
    off += (i % s) * t->stride[d];
    i /= s;
  }
  return off;
}

double lt_get_flat(const lt_tensor *t, int64_t i) {
  int64_t off = flat_offset(t, i);
  if (t->dtype == LT_I64) return (double)((int64_t *)t->storage->data)[off];
  if (t->dtype == LT_F64) return ((double *)t->storage->data)[off];
  return ((float *)t->storage->data)[off];
}

int64_t lt_get_flat_i64(const lt_tensor *t, int64_t i) {
  return ((const int64_t *)t->storage->data)[flat_offset(t, i)];
}
