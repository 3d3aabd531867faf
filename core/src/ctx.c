/* ctx.c — context initialisation, error formatting, and the random number generator. */
#include "lt_ctx.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void lt_ctx_init(lt_ctx *c) {
  memset(c, 0, sizeof *c);
  c->grad_enabled = 1;
  c->num_threads = 1;
  c->flush_denormal = 1;
  lt_rng_seed(&c->rng, 0x6c75747261ULL); /* "lutra" */
}

int lt_fail(lt_ctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err, sizeof c->err, fmt, ap);
  va_end(ap);
  return LT_ERR;
}

int lt_fail_prefix(lt_ctx *c, const char *prefix) {
  char tmp[sizeof c->err];
  int n = snprintf(tmp, sizeof tmp, "%s: ", prefix);
  if (n < 0 || (size_t)n >= sizeof tmp) return LT_ERR;
  memcpy(tmp + n, c->err, sizeof tmp - (size_t)n - 1);
  tmp[sizeof tmp - 1] = 0;
  memcpy(c->err, tmp, sizeof tmp);
  return LT_ERR;
}

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void lt_rng_seed(lt_rng *r, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t lt_rng_next(lt_rng *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double lt_rng_uniform(lt_rng *r) { return (double)(lt_rng_next(r) >> 11) * 0x1.0p-53; }

double lt_rng_normal(lt_rng *r) {
  double u1 = lt_rng_uniform(r), u2 = lt_rng_uniform(r);
  if (u1 < 1e-300) u1 = 1e-300;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t lt_rng_below(lt_rng *r, uint64_t n) {
  if (n <= 1) return 0;
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t v;
  do v = lt_rng_next(r);
  while (v >= limit);
  return v % n;
}
