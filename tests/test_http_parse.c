/* Pure HTTP/URL parsers: rsd_url_parse/key, rsd_http_parse_response/request,
   rsd_http_header_get, rsd_http_response_bodyless, rsd_http_dechunk_step.
   Inputs are also placed against a PROT_NONE guard page so any over-read faults. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include "rsd_test.h"
#include <sys/mman.h>
#include <unistd.h>

/* ---- guard page: copy n bytes so they end exactly at a PROT_NONE page -------- */
static char *guard_base;
static size_t guard_page;

static char *guarded(const char *src, size_t n) {
    if (!guard_base) {
        guard_page = (size_t)sysconf(_SC_PAGESIZE);
        guard_base = (char *)mmap(NULL, guard_page * 3, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (guard_base == (char *)MAP_FAILED) { guard_base = NULL; return NULL; }
        if (mprotect(guard_base + guard_page * 2, guard_page, PROT_NONE) != 0) return NULL;
    }
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
    char buf[4096], out[4096];
    size_t split, wl = strlen(want);
    for (split = 0; split <= n; split++) {
        rsd_http_dechunk d;
        size_t l1 = split, l2 = n - split, o = 0;
        int r;
        memset(&d, 0, sizeof d);
        memcpy(buf, msg, n);
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
    CHECK_EQ_INT(rsd_url_key(&u, k, sizeof k), 19);
    CHECK_EQ_STR(k, "http://localhost/v1");
    REQUIRE(rsd_url_parse(&u, "https://[::1]:8443/a?b=c#frag", 29) == RSD_OK);
    CHECK_EQ_INT(u.host_kind, RSD_HOST_IPV6);
    CHECK(rsd_str_eq_c(u.host, "::1"));
    CHECK(rsd_str_eq_c(u.path, "/a?b=c"));
    CHECK_EQ_INT(u.port, 8443);
    CHECK(u.tls);
    CHECK(rsd_url_key(&u, k, sizeof k) > 0);
    CHECK_EQ_STR(k, "https://[::1]:8443/a");
    CHECK_EQ_INT(rsd_url_key(&u, k, 5), RSD_ERR_BUFFER);
    REQUIRE(rsd_url_parse(&u, "http://127.0.0.1:8080", 21) == RSD_OK);
    CHECK_EQ_INT(u.host_kind, RSD_HOST_IPV4);
    CHECK_EQ_INT(u.path.len, 0);
    CHECK(rsd_url_key(&u, k, sizeof k) > 0);
    CHECK_EQ_STR(k, "http://127.0.0.1:8080");
    CHECK_EQ_INT(rsd_url_parse(&u, "http://user@h/", 14), RSD_ERR_URL);
    CHECK_EQ_INT(rsd_url_parse(&u, "ftp://h/", 8), RSD_ERR_URL);
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
    return RSD_TEST_END();
}
