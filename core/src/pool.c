/* pool.c — lutra's pool of compute threads (see lt_pool.h): a job is n parts claimed by the caller and the
 * workers; an idle worker spins on the job word for a few microseconds, then parks on a futex.
 *
 * The caller waits for the job's parts, not for the workers: a worker that is asleep, or whose core another
 * process holds, costs the caller nothing once the caller has run the parts itself (waiting for every
 * worker to check in cost up to a scheduler slice on a busy 2-core machine: a 20 us add ran 110 us). A part
 * is claimed by one compare-and-swap on a word that names the job, so a worker that wakes after its job
 * ended claims nothing, and one that claims a part sees that job's fields.
 *
 * Waiting never calls sched_yield: on a shared machine a yielding thread is runnable all the time, so each
 * yield is a system call and a trip through the scheduler that takes slices from the threads doing work
 * (ours and other processes'): ~14-21k sched_yield calls per 200 MLP steps from this pool and OpenBLAS's
 * threads, and 24-34% of the samples of a GPT or LSTM step under load. A worker spins with `pause` (no
 * system call, the core stays ours only for SPIN_NS), then sleeps in futex_wait until the next job; the
 * caller does the same while a worker finishes a part it claimed. */
#include "lt_pool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lt_cpus.h"
#include "lt_fpmode.h"
#include "lt_gemm_bf16.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define POOL_X86 1
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#define MAX_WORKERS 63
/* How long an idle worker spins before it parks, and how long the caller spins before it sleeps on a part
 * still running on a worker. The back-to-back jobs of an optimizer step or an element-wise chain come within a
 * few microseconds of each other, and a futex wake plus the worker's return to run costs ~5-10 us, so a spin of
 * some microseconds catches them without a wake-up. Measured with bench/wait.py (2, 20 and 100 us, MLP b64 and
 * GPT steps, on the 2-vCPU EPYC at load 15-17: bench/RESULTS.md): no length won on both workloads beyond the
 * noise (within +-25% wall, +-13% CPU); 20 us is the middle, short enough that an idle worker is asleep during
 * the GEMMs that follow and never holds a shared core for long.
 *
 * A worker whose spin caught its last job spins longer for the next (SPIN_LONG_NS): inside a training step the
 * gaps between jobs (a batch gathered, the loss, Lua between layers) run 20-100 us, and each one a parked worker
 * missed cost the next GEMM the wake-up, as the caller's half waited for the worker's (MLP b64 on the quiet Zen 4
 * VM: 1099 -> 1036 us a step with the long spin). A spin that runs out (the program paused between steps, an
 * interactive session) parks the worker and the next spin is short again, so an idle process spins 200 us once. */
#define SPIN_NS 20000L
#define SPIN_LONG_NS 200000L
/* Every RECHECK_JOBS jobs the pool re-reads the CPUs the process may use (one sched_getaffinity: ~1 us), and
 * every RECHECK_QUOTA re-checks the cgroup quota as well (a few file reads): a mask or quota changed while
 * the process runs (taskset -p, a container resized) takes effect within that many jobs. */
#define RECHECK_JOBS 512
#define RECHECK_QUOTA 16

typedef struct worker {
  pthread_t th;
  int index; /* 1 .. workers */
  int running;
  unsigned start_gen; /* the job generation when it was started */
} worker;

/* Process-wide by nature: threads belong to the process. */
static struct {
  pthread_mutex_t run_lock; /* one job at a time; a second caller runs its job alone */
  atomic_uint gen;          /* job generation: the futex idle workers park on */
  atomic_int sleepers;      /* workers parked (or about to) on gen */
  _Atomic uint64_t claim;   /* job number << 32 | nparts << 16 | next part to claim */
  atomic_uint done;         /* parts of the current job finished: the futex the caller sleeps on */
  atomic_int caller_waits;  /* the caller sleeps on done: the worker finishing a part wakes it */
  uint32_t job;             /* the current job's number */
  int want;                 /* threads asked for (lt_pool_set_threads), including the caller; 0: all available */
  int avail;                /* CPUs the process may use, re-read every RECHECK_JOBS jobs */
  unsigned checks;          /* re-checks done (the quota is re-read every RECHECK_QUOTA of them) */
  int nworkers;             /* workers running */
  atomic_int quit_from;     /* workers with index >= quit_from leave at the next job (read by the others too) */
  lt_pool_fn fn;
  void *arg;
  int nparts;
  unsigned csr;       /* the job's MXCSR: the caller's, with FTZ/DAZ when flush_denormal */
  int flush_denormal; /* lt_pool_set_flush_denormal */
  int gemm_mode;      /* the caller's GEMM precision (lt_gemm_bf16.h: autocast), the job's on every thread */
  worker w[MAX_WORKERS];
} P = { .run_lock = PTHREAD_MUTEX_INITIALIZER, .want = 1, .flush_denormal = 1, .quit_from = MAX_WORKERS + 1 };

static long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void futex_wait(atomic_uint *word, unsigned seen) {
  syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0); /* returns at once if changed */
}
static void futex_wake(atomic_uint *word, int n) {
  syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* Spins until *word differs from seen or limit_ns pass; returns the value seen last. The clock is read every
 * 64 pauses (a pause is ~40-140 cycles on current x86). */
static unsigned spin_while(atomic_uint *word, unsigned seen, long limit_ns) {
  long t0 = 0;
  for (int spins = 0;; spins++) {
    unsigned v = atomic_load_explicit(word, memory_order_acquire);
    if (v != seen) return v;
    if ((spins & 63) == 0) {
      long t = now_ns();
      if (!t0) t0 = t;
      else if (t - t0 > limit_ns) return v;
    }
    cpu_relax();
  }
}

#define MAX_PARTS 0xffff
/* Set while this thread runs a part of a job: a GEMM or kernel inside the part then asks for one thread
 * (lt_pool_threads), as the nested job would run on it alone anyway (lt_pool_run's trylock), and sizes its work
 * for one thread instead of splitting it into parts that run one after the other. */
static __thread int in_part;

/* Claims and runs parts of the current job until none is left; a worker copies the caller's MXCSR first. */
static void run_parts(int is_worker) {
  uint64_t w = atomic_load_explicit(&P.claim, memory_order_acquire);
  for (;;) {
    int n = (int)(w >> 16 & MAX_PARTS), i = (int)(w & MAX_PARTS);
    if (i >= n) return;
    if (!atomic_compare_exchange_weak_explicit(&P.claim, &w, w + 1, memory_order_acq_rel, memory_order_acquire))
      continue; /* w now holds the current word */
                /* the job cannot finish before this part does, so its fields stay as the claim word published them */
#ifdef POOL_X86
    if (is_worker && _mm_getcsr() != P.csr) _mm_setcsr(P.csr);
#endif
    if (is_worker && lt_gemm_bf16_mode() != P.gemm_mode) lt_gemm_bf16_set_mode(P.gemm_mode);
    in_part = 1;
    P.fn(P.arg, i, n);
    in_part = 0;
    if (is_worker) {
      /* seq_cst with the caller's store of caller_waits and its re-check of done: either it sees this part
       * done, or this load sees it waiting */
      atomic_fetch_add(&P.done, 1);
      if (atomic_load(&P.caller_waits)) futex_wake(&P.done, 1);
    } else {
      atomic_fetch_add_explicit(&P.done, 1, memory_order_release);
    }
    w = atomic_load_explicit(&P.claim, memory_order_acquire);
  }
}

static void *worker_main(void *arg) {
  worker *me = arg;
  unsigned seen = me->start_gen;
  long spin = SPIN_NS;
  for (;;) {
    unsigned g = spin_while(&P.gen, seen, spin);
    spin = g != seen ? SPIN_LONG_NS : SPIN_NS; /* caught while spinning: the jobs come close together */
    while (g == seen) {
      atomic_fetch_add(&P.sleepers, 1); /* seq_cst: the waker's gen++ then sleepers load sees it, or ... */
      futex_wait(&P.gen, seen);         /* ... this wait sees the new gen and returns at once */
      atomic_fetch_sub(&P.sleepers, 1);
      g = atomic_load_explicit(&P.gen, memory_order_acquire);
    }
    seen = g;
    /* (published by the gen increment, which this thread's acquire load of gen saw) */
    if (me->index >= atomic_load_explicit(&P.quit_from, memory_order_relaxed)) return NULL;
    run_parts(1);
  }
}

/* Wakes the workers to look at a new generation (a job, or the order to leave). */
static void wake_workers(void) {
  atomic_fetch_add(&P.gen, 1);
  if (atomic_load(&P.sleepers) > 0) futex_wake(&P.gen, INT_MAX);
}

/* Publishes the job whose fields are set, wakes the workers, runs parts itself and waits until every part is
 * done (spinning first, then asleep until the worker finishing the last part wakes it). Called with run_lock
 * held. */
static void run_job(void) {
  atomic_store_explicit(&P.done, 0, memory_order_relaxed);
  P.job++;
  atomic_store_explicit(&P.claim, (uint64_t)P.job << 32 | (uint64_t)P.nparts << 16, memory_order_release);
  wake_workers();
  run_parts(0);
  unsigned want = (unsigned)P.nparts, d = atomic_load_explicit(&P.done, memory_order_acquire);
  long t0 = 0;
  for (int spins = 0; d < want; spins++) { /* spin while the workers' last parts finish, up to SPIN_NS */
    if ((spins & 63) == 0) {
      long t = now_ns();
      if (!t0) t0 = t;
      else if (t - t0 > SPIN_NS) break;
    }
    cpu_relax();
    d = atomic_load_explicit(&P.done, memory_order_acquire);
  }
  while (d < want) {
    atomic_store(&P.caller_waits, 1);
    d = atomic_load(&P.done);
    if (d < want) futex_wait(&P.done, d);
    atomic_store_explicit(&P.caller_waits, 0, memory_order_relaxed);
    d = atomic_load_explicit(&P.done, memory_order_acquire);
  }
}

/* A forked child has none of the parent's threads: it starts its own at its first job. */
static void after_fork_child(void) {
  pthread_mutex_init(&P.run_lock, NULL);
  atomic_store(&P.sleepers, 0);
  atomic_store(&P.caller_waits, 0);
  for (int i = 0; i < P.nworkers; i++) P.w[i].running = 0;
  P.nworkers = 0;
}

/* The threads a job runs on: the count asked for, at most the CPUs available (0 asked: all of them). */
static int target(void) {
  if (P.avail <= 0) P.avail = lt_cpus_available(NULL);
  int n = P.want > 0 && P.want < P.avail ? P.want : P.avail;
  return n < 1 ? 1 : n > MAX_WORKERS + 1 ? MAX_WORKERS + 1 : n;
}

/* Starts or stops workers to match target(). Called with run_lock held, no job running. */
static void resize(void) {
  static int atfork;
  if (!atfork) atfork = pthread_atfork(NULL, NULL, after_fork_child) == 0;
  int n = target() - 1;
  if (n < P.nworkers) {
    atomic_store_explicit(&P.quit_from, n + 1, memory_order_relaxed);
    wake_workers(); /* workers n+1.. leave; the others find no part to claim */
    for (int i = n; i < P.nworkers; i++)
      if (P.w[i].running) {
        pthread_join(P.w[i].th, NULL);
        P.w[i].running = 0;
      }
    atomic_store_explicit(&P.quit_from, MAX_WORKERS + 1, memory_order_relaxed);
    P.nworkers = n;
  }
  while (P.nworkers < n) {
    worker *w = &P.w[P.nworkers];
    w->index = P.nworkers + 1;
    w->start_gen = atomic_load(&P.gen);
    sigset_t old;
    lt_spawn_mask(&old);
    int bad = pthread_create(&w->th, NULL, worker_main, w) != 0;
    lt_spawn_unmask(&old);
    if (bad) break; /* no more threads: run with what we have */
    w->running = 1;
    P.nworkers++;
  }
}

/* Every RECHECK_JOBS jobs: the affinity mask (and every RECHECK_QUOTA checks the cgroup quota) again. */
static void recheck(void) {
  if (P.job % RECHECK_JOBS != 0) return;
  if (++P.checks % RECHECK_QUOTA == 0) {
    P.avail = lt_cpus_available(NULL);
    return;
  }
  int a = lt_cpus_affinity();
  if (a > 0 && a != P.avail) P.avail = lt_cpus_available(NULL); /* the quota may still cap the new mask */
}

void lt_pool_set_threads(int n) {
  if (n < 0) n = 0;
  if (n > MAX_WORKERS + 1) n = MAX_WORKERS + 1;
  pthread_mutex_lock(&P.run_lock);
  P.want = n;
  P.avail = lt_cpus_available(NULL);
  if (target() - 1 < P.nworkers) resize(); /* stop extra workers now; new ones start with the next job */
  pthread_mutex_unlock(&P.run_lock);
}

int lt_pool_threads(void) {
  if (in_part) return 1; /* a job started inside a part runs on its caller alone (lt_pool_run) */
  int n = P.want > 0 && (P.avail <= 0 || P.want < P.avail) ? P.want : P.avail;
  return n < 1 ? 1 : n;
}

int lt_pool_workers(void) { return P.nworkers; }

int lt_pool_parts(int threads, int64_t work, int64_t min_work) {
  int nt = lt_pool_threads();
  if (threads < nt) nt = threads;
  if (work < min_work || nt <= 1) return 1;
  int64_t parts = work / (min_work / 2 > 0 ? min_work / 2 : 1);
  return parts < nt ? nt : parts > 4 * nt ? 4 * nt : (int)parts;
}

void lt_pool_set_flush_denormal(int on) { P.flush_denormal = on != 0; }

void lt_pool_run(lt_pool_fn fn, void *arg, int nparts) {
  unsigned fp = lt_fp_enter(P.flush_denormal); /* lutra's mode for the whole job, on every thread of it */
  if (nparts <= 1 || nparts > MAX_PARTS || P.want == 1 || pthread_mutex_trylock(&P.run_lock) != 0) {
    for (int i = 0; i < nparts; i++) fn(arg, i, nparts); /* in_part unchanged: these parts are the caller's own */
  } else {
    recheck();
    if (P.nworkers != target() - 1) resize();
    P.fn = fn;
    P.arg = arg;
    P.nparts = nparts;
    P.gemm_mode = lt_gemm_bf16_mode();
#ifdef POOL_X86
    P.csr = _mm_getcsr();
#endif
    if (P.nworkers == 0) {
      P.job++;
      in_part = 1;
      for (int i = 0; i < nparts; i++) fn(arg, i, nparts);
      in_part = 0;
    } else {
      run_job();
    }
    pthread_mutex_unlock(&P.run_lock);
  }
  lt_fp_leave(fp);
}

typedef struct pool_for_job {
  lt_pool_range_fn fn;
  void *arg;
  int64_t n, align;
} pool_for_job;

static void pool_for_part(void *arg, int i, int nparts) {
  const pool_for_job *j = arg;
  int64_t lo, hi;
  lt_pool_range(j->n, i, nparts, j->align, &lo, &hi);
  if (lo < hi) j->fn(j->arg, lo, hi);
}

void lt_pool_for(int nparts, int64_t n, int64_t align, lt_pool_range_fn fn, void *arg) {
  if (n <= 0) return;
  if (nparts <= 1) {
    fn(arg, 0, n);
    return;
  }
  pool_for_job j = { fn, arg, n, align };
  lt_pool_run(pool_for_part, &j, nparts);
}

/* Workers run this library's code: stop them before it is unloaded (a Lua state closing lutra/core.so) or the
 * process ends. */
__attribute__((destructor)) static void pool_fini(void) { lt_pool_set_threads(1); }
