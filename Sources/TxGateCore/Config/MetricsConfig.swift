import Foundation

/// `metrics`: who may read `/-/metrics`.
public struct MetricsConfig: ConfigObject, Sendable, Equatable {
    /// Peers (by the connection's address) that may read the metrics; others get 403.
    public var allowFrom: [CIDR] = CIDR.loopback

    public init() {}

    enum Key: String, ConfigKey {
        case allowFrom
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        allowFrom = o.cidrs(.allowFrom) ?? allowFrom
    }
}
