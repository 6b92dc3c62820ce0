extension WebAuthn {
    /// The authenticator data flags (WebAuthn §6.1).
    public struct Flags: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        /// UP: a user was present (touched the authenticator).
        public static let userPresent = Flags(rawValue: 0x01)
        /// UV: the user was verified (PIN, biometrics).
        public static let userVerified = Flags(rawValue: 0x04)
        /// BE: the credential may be backed up (synced passkey); fixed at creation.
        public static let backupEligible = Flags(rawValue: 0x08)
        /// BS: the credential is backed up now.
        public static let backupState = Flags(rawValue: 0x10)
        /// AT: attested credential data follows the counter.
        public static let attestedCredentialData = Flags(rawValue: 0x40)
        /// ED: a CBOR map of authenticator extension outputs ends the data.
        public static let extensionData = Flags(rawValue: 0x80)
    }

    /// Attested credential data (§6.5.2): present in a registration's authenticator data.
    public struct AttestedCredentialData: Sendable {
        /// The authenticator model's AAGUID (16 bytes; all zero under `none` attestation).
        public let aaguid: [UInt8]
        public let credentialId: [UInt8]
        public let publicKey: COSEKey
    }

    /// Authenticator data (§6.1): rpIdHash (32) | flags (1) | signCount (4, big-endian) |
    /// [attested credential data] | [extensions]. Parsed strictly: each part the flags announce
    /// must be there, and nothing may follow the last one.
    public struct AuthenticatorData: Sendable {
        /// Credential IDs are at most 1023 bytes (§5.8.3 / §6.5.2).
        public static let maxCredentialIdLength = 1023

        /// The bytes as received: what the signature covers.
        public let bytes: [UInt8]
        public let rpIdHash: [UInt8]
        public let flags: Flags
        public let signCount: UInt32
        public let attestedCredential: AttestedCredentialData?
        /// Extension outputs (ED), as a CBOR map.
        public let extensions: CBORMap?

        /// Parses; refusals are `malformedAuthenticatorData` (with the byte offset),
        /// `malformedCBOR` (the public key or the extensions, offsets from the start of `bytes`)
        /// and `unsupportedCredentialKey`.
        public init(_ bytes: [UInt8]) throws(Refusal) {
            guard bytes.count >= 37 else {
                throw .malformedAuthenticatorData("\(bytes.count) bytes, 37 at least", offset: bytes.count)
            }
            self.bytes = bytes
            rpIdHash = Array(bytes[0..<32])
            flags = Flags(rawValue: bytes[32])
            signCount = bytes[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
            var position = 37

            if flags.contains(.attestedCredentialData) {
                guard bytes.count >= position + 18 else {
                    throw .malformedAuthenticatorData("attested credential data cut short (AAGUID and length need 18 bytes, "
                                                      + "\(bytes.count - position) left)", offset: position)
                }
                let aaguid = Array(bytes[position..<position + 16])
                let length = Int(bytes[position + 16]) << 8 | Int(bytes[position + 17])
                guard length <= Self.maxCredentialIdLength else {
                    throw .malformedAuthenticatorData("credential ID of \(length) bytes, \(Self.maxCredentialIdLength) at most",
                                                      offset: position + 16)
                }
                position += 18
                guard bytes.count - position >= length else {
                    throw .malformedAuthenticatorData("credential ID of \(length) bytes, \(bytes.count - position) left",
                                                      offset: position - 2)
                }
                let credentialId = Array(bytes[position..<position + length])
                position += length
                // The key is one CBOR item with no length of its own: decode it and learn where it ends.
                let keyItem: CBOR, keyEnd: Int
                do { (keyItem, keyEnd) = try CBORDecoder.decodePrefix(bytes, at: position) } catch {
                    throw .malformedCBOR("credential public key", error)
                }
                let key: COSEKey
                do { key = try COSEKey(keyItem, encoded: Array(bytes[position..<keyEnd])) } catch {
                    throw .unsupportedCredentialKey(error)
                }
                position = keyEnd
                attestedCredential = AttestedCredentialData(aaguid: aaguid, credentialId: credentialId, publicKey: key)
            } else {
                attestedCredential = nil
            }

            if flags.contains(.extensionData) {
                let item: CBOR, end: Int
                do { (item, end) = try CBORDecoder.decodePrefix(bytes, at: position) } catch {
                    throw .malformedCBOR("authenticator extensions", error)
                }
                guard let map = item.mapValue else {
                    throw .malformedAuthenticatorData("extensions are \(item.kindName), not a map", offset: position)
                }
                extensions = map
                position = end
            } else {
                extensions = nil
            }

            guard position == bytes.count else {
                let n = bytes.count - position
                throw .malformedAuthenticatorData("\(n) byte\(n == 1 ? "" : "s") after the last part the flags announce",
                                                  offset: position)
            }
        }
    }
}
