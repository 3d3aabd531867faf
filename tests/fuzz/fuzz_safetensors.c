/* fuzz_safetensors.c — libFuzzer target: the safetensors reader (core/src/safetensors.c: length prefix,
 * header JSON, offsets, checksum) on bytes in memory, then the lutra metadata's JSON (core/src/json.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lt_json.h"
#include "lt_safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[1024];
  lt_st_file f;
  if (lt_st_load_mem("fuzz", data, size, &f, err, sizeof err) != 0) {
    if (strncmp(err, "load: fuzz: ", 12) != 0) abort();
    return 0;
  }
  /* every tensor lies inside the input, with the bytes its shape and dtype need */
  for (size_t i = 0; i < f.ntensors; i++) {
    const lt_st_tensor *t = &f.tensors[i];
    const uint8_t *p = t->data;
    if (t->nbytes && (p < data || p + t->nbytes > data + size)) abort();
    uint64_t n = lt_st_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) n *= (uint64_t)t->shape[d];
    if (n != t->nbytes) abort();
  }
  const char *doc = lt_st_meta_get(&f, "lutra");
  if (doc) {
    json_error_t jerr;
    int oom;
    json_t *root = lt_json_loadb(doc, strlen(doc), JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr, &oom);
    if (root) json_decref(root);
  }
  lt_st_free(&f);
  return 0;
}
