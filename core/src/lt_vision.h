/*
 * lt_vision.h — images in and pixel kernels for lt.vision (lua/lutra/vision/). An image is a float32 or float64
 * tensor [C x H x W] (C = 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA); every kernel returns its image's dtype and computes
 * a float64 image in double where torchvision's tensor functions do (any other dtype: a message naming it).
 * Decoded images are float32 and hold the 8-bit pixel values as whole numbers in [0, 255] (a "pixel image", what
 * torchvision's read_image holds as uint8); the kernels take a `pixels` flag that rounds and clamps their results
 * to whole numbers in [0, 255] as an 8-bit image (PIL) would, and leave [0, 1] float images unrounded.
 *
 *   lt_tensor *img = lt_image_decode(c, "read_image: cat.jpg", bytes, n, LT_IMAGE_RGB);
 *   lt_tensor *small = lt_vision_resize(c, img, 224, 224, LT_RESIZE_BILINEAR, 1);
 *
 * Every function returns NULL with the message in c (decoders: prefixed by `what`, which names the function and
 * the file) on a bad, truncated or hostile input; the decoders' setjmp error handling stays inside
 * vision_decode.c.
 */
#ifndef LT_VISION_H
#define LT_VISION_H

#include <stddef.h>

#include "lt_ctx.h"
#include "lt_tensor.h"

/* torchvision's ImageReadMode: the channels the image is converted to (UNCHANGED keeps the file's) */
typedef enum lt_image_mode {
  LT_IMAGE_UNCHANGED = 0,
  LT_IMAGE_GRAY = 1,
  LT_IMAGE_GRAY_ALPHA = 2,
  LT_IMAGE_RGB = 3,
  LT_IMAGE_RGB_ALPHA = 4
} lt_image_mode;

/* PNG (libpng, 8-bit; 16-bit files are reduced to 8) or JPEG (libjpeg-turbo), found by the first bytes. Colour
 * conversions as PIL's convert(): L = (19595 R + 38470 G + 7471 B + 2^15) >> 16; gray to RGB repeats the
 * value; a missing alpha is 255, a dropped one is discarded. Pixel values in [0, 255]. */
lt_tensor *lt_image_decode(lt_ctx *c, const char *what, const void *bytes, size_t n, lt_image_mode mode);

typedef enum lt_resize_mode { LT_RESIZE_NEAREST = 0, LT_RESIZE_BILINEAR = 1 } lt_resize_mode;
/* [C x H x W] -> [C x oh x ow]. Bilinear is PIL's resample: a triangle filter whose support grows with the
 * downscale factor (antialias), applied horizontally then vertically (as torchvision's Resize on PIL images);
 * nearest takes the source pixel floor((i + 0.5) * in / out), as PIL's NEAREST. */
lt_tensor *lt_vision_resize(lt_ctx *c, lt_tensor *img, int64_t oh, int64_t ow, lt_resize_mode mode, int pixels);

typedef enum lt_pad_mode { LT_PAD_CONSTANT = 0, LT_PAD_EDGE, LT_PAD_REFLECT, LT_PAD_SYMMETRIC } lt_pad_mode;
/* Pads left, top, right, bottom (torchvision's order); fill per channel for constant (nfill 1 or C). Reflect
 * mirrors without repeating the edge, symmetric with it; both need the pad smaller than the image side (reflect)
 * or at most the side (symmetric), as torchvision. */
lt_tensor *lt_vision_pad(lt_ctx *c, lt_tensor *img, const int64_t pad[4], lt_pad_mode mode, const double *fill,
                         int nfill);

/* Rotation by `degrees` counter-clockwise about `center` (x, y in Pillow's coordinates, where pixel i spans
 * [i, i + 1); NULL: the image's centre), nearest pixel, as Pillow's rotate; `expand` grows the output to hold the
 * whole turned image; pixels from outside the source are `fill` (nfill 1 or C values). */
lt_tensor *lt_vision_rotate(lt_ctx *c, lt_tensor *img, double degrees, int expand, const double *center,
                            const double *fill, int nfill);

/* Gaussian blur of kernel size kx, ky (odd) and sigmas, reflect padding, as torchvision's gaussian_blur. */
lt_tensor *lt_vision_gaussian_blur(lt_ctx *c, lt_tensor *img, int kx, int ky, double sx, double sy, int pixels);

/* Hue shift by hue_factor in [-0.5, 0.5] of an RGB image: PIL's HSV (8-bit) round trip when pixels, torchvision's
 * float RGB->HSV->RGB otherwise. */
lt_tensor *lt_vision_adjust_hue(lt_ctx *c, lt_tensor *img, double hue_factor, int pixels);

/* The checks every kernel makes on its image (float32 [C x H x W], at least one pixel), named by op; returns a
 * contiguous reference (release it) or NULL. */
lt_tensor *lt_vision_image_arg(lt_ctx *c, const char *op, lt_tensor *img);

#endif
