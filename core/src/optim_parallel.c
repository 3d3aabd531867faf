/* optim_parallel.c — runs an optimizer's element-range update over lutra's pool (optim_internal.h). Apart
 * from optim.c so that optim.c and optim_adaptive.c both use it and neither depends on the other for it. */
#include "lt_pool.h"
#include "optim_internal.h"

typedef struct fn_split {
  lt_optim_range_fn fn;
  void *arg;
  int64_t n;
} fn_split;

static void fn_split_part(void *arg, int i, int nparts) {
  const fn_split *s = arg;
  int64_t per = ((s->n + nparts - 1) / nparts + 15) & ~INT64_C(15);
  int64_t lo = i * per, hi = lo + per < s->n ? lo + per : s->n;
  if (lo < hi) s->fn(s->arg, lo, hi);
}

void lt_optim_parallel(lt_ctx *c, lt_optim_range_fn fn, void *arg, int64_t n) {
  int nt = c->num_threads < lt_pool_threads() ? c->num_threads : lt_pool_threads();
  if (nt <= 1 || n < OPTIM_PAR_MIN) {
    fn(arg, 0, n);
    return;
  }
  fn_split s = { fn, arg, n };
  lt_pool_run(fn_split_part, &s, nt);
}
