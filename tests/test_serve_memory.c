/* test_serve_memory.c -- what each model costs in rsd-serve: first the pure parts
   (apps/rsd-serve/rsd_serve_mem.h: a start's parameters from its arguments, the record kept
   in state_dir, the state_dir key), then the program with rsd-sim llama-server children
   that print llama-server's -lv 4 buffer lines (rsd-sim --buffers) and tiny GGUF files
   (tests/tiny_gguf.h): the estimate from the header before anything ran, the child's
   own figure learned once it is ready and given to the pool, kept in state_dir and back
   from the first byte after a restart, a corrupt record ignored, the OS's figure (RSS)
   when a child prints none, eviction by bytes (a budget that holds a's learned figure
   or b's estimate, not both) with the bytes named in the evict event, the log and
   /metrics, and a lease's bytes in its events. Waits are on events
   (tests/serve_harness.h). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency_http.h"
#include "../apps/rsd-serve/rsd_serve.h"
#include "../apps/rsd-serve/rsd_serve_kv.h"
#include "../apps/rsd-serve/rsd_serve_mem.h"
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

#define SIM_BIN "build/bin/rsd-sim"
#include "serve_harness.h"
#include "tiny_gguf.h"

#define MiB ((uint64_t)1 << 20)

/* ---- pure parts --------------------------------------------------------------------- */
static void test_mem_params(void) {
    rsrv_mem_params p;
    char t[RSRV_MEM_PARAMS_MAX];
    const char *a1[] = {"--jinja", "-c", "4096", "-ngl", "0", "-ctk", "q8_0", "--cache-type-v=q8_0", "-ub", "256",
                        "-fa", "on", "-kvu", NULL};
    const char *a2[] = {"--ctx-size", "1000", "--parallel=2", "--n-gpu-layers", "all", "--swa-full", "-b", NULL};
    rsrv_mem_params_init(&p, 8192, 4, "99");
    CHECK_EQ_INT(p.st.n_ctx, 8192);
    CHECK_EQ_INT(p.st.n_parallel, 4);
    CHECK_EQ_INT(p.st.n_gpu_layers, 99);
    rsrv_mem_params_args(&p, a1); /* later arguments win, as in llama.cpp */
    CHECK_EQ_INT(p.st.n_ctx, 4096);
    CHECK_EQ_INT(p.st.n_gpu_layers, RSD_GGUF_NGL_NONE);
    CHECK_EQ_STR(p.st.cache_type_k, "q8_0");
    CHECK_EQ_STR(p.st.cache_type_v, "q8_0");
    CHECK_EQ_INT(p.st.n_ubatch, 256);
    CHECK_EQ_INT(p.st.kv_unified, 1);
    REQUIRE(rsrv_mem_params_text(&p, t, sizeof t) > 0);
    CHECK_EQ_STR(t, "c=4096 np=4 ngl=0 ctk=q8_0 ctv=q8_0 b=0 ub=256 kvu=1 swa=0 fa=on");
    rsrv_mem_params_args(&p, a2); /* "-b" without a value at the end: not read */
    CHECK_EQ_INT(p.st.n_ctx, 1000);
    CHECK_EQ_INT(p.st.n_parallel, 2);
    CHECK_EQ_INT(p.st.n_gpu_layers, -1);
    CHECK(p.st.swa_full);
    CHECK_EQ_INT(p.st.n_batch, 0);
    rsrv_mem_params_init(&p, 0, 0, "");
    CHECK_EQ_INT(p.st.n_gpu_layers, 0); /* not given: rsd-serve decides by its budget */
    REQUIRE(rsrv_mem_params_text(&p, t, sizeof t) > 0);
    CHECK_EQ_STR(t, "c=0 np=0 ngl=- ctk=f16 ctv=f16 b=0 ub=0 kvu=0 swa=0 fa=");
}

static void test_mem_record(void) {
    rsrv_mem_rec r, back;
    char text[2048], bad[2048], name[RSRV_MEM_NAME_MAX];
    int n;
    memset(&r, 0, sizeof r);
    snprintf(r.model, sizeof r.model, "chat-8b");
    snprintf(r.params, sizeof r.params, "c=8192 np=4 ngl=all ctk=f16 ctv=f16 b=0 ub=0 kvu=0 swa=0 fa=");
    snprintf(r.build, sizeof r.build, "/opt/llama/llama-server 1234 1733400000");
    snprintf(r.source, sizeof r.source, "log");
    r.fig.model = 100 * MiB;
    r.fig.kv = 25 * MiB;
    r.fig.compute = 3 * MiB;
    r.fig.total = 128 * MiB;
    r.fig.device = 0;
    n = rsrv_mem_write(&r, text, sizeof text);
    REQUIRE(n > 0);
    CHECK(rsrv_mem_read(text, (size_t)n, &back));
    CHECK_EQ_STR(back.model, "chat-8b");
    CHECK_EQ_STR(back.params, r.params);
    CHECK_EQ_STR(back.build, r.build);
    CHECK_EQ_STR(back.source, "log");
    CHECK(back.fig.total == 128 * MiB && back.fig.kv == 25 * MiB && back.fig.compute == 3 * MiB);
    CHECK(!rsrv_mem_read(text, (size_t)n - 12, &back)); /* cut: no source line */
    CHECK(!rsrv_mem_read("", 0, &back));
    memcpy(bad, text, (size_t)n + 1);
    memcpy(strstr(bad, "rsd-mem 1") + 8, "2", 1); /* another version */
    CHECK(!rsrv_mem_read(bad, (size_t)n, &back));
    memcpy(bad, text, (size_t)n + 1);
    memcpy(strstr(bad, "total_bytes ") + 12, "0", 1); /* 034217728: parts above the total */
    CHECK(!rsrv_mem_read(bad, (size_t)n, &back));
    n = snprintf(bad, sizeof bad, "%smodel x\n", text); /* a line twice */
    CHECK(!rsrv_mem_read(bad, (size_t)n, &back));
    snprintf(r.model, sizeof r.model, "a\nb"); /* no line breaks in a field */
    CHECK_EQ_INT(rsrv_mem_write(&r, text, sizeof text), -1);
    rsrv_mem_name(name, 0xabcdefull);
    CHECK_EQ_STR(name, "mem-0000000000abcdef.txt");
}

static void test_state_dir_key(void) {
    rsrv_config *c = (rsrv_config *)calloc(2, sizeof *c);
    char err[RSRV_ERR_MAX], ini[1 << 14];
    int n;
    REQUIRE(c);
    rsrv_config_init(&c[0]);
    CHECK_EQ_INT(rsrv_parse_ini(&c[0], "state_dir = /var/lib/residency\n[model a]\nmodel = /m/a.gguf\n", 55, "s.ini",
                                err, sizeof err), 0);
    CHECK_EQ_STR(c[0].state_dir, "/var/lib/residency");
    CHECK(!strcmp(rsrv_global_keys[RSRV_GK_STATE_DIR].name, "state_dir"));
    n = rsrv_write_ini(&c[0], ini, sizeof ini);
    REQUIRE(n > 0);
    CHECK(strstr(ini, "state_dir = /var/lib/residency\n") != NULL);
    rsrv_config_init(&c[1]);
    CHECK_EQ_INT(rsrv_parse_ini(&c[1], ini, (size_t)n, "w.ini", err, sizeof err), 0);
    CHECK(rsrv_config_equal(&c[0], &c[1]));
    c[1].state_dir[0] = 0;
    CHECK(!rsrv_config_equal(&c[0], &c[1]));
    free(c);
}

/* ---- the program ---------------------------------------------------------------------- */
/* A tiny GGUF g_dir/NAME.gguf of `layers` blocks; its path (static, one of 4). */
static const char *gguf_file(const char *name, uint32_t layers) {
    static char p[4][256];
    static int i;
    char *out = p[i++ & 3];
    tg_shape sh;
    memset(&sh, 0, sizeof sh);
    sh.name = name;
    sh.layers = layers;
    sh.embd = 64;
    sh.heads = 4;
    sh.heads_kv = 4;
    sh.ff = 128;
    sh.wtype = TG_F32;
    sh.ctx = 2048;
    snprintf(out, 256, "%s/%s.gguf", g_dir, name);
    return tiny_gguf_write_shape(out, &sh, 7 + layers) == 0 ? out : "";
}

/* What rsd_gguf_estimate_start makes of path at -c ctx -np np (the figure rsd-serve's
   /status must show before anything ran). */
static uint64_t estimate(const char *path, uint32_t ctx, int np, uint64_t *kv) {
    static rsd_gguf g;
    rsd_gguf_start st;
    rsd_gguf_estimate e;
    rsd_gguf_init(&g, NULL);
    if (rsd_gguf_read_file(&g, path) != RSD_OK) return 0;
    memset(&st, 0, sizeof st);
    st.n_ctx = ctx;
    st.n_parallel = np;
    if (rsd_gguf_estimate_start(&g.info, &st, &e) != RSD_OK) return 0;
    if (kv) *kv = e.kv;
    return e.total;
}

static bool mem_positive(const serve_proc *s, const void *arg) {
    const mem_want *w = (const mem_want *)arg;
    return mem_field(s, w->id, w->fig, w->field, NULL, 0) > 0;
}
static bool has_event(const serve_proc *s, const void *needle) {
    int fd = sse_open(s->port, "/_rsd/events?since=0", NULL);
    char buf[65536];
    size_t got = 0;
    bool ok = false;
    uint64_t end = rsd_now_ms() + 2000;
    if (fd < 0) return false;
    while (!ok && got < sizeof buf - 1 && rsd_now_ms() < end) { /* the replay comes at once */
        struct pollfd p;
        long n;
        p.fd = fd;
        p.events = POLLIN;
        p.revents = 0;
        if (poll(&p, 1, 200) <= 0) continue;
        n = read(fd, buf + got, sizeof buf - 1 - got);
        if (n <= 0) break;
        got += (size_t)n;
        buf[got] = 0;
        ok = strstr(buf, (const char *)needle) != NULL;
    }
    close(fd);
    return ok;
}

/* Whether process pid's command line has the argument arg (/proc/PID/cmdline). */
static bool cmdline_has(int64_t pid, const char *arg) {
    char path[64], buf[8192];
    size_t n, i;
    FILE *f;
    snprintf(path, sizeof path, "/proc/%lld/cmdline", (long long)pid);
    if (pid <= 0 || !(f = fopen(path, "rb"))) return false;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    for (i = 0; i < n; i += strlen(buf + i) + 1)
        if (!strcmp(buf + i, arg)) return true;
    return false;
}

/* a learns its figure from its own buffer lines, keeps it in state_dir, and has it
   back from the first byte after a restart; a corrupt record is ignored. */
static void test_serve_learn(void) {
    serve_proc s;
    char path[256], cfg[2048], state[256], src[32], first[256];
    const char *args[] = {"--config", path, NULL};
    const char *ga;
    uint64_t est_a, kv_a;
    bool all600 = false;
    make_dir();
    ga = gguf_file("ma", 1);
    REQUIRE(ga[0]);
    est_a = estimate(ga, 1024, 2, &kv_a);
    REQUIRE(est_a > 0);
    snprintf(path, sizeof path, "%s/learn.ini", g_dir);
    snprintf(state, sizeof state, "%s/state", g_dir);
    snprintf(cfg, sizeof cfg,
             "max_models = 2\nvram_budget = 1G\nstate_dir = %s\n[model a]\nmodel = %s\nctx = 1024\nparallel = 2\n"
             "args = --buffers 104857600,26214400,3145728\n",
             state, ga);
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    /* before anything ran: the header's estimate, and admission counts it */
    CHECK_EQ_INT(mem_field(&s, "a", "estimate", "total", NULL, 0), (int64_t)est_a);
    CHECK_EQ_INT(mem_field(&s, "a", "estimate", "kv", NULL, 0), (int64_t)kv_a);
    CHECK_EQ_INT(mem_field(&s, "a", "measured", "total", NULL, 0), -1);
    (void)mem_field(&s, "a", "", "bytes_from", src, sizeof src);
    CHECK_EQ_STR(src, "estimate");
    CHECK_EQ_INT(mem_field(&s, "a", "", "bytes", NULL, 0), (int64_t)est_a);
    CHECK_EQ_INT(status_field(&s, "a", "reserve_bytes"), (int64_t)est_a);
    /* it runs: its own report (100 + 25 + 3 MiB) replaces the estimate */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    CHECK(wait_mem(&s, "a", "measured", "total", (int64_t)(128 * MiB)));
    CHECK_EQ_INT(mem_field(&s, "a", "measured", "model", NULL, 0), (int64_t)(100 * MiB));
    CHECK_EQ_INT(mem_field(&s, "a", "measured", "kv", NULL, 0), (int64_t)(25 * MiB));
    CHECK_EQ_INT(mem_field(&s, "a", "measured", "compute", NULL, 0), (int64_t)(3 * MiB));
    (void)mem_field(&s, "a", "", "source", src, sizeof src);
    CHECK_EQ_STR(src, "log");
    CHECK_EQ_INT(mem_field(&s, "a", "", "bytes", NULL, 0), (int64_t)(128 * MiB));
    CHECK_EQ_INT(status_field(&s, "a", "reserve_bytes"), (int64_t)(128 * MiB)); /* for its next start */
    CHECK(has_event(&s, "\"event\":\"memory\""));
    CHECK(log_has(&s, "a: took 128.0 MiB (model 100.0 MiB, KV 25.0 MiB, compute 3.0 MiB; its own report)"));
    CHECK(cmdline_has(status_field(&s, "a", "pid"), "-lv")); /* its report is asked for */
    CHECK_EQ_INT(http(&s, "GET", "/metrics", NULL), 200);
    CHECK(strstr(g_body, "rsd_serve_memory_bytes{model=\"a\",figure=\"measured\",part=\"total\"} 134217728\n") != NULL);
    CHECK(strstr(g_body, "rsd_serve_admit_bytes{model=\"a\"} 134217728\n") != NULL);
    CHECK_EQ_INT(dir_files(state, ".txt", &all600, first, sizeof first), 1);
    CHECK(all600);
    CHECK_EQ_INT(serve_stop(&s), 0);
    /* --check prints both figures */
    {
        const char *argv[] = {SERVE_BIN, "--config", path, "--check", NULL};
        char out[16384];
        CHECK_EQ_INT(run_prog_out(argv, out, sizeof out, 1), 0);
        CHECK(strstr(out, "# memory a: estimate model ") != NULL);
        CHECK(strstr(out, "; measured model 104857600 kv 26214400 compute 3145728 total 134217728 (log)\n") != NULL);
    }
    /* a restart: the kept figure counts from the first byte, before a starts */
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(mem_field(&s, "a", "measured", "total", NULL, 0), (int64_t)(128 * MiB));
    CHECK_EQ_INT(status_field(&s, "a", "reserve_bytes"), (int64_t)(128 * MiB));
    CHECK_EQ_INT(status_field(&s, "a", "pid"), 0);
    /* its report known: a starts without -lv 4, and nothing is learned again */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    CHECK(status_field(&s, "a", "pid") > 0 && !cmdline_has(status_field(&s, "a", "pid"), "-lv"));
    CHECK(!log_has(&s, "a: took"));
    (void)mem_field(&s, "a", "", "source", src, sizeof src);
    CHECK_EQ_STR(src, "log");
    CHECK_EQ_INT(serve_stop(&s), 0);
    /* a corrupt record is ignored: the estimate again, and rsd-serve runs */
    write_file(first, "rsd-mem 1\nmodel a\ntotal_bytes nonsense\n");
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(mem_field(&s, "a", "measured", "total", NULL, 0), -1);
    CHECK_EQ_INT(status_field(&s, "a", "reserve_bytes"), (int64_t)est_a);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    CHECK(wait_mem(&s, "a", "measured", "total", (int64_t)(128 * MiB))); /* learned and kept again */
    CHECK_EQ_INT(serve_stop(&s), 0);
    CHECK(file_has(first, "total_bytes 134217728\n"));
}

/* A budget that holds a's learned figure or b's estimate, not both: b's start evicts a
   (count allows both), and the evict event names the bytes. A child that prints no
   buffer lines gets the OS's figure. A lease names the bytes it stops. */
static void test_serve_evict_bytes(void) {
    serve_proc s;
    char path[256], cfg[2048], src[32];
    const char *args[] = {"--config", path, NULL};
    const char *ga, *gb;
    uint64_t est_b, budget;
    make_dir();
    ga = gguf_file("ea", 1);
    gb = gguf_file("eb", 2);
    REQUIRE(ga[0] && gb[0]);
    est_b = estimate(gb, 512, 1, NULL);
    REQUIRE(est_b > 0 && est_b < 4 * MiB);
    budget = 4 * MiB + est_b - 1;
    snprintf(path, sizeof path, "%s/evict.ini", g_dir);
    snprintf(cfg, sizeof cfg,
             "max_models = 3\nvram_budget = %llu\n[model a]\nmodel = %s\nctx = 512\nparallel = 1\n"
             "args = --buffers 2097152,1048576,1048576\n[model b]\nmodel = %s\nctx = 512\nparallel = 1\n",
             (unsigned long long)budget, ga, gb);
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    CHECK(wait_mem(&s, "a", "measured", "total", (int64_t)(4 * MiB)));
    CHECK(wait_mem(&s, "a", "", "bytes", (int64_t)(4 * MiB)));
    /* b (its estimate) does not fit beside a (4 MiB): a goes */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("b", false)), 200);
    CHECK(wait_state(&s, "a", "unloaded"));
    CHECK(has_event(&s, "\"victim\":{\"model\":\"a\",\"bytes\":4194304,\"bytes_from\":\"measured\""));
    {
        char needle[256];
        snprintf(needle, sizeof needle, "\"for\":[{\"model\":\"b\",\"bytes\":%llu,\"bytes_from\":\"estimate\"",
                 (unsigned long long)est_b);
        CHECK(has_event(&s, needle));
        snprintf(needle, sizeof needle, "\"budget_bytes\":%llu", (unsigned long long)budget);
        CHECK(has_event(&s, needle));
    }
    CHECK(log_has(&s, "a: stopping pid"));
    CHECK(log_has(&s, "(evict: it holds 4.0 MiB (measured, log;"));
    CHECK(log_has(&s, "; room for b "));
    /* b printed no buffer lines: the OS's figure (its RSS) after a while */
    {
        mem_want w;
        w.id = "b";
        w.fig = "measured";
        w.field = "total";
        w.want = 0;
        CHECK(wait_until(&s, mem_positive, &w, 30000));
        (void)mem_field(&s, "b", "", "source", src, sizeof src);
        CHECK_EQ_STR(src, "rss");
    }
    /* a lease of the whole budget stops b and names its bytes */
    {
        char body[128], del[64];
        const char *id;
        snprintf(body, sizeof body, "{\"bytes\":%llu,\"ttl_ms\":60000}", (unsigned long long)budget);
        CHECK_EQ_INT(http(&s, "POST", "/_rsd/lease", body), 200);
        id = strstr(g_body, "\"id\":");
        snprintf(del, sizeof del, "/_rsd/lease/%d", id ? atoi(id + 5) : 0);
        CHECK(has_event(&s, "\"event\":\"lease\""));
        CHECK(has_event(&s, "\"stopped\":[{\"model\":\"b\",\"bytes\":"));
        CHECK(log_has(&s, "; stopping [b "));
        CHECK_EQ_INT(http(&s, "DELETE", del, NULL), 200);
        CHECK(has_event(&s, "\"event\":\"lease_release\""));
    }
    CHECK_EQ_INT(serve_stop(&s), 0);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    (void)tiny_gguf_write_set; /* tiny_gguf.h's set: the real-server tests' */
    RUN(test_mem_params);
    RUN(test_mem_record);
    RUN(test_state_dir_key);
    RUN(test_serve_learn);
    RUN(test_serve_evict_bytes);
    serve_cleanup();
    return RSD_TEST_END();
}
