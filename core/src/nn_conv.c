/*
 * nn_conv.c — 2-D convolution by im2col + GEMM, forward and backward side by side.
 *
 * The batch is cut into chunks of m items whose unfolded inputs fit a small scratch buffer: col [K, m*P]
 * (K = C*kh*kw, P = Ho*Wo; column j*P + p is output position p of item j). One GEMM per chunk,
 * tmp [O, m*P] = W [O, K] @ col, then each item's [O, P] block is copied out with the bias added.
 * Backward per chunk: g is gathered into the same [O, m*P] layout; gW += g @ col^T,
 * gcol = W^T @ g folded back (col2im) into gx; gb = sums of g. Scratch buffers come from lt_alloc's
 * size-class cache, so a steady training step makes no malloc.
 * One input channel at stride 1 (the first layer of an image net) takes a direct convolution instead when the
 * input does not require grad (see "direct convolution" below). Wide layers (K >= 256, O >= 64) run on lutra's
 * small-M GEMM with AVX-512: their forward and weight gradient read the zero-padded input in place, without im2col,
 * and skip the kernel rows that meet only padding ("the input read in place" below); at stride 1 their input
 * gradient is the forward of the flipped convolution, at larger strides one product per phase of input rows.
 */
#include <stdio.h>
#include <string.h>

#include "lt_alloc.h"
#include "lt_blas.h"
#include "lt_conv.h"
#include "lt_ctx.h"
#include "lt_errors.h"
#include "lt_gemm_bf16.h"
#include "lt_gemm_small_m.h"
#include "lt_transpose.h"
#include "lt_nn.h"
#include "lt_pool.h"
#include "lt_simd.h"
#include "lt_size.h"

typedef struct conv_geom {
  int64_t N, C, H, W, O, KH, KW, SH, SW, PH, PW, HO, WO, DH, DW; /* DH, DW: the dilation (1: taps side by side) */
} conv_geom;
_Static_assert(sizeof(conv_geom) <= sizeof(((lt_node *)0)->i), "conv_geom must fit in a node's integer slots");

static int64_t geom_k(const conv_geom *g) { return g->C * g->KH * g->KW; }
static int64_t geom_p(const conv_geom *g) { return g->HO * g->WO; }

/* items per chunk: the col buffer stays within 64K floats (256 KB, cache-resident) unless one item alone
 * is larger. Measured on LeNet shapes (batch 64): one big GEMM over the whole batch was 2-3x slower than
 * cache-sized chunks, since OpenBLAS then streams a multi-MB packed operand through memory. On DCGAN's
 * Conv2d 128->256 k4 s2 16x16 (K = 2048, one item a chunk) OpenBLAS re-packs the weight for every item (14% of
 * fwd+bwd samples); 4 items a chunk cut that to 5.5%, but im2col/col2im on the 2 MB col grew by as much. A weight
 * larger than the cap over few output positions is another matter: Conv2d 256->512 k4 s2 on 8x8 (P = 16) packed
 * its 8 MB weight for every 16 columns, 40% of fwd+bwd (77 ms a batch of 16 against PyTorch's 23 on 2 threads,
 * AMD EPYC Zen 4); chunks of at least 256 columns there took it to 24 ms. */
static int64_t chunk_items(const conv_geom *g) {
  int64_t per = geom_k(g) * geom_p(g), cap = (int64_t)1 << 16;
  int64_t m = per > 0 ? cap / per : g->N;
  if (m < 1) m = 1;
  if (g->O * geom_k(g) > cap && m * geom_p(g) < 256) m = (256 + geom_p(g) - 1) / geom_p(g);
  if (m > g->N) m = g->N;
  return m;
}

/* unfolds one item x [C, H, W] into col rows of stride ld (the item's P columns). Rows are short (Wo
 * floats), so the valid ranges are hoisted out of the loops and the copies are plain loops. */
LT_VECTOR_FN static void im2col(const conv_geom *g, const float *x, float *col, int64_t ld) {
  const int64_t WO = g->WO, HO = g->HO, SW = g->SW, SH = g->SH;
  for (int64_t ch = 0; ch < g->C; ch++)
    for (int64_t ki = 0; ki < g->KH; ki++) {
      int64_t oh_lo, oh_hi;
      lt_conv_valid_range(ki * g->DH, SH, g->PH, g->H, HO, &oh_lo, &oh_hi);
      for (int64_t kj = 0; kj < g->KW; kj++) {
        float *row = col + ((ch * g->KH + ki) * g->KW + kj) * ld;
        int64_t lo, hi;
        lt_conv_valid_range(kj * g->DW, SW, g->PW, g->W, WO, &lo, &hi);
        for (int64_t i = 0; i < oh_lo * WO; i++) row[i] = 0;
        for (int64_t i = oh_hi * WO; i < HO * WO; i++) row[i] = 0;
        const float *base = x + ch * g->H * g->W - g->PW + kj * g->DW;
        for (int64_t oh = oh_lo; oh < oh_hi; oh++) {
          float *restrict dst = row + oh * WO;
          const float *restrict src = base + (oh * SH - g->PH + ki * g->DH) * g->W;
          for (int64_t ow = 0; ow < lo; ow++) dst[ow] = 0;
          if (SW == 1)
            for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow];
          else if (SW == 2) /* a constant stride: the loads vectorise as pairs of vectors and a permute */
            for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[2 * ow];
          else
            for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow * SW];
          for (int64_t ow = hi; ow < WO; ow++) dst[ow] = 0;
        }
      }
    }
}

/* the adjoint of im2col: gx += fold(col) (gx must start zeroed) */
LT_VECTOR_FN static void col2im(const conv_geom *g, const float *col, int64_t ld, float *gx) {
  const int64_t WO = g->WO, HO = g->HO, SW = g->SW, SH = g->SH;
  for (int64_t ch = 0; ch < g->C; ch++)
    for (int64_t ki = 0; ki < g->KH; ki++) {
      int64_t oh_lo, oh_hi;
      lt_conv_valid_range(ki * g->DH, SH, g->PH, g->H, HO, &oh_lo, &oh_hi);
      for (int64_t kj = 0; kj < g->KW; kj++) {
        const float *row = col + ((ch * g->KH + ki) * g->KW + kj) * ld;
        int64_t lo, hi;
        lt_conv_valid_range(kj * g->DW, SW, g->PW, g->W, WO, &lo, &hi);
        float *base = gx + ch * g->H * g->W - g->PW + kj * g->DW;
        for (int64_t oh = oh_lo; oh < oh_hi; oh++) {
          const float *restrict src = row + oh * WO;
          float *restrict dst = base + (oh * SH - g->PH + ki * g->DH) * g->W;
          if (SW == 1)
            for (int64_t ow = lo; ow < hi; ow++) dst[ow] += src[ow];
          else if (SW == 2)
            for (int64_t ow = lo; ow < hi; ow++) dst[2 * ow] += src[ow];
          else
            for (int64_t ow = lo; ow < hi; ow++) dst[ow * SW] += src[ow];
        }
      }
    }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
/* Stride-1 im2col/col2im on AVX-512: the rows are short (28 or 10 floats in LeNet) and a plain loop spends
 * most of its time in scalar tails; a masked load and store move a row of up to 16 (zeros outside the
 * valid range come from the load's mask, which also keeps the load inside the input). */
#define CONV_AVX512 1
__attribute__((target("avx512f"))) static void im2col_s1_avx512(const conv_geom *g, const float *x, float *col,
                                                                int64_t ld) {
  const int64_t WO = g->WO, HO = g->HO, W = g->W, nc = (WO + 15) / 16; /* WO <= 64: up to 4 chunks per row */
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t ch = 0; ch < g->C; ch++)
    for (int64_t ki = 0; ki < g->KH; ki++) {
      int64_t oh_lo, oh_hi;
      lt_conv_valid_range(ki, 1, g->PH, g->H, HO, &oh_lo, &oh_hi);
      for (int64_t kj = 0; kj < g->KW; kj++) {
        float *dst = col + ((ch * g->KH + ki) * g->KW + kj) * ld;
        int64_t lo, hi;
        lt_conv_valid_range(kj, 1, g->PW, W, WO, &lo, &hi);
        __mmask16 kload[4], kstore[4];
        for (int64_t q = 0; q < nc; q++) { /* masks of chunk q: the valid inputs, and the row's end */
          int64_t c0 = 16 * q, n = WO - c0 < 16 ? WO - c0 : 16;
          int64_t a = lo - c0 < 0 ? 0 : lo - c0, e = hi - c0 > n ? n : hi - c0;
          kload[q] = e <= a ? 0 : (__mmask16)(((1u << e) - 1) & ~((1u << a) - 1));
          kstore[q] = (__mmask16)((1u << n) - 1);
        }
        int64_t oh = 0;
        for (; oh < oh_lo; oh++, dst += WO)
          for (int64_t q = 0; q < nc; q++) _mm512_mask_storeu_ps(dst + 16 * q, kstore[q], zero);
        const float *src = x + ch * g->H * W + (oh - g->PH + ki) * W - g->PW + kj;
        for (; oh < oh_hi; oh++, dst += WO, src += W)
          for (int64_t q = 0; q < nc; q++)
            _mm512_mask_storeu_ps(dst + 16 * q, kstore[q], _mm512_maskz_loadu_ps(kload[q], src + 16 * q));
        for (; oh < HO; oh++, dst += WO)
          for (int64_t q = 0; q < nc; q++) _mm512_mask_storeu_ps(dst + 16 * q, kstore[q], zero);
      }
    }
}

/* col2im gathers instead of scattering: each input row (ch, ih) is loaded once, receives the KH x KW shifted
 * column rows that land on it, and is stored once. (Adding the rows one by one made every add read back the
 * store just before it at a 4-byte shift, which store forwarding cannot serve: ~12 ns a row.) W <= 64, KW <= 16. */
__attribute__((target("avx512f"))) static void col2im_s1_avx512(const conv_geom *g, const float *col, int64_t ld,
                                                                float *gx) {
  const int64_t W = g->W, WO = g->WO, HO = g->HO, nc = (W + 15) / 16;
  __mmask16 km[4][16]; /* chunk q, kj: lanes x with 0 <= x - kj + PW < WO and x < W */
  for (int64_t q = 0; q < nc; q++)
    for (int64_t kj = 0; kj < g->KW; kj++) {
      unsigned m = 0;
      for (int l = 0; l < 16; l++) {
        int64_t x = 16 * q + l, ow = x - kj + g->PW;
        if (x < W && ow >= 0 && ow < WO) m |= 1u << l;
      }
      km[q][kj] = (__mmask16)m;
    }
  for (int64_t ch = 0; ch < g->C; ch++)
    for (int64_t ih = 0; ih < g->H; ih++) {
      float *dst = gx + (ch * g->H + ih) * W;
      __m512 acc[4];
      for (int64_t q = 0; q < nc; q++) acc[q] = _mm512_setzero_ps();
      for (int64_t ki = 0; ki < g->KH; ki++) {
        int64_t oh = ih + g->PH - ki;
        if (oh < 0 || oh >= HO) continue;
        for (int64_t kj = 0; kj < g->KW; kj++) {
          const float *src = col + ((ch * g->KH + ki) * g->KW + kj) * ld + oh * WO + g->PW - kj; /* src[x] */
          for (int64_t q = 0; q < nc; q++)
            acc[q] = _mm512_add_ps(acc[q], _mm512_maskz_loadu_ps(km[q][kj], src + 16 * q));
        }
      }
      for (int64_t q = 0; q < nc; q++) {
        int64_t n = W - 16 * q < 16 ? W - 16 * q : 16;
        __mmask16 k = (__mmask16)((1u << n) - 1);
        _mm512_mask_storeu_ps(dst + 16 * q, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, dst + 16 * q), acc[q]));
      }
    }
}

/* Stride-2 im2col on AVX-512 (DCGAN's k4 s2 convolutions, strided 1-d convolutions): 16 loaded floats hold the
 * inputs of 8 outputs, the even lanes, which one permute packs into the 8 lanes stored. The load's mask keeps
 * only the inputs of valid outputs (zeros for the padding, and no read outside the input). WO <= 64: the masks, made per kernel tap,
 * are then cheap beside the rows they serve (a 1-d row of 200 outputs made them cost more than the copy). */
#define S2_MAX_CHUNKS 8
__attribute__((target("avx512f"))) static void im2col_s2_avx512(const conv_geom *g, const float *x, float *col,
                                                                int64_t ld) {
  const int64_t WO = g->WO, HO = g->HO, W = g->W, SH = g->SH, nc = (WO + 7) / 8;
  const __m512i even = _mm512_set_epi32(15, 13, 11, 9, 7, 5, 3, 1, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i evens2 = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0); /* a's, b's */
  const __m512 zero = _mm512_setzero_ps();
  __mmask16 kload[S2_MAX_CHUNKS], kstore[S2_MAX_CHUNKS];
  for (int64_t q = 0; q < nc; q++) kstore[q] = (__mmask16)((1u << (WO - 8 * q < 8 ? WO - 8 * q : 8)) - 1);
  for (int64_t ch = 0; ch < g->C; ch++)
    for (int64_t ki = 0; ki < g->KH; ki++) {
      int64_t oh_lo, oh_hi;
      lt_conv_valid_range(ki, SH, g->PH, g->H, HO, &oh_lo, &oh_hi);
      for (int64_t kj = 0; kj < g->KW; kj++) {
        float *dst = col + ((ch * g->KH + ki) * g->KW + kj) * ld;
        int64_t lo, hi;
        lt_conv_valid_range(kj, 2, g->PW, W, WO, &lo, &hi);
        for (int64_t q = 0; q < nc; q++) { /* the even lanes 2*(ow - 8q) of the chunk's valid outputs ow */
          unsigned m = 0;
          for (int64_t ow = lo > 8 * q ? lo : 8 * q; ow < hi && ow < 8 * q + 8; ow++) m |= 1u << (2 * (ow - 8 * q));
          kload[q] = (__mmask16)m;
        }
        const float *src0 = x + ch * g->H * W + (ki - g->PH) * W - g->PW + kj; /* row oh at src0 + oh * SH * W */
        if (WO == 8) { /* rows of 8 (DCGAN's 16x16 layer): two rows a permute and a full store */
          for (int64_t oh = 0; oh < HO; oh += 2, dst += 16) {
            const __m512 a = oh >= oh_lo && oh < oh_hi ? _mm512_maskz_loadu_ps(kload[0], src0 + oh * SH * W) : zero;
            const __m512 b =
                oh + 1 >= oh_lo && oh + 1 < oh_hi ? _mm512_maskz_loadu_ps(kload[0], src0 + (oh + 1) * SH * W) : zero;
            _mm512_mask_storeu_ps(dst, oh + 1 < HO ? (__mmask16)0xFFFF : (__mmask16)0x00FF,
                                  _mm512_permutex2var_ps(a, evens2, b));
          }
          continue;
        }
        int64_t oh = 0;
        for (; oh < oh_lo; oh++, dst += WO)
          for (int64_t q = 0; q < nc; q++) _mm512_mask_storeu_ps(dst + 8 * q, kstore[q], zero);
        for (; oh < oh_hi; oh++, dst += WO) {
          const float *src = src0 + oh * SH * W;
          for (int64_t q = 0; q < nc; q++)
            _mm512_mask_storeu_ps(dst + 8 * q, kstore[q],
                                  _mm512_permutexvar_ps(even, _mm512_maskz_loadu_ps(kload[q], src + 16 * q)));
        }
        for (; oh < HO; oh++, dst += WO)
          for (int64_t q = 0; q < nc; q++) _mm512_mask_storeu_ps(dst + 8 * q, kstore[q], zero);
      }
    }
}

/* Stride-2 col2im on AVX-512, gathering as col2im_s1_avx512 does: each 16-wide chunk of an input row (ch, ih)
 * sums, for every tap (ki, kj) that lands on it, the column row's outputs ow = (x + PW - kj) / 2 where that is a
 * whole number: one load of the 9 outputs a chunk can meet and one permute that spreads them over the lanes of
 * one parity (the other lanes zero). The scalar scatter it replaces (a load-add-store per output, 8 outputs a
 * row in DCGAN's 16x16 layer) was 6% of Conv2d 128->256 k4 s2's fwd+bwd. W <= 64, KW <= 16: the masks per
 * chunk and tap are made once. */
__attribute__((target("avx512f"))) static void col2im_s2_avx512(const conv_geom *g, const float *col, int64_t ld,
                                                                float *gx) {
  const int64_t W = g->W, WO = g->WO, HO = g->HO, SH = g->SH, KW = g->KW, nc = (W + 15) / 16;
  /* lane l takes output (l + r) / 2 of the loaded 9 when l + r is even, r the parity of PW - kj */
  const __m512i idx[2] = { _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0),
                           _mm512_set_epi32(8, 7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0) };
  const __mmask16 parity[2] = { 0x5555, 0xAAAA };
  int64_t ob[4][16]; /* chunk q, tap kj: the first output loaded, which outputs are inside the row, the lanes */
  __mmask16 kload[4][16], klane[4][16], kst[4];
  for (int64_t q = 0; q < nc; q++) {
    const int64_t n = W - 16 * q < 16 ? W - 16 * q : 16;
    kst[q] = (__mmask16)((1u << n) - 1);
    for (int64_t kj = 0; kj < KW; kj++) {
      const int64_t d = g->PW - kj, r = d & 1, o = 8 * q + (d - r) / 2;
      const int64_t lo = o < 0 ? -o : 0, hi = WO - o < 9 ? WO - o : 9;
      ob[q][kj] = o;
      kload[q][kj] = hi <= lo ? 0 : (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
      klane[q][kj] = parity[r] & kst[q];
    }
  }
  for (int64_t ch = 0; ch < g->C; ch++)
    for (int64_t ih = 0; ih < g->H; ih++) {
      float *dst = gx + (ch * g->H + ih) * W;
      for (int64_t q = 0; q < nc; q++) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0; /* even and odd taps: two chains of adds */
        for (int64_t ki = 0; ki < g->KH; ki++) {
          const int64_t t = ih + g->PH - ki, oh = SH == 2 ? t >> 1 : t / SH;
          if (t < 0 || oh * SH != t || oh >= HO) continue;
          const float *row = col + (ch * g->KH + ki) * KW * ld + oh * WO;
          for (int64_t kj = 0; kj < KW; kj++, row += ld) {
            const __m512 v = _mm512_maskz_permutexvar_ps(klane[q][kj], idx[(g->PW - kj) & 1],
                                                         _mm512_maskz_loadu_ps(kload[q][kj], row + ob[q][kj]));
            if (kj & 1) a1 = _mm512_add_ps(a1, v);
            else a0 = _mm512_add_ps(a0, v);
          }
        }
        _mm512_mask_storeu_ps(dst + 16 * q, kst[q],
                              _mm512_add_ps(_mm512_maskz_loadu_ps(kst[q], dst + 16 * q), _mm512_add_ps(a0, a1)));
      }
    }
}
#endif

/* dispatch: the AVX-512 row code for strides 1 and 2 without dilation when the CPU has it */
static int undilated(const conv_geom *g) { return g->DH == 1 && g->DW == 1; }
static void unfold(const conv_geom *g, const float *x, float *col, int64_t ld) {
#ifdef CONV_AVX512
  if (!undilated(g)) {
    im2col(g, x, col, ld);
    return;
  }
  if (g->SW == 1 && g->SH == 1 && g->WO <= 64 && __builtin_cpu_supports("avx512f")) {
    im2col_s1_avx512(g, x, col, ld);
    return;
  }
  if (g->SW == 2 && g->WO <= 64 && __builtin_cpu_supports("avx512f")) {
    im2col_s2_avx512(g, x, col, ld);
    return;
  }
#endif
  im2col(g, x, col, ld);
}

/* one item's output gradient gy [O, P] into the columns of a gathered gy whose rows are ld floats long (the item's P
 * columns at gperm), for the im2col path's GEMMs */
static void gather_gy(const conv_geom *g, const float *gy, float *gperm, int64_t ld) {
  const int64_t P = geom_p(g);
  for (int64_t o = 0; o < g->O; o++) memcpy(gperm + o * ld, gy + o * P, sizeof(float) * (size_t)P);
}

static void fold(const conv_geom *g, const float *col, int64_t ld, float *gx) {
#ifdef CONV_AVX512
  if (!undilated(g)) {
    col2im(g, col, ld, gx);
    return;
  }
  if (g->SW == 1 && g->SH == 1 && g->W <= 64 && g->KW <= 16 && __builtin_cpu_supports("avx512f")) {
    col2im_s1_avx512(g, col, ld, gx);
    return;
  }
  if (g->SW == 2 && g->W <= 64 && g->KW <= 16 && __builtin_cpu_supports("avx512f")) {
    col2im_s2_avx512(g, col, ld, gx);
    return;
  }
#endif
  col2im(g, col, ld, gx);
}

/* dst = src + bias (one output plane out of the GEMM's [O, m*P] block), compiled per CPU */
LT_VECTOR_FN static void add_bias_row(float *restrict dst, const float *restrict src, float bias, int64_t n) {
  for (int64_t p = 0; p < n; p++) dst[p] = src[p] + bias;
}

LT_VECTOR_FN static void add_bias_inplace(float *y, float bias, int64_t n) {
  for (int64_t p = 0; p < n; p++) y[p] += bias;
}

int lt_conv_check_sizes(lt_ctx *c, const char *op, const int64_t *oshape, int64_t K, int64_t PH, int64_t PW) {
  if (lt_check_size(c, op, 4, oshape)) return LT_ERR;
  int64_t n;
  if (!lt_size_mul(K, PH, &n) && !lt_size_mul(n, PW, &n)) return LT_OK;
  char b[96];
  snprintf(b, sizeof b, "unfolded input [%lld x %lld x %lld]", (long long)K, (long long)PH, (long long)PW);
  return lt_fail(c, LT_E_SIZE, op, b);
}

int lt_conv_check_dtypes(lt_ctx *c, const char *op, const lt_tensor *x, const lt_tensor *w, const lt_tensor *b) {
  const lt_dtype d = x->dtype;
  if (d != LT_F32 && d != LT_F64) return lt_check_dtype(c, op, "input", x, LT_F32);
  if (w->dtype != d)
    return lt_fail(c, "%s: input is %s and weight is %s: both must have the same float dtype", op, lt_dtype_name(d),
                   lt_dtype_name(w->dtype));
  if (b && b->dtype != d)
    return lt_fail(c, "%s: input is %s, weight %s, bias %s: all must have the same float dtype", op, lt_dtype_name(d),
                   lt_dtype_name(w->dtype), lt_dtype_name(b->dtype));
  return LT_OK;
}

static float *scratch(lt_ctx *c, int64_t n) {
  float *p = lt_alloc(sizeof(float) * (size_t)n);
  if (!p) lt_fail(c, LT_E_OOM, sizeof(float) * (size_t)n);
  return p;
}

/* --- direct convolution: one input channel, stride 1 ---------------------------------------------------
 * The first layer of an image net (LeNet: Conv2d(1, 6, 5, padding 2) on [64, 1, 28, 28]) is mostly memory
 * traffic through im2col: the unfolded input is KH*KW times the image, and the GEMM has only O rows. With one
 * input channel the convolution is cheap to compute directly from a zero-padded copy of each image (no edge
 * branches): out rows are vectorised along x, each shifted input vector feeding all O output channels.
 * Taken only when the input does not require grad, so an input gradient still comes from col2im as before.
 * Layout of the padded image: HP = HO + KH - 1 rows of LDP = 16 * ceil(WO / 16) + KW - 1 floats, zeros outside
 * the image, so a 16-wide load at any output chunk stays inside the buffer.
 * Images go in blocks of DC_BLOCK, one pool part each. The weight gradient sums each block's images in double
 * lanes and the blocks in block order: fixed block size, so the result does not depend on the thread count. */
#define DC_BLOCK 8
#define DC_PAR_MIN (INT64_C(1) << 18) /* multiply-adds below which a pool hand-off does not pay */

static int direct_ok(const conv_geom *g, const lt_tensor *x) {
  return g->C == 1 && g->SH == 1 && g->SW == 1 && g->DH == 1 && g->DW == 1 && g->KH <= 7 && g->KW <= 7 &&
         !x->requires_grad;
}
static int64_t dc_ldp(const conv_geom *g) { return 16 * ((g->WO + 15) / 16) + g->KW - 1; }
static int64_t dc_padsize(const conv_geom *g) { return (g->HO + g->KH - 1) * dc_ldp(g); }

static void dc_pad(const conv_geom *g, const float *x, float *xp) {
  const int64_t ldp = dc_ldp(g);
  memset(xp, 0, sizeof(float) * (size_t)dc_padsize(g));
  for (int64_t ih = 0; ih < g->H; ih++)
    memcpy(xp + (ih + g->PH) * ldp + g->PW, x + ih * g->W, sizeof(float) * (size_t)g->W);
}

/* portable forward of one image: out [O, HO, WO] */
LT_VECTOR_FN static void dc_fwd_plain(const conv_geom *g, const float *xp, const float *w, const float *b, float *out) {
  const int64_t ldp = dc_ldp(g), KK = g->KH * g->KW, WO = g->WO;
  for (int64_t o = 0; o < g->O; o++)
    for (int64_t y = 0; y < g->HO; y++) {
      float *restrict dst = out + (o * g->HO + y) * WO;
      const float bias = b ? b[o] : 0.0f;
      for (int64_t x = 0; x < WO; x++) dst[x] = bias;
      for (int64_t ky = 0; ky < g->KH; ky++)
        for (int64_t kx = 0; kx < g->KW; kx++) {
          const float wv = w[o * KK + ky * g->KW + kx];
          const float *restrict src = xp + (y + ky) * ldp + kx;
          for (int64_t x = 0; x < WO; x++) dst[x] += wv * src[x];
        }
    }
}

/* portable weight gradient of one image: lanes[k * 16] += sum_{y,x} g[o, y, x] * xp[y + ky, x + kx] */
static void dc_gw_plain(const conv_geom *g, const float *xp, const float *gi, double *lanes) {
  const int64_t ldp = dc_ldp(g), KK = g->KH * g->KW, WO = g->WO;
  for (int64_t o = 0; o < g->O; o++)
    for (int64_t k = 0; k < KK; k++) {
      double s = 0;
      for (int64_t y = 0; y < g->HO; y++)
        s += lt_dot_f32(gi + (o * g->HO + y) * WO, xp + (y + k / g->KW) * ldp + k % g->KW, WO);
      lanes[(o * KK + k) * 16] += s;
    }
}

#ifdef CONV_AVX512
/* forward of OB output channels of one image, accumulators in registers (OB constant after inlining) */
__attribute__((always_inline, target("avx512f"))) static inline void
dc_fwd_block(const conv_geom *g, const float *xp, const float *w, const float *b, float *out, const int OB) {
  const int64_t ldp = dc_ldp(g), KK = g->KH * g->KW, WO = g->WO, P = g->HO * WO, nc = (WO + 15) / 16;
  for (int64_t y = 0; y < g->HO; y++)
    for (int64_t q = 0; q < nc; q++) {
      const int64_t n = WO - 16 * q < 16 ? WO - 16 * q : 16;
      const __mmask16 m = (__mmask16)((1u << n) - 1);
      __m512 acc[8];
      for (int o = 0; o < OB; o++) acc[o] = b ? _mm512_set1_ps(b[o]) : _mm512_setzero_ps();
      const float *r = xp + y * ldp + 16 * q;
      for (int64_t ky = 0; ky < g->KH; ky++)
        for (int64_t kx = 0; kx < g->KW; kx++) {
          const __m512 v = _mm512_loadu_ps(r + ky * ldp + kx);
          const float *wk = w + ky * g->KW + kx;
          for (int o = 0; o < OB; o++) acc[o] = _mm512_fmadd_ps(_mm512_set1_ps(wk[o * KK]), v, acc[o]);
        }
      for (int o = 0; o < OB; o++) _mm512_mask_storeu_ps(out + o * P + y * WO + 16 * q, m, acc[o]);
    }
}

__attribute__((target("avx512f"))) static void dc_fwd_avx512(const conv_geom *g, const float *xp, const float *w,
                                                             const float *b, float *out) {
  const int64_t KK = g->KH * g->KW, P = g->HO * g->WO;
  for (int64_t o0 = 0; o0 < g->O; o0 += 8) {
    const float *wo = w + o0 * KK, *bo = b ? b + o0 : NULL;
    float *oo = out + o0 * P;
    switch (g->O - o0 < 8 ? g->O - o0 : 8) {
      case 1: dc_fwd_block(g, xp, wo, bo, oo, 1); break;
      case 2: dc_fwd_block(g, xp, wo, bo, oo, 2); break;
      case 3: dc_fwd_block(g, xp, wo, bo, oo, 3); break;
      case 4: dc_fwd_block(g, xp, wo, bo, oo, 4); break;
      case 5: dc_fwd_block(g, xp, wo, bo, oo, 5); break;
      case 6: dc_fwd_block(g, xp, wo, bo, oo, 6); break;
      case 7: dc_fwd_block(g, xp, wo, bo, oo, 7); break;
      default: dc_fwd_block(g, xp, wo, bo, oo, 8); break;
    }
  }
}

/* weight gradient of output channels o (and o + 1 when TWO) for kernel row ky over one image: KW accumulators per
 * channel in registers (KW and TWO constant after inlining), added into the double lanes at the end. Two named
 * arrays rather than one [2][KW]: GCC keeps arrays of this size in registers, a larger one it spills every
 * iteration. */
__attribute__((always_inline, target("avx512f"))) static inline void dc_gw_acc(double *l, __m512 a) {
  const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(a));
  const __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
  _mm512_storeu_pd(l, _mm512_add_pd(_mm512_loadu_pd(l), lo));
  _mm512_storeu_pd(l + 8, _mm512_add_pd(_mm512_loadu_pd(l + 8), hi));
}

__attribute__((always_inline, target("avx512f"))) static inline void dc_gw_block(const conv_geom *g, const float *xp,
                                                                                 const float *gi, double *lanes,
                                                                                 int64_t ky, const int KW,
                                                                                 const int TWO) {
  const int64_t ldp = dc_ldp(g), WO = g->WO, P = g->HO * WO, nc = (WO + 15) / 16, KK = g->KH * KW;
  __m512 a0[7], a1[7];
  for (int kx = 0; kx < KW; kx++) a0[kx] = a1[kx] = _mm512_setzero_ps();
  for (int64_t y = 0; y < g->HO; y++)
    for (int64_t q = 0; q < nc; q++) {
      const int64_t n = WO - 16 * q < 16 ? WO - 16 * q : 16;
      const __mmask16 m = (__mmask16)((1u << n) - 1);
      const float *r = xp + (y + ky) * ldp + 16 * q;
      /* masked: lanes past the row's end keep their sum even where the padded input holds inf or NaN */
      const __m512 g0 = _mm512_maskz_loadu_ps(m, gi + y * WO + 16 * q);
      const __m512 g1 = TWO ? _mm512_maskz_loadu_ps(m, gi + P + y * WO + 16 * q) : g0;
      for (int kx = 0; kx < KW; kx++) {
        const __m512 v = _mm512_loadu_ps(r + kx);
        a0[kx] = _mm512_mask3_fmadd_ps(g0, v, a0[kx], m);
        if (TWO) a1[kx] = _mm512_mask3_fmadd_ps(g1, v, a1[kx], m);
      }
    }
  for (int kx = 0; kx < KW; kx++) {
    dc_gw_acc(lanes + (ky * KW + kx) * 16, a0[kx]);
    if (TWO) dc_gw_acc(lanes + (KK + ky * KW + kx) * 16, a1[kx]);
  }
}

#define DC_GW_KW(KW_)                                                                                                \
  __attribute__((target("avx512f"))) static void dc_gw_kw##KW_(const conv_geom *g, const float *xp, const float *gi, \
                                                               double *lanes) {                                      \
    const int64_t P = g->HO * g->WO, KK = g->KH * KW_;                                                               \
    for (int64_t o = 0; o < g->O; o += 2)                                                                            \
      for (int64_t ky = 0; ky < g->KH; ky++) {                                                                       \
        if (o + 1 < g->O) dc_gw_block(g, xp, gi + o * P, lanes + o * KK * 16, ky, KW_, 1);                           \
        else dc_gw_block(g, xp, gi + o * P, lanes + o * KK * 16, ky, KW_, 0);                                        \
      }                                                                                                              \
  }
DC_GW_KW(1)
DC_GW_KW(2)
DC_GW_KW(3)
DC_GW_KW(4)
DC_GW_KW(5)
DC_GW_KW(6)
DC_GW_KW(7)

static void dc_gw_avx512(const conv_geom *g, const float *xp, const float *gi, double *lanes) {
  switch (g->KW) {
    case 1: dc_gw_kw1(g, xp, gi, lanes); break;
    case 2: dc_gw_kw2(g, xp, gi, lanes); break;
    case 3: dc_gw_kw3(g, xp, gi, lanes); break;
    case 4: dc_gw_kw4(g, xp, gi, lanes); break;
    case 5: dc_gw_kw5(g, xp, gi, lanes); break;
    case 6: dc_gw_kw6(g, xp, gi, lanes); break;
    default: dc_gw_kw7(g, xp, gi, lanes); break;
  }
}
#endif

/* the AVX-512 kernels keep an output row in up to 4 vectors */
static int dc_use_avx512(const conv_geom *g) {
#ifdef CONV_AVX512
  return g->WO <= 64 && __builtin_cpu_supports("avx512f");
#else
  (void)g;
  return 0;
#endif
}

typedef struct dc_job {
  const conv_geom *g;
  const float *x, *w, *b, *gout; /* gout: NULL for the forward */
  float *out, *pad;
  double *lanes; /* backward: [nblocks][O * KK][16] */
  int avx512;
} dc_job;

static void dc_part(void *arg, int part, int nparts) {
  (void)nparts;
  const dc_job *j = arg;
  const conv_geom *g = j->g;
  const int64_t CHW = g->H * g->W, OP = g->O * g->HO * g->WO, lsz = g->O * g->KH * g->KW * 16;
  float *xp = j->pad + part * dc_padsize(g);
  const int64_t i1 = (part + 1) * DC_BLOCK < g->N ? (part + 1) * DC_BLOCK : g->N;
  for (int64_t i = (int64_t)part * DC_BLOCK; i < i1; i++) {
    dc_pad(g, j->x + i * CHW, xp);
    if (!j->gout) {
#ifdef CONV_AVX512
      if (j->avx512) {
        dc_fwd_avx512(g, xp, j->w, j->b, j->out + i * OP);
        continue;
      }
#endif
      dc_fwd_plain(g, xp, j->w, j->b, j->out + i * OP);
    } else {
      double *lanes = j->lanes + part * lsz;
#ifdef CONV_AVX512
      if (j->avx512) {
        dc_gw_avx512(g, xp, j->gout + i * OP, lanes);
        continue;
      }
#endif
      dc_gw_plain(g, xp, j->gout + i * OP, lanes);
    }
  }
}

/* runs the blocks of images on the pool when the work pays for it; the same blocks either way */
static int dc_run(lt_ctx *c, dc_job *j) {
  const conv_geom *g = j->g;
  const int64_t nblk = (g->N + DC_BLOCK - 1) / DC_BLOCK, npad = nblk * dc_padsize(g);
  const int64_t nl = j->gout ? nblk * g->O * g->KH * g->KW * 16 : 0;
  if (!(j->pad = scratch(c, npad))) return LT_ERR;
  if (nl && !(j->lanes = lt_alloc(sizeof(double) * (size_t)nl))) {
    lt_free(j->pad, sizeof(float) * (size_t)npad);
    lt_fail(c, LT_E_OOM, sizeof(double) * (size_t)nl);
    return LT_ERR;
  }
  if (nl) memset(j->lanes, 0, sizeof(double) * (size_t)nl);
  j->avx512 = dc_use_avx512(g);
  const int64_t work = g->N * g->O * g->HO * g->WO * g->KH * g->KW;
  if (nblk > 1 && lt_pool_parts(c->num_threads, work, DC_PAR_MIN) > 1) lt_pool_run(dc_part, j, (int)nblk);
  else
    for (int64_t p = 0; p < nblk; p++) dc_part(j, (int)p, (int)nblk);
  lt_free(j->pad, sizeof(float) * (size_t)npad);
  return LT_OK;
}

/* gw [O, 1, KH, KW] = the blocks' lanes summed in block order */
static int dc_weight_grad(lt_ctx *c, const conv_geom *g, const float *x, const float *gout, float *gw) {
  dc_job j = { .g = g, .x = x, .gout = gout };
  if (dc_run(c, &j)) return LT_ERR;
  const int64_t nblk = (g->N + DC_BLOCK - 1) / DC_BLOCK, nk = g->O * g->KH * g->KW;
  for (int64_t k = 0; k < nk; k++) {
    double s = 0;
    for (int64_t p = 0; p < nblk; p++)
      for (int l = 0; l < 16; l++) s += j.lanes[(p * nk + k) * 16 + l];
    gw[k] = (float)s;
  }
  lt_free(j.lanes, sizeof(double) * (size_t)(nblk * nk * 16));
  return LT_OK;
}

/* --- lutra's small-M GEMM for the wide layers -------------------------------------------------------------
 * DCGAN's Conv2d 128->256 k4 s2 16x16 (K = 2048, P = 64) spent 16% of fwd+bwd in OpenBLAS packing the 2 MB
 * weight again for every item (forward, and transposed for the input gradient), and batching items into one GEMM
 * only moved that cost into im2col/col2im on a col past L2. Here the products run lutra's 8 x 32 register tile
 * (gemm_small_m.c), which reads A in place: the forward and the weight gradient read the zero-padded input itself
 * (no im2col; "the input read in place" below); the input gradient of a stride-1 layer is the forward of the
 * flipped convolution, of a strided one a product per phase (both below), of the others W^T, transposed once per
 * call, in blocks of KC rows against each item's gradient read in place, then col2im. One thread, or one range of a batch split
 * over the pool (below); outside autocast (whose products are lt_gemm's bf16 GEMM), AVX-512, and only for wide
 * GEMMs (K >= 256, O >= 64): LeNet's and the first layers' small K gain nothing from it; from K = 256 it pays
 * (one thread, fwd+bwd, batch 16, Zen 4: Conv1d 40->64 k11 s2 on L400, K = 440, 7.1-7.9 -> 6.7-7.2 ms; Conv2d
 * 48->96 k3 on 14x14, K = 432, 9.0-9.2 -> 8.4-8.8). And over at least 64 output positions (sm_wide below): the
 * input gradient reads W^T once per item, its whole size for each P columns (for 256->512 k4 s2 on 8x8, P = 16,
 * that took 72 ms against 41 for OpenBLAS's on chunks of 256 columns, one thread, Zen 4). */
#define SM_KC 256 /* rows of the W^T block (input gradient) */

/* The shapes the small-M GEMM pays for (below), on a thread of its own (one thread, or a range of a split batch):
 * the wide layers' forward over at least 64 positions in all; their weight gradient (SM_W) over at least 64 an
 * item; their input gradient (SM_X) at stride 1 (flipped_geom) or over at least 64 positions an item (sm_input_grad,
 * per item). Conv2d 256->512 k4 s2 on 8x8 (P = 16), one thread, Zen 4: forward 13.1 -> 11.3 ms in place; its
 * input gradient 11.5 on im2col + OpenBLAS against 24 on the tile; its weight gradient no faster in place on one
 * thread and slower on two (a range's 128 positions against gw^T's 8 MB). */
enum { SM_W = 1, SM_X = 2 };
static int sm_wide(const conv_geom *g) { return geom_k(g) >= 256 && g->O >= 64 && lt_gemm_small_m_ok(); }
static int sm_thread(lt_ctx *c, int parts) {
  return parts > 1 || (c->num_threads == 1 && c->autocast == LT_AUTOCAST_OFF);
}

/* gx [N, C, H, W] += col2im(W^T @ gy) per item; wt: W^T [K, O] (lt_transpose_f32), gcol [K, P] */
static void sm_input_grad(const conv_geom *g, const float *wt, const float *gy, float *gx, float *gcol) {
  const int64_t K = geom_k(g), P = geom_p(g), CHW = g->C * g->H * g->W;
  for (int64_t i = 0; i < g->N; i++) {
    const float *gi = gy + i * g->O * P;
    for (int64_t r0 = 0; r0 < K; r0 += SM_KC) {
      const int64_t rows = K - r0 < SM_KC ? K - r0 : SM_KC;
      lt_gemm_small_m(rows, P, g->O, wt + r0 * g->O, g->O, gi, P, LT_GEMM_SM_NR, gcol + r0 * P, P, 0, 1);
    }
    fold(g, gcol, P, gx + i * CHW);
  }
}

/* --- the input read in place: forward and weight gradient without im2col ------------------------------------
 * im2col copies each input value about KH*KW / (SH*SW) times (4 for k4 s2) before a GEMM reads it. Here the GEMM
 * reads the zero-padded input xp itself (lt_gemm_small_m_rows): a product's element (output position, kernel tap)
 * is xp[pos_off[position] + tap_off[tap]]. The taps go in (ki, c, kj) order, so the taps of one kernel row are one
 * contiguous range and an output row whose windows reach into the top or bottom padding runs only the kernel rows
 * that meet the input: the padding's multiply-adds are skipped (oneDNN skips them too: PyTorch's k4 s2 p1 layers
 * on 16x16 and 8x8 inputs ran 12-16% faster than the same layers on inputs with the padding made explicit).
 * Positions go in (oh, item, ow) order: one GEMM covers the same output rows of every item of the range, and the
 * weight gradient, whose k runs over positions, finds each kernel row's output rows as one contiguous range.
 * - forward: y^T [positions, O] = A [positions, taps] @ wr [taps, O] (wr: W transposed, taps in (ki, c, kj) order),
 *   rows written item by item ((item, oh, ow) order), each item's [P, O] then transposed into y with the bias;
 * - weight gradient: gw^T [taps, O] = A^T [taps, positions] @ gy^T [positions, O] per kernel row, the taps' rows of
 *   gw^T in gw's own (c, ki, kj) order, then added into gw transposed.
 * Scratch: the padded items (their size and a tenth), the result or gy^T (the output's size), the offsets. */

/* xp [C, HP, WP] of one item: x with its padding made zeros */
static int64_t xp_floats(const conv_geom *g) { return g->C * (g->H + 2 * g->PH) * (g->W + 2 * g->PW); }
static void pad_item(const conv_geom *g, const float *x, float *xp) {
  const int64_t WP = g->W + 2 * g->PW, HP = g->H + 2 * g->PH;
  memset(xp, 0, sizeof(float) * (size_t)xp_floats(g));
  for (int64_t ch = 0; ch < g->C; ch++)
    for (int64_t ih = 0; ih < g->H; ih++)
      memcpy(xp + (ch * HP + ih + g->PH) * WP + g->PW, x + (ch * g->H + ih) * g->W, sizeof(float) * (size_t)g->W);
}

/* the offset tables at the front of the scratch, in floats (whole cache lines): per position (oh, item, ow) its
 * window's corner in xp (pos) and its row of the forward's result (row, items in order); per tap (ki, c, kj) its
 * place in a window (tap) and its row of gw^T (trow) */
typedef struct dir_tables {
  int64_t *pos, *row, *tap, *trow;
} dir_tables;
static int64_t tables_floats(const conv_geom *g) { return (2 * (2 * g->N * geom_p(g) + 2 * geom_k(g)) + 15) / 16 * 16; }
static dir_tables make_tables(const conv_geom *g, float *scratch) {
  const int64_t N = g->N, P = geom_p(g), K = geom_k(g), WP = g->W + 2 * g->PW, HPWP = (g->H + 2 * g->PH) * WP;
  dir_tables t = { (int64_t *)scratch, (int64_t *)scratch + N * P, (int64_t *)scratch + 2 * N * P,
                   (int64_t *)scratch + 2 * N * P + K };
  for (int64_t oh = 0, q = 0; oh < g->HO; oh++)
    for (int64_t i = 0; i < N; i++)
      for (int64_t ow = 0; ow < g->WO; ow++, q++) {
        t.pos[q] = i * xp_floats(g) + g->SH * oh * WP + g->SW * ow;
        t.row[q] = (i * P + oh * g->WO + ow) * g->O;
      }
  for (int64_t ki = 0, q = 0; ki < g->KH; ki++)
    for (int64_t ch = 0; ch < g->C; ch++)
      for (int64_t kj = 0; kj < g->KW; kj++, q++) {
        t.tap[q] = ch * HPWP + ki * g->DH * WP + kj * g->DW;
        t.trow[q] = ((ch * g->KH + ki) * g->KW + kj) * g->O;
      }
  return t;
}

/* the kernel rows [*lo, *hi) whose taps meet the input (not the padding) at output row oh: kernel row ki reads
 * input row top + ki*DH */
static void rows_meeting(const conv_geom *g, int64_t oh, int64_t *lo, int64_t *hi) {
  const int64_t top = g->SH * oh - g->PH; /* the input row of kernel row 0 */
  *lo = top < 0 ? (-top + g->DH - 1) / g->DH : 0;
  *hi = top >= g->H ? 0 : (g->H - 1 - top) / g->DH + 1;
  if (*hi > g->KH) *hi = g->KH;
  if (*lo > g->KH) *lo = g->KH;
  if (*hi < *lo) *hi = *lo;
}

/* the output channels rounded up to whole panels of the small-M GEMM's 32 columns */
static int64_t nr_round(int64_t n) { return (n + LT_GEMM_SM_NR - 1) / LT_GEMM_SM_NR * LT_GEMM_SM_NR; }
static int64_t o_panels(const conv_geom *g) { return nr_round(g->O); }

/* wr = W transposed and packed for the forward's B: panel q (output channels 32q ..) holds [K, 32], its taps in
 * (ki, c, kj) order; K * o_panels floats. Panels [p0, p1) here (each reads only its own 32 rows of W);
 * reorder_weight runs them on the pool's threads, so that the other threads do not wait for a 2 MB weight (DCGAN's
 * 128->256) to be repacked on the caller. One pass over W, 8 of its rows at a time: an input channel's taps of
 * those rows are transposed into a block on the stack, whose rows go to their places in the panel. W's rows are
 * K floats apart (16 KB for DCGAN's 256->512), so rows read together fall into one set of L1: 8 fit its 8 ways,
 * where the panel's 32 rows at once (or W^T [K, O] built first) made the repacking 22% of that layer's forward on
 * one thread. */
#define REORDER_ROWS 8
#define REORDER_TAPS 64
static void reorder_panels(const conv_geom *g, const float *w, float *wr, int64_t p0, int64_t p1) {
  const int64_t K = geom_k(g), O = g->O, NR = LT_GEMM_SM_NR, KHW = g->KH * g->KW;
  float blk[REORDER_TAPS * REORDER_ROWS];
  for (int64_t q = p0 * NR; q < O && q < p1 * NR; q += NR) {
    float *dst = wr + q * K;
    for (int64_t r0 = q; r0 < O && r0 < q + NR; r0 += REORDER_ROWS) {
      const int64_t nr = O - r0 < REORDER_ROWS ? O - r0 : REORDER_ROWS;
      for (int64_t ch = 0; ch < g->C; ch++)
        for (int64_t t0 = 0; t0 < KHW; t0 += REORDER_TAPS) {
          const int64_t nt = KHW - t0 < REORDER_TAPS ? KHW - t0 : REORDER_TAPS;
          lt_transpose_f32(w + r0 * K + ch * KHW + t0, K, nr, nt, blk, REORDER_ROWS, 0);
          for (int64_t t = t0; t < t0 + nt; t++) { /* tap (ki, kj) of channel ch: row (ki, ch, kj) of the panel */
            const int64_t ki = t / g->KW, kj = t % g->KW;
            float *d = dst + ((ki * g->C + ch) * g->KW + kj) * NR + r0 - q;
            if (nr == REORDER_ROWS) memcpy(d, blk + (t - t0) * REORDER_ROWS, sizeof(float) * REORDER_ROWS);
            else memcpy(d, blk + (t - t0) * REORDER_ROWS, sizeof(float) * (size_t)nr);
          }
        }
    }
  }
}
typedef struct reorder_job {
  const conv_geom *g;
  const float *w;
  float *wf, *wr; /* wf: W' (flipped) built first when given */
} reorder_job;
static void flip_rows(const conv_geom *g, const float *w, float *wf, int64_t c0, int64_t c1);
static void reorder_range(void *arg, int64_t p0, int64_t p1) {
  const reorder_job *j = arg;
  if (j->wf) { /* W' rows (the flipped layer's output channels) of these panels, from the original weight */
    const conv_geom *t = j->g;
    flip_rows(t, j->w, j->wf, p0 * LT_GEMM_SM_NR, p1 * LT_GEMM_SM_NR < t->O ? p1 * LT_GEMM_SM_NR : t->O);
    reorder_panels(t, j->wf, j->wr, p0, p1);
  } else reorder_panels(j->g, j->w, j->wr, p0, p1);
}
static void reorder_weight(int parts, const conv_geom *g, const float *w, float *wr) {
  reorder_job j = { g, w, NULL, wr };
  lt_pool_for(parts, o_panels(g) / LT_GEMM_SM_NR, 1, reorder_range, &j);
}

/* y [N, O, P] = conv(x) + b for the items of g; wr: reorder_weight; scratch: sm_fwd_floats */
static int64_t sm_fwd_floats(const conv_geom *g) {
  return tables_floats(g) + g->N * xp_floats(g) + g->N * geom_p(g) * g->O;
}
static void sm_forward(const conv_geom *g, const float *x, const float *wr, const float *b, float *y, float *scratch) {
  const int64_t N = g->N, P = geom_p(g), O = g->O, CKW = g->C * g->KW, CHW = g->C * g->H * g->W;
  const dir_tables t = make_tables(g, scratch);
  float *xp = scratch + tables_floats(g), *yt = xp + N * xp_floats(g);
  for (int64_t i = 0; i < N; i++) pad_item(g, x + i * CHW, xp + i * xp_floats(g));
  for (int64_t oh0 = 0, oh1; oh0 < g->HO; oh0 = oh1) { /* output rows with the same kernel rows, every item */
    int64_t lo, hi, lo1, hi1;
    rows_meeting(g, oh0, &lo, &hi);
    for (oh1 = oh0 + 1; oh1 < g->HO; oh1++) {
      rows_meeting(g, oh1, &lo1, &hi1);
      if (lo1 != lo || hi1 != hi) break;
    }
    const int64_t q0 = oh0 * N * g->WO;
    const lt_gemm_rows gr = { .m = (oh1 - oh0) * N * g->WO,
                              .n = O,
                              .k = (hi - lo) * CKW,
                              .a = xp,
                              .aoff = t.pos + q0,
                              .acol = t.tap + lo * CKW,
                              .b = wr + lo * CKW * LT_GEMM_SM_NR,
                              .ldb = LT_GEMM_SM_NR,
                              .bpanel = geom_k(g) * LT_GEMM_SM_NR,
                              .c = yt,
                              .coff = t.row + q0 };
    lt_gemm_small_m_rows(&gr);
  }
  for (int64_t i = 0; i < N; i++) {
    float *yi = y + i * O * P;
    lt_transpose_f32(yt + i * P * O, O, P, O, yi, P, 0);
    if (b)
      for (int64_t o = 0; o < O; o++) add_bias_inplace(yi + o * P, b[o], P);
  }
}

/* gw [O, K] += the weight gradient over the items of g; scratch: sm_gw_floats */
static int64_t sm_gw_floats(const conv_geom *g) {
  return tables_floats(g) + g->N * xp_floats(g) + g->N * geom_p(g) * o_panels(g) + geom_k(g) * g->O;
}
static void sm_weight_grad(const conv_geom *g, const float *x, const float *gy, float *gw, int add, float *scratch) {
  const int64_t N = g->N, P = geom_p(g), O = g->O, K = geom_k(g), CKW = g->C * g->KW, CHW = g->C * g->H * g->W;
  const dir_tables t = make_tables(g, scratch);
  const int64_t NR = LT_GEMM_SM_NR, NP = N * P;
  float *xp = scratch + tables_floats(g), *gyt = xp + N * xp_floats(g), *gwt = gyt + NP * o_panels(g);
  for (int64_t i = 0; i < N; i++) pad_item(g, x + i * CHW, xp + i * xp_floats(g));
  for (int64_t q = 0; q < O; q += NR) /* gy^T in (oh, item, ow) order, packed in panels of 32 channels */
    for (int64_t oh = 0; oh < g->HO; oh++)
      for (int64_t i = 0; i < N; i++)
        lt_transpose_f32(gy + (i * O + q) * P + oh * g->WO, P, O - q < NR ? O - q : NR, g->WO,
                         gyt + q * NP + (oh * N + i) * g->WO * NR, NR, 0);
  for (int64_t ki = 0; ki < g->KH; ki++) {
    int64_t lo, hi; /* the output rows at which kernel row ki meets the input */
    lt_conv_valid_range(ki * g->DH, g->SH, g->PH, g->H, g->HO, &lo, &hi);
    if (hi < lo) hi = lo;
    const int64_t q0 = lo * N * g->WO;
    const lt_gemm_rows gr = { .m = CKW,
                              .n = O,
                              .k = (hi - lo) * N * g->WO,
                              .a = xp,
                              .aoff = t.tap + ki * CKW,
                              .acol = t.pos + q0,
                              .b = gyt + q0 * NR,
                              .ldb = NR,
                              .bpanel = NP * NR,
                              .c = gwt,
                              .coff = t.trow + ki * CKW };
    lt_gemm_small_m_rows(&gr);
  }
  lt_transpose_f32(gwt, O, K, O, gw, K, add);
}

/* --- the input gradient of a stride-1 convolution as a convolution ----------------------------------------------
 * At stride 1 the input gradient is itself a convolution: gx = conv(gy, W'), W' [C, O, KH, KW] the weight with its
 * channel axes swapped and its taps reversed (W'[c, o, ki, kj] = W[o, c, KH-1-ki, KW-1-kj]), the same dilation, and
 * padding DH*(KH-1) - PH (DW*(KW-1) - PW) so that its output is the input's size. It then runs sm_forward: the
 * gradient read in place, its padded rows skipped, no col2im: for DeepLab's 64->64 k3 d2 on 28x28, batch 16, one
 * thread, the input gradient took 10.0 ms of CPU against 11.3 for the W^T tile + col2im (medians of 6, Zen 4). When
 * that padding would be negative (a padding larger than the kernel's reach) or the swapped shapes are not wide,
 * sm_input_grad instead. */
static int flipped_geom(const conv_geom *g, conv_geom *t) {
  const int64_t ph = g->DH * (g->KH - 1) - g->PH, pw = g->DW * (g->KW - 1) - g->PW;
  if (g->SH != 1 || g->SW != 1 || ph < 0 || pw < 0) return 0;
  *t = (conv_geom){ .N = g->N,
                    .C = g->O,
                    .H = g->HO,
                    .W = g->WO,
                    .O = g->C,
                    .KH = g->KH,
                    .KW = g->KW,
                    .SH = 1,
                    .SW = 1,
                    .PH = ph,
                    .PW = pw,
                    .HO = g->H,
                    .WO = g->W,
                    .DH = g->DH,
                    .DW = g->DW };
  return sm_wide(t) && geom_p(t) >= 64; /* not the items': a chunk of the batch decides as the whole batch did */
}

/* rows [c0, c1) of W' [C, O, KH, KW] (t: flipped_geom's, t->O = C, t->C = O) from w [O, C, KH, KW] */
static void flip_rows(const conv_geom *t, const float *w, float *wf, int64_t c0, int64_t c1) {
  const int64_t KHW = t->KH * t->KW, C = t->O, O = t->C;
  for (int64_t ch = c0; ch < c1; ch++)
    for (int64_t o = 0; o < O; o++)
      for (int64_t k = 0; k < KHW; k++) wf[(ch * O + o) * KHW + KHW - 1 - k] = w[(o * C + ch) * KHW + k];
}

/* wr for flipped_geom's t from w [O, C, KH, KW]: W' built in wf, then reorder_panels */
static void reorder_flipped(int parts, const conv_geom *t, const float *w, float *wf, float *wr) {
  reorder_job j = { t, w, wf, wr };
  lt_pool_for(parts, o_panels(t) / LT_GEMM_SM_NR, 1, reorder_range, &j);
}

/* W^T [K, O] from w [O, K], rows of w [o0, o1) at a time on the pool */
typedef struct wt_job {
  const float *w;
  float *wt;
  int64_t K, O;
} wt_job;
static void wt_range(void *arg, int64_t o0, int64_t o1) {
  const wt_job *j = arg;
  lt_transpose_f32(j->w + o0 * j->K, j->K, o1 - o0, j->K, j->wt + o0, j->O, 0);
}

/* --- the input gradient of a strided layer by phases -----------------------------------------------------------
 * At stride s the input rows split into s phases by (ih + PH) mod s: the rows of phase r receive only the kernel
 * rows ki = r + s*u, from gradient row A - u where A = (ih + PH - r) / s. So each phase (rh, rw) of gx is a
 * stride-1 product over the gradient: gx[c, ih, iw] = sum over o, u, v of W[o, c, rh + SH*u, rw + SW*v] *
 * gy[o, Ah - u, Aw - v], read in place from gy padded by ceil(k/s) - 1 rows and columns before (and after, as far as
 * the input reaches). The phases' GEMMs write gx^T rows [positions, C] for their positions, each position in one
 * phase, then gx = their transpose: no col2im, and no gcol [K, P] (1 MB an item for DCGAN's 64->128 k4 s2). For
 * undilated strided layers whose input channels fill the tile's panels (C >= 64) over >= 64 positions an item. */
typedef struct phase_geom {
  int64_t top, left, hp, wp; /* gy's padding before, and its padded size */
} phase_geom;
static int phases_ok(const conv_geom *g) {
  return (g->SH > 1 || g->SW > 1) && g->DH == 1 && g->DW == 1 && g->C >= 64 && geom_p(g) >= 64;
}
static phase_geom phase_geom_of(const conv_geom *g) {
  phase_geom p;
  p.top = (g->KH + g->SH - 1) / g->SH - 1;
  p.left = (g->KW + g->SW - 1) / g->SW - 1;
  const int64_t ah = (g->H - 1 + g->PH) / g->SH, aw = (g->W - 1 + g->PW) / g->SW; /* the last rows read */
  p.hp = p.top + (ah + 1 > g->HO ? ah + 1 : g->HO);
  p.wp = p.left + (aw + 1 > g->WO ? aw + 1 : g->WO);
  return p;
}
/* the kernel rows (columns) of phase r: r, r + s, ... below k */
static int64_t phase_u(int64_t k, int64_t s, int64_t r) { return r < k ? (k - r + s - 1) / s : 0; }
/* the packed weight: per phase in (rh, rw) order, panels of 32 input channels, rows (o, u, v) */
static int64_t phases_weight_floats(const conv_geom *g) { return g->O * g->KH * g->KW * nr_round(g->C); }
typedef struct phase_pack_job {
  const conv_geom *g;
  const float *w;
  float *wp;
} phase_pack_job;
static void phase_pack_range(void *arg, int64_t p0, int64_t p1) {
  const phase_pack_job *j = arg;
  const conv_geom *g = j->g;
  const int64_t NR = LT_GEMM_SM_NR, CP = nr_round(g->C);
  float *dst = j->wp;
  for (int64_t rh = 0; rh < g->SH; rh++)
    for (int64_t rw = 0; rw < g->SW; rw++) {
      const int64_t uh = phase_u(g->KH, g->SH, rh), uw = phase_u(g->KW, g->SW, rw), kt = g->O * uh * uw;
      for (int64_t q = p0 * NR; q < p1 * NR && q < g->C; q += NR) {
        const int64_t nc = g->C - q < NR ? g->C - q : NR;
        float *d = dst + q * kt;
        for (int64_t o = 0; o < g->O; o++)
          for (int64_t u = 0; u < uh; u++)
            for (int64_t v = 0; v < uw; v++, d += NR)
              for (int64_t jj = 0; jj < NR; jj++)
                d[jj] = jj < nc ? j->w[((o * g->C + q + jj) * g->KH + rh + g->SH * u) * g->KW + rw + g->SW * v] : 0.0f;
      }
      dst += CP * kt;
    }
}
/* scratch of one chunk: gy padded, gx^T [N*H*W, C], the position tables (2 per position) and one phase's taps */
static int64_t phases_floats(const conv_geom *g) {
  const phase_geom p = phase_geom_of(g);
  const int64_t HW = g->H * g->W;
  return (g->N * g->O * p.hp * p.wp + g->N * HW * g->C + 15) / 16 * 16 + 2 * (2 * g->N * HW + g->O * g->KH * g->KW);
}
static void phases_input_grad(const conv_geom *g, const float *wp, const float *gy, float *gx, float *scratch) {
  const phase_geom pg = phase_geom_of(g);
  const int64_t N = g->N, C = g->C, HW = g->H * g->W, NR = LT_GEMM_SM_NR, CP = nr_round(C);
  const int64_t plane = pg.hp * pg.wp, item = g->O * plane;
  float *gyp = scratch, *xt = gyp + N * item;
  int64_t *pos = (int64_t *)(scratch + (N * item + N * HW * C + 15) / 16 * 16), *row = pos + N * HW,
          *tap = row + N * HW;
  memset(gyp, 0, sizeof(float) * (size_t)(N * item));
  for (int64_t i = 0; i < N; i++)
    for (int64_t o = 0; o < g->O; o++)
      for (int64_t oh = 0; oh < g->HO; oh++)
        memcpy(gyp + i * item + o * plane + (oh + pg.top) * pg.wp + pg.left, gy + ((i * g->O + o) * g->HO + oh) * g->WO,
               sizeof(float) * (size_t)g->WO);
  const float *wph = wp;
  for (int64_t rh = 0; rh < g->SH; rh++)
    for (int64_t rw = 0; rw < g->SW; rw++) {
      const int64_t uh = phase_u(g->KH, g->SH, rh), uw = phase_u(g->KW, g->SW, rw), kt = g->O * uh * uw;
      int64_t m = 0, q = 0;
      for (int64_t o = 0; o < g->O; o++)
        for (int64_t u = 0; u < uh; u++)
          for (int64_t v = 0; v < uw; v++) tap[q++] = o * plane - u * pg.wp - v;
      for (int64_t i = 0; i < N; i++)
        for (int64_t ih = (rh - g->PH % g->SH + g->SH) % g->SH; ih < g->H; ih += g->SH)
          for (int64_t iw = (rw - g->PW % g->SW + g->SW) % g->SW; iw < g->W; iw += g->SW, m++) {
            const int64_t ah = (ih + g->PH - rh) / g->SH, aw = (iw + g->PW - rw) / g->SW;
            pos[m] = i * item + (ah + pg.top) * pg.wp + aw + pg.left;
            row[m] = (i * HW + ih * g->W + iw) * C;
          }
      const lt_gemm_rows gr = { .m = m,
                                .n = C,
                                .k = kt,
                                .a = gyp,
                                .aoff = pos,
                                .acol = tap,
                                .b = wph,
                                .ldb = NR,
                                .bpanel = kt * NR,
                                .c = xt,
                                .coff = row };
      if (m) lt_gemm_small_m_rows(&gr);
      wph += CP * kt;
    }
  for (int64_t i = 0; i < N; i++) lt_transpose_f32(xt + i * HW * C, C, HW, C, gx + i * C * HW, HW, 0);
}

/* The input gradient's form on the small-M path, one rule for its weight, scratch and products: by phases (a
 * strided layer, phases_ok), as the flipped convolution's forward (stride 1, flipped_geom fills *t), or W^T
 * products folded by col2im. */
typedef enum { GX_PHASES, GX_FLIPPED, GX_COL2IM } gx_form_t;
static gx_form_t gx_form(const conv_geom *g, conv_geom *t) {
  if (phases_ok(g)) return GX_PHASES;
  return flipped_geom(g, t) ? GX_FLIPPED : GX_COL2IM;
}

/* the floats of the weight the input gradient reads: W^T [K, O], or flipped_geom's wr with room for W' after it,
 * or the phases' packed weight */
static int64_t gx_weight_floats(const conv_geom *g) {
  conv_geom t;
  switch (gx_form(g, &t)) {
    case GX_PHASES: return phases_weight_floats(g);
    case GX_FLIPPED: return geom_k(&t) * o_panels(&t) + geom_k(g) * g->O;
    default: return geom_k(g) * g->O;
  }
}
static void gx_weight(int parts, const conv_geom *g, const float *w, float *wt) {
  conv_geom t;
  const int64_t K = geom_k(g);
  switch (gx_form(g, &t)) {
    case GX_PHASES: {
      phase_pack_job j = { g, w, wt };
      lt_pool_for(parts, nr_round(g->C) / LT_GEMM_SM_NR, 1, phase_pack_range, &j);
      break;
    }
    case GX_FLIPPED: {
      reorder_flipped(parts, &t, w, wt + geom_k(&t) * o_panels(&t), wt);
      break;
    }
    default: {
      wt_job j = { w, wt, K, g->O };
      lt_pool_for(parts, g->O, 16, wt_range, &j);
    }
  }
}

/* gx's scratch on the small-M path */
static int64_t gx_floats(const conv_geom *g) {
  conv_geom t;
  switch (gx_form(g, &t)) {
    case GX_PHASES: return phases_floats(g);
    case GX_FLIPPED: return sm_fwd_floats(&t);
    default: return geom_k(g) * geom_p(g);
  }
}

/* gx [N, C, H, W] = the input gradient (every element written); wt: gx_weight */
static void sm_gx(const conv_geom *g, const float *wt, const float *gy, float *gx, float *scratch) {
  conv_geom t;
  switch (gx_form(g, &t)) {
    case GX_PHASES: phases_input_grad(g, wt, gy, gx, scratch); break;
    case GX_FLIPPED: sm_forward(&t, gy, wt, NULL, gx, scratch); break;
    default: sm_input_grad(g, wt, gy, gx, scratch);
  }
}

/* --- the items of a batch: forward and backward on the im2col + GEMM path or the small-M GEMM -------------
 * g->N items from x (or gy) on: the whole batch (GEMMs on the pool's threads when they pay), or one thread's range
 * of it (below). Scratch sizes: fwd_floats and bwd_floats. */
/* The small-M path takes the items a few at a time: a chunk's padded input and result (or gy^T) stay in L2 (half
 * of Zen 4's 1 MB) from the padding to the GEMMs to the transposes, where a whole range of items made them a trip
 * through L3 each (4.2 MB of padded input for the dilated 64->64 layer on 28x28, batch 16: its forward 9.2-10.1 ->
 * 8.4-8.5 ms, its input gradient 9.1-10.4 -> 8.3-9.1, one thread, Zen 4). */
#define SM_CHUNK_BYTES (512 * 1024)
static int64_t sm_chunk(const conv_geom *g) {
  const int64_t per = (int64_t)sizeof(float) * (xp_floats(g) + geom_p(g) * o_panels(g));
  const int64_t nb = SM_CHUNK_BYTES / per;
  return nb < 1 ? 1 : nb < g->N ? nb : g->N;
}
/* the weight gradient's chunks: at least SM_GW_POSITIONS output positions, since each chunk reads and writes all of
 * gw^T [K, O] once (2 MB for DCGAN's 128->256 k4 s2, P = 64: chunks of 2 items took its gradient from 12.5 to 21 ms) */
#define SM_GW_POSITIONS 1024
static int64_t sm_gw_chunk(const conv_geom *g) {
  const int64_t least = (SM_GW_POSITIONS + geom_p(g) - 1) / geom_p(g), nb = sm_chunk(g) > least ? sm_chunk(g) : least;
  return nb < g->N ? nb : g->N;
}
static conv_geom with_items(const conv_geom *g, int64_t n) {
  conv_geom c = *g;
  c.N = n;
  return c;
}

static int64_t fwd_floats(const conv_geom *g, int sm) {
  if (sm) {
    const conv_geom c = with_items(g, sm_chunk(g));
    return sm_fwd_floats(&c);
  }
  return (geom_k(g) + g->O) * chunk_items(g) * geom_p(g);
}

/* y = conv(x) + b; scratch: fwd_floats; w: the weight as it is, or as reorder_weight made it (sm)
 * made it */
static int forward_items(lt_ctx *c, const conv_geom *g, int sm, const float *x, const float *w, const float *b,
                         float *y, float *scratch) {
  if (sm) {
    const int64_t nb = sm_chunk(g), CHW = g->C * g->H * g->W, OP = g->O * geom_p(g);
    for (int64_t i0 = 0; i0 < g->N; i0 += nb) {
      const conv_geom c = with_items(g, g->N - i0 < nb ? g->N - i0 : nb);
      sm_forward(&c, x + i0 * CHW, w, b, y + i0 * OP, scratch);
    }
    return LT_OK;
  }
  const int64_t K = geom_k(g), P = geom_p(g), CHW = g->C * g->H * g->W, nb = chunk_items(g);
  float *col = scratch, *tmp = scratch + K * nb * P;
  for (int64_t i0 = 0; i0 < g->N; i0 += nb) {
    const int64_t m = g->N - i0 < nb ? g->N - i0 : nb, ld = m * P;
    for (int64_t j = 0; j < m; j++) unfold(g, x + (i0 + j) * CHW, col + j * P, ld);
    if (lt_gemm(c, 0, 0, g->O, ld, K, 1.0f, w, K, col, ld, 0.0f, tmp, ld)) return LT_ERR;
    for (int64_t j = 0; j < m; j++)
      for (int64_t o = 0; o < g->O; o++)
        add_bias_row(y + ((i0 + j) * g->O + o) * P, tmp + o * ld + j * P, b ? b[o] : 0.0f, P);
  }
  return LT_OK;
}

/* the backward's scratch: on the small-M path the input gradient's gcol [K, P] and the weight gradient's
 * sm_gw_floats one after the other; else col [K, nb*P] and the gathered gradient [O, nb*P] */
static int64_t bwd_floats(const conv_geom *g, int sm, int need_x, int need_w) {
  /* the input gradient's chunks, the weight gradient's, then the im2col path's, one after the other in one scratch */
  const conv_geom cx = with_items(g, sm_chunk(g)), cw = with_items(g, sm_gw_chunk(g));
  const int64_t nx = need_x && (sm & SM_X) ? gx_floats(&cx) : 0, nw = need_w && (sm & SM_W) ? sm_gw_floats(&cw) : 0;
  const int64_t ni =
      (need_x && !(sm & SM_X)) || (need_w && !(sm & SM_W)) ? (geom_k(g) + g->O) * chunk_items(g) * geom_p(g) : 0;
  return nx > nw ? (nx > ni ? nx : ni) : (nw > ni ? nw : ni);
}

/* gx = conv's input gradient (NULL: not wanted), gw += its weight gradient (gw_fresh: gw = it, over whatever gw
 * held) (NULL: not wanted); sm: which
 * of them run on the small-M GEMM (SM_X: the input gradient, with wt = gx_weight; SM_W: the weight gradient), the
 * others on im2col + GEMM; scratch: bwd_floats */
static int backward_items(lt_ctx *c, const conv_geom *g, int sm, const float *x, const float *w, const float *wt,
                          const float *gy, float *gx, float *gw, int gw_fresh, float *scratch) {
  const int64_t K = geom_k(g), P = geom_p(g), CHW = g->C * g->H * g->W, nb = chunk_items(g), OP = g->O * P;
  conv_geom t;
  if (gx && !((sm & SM_X) && gx_form(g, &t) != GX_COL2IM)) /* col2im and the GEMM path add into gx: zeros first */
    memset(gx, 0, sizeof(float) * (size_t)(g->N * CHW));
  if (gx && (sm & SM_X)) {
    const int64_t nx = sm_chunk(g);
    for (int64_t i0 = 0; i0 < g->N; i0 += nx) {
      const conv_geom cx = with_items(g, g->N - i0 < nx ? g->N - i0 : nx);
      sm_gx(&cx, wt, gy + i0 * OP, gx + i0 * CHW, scratch);
    }
    gx = NULL;
  }
  if (gw && (sm & SM_W)) {
    const int64_t nw = sm_gw_chunk(g);
    for (int64_t i0 = 0; i0 < g->N; i0 += nw) {
      const conv_geom cw = with_items(g, g->N - i0 < nw ? g->N - i0 : nw);
      sm_weight_grad(&cw, x + i0 * CHW, gy + i0 * OP, gw, !gw_fresh || i0 > 0, scratch);
    }
    gw = NULL;
  }
  if (!gx && !gw) return LT_OK;
  float *col = scratch, *gperm = col + K * nb * P;
  for (int64_t i0 = 0; i0 < g->N; i0 += nb) {
    const int64_t m = g->N - i0 < nb ? g->N - i0 : nb, ld = m * P;
    for (int64_t j = 0; j < m; j++) gather_gy(g, gy + (i0 + j) * OP, gperm + j * P, ld);
    if (gw) {
      for (int64_t j = 0; j < m; j++) unfold(g, x + (i0 + j) * CHW, col + j * P, ld);
      const float beta = gw_fresh && i0 == 0 ? 0.0f : 1.0f;
      if (lt_gemm(c, 0, 1, g->O, K, ld, 1.0f, gperm, ld, col, ld, beta, gw, K)) return LT_ERR;
    }
    if (gx) {
      if (lt_gemm(c, 1, 0, K, ld, g->O, 1.0f, w, K, gperm, ld, 0.0f, col, ld)) return LT_ERR;
      for (int64_t j = 0; j < m; j++) fold(g, col + j * P, ld, gx + (i0 + j) * CHW);
    }
  }
  return LT_OK;
}

/* --- the batch split over the pool's threads ---------------------------------------------------------------
 * On more than one thread the whole-batch path ran im2col/col2im on the caller around GEMMs split over the pool:
 * the unfolding was serial (87% CPU on 2 threads; DCGAN's k4 s2 convs 0.81-0.94x PyTorch's oneDNN, AMD EPYC Zen 4)
 * and every thread packed the shared operand anyway. Here each thread takes a range of the batch and runs the
 * one-thread algorithm on it: its own scratch, GEMMs on its own thread (a GEMM inside a pool part runs on the
 * thread that calls it: lt_pool.h), the small-M GEMM where the shapes allow. The weight gradient is summed per
 * range, the first range into the gradient itself and the others into buffers of their own added in range order
 * afterwards. When: lt_conv_split_parts. */
#define SPLIT_MIN_MACS 4e6

int lt_conv_split_parts(lt_ctx *c, int64_t N, int64_t O, int64_t K, int64_t P) {
  int nt = c->num_threads < lt_pool_threads() ? c->num_threads : lt_pool_threads();
  if (nt > N) nt = (int)N;
  if (nt < 2 || c->autocast != LT_AUTOCAST_OFF) return 1;
  const double n = (double)N, o = (double)O, k = (double)K, p = (double)P;
  if (n * o * k * p / nt < SPLIT_MIN_MACS) return 1;
  if (k * p * n >= INT32_MAX || o * p * n >= INT32_MAX || k * o >= INT32_MAX) return 1;
  return lt_blas_ready(c) ? 1 : nt;
}

static int split_parts(lt_ctx *c, const conv_geom *g) {
  return lt_conv_split_parts(c, g->N, g->O, geom_k(g), geom_p(g));
}

typedef struct split_job {
  lt_ctx *c;
  const conv_geom *g;
  int backward, sm, nparts, gw_fresh; /* gw_fresh: gw's contents are to be overwritten, not added to */
  const float *x, *w, *b, *wt, *gy;
  float *y, *gx, *gw; /* the output, or the gradients (NULL: not wanted) */
  float *scratch;     /* per part: `each` floats, then (parts > 0, weight gradient) O*K for its sum */
  int64_t each;
  int failed; /* a part's GEMM refused (cannot happen past split_parts' checks; kept as an error, not ignored) */
} split_job;

static void split_part(void *arg, int part, int nparts) {
  split_job *j = arg;
  const conv_geom *g = j->g;
  int64_t lo, hi;
  lt_pool_range(g->N, part, nparts, 1, &lo, &hi);
  if (lo >= hi) return;
  conv_geom gs = *g;
  gs.N = hi - lo;
  const int64_t K = geom_k(g), P = geom_p(g), CHW = g->C * g->H * g->W, OK = g->O * K;
  float *scratch = j->scratch + part * (j->each + (j->backward && j->gw ? OK : 0));
  if (!j->backward) {
    if (forward_items(j->c, &gs, j->sm, j->x + lo * CHW, j->w, j->b, j->y + lo * g->O * P, scratch))
      __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
    return;
  }
  float *gw = j->gw;
  int fresh = j->gw_fresh;
  if (gw && part > 0) { /* this range's own sum, added to the others' by the caller */
    gw = scratch + j->each;
    fresh = 1;
  }
  if (backward_items(j->c, &gs, j->sm, j->x + lo * CHW, j->w, j->wt, j->gy + lo * g->O * P,
                     j->gx ? j->gx + lo * CHW : NULL, gw, fresh, scratch))
    __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
}

/* gw += the other ranges' sums, in range order, over the pool (elements [lo, hi) of gw each) */
typedef struct gw_sum_job {
  const split_job *j;
  int ranges;
  int64_t OK;
} gw_sum_job;
static void gw_sum_range(void *arg, int64_t lo, int64_t hi) {
  const gw_sum_job *s = arg;
  for (int i = 1; i < s->ranges; i++) {
    const float *part = s->j->scratch + i * (s->j->each + s->OK) + s->j->each;
    for (int64_t k = lo; k < hi; k++) s->j->gw[k] += part[k];
  }
}

/* runs j over nparts ranges; scratch allocated here */
static int split_run(lt_ctx *c, split_job *j) {
  const conv_geom *g = j->g;
  conv_geom gs = *g;
  gs.N = (g->N + j->nparts - 1) / j->nparts; /* the largest range */
  const int64_t OK = g->O * geom_k(g);
  j->each = j->backward ? bwd_floats(&gs, j->sm, j->gx != NULL, j->gw != NULL) : fwd_floats(&gs, j->sm);
  j->each = (j->each + 15) / 16 * 16; /* whole cache lines per part */
  const int64_t total = j->nparts * j->each + (j->backward && j->gw ? j->nparts * OK : 0);
  if (!(j->scratch = scratch(c, total))) return LT_ERR;
  lt_pool_run(split_part, j, j->nparts);
  const int rc = j->failed ? LT_ERR : LT_OK;
  if (rc == LT_OK && j->backward && j->gw) {
    gw_sum_job s = { j, 1, OK };
    while (s.ranges < j->nparts && (int64_t)s.ranges * ((g->N + j->nparts - 1) / j->nparts) < g->N) s.ranges++;
    lt_pool_for(j->nparts, OK, 16, gw_sum_range, &s);
  }
  lt_free(j->scratch, sizeof(float) * (size_t)total);
  return rc;
}

/* The weight gradient of a large weight over few positions a range, on the im2col path: DCGAN's Conv2d 256->512
 * k4 s2 on 8x8 has an 8 MB gw and 128 output positions in each of 2 ranges, so each range's own sum was a GEMM of
 * k = 128 writing 8 MB, and the second range's 8 MB were then added into the first. Instead the whole batch is
 * unfolded (items over the pool) into one col [K, N*P] beside gy's planes gathered [O, N*P], and the gradient is
 * one GEMM of k = N*P split over the pool's threads by C (the same sums as on one thread). GEMMs alone, 2 threads,
 * Zen 4: 7.2 -> 6.2 ms. */
#define WHOLE_GW_MIN_FLOATS (INT64_C(1) << 20)
#define WHOLE_GW_MAX_POSITIONS 256
static int gw_whole_pays(const conv_geom *g, int parts) {
  return parts > 1 && g->O * geom_k(g) >= WHOLE_GW_MIN_FLOATS && g->N * geom_p(g) / parts < WHOLE_GW_MAX_POSITIONS;
}
typedef struct unfold_job {
  const conv_geom *g;
  const float *x, *gy;
  float *col, *gperm;
} unfold_job;
static void unfold_range(void *arg, int64_t i0, int64_t i1) {
  const unfold_job *j = arg;
  const conv_geom *g = j->g;
  const int64_t P = geom_p(g), NP = g->N * P, CHW = g->C * g->H * g->W;
  for (int64_t i = i0; i < i1; i++) {
    unfold(g, j->x + i * CHW, j->col + i * P, NP);
    gather_gy(g, j->gy + i * g->O * P, j->gperm + i * P, NP);
  }
}
/* gw (+)= the weight gradient over the whole batch (gw_fresh: written, not added to) */
static int gw_whole(lt_ctx *c, const conv_geom *g, int parts, const float *x, const float *gy, float *gw,
                    int gw_fresh) {
  const int64_t K = geom_k(g), NP = g->N * geom_p(g), n = (K + g->O) * NP;
  float *col = scratch(c, n);
  if (!col) return LT_ERR;
  unfold_job j = { g, x, gy, col, col + K * NP };
  lt_pool_for(parts, g->N, 1, unfold_range, &j);
  const int rc = lt_gemm(c, 0, 1, g->O, K, NP, 1.0f, j.gperm, NP, col, NP, gw_fresh ? 0.0f : 1.0f, gw, K);
  lt_free(col, sizeof(float) * (size_t)n);
  return rc;
}

/* gb[o] = the sum of gy's plane o over the items, for o in [o0, o1) (vector lanes, then double) */
typedef struct bias_grad_job {
  const conv_geom *g;
  const float *gy;
  float *gb;
} bias_grad_job;
static void bias_grad_range(void *arg, int64_t o0, int64_t o1) {
  const bias_grad_job *j = arg;
  const int64_t P = geom_p(j->g), O = j->g->O;
  for (int64_t o = o0; o < o1; o++) {
    double s = 0;
    for (int64_t i = 0; i < j->g->N; i++) s += lt_sum_f32(j->gy + (i * O + o) * P, P);
    j->gb[o] = (float)s;
  }
}

static int conv2d_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  lt_tensor *x = n->inputs[0], *w = n->inputs[1], *b = n->ninputs > 2 ? n->inputs[2] : NULL;
  conv_geom g;
  memcpy(&g, n->i, sizeof g);
  int need_x = x->requires_grad, need_w = w->requires_grad, need_b = b && b->requires_grad;
  const int direct = direct_ok(&g, x); /* the forward took the direct path: no input gradient */
  const int parts = direct ? 1 : split_parts(c, &g);
  /* the gradients on the small-M GEMM: on one thread, or per range of a split batch */
  conv_geom flipped;
  const int sm = !direct && (need_x || need_w) && sm_thread(c, parts) && sm_wide(&g)
                     ? (geom_p(&g) >= 64 ? SM_W : 0) | (geom_p(&g) >= 64 || flipped_geom(&g, &flipped) ? SM_X : 0)
                     : 0;
  lt_tensor *gc = lt_op_contiguous(c, gout), *xc = NULL, *wc = NULL, *gx = NULL, *gw = NULL, *gb = NULL;
  float *work = NULL, *wt = NULL;
  const int64_t nwt = (sm & SM_X) && need_x ? gx_weight_floats(&g) : 0;
  const int64_t nwork = parts == 1 && !direct ? bwd_floats(&g, sm, need_x, need_w) : 0;
  if (!gc) goto fail;
  if (need_w && !(xc = lt_op_contiguous(c, x))) goto fail;
  if (need_x && !(wc = lt_op_contiguous(c, w))) goto fail;
  if (nwork && !(work = scratch(c, nwork))) goto fail;
  if (nwt && !(wt = scratch(c, nwt))) goto fail;
  if (nwt) gx_weight(parts, &g, lt_f32(wc), wt);
  if (need_x && !(gx = lt_tensor_new(c, LT_F32, 4, x->shape))) goto fail; /* every element written by the ranges */
  /* the im2col path accumulates its chunks with beta = 1: into w's existing gradient directly when it has one
   * (lt_grad_inplace_target), else into zeros */
  const lt_tensor *ops[3] = { x, w, gout };
  lt_tensor *wacc = need_w && !direct ? lt_grad_inplace_target(w, ops, 3) : NULL;
  if (wacc) gw = lt_tensor_retain(wacc);
  else if (need_w && !(gw = lt_tensor_new(c, LT_F32, 4, w->shape))) goto fail; /* written, not added to */
  const float *pg = lt_f32(gc);
  if (direct && need_w && dc_weight_grad(c, &g, lt_f32(xc), pg, lt_f32(gw))) goto fail;
  const float *px = xc ? lt_f32(xc) : NULL, *pw = wc ? lt_f32(wc) : NULL;
  float *pgx = gx ? lt_f32(gx) : NULL, *pgw = gw ? lt_f32(gw) : NULL;
  if (!direct && parts > 1) {
    const int whole = need_w && !(sm & SM_W) && gw_whole_pays(&g, parts); /* gw in one GEMM, gx by ranges */
    if (whole && gw_whole(c, &g, parts, px, pg, pgw, !wacc)) goto fail;
    split_job j = { .c = c,
                    .g = &g,
                    .backward = 1,
                    .sm = sm,
                    .nparts = parts,
                    .x = px,
                    .w = pw,
                    .wt = wt,
                    .gy = pg,
                    .gx = pgx,
                    .gw = whole ? NULL : pgw,
                    .gw_fresh = !wacc };
    if ((pgx || j.gw) && split_run(c, &j)) goto fail;
  } else if (!direct && backward_items(c, &g, sm, px, pw, wt, pg, pgx, pgw, !wacc, work)) goto fail;
  if (need_b) {
    if (!(gb = lt_tensor_new(c, LT_F32, 1, &g.O))) goto fail;
    bias_grad_job j = { &g, pg, lt_f32(gb) };
    lt_pool_for(parts, g.O, 16, bias_grad_range, &j);
  }
  gin[0] = gx;
  if (wacc) lt_tensor_release(gw); /* already added into w.grad */
  else gin[1] = gw;
  if (n->ninputs > 2) gin[2] = gb;
  lt_tensor_release(gc);
  lt_tensor_release(xc);
  lt_tensor_release(wc);
  if (work) lt_free(work, sizeof(float) * (size_t)nwork);
  if (wt) lt_free(wt, sizeof(float) * (size_t)nwt);
  return LT_OK;
fail:
  lt_tensor_release(gc);
  lt_tensor_release(xc);
  lt_tensor_release(wc);
  if (work) lt_free(work, sizeof(float) * (size_t)nwork);
  if (wt) lt_free(wt, sizeof(float) * (size_t)nwt);
  lt_tensor_release(gx);
  lt_tensor_release(gw);
  lt_tensor_release(gb);
  return LT_ERR;
}

/* conv2d followed by ReLU in one node (nn.Sequential fuses the pair): conv2d's backward of the gradient
 * through the ReLU */
static int conv2d_relu_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  lt_tensor *gm = lt_relu_grad(c, gout, n->saved[0]);
  if (!gm) return LT_ERR;
  int rc = conv2d_backward(c, n, gm, gin);
  lt_tensor_release(gm);
  return rc;
}

static lt_tensor *conv2d_f32(lt_ctx *c, lt_tensor *x, lt_tensor *w, lt_tensor *b, int sh, int sw, int ph, int pw,
                             int dh, int dw, lt_act act) {
  char b1[128], b2[128];
  if (lt_conv_check_dtypes(c, "conv2d", x, w, b)) return NULL;
  if (w->ndim != 4) {
    lt_fail(c, "conv2d: weight must be 4-D [out_channels x in_channels x kh x kw], got %s",
            lt_shape_str(w, b1, sizeof b1));
    return NULL;
  }
  if (x->ndim != 4) {
    lt_fail(c, "conv2d: input must be 4-D [batch x channels x height x width], got %s", lt_shape_str(x, b1, sizeof b1));
    return NULL;
  }
  if (w->shape[2] < 1 || w->shape[3] < 1) { /* an empty kernel would give an output of bias alone, of the wrong size */
    lt_fail(c, "conv2d: the kernel must be at least 1x1, got weight %s", lt_shape_str(w, b1, sizeof b1));
    return NULL;
  }
  if (x->shape[1] != w->shape[1]) {
    lt_fail(c, "conv2d: input has %lld channels, expected %lld (input %s, weight %s)", (long long)x->shape[1],
            (long long)w->shape[1], lt_shape_str(x, b1, sizeof b1), lt_shape_str(w, b2, sizeof b2));
    return NULL;
  }
  if (sh < 1 || sw < 1 || ph < 0 || pw < 0) {
    lt_fail(c, "conv2d: stride must be >= 1 and padding >= 0, got stride %dx%d, padding %dx%d", sh, sw, ph, pw);
    return NULL;
  }
  if (b && (b->ndim != 1 || b->shape[0] != w->shape[0])) {
    lt_fail(c, "conv2d: bias must be [%lld], got %s", (long long)w->shape[0], lt_shape_str(b, b1, sizeof b1));
    return NULL;
  }
  conv_geom g = { x->shape[0], x->shape[1], x->shape[2], x->shape[3], w->shape[0], w->shape[2], w->shape[3], sh,
                  sw,          ph,          pw,          0,           0,           dh,          dw };
  /* the dilated kernel; no overflow: a dilation other than 1 comes from lt_nn_conv2d_ex, which checked it (>= 1, as
   * stride and padding) and this extent against the padded input first */
  const int64_t eh = g.DH * (g.KH - 1) + 1, ew = g.DW * (g.KW - 1) + 1;
  if (g.H + 2 * g.PH < eh || g.W + 2 * g.PW < ew) {
    lt_fail(c, "conv2d: kernel %lldx%lld is larger than the padded input %lldx%lld (input %s)", (long long)eh,
            (long long)ew, (long long)(g.H + 2 * g.PH), (long long)(g.W + 2 * g.PW), lt_shape_str(x, b1, sizeof b1));
    return NULL;
  }
  g.HO = (g.H + 2 * g.PH - eh) / g.SH + 1;
  g.WO = (g.W + 2 * g.PW - ew) / g.SW + 1;
  int64_t oshape[4] = { g.N, g.O, g.HO, g.WO };
  if (lt_conv_check_sizes(c, "conv2d", oshape, geom_k(&g), g.HO, g.WO)) return NULL;
  float *work = NULL, *wr = NULL;
  int64_t nwork = 0;
  const int64_t nwr = geom_k(&g) * o_panels(&g); /* wr */
  lt_tensor *out = lt_tensor_new(c, LT_F32, 4, oshape);
  lt_tensor *xc = out ? lt_op_contiguous(c, x) : NULL;
  lt_tensor *wc = xc ? lt_op_contiguous(c, w) : NULL;
  lt_tensor *bc = wc && b ? lt_op_contiguous(c, b) : NULL;
  if (!wc || (b && !bc)) goto fail;
  const int direct = direct_ok(&g, x), parts = direct ? 1 : split_parts(c, &g);
  const int sm = !direct && sm_thread(c, parts) && sm_wide(&g) && g.N * geom_p(&g) >= 64;
  const float *pb = b ? lt_f32(bc) : NULL, *wuse = lt_f32(wc);
  if (sm) { /* the forward reads the weight as wr (reorder_weight), made once for every range */
    if (!(wr = scratch(c, nwr))) goto fail;
    reorder_weight(parts, &g, wuse, wr);
    wuse = wr;
  }
  if (direct) {
    dc_job j = { .g = &g, .x = lt_f32(xc), .w = wuse, .b = pb, .out = lt_f32(out) };
    if (dc_run(c, &j)) goto fail;
  } else if (parts > 1) {
    split_job j = { .c = c, .g = &g, .sm = sm, .nparts = parts, .x = lt_f32(xc), .w = wuse, .b = pb, .y = lt_f32(out) };
    if (split_run(c, &j)) goto fail;
  } else {
    nwork = fwd_floats(&g, sm);
    if (!(work = scratch(c, nwork)) || forward_items(c, &g, sm, lt_f32(xc), wuse, pb, lt_f32(out), work)) goto fail;
  }
  lt_tensor_release(xc);
  lt_tensor_release(wc);
  lt_tensor_release(bc);
  if (work) lt_free(work, sizeof(float) * (size_t)nwork);
  if (wr) lt_free(wr, sizeof(float) * (size_t)nwr);
  if (act == LT_ACT_RELU) lt_relu_inplace_f32(lt_f32(out), lt_numel(out));
  lt_tensor *ins[3] = { x, w, b };
  lt_node *nd;
  if (lt_record(c, out, act == LT_ACT_RELU ? "conv2d_relu" : "conv2d",
                act == LT_ACT_RELU ? conv2d_relu_backward : conv2d_backward, b ? 3 : 2, ins, &nd)) {
    lt_tensor_release(out);
    return NULL;
  }
  if (nd) {
    memcpy(nd->i, &g, sizeof g);
    nd->reads = (w->requires_grad ? LT_READS(0) : 0) | (x->requires_grad ? LT_READS(1) : 0); /* x for gw, w for gx */
  }
  if (nd && act == LT_ACT_RELU && lt_node_save_output(c, nd, 0, out)) {
    lt_tensor_release(out);
    return NULL;
  }
  return out;
fail:
  lt_tensor_release(out);
  lt_tensor_release(xc);
  lt_tensor_release(wc);
  lt_tensor_release(bc);
  if (work) lt_free(work, sizeof(float) * (size_t)nwork);
  if (wr) lt_free(wr, sizeof(float) * (size_t)nwr);
  return NULL;
}

lt_tensor *lt_nn_conv2d_f32_act(lt_ctx *c, lt_tensor *x, lt_tensor *w, lt_tensor *b, int sh, int sw, int ph, int pw,
                                lt_act act) {
  return conv2d_f32(c, x, w, b, sh, sw, ph, pw, 1, 1, act);
}

lt_tensor *lt_nn_conv2d_f32_dilated(lt_ctx *c, lt_tensor *x, lt_tensor *w, lt_tensor *b, const int *stride,
                                    const int *padding, const int *dilation) {
  return conv2d_f32(c, x, w, b, stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], LT_ACT_NONE);
}
