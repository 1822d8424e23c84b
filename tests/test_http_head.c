/* The HTTP client's response head before the body ends (rsd_http_client_query_req) and
   rsd_http_pause taking effect inside the read loop. The peer is a raw loopback socket
   the test writes by hand, so it decides exactly when head and body bytes exist. No
   sleeps: every wait is a poll() on the sockets involved, bounded by a count. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include "rsd_test.h"
#include "portable.h"
#include <fcntl.h>
/* Sockets through the library's own wrappers (the net section: POSIX or Winsock). */

static int raw_listen(uint16_t *port) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = (int)socket(AF_INET, SOCK_STREAM, 0), one = 1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, (const char *)&one, sizeof one);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 8) < 0) { rsdi_sock_close(fd); return -1; }
    getsockname(fd, (struct sockaddr *)&a, &len);
    *port = ntohs(a.sin_port);
    return fd;
}

static char g_url[128];
static const char *url_of(uint16_t port, const char *path) {
    snprintf(g_url, sizeof g_url, "http://127.0.0.1:%u%s", (unsigned)port, path);
    return g_url;
}

/* Steps the client until the listener has a connection, accepts it, then reads the
   request head (the client sends it in one write). */
static int accept_request(rsd_http_client *c, int lfd) {
    char buf[4096];
    size_t len = 0;
    int fd = -1, i;
    for (i = 0; i < 200 && fd < 0; i++) {
        rsd_pollfd p;
        p.fd = lfd; p.events = RSD_POLLIN; p.revents = 0;
        (void)rsd_http_client_step(c, 0);
        if (rsd_poll(&p, 1, 50) > 0) fd = rsdi_sock_accept(lfd);
    }
    if (fd < 0) return -1;
    for (i = 0; i < 200; i++) {
        rsd_pollfd p;
        long n;
        (void)rsd_http_client_step(c, 0);
        p.fd = fd; p.events = RSD_POLLIN; p.revents = 0;
        if (rsd_poll(&p, 1, 50) <= 0) continue;
        n = rsdi_sock_recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (n <= 0) break;
        len += (size_t)n;
        buf[len] = 0;
        if (strstr(buf, "\r\n\r\n")) return fd;
    }
    rsdi_sock_close(fd);
    return -1;
}

static bool send_all(int fd, const char *p, size_t n) {
    while (n) {
        long w = rsdi_sock_send(fd, p, n);
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static bool send_str(int fd, const char *s) { return send_all(fd, s, strlen(s)); }

/* Polls the client's sockets (bounded wait) and steps it. */
static void pump(rsd_http_client *c) {
    rsd_pollfd fds[8];
    int n = rsd_http_client_pollfds(c, fds, 8);
    if (n > 8) n = 8;
    (void)rsd_poll(fds, n, rsd_http_client_next_deadline(c) == 0 ? 0 : 50);
    (void)rsd_http_client_step_polled(c, 0, fds, n);
}

/* ---- the head accessor -------------------------------------------------------------- */
typedef struct head_ctx {
    rsd_http_client *c;
    rsd_http_req_h h;
    int calls;
    int status_seen;      /* what query_head said from inside on_body */
    size_t bytes;
    char data[64];
} head_ctx;

static void head_on_body(void *user, const char *data, size_t len) {
    head_ctx *x = (head_ctx *)user;
    rsd_http_req_info hi;
    x->calls++;
    if (rsd_http_client_query_req(x->c, x->h, &hi) == RSD_OK) x->status_seen = hi.status;
    if (x->bytes + len <= sizeof x->data) memcpy(x->data + x->bytes, data, len);
    x->bytes += len;
}

static void test_head_before_body_ends(void) {
    uint16_t port = 0;
    int lfd = raw_listen(&port), fd, i;
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_request q;
    rsd_http_req_info hi;
    rsd_http_event ev;
    rsd_http_req_h stale;
    head_ctx x;
    static const char head[] =
        "HTTP/1.1 100 Continue\r\n\r\n"
        "HTTP/1.1 201 Created\r\nContent-Type: text/x-test\r\nX-Extra:  v1 \r\nContent-Length: 10\r\n\r\nabc";
    REQUIRE(lfd >= 0 && c);
    memset(&x, 0, sizeof x);
    memset(&q, 0, sizeof q);
    q.url = url_of(port, "/h");
    q.on_body = head_on_body;
    q.user = &x;
    x.c = c;
    REQUIRE(rsd_http_send(c, &q, 0, &x.h) == RSD_OK);
    /* queued: nothing yet */
    CHECK_EQ_INT(rsd_http_client_query_req(c, x.h, &hi), RSD_PENDING);
    CHECK(!hi.done && hi.status == 0);
    fd = accept_request(c, lfd);
    REQUIRE(fd >= 0);
    /* the request went out, no answer yet */
    (void)rsd_http_client_step(c, 0);
    CHECK_EQ_INT(rsd_http_client_query_req(c, x.h, &hi), RSD_PENDING);
    /* an interim 100 alone is never reported as the head */
    REQUIRE(send_all(fd, head, 25));
    for (i = 0; i < 5; i++) pump(c);
    CHECK_EQ_INT(rsd_http_client_query_req(c, x.h, &hi), RSD_PENDING);
    REQUIRE(send_all(fd, head + 25, sizeof head - 1 - 25));
    for (i = 0; i < 200 && x.bytes < 3; i++) pump(c);
    CHECK_EQ_INT(x.bytes, 3);
    CHECK_EQ_INT(x.status_seen, 201); /* available from inside on_body */
    REQUIRE(rsd_http_client_query_req(c, x.h, &hi) == RSD_OK);
    CHECK_EQ_INT(hi.status, 201);
    CHECK_EQ_INT(hi.minor_version, 1);
    CHECK(rsd_str_eq_c(hi.reason, "Created"));
    CHECK(rsd_str_eq_c(rsd_http_header_get(hi.headers, hi.num_headers, "content-type"), "text/x-test"));
    CHECK(rsd_str_eq_c(rsd_http_header_get(hi.headers, hi.num_headers, "X-Extra"), "v1"));
    CHECK_EQ_INT(hi.framing.content_length, 10);
    CHECK(!hi.framing.chunked && !hi.framing.close && !hi.bodyless && !hi.done && !hi.paused);
    CHECK_EQ_INT(hi.body_bytes, 3);
    /* still streaming: no event yet */
    CHECK(!rsd_http_next_event(c, &ev));
    REQUIRE(send_all(fd, "defghij", 7));
    for (i = 0; i < 200 && !rsd_http_next_event(c, &ev); i++) pump(c);
    REQUIRE(i < 200);
    CHECK_EQ_INT(ev.result, RSD_OK);
    CHECK_EQ_INT(ev.status, 201);
    CHECK_EQ_INT(x.bytes, 10);
    CHECK(memcmp(x.data, "abcdefghij", 10) == 0);
    /* delivered, not yet released: the head is still readable, done */
    REQUIRE(rsd_http_client_query_req(c, x.h, &hi) == RSD_OK);
    CHECK(hi.done);
    CHECK_EQ_INT(hi.body_bytes, 10);
    CHECK(rsd_str_eq_c(rsd_http_header_get(hi.headers, hi.num_headers, "X-Extra"), "v1"));
    stale = x.h;
    (void)rsd_http_client_step(c, 0); /* releases the event */
    CHECK_EQ_INT(rsd_http_client_query_req(c, stale, &hi), RSD_ERR_NOT_FOUND);
    CHECK_EQ_INT(rsd_http_client_query_req(c, stale, NULL), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_http_client_query_req(NULL, stale, &hi), RSD_ERR_ARG);
    stale.id = 0;
    CHECK_EQ_INT(rsd_http_client_query_req(c, stale, &hi), RSD_ERR_NOT_FOUND);
    rsdi_sock_close(fd);
    rsdi_sock_close(lfd);
    rsd_http_client_destroy(c);
}

/* A request that ends without a head reports its error; a chunked head says chunked. */
static void test_head_error_and_chunked(void) {
    uint16_t port = 0;
    int lfd = raw_listen(&port), fd, i;
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_request q;
    rsd_http_req_info hi;
    rsd_http_event ev;
    head_ctx x;
    REQUIRE(lfd >= 0 && c);
    memset(&x, 0, sizeof x);
    memset(&q, 0, sizeof q);
    q.url = url_of(port, "/c");
    q.on_body = head_on_body;
    q.user = &x;
    x.c = c;
    REQUIRE(rsd_http_send(c, &q, 0, &x.h) == RSD_OK);
    fd = accept_request(c, lfd);
    REQUIRE(fd >= 0);
    REQUIRE(send_str(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nxyz\r\n"));
    for (i = 0; i < 200 && x.bytes < 3; i++) pump(c);
    REQUIRE(rsd_http_client_query_req(c, x.h, &hi) == RSD_OK);
    CHECK(hi.framing.chunked);
    CHECK_EQ_INT(hi.framing.content_length, -1);
    /* the peer hangs up mid-body: the event says CLOSED, the head stays readable */
    rsdi_sock_close(fd);
    for (i = 0; i < 200 && !rsd_http_next_event(c, &ev); i++) pump(c);
    REQUIRE(i < 200);
    CHECK_EQ_INT(ev.result, RSD_ERR_CLOSED);
    CHECK_EQ_INT(rsd_http_client_query_req(c, x.h, &hi), RSD_OK);
    (void)rsd_http_client_step(c, 0);

    /* no head at all: the request's error */
    memset(&x, 0, sizeof x);
    x.c = c;
    q.url = url_of(port, "/refused");
    REQUIRE(rsd_http_send(c, &q, 0, &x.h) == RSD_OK);
    fd = accept_request(c, lfd);
    REQUIRE(fd >= 0);
    REQUIRE(send_str(fd, "HTTP/1.1 2x0 Bad\r\n\r\n"));
    for (i = 0; i < 200; i++) {
        pump(c);
        if (rsd_http_client_query_req(c, x.h, &hi) != RSD_PENDING) break;
    }
    CHECK_EQ_INT(rsd_http_client_query_req(c, x.h, &hi), RSD_ERR_PROTOCOL);
    CHECK(hi.done);
    CHECK(rsd_http_next_event(c, &ev));
    CHECK_EQ_INT(ev.result, RSD_ERR_PROTOCOL);
    rsdi_sock_close(fd);
    rsdi_sock_close(lfd);
    rsd_http_client_destroy(c);
}

/* ---- pause inside the read loop --------------------------------------------------------- */
enum { BIG_BODY = 4 << 20, SLOT_BYTES = 16384 };
static char g_wire[BIG_BODY + 65536];

static char pattern(size_t i) { return (char)('a' + (i * 7 + i / 4093) % 26); }

typedef struct pause_ctx {
    rsd_http_client *c;
    rsd_http_req_h h;
    int calls;
    uint64_t bytes;
    bool bad;            /* a byte differed from the pattern, or a call came while paused */
    bool paused;
} pause_ctx;

static void pause_on_body(void *user, const char *data, size_t len) {
    pause_ctx *x = (pause_ctx *)user;
    size_t k;
    if (x->paused) x->bad = true;
    x->calls++;
    for (k = 0; k < len; k++)
        if (data[k] != pattern((size_t)x->bytes + k)) { x->bad = true; break; }
    x->bytes += len;
    /* pause after every piece: the next one must wait for the resume */
    CHECK_EQ_INT(rsd_http_pause(x->c, x->h, true), RSD_OK);
    x->paused = true;
}

/* Builds the response: Content-Length or chunked (16 KiB + 1 chunks). */
static size_t build_wire(bool chunked) {
    size_t n = 0, i = 0;
    if (!chunked) {
        n = (size_t)snprintf(g_wire, sizeof g_wire, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", BIG_BODY);
        for (i = 0; i < BIG_BODY; i++) g_wire[n++] = pattern(i);
        return n;
    }
    n = (size_t)snprintf(g_wire, sizeof g_wire, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    while (i < BIG_BODY) {
        size_t take = BIG_BODY - i < 16385 ? BIG_BODY - i : 16385;
        n += (size_t)snprintf(g_wire + n, sizeof g_wire - n, "%zx\r\n", take);
        for (; take; take--, i++) g_wire[n++] = pattern(i);
        g_wire[n++] = '\r';
        g_wire[n++] = '\n';
    }
    memcpy(g_wire + n, "0\r\n\r\n", 5);
    return n + 5;
}

/* The peer writes as fast as the socket takes it (non-blocking), so while the client is
   paused the kernel buffers between them fill up; the client must still make exactly
   one on_body call per resume. */
static void run_pause(bool chunked) {
    uint16_t port = 0;
    int lfd = raw_listen(&port), fd, i, resumes = 0, max_per_step = 0, paused_steps = 0;
    size_t wire_len = build_wire(chunked), off = 0;
    rsd_http_client_desc d;
    rsd_http_client *c;
    rsd_http_request q;
    rsd_http_event ev;
    rsd_http_req_info hi;
    pause_ctx x;
    bool got = false;
    memset(&d, 0, sizeof d);
    d.max_body_bytes = SLOT_BYTES;
    c = rsd_http_client_create(&d);
    REQUIRE(lfd >= 0 && c);
    memset(&x, 0, sizeof x);
    memset(&q, 0, sizeof q);
    q.url = url_of(port, "/big");
    q.on_body = pause_on_body;
    q.user = &x;
    q.total_timeout_ms = RSD_TIMEOUT_NONE;
    x.c = c;
    REQUIRE(rsd_http_send(c, &q, 0, &x.h) == RSD_OK);
    fd = accept_request(c, lfd);
    REQUIRE(fd >= 0);
    REQUIRE(rsdi_fd_nonblock(fd) == 0);
    for (i = 0; i < 200000 && !got; i++) {
        int before = x.calls, nfds;
        rsd_pollfd fds[8];
        rsd_pollfd pw;
        /* the peer: write until the socket is full */
        while (off < wire_len) {
            long w = rsdi_sock_send(fd, g_wire + off, wire_len - off);
            if (w <= 0) break;
            off += (size_t)w;
        }
        if (x.paused) {
            /* paused: the request is not in pollfds and steps read nothing, even with
               the socket readable */
            nfds = rsd_http_client_pollfds(c, fds, 8);
            CHECK_EQ_INT(nfds, 0);
            (void)rsd_http_client_step(c, 0);
            CHECK_EQ_INT(x.calls, before);
            REQUIRE(rsd_http_client_query_req(c, x.h, &hi) == RSD_OK);
            CHECK(hi.paused);
            CHECK_EQ_INT(hi.body_bytes, x.bytes);
            paused_steps++;
            x.paused = false;
            CHECK_EQ_INT(rsd_http_pause(c, x.h, false), RSD_OK);
            resumes++;
        }
        /* one poll on both ends, then one step */
        nfds = rsd_http_client_pollfds(c, fds, 7);
        if (nfds > 7) nfds = 7;
        pw.fd = fd; pw.events = off < wire_len ? RSD_POLLOUT : 0; pw.revents = 0;
        fds[nfds].fd = pw.fd; fds[nfds].events = pw.events; fds[nfds].revents = 0;
        (void)rsd_poll(fds, nfds + 1, 50);
        (void)rsd_http_client_step_polled(c, 0, fds, nfds);
        if (x.calls - before > max_per_step) max_per_step = x.calls - before;
        while (rsd_http_next_event(c, &ev)) {
            CHECK_EQ_INT(ev.result, RSD_OK);
            got = true;
        }
    }
    CHECK(got);
    CHECK(!x.bad);
    CHECK_EQ_INT(x.bytes, BIG_BODY);
    CHECK_EQ_INT(max_per_step, 1);              /* the old loop read on to EAGAIN */
    CHECK(x.calls >= BIG_BODY / SLOT_BYTES);     /* pieces of at most one slot buffer */
    CHECK(paused_steps >= x.calls - 1);
    if (rsdt_cur_failed)
        printf("  chunked=%d calls=%d resumes=%d max_per_step=%d bytes=%llu\n", (int)chunked, x.calls, resumes,
               max_per_step, (unsigned long long)x.bytes);
    rsdi_sock_close(fd);
    rsdi_sock_close(lfd);
    rsd_http_client_destroy(c);
}

static void test_pause_content_length(void) { run_pause(false); }
static void test_pause_chunked(void) { run_pause(true); }

/* Pausing before the head: the head still arrives only once resumed; pausing a
   stale handle is RSD_ERR_NOT_FOUND. */
static void test_pause_before_head(void) {
    uint16_t port = 0;
    int lfd = raw_listen(&port), fd, i;
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_request q;
    rsd_http_req_info hi;
    rsd_http_event ev;
    head_ctx x;
    rsd_http_req_h h;
    REQUIRE(lfd >= 0 && c);
    memset(&x, 0, sizeof x);
    memset(&q, 0, sizeof q);
    q.url = url_of(port, "/p");
    q.on_body = head_on_body;
    q.user = &x;
    x.c = c;
    REQUIRE(rsd_http_send(c, &q, 0, &x.h) == RSD_OK);
    fd = accept_request(c, lfd);
    REQUIRE(fd >= 0);
    CHECK_EQ_INT(rsd_http_pause(c, x.h, true), RSD_OK);
    REQUIRE(send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
    for (i = 0; i < 5; i++) {
        rsd_pollfd p;
        p.fd = fd; p.events = RSD_POLLOUT; p.revents = 0;
        (void)rsd_poll(&p, 1, 10);
        (void)rsd_http_client_step(c, 0);
    }
    CHECK_EQ_INT(rsd_http_client_query_req(c, x.h, &hi), RSD_PENDING);
    CHECK(hi.paused);
    CHECK_EQ_INT(x.calls, 0);
    CHECK_EQ_INT(rsd_http_pause(c, x.h, false), RSD_OK);
    for (i = 0; i < 200 && !rsd_http_next_event(c, &ev); i++) pump(c);
    REQUIRE(i < 200);
    CHECK_EQ_INT(ev.result, RSD_OK);
    CHECK_EQ_INT(x.bytes, 2);
    h = x.h;
    (void)rsd_http_client_step(c, 0);
    CHECK_EQ_INT(rsd_http_pause(c, h, true), RSD_ERR_NOT_FOUND);
    rsdi_sock_close(fd);
    rsdi_sock_close(lfd);
    rsd_http_client_destroy(c);
}

/* ---- pause from on_sse: events already received wait for the resume ---------------- */
typedef struct sse_ctx {
    rsd_http_client *c;
    rsd_http_req_h h;
    int events;
    bool bad, paused;
} sse_ctx;

static void pause_on_sse(void *user, const rsd_sse_event *ev) {
    sse_ctx *x = (sse_ctx *)user;
    char want[32];
    if (x->paused) x->bad = true;
    snprintf(want, sizeof want, "event %d", x->events);
    if (!rsd_str_eq_c(ev->data, want)) x->bad = true;
    x->events++;
    CHECK_EQ_INT(rsd_http_pause(x->c, x->h, true), RSD_OK);
    x->paused = true;
}

/* 40 events and the end of the body arrive in one write; each resume delivers exactly
   one event, and the request completes only after the last. */
static void run_sse_pause(bool chunked) {
    uint16_t port = 0;
    int lfd = raw_listen(&port), fd, i, k, steps = 0;
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_request q;
    rsd_http_event ev;
    sse_ctx x;
    char body[2048], wire[4096];
    size_t blen = 0, wlen;
    bool got = false;
    REQUIRE(lfd >= 0 && c);
    for (k = 0; k < 40; k++) blen += (size_t)snprintf(body + blen, sizeof body - blen, "data: event %d\n\n", k);
    if (chunked)
        wlen = (size_t)snprintf(wire, sizeof wire,
                                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                                "%zx\r\n%s\r\n0\r\n\r\n", blen, body);
    else
        wlen = (size_t)snprintf(wire, sizeof wire,
                                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %zu\r\n\r\n%s",
                                blen, body);
    memset(&x, 0, sizeof x);
    memset(&q, 0, sizeof q);
    q.url = url_of(port, "/sse");
    q.on_sse = pause_on_sse;
    q.user = &x;
    x.c = c;
    REQUIRE(rsd_http_send(c, &q, 0, &x.h) == RSD_OK);
    fd = accept_request(c, lfd);
    REQUIRE(fd >= 0);
    REQUIRE(send_all(fd, wire, wlen));
    for (i = 0; i < 200 && x.events == 0; i++) pump(c);
    REQUIRE(x.events == 1);
    for (i = 0; i < 200 && !got; i++) {
        int before = x.events;
        /* paused: nothing happens, the deadline does not say "now" */
        (void)rsd_http_client_step(c, 0);
        CHECK_EQ_INT(x.events, before);
        CHECK(rsd_http_client_next_deadline(c) != 0);
        CHECK(!rsd_http_next_event(c, &ev));
        x.paused = false;
        CHECK_EQ_INT(rsd_http_pause(c, x.h, false), RSD_OK);
        if (x.events < 40) CHECK_EQ_INT(rsd_http_client_next_deadline(c), 0); /* held events: step now */
        pump(c);
        steps++;
        CHECK(x.events - before <= 1);
        if (x.events < 40) CHECK(!rsd_http_next_event(c, &ev));
        while (rsd_http_next_event(c, &ev)) {
            CHECK_EQ_INT(ev.result, RSD_OK);
            got = true;
        }
        if (x.events == 40 && !got) { /* the last resume may complete at the next step */
            pump(c);
            while (rsd_http_next_event(c, &ev)) {
                CHECK_EQ_INT(ev.result, RSD_OK);
                got = true;
            }
        }
    }
    CHECK(got);
    CHECK(!x.bad);
    CHECK_EQ_INT(x.events, 40);
    CHECK_EQ_INT(steps, 39); /* the first event came before the loop */
    rsdi_sock_close(fd);
    rsdi_sock_close(lfd);
    rsd_http_client_destroy(c);
}

static void test_pause_sse_chunked(void) { run_sse_pause(true); }
static void test_pause_sse_length(void) { run_sse_pause(false); }

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    tp_net_init();
    RUN(test_head_before_body_ends);
    RUN(test_head_error_and_chunked);
    RUN(test_pause_before_head);
    RUN(test_pause_content_length);
    RUN(test_pause_chunked);
    RUN(test_pause_sse_chunked);
    RUN(test_pause_sse_length);
    return RSD_TEST_END();
}
