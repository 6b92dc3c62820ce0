import TxGateCrypto

/// A browser's request kept while its user approves it (WIRE-EXTENSIONS.md §3b): a browser
/// cannot re-send a POST body after the login page, so the gateway keeps what the backend
/// will read (method, target, content type, accept, body) under the TxId, for the subject who
/// sent it, as long as the transaction lives. The browser comes back with
/// `GET <target>?_txid=TXID`; the gateway finds the record (it must match `claim`) and the
/// request, as it was, takes the GET's place: consuming the transaction (one store step) is
/// what lets it through once.
public struct ParkedRequest: Equatable, Sendable {
    public var txid: String
    /// The uid of the user who sent it: only their session can take it back.
    public var subject: String
    public var method: String
    /// The target as the policy saw it (normalized path and query, without `_txid`).
    public var target: String
    public var contentType: String?
    public var accept: String?
    public var body: [UInt8]

    public init(txid: String, subject: String, method: String, target: String, contentType: String?, accept: String?,
                body: [UInt8]) {
        self.txid = txid
        self.subject = subject
        self.method = method
        self.target = target
        self.contentType = contentType
        self.accept = accept
        self.body = body
    }

    public static func key(_ txid: String) -> String { "park:" + txid }

    /// What a visit must match (`ConditionalTake.matches`) to use the record: the same user,
    /// coming back to the same target. Another user's session learns nothing of it.
    public static func claim(subject: String, target: String) -> [String: String] {
        ["subject": subject, "target": target]
    }

    /// Canonical JSON; the body in standard base64.
    public var encoded: [UInt8] {
        var o: [String: JSONValue] = [
            "txid": .string(txid), "subject": .string(subject), "method": .string(method), "target": .string(target),
            "body": .string(Base64.encode(body)),
        ]
        if let contentType { o["contentType"] = .string(contentType) }
        if let accept { o["accept"] = .string(accept) }
        return JSONValue.object(o).canonicalBytes
    }

    /// The record in `encoded` form; nil if anything is missing or the body is not base64.
    public static func decode(_ bytes: [UInt8]) -> ParkedRequest? {
        guard case .object(let o)? = JSONValue.parse(bytes),
              let txid = o["txid"]?.stringValue, let subject = o["subject"]?.stringValue,
              let method = o["method"]?.stringValue, let target = o["target"]?.stringValue,
              let body = o["body"]?.stringValue.flatMap(Base64.decode) else { return nil }
        return ParkedRequest(txid: txid, subject: subject, method: method, target: target,
                             contentType: o["contentType"]?.stringValue, accept: o["accept"]?.stringValue, body: body)
    }

    /// Whether a request with this method is parked rather than sent to the login page with its
    /// body (a browser re-sends a body only after a 307, and the login page cannot take it).
    public static func isParkable(method: String) -> Bool { method != "GET" && method != "HEAD" }

    /// Why a body cannot be parked, for the 413 the browser shows; nil when it fits.
    public static func tooLarge(bodyBytes: Int, limit: Int) -> String? {
        guard bodyBytes > limit else { return nil }
        return "this request needs your approval first, and its body (\(bodyBytes) bytes) is larger than the \(limit) bytes "
            + "the gateway keeps while you sign in (limits.maxParkedBodyBytes); send it from an application that answers "
            + "the challenge itself (x-authenticate-response: header), or send a smaller body"
    }
}
