// The README's "Client" example, compiled with the tests so that the documentation keeps
// matching the API (it is not run: it needs a gateway).
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TxGateClient

// --- README example begins
/// Shows what is approved, then answers each callback (here from a table; an app asks the user).
struct Approver: StepUpDelegate {
    let answers: [String: String]
    func answer(_ step: JourneyStep, for challenge: StepUpChallenge) async throws -> JourneyStep {
        for message in step.displayedMessages { print(message) }   // "Approve 100 EUR to Bob?"
        var step = step
        for i in step.callbacks.indices where step.callbacks[i].needsInput {
            guard let value = answers[step.callbacks[i].label] else { throw TxGateClientError.challengeNotAnswered(step.callbacks[i].label) }
            step.callbacks[i].answer(value)
        }
        return step
    }
}

func transfer(code: String) async throws -> Int {
    let client = TxGateClient(configuration: ClientConfiguration(serverURL: URL(string: "https://gw.example.com")!),
                              tokenStore: FileTokenStore(path: FileTokenStore.defaultPath))
    var request = URLRequest(url: URL(string: "https://gw.example.com/transfer")!)
    request.httpMethod = "POST"
    request.setValue("application/json", forHTTPHeaderField: "Content-Type")
    request.httpBody = Data(#"{"amount":100,"currency":"EUR","payee":"Bob"}"#.utf8)
    let response = try await client.send(request, delegate: Approver(answers: ["One Time Password": code]))
    return response.status   // 201: approved and executed, once
}
// --- README example ends
