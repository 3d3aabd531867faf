/*
 * lutra_mpi.c — lutra/mpi.so: every MPI call lutra makes (the table of core/src/lt_mpi.h). dist.c loads
 * this module with dlopen the first time lt.distributed needs MPI, so that nothing else links libmpi.
 */
#include <mpi.h>
#include <stdlib.h>

#include "lt_mpi.h"

static MPI_Op op_of(lt_mpi_op op) { return op == LT_MPI_MAX ? MPI_MAX : op == LT_MPI_MIN ? MPI_MIN : MPI_SUM; }

static int m_initialized(void) {
  int f = 0;
  MPI_Initialized(&f);
  return f;
}
static int m_finalized(void) {
  int f = 0;
  MPI_Finalized(&f);
  return f;
}
static int m_init_thread_funneled(void) {
  int provided = 0;
  return MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) == MPI_SUCCESS ? 0 : -1;
}
static void m_finalize(void) { MPI_Finalize(); }
static void m_comm_world(int *rank, int *size) {
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
}
static void m_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }
static void m_barrier(void) { MPI_Barrier(MPI_COMM_WORLD); }
static void m_bcast_bytes(void *buf, int n, int src) { MPI_Bcast(buf, n, MPI_BYTE, src, MPI_COMM_WORLD); }
static void m_allgather_i64(const int64_t *mine, int k, int64_t *all) {
  MPI_Allgather(mine, k, MPI_INT64_T, all, k, MPI_INT64_T, MPI_COMM_WORLD);
}
static void m_allreduce_f64(double *v, int n, lt_mpi_op op) {
  MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, op_of(op), MPI_COMM_WORLD);
}
static void m_allreduce_i64(int64_t *v, int n, lt_mpi_op op) {
  MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, op_of(op), MPI_COMM_WORLD);
}
static char done_request; /* out of memory for a request: the reduction was made blocking, and is done */

static void *m_iallreduce(void *v, int n, lt_mpi_type type, lt_mpi_op op) {
  MPI_Datatype t = type == LT_MPI_DOUBLE ? MPI_DOUBLE : MPI_FLOAT;
  MPI_Request *req = malloc(sizeof *req);
  if (!req) {
    MPI_Allreduce(MPI_IN_PLACE, v, n, t, op_of(op), MPI_COMM_WORLD);
    return &done_request;
  }
  MPI_Iallreduce(MPI_IN_PLACE, v, n, t, op_of(op), MPI_COMM_WORLD, req);
  return req;
}
static int m_test(void *req) {
  if (req == &done_request) return 1;
  int flag = 0;
  MPI_Test(req, &flag, MPI_STATUS_IGNORE);
  if (flag) free(req);
  return flag;
}
static void m_wait(void *req) {
  if (req == &done_request) return;
  MPI_Wait(req, MPI_STATUS_IGNORE);
  free(req);
}

static const lt_mpi_api api = {
  LT_MPI_API_VERSION, m_initialized,   m_finalized,     m_init_thread_funneled,
  m_finalize,         m_comm_world,    m_abort,         m_barrier,
  m_bcast_bytes,      m_allgather_i64, m_allreduce_f64, m_allreduce_i64,
  m_iallreduce,       m_test,          m_wait,
};

__attribute__((visibility("default"))) const lt_mpi_api *lutra_mpi_api(void);
const lt_mpi_api *lutra_mpi_api(void) { return &api; }
