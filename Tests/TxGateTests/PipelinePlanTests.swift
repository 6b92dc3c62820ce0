import Foundation
import Testing
import TestSupport
@testable import TxGate
import TxGateCore

/// Which phases each kind of configuration gets (issue 25 item 2), decided from the
/// configuration alone.
@Suite struct PipelinePlanTests {
    static func config(_ json: String) throws -> GatewayConfig {
        let dir = try TemporaryDirectory(prefix: "txgate-plan")
        defer { dir.remove() }
        _ = try dir.write("agent.pw", "pw")
        let text = #"{"listen": "127.0.0.1:8080", "upstream": {"url": "http://127.0.0.1:9000"}"# + (json.isEmpty ? "" : ", " + json) + "}"
        return try ConfigLoader.decode(Data(text.utf8), folder: dir.url.path, files: DiskConfigFiles())
    }

    static let users = #""users": [{"username": "demo", "passwordHash": "$scrypt$ln=15,r=8,p=1$dQtS+YK5SMUpCON4+VX/yw$eAwSg4fwRdQ4nN79S5DGHF1rREMSt30hv9lFHj5PoWI"}], "loginJourney": "Login""#
    static let journeys = #""journeys": {"Login": [{"type": "UsernamePassword"}]}"#
    static let policies = #""policies": [{"name": "all", "resources": ["/*"], "actions": ["GET"], "subjects": "authenticated"}]"#
    static let embedded = [users, journeys, policies].joined(separator: ", ")
    static let remote = #""pdp": {"type": "am", "url": "http://127.0.0.1:1/am", "agent": {"username": "agent", "passwordFile": "agent.pw"}}"#

    static let head: [PhaseSlot] = [.canonicalRequest, .forwardAuth, .metricsEndpoint, .gatewayEndpoints]
    static let auth: [PhaseSlot] = [.readBodyForAuthEndpoints, .authEndpoints]
    static let tail: [PhaseSlot] = [.forwardAuthAnswer, .upstreamRequest, .readBodyForUpstream, .proxy]

    @Test func noPoliciesProxiesEverythingAsItIs() throws {
        let plan = PipelinePlan(try Self.config(""))
        #expect(plan.decisions == .none && !plan.oauth && !plan.externalIssuers)
        #expect(plan.slots == Self.head + Self.auth + Self.tail)
    }

    @Test func journeysWithoutPoliciesServeTheAuthenticationServiceAndDecideNothing() throws {
        let plan = PipelinePlan(try Self.config([Self.users, Self.journeys].joined(separator: ", ")))
        #expect(plan.decisions == .none)
        #expect(plan.slots == Self.head + Self.auth + Self.tail)
    }

    @Test func theEmbeddedPDPIdentifiesReplaysDecidesAndChallenges() throws {
        let plan = PipelinePlan(try Self.config(Self.embedded))
        #expect(plan.decisions == .embedded)
        #expect(plan.slots == Self.head + Self.auth
            + [.retryParameters, .identify, .replay, .readBodyForDecision, .decide, .challenge] + Self.tail)
        #expect(plan.description.hasPrefix("canonicalRequest → forwardAuth → metricsEndpoint"), "\(plan)")
    }

    @Test func aRemotePDPDecidesWithoutParkingBrowsersRequests() throws {
        let plan = PipelinePlan(try Self.config(Self.remote))
        #expect(plan.decisions == .remote)
        #expect(plan.slots == Self.head + Self.auth + [.retryParameters, .identify, .readBodyForDecision, .decide, .challenge] + Self.tail)
    }

    @Test func forwardAuthNeedsNoSlotOfItsOwnBeyondItsTwo() throws {
        let plan = PipelinePlan(try Self.config(Self.embedded + #", "forwardAuth": {"trustedProxies": ["127.0.0.1"]}"#))
        #expect(plan.slots.filter { $0 == .forwardAuth || $0 == .forwardAuthAnswer } == [.forwardAuth, .forwardAuthAnswer])
        #expect(plan.slots.firstIndex(of: .forwardAuth)! < plan.slots.firstIndex(of: .decide)!)
        #expect(plan.slots.firstIndex(of: .forwardAuthAnswer)! > plan.slots.firstIndex(of: .challenge)!)
    }

    @Test func metricsAreServedWhateverWhoMayReadThem() throws {
        // `/-/metrics` always has its phase: with no one allowed, it answers 403, never 404.
        for allow in [#""metrics": {"allowFrom": []}"#, #""metrics": {"allowFrom": ["10.0.0.0/8"]}"#, ""] {
            #expect(PipelinePlan(try Self.config(allow)).slots.contains(.metricsEndpoint), "\(allow)")
        }
    }

    @Test func corsHasAPhaseOnlyWithOriginsListed() throws {
        #expect(!PipelinePlan(try Self.config(Self.embedded)).slots.contains(.cors))
        let plan = PipelinePlan(try Self.config(Self.embedded + #", "cors": {"allowedOrigins": ["https://app.example"]}"#))
        #expect(plan.slots.firstIndex(of: .cors) == 4)
    }

    @Test func oauthAndTransactionTokensNeedTheAuthenticationService() throws {
        let oauth = #""oauth2": {"clients": [{"clientId": "app", "public": true, "redirectUris": ["https://app.example/cb"]}]}"#
        let txn = #""txnTokens": {"enabled": true, "audience": "bank"}"#
        let on = PipelinePlan(try Self.config([Self.embedded, oauth, txn].joined(separator: ", ")))
        #expect(on.oauth)
        #expect(on.slots.contains(.txnToken))
        #expect(on.slots.firstIndex(of: .txnToken)! == on.slots.firstIndex(of: .upstreamRequest)! + 1)
        let off = PipelinePlan(try Self.config(Self.embedded))
        #expect(!off.oauth && !off.slots.contains(.txnToken))
    }

    @Test func otherIssuersTokensAreReadOnlyWhereSomethingDecides() throws {
        let issuers = #""bearer": {"issuers": [{"issuer": "https://idp.example", "jwksUri": "http://127.0.0.1:1/jwks", "audience": "api"}]}"#
        #expect(PipelinePlan(try Self.config(Self.embedded + ", " + issuers)).externalIssuers)
        #expect(PipelinePlan(try Self.config(Self.remote + ", " + issuers)).externalIssuers)
        #expect(!PipelinePlan(try Self.config(issuers)).externalIssuers)
    }
}
