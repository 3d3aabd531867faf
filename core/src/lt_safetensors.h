/*
 * lt_safetensors.h — checkpoint files in the safetensors format: strict reader, atomic writer.
 *
 *   int64_t wshape[2] = {784, 10};
 *   lt_st_tensor ts[] = {
 *     {"state_dict.fc.weight", "F32", 2, wshape, w, 784 * 10 * sizeof(float)},
 *     {"optimizer_states.1.step", "I64", 0, NULL, &step, sizeof(int64_t)},
 *   };
 *   lt_st_meta md[] = { {"lutra", "{\"epoch\":3,...}"} };
 *   char err[1024];
 *   if (lt_st_save("ckpt.safetensors", ts, 2, md, 1, err, sizeof err)) ...   // "save: <path>: ..."
 *
 *   lt_st_file f;
 *   if (lt_st_load("ckpt.safetensors", &f, err, sizeof err)) ...            // "load: <path>: ..."
 *   for (size_t i = 0; i < f.ntensors; i++)
 *     ... f.tensors[i].name, .dtype ("F32"), .ndim, .shape, .data (into f's buffer), .nbytes ...
 *   const char *doc = lt_st_meta_get(&f, "lutra");
 *   lt_st_free(&f);
 *
 * File layout (https://github.com/huggingface/safetensors): an 8-byte little-endian unsigned header
 * length N; N bytes of a JSON object {"__metadata__": {str: str, ...}, "<name>": {"dtype": "F32",
 * "shape": [784, 10], "data_offsets": [begin, end]}, ...}, padded with spaces to a multiple of 8; then
 * the data buffer, each tensor's bytes (little-endian, row-major) at [begin, end) relative to its start.
 *
 * Writer: tensors are laid out contiguously in the order given (no gaps, no alignment padding, so a
 * tensor's data may be unaligned: read it with memcpy). __metadata__ comes first in the header, opens
 * with "format": "lutra" and ends with "lutra_checksum": "crc32:<8 lowercase hex digits>", the CRC-32
 * (zlib's crc32) of the whole file as written with those 8 digits read as "00000000". It thus covers the
 * length prefix, the header (names, dtypes, shapes, offsets, metadata) and the data. The file is written
 * with lt_file_write_atomic (temp file, fsync, rename, fsync directory).
 * Names and metadata keys/values must be valid UTF-8; names are unique and not "__metadata__"; metadata
 * keys are unique and not "format" or "lutra_checksum" (reserved); each tensor's nbytes must equal
 * product(shape) * dtype size.
 *
 * Reader: reads the whole file into one buffer and validates strictly; each failure is
 * "load: <path>: <what is wrong>": file shorter than 8 bytes, header length > 100 MB or past the end of
 * the file, header not valid JSON (duplicate keys rejected) or not an object, a tensor entry with a
 * missing, unknown or ill-typed field, unknown dtype, product(shape) * dtype size != end - begin,
 * offsets overlapping, out of range, or not covering the data buffer exactly, a metadata value that is
 * not a string, and a lutra_checksum that is malformed or does not match, or missing while "format" is
 * "lutra" (so no single damaged byte turns a lutra file into an unchecked one). Files from other writers
 * (no lutra_checksum) load without the check; checksum_verified tells which case it was. Known dtypes: BOOL U8 I8 I16 U16 F16 BF16 I32 U32 F32
 * F64 I64 U64 F8_E4M3 F8_E5M2 (the caller decides which it supports).
 *
 * JSON parsing uses Jansson (Debian libjansson-dev, link with -ljansson) through lt_json.h, so an allocation
 * failure while parsing is "out of memory parsing the header", never a parse error or an altered header.
 */
#ifndef LT_SAFETENSORS_H
#define LT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define LT_ST_MAX_HEADER ((uint64_t)100000000) /* header bytes beyond this are refused as absurd */
#define LT_ST_MAX_NDIM 64
#define LT_ST_CHECKSUM_KEY "lutra_checksum"

typedef struct lt_st_tensor {
  const char *name;
  const char *dtype;    /* "F32", "I64", ... */
  int ndim;             /* 0 for a scalar */
  const int64_t *shape; /* ndim sizes (may be NULL when ndim == 0) */
  const void *data;     /* nbytes bytes, little-endian, row-major */
  size_t nbytes;
} lt_st_tensor;

typedef struct lt_st_meta {
  const char *key;
  const char *value;
} lt_st_meta;

/* A loaded file. Everything points into memory owned by the struct: free it with lt_st_free. */
typedef struct lt_st_file {
  lt_st_tensor *tensors; /* in data-offset order (the writer's order) */
  size_t ntensors;
  lt_st_meta *meta; /* __metadata__ pairs in file order, format and lutra_checksum included */
  size_t nmeta;
  int checksum_verified; /* 1 when the file had a lutra_checksum (and it matched), 0 when it had none */
  void *buf;             /* the file's bytes (NULL for lt_st_load_mem: the caller's buffer) */
  size_t buflen;
  void *priv; /* internal allocations */
} lt_st_file;

/* Writes path atomically. Returns 0, or -1 with "save: <path>: <what is wrong>" in err. */
int lt_st_save(const char *path, const lt_st_tensor *tensors, size_t ntensors, const lt_st_meta *meta, size_t nmeta,
               char *err, size_t errlen);

/* The same file as lt_st_save writes, as bytes in memory: *out (malloc'ed, free it with free) holds *outlen
 * bytes. name is used in messages ("save: <name>: ..."). */
int lt_st_save_mem(const char *name, const lt_st_tensor *tensors, size_t ntensors, const lt_st_meta *meta, size_t nmeta,
                   void **out, size_t *outlen, char *err, size_t errlen);

/* Reads and validates path. Returns 0, or -1 with "load: <path>: <what is wrong>" in err and *out zeroed
 * (nothing to free). */
int lt_st_load(const char *path, lt_st_file *out, char *err, size_t errlen);

/* Same checks on bytes already in memory; name is used in messages ("load: <name>: ..."). The tensors'
 * data point into buf, which must outlive *out; out->buf stays NULL (lt_st_free does not free buf). */
int lt_st_load_mem(const char *name, const void *buf, size_t len, lt_st_file *out, char *err, size_t errlen);

/* Idempotent; safe on a zeroed struct. */
void lt_st_free(lt_st_file *f);

/* The value of a metadata key, or NULL. */
const char *lt_st_meta_get(const lt_st_file *f, const char *key);

/* The tensor with that name, or NULL. */
const lt_st_tensor *lt_st_find(const lt_st_file *f, const char *name);

/* Bytes per element of a dtype name ("F32" -> 4), or 0 when the name is not a safetensors dtype. */
size_t lt_st_dtype_size(const char *dtype);

#endif
