/* cpus.c — how many CPUs this process can use. sysconf's online count is the machine's, not the process's: a
 * process started under `taskset -c 0`, in a container's cpuset or with a CPU quota (`docker --cpus=2`,
 * systemd's CPUQuota=) that starts one compute thread per online CPU only makes its threads take turns on the
 * CPUs it has, and lutra's pool and OpenBLAS's threads then wait for each other at every job. */
#include "lt_cpus.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int lt_cpus_from_cfs(long long quota_us, long long period_us) {
  if (quota_us <= 0 || period_us <= 0) return 0; /* -1: no limit */
  long long n = (quota_us + period_us - 1) / period_us;
  return n > 4096 ? 4096 : (int)n;
}

int lt_cpus_from_cpu_max(const char *line) {
  long long quota, period = 100000;
  if (!line || strncmp(line, "max", 3) == 0) return 0;
  if (sscanf(line, "%lld %lld", &quota, &period) < 1) return 0;
  return lt_cpus_from_cfs(quota, period);
}

static int read_line(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int ok = fgets(buf, (int)n, f) != NULL;
  fclose(f);
  return ok;
}

/* The process's cgroup path for a v1 controller ("cpu") or v2 (controller NULL: the "0::" line). */
static int cgroup_path(const char *controller, char *out, size_t n) {
  FILE *f = fopen("/proc/self/cgroup", "r");
  if (!f) return 0;
  char line[512];
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) {
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) continue;
    *c2 = 0;
    const char *ctrls = c1 + 1, *path = c2 + 1;
    if (controller) {
      for (char *tok = strtok((char *)ctrls, ","); tok && !found; tok = strtok(NULL, ","))
        found = strcmp(tok, controller) == 0;
    } else {
      found = strncmp(line, "0", 1) == 0 && *ctrls == 0;
    }
    if (found) {
      snprintf(out, n, "%s", path);
      out[strcspn(out, "\n")] = 0;
    }
  }
  fclose(f);
  return found;
}

/* The smallest quota on the way from the process's cgroup up to the root (a limit set on a parent applies). */
static int cgroup_quota(void) {
  char rel[400], path[512], buf[128];
  int best = 0;
  if (cgroup_path(NULL, rel, sizeof rel)) { /* v2 */
    for (;;) {
      snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.max", strcmp(rel, "/") == 0 ? "" : rel);
      if (read_line(path, buf, sizeof buf)) {
        int q = lt_cpus_from_cpu_max(buf);
        if (q > 0 && (best == 0 || q < best)) best = q;
      }
      char *slash = strrchr(rel, '/');
      if (!slash || slash == rel) break;
      *slash = 0;
    }
    if (best) return best;
  }
  static const char *const roots[] = { "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu" };
  if (cgroup_path("cpu", rel, sizeof rel)) /* v1 */
    for (size_t r = 0; r < sizeof roots / sizeof *roots && !best; r++) {
      char q[64], p[64];
      snprintf(path, sizeof path, "%s%s/cpu.cfs_quota_us", roots[r], strcmp(rel, "/") == 0 ? "" : rel);
      if (!read_line(path, q, sizeof q)) continue;
      snprintf(path, sizeof path, "%s%s/cpu.cfs_period_us", roots[r], strcmp(rel, "/") == 0 ? "" : rel);
      if (!read_line(path, p, sizeof p)) continue;
      best = lt_cpus_from_cfs(atoll(q), atoll(p));
    }
  return best;
}

int lt_cpus_affinity(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  return CPU_COUNT(&set);
}

int lt_cpus_available(const char **why) {
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  int n = online > 0 ? (int)online : 1;
  const char *reason = "online";
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int a = CPU_COUNT(&set);
    if (a > 0 && a < n) {
      n = a;
      reason = "affinity";
    }
  }
  int q = cgroup_quota();
  if (q > 0 && q < n) {
    n = q;
    reason = "cgroup quota";
  }
  if (why) *why = reason;
  return n;
}
