#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>
#include "thread.h"

int txgate_allowed_cpus(int *cpus, int capacity) {
    // The kernel refuses a mask smaller than its own CPU count (EINVAL): start at glibc's
    // default size and double it until the mask fits.
    for (int possible = CPU_SETSIZE; possible <= TXGATE_MAX_CPUS; possible *= 2) {
        cpu_set_t *set = CPU_ALLOC(possible);
        if (set == NULL) return -ENOMEM;
        size_t size = CPU_ALLOC_SIZE(possible);
        CPU_ZERO_S(size, set);
        // The process's main thread's mask (its id is the process's), whichever thread asks.
        if (sched_getaffinity(getpid(), size, set) != 0) {
            int error = errno;
            CPU_FREE(set);
            if (error == EINVAL) continue;
            return -error;
        }
        int count = 0;
        for (int cpu = 0; cpu < possible; cpu++) {
            if (!CPU_ISSET_S(cpu, size, set)) continue;
            if (count < capacity) cpus[count] = cpu;
            count++;
        }
        CPU_FREE(set);
        return count;
    }
    return -EINVAL;
}

int txgate_set_current_thread_cpus(const int *cpus, int count) {
    int highest = -1;
    for (int i = 0; i < count; i++) {
        if (cpus[i] < 0 || cpus[i] >= TXGATE_MAX_CPUS) return EINVAL;
        if (cpus[i] > highest) highest = cpus[i];
    }
    if (highest < 0) return EINVAL;
    cpu_set_t *set = CPU_ALLOC(highest + 1);
    if (set == NULL) return ENOMEM;
    size_t size = CPU_ALLOC_SIZE(highest + 1);
    CPU_ZERO_S(size, set);
    for (int i = 0; i < count; i++) CPU_SET_S(cpus[i], size, set);
    int result = pthread_setaffinity_np(pthread_self(), size, set);
    CPU_FREE(set);
    return result;
}

int txgate_name_current_thread(const char *name) {
    char cut[16];
    strncpy(cut, name, sizeof cut - 1);
    cut[sizeof cut - 1] = '\0';
    return pthread_setname_np(pthread_self(), cut);
}
