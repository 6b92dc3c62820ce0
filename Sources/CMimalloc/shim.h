#ifndef TXGATE_CMIMALLOC_SHIM_H
#define TXGATE_CMIMALLOC_SHIM_H
#include <mimalloc.h>
#endif
