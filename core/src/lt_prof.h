/*
 * lt_prof.h — the profiler's data: exclusive wall time per action (Trainer{profiler="simple"}), and time per
 * autograd kernel (profiler="advanced").
 *
 * Actions nest (a callback's optimizer_step runs the closure: training_step, backward ...). The profiler keeps
 * a stack of the running actions and charges each stretch of wall time to the innermost one only, so no row
 * contains another and the rows (with row 0, the loop's own time between actions) add up to the wall time
 * between lt_prof_start and lt_prof_stop.
 *
 *   lt_prof *p = lt_prof_new();
 *   int r = lt_prof_action(p, "[Callback]Printer.on_train_batch_end");   // find or add (once per name)
 *   lt_prof_start(p);
 *   lt_prof_enter(p, LT_PROF_TRAINING_STEP); ... lt_prof_exit(p);
 *   lt_prof_stop(p);
 *
 * The loops (lt_loop.h) and the hook dispatch (core/bind/l_loop.c) hold a pointer that is NULL when profiling
 * is off: each timing point is one test of that pointer.
 */
#ifndef LT_PROF_H
#define LT_PROF_H

#include <stdint.h>

/* The actions of the loops' own phases: X(ID, "name"); rows 0.. in this order. */
#define LT_PROF_FIXED_LIST(X)                                      \
  X(OTHER, "[Loop] other")                                         \
  X(TRAIN_NEXT, "[TrainingEpochLoop].train_dataloader_next")       \
  X(VAL_NEXT, "[EvaluationEpochLoop].val_dataloader_next")         \
  X(TEST_NEXT, "[EvaluationEpochLoop].test_dataloader_next")       \
  X(PREDICT_NEXT, "[PredictionEpochLoop].predict_dataloader_next") \
  X(TRAINING_STEP, "[Strategy].training_step")                     \
  X(VALIDATION_STEP, "[Strategy].validation_step")                 \
  X(TEST_STEP, "[Strategy].test_step")                             \
  X(PREDICT_STEP, "[Strategy].predict_step")                       \
  X(BACKWARD, "[Strategy].backward")                               \
  X(OPTIMIZER_STEP, "[Strategy].optimizer_step")                   \
  X(ZERO_GRAD, "[Strategy].optimizer_zero_grad")                   \
  X(CLIP_GRADIENTS, "[Strategy].clip_gradients")

#define LT_PROF_ENUM_(id, name) LT_PROF_##id,
typedef enum lt_prof_fixed { LT_PROF_FIXED_LIST(LT_PROF_ENUM_) LT_PROF_NFIXED } lt_prof_fixed;
#undef LT_PROF_ENUM_

#define LT_PROF_DEPTH 64 /* deeper nesting is charged to the action at this depth */
#define LT_PROF_NAME 120

typedef struct lt_prof_row {
  char name[LT_PROF_NAME];
  int64_t count; /* times entered (row 0: times the profiler was started) */
  double total;  /* exclusive seconds */
} lt_prof_row;

typedef struct lt_prof {
  lt_prof_row *rows;
  int nrows, cap;
  int stack[LT_PROF_DEPTH];
  int depth;   /* actions running; entries past LT_PROF_DEPTH are counted, not stacked */
  double mark; /* when the current stretch began */
  int running;
} lt_prof;

/* NULL when out of memory. The fixed rows exist from the start. */
lt_prof *lt_prof_new(void);
void lt_prof_free(lt_prof *p);
/* The row of an action, added when new (a longer name is cut); -1 when out of memory. */
int lt_prof_action(lt_prof *p, const char *name);
/* Starts / stops the clock (a stopped profiler charges nothing; stop also drops the stack). */
void lt_prof_start(lt_prof *p);
void lt_prof_stop(lt_prof *p);
void lt_prof_enter(lt_prof *p, int row);
void lt_prof_exit(lt_prof *p);
/* Counts and times back to zero (the rows stay). */
void lt_prof_reset(lt_prof *p);

/* ---- time per autograd kernel (lt_ctx.op_prof; the backward engine in autograd.c adds to it) ---------- */
typedef struct lt_op_row {
  const char *op; /* the node's op name (a string literal of the core) */
  int64_t count;
  double total;
} lt_op_row;

#define LT_OP_PROF_MAX 256 /* distinct ops counted; later ones go to `dropped` */
typedef struct lt_op_prof {
  lt_op_row rows[LT_OP_PROF_MAX];
  int nrows;
  int64_t dropped;
} lt_op_prof;

/* The table holds no heap memory (a host can keep it anywhere: the Lua binding keeps it in a userdata). */
void lt_op_prof_init(lt_op_prof *p);
/* Adds one call of op's kernel taking `seconds`. */
void lt_op_prof_add(lt_op_prof *p, const char *op, double seconds);

double lt_prof_now(void); /* monotonic seconds */

#endif
