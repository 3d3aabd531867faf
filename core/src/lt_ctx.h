/*
 * lt_ctx.h — the per-interpreter context every core function takes: error message, grad mode, RNG,
 * thread policy. The core keeps no globals for these: a host with two Lua states
 * has two contexts.
 */
#ifndef LT_CTX_H
#define LT_CTX_H

#include <stddef.h>
#include <stdint.h>

enum { LT_OK = 0, LT_ERR = -1 };

typedef struct lt_rng {
  uint64_t s[4];
} lt_rng;

struct lt_tensor;
struct lt_ctx;
/* Gradient hooks for data-parallel training (lt_dist.h): while set, backward() calls leaf_ready for each
 * leaf whose gradient is final for this backward (all its uses were processed), and done() once at its
 * end with the backward's status; a nonzero return is an error of the backward. NULL: nothing happens. */
typedef struct lt_grad_hook {
  int (*leaf_ready)(void *ud, struct lt_ctx *c, struct lt_tensor *leaf);
  int (*done)(void *ud, struct lt_ctx *c, int status);
  void *ud;
} lt_grad_hook;

typedef struct lt_ctx {
  char err[1024];                /* message of the last failed call */
  int grad_enabled;              /* 0 inside no_grad */
  lt_rng rng;                    /* every random op draws from here (lt.manual_seed) */
  int num_threads;               /* the one thread policy (lt.set_num_threads) */
  int flush_denormal;            /* FTZ/DAZ on lutra's compute threads */
  const lt_grad_hook *grad_hook; /* data-parallel gradient reduction during backward (NULL: none) */
  int grad_sync_off;             /* backward skips grad_hook: the loops set it for the micro-batches of an
                              accumulation window that do not step (PyTorch DDP's no_sync): gradients
                              accumulate locally and the stepping backward reduces their sum once */
  /* Watching the autograd ops (autograd.c; Trainer{detect_anomaly=true}, profiler="advanced"): `watch` is
   * set when either is on, so the ops pay one test when both are off. */
  int watch;
  int detect_anomaly;   /* an op whose output (forward) or gradient (backward) is NaN/inf fails, named */
  struct lt_prof *prof; /* time per op and backward kernel into the loops' profiler (lt_prof.h); NULL: off */
  int autocast;         /* LT_AUTOCAST_OFF / _BF16 (lt_gemm_bf16.h): the GEMM ops' precision (lt.autocast) */
  int default_dtype;    /* lt_dtype of what is created without a dtype (lt.set_default_dtype); 0 is LT_F32 */
} lt_ctx;

void lt_ctx_init(lt_ctx *c);

/* Formats the message into c->err and returns LT_ERR, so call sites read `return lt_fail(c, ...)`. */
int lt_fail(lt_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefixes the current message with "<prefix>: " (used to add context as an error travels up). */
int lt_fail_prefix(lt_ctx *c, const char *prefix);

/* RNG: xoshiro256** seeded through splitmix64; same seed, same stream on every machine. */
void lt_rng_seed(lt_rng *r, uint64_t seed);
uint64_t lt_rng_next(lt_rng *r);
double lt_rng_uniform(lt_rng *r);             /* [0, 1) with 53 bits */
double lt_rng_normal(lt_rng *r);              /* standard normal (Box-Muller, no cached spare: state is the 4 words) */
uint64_t lt_rng_below(lt_rng *r, uint64_t n); /* uniform integer in [0, n), unbiased */

#endif
