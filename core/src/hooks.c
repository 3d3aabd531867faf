/* hooks.c — hook names and the per-kind tables of evaluation hooks (see lt_hooks.h). */
#include "lt_hooks.h"

#include <string.h>

#define LT_HOOK_NAME_(id, name) name,
const char *const lt_hook_names[LT_NHOOKS] = { LT_HOOK_LIST(LT_HOOK_NAME_) };
#undef LT_HOOK_NAME_

const char *const lt_kind_names[LT_NKINDS] = { "train", "validation", "test", "predict" };
const char *const lt_stage_names[4] = { "fit", "validate", "test", "predict" };

int lt_hook_from_name(const char *name) {
  for (int i = 0; i < LT_NHOOKS; i++)
    if (strcmp(lt_hook_names[i], name) == 0) return i;
  return -1;
}

static const lt_eval_hooks eval_hooks[LT_NKINDS] = {
  [LT_KIND_VAL] = { LT_HOOK_ON_VALIDATION_START, LT_HOOK_ON_VALIDATION_END, LT_HOOK_ON_VALIDATION_EPOCH_START,
                    LT_HOOK_ON_VALIDATION_EPOCH_END, LT_HOOK_ON_VALIDATION_BATCH_START, LT_HOOK_ON_VALIDATION_BATCH_END,
                    LT_HOOK_VALIDATION_STEP, LT_HOOK_VALIDATION_EPOCH_END, LT_HOOK_ON_VALIDATION_MODEL_EVAL,
                    LT_HOOK_ON_VALIDATION_MODEL_TRAIN },
  [LT_KIND_TEST] = { LT_HOOK_ON_TEST_START, LT_HOOK_ON_TEST_END, LT_HOOK_ON_TEST_EPOCH_START, LT_HOOK_ON_TEST_EPOCH_END,
                     LT_HOOK_ON_TEST_BATCH_START, LT_HOOK_ON_TEST_BATCH_END, LT_HOOK_TEST_STEP, LT_HOOK_TEST_EPOCH_END,
                     LT_HOOK_ON_TEST_MODEL_EVAL, LT_HOOK_ON_TEST_MODEL_TRAIN },
  [LT_KIND_PREDICT] = { LT_HOOK_ON_PREDICT_START, LT_HOOK_ON_PREDICT_END, LT_HOOK_ON_PREDICT_EPOCH_START,
                        LT_HOOK_ON_PREDICT_EPOCH_END, LT_HOOK_ON_PREDICT_BATCH_START, LT_HOOK_ON_PREDICT_BATCH_END,
                        LT_HOOK_PREDICT_STEP, LT_HOOK_PREDICT_EPOCH_END, LT_HOOK_ON_PREDICT_MODEL_EVAL,
                        LT_HOOK_ON_PREDICT_MODEL_TRAIN },
};

const lt_eval_hooks *lt_eval_hooks_of(lt_kind kind) {
  return kind >= LT_KIND_VAL && kind < LT_NKINDS ? &eval_hooks[kind] : NULL;
}
