import Foundation
import TxGateCore
import TxGateCrypto

/// The ES256 keys of the tokens the gateway signs (access, ID and transaction tokens): PEM
/// files in `secrets.tokenKeysFolder`, read at start and on each reload (SIGHUP). The newest file
/// (by name: `key-<unix seconds>.pem`) signs. An older key is published at `connect/jwk_uri`
/// (and accepted) only while tokens it signed can still be alive: until the next newer file was
/// written plus the longest token lifetime. Rotate by adding a newer file and reloading.
final class TokenKeys: Sendable {
    let signing: ECSigningKey
    let signingKid: String
    let published: [PublishedKey]
    private let byKid: [String: ECPublicKey]

    static let folderKey = "secrets.tokenKeysFolder"

    init(signing: ECSigningKey, others: [ECSigningKey]) {
        self.signing = signing
        let current = PublishedKey(signing.publicKey)
        signingKid = current.kid
        published = [current] + others.map { PublishedKey($0.publicKey) }
        byKid = Dictionary(published.map { ($0.kid, $0.key) }, uniquingKeysWith: { a, _ in a })
    }

    func key(_ kid: String) -> ECPublicKey? { byKid[kid] }

    func sign(_ claims: [String: JSONValue], typ: String) -> String {
        JWS.sign(claims, typ: typ, kid: signingKid, key: signing)
    }

    var jwkSet: String { PublishedKey.jwkSet(published) }

    /// Reads every `*.pem` in `folder`; creates the folder and a first key (0600) when there is
    /// none. `maxTokenLifetimeS`: how long after being replaced an older key is still published.
    static func load(folder: String, now: Int, maxTokenLifetimeS: Int) throws(SigningKey.KeyError) -> (TokenKeys, created: Bool) {
        let fm = FileManager.default
        do {
            try fm.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw SigningKey.KeyError(folderKey, "cannot create folder '\(folder)': \(error.localizedDescription)")
        }
        let names = ((try? fm.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".pem") }.sorted()
        var keys: [ECSigningKey] = []
        // When the key just newer than the one being read was written: its replacement time.
        var replacedAt: Int?
        for name in names.reversed() {
            let path = folder + "/" + name
            guard let data = fm.contents(atPath: path), let key = ECSigningKey(pem: Array(data)) else {
                throw SigningKey.KeyError(folderKey, "'\(path)' is not a readable P-256 private key in PEM")
            }
            if let replacedAt, now > replacedAt + maxTokenLifetimeS { break }
            keys.append(key)
            let written = (try? fm.attributesOfItem(atPath: path)[.modificationDate] as? Date).map { Int($0.timeIntervalSince1970) }
            replacedAt = written ?? now
        }
        if let newest = keys.first { return (TokenKeys(signing: newest, others: Array(keys.dropFirst())), false) }
        guard let key = ECSigningKey.generate() else { throw SigningKey.KeyError(folderKey, "OpenSSL could not generate a P-256 key") }
        try writeKey(key.pem, to: folder + "/key-\(now).pem")
        return (TokenKeys(signing: key, others: []), true)
    }

    private static func writeKey(_ bytes: [UInt8], to path: String) throws(SigningKey.KeyError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw SigningKey.KeyError(folderKey, "cannot create '\(path)': \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard write(fd, bytes, bytes.count) == bytes.count, fsync(fd) == 0 else {
            throw SigningKey.KeyError(folderKey, "cannot write '\(path)': \(String(cString: strerror(errno)))")
        }
    }
}
