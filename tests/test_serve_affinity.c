/* test_serve_affinity.c -- rsd-serve's locked host, session affinity and KV ownership,
   exclusive requests, listing fields and leases: the pure policies of
   apps/rsd-serve/rsd_serve_affinity.h, then the program with rsd-sim llama-server children
   (build/bin/rsd-sim --runtime server). Nothing sleeps: waits are blocking reads
   or bounded polls of rsd-serve's own endpoints. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include "../apps/rsd-serve/rsd_serve.h"
#include "../apps/rsd-serve/rsd_serve_affinity.h"
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
#include "ensure_code.h"

static rsrv_config g_cfg, g_cfg2;

static int parse(const char *text, char *err, size_t cap) {
    rsrv_config_init(&g_cfg);
    err[0] = 0;
    return rsrv_parse_ini(&g_cfg, text, strlen(text), "serve.ini", err, cap);
}

/* ---- pure ------------------------------------------------------------------------ */
static void test_config_keys(void) {
    char err[RSRV_ERR_MAX], ini[1 << 14];
    rsrv_opts o;
    char *argv[] = {(char *)"rsd-serve", (char *)"--lock-models", (char *)"b, a", (char *)"--model", (char *)"c=/m/c.gguf",
                    (char *)"--session-affinity", (char *)"--session-erase", NULL};
    int n;
    CHECK_EQ_INT(parse("lock_models = a, chat\n[model a]\nmodel = /m/a.gguf\nsession_affinity = true\n"
                       "[model b]\nmodel = /m/b.gguf\naliases = chat\n", err, sizeof err), 0);
    CHECK_EQ_INT(g_cfg.nlock, 2);
    CHECK_EQ_STR(g_cfg.lock_models[0], "a");
    CHECK_EQ_STR(g_cfg.lock_models[1], "chat");
    CHECK(g_cfg.models[0].session_affinity && !g_cfg.models[1].session_affinity);
    CHECK(!g_cfg.models[0].session_erase); /* off unless asked for */
    /* written back and read again: the same configuration */
    n = rsrv_write_ini(&g_cfg, ini, sizeof ini);
    REQUIRE(n > 0);
    rsrv_config_init(&g_cfg2);
    CHECK_EQ_INT(rsrv_parse_ini(&g_cfg2, ini, (size_t)n, "w.ini", err, sizeof err), 0);
    CHECK(rsrv_config_equal(&g_cfg, &g_cfg2));
    g_cfg2.models[0].session_affinity = false;
    CHECK(!rsrv_config_equal(&g_cfg, &g_cfg2));
    /* bad values */
    CHECK_EQ_INT(parse("lock_models = a, a\n", err, sizeof err), -1);
    CHECK(strstr(err, "serve.ini:1:") && strstr(err, "listed twice"));
    CHECK_EQ_INT(parse("lock_models = ,\n", err, sizeof err), -1);
    CHECK(strstr(err, "at least one") != NULL);
    CHECK_EQ_INT(parse("[model a]\nmodel = /m\nsession_affinity = true\nsession_erase = off\n", err, sizeof err), 0);
    CHECK(!g_cfg.models[0].session_erase);
    n = rsrv_write_ini(&g_cfg, ini, sizeof ini);
    REQUIRE(n > 0);
    CHECK(strstr(ini, "session_erase") == NULL);
    CHECK_EQ_INT(parse("[model a]\nmodel = /m\nsession_affinity = true\nsession_erase = on\n", err, sizeof err), 0);
    CHECK(g_cfg.models[0].session_erase);
    n = rsrv_write_ini(&g_cfg, ini, sizeof ini);
    REQUIRE(n > 0);
    CHECK(strstr(ini, "session_erase = true") != NULL);
    CHECK_EQ_INT(parse("[model a]\nmodel = /m\nsession_affinity = maybe\n", err, sizeof err), -1);
    CHECK(strstr(err, "serve.ini:3: session_affinity must be true or false") != NULL);
    /* flags */
    rsrv_config_init(&g_cfg);
    memset(&o, 0, sizeof o);
    CHECK_EQ_INT(rsrv_parse_args(&g_cfg, &o, 7, argv, err, sizeof err), 0);
    CHECK_EQ_INT(g_cfg.nlock, 2);
    CHECK_EQ_STR(g_cfg.lock_models[0], "b");
    CHECK(g_cfg.models[0].session_affinity && g_cfg.models[0].session_erase);
}

static void test_lock_gate(void) {
    char err[RSRV_ERR_MAX], msg[1024];
    int m = 99;
    /* unlocked: the name as it resolves */
    CHECK_EQ_INT(parse("[model a]\nmodel = /m\n[model b]\nmodel = /m\n", err, sizeof err), 0);
    CHECK_EQ_INT(rsrv_lock_gate(&g_cfg, true, "b", 1, &m, msg, sizeof msg), 0);
    CHECK_EQ_INT(m, 1);
    CHECK_EQ_INT(rsrv_lock_gate(&g_cfg, true, "x", 1, &m, msg, sizeof msg), 0);
    CHECK_EQ_INT(m, -1);
    CHECK(rsrv_lock_allows(&g_cfg, 0) && rsrv_lock_allows(&g_cfg, 1));
    /* locked to b (by alias), nope (unknown, skipped) and c */
    CHECK_EQ_INT(parse("lock_models = nope, bee, c\n[model a]\nmodel = /m\n[model b]\nmodel = /m\naliases = bee\n"
                       "[model c]\nmodel = /m\n", err, sizeof err), 0);
    CHECK(!rsrv_lock_allows(&g_cfg, 0) && rsrv_lock_allows(&g_cfg, 1) && rsrv_lock_allows(&g_cfg, 2));
    CHECK_EQ_INT(rsrv_lock_gate(&g_cfg, false, NULL, 0, &m, msg, sizeof msg), 0); /* unnamed: the first */
    CHECK_EQ_INT(m, 1);
    CHECK_EQ_INT(rsrv_lock_gate(&g_cfg, true, "c", 1, &m, msg, sizeof msg), 0);
    CHECK_EQ_INT(m, 2);
    CHECK_EQ_INT(rsrv_lock_gate(&g_cfg, true, "b", 1, &m, msg, sizeof msg), 0); /* its id works too */
    CHECK_EQ_INT(m, 1);
    CHECK_EQ_INT(rsrv_lock_gate(&g_cfg, true, "a", 1, &m, msg, sizeof msg), 409);
    CHECK_EQ_INT(m, -1);
    CHECK_EQ_STR(msg, "model switching is disabled on this host; served models: \"bee\", \"c\"");
    CHECK_EQ_INT(rsrv_lock_gate(&g_cfg, true, "zzz", 3, &m, msg, sizeof msg), 409);
    /* nothing resolves */
    CHECK_EQ_INT(parse("lock_models = x, y\n[model a]\nmodel = /m\n", err, sizeof err), 0);
    CHECK_EQ_INT(rsrv_lock_gate(&g_cfg, true, "a", 1, &m, msg, sizeof msg), 503);
    CHECK_EQ_STR(msg, "no models are selected on this locked host");
    CHECK_EQ_INT(rsrv_lock_gate(&g_cfg, false, NULL, 0, &m, msg, sizeof msg), 503);
    CHECK(!rsrv_lock_allows(&g_cfg, 0));
}

static rsd_json_tok g_atoks[4096];

static int sample(rsrv_aff *a, const char *json) { return rsrv_aff_sample(a, json, strlen(json), g_atoks, 4096); }

static const char *k_idle4 = "[{\"id\":0,\"is_processing\":false},{\"id\":1,\"is_processing\":false},"
                             "{\"id\":2,\"is_processing\":false},{\"id\":3,\"is_processing\":false}]";

/* One request of session `who` (0 = keyless): choose and take; returns the slot and
   whether it would be erased. */
static int run_one(rsrv_aff *a, const char *who, bool *erase) {
    bool has = who != NULL;
    uint64_t h = has ? rsrv_aff_hash(who, strlen(who)) : 0;
    int k = rsrv_aff_choose(a, has, h, erase);
    if (k >= 0) rsrv_aff_take(a, k, has, h);
    return k;
}

static void test_aff_policy(void) {
    rsrv_aff a;
    bool erase;
    int k, s0, s1;
    rsrv_aff_reset(&a, 100);
    CHECK_EQ_INT(rsrv_aff_choose(&a, true, 1, &erase), -1); /* not sampled: no slots known */
    CHECK_EQ_INT(sample(&a, k_idle4), 4);
    /* four sessions get the four fresh slots, none erased */
    s0 = run_one(&a, "s0", &erase);
    CHECK_EQ_INT(s0, 0);
    CHECK(!erase);
    rsrv_aff_put(&a, s0);
    CHECK_EQ_INT(run_one(&a, "s1", &erase), 1);
    CHECK(!erase);
    rsrv_aff_put(&a, 1);
    CHECK_EQ_INT(run_one(&a, "s2", &erase), 2);
    rsrv_aff_put(&a, 2);
    CHECK_EQ_INT(run_one(&a, "s3", &erase), 3);
    CHECK(!erase);
    rsrv_aff_put(&a, 3);
    /* a warm session goes back to its own slot, no erase */
    CHECK_EQ_INT(run_one(&a, "s2", &erase), 2);
    CHECK(!erase);
    rsrv_aff_put(&a, 2);
    CHECK_EQ_INT(run_one(&a, "s0", &erase), 0);
    CHECK(!erase);
    rsrv_aff_put(&a, 0);
    /* a fifth session takes the least recently used owned slot (s1's) and erases it */
    CHECK_EQ_INT(run_one(&a, "s4", &erase), 1);
    CHECK(erase);
    /* while s4 runs there, s1 comes back: its slot is held: LRU of the rest (s3's) */
    CHECK_EQ_INT(run_one(&a, "s1", &erase), 3);
    CHECK(erase);
    rsrv_aff_put(&a, 1);
    rsrv_aff_put(&a, 3);
    /* finishing never erased anything: s4 is warm on 1 */
    CHECK_EQ_INT(run_one(&a, "s4", &erase), 1);
    CHECK(!erase);
    /* a same-session request while its slot is held takes another slot */
    s1 = run_one(&a, "s4", &erase);
    CHECK(s1 >= 0 && s1 != 1 && erase);
    rsrv_aff_put(&a, 1);
    rsrv_aff_put(&a, s1);
    /* a busy row in the sample is never chosen; every slot busy: -1 */
    CHECK_EQ_INT(sample(&a, "[{\"id\":0,\"is_processing\":true},{\"id\":1,\"is_processing\":true},"
                            "{\"id\":2,\"is_processing\":true},{\"id\":3,\"is_processing\":true}]"), 4);
    CHECK_EQ_INT(rsrv_aff_choose(&a, true, rsrv_aff_hash("s4", 2), &erase), -1);
    /* keyless requests: never the owner, so one keyless after another erases (no KV
       shared between two clients that cannot be told apart) */
    CHECK_EQ_INT(sample(&a, "[{\"id\":0,\"is_processing\":false},{\"id\":1,\"is_processing\":false}]"), 2);
    rsrv_aff_reset(&a, 101); /* a new process: everything fresh */
    CHECK_EQ_INT(sample(&a, "[{\"id\":0,\"is_processing\":false},{\"id\":1,\"is_processing\":false}]"), 2);
    k = run_one(&a, NULL, &erase);
    CHECK(k == 0 && !erase);
    rsrv_aff_put(&a, k);
    k = run_one(&a, NULL, &erase);
    CHECK(k == 1 && !erase); /* fresh first */
    rsrv_aff_put(&a, k);
    k = run_one(&a, NULL, &erase);
    CHECK(k == 0 && erase);
    rsrv_aff_put(&a, k);
    /* a keyed session over a keyless owner erases too */
    k = run_one(&a, "s9", &erase);
    CHECK(k == 1 && erase);
}

static void test_aff_sample(void) {
    rsrv_aff a;
    rsrv_aff_reset(&a, 1);
    /* rows as llama-server b10116 writes them (one used, one busy) */
    CHECK_EQ_INT(sample(&a, "[{\"id\":0,\"n_ctx\":256,\"speculative\":false,\"is_processing\":false},"
                            "{\"id\":1,\"n_ctx\":256,\"speculative\":false,\"is_processing\":true,\"id_task\":1,"
                            "\"n_prompt_tokens\":52,\"params\":{\"seed\":4294967295,\"samplers\":[\"penalties\",\"dry\"]},"
                            "\"next_token\":[{\"has_next_token\":true,\"n_decoded\":4}]}]"), 2);
    CHECK(!a.slot[0].busy && a.slot[1].busy);
    /* numeric state (older servers), rows without ids */
    CHECK_EQ_INT(sample(&a, "[{\"state\":1},{\"state\":0},{\"state\":2}]"), 3);
    CHECK(a.slot[0].busy && !a.slot[1].busy && a.slot[2].busy);
    /* not an array, not rows: -1, the table kept */
    CHECK_EQ_INT(sample(&a, "{\"error\":{\"code\":501}}"), -1);
    CHECK_EQ_INT(sample(&a, "[1,2]"), -1);
    CHECK_EQ_INT(sample(&a, "[{\"id\":0"), -1);
    CHECK_EQ_INT(a.nslots, 3);
    CHECK_EQ_INT(sample(&a, "[]"), 0);
}

static void test_body_with_slot(void) {
    char out[256];
    int n;
    n = rsrv_body_with_slot("{\"model\":\"a\"}", 13, 3, out, sizeof out);
    REQUIRE(n > 0);
    out[n] = 0;
    CHECK_EQ_STR(out, "{\"model\":\"a\",\"id_slot\":3}");
    n = rsrv_body_with_slot("  { }\n", 6, 0, out, sizeof out);
    REQUIRE(n > 0);
    out[n] = 0;
    CHECK_EQ_STR(out, "  { \"id_slot\":0}");
    /* the client's own id_slot comes first: ours is last, and llama.cpp keeps the last */
    n = rsrv_body_with_slot("{\"id_slot\":1,\"x\":[1,{}]} ", 25, 2, out, sizeof out);
    REQUIRE(n > 0);
    out[n] = 0;
    CHECK_EQ_STR(out, "{\"id_slot\":1,\"x\":[1,{}],\"id_slot\":2}");
    CHECK_EQ_INT(rsrv_body_with_slot("[1]", 3, 0, out, sizeof out), -1);
    CHECK_EQ_INT(rsrv_body_with_slot("", 0, 0, out, sizeof out), -1);
    CHECK_EQ_INT(rsrv_body_with_slot("{\"a\":1}", 7, 0, out, 8), -1); /* too small */
    CHECK_EQ_INT(rsrv_body_with_slot("{}", 2, 12, out, 14), 14);
}

static void test_lease_body(void) {
    rsd_pool_lease_desc d;
    char err[256];
    CHECK(rsrv_lease_body("{\"bytes\":1000,\"ttl_ms\":500,\"restore\":true}", 42, &d, err, sizeof err));
    CHECK(d.bytes == 1000 && d.ttl_ms == 500 && d.restore);
    CHECK(rsrv_lease_body("{\"bytes\":\"6G\"}", 14, &d, err, sizeof err));
    CHECK(d.bytes == (uint64_t)6 << 30 && d.ttl_ms == 0 && !d.restore);
    CHECK(!rsrv_lease_body("{\"bytes\":0}", 11, &d, err, sizeof err));
    CHECK(strstr(err, "bytes") != NULL);
    CHECK(!rsrv_lease_body("{\"ttl_ms\":5}", 12, &d, err, sizeof err));
    CHECK(!rsrv_lease_body("{\"bytes\":-4}", 12, &d, err, sizeof err));
    CHECK(!rsrv_lease_body("{\"bytes\":\"lots\"}", 16, &d, err, sizeof err));
    CHECK(!rsrv_lease_body("{\"bytes\":4,\"ttl_ms\":-1}", 23, &d, err, sizeof err));
    CHECK(!rsrv_lease_body("{\"bytes\":4,\"restore\":1}", 23, &d, err, sizeof err));
    CHECK(!rsrv_lease_body("[4]", 3, &d, err, sizeof err));
    CHECK(!rsrv_lease_body("", 0, &d, err, sizeof err));
}

/* ---- exclusive requests ------------------------------------------------------------ */
static int raw_post_hdr(int fd, const char *path, const char *hdr, const char *body) {
    char req[4096];
    int n = snprintf(req, sizeof req,
                     "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n%s"
                     "Content-Length: %d\r\n\r\n%s", path, hdr, (int)strlen(body), body);
    return write(fd, req, (size_t)n) == n ? 0 : -1;
}

/* Reads until the connection closes or `until` is seen (10 s per read). */
static bool raw_wait(int fd, const char *until, char *acc, size_t cap) {
    size_t n = strlen(acc);
    while (!strstr(acc, until)) {
        int r = raw_read(fd, acc + n, cap - 1 - n);
        if (r <= 0) return false;
        n += (size_t)r;
        acc[n] = 0;
    }
    return true;
}

/* ---- loopback, rsd-sim children ---------------------------------------------------- */

/* A chat history: turn t of session `who` (its previous turns, the sim's answers, and
   a new user message), with prompt_cache_key when keyed. */
static const char *session_body(const char *model, const char *who, int turns, bool keyed) {
    static char b[16384];
    size_t o = 0;
    int t;
    o += (size_t)snprintf(b + o, sizeof b - o, "{\"model\":\"%s\",%s%s%s\"max_tokens\":4,\"messages\":[", model,
                          keyed ? "\"prompt_cache_key\":\"" : "", keyed ? who : "", keyed ? "\"," : "");
    for (t = 0; t <= turns; t++) {
        o += (size_t)snprintf(b + o, sizeof b - o,
                              "%s{\"role\":\"user\",\"content\":\"%s says: turn %d, a question of some length to fill the cache\"}",
                              t ? "," : "", who, t);
        if (t < turns)
            o += (size_t)snprintf(b + o, sizeof b - o, ",{\"role\":\"assistant\",\"content\":\"This is a simulated reply.\"}");
    }
    snprintf(b + o, sizeof b - o, "]}");
    return b;
}

/* 6 sessions x 4 turns, one at a time, on a 4-slot child: prompt tokens processed. */
static int64_t chat_run(serve_proc *s, bool keyed, int64_t *cached) {
    static const char *who[] = {"s0", "s1", "s2", "s3", "s4", "s5"};
    int64_t total = 0;
    int t, k;
    *cached = 0;
    for (t = 0; t < 4; t++)
        for (k = 0; k < 6; k++) {
            int64_t p;
            if (http(s, "POST", "/v1/chat/completions", session_body("chat", who[k], t, keyed)) != 200) return -1;
            p = timing("prompt_n");
            if (p < 0) return -1;
            total += p;
            *cached += timing("cache_n");
        }
    return total;
}

static void test_serve_affinity_sim(void) {
    serve_proc s;
    char path[256], cfg[1024];
    const char *args[] = {"--config", path, NULL};
    int64_t with, without, cached_with, cached_without;
    make_dir();
    snprintf(path, sizeof path, "%s/aff.ini", g_dir);
    snprintf(cfg, sizeof cfg, "[model chat]\nmodel = %s\nparallel = 4\nsession_affinity = true\nsession_erase = true\n",
             model_file("chat"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    /* 6 sessions round-robin on 4 slots: the first four take fresh slots; every later
       request finds its slot handed to another session (LRU), so it is erased first:
       20 erases (each answered 200 by the child), no warm hit, no KV reused */
    with = chat_run(&s, true, &cached_with);
    CHECK(with > 0);
    CHECK_EQ_INT(aff_field(&s, "fresh"), 4);
    CHECK_EQ_INT(aff_field(&s, "erased"), 20);
    CHECK_EQ_INT(aff_field(&s, "handoffs"), 20);
    CHECK_EQ_INT(aff_field(&s, "warm"), 0);
    CHECK_EQ_INT(aff_field(&s, "erase_failed"), 0);
    CHECK_EQ_INT(aff_field(&s, "samples_failed"), 0);
    CHECK_EQ_INT(cached_with, 0);
    /* the child was started with a slot save path (erasing needs one) */
    CHECK_EQ_INT(http(&s, "GET", "/models", NULL), 200);
    CHECK(strstr(g_body, "\"--slot-save-path\",\"/tmp/rsd-serve-slots.") != NULL);
    CHECK_EQ_INT(serve_stop(&s), 0);

    /* the same without affinity: the child's own choice */
    snprintf(cfg, sizeof cfg, "[model chat]\nmodel = %s\nparallel = 4\n", model_file("chat"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    without = chat_run(&s, true, &cached_without);
    CHECK(without > 0);
    CHECK_EQ_INT(http(&s, "GET", "/_rsd/affinity", NULL), 200);
    CHECK_EQ_STR(g_body, "{\"models\":[]}");
    CHECK_EQ_INT(serve_stop(&s), 0);
    printf("  sim, 6 sessions x 4 turns round-robin, 4 slots: prompt tokens processed %lld with affinity, %lld without\n",
           (long long)with, (long long)without);
}

/* Warm sessions: 4 sessions x 5 turns on 4 slots: after the first turn every request
   is warm and re-processes only its new message. */
static void test_serve_affinity_warm(void) {
    serve_proc s;
    char path[256], cfg[1024];
    const char *args[] = {"--config", path, NULL};
    static const char *who[] = {"w0", "w1", "w2", "w3"};
    int t, k;
    int64_t first = -1;
    make_dir();
    snprintf(path, sizeof path, "%s/warm.ini", g_dir);
    snprintf(cfg, sizeof cfg, "[model chat]\nmodel = %s\nparallel = 4\nsession_affinity = true\nsession_erase = true\n",
             model_file("chat"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    for (t = 0; t < 5; t++)
        for (k = 0; k < 4; k++) {
            REQUIRE(http(&s, "POST", "/v1/chat/completions", session_body("chat", who[k], t, true)) == 200);
            if (t == 0 && k == 0) first = timing("prompt_n");
            if (t > 0) { /* the history is cached: only the last user message is new */
                CHECK(timing("cache_n") > 0);
                CHECK(timing("prompt_n") <= first);
            }
        }
    CHECK_EQ_INT(aff_field(&s, "fresh"), 4);
    CHECK_EQ_INT(aff_field(&s, "warm"), 16);
    CHECK_EQ_INT(aff_field(&s, "erased"), 0);
    /* X-Session-Id works as the key too (no prompt_cache_key): w9 takes a slot
       (an erase: all four are owned), then is warm there */
    for (t = 0; t < 2; t++) {
        char acc[8192] = "";
        int fd = raw_connect(s.port);
        REQUIRE(fd >= 0);
        REQUIRE(raw_post_hdr(fd, "/v1/chat/completions", "X-Session-Id: w9\r\n", session_body("chat", "w9", t, false)) == 0);
        CHECK(raw_wait(fd, "simulated reply", acc, sizeof acc));
        close(fd);
    }
    CHECK_EQ_INT(aff_field(&s, "erased"), 1);
    CHECK_EQ_INT(aff_field(&s, "warm"), 17);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* Without --slot-save-path the erase is refused (501, as llama-server does): logged
   once, the request still served. A model run by `command` gets no flag added. */
static void test_serve_affinity_no_erase(void) {
    serve_proc s;
    char path[256], cfg[1024];
    const char *args[] = {"--config", path, NULL};
    static const char *who[] = {"a", "b", "c"};
    int k;
    make_dir();
    snprintf(path, sizeof path, "%s/noerase.ini", g_dir);
    snprintf(cfg, sizeof cfg,
             "[model chat]\ncommand = %s --runtime server --port {port} -m %s -np 2 --load-ms 20 --gen-ms 5\n"
             "session_affinity = true\nsession_erase = true\n",
             SIM_BIN, model_file("chat"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    for (k = 0; k < 3; k++) CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", session_body("chat", who[k], 0, true)), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", session_body("chat", "a", 1, true)), 200);
    CHECK_EQ_INT(aff_field(&s, "fresh"), 2);
    CHECK_EQ_INT(aff_field(&s, "erased"), 0);
    CHECK_EQ_INT(aff_field(&s, "erase_failed"), 2);
    CHECK(log_has(&s, "cannot erase slots (start it with --slot-save-path)"));
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* The default (session_erase off): a slot is handed over without an erase (the
   child's prompt cache keeps what it held). */
static void test_serve_affinity_keep(void) {
    serve_proc s;
    char path[256], cfg[1024];
    const char *args[] = {"--config", path, NULL};
    static const char *who[] = {"a", "b", "c"};
    int k;
    make_dir();
    snprintf(path, sizeof path, "%s/keep.ini", g_dir);
    snprintf(cfg, sizeof cfg, "[model chat]\nmodel = %s\nparallel = 2\nsession_affinity = true\n", model_file("chat"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    for (k = 0; k < 3; k++) CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", session_body("chat", who[k], 0, true)), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", session_body("chat", "c", 1, true)), 200);
    CHECK(timing("cache_n") > 0); /* c is warm on its slot */
    CHECK_EQ_INT(aff_field(&s, "fresh"), 2);
    CHECK_EQ_INT(aff_field(&s, "handoffs"), 1);
    CHECK_EQ_INT(aff_field(&s, "warm"), 1);
    CHECK_EQ_INT(aff_field(&s, "erased"), 0);
    CHECK_EQ_INT(aff_field(&s, "erase_failed"), 0);
    CHECK_EQ_INT(http(&s, "GET", "/models", NULL), 200); /* no erase: no --slot-save-path either */
    CHECK(strstr(g_body, "--slot-save-path") == NULL);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* ---- locked host ----------------------------------------------------------------- */
static void test_serve_locked(void) {
    serve_proc s;
    char path[256], cfg[1024];
    const char *args[] = {"--config", path, NULL};
    const char *args2[] = {"--config", path, "--lock-models", "nothing", NULL};
    make_dir();
    snprintf(path, sizeof path, "%s/lock.ini", g_dir);
    snprintf(cfg, sizeof cfg,
             "max_models = 2\nlock_models = b, a\n[model a]\nmodel = %s\n[model b]\nmodel = %s\naliases = bee\n"
             "[model c]\nmodel = %s\n",
             model_file("a"), model_file("b"), model_file("c"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "GET", "/v1/models", NULL), 200);
    CHECK(strstr(g_body, "\"id\":\"a\"") && strstr(g_body, "\"id\":\"b\"") && !strstr(g_body, "\"id\":\"c\""));
    CHECK_EQ_INT(http(&s, "GET", "/models", NULL), 200);
    CHECK(!strstr(g_body, "\"id\":\"c\""));
    CHECK_EQ_INT(http(&s, "GET", "/v1/models/c", NULL), 404);
    /* another model: 409 with the served set */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("c", false)), 409);
    CHECK(strstr(g_body, "model switching is disabled on this host; served models: \\\"b\\\", \\\"a\\\"") != NULL);
    CHECK_EQ_INT(http(&s, "POST", "/models/load", "{\"model\":\"c\"}"), 409);
    CHECK_EQ_INT(status_field(&s, "c", "pid"), 0);
    /* no model named: the first locked one (b) */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"), 200);
    CHECK(status_field(&s, "b", "pid") > 0);
    CHECK_EQ_INT(status_field(&s, "a", "pid"), 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("bee", false)), 200);
    CHECK_EQ_INT(serve_stop(&s), 0);
    /* none of the locked names is configured: 503 */
    REQUIRE(serve_start(&s, args2) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 503);
    CHECK(strstr(g_body, "no models are selected on this locked host") != NULL);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", "{\"messages\":[]}"), 503);
    CHECK_EQ_INT(http(&s, "GET", "/v1/models", NULL), 200);
    CHECK(strstr(g_body, "\"data\":[]") != NULL);
    CHECK(log_has(&s, "lock_models: 'nothing' is not a configured model"));
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* ---- listing fields -------------------------------------------------------------- */
static void test_serve_listing_fields(void) {
    serve_proc s;
    char path[256], cfg[1024];
    const char *args[] = {"--config", path, NULL};
    rsd_json_doc d;
    int64_t created = 0, v = 0, t0 = (int64_t)time(NULL);
    int e;
    make_dir();
    snprintf(path, sizeof path, "%s/list.ini", g_dir);
    snprintf(cfg, sizeof cfg, "[model x/y]\nmodel = %s\nctx = 8192\nparallel = 4\n[model plain]\nmodel = %s\n",
             model_file("xy"), model_file("plain"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "GET", "/v1/models/x%2Fy", NULL), 200);
    REQUIRE(rsd_json_parse(&d, g_body, strlen(g_body), g_toks, 8192) > 0);
    CHECK(rsd_json_str_eq(&d, rsd_json_find(&d, 0, "id"), "x/y"));
    CHECK(rsd_json_str_eq(&d, rsd_json_find(&d, 0, "owned_by"), "llamacpp"));
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, 0, "max_context_length"), &v) == RSD_OK && v == 8192);
    CHECK(rsd_json_find(&d, 0, "loaded_context_length") < 0); /* not loaded */
    CHECK(rsd_json_type_of(&d, rsd_json_find(&d, rsd_json_find(&d, 0, "status"), "last_used")) == RSD_JSON_NULL);
    CHECK_EQ_INT(http(&s, "GET", "/v1/models/nope", NULL), 404);
    memcpy(cfg, g_body, sizeof cfg - 1); /* one meaning, one body: as a completion's */
    cfg[sizeof cfg - 1] = 0;
    CHECK(strstr(cfg, "\"code\":\"model_not_found\"") && strstr(cfg, "'nope'"));
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("nope", false)), 404);
    CHECK_EQ_STR(g_body, cfg);
    CHECK_EQ_INT(http(&s, "GET", "/v1/models/plain", NULL), 200);
    CHECK(strstr(g_body, "\"max_context_length\":null") != NULL);
    /* loaded: the per-request window and the process's start time */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("x/y", false)), 200);
    CHECK_EQ_INT(http(&s, "GET", "/v1/models/x%2fy", NULL), 200);
    REQUIRE(rsd_json_parse(&d, g_body, strlen(g_body), g_toks, 8192) > 0);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, 0, "loaded_context_length"), &v) == RSD_OK && v == 2048);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, 0, "created"), &created) == RSD_OK);
    CHECK(created >= t0 - 2 && created <= (int64_t)time(NULL) + 2);
    e = rsd_json_find(&d, rsd_json_find(&d, 0, "status"), "last_used");
    CHECK(rsd_json_int64(&d, e, &v) == RSD_OK && v / 1000 >= t0 - 2 && v / 1000 <= (int64_t)time(NULL) + 2);
    /* loaded: "meta" as the router's, what the child's own /v1/models says (rsd-serve asks
       the child once the first answer has begun; a listing before its answer waits for it,
       so this one, right after the answer, has it) */
    e = rsd_json_find(&d, 0, "meta");
    CHECK(rsd_json_type_of(&d, e) == RSD_JSON_OBJECT);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, e, "n_ctx"), &v) == RSD_OK && v == 8192);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, e, "n_ctx_train"), &v) == RSD_OK && v > 0);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, e, "n_vocab"), &v) == RSD_OK && v > 0);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, e, "n_embd"), &v) == RSD_OK && v > 0);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, e, "n_params"), &v) == RSD_OK && v > 0);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, e, "size"), &v) == RSD_OK && v > 0);
    CHECK(rsd_json_type_of(&d, rsd_json_find(&d, e, "ftype")) == RSD_JSON_STRING);
    CHECK(rsd_json_find(&d, e, "vocab_type") >= 0);
    CHECK_EQ_INT(http(&s, "GET", "/v1/models/plain", NULL), 200);
    CHECK(strstr(g_body, "\"meta\"") == NULL); /* not loaded: none */
    /* /api/v0/models is the same list */
    CHECK_EQ_INT(http(&s, "GET", "/api/v0/models", NULL), 200);
    CHECK(strstr(g_body, "\"object\":\"list\"") && strstr(g_body, "\"id\":\"plain\"") && strstr(g_body, "\"id\":\"x/y\""));
    CHECK_EQ_INT(serve_stop(&s), 0);
}

static void test_serve_exclusive(void) {
    serve_proc s;
    char path[256], cfg[1024], a1[8192] = "", a2[8192] = "";
    const char *args[] = {"--config", path, NULL};
    int fs, fx;
    make_dir();
    snprintf(path, sizeof path, "%s/excl.ini", g_dir);
    /* a streams at 1 s a token (8 chunks): the stream must outlast the checks below, which
       take a few status round trips; at the file's 30 ms it ended first on a loaded machine */
    snprintf(cfg, sizeof cfg,
             "max_models = 2\n[model a]\nmodel = %s\nparallel = 2\nargs = --token-ms 1000\n[model b]\nmodel = %s\n",
             model_file("a"), model_file("b"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200); /* a is up */
    /* a stream on a holds one of its two places */
    fs = raw_connect(s.port);
    REQUIRE(fs >= 0);
    REQUIRE(raw_post(fs, "/v1/chat/completions", chat("a", true)) == 0);
    REQUIRE(raw_wait(fs, "data:", a1, sizeof a1));
    /* an exclusive request waits for a to drain, though a place is free */
    fx = raw_connect(s.port);
    REQUIRE(fx >= 0);
    REQUIRE(raw_post_hdr(fx, "/v1/chat/completions", "X-Residency-Exclusive: 1\r\n", chat("a", false)) == 0);
    CHECK(wait_field(&s, "a", "waiting", 1));
    CHECK_EQ_INT(status_field(&s, "a", "in_flight"), 1);
    /* other models keep flowing meanwhile */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("b", false)), 200);
    /* the stream ends, the exclusive request runs and is answered */
    CHECK(raw_wait(fs, "[DONE]", a1, sizeof a1));
    CHECK(raw_wait(fx, "simulated reply", a2, sizeof a2));
    CHECK(strstr(a2, "HTTP/1.1 200") == a2);
    close(fs);
    close(fx);
    CHECK(wait_field(&s, "a", "in_flight", 0));
    /* without the header: no waiting */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* ---- leases ------------------------------------------------------------------------ */
static bool lease_ready(const serve_proc *s, int64_t id) {
    char p[64];
    snprintf(p, sizeof p, "/_rsd/lease/%lld", (long long)id);
    return wait_until(s, path_ready, p, 30000);
}

/* GET arg (a lease's path) answers 404: released or expired. */
static bool lease_gone(const serve_proc *s, const void *arg) {
    return http(s, "GET", (const char *)arg, NULL) == 404;
}

static void test_serve_lease(void) {
    serve_proc s;
    char path[256], cfg[1024], p[64];
    const char *args[] = {"--config", path, NULL};
    int64_t id, id2;
    make_dir();
    snprintf(path, sizeof path, "%s/lease.ini", g_dir);
    snprintf(cfg, sizeof cfg,
             "max_models = 3\nvram_budget = 10G\n[model a]\nmodel = %s\nreserve = 4G\n[model b]\nmodel = %s\n"
             "reserve = 4G\n[model pin]\nmodel = %s\nreserve = 1G\npinned = true\n",
             model_file("a"), model_file("b"), model_file("pin"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("b", false)), 200);
    /* bad bodies */
    CHECK_EQ_INT(http(&s, "POST", "/_rsd/lease", "{\"bytes\":0}"), 400);
    CHECK_EQ_INT(http(&s, "POST", "/_rsd/lease", "nope"), 400);
    /* 4 GiB: 1 GiB is free, so the least recently used idle one (a) stops; pin never */
    CHECK_EQ_INT(http(&s, "POST", "/_rsd/lease", "{\"bytes\":\"4G\",\"restore\":true}"), 200);
    CHECK(json_int("granted") == (int64_t)4 << 30 && json_int("requested") == (int64_t)4 << 30);
    CHECK(strstr(g_body, "\"stopped\":[\"a\"]") != NULL);
    CHECK(strstr(g_body, "\"expires_in_ms\":null") != NULL);
    id = json_int("id");
    REQUIRE(id > 0);
    CHECK(lease_ready(&s, id));
    CHECK_EQ_INT(status_field(&s, "a", "pid"), 0);
    CHECK(status_field(&s, "b", "pid") > 0 && status_field(&s, "pin", "pid") > 0);
    /* more than the rest can give: partial (b stops, pin stays); its ttl (5 s) must outlast
       the declined request below, which a loaded CI machine once sent after 300 ms */
    CHECK_EQ_INT(http(&s, "POST", "/_rsd/lease", "{\"bytes\":\"6G\",\"ttl_ms\":5000}"), 200);
    CHECK(json_int("granted") == (int64_t)5 << 30 && json_int("requested") == (int64_t)6 << 30);
    CHECK(strstr(g_body, "\"stopped\":[\"b\"]") != NULL);
    id2 = json_int("id");
    CHECK(id2 > 0 && id2 != id);
    /* nothing left to stop: declined */
    CHECK_EQ_INT(http(&s, "POST", "/_rsd/lease", "{\"bytes\":1000}"), 409);
    CHECK(strstr(g_body, "declined") != NULL);
    /* the ttl passes: the second lease goes by itself */
    snprintf(p, sizeof p, "/_rsd/lease/%lld", (long long)id2);
    CHECK(wait_until(&s, lease_gone, p, 30000));
    /* DELETE the first: a comes back (restore) */
    snprintf(p, sizeof p, "/_rsd/lease/%lld", (long long)id);
    CHECK_EQ_INT(http(&s, "DELETE", p, NULL), 200);
    CHECK_EQ_INT(http(&s, "DELETE", p, NULL), 404);
    CHECK_EQ_INT(http(&s, "GET", p, NULL), 404);
    CHECK_EQ_INT(http(&s, "GET", "/_rsd/lease/x", NULL), 404);
    (void)wait_new_pid(&s, "a", 0);
    CHECK(status_field(&s, "a", "pid") > 0);
    CHECK_EQ_INT(serve_stop(&s), 0);
    /* no byte budget: nothing to lease */
    snprintf(cfg, sizeof cfg, "[model a]\nmodel = %s\n", model_file("a"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(http(&s, "POST", "/_rsd/lease", "{\"bytes\":1000}"), 503);
    CHECK(strstr(g_body, "no byte budget") != NULL);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* ---- the ensurer's free request: rsd-serve's own lease ------------------------------- */
static int free_req(rsd_ensurer *e, const char *url, uint64_t bytes, uint32_t ttl_ms, rsd_ensure_result *res) {
    rsd_ensure_req q;
    memset(&q, 0, sizeof q);
    q.url = url;
    q.free_bytes = bytes;
    q.lease_ttl_ms = ttl_ms;
    if (rsd_ensurer_begin(e, &q, rsd_now_ms()) != RSD_OK) {
        rsd_ensurer_query(e, res);
        return res->result;
    }
    return ensure_to_end(e, res);
}

static rsd_ensurer *lease_ensurer(void) {
    rsd_ensurer_desc d;
    memset(&d, 0, sizeof d);
    d.no_state = true;
    d.ignore_env = true;
    return rsd_ensurer_create(&d);
}

/* A free request to rsd-serve takes rsd-serve's lease: granted in full, ready only once
   the stopped process has exited (b ignores SIGTERM: it goes at the end of stop_grace,
   2 s, so the ensure polls until then); in part (pin stays); declined (409); released
   step by step (a comes back); a ttl releases by itself (a comes back again); the
   blocking release brings b back; a released lease is unknown. */
static void test_ensure_serve_lease(void) {
    serve_proc s;
    char path[256], cfg[1024], p[64], id1[48], id2[48];
    const char *args[] = {"--config", path, NULL};
    rsd_ensure_result res;
    rsd_ensure_req q;
    rsd_ensurer *e;
    int64_t pid_a, pid_b;
    make_dir();
    snprintf(path, sizeof path, "%s/elease.ini", g_dir);
    snprintf(cfg, sizeof cfg,
             "max_models = 3\nvram_budget = 10G\n[model a]\nmodel = %s\nreserve = 4G\n[model b]\nmodel = %s\n"
             "reserve = 4G\nargs = --ignore-sigterm\n[model pin]\nmodel = %s\nreserve = 1G\npinned = true\n",
             model_file("a"), model_file("b"), model_file("pin"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    REQUIRE((e = lease_ensurer()) != NULL);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("b", false)), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    pid_b = status_field(&s, "b", "pid");
    REQUIRE(pid_b > 0);
    /* 4 GiB: 1 GiB is free, so b (least recently used, idle) stops; ready once it exited */
    CHECK_EQ_INT(free_req(e, s.url, (uint64_t)4 << 30, 0, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_FREED);
    CHECK_EQ_INT(res.decision, RSD_DECISION_FREE);
    CHECK_EQ_INT(res.reason, RSD_REASON_FREE_BYTES);
    CHECK(res.freed_bytes == (uint64_t)4 << 30);
    CHECK(kill((pid_t)pid_b, 0) == -1 && errno == ESRCH); /* the process is gone, not just asked to go */
    CHECK(res.requests >= 2);                              /* the POST said not ready: it polled */
    CHECK(strncmp(res.lease_id, "rsd-serve:", 10) == 0);
    CHECK_EQ_INT(res.n_evicted, 1);
    CHECK(res.n_evicted == 1 && strcmp(res.evicted[0].id, "b") == 0);
    CHECK(strstr(res.message, "4294967296 of 4294967296 bytes granted") != NULL);
    CHECK_EQ_INT(status_field(&s, "b", "pid"), 0);
    snprintf(id1, sizeof id1, "%s", res.lease_id);
    snprintf(p, sizeof p, "/_rsd/lease/%s", id1 + 10);
    CHECK_EQ_INT(http(&s, "GET", p, NULL), 200);
    CHECK(strstr(g_body, "\"restore\":true") != NULL && strstr(g_body, "\"expires_in_ms\":null") == NULL);
    CHECK(json_int("expires_in_ms") > 60000); /* the default ttl (10 min) was sent */
    /* more than the rest can give: in part (a stops, pin stays) */
    CHECK_EQ_INT(free_req(e, s.url, (uint64_t)6 << 30, 0, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_FREED);
    CHECK_EQ_INT(res.reason, RSD_REASON_FREE_SHORT);
    CHECK(res.freed_bytes == (uint64_t)5 << 30);
    CHECK(strstr(res.message, "5368709120 of 6442450944 bytes granted") != NULL);
    CHECK(res.n_evicted == 1 && strcmp(res.evicted[0].id, "a") == 0);
    snprintf(id2, sizeof id2, "%s", res.lease_id);
    /* nothing left to stop: declined, nothing changed */
    CHECK_EQ_INT(free_req(e, s.url, 1000, 0, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_DECLINED);
    CHECK_EQ_INT(res.decision, RSD_DECISION_DECLINE);
    CHECK(res.lease_id[0] == '\0' && res.n_evicted == 0 && res.freed_bytes == 0);
    CHECK(strstr(res.message, "declined a lease of 1000 bytes") != NULL);
    CHECK(status_field(&s, "pin", "pid") > 0);
    /* the second lease released step by step: a comes back */
    memset(&q, 0, sizeof q);
    q.url = s.url;
    CHECK_EQ_INT(rsd_ensurer_lease_return_begin(e, &q, id2, rsd_now_ms()), RSD_OK);
    CHECK_EQ_INT(rsd_ensurer_lease_return_begin(e, &q, id2, rsd_now_ms()), RSD_ERR_STATE); /* one at a time */
    CHECK_EQ_INT(ensure_to_end(e, &res), RSD_OK);
    CHECK_EQ_INT(res.restored, 1);
    CHECK(res.n_evicted == 1 && strcmp(res.evicted[0].id, "a") == 0 && res.evicted[0].restored);
    CHECK(strstr(res.message, "1 stopped model(s) start again") != NULL);
    pid_a = wait_new_pid(&s, "a", 0);
    CHECK(pid_a > 0);
    CHECK(wait_state(&s, "a", "ready")); /* a lease stops ready processes: not one still starting */
    /* a ttl: a stops again, and comes back by itself when the ttl passes (1.5 s: the grant
       must be ready before it, and under qemu a stop takes a while) */
    CHECK_EQ_INT(free_req(e, s.url, (uint64_t)4 << 30, 1500, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_FREED);
    CHECK(res.n_evicted == 1 && strcmp(res.evicted[0].id, "a") == 0);
    snprintf(p, sizeof p, "/_rsd/lease/%s", res.lease_id + 10);
    CHECK(wait_until(&s, lease_gone, p, 30000));
    CHECK(wait_new_pid(&s, "a", pid_a) > 0);
    /* the blocking release of the first: b comes back */
    CHECK_EQ_INT(rsd_ensurer_lease_return_sync(e, &q, id1, &res), 1);
    CHECK(res.n_evicted == 1 && strcmp(res.evicted[0].id, "b") == 0);
    CHECK(wait_new_pid(&s, "b", pid_b) > 0);
    /* gone now; an rsd-serve lease needs its URL; a bad id */
    CHECK_EQ_INT(rsd_ensurer_lease_return_sync(e, &q, id1, &res), RSD_ERR_NOT_FOUND);
    CHECK(strstr(res.message, "not released") != NULL);
    CHECK_EQ_INT(rsd_ensurer_lease_return_sync(e, NULL, id1, &res), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_ensurer_lease_return_sync(e, &q, "rsd-serve:x", &res), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_ensurer_lease_return_begin(e, &q, "12ab-34", rsd_now_ms()), RSD_ERR_STATE); /* no state dir */
    rsd_ensurer_destroy(e);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* A bad request (400: more than rsd-serve leases) and a host without a byte budget (503)
   are errors that say so; neither stops anything. */
static void test_ensure_serve_lease_errors(void) {
    serve_proc s;
    char path[256], cfg[1024];
    const char *args[] = {"--config", path, NULL};
    rsd_ensure_result res;
    rsd_ensurer *e;
    make_dir();
    snprintf(path, sizeof path, "%s/elease2.ini", g_dir);
    snprintf(cfg, sizeof cfg, "vram_budget = 8G\n[model a]\nmodel = %s\nreserve = 4G\n", model_file("a"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    REQUIRE((e = lease_ensurer()) != NULL);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("a", false)), 200);
    CHECK_EQ_INT(free_req(e, s.url, (uint64_t)1 << 62, 0, &res), RSD_ERR_ARG);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_DEGRADED);
    CHECK(strstr(res.message, "not taken") != NULL && res.lease_id[0] == '\0');
    CHECK(status_field(&s, "a", "pid") > 0);
    CHECK_EQ_INT(serve_stop(&s), 0);
    snprintf(cfg, sizeof cfg, "[model a]\nmodel = %s\n", model_file("a"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    CHECK_EQ_INT(free_req(e, s.url, 1000, 0, &res), RSD_ERR_SERVER_ERROR);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_DEGRADED);
    CHECK(strstr(res.message, "no byte budget") != NULL);
    CHECK_EQ_INT(res.requests, 1);
    rsd_ensurer_destroy(e);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* Granted but not ready within the ensure's deadline (b ignores SIGTERM until the end of
   stop_grace, 2 s; the deadline is 1 s): RSD_ERR_TIMEOUT, and the lease id stays so the
   caller can give it back; the release brings b back. */
static void test_ensure_serve_lease_not_ready(void) {
    serve_proc s;
    char path[256], cfg[1024], id[48];
    const char *args[] = {"--config", path, NULL};
    rsd_ensure_result res;
    rsd_ensure_req q;
    rsd_ensurer *e;
    int64_t pid_b;
    make_dir();
    snprintf(path, sizeof path, "%s/elease3.ini", g_dir);
    snprintf(cfg, sizeof cfg, "vram_budget = 4G\n[model b]\nmodel = %s\nreserve = 4G\nargs = --ignore-sigterm\n",
             model_file("b"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    REQUIRE((e = lease_ensurer()) != NULL);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("b", false)), 200);
    pid_b = status_field(&s, "b", "pid");
    memset(&q, 0, sizeof q);
    q.url = s.url;
    q.free_bytes = (uint64_t)1 << 30;
    q.timeout_ms = 1000;
    REQUIRE(rsd_ensurer_begin(e, &q, rsd_now_ms()) == RSD_OK);
    CHECK_EQ_INT(ensure_to_end(e, &res), RSD_ERR_TIMEOUT);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_DEGRADED);
    CHECK(strncmp(res.lease_id, "rsd-serve:", 10) == 0);
    CHECK(strstr(res.message, "not ready within") != NULL);
    CHECK(res.requests >= 2);
    snprintf(id, sizeof id, "%s", res.lease_id);
    CHECK_EQ_INT(rsd_ensurer_lease_return_sync(e, &q, id, &res), 1);
    CHECK(wait_new_pid(&s, "b", pid_b) > 0);
    if (rsdt_cur_failed) printf("  %s\n", res.message);
    rsd_ensurer_destroy(e);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* examples/game_loop.c against rsd-serve: the ensure, then the cutscene's lease (b, the
   least recently used idle model, is stopped for it and comes back on release). */
static void test_game_loop_lease(void) {
    serve_proc s;
    char path[256], cfg[1024], out[16384];
    const char *args[] = {"--config", path, NULL};
    const char *gargv[] = {"build/examples/game_loop", NULL, "a", "4G", NULL};
    make_dir();
    snprintf(path, sizeof path, "%s/game.ini", g_dir);
    snprintf(cfg, sizeof cfg, "max_models = 2\nvram_budget = 8G\n[model a]\nmodel = %s\nreserve = 4G\n"
             "[model b]\nmodel = %s\nreserve = 4G\n", model_file("a"), model_file("b"));
    write_cfg(path, cfg);
    REQUIRE(serve_start(&s, args) == 0);
    gargv[1] = s.url;
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", chat("b", false)), 200);
    CHECK_EQ_INT(run_prog(gargv, out, sizeof out), 0);
    CHECK(strstr(out, "resident: a") != NULL);
    CHECK(strstr(out, "freed 4294967296 of 4294967296 bytes; stopped: b\n") != NULL);
    CHECK(strstr(out, "cutscene plays") != NULL && strstr(out, "released: 1 model(s) back") != NULL);
    (void)wait_new_pid(&s, "b", 0);
    CHECK(status_field(&s, "b", "pid") > 0); /* restored */
    if (rsdt_cur_failed) printf("%s\n", out);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    RUN(test_config_keys);
    RUN(test_lock_gate);
    RUN(test_aff_policy);
    RUN(test_aff_sample);
    RUN(test_body_with_slot);
    RUN(test_lease_body);
    RUN(test_serve_affinity_sim);
    RUN(test_serve_affinity_warm);
    RUN(test_serve_affinity_no_erase);
    RUN(test_serve_affinity_keep);
    RUN(test_serve_locked);
    RUN(test_serve_listing_fields);
    RUN(test_serve_exclusive);
    RUN(test_serve_lease);
    RUN(test_ensure_serve_lease);
    RUN(test_ensure_serve_lease_errors);
    RUN(test_ensure_serve_lease_not_ready);
    RUN(test_game_loop_lease);
    serve_cleanup();
    return RSD_TEST_END();
}
