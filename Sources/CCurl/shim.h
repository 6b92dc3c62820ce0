#ifndef TXGATE_CCURL_SHIM_H
#define TXGATE_CCURL_SHIM_H
/* OpenSSL's module first, as in CLibevent: curl.h includes sys/select.h and sys/socket.h too,
 * and those types must be defined once, in COpenSSL, not once per module (clang may refuse to
 * merge them). */
#include "../COpenSSL/shim.h"
/* The wrappers below are typed already; curl's GCC type-check macros only add noise. */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

/* curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: one typed
 * wrapper per kind of argument. */
static inline CURLcode txg_curl_setopt_long(CURL *curl, CURLoption option, long value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode txg_curl_setopt_str(CURL *curl, CURLoption option, const char *value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode txg_curl_setopt_ptr(CURL *curl, CURLoption option, void *value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode txg_curl_setopt_slist(CURL *curl, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode txg_curl_setopt_readfn(CURL *curl, size_t (*fn)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(curl, CURLOPT_READFUNCTION, fn);
}
static inline CURLcode txg_curl_getinfo_long(CURL *curl, CURLINFO info, long *value) {
    return curl_easy_getinfo(curl, info, value);
}
#endif
