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
        utf8.split(separator: separator, maxSplits: maxSplits, omittingEmptySubsequences: omittingEmptySubsequences).map(Substring.init)
    }
}
