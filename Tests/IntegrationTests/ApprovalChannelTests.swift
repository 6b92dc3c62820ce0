import Foundation
import Testing
import TxGateCore
import TestSupport

/// Approve elsewhere (issue 27) on the wire, against the binary: the webhook channel against a
/// real HTTP receiver that checks the signature with Python's `hmac` (and one that is down at
/// first), the email channel through the aiosmtpd sink, `txgate request` waiting on a
/// PollingWaitCallback, `txgate check` on bad `approvals` settings, and 20 concurrent
/// approve/deny posts for one request over two instances on one Redis.
@Suite(.serialized, .testbed) struct ApprovalChannelTests {
    typealias Kit = TransactionKit
    typealias A = ApprovalKit

    /// A webhook receiver: verifies `X-TxGate-Signature` over timestamp + "." + body with the
    /// secret (hmac, compare_digest), refuses a timestamp more than 5 minutes off, answers 200
    /// or 401, and appends what it got to `log` (one JSON line per POST).
    static let receiver = #"""
    import hashlib, hmac, json, sys, threading, time
    from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
    port, secret_file, log = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    hang = int(sys.argv[4]) if len(sys.argv) > 4 else 0  # the first `hang` POSTs get no answer for 10 s
    secret = open(secret_file, "rb").read().rstrip(b"\r\n")
    lock = threading.Lock()
    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self):
            global hang
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock:
                slow, hang = hang > 0, hang - 1
            if slow:
                time.sleep(10)
            ts = self.headers.get("X-TxGate-Timestamp", "")
            sig = self.headers.get("X-TxGate-Signature", "")
            want = "v1=" + hmac.new(secret, ts.encode() + b"." + body, hashlib.sha256).hexdigest()
            ok = hmac.compare_digest(want, sig) and ts.isdigit() and abs(time.time() - int(ts)) < 300
            with open(log, "a") as f:
                f.write(json.dumps({"ok": ok, "attempt": self.headers.get("X-TxGate-Attempt"), "timestamp": ts,
                                    "signature": sig, "body": body.decode()}) + "\n")
            self.send_response(200 if ok else 401)
            self.send_header("Content-Length", "0")
            self.end_headers()
        def log_message(self, *args):
            pass
    ThreadingHTTPServer(("127.0.0.1", port), Receiver).serve_forever()
    """#

    static func startReceiver(_ bed: Testbed, port: Int, secretFile: String, log: String, hang: Int = 0) throws -> SpawnedProcess {
        let script = try bed.dir.write("receiver.py", receiver)
        let command = try Python.command([script.path, String(port), secretFile, log, String(hang)])
        let p = try bed.spawn(URL(fileURLWithPath: command[0]), Array(command.dropFirst()), name: "webhook-receiver")
        try p.waitForPort(port)
        return p
    }

    static func received(_ log: String) -> [[String: Any]] {
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    @Test(.timeLimit(.minutes(1)))
    func theWebhookIsSignedAndRetriedUntilTheReceiverComesBack() throws {
        let bed = try Testbed.current
        let secretFile = try bed.dir.write("webhook.secret", "a-webhook-secret-of-32-bytes-xyz\n").path
        let log = bed.dir.url.appendingPathComponent("received.jsonl").path
        let port = try Ports.free()
        let (g, _) = try bed.startGatewayWithBank(configForURL: {
            A.config(channels: ["webhook"], ["publicUrl": $0, "approvals": ["webhook": [
                "url": "http://127.0.0.1:\(port)/hooks/approvals", "secretFile": secretFile,
                "timeoutMs": 2000, "attempts": 8, "backoffMs": 200]]])
        })
        let waiting = try Kit.login(g)
        let (_, step) = try A.waitingTransfer(g, token: waiting)
        let code = try #require(A.code(in: try A.pollingWait(step).message))
        let id = try #require(A.requestId(inStep: step))

        // The receiver is down for the first attempts, then comes up on the same port.
        #expect(Timing.poll(timeout: 10) { g.logText.contains("approval request webhook failed; trying again") }, "no retry logged")
        _ = try Self.startReceiver(bed, port: port, secretFile: secretFile, log: log)
        #expect(Timing.poll(timeout: 20) { !Self.received(log).isEmpty }, "the receiver got nothing:\n\(g.logText.suffix(3000))")
        let got = Self.received(log)
        #expect(got.count == 1, "\(got)")
        let first = try #require(got.first)
        #expect(first["ok"] as? Bool == true, "the receiver's HMAC check failed: \(first)")
        #expect(Int(first["attempt"] as? String ?? "") ?? 0 > 1, "delivered at the first attempt: the receiver was not down? \(first)")
        let payload = try #require(try JSONSerialization.jsonObject(with: Data((first["body"] as? String ?? "").utf8)) as? [String: Any])
        #expect(payload["bindingCode"] as? String == code)
        #expect(payload["link"] as? String == Kit.publicURL(g) + "/am/XUI/approval?id=" + id, "\(payload)")
        #expect((payload["display"] as? String)?.contains("Approve 100 EUR to Bob?") == true, "\(payload)")
        #expect(payload["subject"] as? String == "demo" && payload["type"] as? String == "approval_request")

        // The receiver's check can fail: the same headers over a changed body are refused.
        let body = (first["body"] as? String ?? "").replacingOccurrences(of: code, with: code == "10" ? "11" : "10")
        let tampered = try RawHTTPClient(port: port, timeout: 5).request("POST", "/hooks/approvals", headers: [
            ("Host", "127.0.0.1"), ("Content-Type", "application/json"),
            ("X-TxGate-Timestamp", first["timestamp"] as? String ?? ""), ("X-TxGate-Signature", first["signature"] as? String ?? ""),
        ], body: Array(body.utf8))
        #expect(tampered.status == 401, "\(tampered)")

        // Counted by channel and outcome; the secret, the link's id and the signature are not logged.
        let metrics = try g.fetch("GET", "/-/metrics").bodyText
        #expect(metrics.contains(#"txgate_approval_deliveries_total{channel="webhook",outcome="sent"} 1"#), "\(metrics)")
        #expect(metrics.contains(#"txgate_approval_requests_total{outcome="created"} 1"#))
        let text = g.logText
        #expect(!text.contains(id) && !text.contains("a-webhook-secret") && !text.contains(first["signature"] as? String ?? "v1="))
    }

    /// A receiver that takes the POST but does not answer within `timeoutMs`: the attempt is
    /// given up at the timeout and the next one, signed anew, is delivered.
    @Test(.timeLimit(.minutes(1)))
    func aWebhookAttemptThatGetsNoAnswerInTimeIsTriedAgain() throws {
        let bed = try Testbed.current
        let secretFile = try bed.dir.write("webhook.secret", "another-webhook-secret-0123456789\n").path
        let log = bed.dir.url.appendingPathComponent("received-slow.jsonl").path
        let port = try Ports.free()
        _ = try Self.startReceiver(bed, port: port, secretFile: secretFile, log: log, hang: 1)
        let (g, _) = try bed.startGatewayWithBank(configForURL: {
            A.config(channels: ["webhook"], ["publicUrl": $0, "approvals": ["webhook": [
                "url": "http://127.0.0.1:\(port)/", "secretFile": secretFile, "timeoutMs": 1000, "attempts": 3, "backoffMs": 100]]])
        })
        let started = Date()
        let waiting = try Kit.login(g)
        _ = try A.waitingTransfer(g, token: waiting)
        #expect(Timing.poll(timeout: 8) { Self.received(log).contains { $0["attempt"] as? String == "2" && $0["ok"] as? Bool == true } },
                "no second attempt delivered:\n\(g.logText.suffix(2000))")
        #expect(Date().timeIntervalSince(started) < 8, "the second attempt waited for the hung one")
        let retried = g.logLines().first { $0["msg"] as? String == "approval request webhook failed; trying again" }
        #expect((retried?["error"] as? String)?.contains("1000") == true, "the timeout is named: \(String(describing: retried))")
    }

    @Test(.timeLimit(.minutes(1)))
    func theEmailChannelSendsTheApprovalLinkThroughSMTP() throws {
        let bed = try Testbed.current
        let smtp = try bed.startSMTPServer()
        let (g, _) = try bed.startGatewayWithBank(configForURL: {
            var c = A.config(["publicUrl": $0])
            c["email"] = ["smtp": ["url": smtp.url, "from": "txgate@example.com", "startTls": false]]
            return c
        })
        let waiting = try Kit.login(g)
        let (_, step) = try A.waitingTransfer(g, token: waiting)
        let code = try #require(A.code(in: try A.pollingWait(step).message))
        let mails = try smtp.waitForEmails(1)
        let mail = try #require(mails.first)
        #expect(mail.header("To")?.contains("demo@example.com") == true, "\(mail)")
        #expect(mail.header("Subject")?.contains(code) == true && mail.body.contains(code), "\(mail)")
        let id = try #require(A.requestId(inLink: mail.body), "\(mail)")
        #expect(id == A.requestId(inStep: step))
        #expect(mail.body.contains(Kit.publicURL(g) + "/am/XUI/approval?id=" + id))
        #expect(try g.fetch("GET", "/-/metrics").bodyText.contains(#"txgate_approval_deliveries_total{channel="email",outcome="sent"} 1"#))
    }

    /// `txgate request` waits on the PollingWaitCallback (the message with the code on stderr,
    /// once) while the person approves in another session; then the transfer executes.
    @Test(.timeLimit(.minutes(1)))
    func txgateRequestWaitsOnAPollingWaitCallback() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(configForURL: { A.config(pollMs: 500, ["publicUrl": $0]) })
        let session = bed.dir.url.appendingPathComponent("cli-session.json").path
        let login = try bed.runTxgate(["login", Kit.publicURL(g), "--answer", "User Name=demo", "--answer", "Password=\(Kit.password)",
                                       "--session-file", session])
        #expect(login.status == 0, "\(login)")

        final class Box: @unchecked Sendable { var result: Result<CommandResult, Error>? }
        let box = Box()
        let finished = DispatchSemaphore(value: 0)
        let body = String(decoding: Kit.transferBody, as: UTF8.self)
        Thread {
            box.result = Result { try bed.runTxgate(["request", Kit.publicURL(g) + "/transfer", "-d", body, "--session-file", session], timeout: 40) }
            finished.signal()
        }.start()

        let mail = try #require(try MailTools.waitForOutbox(g.configURL.deletingLastPathComponent().appendingPathComponent("var/outbox"), count: 1, timeout: 20).last)
        let id = try #require(A.requestId(inLink: mail.body))
        Thread.sleep(forTimeInterval: 1.2)  // a few polls while pending
        let phone = try Kit.login(g)
        var codes = Kit.Codes()
        let approved = try A.approve(g, id: id, token: phone, code: codes.next(Kit.demoSecret))
        #expect(approved.status == 200, "\(approved)")
        #expect(finished.wait(timeout: .now() + 30) == .success, "txgate request did not finish")
        let r = try #require(try box.result?.get())
        #expect(r.status == 0, "\(r)")
        #expect((try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])?["status"] as? String == "executed", "\(r)")
        let code = try #require(mail.body.components(separatedBy: "shows the code ").last?.prefix(2))
        #expect(r.stderr.components(separatedBy: "Approve on your phone. Code: \(code)").count == 2,
                "the message with the code must be on stderr once:\n\(r.stderr)")
    }

    /// Denied on the phone: `txgate request` stops waiting, exits 2 and says it was denied;
    /// nothing is executed.
    @Test(.timeLimit(.minutes(1)))
    func txgateRequestStopsWhenTheRequestIsDenied() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(configForURL: { A.config(pollMs: 500, ["publicUrl": $0]) })
        let session = bed.dir.url.appendingPathComponent("cli-session-deny.json").path
        let login = try bed.runTxgate(["login", Kit.publicURL(g), "--answer", "User Name=demo", "--answer", "Password=\(Kit.password)",
                                       "--session-file", session])
        #expect(login.status == 0, "\(login)")
        final class Box: @unchecked Sendable { var result: Result<CommandResult, Error>? }
        let box = Box()
        let finished = DispatchSemaphore(value: 0)
        let body = String(decoding: Kit.transferBody, as: UTF8.self)
        Thread {
            box.result = Result { try bed.runTxgate(["request", Kit.publicURL(g) + "/transfer", "-d", body, "--session-file", session], timeout: 40) }
            finished.signal()
        }.start()
        let mail = try #require(try MailTools.waitForOutbox(g.configURL.deletingLastPathComponent().appendingPathComponent("var/outbox"), count: 1, timeout: 20).last)
        let id = try #require(A.requestId(inLink: mail.body))
        let denied = try A.deny(g, id: id, token: try Kit.login(g))
        #expect(denied.status == 200, "\(denied)")
        #expect(finished.wait(timeout: .now() + 30) == .success, "txgate request did not stop")
        let r = try #require(try box.result?.get())
        #expect(r.status == 2, "\(r)")
        #expect(r.stderr.contains("denied") && !r.stdout.contains("executed"), "\(r)")
    }

    @Test func txgateCheckReportsBadApprovalSettingsByPath() throws {
        let bed = try Testbed.current
        var config = A.config(channels: ["webhook", "sms"])
        config["upstream"] = ["url": "http://127.0.0.1:9"]
        config["approvals"] = ["webhook": ["url": "ftp://x", "secretFile": "missing.secret", "retries": 3, "attempts": 0]]
        let text = String(decoding: try JSONSerialization.data(withJSONObject: config), as: UTF8.self)
        let r = try bed.check(configText: text)
        #expect(r.status != 0, "\(r)")
        let out = r.stdout + r.stderr
        for expected in ["journeys.RemoteApproval[0].channels[1]", "approvals.webhook.url", "approvals.webhook.retries: unknown key",
                         "approvals.webhook.attempts"] {
            #expect(out.contains(expected), "txgate check does not name \(expected):\n\(out)")
        }

        // A webhook channel with no approvals.webhook, and an approver journey that is not there.
        var other = A.config(channels: ["webhook"], approver: "Nowhere")
        other["upstream"] = ["url": "http://127.0.0.1:9"]
        let r2 = try bed.check(configText: String(decoding: try JSONSerialization.data(withJSONObject: other), as: UTF8.self), name: "check2.json")
        let out2 = r2.stdout + r2.stderr
        #expect(r2.status != 0)
        #expect(out2.contains("journeys.RemoteApproval[0].channels[0]") && out2.contains("approvals.webhook"), "\(out2)")
        #expect(out2.contains("journeys.RemoteApproval[0].approverJourney") && out2.contains("Nowhere"), "\(out2)")

        // A secret shorter than 16 bytes.
        let short = try bed.dir.write("short.secret", "tooshort\n").path
        var third = A.config(channels: ["webhook"])
        third["upstream"] = ["url": "http://127.0.0.1:9"]
        third["approvals"] = ["webhook": ["url": "http://127.0.0.1:9/h", "secretFile": short]]
        let r3 = try bed.check(configText: String(decoding: try JSONSerialization.data(withJSONObject: third), as: UTF8.self), name: "check3.json")
        #expect(r3.status != 0 && (r3.stdout + r3.stderr).contains("approvals.webhook.secretFile"), "\(r3)")
    }

    /// 20 concurrent posts for one request, half approving (the last step of ten approver
    /// journeys) and half denying, spread over two instances on one Redis: exactly one decides;
    /// every other one is told what was decided; the waiting client sees that decision.
    @Test(.timeLimit(.minutes(1)))
    func twentyConcurrentApproveAndDenyPostsOverTwoInstancesDecideOnce() throws {
        let bed = try Testbed.current
        let cluster = try Cluster(bed: bed, instances: 2) { A.config(approver: "ApproverConfirm", ["publicUrl": $0]) }
        let (a, b) = (cluster[0], cluster[1])
        let waiting = try Kit.login(a)
        let (txid, step) = try A.waitingTransfer(a, token: waiting)
        let id = try #require(A.requestId(inStep: step))
        let phone = try Kit.login(b)
        let instances = [a, b]

        // Ten approver journeys, started beforehand, each at its Yes/No step.
        var answers: [[UInt8]] = []
        for i in 0..<10 {
            let start = try A.startApprover(instances[i % 2], id: id, token: phone)
            guard start.status == 200 else { throw HarnessError("approver journey \(i) did not start:\n\(start)") }
            answers.append([UInt8](try JSONSerialization.data(withJSONObject: A.answer(try start.json(), [0]))))
        }
        let yes = answers
        let denyBody = [UInt8](#"{"id":"\#(id)"}"#.utf8)
        let headers = A.jsonHeaders + [("iPlanetDirectoryPro", phone)]
        let results = try Cluster.race(20, timeout: 30) { i in
            i % 2 == 0
                ? (instances[(i / 2) % 2].port, "POST", A.authPath, headers, yes[i / 2])
                : (instances[(i / 2 + 1) % 2].port, "POST", A.approvalsPath + "?_action=deny", headers, denyBody)
        }
        var winners: [String] = []
        var told: [String] = []
        var other: [String] = []
        for (i, r) in results.enumerated() {
            switch r {
            case .success(let resp) where resp.status == 200:
                winners.append(i % 2 == 0 ? "approved" : "denied")
            case .success(let resp) where resp.status == 409:
                told.append(A.state(resp) ?? "?")
            case .success(let resp): other.append("#\(i): \(resp)")
            case .failure(let e): other.append("#\(i): \(e)")
            }
        }
        #expect(winners.count == 1, "decisions: \(winners)")
        #expect(other.isEmpty, "\(other.prefix(3))")
        let decided = try #require(winners.first)
        #expect(told.count == 19 && told.allSatisfy { $0 == decided }, "the losers were told \(told), the winner \(decided)")
        #expect(A.state(try A.status(b, id: id, token: phone)) == decided)
        #expect(A.state(try A.status(a, id: id, token: waiting)) == decided)

        Thread.sleep(forTimeInterval: Double(try A.pollingWait(step).waitMs) / 1000)  // the client waits waitTime
        let poll = try A.poll(b, step, token: waiting)
        if decided == "approved" {
            #expect(poll.status == 200, "\(poll)")
            let retry = try Kit.transfer(a, token: waiting, body: Kit.transferBody, query: "?_txid=\(txid)")
            #expect(retry.status == 201, "\(retry)")
        } else {
            #expect(poll.status == 401 && A.reason(poll) == "denied", "\(poll)")
        }
    }
}
