import ArgumentParser
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TxGateClient

/// What the client commands share: answers, the session file.
struct ClientOptions: ParsableArguments {
    @Option(name: .customLong("answer"), help: ArgumentHelp("Answer a callback, keyed by its prompt or its type (repeatable).", valueName: "key=value"))
    var answers: [String] = []
    @Option(name: .customLong("session-file"), help: ArgumentHelp("Where the session token is kept (0600).", valueName: "file"))
    var sessionFile: String = FileTokenStore.defaultPath

    func client(server: URL, interceptors: [RequestInterceptor] = []) -> TxGateClient {
        TxGateClient(configuration: ClientConfiguration(serverURL: server), tokenStore: FileTokenStore(path: sessionFile),
                     interceptors: interceptors)
    }
}

/// The scheme, host and port of a URL given on the command line.
func serverURL(_ text: String) throws -> URL {
    guard let c = URLComponents(string: text), let scheme = c.scheme?.lowercased(), ["http", "https"].contains(scheme),
          let host = c.host, !host.isEmpty else {
        throw CLIFailure.usage("not an http(s) URL: \(text)")
    }
    var origin = URLComponents()
    origin.scheme = scheme
    origin.host = host
    origin.port = c.port
    return origin.url!
}

/// Runs an async client command from a synchronous `run()`, mapping failures to exit codes
/// (2 usage or journey, 3 server unreachable).
func runClient(_ body: @escaping @Sendable () async throws -> Int32) throws {
    final class Box: @unchecked Sendable { var result: Result<Int32, Error> = .success(0) }
    let box = Box()
    let done = DispatchSemaphore(value: 0)
    Task {
        do { box.result = .success(try await body()) } catch { box.result = .failure(error) }
        done.signal()
    }
    done.wait()
    switch box.result {
    case .success(let code): if code != 0 { throw ExitCode(code) }
    case .failure(let e as CLIFailure):
        printError("txgate: \(e)")
        throw ExitCode(e.exitCode)
    case .failure(TxGateClientError.transport(let why)):
        printError("txgate: \(why)")
        throw ExitCode(3)
    case .failure(let e):
        printError("txgate: \(e)")
        throw ExitCode(2)
    }
}

struct Login: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Log in to a gateway by running a journey; the session is kept in the session file.",
        discussion: "A journey that suspends (a magic link) prints its message and exits 0: finish it with `txgate resume`.")

    @Argument(help: "The gateway's URL (scheme, host and port are used).") var url: String
    @Option(help: "The journey (tree) to run (default: the gateway's Login).") var journey: String = "Login"
    @OptionGroup var options: ClientOptions

    func run() throws {
        let (url, journey, options) = (url, journey, options)
        try runClient {
            let client = options.client(server: try serverURL(url))
            let answers = try CallbackAnswers(options.answers)
            do {
                _ = try await client.complete(try await client.start(journey: journey)) { try answers.fill($0) }
            } catch TxGateClientError.journeySuspended(let message) {
                printError(message)
                printError("txgate: the journey is suspended: run `txgate resume <link>` with the emailed link")
                return 0
            }
            printError("logged in to \(try serverURL(url).absoluteString) (session in \(options.sessionFile))")
            return 0
        }
    }
}

struct Resume: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Finish a suspended journey with the link from its email (docs/WIRE.md §5).",
        discussion: "The link must name the configured server (--server, else the session file's) and carry a suspendedId; anything else is refused before a request is sent.")

    @Argument(help: "The resume URI from the email.") var resumeURI: String
    @Option(help: "The gateway's URL (default: the server of the session file).") var server: String?
    @OptionGroup var options: ClientOptions

    func run() throws {
        let (resumeURI, server, options) = (resumeURI, server, options)
        try runClient {
            let serverText = try server ?? FileTokenStore(path: options.sessionFile).load()?.server
            guard let serverText else { throw CLIFailure.usage("no server to check the link against: pass --server URL") }
            let client = options.client(server: try serverURL(serverText))
            let answers = try CallbackAnswers(options.answers)
            _ = try await client.complete(try await client.resume(resumeURI: resumeURI)) { try answers.fill($0) }
            printError("logged in (session in \(options.sessionFile))")
            return 0
        }
    }
}

struct Logout: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "End the session at the gateway and remove the session file.")

    @Argument(help: "The gateway's URL.") var url: String
    @Option(name: .customLong("session-file"), help: ArgumentHelp("The session file.", valueName: "file"))
    var sessionFile: String = FileTokenStore.defaultPath

    func run() throws {
        let (url, sessionFile) = (url, sessionFile)
        try runClient {
            let client = TxGateClient(configuration: ClientConfiguration(serverURL: try serverURL(url)),
                                      tokenStore: FileTokenStore(path: sessionFile))
            let known = try await client.logout()
            printError(known ? "logged out" : "no session at the gateway (the session file is removed)")
            return 0
        }
    }
}
