import Glibc
import CLibevent

/// A request or response body: bytes in an evbuffer owned by EventHTTP. Moving a body to a
/// client or an upstream hands over the evbuffer's chains (no copy); reading `bytes` copies,
/// for the small bodies the gateway inspects (JSON, forms).
///
/// A body belongs to the loop whose connection filled it, like the connection itself.
public final class Body {
    /// Made on the first write: most requests (a GET) have no body, and an evbuffer costs an
    /// allocation and its release.
    private var storage: OpaquePointer?

    /// The evbuffer, made if there is none yet (for writing into it).
    var buffer: OpaquePointer {
        if let storage { return storage }
        guard let b = evbuffer_new() else { fatalError("evbuffer_new failed: out of memory") }
        storage = b
        return b
    }

    /// An empty body.
    public init() {}

    public convenience init(_ bytes: [UInt8]) {
        self.init()
        append(bytes)
    }

    deinit { if let storage { evbuffer_free(storage) } }

    /// The number of bytes.
    public var count: Int { storage.map { evbuffer_get_length($0) } ?? 0 }

    public var isEmpty: Bool { count == 0 }

    /// A copy of the whole body.
    public var bytes: [UInt8] {
        let n = count
        guard n > 0, let storage else { return [] }
        return [UInt8](unsafeUninitializedCapacity: n) { out, copied in
            copied = max(0, evbuffer_copyout(storage, out.baseAddress, n))
        }
    }

    /// The bytes where they lie, if they lie in one piece (nil if empty or in several); valid
    /// until the body next changes.
    var contiguousBytes: UnsafeRawBufferPointer? {
        guard let storage else { return nil }
        let n = evbuffer_get_length(storage)
        var first = iovec()
        guard n > 0, evbuffer_peek(storage, -1, nil, &first, 1) >= 1, first.iov_len == n else { return nil }
        return UnsafeRawBufferPointer(start: first.iov_base, count: n)
    }

    public func append(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        EvBuffer.append(buffer, bytes)
    }

    public func append(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        _ = evbuffer_add(buffer, base, bytes.count)
    }

    public func append(_ string: String) {
        guard !string.isEmpty else { return }
        EvBuffer.append(buffer, string)
    }

    /// Moves everything to the end of `other`, leaving this body empty (no copy).
    public func moveAll(to other: Body) {
        guard let storage, evbuffer_get_length(storage) > 0 else { return }
        evbuffer_add_buffer(other.buffer, storage)
    }

    /// Moves everything to the end of the evbuffer `output`, leaving this body empty (no copy).
    func moveAll(to output: OpaquePointer) {
        guard let storage else { return }
        evbuffer_add_buffer(output, storage)
    }

    /// Takes the first `n` bytes of the evbuffer `input` (no copy).
    func take(_ n: Int, from input: OpaquePointer) { evbuffer_remove_buffer(input, buffer, n) }

    /// Takes all of the evbuffer `input` (no copy).
    func takeAll(from input: OpaquePointer) { evbuffer_add_buffer(buffer, input) }

    public func removeAll() {
        guard let storage else { return }
        evbuffer_drain(storage, evbuffer_get_length(storage))
    }
}

/// Small helpers for moving bytes in and out of evbuffers, inside EventHTTP.
enum EvBuffer {
    static func append(_ buffer: OpaquePointer, _ string: String) {
        string.withUTF8Bytes { _ = evbuffer_add(buffer, $0.baseAddress, $0.count) }
    }

    static func append(_ buffer: OpaquePointer, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { _ = evbuffer_add(buffer, $0.baseAddress, $0.count) }
    }

    /// Finds `needle` in the buffer; the offset of its first byte, or nil. A head or a chunk
    /// line nearly always lies in the first chain: `memmem` there (about a third of the
    /// instructions of `evbuffer_search`, which walks the buffer through `evbuffer_ptr`s), and
    /// `evbuffer_search` only when more chains follow, since the needle may straddle them.
    static func search(_ buffer: OpaquePointer, _ needle: StaticString) -> Int? {
        var first = iovec()
        guard evbuffer_peek(buffer, -1, nil, &first, 1) >= 1, let base = first.iov_base else { return nil }
        if let hit = find(needle, in: UnsafeRawBufferPointer(start: base, count: first.iov_len)) { return hit }
        if first.iov_len == evbuffer_get_length(buffer) { return nil }
        let p = evbuffer_search(buffer, UnsafeRawPointer(needle.utf8Start).assumingMemoryBound(to: CChar.self),
                                needle.utf8CodeUnitCount, nil)
        return p.pos < 0 ? nil : p.pos
    }

    /// The offset of `needle` in `bytes`: `memchr` for its first byte, then the rest compared.
    static func find(_ needle: StaticString, in bytes: UnsafeRawBufferPointer) -> Int? {
        let n = needle.utf8CodeUnitCount
        guard n > 0, let base = bytes.baseAddress, bytes.count >= n else { return nil }
        let first = Int32(needle.utf8Start[0])
        var from = 0
        while from <= bytes.count - n, let hit = memchr(base + from, first, bytes.count - n + 1 - from) {
            let at = base.distance(to: UnsafeRawPointer(hit))
            if memcmp(hit, needle.utf8Start, n) == 0 { return at }
            from = at + 1
        }
        return nil
    }
}

extension Body {
    /// Appends this body to the evbuffer `output` by reference, so that it stays whole for
    /// a retry; copied only when libevent cannot reference it.
    func reference(into output: OpaquePointer) {
        guard !isEmpty, let storage else { return }
        if evbuffer_add_buffer_reference(output, storage) != 0 {
            _ = evbuffer_add(output, evbuffer_pullup(storage, -1), count)
        }
    }
}
