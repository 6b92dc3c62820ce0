import Foundation
import TxGateCore

/// A browser's transactional request, parked while its user approves it (WIRE-EXTENSIONS.md
/// §3b), as the tests send it and read the answers.
public enum ParkedRequestKit {
    /// A browser's request: the session in its cookie, no `x-authenticate-response`.
    public static func browserHeaders(_ token: String, _ extra: [(String, String)] = []) -> [(String, String)] {
        [("Cookie", "iPlanetDirectoryPro=\(token)"), ("Accept", "text/html"), ("Sec-Fetch-Mode", "navigate")] + extra
    }

    public static let jsonType = [("Content-Type", "application/json")]

    /// The TxId and the `goto` of a 303 to the login page; throws on anything else.
    public static func parked(_ r: HTTPResponse) throws -> (txid: String, goto: String) {
        guard r.status == 303, let location = r.header("Location") else { throw HarnessError("not a 303:\n\(r)") }
        let q = Query(target: location)
        guard location.contains("/am/XUI/?"), q["authIndexType"] == "composite_advice",
              let goto = q["goto"], let txid = Query(target: goto)["_txid"], TransactionKit.isUUID(txid),
              q["authIndexValue"] == TransactionKit.adviceXML(txid) else {
            throw HarnessError("the 303 does not send the browser to approve one transaction:\n\(r)")
        }
        return (txid, goto)
    }

    /// The target of `goto` (the path and query, on this gateway).
    public static func target(_ goto: String) -> String {
        let afterScheme = goto.range(of: "://").map { goto[$0.upperBound...] } ?? goto[...]
        return afterScheme.firstIndex(of: "/").map { String(afterScheme[$0...]) } ?? "/"
    }

    /// demo-bank's transfer count: the sequence of one more JSON transfer, approved through the gateway, minus one.
    public static func transfersSoFar(_ g: some GatewayUnderTest, token: String, codes: inout TransactionKit.Codes) throws -> Int {
        let txid = try TransactionKit.approvedTransfer(g, token: token, codes: &codes)
        let r = try TransactionKit.transfer(g, token: token, body: TransactionKit.transferBody, query: "?_txid=\(txid)")
        guard r.status == 201, let n = (try r.json()["sequence"] as? NSNumber)?.intValue else {
            throw HarnessError("the counting transfer was not executed:\n\(r)")
        }
        return n - 1
    }
}
