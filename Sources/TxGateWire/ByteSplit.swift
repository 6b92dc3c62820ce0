/// `split(separator:)` on one ASCII byte, for the syntaxes of HTTP, URLs, cookies and JWTs,
/// which are defined on bytes. Splitting by `Character` walks grapheme clusters, which costs
/// tens of instructions a byte: a journey step's authId and a composite advice's query are
/// kilobytes long, and cookies and queries come with every request.
extension String {
    public func split(byte separator: UInt8, maxSplits: Int = .max, omittingEmptySubsequences: Bool = true) -> [Substring] {
        self[...].split(byte: separator, maxSplits: maxSplits, omittingEmptySubsequences: omittingEmptySubsequences)
    }
}

extension Substring {
    public func split(byte separator: UInt8, maxSplits: Int = .max, omittingEmptySubsequences: Bool = true) -> [Substring] {
        // The generic `split` over the UTF-8 view costs ~60 instructions a byte; over the
        // contiguous bytes of a native string the search is a plain loop, and a UTF-8 index moved
        // by an offset is O(1).
        let view = utf8
        let fast = view.withContiguousStorageIfAvailable { bytes -> [Substring] in
            var parts: [Substring] = []
            let base = view.startIndex
            func add(_ from: Int, _ to: Int) {
                if omittingEmptySubsequences && from == to { return }
                // Room for a path's or a list's few parts at once (growing from one part costs
                // an allocation and a copy at each doubling).
                if parts.isEmpty { parts.reserveCapacity(8) }
                parts.append(Substring(view[view.index(base, offsetBy: from)..<view.index(base, offsetBy: to)]))
            }
            var start = 0
            if maxSplits > 0 {
                for i in 0..<bytes.count where bytes[i] == separator {
                    if !(omittingEmptySubsequences && start == i) {
                        add(start, i)
                        if parts.count == maxSplits { start = i + 1; break }
                    }
                    start = i + 1
                }
            }
            add(start, bytes.count)
            return parts
        }
        return fast ?? view.split(separator: separator, maxSplits: maxSplits,
                                  omittingEmptySubsequences: omittingEmptySubsequences).map(Substring.init)
    }
}
