/*
 * test_infer_attention.c — the plan steps added for attention and more layers (core/src/lt_infer.h) without Lua:
 * a strided copy (a transpose into the second half of a buffer), batched products in the four transposition
 * cases against double arithmetic (one operand shared by every batch item), GroupNorm, a transposed convolution
 * against its gather form, a reversed tanh RNN layer over a sequence, refusals of steps that would read or
 * write out of their buffers, and no allocation by lt_infer_run.
 * Prints "ok - ..." / "not ok - ..." per check and a final "N passed, M failed".
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "lt_alloc.h"
#include "lt_infer.h"

static void fill(float *d, int64_t n, float scale, int seed) {
  for (int64_t i = 0; i < n; i++) d[i] = scale * (float)sin((double)i * 0.37 + seed);
}

static lt_tensor *param(lt_ctx *c, int64_t n, float scale, int seed) {
  lt_tensor *t = lt_tensor_new(c, LT_F32, 1, &n);
  fill(lt_f32(t), n, scale, seed);
  return t;
}

static float *buf(const lt_infer_plan *p, int i) { return lt_f32(lt_infer_buf(p, i)); }

int main(void) {
  lt_ctx c;
  lt_ctx_init(&c);
  lt_infer_plan *p = lt_infer_new(&c);

  /* strided copy: x [3 x 4] transposed into out[12..23] as [4 x 3] */
  int x = lt_infer_buffer(&c, p, 12), t = lt_infer_buffer(&c, p, 24);
  fill(buf(p, x), 12, 1.0f, 1);
  lt_infer_step st = { .op = LT_INFER_STRIDED, .in = x, .out = t, .geo = { 2, 4, 3, 0, 0, 1, 4, 0, 0, 3, 1, 0, 0, 0, 12 } };
  CHECK(lt_infer_add(&c, p, &st) == LT_OK, "strided copy added");

  /* products: A [2 x 3 x 5] (stored transposed or not) times B [5 x 4] shared by both batch items */
  enum { NB = 2, M = 3, K = 5, N = 4 };
  int a = lt_infer_buffer(&c, p, NB * M * K), at = lt_infer_buffer(&c, p, NB * M * K);
  int y[4];
  fill(buf(p, a), NB * M * K, 0.5f, 2);
  for (int b = 0; b < NB; b++) /* at holds each A[b] transposed: [K x M] */
    for (int m = 0; m < M; m++)
      for (int k = 0; k < K; k++) buf(p, at)[b * M * K + k * M + m] = buf(p, a)[b * M * K + m * K + k];
  lt_tensor *B = param(&c, K * N, 0.7f, 3), *Bt = param(&c, K * N, 1.0f, 0);
  for (int k = 0; k < K; k++)
    for (int n = 0; n < N; n++) lt_f32(Bt)[n * K + k] = lt_f32(B)[k * N + n];
  for (int v = 0; v < 4; v++) {
    int ta = v & 1, tb = v >> 1;
    y[v] = lt_infer_buffer(&c, p, NB * M * N);
    lt_infer_step mm = { .op = LT_INFER_MATMUL, .in = ta ? at : a, .out = y[v], .a = 0.5f, .t = { tb ? Bt : B },
                         .geo = { -1, NB, M, K, N, ta, tb, M * K, 0 } };
    CHECK(lt_infer_add(&c, p, &mm) == LT_OK, "matmul added (each transposition)");
  }

  /* GroupNorm: N 2, C 4 in 2 groups, spatial 3 */
  int g = lt_infer_buffer(&c, p, 24), gy = lt_infer_buffer(&c, p, 24);
  fill(buf(p, g), 24, 2.0f, 4);
  lt_tensor *gw = param(&c, 4, 1.0f, 5), *gb = param(&c, 4, 0.3f, 6);
  lt_infer_step gn = { .op = LT_INFER_GROUPNORM, .in = g, .out = gy, .rows = 2, .n_in = 4, .a = 1e-5f,
                       .geo = { 3, 2 }, .t = { gw, gb } };
  CHECK(lt_infer_add(&c, p, &gn) == LT_OK, "GroupNorm added");

  /* ConvTranspose2d: 1 sample, 2 -> 2 channels, 3 x 3 input, kernel 2 x 3, stride 2, padding 1, output 6 x 6 */
  int ci = lt_infer_buffer(&c, p, 18), co = lt_infer_buffer(&c, p, 72);
  fill(buf(p, ci), 18, 1.0f, 7);
  lt_tensor *cw = param(&c, 2 * 2 * 2 * 3, 0.5f, 8), *cb = param(&c, 2, 0.2f, 9);
  lt_infer_step ct = { .op = LT_INFER_CONVT, .in = ci, .out = co, .t = { cw, cb },
                       .geo = { 1, 2, 3, 3, 2, 6, 6, 2, 3, 2, 2, 1, 1, 1, 1, 1 } };
  CHECK(lt_infer_add(&c, p, &ct) == LT_OK, "transposed convolution added");

  /* a reversed tanh RNN layer: T 4, batch 1, 3 -> 2, time-major input, output [T x 2] */
  int sx = lt_infer_buffer(&c, p, 12), sy = lt_infer_buffer(&c, p, 8), ss = lt_infer_buffer(&c, p, 2 + 2 + 4 + 2);
  fill(buf(p, sx), 12, 1.0f, 10);
  lt_tensor *wih = param(&c, 6, 0.6f, 11), *whh = param(&c, 4, 0.6f, 12), *bih = param(&c, 2, 0.1f, 13);
  lt_infer_step sq = { .op = LT_INFER_SEQ, .act = LT_INFER_CELL_RNN_TANH, .in = sx, .out = sy, .n_in = 3, .n_out = 2,
                       .geo = { 4, 1, 3, 3, 2, 2, 0, 1, ss, 0 }, .t = { wih, whh, bih, NULL, NULL } };
  CHECK(lt_infer_add(&c, p, &sq) == LT_OK, "recurrent layer added");

  CHECK(lt_infer_run(&c, p) == LT_OK, "the plan runs");
  int ok = 1;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) ok &= buf(p, t)[12 + j * 3 + i] == buf(p, x)[i * 4 + j] && buf(p, t)[j * 3 + i] == 0;
  CHECK(ok, "the strided copy wrote the transpose into the second half only");

  double worst = 0;
  for (int v = 0; v < 4; v++)
    for (int b = 0; b < NB; b++)
      for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
          double s = 0;
          for (int k = 0; k < K; k++) s += (double)buf(p, a)[b * M * K + m * K + k] * lt_f32(B)[k * N + n];
          worst = fmax(worst, fabs(0.5 * s - buf(p, y[v])[(b * M + m) * N + n]));
        }
  CHECK(worst < 1e-5, "the four transpositions of a batched product equal the arithmetic in double");

  worst = 0;
  for (int r = 0; r < 4; r++) { /* (sample, group): channels 2 of 3 values each */
    const float *xg = buf(p, g) + r * 6;
    double mean = 0, var = 0;
    for (int i = 0; i < 6; i++) mean += xg[i] / 6.0;
    for (int i = 0; i < 6; i++) var += (xg[i] - mean) * (xg[i] - mean) / 6.0;
    for (int i = 0; i < 6; i++) {
      int ch = (r % 2) * 2 + i / 3;
      double want = (xg[i] - mean) / sqrt(var + 1e-5) * lt_f32(gw)[ch] + lt_f32(gb)[ch];
      worst = fmax(worst, fabs(want - buf(p, gy)[r * 6 + i]));
    }
  }
  CHECK(worst < 1e-5, "GroupNorm equals the arithmetic in double");

  worst = 0; /* gather form: out[oh][ow] = sum over (ih, ki) with oh = 2 ih - 1 + ki, likewise for w */
  for (int o = 0; o < 2; o++)
    for (int oh = 0; oh < 6; oh++)
      for (int ow = 0; ow < 6; ow++) {
        double s = lt_f32(cb)[o];
        for (int i = 0; i < 2; i++)
          for (int ki = 0; ki < 2; ki++)
            for (int kj = 0; kj < 3; kj++) {
              int nh = oh + 1 - ki, nw = ow + 1 - kj;
              if (nh % 2 || nw % 2 || nh < 0 || nw < 0 || nh / 2 >= 3 || nw / 2 >= 3) continue;
              s += (double)lt_f32(cw)[((i * 2 + o) * 2 + ki) * 3 + kj] * buf(p, ci)[i * 9 + nh / 2 * 3 + nw / 2];
            }
        worst = fmax(worst, fabs(s - buf(p, co)[o * 36 + oh * 6 + ow]));
      }
  CHECK(worst < 1e-5, "the transposed convolution equals its gather form");

  double h[2] = { 0, 0 };
  worst = 0;
  for (int tt = 3; tt >= 0; tt--) {
    double nh[2];
    for (int j = 0; j < 2; j++) {
      double s = lt_f32(bih)[j];
      for (int i = 0; i < 3; i++) s += (double)lt_f32(wih)[j * 3 + i] * buf(p, sx)[tt * 3 + i];
      for (int i = 0; i < 2; i++) s += (double)lt_f32(whh)[j * 2 + i] * h[i];
      nh[j] = tanh(s);
    }
    for (int j = 0; j < 2; j++) h[j] = nh[j], worst = fmax(worst, fabs(h[j] - buf(p, sy)[tt * 2 + j]));
  }
  CHECK(worst < 1e-5, "the reversed RNN layer runs from the last step, from a zero state");
  float first = buf(p, sy)[0];
  lt_infer_run(&c, p);
  CHECK(buf(p, sy)[0] == first, "a second run starts from a zero state again");

  lt_alloc_stats before, after;
  lt_alloc_get_stats(&before);
  for (int k = 0; k < 200; k++) lt_infer_run(&c, p);
  lt_alloc_get_stats(&after);
  CHECK(after.total_allocated == before.total_allocated && after.system_allocs == before.system_allocs,
        "200 runs allocate nothing from lutra's allocator");

  /* refusals */
  lt_infer_step bad = st;
  bad.geo[14] = 13;
  CHECK(lt_infer_add(&c, p, &bad) == LT_ERR &&
            strstr(c.err, "strided copy: output buffer holds 24 values, the step reaches 25"),
        "a strided copy past its output is refused");
  bad = st;
  bad.geo[0] = 5;
  CHECK(lt_infer_add(&c, p, &bad) == LT_ERR && strstr(c.err, "5 dims, expected 1 to 4"), "five dims are refused");
  lt_infer_step badm = { .op = LT_INFER_MATMUL, .in = a, .out = y[0], .a = 1, .geo = { y[0], NB, M, K, N, 0, 0, M * K, 0 } };
  CHECK(lt_infer_add(&c, p, &badm) == LT_ERR, "a product reading its own output is refused");
  badm.geo[0] = a;
  badm.geo[LT_INFER_MM_B_STRIDE] = 40;
  CHECK(lt_infer_add(&c, p, &badm) == LT_ERR && strstr(c.err, "matmul: second operand buffer holds 30 values"),
        "a product reading past its operand is refused");
  lt_infer_step bads = sq;
  bads.geo[LT_INFER_SEQ_PROJ] = 1;
  CHECK(lt_infer_add(&c, p, &bads) == LT_ERR && strstr(c.err, "recurrent layer: bad geometry"),
        "a projection on an RNN layer is refused");

  lt_infer_free(p);
  lt_tensor *all[] = { B, Bt, gw, gb, cw, cb, wih, whh, bih };
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) lt_tensor_release(all[i]);
  CHECK(lt_tensor_live_count() == 0, "every tensor released");
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
