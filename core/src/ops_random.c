/*
 * ops_random.c — the fast normal fill behind randn / normal_ / randn_like.
 *
 * Box-Muller in float32 over blocks of NORMAL_BLOCK values: each block draws from its own xoshiro stream,
 * seeded from one word of lutra's RNG and the block's number, so blocks can run on any thread in any order and
 * the values depend only on the seed (lt.manual_seed) and the tensor's size, never on the thread count. One
 * 64-bit draw gives both uniforms of a pair; the logarithm and the sine/cosine are branch-free polynomials
 * (Cephes' logf / sinf / cosf) that vectorise, where libm's calls do not.
 */
#include <math.h>

#include "lt_errors.h"
#include "lt_ops.h"
#include "lt_pool.h"
#include "lt_simd.h"

#define NORMAL_BLOCK 4096 /* values per stream: even, so each block is whole pairs */

__attribute__((always_inline)) static inline float bm_logf(float x) { /* x in (0, 1], normal numbers */
  union { float f; int32_t i; } u = { .f = x };
  float e = (float)(((u.i >> 23) & 0xff) - 126);
  u.i = (u.i & 0x807fffff) | 0x3f000000; /* mantissa in [0.5, 1) */
  float m = u.f;
  int small = m < 0.707106781186547524f;
  e = small ? e - 1.0f : e;
  m = small ? m + m - 1.0f : m - 1.0f;
  float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  y += -2.12194440e-4f * e;
  y += -0.5f * z;
  return m + y + 0.693359375f * e;
}

/* sin and cos of 2*pi*t for t in [0, 1): quarter turns q and a remainder in [-pi/4, pi/4]. */
__attribute__((always_inline)) static inline void bm_sincos(float t, float *s, float *c) {
  float qf = __builtin_floorf(t * 4.0f + 0.5f);
  float x = (t - qf * 0.25f) * 6.28318530717958648f;
  int q = (int)qf & 3;
  float z = x * x;
  float ps = ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * x + x;
  float pc = ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f) * z * z - 0.5f * z + 1.0f;
  float sv = (q & 1) ? pc : ps, cv = (q & 1) ? ps : pc;
  *s = (q & 2) ? -sv : sv;
  *c = ((q + 1) & 2) ? -cv : cv;
}

LT_VECTOR_FN static void box_muller(float *out, const uint64_t *bits, int64_t pairs, float mean, float std) {
  for (int64_t i = 0; i < pairs; i++) {
    /* u1 in (0, 1] (its log is finite), u2 in [0, 1), 32 bits each */
    float u1 = ((float)(uint32_t)(bits[i] >> 32) + 1.0f) * 2.3283064365386963e-10f;
    float u2 = (float)(uint32_t)bits[i] * 2.3283064365386963e-10f;
    u1 = u1 > 1.0f ? 1.0f : u1;
    u2 = u2 >= 1.0f ? 0.99999994f : u2;
    float r = std * sqrtf(-2.0f * bm_logf(u1)), s, c;
    bm_sincos(u2, &s, &c);
    out[2 * i] = mean + r * c;
    out[2 * i + 1] = mean + r * s;
  }
}

typedef struct normal_job { float *p; int64_t n; uint64_t base; float mean, std; } normal_job;

static void normal_block(const normal_job *j, int64_t b) {
  lt_rng r;
  lt_rng_seed(&r, j->base ^ ((uint64_t)b * 0xd1b54a32d192ed03ULL));
  int64_t lo = b * NORMAL_BLOCK, len = j->n - lo < NORMAL_BLOCK ? j->n - lo : NORMAL_BLOCK;
  uint64_t bits[NORMAL_BLOCK / 2];
  int64_t pairs = (len + 1) / 2;
  for (int64_t i = 0; i < pairs; i++) bits[i] = lt_rng_next(&r);
  if (len % 2 == 0) { box_muller(j->p + lo, bits, pairs, j->mean, j->std); return; }
  float tmp[NORMAL_BLOCK];
  box_muller(tmp, bits, pairs, j->mean, j->std);
  for (int64_t i = 0; i < len; i++) j->p[lo + i] = tmp[i];
}

static void normal_part(void *arg, int i, int nparts) {
  const normal_job *j = arg;
  int64_t nb = (j->n + NORMAL_BLOCK - 1) / NORMAL_BLOCK;
  for (int64_t b = nb * i / nparts; b < nb * (i + 1) / nparts; b++) normal_block(j, b);
}

void lt_normal_fill_f32(lt_ctx *c, float *p, int64_t n, double mean, double std) {
  if (n <= 0) return;
  normal_job j = { p, n, lt_rng_next(&c->rng), (float)mean, (float)std };
  int64_t nb = (n + NORMAL_BLOCK - 1) / NORMAL_BLOCK;
  int parts = lt_pool_parts(c->num_threads, n * 8, INT64_C(1) << 16);
  if (parts > nb) parts = (int)nb;
  if (parts > 1) lt_pool_run(normal_part, &j, parts);
  else normal_part(&j, 0, 1);
}
