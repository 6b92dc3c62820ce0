import HTTPCore
import TxGateCore

/// Cross-origin requests from the origins `cors.allowedOrigins` lists, for `/am/` and the
/// proxied routes: the gateway answers their preflights itself (the backend never sees an
/// `OPTIONS` it did not ask for, and a policy never denies one), and lets the listed origins'
/// scripts read every answer, with `WWW-Authenticate` exposed so that the JS SDK can read the
/// challenge. Present only when origins are listed.
struct CORSPhase: RequestPhase {
    let cors: CORSConfig

    /// What a script on an allowed origin may read beyond the CORS-safelisted headers.
    static let exposed = "WWW-Authenticate, X-Request-Id, Location"

    func handle(_ ctx: RequestContext) -> PhaseStatus {
        guard let origin = ctx.head.headers.first("Origin") else { return .next }
        let isPreflight = ctx.head.method == "OPTIONS" && ctx.head.headers.first("Access-Control-Request-Method") != nil
        let allowed = cors.allows(origin)
        var h = HTTPHeaders()
        h.add("Vary", "Origin")
        if allowed {
            h.add("Access-Control-Allow-Origin", origin)
            if cors.allowCredentials { h.add("Access-Control-Allow-Credentials", "true") }
        }
        guard isPreflight else {
            if allowed { h.add("Access-Control-Expose-Headers", Self.exposed) }
            for f in h { ctx.responseHeaders.add(f.name, f.value) }
            return .next
        }
        guard allowed else {
            return .reply(.json(403, ErrorBody.text(status: 403, message: "the origin '\(origin)' is not in cors.allowedOrigins"),
                                headers: h, details: .corsPreflight))
        }
        let method = ctx.head.headers.first("Access-Control-Request-Method") ?? ""
        h.add("Access-Control-Allow-Methods", method.allSatisfy(Self.isTokenCharacter) && !method.isEmpty ? method : "GET, POST")
        if let asked = ctx.head.headers.first("Access-Control-Request-Headers"),
           asked.allSatisfy({ Self.isTokenCharacter($0) || $0 == "," || $0 == " " }) {
            h.add("Access-Control-Allow-Headers", asked)
        }
        h.add("Access-Control-Max-Age", String(cors.maxAgeS))
        h.add("Cache-Control", "no-store")
        return .reply(LocalReply(status: 204, headers: h, details: .corsPreflight))
    }

    /// RFC 9110 tchar: what a method or header name is made of.
    static func isTokenCharacter(_ c: Character) -> Bool {
        guard let a = c.asciiValue else { return false }
        return (a >= 0x30 && a <= 0x39) || (a >= 0x41 && a <= 0x5A) || (a >= 0x61 && a <= 0x7A) || "!#$%&'*+-.^_`|~".contains(c)
    }
}
