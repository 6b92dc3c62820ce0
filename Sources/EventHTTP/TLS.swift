import COpenSSL
import Foundation

public struct TLSError: Error, CustomStringConvertible {
    public let description: String
    init(_ what: String) {
        var detail = ""
        var code = ERR_get_error()
        while code != 0 {
            detail += (detail.isEmpty ? "" : "; ") + Self.message(code)
            code = ERR_get_error()
        }
        description = detail.isEmpty ? what : "\(what): \(detail)"
    }

    /// The error queued by OpenSSL on this thread, if any (for handshake failures).
    public static func lastOpenSSLError() -> String? {
        let code = ERR_get_error()
        guard code != 0 else { return nil }
        while ERR_get_error() != 0 {}
        return message(code)
    }

    /// OpenSSL's text for an error code.
    static func message(_ code: UInt) -> String {
        var buf = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buf, buf.count)
        return String(nulTerminated: buf)
    }
}

/// An OpenSSL SSL_CTX, shared read-only by every worker once built.
// @unchecked Sendable: the context is configured in the factory methods before it is shared;
// afterwards workers only create SSLs from it, which OpenSSL allows from any thread.
public final class TLSContext: @unchecked Sendable {
    let ctx: OpaquePointer

    private init(method: OpaquePointer) throws {
        guard let c = SSL_CTX_new(method) else { throw TLSError("cannot create TLS context") }
        ctx = c
        _ = txg_SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION)
        // Partial writes and moving buffers are what bufferevent_openssl does.
        _ = txg_SSL_CTX_set_mode(ctx, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER))
    }

    deinit { SSL_CTX_free(ctx) }

    /// What a TLS 1.2 client may negotiate: forward-secret (ECDHE) key exchange with an AEAD
    /// cipher only; no RSA key exchange, no CBC, no SHA-1 MACs. In this order, which is
    /// Mozilla's (the "intermediate" configuration): AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305.
    public static let serverCipherList = [
        "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
    ].joined(separator: ":")
    /// TLS 1.3: OpenSSL's three suites (all AEAD, all forward-secret), AES-128-GCM first as in
    /// Mozilla's order. OpenSSL's own order puts AES-256-GCM with SHA-384 first, whose key
    /// schedule runs its HMACs on SHA-384: 5 % more instructions per new connection (2.55M
    /// against 2.42M, bench/RESULTS.md), and SHA-384 has no SHA-NI instructions to run on.
    public static let serverCipherSuites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"

    /// A server context from PEM files (certificate chain and private key).
    public static func server(certificateFile: String, privateKeyFile: String) throws -> TLSContext {
        let t = try TLSContext(method: TLS_server_method())
        guard SSL_CTX_set_cipher_list(t.ctx, serverCipherList) == 1 else {
            throw TLSError("cannot set the TLS 1.2 cipher list '\(serverCipherList)'")
        }
        guard SSL_CTX_set_ciphersuites(t.ctx, serverCipherSuites) == 1 else {
            throw TLSError("cannot set the TLS 1.3 cipher suites '\(serverCipherSuites)'")
        }
        // Our order rather than the client's, except for a client that puts ChaCha20 first (one
        // without AES instructions, where AES-GCM is slow): it gets ChaCha20-Poly1305.
        _ = txg_SSL_CTX_prefer_server_ciphers(t.ctx)
        guard SSL_CTX_use_certificate_chain_file(t.ctx, certificateFile) == 1 else {
            throw TLSError("tls.certificate: cannot load '\(certificateFile)'")
        }
        guard SSL_CTX_use_PrivateKey_file(t.ctx, privateKeyFile, SSL_FILETYPE_PEM) == 1 else {
            throw TLSError("tls.privateKey: cannot load '\(privateKeyFile)'")
        }
        guard SSL_CTX_check_private_key(t.ctx) == 1 else {
            throw TLSError("tls.privateKey: does not match tls.certificate")
        }
        return t
    }

    /// A client context that verifies the peer against `caFile`, or the system store.
    public static func client(caFile: String?, verify: Bool = true) throws -> TLSContext {
        let t = try TLSContext(method: TLS_client_method())
        if verify {
            SSL_CTX_set_verify(t.ctx, SSL_VERIFY_PEER, nil)
            if let caFile {
                guard SSL_CTX_load_verify_locations(t.ctx, caFile, nil) == 1 else {
                    throw TLSError("upstream.caFile: cannot load '\(caFile)'")
                }
            } else if SSL_CTX_set_default_verify_paths(t.ctx) != 1 {
                throw TLSError("cannot load the system CA store")
            }
        } else {
            SSL_CTX_set_verify(t.ctx, SSL_VERIFY_NONE, nil)
        }
        return t
    }

    /// A new client SSL for `host`: SNI set and the certificate name checked.
    func newClientSSL(host: String) -> OpaquePointer? {
        guard let ssl = SSL_new(ctx) else { return nil }
        let isIP = host.contains(":") || host.allSatisfy { $0.isNumber || $0 == "." }
        if !isIP { _ = txg_SSL_set_tlsext_host_name(ssl, host) }
        if let param = SSL_get0_param(ssl) {
            X509_VERIFY_PARAM_set_hostflags(param, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS))
            if isIP { X509_VERIFY_PARAM_set1_ip_asc(param, host) } else { X509_VERIFY_PARAM_set1_host(param, host, 0) }
        }
        return ssl
    }
}
