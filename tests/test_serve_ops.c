/* test_serve_ops.c -- rsd-serve as an operated service: --check, per-model env and
   preload, host names in listen, ?autoload=false, the real exit status of a failed
   start, command models without the global args, bounded queues, reload (SIGHUP and
   POST /_rsd/reload) and the watchdog. The program (build/bin/rsd-serve) runs
   rsd-sim llama-server children (build/bin/rsd-sim --runtime server) or small
   shell wrappers around them. Nothing sleeps: waits are pipe reads, waitpid, or bounded
   polls of GET /status and of files the children write. */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency_http.h"
#include "../apps/rsd-serve/rsd_serve.h"
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

#define SERVE_BIN "build/bin/rsd-serve"
#define SIM_BIN "build/bin/rsd-sim"
#include "serve_harness.h"

static rsrv_config g_cfg, g_cfg2;
static char g_ini[1 << 16];
static const char *g_sim_args = "--runtime server --load-ms 20 --token-ms 40 --gen-ms 5";

static int parse(const char *text, char *err, size_t cap) {
    rsrv_config_init(&g_cfg);
    err[0] = 0;
    return rsrv_parse_ini(&g_cfg, text, strlen(text), "ops.ini", err, cap);
}

/* Polls until the file at path holds needle: bounded (10 s), 10 ms between looks. */
static bool wait_file_has(const char *path, const char *needle) {
    int i;
    for (i = 0; i < 1000; i++) {
        if (file_has(path, needle)) return true;
        (void)poll(NULL, 0, 10);
    }
    return false;
}

/* Polls the log of s until it holds needle (bounded, 10 s). */
SH_FN bool wait_log(const serve_proc *s, const char *needle) { return wait_file_has(s->log_path, needle); }

/* ---- the new keys, the writer, the structural checks (pure) ------------------------ */
static void test_ops_config_keys(void) {
    char err[RSRV_ERR_MAX];
    const char *text =
        "max_queue = 5\n"
        "vram_budget = 24G\n"
        "[model a]\n"
        "model = /m/a.gguf\n"
        "env = CUDA_VISIBLE_DEVICES=0, LLAMA_ARG_X=1 ,EMPTY=\n"
        "preload = yes\n"
        "max_queue = 2\n"
        "reserve = 6144M\n"
        "ttl = 300\n"
        "[model b]\n"
        "command = srv --port {port}\n";
    char buf[RSRV_CMD_MAX];
    const char *e[RSRV_MAX_ENV + 1];
    REQUIRE(parse(text, err, sizeof err) == 0);
    CHECK_EQ_INT(g_cfg.max_queue, 5);
    CHECK(g_cfg.models[0].preload);
    CHECK(!g_cfg.models[0].pinned);
    CHECK_EQ_INT(g_cfg.models[0].max_queue, 2);
    CHECK_EQ_INT(rsrv_eff_model_queue(&g_cfg, &g_cfg.models[0]), 2);
    CHECK_EQ_INT(rsrv_eff_model_queue(&g_cfg, &g_cfg.models[1]), 5); /* the global one */
    CHECK_EQ_INT(g_cfg.models[0].key_line[6], 8);                     /* reserve's line */
    REQUIRE(rsrv_env_split(g_cfg.models[0].env, buf, sizeof buf, e, RSRV_MAX_ENV + 1) == 3);
    CHECK_EQ_STR(e[0], "CUDA_VISIBLE_DEVICES=0");
    CHECK_EQ_STR(e[1], "LLAMA_ARG_X=1");
    CHECK_EQ_STR(e[2], "EMPTY=");
    CHECK(e[3] == NULL);
    /* written back: effective values, the largest exact unit, a round trip */
    REQUIRE(rsrv_write_ini(&g_cfg, g_ini, sizeof g_ini) > 0);
    CHECK(strstr(g_ini, "vram_budget = 24G\n") != NULL);
    CHECK(strstr(g_ini, "reserve = 6144M\n") != NULL); /* as written */
    CHECK(strstr(g_ini, "ttl = 300\n") != NULL);
    CHECK(strstr(g_ini, "max_wait = 30s\n") != NULL);    /* not 0 */
    CHECK(strstr(g_ini, "send_timeout = 30s\n") != NULL); /* not 0 */
    CHECK(strstr(g_ini, "start_timeout = 5m\n") != NULL);
    CHECK(strstr(g_ini, "preload = true\n") != NULL);
    CHECK(strstr(g_ini, "[model b]\ncommand = srv --port {port}\nreserve = 0\nttl = 0 # never") != NULL);
    rsrv_config_init(&g_cfg2);
    CHECK_EQ_INT(rsrv_parse_ini(&g_cfg2, g_ini, strlen(g_ini), "rt", err, sizeof err), 0);
    CHECK(rsrv_config_equal(&g_cfg, &g_cfg2));
    /* bad values */
    CHECK_EQ_INT(parse("[model a]\nmodel = x\nenv = 1X=2\n", err, sizeof err), -1);
    CHECK(strstr(err, "ops.ini:3: env: expected NAME=VALUE") == err);
    CHECK_EQ_INT(parse("[model a]\nmodel = x\nenv = NOVALUE\n", err, sizeof err), -1);
    CHECK_EQ_INT(parse("[model a]\nmodel = x\npreload = perhaps\n", err, sizeof err), -1);
    CHECK(strstr(err, "ops.ini:3: preload must be true or false") == err);
    CHECK_EQ_INT(parse("max_queue = 0\n", err, sizeof err), -1);
    CHECK(strstr(err, "ops.ini:1: max_queue must be an integer") == err);
    /* host names in listen (resolved by the program) */
    REQUIRE(parse("listen = localhost:8081\n", err, sizeof err) == 0);
    CHECK_EQ_STR(g_cfg.listen_host, "localhost");
    CHECK_EQ_INT(g_cfg.listen_port, 8081);
    CHECK_EQ_INT(parse("listen = [localhost]:80\n", err, sizeof err), -1);
}

static void test_ops_config_check(void) {
    char err[RSRV_ERR_MAX], out[4096];
    const char *text =
        "max_models = 1\n"
        "vram_budget = 8G\n"
        "[model a]\n"
        "command = srv --port {prot} --m {model}\n" /* line 4: unknown, no {port} */
        "model = /m/a.gguf\n"
        "pinned = true\n"
        "[model b]\n"
        "model = /m/b.gguf\n"
        "command = srv --port {port}\n" /* line 9: model never used */
        "reserve = 9G\n"                 /* line 10: above the budget */
        "pinned = true\n";               /* line 11: two pinned, max_models 1 */
    REQUIRE(parse(text, err, sizeof err) == 0);
    out[0] = 0;
    CHECK_EQ_INT(rsrv_check(&g_cfg, "ops.ini", out, sizeof out), 5);
    CHECK(strstr(out, "ops.ini:4: command: unknown placeholder {prot}") != NULL);
    CHECK(strstr(out, "ops.ini:4: command has no {port}") != NULL);
    CHECK(strstr(out, "ops.ini:8: both `model` and `command` in [model b]") != NULL);
    CHECK(strstr(out, "ops.ini:10: reserve 9G is above vram_budget 8G") != NULL);
    CHECK(strstr(out, "ops.ini:11: 2 pinned models but max_models = 1") != NULL);
    if (!strstr(out, "ops.ini:8:")) printf("%s", out);
    REQUIRE(parse("[model a]\nmodel = /m/a.gguf\ncommand = srv --port {port} -m {model}\n", err, sizeof err) == 0);
    out[0] = 0;
    CHECK_EQ_INT(rsrv_check(&g_cfg, "ops.ini", out, sizeof out), 0);
    CHECK_EQ_STR(out, "");
}

/* The program's --check: files too, FILE:LINE each, exit 64; a directory exit 66. */
static void test_ops_check_program(void) {
    char path[256], model[256], text[2048], out[8192], want[512];
    const char *argv1[] = {SERVE_BIN, "--config", path, "--check", NULL};
    const char *argv2[] = {SERVE_BIN, "--config", g_dir, "--check", NULL};
    make_dir();
    argv2[2] = g_dir;
    snprintf(path, sizeof path, "%s/check.ini", g_dir);
    snprintf(model, sizeof model, "%s/check-ok.gguf", g_dir);
    write_file(model, "");
    snprintf(text, sizeof text,
             "llama_server = /nonexistent/llama-server\n" /* 1 */
             "[model a]\n"
             "model = %s\n"                              /* 3 */
             "[model b]\n"
             "model = %s/missing.gguf\n"                 /* 5 */
             "[model c]\n"
             "command = /nonexistent/srv --port {port}\n", /* 7 */
             model, g_dir);
    write_file(path, text);
    CHECK_EQ_INT(run_prog(argv1, out, sizeof out), 64);
    snprintf(want, sizeof want, "%s:1: model 'a': cannot run /nonexistent/llama-server", path);
    CHECK(strstr(out, want) != NULL);
    snprintf(want, sizeof want, "%s:7: model 'c': cannot run /nonexistent/srv", path);
    CHECK(strstr(out, want) != NULL);
    if (!strstr(out, want)) printf("%s\n", out);
    /* the model file: with a binary that exists */
    snprintf(text, sizeof text,
             "llama_server = %s\nvram_budget = 3G\n[model a]\nmodel = %s\nreserve = 1536M\n[model b]\nmodel = %s/missing.gguf\n",
             SIM_BIN, model, g_dir);
    write_file(path, text);
    CHECK_EQ_INT(run_prog(argv1, out, sizeof out), 64);
    snprintf(want, sizeof want, "%s:7: model 'b': cannot read model file %s/missing.gguf", path, g_dir);
    CHECK(strstr(out, want) != NULL);
    if (!strstr(out, want)) printf("%s\n", out);
    /* all fine: the configuration as INI, sizes and durations readable, defaults shown */
    snprintf(text, sizeof text, "llama_server = %s\nvram_budget = 3G\n[model a]\nmodel = %s\nreserve = 1536M\nttl = 90\n",
             SIM_BIN, model);
    write_file(path, text);
    CHECK_EQ_INT(run_prog(argv1, out, sizeof out), 0);
    CHECK(strstr(out, "vram_budget = 3G\n") && strstr(out, "reserve = 1536M\n") && strstr(out, "ttl = 90\n"));
    CHECK(strstr(out, "max_wait = 30s\n") && strstr(out, "send_timeout = 30s\n") && strstr(out, "max_queue = 4096\n"));
    /* a directory for a config file */
    CHECK_EQ_INT(run_prog(argv2, out, sizeof out), 66);
    CHECK(strstr(out, "is a directory") != NULL);
}

/* rsd-sim llama-server children through a shell wrapper that first writes what it
   sees to FILE: "exec" keeps the server the direct child. */
static void sim_wrapper(char *out, size_t cap, const char *file, const char *what, const char *id) {
    snprintf(out, cap, "/bin/sh -c \"echo %s > %s; exec %s %s --port {port} -m /models/%s.gguf --alias %s\"", what,
             file, SIM_BIN, g_sim_args, id, id);
}

/* env reaches the child; preload starts at boot without a pin; the global args are not
   given to a command; listen takes a host name. */
static void test_ops_env_preload(void) {
    serve_proc s;
    char path[256], envfile[256], cmd[1024], text[4096], state[32];
    const char *args[] = {"--config", path, NULL};
    make_dir();
    snprintf(path, sizeof path, "%s/env.ini", g_dir);
    snprintf(envfile, sizeof envfile, "%s/env.out", g_dir);
    sim_wrapper(cmd, sizeof cmd, envfile, "\\\"cuda=$CUDA_VISIBLE_DEVICES x=$LLAMA_ARG_X\\\"", "pre");
    snprintf(text, sizeof text,
             "listen = localhost:0\nmax_models = 2\nstop_grace = 2\n"
             "args = --no-such-flag-for-a-command\n" /* would make rsd-sim exit 64 */
             "[model pre]\ncommand = %s\nenv = CUDA_VISIBLE_DEVICES=0, LLAMA_ARG_X=1\npreload = true\n",
             cmd);
    write_file(path, text);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK(strstr(s.url, "127.0.0.1") || strstr(s.url, "[::1]")); /* localhost, resolved */
    /* started without a request */
    (void)wait_state(&s, "pre", "ready");
    status_state(&s, "pre", state, sizeof state);
    CHECK_EQ_STR(state, "ready");
    CHECK_EQ_INT(http(&s, "GET", "/status", NULL), 200);
    CHECK(strstr(g_body, "\"pinned\":false") != NULL);
    CHECK(wait_file_has(envfile, "cuda=0 x=1"));
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("pre", false)), 200);
    CHECK(!log_has(&s, "no-such-flag"));
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* ?autoload=false: served only by a model that is ready (the router's 400 otherwise);
   nothing is started for it. */
static void test_ops_autoload(void) {
    serve_proc s;
    char path[256], text[2048];
    const char *args[] = {"--config", path, NULL};
    make_dir();
    snprintf(path, sizeof path, "%s/auto.gguf", g_dir);
    write_file(path, "");
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nllama_server = %s\nargs = %s\nstop_grace = 2\n[model a]\nmodel = %s\n",
             SIM_BIN, g_sim_args, path);
    snprintf(path, sizeof path, "%s/auto.ini", g_dir);
    write_file(path, text);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "GET", "/props?model=a&autoload=false", NULL), 400);
    CHECK(strstr(g_body, "\"message\":\"model is not loaded\"") != NULL);
    CHECK_EQ_INT(http(&s, "GET", "/slots?autoload=0&model=a", NULL), 400);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions?autoload=false", chat("a", false)), 400);
    CHECK_EQ_INT(status_field(&s, NULL, "spawns"), 0);
    CHECK_EQ_INT(status_field(&s, "a", "pid"), 0);
    /* autoload=true (or absent) starts it; then autoload=false is served */
    CHECK_EQ_INT(http(&s, "GET", "/props?model=a&autoload=true", NULL), 200);
    CHECK_EQ_INT(http(&s, "GET", "/props?model=a&autoload=false", NULL), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions?autoload=false", chat("a", false)), 200);
    CHECK_EQ_INT(status_field(&s, NULL, "spawns"), 1);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* A failed start is listed with the child's own exit status (before: always 1). */
static void test_ops_exit_status(void) {
    serve_proc s;
    char path[256];
    const char *args[] = {"--config", path, NULL};
    make_dir();
    snprintf(path, sizeof path, "%s/exit.ini", g_dir);
    write_file(path, "listen = 127.0.0.1:0\nstop_grace = 2\n[model three]\ncommand = /bin/sh -c \"exit 3\" {port}\n");
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("three", false)), 503);
    CHECK_EQ_INT(http(&s, "GET", "/models", NULL), 200);
    CHECK(strstr(g_body, "\"failed\":true,\"exit_code\":3") != NULL);
    if (!strstr(g_body, "\"exit_code\":3")) printf("  %s\n", g_body);
    CHECK_EQ_INT(serve_stop(&s), 0);
}


/* Reads an answer on fd until it is complete enough to hold needle (or EOF/10 s). */
static bool raw_wait_for(int fd, char *buf, size_t cap, const char *needle) {
    size_t n = 0;
    int got;
    buf[0] = 0;
    while (n + 1 < cap && (got = raw_read(fd, buf + n, cap - 1 - n)) > 0) {
        n += (size_t)got;
        buf[n] = 0;
        if (strstr(buf, needle)) return true;
    }
    return false;
}

/* The defaults hold 64 concurrent streaming clients on one model (parallel 4, so 60
   wait at once) with no refusal: every client gets 200 and its stream's [DONE]. The
   streams (8 chunks, 50 ms apart) outlast the posting of all 64. */
static void test_ops_queue_default_64(void) {
    enum { N = 64 };
    serve_proc s;
    char path[256], text[2048], buf[8192];
    const char *args[] = {"--config", path, NULL};
    int fds[N], i, ok = 0, done = 0;
    make_dir();
    snprintf(path, sizeof path, "%s/q64.gguf", g_dir);
    write_file(path, "");
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nllama_server = %s\nargs = %s --token-ms 50\nstop_grace = 2\n"
             "[model a]\nmodel = %s\nparallel = 4\n",
             SIM_BIN, g_sim_args, path);
    snprintf(path, sizeof path, "%s/q64.ini", g_dir);
    write_file(path, text);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200); /* a is up */
    for (i = 0; i < N; i++) {
        fds[i] = raw_connect(s.port);
        REQUIRE(fds[i] >= 0);
        REQUIRE(raw_post(fds[i], "/v1/chat/completions", chat("a", true)) == 0);
    }
    for (i = 0; i < N; i++) {
        bool got = raw_wait_for(fds[i], buf, sizeof buf, "[DONE]");
        ok += strstr(buf, "HTTP/1.1 200") == buf;
        done += got;
        if (strstr(buf, "HTTP/1.1 200") != buf) printf("  client %d: %.80s\n", i, buf);
        close(fds[i]);
    }
    CHECK_EQ_INT(ok, N);
    CHECK_EQ_INT(done, N);
    CHECK_EQ_INT(http(&s, "GET", "/status", NULL), 200);
    CHECK(strstr(g_body, "\"queue_full\":0,") != NULL);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* max_queue: past it 429 with Retry-After; a request that waited says where it stood
   (X-Queue-Position) and /status lists the queue in order. */
static void test_ops_queue(void) {
    serve_proc s;
    char path[256], text[2048], buf[8192];
    const char *args[] = {"--config", path, NULL};
    int fd1, fd2, fd3, fdb;
    make_dir();
    snprintf(path, sizeof path, "%s/q.gguf", g_dir);
    write_file(path, "");
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nmax_models = 2\nllama_server = %s\nargs = %s --hang /v1/chat/completionsx1\n"
             "stop_grace = 2\nmax_queue = 3\n"
             "[model a]\nmodel = %s\nparallel = 1\nmax_queue = 2\n"
             "[model b]\nmodel = %s\nparallel = 1\n",
             SIM_BIN, g_sim_args, path, path);
    snprintf(path, sizeof path, "%s/q.ini", g_dir);
    write_file(path, text);
    REQUIRE(serve_start(&s, args) == 0);
    /* a's one slot is held by a request its child never answers */
    fd1 = raw_connect(s.port);
    REQUIRE(fd1 >= 0);
    REQUIRE(raw_post(fd1, "/v1/chat/completions", chat("a", false)) == 0);
    CHECK(wait_field(&s, "a", "in_flight", 1));
    fd2 = raw_connect(s.port);
    fd3 = raw_connect(s.port);
    REQUIRE(fd2 >= 0 && fd3 >= 0);
    REQUIRE(raw_post(fd2, "/v1/chat/completions", chat("a", false)) == 0);
    CHECK(wait_field(&s, "a", "waiting", 1));
    REQUIRE(raw_post(fd3, "/v1/chat/completions", chat("a", false)) == 0);
    CHECK(wait_field(&s, "a", "waiting", 2));
    /* a's own queue is full */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 429);
    CHECK(strstr(g_body, "max_queue 2") != NULL);
    CHECK_EQ_INT(http(&s, "GET", "/status", NULL), 200);
    CHECK(strstr(g_body, "\"max_queue\":2,\"queue\":[{\"position\":1,") != NULL);
    CHECK(strstr(g_body, "{\"position\":2,") != NULL);
    CHECK(strstr(g_body, "\"queue_full\":1") != NULL);
    /* the queue in all (3): b's slot held, one more waits for b, the next is refused */
    fdb = raw_connect(s.port);
    REQUIRE(fdb >= 0);
    REQUIRE(raw_post(fdb, "/v1/chat/completions", chat("b", false)) == 0);
    CHECK(wait_field(&s, "b", "in_flight", 1));
    {
        int fdb2 = raw_connect(s.port);
        REQUIRE(fdb2 >= 0);
        REQUIRE(raw_post(fdb2, "/v1/chat/completions", chat("b", false)) == 0);
        CHECK(wait_field(&s, "b", "waiting", 1));
        CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("b", false)), 429);
        CHECK(strstr(g_body, "max_queue 3 in all") != NULL);
        close(fdb2);
    }
    close(fdb);
    /* the held request goes: the first waiter is served, and says it stood first */
    close(fd1);
    CHECK(raw_wait_for(fd2, buf, sizeof buf, "simulated"));
    CHECK(strstr(buf, "HTTP/1.1 200") != NULL);
    CHECK(strstr(buf, "X-Queue-Position: 1\r\n") != NULL);
    if (!strstr(buf, "X-Queue-Position")) printf("  %s\n", buf);
    CHECK(raw_wait_for(fd3, buf, sizeof buf, "simulated"));
    CHECK(strstr(buf, "X-Queue-Position: 2\r\n") != NULL);
    close(fd2);
    close(fd3);
    /* a request that never waited has no position */
    {
        int fd4 = raw_connect(s.port);
        REQUIRE(fd4 >= 0);
        REQUIRE(raw_post(fd4, "/v1/chat/completions", chat("a", false)) == 0);
        CHECK(raw_wait_for(fd4, buf, sizeof buf, "simulated"));
        CHECK(strstr(buf, "X-Queue-Position") == NULL);
        close(fd4);
    }
    CHECK_EQ_INT(serve_stop(&s), 0);
}


static void write_reload_config(const char *path, const char *model, const char *models) {
    char text[8192];
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nmax_models = 4\nllama_server = %s\nargs = %s\nstop_grace = 2\n%s",
             SIM_BIN, g_sim_args, models);
    (void)model;
    write_file(path, text);
}

/* SIGHUP and POST /_rsd/reload: added, removed (drained, stopped), changed (restarted),
   unchanged (same pid); a bad file keeps the old configuration and says FILE:LINE; a
   change forgets the model's start backoff. */
static void test_ops_reload(void) {
    serve_proc s;
    char path[256], model[256], m[4096], want[512];
    const char *args[] = {"--config", path, NULL};
    int64_t keep_pid, chg_pid, gone_pid;
    make_dir();
    snprintf(model, sizeof model, "%s/r.gguf", g_dir);
    write_file(model, "");
    snprintf(path, sizeof path, "%s/reload.ini", g_dir);
    snprintf(m, sizeof m,
             "[model keep]\nmodel = %s\npinned = true\n"
             "[model chg]\nmodel = %s\nctx = 1024\n"
             "[model gone]\nmodel = %s\n"
             "[model fix]\ncommand = /bin/sh -c \"exit 3\" {port}\n",
             model, model, model);
    write_reload_config(path, model, m);
    REQUIRE(serve_start(&s, args) == 0);
    keep_pid = wait_new_pid(&s, "keep", 0);
    CHECK(keep_pid > 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("chg", false)), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("gone", false)), 200);
    chg_pid = status_field(&s, "chg", "pid");
    gone_pid = status_field(&s, "gone", "pid");
    CHECK(chg_pid > 0 && gone_pid > 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("fix", false)), 503);
    CHECK(status_field(&s, "fix", "retry_in_ms") > 0); /* backed off */

    /* the new file: chg's ctx changes, gone goes, fresh comes (preload), fix is fixed */
    snprintf(m, sizeof m,
             "[model keep]\nmodel = %s\npinned = true\n"
             "[model chg]\nmodel = %s\nctx = 2048\n"
             "[model fresh]\nmodel = %s\npreload = true\n"
             "[model fix]\ncommand = %s %s --port {port} -m /models/fix.gguf --alias fix\n",
             model, model, model, SIM_BIN, g_sim_args);
    write_reload_config(path, model, m);
    REQUIRE(kill(s.pid, SIGHUP) == 0);
    CHECK(wait_log(&s, "SIGHUP: configuration reloaded: added [fresh] removed [gone] changed [chg fix]"));
    CHECK(wait_new_pid(&s, "chg", chg_pid) > 0);
    CHECK(wait_new_pid(&s, "fresh", 0) > 0);
    CHECK_EQ_INT(status_field(&s, "keep", "pid"), keep_pid);
    CHECK_EQ_INT(status_field(&s, "fix", "retry_in_ms"), -1); /* null: the backoff is gone */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("fix", false)), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("gone", false)), 404);
    CHECK(wait_log(&s, "gone: exited"));
    CHECK_EQ_INT(http(&s, "GET", "/models", NULL), 200);
    CHECK(strstr(g_body, "\"id\":\"gone\"") == NULL);
    CHECK(strstr(g_body, "\"--ctx-size\",\"2048\"") || strstr(g_body, "\"-c\",\"2048\""));
    if (!strstr(g_body, "2048")) printf("  %s\n", g_body);

    /* a bad file: 400 with FILE:LINE, the old configuration runs on */
    write_file(path, "listen = 127.0.0.1:0\n[model keep]\nttl = soon\n");
    CHECK_EQ_INT(http(&s, "POST", "/_rsd/reload", NULL), 400);
    snprintf(want, sizeof want, "%s:3: ttl: bad duration 'soon'", path);
    CHECK(strstr(g_body, want) != NULL);
    CHECK(strstr(g_body, "the old configuration stays") != NULL);
    CHECK(log_has(&s, want));
    CHECK_EQ_INT(status_field(&s, "keep", "pid"), keep_pid);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("fresh", false)), 200);
    /* what cannot work is refused too */
    snprintf(m, sizeof m, "[model keep]\ncommand = srv --port {prot}\n");
    write_reload_config(path, model, m);
    CHECK_EQ_INT(http(&s, "POST", "/_rsd/reload", NULL), 400);
    CHECK(strstr(g_body, "unknown placeholder {prot}") != NULL);

    /* the good file again: nothing moves, the answer says so */
    snprintf(m, sizeof m,
             "[model keep]\nmodel = %s\npinned = true\n"
             "[model chg]\nmodel = %s\nctx = 2048\nttl = 1h\n"
             "[model fresh]\nmodel = %s\npreload = true\n"
             "[model fix]\ncommand = %s %s --port {port} -m /models/fix.gguf --alias fix\n",
             model, model, model, SIM_BIN, g_sim_args);
    write_reload_config(path, model, m);
    chg_pid = status_field(&s, "chg", "pid");
    CHECK_EQ_INT(http(&s, "POST", "/_rsd/reload", NULL), 200);
    CHECK(strstr(g_body, "\"added\":[],\"removed\":[],\"changed\":[],\"updated\":[\"chg\"],"
                         "\"unchanged\":[\"keep\",\"fix\",\"fresh\"]") != NULL);
    if (!strstr(g_body, "\"updated\":[\"chg\"]")) printf("  %s\n", g_body);
    CHECK_EQ_INT(status_field(&s, "chg", "pid"), chg_pid);
    CHECK_EQ_INT(status_field(&s, "keep", "pid"), keep_pid);
    CHECK_EQ_INT(status_field(&s, "chg", "ttl_s"), 3600);
    CHECK_EQ_INT(serve_stop(&s), 0);
}


/* The watchdog: a ready child that stops answering /health (SIGSTOP) is killed and
   started again, and the log says why. */
static void test_ops_watchdog_health(void) {
    serve_proc s;
    char path[256], model[256], text[2048];
    const char *args[] = {"--config", path, NULL};
    int64_t pid, pid2;
    make_dir();
    snprintf(model, sizeof model, "%s/w.gguf", g_dir);
    write_file(model, "");
    snprintf(path, sizeof path, "%s/wd.ini", g_dir);
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nllama_server = %s\nargs = %s\nstop_grace = 2\nwatchdog = 100ms\n"
             "watchdog_failures = 2\n[model w]\nmodel = %s\n",
             SIM_BIN, g_sim_args, model);
    write_file(path, text);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("w", false)), 200);
    pid = status_field(&s, "w", "pid");
    REQUIRE(pid > 0);
    REQUIRE(kill((pid_t)pid, SIGSTOP) == 0);
    pid2 = wait_new_pid(&s, "w", pid);
    CHECK(pid2 > 0);
    if (pid2 <= 0) (void)kill((pid_t)pid, SIGCONT);
    CHECK(wait_log(&s, "restarted by the watchdog (1 of at most 5 in a row"));
    CHECK(log_has(&s, "did not answer"));
    CHECK(log_has(&s, "2 polls in a row"));
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("w", false)), 200);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* Completions that keep failing with 5xx restart the child; after watchdog_restarts
   restarts in a row it is left stopped (the cap). */
static void test_ops_watchdog_errors(void) {
    serve_proc s;
    char path[256], model[256], text[2048];
    const char *args[] = {"--config", path, NULL};
    int64_t pid;
    int i;
    make_dir();
    snprintf(model, sizeof model, "%s/e.gguf", g_dir);
    write_file(model, "");
    snprintf(path, sizeof path, "%s/wde.ini", g_dir);
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nllama_server = %s\nargs = %s --error /v1/chat/completions=500x3\nstop_grace = 2\n"
             "watchdog = 1s\nwatchdog_errors = 3\nwatchdog_restarts = 1\n[model e]\nmodel = %s\n",
             SIM_BIN, g_sim_args, model);
    write_file(path, text);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/models/load", "{\"model\":\"e\"}"), 200);
    CHECK(wait_log(&s, "e: ready pid"));
    pid = status_field(&s, "e", "pid");
    CHECK(pid > 0);
    for (i = 0; i < 3; i++) CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("e", false)), 500);
    CHECK(wait_log(&s, "3 answers in a row failed with 5xx (the last 500)"));
    CHECK(wait_log(&s, "restarted by the watchdog (1 of at most 1 in a row"));
    pid = wait_new_pid(&s, "e", pid);
    CHECK(pid > 0);
    /* the new child fails its first three too: killed again, and now left stopped */
    for (i = 0; i < 3; i++) CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("e", false)), 500);
    CHECK(wait_log(&s, "stopped by the watchdog, not restarted (1 restarts in a row)"));
    CHECK(wait_field(&s, "e", "pid", 0));
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* /health, /v1/models, /models, /status, /_rsd/status, /metrics and /props polls (and
   the watchdog's own) never count as use: the idle timer runs on and the model is
   unloaded at its ttl while they go on. */
static void test_ops_polls_not_use(void) {
    serve_proc s;
    char path[256], model[256], text[2048];
    const char *args[] = {"--config", path, NULL};
    static const char *const polls[] = {"/health", "/v1/models", "/models", "/status", "/_rsd/status", "/metrics", "/props"};
    int64_t left1, left2, ago1, ago2;
    int i;
    make_dir();
    snprintf(model, sizeof model, "%s/p.gguf", g_dir);
    write_file(model, "");
    snprintf(path, sizeof path, "%s/polls.ini", g_dir);
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nllama_server = %s\nargs = %s\nstop_grace = 2\nwatchdog = 20ms\n"
             "[model p]\nmodel = %s\nttl = 8s\n",
             SIM_BIN, g_sim_args, model);
    write_file(path, text);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("p", false)), 200);
    left1 = status_field(&s, "p", "idle_unload_in_ms");
    ago1 = status_field(&s, "p", "last_used_ms_ago");
    CHECK(left1 > 0 && ago1 >= 0);
    if (!(left1 > 0)) printf("  idle_unload_in_ms %lld\n", (long long)left1);
    for (i = 0; i < 21; i++) (void)http(&s, "GET", polls[i % 7], NULL);
    (void)poll(NULL, 0, 50); /* a few watchdog polls for sure (20 ms apart) */
    left2 = status_field(&s, "p", "idle_unload_in_ms");
    ago2 = status_field(&s, "p", "last_used_ms_ago");
    /* the timer ran on (or, on a machine slow enough, already ran out) */
    CHECK((left2 >= 0 && left2 < left1) || (left2 == -1 && status_field(&s, "p", "pid") == 0));
    CHECK(ago2 > ago1);
    if (!(left2 >= 0 && left2 < left1)) printf("  idle_unload_in_ms %lld -> %lld\n", (long long)left1, (long long)left2);
    CHECK_EQ_INT(status_field(&s, NULL, "spawns"), 1);
    /* polled all along, it still goes at its ttl */
    for (i = 0; i < 1000 && status_field(&s, "p", "pid") != 0; i++) {
        (void)http(&s, "GET", polls[i % 7], NULL);
        (void)poll(NULL, 0, 10);
    }
    CHECK_EQ_INT(status_field(&s, "p", "pid"), 0);
    CHECK(log_has(&s, "p: stopping pid"));
    CHECK(log_has(&s, "(ttl)"));
    CHECK_EQ_INT(serve_stop(&s), 0);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    RUN(test_ops_config_keys);
    RUN(test_ops_config_check);
    RUN(test_ops_check_program);
    RUN(test_ops_env_preload);
    RUN(test_ops_autoload);
    RUN(test_ops_exit_status);
    RUN(test_ops_queue);
    RUN(test_ops_queue_default_64);
    RUN(test_ops_reload);
    RUN(test_ops_watchdog_health);
    RUN(test_ops_watchdog_errors);
    RUN(test_ops_polls_not_use);
    serve_cleanup();
    return RSD_TEST_END();
}
