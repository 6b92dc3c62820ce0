#ifndef TXGATE_CHIREDIS_SHIM_H
#define TXGATE_CHIREDIS_SHIM_H
/* libevent through CLibevent's shim first (which itself starts with OpenSSL's), so that the
 * system headers all three include are defined in one module only. */
#include "../CLibevent/shim.h"
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libevent.h>
#endif
