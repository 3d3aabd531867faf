/*
 * infer_seq.c — one direction of one LSTM/GRU/RNN layer over a whole sequence (lt_infer.h, LT_INFER_SEQ): what a
 * bidirectional or projected (proj_size) recurrent module needs, since its backward direction reads the sequence
 * from its end. The state starts at zero on every run (a plan of such a module takes one whole sequence per call);
 * the cell arithmetic is run_cell's (lt_infer_cell_update in infer.c).
 */
#include <string.h>

#include "infer_ops.h"

static int64_t gates_of(int kind) { return kind == LT_INFER_CELL_LSTM ? 4 : kind == LT_INFER_CELL_GRU ? 3 : 1; }

/* floats of the state buffer: h [B x Hh], c [B x Hd], gates 2 G Hd, scratch Hd (Hh = proj or Hd) */
static int64_t state_size(const lt_infer_step *s) {
  int64_t B = s->geo[LT_INFER_SEQ_B], Hd = s->n_out, P = s->geo[LT_INFER_SEQ_PROJ];
  return B * ((P ? P : Hd) + Hd) + 2 * gates_of(s->act) * Hd + Hd;
}

int lt_infer_check_seq(lt_ctx *c, const lt_infer_plan *p, const lt_infer_step *s) {
  const int64_t *g = s->geo;
  int64_t T = g[LT_INFER_SEQ_T], B = g[LT_INFER_SEQ_B], I = s->n_in, Hd = s->n_out, P = g[LT_INFER_SEQ_PROJ];
  int64_t G = gates_of(s->act), Hh = P ? P : Hd;
  if (s->act < LT_INFER_CELL_LSTM || s->act > LT_INFER_CELL_RNN_RELU)
    return lt_fail(c, "lt.infer: unknown cell %d", s->act);
  if (T <= 0 || B <= 0 || I <= 0 || Hd <= 0 || P < 0 || (P && s->act != LT_INFER_CELL_LSTM))
    return lt_fail(c, "lt.infer: recurrent layer: bad geometry (T %lld, batch %lld, %lld -> %lld, proj %lld)",
                   (long long)T, (long long)B, (long long)I, (long long)Hd, (long long)P);
  for (int k = LT_INFER_SEQ_X_T; k <= LT_INFER_SEQ_OUT_OFF; k++)
    if (g[k] < 0) return lt_fail(c, "lt.infer: recurrent layer: negative stride or offset");
  int64_t last_in = (T - 1) * g[LT_INFER_SEQ_X_T] + (B - 1) * g[LT_INFER_SEQ_X_B] + I;
  int64_t last_out = g[LT_INFER_SEQ_OUT_OFF] + (T - 1) * g[LT_INFER_SEQ_OUT_T] + (B - 1) * g[LT_INFER_SEQ_OUT_B] + Hh;
  if (lt_infer_check_buf_at_least(c, p, s, s->in, last_in, "input") ||
      lt_infer_check_buf_at_least(c, p, s, s->out, last_out, "output") ||
      lt_infer_check_buf_at_least(c, p, s, (int)g[LT_INFER_SEQ_STATE], state_size(s), "state"))
    return LT_ERR;
  if (s->in == s->out || g[LT_INFER_SEQ_STATE] == s->in || g[LT_INFER_SEQ_STATE] == s->out)
    return lt_fail(c, "lt.infer: recurrent layer: its input, output and state must be different buffers");
  return lt_infer_check_param(c, s, 0, "weight_ih", G * Hd * I, 0) ||
         lt_infer_check_param(c, s, 1, "weight_hh", G * Hd * Hh, 0) ||
         lt_infer_check_param(c, s, 2, "bias_ih", G * Hd, 1) || lt_infer_check_param(c, s, 3, "bias_hh", G * Hd, 1) ||
         lt_infer_check_param(c, s, 4, "weight_hr", P * Hd, !P);
}

void lt_infer_run_seq(const lt_infer_plan *p, const lt_infer_step *s) {
  const int64_t *g = s->geo;
  int64_t T = g[LT_INFER_SEQ_T], B = g[LT_INFER_SEQ_B], I = s->n_in, Hd = s->n_out, P = g[LT_INFER_SEQ_PROJ];
  int64_t G = gates_of(s->act), Hh = P ? P : Hd;
  const float *x = lt_f32(p->bufs[s->in]), *Wih = lt_f32(s->t[0]), *Whh = lt_f32(s->t[1]);
  const float *bih = s->t[2] ? lt_f32(s->t[2]) : NULL, *bhh = s->t[3] ? lt_f32(s->t[3]) : NULL;
  const float *Whr = P ? lt_f32(s->t[4]) : NULL;
  float *state = lt_f32(p->bufs[g[LT_INFER_SEQ_STATE]]), *y = lt_f32(p->bufs[s->out]) + g[LT_INFER_SEQ_OUT_OFF];
  memset(state, 0, (size_t)state_size(s) * sizeof *state);
  float *h = state, *cs = h + B * Hh, *gi = cs + B * Hd, *gh = gi + G * Hd, *scratch = gh + G * Hd;
  for (int64_t k = 0; k < T; k++) {
    int64_t t = g[LT_INFER_SEQ_REVERSE] ? T - 1 - k : k;
    for (int64_t b = 0; b < B; b++) {
      float *hb = h + b * Hh, *cb = cs + b * Hd;
      lt_infer_matvec(Wih, x + t * g[LT_INFER_SEQ_X_T] + b * g[LT_INFER_SEQ_X_B], bih, I, G * Hd, gi);
      lt_infer_matvec(Whh, hb, bhh, Hh, G * Hd, gh);
      lt_infer_cell_update(s->act, gi, gh, hb, cb, P ? scratch : hb, Hd);
      if (P) lt_infer_matvec(Whr, scratch, NULL, Hd, P, hb);
      memcpy(y + t * g[LT_INFER_SEQ_OUT_T] + b * g[LT_INFER_SEQ_OUT_B], hb, (size_t)Hh * sizeof *y);
    }
  }
}
