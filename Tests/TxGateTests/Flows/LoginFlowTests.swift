import Foundation
import Testing
import TestSupport
import TxGateCrypto

/// The embedded authentication service's login journey on the wire (WIRE.md §4): AM's exact
/// shapes, the authId's integrity and lifetime, and what the clock ends: journeys in progress,
/// sessions, lockouts. The flow runs in process and against the binary; what needs the clock
/// moved, in process only. The rest are IntegrationTests' AuthTests.
@Suite struct LoginFlowTests {
    typealias Kit = TransactionKit

    @Test(arguments: GatewayForm.allCases)
    func fullLoginWithAMsExactShapes(_ form: GatewayForm) throws {
        let g = try form.start(Kit.config())
        defer { g.stop() }

        let first = try Kit.post(g, Kit.authPath + "?authIndexType=service&authIndexValue=Login", nil)
        #expect(first.status == 200)
        #expect(first.header("Content-Type") == "application/json")
        let step = try first.json()
        let authId = try #require(step["authId"] as? String)
        #expect(authId.split(separator: ".").count == 3)
        #expect(first.bodyText == #"{"authId":"\#(authId)","callbacks":[{"type":"NameCallback","output":[{"name":"prompt","value":"User Name"}],"input":[{"name":"IDToken1","value":""}],"_id":0},{"type":"PasswordCallback","output":[{"name":"prompt","value":"Password"}],"input":[{"name":"IDToken2","value":""}],"_id":1}]}"#)

        let done = try Kit.post(g, Kit.authPath, Kit.answer(step, ["demo", Kit.password]))
        #expect(done.status == 200)
        let body = try done.json()
        let token = try #require(body["tokenId"] as? String)
        #expect(token.count >= 22)
        #expect(body["successUrl"] as? String == "/")
        #expect(body["realm"] as? String == "/")
        let cookie = try #require(done.header("Set-Cookie"))
        #expect(cookie.hasPrefix("iPlanetDirectoryPro=\(token);"))
        #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax") && !cookie.contains("Secure"))

        let valid = try Kit.post(g, "/am/json/realms/root/sessions?_action=validate", nil, headers: [("iPlanetDirectoryPro", token)])
        #expect(try valid.json()["valid"] as? Bool == true)
        #expect(try valid.json()["uid"] as? String == "demo")
        let viaCookie = try Kit.post(g, "/am/json/realms/root/sessions?_action=validate", nil, headers: [("Cookie", "a=b; iPlanetDirectoryPro=\(token)")])
        #expect(try viaCookie.json()["valid"] as? Bool == true)
    }


    /// An authId is signed (a changed claim is refused), bound to its step's callbacks, and
    /// lives `security.authIdTtlS`: answered a second before the end it signs in; another one,
    /// issued at the same instant, answered two seconds later has timed out.
    @Test(arguments: GatewayForm.withClock)
    func tamperedExpiredAndMismatchedAuthIds(_ form: GatewayForm) throws {
        let g = try form.start(Kit.config(["security": ["authIdTtlS": 60]]))
        defer { g.stop() }
        let step = try Kit.post(g, Kit.authPath, nil).json()
        let kept = try Kit.post(g, Kit.authPath, nil).json()
        let authId = step["authId"] as! String

        var parts = authId.split(separator: ".").map(String.init)
        var claims = try JSONSerialization.jsonObject(with: Data(Base64URL.decode(parts[1])!)) as! [String: Any]
        claims["exp"] = 9_999_999_999
        parts[1] = Base64URL.encode([UInt8](try JSONSerialization.data(withJSONObject: claims)))
        var tampered = step
        tampered["authId"] = parts.joined(separator: ".")
        let t = try Kit.post(g, Kit.authPath, Kit.answer(tampered, ["demo", Kit.password]))
        #expect(t.status == 401)
        #expect(try t.json()["tokenId"] == nil)

        var wrongShape = step
        wrongShape["callbacks"] = [["type": "PasswordCallback", "input": [["name": "IDToken1", "value": "x"]]]]
        #expect(try Kit.post(g, Kit.authPath, wrongShape).status == 401)

        #expect(try g.fetch("POST", Kit.authPath, headers: Kit.jsonHeaders, body: Array("{not json".utf8)).status == 400)

        g.advance(seconds: 59)
        let inTime = try Kit.post(g, Kit.authPath, Kit.answer(kept, ["demo", Kit.password]))
        #expect(try inTime.status == 200 && inTime.json()["tokenId"] is String, "answered 59 s after it was issued with authIdTtlS 60:\n\(inTime)")

        g.advance(seconds: 2)
        let late = try Kit.post(g, Kit.authPath, Kit.answer(step, ["demo", Kit.password]))
        #expect(late.status == 401)
        #expect(late.bodyText == #"{"code":401,"reason":"Unauthorized","message":"Session has timed out","detail":{"errorCode":"110"}}"#)
    }


    /// Security review item 13: authIds in base64url without padding only.
    @Test("an authId rewritten in the standard base64 alphabet, or padded, is refused", arguments: GatewayForm.withClock)
    func onlyBase64URL(_ form: GatewayForm) throws {
        let g = try form.start(Kit.config())
        defer { g.stop() }
        var rewritten = 0
        // An authId changes each second (its iat); most contain '-' or '_'.
        var tries = 0
        while rewritten < 2 && tries < 20 {
            tries += 1
            let start = try Kit.post(g, Kit.authPath, nil)
            var step = try start.json()
            let authId = try #require(step["authId"] as? String)
            guard authId.contains("-") || authId.contains("_") else { g.advance(seconds: 1); continue }
            step["authId"] = String(authId.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
            let r = try Kit.post(g, Kit.authPath, Kit.answer(step, ["demo", Kit.password]))
            #expect(r.status == 401, "standard alphabet accepted:\n\(r)")
            step["authId"] = authId + "="
            let padded = try Kit.post(g, Kit.authPath, Kit.answer(step, ["demo", Kit.password]))
            #expect(padded.status == 401, "padding accepted:\n\(padded)")
            rewritten += 1
            g.advance(seconds: 1)
        }
        #expect(rewritten == 2)
    }


    /// A session slides while it is used (its idle expiry moves on at most once a minute), ends
    /// `session.idleTimeoutS` after its last use, and at `maxLifetimeS` however it is used; the
    /// session cache (a second) never outlives the clock.
    @Test(arguments: GatewayForm.withClock)
    func aSessionSlidesWhileUsedAndEndsIdleOrAtItsMaximumLifetime(_ form: GatewayForm) throws {
        let g = try form.start(Kit.config(["session": ["idleTimeoutS": 120, "maxLifetimeS": 350]]))
        defer { g.stop() }
        let busy = try Kit.login(g)
        let idle = try Kit.login(g)
        func valid(_ token: String) throws -> Bool {
            let r = try Kit.post(g, "/am/json/realms/root/sessions?_action=validate", nil, headers: [("iPlanetDirectoryPro", token)])
            return try r.json()["valid"] as? Bool == true
        }
        func accounts(_ token: String) throws -> Int {
            try g.fetch("GET", "/accounts", headers: [("iPlanetDirectoryPro", token)]).status
        }
        #expect(try accounts(busy) == 200)
        for elapsed in [100, 200, 300] {
            g.advance(seconds: 100)
            #expect(try valid(busy), "used every 100 s with idleTimeoutS 120: ended at \(elapsed) s")
            #expect(try accounts(busy) == 200, "at \(elapsed) s")
        }
        #expect(try !valid(idle), "unused for 300 s with idleTimeoutS 120")
        #expect(try accounts(idle) != 200)
        g.advance(seconds: 51)
        #expect(try !valid(busy), "used every 100 s, 351 s after it began with maxLifetimeS 350")
        #expect(try accounts(busy) != 200)
    }

    /// Repeated failures lock the source out for `security.lockoutDurationS`, with the right
    /// password too; then it signs in again.
    @Test(arguments: GatewayForm.withClock)
    func aLockoutEndsAfterItsDuration(_ form: GatewayForm) throws {
        let g = try form.start(Kit.config(["security": ["maxFailedAttempts": 2, "lockoutWindowS": 60, "lockoutDurationS": 120]]))
        defer { g.stop() }
        func signIn(_ password: String) throws -> HTTPResponse {
            let step = try Kit.post(g, Kit.authPath, nil).json()
            return try Kit.post(g, Kit.authPath, Kit.answer(step, ["demo", password]))
        }
        for _ in 0..<2 { #expect(try signIn("wrong").status == 401) }
        #expect(try signIn(Kit.password).status == 401, "locked out")
        g.advance(seconds: 119)
        #expect(try signIn(Kit.password).status == 401, "locked out 119 s after, with lockoutDurationS 120")
        g.advance(seconds: 2)
        let again = try signIn(Kit.password)
        #expect(try again.status == 200 && again.json()["tokenId"] is String, "121 s after:\n\(again)")
    }
}
