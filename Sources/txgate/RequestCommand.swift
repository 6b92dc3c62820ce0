import ArgumentParser
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCore
import TxGateClient

struct Request: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send a request through the gateway; answer a step-up challenge, then retry once with the TxId.",
        discussion: """
            Prints the final response body (with -i the status line and headers first). Exits 0 for 2xx, \
            1 for another HTTP status, 2 for a usage error or a journey that could not be answered, \
            3 when the server could not be reached.
            """)

    @Argument(help: "The URL to request.") var url: String
    @Option(name: .customShort("X"), help: "The method (default GET, or POST with a body).") var method: String?
    @Option(name: [.customShort("d"), .customLong("data")], help: "The request body.") var data: String?
    @Option(name: .customLong("data-file"), help: ArgumentHelp("Read the request body from a file.", valueName: "file"))
    var dataFile: String?
    @Option(name: .customShort("H"), help: ArgumentHelp("A header (repeatable).", valueName: "'Name: value'"))
    var headers: [String] = []
    @Flag(name: .customShort("i"), help: "Print the status line and the headers too.") var include = false
    @Flag(name: .customLong("txid-header"), help: "Name the TxId in X-TxID instead of _txid on the retry.")
    var txidHeader = false
    @OptionGroup var options: ClientOptions

    func validate() throws {
        if data != nil && dataFile != nil { throw ValidationError("use -d or --data-file, not both") }
    }

    func run() throws {
        let command = self
        try runClient { try await command.send() }
    }

    private func send() async throws -> Int32 {
        guard let target = URL(string: url) else { throw CLIFailure.usage("not a URL: \(url)") }
        var configuration = ClientConfiguration(serverURL: try serverURL(url))
        if txidHeader { configuration.txidCarrier = .header }
        let client = TxGateClient(configuration: configuration, tokenStore: FileTokenStore(path: options.sessionFile))
        let response = try await client.send(try request(target), delegate: try CallbackAnswers(options.answers))
        if include {
            // URLSession does not keep the server's reason phrase: the standard one stands in.
            var head = "HTTP/1.1 \(response.status) \(HTTPStatus.reason(response.status))\r\n"
            for h in response.headers { head += "\(h.name): \(h.value)\r\n" }
            FileHandle.standardOutput.write(Data((head + "\r\n").utf8))
        }
        FileHandle.standardOutput.write(response.body)
        // On a terminal, a body without a final newline would run into the shell's prompt;
        // into a pipe or a file it goes as it came, byte for byte.
        if isatty(STDOUT_FILENO) == 1, let last = response.body.last, last != UInt8(ascii: "\n") {
            FileHandle.standardOutput.write(Data("\n".utf8))
        }
        if response.challenge != nil {
            printError("txgate: the retry was challenged again (a new transaction); not retried")
        }
        return (200..<300).contains(response.status) ? 0 : 1
    }

    private func request(_ target: URL) throws -> URLRequest {
        var r = URLRequest(url: target)
        var body: Data?
        if let data { body = Data(data.utf8) }
        if let dataFile {
            guard let d = FileManager.default.contents(atPath: dataFile) else { throw CLIFailure.usage("cannot read \(dataFile)") }
            body = d
        }
        r.httpMethod = method ?? (body == nil ? "GET" : "POST")
        r.httpBody = body
        for h in headers {
            guard let colon = h.firstIndex(of: ":"), colon != h.startIndex else { throw CLIFailure.usage("-H needs 'Name: value', got '\(h)'") }
            r.addValue(h[h.index(after: colon)...].trimmingCharacters(in: .whitespaces), forHTTPHeaderField: String(h[..<colon]))
        }
        if body != nil, r.value(forHTTPHeaderField: "Content-Type") == nil { r.setValue("application/json", forHTTPHeaderField: "Content-Type") }
        return r
    }
}
