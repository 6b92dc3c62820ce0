import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TxGateClient

/// Answers a journey's callbacks for the command line: from `--answer KEY=VALUE` (KEY is the
/// callback's prompt or its type), else from the terminal when there is one (passwords and
/// codes without echo); a callback with neither is an error that names it, never a wait.
struct CallbackAnswers: StepUpDelegate {
    let answers: [(key: String, value: String)]
    let interactive: Bool

    init(_ pairs: [String], interactive: Bool = isatty(0) == 1) throws {
        answers = try pairs.map { pair in
            guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex else {
                throw CLIFailure.usage("--answer needs KEY=VALUE, got '\(pair)'")
            }
            return (String(pair[..<eq]), String(pair[pair.index(after: eq)...]))
        }
        self.interactive = interactive
    }

    /// What was last printed of a polling step: its message goes to stderr once, not each poll.
    private let shown = ShownMessages()

    func answer(_ step: JourneyStep, for challenge: StepUpChallenge) async throws -> JourneyStep {
        if let waitMs = step.pollingWaitMs {
            // Approve elsewhere: the binding code and message once, then the same step again
            // after waitTime, as the SDKs do.
            for c in step.callbacks where c.kind == .pollingWait {
                if let m = c.message, shown.first(m) { printError(m) }
            }
            try await Task.sleep(nanoseconds: UInt64(max(0, min(waitMs, 60_000))) * 1_000_000)
            return step
        }
        return try fill(step)
    }

    /// The messages of the step (what a transaction approves) go to stderr first, then each
    /// callback that needs input is answered.
    func fill(_ step: JourneyStep) throws -> JourneyStep {
        var step = step
        // A passkey needs a browser: take the code the step offers instead, or say where to go.
        if step.isPasskeyStep {
            guard let i = step.callbacks.firstIndex(where: { $0.kind == .confirmation && $0.options.first?.contains("code") == true }) else {
                throw CLIFailure.journey("this step asks for a passkey, which the command line cannot make: approve it in a browser")
            }
            printError("this step asks for a passkey, which needs a browser: choosing \"\(step.callbacks[i].options[0])\"")
            step.callbacks[i].answer("0")
            return step
        }
        for message in step.displayedMessages { printError(message) }
        for i in step.callbacks.indices where step.callbacks[i].needsInput {
            let c = step.callbacks[i]
            if let value = lookup(c) {
                step.callbacks[i].answer(value)
            } else if interactive, let value = ask(c) {
                step.callbacks[i].answer(value)
            } else {
                throw CLIFailure.journey("no answer for \(c.type) '\(c.label)': pass --answer '\(c.prompt ?? c.type)=VALUE'")
            }
        }
        return step
    }

    private func lookup(_ c: JourneyCallback) -> String? {
        if let p = c.prompt, let a = answers.first(where: { $0.key == p }) { return a.value }
        return answers.first { $0.key == c.type }?.value
    }

    private func ask(_ c: JourneyCallback) -> String? {
        var label = c.label
        if !c.options.isEmpty {
            label += " [" + c.options.enumerated().map { "\($0.offset): \($0.element)" }.joined(separator: ", ") + "]"
        }
        let secret = c.kind == .password || c.kind == .validatedCreatePassword
        return readTerminalLine(prompt: label + ": ", echo: !secret)
    }
}

/// Messages already printed (a polling step repeats its own).
final class ShownMessages: @unchecked Sendable {
    private var seen = Set<String>()
    private let lock = NSLock()
    func first(_ message: String) -> Bool { lock.withLock { seen.insert(message).inserted } }
}

/// A line from the terminal (stdin), the prompt on stderr; without echo for secrets.
func readTerminalLine(prompt: String, echo: Bool) -> String? {
    var saved = termios()
    let quiet = !echo && isatty(0) == 1
    // Echo goes off before the prompt shows: what is typed (or pasted) as soon as it appears
    // must not be echoed.
    if quiet {
        tcgetattr(0, &saved)
        var t = saved
        t.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(0, TCSANOW, &t)
    }
    FileHandle.standardError.write(Data(prompt.utf8))
    let line = readLine(strippingNewline: true)
    if quiet {
        tcsetattr(0, TCSANOW, &saved)
        FileHandle.standardError.write(Data("\n".utf8))
    }
    return line
}

/// A client command's failure and its exit code: 2 usage or journey, 3 server unreachable.
enum CLIFailure: Error, CustomStringConvertible {
    case usage(String)
    case journey(String)
    case unreachable(String)

    var description: String {
        switch self {
        case .usage(let s), .journey(let s), .unreachable(let s): return s
        }
    }

    var exitCode: Int32 {
        switch self {
        case .usage, .journey: return 2
        case .unreachable: return 3
        }
    }
}
