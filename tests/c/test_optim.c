/* test_optim.c — the optimizer core without Lua, as the training loops use it: build, step, zero_grad,
 * state accessors, errors, threaded steps equal to single-threaded ones, no leaked tensors. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lt_optim.h"
#include "lt_ops.h"

#include "check.h"

static lt_tensor *from(lt_ctx *c, int64_t n, const float *v) {
  lt_tensor *t = lt_tensor_new(c, LT_F32, 1, &n);
  memcpy(lt_f32(t), v, sizeof(float) * (size_t)n);
  return t;
}

int main(void) {
  lt_ctx ctx, *c = &ctx;
  lt_ctx_init(c);
  int64_t live0 = lt_tensor_live_count();

  /* SGD with momentum: first step buf = g, then buf = m*buf + g */
  {
    lt_tensor *p = from(c, 2, (float[]){ 1, 2 });
    p->requires_grad = 1;
    lt_optim_hparams h;
    lt_optim_defaults(LT_OPTIM_SGD, &h);
    h.lr = 0.5;
    h.momentum = 0.5;
    lt_optimizer *o = lt_optim_new(c, LT_OPTIM_SGD, &h);
    CHECK(o && lt_optim_add_param_group(c, o, &h, 1, &p) == LT_OK, "SGD built");
    CHECK(lt_optim_step(c, o) == LT_OK && lt_f32(p)[0] == 1, "a param without grad is skipped");
    p->grad = from(c, 2, (float[]){ 2, 4 });
    float *gp = lt_f32(p->grad);
    CHECK(lt_optim_step(c, o) == LT_OK, "step in grad mode on a param that requires grad");
    CHECK(lt_f32(p)[0] == 0 && lt_f32(p)[1] == 0, "first step: p -= lr*g");
    CHECK(c->grad_enabled == 1 && p->grad_fn == NULL, "grad mode restored, nothing recorded");
    CHECK(lt_optim_step(c, o) == LT_OK && lt_f32(p)[0] == -1.5f && lt_f32(p)[1] == -3, "second step: buf = m*buf + g");
    lt_optim_state *s = lt_optim_param_state(o, 0, 0);
    CHECK(s && s->initialized && lt_f32(s->buf[LT_OPTIM_MOMENTUM_BUFFER])[0] == 3, "momentum_buffer readable");
    CHECK(lt_optim_zero_grad(c, o, 0) == LT_OK && p->grad && lt_f32(p->grad) == gp && gp[0] == 0 && gp[1] == 0,
          "zero_grad zeroes in place, same buffer");
    CHECK(lt_optim_zero_grad(c, o, 1) == LT_OK && p->grad == NULL, "zero_grad(set_to_none) drops the grad");
    lt_optim_hparams *gh = lt_optim_group_hparams(o, 0);
    gh->lr = 0.25;
    CHECK(lt_optim_group_hparams(o, 0)->lr == 0.25 && lt_optim_num_params(o) == 1, "group hyper-parameters writable");
    lt_tensor *bad = from(c, 3, (float[]){ 1, 2, 3 });
    CHECK(lt_optim_set_state_buf(c, o, 0, 0, LT_OPTIM_MOMENTUM_BUFFER, bad) == LT_ERR &&
              strstr(c->err, "state momentum_buffer of parameter 1 in group 1 has shape [3], the parameter has [2]"),
          "set_state_buf checks the shape");
    CHECK(lt_optim_add_param_group(c, o, &h, 1, &p) == LT_ERR &&
              strstr(c->err, "SGD: some parameters appear in more than one parameter group"),
          "a parameter in two groups is refused");
    lt_tensor_release(bad);
    lt_optim_free(o);
    lt_tensor_release(p);
  }

  /* hyper-parameter checks */
  {
    lt_optim_hparams h;
    lt_optim_defaults(LT_OPTIM_ADAM, &h);
    h.lr = -1;
    CHECK(lt_optim_new(c, LT_OPTIM_ADAM, &h) == NULL && strstr(c->err, "Adam: invalid learning rate: -1"),
          "negative lr refused");
    lt_optim_defaults(LT_OPTIM_SGD, &h);
    h.nesterov = 1;
    CHECK(lt_optim_new(c, LT_OPTIM_SGD, &h) == NULL && strstr(c->err, "nesterov momentum requires a momentum"),
          "nesterov without momentum refused");
    lt_optim_defaults(LT_OPTIM_ADAMW, &h);
    CHECK(h.weight_decay == 0.01 && h.lr == 1e-3 && h.beta2 == 0.999, "AdamW defaults");
    lt_optimizer *o = lt_optim_new(c, LT_OPTIM_ADAMW, NULL);
    lt_tensor *leaf = from(c, 2, (float[]){ 1, 2 });
    leaf->requires_grad = 1;
    lt_tensor *nonleaf = lt_op_binary_scalar(c, LT_MUL, leaf, 2, 0);
    CHECK(lt_optim_add_param_group(c, o, &h, 1, &nonleaf) == LT_ERR && strstr(c->err, "can't optimize a non-leaf"),
          "non-leaf refused");
    CHECK(lt_optim_add_param_group(c, o, &h, 0, NULL) == LT_ERR && strstr(c->err, "empty parameter list"),
          "empty group refused");
    lt_tensor_release(nonleaf);
    lt_tensor_release(leaf);
    lt_optim_free(o);
  }

  /* every kind: a threaded step (large tensor) is bitwise the single-threaded one */
  for (int k = 0; k < LT_OPTIM_NKINDS; k++) {
    int64_t n = 600001;
    lt_tensor *p[2], *g;
    lt_rng_seed(&c->rng, 5);
    p[0] = lt_op_randn(c, 1, &n);
    g = lt_op_randn(c, 1, &n);
    p[1] = lt_op_clone(c, p[0]);
    lt_optim_hparams h;
    lt_optim_defaults((lt_optim_kind)k, &h);
    h.lr = 0.01;
    h.momentum = 0.9;
    h.centered = 1;
    h.amsgrad = 1;
    h.weight_decay = 0.1;
    lt_optimizer *o[2];
    for (int t = 0; t < 2; t++) {
      o[t] = lt_optim_new(c, (lt_optim_kind)k, &h);
      lt_optim_add_param_group(c, o[t], &h, 1, &p[t]);
      p[t]->grad = lt_tensor_retain(g);
    }
    int ok = 1;
    for (int it = 0; it < 3; it++) {
      c->num_threads = 1;
      ok &= lt_optim_step(c, o[0]) == LT_OK;
      c->num_threads = 2;
      ok &= lt_optim_step(c, o[1]) == LT_OK;
    }
    ok &= memcmp(lt_f32(p[0]), lt_f32(p[1]), sizeof(float) * (size_t)n) == 0;
    char what[96];
    snprintf(what, sizeof what, "%s: 2 threads give the same bits as 1", lt_optim_kind_name((lt_optim_kind)k));
    CHECK(ok, what);
    c->num_threads = 2;
    CHECK(lt_optim_zero_grad(c, o[1], 0) == LT_OK && lt_f32(g)[n - 1] == 0 && lt_f32(g)[0] == 0,
          "threaded zero_grad zeroes every element");
    for (int t = 0; t < 2; t++) {
      lt_optim_free(o[t]);
      lt_tensor_release(p[t]);
    }
    lt_tensor_release(g);
  }

  CHECK(lt_tensor_live_count() == live0, "no tensor leaked");
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
