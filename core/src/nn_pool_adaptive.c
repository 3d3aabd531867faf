/*
 * nn_pool_adaptive.c — adaptive 2-D average and max pooling, forward and backward.
 * Output cell (i, j) of an [OH, OW] grid pools rows floor(i*H/OH) .. ceil((i+1)*H/OH) - 1 and the columns
 * likewise (PyTorch's windows: they cover the input, overlap when the sizes do not divide, and are never empty).
 * Max pooling saves the flat position (within the H*W plane) of each window's first maximum (a NaN wins), so
 * backward is a scatter; average pooling spreads each gradient evenly over its window.
 */
#include <string.h>

#include "lt_ctx.h"
#include "lt_errors.h"
#include "lt_nn.h"
#include "lt_nn_pool.h"
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
  if (lt_check_dtype(c, op, "input", x, LT_F32)) return LT_ERR;
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

/* ---- average ---------------------------------------------------------------------------------------------- */

/* Windows that tile the plane (the output size divides the input's; a global pool, output 1): each input cell
 * is in one window, so its gradient is written once, with no zeroed buffer to add into (the same values as the
 * general backward's 0 + g / cells). */
static int aavg_backward_tiled(lt_ctx *c, const apool_geom *g, lt_tensor *gout, lt_tensor **gin) {
  lt_tensor *gc = lt_op_contiguous(c, gout);
  const int64_t shape[4] = { g->N, g->C, g->H, g->W };
  lt_tensor *gx = gc ? lt_tensor_new(c, LT_F32, 4, shape) : NULL;
  if (!gx) {
    lt_tensor_release(gc);
    return LT_ERR;
  }
  const int64_t KH = g->H / g->OH, KW = g->W / g->OW;
  const double cells = (double)(KH * KW);
  const float *pg = lt_f32(gc);
  for (int64_t pl = 0; pl < g->N * g->C; pl++) {
    float *plane = lt_f32(gx) + pl * g->H * g->W;
    for (int64_t i = 0; i < g->OH; i++)
      for (int64_t j = 0; j < g->OW; j++) {
        const float v = (float)(pg[(pl * g->OH + i) * g->OW + j] / cells);
        for (int64_t ih = i * KH; ih < (i + 1) * KH; ih++)
          for (int64_t iw = j * KW; iw < (j + 1) * KW; iw++) plane[ih * g->W + iw] = v;
      }
  }
  lt_tensor_release(gc);
  gin[0] = gx;
  return LT_OK;
}

static int aavg_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin) {
  apool_geom g;
  memcpy(&g, n->i, sizeof g);
  if (g.H % g.OH == 0 && g.W % g.OW == 0) return aavg_backward_tiled(c, &g, gout, gin);
  return lt_nn_avg_pool_backward(c, n, gout, gin, &g, adaptive_window);
}

/* the window means of one plane: each window row summed in lt_sum_f32's vector lanes (the max's NaN-aware
 * compare kept the shared loop scalar: a global pool of 7x7 planes ran 0.65x PyTorch) */
LT_VECTOR_FN static void avg_plane(const apool_geom *g, const float *plane, float *out) {
  for (int64_t i = 0; i < g->OH; i++)
    for (int64_t j = 0; j < g->OW; j++) {
      int64_t h0, h1, w0, w1;
      const double cells = adaptive_window(g, i, j, &h0, &h1, &w0, &w1);
      double s = 0;
      if (w0 == 0 && w1 == g->W) s = lt_sum_f32(plane + h0 * g->W, (h1 - h0) * g->W); /* whole rows: one run */
      else
        for (int64_t ih = h0; ih < h1; ih++) s += lt_sum_f32(plane + ih * g->W + w0, w1 - w0);
      out[i * g->OW + j] = (float)(s / cells);
    }
}

/* ---- forward (the max pools' backward is lt_nn_max_pool_backward, nn_pool.c) ------------------------------ */

/* one forward for both: the window means (avg_plane), or the window's first maximum (a NaN wins) and its position */
static lt_tensor *adaptive_pool(lt_ctx *c, const char *op, lt_tensor *x, int64_t oh, int64_t ow, int is_max,
                                lt_tensor **indices) {
  apool_geom g;
  if (indices) *indices = NULL;
  if (apool_check(c, op, x, oh, ow, &g)) return NULL;
  int64_t oshape[4] = { g.N, g.C, g.OH, g.OW };
  lt_tensor *xc = lt_op_contiguous(c, x);
  lt_tensor *out = xc ? lt_tensor_new(c, LT_F32, 4, oshape) : NULL;
  lt_tensor *ind = out && is_max ? lt_tensor_new(c, LT_I64, 4, oshape) : NULL;
  if (!out || (is_max && !ind)) {
    lt_tensor_release(xc);
    lt_tensor_release(out);
    return NULL;
  }
  for (int64_t pl = 0; pl < g.N * g.C && !is_max; pl++)
    avg_plane(&g, lt_f32(xc) + pl * g.H * g.W, lt_f32(out) + pl * g.OH * g.OW);
  for (int64_t pl = 0; pl < g.N * g.C && is_max; pl++) {
    const float *plane = lt_f32(xc) + pl * g.H * g.W;
    for (int64_t i = 0; i < g.OH; i++)
      for (int64_t j = 0; j < g.OW; j++) {
        int64_t h0, h1, w0, w1;
        adaptive_window(&g, i, j, &h0, &h1, &w0, &w1);
        const int64_t o = (pl * g.OH + i) * g.OW + j;
        float best = plane[h0 * g.W + w0];
        int64_t bi = h0 * g.W + w0;
        for (int64_t ih = h0; ih < h1; ih++)
          for (int64_t iw = w0; iw < w1; iw++) {
            const float v = plane[ih * g.W + iw];
            if (v > best || (v != v && best == best)) {
              best = v;
              bi = ih * g.W + iw;
            }
          }
        lt_f32(out)[o] = best;
        lt_i64(ind)[o] = bi;
      }
  }
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
