/*
 * metrics.c — the counting kernels of lt.metrics (lt_metrics.h): stat scores (tp, fp, tn, fn) of binary and
 * multilabel predictions, per-class stats of multiclass top-k predictions, and the multiclass confusion
 * matrix. Each validates the whole batch before it adds anything, so a rejected batch leaves the state as it
 * was (the metric stays usable after the error).
 */
#include <math.h>

#include "lt_metrics.h"

static int check_binary_target(lt_ctx *c, const char *name, const int64_t *target, int64_t m) {
  for (int64_t i = 0; i < m; i++)
    if (target[i] != 0 && target[i] != 1)
      return lt_fail(c, "%s: target must hold 0 or 1, got %lld at position %lld", name, (long long)target[i],
                     (long long)(i + 1));
  return LT_OK;
}

static int check_classes(lt_ctx *c, const char *name, const char *what, const int64_t *v, int64_t n, int64_t C) {
  for (int64_t i = 0; i < n; i++)
    if (v[i] < 1 || v[i] > C)
      return lt_fail(c, "%s: %s must hold classes 1..%lld (1-based), got %lld at position %lld", name, what,
                     (long long)C, (long long)v[i], (long long)(i + 1));
  return LT_OK;
}

int lt_metric_binary_counts(lt_ctx *c, const char *name, const float *pf, const int64_t *pi, const int64_t *target,
                            int64_t n, int64_t L, double threshold, int64_t *counts) {
  int64_t m = n * L;
  if (check_binary_target(c, name, target, m)) return LT_ERR;
  int logits = 0;
  if (pi) {
    for (int64_t i = 0; i < m; i++)
      if (pi[i] != 0 && pi[i] != 1)
        return lt_fail(c, "%s: integer preds must hold 0 or 1, got %lld at position %lld", name, (long long)pi[i],
                       (long long)(i + 1));
  } else {
    for (int64_t i = 0; i < m; i++) {
      if (isnan(pf[i])) return lt_fail(c, "%s: preds hold NaN at position %lld", name, (long long)(i + 1));
      if (pf[i] < 0 || pf[i] > 1) logits = 1; /* torchmetrics: any value outside [0, 1] means logits */
    }
  }
  for (int64_t i = 0; i < m; i++) {
    int p;
    if (pi) {
      p = pi[i] == 1;
    } else {
      float x = logits ? 1.0f / (1.0f + expf(-pf[i])) : pf[i];
      p = (double)x > threshold;
    }
    int64_t *cl = counts + 4 * (i % L);
    cl[target[i] ? (p ? 0 : 3) : (p ? 1 : 2)]++; /* tp, fn | fp, tn */
  }
  return LT_OK;
}

/* 1 when class a ranks before class b in row s (higher score; a tie goes to the lower class) */
static int ranks_before(const float *s, int64_t a, int64_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); }

static int check_scores(lt_ctx *c, const char *name, const float *pf, int64_t m) {
  for (int64_t i = 0; i < m; i++)
    if (isnan(pf[i])) return lt_fail(c, "%s: preds hold NaN at position %lld", name, (long long)(i + 1));
  return LT_OK;
}

enum { TOPK_FAST = 64 }; /* top_k up to this uses a list on the stack */

static int64_t argmax_row(const float *s, int64_t C) {
  int64_t best = 0;
  for (int64_t j = 1; j < C; j++)
    if (ranks_before(s, j, best)) best = j;
  return best;
}

int lt_metric_multiclass_stats(lt_ctx *c, const char *name, const float *pf, const int64_t *pi, const int64_t *target,
                               int64_t n, int64_t C, int64_t k, int64_t *stats) {
  if (check_classes(c, name, "target", target, n, C)) return LT_ERR;
  if (pi && check_classes(c, name, "preds", pi, n, C)) return LT_ERR;
  if (pf && check_scores(c, name, pf, n * C)) return LT_ERR;
  int64_t *tp = stats, *fp = stats + C, *fn = stats + 2 * C;
  for (int64_t i = 0; i < n; i++) {
    int64_t t = target[i] - 1;
    if (pi || k == 1) {
      int64_t p = pi ? pi[i] - 1 : argmax_row(pf + i * C, C);
      if (p == t) tp[t]++;
      else fp[p]++, fn[t]++;
      continue;
    }
    const float *s = pf + i * C;
    int hit = 0;
    if (k <= TOPK_FAST) {
      /* the k best classes by insertion into a ranked list: O(C k) per row */
      int64_t top[TOPK_FAST], m = 0;
      for (int64_t j = 0; j < C; j++) {
        if (m == k && !ranks_before(s, j, top[m - 1])) continue;
        int64_t at = m < k ? m++ : k - 1;
        while (at > 0 && ranks_before(s, j, top[at - 1])) top[at] = top[at - 1], at--;
        top[at] = j;
      }
      for (int64_t q = 0; q < m; q++) {
        if (top[q] == t) tp[t]++, hit = 1;
        else fp[top[q]]++;
      }
    } else {
      /* class j is among the k predicted when fewer than k classes rank before it (no scratch memory) */
      for (int64_t j = 0; j < C; j++) {
        int64_t before = 0;
        for (int64_t q = 0; q < C && before < k; q++)
          if (q != j && ranks_before(s, q, j)) before++;
        if (before >= k) continue;
        if (j == t) tp[j]++, hit = 1;
        else fp[j]++;
      }
    }
    if (!hit) fn[t]++;
  }
  return LT_OK;
}

int lt_metric_multiclass_confmat(lt_ctx *c, const char *name, const float *pf, const int64_t *pi, const int64_t *target,
                                 int64_t n, int64_t C, int64_t *confmat) {
  if (check_classes(c, name, "target", target, n, C)) return LT_ERR;
  if (pi && check_classes(c, name, "preds", pi, n, C)) return LT_ERR;
  if (pf && check_scores(c, name, pf, n * C)) return LT_ERR;
  for (int64_t i = 0; i < n; i++) {
    int64_t p = pi ? pi[i] - 1 : argmax_row(pf + i * C, C);
    confmat[(target[i] - 1) * C + p]++;
  }
  return LT_OK;
}
