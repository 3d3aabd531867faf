/*
 * lt_dist.h — data-parallel communication over MPI (Debian's OpenMPI): the world of processes started by
 * `mpirun -np N`, broadcasts, all-reduces of tensors in buckets, and the gradient reducer that averages a
 * model's gradients across ranks after (or during) backward.
 *
 *   if (lt_dist_init(c)) return LT_ERR;                  // MPI_Init_thread (FUNNELED) once per process
 *   int r = lt_dist_rank(), w = lt_dist_world_size();
 *   lt_dist_broadcast(c, weight, 0);                     // every rank gets rank 0's values
 *   lt_dist_reducer *red = lt_dist_reducer_new(c, n, params, 4 << 20, LT_DIST_MEAN, 1);
 *   ... backward ...                                     // optionally lt_dist_bucket_ready(c, red, i) per
 *                                                        // parameter as its gradient becomes final
 *   lt_dist_reducer_finish(c, red);                      // grads now hold the mean over ranks
 *   // or: lt_dist_reducer_attach(c, red) once, and every backward() reduces as it goes
 *   lt_dist_reducer_free(red);
 *
 * MPI is a separate module, lutra/mpi.so (lt_mpi.h), built only where MPI's headers are installed and loaded
 * with dlopen by lt_dist_available or lt_dist_init, never before: without it every function fails with
 * LT_E_NO_MPI and lt_dist_available() is 0. The MPI world is process-wide by nature, so this module keeps its state in
 * statics (the one exception to "no globals"); every MPI call happens on the thread that called
 * lt_dist_init (MPI_THREAD_FUNNELED). Nothing here initialises MPI unless lt_dist_init is called.
 *
 * Exit: after lt_dist_init, the process finalizes MPI when it exits with status 0 (an on_exit handler)
 * and skips MPI_Finalize when it exits with any other status, so that mpirun sees a rank that failed and
 * terminates the job instead of the failed rank waiting in MPI_Finalize for ranks that wait for it.
 */
#ifndef LT_DIST_H
#define LT_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "lt_tensor.h"

#define LT_E_NO_MPI                                                                                        \
  "%s: MPI is not available (%s); install it with `apt-get install openmpi-bin libopenmpi-dev` (as root; " \
  "./lutra does it when run as root) and rebuild (./lutra --build-only)"
#define LT_E_DIST_NOT_INIT "%s: the distributed world is not initialised (call lt.distributed.init() first)"

typedef enum lt_dist_op { LT_DIST_SUM = 0, LT_DIST_MEAN, LT_DIST_MAX, LT_DIST_MIN } lt_dist_op;

/* 1 when lutra was built with MPI. */
int lt_dist_available(void);
/* Where to look first for lutra/mpi.so (the Lua side passes package.searchpath's answer); NULL: nowhere. */
void lt_dist_set_module_path(const char *path);
/* Why lutra/mpi.so could not be loaded (the dlopen errors), "" when it was. */
const char *lt_dist_load_error(void);
/* 1 when this process was started by an MPI launcher (mpirun/PMIx: OMPI_COMM_WORLD_SIZE or PMIX_RANK in
 * the environment); rank/world_size get what the launcher says (0 and 1 otherwise). Does not touch MPI. */
int lt_dist_launched(int *rank, int *world_size);
/* MPI_Init_thread (MPI_THREAD_FUNNELED); idempotent. Fails without MPI, or after lt_dist_finalize. */
int lt_dist_init(lt_ctx *c);
int lt_dist_is_initialized(void);
int lt_dist_rank(void);       /* 0 when not initialised */
int lt_dist_world_size(void); /* 1 when not initialised */
/* MPI_Finalize (collective): every rank must call it. Idempotent. */
int lt_dist_finalize(lt_ctx *c);
/* MPI_Abort(MPI_COMM_WORLD, code): terminates every rank of the job. Returns only when MPI is not
 * initialised (or not built in). Only for a failed data-parallel run (the caller prints the message). */
void lt_dist_abort(int code);

int lt_dist_barrier(lt_ctx *c);
/* Every rank gets src's values of t (same shape and dtype on every rank; any layout). */
int lt_dist_broadcast(lt_ctx *c, lt_tensor *t, int src);
/* Raw bytes from src (n must be equal on every rank). */
int lt_dist_broadcast_bytes(lt_ctx *c, void *buf, size_t n, int src);
/* n doubles reduced element-wise across ranks, in place (mean: sum / world_size). */
int lt_dist_allreduce_scalars(lt_ctx *c, double *v, int n, lt_dist_op op);
/* In-place all-reduce of the values of n tensors (float32 and float64: packed into buckets of bucket_bytes,
 * one dtype per bucket, each reduced with MPI_Iallreduce while the next is packed; int64: one by one,
 * sum/max/min). */
int lt_dist_allreduce(lt_ctx *c, int n, lt_tensor *const *ts, lt_dist_op op, size_t bucket_bytes);

/* ---- the gradient reducer ------------------------------------------------------------------------- */
/* Buckets are filled in reverse parameter order (the order backward finishes them), one open bucket per
 * dtype (float32, float64: a bucket never mixes them; int64 tensors are refused naming the dtype). A bucket is sent
 * (MPI_Iallreduce) when all its parameters are ready, and buckets are always sent in index order, so
 * every rank issues the same collectives in the same order whatever order its gradients became ready.
 * With grads = 1 the reducer reduces params[i]->grad (a parameter without a gradient counts as zeros;
 * one that has no gradient on any rank keeps none); with grads = 0 it reduces the tensors' own values. */
typedef struct lt_dist_reducer lt_dist_reducer;

typedef struct lt_dist_stats {
  int64_t steps;        /* finish() calls */
  int64_t buckets;      /* buckets sent in total */
  int64_t bytes;        /* bytes all-reduced in total (per rank, payload) */
  int64_t bytes_copied; /* gradient bytes copied into buckets (0 once gradients are views of them) */
  double wait_seconds;  /* time spent waiting for reductions to complete (not overlapped) */
  double pack_seconds;  /* time packing and unpacking buckets */
  double total_seconds; /* from the first bucket_ready of a step to the end of finish(), summed */
} lt_dist_stats;

lt_dist_reducer *lt_dist_reducer_new(lt_ctx *c, int n, lt_tensor *const *params, size_t bucket_bytes, lt_dist_op op,
                                     int grads);
/* Parameter i (0-based) has its final gradient (values) for this step: its bucket may be sent. */
int lt_dist_bucket_ready(lt_ctx *c, lt_dist_reducer *r, int i);
/* Marks every parameter not yet ready, waits for every bucket, writes the reduced values back, and
 * resets the reducer for the next step. */
int lt_dist_reducer_finish(lt_ctx *c, lt_dist_reducer *r);
/* Attaches the reducer to c's backward (c->grad_hook): a backward that reaches any of its parameters
 * marks each one ready as its gradient becomes final (so buckets are sent while backward goes on) and,
 * at its end, finishes the reduction: gradients hold the mean over ranks when backward() returns. One
 * reducer per context; attaching another replaces it. lt_dist_reducer_free detaches. */
int lt_dist_reducer_attach(lt_ctx *c, lt_dist_reducer *r);
void lt_dist_reducer_detach(lt_dist_reducer *r);
int lt_dist_reducer_nbuckets(const lt_dist_reducer *r);
void lt_dist_reducer_stats(const lt_dist_reducer *r, lt_dist_stats *s);
void lt_dist_reducer_free(lt_dist_reducer *r);

#endif
