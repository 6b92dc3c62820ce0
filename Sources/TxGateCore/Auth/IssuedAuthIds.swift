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
public typealias IssuedAuthIds = WorkerMemo<AuthIdKey, IssuedAuthId>

/// An authId as a memo key: equal only to the same text, whole, but hashed by its last 32
/// bytes (the end of its signature, as good as random), not by all of its one to two KiB.
/// Hashing the whole text cost a few thousand instructions at each remember and take.
public struct AuthIdKey: Hashable {
    public let text: String

    public init(_ text: String) { self.text = text }

    public func hash(into hasher: inout Hasher) {
        var text = text
        text.withUTF8 { utf8 in hasher.combine(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: utf8.suffix(32)))) }
    }

    public static func == (a: AuthIdKey, b: AuthIdKey) -> Bool { a.text == b.text }
}

/// What a signed authId carries (`IssuedAuthIds`).
public struct IssuedAuthId: Equatable {
    public let state: JourneyState
    /// The `exp` signed (seconds); the authId is valid while `now` is before it.
    public let expires: Int
}
