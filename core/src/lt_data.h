/*
 * lt_data.h — the C side of lt.data: turning IDX data into tensors in one pass, shuffling with a
 * loader's own RNG, and gathering a batch of rows from dataset tensors with no per-sample Lua.
 *
 *   lt_idx_data d;
 *   lt_idx_read(path, &d, err, sizeof err);
 *   lt_tensor *x = lt_data_from_idx(c, &d, LT_DATA_IMAGES, 0);   // u8 [N,28,28] -> float32 [N,1,28,28] / 255
 *   lt_tensor *y = ...(c, &labels, LT_DATA_LABELS, 0);           // u8 [N] -> int64 [N], values + 1
 *   lt_idx_free(&d);
 *
 *   int64_t perm[n]; lt_data_randperm(&rng, n, perm, 0);          // 0-based permutation
 *   lt_tensor *xb = lt_data_gather_rows(c, x, perm + start, 64, 0); // [64,1,28,28], contiguous copy
 *
 * No autograd is recorded: these are data, not maths.
 */
#ifndef LT_DATA_H
#define LT_DATA_H

#include "lt_idx.h"
#include "lt_tensor.h"

typedef enum lt_data_idx_mode {
  LT_DATA_RAW = 0, /* integer types -> int64, float types -> float32, values unchanged */
  LT_DATA_RAW_F32, /* every type -> float32, values unchanged */
  LT_DATA_IMAGES,  /* u8 [N, H, W] -> float32 [N, 1, H, W] in [0, 1] (value / 255) */
  LT_DATA_LABELS   /* integer [N] -> int64 [N], value + 1 (class labels become 1-based) */
} lt_data_idx_mode;

/* A new tensor from IDX data; limit > 0 keeps only the first `limit` entries of dim 1 (fewer if the file
 * has fewer). `what` names the caller in messages ("read_idx", "FashionMNIST"). */
lt_tensor *lt_data_from_idx(lt_ctx *c, const lt_idx_data *d, lt_data_idx_mode mode, int64_t limit, const char *what);

/* Fills perm[0..n) with a uniform random permutation of base..base+n-1 (Fisher-Yates, from r). */
void lt_data_randperm(lt_rng *r, int64_t n, int64_t *perm, int64_t base);

/* A new contiguous tensor with rows[0..count) of src along dim 1; row numbers are rows[j] - base
 * (base 1 for Lua's 1-based indices). Each row is checked against src's first size. */
lt_tensor *lt_data_gather_rows(lt_ctx *c, const lt_tensor *src, const int64_t *rows, int64_t count, int64_t base);

/* A new contiguous copy of rows start..start+count-1 (0-based) of src along dim 1. */
lt_tensor *lt_data_slice_rows(lt_ctx *c, const lt_tensor *src, int64_t start, int64_t count);

#endif
