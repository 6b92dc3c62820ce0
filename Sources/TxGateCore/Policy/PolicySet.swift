/// The configured policies, in order. "The first policy that matches path and method
/// applies" is written here once.
public struct PolicySet: Sendable {
    public let policies: [Policy]

    public init(_ policies: [Policy]) { self.policies = policies }

    /// The same policies in objects of their own, for one worker: every request retains its
    /// policy, the array, and the arrays a match reads, and on objects that every worker shared
    /// those retains were atomic writes to the same cache lines from every core. The matching
    /// parts are rebuilt (new arrays, patterns parsed again from their text); the names and
    /// the requirement are still shared, read in place on the request path.
    public func copiedForWorker() -> PolicySet {
        PolicySet(policies.map { p in
            Policy(name: p.name, resources: p.resources.map { ResourcePattern($0.text)! }, actions: p.actions.map { $0 },
                   subjects: p.subjects, requirement: p.requirement)
        })
    }

    public var isEmpty: Bool { policies.isEmpty }

    /// The policy that decides `method` on `path`, if any (no match is a deny).
    public func applicable(path: Substring, method: String) -> Policy? {
        applicableIndex(path: path, method: method).map { policies[$0] }
    }

    /// The index of that policy in `policies`.
    public func applicableIndex(path: Substring, method: String) -> Int? {
        for i in policies.indices where policies[i].applies(path: path, method: method) { return i }
        return nil
    }


    /// The methods some policy names for `path` (AM answers every action it knows of).
    public func methods(for path: Substring, among candidates: [String]) -> [String] {
        candidates.filter { m in policies.contains { $0.applies(path: path, method: m) } }
    }
}
