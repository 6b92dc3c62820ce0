import Testing
import TxGateCore

@Suite struct EmailTemplateTests {
    @Test func replacesKnownPlaceholders() {
        #expect(EmailTemplate.render("Hello {user}, sign in: {link}", ["user": "alice", "link": "https://x/?a=1"])
            == "Hello alice, sign in: https://x/?a=1")
        #expect(EmailTemplate.render("{a}{a}{b.c}", ["a": "1", "b.c": "2"]) == "112")
    }

    @Test func leavesUnknownAndMalformedPlaceholdersAsWritten() {
        #expect(EmailTemplate.render("Hi {nmae} {user}", ["user": "bob"]) == "Hi {nmae} bob")
        #expect(EmailTemplate.render("{ user} {} {user {{user}} }", ["user": "bob"]) == "{ user} {} {user {bob} }")
        #expect(EmailTemplate.render("no placeholders", [:]) == "no placeholders")
        #expect(EmailTemplate.render("trailing {", ["x": "y"]) == "trailing {")
    }

    @Test func valuesAreNotExpandedAgain() {
        // A user-chosen value (a name) cannot pull another value (the link) into the message.
        #expect(EmailTemplate.render("Hi {user}", ["user": "{link}", "link": "SECRET"]) == "Hi {link}")
    }

    @Test func nonASCIIIsKept() {
        #expect(EmailTemplate.render("Grüße {name} 🏦", ["name": "Jürgen"]) == "Grüße Jürgen 🏦")
    }

    @Test func aBoundValueCannotRewriteTheDisplay() {
        let bound: [String: JSONValue] = ["/amount": 10, "/payee": "{amount}", "/currency": "EUR"]
        #expect(TransactionBinding.display("Approve {amount} {currency} to {payee}?", bound: bound) == "Approve 10 EUR to {amount}?")
        #expect(TransactionBinding.display("Pay {/amount}", bound: bound) == "Pay 10")
    }

    /// `{field}` is the pointer `/field`, `{/field}` the pointer as written, nested pointers
    /// included; a pointer whose own name starts with a slash never stands in for another.
    @Test func placeholdersNameBoundPointersWithOrWithoutTheirSlash() {
        let bound: [String: JSONValue] = ["/a/b": "nested", "/x": 1, "//x": 2, "/n": .null, "/f": .number(1.5)]
        #expect(TransactionBinding.display("{a/b} {/a/b} {x} {/x} {//x} {n} {f} {y} {/y}", bound: bound)
                == "nested nested 1 1 2 null 1.5 {y} {/y}")
        #expect(TransactionBinding.display(nil, bound: bound) == nil)
    }
}
