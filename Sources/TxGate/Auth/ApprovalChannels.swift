import EventHTTP
import Foundation
import HTTPCore
import Logging
import TxGateCore

/// Where the webhook channel posts, built once at start-up (and on a reload): the receiver's
/// address, its TLS context, and the secret read from `approvals.webhook.secretFile`.
struct WebhookTarget: Sendable {
    let config: WebhookConfig
    let endpoint: UpstreamEndpoint
    let secret: [UInt8]

    /// Reads the secret and resolves the receiver; connects to nothing.
    static func make(_ config: WebhookConfig) throws -> WebhookTarget {
        guard let data = FileManager.default.contents(atPath: config.secretFile) else {
            throw SocketError("approvals.webhook.secretFile: cannot read '\(config.secretFile)'")
        }
        let url = config.url
        let tls: TLSContext?
        do {
            tls = url.isTLS ? try TLSContext.client(caFile: config.caFile) : nil
        } catch {
            throw SocketError("approvals.webhook.caFile: \(error)")
        }
        let address: SocketAddress
        do { address = try SocketAddress(host: url.host, port: url.port) } catch { throw SocketError("approvals.webhook.url: \(error)") }
        return WebhookTarget(config: config,
                             endpoint: UpstreamEndpoint(address: address, tls: tls, tlsHost: url.host, connectTimeoutMs: config.timeoutMs,
                                                        responseTimeoutMs: config.timeoutMs, maxIdle: 4),
                             secret: WebhookConfig.secret(data))
    }
}

/// One delivery channel of approval requests (`ApprovalChannelKind`): delivers a notice, in
/// the background, and logs and counts what became of it. Confined to one worker's loop.
protocol ApprovalChannel: AnyObject {
    var kind: ApprovalChannelKind { get }
    func deliver(_ notice: ApprovalNotice)
}

/// `email`: a link to the approval page, through the configured email delivery, to the
/// request's user's address.
final class EmailApprovalChannel: ApprovalChannel {
    let kind = ApprovalChannelKind.email
    private let auth: AuthService
    private let services: EmbeddedJourneyServices

    init(auth: AuthService, services: EmbeddedJourneyServices) {
        self.auth = auth
        self.services = services
    }

    func deliver(_ notice: ApprovalNotice) {
        guard let address = auth.users[notice.subject]?.email else {
            auth.logger.warning("approval request not emailed: the user has no email address", metadata: [
                "approval": .string(masked(notice.id)), "user": .string(notice.subject),
            ])
            auth.metrics.approvalDelivered(.email, ok: false)
            return
        }
        services.sendEmail(notice.email(to: address, auth.config.approvals.email)) { [auth] r in
            auth.metrics.approvalDelivered(.email, ok: (try? r.get()) != nil)
            auth.logger.info(r.isSuccess ? "approval request emailed" : "approval request email failed", metadata: [
                "approval": .string(masked(notice.id)), "user": .string(notice.subject),
            ])
        }
    }
}

/// `webhook`: a JSON POST of the notice to `approvals.webhook.url`, signed
/// (`WebhookSignature`), within `timeoutMs` per attempt; anything but a 2xx is tried again after
/// a backoff that doubles from `backoffMs`, until `attempts` are spent. Never blocks the loop:
/// the pool is the worker's own, the waits are loop timers.
final class WebhookApprovalChannel: ApprovalChannel {
    let kind = ApprovalChannelKind.webhook
    private let target: WebhookTarget
    private let pool: UpstreamPool
    private let auth: AuthService
    /// Retries waiting for their time, by a number of their own (a timer lives until it fires).
    private var waiting: [Int: LoopTimer] = [:]
    private var nextWait = 0

    init(target: WebhookTarget, auth: AuthService, loop: EventLoop) {
        self.target = target
        self.auth = auth
        pool = UpstreamPool(loop: loop, endpoint: target.endpoint)
    }

    func deliver(_ notice: ApprovalNotice) { attempt(notice, 1) }

    private func attempt(_ notice: ApprovalNotice, _ n: Int) {
        let body = notice.webhookBody
        let timestamp = auth.now
        var h = HTTPHeaders()
        h.add("Host", target.config.url.authority)
        h.add("Content-Type", "application/json")
        h.add("User-Agent", "txgate-webhook")
        h.add(WebhookSignature.timestampHeader, String(timestamp))
        h.add(WebhookSignature.signatureHeader, WebhookSignature.sign(secret: target.secret, timestamp: timestamp, body: body))
        h.add("X-TxGate-Attempt", String(n))
        let path = target.config.url.basePath.isEmpty ? "/" : target.config.url.basePath
        let request = UpstreamRequest(method: "POST", target: path, headers: h, body: Body(body), resendable: false)
        BufferedCall.send(request, on: pool, deadlineMs: target.config.timeoutMs, maxBytes: 64 * 1024) { [self] r in
            let problem: String?
            switch r {
            case .success(let resp) where (200..<300).contains(resp.head.status): problem = nil
            case .success(let resp): problem = "the receiver answered \(resp.head.status)"
            case .failure(let f): problem = f.description
            }
            guard let problem else {
                auth.metrics.approvalDelivered(.webhook, ok: true)
                auth.logger.info("approval request posted to the webhook", metadata: [
                    "approval": .string(masked(notice.id)), "user": .string(notice.subject), "attempt": .stringConvertible(n),
                ])
                return
            }
            guard n < target.config.attempts else {
                auth.metrics.approvalDelivered(.webhook, ok: false)
                auth.logger.error("approval request webhook failed; no attempts left", metadata: [
                    "approval": .string(masked(notice.id)), "attempts": .stringConvertible(n), "error": .string(problem),
                ])
                return
            }
            let waitMs = WebhookSignature.backoffMs(attempt: n + 1, baseMs: target.config.backoffMs)
            auth.logger.warning("approval request webhook failed; trying again", metadata: [
                "approval": .string(masked(notice.id)), "attempt": .stringConvertible(n), "retry_in_ms": .stringConvertible(waitMs),
                "error": .string(problem),
            ])
            let id = nextWait
            nextWait += 1
            let timer = LoopTimer(loop: pool.loop) { [weak self] in
                guard let self else { return }
                waiting[id] = nil
                attempt(notice, n + 1)
            }
            waiting[id] = timer
            timer.schedule(afterMs: waitMs)
        }
    }
}

private extension Result {
    var isSuccess: Bool { if case .success = self { return true } else { return false } }
}
