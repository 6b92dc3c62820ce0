import Foundation
import Testing
@testable import TxGateCore

/// Client ID Metadata Documents: which client IDs are fetched, from which addresses, and what a
/// document must say.
@Suite struct ClientMetadataDocumentTests {
    @Test("a client ID is fetched only when it is an https URL with a path, no user, fragment or dot segment")
    func locations() {
        #expect(ClientMetadataDocument.location("https://agent.example/client.json")! == ("agent.example", 443, "/client.json"))
        #expect(ClientMetadataDocument.location("https://agent.example:8443/c?v=2")! == ("agent.example", 8443, "/c?v=2"))
        #expect(ClientMetadataDocument.location("https://[2001:db8::1]/c")!.host == "2001:db8::1")
        for bad in ["http://agent.example/c", "https://agent.example", "https://agent.example/", "https://u:p@agent.example/c",
                    "https://agent.example/c#f", "https://agent.example/a/../c", "https://agent.example/a/%2e%2e/c", "https://agent.example/./c",
                    "dyn.abc", "agent", "https://agent.example/" + String(repeating: "a", count: 512)] {
            #expect(ClientMetadataDocument.location(bad) == nil, "\(bad)")
        }
    }

    @Test("only public addresses, unless allowed: loopback, private, link-local (cloud metadata), mapped and unique-local are refused")
    func addresses() {
        for a in ["127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1",
                  "::1", "::", "fd00::1", "fe80::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "64:ff9b::a00:1"] {
            #expect(ClientMetadataDocument.addressRefusal(a, allowPrivate: false) == "its host resolves to \(a), which is not a public address", "\(a)")
            #expect(ClientMetadataDocument.addressRefusal(a, allowPrivate: true) == nil, "\(a)")
        }
        for a in ["93.184.215.14", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8"] {
            #expect(ClientMetadataDocument.addressRefusal(a, allowPrivate: false) == nil, "\(a)")
        }
        #expect(ClientMetadataDocument.addressRefusal("localhost", allowPrivate: true) == "'localhost' is not an IP address")
    }

    @Test("a document describes a public client under its own URL, with redirect URIs a registration could have")
    func documents() throws {
        let url = "https://agent.example/client.json"
        func read(_ json: String) -> Result<(OAuthClient, name: String?), OAuthError> {
            ClientMetadataDocument.client(Array(json.utf8), url: url, allowedScopes: ["openid", "bank"])
        }
        let good = try read(#"{"client_id":"\#(url)","client_name":"Agent","redirect_uris":["https://agent.example/cb"],"scope":"bank"}"#).get()
        #expect(good.0.clientId == url && good.0.isPublic && good.0.redirectUris == ["https://agent.example/cb"] && good.0.scopes == ["bank"])
        #expect(good.name == "Agent")
        #expect(try read(#"{"client_id":"\#(url)","redirect_uris":["http://127.0.0.1:9/cb"]}"#).get().0.scopes == ["bank", "openid"])
        func refusal(_ json: String) -> String? {
            if case .failure(let e) = read(json) { return e.description }
            return nil
        }
        #expect(refusal(#"{"client_id":"https://other.example/c","redirect_uris":["https://a.example/cb"]}"#)
            == "the client metadata document at \(url): its client_id is not its own URL")
        #expect(refusal(#"{"client_id":"\#(url)","redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"private_key_jwt"}"#)
            == "the client metadata document at \(url): token_endpoint_auth_method 'private_key_jwt': only public clients (none) are accepted")
        #expect(refusal(#"{"client_id":"\#(url)","redirect_uris":["http://evil.example/cb"]}"#)
            == "the client metadata document at \(url): 'http://evil.example/cb' is not an https URI, or http on a loopback host")
        #expect(refusal(#"{"client_id":"\#(url)","redirect_uris":["https://a.example/cb"],"scope":"admin"}"#)
            == "the client metadata document at \(url): scope 'admin' is not offered here")
        #expect(refusal(#"{"client_id":"\#(url)","redirect_uris":["https://a.example/cb"],"client_name":"Bank\u202E"}"#)
            == "the client metadata document at \(url): client_name contains the invisible formatting character U+202E")
        #expect(refusal("[1]") == "the client metadata document at \(url): not one JSON object")
        #expect(ClientMetadataDocument.displayName("Agent", url: url) == "Agent (agent.example)")
        #expect(ClientMetadataDocument.displayName(nil, url: url) == "agent.example")
    }
}
