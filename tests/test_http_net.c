/* HTTP client and server over loopback: keep-alive, framing, limits, timeouts (fake
   clock), stale-connection retry, bad clients, deferred answers, SSE, secrets in logs,
   allocation failures, descriptor hygiene. Only 127.0.0.1, ports from bind(0), no sleeps:
   every wait is a poll() on the sockets involved, bounded by an iteration count. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include "rsd_test.h"
#define TP_POSIX_SOCKET_NAMES /* Windows: these POSIX socket calls go to Winsock */
#include "portable.h"
#include "counting.h"
#if !defined(_WIN32)
#include <sys/resource.h>
#include <sys/wait.h>
#endif

/* ---- helpers -------------------------------------------------------------------- */
static int count_fds(void) { return tp_open_handles(); }

/* poll() over the client's and server's sockets (plus extra fds), then step both. */
static void pump_ex(rsd_http_client *c, rsd_http_server *s, uint64_t now, int timeout_ms,
                    const rsd_pollfd *extra, int nextra) {
    rsd_pollfd fds[96];
    int n = 0, i;
    if (c) { n = rsd_http_client_pollfds(c, fds, 32); if (n > 32) n = 32; }
    if (s) { int m = rsd_http_server_pollfds(s, fds + n, 32); n += m > 32 ? 32 : m; }
    for (i = 0; i < nextra && n < 96; i++) fds[n++] = extra[i];
    /* a host sleeps no longer than the next deadline; 0 = work is waiting */
    if (c && rsd_http_client_next_deadline(c) <= now) timeout_ms = 0;
    if (s && rsd_http_server_next_deadline(s) <= now) timeout_ms = 0;
    (void)poll((struct pollfd *)(void *)fds, (nfds_t)n, timeout_ms);
    if (s) (void)rsd_http_server_step(s, now);
    if (c) (void)rsd_http_client_step(c, now);
}
static void pump(rsd_http_client *c, rsd_http_server *s, uint64_t now) { pump_ex(c, s, now, 50, NULL, 0); }

/* Test server behaviour by path. */
typedef struct srv_ctx {
    rsd_http_sreq_h deferred;       /* "/defer" requests are held here */
    rsd_http_sreq_h streaming;      /* "/sse" */
    int closed_events;
    int requests;
    size_t big;                     /* "/big" body size */
    char last_auth[128];
    char last_host[128];
    char last_body[256];
} srv_ctx;

static char g_big[1 << 20];

static void serve(rsd_http_server *s, srv_ctx *x) {
    rsd_http_server_event ev;
    rsd_http_header ct;
    ct.name = rsd_str_c("Content-Type");
    ct.value = rsd_str_c("text/plain");
    while (rsd_http_server_next_event(s, &ev)) {
        rsd_str t;
        if (ev.type == RSD_HTTP_SEV_CLOSED) { x->closed_events++; continue; }
        x->requests++;
        t = ev.head->target;
        {
            rsd_str a = rsd_http_header_get(ev.head->headers, ev.head->num_headers, "Authorization");
            size_t n = a.len < sizeof x->last_auth - 1 ? a.len : sizeof x->last_auth - 1;
            if (a.ptr) memcpy(x->last_auth, a.ptr, n);
            x->last_auth[a.ptr ? n : 0] = '\0';
        }
        {
            rsd_str a = rsd_http_header_get(ev.head->headers, ev.head->num_headers, "Host");
            size_t n = a.len < sizeof x->last_host - 1 ? a.len : sizeof x->last_host - 1;
            if (a.ptr) memcpy(x->last_host, a.ptr, n);
            x->last_host[a.ptr ? n : 0] = '\0';
        }
        {
            size_t n = ev.body.len < sizeof x->last_body - 1 ? ev.body.len : sizeof x->last_body - 1;
            memcpy(x->last_body, ev.body.ptr, n);
            x->last_body[n] = '\0';
        }
        if (rsd_str_eq_c(t, "/defer")) {
            x->deferred = ev.req;
        } else if (rsd_str_eq_c(t, "/big")) {
            (void)rsd_http_respond(s, ev.req, 200, &ct, 1, g_big, x->big);
        } else if (rsd_str_eq_c(t, "/chunked")) {
            CHECK_EQ_INT(rsd_http_stream_begin(s, ev.req, 200, &ct, 1), RSD_OK);
            CHECK_EQ_INT(rsd_http_stream_write(s, ev.req, "hello ", 6), RSD_OK);
            CHECK_EQ_INT(rsd_http_stream_write(s, ev.req, "chunked ", 8), RSD_OK);
            CHECK_EQ_INT(rsd_http_stream_write(s, ev.req, "world", 5), RSD_OK);
            CHECK_EQ_INT(rsd_http_stream_end(s, ev.req), RSD_OK);
        } else if (rsd_str_eq_c(t, "/sse")) {
            rsd_http_header h;
            h.name = rsd_str_c("Content-Type");
            h.value = rsd_str_c("text/event-stream");
            CHECK_EQ_INT(rsd_http_stream_begin(s, ev.req, 200, &h, 1), RSD_OK);
            x->streaming = ev.req;
        } else if (rsd_str_eq_c(t, "/manyheaders")) {
            rsd_http_header hs[40];
            char vals[40][200];
            int i;
            for (i = 0; i < 40; i++) {
                memset(vals[i], 'v', 199);
                vals[i][199] = '\0';
                hs[i].name = rsd_str_c("X-Filler");
                hs[i].value = rsd_str_c(vals[i]);
            }
            (void)rsd_http_respond(s, ev.req, 200, hs, 40, "x", 1);
        } else if (rsd_str_eq_c(t, "/trunc")) { /* announce 100 bytes, send 10, hang up */
            CHECK_EQ_INT(rsd_http_stream_begin_raw(s, ev.req, 200, &ct, 1, 100), RSD_OK);
            CHECK_EQ_INT(rsd_http_stream_write(s, ev.req, "0123456789", 10), RSD_OK);
            CHECK_EQ_INT(rsd_http_abort(s, ev.req), RSD_OK);
            CHECK_EQ_INT(rsd_http_stream_write(s, ev.req, "x", 1), RSD_ERR_CLOSED);
        } else if (rsd_str_eq_c(t, "/closedelim")) {
            CHECK_EQ_INT(rsd_http_stream_begin_raw(s, ev.req, 200, &ct, 1, -1), RSD_OK);
            CHECK_EQ_INT(rsd_http_stream_write(s, ev.req, "abc", 3), RSD_OK);
            CHECK_EQ_INT(rsd_http_stream_write(s, ev.req, "def", 3), RSD_OK);
            CHECK_EQ_INT(rsd_http_stream_end(s, ev.req), RSD_OK);
        } else if (rsd_str_eq_c(t, "/rawlen")) {
            CHECK_EQ_INT(rsd_http_stream_begin_raw(s, ev.req, 200, &ct, 1, 6), RSD_OK);
            CHECK_EQ_INT(rsd_http_stream_write(s, ev.req, "abc", 3), RSD_OK);
            CHECK_EQ_INT(rsd_http_stream_write(s, ev.req, "def", 3), RSD_OK);
            CHECK_EQ_INT(rsd_http_stream_end(s, ev.req), RSD_OK);
        } else if (rsd_str_eq_c(t, "/echo")) {
            (void)rsd_http_respond(s, ev.req, 200, &ct, 1, ev.body.ptr, ev.body.len);
        } else if (rsd_str_eq_c(t, "/missing")) {
            (void)rsd_http_respond(s, ev.req, 404, NULL, 0, "nope", 4);
        } else {
            (void)rsd_http_respond(s, ev.req, 200, &ct, 1, "ok", 2);
        }
    }
}

static char g_url[128];
static const char *url(rsd_http_server *s, const char *path) {
    snprintf(g_url, sizeof g_url, "http://127.0.0.1:%u%s", (unsigned)rsd_http_server_port(s), path);
    return g_url;
}

/* Runs client+server until the client has an event (bounded). */
static bool exchange(rsd_http_client *c, rsd_http_server *s, srv_ctx *x, uint64_t now, rsd_http_event *ev) {
    int i;
    for (i = 0; i < 400; i++) {
        if (rsd_http_next_event(c, ev)) return true;
        pump(c, s, now);
        if (s) serve(s, x);
    }
    return rsd_http_next_event(c, ev);
}

static bool get(rsd_http_client *c, rsd_http_server *s, srv_ctx *x, const char *path, const char *method,
                uint64_t now, rsd_http_event *ev) {
    rsd_http_request q;
    rsd_http_req_h h;
    memset(&q, 0, sizeof q);
    q.url = url(s, path);
    q.method = method;
    if (rsd_http_send(c, &q, now, &h) != RSD_OK) return false;
    return exchange(c, s, x, now, ev);
}

/* Raw listening socket on 127.0.0.1, port from bind(0). */
static int raw_listen(uint16_t *port) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 8) < 0) { close(fd); return -1; }
    getsockname(fd, (struct sockaddr *)&a, &len);
    *port = ntohs(a.sin_port);
    return fd;
}

static char g_raw_url[128];
static const char *raw_url(uint16_t port, const char *path) {
    snprintf(g_raw_url, sizeof g_raw_url, "http://127.0.0.1:%u%s", (unsigned)port, path);
    return g_raw_url;
}

/* Reads from a blocking-ish raw fd until "\r\n\r\n" (bounded by poll). */
static int raw_read_head(int fd, char *buf, size_t cap) {
    size_t len = 0;
    int i;
    for (i = 0; i < 200 && len < cap - 1; i++) {
        struct pollfd p;
        ssize_t n;
        p.fd = fd; p.events = POLLIN; p.revents = 0;
        if (poll(&p, 1, 50) <= 0) continue;
        n = recv(fd, buf + len, cap - 1 - len, 0);
        if (n <= 0) break;
        len += (size_t)n;
        buf[len] = '\0';
        if (strstr(buf, "\r\n\r\n")) break;
    }
    buf[len] = '\0';
    return (int)len;
}

/* ---- tests ------------------------------------------------------------------------- */
static void test_sse_reader(void) {
    const char *in = ": comment\r\nevent: model_status\ndata: {\"a\":1}\ndata: second\n\n"
                     "data:x\r\rid: 7\ndata\n\nretry: 5\nevent: e\n\n";
    char buf[64], buf2[64];
    rsd_sse_reader r, r2;
    rsd_sse_event ev;
    size_t used, i, n = strlen(in);
    int got = 0, got2 = 0, res;
    const char *p = in;
    char seen[3][64], seen2[3][64];
    rsd_sse_init(&r, buf, sizeof buf);
    while (n) {
        res = rsd_sse_feed(&r, p, n, &used, &ev);
        p += used; n -= used;
        if (res == RSD_OK && got < 3) {
            snprintf(seen[got++], 64, "%.*s|%.*s|%.*s", (int)ev.event.len, ev.event.ptr,
                     (int)ev.data.len, ev.data.ptr, (int)ev.id.len, ev.id.ptr);
        }
        CHECK(res == RSD_OK || res == RSD_PENDING);
    }
    CHECK_EQ_INT(got, 3);
    CHECK_EQ_STR(seen[0], "model_status|{\"a\":1}\nsecond|");
    CHECK_EQ_STR(seen[1], "|x|");
    CHECK_EQ_STR(seen[2], "||7"); /* a bare `data` line dispatches empty data */
    /* byte at a time gives the same events */
    rsd_sse_init(&r2, buf2, sizeof buf2);
    for (i = 0; i < strlen(in); i++) {
        res = rsd_sse_feed(&r2, in + i, 1, &used, &ev);
        CHECK_EQ_INT(used, 1);
        if (res == RSD_OK && got2 < 3)
            snprintf(seen2[got2++], 64, "%.*s|%.*s|%.*s", (int)ev.event.len, ev.event.ptr,
                     (int)ev.data.len, ev.data.ptr, (int)ev.id.len, ev.id.ptr);
    }
    CHECK_EQ_INT(got2, 3);
    if (got2 == 3) {
        CHECK_EQ_STR(seen2[0], seen[0]);
        CHECK_EQ_STR(seen2[1], seen[1]);
        CHECK_EQ_STR(seen2[2], seen[2]);
    }
    /* the third event ("data" with empty value, id 7) */
    {
        const char *in3 = "id: 7\ndata\n\n";
        rsd_sse_init(&r, buf, sizeof buf);
        res = rsd_sse_feed(&r, in3, strlen(in3), &used, &ev);
        CHECK_EQ_INT(res, RSD_OK);
        CHECK_EQ_INT(ev.data.len, 0);
        CHECK(rsd_str_eq_c(ev.id, "7"));
    }
    /* overflow is reported, then the reader recovers */
    {
        char small[4];
        const char *in4 = "data: 123456789\n\ndata: ab\n\n";
        rsd_sse_init(&r, small, sizeof small);
        res = rsd_sse_feed(&r, in4, strlen(in4), &used, &ev);
        CHECK_EQ_INT(res, RSD_ERR_TOO_LARGE);
        res = rsd_sse_feed(&r, in4 + used, strlen(in4) - used, &used, &ev);
        CHECK_EQ_INT(res, RSD_OK);
        CHECK(rsd_str_eq_c(ev.data, "ab"));
    }
}

/* Keep-alive comment frames (":" and a blank line, as later llama.cpp routers send
   every second) before, between and after data lines, and inside an event, fed in two
   pieces split at every byte: the same three events each time, nothing for a frame. */
static void test_sse_keepalive_frames(void) {
    static const char in[] = ":\n\n: ping\r\n\ndata: {\"a\":1}\n\n:\n\n:\n\ndata: two\n:\ndata: lines\n\n"
                             ":\r\n\r\ndata: [DONE]\n\n:\n\n:";
    size_t cut, len = sizeof in - 1;
    for (cut = 0; cut <= len; cut++) {
        char buf[64], seen[4][32];
        rsd_sse_reader r;
        rsd_sse_event ev;
        size_t used, off, n;
        int got = 0, res, piece;
        rsd_sse_init(&r, buf, sizeof buf);
        for (piece = 0; piece < 2; piece++) {
            const char *p = piece ? in + cut : in;
            n = piece ? len - cut : cut;
            for (off = 0; off < n; off += used) {
                res = rsd_sse_feed(&r, p + off, n - off, &used, &ev);
                CHECK(res == RSD_OK || res == RSD_PENDING);
                if (res == RSD_OK && got < 4) snprintf(seen[got++], sizeof seen[0], "%.*s", (int)ev.data.len, ev.data.ptr);
                if (res == RSD_PENDING) break;
            }
        }
        CHECK_EQ_INT(got, 3);
        if (got != 3) { printf("  cut at %u\n", (unsigned)cut); break; }
        CHECK_EQ_STR(seen[0], "{\"a\":1}");
        CHECK_EQ_STR(seen[1], "two\nlines");
        CHECK_EQ_STR(seen[2], "[DONE]");
    }
}

static void test_keepalive_reuse(void) {
    rsd_http_server_desc sd;
    rsd_http_client_desc cd;
    rsd_http_server *s;
    rsd_http_client *c;
    rsd_http_server_info ss;
    rsd_http_client_info cs;
    rsd_http_event ev;
    srv_ctx x;
    int i;
    memset(&sd, 0, sizeof sd); memset(&cd, 0, sizeof cd); memset(&x, 0, sizeof x);
    s = rsd_http_server_create(&sd);
    c = rsd_http_client_create(&cd);
    REQUIRE(s && c);
    CHECK(rsd_http_server_port(s) != 0);
    for (i = 0; i < 5; i++) {
        REQUIRE(get(c, s, &x, "/health", NULL, 1000, &ev));
        CHECK_EQ_INT(ev.result, RSD_OK);
        CHECK_EQ_INT(ev.status, 200);
        CHECK(rsd_str_eq_c(ev.body, "ok"));
        CHECK(rsd_str_eq_c(rsd_http_header_get(ev.headers, ev.num_headers, "content-type"), "text/plain"));
        CHECK_EQ_INT(ev.reused, i > 0);
    }
    REQUIRE(get(c, s, &x, "/missing", NULL, 1000, &ev));
    CHECK_EQ_INT(ev.result, RSD_OK);
    CHECK_EQ_INT(ev.status, 404);
    rsd_http_server_query(s, &ss);
    rsd_http_client_query(c, &cs);
    CHECK_EQ_INT(ss.accepts, 1);
    CHECK_EQ_INT(ss.requests, 6);
    CHECK_EQ_INT(cs.connects, 1);
    CHECK_EQ_INT(cs.reuses, 5);
    rsd_http_client_destroy(c);
    rsd_http_server_destroy(s);
}

/* rsd_http_client_close_idle closes the idle sockets to that host:port only: the next
   request connects anew. */
static void test_close_idle(void) {
    rsd_http_server *s = rsd_http_server_create(NULL);
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_client_info cs;
    rsd_http_event ev;
    srv_ctx x;
    uint16_t port;
    memset(&x, 0, sizeof x);
    REQUIRE(s && c);
    port = rsd_http_server_port(s);
    REQUIRE(get(c, s, &x, "/health", NULL, 1000, &ev));
    CHECK_EQ_INT(ev.status, 200);
    CHECK_EQ_INT(rsd_http_client_close_idle(c, "127.0.0.1", (uint16_t)(port + 1)), 0); /* another port */
    CHECK_EQ_INT(rsd_http_client_close_idle(c, "::1", port), 0);                       /* another address */
    REQUIRE(get(c, s, &x, "/health", NULL, 1000, &ev));
    CHECK_EQ_INT(ev.reused, 1);
    CHECK_EQ_INT(rsd_http_client_close_idle(c, "localhost", port), 1);
    CHECK_EQ_INT(rsd_http_client_close_idle(c, "127.0.0.1", port), 0); /* none left */
    REQUIRE(get(c, s, &x, "/health", NULL, 1000, &ev));
    CHECK_EQ_INT(ev.status, 200);
    CHECK_EQ_INT(ev.reused, 0);
    rsd_http_client_query(c, &cs);
    CHECK_EQ_INT(cs.connects, 2);
    CHECK_EQ_INT(rsd_http_client_close_idle(c, NULL, port), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_http_client_close_idle(NULL, "127.0.0.1", port), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_http_client_close_idle(c, "example.com", port), RSD_ERR_RESOLVE);
    rsd_http_client_destroy(c);
    rsd_http_server_destroy(s);
}

static void test_post_body_and_chunked(void) {
    rsd_http_server_desc sd;
    rsd_http_server *s;
    rsd_http_client *c;
    rsd_http_event ev;
    rsd_http_request q;
    rsd_http_req_h h;
    srv_ctx x;
    rsd_http_header extra;
    memset(&sd, 0, sizeof sd); memset(&x, 0, sizeof x); memset(&q, 0, sizeof q);
    s = rsd_http_server_create(&sd);
    c = rsd_http_client_create(NULL);
    REQUIRE(s && c);
    extra.name = rsd_str_c("X-Trace");
    extra.value = rsd_str_c("t1");
    q.method = "POST";
    q.url = url(s, "/echo");
    q.body = "{\"model\":\"a\"}";
    q.body_len = strlen("{\"model\":\"a\"}");
    q.content_type = "application/json";
    q.headers = &extra;
    q.num_headers = 1;
    REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    REQUIRE(exchange(c, s, &x, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_OK);
    CHECK(ev.req.id == h.id);
    CHECK(rsd_str_eq_c(ev.body, "{\"model\":\"a\"}"));
    CHECK_EQ_STR(x.last_body, "{\"model\":\"a\"}");
    REQUIRE(get(c, s, &x, "/chunked", NULL, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_OK);
    CHECK(rsd_str_eq_c(ev.body, "hello chunked world"));
    CHECK(ev.reused);
    /* keep-alive still fine after a chunked answer */
    REQUIRE(get(c, s, &x, "/health", "GET", 0, &ev));
    CHECK(rsd_str_eq_c(ev.body, "ok") && ev.reused);
    /* HEAD: Content-Length but no body */
    REQUIRE(get(c, s, &x, "/health", "HEAD", 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_OK);
    CHECK_EQ_INT(ev.body.len, 0);
    REQUIRE(get(c, s, &x, "/health", "GET", 0, &ev));
    CHECK(rsd_str_eq_c(ev.body, "ok") && ev.reused);
    rsd_http_client_destroy(c);
    rsd_http_server_destroy(s);
}

static void test_limits(void) {
    rsd_http_server_desc sd;
    rsd_http_client_desc cd;
    rsd_http_server *s;
    rsd_http_client *c;
    rsd_http_event ev;
    srv_ctx x;
    memset(&sd, 0, sizeof sd); memset(&cd, 0, sizeof cd); memset(&x, 0, sizeof x);
    sd.max_response_bytes = 1 << 20;
    cd.max_body_bytes = 1000;
    cd.max_header_bytes = 2048;
    s = rsd_http_server_create(&sd);
    c = rsd_http_client_create(&cd);
    REQUIRE(s && c);
    x.big = 1000; /* exactly at the limit: fine */
    REQUIRE(get(c, s, &x, "/big", NULL, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_OK);
    CHECK_EQ_INT(ev.body.len, 1000);
    x.big = 1001;
    REQUIRE(get(c, s, &x, "/big", NULL, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_ERR_BODY_TOO_LARGE);
    CHECK_EQ_INT(ev.status, 200);
    x.big = 200000;
    REQUIRE(get(c, s, &x, "/big", NULL, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_ERR_BODY_TOO_LARGE);
    REQUIRE(get(c, s, &x, "/manyheaders", NULL, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_ERR_HEADERS_TOO_LARGE);
    /* the client recovers: a fresh connection for the next request */
    REQUIRE(get(c, s, &x, "/health", NULL, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_OK);
    rsd_http_client_destroy(c);
    rsd_http_server_destroy(s);
}

/* Chunked body over a caller buffer limit, and a caller buffer that fits exactly. */
static void test_chunked_limit(void) {
    rsd_http_server *s = rsd_http_server_create(NULL);
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_event ev;
    rsd_http_request q;
    rsd_http_req_h h;
    srv_ctx x;
    char small[19], exact[19];
    memset(&x, 0, sizeof x); memset(&q, 0, sizeof q);
    REQUIRE(s && c);
    q.url = url(s, "/chunked");
    q.body_buf = small;
    q.body_cap = 18; /* "hello chunked world" is 19 bytes */
    REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    REQUIRE(exchange(c, s, &x, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_ERR_BODY_TOO_LARGE);
    q.body_buf = exact;
    q.body_cap = 19;
    REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    REQUIRE(exchange(c, s, &x, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_OK);
    CHECK(ev.body.ptr == exact && ev.body.len == 19);
    rsd_http_client_destroy(c);
    rsd_http_server_destroy(s);
}

static void test_peer_closes_mid_body(void) {
    uint16_t port;
    int lfd = raw_listen(&port), pfd = -1, i;
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_request q;
    rsd_http_req_h h;
    rsd_http_event ev;
    bool got = false;
    char buf[2048];
    REQUIRE(lfd >= 0 && c);
    memset(&q, 0, sizeof q);
    q.url = raw_url(port, "/v1/models");
    REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    for (i = 0; i < 200 && !got; i++) {
        rsd_pollfd lp;
        lp.fd = lfd; lp.events = POLLIN; lp.revents = 0;
        pump_ex(c, NULL, 0, 50, &lp, pfd == -1);
        if (pfd == -1) {
            pfd = accept(lfd, NULL, NULL);
            if (pfd >= 0) {
                REQUIRE(raw_read_head(pfd, buf, sizeof buf) > 0);
                CHECK(strncmp(buf, "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:", 41) == 0);
                const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789";
                CHECK(send(pfd, resp, strlen(resp), 0) > 0);
                close(pfd);
                pfd = -2;
            }
        }
        got = rsd_http_next_event(c, &ev);
    }
    REQUIRE(got);
    CHECK_EQ_INT(ev.result, RSD_ERR_CLOSED);
    CHECK_EQ_INT(ev.status, 200);
    CHECK_EQ_INT(ev.body_bytes, 10);
    close(lfd);
    rsd_http_client_destroy(c);
}

/* A peer that accepts nothing and answers nothing: RSD_ERR_TIMEOUT exactly at the deadline. */
static void test_timeout_fake_clock(void) {
    uint16_t port;
    int lfd = raw_listen(&port), i;
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_request q;
    rsd_http_req_h h;
    rsd_http_event ev;
    rsd_pollfd fds[4];
    REQUIRE(lfd >= 0 && c);
    memset(&q, 0, sizeof q);
    q.url = raw_url(port, "/slow");
    q.total_timeout_ms = 500;
    REQUIRE(rsd_http_send(c, &q, 10000, &h) == RSD_OK);
    CHECK_EQ_INT(rsd_http_client_next_deadline(c), 0); /* queued: step now */
    for (i = 0; i < 20; i++) {
        (void)rsd_http_client_step(c, 10000 + (uint64_t)i * 26);
        CHECK(!rsd_http_next_event(c, &ev));
        (void)poll((struct pollfd *)(void *)fds, (nfds_t)rsd_http_client_pollfds(c, fds, 4), 1);
    }
    CHECK_EQ_INT(rsd_http_client_pollfds(c, fds, 4), 1);
    CHECK_EQ_INT(fds[0].events, RSD_POLLIN);
    CHECK_EQ_INT(rsd_http_client_next_deadline(c), 10500);
    (void)rsd_http_client_step(c, 10499);
    CHECK(!rsd_http_next_event(c, &ev));
    CHECK_EQ_INT(rsd_http_client_step(c, 10500), 1);
    CHECK_EQ_INT(rsd_http_client_next_deadline(c), 0); /* the event waits to be pulled */
    REQUIRE(rsd_http_next_event(c, &ev));
    CHECK_EQ_INT(ev.result, RSD_ERR_TIMEOUT);
    CHECK(ev.req.id == h.id);
    CHECK_EQ_INT(rsd_http_client_pollfds(c, fds, 4), 0);
    close(lfd);
    rsd_http_client_destroy(c);
}

static void test_connect_refused(void) {
    uint16_t port;
    int lfd = raw_listen(&port), i;
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_request q;
    rsd_http_req_h h;
    rsd_http_event ev;
    bool got = false;
    REQUIRE(lfd >= 0 && c);
    close(lfd); /* nothing listens on port now */
    memset(&q, 0, sizeof q);
    q.url = raw_url(port, "/");
    REQUIRE(rsd_http_send(c, &q, 5, &h) == RSD_OK);
    for (i = 0; i < 20 && !got; i++) { /* fake clock never moves: must not need a timeout */
        pump_ex(c, NULL, 5, 50, NULL, 0);
        got = rsd_http_next_event(c, &ev);
    }
    REQUIRE(got);
    CHECK(i <= 3);
    CHECK_EQ_INT(ev.result, RSD_ERR_CONNECT);
    CHECK_EQ_INT(ev.sys_errno, ECONNREFUSED);
    rsd_http_client_destroy(c);
}

/* A peer that sends its answer one byte per round: the total timeout still holds. */
static void test_dribble_total_timeout(void) {
    uint16_t port;
    int lfd = raw_listen(&port), pfd = -1, i;
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_request q;
    rsd_http_req_h h;
    rsd_http_event ev;
    const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
    size_t sent = 0;
    uint64_t now = 0;
    bool got = false;
    char buf[2048];
    REQUIRE(lfd >= 0 && c);
    memset(&q, 0, sizeof q);
    q.url = raw_url(port, "/dribble");
    q.total_timeout_ms = 300;
    REQUIRE(rsd_http_send(c, &q, now, &h) == RSD_OK);
    for (i = 0; i < 400 && !got; i++) {
        pump_ex(c, NULL, now, 20, NULL, 0);
        got = rsd_http_next_event(c, &ev);
        if (got) break;
        if (pfd < 0) {
            rsd_pollfd lp;
            lp.fd = lfd; lp.events = POLLIN; lp.revents = 0;
            if (poll((struct pollfd *)(void *)&lp, 1, 20) > 0) {
                pfd = accept(lfd, NULL, NULL);
                REQUIRE(pfd >= 0 && raw_read_head(pfd, buf, sizeof buf) > 0);
            }
        } else {
            char b = sent < strlen(resp) ? resp[sent] : 'x';
            CHECK(send(pfd, &b, 1, MSG_NOSIGNAL) == 1);
            sent++;
            now += 10; /* each byte "takes" 10 ms */
        }
    }
    REQUIRE(got);
    CHECK_EQ_INT(ev.result, RSD_ERR_TIMEOUT);
    CHECK(now >= 300 && now < 310); /* fired at the first step at or after the deadline */
    CHECK(sent > 20);
    if (pfd >= 0) close(pfd);
    close(lfd);
    rsd_http_client_destroy(c);
}

/* The server closes idle keep-alive connections (fake clock): the client sees that
   before reusing the socket (stats.stale) and connects afresh, so nothing is retried
   and a POST goes through too. */
static void test_stale_idle_not_reused(void) {
    rsd_http_server_desc sd;
    rsd_http_server *s;
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_event ev;
    rsd_http_client_info cs;
    rsd_http_server_info ss;
    srv_ctx x;
    memset(&sd, 0, sizeof sd); memset(&x, 0, sizeof x);
    sd.idle_timeout_ms = 100;
    s = rsd_http_server_create(&sd);
    REQUIRE(s && c);
    REQUIRE(get(c, s, &x, "/health", NULL, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_OK);
    (void)rsd_http_server_step(s, 200); /* idle connection expires server-side */
    rsd_http_server_query(s, &ss);
    CHECK_EQ_INT(ss.closes, 1);
    REQUIRE(get(c, s, &x, "/health", NULL, 200, &ev));
    CHECK_EQ_INT(ev.result, RSD_OK);
    CHECK(rsd_str_eq_c(ev.body, "ok"));
    CHECK(!ev.retried && !ev.reused);
    rsd_http_client_query(c, &cs);
    CHECK_EQ_INT(cs.retries, 0);
    CHECK_EQ_INT(cs.stale, 1);
    CHECK_EQ_INT(cs.connects, 2);
    (void)rsd_http_server_step(s, 400);
    REQUIRE(get(c, s, &x, "/echo", "POST", 400, &ev));
    CHECK_EQ_INT(ev.result, RSD_OK);
    CHECK(!ev.retried);
    rsd_http_client_query(c, &cs);
    CHECK_EQ_INT(cs.stale, 2);
    CHECK_EQ_INT(cs.connects, 3);
    rsd_http_server_query(s, &ss);
    CHECK_EQ_INT(ss.requests, 3);
    rsd_http_client_destroy(c);
    rsd_http_server_destroy(s);
}

/* Accepts one connection on lfd within ~5 s (-1 when none came). */
static int raw_accept(int lfd) {
    struct pollfd p;
    p.fd = lfd; p.events = POLLIN; p.revents = 0;
    return poll(&p, 1, 5000) == 1 ? accept(lfd, NULL, NULL) : -1;
}

/* Pumps c until an event (at most ~10 s). */
static bool raw_wait_event(rsd_http_client *c, rsd_http_event *ev) {
    int i;
    for (i = 0; i < 200; i++) {
        pump_ex(c, NULL, 0, 50, NULL, 0);
        if (rsd_http_next_event(c, ev)) return true;
    }
    return false;
}

/* The peer closes a kept-alive socket just as a request goes out on it (it read the
   request, answered nothing): a POST with retry_any_method is retried once on a fresh
   connection; one without fails with RSD_ERR_CLOSED instead. */
static void test_stale_retry(void) {
    static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    uint16_t port;
    int lfd = raw_listen(&port), fd, fd2;
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_client_info cs;
    rsd_http_request q;
    rsd_http_req_h h;
    rsd_http_event ev;
    char buf[2048];
    REQUIRE(lfd >= 0 && c);
    memset(&q, 0, sizeof q);
    q.url = raw_url(port, "/a");
    REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    pump_ex(c, NULL, 0, 0, NULL, 0);
    fd = raw_accept(lfd);
    REQUIRE(fd >= 0 && raw_read_head(fd, buf, sizeof buf) > 0);
    CHECK(send(fd, ok, sizeof ok - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof ok - 1));
    REQUIRE(raw_wait_event(c, &ev));
    CHECK_EQ_INT(ev.result, RSD_OK);
    /* a POST on the kept socket: the peer reads it and hangs up */
    q.method = "POST";
    q.body = "x";
    q.body_len = 1;
    q.retry_any_method = true;
    REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    pump_ex(c, NULL, 0, 0, NULL, 0);
    REQUIRE(raw_read_head(fd, buf, sizeof buf) > 0);
    CHECK(strncmp(buf, "POST /a", 7) == 0);
    close(fd);
    pump_ex(c, NULL, 0, 50, NULL, 0); /* EOF before any response byte: resent afresh */
    fd2 = raw_accept(lfd);
    REQUIRE(fd2 >= 0 && raw_read_head(fd2, buf, sizeof buf) > 0);
    CHECK(strncmp(buf, "POST /a", 7) == 0);
    CHECK(send(fd2, ok, sizeof ok - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof ok - 1));
    REQUIRE(raw_wait_event(c, &ev));
    CHECK_EQ_INT(ev.result, RSD_OK);
    CHECK_EQ_INT(ev.status, 200);
    CHECK(ev.retried);
    rsd_http_client_query(c, &cs);
    CHECK_EQ_INT(cs.retries, 1);
    CHECK_EQ_INT(cs.connects, 2);
    /* a POST without retry_any_method: not resent (it may have run) */
    q.retry_any_method = false;
    REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    pump_ex(c, NULL, 0, 0, NULL, 0);
    REQUIRE(raw_read_head(fd2, buf, sizeof buf) > 0);
    close(fd2);
    REQUIRE(raw_wait_event(c, &ev));
    CHECK(ev.result == RSD_ERR_CLOSED || ev.result == RSD_ERR_IO);
    CHECK(!ev.retried);
    rsd_http_client_query(c, &cs);
    CHECK_EQ_INT(cs.retries, 1);
    CHECK_EQ_INT(cs.connects, 2);
    close(lfd);
    rsd_http_client_destroy(c);
}

/* "Keep-Alive: timeout=N" from the server: the idle socket is closed before the server
   would (1 s early; half of a 1 s limit), not after the client's own idle_timeout_ms;
   timeout=0 is not kept at all. */
static void test_keepalive_timeout_honoured(void) {
    static const char *const heads[] = {
        "HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5, max=100\r\nContent-Length: 2\r\n\r\nok",
        "HTTP/1.1 200 OK\r\nkeep-alive: max=3, TIMEOUT=1\r\nContent-Length: 2\r\n\r\nok",
        "HTTP/1.1 200 OK\r\nKeep-Alive: timeout=0\r\nContent-Length: 2\r\n\r\nok",
        "HTTP/1.1 200 OK\r\nKeep-Alive: timeout=x\r\nContent-Length: 2\r\n\r\nok"};
    static const uint64_t want[] = {4000, 500, 0, 30000};
    uint16_t port;
    int lfd = raw_listen(&port);
    unsigned k;
    REQUIRE(lfd >= 0);
    for (k = 0; k < sizeof heads / sizeof heads[0]; k++) {
        rsd_http_client *c = rsd_http_client_create(NULL);
        rsd_http_request q;
        rsd_http_req_h h;
        rsd_http_event ev;
        char buf[2048];
        int fd, i;
        bool got = false;
        REQUIRE(c);
        memset(&q, 0, sizeof q);
        q.url = raw_url(port, "/ka");
        REQUIRE(rsd_http_send(c, &q, 1000, &h) == RSD_OK);
        (void)rsd_http_client_step(c, 1000);
        fd = raw_accept(lfd);
        REQUIRE(fd >= 0 && raw_read_head(fd, buf, sizeof buf) > 0);
        CHECK(send(fd, heads[k], strlen(heads[k]), MSG_NOSIGNAL) > 0);
        for (i = 0; i < 200 && !got; i++) {
            pump_ex(c, NULL, 1000, 50, NULL, 0);
            got = rsd_http_next_event(c, &ev);
        }
        REQUIRE(got);
        CHECK_EQ_INT(ev.result, RSD_OK);
        (void)rsd_http_client_step(c, 1000); /* releases the event */
        if (want[k] == 0) {
            CHECK(rsd_http_client_next_deadline(c) == RSD_NO_DEADLINE); /* closed at once */
        } else {
            CHECK_EQ_INT(rsd_http_client_next_deadline(c), 1000 + want[k]);
        }
        close(fd);
        rsd_http_client_destroy(c);
    }
    close(lfd);
}

static int raw_connect(uint16_t port) {
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) { close(fd); return -1; }
    return fd;
}

/* A request the server has read but the host has not pulled makes next_deadline 0,
   so a host loop that sleeps until the deadline never sleeps on it. */
static void test_server_deadline_with_pending_event(void) {
    rsd_http_server *s = rsd_http_server_create(NULL);
    rsd_http_server_event sev;
    rsd_pollfd pf[8];
    const char *req = "GET /x HTTP/1.1\r\nHost: a\r\n\r\n";
    int fd, i, n = 0;
    REQUIRE(s);
    fd = raw_connect(rsd_http_server_port(s));
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, req, strlen(req)) == (ssize_t)strlen(req));
    for (i = 0; i < 200 && n <= 0; i++) {
        int k = rsd_http_server_pollfds(s, pf, 8);
        if (k > 0) (void)poll((struct pollfd *)(void *)pf, (nfds_t)k, 50);
        n = rsd_http_server_step(s, 0);
    }
    REQUIRE(n > 0);
    CHECK(rsd_http_server_next_deadline(s) == 0);
    REQUIRE(rsd_http_server_next_event(s, &sev));
    CHECK(rsd_http_server_next_deadline(s) != 0);
    CHECK_EQ_INT(rsd_http_respond(s, sev.req, 204, NULL, 0, NULL, 0), RSD_OK);
    close(fd);
    rsd_http_server_destroy(s);
}

/* Bad clients get 400 / 413 / 431 and are closed; a good client keeps being served. */
static void test_server_bad_clients(void) {
    rsd_http_server_desc sd;
    rsd_http_server *s;
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_event ev;
    rsd_http_server_info ss;
    srv_ctx x;
    enum { NBAD = 6 };
    const char *bad[NBAD];
    const char *want[NBAD] = {"HTTP/1.1 400 ", "HTTP/1.1 413 ", "HTTP/1.1 431 ",
                              "HTTP/1.1 400 ", "HTTP/1.1 400 ", "HTTP/1.1 501 "};
    char big[3000], got[NBAD][256];
    int fds[NBAD], k, i;
    memset(&sd, 0, sizeof sd); memset(&x, 0, sizeof x); memset(got, 0, sizeof got);
    sd.max_header_bytes = 1024;
    sd.max_body_bytes = 100;
    s = rsd_http_server_create(&sd);
    REQUIRE(s && c);
    snprintf(big, sizeof big, "GET / HTTP/1.1\r\nHost: a\r\nX-Big: %02900d\r\n\r\n", 0);
    bad[0] = "BLAH\x01 / HTTP/1.1\r\nHost: a\r\n\r\n";
    bad[1] = "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\n\r\n";
    bad[2] = big;
    bad[3] = "GET /x HTTP/1.1\r\n\r\n";                       /* no Host */
    bad[4] = "GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"; /* two */
    bad[5] = "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
             "5\r\nxxxxx\r\n0\r\n\r\n";                        /* nothing decodes gzip */
    REQUIRE(get(c, s, &x, "/health", NULL, 0, &ev)); /* a good client is connected */
    for (k = 0; k < NBAD; k++) {
        fds[k] = raw_connect(rsd_http_server_port(s));
        REQUIRE(fds[k] >= 0);
        CHECK(send(fds[k], bad[k], strlen(bad[k]), MSG_NOSIGNAL) > 0);
    }
    for (i = 0; i < NBAD; i++) {
        REQUIRE(get(c, s, &x, "/health", NULL, 0, &ev));
        CHECK_EQ_INT(ev.result, RSD_OK);
        CHECK(ev.reused);
    }
    for (k = 0; k < NBAD; k++) {
        int j;
        size_t len = 0;
        for (j = 0; j < 100; j++) {
            struct pollfd p;
            ssize_t n;
            pump(NULL, s, 0);
            p.fd = fds[k]; p.events = POLLIN; p.revents = 0;
            if (poll(&p, 1, 10) <= 0) continue;
            n = recv(fds[k], got[k] + len, sizeof got[k] - 1 - len, 0);
            if (n <= 0) break; /* closed by the server after its answer */
            len += (size_t)n;
        }
        CHECK(strncmp(got[k], want[k], strlen(want[k])) == 0);
        CHECK(strstr(got[k], "Connection: close") != NULL);
        close(fds[k]);
    }
    REQUIRE(get(c, s, &x, "/health", NULL, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_OK);
    CHECK(ev.reused);
    rsd_http_server_query(s, &ss);
    CHECK_EQ_INT(ss.bad_requests, NBAD);
    CHECK_EQ_INT(ss.accepts, NBAD + 1);
    rsd_http_client_destroy(c);
    rsd_http_server_destroy(s);
}

/* The server holds a request and answers it several steps later; a client that goes away
   while its request is held produces a CLOSED event. */
static void test_deferred_and_closed(void) {
    rsd_http_server *s = rsd_http_server_create(NULL);
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_request q;
    rsd_http_req_h h;
    rsd_http_event ev;
    rsd_http_server_event sev;
    srv_ctx x;
    int i;
    memset(&x, 0, sizeof x); memset(&q, 0, sizeof q);
    REQUIRE(s && c);
    q.url = url(s, "/defer");
    REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    for (i = 0; i < 50 && !x.deferred.id; i++) { pump(c, s, 0); serve(s, &x); }
    REQUIRE(x.deferred.id != 0);
    for (i = 0; i < 5; i++) { pump_ex(c, s, 0, 5, NULL, 0); serve(s, &x); }
    CHECK(!rsd_http_next_event(c, &ev));
    CHECK_EQ_INT(rsd_http_server_query_req(s, x.deferred, &sev), RSD_OK);
    CHECK(sev.head && rsd_str_eq_c(sev.head->target, "/defer"));
    CHECK_EQ_INT(rsd_http_respond(s, x.deferred, 202, NULL, 0, "later", 5), RSD_OK);
    CHECK_EQ_INT(rsd_http_respond(s, x.deferred, 202, NULL, 0, "again", 5), RSD_ERR_NOT_FOUND);
    REQUIRE(exchange(c, s, &x, 0, &ev));
    CHECK_EQ_INT(ev.status, 202);
    CHECK(rsd_str_eq_c(ev.body, "later"));
    /* client cancels while the server holds the request */
    x.deferred.id = 0;
    REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    for (i = 0; i < 50 && !x.deferred.id; i++) { pump(c, s, 0); serve(s, &x); }
    REQUIRE(x.deferred.id != 0);
    CHECK_EQ_INT(rsd_http_cancel(c, h), RSD_OK);
    CHECK_EQ_INT(rsd_http_cancel(c, h), RSD_ERR_NOT_FOUND);
    REQUIRE(rsd_http_next_event(c, &ev));
    CHECK_EQ_INT(ev.result, RSD_ERR_CANCELLED);
    for (i = 0; i < 50 && !x.closed_events; i++) { pump(c, s, 0); serve(s, &x); }
    CHECK_EQ_INT(x.closed_events, 1);
    CHECK_EQ_INT(rsd_http_respond(s, x.deferred, 200, NULL, 0, "late", 4), RSD_ERR_CLOSED);
    /* the slot is usable again */
    REQUIRE(get(c, s, &x, "/health", NULL, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_OK);
    rsd_http_client_destroy(c);
    rsd_http_server_destroy(s);
}

typedef struct sse_sink {
    int n;
    char events[8][96];
} sse_sink;
static void on_sse(void *user, const rsd_sse_event *ev) {
    sse_sink *k = (sse_sink *)user;
    if (k->n < 8)
        snprintf(k->events[k->n++], 96, "%.*s|%.*s", (int)ev->event.len, ev->event.ptr,
                 (int)ev->data.len, ev->data.ptr);
}

/* GET /sse with on_sse into sink, served by serve() until the stream is open (x->streaming). */
static bool sse_open(rsd_http_server *s, rsd_http_client *c, srv_ctx *x, sse_sink *sink) {
    rsd_http_request q;
    rsd_http_req_h h;
    int i;
    memset(x, 0, sizeof *x); memset(&q, 0, sizeof q); memset(sink, 0, sizeof *sink);
    if (!s || !c) return false;
    q.url = url(s, "/sse");
    q.on_sse = on_sse;
    q.user = sink;
    q.total_timeout_ms = RSD_TIMEOUT_NONE;
    if (rsd_http_send(c, &q, 0, &h) != RSD_OK) return false;
    for (i = 0; i < 50 && !x->streaming.id; i++) { pump(c, s, 0); serve(s, x); }
    return x->streaming.id != 0;
}

/* SSE over a chunked stream written across many steps, read by the client's SSE reader. */
static void test_sse_stream(void) {
    rsd_http_server *s = rsd_http_server_create(NULL);
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_event ev;
    srv_ctx x;
    sse_sink sink;
    int i;
    bool got = false;
    REQUIRE(sse_open(s, c, &x, &sink));
    CHECK_EQ_INT(rsd_http_stream_sse(s, x.streaming, NULL, "{\"model\":\"a\",\"event\":\"model_status\"}", 37), RSD_OK);
    for (i = 0; i < 50 && sink.n < 1; i++) pump(c, s, 0);
    CHECK_EQ_INT(sink.n, 1);
    CHECK_EQ_INT(rsd_http_stream_sse(s, x.streaming, "status_change", "line1\nline2", 11), RSD_OK);
    CHECK_EQ_INT(rsd_http_stream_write(s, x.streaming, "data: raw", 9), RSD_OK);
    for (i = 0; i < 5; i++) pump_ex(c, s, 0, 5, NULL, 0);
    CHECK_EQ_INT(rsd_http_stream_write(s, x.streaming, "\n\n", 2), RSD_OK);
    CHECK_EQ_INT(rsd_http_stream_end(s, x.streaming), RSD_OK);
    for (i = 0; i < 100 && !got; i++) { pump(c, s, 0); got = rsd_http_next_event(c, &ev); }
    REQUIRE(got);
    CHECK_EQ_INT(ev.result, RSD_OK);
    CHECK_EQ_INT(ev.body.len, 0);
    CHECK(ev.body_bytes > 50);
    CHECK_EQ_INT(sink.n, 3);
    CHECK_EQ_STR(sink.events[0], "|{\"model\":\"a\",\"event\":\"model_status\"}");
    CHECK_EQ_STR(sink.events[1], "status_change|line1\nline2");
    CHECK_EQ_STR(sink.events[2], "|raw");
    rsd_http_client_destroy(c);
    rsd_http_server_destroy(s);
}

/* An event whose data is over half the slot buffer (the client's max_body_bytes) is
   skipped whole -- no cut event reaches on_sse -- and the stream goes on: the next event
   arrives and the request ends OK. */
static void test_sse_event_over_half_the_slot(void) {
    rsd_http_server *s = rsd_http_server_create(NULL);
    rsd_http_client_desc cd;
    rsd_http_client *c;
    rsd_http_event ev;
    srv_ctx x;
    sse_sink sink;
    static char big[700];
    int i;
    bool got = false;
    memset(&cd, 0, sizeof cd);
    cd.max_body_bytes = 1024; /* events up to 512 bytes */
    c = rsd_http_client_create(&cd);
    memset(big, 'x', sizeof big);
    REQUIRE(sse_open(s, c, &x, &sink));
    CHECK_EQ_INT(rsd_http_stream_sse(s, x.streaming, NULL, big, sizeof big), RSD_OK);
    CHECK_EQ_INT(rsd_http_stream_sse(s, x.streaming, NULL, "after", 5), RSD_OK);
    CHECK_EQ_INT(rsd_http_stream_end(s, x.streaming), RSD_OK);
    for (i = 0; i < 100 && !got; i++) { pump(c, s, 0); got = rsd_http_next_event(c, &ev); }
    REQUIRE(got);
    CHECK_EQ_INT(ev.result, RSD_OK);
    CHECK(ev.body_bytes > sizeof big);
    CHECK_EQ_INT(sink.n, 1);
    CHECK_EQ_STR(sink.events[0], "|after");
    rsd_http_client_destroy(c);
    rsd_http_server_destroy(s);
}

typedef struct log_sink {
    char all[8192];
    size_t len;
    int lines;
} log_sink;
static void log_fn(void *user, int level, uint32_t item, const char *msg, const char *where) {
    log_sink *l = (log_sink *)user;
    int n = snprintf(l->all + l->len, sizeof l->all - l->len, "%d %s %s %s\n", level,
                     rsd_log_item_name(item), msg ? msg : "", where ? where : "");
    if (n > 0 && (size_t)n < sizeof l->all - l->len) l->len += (size_t)n;
    l->lines++;
}

static void test_bearer_not_logged(void) {
    rsd_http_server_desc sd;
    rsd_http_client_desc cd;
    rsd_http_server *s;
    rsd_http_client *c;
    rsd_http_request q;
    rsd_http_req_h h;
    rsd_http_event ev;
    srv_ctx x;
    log_sink lg;
    uint16_t dead;
    int lfd = raw_listen(&dead);
    const char *tok = "sk-SECRET-123";
    int i;
    memset(&sd, 0, sizeof sd); memset(&cd, 0, sizeof cd); memset(&x, 0, sizeof x);
    memset(&lg, 0, sizeof lg); memset(&q, 0, sizeof q);
    close(lfd);
    cd.logger.fn = log_fn; cd.logger.user = &lg;
    sd.logger.fn = log_fn; sd.logger.user = &lg;
    s = rsd_http_server_create(&sd);
    c = rsd_http_client_create(&cd);
    REQUIRE(s && c);
    q.url = url(s, "/auth");
    q.bearer_token = tok;
    REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    REQUIRE(exchange(c, s, &x, 0, &ev));
    CHECK_EQ_STR(x.last_auth, "Bearer sk-SECRET-123");
    /* a quiet request's failure is in its event, not in the log */
    q.url = raw_url(dead, "/quiet");
    q.quiet = true;
    REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    REQUIRE(exchange(c, NULL, &x, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_ERR_CONNECT);
    CHECK_EQ_INT(lg.lines, 0);
    q.quiet = false;
    /* failures produce log lines; none carries the token */
    q.url = raw_url(dead, "/auth");
    REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    REQUIRE(exchange(c, NULL, &x, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_ERR_CONNECT);
    CHECK(strstr(lg.all, "HTTP_CONNECT_FAILED") != NULL);
    q.url = url(s, "/defer");
    q.total_timeout_ms = 10;
    REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    for (i = 0; i < 50 && !x.deferred.id; i++) { pump(c, s, 0); serve(s, &x); }
    CHECK(x.deferred.id != 0);
    CHECK(!rsd_http_next_event(c, &ev));
    (void)rsd_http_client_step(c, 10);
    REQUIRE(rsd_http_next_event(c, &ev));
    CHECK_EQ_INT(ev.result, RSD_ERR_TIMEOUT);
    CHECK(lg.lines >= 2);
    CHECK(strstr(lg.all, "GET /auth") != NULL);
    CHECK(strstr(lg.all, "SECRET") == NULL);
    CHECK(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    rsd_http_client_destroy(c);
    rsd_http_server_destroy(s);
}

static void test_arguments(void) {
    rsd_http_client_desc cd;
    rsd_http_client *c;
    rsd_http_request q;
    rsd_http_req_h h, hs[3];
    rsd_http_header bad;
    memset(&cd, 0, sizeof cd); memset(&q, 0, sizeof q);
    cd.max_requests = 2;
    cd.max_request_bytes = 128;
    cd.tls_off = true; /* https must be refused even when built with RSD_HTTP_MBEDTLS */
    c = rsd_http_client_create(&cd);
    REQUIRE(c);
    CHECK_EQ_INT(rsd_http_send(c, &q, 0, &h), RSD_ERR_ARG);
    q.url = "ftp://127.0.0.1/";
    CHECK_EQ_INT(rsd_http_send(c, &q, 0, &h), RSD_ERR_URL);
    CHECK_EQ_INT(h.id, 0);
    q.url = "https://127.0.0.1/";
    CHECK_EQ_INT(rsd_http_send(c, &q, 0, &h), RSD_ERR_TLS_UNAVAILABLE);
    q.url = "http://example.invalid/";
    CHECK_EQ_INT(rsd_http_send(c, &q, 0, &h), RSD_ERR_RESOLVE);
    q.url = "http://127.0.0.1:9/";
    q.method = "GE T";
    CHECK_EQ_INT(rsd_http_send(c, &q, 0, &h), RSD_ERR_ARG);
    q.method = NULL;
    bad.name = rsd_str_c("X-Inject");
    bad.value = rsd_str_c("a\r\nEvil: 1");
    q.headers = &bad; q.num_headers = 1;
    CHECK_EQ_INT(rsd_http_send(c, &q, 0, &h), RSD_ERR_ARG);
    q.headers = NULL; q.num_headers = 0;
    q.bearer_token = "x\ny";
    CHECK_EQ_INT(rsd_http_send(c, &q, 0, &h), RSD_ERR_ARG);
    q.bearer_token = NULL;
    q.body = g_big; q.body_len = 200;
    CHECK_EQ_INT(rsd_http_send(c, &q, 0, &h), RSD_ERR_TOO_LARGE);
    q.body = NULL; q.body_len = 0;
    CHECK_EQ_INT(rsd_http_send(c, &q, 0, &hs[0]), RSD_OK);
    CHECK_EQ_INT(rsd_http_send(c, &q, 0, &hs[1]), RSD_OK);
    CHECK_EQ_INT(rsd_http_send(c, &q, 0, &hs[2]), RSD_ERR_CAPACITY);
    CHECK(hs[0].id != hs[1].id && hs[0].id && hs[1].id);
    CHECK_EQ_INT(rsd_http_cancel(c, hs[0]), RSD_OK);
    CHECK_EQ_INT(rsd_http_cancel(c, hs[1]), RSD_OK);
    rsd_http_client_destroy(c);
    cd.max_conns = -1;
    CHECK(rsd_http_client_create(&cd) == NULL);
    {
        rsd_http_server_desc sd;
        memset(&sd, 0, sizeof sd);
        sd.bind_host = "not-an-address";
        CHECK(rsd_http_server_create(&sd) == NULL);
    }
    rsd_http_client_destroy(NULL);
    rsd_http_server_destroy(NULL);
}

/* ---- allocation: counting allocator (counting.h) ---------------------------------- */
static void test_zero_alloc_steady_state(void) {
    rsd_http_server_desc sd;
    rsd_http_client_desc cd;
    rsd_http_server *s;
    rsd_http_client *c;
    rsd_http_event ev;
    counted ka, kb;
    srv_ctx x;
    long before_c, before_s;
    int i, ok = 0;
    memset(&sd, 0, sizeof sd); memset(&cd, 0, sizeof cd); memset(&x, 0, sizeof x);
    cd.allocator = counting(&ka);
    sd.allocator = counting(&kb);
    s = rsd_http_server_create(&sd);
    c = rsd_http_client_create(&cd);
    REQUIRE(s && c);
    REQUIRE(get(c, s, &x, "/health", NULL, 0, &ev));
    before_c = ka.calls;
    before_s = kb.calls;
    for (i = 0; i < 100; i++)
        if (get(c, s, &x, i & 1 ? "/chunked" : "/health", NULL, 0, &ev) && ev.result == RSD_OK) ok++;
    CHECK_EQ_INT(ok, 100);
    CHECK_EQ_INT(ka.calls - before_c, 0);
    CHECK_EQ_INT(kb.calls - before_s, 0);
    rsd_http_client_destroy(c);
    rsd_http_server_destroy(s);
    CHECK_EQ_INT(ka.blocks, 0);
    CHECK_EQ_INT(kb.blocks, 0);
}

/* Fail the N-th allocation for every N over create + exchange + destroy. */
static void test_alloc_failure_loop(void) {
    long n;
    int completed = 0;
    for (n = 1; n < 40 && !completed; n++) {
        rsd_http_server_desc sd;
        rsd_http_client_desc cd;
        rsd_http_server *s;
        rsd_http_client *c = NULL;
        rsd_http_event ev;
        counted k;
        srv_ctx x;
        memset(&sd, 0, sizeof sd); memset(&cd, 0, sizeof cd); memset(&x, 0, sizeof x);
        cd.allocator = counting(&k);
        k.fail_at = n;
        sd.allocator = cd.allocator;
        s = rsd_http_server_create(&sd);
        if (s) c = rsd_http_client_create(&cd);
        if (s && c) {
            bool got = get(c, s, &x, "/health", NULL, 0, &ev);
            CHECK(got && ev.result == RSD_OK);
        }
        CHECK(k.failed == (!s || !c));
        rsd_http_client_destroy(c);
        rsd_http_server_destroy(s);
        CHECK_EQ_INT(k.blocks, 0);
        if (!k.failed) completed = 1;
    }
    CHECK(completed);
    CHECK(n > 3); /* several allocations were each failed once */
}

static void test_fd_hygiene(void) {
    int before = count_fds(), i;
    uint16_t port;
    int lfd = raw_listen(&port);
    rsd_http_server *s = rsd_http_server_create(NULL);
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_event ev;
    rsd_http_request q;
    rsd_http_req_h h;
    srv_ctx x;
    memset(&x, 0, sizeof x); memset(&q, 0, sizeof q);
    if (before < 0) { /* GetProcessHandleCount under wine */
        printf("skip: test_fd_hygiene: this system does not tell how many handles are open\n");
        if (lfd >= 0) close(lfd);
        rsd_http_server_destroy(s);
        rsd_http_client_destroy(c);
        return;
    }
    REQUIRE(before > 0 && s && c && lfd >= 0);
    for (i = 0; i < 3; i++) REQUIRE(get(c, s, &x, "/health", NULL, 0, &ev));
    q.url = raw_url(port, "/never");
    q.total_timeout_ms = 5;
    REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    (void)rsd_http_client_step(c, 0);
    (void)rsd_http_client_step(c, 5);
    REQUIRE(rsd_http_next_event(c, &ev));
    CHECK_EQ_INT(ev.result, RSD_ERR_TIMEOUT);
    close(lfd);
    CHECK(count_fds() > before);
    rsd_http_client_destroy(c);
    rsd_http_server_destroy(s);
    CHECK_EQ_INT(count_fds(), before);
}


/* Raw client helper: send `req`, then read until `want` responses' worth of "HTTP/1.1 "
   status lines have arrived or the server closes (bounded). */
static size_t raw_exchange(rsd_http_server *s, srv_ctx *x, int fd, const char *req, char *out, size_t cap,
                           const char *until) {
    size_t len = 0;
    int i;
    if (req) CHECK(send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req));
    out[0] = '\0';
    for (i = 0; i < 200; i++) {
        struct pollfd p;
        ssize_t n;
        pump_ex(NULL, s, 0, 5, NULL, 0);
        serve(s, x);
        p.fd = fd; p.events = POLLIN; p.revents = 0;
        if (poll(&p, 1, 5) <= 0) continue;
        n = recv(fd, out + len, cap - 1 - len, 0);
        if (n <= 0) break;
        len += (size_t)n;
        out[len] = '\0';
        if (until && strstr(out, until)) break;
        if (!until) { /* until the third complete response */
            const char *a = strstr(out, "HTTP/1.1 200"), *b = a ? strstr(a + 1, "HTTP/1.1 200") : NULL;
            const char *c3 = b ? strstr(b + 1, "HTTP/1.1 200") : NULL;
            if (c3 && strstr(c3, "\r\n\r\nok")) break;
        }
    }
    return len;
}

/* Pipelined requests, a chunked request body, Expect: 100-continue, HTTP/1.0 close. */
static void test_server_framing(void) {
    rsd_http_server *s = rsd_http_server_create(NULL);
    srv_ctx x;
    char out[4096];
    int fd;
    memset(&x, 0, sizeof x);
    REQUIRE(s);
    fd = raw_connect(rsd_http_server_port(s));
    REQUIRE(fd >= 0);
    raw_exchange(s, &x, fd, "GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /echo HTTP/1.1\r\nHost: x\r\n"
                 "Content-Length: 3\r\n\r\nabcGET /c HTTP/1.1\r\nHost: x\r\n\r\n", out, sizeof out, NULL);
    /* three answers, in order, on one connection */
    CHECK(strstr(out, "\r\n\r\nok") != NULL);
    CHECK(strstr(out, "Content-Length: 3\r\n\r\nabcHTTP/1.1 200 OK") != NULL);
    CHECK_EQ_INT(x.requests, 3);
    raw_exchange(s, &x, fd, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "4\r\nwiki\r\n5;ext=1\r\npedia\r\n0\r\nTrailer: t\r\n\r\n", out, sizeof out, "wikipedia");
    CHECK(strstr(out, "Content-Length: 9\r\n\r\nwikipedia") != NULL);
    raw_exchange(s, &x, fd, "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
                 out, sizeof out, "100 Continue\r\n\r\n");
    CHECK(strncmp(out, "HTTP/1.1 100 Continue\r\n\r\n", 25) == 0);
    raw_exchange(s, &x, fd, "hi", out, sizeof out, "\r\n\r\nhi");
    CHECK(strstr(out, "HTTP/1.1 200 OK") && strstr(out, "\r\n\r\nhi"));
    /* HTTP/1.0 without keep-alive: answered with Connection: close, then closed */
    raw_exchange(s, &x, fd, "GET /x HTTP/1.0\r\n\r\n", out, sizeof out, "no such text: read to the close");
    CHECK(strstr(out, "Connection: close\r\n") != NULL);
    CHECK(strstr(out, "\r\n\r\nok") != NULL);
    close(fd);
    rsd_http_server_destroy(s);
}

/* A client that does not read: stream writes hit the send buffer limit, nothing is lost. */
static void test_server_backpressure(void) {
    rsd_http_server_desc sd;
    rsd_http_server *s;
    srv_ctx x;
    char buf[4096], chunk[1000];
    size_t total = 0, wrote = 0;
    int fd, i, r = RSD_OK;
    memset(&sd, 0, sizeof sd); memset(&x, 0, sizeof x);
    memset(chunk, 'z', sizeof chunk);
    sd.max_response_bytes = 4096;
    s = rsd_http_server_create(&sd);
    REQUIRE(s);
    fd = raw_connect(rsd_http_server_port(s));
    REQUIRE(fd >= 0);
    CHECK(send(fd, "GET /sse HTTP/1.1\r\nHost: a\r\n\r\n", 30, 0) == 30);
    for (i = 0; i < 50 && !x.streaming.id; i++) { pump(NULL, s, 0); serve(s, &x); }
    REQUIRE(x.streaming.id);
    for (i = 0; i < 100000 && r == RSD_OK; i++) {
        r = rsd_http_stream_write(s, x.streaming, chunk, sizeof chunk);
        if (r == RSD_OK) wrote += sizeof chunk;
    }
    CHECK_EQ_INT(r, RSD_ERR_CAPACITY);
    CHECK(rsd_http_stream_room(s, x.streaming) < sizeof chunk + 32);
    for (i = 0; i < 2000 && total < wrote; i++) { /* now read it all */
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            char *p;
            for (p = buf; p < buf + n; p++) total += *p == 'z';
        }
        (void)rsd_http_server_step(s, 0);
        if (n <= 0) {
            struct pollfd p;
            p.fd = fd; p.events = POLLIN; p.revents = 0;
            (void)poll(&p, 1, 5);
        }
    }
    CHECK_EQ_INT(total, wrote);
    CHECK(rsd_http_stream_room(s, x.streaming) > sizeof chunk);
    CHECK_EQ_INT(rsd_http_stream_end(s, x.streaming), RSD_OK);
    close(fd);
    rsd_http_server_destroy(s);
}

/* HTTP/1.0-style response without length: the body runs to the close; no reuse. */
static void test_read_to_close(void) {
    uint16_t port;
    int lfd = raw_listen(&port), pfd = -1, i;
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_request q;
    rsd_http_req_h h;
    rsd_http_event ev;
    bool got = false;
    char buf[2048];
    REQUIRE(lfd >= 0 && c);
    memset(&q, 0, sizeof q);
    q.url = raw_url(port, "/");
    REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    for (i = 0; i < 200 && !got; i++) {
        rsd_pollfd lp;
        lp.fd = lfd; lp.events = POLLIN; lp.revents = 0;
        pump_ex(c, NULL, 0, 20, &lp, pfd == -1);
        if (pfd == -1) {
            pfd = accept(lfd, NULL, NULL);
            if (pfd >= 0) {
                const char *resp = "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end";
                REQUIRE(raw_read_head(pfd, buf, sizeof buf) > 0);
                CHECK(send(pfd, resp, strlen(resp), 0) > 0);
                close(pfd);
                pfd = -2;
            }
        }
        got = rsd_http_next_event(c, &ev);
    }
    REQUIRE(got);
    CHECK_EQ_INT(ev.result, RSD_OK);
    CHECK(rsd_str_eq_c(ev.body, "until the end"));
    CHECK_EQ_INT(rsd_http_client_pollfds(c, NULL, 0), 0);
    close(lfd);
    rsd_http_client_destroy(c);
}

/* Several requests in flight at once, to two servers, more requests than sockets. */
static void test_concurrent(void) {
    rsd_http_client_desc cd;
    rsd_http_server *s1 = rsd_http_server_create(NULL), *s2 = rsd_http_server_create(NULL);
    rsd_http_client *c;
    rsd_http_request q;
    rsd_http_req_h h[6];
    rsd_http_event ev;
    srv_ctx x1, x2;
    char u1[96], u2[96];
    int i, got = 0, ok = 0;
    memset(&cd, 0, sizeof cd); memset(&q, 0, sizeof q); memset(&x1, 0, sizeof x1); memset(&x2, 0, sizeof x2);
    cd.max_conns = 2;
    c = rsd_http_client_create(&cd);
    REQUIRE(s1 && s2 && c);
    snprintf(u1, sizeof u1, "http://127.0.0.1:%u/health", (unsigned)rsd_http_server_port(s1));
    snprintf(u2, sizeof u2, "http://localhost:%u/chunked", (unsigned)rsd_http_server_port(s2));
    for (i = 0; i < 6; i++) {
        q.url = i & 1 ? u2 : u1;
        q.user = (void *)(size_t)(i + 1);
        REQUIRE(rsd_http_send(c, &q, 0, &h[i]) == RSD_OK);
    }
    for (i = 0; i < 300 && got < 6; i++) {
        rsd_pollfd fds[16];
        int n = rsd_http_client_pollfds(c, fds, 4);
        n += rsd_http_server_pollfds(s1, fds + n, 6);
        n += rsd_http_server_pollfds(s2, fds + n, 6);
        (void)poll((struct pollfd *)(void *)fds, (nfds_t)n, rsd_http_client_next_deadline(c) == 0 ? 0 : 20);
        (void)rsd_http_server_step_polled(s1, 0, fds, n);
        (void)rsd_http_server_step_polled(s2, 0, fds, n);
        serve(s1, &x1);
        serve(s2, &x2);
        (void)rsd_http_client_step_polled(c, 0, fds, n);
        while (rsd_http_next_event(c, &ev)) {
            size_t k = (size_t)ev.user;
            got++;
            if (ev.result == RSD_OK &&
                rsd_str_eq_c(ev.body, k % 2 == 0 ? "hello chunked world" : "ok")) ok++;
        }
    }
    CHECK_EQ_INT(got, 6);
    CHECK_EQ_INT(ok, 6);
    CHECK_EQ_INT(x1.requests, 3);
    CHECK_EQ_INT(x2.requests, 3);
    rsd_http_client_destroy(c);
    rsd_http_server_destroy(s1);
    rsd_http_server_destroy(s2);
}


static int resolve_calls;
static int my_resolver(void *user, const char *host, char *out, size_t cap) {
    (void)user;
    resolve_calls++;
    if (strcmp(host, "modelbox") != 0) return -1;
    snprintf(out, cap, "127.0.0.1");
    return 0;
}

/* Names go through the resolver hook (never getaddrinfo in the non-blocking path);
   IPv6 literals connect directly; Host carries the name as written. */
static void test_names_and_ipv6(void) {
    rsd_http_server_desc sd;
    rsd_http_client_desc cd;
    rsd_http_server *s4, *s6;
    rsd_http_client *c;
    rsd_http_request q;
    rsd_http_req_h h;
    rsd_http_event ev;
    srv_ctx x;
    char u[128], host[64];
    memset(&sd, 0, sizeof sd); memset(&cd, 0, sizeof cd); memset(&q, 0, sizeof q); memset(&x, 0, sizeof x);
    cd.resolve_fn = my_resolver;
    c = rsd_http_client_create(&cd);
    s4 = rsd_http_server_create(NULL);
    sd.bind_host = "::1";
    s6 = rsd_http_server_create(&sd);
    REQUIRE(c && s4);
    snprintf(u, sizeof u, "http://modelbox:%u/health", (unsigned)rsd_http_server_port(s4));
    q.url = u;
    REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    CHECK_EQ_INT(resolve_calls, 1);
    REQUIRE(exchange(c, s4, &x, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_OK);
    snprintf(host, sizeof host, "modelbox:%u", (unsigned)rsd_http_server_port(s4));
    CHECK_EQ_STR(x.last_host, host);
    q.url = "http://othername:1/";
    CHECK_EQ_INT(rsd_http_send(c, &q, 0, &h), RSD_ERR_RESOLVE);
    if (s6) { /* ::1 exists on this machine */
        snprintf(u, sizeof u, "http://[::1]:%u/health", (unsigned)rsd_http_server_port(s6));
        q.url = u;
        REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
        REQUIRE(exchange(c, s6, &x, 0, &ev));
        CHECK_EQ_INT(ev.result, RSD_OK);
        CHECK(rsd_str_eq_c(ev.body, "ok"));
        snprintf(host, sizeof host, "[::1]:%u", (unsigned)rsd_http_server_port(s6));
        CHECK_EQ_STR(x.last_host, host);
    }
    rsd_http_client_destroy(c);
    rsd_http_server_destroy(s4);
    rsd_http_server_destroy(s6);
}

/* Slowloris: a started request that never completes gets 408 and is closed at the deadline. */
static void test_server_request_timeout(void) {
    rsd_http_server_desc sd;
    rsd_http_server *s;
    rsd_http_server_info ss;
    srv_ctx x;
    int fd, i;
    memset(&sd, 0, sizeof sd); memset(&x, 0, sizeof x);
    sd.request_timeout_ms = 100;
    sd.max_response_bytes = 256;
    s = rsd_http_server_create(&sd);
    REQUIRE(s);
    fd = raw_connect(rsd_http_server_port(s));
    REQUIRE(fd >= 0);
    CHECK(send(fd, "GET /x HTTP/1.1\r\n", 17, 0) == 17); /* and then nothing */
    for (i = 0; i < 5; i++) pump_ex(NULL, s, 1000, 5, NULL, 0);
    CHECK_EQ_INT(rsd_http_server_next_deadline(s), 1100);
    pump_ex(NULL, s, 1099, 5, NULL, 0);
    rsd_http_server_query(s, &ss);
    CHECK_EQ_INT(ss.bad_requests, 0);
    pump_ex(NULL, s, 1100, 5, NULL, 0); /* 408 and close */
    rsd_http_server_query(s, &ss);
    CHECK_EQ_INT(ss.bad_requests, 1);
    CHECK_EQ_INT(ss.closes, 1);
    close(fd);
    rsd_http_server_destroy(s);
}


typedef struct body_sink {
    size_t bytes, calls;
    bool bad;
} body_sink;
static void on_body(void *user, const char *data, size_t len) {
    body_sink *k = (body_sink *)user;
    size_t i;
    for (i = 0; i < len; i++)
        if (data[i] != (char)('a' + (k->bytes + i) % 26)) k->bad = true;
    k->bytes += len;
    k->calls++;
}

/* A body far larger than the slot buffer, streamed through on_body; then the same with
   a stream limit. */
static void test_stream_body(void) {
    rsd_http_server_desc sd;
    rsd_http_client_desc cd;
    rsd_http_server *s;
    rsd_http_client *c;
    rsd_http_request q;
    rsd_http_req_h h;
    rsd_http_event ev;
    body_sink k;
    srv_ctx x;
    size_t i;
    memset(&sd, 0, sizeof sd); memset(&cd, 0, sizeof cd); memset(&q, 0, sizeof q);
    memset(&x, 0, sizeof x); memset(&k, 0, sizeof k);
    for (i = 0; i < sizeof g_big; i++) g_big[i] = (char)('a' + i % 26);
    sd.max_response_bytes = 1 << 20;
    cd.max_body_bytes = 4096;
    s = rsd_http_server_create(&sd);
    c = rsd_http_client_create(&cd);
    REQUIRE(s && c);
    x.big = 300000;
    q.url = url(s, "/big");
    q.on_body = on_body;
    q.user = &k;
    REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    REQUIRE(exchange(c, s, &x, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_OK);
    CHECK_EQ_INT(ev.body.len, 0);
    CHECK_EQ_INT(ev.body_bytes, 300000);
    CHECK_EQ_INT(k.bytes, 300000);
    CHECK(k.calls > 10);
    CHECK(!k.bad);
    q.max_stream_bytes = 100000;
    memset(&k, 0, sizeof k);
    REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    REQUIRE(exchange(c, s, &x, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_ERR_BODY_TOO_LARGE); /* Content-Length says so up front */
    CHECK_EQ_INT(k.bytes, 0);
    /* paused: nothing is read (no socket in pollfds) until resumed */
    q.max_stream_bytes = 0;
    memset(&k, 0, sizeof k);
    REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    CHECK_EQ_INT(rsd_http_pause(c, h, true), RSD_OK);
    for (i = 0; i < 10; i++) { pump_ex(c, s, 0, 5, NULL, 0); serve(s, &x); }
    CHECK_EQ_INT(k.bytes, 0);
    CHECK_EQ_INT(rsd_http_client_pollfds(c, NULL, 0), 0);
    CHECK(!rsd_http_next_event(c, &ev));
    CHECK_EQ_INT(rsd_http_pause(c, h, false), RSD_OK);
    REQUIRE(exchange(c, s, &x, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_OK);
    CHECK_EQ_INT(k.bytes, 300000);
    CHECK_EQ_INT(rsd_http_pause(c, h, true), RSD_ERR_NOT_FOUND);
    /* chunked: the limit trips mid-stream, never handing over more than allowed */
    q.url = url(s, "/chunked");
    q.max_stream_bytes = 10;
    memset(&k, 0, sizeof k);
    REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    REQUIRE(exchange(c, s, &x, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_ERR_BODY_TOO_LARGE);
    CHECK(k.bytes <= 10);
    memset(g_big, 0, sizeof g_big);
    rsd_http_client_destroy(c);
    rsd_http_server_destroy(s);
}


/* Malformed or hostile responses from a raw peer: each ends in an error event (or a
   well-defined OK), never a hang or a crash, and the socket is not reused. */
static void test_bad_responses(void) {
    static const struct { const char *resp; int want; } cases[] = {
        {"HTTP/1.1 2000 OK\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/2 200 OK\r\n\r\n", RSD_ERR_PROTOCOL},
        {"ICY 200 OK\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFF\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", RSD_ERR_CLOSED},
        {"HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", RSD_OK},
        {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA", RSD_OK},
        {"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n", RSD_ERR_BODY_TOO_LARGE},
        {"HTTP/1.1 200 OK\r\nContent-Le", RSD_ERR_CLOSED},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\n\x1f\x8b\x08\r\n0\r\n\r\n", RSD_ERR_PROTOCOL},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n\x1f\x8b\x08", RSD_ERR_PROTOCOL},
        {"", RSD_ERR_CLOSED},
    };
    size_t k;
    uint16_t port;
    int lfd = raw_listen(&port);
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_client_info cs;
    REQUIRE(lfd >= 0 && c);
    REQUIRE(rsdi_fd_nonblock(lfd) == 0); /* accept only what is there */
    for (k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        rsd_http_request q;
        rsd_http_req_h h;
        rsd_http_event ev;
        int pfd = -1, i;
        bool got = false;
        char buf[2048];
        memset(&q, 0, sizeof q);
        q.url = raw_url(port, "/bad");
        if (getenv("RSD_TEST_VERBOSE")) { printf("  case %u\n", (unsigned)k); fflush(stdout); }
        REQUIRE(rsd_http_send(c, &q, 0, &h) == RSD_OK);
        for (i = 0; i < 200 && !got; i++) {
            rsd_pollfd lp;
            lp.fd = lfd; lp.events = POLLIN; lp.revents = 0;
            pump_ex(c, NULL, 0, 20, &lp, pfd == -1);
            if (pfd == -1) {
                pfd = accept(lfd, NULL, NULL);
                if (pfd >= 0) {
                    REQUIRE(raw_read_head(pfd, buf, sizeof buf) > 0);
                    if (cases[k].resp[0]) CHECK(send(pfd, cases[k].resp, strlen(cases[k].resp), 0) > 0);
                    shutdown(pfd, SHUT_WR);
                }
            }
            got = rsd_http_next_event(c, &ev);
        }
        if (!got) printf("  case %u: no event\n", (unsigned)k);
        REQUIRE(got);
        if (ev.result != cases[k].want) printf("  case %u: %s\n", (unsigned)k, rsd_result_name(ev.result));
        CHECK_EQ_INT(ev.result, cases[k].want);
        if (pfd >= 0) close(pfd);
    }
    rsd_http_client_query(c, &cs);
    /* only the 204 left a reusable socket: the next request found it closed by the peer
       before using it and connected afresh */
    CHECK_EQ_INT(cs.connects, sizeof cases / sizeof cases[0]);
    CHECK_EQ_INT(cs.reuses, 0);
    CHECK_EQ_INT(cs.stale, 1);
    CHECK_EQ_INT(cs.retries, 0);
    close(lfd);
    rsd_http_client_destroy(c);
}


/* ---- hostile peers ------------------------------------------------------------------ */
static size_t g_sse_events;
TP_FN void count_sse(void *user, const rsd_sse_event *ev) { /* parses each event, as a host does */
    rsd_json_doc d;
    rsd_json_tok t[4];
    int k;
    (void)user;
    for (k = 0; k < 4; k++) g_sse_events += rsd_json_parse(&d, ev->data.ptr, ev->data.len, t, 4) == 1;
}

#if !defined(_WIN32) /* a fork()ed server */
/* A server (a child process) that streams SSE faster than the client parses it: each
   step reads a bounded amount and returns, and the total deadline fires at the first
   step past it, reading at most one receive there. Before the bound, one step read all
   32 MiB the child sent. */
static void test_fast_stream_step_bounded(void) {
    enum { CHILD_BYTES = 32 << 20, BUF = 64 << 10, CBLK = 1 << 20 };
    rsd_http_client_desc cd;
    rsd_http_client *c;
    rsd_http_request q;
    rsd_http_req_h h;
    rsd_http_event ev;
    rsd_http_req_info hi;
    uint16_t port;
    uint64_t prev = 0, max_step = 0;
    int lfd = raw_listen(&port), i, steps = 0, st = 0;
    pid_t pid;
    bool got = false;
    REQUIRE(lfd >= 0);
    fflush(stdout);
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) { /* child: one connection, an SSE head, then data as fast as it goes */
        static char block[CBLK];
        char head[1024];
        size_t k, sent = 0;
        int fd = accept(lfd, NULL, NULL);
        int sb = 4 << 20;
        if (fd < 0 || raw_read_head(fd, head, sizeof head) <= 0) _exit(1);
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sb, sizeof sb);
        for (k = 0; k + 18 <= sizeof block; k += 18) memcpy(block + k, "data: 1234567890\n\n", 18);
        for (; k < sizeof block; k++) block[k] = ':'; /* ... a comment line runs into the next block */
        block[sizeof block - 1] = '\n';
        if (send(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n", 53, MSG_NOSIGNAL) != 53) _exit(1);
        while (sent < CHILD_BYTES) {
            ssize_t n = send(fd, block, sizeof block, MSG_NOSIGNAL);
            if (n <= 0) break;
            sent += (size_t)n;
        }
        _exit(0);
    }
    close(lfd);
    memset(&cd, 0, sizeof cd);
    cd.max_body_bytes = 2 * BUF; /* on_sse: receives of at most BUF bytes */
    c = rsd_http_client_create(&cd);
    REQUIRE(c);
    memset(&q, 0, sizeof q);
    q.url = raw_url(port, "/models/sse");
    q.on_sse = count_sse;
    q.total_timeout_ms = 1000;
    g_sse_events = 0;
    CHECK(rsd_http_send(c, &q, 0, &h) == RSD_OK);
    for (i = 0; i < 2000 && prev < 4u * RSDI_STEP_READ_BYTES; i++) {
        rsd_pollfd pf;
        if (rsd_http_client_pollfds(c, &pf, 1) == 1) { /* a deep receive queue: the peer runs ahead */
            int rb = 8 << 20;
            (void)setsockopt(pf.fd, SOL_SOCKET, SO_RCVBUF, &rb, sizeof rb);
        }
        pump_ex(c, NULL, 0, 50, NULL, 0);
        if (rsd_http_client_query_req(c, h, &hi) != RSD_OK) continue;
        if (hi.body_bytes - prev > max_step) max_step = hi.body_bytes - prev;
        if (hi.body_bytes > prev) steps++;
        prev = hi.body_bytes;
    }
    CHECK(prev >= 4u * RSDI_STEP_READ_BYTES);
    CHECK(steps >= 4);
    CHECK(max_step <= (uint64_t)RSDI_STEP_READ_BYTES + BUF);
    CHECK(g_sse_events > 0);
    /* past the deadline: this very step completes it, after at most one receive */
    CHECK(rsd_http_client_query_req(c, h, &hi) == RSD_OK && !hi.done);
    (void)rsd_http_client_step(c, 1000);
    got = rsd_http_next_event(c, &ev);
    CHECK(got);
    if (got) {
        CHECK_EQ_INT(ev.result, RSD_ERR_TIMEOUT);
        CHECK(ev.body_bytes - prev <= BUF);
    }
    kill(pid, SIGKILL);
    CHECK(waitpid(pid, &st, 0) == pid);
    rsd_http_client_destroy(c);
}
#endif

/* How many of these raw sockets the server has closed (EOF or reset waiting). */
static int count_closed(const int *fds, int n) {
    int i, closed = 0;
    for (i = 0; i < n; i++) {
        struct pollfd p;
        char b[512];
        p.fd = fds[i]; p.events = POLLIN; p.revents = 0;
        if (poll(&p, 1, 0) == 1) {
            ssize_t r = recv(fds[i], b, sizeof b, MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno == ECONNRESET)) closed++;
        }
    }
    return closed;
}

/* Connection exhaustion: a full table of idle sockets, then of slowloris sockets (a head
   a few bytes at a time), does not shut a new client out: the oldest idle or
   head-incomplete connection makes room. Connections with a complete request are never
   dropped: a full table of held requests makes the next client wait, and it is served
   as soon as one is answered. */
static void test_server_exhaustion(void) {
    enum { N = 4 };
    rsd_http_server_desc sd;
    rsd_http_server *s;
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_server_info ss;
    rsd_http_event ev;
    rsd_http_request q;
    rsd_http_req_h h;
    rsd_http_sreq_h held[N];
    srv_ctx x;
    int fds[N], k, i, nheld = 0;
    uint64_t now = 1000;
    bool got;
    memset(&sd, 0, sizeof sd); memset(&x, 0, sizeof x);
    sd.max_conns = N;
    s = rsd_http_server_create(&sd);
    REQUIRE(s && c);
    /* N idle sockets fill the table */
    for (k = 0; k < N; k++) REQUIRE((fds[k] = raw_connect(rsd_http_server_port(s))) >= 0);
    for (i = 0; i < 100; i++) {
        rsd_http_server_query(s, &ss);
        if (ss.accepts == N) break;
        pump_ex(NULL, s, now, 20, NULL, 0);
    }
    REQUIRE(ss.accepts == N);
    now += 100;
    got = get(c, s, &x, "/health", NULL, now, &ev);
    CHECK(got);
    if (got) CHECK_EQ_INT(ev.status, 200);
    rsd_http_server_query(s, &ss);
    CHECK_EQ_INT(ss.evictions, 1);
    CHECK_EQ_INT(count_closed(fds, N), 1);
    for (k = 0; k < N; k++) close(fds[k]);
    rsd_http_client_destroy(c); /* its kept-alive socket goes too */
    for (i = 0; i < 20; i++) pump_ex(NULL, s, now, 5, NULL, 0);
    c = rsd_http_client_create(NULL);
    REQUIRE(c);

    /* N slowloris sockets: a few head bytes per (fake) second, never the blank line */
    now += 100;
    for (k = 0; k < N; k++) {
        REQUIRE((fds[k] = raw_connect(rsd_http_server_port(s))) >= 0);
        CHECK(send(fds[k], "GET / HTTP/1.1\r\n", 16, MSG_NOSIGNAL) == 16);
    }
    for (i = 0; i < 100; i++) {
        rsd_http_server_query(s, &ss);
        if (ss.accepts == 2 * N + 1) break;
        pump_ex(NULL, s, now, 20, NULL, 0);
    }
    REQUIRE(ss.accepts == 2 * N + 1);
    for (i = 0; i < 3; i++) {
        now += 1000;
        for (k = 0; k < N; k++) CHECK(send(fds[k], "X: y\r\n", 6, MSG_NOSIGNAL) == 6);
        pump_ex(NULL, s, now, 20, NULL, 0);
    }
    got = get(c, s, &x, "/health", NULL, now, &ev);
    CHECK(got);
    if (got) CHECK_EQ_INT(ev.status, 200);
    rsd_http_server_query(s, &ss);
    CHECK_EQ_INT(ss.evictions, 2);
    CHECK_EQ_INT(ss.bad_requests, 0);
    CHECK_EQ_INT(count_closed(fds, N), 1);
    for (k = 0; k < N; k++) close(fds[k]);
    rsd_http_client_destroy(c);
    for (i = 0; i < 20; i++) pump_ex(NULL, s, now, 5, NULL, 0);
    c = rsd_http_client_create(NULL);
    REQUIRE(c);

    /* N held requests: never dropped; the next client waits until one is answered */
    now += 100;
    for (k = 0; k < N; k++) {
        char req[64];
        int len = snprintf(req, sizeof req, "GET /defer HTTP/1.1\r\nHost: a\r\n\r\n");
        REQUIRE((fds[k] = raw_connect(rsd_http_server_port(s))) >= 0);
        CHECK(send(fds[k], req, (size_t)len, MSG_NOSIGNAL) == len);
    }
    for (i = 0; i < 200 && nheld < N; i++) {
        rsd_http_server_event sev;
        pump_ex(NULL, s, now, 20, NULL, 0);
        while (nheld < N && rsd_http_server_next_event(s, &sev))
            if (sev.type == RSD_HTTP_SEV_REQUEST) held[nheld++] = sev.req;
    }
    REQUIRE(nheld == N);
    memset(&q, 0, sizeof q);
    q.url = url(s, "/health");
    REQUIRE(rsd_http_send(c, &q, now, &h) == RSD_OK);
    for (i = 0; i < 20; i++) {
        now += 100;
        pump_ex(c, s, now, 5, NULL, 0);
    }
    CHECK(!rsd_http_next_event(c, &ev));
    rsd_http_server_query(s, &ss);
    CHECK_EQ_INT(ss.evictions, 2);
    CHECK_EQ_INT(rsd_http_respond(s, held[0], 204, NULL, 0, NULL, 0), RSD_OK);
    close(fds[0]);
    got = exchange(c, s, &x, now, &ev);
    CHECK(got);
    if (got) CHECK_EQ_INT(ev.status, 200);
    for (k = 1; k < N; k++) {
        CHECK_EQ_INT(rsd_http_respond(s, held[k], 204, NULL, 0, NULL, 0), RSD_OK);
        close(fds[k]);
    }
    rsd_http_client_destroy(c);
    rsd_http_server_destroy(s);
}

/* Short deadlines for a new connection's first byte and for a head, independent of the
   longer idle and request timeouts; without a body timeout the body keeps the request
   timeout. */
static void test_server_first_byte_and_head_deadlines(void) {
    rsd_http_server_desc sd;
    rsd_http_server *s;
    rsd_http_server_info ss;
    int idle, slow, body, i;
    char buf[256];
    memset(&sd, 0, sizeof sd);
    sd.request_timeout_ms = 60000;
    sd.body_timeout_ms = RSD_TIMEOUT_NONE; /* the body deadline: test_server_body_deadline */
    s = rsd_http_server_create(&sd);
    REQUIRE(s);
    idle = raw_connect(rsd_http_server_port(s));
    slow = raw_connect(rsd_http_server_port(s));
    body = raw_connect(rsd_http_server_port(s));
    REQUIRE(idle >= 0 && slow >= 0 && body >= 0);
    for (i = 0; i < 100; i++) {
        rsd_http_server_query(s, &ss);
        if (ss.accepts == 3) break;
        pump_ex(NULL, s, 1000, 20, NULL, 0);
    }
    REQUIRE(ss.accepts == 3);
    CHECK(send(slow, "GET / HTTP/1.1\r\nHost: a\r\n", 25, MSG_NOSIGNAL) == 25);
    CHECK(send(body, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc", 51, MSG_NOSIGNAL) == 51);
    for (i = 0; i < 5; i++) pump_ex(NULL, s, 1000, 5, NULL, 0);
    CHECK_EQ_INT(rsd_http_server_next_deadline(s), 1000 + RSD_HTTP_SERVER_DEFAULT_FIRST_BYTE_TIMEOUT_MS);
    pump_ex(NULL, s, 1000 + RSD_HTTP_SERVER_DEFAULT_FIRST_BYTE_TIMEOUT_MS - 1, 5, NULL, 0);
    rsd_http_server_query(s, &ss);
    CHECK_EQ_INT(ss.closes, 0);
    pump_ex(NULL, s, 1000 + RSD_HTTP_SERVER_DEFAULT_FIRST_BYTE_TIMEOUT_MS, 5, NULL, 0);
    rsd_http_server_query(s, &ss);
    CHECK_EQ_INT(ss.closes, 2);      /* the silent one closed, the slow head got 408 */
    CHECK_EQ_INT(ss.bad_requests, 1);
    CHECK_EQ_INT(count_closed(&idle, 1), 1);
    CHECK(raw_read_head(slow, buf, sizeof buf) > 0 && strncmp(buf, "HTTP/1.1 408 ", 13) == 0);
    CHECK_EQ_INT(count_closed(&body, 1), 0); /* a body in progress has the request timeout */
    CHECK_EQ_INT(rsd_http_server_next_deadline(s), 1000 + 60000);
    close(idle); close(slow); close(body);
    rsd_http_server_destroy(s);
}

/* A body that stops arriving is answered 408 body_timeout_ms after its last byte, long
   before the request timeout; every byte that arrives moves the deadline on. */
static void test_server_body_deadline(void) {
    enum { BT = RSD_HTTP_SERVER_DEFAULT_BODY_TIMEOUT_MS };
    rsd_http_server_desc sd;
    rsd_http_server *s;
    rsd_http_server_info ss;
    const char *req = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc";
    char buf[256];
    int fd, i;
    memset(&sd, 0, sizeof sd);
    sd.request_timeout_ms = 60000;
    s = rsd_http_server_create(&sd);
    REQUIRE(s);
    REQUIRE((fd = raw_connect(rsd_http_server_port(s))) >= 0);
    CHECK(send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req));
    for (i = 0; i < 100; i++) {
        rsd_http_server_query(s, &ss);
        if (ss.accepts == 1) break;
        pump_ex(NULL, s, 1000, 20, NULL, 0);
    }
    REQUIRE(ss.accepts == 1);
    CHECK_EQ_INT(rsd_http_server_next_deadline(s), 1000 + BT);
    CHECK(send(fd, "d", 1, MSG_NOSIGNAL) == 1);
    for (i = 0; i < 100 && rsd_http_server_next_deadline(s) != 4000 + BT; i++) pump_ex(NULL, s, 4000, 20, NULL, 0);
    CHECK_EQ_INT(rsd_http_server_next_deadline(s), 4000 + BT);
    pump_ex(NULL, s, 4000 + BT - 1, 5, NULL, 0);
    rsd_http_server_query(s, &ss);
    CHECK_EQ_INT(ss.closes, 0);
    pump_ex(NULL, s, 4000 + BT, 5, NULL, 0);
    rsd_http_server_query(s, &ss);
    CHECK_EQ_INT(ss.bad_requests, 1);
    CHECK(raw_read_head(fd, buf, sizeof buf) > 0 && strncmp(buf, "HTTP/1.1 408 ", 13) == 0);
    close(fd);
    rsd_http_server_destroy(s);
}

/* A full table of slow uploads (head complete, body a byte a second) does not shut a
   new client out: the one whose body has gone longest without a byte makes room. A
   held request in the same table is never the one dropped. */
static void test_server_exhaustion_slow_bodies(void) {
    enum { N = 4 };
    rsd_http_server_desc sd;
    rsd_http_server *s;
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_server_info ss;
    rsd_http_server_event sev;
    rsd_http_event ev;
    rsd_http_sreq_h held;
    srv_ctx x;
    const char *slow = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\nb";
    const char *defer = "GET /defer HTTP/1.1\r\nHost: a\r\n\r\n";
    int fds[N], k, i, r;
    uint64_t now = 1000;
    bool got, have = false;
    memset(&sd, 0, sizeof sd); memset(&x, 0, sizeof x); memset(&held, 0, sizeof held);
    sd.max_conns = N;
    sd.request_timeout_ms = 60000;
    s = rsd_http_server_create(&sd);
    REQUIRE(s && c);
    /* fds[0] holds a request; the others upload slowly */
    REQUIRE((fds[0] = raw_connect(rsd_http_server_port(s))) >= 0);
    CHECK(send(fds[0], defer, strlen(defer), MSG_NOSIGNAL) == (ssize_t)strlen(defer));
    for (i = 0; i < 200 && !have; i++) {
        pump_ex(NULL, s, now, 20, NULL, 0);
        while (rsd_http_server_next_event(s, &sev))
            if (sev.type == RSD_HTTP_SEV_REQUEST) { held = sev.req; have = true; }
    }
    REQUIRE(have);
    for (k = 1; k < N; k++) {
        REQUIRE((fds[k] = raw_connect(rsd_http_server_port(s))) >= 0);
        CHECK(send(fds[k], slow, strlen(slow), MSG_NOSIGNAL) == (ssize_t)strlen(slow));
    }
    for (i = 0; i < 100; i++) {
        rsd_http_server_query(s, &ss);
        if (ss.accepts == N) break;
        pump_ex(NULL, s, now, 20, NULL, 0);
    }
    REQUIRE(ss.accepts == N);
    /* a byte a second on each; fds[2] skips the last round (it is the most stalled) */
    for (r = 0; r < 3; r++) {
        now += 1000;
        for (k = 1; k < N; k++)
            if (r < 2 || k != 2) CHECK(send(fds[k], "b", 1, MSG_NOSIGNAL) == 1);
        for (i = 0; i < 3; i++) pump_ex(NULL, s, now, 5, NULL, 0);
    }
    now += 1;
    got = get(c, s, &x, "/health", NULL, now, &ev);
    CHECK(got);
    if (got) CHECK_EQ_INT(ev.status, 200);
    rsd_http_server_query(s, &ss);
    CHECK_EQ_INT(ss.evictions, 1);
    CHECK_EQ_INT(ss.bad_requests, 0);
    CHECK_EQ_INT(count_closed(fds + 2, 1), 1);
    CHECK_EQ_INT(count_closed(fds, 2), 0);
    CHECK_EQ_INT(count_closed(fds + 3, 1), 0);
    CHECK_EQ_INT(rsd_http_respond(s, held, 204, NULL, 0, NULL, 0), RSD_OK);
    for (k = 0; k < N; k++) close(fds[k]);
    rsd_http_client_destroy(c);
    rsd_http_server_destroy(s);
}

/* A full table whose every candidate arrived in this same ms, and a client waiting: the
   step can take nobody now, so the server does not ask to be woken by the listener (a
   fake clock that never moves would spin) and its deadline is the next ms, when the
   waiting client is taken. */
static void test_server_full_no_spin(void) {
    enum { N = 2 };
    rsd_http_server_desc sd;
    rsd_http_server *s;
    rsd_http_server_info ss;
    rsd_pollfd pf[8];
    int fds[N + 1], k, i, n;
    memset(&sd, 0, sizeof sd);
    sd.max_conns = N;
    s = rsd_http_server_create(&sd);
    REQUIRE(s);
    for (k = 0; k < N; k++) REQUIRE((fds[k] = raw_connect(rsd_http_server_port(s))) >= 0);
    for (i = 0; i < 100; i++) {
        rsd_http_server_query(s, &ss);
        if (ss.accepts == N) break;
        pump_ex(NULL, s, 1000, 20, NULL, 0);
    }
    REQUIRE(ss.accepts == N);
    REQUIRE((fds[N] = raw_connect(rsd_http_server_port(s))) >= 0); /* waits in the backlog */
    for (i = 0; i < 5; i++) {
        CHECK_EQ_INT(rsd_http_server_step(s, 1000), 0);
        n = rsd_http_server_pollfds(s, pf, 8);
        REQUIRE(n <= 8);
        CHECK_EQ_INT(poll((struct pollfd *)(void *)pf, (nfds_t)n, 0), 0); /* nothing wakes at once */
        CHECK_EQ_INT(rsd_http_server_next_deadline(s), 1001);
    }
    rsd_http_server_query(s, &ss);
    CHECK_EQ_INT(ss.evictions, 0);
    for (i = 0; i < 100; i++) {
        rsd_http_server_query(s, &ss);
        if (ss.accepts == N + 1) break;
        pump_ex(NULL, s, 1001, 20, NULL, 0);
    }
    CHECK_EQ_INT(ss.accepts, N + 1);
    CHECK_EQ_INT(ss.evictions, 1);
    CHECK_EQ_INT(count_closed(fds, N), 1);
    /* the new one is spared in its own ms, then the table is an ordinary full one */
    n = rsd_http_server_pollfds(s, pf, 8);
    CHECK(rsd_http_server_next_deadline(s) > 1001);
    for (k = 0; k <= N; k++) close(fds[k]);
    rsd_http_server_destroy(s);
}

static int g_accept_logs;
TP_FN void count_accept_log(void *user, int level, uint32_t item, const char *msg, const char *where) {
    (void)user; (void)level; (void)msg; (void)where;
    if (item == RSD_LOGITEM_HTTP_ACCEPT_FAILED) g_accept_logs++;
}

#if !defined(_WIN32) /* RLIMIT_NOFILE */
/* accept() out of descriptors (EMFILE): the listener leaves pollfds and is not tried
   again until a connection closes or the back-off passes (no spinning, one log line);
   the waiting client is served once descriptors are free again. */
static void test_server_accept_emfile(void) {
    rsd_http_server_desc sd;
    rsd_http_server *s;
    rsd_http_server_info ss;
    struct rlimit old_rl, rl;
    struct sockaddr_in a;
    srv_ctx x;
    int dups[64], ndup = 0, cfd, probe, i;
    bool listed = false;
    char buf[512];
    memset(&sd, 0, sizeof sd); memset(&x, 0, sizeof x);
    sd.logger.fn = count_accept_log;
    g_accept_logs = 0;
    s = rsd_http_server_create(&sd);
    REQUIRE(s);
    cfd = socket(AF_INET, SOCK_STREAM, 0); /* the client's descriptor exists before the table fills */
    REQUIRE(cfd >= 0);
    REQUIRE(getrlimit(RLIMIT_NOFILE, &old_rl) == 0);
    probe = dup(0);
    REQUIRE(probe >= 0);
    close(probe);
    rl = old_rl;
    rl.rlim_cur = (rlim_t)probe + 8;
    REQUIRE(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    while (ndup < 64 && (dups[ndup] = dup(0)) >= 0) ndup++;
    CHECK(errno == EMFILE);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(rsd_http_server_port(s));
    CHECK(connect(cfd, (struct sockaddr *)&a, sizeof a) == 0);
    for (i = 0; i < 20; i++) {
        rsd_pollfd fds[8];
        int n = rsd_http_server_pollfds(s, fds, 8); /* no connections: only the listener */
        if (i > 0 && n > 0) listed = true;
        (void)poll((struct pollfd *)(void *)fds, (nfds_t)n, 0);
        (void)rsd_http_server_step_polled(s, 1000, fds, n);
    }
    CHECK(!listed);                      /* not polled again after the failure */
    CHECK_EQ_INT(g_accept_logs, 1);      /* one line, not one per step */
    rsd_http_server_query(s, &ss);
    CHECK_EQ_INT(ss.accept_pauses, 1);
    CHECK_EQ_INT(ss.accepts, 0);
    CHECK_EQ_INT(rsd_http_server_next_deadline(s), 1000 + RSD_HTTP_SERVER_ACCEPT_BACKOFF_MS);
    while (ndup > 0) close(dups[--ndup]);
    CHECK(setrlimit(RLIMIT_NOFILE, &old_rl) == 0);
    /* the back-off passes: the client that waited is taken and served */
    CHECK(send(cfd, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n", 28, MSG_NOSIGNAL) == 28);
    for (i = 0; i < 50; i++) {
        rsd_http_server_query(s, &ss);
        if (ss.responses) break;
        pump_ex(NULL, s, 1000 + RSD_HTTP_SERVER_ACCEPT_BACKOFF_MS, 20, NULL, 0);
        serve(s, &x);
    }
    CHECK_EQ_INT(ss.accepts, 1);
    CHECK(raw_read_head(cfd, buf, sizeof buf) > 0 && strncmp(buf, "HTTP/1.1 200 ", 13) == 0);
    CHECK_EQ_INT(g_accept_logs, 1);
    close(cfd);
    rsd_http_server_destroy(s);
}
#endif

/* Failure-injection helpers for simulators: truncated body, close-delimited body,
   unchunked stream with a length (keep-alive continues). */
static void test_server_raw_streams(void) {
    rsd_http_server *s = rsd_http_server_create(NULL);
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_server_info ss;
    rsd_http_event ev;
    srv_ctx x;
    memset(&x, 0, sizeof x);
    REQUIRE(s && c);
    REQUIRE(get(c, s, &x, "/rawlen", NULL, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_OK);
    CHECK(rsd_str_eq_c(ev.body, "abcdef"));
    REQUIRE(get(c, s, &x, "/rawlen", NULL, 0, &ev));
    CHECK(ev.result == RSD_OK && ev.reused);
    REQUIRE(get(c, s, &x, "/trunc", NULL, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_ERR_CLOSED);
    CHECK_EQ_INT(ev.body_bytes, 10);
    REQUIRE(get(c, s, &x, "/closedelim", NULL, 0, &ev));
    CHECK_EQ_INT(ev.result, RSD_OK);
    CHECK(rsd_str_eq_c(ev.body, "abcdef"));
    CHECK(!ev.reused); /* the truncation closed the previous connection */
    rsd_http_server_query(s, &ss);
    CHECK_EQ_INT(ss.accepts, 2);
    rsd_http_client_destroy(c);
    rsd_http_server_destroy(s);
}

#if !defined(_WIN32) /* fork() */
/* The blocking wrapper against a server stepped by a forked child. */
static void test_sync(void) {
    rsd_http_server *s = rsd_http_server_create(NULL);
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_request q;
    rsd_http_event resp;
    pid_t pid;
    int status = 0, r;
    char u[128];
    REQUIRE(s && c);
    fflush(stdout);
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) { /* child: serve until 3 requests are answered */
        srv_ctx x;
        memset(&x, 0, sizeof x);
        rsd_http_client_destroy(c);
        while (x.requests < 3) {
            rsd_pollfd fds[8];
            int n = rsd_http_server_pollfds(s, fds, 8);
            if (poll((struct pollfd *)(void *)fds, (nfds_t)n, 2000) == 0) break;
            (void)rsd_http_server_step_polled(s, rsd_now_ms(), fds, n);
            serve(s, &x);
        }
        for (r = 0; r < 20; r++) { /* let the last answer drain */
            rsd_pollfd fds[8];
            int n = rsd_http_server_pollfds(s, fds, 8);
            (void)poll((struct pollfd *)(void *)fds, (nfds_t)n, 10);
            (void)rsd_http_server_step(s, rsd_now_ms());
        }
        rsd_http_server_destroy(s);
        _exit(0);
    }
    memset(&q, 0, sizeof q);
    snprintf(u, sizeof u, "http://localhost:%u/health", (unsigned)rsd_http_server_port(s));
    q.url = u;
    r = rsd_http_request_sync(c, &q, &resp);
    CHECK_EQ_INT(r, RSD_OK);
    CHECK_EQ_INT(resp.status, 200);
    CHECK(rsd_str_eq_c(resp.body, "ok"));
    r = rsd_http_request_sync(c, &q, &resp);
    CHECK_EQ_INT(r, RSD_OK);
    CHECK(resp.reused);
    q.url = url(s, "/chunked");
    r = rsd_http_request_sync(c, &q, &resp);
    CHECK_EQ_INT(r, RSD_OK);
    CHECK(rsd_str_eq_c(resp.body, "hello chunked world"));
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    rsd_http_server_destroy(s);
    rsd_http_client_destroy(c);
}
#endif

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    tp_net_init();
    RUN(test_sse_reader);
    RUN(test_sse_keepalive_frames);
    RUN(test_arguments);
    RUN(test_keepalive_reuse);
    RUN(test_close_idle);
    RUN(test_post_body_and_chunked);
    RUN(test_limits);
    RUN(test_chunked_limit);
    RUN(test_peer_closes_mid_body);
    RUN(test_timeout_fake_clock);
    RUN(test_connect_refused);
    RUN(test_dribble_total_timeout);
    RUN(test_stale_idle_not_reused);
    RUN(test_stale_retry);
    RUN(test_keepalive_timeout_honoured);
    RUN(test_server_bad_clients);
    RUN(test_server_deadline_with_pending_event);
    RUN(test_deferred_and_closed);
    RUN(test_sse_stream);
    RUN(test_sse_event_over_half_the_slot);
    RUN(test_bearer_not_logged);
    RUN(test_zero_alloc_steady_state);
    RUN(test_alloc_failure_loop);
    RUN(test_fd_hygiene);
    RUN(test_server_framing);
    RUN(test_server_backpressure);
    RUN(test_read_to_close);
    RUN(test_concurrent);
    RUN(test_names_and_ipv6);
    RUN(test_server_request_timeout);
    RUN(test_stream_body);
    RUN(test_bad_responses);
    RUN(test_server_raw_streams);
#if !defined(_WIN32)
    RUN(test_sync);
#endif
#if !defined(_WIN32)
    RUN(test_fast_stream_step_bounded);
#endif
    RUN(test_server_exhaustion);
    RUN(test_server_first_byte_and_head_deadlines);
    RUN(test_server_body_deadline);
    RUN(test_server_exhaustion_slow_bodies);
    RUN(test_server_full_no_spin);
#if !defined(_WIN32)
    RUN(test_server_accept_emfile);
#endif
#if defined(_WIN32)
    printf("skip: test_sync, test_fast_stream_step_bounded (a fork()ed server: no fork on "
           "Windows), test_server_accept_emfile (RLIMIT_NOFILE: no descriptor limit to lower)\n");
#endif
    return RSD_TEST_END();
}
