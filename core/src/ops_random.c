/*
 * ops_random.c — random tensors: rand, randn, uniform_, normal_ (the fast normal fill behind randn / normal_ /
 * randn_like), randint, bernoulli, multinomial; and linspace. uniform_, normal_, bernoulli and multinomial also
 * take float64.
 *
 * Box-Muller in float32 over blocks of NORMAL_BLOCK values: each block draws from its own xoshiro stream,
 * seeded from one word of lutra's RNG and the block's number, so blocks can run on any thread in any order and
 * the values depend only on the seed (lt.manual_seed) and the tensor's size, never on the thread count. One
 * 64-bit draw gives both uniforms of a pair; the logarithm and the sine/cosine are branch-free polynomials
 * (Cephes' logf / sinf / cosf) that vectorise, where libm's calls do not.
 */
#include <math.h>

#include "lt_alloc.h"
#include "lt_errors.h"
#include "lt_iter.h"
#include "lt_ops.h"
#include "lt_pool.h"
#include "lt_simd.h"

#define NORMAL_BLOCK 4096 /* values per stream: even, so each block is whole pairs */

__attribute__((always_inline)) static inline float bm_logf(float x) { /* x in (0, 1], normal numbers */
  union {
    float f;
    int32_t i;
  } u = { .f = x };
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
  float pc =
      ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f) * z * z - 0.5f * z + 1.0f;
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

typedef struct normal_job {
  float *p;
  int64_t n;
  uint64_t base;
  float mean, std;
} normal_job;

static void normal_block(const normal_job *j, int64_t b) {
  lt_rng r;
  lt_rng_seed(&r, j->base ^ ((uint64_t)b * 0xd1b54a32d192ed03ULL));
  int64_t lo = b * NORMAL_BLOCK, len = j->n - lo < NORMAL_BLOCK ? j->n - lo : NORMAL_BLOCK;
  uint64_t bits[NORMAL_BLOCK / 2];
  int64_t pairs = (len + 1) / 2;
  for (int64_t i = 0; i < pairs; i++) bits[i] = lt_rng_next(&r);
  if (len % 2 == 0) {
    box_muller(j->p + lo, bits, pairs, j->mean, j->std);
    return;
  }
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

/* ---- randint, bernoulli, multinomial, linspace -------------------------------------------------------- */

lt_tensor *lt_op_rand(lt_ctx *c, int ndim, const int64_t *shape) {
  lt_tensor *t = lt_tensor_new(c, LT_F32, ndim, shape);
  if (t) lt_op_uniform_(c, t, 0.0, 1.0);
  if (t) t->storage->version = 0; /* as lt_op_full */
  return t;
}

lt_tensor *lt_op_randn(lt_ctx *c, int ndim, const int64_t *shape) {
  lt_tensor *t = lt_tensor_new(c, LT_F32, ndim, shape);
  if (t) lt_op_normal_(c, t, 0.0, 1.0);
  if (t) t->storage->version = 0; /* as lt_op_full */
  return t;
}

int lt_op_uniform_(lt_ctx *c, lt_tensor *t, double a, double b) {
  if (lt_check_inplace(c, "uniform_", t)) return LT_ERR;
  if (t->dtype == LT_I64) return lt_check_dtype(c, "uniform_", "the tensor", t, LT_F32);
  if (!(a <= b)) return lt_fail(c, "uniform_: expected a <= b, got a=%g, b=%g", a, b);
  lt_mark_modified(t);
  if (t->dtype == LT_F64) {
    double *q = lt_f64(t);
    LT_FOR_EACH_ELEMENT(t, o, q[o] = a + (b - a) * lt_rng_uniform(&c->rng));
    return LT_OK;
  }
  float *p = lt_f32(t);
  LT_FOR_EACH_ELEMENT(t, o, p[o] = (float)(a + (b - a) * lt_rng_uniform(&c->rng)));
  return LT_OK;
}

int lt_op_normal_(lt_ctx *c, lt_tensor *t, double mean, double std) {
  if (lt_check_inplace(c, "normal_", t)) return LT_ERR;
  if (t->dtype == LT_I64) return lt_check_dtype(c, "normal_", "the tensor", t, LT_F32);
  if (!(std >= 0)) return lt_fail(c, "normal_: std must be >= 0, got %g", std);
  lt_mark_modified(t);
  if (t->dtype == LT_F64) { /* double precision from libm's log/sin/cos (lt_rng_normal), element by element */
    double *q = lt_f64(t);
    LT_FOR_EACH_ELEMENT(t, o, q[o] = mean + std * lt_rng_normal(&c->rng));
    return LT_OK;
  }
  if (lt_is_contiguous(t)) {
    lt_normal_fill_f32(c, lt_f32(t), lt_numel(t), mean, std);
    return LT_OK;
  }
  /* a strided view: the same values as a contiguous tensor of its shape, copied in */
  lt_tensor *tmp = lt_tensor_new(c, LT_F32, t->ndim, t->shape);
  if (!tmp) return LT_ERR;
  lt_normal_fill_f32(c, lt_f32(tmp), lt_numel(tmp), mean, std);
  int rc = lt_op_copy_(c, t, tmp);
  lt_tensor_release(tmp);
  return rc;
}

lt_tensor *lt_op_randint(lt_ctx *c, int64_t low, int64_t high, int ndim, const int64_t *shape) {
  if (high <= low) {
    lt_fail(c, "randint: expected low < high, got low=%lld, high=%lld (high is exclusive)", (long long)low,
            (long long)high);
    return NULL;
  }
  lt_tensor *t = lt_tensor_new(c, LT_I64, ndim, shape);
  if (!t) return NULL;
  int64_t *p = lt_i64(t);
  uint64_t range = (uint64_t)high - (uint64_t)low;
  for (int64_t i = 0, n = lt_numel(t); i < n; i++) p[i] = low + (int64_t)lt_rng_below(&c->rng, range);
  return t;
}

/* bernoulli's draws for float and double probabilities (T): 1 where a uniform falls below p; the index of the
 * first p outside [0, 1] (1-based), else 0 */
#define BERNOULLI_LOOP(NAME, T)                                   \
  static int64_t NAME(lt_rng *r, const T *pp, T *pt, int64_t n) { \
    for (int64_t i = 0; i < n; i++) {                             \
      if (!(pp[i] >= (T)0 && pp[i] <= (T)1)) return i + 1;        \
      pt[i] = lt_rng_uniform(r) < (double)pp[i] ? (T)1 : (T)0;    \
    }                                                             \
    return 0;                                                     \
  }
BERNOULLI_LOOP(bernoulli_f32, float)
BERNOULLI_LOOP(bernoulli_f64, double)

lt_tensor *lt_op_bernoulli(lt_ctx *c, lt_tensor *prob) {
  if (prob->dtype != LT_F64 && lt_check_dtype(c, "bernoulli", "probabilities", prob, LT_F32)) return NULL;
  lt_tensor *p = lt_op_contiguous(c, prob);
  lt_tensor *t = p ? lt_tensor_new(c, p->dtype, p->ndim, p->shape) : NULL;
  if (t) {
    int64_t n = lt_numel(t);
    int64_t bad = p->dtype == LT_F64 ? bernoulli_f64(&c->rng, lt_f64(p), lt_f64(t), n)
                                     : bernoulli_f32(&c->rng, lt_f32(p), lt_f32(t), n);
    if (bad) {
      lt_fail(c, "bernoulli: probability %g at element %lld is not in [0, 1]", lt_get_flat(p, bad - 1), (long long)bad);
      lt_tensor_release(t);
      t = NULL;
    }
  }
  lt_tensor_release(p);
  return t;
}

/* One row of multinomial: n categories drawn from weights wf[0..k) or wd[0..k) (float32 or float64; copied into
 * scratch, zeroed as drawn when without replacement). Linear search over the running sum: k is a vocabulary or
 * a class count. */
static void multinomial_row(lt_rng *r, const float *wf, const double *wd, int64_t k, int64_t n, int replacement,
                            double *scratch, int64_t *out) {
  double total = 0;
  for (int64_t j = 0; j < k; j++) {
    scratch[j] = wf ? wf[j] : wd[j];
    total += scratch[j];
  }
  for (int64_t s = 0; s < n; s++) {
    double u = lt_rng_uniform(r) * total, acc = 0;
    int64_t pick = -1;
    for (int64_t j = 0; j < k; j++) {
      if (scratch[j] <= 0) continue;
      acc += scratch[j];
      pick = j;
      if (u < acc) break;
    }
    out[s] = pick;
    if (!replacement) {
      total -= scratch[pick];
      scratch[pick] = 0;
    }
  }
}

lt_tensor *lt_op_multinomial(lt_ctx *c, lt_tensor *prob, int64_t n, int replacement) {
  char b1[128];
  if (prob->dtype != LT_F64 && lt_check_dtype(c, "multinomial", "probabilities", prob, LT_F32)) return NULL;
  if (prob->ndim != 1 && prob->ndim != 2) {
    lt_fail(c, "multinomial: probabilities must be 1-D or 2-D, got %s", lt_shape_str(prob, b1, sizeof b1));
    return NULL;
  }
  int64_t rows = prob->ndim == 2 ? prob->shape[0] : 1, k = prob->shape[prob->ndim - 1];
  if (n < 1) {
    lt_fail(c, "multinomial: the number of samples must be >= 1, got %lld", (long long)n);
    return NULL;
  }
  lt_tensor *p = lt_op_contiguous(c, prob);
  if (!p) return NULL;
  const float *pp = p->dtype == LT_F32 ? lt_f32(p) : NULL;
  const double *pd = p->dtype == LT_F64 ? lt_f64(p) : NULL;
  for (int64_t r = 0; r < rows; r++) {
    int64_t positive = 0;
    for (int64_t j = 0; j < k; j++) {
      double v = pp ? pp[r * k + j] : pd[r * k + j];
      if (!(v >= 0.0) || isinf(v)) {
        lt_tensor_release(p);
        lt_fail(c, "multinomial: probabilities must be finite and >= 0, got %g in row %lld", (double)v,
                (long long)(r + 1));
        return NULL;
      }
      positive += v > 0;
    }
    if (positive == 0 || (!replacement && n > positive)) {
      lt_tensor_release(p);
      lt_fail(c,
              positive == 0 ? "multinomial: row %lld has no positive probability"
                            : "multinomial: cannot draw %lld samples without replacement from %lld categories with "
                              "positive probability (row %lld)",
              positive == 0 ? (long long)(r + 1) : (long long)n, (long long)positive, (long long)(r + 1));
      return NULL;
    }
  }
  int64_t shape[2] = { rows, n };
  lt_tensor *t = prob->ndim == 2 ? lt_tensor_new(c, LT_I64, 2, shape) : lt_tensor_new(c, LT_I64, 1, &n);
  double *scratch = t ? lt_alloc((size_t)k * sizeof *scratch) : NULL;
  if (t && !scratch) {
    lt_tensor_release(t);
    t = NULL;
    lt_fail(c, "multinomial: out of memory");
  }
  if (t) {
    for (int64_t r = 0; r < rows; r++)
      multinomial_row(&c->rng, pp ? pp + r * k : NULL, pd ? pd + r * k : NULL, k, n, replacement, scratch,
                      lt_i64(t) + r * n);
    lt_free(scratch, (size_t)k * sizeof *scratch);
  }
  lt_tensor_release(p);
  return t;
}

/* PyTorch's CPU formula: the first half steps up from a, the second down from b, so both ends are exact. */
lt_tensor *lt_op_linspace(lt_ctx *c, double a, double b, int64_t n, lt_dtype dt) {
  if (!isfinite(a) || !isfinite(b)) {
    lt_fail(c, "linspace: start and end must be finite, got %g, %g", a, b);
    return NULL;
  }
  if (n < 0) {
    lt_fail(c, "linspace: the number of steps must be >= 0, got %lld", (long long)n);
    return NULL;
  }
  if (dt == LT_I64) {
    lt_fail(c, "linspace: dtype must be float32 or float64, got int64");
    return NULL;
  }
  lt_tensor *t = lt_tensor_new(c, dt, 1, &n);
  if (!t) return NULL;
  if (dt == LT_F64) { /* the same formula in double */
    double *q = lt_f64(t), st = n > 1 ? (b - a) / (double)(n - 1) : 0.0;
    for (int64_t i = 0; i < n; i++) q[i] = n == 1 || i < n / 2 ? a + st * (double)i : b - st * (double)(n - i - 1);
    return t;
  }
  float *p = lt_f32(t), fa = (float)a, fb = (float)b;
  if (n == 1) p[0] = fa;
  float step = n > 1 ? (fb - fa) / (float)(n - 1) : 0.0f;
  int64_t half = n / 2;
  for (int64_t i = 0; i < n && n > 1; i++) p[i] = i < half ? fa + step * (float)i : fb - step * (float)(n - i - 1);
  return t;
}
