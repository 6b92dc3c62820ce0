import EventHTTP
import HTTPCore
import Logging
import TxGateCore

/// Keeps a browser's transactional request in the store while its user approves it
/// (WIRE-EXTENSIONS.md §3b). The challenge phase parks; the replay phase finds it again.
struct RequestParking {
    let store: Store
    let loop: EventLoop
    /// `limits.maxParkedBodyBytes`.
    let maxBodyBytes: Int
    let logger: Logger

    /// Whether the request comes from a browser that would be sent to the login page: it
    /// neither asks for the challenge in a header (SDKs) nor carries a bearer token.
    static func isBrowser(_ ctx: RequestContext) -> Bool {
        guard ctx.bearer == nil else { return false }
        return !(ctx.head.headers.first("x-authenticate-response").map { asciiCaseInsensitiveEquals($0, "header") } ?? false)
    }

    /// Whether `ctx` may be a browser coming back from an approval to a parked request: the
    /// identify phase then looks the session up even where no policy needs one for a GET.
    static func mayReplay(_ ctx: RequestContext) -> Bool {
        // Not on /-/authz: the proxy forwards the request it holds, never a parked one.
        ctx.forwardedBy == nil && ctx.head.method == "GET" && ctx.txid.map(PolicyDecider.isTxId) == true && isBrowser(ctx)
    }

    /// Parks the request under `txid` for its subject, expiring with the transaction, then
    /// answers `reply`. Refuses a body over the limit (413), before buffering it when its
    /// length is announced.
    func park(_ ctx: RequestContext, txid: String, then reply: LocalReply) -> PhaseStatus {
        guard let subject = ctx.subject else { return .reply(reply) }
        if ctx.replay == nil, let n = ctx.head.headers.first("Content-Length").flatMap({ Int($0) }),
           let why = ParkedRequest.tooLarge(bodyBytes: n, limit: maxBodyBytes) {
            return .fail(.payloadTooLarge(why))
        }
        return ctx.suspend { resume in
            var resume = Optional(resume)
            ctx.exchange.whenBodyComplete { [self] complete in
                guard let r = resume.take() else { return }
                store(ctx, txid: txid, subject: subject, complete: complete, then: reply, r)
            }
        }
    }

    private func store(_ ctx: RequestContext, txid: String, subject: Subject, complete: Bool, then reply: LocalReply,
                       _ token: consuming PhaseResume) {
            // Not complete: the server answered the body's error (or the client left).
            guard complete else { token.ended(.bodyFailed); return }
            let body = ctx.bodyBytes
            if let why = ParkedRequest.tooLarge(bodyBytes: body.count, limit: maxBodyBytes) {
                token.fail(.payloadTooLarge(why))
                return
            }
            let parked = ParkedRequest(txid: txid, subject: subject.uid, method: ctx.method, target: ctx.target,
                                       contentType: ctx.contentType, accept: ctx.replay?.accept ?? ctx.head.headers.first("Accept"),
                                       body: body)
            var resume = Optional(token)
            store.put(ParkedRequest.key(txid), value: parked.encoded, ttlMs: ttlMs(ctx), on: loop) { [logger] r in
                if case .failure(let e) = r { resume.take()?.fail(.storeUnavailable(e.description)); return }
                logger.info("request parked", metadata: [
                    "request_id": .string(ctx.requestId), "txid": .string(masked(txid)), "user": .string(subject.uid),
                    "method": .string(parked.method), "bytes": .stringConvertible(body.count),
                ])
                resume.take()?.reply(reply)
            }
    }

    /// What a visit with `_txid` found.
    enum Lookup {
        /// This user's request for this target. It stays parked until it expires: the
        /// transaction, consumed in one store step by the decision, is what lets exactly one
        /// visit execute it; any other visit (a reload, a concurrent one, one on another
        /// instance) is challenged anew for the same request.
        case found(ParkedRequest)
        /// Nothing parked (never, or expired).
        case none
        /// Parked by another user (or for another target): not theirs to send or to see.
        case notYours
    }

    /// The request parked under the request's `_txid`, if it is this user's and for this target.
    func find(_ ctx: RequestContext, _ done: @escaping (StoreResult<Lookup>) -> Void) {
        guard let txid = ctx.txid, let subject = ctx.subject else { done(.success(.none)); return }
        store.get(ParkedRequest.key(txid), on: loop) { [logger] r in
            switch r {
            case .failure(let e):
                done(.failure(e))
            case .success(nil):
                done(.success(.none))
            case .success(let bytes?):
                guard ConditionalTake.matches(bytes, ParkedRequest.claim(subject: subject.uid, target: ctx.target)),
                      let parked = ParkedRequest.decode(bytes) else {
                    logger.info("parked request refused", metadata: [
                        "request_id": .string(ctx.requestId), "txid": .string(masked(txid)), "user": .string(subject.uid),
                        "reason": "another user's, or another target",
                    ])
                    done(.success(.notYours))
                    return
                }
                done(.success(.found(parked)))
            }
        }
    }

    /// The transaction's lifetime (its policy's `ttlS`; AM's default 180 s without one).
    private func ttlMs(_ ctx: RequestContext) -> Int {
        if case .transaction(let rule)? = ctx.policy?.requirement {
            return rule.ttlS * 1000
        }
        return 180_000
    }
}

/// A browser back from approving a parked request (`GET <target>?_txid=X` with its session):
/// the parked request takes the GET's place, and the decision consumes the transaction for it
/// as for any retry (a second visit finds the transaction consumed: a new one, a new 303). Another user's session is refused and sent to sign in (as the user whose
/// request it is); every other request passes through untouched.
struct ReplayPhase: RequestPhase {
    let parking: RequestParking
    let publicURL: String

    func handle(_ ctx: RequestContext) -> PhaseStatus {
        guard RequestParking.mayReplay(ctx), ctx.subject != nil else { return .next }
        return ctx.suspend { resume in
            var resume = Optional(resume)
            parking.find(ctx) { r in
                switch r {
                case .failure(let e):
                    resume.take()?.fail(.storeUnavailable(e.description))
                case .success(.found(let parked)):
                    ctx.replay = parked
                    resume.take()?.next()
                case .success(.none):
                    resume.take()?.next()
                case .success(.notYours):
                    var h = HTTPHeaders()
                    h.add("Cache-Control", "no-store")
                    let back = Challenge.addingQuery(publicURL + ctx.target, "_txid", ctx.txid ?? "")
                    h.add("Location", "\(publicURL)/am/XUI/?goto=\(Query.encode(back))")
                    let message = "this approval link is for a request another user sent; sign in as that user to continue"
                    resume.take()?.reply(.json(307, ErrorBody.text(status: 307, message: message), headers: h, details: .parkedElsewhere))
                }
            }
        }
    }
}
