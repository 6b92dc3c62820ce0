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
    /// On a worker's thread, 100 ms after it dropped a large request body unfinished
    /// (`Gateway.returnFreedMemory`, `HTTPServer.releaseMemorySoon`, which calls glibc's
    /// `malloc_trim` otherwise): gives back to the system what the thread freed. mimalloc does
    /// it 25 ms after a free, but only when the same thread next allocates, so a worker gone
    /// quiet after a burst of stalled bodies kept them resident (SlowRequestTests: 180 MB still
    /// held 30 s after the body timeout freed them). Giving memory back at every free instead
    /// (a decommit delay of 0) made each large body fault its pages in again: 30 to 50 % more
    /// CPU per 256 KiB POST.
    @Sendable static func returnFreedMemory() {
        mi_collect(true)
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
