/* test_serve_devmem.c -- rsd-serve's vram_budget = auto: the keys (examples/rsd_serve.h,
   pure), then the program with rsd-sim llama-server children reading a fake NVML
   (tests/fake_nvml.c, build/tests/libfake_nvml.so, through $RESIDENCY_NVML) whose
   figures the test rewrites in a file between requests: the budget at start (total less
   vram_margin), what others hold read again when a start is admitted, a reading that
   never stops a running model, our children's bytes told apart by pid, the budget read
   again on reload, and a start refused when the margin leaves nothing. Nothing sleeps:
   waits are bounded polls of rsd-serve's own endpoints. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include "../examples/rsd_serve.h"
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

#define SERVE_BIN "build/examples/rsd-serve"
#define SIM_BIN "build/examples/rsd-sim"
#include "serve_harness.h"
#include "tiny_gguf.h"

#define GiB ((uint64_t)1 << 30)

static rsrv_config g_cfg, g_cfg2;

static int parse(const char *text, char *err, size_t cap) {
    rsrv_config_init(&g_cfg);
    err[0] = 0;
    return rsrv_parse_ini(&g_cfg, text, strlen(text), "serve.ini", err, cap);
}

static void test_config_auto(void) {
    char err[RSRV_ERR_MAX], ini[1 << 14];
    rsrv_opts o;
    char *argv[] = {(char *)"rsd-serve", (char *)"--vram-budget", (char *)"auto", (char *)"--vram-margin",
                    (char *)"512M", (char *)"--model", (char *)"a=/m/a.gguf", NULL};
    int n;
    CHECK_EQ_INT(parse("vram_budget = auto\nvram_margin = 2G\n[model a]\nmodel = /m/a.gguf\nreserve = 4G\n", err,
                       sizeof err), 0);
    CHECK(g_cfg.vram_budget_auto && g_cfg.vram_budget_bytes == 0);
    CHECK(rsrv_eff_vram_margin(&g_cfg) == 2 * GiB);
    CHECK(rsrv_auto_budget(&g_cfg, 24 * GiB) == 22 * GiB);
    CHECK(rsrv_auto_budget(&g_cfg, 2 * GiB) == 0); /* nothing left: rsd-serve refuses to start */
    CHECK(rsrv_auto_budget(&g_cfg, UINT64_MAX) == RSD_POOL_MAX_BYTES);
    err[0] = 0;
    CHECK_EQ_INT(rsrv_check(&g_cfg, "serve.ini", err, sizeof err), 0);
    /* written back and read again: the same configuration */
    n = rsrv_write_ini(&g_cfg, ini, sizeof ini);
    REQUIRE(n > 0);
    CHECK(strstr(ini, "vram_budget = auto\nvram_margin = 2G\n") != NULL);
    rsrv_config_init(&g_cfg2);
    CHECK_EQ_INT(rsrv_parse_ini(&g_cfg2, ini, (size_t)n, "w.ini", err, sizeof err), 0);
    CHECK(rsrv_config_equal(&g_cfg, &g_cfg2));
    g_cfg2.vram_margin_bytes = GiB; /* another margin is another configuration */
    CHECK(!rsrv_config_equal(&g_cfg, &g_cfg2));
    /* the default margin */
    CHECK_EQ_INT(parse("vram_budget = auto\n[model a]\nmodel = /m/a.gguf\n", err, sizeof err), 0);
    CHECK(rsrv_eff_vram_margin(&g_cfg) == RSRV_VRAM_MARGIN_DEFAULT);
    CHECK(!strcmp(rsrv_global_keys[RSRV_GK_VRAM_MARGIN], "vram_margin"));
    n = rsrv_write_ini(&g_cfg, ini, sizeof ini);
    CHECK(n > 0 && strstr(ini, "vram_margin = 1G\n") != NULL);
    /* a fixed budget is no longer auto; a margin without auto is a problem; bad values */
    CHECK_EQ_INT(parse("vram_budget = 8G\n[model a]\nmodel = /m/a.gguf\n", err, sizeof err), 0);
    CHECK(!g_cfg.vram_budget_auto && g_cfg.vram_budget_bytes == 8 * GiB);
    CHECK_EQ_INT(parse("vram_budget = 8G\nvram_margin = 1G\n[model a]\nmodel = /m/a.gguf\n", err, sizeof err), 0);
    err[0] = 0;
    CHECK_EQ_INT(rsrv_check(&g_cfg, "serve.ini", err, sizeof err), 1);
    CHECK(strstr(err, "serve.ini:2: vram_margin applies only with vram_budget = auto") != NULL);
    CHECK(parse("vram_budget = automatic\n", err, sizeof err) != 0);
    CHECK(strstr(err, "vram_budget: bad size 'automatic'") != NULL);
    CHECK(parse("vram_budget = auto\nvram_margin = lots\n", err, sizeof err) != 0);
    CHECK(strstr(err, "vram_margin: bad size 'lots'") != NULL);
    CHECK(parse("vram_budget = auto\nvram_margin = 1G\nvram_margin = 2G\n", err, sizeof err) != 0);
    /* flags */
    rsrv_config_init(&g_cfg);
    memset(&o, 0, sizeof o);
    CHECK_EQ_INT(rsrv_parse_args(&g_cfg, &o, 7, argv, err, sizeof err), 0);
    CHECK(g_cfg.vram_budget_auto && rsrv_eff_vram_margin(&g_cfg) == 512ull << 20);
}

/* ---- the program ---------------------------------------------------------------------- */
static char g_nvml_file[300];

static const char *fake_lib(void) {
    static char path[600];
    char cwd[300];
    if (access("build/tests/libfake_nvml.so", R_OK) != 0 || !getcwd(cwd, sizeof cwd)) return NULL;
    snprintf(path, sizeof path, "%s/build/tests/libfake_nvml.so", cwd);
    return path;
}

static void gpu(const char *script) { write_file(g_nvml_file, script); }

/* A member of /status's device_memory object, or a top-level member (dm false). */
static int64_t dm_field(const serve_proc *s, bool dm, const char *field) {
    rsd_json_doc d;
    int64_t v = -1;
    int o;
    if (http(s, "GET", "/status", NULL) != 200) return -1;
    if (rsd_json_parse(&d, g_body, strlen(g_body), g_toks, 8192) <= 0) return -1;
    o = dm ? rsd_json_find(&d, 0, "device_memory") : 0;
    if (o < 0 || rsd_json_int64(&d, rsd_json_find(&d, o, field), &v) != RSD_OK) return -1;
    return v;
}

static void test_serve_auto(void) {
    const char *lib = fake_lib();
    serve_proc s;
    char path[256], cfg[1024], script[256], state[32];
    const char *args[] = {"--config", path, NULL};
    int64_t pid_a, pid_b, reads;
    if (!lib) {
        printf("test_serve_auto: skipped (no build/tests/libfake_nvml.so)\n");
        return;
    }
    make_dir();
    snprintf(g_nvml_file, sizeof g_nvml_file, "%s/nvml.txt", g_dir);
    snprintf(path, sizeof path, "%s/auto.ini", g_dir);
    setenv("RESIDENCY_NVML", lib, 1);
    setenv("FAKE_NVML_FILE", g_nvml_file, 1);
    /* a 10 GiB GPU with 6 GiB held by a renderer; a 1 GiB margin: the budget is 9 GiB */
    gpu("10737418240,6442450944,999999=6442450944");
    snprintf(cfg, sizeof cfg,
             "max_models = 3\nvram_budget = auto\nvram_margin = 1G\n[model a]\nmodel = %s\nreserve = 4G\n"
             "[model b]\nmodel = %s\nreserve = 2G\n",
             model_file("a"), model_file("b"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK(dm_field(&s, false, "vram_budget_bytes") == (int64_t)(9 * GiB));
    CHECK(dm_field(&s, true, "total_bytes") == (int64_t)(10 * GiB));
    CHECK(dm_field(&s, true, "others_bytes") == (int64_t)(6 * GiB));
    CHECK(dm_field(&s, true, "margin_bytes") == (int64_t)GiB);
    CHECK(strstr(g_body, "\"device\":\"nvml0\"") && strstr(g_body, "\"pool\":\"vram\""));
    CHECK(log_has(&s, "vram_budget = auto: nvml0 (vram) has 10G"));
    /* b (2 GiB) fits beside the renderer (9 - 6 = 3 GiB) */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("b", false)), 200);
    pid_b = status_field(&s, "b", "pid");
    CHECK(pid_b > 0);
    /* the renderer is gone, b's child holds 2 GiB (its pid: ours, not others'); a (4 GiB)
       is admitted on a reading taken for its start */
    snprintf(script, sizeof script, "10737418240,2147483648,%lld=2147483648", (long long)pid_b);
    gpu(script);
    reads = dm_field(&s, true, "reads");
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    pid_a = status_field(&s, "a", "pid");
    CHECK(pid_a > 0);
    CHECK(dm_field(&s, true, "reads") > reads);
    CHECK_EQ_INT(dm_field(&s, true, "others_bytes"), 0);
    /* a request for a running model takes no reading */
    reads = dm_field(&s, true, "reads");
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    CHECK_EQ_INT(dm_field(&s, true, "reads"), reads);
    /* others now hold 8 GiB beyond our two children: a reading (the reload's) admits
       nothing new, and stops nothing that runs */
    snprintf(script, sizeof script, "10737418240,10737418240,%lld=2147483648,%lld=4294967296,4242=4294967296",
             (long long)pid_b, (long long)pid_a);
    gpu(script);
    CHECK_EQ_INT(http(&s, "POST", "/_rsd/reload", NULL), 200);
    CHECK_EQ_INT(dm_field(&s, true, "others_bytes"), (int64_t)(4 * GiB));
    CHECK_EQ_INT(status_field(&s, "a", "pid"), pid_a);
    CHECK_EQ_INT(status_field(&s, "b", "pid"), pid_b);
    status_state(&s, "a", state, sizeof state);
    CHECK_EQ_STR(state, "ready");
    status_state(&s, "b", state, sizeof state);
    CHECK_EQ_STR(state, "ready");
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("b", false)), 200);
    CHECK_EQ_INT(status_field(&s, "a", "pid"), pid_a);
    status_state(&s, "a", state, sizeof state);
    CHECK_EQ_STR(state, "ready");
    /* reload with another margin: the budget is read again */
    snprintf(cfg, sizeof cfg,
             "max_models = 3\nvram_budget = auto\nvram_margin = 2G\n[model a]\nmodel = %s\nreserve = 4G\n"
             "[model b]\nmodel = %s\nreserve = 2G\n",
             model_file("a"), model_file("b"));
    write_cfg(path, cfg);
    CHECK_EQ_INT(http(&s, "POST", "/_rsd/reload", NULL), 200);
    CHECK(strstr(g_body, "vram_budget") == NULL); /* not a restart_needed key */
    CHECK(dm_field(&s, false, "vram_budget_bytes") == (int64_t)(8 * GiB));
    CHECK_EQ_INT(status_field(&s, "a", "pid"), pid_a);
    /* switching to a fixed budget needs a restart */
    snprintf(cfg, sizeof cfg, "max_models = 3\nvram_budget = 5G\n[model a]\nmodel = %s\nreserve = 4G\n"
             "[model b]\nmodel = %s\nreserve = 2G\n", model_file("a"), model_file("b"));
    write_cfg(path, cfg);
    CHECK_EQ_INT(http(&s, "POST", "/_rsd/reload", NULL), 200);
    CHECK(strstr(g_body, "vram_budget") != NULL);
    CHECK(dm_field(&s, false, "vram_budget_bytes") == (int64_t)(8 * GiB));
    CHECK_EQ_INT(serve_stop(&s), 0);
    /* a margin that leaves nothing: refused at start, in words */
    snprintf(cfg, sizeof cfg, "vram_budget = auto\nvram_margin = 20G\n[model a]\nmodel = %s\n", model_file("a"));
    write_cfg(path, cfg);
    {
        const char *argv[] = {SERVE_BIN, "--config", path, NULL};
        char out[4096];
        CHECK(run_prog(argv, out, sizeof out) != 0);
        CHECK(strstr(out, "vram_budget = auto: nvml0 has 10G, and vram_margin 20G leaves nothing") != NULL);
    }
    unsetenv("RESIDENCY_NVML");
    unsetenv("FAKE_NVML_FILE");
}

static bool reads_above(const serve_proc *s, const void *arg) {
    return dm_field(s, true, "reads") > *(const int64_t *)arg + 2;
}

/* A start that fits the budget but not beside what others hold waits for the memory, not
   for the next request: rsd-serve reads the device again while it waits (and only then),
   and the reading that finds the memory admits it. */
static void test_serve_foreign_held(void) {
    const char *lib = fake_lib();
    serve_proc s;
    char path[256], cfg[1024], buf[4096];
    const char *args[] = {"--config", path, NULL};
    int64_t reads, pid_a;
    int fd, n = 0, r;
    if (!lib) {
        printf("test_serve_foreign_held: skipped (no build/tests/libfake_nvml.so)\n");
        return;
    }
    make_dir();
    snprintf(g_nvml_file, sizeof g_nvml_file, "%s/nvml.txt", g_dir);
    snprintf(path, sizeof path, "%s/held.ini", g_dir);
    setenv("RESIDENCY_NVML", lib, 1);
    setenv("FAKE_NVML_FILE", g_nvml_file, 1);
    /* a 10 GiB GPU, 1 GiB margin (budget 9 GiB), a renderer holding 8 GiB: a (4 GiB) fits
       the budget, not beside the renderer */
    gpu("10737418240,8589934592,999999=8589934592");
    snprintf(cfg, sizeof cfg, "max_models = 2\nvram_budget = auto\nvram_margin = 1G\n[model a]\nmodel = %s\nreserve = 4G\n",
             model_file("a"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    /* with nothing waiting, nothing is read: two looks at /status see the same count */
    reads = dm_field(&s, true, "reads");
    CHECK(reads > 0);
    CHECK_EQ_INT(dm_field(&s, true, "reads"), reads);
    fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    REQUIRE(raw_post(fd, "/v1/chat/completions", chat("a", false)) == 0);
    CHECK(wait_field(&s, "a", "waiting", 1));
    /* while it waits the device is read again, by itself (no request comes) */
    reads = dm_field(&s, true, "reads");
    CHECK(wait_until(&s, reads_above, &reads, 30000));
    CHECK_EQ_INT(status_field(&s, "a", "pid"), 0);
    CHECK_EQ_INT(dm_field(&s, true, "held_starts"), 1);
    /* the renderer lets go: the next reading admits a, and the request is answered */
    gpu("10737418240,1073741824,999999=1073741824");
    n = 0;
    buf[0] = 0;
    while ((size_t)n + 1 < sizeof buf && !strstr(buf, "\r\n\r\n") && (r = raw_read(fd, buf + n, sizeof buf - 1 - (size_t)n)) > 0) {
        n += r;
        buf[n] = 0;
    }
    CHECK(strncmp(buf, "HTTP/1.1 200", 12) == 0);
    close(fd);
    pid_a = status_field(&s, "a", "pid");
    CHECK(pid_a > 0);
    CHECK(log_has(&s, "a: starting pid"));
    CHECK_EQ_INT(dm_field(&s, true, "held_starts"), 0);
    CHECK_EQ_INT(serve_stop(&s), 0);
    unsetenv("RESIDENCY_NVML");
    unsetenv("FAKE_NVML_FILE");
}

/* Lines of path holding needle. */
static int file_count(const char *path, const char *needle) {
    static char buf[1 << 16];
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    const char *p = buf;
    int k = 0;
    if (f) fclose(f);
    buf[n] = 0;
    while ((p = strstr(p, needle)) != NULL) { k++; p++; }
    return k;
}

/* A model bigger than the whole budget is refused at once, with its bytes, the budget and
   what others hold; the log line and the event come once (a client that asks again gets
   the same answer, not another line), nothing is stopped for it and nothing retries it. */
static void test_serve_never_fits(void) {
    const char *lib = fake_lib();
    serve_proc s;
    sse_buf *sb;
    char path[256], cfg[1024];
    const char *args[] = {"--config", path, NULL};
    const char *p;
    int64_t pid_a;
    if (!lib) {
        printf("test_serve_never_fits: skipped (no build/tests/libfake_nvml.so)\n");
        return;
    }
    make_dir();
    snprintf(g_nvml_file, sizeof g_nvml_file, "%s/nvml.txt", g_dir);
    snprintf(path, sizeof path, "%s/nofit.ini", g_dir);
    setenv("RESIDENCY_NVML", lib, 1);
    setenv("FAKE_NVML_FILE", g_nvml_file, 1);
    /* a 5 GiB GPU less a 1 GiB margin: big (6 GiB) can never fit (a fixed budget below a
       reserve is refused at start; the device's is known only once it is read) */
    gpu("5368709120,0");
    snprintf(cfg, sizeof cfg, "max_models = 2\nvram_budget = auto\nvram_margin = 1G\n[model a]\nmodel = %s\n"
             "reserve = 1G\n[model big]\nmodel = %s\nreserve = 6G\n", model_file("a"), model_file("big"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    sb = (sse_buf *)calloc(1, sizeof *sb);
    REQUIRE(sb);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    pid_a = status_field(&s, "a", "pid");
    CHECK(pid_a > 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("big", false)), 503);
    CHECK(strstr(g_body, "cannot serve 'big': it needs 6G (6442450944 bytes) and can never fit: the byte budget "
                         "is 4G (4294967296 bytes; other programs hold 0 now)") != NULL);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("big", false)), 503);
    CHECK(strstr(g_body, "can never fit") != NULL);
    CHECK_EQ_INT(http(&s, "POST", "/models/load", "{\"model\":\"big\"}"), 500);
    CHECK(strstr(g_body, "can never fit") != NULL);
    CHECK_EQ_INT(status_field(&s, "a", "pid"), pid_a); /* nothing stopped for it */
    CHECK_EQ_INT(status_field(&s, "big", "pid"), 0);
    /* the history: one no_fit event, with the numbers; then the unload that follows */
    CHECK_EQ_INT(http(&s, "POST", "/models/unload", "{\"model\":\"a\"}"), 200);
    sb->fd = sse_open(s.port, "/_rsd/events?since=0", NULL);
    REQUIRE(sb->fd >= 0);
    CHECK(sse_wait(sb, "event: unload"));
    p = strstr(sb->b, "event: no_fit");
    CHECK(p != NULL && strstr(p + 1, "event: no_fit") == NULL);
    CHECK(p && strstr(p, "\"bytes\":6442450944,\"budget_bytes\":4294967296,\"others_bytes\":0") != NULL);
    close(sb->fd);
    CHECK_EQ_INT(file_count(s.log_path, "big: refused: cannot serve 'big'"), 1);
    CHECK_EQ_INT(serve_stop(&s), 0);
    free(sb);
    unsetenv("RESIDENCY_NVML");
    unsetenv("FAKE_NVML_FILE");
}

/* The clamp by bytes for a start: b (its reserve is 1 MiB + 8 MiB of KV at ctx 32768: a
   tiny model's 256 bytes a token) does not fit beside a in a 10 MiB budget; it starts
   with the ctx whose KV fits what is left (28672 = 112 blocks of 256) instead of stopping
   a. With less left than the floor (4096 tokens), a is evicted as always and b starts
   with its whole ctx. */
static void test_serve_clamp_by_bytes(void) {
    serve_proc s;
    char path[256], cfg[1400], bfile[300], state[32];
    const char *args[] = {"--config", path, NULL};
    int64_t pid_a;
    int round;
    (void)tiny_gguf_write_set; /* tiny_gguf.h's other writer, not needed here */
    make_dir();
    snprintf(path, sizeof path, "%s/clamp.ini", g_dir);
    snprintf(bfile, sizeof bfile, "%s/tiny-b.gguf", g_dir);
    REQUIRE(tiny_gguf_write(bfile, "tiny-b", 7, 2048, 0) == 0);
    for (round = 0; round < 2; round++) {
        snprintf(cfg, sizeof cfg, "max_models = 2\nvram_budget = 10M\n[model a]\nmodel = %s\nreserve = %s\n"
                 "[model b]\nmodel = %s\nctx = 32768\nreserve = 9M\n", model_file("a"), round ? "8704K" : "2M", bfile);
        write_cfg(path, cfg);
        REQUIRE(serve_start(&s, args) == 0);
        CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
        pid_a = status_field(&s, "a", "pid");
        CHECK(pid_a > 0);
        CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("b", false)), 200);
        CHECK(status_field(&s, "b", "pid") > 0);
        CHECK_EQ_INT(http(&s, "GET", "/v1/models", NULL), 200);
        if (round == 0) { /* clamped: a stays */
            CHECK(strstr(g_body, "\"28672\"") != NULL);
            CHECK(strstr(g_body, "\"loaded_context_length\":28672") != NULL);
            CHECK(strstr(g_body, "\"32768\"") == NULL);
            CHECK_EQ_INT(status_field(&s, "a", "pid"), pid_a);
            status_state(&s, "a", state, sizeof state);
            CHECK_EQ_STR(state, "ready");
            CHECK(log_has(&s, "b: ctx 32768 clamped to 28672 tokens to start beside 1 running model: its KV fits the 7M left"));
        } else { /* 2048 would fit: under the floor, a is evicted and b keeps its ctx */
            CHECK(strstr(g_body, "\"32768\"") != NULL);
            CHECK(strstr(g_body, "\"28672\"") == NULL);
            CHECK(wait_field(&s, "a", "pid", 0));
            CHECK(!log_has(&s, "clamped"));
        }
        CHECK_EQ_INT(serve_stop(&s), 0);
    }
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    RUN(test_config_auto);
    RUN(test_serve_clamp_by_bytes);
    if (!getenv("RSD_TEST_QEMU")) RUN(test_serve_auto);
    else printf("test_serve_auto: skipped under qemu-user (the fake NVML is a host library)\n");
    if (!getenv("RSD_TEST_QEMU")) RUN(test_serve_foreign_held);
    if (!getenv("RSD_TEST_QEMU")) RUN(test_serve_never_fits);
    return RSD_TEST_END();
}
