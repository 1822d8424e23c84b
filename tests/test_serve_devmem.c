/* test_serve_devmem.c -- rsd-serve's vram_budget = auto: the keys (apps/rsd-serve/rsd_serve.h,
   pure), then the program with rsd-sim llama-server children reading a fake NVML
   (tests/fake_nvml.c, build/tests/libfake_nvml.so, through $RESIDENCY_NVML) whose
   figures the test rewrites in a file between requests: the budget at start (total less
   vram_margin), what others hold read again when a start is admitted, a reading that
   never stops a running model, our children's bytes told apart by pid, the budget read
   again on reload, a start refused when the margin leaves nothing, and on that GPU's
   budget the GPU part of a learned figure (a child's CUDA0 buffer lines, or the probe's
   bytes for its pid when it prints none) as the model's bytes. Nothing sleeps:
   waits are bounded polls of rsd-serve's own endpoints. */
#define RESIDENCY_IMPLEMENTATION
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
#include <sys/wait.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <unistd.h>

#define SERVE_BIN "build/bin/rsd-serve"
#define SIM_BIN "build/bin/rsd-sim"
#include "serve_harness.h"
#include "tiny_gguf.h"
#include "ensure_code.h"

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
    CHECK(strstr(ini, "\nvram_budget = auto\n") != NULL && strstr(ini, "\nvram_margin = 2G\n") != NULL); /* table order */
    rsrv_config_init(&g_cfg2);
    CHECK_EQ_INT(rsrv_parse_ini(&g_cfg2, ini, (size_t)n, "w.ini", err, sizeof err), 0);
    CHECK(rsrv_config_equal(&g_cfg, &g_cfg2));
    g_cfg2.vram_margin_bytes = GiB; /* another margin is another configuration */
    CHECK(!rsrv_config_equal(&g_cfg, &g_cfg2));
    /* the default margin */
    CHECK_EQ_INT(parse("vram_budget = auto\n[model a]\nmodel = /m/a.gguf\n", err, sizeof err), 0);
    CHECK(rsrv_eff_vram_margin(&g_cfg) == RSRV_VRAM_MARGIN_DEFAULT);
    CHECK(!strcmp(rsrv_global_keys[RSRV_GK_VRAM_MARGIN].name, "vram_margin"));
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

/* The fake device's script, replaced at once: written beside and renamed over, so that a
   reading rsd-serve makes meanwhile never sees a half-written file (a torn "10737418240,4"
   once read as 10 GiB free and made a lease ready with the wrong figure). */
static void gpu(const char *script) {
    char tmp[sizeof g_nvml_file + 8];
    snprintf(tmp, sizeof tmp, "%s.new", g_nvml_file);
    write_file(tmp, script);
    if (rename(tmp, g_nvml_file) != 0) write_file(g_nvml_file, script);
}

/* A fake-NVML test's start: false (one skip line for test) without the library; else a
   fresh directory, the script file g_dir/file, path = g_dir/ini, and rsd-serve's
   children of this process find the fake through RESIDENCY_NVML and FAKE_NVML_FILE. */
static bool nvml_setup(const char *test, const char *file, const char *ini, char *path, size_t cap) {
    const char *lib = fake_lib();
    if (!lib) {
        printf("%s: skipped (no build/tests/libfake_nvml.so)\n", test);
        return false;
    }
    make_dir();
    snprintf(g_nvml_file, sizeof g_nvml_file, "%s/%s", g_dir, file);
    snprintf(path, cap, "%s/%s", g_dir, ini);
    setenv("RESIDENCY_NVML", lib, 1);
    setenv("FAKE_NVML_FILE", g_nvml_file, 1);
    return true;
}

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
    serve_proc s;
    char path[256], cfg[1024], script[256], state[32];
    const char *args[] = {"--config", path, NULL};
    int64_t pid_a, pid_b, reads;
    if (!nvml_setup("test_serve_auto", "nvml.txt", "auto.ini", path, sizeof path)) return;
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
    serve_proc s;
    char path[256], cfg[1024], buf[4096];
    const char *args[] = {"--config", path, NULL};
    int64_t reads, pid_a;
    int fd, n = 0, r;
    if (!nvml_setup("test_serve_foreign_held", "nvml.txt", "held.ini", path, sizeof path)) return;
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
    serve_proc s;
    sse_buf *sb;
    char path[256], cfg[1024];
    const char *args[] = {"--config", path, NULL};
    const char *p;
    int64_t pid_a;
    if (!nvml_setup("test_serve_never_fits", "nvml.txt", "nofit.ini", path, sizeof path)) return;
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

/* On a GPU's budget a model's bytes are the GPU part of its figure: a child's own report
   of CUDA0 buffers counts whole; a child that prints none gets the probe's per-process
   bytes for its pid (source nvml). b loads slowly (1.5 s) so the test can script the
   fake NVML with its pid before rsd-serve reads it (3 s after ready). */
static void test_serve_vram_figures(void) {
    serve_proc s;
    char path[256], cfg[1024], script[256], src[16];
    const char *args[] = {"--config", path, NULL};
    int64_t pid_a, pid_b;
    if (!nvml_setup("test_serve_vram_figures", "nvml2.txt", "vramfig.ini", path, sizeof path)) return;
    gpu("10737418240,0");
    snprintf(cfg, sizeof cfg,
             "max_models = 3\nvram_budget = auto\nvram_margin = 1G\n[model a]\nmodel = %s\n"
             "args = --buffers 104857600,26214400,3145728 --buffer-device CUDA0\n"
             "[model b]\nmodel = %s\nargs = --load-ms 1500\n",
             model_file("a"), model_file("b"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    CHECK(wait_mem(&s, "a", "measured", "device", (int64_t)(128 << 20)));
    CHECK_EQ_INT(mem_field(&s, "a", "", "bytes", NULL, 0), (int64_t)(128 << 20));
    (void)mem_field(&s, "a", "", "bytes_from", src, sizeof src);
    CHECK_EQ_STR(src, "measured");
    pid_a = status_field(&s, "a", "pid");
    CHECK_EQ_INT(http(&s, "POST", "/models/load", "{\"model\":\"b\"}"), 200);
    pid_b = wait_new_pid(&s, "b", 0);
    REQUIRE(pid_b > 0);
    snprintf(script, sizeof script, "10737418240,188743680,%lld=134217728,%lld=52428800", (long long)pid_a,
             (long long)pid_b);
    gpu(script);
    CHECK(wait_mem(&s, "b", "measured", "total", (int64_t)(50 << 20)));
    (void)mem_field(&s, "b", "", "source", src, sizeof src);
    CHECK_EQ_STR(src, "nvml");
    CHECK_EQ_INT(mem_field(&s, "b", "", "bytes", NULL, 0), (int64_t)(50 << 20));
    CHECK(log_has(&s, "b: took 50.0 MiB (nvml, the process's figure)"));
    CHECK_EQ_INT(serve_stop(&s), 0);
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

/* The same with b's bytes from its estimate (no reserve typed): a budget that holds a's
   2 MiB and b's estimate less a quarter of its KV starts b clamped beside a, at the ctx
   rsd_fit_context_bytes gives for what is left. */
static void test_serve_clamp_by_estimate(void) {
    serve_proc s;
    char path[256], cfg[1400], bfile[300], state[32];
    const char *args[] = {"--config", path, NULL};
    int64_t pid_a, total, kv;
    uint64_t budget;
    rsd_fit_bytes_desc d;
    rsd_fit_bytes fb;
    make_dir();
    snprintf(path, sizeof path, "%s/clampest.ini", g_dir);
    snprintf(bfile, sizeof bfile, "%s/tiny-b.gguf", g_dir);
    REQUIRE(tiny_gguf_write(bfile, "tiny-b", 7, 2048, 0) == 0);
    snprintf(cfg, sizeof cfg, "max_models = 2\nvram_budget = 1G\n[model a]\nmodel = %s\nreserve = 2M\n"
             "[model b]\nmodel = %s\nctx = 32768\n", model_file("a"), bfile);
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    total = mem_field(&s, "b", "estimate", "total", NULL, 0);
    kv = mem_field(&s, "b", "estimate", "kv", NULL, 0);
    CHECK_EQ_INT(serve_stop(&s), 0);
    REQUIRE(total > 0 && kv == 32768 * 256); /* 256 bytes a token, one unified cache */
    budget = (2u << 20) + (uint64_t)total - (uint64_t)kv / 4;
    snprintf(cfg, sizeof cfg, "max_models = 2\nvram_budget = %llu\n[model a]\nmodel = %s\nreserve = 2M\n"
             "[model b]\nmodel = %s\nctx = 32768\n", (unsigned long long)budget, model_file("a"), bfile);
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    pid_a = status_field(&s, "a", "pid");
    CHECK(pid_a > 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("b", false)), 200);
    memset(&d, 0, sizeof d);
    d.requested = 32768;
    d.n_other_residents = 1;
    d.kv_bytes_per_token = 256;
    d.free_bytes = budget - (2u << 20);
    d.load_bytes = (uint64_t)(total - kv);
    REQUIRE(rsd_fit_context_bytes(&d, &fb) == RSD_OK);
    CHECK(fb.clamped && !fb.floored && fb.context == 24576); /* 3/4 of the KV: 96 blocks of 256 */
    CHECK_EQ_INT(http(&s, "GET", "/v1/models", NULL), 200);
    CHECK(strstr(g_body, "\"24576\"") != NULL);
    CHECK_EQ_INT(status_field(&s, "a", "pid"), pid_a);
    status_state(&s, "a", state, sizeof state);
    CHECK_EQ_STR(state, "ready");
    CHECK(log_has(&s, "b: ctx 32768 clamped to 24576 tokens"));
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* ---- leases: ready only when the memory is really free ---------------------------- */
/* GET /_rsd/lease/ID: "waiting" in out ("null" when ready), and device.<field> (-1 when
   absent or null; field NULL: none). false when the lease is not there. */
static bool lease_look(const serve_proc *s, int64_t id, char *out, size_t cap, const char *field, int64_t *v) {
    rsd_json_doc d;
    char p[64];
    int w;
    snprintf(p, sizeof p, "/_rsd/lease/%lld", (long long)id);
    out[0] = 0;
    if (v) *v = -1;
    if (http(s, "GET", p, NULL) != 200 || rsd_json_parse(&d, g_body, strlen(g_body), g_toks, 8192) <= 0) return false;
    w = rsd_json_find(&d, 0, "waiting");
    if (w < 0) return false;
    if (rsd_json_str(&d, w, out, cap, NULL) != RSD_OK) snprintf(out, cap, "null");
    if (field && v) (void)rsd_json_int64(&d, rsd_json_find(&d, rsd_json_find(&d, 0, "device"), field), v);
    return true;
}

typedef struct lease_want { int64_t id; const char *waiting, *field; int64_t want; } lease_want;
static bool lease_is(const serve_proc *s, const void *arg) {
    const lease_want *w = (const lease_want *)arg;
    char wt[32];
    int64_t v;
    return lease_look(s, w->id, wt, sizeof wt, w->field, &v) && !strcmp(wt, w->waiting) && (!w->field || v == w->want);
}
static bool wait_lease(const serve_proc *s, int64_t id, const char *waiting, const char *field, int64_t want) {
    lease_want w;
    char wt[32];
    int64_t v;
    w.id = id;
    w.waiting = waiting;
    w.field = field;
    w.want = want;
    if (wait_until(s, lease_is, &w, 30000)) return true;
    (void)lease_look(s, id, wt, sizeof wt, field, &v);
    printf("  lease %lld: waiting %s, device.%s %lld; waited for %s, %lld\n", (long long)id, wt, field ? field : "-",
           (long long)v, waiting, (long long)want);
    return false;
}
static bool lease_reads_above(const serve_proc *s, const void *arg) {
    const int64_t *a = (const int64_t *)arg; /* {id, reads} */
    char wt[32];
    int64_t v;
    return lease_look(s, a[0], wt, sizeof wt, "reads", &v) && v > a[1] + 2;
}

/* The history's lease events for lease id (granted 4 GiB): the one at the take, not
   ready, waiting for the processes, then (awaited) the one telling it ready. */
static bool lease_events_told(const serve_proc *s, int64_t id) {
    sse_buf *sb = (sse_buf *)calloc(1, sizeof *sb);
    char taken[160], ready[160];
    const char *p, *q;
    bool ok;
    if (!sb) return false;
    snprintf(taken, sizeof taken, "\"lease\":%lld,\"requested\":4294967296,\"granted\":4294967296,\"ready\":false,"
             "\"waiting\":\"processes\"", (long long)id);
    snprintf(ready, sizeof ready, "\"lease\":%lld,\"requested\":4294967296,\"granted\":4294967296,\"ready\":true,"
             "\"waiting\":null", (long long)id);
    sb->fd = sse_open(s->port, "/_rsd/events?since=0", NULL);
    ok = sb->fd >= 0 && sse_wait(sb, ready);
    p = strstr(sb->b, taken);
    q = strstr(sb->b, ready);
    ok = ok && p && q && p < q && strstr(q + 1, ready) == NULL;
    /* both are lease events (a release would be lease_release) */
    while (ok && p > sb->b && p[-1] != '\n') p--;
    while (ok && q > sb->b && q[-1] != '\n') q--;
    ok = ok && !strncmp(p, "data: ", 6) && !strncmp(q, "data: ", 6) && p - sb->b >= 13 && q - sb->b >= 13 &&
         !strncmp(p - 13, "event: lease\n", 13) && !strncmp(q - 13, "event: lease\n", 13);
    if (!ok) printf("  lease events:\n%.3000s\n", sb->b);
    if (sb->fd >= 0) close(sb->fd);
    free(sb);
    return ok;
}

/* On vram_budget = auto a lease is ready only when a device reading after the exits shows
   the memory gone. The fake NVML plays a driver that keeps a's 4 GiB after a has exited:
   first still listed under a's pid, then under no process while the used figure stays;
   the lease says "waiting": "device" with the figures, and rsd-serve reads the device
   again by itself (no request comes), beside the readings for a start (c) that waits for
   the same memory. Once the figure drops the lease turns ready, with a second lease
   event, and c starts; then nothing reads the device any more. */
static void test_serve_lease_device(void) {
    serve_proc s;
    char path[256], cfg[1024], script[256], wt[96], buf[4096];
    const char *args[] = {"--config", path, NULL};
    int64_t pid_a, pid_b, id, v, ra[2], reads;
    int fd, n, r;
    if (!nvml_setup("test_serve_lease_device", "nvml3.txt", "lease.ini", path, sizeof path)) return;
    gpu("10737418240,0");
    /* a 10 GiB GPU less a 1 GiB margin: 9 GiB for a and b (4 GiB each) */
    snprintf(cfg, sizeof cfg, "max_models = 3\nvram_budget = auto\nvram_margin = 1G\n[model a]\nmodel = %s\n"
             "reserve = 4G\n[model b]\nmodel = %s\nreserve = 4G\npinned = true\n[model c]\nmodel = %s\nreserve = 1G\n",
             model_file("a"), model_file("b"), model_file("c"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("b", false)), 200);
    pid_a = status_field(&s, "a", "pid");
    pid_b = status_field(&s, "b", "pid");
    REQUIRE(pid_a > 0 && pid_b > 0);
    snprintf(script, sizeof script, "10737418240,8589934592,%lld=4294967296,%lld=4294967296", (long long)pid_a,
             (long long)pid_b);
    gpu(script);
    /* 4 GiB: 1 GiB is free, a (least recently used) stops; not ready while it runs */
    CHECK_EQ_INT(http(&s, "POST", "/_rsd/lease", "{\"bytes\":\"4G\",\"restore\":true}"), 200);
    CHECK(json_int("granted") == (int64_t)4 << 30);
    CHECK(strstr(g_body, "\"ready\":false,\"waiting\":\"processes\",\"exiting\":[\"a\"]") != NULL);
    CHECK(strstr(g_body, "\"stopped\":[\"a\"]") != NULL);
    id = json_int("id");
    REQUIRE(id > 0);
    /* a has exited; the device still shows its pid holding 4 GiB: not ready */
    CHECK(wait_lease(&s, id, "device", "stopped_bytes", (int64_t)4 << 30));
    CHECK(kill((pid_t)pid_a, 0) == -1 && errno == ESRCH);
    CHECK(strstr(g_body, "\"ready\":false") != NULL && strstr(g_body, "\"name\":\"nvml0\"") != NULL);
    CHECK(lease_look(&s, id, wt, sizeof wt, "free_bytes", &v) && v == (int64_t)2 << 30);
    CHECK(lease_look(&s, id, wt, sizeof wt, "needed_bytes", &v) && v == (int64_t)4 << 30);
    CHECK(log_has(&s, "the stopped processes have exited, but nvml0 shows 2.00 GiB free (4.00 GiB needed)"));
    /* c (1 GiB) fits the budget beside b (pinned) and the lease, not beside the 4 GiB the
       device still shows: it waits for that memory too (read at devmem_service's pace) */
    fd = raw_connect(s.port);
    REQUIRE(fd >= 0);
    REQUIRE(raw_post(fd, "/v1/chat/completions", chat("c", false)) == 0);
    CHECK(wait_field(&s, "c", "waiting", 1));
    /* the lease's device is read again by itself while it waits (beside c's readings) */
    ra[0] = id;
    CHECK(lease_look(&s, id, wt, sizeof wt, "reads", &ra[1]) && ra[1] >= 1);
    CHECK(wait_until(&s, lease_reads_above, ra, 30000));
    /* a's pid is no longer listed, but the used figure stays: still not ready */
    snprintf(script, sizeof script, "10737418240,8589934592,%lld=4294967296", (long long)pid_b);
    gpu(script);
    CHECK(wait_lease(&s, id, "device", "stopped_bytes", 0));
    CHECK(strstr(g_body, "\"ready\":false") != NULL);
    CHECK(lease_look(&s, id, wt, sizeof wt, "free_bytes", &v) && v == (int64_t)2 << 30);
    /* the figure drops: ready, told by a second lease event */
    snprintf(script, sizeof script, "10737418240,4294967296,%lld=4294967296", (long long)pid_b);
    gpu(script);
    CHECK(wait_lease(&s, id, "null", NULL, 0));
    CHECK(strstr(g_body, "\"ready\":true,\"waiting\":null") != NULL);
    /* and c, held by the same memory, starts and is answered */
    n = 0;
    buf[0] = 0;
    while ((size_t)n + 1 < sizeof buf && !strstr(buf, "\r\n\r\n") &&
           (r = raw_read(fd, buf + n, sizeof buf - 1 - (size_t)n)) > 0) {
        n += r;
        buf[n] = 0;
    }
    CHECK(strncmp(buf, "HTTP/1.1 200", 12) == 0);
    close(fd);
    CHECK(lease_events_told(&s, id));
    snprintf(wt, sizeof wt, "lease %lld: ready: nvml0 shows 6.00 GiB free", (long long)id);
    CHECK(log_has(&s, wt));
    /* nothing waits: nothing is read (two looks see the same count) */
    reads = dm_field(&s, true, "reads");
    CHECK_EQ_INT(dm_field(&s, true, "reads"), reads);
    /* ready stays ready: what the holder then allocates does not take it back */
    gpu("10737418240,10737418240");
    CHECK(lease_look(&s, id, wt, sizeof wt, NULL, NULL) && !strcmp(wt, "null"));
    snprintf(script, sizeof script, "/_rsd/lease/%lld", (long long)id);
    CHECK_EQ_INT(http(&s, "DELETE", script, NULL), 200);
    CHECK(wait_new_pid(&s, "a", pid_a) > 0); /* restored */
    CHECK_EQ_INT(serve_stop(&s), 0);
    unsetenv("RESIDENCY_NVML");
    unsetenv("FAKE_NVML_FILE");
}

/* The ensurer's free request reads rsd-serve's "ready": while the device still shows the
   stopped child's memory after it has exited, the request polls and never reports the
   memory freed; its deadline ends it (RSD_ERR_TIMEOUT, DEGRADED, the lease id kept), the
   lease says it waits on the device, and the release brings the model back. */
static void test_ensure_lease_device(void) {
    serve_proc s;
    char path[256], cfg[1024], script[256], lease[48];
    const char *args[] = {"--config", path, NULL};
    rsd_ensurer_desc ed;
    rsd_ensure_req q;
    rsd_ensure_result res;
    rsd_ensurer *e;
    int64_t pid_a, pid_b;
    int rc;
    if (!nvml_setup("test_ensure_lease_device", "nvml4.txt", "elease.ini", path, sizeof path)) return;
    gpu("10737418240,0");
    snprintf(cfg, sizeof cfg, "max_models = 2\nvram_budget = auto\nvram_margin = 1G\n[model a]\nmodel = %s\n"
             "reserve = 4G\n[model b]\nmodel = %s\nreserve = 4G\n", model_file("a"), model_file("b"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    memset(&ed, 0, sizeof ed);
    ed.no_state = true;
    ed.ignore_env = true;
    REQUIRE((e = rsd_ensurer_create(&ed)) != NULL);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("b", false)), 200);
    pid_a = status_field(&s, "a", "pid");
    pid_b = status_field(&s, "b", "pid");
    REQUIRE(pid_a > 0 && pid_b > 0);
    /* the device keeps a's 4 GiB under its pid whatever happens */
    snprintf(script, sizeof script, "10737418240,8589934592,%lld=4294967296,%lld=4294967296", (long long)pid_a,
             (long long)pid_b);
    gpu(script);
    memset(&q, 0, sizeof q);
    q.url = s.url;
    q.free_bytes = (uint64_t)4 << 30;
    q.timeout_ms = 4000;
    REQUIRE(rsd_ensurer_begin(e, &q, rsd_now_ms()) == RSD_OK);
    rc = ensure_to_end(e, &res);
    CHECK_EQ_INT(rc, RSD_ERR_TIMEOUT);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_DEGRADED);
    CHECK(strstr(res.message, "not ready within") != NULL);
    CHECK(res.requests >= 2);
    REQUIRE(strncmp(res.lease_id, "rsd-serve:", 10) == 0);
    snprintf(lease, sizeof lease, "%s", res.lease_id);
    /* a has gone; the lease waits on the device, which still shows a's bytes */
    CHECK(wait_lease(&s, atoll(lease + 10), "device", "stopped_bytes", (int64_t)4 << 30));
    CHECK(kill((pid_t)pid_a, 0) == -1 && errno == ESRCH);
    CHECK_EQ_INT(rsd_ensurer_lease_return_sync(e, &q, lease, &res), 1);
    CHECK(wait_new_pid(&s, "a", pid_a) > 0);
    if (rsdt_cur_failed) printf("  %s\n", res.message);
    rsd_ensurer_destroy(e);
    CHECK_EQ_INT(serve_stop(&s), 0);
    unsetenv("RESIDENCY_NVML");
    unsetenv("FAKE_NVML_FILE");
}

/* With a fixed vram_budget nothing reads a device: a lease turns ready when the process
   stopped for it has exited, with its lease event, and never waits on a device. */
static void test_serve_lease_fixed(void) {
    serve_proc s;
    char path[256], cfg[1024], p[64], wt[96];
    const char *args[] = {"--config", path, NULL};
    int64_t pid_a, id;
    make_dir();
    snprintf(path, sizeof path, "%s/lfixed.ini", g_dir);
    snprintf(cfg, sizeof cfg, "max_models = 2\nvram_budget = 8G\n[model a]\nmodel = %s\nreserve = 4G\n"
             "[model b]\nmodel = %s\nreserve = 4G\n", model_file("a"), model_file("b"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("b", false)), 200);
    pid_a = status_field(&s, "a", "pid");
    REQUIRE(pid_a > 0);
    CHECK_EQ_INT(http(&s, "POST", "/_rsd/lease", "{\"bytes\":\"4G\"}"), 200);
    CHECK(strstr(g_body, "\"ready\":false,\"waiting\":\"processes\",\"exiting\":[\"a\"]") != NULL);
    id = json_int("id");
    REQUIRE(id > 0);
    snprintf(p, sizeof p, "/_rsd/lease/%lld", (long long)id);
    CHECK(wait_until(&s, path_ready, p, 30000));
    CHECK(strstr(g_body, "\"ready\":true,\"waiting\":null") != NULL);
    CHECK(kill((pid_t)pid_a, 0) == -1 && errno == ESRCH); /* ready: the process is gone */
    CHECK(lease_events_told(&s, id));
    snprintf(wt, sizeof wt, "lease %lld: ready: the stopped processes have exited", (long long)id);
    CHECK(log_has(&s, wt));
    CHECK_EQ_INT(dm_field(&s, true, "reads"), -1); /* no device_memory: nothing was read */
    CHECK_EQ_INT(http(&s, "DELETE", p, NULL), 200);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    RUN(test_config_auto);
    RUN(test_serve_lease_fixed);
    if (!getenv("RSD_TEST_QEMU")) {
        RUN(test_serve_auto);
        RUN(test_serve_vram_figures);
        RUN(test_serve_foreign_held);
        RUN(test_serve_never_fits);
        RUN(test_serve_lease_device);
        RUN(test_ensure_lease_device);
    } else printf("test_serve_auto, test_serve_vram_figures, test_serve_foreign_held, test_serve_never_fits, "
                  "test_serve_lease_device, test_ensure_lease_device: skipped under qemu-user (the fake NVML is a host library)\n");
    RUN(test_serve_clamp_by_bytes);
    RUN(test_serve_clamp_by_estimate);
    serve_cleanup();
    return RSD_TEST_END();
}
