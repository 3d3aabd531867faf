/*
 * lt_mpi.h — the MPI calls lutra makes, as a table of functions. MPI lives in a separate module
 * (lutra/mpi.so, core/mpi/lutra_mpi.c, built only where MPI's headers are installed) that dist.c loads
 * with dlopen on first use: loading lutra never loads MPI, and core.so, liblutra.a and liblutra.so do not
 * link libmpi. The module exports `const lt_mpi_api *lutra_mpi_api(void)`.
 */
#ifndef LT_MPI_H
#define LT_MPI_H

#include <stdint.h>

#define LT_MPI_API_VERSION 2

typedef enum { LT_MPI_SUM, LT_MPI_MAX, LT_MPI_MIN } lt_mpi_op;
typedef enum { LT_MPI_FLOAT, LT_MPI_DOUBLE } lt_mpi_type; /* a bucket's element type (MPI_FLOAT, MPI_DOUBLE) */

typedef struct lt_mpi_api {
  int version;                       /* LT_MPI_API_VERSION */
  int (*initialized)(void);          /* MPI_Initialized */
  int (*finalized)(void);            /* MPI_Finalized */
  int (*init_thread_funneled)(void); /* MPI_Init_thread(FUNNELED): 0 on success */
  void (*finalize)(void);
  void (*comm_world)(int *rank, int *size);
  void (*abort)(int code);
  void (*barrier)(void);
  void (*bcast_bytes)(void *buf, int n, int src);
  void (*allgather_i64)(const int64_t *mine, int k, int64_t *all);     /* k values per rank */
  void (*allreduce_f64)(double *v, int n, lt_mpi_op op);               /* in place */
  void (*allreduce_i64)(int64_t *v, int n, lt_mpi_op op);              /* in place */
  void *(*iallreduce)(void *v, int n, lt_mpi_type type, lt_mpi_op op); /* in place; a request for test/wait */
  int (*test)(void *req);                                              /* 1 when complete (the request is freed then) */
  void (*wait)(void *req);                                             /* waits and frees the request */
} lt_mpi_api;

#endif
