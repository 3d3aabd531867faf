/* fuzz_idx_gz.c — libFuzzer target: the IDX reader (core/src/idx.c) through gzip: the input is compressed
 * first, so the fuzzer explores the IDX parser behind a valid gzip stream (fuzz_idx covers broken ones). */
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "fuzz_file.h"
#include "lt_idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64], err[512];
  int fd = fuzz_file("", 0, path, sizeof path);
  gzFile gz = gzdopen(dup(fd), "wb1");
  if (!gz) abort();
  if (size && gzwrite(gz, data, (unsigned)size) != (int)size) abort();
  gzclose(gz);
  lseek(fd, 0, SEEK_SET);
  lt_idx_data d;
  if (lt_idx_read(path, &d, err, sizeof err) == 0) {
    if (d.nbytes != d.numel * d.elsize) abort();
    if (d.nbytes > size) abort(); /* the data came out of the input: never more than it */
    lt_idx_free(&d);
  } else if (!strstr(err, "read_idx: ")) {
    abort();
  }
  close(fd);
  return 0;
}
