import Foundation

/// A step-up answer read back from the wire, in any of the forms a gateway sends (WIRE.md §3a,
/// §3b, §7, and the advices in the JSON body): the client half of `Challenge`.
public struct StepUpChallenge: Equatable, Sendable {
    public enum Form: String, Sendable {
        /// `401` with `WWW-Authenticate: SSOADVICE realm="/",advices="...",am_uri="..."`.
        case ssoAdvice
        /// `307`/`303` whose `Location` carries `authIndexType=composite_advice` (or a login page).
        case redirect
        /// `401` with RFC 9470's `WWW-Authenticate: Bearer error="insufficient_user_authentication", ... txid="..."`.
        case bearer
        /// Only the JSON body's `"advices"` member.
        case body
    }

    public var form: Form
    public var advices: Advices
    /// `am_uri` of an SSOADVICE header, or the body's `"am_uri"`; the origin of a redirect's login page.
    public var amURI: String?
    /// The realm the advice names ("/" when not given).
    public var realm: String

    public init(form: Form, advices: Advices, amURI: String? = nil, realm: String = "/") {
        self.form = form
        self.advices = advices
        self.amURI = amURI
        self.realm = realm
    }

    /// The transaction to name on the retry, if the advice is a transaction's.
    public var txid: String? { advices[Advices.transaction]?.first }

    /// The tree an `AuthenticateToServiceConditionAdvice` names (`/:Login` → `Login`).
    public var serviceTree: String? {
        advices[Advices.authenticateToService]?.first.map { v in v.split(separator: ":").last.map(String.init) ?? v }
    }

    /// Reads a response: the WWW-Authenticate values (several headers, or one joined with
    /// ", "), the Location, and the body. Nil when the response is not a step-up answer.
    public static func detect(status: Int, wwwAuthenticate: [String], location: String?, body: [UInt8]) -> StepUpChallenge? {
        if status == 401 {
            for value in wwwAuthenticate {
                if let c = ssoAdvice(value) { return c }
            }
            for value in wwwAuthenticate {
                if let c = bearer(value) { return c }
            }
        }
        if status == 307 || status == 303 || status == 302, let location, let c = redirect(location) { return c }
        if status == 401 || status == 403 || status == 307 || status == 303, let c = jsonBody(body) { return c }
        return nil
    }

    /// `SSOADVICE realm="/",advices="<base64 JSON>",am_uri="..."`, found anywhere in a header
    /// value (another challenge may come first when headers are joined). The base64 is read
    /// in the standard and the URL-safe alphabets, padded or not.
    public static func ssoAdvice(_ header: String) -> StepUpChallenge? {
        guard let range = header.range(of: "SSOADVICE ", options: .caseInsensitive) else { return nil }
        let params = authParams(String(header[range.upperBound...]))
        guard let b64 = params["advices"], let advices = adviceJSON(base64: b64) else { return nil }
        return StepUpChallenge(form: .ssoAdvice, advices: advices, amURI: params["am_uri"], realm: params["realm"] ?? "/")
    }

    /// RFC 9470: `Bearer error="insufficient_user_authentication"`, with TxGate's `txid` naming
    /// a transaction; without one, `acr_values` names the tree to run.
    public static func bearer(_ header: String) -> StepUpChallenge? {
        guard let range = header.range(of: "Bearer ", options: .caseInsensitive) else { return nil }
        var rest = String(header[range.upperBound...])
        if let next = rest.range(of: "SSOADVICE ", options: .caseInsensitive) { rest = String(rest[..<next.lowerBound]) }
        let params = authParams(rest)
        guard params["error"] == "insufficient_user_authentication" else { return nil }
        if let txid = params["txid"], !txid.isEmpty { return StepUpChallenge(form: .bearer, advices: Advices([(Advices.transaction, [txid])])) }
        guard let acr = params["acr_values"]?.split(separator: " ").first else { return nil }
        return StepUpChallenge(form: .bearer, advices: Advices([(Advices.authenticateToService, ["/:\(acr)"])]))
    }

    /// A redirect to the login page: `?goto=...&realm=/&authIndexType=composite_advice&authIndexValue=<XML>`
    /// (the XML URL-encoded, or base64url). A login page with only `goto` is a login challenge
    /// for the default tree (no advice: `advices` is empty).
    public static func redirect(_ location: String) -> StepUpChallenge? {
        guard let q = location.firstIndex(of: "?") else { return nil }
        let query = Query(string: String(location[location.index(after: q)...].prefix { $0 != "#" }))
        let base = String(location[..<q])
        let amURI = base.range(of: "/XUI", options: .backwards).map { String(base[..<$0.lowerBound]) + "/" } ?? base
        if query["authIndexType"] == "composite_advice" {
            guard let value = query["authIndexValue"], let advices = Advices.parse(xmlOrBase64: value) else { return nil }
            return StepUpChallenge(form: .redirect, advices: advices, amURI: amURI, realm: query["realm"] ?? "/")
        }
        guard query["goto"] != nil, base.contains("/XUI") else { return nil }
        return StepUpChallenge(form: .redirect, advices: Advices([]), amURI: amURI, realm: query["realm"] ?? "/")
    }

    /// The gateway's error body with `"advices":{...}` (and `"am_uri"`).
    public static func jsonBody(_ body: [UInt8]) -> StepUpChallenge? {
        guard let json = JSONValue.parse(body), let advices = json["advices"].flatMap(advices(json:)), !advices.isEmpty else { return nil }
        return StepUpChallenge(form: .body, advices: advices, amURI: json["am_uri"]?.stringValue)
    }

    /// Base64 of an advices JSON object (standard or URL-safe alphabet, padding optional).
    public static func adviceJSON(base64 text: String) -> Advices? {
        var b64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while b64.count % 4 != 0 { b64 += "=" }
        guard let data = Data(base64Encoded: b64), let json = JSONValue.parse(Array(data)) else { return nil }
        return advices(json: json)
    }

    /// `{"Name":["value",...],...}` → Advices (names sorted: a JSON object has no order).
    public static func advices(json: JSONValue) -> Advices? {
        guard let object = json.objectValue else { return nil }
        var entries: [(String, [String])] = []
        for name in object.keys.sorted() {
            guard let values = object[name]?.arrayValue else { return nil }
            entries.append((name, values.compactMap(\.stringValue)))
        }
        return entries.isEmpty ? nil : Advices(entries)
    }

    /// RFC 7235 auth-params: `k=v` or `k="v"` separated by commas (with or without spaces);
    /// quoted values may contain commas and `\"`. Keys are lowercased.
    public static func authParams(_ s: String) -> [String: String] {
        var out: [String: String] = [:]
        let b = Array(s.unicodeScalars)
        var i = 0
        func skip(_ set: String) { while i < b.count, set.unicodeScalars.contains(b[i]) { i += 1 } }
        while i < b.count {
            skip(" ,\t")
            var key = ""
            while i < b.count, b[i] != "=", b[i] != ",", b[i] != " " { key.unicodeScalars.append(b[i]); i += 1 }
            skip(" ")
            guard i < b.count, b[i] == "=" else { continue }
            i += 1
            skip(" ")
            var value = ""
            if i < b.count, b[i] == "\"" {
                i += 1
                while i < b.count, b[i] != "\"" {
                    if b[i] == "\\", i + 1 < b.count { i += 1 }
                    value.unicodeScalars.append(b[i])
                    i += 1
                }
                i += 1
            } else {
                while i < b.count, b[i] != "," { value.unicodeScalars.append(b[i]); i += 1 }
                value = value.trimmingCharacters(in: .whitespaces)
            }
            if !key.isEmpty, out[key.lowercased()] == nil { out[key.lowercased()] = value }
        }
        return out
    }
}
