import Foundation

/// `metrics`: who may read `/-/metrics`.
public struct MetricsConfig: Decodable, Sendable {
    /// Peers (by the connection's address) that may read the metrics; others get 403.
    public var allowFrom: [CIDR] = CIDR.loopback

    public init() {}

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, known: ["allowFrom"])
        allowFrom = o.cidrs("allowFrom") ?? allowFrom
    }
}
