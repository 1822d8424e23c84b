/* test_real_affinity.c -- rsd-serve's session affinity and leases with REAL llama-server
   children (single-model mode, tiny models made on the spot): the child's /slots is
   read, id_slot in the body is honoured (a warm session's next turn reuses its cache:
   timings.cache_n > 0), the erase shape POST /slots/ID?action=erase works once
   rsd-serve has added --slot-save-path (a handed-over slot starts empty: cache_n 0),
   and a lease stops an idle child and brings it back. Skipped (one line, "0 passed, 0
   failed") when no llama-server is found (tests/real_server.h). Waits sleep on GET
   /_rsd/events between looks at the status (tests/serve_harness.h). */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
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


static int64_t body_int(const char *obj, const char *key) {
    rsd_json_doc d;
    int64_t v = -1;
    int o = 0;
    if (rsd_json_parse(&d, g_body, strlen(g_body), g_toks, 8192) <= 0) return -1;
    if (obj) o = rsd_json_find(&d, 0, obj);
    (void)rsd_json_int64(&d, rsd_json_find(&d, o, key), &v);
    return v;
}

/* Turn t of session who: its history (fixed assistant answers) and a new question. */
static const char *turn(const char *who, int t) {
    static char b[8192];
    size_t o = 0;
    int k;
    o += (size_t)snprintf(b + o, sizeof b - o,
                          "{\"model\":\"chat\",\"prompt_cache_key\":\"%s\",\"max_tokens\":2,\"messages\":[", who);
    for (k = 0; k <= t; k++) {
        o += (size_t)snprintf(b + o, sizeof b - o, "%s{\"role\":\"user\",\"content\":\"%s asks question %d about things\"}",
                              k ? "," : "", who, k);
        if (k < t) o += (size_t)snprintf(b + o, sizeof b - o, ",{\"role\":\"assistant\",\"content\":\"fine\"}");
    }
    snprintf(b + o, sizeof b - o, "]}");
    return b;
}

static void test_real_affinity(void) {
    serve_proc s;
    static const char *who[] = {"s0", "s1", "s2", "s3"};
    int k;
    REQUIRE(real_serve_start(&s, "aff", "",
                     "[model chat]\nmodel = @/tiny-a.gguf\nctx = 2048\nparallel = 4\nsession_affinity = true\n"
                     "session_erase = true\n") == 0);
    for (k = 0; k < 4; k++) {
        CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", turn(who[k], 0)), 200);
        CHECK_EQ_INT(body_int("timings", "cache_n"), 0); /* fresh slots */
    }
    CHECK_EQ_INT(aff_field(&s, "fresh"), 4);
    CHECK_EQ_INT(aff_field(&s, "samples_failed"), 0);
    /* second turns: back on their own slots (id_slot), the history comes from the cache */
    for (k = 0; k < 4; k++) {
        CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", turn(who[k], 1)), 200);
        CHECK(body_int("timings", "cache_n") > 5);
    }
    CHECK_EQ_INT(aff_field(&s, "warm"), 4);
    /* a fifth session: s0's slot (least recently used) is erased for it first; the real
       server answered the erase (200), and the request found the slot empty */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", turn("s4", 0)), 200);
    CHECK_EQ_INT(body_int("timings", "cache_n"), 0);
    CHECK_EQ_INT(aff_field(&s, "erased"), 1);
    CHECK_EQ_INT(aff_field(&s, "erase_failed"), 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", turn("s4", 1)), 200);
    CHECK(body_int("timings", "cache_n") > 5);
    CHECK_EQ_INT(aff_field(&s, "warm"), 5);
    /* the child's /slots (through rsd-serve) saw the slots used */
    CHECK_EQ_INT(http(&s, "GET", "/slots?model=chat", NULL), 200);
    CHECK(strstr(g_body, "\"id_task\"") != NULL && strstr(g_body, "\"is_processing\":false") != NULL);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* A lease stops the idle child (LRU), holds its bytes, and DELETE brings it back. */
static void test_real_lease(void) {
    serve_proc s;
    char p[64];
    int64_t id, pid_a;
    REQUIRE(real_serve_start(&s, "lease", "max_models = 2\nvram_budget = 8G\n",
                     "[model a]\nmodel = @/tiny-a.gguf\nctx = 256\nreserve = 4G\n"
                     "[model b]\nmodel = @/tiny-b.gguf\nctx = 256\nreserve = 4G\n") == 0);
    CHECK_EQ_INT(http(&s, "POST", "/models/load", "{\"model\":\"a\"}"), 200);
    CHECK_EQ_INT(http(&s, "POST", "/models/load", "{\"model\":\"b\"}"), 200);
    CHECK(wait_state(&s, "a", "ready") && wait_state(&s, "b", "ready"));
    /* b used last, so a is the least recently used whichever load finished first */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions",
                      "{\"model\":\"b\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2}"),
                 200);
    pid_a = status_field(&s, "a", "pid");
    CHECK(pid_a > 0);
    CHECK_EQ_INT(http(&s, "POST", "/_rsd/lease", "{\"bytes\":\"3G\",\"restore\":true}"), 200);
    CHECK(body_int(NULL, "granted") == (int64_t)3 << 30);
    id = body_int(NULL, "id");
    REQUIRE(id > 0);
    snprintf(p, sizeof p, "/_rsd/lease/%lld", (long long)id);
    CHECK(wait_until(&s, path_ready, p, 30000));
    CHECK(strstr(g_body, "\"stopped\":[\"a\"]") != NULL);
    CHECK(kill((pid_t)pid_a, 0) != 0);
    CHECK_EQ_INT(http(&s, "DELETE", p, NULL), 200);
    (void)wait_new_pid(&s, "a", 0);
    CHECK(status_field(&s, "a", "pid") > 0 && status_field(&s, "a", "pid") != pid_a);
    /* examples/game_loop.c: the ensure of a, then its cutscene's lease through the ensurer
       stops b (a was restarted after it, so b is the least recently used), plays once b's
       llama-server has exited, and its release starts b again */
    CHECK(wait_state(&s, "a", "ready"));
    {
        char out[16384];
        const char *g[] = {"build/examples/game_loop", s.url, "a", "3G", NULL};
        int64_t pid_b = status_field(&s, "b", "pid");
        CHECK(pid_b > 0);
        CHECK_EQ_INT(run_prog(g, out, sizeof out), 0);
        CHECK(strstr(out, "resident: a") != NULL);
        CHECK(strstr(out, "freed 3221225472 of 3221225472 bytes; stopped: b\n") != NULL);
        CHECK(strstr(out, "released: 1 model(s) back") != NULL);
        CHECK(kill((pid_t)pid_b, 0) != 0);
        CHECK(wait_new_pid(&s, "b", pid_b) > 0);
        if (rsdt_cur_failed) printf("  game_loop: %s\n", out);
    }
    CHECK_EQ_INT(serve_stop(&s), 0);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    REAL_SKIP_OR_FIND(g_bin);
    if (real_serve_setup() != 0) return RSD_TEST_END();
    RUN(test_real_affinity);
    RUN(test_real_lease);
    real_serve_cleanup();
    return RSD_TEST_END();
}
