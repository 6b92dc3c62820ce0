import Foundation
import TxGateCrypto

/// `oauth2.ciba`: OpenID CIBA Core 1.0 (poll mode). A client asks on the back channel for a
/// user's approval; the person approves on a device of their own (an approval request,
/// `ApproveElsewhere`'s, sent on `channels` and decided through `approverJourney`); the client
/// polls the token endpoint until then.
public struct CIBAConfig: ConfigObject, Sendable, Equatable {
    /// The journey the person passes on the approval page before an approve counts.
    public var approverJourney = ""
    /// How the person is told: `email`, `webhook` (`approvals.webhook`).
    public var channels: [ApprovalChannelKind] = [.email]
    /// The longest an `auth_req_id` lives (a client may ask for less: `requested_expiry`).
    public var expiresInS = 300
    /// The least time between two polls; a faster one gets `slow_down`, and 5 s more.
    public var intervalS = 5

    public init() {}

    enum Key: String, ConfigKey { case approverJourney, channels, expiresInS, intervalS }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        approverJourney = o.required(.approverJourney) ?? ""
        if let names: [String] = o.optional(.channels) {
            channels = []
            for (i, n) in names.enumerated() {
                if let k = ApprovalChannelKind(rawValue: n) { channels.append(k) } else {
                    o.invalid(.channels, index: i, "'\(n)' is not a channel (\(ApprovalChannelKind.allCases.map(\.rawValue).joined(separator: ", ")))")
                }
            }
            if names.isEmpty { o.invalid(.channels, "name at least one channel") }
        }
        expiresInS = o.int(.expiresInS, default: expiresInS, atLeast: 30)
        intervalS = o.int(.intervalS, default: intervalS, atLeast: 1)
    }
}

/// `oauth2.clients[].ciba`: a confidential client that may ask for users' approval on the back
/// channel, and for whom: `users` (usernames, or `*` for anyone).
public struct CIBAClientConfig: ConfigObject, Sendable, Equatable {
    public var users: [String] = []
    /// Ping mode (CIBA Core §10.2): the client's `backchannel_client_notification_endpoint`,
    /// posted to when the person decided; nil: poll mode.
    public var notificationEndpoint: HTTPURL?

    public init(users: [String]) { self.users = users }

    enum Key: String, ConfigKey { case users, notificationEndpoint }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        users = o.required(.users) ?? []
        if users.isEmpty && o.has(.users) { o.invalid(.users, "name the users this client may ask for (or \"*\")") }
        if let s: String = o.optional(.notificationEndpoint) {
            if let u = HTTPURL(parsing: s) { notificationEndpoint = u } else { o.invalid(.notificationEndpoint, "'\(s)' is not an http:// or https:// URL") }
        }
    }

    public func reaches(_ user: String) -> Bool { users.contains("*") || users.contains(user) }
}

/// One back-channel authentication request, as the store keeps it under `key(auth_req_id)`
/// (a hash: the id is the client's bearer secret) until redeemed or expired.
public struct CIBARequest: Equatable, Sendable {
    public var clientId: String
    /// The approval request the person decides.
    public var approvalId: String
    /// The user, when the hint named one within the client's reach (else nobody can approve it).
    public var uid: String?
    public var scope: [String]
    public var txid: String?
    /// Unix seconds.
    public var expires: Int
    public var intervalS: Int
    /// No poll before this (unix seconds): an earlier one is `slow_down`.
    public var nextPollS: Int

    public init(clientId: String, approvalId: String, uid: String?, scope: [String], txid: String?, expires: Int, intervalS: Int,
                nextPollS: Int) {
        (self.clientId, self.approvalId, self.uid, self.scope, self.txid) = (clientId, approvalId, uid, scope, txid)
        (self.expires, self.intervalS, self.nextPollS) = (expires, intervalS, nextPollS)
    }

    public static let keyPrefix = "oauth2:ciba:"
    public static func key(_ authReqId: String) -> String { keyPrefix + Crypto.hex(Crypto.sha256(Array(authReqId.utf8))) }
    public static let grantType = "urn:openid:params:grant-type:ciba"

    public var encoded: [UInt8] {
        var o: [String: JSONValue] = [
            "clientId": .string(clientId), "approvalId": .string(approvalId), "scope": .array(scope.map { .string($0) }),
            "expires": .number(expires), "intervalS": .number(intervalS), "nextPollS": .number(nextPollS),
        ]
        if let uid { o["uid"] = .string(uid) }
        if let txid { o["txid"] = .string(txid) }
        return JSONValue.object(o).canonicalBytes
    }

    public static func decode(_ bytes: [UInt8]) -> CIBARequest? {
        guard let v = JSONValue.parse(bytes), let clientId = v["clientId"]?.stringValue, let approvalId = v["approvalId"]?.stringValue,
              let scope = v["scope"]?.arrayValue, let expires = v["expires"]?.intValue, let interval = v["intervalS"]?.intValue,
              let next = v["nextPollS"]?.intValue else { return nil }
        return CIBARequest(clientId: clientId, approvalId: approvalId, uid: v["uid"]?.stringValue, scope: scope.compactMap(\.stringValue),
                           txid: v["txid"]?.stringValue, expires: expires, intervalS: interval, nextPollS: next)
    }

    /// What a poll (`grant_type=urn:openid:params:grant-type:ciba`) gets, before anything changes.
    public enum Poll: Equatable, Sendable {
        /// `slow_down`: too soon; the interval grows by 5 s for every later poll.
        case slowDown
        /// `authorization_pending`: not decided yet (the next poll from `nextPollS`).
        case pending
        case denied
        case expired
        /// Approved by the user, at `authTime`, through `acr` (the approver journey): redeem
        /// (once) and issue the tokens.
        case approved(uid: String, authTime: Int, acr: String)
    }

    /// CIBA Core §11: the answer for this record, its approval request as read, at `now`.
    public func poll(_ approval: ApprovalRequest?, now: Int) -> Poll {
        if now >= expires { return .expired }
        if now < nextPollS { return .slowDown }
        guard let approval, let uid else { return approval == nil ? .expired : .pending }
        if approval.isExpired(nowMs: Int64(now) * 1000) && approval.state == .pending { return .expired }
        switch approval.state {
        case .pending: return .pending
        case .denied: return .denied
        case .approved:
            // The approval request is the user's own (the store refuses anyone else's decision).
            guard approval.subject == uid else { return .denied }
            return .approved(uid: uid, authTime: Int((approval.decidedMs ?? Int64(now) * 1000) / 1000), acr: approval.approverJourney)
        }
    }

    /// `binding_message` (CIBA Core §7.1): shown on both devices, so as short and plain as a
    /// bound value: 1 to 64 characters, no control, bidi-override, zero-width or line-separator
    /// characters.
    public static func bindingMessageRefusal(_ m: String) -> String? {
        guard (1...64).contains(m.count) else { return "binding_message must be 1 to 64 characters" }
        let bad = m.unicodeScalars.first { s in
            s.properties.generalCategory == .control || s.properties.generalCategory == .format
                || s.properties.generalCategory == .lineSeparator || s.properties.generalCategory == .paragraphSeparator
        }
        return bad.map { String(format: "binding_message may not hold U+%04X", $0.value) }
    }
}

/// Ping mode's note of who to tell when an approval request is decided, kept under
/// `key(approvalId)`: the `auth_req_id`, the client, and the bearer token it gave for the
/// notification (`client_notification_token`).
public struct CIBAPing: Equatable, Sendable {
    public var authReqId: String
    public var clientId: String
    public var token: String

    public init(authReqId: String, clientId: String, token: String) {
        self.authReqId = authReqId
        self.clientId = clientId
        self.token = token
    }

    public static func key(_ approvalId: String) -> String { "oauth2:ciba-ping:" + approvalId }

    public var encoded: [UInt8] {
        JSONValue.object(["authReqId": .string(authReqId), "clientId": .string(clientId), "token": .string(token)]).canonicalBytes
    }

    public static func decode(_ bytes: [UInt8]) -> CIBAPing? {
        guard let v = JSONValue.parse(bytes), let id = v["authReqId"]?.stringValue, let c = v["clientId"]?.stringValue,
              let t = v["token"]?.stringValue else { return nil }
        return CIBAPing(authReqId: id, clientId: c, token: t)
    }
}

