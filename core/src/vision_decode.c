/*
 * vision_decode.c — PNG and JPEG bytes to a pixel image [C x H x W] (lt_vision.h). libpng through its simplified
 * API (png_image_*, which keeps its longjmp inside libpng); libjpeg-turbo through an error manager whose setjmp
 * lives in decode_jpeg alone, so no longjmp crosses any other frame of lutra. libjpeg's warnings are silent, except
 * a premature end of data, which is an error (a truncated file, as PIL refuses it).
 */
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "lt_alloc.h"
#include "lt_errors.h"
#include "lt_vision.h"

/* The most values (pixels x channels) an image may decode to: 512 MB of float32 (a 11585 x 11585 RGB image).
 * A hostile header cannot ask for more. */
#define MAX_VALUES ((size_t)1 << 27)

/* Interleaved 8-bit rows (w x ch) to a planar float image converted to `mode` (PIL's convert rules). */
static lt_tensor *to_tensor(lt_ctx *c, const unsigned char *pix, size_t w, size_t h, int ch, lt_image_mode mode) {
  int oc = mode == LT_IMAGE_UNCHANGED ? ch : (int)mode;
  int64_t shape[3] = { oc, (int64_t)h, (int64_t)w };
  lt_tensor *t = lt_tensor_new(c, LT_F32, 3, shape);
  if (!t) return NULL;
  float *o = lt_f32(t);
  size_t np = w * h;
  int has_alpha = ch == 2 || ch == 4, color = ch >= 3;
  for (size_t i = 0; i < np; i++) {
    const unsigned char *p = pix + i * (size_t)ch;
    unsigned r = p[0], g = color ? p[1] : p[0], b = color ? p[2] : p[0], a = has_alpha ? p[ch - 1] : 255;
    if (oc <= 2) {
      o[i] = color ? (float)((19595u * r + 38470u * g + 7471u * b + 0x8000u) >> 16) : (float)r;
      if (oc == 2) o[np + i] = (float)a;
    } else {
      o[i] = (float)r;
      o[np + i] = (float)g;
      o[2 * np + i] = (float)b;
      if (oc == 4) o[3 * np + i] = (float)a;
    }
  }
  return t;
}

static int too_large(lt_ctx *c, const char *what, size_t w, size_t h, int ch) {
  if (w == 0 || h == 0) return lt_fail(c, "%s: the image is empty (%zu x %zu pixels)", what, w, h);
  if (w > MAX_VALUES / h / (size_t)(ch > 3 ? 4 : 3))
    return lt_fail(c, "%s: the image is %zu x %zu pixels, more than lutra decodes (%zu values)", what, w, h,
                   MAX_VALUES);
  return LT_OK;
}

static lt_tensor *decode_png(lt_ctx *c, const char *what, const void *bytes, size_t n, lt_image_mode mode) {
  png_image im;
  memset(&im, 0, sizeof im);
  im.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&im, bytes, n)) {
    lt_fail(c, "%s: not a readable PNG file (libpng: %s)", what, im.message);
    png_image_free(&im);
    return NULL;
  }
  /* decode to the file's own channels at 8 bits; colour maps expand to RGB(A) */
  int alpha = (im.format & PNG_FORMAT_FLAG_ALPHA) != 0, color = (im.format & PNG_FORMAT_FLAG_COLOR) != 0;
  int ch = (color ? 3 : 1) + alpha;
  im.format = color ? (alpha ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB) : (alpha ? PNG_FORMAT_GA : PNG_FORMAT_GRAY);
  if (too_large(c, what, im.width, im.height, ch)) {
    png_image_free(&im);
    return NULL;
  }
  size_t nbytes = PNG_IMAGE_SIZE(im);
  unsigned char *pix = lt_alloc(nbytes);
  if (!pix) {
    png_image_free(&im);
    lt_fail(c, LT_E_OOM, nbytes);
    return NULL;
  }
  lt_tensor *t = NULL;
  if (!png_image_finish_read(&im, NULL, pix, 0, NULL))
    lt_fail(c, "%s: the PNG data is damaged or truncated (libpng: %s)", what, im.message);
  else t = to_tensor(c, pix, im.width, im.height, ch, mode);
  png_image_free(&im);
  lt_free(pix, nbytes);
  return t;
}

typedef struct jpeg_err {
  struct jpeg_error_mgr pub;
  jmp_buf jump;
  int truncated; /* libjpeg warned that the data ended early */
} jpeg_err;

static void jpeg_fatal(j_common_ptr ci) { longjmp(((jpeg_err *)ci->err)->jump, 1); }
static void jpeg_quiet(j_common_ptr ci) { (void)ci; }
static void jpeg_warn(j_common_ptr ci, int level) {
  jpeg_err *e = (jpeg_err *)ci->err;
  if (level < 0 && e->pub.msg_code == JWRN_JPEG_EOF) e->truncated = 1;
}

/* The state decode_jpeg keeps across its setjmp lives in this struct (volatile by way of the pointer). */
typedef struct jpeg_job {
  struct jpeg_decompress_struct ci;
  jpeg_err err;
  unsigned char *pix;
  size_t nbytes;
  lt_tensor *out;
} jpeg_job;

static lt_tensor *decode_jpeg(lt_ctx *c, const char *what, const void *bytes, size_t n, lt_image_mode mode) {
  jpeg_job *j = lt_alloc(sizeof *j);
  if (!j) {
    lt_fail(c, LT_E_OOM, sizeof *j);
    return NULL;
  }
  memset(j, 0, sizeof *j);
  j->ci.err = jpeg_std_error(&j->err.pub);
  j->err.pub.error_exit = jpeg_fatal;
  j->err.pub.output_message = jpeg_quiet;
  j->err.pub.emit_message = jpeg_warn;
  if (setjmp(j->err.jump)) {
    char msg[JMSG_LENGTH_MAX];
    j->err.pub.format_message((j_common_ptr)&j->ci, msg);
    lt_fail(c, "%s: not a readable JPEG file (libjpeg: %s)", what, msg);
    goto done;
  }
  jpeg_create_decompress(&j->ci);
  j->ci.mem->max_memory_to_use = 512L << 20; /* a hostile progressive file's coefficient buffers */
  jpeg_mem_src(&j->ci, (const unsigned char *)bytes, (unsigned long)n);
  jpeg_read_header(&j->ci, TRUE);
  if (j->ci.jpeg_color_space == JCS_CMYK || j->ci.jpeg_color_space == JCS_YCCK) {
    lt_fail(c, "%s: CMYK JPEG files are not supported (convert the file to RGB)", what);
    goto done;
  }
  j->ci.out_color_space = j->ci.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  int ch = j->ci.num_components == 1 ? 1 : 3;
  if (too_large(c, what, j->ci.image_width, j->ci.image_height, ch)) goto done;
  jpeg_start_decompress(&j->ci);
  size_t w = j->ci.output_width, h = j->ci.output_height, row = w * (size_t)ch;
  j->nbytes = row * h;
  if (!(j->pix = lt_alloc(j->nbytes))) {
    lt_fail(c, LT_E_OOM, j->nbytes);
    goto done;
  }
  while (j->ci.output_scanline < j->ci.output_height) {
    unsigned char *rowp = j->pix + j->ci.output_scanline * row;
    jpeg_read_scanlines(&j->ci, &rowp, 1);
  }
  if (j->err.truncated) {
    lt_fail(c, "%s: the JPEG data is truncated (it ends before the image does)", what);
    goto done;
  }
  jpeg_finish_decompress(&j->ci);
  j->out = to_tensor(c, j->pix, w, h, ch, mode);
done:;
  lt_tensor *t = j->out;
  jpeg_destroy_decompress(&j->ci);
  if (j->pix) lt_free(j->pix, j->nbytes);
  lt_free(j, sizeof *j);
  return t;
}

lt_tensor *lt_image_decode(lt_ctx *c, const char *what, const void *bytes, size_t n, lt_image_mode mode) {
  const unsigned char *b = bytes;
  if ((int)mode < 0 || (int)mode > 4) {
    lt_fail(c, "%s: unknown image mode %d", what, (int)mode);
    return NULL;
  }
  if (n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8)) return decode_png(c, what, bytes, n, mode);
  if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return decode_jpeg(c, what, bytes, n, mode);
  lt_fail(c, "%s: not a PNG or JPEG file (%zu bytes, the first ones are neither signature)", what, n);
  return NULL;
}
