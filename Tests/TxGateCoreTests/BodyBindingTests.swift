import Testing
import Foundation
import TxGateCore

/// Issue 11 items 2, 3 and the missing-field half of 5: what is bound from a body is what the
/// backend will read, in the media type it will read it as, with exact numbers.
@Suite struct BodyBindingTests {
    /// What a user is shown must read as it is: control, format and separator characters are
    /// refused, and so is text over 256 characters; printable ASCII (checked without looking up
    /// each character's category) and other text are shown.
    @Test func undisplayableTextIsRefusedAndPrintableTextShown() {
        for b in 0..<0x80 {
            let text = String(UnicodeScalar(UInt8(b)))
            let refused = TransactionBinding.undisplayable("ab" + text) != nil
            #expect(refused == !(0x20...0x7E).contains(b), "byte \(b)")
        }
        #expect(TransactionBinding.undisplayable(String(repeating: "a", count: 256)) == nil)
        #expect(TransactionBinding.undisplayable(String(repeating: "a", count: 257)) == "is longer than 256 characters")
        #expect(TransactionBinding.undisplayable(String(repeating: "é", count: 256)) == nil)
        #expect(TransactionBinding.undisplayable(String(repeating: "é", count: 257)) == "is longer than 256 characters")
        #expect(TransactionBinding.undisplayable("Bob\u{202E}") == "contains the invisible formatting character U+202E")
        #expect(TransactionBinding.undisplayable("a\u{2028}b") == "contains the line separator U+2028")
        #expect(TransactionBinding.undisplayable("a\u{85}") == "contains the control character U+0085")
        #expect(TransactionBinding.undisplayable("Zoë 😀") == nil)
    }

    static let json = "application/json"
    static let form = "application/x-www-form-urlencoded"
    let rule = TransactionRule(journey: "J", bindFields: ["/amount", "/payee"], display: "Pay {amount} to {payee}?")

    func bind(_ body: String, _ contentType: String?, rule: TransactionRule? = nil) -> TransactionBinding {
        TransactionBinding(realm: "/", resource: "http://gw/transfer", method: "POST", subject: "demo", rule: rule ?? self.rule,
                           body: Array(body.utf8), contentType: contentType)
    }

    func display(_ b: TransactionBinding) -> String? { TransactionBinding.display(rule.display, bound: b.bound) }

    /// The review's attack: approve JSON, retry the same values as a form.
    @Test func anApprovedJSONBodyRetriedAsAFormHasAnotherSeal() {
        let approved = bind(#"{"amount":"100","payee":"Bob"}"#, Self.json)
        #expect(approved.bodyOutcome == .bindable)
        #expect(approved.mediaType == "application/json")
        #expect(display(approved) == "Pay 100 to Bob?")
        // The same values, read from a form: bound alike, sealed apart.
        let asForm = bind("amount=100&payee=Bob", Self.form)
        #expect(asForm.bodyOutcome == .bindable)
        #expect(asForm.bound == approved.bound)
        #expect(asForm.seal != approved.seal)
        // A polyglot whose JSON says 100/Bob but whose form says 9999/Mallory: read as the form it
        // claims to be, it binds (and shows) what a form-parsing backend would execute.
        let polyglot = #"{"amount":"100","payee":"Bob","x":"&amount=9999&payee=Mallory&"}"#
        let mallory = bind(polyglot, Self.form)
        #expect(mallory.bodyOutcome == .bindable)
        #expect(display(mallory) == "Pay 9999 to Mallory?")
        #expect(mallory.seal != approved.seal)
        // Sent as JSON, the same bytes bind what a JSON backend reads.
        #expect(display(bind(polyglot, Self.json)) == "Pay 100 to Bob?")
    }

    @Test func theMediaTypeIsPartOfTheSeal() {
        let body = #"{"amount":"100","payee":"Bob"}"#
        let plain = bind(body, Self.json)
        #expect(bind(body, "application/json; charset=utf-8").seal == plain.seal)
        #expect(bind(body, "Application/JSON;charset=\"UTF-8\"").seal == plain.seal)
        let patch = bind(body, "application/merge-patch+json")
        #expect(patch.bodyOutcome == .bindable)
        #expect(patch.mediaType == "application/merge-patch+json")
        #expect(patch.seal != plain.seal)
    }

    @Test func otherMissingOrInvalidMediaTypesAre415() {
        for ct in [nil, "text/plain", "multipart/form-data; boundary=x", "application/xml", "application/json, text/plain",
                   "application/json; charset=iso-8859-1", "application/x-www-form-urlencoded; charset=windows-1252", "json"] {
            let b = bind(#"{"amount":"100","payee":"Bob"}"#, ct)
            guard case .unsupportedMediaType(let message) = b.bodyOutcome else {
                Issue.record("\(ct ?? "nil"): \(b.bodyOutcome)"); continue
            }
            #expect(b.bodyOutcome.status == 415)
            #expect(!message.isEmpty)
            #expect(b.bodyOutcome != .bindable)
        }
        #expect(bind("", nil).bodyOutcome.message.contains("it has none"))
        #expect(bind("{}", "text/plain").bodyOutcome.message.contains("'text/plain'"))
    }

    @Test func formsBindOneSegmentPointersAsStrings() throws {
        let b = bind("payee=J%C3%A9r%C3%B4me+B&amount=12.50&memo=a&memo=b", Self.form)
        #expect(b.bodyOutcome == .bindable)
        #expect(b.bound == ["/amount": "12.50", "/payee": "Jérôme B"])
        #expect(b.mediaType == "application/x-www-form-urlencoded")
        // `~1` names a field with a `/`.
        let slashed = TransactionRule(journey: "J", bindFields: ["/a~1b"])
        #expect(bind("a%2Fb=1", Self.form, rule: slashed).bound == ["/a~1b": "1"])
        // A deeper pointer only a JSON body can carry.
        let deep = TransactionRule(journey: "J", bindFields: ["/payee/iban"])
        #expect(bind("payee=x", Self.form, rule: deep).bodyOutcome.status == 415)
        #expect(bind(#"{"payee":{"iban":"DE00"}}"#, Self.json, rule: deep).bound == ["/payee/iban": "DE00"])
    }

    @Test func aRepeatedBoundFormFieldIsAmbiguous() {
        let b = bind("amount=100&payee=Bob&amount=9999", Self.form)
        #expect(b.bodyOutcome == .ambiguous("the form field 'amount' appears more than once"))
        #expect(b.bodyOutcome.status == 400)
        #expect(b.bodyDigest == nil)
        // Spelled differently, still the same name once decoded.
        #expect(bind("amount=100&payee=Bob&am%6Funt=9999", Self.form).bodyOutcome.status == 400)
    }

    @Test func malformedBodiesAreNotBindable() {
        #expect(bind("amount=100%&payee=Bob", Self.form).bodyOutcome.status == 400)
        #expect(bind("amount=%E9&payee=Bob", Self.form).bodyOutcome.status == 400)
        if case .malformed = bind("amount=%zz&payee=Bob", Self.form).bodyOutcome {} else { Issue.record("not malformed") }
        if case .malformed = bind(#"{"amount":1,"amount":2,"payee":"B"}"#, Self.json).bodyOutcome {} else { Issue.record("not malformed") }
        if case .malformed = bind("amount=1&payee=B", Self.json).bodyOutcome {} else { Issue.record("not malformed") }
    }

    @Test func aMissingBoundFieldIsRefusedByName() {
        #expect(bind(#"{"amount":"100"}"#, Self.json).bodyOutcome == .missingField("/payee", readAs: Self.json))
        #expect(bind("amount=100", Self.form).bodyOutcome == .missingField("/payee", readAs: Self.form))
        #expect(bind("", Self.json).bodyOutcome == .missingField("/amount", readAs: Self.json), "an empty body binds nothing, not nulls")
        #expect(bind("", Self.form).bodyOutcome == .missingField("/amount", readAs: Self.form))
        // Issue 24 item 1: the message says how the body was read (a JSON body sent without its
        // Content-Type reads as a form, and its fields are "not in the body").
        #expect(BodyBindingOutcome.missingField("/amount", readAs: Self.form).message.contains("read as \(Self.form)"))
        let missing = bind("{}", Self.json).bodyOutcome
        #expect(missing.status == 400)
        #expect(missing.message.contains("'/amount'"))
        // An explicit null was sent, so it is what the user approves.
        #expect(bind(#"{"amount":null,"payee":"Bob"}"#, Self.json).bound == ["/amount": .null, "/payee": "Bob"])
    }

    @Test func aRuleThatBindsNothingFromTheBodyIgnoresTheMediaType() {
        let none = TransactionRule(journey: "J")
        for ct in [nil, "text/plain", "garbage", Self.json] {
            let b = bind("anything %zz", ct, rule: none)
            #expect(b.bodyOutcome == .bindable)
            #expect(b.bodyDigest == nil)
            #expect(b.mediaType == nil)
        }
        #expect(bind("x", nil, rule: none).seal == bind("y", "text/plain", rule: none).seal)
    }

    @Test func aWholeBodyBindsItsBytesAndItsMediaType() {
        let whole = TransactionRule(journey: "J", bindWholeBody: true)
        let body = #"{"amount":"100"}"#
        let json = bind(body, Self.json, rule: whole)
        #expect(json.bodyOutcome == .bindable)
        #expect(json.bodyDigest != nil)
        #expect(json.seal != bind(body, Self.form, rule: whole).seal)
        #expect(json.seal != bind(body, nil, rule: whole).seal)
        #expect(json.seal != bind(body + " ", Self.json, rule: whole).seal)
        #expect(bind(body, "text/plain; b=1; a=2", rule: whole).seal == bind(body, "text/plain;a=2;b=\"1\"", rule: whole).seal)
        #expect(bind(body, "text/plain; a=2", rule: whole).seal != bind(body, "text/plain; a=3", rule: whole).seal)
        #expect(bind(body, nil, rule: whole).bodyOutcome == .bindable, "any media type, or none, for the exact bytes")
        #expect(bind(body, "not a type", rule: whole).bodyOutcome.status == 415)
    }

    @Test func boundNumbersCompareByTheirExactValue() {
        let amount = TransactionRule(journey: "J", bindFields: ["/amount"], display: "Pay {amount}?")
        func seal(_ n: String) -> String { bind(#"{"amount":"# + n + "}", Self.json, rule: amount).seal }
        #expect(seal("9007199254740992") != seal("9007199254740993"))
        #expect(seal("100") != seal("100.000000000000001"))
        #expect(seal("100") == seal("1e2"))
        #expect(seal("100") == seal("100.0"))
        #expect(seal("100") == seal("1.00E+2"))
        #expect(seal("100") != seal("\"100\""), "a string is not a number")
        let b = bind(#"{"amount":100.000000000000001}"#, Self.json, rule: amount)
        #expect(TransactionBinding.display(amount.display, bound: b.bound) == "Pay 100.000000000000001?")
        let big = bind(#"{"amount":9007199254740993}"#, Self.json, rule: amount)
        #expect(TransactionBinding.display(amount.display, bound: big.bound) == "Pay 9007199254740993?")
        let sci = bind(#"{"amount":1.5E3}"#, Self.json, rule: amount)
        #expect(TransactionBinding.display(amount.display, bound: sci.bound) == "Pay 1500?")
    }

    /// A record keeps the exact number through the store.
    @Test func recordsKeepExactNumbers() throws {
        let b = bind(#"{"amount":9007199254740993,"payee":"Bob"}"#, Self.json)
        let tx = TransactionRecord(txid: "t", state: .completed, realm: b.realm, resource: b.resource, method: b.method,
                                   subject: b.subject, journey: "J", bodyDigest: b.bodyDigest, bound: b.bound,
                                   display: TransactionBinding.display(rule.display, bound: b.bound), expires: 100)
        let back = try #require(TransactionRecord.decode(tx.encoded))
        #expect(back == tx)
        #expect(back.bound["/amount"]?.canonical == "9007199254740993")
        #expect(back.display == "Pay 9007199254740993 to Bob?")
        #expect(back.mismatch(b, now: 50) == nil)
        #expect(back.mismatch(bind(#"{"amount":9007199254740992,"payee":"Bob"}"#, Self.json), now: 50)?.message == "the bound body fields differ")
        #expect(back.mismatch(bind("amount=9007199254740993&payee=Bob", Self.form), now: 50)?.message == "the bound body fields differ")
    }
}

/// The JSON-only initializer the current request layer still calls keeps its old meaning
/// (until it passes the Content-Type), so nothing changes under it before the rewiring.
@Suite struct TransitionalBindingTests {
    let rule = TransactionRule(journey: "J", bindFields: ["/amount", "/payee"])

    func bind(_ body: String) -> TransactionBinding {
        TransactionBinding(realm: "/", resource: "r", method: "POST", subject: "demo", rule: rule, body: Array(body.utf8))
    }

    @Test func readsJSONAndBindsAbsentFieldsAsNull() {
        #expect(bind("").bound == ["/amount": .null, "/payee": .null])
        #expect(bind("").bodyOutcome == .bindable)
        #expect(bind(#"{"amount":1}"#).bound == ["/amount": 1, "/payee": .null])
        #expect(bind("amount=1&payee=B").bodyOutcome != .bindable)
        #expect(bind(#"{"amount":9007199254740992}"#).seal != bind(#"{"amount":9007199254740993}"#).seal, "numbers are exact")
    }
}

/// What the user is shown (issue 11 item 5): bound values that would not read as they are.
@Suite struct DisplaySafetyTests {
    static let rule = TransactionRule(journey: "J", bindFields: ["/payee"], display: "Pay {payee}?")

    func outcome(_ payee: String) -> BodyBindingOutcome {
        let body = Array(JSONValue.object(["payee": .string(payee)]).canonical.utf8)
        return TransactionBinding(realm: "/", resource: "r", method: "POST", subject: "s", rule: Self.rule, body: body,
                                  contentType: "application/json").bodyOutcome
    }

    @Test func plainNamesBind() {
        for ok in ["Bob", "Mallory Ltd", "Zoë Müller", "李小龙", "O'Brien & Sons"] {
            #expect(outcome(ok) == .bindable, "\(ok)")
        }
    }

    @Test func invisibleAndControlCharactersAreRefused() {
        for bad in ["\u{202E}boB", "Bob\u{200B}", "Bob\r\nYour one-time code is 000000", "Bob\u{0}", "A\u{2028}B",
                    "\u{2066}Bob\u{2069}", "Bob\u{FEFF}", "Bob\u{7F}", "Bob\u{85}"] {
            guard case .malformed(let why) = outcome(bad) else { Issue.record("\(bad.unicodeScalars.map { $0.value }) bound"); continue }
            #expect(why.contains("/payee"), "\(why)")
        }
        guard case .malformed(let why) = outcome(String(repeating: "x", count: 257)) else { Issue.record("long bound"); return }
        #expect(why.contains("longer than 256"))
        #expect(outcome(String(repeating: "x", count: 256)) == .bindable)
    }
}

extension BodyBindingTests {
    /// Issue 24 item 10: typed bound fields are checked before any approval is asked for.
    @Test func typedFieldsAreCheckedBeforeAnyApproval() {
        let rule = TransactionRule(journey: "Confirm", bindFields: ["/amount", "/currency", "/payee", "/n"], fieldTypes: [
            "/amount": .decimal(maxScale: 2, min: Decimal(string: "0.01"), max: Decimal(10_000)),
            "/currency": .oneOf(["EUR", "USD"]),
            "/payee": .string(maxLength: 10, pattern: "[A-Za-z ]+"),
            "/n": .integer(min: 1, max: 5),
        ])
        func outcome(_ body: String, _ type: String = Self.json) -> BodyBindingOutcome {
            TransactionBinding(realm: "/", resource: "r", method: "POST", subject: "demo", rule: rule, body: Array(body.utf8),
                               contentType: type).bodyOutcome
        }
        #expect(outcome(#"{"amount":12.5,"currency":"EUR","payee":"Bob","n":2}"#) == .bindable)
        #expect(outcome("amount=12.50&currency=USD&payee=Bob+Smith&n=5", Self.form) == .bindable)
        #expect(outcome("amount=12,50&currency=EUR&payee=Bob&n=1", Self.form)
                == .invalidField("/amount", rule: "a decimal number like 12.50 (digits, one '.' at most)", value: "12,50"))
        #expect(outcome(#"{"amount":12.505,"currency":"EUR","payee":"Bob","n":1}"#).message
                == "'/amount' must be a decimal number with at most 2 digits after the point, not '12.505'")
        #expect(outcome(#"{"amount":0,"currency":"EUR","payee":"Bob","n":1}"#).status == 400)
        #expect(outcome(#"{"amount":10001,"currency":"EUR","payee":"Bob","n":1}"#).status == 400)
        #expect(outcome(#"{"amount":"1e3","currency":"EUR","payee":"Bob","n":1}"#).status == 400)
        #expect(outcome(#"{"amount":1,"currency":"GBP","payee":"Bob","n":1}"#).message.contains("one of EUR, USD"))
        #expect(outcome(#"{"amount":1,"currency":"EUR","payee":"Bob1","n":1}"#).status == 400)
        #expect(outcome(#"{"amount":1,"currency":"EUR","payee":"Bob Smithson","n":1}"#).message.contains("at most 10 characters"))
        #expect(outcome(#"{"amount":1,"currency":"EUR","payee":7,"n":1}"#).message.contains("a string"))
        #expect(outcome(#"{"amount":1,"currency":"EUR","payee":"Bob","n":2.5}"#).message.contains("a whole number"))
        #expect(outcome(#"{"amount":1,"currency":"EUR","payee":"Bob","n":6}"#).message.contains("at most 5"))
    }
}
