/* fuzz_idx.c — libFuzzer target: the IDX reader (core/src/idx.c) on raw bytes (a plain file, or a gzip
 * stream when the bytes start with the gzip magic). */
#include <stdint.h>
#include <string.h>

#include "fuzz_file.h"
#include "lt_idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64], err[512];
  int fd = fuzz_file(data, size, path, sizeof path);
  lt_idx_data d;
  if (lt_idx_read(path, &d, err, sizeof err) == 0) {
    /* every byte of the result is readable and as large as the header says */
    volatile unsigned char sum = 0;
    for (size_t i = 0; i < d.nbytes; i++) sum ^= ((const unsigned char *)d.data)[i];
    if (d.nbytes != d.numel * d.elsize) abort();
    lt_idx_free(&d);
  } else if (!strstr(err, "read_idx: ")) {
    abort(); /* every failure is a message naming the reader */
  }
  close(fd);
  return 0;
}
