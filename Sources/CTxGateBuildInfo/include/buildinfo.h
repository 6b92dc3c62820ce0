#pragma once
/// The git commit this binary was built from, or "unknown". Set at build time through the
/// environment variable TXGATE_COMMIT (read by Package.swift; `make build` sets it).
const char *txgate_build_commit(void);
