/* rsd-sim over loopback: spawns build/bin/rsd-sim on port 0, reads the port from
   its "listening on" line, talks HTTP/1.1 to it with plain sockets, stops it with
   SIGTERM. Everything the program adds to rsd_sim.h (wiring, deferred answers, streams,
   exit codes) is checked here; the behaviour itself is in test_sim.c. */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency.h"
#include "rsd_test.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define SIM_BIN "build/bin/rsd-sim"

typedef struct simproc {
    pid_t pid;
    int out;       /* read end of its stdout */
    int port;
    char line[512];
} simproc;

/* Spawns rsd-sim with args (NULL-terminated) and waits for its listening line. */
static int sim_spawn(simproc *p, const char *const *args) {
    char *argv[40];
    int fds[2], n = 0, i;
    size_t got = 0;
    posix_spawn_file_actions_t fa;
    memset(p, 0, sizeof *p);
    argv[n++] = (char *)SIM_BIN;
    for (i = 0; args[i] && n < 39; i++) argv[n++] = (char *)args[i];
    argv[n] = NULL;
    if (pipe(fds) != 0) return -1;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0); /* its log lines */
    if (posix_spawn(&p->pid, SIM_BIN, &fa, NULL, argv, environ) != 0) {
        posix_spawn_file_actions_destroy(&fa);
        return -1;
    }
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    p->out = fds[0];
    while (got + 1 < sizeof p->line) { /* blocks until the line arrives (or the child dies) */
        ssize_t r = read(p->out, p->line + got, sizeof p->line - 1 - got);
        char *at;
        if (r <= 0) return -1;
        got += (size_t)r;
        p->line[got] = 0;
        if ((at = strstr(p->line, "127.0.0.1:")) != NULL && strchr(at, '\n')) {
            p->port = atoi(at + 10);
            return p->port > 0 ? 0 : -1;
        }
    }
    return -1;
}

static int sim_stop(simproc *p) {
    int st = 0;
    kill(p->pid, SIGTERM);
    waitpid(p->pid, &st, 0);
    close(p->out);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* One request on a fresh connection (Connection: close); the raw response in buf. */
static int http(int port, const char *method, const char *target, const char *body, char *buf, size_t cap) {
    struct sockaddr_in a;
    char req[2048];
    int fd = socket(AF_INET, SOCK_STREAM, 0), n;
    size_t got = 0;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { if (fd >= 0) close(fd); return -1; }
    n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n"
                 "Content-Length: %u\r\n\r\n%s", method, target, (unsigned)(body ? strlen(body) : 0), body ? body : "");
    if (write(fd, req, (size_t)n) != n) { close(fd); return -1; }
    for (;;) {
        ssize_t r = read(fd, buf + got, cap - 1 - got);
        if (r <= 0) break;
        got += (size_t)r;
        if (got + 1 >= cap) break;
    }
    buf[got] = 0;
    close(fd);
    return got > 12 ? atoi(buf + 9) : -1;
}

static const char *body_of(const char *resp) {
    const char *b = strstr(resp, "\r\n\r\n");
    return b ? b + 4 : "";
}

static char RESP[1 << 20];

static void test_router_over_loopback(void) {
    static const char *const args[] = {"--runtime", "router", "--port", "0", "--models-max", "1", "--load-ms", "50",
                                       "--model", "id=a,tags=pinned", "--model", "b", NULL};
    simproc p;
    REQUIRE(sim_spawn(&p, args) == 0);
    CHECK(strstr(p.line, "rsd-sim: router listening on http://127.0.0.1:") != NULL);
    CHECK_EQ_INT(http(p.port, "GET", "/health", NULL, RESP, sizeof RESP), 200);
    CHECK(strstr(RESP, "Server: llama.cpp\r\n") != NULL);
    CHECK_EQ_STR(body_of(RESP), "{\"status\":\"ok\"}");
    CHECK_EQ_INT(http(p.port, "GET", "/props", NULL, RESP, sizeof RESP), 200);
    CHECK(strstr(body_of(RESP), "\"role\":\"router\",\"max_instances\":1") != NULL);
    /* a deferred answer: autoload blocks the request until loaded */
    CHECK_EQ_INT(http(p.port, "POST", "/v1/chat/completions", "{\"model\":\"a\"}", RESP, sizeof RESP), 200);
    CHECK(strstr(body_of(RESP), "\"content\":\"This is a simulated reply.\"") != NULL);
    /* the explicit load waits for the victim to stop, then answers */
    CHECK_EQ_INT(http(p.port, "POST", "/models/load", "{\"model\":\"b\"}", RESP, sizeof RESP), 200);
    CHECK_EQ_STR(body_of(RESP), "{\"success\":true}");
    CHECK_EQ_INT(http(p.port, "POST", "/models/load", "{\"model\":\"nope\"}", RESP, sizeof RESP), 404);
    /* a stream: chunked SSE ending in [DONE] */
    CHECK_EQ_INT(http(p.port, "POST", "/v1/chat/completions", "{\"model\":\"b\",\"stream\":true}", RESP, sizeof RESP), 200);
    CHECK(strstr(RESP, "text/event-stream") != NULL);
    CHECK(strstr(RESP, "data: [DONE]") != NULL);
    CHECK_EQ_INT(http(p.port, "GET", "/_sim/log", NULL, RESP, sizeof RESP), 200);
    CHECK(strstr(body_of(RESP), "\"path\":\"/models/load\",\"model\":\"b\",\"status\":200") != NULL);
    CHECK_EQ_INT(sim_stop(&p), 0);
}

static void test_server_mode_exit_codes(void) {
    static const char *const ok[] = {"--runtime", "server", "-m", "/m/x.gguf", "--port", "0", "--load-ms", "30", NULL};
    static const char *const bad[] = {"--runtime", "server", "-m", "/m/x.gguf,fail=1", "--port", "0", "--load-ms", "30", NULL};
    simproc p;
    int st = 0;
    REQUIRE(sim_spawn(&p, ok) == 0);
    CHECK(strstr(p.line, "llama_server: listening on http://127.0.0.1:") != NULL); /* printed after loading */
    CHECK_EQ_INT(http(p.port, "GET", "/health", NULL, RESP, sizeof RESP), 200);
    CHECK_EQ_INT(sim_stop(&p), 0);
    /* a failing load: no listening line, exit 1 */
    CHECK(sim_spawn(&p, bad) != 0);
    waitpid(p.pid, &st, 0);
    close(p.out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
}

/* ---- keep-alive sockets ------------------------------------------------------------- */
static int connect_to(int port) {
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { close(fd); return -1; }
    return fd;
}

/* Reads one response from fd (Content-Length or chunked) within wait_ms; *eof when the
   peer closed. The byte count, -1 on timeout or error. */
static int read_one(int fd, char *buf, size_t cap, int wait_ms, bool *eof) {
    size_t got = 0;
    *eof = false;
    for (;;) {
        struct pollfd pf;
        const char *h = strstr(buf, "\r\n\r\n"), *cl;
        ssize_t r;
        buf[got] = 0;
        if (got && (h = strstr(buf, "\r\n\r\n")) != NULL) {
            if ((cl = strstr(buf, "Content-Length: ")) != NULL && cl < h &&
                got >= (size_t)(h + 4 - buf) + (size_t)atoi(cl + 16))
                return (int)got;
            if (strstr(buf, "Transfer-Encoding: chunked") && strstr(h, "\r\n0\r\n\r\n")) return (int)got;
        }
        pf.fd = fd;
        pf.events = POLLIN;
        pf.revents = 0;
        if (poll(&pf, 1, wait_ms) <= 0) return -1;
        r = read(fd, buf + got, cap - 1 - got);
        if (r <= 0) { *eof = true; buf[got] = 0; return (int)got; }
        got += (size_t)r;
        if (got + 1 >= cap) return (int)got;
    }
}

/* Waits (bounded) for the peer to close fd; true when it did. */
static bool closes(int fd, int wait_ms) {
    char b[256];
    struct pollfd pf;
    pf.fd = fd;
    pf.events = POLLIN;
    pf.revents = 0;
    while (poll(&pf, 1, wait_ms) > 0) {
        ssize_t r = read(fd, b, sizeof b);
        if (r <= 0) return true;
    }
    return false;
}

static bool send_req(int fd, const char *method, const char *target, const char *body) {
    char req[1024];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %u\r\n\r\n%s", method,
                     target, (unsigned)(body ? strlen(body) : 0), body ? body : "");
    return write(fd, req, (size_t)n) == n;
}

/* llama.cpp's connection behaviour (measured on build 10116): Keep-Alive: timeout=5,
   max=100 on answers below 400; Connection: close on 4xx/5xx with the socket still
   usable; every proxied answer chunked with Connection: close, then closed; idle
   sockets closed after --idle-close-ms. */
static void test_connections_like_llama_cpp(void) {
    static const char *const never[] = {"--runtime", "router", "--port", "0", "--load-ms", "20", "--idle-close-ms", "0",
                                        "--model", "a", NULL};
    static const char *const fast[] = {"--runtime", "router", "--port", "0", "--idle-close-ms", "200", "--model", "a", NULL};
    simproc p;
    bool eof;
    int fd;
    REQUIRE(sim_spawn(&p, never) == 0);
    REQUIRE((fd = connect_to(p.port)) >= 0);
    CHECK(send_req(fd, "GET", "/nope", NULL));
    CHECK(read_one(fd, RESP, sizeof RESP, 20000, &eof) > 0);
    CHECK(strncmp(RESP, "HTTP/1.1 404", 12) == 0);
    CHECK(strstr(RESP, "\r\nConnection: close\r\n") != NULL);
    CHECK(strstr(RESP, "Keep-Alive") == NULL);
    CHECK(!eof);
    CHECK(send_req(fd, "GET", "/health", NULL)); /* the socket is still usable */
    CHECK(read_one(fd, RESP, sizeof RESP, 20000, &eof) > 0);
    CHECK(strncmp(RESP, "HTTP/1.1 200", 12) == 0);
    CHECK(strstr(RESP, "\r\nKeep-Alive: \r\n") == NULL);
    CHECK(strstr(RESP, "Keep-Alive: timeout=1, max=100") == NULL); /* 0 = never: no header */
    CHECK(send_req(fd, "POST", "/v1/chat/completions", "{\"model\":\"a\"}"));
    CHECK(read_one(fd, RESP, sizeof RESP, 20000, &eof) > 0);
    CHECK(strncmp(RESP, "HTTP/1.1 200", 12) == 0);
    CHECK(strstr(RESP, "\r\nTransfer-Encoding: chunked\r\n") != NULL);
    CHECK(strstr(RESP, "\r\nConnection: close\r\n") != NULL);
    CHECK(strstr(RESP, "This is a simulated reply.") != NULL);
    CHECK(eof || closes(fd, 20000)); /* closed although idle sockets are kept (0 = never) */
    close(fd);
    REQUIRE((fd = connect_to(p.port)) >= 0); /* a proxied stream: chunked, ends, closed */
    CHECK(send_req(fd, "POST", "/v1/chat/completions", "{\"model\":\"a\",\"stream\":true}"));
    CHECK(read_one(fd, RESP, sizeof RESP, 20000, &eof) > 0);
    CHECK(strstr(RESP, "text/event-stream") != NULL && strstr(RESP, "data: [DONE]") != NULL);
    CHECK(eof || closes(fd, 20000));
    close(fd);
    CHECK_EQ_INT(sim_stop(&p), 0);
    REQUIRE(sim_spawn(&p, fast) == 0);
    REQUIRE((fd = connect_to(p.port)) >= 0);
    CHECK(send_req(fd, "GET", "/health", NULL));
    CHECK(read_one(fd, RESP, sizeof RESP, 20000, &eof) > 0);
    CHECK(strstr(RESP, "\r\nKeep-Alive: timeout=1, max=100\r\n") != NULL);
    CHECK(!eof);
    CHECK(closes(fd, 20000)); /* idle: closed by the simulator */
    close(fd);
    CHECK_EQ_INT(sim_stop(&p), 0);
}

/* A server whose model crashes answers nothing more, as a real llama-server that died: a chat
   that reached it beside the crash gets no answer (not 503 "Loading model"), and the process
   exits with the crash's code. The sim is stopped while both requests arrive, the crash's
   connection first, so it reads them in one turn with the crash ahead. */
static void test_server_mode_crash_answers_nothing(void) {
    static const char *const args[] = {"--runtime", "server", "-m", "/m/x.gguf", "--port", "0", "--load-ms", "0",
                                       "--gen-ms", "60000", NULL};
    simproc p;
    bool eof;
    int crash, chat, st = 0;
    REQUIRE(sim_spawn(&p, args) == 0);
    REQUIRE(kill(p.pid, SIGSTOP) == 0);
    crash = connect_to(p.port);
    chat = connect_to(p.port);
    CHECK(crash >= 0 && chat >= 0);
    CHECK(send_req(crash, "POST", "/_sim/crash", "{\"model\":\"/m/x.gguf\",\"exit_code\":3}"));
    CHECK(send_req(chat, "POST", "/v1/chat/completions", "{\"model\":\"/m/x.gguf\"}"));
    REQUIRE(kill(p.pid, SIGCONT) == 0);
    CHECK_EQ_INT(read_one(chat, RESP, sizeof RESP, 20000, &eof), 0);
    if (RESP[0]) printf("  the chat's answer: %.200s\n", RESP);
    CHECK(eof);
    CHECK(closes(crash, 20000));
    close(crash);
    close(chat);
    if (!closes(p.out, 20000)) kill(p.pid, SIGKILL); /* its stdout closes when it exits */
    waitpid(p.pid, &st, 0);
    close(p.out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3);
}

/* The router's POST /slots/ID?action=save|restore for a model that is not loaded: it is
   loaded first, then its child answers (measured on b10116's router: an empty slot saves
   0 tokens; "Invalid action" comes after the load; ?autoload=false is 400 "model is not
   loaded"). Two saves that wait for the same load each get their own file. */
static bool file_has(const char *dir, const char *name, const char *text) {
    char path[512], buf[256];
    FILE *f;
    size_t n;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if ((f = fopen(path, "rb")) == NULL) return false;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, text) != NULL;
}

/* Polls the router's listing until model a shows unloaded (an unload answers before its
   child has exited); false after about 10 s. */
static bool a_unloaded(int port) {
    int i;
    for (i = 0; i < 2000; i++) {
        struct timespec ts = {0, 5000000};
        if (http(port, "GET", "/v1/models", NULL, RESP, sizeof RESP) == 200 &&
            strstr(body_of(RESP), "\"status\":{\"value\":\"unloaded\"") != NULL)
            return true;
        nanosleep(&ts, NULL);
    }
    return false;
}

static void test_router_slots_autoload(void) {
    char dir[] = "/tmp/rsd-simnet-slots.XXXXXX", path[512];
    const char *args[] = {"--runtime", "router", "--port", "0", "--load-ms", "50", "--model", "a",
                          "--slot-save-path", dir, NULL};
    simproc p;
    bool eof;
    int f1, f2, k;
    REQUIRE(mkdtemp(dir) != NULL);
    REQUIRE(sim_spawn(&p, args) == 0);
    CHECK_EQ_INT(http(p.port, "POST", "/slots/0?action=save&autoload=false", "{\"model\":\"a\",\"filename\":\"x.bin\"}",
                      RESP, sizeof RESP), 400);
    CHECK(strstr(body_of(RESP), "model is not loaded") != NULL);
    CHECK_EQ_INT(http(p.port, "POST", "/slots/0?action=save", "{\"model\":\"a\",\"filename\":\"e.bin\"}", RESP, sizeof RESP), 200);
    CHECK(strstr(body_of(RESP), "\"n_saved\":0") != NULL);
    CHECK(file_has(dir, "e.bin", "rsim-kv 1 0"));
    CHECK_EQ_INT(http(p.port, "POST", "/v1/chat/completions", "{\"model\":\"a\"}", RESP, sizeof RESP), 200);
    CHECK_EQ_INT(http(p.port, "POST", "/slots/0?action=save", "{\"model\":\"a\",\"filename\":\"s.bin\"}", RESP, sizeof RESP), 200);
    CHECK(strstr(body_of(RESP), "\"n_saved\":6") != NULL);
    /* unloaded: a restore loads it, then restores */
    CHECK_EQ_INT(http(p.port, "POST", "/models/unload", "{\"model\":\"a\"}", RESP, sizeof RESP), 200);
    REQUIRE(a_unloaded(p.port));
    CHECK_EQ_INT(http(p.port, "POST", "/slots/1?action=restore", "{\"model\":\"a\",\"filename\":\"s.bin\"}", RESP, sizeof RESP), 200);
    CHECK(strstr(body_of(RESP), "\"n_restored\":6") != NULL);
    CHECK_EQ_INT(http(p.port, "POST", "/slots/1?action=save", "{\"model\":\"a\",\"filename\":\"one.bin\"}", RESP, sizeof RESP), 200);
    CHECK(strstr(body_of(RESP), "\"n_saved\":6") != NULL); /* the restored slot */
    CHECK_EQ_INT(http(p.port, "GET", "/v1/models", NULL, RESP, sizeof RESP), 200);
    CHECK(strstr(body_of(RESP), "\"status\":{\"value\":\"loaded\"") != NULL);
    /* unloaded: the child's own check answers, after the load */
    CHECK_EQ_INT(http(p.port, "POST", "/models/unload", "{\"model\":\"a\"}", RESP, sizeof RESP), 200);
    REQUIRE(a_unloaded(p.port));
    CHECK_EQ_INT(http(p.port, "POST", "/slots/0?action=bogus", "{\"model\":\"a\",\"filename\":\"s.bin\"}", RESP, sizeof RESP), 400);
    CHECK(strstr(body_of(RESP), "Invalid action") != NULL);
    CHECK_EQ_INT(http(p.port, "GET", "/v1/models", NULL, RESP, sizeof RESP), 200);
    CHECK(strstr(body_of(RESP), "\"status\":{\"value\":\"loaded\"") != NULL);
    /* two saves waiting for one load: each its own file */
    CHECK_EQ_INT(http(p.port, "POST", "/models/unload", "{\"model\":\"a\"}", RESP, sizeof RESP), 200);
    REQUIRE(a_unloaded(p.port));
    REQUIRE((f1 = connect_to(p.port)) >= 0);
    REQUIRE((f2 = connect_to(p.port)) >= 0);
    CHECK(send_req(f1, "POST", "/slots/2?action=save", "{\"model\":\"a\",\"filename\":\"f1.bin\"}"));
    CHECK(send_req(f2, "POST", "/slots/3?action=save", "{\"model\":\"a\",\"filename\":\"f2.bin\"}"));
    for (k = 0; k < 2; k++) {
        CHECK(read_one(k ? f2 : f1, RESP, sizeof RESP, 20000, &eof) > 0);
        CHECK(strncmp(RESP, "HTTP/1.1 200", 12) == 0);
        CHECK(strstr(RESP, k ? "\"filename\":\"f2.bin\"" : "\"filename\":\"f1.bin\"") != NULL);
    }
    close(f1);
    close(f2);
    CHECK(file_has(dir, "f1.bin", "rsim-kv 1 0"));
    CHECK(file_has(dir, "f2.bin", "rsim-kv 1 0"));
    CHECK(file_has(dir, "one.bin", "rsim-kv 1 1"));
    CHECK_EQ_INT(sim_stop(&p), 0);
    for (k = 0; k < 6; k++) {
        static const char *const names[] = {"e.bin", "s.bin", "one.bin", "f1.bin", "f2.bin", "x.bin"};
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        (void)unlink(path);
    }
    CHECK(rmdir(dir) == 0);
}

static void test_help(void) {
    static const char *const args[] = {"--help", NULL};
    simproc p;
    int st = 0;
    char all[16384];
    size_t got = 0;
    CHECK(sim_spawn(&p, args) != 0); /* no listening line */
    got = strlen(p.line);
    memcpy(all, p.line, got);
    for (;;) {
        ssize_t r = read(p.out, all + got, sizeof all - 1 - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    all[got] = 0;
    waitpid(p.pid, &st, 0);
    close(p.out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(strstr(all, "usage: rsd-sim") != NULL);
    CHECK(strstr(all, "--router-gen july|later") != NULL);
    CHECK(strstr(all, "--idle-close-ms N") != NULL);
    CHECK(strstr(all, "--big-body BYTES") != NULL);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    if (access(SIM_BIN, X_OK) != 0) {
        printf("  %s not built\n", SIM_BIN);
        return 1;
    }
    RUN(test_router_over_loopback);
    RUN(test_server_mode_exit_codes);
    RUN(test_server_mode_crash_answers_nothing);
    RUN(test_connections_like_llama_cpp);
    RUN(test_router_slots_autoload);
    RUN(test_help);
    return RSD_TEST_END();
}
