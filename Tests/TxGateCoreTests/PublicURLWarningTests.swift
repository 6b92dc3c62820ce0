import Foundation
import Testing
@testable import TxGateCore

/// The warning `check` and `serve` give when `publicUrl` leads browsers to a port of this
/// machine the gateway does not listen on (issue 24, item 5), and the setups it leaves alone.
@Suite struct PublicURLWarningTests {
    func warning(_ json: String, listen: String? = nil) throws -> String? {
        let config = try ConfigLoader.decode(Data(json.utf8), folder: "/tmp", overrides: ConfigOverrides(listen: listen))
        let found = config.warnings(environment: [:]).filter { $0.hasPrefix("publicUrl ") }
        #expect(found.count <= 1, "\(found)")
        return found.first
    }

    let demo = #"{"listen": "127.0.0.1:8080", "publicUrl": "http://127.0.0.1:8080", "upstream": {"url": "http://127.0.0.1:9000"}}"#

    @Test func theDemoFileServedOnAnotherPortWarnsWithTheURLToSet() throws {
        let w = try #require(try warning(demo, listen: "127.0.0.1:8081"))
        #expect(w == "publicUrl http://127.0.0.1:8080 names port 8080 on this machine, but the gateway listens on 127.0.0.1:8081: "
            + "links to the login page and back lead browsers to port 8080, not to the gateway; set publicUrl to "
            + "http://127.0.0.1:8081 (unless a proxy on this machine forwards port 8080 to the gateway)")
    }

    @Test func theDemoFileAsItIsDoesNotWarn() throws {
        #expect(try warning(demo) == nil)
    }

    @Test(arguments: [
        // localhost and the IPv6 loopback, a base path, a listener on all addresses
        (#"{"listen": "0.0.0.0:9443", "publicUrl": "http://localhost:8080/gw", "upstream": {"url": "http://127.0.0.1:9000"}}"#,
         "http://localhost:9443/gw"),
        (#"{"listen": "[::1]:8081", "publicUrl": "http://[::1]:8080", "upstream": {"url": "http://127.0.0.1:9000"}}"#,
         "http://[::1]:8081"),
        // listen's own (non-loopback) host, on another port
        (#"{"listen": "10.0.0.5:8081", "publicUrl": "http://10.0.0.5", "upstream": {"url": "http://127.0.0.1:9000"}}"#,
         "http://10.0.0.5:8081"),
    ])
    func aURLOnThisMachineOnAnotherPortWarns(json: String, suggested: String) throws {
        let w = try #require(try warning(json))
        #expect(w.contains("set publicUrl to \(suggested) "), "\(w)")
    }

    @Test(arguments: [
        // the address clients use is a load balancer's or a proxy's elsewhere
        #"{"listen": "127.0.0.1:8080", "publicUrl": "https://bank.example.com", "upstream": {"url": "http://127.0.0.1:9000"}}"#,
        // a TLS terminator on this machine in front of a plain listener
        #"{"listen": "127.0.0.1:8080", "publicUrl": "https://localhost", "upstream": {"url": "http://127.0.0.1:9000"}}"#,
        // no publicUrl: links are derived from listen
        #"{"listen": "127.0.0.1:8081", "upstream": {"url": "http://127.0.0.1:9000"}}"#,
        // any free port: nothing to compare with
        #"{"listen": "127.0.0.1:0", "publicUrl": "http://127.0.0.1:8080", "upstream": {"url": "http://127.0.0.1:9000"}}"#,
    ])
    func setupsBehindAProxyDoNotWarn(json: String) throws {
        #expect(try warning(json) == nil)
    }
}
