/* test_real_serve.c -- rsd-serve (build/bin/rsd-serve) with REAL llama-server
   children (single-model mode, -m FILE) on tiny models made on the spot: chat routed by
   model, streaming, LRU eviction of the idle one, requests after the child's 5 s
   keep-alive closed the idle upstream socket, the child's own slot count bounding what
   is sent to it, a broken model that costs no healthy one, and SIGTERM stopping every
   child. Skipped (one line, "0 passed, 0 failed") when no llama-server is found
   (tests/real_server.h). Waits are on events (pipes, sockets, GET /_rsd/events
   between looks at GET /status); the one deliberate wait is the keep-alive idle time, which is under test. */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency_http.h"
#include "rsd_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "real_server.h"
#include "serve_harness.h"
#include "real_serve.h"


/* A chat body for model: a few tokens, streamed or not. */
static const char *real_chat(const char *model, int max_tokens, bool stream) {
    static char b[320];
    snprintf(b, sizeof b,
             "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":%d%s}",
             model, max_tokens, stream ? ",\"stream\":true" : "");
    return b;
}

/* Reads a streamed answer from fd until "[DONE]" (or EOF/timeout) into buf; the number
   of SSE data events seen. */
static int read_stream(int fd, char *buf, size_t cap, bool *done) {
    int n = 0, got, events = 0;
    const char *p;
    *done = false;
    while (!*done && (size_t)n + 1 < cap && (got = raw_read(fd, buf + n, cap - 1 - (size_t)n)) > 0) {
        n += got;
        buf[n] = 0;
        *done = strstr(buf, "[DONE]") != NULL;
    }
    buf[n] = 0;
    for (p = buf; (p = strstr(p, "data: ")) != NULL; p += 6) events++;
    return events;
}

static bool gone(int64_t pid) { return pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH; }
static bool pid_gone(const serve_proc *s, const void *pid) { (void)s; return gone(*(const int64_t *)pid); }

/* Routing by model, a stream passed through as it comes, the LRU idle child evicted for
   a third model, and SIGTERM: every child stopped (their pids are gone) and exit 0. */
static void test_real_route_stream_evict(void) {
    serve_proc s;
    static char buf[1 << 16];
    int64_t pid_a, pid_b, pid_c;
    bool done = false;
    int fd, events;
    REQUIRE(real_serve_start(&s, "route", "max_models = 2\n",
                             "[model tiny-a]\nmodel = @/tiny-a.gguf\nctx = 256\n"
                             "[model tiny-b]\nmodel = @/tiny-b.gguf\nctx = 256\n"
                             "[model tiny-c]\nmodel = @/tiny-c.gguf\nctx = 256\n") == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", real_chat("tiny-a", 4, false)), 200);
    CHECK(strstr(g_body, "\"object\":\"chat.completion\"") != NULL);
    CHECK(strstr(g_body, "\"model\":\"tiny-a\"") != NULL); /* --alias: the child names itself */
    pid_a = status_field(&s, "tiny-a", "pid");
    CHECK(pid_a > 0);
    /* streaming from tiny-b */
    fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    REQUIRE(raw_post(fd, "/v1/chat/completions", real_chat("tiny-b", 6, true)) == 0);
    events = read_stream(fd, buf, sizeof buf, &done);
    close(fd);
    CHECK(done);
    CHECK(strstr(buf, "HTTP/1.1 200") == buf && strstr(buf, "text/event-stream") != NULL);
    CHECK(strstr(buf, "chat.completion.chunk") != NULL);
    CHECK(events >= 3);
    pid_b = status_field(&s, "tiny-b", "pid");
    CHECK(pid_b > 0 && pid_b != pid_a);
    /* a third model: the least recently used idle one (tiny-a) makes room */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", real_chat("tiny-c", 4, false)), 200);
    CHECK(strstr(g_body, "\"model\":\"tiny-c\"") != NULL);
    CHECK(wait_state(&s, "tiny-a", "unloaded"));
    CHECK(wait_state(&s, "tiny-b", "ready"));
    CHECK_EQ_INT(status_field(&s, NULL, "evictions"), 1);
    CHECK(gone(pid_a));
    pid_b = status_field(&s, "tiny-b", "pid");
    pid_c = status_field(&s, "tiny-c", "pid");
    CHECK(pid_b > 0 && pid_c > 0);
    CHECK(log_has(&s, "tiny-a: stopping pid") && log_has(&s, "(evict)"));
    /* SIGTERM: every child is stopped before rsd-serve exits 0 */
    CHECK_EQ_INT(serve_stop(&s), 0);
    CHECK(gone(pid_b));
    CHECK(gone(pid_c));
    CHECK(log_has(&s, "stopped"));
}

/* llama-server closes an idle keep-alive connection after 5 s ("Keep-Alive: timeout=5"):
   requests after more than that still go through (rsd-serve drops its idle upstream
   socket first, or resends on a fresh one), and the child is not restarted for it. */
static void test_real_after_keepalive_idle(void) {
    serve_proc s;
    int st;
    REQUIRE(real_serve_start(&s, "idle", "max_models = 1\n", "[model tiny-a]\nmodel = @/tiny-a.gguf\nctx = 256\n") == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", real_chat("tiny-a", 2, false)), 200);
    (void)poll(NULL, 0, 6000); /* past the child's 5 s keep-alive: the thing under test */
    st = http(&s, "POST", "/v1/chat/completions", real_chat("tiny-a", 2, false));
    if (st != 200) printf("  after the idle time: %d %s\n", st, g_body);
    CHECK_EQ_INT(st, 200);
    CHECK_EQ_INT(http(&s, "GET", "/props?model=tiny-a", NULL), 200); /* a GET the same way */
    CHECK(strstr(g_body, "total_slots") != NULL);
    CHECK_EQ_INT(status_field(&s, NULL, "spawns"), 1);
    CHECK_EQ_INT(status_field(&s, NULL, "crashes"), 0);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* A child started with -np 2 (in its args, not rsd-serve's `parallel`) says so on GET
   /props (total_slots 2): of three concurrent streams, at no sampled moment are more than
   two upstream at once, and all three complete. (Whether a sample catches the third one
   waiting inside rsd-serve depends on how fast the tiny model streams, so it is not
   asserted here; test_fleet and test_pool check the limit itself deterministically.) */
static void test_real_child_slots_bound(void) {
    serve_proc s;
    static char buf[3][1 << 15];
    int fd[3], i, ok = 0, done_all = 0;
    REQUIRE(real_serve_start(&s, "slots", "max_models = 1\n",
                             "[model tiny-a]\nmodel = @/tiny-a.gguf\nctx = 512\nargs = -np 2\n") == 0);
    CHECK_EQ_INT(http(&s, "POST", "/models/load", "{\"model\":\"tiny-a\"}"), 200);
    REQUIRE(wait_state(&s, "tiny-a", "ready"));
    CHECK_EQ_INT(http(&s, "GET", "/props?model=tiny-a", NULL), 200); /* what the fleet read */
    CHECK(strstr(g_body, "\"total_slots\":2") != NULL);
    for (i = 0; i < 3; i++) {
        fd[i] = raw_connect(s.port);
        REQUIRE(fd[i] >= 0);
        REQUIRE(raw_post(fd[i], "/v1/chat/completions", real_chat("tiny-a", 48, true)) == 0);
    }
    for (i = 0; i < 200 && !done_all; i++) { /* sample until nothing runs or waits */
        int64_t run = status_field(&s, "tiny-a", "in_flight"), wait = status_field(&s, "tiny-a", "waiting");
        CHECK(run <= 2);
        done_all = run == 0 && wait == 0;
    }
    for (i = 0; i < 3; i++) {
        bool done = false;
        (void)read_stream(fd[i], buf[i], sizeof buf[i], &done);
        close(fd[i]);
        ok += done && strstr(buf[i], "HTTP/1.1 200") == buf[i];
    }
    CHECK_EQ_INT(ok, 3);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* broken.gguf fails to load: its request is answered 503 with llama-server's own words,
   the idle healthy model stopped to make room comes back by itself, and the next
   requests for the broken one are refused at once (backoff) without stopping it again. */
static void test_real_broken_keeps_healthy(void) {
    serve_proc s;
    int64_t pid_a;
    int i;
    REQUIRE(real_serve_start(&s, "broken", "max_models = 1\n",
                             "[model tiny-a]\nmodel = @/tiny-a.gguf\nctx = 256\n"
                             "[model bad]\nmodel = @/broken.gguf\nctx = 256\n") == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", real_chat("tiny-a", 2, false)), 200);
    pid_a = status_field(&s, "tiny-a", "pid");
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", real_chat("bad", 2, false)), 503);
    /* the command, and llama-server's own words when it printed any: its log is written by
       a thread, and a server that fails at once can exit before that thread has written
       its last lines (seen in a CI run and in about half of the runs here: the pipe reached
       EOF with 0 bytes, or ended before "failed to load model"). Quoting the last output is
       test_fleet's and test_serve's, with children that always print. */
    CHECK(strstr(g_body, "; command: ") != NULL);
    CHECK(strstr(g_body, "before it was ready") != NULL);
    CHECK(wait_until(&s, pid_gone, &pid_a, 30000)); /* its stop may overlap bad's start */
    CHECK(wait_state(&s, "tiny-a", "ready")); /* restored, no request needed */
    for (i = 0; i < 2; i++) {
        CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", real_chat("bad", 2, false)), 503);
        CHECK(strstr(g_body, "not retried for") != NULL);
    }
    CHECK_EQ_INT(status_field(&s, NULL, "evictions"), 1);
    CHECK_EQ_INT(status_field(&s, NULL, "restores"), 1);
    CHECK_EQ_INT(status_field(&s, NULL, "spawns"), 3); /* tiny-a, bad, tiny-a again */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", real_chat("tiny-a", 2, false)), 200);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* The object "key": {...} in text (its braces included) as a view; NULL when absent. */
static const char *obj_after(const char *text, const char *key, size_t *len) {
    const char *p = strstr(text, key), *q;
    int depth = 0;
    if (!p) return NULL;
    p += strlen(key);
    for (q = p; *q; q++) {
        if (*q == '{') depth++;
        else if (*q == '}' && --depth == 0) break;
    }
    if (!*q) return NULL;
    *len = (size_t)(q - p + 1);
    return p;
}

/* What real clients read from the router: a loaded model's listing entry carries the
   child's own "meta" (the same object its /v1/models gives), /models/sse shows the
   router's loading progress and then "loaded" with that info; and a child killed
   mid-stream ends the stream with an error event (OpenAI error object, 502) and the
   chunked end, not a cut socket. */
static void test_real_meta_sse_cut(void) {
    static sse_buf rt;
    static char buf[1 << 17], child_meta[1024];
    serve_proc s, child;
    const char *m, *info;
    size_t mlen = 0, ilen = 0;
    int64_t port, pid;
    int fd, got;
    size_t n = 0;
    REQUIRE(real_serve_start(&s, "meta", "max_models = 2\n",
                             "[model tiny-a]\nmodel = @/tiny-a.gguf\nctx = 256\naliases = aa\n"
                             "[model tiny-b]\nmodel = @/tiny-b.gguf\nctx = 2048\nargs = -np 1\n") == 0);
    memset(&rt, 0, sizeof rt);
    rt.fd = sse_open(s.port, "/models/sse", NULL);
    REQUIRE(rt.fd >= 0);
    CHECK_EQ_INT(http(&s, "POST", "/models/load", "{\"model\":\"aa\"}"), 200);
    REQUIRE(sse_wait(&rt, "\"status\":\"loaded\",\"info\":{\"id\":\"tiny-a\",\"aliases\":[\"tiny-a\"],\"tags\":[],"));
    CHECK(sse_wait(&rt, "}}}}\n\n"));
    CHECK(strstr(rt.b, "\"value\":0.0}}}\n\n") != NULL && strstr(rt.b, "\"value\":1.0}}}\n\n") != NULL);
    /* the child's own word */
    port = status_field(&s, "tiny-a", "port");
    REQUIRE(port > 0);
    memset(&child, 0, sizeof child);
    snprintf(child.url, sizeof child.url, "http://127.0.0.1:%d", (int)port);
    CHECK_EQ_INT(http(&child, "GET", "/v1/models", NULL), 200);
    m = obj_after(g_body, "\"meta\":", &mlen);
    REQUIRE(m != NULL && mlen < sizeof child_meta);
    memcpy(child_meta, m, mlen);
    child_meta[mlen] = 0;
    CHECK(strstr(child_meta, "\"n_ctx\":256") && strstr(child_meta, "\"ftype\":\"all F32\"") &&
          strstr(child_meta, "\"vocab_type\":1") && strstr(child_meta, "\"n_ctx_train\":") &&
          strstr(child_meta, "\"n_params\":") && strstr(child_meta, "\"size\":"));
    info = obj_after(strstr(rt.b, "\"status\":\"loaded\""), "\"meta\":", &ilen);
    CHECK(info && ilen == mlen && !memcmp(info, child_meta, mlen));
    CHECK_EQ_INT(http(&s, "GET", "/v1/models/tiny-a", NULL), 200);
    m = obj_after(g_body, "\"meta\":", &mlen);
    CHECK(m && mlen == strlen(child_meta) && !memcmp(m, child_meta, mlen));
    printf("  meta: %s\n", child_meta);

    /* tiny-b killed mid-stream */
    fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    REQUIRE(raw_post(fd, "/v1/chat/completions",
                     "{\"model\":\"tiny-b\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                     "\"max_tokens\":1900,\"ignore_eos\":true,\"stream\":true}") == 0);
    buf[0] = 0;
    while (n < sizeof buf - 1 && !strstr(buf, "data: {")) {
        got = raw_read(fd, buf + n, sizeof buf - 1 - n);
        if (got <= 0) break;
        n += (size_t)got;
        buf[n] = 0;
    }
    REQUIRE(strstr(buf, "data: {") != NULL);
    pid = status_field(&s, "tiny-b", "pid");
    REQUIRE(pid > 0);
    CHECK_EQ_INT(kill((pid_t)pid, SIGKILL), 0);
    while (n < sizeof buf - 1 && (got = raw_read(fd, buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)got;
    buf[n] = 0;
    close(fd);
    CHECK(strstr(buf, "[DONE]") == NULL); /* it was cut, not finished */
    CHECK(strstr(buf, "event: error\ndata: {\"error\":{\"code\":502,\"message\":\"upstream 'tiny-b'") != NULL);
    CHECK(n >= 5 && !strcmp(buf + n - 5, "0\r\n\r\n"));
    if (!strstr(buf, "event: error")) printf("  stream tail: %s\n", n > 600 ? buf + n - 600 : buf);
    CHECK(sse_wait(&rt, "{\"model\":\"tiny-b\",\"event\":\"status_change\",\"data\":{\"status\":\"unloaded\""));
    close(rt.fd);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* The unified binary's spelling (`llama serve`): rsd-serve runs llama_server's first word,
   here a wrapper in a directory with a blank that takes the subcommand and execs the real
   llama-server, with the rest right after argv[0]; the child answers as ever. */
static void test_real_unified_binary(void) {
    serve_proc s;
    char llama[800], path[700], text[4096];
    const char *args[] = {"--config", path, NULL};
    REQUIRE(llama_wrapper(g_models, g_bin, llama, sizeof llama) == 0);
    snprintf(path, sizeof path, "%s/unified.ini", g_models);
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nllama_server = \"%s\" serve\nargs = -t 1\nstart_timeout = 60\nstop_grace = 5\n"
             "[model tiny-a]\nmodel = %s/tiny-a.gguf\nctx = 256\n", llama, g_models);
    REQUIRE(write_file(path, text) == 0);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", real_chat("tiny-a", 2, false)), 200);
    CHECK(strstr(g_body, "\"model\":\"tiny-a\"") != NULL);
    CHECK_EQ_INT(http(&s, "GET", "/models", NULL), 200);
    CHECK(strstr(g_body, "\"serve\",\"-m\"") != NULL);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    REAL_SKIP_OR_FIND(g_bin);
    if (real_serve_setup() != 0) return RSD_TEST_END();
    RUN(test_real_route_stream_evict);
    RUN(test_real_meta_sse_cut);
    RUN(test_real_after_keepalive_idle);
    RUN(test_real_child_slots_bound);
    RUN(test_real_broken_keeps_healthy);
    RUN(test_real_unified_binary);
    real_serve_cleanup();
    return RSD_TEST_END();
}
