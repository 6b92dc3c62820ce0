import Foundation
import Testing
import TxGateCore
import TestSupport

/// A browser's POST that needs approval (WIRE-EXTENSIONS.md §3b): parked under its TxId with a
/// 303 to the login page, replayed once when the approved browser comes back with
/// `GET <url>?_txid=X`. Judged on the wire, with demo-bank's transfer sequence as the count of
/// executions. The flow itself (park, approve, replay once) and the expiry are TxGateTests'
/// ParkedRequestFlowTests.
@Suite(.testbed) struct ParkedRequestTests {
    typealias Kit = TransactionKit
    typealias Parked = ParkedRequestKit

    // MARK: 1. What is replayed

    /// What the backend gets on the replay: the parked method, content type, accept and body,
    /// without `_txid`, and without the GET's own representation headers.
    @Test func theReplayIsTheParkedRequestExactly() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config())
        let token = try Kit.login(g)
        var codes = Kit.Codes()
        let body = Array("note=caf%C3%A9+au+lait&amount=12.50".utf8)
        let form = [("Content-Type", "application/x-www-form-urlencoded")]

        let (txid, goto) = try Parked.parked(try g.fetch("POST", "/echo", headers: Parked.browserHeaders(token, form), body: body))
        try Kit.approve(g, txid: txid, token: token, code: codes.next(Kit.demoSecret))
        let replay = try g.fetch("GET", Parked.target(goto), headers: [("Cookie", "iPlanetDirectoryPro=\(token)"),
                                                                      ("Accept", "application/json"), ("Content-Type", "text/plain")])
        #expect(replay.status == 200, "\(replay)")
        let echoed = try EchoedRequest(replay)
        #expect(echoed.method == "POST")
        #expect(echoed.uri == "/echo")
        #expect(echoed.header("Content-Type") == "application/x-www-form-urlencoded", "\(echoed.headers)")
        #expect(echoed.headers.filter { $0.name.lowercased() == "content-type" }.count == 1, "\(echoed.headers)")
        #expect(echoed.header("Accept") == "text/html", "the parked request's Accept: \(echoed.headers)")
        #expect(echoed.body == body)
        #expect(echoed.header("Cookie") == nil, "the session cookie reached the backend")
    }

    // MARK: 2. Bounds

    @Test func aBodyOverMaxParkedBodyBytesIs413AndNeverParked() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config(["limits": ["maxParkedBodyBytes": 100]]))
        let token = try Kit.login(g)
        let big = Array(#"{"amount":100,"currency":"EUR","payee":"Bob","memo":"\#(String(repeating: "x", count: 120))"}"#.utf8)

        let r = try g.fetch("POST", "/transfer", headers: Parked.browserHeaders(token, Parked.jsonType), body: big)
        #expect(r.status == 413, "\(r)")
        let message = try r.json()["message"] as? String ?? ""
        #expect(message.contains("\(big.count) bytes") && message.contains("limits.maxParkedBodyBytes"), "\(message)")
        #expect(r.header("Location") == nil)

        // At the bound it is parked; an SDK (which keeps its own body) is not bounded by it.
        let fits = Array(#"{"amount":100,"currency":"EUR","payee":"Bob"}"#.utf8)
        #expect(try g.fetch("POST", "/transfer", headers: Parked.browserHeaders(token, Parked.jsonType), body: fits).status == 303)
        #expect(try Kit.transfer(g, token: token, body: big).status == 401)
        #expect(g.process.stderr.components(separatedBy: "request parked").count == 2, "one request parked")
    }

    // MARK: 3. Another user, concurrency

    @Test func anotherUsersSessionCannotReplayAndIsSentToSignIn() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config())
        let demo = try Kit.login(g)
        let other = try Kit.login(g, user: "other")
        var codes = Kit.Codes()
        let (txid, goto) = try Parked.parked(try g.fetch("POST", "/transfer", headers: Parked.browserHeaders(demo, Parked.jsonType),
                                                       body: Kit.transferBody))
        try Kit.approve(g, txid: txid, token: demo, code: codes.next(Kit.demoSecret))

        // Refused: a new challenge, to sign in as the user whose request it is; not executed.
        let stolen = try g.fetch("GET", Parked.target(goto), headers: Parked.browserHeaders(other))
        #expect(stolen.status == 307, "\(stolen)")
        #expect(stolen.header("Location") == "\(Kit.publicURL(g))/am/XUI/?goto=\(Query.encode(goto))", "\(stolen)")
        #expect(!stolen.bodyText.contains("executed") && !stolen.bodyText.contains("Bob"), "\(stolen)")

        // The request is still parked for its own user, whose replay executes it, once.
        let replay = try g.fetch("GET", Parked.target(goto), headers: Parked.browserHeaders(demo))
        #expect(replay.status == 201, "\(replay)")
        #expect((try replay.json()["sequence"] as? NSNumber)?.intValue == 1)
        #expect(g.process.stderr.contains("parked request refused"))
    }

    /// The approval done elsewhere (a link opened in another browser): this browser comes back
    /// with no session, signs in, and keeps `_txid` all the way, so the request is replayed then.
    @Test func aBrowserWithNoSessionSignsInFirstAndKeepsTheTxId() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config(["policies": Kit.config()["policies"] as! [[String: Any]] + [
            ["name": "transfer-page", "resources": ["/transfer"], "actions": ["GET"], "subjects": "authenticated"],
        ]]))
        let token = try Kit.login(g)
        var codes = Kit.Codes()
        let (txid, goto) = try Parked.parked(try g.fetch("POST", "/transfer", headers: Parked.browserHeaders(token, Parked.jsonType),
                                                       body: Kit.transferBody))
        try Kit.approve(g, txid: txid, token: token, code: codes.next(Kit.demoSecret))

        let signIn = try g.fetch("GET", Parked.target(goto), headers: [("Accept", "text/html")])
        #expect(signIn.status == 307, "\(signIn)")
        #expect(signIn.header("Location") == "\(Kit.publicURL(g))/am/XUI/?goto=\(Query.encode(goto))", "\(signIn)")
        let later = try Kit.login(g)
        let replay = try g.fetch("GET", Parked.target(goto), headers: Parked.browserHeaders(later))
        #expect(replay.status == 201, "another session of the same user replays it:\n\(replay)")
        #expect((try replay.json()["sequence"] as? NSNumber)?.intValue == 1)
    }

    @Test func concurrentReplaysExecuteExactlyOnce() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config())
        let token = try Kit.login(g)
        var codes = Kit.Codes()
        let (txid, goto) = try Parked.parked(try g.fetch("POST", "/transfer", headers: Parked.browserHeaders(token, Parked.jsonType),
                                                       body: Kit.transferBody))
        try Kit.approve(g, txid: txid, token: token, code: codes.next(Kit.demoSecret))

        let target = Parked.target(goto), headers = Parked.browserHeaders(token), port = g.port
        let results = try Cluster.race(20, timeout: 10) { _ in (port, "GET", target, headers, []) }
        let statuses = results.map { (try? $0.get())?.status ?? 0 }
        #expect(statuses.filter { $0 == 201 }.count == 1, "\(statuses)")
        #expect(statuses.filter { $0 != 201 }.allSatisfy { $0 == 303 }, "the others are challenged anew: \(statuses)")
        #expect(try Parked.transfersSoFar(g, token: token, codes: &codes) == 1)
    }

    // MARK: 4. Redis: parked on one instance, replayed on another

    @Test(.timeLimit(.minutes(1)))
    func aRequestParkedOnOneInstanceIsReplayedOnceOnAnother() throws {
        let bed = try Testbed.current
        let cluster = try Cluster(bed: bed, instances: 2) { _ in Kit.config() }
        let (a, b) = (cluster[0], cluster[1])
        var codes = Kit.Codes()
        let token = try Cluster.login(start: a, finish: b)

        let (txid, goto) = try Parked.parked(try a.fetch("POST", "/transfer", headers: Parked.browserHeaders(token, Parked.jsonType),
                                                       body: Kit.transferBody))
        #expect(goto.hasPrefix(cluster.publicUrl + "/transfer?_txid="), "\(goto)")
        try Kit.approve(b, txid: txid, token: token, code: codes.next(Kit.demoSecret))

        let replay = try b.fetch("GET", Parked.target(goto), headers: Parked.browserHeaders(token))
        #expect(replay.status == 201, "the replay on B:\n\(replay)")
        #expect((try replay.json()["sequence"] as? NSNumber)?.intValue == 1, "\(replay)")
        for g in [a, b] {
            let again = try g.fetch("GET", Parked.target(goto), headers: Parked.browserHeaders(token))
            #expect(try Parked.parked(again).txid != txid, "\(again)")
        }
        #expect(try Parked.transfersSoFar(a, token: token, codes: &codes) == 1)
    }
}

// MARK: 5. Who gets the 303 (issue 23, the Android SDK without the header)

extension ParkedRequestTests {
    /// Only a browser's form navigation gets the 303 and is parked; every other request without
    /// `x-authenticate-response: header` gets IG's 307 (WIRE-EXTENSIONS §3b), which the Android
    /// SDK's `IdentityGatewayAdviceInterceptor` reads, runs the journey for and retries.
    @Test func onlyABrowsersFormNavigationIsParkedEveryOtherRequestGetsIGs307() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config())
        let token = try Kit.login(g)
        let cookie = ("Cookie", "iPlanetDirectoryPro=\(token)")
        let form = [("Content-Type", "application/x-www-form-urlencoded")]
        let formBody = Array("amount=100&currency=EUR&payee=Bob".utf8)
        func status(_ headers: [(String, String)], _ body: [UInt8]) throws -> HTTPResponse {
            try g.fetch("POST", "/transfer", headers: [cookie] + headers, body: body)
        }
        // The Android SDK's OkHttp: a JSON body, Accept application/json, no Sec-Fetch-*.
        let android = try status(Parked.jsonType + [("Accept", "application/json")], Kit.transferBody)
        #expect(android.status == 307, "\(android)")
        #expect(android.header("Location")?.contains("authIndexType=composite_advice") == true, "\(android.headerSummary)")
        // A page's fetch() (Sec-Fetch-Mode: cors), even with a form body, and curl (*/*).
        #expect(try status(form + [("Sec-Fetch-Mode", "cors"), ("Accept", "text/html")], formBody).status == 307)
        #expect(try status(form + [("Accept", "*/*")], formBody).status == 307)
        // A browser's form post: Sec-Fetch-Mode navigate, or (an older browser) text/html preferred and a form body.
        #expect(try status(form + [("Sec-Fetch-Mode", "navigate"), ("Accept", "text/html,*/*;q=0.8")], formBody).status == 303)
        #expect(try status(form + [("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")], formBody).status == 303)
        #expect(try status(Parked.jsonType + [("Accept", "text/html")], Kit.transferBody).status == 307, "no form body: no browser form")
        // Only the two 303s parked anything.
        #expect(g.process.stderr.components(separatedBy: "request parked").count - 1 == 2, "\(g.process.stderr)")
    }
}
