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

/* A convolution step's geometry (LT_INFER_GEO_*) unpacked: Conv2d and ConvTranspose2d read the same fields */
typedef struct {
  int64_t N, Ci, H, W, Co, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW, G;
  int64_t Cig, Cog; /* channels per group: Ci / G, Co / G */
} lt_infer_conv_geo;

static inline lt_infer_conv_geo lt_infer_conv_geo_of(const int64_t *g) {
  return (lt_infer_conv_geo){ g[LT_INFER_GEO_N],
                              g[LT_INFER_GEO_CIN],
                              g[LT_INFER_GEO_H],
                              g[LT_INFER_GEO_W],
                              g[LT_INFER_GEO_COUT],
                              g[LT_INFER_GEO_OH],
                              g[LT_INFER_GEO_OW],
                              g[LT_INFER_GEO_KH],
                              g[LT_INFER_GEO_KW],
                              g[LT_INFER_GEO_SH],
                              g[LT_INFER_GEO_SW],
                              g[LT_INFER_GEO_PH],
                              g[LT_INFER_GEO_PW],
                              g[LT_INFER_GEO_DH],
                              g[LT_INFER_GEO_DW],
                              g[LT_INFER_GEO_GROUPS],
                              g[LT_INFER_GEO_CIN] / g[LT_INFER_GEO_GROUPS],
                              g[LT_INFER_GEO_COUT] / g[LT_INFER_GEO_GROUPS] };
}

/* infer.c: shared checks */
int lt_infer_check_buf_at_least(lt_ctx *c, const lt_infer_plan *p, const lt_infer_step *s, int b, int64_t numel,
                                const char *what);
int lt_infer_check_param(lt_ctx *c, const lt_infer_step *s, int k, const char *what, int64_t numel, int optional);
extern const char *const lt_infer_op_names[];

/* y[o] = b[o] + sum_i W[o, i] x[i] for o < O (b may be NULL) */
void lt_infer_matvec(const float *restrict W, const float *restrict x, const float *restrict b, int64_t I, int64_t O,
                     float *restrict y);

#endif
