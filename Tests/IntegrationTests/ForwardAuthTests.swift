import Foundation
import Testing
import TestSupport

/// `GET /-/authz` (WIRE.md §10) behind a real nginx `auth_request`, in front of demo-bank:
/// what a client of nginx sees, and what nginx may ask.
@Suite(.testbed) struct ForwardAuthTests {
    typealias Kit = TransactionKit

    /// TxGate (embedded policies, `publicUrl` = nginx's address) and nginx in front of demo-bank.
    struct Setup {
        let nginxPort: Int
        let gateway: GatewayInstance
        func fetch(_ method: String = "GET", _ target: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
                   source: String? = nil) throws -> HTTPResponse {
            try RawHTTPClient.fetch(port: nginxPort, method, target, headers: headers, body: body, source: source, timeout: 10)
        }
    }

    static func start(_ bed: Testbed) throws -> Setup {
        let bank = try bed.startDemoBank()
        let nginxPort = try Ports.free()
        let gateway = try bed.startGateway(upstream: bank.url, config: Kit.config([
            "publicUrl": "http://127.0.0.1:\(nginxPort)",
            "forwardAuth": ["trustedProxies": ["127.0.0.1/32"]],
            "policies": [
                ["name": "accounts", "resources": ["/accounts", "/accounts/*"], "actions": ["GET"], "subjects": "authenticated"],
                ["name": "transfer", "resources": ["/transfer"], "actions": ["POST"], "subjects": "authenticated",
                 "transaction": ["journey": "ConfirmTransaction"]],
            ],
        ]))
        _ = try Nginx.start(bed, port: nginxPort, config: Nginx.authRequestConfig(dir: bed.dir.url, port: nginxPort,
                                                                                   gateway: gateway.port, backend: bank.port))
        return Setup(nginxPort: nginxPort, gateway: gateway)
    }

    /// The test nginx is a master and a worker; a testbed's cleanup stops both (a SIGKILL of
    /// the master alone left a worker running after every run of this suite).
    @Test func cleanupStopsNginxAndItsWorkers() throws {
        let bed = try Testbed()
        let port = try Ports.free()
        let nginx = try Nginx.start(bed, port: port, config: Nginx.authRequestConfig(dir: bed.dir.url, port: port,
                                                                                  gateway: try Ports.free(), backend: try Ports.free()))
        func children(of parent: Int32) -> [Int32] {
            let all = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
            return all.compactMap(Int32.init).filter { pid in
                // /proc/PID/stat: "pid (comm) state ppid ..."; comm may hold spaces, so split after ')'.
                guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                      let close = stat.lastIndex(of: ")") else { return false }
                let fields = stat[stat.index(after: close)...].split(separator: " ")
                return fields.count > 1 && Int32(fields[1]) == parent
            }
        }
        var workers: [Int32] = []
        #expect(Timing.poll(timeout: 10) { workers = children(of: nginx.pid); return !workers.isEmpty }, "nginx started no worker")
        bed.cleanup()
        for w in workers {
            #expect(Timing.poll(timeout: 10) { kill(w, 0) != 0 }, "nginx worker \(w) still runs after cleanup")
        }
    }

    @Test func nginxAuthRequestAllowsRedirectsDeniesAndChallenges() throws {
        let bed = try Testbed.current
        let s = try Self.start(bed)
        // Log in through nginx (/am/ goes straight to TxGate).
        let start = try s.fetch("POST", Kit.authPath, headers: Kit.jsonHeaders, body: [])
        #expect(start.status == 200, "\(start)")
        let done = try s.fetch("POST", Kit.authPath, headers: Kit.jsonHeaders,
                               body: Array(try JSONSerialization.data(withJSONObject: Kit.answer(try start.json(), ["demo", Kit.password]))))
        let token = try #require(try done.json()["tokenId"] as? String, "\(done)")

        // Allowed: demo-bank answers, TxGate named the user to nginx.
        let allowed = try s.fetch("GET", "/accounts", headers: [("Cookie", "iPlanetDirectoryPro=\(token)")])
        #expect(allowed.status == 200, "\(allowed)")
        // The access line of nginx's subrequest names the original request and its decision.
        var authz: [String: Any]?
        Timing.poll(timeout: 3) {
            authz = s.gateway.logLines().first { $0["log"] as? String == "access" && $0["original"] as? String == "GET /accounts" }
            return authz != nil
        }
        #expect(authz?["path"] as? String == "/-/authz" && authz?["decision"] as? String == "allow" && authz?["user"] as? String == "demo",
                "\(String(describing: authz))")

        // A browser without a session: nginx's error_page turns TxGate's 401 + Location into a 302.
        let browser = try s.fetch("GET", "/accounts?tab=1")
        #expect(browser.status == 302, "\(browser)")
        let location = try #require(browser.header("Location"))
        #expect(location.hasPrefix("http://127.0.0.1:\(s.nginxPort)/am/XUI/?goto="), "\(location)")
        #expect(location.contains(Kit.percentEncode("http://127.0.0.1:\(s.nginxPort)/accounts?tab=1")), "\(location)")

        // Denied: no policy for the path.
        let denied = try s.fetch("GET", "/admin", headers: [("iPlanetDirectoryPro", token)])
        #expect(denied.status == 403, "\(denied)")
        #expect(!denied.bodyText.contains("admin panel"))

        // A header-mode client without a session: nginx passes TxGate's SSOADVICE challenge on.
        let sdk = try s.fetch("GET", "/accounts", headers: [("x-authenticate-response", "header")])
        #expect(sdk.status == 401, "\(sdk)")
        let challenge = try #require(sdk.header("WWW-Authenticate"), "\(sdk.headerSummary)")
        #expect(challenge.hasPrefix("SSOADVICE realm=\"/\",advices=\""), "\(challenge)")
        #expect(challenge.hasSuffix("am_uri=\"http://127.0.0.1:\(s.nginxPort)/am/\""), "\(challenge)")
    }

    @Test func transactionThroughNginxIsConsumedOnce() throws {
        let bed = try Testbed.current
        let s = try Self.start(bed)
        let token = try Kit.login(s.gateway)
        var codes = Kit.Codes()
        let headers = Kit.apiHeaders(token)
        let first = try s.fetch("POST", "/transfer", headers: headers, body: Kit.transferBody)
        let txid = try Self.challengeTxid(first)
        try Kit.approve(s.gateway, txid: txid, token: token, code: codes.next(Kit.demoSecret))

        let retry = try s.fetch("POST", "/transfer?_txid=\(txid)", headers: headers, body: Kit.transferBody)
        #expect(retry.status == 201, "the approved retry:\n\(retry)")
        #expect(retry.bodyText.contains("executed"))
        let again = try s.fetch("POST", "/transfer?_txid=\(txid)", headers: headers, body: Kit.transferBody)
        #expect(again.status == 401, "the consumed TxId again:\n\(again)")
        #expect(try Self.challengeTxid(again) != txid)
    }

    @Test func onlyTrustedProxiesMayAsk() throws {
        let bed = try Testbed.current
        let s = try Self.start(bed)
        let token = try Kit.login(s.gateway)
        let ask = [("X-Original-URI", "/accounts"), ("X-Original-Method", "GET"), ("iPlanetDirectoryPro", token)]
        let trusted = try s.gateway.fetch("GET", "/-/authz", headers: ask)
        #expect(trusted.status == 200, "\(trusted)")
        #expect(trusted.header("X-TxGate-User") == "demo")
        let other = try s.gateway.fetch("GET", "/-/authz", headers: ask, source: "127.0.0.2")
        #expect(other.status == 403, "\(other)")
        #expect(other.header("X-TxGate-User") == nil)
        let traefik = try s.gateway.fetch("GET", "/-/authz", headers: [("X-Forwarded-Uri", "/accounts"), ("X-Forwarded-Method", "GET")])
        #expect(traefik.status == 302, "a browser behind Traefik:\n\(traefik)")
        let missing = try s.gateway.fetch("GET", "/-/authz", headers: [("iPlanetDirectoryPro", token)])
        #expect(missing.status == 400, "\(missing)")
    }

    @Test func checkRefusesForwardAuthWithBodyBoundPolicies() throws {
        let bed = try Testbed.current
        var config = Testbed.gatewayConfig(port: 8080, upstream: "http://127.0.0.1:9", overrides: Kit.config())
        config["forwardAuth"] = ["trustedProxies": ["127.0.0.1/32"]]
        let data = try JSONSerialization.data(withJSONObject: config)
        let refused = try bed.check(configText: String(decoding: data, as: UTF8.self))
        #expect(refused.status != 0)
        #expect(refused.description.contains("forwardAuth.bodiesForwarded"), "\(refused)")
        config["forwardAuth"] = ["trustedProxies": ["127.0.0.1/32"], "bodiesForwarded": true]
        let ok = try bed.check(configText: String(decoding: try JSONSerialization.data(withJSONObject: config), as: UTF8.self))
        #expect(ok.status == 0, "\(ok)")
    }

    /// The TxId of a challenge as nginx passes it on (the header only: nginx writes its own body).
    static func challengeTxid(_ r: HTTPResponse) throws -> String {
        guard r.status == 401, let header = r.header("WWW-Authenticate") else { throw HarnessError("not a challenge:\n\(r)") }
        guard let b64 = try Kit.ssoAdviceParams(header)["advices"],
              let txid = try Kit.decodeAdviceJSON(b64)["TransactionConditionAdvice"]?.first else {
            throw HarnessError("no transaction advice in \(header)")
        }
        return txid
    }
}
