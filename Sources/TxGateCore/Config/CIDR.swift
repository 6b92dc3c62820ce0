#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An address range written as CIDR (`127.0.0.0/8`, `::1/128`; a bare address is the one
/// address). Pure: parsing and matching only, so allow-lists are checked without sockets.
public struct CIDR: Equatable, Sendable, CustomStringConvertible {
    /// 4 bytes (IPv4) or 16 (IPv6), the host bits cleared.
    public let network: [UInt8]
    public let prefixLength: Int

    public init?(parsing text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let bytes = CIDR.addressBytes(String(parts[0])) else { return nil }
        let bits = bytes.count * 8
        var length = bits
        if parts.count == 2 {
            guard !parts[1].isEmpty, parts[1].allSatisfy({ $0.isASCII && $0.isNumber }), parts[1].count <= 3,
                  let n = Int(parts[1]), n <= bits else { return nil }
            length = n
        }
        network = CIDR.masked(bytes, length)
        prefixLength = length
    }

    /// Whether `address` (a peer's address as text) is in the range. An IPv4-mapped IPv6
    /// address (`::ffff:127.0.0.1`) matches as the IPv4 address it carries.
    public func contains(_ address: String) -> Bool {
        guard var bytes = CIDR.addressBytes(address) else { return false }
        if bytes.count == 16, network.count == 4, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff {
            bytes = Array(bytes[12...])
        }
        guard bytes.count == network.count else { return false }
        return CIDR.masked(bytes, prefixLength) == network
    }

    public var description: String {
        var buffer = [CChar](repeating: 0, count: 64)
        let family = network.count == 4 ? AF_INET : AF_INET6
        _ = network.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
        let text = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return "\(text)/\(prefixLength)"
    }

    /// The loopback ranges: where `/-/metrics` answers when nothing else is configured.
    public static let loopback: [CIDR] = [CIDR(parsing: "127.0.0.0/8")!, CIDR(parsing: "::1/128")!]

    /// 4 or 16 bytes for a textual IPv4 or IPv6 address (brackets and a zone are not accepted).
    static func addressBytes(_ text: String) -> [UInt8]? {
        if text.contains(":") {
            var a = in6_addr()
            guard inet_pton(AF_INET6, text, &a) == 1 else { return nil }
            return withUnsafeBytes(of: &a) { Array($0) }
        }
        var a = in_addr()
        guard inet_pton(AF_INET, text, &a) == 1 else { return nil }
        return withUnsafeBytes(of: &a) { Array($0) }
    }

    static func masked(_ bytes: [UInt8], _ length: Int) -> [UInt8] {
        var out = bytes
        for i in out.indices {
            let keep = max(0, min(8, length - i * 8))
            out[i] &= keep == 8 ? 0xff : UInt8(truncatingIfNeeded: 0xff << (8 - keep))
        }
        return out
    }
}

extension Array where Element == CIDR {
    /// Whether any range holds `address`.
    public func contains(address: String) -> Bool { contains { $0.contains(address) } }
}

/// `metrics`: who may read `/-/metrics`.
public struct MetricsConfig: Decodable, Sendable {
    /// Peers (by the connection's address) that may read the metrics; others get 403.
    public var allowFrom: [CIDR] = CIDR.loopback

    public init() {}

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, known: ["allowFrom"])
        if let list: [String] = o.optional("allowFrom") {
            var ranges: [CIDR] = []
            for (i, text) in list.enumerated() {
                if let c = CIDR(parsing: text) {
                    ranges.append(c)
                } else {
                    o.issues.add(o.path + [AnyKey("allowFrom"), AnyKey(intValue: i)!],
                                 "'\(text)' is not an address or CIDR range (like 127.0.0.0/8 or ::1/128)")
                }
            }
            allowFrom = ranges
        }
    }
}
