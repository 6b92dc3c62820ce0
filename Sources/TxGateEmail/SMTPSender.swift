import CCurl
import Dispatch
import Foundation
import TxGateCore

/// Delivers through an SMTP server with libcurl's easy interface.
///
/// libcurl's easy calls block, so they run on the sender's own worker queues (a couple of
/// serial "lanes"), never on an event loop; each completion is handed to the caller's
/// executor. A failed attempt is retried after `backoffMs`, doubling each time, without
/// holding a lane while it waits. A permanent refusal (an SMTP 5xx reply, a bad login, a bad
/// URL or certificate) is not retried: asking again gets the same answer, only later.
public final class SMTPSender: EmailSender, @unchecked Sendable {
    /// How many transfers may run at once; more sends queue behind them.
    static let laneCount = 2

    /// `scheme://host:port`, without any credentials, for error messages.
    public let server: String
    private let url: String
    private let username: String?
    private let password: String?
    private let from: String
    private let startTLS: Bool
    private let caFile: String?
    private let timeoutMs: Int
    private let retries: Int
    private let backoffMs: Int
    // @unchecked Sendable: everything above is immutable; `nextLane` is guarded by `lock`.
    private let lanes: [DispatchQueue]
    private let lock = NSLock()
    private var nextLane = 0

    /// - Parameters:
    ///   - url: `smtp://host:port` (plain, or STARTTLS with `startTLS`) or `smtps://host:port` (TLS from the start).
    ///   - startTLS: require STARTTLS on `smtp://`; the send fails rather than go out in the clear.
    ///   - caFile: PEM certificates to trust instead of the system's (a private CA, a test server).
    ///   - timeoutMs: for connecting, and again for a whole attempt.
    ///   - retries: further attempts after a failed one; `backoffMs` before the first, doubling.
    public init(url: String, username: String?, password: String?, from: String, startTLS: Bool,
                caFile: String? = nil, timeoutMs: Int = 10000, retries: Int = 2, backoffMs: Int = 500) throws {
        guard url.hasPrefix("smtp://") || url.hasPrefix("smtps://") else {
            throw EmailError.failed("smtp url '\(url)' is not smtp://host:port or smtps://host:port")
        }
        if let problem = MessageFormat.addressProblem(from) { throw EmailError.failed("smtp from '\(from)' \(problem)") }
        guard timeoutMs > 0 else { throw EmailError.failed("smtp timeoutMs must be more than 0, got \(timeoutMs)") }
        guard retries >= 0, backoffMs >= 0 else {
            throw EmailError.failed("smtp retries and backoffMs must not be negative, got \(retries) and \(backoffMs)")
        }
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile) {
            throw EmailError.failed("smtp caFile '\(caFile)' cannot be read")
        }
        let code = CurlGlobal.initialized
        guard code == CURLE_OK else { throw EmailError.failed("libcurl cannot start: \(String(cString: curl_easy_strerror(code)))") }
        self.url = url
        self.server = Self.server(of: url)
        self.username = username
        self.password = password
        self.from = from
        self.startTLS = startTLS
        self.caFile = caFile
        self.timeoutMs = timeoutMs
        self.retries = retries
        self.backoffMs = backoffMs
        lanes = (0..<Self.laneCount).map { DispatchQueue(label: "txgate.email.smtp.\($0)") }
    }

    public func send(_ message: OutgoingEmail, on executor: CallbackExecutor,
                     _ done: @escaping (Result<Void, EmailError>) -> Void) {
        let lane = pickLane()
        let reply = Completion(on: executor, done)
        if let refusal = MessageFormat.check(message) {
            lane.async { reply(.failure(refusal)) }
            return
        }
        // Rendered once: every attempt sends the same Date and Message-ID, so a receiver can
        // tell a retry from a second message.
        let now = MessageFormat.nowMs()
        let bytes = MessageFormat.render(message, from: from, epochMs: now,
                                         messageID: MessageFormat.newMessageID(from: from, epochMs: now))
        lane.async { self.attempt(1, bytes, to: message.to, lane: lane, reply) }
    }

    /// Runs on `lane`.
    private func attempt(_ number: Int, _ bytes: [UInt8], to: String, lane: DispatchQueue,
                         _ reply: Completion<Result<Void, EmailError>>) {
        guard let failure = transfer(bytes, to: to) else {
            reply(.success(()))
            return
        }
        if failure.permanent || number > retries {
            let attempts = number == 1 ? "1 attempt" : "\(number) attempts"
            let error = EmailError.failed("\(server): \(failure.text) after \(attempts)")
            reply(.failure(error))
            return
        }
        let delay = backoffMs.multipliedReportingOverflow(by: 1 << min(number - 1, 20))
        let wait = delay.overflow ? Int.max / 2 : delay.partialValue
        lane.asyncAfter(deadline: .now() + .milliseconds(min(wait, 3_600_000))) {
            self.attempt(number + 1, bytes, to: to, lane: lane, reply)
        }
    }

    private struct Failure {
        var text: String
        var permanent: Bool
    }

    /// One SMTP transaction with a fresh easy handle; nil when the server accepted the message.
    /// Blocks: only ever called on a lane.
    private func transfer(_ bytes: [UInt8], to: String) -> Failure? {
        CurrentThread.unpin()
        guard let curl = curl_easy_init() else { return Failure(text: "libcurl: cannot create a handle", permanent: false) }
        defer { curl_easy_cleanup(curl) }
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        defer { errorBuffer.deallocate() }
        errorBuffer[0] = 0
        guard let recipients = curl_slist_append(nil, "<\(to)>") else {
            return Failure(text: "libcurl: out of memory", permanent: false)
        }
        defer { curl_slist_free_all(recipients) }
        let upload = Upload(bytes)

        var setup = CURLE_OK
        func set(_ code: CURLcode) { if setup == CURLE_OK { setup = code } }
        set(txg_curl_setopt_str(curl, CURLOPT_URL, url))
        // Only SMTP, even if the configured URL were changed into file:// or http://.
        set(txg_curl_setopt_str(curl, CURLOPT_PROTOCOLS_STR, "smtp,smtps"))
        // No SIGALRM for DNS timeouts: this runs on a worker thread of a multithreaded process.
        set(txg_curl_setopt_long(curl, CURLOPT_NOSIGNAL, 1))
        set(txg_curl_setopt_ptr(curl, CURLOPT_ERRORBUFFER, errorBuffer))
        set(txg_curl_setopt_str(curl, CURLOPT_MAIL_FROM, "<\(from)>"))
        set(txg_curl_setopt_slist(curl, CURLOPT_MAIL_RCPT, recipients))
        set(txg_curl_setopt_readfn(curl, smtpReadCallback))
        set(txg_curl_setopt_ptr(curl, CURLOPT_READDATA, Unmanaged.passUnretained(upload).toOpaque()))
        set(txg_curl_setopt_long(curl, CURLOPT_UPLOAD, 1))
        set(txg_curl_setopt_long(curl, CURLOPT_CONNECTTIMEOUT_MS, timeoutMs))
        set(txg_curl_setopt_long(curl, CURLOPT_TIMEOUT_MS, timeoutMs))
        if startTLS { set(txg_curl_setopt_long(curl, CURLOPT_USE_SSL, Int(CURLUSESSL_ALL.rawValue))) }
        if let username { set(txg_curl_setopt_str(curl, CURLOPT_USERNAME, username)) }
        if let password { set(txg_curl_setopt_str(curl, CURLOPT_PASSWORD, password)) }
        if let caFile { set(txg_curl_setopt_str(curl, CURLOPT_CAINFO, caFile)) }
        if setup != CURLE_OK {
            return Failure(text: "setup: \(String(cString: curl_easy_strerror(setup)))", permanent: true)
        }

        // READDATA holds `upload` unretained: keep it alive until curl is done reading.
        let code = withExtendedLifetime(upload) { curl_easy_perform(curl) }
        if code == CURLE_OK { return nil }
        var reply = 0
        _ = txg_curl_getinfo_long(curl, CURLINFO_RESPONSE_CODE, &reply)
        return Self.failure(code, detail: String(cString: errorBuffer), reply: reply)
    }

    /// Names the step that failed, with curl's own words and the server's last reply code.
    private static func failure(_ code: CURLcode, detail: String, reply: Int) -> Failure {
        let step: String
        var permanent = false
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_CONNECT: step = "cannot connect"
        case CURLE_OPERATION_TIMEDOUT: step = "timed out"
        case CURLE_USE_SSL_FAILED: step = "STARTTLS failed"
        case CURLE_SSL_CONNECT_ERROR: step = "TLS handshake failed"
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM:
            step = "TLS certificate refused"
            permanent = true
        case CURLE_LOGIN_DENIED, CURLE_AUTH_ERROR:
            step = "login refused"
            permanent = true
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
            step = "bad url"
            permanent = true
        default: step = "delivery failed"
        }
        // RFC 5321 §4.2.1: 5yz replies are permanent; asking again gets the same answer.
        if (500...599).contains(reply) { permanent = true }
        var text = "\(step): \(String(cString: curl_easy_strerror(code)))"
        if !detail.isEmpty && detail != String(cString: curl_easy_strerror(code)) { text += " (\(detail))" }
        if reply > 0 && !detail.contains(String(reply)) { text += " (last reply \(reply))" }
        return Failure(text: text, permanent: permanent)
    }

    private func pickLane() -> DispatchQueue {
        lock.withLock {
            nextLane = (nextLane + 1) % lanes.count
            return lanes[nextLane]
        }
    }

    static func server(of url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url }
        var authority = url[schemeEnd.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        return String(url[..<schemeEnd.upperBound]) + authority
    }
}

/// The rendered message, handed to curl piece by piece.
private final class Upload {
    let bytes: [UInt8]
    var offset = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }
}

/// CURLOPT_READFUNCTION: copies the next part of the message; 0 ends it.
private func smtpReadCallback(_ buffer: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int,
                              _ userdata: UnsafeMutableRawPointer?) -> Int {
    guard let buffer, let userdata else { return 0 }
    let upload = Unmanaged<Upload>.fromOpaque(userdata).takeUnretainedValue()
    let n = min(size * count, upload.bytes.count - upload.offset)
    guard n > 0 else { return 0 }
    upload.bytes.withUnsafeBytes { source in
        UnsafeMutableRawPointer(buffer).copyMemory(from: source.baseAddress! + upload.offset, byteCount: n)
    }
    upload.offset += n
    return n
}

/// curl_global_init, once per process (Swift runs a global's initializer exactly once).
enum CurlGlobal {
    static let initialized: CURLcode = curl_global_init(Int(CURL_GLOBAL_ALL))
}
