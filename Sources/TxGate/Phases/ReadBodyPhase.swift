import EventHTTP
import TxGateCore

/// Waits for the request body, only where something needs it: the authentication endpoints,
/// a transaction decision that binds the body (with a subject; without one the login
/// challenge goes out at once), and the upstream. Everything else is decided while the body
/// is still arriving, so a request that will be challenged or denied never has its body
/// buffered (nor its `100 Continue` sent).
final class ReadBodyPhase: RequestPhase {
    enum Need {
        /// Before the authentication endpoints: `/am` paths.
        case forAuthEndpoints
        /// Before the decision: when the transaction policy that applies binds the body.
        case forBoundTransaction
        /// Before the proxy.
        case always
    }
    private let need: Need

    init(_ need: Need) { self.need = need }

    var appliesTo: PathFamily { need == .forAuthEndpoints ? .auth : .all }

    func handle(_ ctx: RequestContext) -> PhaseStatus {
        // A body that has all arrived (no body, or one that came with the head) costs nothing here.
        guard !ctx.exchange.bodyComplete, needsBody(ctx) else { return .next }
        return ctx.suspend { resume in
            var resume = Optional(resume)
            ctx.exchange.whenBodyComplete { complete in
                // Not complete: the server answered the body's error (or the client left).
                if complete { resume.take()?.next() } else { resume.take()?.ended(.bodyFailed) }
            }
        }
    }

    private func needsBody(_ ctx: RequestContext) -> Bool {
        switch need {
        case .always:
            return true
        case .forAuthEndpoints:
            return ctx.path == "/am" || ctx.path.hasASCIIPrefix("/am/")
        case .forBoundTransaction:
            guard ctx.subject != nil,
                  case .transaction(let rule)? = ctx.policy?.requirement
            else { return false }
            return rule.bindWholeBody || !rule.bindFields.isEmpty || !rule.when.isEmpty
        }
    }
}
