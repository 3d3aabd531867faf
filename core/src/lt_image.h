/*
 * lt_image.h — images out: a float32 or float64 [C x H x W] tensor (C = 1 gray, 3 RGB, 4 RGBA; values in [0, 1]) written as
 * an 8-bit PNG through libpng (image_png.c), each value v stored as min(255, max(0, floor(v * 255 + 0.5))) as
 * torchvision's save_image does (NaN as 0). The file is written atomically (lt_fileio.h).
 *
 *   if (lt_png_write(c, "samples.png", grid)) ... c's message: "save_image: samples.png: ..." ...
 */
#ifndef LT_IMAGE_H
#define LT_IMAGE_H

#include "lt_tensor.h"

int lt_png_write(lt_ctx *c, const char *path, lt_tensor *img);

#endif
