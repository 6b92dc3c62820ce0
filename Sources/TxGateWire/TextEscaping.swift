import HTTPCore

/// Escaping text for JSON strings and for XML/HTML markup, as the wire formats need it.
public enum JSONText {
    /// Calls `emit` with the pieces of `s` escaped for use inside JSON double quotes: runs of
    /// bytes as they are, and an escape for each `"`, `\` and control character (`\n`, `\r`,
    /// `\t`, others as lowercase `\u00XX`). The one table of JSON string escaping: `escape`,
    /// `write` and the access log's lines all go through it.
    public static func escape(_ s: String, _ emit: (UnsafeBufferPointer<UInt8>) -> Void) {
        s.withUTF8Bytes { escape(bytes: $0, emit) }
    }

    /// `escape` of a string's UTF-8 bytes.
    public static func escape(bytes: UnsafeBufferPointer<UInt8>, _ emit: (UnsafeBufferPointer<UInt8>) -> Void) {
        var start = 0
        while true {
            let end = JSONStringScan.plainRun(bytes, from: start).end
            emit(UnsafeBufferPointer(rebasing: bytes[start..<end]))
            guard end < bytes.count else { return }
            escapeSequence(bytes[end]).withUnsafeBufferPointer(emit)
            start = end + 1
        }
    }

    /// Whether UTF-8 `bytes` go inside JSON double quotes as they are (`escape` would emit
    /// them in one piece): no `"`, `\` or control character.
    public static func isPlain(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        JSONStringScan.isPlain(bytes)
    }

    /// Escapes a string for use inside JSON double quotes (a string with nothing to escape is
    /// returned as it is, after one pass over its bytes).
    public static func escape(_ s: String) -> String {
        if s.withUTF8Bytes(isPlain) { return s }
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count + 16)
        escape(s) { out.append(contentsOf: $0) }
        return String(decoding: out, as: UTF8.self)
    }

    /// `s` as a JSON string, quotes included, appended to `out`: the bytes `escape` gives. A
    /// string with nothing to escape (nearly every one) is one copy between its quotes.
    @inlinable
    public static func write(_ s: String, into out: inout ByteWriter) {
        s.withUTF8Bytes { write(bytes: $0, into: &out) }
    }

    /// `write` of a string's UTF-8 bytes. Both are inlinable: the access log writes a dozen
    /// fields a line.
    @inlinable
    public static func write(bytes: UnsafeBufferPointer<UInt8>, into out: inout ByteWriter) {
        out.append(UInt8(ascii: "\""))
        if isPlain(bytes) { out.append(bytes) } else { escape(bytes: bytes) { out.append($0) } }
        out.append(UInt8(ascii: "\""))
    }

    private static let quote = Array(#"\""#.utf8), backslash = Array(#"\\"#.utf8)
    private static let newline = Array(#"\n"#.utf8), carriageReturn = Array(#"\r"#.utf8), tab = Array(#"\t"#.utf8)
    private static let hex = Array("0123456789abcdef".utf8)

    private static func escapeSequence(_ b: UInt8) -> [UInt8] {
        switch b {
        case 0x22: return quote
        case 0x5C: return backslash
        case 0x0A: return newline
        case 0x0D: return carriageReturn
        case 0x09: return tab
        default: return Array(#"\u00"#.utf8) + [hex[Int(b >> 4)], hex[Int(b & 0xF)]]
        }
    }
}

/// `&`, `<`, `>` and `"` as entities: text for XML (advices) and HTML (the login page).
public enum MarkupText {
    public static func escape(_ s: String) -> String {
        TextEscaping.escape(s, where: { $0 == 0x26 || $0 == 0x3C || $0 == 0x3E || $0 == 0x22 }) { ch in
            switch ch {
            case "&": return "&amp;"
            case "<": return "&lt;"
            case ">": return "&gt;"
            case "\"": return "&quot;"
            default: return nil
            }
        }
    }
}

/// One pass over the scalars; a string with no byte to escape is returned as it is.
package enum TextEscaping {
    package static func escape(_ s: String, where needs: (UInt8) -> Bool, _ replacement: (Unicode.Scalar) -> String?) -> String {
        guard s.utf8.contains(where: needs) else { return s }
        var out = ""
        out.reserveCapacity(s.utf8.count + 16)
        for ch in s.unicodeScalars {
            if let r = replacement(ch) { out += r } else { out.unicodeScalars.append(ch) }
        }
        return out
    }
}
