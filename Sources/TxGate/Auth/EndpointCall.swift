import HTTPCore
import Logging
import TxGateCore

/// An authentication-service endpoint's request: what it reads (the context's properties,
/// `call.requestId`, `call.head`, ...) and its one answer, given now or from a store callback.
/// It holds the resume token of the phase that handed the request over
/// (`AuthEndpointsPhase`), shared by the endpoint's callbacks: the first answer resumes the
/// request; a second is a bug, logged and ignored; an endpoint that lets go of the request
/// without answering fails it (the token's own check), so no client is left waiting.
@dynamicMemberLookup
final class EndpointCall {
    let ctx: RequestContext
    private var resume: PhaseResume?

    init(_ ctx: RequestContext, _ resume: consuming PhaseResume) {
        self.ctx = ctx
        self.resume = Optional(resume)
    }

    subscript<T>(dynamicMember path: KeyPath<RequestContext, T>) -> T { ctx[keyPath: path] }

    /// An answer in AM's form or the provider's: a 4xx is the service's own refusal
    /// (`ReplyDetails.authServiceRefused`), logged as such.
    func respond(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8]) {
        answer(.reply(LocalReply(status: status, headers: headers, body: body, details: Self.details(status))))
    }

    func respondJSON(status: Int, _ json: String, headers: HTTPHeaders = HTTPHeaders()) {
        answer(.reply(.json(status, json, headers: headers, details: Self.details(status))))
    }

    func respondJSON(status: Int, _ json: [UInt8], headers: HTTPHeaders = HTTPHeaders()) {
        answer(.reply(.json(status, json, headers: headers, details: Self.details(status))))
    }

    private static func details(_ status: Int) -> ReplyDetails {
        (400..<500).contains(status) ? .authServiceRefused : .authService
    }

    /// Ends the request with the gateway's own failure (`Pipeline.fail`).
    func fail(_ failure: RequestFailure) {
        answer(.fail(failure))
    }

    private func answer(_ status: PhaseStatus) {
        guard let r = resume.take() else {
            ctx.reportMisuse("an authentication endpoint answered the request twice")
            return
        }
        r.resume(status)
    }
}
