import CMimalloc
import Glibc

/// The allocator this executable runs on: mimalloc, linked into it (Package.swift's CMimalloc).
///
/// A proxy allocates and frees many small objects per request (heads, strings, closures, store
/// records) in bursts larger than glibc's per-thread cache keeps (7 blocks a size), so glibc's
/// malloc spent a share of every request merging and sorting free lists. mimalloc keeps free
/// lists per page and per thread: 7 % fewer instructions per step-up cycle on Redis, 5 % on
/// SQLite, 1 % per proxied request, the same resident memory (bench/RESULTS.md, docs/ARCHITECTURE.md).
/// The library exports malloc and free itself; naming one of its functions here keeps the linker
/// from dropping it as unused.
enum Allocator {
    /// Before the gateway starts: memory freed is given back to the system at once. mimalloc
    /// otherwise waits 25 ms and gives it back only when the thread next allocates, so a worker
    /// gone quiet after a burst of large bodies kept them resident (SlowRequestTests: 180 MB
    /// still held 30 s after the body timeout freed them). `MIMALLOC_DECOMMIT_DELAY` set in the
    /// environment is kept.
    static func configure() {
        if getenv("MIMALLOC_DECOMMIT_DELAY") == nil { mi_option_set(mi_option_decommit_delay, 0) }
    }

    /// "mimalloc 2.0.9", once a block from `malloc` is seen to lie in mimalloc's heap; a
    /// build whose linker put the C library's `malloc` first says so instead.
    static var description: String {
        let v = Int(mi_version())
        let version = "mimalloc \(v / 100).\(v / 10 % 10).\(v % 10)"
        let probe = malloc(16)
        defer { free(probe) }
        return mi_is_in_heap_region(probe) ? version : "glibc malloc (\(version) linked but not serving malloc)"
    }
}
