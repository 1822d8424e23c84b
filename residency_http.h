/* residency_http.h -- the I/O shell of residency.h: URL parsing, a non-blocking
   HTTP/1.1 client and server over POSIX sockets (optional TLS via mbedTLS), and
   the drivers that run the core's reconciler and process pool for real.
   v0.1.0 -- MIT license (see residency.h).

   Do this:
       #define RESIDENCY_IMPLEMENTATION
       #include "residency_http.h"
   in *one* C or C++ file, before any system header. That one define turns on
   both implementations (residency.h is included from here). Other files include
   "residency_http.h" without the define. Link with nothing but libc; with
   RSD_HTTP_MBEDTLS also -lmbedtls -lmbedx509 -lmbedcrypto.

   CONFIGURATION MACROS
       RESIDENCY_HTTP_IMPLEMENTATION  same as RESIDENCY_IMPLEMENTATION: the shell uses
                                      the core's internals, so both are instantiated
       RSD_HTTP_MBEDTLS               enable https:// through mbedTLS 2.28+

   API REFERENCE
       [doc:url]
       [doc:httpparse]
       [doc:http client]
       [doc:http server]
       [doc:tls]
       [doc:drive]
       [doc:state]

   PLATFORM NOTES
       POSIX only for now (Linux, macOS, BSD). The process-wide SIGPIPE
       disposition is never touched: sends use MSG_NOSIGNAL (SO_NOSIGPIPE where
       that is the mechanism). No SIGCHLD handler is ever installed.
*/
#if defined(RESIDENCY_IMPLEMENTATION) && !defined(RESIDENCY_HTTP_IMPLEMENTATION)
#define RESIDENCY_HTTP_IMPLEMENTATION 1
#endif
#if defined(RESIDENCY_HTTP_IMPLEMENTATION) && !defined(RESIDENCY_IMPLEMENTATION)
#define RESIDENCY_IMPLEMENTATION 1
#endif
#include "residency.h"

#if RSD_VERSION_MAJOR != 0 || RSD_VERSION_MINOR != 1
#error "residency_http.h v0.1 needs residency.h v0.1: vendor both files from the same release"
#endif

#ifndef RESIDENCY_HTTP_H_INCLUDED
#define RESIDENCY_HTTP_H_INCLUDED

#ifdef __cplusplus
extern "C" {
#endif

/* ==== >>url (declarations) ================================================ */
enum { RSD_URL_MAX_BYTES = 2048 };  /* longest URL rsd_url_parse accepts */

typedef enum rsd_host_kind {
    RSD_HOST_INVALID = 0,
    RSD_HOST_NAME,   /* needs resolution (blocking helper or the user's resolver hook) */
    RSD_HOST_IPV4,   /* dotted quad, goes straight to connect() */
    RSD_HOST_IPV6,   /* written as [..] in the URL; host holds it without brackets */
    RSD_HOST_NUM
} rsd_host_kind;

/* A parsed URL: views into the caller's string (zero-copy; keep it alive). */
typedef struct rsd_url {
    rsd_str scheme;      /* "http" or "https", as written (any case) */
    rsd_str host;        /* without [] for IPv6 */
    rsd_str path;        /* from the first '/' (path and query, no fragment); may be empty = "/" */
    uint16_t port;       /* explicit, else 80 / 443 */
    bool tls;            /* scheme is https */
    bool port_explicit;  /* the URL named a port */
    rsd_host_kind host_kind;
} rsd_url;

/* Parses http(s)://host[:port][/path][?query][#fragment]. Userinfo (user@host),
   other schemes, bad ports, empty hosts and control bytes are RSD_ERR_URL. */
RSD_API int rsd_url_parse(rsd_url *out, const char *s, size_t len);
/* Writes the normalised key ("http://127.0.0.1:8080/v1": lower-case scheme and host,
   default port dropped, trailing slashes removed, query and fragment dropped) NUL-terminated into buf. Returns the
   key length (>0) or RSD_ERR_BUFFER. Caches and locks are keyed by it. */
RSD_API int rsd_url_key(const rsd_url *u, char *buf, size_t cap);
/* ==== >>url end =========================================================== */

/* ==== >>httpparse (declarations) ========================================== */
/* Incremental, zero-copy parsers with the picohttpparser contract: call again with
   the same buffer grown by new bytes; RSD_OK = complete (*consumed = head bytes),
   RSD_PENDING = need more, <0 = error (RSD_ERR_PROTOCOL, RSD_ERR_HEADERS_TOO_LARGE). */
enum { RSD_HTTP_MAX_HEADERS = 64 };  /* more header lines than this: RSD_ERR_HEADERS_TOO_LARGE */

typedef struct rsd_http_header {
    rsd_str name;   /* as received; compare case-insensitively */
    rsd_str value;  /* leading/trailing blanks trimmed */
} rsd_http_header;

/* Fields common to requests and responses, derived from the headers. */
typedef struct rsd_http_framing {
    int64_t content_length;  /* -1 when absent */
    bool chunked;            /* Transfer-Encoding ends in chunked */
    bool close;              /* Connection: close, or HTTP/1.0 without keep-alive */
} rsd_http_framing;

typedef struct rsd_http_response_head {
    int minor_version;       /* 1 for HTTP/1.1, 0 for HTTP/1.0 */
    int status;              /* 100..999 */
    rsd_str reason;
    rsd_http_header headers[RSD_HTTP_MAX_HEADERS];
    size_t num_headers;
    rsd_http_framing framing;
} rsd_http_response_head;

typedef struct rsd_http_request_head {
    rsd_str method;
    rsd_str target;          /* origin-form "/path?query" (or "*" / absolute-form as sent) */
    int minor_version;
    rsd_http_header headers[RSD_HTTP_MAX_HEADERS];
    size_t num_headers;
    rsd_http_framing framing;
    bool expect_continue;    /* Expect: 100-continue */
} rsd_http_request_head;

/* last_len: how many of these bytes the previous call already saw (0 the first time). */
RSD_API int rsd_http_parse_response(const char *buf, size_t len, size_t last_len,
                                    rsd_http_response_head *out, size_t *consumed);
RSD_API int rsd_http_parse_request(const char *buf, size_t len, size_t last_len,
                                   rsd_http_request_head *out, size_t *consumed);
/* Case-insensitive header lookup; the empty view (ptr NULL) when absent. */
RSD_API rsd_str rsd_http_header_get(const rsd_http_header *h, size_t n, const char *name);
/* True when a response to `method` with `status` has no body (HEAD, 1xx, 204, 304). */
RSD_API bool rsd_http_response_bodyless(rsd_str method, int status);

/* Chunked transfer decoding, in place, incremental. Zero the struct to start.
   Each call decodes buf[0..*len) in place and sets *len to the decoded data bytes now
   at the start of buf. Returns RSD_PENDING (feed more), RSD_OK (last chunk and
   trailers done; d->rest = how many of the input bytes after the end were not part of
   the body, left at buf[*len .. *len + d->rest)), or RSD_ERR_PROTOCOL (bad size line,
   extension or trailer too long, size overflow, or framing overhead over the guard). */
typedef struct rsd_http_dechunk {
    uint64_t chunk_left;     /* data bytes left in the current chunk */
    uint64_t total;          /* decoded data bytes so far */
    uint64_t overhead;       /* framing bytes so far (the abuse guard) */
    size_t rest;             /* on RSD_OK: bytes after the body's end */
    uint32_t line_bytes;     /* bytes of the current size/trailer line */
    int state;               /* internal */
} rsd_http_dechunk;
RSD_API int rsd_http_dechunk_step(rsd_http_dechunk *d, char *buf, size_t *len);
/* ==== >>httpparse end ===================================================== */

/* ==== >>http client (declarations) ======================================== */

/* ==== >>http client end =================================================== */

/* ==== >>http server (declarations) ======================================== */

/* ==== >>http server end =================================================== */

/* ==== >>drive (declarations) ============================================== */

/* ==== >>drive end ========================================================= */

/* ==== >>state (declarations) ============================================== */

/* ==== >>state end ========================================================= */

#ifdef __cplusplus
} /* extern "C" */
#endif
#endif /* RESIDENCY_HTTP_H_INCLUDED */

/* ========================================================================== */
/* IMPLEMENTATION                                                             */
/* ========================================================================== */
#if defined(RESIDENCY_HTTP_IMPLEMENTATION) && !defined(RESIDENCY_HTTP_IMPL_INCLUDED)
#define RESIDENCY_HTTP_IMPL_INCLUDED 1

/* ==== >>url (implementation) ============================================== */

/* ==== >>url end =========================================================== */

/* ==== >>httpparse (implementation) ======================================== */

/* ==== >>httpparse end ===================================================== */

/* ==== >>http client (implementation) ====================================== */

/* ==== >>http client end =================================================== */

/* ==== >>http server (implementation) ====================================== */

/* ==== >>http server end =================================================== */

/* ==== >>drive (implementation) ============================================ */

/* ==== >>drive end ========================================================= */

/* ==== >>state (implementation) ============================================ */

/* ==== >>state end ========================================================= */

#endif /* RESIDENCY_HTTP_IMPLEMENTATION */
