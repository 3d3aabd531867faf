/* test_pool.c — lutra's thread pool (core/src/pool.c) without Lua: every part runs exactly once whatever the
 * thread count, a job flushes denormals on every thread unless turned off (then it follows the caller's
 * state) and leaves the caller's state as it was, the count changes up and down between jobs,
 * two host threads submitting at once both finish, a job started inside a part asks for one thread, a forked child
 * runs jobs, and idle workers sleep. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lt_fpmode.h"
#include "lt_pool.h"

#include "check.h"

#define NPARTS 64
typedef struct job {
  atomic_int count[NPARTS];
  atomic_int threads_seen;
  pthread_t who[NPARTS];
  int ftz[NPARTS];
} job;

static void part(void *arg, int i, int n) {
  job *j = arg;
  (void)n;
  atomic_fetch_add(&j->count[i], 1);
  j->who[i] = pthread_self();
  int was = lt_set_flush_denormal(1); /* read the state, then put it back */
  lt_set_flush_denormal(was);
  j->ftz[i] = was;
  volatile double x = 0; /* a little work, so that the workers get parts too */
  for (int k = 0; k < 20000; k++) x += k;
}

static int run_and_check(int nparts, int *distinct_threads) {
  job j; /* on the caller's stack: two submitting threads each have their own */
  memset(&j, 0, sizeof j);
  lt_pool_run(part, &j, nparts);
  int ok = 1;
  for (int i = 0; i < nparts; i++) ok &= atomic_load(&j.count[i]) == 1;
  int distinct = 0;
  for (int i = 0; i < nparts; i++) {
    int seen = 0;
    for (int k = 0; k < i; k++) seen |= pthread_equal(j.who[k], j.who[i]);
    distinct += !seen;
  }
  if (distinct_threads) *distinct_threads = distinct;
  return ok;
}

/* Runs a job of NPARTS parts; 1 when every part saw FTZ/DAZ in the state `want`. */
static int job_ftz_everywhere(int want) {
  static job j;
  memset(&j, 0, sizeof j);
  lt_pool_run(part, &j, NPARTS);
  int all = 1;
  for (int i = 0; i < NPARTS; i++) all &= j.ftz[i] == want;
  return all;
}

/* A part asks for the threads a job started inside it may use (1: it would run on this thread alone), runs such a
 * job, and records both; the caller's count is read after the outer job. */
typedef struct nested {
  atomic_int inner_threads_max, inner_parts, outer_parts;
} nested;
static void inner_part(void *arg, int i, int n) {
  (void)i, (void)n;
  atomic_fetch_add(&((nested *)arg)->inner_parts, 1);
}
static void outer_part(void *arg, int i, int n) {
  nested *s = arg;
  (void)i, (void)n;
  int t = lt_pool_threads();
  if (t > atomic_load(&s->inner_threads_max)) atomic_store(&s->inner_threads_max, t);
  lt_pool_run(inner_part, s, 4);
  atomic_fetch_add(&s->outer_parts, 1);
  volatile double x = 0;
  for (int k = 0; k < 20000; k++) x += k;
}

static void *submitter(void *arg) {
  int *ok = arg;
  *ok = 1;
  for (int r = 0; r < 50; r++) *ok &= run_and_check(NPARTS, NULL);
  return NULL;
}

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void) {
  lt_pool_set_threads(1);
  int d = 0;
  CHECK(run_and_check(NPARTS, &d) && d == 1, "one thread: every part once, on the caller");
  lt_pool_set_threads(3);
  {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int want = online < 3 ? (int)online : 3;
    CHECK(lt_pool_threads() <= 3 && lt_pool_threads() >= 1 && (online < 1 || lt_pool_threads() <= want),
          "lt_pool_threads reports the count asked for, at most the CPUs available");
  }
  int ok = 1, most = 0;
  for (int r = 0; r < 20; r++) {
    ok &= run_and_check(NPARTS, &d);
    if (d > most) most = d;
  }
  CHECK(ok, "three threads: every part exactly once, 20 jobs in a row");
  CHECK(most >= 2, "parts ran on more than one thread");
  CHECK(run_and_check(1, NULL) && run_and_check(2, NULL) && run_and_check(0, NULL) == 1, "1, 2 and 0 parts");

  /* a job runs in lutra's mode (FTZ/DAZ) on every thread, the caller's included, and gives the caller its own
   * mode back; with lt_pool_set_flush_denormal(0) the job follows the caller's mode */
  {
    int was = lt_set_flush_denormal(0);
    CHECK(job_ftz_everywhere(1), "FTZ off in the caller: on in every part of the job");
    CHECK(lt_set_flush_denormal(0) == 0, "FTZ off in the caller again after the job");
    lt_pool_set_flush_denormal(0);
    CHECK(job_ftz_everywhere(0), "flushing turned off, FTZ off in the caller: off in every part");
    lt_set_flush_denormal(1);
    CHECK(job_ftz_everywhere(1), "flushing turned off, FTZ on in the caller: on in every part");
    lt_pool_set_flush_denormal(1);
    lt_set_flush_denormal(was);
  }

  lt_pool_set_threads(2);
  CHECK(run_and_check(NPARTS, NULL), "down to 2 threads between jobs");
  {
    nested s;
    memset(&s, 0, sizeof s);
    lt_pool_run(outer_part, &s, 8);
    CHECK(atomic_load(&s.inner_threads_max) == 1 && atomic_load(&s.inner_parts) == 32 &&
              atomic_load(&s.outer_parts) == 8,
          "inside a part: one thread for a nested job, whose parts all run");
    CHECK(lt_pool_threads() == lt_pool_workers() + 1, "outside the job again: the pool's count");
  }
  lt_pool_set_threads(4);
  CHECK(run_and_check(NPARTS, NULL), "up to 4 threads between jobs");

  /* two host threads submitting at once: one gets the pool, the other runs alone; both finish */
  {
    pthread_t a, b;
    int oka = 0, okb = 0;
    pthread_create(&a, NULL, submitter, &oka);
    pthread_create(&b, NULL, submitter, &okb);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    CHECK(oka && okb, "two submitting threads: every part of every job exactly once");
  }

  /* a forked child has no workers of its parent, and still runs jobs */
  {
    pid_t pid = fork();
    if (pid == 0) _exit(run_and_check(NPARTS, NULL) && run_and_check(NPARTS, NULL) ? 0 : 1);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a forked child runs jobs");
  }

  /* idle workers sleep: after a job, the process uses (almost) no CPU */
  {
    run_and_check(NPARTS, NULL);
    struct timespec pause = { 0, 300 * 1000000L };
    nanosleep(&pause, NULL); /* past the time workers stay awake */
    double c0 = cpu_seconds();
    pause.tv_nsec = 200 * 1000000L;
    nanosleep(&pause, NULL);
    double used = cpu_seconds() - c0;
    printf("# idle CPU over 0.2 s: %.4f s\n", used);
    CHECK(used < 0.02, "idle workers sleep");
  }

  /* the split helpers of the kernels: ranges tile [0, n) in order with aligned starts; small work stays whole */
  {
    static const int64_t ns[] = { 0, 1, 15, 16, 17, 1000, 130813 };
    int ok = 1;
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
      for (int nparts = 1; nparts <= 5; nparts++)
        for (int64_t align = 1; align <= 16; align += 15) {
          int64_t at = 0, lo, hi;
          for (int i = 0; i < nparts; i++) {
            lt_pool_range(ns[k], i, nparts, align, &lo, &hi);
            ok &= lo == at && lo <= hi && (lo % align == 0 || lo == ns[k]);
            at = hi;
          }
          ok &= at == ns[k];
        }
    CHECK(ok, "lt_pool_range: parts tile [0, n) in order, starts aligned");
    lt_pool_set_threads(2);
    CHECK(lt_pool_parts(2, 999, 1000) == 1 && lt_pool_parts(2, 1000, 1000) == 2 && lt_pool_parts(2, 1600, 1000) == 3 &&
              lt_pool_parts(8, 5000, 1000) == 8 && lt_pool_parts(8, 2000, 1000) == 4 &&
              lt_pool_parts(1, 5000, 1000) == 1,
          "lt_pool_parts: one part below the minimum work, else at least the thread policy capped by the pool, "
          "up to 4 parts a thread of at least half the minimum each");
  }

  lt_pool_set_threads(1);
  CHECK(run_and_check(NPARTS, NULL), "back to 1 thread: workers stopped, jobs still run");
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
