/*
 * nn_pool.c — 2-D max and average pooling (floor or ceil mode, optional padding; max pooling also dilated),
 * forward and backward.
 * Max pooling saves the flat position (within the H*W plane) of each window's maximum, so backward
 * is a scatter; padded cells never win. Average pooling divides like PyTorch: by the window clipped
 * to the padded input (count_include_pad) or by the number of real cells.
 * float32 or float64 (the input's dtype): the window loops are written once over the element type
 * (MAX_POOL_PLANES, AVG_POOL_PLANES); the 2x2 stride-2 rows are a float32 specialisation.
 */
#include <math.h>
#include <string.h>

#include "lt_errors.h"
#include "lt_nn.h"
#include "lt_nn_pool.h"
#include "lt_pool.h"
#include "lt_simd.h"

typedef struct pool_geom {
  int64_t N, C, H, W, KH, KW, SH, SW, PH, PW, HO, WO, count_pad, ceil_mode, DH, DW; /* DH, DW: max pooling only */
} pool_geom;
_Static_assert(sizeof(pool_geom) <= sizeof(((lt_node *)0)->i), "pool_geom must fit in a node's integer slots");

/* output size of one dim: floor or ceil mode; in ceil mode the last window must start inside the input or its
 * left padding (PyTorch's rule), so no window lies wholly in the right padding */
static int64_t pool_out_size(int64_t n, int64_t k, int64_t s, int64_t p, int ceil_mode) {
  int64_t span = n + 2 * p - k, o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (o - 1) * s >= n + p) o--;
  return o;
}

static int pool_check(lt_ctx *c, const char *op, lt_tensor *x, int kh, int kw, int sh, int sw, int ph, int pw, int dh,
                      int dw, int ceil_mode, pool_geom *g) {
  char b1[128];
  if (lt_check_float(c, op, "input", x)) return LT_ERR;
  if (x->ndim != 4)
    return lt_fail(c, "%s: input must be 4-D [batch x channels x height x width], got %s", op,
                   lt_shape_str(x, b1, sizeof b1));
  if (kh < 1 || kw < 1 || sh < 1 || sw < 1 || ph < 0 || pw < 0)
    return lt_fail(c,
                   "%s: kernel and stride must be >= 1 and padding >= 0, got kernel %dx%d, stride %dx%d, padding %dx%d",
                   op, kh, kw, sh, sw, ph, pw);
  if (dh < 1 || dw < 1) return lt_fail(c, "%s: dilation must be >= 1, got %dx%d", op, dh, dw);
  if (2 * ph > kh || 2 * pw > kw)
    return lt_fail(c, "%s: padding %dx%d must be at most half the kernel %dx%d", op, ph, pw, kh, kw);
  pool_geom r = { x->shape[0], x->shape[1], x->shape[2], x->shape[3],    kh, kw, sh, sw, ph, pw,
                  0,           0,           0,           ceil_mode != 0, dh, dw };
  const int64_t eh = (int64_t)dh * (kh - 1) + 1, ew = (int64_t)dw * (kw - 1) + 1; /* the dilated window */
  if (r.H + 2 * ph < eh || r.W + 2 * pw < ew)
    return lt_fail(c, "%s: kernel %lldx%lld is larger than the padded input %lldx%lld (input %s)", op, (long long)eh,
                   (long long)ew, (long long)(r.H + 2 * ph), (long long)(r.W + 2 * pw), lt_shape_str(x, b1, sizeof b1));
  r.HO = pool_out_size(r.H, eh, sh, ph, r.ceil_mode);
  r.WO = pool_out_size(r.W, ew, sw, pw, r.ceil_mode);
  *g = r;
  return LT_OK;
}

/* ---- max ---------------------------------------------------------------------------------------- */

/* each output's gradient goes to the input cell its window took (lt_nn.h), in the input's dtype */
#define MAX_POOL_SCATTER(T, pg, px)                                                  \
  {                                                                                  \
    const T *src = (pg);                                                             \
    T *dst = (px);                                                                   \
    for (int64_t pl = 0; pl < planes; pl++)                                          \
      for (int64_t p = 0; p < P; p++)                                                \
        if (idx[pl * P + p] >= 0) dst[pl * HW + idx[pl * P + p]] += src[pl * P + p]; \
  }

int lt_nn_max_pool_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  const lt_tensor *x = n->inputs[0];
  lt_tensor *gc;
  lt_tensor *gx = lt_nn_pool_grad_buffers(c, gout, x, &gc);
  if (!gx) return LT_ERR;
  const int64_t *idx = lt_i64(n->saved[0]);
  const int64_t planes = x->shape[0] * x->shape[1], P = gc->shape[2] * gc->shape[3], HW = x->shape[2] * x->shape[3];
  if (x->dtype == LT_F64) {
    MAX_POOL_SCATTER(double, lt_f64(gc), lt_f64(gx))
  } else {
    MAX_POOL_SCATTER(float, lt_f32(gc), lt_f32(gx))
  }
  lt_tensor_release(gc);
  gin[0] = gx;
  return LT_OK;
}

/* Window maxima without data-dependent branches (they mispredict half the time on activations): a value
 * wins when it is greater, or when it is a NaN and the best so far is not (the first NaN propagates), so
 * the winner is the first maximum in row-major order, as in PyTorch. The 2x2, stride 2, unpadded case
 * (LeNet, VGG) compares within each row first, then the two rows (the same winner); its rows are short
 * (14 or 5 outputs in LeNet), so on AVX-512 it runs as masked 16-lane vectors with no scalar tail, and
 * elsewhere as plain C (which GCC leaves scalar and branchy for this pattern). */
static void max_pool_2x2_row(const float *restrict r0, const float *restrict r1, float *restrict o,
                             int64_t *restrict oi, int64_t base, int wo, int w) {
  for (int i = 0; i < wo; i++) {
    float a = r0[2 * i], b = r0[2 * i + 1], c = r1[2 * i], d = r1[2 * i + 1];
    int tb = (b > a) | ((b != b) & (a == a));
    float m0 = tb ? b : a;
    int td = (d > c) | ((d != d) & (c == c));
    float m1 = td ? d : c;
    int tr = (m1 > m0) | ((m1 != m1) & (m0 == m0));
    o[i] = tr ? m1 : m0;
    oi[i] = base + 2 * i + (tr ? w + td : tb); /* the winner's offset from the window's top-left cell */
  }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define POOL_AVX512 1
__attribute__((target("avx512f"))) static void max_pool_2x2_row_avx512(const float *r0, const float *r1, float *o,
                                                                       int64_t *oi, int64_t base, int wo, int w) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i lane2 = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  for (int i = 0; i < wo; i += 16) {
    int n = wo - i < 16 ? wo - i : 16;
    __mmask16 k = (__mmask16)((1u << n) - 1), klo = (__mmask16)(n >= 8 ? 0xffff : (1u << 2 * n) - 1),
              khi = (__mmask16)(n <= 8 ? 0 : (1u << (2 * n - 16)) - 1);
    __m512 x0 = _mm512_maskz_loadu_ps(klo, r0 + 2 * i), x1 = _mm512_maskz_loadu_ps(khi, r0 + 2 * i + 16);
    __m512 y0 = _mm512_maskz_loadu_ps(klo, r1 + 2 * i), y1 = _mm512_maskz_loadu_ps(khi, r1 + 2 * i + 16);
    __m512 a = _mm512_permutex2var_ps(x0, even, x1), b = _mm512_permutex2var_ps(x0, odd, x1);
    __m512 c = _mm512_permutex2var_ps(y0, even, y1), d = _mm512_permutex2var_ps(y0, odd, y1);
    __mmask16 tb = _mm512_cmp_ps_mask(b, a, _CMP_GT_OQ) |
                   (_mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(a, a, _CMP_ORD_Q));
    __mmask16 td = _mm512_cmp_ps_mask(d, c, _CMP_GT_OQ) |
                   (_mm512_cmp_ps_mask(d, d, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(c, c, _CMP_ORD_Q));
    __m512 m0 = _mm512_mask_blend_ps(tb, a, b), m1 = _mm512_mask_blend_ps(td, c, d);
    __mmask16 tr = _mm512_cmp_ps_mask(m1, m0, _CMP_GT_OQ) |
                   (_mm512_cmp_ps_mask(m1, m1, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(m0, m0, _CMP_ORD_Q));
    _mm512_mask_storeu_ps(o + i, k, _mm512_mask_blend_ps(tr, m0, m1));
    /* offset within the window: row 0 -> tb (0 or 1), row 1 -> w + td; plus 2*(i + lane) */
    __m512i one = _mm512_set1_epi32(1);
    __m512i off0 = _mm512_maskz_mov_epi32(tb, one);
    __m512i off1 = _mm512_add_epi32(_mm512_set1_epi32(w), _mm512_maskz_mov_epi32(td, one));
    __m512i off =
        _mm512_add_epi32(_mm512_mask_blend_epi32(tr, off0, off1), _mm512_add_epi32(lane2, _mm512_set1_epi32(2 * i)));
    __m512i bs = _mm512_set1_epi64(base);
    _mm512_mask_storeu_epi64(oi + i, (__mmask8)k,
                             _mm512_add_epi64(bs, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(off))));
    if (n > 8)
      _mm512_mask_storeu_epi64(oi + i + 8, (__mmask8)(k >> 8),
                               _mm512_add_epi64(bs, _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(off, 1))));
  }
}
#endif

/* the cells start, start + d, ... (k of them) of a window that lie in [0, n): from *lo below *hi in steps of d */
static void window(int64_t start, int64_t k, int64_t d, int64_t n, int64_t *lo, int64_t *hi) {
  int64_t l = start < 0 ? start + (-start + d - 1) / d * d : start, h = start + (k - 1) * d + 1;
  *lo = l;
  *hi = h > n ? n : h;
}

/* The general window loop over element type T (float32 and float64): one definition, two functions. */
#define MAX_POOL_PLANES(T, NAME)                                                                                 \
  __attribute__((noinline)) static void NAME(const pool_geom *gp, const T *restrict px, T *restrict po,          \
                                             int64_t *restrict pi) {                                             \
    const pool_geom g = *gp;                                                                                     \
    for (int64_t pl = 0; pl < g.N * g.C; pl++) {                                                                 \
      const T *plane = px + pl * g.H * g.W;                                                                      \
      for (int64_t oh = 0; oh < g.HO; oh++) {                                                                    \
        int64_t h0, h1;                                                                                          \
        window(oh *g.SH - g.PH, g.KH, g.DH, g.H, &h0, &h1);                                                      \
        for (int64_t ow = 0; ow < g.WO; ow++) {                                                                  \
          int64_t w0, w1;                                                                                        \
          window(ow *g.SW - g.PW, g.KW, g.DW, g.W, &w0, &w1);                                                    \
          /* a dilated window can miss the input entirely (its cells on either side of it): -inf, as PyTorch, */ \
          /* and no cell to take the gradient */                                                                 \
          T best = h0 < h1 && w0 < w1 ? plane[h0 * g.W + w0] : (T)-INFINITY;                                     \
          int64_t bi = h0 < h1 && w0 < w1 ? h0 * g.W + w0 : -1;                                                  \
          for (int64_t ih = h0; ih < h1; ih += g.DH)                                                             \
            for (int64_t iw = w0; iw < w1; iw += g.DW) {                                                         \
              T v = plane[ih * g.W + iw];                                                                        \
              int take = (v > best) | ((v != v) & (best == best));                                               \
              best = take ? v : best;                                                                            \
              bi = take ? ih * g.W + iw : bi;                                                                    \
            }                                                                                                    \
          po[(pl * g.HO + oh) * g.WO + ow] = best;                                                               \
          pi[(pl * g.HO + oh) * g.WO + ow] = bi;                                                                 \
        }                                                                                                        \
      }                                                                                                          \
    }                                                                                                            \
  }

MAX_POOL_PLANES(float, max_pool_planes_f32)
MAX_POOL_PLANES(double, max_pool_planes_f64)

static void max_pool_forward(const pool_geom *gp, const float *restrict px, float *restrict po, int64_t *restrict pi) {
  const pool_geom g = *gp;
  const int64_t HW = g.H * g.W;
  /* (ceil mode may add a last, partial window: not the 2x2 rows') */
  if (g.KH == 2 && g.KW == 2 && g.SH == 2 && g.SW == 2 && g.PH == 0 && g.PW == 0 && g.DH == 1 && g.DW == 1 &&
      2 * g.HO <= g.H && 2 * g.WO <= g.W) {
#ifdef POOL_AVX512
    const int avx512 = __builtin_cpu_supports("avx512f");
#endif
    for (int64_t pl = 0; pl < g.N * g.C; pl++)
      for (int64_t oh = 0; oh < g.HO; oh++) {
        const int64_t base = 2 * oh * g.W, orow = (pl * g.HO + oh) * g.WO;
        const float *r0 = px + pl * HW + base;
#ifdef POOL_AVX512
        if (avx512) {
          max_pool_2x2_row_avx512(r0, r0 + g.W, po + orow, pi + orow, base, (int)g.WO, (int)g.W);
          continue;
        }
#endif
        max_pool_2x2_row(r0, r0 + g.W, po + orow, pi + orow, base, (int)g.WO, (int)g.W);
      }
    return;
  }
  max_pool_planes_f32(gp, px, po, pi);
}

lt_tensor *lt_nn_max_pool2d(lt_ctx *c, lt_tensor *x, int kh, int kw, int sh, int sw, int ph, int pw, int ceil_mode) {
  return lt_nn_max_pool2d_dilated(c, x, kh, kw, sh, sw, ph, pw, 1, 1, ceil_mode);
}

lt_tensor *lt_nn_max_pool2d_dilated(lt_ctx *c, lt_tensor *x, int kh, int kw, int sh, int sw, int ph, int pw, int dh,
                                    int dw, int ceil_mode) {
  pool_geom g = { 0 }; /* (set by pool_check; GCC cannot see it through the error path) */
  if (pool_check(c, "max_pool2d", x, kh, kw, sh, sw, ph, pw, dh, dw, ceil_mode, &g)) return NULL;
  int64_t oshape[4] = { g.N, g.C, g.HO, g.WO };
  lt_tensor *xc = lt_op_contiguous(c, x);
  lt_tensor *out = xc ? lt_tensor_new(c, x->dtype, 4, oshape) : NULL;
  lt_tensor *ind = out ? lt_tensor_new(c, LT_I64, 4, oshape) : NULL;
  if (!ind) {
    lt_tensor_release(xc);
    lt_tensor_release(out);
    return NULL;
  }
  /* float64 takes the general loop (the 2x2 rows are float32 vector code) */
  if (x->dtype == LT_F64) max_pool_planes_f64(&g, lt_f64(xc), lt_f64(out), lt_i64(ind));
  else max_pool_forward(&g, lt_f32(xc), lt_f32(out), lt_i64(ind));
  lt_tensor_release(xc);
  lt_node *nd;
  if (lt_record(c, out, "max_pool2d", lt_nn_max_pool_backward, 1, &x, &nd)) goto fail;
  if (nd) {
    nd->reads = 0; /* the saved argmax indices route g */
    memcpy(nd->i, &g, sizeof g);
    lt_node_save(nd, 0, ind);
  }
  lt_tensor_release(ind);
  return out;
fail:
  lt_tensor_release(out);
  lt_tensor_release(ind);
  return NULL;
}

/* ---- average ------------------------------------------------------------------------------------ */

/* ---- the average pools' backward over a windows' table (lt_nn_pool.h), planes split over the pool ---------- */
typedef struct avg_spread_job {
  const lt_nn_avg_win *win;
  const void *src; /* the output gradient [planes x HO x WO] */
  void *dst;       /* the input gradient [planes x H x W], zeroed */
  int64_t planes, H, W, HO, WO;
  int f64;
} avg_spread_job;

#define AVG_SPREAD(T)                                                          \
  for (int64_t pl = lo; pl < hi; pl++) {                                       \
    const T *g = (const T *)j->src + pl * j->HO * j->WO;                       \
    T *plane = (T *)j->dst + pl * j->H * j->W;                                 \
    for (int64_t k = 0; k < j->HO * j->WO; k++) {                              \
      const lt_nn_avg_win *e = j->win + k;                                     \
      const T v = (T)(g[k] / e->div);                                          \
      for (int64_t ih = e->h0; ih < e->h1; ih++)                               \
        for (int64_t iw = e->w0; iw < e->w1; iw++) plane[ih * j->W + iw] += v; \
    }                                                                          \
  }

static void avg_spread_part(void *arg, int part, int nparts) {
  const avg_spread_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->planes, part, nparts, 1, &lo, &hi);
  if (j->f64) AVG_SPREAD(double)
  else AVG_SPREAD(float)
}
#undef AVG_SPREAD

#define AVG_SPREAD_PAR_MIN (INT64_C(1) << 16) /* input cells below which a pool hand-off does not pay */

int lt_nn_avg_pool_backward_table(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin, const lt_nn_avg_win *win) {
  const lt_tensor *x = n->inputs[0];
  lt_tensor *gc;
  lt_tensor *gx = lt_nn_pool_grad_buffers(c, gout, x, &gc);
  if (!gx) return LT_ERR;
  const int f64 = x->dtype == LT_F64;
  avg_spread_job j = { win,
                       f64 ? (const void *)lt_f64(gc) : (const void *)lt_f32(gc),
                       f64 ? (void *)lt_f64(gx) : (void *)lt_f32(gx),
                       x->shape[0] * x->shape[1],
                       x->shape[2],
                       x->shape[3],
                       gc->shape[2],
                       gc->shape[3],
                       f64 };
  int parts = lt_pool_parts(c->num_threads, j.planes * j.H * j.W, AVG_SPREAD_PAR_MIN);
  if (parts > j.planes) parts = (int)j.planes;
  if (parts > 1) lt_pool_run(avg_spread_part, &j, parts);
  else avg_spread_part(&j, 0, 1);
  lt_tensor_release(gc);
  gin[0] = gx;
  return LT_OK;
}

/* window of output (oh, ow): clipped bounds and the divisor (an lt_nn_avg_window_fn) */
static double avg_window(const void *geom, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1, int64_t *w0, int64_t *w1) {
  const pool_geom *g = geom;
  int64_t hs = oh * g->SH - g->PH, ws = ow * g->SW - g->PW;
  int64_t he = hs + g->KH, we = ws + g->KW;
  if (he > g->H + g->PH) he = g->H + g->PH;
  if (we > g->W + g->PW) we = g->W + g->PW;
  int64_t padded = (he - hs) * (we - ws);
  if (hs < 0) hs = 0;
  if (ws < 0) ws = 0;
  if (he > g->H) he = g->H;
  if (we > g->W) we = g->W;
  *h0 = hs;
  *h1 = he;
  *w0 = ws;
  *w1 = we;
  return (double)(g->count_pad ? padded : (he - hs) * (we - ws));
}

/* the forward's loop over element type T: each window's sum in double, divided as PyTorch divides */
#define AVG_POOL_PLANES(T, pxc, pout)                                       \
  {                                                                         \
    const T *px = (pxc);                                                    \
    T *po = (pout);                                                         \
    for (int64_t pl = 0; pl < g.N * g.C; pl++) {                            \
      const T *plane = px + pl * g.H * g.W;                                 \
      for (int64_t oh = 0; oh < g.HO; oh++)                                 \
        for (int64_t ow = 0; ow < g.WO; ow++) {                             \
          int64_t h0, h1, w0, w1;                                           \
          double div = avg_window(&g, oh, ow, &h0, &h1, &w0, &w1), s = 0;   \
          for (int64_t ih = h0; ih < h1; ih++)                              \
            for (int64_t iw = w0; iw < w1; iw++) s += plane[ih * g.W + iw]; \
          po[(pl * g.HO + oh) * g.WO + ow] = (T)(s / div);                  \
        }                                                                   \
    }                                                                       \
  }

static int avg_pool_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  pool_geom g;
  memcpy(&g, n->i, sizeof g);
  return lt_nn_avg_pool_backward(c, n, gout, gin, &g, avg_window);
}

lt_tensor *lt_nn_avg_pool2d(lt_ctx *c, lt_tensor *x, int kh, int kw, int sh, int sw, int ph, int pw,
                            int count_include_pad, int ceil_mode) {
  pool_geom g = { 0 }; /* (set by pool_check; GCC cannot see it through the error path) */
  if (pool_check(c, "avg_pool2d", x, kh, kw, sh, sw, ph, pw, 1, 1, ceil_mode, &g)) return NULL;
  g.count_pad = count_include_pad != 0;
  int64_t oshape[4] = { g.N, g.C, g.HO, g.WO };
  lt_tensor *xc = lt_op_contiguous(c, x);
  lt_tensor *out = xc ? lt_tensor_new(c, x->dtype, 4, oshape) : NULL;
  if (!out) {
    lt_tensor_release(xc);
    return NULL;
  }
  if (x->dtype == LT_F64) AVG_POOL_PLANES(double, lt_f64(xc), lt_f64(out))
  else AVG_POOL_PLANES(float, lt_f32(xc), lt_f32(out))
  lt_tensor_release(xc);
  lt_node *nd;
  if (lt_record(c, out, "avg_pool2d", avg_pool_backward, 1, &x, &nd)) {
    lt_tensor_release(out);
    return NULL;
  }
  if (nd) {
    nd->reads = 0; /* g spread over each window */
    memcpy(nd->i, &g, sizeof g);
  }
  return out;
}
