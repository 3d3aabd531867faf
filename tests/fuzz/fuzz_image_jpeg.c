/* fuzz_image_jpeg.c — libFuzzer target: the JPEG decoder (libjpeg-turbo, its setjmp error manager) of
 * core/src/vision_decode.c on raw bytes, in every read mode. A decoded image has the shape the mode asks and 8-bit
 * values; a failure is a message naming the caller. (Seeds: tests/fuzz/corpus/fuzz_image_jpeg/.) */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_image(data, size, "read_image: fuzz.jpeg"); }
