/*
 * nn_conv_depthwise.c — the direct depthwise convolution of lt_conv_dw.h, forward, input gradient and weight
 * gradient. A plane's work is a sum over its kernel taps of one scaled row per output row; the inner loops run
 * along the output row (contiguous at stride 1, where they vectorise), over the valid range of each tap
 * (lt_conv_valid_range) so padding costs nothing. Planes go to lutra's pool in ranges: the forward over the
 * N*C*M output planes, the input gradient over the N*C input planes (a task owns its gx plane), the weight
 * gradient over the C*M channels (a task sums its channel over the batch, so the result does not depend on
 * the thread count).
 */
#include <string.h>

#include "lt_conv.h"
#include "lt_conv_dw.h"
#include "lt_pool.h"
#include "lt_simd.h"

#define DW_PAR_MIN (INT64_C(1) << 17) /* multiply-adds below which a pool hand-off does not pay */

typedef struct dw_job {
  const lt_dw_geom *g;
  const float *a, *b; /* forward: x, w; input grad: gy, w; weight grad: x, gy */
  float *out;
} dw_job;

/* the output rows [oh_lo, oh_hi) and columns [ow_lo, ow_hi) tap (ki, kj) reads inside the input */
static void tap_range(const lt_dw_geom *g, int64_t ki, int64_t kj, int64_t r[4]) {
  lt_conv_valid_range(ki * g->DH, g->SH, g->PH, g->H, g->HO, &r[0], &r[1]);
  lt_conv_valid_range(kj * g->DW, g->SW, g->PW, g->W, g->WO, &r[2], &r[3]);
}

/* One plane through the kernel wk [KH, KW]: y plane [HO, WO] += the taps of input plane x [H, W] (adjoint 0), or
 * its adjoint, x += the taps of y (adjoint 1: x is the input gradient, y the output gradient) */
LT_VECTOR_FN static void tap_plane(const lt_dw_geom *g, float *x, const float *wk, float *y, int adjoint) {
  const int64_t WO = g->WO, SW = g->SW;
  for (int64_t ki = 0; ki < g->KH; ki++)
    for (int64_t kj = 0; kj < g->KW; kj++) {
      int64_t r[4];
      tap_range(g, ki, kj, r);
      const float wv = wk[ki * g->KW + kj];
      for (int64_t oh = r[0]; oh < r[1]; oh++) {
        float *restrict xs = x + (oh * g->SH - g->PH + ki * g->DH) * g->W - g->PW + kj * g->DW;
        float *restrict yr = y + oh * WO;
        if (adjoint && SW == 1)
          for (int64_t ow = r[2]; ow < r[3]; ow++) xs[ow] += wv * yr[ow];
        else if (adjoint)
          for (int64_t ow = r[2]; ow < r[3]; ow++) xs[ow * SW] += wv * yr[ow];
        else if (SW == 1)
          for (int64_t ow = r[2]; ow < r[3]; ow++) yr[ow] += wv * xs[ow];
        else
          for (int64_t ow = r[2]; ow < r[3]; ow++) yr[ow] += wv * xs[ow * SW];
      }
    }
}

#define DW_ROW 256 /* output columns per block of the weight gradient's row accumulator (on the stack) */

/* gk [KH, KW] += the products of input plane x [H, W] with gy plane [HO, WO] under each tap: per tap and block of
 * columns, the rows' products summed into one float row (a multiply-add per element, no reduction in the loop),
 * then the row summed once */
LT_VECTOR_FN static void wgrad_plane(const lt_dw_geom *g, const float *x, const float *gy, double *gk) {
  const int64_t WO = g->WO, SW = g->SW;
  float acc[DW_ROW];
  for (int64_t ki = 0; ki < g->KH; ki++)
    for (int64_t kj = 0; kj < g->KW; kj++) {
      int64_t r[4];
      tap_range(g, ki, kj, r);
      double s = 0;
      for (int64_t c0 = r[2]; c0 < r[3]; c0 += DW_ROW) {
        const int64_t c1 = c0 + DW_ROW < r[3] ? c0 + DW_ROW : r[3], len = c1 - c0;
        memset(acc, 0, sizeof(float) * (size_t)len);
        for (int64_t oh = r[0]; oh < r[1]; oh++) {
          const float *restrict xs = x + (oh * g->SH - g->PH + ki * g->DH) * g->W - g->PW + (kj * g->DW + c0 * SW);
          const float *restrict gr = gy + oh * WO + c0;
          if (SW == 1)
            for (int64_t i = 0; i < len; i++) acc[i] += gr[i] * xs[i];
          else
            for (int64_t i = 0; i < len; i++) acc[i] += gr[i] * xs[i * SW];
        }
        s += lt_sum_f32(acc, len);
      }
      gk[ki * g->KW + kj] += s;
    }
}

static void fwd_part(void *arg, int part, int nparts) {
  const dw_job *j = arg;
  const lt_dw_geom *g = j->g;
  const int64_t O = g->C * g->M, HW = g->H * g->W, P = g->HO * g->WO, KK = g->KH * g->KW;
  int64_t lo, hi;
  lt_pool_range(g->N * O, part, nparts, 1, &lo, &hi);
  for (int64_t pl = lo; pl < hi; pl++) {
    const int64_t n = pl / O, o = pl % O;
    float *y = j->out + pl * P;
    memset(y, 0, sizeof(float) * (size_t)P);
    tap_plane(g, (float *)j->a + (n * g->C + o / g->M) * HW, j->b + o * KK, y, 0);
  }
}

static void bwd_part(void *arg, int part, int nparts) {
  const dw_job *j = arg;
  const lt_dw_geom *g = j->g;
  const int64_t HW = g->H * g->W, P = g->HO * g->WO, KK = g->KH * g->KW;
  int64_t lo, hi;
  lt_pool_range(g->N * g->C, part, nparts, 1, &lo, &hi);
  for (int64_t pl = lo; pl < hi; pl++) {
    const int64_t n = pl / g->C, ch = pl % g->C;
    for (int64_t m = 0; m < g->M; m++) {
      const int64_t o = ch * g->M + m;
      tap_plane(g, j->out + pl * HW, j->b + o * KK, (float *)j->a + (n * g->C * g->M + o) * P, 1);
    }
  }
}

static void wgrad_part(void *arg, int part, int nparts) {
  const dw_job *j = arg;
  const lt_dw_geom *g = j->g;
  const int64_t O = g->C * g->M, HW = g->H * g->W, P = g->HO * g->WO, KK = g->KH * g->KW;
  int64_t lo, hi;
  lt_pool_range(O, part, nparts, 1, &lo, &hi);
  double acc[LT_CONV_DW_MAX_TAPS];
  for (int64_t o = lo; o < hi; o++) {
    memset(acc, 0, sizeof acc);
    for (int64_t n = 0; n < g->N; n++) wgrad_plane(g, j->a + (n * g->C + o / g->M) * HW, j->b + (n * O + o) * P, acc);
    for (int64_t k = 0; k < KK; k++) j->out[o * KK + k] += (float)acc[k];
  }
}

static void run(lt_ctx *c, lt_pool_fn fn, dw_job *j, int64_t tasks) {
  const lt_dw_geom *g = j->g;
  const int64_t work = g->N * g->C * g->M * g->HO * g->WO * g->KH * g->KW;
  int parts = lt_pool_parts(c->num_threads, work, DW_PAR_MIN);
  if (parts > tasks) parts = (int)tasks;
  if (parts > 1) lt_pool_run(fn, j, parts);
  else fn(j, 0, 1);
}

void lt_conv_dw_forward(lt_ctx *c, const lt_dw_geom *g, const float *x, const float *w, float *y) {
  dw_job j = { g, x, w, y };
  run(c, fwd_part, &j, g->N * g->C * g->M);
}

void lt_conv_dw_input_grad(lt_ctx *c, const lt_dw_geom *g, const float *gy, const float *w, float *gx) {
  dw_job j = { g, gy, w, gx };
  run(c, bwd_part, &j, g->N * g->C);
}

void lt_conv_dw_weight_grad(lt_ctx *c, const lt_dw_geom *g, const float *x, const float *gy, float *gw) {
  dw_job j = { g, x, gy, gw };
  run(c, wgrad_part, &j, g->C * g->M);
}
