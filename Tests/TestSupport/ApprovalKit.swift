import Foundation

/// Approve elsewhere (issue 27) as clients and the approval page speak it: the waiting
/// client's PollingWaitCallback, submitted again unchanged as the JS SDK does; the approval
/// page's status and deny; the approver journey through composite_advice.
public enum ApprovalKit: JourneyClient {
    public typealias Kit = TransactionKit
    public static let approvalsPath = "/am/json/realms/root/approvals"

    /// TransactionKit's configuration with /transfer approved elsewhere (`RemoteApproval`), the
    /// approver passing TOTP (`ApproverTOTP`), emails to the outbox `var/outbox`.
    /// `approver`: ApproverTOTP, or ApproverConfirm (a Yes/No step, for races that must not
    /// depend on single-use codes).
    public static func config(ttlS: Int = 120, pollMs: Int = 1000, channels: [String] = ["email"], approver: String = "ApproverTOTP",
                              _ extra: [String: Any] = [:]) -> [String: Any] {
        let policies: [[String: Any]] = [
            ["name": "health", "resources": ["/health"], "actions": ["GET"], "subjects": "anyone"],
            ["name": "transfer", "resources": ["/transfer"], "actions": ["POST"], "subjects": "authenticated",
             "transaction": ["journey": "RemoteApproval", "ttlS": 600, "bind": ["body": ["/amount", "/currency", "/payee"]],
                             "display": "Approve {amount} {currency} to {payee}?"]],
        ]
        var base = Kit.config()
        base["policies"] = policies
        return deepMerge(deepMerge(base, [
            "journeys": [
                "RemoteApproval": [["type": "ApproveElsewhere", "channels": channels, "ttlS": ttlS, "pollMs": pollMs,
                                    "approverJourney": approver, "message": "Approve on your phone. Code: {code}"]],
                "ApproverTOTP": [["type": "TOTP", "prompt": "One Time Password"]],
                "ApproverConfirm": [["type": "Confirm"]],
            ],
            "email": ["outbox": "var/outbox"],
        ]), extra)
    }

    public static func adviceXML(_ id: String) -> String {
        #"<Advices><AttributeValuePair><Attribute name="ApprovalRequestConditionAdvice"/><Value>\#(id)</Value></AttributeValuePair></Advices>"#
    }

    /// The waiting client: a transfer, challenged, and the journey its advice asks for started.
    /// Returns the TxId and the first step (a PollingWaitCallback).
    public static func waitingTransfer(_ g: some GatewayUnderTest, token: String) throws -> (txid: String, step: [String: Any]) {
        let txid = try Kit.challengeTxid(try Kit.transfer(g, token: token, body: Kit.transferBody))
        let start = try Kit.startComposite(g, txid: txid, session: .header(token))
        guard start.status == 200 else { throw HarnessError("the approve-elsewhere journey did not start:\n\(start)") }
        return (txid, try start.json())
    }

    /// The step's PollingWaitCallback: (waitTime in ms, message); throws if it is not one.
    public static func pollingWait(_ step: [String: Any]) throws -> (waitMs: Int, message: String) {
        let cbs = step["callbacks"] as? [[String: Any]] ?? []
        guard cbs.count == 1, cbs[0]["type"] as? String == "PollingWaitCallback", cbs[0]["input"] == nil,
              let wait = output(cbs.first, "waitTime") as? String, let ms = Int(wait),
              let message = output(cbs.first, "message") as? String else {
            throw HarnessError("not a PollingWaitCallback step: \(step)")
        }
        return (ms, message)
    }

    /// The binding code a message names (its last two digits).
    public static func code(in message: String) -> String? {
        let digits = message.filter(\.isNumber)
        return digits.count >= 2 ? String(digits.suffix(2)) : nil
    }

    /// Submits the step unchanged, as the SDKs do after waitTime.
    public static func poll(_ g: some GatewayUnderTest, _ step: [String: Any], token: String) throws -> HTTPResponse {
        try post(g, authPath, step, headers: [("iPlanetDirectoryPro", token)])
    }

    /// The approval request's id as the step's authId carries it (signed, not encrypted).
    public static func requestId(inStep step: [String: Any]) -> String? {
        guard let authId = step["authId"] as? String else { return nil }
        let parts = authId.split(separator: ".")
        guard parts.count == 3 else { return nil }
        var b64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while b64.count % 4 != 0 { b64 += "=" }
        guard let data = Data(base64Encoded: b64), let claims = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let st = claims["st"] as? [String: Any], let shared = st["shared"] as? [String: Any] else { return nil }
        return shared["approvalId"] as? String
    }

    /// The approval request's id in an email or a webhook payload's link.
    public static func requestId(inLink text: String) -> String? {
        guard let r = text.range(of: "/am/XUI/approval?id=") else { return nil }
        let id = String(text[r.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        return id.count == 22 ? id : nil
    }

    public static func status(_ g: some GatewayUnderTest, id: String, token: String?) throws -> HTTPResponse {
        try post(g, approvalsPath + "?_action=status", ["id": id], headers: token.map { [("iPlanetDirectoryPro", $0)] } ?? [])
    }

    public static func deny(_ g: some GatewayUnderTest, id: String, token: String?) throws -> HTTPResponse {
        try post(g, approvalsPath + "?_action=deny", ["id": id], headers: token.map { [("iPlanetDirectoryPro", $0)] } ?? [])
    }

    /// Starts the approver journey of request `id` (the approval page's Approve).
    public static func startApprover(_ g: some GatewayUnderTest, id: String, token: String?) throws -> HTTPResponse {
        try post(g, authPath + "?authIndexType=composite_advice&authIndexValue=\(Kit.percentEncode(adviceXML(id)))", nil,
                 headers: token.map { [("iPlanetDirectoryPro", $0)] } ?? [])
    }

    /// Approves request `id` on the approver's device: the approver journey with `code`.
    /// Returns the answer to the code (200 with the session's tokenId when it counted).
    public static func approve(_ g: some GatewayUnderTest, id: String, token: String, code: String) throws -> HTTPResponse {
        let start = try startApprover(g, id: id, token: token)
        guard start.status == 200 else { return start }
        return try post(g, authPath, answer(try start.json(), [code]), headers: [("iPlanetDirectoryPro", token)])
    }

    /// `detail.reason` of a failure answer.
    public static func reason(_ r: HTTPResponse) -> String? {
        ((try? r.json())?["detail"] as? [String: Any])?["reason"] as? String
    }

    public static func state(_ r: HTTPResponse) -> String? { (try? r.json())?["state"] as? String }
}
