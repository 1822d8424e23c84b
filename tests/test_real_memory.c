/* test_real_memory.c -- what each model costs, with REAL llama-server children of
   rsd-serve (build/bin/rsd-serve) on tiny models made on the spot: the figure
   rsd-serve learns once a child is ready is exactly what that child reported of its
   buffers (the child also writes its log to a file, --log-file, which the test reads
   with rsd_llama_log_line), it is kept in state_dir and counts from the first byte
   after a restart, and a budget that holds one model's bytes but not two makes a start
   evict by bytes (max_models allows both), the model started counted by its header's
   estimate; and on vram_budget = auto over the host's memory a lease is ready only once
   its children have exited and a reading of that memory shows the grant free. Skipped (one line, "0 passed, 0 failed") without llama-server
   (tests/real_server.h). Waits are on events (GET /_rsd/events between looks). */
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

static const char *real_chat(const char *model) {
    static char b[320];
    snprintf(b, sizeof b, "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":4}",
             model);
    return b;
}

static bool learned(const serve_proc *s, const void *id) {
    char src[16];
    (void)mem_field(s, (const char *)id, "", "source", src, sizeof src);
    return !strcmp(src, "log");
}

/* The child's own report, from its --log-file. 0, or -1. */
static int child_report(const char *path, rsd_llama_log *lg) {
    static char line[8192];
    FILE *f = fopen(path, "rb");
    rsd_llama_log_init(lg);
    if (!f) return -1;
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
        (void)rsd_llama_log_line(lg, line, n);
    }
    fclose(f);
    return lg->lines ? 0 : -1;
}

static int within(int64_t est, int64_t real) {
    int64_t d = est > real ? est - real : real - est;
    return d <= 65536 || (double)d <= 0.01 * (double)real;
}

/* The learned figure is the child's own report; kept, and back after a restart. */
static void test_real_learn_keep(void) {
    serve_proc s;
    rsd_llama_log lg;
    char global[900], models[900], logf[700], src[16];
    int64_t total;
    snprintf(logf, sizeof logf, "%s/tiny-a.log", g_models);
    snprintf(global, sizeof global, "vram_budget = 1G\nstate_dir = %s/state\n", g_models);
    snprintf(models, sizeof models, "[model tiny-a]\nmodel = @/tiny-a.gguf\nctx = 1024\nparallel = 2\nargs = --log-file %s\n",
             logf);
    REQUIRE(real_serve_start(&s, "learn", global, models) == 0);
    CHECK(mem_field(&s, "tiny-a", "estimate", "total", NULL, 0) > 0);
    CHECK_EQ_INT(mem_field(&s, "tiny-a", "measured", "total", NULL, 0), -1);
    CHECK_EQ_INT(status_field(&s, "tiny-a", "reserve_bytes"), mem_field(&s, "tiny-a", "estimate", "total", NULL, 0));
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", real_chat("tiny-a")), 200);
    CHECK(wait_until(&s, learned, "tiny-a", 30000));
    REQUIRE(child_report(logf, &lg) == 0);
    CHECK_EQ_INT(mem_field(&s, "tiny-a", "measured", "model", NULL, 0), (int64_t)lg.model);
    CHECK_EQ_INT(mem_field(&s, "tiny-a", "measured", "kv", NULL, 0), (int64_t)lg.kv);
    CHECK_EQ_INT(mem_field(&s, "tiny-a", "measured", "compute", NULL, 0), (int64_t)(lg.compute + lg.output));
    total = mem_field(&s, "tiny-a", "measured", "total", NULL, 0);
    CHECK_EQ_INT(total, (int64_t)(lg.model + lg.kv + lg.compute + lg.output));
    CHECK_EQ_INT(mem_field(&s, "tiny-a", "measured", "device", NULL, 0), 0); /* a CPU build: host memory */
    /* the estimate agrees on what it models exactly (the weights and the KV cache) */
    CHECK(within(mem_field(&s, "tiny-a", "estimate", "model", NULL, 0), (int64_t)lg.model));
    CHECK(within(mem_field(&s, "tiny-a", "estimate", "kv", NULL, 0), (int64_t)lg.kv));
    CHECK_EQ_INT(status_field(&s, "tiny-a", "reserve_bytes"), total);
    CHECK(log_has(&s, "tiny-a: took "));
    CHECK_EQ_INT(serve_stop(&s), 0);
    /* a restart: the figure counts before the model starts */
    REQUIRE(real_serve_start(&s, "learn", global, models) == 0);
    CHECK_EQ_INT(status_field(&s, "tiny-a", "pid"), 0);
    CHECK_EQ_INT(mem_field(&s, "tiny-a", "measured", "total", NULL, 0), total);
    (void)mem_field(&s, "tiny-a", "", "bytes_from", src, sizeof src);
    CHECK_EQ_STR(src, "measured");
    CHECK_EQ_INT(status_field(&s, "tiny-a", "reserve_bytes"), total);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* A budget of b's estimate and half of a's: a fits alone, b fits alone, not both (a's
   learned figure is within a factor of 2 of its estimate): b's start evicts a by bytes
   (max_models is 3), b counted by its estimate. */
static void test_real_evict_by_bytes(void) {
    serve_proc s;
    char global[256], src[16], needle[160];
    int64_t est_a, est_b;
    /* the estimates, from a first start that runs nothing */
    REQUIRE(real_serve_start(&s, "est", "",
                             "[model tiny-a]\nmodel = @/tiny-a.gguf\nctx = 512\nparallel = 1\n"
                             "[model tiny-b]\nmodel = @/tiny-b.gguf\nctx = 512\nparallel = 1\n") == 0);
    est_a = mem_field(&s, "tiny-a", "estimate", "total", NULL, 0);
    est_b = mem_field(&s, "tiny-b", "estimate", "total", NULL, 0);
    CHECK_EQ_INT(mem_field(&s, "tiny-a", "", "bytes", NULL, 0), 0); /* no budget: counted, not weighed */
    CHECK_EQ_INT(serve_stop(&s), 0);
    REQUIRE(est_a > 0 && est_b > 0 && est_a <= 2 * est_b);
    snprintf(global, sizeof global, "max_models = 3\nvram_budget = %lld\n", (long long)(est_b + est_a / 2));
    REQUIRE(real_serve_start(&s, "evict", global,
                             "[model tiny-a]\nmodel = @/tiny-a.gguf\nctx = 512\nparallel = 1\n"
                             "[model tiny-b]\nmodel = @/tiny-b.gguf\nctx = 512\nparallel = 1\n") == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", real_chat("tiny-a")), 200);
    CHECK(wait_until(&s, learned, "tiny-a", 30000));
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", real_chat("tiny-b")), 200);
    CHECK(wait_state(&s, "tiny-a", "unloaded"));
    (void)mem_field(&s, "tiny-b", "", "bytes_from", src, sizeof src);
    CHECK(!strcmp(src, "estimate") || !strcmp(src, "measured")); /* it may have learned by now */
    CHECK(log_has(&s, "tiny-a: stopping pid"));
    CHECK(log_has(&s, "(evict: it holds "));
    snprintf(needle, sizeof needle, "room for tiny-b %s", "");
    CHECK(log_has(&s, needle));
    CHECK(log_has(&s, "(estimate; estimated "));
    CHECK_EQ_INT(status_field(&s, NULL, "evictions"), 1);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* /proc/meminfo's figure for key, in bytes (0 when there is none). */
static uint64_t meminfo(const char *key) {
    static char text[16384];
    FILE *f = fopen("/proc/meminfo", "rb");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    uint64_t v = 0;
    if (f) fclose(f);
    if (rsd_devmem_parse_meminfo(text, n, key, &v) != RSD_OK) return 0;
    return v;
}

/* vram_budget = auto on this host's memory (/proc/meminfo; no GPU): a lease for more
   than can be freed stops both idle real children and is granted what the budget has
   left; its answer waits for the processes, and it turns ready only once they have
   exited and a reading of the host's memory taken after that shows the grant free (the
   log line says so, with the reading). The margin is a quarter of the host's memory: what
   other programs take meanwhile stays within it. Skipped (one line) on a host without
   /proc/meminfo or with less than half its memory available. */
static void test_real_lease_auto(void) {
    serve_proc s;
    char global[256], p[64], needle[96];
    uint64_t total = meminfo("MemTotal"), avail = meminfo("MemAvailable");
    int64_t id, pid_a, pid_b;
    if (!total || avail < total / 2) {
        printf("test_real_lease_auto: skipped (no /proc/meminfo, or less than half of it available)\n");
        return;
    }
    snprintf(global, sizeof global, "max_models = 2\nvram_budget = auto\nvram_margin = %lluM\n",
             (unsigned long long)(total / 4 >> 20));
    REQUIRE(real_serve_start(&s, "lease-auto", global,
                             "[model tiny-a]\nmodel = @/tiny-a.gguf\nctx = 256\n"
                             "[model tiny-b]\nmodel = @/tiny-b.gguf\nctx = 256\n") == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", real_chat("tiny-a")), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", real_chat("tiny-b")), 200);
    CHECK(wait_state(&s, "tiny-a", "ready") && wait_state(&s, "tiny-b", "ready"));
    pid_a = status_field(&s, "tiny-a", "pid");
    pid_b = status_field(&s, "tiny-b", "pid");
    REQUIRE(pid_a > 0 && pid_b > 0);
    CHECK_EQ_INT(http(&s, "POST", "/_rsd/lease", "{\"bytes\":\"1T\",\"restore\":true}"), 200);
    CHECK(strstr(g_body, "\"ready\":false,\"waiting\":\"processes\"") != NULL);
    CHECK(strstr(g_body, "\"stopped\":[\"tiny-a\",\"tiny-b\"]") != NULL);
    {
        rsd_json_doc d;
        REQUIRE(rsd_json_parse(&d, g_body, strlen(g_body), g_toks, 8192) > 0);
        id = -1;
        (void)rsd_json_int64(&d, rsd_json_find(&d, 0, "id"), &id);
    }
    REQUIRE(id > 0);
    snprintf(p, sizeof p, "/_rsd/lease/%lld", (long long)id);
    CHECK(wait_until(&s, path_ready, p, 60000));
    CHECK(strstr(g_body, "\"waiting\":null") != NULL);
    CHECK(kill((pid_t)pid_a, 0) == -1 && kill((pid_t)pid_b, 0) == -1);
    snprintf(needle, sizeof needle, "lease %lld: ready: host shows ", (long long)id);
    CHECK(log_has(&s, needle));
    CHECK(log_has(&s, "since the stopped processes exited"));
    CHECK_EQ_INT(http(&s, "DELETE", p, NULL), 200);
    CHECK(wait_new_pid(&s, "tiny-a", pid_a) > 0 && wait_new_pid(&s, "tiny-b", pid_b) > 0); /* restored */
    CHECK_EQ_INT(serve_stop(&s), 0);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    REAL_SKIP_OR_FIND(g_bin);
    if (real_serve_setup() != 0) return RSD_TEST_END();
    RUN(test_real_learn_keep);
    RUN(test_real_evict_by_bytes);
    RUN(test_real_lease_auto);
    real_serve_cleanup();
    return RSD_TEST_END();
}
