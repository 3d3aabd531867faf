/* pool.c — lutra's pool of compute threads (see lt_pool.h): a job is n parts claimed by the caller and the
 * workers; idle workers yield their core for a while, then sleep.
 *
 * The caller waits for the job's parts, not for the workers: a worker that is asleep, or whose core another
 * process holds, costs the caller nothing once the caller has run the parts itself (waiting for every
 * worker to check in cost up to a scheduler slice on a busy 2-core machine: a 20 us add ran 110 us). A part
 * is claimed by one compare-and-swap on a word that names the job, so a worker that wakes after its job
 * ended claims nothing, and one that claims a part sees that job's fields. */
#include "lt_pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "lt_fpmode.h"
#include "lt_gemm_bf16.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define POOL_X86 1
#endif

#define MAX_WORKERS 63
/* How long an idle worker stays awake, yielding, before it sleeps: long enough to bridge the back-to-back jobs
 * of one optimizer step, short enough to be asleep during the GEMMs that follow (on 2 cores a yielding worker
 * still takes slices from OpenBLAS's threads: an MLP step at batch 64 ran ~5% slower with 200 us). */
#define AWAKE_NS 50000L

typedef struct worker {
  pthread_t th;
  int index; /* 1 .. workers */
  int running;
  unsigned start_gen; /* the job generation when it was started */
} worker;

/* Process-wide by nature: threads belong to the process. */
static struct {
  pthread_mutex_t run_lock;   /* one job at a time; a second caller runs its job alone */
  pthread_mutex_t sleep_lock; /* sleeping workers wait on `wake` under this lock */
  pthread_cond_t wake;
  atomic_uint gen; /* job generation: a worker looks for parts when it sees gen change */
  atomic_int sleepers;
  _Atomic uint64_t claim; /* job number << 32 | nparts << 16 | next part to claim */
  atomic_int done;        /* parts of the current job finished */
  uint32_t job;           /* the current job's number */
  int want;               /* threads asked for (lt_pool_set_threads), including the caller */
  int nworkers;           /* workers running */
  int quit_from;          /* workers with index >= quit_from leave at the next job */
  lt_pool_fn fn;
  void *arg;
  int nparts;
  unsigned csr;       /* the job's MXCSR: the caller's, with FTZ/DAZ when flush_denormal */
  int flush_denormal; /* lt_pool_set_flush_denormal */
  int gemm_mode;      /* the caller's GEMM precision (lt_gemm_bf16.h: autocast), the job's on every thread */
  worker w[MAX_WORKERS];
} P = { .run_lock = PTHREAD_MUTEX_INITIALIZER,
        .sleep_lock = PTHREAD_MUTEX_INITIALIZER,
        .wake = PTHREAD_COND_INITIALIZER,
        .want = 1,
        .flush_denormal = 1,
        .quit_from = MAX_WORKERS + 1 };

static long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

#define MAX_PARTS 0xffff

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
#else
    (void)is_worker;
#endif
    if (is_worker && lt_gemm_bf16_mode() != P.gemm_mode) lt_gemm_bf16_set_mode(P.gemm_mode);
    P.fn(P.arg, i, n);
    atomic_fetch_add_explicit(&P.done, 1, memory_order_release);
    w = atomic_load_explicit(&P.claim, memory_order_acquire);
  }
}

static void *worker_main(void *arg) {
  worker *me = arg;
  unsigned seen = me->start_gen;
  for (;;) {
    unsigned g;
    long t0 = now_ns();
    for (int spins = 0; (g = atomic_load_explicit(&P.gen, memory_order_acquire)) == seen; spins++) {
      sched_yield();
      if ((spins & 15) != 15 || now_ns() - t0 < AWAKE_NS) continue;
      pthread_mutex_lock(&P.sleep_lock);
      atomic_fetch_add(&P.sleepers, 1);
      while (atomic_load_explicit(&P.gen, memory_order_acquire) == seen) pthread_cond_wait(&P.wake, &P.sleep_lock);
      atomic_fetch_sub(&P.sleepers, 1);
      pthread_mutex_unlock(&P.sleep_lock);
    }
    seen = g;
    if (me->index >= P.quit_from) return NULL;
    run_parts(1);
  }
}

/* Wakes the workers to look at a new generation (a job, or the order to leave). */
static void wake_workers(void) {
  atomic_fetch_add_explicit(&P.gen, 1, memory_order_release);
  if (atomic_load(&P.sleepers) > 0) {
    pthread_mutex_lock(&P.sleep_lock);
    pthread_cond_broadcast(&P.wake);
    pthread_mutex_unlock(&P.sleep_lock);
  }
}

/* Publishes the job whose fields are set, wakes the workers, runs parts itself and waits until every part is
 * done. Called with run_lock held. */
static void run_job(void) {
  atomic_store_explicit(&P.done, 0, memory_order_relaxed);
  P.job++;
  atomic_store_explicit(&P.claim, (uint64_t)P.job << 32 | (uint64_t)P.nparts << 16, memory_order_release);
  wake_workers();
  run_parts(0);
  for (int spins = 0; atomic_load_explicit(&P.done, memory_order_acquire) < P.nparts; spins++) {
#ifdef POOL_X86
    if (spins < 256) {
      _mm_pause();
      continue;
    }
#endif
    sched_yield();
  }
}

/* A forked child has none of the parent's threads: it starts its own at its first job. */
static void after_fork_child(void) {
  pthread_mutex_init(&P.run_lock, NULL);
  pthread_mutex_init(&P.sleep_lock, NULL);
  pthread_cond_init(&P.wake, NULL);
  atomic_store(&P.sleepers, 0);
  for (int i = 0; i < P.nworkers; i++) P.w[i].running = 0;
  P.nworkers = 0;
}

/* Starts or stops workers to match P.want. Called with run_lock held, no job running. */
static void resize(void) {
  static int atfork;
  if (!atfork) atfork = pthread_atfork(NULL, NULL, after_fork_child) == 0;
  int n = P.want - 1;
  if (n < P.nworkers) {
    P.quit_from = n + 1;
    wake_workers(); /* workers n+1.. leave; the others find no part to claim */
    for (int i = n; i < P.nworkers; i++)
      if (P.w[i].running) {
        pthread_join(P.w[i].th, NULL);
        P.w[i].running = 0;
      }
    P.quit_from = MAX_WORKERS + 1;
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
    if (bad) {
      P.want = P.nworkers + 1; /* no more threads: run with what we have */
      break;
    }
    w->running = 1;
    P.nworkers++;
  }
}

void lt_pool_set_threads(int n) {
  if (n < 1) n = 1;
  if (n > MAX_WORKERS + 1) n = MAX_WORKERS + 1;
  pthread_mutex_lock(&P.run_lock);
  P.want = n;
  if (n - 1 < P.nworkers) resize(); /* stop extra workers now; new ones start with the next job */
  pthread_mutex_unlock(&P.run_lock);
}

int lt_pool_threads(void) { return P.want; }

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
  if (nparts <= 1 || nparts > MAX_PARTS || P.want <= 1 || pthread_mutex_trylock(&P.run_lock) != 0) {
    for (int i = 0; i < nparts; i++) fn(arg, i, nparts);
  } else {
    if (P.nworkers != P.want - 1) resize();
    P.fn = fn;
    P.arg = arg;
    P.nparts = nparts;
    P.gemm_mode = lt_gemm_bf16_mode();
#ifdef POOL_X86
    P.csr = _mm_getcsr();
#endif
    run_job();
    pthread_mutex_unlock(&P.run_lock);
  }
  lt_fp_leave(fp);
}

/* Workers run this library's code: stop them before it is unloaded (a Lua state closing lutra/core.so) or the
 * process ends. */
__attribute__((destructor)) static void pool_fini(void) { lt_pool_set_threads(1); }
