/* The CPUs a process's CPU quota allows: a container's CPU limit
 * (Kubernetes' limits.cpu, docker --cpus), which sched_getaffinity does not
 * show, and under which threads spinning on every CPU it does show would
 * spend the quota and have the whole process throttled. */
#ifndef PINFAST_CPU_QUOTA_H
#define PINFAST_CPU_QUOTA_H

/* The least quota over the process's cgroup and those above it, in CPUs,
 * rounded up (at least 1); 0: no quota, or none readable. */
int pf_cpu_quota(void);

/* `cpus` held to a quota of pf_cpu_quota's (0: none). */
static inline int pf_cpus_within(int cpus, int quota) { return quota && quota < cpus ? quota : cpus; }

#endif
