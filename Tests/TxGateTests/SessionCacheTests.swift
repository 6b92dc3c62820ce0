import EventHTTP
import Testing
@testable import TxGate
import TxGateCore

/// The sessions read in the last second (`SessionCache`): one table per event loop, and what a
/// logout or a step-up recorded on one worker does to every worker's table.
@Suite struct SessionCacheTests {
    static let now = 1_800_000_000

    static func session(_ uid: String) -> Session {
        Session(uid: uid, realm: "/", created: now, touched: now, journeys: ["Login"])
    }

    @Test func eachLoopHasATableOfItsOwn() {
        let cache = SessionCache()
        let a = EventLoop(), b = EventLoop()
        let shardA = cache.shard(for: a)
        #expect(cache.shard(for: a) === shardA)
        let shardB = cache.shard(for: b)
        #expect(shardB !== shardA)

        #expect(shardA.put("token-1", storeKey: "session:1", Self.session("alice"), now: Self.now, readSince: shardA.generation()))
        #expect(shardA.get("token-1", now: Self.now)?.uid == "alice")
        // Another loop reads the store itself, and caches what it read in its own table.
        #expect(shardB.get("token-1", now: Self.now) == nil)
        #expect(shardB.put("token-1", storeKey: "session:1", Self.session("alice"), now: Self.now, readSince: shardB.generation()))
        #expect(shardB.get("token-1", now: Self.now)?.uid == "alice")
    }

    @Test func anInvalidationEmptiesEveryLoopsTable() {
        let cache = SessionCache()
        let loops = (0..<4).map { _ in EventLoop() }
        for loop in loops {
            let shard = cache.shard(for: loop)
            shard.put("token-1", storeKey: "session:1", Self.session("alice"), now: Self.now, readSince: shard.generation())
            shard.put("token-2", storeKey: "session:2", Self.session("bob"), now: Self.now, readSince: shard.generation())
        }
        cache.invalidate(storeKey: "session:1")
        for loop in loops {
            #expect(cache.shard(for: loop).get("token-1", now: Self.now) == nil)
            #expect(cache.shard(for: loop).get("token-2", now: Self.now)?.uid == "bob")
        }
    }

    /// A read begun on one worker before a logout answered on another must not put the session
    /// back: the fill names its table's generation from before the read.
    @Test func aReadBegunBeforeAnInvalidationOnAnotherLoopIsNotCached() {
        let cache = SessionCache()
        let reader = cache.shard(for: EventLoop())
        _ = cache.shard(for: EventLoop())  // the worker that answers the logout
        let before = reader.generation()
        cache.invalidate(storeKey: "session:1")
        #expect(!reader.put("token-1", storeKey: "session:1", Self.session("alice"), now: Self.now, readSince: before))
        #expect(reader.get("token-1", now: Self.now) == nil)
        // A read begun after it is cached.
        #expect(reader.put("token-1", storeKey: "session:1", Self.session("alice"), now: Self.now, readSince: reader.generation()))
    }

    @Test func anEntryLastsASecondOfTheWallClock() {
        let shard = SessionCache().shard(for: EventLoop())
        shard.put("token-1", storeKey: "session:1", Self.session("alice"), now: Self.now, readSince: shard.generation())
        #expect(shard.get("token-1", now: Self.now + 1) != nil)
        #expect(shard.get("token-1", now: Self.now + 2) == nil)
    }

    /// The subject of a cached read is made by its first request, then the same one is
    /// answered until the entry goes; a session past its lifetime has none.
    @Test func aCachedReadsSubjectIsMadeOnce() {
        let cache = SessionCache()
        let shard = cache.shard(for: EventLoop())
        var made = 0
        func make(_ s: Session) -> Subject {
            made += 1
            return Subject(uid: s.uid, realm: s.realm, journeys: s.journeys, attributes: [:], token: "token-1")
        }
        #expect(shard.subject("token-1", now: Self.now, maxLifetimeS: 3600, make: make) == nil)
        shard.put("token-1", storeKey: "session:1", Self.session("alice"), now: Self.now, readSince: shard.generation())
        #expect(shard.subject("token-1", now: Self.now, maxLifetimeS: 3600, make: make)?.uid == "alice")
        #expect(shard.subject("token-1", now: Self.now, maxLifetimeS: 3600, make: make)?.uid == "alice")
        #expect(made == 1)
        #expect(shard.subject("token-1", now: Self.now, maxLifetimeS: 0, make: make) == nil)

        // A new read, a new subject (a step-up recorded adds a journey).
        cache.invalidate(storeKey: "session:1")
        #expect(shard.subject("token-1", now: Self.now, maxLifetimeS: 3600, make: make) == nil)
        var stepped = Self.session("alice")
        stepped.journeys.append("Strong")
        shard.put("token-1", storeKey: "session:1", stepped, now: Self.now, readSince: shard.generation())
        #expect(shard.subject("token-1", now: Self.now, maxLifetimeS: 3600, make: make)?.journeys == ["Login", "Strong"])
        #expect(made == 2)
    }
}
