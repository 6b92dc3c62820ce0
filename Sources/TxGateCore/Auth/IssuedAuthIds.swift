/// The authIds one worker signed whose answers it has not seen yet, each with the journey state
/// it carries and when it expires: the answer to a step this worker showed is read from here,
/// without verifying the authId's signature and parsing its claims again (an HMAC over the
/// whole authId and a JSON parse, on every step of every journey).
///
/// An entry is found only by the exact text this worker signed, so what it holds is what the
/// signature would have given; its expiry is the `exp` signed. A hit is taken: a second answer
/// with the same authId (a client's retry) is verified as any other. Anything not found here (an
/// authId another instance or worker signed, one remembered past the bound, a forgery) is
/// verified: the memo can make a step cheaper, never accept one the signature would refuse.
///
/// Confined to the worker's loop (no lock). Bounded (`RingMap`): past `capacity` authIds (one
/// to two KiB each, with their states) the oldest is forgotten and its answer verified.
public final class IssuedAuthIds {
    public static var defaultCapacity: Int { 256 }

    public struct Issued: Equatable {
        public let state: JourneyState
        /// The `exp` signed (seconds); the authId is valid while `now` is before it.
        public let expires: Int
    }

    private var issued: RingMap<String, Issued>

    public init(capacity: Int = IssuedAuthIds.defaultCapacity) {
        issued = RingMap(capacity: capacity)
    }

    public var capacity: Int { issued.capacity }
    public var count: Int { issued.count }

    func remember(_ authId: String, _ state: JourneyState, expires: Int) {
        issued.set(Issued(state: state, expires: expires), for: authId)
    }

    /// What `authId` carries, if this worker signed it and it has not been answered since;
    /// forgotten here.
    func take(_ authId: String) -> Issued? {
        issued.removeValue(forKey: authId)
    }
}
