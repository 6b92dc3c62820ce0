import Foundation
import HTTPCore

/// A decision's advices: advice name → values, as AM returns them (WIRE.md §1).
public struct Advices: Equatable, Sendable {
    public static let transaction = "TransactionConditionAdvice"
    public static let authenticateToService = "AuthenticateToServiceConditionAdvice"
    public static let authLevel = "AuthLevelConditionAdvice"
    public static let authenticateToRealm = "AuthenticateToRealmConditionAdvice"
    public static let authScheme = "AuthSchemeConditionAdvice"

    /// In order: the order is kept on the wire.
    public var entries: [(name: String, values: [String])]

    public init(_ entries: [(String, [String])]) { self.entries = entries.map { (name: $0.0, values: $0.1) } }

    public static func == (a: Advices, b: Advices) -> Bool {
        a.entries.count == b.entries.count && zip(a.entries, b.entries).allSatisfy { $0.name == $1.name && $0.values == $1.values }
    }

    public var isEmpty: Bool { entries.isEmpty }
    public subscript(name: String) -> [String]? { entries.first { $0.name == name }?.values }

    /// Compact JSON of the advices object: `{"TransactionConditionAdvice":["..."]}`.
    public var json: String { written.string }

    /// `json`'s bytes, written in one buffer (a challenge writes them twice: its body, its header).
    public var jsonBytes: [UInt8] { written.bytes }

    private var written: ByteWriter {
        var out = ByteWriter(capacity: 128)
        out.append(UInt8(ascii: "{"))
        for (i, e) in entries.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            JSONText.write(e.name, into: &out)
            out.append(UInt8(ascii: ":"), UInt8(ascii: "["))
            for (j, v) in e.values.enumerated() {
                if j > 0 { out.append(UInt8(ascii: ",")) }
                JSONText.write(v, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// AM's advice XML (WIRE.md §3b), the `authIndexValue` of a composite_advice journey.
    public var xml: String {
        "<Advices>" + entries.map { e in
            "<AttributeValuePair><Attribute name=\"\(MarkupText.escape(e.name))\"/>"
                + e.values.map { "<Value>\(MarkupText.escape($0))</Value>" }.joined() + "</AttributeValuePair>"
        }.joined() + "</Advices>"
    }

    /// Reads advice XML, URL-decoded or as unpadded base64url of the XML (both occur).
    public static func parse(xmlOrBase64 input: String) -> Advices? {
        if input.utf8.first == UInt8(ascii: "<") { return parse(xml: input) }
        var b64 = input.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while b64.count % 4 != 0 { b64 += "=" }
        guard let data = Data(base64Encoded: b64), let xml = String(data: data, encoding: .utf8) else { return nil }
        return parse(xml: xml)
    }

    /// Clients find `<Attribute name="...">` and `<Value>` with patterns, and so does this, on the
    /// UTF-8 bytes. Found by fuzzing (Fuzz/README.md): String searches compare Characters, and a
    /// value or name starting with a combining mark merges with the `>` or `"` before it, so the
    /// advices' own XML did not parse back to them.
    static func parse(xml: String) -> Advices? {
        let b = Array(xml.utf8)
        guard b.starts(with: "<Advices>".utf8), b.count >= 19, b[(b.count - 10)...].elementsEqual("</Advices>".utf8) else { return nil }
        // The patterns are literals, read where they lie (an array of each, per search, was
        // most of a composite advice's allocations).
        func find(_ pattern: StaticString, in slice: ArraySlice<UInt8>, from start: Int) -> Int? {
            pattern.withUTF8Buffer { p in
                var i = start
                while i + p.count <= slice.endIndex {
                    if slice[i..<(i + p.count)].elementsEqual(p) { return i }
                    i += 1
                }
                return nil
            }
        }
        func text(_ s: ArraySlice<UInt8>) -> String { xmlUnescape(String(decoding: s, as: UTF8.self)) }
        let separator: StaticString = "<AttributeValuePair>"
        var pairs: [ArraySlice<UInt8>] = []
        var at = 0
        while let next = find(separator, in: b[...], from: at) {
            if at > 0 { pairs.append(b[at..<next]) }
            at = next + separator.utf8CodeUnitCount
        }
        if at > 0 { pairs.append(b[at...]) }
        var entries: [(String, [String])] = []
        for pair in pairs {
            let opening: StaticString = "<Attribute name=\""
            guard let nameStart = find(opening, in: pair, from: pair.startIndex).map({ $0 + opening.utf8CodeUnitCount }),
                  let nameEnd = find("\"", in: pair, from: nameStart) else { return nil }
            var values: [String] = []
            var rest = nameEnd + 1
            while let v = find("<Value>", in: pair, from: rest), let e = find("</Value>", in: pair, from: v + 7) {
                values.append(text(pair[(v + 7)..<e]))
                rest = e + 8
            }
            entries.append((text(pair[nameStart..<nameEnd]), values))
        }
        return entries.isEmpty ? nil : Advices(entries)
    }
}

/// The four entities MarkupText.escape writes, in one pass over the bytes (anything else stays as written).
package func xmlUnescape(_ s: String) -> String {
    guard s.utf8.contains(UInt8(ascii: "&")) else { return s }
    let entities: [([UInt8], UInt8)] = [(Array("&quot;".utf8), 0x22), (Array("&lt;".utf8), 0x3C),
                                        (Array("&gt;".utf8), 0x3E), (Array("&amp;".utf8), 0x26)]
    let b = Array(s.utf8)
    var out: [UInt8] = []
    out.reserveCapacity(b.count)
    var i = 0
    while i < b.count {
        if b[i] == UInt8(ascii: "&"), let (entity, c) = entities.first(where: { b[i...].starts(with: $0.0) }) {
            out.append(c)
            i += entity.count
        } else {
            out.append(b[i])
            i += 1
        }
    }
    return String(decoding: out, as: UTF8.self)
}

/// The three ways to tell a client that step-up is needed (WIRE.md §3 and §7).
public enum Challenge {
    /// Base64 (standard alphabet, `=` padded) of the advices JSON, containing neither `+`
    /// nor `/`: Android decodes with the URL-safe alphabet and skips those two characters.
    /// The JSON's insignificant freedoms (whitespace between tokens, `\uXXXX` for a character
    /// in a string) shift and change the 3-byte groups until none encodes to either.
    public static func adviceBase64(_ advices: Advices) -> String {
        let json = advices.jsonBytes
        let plain = Data(json).base64EncodedString()
        // On bytes: `String.contains(_:)` with a string argument is Foundation's locale-aware search.
        if !plain.utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "/") }) { return plain }
        return AdviceRealigner(json).solve().map { Data($0).base64EncodedString() } ?? plain
    }

    /// `SSOADVICE realm="/",advices="...",am_uri="..."`: no space after the commas, every
    /// value quoted, and no value may contain a comma.
    public static func ssoAdviceHeader(realm: String, advices: Advices, amURI: String) -> String {
        let advice = adviceBase64(advices)
        // Sized once: interpolation grew the string at each piece.
        var s = #"SSOADVICE realm=""#
        s.reserveCapacity(48 + realm.utf8.count + advice.utf8.count + amURI.utf8.count)
        s += realm
        s += #"",advices=""#
        s += advice
        s += #"",am_uri=""#
        s += amURI
        s += #"""#
        return s
    }

    /// The browser redirect: the login page runs the composite-advice journey, then follows
    /// `goto` (the original URL with `_txid` added).
    public static func loginRedirect(loginPage: String, goto: String, realm: String, advices: Advices) -> String {
        "\(loginPage)?goto=\(Query.encode(goto))&realm=\(realm)&authIndexType=composite_advice&authIndexValue=\(Query.encode(advices.xml))"
    }

    /// RFC 9470 for bearer clients, with `txid` to name a one-shot transaction.
    public static func bearerStepUp(acr: String, txid: String?, maxAge: Int? = nil) -> String {
        var s = #"Bearer error="insufficient_user_authentication", error_description="A different authentication level is required", acr_values="\#(acr)""#
        if let maxAge { s += #", max_age="\#(maxAge)""# }
        if let txid { s += #", txid="\#(txid)""# }
        return s
    }

    /// RFC 6750 §3.1 `insufficient_scope` with the scopes to ask for (WIRE.md §13: a transaction
    /// is the scope `transaction:<TxId>`) and RFC 9728's `resource_metadata`: how an MCP client
    /// steps up.
    public static func bearerInsufficientScope(scope: String, resourceMetadata: String) -> String {
        #"Bearer error="insufficient_scope", scope="\#(scope)", resource_metadata="\#(resourceMetadata)""#
    }

    /// RFC 9728 §5.1: a resource's 401 without a usable token names its metadata.
    public static func bearerResourceMetadata(_ url: String, error: String? = nil, scope: String? = nil) -> String {
        var s = "Bearer "
        if let error { s += #"error="\#(error)", error_description="The access token is not valid", "# }
        if let scope, !scope.isEmpty { s += #"scope="\#(scope)", "# }
        return s + #"resource_metadata="\#(url)""#
    }

    /// Adds `name=value` to a URL's query.
    public static func addingQuery(_ url: String, _ name: String, _ value: String) -> String {
        let (base, fragment): (String, String) = {
            guard let h = url.firstIndex(of: "#") else { return (url, "") }
            return (String(url[..<h]), String(url[h...]))
        }()
        return base + (base.contains("?") ? "&" : "?") + name + "=" + Query.encode(value) + fragment
    }
}

/// Finds a spelling of a compact JSON text whose base64 has no `+` or `/`, by dynamic
/// programming over its units (a structural byte, a place for whitespace, a string
/// character), carrying the 0–2 bytes of the base64 group in progress.
struct AdviceRealigner {
    enum Unit {
        case fixed([UInt8])
        /// A place JSON allows whitespace: 0, 1 or 2 spaces (3 would only add a clean "ICAg").
        case gap
        /// A character inside a string: as is, or as its `\uXXXX` escape.
        case char(raw: [UInt8], escaped: [UInt8]?)
    }

    let units: [Unit]

    init(_ json: [UInt8]) {
        var units: [Unit] = [.gap]
        var i = 0
        var inString = false
        while i < json.count {
            let c = json[i]
            if inString {
                if c == UInt8(ascii: "\\") {  // an existing escape stays whole
                    let len = json[i + 1] == UInt8(ascii: "u") ? 6 : 2
                    units.append(.fixed(Array(json[i..<min(i + len, json.count)])))
                    i += len
                    continue
                }
                if c == UInt8(ascii: "\"") { inString = false; units.append(.fixed([c])); i += 1; continue }
                let len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4
                let raw = Array(json[i..<min(i + len, json.count)])
                let scalar = String(decoding: raw, as: UTF8.self).unicodeScalars.first.map(\.value) ?? 0
                let escaped = scalar <= 0xFFFF
                    ? Array(("\\u" + zeroPadded(String(scalar, radix: 16), to: 4)).utf8) : nil
                units.append(.char(raw: raw, escaped: escaped))
                i += len
                continue
            }
            if c == UInt8(ascii: "\"") { inString = true; units.append(.fixed([c])); i += 1; continue }
            if "}]".utf8.contains(c) { units.append(.gap) }
            units.append(.fixed([c]))
            if "{[,:".utf8.contains(c) { units.append(.gap) }
            i += 1
        }
        units.append(.gap)
        self.units = units
    }

    static func clean(_ group: [UInt8]) -> Bool {
        let b64 = Data(group).base64EncodedString()
        return !b64.contains("+") && !b64.contains("/")
    }

    /// Appends `bytes` to a pending partial group; nil if a completed group is not clean.
    static func feed(_ pending: [UInt8], _ bytes: [UInt8]) -> (pending: [UInt8], out: [UInt8])? {
        var p = pending
        var out: [UInt8] = []
        for b in bytes {
            p.append(b)
            if p.count == 3 {
                guard clean(p) else { return nil }
                out += p
                p.removeAll(keepingCapacity: true)
            }
        }
        return (p, out)
    }

    func solve() -> [UInt8]? {
        var failed = Set<[UInt8]>()  // (unit index, pending bytes) known to lead nowhere
        func go(_ i: Int, _ pending: [UInt8]) -> [UInt8]? {
            if i == units.count { return pending.isEmpty || Self.clean(pending) ? pending : nil }
            let memo = [UInt8(truncatingIfNeeded: i), UInt8(truncatingIfNeeded: i >> 8)] + pending
            if failed.contains(memo) { return nil }
            let options: [[UInt8]]
            switch units[i] {
            case .fixed(let b): options = [b]
            case .gap: options = [[], [0x20], [0x20, 0x20]]
            case .char(let raw, let escaped): options = escaped.map { [raw, $0] } ?? [raw]
            }
            for o in options {
                guard let (p, out) = Self.feed(pending, o), let rest = go(i + 1, p) else { continue }
                return out + rest
            }
            failed.insert(memo)
            return nil
        }
        return go(0, [])
    }
}

private func zeroPadded(_ s: String, to n: Int) -> String {
    s.count >= n ? s : String(repeating: "0", count: n - s.count) + s
}
