/*
 * lt_pool.h — lutra's pool of compute threads for its own kernels (process-wide by nature: threads belong to
 * the process). GEMMs are threaded by OpenBLAS; this pool runs what OpenBLAS does not, such as optimizer
 * updates over large parameters (memory-bound: two cores stream about twice the bytes of one).
 *
 * lt_pool_run(fn, arg, n) calls fn(arg, i, n) for i = 0 .. n-1 on the calling thread and the workers, each
 * thread claiming the next part when it finishes one, and returns when all are done. Workers copy the
 * caller's flush-to-zero state. Waiting gives the CPU back: an idle worker spins (no system call) for ~20 us,
 * 200 us while its spins keep catching jobs, so it picks up the next job of a training step at once, then parks on a futex until the next job; the
 * caller does the same while a worker finishes its last part. Nothing waits in sched_yield. The pool also
 * runs lutra's large GEMMs (core/src/blas.c): OpenBLAS itself runs on one thread, so no second pool of
 * threads spins beside this one.
 *
 * The thread count follows the CPUs the process may use: the count asked for, at most the CPUs in the
 * affinity mask and the cgroup quota (lt_cpus.h), re-checked every few hundred jobs, so a mask or quota
 * changed while the process runs takes effect without a restart.
 *
 *   static void part(void *arg, int i, int n) { ... elements i*len/n .. (i+1)*len/n ... }
 *   lt_pool_run(part, &args, lt_pool_threads());
 *
 * Workers start on the first job. A job submitted while another is running (two host threads, or a part of a job
 * starting one) runs on its caller alone.
 */
#ifndef LT_POOL_H
#define LT_POOL_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>

typedef void (*lt_pool_fn)(void *arg, int part, int nparts);

/* Total threads including the caller (1 = no workers; 0 = every CPU available, following changes); takes
 * effect at the next job, capped by the CPUs available. */
void lt_pool_set_threads(int n);
/* The threads the next job may run on (the count set, capped by the CPUs available when last checked); 1 inside a
 * part of a job, whose nested jobs run on the thread running the part. */
int lt_pool_threads(void);
/* Workers running now (threads besides the caller; they start at the first job after a change). */
int lt_pool_workers(void);
void lt_pool_run(lt_pool_fn fn, void *arg, int nparts);
/* Whether a job runs with denormals flushed (FTZ/DAZ) on every thread of it, the caller's included for the
 * job's length (default 1; lt.set_flush_denormal). The caller's own mode is back when lt_pool_run returns. */
void lt_pool_set_flush_denormal(int on);

/* How many parts to split a kernel into: 1 below min_work units of work (a job hand-off costs a few
 * microseconds, more when a worker has gone to sleep); else the caller's thread policy capped by the pool,
 * and up to 4 parts per thread while each keeps at least min_work / 2, so a worker that wakes late, or
 * shares its core, takes what is left instead of holding the caller up with a whole half. In pool.c, not inline
 * here: it reads the pool's size, and the call it replaces (lt_pool_threads) was one already. */
int lt_pool_parts(int threads, int64_t work, int64_t min_work);

/* Part i of [0, n) split into nparts ranges whose starts are multiples of align (64-byte lines for floats at
 * align 16), so two threads never write the same cache line of an aligned buffer. */
static inline void lt_pool_range(int64_t n, int i, int nparts, int64_t align, int64_t *lo, int64_t *hi) {
  int64_t per = (n + nparts - 1) / nparts;
  per = (per + align - 1) / align * align;
  *lo = i * per < n ? i * per : n;
  *hi = *lo + per < n ? *lo + per : n;
}

/* lt_pool_run over ranges: fn(arg, lo, hi) for the nparts ranges of [0, n) that lt_pool_range gives (empty ones
 * skipped); nparts <= 1: fn(arg, 0, n) on the caller. For the short loops around a kernel's parallel body (a
 * weight's repacking, partial sums added up) that would otherwise leave the other threads waiting. */
typedef void (*lt_pool_range_fn)(void *arg, int64_t lo, int64_t hi);
void lt_pool_for(int nparts, int64_t n, int64_t align, lt_pool_range_fn fn, void *arg);
/* The threads lutra starts (its pool, OpenBLAS's) never take SIGPROF: a sampling profiler's signal (LuaJIT's
 * jit.profile, the advanced profiler of lua/lutra/trainer/profilers.lua) must reach the thread running Lua; a worker
 * taking it leaves LuaJIT's profile hook half set and the sampling stops. Wrap thread creation in these: the
 * new threads inherit the blocked signal, the caller's mask is restored. */
static inline void lt_spawn_mask(sigset_t *old) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGPROF);
  pthread_sigmask(SIG_BLOCK, &s, old);
}
static inline void lt_spawn_unmask(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

#endif
