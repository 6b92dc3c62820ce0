import Foundation
import HTTPCore
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

    /// Whether a request is a browser's top-level form navigation, the only kind that gets a
    /// 303 and is parked (WIRE-EXTENSIONS §3b): a method with a body, and `Sec-Fetch-Mode:
    /// navigate`, or, from a browser that sends no `Sec-Fetch-*` at all, an `Accept` that
    /// prefers `text/html` with a body an HTML form sends. Every other request without
    /// `x-authenticate-response: header` gets IG's 307: the Android SDK's interceptor reads
    /// only a 307, then runs the journey and retries the request itself.
    public static func isFormNavigation(method: String, headers: HTTPHeaders) -> Bool {
        guard isParkable(method: method) else { return false }
        if let mode = headers.first("Sec-Fetch-Mode") { return asciiCaseInsensitiveEquals(mode.trimmingOWS(), "navigate") }
        if headers.fields.contains(where: { $0.name.utf8.count > 10 && asciiCaseInsensitiveEquals(String($0.name.prefix(10)), "sec-fetch-") }) {
            return false
        }
        guard let accept = headers.first("Accept"), prefersHTML(accept),
              let type = headers.first("Content-Type").flatMap(MediaType.init) else { return false }
        return type.isForm || type.essence == "multipart/form-data" || type.essence == "text/plain"
    }

    /// Whether an `Accept` value gives `text/html` a weight at least that of every other range
    /// (a browser's `text/html,…,*/*;q=0.8`; not curl's `*/*`, not `application/json`).
    public static func prefersHTML(_ accept: String) -> Bool {
        var html = 0.0
        var others = 0.0
        for range in accept.split(separator: ",") {
            let parts = range.split(separator: ";")
            guard let first = parts.first else { continue }
            var q = 1.0
            for p in parts.dropFirst() {
                let kv = p.trimmingCharacters(in: .whitespaces)
                if kv.lowercased().hasPrefix("q=") { q = Double(kv.dropFirst(2)) ?? 0 }
            }
            if first.trimmingCharacters(in: .whitespaces).lowercased() == "text/html" { html = max(html, q) } else { others = max(others, q) }
        }
        return html > 0 && html >= others
    }

    /// Why a body cannot be parked, for the 413 the browser shows; nil when it fits.
    public static func tooLarge(bodyBytes: Int, limit: Int) -> String? {
        guard bodyBytes > limit else { return nil }
        return "this request needs your approval first, and its body (\(bodyBytes) bytes) is larger than the \(limit) bytes "
            + "the gateway keeps while you sign in (limits.maxParkedBodyBytes); send it from an application that answers "
            + "the challenge itself (x-authenticate-response: header), or send a smaller body"
    }
}
