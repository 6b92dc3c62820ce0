#pragma once
/// The calling thread's CPUs and name: glibc's `sched_getaffinity`, `pthread_setaffinity_np`
/// and `pthread_setname_np` are GNU extensions, which Swift's Glibc module leaves out, and the
/// `cpu_set_t` macros cannot be called from Swift.

/// Writes the numbers of the CPUs the calling thread may run on (at start-up: the process's
/// affinity mask, as `taskset` or a container's cpuset set it), in increasing order, into
/// `cpus` (at most `capacity` of them). Returns how many there are, which may exceed
/// `capacity`, or -errno.
int txgate_allowed_cpus(int *cpus, int capacity);

/// Restricts the calling thread to CPU `cpu`. Returns 0, or an errno value.
int txgate_pin_current_thread(int cpu);

/// Names the calling thread for the kernel (`top -H`, `/proc/PID/task/TID/comm`), cut to the
/// 15 bytes the kernel keeps. Returns 0, or an errno value.
int txgate_name_current_thread(const char *name);
