import Foundation
import Testing
import TxGateWire

/// The client reads back every step-up form the gateway writes (WIRE.md §3a, §3b, §7, the JSON
/// body), on the exact text the gateway's encoders produce and on AM's and IG's documented samples.
@Suite struct ChallengeParsingTests {
    static let txid = "58669e19-425a-4333-91d8-70995af06927"

    /// WIRE.md §3a's sample, byte for byte (IG's documented header).
    static let wireSample = #"SSOADVICE realm="/",advices="eyJUcmFuc2FjdGlvbkNvbmRpdGlvbkFkdmljZSI6WyI1ODY2OWUxOS00MjVhLTQzMzMtOTFkOC03MDk5NWFmMDY5MjciXX0=",am_uri="https://gw.example.com/am/""#

    @Test func theDocumentedSSOAdviceHeader() throws {
        let c = try #require(StepUpChallenge.detect(status: 401, wwwAuthenticate: [Self.wireSample], location: nil, body: []))
        #expect(c.form == .ssoAdvice)
        #expect(c.txid == Self.txid)
        #expect(c.advices == Advices([(Advices.transaction, [Self.txid])]))
        #expect(c.amURI == "https://gw.example.com/am/")
        #expect(c.realm == "/")
    }

    @Test func theHeaderTheGatewayWritesReadsBack() throws {
        let advices = Advices([(Advices.authenticateToService, ["/:Login"])])
        let header = Challenge.ssoAdviceHeader(realm: "/", advices: advices, amURI: "http://127.0.0.1:8080/am/")
        let c = try #require(StepUpChallenge.ssoAdvice(header))
        #expect(c.advices == advices)
        #expect(c.serviceTree == "Login")
        #expect(c.txid == nil)
        // Only on a 401: the SDKs look for the header there and nowhere else.
        #expect(StepUpChallenge.detect(status: 403, wwwAuthenticate: [header], location: nil, body: []) == nil)
    }

    @Test func realignedAdvicesAndURLSafeBase64ReadBack() throws {
        // A value whose plain base64 has '+' or '/': the gateway realigns it with whitespace.
        let advices = Advices([(Advices.transaction, ["??>>~~"])])
        let header = Challenge.ssoAdviceHeader(realm: "/", advices: advices, amURI: "https://gw/am/")
        #expect(!header.contains("+") && !header.split(separator: ",")[1].contains("/"))
        #expect(StepUpChallenge.ssoAdvice(header)?.advices == advices)
        let urlSafe = #"SSOADVICE realm="/",advices="eyJUcmFuc2FjdGlvbkNvbmRpdGlvbkFkdmljZSI6WyI_Pz4-fn4iXX0",am_uri="x""#
        #expect(StepUpChallenge.ssoAdvice(urlSafe)?.txid == "??>>~~")
    }

    @Test func rfc9470BearerWithTxidAndWithAcrOnly() throws {
        let header = Challenge.bearerStepUp(acr: "ConfirmTransaction", txid: Self.txid)
        let c = try #require(StepUpChallenge.detect(status: 401, wwwAuthenticate: [header], location: nil, body: []))
        #expect(c.form == .bearer && c.txid == Self.txid)
        // RFC 9470's own example: no txid, the acr names the tree.
        let rfc = #"Bearer error="insufficient_user_authentication", error_description="A different authentication level is required", acr_values="myACR""#
        #expect(StepUpChallenge.bearer(rfc)?.serviceTree == "myACR")
        // An invalid token is not a step-up.
        #expect(StepUpChallenge.bearer(#"Bearer error="invalid_token", error_description="The access token is not valid""#) == nil)
        // Two challenges joined into one value (`challenges.bearer: both`): SSOADVICE wins.
        let joined = header + ", " + Self.wireSample
        let both = try #require(StepUpChallenge.detect(status: 401, wwwAuthenticate: [joined], location: nil, body: []))
        #expect(both.form == .ssoAdvice && both.txid == Self.txid)
    }

    @Test func theBrowserRedirectWithURLEncodedOrBase64URLXML() throws {
        let advices = Advices([(Advices.transaction, [Self.txid])])
        let goto = Challenge.addingQuery("https://gw.example.com/transfer", "_txid", Self.txid)
        let location = Challenge.loginRedirect(loginPage: "https://gw.example.com/am/XUI/", goto: goto, realm: "/", advices: advices)
        for status in [307, 303] {
            let c = try #require(StepUpChallenge.detect(status: status, wwwAuthenticate: [], location: location, body: []))
            #expect(c.form == .redirect && c.txid == Self.txid && c.amURI == "https://gw.example.com/am/")
        }
        let b64 = Data(advices.xml.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        let other = "https://am.example.com/openam/XUI/?realm=/&authIndexType=composite_advice&authIndexValue=\(b64)&goto=x"
        #expect(StepUpChallenge.redirect(other)?.advices == advices)
        // A login page without advice: a login challenge; any other redirect is not a challenge.
        let login = try #require(StepUpChallenge.redirect("http://127.0.0.1:1/am/XUI/?goto=http%3A%2F%2F127.0.0.1%3A1%2Faccounts"))
        #expect(login.advices.isEmpty)
        #expect(StepUpChallenge.detect(status: 307, wwwAuthenticate: [], location: "https://elsewhere/page?x=1", body: []) == nil)
    }

    @Test func theJSONBodyAlone() throws {
        let body = Array(#"{"code":401,"reason":"Unauthorized","message":"this request needs its own approval","advices":{"TransactionConditionAdvice":["\#(Self.txid)"]},"am_uri":"http://gw/am/"}"#.utf8)
        let c = try #require(StepUpChallenge.detect(status: 401, wwwAuthenticate: [], location: nil, body: body))
        #expect(c.form == .body && c.txid == Self.txid && c.amURI == "http://gw/am/")
        #expect(StepUpChallenge.detect(status: 401, wwwAuthenticate: [], location: nil, body: Array(#"{"code":401}"#.utf8)) == nil)
        #expect(StepUpChallenge.detect(status: 200, wwwAuthenticate: [], location: nil, body: body) == nil)
    }

    @Test func amsPolicyAdvicesObject() throws {
        // WIRE.md §1: the decision's advices, as AM's policy evaluation returns them.
        let json = try #require(JSONValue.parse(Array(#"{"AuthLevelConditionAdvice":["3"],"AuthenticateToServiceConditionAdvice":["/:ConfirmPassword"]}"#.utf8)))
        let a = try #require(StepUpChallenge.advices(json: json))
        #expect(a[Advices.authLevel] == ["3"])
        #expect(a[Advices.authenticateToService] == ["/:ConfirmPassword"])
    }

    @Test func authParamsQuotedCommasAndEscapes() {
        let p = StepUpChallenge.authParams(#"realm="a,b", error=x ,txid="q\"t""#)
        #expect(p["realm"] == "a,b")
        #expect(p["error"] == "x")
        #expect(p["txid"] == #"q"t"#)
    }
}
