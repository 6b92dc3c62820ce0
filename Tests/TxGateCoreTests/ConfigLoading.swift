import Foundation
import TxGate
import TxGateCore

extension ConfigLoader {
    /// `decode`, with the files the configuration names read from disk as `txgate` reads them
    /// (the tests that need files write them into a temporary folder).
    static func decode(_ data: Data, folder: String, overrides: ConfigOverrides = ConfigOverrides()) throws(ConfigErrors) -> GatewayConfig {
        try decode(data, folder: folder, overrides: overrides, files: DiskConfigFiles())
    }
}
