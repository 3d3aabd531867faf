/*
 * autograd.c — the reverse-mode engine: recording nodes, and backward() over the graph in dependency
 * order. backward() frees the graph it walked (inputs and saved tensors of every node), so holding a
 * result never keeps a step's activations alive.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lt_accumulate.h"
#include "lt_alloc.h"
#include "lt_check.h"
#include "lt_errors.h"
#include "lt_fpmode.h"
#include "lt_prof.h"

int lt_needs_grad(const lt_ctx *c, int n, lt_tensor *const *inputs) {
  if (!c->grad_enabled) return 0;
  for (int i = 0; i < n; i++)
    if (inputs[i] && inputs[i]->requires_grad) return 1;
  return 0;
}

/* ---- anomaly detection and kernel times (lt_ctx.watch) -------------------------------------------------- */

/* "nan" or "inf" when the float32 tensor holds one (NULL: all finite, or not float32). */
static const char *nonfinite(const lt_tensor *t) {
  if (!t || t->dtype == LT_I64) return NULL;
  int64_t n = lt_numel(t);
  int contig = t->dtype == LT_F32 && lt_is_contiguous(t);
  const float *p = contig ? lt_f32(t) : NULL;
  for (int64_t i = 0; i < n; i++) {
    double v = contig ? p[i] : lt_get_flat(t, i);
    if (v != v) return "nan";
    if (isinf(v)) return "inf";
  }
  return NULL;
}

/* Forward: the op that made a NaN/inf from its inputs is named (each recorded op is checked, so the first
 * one fails). */
static int check_forward(lt_ctx *c, const lt_tensor *out, const char *op) {
  const char *bad = c->detect_anomaly ? nonfinite(out) : NULL;
  if (!bad) return LT_OK;
  char b[128];
  return lt_fail(c, "detect_anomaly: the forward of '%s' produced %s in its output %s", op, bad,
                 lt_shape_str(out, b, sizeof b));
}

/* Backward: the node's kernel, timed when prof is on, its gradients checked when detect_anomaly is on. */
static int watched_backward(lt_ctx *c, lt_node *n, lt_tensor **gin) {
  if (c->prof) lt_prof_op_begin(c->prof);
  int rc = n->backward(c, n, n->grad_acc, gin);
  if (c->prof) lt_prof_op_end(c->prof, 1, n->op);
  if (rc != LT_OK || !c->detect_anomaly) return rc;
  for (int i = 0; i < n->ninputs; i++) {
    const char *bad = nonfinite(gin[i]);
    if (bad) {
      char b[128];
      return lt_fail(c, "detect_anomaly: the backward of '%s' produced %s in the gradient of its input %d %s", n->op,
                     bad, i + 1, lt_shape_str(gin[i], b, sizeof b));
    }
  }
  return LT_OK;
}

int lt_record(lt_ctx *c, lt_tensor *out, const char *op, lt_backward_fn bw, int n, lt_tensor *const *inputs,
              lt_node **node) {
  *node = NULL;
  if (!lt_needs_grad(c, n, inputs)) return LT_OK;
  if (c->watch && check_forward(c, out, op)) return LT_ERR;
  lt_node *nd = lt_alloc(sizeof *nd);
  if (!nd) return lt_fail(c, LT_E_OOM, sizeof *nd);
  memset(nd, 0, sizeof *nd);
  nd->refcount = 1;
  nd->op = op;
  nd->backward = bw;
  nd->autocast = c->autocast;
  nd->ninputs = n;
  if (n <= LT_NODE_INLINE) nd->inputs = nd->inline_inputs;
  else {
    nd->inputs = lt_alloc(sizeof(lt_tensor *) * (size_t)n);
    if (!nd->inputs) {
      lt_free(nd, sizeof *nd);
      return lt_fail(c, LT_E_OOM, sizeof(lt_tensor *) * (size_t)n);
    }
  }
  for (int i = 0; i < n; i++) {
    /* every input is kept (a backward rule may need the values of one that needs no gradient);
       gradients flow only to inputs with requires_grad */
    nd->inputs[i] = lt_tensor_retain(inputs[i]);
    if (i < LT_NODE_INLINE && inputs[i]) nd->in_version[i] = inputs[i]->storage->version;
  }
  nd->reads = LT_READS_ALL;
  nd->out_ndim = out->ndim;
  memcpy(nd->out_shape, out->shape, sizeof out->shape);
  out->grad_fn = nd;
  out->requires_grad = 1;
  *node = nd;
  return LT_OK;
}

void lt_node_save(lt_node *n, int slot, lt_tensor *t) {
  lt_tensor_release(n->saved[slot]);
  n->saved[slot] = lt_tensor_retain(t);
  n->saved_output &= ~(1u << slot);
  if (t) n->saved_version[slot] = t->storage->version;
}

int lt_node_save_output(lt_ctx *c, lt_node *n, int slot, lt_tensor *out) {
  lt_tensor *alias = lt_tensor_alias(c, out, out->ndim, out->shape, out->stride, out->offset);
  if (!alias) return LT_ERR;
  lt_tensor_release(n->saved[slot]);
  n->saved[slot] = alias;
  n->saved_output |= 1u << slot;
  n->saved_version[slot] = alias->storage->version;
  return LT_OK;
}

/* The error for a tensor the node saved whose storage changed since (version counters, lt_mark_modified). */
static int modified_fail(lt_ctx *c, const lt_node *n, const char *what, int64_t then, int64_t now) {
  return lt_fail(c, LT_E_MODIFIED_INPLACE, n->op, what, (long long)then, (long long)now);
}

/* Before a backward runs any rule: each input a node's rule reads and each tensor it saved must still hold the
 * values it had in the forward. Costs a compare per saved tensor. */
static int check_versions(lt_ctx *c, const lt_node *n) {
  char what[48];
  int nin = n->ninputs < LT_NODE_INLINE ? n->ninputs : LT_NODE_INLINE;
  for (int i = 0; i < nin; i++) {
    const lt_tensor *in = n->inputs[i];
    if (!(n->reads & (1u << i)) || !in || in->storage->version == n->in_version[i]) continue;
    snprintf(what, sizeof what, "input %d", i + 1);
    return modified_fail(c, n, what, n->in_version[i], in->storage->version);
  }
  for (int s = 0; s < 3; s++) {
    const lt_tensor *t = n->saved[s];
    if (!t || t->storage->version == n->saved_version[s]) continue;
    if (n->saved_output & (1u << s)) snprintf(what, sizeof what, "output");
    else snprintf(what, sizeof what, "saved tensor %d", s + 1);
    for (int i = 0; i < n->ninputs && !(n->saved_output & (1u << s)); i++)
      if (n->inputs[i] && n->inputs[i]->storage == t->storage) {
        snprintf(what, sizeof what, "input %d", i + 1);
        break;
      }
    return modified_fail(c, n, what, n->saved_version[s], t->storage->version);
  }
  return LT_OK;
}

/* The terms of the engine's sums: float32 or float64, of one dtype and one shape. The engine checks each gradient's shape against its
 * input's; lt_accumulate_grad is also open to a C host. */
static int check_terms(lt_ctx *c, const lt_tensor *acc, const lt_tensor *g) {
  if (acc->dtype == LT_I64 || g->dtype != acc->dtype)
    return lt_fail(c, "backward: a %s gradient cannot be added to a %s one", lt_dtype_name(g->dtype),
                   lt_dtype_name(acc->dtype));
  if (lt_same_shape(acc, g)) return LT_OK;
  char b1[128], b2[128];
  return lt_fail(c, "backward: a gradient of shape %s cannot be added to one of shape %s",
                 lt_shape_str(g, b1, sizeof b1), lt_shape_str(acc, b2, sizeof b2));
}

/* acc += g (accumulate.c: autograd calls no op) */
static int add_into(lt_ctx *c, lt_tensor *acc, const lt_tensor *g) {
  if (check_terms(c, acc, g)) return LT_ERR;
  if (acc->dtype == LT_F64) lt_axpy_f64(acc, 1.0, g);
  else lt_axpy_f32(c, acc, 1.0f, g);
  return LT_OK;
}

int lt_accumulate_grad(lt_ctx *c, lt_tensor *leaf, lt_tensor *g) {
  if (!leaf->grad) {
    if (g->refcount == 1 && !g->grad_fn && lt_is_contiguous(g) && g->offset == 0 && g->storage->refcount == 1 &&
        lt_same_shape(g, leaf)) {
      leaf->grad = lt_tensor_retain(g);
      g->requires_grad = 0;
      return LT_OK;
    }
    lt_tensor *z = lt_tensor_zeros(c, leaf->dtype, leaf->ndim, leaf->shape);
    if (!z) return LT_ERR;
    leaf->grad = z;
  }
  return add_into(c, leaf->grad, g);
}

/* Whether a node's accumulated gradient may be added into in place: the engine holds the only reference to
 * it and to its memory (a rule may have passed on a tensor it also returned elsewhere), and it is dense. */
static int acc_owned(const lt_tensor *acc) {
  return acc->refcount == 1 && acc->storage->refcount == 1 && lt_is_contiguous(acc);
}

lt_tensor *lt_grad_inplace_target(const lt_tensor *in, const lt_tensor *const *ops, int nops) {
  lt_tensor *g = in->grad_fn ? in->grad_fn->grad_acc : in->grad;
  if (!g || (in->grad_fn && !acc_owned(g))) return NULL;
  if (g->dtype != LT_F32 || !lt_is_contiguous(g) || !lt_same_shape(g, in)) return NULL;
  for (int i = 0; i < nops; i++)
    if (ops[i] && ops[i]->storage == g->storage) return NULL;
  return g;
}

/* Adds g into node->grad_acc (taking g's reference when there is nothing yet). */
static int accumulate_node(lt_ctx *c, lt_node *n, lt_tensor *g) {
  if (!n->grad_acc) {
    n->grad_acc = lt_tensor_retain(g);
    return LT_OK;
  }
  lt_tensor *acc = n->grad_acc;
  if (acc_owned(acc)) return add_into(c, acc, g);
  lt_tensor *sum = check_terms(c, acc, g) ? NULL : lt_tensor_new(c, acc->dtype, acc->ndim, acc->shape);
  if (!sum) return LT_ERR;
  if (acc->dtype == LT_F64) lt_add_f64(sum, acc, g);
  else lt_add_f32(c, sum, acc, g);
  lt_tensor_release(acc);
  n->grad_acc = sum;
  return LT_OK;
}

typedef struct node_vec {
  lt_node **v;
  size_t n, cap;
} node_vec;

static int vec_push(lt_ctx *c, node_vec *s, lt_node *n) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    lt_node **v = realloc(s->v, cap * sizeof *v);
    if (!v) return lt_fail(c, LT_E_OOM, cap * sizeof *v);
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = n;
  return LT_OK;
}

/* With a grad hook (c->grad_hook, data-parallel training): the leaves a backward reaches and how many of
 * their uses are still to be processed, in an open-addressing table keyed by pointer. */
typedef struct leaf_count {
  lt_tensor *t;
  int64_t n;
} leaf_count;
typedef struct leaf_tab {
  leaf_count *v;
  size_t cap, n;
} leaf_tab;

static size_t leaf_slot(const leaf_tab *T, const lt_tensor *t) {
  uint64_t x = (uint64_t)(uintptr_t)t;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  size_t i = (size_t)x & (T->cap - 1);
  while (T->v[i].t && T->v[i].t != t) i = (i + 1) & (T->cap - 1);
  return i;
}

static int leaf_add(lt_ctx *c, leaf_tab *T, lt_tensor *t) {
  if (2 * (T->n + 1) > T->cap) {
    leaf_tab g = { calloc(T->cap ? 2 * T->cap : 64, sizeof *g.v), T->cap ? 2 * T->cap : 64, T->n };
    if (!g.v) return lt_fail(c, LT_E_OOM, (T->cap ? 2 * T->cap : 64) * sizeof *g.v);
    for (size_t i = 0; i < T->cap; i++)
      if (T->v[i].t) g.v[leaf_slot(&g, T->v[i].t)] = T->v[i];
    free(T->v);
    *T = g;
  }
  leaf_count *lc = &T->v[leaf_slot(T, t)];
  if (!lc->t) {
    lc->t = t;
    T->n++;
  }
  lc->n++;
  return LT_OK;
}

static int backward(lt_ctx *c, lt_tensor *root, lt_tensor *grad) {
  char b1[128], b2[128];
  if (!root->requires_grad) return lt_fail(c, LT_E_NO_GRAD_FN);
  lt_tensor *seed = NULL;
  if (grad) {
    if (!lt_same_shape(grad, root))
      return lt_fail(c, "backward: gradient has shape %s, expected the tensor's shape %s",
                     lt_shape_str(grad, b1, sizeof b1), lt_shape_str(root, b2, sizeof b2));
    if (lt_check_dtype(c, "backward", "gradient", grad, root->dtype)) return LT_ERR;
    seed = lt_tensor_retain(grad);
  } else {
    if (lt_numel(root) != 1) return lt_fail(c, LT_E_BACKWARD_SCALAR, lt_shape_str(root, b1, sizeof b1));
    seed = lt_tensor_new(c, root->dtype, root->ndim, root->shape);
    if (!seed) return LT_ERR;
    if (root->dtype == LT_F64) lt_f64(seed)[0] = 1.0; /* its one element */
    else lt_f32(seed)[0] = 1.0f;
  }
  if (!root->grad_fn) { /* a leaf: its gradient is the seed */
    int rc = lt_accumulate_grad(c, root, seed);
    lt_tensor_release(seed);
    return rc;
  }
  if (root->grad_fn->released) {
    lt_tensor_release(seed);
    return lt_fail(c, LT_E_GRAPH_FREED, root->grad_fn->op);
  }

  int saved_mode = c->grad_enabled;
  c->grad_enabled = 0;
  int rc = LT_OK;
  node_vec all = { 0 }, stack = { 0 }, ready = { 0 };
  const lt_grad_hook *hook = c->grad_sync_off ? NULL : c->grad_hook;
  leaf_tab leaves = { 0 };

  /* 1. find every node reachable from the root and count its consumers; check that what each one saved is
   * unchanged before any rule runs, so that a failed backward has accumulated nothing */
  lt_node *r = root->grad_fn;
  r->mark = 1;
  r->deps = 0;
  if (vec_push(c, &all, r) || (r->refcount++, vec_push(c, &stack, r)) || check_versions(c, r)) {
    rc = LT_ERR;
    goto done;
  }
  while (stack.n) {
    lt_node *n = stack.v[--stack.n];
    for (int i = 0; i < n->ninputs; i++) {
      lt_tensor *in = n->inputs[i];
      if (hook && in && in->requires_grad && !in->grad_fn && leaf_add(c, &leaves, in)) {
        rc = LT_ERR;
        goto done;
      }
      if (!in || !in->requires_grad || !in->grad_fn) continue;
      lt_node *m = in->grad_fn;
      if (m->released) {
        rc = lt_fail(c, LT_E_GRAPH_FREED, m->op);
        goto done;
      }
      if (!m->mark) {
        m->mark = 1;
        m->deps = 0;
        if (vec_push(c, &all, m) || (m->refcount++, vec_push(c, &stack, m)) || check_versions(c, m)) {
          rc = LT_ERR;
          goto done;
        }
      }
      m->deps++;
    }
  }

  /* 2. run the backward rules in dependency order */
  r->grad_acc = seed;
  seed = NULL;
  if (vec_push(c, &ready, r)) {
    rc = LT_ERR;
    goto done;
  }
  while (ready.n) {
    lt_node *n = ready.v[--ready.n];
    lt_tensor *gin_inline[LT_NODE_INLINE] = { 0 };
    lt_tensor **gin = gin_inline;
    if (n->ninputs > LT_NODE_INLINE) {
      gin = calloc((size_t)n->ninputs, sizeof *gin);
      if (!gin) {
        rc = lt_fail(c, LT_E_OOM, sizeof *gin * (size_t)n->ninputs);
        goto done;
      }
    }
    int autocast = c->autocast; /* a node's gradient products in its forward's precision, as PyTorch's */
    c->autocast = n->autocast;
    if (n->grad_acc && (c->watch ? watched_backward(c, n, gin) : n->backward(c, n, n->grad_acc, gin)) != LT_OK) {
      lt_fail_prefix(c, "backward");
      rc = LT_ERR;
    }
    c->autocast = autocast;
    for (int i = 0; i < n->ninputs; i++) {
      lt_tensor *in = n->inputs[i];
      if (in && !in->requires_grad) in = NULL;
      lt_tensor *g = gin[i];
      if (rc == LT_OK && in && g && !lt_same_shape(g, in)) {
        rc = lt_fail(c, "backward of %s: gradient %d has shape %s, input has %s (internal error)", n->op, i + 1,
                     lt_shape_str(g, b1, sizeof b1), lt_shape_str(in, b2, sizeof b2));
      }
      if (rc == LT_OK && in && g) {
        if (in->grad_fn) rc = accumulate_node(c, in->grad_fn, g);
        else rc = lt_accumulate_grad(c, in, g);
      }
      lt_tensor_release(g);
      if (in && in->grad_fn && --in->grad_fn->deps == 0 && rc == LT_OK)
        if (vec_push(c, &ready, in->grad_fn)) rc = LT_ERR;
      if (hook && in && !in->grad_fn && rc == LT_OK) { /* the leaf's last use: its gradient is final */
        leaf_count *lc = &leaves.v[leaf_slot(&leaves, in)];
        if (lc->t && --lc->n == 0) rc = hook->leaf_ready(hook->ud, c, in);
      }
    }
    if (gin != gin_inline) free(gin);
    if (rc != LT_OK) goto done;
  }

done:
  if (hook) {
    int hrc = hook->done(hook->ud, c, rc);
    if (rc == LT_OK) rc = hrc;
    free(leaves.v);
  }
  /* free the graph that was walked; on failure only the transient gradients. Each node in `all` holds a
   * reference (taken when it was found) until its turn: freeing one node's inputs may drop the last other
   * reference to a node found after it (an intermediate tensor whose Lua object was already collected), which
   * would otherwise be freed while still listed here. */
  for (size_t i = 0; i < all.n; i++) {
    lt_node *n = all.v[i];
    n->mark = 0;
    if (rc == LT_OK) {
      lt_node_free_graph(n);
      n->released = 1;
    } else {
      lt_tensor_release(n->grad_acc);
      n->grad_acc = NULL;
    }
    lt_node_release(n);
  }
  lt_tensor_release(seed);
  free(all.v);
  free(stack.v);
  free(ready.v);
  c->grad_enabled = saved_mode;
  return rc;
}

int lt_backward(lt_ctx *c, lt_tensor *root, lt_tensor *grad) {
  unsigned fp = lt_fp_enter(c->flush_denormal); /* lutra's floating-point mode while it computes (lt_fpmode.h) */
  int rc = backward(c, root, grad);
  lt_fp_leave(fp);
  return rc;
}
