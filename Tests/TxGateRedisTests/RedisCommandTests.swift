import Testing
@testable import TxGateRedis

/// A command's RESP, byte for byte, whatever the sizes of its arguments: what hiredis sends.
@Suite struct RedisCommandTests {
    /// RESP of `args` written the simplest way.
    static func resp(_ args: [[UInt8]]) -> [UInt8] {
        var out = Array("*\(args.count)\r\n".utf8)
        for a in args { out += Array("$\(a.count)\r\n".utf8) + a + Array("\r\n".utf8) }
        return out
    }

    @Test func argumentsOfEverySizeAndAPrefixedKeyAreWrittenAsRESP() {
        let big = (0..<3_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }  // grows the buffer past its first 128 bytes
        var c = RedisCommand("SET")
        c.add("bench:", "tx:0b8f…")  // a non-ASCII key too
        c.add(big)
        c.add([])
        c.add("PX")
        c.add(String(180_000))
        c.add("", "")
        c.add("p:", "")
        #expect(c.count == 8)
        #expect(c.resp == Self.resp([Array("SET".utf8), Array("bench:tx:0b8f…".utf8), big, [], Array("PX".utf8),
                                     Array("180000".utf8), [], Array("p:".utf8)]))
    }

    /// The `*<count>` header is kept in front of the arguments as they are added (one digit,
    /// then two), and the command is sent from there (`resp` reads it through `withRESP`).
    @Test func theCountHeaderFollowsTheArgumentsAndAScriptBecomesEVAL() {
        let script = RedisScript("return #ARGV")
        var c = RedisCommand(script)
        var args: [[UInt8]] = [Array("EVALSHA".utf8), Array(script.sha1)]
        for i in 0..<11 {
            c.add(String(i))
            args.append(Array(String(i).utf8))
            #expect(c.resp == Self.resp(args))
        }
        #expect(c.count == 13)
        let eval = c.withScriptText()
        #expect(eval?.count == 13)
        #expect(eval?.resp == Self.resp([Array("EVAL".utf8), Array(script.text)] + args.dropFirst(2)))
    }
}

extension RedisCommand {
    /// The command as it is sent (`withRESP`), copied.
    var resp: [UInt8] { withRESP { Array($0) } }
}
