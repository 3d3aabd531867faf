/*
 * test_metrics.c — the counting kernels of lt.metrics (core/src/metrics.c) without Lua: binary counts from
 * probabilities, logits and 0/1 labels; multiclass top-k stats against a brute-force count (the list path for
 * k <= 64 and the counting path above it), ties going to the lower class; the confusion matrix; and every
 * rejected batch leaving the state untouched, with its message.
 * Prints "ok - ..." / "not ok - ..." per check and a final "N passed, M failed".
 */
#include <string.h>

#include "check.h"
#include "lt_metrics.h"

static int same(const int64_t *a, const int64_t *b, int n) { return memcmp(a, b, (size_t)n * sizeof *a) == 0; }

/* tp, fp, fn per class of top-k predictions by brute force: class j is predicted when fewer than k classes
 * have a higher score or an equal score and a lower index */
static void brute_stats(const float *s, const int64_t *t, int64_t n, int64_t C, int64_t k, int64_t *st) {
  memset(st, 0, (size_t)(3 * C) * sizeof *st);
  for (int64_t i = 0; i < n; i++) {
    int hit = 0;
    for (int64_t j = 0; j < C; j++) {
      int64_t before = 0;
      for (int64_t q = 0; q < C; q++)
        if (s[i * C + q] > s[i * C + j] || (s[i * C + q] == s[i * C + j] && q < j)) before++;
      if (before >= k) continue;
      if (j == t[i] - 1) st[j]++, hit = 1;
      else st[C + j]++;
    }
    if (!hit) st[2 * C + t[i] - 1]++;
  }
}

static uint64_t rng = 88172645463325252ull;
static float next_score(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)(rng % 7) / 7.0f; /* few distinct values: many ties */
}

int main(void) {
  lt_ctx c;
  lt_ctx_init(&c);

  /* binary: probabilities with threshold 0.5 (strictly greater), then the same as logits */
  float p[] = { 0.2f, 0.9f, 0.5f, 0.7f };
  int64_t t[] = { 0, 1, 1, 0 }, counts[4] = { 0 };
  CHECK(lt_metric_binary_counts(&c, "Accuracy", p, NULL, t, 4, 1, 0.5, counts) == LT_OK, "binary counts");
  CHECK(same(counts, (int64_t[]){ 1, 1, 1, 1 }, 4), "binary: tp, fp, tn, fn (0.5 is not > 0.5)");
  float logits[] = { -2.0f, 3.0f, 0.1f, 1.5f };
  memset(counts, 0, sizeof counts);
  lt_metric_binary_counts(&c, "Accuracy", logits, NULL, t, 4, 1, 0.5, counts);
  CHECK(same(counts, (int64_t[]){ 2, 1, 1, 0 }, 4), "binary logits go through the sigmoid");
  int64_t labels[] = { 0, 1, 1, 1 }, ml[8] = { 0 };
  lt_metric_binary_counts(&c, "F1Score", NULL, labels, t, 2, 2, 0.5, ml);
  CHECK(same(ml, (int64_t[]){ 1, 0, 1, 0, 1, 1, 0, 0 }, 8), "multilabel [2 x 2] int labels, per label");

  /* rejected batches: the state stays as it was */
  int64_t bad_t[] = { 0, 2 }, before[4];
  memcpy(before, counts, sizeof counts);
  CHECK(lt_metric_binary_counts(&c, "Accuracy", p, NULL, bad_t, 2, 1, 0.5, counts) == LT_ERR &&
            strcmp(c.err, "Accuracy: target must hold 0 or 1, got 2 at position 2") == 0 && same(counts, before, 4),
        "binary target 2: error, state untouched");
  float nanp[] = { 0.5f, 0.0f / 0.0f };
  CHECK(lt_metric_binary_counts(&c, "Recall", nanp, NULL, t, 2, 1, 0.5, counts) == LT_ERR &&
            strcmp(c.err, "Recall: preds hold NaN at position 2") == 0 && same(counts, before, 4),
        "NaN preds: error, state untouched");

  /* multiclass top-k against brute force, both paths, with ties */
  enum { N = 40, CMAX = 70 };
  static float s[N * CMAX];
  int64_t tc[N];
  static int64_t st[3 * CMAX], ref[3 * CMAX];
  int64_t configs[][2] = { { 5, 1 }, { 5, 2 }, { 5, 4 }, { 70, 3 }, { 70, 65 } };
  for (int ci = 0; ci < 5; ci++) {
    int64_t C = configs[ci][0], k = configs[ci][1];
    for (int64_t i = 0; i < N * C; i++) s[i] = next_score();
    for (int64_t i = 0; i < N; i++) tc[i] = 1 + (int64_t)(rng % (uint64_t)C);
    memset(st, 0, sizeof st);
    int rc = lt_metric_multiclass_stats(&c, "Accuracy", s, NULL, tc, N, C, k, st);
    brute_stats(s, tc, N, C, k, ref);
    char what[96];
    snprintf(what, sizeof what, "multiclass stats C=%lld top_k=%lld match the brute-force count", (long long)C,
             (long long)k);
    CHECK(rc == LT_OK && same(st, ref, (int)(3 * C)), what);
  }
  /* a tie at the top goes to the lower class (argmax's first occurrence) */
  float tie[] = { 0.4f, 0.4f, 0.2f };
  int64_t t2[] = { 2 }, st3[9] = { 0 };
  lt_metric_multiclass_stats(&c, "Accuracy", tie, NULL, t2, 1, 3, 1, st3);
  CHECK(same(st3, (int64_t[]){ 0, 0, 0, 1, 0, 0, 0, 1, 0 }, 9), "tie at the top: class 1 predicted");
  int64_t t_bad[] = { 4 };
  CHECK(lt_metric_multiclass_stats(&c, "Accuracy", tie, NULL, t_bad, 1, 3, 1, st3) == LT_ERR &&
            strcmp(c.err, "Accuracy: target must hold classes 1..3 (1-based), got 4 at position 1") == 0,
        "class 4 of 3: error naming it");

  /* confusion matrix: rows = target, columns = prediction; int64 class preds */
  float sc[] = { 0.1f, 0.8f, 0.1f, 0.7f, 0.2f, 0.1f, 0.2f, 0.2f, 0.6f };
  int64_t tt[] = { 2, 1, 2 }, cm[9] = { 0 };
  lt_metric_multiclass_confmat(&c, "ConfusionMatrix", sc, NULL, tt, 3, 3, cm);
  CHECK(same(cm, (int64_t[]){ 1, 0, 0, 0, 1, 1, 0, 0, 0 }, 9), "confusion matrix from scores");
  int64_t pl[] = { 3, 3, 1 };
  lt_metric_multiclass_confmat(&c, "ConfusionMatrix", NULL, pl, tt, 3, 3, cm);
  CHECK(same(cm, (int64_t[]){ 1, 0, 1, 1, 1, 2, 0, 0, 0 }, 9), "confusion matrix adds int64 class preds");
  int64_t pl_bad[] = { 0, 1, 1 };
  int64_t cm_before[9];
  memcpy(cm_before, cm, sizeof cm);
  CHECK(lt_metric_multiclass_confmat(&c, "ConfusionMatrix", NULL, pl_bad, tt, 3, 3, cm) == LT_ERR &&
            strcmp(c.err, "ConfusionMatrix: preds must hold classes 1..3 (1-based), got 0 at position 1") == 0 &&
            same(cm, cm_before, 9),
        "class 0 in preds: error, matrix untouched");

  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
