/// What a reload (SIGHUP) does with a change to one top-level key of gateway.json; each key's
/// rule is in `GatewayConfig.reload(_:)`. A rule compares the key's values with the section
/// types' own `==`, so a setting added to a section follows its section's rule.
public struct ReloadRule {
    public enum Mode: Equatable, Sendable {
        /// Applied: requests after the reload follow the new value.
        case live
        /// Bound to what the process opened at start-up: a change is named in the restart
        /// warning, under the key's name, and the running value kept.
        case restart
        /// Applied, but for one part that needs a restart (named in the warning as given here,
        /// and kept at its running value).
        case partly(String)
    }

    public let mode: Mode
    /// Whether what needs a restart differs between the running configuration and the new one.
    private let restartPartDiffers: (_ running: GatewayConfig, _ new: GatewayConfig) -> Bool
    /// Puts the running value of what needs a restart into the new configuration.
    private let keepRestartPart: (_ new: inout GatewayConfig, _ running: GatewayConfig) -> Void
    /// Whether a reload applies a change to the key (`applies`).
    private let appliesChange: (_ running: GatewayConfig, _ effective: GatewayConfig) -> Bool

    public static var live: ReloadRule {
        ReloadRule(mode: .live, restartPartDiffers: { _, _ in false }, keepRestartPart: { _, _ in }, appliesChange: { _, _ in true })
    }

    /// The whole value at `value` needs a restart.
    public static func restart<Value: Equatable>(_ value: WritableKeyPath<GatewayConfig, Value>) -> ReloadRule {
        ReloadRule(mode: .restart, restartPartDiffers: { $0[keyPath: value] != $1[keyPath: value] },
                   keepRestartPart: { $0[keyPath: value] = $1[keyPath: value] }, appliesChange: { _, _ in false })
    }

    /// The value at `value` is applied, but for its `part`, which needs a restart when `differs`
    /// says that it changed; the restart warning calls it `name`.
    public static func partly<Value: Equatable, Part>(_ value: WritableKeyPath<GatewayConfig, Value>, restart name: String,
                                                     _ part: WritableKeyPath<Value, Part>,
                                                     differs: @escaping (Part, Part) -> Bool) -> ReloadRule {
        let path = value.appending(path: part)
        return ReloadRule(mode: .partly(name), restartPartDiffers: { differs($0[keyPath: path], $1[keyPath: path]) },
                          keepRestartPart: { $0[keyPath: path] = $1[keyPath: path] },
                          appliesChange: { $0[keyPath: value] != $1[keyPath: value] })
    }

    /// `partly`, where the part needs a restart whenever it differs.
    public static func partly<Value: Equatable, Part: Equatable>(_ value: WritableKeyPath<GatewayConfig, Value>, restart name: String,
                                                                _ part: WritableKeyPath<Value, Part>) -> ReloadRule {
        partly(value, restart: name, part, differs: !=)
    }

    /// Whether the new configuration changes something of this key that needs a restart.
    public func needsRestart(running: GatewayConfig, new: GatewayConfig) -> Bool {
        restartPartDiffers(running, new)
    }

    /// `new` with what needs a restart put back to its running value, where it changed.
    public func keepRunning(_ new: inout GatewayConfig, running: GatewayConfig) {
        if restartPartDiffers(running, new) { keepRestartPart(&new, running) }
    }

    /// Whether a reload applies a change to the key: always for `live`, never for `restart`; for
    /// `partly`, when the value it applies (`effective`, after `keepRunning`) differs from the
    /// running one.
    public func applies(running: GatewayConfig, effective: GatewayConfig) -> Bool {
        appliesChange(running, effective)
    }
}
