/*
 * lt_optim.h — optimizers as C objects: SGD, Adam, AdamW, RMSprop (optim.c) and Adagrad, Adadelta, Adamax,
 * NAdam, RAdam, ASGD (optim_adaptive.c) with PyTorch 1.13's update rules, one fused pass per parameter (read p, g and the state once, write p and the state once).
 *
 *   lt_optim_hparams h;
 *   lt_optim_defaults(LT_OPTIM_ADAM, &h);
 *   h.lr = 1e-3;
 *   lt_optimizer *o = lt_optim_new(c, LT_OPTIM_ADAM, &h);       // h: the defaults of later groups
 *   lt_optim_add_param_group(c, o, &h, nparams, params);        // params are retained
 *   for (...) {
 *     lt_optim_zero_grad(c, o, 0);                               // in place, keeps the grad buffers
 *     ... forward, lt_backward ...
 *     lt_optim_step(c, o);                                       // params without a grad are skipped
 *   }
 *   lt_optim_free(o);
 *
 * The step never records autograd and works on parameters that require grad. Per-parameter state
 * (momentum_buffer, exp_avg, ...) is allocated on the first step that sees the parameter's grad, as in
 * PyTorch; state_dict-style accessors let the binding save and restore it.
 */
#ifndef LT_OPTIM_H
#define LT_OPTIM_H

#include "lt_tensor.h"

typedef enum lt_optim_kind {
  LT_OPTIM_SGD = 0,
  LT_OPTIM_ADAM,
  LT_OPTIM_ADAMW,
  LT_OPTIM_RMSPROP,
  LT_OPTIM_ADAGRAD,
  LT_OPTIM_ADADELTA,
  LT_OPTIM_ADAMAX,
  LT_OPTIM_NADAM,
  LT_OPTIM_RADAM,
  LT_OPTIM_ASGD,
  LT_OPTIM_NKINDS
} lt_optim_kind;

/* Hyper-parameters of one param group (each kind reads the ones it knows). */
typedef struct lt_optim_hparams {
  double lr;
  double momentum;                  /* SGD, RMSprop */
  double dampening;                 /* SGD */
  double weight_decay;              /* all (AdamW: decoupled) */
  double beta1, beta2;              /* Adam, AdamW, Adamax, NAdam, RAdam */
  double eps;                       /* all but SGD and ASGD */
  double alpha;                     /* RMSprop; ASGD (the eta decay power) */
  double lr_decay;                  /* Adagrad */
  double initial_accumulator_value; /* Adagrad */
  double rho;                       /* Adadelta */
  double momentum_decay;            /* NAdam */
  double lambd, t0;                 /* ASGD */
  int nesterov;                     /* SGD */
  int amsgrad;                      /* Adam, AdamW */
  int centered;                     /* RMSprop */
  int maximize;                     /* all */
} lt_optim_hparams;

/* Per-parameter state buffers, in the order state_dict lists them. */
typedef enum lt_optim_buf {
  LT_OPTIM_MOMENTUM_BUFFER = 0,
  LT_OPTIM_EXP_AVG,
  LT_OPTIM_EXP_AVG_SQ,
  LT_OPTIM_MAX_EXP_AVG_SQ,
  LT_OPTIM_SQUARE_AVG,
  LT_OPTIM_GRAD_AVG,
  LT_OPTIM_SUM,
  LT_OPTIM_ACC_DELTA,
  LT_OPTIM_EXP_INF,
  LT_OPTIM_AX,
  LT_OPTIM_NBUFS
} lt_optim_buf;

/* Per-parameter scalar state besides step (PyTorch keeps them as 0-dim float32 tensors). */
typedef enum lt_optim_scalar { LT_OPTIM_MU_PRODUCT = 0, LT_OPTIM_ETA, LT_OPTIM_MU, LT_OPTIM_NSCALARS } lt_optim_scalar;

typedef struct lt_optim_state {
  int initialized;                  /* the parameter has been stepped at least once (it has state) */
  double step;                      /* steps taken (every kind but SGD) */
  lt_tensor *buf[LT_OPTIM_NBUFS];   /* NULL when absent; contiguous, the parameter's shape */
  double scalar[LT_OPTIM_NSCALARS]; /* NAdam: mu_product; ASGD: eta, mu (float32 values, as PyTorch's) */
} lt_optim_state;

typedef struct lt_optimizer lt_optimizer;

const char *lt_optim_kind_name(lt_optim_kind k);     /* "SGD", "Adam", "AdamW", "RMSprop" */
int lt_optim_kind_from_name(const char *name);       /* -1 if unknown */
const char *lt_optim_buf_name(lt_optim_buf b);       /* "momentum_buffer", "exp_avg", ... */
const char *lt_optim_scalar_name(lt_optim_scalar s); /* "mu_product", "eta", "mu" */
/* 1 when kind k keeps state buffer b / scalar s (what its state_dict lists). */
int lt_optim_kind_has_buf(lt_optim_kind k, lt_optim_buf b);
int lt_optim_kind_has_scalar(lt_optim_kind k, lt_optim_scalar s);
/* 1 when kind k uses hyper-parameter `name` ("lr", "momentum", "betas", ...). */
int lt_optim_has_hparam(lt_optim_kind k, const char *name);
/* The hyper-parameter names kind k uses, NULL-terminated, in PyTorch's constructor order. */
const char *const *lt_optim_hparam_names(lt_optim_kind k);

/* PyTorch's defaults for the kind (lr: SGD has no default in PyTorch; 1e-3 here as a placeholder). */
void lt_optim_defaults(lt_optim_kind k, lt_optim_hparams *h);
/* PyTorch's constructor checks (invalid lr, momentum, eps, betas, alpha, weight_decay, nesterov). */
int lt_optim_check_hparams(lt_ctx *c, lt_optim_kind k, const lt_optim_hparams *h);

lt_optimizer *lt_optim_new(lt_ctx *c, lt_optim_kind k, const lt_optim_hparams *defaults);
void lt_optim_free(lt_optimizer *o);
lt_optim_kind lt_optim_kind_of(const lt_optimizer *o);
const lt_optim_hparams *lt_optim_get_defaults(const lt_optimizer *o);

/* Adds a group of n float32 leaf tensors (retained). Checks h, the dtypes, leafness, and that no
 * parameter is already in a group. */
int lt_optim_add_param_group(lt_ctx *c, lt_optimizer *o, const lt_optim_hparams *h, int n, lt_tensor *const *params);

/* One update of every parameter that has a grad. */
int lt_optim_step(lt_ctx *c, lt_optimizer *o);
/* set_to_none: drop the grads; otherwise zero them in place (no allocation). */
int lt_optim_zero_grad(lt_ctx *c, lt_optimizer *o, int set_to_none);

/* --- accessors (param_groups, state_dict) -------------------------------------------------------- */
int lt_optim_num_groups(const lt_optimizer *o);
lt_optim_hparams *lt_optim_group_hparams(lt_optimizer *o, int g); /* writable; NULL if out of range */
int lt_optim_group_size(const lt_optimizer *o, int g);
lt_tensor *lt_optim_group_param(const lt_optimizer *o, int g, int i); /* borrowed */
lt_optim_state *lt_optim_param_state(lt_optimizer *o, int g, int i);  /* borrowed */
int lt_optim_num_params(const lt_optimizer *o);                       /* over all groups */
/* Replaces state buffer b of parameter (g, i) by a contiguous copy of t (shape must match the
 * parameter's); t NULL removes it. Marks the state initialized. */
int lt_optim_set_state_buf(lt_ctx *c, lt_optimizer *o, int g, int i, lt_optim_buf b, const lt_tensor *t);
/* Forgets every parameter's state (steps and buffers). */
void lt_optim_clear_state(lt_optimizer *o);

/* --- gradient clipping (optim_clip.c) ------------------------------------------------------------ */
typedef enum lt_clip_algo { LT_CLIP_NORM = 0, LT_CLIP_VALUE } lt_clip_algo;
/* The default gradient clipping over n parameters' grads (Lightning's clip_gradients): algo LT_CLIP_VALUE clamps
 * each element to [-val, val], LT_CLIP_NORM scales them all when their total 2-norm is above val; val <= 0: off. */
int lt_clip_gradients(lt_ctx *c, int n, lt_tensor *const *params, double val, int algo);

#endif
