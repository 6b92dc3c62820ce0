import Foundation
import Testing
import TxGateCore
import TxGateCrypto
#if canImport(Glibc)
import Glibc
#endif
import TestSupport

/// Magic links and email codes end to end (WIRE.md §4–§5, docs/AUTHENTICATION.md, "Magic links"): a journey
/// that suspends with an emailed link (delivered by a real SMTP server or the outbox folder),
/// resumed once — from any client, after a restart, in a real browser — and an email code
/// that approves a transaction.
@Suite(.testbed) struct MagicLinkTests: MagicLinkClient {
    // MARK: 1. Through a real SMTP server

    @Test(.timeLimit(.minutes(1)))
    func magicLinkDeliveredByARealSMTPServerSignsIn() throws {
        let bed = try Testbed.current
        let smtp = try bed.startSMTPServer()
        let (g, _) = try bed.startGatewayWithBank(configForURL: {
            Self.config($0, email: ["smtp": ["url": smtp.url, "from": "txgate@example.com", "startTls": false]])
        })

        let start = try Self.post(g, Self.magicStart, nil)
        #expect(start.status == 200, "\(start)")
        let first = Self.callbacks(start)
        #expect(first.map { $0["type"] as? String } == ["NameCallback"], "\(start.bodyText)")
        #expect(Self.output(first.first, "prompt") as? String == "User Name", "\(start.bodyText)")

        let suspended = try Self.post(g, Self.authPath, TransactionKit.answer(try start.json(), ["demo"]))
        let authId = Self.expectSuspended(suspended)

        let messages = try smtp.waitForEmails(1)
        #expect(messages.count == 1, "\(messages)")
        let mail = try #require(messages.first)
        #expect(mail.header("X-MailFrom") == "txgate@example.com", "envelope sender: \(mail)")
        #expect(mail.header("X-RcptTo") == "demo@example.com", "envelope recipient: \(mail)")
        #expect(mail.header("From") == "txgate@example.com", "\(mail)")
        #expect(mail.header("To") == "demo@example.com", "\(mail)")
        #expect(mail.header("Subject") == "Your sign-in link", "\(mail)")
        #expect(mail.header("Content-Transfer-Encoding") == "7bit", "\(mail)")
        #expect(mail.header("Content-Type")?.hasPrefix("text/plain") == true, "\(mail)")
        let (link, id) = try #require(mail.magicLink(), "no suspendedId link in the message:\n\(mail)")
        #expect(link == "\(g.baseURL)/am/XUI/?realm=/&suspendedId=\(id)", "link: \(link)")
        #expect(id.count == 43, "a suspendedId of 256 bits is 43 base64url characters: \(id)")
        #expect(mail.body.contains("Hello demo,"), "\(mail)")
        // The id is a credential: it is emailed, never logged.
        #expect(!g.process.stderr.contains(id), "the suspendedId appears in the gateway log")

        // The suspended step cannot be continued with its authId alone: the link is needed.
        if let authId {
            let bypass = try Self.post(g, Self.authPath, try suspended.json())
            #expect(bypass.status == 401, "answering the suspended step with authId \(authId.prefix(12))…:\n\(bypass)")
            #expect((try? bypass.json())?["tokenId"] == nil, "\(bypass)")
        }

        let resumed = try Self.resume(g, id)
        let token = try Self.expectSignedIn(resumed)
        try Self.expectSession(g, token, uid: "demo")
        #expect(try smtp.receivedEmails().count == 1, "more than one message was sent")
    }

    // MARK: 2. SMTP down

    @Test(.timeLimit(.minutes(1)))
    func smtpDownAnswersAnErrorStepPromptlyAndLogsIt() throws {
        let bed = try Testbed.current
        let deadPort = try Ports.free()
        #expect(Ports.probe(deadPort) == .refused, "something listens on the 'dead' port \(deadPort)")
        let (g, _) = try bed.startGatewayWithBank(configForURL: {
            Self.config($0, email: ["smtp": ["url": "smtp://127.0.0.1:\(deadPort)", "from": "txgate@example.com", "startTls": false]])
        })

        let (answer, seconds) = try Timing.measure { try Self.requestLink(g, user: "demo", timeout: 20) }
        #expect(seconds < 10, "the failed delivery took \(seconds) s to answer")
        #expect(answer.status == 200, "\(answer)")
        let body = try answer.json()
        #expect(body["tokenId"] == nil, "a session without the email: \(answer)")
        #expect(body["authId"] is String, "\(answer)")
        let cbs = Self.callbacks(answer)
        #expect(cbs.count == 1, "\(answer.bodyText)")
        #expect(cbs.first?["type"] as? String == "TextOutputCallback", "\(answer.bodyText)")
        #expect(Self.output(cbs.first, "messageType") as? String == "2", "\(answer.bodyText)")
        #expect(!((Self.output(cbs.first, "message") as? String) ?? "").isEmpty, "\(answer.bodyText)")
        #expect(!answer.bodyText.contains("SuspendedTextOutputCallback"), "\(answer.bodyText)")
        #expect(!answer.hasHeader("Set-Cookie"), "\(answer.headerSummary)")

        // The log says why, as an error.
        let logged = Timing.poll(timeout: 3) {
            g.logLines().contains { $0["level"] as? String == "error" && $0["msg"] as? String == "email delivery failed" }
        }
        #expect(logged, "no error line 'email delivery failed'; stderr:\n\(g.process.stderrTail(30))")
        let line = g.logLines().first { $0["msg"] as? String == "email delivery failed" }
        #expect((line?["error"] as? String)?.contains("127.0.0.1:\(deadPort)") == true, "\(line ?? [:])")
    }

    // MARK: 3. Once, and not after it expired, and never an unknown id: TxGateTests' MagicLinkFlowTests

    // MARK: 4. Twenty clients race for one link

    @Test(.timeLimit(.minutes(1)))
    func twentyConcurrentResumesOfOneLinkAllowExactlyOne() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(configForURL: { Self.config($0, ["workers": 4]) })
        Self.expectSuspended(try Self.requestLink(g, user: "demo"))
        let (_, id) = try #require(try MailTools.waitForOutbox(Self.outbox(bed)).last?.magicLink())

        let n = 20
        let port = g.port
        let burst = Burst.simultaneous(n, within: 40, connect: { _ in try RawHTTPClient(port: port, timeout: 20) }) { _, client in
            try client.request("POST", Self.authPath + "?suspendedId=\(id)", headers: Self.jsonHeaders, body: [])
        }
        #expect(burst.finished, "the resumes did not finish within 40 s")

        let all = burst.results
        #expect(all.count == n)
        var tokens: [String] = []
        var refused = 0
        var other: [String] = []
        for r in all {
            switch r {
            case .failure(let e): other.append("error: \(e)")
            case .success(let resp) where resp.status == 200:
                if let t = (try? resp.json())?["tokenId"] as? String { tokens.append(t) } else { other.append("\(resp)") }
            case .success(let resp) where resp.status == 401 && resp.bodyText == Self.notFound: refused += 1
            case .success(let resp): other.append("\(resp)")
            }
        }
        #expect(tokens.count == 1, "\(tokens.count) resumes got a session")
        #expect(refused == n - 1, "\(refused) exact SuspendedAuthSessionException answers; others:\n\(other.prefix(5).joined(separator: "\n---\n"))")
        #expect(other.isEmpty, "unexpected answers (\(other.count)):\n\(other.prefix(5).joined(separator: "\n---\n"))")
        if let token = tokens.first { try Self.expectSession(g, token, uid: "demo") }
        Self.expectNotFound(try Self.resume(g, id), "the link after the race")
    }

    // MARK: 5. What was collected before the suspend comes back; unknown users get no email

    @Test(.timeLimit(.minutes(1)))
    func theResumedJourneyIsTheUsersAndUnknownUsersGetTheSameAnswerButNoEmail() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(configForURL: { Self.config($0) })
        let outbox = Self.outbox(bed)

        // Unknown user, and a user without an address: the same answer, nothing sent.
        let unknown = try Self.requestLink(g, user: "nobody")
        Self.expectSuspended(unknown)
        let noAddress = try Self.requestLink(g, user: "noemail")
        Self.expectSuspended(noAddress)
        Thread.sleep(forTimeInterval: 1.0)
        #expect(MailTools.outboxEntries(outbox).isEmpty, "the outbox is not empty: \(MailTools.outboxEntries(outbox))")

        // A known user (not demo), with goto: the link signs in as that user and goes to goto.
        Self.expectSuspended(try Self.requestLink(g, user: "other", query: "&goto=%2Faccounts"))
        let mails = try MailTools.waitForOutbox(outbox, count: 1)
        #expect(mails.count == 1, "\(mails)")
        let mail = try #require(mails.last)
        #expect(mail.header("To") == "other@example.com", "\(mail)")
        #expect(mail.body.contains("Hello other,"), "\(mail)")
        let (link, id) = try #require(mail.magicLink(), "\(mail)")
        #expect(link == "\(g.baseURL)/am/XUI/?realm=/&suspendedId=\(id)", "link: \(link)")

        let resumed = try Self.resume(g, id)
        let token = try Self.expectSignedIn(resumed, successUrl: "/accounts")
        try Self.expectSession(g, token, uid: "other")
        let accounts = try g.fetch("GET", "/accounts", headers: [("iPlanetDirectoryPro", token)])
        #expect(accounts.status == 200, "\(accounts)")
        #expect(MailTools.outboxFiles(outbox).count == 1, "\(MailTools.outboxEntries(outbox))")
    }

    // MARK: 6. A suspended journey survives a restart

    @Test(.timeLimit(.minutes(1)))
    func aSuspendedJourneySurvivesARestart() throws {
        let bed = try Testbed.current
        let (g1, _) = try bed.startGatewayWithBank(configForURL: { Self.config($0) })
        Self.expectSuspended(try Self.requestLink(g1, user: "demo"))
        let (_, id) = try #require(try MailTools.waitForOutbox(Self.outbox(bed)).last?.magicLink())

        g1.process.terminate()
        #expect(g1.process.waitForExit(timeout: 15) == 0, "exit after SIGTERM; stderr:\n\(g1.process.stderrTail())")

        // Same config file, same port (so the same publicUrl), same temp dir and store.
        let p = try bed.spawn(try BinaryLocator.txgate, ["serve", "--config", g1.configURL.path], name: "txgate")
        try p.waitForPort(g1.port)
        let g2 = GatewayInstance(process: p, port: g1.port, configURL: g1.configURL, config: g1.config)

        let token = try Self.expectSignedIn(try Self.resume(g2, id))
        try Self.expectSession(g2, token, uid: "demo")
        Self.expectNotFound(try Self.resume(g2, id), "the link a second time after the restart")
    }

    // MARK: 7. An emailed code approves a transaction

    @Test(.timeLimit(.minutes(1)))
    func anEmailedCodeApprovesATransactionAndAWrongCodeDoesNot() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(configForURL: { Self.config($0) })
        let outbox = Self.outbox(bed)
        let token = try Self.passwordLogin(g)
        let body = TransactionKit.transferBody

        // The challenge, then the approval journey: the display text and the code prompt.
        let first = try TransactionKit.transfer(g, token: token, body: body)
        #expect(first.status == 401, "\(first)")
        let txid = try TransactionKit.challengeTxid(first)
        let start = try TransactionKit.startComposite(g, txid: txid, session: .header(token))
        #expect(start.status == 200, "composite_advice start:\n\(start)")
        let cbs = Self.callbacks(start)
        #expect(cbs.map { $0["type"] as? String } == ["TextOutputCallback", "PasswordCallback"], "\(start.bodyText)")
        #expect(Self.output(cbs.first, "message") as? String == "Approve 100 EUR to Bob?", "\(start.bodyText)")

        let mails = try MailTools.waitForOutbox(outbox, count: 1)
        #expect(mails.count == 1, "\(mails)")
        let mail = try #require(mails.last)
        #expect(mail.header("To") == "demo@example.com", "\(mail)")
        #expect(mail.header("Subject") == "Your one-time code", "\(mail)")
        #expect(mail.body.contains("Approve 100 EUR to Bob?"), "the email does not show what is approved:\n\(mail)")
        let code = try #require(mail.oneTimeCode(), "no code in:\n\(mail)")
        #expect(!g.process.stderr.contains(code), "the code appears in the gateway log")

        let done = try Self.post(g, Self.authPath, TransactionKit.answer(try start.json(), [code]),
                                 headers: [("iPlanetDirectoryPro", token)])
        #expect(done.status == 200, "answering with the emailed code:\n\(done)")
        #expect(try done.json()["tokenId"] as? String == token, "\(done)")

        let retry = try TransactionKit.transfer(g, token: token, body: body, query: "?_txid=\(txid)")
        #expect(retry.status == 201, "retry with _txid:\n\(retry)")
        #expect((try? retry.json())?["status"] as? String == "executed", "\(retry)")
        #expect((try? retry.json())?["sequence"] as? NSNumber == 1, "\(retry)")

        // A wrong code: Login failure, and the transaction stays unapproved.
        let second = try TransactionKit.transfer(g, token: token, body: body)
        let txid2 = try TransactionKit.challengeTxid(second)
        #expect(txid2 != txid)
        let start2 = try TransactionKit.startComposite(g, txid: txid2, session: .header(token))
        #expect(start2.status == 200, "\(start2)")
        let mails2 = try MailTools.waitForOutbox(outbox, count: 2)
        let code2 = try #require(mails2.last?.oneTimeCode(), "\(mails2)")
        let wrong = String(code2.dropLast()) + String((Int(String(code2.last!))! + 1) % 10)
        let refused = try Self.post(g, Self.authPath, TransactionKit.answer(try start2.json(), [wrong]),
                                    headers: [("iPlanetDirectoryPro", token)])
        #expect(refused.status == 401, "a wrong code:\n\(refused)")
        // Inside the session the approval says which failure it was, and the attempts left
        // before the lockout (security.maxFailedAttempts, 5 by default) (WIRE-EXTENSIONS §4b).
        #expect(refused.bodyText == #"{"code":401,"reason":"Unauthorized","message":"Login failure","detail":{"failureUrl":"","reason":"wrong_code","attemptsLeft":4}}"#,
                "\(refused.bodyText)")
        let notApproved = try TransactionKit.transfer(g, token: token, body: body, query: "?_txid=\(txid2)")
        #expect(notApproved.status == 401, "retry after a wrong code:\n\(notApproved)")
        #expect(!notApproved.bodyText.contains("executed"))
        // Still waiting for approval: the same request is challenged with the same transaction.
        #expect(try TransactionKit.challengeTxid(notApproved) == txid2)
    }

    static func passwordLogin(_ g: GatewayInstance, user: String = "demo") throws -> String {
        let start = try post(g, authPath + "?authIndexType=service&authIndexValue=Login", nil)
        let done = try post(g, authPath, TransactionKit.answer(try start.json(), [user, password]))
        guard done.status == 200, let token = try done.json()["tokenId"] as? String else {
            throw HarnessError("password login as \(user) failed: \(done)")
        }
        return token
    }

    // MARK: 9. A link from another realm

    /// The emailed link carries its realm (as WIRE.md §5's example does), so the login page
    /// resumes where the journey started; a try in another realm does not use the link up.
    @Test(.timeLimit(.minutes(1)))
    func aLinkFromAnotherRealmResumesInThatRealm() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(configForURL: { Self.config($0, ["realms": ["alpha"]]) })
        let alpha = "/am/json/realms/root/realms/alpha/authenticate"
        let start = try Self.post(g, alpha + "?authIndexType=service&authIndexValue=MagicLink", nil)
        #expect(start.status == 200, "\(start)")
        Self.expectSuspended(try Self.post(g, alpha, TransactionKit.answer(try start.json(), ["demo"])))
        let (link, id) = try #require(try MailTools.waitForOutbox(Self.outbox(bed)).last?.magicLink())

        // Resume where the login page would, reading the link's `realm` the way it does.
        let query = TransactionKit.queryPairs(String(link.split(separator: "?", maxSplits: 1).last ?? ""))
        let realm = (query.first { $0.name == "realm" }?.value ?? "/").trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        let endpoint = "/am/json/realms/root" + (realm.isEmpty ? "" : "/realms/\(realm)") + "/authenticate"
        Self.expectNotFound(try Self.post(g, "/am/json/realms/root/authenticate?suspendedId=\(id)", nil), "an alpha link in the root realm")
        let resumed = try Self.post(g, endpoint + "?suspendedId=\(id)", nil)
        #expect(endpoint == alpha, "link \(link) does not lead back to realm alpha")
        #expect(resumed.status == 200, "resuming an alpha link from \(link):\n\(resumed)")
        #expect((try? resumed.json())?["realm"] as? String == "/alpha", "\(resumed)")
    }

    /// A locked-out user, or one over the email limit, gets exactly what an unknown user gets,
    /// and no email: the answer says nothing about the account, and the lockout holds for
    /// magic links too.
    @Test(.timeLimit(.minutes(1)))
    func lockedOutOrRateLimitedUsersGetTheSameAnswerAndNoEmail() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(configForURL: {
            Self.config($0, ["security": ["maxFailedAttempts": 2, "lockoutDurationS": 60, "maxEmailsPerWindow": 1]])
        })
        let unknown = try Self.requestLink(g, user: "nobody")
        Self.expectSuspended(unknown)
        for _ in 0..<2 {
            let step = try Self.post(g, Self.authPath, nil)
            #expect(try Self.post(g, Self.authPath, TransactionKit.answer(try step.json(), ["demo", "wrong"])).status == 401)
        }
        let locked = try Self.requestLink(g, user: "demo")
        Self.expectSuspended(locked)
        #expect(MailTools.outboxFiles(Self.outbox(bed)).isEmpty, "a locked-out user was emailed")

        // (The guessing client is locked out too: the email limit is tried from another one.)
        Self.expectSuspended(try Self.requestLink(g, user: "other", source: "127.0.0.2"))
        #expect(try MailTools.waitForOutbox(Self.outbox(bed)).count == 1)
        let over = try Self.requestLink(g, user: "other", source: "127.0.0.2")
        Self.expectSuspended(over)
        Thread.sleep(forTimeInterval: 0.5)
        #expect(MailTools.outboxFiles(Self.outbox(bed)).count == 1, "the email limit was not applied")
    }

    /// Security review item 7: an unauthenticated caller spends its own source's email quota,
    /// never the user's, so nobody can keep a user from getting their own links.
    @Test(.timeLimit(.minutes(1)))
    func linksAskedForByOthersDoNotSpendTheUsersQuota() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(configForURL: { Self.config($0, ["security": ["maxEmailsPerWindow": 2]]) })
        func requestLink(from source: String) throws {
            let start = try Self.post(g, Self.magicStart, nil, source: source)
            Self.expectSuspended(try Self.post(g, Self.authPath, Self.answer(try start.json(), ["demo"]), source: source))
        }
        for _ in 0..<3 { try requestLink(from: "127.0.0.5") }
        #expect(try MailTools.waitForOutbox(Self.outbox(bed)).count == 2)
        Thread.sleep(forTimeInterval: 0.3)
        #expect(MailTools.outboxFiles(Self.outbox(bed)).count == 2, "the source's limit was not applied")
        try requestLink(from: "127.0.0.6")
        #expect(Timing.poll(timeout: 5) { MailTools.outboxFiles(Self.outbox(bed)).count == 3 },
                "the user's own link was refused because another source used up a quota")
    }

    // MARK: 8. Clicking the link in a browser

    @Test(.timeLimit(.minutes(2)), .enabled(if: Browser.isInstalled, Comment(rawValue: Browser.notInstalled)))
    func aBrowserOpeningTheLinkResumesAndLandsOnGoto() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(configForURL: { Self.config($0) })

        Self.expectSuspended(try Self.requestLink(g, user: "demo", query: "&goto=%2Faccounts"))
        let mail = try #require(try MailTools.waitForOutbox(Self.outbox(bed)).last)
        let (link, id) = try #require(mail.magicLink(), "\(mail)")
        #expect(link == "\(g.baseURL)/am/XUI/?realm=/&suspendedId=\(id)", "link: \(link)")

        // Another browser (no cookies, nothing of the API client's) clicks the link.
        let run = try bed.runBrowser(link, [
            .waitForPath("/accounts", timeout: 15),
            .waitForText("acc-001"),
        ])
        #expect(run.ok, "\(run)")
        #expect(run.url == g.baseURL + "/accounts", "\(run)")
        #expect(run.text.contains("acc-001"), "\(run)")
        #expect(run.scriptErrors.isEmpty, "\(run)")
        let cookie = try #require(run.cookie("iPlanetDirectoryPro"), "no session cookie in the browser: \(run)")
        #expect(cookie.httpOnly, "\(cookie)")
        try Self.expectSession(g, cookie.value, uid: "demo")
        // The page used the link up.
        Self.expectNotFound(try Self.resume(g, id), "the link after the browser used it")
    }
}
