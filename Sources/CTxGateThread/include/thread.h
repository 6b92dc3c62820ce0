#pragma once
/// The calling thread's CPUs and name: glibc's `sched_getaffinity`, `pthread_setaffinity_np`
/// and `pthread_setname_np` are GNU extensions, which Swift's Glibc module leaves out, and the
/// `cpu_set_t` macros cannot be called from Swift.

/// Writes the numbers of the CPUs the process may run on (its main thread's affinity mask, as
/// `taskset` or a container's cpuset set it), in increasing order, into
/// `cpus` (at most `capacity` of them). Returns how many there are, which may exceed
/// `capacity`, or -errno.
int txgate_allowed_cpus(int *cpus, int capacity);

/// CPU numbers go up to this (exclusive): the largest mask the kernel is asked with.
#define TXGATE_MAX_CPUS (1 << 20)

/// Restricts the calling thread to the `count` CPUs in `cpus` (each below TXGATE_MAX_CPUS).
/// Returns 0, or an errno value.
int txgate_set_current_thread_cpus(const int *cpus, int count);

/// Names the calling thread for the kernel (`top -H`, `/proc/PID/task/TID/comm`), cut to the
/// 15 bytes the kernel keeps. Returns 0, or an errno value.
int txgate_name_current_thread(const char *name);
