import EventHTTP
import TxGateCore

/// The refresh families issued in one SSO session, so that ending the session (OIDC end
/// session) revokes them. One store record per session: a JSON array of family ids, updated by
/// compare-and-swap (two token requests at once both land), living as long as a session can.
enum SessionFamilies {
    /// `sessionKey` is the session's store key (a hash of its token), never the token.
    static func key(_ sessionKey: String) -> String { "oauth2:sessionfamilies:" + sessionKey }

    static func add(_ family: String, to sessionKey: String, ttlMs: Int, store: Store, loop: EventLoop, attempts: Int = 5,
                    _ done: @escaping (StoreResult<Void>) -> Void) {
        let key = key(sessionKey)
        store.get(key, on: loop) { r in
            switch r {
            case .failure(let e): done(.failure(e))
            case .success(let bytes):
                let next = JSONValue.array((families(bytes) + [family]).map { .string($0) }).canonicalBytes
                let retry: (StoreResult<Bool>) -> Void = { r in
                    switch r {
                    case .failure(let e): done(.failure(e))
                    case .success(true): done(.success(()))
                    case .success(false) where attempts > 1:
                        add(family, to: sessionKey, ttlMs: ttlMs, store: store, loop: loop, attempts: attempts - 1, done)
                    case .success(false): done(.failure(.failed("the session's token families changed too often")))
                    }
                }
                if let bytes {
                    store.compareAndSwap(key, expected: bytes, new: next, ttlMs: ttlMs, on: loop, retry)
                } else {
                    store.create(key, value: next, ttlMs: ttlMs, on: loop, retry)
                }
            }
        }
    }

    /// Deletes every family of the session, then the record itself.
    static func revokeAll(of sessionKey: String, store: Store, loop: EventLoop, _ done: @escaping (StoreResult<Int>) -> Void) {
        let key = key(sessionKey)
        store.take(key, on: loop) { r in
            switch r {
            case .failure(let e): done(.failure(e))
            case .success(let bytes):
                let all = families(bytes)
                deleteFamilies(all[...], store: store, loop: loop) { r in done(r.map { all.count }) }
            }
        }
    }

    private static func deleteFamilies(_ rest: ArraySlice<String>, store: Store, loop: EventLoop,
                                       _ done: @escaping (StoreResult<Void>) -> Void) {
        guard let first = rest.first else { done(.success(())); return }
        store.delete(RefreshRecord.familyKey(first), on: loop) { r in
            if case .failure(let e) = r { done(.failure(e)); return }
            deleteFamilies(rest.dropFirst(), store: store, loop: loop, done)
        }
    }

    private static func families(_ bytes: [UInt8]?) -> [String] {
        bytes.flatMap { JSONValue.parse($0)?.arrayValue }?.compactMap(\.stringValue) ?? []
    }
}
