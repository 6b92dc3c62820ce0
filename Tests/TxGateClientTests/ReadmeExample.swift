// The client example of docs/CLIENT.md ("The Swift library"; it was the README's, hence the
// names), compiled with the tests so that it keeps matching the API. ReadmeExampleTests checks
// that the code between the two markers is that page's block (the ```swift block whose info
// string names this file), character for character. It is compiled, not run (it needs a
// gateway): ClientLibraryTests makes the same calls against a live one.

// --- README example begins
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking   // URLRequest and URLSession are here on Linux
#endif
import TxGateClient

/// Fills in each callback that needs an answer from `answers`, keyed by its prompt ("User Name",
/// "Password", "One Time Password"); an app asks the user instead. Shows what a step displays first.
func answered(_ step: JourneyStep, from answers: [String: String]) throws -> JourneyStep {
    for message in step.displayedMessages { print(message) }   // "Approve 100 EUR to Bob?"
    var step = step
    for i in step.callbacks.indices where step.callbacks[i].needsInput {
        guard let value = answers[step.callbacks[i].label] else { throw TxGateClientError.challengeNotAnswered(step.callbacks[i].label) }
        step.callbacks[i].answer(value)
    }
    return step
}

/// Answers the journey a step-up asks for: here, a transaction's approval.
struct Approver: StepUpDelegate {
    let answers: [String: String]
    func answer(_ step: JourneyStep, for challenge: StepUpChallenge) async throws -> JourneyStep {
        try answered(step, from: answers)
    }
}

/// Signs in, then sends a transfer that needs its own approval: the first answer is a 401 with
/// the transaction's advice, `Approver` answers its journey, and the request goes once more with
/// the TxId. Returns the final status: 201 when it was approved and executed, once.
func transfer(gateway: URL, password: String, code: String) async throws -> Int {
    let client = TxGateClient(configuration: ClientConfiguration(serverURL: gateway),
                              tokenStore: FileTokenStore(path: FileTokenStore.defaultPath))
    // The Login journey asks for a user name and a password; its session goes into the token store.
    _ = try await client.complete(try await client.start(journey: "Login")) {
        try answered($0, from: ["User Name": "demo", "Password": password])
    }
    var request = URLRequest(url: gateway.appendingPathComponent("transfer"))
    request.httpMethod = "POST"
    request.setValue("application/json", forHTTPHeaderField: "Content-Type")
    request.httpBody = Data(#"{"amount":100,"currency":"EUR","payee":"Bob"}"#.utf8)
    let response = try await client.send(request, delegate: Approver(answers: ["One Time Password": code]))
    return response.status
}
// --- README example ends
