import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TxGateWire

/// Runs the journey a step-up asks for: the app shows each step's callbacks (what a
/// transaction approves is in `step.displayedMessages`) and fills them in.
public protocol StepUpDelegate: Sendable {
    /// Fills in `step`'s callbacks and returns it; throw to give up (the error reaches the caller of `send`).
    func answer(_ step: JourneyStep, for challenge: StepUpChallenge) async throws -> JourneyStep
}

extension TxGateClient {
    /// Sends `request` with the session token (on the configured origin only). If the answer
    /// is a step-up in any form (401 SSOADVICE, RFC 9470 Bearer, a 307/303 to the login page,
    /// the JSON body's advices), `delegate` runs the journey it asks for, and the request is
    /// sent once more, with the TxId for a transaction. A second step-up is returned to the
    /// caller (in `ClientResponse.challenge`), never looped on.
    public func send(_ request: URLRequest, delegate: StepUpDelegate?) async throws -> ClientResponse {
        let first = try await transport.perform(try prepared(request, txid: nil))
        guard let challenge = first.challenge else { return first }
        guard let delegate else { return first }
        try await runJourney(for: challenge, delegate: delegate)
        return try await transport.perform(try prepared(request, txid: challenge.txid))
    }

    /// Runs the journey for `challenge` to its end with `delegate` answering each step: the
    /// composite-advice journey for a transaction or other advice, the named tree for a login.
    public func runJourney(for challenge: StepUpChallenge, delegate: StepUpDelegate) async throws {
        let outcome: JourneyOutcome
        if challenge.txid == nil, challenge.advices.entries.count <= 1,
           challenge.advices.isEmpty || challenge.serviceTree != nil {
            outcome = try await start(journey: challenge.serviceTree ?? configuration.loginJourney)
        } else {
            outcome = try await start(advice: challenge.advices)
        }
        _ = try await complete(outcome) { try await delegate.answer($0, for: challenge) }
    }

    /// Answers each step with `answer` until the journey ends: its success, or
    /// `.journeyFailed` (AM's code, reason, message; `isTimeout` for errorCode 110), or
    /// `.journeySuspended` when it waits for an emailed link.
    public func complete(_ outcome: JourneyOutcome,
                         answering answer: (JourneyStep) async throws -> JourneyStep) async throws -> JourneySuccess {
        var outcome = outcome
        while true {
            switch outcome {
            case .success(let s): return s
            case .failure(let f): throw TxGateClientError.journeyFailed(f)
            case .step(let step):
                if step.isSuspended { throw TxGateClientError.journeySuspended(message: step.displayedMessages.joined(separator: " ")) }
                outcome = try await next(try await answer(step))
            }
        }
    }

    /// The request as sent: the session header on the own origin, the header challenge form
    /// asked for, and the TxId on the retry.
    func prepared(_ request: URLRequest, txid: String?) throws -> URLRequest {
        var r = request
        guard let url = r.url else { throw TxGateClientError.unexpectedResponse(status: 0, "a request without a URL") }
        if configuration.isOwnOrigin(url) {
            if let token = try currentToken() { r.setValue(token, forHTTPHeaderField: configuration.sessionHeader) }
            if configuration.requestHeaderChallenges { r.setValue("header", forHTTPHeaderField: "x-authenticate-response") }
        }
        if let txid {
            switch configuration.txidCarrier {
            case .query: r.addQueryItem("_txid", txid)
            case .header: r.setValue(txid, forHTTPHeaderField: "X-TxID")
            }
        }
        return r
    }
}
