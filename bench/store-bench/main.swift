// A store alone under the step-up cycle's calls, as fast as it will go: `bench/store.sh` runs
// it. `--workers` event loops standing for the gateway's (each with its own connection for
// Redis), `--concurrency` cycles in flight at once spread over them; each cycle makes the store
// calls the gateway's step-up cycle makes (6, 4 of them writes), with the gateway's key names
// (so Redis fences what the gateway's Redis store fences): the session read; the challenge (the
// record and the pending index created and the subject's count raised, in one step); the
// journey start (the record read); the code (the TOTP step raised unless a lockout is there,
// then the record swapped to COMPLETED with its audit entry and the count lowered, in one
// step); the retry (the record taken with its audit entry). Prints one JSON object: cycles per
// second, the process's CPU per cycle, and the SQLite store's thread's (`txgate.store`).
//
//   store-bench --path FILE [--max-batch N] | --redis HOST:PORT [--unfenced]   --seconds S --workers W --concurrency C
//               [--no-audit]
//
// --unfenced (Redis: no key fenced, FencedKeys.none) and --no-audit (no audit entry with the
// approval and the consume) leave out what the gateway always does, to measure what it costs.
import CMimalloc
import Dispatch
import Foundation
import Glibc
import EventHTTP
import Logging
import Synchronization
import TxGateCore
import TxGateRedis
import TxGateStore

struct Options {
    var path = ""
    var redis = ""
    var seconds = 3.0
    var workers = 1
    var concurrency = 8
    var maxBatch = SQLiteStore.defaultMaxBatch
    /// What fencing and the audit trail cost (measured by leaving them out): never the gateway's way.
    var unfenced = false
    var noAudit = false

    init(_ args: [String]) {
        var i = 0
        func value() -> String {
            i += 1
            guard i < args.count else { fail("\(args[i - 1]) needs a value") }
            return args[i]
        }
        while i < args.count {
            switch args[i] {
            case "--path": path = value()
            case "--redis": redis = value()
            case "--seconds": seconds = Double(value()) ?? { fail("--seconds: not a number") }()
            case "--workers": workers = Int(value()) ?? { fail("--workers: not a number") }()
            case "--concurrency": concurrency = Int(value()) ?? { fail("--concurrency: not a number") }()
            case "--max-batch": maxBatch = Int(value()) ?? { fail("--max-batch: not a number") }()
            case "--unfenced": unfenced = true
            case "--no-audit": noAudit = true
            default: fail("unknown argument '\(args[i])'")
            }
            i += 1
        }
        guard path.isEmpty != redis.isEmpty else { fail("one of --path (SQLite) and --redis (HOST:PORT) is required") }
        guard !unfenced || !redis.isEmpty else { fail("--unfenced is for --redis: SQLite fences nothing") }
        guard seconds > 0, workers >= 1, concurrency >= 1, maxBatch >= 1 else {
            fail("--seconds, --workers, --concurrency and --max-batch must be positive")
        }
    }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("store-bench: \(message)\n".utf8))
    exit(2)
}

/// The cycles done, the ones that went wrong, and when to stop.
final class Run: Sendable {
    let done = Atomic<Int>(0)
    let errors = Atomic<Int>(0)
    let inFlight = Atomic<Int>(0)
    let next = Atomic<Int>(0)
    let stopping = Atomic<Bool>(false)
    let finished = DispatchSemaphore(value: 0)
}

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// The CPU seconds the threads named `name` have used (user and system, from
/// /proc/self/task/TID/stat, read past the command's name): the SQLite store's own thread
/// (`txgate.store`), whose time a cycle sets how many cycles a second the store can take.
func threadCPUSeconds(named name: String) -> Double {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    var ticks = 0
    for tid in tasks {
        guard let comm = try? String(contentsOfFile: "/proc/self/task/\(tid)/comm", encoding: .utf8),
              comm.trimmingCharacters(in: .whitespacesAndNewlines) == name,
              let stat = try? String(contentsOfFile: "/proc/self/task/\(tid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { continue }
        // After ") ": state is field 3, so utime (14) and stime (15) are the 12th and 13th here.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let u = Int(fields[11]), let s = Int(fields[12]) else { continue }
        ticks += u + s
    }
    return Double(ticks) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

let options = Options(Array(CommandLine.arguments.dropFirst()))
// The gateway's allocator (the txgate executable's `Allocator`): mimalloc, linked in; naming one
// of its functions keeps the linker from dropping it, and a build where it does not serve
// `malloc` stops here rather than measure the C library's.
let probe = malloc(16)
guard mi_is_in_heap_region(probe) else { fail("mimalloc is linked but does not serve malloc") }
free(probe)
let store: Store
// The gateway's workers: an event loop each, on a thread of its own, where every store call is
// made and answered.
let loops = (0..<options.workers).map { _ in EventLoop() }
let executors: [CallbackExecutor] = loops
if options.redis.isEmpty {
    do {
        store = try SQLiteStore(path: options.path, maxBatch: options.maxBatch)
    } catch {
        fail("\(error)")
    }
    for loop in loops { Thread { loop.run() }.start() }
} else {
    let parts = options.redis.split(separator: ":")
    guard parts.count == 2, let port = Int(parts[1]) else { fail("--redis: HOST:PORT, got '\(options.redis)'") }
    var logger = Logger(label: "store-bench")
    logger.logLevel = .warning
    let redis = RedisStore(url: RedisURL(host: String(parts[0]), port: port), keyPrefix: "bench:", timeoutMs: 2000,
                           fenced: options.unfenced ? .none : .oneShot, logger: logger)
    for loop in loops {
        redis.attach(to: loop)
        Thread { loop.run() }.start()
    }
    store = redis
    // Every connection fenced and ready before the clock starts.
    for loop in loops {
        let ready = DispatchSemaphore(value: 0)
        func ping() {
            store.ping(on: loop) { r in
                if case .success = r { ready.signal() } else { loop.execute { Thread.sleep(forTimeInterval: 0.05); ping() } }
            }
        }
        loop.execute { ping() }
        guard ready.wait(timeout: .now() + 10) == .success else { fail("redis \(options.redis) did not answer") }
    }
}
let run = Run()
let ttl = 180_000
let audit = options.noAudit ? nil : AuditAppend(ifChanged: Array(String(repeating: "a", count: 300).utf8), retentionMs: 86_400_000)

/// A record of about the size of a stored transaction record.
func record(_ n: Int, state: String) -> [UInt8] {
    let padding = String(repeating: "x", count: 480)
    return Array(#"{"txid":"tx\#(n)","state":"\#(state)","seal":"seal\#(n)","subject":"user\#(n % 1000)","padding":"\#(padding)"}"#.utf8)
}

/// A stored session, read at the start of every cycle (the session cache of a gateway worker
/// keeps one, and every cycle here is another user's), about the size of the gateway's.
func sessionKey(_ user: String) -> String { "session:" + user }
let sessionValue = Array(String(repeating: "s", count: 300).utf8)
let users = 1000

/// One cycle's store calls, one after another on `executor`, then the next cycle.
func cycle(on executor: CallbackExecutor) {
    if run.stopping.load(ordering: .relaxed) {
        if run.inFlight.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { run.finished.signal() }
        return
    }
    let n = run.next.add(1, ordering: .relaxed).newValue
    let user = "user\(n % users)"
    let txid = "bench-tx-\(n)", seal = "seal\(n)"
    let recordKey = TransactionRecord.key(txid), indexKey = TransactionRecord.pendingIndexKey(subject: user, seal: seal)
    let countKey = TransactionRecord.pendingKey(user)
    let created = record(n, state: "CREATED"), completed = record(n, state: "COMPLETED")
    func check<T>(_ r: StoreResult<T>, _ ok: (T) -> Bool, _ then: @escaping () -> Void) {
        guard case .success(let v) = r, ok(v) else {
            run.errors.add(1, ordering: .relaxed)
            cycle(on: executor)
            return
        }
        then()
    }
    let challenge: [ConditionalWrite] = [.create(indexKey, value: Array(txid.utf8), ttlMs: ttl), .create(recordKey, value: created, ttlMs: ttl)]
    store.get(sessionKey(user), on: executor) { r in check(r, { $0 == sessionValue }) {
    store.writeAll(challenge, moving: .up(countKey, ttlMs: ttl), on: executor) { r in check(r, { if case .written = $0 { true } else { false } }) {
    store.get(recordKey, on: executor) { r in check(r, { $0 == created }) {
    store.raise(TOTPStepRecord.key(user), to: UInt64(n), unlessPresent: ["lock:session:" + user], on: executor) { r in
        check(r, { $0 != .blocked }) {
    store.compareAndSwap(recordKey, expected: created, new: completed, ttlMs: nil, audit: audit, moving: .down(countKey), on: executor) { r in
        check(r, { $0 != nil }) {
    store.takeIf(recordKey, fields: ["state": "COMPLETED", "seal": seal], audit: audit, on: executor) { r in
        check(r, { $0 == .taken(completed) }) {
            run.done.add(1, ordering: .relaxed)
            cycle(on: executor)
        }
    }}}}}}}}}}}
}

/// Every user's session stored before the clock starts.
func storeSessions() {
    let stored = DispatchSemaphore(value: 0)
    let executor = executors[0]
    for i in 0..<users {
        store.put(sessionKey("user\(i)"), value: sessionValue, ttlMs: 3_600_000, on: executor) { r in
            if case .failure(let e) = r { fail("storing a session: \(e)") }
            stored.signal()
        }
    }
    for _ in 0..<users { stored.wait() }
}
storeSessions()

let cpu0 = cpuSeconds(), thread0 = threadCPUSeconds(named: "txgate.store")
let start = DispatchTime.now()
run.inFlight.store(options.concurrency, ordering: .relaxed)
for i in 0..<options.concurrency {
    let executor = executors[i % executors.count]
    executor.execute { cycle(on: executor) }
}
Thread.sleep(forTimeInterval: options.seconds)
let counted = run.done.load(ordering: .relaxed)
let cpu1 = cpuSeconds(), thread1 = threadCPUSeconds(named: "txgate.store")
let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
run.stopping.store(true, ordering: .relaxed)
run.finished.wait()
(store as? SQLiteStore)?.close()
for loop in loops { loop.stop() }
let errors = run.errors.load(ordering: .relaxed)
print(#"{"store":"\#(options.redis.isEmpty ? "sqlite" : "redis")","max_batch":\#(options.maxBatch),"fenced":\#(!options.unfenced),"audit":\#(!options.noAudit),"workers":\#(options.workers),"concurrency":\#(options.concurrency),"cycles":\#(counted),"seconds":\#(String(format: "%.3f", elapsed)),"cycles_per_s":\#(String(format: "%.1f", Double(counted) / elapsed)),"cpu_ms_per_cycle":\#(String(format: "%.4f", (cpu1 - cpu0) * 1000 / Double(max(1, counted)))),"cpu_cores":\#(String(format: "%.2f", (cpu1 - cpu0) / elapsed)),"store_thread_ms_per_cycle":\#(String(format: "%.4f", (thread1 - thread0) * 1000 / Double(max(1, counted)))),"errors":\#(errors)}"#)
if errors > 0 { exit(1) }
