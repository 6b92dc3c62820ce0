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
/// An authId and its state take one to two KiB.
public typealias IssuedAuthIds = WorkerMemo<String, IssuedAuthId>

/// What a signed authId carries (`IssuedAuthIds`).
public struct IssuedAuthId: Equatable {
    public let state: JourneyState
    /// The `exp` signed (seconds); the authId is valid while `now` is before it.
    public let expires: Int
}
