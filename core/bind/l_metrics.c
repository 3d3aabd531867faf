/*
 * l_metrics.c — the counting kernels of lt.metrics (core/src/metrics.c) as `lutra.core._metrics`, called by
 * lua/lutra/metrics/ with tensors it has made contiguous and shapes it has checked (with the messages users
 * see); the checks here keep a wrong call from reading or writing out of bounds:
 *
 *   binary_counts(name, preds, target, threshold, counts)   counts: int64 [L x 4]; preds, target: n*L values
 *   multiclass_stats(name, preds, target, k, stats)         stats: int64 [3 x C]; preds n*C scores or n labels
 *   multiclass_confmat(name, preds, target, confmat)        confmat: int64 [C x C]
 */
#include "l_util.h"
#include "lt_metrics.h"

/* A contiguous tensor of dtype dt (any dtype when dt < 0), argument idx. */
static lt_tensor *check_dense(lua_State *L, int idx, const char *fname, const char *what, int dt) {
  lt_tensor *t = l_checktensor(L, idx, fname);
  if (!lt_is_contiguous(t)) l_errorf(L, "%s: %s must be contiguous", fname, what);
  if (dt >= 0 && t->dtype != (lt_dtype)dt)
    l_errorf(L, "%s: %s must be %s, got %s", fname, what, lt_dtype_name((lt_dtype)dt), lt_dtype_name(t->dtype));
  return t;
}

/* The arguments every kernel starts with: (name, preds, target); preds as a float32 or an int64 pointer (the
 * other NULL). */
typedef struct batch_args {
  const char *name;
  lt_tensor *p, *t;
  const float *pf;
  const int64_t *pi;
} batch_args;

static batch_args check_batch(lua_State *L) {
  batch_args a;
  a.name = l_checkstring(L, 1);
  a.p = check_dense(L, 2, a.name, "preds", -1);
  a.t = check_dense(L, 3, a.name, "target", LT_I64);
  a.pf = a.p->dtype == LT_F32 ? lt_f32(a.p) : NULL;
  a.pi = a.p->dtype == LT_I64 ? lt_i64(a.p) : NULL;
  return a;
}

static int l_binary_counts(lua_State *L) {
  batch_args a = check_batch(L);
  double thr = l_checknumber(L, 4);
  lt_tensor *st = check_dense(L, 5, a.name, "state", LT_I64);
  int64_t nl = lt_numel(st) / 4, m = lt_numel(a.t);
  if (nl < 1 || lt_numel(st) != 4 * nl || m % nl || lt_numel(a.p) != m)
    return l_errorf(L, "%s: preds (%lld values), target (%lld) and state (%lld) do not match", a.name,
                    (long long)lt_numel(a.p), (long long)m, (long long)lt_numel(st));
  lt_mark_modified(st); /* the counts are added into the state */
  l_check(L, lt_metric_binary_counts(L_CTX(L), a.name, a.pf, a.pi, lt_i64(a.t), m / nl, nl, thr, lt_i64(st)));
  return 0;
}

/* The sample count n of a multiclass call, checked against the class count C of the state. */
static int64_t multiclass_rows(lua_State *L, const batch_args *a, int64_t C) {
  int64_t n = lt_numel(a->t), per = a->pf ? C : 1;
  if (C < 1 || lt_numel(a->p) != n * per)
    l_errorf(L, "%s: preds (%lld values) do not match target (%lld) and %lld classes", a->name,
             (long long)lt_numel(a->p), (long long)n, (long long)C);
  return n;
}

static int l_multiclass_stats(lua_State *L) {
  batch_args a = check_batch(L);
  lua_Number k = l_checknumber(L, 4);
  lt_tensor *st = check_dense(L, 5, a.name, "state", LT_I64);
  int64_t C = lt_numel(st) / 3;
  if (lt_numel(st) != 3 * C) return l_errorf(L, "%s: the state must hold 3 x C counts", a.name);
  int64_t n = multiclass_rows(L, &a, C);
  if (!(k >= 1 && k <= (lua_Number)C && k == floor(k)))
    return l_errorf(L, "%s: top_k must be an integer in 1..%lld, got %g", a.name, (long long)C, (double)k);
  if (a.pi && k != 1) return l_errorf(L, "%s: top_k > 1 needs preds as scores [N x C]", a.name);
  lt_mark_modified(st); /* the counts are added into the state */
  l_check(L, lt_metric_multiclass_stats(L_CTX(L), a.name, a.pf, a.pi, lt_i64(a.t), n, C, (int64_t)k, lt_i64(st)));
  return 0;
}

static int l_multiclass_confmat(lua_State *L) {
  batch_args a = check_batch(L);
  lt_tensor *st = check_dense(L, 4, a.name, "state", LT_I64);
  int64_t C = st->ndim == 2 ? st->shape[0] : 0;
  if (C < 1 || st->shape[1] != C) return l_errorf(L, "%s: the state must be a [C x C] matrix", a.name);
  int64_t n = multiclass_rows(L, &a, C);
  lt_mark_modified(st); /* the counts are added into the state */
  l_check(L, lt_metric_multiclass_confmat(L_CTX(L), a.name, a.pf, a.pi, lt_i64(a.t), n, C, lt_i64(st)));
  return 0;
}

void l_metrics_register(lua_State *L) {
  static const luaL_Reg funcs[] = { { "binary_counts", l_binary_counts },
                                    { "multiclass_stats", l_multiclass_stats },
                                    { "multiclass_confmat", l_multiclass_confmat },
                                    { NULL, NULL } };
  lua_newtable(L);
  l_setfuncs(L, funcs);
  lua_setfield(L, -2, "_metrics");
}
