/*
 * fuzz_image.h — the check both image fuzz targets make (fuzz_image_png.c, fuzz_image_jpeg.c): the decoder of
 * core/src/vision_decode.c on raw bytes, in every read mode; a decoded image has the shape the mode asks and
 * whole values in 0..255, a failure is a message that starts with the caller's name.
 */
#ifndef FUZZ_IMAGE_H
#define FUZZ_IMAGE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lt_ctx.h"
#include "lt_vision.h"

static int fuzz_image(const uint8_t *data, size_t size, const char *what) {
  lt_ctx c;
  lt_ctx_init(&c);
  size_t named = strlen(what);
  for (int mode = 0; mode <= 4; mode++) {
    lt_tensor *t = lt_image_decode(&c, what, data, size, (lt_image_mode)mode);
    if (!t) {
      if (strncmp(c.err, what, named) != 0 || strncmp(c.err + named, ": ", 2) != 0) abort(); /* named by the caller */
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

#endif
