import TxGateCore
import Foundation

/// The one RFC 5322 rendering of a message, shared by SMTP and the outbox so that what a
/// developer reads in the outbox is byte for byte what an SMTP server would receive.
enum MessageFormat {
    /// Refuses a message whose recipient or subject could add headers or recipients of its own.
    static func check(_ message: OutgoingEmail) -> EmailError? {
        if message.to.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" }) {
            return .failed("recipient contains a line break (CR or LF); refused, it could inject headers")
        }
        if message.subject.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" }) {
            return .failed("subject contains a line break (CR or LF); refused, it could inject headers")
        }
        if let problem = addressProblem(message.to) { return .failed("recipient '\(message.to)' \(problem)") }
        return nil
    }

    /// Why `address` is not a plain `local@domain` address, or nil if it is one.
    /// Plain ASCII only: non-ASCII addresses need SMTPUTF8, which is not asked for.
    static func addressProblem(_ address: String) -> String? {
        let parts = address.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return "is not an email address (it needs exactly one '@')" }
        guard !parts[0].isEmpty, !parts[1].isEmpty else { return "is not an email address (empty before or after '@')" }
        for scalar in address.unicodeScalars {
            if scalar.value <= 0x20 || scalar.value >= 0x7f { return "is not an email address (spaces, control or non-ASCII characters)" }
            if "<>(),;:\"[]\\".unicodeScalars.contains(scalar) { return "is not an email address (it contains '\(scalar)')" }
        }
        if parts[1].hasPrefix(".") || parts[1].hasSuffix(".") || parts[1].contains("..") {
            return "is not an email address (bad domain '\(parts[1])')"
        }
        return nil
    }

    /// The message as sent: CRLF line endings, headers, a blank line, the body.
    /// `date` and `messageID` are given so that every retry of one message is the same message.
    static func render(_ message: OutgoingEmail, from: String, epochMs: Int64, messageID: String) -> [UInt8] {
        let lines = bodyLines(message.body)
        let plain = lines.allSatisfy { line in line.count <= 998 && line.allSatisfy { $0 == 9 || (0x20...0x7e).contains($0) } }
        var out = [UInt8]()
        func header(_ name: String, _ value: String) { out += Array("\(name): \(value)\r\n".utf8) }
        header("Date", date(epochMs: epochMs))
        header("From", from)
        header("To", message.to)
        header("Subject", subject(message.subject))
        header("Message-ID", messageID)
        header("MIME-Version", "1.0")
        header("Content-Type", "text/plain; charset=utf-8")
        // 7bit keeps plain ASCII (and the links in it) readable in the outbox; anything else is
        // quoted-printable, which every SMTP server carries (8bit would need 8BITMIME).
        header("Content-Transfer-Encoding", plain ? "7bit" : "quoted-printable")
        out += [13, 10]
        if plain {
            for line in lines { out += line; out += [13, 10] }
        } else {
            out += quotedPrintable(lines)
        }
        return out
    }

    /// A new `<epoch-ms.random@domain>` identifier, the domain taken from the sender.
    static func newMessageID(from: String, epochMs: Int64) -> String {
        let domain = from.split(separator: "@").last.map(String.init) ?? "localhost"
        return "<\(epochMs).\(randomHex(bytes: 12))@\(domain)>"
    }

    static func randomHex(bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<bytes).map { _ in
            let b = UInt8.random(in: 0...255, using: &generator)
            return String(b, radix: 16).leftPadded(to: 2)
        }.joined()
    }

    static func nowMs() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }

    /// RFC 5322 §3.3 date-time, in UTC: `Sun, 22 Nov 2026 08:39:08 +0000`.
    static func date(epochMs: Int64) -> String {
        var seconds = time_t(epochMs / 1000)
        var t = tm()
        gmtime_r(&seconds, &t)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ n: Int32) -> String { String(n).leftPadded(to: 2) }
        return "\(days[Int(t.tm_wday)]), \(two(t.tm_mday)) \(months[Int(t.tm_mon)]) \(t.tm_year + 1900) "
            + "\(two(t.tm_hour)):\(two(t.tm_min)):\(two(t.tm_sec)) +0000"
    }

    /// Plain printable ASCII as is; anything else as RFC 2047 encoded words (UTF-8, base64),
    /// each at most 75 characters, folded onto continuation lines.
    static func subject(_ subject: String) -> String {
        let printable = subject.unicodeScalars.allSatisfy { $0 == "\t" || (0x20...0x7e).contains($0.value) }
        if printable && subject.utf8.count <= 980 && !subject.contains("=?") { return subject }
        var words: [String] = []
        var chunk = [UInt8]()
        func flush() {
            if !chunk.isEmpty { words.append("=?UTF-8?B?\(Data(chunk).base64EncodedString())?=") }
            chunk = []
        }
        for scalar in subject.unicodeScalars {
            let bytes = Array(String(scalar).utf8)
            // 45 bytes are 60 base64 characters: with `=?UTF-8?B?` and `?=`, 72 per word.
            if chunk.count + bytes.count > 45 { flush() }
            chunk += bytes
        }
        flush()
        return words.joined(separator: "\r\n ")
    }

    /// The body's lines as bytes, whatever line endings it used. A final line break ends the
    /// last line rather than starting an empty one.
    static func bodyLines(_ body: String) -> [[UInt8]] {
        var lines: [[UInt8]] = []
        var line = [UInt8]()
        var afterCR = false
        for b in body.utf8 {
            if afterCR && b == 10 { afterCR = false; continue }
            afterCR = false
            if b == 13 || b == 10 {
                lines.append(line)
                line = []
                afterCR = b == 13
            } else {
                line.append(b)
            }
        }
        if !line.isEmpty { lines.append(line) }
        return lines
    }

    /// RFC 2045 §6.7: at most 76 characters a line, soft breaks as `=` CRLF, trailing spaces encoded.
    static func quotedPrintable(_ lines: [[UInt8]]) -> [UInt8] {
        let hex = Array("0123456789ABCDEF".utf8)
        var out = [UInt8]()
        for line in lines {
            var column = 0
            for (i, b) in line.enumerated() {
                let last = i == line.count - 1
                let literal = ((33...126).contains(b) && b != UInt8(ascii: "=")) || ((b == 32 || b == 9) && !last)
                let token: [UInt8] = literal ? [b] : [UInt8(ascii: "="), hex[Int(b >> 4)], hex[Int(b & 15)]]
                if column + token.count > 75 {
                    out += [UInt8(ascii: "="), 13, 10]
                    column = 0
                }
                out += token
                column += token.count
            }
            out += [13, 10]
        }
        return out
    }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
