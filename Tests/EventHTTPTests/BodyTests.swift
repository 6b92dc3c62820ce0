import EventHTTP
import Testing

/// `Body` makes its evbuffer on the first write (a GET's body is never written): every
/// operation reads the same on a body that never had one as on one that was emptied.
@Suite struct BodyTests {
    /// Ways to get an empty body: never written, written nothing, written then emptied.
    static let empties: [(String, @Sendable () -> Body)] = [
        ("new", { Body() }),
        ("empty bytes", { Body([]) }),
        ("empty string", { let b = Body(); b.append(""); return b }),
        ("emptied", { let b = Body(Array("abc".utf8)); b.removeAll(); return b }),
        ("moved out", { let b = Body(Array("abc".utf8)); b.moveAll(to: Body()); return b }),
    ]

    @Test(arguments: empties.indices)
    func anEmptyBodyReadsEmptyAndTakesWrites(_ i: Int) {
        let (name, make) = Self.empties[i]
        let b = make()
        #expect(b.count == 0, "\(name)")
        #expect(b.isEmpty, "\(name)")
        #expect(b.bytes == [], "\(name)")
        // Moving an empty body adds nothing; removing from it is harmless.
        let target = Body(Array("x".utf8))
        b.moveAll(to: target)
        b.removeAll()
        #expect(target.bytes == Array("x".utf8), "\(name)")
        // And it takes bytes afterwards, in order.
        b.append(Array("ab".utf8))
        b.append("cd")
        #expect(b.bytes == Array("abcd".utf8), "\(name)")
        #expect(b.count == 4, "\(name)")
        b.moveAll(to: target)
        #expect(b.isEmpty, "\(name)")
        #expect(target.bytes == Array("xabcd".utf8), "\(name)")
    }
}
