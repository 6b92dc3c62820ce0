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
    return SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA);
}
/* HMAC (RFC 2104) from a key's two precomputed hash states: the states after the key's ipad
 * and opad blocks, copied for each message. OpenSSL 3's EVP_MAC duplicates, finalizes and
 * frees a provider context per message, about 9,000 instructions more than the hashing of a
 * short message; these are a struct copy. The low-level SHA API is deprecated in OpenSSL 3
 * (not removed); it is used here only, with its warnings silenced here only. */
#include <string.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <openssl/sha.h>

/* 1: SHA-1, 256: SHA-256, 512: SHA-512. */
typedef struct {
    int algorithm;
    union { SHA_CTX sha1; SHA256_CTX sha256; SHA512_CTX sha512; } inner, outer;
} txg_hmac_key;

static inline int txg_hmac_block_size(int algorithm) { return algorithm == 512 ? 128 : 64; }
static inline int txg_hmac_digest_size(int algorithm) { return algorithm == 1 ? 20 : algorithm == 256 ? 32 : 64; }

static inline void txg_hmac_hash(int algorithm, const uint8_t *data, size_t n, uint8_t *out) {
    if (algorithm == 1) SHA1(data, n, out);
    else if (algorithm == 256) SHA256(data, n, out);
    else SHA512(data, n, out);
}

/* Returns 0 for an unknown algorithm. */
static inline int txg_hmac_key_init(txg_hmac_key *k, int algorithm, const uint8_t *key, size_t n) {
    if (algorithm != 1 && algorithm != 256 && algorithm != 512) return 0;
    int block = txg_hmac_block_size(algorithm);
    uint8_t padded[128], pad[128];
    memset(padded, 0, sizeof padded);
    if (n > (size_t)block) txg_hmac_hash(algorithm, key, n, padded);
    else if (n > 0) memcpy(padded, key, n);
    k->algorithm = algorithm;
    for (int i = 0; i < block; i++) pad[i] = padded[i] ^ 0x36;
    if (algorithm == 1) { SHA1_Init(&k->inner.sha1); SHA1_Update(&k->inner.sha1, pad, block); }
    else if (algorithm == 256) { SHA256_Init(&k->inner.sha256); SHA256_Update(&k->inner.sha256, pad, block); }
    else { SHA512_Init(&k->inner.sha512); SHA512_Update(&k->inner.sha512, pad, block); }
    for (int i = 0; i < block; i++) pad[i] = padded[i] ^ 0x5c;
    if (algorithm == 1) { SHA1_Init(&k->outer.sha1); SHA1_Update(&k->outer.sha1, pad, block); }
    else if (algorithm == 256) { SHA256_Init(&k->outer.sha256); SHA256_Update(&k->outer.sha256, pad, block); }
    else { SHA512_Init(&k->outer.sha512); SHA512_Update(&k->outer.sha512, pad, block); }
    OPENSSL_cleanse(padded, sizeof padded);
    OPENSSL_cleanse(pad, sizeof pad);
    return 1;
}

/* SHA-256 of one message on a stack context: EVP_Digest allocates and frees a digest context
 * and its provider state (four malloc/free pairs) per call, and the one-shot SHA256() of
 * OpenSSL 3 fetches the algorithm by name; the session key and each record's seal and binding
 * digest are one such call per request. The context held the message's last block: cleansed. */
static inline void txg_sha256(const uint8_t *data, size_t n, uint8_t *out) {
    SHA256_CTX c;
    SHA256_Init(&c);
    SHA256_Update(&c, data, n);
    SHA256_Final(out, &c);
    OPENSSL_cleanse(&c, sizeof c);
}

/* Writes txg_hmac_digest_size(k->algorithm) bytes to out. */
static inline void txg_hmac(const txg_hmac_key *k, const uint8_t *data, size_t n, uint8_t *out) {
    uint8_t inner[64];
    int size = txg_hmac_digest_size(k->algorithm);
    if (k->algorithm == 1) {
        SHA_CTX c = k->inner.sha1; SHA1_Update(&c, data, n); SHA1_Final(inner, &c);
        c = k->outer.sha1; SHA1_Update(&c, inner, size); SHA1_Final(out, &c);
        OPENSSL_cleanse(&c, sizeof c);
    } else if (k->algorithm == 256) {
        SHA256_CTX c = k->inner.sha256; SHA256_Update(&c, data, n); SHA256_Final(inner, &c);
        c = k->outer.sha256; SHA256_Update(&c, inner, size); SHA256_Final(out, &c);
        OPENSSL_cleanse(&c, sizeof c);
    } else {
        SHA512_CTX c = k->inner.sha512; SHA512_Update(&c, data, n); SHA512_Final(inner, &c);
        c = k->outer.sha512; SHA512_Update(&c, inner, size); SHA512_Final(out, &c);
        OPENSSL_cleanse(&c, sizeof c);
    }
    OPENSSL_cleanse(inner, sizeof inner);
}
#pragma GCC diagnostic pop

#endif
