/* test_serve_cut.c -- what the README says rsd-serve does when a child dies mid-answer,
   checked: before any byte of the answer's body a 502 with an OpenAI-shaped error (that
   half is test_serve's upstream-hangup test), after an SSE stream has begun -- the
   status line already said 200 -- an `event: error` frame with the 502 error object,
   the last chunk and the close. rsd-sim plays llama-server (slow tokens, so the crash
   lands mid-stream). */
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
#include <sys/wait.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <unistd.h>

#define SIM_BIN "build/bin/rsd-sim"
#include "serve_harness.h"

static void test_stream_cut_when_child_dies(void) {
    static char buf[1 << 16];
    serve_proc s, child;
    char cfg[256], text[1024], model[256];
    const char *args[] = {"--config", cfg, NULL};
    int fd, got, port, i;
    size_t n = 0;
    make_dir();
    REQUIRE(g_dir[0]);
    snprintf(cfg, sizeof cfg, "%s/cut.ini", g_dir);
    snprintf(model, sizeof model, "%s/slow.gguf", g_dir);
    REQUIRE(write_file(model, "") == 0);
    /* one token every 300 ms: the stream is still running when the child is killed */
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nllama_server = %s\nargs = --runtime server --load-ms 10 --token-ms 300\n"
             "stop_grace = 2\n\n[model slow]\nmodel = %s\n", SIM_BIN, model);
    REQUIRE(write_file(cfg, text) == 0);
    REQUIRE(serve_start(&s, args) == 0);
    fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    REQUIRE(raw_post(fd, "/v1/chat/completions", chat("slow", true)) == 0);
    /* the head and the first event of the stream */
    for (i = 0; i < 100 && !strstr(buf, "data: "); i++) {
        got = raw_read(fd, buf + n, sizeof buf - 1 - n);
        if (got <= 0) break;
        n += (size_t)got;
        buf[n] = '\0';
    }
    REQUIRE(strstr(buf, "data: ") != NULL);
    CHECK(strncmp(buf, "HTTP/1.1 200", 12) == 0);
    port = (int)status_field(&s, "slow", "port");
    REQUIRE(port > 0);
    memset(&child, 0, sizeof child);
    snprintf(child.url, sizeof child.url, "http://127.0.0.1:%d", port);
    (void)http(&child, "POST", "/_sim/crash", "{\"model\":\"slow\",\"exit_code\":3}");
    /* read to the end: the connection is closed (bounded: raw_read waits at most 10 s) */
    for (;;) {
        got = raw_read(fd, buf + n, sizeof buf - 1 - n);
        if (got <= 0) break;
        n += (size_t)got;
        buf[n] = '\0';
    }
    CHECK(got == 0 || (got < 0 && errno == ECONNRESET)); /* closed, not timed out */
    close(fd);
    CHECK(strstr(buf, "Transfer-Encoding: chunked") != NULL || strstr(buf, "transfer-encoding: chunked") != NULL);
    /* too late for a status: the stream says why in an SSE error event (the OpenAI
       error object, 502), ends properly and the connection closes */
    CHECK(strstr(buf, "\r\nevent: error\ndata: {\"error\":{\"code\":502,") != NULL);
    CHECK(n >= 5 && strcmp(buf + n - 5, "0\r\n\r\n") == 0);
    CHECK(strstr(buf, "HTTP/1.1 502") == NULL);
    CHECK(strstr(buf, "[DONE]") == NULL);
    if (rsdt_cur_failed || getenv("RSD_TEST_VERBOSE")) printf("  got %u bytes:\n%s\n", (unsigned)n, buf);
    CHECK(wait_field(&s, "slow", "in_flight", 0));
    CHECK_EQ_INT(serve_stop(&s), 0);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    RUN(test_stream_cut_when_child_dies);
    serve_cleanup();
    return RSD_TEST_END();
}
