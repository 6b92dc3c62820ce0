#ifndef TXGATE_COPENSSL_SHIM_H
#define TXGATE_COPENSSL_SHIM_H
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/ec.h>
#include <openssl/x509.h>

/* Function-like macros in OpenSSL's headers are invisible to Swift; these wrap them. */
static inline long txg_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}
static inline long txg_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return SSL_CTX_set_min_proto_version(ctx, version);
}
static inline long txg_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}
/* SSL_OP_* are built by a macro in OpenSSL 3, which Swift cannot import. */
static inline uint64_t txg_SSL_CTX_prefer_server_ciphers(SSL_CTX *ctx) {
    return SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
}
#endif
