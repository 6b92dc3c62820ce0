import CTxGateBuildInfo

/// The one place that says which TxGate this is: `txgate --version`, the "txgate started"
/// log line and `/-/health` all read it.
public enum TxGateVersion {
    /// The release version. Bump it here, and only here.
    public static let current = "0.9.0"

    /// The git commit the binary was built from (`make build` passes it as TXGATE_COMMIT,
    /// e.g. "3f2a9c1d4e5b" or "3f2a9c1d4e5b-dirty"), or "unknown" for a plain `swift build`.
    public static let commit: String = String(cString: txgate_build_commit())

    /// "0.9.0 (commit 3f2a9c1d4e5b)" or "0.9.0 (unknown commit)".
    public static var description: String {
        commit == "unknown" ? "\(current) (unknown commit)" : "\(current) (commit \(commit))"
    }
}
