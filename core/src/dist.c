/*
 * dist.c — data-parallel communication over MPI (see lt_dist.h): world setup and teardown, broadcasts,
 * scalar and bucketed tensor all-reduces, and the gradient reducer (buckets in reverse parameter order,
 * MPI_Iallreduce per bucket as soon as it is full, sent strictly in bucket order).
 *
 * MPI itself is in a separate module (lutra/mpi.so: lt_mpi.h) that the first entry point needing it loads with
 * dlopen; when it is missing (built without MPI's headers) or cannot load, every such entry point fails with
 * LT_E_NO_MPI and the loader's reason (lt_dist_launched still reads the environment, so the Lua side can say
 * "launched by mpirun but MPI is not available").
 */
#include "lt_dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lt_errors.h"
#include "lt_ops.h"

static int env_int(const char *name, int *v) {
  const char *s = getenv(name);
  if (!s || !*s) return 0;
  char *end;
  long x = strtol(s, &end, 10);
  if (*end || x < 0 || x > 1 << 30) return 0;
  *v = (int)x;
  return 1;
}

int lt_dist_launched(int *rank, int *world_size) {
  int r = 0, w = 1, launched = 0;
  if (env_int("OMPI_COMM_WORLD_SIZE", &w)) {
    launched = 1;
    env_int("OMPI_COMM_WORLD_RANK", &r);
  } else if (env_int("PMIX_RANK", &r)) {
    launched = 1;
    if (!env_int("PMIX_SIZE", &w) && !env_int("OMPI_UNIVERSE_SIZE", &w)) w = 1;
  } else if (env_int("PMI_SIZE", &w) && env_int("PMI_RANK", &r)) {
    launched = 1;
  }
  if (!launched) {
    r = 0;
    w = 1;
  }
  if (rank) *rank = r;
  if (world_size) *world_size = w;
  return launched;
}

#include <dlfcn.h>
#include <limits.h>

#include "lt_mpi.h"

/* ---- loading the MPI module ------------------------------------------------------------------------ */

static const lt_mpi_api *M;        /* the module's table once loaded */
static char module_path[PATH_MAX]; /* lt_dist_set_module_path: where the Lua side found lutra/mpi.so */
static char load_error[1024];      /* why the last load failed */

void lt_dist_set_module_path(const char *path) { snprintf(module_path, sizeof module_path, "%s", path ? path : ""); }

const char *lt_dist_load_error(void) { return load_error; }

static int try_load(const char *path) {
  /* RTLD_GLOBAL: OpenMPI's own plugins resolve libmpi's symbols globally; NODELETE: MPI's state and the
   * exit handler outlive a lua_close */
  void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
  if (!h) {
    const char *e = dlerror();
    size_t n = strlen(load_error);
    snprintf(load_error + n, sizeof load_error - n, "%s%s", n ? "; " : "", e ? e : path);
    return 0;
  }
  const lt_mpi_api *(*get)(void) = (const lt_mpi_api *(*)(void))dlsym(h, "lutra_mpi_api");
  const lt_mpi_api *api = get ? get() : NULL;
  if (!api || api->version != LT_MPI_API_VERSION) {
    size_t n = strlen(load_error);
    snprintf(load_error + n, sizeof load_error - n, "%s%s is not lutra's MPI module of this version", n ? "; " : "",
             path);
    return 0;
  }
  M = api;
  return 1;
}

/* Loads lutra/mpi.so once: $LUTRA_MPI_MODULE, else the path the Lua side found on package.cpath, else next
 * to the object holding lutra (core.so; liblutra.so in lib/; the `lutra` binary in bin/ or the build's cli/). */
static int load_mpi(void) {
  if (M) return 1;
  load_error[0] = 0;
  const char *env = getenv("LUTRA_MPI_MODULE");
  if (env && *env) return try_load(env);
  if (module_path[0] && try_load(module_path)) return 1;
  Dl_info info;
  if (dladdr((void *)&load_mpi, &info) && info.dli_fname) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", info.dli_fname);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    static const char *const rel[] = { "mpi.so", "lutra/mpi.so", "lua/5.1/lutra/mpi.so", "../lutra/mpi.so",
                                       "../lib/lua/5.1/lutra/mpi.so" };
    for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
      char path[PATH_MAX + 64];
      snprintf(path, sizeof path, "%s/%s", dir, rel[i]);
      if (access(path, F_OK) == 0 && try_load(path)) return 1;
    }
  }
  if (!load_error[0])
    snprintf(load_error, sizeof load_error, "lutra/mpi.so was not built (MPI's headers were missing)");
  return 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *op_name(lt_dist_op op) {
  switch (op) {
    case LT_DIST_SUM: return "sum";
    case LT_DIST_MEAN: return "mean";
    case LT_DIST_MAX: return "max";
    case LT_DIST_MIN: return "min";
  }
  return "?";
}

/* the MPI world: process-wide by nature */
static struct {
  int initialized; /* lt_dist_init succeeded */
  int finalized;   /* lt_dist_finalize ran (MPI cannot be initialised again) */
  int owner;       /* we called MPI_Init (a host that initialised MPI itself finalizes it too) */
  int rank, size;
} W;

int lt_dist_available(void) { return load_mpi(); }
int lt_dist_is_initialized(void) { return W.initialized && !W.finalized; }
int lt_dist_rank(void) { return lt_dist_is_initialized() ? W.rank : 0; }
int lt_dist_world_size(void) { return lt_dist_is_initialized() ? W.size : 1; }

/* Exit: finalize on a clean exit only; a failed rank leaves without MPI_Finalize so that mpirun ends the
 * job (MPI_Finalize would wait for ranks that are themselves waiting for the failed one). */
static void dist_on_exit(int status, void *ud) {
  (void)ud;
  if (!W.initialized || W.finalized || !W.owner || status != 0) return;
  if (!M->finalized()) M->finalize();
  W.finalized = 1;
}

/* Keeps this library (and libmpi) loaded until the process exits: lua_close unloads C modules, and the
 * on_exit handler and MPI's own state must outlive that. */
static void pin_self(void) {
  Dl_info info;
  if (dladdr((void *)&lt_dist_init, &info) && info.dli_fname) {
    void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    (void)h; /* the handle is deliberately never closed */
  }
}

int lt_dist_init(lt_ctx *c) {
  if (W.initialized && !W.finalized) return LT_OK;
  if (W.finalized)
    return lt_fail(c, "distributed.init: MPI was finalized in this process and cannot be initialised again");
  if (!load_mpi()) return lt_fail(c, LT_E_NO_MPI, "distributed.init", load_error);
  if (!M->initialized()) {
    pin_self();
    if (M->init_thread_funneled() != 0) return lt_fail(c, "distributed.init: MPI_Init_thread failed");
    W.owner = 1;
    on_exit(dist_on_exit, NULL);
  }
  M->comm_world(&W.rank, &W.size);
  W.initialized = 1;
  return LT_OK;
}

int lt_dist_finalize(lt_ctx *c) {
  (void)c;
  if (!W.initialized || W.finalized) return LT_OK;
  if (!M->finalized() && W.owner) M->finalize();
  W.finalized = 1;
  return LT_OK;
}

void lt_dist_abort(int code) {
  if (!W.initialized || W.finalized) return;
  M->abort(code ? code : 1);
}

#define CHECK_INIT(c, what)                                                         \
  do {                                                                              \
    if (!lt_dist_is_initialized()) return lt_fail((c), LT_E_DIST_NOT_INIT, (what)); \
  } while (0)

int lt_dist_barrier(lt_ctx *c) {
  CHECK_INIT(c, "barrier");
  M->barrier();
  return LT_OK;
}

enum { CHUNK = 1 << 30 }; /* MPI counts are ints: large buffers go in pieces */

int lt_dist_broadcast_bytes(lt_ctx *c, void *buf, size_t n, int src) {
  CHECK_INIT(c, "broadcast");
  if (src < 0 || src >= W.size) return lt_fail(c, "broadcast: src %d out of range 0..%d", src, W.size - 1);
  char *p = buf;
  while (n > 0) {
    int k = n > (size_t)CHUNK ? CHUNK : (int)n;
    M->bcast_bytes(p, k, src);
    p += k;
    n -= (size_t)k;
  }
  return LT_OK;
}

/* Describes a signature vector for a message ("a float32 tensor of 6 elements"). */
typedef void (*sig_desc)(const int64_t *v, char *buf, size_t n);

/* Every rank's v[0..k) gathered; on a difference, fails with "<what>: the ranks disagree: rank i has ...,
 * rank 0 has ..." on every rank (so no rank goes on to a collective the others skip). */
static int check_same(lt_ctx *c, const char *what, sig_desc desc, int k, const int64_t *v) {
  enum { K = 4 };
  if (k > K) k = K;
  int64_t mine[K] = { 0 };
  memcpy(mine, v, sizeof(int64_t) * (size_t)k);
  int64_t *all = malloc(sizeof(int64_t) * K * (size_t)W.size);
  if (!all) return lt_fail(c, LT_E_OOM, sizeof(int64_t) * K * (size_t)W.size);
  M->allgather_i64(mine, K, all);
  int bad = -1;
  for (int r = 1; r < W.size && bad < 0; r++)
    if (memcmp(all + K * r, all, sizeof(int64_t) * (size_t)k)) bad = r;
  int rc = LT_OK;
  if (bad >= 0) {
    char a[160], b[160];
    desc(all + K * bad, a, sizeof a);
    desc(all, b, sizeof b);
    rc = lt_fail(c, "%s: the ranks disagree: rank %d has %s, rank 0 has %s", what, bad, a, b);
  }
  free(all);
  return rc;
}

static const char *dtype_of(int64_t v) {
  return v == LT_F32 || v == LT_I64 || v == LT_F64 ? lt_dtype_name((lt_dtype)v) : "?";
}
static void desc_tensor(const int64_t *v, char *buf, size_t n) {
  snprintf(buf, n, "a %s tensor of %lld elements", dtype_of(v[1]), (long long)v[0]);
}
static void desc_list(const int64_t *v, char *buf, size_t n) {
  snprintf(buf, n, "%lld tensors of %lld elements in total (%lld of them float64)", (long long)v[0], (long long)v[1],
           (long long)v[2]);
}

static void *tensor_data(const lt_tensor *t) {
  return (char *)t->storage->data + (size_t)t->offset * lt_dtype_size(t->dtype);
}

int lt_dist_broadcast(lt_ctx *c, lt_tensor *t, int src) {
  CHECK_INIT(c, "broadcast");
  if (src < 0 || src >= W.size) return lt_fail(c, "broadcast: src %d out of range 0..%d", src, W.size - 1);
  int64_t sig[2] = { lt_numel(t), (int64_t)t->dtype };
  if (check_same(c, "broadcast", desc_tensor, 2, sig)) return LT_ERR;
  size_t bytes = (size_t)lt_numel(t) * lt_dtype_size(t->dtype);
  if (lt_is_contiguous(t)) {
    lt_mark_modified(t); /* received in place (version counters: lt_tensor.h) */
    return lt_dist_broadcast_bytes(c, tensor_data(t), bytes, src);
  }
  lt_tensor *tmp = lt_op_contiguous(c, t);
  if (!tmp) return LT_ERR;
  int rc = lt_dist_broadcast_bytes(c, tensor_data(tmp), bytes, src);
  int was = c->grad_enabled;
  c->grad_enabled = 0;
  if (rc == LT_OK) rc = lt_op_copy_(c, t, tmp);
  c->grad_enabled = was;
  lt_tensor_release(tmp);
  return rc;
}

static lt_mpi_op mpi_op(lt_dist_op op) {
  switch (op) {
    case LT_DIST_MAX: return LT_MPI_MAX;
    case LT_DIST_MIN: return LT_MPI_MIN;
    default: return LT_MPI_SUM;
  }
}

int lt_dist_allreduce_scalars(lt_ctx *c, double *v, int n, lt_dist_op op) {
  CHECK_INIT(c, "all_reduce");
  if (n <= 0) return LT_OK;
  M->allreduce_f64(v, n, mpi_op(op));
  if (op == LT_DIST_MEAN)
    for (int i = 0; i < n; i++) v[i] /= W.size;
  return LT_OK;
}

/* ---- the reducer ----------------------------------------------------------------------------------- */

/* A bucket holds tensors of one dtype (float32 or float64), reduced as MPI_FLOAT or MPI_DOUBLE. */
typedef struct bucket {
  int first, count; /* its parameters: order[first .. first+count) */
  lt_dtype dtype;   /* of its tensors and its buffer */
  int64_t numel;    /* payload elements */
  int64_t nelems;   /* payload + one presence flag per parameter (grads mode) */
  lt_tensor *buf_t; /* the buffer, a 1-D tensor of the bucket's dtype: gradients become views of it */
  char *buf;
  size_t esize; /* bytes per element */
  size_t bytes;
  int pending; /* parameters not yet ready this step */
  int launched, done;
  void *req; /* the reduction in flight (lt_mpi_api.iallreduce) */
} bucket;

/* The presence flag of the bucket's slot-th parameter (grads mode), in the bucket's own dtype. */
static void set_flag(bucket *b, int slot, int present) {
  if (b->dtype == LT_F64) ((double *)(void *)b->buf)[b->numel + slot] = present ? 1.0 : 0.0;
  else ((float *)(void *)b->buf)[b->numel + slot] = present ? 1.0f : 0.0f;
}
static int get_flag(const bucket *b, int slot) {
  if (b->dtype == LT_F64) return ((const double *)(const void *)b->buf)[b->numel + slot] != 0.0;
  return ((const float *)(const void *)b->buf)[b->numel + slot] != 0.0f;
}

struct lt_dist_reducer {
  int n;
  lt_tensor **params; /* retained */
  int grads;
  lt_dist_op op;
  int *order;      /* parameter indices in bucket order (reverse of params) */
  int64_t *offset; /* per parameter: its offset in its bucket */
  int *bucket_of;  /* per parameter */
  int *slot;       /* per parameter: its position within its bucket (for the flag) */
  uint8_t *ready;
  int nb;
  bucket *b;
  int next_launch; /* buckets are sent in index order */
  int first_done;  /* buckets before it are complete */
  int in_step;     /* some parameter was marked ready this step */
  double t_step;
  lt_dist_stats st;
  /* attached to a context's backward */
  lt_ctx *attached;
  lt_grad_hook hook;
  lt_tensor **keys; /* parameter pointers by hash slot (open addressing), index in idx */
  int *idx;
  size_t cap;
};

static size_t key_slot(const lt_dist_reducer *r, const lt_tensor *t) {
  uint64_t x = (uint64_t)(uintptr_t)t;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  size_t i = (size_t)x & (r->cap - 1);
  while (r->keys[i] && r->keys[i] != t) i = (i + 1) & (r->cap - 1);
  return i;
}

int lt_dist_reducer_nbuckets(const lt_dist_reducer *r) { return r ? r->nb : 0; }
void lt_dist_reducer_stats(const lt_dist_reducer *r, lt_dist_stats *s) {
  if (r) *s = r->st;
  else memset(s, 0, sizeof *s);
}

void lt_dist_reducer_free(lt_dist_reducer *r) {
  if (!r) return;
  lt_dist_reducer_detach(r);
  free(r->keys);
  free(r->idx);
  for (int i = 0; i < r->nb; i++) {
    bucket *b = &r->b[i];
    if (b->launched && !b->done) M->wait(b->req);
    lt_tensor_release(b->buf_t);
  }
  for (int i = 0; i < r->n; i++) lt_tensor_release(r->params[i]);
  free(r->params);
  free(r->order);
  free(r->offset);
  free(r->bucket_of);
  free(r->slot);
  free(r->ready);
  free(r->b);
  free(r);
}

lt_dist_reducer *lt_dist_reducer_new(lt_ctx *c, int n, lt_tensor *const *params, size_t bucket_bytes, lt_dist_op op,
                                     int grads) {
  const char *what = grads ? "gradient reducer" : "all_reduce";
  if (!lt_dist_is_initialized()) {
    lt_fail(c, LT_E_DIST_NOT_INIT, what);
    return NULL;
  }
  if (grads && op != LT_DIST_SUM && op != LT_DIST_MEAN) {
    lt_fail(c, "%s: op must be sum or mean, got %s", what, op_name(op));
    return NULL;
  }
  int64_t total = 0, total_f64 = 0;
  for (int i = 0; i < n; i++) {
    lt_tensor *t = params[i];
    if (t->dtype != LT_F32 && t->dtype != LT_F64) {
      lt_fail(c, "%s: tensor %d is %s, expected float32 or float64", what, i + 1, lt_dtype_name(t->dtype));
      return NULL;
    }
    if (!grads && !lt_is_contiguous(t)) {
      lt_fail(c, "%s: tensor %d is not contiguous (reduce x:contiguous() and copy it back)", what, i + 1);
      return NULL;
    }
    if (lt_numel(t) + 1 > INT_MAX / 2) {
      lt_fail(c, "%s: tensor %d has %lld elements, more than one MPI message holds", what, i + 1,
              (long long)lt_numel(t));
      return NULL;
    }
    total += lt_numel(t);
    if (t->dtype == LT_F64) total_f64 += lt_numel(t);
  }
  int64_t sig[3] = { n, total, total_f64 }; /* the buckets' MPI types must match too */
  if (check_same(c, what, desc_list, 3, sig)) return NULL;

  lt_dist_reducer *r = calloc(1, sizeof *r);
  if (!r) {
    lt_fail(c, LT_E_OOM, sizeof *r);
    return NULL;
  }
  r->n = n;
  r->grads = grads;
  r->op = op;
  size_t nn = n > 0 ? (size_t)n : 1;
  r->params = calloc(nn, sizeof *r->params);
  r->order = calloc(nn, sizeof *r->order);
  r->offset = calloc(nn, sizeof *r->offset);
  r->bucket_of = calloc(nn, sizeof *r->bucket_of);
  r->slot = calloc(nn, sizeof *r->slot);
  r->ready = calloc(nn, 1);
  r->b = calloc(nn, sizeof *r->b);
  if (!r->params || !r->order || !r->offset || !r->bucket_of || !r->slot || !r->ready || !r->b) {
    lt_dist_reducer_free(r);
    lt_fail(c, "%s: out of memory", what);
    return NULL;
  }
  for (int i = 0; i < n; i++) r->params[i] = lt_tensor_retain(params[i]);
  r->cap = 16;
  while (r->cap < 2 * nn) r->cap *= 2;
  r->keys = calloc(r->cap, sizeof *r->keys);
  r->idx = calloc(r->cap, sizeof *r->idx);
  if (!r->keys || !r->idx) {
    lt_dist_reducer_free(r);
    lt_fail(c, "%s: out of memory", what);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    size_t k = key_slot(r, params[i]);
    if (r->keys[k]) continue; /* the same tensor twice: found at its first position */
    r->keys[k] = params[i];
    r->idx[k] = i;
  }
  /* buckets in reverse parameter order (the last layers' gradients are ready first), one open bucket per
   * dtype as PyTorch's DDP does: a bucket never mixes float32 and float64, and a model that alternates them
   * still fills buckets to the cap. A bucket's index is the order in which it was opened. */
  int open[2] = { -1, -1 }; /* float32's, float64's */
  for (int k = 0; k < n; k++) {
    int i = n - 1 - k;
    lt_dtype dt = params[i]->dtype;
    int d = dt == LT_F64;
    int64_t cap = (int64_t)(bucket_bytes / lt_dtype_size(dt));
    if (cap < 1) cap = 1;
    int64_t m = lt_numel(params[i]);
    bucket *b = open[d] >= 0 ? &r->b[open[d]] : NULL;
    if (!b || (b->numel > 0 && b->numel + m > cap)) {
      open[d] = r->nb;
      b = &r->b[r->nb++];
      b->dtype = dt;
      b->esize = lt_dtype_size(dt);
    }
    r->bucket_of[i] = (int)(b - r->b);
    r->offset[i] = b->numel;
    r->slot[i] = b->count;
    b->numel += m;
    b->count++;
  }
  /* order: the parameters grouped by bucket, each bucket's in reverse parameter order */
  for (int j = 0, first = 0; j < r->nb; j++) {
    r->b[j].first = first;
    first += r->b[j].count;
  }
  for (int i = 0; i < n; i++) r->order[r->b[r->bucket_of[i]].first + r->slot[i]] = i;
  for (int j = 0; j < r->nb; j++) {
    bucket *b = &r->b[j];
    b->nelems = b->numel + (grads ? b->count : 0);
    b->bytes = (size_t)b->nelems * b->esize;
    int64_t len = b->nelems;
    b->buf_t = lt_tensor_zeros(c, b->dtype, 1, &len);
    if (!b->buf_t) {
      lt_dist_reducer_free(r);
      return NULL;
    }
    b->buf = tensor_data(b->buf_t);
    b->pending = b->count;
  }
  return r;
}

/* Gradients as views of the bucket (PyTorch's gradient_as_bucket_view): after a reduction, a parameter's
 * grad is a view of its place in the bucket, so the next backward accumulates straight into the bucket
 * and packing and unpacking copy nothing (zero_grad without set_to_none keeps the view). */
static int is_bucket_view(const lt_dist_reducer *r, const bucket *b, int i, const lt_tensor *g) {
  const lt_tensor *p = r->params[i];
  return g && g->storage == b->buf_t->storage && g->offset == r->offset[i] && g->dtype == b->dtype &&
         lt_same_shape(g, p) && lt_is_contiguous(g);
}

/* Copies the bucket's gradients (values) into its buffer, unless they already live there. */
static int pack(lt_ctx *c, lt_dist_reducer *r, bucket *b) {
  for (int k = b->first; k < b->first + b->count; k++) {
    int i = r->order[k];
    lt_tensor *p = r->params[i];
    char *dst = b->buf + (size_t)r->offset[i] * b->esize;
    int64_t m = lt_numel(p);
    size_t nbytes = b->esize * (size_t)m;
    lt_tensor *src = r->grads ? p->grad : p;
    if (r->grads) set_flag(b, r->slot[i], src != NULL);
    if (r->grads && is_bucket_view(r, b, i, src)) continue;
    if (!src) {
      memset(dst, 0, nbytes);
      continue;
    }
    if (r->grads && (!lt_is_contiguous(src) || !lt_same_shape(src, p) || src->dtype != b->dtype)) {
      char b1[128], b2[128];
      if (lt_numel(src) != m || src->dtype != b->dtype)
        return lt_fail(c, "gradient reducer: parameter %d is %s %s but its grad is %s %s", i + 1,
                       lt_dtype_name(p->dtype), lt_shape_str(p, b1, sizeof b1), lt_dtype_name(src->dtype),
                       lt_shape_str(src, b2, sizeof b2));
      lt_tensor *cg = lt_op_contiguous(c, src); /* a strided grad (assigned by the user): made contiguous */
      if (!cg) return LT_ERR;
      lt_tensor *v = lt_op_reshape(c, cg, p->ndim, p->shape);
      lt_tensor_release(cg);
      if (!v) return LT_ERR;
      lt_tensor_release(p->grad);
      p->grad = v;
      src = v;
    }
    memcpy(dst, tensor_data(src), nbytes);
    r->st.bytes_copied += (int64_t)nbytes;
  }
  return LT_OK;
}

static void launch(lt_dist_reducer *r, bucket *b) {
  b->req = M->iallreduce(b->buf, (int)b->nelems, b->dtype == LT_F64 ? LT_MPI_DOUBLE : LT_MPI_FLOAT, mpi_op(r->op));
  b->launched = 1;
  r->st.buckets++;
  r->st.bytes += (int64_t)b->bytes;
}

/* Lets MPI progress the reductions in flight (OpenMPI progresses non-blocking collectives inside calls). */
static void progress(lt_dist_reducer *r) {
  while (r->first_done < r->next_launch) {
    bucket *b = &r->b[r->first_done];
    if (!M->test(b->req)) break;
    b->done = 1;
    r->first_done++;
  }
}

int lt_dist_bucket_ready(lt_ctx *c, lt_dist_reducer *r, int i) {
  if (i < 0 || i >= r->n) return lt_fail(c, "bucket_ready: parameter %d out of range 1..%d", i + 1, r->n);
  if (r->ready[i]) return LT_OK;
  if (!r->in_step) {
    r->in_step = 1;
    r->t_step = now_s();
  }
  r->ready[i] = 1;
  bucket *b = &r->b[r->bucket_of[i]];
  if (--b->pending > 0) return LT_OK;
  double t0 = now_s();
  int rc = pack(c, r, b);
  r->st.pack_seconds += now_s() - t0;
  if (rc) return rc;
  while (r->next_launch < r->nb && r->b[r->next_launch].pending == 0) launch(r, &r->b[r->next_launch++]);
  progress(r);
  return LT_OK;
}

static void unpack_bucket(lt_ctx *c, lt_dist_reducer *r, bucket *b, int *rc) {
  if (r->op == LT_DIST_MEAN && W.size > 1) { /* the mean, in place, in one pass (in the bucket's dtype) */
    if (b->dtype == LT_F64) {
      double *v = (double *)(void *)b->buf, scale = 1.0 / (double)W.size;
      for (int64_t j = 0; j < b->numel; j++) v[j] *= scale;
    } else {
      float *v = (float *)(void *)b->buf, scale = 1.0f / (float)W.size;
      for (int64_t j = 0; j < b->numel; j++) v[j] *= scale;
    }
  }
  for (int k = b->first; k < b->first + b->count; k++) {
    int i = r->order[k];
    lt_tensor *p = r->params[i];
    const char *src = b->buf + (size_t)r->offset[i] * b->esize;
    int64_t m = lt_numel(p);
    size_t nbytes = b->esize * (size_t)m;
    if (!r->grads) {
      memcpy(tensor_data(p), src, nbytes);
      continue;
    }
    if (!get_flag(b, r->slot[i])) continue;         /* no rank had a gradient: keep none */
    if (is_bucket_view(r, b, i, p->grad)) continue; /* already in place */
    /* someone else holds the old grad (a Lua reference): it gets this step's values too (later steps
       accumulate into the view; p.grad read again gives the view) */
    if (p->grad && p->grad->refcount > 1 && lt_is_contiguous(p->grad) && lt_numel(p->grad) == m &&
        p->grad->dtype == b->dtype)
      memcpy(tensor_data(p->grad), src, nbytes);
    int64_t stride[LT_MAX_DIM];
    lt_contiguous_strides(p->ndim, p->shape, stride);
    lt_tensor *view = lt_tensor_alias(c, b->buf_t, p->ndim, p->shape, stride, r->offset[i]);
    if (!view) {
      *rc = LT_ERR;
      continue;
    }
    lt_tensor_release(p->grad);
    p->grad = view;
  }
}

int lt_dist_reducer_finish(lt_ctx *c, lt_dist_reducer *r) {
  int rc = LT_OK;
  if (!r->in_step) r->t_step = now_s();
  for (int k = 0; k < r->n && rc == LT_OK; k++) rc = lt_dist_bucket_ready(c, r, r->order[k]);
  if (r->n == 0) r->in_step = 1;
  double t0 = now_s();
  for (int j = 0; j < r->nb; j++) {
    bucket *b = &r->b[j];
    if (!b->launched) { /* a pack failed: send anyway so that the other ranks are not left waiting */
      launch(r, b);
      r->next_launch = j + 1;
    }
    if (!b->done) M->wait(b->req);
    b->done = 1;
  }
  double t1 = now_s();
  r->st.wait_seconds += t1 - t0;
  if (rc == LT_OK)
    for (int j = 0; j < r->nb; j++) unpack_bucket(c, r, &r->b[j], &rc);
  double t2 = now_s();
  r->st.pack_seconds += t2 - t1;
  r->st.total_seconds += t2 - r->t_step;
  r->st.steps++;
  /* ready for the next step */
  memset(r->ready, 0, (size_t)(r->n > 0 ? r->n : 1));
  for (int j = 0; j < r->nb; j++) {
    r->b[j].pending = r->b[j].count;
    r->b[j].launched = r->b[j].done = 0;
  }
  r->next_launch = r->first_done = 0;
  r->in_step = 0;
  return rc;
}

/* ---- attached to backward -------------------------------------------------------------------------- */

static int hook_leaf_ready(void *ud, lt_ctx *c, lt_tensor *leaf) {
  lt_dist_reducer *r = ud;
  size_t k = key_slot(r, leaf);
  if (!r->keys[k]) return LT_OK; /* not one of ours (an input that requires grad) */
  return lt_dist_bucket_ready(c, r, r->idx[k]);
}

static int hook_done(void *ud, lt_ctx *c, int status) {
  lt_dist_reducer *r = ud;
  (void)status;                  /* a failed backward still completes the collectives it started */
  if (!r->in_step) return LT_OK; /* this backward reached none of the parameters */
  int was = c->grad_enabled;
  c->grad_enabled = 0;
  int rc = lt_dist_reducer_finish(c, r);
  c->grad_enabled = was;
  return rc ? lt_fail_prefix(c, "gradient all-reduce") : LT_OK;
}

int lt_dist_reducer_attach(lt_ctx *c, lt_dist_reducer *r) {
  if (!r->grads) return lt_fail(c, "gradient reducer: only a reducer of gradients can be attached to backward");
  if (r->attached && r->attached != c) lt_dist_reducer_detach(r);
  r->hook.leaf_ready = hook_leaf_ready;
  r->hook.done = hook_done;
  r->hook.ud = r;
  r->attached = c;
  c->grad_hook = &r->hook;
  return LT_OK;
}

void lt_dist_reducer_detach(lt_dist_reducer *r) {
  if (!r || !r->attached) return;
  if (r->attached->grad_hook == &r->hook) r->attached->grad_hook = NULL;
  r->attached = NULL;
}

int lt_dist_allreduce(lt_ctx *c, int n, lt_tensor *const *ts, lt_dist_op op, size_t bucket_bytes) {
  CHECK_INIT(c, "all_reduce");
  int nf = 0;
  lt_tensor **fl = malloc(sizeof *fl * (size_t)(n > 0 ? n : 1)); /* float32 and float64: the bucketed ones */
  if (!fl) return lt_fail(c, LT_E_OOM, sizeof *fl * (size_t)n);
  int rc = LT_OK;
  for (int i = 0; i < n; i++) lt_mark_modified(ts[i]); /* each is reduced in place */
  for (int i = 0; i < n && rc == LT_OK; i++) {
    lt_tensor *t = ts[i];
    if (t->dtype == LT_F32 || t->dtype == LT_F64) {
      fl[nf++] = t;
      continue;
    }
    /* int64: one collective each (counts, indices) */
    if (op == LT_DIST_MEAN) {
      rc = lt_fail(c, "all_reduce: op 'mean' needs float32 or float64 tensors, tensor %d is %s", i + 1,
                   lt_dtype_name(t->dtype));
      break;
    }
    if (!lt_is_contiguous(t)) {
      rc = lt_fail(c, "all_reduce: tensor %d is not contiguous (reduce x:contiguous() and copy it back)", i + 1);
      break;
    }
    int64_t sig[2] = { lt_numel(t), t->dtype };
    if ((rc = check_same(c, "all_reduce", desc_tensor, 2, sig))) break;
    char *p = tensor_data(t);
    int64_t m = lt_numel(t);
    while (m > 0) {
      int k = m > CHUNK / 8 ? CHUNK / 8 : (int)m;
      M->allreduce_i64((int64_t *)(void *)p, k, mpi_op(op));
      p += (size_t)k * 8;
      m -= k;
    }
  }
  if (rc == LT_OK) {
    lt_dist_reducer *r = lt_dist_reducer_new(c, nf, fl, bucket_bytes, op, 0);
    if (!r) rc = LT_ERR;
    else {
      rc = lt_dist_reducer_finish(c, r);
      lt_dist_reducer_free(r);
    }
  }
  free(fl);
  return rc;
}
