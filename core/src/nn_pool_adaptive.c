/*
 * nn_pool_adaptive.c — adaptive 2-D average and max pooling, forward and backward.
 * Output cell (i, j) of an [OH, OW] grid pools rows floor(i*H/OH) .. ceil((i+1)*H/OH) - 1 and the columns
 * likewise (PyTorch's windows: they cover the input, overlap when the sizes do not divide, and are never empty).
 * Max pooling saves the flat position (within the H*W plane) of each window's first maximum (a NaN wins), so
 * backward is a scatter; average pooling spreads each gradient evenly over its window. float32 or float64: the
 * kernels are written once over the element type (APOOL_KERNELS) and the output has the input's dtype.
 */
#include <stdint.h>
#include <string.h>

#include "lt_alloc.h"
#include "lt_check.h"
#include "lt_ctx.h"
#include "lt_errors.h"
#include "lt_nn.h"
#include "lt_nn_pool.h"
#include "lt_pool.h"
#include "lt_simd.h"

typedef struct apool_geom {
  int64_t N, C, H, W, OH, OW;
} apool_geom;
_Static_assert(sizeof(apool_geom) <= sizeof(((lt_node *)0)->i), "apool_geom must fit in a node's integer slots");

static int64_t win_start(int64_t i, int64_t n, int64_t out) { return (i * n) / out; }
static int64_t win_end(int64_t i, int64_t n, int64_t out) { return ((i + 1) * n + out - 1) / out; }

/* output (i, j)'s window and its number of cells, the average's divisor (an lt_nn_avg_window_fn) */
static double adaptive_window(const void *geom, int64_t i, int64_t j, int64_t *h0, int64_t *h1, int64_t *w0,
                              int64_t *w1) {
  const apool_geom *g = geom;
  *h0 = win_start(i, g->H, g->OH);
  *h1 = win_end(i, g->H, g->OH);
  *w0 = win_start(j, g->W, g->OW);
  *w1 = win_end(j, g->W, g->OW);
  return (double)((*h1 - *h0) * (*w1 - *w0));
}

static int apool_check(lt_ctx *c, const char *op, lt_tensor *x, int64_t oh, int64_t ow, apool_geom *g) {
  char b1[128];
  if (lt_check_float(c, op, "input", x)) return LT_ERR;
  if (x->ndim != 4)
    return lt_fail(c, "%s: input must be 4-D [batch x channels x height x width], got %s", op,
                   lt_shape_str(x, b1, sizeof b1));
  if (oh < 1 || ow < 1)
    return lt_fail(c, "%s: output_size must be >= 1, got %lldx%lld (input %s)", op, (long long)oh, (long long)ow,
                   lt_shape_str(x, b1, sizeof b1));
  if (x->shape[2] < 1 || x->shape[3] < 1)
    return lt_fail(c, "%s: input %s has an empty plane", op, lt_shape_str(x, b1, sizeof b1));
  apool_geom r = { x->shape[0], x->shape[1], x->shape[2], x->shape[3], oh, ow };
  *g = r;
  return LT_OK;
}

/* Every window's bounds, computed once per call rather than with four divisions per output cell: rows
 * [hs[i], he[i]) and columns [ws[j], we[j]); and the max pool's W column keys (16 bytes each, the float64
 * ones' size). One lt_alloc'd buffer (b), freed by win_free. */
typedef struct apool_win {
  int64_t *b, *hs, *he, *ws, *we;
  void *keys;
} apool_win;

static size_t win_bytes(const apool_geom *g) { return sizeof(int64_t) * (size_t)(2 * (g->OH + g->OW + g->W)); }

static int win_bounds(lt_ctx *c, const apool_geom *g, apool_win *w) {
  const size_t bytes = win_bytes(g);
  if (!(w->b = lt_alloc(bytes))) return lt_fail(c, LT_E_OOM, bytes);
  w->hs = w->b;
  w->he = w->hs + g->OH;
  w->ws = w->he + g->OH;
  w->we = w->ws + g->OW;
  w->keys = w->we + g->OW; /* 16-byte aligned: lt_alloc's 64 plus an even number of int64s */
  for (int64_t i = 0; i < g->OH; i++) {
    w->hs[i] = win_start(i, g->H, g->OH);
    w->he[i] = win_end(i, g->H, g->OH);
  }
  for (int64_t j = 0; j < g->OW; j++) {
    w->ws[j] = win_start(j, g->W, g->OW);
    w->we[j] = win_end(j, g->W, g->OW);
  }
  return LT_OK;
}

static void win_free(const apool_geom *g, apool_win *w) { lt_free(w->b, win_bytes(g)); }

/* a contiguous run's sum: float32 in lt_sum_f32's vector lanes (the max's NaN-aware compare kept a shared loop
 * scalar: a global pool of 7x7 planes ran 0.65x PyTorch), float64 in order */
static inline double run_sum_f(const float *x, int64_t n) { return lt_sum_f32(x, n); }
static inline double run_sum_d(const double *x, int64_t n) {
  double s = 0;
  for (int64_t k = 0; k < n; k++) s += x[k];
  return s;
}

/* The kernels over element type T (suffix S: f or d), each over planes [0, planes):
 * - avg_planes_S: the window means of planes [p0, p1); a window of whole rows is one contiguous run.
 * - max_planes_S: each window's first maximum in row-major order (a NaN wins) and its flat position. Separable
 *   and branch-free: each cell gets an integer key (cell_key_S: the value's order, then its row reversed, in CK,
 *   twice T's width), so the winner is the largest key: the maxima down each output row's window rows in every
 *   column (ck: vector lanes along the row), then the first largest across each window's columns. A direct
 *   walk of every window cell compiled to branches that mispredicted on random data (0.90x PyTorch on 13x13 ->
 *   7x7).
 * - avg_backward_tiled_S: windows that tile the plane (the output size divides the input's; a global pool,
 *   output 1): each input cell is in one window, so its gradient is written once, with no zeroed buffer to add
 *   into (the same values as the general backward's 0 + g / cells); a window of whole rows is one fill. */
// clang-format off
#define APOOL_KERNELS(S, T, K, UK, KMAX, CK)                                                                         \
  LT_VECTOR_FN static void avg_planes_##S(const apool_geom *g, const apool_win *w, const T *x, T *out, int64_t p0, \
                                          int64_t p1) {                                                           \
    for (int64_t pl = p0; pl < p1; pl++) {                                                                        \
      const T *plane = x + pl * g->H * g->W;                                                                      \
      T *o = out + pl * g->OH * g->OW;                                                                            \
      for (int64_t i = 0; i < g->OH; i++)                                                                         \
        for (int64_t j = 0; j < g->OW; j++) {                                                                     \
          const int64_t h0 = w->hs[i], h1 = w->he[i], w0 = w->ws[j], w1 = w->we[j];                               \
          double s = 0;                                                                                           \
          if (w0 == 0 && w1 == g->W) s = run_sum_##S(plane + h0 * g->W, (h1 - h0) * g->W);                        \
          else                                                                                                    \
            for (int64_t ih = h0; ih < h1; ih++) s += run_sum_##S(plane + ih * g->W + w0, w1 - w0);               \
          o[i * g->OW + j] = (T)(s / (double)((h1 - h0) * (w1 - w0)));                                            \
        }                                                                                                         \
    }                                                                                                             \
  }                                                                                                               \
  /* the value's order as a signed integer (NaN above everything, -0 equal to 0) and below it the row,  */      \
  /* reversed, so that the larger key is the larger value, then the smaller row */                              \
  __attribute__((always_inline)) static inline CK cell_key_##S(T v, int64_t row) {                               \
    K b;                                                                                                          \
    memcpy(&b, &v, sizeof b);                                                                                     \
    b ^= (b >> (8 * sizeof(K) - 1)) & KMAX;                                                                       \
    const K nan = -(K)(v != v), zero = -(K)(v == 0); /* masks, not branches */                                    \
    b = ((b & ~zero) & ~nan) | (KMAX & nan);                                                                      \
    return (CK)b * ((CK)1 << (8 * sizeof(K))) + (CK)(UK)(~(UK)row);                                               \
  }                                                                                                               \
  LT_VECTOR_FN static void max_planes_##S(const apool_geom *g, const apool_win *w, const T *restrict x,          \
                                          T *restrict out, int64_t *restrict ind, CK *restrict ck) {              \
    const int64_t W = g->W; /* locals and restrict: the column loop vectorises */                                 \
    for (int64_t pl = 0; pl < g->N * g->C; pl++) {                                                                \
      const T *restrict plane = x + pl * g->H * W;                                                                \
      for (int64_t i = 0; i < g->OH; i++) {                                                                       \
        const int64_t h0 = w->hs[i], h1 = w->he[i];                                                               \
        for (int64_t iw = 0; iw < W; iw++) ck[iw] = cell_key_##S(plane[h0 * W + iw], h0);                         \
        for (int64_t ih = h0 + 1; ih < h1; ih++)                                                                  \
          for (int64_t iw = 0; iw < W; iw++) {                                                                    \
            const CK k = cell_key_##S(plane[ih * W + iw], ih);                                                    \
            ck[iw] = k > ck[iw] ? k : ck[iw];                                                                     \
          }                                                                                                       \
        for (int64_t j = 0; j < g->OW; j++) {                                                                     \
          const int64_t w0 = w->ws[j], w1 = w->we[j];                                                             \
          CK best = ck[w0];                                                                                       \
          int64_t bc = w0;                                                                                        \
          for (int64_t iw = w0 + 1; iw < w1; iw++) {                                                              \
            const int take = ck[iw] > best;                                                                       \
            best = take ? ck[iw] : best;                                                                          \
            bc = take ? iw : bc;                                                                                  \
          }                                                                                                       \
          const int64_t o = (pl * g->OH + i) * g->OW + j, at = (int64_t)(UK)(~(UK)best) * g->W + bc;              \
          out[o] = plane[at];                                                                                     \
          ind[o] = at;                                                                                            \
        }                                                                                                         \
      }                                                                                                           \
    }                                                                                                             \
  }                                                                                                               \
  static void avg_backward_tiled_##S(const apool_geom *g, const T *pg, T *gx) {                                   \
    const int64_t KH = g->H / g->OH, KW = g->W / g->OW;                                                           \
    const double cells = (double)(KH * KW);                                                                       \
    for (int64_t pl = 0; pl < g->N * g->C; pl++) {                                                                \
      T *plane = gx + pl * g->H * g->W;                                                                           \
      for (int64_t i = 0; i < g->OH; i++)                                                                         \
        for (int64_t j = 0; j < g->OW; j++) {                                                                     \
          const T v = (T)(pg[(pl * g->OH + i) * g->OW + j] / cells);                                              \
          if (g->OW == 1) {                                                                                       \
            T *run = plane + i * KH * g->W;                                                                       \
            for (int64_t k = 0; k < KH * g->W; k++) run[k] = v;                                                   \
          } else                                                                                                  \
            for (int64_t ih = i * KH; ih < (i + 1) * KH; ih++)                                                    \
              for (int64_t iw = j * KW; iw < (j + 1) * KW; iw++) plane[ih * g->W + iw] = v;                       \
        }                                                                                                         \
    }                                                                                                             \
  }
// clang-format on
APOOL_KERNELS(f, float, int32_t, uint32_t, INT32_MAX, int64_t)
APOOL_KERNELS(d, double, int64_t, uint64_t, INT64_MAX, __int128)

/* The window means over the pool's threads, a range of planes each, when the work pays */
typedef struct avg_job {
  const apool_geom *g;
  const apool_win *w;
  const void *x;
  void *out;
  int f64;
} avg_job;

static void avg_part(void *arg, int part, int nparts) {
  const avg_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->g->N * j->g->C, part, nparts, 1, &lo, &hi);
  if (j->f64) avg_planes_d(j->g, j->w, j->x, j->out, lo, hi);
  else avg_planes_f(j->g, j->w, j->x, j->out, lo, hi);
}

#define AVG_PAR_MIN (INT64_C(1) << 16) /* input cells below which a pool hand-off does not pay */

static void avg_run(lt_ctx *c, const apool_geom *g, const apool_win *w, const void *x, void *out, int f64) {
  avg_job j = { g, w, x, out, f64 };
  const int64_t planes = g->N * g->C;
  int parts = lt_pool_parts(c->num_threads, planes * g->H * g->W, AVG_PAR_MIN);
  if (parts > planes) parts = (int)planes;
  if (parts > 1) lt_pool_run(avg_part, &j, parts);
  else avg_part(&j, 0, 1);
}

/* ---- backward (the max pools' is lt_nn_max_pool_backward, nn_pool.c) -------------------------------------- */

static int aavg_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  apool_geom g;
  memcpy(&g, n->i, sizeof g);
  if (g.H % g.OH || g.W % g.OW) return lt_nn_avg_pool_backward(c, n, gout, gin, &g, adaptive_window);
  lt_tensor *gc = lt_op_contiguous(c, gout);
  const int64_t shape[4] = { g.N, g.C, g.H, g.W };
  lt_tensor *gx = gc ? lt_tensor_new(c, n->inputs[0]->dtype, 4, shape) : NULL;
  if (!gx) {
    lt_tensor_release(gc);
    return LT_ERR;
  }
  if (gx->dtype == LT_F64) avg_backward_tiled_d(&g, lt_f64(gc), lt_f64(gx));
  else avg_backward_tiled_f(&g, lt_f32(gc), lt_f32(gx));
  lt_tensor_release(gc);
  gin[0] = gx;
  return LT_OK;
}

/* ---- forward ---------------------------------------------------------------------------------------------- */

/* one forward for both: the window means, or the window's first maximum (a NaN wins) and its position */
static lt_tensor *adaptive_pool(lt_ctx *c, const char *op, lt_tensor *x, int64_t oh, int64_t ow, int is_max,
                                lt_tensor **indices) {
  apool_geom g;
  apool_win w;
  if (indices) *indices = NULL;
  if (apool_check(c, op, x, oh, ow, &g)) return NULL;
  int64_t oshape[4] = { g.N, g.C, g.OH, g.OW };
  lt_tensor *xc = lt_op_contiguous(c, x);
  lt_tensor *out = xc ? lt_tensor_new(c, x->dtype, 4, oshape) : NULL;
  lt_tensor *ind = out && is_max ? lt_tensor_new(c, LT_I64, 4, oshape) : NULL;
  if (!out || (is_max && !ind) || win_bounds(c, &g, &w)) {
    lt_tensor_release(xc);
    lt_tensor_release(out);
    lt_tensor_release(ind);
    return NULL;
  }
  const int f64 = x->dtype == LT_F64;
  if (is_max && f64) max_planes_d(&g, &w, lt_f64(xc), lt_f64(out), lt_i64(ind), w.keys);
  else if (is_max) max_planes_f(&g, &w, lt_f32(xc), lt_f32(out), lt_i64(ind), w.keys);
  else if (f64) avg_run(c, &g, &w, lt_f64(xc), lt_f64(out), 1);
  else avg_run(c, &g, &w, lt_f32(xc), lt_f32(out), 0);
  win_free(&g, &w);
  lt_tensor_release(xc);
  lt_node *nd;
  if (lt_record(c, out, op, is_max ? lt_nn_max_pool_backward : aavg_backward, 1, &x, &nd)) {
    lt_tensor_release(out);
    lt_tensor_release(ind);
    return NULL;
  }
  if (nd) {
    nd->reads = 0; /* saved indices (max) or windows (avg) */
    memcpy(nd->i, &g, sizeof g);
    if (is_max) lt_node_save(nd, 0, ind);
  }
  if (indices) *indices = ind;
  else lt_tensor_release(ind);
  return out;
}

lt_tensor *lt_nn_adaptive_avg_pool2d(lt_ctx *c, lt_tensor *x, int64_t oh, int64_t ow) {
  return adaptive_pool(c, "adaptive_avg_pool2d", x, oh, ow, 0, NULL);
}

lt_tensor *lt_nn_adaptive_max_pool2d(lt_ctx *c, lt_tensor *x, int64_t oh, int64_t ow, lt_tensor **indices) {
  return adaptive_pool(c, "adaptive_max_pool2d", x, oh, ow, 1, indices);
}
