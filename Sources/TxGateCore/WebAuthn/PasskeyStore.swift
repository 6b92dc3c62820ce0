import TxGateCrypto

/// One registered passkey of a user: the WebAuthn credential record (§4) and what the account
/// page shows.
public struct Passkey: Equatable, Sendable {
    public var credentialId: [UInt8]
    /// COSE_Key bytes, as the authenticator encoded them.
    public var publicKey: [UInt8]
    public var signCount: UInt32
    public var backupEligible: Bool
    /// The user entity's id it was made for (`PasskeyStore.userHandle`).
    public var userHandle: [UInt8]
    /// A name for people ("iPhone", or what the client named it).
    public var name: String
    /// Unix seconds.
    public var createdS: Int
    public var lastUsedS: Int?
    /// `none` or `self` (`WebAuthn.AttestationType`).
    public var attestation: String

    public init(credentialId: [UInt8], publicKey: [UInt8], signCount: UInt32, backupEligible: Bool, userHandle: [UInt8],
                name: String, createdS: Int, lastUsedS: Int? = nil, attestation: String) {
        self.credentialId = credentialId
        self.publicKey = publicKey
        self.signCount = signCount
        self.backupEligible = backupEligible
        self.userHandle = userHandle
        self.name = name
        self.createdS = createdS
        self.lastUsedS = lastUsedS
        self.attestation = attestation
    }

    /// The credential ID as base64url: how the account page, the log and the evidence name it.
    public var id: String { Base64URL.encode(credentialId) }

    public var record: WebAuthn.CredentialRecord {
        WebAuthn.CredentialRecord(id: credentialId, publicKey: publicKey, signCount: signCount,
                                  backupEligible: backupEligible, userHandle: userHandle)
    }

    var json: JSONValue {
        var o: [String: JSONValue] = [
            "id": .string(id), "publicKey": .string(Base64URL.encode(publicKey)), "signCount": .number(Int(signCount)),
            "backupEligible": .bool(backupEligible), "userHandle": .string(Base64URL.encode(userHandle)),
            "name": .string(name), "createdS": .number(createdS), "attestation": .string(attestation),
        ]
        if let lastUsedS { o["lastUsedS"] = .number(lastUsedS) }
        return .object(o)
    }

    init?(json v: JSONValue) {
        guard let id = v["id"]?.stringValue.flatMap(Base64URL.decode), let key = v["publicKey"]?.stringValue.flatMap(Base64URL.decode),
              let count = v["signCount"]?.intValue, let c = UInt32(exactly: count), case .bool(let be)? = v["backupEligible"],
              let handle = v["userHandle"]?.stringValue.flatMap(Base64URL.decode), let name = v["name"]?.stringValue,
              let created = v["createdS"]?.intValue, let attestation = v["attestation"]?.stringValue else { return nil }
        self.init(credentialId: id, publicKey: key, signCount: c, backupEligible: be, userHandle: handle, name: name,
                  createdS: created, lastUsedS: v["lastUsedS"]?.intValue, attestation: attestation)
    }

    /// A user's passkeys as stored: one canonical JSON array (compared byte for byte by the
    /// compare-and-swap that changes it).
    static func encode(_ list: [Passkey]) -> [UInt8] { JSONValue.array(list.map(\.json)).canonicalBytes }

    static func decode(_ bytes: [UInt8]) -> [Passkey]? {
        guard let items = JSONValue.parse(bytes)?.arrayValue else { return nil }
        var out: [Passkey] = []
        for item in items {
            guard let p = Passkey(json: item) else { return nil }
            out.append(p)
        }
        return out
    }
}

/// Users' passkeys in the gateway's store (SQLite or Redis, through the `Store` protocol alone):
/// each user's list under `passkeys:user:NAME`, and each credential ID's owner under
/// `passkeys:cred:ID` (a discoverable credential names its user by the credential it signs
/// with, and one credential ID is registered once). Both never expire. Every change to a list
/// is a compare-and-swap over what was read, retried when another change came in between, so
/// that concurrent sign-ins and registrations lose nothing and a counter never goes back.
public struct PasskeyStore: Sendable {
    public let store: Store
    public let executor: CallbackExecutor

    public init(store: Store, executor: CallbackExecutor) {
        self.store = store
        self.executor = executor
    }

    public static func userKey(_ username: String) -> String { "passkeys:user:" + username }
    public static func ownerKey(_ credentialId: [UInt8]) -> String { "passkeys:cred:" + Base64URL.encode(credentialId) }

    /// The user handle passkeys are made for: opaque (no name in it, WebAuthn §14.6.1), the same
    /// for one user on every instance that shares the key, as the ASCII bytes of 24 characters of
    /// standard base64 (16 bytes, `==` padded), as AM's user IDs are: the SDKs make the handle from
    /// the characters of `userId`, and the Android SDK base64-decodes them again (so the alphabet
    /// must be the standard one). `keyedDigest` is the gateway's keyed hash
    /// (`JourneyServices.keyedDigest`).
    public static func userHandle(for username: String, keyedDigest: ([UInt8]) -> [UInt8]) -> [UInt8] {
        Array(Base64.encode(Array(keyedDigest(Array(("webauthn user handle\0" + username).utf8)).prefix(16))).utf8)
    }

    public func passkeys(of username: String, _ done: @escaping (StoreResult<[Passkey]>) -> Void) {
        store.get(Self.userKey(username), on: executor) { r in
            done(r.flatMap { bytes in
                guard let bytes else { return .success([]) }
                guard let list = Passkey.decode(bytes) else { return .failure(.failed("the passkeys of '\(username)' cannot be read")) }
                return .success(list)
            })
        }
    }

    /// Whose passkey `credentialId` is, if anyone's.
    public func owner(of credentialId: [UInt8], _ done: @escaping (StoreResult<String?>) -> Void) {
        store.get(Self.ownerKey(credentialId), on: executor) { r in
            done(r.map { $0.map { String(decoding: $0, as: UTF8.self) } })
        }
    }

    public enum AddOutcome: Equatable, Sendable {
        case added
        /// This credential ID is registered already (to this user or another).
        case alreadyRegistered
        /// The user has `limit` passkeys.
        case tooMany(limit: Int)
    }

    /// Registers `passkey` for `username`: claims its credential ID first (`create`: one
    /// registration wins), then adds it to the user's list.
    public func add(_ passkey: Passkey, for username: String, limit: Int, _ done: @escaping (StoreResult<AddOutcome>) -> Void) {
        store.create(Self.ownerKey(passkey.credentialId), value: Array(username.utf8), ttlMs: StoreExpiry.never, on: executor) { r in
            switch r {
            case .failure(let e): done(.failure(e))
            case .success(false): done(.success(.alreadyRegistered))
            case .success(true):
                change(username, written: AddOutcome.added, { list in
                    list.count >= limit ? .refuse(.tooMany(limit: limit)) : .write(list + [passkey])
                }) { r in
                    // Not added: the claim on the ID is let go again.
                    if (try? r.get()) != .added { store.delete(Self.ownerKey(passkey.credentialId), on: executor) { _ in } }
                    done(r)
                }
            }
        }
    }

    public enum UseOutcome: Equatable, Sendable {
        case recorded
        /// Another sign-in stored a counter this one is not above (a cloned authenticator, or
        /// the same assertion twice).
        case counterRegression(stored: UInt32, received: UInt32)
        /// The passkey was removed meanwhile.
        case gone
    }

    /// Stores a verified assertion's counter and the time of use. Refused if the stored counter
    /// moved to `signCount` or beyond since the assertion was verified against it.
    public func recordUse(of credentialId: [UInt8], by username: String, signCount: UInt32, nowS: Int,
                          _ done: @escaping (StoreResult<UseOutcome>) -> Void) {
        change(username, written: UseOutcome.recorded, { list in
            guard let i = list.firstIndex(where: { $0.credentialId == credentialId }) else { return .refuse(.gone) }
            let stored = list[i].signCount
            if stored != 0 || signCount != 0, signCount <= stored {
                return .refuse(.counterRegression(stored: stored, received: signCount))
            }
            var l = list
            l[i].signCount = signCount
            l[i].lastUsedS = nowS
            return .write(l)
        }, done)
    }

    /// Removes a user's passkey; false if they had none with that ID.
    public func remove(_ credentialId: [UInt8], of username: String, _ done: @escaping (StoreResult<Bool>) -> Void) {
        change(username, written: true, { list in
            list.contains { $0.credentialId == credentialId } ? .write(list.filter { $0.credentialId != credentialId }) : .refuse(false)
        }) { r in
            guard case .success(true) = r else { done(r); return }
            store.delete(Self.ownerKey(credentialId), on: executor) { d in done(d.map { _ in true }) }
        }
    }

    enum Change<T> {
        case write([Passkey])
        case refuse(T)
    }

    /// Reads the user's list, applies `edit`, and swaps the result in if the list is still what
    /// was read (`written` is then the answer); reads again and retries when it is not.
    private func change<T: Sendable>(_ username: String, written: T, attempts: Int = 8, _ edit: @escaping ([Passkey]) -> Change<T>,
                                     _ done: @escaping (StoreResult<T>) -> Void) {
        let key = Self.userKey(username)
        store.get(key, on: executor) { r in
            let current: [UInt8]?, list: [Passkey]
            switch r {
            case .failure(let e): done(.failure(e)); return
            case .success(nil): current = nil; list = []
            case .success(let bytes?):
                guard let l = Passkey.decode(bytes) else { done(.failure(.failed("the passkeys of '\(username)' cannot be read"))); return }
                current = bytes; list = l
            }
            switch edit(list) {
            case .refuse(let answer): done(.success(answer))
            case .write(let new):
                let retry: (StoreResult<Bool>) -> Void = { r in
                    switch r {
                    case .failure(let e): done(.failure(e))
                    case .success(true): done(.success(written))
                    case .success(false) where attempts > 1: change(username, written: written, attempts: attempts - 1, edit, done)
                    case .success(false): done(.failure(.failed("the passkeys of '\(username)' kept changing; nothing was stored")))
                    }
                }
                if let current {
                    store.compareAndSwap(key, expected: current, new: Passkey.encode(new), ttlMs: nil, on: executor, retry)
                } else {
                    store.create(key, value: Passkey.encode(new), ttlMs: StoreExpiry.never, on: executor, retry)
                }
            }
        }
    }
}
