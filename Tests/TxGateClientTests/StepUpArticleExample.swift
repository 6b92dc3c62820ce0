// The code of the DocC article "Approving a transfer with a one-time code"
// (Sources/TxGateClient/TxGateClient.docc/ApprovingATransfer.md), compiled with the tests so that
// the article keeps matching the API. StepUpArticleTests checks that every Swift block of the
// article is here, verbatim. It is not run: it needs a gateway (IntegrationTests'
// ClientLibraryTests runs the same calls against one).
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TxGateClient

func makeClient() -> TxGateClient {
    let configuration = ClientConfiguration(serverURL: URL(string: "https://gw.example.com")!)
    return TxGateClient(configuration: configuration,
                        tokenStore: FileTokenStore(path: FileTokenStore.defaultPath))
}

func logIn(_ client: TxGateClient, user: String, password: String) async throws {
    let first = try await client.start(journey: "Login")
    let session = try await client.complete(first) { step in
        var step = step
        for i in step.callbacks.indices where step.callbacks[i].needsInput {
            switch step.callbacks[i].kind {
            case .name: step.callbacks[i].answer(user)
            case .password: step.callbacks[i].answer(password)
            default: throw TxGateClientError.challengeNotAnswered(step.callbacks[i].label)
            }
        }
        return step
    }
    print("signed in to realm \(session.realm ?? "/")")
}

func transferRequest() -> URLRequest {
    var request = URLRequest(url: URL(string: "https://gw.example.com/transfer")!)
    request.httpMethod = "POST"
    request.setValue("application/json", forHTTPHeaderField: "Content-Type")
    request.httpBody = Data(#"{"amount":100,"currency":"EUR","payee":"Bob"}"#.utf8)
    return request
}

func lookAtTheChallenge(_ client: TxGateClient) async throws {
    let response = try await client.send(transferRequest(), delegate: nil)
    if let challenge = response.challenge {
        print(response.status, challenge.form, challenge.txid ?? "no transaction")
        // 401 ssoAdvice 3f0c2a4e-8b1d-4c6e-9a57-2d8e1f4b6c90
    }
}

/// Shows what is approved and asks the person for the code from their authenticator app.
struct CodeApprover: StepUpDelegate {
    /// How the app asks: what the step shows, and the field's label, in; the code out.
    let askForCode: @Sendable (_ shown: [String], _ label: String) async throws -> String

    func answer(_ step: JourneyStep, for challenge: StepUpChallenge) async throws -> JourneyStep {
        var step = step
        for i in step.callbacks.indices where step.callbacks[i].needsInput {
            guard step.callbacks[i].kind == .password else {
                throw TxGateClientError.challengeNotAnswered(step.callbacks[i].label)
            }
            // step.displayedMessages: ["Approve 100 EUR to Bob?"]; the label: "One Time Password"
            let code = try await askForCode(step.displayedMessages, step.callbacks[i].label)
            step.callbacks[i].answer(code)
        }
        return step
    }
}

func sendTransfer(_ client: TxGateClient, approver: CodeApprover) async throws -> ClientResponse {
    let response = try await client.send(transferRequest(), delegate: approver)
    // 201: approved, sent once with ?_txid=..., and executed by the bank.
    return response
}

func transferAndSay(_ client: TxGateClient, approver: CodeApprover) async -> String {
    do {
        let response = try await sendTransfer(client, approver: approver)
        if response.challenge != nil { return "the retry was challenged again: send it anew" }
        return response.status == 201 ? "sent" : "refused: \(response.status) \(response.bodyText)"
    } catch TxGateClientError.journeyFailed(let failure) {
        // failureReason: "wrong_code", "code_used", "locked_out" or "declined"
        return failure.explanation ?? failure.message
    } catch {
        return "\(error)"
    }
}

func logOut(_ client: TxGateClient) async throws {
    let known = try await client.logout()
    print(known ? "signed out" : "there was no session to end")
}
