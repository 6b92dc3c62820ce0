/// A value type's members in one immutable object that its copies share: copying the value is
/// one retain, not one per string, array and dictionary among the members. A change makes a new
/// object. `TransactionRecord`, `TransactionRule`, `Decision` and `Subject` keep their members
/// so: each is copied several times per request or step-up cycle.
struct Boxed<Members: Equatable & Sendable>: Equatable, Sendable {
    private final class Box: Sendable {
        let members: Members
        init(_ members: Members) { self.members = members }
    }

    private var box: Box

    init(_ members: Members) { box = Box(members) }

    /// The members, read where they are (`boxed.members.name` reads one).
    var members: Members { box.members }

    mutating func update(_ change: (inout Members) -> Void) {
        var members = box.members
        change(&members)
        box = Box(members)
    }

    static func == (a: Boxed, b: Boxed) -> Bool { a.box === b.box || a.box.members == b.box.members }
}
