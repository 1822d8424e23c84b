/* test_serve_api.c -- rsd-serve's API for people and tools: api_key / admin_key (401
   shaped as llama-server's, a child's own --api-key sent to it), CORS, the event streams
   (GET /_rsd/events with its bounded history and ?since= replay, GET /models/sse in the
   llama.cpp router's format, and rsd-ensure waiting on it), GET /metrics (parsed as the
   Prometheus text format) and the status page at GET / (in headless chromium when it is
   installed: its table checked against /status, a screenshot taken). Children are
   rsd-sim in server mode, and the REAL llama-server (started with --api-key) when one is
   found. Nothing sleeps: waits are blocking reads with a bound, or bounded polls. */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency_http.h"
#include "../apps/rsd-serve/rsd_serve.h"
#include "rsd_test.h"

#include <dirent.h>
#include <stddef.h>
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

#ifndef SERVE_BIN
#define SERVE_BIN "build/bin/rsd-serve"
#endif
#define SIM_BIN "build/bin/rsd-sim"
#define ENSURE_BIN "build/bin/rsd-ensure"
#include "real_server.h"
#include "serve_harness.h"

static rsrv_config g_cfg;
static const char *g_sim_args = "--runtime server --load-ms 20 --gen-ms 5";

/* Writes an INI at DIR/name.ini: globals (extra lines), then the models ("@/x.gguf"
   becomes an empty file in DIR/m). */
static void write_ini(char *path, size_t cap, const char *name, int max_models, const char *globals,
                      const char *models) {
    make_dir();
    snprintf(path, cap, "%s/%s.ini", g_dir, name);
    write_sim_ini(path, g_sim_args, max_models, globals, models);
}

/* One request on its own connection (Connection: close), headers given as lines
   ("Name: value\r\n"); the whole answer (head and body) in out. The status, 0 on a
   transport error. */
static int raw_req(int port, const char *method, const char *path, const char *headers, const char *body,
                   char *out, size_t cap) {
    char req[4096];
    int fd = raw_connect(port), n, status = 0;
    size_t got = 0;
    out[0] = 0;
    if (fd < 0) return 0;
    n = snprintf(req, sizeof req,
                 "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s%s%d\r\n\r\n%s", method, path,
                 headers ? headers : "", body ? "Content-Type: application/json\r\n" : "",
                 "Content-Length: ", body ? (int)strlen(body) : 0, body ? body : "");
    if (write(fd, req, (size_t)n) != n) { close(fd); return 0; }
    for (;;) {
        int r = raw_read(fd, out + got, cap - got - 1);
        if (r <= 0) break;
        got += (size_t)r;
        if (got + 1 >= cap) break;
    }
    out[got] = 0;
    close(fd);
    if (sscanf(out, "HTTP/1.1 %d", &status) != 1) status = 0;
    return status;
}

/* An open event stream: GET path with extra header lines; the fd (the head is read by
   sse_wait with the events). */
/* ---- configuration ------------------------------------------------------------------ */
static void test_api_config(void) {
    char err[RSRV_ERR_MAX], ini[8192];
    rsrv_opts o;
    static rsrv_config back;
    const char *text = "api_key = sk-one\nadmin_key = adm-two\ncors = https://a.example, http://localhost:3000\n"
                       "event_history = 64\n[model a]\nmodel = /m\n";
    char *argv[] = {(char *)"rsd-serve", (char *)"--api-key", (char *)"K", (char *)"--admin-key", (char *)"A",
                    (char *)"--cors", (char *)"*", (char *)"--event-history", (char *)"9", NULL};
    int n;
    rsrv_config_init(&g_cfg);
    REQUIRE(rsrv_parse_ini(&g_cfg, text, strlen(text), "api.ini", err, sizeof err) == 0);
    CHECK_EQ_STR(g_cfg.api_key, "sk-one");
    CHECK_EQ_STR(g_cfg.admin_key, "adm-two");
    CHECK_EQ_STR(g_cfg.cors, "https://a.example, http://localhost:3000");
    CHECK_EQ_INT(g_cfg.event_history, 64);
    CHECK(rsrv_cors_allows(g_cfg.cors, "http://localhost:3000", 21));
    CHECK(rsrv_cors_allows(g_cfg.cors, "https://a.example", 17));
    CHECK(!rsrv_cors_allows(g_cfg.cors, "https://a.example.evil", 22));
    CHECK(!rsrv_cors_allows(g_cfg.cors, "http://a.example", 16));
    CHECK(rsrv_cors_allows("*", "http://anything", 15));
    CHECK(!rsrv_cors_allows("", "http://anything", 15));
    n = rsrv_write_ini(&g_cfg, ini, sizeof ini);
    REQUIRE(n > 0);
    rsrv_config_init(&back);
    CHECK_EQ_INT(rsrv_parse_ini(&back, ini, (size_t)n, "rt", err, sizeof err), 0);
    CHECK(rsrv_config_equal(&g_cfg, &back));
    /* defaults */
    rsrv_config_init(&g_cfg);
    REQUIRE(rsrv_parse_ini(&g_cfg, "[model a]\nmodel = /m\n", 20, "d.ini", err, sizeof err) == 0);
    CHECK_EQ_STR(g_cfg.api_key, "");
    CHECK_EQ_STR(g_cfg.cors, "");
    CHECK_EQ_INT(g_cfg.event_history, 0);
    n = rsrv_write_ini(&g_cfg, ini, sizeof ini);
    CHECK(n > 0 && strstr(ini, "event_history = 512\n") != NULL);
    /* bad values name the key and the line */
    {
        static const char *const bad[][2] = {
            {"api_key = two words\n", "api.ini:1: api_key must be 1 to 255 printable bytes"},
            {"\nadmin_key =\n", "api.ini:2: admin_key must be"},
            {"cors = a.example\n", "api.ini:1: cors: 'a.example' is neither * nor a list of origins"},
            {"cors = https://a.example/path\n", "cors: 'https://a.example/path' is neither"},
            {"cors = http://\n", "is neither"},
            {"event_history = 0\n", "event_history must be an integer from 1 to 16384"},
            {"event_history = lots\n", "event_history must be"},
        };
        size_t i;
        for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            rsrv_config_init(&g_cfg);
            CHECK_EQ_INT(rsrv_parse_ini(&g_cfg, bad[i][0], strlen(bad[i][0]), "api.ini", err, sizeof err), -1);
            CHECK(strstr(err, bad[i][1]) != NULL);
            if (!strstr(err, bad[i][1])) printf("  %s -> %s\n", bad[i][0], err);
        }
    }
    /* flags */
    rsrv_config_init(&g_cfg);
    memset(&o, 0, sizeof o);
    REQUIRE(rsrv_parse_args(&g_cfg, &o, 9, argv, err, sizeof err) == 0);
    CHECK_EQ_STR(g_cfg.api_key, "K");
    CHECK_EQ_STR(g_cfg.admin_key, "A");
    CHECK_EQ_STR(g_cfg.cors, "*");
    CHECK_EQ_INT(g_cfg.event_history, 9);
}

/* --check never prints a key; RSD_API_KEY is read when nothing else sets one. */
static void test_api_check_hides_keys(void) {
    char path[256], out[8192];
    const char *argv[] = {SERVE_BIN, "--config", path, "--check", NULL};
    const char *argv2[] = {SERVE_BIN, "--config", path, "--check", "--api-key", "flag-KEY-SECRET", NULL};
    write_ini(path, sizeof path, "check", 1, "api_key = file-KEY-SECRET\nadmin_key = adm-SECRET\n", "[model a]\nmodel = @/a.gguf\n");
    CHECK_EQ_INT(run_prog(argv, out, sizeof out), 0);
    CHECK(strstr(out, "api_key = ***\n") != NULL && strstr(out, "admin_key = ***\n") != NULL);
    CHECK(strstr(out, "SECRET") == NULL);
    CHECK_EQ_INT(run_prog(argv2, out, sizeof out), 0);
    CHECK(strstr(out, "SECRET") == NULL);
    write_ini(path, sizeof path, "check2", 1, "", "[model a]\nmodel = @/a.gguf\n");
    setenv("RSD_API_KEY", "env-KEY", 1);
    CHECK_EQ_INT(run_prog(argv, out, sizeof out), 0);
    CHECK(strstr(out, "api_key = ***\n") != NULL); /* set from the environment */
    setenv("RSD_API_KEY", "bad key", 1);
    CHECK_EQ_INT(run_prog(argv, out, sizeof out), 64);
    CHECK(strstr(out, "RSD_API_KEY must be") != NULL);
    unsetenv("RSD_API_KEY");
    CHECK_EQ_INT(run_prog(argv, out, sizeof out), 0);
    CHECK(strstr(out, "api_key") == NULL);
}

/* ---- auth ----------------------------------------------------------------------------- */
static void test_api_auth(void) {
    static char out[1 << 16];
    serve_proc s;
    char path[256];
    const char *args[] = {"--config", path, NULL};
    const char *chat_a = "{\"model\":\"a\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    write_ini(path, sizeof path, "auth", 2, "api_key = K1\nadmin_key = K2\n",
              "[model a]\nmodel = @/a.gguf\nargs = --api-key CHILD-KEY\n"
              "[model b]\nmodel = @/b.gguf\n");
    REQUIRE(serve_start(&s, args) == 0);
    /* open: /health and the page (it holds no data) */
    CHECK_EQ_INT(raw_req(s.port, "GET", "/health", NULL, NULL, out, sizeof out), 200);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/", NULL, NULL, out, sizeof out), 200);
    /* everything else: 401 as llama-server says it, with WWW-Authenticate */
    CHECK_EQ_INT(raw_req(s.port, "GET", "/v1/models", NULL, NULL, out, sizeof out), 401);
    CHECK(strstr(out, "\r\nWWW-Authenticate: Bearer\r\n") != NULL);
    CHECK(strstr(out, "\r\n\r\n{\"error\":{\"message\":\"Invalid API Key\",\"type\":\"authentication_error\",\"code\":401}}") != NULL);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/v1/models", "Authorization: Bearer K1x\r\n", NULL, out, sizeof out), 401);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/v1/models", "Authorization: Bearer K\r\n", NULL, out, sizeof out), 401);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/v1/models", "Authorization: K1\r\n", NULL, out, sizeof out), 401);
    CHECK_EQ_INT(raw_req(s.port, "POST", "/v1/chat/completions", NULL, chat_a, out, sizeof out), 401);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/metrics", NULL, NULL, out, sizeof out), 401);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/models/sse", NULL, NULL, out, sizeof out), 401);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/v1/models", "Authorization: Bearer K1\r\n", NULL, out, sizeof out), 200);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/v1/models", "X-Api-Key: K1\r\n", NULL, out, sizeof out), 200);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/v1/models", "Authorization: Bearer K2\r\n", NULL, out, sizeof out), 200);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/metrics", "Authorization: Bearer K1\r\n", NULL, out, sizeof out), 200);
    /* management wants the admin key */
    CHECK_EQ_INT(raw_req(s.port, "GET", "/status", "Authorization: Bearer K1\r\n", NULL, out, sizeof out), 401);
    CHECK(strstr(out, "needs the admin key") != NULL && strstr(out, "authentication_error") != NULL);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/_rsd/status", "Authorization: Bearer K1\r\n", NULL, out, sizeof out), 401);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/_rsd/events", "Authorization: Bearer K1\r\n", NULL, out, sizeof out), 401);
    CHECK_EQ_INT(raw_req(s.port, "POST", "/models/load", "Authorization: Bearer K1\r\n", "{\"model\":\"b\"}", out, sizeof out), 401);
    CHECK_EQ_INT(raw_req(s.port, "POST", "/models/unload", "Authorization: Bearer K1\r\n", "{\"model\":\"b\"}", out, sizeof out), 401);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/status", "Authorization: Bearer K2\r\n", NULL, out, sizeof out), 200);
    CHECK_EQ_INT(raw_req(s.port, "POST", "/models/load", "Authorization: Bearer K2\r\n", "{\"model\":\"b\"}", out, sizeof out), 200);
    /* the child started with --api-key CHILD-KEY is sent its own key, not the client's */
    CHECK_EQ_INT(raw_req(s.port, "POST", "/v1/chat/completions", "Authorization: Bearer K1\r\n", chat_a, out, sizeof out), 200);
    CHECK(strstr(out, "simulated") != NULL);
    if (!strstr(out, "simulated")) printf("  chat: %.400s\n", out);
    CHECK_EQ_INT(raw_req(s.port, "POST", "/v1/chat/completions", "X-Api-Key: K1\r\n", chat_a, out, sizeof out), 200);
    CHECK_EQ_INT(serve_stop(&s), 0);
    CHECK(!log_has(&s, "CHILD-KEY"));

    /* only an admin key: the API is open, management is not */
    write_ini(path, sizeof path, "auth2", 1, "admin_key = K2\n", "[model a]\nmodel = @/a.gguf\n");
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/v1/models", NULL, NULL, out, sizeof out), 200);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/status", NULL, NULL, out, sizeof out), 401);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/status", "Authorization: bearer K2\r\n", NULL, out, sizeof out), 200);
    CHECK_EQ_INT(serve_stop(&s), 0);

    /* the key from the environment; no key at all: open */
    write_ini(path, sizeof path, "auth3", 1, "", "[model a]\nmodel = @/a.gguf\n");
    setenv("RSD_API_KEY", "ENV-K", 1);
    REQUIRE(serve_start(&s, args) == 0);
    unsetenv("RSD_API_KEY");
    CHECK_EQ_INT(raw_req(s.port, "GET", "/status", NULL, NULL, out, sizeof out), 401);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/status", "X-Api-Key: ENV-K\r\n", NULL, out, sizeof out), 200);
    CHECK_EQ_INT(serve_stop(&s), 0);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/status", NULL, NULL, out, sizeof out), 200);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/status", "Authorization: Bearer anything\r\n", NULL, out, sizeof out), 200);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* A reload (POST /_rsd/reload) takes new keys and cors at once; the event history
   keeps its size until a restart, and says so. */
static void test_api_reload_keys(void) {
    static char out[1 << 16];
    serve_proc s;
    char path[256];
    const char *args[] = {"--config", path, NULL};
    write_ini(path, sizeof path, "reload", 1, "api_key = OLD-K\n", "[model a]\nmodel = @/a.gguf\n");
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/v1/models", "X-Api-Key: OLD-K\r\n", NULL, out, sizeof out), 200);
    write_ini(path, sizeof path, "reload", 1, "api_key = NEW-K\nadmin_key = ADM-K\ncors = *\nevent_history = 64\n",
              "[model a]\nmodel = @/a.gguf\n");
    CHECK_EQ_INT(raw_req(s.port, "POST", "/_rsd/reload", "X-Api-Key: OLD-K\r\n", "{}", out, sizeof out), 200);
    CHECK(strstr(out, "\"restart_needed\":[\"event_history\"]") != NULL);
    if (!strstr(out, "event_history")) printf("  reload: %.600s\n", out);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/v1/models", "X-Api-Key: OLD-K\r\n", NULL, out, sizeof out), 401);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/v1/models", "X-Api-Key: NEW-K\r\nOrigin: http://x.example\r\n", NULL, out,
                         sizeof out), 200);
    CHECK(strstr(out, "\r\nAccess-Control-Allow-Origin: *\r\n") != NULL);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/status", "X-Api-Key: NEW-K\r\n", NULL, out, sizeof out), 401);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/status", "X-Api-Key: ADM-K\r\n", NULL, out, sizeof out), 200);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* A reload names the changed keys a restart applies (the key table's RSRV_KF_RESTART rows),
   each by its own name and in the table's order, and takes the rest at once. */
static void test_api_reload_restart_keys(void) {
    static char out[1 << 16];
    serve_proc s;
    char path[256];
    const char *args[] = {"--config", path, NULL};
    write_ini(path, sizeof path, "restart", 1, "", "[model a]\nmodel = @/a.gguf\n");
    REQUIRE(serve_start(&s, args) == 0);
    write_ini(path, sizeof path, "restart", 1, "watchdog_failures = 7\nsend_timeout = 5\nmax_wait = 10\n",
              "[model a]\nmodel = @/a.gguf\n");
    CHECK_EQ_INT(raw_req(s.port, "POST", "/_rsd/reload", NULL, "{}", out, sizeof out), 200);
    CHECK(strstr(out, "\"restart_needed\":[\"max_wait\",\"watchdog_failures\"]") != NULL);
    if (!strstr(out, "\"watchdog_failures\"]")) printf("  reload: %.600s\n", out);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* ---- CORS ----------------------------------------------------------------------------- */
static void test_api_cors(void) {
    static char out[1 << 16];
    serve_proc s;
    char path[256];
    const char *args[] = {"--config", path, NULL};
    /* a list: the origin echoed when listed, Vary: Origin on every answer */
    write_ini(path, sizeof path, "cors", 1, "cors = https://app.example, http://localhost:3000\napi_key = K\n",
              "[model a]\nmodel = @/a.gguf\n");
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(raw_req(s.port, "OPTIONS", "/v1/chat/completions",
                         "Origin: http://localhost:3000\r\nAccess-Control-Request-Method: POST\r\n"
                         "Access-Control-Request-Headers: authorization, content-type\r\n", NULL, out, sizeof out), 204);
    CHECK(strstr(out, "\r\nAccess-Control-Allow-Origin: http://localhost:3000\r\n") != NULL);
    CHECK(strstr(out, "\r\nAccess-Control-Allow-Methods: GET, POST, OPTIONS\r\n") != NULL);
    CHECK(strstr(out, "\r\nAccess-Control-Allow-Headers: Authorization, Content-Type") != NULL);
    CHECK(strstr(out, "\r\nVary: Origin\r\n") != NULL);
    CHECK_EQ_INT(raw_req(s.port, "OPTIONS", "/v1/models", "Origin: https://evil.example\r\n", NULL, out, sizeof out), 204);
    CHECK(strstr(out, "Access-Control-Allow-") == NULL);
    /* answers: ours, the 401, and a proxied one */
    CHECK_EQ_INT(raw_req(s.port, "GET", "/v1/models", "Origin: https://app.example\r\nX-Api-Key: K\r\n", NULL, out, sizeof out), 200);
    CHECK(strstr(out, "\r\nAccess-Control-Allow-Origin: https://app.example\r\n") != NULL);
    CHECK(strstr(out, "\r\nVary: Origin\r\n") != NULL);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/v1/models", "Origin: https://app.example\r\n", NULL, out, sizeof out), 401);
    CHECK(strstr(out, "\r\nAccess-Control-Allow-Origin: https://app.example\r\n") != NULL);
    CHECK_EQ_INT(raw_req(s.port, "POST", "/v1/chat/completions", "Origin: https://app.example\r\nX-Api-Key: K\r\n",
                         chat("a", false), out, sizeof out), 200);
    CHECK(strstr(out, "\r\nAccess-Control-Allow-Origin: https://app.example\r\n") != NULL);
    CHECK_EQ_INT(raw_req(s.port, "POST", "/v1/chat/completions", "Origin: https://app.example\r\nX-Api-Key: K\r\n",
                         chat("a", true), out, sizeof out), 200);
    CHECK(strstr(out, "\r\nAccess-Control-Allow-Origin: https://app.example\r\n") != NULL && strstr(out, "[DONE]"));
    CHECK_EQ_INT(raw_req(s.port, "GET", "/v1/models", "Origin: https://other.example\r\nX-Api-Key: K\r\n", NULL, out, sizeof out), 200);
    CHECK(strstr(out, "Access-Control-Allow-Origin") == NULL);
    CHECK_EQ_INT(serve_stop(&s), 0);
    /* "*" */
    write_ini(path, sizeof path, "cors2", 1, "cors = *\n", "[model a]\nmodel = @/a.gguf\n");
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/health", "Origin: https://any.example\r\n", NULL, out, sizeof out), 200);
    CHECK(strstr(out, "\r\nAccess-Control-Allow-Origin: *\r\n") != NULL);
    CHECK(strstr(out, "Vary") == NULL);
    CHECK_EQ_INT(raw_req(s.port, "OPTIONS", "/status", "Origin: https://any.example\r\n", NULL, out, sizeof out), 204);
    CHECK(strstr(out, "\r\nAccess-Control-Allow-Origin: *\r\n") != NULL);
    CHECK_EQ_INT(serve_stop(&s), 0);
    /* off by default */
    write_ini(path, sizeof path, "cors3", 1, "", "[model a]\nmodel = @/a.gguf\n");
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/v1/models", "Origin: https://app.example\r\n", NULL, out, sizeof out), 200);
    CHECK(strstr(out, "Access-Control") == NULL);
    CHECK_EQ_INT(raw_req(s.port, "OPTIONS", "/v1/models", "Origin: https://app.example\r\n", NULL, out, sizeof out), 404);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* ---- events ----------------------------------------------------------------------------- */
/* The id of the last "id: N" line in text (0 = none). */
static long last_id(const char *text) {
    const char *p = text, *q;
    long id = 0;
    while ((q = strstr(p, "\nid: ")) != NULL) {
        id = strtol(q + 5, NULL, 10);
        p = q + 1;
    }
    return id;
}

static void test_api_events(void) {
    static sse_buf ev, ev2, rt;
    static char out[1 << 16];
    serve_proc s;
    char path[256], hdr[128];
    const char *args[] = {"--config", path, NULL};
    const char *p;
    long prev = 0, id;
    int i;
    write_ini(path, sizeof path, "events", 1, "event_history = 12\n",
              "[model a]\nmodel = @/a.gguf\n[model b]\nmodel = @/b.gguf\n[model c]\nmodel = @/c.gguf,fail=1\n");
    REQUIRE(serve_start(&s, args) == 0);
    memset(&ev, 0, sizeof ev);
    memset(&rt, 0, sizeof rt);
    ev.fd = sse_open(s.port, "/_rsd/events", NULL);
    rt.fd = sse_open(s.port, "/models/sse", NULL);
    REQUIRE(ev.fd >= 0 && rt.fd >= 0);
    REQUIRE(sse_wait(&ev, ": rsd-serve events\n\n"));
    CHECK(strstr(ev.b, "Content-Type: text/event-stream\r\n") != NULL);
    /* a, then b: a is evicted for b, and the event says so and what else there was */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    CHECK(sse_wait(&ev, "event: ready\ndata: {\"id\":"));
    /* a's "loaded" carries what a says of itself (its GET /v1/models, asked after the
       first answer): b evicts a only after it, or a stops before it answers */
    CHECK(sse_wait(&rt, "data: {\"model\":\"a\",\"event\":\"status_change\",\"data\":{\"status\":\"loaded\""));
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("b", false)), 200);
    CHECK(sse_wait(&ev, "\"event\":\"grant\",\"model\":\"b\""));
    CHECK(strstr(ev.b, "event: queued\ndata: {\"id\":1,") != NULL);
    CHECK(strstr(ev.b, "\"event\":\"start\",\"model\":\"a\",\"pid\":") != NULL);
    CHECK(strstr(ev.b, "\"event\":\"ready\",\"model\":\"a\"") && strstr(ev.b, "\"time_to_ready_ms\":"));
    p = strstr(ev.b, "event: evict\n");
    CHECK(p != NULL);
    CHECK(p && strstr(p, "\"model\":\"a\"") && strstr(p, "\"reason\":\"least recently used idle model") &&
          strstr(p, "\"for\":[\"b\"]") && strstr(p, "\"considered\":["));
    CHECK(sse_wait(&ev, "\"event\":\"exit\",\"model\":\"a\""));
    /* ids count up by one */
    for (p = ev.b; (p = strstr(p, "\nid: ")) != NULL; p++) {
        id = strtol(p + 5, NULL, 10);
        CHECK_EQ_INT(id, prev + 1);
        prev = id;
    }
    CHECK(prev >= 8);
    /* a failed start: its reason */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("c", false)), 503);
    CHECK(sse_wait(&ev, "event: failed_start\n"));
    CHECK(sse_wait(&ev, "exiting due to model loading error"));
    /* the router stream: the router's format, no ids, no event: lines */
    CHECK(sse_wait(&rt, "data: {\"model\":\"b\",\"event\":\"status_change\",\"data\":{\"status\":\"loaded\",\"info\":{\"id\":\"b\""));
    CHECK(strstr(rt.b, "data: {\"model\":\"a\",\"event\":\"model_status\",\"data\":{\"status\":\"loading\"}}\n\n") != NULL);
    CHECK(strstr(rt.b, "data: {\"model\":\"a\",\"event\":\"status_change\",\"data\":{\"status\":\"unloaded\",\"exit_code\":0}}\n\n") != NULL);
    CHECK(sse_wait(&rt, "data: {\"model\":\"c\",\"event\":\"status_change\",\"data\":{\"status\":\"unloaded\",\"exit_code\":1}}"));
    CHECK(strstr(rt.b, "\nid: ") == NULL && strstr(rt.b, "\nevent: ") == NULL);
    /* as the router: loading progress 0.0 at the start and 1.0 at ready, then "loaded"
       with the info the child gives (its aliases, tags, created, meta) */
    {
        const char *p0 = strstr(rt.b, "data: {\"model\":\"a\",\"event\":\"status_change\",\"data\":{\"status\":\"loading\","
                                      "\"progress\":{\"stages\":[\"text_model\"],\"current\":\"text_model\",\"value\":0.0}}}\n\n");
        const char *p1 = strstr(rt.b, "data: {\"model\":\"a\",\"event\":\"status_change\",\"data\":{\"status\":\"loading\","
                                      "\"progress\":{\"stages\":[\"text_model\"],\"current\":\"text_model\",\"value\":1.0}}}\n\n");
        const char *pl = strstr(rt.b, "data: {\"model\":\"a\",\"event\":\"status_change\",\"data\":{\"status\":\"loaded\","
                                      "\"info\":{\"id\":\"a\",\"aliases\":[\"a\"],\"tags\":[],\"object\":\"model\",\"created\":");
        const char *pu = strstr(rt.b, "data: {\"model\":\"a\",\"event\":\"status_change\",\"data\":{\"status\":\"unloaded\"");
        CHECK(p0 && p1 && pl && pu && p0 < p1 && p1 < pl && pl < pu);
        CHECK(pl && strstr(pl, "\"owned_by\":\"llamacpp\",\"meta\":{\"vocab_type\":") &&
              strstr(pl, "\"n_ctx\":") && strstr(pl, "\"n_ctx_train\":") && strstr(pl, "\"ftype\":"));
    }
    /* replay: ?since=N gives what came after N, Last-Event-ID too */
    id = last_id(ev.b);
    memset(&ev2, 0, sizeof ev2);
    ev2.fd = sse_open(s.port, "/_rsd/events?since=9", NULL);
    snprintf(hdr, sizeof hdr, "\nid: %ld\n", id);
    CHECK(sse_wait(&ev2, hdr));
    CHECK(strstr(ev2.b, "\nid: 10\n") != NULL && strstr(ev2.b, "\nid: 9\n") == NULL);
    CHECK(strstr(ev2.b, "event: skipped") == NULL);
    close(ev2.fd);
    memset(&ev2, 0, sizeof ev2);
    ev2.fd = sse_open(s.port, "/_rsd/events", "Last-Event-ID: 11\r\n");
    CHECK(sse_wait(&ev2, hdr));
    CHECK(strstr(ev2.b, "\nid: 12\n") != NULL && strstr(ev2.b, "\nid: 11\n") == NULL);
    close(ev2.fd);
    /* the history is bounded (12 here): since=0 first says how many are gone */
    for (i = 0; i < 3; i++) CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat(i % 2 ? "a" : "b", false)), 200);
    memset(&ev2, 0, sizeof ev2);
    ev2.fd = sse_open(s.port, "/_rsd/events?since=0", NULL);
    CHECK(sse_wait(&ev2, "event: skipped\ndata: {\"skipped\":"));
    p = strstr(ev2.b, "{\"skipped\":");
    if (p) {
        long skipped = strtol(p + 11, NULL, 10), next = -1;
        const char *q = strstr(p, "\"next\":");
        if (q) next = strtol(q + 7, NULL, 10);
        CHECK(skipped > 0);
        CHECK_EQ_INT(next, skipped + 1);
        snprintf(hdr, sizeof hdr, "\nid: %ld\n", next); /* the oldest kept comes first */
        CHECK(sse_wait(&ev2, hdr));
        q = strstr(ev2.b, "\nid: ");
        CHECK(q && strtol(q + 5, NULL, 10) == next);
        snprintf(hdr, sizeof hdr, "\nid: %ld\n", next + 11); /* 12 kept */
        CHECK(sse_wait(&ev2, hdr));
    }
    close(ev2.fd);
    /* a subscriber that reads nothing holds nothing up: the others still get theirs */
    memset(&ev2, 0, sizeof ev2);
    ev2.fd = sse_open(s.port, "/_rsd/events?since=0", NULL);
    CHECK_EQ_INT(http(&s, "POST", "/models/unload", "{\"model\":\"b\"}"), 200);
    CHECK(sse_wait(&ev, "\"event\":\"unload\",\"model\":\"b\""));
    CHECK(sse_wait(&ev, "\"event\":\"stop\",\"model\":\"b\",\"pid\":"));
    CHECK(sse_wait(&rt, "data: {\"model\":\"b\",\"event\":\"status_change\",\"data\":{\"status\":\"unloaded\",\"exit_code\":0}}"));
    CHECK_EQ_INT(raw_req(s.port, "GET", "/health", NULL, NULL, out, sizeof out), 200);
    /* too many streams: 503, not a hang */
    {
        int fds[20], k, n = 0, open_ = 0, refused = 0;
        char b[512];
        for (k = 0; k < 16; k++) {
            fds[n] = sse_open(s.port, "/_rsd/events", NULL);
            if (fds[n] < 0) continue;
            memset(b, 0, sizeof b);
            if (raw_read(fds[n], b, sizeof b - 1) > 0) { /* answered: a stream or a 503 */
                if (!strncmp(b, "HTTP/1.1 200", 12)) open_++;
                else if (!strncmp(b, "HTTP/1.1 503", 12)) refused++;
            }
            n++;
        }
        CHECK_EQ_INT(open_, 13); /* 16 at most: 3 were open already */
        CHECK_EQ_INT(refused, 3);
        CHECK_EQ_INT(raw_req(s.port, "GET", "/_rsd/events", NULL, NULL, out, sizeof out), 503);
        CHECK(strstr(out, "too many event streams open") != NULL);
        for (k = 0; k < n; k++) close(fds[k]);
        /* closed ones make room again */
        memset(&ev2, 0, sizeof ev2);
        for (k = 0; k < 500; k++) {
            ev2.fd = sse_open(s.port, "/_rsd/events?since=0", NULL);
            memset(b, 0, sizeof b);
            if (raw_read(ev2.fd, b, sizeof b - 1) > 0 && !strncmp(b, "HTTP/1.1 200", 12)) break;
            close(ev2.fd);
            ev2.fd = -1;
            (void)poll(NULL, 0, 10);
        }
        CHECK(ev2.fd >= 0);
    }
    close(ev2.fd);
    close(ev.fd);
    close(rt.fd);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* An eviction names what it made room for and why every other resident model stayed:
   a is busy (a 3 s answer), b idle, so c's start evicts b, and says a was busy. */
static void test_api_evict_explains(void) {
    static sse_buf ev;
    serve_proc s;
    char path[256], buf[256];
    const char *args[] = {"--config", path, NULL};
    const char *p;
    int fd;
    write_ini(path, sizeof path, "explain", 2, "",
              "[model a]\nmodel = @/a.gguf\nargs = --gen-ms 3000\n[model b]\nmodel = @/b.gguf\n"
              "[model c]\nmodel = @/c.gguf\npinned = false\n");
    REQUIRE(serve_start(&s, args) == 0);
    memset(&ev, 0, sizeof ev);
    ev.fd = sse_open(s.port, "/_rsd/events", NULL);
    REQUIRE(ev.fd >= 0 && sse_wait(&ev, ": rsd-serve events"));
    fd = raw_connect(s.port);
    REQUIRE(fd >= 0 && raw_post(fd, "/v1/chat/completions", chat("a", false)) == 0);
    CHECK(sse_wait(&ev, "\"event\":\"grant\",\"model\":\"a\""));
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("b", false)), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("c", false)), 200);
    CHECK(sse_wait(&ev, "event: evict\n"));
    CHECK(sse_wait(&ev, "\"event\":\"ready\",\"model\":\"c\""));
    p = strstr(ev.b, "event: evict\n");
    CHECK(p && strstr(p, "\"model\":\"b\"") && strstr(p, "\"for\":[\"c\"]"));
    CHECK(p && strstr(p, "\"considered\":[{\"model\":\"a\",\"state\":\"ready\",\"in_flight\":1,\"pinned\":false,"
                         "\"idle_ms\":null,\"kept_because\":\"busy\"}"));
    if (p && !strstr(p, "\"kept_because\":\"busy\"")) printf("  %.600s\n", p);
    CHECK(raw_read(fd, buf, sizeof buf) > 0 && !strncmp(buf, "HTTP/1.1 200", 12)); /* a's answer comes */
    close(fd);
    close(ev.fd);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* rsd-ensure against rsd-serve waits on /models/sse: fewer requests than polling. */
static void test_api_ensure_waits_on_events(void) {
    serve_proc s;
    char path[256], out[8192], url[96];
    const char *args[] = {"--config", path, NULL};
    const char *saved = g_sim_args;
    int requests = -1;
    const char *p;
    g_sim_args = "--runtime server --load-ms 1500";
    write_ini(path, sizeof path, "ensure", 1, "", "[model a]\nmodel = @/a.gguf\n");
    g_sim_args = saved;
    REQUIRE(serve_start(&s, args) == 0);
    snprintf(url, sizeof url, "%s", s.url);
    {
        const char *argv[] = {ENSURE_BIN, "--url", url, "--model", "a", "--no-state", "--json", NULL};
        CHECK_EQ_INT(run_prog(argv, out, sizeof out), 0);
    }
    p = strstr(out, "\"requests\":");
    if (p) requests = atoi(p + 11);
    printf("  rsd-ensure: one 1.5 s load through rsd-serve took %d requests\n", requests);
    CHECK(strstr(out, "\"outcome\":\"resident\"") != NULL);
    /* polling alone takes 11 or more here (20 ms doubling to 500 ms); the stream, the
       listing before, the load and a few confirmations under sse_poll_ms 500 */
    CHECK(requests > 0 && requests <= 9);
    CHECK_EQ_INT(serve_stop(&s), 0);
    /* with a key: --token opens the listing, the stream and the load alike */
    g_sim_args = "--runtime server --load-ms 1500";
    write_ini(path, sizeof path, "ensure-key", 1, "api_key = ENS-K\n", "[model a]\nmodel = @/a.gguf\n");
    g_sim_args = saved;
    REQUIRE(serve_start(&s, args) == 0);
    snprintf(url, sizeof url, "%s", s.url);
    {
        const char *argv[] = {ENSURE_BIN, "--url", url, "--model", "a", "--no-state", "--json", "--token", "ENS-K", NULL};
        const char *nokey[] = {ENSURE_BIN, "--url", url, "--model", "a", "--no-state", "--json", NULL};
        CHECK(run_prog(nokey, out, sizeof out) != 0);
        CHECK(strstr(out, "401") != NULL);
        CHECK_EQ_INT(run_prog(argv, out, sizeof out), 0);
    }
    CHECK(strstr(out, "\"outcome\":\"resident\"") != NULL);
    p = strstr(out, "\"requests\":");
    requests = p ? atoi(p + 11) : -1;
    CHECK(requests > 0 && requests <= 9);
    if (requests > 9 || !strstr(out, "\"outcome\":\"resident\"")) printf("  rsd-ensure --token: %.600s\n", out);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* ---- metrics ------------------------------------------------------------------------------ */
/* Checks text is the Prometheus text format: every sample's family has # HELP and # TYPE
   before it, names and labels are well formed, values are numbers. The number of
   samples, or -1. */
static int prom_check(const char *text) {
    char fam[64][64];
    int nfam = 0, samples = 0;
    const char *line = text;
    while (*line) {
        const char *e = strchr(line, '\n');
        size_t n = e ? (size_t)(e - line) : strlen(line);
        char l[1024];
        if (!e || n >= sizeof l) { printf("  line without newline or too long\n"); return -1; }
        memcpy(l, line, n);
        l[n] = 0;
        line = e + 1;
        if (!strncmp(l, "# HELP ", 7)) continue;
        if (!strncmp(l, "# TYPE ", 7)) {
            char name[64], type[32];
            if (sscanf(l + 7, "%63s %31s", name, type) != 2 ||
                (strcmp(type, "gauge") && strcmp(type, "counter"))) { printf("  bad TYPE: %s\n", l); return -1; }
            if (nfam < 64) snprintf(fam[nfam++], 64, "%s", name);
            continue;
        }
        {
            size_t k = 0;
            int f;
            bool known = false;
            char *sp;
            double v;
            while (l[k] && (l[k] == '_' || l[k] == ':' || (l[k] >= 'a' && l[k] <= 'z') || (l[k] >= 'A' && l[k] <= 'Z') ||
                            (k && l[k] >= '0' && l[k] <= '9')))
                k++;
            if (!k) { printf("  bad sample: %s\n", l); return -1; }
            for (f = 0; f < nfam; f++)
                if (strlen(fam[f]) == k && !memcmp(fam[f], l, k)) known = true;
            if (!known) { printf("  no TYPE before: %s\n", l); return -1; }
            if (l[k] == '{') { /* name="value" pairs, values escaped */
                k++;
                for (;;) {
                    while ((l[k] >= 'a' && l[k] <= 'z') || l[k] == '_') k++;
                    if (l[k] != '=' || l[k + 1] != '"') { printf("  bad label: %s\n", l); return -1; }
                    k += 2;
                    while (l[k] && l[k] != '"') {
                        if (l[k] == '\\') {
                            if (l[k + 1] != '\\' && l[k + 1] != '"' && l[k + 1] != 'n') return -1;
                            k++;
                        }
                        k++;
                    }
                    if (l[k] != '"') return -1;
                    k++;
                    if (l[k] == ',') { k++; continue; }
                    if (l[k] == '}') { k++; break; }
                    printf("  bad labels: %s\n", l);
                    return -1;
                }
            }
            if (l[k] != ' ') { printf("  no value: %s\n", l); return -1; }
            v = strtod(l + k + 1, &sp);
            (void)v;
            if (sp == l + k + 1 || *sp) { printf("  bad value: %s\n", l); return -1; }
            samples++;
        }
    }
    return samples;
}

/* The value of the sample line starting with "name{labels} " (-1 when absent). */
static double prom_value(const char *text, const char *series) {
    char needle[256];
    const char *p;
    snprintf(needle, sizeof needle, "\n%s ", series);
    p = strstr(text, needle);
    return p ? strtod(p + strlen(needle), NULL) : -1;
}

static void test_api_metrics(void) {
    static char text[1 << 16];
    serve_proc s;
    char path[256], series[160];
    const char *args[] = {"--config", path, NULL};
    int64_t pid;
    write_ini(path, sizeof path, "metrics", 1, "",
              "[model a]\nmodel = @/a.gguf\n[model b]\nmodel = @/b.gguf\n[model c]\nmodel = @/c.gguf,fail=1\n");
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "GET", "/metrics", NULL), 200);
    CHECK(prom_check(g_body) > 0);
    CHECK_EQ_INT((int)prom_value(g_body, "rsd_serve_model_state{model=\"a\",state=\"unloaded\"}"), 1);
    CHECK_EQ_INT((int)prom_value(g_body, "rsd_serve_requests_total{model=\"a\"}"), 0);
    CHECK(strstr(g_body, "rsd_serve_process_resident_bytes{") == NULL);
    CHECK(strstr(g_body, "rsd_serve_time_to_ready_seconds{") == NULL);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("b", false)), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("c", false)), 503);
    CHECK(wait_field(&s, "b", "in_flight", 0));
    pid = status_field(&s, "b", "pid");
    CHECK_EQ_INT(http(&s, "GET", "/metrics", NULL), 200);
    memcpy(text, g_body, sizeof text);
    CHECK(prom_check(text) > 20);
    CHECK_EQ_INT((int)prom_value(text, "rsd_serve_requests_total{model=\"a\"}"), 2);
    CHECK_EQ_INT((int)prom_value(text, "rsd_serve_requests_total{model=\"b\"}"), 1);
    CHECK_EQ_INT((int)prom_value(text, "rsd_serve_starts_total{model=\"a\"}"), 1);
    CHECK_EQ_INT((int)prom_value(text, "rsd_serve_readies_total{model=\"a\"}"), 1);
    CHECK(prom_value(text, "rsd_serve_evictions_total{model=\"a\"}") >= 1); /* for b, then perhaps for c */
    CHECK_EQ_INT((int)prom_value(text, "rsd_serve_failed_starts_total{model=\"c\"}"), 1);
    CHECK_EQ_INT((int)prom_value(text, "rsd_serve_model_state{model=\"c\",state=\"failed\"}"), 1);
    CHECK_EQ_INT((int)prom_value(text, "rsd_serve_model_state{model=\"c\",state=\"unloaded\"}"), 0);
    CHECK_EQ_INT((int)prom_value(text, "rsd_serve_crashes_total{model=\"b\"}"), 0);
    CHECK(prom_value(text, "rsd_serve_time_to_ready_seconds{model=\"a\"}") >= 0);
    CHECK(prom_value(text, "rsd_serve_last_use_timestamp_seconds{model=\"a\"}") > 1.7e9);
    CHECK_EQ_INT((int)prom_value(text, "rsd_serve_in_flight{model=\"b\"}"), 0);
    CHECK_EQ_INT((int)prom_value(text, "rsd_serve_queued{model=\"b\"}"), 0);
    CHECK_EQ_INT((int)prom_value(text, "rsd_serve_pool_max_models"), 1);
    CHECK(prom_value(text, "rsd_serve_pool_spawns_total") >= 3);
    CHECK(prom_value(text, "rsd_serve_pool_evictions_total") >= 1);
    CHECK(strstr(text, "# TYPE rsd_serve_requests_total counter\n") != NULL);
    CHECK(strstr(text, "# HELP rsd_serve_in_flight ") != NULL);
#if defined(__linux__)
    if (pid > 0) { /* b may have been evicted to retry c's start: then it has no process */
        snprintf(series, sizeof series, "rsd_serve_process_resident_bytes{model=\"b\",pid=\"%lld\"}", (long long)pid);
        if (status_field(&s, "b", "pid") == pid) CHECK(prom_value(text, series) > 4096);
    }
#else
    (void)series;
    (void)pid;
#endif
    /* a crash is counted */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    pid = status_field(&s, "a", "pid");
    REQUIRE(pid > 0);
    kill((pid_t)pid, SIGKILL);
    CHECK(wait_field(&s, "a", "pid", 0));
    CHECK_EQ_INT(http(&s, "GET", "/metrics", NULL), 200);
    CHECK_EQ_INT((int)prom_value(g_body, "rsd_serve_crashes_total{model=\"a\"}"), 1);
    CHECK(prom_check(g_body) > 0);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* ---- the status page ---------------------------------------------------------------------- */
/* Runs argv with stdout to out (stderr to /dev/null); exit status. */
static int run_stdout(const char *const *argv, char *out, size_t cap) {
    return run_prog_out(argv, out, cap, 1);
}

/* The text of <td class="cls"> in the page's row of model id ("" when none). */
static void row_cell(const char *dom, const char *id, const char *cls, char *out, size_t cap) {
    char needle[192];
    const char *row, *end, *c, *e;
    out[0] = 0;
    snprintf(needle, sizeof needle, "<tr data-model=\"%s\"", id);
    row = strstr(dom, needle);
    if (!row) return;
    end = strstr(row, "</tr>");
    snprintf(needle, sizeof needle, "<td class=\"%s\"", cls);
    c = strstr(row, needle);
    if (!c || (end && c > end)) return;
    c = strchr(c, '>');
    if (!c) return;
    c++;
    e = strstr(c, "</td>");
    if (!e || (size_t)(e - c) >= cap) return;
    memcpy(out, c, (size_t)(e - c));
    out[e - c] = 0;
}

static void test_api_page(void) {
    static char page[1 << 16], dom[1 << 18];
    serve_proc s;
    char path[256], shot[300], profile[300], url[128], shot_arg[340], prof_arg[340], cell[64], st[32];
    const char *args[] = {"--config", path, NULL};
    const char *chromium = "/usr/bin/chromium";
    const char *ids[] = {"a", "b", "c"};
    int i;
    write_ini(path, sizeof path, "page", 2, "",
              "[model a]\nmodel = @/a.gguf\nttl = 300\n[model b]\nmodel = @/b.gguf\n[model c]\nmodel = @/c.gguf\n");
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/", NULL, NULL, page, sizeof page), 200);
    CHECK(strstr(page, "\r\nContent-Type: text/html; charset=utf-8\r\n") != NULL);
    CHECK(strstr(page, "<table id=\"models\">") && strstr(page, "/_rsd/events?since=") && strstr(page, "\"/models/\" + what"));
    /* self-contained: nothing fetched from elsewhere */
    CHECK(strstr(page, "src=") == NULL && strstr(page, "href=") == NULL && strstr(page, "@import") == NULL);
    CHECK(strstr(page, "http://") == NULL && strstr(page, "https://") == NULL);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("b", false)), 200);
    if (access(chromium, X_OK) != 0) {
        printf("  status page in a browser: skipped (no %s; apt-get install chromium)\n", chromium);
        CHECK_EQ_INT(serve_stop(&s), 0);
        return;
    }
    snprintf(profile, sizeof profile, "%s/chromium-profile", g_dir);
    snprintf(prof_arg, sizeof prof_arg, "--user-data-dir=%s", profile);
    snprintf(url, sizeof url, "%s/", s.url);
    {
        const char *argv[] = {chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                              prof_arg, "--virtual-time-budget=5000", "--dump-dom", url, NULL};
        CHECK_EQ_INT(run_stdout(argv, dom, sizeof dom), 0);
    }
    CHECK(strstr(dom, "data-rendered=\"3\"") != NULL);
    if (!strstr(dom, "data-rendered=\"3\"")) printf("  dom: %.1500s\n", dom);
    /* the table agrees with /status */
    for (i = 0; i < 3; i++) {
        int64_t pid = status_field(&s, ids[i], "pid"), port = status_field(&s, ids[i], "port");
        status_state(&s, ids[i], st, sizeof st);
        row_cell(dom, ids[i], "state", cell, sizeof cell);
        CHECK_EQ_STR(cell, st);
        row_cell(dom, ids[i], "pid", cell, sizeof cell);
        if (pid > 0) CHECK_EQ_INT(atoll(cell), pid);
        else CHECK_EQ_STR(cell, "");
        row_cell(dom, ids[i], "port", cell, sizeof cell);
        if (port > 0) CHECK_EQ_INT(atoll(cell), port);
        row_cell(dom, ids[i], "in_flight", cell, sizeof cell);
        CHECK_EQ_STR(cell, "0");
        row_cell(dom, ids[i], "waiting", cell, sizeof cell);
        CHECK_EQ_STR(cell, "0");
    }
    row_cell(dom, "a", "ttl", cell, sizeof cell);
    CHECK_EQ_STR(cell, "300 s");
    row_cell(dom, "c", "last_use", cell, sizeof cell);
    CHECK_EQ_STR(cell, "never");
    /* the live event stream is on the page */
    CHECK(strstr(dom, "class=\"ev ev-ready\"") != NULL && strstr(dom, "class=\"ev ev-start\"") != NULL);
    snprintf(shot, sizeof shot, "%s/status-page.png", g_dir);
    snprintf(shot_arg, sizeof shot_arg, "--screenshot=%s", shot);
    {
        const char *argv[] = {chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", prof_arg,
                              "--virtual-time-budget=5000", "--window-size=1100,700", shot_arg, url, NULL};
        struct stat sb;
        CHECK_EQ_INT(run_stdout(argv, dom, sizeof dom), 0);
        CHECK(stat(shot, &sb) == 0 && sb.st_size > 1000);
        printf("  status page screenshot: %s\n", shot);
    }
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* The page with a key: a browser that has none is told so; given the key (the URL's
   #key=K fragment, as the page's key field, goes to sessionStorage) the table fills. */
static void test_api_page_key(void) {
    static char dom[1 << 18];
    serve_proc s;
    char path[256], prof_arg[340], url[128];
    const char *args[] = {"--config", path, NULL};
    const char *chromium = "/usr/bin/chromium";
    write_ini(path, sizeof path, "pagekey", 1, "admin_key = ADMIN\n", "[model a]\nmodel = @/a.gguf\n");
    REQUIRE(serve_start(&s, args) == 0);
    if (access(chromium, X_OK) != 0) {
        printf("  status page with a key: skipped (no %s)\n", chromium);
        CHECK_EQ_INT(serve_stop(&s), 0);
        return;
    }
    snprintf(prof_arg, sizeof prof_arg, "--user-data-dir=%s/chromium-profile2", g_dir);
    snprintf(url, sizeof url, "%s/", s.url);
    {
        const char *argv[] = {chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                              prof_arg, "--virtual-time-budget=3000", "--dump-dom", url, NULL};
        CHECK_EQ_INT(run_stdout(argv, dom, sizeof dom), 0);
    }
    CHECK(strstr(dom, "<span id=\"msg\">this server needs a key") != NULL);
    CHECK(strstr(dom, "data-rendered") == NULL);
    snprintf(url, sizeof url, "%s/#key=ADMIN", s.url);
    {
        const char *argv[] = {chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                              prof_arg, "--virtual-time-budget=3000", "--dump-dom", url, NULL};
        CHECK_EQ_INT(run_stdout(argv, dom, sizeof dom), 0);
    }
    CHECK(strstr(dom, "data-rendered=\"1\"") != NULL);
    CHECK(strstr(dom, "<span id=\"msg\"></span>") != NULL);
    CHECK(strstr(dom, "class=\"ev ev-") == NULL); /* no events yet, but the stream is open */
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* A REAL llama-server child started with --api-key: rsd-serve sends it its key (the
   client sends rsd-serve's own); the real server's 401 is what rsd-serve's looks like. */
static void test_api_real_child_key(void) {
    static char out[1 << 16];
    char bin[1024], why[512], dir[600], cache[700], path[256], models[1200];
    serve_proc s;
    real_server rs;
    const char *vargs[] = {"--config", path, "--verbose", NULL};
    const char *rargs[] = {"-m", models, "-c", "256", "-t", "1", "--api-key", "REAL-KEY", NULL};
    const char *body = "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2}";
    const char *p401;
    if (real_find(bin, sizeof bin, why, sizeof why) != 0) {
        printf("  real llama-server child with --api-key: skipped: %s\n", why);
        return;
    }
    REQUIRE(real_models(dir, sizeof dir) == 0);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    setenv("LLAMA_CACHE", cache, 1);
    snprintf(models, sizeof models, "%s/tiny-a.gguf", dir);
    /* the real server's own 401, for the shape */
    REQUIRE(real_start(&rs, bin, dir, rargs, 60000) == 0);
    CHECK_EQ_INT(raw_req(rs.port, "GET", "/props", "Authorization: Bearer wrong\r\n", NULL, out, sizeof out), 401);
    p401 = strstr(out, "\r\n\r\n");
    CHECK(p401 && !strcmp(p401 + 4, "{\"error\":{\"message\":\"Invalid API Key\",\"type\":\"authentication_error\",\"code\":401}}"));
    CHECK_EQ_INT(real_stop(&rs), 0);
    make_dir();
    snprintf(path, sizeof path, "%s/real-key.ini", g_dir);
    {
        static char text[4096];
        snprintf(text, sizeof text,
                 "listen = 127.0.0.1:0\nmax_models = 1\nllama_server = %s\nstart_timeout = 60\nstop_grace = 5\n"
                 "api_key = OUTER\n[model tiny]\nmodel = %s\nctx = 256\nargs = -t 1 -np 2 --api-key REAL-KEY\n", bin, models);
        REQUIRE(write_file(path, text) == 0);
    }
    REQUIRE(serve_start(&s, vargs) == 0);
    CHECK_EQ_INT(raw_req(s.port, "POST", "/v1/chat/completions", "Authorization: Bearer wrong\r\n", body, out, sizeof out), 401);
    p401 = strstr(out, "\r\n\r\n");
    CHECK(p401 && !strcmp(p401 + 4, "{\"error\":{\"message\":\"Invalid API Key\",\"type\":\"authentication_error\",\"code\":401}}"));
    CHECK_EQ_INT(raw_req(s.port, "POST", "/v1/chat/completions", "Authorization: Bearer OUTER\r\n", body, out, sizeof out), 200);
    CHECK(strstr(out, "\"choices\"") != NULL);
    if (!strstr(out, "\"choices\"")) printf("  real child answer: %.500s\n", out);
    CHECK_EQ_INT(raw_req(s.port, "GET", "/props?model=tiny", "Authorization: Bearer OUTER\r\n", NULL, out, sizeof out), 200);
    CHECK_EQ_INT(serve_stop(&s), 0);
    CHECK(!log_has(&s, "REAL-KEY"));
    CHECK(log_has(&s, "ms (2 slots)")); /* its /props, asked with its key, told its -np */
    rmtree(dir);
}

/* ---- chromium over the DevTools protocol (--remote-debugging-pipe: fd 3 in, fd 4 out,
   one NUL-terminated JSON message each way) ---------------------------------------------- */
typedef struct cdp {
    pid_t pid;
    int to, from; /* our ends */
    int seq;
    char session[128];
    char msg[1 << 18];
} cdp;

static int cdp_start(cdp *c, const char *chromium, const char *profile_arg) {
    int in[2], out[2];
    memset(c, 0, offsetof(cdp, msg));
    if (pipe(in) != 0 || pipe(out) != 0) return -1;
    c->pid = fork();
    if (c->pid < 0) return -1;
    if (c->pid == 0) {
        int nul = open("/dev/null", O_WRONLY);
        const char *argv[] = {chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                              profile_arg, "--remote-debugging-pipe", "about:blank", NULL};
        (void)setpgid(0, 0); /* its helper processes too: cdp_stop ends the group */
        /* the child reads fd 3 and writes fd 4 */
        int r = dup(in[0]), w = dup(out[1]);
        if (r < 0 || w < 0) _exit(127);
        if (dup2(r, 3) < 0 || dup2(w, 4) < 0) _exit(127);
        if (nul >= 0) { dup2(nul, 1); dup2(nul, 2); }
        execv(argv[0], (char *const *)(void *)argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    c->to = in[1];
    c->from = out[0];
    return 0;
}

/* Sends {"id":N,[sessionId,]"method":M,"params":P} and reads until the answer with that
   id (bounded: 30 s of silence); the answer in c->msg. */
static bool cdp_call(cdp *c, const char *method, const char *params) {
    char req[8192];
    int n, id = ++c->seq;
    size_t got = 0;
    char want[32];
    if (c->session[0])
        n = snprintf(req, sizeof req, "{\"id\":%d,\"sessionId\":\"%s\",\"method\":\"%s\",\"params\":%s}", id, c->session,
                     method, params);
    else
        n = snprintf(req, sizeof req, "{\"id\":%d,\"method\":\"%s\",\"params\":%s}", id, method, params);
    if (getenv("CDP_DEBUG")) fprintf(stderr, "cdp> %s\n", req);
    if (n <= 0 || (size_t)n >= sizeof req || write(c->to, req, (size_t)n + 1) != n + 1) return false;
    snprintf(want, sizeof want, "{\"id\":%d,", id);
    for (;;) {
        char *z;
        struct pollfd pf;
        ssize_t r;
        while ((z = (char *)memchr(c->msg, 0, got)) != NULL) { /* whole messages */
            size_t len = (size_t)(z - c->msg) + 1;
            if (!strncmp(c->msg, want, strlen(want))) {
                if (getenv("CDP_DEBUG")) fprintf(stderr, "cdp< %.400s\n", c->msg);
                return true;
            }
            memmove(c->msg, c->msg + len, got - len);
            got -= len;
        }
        if (got + 1 >= sizeof c->msg) return false;
        pf.fd = c->from;
        pf.events = POLLIN;
        pf.revents = 0;
        if (poll(&pf, 1, 30000) <= 0) return false;
        r = read(c->from, c->msg + got, sizeof c->msg - got - 1);
        if (r <= 0) return false;
        got += (size_t)r;
    }
}

/* Evaluates expr in the page (a promise is awaited); its value as JSON text is in the
   answer ("result":{"type":..,"value":..}). */
static bool cdp_eval(cdp *c, const char *expr) {
    char params[4096], esc[3000];
    size_t o = 0;
    const char *p;
    for (p = expr; *p && o + 2 < sizeof esc; p++) {
        if (*p == '"' || *p == '\\') esc[o++] = '\\';
        esc[o++] = *p;
    }
    esc[o] = 0;
    snprintf(params, sizeof params, "{\"expression\":\"%s\",\"awaitPromise\":true,\"returnByValue\":true}", esc);
    return cdp_call(c, "Runtime.evaluate", params);
}

static void cdp_stop(cdp *c) {
    int st;
    c->session[0] = 0;
    (void)cdp_call(c, "Browser.close", "{}");
    close(c->to);
    close(c->from);
    kill(c->pid, SIGTERM);
    while (waitpid(c->pid, &st, 0) < 0 && errno == EINTR) {}
    (void)kill(-c->pid, SIGKILL); /* a helper still writing into the profile */
}

/* The page's load and unload buttons, clicked in a real browser: they send the admin
   key (given as /#key=K), and the model starts and stops. */
static void test_api_page_buttons(void) {
    static cdp c;
    serve_proc s;
    char path[256], prof_arg[340], params[512], st[32];
    const char *args[] = {"--config", path, NULL};
    const char *chromium = "/usr/bin/chromium";
    const char *p, *q;
    int i;
    write_ini(path, sizeof path, "buttons", 1, "admin_key = BTN-ADMIN\n",
              "[model a]\nmodel = @/a.gguf\n[model b]\nmodel = @/b.gguf\n");
    REQUIRE(serve_start(&s, args) == 0);
    if (access(chromium, X_OK) != 0) {
        printf("  status page buttons: skipped (no %s)\n", chromium);
        CHECK_EQ_INT(serve_stop(&s), 0);
        return;
    }
    snprintf(prof_arg, sizeof prof_arg, "--user-data-dir=%s/chromium-profile3", g_dir);
    REQUIRE(cdp_start(&c, chromium, prof_arg) == 0);
    snprintf(params, sizeof params, "{\"url\":\"%s/#key=BTN-ADMIN\"}", s.url);
    REQUIRE(cdp_call(&c, "Target.createTarget", params));
    p = strstr(c.msg, "\"targetId\":\"");
    REQUIRE(p != NULL);
    p += 12;
    q = strchr(p, '"');
    REQUIRE(q != NULL);
    snprintf(params, sizeof params, "{\"targetId\":\"%.*s\",\"flatten\":true}", (int)(q - p), p);
    REQUIRE(cdp_call(&c, "Target.attachToTarget", params));
    p = strstr(c.msg, "\"sessionId\":\"");
    REQUIRE(p != NULL);
    p += 13;
    q = strchr(p, '"');
    REQUIRE(q != NULL && (size_t)(q - p) < sizeof c.session);
    memcpy(c.session, p, (size_t)(q - p));
    c.session[q - p] = 0;
    /* wait (in the page, bounded) for the table, then click b's load button */
    for (i = 0; i < 50; i++) { /* "Execution context was destroyed" while the page loads: again */
        CHECK(cdp_eval(&c, "new Promise(function (ok) { var n = 0; (function look() {"
                           " if (document.body && document.body.dataset.rendered === '2') ok('rendered');"
                           " else if (++n > 300) ok('timeout'); else setTimeout(look, 50); })(); })"));
        if (!strstr(c.msg, "\"error\":{")) break;
        (void)poll(NULL, 0, 20);
    }
    CHECK(strstr(c.msg, "\"value\":\"rendered\"") != NULL);
    if (!strstr(c.msg, "\"value\":\"rendered\"")) printf("  cdp: %.500s\n", c.msg);
    CHECK(cdp_eval(&c, "document.querySelector('tr[data-model=\"b\"] button.load').click(); 'clicked'"));
    CHECK(strstr(c.msg, "\"value\":\"clicked\"") != NULL);
    g_bearer = "BTN-ADMIN";
    (void)wait_state(&s, "b", "ready");
    status_state(&s, "b", st, sizeof st);
    CHECK_EQ_STR(st, "ready");
    /* the page follows (its event stream): b's row says ready; then unload it */
    CHECK(cdp_eval(&c, "new Promise(function (ok) { var n = 0; (function look() {"
                       " var td = document.querySelector('tr[data-model=\"b\"] td.state');"
                       " if (td && td.textContent === 'ready') ok('ready');"
                       " else if (++n > 300) ok('timeout'); else setTimeout(look, 50); })(); })"));
    CHECK(strstr(c.msg, "\"value\":\"ready\"") != NULL);
    CHECK(cdp_eval(&c, "document.querySelector('tr[data-model=\"b\"] button.unload').click(); 'clicked'"));
    (void)wait_state(&s, "b", "unloaded");
    status_state(&s, "b", st, sizeof st);
    CHECK_EQ_STR(st, "unloaded");
    g_bearer = NULL;
    cdp_stop(&c);
    CHECK_EQ_INT(serve_stop(&s), 0);
    CHECK(log_has(&s, "b: load requested") && log_has(&s, "b: unload requested"));
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    RUN(test_api_config);
    RUN(test_api_check_hides_keys);
    RUN(test_api_auth);
    RUN(test_api_reload_keys);
    RUN(test_api_reload_restart_keys);
    RUN(test_api_cors);
    RUN(test_api_real_child_key);
    RUN(test_api_events);
    RUN(test_api_evict_explains);
    RUN(test_api_ensure_waits_on_events);
    RUN(test_api_metrics);
    RUN(test_api_page);
    RUN(test_api_page_key);
    RUN(test_api_page_buttons);
    serve_cleanup();
    return RSD_TEST_END();
}
