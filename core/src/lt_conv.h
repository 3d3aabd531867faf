/*
 * lt_conv.h — the window arithmetic the convolution kernels share (nn_conv.c, nn_conv_general.c).
 */
#ifndef LT_CONV_H
#define LT_CONV_H

#include <stdint.h>

/* range [lo, hi) of output positions o (of nout) whose input position o*S - P + off lies in [0, n): the columns an
 * unfolded kernel tap at offset off reads from the input, the rest being padding */
static inline void lt_conv_valid_range(int64_t off, int64_t S, int64_t P, int64_t n, int64_t nout, int64_t *lo,
                                       int64_t *hi) {
  int64_t a = P - off; /* need o*S >= a */
  int64_t l = a <= 0 ? 0 : (a + S - 1) / S;
  int64_t b = n - 1 + P - off; /* need o*S <= b */
  int64_t h = b < 0 ? 0 : b / S + 1;
  if (h > nout) h = nout;
  if (l > h) l = h;
  *lo = l;
  *hi = h;
}

#endif
