/* test_pool_wait.c — how lutra's pool waits (core/src/pool.c): a caller whose worker is still on a part sleeps
 * instead of burning its core; idle workers stop using CPU (read per thread from /proc/self/task/N/stat); no
 * wake-up is lost over thousands of jobs that meet the workers spinning, parking and asleep; the worker count
 * follows a changed affinity mask. Needs 2 CPUs for the parts that need a worker (skipped with a note if not). */
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lt_pool.h"

#include "check.h"

static pthread_t caller;
static atomic_int worker_started;

static double thread_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_us(long us) {
  struct timespec ts = { us / 1000000, us % 1000000 * 1000 };
  nanosleep(&ts, NULL);
}

/* A part on the caller returns once a worker has started the other part (polling in 1 ms sleeps, at most
 * 2 s: a worker that never comes is a lost wake-up); a part on a worker sleeps `arg` microseconds. */
static void meet(void *arg, int i, int n) {
  (void)i;
  (void)n;
  if (pthread_equal(pthread_self(), caller)) {
    for (int k = 0; k < 2000 && !atomic_load(&worker_started); k++) sleep_us(k < 50 ? 20 : 1000);
  } else {
    atomic_store(&worker_started, 1);
    sleep_us(*(long *)arg);
  }
}

/* utime + stime (clock ticks) of every thread but the caller's */
static long workers_ticks(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  long sum = 0;
  pid_t me = (pid_t)gettid();
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || atoi(e->d_name) == me) continue;
    char path[300], buf[1024];
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = 0;
    char *p = strrchr(buf, ')'); /* fields after the command name: state is field 3, utime 14, stime 15 */
    long ut = 0, st = 0;
    if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &ut, &st) == 2) sum += ut + st;
  }
  closedir(d);
  return sum;
}

static void nothing(void *arg, int i, int n) {
  (void)arg;
  (void)i;
  (void)n;
}

int main(void) {
  caller = pthread_self();
  lt_pool_set_threads(2);
  nothing(NULL, 0, 0);
  lt_pool_run(nothing, NULL, 2);
  if (lt_pool_threads() < 2) {
    printf("# one CPU available: the waiting cases need a worker, skipped\n");
    CHECK(lt_pool_workers() == 0, "one CPU: no worker started");
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
  }

  /* the caller sleeps while the worker finishes its part: 150 ms of waiting cost the caller's thread well
   * under 150 ms of CPU (a caller that yields in a loop is busy all that time) */
  {
    long part_us = 150000;
    atomic_store(&worker_started, 0);
    double c0 = thread_cpu();
    lt_pool_run(meet, &part_us, 2);
    double used = thread_cpu() - c0;
    printf("# caller CPU while its worker ran a 150 ms part: %.4f s\n", used);
    CHECK(atomic_load(&worker_started), "the worker took a part");
    CHECK(used < 0.01, "the caller sleeps while waiting for a worker's part");
  }

  /* idle workers park: after a job their CPU time stops growing */
  {
    lt_pool_run(nothing, NULL, 2);
    sleep_us(50000);
    long t0 = workers_ticks();
    sleep_us(300000);
    long t1 = workers_ticks();
    printf("# workers' CPU over 0.3 s idle: %ld ticks\n", t1 - t0);
    CHECK(t0 >= 0 && t1 - t0 <= 1, "idle workers use no CPU (/proc/self/task/N/stat)");
  }

  /* no lost wake-up: 3000 jobs, each needing the worker, after pauses around the time a worker spins before it
   * parks (0 to ~200 us) and parts of varying length (so the caller too spins, or sleeps, as it waits) */
  {
    int lost = 0;
    unsigned seed = 12345;
    for (int r = 0; r < 3000; r++) {
      seed = seed * 1103515245u + 12345u;
      long pause = (long)(seed >> 16) % 200, part_us = (long)(seed >> 8) % 60;
      if (pause > 5) sleep_us(pause);
      atomic_store(&worker_started, 0);
      lt_pool_run(meet, &part_us, 2);
      lost += !atomic_load(&worker_started);
    }
    printf("# jobs whose worker never came: %d of 3000\n", lost);
    CHECK(lost == 0, "no lost wake-up over 3000 jobs (worker spinning, parking or asleep)");
  }

  /* the worker count follows the affinity mask: narrowed to one CPU, the pool stops its worker within a few
   * hundred jobs; widened again, it starts one again */
  {
    cpu_set_t mine, one;
    sched_getaffinity(0, sizeof mine, &mine);
    CPU_ZERO(&one);
    for (int k = 0; k < CPU_SETSIZE; k++)
      if (CPU_ISSET(k, &mine)) {
        CPU_SET(k, &one);
        break;
      }
    if (sched_setaffinity(0, sizeof one, &one) == 0) {
      for (int r = 0; r < 2000; r++) lt_pool_run(nothing, NULL, 2);
      CHECK(lt_pool_threads() == 1 && lt_pool_workers() == 0, "one CPU in the mask: the pool runs on the caller alone");
      sched_setaffinity(0, sizeof mine, &mine);
      for (int r = 0; r < 2000; r++) lt_pool_run(nothing, NULL, 2);
      CHECK(lt_pool_threads() == 2 && lt_pool_workers() == 1, "the mask widened again: the worker is back");
    } else {
      CHECK(1, "sched_setaffinity refused here: mask case skipped");
    }
  }

  lt_pool_set_threads(1);
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
