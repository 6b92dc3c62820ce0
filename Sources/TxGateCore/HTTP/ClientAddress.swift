#if canImport(Glibc)
import Glibc
#endif
import HTTPCore

/// An IPv4 or IPv6 address. An IPv4-mapped IPv6 address (`::ffff:192.0.2.1`, what a dual-stack
/// socket reports for an IPv4 peer) is read as the IPv4 address, so that one range covers both
/// spellings.
public struct IPAddress: Equatable, Hashable, Sendable, CustomStringConvertible {
    public let isIPv4: Bool
    /// The address, big-endian: an IPv4 address in the low 32 bits of `low`.
    let high: UInt64
    let low: UInt64

    public init?(_ text: some StringProtocol) {
        var s = String(text)
        if s.hasPrefix("["), s.hasSuffix("]") { s = String(s.dropFirst().dropLast()) }
        var v4 = in_addr()
        if !s.contains(":") {
            guard inet_pton(AF_INET, s, &v4) == 1 else { return nil }
            self.init(ipv4: UInt32(bigEndian: v4.s_addr))
            return
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, s, &v6) == 1 else { return nil }
        let b = withUnsafeBytes(of: &v6) { Array($0) }
        let hi = b[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let lo = b[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        if hi == 0 && lo >> 32 == 0xFFFF {
            self.init(ipv4: UInt32(truncatingIfNeeded: lo))
        } else {
            self.init(high: hi, low: lo, isIPv4: false)
        }
    }

    init(ipv4: UInt32) {
        isIPv4 = true
        high = 0
        low = UInt64(ipv4)
    }

    init(high: UInt64, low: UInt64, isIPv4: Bool) {
        self.high = high
        self.low = low
        self.isIPv4 = isIPv4
    }

    public var bitCount: Int { isIPv4 ? 32 : 128 }

    /// The canonical text (`192.0.2.1`, `2001:db8::1`), one spelling per address.
    public var description: String {
        var buf = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        if isIPv4 {
            var a = in_addr(s_addr: UInt32(truncatingIfNeeded: low).bigEndian)
            _ = inet_ntop(AF_INET, &a, &buf, socklen_t(buf.count))
        } else {
            var a = in6_addr()
            withUnsafeMutableBytes(of: &a) { p in
                for i in 0..<8 {
                    p[i] = UInt8(truncatingIfNeeded: high >> (56 - 8 * i))
                    p[8 + i] = UInt8(truncatingIfNeeded: low >> (56 - 8 * i))
                }
            }
            _ = inet_ntop(AF_INET6, &a, &buf, socklen_t(buf.count))
        }
        return buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}

/// An address range: `10.0.0.0/8`, `fd00::/8`, or one address (`192.0.2.1`, `::1`).
public struct CIDR: Equatable, Sendable, CustomStringConvertible {
    public let address: IPAddress
    public let prefixLength: Int
    private let maskHigh: UInt64
    private let maskLow: UInt64

    public enum ParseError: Error, Equatable, CustomStringConvertible {
        case notAnAddress(String)
        case badPrefix(String, max: Int)
        case hostBitsSet(String, suggestion: String)

        public var description: String {
            switch self {
            case .notAnAddress(let s):
                return "'\(s)' is not an IP address or CIDR range (e.g. 10.0.0.0/8, 192.0.2.7, fd00::/8)"
            case .badPrefix(let s, let max):
                return "'\(s)': the prefix length must be a number from 0 to \(max)"
            case .hostBitsSet(let s, let suggestion):
                return "'\(s)' has bits set after its prefix; did you mean \(suggestion)?"
            }
        }
    }

    public init(parsing text: String) throws(ParseError) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let ip = IPAddress(parts[0]), !parts[0].hasPrefix("[") else { throw .notAnAddress(text) }
        var length = ip.bitCount
        if parts.count == 2 {
            guard let n = Int(parts[1]), parts[1].allSatisfy({ $0.isASCII && $0.isNumber }), (0...ip.bitCount).contains(n) else {
                throw .badPrefix(text, max: ip.bitCount)
            }
            length = n
        }
        self.init(ip, prefixLength: length)
        guard address.high & ~maskHigh == 0 && address.low & ~maskLow == 0 else {
            let network = IPAddress(high: address.high & maskHigh, low: address.low & maskLow, isIPv4: address.isIPv4)
            throw .hostBitsSet(text, suggestion: "\(network)/\(length)")
        }
    }

    init(_ address: IPAddress, prefixLength: Int) {
        self.address = address
        self.prefixLength = prefixLength
        // Bits counted from the top of the address's own width (32 for IPv4, in `low`).
        let zeros = address.bitCount - prefixLength
        func ones(_ n: Int) -> UInt64 { n <= 0 ? 0 : n >= 64 ? .max : (UInt64(1) << UInt64(n)) - 1 }
        if address.isIPv4 {
            maskHigh = 0
            maskLow = ones(32) & ~ones(zeros)
        } else {
            maskHigh = ~ones(zeros - 64)
            maskLow = ~ones(zeros)
        }
    }

    public func contains(_ ip: IPAddress) -> Bool {
        ip.isIPv4 == address.isIPv4 && ip.high & maskHigh == address.high && ip.low & maskLow == address.low
    }

    public var description: String { "\(address)/\(prefixLength)" }

    /// 127.0.0.0/8 and ::1.
    public static let loopback: [CIDR] = [try! CIDR(parsing: "127.0.0.0/8"), try! CIDR(parsing: "::1")]
}

extension [CIDR] {
    /// Whether `address` (as a socket gives it) is in one of the ranges.
    public func contains(address: String) -> Bool {
        guard let ip = IPAddress(address) else { return false }
        return contains { $0.contains(ip) }
    }
}

/// The proxies whose `X-Forwarded-For` is believed (`trustedProxies`), and the walk that finds
/// the client behind them.
public struct TrustedProxies: Sendable, Equatable {
    public let ranges: [CIDR]

    public init(_ ranges: [CIDR] = []) { self.ranges = ranges }

    public var isEmpty: Bool { ranges.isEmpty }

    public func trusts(_ ip: IPAddress) -> Bool { ranges.contains { $0.contains(ip) } }

    /// Who sent a request that arrived from `peer`.
    public struct Client: Equatable, Sendable {
        /// The client's address: for logs, lockouts and rate limits.
        public let address: String
        /// The peer is a trusted proxy: its `X-Forwarded-For` chain is passed on upstream.
        public let viaTrustedProxy: Bool

        public init(address: String, viaTrustedProxy: Bool) {
            self.address = address
            self.viaTrustedProxy = viaTrustedProxy
        }
    }

    /// The address of a client that a trusted proxy could not name (its `X-Forwarded-For`
    /// entry was `unknown`, RFC 7239 §6.1, or not an address at all). It is nobody's address:
    /// no source lockout or rate limit counts it (`Attempter.hasKnownSource`), so that one
    /// such client cannot lock out all the others.
    public static let unknownClient = "unknown"

    /// The peer itself, unless it is trusted: then the right-most `X-Forwarded-For` entry that
    /// is not itself trusted (each trusted proxy vouches for the hop before it), or the
    /// left-most when all of them are (nginx's `real_ip_recursive on`). An entry may carry a
    /// port (`192.0.2.1:1234`, `[2001:db8::1]:80`, as Azure Application Gateway sends them),
    /// which is dropped. An entry that is not an address (`unknown`, garbage) is an untrusted
    /// hop nobody can name: the walk ends there with `unknownClient`, never with the proxy's
    /// own address, which would put every client behind it in one lockout bucket.
    /// `forwardedFor` gives the header's values in the order received; it is read only for a
    /// trusted peer.
    public func client(peer: String, forwardedFor: @autoclosure () -> [String]) -> Client {
        guard !ranges.isEmpty, let peerIP = IPAddress(peer), trusts(peerIP) else {
            return Client(address: peer, viaTrustedProxy: false)
        }
        var address = peer
        for value in forwardedFor().reversed() {
            for entry in value.split(separator: ",").reversed() {
                let e = entry.trimmingOWS()
                if e.isEmpty { continue }
                guard let ip = Self.forwardedAddress(e) else { return Client(address: Self.unknownClient, viaTrustedProxy: true) }
                address = ip.description
                if !trusts(ip) { return Client(address: address, viaTrustedProxy: true) }
            }
        }
        return Client(address: address, viaTrustedProxy: true)
    }

    /// The address of one `X-Forwarded-For` entry: `192.0.2.1`, `192.0.2.1:1234`, `2001:db8::1`,
    /// `[2001:db8::1]` or `[2001:db8::1]:80`; nil for anything else (`unknown`, a name, a port
    /// that is not 1 to 5 digits).
    static func forwardedAddress(_ entry: some StringProtocol) -> IPAddress? {
        let u = entry.utf8
        func isPort(_ p: Substring.UTF8View) -> Bool {
            (1...5).contains(p.count) && p.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
        }
        let s = Substring(entry)
        if u.first == UInt8(ascii: "[") {
            guard let close = s.utf8.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            let rest = s.utf8[s.utf8.index(after: close)...]
            if !rest.isEmpty {
                guard rest.first == UInt8(ascii: ":"), isPort(rest.dropFirst()) else { return nil }
            }
            let inner = s[s.index(after: s.startIndex)..<close]
            guard inner.utf8.contains(UInt8(ascii: ":")) else { return nil }  // brackets are for IPv6 only
            return IPAddress(inner)
        }
        let colons = s.utf8.lazy.filter { $0 == UInt8(ascii: ":") }.count
        if colons == 1, let colon = s.utf8.firstIndex(of: UInt8(ascii: ":")) {
            // IPv4 with a port; a bare IPv6 address has at least two colons.
            guard isPort(s.utf8[s.utf8.index(after: colon)...]) else { return nil }
            let host = s[..<colon]
            return host.utf8.contains(UInt8(ascii: ":")) ? nil : IPAddress(host)
        }
        return IPAddress(s)
    }
}
