import TxGateCore
import Foundation
import Testing
import TestSupport
@testable import TxGateEmail

@Suite struct MessageFormatTests {
    @Test func dateIsRFC5322InUTC() {
        #expect(MessageFormat.date(epochMs: 1_700_000_000_123) == "Tue, 14 Nov 2023 22:13:20 +0000")
        #expect(MessageFormat.date(epochMs: 0) == "Thu, 01 Jan 1970 00:00:00 +0000")
    }

    @Test func renderIsTheSameBytesForTheSameInputs() {
        let message = OutgoingEmail(to: "a@example.com", subject: "s", body: "line 1\nline 2")
        let one = MessageFormat.render(message, from: "f@example.com", epochMs: 1_700_000_000_000, messageID: "<x@example.com>")
        let two = MessageFormat.render(message, from: "f@example.com", epochMs: 1_700_000_000_000, messageID: "<x@example.com>")
        #expect(one == two)
        #expect(String(decoding: one, as: UTF8.self) == """
            Date: Tue, 14 Nov 2023 22:13:20 +0000\r
            From: f@example.com\r
            To: a@example.com\r
            Subject: s\r
            Message-ID: <x@example.com>\r
            MIME-Version: 1.0\r
            Content-Type: text/plain; charset=utf-8\r
            Content-Transfer-Encoding: 7bit\r
            \r
            line 1\r
            line 2\r

            """)
    }

    @Test func bodyLineEndingsBecomeCRLF() {
        #expect(MessageFormat.bodyLines("a\nb\r\nc\rd\n") == [Array("a".utf8), Array("b".utf8), Array("c".utf8), Array("d".utf8)])
        #expect(MessageFormat.bodyLines("a\n\nb") == [Array("a".utf8), [], Array("b".utf8)])
        #expect(MessageFormat.bodyLines("") == [])
    }

    @Test func quotedPrintableEncodesWhatMustBeEncoded() {
        let out = String(decoding: MessageFormat.quotedPrintable([Array("a=b é \t".utf8)]), as: UTF8.self)
        #expect(out == "a=3Db =C3=A9 =09\r\n")
        let long = String(decoding: MessageFormat.quotedPrintable([Array(repeating: UInt8(ascii: "x"), count: 200)]), as: UTF8.self)
        let lines = long.components(separatedBy: "\r\n").dropLast()
        #expect(lines.allSatisfy { $0.count <= 76 })
        #expect(lines.dropLast().allSatisfy { $0.hasSuffix("=") })
        #expect(lines.joined().replacingOccurrences(of: "=", with: "") == String(repeating: "x", count: 200))
    }

    @Test func subjectEncodesOnlyWhenNeeded() {
        #expect(MessageFormat.subject("Plain subject") == "Plain subject")
        #expect(MessageFormat.subject("Grüße") == "=?UTF-8?B?R3LDvMOfZQ==?=")
        #expect(MessageFormat.subject("looks =?encoded?=").hasPrefix("=?UTF-8?B?"))
        let long = MessageFormat.subject(String(repeating: "€", count: 40))
        let words = long.components(separatedBy: "\r\n ")
        #expect(words.count > 1)
        #expect(words.allSatisfy { $0.count <= 75 && $0.hasPrefix("=?UTF-8?B?") && $0.hasSuffix("?=") })
    }

    @Test func addressesAreChecked() {
        #expect(MessageFormat.addressProblem("alice@example.com") == nil)
        #expect(MessageFormat.addressProblem("a.b+tag@sub.example.co.uk") == nil)
        for bad in ["", "alice", "a@b@c", "a b@c.d", "a@", "@b", "a@b..c", "a@.b", "a\t@b.c", "a,b@c.d", "<a@b.c>", "é@b.c"] {
            #expect(MessageFormat.addressProblem(bad) != nil, "accepted '\(bad)'")
        }
    }
}
