/* lt_cpus.h — how many CPUs this process can actually use (core/src/cpus.c). */
#ifndef LT_CPUS_H
#define LT_CPUS_H

/* The thread count lutra starts with: the online CPUs, narrowed by the process's affinity mask and by its
 * cgroup's CPU quota (rounded up), at least 1. `why` (may be NULL) receives a short reason for lt.blas_info():
 * "online", "affinity", "cgroup quota". */
int lt_cpus_available(const char **why);
/* The CPUs in the calling thread's affinity mask (one system call: cheap enough for lutra's pool to re-check it
 * every few hundred jobs), 0 when it cannot be read. */
int lt_cpus_affinity(void);

/* The parsing behind it, exposed for tests: the quota in CPUs (rounded up) of a cgroup v2 `cpu.max` line
 * ("max 100000", "150000 100000") or of v1's quota and period; 0 when there is no limit. */
int lt_cpus_from_cpu_max(const char *line);
int lt_cpus_from_cfs(long long quota_us, long long period_us);

#endif
