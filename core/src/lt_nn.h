/*
 * lt_nn.h — neural-network kernels with their backward rules: convolution (im2col + GEMM), pooling,
 * batch and layer normalisation, embedding, dropout, and the fused losses.
 *
 *   lt_tensor *y = lt_nn_conv2d(c, x, w, b, 1, 1, 2, 2);          // x [N,C,H,W], w [O,C,kh,kw]
 *   lt_tensor *p = lt_nn_max_pool2d(c, y, 2, 2, 2, 2, 0, 0);
 *   lt_tensor *l = lt_nn_cross_entropy(c, logits, targets, NULL, LT_NO_IGNORE, 0.0, LT_REDUCE_MEAN);
 *
 * Same conventions as lt_ops.h: a new reference or NULL with the message in c->err; autograd nodes are
 * recorded when grad mode is on and an input requires grad. Index-valued tensors (targets, embedding
 * indices) are 0-based int64 here; messages print them 1-based, as Lua users see them.
 */
#ifndef LT_NN_H
#define LT_NN_H

#include "lt_ops.h"

typedef enum lt_reduction { LT_REDUCE_NONE = 0, LT_REDUCE_MEAN = 1, LT_REDUCE_SUM = 2 } lt_reduction;
#define LT_NO_IGNORE INT64_MIN

/* --- convolution and pooling (nn_conv.c, nn_pool.c) -------------------------------------------- */
/* x [N, C, H, W], w [O, C, kh, kw], b [O] or NULL -> [N, O, Ho, Wo] */
lt_tensor *lt_nn_conv2d(lt_ctx *c, lt_tensor *x, lt_tensor *w, lt_tensor *b, int sh, int sw, int ph, int pw);
/* conv2d followed by an activation in one node (lt_act of lt_ops.h; nn.Sequential fuses Conv2d, ReLU pairs) */
lt_tensor *lt_nn_conv2d_act(lt_ctx *c, lt_tensor *x, lt_tensor *w, lt_tensor *b, int sh, int sw, int ph, int pw,
                            lt_act act);
/* x [N, C, H, W]; floor or ceil mode (the last window starts inside the input or its left padding); padding is
 * -inf for max, counted (count_include_pad) for avg */
lt_tensor *lt_nn_max_pool2d(lt_ctx *c, lt_tensor *x, int kh, int kw, int sh, int sw, int ph, int pw, int ceil_mode);
/* the backward of every max pool (nn_pool.c; nn_pool_adaptive.c uses it too): saved[0] holds each output's
 * input cell, int64 [N x C x HO x WO] positions in its plane (-1: an empty window, no gradient) */
int lt_nn_max_pool_backward(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin);
/* max pooling over dilated windows (cells dh, dw apart; PyTorch's dilation) */
lt_tensor *lt_nn_max_pool2d_dilated(lt_ctx *c, lt_tensor *x, int kh, int kw, int sh, int sw, int ph, int pw, int dh,
                                    int dw, int ceil_mode);
lt_tensor *lt_nn_avg_pool2d(lt_ctx *c, lt_tensor *x, int kh, int kw, int sh, int sw, int ph, int pw,
                            int count_include_pad, int ceil_mode);

/* --- vision: grouped/dilated and transposed convolution, adaptive pooling, group norm ----------------------
 * (nn_conv_general.c, nn_pool_adaptive.c, nn_group_norm.c). stride, padding, dilation: {h, w} pairs. */
/* w [O, C/groups, kh, kw]; dilation 1 with one group is lt_nn_conv2d */
lt_tensor *lt_nn_conv2d_ex(lt_ctx *c, lt_tensor *x, lt_tensor *w, lt_tensor *b, const int *stride, const int *padding,
                           const int *dilation, int groups);
/* x [N, Cin, H, W], w [Cin, Cout/groups, kh, kw], b [Cout] or NULL -> [N, Cout, HO, WO],
 * HO = (H - 1)*stride - 2*padding + dilation*(kh - 1) + output_padding + 1 */
lt_tensor *lt_nn_conv_transpose2d(lt_ctx *c, lt_tensor *x, lt_tensor *w, lt_tensor *b, const int *stride,
                                  const int *padding, const int *output_padding, const int *dilation, int groups);
/* x [N, C, H, W] -> [N, C, oh, ow]; the max form hands out its 0-based flat plane indices when indices != NULL */
lt_tensor *lt_nn_adaptive_avg_pool2d(lt_ctx *c, lt_tensor *x, int64_t oh, int64_t ow);
lt_tensor *lt_nn_adaptive_max_pool2d(lt_ctx *c, lt_tensor *x, int64_t oh, int64_t ow, lt_tensor **indices);
/* x [N, C, ...] normalised per (item, group of C/groups channels); weight/bias [C] or NULL; running_mean/var
 * [groups] or NULL: updated in place with the batch average of the group statistics (unbiased variance) */
lt_tensor *lt_nn_group_norm(lt_ctx *c, lt_tensor *x, int64_t groups, lt_tensor *weight, lt_tensor *bias, double eps,
                            lt_tensor *running_mean, lt_tensor *running_var, double momentum);

/* --- regularisation and normalisation (nn_dropout.c, nn_norm.c) -------------------------------- */
/* Inverted dropout with a mask drawn from c->rng; training 0 or p 0 returns x itself (retained). */
lt_tensor *lt_nn_dropout(lt_ctx *c, lt_tensor *x, double p, int training);
/* x [N, C, ...]; running_mean/var [C] (may be NULL when training: no tracking); weight/bias [C] or NULL.
 * Training: batch statistics, running stats updated in place with momentum and the unbiased variance. */
lt_tensor *lt_nn_batch_norm(lt_ctx *c, lt_tensor *x, lt_tensor *running_mean, lt_tensor *running_var, lt_tensor *weight,
                            lt_tensor *bias, int training, double momentum, double eps);
/* Normalises over the last k dims; weight/bias have those dims' shape (or are NULL). */
lt_tensor *lt_nn_layer_norm(lt_ctx *c, lt_tensor *x, int k, lt_tensor *weight, lt_tensor *bias, double eps);
/* A norm's optional per-channel (or per-group: per = "group") vector t must be float32 [n]; the error names op, what,
 * the shapes of t and of the input x. LT_OK when t is NULL. */
int lt_nn_check_norm_vec(lt_ctx *c, const char *op, const char *what, const lt_tensor *t, int64_t n, const char *per,
                         const lt_tensor *x);
/* idx int64 (0-based) of any shape, w [n, d] -> [idx shape..., d]; backward scatter-adds into w. */
lt_tensor *lt_nn_embedding(lt_ctx *c, lt_tensor *idx, lt_tensor *w);
/* the same with a padding row (0-based, or -1 for none) that receives no gradient */
lt_tensor *lt_nn_embedding_pad(lt_ctx *c, lt_tensor *idx, lt_tensor *w, int64_t padding_idx);

/* --- recurrent layers (nn_rnn.c) ---------------------------------------------------------------- */
typedef enum { LT_RNN_TANH, LT_RNN_RELU, LT_RNN_GRU, LT_RNN_LSTM } lt_rnn_mode;
/* One direction of one layer over a sequence: xg [T, B, G*H] = x W_ih^T + b_ih (G = 1 RNN, 3 GRU r,z,n, 4 LSTM
 * i,f,g,o), w_hh [G*H, P], b_hh [G*H] or NULL, h0 [B, P], c0 [B, H] (LSTM only), w_hr [P, H] (LSTM projection)
 * or NULL (P = H). Returns a flat tensor: outputs [T, B, P], then (LSTM) the last cell state [B, H]. */
lt_tensor *lt_nn_rnn_layer(lt_ctx *c, lt_rnn_mode mode, lt_tensor *xg, lt_tensor *w_hh, lt_tensor *b_hh, lt_tensor *h0,
                           lt_tensor *c0, lt_tensor *w_hr, int reverse);

/* --- losses (nn_loss.c) ------------------------------------------------------------------------ */
/* logits [N, C] or [N, C, d...], target int64 0-based [N] / [N, d...]; weight [C] or NULL;
 * ignore_index 0-based or LT_NO_IGNORE. log-softmax + NLL in one pass. */
lt_tensor *lt_nn_cross_entropy(lt_ctx *c, lt_tensor *logits, lt_tensor *target, lt_tensor *weight, int64_t ignore_index,
                               double label_smoothing, lt_reduction red);
lt_tensor *lt_nn_nll_loss(lt_ctx *c, lt_tensor *logp, lt_tensor *target, lt_tensor *weight, int64_t ignore_index,
                          lt_reduction red);
lt_tensor *lt_nn_mse_loss(lt_ctx *c, lt_tensor *x, lt_tensor *y, lt_reduction red);
lt_tensor *lt_nn_l1_loss(lt_ctx *c, lt_tensor *x, lt_tensor *y, lt_reduction red);
/* stable max(x,0) - x*y + log(1+exp(-|x|)); pos_weight broadcast over the last dim, or NULL */
lt_tensor *lt_nn_bce_with_logits(lt_ctx *c, lt_tensor *x, lt_tensor *y, lt_tensor *pos_weight, lt_reduction red);
/* binary_cross_entropy of probabilities x in [0, 1] (logs clamped at -100); smooth_l1 (beta >= 0; 0 is l1) and
 * huber (delta > 0) losses of x - y */
lt_tensor *lt_nn_binary_cross_entropy(lt_ctx *c, lt_tensor *x, lt_tensor *y, lt_reduction red);
lt_tensor *lt_nn_smooth_l1_loss(lt_ctx *c, lt_tensor *x, lt_tensor *y, double beta, lt_reduction red);
lt_tensor *lt_nn_huber_loss(lt_ctx *c, lt_tensor *x, lt_tensor *y, double delta, lt_reduction red);

#endif
