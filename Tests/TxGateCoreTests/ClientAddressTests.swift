import Testing
@testable import TxGateCore

@Suite struct ClientAddressTests {
    func cidr(_ s: String) throws -> CIDR { try CIDR(parsing: s) }

    @Test func addressesParseInBothFamiliesAndPrintCanonically() {
        #expect(IPAddress("192.0.2.7")?.description == "192.0.2.7")
        #expect(IPAddress("2001:DB8:0:0::1")?.description == "2001:db8::1")
        #expect(IPAddress("[2001:db8::1]")?.description == "2001:db8::1")
        // What a dual-stack socket reports for an IPv4 peer is that IPv4 address.
        #expect(IPAddress("::ffff:127.0.0.2") == IPAddress("127.0.0.2"))
        for bad in ["", "nginx", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.4:80", "unknown", "::g"] {
            #expect(IPAddress(bad) == nil, "\(bad)")
        }
    }

    @Test func rangesMatchTheirOwnFamilyOnly() throws {
        let v4 = try cidr("10.0.0.0/8")
        #expect(v4.contains(IPAddress("10.255.1.2")!))
        #expect(!v4.contains(IPAddress("11.0.0.1")!))
        #expect(v4.contains(IPAddress("::ffff:10.1.1.1")!))
        #expect(!v4.contains(IPAddress("a00::1")!))
        let v6 = try cidr("fd00::/8")
        #expect(v6.contains(IPAddress("fd12:3456::1")!))
        #expect(!v6.contains(IPAddress("fe80::1")!))
        #expect(!v6.contains(IPAddress("10.0.0.1")!))
        #expect(try cidr("0.0.0.0/0").contains(IPAddress("203.0.113.9")!))
        #expect(try cidr("::/0").contains(IPAddress("2001:db8::1")!))
        #expect(try cidr("2001:db8::/33").contains(IPAddress("2001:db8:7fff::1")!))
        #expect(try !cidr("2001:db8::/33").contains(IPAddress("2001:db8:8000::1")!))
        #expect(try cidr("192.0.2.7").contains(IPAddress("192.0.2.7")!))
        #expect(try !cidr("192.0.2.7").contains(IPAddress("192.0.2.8")!))
        #expect(try cidr("::1").prefixLength == 128)
    }

    @Test func badRangesSayWhatIsWrong() {
        #expect(throws: CIDR.ParseError.badPrefix("10.0.0.0/", max: 32)) { _ = try CIDR(parsing: "10.0.0.0/") }
        #expect(throws: CIDR.ParseError.badPrefix("10.0.0.0/-1", max: 32)) { _ = try CIDR(parsing: "10.0.0.0/-1") }
        #expect(throws: CIDR.ParseError.badPrefix("::/129", max: 128)) { _ = try CIDR(parsing: "::/129") }
        #expect(throws: CIDR.ParseError.hostBitsSet("fd00::1/8", suggestion: "fd00::/8")) { _ = try CIDR(parsing: "fd00::1/8") }
        #expect(throws: CIDR.ParseError.notAnAddress("[::1]/128")) { _ = try CIDR(parsing: "[::1]/128") }
    }

    @Test func theClientIsTheRightMostUntrustedEntryBehindATrustedPeer() throws {
        let trusted = TrustedProxies([try cidr("10.0.0.0/8"), try cidr("127.0.0.2")])
        func client(_ peer: String, _ xff: [String]) -> TrustedProxies.Client { trusted.client(peer: peer, forwardedFor: xff) }

        // An untrusted peer: its X-Forwarded-For is ignored.
        #expect(client("203.0.113.1", ["198.51.100.7"]) == .init(address: "203.0.113.1", viaTrustedProxy: false))
        // A trusted peer: the right-most entry it does not trust, past trusted hops.
        #expect(client("127.0.0.2", ["198.51.100.7"]) == .init(address: "198.51.100.7", viaTrustedProxy: true))
        #expect(client("10.0.0.1", ["6.6.6.6, 198.51.100.7, 10.1.1.1"]).address == "198.51.100.7")
        // Several fields are one list, in order.
        #expect(client("10.0.0.1", ["6.6.6.6", "198.51.100.7 , 10.1.1.1"]).address == "198.51.100.7")
        // All trusted: the left-most.
        #expect(client("10.0.0.1", ["10.3.3.3, 10.2.2.2"]).address == "10.3.3.3")
        // None: the peer.
        #expect(client("10.0.0.1", []) == .init(address: "10.0.0.1", viaTrustedProxy: true))
        // An entry that is not an address is a hop nobody can name: the client is unknown, never
        // the trusted proxy (which would put every client behind it in one lockout bucket).
        #expect(client("10.0.0.1", ["198.51.100.7, unknown, 10.2.2.2"]) == .init(address: "unknown", viaTrustedProxy: true))
        #expect(client("10.0.0.1", ["garbage"]).address == TrustedProxies.unknownClient)
        #expect(client("10.0.0.1", ["UNKNOWN"]).address == "unknown")
        // Ports (Azure Application Gateway) are dropped, for IPv4 and bracketed IPv6.
        #expect(client("10.0.0.1", ["6.6.6.6:1234"]).address == "6.6.6.6")
        #expect(client("10.0.0.1", ["[2001:db8::1]:80"]).address == "2001:db8::1")
        #expect(client("10.0.0.1", ["[2001:db8::1]"]).address == "2001:db8::1")
        #expect(client("10.0.0.1", ["198.51.100.7:1, 10.2.2.2:443"]).address == "198.51.100.7", "trusted hops with ports are walked past")
        // Canonical text, so that one address is one lockout key.
        #expect(client("10.0.0.1", ["2001:DB8::0:1"]).address == "2001:db8::1")
        #expect(client("::ffff:10.0.0.1", ["::ffff:198.51.100.7"]).address == "198.51.100.7")
        // Nothing is trusted without ranges.
        #expect(TrustedProxies().client(peer: "10.0.0.1", forwardedFor: ["1.2.3.4"]).address == "10.0.0.1")
    }

    @Test(arguments: [
        ("192.0.2.1", "192.0.2.1"), ("192.0.2.1:8080", "192.0.2.1"), ("192.0.2.1:65535", "192.0.2.1"),
        ("2001:db8::1", "2001:db8::1"), ("[2001:db8::1]", "2001:db8::1"), ("[2001:db8::1]:80", "2001:db8::1"),
        ("[::ffff:192.0.2.1]:1", "192.0.2.1"),
    ])
    func forwardedEntriesWithPorts(_ entry: String, _ address: String) {
        #expect(TrustedProxies.forwardedAddress(entry)?.description == address)
    }

    @Test(arguments: ["unknown", "_hidden", "192.0.2.1:", "192.0.2.1:123456", "192.0.2.1:8o", "[192.0.2.1]", "[2001:db8::1]80",
                      "[2001:db8::1", "2001:db8::1]:80", "192.0.2.1:80:80", "example.com:80", "", ":80"])
    func forwardedEntriesThatAreNoAddress(_ entry: String) {
        #expect(TrustedProxies.forwardedAddress(entry) == nil, "\(entry)")
    }

    @Test func anUnknownSourceIsNoLockoutKey() {
        #expect(!Attempter(user: "demo", source: TrustedProxies.unknownClient).hasKnownSource)
        #expect(Attempter(user: "demo", source: "192.0.2.1").hasKnownSource)
    }

    /// `metrics.allowFrom`'s default and its check on a socket's address.
    @Test func loopbackRanges() {
        for ok in ["127.0.0.1", "127.9.8.7", "::1", "::ffff:127.0.0.1"] { #expect(CIDR.loopback.contains(address: ok), "\(ok)") }
        for no in ["10.0.0.1", "::2", "not an address", ""] { #expect(!CIDR.loopback.contains(address: no), "\(no)") }
    }
}
