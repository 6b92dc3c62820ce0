import Foundation
import Testing
@testable import TxGateCore

@Suite struct CIDRTests {
    @Test func ipv4RangesMatchTheirAddressesOnly() throws {
        let loopback = try #require(CIDR(parsing: "127.0.0.0/8"))
        #expect(loopback.contains("127.0.0.1"))
        #expect(loopback.contains("127.255.255.254"))
        #expect(!loopback.contains("128.0.0.1"))
        #expect(!loopback.contains("10.0.0.1"))
        let one = try #require(CIDR(parsing: "127.0.0.1/32"))
        #expect(one.contains("127.0.0.1"))
        #expect(!one.contains("127.0.0.2"))
        let odd = try #require(CIDR(parsing: "10.1.2.3/20"))
        #expect(odd.description == "10.1.0.0/20")
        #expect(odd.contains("10.1.15.255"))
        #expect(!odd.contains("10.1.16.0"))
        #expect(try #require(CIDR(parsing: "0.0.0.0/0")).contains("203.0.113.9"))
    }

    @Test func aBareAddressIsThatAddress() throws {
        let c = try #require(CIDR(parsing: "192.0.2.7"))
        #expect(c.prefixLength == 32)
        #expect(c.contains("192.0.2.7"))
        #expect(!c.contains("192.0.2.8"))
        #expect(try #require(CIDR(parsing: "::1")).prefixLength == 128)
    }

    @Test func ipv6RangesAndMappedIPv4() throws {
        let v6 = try #require(CIDR(parsing: "fd00::/8"))
        #expect(v6.contains("fd12:3456::1"))
        #expect(!v6.contains("fe80::1"))
        #expect(!v6.contains("127.0.0.1"))
        #expect(CIDR.loopback.contains(address: "::1"))
        #expect(!CIDR.loopback.contains(address: "::2"))
        // A dual-stack listener sees IPv4 peers as ::ffff:a.b.c.d.
        #expect(CIDR.loopback.contains(address: "::ffff:127.0.0.1"))
        #expect(!CIDR.loopback.contains(address: "::ffff:10.0.0.1"))
        #expect(try #require(CIDR(parsing: "2001:db8::1/32")).description == "2001:db8::/32")
    }

    @Test func malformedRangesAreRefused() {
        for bad in ["", "/8", "127.0.0.0/", "127.0.0.0/33", "::1/129", "127.0.0.0/-1", "127.0.0.0/+8", "127.0.0.0/8/8",
                    "127.0.0", "256.0.0.1", "localhost", "[::1]", "127.0.0.0/ 8", "::1/0128"] {
            #expect(CIDR(parsing: bad) == nil, "'\(bad)' was accepted")
        }
        #expect(!CIDR.loopback.contains(address: "unknown"))
    }

    @Test func metricsAllowFromDefaultsToLoopbackAndIsDecodedStrictly() throws {
        func decode(_ json: String) -> Result<GatewayConfig, ConfigErrors> {
            do { return .success(try ConfigLoader.decode(Data(json.utf8), folder: "/tmp")) } catch { return .failure(error) }
        }
        let upstream = #""upstream": {"url": "http://127.0.0.1:9000"}"#
        let d = try decode("{\(upstream)}").get()
        #expect(d.metrics.allowFrom == CIDR.loopback)
        let c = try decode(#"{\#(upstream), "metrics": {"allowFrom": ["10.0.0.0/8", "::1"]}}"#).get()
        #expect(c.metrics.allowFrom.map(\.description) == ["10.0.0.0/8", "::1/128"])
        let none = try decode(#"{\#(upstream), "metrics": {"allowFrom": []}}"#).get()
        #expect(none.metrics.allowFrom.isEmpty)
        guard case .failure(let e) = decode(#"{\#(upstream), "metrics": {"allowFrom": ["10.0.0.0/8", "10.0.0.0/40"], "allow": 1}}"#) else {
            Issue.record("a bad range was accepted"); return
        }
        #expect(e.errors.map(\.description).sorted() == [
            "metrics.allow: unknown key",
            "metrics.allowFrom[1]: '10.0.0.0/40' is not an address or CIDR range (like 127.0.0.0/8 or ::1/128)",
        ])
    }
}
