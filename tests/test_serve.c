/* test_serve.c -- rsd-serve: its configuration parser (apps/rsd-serve/rsd_serve.h, pure) and
   the program itself (build/bin/rsd-serve) with rsd-sim llama-server children
   (build/bin/rsd-sim --runtime server as the llama_server binary). The program
   prints "rsd-serve: listening on http://127.0.0.1:PORT" first on stdout; the tests
   read that line from a pipe and then talk HTTP to it. Nothing sleeps: waits are
   blocking reads on pipes and sockets, waitpid, or bounded polls of GET /status. */
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
#include <limits.h>
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
#define ENSURE_BIN "build/bin/rsd-ensure"

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
        "max_models = 2 # two at a time\n"
        "vram_budget = 24G\n"
        "llama_server = /opt/llama/llama-server\n"
        "args = --runtime server --load-ms 20\n"
        "start_timeout = 30\n"
        "stop_grace = 500ms\n"
        "\n"
        "[model chat-8b]  # the default\n"
        "model = /models/chat#8b.gguf\n"
        "args = --jinja -fa on\n"
        "ctx = 8192\n"
        "parallel = 4\n"
        "ngl = 99\t# all layers\n"
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
    CHECK_EQ_STR(g_cfg.models[0].model, "/models/chat#8b.gguf");
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
    /* '#' right after '=' is a value, and the writer keeps it one (fuzz regression) */
    REQUIRE(parse("[model a]\nmodel =#weird.gguf # a comment\n", err, sizeof err) == 0);
    CHECK_EQ_STR(g_cfg.models[0].model, "#weird.gguf");
    {
        int n = rsrv_write_ini(&g_cfg, g_ini, sizeof g_ini);
        REQUIRE(n > 0);
        rsrv_config_init(&g_cfg2);
        CHECK_EQ_INT(rsrv_parse_ini(&g_cfg2, g_ini, (size_t)n, "rt", err, sizeof err), 0);
        CHECK(rsrv_config_equal(&g_cfg, &g_cfg2));
    }
    /* a kv cache key without kv_cache_dir does nothing: not written, and no difference
       (fuzz regression: the round trip lost kv_cache_bytes, and the two compared unequal) */
    REQUIRE(parse("kv_cache_bytes = 150\nkv_save_timeout = 3s\n", err, sizeof err) == 0);
    {
        int n = rsrv_write_ini(&g_cfg, g_ini, sizeof g_ini);
        REQUIRE(n > 0);
        CHECK(strstr(g_ini, "kv_cache_bytes") == NULL);
        rsrv_config_init(&g_cfg2);
        CHECK_EQ_INT(rsrv_parse_ini(&g_cfg2, g_ini, (size_t)n, "rt", err, sizeof err), 0);
        CHECK(rsrv_config_equal(&g_cfg, &g_cfg2));
        snprintf(g_cfg.kv_cache_dir, sizeof g_cfg.kv_cache_dir, "/tmp/kv");
        CHECK(!rsrv_config_equal(&g_cfg, &g_cfg2)); /* with a cache, they differ */
        snprintf(g_cfg2.kv_cache_dir, sizeof g_cfg2.kv_cache_dir, "/tmp/kv");
        CHECK(!rsrv_config_equal(&g_cfg, &g_cfg2)); /* 150 bytes against the default */
    }
    CHECK_EQ_INT(parse("[model a#b]\nmodel = x\n", err, sizeof err), -1);
}

/* The example configuration (rsd-serve --example-config, installed as serve.ini.example):
   it reads back as the default configuration with its one model, names every key, and with
   its commented keys uncommented it still parses and sets every key. */
static void test_config_example(void) {
    char err[RSRV_ERR_MAX] = "", *p, *q;
    const char *model_part;
    size_t k;
    int n = rsrv_write_example(&g_cfg2, "9.9.9", g_ini, sizeof g_ini);
    REQUIRE(n > 0);
    CHECK(strstr(g_ini, "# rsd-serve 9.9.9: every configuration key with its default") == g_ini);
    REQUIRE(parse("[model example]\nmodel = /models/example.gguf\n", err, sizeof err) == 0);
    rsrv_config_init(&g_cfg2);
    CHECK_EQ_INT(rsrv_parse_ini(&g_cfg2, g_ini, (size_t)n, "example", err, sizeof err), 0);
    CHECK(rsrv_config_equal(&g_cfg, &g_cfg2));
    model_part = strstr(g_ini, "\n[model example]\n");
    REQUIRE(model_part != NULL);
    for (k = 0; k < sizeof rsrv_global_keys / sizeof rsrv_global_keys[0]; k++) {
        char a[64], b[64];
        const char *at, *bt;
        snprintf(a, sizeof a, "\n%s = ", rsrv_global_keys[k].name);
        snprintf(b, sizeof b, "\n# %s = ", rsrv_global_keys[k].name);
        at = strstr(g_ini, a);
        bt = strstr(g_ini, b);
        if (!((at && at < model_part) || (bt && bt < model_part))) printf("  global key %s missing\n", rsrv_global_keys[k].name);
        CHECK((at && at < model_part) || (bt && bt < model_part));
    }
    for (k = 0; k < sizeof rsrv_model_keys / sizeof rsrv_model_keys[0]; k++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "\n%s = ", rsrv_model_keys[k].name);
        snprintf(b, sizeof b, "\n# %s = ", rsrv_model_keys[k].name);
        if (!strstr(model_part, a) && !strstr(model_part, b)) printf("  model key %s missing\n", rsrv_model_keys[k].name);
        CHECK(strstr(model_part, a) || strstr(model_part, b));
    }
    /* uncomment the "# key = example" lines (help lines have no " = " after one word) */
    for (p = g_ini; (p = strstr(p, "\n# ")) != NULL; p++) {
        for (q = p + 3; (*q >= 'a' && *q <= 'z') || *q == '_'; q++) {}
        if (q > p + 3 && !strncmp(q, " = ", 3)) memmove(p + 1, p + 3, strlen(p + 3) + 1);
    }
    rsrv_config_init(&g_cfg2);
    CHECK_EQ_INT(rsrv_parse_ini(&g_cfg2, g_ini, strlen(g_ini), "example", err, sizeof err), 0);
    if (err[0]) printf("  %s\n", err);
    CHECK_EQ_INT(g_cfg2.seen, (1u << (sizeof rsrv_global_keys / sizeof rsrv_global_keys[0])) - 1);
    CHECK_EQ_INT(g_cfg2.models[0].seen, (1u << (sizeof rsrv_model_keys / sizeof rsrv_model_keys[0])) - 1);
    CHECK_EQ_INT(rsrv_write_example(&g_cfg2, "9.9.9", g_ini, 1024), -1);
}

/* Row k of a scope as a config text with value v: a global key before a model section, a
   model key in one (the model key itself is that section's path). */
static void table_text(char *out, size_t cap, bool model, const rsrv_key *k, const char *v) {
    if (!model) snprintf(out, cap, "%s = %s\n[model t]\nmodel = /m\n", k->name, v);
    else if (!strcmp(k->name, "model")) snprintf(out, cap, "[model t]\nmodel = %s\n", v);
    else snprintf(out, cap, "[model t]\nmodel = /m\n%s = %s\n", k->name, v);
}

/* A value just past row k's bound, and the bound as its message names it; false when the
   row has none. */
static bool table_past_bound(const rsrv_key *k, char *v, size_t vcap, char *bound, size_t bcap) {
    size_t o = 0;
    uint64_t i;
    switch (k->kind) {
    case RSRV_KIND_INT:
    case RSRV_KIND_QUEUE:
    case RSRV_KIND_NGL:
        snprintf(v, vcap, "%llu", (unsigned long long)k->hi + 1);
        snprintf(bound, bcap, "%llu", (unsigned long long)k->hi);
        return true;
    case RSRV_KIND_SIZE:
    case RSRV_KIND_BUDGET:
    case RSRV_KIND_MARGIN:
    case RSRV_KIND_SIZE_OFF: /* the pool's byte limit, in the largest exact unit */
        snprintf(v, vcap, "%lluT", (unsigned long long)(RSD_POOL_MAX_BYTES >> 40) + 1);
        rsrv_fmt_size(RSD_POOL_MAX_BYTES, bound, bcap);
        return true;
    case RSRV_KIND_DURATION:
        if (!k->lo) return false;
        snprintf(v, vcap, "%llums", (unsigned long long)k->lo - 1);
        rsrv_fmt_duration((uint32_t)k->lo, bound, bcap);
        return true;
    case RSRV_KIND_WORDS:
    case RSRV_KIND_PROGRAM:
    case RSRV_KIND_ENV:
    case RSRV_KIND_NAMES:
    case RSRV_KIND_ALIASES: /* hi + 1 entries */
        for (i = 0; i <= k->hi && o + 16 < vcap; i++)
            o += (size_t)snprintf(v + o, vcap - o, k->kind == RSRV_KIND_ENV ? "%sV%llu=1" :
                                  k->kind < RSRV_KIND_LISTEN ? "%sw%llu" : "%sn%llu",
                                  !i ? "" : k->kind < RSRV_KIND_ENV ? " " : ", ", (unsigned long long)i);
        snprintf(bound, bcap, "%llu", (unsigned long long)k->hi);
        return true;
    default: return false;
    }
}

/* The key tables: every row's default (or, without one, its example) parses, a default
   reads as the configuration without it and is what --check writes; every row with a bound
   refuses a value past it with a message that names the key and the bound; the example
   configuration lists every row under its help line. */
static void test_config_table(void) {
    static rsrv_config base, ex;
    static char text[8192], want[256];
    char err[RSRV_ERR_MAX], v[4096], bound[64];
    const char *model_part;
    int scope, k, n, bounded = 0;
    rsrv_config_init(&base);
    REQUIRE(rsrv_parse_ini(&base, "[model t]\nmodel = /m\n", 20, "base", err, sizeof err) == 0);
    n = rsrv_write_ini(&base, g_ini, sizeof g_ini);
    REQUIRE(n > 0);
    for (scope = 0; scope < 2; scope++) {
        const rsrv_key *keys = scope ? rsrv_model_keys : rsrv_global_keys;
        int nkeys = scope ? RSRV_NMODEL_KEYS : RSRV_NGLOBAL_KEYS;
        for (k = 0; k < nkeys; k++) {
            const rsrv_key *row = &keys[k];
            const char *at;
            CHECK(row->def || row->example); /* the example configuration shows a value */
            table_text(text, sizeof text, scope == 1, row, row->def ? row->def : row->example);
            if (parse(text, err, sizeof err) != 0) printf("  %s: %s\n", row->name, err);
            CHECK_EQ_INT(parse(text, err, sizeof err), 0);
            if (row->def) {
                if (!rsrv_config_equal(&g_cfg, &base)) printf("  %s = %s is not the default\n", row->name, row->def);
                CHECK(rsrv_config_equal(&g_cfg, &base));
                snprintf(want, sizeof want, "\n%s = %s", row->name, row->def);
                at = strstr(g_ini, want);
                if (rsrv_key_shown(&base, scope ? &base.models[0] : NULL, row)) {
                    if (!at) printf("  --check does not write %s = %s\n", row->name, row->def);
                    CHECK(at && (at[strlen(want)] == '\n' || at[strlen(want)] == ' '));
                }
            }
            if (table_past_bound(row, v, sizeof v, bound, sizeof bound)) {
                bounded++;
                table_text(text, sizeof text, scope == 1, row, v);
                CHECK_EQ_INT(parse(text, err, sizeof err), -1);
                if (!strstr(err, row->name) || !strstr(err, bound))
                    printf("  %s = %.40s: \"%s\" names no %s\n", row->name, v, err, bound);
                CHECK(strstr(err, row->name) != NULL && strstr(err, bound) != NULL);
            }
        }
    }
    CHECK(bounded >= 20);
    /* every row's flag sets it: with the row's example (or default) as its value, a BOOL's
       flag alone to true */
    for (scope = 0; scope < 2; scope++) {
        const rsrv_key *keys = scope ? rsrv_model_keys : rsrv_global_keys;
        int nkeys = scope ? RSRV_NMODEL_KEYS : RSRV_NGLOBAL_KEYS;
        for (k = 0; k < nkeys; k++) {
            char *argv[] = {"rsd-serve", "--model", "t=/m", NULL, NULL, NULL};
            const rsrv_key *row = &keys[k];
            rsrv_opts o;
            if (!row->flag) continue;
            argv[3] = (char *)row->flag;
            argv[4] = (char *)(row->example ? row->example : row->def);
            memset(&o, 0, sizeof o);
            rsrv_config_init(&g_cfg);
            CHECK_EQ_INT(rsrv_parse_args(&g_cfg, &o, row->kind == RSRV_KIND_BOOL ? 4 : 5, argv, err, sizeof err), 0);
            if (row->kind == RSRV_KIND_BOOL) CHECK(rsrv_field_get(rsrv_cfield(&g_cfg, &g_cfg.models[0], row), row->size));
            else if (row->example) CHECK(!rsrv_key_equal(&g_cfg, scope ? &g_cfg.models[0] : NULL, &base,
                                                        scope ? &base.models[0] : NULL, row));
        }
    }
    {
        char *argv[] = {"rsd-serve", "--model", "t=/m", "--session-erase", "--no-session-erase"};
        rsrv_opts o;
        memset(&o, 0, sizeof o);
        rsrv_config_init(&g_cfg);
        CHECK_EQ_INT(rsrv_parse_args(&g_cfg, &o, 5, argv, err, sizeof err), 0);
        CHECK(!g_cfg.models[0].session_erase);
        CHECK_EQ_INT(rsrv_parse_args(&g_cfg, &o, 2, argv + 3, err, sizeof err), -1); /* argv[1]: no model yet */
        CHECK_EQ_STR(err, "--no-session-erase: comes after --model or --command");
    }
    /* the example: every row, its help line right above it */
    n = rsrv_write_example(&ex, "9.9.9", g_ini, sizeof g_ini);
    REQUIRE(n > 0);
    model_part = strstr(g_ini, "\n[model example]\n");
    REQUIRE(model_part != NULL);
    for (scope = 0; scope < 2; scope++) {
        const rsrv_key *keys = scope ? rsrv_model_keys : rsrv_global_keys;
        int nkeys = scope ? RSRV_NMODEL_KEYS : RSRV_NGLOBAL_KEYS;
        for (k = 0; k < nkeys; k++) {
            const char *a, *b;
            snprintf(text, sizeof text, "\n# %s\n%s = ", keys[k].help, keys[k].name);
            snprintf(v, sizeof v, "\n# %s\n# %s = ", keys[k].help, keys[k].name);
            a = strstr(scope ? model_part : g_ini, text);
            b = strstr(scope ? model_part : g_ini, v);
            if (!scope && a > model_part) a = NULL;
            if (!scope && b > model_part) b = NULL;
            if (!a && !b) printf("  the example lacks %s\n", keys[k].name);
            CHECK(a || b);
        }
    }
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
        {"listen = local!host:80\n", "serve.ini:1: listen: bad address 'local!host:80'"},
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
    /* an unknown key lists every key of its section, from the key tables */
    CHECK_EQ_INT(parse("port = 8080\n", err, sizeof err), -1);
    CHECK(strstr(err, "(max_models, vram_budget, ") && strstr(err, ", start_backoff)"));
    CHECK_EQ_INT(parse("[model a]\nmodel = x\nsize = 3G\n", err, sizeof err), -1);
    CHECK(strstr(err, "(model, command, ") && strstr(err, ", session_erase)"));
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
    CHECK(rsrv_parse_size("1.5G", 4, &b) && b == (uint64_t)3 << 29); /* fractions: apps/rsd_app.h */
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
    /* send_timeout: the flag, the key, the write-back */
    {
        char *st[] = {"rsd-serve", "--send-timeout", "45", "--model", "a=/m/a.gguf"};
        rsrv_config_init(&g_cfg);
        CHECK_EQ_INT(g_cfg.send_timeout_ms, 0);
        REQUIRE(rsrv_parse_args(&g_cfg, &o, 5, st, err, sizeof err) == 0);
        CHECK_EQ_INT(g_cfg.send_timeout_ms, 45000);
        REQUIRE(parse("send_timeout = 250ms\n[model a]\nmodel = /m\n", err, sizeof err) == 0);
        CHECK_EQ_INT(g_cfg.send_timeout_ms, 250);
        REQUIRE(rsrv_write_ini(&g_cfg, g_ini, sizeof g_ini) > 0);
        CHECK(strstr(g_ini, "send_timeout = 250ms\n") != NULL);
        CHECK_EQ_INT(parse("send_timeout = soon\n", err, sizeof err), -1);
        CHECK(strstr(err, "send_timeout: bad duration 'soon'") != NULL);
    }
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
    /* a duplicate "model": the last one counts, as in llama.cpp */
    {
        const char *d1 = "{\"model\":\"first\",\"messages\":[],\"model\":\"second\"}";
        const char *d2 = "{\"model\":\"first\",\"model\":{\"x\":1}}";
        const char *d3 = "{\"model\":\"0123456789abcdefgh\",\"model\":\"ok\"}";
        const char *d4 = "{\"model\":\"first\",\"model\":\"second\"";
        CHECK_EQ_INT(rsrv_body_model(d1, strlen(d1), out, sizeof out, &n), 1);
        CHECK_EQ_STR(out, "second");
        CHECK_EQ_INT(n, 6);
        CHECK_EQ_INT(rsrv_body_model(d2, strlen(d2), out, sizeof out, &n), 0);
        CHECK_EQ_STR(out, "");
        CHECK_EQ_INT(rsrv_body_model(d3, strlen(d3), out, sizeof out, &n), 1);
        CHECK_EQ_STR(out, "ok");
        CHECK_EQ_INT(rsrv_body_model(d4, strlen(d4), out, sizeof out, &n), -1); /* unterminated */
    }
}

/* ---- the program -------------------------------------------------------------------- */
#include "serve_harness.h"

static const char *g_sim_args = "--runtime server --load-ms 20 --token-ms 40 --gen-ms 5";

/* The models ("@/x.gguf" = <dir>/m/x.gguf, made empty) at path, g_sim_args for rsd-sim. */
static void write_config(const char *path, int max_models, const char *models) {
    write_sim_ini(path, g_sim_args, max_models, "", models);
}

/* The main scenario: three simulated models, at most two resident. */
static void test_serve_pool(void) {
    serve_proc s;
    char path[256], state[32], out[4096];
    const char *args[] = {"--config", path, NULL};
    int fd, n, got, reads_before_done = 0;
    bool done = false;
    char buf[8192];
    make_dir();
    snprintf(path, sizeof path, "%s/pool.ini", g_dir);
    write_config(path, 2,
                 "[model alpha]\nmodel = @/alpha.gguf\naliases = a\n"
                 "[model beta]\nmodel = @/beta.gguf\nctx = 4096\nargs = --token-ms 1000\n"
                 "[model gamma]\nmodel = @/gamma.gguf\nparallel = 2\nargs = --token-ms 200\n");
    REQUIRE(serve_start(&s, args) == 0);

    /* /v1/models lists the configuration, router style */
    CHECK_EQ_INT(http(&s, "GET", "/v1/models", NULL), 200);
    CHECK(strstr(g_body, "\"id\":\"alpha\"") && strstr(g_body, "\"id\":\"beta\"") && strstr(g_body, "\"id\":\"gamma\""));
    CHECK(strstr(g_body, "\"aliases\":[\"a\"]") != NULL);
    CHECK(strstr(g_body, "\"status\":{\"value\":\"unloaded\"") != NULL);
    CHECK(strstr(g_body, "\"--ctx-size\"") || strstr(g_body, "\"-c\",\"4096\""));
    CHECK_EQ_INT(http(&s, "GET", "/props", NULL), 200);
    CHECK(strstr(g_body, "\"role\":\"router\"") && strstr(g_body, "\"max_instances\":2"));
    CHECK_EQ_INT(http(&s, "GET", "/health", NULL), 200);
    CHECK_EQ_INT(http(&s, "GET", "/nope", NULL), 404);
    CHECK(strstr(g_body, "not_found_error") != NULL);

    /* unknown model: OpenAI-style 404; no model: 400 */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("delta", false)), 404);
    CHECK(strstr(g_body, "\"code\":\"model_not_found\"") && strstr(g_body, "delta"));
    /* a name with a \u0000 names no model (not "alpha"), and the message shows all of it */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", "{\"model\":\"alpha\\u0000x\",\"messages\":[]}"), 404);
    CHECK(strstr(g_body, "The model 'alpha\\\\x00x' does not exist") != NULL);
    CHECK_EQ_INT(http(&s, "GET", "/v1/models/alpha%00x", NULL), 404);
    CHECK(strstr(g_body, "The model 'alpha\\\\x00x' does not exist") != NULL);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", "{\"messages\":[]}"), 400);

    /* one chat each (the first by alias): the third evicts the least recently used */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    CHECK(strstr(g_body, "simulated") != NULL);
    CHECK_EQ_INT(http(&s, "POST", "/v1/completions", "{\"model\":\"beta\",\"prompt\":\"x\"}"), 200);
    CHECK_EQ_INT(status_field(&s, NULL, "evictions"), 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("gamma", false)), 200);
    CHECK_EQ_INT(status_field(&s, NULL, "evictions"), 1);
    CHECK(wait_field(&s, "alpha", "pid", 0));
    status_state(&s, "beta", state, sizeof state);
    CHECK_EQ_STR(state, "ready");
    CHECK(status_field(&s, "gamma", "pid") > 0);
    CHECK(log_has(&s, "alpha: stopping pid"));
    CHECK(log_has(&s, "(evict)"));
    CHECK_EQ_INT(http(&s, "GET", "/models", NULL), 200);
    CHECK(strstr(g_body, "\"id\":\"gamma\",\"aliases\":[],\"tags\":[],\"object\":\"model\"") != NULL);

    /* streaming: chunks arrive one by one, before the end */
    fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    REQUIRE(raw_post(fd, "/v1/chat/completions", chat("gamma", true)) == 0);
    n = 0;
    while (!done && (got = raw_read(fd, buf + n, sizeof buf - 1 - (size_t)n)) > 0) {
        n += got;
        buf[n] = 0;
        done = strstr(buf, "[DONE]") != NULL;
        if (!done && strstr(buf, "data: ")) reads_before_done++;
    }
    close(fd);
    CHECK(done);
    CHECK(strstr(buf, "200") && strstr(buf, "text/event-stream"));
    /* buffered whole, the first data would arrive together with [DONE]; the stream is
       ~8 events 200 ms apart, so only a test starved for 1.5 s could see them at once */
    CHECK(reads_before_done >= 1);
    {
        const char *p = buf;
        int events = 0;
        while ((p = strstr(p, "data: ")) != NULL) { events++; p += 6; }
        CHECK(events >= 3);
    }

    /* a client that goes away mid-stream gives its place back (beta streams a chunk a
       second: still streaming when /status is asked, however slow the machine) */
    fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    REQUIRE(raw_post(fd, "/v1/chat/completions", chat("beta", true)) == 0);
    got = raw_read(fd, buf, sizeof buf - 1);
    CHECK(got > 0);
    CHECK_EQ_INT(status_field(&s, "beta", "in_flight"), 1);
    close(fd);
    CHECK(wait_field(&s, "beta", "in_flight", 0));
    CHECK(status_field(&s, NULL, "cancels") >= 1);

    /* a router client: rsd-ensure loads alpha through /models/load */
    {
        const char *eargv[] = {ENSURE_BIN, "--url", s.url, "--model", "alpha", "--no-state", NULL};
        int ex = run_prog(eargv, out, sizeof out);
        if (ex != 0) printf("  rsd-ensure: %s\n", out);
        CHECK_EQ_INT(ex, 0);
        status_state(&s, "alpha", state, sizeof state);
        CHECK_EQ_STR(state, "ready");
    }
    /* management: unload, then load by alias */
    CHECK_EQ_INT(http(&s, "POST", "/models/unload", "{\"model\":\"alpha\"}"), 200);
    CHECK(wait_field(&s, "alpha", "pid", 0));
    CHECK_EQ_INT(http(&s, "POST", "/models/unload", "{\"model\":\"alpha\"}"), 400);
    CHECK_EQ_INT(http(&s, "POST", "/models/unload", "{\"model\":\"zeta\"}"), 400);
    CHECK_EQ_INT(http(&s, "POST", "/models/load", "{\"model\":\"zeta\"}"), 404);
    CHECK_EQ_INT(http(&s, "POST", "/models/load", "{\"model\":\"a\"}"), 200);
    CHECK_EQ_INT(http(&s, "POST", "/models/load", "{\"model\":\"alpha\"}"), 400); /* already running */

    CHECK_EQ_INT(serve_stop(&s), 0);
    CHECK(log_has(&s, "stopped"));
}

/* rsd-serve's RSS from /proc/PID/status: field "VmRSS:" or "VmHWM:" (peak) in KiB. */
static long proc_kib(pid_t pid, const char *field) {
    char path[64], line[256];
    long v = -1;
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, strlen(field))) { v = atol(line + strlen(field)); break; }
    fclose(f);
    return v;
}

/* The big answer of rsd-sim --big-body checked byte by byte as it arrives. */
typedef struct big_check {
    uint64_t off, records, bad_at, rec_k;
    char rec[24];        /* the current record's text */
    bool bad;
} big_check;

static const char big_prefix[] = "{\"id\":\"chatcmpl-big\",\"object\":\"chat.completion\",\"created\":0,"
                                 "\"model\":\"big\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
                                 "\"assistant\",\"content\":\"";
static const char big_suffix[] = "\"},\"finish_reason\":\"length\"}]}";

static void big_feed(big_check *b, const char *p, size_t n) {
    const uint64_t plen = sizeof big_prefix - 1, rend = plen + b->records * 16;
    size_t i;
    for (i = 0; i < n && !b->bad; i++, b->off++) {
        char want;
        if (b->off < plen) want = big_prefix[b->off];
        else if (b->off >= rend) want = b->off - rend < sizeof big_suffix - 1 ? big_suffix[b->off - rend] : 0;
        else {
            uint64_t k = (b->off - plen) / 16;
            if (k != b->rec_k || !b->rec[0]) {
                snprintf(b->rec, sizeof b->rec, "%015llu ", (unsigned long long)k);
                b->rec_k = k;
            }
            want = b->rec[(b->off - plen) % 16];
        }
        if (p[i] != want) { b->bad = true; b->bad_at = b->off; }
    }
}

/* A slow client (4 KiB receive buffer, 1 KiB reads, a /status round trip every 256 KiB)
   fetches a 16 MiB non-streamed answer: every byte arrives intact while rsd-serve's
   memory stays bounded (the upstream read is paused while the client is behind, instead
   of rsd-serve buffering the difference). */
static void test_serve_slow_client(void) {
    enum { BIG = 16 << 20 };
    serve_proc s;
    char path[256], head[8192], buf[1024], st[32];
    const char *args[] = {"--config", path, NULL};
    rsd_http_response_head rh;
    big_check bc;
    size_t hlen = 0, consumed = 0;
    uint64_t body = 0, total, next_look = 256 << 10;
    long hwm0, rss0, rss_max = 0, hwm1;
    int fd, rcv = 4096, res = RSD_PENDING, one = 1;
    struct sockaddr_in a;
    make_dir();
    snprintf(path, sizeof path, "%s/slow.ini", g_dir);
    write_config(path, 1, "[model big]\nmodel = @/big.gguf\nargs = --big-body 16777216\n");
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/models/load", "{\"model\":\"big\"}"), 200);
    (void)wait_state(&s, "big", "ready");
    status_state(&s, "big", st, sizeof st);
    REQUIRE(!strcmp(st, "ready"));
    /* a small answer first, so the baseline includes the proxy path's buffers */
    CHECK_EQ_INT(http(&s, "POST", "/v1/embeddings", "{\"model\":\"big\",\"input\":\"x\"}"), 200);
    rss0 = proc_kib(s.pid, "VmRSS:");
    hwm0 = proc_kib(s.pid, "VmHWM:");
    REQUIRE(rss0 > 0 && hwm0 > 0);

    fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv); /* before connect: a small window */
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)s.port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    REQUIRE(raw_post(fd, "/v1/chat/completions", chat("big", false)) == 0);
    while (res == RSD_PENDING && hlen < sizeof head) {
        int got = raw_read(fd, head + hlen, 1);
        if (got <= 0) break;
        hlen += (size_t)got;
        res = rsd_http_parse_response(head, hlen, hlen - 1, &rh, &consumed);
    }
    REQUIRE(res == RSD_OK);
    CHECK_EQ_INT(rh.status, 200);
    REQUIRE(rh.framing.content_length > BIG);
    total = (uint64_t)rh.framing.content_length;
    memset(&bc, 0, sizeof bc);
    bc.records = BIG / 16;
    CHECK_EQ_INT(total, sizeof big_prefix - 1 + (uint64_t)BIG + sizeof big_suffix - 1);
    while (body < total) {
        int got = raw_read(fd, buf, sizeof buf); /* poll, then one small read */
        if (got <= 0) break;
        big_feed(&bc, buf, (size_t)got);
        body += (uint64_t)got;
        if (body >= next_look) { /* the client is busy elsewhere for a round trip */
            long rss = proc_kib(s.pid, "VmRSS:");
            if (rss > rss_max) rss_max = rss;
            CHECK_EQ_INT(http(&s, "GET", "/health", NULL), 200);
            next_look += 256 << 10;
        }
    }
    close(fd);
    CHECK_EQ_INT(body, total);
    CHECK(!bc.bad);
    if (bc.bad) printf("  first wrong byte at %llu\n", (unsigned long long)bc.bad_at);
    hwm1 = proc_kib(s.pid, "VmHWM:");
    printf("  slow client: %llu bytes; rsd-serve VmRSS %ld KiB before, max %ld KiB during; "
           "VmHWM %ld -> %ld KiB (+%ld)\n", (unsigned long long)total, rss0, rss_max, hwm0, hwm1, hwm1 - hwm0);
    /* bounded: one 64 KiB stash, the 256 KiB send buffer, the 64 KiB upstream slot and
       some slack; the answer itself is 16 MiB */
    CHECK(rss_max - rss0 < 2048);
    CHECK(hwm1 - hwm0 < 2048);
    CHECK(wait_field(&s, "big", "in_flight", 0));
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* A connection with a tiny receive window that sends a request and then reads nothing. */
static int stalled_post(int port, const char *body) {
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), rcv = 4096;
    if (fd < 0) return -1;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv); /* before connect */
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 || raw_post(fd, "/v1/chat/completions", body) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads fd to its end (bounded: 20 s without a byte); the bytes read, -1 on a stall. */
static long drain_to_eof(int fd) {
    char buf[65536];
    long total = 0;
    for (;;) {
        int got = raw_read(fd, buf, sizeof buf);
        if (got == 0) return total;
        if (got < 0) {
            struct pollfd p;
            p.fd = fd;
            p.events = POLLIN;
            p.revents = 0;
            if (poll(&p, 1, 10000) <= 0) return -1;
            got = (int)read(fd, buf, sizeof buf);
            if (got <= 0) return got == 0 ? total : -1;
        }
        total += got;
    }
}

/* A client that stops reading its answer cannot hold its model busy: after
   send_timeout without progress it is cut and its request cancelled; when another
   model waits past max_wait, a stalled client of the model that must make room is cut
   within a second, so the waiting request is served (before: no answer for an hour,
   the upstream timeout). */
static void test_serve_stalled_client(void) {
    serve_proc s;
    char path[256];
    const char *args[] = {"--config", path, "--verbose", NULL};
    int fd;
    long got;
    uint64_t t0;
    make_dir();
    snprintf(path, sizeof path, "%s/stall.ini", g_dir);
    /* 1: two models, one resident; alpha's answer is 16 MiB and its client reads nothing */
    write_config(path, 1,
                 "max_wait = 1\nsend_timeout = 1h\n"
                 "[model alpha]\nmodel = @/alpha.gguf\nargs = --big-body 16777216\n"
                 "[model beta]\nmodel = @/beta.gguf\n");
    REQUIRE(serve_start(&s, args) == 0);
    fd = stalled_post(s.port, chat("alpha", false));
    REQUIRE(fd >= 0);
    REQUIRE(wait_field(&s, "alpha", "in_flight", 1));
    t0 = rsd_now_ms();
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("beta", false)), 200);
    CHECK(strstr(g_body, "simulated") != NULL);
    CHECK(rsd_now_ms() - t0 < 20000);
    CHECK(log_has(&s, "alpha: the client read nothing for"));
    CHECK(log_has(&s, "while its model must make room; disconnected, request cancelled"));
    got = drain_to_eof(fd); /* what was buffered, then the end */
    CHECK(got >= 0 && got < 16777216);
    close(fd);
    CHECK_EQ_INT(status_field(&s, "alpha", "in_flight"), 0);
    CHECK(status_field(&s, NULL, "starve_drains") >= 1);
    CHECK_EQ_INT(serve_stop(&s), 0);

    /* 2: send_timeout alone, nobody waiting: the stalled request ends after it */
    write_config(path, 1,
                 "send_timeout = 500ms\n"
                 "[model alpha]\nmodel = @/alpha.gguf\nargs = --big-body 16777216\n");
    REQUIRE(serve_start(&s, args) == 0);
    fd = stalled_post(s.port, chat("alpha", false));
    REQUIRE(fd >= 0);
    REQUIRE(wait_field(&s, "alpha", "in_flight", 1));
    CHECK(wait_field(&s, "alpha", "in_flight", 0)); /* bounded: 5 s */
    CHECK(log_has(&s, "alpha: the client read nothing for"));
    CHECK(!log_has(&s, "must make room"));
    CHECK(status_field(&s, NULL, "cancels") >= 1);
    got = drain_to_eof(fd);
    CHECK(got >= 0 && got < 16777216);
    close(fd);
    CHECK_EQ_INT(http(&s, "POST", "/v1/embeddings", "{\"model\":\"alpha\",\"input\":\"x\"}"), 200);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* Later llama.cpp generations stream comment-only keep-alive frames (":" and a blank
   line, PR #25241; per request sse_ping_interval): rsd-serve passes each on as it comes,
   before the first data line and between data lines, not held for the next data. */
static void test_serve_keepalive_frames(void) {
    serve_proc s;
    char path[256], buf[16384];
    const char *args[] = {"--config", path, NULL};
    const char *saved = g_sim_args, *first_data, *done_at, *p;
    int fd, n = 0, got, ping_only_reads = 0;
    bool done = false;
    make_dir();
    snprintf(path, sizeof path, "%s/ping.ini", g_dir);
    g_sim_args = "--runtime server --router-gen later --load-ms 20 --token-ms 120 --gen-ms 5";
    write_config(path, 1, "[model k]\nmodel = @/k.gguf\n");
    g_sim_args = saved;
    REQUIRE(serve_start(&s, args) == 0);
    fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    REQUIRE(raw_post(fd, "/v1/chat/completions",
                     "{\"model\":\"k\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                     "\"stream\":true,\"sse_ping_interval\":0.03}") == 0);
    while (!done && (got = raw_read(fd, buf + n, sizeof buf - 1 - (size_t)n)) > 0) {
        char *piece = buf + n;
        n += got;
        buf[n] = 0;
        done = strstr(buf, "[DONE]") != NULL;
        if (!done && strstr(piece, ":\n\n") && !strstr(piece, "data: ")) ping_only_reads++;
    }
    close(fd);
    CHECK(done);
    first_data = strstr(buf, "data: ");
    done_at = strstr(buf, "[DONE]");
    REQUIRE(first_data && done_at);
    p = strstr(buf, ":\n\n");
    CHECK(p && p < first_data); /* the frame that opens the stream */
    p = strstr(first_data, ":\n\n");
    CHECK(p && p < done_at);    /* frames between data lines */
    /* ~4 frames between data lines 120 ms apart: held for the next data, none would
       arrive alone; only a test starved for 120 ms at every frame could miss them */
    CHECK(ping_only_reads >= 1);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* An upstream that hangs up fails only its request (502); the next request works. */
static void test_serve_upstream_hangup(void) {
    serve_proc s;
    char path[256], crash_url[96];
    const char *args[] = {"--config", path, NULL};
    int fd, got, port;
    char buf[4096];
    make_dir();
    snprintf(path, sizeof path, "%s/hangup.ini", g_dir);
    write_config(path, 2, "[model slow]\nmodel = @/slow.gguf\nargs = --gen-ms 60000\n"
                          "[model tok]\nmodel = @/tok.gguf\nargs = --token-ms 300\n"
                          "[model late]\nmodel = @/late.gguf\nargs = --load-ms 60000\n"
                          "[model broken]\nmodel = @/broken.gguf,fail=1\n");
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/models/load", "{\"model\":\"slow\"}"), 200);
    REQUIRE(wait_field(&s, "slow", "in_flight", 0));
    {
        char st[32];
        (void)wait_state(&s, "slow", "ready");
        status_state(&s, "slow", st, sizeof st);
        REQUIRE(!strcmp(st, "ready"));
    }
    port = (int)status_field(&s, "slow", "port");
    REQUIRE(port > 0);
    fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    REQUIRE(raw_post(fd, "/v1/chat/completions", chat("slow", false)) == 0);
    REQUIRE(wait_field(&s, "slow", "in_flight", 1));
    /* the child dies while the request is in flight */
    {
        serve_proc child;
        memset(&child, 0, sizeof child);
        snprintf(child.url, sizeof child.url, "http://127.0.0.1:%d", port);
        snprintf(crash_url, sizeof crash_url, "/_sim/crash");
        (void)http(&child, "POST", crash_url, "{\"model\":\"slow\",\"exit_code\":3}");
    }
    got = raw_read(fd, buf, sizeof buf - 1);
    REQUIRE(got > 0);
    buf[got] = 0;
    if (strstr(buf, "HTTP/1.1 502") != buf || !strstr(buf, "upstream 'slow'")) printf("  the answer: %.600s\n", buf);
    CHECK(strstr(buf, "HTTP/1.1 502") == buf);
    CHECK(strstr(buf, "upstream 'slow'") != NULL);
    close(fd);
    CHECK(wait_field(&s, "slow", "in_flight", 0));

    /* a child that dies mid-stream: the stream ends with an SSE error event (the OpenAI
       error object, code 502) and its proper end, not a cut socket */
    CHECK_EQ_INT(http(&s, "POST", "/models/load", "{\"model\":\"tok\"}"), 200);
    REQUIRE(wait_state(&s, "tok", "ready"));
    port = (int)status_field(&s, "tok", "port");
    REQUIRE(port > 0);
    fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    REQUIRE(raw_post(fd, "/v1/chat/completions", chat("tok", true)) == 0);
    {
        static char all[65536];
        size_t n = 0;
        serve_proc child;
        while (n < sizeof all - 1 && !strstr(all, "data: {")) { /* the first chunk */
            got = raw_read(fd, all + n, sizeof all - 1 - n);
            if (got <= 0) break;
            n += (size_t)got;
            all[n] = 0;
        }
        REQUIRE(strstr(all, "data: {") != NULL);
        memset(&child, 0, sizeof child);
        snprintf(child.url, sizeof child.url, "http://127.0.0.1:%d", port);
        (void)http(&child, "POST", "/_sim/crash", "{\"model\":\"tok\",\"exit_code\":3}");
        while (n < sizeof all - 1 && (got = raw_read(fd, all + n, sizeof all - 1 - n)) > 0) n += (size_t)got;
        all[n] = 0;
        CHECK(strstr(all, "HTTP/1.1 200") == all);
        CHECK(strstr(all, "event: error\ndata: {\"error\":{\"code\":502,\"message\":\"upstream 'tok'") != NULL);
        CHECK(strstr(all, "\"type\":\"server_error\"}}\n\n") != NULL);
        CHECK(strstr(all, "[DONE]") == NULL);
        CHECK(n >= 5 && !strcmp(all + n - 5, "0\r\n\r\n")); /* the chunked end: not cut */
        if (!strstr(all, "event: error")) printf("  stream: %s\n", all);
    }
    close(fd);
    CHECK(wait_field(&s, "tok", "in_flight", 0));

    /* a model whose process exits while loading fails its request with the output */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("broken", false)), 503);
    CHECK(strstr(g_body, "broken") && strstr(g_body, "exiting due to model loading error"));
    CHECK_EQ_INT(http(&s, "GET", "/v1/models", NULL), 200);
    CHECK(strstr(g_body, "\"failed\":true") != NULL);

    /* a client that goes away while its model loads leaves the queue */
    fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    REQUIRE(raw_post(fd, "/v1/chat/completions", chat("late", false)) == 0);
    CHECK(wait_field(&s, "late", "waiting", 1));
    close(fd);
    CHECK(wait_field(&s, "late", "waiting", 0));
    CHECK_EQ_INT(status_field(&s, "late", "in_flight"), 0);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* A child that closes idle keep-alive connections (as llama-server does after 5 s;
   here after 150 ms): requests after the idle time still go through, on a fresh
   connection, instead of failing 502 on the socket the child closed. The waits are the
   idle time itself, which is what is under test. */
static void test_serve_idle_upstream(void) {
    serve_proc s;
    char path[256];
    const char *args[] = {"--config", path, NULL};
    int i;
    make_dir();
    snprintf(path, sizeof path, "%s/idle.ini", g_dir);
    write_config(path, 1, "[model idle]\nmodel = @/idle.gguf\nargs = --idle-close-ms 150\n");
    REQUIRE(serve_start(&s, args) == 0);
    for (i = 0; i < 3; i++) {
        int st = http(&s, "POST", "/v1/chat/completions", chat("idle", false));
        if (st != 200) printf("  round %d: %d %s\n", i, st, g_body);
        CHECK_EQ_INT(st, 200);
        (void)poll(NULL, 0, 400); /* past the child's idle close */
    }
    CHECK_EQ_INT(status_field(&s, NULL, "spawns"), 1);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* A model that cannot start does not cost a healthy one: the request for it evicts the
   idle healthy model, fails 503 with the child's output, the healthy one is started
   again, and the next requests for the broken one are refused at once (503, not
   retried within start_backoff) without a second eviction; a missing model file is
   found before anything is stopped. */
static void test_serve_broken_keeps_healthy(void) {
    serve_proc s;
    char path[256], st[32];
    const char *args[] = {"--config", path, NULL};
    int i;
    make_dir();
    snprintf(path, sizeof path, "%s/broken.ini", g_dir);
    /* start_backoff 60 s: the refusals below come inside it however slow the machine */
    write_config(path, 1, "start_backoff = 60\n[model good]\nmodel = @/good.gguf\n"
                          "[model broken]\nmodel = @/broken.gguf,fail=1\n"
                          "[model gone]\nmodel = /nonexistent/gone.gguf\n");
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("good", false)), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("gone", false)), 503);
    CHECK(strstr(g_body, "cannot read model file /nonexistent/gone.gguf") != NULL);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("broken", false)), 503);
    CHECK(strstr(g_body, "exiting due to model loading error") != NULL);
    (void)wait_state(&s, "good", "ready"); /* good comes back by itself */
    status_state(&s, "good", st, sizeof st);
    CHECK_EQ_STR(st, "ready");
    for (i = 0; i < 2; i++) {
        CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("broken", false)), 503);
        CHECK(strstr(g_body, "not retried for") != NULL);
    }
    CHECK(status_field(&s, "broken", "retry_in_ms") > 30000); /* start_backoff, not the default 1 s */
    CHECK_EQ_INT(status_field(&s, NULL, "evictions"), 1);
    CHECK_EQ_INT(status_field(&s, NULL, "restores"), 1);
    CHECK_EQ_INT(status_field(&s, NULL, "backoffs"), 2);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("good", false)), 200);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* A pinned model is loaded at boot, listed as protected (tag pinned:true), and a
   router client that would need to evict it declines (W35); GETs with ?model= go to
   the model's own process. */
static void test_serve_pinned(void) {
    serve_proc s;
    char path[256], out[4096], st[32];
    const char *args[] = {"--config", path, NULL};
    make_dir();
    snprintf(path, sizeof path, "%s/pinned.ini", g_dir);
    write_config(path, 1,
                 "[model keeper]\nmodel = @/keeper.gguf\npinned = true\n"
                 "[model other]\nmodel = @/other.gguf\n");
    REQUIRE(serve_start(&s, args) == 0);
    (void)wait_state(&s, "keeper", "ready"); /* loaded with no request */
    status_state(&s, "keeper", st, sizeof st);
    CHECK_EQ_STR(st, "ready");
    CHECK_EQ_INT(http(&s, "GET", "/models", NULL), 200);
    CHECK(strstr(g_body, "\"tags\":[\"pinned:true\"]") != NULL);
    {
        const char *eargv[] = {ENSURE_BIN, "--url", s.url, "--model", "other", "--no-state", NULL};
        CHECK_EQ_INT(run_prog(eargv, out, sizeof out), 2); /* declined: the only resident is protected */
    }
    status_state(&s, "keeper", st, sizeof st);
    CHECK_EQ_STR(st, "ready");
    CHECK_EQ_INT(status_field(&s, NULL, "evictions"), 0);
    /* the router's own /props, and the child's through ?model= */
    CHECK_EQ_INT(http(&s, "GET", "/props", NULL), 200);
    CHECK(strstr(g_body, "\"role\":\"router\"") != NULL);
    CHECK_EQ_INT(http(&s, "GET", "/props?model=keeper", NULL), 200);
    CHECK(strstr(g_body, "\"role\"") == NULL && strstr(g_body, "total_slots") != NULL);
    CHECK_EQ_INT(http(&s, "GET", "/slots?model=nobody", NULL), 404);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* Waits (bounded, 20 s) for pid to exit; its status as listen_proc_stop gives it, -2 when
   it is still running, and whether a signal ended it. */
static int wait_exit(pid_t pid, int *sig) {
    int i, st = 0;
    *sig = 0;
    for (i = 0; i < 2000; i++) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            if (WIFSIGNALED(st)) *sig = WTERMSIG(st);
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        }
        if (r < 0 && errno != EINTR) return -1;
        (void)poll(NULL, 0, 10);
    }
    return -2;
}

/* A connect to 127.0.0.1:port succeeds? */
static bool port_open(int port) {
    int fd = raw_connect(port);
    if (fd < 0) return false;
    close(fd);
    return true;
}

/* A model run through a wrapper (command = /bin/sh -c "server ...; true": the shell
   stays the direct child) is stopped as a whole: the server, here one that ignores
   SIGTERM, gets SIGKILL at the end of stop_grace through its process group, and
   rsd-serve exits only once it is gone (before: it exited when the shell did and the
   server kept listening). With exec in the wrapper, the server dies even with a
   kill -9 of rsd-serve (PR_SET_PDEATHSIG reaches the direct child). */
static void test_serve_wrapper_children(void) {
    serve_proc s;
    char path[256], text[2048];
    const char *args[] = {"--config", path, NULL};
    int port, i;
    make_dir();
    snprintf(path, sizeof path, "%s/wrap.ini", g_dir);
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nmax_models = 2\nstop_grace = 300ms\n"
             "[model wrap]\ncommand = /bin/sh -c \"%s --runtime server --port {port} --load-ms 20 "
             "--ignore-sigterm -m /models/wrap.gguf --alias wrap; true\"\n"
             "[model direct]\ncommand = /bin/sh -c \"exec %s --runtime server --port {port} --load-ms 20 "
             "-m /models/direct.gguf --alias direct\"\n",
             SIM_BIN, SIM_BIN);
    write_file(path, text);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("wrap", false)), 200);
    port = (int)status_field(&s, "wrap", "port");
    REQUIRE(port > 0);
    CHECK(port_open(port));
    CHECK_EQ_INT(serve_stop(&s), 0);
    CHECK(!port_open(port)); /* the server behind the wrapper is gone too */
    if (port_open(port)) {   /* before the fix: still listening; end it */
        serve_proc child;
        memset(&child, 0, sizeof child);
        snprintf(child.url, sizeof child.url, "http://127.0.0.1:%d", port);
        (void)http(&child, "POST", "/_sim/crash", "{\"model\":\"wrap\",\"exit_code\":0}");
    }
    CHECK(log_has(&s, "wrap: exited"));

    /* exec in the wrapper: kill -9 of rsd-serve still takes the server with it */
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("direct", false)), 200);
    port = (int)status_field(&s, "direct", "port");
    REQUIRE(port > 0);
    CHECK(port_open(port));
    REQUIRE(kill(s.pid, SIGKILL) == 0);
    {
        int sig, code = wait_exit(s.pid, &sig);
        CHECK_EQ_INT(code, -1);
        CHECK_EQ_INT(sig, SIGKILL);
        s.pid = 0;
    }
    for (i = 0; i < 500 && port_open(port); i++) (void)poll(NULL, 0, 10);
    CHECK(!port_open(port));
}

/* A readiness probe that finds the port not yet bound is no error: the verbose log says
   "waiting for ID (port N) to listen", never HTTP_CONNECT_FAILED. */
static void test_serve_waiting_log(void) {
    serve_proc s;
    char path[256], text[2048];
    const char *args[] = {"--config", path, "--verbose", NULL};
    make_dir();
    snprintf(path, sizeof path, "%s/slow.ini", g_dir);
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nmax_models = 1\n"
             "[model slow]\ncommand = /bin/sh -c \"sleep 1; exec %s --runtime server --port {port} "
             "--load-ms 20 -m /models/slow.gguf --alias slow\"\n",
             SIM_BIN);
    write_file(path, text);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("slow", false)), 200);
    CHECK_EQ_INT(serve_stop(&s), 0);
    CHECK(log_has(&s, "[FLEET_WAITING] fleet: waiting for slow (port "));
    CHECK(!log_has(&s, "HTTP_CONNECT_FAILED"));
    CHECK(!log_has(&s, "connect failed"));
}

/* A process being stopped is asked nothing more, and a question it leaves unanswered
   logs no failure. rsd-serve asks a ready child for its GET /v1/models once the first
   request's answer has begun, 1 s after ready, or at once for a listing. Here the child
   is frozen (SIGSTOP) with a chat in flight, a listing sends the question, and the stop
   kills the child after stop_grace: no "GET /v1/models" failure is logged (before: it
   was a warning, or its retry's refused connect was; one sent after the stop began too). */
static void test_serve_stop_asks_nothing(void) {
    serve_proc s;
    char path[256], text[2048];
    const char *args[] = {"--config", path, "--verbose", NULL};
    int fd, fd2;
    int64_t pid;
    make_dir();
    snprintf(path, sizeof path, "%s/stopask.ini", g_dir);
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nmax_models = 1\nstop_grace = 300ms\n"
             "[model slowgen]\ncommand = %s --runtime server --port {port} --load-ms 20 --gen-ms 60000 "
             "-m /models/slowgen.gguf --alias slowgen\n",
             SIM_BIN);
    write_file(path, text);
    REQUIRE(serve_start(&s, args) == 0);
    fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    CHECK_EQ_INT(raw_post(fd, "/v1/chat/completions", chat("slowgen", false)), 0);
    CHECK(wait_state(&s, "slowgen", "ready")); /* its answer is a minute away */
    pid = status_field(&s, "slowgen", "pid");
    REQUIRE(pid > 0);
    REQUIRE(kill((pid_t)pid, SIGSTOP) == 0);
    fd2 = raw_connect(s.port);
    REQUIRE(fd2 >= 0);
    {
        static const char get[] = "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";
        CHECK(write(fd2, get, sizeof get - 1) == (ssize_t)(sizeof get - 1));
    }
    CHECK_EQ_INT(serve_stop(&s), 0);
    close(fd);
    close(fd2);
    CHECK(log_has(&s, "slowgen: exited"));
    CHECK(!log_has(&s, "GET /v1/models"));
}

/* Every line of the log is one of rsd-serve's own ("rsd-serve: ..."): a child's output
   quoted in a message cannot start a line of its own. */
static bool log_lines_own(const serve_proc *s) {
    static char buf[1 << 18];
    FILE *f = fopen(s->log_path, "rb");
    size_t n;
    char *p, *e;
    if (!f) return false;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    for (p = buf; *p; p = e + 1) {
        e = strchr(p, '\n');
        if (!e) return false; /* a line without its end */
        if (strncmp(p, "rsd-serve: ", 11) != 0) {
            printf("  log line not ours: %.*s\n", (int)(e - p), p);
            return false;
        }
    }
    return true;
}

/* Secrets in a model's command line (--api-key VALUE, --hf-token=VALUE, a URL's
   user:password@) never reach a client or the log: not in the listing's status.args,
   not in the 503 of a failed start (which quotes the command), not with --verbose. */
static void test_serve_secrets(void) {
    serve_proc s;
    char path[256];
    const char *args[] = {"--config", path, "--verbose", NULL};
    make_dir();
    snprintf(path, sizeof path, "%s/secrets.ini", g_dir);
    write_config(path, 1,
                 "[model alpha]\nmodel = @/alpha.gguf\nargs = --api-key sk-alpha-SECRET\n"
                 "[model broken]\nmodel = @/broken.gguf,fail=1\n"
                 "args = --hf-token=hf_BROKEN_SECRET --api-key sk-broken-SECRET -mu https://bob:pw-SECRET@example.org/m.gguf\n");
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "GET", "/v1/models", NULL), 200);
    CHECK(strstr(g_body, "SECRET") == NULL);
    CHECK(strstr(g_body, "\"--api-key\",\"***\"") != NULL);
    CHECK(strstr(g_body, "\"--hf-token=***\"") != NULL);
    CHECK(strstr(g_body, "\"https://***@example.org/m.gguf\"") != NULL);
    if (strstr(g_body, "SECRET")) printf("  listing: %.600s\n", g_body);
    /* rsd-serve sends the model its own --api-key, whatever the client sends */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("alpha", false)), 200);
    g_bearer = "some-other-key";
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("alpha", false)), 200);
    g_bearer = NULL;
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("broken", false)), 503);
    CHECK(strstr(g_body, "unknown option '--hf-token=***'") != NULL); /* the child echoed it */
    CHECK(strstr(g_body, "--api-key ***") != NULL);
    CHECK(strstr(g_body, "SECRET") == NULL);
    if (strstr(g_body, "SECRET")) printf("  503: %s\n", g_body);
    CHECK_EQ_INT(http(&s, "GET", "/models", NULL), 200);
    CHECK(strstr(g_body, "SECRET") == NULL);
    CHECK_EQ_INT(serve_stop(&s), 0);
    CHECK(log_has(&s, "--api-key ***"));
    CHECK(!file_has(s.log_path, "SECRET"));
    CHECK(log_has(&s, "; last output:\\nrsd-sim: unknown option")); /* one line */
    CHECK(log_lines_own(&s));
}

/* rsd-ensure prints ids a server chose with their control bytes made visible (an ESC
   sequence or BEL in a model id reaches no terminal), and --json keeps them
   JSON-escaped, not escaped twice; a URL's password is never echoed. */
static void test_ensure_output_escaped(void) {
    static const char evil[] = "evil\x1b[31m\x07x";
    char model_arg[64], out[8192], url[128];
    const char *sim_argv[] = {SIM_BIN, "--runtime", "router", "--port", "0", "--models-max", "1",
                              "--load-ms", "20", "--model", model_arg, "--model", "b", NULL};
    listen_proc sim;
    snprintf(model_arg, sizeof model_arg, "id=%s,startup=1", evil);
    REQUIRE(listen_proc_start(&sim, sim_argv, -1) == 0);
    {
        const char *a[] = {ENSURE_BIN, "--url", sim.url, "--list", NULL};
        int i;
        for (i = 0; i < 500; i++) { /* startup=1: loaded shortly after the start */
            CHECK_EQ_INT(run_prog(a, out, sizeof out), 0);
            if (strstr(out, "(loaded")) break;
            (void)poll(NULL, 0, 10);
        }
        CHECK(strstr(out, "resident: evil\\x1b[31m\\x07x (loaded)") != NULL);
        CHECK(strpbrk(out, "\x1b\x07") == NULL);
        if (!strstr(out, "evil\\x1b")) printf("  --list: %s\n", out);
    }
    {
        const char *a[] = {ENSURE_BIN, "--url", sim.url, "--model", "b", "--no-state", NULL};
        CHECK_EQ_INT(run_prog(a, out, sizeof out), 0);
        CHECK(strstr(out, "evicted 'evil\\x1b[31m\\x07x'") != NULL);
        CHECK(strstr(out, "'evil\\x1b[31m\\x07x'") != NULL);
        CHECK(strpbrk(out, "\x1b\x07") == NULL);
        if (strpbrk(out, "\x1b\x07") || !strstr(out, "evicted 'evil")) printf("  ensure: %s\n", out);
    }
    {
        const char *a[] = {ENSURE_BIN, "--url", sim.url, "--model", evil, "--no-state", "--json", NULL};
        CHECK_EQ_INT(run_prog(a, out, sizeof out), 0);
        CHECK(strstr(out, "\"model\":\"evil\\u001b[31m\\u0007x\"") != NULL);
        CHECK(strstr(out, "\"evicted\":[\"b\"]") != NULL);
        CHECK(strpbrk(out, "\x1b\x07") == NULL);
        if (!strstr(out, "\"model\":\"evil\\u001b")) printf("  --json: %s\n", out);
    }
    {
        const char *a[] = {ENSURE_BIN, "--url", url, "--model", "b", "--no-state", NULL};
        snprintf(url, sizeof url, "http://user:pw-SECRET@127.0.0.1:%d", sim.port);
        CHECK_EQ_INT(run_prog(a, out, sizeof out), 64);
        CHECK(strstr(out, "http://***@127.0.0.1") != NULL);
        CHECK(strstr(out, "SECRET") == NULL);
    }
    (void)listen_proc_stop(&sim);
}


/* SIGHUP (a closed terminal, an ssh logout) does not end rsd-serve: it reloads the
   configuration (the same file: nothing moves) and keeps serving with its processes;
   SIGINT then stops them gracefully and exits 0. */
static void test_serve_signals(void) {
    serve_proc s;
    char path[256], st[32];
    const char *args[] = {"--config", path, NULL};
    int pid, i, code, sig;
    make_dir();
    snprintf(path, sizeof path, "%s/signals.ini", g_dir);
    write_config(path, 1, "[model alpha]\nmodel = @/alpha.gguf\n");
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("alpha", false)), 200);
    pid = (int)status_field(&s, "alpha", "pid");
    REQUIRE(pid > 0);
    REQUIRE(kill(s.pid, SIGHUP) == 0);
    for (i = 0; i < 500 && !log_has(&s, "SIGHUP"); i++) (void)poll(NULL, 0, 10);
    CHECK(log_has(&s, "SIGHUP: configuration reloaded: added [] removed [] changed [] (restarted once idle) updated [] unchanged [alpha]"));
    CHECK_EQ_INT(http(&s, "GET", "/health", NULL), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("alpha", false)), 200);
    CHECK_EQ_INT(status_field(&s, "alpha", "pid"), pid); /* the same process */
    status_state(&s, "alpha", st, sizeof st);
    CHECK_EQ_STR(st, "ready");
    REQUIRE(kill(s.pid, SIGINT) == 0);
    code = wait_exit(s.pid, &sig);
    if (code == -2) kill(s.pid, SIGKILL), (void)wait_exit(s.pid, &sig);
    s.pid = 0;
    CHECK_EQ_INT(code, 0);
    CHECK_EQ_INT(sig, 0);
    CHECK(log_has(&s, "stopping: every process gets SIGTERM"));
    CHECK(log_has(&s, "alpha: exited") && log_has(&s, "stopped"));
    CHECK(kill(pid, 0) != 0); /* the child is gone */
}

/* A model whose binary is missing fails its request at once, with the reason. */
static void test_serve_missing_binary(void) {
    serve_proc s;
    const char *args[] = {"--listen", "127.0.0.1:0", "--llama-server", "/nonexistent/llama-server",
                          "--model", "ghost=/models/ghost.gguf", "--start-timeout", "300", NULL};
    REQUIRE(serve_start(&s, args) == 0);
    /* the spawn failure itself answers (the reason below), not the 300 s start deadline:
       no clock is compared, the body says which */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("ghost", false)), 503);
    CHECK(strstr(g_body, "ghost") != NULL);
    CHECK(strstr(g_body, "nonexistent") || strstr(g_body, "No such file") || strstr(g_body, "ENOENT"));
    if (!strstr(g_body, "nonexistent") && !strstr(g_body, "No such file")) printf("  body: %s\n", g_body);
    CHECK_EQ_INT(status_field(&s, "ghost", "in_flight"), 0);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* A bad line is `file:line: message` and exit 64; an unreadable file exit 66. */
static void test_serve_bad_config(void) {
    char path[256], out[2048], want[320];
    const char *argv1[] = {SERVE_BIN, "--config", path, NULL};
    const char *argv2[] = {SERVE_BIN, "--config", "/nonexistent/serve.ini", NULL};
    const char *argv3[] = {SERVE_BIN, "--llama-server", SIM_BIN, "--model", "a=" SIM_BIN, "--max-models", "2", "--check", NULL};
    make_dir();
    snprintf(path, sizeof path, "%s/bad.ini", g_dir);
    write_file(path, "max_models = 2\n[model a]\nmodel = /m/a.gguf\nreserve = lots\n");
    CHECK_EQ_INT(run_prog(argv1, out, sizeof out), 64);
    snprintf(want, sizeof want, "%s:4: reserve: bad size 'lots'", path);
    CHECK(strstr(out, want) != NULL);
    CHECK_EQ_INT(run_prog(argv2, out, sizeof out), 66);
    CHECK_EQ_INT(run_prog(argv3, out, sizeof out), 0);
    CHECK(strstr(out, "max_models = 2") && strstr(out, "[model a]"));
}

/* The unified binary (installers ship only `llama serve`): llama_server is words, the
   first the program (here a wrapper in a directory with a blank, quoted) and the rest
   right after argv[0]; --check looks at the first word only; a bad quote is refused. */
static void test_serve_unified_binary(void) {
    serve_proc s;
    char path[256], bindir[192], llama[256], sim[PATH_MAX], text[2 * PATH_MAX + 1024], out[4096], want[512];
    const char *args[] = {"--config", path, NULL};
    const char *check[] = {SERVE_BIN, "--config", path, "--check", NULL};
    make_dir();
    REQUIRE(realpath(SIM_BIN, sim) != NULL);
    REQUIRE(llama_wrapper(g_dir, sim, llama, sizeof llama) == 0);
    snprintf(path, sizeof path, "%s/unified.ini", g_dir);
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nmax_models = 1\nllama_server = \"%s\" serve\n"
             "args = --runtime server --load-ms 20\n[model u]\nmodel = %s\n", llama, sim);
    write_file(path, text);
    CHECK_EQ_INT(run_prog(check, out, sizeof out), 0); /* the first word is the program */
    if (!strstr(out, "[model u]")) printf("  --check: %s\n", out);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("u", false)), 200);
    CHECK(strstr(g_body, "simulated") != NULL);
    CHECK_EQ_INT(http(&s, "GET", "/models", NULL), 200);
    snprintf(want, sizeof want, "\"args\":[\"%s\",\"serve\",\"-m\"", llama); /* no JSON escape in these paths */
    CHECK(strstr(g_body, want) != NULL);
    CHECK_EQ_INT(serve_stop(&s), 0);

    /* an args prefix: env sets a variable for the child, then runs the server */
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nllama_server = env LLAMA_ARG_X=1 %s\nargs = --runtime server --load-ms 20\n"
             "[model e]\nmodel = %s\n", sim, sim);
    write_file(path, text);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("e", false)), 200);
    CHECK_EQ_INT(serve_stop(&s), 0);

    /* --check names the first word when it cannot run */
    snprintf(text, sizeof text, "llama_server = /nonexistent/llama serve\n[model a]\nmodel = %s\n", sim);
    write_file(path, text);
    CHECK(run_prog(check, out, sizeof out) != 0);
    CHECK(strstr(out, "cannot run /nonexistent/llama: ") != NULL);
    CHECK(strstr(out, "llama serve:") == NULL);
    /* a quote left open: a configuration error on its line */
    snprintf(text, sizeof text, "max_models = 1\nllama_server = \"/opt/my llama serve\n[model a]\nmodel = %s\n", sim);
    write_file(path, text);
    CHECK_EQ_INT(run_prog(check, out, sizeof out), 64);
    snprintf(want, sizeof want, "%s:2: llama_server: '\"/opt/my llama serve' is no program", path);
    CHECK(strstr(out, want) != NULL);
    if (!strstr(out, want)) printf("  got: %s\n", out);
    (void)unlink(llama);
    snprintf(bindir, sizeof bindir, "%s/my bin", g_dir);
    (void)rmdir(bindir);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    RUN(test_config_full);
    RUN(test_config_defaults);
    RUN(test_config_example);
    RUN(test_config_table);
    RUN(test_config_errors);
    RUN(test_config_values);
    RUN(test_config_split);
    RUN(test_config_flags);
    RUN(test_body_model);
    RUN(test_serve_bad_config);
    RUN(test_serve_missing_binary);
    RUN(test_serve_unified_binary);
    RUN(test_serve_pool);
    RUN(test_serve_upstream_hangup);
    RUN(test_serve_keepalive_frames);
    RUN(test_serve_pinned);
    RUN(test_serve_signals);
    RUN(test_serve_secrets);
    RUN(test_ensure_output_escaped);
    RUN(test_serve_wrapper_children);
    RUN(test_serve_waiting_log);
    RUN(test_serve_stop_asks_nothing);
    RUN(test_serve_idle_upstream);
    RUN(test_serve_broken_keeps_healthy);
    RUN(test_serve_slow_client);
    RUN(test_serve_stalled_client);
    serve_cleanup();
    return RSD_TEST_END();
}
