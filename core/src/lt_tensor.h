/*
 * lt_tensor.h — storage, tensors (strided views over refcounted storage) and the autograd graph.
 *
 * Conventions for every op in the core:
 *   - ops return a NEW reference (lt_tensor *) or NULL with the message in ctx->err;
 *   - inputs are borrowed; a caller that keeps a tensor calls lt_tensor_retain;
 *   - dims are 0-based here; messages show shapes as Lua users see them ([64 x 256]) and dims 1-based.
 */
#ifndef LT_TENSOR_H
#define LT_TENSOR_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "lt_ctx.h"

#define LT_MAX_DIM 8

/* LT_F64 has kernels in the ops that list it (docs/reference/dtypes.md); every other op refuses it through
 * lt_check_no_f64 (lt_check.h), so no kernel ever reads doubles as floats. */
typedef enum lt_dtype { LT_F32 = 0, LT_I64 = 1, LT_F64 = 2 } lt_dtype;

/* Storages and tensor headers may be shared by threads (Lua states of their own, a C host's threads), so their
 * counts are atomic (tensor.c: relaxed increments, acq_rel decrements); autograd nodes never leave the thread
 * that built them and keep a plain count. A storage's `data` never changes after creation. */
typedef struct lt_storage {
  _Atomic int64_t refcount;
  size_t nbytes;
  void *data;
  /* Bumped by every in-place change of the data (lt_mark_modified); every view of the storage shares it, as
   * PyTorch's version counter is shared by a base and its views. An autograd node compares it with the version
   * it recorded when it saved a tensor, so a value changed between forward and backward is an error, not a
   * silently wrong gradient. */
  int64_t version;
} lt_storage;

struct lt_node;

typedef struct lt_tensor {
  _Atomic int64_t refcount;
  lt_storage *storage;
  int64_t offset; /* in elements */
  int ndim;
  int64_t shape[LT_MAX_DIM];
  int64_t stride[LT_MAX_DIM]; /* in elements; 0 for broadcast (expanded) dims */
  lt_dtype dtype;
  int requires_grad;
  struct lt_tensor *grad;  /* leaves only; accumulates */
  struct lt_node *grad_fn; /* the op that produced this tensor, NULL for leaves */
} lt_tensor;

size_t lt_dtype_size(lt_dtype d);
const char *lt_dtype_name(lt_dtype d);

/* --- lifecycle ------------------------------------------------------------------------------- */
lt_tensor *lt_tensor_new(lt_ctx *c, lt_dtype dt, int ndim, const int64_t *shape); /* uninitialised */
lt_tensor *lt_tensor_new_like(lt_ctx *c, const lt_tensor *t);                     /* same shape+dtype */
lt_tensor *lt_tensor_zeros(lt_ctx *c, lt_dtype dt, int ndim, const int64_t *shape);
lt_tensor *lt_tensor_scalar(lt_ctx *c, double v); /* 0-dim float32 */
/* 0-dim of dtype dt (LT_F32 or LT_F64): a Lua number beside a float64 tensor keeps its double precision */
lt_tensor *lt_tensor_scalar_of(lt_ctx *c, lt_dtype dt, double v);
/* A header over the same storage (no autograd): the building block of views. */
lt_tensor *lt_tensor_alias(lt_ctx *c, const lt_tensor *base, int ndim, const int64_t *shape, const int64_t *stride,
                           int64_t offset);
/* t seen with the broadcast shape (stride 0 on expanded dims), sharing storage, no autograd. */
lt_tensor *lt_broadcast_alias(lt_ctx *c, const lt_tensor *t, int ndim, const int64_t *shape);
lt_tensor *lt_tensor_retain(lt_tensor *t);
void lt_tensor_release(lt_tensor *t);
/* Storage bytes of every tensor alive (for tests of leaks). */
int64_t lt_tensor_live_count(void);

/* --- queries --------------------------------------------------------------------------------- */
int64_t lt_numel(const lt_tensor *t);
int lt_is_contiguous(const lt_tensor *t);
static inline float *lt_f32(const lt_tensor *t) { return (float *)t->storage->data + t->offset; }
static inline int64_t *lt_i64(const lt_tensor *t) { return (int64_t *)t->storage->data + t->offset; }
static inline double *lt_f64(const lt_tensor *t) { return (double *)t->storage->data + t->offset; }
static inline int lt_is_float(lt_dtype d) { return d != LT_I64; }
/* Every write into an existing tensor's memory (in-place ops, copies, fills, optimizer updates, loads) calls
 * this once, after its arguments were checked: it is what makes a later backward that needs the old values
 * fail instead of computing with the new ones. */
static inline void lt_mark_modified(lt_tensor *t) { t->storage->version++; }
/* "[64 x 256]" (a 0-dim tensor prints as "[]"). Returns buf. */
char *lt_shape_str(const lt_tensor *t, char *buf, size_t n);
char *lt_dims_str(int ndim, const int64_t *shape, char *buf, size_t n);
int lt_same_shape(const lt_tensor *a, const lt_tensor *b);
void lt_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride);
/* Reads element i (row-major logical order) as double, whatever the layout and dtype. */
double lt_get_flat(const lt_tensor *t, int64_t i);
/* The same for an int64 tensor, exactly: through a double, values from 2^63 - 512 up round to 2^63, whose
 * cast back to int64 is undefined (and above 2^53 the value changes). */
int64_t lt_get_flat_i64(const lt_tensor *t, int64_t i);

/* --- autograd -------------------------------------------------------------------------------- */
typedef struct lt_node lt_node;
/* Computes gradients for the node's inputs from gout (shape of the node's output). gin[i] receives a
 * new reference, or stays NULL when input i needs no gradient. */
typedef int (*lt_backward_fn)(lt_ctx *c, lt_node *n, lt_tensor *gout, lt_tensor **gin);

#define LT_NODE_INLINE 3
/* node->reads when an op records: the backward may read the values of every input (of the first
 * LT_NODE_INLINE; an op with more inputs saves what it reads in saved[]). */
#define LT_READS_ALL 0xFFu
#define LT_READS(i) (1u << (i))
struct lt_node {
  int64_t refcount;
  const char *op; /* for messages: "matmul", "add", ... */
  lt_backward_fn backward;
  int ninputs;
  lt_tensor **inputs; /* retained; points at inline_inputs when ninputs <= LT_NODE_INLINE */
  lt_tensor *inline_inputs[LT_NODE_INLINE];
  lt_tensor *saved[3]; /* retained tensors the backward needs (outputs, masks, indices) */
  /* In-place detection: the storage versions of the inputs when recorded and of saved[] when saved. Bit i of
   * `reads` says the backward reads input i's values (its version is compared); an op whose backward does
   * not (add, views, sums) clears its bit after lt_record, as PyTorch saves only what a formula uses. */
  unsigned reads;
  unsigned saved_output; /* bit s: saved[s] is the op's output (lt_node_save_output), for the message */
  int64_t in_version[LT_NODE_INLINE];
  int64_t saved_version[3];
  double f[4];                   /* scalar arguments */
  int64_t i[2 * LT_MAX_DIM + 4]; /* integer arguments (dims, sizes, offsets) */
  int out_ndim;
  int64_t out_shape[LT_MAX_DIM];
  /* backward bookkeeping */
  lt_tensor *grad_acc;
  int64_t deps;
  int mark;     /* visited in the current backward */
  int released; /* the graph behind this node was freed by a backward */
  int autocast; /* the context's autocast when recorded: the backward's products run in that precision too */
};

/* 1 when grad mode is on and any input requires grad. */
int lt_needs_grad(const lt_ctx *c, int n, lt_tensor *const *inputs);
/* Attaches a node to `out` when lt_needs_grad; *node gets it (NULL when not recorded). */
int lt_record(lt_ctx *c, lt_tensor *out, const char *op, lt_backward_fn bw, int n, lt_tensor *const *inputs,
              lt_node **node);
void lt_node_save(lt_node *n, int slot, lt_tensor *t);
/* Saves the op's own output: as a detached alias, since the output holds the node (no cycle). */
int lt_node_save_output(lt_ctx *c, lt_node *n, int slot, lt_tensor *out);
void lt_node_release(lt_node *n);
/* Releases what the node holds (inputs, saved tensors, its gradient) but not the node (tensor.c). */
void lt_node_free_graph(lt_node *n);
/* Runs backward from root; grad NULL means ones (root must then have one element). Frees the graph. */
int lt_backward(lt_ctx *c, lt_tensor *root, lt_tensor *grad);
/* Adds g into leaf->grad (allocating it on first use); g must have leaf's shape. */
int lt_accumulate_grad(lt_ctx *c, lt_tensor *leaf, lt_tensor *g);
/* For a backward rule that can add its contribution to `in`'s gradient itself (a GEMM with beta = 1, a slice
 * added into its region): the gradient to add into, when one exists as float32, contiguous and sharing no
 * memory with the rule's operands `ops`: a leaf's gradient (what lt_accumulate_grad would add into), or
 * for a computed tensor the gradient the backward pass has summed so far from its other consumers, when
 * the engine alone holds it (what the engine would add into); NULL: produce the gradient as usual. The rule
 * then leaves gin[i] NULL. Saves a temporary, its zeroing and the add pass when gradients accumulate
 * (zero_grad without set_to_none, accumulate_grad_batches, a tensor read by several ops: the q, k and v
 * slices of one projection). */
lt_tensor *lt_grad_inplace_target(const lt_tensor *in, const lt_tensor *const *ops, int nops);

#endif
