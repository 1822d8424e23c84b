/* test_real_memory.c -- what each model costs, with REAL llama-server children of
   rsd-serve (build/examples/rsd-serve) on tiny models made on the spot: the figure
   rsd-serve learns once a child is ready is exactly what that child reported of its
   buffers (the child also writes its log to a file, --log-file, which the test reads
   with rsd_llama_log_line), it is kept in state_dir and counts from the first byte
   after a restart, and a budget that holds one model's bytes but not two makes a start
   evict by bytes (max_models allows both), the model started counted by its header's
   estimate. Skipped (one line, "0 passed, 0 failed") without llama-server
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

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    REAL_SKIP_OR_FIND(g_bin);
    if (real_serve_setup() != 0) return RSD_TEST_END();
    RUN(test_real_learn_keep);
    RUN(test_real_evict_by_bytes);
    real_serve_cleanup();
    return RSD_TEST_END();
}
