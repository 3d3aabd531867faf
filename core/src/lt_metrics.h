/*
 * lt_metrics.h — the counting behind lt.metrics (lua/lutra/metrics/): one pass over a batch adds its
 * counts to a metric's fixed-size state, with no allocation, so an epoch of updates costs one C call per
 * batch and the state never grows.
 *
 *   int64_t counts[4 * L] = {0};                       // per label: tp, fp, tn, fn
 *   lt_metric_binary_counts(c, "Accuracy", p, NULL, t, n, L, 0.5, counts);
 *
 * Indices (labels, classes) are 1-based in what the caller passes, as lutra's are; a value out of range is
 * an error naming the metric, the value and its position.
 */
#ifndef LT_METRICS_H
#define LT_METRICS_H

#include <stdint.h>

#include "lt_ctx.h"

/* Binary and multilabel: preds [n x L] as float32 scores (pf: probabilities, or logits when one of the
 * batch's values lies outside [0, 1], which then go through the sigmoid) compared with `> threshold`, or
 * as int64 0/1 labels (pi); target [n x L] int64 0/1. counts[4*l + 0..3] += tp, fp, tn, fn of label l. */
int lt_metric_binary_counts(lt_ctx *c, const char *name, const float *pf, const int64_t *pi, const int64_t *target,
                            int64_t n, int64_t L, double threshold, int64_t *counts);

/* Multiclass: preds [n x C] float32 scores (pf) or [n] int64 labels 1..C (pi); target [n] int64 1..C. A
 * sample predicts its k highest scores (ties: the lower class first, as argmax); with labels k must be 1.
 * stats[0*C + j], stats[1*C + j], stats[2*C + j] += tp, fp, fn of class j. */
int lt_metric_multiclass_stats(lt_ctx *c, const char *name, const float *pf, const int64_t *pi, const int64_t *target,
                               int64_t n, int64_t C, int64_t k, int64_t *stats);

/* Multiclass confusion matrix: confmat[C x C] (row = target, column = the top-scoring class) += counts. */
int lt_metric_multiclass_confmat(lt_ctx *c, const char *name, const float *pf, const int64_t *pi, const int64_t *target,
                                 int64_t n, int64_t C, int64_t *confmat);

#endif
