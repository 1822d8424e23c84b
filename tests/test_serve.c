/* test_serve.c -- rsd-serve: its configuration parser (examples/rsd_serve.h, pure) and
   the program itself (build/examples/rsd-serve) with rsd-sim llama-server children
   (build/examples/rsd-sim --runtime server as the llama_server binary). The program
   prints "rsd-serve: listening on http://127.0.0.1:PORT" first on stdout; the tests
   read that line from a pipe and then talk HTTP to it. Nothing sleeps: waits are
   blocking reads on pipes and sockets, waitpid, or bounded polls of GET /status. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include "../examples/rsd_serve.h"
#include "rsd_test.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <unistd.h>

#define SERVE_BIN "build/examples/rsd-serve"
#define SIM_BIN "build/examples/rsd-sim"
#define ENSURE_BIN "build/examples/rsd-ensure"

static rsrv_config g_cfg, g_cfg2;
static char g_ini[1 << 16];

static int parse(const char *text, char *err, size_t cap) {
    rsrv_config_init(&g_cfg);
    err[0] = 0;
    return rsrv_parse_ini(&g_cfg, text, strlen(text), "serve.ini", err, cap);
}

/* ---- configuration ------------------------------------------------------------------ */
static void test_config_full(void) {
    char err[RSRV_ERR_MAX];
    const char *text =
        "# comment\n"
        "listen = 127.0.0.1:0\n"
        "[global]\n"
        "max_models = 2\n"
        "vram_budget = 24G\n"
        "llama_server = /opt/llama/llama-server\n"
        "args = --runtime server --load-ms 20\n"
        "start_timeout = 30\n"
        "stop_grace = 500ms\n"
        "\n"
        "[model chat-8b]\n"
        "model = /models/chat-8b.gguf\n"
        "args = --jinja -fa on\n"
        "ctx = 8192\n"
        "parallel = 4\n"
        "ngl = 99\n"
        "reserve = 6G\n"
        "ttl = 300\n"
        "pinned = true\n"
        "aliases = chat, default\n"
        "[model  coder ]\r\n"
        "command = /opt/bin/srv --port {port} --weights \"/m/a b.gguf\" 'x y' z\\ w\r\n"
        "ttl = 5m\r\n";
    const char *argv[RSRV_MAX_ARGS + 1];
    char buf[RSRV_CMD_MAX];
    int n;
    REQUIRE(parse(text, err, sizeof err) == 0);
    CHECK_EQ_STR(err, "");
    CHECK_EQ_INT(g_cfg.max_models, 2);
    CHECK(g_cfg.vram_budget_bytes == (uint64_t)24 << 30);
    CHECK_EQ_STR(g_cfg.llama_server, "/opt/llama/llama-server");
    CHECK_EQ_STR(g_cfg.listen_host, "127.0.0.1");
    CHECK_EQ_INT(g_cfg.listen_port, 0);
    CHECK_EQ_INT(g_cfg.start_timeout_ms, 30000);
    CHECK_EQ_INT(g_cfg.stop_grace_ms, 500);
    REQUIRE(g_cfg.nmodels == 2);
    CHECK_EQ_STR(g_cfg.models[0].id, "chat-8b");
    CHECK_EQ_STR(g_cfg.models[0].model, "/models/chat-8b.gguf");
    CHECK_EQ_INT(g_cfg.models[0].ctx, 8192);
    CHECK_EQ_INT(g_cfg.models[0].parallel, 4);
    CHECK_EQ_STR(g_cfg.models[0].ngl, "99");
    CHECK(g_cfg.models[0].reserve_bytes == (uint64_t)6 << 30);
    CHECK_EQ_INT(g_cfg.models[0].ttl_ms, 300000);
    CHECK(g_cfg.models[0].pinned);
    CHECK_EQ_INT(g_cfg.models[0].naliases, 2);
    CHECK_EQ_STR(g_cfg.models[0].aliases[1], "default");
    CHECK_EQ_INT(g_cfg.models[0].line, 11);
    CHECK_EQ_STR(g_cfg.models[1].id, "coder");
    CHECK_EQ_INT(g_cfg.models[1].ttl_ms, 300000);
    CHECK(!g_cfg.models[1].pinned);
    CHECK_EQ_INT(rsrv_find(&g_cfg, "default", 7), 0);
    CHECK_EQ_INT(rsrv_find(&g_cfg, "coder", 5), 1);
    CHECK_EQ_INT(rsrv_find(&g_cfg, "code", 4), -1);
    n = rsrv_split(g_cfg.models[1].command, buf, sizeof buf, argv, RSRV_MAX_ARGS + 1);
    REQUIRE(n == 7);
    CHECK_EQ_STR(argv[0], "/opt/bin/srv");
    CHECK_EQ_STR(argv[2], "{port}");
    CHECK_EQ_STR(argv[4], "/m/a b.gguf");
    CHECK_EQ_STR(argv[5], "x y");
    CHECK_EQ_STR(argv[6], "z w");
    CHECK(argv[7] == NULL);
    /* round trip through the writer */
    n = rsrv_write_ini(&g_cfg, g_ini, sizeof g_ini);
    REQUIRE(n > 0);
    rsrv_config_init(&g_cfg2);
    CHECK_EQ_INT(rsrv_parse_ini(&g_cfg2, g_ini, (size_t)n, "rt", err, sizeof err), 0);
    CHECK(rsrv_config_equal(&g_cfg, &g_cfg2));
    CHECK_EQ_INT(rsrv_write_ini(&g_cfg, g_ini, 10), -1);
}

static void test_config_defaults(void) {
    char err[RSRV_ERR_MAX];
    REQUIRE(parse("[model a]\nmodel = a.gguf\n", err, sizeof err) == 0);
    CHECK_EQ_INT(g_cfg.max_models, 1);
    CHECK_EQ_STR(g_cfg.llama_server, "llama-server");
    CHECK_EQ_STR(g_cfg.listen_host, "127.0.0.1");
    CHECK_EQ_INT(g_cfg.listen_port, 8080);
    CHECK_EQ_INT(g_cfg.start_timeout_ms, 300000);
    CHECK_EQ_INT(g_cfg.stop_grace_ms, 10000);
    CHECK_EQ_INT(g_cfg.models[0].ttl_ms, 0);
    CHECK(g_cfg.models[0].reserve_bytes == 0);
    CHECK_EQ_INT(parse("", err, sizeof err), 0);
    CHECK_EQ_INT(g_cfg.nmodels, 0);
}

/* Each bad file names its line and the problem. */
static void test_config_errors(void) {
    static const struct { const char *text, *want; } cases[] = {
        {"max_models = 17\n", "serve.ini:1: max_models must be an integer from 1 to 16"},
        {"max_models = 0\n", "serve.ini:1: max_models must be"},
        {"\n\n[model a]\nctx = 4096\n", "serve.ini:3: model 'a' needs `model = PATH` or `command = ...`"},
        {"[model a]\nmodel = x\n[model b]\nctx = 1\n[model c]\nmodel = y\n", "serve.ini:3: model 'b' needs"},
        {"[model a]\nmodel = x\n[model a]\nmodel = y\n", "serve.ini:3: model 'a' is already defined (line 1)"},
        {"[model a]\nmodel = x\naliases = b\n[model b]\nmodel = y\n", "serve.ini:4: model 'b' is already defined"},
        {"[model a]\nmodel = x\n[model b]\nmodel = y\naliases = c, a\n", "serve.ini:5: alias 'a' is already a model id or alias of a"},
        {"[globl]\n", "serve.ini:1: unknown section [globl]"},
        {"[model]\n", "serve.ini:1: unknown section [model]"},
        {"[model a b]\n", "serve.ini:1: bad model id 'a b'"},
        {"[model a\n", "serve.ini:1: a section header ends with ']'"},
        {"# ok\nlisten\n", "serve.ini:2: expected `key = value`"},
        {"= 3\n", "serve.ini:1: missing key before '='"},
        {"port = 8080\n", "serve.ini:1: unknown global key 'port'"},
        {"[model a]\nmodel = x\nsize = 3G\n", "serve.ini:3: unknown key 'size' in [model a]"},
        {"[model a]\nmodel = x\nreserve = 4Q\n", "serve.ini:3: reserve: bad size '4Q'"},
        {"[model a]\nmodel = x\nttl = soon\n", "serve.ini:3: ttl: bad duration 'soon'"},
        {"[model a]\nmodel = x\npinned = maybe\n", "serve.ini:3: pinned must be true or false"},
        {"[model a]\nmodel = x\nparallel = 0\n", "serve.ini:3: parallel must be an integer from 1 to 256"},
        {"[model a]\nmodel = x\nngl = lots\n", "serve.ini:3: ngl must be a number, auto or all"},
        {"[model a]\ncommand = \"srv --x\n", "serve.ini:2: command: unbalanced quotes"},
        {"[model a]\ncommand =\n", "serve.ini:2: command: empty command"},
        {"[model a]\nmodel =\n", "serve.ini:2: model needs a path"},
        {"[model a]\nmodel = x\nmodel = y\n", "serve.ini:3: duplicate key 'model'"},
        {"listen = localhost:80\n", "serve.ini:1: listen: bad address 'localhost:80'"},
        {"listen = 127.0.0.1:70000\n", "serve.ini:1: listen: bad address"},
        {"listen = ::1:80\n", "serve.ini:1: listen: bad address"},
        {"start_timeout = 0\n", "serve.ini:1: start_timeout: bad duration '0'"},
        {"[global]\n[global]\n", "serve.ini:2: a second [global] section"},
        {"[model a]\nmodel = x\nargs = 'unterminated\n", "serve.ini:3: args: unbalanced quotes"},
    };
    char err[RSRV_ERR_MAX];
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int r = parse(cases[i].text, err, sizeof err);
        if (r != -1 || strncmp(err, cases[i].want, strlen(cases[i].want)) != 0) {
            printf("  case %d: got %d \"%s\", want \"%s...\"\n", (int)i, r, err, cases[i].want);
            CHECK(0);
        }
    }
}

static void test_config_values(void) {
    uint64_t b = 0;
    uint32_t ms = 0;
    char host[RSRV_HOST_MAX];
    int port = -1;
    bool v = false;
    CHECK(rsrv_parse_size("512", 3, &b) && b == 512);
    CHECK(rsrv_parse_size("4K", 2, &b) && b == 4096);
    CHECK(rsrv_parse_size("3MiB", 4, &b) && b == (uint64_t)3 << 20);
    CHECK(rsrv_parse_size("2gb", 3, &b) && b == (uint64_t)2 << 30);
    CHECK(rsrv_parse_size("1T", 2, &b) && b == (uint64_t)1 << 40);
    CHECK(!rsrv_parse_size("", 0, &b));
    CHECK(!rsrv_parse_size("G", 1, &b));
    CHECK(!rsrv_parse_size("1.5G", 4, &b));
    CHECK(!rsrv_parse_size("-1", 2, &b));
    CHECK(!rsrv_parse_size("99999999999999999999999", 23, &b));
    CHECK(!rsrv_parse_size("300000T", 7, &b)); /* over RSD_POOL_MAX_BYTES */
    CHECK(rsrv_parse_duration("0", 1, &ms) && ms == 0);
    CHECK(rsrv_parse_duration("250ms", 5, &ms) && ms == 250);
    CHECK(rsrv_parse_duration("2h", 2, &ms) && ms == 7200000);
    CHECK(!rsrv_parse_duration("2d", 2, &ms));
    CHECK(!rsrv_parse_duration("5000000", 7, &ms)); /* seconds over 32-bit ms */
    CHECK(rsrv_parse_bool("on", 2, &v) && v);
    CHECK(rsrv_parse_bool("0", 1, &v) && !v);
    CHECK(!rsrv_parse_bool("True", 4, &v));
    CHECK(rsrv_parse_listen("0.0.0.0:9000", 12, host, sizeof host, &port) && port == 9000 && !strcmp(host, "0.0.0.0"));
    CHECK(rsrv_parse_listen("[::1]:0", 7, host, sizeof host, &port) && port == 0 && !strcmp(host, "::1"));
    CHECK(rsrv_parse_listen(":81", 3, host, sizeof host, &port) && port == 81 && !strcmp(host, "127.0.0.1"));
    CHECK(rsrv_parse_listen("8081", 4, host, sizeof host, &port) && port == 8081);
    CHECK(!rsrv_parse_listen("", 0, host, sizeof host, &port));
    CHECK(!rsrv_parse_listen("[::1]", 5, host, sizeof host, &port));
}

static void test_config_split(void) {
    const char *argv[4];
    char buf[64], small[4];
    CHECK_EQ_INT(rsrv_split("", buf, sizeof buf, argv, 4), 0);
    CHECK(argv[0] == NULL);
    CHECK_EQ_INT(rsrv_split("  a  'b c'  ", buf, sizeof buf, argv, 4), 2);
    CHECK_EQ_STR(argv[1], "b c");
    CHECK_EQ_INT(rsrv_split("\"a\\\"b\\n\" ''", buf, sizeof buf, argv, 4), 2);
    CHECK_EQ_STR(argv[0], "a\"b\\n");
    CHECK_EQ_STR(argv[1], "");
    CHECK_EQ_INT(rsrv_split("a b c d", buf, sizeof buf, argv, 4), -1); /* 3 words + NULL fit */
    CHECK_EQ_INT(rsrv_split("abcdef", small, sizeof small, argv, 4), -1);
    CHECK_EQ_INT(rsrv_split("a\\", buf, sizeof buf, argv, 4), -1);
    CHECK_EQ_INT(rsrv_split("'a", buf, sizeof buf, argv, 4), -1);
}

static void test_config_flags(void) {
    char err[RSRV_ERR_MAX];
    rsrv_opts o;
    char *ok[] = {"rsd-serve", "--listen", "127.0.0.1:0", "--max-models", "3", "--llama-server", "/bin/sim",
                  "--args", "--runtime server", "--model", "a=/m/a.gguf", "--ctx", "2048", "--pinned",
                  "--aliases", "x,y", "--command", "b=srv --port {port}", "--ttl", "10", "--verbose", "--config",
                  "f.ini"};
    char *bad1[] = {"rsd-serve", "--ctx", "5"};
    char *bad2[] = {"rsd-serve", "--model", "a"};
    char *bad3[] = {"rsd-serve", "--frobnicate", "1"};
    char *bad4[] = {"rsd-serve", "--max-models", "99"};
    char *bad5[] = {"rsd-serve", "--listen"};
    rsrv_config_init(&g_cfg);
    memset(&o, 0, sizeof o);
    REQUIRE(rsrv_parse_args(&g_cfg, &o, (int)(sizeof ok / sizeof ok[0]), ok, err, sizeof err) == 0);
    CHECK_EQ_INT(g_cfg.max_models, 3);
    CHECK_EQ_INT(g_cfg.listen_port, 0);
    CHECK_EQ_STR(g_cfg.llama_server, "/bin/sim");
    CHECK_EQ_STR(g_cfg.args, "--runtime server");
    REQUIRE(g_cfg.nmodels == 2);
    CHECK_EQ_INT(g_cfg.models[0].ctx, 2048);
    CHECK(g_cfg.models[0].pinned);
    CHECK_EQ_INT(rsrv_find(&g_cfg, "y", 1), 0);
    CHECK_EQ_STR(g_cfg.models[1].command, "srv --port {port}");
    CHECK_EQ_INT(g_cfg.models[1].ttl_ms, 10000);
    CHECK(o.verbose);
    CHECK_EQ_STR(o.config_path, "f.ini");
    rsrv_config_init(&g_cfg);
    CHECK_EQ_INT(rsrv_parse_args(&g_cfg, &o, 3, bad1, err, sizeof err), -1);
    CHECK_EQ_STR(err, "--ctx: comes after --model or --command");
    CHECK_EQ_INT(rsrv_parse_args(&g_cfg, &o, 3, bad2, err, sizeof err), -1);
    CHECK_EQ_STR(err, "--model: expected ID=PATH");
    CHECK_EQ_INT(rsrv_parse_args(&g_cfg, &o, 3, bad3, err, sizeof err), -1);
    CHECK_EQ_STR(err, "--frobnicate: unknown flag (see --help)");
    CHECK_EQ_INT(rsrv_parse_args(&g_cfg, &o, 3, bad4, err, sizeof err), -1);
    CHECK(strstr(err, "--max-models: max_models must be") == err);
    CHECK_EQ_INT(rsrv_parse_args(&g_cfg, &o, 2, bad5, err, sizeof err), -1);
}

static void test_body_model(void) {
    char out[16];
    size_t n = 99;
    const char *b1 = "{\"messages\":[{\"model\":\"no\",\"x\":\"}\"}],\"model\" : \"chat\\u002d8b\",\"stream\":true}";
    CHECK_EQ_INT(rsrv_body_model(b1, strlen(b1), out, sizeof out, &n), 1);
    CHECK_EQ_STR(out, "chat-8b");
    CHECK_EQ_INT(n, 7);
    CHECK_EQ_INT(rsrv_body_model("{\"prompt\":\"model\"}", 18, out, sizeof out, &n), 0);
    CHECK_EQ_INT(rsrv_body_model("{\"model\":7}", 11, out, sizeof out, &n), 0);
    CHECK_EQ_INT(rsrv_body_model("[1]", 3, out, sizeof out, &n), -1);
    CHECK_EQ_INT(rsrv_body_model("", 0, out, sizeof out, &n), -1);
    CHECK_EQ_INT(rsrv_body_model("{\"model\":\"", 10, out, sizeof out, &n), -1);
    CHECK_EQ_INT(rsrv_body_model("{\"model\":\"0123456789abcdefgh\"}", 30, out, sizeof out, &n), -2);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    RUN(test_config_full);
    RUN(test_config_defaults);
    RUN(test_config_errors);
    RUN(test_config_values);
    RUN(test_config_split);
    RUN(test_config_flags);
    RUN(test_body_model);
    return RSD_TEST_END();
}
