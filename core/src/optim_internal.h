/*
 * optim_internal.h — what optim.c shares with optim_adaptive.c (not public): the element-range runner that
 * splits a large parameter's update over lutra's pool (optim_parallel.c), and the steps of the kinds
 * optim_adaptive.c implements. optim.c calls optim_adaptive.c, never the other way round.
 *
 *   static void my_range(void *arg, int64_t lo, int64_t hi) { ... elements [lo, hi) ... }
 *   lt_optim_parallel(c, my_range, &args, n);
 */
#ifndef LT_OPTIM_INTERNAL_H
#define LT_OPTIM_INTERNAL_H

#include "lt_optim.h"

/* Each kernel is compiled for baseline x86-64, AVX2 and AVX-512 and the best is picked at load time.
 * ISO C mode (-std=c11) keeps FMA contraction off, so every variant rounds the same way. ISA levels, not
 * arch=<cpu> names: GCC picks an arch=haswell clone only on a CPU that *is* a Haswell (cpu_is). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define OPTIM_VECTOR_FN __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define OPTIM_VECTOR_FN
#endif

/* Large parameters are updated on lutra's pool (lt_pool.h: persistent threads, nothing created per step).
 * The updates are memory-bound, so two cores stream about twice the bytes; from 64K elements a split pays
 * (measured: an MLP step at batch 64 ~5% faster, at batch 1 ~20%). Elementwise rules make the result
 * independent of the split. */
#define OPTIM_PAR_MIN (INT64_C(1) << 16)

typedef void (*lt_optim_range_fn)(void *arg, int64_t lo, int64_t hi);

/* Runs fn over [0, n) in 64-byte aligned ranges, on several threads when n is large (optim_parallel.c). */
void lt_optim_parallel(lt_ctx *c, lt_optim_range_fn fn, void *arg, int64_t n);

/* One update of a parameter of kind Adagrad..ASGD: p and g are contiguous arrays of n elements of like's dtype
 * (float32 or float64: the parameter's), `like` gives the dtype and shape of new state buffers; s is created on
 * first use. */
int lt_optim_adaptive_step(lt_ctx *c, lt_optim_kind k, const lt_optim_hparams *h, lt_optim_state *s,
                           const lt_tensor *like, void *p, const void *g, int64_t n);

/* Adds defaults, hyper-parameter names and checks for the kinds of optim_adaptive.c. */
void lt_optim_adaptive_defaults(lt_optim_kind k, lt_optim_hparams *h);
const char *const *lt_optim_adaptive_hparam_names(lt_optim_kind k);
int lt_optim_adaptive_check_hparams(lt_ctx *c, lt_optim_kind k, const lt_optim_hparams *h);

#endif
