import Foundation
import TxGateCore
import TxGateCrypto

/// The ES256 keys of the tokens the gateway signs (access, ID and transaction tokens): PEM
/// files in `secrets.tokenKeysFolder`. The newest file (by name: `key-<unix seconds>.pem`) signs;
/// every one is published at `connect/jwk_uri`, so that tokens signed by an older key verify
/// until they expire. Rotate by adding a newer file; remove an old one once its tokens expired.
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

    /// Reads every `*.pem` in `folder`; creates the folder and a first key (0600) when there is none.
    static func load(folder: String, now: Int) throws(SigningKey.KeyError) -> (TokenKeys, created: Bool) {
        let fm = FileManager.default
        do {
            try fm.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw SigningKey.KeyError(folderKey, "cannot create folder '\(folder)': \(error.localizedDescription)")
        }
        let names = ((try? fm.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".pem") }.sorted()
        var keys: [ECSigningKey] = []
        for name in names.reversed() {
            let path = folder + "/" + name
            guard let data = fm.contents(atPath: path), let key = ECSigningKey(pem: Array(data)) else {
                throw SigningKey.KeyError(folderKey, "'\(path)' is not a readable P-256 private key in PEM")
            }
            keys.append(key)
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
