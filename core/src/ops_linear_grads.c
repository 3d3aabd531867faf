/* ops_linear_grads.c — the gradients of y = x W^T + b from dL/dy (ops_matmul.c's linear backward):
 *   gx [rows x in] = g [rows x out] W [out x in];  gW [out x in] (+)= g^T x;  gb [out] = column sums of g
 *
 * gx and gW are independent GEMMs of the same size. When the pool has threads and the GEMMs are large
 * enough that OpenBLAS would thread them, the two run side by side on the pool, each in row blocks
 * (OpenBLAS held at one thread, lt_blas_serial_begin), with gb's columns beside gW's rows: on a small GPT's
 * layers (1024 x 128 x 384) one GEMM split over two threads waits for the slower half; two whole ones do
 * not. Every element is computed by the same code whatever the split, so results do not depend on it. */
#include "lt_blas.h"
#include "lt_ops.h"
#include "lt_pool.h"
#include "lt_simd.h"

typedef struct lin_grads {
  const float *g, *x, *w;
  float *gx, *gw, *gb;
  float beta_w;
  int64_t rows, in_f, out_f;
  int k; /* parts per GEMM */
} lin_grads;

/* gb[lo..hi) += column sums of g over all rows (gb zeroed by the caller) */
LT_VECTOR_FN static void bias_cols(const lin_grads *j, int64_t lo, int64_t hi) {
  float *restrict gb = j->gb;
  for (int64_t r = 0; r < j->rows; r++) {
    const float *restrict gr = j->g + r * j->out_f;
    for (int64_t c = lo; c < hi; c++) gb[c] += gr[c];
  }
}

static void gx_rows(const lin_grads *j, int64_t lo, int64_t hi) {
  lt_blas_sgemm(0, 0, (int)(hi - lo), (int)j->in_f, (int)j->out_f, 1.0f, j->g + lo * j->out_f, (int)j->out_f, j->w,
                (int)j->in_f, 0.0f, j->gx + lo * j->in_f, (int)j->in_f);
}

static void gw_rows(const lin_grads *j, int64_t lo, int64_t hi) {
  if (j->gw)
    lt_blas_sgemm(1, 0, (int)(hi - lo), (int)j->in_f, (int)j->rows, 1.0f, j->g + lo, (int)j->out_f, j->x, (int)j->in_f,
                  j->beta_w, j->gw + lo * j->in_f, (int)j->in_f);
  if (j->gb) bias_cols(j, lo, hi);
}

/* parts 0..k-1: gx's row blocks; k..2k-1: gW's row blocks (gW's rows are g's columns: gb's as well) */
static void part(void *arg, int i, int n) {
  (void)n;
  const lin_grads *j = arg;
  int64_t lo, hi;
  if (i < j->k) {
    lt_pool_range(j->rows, i, j->k, 8, &lo, &hi);
    if (lo < hi) gx_rows(j, lo, hi);
  } else {
    lt_pool_range(j->out_f, i - j->k, j->k, 16, &lo, &hi);
    if (lo < hi) gw_rows(j, lo, hi);
  }
}

void lt_linear_grads_f32(lt_ctx *c, const float *g, const float *x, const float *w, float *gx, float *gw, float beta_w,
                         float *gb, int64_t rows, int64_t in_f, int64_t out_f) {
  lin_grads j = { g, x, w, gx, gw, gb, beta_w, rows, in_f, out_f, 1 };
  int nt = c->num_threads < lt_pool_threads() ? c->num_threads : lt_pool_threads();
  if (gx && (gw || gb) && nt >= 2 && lt_blas_threads_pay(rows, in_f, out_f)) {
    j.k = nt / 2;
    lt_blas_serial_begin();
    lt_pool_run(part, &j, 2 * j.k);
    lt_blas_serial_end();
    return;
  }
  if (gx) gx_rows(&j, 0, rows);
  gw_rows(&j, 0, out_f);
}
