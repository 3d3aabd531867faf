/* data_batch.c — lt.data's C helpers: IDX data to tensors in one pass, permutations, batch gathers. */
#include <string.h>

#include "lt_data.h"
#include "lt_ops.h"

static int is_integer_type(lt_idx_type t) {
  return t == LT_IDX_U8 || t == LT_IDX_I8 || t == LT_IDX_I16 || t == LT_IDX_I32;
}

/* Element i of IDX data as a double (exact for every IDX type). */
static inline double idx_get(const lt_idx_data *d, size_t i) {
  switch (d->type) {
    case LT_IDX_U8: return ((const uint8_t *)d->data)[i];
    case LT_IDX_I8: return ((const int8_t *)d->data)[i];
    case LT_IDX_I16: return ((const int16_t *)d->data)[i];
    case LT_IDX_I32: return ((const int32_t *)d->data)[i];
    case LT_IDX_F32: return ((const float *)d->data)[i];
    case LT_IDX_F64: return ((const double *)d->data)[i];
  }
  return 0;
}

static const char *type_name(lt_idx_type t) {
  const char *n = lt_idx_type_name((int)t);
  return n ? n : "unknown";
}

lt_tensor *lt_data_from_idx(lt_ctx *c, const lt_idx_data *d, lt_data_idx_mode mode, int64_t limit, const char *what) {
  char b[128];
  if (!d || !d->data || d->ndims < 1) {
    lt_fail(c, "%s: no IDX data", what);
    return NULL;
  }
  int64_t shape[LT_MAX_DIM + 1];
  int ndim = d->ndims;
  if (ndim > LT_MAX_DIM) {
    lt_fail(c, "%s: %d dimensions, at most %d are supported", what, ndim, LT_MAX_DIM);
    return NULL;
  }
  memcpy(shape, d->dims, (size_t)ndim * sizeof *shape);
  int64_t n0 = shape[0];
  if (limit > 0 && limit < n0) n0 = limit;
  shape[0] = n0;
  size_t inner = 1;
  for (int i = 1; i < ndim; i++) inner *= (size_t)shape[i];
  size_t numel = (size_t)n0 * inner;

  lt_dtype dt;
  switch (mode) {
    case LT_DATA_RAW: dt = is_integer_type(d->type) ? LT_I64 : LT_F32; break;
    case LT_DATA_RAW_F32: dt = LT_F32; break;
    case LT_DATA_IMAGES:
      if (d->type != LT_IDX_U8 || ndim != 3) {
        lt_fail(c, "%s: expected images as unsigned bytes [N x H x W], got %s %s", what, type_name(d->type),
                lt_dims_str(ndim, d->dims, b, sizeof b));
        return NULL;
      }
      /* [N, H, W] -> [N, 1, H, W] */
      shape[3] = shape[2];
      shape[2] = shape[1];
      shape[1] = 1;
      ndim = 4;
      dt = LT_F32;
      break;
    case LT_DATA_LABELS:
      if (!is_integer_type(d->type) || ndim != 1) {
        lt_fail(c, "%s: expected labels as integers [N], got %s %s", what, type_name(d->type),
                lt_dims_str(ndim, d->dims, b, sizeof b));
        return NULL;
      }
      dt = LT_I64;
      break;
    default: lt_fail(c, "%s: unknown conversion mode %d", what, (int)mode); return NULL;
  }

  lt_tensor *t = lt_tensor_new(c, dt, ndim, shape);
  if (!t) return NULL;
  if (mode == LT_DATA_IMAGES) {
    const uint8_t *src = d->data;
    float *dst = lt_f32(t);
    const float s = 1.0f / 255.0f;
    for (size_t i = 0; i < numel; i++) dst[i] = (float)src[i] * s;
  } else if (dt == LT_I64) {
    int64_t *dst = lt_i64(t);
    int64_t add = mode == LT_DATA_LABELS ? 1 : 0;
    if (d->type == LT_IDX_U8) {
      const uint8_t *src = d->data;
      for (size_t i = 0; i < numel; i++) dst[i] = (int64_t)src[i] + add;
    } else {
      for (size_t i = 0; i < numel; i++) dst[i] = (int64_t)idx_get(d, i) + add;
    }
  } else {
    float *dst = lt_f32(t);
    if (d->type == LT_IDX_F32) memcpy(dst, d->data, numel * sizeof(float));
    else
      for (size_t i = 0; i < numel; i++) dst[i] = (float)idx_get(d, i);
  }
  return t;
}

void lt_data_randperm(lt_rng *r, int64_t n, int64_t *perm, int64_t base) {
  for (int64_t i = 0; i < n; i++) perm[i] = i + base;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)lt_rng_below(r, (uint64_t)(i + 1));
    int64_t tmp = perm[i];
    perm[i] = perm[j];
    perm[j] = tmp;
  }
}

/* Checks src for row gathers; returns a contiguous reference (retained) or NULL. */
static lt_tensor *rows_source(lt_ctx *c, const lt_tensor *src, const char *op) {
  if (src->ndim < 1) {
    lt_fail(c, "%s: cannot take rows of a 0-dim tensor", op);
    return NULL;
  }
  return lt_op_contiguous(c, (lt_tensor *)src);
}

static lt_tensor *rows_output(lt_ctx *c, const lt_tensor *src, int64_t count) {
  int64_t shape[LT_MAX_DIM];
  memcpy(shape, src->shape, sizeof shape);
  shape[0] = count;
  return lt_tensor_new(c, src->dtype, src->ndim, shape);
}

/* A contiguous rows_source's row: its bytes, and where its first row starts */
static size_t row_bytes(const lt_tensor *s) {
  size_t bytes = lt_dtype_size(s->dtype);
  for (int d = 1; d < s->ndim; d++) bytes *= (size_t)s->shape[d];
  return bytes;
}
static const char *first_row(const lt_tensor *s) {
  return (const char *)s->storage->data + (size_t)s->offset * lt_dtype_size(s->dtype);
}

lt_tensor *lt_data_gather_rows(lt_ctx *c, const lt_tensor *src, const int64_t *rows, int64_t count, int64_t base) {
  lt_tensor *s = rows_source(c, src, "gather_rows");
  if (!s) return NULL;
  lt_tensor *out = rows_output(c, s, count);
  if (!out) {
    lt_tensor_release(s);
    return NULL;
  }
  size_t rb = row_bytes(s);
  const char *from = first_row(s);
  char *to = (char *)out->storage->data;
  int64_t n = s->shape[0];
  for (int64_t j = 0; j < count; j++) {
    int64_t r = rows[j] - base;
    if (r < 0 || r >= n) {
      lt_fail(c, "gather_rows: row %lld out of range 1..%lld", (long long)(r + 1), (long long)n);
      lt_tensor_release(s);
      lt_tensor_release(out);
      return NULL;
    }
    memcpy(to + (size_t)j * rb, from + (size_t)r * rb, rb);
  }
  lt_tensor_release(s);
  return out;
}

lt_tensor *lt_data_slice_rows(lt_ctx *c, const lt_tensor *src, int64_t start, int64_t count) {
  lt_tensor *s = rows_source(c, src, "slice_rows");
  if (!s) return NULL;
  if (start < 0 || count < 0 || start + count > s->shape[0]) {
    lt_fail(c, "slice_rows: rows %lld..%lld out of range 1..%lld", (long long)start + 1, (long long)(start + count),
            (long long)s->shape[0]);
    lt_tensor_release(s);
    return NULL;
  }
  lt_tensor *out = rows_output(c, s, count);
  if (!out) {
    lt_tensor_release(s);
    return NULL;
  }
  size_t rb = row_bytes(s);
  memcpy(out->storage->data, first_row(s) + (size_t)start * rb, (size_t)count * rb);
  lt_tensor_release(s);
  return out;
}
