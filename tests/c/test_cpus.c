/* test_cpus.c — the CPU count lutra starts with (core/src/cpus.c): cgroup quota lines parsed and rounded up, no
 * limit read as none, and an affinity mask narrower than the machine narrows the count. */
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "lt_cpus.h"

#include "check.h"

int main(void) {
  CHECK(lt_cpus_from_cpu_max("max 100000\n") == 0, "cpu.max 'max' is no limit");
  CHECK(lt_cpus_from_cpu_max("200000 100000\n") == 2, "cpu.max 2 CPUs");
  CHECK(lt_cpus_from_cpu_max("150000 100000\n") == 2, "cpu.max 1.5 CPUs rounds up to 2");
  CHECK(lt_cpus_from_cpu_max("50000 100000\n") == 1, "cpu.max half a CPU is 1");
  CHECK(lt_cpus_from_cpu_max("") == 0, "an empty cpu.max is no limit");
  CHECK(lt_cpus_from_cfs(-1, 100000) == 0, "cfs quota -1 is no limit");
  CHECK(lt_cpus_from_cfs(300000, 100000) == 3, "cfs quota 3 CPUs");
  CHECK(lt_cpus_from_cfs(300000, 0) == 0, "cfs period 0 is ignored");

  const char *why = NULL;
  int all = lt_cpus_available(&why);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  CHECK(all >= 1 && all <= online, "available CPUs between 1 and the online count");
  CHECK(why && (strcmp(why, "online") == 0 || strcmp(why, "affinity") == 0 || strcmp(why, "cgroup quota") == 0),
        "a reason is given");

  cpu_set_t one;
  CPU_ZERO(&one);
  cpu_set_t mine;
  sched_getaffinity(0, sizeof mine, &mine);
  int first = 0;
  while (first < CPU_SETSIZE && !CPU_ISSET(first, &mine)) first++;
  CPU_SET(first, &one);
  if (sched_setaffinity(0, sizeof one, &one) == 0) {
    CHECK(lt_cpus_available(&why) == 1, "an affinity mask of one CPU gives 1");
    CHECK(online == 1 || strcmp(why, "affinity") == 0, "... and says why");
    sched_setaffinity(0, sizeof mine, &mine);
    CHECK(lt_cpus_available(NULL) == all, "the count follows the mask back");
  } else {
    CHECK(1, "sched_setaffinity refused here: mask case skipped");
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
