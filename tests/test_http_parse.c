/* Pure HTTP/URL parsers: rsd_url_parse/key, rsd_http_parse_response/request,
   rsd_http_header_get, rsd_http_response_bodyless, rsd_http_dechunk_step.
   Inputs are also placed against a PROT_NONE guard page so any over-read faults. */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency_http.h"
#include "rsd_test.h"
#include "guard_page.h"

/* ---- guard page: copy n bytes so they end exactly at a PROT_NONE page -------- */
static char *guard_base;
static size_t guard_page;

static char *guarded(const char *src, size_t n) {
    if (!guard_base && !(guard_base = (char *)rsdt_guard(2, &guard_page))) return NULL;
    if (n > guard_page * 2) return NULL;
    memcpy(guard_base + guard_page * 2 - n, src, n);
    return guard_base + guard_page * 2 - n;
}

static bool view_inside(rsd_str v, const char *buf, size_t len) {
    if (v.len == 0) return true;
    return v.ptr >= buf && v.ptr + v.len <= buf + len;
}

/* ---- response helpers ------------------------------------------------------- */
/* Parses whole, then every prefix (PENDING expected), then byte-at-a-time with
   last_len; all against the guard page. Returns the whole-buffer result. */
static int resp_all_ways(const char *msg, size_t n, rsd_http_response_head *out, size_t *consumed) {
    size_t i, c2 = 0;
    int r, r2 = RSD_PENDING;
    rsd_http_response_head h2;
    const char *g = guarded(msg, n);
    if (!g) return -999;
    r = rsd_http_parse_response(g, n, 0, out, consumed);
    for (i = 0; i < n; i++) {
        const char *gp = guarded(msg, i);
        int rp = rsd_http_parse_response(gp, i, 0, &h2, &c2);
        if (r == RSD_OK && rp != RSD_PENDING && i < *consumed) {
            printf("  prefix %zu of a valid response gave %d\n", i, rp);
            return -998;
        }
        if (r < 0 && rp != RSD_PENDING && rp != r) {
            printf("  prefix %zu gave %d, whole gave %d\n", i, rp, r);
            return -997;
        }
    }
    /* byte at a time with last_len; the same buffer grows */
    g = guarded(msg, n);
    for (i = 1; i <= n; i++) {
        r2 = rsd_http_parse_response(g, i, i - 1, &h2, &c2);
        if (r2 != RSD_PENDING) break;
    }
    if (r == RSD_OK) {
        g = guarded(msg, n);
        r = rsd_http_parse_response(g, n, 0, out, consumed);
        if (r2 != RSD_OK || c2 != *consumed || h2.status != out->status ||
            h2.num_headers != out->num_headers) {
            printf("  byte-at-a-time gave %d (consumed %zu), whole %d (%zu)\n", r2, c2, r, *consumed);
            return -996;
        }
    }
    return r;
}

static void test_response_basic(void) {
    static const char m[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                            "Content-Length: 17\r\nServer: llama.cpp\r\n\r\n{\"status\":\"ok\"}xx";
    rsd_http_response_head h;
    size_t c = 0, i;
    int r = resp_all_ways(m, sizeof m - 1, &h, &c);
    REQUIRE(r == RSD_OK);
    CHECK_EQ_INT(c, sizeof m - 1 - 17);
    CHECK_EQ_INT(h.minor_version, 1);
    CHECK_EQ_INT(h.status, 200);
    CHECK(rsd_str_eq_c(h.reason, "OK"));
    CHECK_EQ_INT(h.num_headers, 3);
    CHECK(rsd_str_eq_c(h.headers[0].name, "Content-Type"));
    CHECK(rsd_str_eq_c(h.headers[0].value, "application/json"));
    CHECK(rsd_str_eq_c(rsd_http_header_get(h.headers, h.num_headers, "SERVER"), "llama.cpp"));
    CHECK(rsd_http_header_get(h.headers, h.num_headers, "X-None").ptr == NULL);
    CHECK_EQ_INT(h.framing.content_length, 17);
    CHECK(!h.framing.chunked);
    CHECK(!h.framing.close);
    for (i = 0; i < h.num_headers; i++) {
        CHECK(view_inside(h.headers[i].name, guard_base + guard_page * 2 - (sizeof m - 1), sizeof m - 1));
    }
}

static void test_response_forms(void) {
    rsd_http_response_head h;
    size_t c = 0;
    /* bare LF line endings are accepted (as picohttpparser does) */
    static const char lf[] = "HTTP/1.0 404 Not Found\nX-A:  v  \n\n";
    /* no reason phrase, no SP */
    static const char noreason[] = "HTTP/1.1 204\r\n\r\n";
    static const char emptyreason[] = "HTTP/1.1 500 \r\nA:\r\n\r\n";
    REQUIRE(resp_all_ways(lf, sizeof lf - 1, &h, &c) == RSD_OK);
    CHECK_EQ_INT(c, sizeof lf - 1);
    CHECK_EQ_INT(h.minor_version, 0);
    CHECK_EQ_INT(h.status, 404);
    CHECK(rsd_str_eq_c(h.reason, "Not Found"));
    CHECK(rsd_str_eq_c(h.headers[0].value, "v"));
    CHECK(h.framing.close);               /* HTTP/1.0 default */
    CHECK_EQ_INT(h.framing.content_length, -1);
    REQUIRE(resp_all_ways(noreason, sizeof noreason - 1, &h, &c) == RSD_OK);
    CHECK_EQ_INT(h.status, 204);
    CHECK_EQ_INT(h.reason.len, 0);
    REQUIRE(resp_all_ways(emptyreason, sizeof emptyreason - 1, &h, &c) == RSD_OK);
    CHECK_EQ_INT(h.status, 500);
    CHECK_EQ_INT(h.reason.len, 0);
    CHECK_EQ_INT(h.num_headers, 1);
    CHECK_EQ_INT(h.headers[0].value.len, 0);
}

/* ---- request ---------------------------------------------------------------- */
static void test_request_basic(void) {
    static const char m[] = "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
                            "Content-Length: 2\r\nExpect: 100-Continue\r\n\r\n{}";
    rsd_http_request_head h;
    size_t c = 0, i, c2 = 0;
    const char *g = guarded(m, sizeof m - 1);
    int r = rsd_http_parse_request(g, sizeof m - 1, 0, &h, &c);
    REQUIRE(r == RSD_OK);
    CHECK_EQ_INT(c, sizeof m - 1 - 2);
    CHECK(rsd_str_eq_c(h.method, "POST"));
    CHECK(rsd_str_eq_c(h.target, "/v1/chat/completions?x=1"));
    CHECK_EQ_INT(h.minor_version, 1);
    CHECK_EQ_INT(h.framing.content_length, 2);
    CHECK(h.expect_continue);
    CHECK(!h.framing.close);
    for (i = 0; i < c; i++) {
        rsd_http_request_head h2;
        const char *gp = guarded(m, i);
        CHECK_EQ_INT(rsd_http_parse_request(gp, i, 0, &h2, &c2), RSD_PENDING);
    }
    g = guarded(m, sizeof m - 1);
    for (i = 1; i <= sizeof m - 1; i++) {
        r = rsd_http_parse_request(g, i, i - 1, &h, &c2);
        if (r != RSD_PENDING) break;
    }
    CHECK_EQ_INT(r, RSD_OK);
    CHECK_EQ_INT(c2, c);
}

/* ---- bodyless --------------------------------------------------------------- */
static void test_bodyless(void) {
    CHECK(rsd_http_response_bodyless(rsd_str_c("HEAD"), 200));
    CHECK(rsd_http_response_bodyless(rsd_str_c("GET"), 204));
    CHECK(rsd_http_response_bodyless(rsd_str_c("GET"), 304));
    CHECK(rsd_http_response_bodyless(rsd_str_c("GET"), 100));
    CHECK(rsd_http_response_bodyless(rsd_str_c("GET"), 199));
    CHECK(!rsd_http_response_bodyless(rsd_str_c("GET"), 200));
    CHECK(!rsd_http_response_bodyless(rsd_str_c("POST"), 404));
    CHECK(!rsd_http_response_bodyless(rsd_str_c("head"), 200)); /* methods are case-sensitive */
}

/* ---- dechunk ---------------------------------------------------------------- */
/* Decodes msg in one call, and split at every position into two calls; both must
   give want (data) and want_rest bytes after the body. */
static void dechunk_check(const char *msg, size_t n, const char *want, size_t want_rest) {
    char *buf, out[4096];
    size_t split, wl = strlen(want);
    for (split = 0; split <= n; split++) {
        rsd_http_dechunk d;
        size_t l1 = split, l2 = n - split, o = 0;
        int r;
        memset(&d, 0, sizeof d);
        buf = guarded(msg, n); /* the input ends at the guard page */
        REQUIRE(buf != NULL);
        r = rsd_http_dechunk_step(&d, buf, &l1);
        memcpy(out, buf, l1);
        o = l1;
        if (r == RSD_OK) {
            /* finished within the first part */
            CHECK(split >= n - want_rest);
            CHECK_EQ_INT(d.rest, split - (n - want_rest));
        } else {
            CHECK_EQ_INT(r, RSD_PENDING);
            r = rsd_http_dechunk_step(&d, buf + split, &l2);
            CHECK_EQ_INT(r, RSD_OK);
            memcpy(out + o, buf + split, l2);
            o += l2;
            CHECK_EQ_INT(d.rest, want_rest);
            if (d.rest == want_rest)
                CHECK(memcmp(buf + split + l2, msg + n - want_rest, want_rest) == 0);
        }
        CHECK_EQ_INT(o, wl);
        CHECK(o == wl && memcmp(out, want, wl) == 0);
        CHECK_EQ_INT(d.total, wl);
    }
}

static void test_dechunk_basic(void) {
    static const char a[] = "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    static const char b[] = "4;name=val;q=\"x y\"\r\nwiki\r\n5 ; ext\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n"
                            "0\r\nX-Trailer: 1\r\nY: 2\r\n\r\nHTTP/1.1 200";
    static const char c[] = "a\nabcdefghij\n0\n\n";
    dechunk_check(a, sizeof a - 1, "hello world", 0);
    dechunk_check(b, sizeof b - 1, "wikipedia in\r\n\r\nchunks.", 12);
    dechunk_check(c, sizeof c - 1, "abcdefghij", 0);
}

static void test_dechunk_bytewise(void) {
    static const char b[] = "4;x=y\r\nwiki\r\n5\r\npedia\r\n0\r\nT: v\r\n\r\nnext";
    rsd_http_dechunk d;
    char buf[64], out[64];
    size_t i, o = 0, n = sizeof b - 1;
    int r = RSD_PENDING;
    memset(&d, 0, sizeof d);
    memcpy(buf, b, n);
    for (i = 0; i < n; i++) {
        size_t l = 1;
        r = rsd_http_dechunk_step(&d, buf + i, &l);
        memcpy(out + o, buf + i, l);
        o += l;
        if (r != RSD_PENDING) break;
    }
    CHECK_EQ_INT(r, RSD_OK);
    CHECK_EQ_INT(i, n - 5);
    CHECK_EQ_INT(o, 9);
    CHECK(memcmp(out, "wikipedia", 9) == 0);
    /* after the end, more input is all rest */
    {
        size_t l = 4;
        CHECK_EQ_INT(rsd_http_dechunk_step(&d, buf + i + 1, &l), RSD_OK);
        CHECK_EQ_INT(l, 0);
        CHECK_EQ_INT(d.rest, 4);
    }
}

static void test_dechunk_bad(void) {
    static const char *const bad[] = {
        "\r\n", "x\r\n", "-1\r\n", "5\r\nhelloX", "5\r\nhello\r\r", "5\rx", "1;\x01\r\n",
        "1 x\r\n", "0\r\n bad\r\n", "0\r\nT\x01\r\n", "0\r\n\rx",
        "11111111111111111\r\n",       /* 17 hex digits */
        "4000000000000001\r\n",        /* > 2^62 */
        "ffffffffffffffff\r\n",
    };
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rsd_http_dechunk d;
        char buf[64];
        size_t l = strlen(bad[i]);
        int r;
        memset(&d, 0, sizeof d);
        memcpy(buf, bad[i], l);
        r = rsd_http_dechunk_step(&d, buf, &l);
        if (r != RSD_ERR_PROTOCOL) printf("  case %zu: %d\n", i, r);
        CHECK_EQ_INT(r, RSD_ERR_PROTOCOL);
        l = 0; /* sticky */
        CHECK_EQ_INT(rsd_http_dechunk_step(&d, buf, &l), RSD_ERR_PROTOCOL);
    }
    {   /* exactly 2^62 and 16 digits are fine */
        rsd_http_dechunk d;
        char buf[32];
        size_t l = 18;
        memset(&d, 0, sizeof d);
        memcpy(buf, "4000000000000000\r\n", 18);
        CHECK_EQ_INT(rsd_http_dechunk_step(&d, buf, &l), RSD_PENDING);
        CHECK(d.chunk_left == ((uint64_t)1 << 62));
    }
}

/* ---- URL -------------------------------------------------------------------- */
static void test_url_basic(void) {
    rsd_url u;
    char k[RSD_URL_MAX_BYTES + 1];
    static const char s[] = "HTTP://LocalHost:80/v1/";
    REQUIRE(rsd_url_parse(&u, s, sizeof s - 1) == RSD_OK);
    CHECK(rsd_str_eq_c(u.host, "LocalHost"));
    CHECK_EQ_INT(u.port, 80);
    CHECK(u.port_explicit);
    CHECK(!u.tls);
    CHECK_EQ_INT(u.host_kind, RSD_HOST_NAME);
    CHECK(rsd_str_eq_c(u.path, "/v1/"));
    CHECK_EQ_INT(rsd_target_key_normalise(rsd_str_c(s), k, sizeof k), 16); /* the root: "/v1" dropped */
    CHECK_EQ_STR(k, "http://localhost");
    REQUIRE(rsd_url_parse(&u, "https://[::1]:8443/a?b=c#frag", 29) == RSD_OK);
    CHECK_EQ_INT(u.host_kind, RSD_HOST_IPV6);
    CHECK(rsd_str_eq_c(u.host, "::1"));
    CHECK(rsd_str_eq_c(u.path, "/a?b=c"));
    CHECK_EQ_INT(u.port, 8443);
    CHECK(u.tls);
    CHECK(rsd_target_key_normalise(rsd_str_c("https://[::1]:8443/a?b=c#frag"), k, sizeof k) > 0);
    CHECK_EQ_STR(k, "https://[::1]:8443/a");
    CHECK_EQ_INT(rsd_target_key_normalise(rsd_str_c("https://[::1]:8443/a?b=c#frag"), k, 5), RSD_ERR_BUFFER);
    REQUIRE(rsd_url_parse(&u, "http://127.0.0.1:8080", 21) == RSD_OK);
    CHECK_EQ_INT(u.host_kind, RSD_HOST_IPV4);
    CHECK_EQ_INT(u.path.len, 0);
    CHECK(rsd_target_key_normalise(rsd_str_c("http://127.0.0.1:8080"), k, sizeof k) > 0);
    CHECK_EQ_STR(k, "http://127.0.0.1:8080");
    CHECK_EQ_INT(rsd_url_parse(&u, "http://user@h/", 14), RSD_ERR_URL);
    CHECK_EQ_INT(rsd_url_parse(&u, "ftp://h/", 8), RSD_ERR_URL);
}


/* ---- response: malformed table ------------------------------------------------ */
typedef struct bad_case { const char *msg; int want; } bad_case;

static void test_response_bad(void) {
    static const bad_case cases[] = {
        {"HTTP/2.0 200 OK\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.2 200 OK\r\n\r\n", RSD_ERR_PROTOCOL},
        {"http/1.1 200 OK\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1  200 OK\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 20 OK\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 2000 OK\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 099 OK\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 abc OK\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 O\x01K\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\rX\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nNo-Colon\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nA : b\r\n\r\n", RSD_ERR_PROTOCOL},        /* space before colon */
        {"HTTP/1.1 200 OK\r\n: b\r\n\r\n", RSD_ERR_PROTOCOL},          /* empty name */
        {"HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n", RSD_ERR_PROTOCOL},   /* obs-fold */
        {"HTTP/1.1 200 OK\r\n\tA: b\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nA\x7f: b\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nA(: b\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nA: b\x00" "c\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nA: b\x7f\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nContent-Length: 5,\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", RSD_ERR_PROTOCOL},
        {" HTTP/1.1 200 OK\r\n\r\n", RSD_ERR_PROTOCOL},
        {"\r\nHTTP/1.1 200 OK\r\n\r\n", RSD_ERR_PROTOCOL},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rsd_http_response_head h;
        size_t c = 0, n = strlen(cases[i].msg);
        int r;
        if (i == 17) n = 27; /* the case with an embedded NUL */
        r = resp_all_ways(cases[i].msg, n, &h, &c);
        if (r != cases[i].want) printf("  case %zu: got %d want %d\n", i, r, cases[i].want);
        CHECK_EQ_INT(r, cases[i].want);
    }
}

static void test_response_header_limit(void) {
    char buf[4096];
    rsd_http_response_head h;
    size_t c = 0, n;
    int i;
    n = (size_t)sprintf(buf, "HTTP/1.1 200 OK\r\n");
    for (i = 0; i < RSD_HTTP_MAX_HEADERS; i++) n += (size_t)sprintf(buf + n, "H%d: %d\r\n", i, i);
    memcpy(buf + n, "\r\n", 2);
    REQUIRE(resp_all_ways(buf, n + 2, &h, &c) == RSD_OK);
    CHECK_EQ_INT(h.num_headers, RSD_HTTP_MAX_HEADERS);
    CHECK(rsd_str_eq_c(rsd_http_header_get(h.headers, h.num_headers, "h63"), "63"));
    n += (size_t)sprintf(buf + n, "One-More: x\r\n\r\n");
    CHECK_EQ_INT(resp_all_ways(buf, n, &h, &c), RSD_ERR_HEADERS_TOO_LARGE);
}

/* ---- framing derivation ------------------------------------------------------- */
typedef struct framing_case {
    const char *head;      /* start line + headers, without the final CRLF */
    int want;              /* parser result */
    long long cl;
    int chunked, close, expect;
} framing_case;

static void test_response_framing(void) {
    static const framing_case cases[] = {
        {"HTTP/1.1 200 OK", RSD_OK, -1, 0, 0, 0},
        {"HTTP/1.0 200 OK", RSD_OK, -1, 0, 1, 0},
        {"HTTP/1.0 200 OK\r\nConnection: keep-alive", RSD_OK, -1, 0, 0, 0},
        {"HTTP/1.0 200 OK\r\nConnection: Keep-Alive, close", RSD_OK, -1, 0, 1, 0},
        {"HTTP/1.1 200 OK\r\nConnection: CLOSE", RSD_OK, -1, 0, 1, 0},
        {"HTTP/1.1 200 OK\r\nConnection: upgrade,close", RSD_OK, -1, 0, 1, 0},
        {"HTTP/1.1 200 OK\r\nConnection: closed", RSD_OK, -1, 0, 0, 0},
        {"HTTP/1.1 200 OK\r\nContent-Length: 0", RSD_OK, 0, 0, 0, 0},
        {"HTTP/1.1 200 OK\r\nContent-Length: 007", RSD_OK, 7, 0, 0, 0},
        {"HTTP/1.1 200 OK\r\nContent-Length: 42, 42", RSD_OK, 42, 0, 0, 0},
        {"HTTP/1.1 200 OK\r\ncontent-length: 42\r\nContent-Length: 42", RSD_OK, 42, 0, 0, 0},
        {"HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807", RSD_OK, 9223372036854775807LL, 0, 0, 0},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked", RSD_OK, -1, 1, 0, 0},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: CHUNKED", RSD_OK, -1, 1, 0, 0},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked", RSD_OK, -1, 1, 0, 0},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked", RSD_OK, -1, 1, 0, 0},
        {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked", RSD_OK, -1, 1, 0, 0},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip", RSD_OK, -1, 0, 1, 0},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip", RSD_ERR_PROTOCOL, 0, 0, 0, 0},
        {"HTTP/1.1 200 OK\r\nExpect: 100-continue", RSD_OK, -1, 0, 0, 0},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[512];
        rsd_http_response_head h;
        size_t c = 0;
        int n = sprintf(buf, "%s\r\n\r\n", cases[i].head);
        int r = resp_all_ways(buf, (size_t)n, &h, &c);
        if (r != cases[i].want) printf("  case %zu: got %d\n", i, r);
        CHECK_EQ_INT(r, cases[i].want);
        if (r != RSD_OK) continue;
        CHECK_EQ_INT(c, n);
        if (h.framing.content_length != cases[i].cl || h.framing.chunked != (cases[i].chunked != 0) ||
            h.framing.close != (cases[i].close != 0))
            printf("  case %zu: cl %lld chunked %d close %d\n", i, (long long)h.framing.content_length,
                   h.framing.chunked, h.framing.close);
        CHECK_EQ_INT(h.framing.content_length, cases[i].cl);
        CHECK_EQ_INT(h.framing.chunked, cases[i].chunked);
        CHECK_EQ_INT(h.framing.close, cases[i].close);
    }
}

static int req_parse(const char *msg, size_t n, rsd_http_request_head *h, size_t *c) {
    size_t i, c2 = 0;
    int r, r2 = RSD_PENDING;
    rsd_http_request_head h2;
    const char *g = guarded(msg, n);
    if (!g) return -999;
    r = rsd_http_parse_request(g, n, 0, h, c);
    for (i = 0; i < n; i++) {
        int rp = rsd_http_parse_request(guarded(msg, i), i, 0, &h2, &c2);
        if (r == RSD_OK && rp != RSD_PENDING && i < *c) return -998;
        if (r < 0 && rp != RSD_PENDING && rp != r) return -997;
    }
    g = guarded(msg, n);
    for (i = 1; i <= n; i++) {
        r2 = rsd_http_parse_request(g, i, i - 1, &h2, &c2);
        if (r2 != RSD_PENDING) break;
    }
    if (r == RSD_OK && (r2 != RSD_OK || c2 != *c)) return -996;
    if (r == RSD_OK) r = rsd_http_parse_request(g, n, 0, h, c); /* views into g again */
    return r;
}

static void test_request_framing(void) {
    static const framing_case cases[] = {
        {"GET / HTTP/1.1\r\nHost: a", RSD_OK, -1, 0, 0, 0},
        {"GET / HTTP/1.0", RSD_OK, -1, 0, 1, 0},
        {"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3", RSD_OK, 3, 0, 0, 0},
        {"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked", RSD_OK, -1, 1, 0, 0},
        {"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, Chunked", RSD_OK, -1, 1, 0, 0},
        {"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip", RSD_ERR_PROTOCOL, 0, 0, 0, 0},
        {"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3", RSD_ERR_PROTOCOL, 0, 0, 0, 0},
        {"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4", RSD_ERR_PROTOCOL, 0, 0, 0, 0},
        {"POST /x HTTP/1.0\r\nTransfer-Encoding: chunked", RSD_ERR_PROTOCOL, 0, 0, 0, 0},
        {"POST /x HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3", RSD_OK, 3, 0, 0, 1},
        {"POST /x HTTP/1.1\r\nHost: a\r\nExpect: 100-CONTINUE", RSD_OK, -1, 0, 0, 1},
        {"POST /x HTTP/1.1\r\nHost: a\r\nExpect: 200-ok", RSD_OK, -1, 0, 0, 0},
        {"POST /x HTTP/1.0\r\nExpect: 100-continue", RSD_OK, -1, 0, 1, 0}, /* ignored in 1.0 */
        {"GET / HTTP/1.1\r\nHost: a\r\nConnection: close", RSD_OK, -1, 0, 1, 0},
        {"GET / HTTP/1.0\r\nConnection: keep-alive", RSD_OK, -1, 0, 0, 0},
        {"\r\n\r\nGET / HTTP/1.1\r\nHost: a", RSD_OK, -1, 0, 0, 0},   /* leading empty lines skipped */
        {"\nGET / HTTP/1.1\r\nHost: a", RSD_OK, -1, 0, 0, 0},
        {"OPTIONS * HTTP/1.1\r\nHost: a", RSD_OK, -1, 0, 0, 0},
        {"GET http://a/b HTTP/1.1\r\nHost: a", RSD_OK, -1, 0, 0, 0},
        /* malformed request lines */
        {"GET  / HTTP/1.1", RSD_ERR_PROTOCOL, 0, 0, 0, 0},
        {"GET /  HTTP/1.1", RSD_ERR_PROTOCOL, 0, 0, 0, 0},
        {"GET / HTTP/1.1 ", RSD_ERR_PROTOCOL, 0, 0, 0, 0},
        {"GET / HTTP/2.0", RSD_ERR_PROTOCOL, 0, 0, 0, 0},
        {"GET / http/1.1", RSD_ERR_PROTOCOL, 0, 0, 0, 0},
        {"GET /a\x01 HTTP/1.1\r\nHost: a", RSD_ERR_PROTOCOL, 0, 0, 0, 0},
        {"GET /\xc3\xa9 HTTP/1.1\r\nHost: a", RSD_ERR_PROTOCOL, 0, 0, 0, 0},
        {"G(T / HTTP/1.1", RSD_ERR_PROTOCOL, 0, 0, 0, 0},
        {" GET / HTTP/1.1", RSD_ERR_PROTOCOL, 0, 0, 0, 0},
        {"GET\t/ HTTP/1.1", RSD_ERR_PROTOCOL, 0, 0, 0, 0},
        {"GET / HTTP/1.1\r\nHost : a", RSD_ERR_PROTOCOL, 0, 0, 0, 0},
        {"GET / HTTP/1.1\r\nHost: a\r\n  folded", RSD_ERR_PROTOCOL, 0, 0, 0, 0},
        {"GET / HTTP/1.1\r\n\rHost: a", RSD_ERR_PROTOCOL, 0, 0, 0, 0},
        {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1e3", RSD_ERR_PROTOCOL, 0, 0, 0, 0},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[512];
        rsd_http_request_head h;
        size_t c = 0;
        int n = sprintf(buf, "%s\r\n\r\n", cases[i].head);
        int r = req_parse(buf, (size_t)n, &h, &c);
        if (r != cases[i].want) printf("  case %zu: got %d\n", i, r);
        CHECK_EQ_INT(r, cases[i].want);
        if (r != RSD_OK) continue;
        CHECK_EQ_INT(c, n);
        CHECK_EQ_INT(h.framing.content_length, cases[i].cl);
        CHECK_EQ_INT(h.framing.chunked, cases[i].chunked);
        CHECK_EQ_INT(h.framing.close, cases[i].close);
        CHECK_EQ_INT(h.expect_continue, cases[i].expect);
        if (h.framing.close != (cases[i].close != 0)) printf("  case %zu close\n", i);
    }
}

/* Host (RFC 9112 3.2: 400 for none in HTTP/1.1, two, or a bad value) and transfer
   codings besides chunked (reported as other_codings: the server answers 501). */
static void test_request_host_and_codings(void) {
    static const struct { const char *head; int want; int other; } cases[] = {
        {"GET / HTTP/1.1", RSD_ERR_PROTOCOL, 0},
        {"GET / HTTP/1.1\r\nX: y", RSD_ERR_PROTOCOL, 0},
        {"GET / HTTP/1.1\r\nHost: a\r\nHost: a", RSD_ERR_PROTOCOL, 0},
        {"GET / HTTP/1.1\r\nHost: a\r\nhOsT: b", RSD_ERR_PROTOCOL, 0},
        {"GET / HTTP/1.0\r\nHost: a\r\nHost: b", RSD_ERR_PROTOCOL, 0},
        {"GET / HTTP/1.1\r\nHost: a b", RSD_ERR_PROTOCOL, 0},
        {"GET / HTTP/1.1\r\nHost: user@a", RSD_ERR_PROTOCOL, 0},
        {"GET / HTTP/1.1\r\nHost: a/b", RSD_ERR_PROTOCOL, 0},
        {"GET / HTTP/1.1\r\nHost: a\xc3\xa9", RSD_ERR_PROTOCOL, 0},
        {"GET / HTTP/1.1\r\nHost: \"a\"", RSD_ERR_PROTOCOL, 0},
        {"GET / HTTP/1.0", RSD_OK, 0},
        {"GET / HTTP/1.1\r\nHost:", RSD_OK, 0},
        {"GET / HTTP/1.1\r\nHOST: 127.0.0.1:8080", RSD_OK, 0},
        {"GET / HTTP/1.1\r\nHost: [::1]:8080", RSD_OK, 0},
        {"GET / HTTP/1.1\r\nHost: my-host.example_x~%41", RSD_OK, 0},
        {"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked", RSD_OK, 0},
        {"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked", RSD_OK, 1},
        {"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked", RSD_OK, 1},
        {"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity, chunked", RSD_OK, 1},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[512];
        rsd_http_request_head h;
        size_t c = 0;
        int n = sprintf(buf, "%s\r\n\r\n", cases[i].head);
        int r = req_parse(buf, (size_t)n, &h, &c);
        if (r != cases[i].want) printf("  case %zu: got %d\n", i, r);
        CHECK_EQ_INT(r, cases[i].want);
        if (r == RSD_OK) CHECK_EQ_INT(h.framing.other_codings, cases[i].other);
    }
    { /* responses: no Host rule; other codings are reported */
        rsd_http_response_head h;
        size_t c = 0;
        static const char a[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
        static const char b[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n";
        static const char d[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        CHECK_EQ_INT(rsd_http_parse_response(a, sizeof a - 1, 0, &h, &c), RSD_OK);
        CHECK(h.framing.chunked && h.framing.other_codings);
        CHECK_EQ_INT(rsd_http_parse_response(b, sizeof b - 1, 0, &h, &c), RSD_OK);
        CHECK(h.framing.close && h.framing.other_codings);
        CHECK_EQ_INT(rsd_http_parse_response(d, sizeof d - 1, 0, &h, &c), RSD_OK);
        CHECK(h.framing.chunked && !h.framing.other_codings);
    }
}

static void test_request_header_limit(void) {
    char buf[4096];
    rsd_http_request_head h;
    size_t c = 0, n;
    int i;
    n = (size_t)sprintf(buf, "GET / HTTP/1.1\r\nHost: a\r\n");
    for (i = 1; i < RSD_HTTP_MAX_HEADERS; i++) n += (size_t)sprintf(buf + n, "X-%d:v\r\n", i);
    memcpy(buf + n, "\r\n", 2);
    CHECK_EQ_INT(req_parse(buf, n + 2, &h, &c), RSD_OK);
    CHECK_EQ_INT(h.num_headers, RSD_HTTP_MAX_HEADERS);
    n += (size_t)sprintf(buf + n, "X:\r\n\r\n");
    CHECK_EQ_INT(req_parse(buf, n, &h, &c), RSD_ERR_HEADERS_TOO_LARGE);
}

static void test_parse_args(void) {
    rsd_http_response_head h;
    rsd_http_request_head q;
    size_t c = 0;
    CHECK_EQ_INT(rsd_http_parse_response(NULL, 0, 0, &h, &c), RSD_PENDING);
    CHECK_EQ_INT(rsd_http_parse_response(NULL, 5, 0, &h, &c), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_http_parse_response("HTTP/", 5, 0, NULL, &c), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_http_parse_request("GET ", 4, 0, &q, NULL), RSD_ERR_ARG);
    /* last_len > len is ignored (full parse) */
    CHECK_EQ_INT(rsd_http_parse_response("HTTP/1.1 200 OK\r\n\r\n", 19, 100, &h, &c), RSD_OK);
    CHECK(rsd_http_header_get(NULL, 3, "a").ptr == NULL);
}

/* The last_len shortcut: a resumed call that does not see the blank line returns
   PENDING without a full parse, even when the new bytes are bad; the error shows
   once the blank line arrives. */
static void test_last_len_shortcut(void) {
    static const char m[] = "HTTP/1.1 200 OK\r\nA\x01: b\r\n\r\n";
    rsd_http_response_head h;
    size_t c = 0;
    CHECK_EQ_INT(rsd_http_parse_response(m, 22, 0, &h, &c), RSD_ERR_PROTOCOL);
    CHECK_EQ_INT(rsd_http_parse_response(m, 22, 17, &h, &c), RSD_PENDING);
    CHECK_EQ_INT(rsd_http_parse_response(m, sizeof m - 1, 22, &h, &c), RSD_ERR_PROTOCOL);
    /* the blank line straddling the previous end is found (scan starts at last_len-3) */
    CHECK_EQ_INT(rsd_http_parse_response("HTTP/1.1 200 OK\r\n\r\n", 19, 17, &h, &c), RSD_OK);
    CHECK_EQ_INT(rsd_http_parse_response("HTTP/1.1 200 OK\r\n\r\n", 19, 18, &h, &c), RSD_OK);
    CHECK_EQ_INT(rsd_http_parse_response("HTTP/1.1 200 OK\n\n", 17, 16, &h, &c), RSD_OK);
}

/* ---- dechunk: guard and limits -------------------------------------------------- */
static int dechunk_feed(rsd_http_dechunk *d, const char *s, size_t n, size_t *out_total) {
    char buf[512];
    int r = RSD_PENDING;
    size_t off = 0;
    while (off < n) {
        size_t k = n - off < sizeof buf ? n - off : sizeof buf;
        memcpy(buf, s + off, k);
        off += k;
        r = rsd_http_dechunk_step(d, buf, &k);
        *out_total += k;
        if (r != RSD_PENDING) break;
    }
    return r;
}

static void test_dechunk_guard(void) {
    rsd_http_dechunk d;
    size_t tot = 0, i;
    int r = RSD_PENDING;
    /* 1-byte chunks forever: cut off once overhead > 4096 + data/2 */
    memset(&d, 0, sizeof d);
    for (i = 0; i < 100000 && r == RSD_PENDING; i++) r = dechunk_feed(&d, "1\r\nx\r\n", 5, &tot);
    CHECK_EQ_INT(r, RSD_ERR_PROTOCOL);
    CHECK(i < 2000);
    CHECK(d.overhead <= (uint64_t)RSD_HTTP_CHUNK_OVERHEAD_SLACK + d.total / 2 + 1);
    /* endless extension: cut off by the line limit */
    memset(&d, 0, sizeof d);
    tot = 0;
    r = dechunk_feed(&d, "1;", 2, &tot);
    for (i = 0; i < 10000 && r == RSD_PENDING; i++) r = dechunk_feed(&d, "aaaaaaaa", 8, &tot);
    CHECK_EQ_INT(r, RSD_ERR_PROTOCOL);
    CHECK(i * 8 <= RSD_HTTP_CHUNK_LINE_MAX + 8);
    /* long whitespace run before ';' counts too */
    memset(&d, 0, sizeof d);
    tot = 0;
    r = dechunk_feed(&d, "1", 1, &tot);
    for (i = 0; i < 10000 && r == RSD_PENDING; i++) r = dechunk_feed(&d, "        ", 8, &tot);
    CHECK_EQ_INT(r, RSD_ERR_PROTOCOL);
    /* endless trailers: cut off by the trailer limit */
    memset(&d, 0, sizeof d);
    tot = 0;
    r = dechunk_feed(&d, "0\r\n", 3, &tot);
    for (i = 0; i < 10000 && r == RSD_PENDING; i++) r = dechunk_feed(&d, "X-T: 1234567890\r\n", 17, &tot);
    CHECK_EQ_INT(r, RSD_ERR_PROTOCOL);
    CHECK(i * 17 <= RSD_HTTP_TRAILER_MAX + 17);
    /* a large body in ordinary chunks passes: 4 MiB in 1000-byte chunks */
    {
        static char chunk[1024];
        size_t n;
        memset(&d, 0, sizeof d);
        tot = 0;
        n = (size_t)sprintf(chunk, "3e8\r\n");
        memset(chunk + n, 'z', 1000);
        memcpy(chunk + n + 1000, "\r\n", 2);
        r = RSD_PENDING;
        for (i = 0; i < 4096 && r == RSD_PENDING; i++) r = dechunk_feed(&d, chunk, n + 1002, &tot);
        CHECK_EQ_INT(r, RSD_PENDING);
        r = dechunk_feed(&d, "0\r\n\r\n", 5, &tot);
        CHECK_EQ_INT(r, RSD_OK);
        CHECK_EQ_INT(tot, 4096000);
        CHECK_EQ_INT(d.total, 4096000);
    }
    /* 16-byte chunks (e.g. token streaming) also pass: overhead 6 per 16 */
    memset(&d, 0, sizeof d);
    tot = 0;
    r = RSD_PENDING;
    for (i = 0; i < 10000 && r == RSD_PENDING; i++) r = dechunk_feed(&d, "10\r\n0123456789abcdef\r\n", 22, &tot);
    CHECK_EQ_INT(r, RSD_PENDING);
    CHECK_EQ_INT(tot, 160000);
}

static void test_dechunk_args(void) {
    rsd_http_dechunk d;
    size_t l = 3;
    char b[4] = "0\r\n";
    memset(&d, 0, sizeof d);
    CHECK_EQ_INT(rsd_http_dechunk_step(NULL, b, &l), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_http_dechunk_step(&d, NULL, &l), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_http_dechunk_step(&d, b, NULL), RSD_ERR_ARG);
    l = 0;
    CHECK_EQ_INT(rsd_http_dechunk_step(&d, NULL, &l), RSD_PENDING);
    d.state = 999;
    l = 3;
    CHECK_EQ_INT(rsd_http_dechunk_step(&d, b, &l), RSD_ERR_PROTOCOL);
}

/* Three-way splits at every pair of positions of a message with extensions and trailers. */
static void test_dechunk_split3(void) {
    static const char m[] = "3;a=b\r\nabc\r\n1\r\nd\r\n0;z\r\nT: 1\r\n\r\nREST";
    size_t n = sizeof m - 1, i, j;
    for (i = 0; i <= n; i++) {
        for (j = i; j <= n; j++) {
            rsd_http_dechunk d;
            char buf[64], out[64];
            size_t cuts[4], o = 0, k, rest = 0;
            int r = RSD_PENDING;
            cuts[0] = 0; cuts[1] = i; cuts[2] = j; cuts[3] = n;
            memset(&d, 0, sizeof d);
            memcpy(buf, m, n);
            for (k = 0; k < 3; k++) {
                size_t l = cuts[k + 1] - cuts[k];
                r = rsd_http_dechunk_step(&d, buf + cuts[k], &l);
                memcpy(out + o, buf + cuts[k], l);
                o += l;
                if (r == RSD_OK) {
                    rest = d.rest + (n - cuts[k + 1]);
                    break;
                }
                if (r != RSD_PENDING) break;
            }
            CHECK_EQ_INT(r, RSD_OK);
            CHECK_EQ_INT(o, 4);
            CHECK(memcmp(out, "abcd", 4) == 0);
            CHECK_EQ_INT(rest, 4);
        }
    }
}

/* ---- URL tables --------------------------------------------------------------- */
typedef struct url_case {
    const char *url;
    const char *key;   /* NULL: must be RSD_ERR_URL */
    int kind;
    int port;
} url_case;

static void test_url_table(void) {
    static const url_case cases[] = {
        {"http://localhost", "http://localhost", RSD_HOST_NAME, 80},
        {"http://localhost/", "http://localhost", RSD_HOST_NAME, 80},
        {"HTTP://LocalHost:80/v1/", "http://localhost", RSD_HOST_NAME, 80},
        {"http://h:08080/", "http://h:8080", RSD_HOST_NAME, 8080},
        {"http://H:8080", "http://h:8080", RSD_HOST_NAME, 8080},
        {"http://h:8080/v1", "http://h:8080", RSD_HOST_NAME, 8080},
        {"https://h:0443/v1/", "https://h", RSD_HOST_NAME, 443},
        {"https://Example.COM:443//", "https://example.com", RSD_HOST_NAME, 443},
        {"https://example.com:80", "https://example.com:80", RSD_HOST_NAME, 80},
        {"http://example.com:443/x", "http://example.com:443/x", RSD_HOST_NAME, 443},
        {"http://a-b.c-d.example:8080/v1/models?x=1#frag", "http://a-b.c-d.example:8080/v1/models", RSD_HOST_NAME, 8080},
        {"http://h/a/b//?q/", "http://h/a/b", RSD_HOST_NAME, 80},
        {"http://h#f", "http://h", RSD_HOST_NAME, 80},
        {"http://h:65535", "http://h:65535", RSD_HOST_NAME, 65535},
        {"http://h:00080/", "http://h", RSD_HOST_NAME, 80},
        {"http://127.0.0.1:8080", "http://127.0.0.1:8080", RSD_HOST_IPV4, 8080},
        {"http://0.0.0.0", "http://0.0.0.0", RSD_HOST_IPV4, 80},
        {"http://255.255.255.255", "http://255.255.255.255", RSD_HOST_IPV4, 80},
        {"http://[::1]:8081/", "http://[::1]:8081", RSD_HOST_IPV6, 8081},
        {"http://[::]", "http://[::]", RSD_HOST_IPV6, 80},
        {"http://[FE80::1:2]", "http://[fe80::1:2]", RSD_HOST_IPV6, 80},
        {"http://[1:2:3:4:5:6:7:8]", "http://[1:2:3:4:5:6:7:8]", RSD_HOST_IPV6, 80},
        {"http://[::ffff:192.168.0.1]", "http://[::ffff:192.168.0.1]", RSD_HOST_IPV6, 80},
        {"http://[1::]", "http://[1::]", RSD_HOST_IPV6, 80},
        {"http://[1:2:3:4:5:6:7::]", "http://[1:2:3:4:5:6:7::]", RSD_HOST_IPV6, 80},
        {"http://x1.example2", "http://x1.example2", RSD_HOST_NAME, 80},
        {"http://1.2.3.4.nip.io", "http://1.2.3.4.nip.io", RSD_HOST_NAME, 80},
        /* bad */
        {"", NULL, 0, 0},
        {"http:", NULL, 0, 0},
        {"http://", NULL, 0, 0},
        {"http:///path", NULL, 0, 0},
        {"http:/h", NULL, 0, 0},
        {"ftp://h/", NULL, 0, 0},
        {"httpx://h/", NULL, 0, 0},
        {"//h/", NULL, 0, 0},
        {"h:80", NULL, 0, 0},
        {"http://user@h/", NULL, 0, 0},
        {"http://user:pw@h/", NULL, 0, 0},
        {"http://h:0", NULL, 0, 0},
        {"http://h:65536", NULL, 0, 0},
        {"http://h:123456", NULL, 0, 0},
        {"http://h:", NULL, 0, 0},
        {"http://h:8a", NULL, 0, 0},
        {"http://h:-1", NULL, 0, 0},
        {"http://h?q=1", NULL, 0, 0},
        {"http://h /", NULL, 0, 0},
        {"http://h/a b", NULL, 0, 0},
        {"http://h/\x01", NULL, 0, 0},
        {"http://h/\x7f", NULL, 0, 0},
        {"http://h/\xc3\xa9", NULL, 0, 0},
        {" http://h/", NULL, 0, 0},
        {"http://h/\n", NULL, 0, 0},
        {"http://256.0.0.1", NULL, 0, 0},
        {"http://1.2.3", NULL, 0, 0},
        {"http://1.2.3.4.5", NULL, 0, 0},
        {"http://01.2.3.4", NULL, 0, 0},
        {"http://1..3.4", NULL, 0, 0},
        {"http://1.2.3.4.", NULL, 0, 0},
        {"http://1234", NULL, 0, 0},
        {"http://a.123", NULL, 0, 0},
        {"http://-a.b", NULL, 0, 0},
        {"http://a-.b", NULL, 0, 0},
        {"http://a..b", NULL, 0, 0},
        {".a", NULL, 0, 0},
        {"http://.a", NULL, 0, 0},
        {"http://a./", NULL, 0, 0},
        {"http://a_b/", NULL, 0, 0},
        {"http://a%62/", NULL, 0, 0},
        {"http://[::1", NULL, 0, 0},
        {"http://[::1]x", NULL, 0, 0},
        {"http://[::1]:", NULL, 0, 0},
        {"http://[]", NULL, 0, 0},
        {"http://[:]", NULL, 0, 0},
        {"http://[:::]", NULL, 0, 0},
        {"http://[1::2::3]", NULL, 0, 0},
        {"http://[1:2:3:4:5:6:7:8:9]", NULL, 0, 0},
        {"http://[1:2:3:4:5:6:7]", NULL, 0, 0},
        {"http://[1:2:3:4:5:6:7:8::]", NULL, 0, 0},
        {"http://[12345::]", NULL, 0, 0},
        {"http://[g::]", NULL, 0, 0},
        {"http://[::1%25eth0]", NULL, 0, 0},
        {"http://[1:]", NULL, 0, 0},
        {"http://[:1]", NULL, 0, 0},
        {"http://[::1.2.3]", NULL, 0, 0},
        {"http://[::1.2.3.4:5]", NULL, 0, 0},
        {"http://[1:2:3:4:5:6:7:1.2.3.4]", NULL, 0, 0},
        {"http://::1/", NULL, 0, 0},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rsd_url u, u2;
        char k[RSD_URL_MAX_BYTES + 1], k2[RSD_URL_MAX_BYTES + 1];
        const char *g = guarded(cases[i].url, strlen(cases[i].url));
        int r = rsd_url_parse(&u, g, strlen(cases[i].url));
        if (!cases[i].key) {
            if (r != RSD_ERR_URL) printf("  case %zu (%s) accepted\n", i, cases[i].url);
            CHECK_EQ_INT(r, RSD_ERR_URL);
            continue;
        }
        if (r != RSD_OK) printf("  case %zu (%s): %d\n", i, cases[i].url, r);
        CHECK_EQ_INT(r, RSD_OK);
        if (r != RSD_OK) continue;
        CHECK_EQ_INT(u.host_kind, cases[i].kind);
        CHECK_EQ_INT(u.port, cases[i].port);
        CHECK(view_inside(u.host, g, strlen(cases[i].url)));
        CHECK(view_inside(u.path, g, strlen(cases[i].url)));
        CHECK(view_inside(u.scheme, g, strlen(cases[i].url)));
        r = rsd_target_key_normalise(rsd_str_c(cases[i].url), k, sizeof k);
        CHECK_EQ_INT(r, (int)strlen(cases[i].key));
        CHECK_EQ_STR(k, cases[i].key);
        /* the key parses back, and keys to itself */
        CHECK_EQ_INT(rsd_url_parse(&u2, k, strlen(k)), RSD_OK);
        CHECK(rsd_target_key_normalise(rsd_str_c(k), k2, sizeof k2) > 0);
        CHECK_EQ_STR(k2, k);
        /* exact-size buffer works, one less does not */
        CHECK_EQ_INT(rsd_target_key_normalise(rsd_str_c(cases[i].url), k2, strlen(k) + 1), (int)strlen(k));
        CHECK_EQ_INT(rsd_target_key_normalise(rsd_str_c(cases[i].url), k2, strlen(k)), RSD_ERR_BUFFER);
    }
}

static void test_url_limits(void) {
    static char big[RSD_URL_MAX_BYTES + 2];
    rsd_url u;
    char k[16];
    size_t n;
    n = (size_t)sprintf(big, "http://h/");
    memset(big + n, 'a', sizeof big - n);
    CHECK_EQ_INT(rsd_url_parse(&u, big, RSD_URL_MAX_BYTES), RSD_OK);
    CHECK_EQ_INT(rsd_url_parse(&u, big, RSD_URL_MAX_BYTES + 1), RSD_ERR_URL);
    CHECK_EQ_INT(rsd_url_parse(NULL, "http://h", 8), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_url_parse(&u, NULL, 8), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_url_parse(&u, "http://h", 0), RSD_ERR_URL);
    /* NUL inside the length is a control byte */
    CHECK_EQ_INT(rsd_url_parse(&u, "http://h\0/", 10), RSD_ERR_URL);
    /* labels: 63 ok, 64 not; whole name 253 ok, 254 not */
    {
        char h[300];
        n = (size_t)sprintf(h, "http://");
        memset(h + n, 'a', 63);
        CHECK_EQ_INT(rsd_url_parse(&u, h, n + 63), RSD_OK);
        memset(h + n, 'a', 64);
        CHECK_EQ_INT(rsd_url_parse(&u, h, n + 64), RSD_ERR_URL);
        for (n = 7; n + 2 <= 7 + 253; n += 2) { h[n] = 'a'; h[n + 1] = '.'; }
        h[7 + 252] = 'b';
        CHECK_EQ_INT(rsd_url_parse(&u, h, 7 + 253), RSD_OK);
        h[7 + 253] = 'c';
        CHECK_EQ_INT(rsd_url_parse(&u, h, 7 + 254), RSD_ERR_URL);
    }
    CHECK_EQ_INT(rsd_target_key_normalise(rsd_str_c("http://h"), NULL, sizeof k), RSD_ERR_ARG);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    RUN(test_response_basic);
    RUN(test_response_forms);
    RUN(test_request_basic);
    RUN(test_bodyless);
    RUN(test_dechunk_basic);
    RUN(test_dechunk_bytewise);
    RUN(test_dechunk_bad);
    RUN(test_url_basic);
    RUN(test_response_bad);
    RUN(test_response_header_limit);
    RUN(test_response_framing);
    RUN(test_request_framing);
    RUN(test_request_header_limit);
    RUN(test_parse_args);
    RUN(test_last_len_shortcut);
    RUN(test_dechunk_guard);
    RUN(test_dechunk_args);
    RUN(test_dechunk_split3);
    RUN(test_request_host_and_codings);
    RUN(test_url_table);
    RUN(test_url_limits);
    return RSD_TEST_END();
}
