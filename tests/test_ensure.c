/* test_ensure.c -- the drive module (rsd_ensurer) over loopback against the simulator
   program build/bin/rsd-sim (spawned with --port 0; its first stdout line names the
   port). Request sequences are checked in the simulator's own request log (GET
   /_sim/log), never by wall-clock speed. Nothing here sleeps: the tests wait on pipes,
   sockets (poll inside rsd_ensurer_sync) and waitpid. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include "rsd_test.h"
#include "state_dir.h"
#include "attr_set.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#if !defined(_WIN32)
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#define SIM_BIN tp_exe("rsd-sim")

#define SIM_RUNTIME "router"
#include "sim_harness.h"
#include "ensure_step.h"
#include "http_req.h"

static int is_list(const log_entry *e) {
    return !strcmp(e->method, "GET") && (!strcmp(e->path, "/v1/models") || !strcmp(e->path, "/models"));
}

static int is_sse(const log_entry *e) {
    return !strcmp(e->method, "GET") && !strcmp(e->path, "/models/sse");
}

/* ---- helpers ------------------------------------------------------------------------ */
/* A llama.cpp request for model on url, the rest zero (the defaults). */
static rsd_ensure_req llama_req(const char *url, const char *model, uint32_t timeout_ms) {
    rsd_ensure_req q;
    memset(&q, 0, sizeof q);
    q.url = url;
    q.model = model;
    q.runtime = RSD_RUNTIME_LLAMACPP;
    q.timeout_ms = timeout_ms;
    return q;
}

/* An ensurer desc with no state and the environment ignored, the rest zero. */
static rsd_ensurer_desc bare_desc(void) {
    rsd_ensurer_desc d;
    memset(&d, 0, sizeof d);
    d.no_state = true;
    d.ignore_env = true;
    return d;
}

static rsd_ensurer *new_ensurer_sse(bool with_state, const rsd_protected_model *prot, int n_prot, bool sse) {
    rsd_ensurer_desc d;
    memset(&d, 0, sizeof d);
    d.no_sse = !sse;
    d.state_dir = g_state_dir;
    d.no_state = !with_state;
    d.ignore_env = true;
    d.protected_models = prot;
    d.n_protected = n_prot;
    return rsd_ensurer_create(&d);
}

static rsd_ensurer *new_ensurer(bool with_state, const rsd_protected_model *prot, int n_prot) {
    return new_ensurer_sse(with_state, prot, n_prot, true);
}

static int ensure(rsd_ensurer *e, const sim_proc *s, const char *model, rsd_runtime_kind rt, bool observe,
                  rsd_ensure_result *res) {
    rsd_ensure_req q = llama_req(s->url, model, 20000);
    q.runtime = rt;
    q.observe = observe;
    return rsd_ensurer_sync(e, &q, res);
}

/* ---- tests ---------------------------------------------------------------------------- */

/* L26: keep resident -> GET /v1/models, GET /props, done; then the TTL hit makes no request. */
static void test_l26_resident_then_ttl_hit(void) {
    static const char *const args[] = {"--models-max", "2", "--load-ms", "50", "--model", "id=a", "--model", "id=b", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *setup, *e;
    int base, n;
    REQUIRE(sim_start(&s, args) == 0);
    setup = new_ensurer(false, NULL, 0);
    e = new_ensurer(true, NULL, 0);
    REQUIRE(setup && e);
    CHECK_EQ_INT(ensure(setup, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    base = sim_log(&s);
    REQUIRE(base > 0);
    CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.decision, RSD_DECISION_ALREADY_RESIDENT);
    CHECK_EQ_INT(res.requests, 2);
    CHECK(!res.cache_hit);
    n = sim_log(&s);
    CHECK_EQ_INT(n - base, 2);
    CHECK(is_list(&g_log[base]));
    CHECK(!strcmp(g_log[base + 1].method, "GET") && !strcmp(g_log[base + 1].path, "/props"));
    /* the TTL hit: zero requests, same answer */
    CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK(res.cache_hit);
    CHECK_EQ_INT(res.requests, 0);
    CHECK_EQ_INT(sim_log(&s), n);
    /* another process mutated the target (generation bump): the entry is stale, a miss */
    {
        rsd_state *st = NULL;
        rsd_state_desc sd;
        char key[RSD_TARGET_KEY_MAX], raw[128];
        uint64_t g = 0;
        memset(&sd, 0, sizeof sd);
        sd.dir = g_state_dir;
        snprintf(raw, sizeof raw, "llamacpp|%s", s.url);
        REQUIRE((st = rsd_state_create(&sd, NULL)) != NULL);
        REQUIRE(rsd_target_key_normalise(rsd_str_c(raw), key, sizeof key) > 0);
        CHECK_EQ_INT(rsd_state_gen_bump_sync(st, key, &g), RSD_OK);
        rsd_state_destroy(st);
    }
    CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
    CHECK(!res.cache_hit);
    CHECK_EQ_INT(res.requests, 2);
    CHECK_EQ_INT(res.decision, RSD_DECISION_ALREADY_RESIDENT);
    CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK); /* cached again */
    CHECK(res.cache_hit);
    CHECK_EQ_INT(res.requests, 0);
    CHECK_EQ_INT(res.decision, RSD_DECISION_ALREADY_RESIDENT);
    CHECK_EQ_INT(sim_log(&s), n + 2);
    rsd_ensurer_destroy(setup);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* L27: free slot -> GET, GET /props, POST load, polls until loaded, no unload. Polling
   only (desc.no_sse): the schedule without /models/sse. (Requests are counted, never
   timed: the simulator's log stamps are not compared, they race on a busy machine.) */
static void test_l27_free_slot_fast_poll(void) {
    static const char *const args[] = {"--models-max", "2", "--load-ms", "300", "--model", "id=a", "--model", "id=b", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *e;
    int n, i, post = -1, polls = 0;
    REQUIRE(sim_start(&s, args) == 0);
    e = new_ensurer_sse(true, NULL, 0, false);
    REQUIRE(e);
    CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.decision, RSD_DECISION_LOAD);
    CHECK(res.loaded);
    n = sim_log(&s);
    REQUIRE(n >= 4);
    CHECK_EQ_INT(res.requests, n);
    CHECK(is_list(&g_log[0]));
    CHECK(!strcmp(g_log[1].path, "/props"));
    CHECK(!strcmp(g_log[2].method, "POST") && !strcmp(g_log[2].path, "/models/load") && !strcmp(g_log[2].model, "a"));
    CHECK_EQ_INT(log_count(0, n, "POST", NULL, NULL), 1);          /* one load, no unload */
    CHECK_EQ_INT(log_count(0, n, "GET", "/props", NULL), 1);
    post = 2;
    for (i = post + 1; i < n; i++) {
        CHECK(is_list(&g_log[i]));
        polls++;
    }
    CHECK(polls >= 1); /* the wait polled until the listing showed it loaded, then stopped */
    /* the attribution was persisted: a fresh ensurer sees 'a' as ours */
    {
        rsd_state *st = NULL;
        rsd_state_desc sd;
        rsd_attr_set *set = new_attr_set();
        char key[RSD_TARGET_KEY_MAX], raw[128];
        memset(&sd, 0, sizeof sd);
        sd.dir = g_state_dir;
        snprintf(raw, sizeof raw, "llamacpp|%s", s.url);
        REQUIRE(set && (st = rsd_state_create(&sd, NULL)) != NULL);
        REQUIRE(rsd_target_key_normalise(rsd_str_c(raw), key, sizeof key) > 0);
        CHECK_EQ_INT(rsd_state_attr_load(st, key, set), 1);
        CHECK(rsd_attr_set_find(set, "a", NULL) >= 0);
        rsd_state_destroy(st);
        free(set);
    }
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* L28: full router -> GET, GET /props, POST unload (one victim), POST load, polls. */
static void test_l28_full_router_swap(void) {
    static const char *const args[] = {"--models-max", "2", "--load-ms", "100", "--model", "id=a",
                                       "--model", "id=b", "--model", "id=c", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *setup, *e;
    int base, n, i, unload_at = -1, load_at = -1;
    REQUIRE(sim_start(&s, args) == 0);
    setup = new_ensurer(false, NULL, 0);
    e = new_ensurer(true, NULL, 0);
    REQUIRE(setup && e);
    CHECK_EQ_INT(ensure(setup, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
    CHECK_EQ_INT(ensure(setup, &s, "b", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
    base = sim_log(&s);
    CHECK_EQ_INT(ensure(e, &s, "c", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.decision, RSD_DECISION_LOAD_AFTER_EVICT);
    CHECK_EQ_INT(res.n_evicted, 1);
    n = sim_log(&s);
    CHECK_EQ_INT(res.requests, n - base);
    CHECK(is_list(&g_log[base]));
    CHECK(!strcmp(g_log[base + 1].path, "/props"));
    CHECK_EQ_INT(log_count(base, n, "POST", "/models/unload", NULL), 1);
    CHECK_EQ_INT(log_count(base, n, "POST", "/models/load", NULL), 1);
    CHECK_EQ_INT(log_count(base, n, "GET", "/props", NULL), 1);
    for (i = base; i < n; i++) {
        if (!strcmp(g_log[i].path, "/models/unload")) unload_at = i;
        if (!strcmp(g_log[i].path, "/models/load")) load_at = i;
    }
    /* the unload, then listings until the victim is listed unloaded (a July router counts
       a stopping model against --models-max: wire.md 6.1), then the load; the /models/sse
       subscription goes out before the unload POST on its own connection, so it may reach
       the server on either side of it: it is counted, not placed */
    CHECK(unload_at > base + 1 && load_at > unload_at);
    for (i = base + 2; i < unload_at; i++) CHECK(is_sse(&g_log[i]));
    for (i = unload_at + 1; i < load_at; i++) CHECK(is_list(&g_log[i]) || is_sse(&g_log[i]));
    CHECK(log_count(unload_at + 1, load_at, "GET", "/v1/models", NULL) + log_count(unload_at + 1, load_at, "GET", "/models", NULL) >= 1);
    CHECK(res.n_evicted == 1 && !strcmp(g_log[unload_at].model, res.evicted[0].id));
    for (i = load_at + 1; i < n; i++) CHECK(is_list(&g_log[i]) || is_sse(&g_log[i]));
    CHECK_EQ_INT(log_count(base, n, "GET", "/models/sse", NULL), 1);
    rsd_ensurer_destroy(setup);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* Observe never mutates: full router, observe-only -> OBSERVED, no POST at all. Also the
   RESIDENCY value given in the desc, and a declined plan (pinned slots). */
static void test_observe_never_mutates(void) {
    static const char *const args[] = {"--models-max", "2", "--load-ms", "50", "--model", "id=a",
                                       "--model", "id=b", "--model", "id=c", "--model", "id=p,tags=pinned:true", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *setup, *e, *env_e;
    rsd_ensurer_desc d;
    int base, n;
    REQUIRE(sim_start(&s, args) == 0);
    setup = new_ensurer(false, NULL, 0);
    e = new_ensurer(true, NULL, 0);
    memset(&d, 0, sizeof d);
    d.no_state = true;
    d.residency_env = "Observe ";
    env_e = rsd_ensurer_create(&d);
    REQUIRE(setup && e && env_e);
    CHECK_EQ_INT(ensure(setup, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
    CHECK_EQ_INT(ensure(setup, &s, "b", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
    base = sim_log(&s);
    CHECK_EQ_INT(ensure(e, &s, "c", RSD_RUNTIME_LLAMACPP, true, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_OBSERVED);
    CHECK_EQ_INT(res.decision, RSD_DECISION_OBSERVE);
    CHECK(!res.mutated && res.n_evicted == 0 && !res.keep_resident);
    CHECK(res.n_notices >= 1); /* what it would have done */
    CHECK_EQ_INT(ensure(env_e, &s, "c", RSD_RUNTIME_AUTO, false, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_OBSERVED);
    CHECK_EQ_INT(res.reason, RSD_REASON_OBSERVE_ENV);
    n = sim_log(&s);
    CHECK_EQ_INT(log_count(base, n, "POST", NULL, NULL), 0);
    CHECK(n > base);
    rsd_ensurer_destroy(setup);
    rsd_ensurer_destroy(e);
    rsd_ensurer_destroy(env_e);
    sim_stop(&s);
}

/* Two pinned residents fill the router: declined, nothing evicted, no POST. */
static void test_declined_when_pinned(void) {
    static const char *const args[] = {"--models-max", "2", "--load-ms", "50", "--model", "id=p1,tags=pinned:true",
                                       "--model", "id=p2,tags=pinned:true", "--model", "id=x", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *e;
    int base, n;
    REQUIRE(sim_start(&s, args) == 0);
    e = new_ensurer(true, NULL, 0);
    REQUIRE(e);
    CHECK_EQ_INT(ensure(e, &s, "p1", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
    CHECK_EQ_INT(ensure(e, &s, "p2", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
    base = sim_log(&s);
    CHECK_EQ_INT(ensure(e, &s, "x", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_DECLINED);
    CHECK_EQ_INT(res.n_evicted, 0);
    CHECK(res.message[0] != '\0');
    n = sim_log(&s);
    CHECK_EQ_INT(log_count(base, n, "POST", NULL, NULL), 0);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* Auto-detection probes once per target and ensurer (GET /props), then not again. */
static void test_auto_detect_once(void) {
    static const char *const args[] = {"--models-max", "2", "--load-ms", "50", "--model", "id=a", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer_desc d;
    rsd_ensurer *e;
    int base, n;
    REQUIRE(sim_start(&s, args) == 0);
    d = bare_desc();
    d.no_cache = true;
    e = rsd_ensurer_create(&d);
    REQUIRE(e);
    CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_AUTO, false, &res), RSD_OK);
    CHECK_EQ_INT(res.runtime, RSD_RUNTIME_LLAMACPP);
    n = sim_log(&s);
    CHECK(!strcmp(g_log[0].path, "/props"));       /* the probe */
    CHECK(is_list(&g_log[1]));
    CHECK_EQ_INT(res.requests, n);
    base = n;
    CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_AUTO, false, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.requests, 2);                  /* L26 only: no probe */
    n = sim_log(&s);
    CHECK_EQ_INT(n - base, 2);
    rsd_ensurer_destroy(e);
    /* a new ensurer detects again: the probe's GET /props is also the capacity answer, so
       a resident model costs 2 requests (GET /props, GET /v1/models), as upstream clio */
    e = rsd_ensurer_create(&d);
    REQUIRE(e);
    base = sim_log(&s);
    CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_AUTO, false, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.requests, 2);
    n = sim_log(&s);
    CHECK_EQ_INT(n - base, 2);
    CHECK(n - base == 2 && !strcmp(g_log[base].path, "/props") && is_list(&g_log[base + 1]));
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* Ollama, detected by probing: the scheduler strategy loads through /api/generate and
   ends RESIDENT once /api/ps lists the model; a second ensure sends no POST. */
static void test_ollama_auto_detect_and_load(void) {
    static const char *const args[] = {"--runtime", "ollama", "--load-ms", "50", "--model", "id=llama3.2:latest,size=2G", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer_desc d;
    rsd_ensurer *e;
    int n;
    REQUIRE(sim_start(&s, args) == 0);
    d = bare_desc();
    d.no_cache = true;
    e = rsd_ensurer_create(&d);
    REQUIRE(e);
    CHECK_EQ_INT(ensure(e, &s, "llama3.2", RSD_RUNTIME_AUTO, false, &res), RSD_OK);
    CHECK_EQ_INT(res.runtime, RSD_RUNTIME_OLLAMA);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    n = sim_log(&s);
    CHECK_EQ_INT(log_count(0, n, "POST", "/api/generate", NULL), 1);
    CHECK_EQ_INT(ensure(e, &s, "llama3.2", RSD_RUNTIME_AUTO, false, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.decision, RSD_DECISION_ALREADY_RESIDENT);
    CHECK_EQ_INT(log_count(0, sim_log(&s), "POST", "/api/generate", NULL), 1);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* The sim's loaded_ms of a model (GET /_sim/log "models"), -1 when never loaded/unknown. */
static int64_t sim_loaded_ms(const sim_proc *s, const char *id) {
    static char body[1 << 20];
    rsd_json_doc doc;
    int arr, i, count;
    int64_t x = -1;
    if (sim_get(s, "/_sim/log", NULL, body, sizeof body) != 200 ||
        rsd_json_parse(&doc, body, strlen(body), g_toks, (uint32_t)(sizeof g_toks / sizeof g_toks[0])) <= 0 ||
        (arr = rsd_json_find(&doc, 0, "models")) < 0)
        return -1;
    count = rsd_json_size(&doc, arr);
    for (i = 0; i < count; i++) {
        int o = rsd_json_at(&doc, arr, (uint32_t)i);
        if (rsd_json_str_eq(&doc, rsd_json_find(&doc, o, "id"), id) &&
            rsd_json_int64(&doc, rsd_json_find(&doc, o, "loaded_ms"), &x) == RSD_OK)
            return x;
    }
    return -1;
}

/* /models/sse on the llama.cpp router: the subscription goes out before the load POST, the
   "loaded" event ends the wait, and one poll confirms it. With sse_poll_ms far beyond the
   load time a timed poll would come ~20 s after the POST: the ensurer counts the event
   that woke it (sse_wakes) and the log holds one poll, after the loaded instant (it was
   sent after the event). A second, longer load on another ensurer (200 ms polls): one
   stream across all its WAIT steps. The subscription and the POST travel on two
   connections, so their order at the server is not asserted, nor any log stamp beyond
   what causality gives (a poll sent after the event is logged after the load). */
static void test_sse_wakes_the_wait(void) {
    static const char *const args[] = {"--models-max", "3", "--load-ms", "300", "--model", "id=a",
                                       "--model", "id=b,load=900", "--model", "id=c", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer_desc d;
    rsd_ensurer *e, *e2;
    rsd_ensure_req q;
    int n, i, post = -1, lists = 0, base;
    int64_t loaded;
    REQUIRE(sim_start(&s, args) == 0);
    d = bare_desc();
    d.sse_poll_ms = 20000;
    e = rsd_ensurer_create(&d);
    d.sse_poll_ms = 200;
    e2 = rsd_ensurer_create(&d);
    REQUIRE(e && e2);
    q = llama_req(s.url, "a", 60000);
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.decision, RSD_DECISION_LOAD);
    n = sim_log(&s);
    loaded = sim_loaded_ms(&s, "a");
    REQUIRE(n > 0 && loaded >= 0);
    CHECK_EQ_INT(res.requests, n); /* the stream is counted */
    for (i = 0; i < n; i++)
        if (!strcmp(g_log[i].path, "/models/load")) post = i;
    REQUIRE(post >= 0);
    CHECK_EQ_INT(log_count(0, n, "GET", "/models/sse", NULL), 1);
    CHECK_EQ_INT(log_count(0, n, "POST", "/models/load", "a"), 1);
    for (i = post + 1; i < n; i++) {
        if (is_sse(&g_log[i])) continue; /* the subscription may reach the server after the POST */
        CHECK(is_list(&g_log[i]));
        lists++;
        CHECK(g_log[i].t_ms >= loaded); /* sent after the "loaded" event */
    }
    CHECK_EQ_INT(lists, 1);
    CHECK(e->sse_wakes >= 1); /* the event ended the wait, not the 20 s timed poll */
    /* a 900 ms load, polls every 200 ms while the stream is open: still one stream */
    base = n;
    q.model = "b";
    CHECK_EQ_INT(rsd_ensurer_sync(e2, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    n = sim_log(&s);
    loaded = sim_loaded_ms(&s, "b");
    REQUIRE(loaded >= 0);
    CHECK_EQ_INT(res.requests, n - base);
    CHECK_EQ_INT(log_count(base, n, "GET", "/models/sse", NULL), 1);
    CHECK_EQ_INT(log_count(base, n, "POST", "/models/load", "b"), 1);
    CHECK(is_list(&g_log[n - 1]));
    post = -1;
    for (i = base; i < n; i++)
        if (!strcmp(g_log[i].path, "/models/load")) post = i;
    REQUIRE(post > base);
    for (i = post + 1; i < n; i++) CHECK(is_list(&g_log[i]) || is_sse(&g_log[i]));
    rsd_ensurer_destroy(e);
    rsd_ensurer_destroy(e2);
    sim_stop(&s);
}

/* Steps e through one ensure on the real clock (bounded by 60 s), noting its first wait
   for a wake: *began the time of the step that began it, *wake the wake it set then, *left
   the time of the step that ended it (0: none). Returns the last step's code. */
static int drive_noting_the_wait(rsd_ensurer *e, uint64_t *began, uint64_t *wake, uint64_t *left) {
    uint64_t end = rsd_now_ms() + 60000;
    int rc = RSD_PENDING;
    *began = *wake = *left = 0;
    while (rsd_now_ms() < end) {
        rsd_pollfd fds[8];
        uint64_t now = rsd_now_ms(), dl;
        int n, timeout;
        rc = ensure_step_code(e, now);
        if (e->waiting == RSDI_EN_WAIT_WAKE && rc == RSD_PENDING && !*began) {
            *began = now;
            *wake = e->wake;
        } else if (e->waiting != RSDI_EN_WAIT_WAKE && *began && !*left) {
            *left = now;
        }
        if (rc != RSD_PENDING) return rc;
        n = rsd_ensurer_pollfds(e, fds, 8);
        dl = rsd_ensurer_next_deadline(e);
        now = rsd_now_ms();
        timeout = dl <= now ? 0 : dl - now > 50 ? 50 : (int)(dl - now);
        if (timeout > 0) (void)rsd_poll(fds, n > 8 ? 8 : n, timeout);
    }
    return RSD_ERR_TIMEOUT;
}

/* A /models/sse event whose data is over half the stream's slot buffer is skipped and the
   wait ends at its next poll. Slot bodies of 512 bytes keep 256 for an event's data: the
   sim's "loaded" event (about 320 bytes, the model's entry in "info") does not fit, its
   "loading" events (64-137 bytes) do. The stream opens before the POST, so the wait after
   it is set to poll sse_poll_ms after it began, here longer than the load, and it ends no
   earlier (not at the event, nor on the fast schedule of a closed stream); that poll finds
   the model loaded (sent sse_poll_ms after the POST was answered, while the load ends
   load-ms after the POST arrived), so the log holds one poll after the POST. The times
   compared are those the test passed to rsd_ensurer_step. With the default 4 KiB slots
   the same event wakes the wait (polls 20 s apart there, so that only the event ends it). */
static void test_sse_event_over_half_the_slot_is_skipped(void) {
    static const char *const args[] = {"--models-max", "3", "--load-ms", "100", "--model", "id=a", "--model", "id=b", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer_desc d;
    rsd_ensurer *e;
    rsd_ensure_req q;
    uint64_t began, wake, left;
    int n, i, post = -1, lists = 0;
    REQUIRE(sim_start(&s, args) == 0);
    d = bare_desc();
    d.sse_poll_ms = 600;
    d.http.max_body_bytes = 512;
    e = rsd_ensurer_create(&d);
    REQUIRE(e);
    q = llama_req(s.url, "a", 60000);
    REQUIRE(rsd_ensurer_begin(e, &q, rsd_now_ms()) == RSD_OK);
    CHECK_EQ_INT(drive_noting_the_wait(e, &began, &wake, &left), RSD_OK);
    rsd_ensurer_query(e, &res);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.decision, RSD_DECISION_LOAD);
    REQUIRE(began && left);
    CHECK_EQ_INT(wake - began, 600); /* the stream's schedule */
    CHECK(left >= wake);             /* the wait ended at its poll */
    CHECK_EQ_INT(e->sse_wakes, 0);   /* the "loaded" event was skipped */
    n = sim_log(&s);
    REQUIRE(n > 0);
    CHECK_EQ_INT(res.requests, n);
    CHECK_EQ_INT(log_count(0, n, "GET", "/models/sse", NULL), 1);
    CHECK_EQ_INT(log_count(0, n, "POST", "/models/load", "a"), 1);
    for (i = 0; i < n; i++)
        if (!strcmp(g_log[i].path, "/models/load")) post = i;
    REQUIRE(post >= 0);
    for (i = post + 1; i < n; i++) {
        if (is_sse(&g_log[i])) continue;
        CHECK(is_list(&g_log[i]));
        lists++;
    }
    CHECK_EQ_INT(lists, 1);
    rsd_ensurer_destroy(e);
    d.http.max_body_bytes = 0; /* 4 KiB slots: the same event ends the wait before its poll */
    d.sse_poll_ms = 20000;
    e = rsd_ensurer_create(&d);
    REQUIRE(e);
    q.model = "b";
    REQUIRE(rsd_ensurer_begin(e, &q, rsd_now_ms()) == RSD_OK);
    CHECK_EQ_INT(drive_noting_the_wait(e, &began, &wake, &left), RSD_OK);
    rsd_ensurer_query(e, &res);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK(began && left && left < wake);
    CHECK(e->sse_wakes >= 1);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* context_ceiling: 0 = RESIDENCY_CORESIDENT_CONTEXT from the environment (unless
   ignore_env), else the request's value; it reaches the load body beside another resident
   (Ollama: options.num_ctx, which the sim reports in /api/ps context_length). */
static void test_context_ceiling_env(void) {
    static const char *const args[] = {"--runtime", "ollama", "--load-ms", "20", "--model", "id=x:latest,size=1G",
                                       "--model", "id=y:latest,size=1G", "--model", "id=z:latest,size=1G", NULL};
    static char body[65536];
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer_desc d;
    rsd_ensurer *e;
    rsd_ensure_req q;
    REQUIRE(sim_start(&s, args) == 0);
    memset(&d, 0, sizeof d);
    d.no_state = true;
    d.no_cache = true;
    d.residency_env = ""; /* RESIDENCY unset, whatever the test's environment says */
    e = rsd_ensurer_create(&d);
    REQUIRE(e);
    memset(&q, 0, sizeof q);
    q.url = s.url;
    q.runtime = RSD_RUNTIME_OLLAMA;
    q.timeout_ms = 20000;
    q.model = "x";
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    tp_setenv("RESIDENCY_CORESIDENT_CONTEXT", "4096");
    q.model = "y";
    q.context_length = 32768;
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    q.model = "z";
    q.context_ceiling = 8192; /* the request's own ceiling wins over the environment */
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    tp_setenv("RESIDENCY_CORESIDENT_CONTEXT", NULL);
    REQUIRE(sim_get(&s, "/api/ps", NULL, body, sizeof body) == 200);
    CHECK(strstr(body, "\"name\":\"y:latest\"") != NULL);
    CHECK(strstr(body, "\"context_length\":4096") != NULL);
    CHECK(strstr(body, "\"context_length\":8192") != NULL);
    CHECK(strstr(body, "\"context_length\":32768") == NULL);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* The clamp by bytes end to end: with the capacity, the keep's footprint and its KV per
   token given, a load beside a resident gets the largest context whose KV fits what is
   left (Ollama's num_ctx, which the sim reports in /api/ps), in whole blocks of 256. */
static void test_context_clamp_by_bytes(void) {
    static const char *const args[] = {"--runtime", "ollama", "--load-ms", "20", "--model", "id=x:latest,size=1G",
                                       "--model", "id=y:latest,size=1G", NULL};
    static char body[65536];
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer_desc d;
    rsd_ensurer *e;
    rsd_ensure_req q;
    REQUIRE(sim_start(&s, args) == 0);
    memset(&d, 0, sizeof d);
    d.no_state = true;
    d.no_cache = true;
    d.ignore_env = true; /* the fixed ceiling 131072, whatever the environment */
    d.residency_env = "";
    e = rsd_ensurer_create(&d);
    REQUIRE(e);
    memset(&q, 0, sizeof q);
    q.url = s.url;
    q.runtime = RSD_RUNTIME_OLLAMA;
    q.timeout_ms = 20000;
    q.model = "x";
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    /* 2.5 GiB in all, x holds 1 GiB: 1.5 GiB left; 64 KiB a token -> 24576 tokens */
    q.model = "y";
    q.context_length = 32768;
    q.capacity_bytes = (uint64_t)5 << 29;
    q.keep_bytes = (uint64_t)1 << 30;
    q.kv_bytes_per_token = 64 * 1024;
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.n_evicted, 0);
    REQUIRE(sim_get(&s, "/api/ps", NULL, body, sizeof body) == 200);
    CHECK(strstr(body, "\"name\":\"y:latest\"") != NULL);
    CHECK(strstr(body, "\"context_length\":24576") != NULL);
    CHECK(strstr(body, "\"context_length\":32768") == NULL);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

#if !defined(_WIN32) /* fork */
/* ---- a fake router without /models/sse (404): the ensurer falls back to polling ---- */
static void fake_router_serve(int port_fd) {
    rsd_http_server_desc sd;
    rsd_http_server *srv;
    bool loaded[2] = {false, false};
    int n_sse = 0, n_req = 0;
    uint16_t port;
    memset(&sd, 0, sizeof sd);
    srv = rsd_http_server_create(&sd);
    if (!srv) _exit(2);
    port = rsd_http_server_port(srv);
    if (write(port_fd, &port, sizeof port) != (ssize_t)sizeof port) _exit(3);
    close(port_fd);
    for (;;) {
        rsd_pollfd fds[40];
        rsd_http_server_event ev;
        int n = rsd_http_server_pollfds(srv, fds, 40);
        (void)poll((struct pollfd *)(void *)fds, (nfds_t)(n > 40 ? 40 : n), 100);
        rsd_http_server_step(srv, rsd_now_ms());
        while (rsd_http_server_next_event(srv, &ev)) {
            char body[1024];
            rsd_http_header ct;
            const char *json = "application/json";
            rsd_str path;
            int st = 200, k;
            if (ev.type != RSD_HTTP_SEV_REQUEST) continue;
            path = ev.head->target;
            ct.name = rsd_str_c("Content-Type");
            ct.value = rsd_str_c(json);
            if (rsd_str_eq_c(path, "/_n")) {
                snprintf(body, sizeof body, "sse=%d req=%d", n_sse, n_req);
                ct.value = rsd_str_c("text/plain");
            } else if (++n_req, rsd_str_eq_c(path, "/models/sse")) {
                n_sse++;
                st = 404;
                snprintf(body, sizeof body, "{\"error\":{\"code\":404,\"message\":\"File Not Found\"}}");
            } else if (rsd_str_eq_c(path, "/props")) {
                snprintf(body, sizeof body, "{\"role\":\"router\",\"max_instances\":4}");
            } else if (rsd_str_eq_c(path, "/models/load")) {
                k = ev.body.len && memchr(ev.body.ptr, 'b', ev.body.len) ? 1 : 0; /* {"model":"a"|"b"} */
                loaded[k] = true;
                snprintf(body, sizeof body, "{\"success\":true}");
            } else if (rsd_str_eq_c(path, "/v1/models") || rsd_str_eq_c(path, "/models")) {
                snprintf(body, sizeof body,
                         "{\"object\":\"list\",\"data\":[{\"id\":\"a\",\"object\":\"model\",\"status\":{\"value\":\"%s\"}},"
                         "{\"id\":\"b\",\"object\":\"model\",\"status\":{\"value\":\"%s\"}}]}",
                         loaded[0] ? "loaded" : "unloaded", loaded[1] ? "loaded" : "unloaded");
            } else {
                st = 404;
                snprintf(body, sizeof body, "{}");
            }
            rsd_http_respond(srv, ev.req, st, &ct, 1, body, strlen(body));
        }
    }
}

/* The server answers GET /models/sse with 404 (an older router): the first load still
   succeeds by polling, the target is remembered as without SSE, and the next load on it
   does not ask again. Every request is counted in result.requests. */
static void test_sse_refused_falls_back_to_polling(void) {
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer_desc d;
    rsd_ensurer *e;
    rsd_ensure_req q;
    char body[256];
    int fds[2], sse = -1, req = -1, st;
    uint16_t port = 0;
    memset(&s, 0, sizeof s);
    REQUIRE(pipe(fds) == 0);
    s.pid = fork();
    REQUIRE(s.pid >= 0);
    if (s.pid == 0) {
        close(fds[0]);
        fake_router_serve(fds[1]);
        _exit(0);
    }
    close(fds[1]);
    st = (int)read(fds[0], &port, sizeof port);
    close(fds[0]);
    REQUIRE(st == (int)sizeof port && port > 0);
    s.port = port;
    snprintf(s.url, sizeof s.url, "http://127.0.0.1:%d", s.port);
    d = bare_desc();
    e = rsd_ensurer_create(&d);
    REQUIRE(e);
    q = llama_req(s.url, "a", 20000);
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.decision, RSD_DECISION_LOAD);
    REQUIRE(sim_get(&s, "/_n", NULL, body, sizeof body) == 200 && sscanf(body, "sse=%d req=%d", &sse, &req) == 2);
    CHECK_EQ_INT(sse, 1);
    CHECK_EQ_INT((int)res.requests, req);
    q.model = "b";
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.decision, RSD_DECISION_LOAD);
    REQUIRE(sim_get(&s, "/_n", NULL, body, sizeof body) == 200 && sscanf(body, "sse=%d req=%d", &sse, &req) == 2);
    CHECK_EQ_INT(sse, 1); /* remembered: not asked again */
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}
#endif

/* An unreachable server: DEGRADED with the connect error, one request, nothing else. */
static void test_unreachable(void) {
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *e = new_ensurer(true, NULL, 0);
    static const char *const args[] = {"--model", "id=a", NULL};
    int rc;
    REQUIRE(e);
    /* a port that was just in use and is now closed: start a simulator, stop it */
    REQUIRE(sim_start(&s, args) == 0);
    sim_stop(&s);
    rc = ensure(e, &s, "a", RSD_RUNTIME_AUTO, false, &res);
    CHECK_EQ_INT(rc, RSD_ERR_CONNECT);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_DEGRADED);
    CHECK_EQ_INT(res.requests, 1);
    CHECK(strstr(res.message, "unreachable") != NULL);
    rc = ensure(e, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res);
    CHECK_EQ_INT(rc, RSD_ERR_CONNECT);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_DEGRADED);
    CHECK_EQ_INT(res.requests, 1);
    CHECK(!res.mutated);
    rsd_ensurer_destroy(e);
}

/* Bad requests end at once with a code and a message; the non-blocking API reports them. */
static void test_bad_requests(void) {
    rsd_ensurer *e = new_ensurer(false, NULL, 0);
    rsd_ensure_req q;
    rsd_ensure_result res;
    REQUIRE(e);
    memset(&q, 0, sizeof q);
    q.url = "ftp://x";
    q.model = "a";
    CHECK_EQ_INT(rsd_ensurer_begin(e, &q, 1000), RSD_ERR_URL);
    CHECK_EQ_INT(rsd_ensurer_step(e, 1001), 1);             /* its end waits to be pulled */
    CHECK(rsd_ensurer_next_deadline(e) == 0);
    CHECK(rsd_ensurer_next_event(e, &res) && res.result == RSD_ERR_URL);
    CHECK_EQ_INT(rsd_ensurer_step(e, 1002), 0);             /* pulled: nothing waits */
    CHECK(!rsd_ensurer_next_event(e, &res));
    CHECK(rsd_ensurer_next_deadline(e) == RSD_NO_DEADLINE);
    rsd_ensurer_query(e, &res);
    CHECK(res.done && res.outcome == RSD_OUTCOME_DEGRADED && res.message[0]);
    q.url = "http://127.0.0.1:9";
    q.model = "";
    CHECK_EQ_INT(rsd_ensurer_begin(e, &q, 1000), RSD_ERR_MODEL_ID);
    CHECK_EQ_INT(rsd_ensurer_begin(e, NULL, 1000), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_runtime_kind_parse("router"), RSD_RUNTIME_LLAMACPP);
    CHECK_EQ_INT(rsd_runtime_kind_parse("Ollama"), RSD_RUNTIME_OLLAMA);
    CHECK_EQ_INT(rsd_runtime_kind_parse("vllm"), RSD_ERR_ARG);
    CHECK_EQ_STR(rsd_runtime_kind_str(RSD_RUNTIME_LMSTUDIO), "lmstudio");
    /* a host name the non-blocking path was never told about: RSD_ERR_RESOLVE, no DNS */
    q.url = "http://no-such-host.invalid:8080";
    q.model = "a";
    q.runtime = RSD_RUNTIME_LLAMACPP;
    CHECK_EQ_INT(rsd_ensurer_begin(e, &q, 1000), RSD_OK);
    {
        int rc = RSD_PENDING, guard = 0;
        while (rc == RSD_PENDING && guard++ < 100) rc = ensure_step_code(e, 1000);
        CHECK_EQ_INT(rc, RSD_ERR_RESOLVE);
    }
    rsd_ensurer_destroy(e);
}

/* A failed load after an eviction restores the victim: LOAD_FAILED, evicted[0].restored. */
static void test_load_failed_restores(void) {
    static const char *const args[] = {"--models-max", "2", "--load-ms", "50", "--fail-ms", "20", "--model", "id=a",
                                       "--model", "id=b", "--model", "id=c", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *setup, *e;
    rsd_http_request q;
    rsd_http_event ev;
    char url[96];
    int base, n;
    REQUIRE(sim_start(&s, args) == 0);
    setup = new_ensurer(false, NULL, 0);
    e = new_ensurer(true, NULL, 0);
    REQUIRE(setup && e);
    CHECK_EQ_INT(ensure(setup, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
    CHECK_EQ_INT(ensure(setup, &s, "b", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
    snprintf(url, sizeof url, "%s/_sim/fail-loads", s.url);
    memset(&q, 0, sizeof q);
    q.method = "POST";
    q.url = url;
    q.content_type = "application/json";
    q.body = "{\"count\":1}";
    q.body_len = strlen((const char *)q.body);
    REQUIRE(rsd_http_request_sync(rsd_ensurer_http(setup), &q, &ev) == RSD_OK && ev.status == 200);
    base = sim_log(&s);
    CHECK_EQ_INT(ensure(e, &s, "c", RSD_RUNTIME_LLAMACPP, false, &res), RSD_ERR_LOAD_FAILED);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_LOAD_FAILED);
    REQUIRE(res.n_evicted == 1);
    CHECK(res.evicted[0].restored);
    CHECK(res.message[0] != '\0');
    n = sim_log(&s);
    CHECK_EQ_INT(log_count(base, n, "POST", "/models/unload", NULL), 1);
    CHECK_EQ_INT(log_count(base, n, "POST", "/models/load", "c"), 1);
    CHECK_EQ_INT(log_count(base, n, "POST", "/models/load", res.evicted[0].id), 1); /* the restore */
    rsd_ensurer_destroy(setup);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* Someone else holds the target's lock past our deadline: nothing is mutated, the
   ensure ends DEGRADED with RSD_ERR_TIMEOUT, driven by the lock's own retry schedule. */
static void test_lock_held_elsewhere(void) {
    static const char *const args[] = {"--models-max", "2", "--load-ms", "50", "--model", "id=a", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *e;
    rsd_state *st = NULL;
    rsd_state_desc sd;
    rsd_state_lock lk;
    rsd_ensure_req q;
    char key[RSD_TARGET_KEY_MAX], raw[128];
    int base, n;
    REQUIRE(sim_start(&s, args) == 0);
    memset(&sd, 0, sizeof sd);
    sd.dir = g_state_dir;
    memset(&lk, 0, sizeof lk);
    REQUIRE((st = rsd_state_create(&sd, NULL)) != NULL);
    snprintf(raw, sizeof raw, "llamacpp|%s", s.url);
    REQUIRE(rsd_target_key_normalise(rsd_str_c(raw), key, sizeof key) > 0);
    REQUIRE(rsd_state_lock_try(st, &lk, key, "test") == RSD_OK);
    e = new_ensurer(true, NULL, 0);
    REQUIRE(e);
    base = sim_log(&s);
    q = llama_req(s.url, "a", 300);
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_ERR_TIMEOUT);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_DEGRADED);
    CHECK(!res.mutated && !res.lock_held);
    n = sim_log(&s);
    CHECK_EQ_INT(log_count(base, n, "POST", NULL, NULL), 0);
    rsd_state_unlock(st, &lk);
    /* released: the same ensurer now loads it under the lock */
    q.timeout_ms = 20000;
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK(res.lock_held);
    rsd_state_destroy(st);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

#if !defined(_WIN32) /* fork */
/* 4 processes ensure 4 different models at once on one router (capacity 2, one pinned
   model resident): the pinned model is never unloaded, our own loads never exceed the
   capacity, every process ends with a coherent result. */
static void test_multi_process(void) {
    static const char *const args[] = {"--models-max", "2", "--load-ms", "100", "--model", "id=pin,tags=pinned:true",
                                       "--model", "id=m0", "--model", "id=m1", "--model", "id=m2", "--model", "id=m3", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *setup;
    pid_t kids[4];
    int pipes[4][2], i, n, resident, outcomes[4], errors[4];
    char names[4][16];
    REQUIRE(sim_start(&s, args) == 0);
    setup = new_ensurer(false, NULL, 0);
    REQUIRE(setup);
    CHECK_EQ_INT(ensure(setup, &s, "pin", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
    rsd_ensurer_destroy(setup);
    fflush(stdout);
    for (i = 0; i < 4; i++) {
        snprintf(names[i], sizeof names[i], "m%d", i);
        REQUIRE(pipe(pipes[i]) == 0);
        kids[i] = fork();
        REQUIRE(kids[i] >= 0);
        if (kids[i] == 0) {
            rsd_ensurer *e = new_ensurer(true, NULL, 0);
            int msg[2] = {-1, -1};
            close(pipes[i][0]);
            if (e) {
                msg[1] = ensure(e, &s, names[i], RSD_RUNTIME_LLAMACPP, false, &res);
                msg[0] = (int)res.outcome;
                rsd_ensurer_destroy(e);
            }
            if (write(pipes[i][1], msg, sizeof msg) != (ssize_t)sizeof msg) _exit(3);
            _exit(0);
        }
        close(pipes[i][1]);
    }
    for (i = 0; i < 4; i++) {
        int msg[2] = {-1, -1}, st = 0;
        ssize_t got = read(pipes[i][0], msg, sizeof msg); /* blocks until the child answers */
        close(pipes[i][0]);
        while (waitpid(kids[i], &st, 0) < 0 && errno == EINTR) {}
        CHECK(got == (ssize_t)sizeof msg);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        outcomes[i] = msg[0];
        errors[i] = msg[1];
    }
    for (i = 0; i < 4; i++) {
        /* coherent: either resident (under the lock, one at a time) or a load that failed
           with a reason; never DEGRADED, never a declined plan (one slot is free to take) */
        CHECK(outcomes[i] == RSD_OUTCOME_RESIDENT || outcomes[i] == RSD_OUTCOME_LOAD_FAILED);
        if (outcomes[i] == RSD_OUTCOME_RESIDENT) CHECK_EQ_INT(errors[i], RSD_OK);
        else CHECK(errors[i] < 0);
    }
    n = sim_log(&s);
    REQUIRE(n > 0);
    if (getenv("RSD_TEST_VERBOSE")) {
        for (i = 0; i < 4; i++) printf("  m%d: %s %s\n", i, rsd_outcome_str(outcomes[i]), rsd_result_name(errors[i]));
        for (i = 0; i < n; i++) printf("  %4d %-4s %-16s %-4s %d t=%lld\n", i, g_log[i].method, g_log[i].path,
                                       g_log[i].model, g_log[i].status, (long long)g_log[i].t_ms);
    }
    CHECK_EQ_INT(log_count(0, n, "POST", "/models/unload", "pin"), 0);
    CHECK_EQ_INT(log_count(0, n, "POST", "/models/load", "pin"), 1); /* only the setup load */
    /* replay our own mutations: never more than 2 resident by our account */
    resident = 1; /* pin */
    {
        char held[8][96];
        int nh = 0, k, j;
        snprintf(held[nh++], sizeof held[0], "pin");
        for (k = 0; k < n; k++) {
            log_entry *e = &g_log[k];
            if (strcmp(e->method, "POST") || e->status < 200 || e->status > 299) continue;
            if (!strcmp(e->path, "/models/unload")) {
                for (j = 0; j < nh; j++)
                    if (!strcmp(held[j], e->model)) { memcpy(held[j], held[--nh], sizeof held[0]); break; }
            } else if (!strcmp(e->path, "/models/load")) {
                bool dup = false;
                for (j = 0; j < nh; j++) dup = dup || !strcmp(held[j], e->model);
                if (!dup && nh < 8) snprintf(held[nh++], sizeof held[0], "%s", e->model);
                CHECK(nh <= 2);
            }
        }
        resident = nh;
    }
    CHECK(resident <= 2);
    sim_stop(&s);
}
#endif

/* ---- state: COMMIT, failed writes, attribution under the lock ------------------------ */
/* The target key an ensurer uses for a router at s. */
static void router_key(const sim_proc *s, char *key, size_t cap) {
    char raw[128];
    snprintf(raw, sizeof raw, "llamacpp|%s", s->url);
    if (rsd_target_key_normalise(rsd_str_c(raw), key, cap) <= 0) key[0] = '\0';
}

static bool in_commit_wait(rsd_ensurer *e) { return e->waiting == RSDI_EN_WAIT_COMMIT; }

static int notice_of(const rsd_ensure_result *r, rsd_driver_msg dmsg) {
    int i;
    for (i = 0; i < r->n_notices; i++)
        if (r->notices[i].dmsg == dmsg) return i;
    return -1;
}

/* COMMIT never blocks a step: with the attribution-file lock held elsewhere the ensure
   waits in its own step (PENDING, next deadline = the lock's next attempt) and records the
   load once the lock is free; held past the ensure's deadline (a jump of the clock), the
   ensure still ends RESIDENT, with a warning notice, state_error, and nothing cached. */
static void test_commit_lock_is_a_step(void) {
    static const char *const args[] = {"--models-max", "2", "--load-ms", "50", "--model", "id=a", "--model", "id=b", NULL};
    static rsd_attr_set set;
    sim_proc s;
    rsd_state *st = NULL;
    rsd_state_desc sd;
    rsd_state_lock hold;
    rsd_ensurer *e;
    rsd_ensure_req q;
    rsd_ensure_result res;
    char key[RSD_TARGET_KEY_MAX];
    uint64_t g = 0, now;
    int i, rc, k;
    ATTR_SET_UP(set);
    REQUIRE(sim_start(&s, args) == 0);
    router_key(&s, key, sizeof key);
    memset(&sd, 0, sizeof sd);
    sd.dir = g_state_dir;
    memset(&hold, 0, sizeof hold);
    REQUIRE((st = rsd_state_create(&sd, NULL)) != NULL);
    REQUIRE(rsd_state_attr_lock_begin(st, &hold, key, 0, 0) == RSD_OK && rsd_state_lock_step(st, &hold, 0) == 1 &&
            rsd_state_lock_held(&hold));
    e = new_ensurer(true, NULL, 0);
    REQUIRE(e);
    q = llama_req(s.url, "a", 60000);
    REQUIRE(rsd_ensurer_begin(e, &q, rsd_now_ms()) == RSD_OK);
    CHECK_EQ_INT(drive(e, in_commit_wait), RSD_PENDING);
    REQUIRE(in_commit_wait(e));
    for (i = 0; i < 5; i++) { /* each step at the lock's wake makes one attempt and returns */
        now = rsd_ensurer_next_deadline(e);
        CHECK_EQ_INT(ensure_step_code(e, now), RSD_PENDING);
        CHECK(rsd_ensurer_next_deadline(e) > now && rsd_ensurer_next_deadline(e) <= now + RSD_STATE_ATTR_RETRY_MAX_MS);
    }
    CHECK(e->alk.attempts >= 6);
    CHECK_EQ_INT(rsd_state_attr_load(st, key, &set), 0); /* not recorded yet */
    rsd_state_unlock(st, &hold);
    CHECK_EQ_INT(drive(e, NULL), RSD_OK);
    rsd_ensurer_query(e, &res);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.state_error, RSD_OK);
    CHECK(notice_of(&res, RSD_DMSG_STATE_FAILED) < 0);
    CHECK_EQ_INT(rsd_state_attr_load(st, key, &set), 1);
    CHECK(rsd_attr_set_find(&set, "a", NULL) >= 0);
    CHECK(rsd_state_gen_read(st, key, &g) == RSD_OK && g >= 1);
    /* held past the deadline: RESIDENT, a warning, nothing recorded, nothing cached */
    REQUIRE(rsd_state_attr_lock_begin(st, &hold, key, 0, 0) == RSD_OK && rsd_state_lock_step(st, &hold, 0) == 1 &&
            rsd_state_lock_held(&hold));
    q.model = "b";
    REQUIRE(rsd_ensurer_begin(e, &q, rsd_now_ms()) == RSD_OK);
    CHECK_EQ_INT(drive(e, in_commit_wait), RSD_PENDING);
    REQUIRE(in_commit_wait(e));
    now = e->deadline + 1;
    for (k = 0, rc = RSD_PENDING; rc == RSD_PENDING && k < 100; k++) rc = ensure_step_code(e, now);
    CHECK_EQ_INT(rc, RSD_OK);
    rsd_ensurer_query(e, &res);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.state_error, RSD_ERR_TIMEOUT);
    i = notice_of(&res, RSD_DMSG_STATE_FAILED);
    REQUIRE(i >= 0);
    CHECK_EQ_INT(res.notices[i].notice.level, RSD_LEVEL_WARNING);
    CHECK(strstr(res.notices[i].text, "busy") != NULL);
    rsd_state_unlock(st, &hold);
    CHECK_EQ_INT(rsd_state_attr_load(st, key, &set), 1); /* b not recorded */
    CHECK_EQ_INT(ensure(e, &s, "b", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
    CHECK(!res.cache_hit); /* the failed commit cached nothing */
    CHECK(res.requests > 0);
    rsd_state_destroy(st);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

#if !defined(_WIN32) /* fork, setrlimit */
/* Sets RLIMIT_FSIZE to 0 (a write to any regular file fails with EFBIG, as on a full
   disk; SIGXFSZ ignored), for a forked child. */
static int limit_file_writes(void) {
    struct rlimit rl;
    rl.rlim_cur = rl.rlim_max = 0;
    signal(SIGXFSZ, SIG_IGN);
    return setrlimit(RLIMIT_FSIZE, &rl);
}

/* A state write that really fails (no file may grow: EFBIG): the model is loaded and
   the ensure succeeds, with a warning notice, state_error, and no cached decision; and
   rsd-ensure --json says so ("state_error", the notice) with exit code 0. */
static void test_state_write_failure_warns(void) {
    static const char *const args[] = {"--models-max", "2", "--load-ms", "50", "--model", "id=a", "--model", "id=b", NULL};
    static char out[1 << 16];
    sim_proc s;
    pid_t pid;
    int st = 0, fds[2], i;
    size_t n = 0;
    ssize_t got;
    char dir[300];
    rsd_json_doc doc;
    REQUIRE(sim_start(&s, args) == 0);
    snprintf(dir, sizeof dir, "%s/fsize0", g_state_dir);
    fflush(stdout);
    pid = fork();
    if (pid < 0) sim_stop(&s);
    REQUIRE(pid >= 0);
    if (pid == 0) {
        rsd_ensurer_desc d;
        rsd_ensurer *e;
        rsd_ensure_result res;
        if (limit_file_writes() != 0) _exit(10);
        memset(&d, 0, sizeof d);
        d.state_dir = dir;
        d.ignore_env = true;
        d.no_sse = true;
        e = rsd_ensurer_create(&d);
        if (!e || !rsd_ensurer_has_state(e)) _exit(11);
        if (ensure(e, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res) != RSD_OK) _exit(12);
        if (res.outcome != RSD_OUTCOME_RESIDENT || !res.loaded) _exit(13);
        if (res.state_error != RSD_ERR_STATE_IO) _exit(14);
        i = notice_of(&res, RSD_DMSG_STATE_FAILED);
        if (i < 0 || res.notices[i].notice.level != RSD_LEVEL_WARNING) _exit(15);
        if (!strstr(res.notices[i].text, "File too large")) _exit(16);
        if (ensure(e, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res) != RSD_OK) _exit(17);
        if (res.cache_hit || res.requests == 0) _exit(18); /* nothing was cached on it */
        rsd_ensurer_destroy(e);
        _exit(0);
    }
    CHECK_EQ_INT(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st));
    CHECK_EQ_INT(WEXITSTATUS(st), 0);
    /* the CLI */
    if (pipe(fds) != 0 || (pid = fork()) < 0) {
        sim_stop(&s);
        REQUIRE(!"pipe or fork failed");
    }
    if (pid == 0) {
        close(fds[0]);
        if (dup2(fds[1], 1) < 0 || limit_file_writes() != 0) _exit(120);
        execl("build/bin/rsd-ensure", "rsd-ensure", "--url", s.url, "--model", "b", "--runtime", "llamacpp",
              "--state-dir", dir, "--json", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    while (n < sizeof out - 1 && (got = read(fds[0], out + n, sizeof out - 1 - n)) != 0) {
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) break;
        n += (size_t)got;
    }
    out[n] = '\0';
    close(fds[0]);
    CHECK_EQ_INT(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* resident: the model is loaded */
    sim_stop(&s); /* before any REQUIRE returns: a simulator left running holds the output pipe */
    REQUIRE(rsd_json_parse(&doc, out, n, g_toks, (uint32_t)(sizeof g_toks / sizeof g_toks[0])) > 0);
    CHECK(rsd_json_str_eq(&doc, rsd_json_find(&doc, 0, "outcome"), "resident"));
    CHECK(rsd_json_str_eq(&doc, rsd_json_find(&doc, 0, "state_error"), "ERR_STATE_IO"));
    CHECK(strstr(out, "\"level\":\"warning\"") != NULL);
    CHECK(strstr(out, "could not record this change") != NULL);
    if (rsdt_cur_failed) printf("  rsd-ensure --json: %s\n", out);
}
#endif

/* Two ensures of different models at once on a one-slot router that holds 'c' (ours):
   the second decides under the lock with the attribution read again there, so it calls
   'a' (just loaded by the first) residency-loaded -- no "residency did not load it"
   swap warning -- and never shows the plan the lock overtook (evicting 'c', which the
   first ensure had already unloaded). */
static void test_concurrent_attribution_under_lock(void) {
    static const char *const args[] = {"--models-max", "1", "--load-ms", "100", "--model", "id=a", "--model", "id=b",
                                       "--model", "id=c", NULL};
    sim_proc s;
    rsd_ensurer *e0, *e1, *e2;
    rsd_ensure_req q1, q2;
    rsd_ensure_result res;
    int i, about_a = 0;
    REQUIRE(sim_start(&s, args) == 0);
    e0 = new_ensurer(true, NULL, 0);
    e1 = new_ensurer(true, NULL, 0);
    e2 = new_ensurer(true, NULL, 0);
    REQUIRE(e0 && e1 && e2);
    CHECK_EQ_INT(ensure(e0, &s, "c", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK); /* c: ours */
    q1 = llama_req(s.url, "a", 60000);
    q2 = llama_req(s.url, "b", 60000);
    REQUIRE(rsd_ensurer_begin(e1, &q1, rsd_now_ms()) == RSD_OK);
    REQUIRE(rsd_ensurer_begin(e2, &q2, rsd_now_ms()) == RSD_OK);
    CHECK_EQ_INT(drive(e1, holds_lock), RSD_PENDING);
    REQUIRE(holds_lock(e1));
    CHECK_EQ_INT(drive(e2, in_lock_wait), RSD_PENDING); /* e2 listed and decided, waits for e1 */
    REQUIRE(in_lock_wait(e2));
    CHECK_EQ_INT(drive(e1, NULL), RSD_OK);
    rsd_ensurer_query(e1, &res);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(drive(e2, NULL), RSD_OK);
    rsd_ensurer_query(e2, &res);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK(res.n_evicted == 1 && !strcmp(res.evicted[0].id, "a"));
    for (i = 0; i < res.n_notices; i++) {
        const rsd_reconcile_notice *n = &res.notices[i];
        if (getenv("RSD_TEST_VERBOSE")) printf("  e2 notice: %s %s\n", rsd_notice_kind_str(n->notice.kind), n->text);
        CHECK(n->notice.kind != RSD_NOTICE_SWAP);          /* 'a' is ours: no swap warning */
        CHECK(strstr(n->text, "'c'") == NULL);              /* the overtaken plan never shows */
        if (n->notice.kind == RSD_NOTICE_ABOUT_TO_EVICT && strstr(n->text, "'a'")) about_a++;
    }
    CHECK_EQ_INT(about_a, 1);
    rsd_ensurer_destroy(e0);
    rsd_ensurer_destroy(e1);
    rsd_ensurer_destroy(e2);
    sim_stop(&s);
}

/* A corrupt attribution file: the ensure that finds it says so (one degraded/warning
   notice: the record was reset, kept as .corrupt) and the next ensure does not repeat it
   (the file was reset, not left corrupt to be "reset" again at every read). */
static void test_corrupt_attribution_said_once(void) {
    static const char *const args[] = {"--models-max", "1", "--load-ms", "50", "--model", "id=a", "--model", "id=b", NULL};
    sim_proc s;
    rsd_ensurer *e;
    rsd_ensure_result res;
    char key[RSD_TARGET_KEY_MAX], name[RSD_STATE_MAX_NAME_BYTES], path[600], aside[700];
    FILE *f;
    int i, resets = 0;
    REQUIRE(sim_start(&s, args) == 0);
    e = new_ensurer(true, NULL, 0);
    REQUIRE(e);
    CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
    router_key(&s, key, sizeof key);
    REQUIRE(rsd_state_file_name(key, name, sizeof name) > 0);
    snprintf(path, sizeof path, "%s/attr/%s.attr", g_state_dir, name);
    snprintf(aside, sizeof aside, "%s.corrupt", path);
    f = fopen(path, "wb");
    REQUIRE(f);
    fputs("residency-attr 1\na\t\t1\n", f); /* truncated */
    fclose(f);
    CHECK_EQ_INT(ensure(e, &s, "b", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    for (i = 0; i < res.n_notices; i++)
        if (res.notices[i].dmsg == RSD_DMSG_ATTR_RESET) {
            resets++;
            CHECK_EQ_INT(res.notices[i].notice.level, RSD_LEVEL_WARNING);
            CHECK(strstr(res.notices[i].text, "corrupt") && strstr(res.notices[i].text, "reset"));
        }
    CHECK_EQ_INT(resets, 1);
    CHECK(access(aside, F_OK) == 0);
    CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK); /* b is ours again */
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK(notice_of(&res, RSD_DMSG_ATTR_RESET) < 0);
    for (i = 0; i < res.n_notices; i++) CHECK(res.notices[i].notice.kind != RSD_NOTICE_SWAP);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* An attribution whose ids do not fit the ensurer's attr_arena_bytes: every ensure on it
   says so in one degraded/warning notice naming the limit, and the record is never
   rewritten shorter (a commit on it fails and leaves the file as it was). */
static void test_attribution_over_the_arena_said_and_kept(void) {
    static const char *const args[] = {"--models-max", "1", "--load-ms", "50", "--model", "id=a", "--model", "id=b", NULL};
    static char before[4096], after[4096];
    sim_proc s;
    rsd_ensurer *e, *small;
    rsd_ensurer_desc d;
    rsd_state *st = NULL;
    rsd_state_desc sd;
    rsd_ensure_result res;
    char key[RSD_TARGET_KEY_MAX], name[RSD_STATE_MAX_NAME_BYTES], path[600];
    const char *other = "a-model-another-process-loaded-with-a-long-id";
    FILE *f;
    size_t n0 = 0, n1 = 0;
    int k, i, over;
    REQUIRE(sim_start(&s, args) == 0);
    e = new_ensurer(true, NULL, 0);
    REQUIRE(e);
    CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
    router_key(&s, key, sizeof key);
    memset(&sd, 0, sizeof sd);
    sd.dir = g_state_dir;
    REQUIRE((st = rsd_state_create(&sd, NULL)) != NULL);
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, key, other, NULL, 1), RSD_OK); /* 2 + 46 bytes of ids */
    REQUIRE(rsd_state_file_name(key, name, sizeof name) > 0);
    snprintf(path, sizeof path, "%s/attr/%s.attr", g_state_dir, name);
    if ((f = fopen(path, "rb")) != NULL) {
        n0 = fread(before, 1, sizeof before, f);
        fclose(f);
    }
    REQUIRE(n0 > 0);
    memset(&d, 0, sizeof d);
    d.state_dir = g_state_dir;
    d.ignore_env = true;
    d.attr_arena_bytes = 32; /* under what the record needs */
    small = rsd_ensurer_create(&d);
    REQUIRE(small);
    for (k = 0; k < 2; k++) { /* a resident already, then b, which needs a's room */
        CHECK_EQ_INT(ensure(small, &s, k ? "b" : "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
        for (i = 0, over = 0; i < res.n_notices; i++) {
            const rsd_reconcile_notice *n = &res.notices[i];
            if (getenv("RSD_TEST_VERBOSE")) printf("  notice: %s %s\n", rsd_notice_kind_str(n->notice.kind), n->text);
            if (n->dmsg == RSD_DMSG_STATE_FAILED && strstr(n->text, "attr_arena_bytes (32)") &&
                strstr(n->text, "needs 48 bytes")) {
                over++;
                CHECK_EQ_INT(n->notice.kind, RSD_NOTICE_DEGRADED);
                CHECK_EQ_INT(n->notice.level, RSD_LEVEL_WARNING);
            }
        }
        CHECK_EQ_INT(over, 1);
    }
    if ((f = fopen(path, "rb")) != NULL) {
        n1 = fread(after, 1, sizeof after, f);
        fclose(f);
    }
    CHECK(n1 == n0 && memcmp(before, after, n0) == 0);
    CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK); /* the default arena: no notice */
    CHECK(notice_of(&res, RSD_DMSG_STATE_FAILED) < 0);
    rsd_state_destroy(st);
    rsd_ensurer_destroy(small);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* Records an older version wrote under its key for the URL ("llamacpp|<url>/v1": it kept
   the path) are found under the current key by the next ensure on that URL and moved
   there (the old files go); an older record is never moved over a current one. */
static void test_old_key_records_migrate(void) {
    static const char *const args[] = {"--models-max", "2", "--load-ms", "50", "--model", "id=a", "--model", "id=b", NULL};
    static rsd_attr_set set;
    sim_proc s;
    rsd_state *st = NULL;
    rsd_state_desc sd;
    rsd_ensurer *e;
    rsd_ensure_req q;
    rsd_ensure_result res;
    char key[RSD_TARGET_KEY_MAX], old[256], url[160];
    ATTR_SET_UP(set);
    REQUIRE(sim_start(&s, args) == 0);
    memset(&sd, 0, sizeof sd);
    sd.dir = g_state_dir;
    REQUIRE((st = rsd_state_create(&sd, NULL)) != NULL);
    snprintf(url, sizeof url, "%s/v1", s.url);
    snprintf(old, sizeof old, "llamacpp|%s/v1", s.url);
    router_key(&s, key, sizeof key);
    REQUIRE(strcmp(old, key) != 0);
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, old, "a", NULL, 1000), RSD_OK);
    CHECK_EQ_INT(rsd_state_used_touch_sync(st, old, "a", 1234), RSD_OK);
    e = new_ensurer(true, NULL, 0);
    REQUIRE(e);
    q = llama_req(url, "b", 20000);
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK(rsd_state_attr_load(st, key, &set) >= 0);
    CHECK(rsd_attr_set_find(&set, "a", NULL) >= 0); /* the older version's record, found */
    CHECK(rsd_attr_set_find(&set, "b", NULL) >= 0);
    CHECK_EQ_INT(rsd_state_attr_load(st, old, &set), 0); /* moved, not copied */
    CHECK(rsd_state_used_load(st, key, &set) > 0);
    CHECK(rsd_attr_set_find(&set, "a", NULL) >= 0 && set.items[rsd_attr_set_find(&set, "a", NULL)].loaded_at_ms == 1234);
    CHECK_EQ_INT(rsd_state_used_load(st, old, &set), 0);
    /* the current key has its own record now: an older one written later stays where it
       is (a new ensurer: no TTL hit, which would not look) */
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, old, "zz", NULL, 1), RSD_OK);
    rsd_ensurer_destroy(e);
    e = new_ensurer(true, NULL, 0);
    REQUIRE(e);
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    CHECK(!res.cache_hit);
    CHECK(rsd_state_attr_load(st, key, &set) >= 0);
    CHECK(rsd_attr_set_find(&set, "zz", NULL) < 0);
    CHECK(rsd_attr_set_find(&set, "a", NULL) >= 0);
    CHECK_EQ_INT(rsd_state_attr_load(st, old, &set), 1);
    rsd_ensurer_destroy(e);
    rsd_state_destroy(st);
    sim_stop(&s);
}

/* desc.kv_slots (issue 27 part 5) against rsd-sim's router with --slot-save-path: the
   slot a chat left on a is saved (GET /slots?model=a, POST /slots/0?action=save with
   "model":"a" in the body) before the unload that makes room for b, and restored after a
   comes back (its slots listed, each restore tried: slot 0's file restores 6 tokens, the
   others have none and stay cold). Without --slot-save-path the save answers 501: the
   ensure still swaps, with nothing saved. Without kv_slots no /slots request is sent. */
static int sim_chat(const sim_proc *s, const char *model) {
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_request q;
    rsd_http_event ev;
    char url[160], body[256];
    int status = -1;
    if (!c) return -1;
    snprintf(url, sizeof url, "%s/v1/chat/completions", s->url);
    snprintf(body, sizeof body, "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}", model);
    json_post(&q, url, body);
    if (rsd_http_request_sync(c, &q, &ev) == RSD_OK) status = ev.status;
    rsd_http_client_destroy(c);
    return status;
}

static void test_kv_slots_around_a_swap(void) {
    const char *args[] = {"--models-max", "1", "--load-ms", "20", "--model", "id=a", "--model", "id=b",
                          "--slot-save-path", g_state_dir, NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer_desc d = bare_desc();
    rsd_ensurer *e, *plain;
    char body[4096];
    int round, base, n, i, save_at = -1, unload_at = -1;
    for (round = 0; round < 2; round++) { /* 0: with --slot-save-path; 1: without (the save answers 501) */
        if (round == 1) args[8] = NULL;
        REQUIRE(sim_start(&s, args) == 0);
        d.kv_slots = true;
        e = rsd_ensurer_create(&d);
        REQUIRE(e != NULL);
        CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
        CHECK_EQ_INT(res.kv_restored, 0); /* no file yet: every slot stays cold */
        CHECK_EQ_INT(sim_chat(&s, "a"), 200);
        base = sim_log(&s);
        CHECK_EQ_INT(ensure(e, &s, "b", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
        CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
        CHECK(res.n_evicted == 1 && !strcmp(res.evicted[0].id, "a"));
        CHECK_EQ_INT(res.kv_saved, round == 0 ? 1 : 0);
        n = sim_log(&s);
        CHECK_EQ_INT(res.requests, n - base);
        for (i = base; i < n; i++) {
            if (!strcmp(g_log[i].path, "/slots/0") && !strcmp(g_log[i].model, "a")) save_at = i;
            if (!strcmp(g_log[i].path, "/models/unload")) unload_at = i;
        }
        CHECK_EQ_INT(log_count(base, n, "GET", "/slots", "a"), 1);
        CHECK_EQ_INT(log_count(base, n, "POST", "/slots/0", "a"), 1);
        CHECK_EQ_INT(log_count(base, n, "POST", "/slots/3", "b"), 1); /* b's restores tried after its load */
        CHECK(save_at > base && unload_at > save_at); /* saved while a still ran */
        CHECK_EQ_INT(g_log[save_at].status, round == 0 ? 200 : 501);
        base = n;
        CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
        CHECK_EQ_INT(res.kv_saved, 0); /* b held no prompt: nothing to save */
        CHECK_EQ_INT(res.kv_restored, round == 0 ? 1 : 0);
        n = sim_log(&s);
        CHECK_EQ_INT(log_count(base, n, "GET", "/slots", "b"), 1);
        CHECK_EQ_INT(log_count(base, n, "POST", "/slots/0", "b"), 0);
        CHECK_EQ_INT(log_count(base, n, "POST", "/slots/0", "a"), 1); /* the restore, after the load */
        CHECK_EQ_INT(log_count(base, n, "POST", "/slots/3", "a"), 1);
        CHECK_EQ_INT(sim_get(&s, "/slots?model=a", NULL, body, sizeof body), 200);
        CHECK((strstr(body, "\"n_prompt_tokens\":6") != NULL) == (round == 0)); /* slot 0 holds its prompt again */
        rsd_ensurer_destroy(e);
        d.kv_slots = false; /* the default: no /slots request at all */
        plain = rsd_ensurer_create(&d);
        REQUIRE(plain != NULL);
        base = sim_log(&s);
        CHECK_EQ_INT(ensure(plain, &s, "b", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
        n = sim_log(&s);
        CHECK_EQ_INT(log_count(base, n, "GET", "/slots", NULL) + log_count(base, n, "POST", "/slots/0", NULL), 0);
        CHECK_EQ_INT(res.kv_saved + res.kv_restored, 0);
        rsd_ensurer_destroy(plain);
        sim_stop(&s);
    }
}

/* desc.kv_slots, a restore that ends the child: a's saved file is cut inside its data
   (a save a full disk cut short), the restore aborts a's child (rsd-sim as the real
   router: 500 "proxy error", a unloaded), the ensurer lists a's slots again (a loads
   again), saves slot 0, empty now, over that file and restores the others; the ensure
   is RESIDENT. A later restore of that file reads 0 tokens. With the router's autoload
   off, the list again fails and so does the ensure (RSD_ERR_POOL_CRASHED): a is not
   loaded. */
static void test_kv_slots_restore_ends_child(void) {
    const char *args[] = {"--models-max", "1", "--load-ms", "20", "--model", "id=a", "--model", "id=b",
                          "--slot-save-path", g_state_dir, NULL, NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer_desc d = bare_desc();
    rsd_ensurer *e;
    char path[1024], buf[4096];
    size_t len;
    FILE *f;
    int base, n, i, aborted, round;
    for (round = 0; round < 2; round++) {
        if (round == 1) args[10] = "--no-models-autoload";
        REQUIRE(sim_start(&s, args) == 0);
        d.kv_slots = true;
        e = rsd_ensurer_create(&d);
        REQUIRE(e != NULL);
        CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
        CHECK_EQ_INT(sim_chat(&s, "a"), 200);
        CHECK_EQ_INT(ensure(e, &s, "b", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
        CHECK_EQ_INT(res.kv_saved, 1);
        REQUIRE(tp_find_in_dir(g_state_dir, "-0.bin", path, sizeof path) == 0);
        f = fopen(path, "rb");
        REQUIRE(f != NULL);
        len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        REQUIRE(len > 4 && memchr(buf, '\n', len) != NULL && (char *)memchr(buf, '\n', len) < buf + len - 2);
        f = fopen(path, "wb"); /* its first line whole, the rest cut short */
        REQUIRE(f != NULL);
        CHECK(fwrite(buf, 1, len - 2, f) == len - 2);
        fclose(f);
        base = sim_log(&s);
        if (round == 1) {
            CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_ERR_POOL_CRASHED);
            CHECK_EQ_INT(res.result, RSD_ERR_POOL_CRASHED);
            CHECK(strstr(res.message, "ended its child") != NULL);
            n = sim_log(&s);
            CHECK_EQ_INT(log_count(base, n, "GET", "/slots", "a"), 2);
            rsd_ensurer_destroy(e);
            sim_stop(&s);
            break;
        }
        CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
        CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
        CHECK_EQ_INT(res.kv_restored, 0);
        n = sim_log(&s);
        for (i = base, aborted = 0; i < n; i++)
            if (!strcmp(g_log[i].method, "POST") && !strcmp(g_log[i].path, "/slots/0") && g_log[i].status == 500) aborted++;
        CHECK_EQ_INT(aborted, 1);
        CHECK_EQ_INT(log_count(base, n, "GET", "/slots", "a"), 2);    /* listed again after the abort */
        CHECK_EQ_INT(log_count(base, n, "POST", "/slots/0", "a"), 2); /* its restore, then the empty save */
        CHECK_EQ_INT(log_count(base, n, "POST", "/slots/3", "a"), 1); /* the others after the new list */
        f = fopen(path, "rb");
        REQUIRE(f != NULL);
        len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        CHECK(len == 12 && !memcmp(buf, "rsim-kv 1 0\n", 12)); /* an empty save now */
        CHECK_EQ_INT(sim_get(&s, "/v1/models", NULL, buf, sizeof buf), 200);
        CHECK(strstr(buf, "\"id\":\"a\"") != NULL && strstr(strstr(buf, "\"id\":\"a\""), "\"value\":\"loaded\"") != NULL);
        /* b and back: a held no prompt (nothing saved); its file restores 0 tokens */
        CHECK_EQ_INT(ensure(e, &s, "b", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
        CHECK_EQ_INT(res.kv_saved, 0);
        base = sim_log(&s);
        CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
        n = sim_log(&s);
        CHECK_EQ_INT(log_count(base, n, "POST", "/slots/0", "a"), 1);
        CHECK_EQ_INT(res.kv_restored, 0);
        for (i = base, aborted = 0; i < n; i++)
            if (!strcmp(g_log[i].method, "POST") && !strcmp(g_log[i].path, "/slots/0") && g_log[i].status != 200) aborted++;
        CHECK_EQ_INT(aborted, 0);
        /* a new save of slot 0 replaces it: restored again */
        CHECK_EQ_INT(sim_chat(&s, "a"), 200);
        CHECK_EQ_INT(ensure(e, &s, "b", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
        CHECK_EQ_INT(res.kv_saved, 1);
        CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_LLAMACPP, false, &res), RSD_OK);
        CHECK_EQ_INT(res.kv_restored, 1);
        rsd_ensurer_destroy(e);
        sim_stop(&s);
        empty_state_dir();
    }
}

/* rsd-serve's lease answer as the ensurer reads it: a stopped id that is no usable model id
   (empty, or a \u0000 inside, which a C string would cut short) is skipped, as every
   payload parser skips one; the ids kept follow each other in the text. Found by
   fuzz/fuzz_lease.c (its corpus holds the input). */
static void test_lease_answer_skips_unusable_ids(void) {
    static const char body[] = "{\"id\":1,\"granted\":5,\"ready\":true,"
                               "\"stopped\":[\"a\",\"\",\"qwen\\u0000b\",7,\"c\"]}";
    rsd_json_tok toks[64];
    rsd_evicted ev[8];
    char text[64];
    rsdi_en_lease_ans a;
    memset(text, 0x5a, sizeof text);
    CHECK_EQ_INT(rsdi_en_lease_parse(body, sizeof body - 1, toks, 64, true, &a, ev, 8, text, sizeof text), RSD_OK);
    CHECK_EQ_INT((int)a.id, 1);
    CHECK(a.ready);
    CHECK_EQ_INT(a.n_stopped, 2);
    if (a.n_stopped != 2) return;
    CHECK_EQ_STR(ev[0].id, "a");
    CHECK_EQ_STR(ev[1].id, "c");
    CHECK(ev[0].id == text && ev[1].id == text + 2);
}

int main(int argc, char **argv) {
    int g;
    RSD_TEST_BEGIN(argc, argv);
    SIM_REQUIRE_BUILT();
    make_state_dir("ensure");
    rsdt_before_each = empty_state_dir; /* records are keyed by the sim's port, which comes round again */
    for (g = 0; g < 2; g++) { /* every router test against both router generations of rsd-sim */
        int before = rsdt_failed;
        g_router_gen = g_router_gens[g];
        RUN(test_bad_requests);
        RUN(test_l26_resident_then_ttl_hit);
        RUN(test_l27_free_slot_fast_poll);
        RUN(test_l28_full_router_swap);
        RUN(test_observe_never_mutates);
        RUN(test_declined_when_pinned);
        RUN(test_auto_detect_once);
        RUN(test_sse_wakes_the_wait);
        RUN(test_sse_event_over_half_the_slot_is_skipped);
        RUN(test_unreachable);
        RUN(test_load_failed_restores);
        RUN(test_lock_held_elsewhere);
#if !defined(_WIN32)
        RUN(test_multi_process);
#endif
        RUN(test_commit_lock_is_a_step);
#if !defined(_WIN32)
        RUN(test_state_write_failure_warns);
#endif
        RUN(test_concurrent_attribution_under_lock);
        RUN(test_corrupt_attribution_said_once);
        RUN(test_attribution_over_the_arena_said_and_kept);
        RUN(test_old_key_records_migrate);
        RUN(test_kv_slots_around_a_swap);
        RUN(test_kv_slots_restore_ends_child);
        if (rsdt_failed > before) printf("  (the failures above: --router-gen %s)\n", g_router_gen);
    }
    g_router_gen = NULL;
#if defined(_WIN32)
    printf("skip: test_sse_refused_falls_back_to_polling, test_multi_process, "
           "test_state_write_failure_warns: they fork() (a fake router, 4 ensuring "
           "processes, a child under RLIMIT_FSIZE); no fork on Windows\n");
#else
    RUN(test_sse_refused_falls_back_to_polling); /* its own fake router, not rsd-sim */
#endif
    RUN(test_ollama_auto_detect_and_load);
    RUN(test_context_ceiling_env);
    RUN(test_context_clamp_by_bytes);
    RUN(test_lease_answer_skips_unusable_ids);
    remove_state_dir();
    return RSD_TEST_END();
}
