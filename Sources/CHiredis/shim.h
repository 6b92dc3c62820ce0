#ifndef TXGATE_CHIREDIS_SHIM_H
#define TXGATE_CHIREDIS_SHIM_H
/* libevent through CLibevent's shim first (which itself starts with OpenSSL's), so that the
 * system headers all three include are defined in one module only. */
#include "../CLibevent/shim.h"
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <stdlib.h>

/* hiredis's async context on a libevent base: hiredis's own adapter (adapters/libevent.h)
 * with two changes that save system calls on every command.
 *
 * - The read event is persistent: added once, not deleted and added again around every reply
 *   (two epoll_ctl calls per reply).
 * - A command does not wait for the socket to be reported writable: the write event is made
 *   active (event_active), so hiredis writes at the end of the current loop turn, without
 *   registering with epoll, and every command queued in that turn goes out in one write. Only
 *   when the socket does not take everything (hiredis asks again from its write callback) does
 *   the event wait for writability for real.
 *
 * Nothing is touched after redisAsyncHandleRead/Write return: hiredis may free the context
 * (and these events, in cleanup) inside them. */

enum { TXGATE_REDIS_WRITE_IDLE, TXGATE_REDIS_WRITE_ACTIVATED, TXGATE_REDIS_WRITE_WRITING, TXGATE_REDIS_WRITE_WAITING };

typedef struct txgateRedisEvents {
    redisAsyncContext *context;
    struct event *rev, *wev;
    int reading;
    int write;
} txgateRedisEvents;

static void txgate_redis_read_event(evutil_socket_t fd, short what, void *arg) {
    (void)fd; (void)what;
    txgateRedisEvents *e = (txgateRedisEvents *)arg;
    redisAsyncHandleRead(e->context);
}

static void txgate_redis_write_event(evutil_socket_t fd, short what, void *arg) {
    (void)fd; (void)what;
    txgateRedisEvents *e = (txgateRedisEvents *)arg;
    /* Not pending any more (libevent removes a non-persistent event as it runs it). hiredis
     * now asks for delWrite (all written) or addWrite (the socket is full: wait for real). */
    e->write = TXGATE_REDIS_WRITE_WRITING;
    redisAsyncHandleWrite(e->context);
}

static void txgate_redis_add_read(void *privdata) {
    txgateRedisEvents *e = (txgateRedisEvents *)privdata;
    if (!e->reading) { event_add(e->rev, NULL); e->reading = 1; }
}

static void txgate_redis_del_read(void *privdata) {
    txgateRedisEvents *e = (txgateRedisEvents *)privdata;
    if (e->reading) { event_del(e->rev); e->reading = 0; }
}

static void txgate_redis_add_write(void *privdata) {
    txgateRedisEvents *e = (txgateRedisEvents *)privdata;
    switch (e->write) {
    case TXGATE_REDIS_WRITE_IDLE:
        event_active(e->wev, EV_WRITE, 1);
        e->write = TXGATE_REDIS_WRITE_ACTIVATED;
        break;
    case TXGATE_REDIS_WRITE_WRITING:
        event_add(e->wev, NULL);
        e->write = TXGATE_REDIS_WRITE_WAITING;
        break;
    default:
        break; /* already on its way */
    }
}

static void txgate_redis_del_write(void *privdata) {
    txgateRedisEvents *e = (txgateRedisEvents *)privdata;
    if (e->write == TXGATE_REDIS_WRITE_ACTIVATED || e->write == TXGATE_REDIS_WRITE_WAITING) event_del(e->wev);
    e->write = TXGATE_REDIS_WRITE_IDLE;
}

static void txgate_redis_cleanup(void *privdata) {
    txgateRedisEvents *e = (txgateRedisEvents *)privdata;
    event_free(e->rev);
    event_free(e->wev);
    free(e);
}

static int txgate_redis_attach(redisAsyncContext *ac, struct event_base *base) {
    if (ac->ev.data != NULL) return REDIS_ERR;
    txgateRedisEvents *e = (txgateRedisEvents *)calloc(1, sizeof(*e));
    if (e == NULL) return REDIS_ERR;
    e->context = ac;
    e->rev = event_new(base, ac->c.fd, EV_READ | EV_PERSIST, txgate_redis_read_event, e);
    e->wev = event_new(base, ac->c.fd, EV_WRITE, txgate_redis_write_event, e);
    if (e->rev == NULL || e->wev == NULL) {
        if (e->rev) event_free(e->rev);
        if (e->wev) event_free(e->wev);
        free(e);
        return REDIS_ERR;
    }
    ac->ev.addRead = txgate_redis_add_read;
    ac->ev.delRead = txgate_redis_del_read;
    ac->ev.addWrite = txgate_redis_add_write;
    ac->ev.delWrite = txgate_redis_del_write;
    ac->ev.cleanup = txgate_redis_cleanup;
    ac->ev.data = e;
    /* Connecting: both wait for the socket, as in hiredis's adapter. */
    event_add(e->rev, NULL);
    e->reading = 1;
    event_add(e->wev, NULL);
    e->write = TXGATE_REDIS_WRITE_WAITING;
    return REDIS_OK;
}
#endif
