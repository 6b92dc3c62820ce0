/// The configured policies, in order. "The first policy that matches path and method
/// applies" is written here once.
public struct PolicySet: Sendable {
    public let policies: [Policy]

    public init(_ policies: [Policy]) { self.policies = policies }

    public var isEmpty: Bool { policies.isEmpty }

    /// The policy that decides `method` on `path`, if any (no match is a deny).
    public func applicable(path: Substring, method: String) -> Policy? {
        applicableIndex(path: path, method: method).map { policies[$0] }
    }

    /// The index of that policy in `policies`.
    public func applicableIndex(path: Substring, method: String) -> Int? {
        policies.firstIndex { $0.applies(path: path, method: method) }
    }


    /// The methods some policy names for `path` (AM answers every action it knows of).
    public func methods(for path: Substring, among candidates: [String]) -> [String] {
        candidates.filter { m in policies.contains { $0.applies(path: path, method: m) } }
    }
}
