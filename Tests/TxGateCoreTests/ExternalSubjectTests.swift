import Testing
import TxGateCore

/// Issue 23 item 2: a subject is (issuer, subject). An external token never names a local user
/// or another issuer's subject, nor gets their attributes, unless the issuer maps to local users.
@Suite struct ExternalSubjectTests {
    static let users: [String: UserRecord] = [
        "root": UserRecord(username: "root", passwordHash: "x", attributes: ["role": "admin"]),
        "demo": UserRecord(username: "demo", passwordHash: "x", attributes: ["role": "customer"]),
    ]
    static func issuer(_ iss: String, mapTo: ExternalIssuer.Mapping = .own, claim: String = "sub") -> ExternalIssuer {
        ExternalIssuer(issuer: iss, jwksUri: HTTPURL(parsing: "https://idp.example/jwks")!, audience: "api", mapTo: mapTo, usernameClaim: claim)
    }

    @Test func anExternalSubIsQualifiedByItsIssuerAndGetsNoLocalAttributes() throws {
        let a = Self.issuer("https://a.example")
        let named = try #require(a.subject(claims: ["sub": "root", "role": "admin", "n": 3], localUsers: Self.users))
        #expect(named.uid == "root@https://a.example")
        #expect(named.attributes == ["https://a.example#sub": "root", "https://a.example#role": "admin"])
        // A policy naming the local root, or the local attribute role=admin, does not name it.
        let subject = Subject(uid: named.uid, realm: "/", journeys: [], attributes: named.attributes, token: "t")
        #expect(!subject.isNamed(by: "root"))
        #expect(!subject.isNamed(by: "role=admin"))
        #expect(subject.isNamed(by: "root@https://a.example"))
        #expect(subject.isNamed(by: "https://a.example#role=admin"))
        // Another issuer's same sub is another subject.
        let b = try #require(Self.issuer("https://b.example").subject(claims: ["sub": "root"], localUsers: Self.users))
        #expect(b.uid != named.uid)
        #expect(Self.issuer("https://a.example").subject(claims: ["sub": ""], localUsers: Self.users) == nil)
    }

    @Test func aLocalUserNamedLikeAnExternalSubjectIsNeither() {
        var users = Self.users
        users["eve@https://a.example"] = UserRecord(username: "eve@https://a.example", passwordHash: "x")
        #expect(Self.issuer("https://a.example").subject(claims: ["sub": "eve"], localUsers: users) == nil)
    }

    @Test func mappingToLocalUsersIsExplicit() throws {
        let mapped = Self.issuer("https://corp.example", mapTo: .localUsers, claim: "preferred_username")
        let named = try #require(mapped.subject(claims: ["sub": "x1", "preferred_username": "demo"], localUsers: Self.users))
        #expect(named.uid == "demo")
        #expect(named.attributes == ["role": "customer"])
        #expect(mapped.subject(claims: ["sub": "x1", "preferred_username": "nobody"], localUsers: Self.users) == nil)
        #expect(mapped.subject(claims: ["sub": "demo"], localUsers: Self.users) == nil, "the claim named, not sub")
    }
}
