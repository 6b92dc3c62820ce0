import Synchronization

/// Spreads the connections accepted by several servers (a gateway's workers, one loop each)
/// evenly over them.
///
/// Each worker listens on its own socket (`SO_REUSEPORT`), and the kernel picks the socket for
/// a new connection by a hash of its addresses and ports: 256 connections over 8 workers leave
/// the busiest with 1.23 times the average at the median and up to 1.5 times (4 workers: 1.12,
/// up to 1.31), and that worker's connections wait longest for their turn in its loop, which is
/// the proxy's p99. So a server that accepts a connection while another server of the group
/// holds fewer hands the socket over to the one with the fewest (`HTTPServer.accept`), through
/// that server's loop (`EventLoop.execute`), before any byte is read. Counting happens once per
/// connection (at its accept and its close), never per request; a handover costs a wake-up of
/// the other loop, once per connection.
///
/// Every server of a group must live until all of them have stopped accepting (a gateway's
/// workers live as long as the process): a member refers to its server without retaining it.
// @unchecked Sendable: `members` is only appended to by `join`, which every server calls while
// the group's loops are not running yet (a gateway builds all its workers before it starts
// their threads); afterwards it is only read. The counts are atomic; a member's server is only
// used on its own loop.
public final class ConnectionBalancer: @unchecked Sendable {
    // @unchecked Sendable: `server` is only used on `loop` (another loop takes a reference to it
    // there, in the closure it hands over).
    final class Member: @unchecked Sendable {
        let loop: EventLoop
        unowned let server: HTTPServer
        /// Its place in the group's `members`.
        let index: Int
        /// Connections open on this server, and those handed over to it that it has not opened yet.
        let open = Atomic<Int>(0)
        /// False once the server has begun to drain: it gets no more connections.
        let accepting = Atomic<Bool>(true)
        // Keeps the next member's count off this count's cache line: every member writes its own
        // at each accept and close, and reads all of them at each accept.
        private let padding: (Int, Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0, 0)

        init(server: HTTPServer, index: Int) {
            loop = server.loop
            self.server = server
            self.index = index
        }
    }

    private var members: [Member] = []

    public init() {}

    /// Adds `server` to the group: its member there. Before any of the group's loops runs.
    func join(_ server: HTTPServer) -> Member {
        // A connection is admitted against the table of the server that accepts it and let go
        // from the table of the server that closes it.
        precondition(members.first.map { $0.server.clients === server.clients } ?? true,
                     "the servers of one ConnectionBalancer must share one ClientConnectionTable (or none)")
        let m = Member(server: server, index: members.count)
        members.append(m)
        return m
    }

    /// Counts a connection that `mine` has just accepted on the member with the fewest
    /// connections, and returns that member: `mine` itself unless another holds fewer
    /// (ties stay, so that a group whose counts are equal hands nothing over). Members that
    /// drain are passed over.
    ///
    /// The count is raised only if it is still the one the choice was made on (otherwise the
    /// choice is made again): two servers accepting at once cannot both give their connection
    /// to the same member on the strength of one count, and while connections only open, no
    /// member ever holds more than one more than another.
    func place(from mine: Member) -> Member {
        let n = members.count
        while true {
            var chosen = mine
            var least = mine.open.load(ordering: .relaxed)
            var i = mine.index
            for _ in 1..<n {
                i = i + 1 == n ? 0 : i + 1
                let m = members[i]
                let count = m.open.load(ordering: .relaxed)
                if count < least && m.accepting.load(ordering: .relaxed) {
                    least = count
                    chosen = m
                }
            }
            if chosen.open.compareExchange(expected: least, desired: least + 1, ordering: .relaxed).exchanged { return chosen }
        }
    }

    /// Connections each member holds now (for tests and diagnostics).
    public var counts: [Int] { members.map { $0.open.load(ordering: .relaxed) } }
}
