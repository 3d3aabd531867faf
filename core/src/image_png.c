/*
 * image_png.c — PNG files from float32 or float64 images through libpng's simplified write API (png_image_write_to_memory,
 * libpng 1.6), which reports failures in the png_image rather than by longjmp; the encoded bytes then go to disk
 * with lt_file_write_atomic, so a crash never leaves half a PNG under the final name.
 */
#include <math.h>
#include <png.h>
#include <string.h>

#include "lt_alloc.h"
#include "lt_errors.h"
#include "lt_fileio.h"
#include "lt_image.h"
#include "lt_ops.h"

/* torchvision's mul(255).add_(0.5).clamp_(0, 255).to(uint8), in the image's dtype */
static unsigned char to_byte(float v) {
  float s = v * 255.0f + 0.5f;
  if (!(s > 0)) return 0; /* NaN too */
  return s >= 255.0f ? 255 : (unsigned char)s;
}
static unsigned char to_byte_f64(double v) {
  double s = v * 255.0 + 0.5;
  if (!(s > 0)) return 0;
  return s >= 255.0 ? 255 : (unsigned char)s;
}

int lt_png_write(lt_ctx *c, const char *path, lt_tensor *img) {
  if (lt_check_float(c, "save_image", "the image", img)) return LT_ERR;
  char b[128];
  if (img->ndim != 3 || (img->shape[0] != 1 && img->shape[0] != 3 && img->shape[0] != 4))
    return lt_fail(c, "save_image: expected an image [channels x height x width] with 1, 3 or 4 channels, got %s",
                   lt_shape_str(img, b, sizeof b));
  int64_t ch = img->shape[0], h = img->shape[1], w = img->shape[2];
  if (h < 1 || w < 1 || h > 100000 || w > 100000)
    return lt_fail(c, "save_image: image size %s is empty or beyond what a PNG file holds here (100000 pixels a side)",
                   lt_shape_str(img, b, sizeof b));
  lt_tensor *x = lt_op_contiguous(c, img);
  if (!x) return LT_ERR;
  size_t npix = (size_t)(h * w), nbytes = npix * (size_t)ch;
  unsigned char *pix = lt_alloc(nbytes);
  if (!pix) {
    lt_tensor_release(x);
    return lt_fail(c, LT_E_OOM, nbytes);
  }
  /* planar [C, H, W] -> interleaved rows of [W, C] */
  for (int64_t k = 0; k < ch; k++)
    for (size_t i = 0; i < npix; i++)
      pix[i * (size_t)ch + (size_t)k] =
          x->dtype == LT_F64 ? to_byte_f64(lt_f64(x)[(size_t)k * npix + i]) : to_byte(lt_f32(x)[(size_t)k * npix + i]);
  lt_tensor_release(x);

  png_image im;
  memset(&im, 0, sizeof im);
  im.version = PNG_IMAGE_VERSION;
  im.width = (png_uint_32)w;
  im.height = (png_uint_32)h;
  im.format = ch == 1 ? PNG_FORMAT_GRAY : ch == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_RGBA;
  png_alloc_size_t len = 0, cap = 0;
  int status = LT_OK;
  void *png = NULL;
  /* the first call sizes the file, the second writes it */
  if (!png_image_write_to_memory(&im, NULL, &cap, 0, pix, 0, NULL))
    status = lt_fail(c, "save_image: %s: libpng: %s", path, im.message);
  else if (!(png = lt_alloc(cap))) status = lt_fail(c, LT_E_OOM, (size_t)cap);
  else if (len = cap, !png_image_write_to_memory(&im, png, &len, 0, pix, 0, NULL))
    status = lt_fail(c, "save_image: %s: libpng: %s", path, im.message);
  else {
    char err[512];
    lt_chunk part = { png, len };
    if (lt_file_write_atomic("save_image", path, &part, 1, err, sizeof err)) status = lt_fail(c, "%s", err);
  }
  png_image_free(&im);
  if (png) lt_free(png, cap);
  lt_free(pix, nbytes);
  return status;
}
