import TxGateCrypto

/// A user the embedded authentication service knows.
public struct UserRecord: ConfigObject, Sendable, Equatable {
    public var username: String
    public var passwordHash: String
    public var email: String?
    /// Base32, for TOTP.
    public var totpSecret: String?
    public var attributes: [String: String]

    public init(username: String, passwordHash: String, email: String? = nil, totpSecret: String? = nil,
                attributes: [String: String] = [:]) {
        self.username = username
        self.passwordHash = passwordHash
        self.email = email
        self.totpSecret = totpSecret
        self.attributes = attributes
    }

    enum Key: String, ConfigKey {
        case username, passwordHash, email, totpSecret, attributes
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        username = o.required(.username) ?? ""
        passwordHash = o.required(.passwordHash) ?? ""
        email = o.optional(.email)
        totpSecret = o.optional(.totpSecret)
        attributes = o.value(.attributes, default: [:])
        if o.has(.passwordHash), !passwordHash.isEmpty, !PasswordHash.isValidEncoding(passwordHash) {
            o.invalid(.passwordHash, "not a hash from `txgate hash-password`")
        }
        if let s = totpSecret {
            // RFC 4226 asks for 128 bits; 80 (16 base32 characters) is the least accepted here.
            if let key = Base32.decode(s) {
                if key.count < 10 { o.invalid(.totpSecret, "too short: \(key.count * 8) bits, at least 80 are needed") }
            } else {
                o.invalid(.totpSecret, "not valid base32")
            }
        }
        if username.isEmpty && o.has(.username) { o.invalid(.username, "must not be empty") }
    }
}
