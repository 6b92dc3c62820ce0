import Foundation
import TxGateCore
import TxGateCrypto

/// Logging in, challenging, approving and reading challenges, as the SDKs do.
public enum TransactionKit: JourneyClient {
    public static let password = "S3cure-Transf3r!"
    public static let hash = PasswordHash.hash(password)
    public static let demoSecret = "JBSWY3DPEHPK3PXP"
    public static let otherSecret = "GEZDGNBVGY3TQOJQ"
    public static let transferBody = Array(#"{"amount":100,"currency":"EUR","payee":"Bob"}"#.utf8)

    /// demo-bank's policies (health, accounts, transfer) plus /echo bound to the whole body.
    public static func config(transferTtlS: Int = 180, _ extra: [String: Any] = [:]) -> [String: Any] {
        deepMerge([
            "users": [
                ["username": "demo", "passwordHash": hash, "email": "demo@example.com", "totpSecret": demoSecret],
                ["username": "other", "passwordHash": hash, "email": "other@example.com", "totpSecret": otherSecret],
            ],
            "loginJourney": "Login",
            "journeys": [
                "Login": [["type": "UsernamePassword"]],
                "ConfirmTransaction": [["type": "TOTP", "prompt": "One Time Password"]],
            ],
            "policies": [
                ["name": "health", "resources": ["/health"], "actions": ["GET"], "subjects": "anyone"],
                ["name": "accounts", "resources": ["/accounts", "/accounts/*"], "actions": ["GET"], "subjects": "authenticated"],
                ["name": "transfer", "resources": ["/transfer"], "actions": ["POST"], "subjects": "authenticated",
                 "transaction": ["journey": "ConfirmTransaction", "ttlS": transferTtlS,
                                 "bind": ["body": ["/amount", "/currency", "/payee"]],
                                 "display": "Approve {amount} {currency} to {payee}?"]],
                ["name": "echo", "resources": ["/echo"], "actions": ["POST"], "subjects": "authenticated",
                 "transaction": ["journey": "ConfirmTransaction", "bind": ["body": true]]],
            ],
        ], extra)
    }

    /// The gateway's public URL: derived from `listen` (no publicUrl in the config).
    public static func publicURL(_ g: some GatewayUnderTest) -> String { g.baseURL }

    /// Logs in through the Login journey and returns the session token.
    public static func login(_ g: some GatewayUnderTest, user: String = "demo") throws -> String {
        let start = try post(g, authPath, nil)
        guard start.status == 200 else { throw HarnessError("login start failed: \(start)") }
        let done = try post(g, authPath, answer(try start.json(), [user, password]))
        guard done.status == 200, let token = try done.json()["tokenId"] as? String else {
            throw HarnessError("login as \(user) failed: \(done)")
        }
        return token
    }

    /// TOTP codes for one test. Each code is accepted once per user, so every approval takes
    /// the next 30 s step from a fixed base (base, base+30: both within the ±1 step window
    /// for the next 30 s).
    public struct Codes {
        let base: Int
        private var used: [String: Int] = [:]

        /// From the system's time (a gateway that reads it: the live binary).
        public init() { base = Int(Date().timeIntervalSince1970) }

        /// From the clock of `g`, which may not be the system's (a gateway run in process).
        public init(_ g: some GatewayUnderTest) { base = g.nowS }

        public mutating func next(_ secret: String) -> String {
            let n = used[secret, default: 0]
            precondition(n < 2, "at most two TOTP approvals per user per test")
            used[secret] = n + 1
            return TOTP(secret: Base32.decode(secret)!).code(at: base + 30 * n)
        }
    }

    public static func apiHeaders(_ token: String) -> [(String, String)] {
        [("x-authenticate-response", "header"), ("iPlanetDirectoryPro", token), ("Content-Type", "application/json")]
    }

    /// POST /transfer as an SDK does (x-authenticate-response: header).
    public static func transfer(_ g: some GatewayUnderTest, token: String, body: [UInt8], query: String = "") throws -> HTTPResponse {
        try g.fetch("POST", "/transfer" + query, headers: apiHeaders(token), body: body)
    }

    public enum SessionCarrier {
        case header(String)
        case cookie(String)
        public var pair: (String, String) {
            switch self {
            case .header(let t): return ("iPlanetDirectoryPro", t)
            case .cookie(let t): return ("Cookie", "iPlanetDirectoryPro=\(t)")
            }
        }
    }

    public static func adviceXML(_ txid: String) -> String {
        #"<Advices><AttributeValuePair><Attribute name="TransactionConditionAdvice"/><Value>\#(txid)</Value></AttributeValuePair></Advices>"#
    }

    /// Starts the composite-advice journey for a transaction (authIndexValue URL-encoded XML).
    public static func startComposite(_ g: some GatewayUnderTest, txid: String, session: SessionCarrier) throws -> HTTPResponse {
        try post(g, authPath + "?authIndexType=composite_advice&authIndexValue=\(percentEncode(adviceXML(txid)))", nil,
                 headers: [session.pair])
    }

    /// POST /transfer, challenged, then approved with the next code: the step-up every retry
    /// test starts from. Returns the approved TxId.
    /// `approveOn`: the instance that runs the approval (default: `g`).
    public static func approvedTransfer(_ g: some GatewayUnderTest, approveOn h: (any GatewayUnderTest)? = nil, token: String,
                                 codes: inout Codes, body: [UInt8] = transferBody) throws -> String {
        let txid = try challengeTxid(try transfer(g, token: token, body: body))
        let code = codes.next(demoSecret)
        if let h { try approve(h, txid: txid, token: token, code: code) } else { try approve(g, txid: txid, token: token, code: code) }
        return txid
    }

    /// Runs the approval journey with `code`; throws unless it answers 200 with a tokenId.
    public static func approve(_ g: some GatewayUnderTest, txid: String, token: String, code: String) throws {
        let start = try startComposite(g, txid: txid, session: .header(token))
        guard start.status == 200 else { throw HarnessError("approval of \(txid) did not start: \(start)") }
        let done = try post(g, authPath, answer(try start.json(), [code]), headers: [("iPlanetDirectoryPro", token)])
        guard done.status == 200, (try? done.json())?["tokenId"] as? String == token else {
            throw HarnessError("approval of \(txid) failed: \(done)")
        }
    }

    /// The TxId of a 401 SSOADVICE challenge (from its header, checked against its body).
    public static func challengeTxid(_ r: HTTPResponse) throws -> String {
        guard r.status == 401, let header = r.header("WWW-Authenticate"), header.hasPrefix("SSOADVICE ") else {
            throw HarnessError("not a 401 SSOADVICE challenge:\n\(r)")
        }
        guard let b64 = try ssoAdviceParams(header)["advices"] else { throw HarnessError("no advices in \(header)") }
        let advices = try decodeAdviceJSON(b64)
        guard let list = advices["TransactionConditionAdvice"], list.count == 1, let txid = list.first, isUUID(txid) else {
            throw HarnessError("no single TransactionConditionAdvice in \(advices)")
        }
        guard try bodyAdvices(r) == advices else { throw HarnessError("header and body advices differ:\n\(r)") }
        return txid
    }

    /// `SSOADVICE k="v",k="v"` → [k: v], strictly: values quoted, no space after commas.
    public static func ssoAdviceParams(_ header: String) throws -> [String: String] {
        guard header.hasPrefix("SSOADVICE ") else { throw HarnessError("not SSOADVICE: \(header)") }
        var out: [String: String] = [:]
        for segment in header.dropFirst("SSOADVICE ".count).split(separator: ",", omittingEmptySubsequences: false) {
            let kv = segment.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard kv.count == 2, kv[1].count >= 2, kv[1].first == "\"", kv[1].last == "\"" else {
                throw HarnessError("segment '\(segment)' of '\(header)' is not key=\"value\"")
            }
            out[String(kv[0])] = String(kv[1].dropFirst().dropLast())
        }
        return out
    }

    /// Strict base64 (standard alphabet, padded) of the advices JSON → [name: values].
    public static func decodeAdviceJSON(_ b64: String) throws -> [String: [String]] {
        guard let data = Data(base64Encoded: b64) else { throw HarnessError("advices '\(b64)' is not padded standard base64") }
        return try adviceObject(data)
    }

    public static func adviceObject(_ data: Data) throws -> [String: [String]] {
        guard let obj = try JSONSerialization.jsonObject(with: data) as? [String: [String]] else {
            throw HarnessError("advices JSON is not {name: [strings]}: \(String(decoding: data, as: UTF8.self))")
        }
        return obj
    }

    /// The `advices` object of a challenge's JSON body.
    public static func bodyAdvices(_ r: HTTPResponse) throws -> [String: [String]] {
        guard let a = try r.json()["advices"] as? [String: [String]] else {
            throw HarnessError("no advices object in the body: \(r.bodyText.prefix(300))")
        }
        return a
    }

    public static func jsonArray(_ r: HTTPResponse) throws -> [[String: Any]] {
        guard let a = try JSONSerialization.jsonObject(with: Data(r.body)) as? [[String: Any]] else {
            throw HarnessError("not a JSON array of objects: \(r.bodyText.prefix(300))")
        }
        return a
    }

    // MARK: Encodings and small utilities

    public static func isUUID(_ s: String) -> Bool { s.utf8.count == 36 && UUID(uuidString: s) != nil }

    /// RFC 3986 unreserved characters stay; everything else is %XX.
    public static func percentEncode(_ s: String) -> String {
        var out = ""
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(b))
            default:
                out += String(format: "%%%02X", b)
            }
        }
        return out
    }

    /// A query string → its pairs, percent-decoded, in order.
    public static func queryPairs(_ query: String) -> [(name: String, value: String)] {
        query.split(separator: "&").map { part in
            let kv = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let decode: (Substring) -> String = { String($0).removingPercentEncoding ?? String($0) }
            return (decode(kv[0]), kv.count > 1 ? decode(kv[1]) : "")
        }
    }

    public static func base64url(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    public static func sha256Hex(_ bytes: [UInt8]) -> String {
        Crypto.hex(Crypto.sha256(bytes))
    }
}