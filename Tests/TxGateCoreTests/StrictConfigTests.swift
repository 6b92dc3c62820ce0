import Foundation
import Testing
import TxGateCore

/// Issue 17 item 7: what the configuration file may no longer get away with.
@Suite struct StrictConfigTests {
    func errors(_ json: String, folder: String = "/tmp") -> [String] {
        do {
            _ = try ConfigLoader.decode(Data(json.utf8), folder: folder)
            return []
        } catch {
            return error.errors.map(\.description)
        }
    }

    func syntaxError(_ json: String) -> JSONSyntaxError? {
        if case .failure(let e) = JSONValue.parseReportingErrors(Array(json.utf8)) { return e }
        return nil
    }

    // MARK: the parser's positions

    @Test func parserNamesLineColumnAndWhatWasExpected() throws {
        let e = try #require(syntaxError("{\n  \"a\": 1\n  \"b\": 2\n}"))
        #expect(e.line == 3 && e.column == 3, "\(e)")
        #expect(e.message == "expected ',' or '}' after the value of 'a', found '\"'")
        #expect(e.jsonPath == "")
    }

    @Test func parserNamesThePathOfTheValueHoldingTheProblem() throws {
        let e = try #require(syntaxError(#"{"a": [1, {"b": tru}]}"#))
        #expect(e.jsonPath == "a[1].b", "\(e)")
        #expect(e.line == 1 && e.column == 17, "\(e)")
        #expect(e.message.hasPrefix("expected a value"), "\(e)")
    }

    @Test func parserRefusesTrailingCommasSayingSo() throws {
        let o = try #require(syntaxError("{\"a\": 1,\n}"))
        #expect(o.message == "trailing comma before '}'" && o.line == 2 && o.column == 1, "\(o)")
        let a = try #require(syntaxError(#"{"a": [1, 2, ]}"#))
        #expect(a.message == "trailing comma before ']'" && a.jsonPath == "a" && a.column == 14, "\(a)")
    }

    @Test func parserNamesARepeatedKeyByItsPath() throws {
        let e = try #require(syntaxError("{\"u\": {\"url\": 1,\n   \"url\": 2}}"))
        #expect(e.jsonPath == "u.url", "\(e)")
        #expect(e.line == 2 && e.column == 4, "\(e)")
        #expect(e.message.hasPrefix("duplicate key 'url'"), "\(e)")
    }

    @Test func parserColumnsCountCharactersNotBytes() throws {
        let e = try #require(syntaxError(#"{"é€": x}"#))
        #expect(e.column == 8, "\(e)")
    }

    @Test func parserOtherFailures() throws {
        #expect(syntaxError("")?.message == "expected a value, found end of input")
        #expect(syntaxError(#"{"a": 1} x"#)?.message == "unexpected 'x' after the end of the JSON document")
        #expect(syntaxError(#"{"a": "b"#)?.message.hasPrefix("unterminated string") == true)
        #expect(syntaxError(#"{"a": 01}"#)?.message.contains("'01' is not a JSON number") == true)
        #expect(syntaxError(#"{"a": "\x"}"#)?.message.hasPrefix("an invalid escape") == true)
        #expect(syntaxError(#"{a: 1}"#)?.message == "expected a key in double quotes, found 'a'")
        #expect(syntaxError(#"{"a" 1}"#)?.message == "expected ':' after the key, found '1'")
        #expect(syntaxError("[\"a\nb\"]")?.message.hasPrefix("a line break inside a string") == true)
        #expect(syntaxError(#"{"a": [1, 2}"#)?.message == "expected ',' or ']' after an array element, found '}'")
        #expect(syntaxError(#"{"a": [1]}"#) == nil)
    }

    // MARK: the configuration file

    @Test func aDuplicateKeyAnywhereIsAnErrorNamingItsPath() {
        let top = errors("{\"upstream\": {\"url\": \"http://a\"},\n \"workers\": 2, \"workers\": 3}")
        #expect(top.count == 1 && top[0].hasPrefix("workers: line 2, column 16: duplicate key 'workers'"), "\(top)")
        let deep = errors(#"{"upstream": {"url": "http://a"}, "policies": [{"name": "a", "name": "b", "resources": ["/"], "actions": ["GET"]}]}"#)
        #expect(deep.count == 1 && deep[0].hasPrefix("policies[0].name: line 1, column 62: duplicate key 'name'"), "\(deep)")
    }

    @Test func aTrailingCommaIsAnError() {
        let e = errors("{\"upstream\": {\"url\": \"http://a\"},\n  \"realms\": [\"a\",],\n}")
        #expect(e == ["realms: line 2, column 18: trailing comma before ']'"], "\(e)")
    }

    @Test func aSyntaxErrorNamesLineAndColumn() {
        let e = errors("{\n  \"upstream\": {\"url\": \"http://a\"}\n  \"workers\": 2\n}")
        #expect(e == ["line 3, column 3: expected ',' or '}' after the value of 'upstream', found '\"'"], "\(e)")
    }

    @Test func aByteOrderMarkIsAccepted() {
        #expect(errors("\u{FEFF}{\"upstream\": {\"url\": \"http://a\"}}") == [])
    }

    @Test func theUsersFileIsParsedAsStrictly() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("txgate-strict-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data("[{\"username\": \"a\", \"username\": \"b\"}]".utf8).write(to: dir.appendingPathComponent("users.json"))
        let e = errors(#"{"upstream": {"url": "http://a"}, "usersFile": "users.json"}"#, folder: dir.path)
        #expect(e.count == 1 && e[0].hasPrefix("usersFile[0].username: '\(dir.path)/users.json': line 1, column 20: duplicate key"), "\(e)")
    }

    static let journeys = #""journeys": {"Login": [{"type": "UsernamePassword"}], "T": [{"type": "TOTP"}]}"#

    func policy(_ name: String, _ transaction: String? = nil) -> String {
        #"{"name": "\#(name)", "resources": ["/\#(name)"], "actions": ["POST"]"# + (transaction.map { #", "transaction": \#($0)"# } ?? "") + "}"
    }

    @Test func policyNamesAreUnique() {
        let e = errors(#"{"upstream": {"url": "http://a"}, \#(Self.journeys), "policies": [\#(policy("a")), \#(policy("b")), \#(policy("a"))]}"#)
        #expect(e == ["policies[2].name: duplicate policy name 'a' (also policies[0])"], "\(e)")
    }

    @Test func displayPlaceholdersMustNameBoundFields() {
        let good = policy("t", #"{"journey": "T", "bind": {"body": ["/amount", "/payee/name"]}, "display": "Pay {amount} to {/payee/name}? {payee/name} {x"}"#)
        #expect(errors(#"{"upstream": {"url": "http://a"}, \#(Self.journeys), "policies": [\#(good)]}"#) == [])

        let typo = policy("t", #"{"journey": "T", "bind": {"body": ["/amount", "/payee"]}, "display": "Pay {amount} to {payeee}?"}"#)
        let e = errors(#"{"upstream": {"url": "http://a"}, \#(Self.journeys), "policies": [\#(typo)]}"#)
        #expect(e == ["policies[0].transaction.display: unknown placeholder '{payeee}': not a field of bind.body (/amount, /payee)"], "\(e)")

        let unbound = policy("t", #"{"journey": "T", "display": "Pay {amount}?"}"#)
        let u = errors(#"{"upstream": {"url": "http://a"}, \#(Self.journeys), "policies": [\#(unbound)]}"#)
        #expect(u.count == 1 && u[0].hasPrefix("policies[0].transaction.display: unknown placeholder '{amount}': no field is bound"), "\(u)")
    }

    @Test func boundFieldTypesAreCheckedWhereTheyAreDeclared() {
        func typeErrors(_ bind: String) -> [String] {
            let p = policy("t", #"{"journey": "T", "bind": \#(bind)}"#)
            return errors(#"{"upstream": {"url": "http://a"}, \#(Self.journeys), "policies": [\#(p)]}"#)
        }
        #expect(typeErrors(#"{"body": ["/amount"], "types": {"/amount": {"type": "decimal", "maxScale": 2, "min": "0.01"}}}"#) == [])
        #expect(typeErrors(#"{"body": ["/amount"], "types": {"/payee": {"type": "string"}}}"#)
                == ["policies[0].transaction.bind.types: '/payee' is not a field of bind.body (/amount)"])
        #expect(typeErrors(#"{"body": ["/amount"], "types": {"/amount": {"type": "money"}}}"#)
                == ["policies[0].transaction.bind.types./amount.type: 'money' is not decimal, integer or string (or use oneOf)"])
        #expect(typeErrors(#"{"body": ["/p"], "types": {"/p": {"type": "string", "pattern": "("}}}"#)
                == ["policies[0].transaction.bind.types./p.pattern: '(' is not a valid regular expression"])
        #expect(typeErrors(#"{"body": ["/a"], "types": {"/a": {"type": "decimal", "min": "1,5"}}}"#).count == 1)
        #expect(typeErrors(#"{"body": ["/a"], "types": {"/a": {"type": "integer", "maxLength": 3}}}"#)
                == ["policies[0].transaction.bind.types./a.maxLength: only for a string"])
    }

    @Test func emailPlaceholdersMustBeKnownVariables() {
        func journeyErrors(_ nodes: String) -> [String] {
            errors(#"{"upstream": {"url": "http://a"}, "email": {"outbox": "/tmp/txgate-outbox"}, "journeys": {"Login": [{"type": "UsernameOnly"}, \#(nodes)]}}"#)
        }
        #expect(journeyErrors(#"{"type": "EmailSuspend", "subject": "Hi {username}", "body": "{display}{link} for {username}"}"#) == [])
        #expect(journeyErrors(#"{"type": "EmailOTP", "subject": "Hi {username}", "body": "{display}{code} for {username}"}"#) == [])
        #expect(journeyErrors(#"{"type": "EmailOTP", "body": "Your code: {cod}"}"#)
            == ["journeys.Login[1].body: unknown placeholder '{cod}' (this body may use {code}, {username}, {display})"])
        // A magic-link email has no code; a subject only knows the user's name.
        #expect(journeyErrors(#"{"type": "EmailSuspend", "body": "{code}"}"#)
            == ["journeys.Login[1].body: unknown placeholder '{code}' (this body may use {link}, {username}, {display})"])
        #expect(journeyErrors(#"{"type": "EmailSuspend", "subject": "{link}"}"#)
            == ["journeys.Login[1].subject: unknown placeholder '{link}' (this subject may use {username})"])
    }

    @Test func placeholdersAreFoundAsRenderFindsThem() {
        #expect(EmailTemplate.placeholders(in: "{a} {b.c} {} {d e} {/f/g} {h") == ["a", "b.c", "/f/g"])
        #expect(EmailTemplate.unknownPlaceholders(in: "{a}{b}{b}{c}", known: ["a"]) == ["b", "c"])
    }
}
