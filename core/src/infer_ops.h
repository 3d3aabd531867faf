/*
 * infer_ops.h — the steps of lt_infer.h kept in files of their own (infer.c checks and dispatches to them).
 * Each check gets the step after the generic checks (sizes >= 0); each run allocates nothing.
 */
#ifndef LT_INFER_OPS_H
#define LT_INFER_OPS_H

#include "lt_infer.h"

/* infer_attention.c: strided copies and batched products (the pieces attention is made of) */
int lt_infer_check_strided(lt_ctx *c, const lt_infer_plan *p, const lt_infer_step *s);
void lt_infer_run_strided(const lt_infer_plan *p, const lt_infer_step *s);
int lt_infer_check_matmul(lt_ctx *c, const lt_infer_plan *p, const lt_infer_step *s);
void lt_infer_run_matmul(const lt_infer_plan *p, const lt_infer_step *s);

/* infer_layers.c: GroupNorm / InstanceNorm, ConvTranspose2d */
int lt_infer_check_groupnorm(lt_ctx *c, const lt_infer_plan *p, const lt_infer_step *s);
void lt_infer_run_groupnorm(const lt_infer_plan *p, const lt_infer_step *s);
int lt_infer_check_convt(lt_ctx *c, const lt_infer_plan *p, const lt_infer_step *s);
void lt_infer_run_convt(const lt_infer_plan *p, const lt_infer_step *s);

/* infer_seq.c: a recurrent layer over a whole sequence (bidirectional, projected) */
int lt_infer_check_seq(lt_ctx *c, const lt_infer_plan *p, const lt_infer_step *s);
void lt_infer_run_seq(const lt_infer_plan *p, const lt_infer_step *s);
/* infer.c: one cell step's state update from its gates (LT_INFER_CELL_* kind) */
void lt_infer_cell_update(int kind, const float *gi, const float *gh, float *h, float *c, float *hout, int64_t Hd);

/* infer.c: shared checks */
int lt_infer_check_buf_at_least(lt_ctx *c, const lt_infer_plan *p, const lt_infer_step *s, int b, int64_t numel,
                                const char *what);
int lt_infer_check_param(lt_ctx *c, const lt_infer_step *s, int k, const char *what, int64_t numel, int optional);
extern const char *const lt_infer_op_names[];

/* y[o] = b[o] + sum_i W[o, i] x[i] for o < O (b may be NULL) */
void lt_infer_matvec(const float *restrict W, const float *restrict x, const float *restrict b, int64_t I, int64_t O,
                     float *restrict y);

#endif
