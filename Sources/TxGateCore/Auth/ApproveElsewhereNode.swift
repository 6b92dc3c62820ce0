import Foundation

/// Approve elsewhere (issue 27): entering the node creates a pending `ApprovalRequest` for the
/// journey's user, sends it on the configured channels (`ApprovalChannelKind`), and shows AM's
/// `PollingWaitCallback` whose message names the binding code. The client submits the step
/// again, unchanged, after `waitTime`; each submission reads the request (never writes it):
/// pending shows the same step again, approved goes on, denied or expired fails the journey
/// with `FailureKind.denied` / `.expired`.
///
/// Everything the step needs between polls (the request's id, its binding code, when it was
/// last read) is in the signed authId, and the request is in the store: a restart of the
/// gateway, or a poll that reaches another instance, loses nothing.
struct ApproveElsewhereNode: JourneyNode {
    static let messageVariables = ["code", "display"]
    static let defaultMessage = "Approve this on your other device. Check that it shows the code {code}."
    /// Where the state keeps the request's id, its code, and when the request was last read (ms).
    static let idKey = "approvalId"
    static let codeKey = "approvalCode"
    static let readKey = "approvalReadMs"

    let channels: [ApprovalChannelKind]
    let ttlS: Int
    let pollMs: Int
    let message: String
    let approverJourney: String

    init(_ s: [String: JSONValue], _ path: String) throws(NodeConfigError) {
        let n = try NodeSettings(s, path, known: ["channels", "ttlS", "pollMs", "message", "approverJourney"])
        guard let list = s["channels"] else { throw NodeConfigError(path: "\(path).channels", message: "required key is missing") }
        guard let items = list.arrayValue, !items.isEmpty else {
            throw NodeConfigError(path: "\(path).channels", message: "must be a non-empty list of channels (email, webhook)")
        }
        var channels: [ApprovalChannelKind] = []
        for (i, item) in items.enumerated() {
            guard let name = item.stringValue, let kind = ApprovalChannelKind(rawValue: name) else {
                throw NodeConfigError(path: "\(path).channels[\(i)]",
                                      message: "\(item.canonical) is not a channel (" + ApprovalChannelKind.allCases.map(\.rawValue).joined(separator: ", ") + ")")
            }
            if channels.contains(kind) { throw NodeConfigError(path: "\(path).channels[\(i)]", message: "'\(name)' is listed twice") }
            channels.append(kind)
        }
        self.channels = channels
        ttlS = try n.int("ttlS", default: 120)
        pollMs = try n.int("pollMs", default: 5_000)
        if pollMs < 500 { throw NodeConfigError(path: "\(path).pollMs", message: "must be at least 500 (ms)") }
        if ttlS > 3_600 { throw NodeConfigError(path: "\(path).ttlS", message: "must be at most 3600 (an hour)") }
        message = try n.template("message", variables: Self.messageVariables, default: Self.defaultMessage)
        approverJourney = try n.string("approverJourney", default: "")
        if approverJourney.isEmpty {
            throw NodeConfigError(path: "\(path).approverJourney", message: "required key is missing (the journey the approver passes, e.g. a TOTP one)")
        }
    }

    func enter(_ state: JourneyState, _ context: JourneyContext, _ done: @escaping (EntryOutcome) -> Void) {
        let services = context.services
        guard let user = state.username ?? state.subjectUser else {
            done(.failure(reason: "approve elsewhere needs to know the user first"))
            return
        }
        let save = { (matter: ApprovalRequest.Matter) in
            let nowMs = Int64(services.now) * 1000
            let request = ApprovalRequest.pending(subject: user, matter: matter, approverJourney: approverJourney, nowMs: nowMs, ttlS: ttlS)
            services.saveApproval(request) { r in
                if case .failure(let e) = r { done(.unavailable(e.description)); return }
                // A name that is no account (a sign-in's claim) gets the same step, and a
                // request that nobody can approve, but nothing is sent anywhere.
                if services.user(named: user) != nil { services.notifyApproval(request, channels: channels) }
                var s = state
                s.shared[Self.idKey] = request.id
                s.shared[Self.codeKey] = request.bindingCode
                s.shared[Self.readKey] = String(nowMs)
                done(.show(s))
            }
        }
        // Each request sends a message to the person: counted like an email (`security.
        // maxEmailsPerWindow`), refused while the account or session is locked out, so that
        // nobody can flood a person's phone with requests (approval bombing).
        let create = { (matter: ApprovalRequest.Matter) in
            services.mayEmail(context.attempter(user), done,
                              silently: .failure(reason: "approval request refused: locked out or over the email limit")) {
                save(matter)
            }
        }
        guard let txid = state.txid else { create(.stepUp(journey: state.journey)); return }
        services.transaction(txid) { r in
            switch r {
            case .failure(let e): done(.unavailable(e.description))
            case .success(nil): done(.failure(reason: "the transaction is gone (expired or used)"))
            case .success(let tx?): create(.transaction(txid: txid, display: tx.display ?? context.display, bound: tx.shownFields))
            }
        }
    }

    func callbacks(_ state: JourneyState, _ context: JourneyContext) -> [Callback] {
        let text = EmailTemplate.render(message, ["code": state.shared[Self.codeKey] ?? "", "display": context.display ?? ""])
        return [.pollingWait(waitTimeMs: pollMs, message: text)]
    }

    /// A poll sooner than half of `pollMs` after the last read answers from the authId alone:
    /// a client that polls too fast costs nothing in the store (polls never write at all).
    func process(_ submitted: [SubmittedCallback], _ state: JourneyState, _ context: JourneyContext,
                 _ done: @escaping (NodeOutcome) -> Void) {
        let services = context.services
        guard let id = state.shared[Self.idKey] else {
            done(.failure(reason: "no approval request was made in this journey"))
            return
        }
        let nowMs = Int64(services.now) * 1000
        if let read = Int64(state.shared[Self.readKey] ?? ""), nowMs - read < Int64(pollMs / 2), nowMs >= read {
            done(.again(state))
            return
        }
        services.readApproval(id) { r in
            switch r {
            case .failure(let e):
                done(.unavailable(e.description))
            case .success(nil):
                done(.failure(reason: "the approval request expired", kind: .expired))
            case .success(let request?):
                guard request.subject == (state.username ?? state.subjectUser) else {
                    done(.failure(reason: "the approval request is another user's"))
                    return
                }
                switch request.state {
                case .approved:
                    var next = state
                    next.username = request.subject
                    next.shared[JourneyState.claimedUserKey] = nil
                    for k in [Self.idKey, Self.codeKey, Self.readKey] { next.shared[k] = nil }
                    next.shared[JourneyState.approvedElsewhereKey] = id
                    done(.next(next))
                case .denied:
                    done(.failure(reason: "the approval request was denied on another device", kind: .denied))
                case .pending where request.isExpired(nowMs: nowMs):
                    done(.failure(reason: "the approval request expired", kind: .expired))
                case .pending:
                    var again = state
                    again.shared[Self.readKey] = String(nowMs)
                    done(.again(again))
                }
            }
        }
    }
}

extension JourneyState {
    /// The approval request an `ApproveElsewhere` step was approved through (for the log).
    public static let approvedElsewhereKey = "approvedElsewhere"
    /// The approval request an approver journey decides when it succeeds (the approval page).
    public static let decidesApprovalKey = "decidesApproval"
}
