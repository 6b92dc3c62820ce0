import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TxGateWire

/// Answers the journey a step-up asks for: the app shows each step's callbacks (what a
/// transaction approves is in ``JourneyStep/displayedMessages``) and fills them in.
///
/// ``TxGateClient/send(_:delegate:)`` and ``TxGateClient/runJourney(for:delegate:)`` call it once
/// per step of the journey, until the journey ends.
public protocol StepUpDelegate: Sendable {
    /// Fills in a step's callbacks and returns it.
    ///
    /// - Parameters:
    ///   - step: The step the server sent: show its ``JourneyStep/displayedMessages``, and answer
    ///     each callback that ``JourneyCallback/needsInput``.
    ///   - challenge: The gateway's challenge the journey answers: its `advices` say what is asked
    ///     for (a transaction's TxId, a login tree), its `form` how it came (SSOADVICE, RFC 9470,
    ///     a redirect, a JSON body).
    /// - Returns: The step with its inputs set.
    /// - Throws: Any error, to give up: it reaches the caller of `send` or `runJourney`, and the
    ///   request is not retried.
    func answer(_ step: JourneyStep, for challenge: StepUpChallenge) async throws -> JourneyStep
}

extension TxGateClient {
    /// Sends a request to the API behind the gateway, stepping up when the gateway asks for it.
    ///
    /// The request goes out with the session token (on the configured origin only) and asks for
    /// the 401 form of a challenge (``ClientConfiguration/requestHeaderChallenges``). If the
    /// answer is a step-up in any form (401 SSOADVICE, RFC 9470's Bearer
    /// `insufficient_user_authentication`, a 307/303 to the login page, the JSON body's
    /// advices), `delegate` answers the journey it asks for, and the request is sent once more,
    /// with the approved TxId for a transaction (``ClientConfiguration/txidCarrier``): the
    /// gateway lets that retry through once. A challenge on the retry is returned in
    /// ``ClientResponse/challenge``, never looped on.
    ///
    /// The journey always runs on the configured server: a challenge's `am_uri` is not followed.
    ///
    /// - Parameters:
    ///   - request: The API call, as it should reach the API (method, URL, headers, body).
    ///   - delegate: Answers the journey's steps; nil to get the first challenge back unanswered.
    /// - Returns: The API's answer (to the retry, when there was a step-up), or the challenge
    ///   unanswered when `delegate` is nil.
    /// - Throws: ``TxGateClientError/journeyFailed(_:)`` when the journey failed (a wrong code,
    ///   a declined transaction), ``TxGateClientError/journeySuspended(message:)`` when it waits
    ///   for an emailed link, ``TxGateClientError/transport(_:)`` when the server cannot be
    ///   reached, and what the delegate threw.
    public func send(_ request: URLRequest, delegate: StepUpDelegate?) async throws -> ClientResponse {
        let first = try await transport.perform(try prepared(request, txid: nil))
        guard let challenge = first.challenge else { return first }
        guard let delegate else { return first }
        try await runJourney(for: challenge, delegate: delegate)
        return try await transport.perform(try prepared(request, txid: challenge.txid))
    }

    /// Runs the journey a challenge asks for, to its end, without sending the request again.
    ///
    /// For a transaction or another advice it runs the composite-advice journey; for a login
    /// challenge, the tree the advice names, else ``ClientConfiguration/loginJourney``. Use it
    /// with a challenge ``send(_:delegate:)`` returned (with no delegate, or on the retry).
    ///
    /// - Parameters:
    ///   - challenge: The gateway's challenge.
    ///   - delegate: Answers each step.
    /// - Throws: As ``complete(_:answering:)`` does, and what the delegate threw.
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

    /// Answers each step until the journey ends.
    ///
    /// ```swift
    /// let session = try await client.complete(try await client.start(journey: "Login")) { step in
    ///     var step = step
    ///     for i in step.callbacks.indices where step.callbacks[i].needsInput {
    ///         step.callbacks[i].answer(step.callbacks[i].kind == .password ? password : user)
    ///     }
    ///     return step
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - outcome: What the journey's first call answered (``start(journey:)``,
    ///     ``start(advice:)`` or ``resume(resumeURI:)``).
    ///   - answer: Fills in a step's callbacks and returns it.
    /// - Returns: The journey's success; its token is already in the ``TokenStore``.
    /// - Throws: ``TxGateClientError/journeyFailed(_:)`` with the server's ``AuthFailure``
    ///   (``AuthFailure/isTimeout`` for a journey that timed out),
    ///   ``TxGateClientError/journeySuspended(message:)`` when it waits for an emailed link,
    ///   and what `answer` threw.
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
