import Foundation
import Testing
@testable import TxGateCore

/// `webauthn` and the passkey nodes: every mistake named at its path (issue 26).
@Suite struct WebAuthnConfigTests {
    static let base = #""upstream": {"url": "http://127.0.0.1:9000"}, "users": [], "#

    func errors(_ json: String) -> [String] {
        switch Result(catching: { try ConfigLoader.decode(Data(("{" + Self.base + json + "}").utf8), folder: "/tmp") }) {
        case .success: return []
        case .failure(let e as ConfigErrors): return e.errors.map(\.description)
        case .failure(let e): return ["\(e)"]
        }
    }

    @Test("bad values: an RP ID with a scheme, an origin off the RP ID, an unknown algorithm or UV, a short timeout")
    func badValues() {
        let e = errors(#""publicUrl": "https://bank.example", "journeys": {"Login": [{"type": "UsernamePassword"}]}, "#
            + #""webauthn": {"rpId": "https://bank.example", "origins": ["https://evil.example", "https://bank.example/x"], "#
            + #""algorithms": ["PS256"], "userVerification": "always", "timeoutMs": 5, "rpName": ""}"#)
        for expected in ["webauthn.rpId: 'https://bank.example' is not a domain name", "webauthn.origins[1]: 'https://bank.example/x' is not an origin",
                         "webauthn.algorithms[0]: 'PS256' is not ES256, RS256 or EdDSA", "webauthn.userVerification", "webauthn.timeoutMs",
                         "webauthn.rpName: must be 1 to 64 characters"] {
            #expect(e.contains { $0.hasPrefix(expected) }, "no '\(expected)' in \(e)")
        }
        let off = errors(#""publicUrl": "https://bank.example", "journeys": {"Login": [{"type": "UsernamePassword"}]}, "#
            + #""webauthn": {"rpId": "bank.example", "origins": ["https://evil.example"]}"#)
        #expect(off.contains { $0.hasPrefix("webauthn.origins[0]: 'https://evil.example' is not on rpId 'bank.example'") }, "\(off)")
    }

    @Test("passkey nodes need webauthn, and an RP ID a browser takes; a fallback is TOTP only")
    func nodes() {
        let journeys = #""journeys": {"Login": [{"type": "UsernamePassword"}], "P": [{"type": "WebAuthnAuthentication"}]}"#
        #expect(errors(#""publicUrl": "http://localhost:8080", "# + journeys).contains {
            $0.hasPrefix("journeys.P[0]: WebAuthnAuthentication needs `webauthn`")
        })
        #expect(errors(#""publicUrl": "http://127.0.0.1:8080", "webauthn": {}, "# + journeys).contains {
            $0.hasPrefix("webauthn.rpId: required: publicUrl's host 127.0.0.1 is not a domain name")
        })
        #expect(errors(#""publicUrl": "http://localhost:8080", "webauthn": {}, "# + journeys) == [])
        let fallback = errors(#""publicUrl": "http://localhost:8080", "webauthn": {}, "journeys": {"Login": [{"type": "UsernamePassword"}], "#
            + #""P": [{"type": "WebAuthnAuthentication", "fallback": "SMS"}], "Q": [{"type": "WebAuthnAuthentication", "usernameless": true, "fallback": "TOTP"}]}"#)
        #expect(fallback.contains { $0.hasPrefix("journeys.P[0].fallback: 'SMS' is not a fallback (TOTP)") }, "\(fallback)")
        #expect(fallback.contains { $0.hasPrefix("journeys.Q[0].fallback: a usernameless step has no user") }, "\(fallback)")
    }

    @Test("the defaults come from publicUrl")
    func defaults() throws {
        let c = try WebAuthnConfig().relyingParty(publicURL: #require(HTTPURL(parsing: "https://Bank.example:8443/base")))
        #expect(c?.id == "bank.example" && c?.origins == ["https://bank.example:8443"], "\(String(describing: c))")
        #expect(WebAuthnConfig().relyingParty(publicURL: try #require(HTTPURL(parsing: "http://10.0.0.1"))) == nil)
    }
}
