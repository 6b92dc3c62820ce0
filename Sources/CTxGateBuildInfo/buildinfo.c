#include "buildinfo.h"

// TXGATE_COMMIT is defined by Package.swift from the environment variable of the same name
// (`make build` sets it from git); a plain `swift build` leaves it unset.
#ifndef TXGATE_COMMIT
#define TXGATE_COMMIT "unknown"
#endif

const char *txgate_build_commit(void) { return TXGATE_COMMIT; }
