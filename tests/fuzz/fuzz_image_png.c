/* fuzz_image_png.c — libFuzzer target: the PNG decoder (libpng's simplified API) of
 * core/src/vision_decode.c on raw bytes, in every read mode. A decoded image has the shape the mode asks and 8-bit
 * values; a failure is a message naming the caller. (Seeds: tests/fuzz/corpus/fuzz_image_png/.) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lt_ctx.h"
#include "lt_vision.h"

#define WHAT "read_image: fuzz.png"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lt_ctx c;
  lt_ctx_init(&c);
  for (int mode = 0; mode <= 4; mode++) {
    lt_tensor *t = lt_image_decode(&c, WHAT, data, size, (lt_image_mode)mode);
    if (!t) {
      if (strncmp(c.err, WHAT ": ", strlen(WHAT ": ")) != 0) abort(); /* named by the caller */
      continue;
    }
    if (t->ndim != 3 || (mode != 0 && t->shape[0] != mode)) abort();
    const float *p = lt_f32(t);
    for (int64_t i = 0, n = lt_numel(t); i < n; i++)
      if (!(p[i] >= 0 && p[i] <= 255 && p[i] == (float)(int)p[i])) abort();
    lt_tensor_release(t);
  }
  return 0;
}
