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
       --- url ---------------------------------------------------------------
       int rsd_url_parse(rsd_url *out, const char *s, size_t len)
           Splits "http(s)://host[:port][/path][?query][#fragment]" into views
           of s (zero-copy: keep s alive while using *out). RSD_OK, RSD_ERR_URL
           or RSD_ERR_ARG (out NULL, or s NULL with len > 0). Accepted:
             scheme  "http" or "https", any case; tls = (https).
             host    DNS name: dot-separated LDH labels ([A-Za-z0-9-], 1..63
                     bytes, no '-' at either end, 253 bytes total, no trailing
                     dot, last label not all digits; '_' is refused);
                     IPv4: strict dotted quad (4 parts, 0..255, no leading
                     zeros: "01.2.3.4" is refused, as are "1.2.3" and "1234");
                     IPv6: "[...]" with 1-4 hex digit groups, one "::" at
                     most, optional dotted-quad tail; zone ids ("%25eth0") are
                     refused. host_kind says which; host has no brackets.
             port    ":1".."65535" (at most 5 digits); else 80 / 443, with
                     port_explicit = false. ":" with no digits is refused.
             path    from the first '/' up to '#': path and query, as written
                     (no percent-decoding); empty when absent (send "/").
                     A query without a path ("http://h?q") is refused, so a
                     non-empty path always starts with '/'.
           Refused: other schemes, userinfo ('@' anywhere in the authority),
           any byte <= 0x20, 0x7F or >= 0x80 anywhere (spaces, controls,
           raw UTF-8), an empty host, len 0 or len > RSD_URL_MAX_BYTES (2048).
           The fragment is validated like the rest, then dropped.
       int rsd_url_key(const rsd_url *u, char *buf, size_t cap)
           Writes the normalised key NUL-terminated into buf and returns its
           length (> 0). Rules: scheme and host lower-cased (ASCII), IPv6 in
           brackets, the port only when it differs from the scheme's default
           (explicit ":80" on http is dropped, ":443" on http is kept), the
           path without query or fragment and without trailing slashes
           ("/" becomes ""). "HTTP://LocalHost:80/v1/?x#y" -> "http://localhost/v1".
           The key is never longer than the URL it came from, and it is a
           fixed point: rsd_url_key(rsd_url_parse(key)) == key. Returns
           RSD_ERR_BUFFER when cap < length + 1 (buf untouched), RSD_ERR_ARG for
           NULLs or a zeroed/invalid url. Two URLs naming the same server
           endpoint modulo case/default port/trailing slash share a key; %-
           encoding and "." segments are NOT normalised.
       --- httpparse: pure HTTP/1.x head parsers and chunked decoder ---------
       No sockets, no allocation, no state but what the caller holds. These
       are the fuzzed core under the client and the server.

       int rsd_http_parse_response(const char *buf, size_t len, size_t last_len,
                                   rsd_http_response_head *out, size_t *consumed)
       int rsd_http_parse_request(const char *buf, size_t len, size_t last_len,
                                  rsd_http_request_head *out, size_t *consumed)
           picohttpparser contract. Call with everything received so far:
             RSD_OK       head complete; *consumed = head bytes (the body, or
                          the next message, starts at buf + *consumed); out
                          holds views into buf (nothing is copied or
                          NUL-terminated) and the derived framing.
             RSD_PENDING  buf is a valid prefix: read more, call again with the
                          grown buffer and last_len = the previous len.
             RSD_ERR_PROTOCOL / RSD_ERR_HEADERS_TOO_LARGE (more than
                          RSD_HTTP_MAX_HEADERS = 64 fields), RSD_ERR_ARG (NULLs).
           *out is only meaningful on RSD_OK. Each call re-parses from buf[0]
           (stateless); last_len > 0 only lets it answer RSD_PENDING at once
           when no blank line ends the head in buf[last_len-3 .. len) (the
           slowloris shortcut). Consequence: with last_len, an error in newly
           arrived bytes is reported when the head's blank line arrives, not
           earlier; with last_len = 0 every call reports it at once. The
           parsers never read buf[len] or beyond (tested with a guard page),
           and every prefix of a valid head returns RSD_PENDING. There is no
           byte limit on the head: bound your receive buffer and treat "full
           and still PENDING" as RSD_ERR_HEADERS_TOO_LARGE.
           Accepted grammar (RFC 9112, with the leniencies marked *):
             status-line   "HTTP/1.0" or "HTTP/1.1", SP, 3 digits 100..999,
                           SP, reason (HTAB/SP/VCHAR/obs-text), line end;
                           * "HTTP/1.1 204" + line end (no SP, no reason) too.
             request-line  method (tchar+), SP, target (0x21..0x7E, no
                           obs-text), SP, "HTTP/1.x", line end; exactly one SP
                           each. * Empty lines before it are skipped (9112 2.2).
             field-line    name (tchar+) ':' OWS value OWS; value bytes are
                           HTAB, SP..'~' and 0x80..0xFF; leading/trailing
                           blanks are trimmed from the view. Whitespace before
                           ':', an empty name, obs-fold (a line starting with
                           SP/HTAB), NUL/CR/other controls or DEL in a value:
                           RSD_ERR_PROTOCOL.
             line end      CR LF, * or a bare LF (as picohttpparser); a CR not
                           followed by LF is an error.
           Framing (out->framing; RFC 9112 section 6):
             content_length  -1 when absent (for a request: no body). Digits
                           only, at most INT64_MAX; repeated fields or a
                           comma list must all carry the same value; anything
                           else is RSD_ERR_PROTOCOL.
             chunked       Transfer-Encoding (all fields, as one comma list,
                           codings compared case-insensitively) ends in
                           "chunked". "chunked" twice or not last: error.
                           Response with TE: Content-Length is ignored
                           (content_length = -1); TE not ending in chunked =>
                           close = true (body runs to connection close).
                           Request with TE: it must end in chunked and must not
                           also have Content-Length, else RSD_ERR_PROTOCOL.
                           HTTP/1.0 with any TE: RSD_ERR_PROTOCOL (9112 6.1).
             close         a "close" token in Connection (comma list, any case),
                           or HTTP/1.0 without a "keep-alive" token; also set
                           for a response whose TE does not end in chunked.
           Request only: expect_continue = HTTP/1.1 and "Expect: 100-continue"
           (any case). Whether a response has a body at all also depends on
           the request: see rsd_http_response_bodyless.
       rsd_str rsd_http_header_get(const rsd_http_header *h, size_t n, const char *name)
           First field named name (ASCII case-insensitive); {NULL, 0} when
           absent (an empty value present has a non-NULL ptr).
       bool rsd_http_response_bodyless(rsd_str method, int status)
           True for a response to "HEAD" (exact case), 1xx, 204 and 304:
           ignore its framing and read no body.

       int rsd_http_dechunk_step(rsd_http_dechunk *d, char *buf, size_t *len)
           Incremental, in-place chunked decoder. Zero *d before the body;
           feed each received piece (any split, down to single bytes). The
           call rewrites buf[0..*len) so that the decoded data is at
           buf[0..*len') and returns:
             RSD_PENDING  all input consumed, body not finished;
             RSD_OK       last chunk and trailers done; d->rest = number of
                          input bytes after the body (the next response on a
                          kept-alive connection), moved to buf[*len' ..
                          *len' + d->rest). Calling again after RSD_OK returns
                          RSD_OK with *len = 0 and d->rest = all the input.
             RSD_ERR_PROTOCOL  sticky; *len = data decoded before the fault.
           The decoded output is never longer than the input; d->total counts
           data bytes, d->overhead framing bytes. Accepted: hex sizes (either
           case, at most 16 digits, value <= 2^62), BWS then ";ext..." chunk
           extensions (skipped; size line <= RSD_HTTP_CHUNK_LINE_MAX = 1024
           bytes), trailer fields (skipped, must start with a tchar; all of
           them <= RSD_HTTP_TRAILER_MAX = 8192 bytes), CR LF or bare LF.
           Abuse guard: RSD_ERR_PROTOCOL as soon as overhead >
           RSD_HTTP_CHUNK_OVERHEAD_SLACK (4096) + total / 2, i.e. after the
           first 4 KiB the framing may be at most half the size of the data.
           1-byte chunks ("1\r\nx\r\n", 5 bytes of framing per data byte) are
           cut off after about 1 KiB of data; 16-byte chunks (6 per 16) and
           ordinary SSE event chunks pass. Limits are per body; bound the body
           itself with your own max_body_bytes.
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
enum {
    RSD_HTTP_MAX_HEADERS = 64,             /* more header lines than this: RSD_ERR_HEADERS_TOO_LARGE */
    RSD_HTTP_CHUNK_LINE_MAX = 1024,        /* longest chunk-size line (size + extensions) */
    RSD_HTTP_TRAILER_MAX = 8192,           /* total bytes of trailer fields */
    RSD_HTTP_CHUNK_OVERHEAD_SLACK = 4096   /* dechunk guard: overhead > this + data/2 is an error */
};

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
    uint32_t line_bytes;     /* bytes of the current size line, or of all trailers so far */
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
/* ASCII-only helpers (no locale), shared by >>url and >>httpparse. */
RSDI_PRIVATE char rsdi_ascii_lower(char c) {
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* Case-insensitive equality of s[0..n) with a lower-case NUL-terminated literal. */
RSDI_PRIVATE bool rsdi_ieq_lit(const char *s, size_t n, const char *lit) {
    size_t i;
    for (i = 0; i < n; i++) {
        if (lit[i] == '\0' || rsdi_ascii_lower(s[i]) != lit[i]) return false;
    }
    return lit[n] == '\0';
}

RSDI_PRIVATE int rsdi_hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Strict dotted quad: exactly 4 parts of 1-3 digits, each 0..255, no leading zero. */
RSDI_PRIVATE bool rsdi_ipv4_ok(const char *s, size_t n) {
    size_t i = 0;
    int part;
    for (part = 0; part < 4; part++) {
        size_t start = i;
        unsigned v = 0;
        if (part > 0) {
            if (i >= n || s[i] != '.') return false;
            start = ++i;
        }
        while (i < n && s[i] >= '0' && s[i] <= '9' && i - start < 3) v = v * 10 + (unsigned)(s[i++] - '0');
        if (i == start || v > 255) return false;
        if (i - start > 1 && s[start] == '0') return false;
    }
    return i == n;
}

/* IPv6 text without brackets: 8 groups of 1-4 hex digits, at most one "::", an
   optional dotted-quad tail (2 groups). Zone ids ("%eth0") are rejected. */
RSDI_PRIVATE bool rsdi_ipv6_ok(const char *s, size_t n) {
    size_t i = 0;
    int groups = 0;
    bool dbl = false;
    if (n < 2) return false;
    if (s[0] == ':') {
        if (s[1] != ':') return false;
        dbl = true;
        i = 2;
        if (i == n) return true;
    }
    for (;;) {
        size_t start = i;
        while (i < n && rsdi_hexval(s[i]) >= 0 && i - start < 5) i++;
        if (i < n && s[i] == '.') {
            if (!rsdi_ipv4_ok(s + start, n - start)) return false;
            groups += 2;
            break;
        }
        if (i == start || i - start > 4) return false;
        groups++;
        if (i == n) break;
        if (s[i] != ':') return false;
        i++;
        if (i < n && s[i] == ':') {
            if (dbl) return false;
            dbl = true;
            i++;
            if (i == n) break;
        } else if (i == n) {
            return false;
        }
        if (groups > 8) return false;
    }
    return dbl ? groups <= 7 : groups == 8;
}

/* DNS name: dot-separated LDH labels of 1..63 bytes, no leading/trailing '-',
   at most 253 bytes, and the last label not all digits (that would be a bad IPv4). */
RSDI_PRIVATE bool rsdi_dnsname_ok(const char *s, size_t n) {
    size_t i = 0;
    if (n == 0 || n > 253) return false;
    for (;;) {
        size_t start = i;
        bool all_digits = true;
        while (i < n && s[i] != '.') {
            char c = s[i];
            bool digit = c >= '0' && c <= '9';
            bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
            if (!digit && !alpha && c != '-') return false;
            if (!digit) all_digits = false;
            i++;
        }
        if (i == start || i - start > 63) return false;
        if (s[start] == '-' || s[i - 1] == '-') return false;
        if (i == n) return !all_digits;
        i++; /* the dot; a trailing dot leaves an empty label: rejected above */
    }
}

RSD_API int rsd_url_parse(rsd_url *out, const char *s, size_t len) {
    size_t i, k, auth_start, auth_end, host_end;
    rsd_url u;
    if (!out || (!s && len)) return RSD_ERR_ARG;
    memset(&u, 0, sizeof u);
    *out = u;
    if (len == 0 || len > RSD_URL_MAX_BYTES) return RSD_ERR_URL;
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c >= 0x7F) return RSD_ERR_URL;  /* whitespace, controls, non-ASCII */
    }
    for (k = 0; k < len && s[k] != ':'; k++) {}
    if (rsdi_ieq_lit(s, k, "http")) u.tls = false;
    else if (rsdi_ieq_lit(s, k, "https")) u.tls = true;
    else return RSD_ERR_URL;
    if (len - k < 3 || s[k + 1] != '/' || s[k + 2] != '/') return RSD_ERR_URL;
    u.scheme.ptr = s;
    u.scheme.len = k;
    auth_start = k + 3;
    for (auth_end = auth_start; auth_end < len; auth_end++) {
        char c = s[auth_end];
        if (c == '/' || c == '?' || c == '#') break;
        if (c == '@') return RSD_ERR_URL;  /* userinfo is refused */
    }
    if (auth_end == auth_start) return RSD_ERR_URL;
    if (s[auth_start] == '[') {
        for (host_end = auth_start + 1; host_end < auth_end && s[host_end] != ']'; host_end++) {}
        if (host_end == auth_end) return RSD_ERR_URL;
        if (!rsdi_ipv6_ok(s + auth_start + 1, host_end - auth_start - 1)) return RSD_ERR_URL;
        u.host.ptr = s + auth_start + 1;
        u.host.len = host_end - auth_start - 1;
        u.host_kind = RSD_HOST_IPV6;
        host_end++; /* past ']' */
        if (host_end < auth_end && s[host_end] != ':') return RSD_ERR_URL;
    } else {
        bool digits_dots = true;
        for (host_end = auth_start; host_end < auth_end && s[host_end] != ':'; host_end++) {
            char c = s[host_end];
            if (!((c >= '0' && c <= '9') || c == '.')) digits_dots = false;
        }
        u.host.ptr = s + auth_start;
        u.host.len = host_end - auth_start;
        if (digits_dots) {
            if (!rsdi_ipv4_ok(u.host.ptr, u.host.len)) return RSD_ERR_URL;
            u.host_kind = RSD_HOST_IPV4;
        } else {
            if (!rsdi_dnsname_ok(u.host.ptr, u.host.len)) return RSD_ERR_URL;
            u.host_kind = RSD_HOST_NAME;
        }
    }
    u.port = u.tls ? 443 : 80;
    if (host_end < auth_end) { /* s[host_end] == ':' */
        unsigned long v = 0;
        size_t p = host_end + 1;
        if (p == auth_end || auth_end - p > 5) return RSD_ERR_URL;
        for (; p < auth_end; p++) {
            if (s[p] < '0' || s[p] > '9') return RSD_ERR_URL;
            v = v * 10 + (unsigned long)(s[p] - '0');
        }
        if (v < 1 || v > 65535) return RSD_ERR_URL;
        u.port = (uint16_t)v;
        u.port_explicit = true;
    }
    /* Path and query up to the fragment. A query without a path ("http://h?q") is
       refused so that path, when not empty, always starts with '/'. */
    if (auth_end < len && s[auth_end] == '?') return RSD_ERR_URL;
    u.path.ptr = s + auth_end;
    for (i = auth_end; i < len && s[i] != '#'; i++) {}
    u.path.len = i - auth_end;
    *out = u;
    return RSD_OK;
}

RSD_API int rsd_url_key(const rsd_url *u, char *buf, size_t cap) {
    size_t n = 0, i, plen;
    char port[8];
    int portlen = 0;
    if (!u || !buf || u->host_kind <= RSD_HOST_INVALID || u->host_kind >= RSD_HOST_NUM ||
        (u->host.len && !u->host.ptr) || (u->path.len && !u->path.ptr))
        return RSD_ERR_ARG;
    if (u->port != (u->tls ? 443 : 80)) portlen = RSD_SNPRINTF(port, sizeof port, ":%u", (unsigned)u->port);
    plen = 0;
    while (plen < u->path.len && u->path.ptr[plen] != '?' && u->path.ptr[plen] != '#') plen++;
    while (plen > 0 && u->path.ptr[plen - 1] == '/') plen--;
    /* scheme "://" host ([host] for IPv6) [":" port] path NUL */
    if (u->host.len > RSD_URL_MAX_BYTES || plen > RSD_URL_MAX_BYTES ||
        (u->tls ? 8u : 7u) + u->host.len + (u->host_kind == RSD_HOST_IPV6 ? 2u : 0u) +
                (size_t)portlen + plen + 1 > cap)
        return RSD_ERR_BUFFER;
    memcpy(buf, u->tls ? "https://" : "http://", u->tls ? 8u : 7u);
    n = u->tls ? 8u : 7u;
    if (u->host_kind == RSD_HOST_IPV6) buf[n++] = '[';
    for (i = 0; i < u->host.len; i++) buf[n++] = rsdi_ascii_lower(u->host.ptr[i]);
    if (u->host_kind == RSD_HOST_IPV6) buf[n++] = ']';
    if (portlen > 0) {
        memcpy(buf + n, port, (size_t)portlen);
        n += (size_t)portlen;
    }
    if (plen) memcpy(buf + n, u->path.ptr, plen);
    n += plen;
    buf[n] = '\0';
    return (int)n;
}

/* ==== >>url end =========================================================== */

/* ==== >>httpparse (implementation) ======================================== */
/* RFC 9110 tchar as a 256-bit map. */
static const uint32_t rsdi_http_tchar_map[8] = {
    0x00000000u, 0x03ff6cfau, 0xc7fffffeu, 0x57ffffffu, 0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u};
#define RSDI_HTTP_TCHAR(c) \
    ((rsdi_http_tchar_map[(unsigned char)(c) >> 5] >> ((unsigned char)(c) & 31)) & 1u)
/* Field-value / reason byte: HTAB, SP..'~', obs-text (0x80..0xFF). */
#define RSDI_HTTP_VCHAR(c) \
    ((unsigned char)(c) == 0x09 || ((unsigned char)(c) >= 0x20 && (unsigned char)(c) != 0x7F))

/* The last_len shortcut: is the blank line that ends a head somewhere in
   buf[last_len-3 .. len)? (A previous call saw buf[0..last_len) and said PENDING,
   so the end can only be in the new bytes or straddle the old end.) */
RSDI_PRIVATE bool rsdi_http_head_maybe_complete(const char *buf, size_t len, size_t last_len) {
    size_t i = last_len >= 3 ? last_len - 3 : 0;
    while (i < len) {
        const char *nl = (const char *)memchr(buf + i, '\n', len - i);
        if (!nl) return false;
        i = (size_t)(nl - buf) + 1;
        if (i < len && buf[i] == '\n') return true;
        if (i + 1 < len && buf[i] == '\r' && buf[i + 1] == '\n') return true;
    }
    return false;
}

/* Matches a literal at *pp: RSD_OK (advanced), RSD_PENDING (input is a prefix of
   it), RSD_ERR_PROTOCOL (mismatch). */
RSDI_PRIVATE int rsdi_http_expect(const char **pp, const char *e, const char *lit, size_t n) {
    size_t have = (size_t)(e - *pp), cmp = have < n ? have : n;
    if (memcmp(*pp, lit, cmp) != 0) return RSD_ERR_PROTOCOL;
    if (have < n) return RSD_PENDING;
    *pp += n;
    return RSD_OK;
}

/* Line end at *pp: CR LF or a bare LF. RSD_OK (advanced), PENDING, or PROTOCOL. */
RSDI_PRIVATE int rsdi_http_eol(const char **pp, const char *e) {
    const char *p = *pp;
    if (p == e) return RSD_PENDING;
    if (*p == '\n') {
        *pp = p + 1;
        return RSD_OK;
    }
    if (*p != '\r') return RSD_ERR_PROTOCOL;
    if (p + 1 == e) return RSD_PENDING;
    if (p[1] != '\n') return RSD_ERR_PROTOCOL;
    *pp = p + 2;
    return RSD_OK;
}

/* "HTTP/1.x" at *pp; sets *minor (0 or 1). */
RSDI_PRIVATE int rsdi_http_version(const char **pp, const char *e, int *minor) {
    int r = rsdi_http_expect(pp, e, "HTTP/1.", 7);
    if (r != RSD_OK) return r;
    if (*pp == e) return RSD_PENDING;
    if (**pp != '0' && **pp != '1') return RSD_ERR_PROTOCOL;
    *minor = **pp - '0';
    (*pp)++;
    return RSD_OK;
}

/* Header fields up to and including the blank line. */
RSDI_PRIVATE int rsdi_http_headers(const char **pp, const char *e, rsd_http_header *hdrs,
                                   size_t *num) {
    const char *p = *pp;
    size_t n = 0;
    int r;
    for (;;) {
        const char *name, *val, *vend;
        if (p == e) return RSD_PENDING;
        if (*p == '\r' || *p == '\n') {
            r = rsdi_http_eol(&p, e);
            if (r != RSD_OK) return r;
            break;
        }
        if (n == RSD_HTTP_MAX_HEADERS) return RSD_ERR_HEADERS_TOO_LARGE;
        name = p;
        while (p < e && RSDI_HTTP_TCHAR(*p)) p++;
        if (p == e) return RSD_PENDING;
        /* Empty name, whitespace before ':' and obs-fold (a line starting with
           SP/HTAB) all end up here. */
        if (*p != ':' || p == name) return RSD_ERR_PROTOCOL;
        hdrs[n].name.ptr = name;
        hdrs[n].name.len = (size_t)(p - name);
        p++;
        while (p < e && (*p == ' ' || *p == '\t')) p++;
        val = vend = p;
        while (p < e && RSDI_HTTP_VCHAR(*p)) {
            if (*p != ' ' && *p != '\t') vend = p + 1;
            p++;
        }
        r = rsdi_http_eol(&p, e);
        if (r != RSD_OK) return r;
        hdrs[n].value.ptr = val;
        hdrs[n].value.len = (size_t)(vend - val);
        n++;
    }
    *num = n;
    *pp = p;
    return RSD_OK;
}

/* Walks a comma-separated list: the next element of v (OWS-trimmed, maybe empty)
   starting at *pos; false at the end. */
RSDI_PRIVATE bool rsdi_http_list_next(rsd_str v, size_t *pos, rsd_str *elem) {
    size_t i = *pos, a, b;
    if (i > v.len) return false;
    a = i;
    while (i < v.len && v.ptr[i] != ',') i++;
    b = i;
    while (a < b && (v.ptr[a] == ' ' || v.ptr[a] == '\t')) a++;
    while (b > a && (v.ptr[b - 1] == ' ' || v.ptr[b - 1] == '\t')) b--;
    elem->ptr = v.ptr + a;
    elem->len = b - a;
    *pos = i + 1;
    return true;
}

/* Framing from the headers (RFC 9112 section 6). */
RSDI_PRIVATE int rsdi_http_framing(const rsd_http_header *h, size_t n, int minor, bool request,
                                   rsd_http_framing *f, bool *expect_continue) {
    size_t i, pos;
    rsd_str el;
    int64_t cl = -1;
    bool te_seen = false, te_last_chunked = false, conn_close = false, conn_ka = false;
    int chunked_count = 0;
    if (expect_continue) *expect_continue = false;
    for (i = 0; i < n; i++) {
        rsd_str name = h[i].name, val = h[i].value;
        if (rsdi_ieq_lit(name.ptr, name.len, "content-length")) {
            pos = 0;
            while (rsdi_http_list_next(val, &pos, &el)) {
                int64_t v = 0;
                size_t j;
                if (el.len == 0) return RSD_ERR_PROTOCOL;
                for (j = 0; j < el.len; j++) {
                    int d = el.ptr[j] - '0';
                    if (d < 0 || d > 9) return RSD_ERR_PROTOCOL;
                    if (v > (INT64_MAX - d) / 10) return RSD_ERR_PROTOCOL;
                    v = v * 10 + d;
                }
                if (cl >= 0 && v != cl) return RSD_ERR_PROTOCOL;
                cl = v;
            }
        } else if (rsdi_ieq_lit(name.ptr, name.len, "transfer-encoding")) {
            te_seen = true;
            pos = 0;
            while (rsdi_http_list_next(val, &pos, &el)) {
                size_t tl = 0;
                if (el.len == 0) continue;
                while (tl < el.len && el.ptr[tl] != ';' && el.ptr[tl] != ' ' && el.ptr[tl] != '\t') tl++;
                te_last_chunked = rsdi_ieq_lit(el.ptr, tl, "chunked");
                if (te_last_chunked) chunked_count++;
            }
        } else if (rsdi_ieq_lit(name.ptr, name.len, "connection")) {
            pos = 0;
            while (rsdi_http_list_next(val, &pos, &el)) {
                if (rsdi_ieq_lit(el.ptr, el.len, "close")) conn_close = true;
                else if (rsdi_ieq_lit(el.ptr, el.len, "keep-alive")) conn_ka = true;
            }
        } else if (request && expect_continue && minor == 1 &&
                   rsdi_ieq_lit(name.ptr, name.len, "expect")) {
            if (rsdi_ieq_lit(val.ptr, val.len, "100-continue")) *expect_continue = true;
        }
    }
    f->content_length = cl;
    f->chunked = false;
    f->close = conn_close || (minor == 0 && !conn_ka);
    if (te_seen) {
        /* HTTP/1.0 with Transfer-Encoding is faulty framing (9112 6.1); chunked
           applied twice or not last is malformed. */
        if (minor == 0 || chunked_count > 1) return RSD_ERR_PROTOCOL;
        if (request) {
            if (cl >= 0 || !te_last_chunked) return RSD_ERR_PROTOCOL;
            f->chunked = true;
        } else {
            f->content_length = -1; /* Transfer-Encoding overrides Content-Length */
            if (te_last_chunked) f->chunked = true;
            else if (chunked_count) return RSD_ERR_PROTOCOL;
            else f->close = true; /* body runs until the connection closes */
        }
    }
    return RSD_OK;
}

RSD_API int rsd_http_parse_response(const char *buf, size_t len, size_t last_len,
                                    rsd_http_response_head *out, size_t *consumed) {
    const char *p = buf, *e = buf + len, *reason;
    int r, st;
    if (!out || !consumed || (!buf && len)) return RSD_ERR_ARG;
    if (len == 0) return RSD_PENDING;
    if (last_len > 0 && last_len <= len && !rsdi_http_head_maybe_complete(buf, len, last_len))
        return RSD_PENDING;
    out->num_headers = 0;
    r = rsdi_http_version(&p, e, &out->minor_version);
    if (r != RSD_OK) return r;
    if (p == e) return RSD_PENDING;
    if (*p++ != ' ') return RSD_ERR_PROTOCOL;
    if (e - p < 3) {
        /* partial status: report a bad byte now rather than at the end */
        if (p == e) return RSD_PENDING;
        if (*p < '1' || *p > '9') return RSD_ERR_PROTOCOL;
        for (p++; p < e; p++)
            if (*p < '0' || *p > '9') return RSD_ERR_PROTOCOL;
        return RSD_PENDING;
    }
    if (p[0] < '1' || p[0] > '9' || p[1] < '0' || p[1] > '9' || p[2] < '0' || p[2] > '9')
        return RSD_ERR_PROTOCOL;
    st = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
    p += 3;
    if (p == e) return RSD_PENDING;
    if (*p == ' ') p++;
    else if (*p != '\r' && *p != '\n') return RSD_ERR_PROTOCOL;
    reason = p;
    while (p < e && RSDI_HTTP_VCHAR(*p)) p++;
    out->status = st;
    out->reason.ptr = reason;
    out->reason.len = (size_t)(p - reason);
    r = rsdi_http_eol(&p, e);
    if (r != RSD_OK) return r;
    r = rsdi_http_headers(&p, e, out->headers, &out->num_headers);
    if (r != RSD_OK) return r;
    r = rsdi_http_framing(out->headers, out->num_headers, out->minor_version, false,
                          &out->framing, NULL);
    if (r != RSD_OK) return r;
    *consumed = (size_t)(p - buf);
    return RSD_OK;
}

RSD_API int rsd_http_parse_request(const char *buf, size_t len, size_t last_len,
                                   rsd_http_request_head *out, size_t *consumed) {
    const char *p = buf, *e = buf + len, *tok;
    int r;
    if (!out || !consumed || (!buf && len)) return RSD_ERR_ARG;
    if (len == 0) return RSD_PENDING;
    if (last_len > 0 && last_len <= len && !rsdi_http_head_maybe_complete(buf, len, last_len))
        return RSD_PENDING;
    out->num_headers = 0;
    out->expect_continue = false;
    /* RFC 9112 2.2: ignore empty lines before the request line (a client's stray
       CRLF after a body). */
    while (p < e && (*p == '\r' || *p == '\n')) {
        r = rsdi_http_eol(&p, e);
        if (r != RSD_OK) return r;
    }
    tok = p;
    while (p < e && RSDI_HTTP_TCHAR(*p)) p++;
    if (p == e) return RSD_PENDING;
    if (*p != ' ' || p == tok) return RSD_ERR_PROTOCOL;
    out->method.ptr = tok;
    out->method.len = (size_t)(p - tok);
    tok = ++p;
    while (p < e && (unsigned char)*p > 0x20 && (unsigned char)*p < 0x7F) p++;
    if (p == e) return RSD_PENDING;
    if (*p != ' ' || p == tok) return RSD_ERR_PROTOCOL;
    out->target.ptr = tok;
    out->target.len = (size_t)(p - tok);
    p++;
    r = rsdi_http_version(&p, e, &out->minor_version);
    if (r != RSD_OK) return r;
    r = rsdi_http_eol(&p, e);
    if (r != RSD_OK) return r;
    r = rsdi_http_headers(&p, e, out->headers, &out->num_headers);
    if (r != RSD_OK) return r;
    r = rsdi_http_framing(out->headers, out->num_headers, out->minor_version, true,
                          &out->framing, &out->expect_continue);
    if (r != RSD_OK) return r;
    *consumed = (size_t)(p - buf);
    return RSD_OK;
}

RSD_API rsd_str rsd_http_header_get(const rsd_http_header *h, size_t n, const char *name) {
    rsd_str none;
    size_t i, nl;
    none.ptr = NULL;
    none.len = 0;
    if (!h || !name) return none;
    nl = strlen(name);
    for (i = 0; i < n; i++) {
        size_t j;
        if (h[i].name.len != nl) continue;
        for (j = 0; j < nl; j++)
            if (rsdi_ascii_lower(h[i].name.ptr[j]) != rsdi_ascii_lower(name[j])) break;
        if (j == nl) return h[i].value;
    }
    return none;
}

RSD_API bool rsd_http_response_bodyless(rsd_str method, int status) {
    if (method.len == 4 && method.ptr && memcmp(method.ptr, "HEAD", 4) == 0) return true;
    return (status >= 100 && status < 200) || status == 204 || status == 304;
}

/* Dechunk states (rsd_http_dechunk.state; 0 = expecting the first size line). */
enum {
    RSDI_DC_SIZE = 0,  /* hex digits of a chunk size */
    RSDI_DC_EXT_WS,    /* after the digits: BWS, then ';' or the line end */
    RSDI_DC_EXT,       /* chunk extension bytes up to the line end */
    RSDI_DC_SIZE_LF,   /* CR seen on the size line */
    RSDI_DC_DATA,      /* chunk_left data bytes */
    RSDI_DC_DATA_CR,   /* CR LF (or LF) after the data */
    RSDI_DC_DATA_LF,
    RSDI_DC_TRAILER_START, /* start of a trailer line or the final blank line */
    RSDI_DC_TRAILER,
    RSDI_DC_TRAILER_LF,
    RSDI_DC_END_LF,    /* CR of the final blank line seen */
    RSDI_DC_DONE,
    RSDI_DC_ERROR
};

/* Largest chunk size accepted (2^62). */
#define RSDI_DC_MAX_SIZE ((uint64_t)1 << 62)

RSD_API int rsd_http_dechunk_step(rsd_http_dechunk *d, char *buf, size_t *len) {
    size_t r = 0, w = 0, n;
    if (!d || !len || (!buf && *len)) return RSD_ERR_ARG;
    n = *len;
    if (d->state == RSDI_DC_DONE) {
        *len = 0;
        d->rest = n;
        return RSD_OK;
    }
    if (d->state < RSDI_DC_SIZE || d->state > RSDI_DC_DONE) {
        d->state = RSDI_DC_ERROR;
        *len = 0;
        return RSD_ERR_PROTOCOL;
    }
    while (r < n) {
        char c;
        if (d->state == RSDI_DC_DATA) {
            size_t k = n - r;
            if ((uint64_t)k > d->chunk_left) k = (size_t)d->chunk_left;
            if (w != r) memmove(buf + w, buf + r, k);
            w += k;
            r += k;
            d->chunk_left -= k;
            d->total += k;
            if (d->chunk_left == 0) d->state = RSDI_DC_DATA_CR;
            continue;
        }
        c = buf[r++];
        d->overhead++;
        if (d->overhead > (uint64_t)RSD_HTTP_CHUNK_OVERHEAD_SLACK + d->total / 2) goto fail;
        switch (d->state) {
        case RSDI_DC_SIZE: {
            int v = rsdi_hexval(c);
            if (v >= 0) {
                if (d->line_bytes >= 16) goto fail;
                if (d->chunk_left > (RSDI_DC_MAX_SIZE - (uint64_t)v) / 16) goto fail;
                d->chunk_left = d->chunk_left * 16 + (uint64_t)v;
                d->line_bytes++;
                break;
            }
            if (d->line_bytes == 0) goto fail;
            if (c == ' ' || c == '\t') d->state = RSDI_DC_EXT_WS;
            else if (c == ';') d->state = RSDI_DC_EXT;
            else if (c == '\r') d->state = RSDI_DC_SIZE_LF;
            else if (c == '\n') goto size_done;
            else goto fail;
            d->line_bytes++;
            break;
        }
        case RSDI_DC_EXT_WS:
            if (++d->line_bytes > RSD_HTTP_CHUNK_LINE_MAX) goto fail;
            if (c == ' ' || c == '\t') break;
            if (c == ';') d->state = RSDI_DC_EXT;
            else if (c == '\r') d->state = RSDI_DC_SIZE_LF;
            else if (c == '\n') goto size_done;
            else goto fail;
            break;
        case RSDI_DC_EXT:
            if (++d->line_bytes > RSD_HTTP_CHUNK_LINE_MAX) goto fail;
            if (c == '\r') d->state = RSDI_DC_SIZE_LF;
            else if (c == '\n') goto size_done;
            else if (!RSDI_HTTP_VCHAR(c)) goto fail;
            break;
        case RSDI_DC_SIZE_LF:
            if (c != '\n') goto fail;
        size_done:
            d->line_bytes = 0;
            d->state = d->chunk_left ? RSDI_DC_DATA : RSDI_DC_TRAILER_START;
            break;
        case RSDI_DC_DATA_CR:
            if (c == '\r') d->state = RSDI_DC_DATA_LF;
            else if (c == '\n') d->state = RSDI_DC_SIZE;
            else goto fail;
            break;
        case RSDI_DC_DATA_LF:
            if (c != '\n') goto fail;
            d->state = RSDI_DC_SIZE;
            break;
        case RSDI_DC_TRAILER_START:
            if (c == '\r') { d->state = RSDI_DC_END_LF; break; }
            if (c == '\n') { d->state = RSDI_DC_DONE; break; }
            /* a trailer field line: must start with a tchar (no obs-fold) */
            if (!RSDI_HTTP_TCHAR(c)) goto fail;
            if (++d->line_bytes > RSD_HTTP_TRAILER_MAX) goto fail;
            d->state = RSDI_DC_TRAILER;
            break;
        case RSDI_DC_TRAILER:
            if (c == '\r') d->state = RSDI_DC_TRAILER_LF;
            else if (c == '\n') d->state = RSDI_DC_TRAILER_START;
            else if (!RSDI_HTTP_VCHAR(c)) goto fail;
            else if (++d->line_bytes > RSD_HTTP_TRAILER_MAX) goto fail;
            break;
        case RSDI_DC_TRAILER_LF:
            if (c != '\n') goto fail;
            d->state = RSDI_DC_TRAILER_START;
            break;
        case RSDI_DC_END_LF:
            if (c != '\n') goto fail;
            d->state = RSDI_DC_DONE;
            break;
        default:
            goto fail;
        }
        if (d->state == RSDI_DC_DONE) {
            d->rest = n - r;
            if (d->rest && w != r) memmove(buf + w, buf + r, d->rest);
            *len = w;
            return RSD_OK;
        }
    }
    *len = w;
    return RSD_PENDING;
fail:
    d->state = RSDI_DC_ERROR;
    *len = w;
    return RSD_ERR_PROTOCOL;
}

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
