import ArgumentParser
import EventHTTP
import Foundation
import HTTPCore
import TxGateCore
import TxGateCrypto

/// A small banking API to put behind the gateway, and a test origin: /echo shows exactly
/// what reached the backend.
@main
struct DemoBank: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo-bank",
        abstract: "A demo banking backend (and test origin) for TxGate.",
        discussion: """
            GET / (home page: balance and a transfer form), GET /receipt?seq=N, GET /health, GET /accounts, \
            POST /transfer (JSON {amount, currency, payee}, or the home page's form; a repeated Idempotency-Key \
            gets the first answer again and executes nothing), ANY /echo (what arrived), \
            GET /slow?ms=N, GET /stream?chunks=N&size=B (chunked), GET /hop (hop-by-hop response headers), \
            GET /conn (which client connection this is).
            """)

    @Option(help: ArgumentHelp("Listen on HOST:PORT.", valueName: "host:port"))
    var listen: String = "127.0.0.1:9000"

    @Option(help: ArgumentHelp("Refuse transfers without a valid Transaction Token (Txn-Token) signed by a key of this JWK Set "
                               + "and approving exactly the body.", valueName: "url"))
    var txnTokenJwks: String?

    @Option(help: ArgumentHelp("The aud a Transaction Token must name.", valueName: "audience"))
    var txnTokenAudience: String = "demo-bank"

    func run() throws {
        guard let hp = HostPort(parsing: listen) else {
            throw ValidationError("--listen: '\(listen)' is not HOST:PORT")
        }
        var jwks: HTTPURL?
        if let u = txnTokenJwks {
            guard let url = HTTPURL(parsing: u), !url.isTLS else { throw ValidationError("--txn-token-jwks: '\(u)' is not an http:// URL") }
            jwks = url
        }
        let loop = EventLoop()
        let bank = Bank(loop: loop)
        bank.txnTokens = jwks.map { TxnTokenCheck(loop: loop, url: $0, audience: txnTokenAudience) }
        let server: HTTPServer
        do {
            let address = try SocketAddress(host: hp.host, port: hp.port)
            try probeListenAddress(address)  // SO_REUSEPORT would share the port with another demo-bank
            server = try HTTPServer(
                loop: loop, address: address, tls: nil,
                limits: ServerLimits(maxBodyBytes: 64 << 20, maxConnectionsPerClient: 0),
                errorBody: { status, message in (ErrorBody.contentType, ErrorBody.json(status: status, message: message)) },
                // The bank reads every body: it answers once the body is complete.
                handler: { exchange in exchange.whenBodyComplete { complete in if complete { bank.handle(exchange) } } })
        } catch {
            FileHandle.standardError.write("demo-bank: \(error)\n".data(using: .utf8)!)
            throw ExitCode(1)
        }
        FileHandle.standardError.write("demo-bank listening on \(hp.host):\(server.boundPort)\n".data(using: .utf8)!)
        loop.run()
    }
}

final class Bank {
    let loop: EventLoop
    private var timers: [ObjectIdentifier: LoopTimer] = [:]
    /// Executed transfers, in order: a transfer's sequence number is its place here (from 1).
    private var transfers: [TransferOrder] = []
    static let openingBalance = Decimal(string: "4820.75")!
    /// With `--txn-token-jwks`: what a transfer must carry.
    var txnTokens: TxnTokenCheck?
    /// The first answer to each `Idempotency-Key` (draft-ietf-httpapi-idempotency-key-header),
    /// with a digest of the request it answered; the oldest are forgotten past `maxKeys`.
    private var answers: [String: IdempotentAnswer] = [:]
    private var answerOrder: [String] = []
    static let maxKeys = 10_000
    /// The home page's forms already executed (their hidden `formToken`), and as which
    /// transfer: the same form sent again (back, then send; a page restored from the cache)
    /// executes nothing and says so. The oldest are forgotten past `maxKeys`.
    private var formTokens: [String: Int] = [:]
    private var formTokenOrder: [String] = []

    init(loop: EventLoop) { self.loop = loop }

    func handle(_ ex: ServerExchange) {
        let path = ex.head.path
        let query = Self.query(ex.head.target)
        switch (ex.head.method, path) {
        case ("GET", "/health"):
            json(ex, 200, ["status": "ok"])
        case ("GET", "/"), ("GET", "/transfer"):
            page(ex, 200, BankPages.home(balance: balance, transfers: transfers.count, formToken: UUID().uuidString.lowercased()))
        case ("GET", "/receipt"):
            receipt(ex, query)
        case ("GET", "/accounts"):
            json(ex, 200, ["accounts": [
                ["id": "acc-001", "name": "Everyday", "currency": "EUR", "balance": NSDecimalNumber(decimal: balance)],
                ["id": "acc-002", "name": "Savings", "currency": "EUR", "balance": 10250.00],
            ]])
        case ("POST", "/transfer"):
            guard let txnTokens else { transfer(ex); return }
            txnTokens.check(ex, body: ex.body.bytes) { [self] refusal in
                if let (status, message) = refusal { error(ex, status, message) } else { transfer(ex) }
            }
        case (_, "/echo"):
            echo(ex)
        case ("GET", "/slow"):
            let ms = Int(query["ms"] ?? "") ?? 1000
            var key: ObjectIdentifier?
            let t = LoopTimer(loop: loop) { [weak self] in
                self?.json(ex, 200, ["slept": ms])
                if let key { self?.timers.removeValue(forKey: key) }
            }
            key = ObjectIdentifier(t)
            timers[key!] = t
            t.schedule(afterMs: ms)
        case ("GET", "/stream"):
            let chunks = Int(query["chunks"] ?? "") ?? 10
            let size = Int(query["size"] ?? "") ?? 100
            var h = HTTPHeaders()
            h.add("Content-Type", "text/plain")
            ex.startResponse(status: 200, headers: h, framing: .stream)
            let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: size)
            for _ in 0..<chunks { ex.writeBody(chunk) }
            ex.finish()
        case ("GET", "/hop"):
            var h = HTTPHeaders()
            h.add("Content-Type", "application/json")
            h.add("Connection", "X-Backend-Private")
            h.add("X-Backend-Private", "secret")
            h.add("Keep-Alive", "timeout=5")
            h.add("Proxy-Connection", "keep-alive")
            h.add("Upgrade", "h2c")
            h.add("X-Backend-Public", "visible")
            ex.respond(status: 200, headers: h, body: Array(#"{"hop":true}"#.utf8))
        case ("GET", "/conn"):
            json(ex, 200, ["connection": ex.connectionId])
        default:
            error(ex, 404, "no demo-bank resource \(ex.head.method) \(path)")
        }
    }

    /// A transfer, at most once per `Idempotency-Key` (the gateway sends one with the TxId of
    /// the approval a request spends): the same key with the same request gets the first
    /// answer again (`Idempotent-Replayed: true`) and executes nothing; with another request, 422.
    private func transfer(_ ex: ServerExchange) {
        guard let raw = ex.head.headers.first("Idempotency-Key") else { execute(ex); return }
        guard let key = Self.idempotencyKey(raw) else {
            error(ex, 400, "Idempotency-Key: expected a quoted string (draft-ietf-httpapi-idempotency-key-header)")
            return
        }
        let digest = Crypto.sha256(Array((ex.head.headers.first("Content-Type") ?? "").utf8) + [0] + ex.body.bytes)
        if let first = answers[key] {
            guard first.digest == digest else {
                error(ex, 422, "this Idempotency-Key was used for another request")
                return
            }
            var h = first.headers
            h.add("Idempotent-Replayed", "true")
            ex.respond(status: first.status, headers: h, body: first.body)
            return
        }
        let answer = execute(ex)
        guard answer.status < 400 else { return }  // nothing executed: nothing to repeat
        answers[key] = IdempotentAnswer(digest: digest, status: answer.status, headers: answer.headers, body: answer.body)
        answerOrder.append(key)
        if answerOrder.count > Self.maxKeys { answers.removeValue(forKey: answerOrder.removeFirst()) }
    }

    /// The key of an `Idempotency-Key` field: a structured-field string (`"..."`, printable
    /// ASCII, `\"` and `\\` escapes); a bare token is taken as it is.
    static func idempotencyKey(_ field: String) -> String? {
        let v = field.trimmingCharacters(in: .whitespaces)
        guard v.first == "\"" else {
            return !v.isEmpty && v.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F && $0 != "\"" }) ? v : nil
        }
        var out = ""
        var escaped = false
        for (i, c) in v.unicodeScalars.enumerated() where i > 0 {
            guard c.value >= 0x20 && c.value < 0x7F else { return nil }
            if escaped {
                guard c == "\"" || c == "\\" else { return nil }
                out.unicodeScalars.append(c)
                escaped = false
            } else if c == "\\" {
                escaped = true
            } else if c == "\"" {
                return i == v.unicodeScalars.count - 1 && !out.isEmpty ? out : nil
            } else {
                out.unicodeScalars.append(c)
            }
        }
        return nil
    }

    /// A transfer from a JSON body (201 with the executed transfer) or from the home page's
    /// form (303 to its receipt, so that reloading the receipt never sends the form again).
    /// Returns the answer it sent.
    @discardableResult
    private func execute(_ ex: ServerExchange) -> (status: Int, headers: HTTPHeaders, body: [UInt8]) {
        let isForm = ex.head.headers.first("Content-Type").flatMap(MediaType.init)?.isForm ?? false
        let parsed = isForm ? TransferOrder.fromForm(ex.body.bytes) : TransferOrder.fromJSON(ex.body.bytes)
        let order: TransferOrder
        switch parsed {
        case .failure(let why):
            return isForm ? page(ex, 400, BankPages.refused(why.message)) : error(ex, 400, why.message)
        case .success(let o):
            order = o
        }
        let formToken = isForm ? FormBody.parse(ex.body.bytes)?.first(where: { $0.name == "formToken" })?.value : nil
        if let formToken, let first = formTokens[formToken] {
            return page(ex, 409, BankPages.alreadySent(sequence: first))
        }
        transfers.append(order)
        let sequence = transfers.count
        if let formToken {
            formTokens[formToken] = sequence
            formTokenOrder.append(formToken)
            if formTokenOrder.count > Self.maxKeys { formTokens.removeValue(forKey: formTokenOrder.removeFirst()) }
        }
        if isForm {
            var h = HTTPHeaders()
            h.add("Location", "/receipt?seq=\(sequence)")
            ex.respond(status: 303, headers: h, body: [])
            return (303, h, [])
        }
        return json(ex, 201, ["id": "tx-" + UUID().uuidString.lowercased(), "status": "executed",
                              "amount": order.amountNumber, "currency": order.currency, "payee": order.payee,
                              "sequence": sequence])
    }

    private func receipt(_ ex: ServerExchange, _ query: [String: String]) {
        guard let n = Int(query["seq"] ?? ""), n >= 1, n <= transfers.count else {
            page(ex, 404, BankPages.refused("There is no transfer with this number."))
            return
        }
        page(ex, 200, BankPages.receipt(transfers[n - 1], sequence: n, balance: balance))
    }

    /// The everyday account's balance after the transfers made (in EUR, the demo's only currency).
    private var balance: Decimal {
        transfers.reduce(Self.openingBalance) { $0 - ($1.currency == "EUR" ? $1.amount : 0) }
    }

    @discardableResult
    private func page(_ ex: ServerExchange, _ status: Int, _ page: BankPages.Page) -> (status: Int, headers: HTTPHeaders, body: [UInt8]) {
        let html = BankPages.layout(page, user: ex.head.headers.first("X-TxGate-User"))
        var h = HTTPHeaders()
        h.add("Content-Type", "text/html; charset=utf-8")
        h.add("Cache-Control", "no-store")
        h.add("Content-Security-Policy", BankPages.csp)
        ex.respond(status: status, headers: h, body: Array(html.utf8))
        return (status, h, Array(html.utf8))
    }

    private func echo(_ ex: ServerExchange) {
        let body = ex.body.bytes
        json(ex, 200, [
            "method": ex.head.method,
            "uri": ex.head.target,
            "version": ex.head.versionMinor == 1 ? "HTTP/1.1" : "HTTP/1.0",
            "headers": ex.head.headers.fields.map { ["name": $0.name, "value": $0.value] },
            "bodyLength": body.count,
            "bodySha256": Crypto.hex(Crypto.sha256(body)),
            "bodyBase64": Data(body).base64EncodedString(),
        ])
    }

    @discardableResult
    private func json(_ ex: ServerExchange, _ status: Int, _ value: Any) -> (status: Int, headers: HTTPHeaders, body: [UInt8]) {
        let data = (try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys])) ?? Data("{}".utf8)
        var h = HTTPHeaders()
        h.add("Content-Type", "application/json")
        ex.respond(status: status, headers: h, body: [UInt8](data))
        return (status, h, [UInt8](data))
    }

    @discardableResult
    private func error(_ ex: ServerExchange, _ status: Int, _ message: String) -> (status: Int, headers: HTTPHeaders, body: [UInt8]) {
        var h = HTTPHeaders()
        h.add("Content-Type", ErrorBody.contentType)
        let body = ErrorBody.json(status: status, message: message)
        ex.respond(status: status, headers: h, body: body)
        return (status, h, body)
    }

    static func query(_ target: String) -> [String: String] {
        guard let q = target.firstIndex(of: "?") else { return [:] }
        var out: [String: String] = [:]
        for pair in target[target.index(after: q)...].split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            out[String(kv[0]).removingPercentEncoding ?? String(kv[0])] =
                kv.count > 1 ? (String(kv[1]).removingPercentEncoding ?? String(kv[1])) : ""
        }
        return out
    }
}

/// The first answer to an `Idempotency-Key`, and a digest of the request it answered.
struct IdempotentAnswer {
    let digest: [UInt8]
    let status: Int
    let headers: HTTPHeaders
    let body: [UInt8]
}
