/*
 * lt_idx.h — reader for IDX files (the MNIST / Fashion-MNIST format), plain or gzip-compressed.
 *
 *   lt_idx_data d;
 *   char err[512];
 *   if (lt_idx_read("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", &d, err, sizeof err))
 *     return error(err);            // "read_idx: <path>: <what is wrong>"
 *   // d.type == LT_IDX_U8, d.ndims == 3, d.dims = {60000, 28, 28}, d.data has d.nbytes bytes
 *   ... copy d.data into a tensor (converting u8 -> float32 / int64 as wanted) ...
 *   lt_idx_free(&d);
 *
 * Format: bytes 0x00 0x00 <type code> <ndims>, then ndims big-endian uint32 sizes, then the elements
 * in row-major order, multi-byte types big-endian. zlib's gzread reads gzip and plain files alike.
 *
 * Data is returned raw, tagged with its type (no conversion to float): element values are exactly those
 * in the file, already converted to the host's byte order, so d.data can be read as uint8_t[], int8_t[],
 * int16_t[], int32_t[], float[] or double[] according to d.type. (The caller decides what a dataset
 * becomes: images u8 -> float32 / 255, labels u8 -> int64 + 1.) The buffer comes from malloc.
 *
 * Checked, each a clear error: the file opens, magic bytes 0x00 0x00, a known type code, 1..8 dims,
 * every dim > 0, the total size fits in memory, the data is all present ("truncated: expected N bytes of
 * data, got M"), no bytes after it ("trailing garbage"), the gzip stream is not corrupt. A missing file is
 * "read_idx: <path>: cannot open: No such file or directory"; the Lua layer adds the hint about the
 * Debian package.
 */
#ifndef LT_IDX_H
#define LT_IDX_H

#include <stddef.h>
#include <stdint.h>

#define LT_IDX_MAX_DIMS 8

/* The enum values are the IDX type codes. */
typedef enum lt_idx_type {
  LT_IDX_U8 = 0x08,  /* unsigned byte */
  LT_IDX_I8 = 0x09,  /* signed byte */
  LT_IDX_I16 = 0x0B, /* short, 2 bytes */
  LT_IDX_I32 = 0x0C, /* int, 4 bytes */
  LT_IDX_F32 = 0x0D, /* float, 4 bytes */
  LT_IDX_F64 = 0x0E  /* double, 8 bytes */
} lt_idx_type;

typedef struct lt_idx_data {
  lt_idx_type type;
  int ndims;                     /* 1..LT_IDX_MAX_DIMS */
  int64_t dims[LT_IDX_MAX_DIMS]; /* dims[0] is the outermost (e.g. the number of images) */
  size_t elsize;                 /* bytes per element: 1, 2, 4 or 8 */
  size_t numel;                  /* product of dims */
  size_t nbytes;                 /* numel * elsize */
  void *data;                    /* host byte order; malloc'ed; NULL after lt_idx_free */
} lt_idx_data;

/* Returns 0 and fills *out, or -1 with a message in err and *out zeroed (nothing to free). */
int lt_idx_read(const char *path, lt_idx_data *out, char *err, size_t errlen);

/* Frees out->data; safe to call twice and on a zeroed struct. */
void lt_idx_free(lt_idx_data *d);

/* Bytes per element of a type code, or 0 for an unknown code. */
size_t lt_idx_type_size(int type_code);

/* "ubyte", "sbyte", "short", "int", "float", "double", or NULL for an unknown code. */
const char *lt_idx_type_name(int type_code);

#endif
