import Logging
import Synchronization
import TxGateCore

/// The store's fence against writes Redis lost: its epoch, and the scripts that honour it.
///
/// Redis can come back *behind* what the gateway saw: restarted from an RDB snapshot, from an
/// AOF whose tail was never synced, or as a replica promoted before it had every write. Then
/// a consumed transaction is COMPLETED again and a used one-time code is unused again, and
/// an approval executes twice. Nothing in the restored data says so, but the server does:
/// every redis-server process has a new random `run_id` (INFO server), and a replica's differs
/// from its primary's.
///
/// So Redis holds one fence record, `<prefix>fence` (a hash, no expiry): the `run_id` it was
/// last checked against, the `epoch`, and `fenced_at` (Redis's clock, ms, when the epoch last
/// moved on). Each connection, before it serves (on every connect and reconnect), sends
/// `INFO server` and then `fenceScript` with the `run_id` it got: when the recorded `run_id`
/// differs (a restart, a restore, a promoted replica), or the record is missing or older than
/// an epoch this process has already seen (the data was lost or rolled back), the script moves
/// the epoch on, in one step, so that of several gateways reconnecting at once exactly one
/// bumps it and the others adopt it. The record is written before anything of its epoch, so a
/// snapshot, AOF or replication stream that holds a value of epoch E also holds a fence of at
/// least E: after the bump every value in the restored data is of an older epoch.
///
/// Fenced keys (`FencedKeys`) are stored as `<epoch>:<value>` and only ever touched by scripts
/// that read the epoch from the fence record themselves, so the check is Redis's, atomic with
/// the operation, and no gateway's cached view of the epoch matters. A value of an older epoch
/// is absent for every operation. A missing fence record (FLUSHALL, an eviction) fails the
/// operation and makes the connection reconnect, which fences again.
///
/// The one case this cannot catch: Redis and every gateway losing their memory together (all
/// restarted at once onto an empty Redis) starts a first epoch with no quarantine for
/// markers; only records, which are gone with the data, stay safe then.
final class RedisFence: Sendable {
    /// Where the record lives: `<keyPrefix>fence`.
    let key: String
    /// The highest epoch any connection of this process has seen: a fence record below it
    /// means Redis lost data even if its `run_id` did not change.
    private let seen = Atomic<Int>(0)

    init(keyPrefix: String) {
        key = keyPrefix + "fence"
    }

    var lastSeenEpoch: Int { seen.load(ordering: .relaxed) }

    /// What `fenceScript` answered.
    struct Outcome: Equatable {
        var epoch: Int
        /// Redis's time (ms) when the epoch moved on; 0 for a first epoch (nothing to lose).
        var fencedAtMs: Int
        var bumped: Bool
    }

    /// Checks the connection's server against the record: INFO server, then the fence
    /// script. Calls back the outcome, or why the connection must not serve.
    func check(_ connection: RedisConnection, logger: Logger, _ done: @escaping (Result<Outcome, RedisHandshakeError>) -> Void) {
        var info = RedisCommand("INFO")
        info.add("server")
        connection.sendSetup(info) { [self] reply in
            guard case .string(let text)? = reply, let runId = Self.field("run_id", in: text) else {
                done(.failure(RedisHandshakeError("fencing: INFO server gave no run_id (\(reply?.kind ?? "no reply"))")))
                return
            }
            var c = RedisCommand("EVAL")
            c.add(Self.fenceScript)
            c.add("1")
            c.add(key)
            c.add(runId)
            c.add(String(lastSeenEpoch))
            connection.sendSetup(c) { [self] reply in
                guard case .array(let items)? = reply, items.count == 3,
                      case .integer(let epoch) = items[0], case .integer(let at) = items[1], case .integer(let bumped) = items[2] else {
                    if case .error(let message)? = reply {
                        // READONLY (a replica), OOM, NOSCRIPT...: not a store to serve from.
                        done(.failure(RedisHandshakeError("fencing: redis refused the fence update: \(message)")))
                    } else {
                        done(.failure(RedisHandshakeError("fencing: unexpected reply \(reply?.kind ?? "none") to the fence script")))
                    }
                    return
                }
                let outcome = Outcome(epoch: epoch, fencedAtMs: at, bumped: bumped == 1)
                let before = seen.load(ordering: .relaxed)
                if epoch > before { _ = seen.compareExchange(expected: before, desired: epoch, ordering: .relaxed) }
                if outcome.bumped && (before > 0 || at > 0) {
                    logger.warning("redis was restarted, restored or failed over: the store moved to a new epoch; transactions and one-time codes from before are refused, so people approve again and nothing runs twice", metadata: [
                        "redis": .string(connection.urlDescription), "run_id": .string(runId), "epoch": .stringConvertible(epoch),
                    ])
                } else {
                    logger.debug("redis fence checked", metadata: ["run_id": .string(runId), "epoch": .stringConvertible(epoch)])
                }
                done(.success(outcome))
            }
        }
    }

    /// The value of `name:` in an INFO reply.
    static func field(_ name: String, in info: [UInt8]) -> String? {
        let text = String(decoding: info, as: UTF8.self)
        for line in text.split(whereSeparator: \.isNewline) where line.hasPrefix(name + ":") {
            return String(line.dropFirst(name.count + 1))
        }
        return nil
    }

    // MARK: scripts

    /// KEYS[1] the fence record; ARGV[1] the server's run_id, ARGV[2] the highest epoch this
    /// gateway process has seen. Returns {epoch, fenced_at, bumped}. A first epoch (no record,
    /// and no epoch seen) has fenced_at 0: there was nothing before it to lose.
    static let fenceScript = """
        local f = redis.call('HMGET', KEYS[1], 'run_id', 'epoch', 'fenced_at')
        local epoch = tonumber(f[2]) or 0
        local seen = tonumber(ARGV[2])
        if f[1] == ARGV[1] and epoch > 0 and epoch >= seen then return {epoch, tonumber(f[3]) or 0, 0} end
        local t = redis.call('TIME')
        local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        if epoch == 0 and seen == 0 then at = 0 end
        local nextEpoch = math.max(epoch, seen) + 1
        redis.call('HSET', KEYS[1], 'run_id', ARGV[1], 'epoch', string.format('%d', nextEpoch), 'fenced_at', string.format('%d', at))
        return {nextEpoch, at, 1}
        """

    /// Shared by every fenced operation. KEYS[1] the key, KEYS[2] the fence record.
    /// `current(raw)` is the value if it was written in this epoch, else nil.
    private static let prelude = """
        local epoch = tonumber(redis.call('HGET', KEYS[2], 'epoch'))
        if not epoch then return redis.error_reply('TXGATEFENCE the fence record is missing') end
        local function current(raw)
          if not raw then return nil end
          local c = string.find(raw, ':', 1, true)
          if c and tonumber(string.sub(raw, 1, c - 1)) == epoch then return string.sub(raw, c + 1) end
          return nil
        end
        local function stamped(v) return string.format('%d', epoch) .. ':' .. v end

        """

    static let get = RedisScript(
        prelude + "return current(redis.call('GET', KEYS[1]))"
    )

    /// ARGV: value, ttl ms ('0': never expires), '1' for a one-time marker, its quarantine ms
    /// (its own time to live, or a high-water mark's fixed time). A marker claimed less than its
    /// quarantine after the epoch moved on is refused: a marker of the same name may have been
    /// lost with the old epoch, and its absence proves nothing until it would have expired.
    static let create = RedisScript(
        prelude + """
        if current(redis.call('GET', KEYS[1])) then return 0 end
        if ARGV[3] == '1' then
        """ + "\n" + quarantine("ARGV[4]") + "\n" + """
        end
        if ARGV[2] == '0' then
          redis.call('SET', KEYS[1], stamped(ARGV[1]))
        else
          redis.call('SET', KEYS[1], stamped(ARGV[1]), 'PX', ARGV[2])
        end
        return 1
        """
    )

    /// `Store.writeAll` with a fenced key among those written (`RedisStore.writeAllBody`):
    /// KEYS[1] the counter, KEYS[2] the fence record (the prelude's), the written keys from KEYS[3].
    static let writeAll = RedisScript(prelude + RedisStore.movesCounter(key: "KEYS[1]") + RedisStore.writeAllBody(firstKey: 3))

    /// Refuses a marker claimed less than `ms` (a Lua expression) after the epoch moved on.
    private static func quarantine(_ ms: String) -> String {
        """
          local at = tonumber(redis.call('HGET', KEYS[2], 'fenced_at')) or 0
          local t = redis.call('TIME')
          local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
          local untilMs = at + tonumber(\(ms))
          if at > 0 and now < untilMs then
            return redis.error_reply('TXGATEQUARANTINE ' .. string.format('%d', untilMs - now))
          end
        """
    }

    /// `RedisStore.raiseBody` on the value of this epoch; the first value of a marker (ARGV[2]
    /// '1') is refused in its quarantine (ARGV[3] ms), as `create` refuses it.
    static let raise = RedisScript(
        prelude + RedisStore.raiseBody(quarantine: "if ARGV[2] == '1' then\n" + quarantine("ARGV[3]") + "\nend", firstGuard: 3)
    )

    /// ARGV: value, ttl ms.
    static let put = RedisScript(
        prelude + "redis.call('SET', KEYS[1], stamped(ARGV[1]), 'PX', ARGV[2]) return 1"
    )

    /// ARGV: ttl ms.
    static let touch = RedisScript(
        prelude + """
        if not current(redis.call('GET', KEYS[1])) then return 0 end
        return redis.call('PEXPIRE', KEYS[1], ARGV[1])
        """
    )

    static let delete = RedisScript(
        prelude + """
        local raw = redis.call('GET', KEYS[1])
        if raw then redis.call('DEL', KEYS[1]) end
        if current(raw) then return 1 end
        return 0
        """
    )

    /// A value of an older epoch is deleted too, and reported absent.
    static let take = RedisScript(
        prelude + """
        local raw = redis.call('GET', KEYS[1])
        if raw then redis.call('DEL', KEYS[1]) end
        return current(raw)
        """
    )

    /// KEYS[3] the audit stream; ARGV[1..3] the audit entries and retention
    /// (`RedisStore.auditPrelude`), then: expected, 'set'|'del', new value, ttl ms ('' keeps
    /// the expiry). The audit entry is added only in the script that made the change.
    static let compareAndSwap = RedisScript(
        prelude + RedisStore.auditPrelude + RedisStore.movesNothing + RedisStore.compareAndSwapBody
    )

    /// `compareAndSwap` with a counter moved (`RedisStore.movesCounter`): KEYS[3] the counter
    /// (the audit stream last), and the move's two arguments after `compareAndSwap`'s.
    static let compareAndSwapMoving = RedisScript(
        prelude + RedisStore.auditPrelude + RedisStore.movesCounter(key: "KEYS[3]") + RedisStore.compareAndSwapBody
    )

    /// As `RedisStore.takeIfScript`, on the value of this epoch; one of an older epoch is
    /// deleted and absent: a transaction from before a restore is never consumed (and its
    /// audit record, if asked for, is a refusal that found nothing).
    static let takeIf = RedisScript(
        prelude + RedisStore.auditPrelude + """
        local raw = redis.call('GET', KEYS[1])
        local v = current(raw)
        if not v then
          if raw then redis.call('DEL', KEYS[1]) end
          audit(ARGV[2], nil)
          return {0}
        end
        """ + "\n" + RedisStore.takeIfPresent
    )

    /// KEYS[3] the audit stream, ARGV[1] the entry, ARGV[2] the retention; the value of
    /// KEYS[1] in this epoch, if any, is recorded with it.
    static let appendAudit = RedisScript(
        prelude + RedisStore.auditPrelude + """
        audit(ARGV[1], current(redis.call('GET', KEYS[1])))
        return 1
        """
    )
}

/// Why a new connection may not serve (it is dropped and retried).
struct RedisHandshakeError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
