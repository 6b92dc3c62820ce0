#ifndef TXGATE_CLIBEVENT_SHIM_H
#define TXGATE_CLIBEVENT_SHIM_H
/* OpenSSL's module first: bufferevent_ssl.h works with its types, and importing it here means
 * the system headers both libraries include (sys/select.h's fd_set, ...) are defined once, in
 * COpenSSL, instead of once per module, which clang may refuse to merge. */
#include "../COpenSSL/shim.h"
#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <event2/util.h>
/* malloc_trim: EventHTTP gives the memory of dropped request bodies back to the system. */
#include <malloc.h>
/* accept4 is a GNU extension, which Swift's Glibc module leaves out. The listener takes each
 * connection non-blocking and close-on-exec in the accept itself (no fcntl calls after it). */
extern int accept4(int fd, struct sockaddr *addr, socklen_t *length, int flags);
static inline int txg_accept_nonblocking(int fd, struct sockaddr *addr, socklen_t *length) {
    return accept4(fd, addr, length, SOCK_NONBLOCK | SOCK_CLOEXEC);
}
#endif
