/*
 * conv_unfold.h — im2col and its adjoint col2im for nn_conv_general.c, written once for every float element type:
 * nn_conv_general.c includes it once per dtype with CONV_T (the element type) and CONV_SFX (the name suffix) set,
 * after defining gconv_geom. It defines CONV_SFX-suffixed unfold_or_fold (one item's Cg channels <-> col).
 *
 * Rows are short (an output row of WO positions per kernel tap), so the strides 1 and 2 get loops with the stride
 * a constant, which GCC vectorises (stride 2 loads as pairs of vectors and a permute). The adjoint at stride 2 and
 * dilation 1 adds two neighbouring taps kj, kj+1 in one loop: their input positions 2*ow+kj and 2*ow+kj+1
 * interleave, so the pair's stores are one contiguous run (a lone strided store with gaps does not vectorise).
 */
#if !defined(CONV_T) || !defined(CONV_SFX)
#error "conv_unfold.h needs CONV_T and CONV_SFX"
#endif

#define CONV_CAT2(a, b) a##_##b
#define CONV_CAT(a, b) CONV_CAT2(a, b)
#define CONV_FN(name) CONV_CAT(name, CONV_SFX)

/* dst[lo, hi) = src[ow * SW] (SW a constant after inlining) */
__attribute__((always_inline)) static inline void CONV_FN(gather_row)(CONV_T *restrict dst, const CONV_T *restrict src,
                                                                      int64_t lo, int64_t hi, int64_t SW) {
  for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow * SW];
}

/* dst[ow * SW] += src[ow] for ow in [lo, hi) */
__attribute__((always_inline)) static inline void CONV_FN(scatter_row)(CONV_T *restrict dst, const CONV_T *restrict src,
                                                                       int64_t lo, int64_t hi, int64_t SW) {
  for (int64_t ow = lo; ow < hi; ow++) dst[ow * SW] += src[ow];
}

/* col [Cg*KH*KW, HO*WO] (rows ld apart) of the Cg channels starting at x (zeros where the dilated window is in
 * the padding); with add, the adjoint instead: x += fold(col) */
LT_VECTOR_FN static void CONV_FN(unfold_or_fold)(const gconv_geom *g, CONV_T *x, CONV_T *col, int64_t ld, int add) {
  const int64_t HO = g->HO, WO = g->WO, SW = g->SW, W = g->W;
  const int pair = add && SW == 2 && g->DW == 1; /* the adjoint takes neighbouring taps two at a time */
  for (int64_t ch = 0; ch < g->C / g->G; ch++)
    for (int64_t ki = 0; ki < g->KH; ki++) {
      int64_t oh_lo, oh_hi;
      lt_conv_valid_range(ki * g->DH, g->SH, g->PH, g->H, HO, &oh_lo, &oh_hi);
      for (int64_t kj = 0; kj < g->KW; kj++) {
        CONV_T *row = col + ((ch * g->KH + ki) * g->KW + kj) * ld;
        int64_t lo, hi;
        lt_conv_valid_range(kj * g->DW, SW, g->PW, W, WO, &lo, &hi);
        CONV_T *base = x + ch * g->H * W - g->PW + kj * g->DW;
        if (!add) {
          for (int64_t i = 0; i < oh_lo * WO; i++) row[i] = 0;
          for (int64_t i = oh_hi * WO; i < HO * WO; i++) row[i] = 0;
        }
        if (pair && kj + 1 < g->KW) { /* taps kj and kj + 1 together, over the range both have */
          const CONV_T *row1 = row + ld;
          int64_t lo1, hi1;
          lt_conv_valid_range(kj + 1, 2, g->PW, W, WO, &lo1, &hi1);
          const int64_t a = lo > lo1 ? lo : lo1, b0 = hi < hi1 ? hi : hi1, b = b0 > a ? b0 : a;
          for (int64_t oh = oh_lo; oh < oh_hi; oh++) {
            CONV_T *restrict xr = base + (oh * g->SH - g->PH + ki * g->DH) * W;
            const CONV_T *restrict c0 = row + oh * WO, *restrict c1 = row1 + oh * WO;
            CONV_FN(scatter_row)(xr, c0, lo, a < hi ? a : hi, 2);
            CONV_FN(scatter_row)(xr + 1, c1, lo1, a < hi1 ? a : hi1, 2);
            for (int64_t ow = a; ow < b; ow++) {
              xr[2 * ow] += c0[ow];
              xr[2 * ow + 1] += c1[ow];
            }
            CONV_FN(scatter_row)(xr, c0, b > lo ? b : lo, hi, 2);
            CONV_FN(scatter_row)(xr + 1, c1, b > lo1 ? b : lo1, hi1, 2);
          }
          kj++;
          continue;
        }
        for (int64_t oh = oh_lo; oh < oh_hi; oh++) {
          CONV_T *restrict xr = base + (oh * g->SH - g->PH + ki * g->DH) * W;
          CONV_T *restrict cr = row + oh * WO;
          if (add) {
            if (SW == 1) CONV_FN(scatter_row)(xr, cr, lo, hi, 1);
            else if (SW == 2) CONV_FN(scatter_row)(xr, cr, lo, hi, 2);
            else CONV_FN(scatter_row)(xr, cr, lo, hi, SW);
          } else {
            for (int64_t ow = 0; ow < lo; ow++) cr[ow] = 0;
            if (SW == 1) CONV_FN(gather_row)(cr, xr, lo, hi, 1);
            else if (SW == 2) CONV_FN(gather_row)(cr, xr, lo, hi, 2);
            else CONV_FN(gather_row)(cr, xr, lo, hi, SW);
            for (int64_t ow = hi; ow < WO; ow++) cr[ow] = 0;
          }
        }
      }
    }
}

#undef CONV_FN
#undef CONV_CAT
#undef CONV_CAT2
