#ifndef TXGATE_CLIBEVENT_SHIM_H
#define TXGATE_CLIBEVENT_SHIM_H
#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <event2/util.h>
#endif
