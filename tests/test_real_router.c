/* test_real_router.c -- the ensurer against the REAL llama.cpp router (tests/real_server.h):
   load beside, swap, a pinned model that is never unloaded at any moment (watched on
   /models/sse through every mutation, not only the final state), a failed load
   (broken.gguf) with what was evicted restored, --models-max reached, four concurrent
   rsd-ensure processes sharing a state directory, every --protect tier, sleeping models,
   --context, the request count of a resident model, a probe that times out on a
   stopped server, and the least recently used victim of a full 3-slot router (the
   issue's bravo/charlie/busy alpha case). Skipped with one line when no llama-server
   is found. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include "rsd_test.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include "real_server.h"
#include "ensure_code.h"

enum { NM = 6, WAIT_MS = 20000 };
static const char *const NAMES[NM] = {"tiny-a", "tiny-b", "tiny-c", "tiny-d", "tiny-e", "broken"};
static char BIN[1024], DIR_[512], STATE[700];

/* ---- a /models/sse watcher: what the router itself says happened ---------------- */
typedef struct watch {
    rsd_http_client *c;
    rsd_http_req_h h;
    char url[128];
    bool live[NM];          /* loading, loaded or sleeping, per the events */
    int unloads[NM];        /* status_change "unloaded" events */
    int loads[NM];          /* status_change "loaded" events */
    int n_live, max_live;   /* models live at once (the most seen) */
    int events;
    bool ended;
} watch;
static watch W;

static int name_index(const char *s, size_t n) {
    int i;
    for (i = 0; i < NM; i++)
        if (strlen(NAMES[i]) == n && memcmp(NAMES[i], s, n) == 0) return i;
    return -1;
}

static void on_event(void *user, const rsd_sse_event *ev) {
    watch *w = (watch *)user;
    rsd_json_tok toks[256];
    rsd_json_doc doc;
    rsd_str m, e, st;
    int i;
    bool live;
    if (rsd_json_parse(&doc, ev->data.ptr, ev->data.len, toks, 256) < 0) return;
    m = rsd_json_view(&doc, rsd_json_find(&doc, 0, "model"));
    e = rsd_json_view(&doc, rsd_json_find(&doc, 0, "event"));
    st = rsd_json_view(&doc, rsd_json_find(&doc, rsd_json_find(&doc, 0, "data"), "status"));
    if ((i = name_index(m.ptr, m.len)) < 0 || !rsd_str_eq_c(e, "status_change")) return;
    w->events++;
    if (rsd_str_eq_c(st, "unloaded")) w->unloads[i]++;
    if (rsd_str_eq_c(st, "loaded")) w->loads[i]++;
    live = rsd_str_eq_c(st, "loading") || rsd_str_eq_c(st, "loaded") || rsd_str_eq_c(st, "sleeping");
    if (live != w->live[i]) {
        w->live[i] = live;
        w->n_live += live ? 1 : -1;
        if (w->n_live > w->max_live) w->max_live = w->n_live;
    }
}

static void watch_pump(watch *w) {
    rsd_http_event ev;
    (void)rsd_http_client_step(w->c, rsd_now_ms());
    while (rsd_http_next_event(w->c, &ev))
        if (ev.req.id == w->h.id) w->ended = true;
}

/* Opens the stream and waits for its head (so no event of what follows is missed). */
static int watch_start(watch *w, const char *base) {
    rsd_http_request q;
    rsd_http_header hd;
    uint64_t until = rsd_now_ms() + WAIT_MS;
    memset(w, 0, sizeof *w);
    w->c = rsd_http_client_create(NULL);
    if (!w->c) return -1;
    snprintf(w->url, sizeof w->url, "%s/models/sse", base);
    memset(&q, 0, sizeof q);
    hd.name = rsd_str_c("Accept");
    hd.value = rsd_str_c("text/event-stream");
    q.url = w->url;
    q.headers = &hd;
    q.num_headers = 1;
    q.total_timeout_ms = RSD_TIMEOUT_NONE;
    q.on_sse = on_event;
    q.user = w;
    if (rsd_http_send(w->c, &q, rsd_now_ms(), &w->h) < 0) return -1;
    /* the router sends nothing until something changes: the head arriving is enough,
       and a GET of the listing answered after it proves the stream is set up */
    while (rsd_now_ms() < until) {
        rsd_http_event resp;
        watch_pump(w);
        if (w->ended) return -1;
        {
            rsd_http_client *c2 = rsd_http_client_create(NULL);
            rsd_http_request g;
            char u[128];
            int r;
            memset(&g, 0, sizeof g);
            snprintf(u, sizeof u, "%s/v1/models", base);
            g.url = u;
            r = c2 ? rsd_http_request_sync(c2, &g, &resp) : -1;
            rsd_http_client_destroy(c2);
            watch_pump(w);
            if (r == RSD_OK) return 0;
        }
    }
    return -1;
}

static void watch_stop(watch *w) {
    rsd_http_client_destroy(w->c);
    w->c = NULL;
}

/* Pumps the watcher until cond(i, n) holds for model i, bounded; 0 or -1. */
static int watch_until_loads(watch *w, int i, int n) {
    uint64_t until = rsd_now_ms() + WAIT_MS;
    while (w->loads[i] < n && rsd_now_ms() < until) {
        rsd_pollfd fds[4];
        int k = rsd_http_client_pollfds(w->c, fds, 4);
        (void)poll((struct pollfd *)(void *)fds, (nfds_t)(k > 4 ? 4 : k), 20);
        watch_pump(w);
    }
    return w->loads[i] >= n ? 0 : -1;
}

/* ---- ensures, run while the watcher keeps reading ----------------------------------- */
static rsd_ensurer *new_ensurer(bool state) {
    rsd_ensurer_desc d;
    memset(&d, 0, sizeof d);
    d.no_state = !state;
    d.state_dir = state ? STATE : NULL;
    d.no_cache = true;
    d.ignore_env = true;
    return rsd_ensurer_create(&d);
}

static int run_ensure(rsd_ensurer *e, const rsd_ensure_req *q, rsd_ensure_result *res) {
    int rc = rsd_ensurer_begin(e, q, rsd_now_ms());
    while (rc >= 0 && (rc = ensure_step_code(e, rsd_now_ms())) == RSD_PENDING) {
        rsd_pollfd fds[40];
        int n = rsd_ensurer_pollfds(e, fds, 32), m, to;
        uint64_t dl = rsd_ensurer_next_deadline(e), now = rsd_now_ms();
        to = dl == RSD_NO_DEADLINE ? 20 : dl <= now ? 0 : dl - now > 20 ? 20 : (int)(dl - now);
        if (n > 32) n = 32;
        m = rsd_http_client_pollfds(W.c, fds + n, 8);
        if (m > 8) m = 8;
        if (to) (void)poll((struct pollfd *)(void *)fds, (nfds_t)(n + m), to);
        watch_pump(&W);
    }
    rsd_ensurer_query(e, res);
    watch_pump(&W);
    return rc;
}

static void req_init(rsd_ensure_req *q, const char *url, const char *model) {
    memset(q, 0, sizeof *q);
    q->url = url;
    q->model = model;
    q->runtime = RSD_RUNTIME_LLAMACPP;
    q->timeout_ms = 60000;
}

static int count_dmsg(const rsd_ensure_result *res, rsd_driver_msg dmsg) {
    int i, c = 0;
    for (i = 0; i < res->n_notices; i++) c += res->notices[i].dmsg == dmsg;
    return c;
}

static int n_displaced(const rsd_ensure_result *res) {
    int i, c = 0;
    for (i = 0; i < res->n_evicted; i++) c += res->evicted[i].displaced;
    return c;
}

/* The model's state in the router's listing now (RSD_MODEL_UNKNOWN when unreadable). */
static rsd_json_tok LTOKS[RSD_LISTING_MAX_TOKENS];
static rsd_listing LST;
static rsd_listed_model LST_models[RSD_LISTING_MAX_MODELS];
static char LST_arena[RSD_LISTING_ARENA_BYTES];
static rsd_model_state listed(const char *base, const char *model) {
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_request g;
    rsd_http_event resp;
    char u[128];
    int k = -1;
    rsd_model_state st = RSD_MODEL_UNKNOWN;
    memset(&g, 0, sizeof g);
    snprintf(u, sizeof u, "%s/v1/models", base);
    g.url = u;
    if (c && rsd_listing_init(&LST, LST_models, RSD_LISTING_MAX_MODELS, LST_arena, sizeof LST_arena) == RSD_OK &&
        rsd_http_request_sync(c, &g, &resp) == RSD_OK && resp.status == 200 &&
        rsd_router_parse_models(resp.body.ptr, resp.body.len, LTOKS, RSD_LISTING_MAX_TOKENS, &LST) == RSD_OK &&
        (k = rsd_listing_find(&LST, rsd_str_c(model))) >= 0)
        st = LST.models[k].state;
    rsd_http_client_destroy(c);
    return st;
}

static int write_presets(const char *path, bool pin_a, const char *const *models, int n) {
    FILE *f = fopen(path, "w");
    int i;
    if (!f) return -1;
    for (i = 0; i < n; i++) {
        fprintf(f, "[%s]\nmodel = %s/%s.gguf\nctx-size = 256\n", models[i], DIR_, models[i]);
        if (pin_a && strcmp(models[i], "tiny-a") == 0) fprintf(f, "tags = pinned:true\n");
        fprintf(f, "\n");
    }
    return fclose(f) == 0 ? 0 : -1;
}

static real_server S;

static int start_router(const char *ini_name, bool pin_a, const char *const *models, int n, const char *max,
                        const char *sleep_s) {
    char ini[700];
    const char *args[10];
    int k = 0;
    snprintf(ini, sizeof ini, "%s/%s", DIR_, ini_name);
    if (write_presets(ini, pin_a, models, n) != 0) return -1;
    args[k++] = "--models-preset";
    args[k++] = ini;
    args[k++] = "--models-max";
    args[k++] = max;
    if (sleep_s) {
        args[k++] = "--sleep-idle-seconds";
        args[k++] = sleep_s;
    }
    args[k] = NULL;
    if (real_start(&S, BIN, DIR_, args, 60000) != 0) return -1;
    if (watch_start(&W, S.url) != 0) {
        real_stop(&S);
        return -1;
    }
    return 0;
}

static void stop_router(void) {
    watch_stop(&W);
    real_stop(&S);
}

/* ==== router A: tiny-a pinned by tag, --models-max 2 =============================== */
static void test_load_beside_then_swap_never_unloads_the_pinned_model(void) {
    rsd_ensurer *e = new_ensurer(true);
    rsd_ensure_req q;
    rsd_ensure_result res;
    REQUIRE(e);
    req_init(&q, S.url, "tiny-a");
    CHECK_EQ_INT(run_ensure(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.decision, RSD_DECISION_LOAD);
    req_init(&q, S.url, "tiny-b");
    CHECK_EQ_INT(run_ensure(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.decision, RSD_DECISION_LOAD); /* beside tiny-a */
    CHECK_EQ_INT(res.n_evicted, 0);
    req_init(&q, S.url, "tiny-c");
    CHECK_EQ_INT(run_ensure(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.decision, RSD_DECISION_LOAD_AFTER_EVICT);
    CHECK_EQ_INT(res.n_evicted, 1);
    CHECK_EQ_STR(res.n_evicted >= 1 ? res.evicted[0].id : "", "tiny-b");
    CHECK_EQ_INT(n_displaced(&res), 0);
    CHECK_EQ_INT(watch_until_loads(&W, 2, 1), 0);  /* the router's own account, in order */
    CHECK_EQ_INT(W.unloads[0], 0);                 /* tiny-a: not for a moment */
    CHECK(W.max_live <= 2);
    CHECK_EQ_INT(listed(S.url, "tiny-a"), RSD_MODEL_LOADED);
    /* unloaded; failed:true too when its stop outlived the router's stop timeout (wire.md 6.2) */
    CHECK(!rsd_model_state_resident(listed(S.url, "tiny-b")));
    CHECK_EQ_INT(listed(S.url, "tiny-c"), RSD_MODEL_LOADED);
    rsd_ensurer_destroy(e);
}

/* Auto-detection's GET /props is also the capacity answer: 2 requests, as clio. */
static void test_resident_model_costs_two_requests(void) {
    rsd_ensurer *e = new_ensurer(false);
    rsd_ensure_req q;
    rsd_ensure_result res;
    REQUIRE(e);
    req_init(&q, S.url, "tiny-a");
    q.runtime = RSD_RUNTIME_AUTO;
    q.probe_timeout_ms = 30000; /* a busy machine's retried probe would be one more request */
    CHECK_EQ_INT(run_ensure(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.runtime, RSD_RUNTIME_LLAMACPP);
    CHECK_EQ_INT(res.decision, RSD_DECISION_ALREADY_RESIDENT);
    CHECK_EQ_INT(res.requests, 2);
    rsd_ensurer_destroy(e);
}

/* The preset says ctx-size 256; asking for 4096 is answered with a notice. */
static void test_context_larger_than_the_model_runs_with(void) {
    rsd_ensurer *e = new_ensurer(false);
    rsd_ensure_req q;
    rsd_ensure_result res;
    int i;
    REQUIRE(e);
    req_init(&q, S.url, "tiny-a");
    q.context_length = 4096;
    q.context_ceiling = RSD_FIT_CEILING_OFF;
    CHECK_EQ_INT(run_ensure(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(count_dmsg(&res, RSD_DMSG_CONTEXT), 1);
    for (i = 0; i < res.n_notices; i++)
        if (res.notices[i].dmsg == RSD_DMSG_CONTEXT)
            CHECK(strstr(res.notices[i].text, "runs with a context of 256 tokens, less than the 4096") != NULL);
    q.context_length = 256;
    CHECK_EQ_INT(run_ensure(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(count_dmsg(&res, RSD_DMSG_CONTEXT), 0);
    rsd_ensurer_destroy(e);
}

/* broken.gguf fails to load: what we evicted comes back, the pinned model never left. */
static void test_failed_load_restores_and_keeps_the_pin(void) {
    rsd_ensurer *e = new_ensurer(true);
    rsd_ensure_req q;
    rsd_ensure_result res;
    int c0 = W.loads[2];
    REQUIRE(e);
    req_init(&q, S.url, "broken");
    CHECK_EQ_INT(run_ensure(e, &q, &res), RSD_ERR_LOAD_FAILED);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_LOAD_FAILED);
    CHECK_EQ_INT(res.n_evicted, 1);
    CHECK_EQ_STR(res.n_evicted >= 1 ? res.evicted[0].id : "", "tiny-c");
    CHECK(res.n_evicted >= 1 && res.evicted[0].restored && !res.evicted[0].displaced);
    CHECK(strstr(res.message, "failed to load") != NULL);
    CHECK_EQ_INT(watch_until_loads(&W, 2, c0 + 1), 0); /* tiny-c loaded again */
    CHECK_EQ_INT(W.unloads[0], 0);
    CHECK(W.max_live <= 2);
    CHECK_EQ_INT(listed(S.url, "tiny-a"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(listed(S.url, "tiny-c"), RSD_MODEL_LOADED);
    /* failed:true of broken is now listed; loading it again still fails (not a stale read) */
    CHECK_EQ_INT(listed(S.url, "broken"), RSD_MODEL_FAILED);
    CHECK_EQ_INT(run_ensure(e, &q, &res), RSD_ERR_LOAD_FAILED);
    CHECK(res.n_evicted == 1 && res.evicted[0].restored);
    CHECK_EQ_INT(W.unloads[0], 0);
    rsd_ensurer_destroy(e);
}

/* Four rsd-ensure processes at once on one router, one state directory (the lock
   serialises their mutations): each ends resident, the pin is never touched, and the
   router never runs more than --models-max models. */
static void test_four_concurrent_processes(void) {
    static const char *const models[4] = {"tiny-b", "tiny-c", "tiny-d", "tiny-e"};
    pid_t pids[4];
    int status[4], i, left = 4;
    uint64_t until = rsd_now_ms() + 120000;
    char out[4][700];
    for (i = 0; i < 4; i++) {
        snprintf(out[i], sizeof out[i], "%s/ensure-%d.json", DIR_, i);
        fflush(stdout);
        pids[i] = fork();
        if (pids[i] == 0) {
            int fd = open(out[i], O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); close(fd); }
            execl("build/bin/rsd-ensure", "rsd-ensure", "--url", S.url, "--model", models[i], "--state-dir",
                  STATE, "--timeout-ms", "100000", "--json", (char *)NULL);
            _exit(127);
        }
        REQUIRE(pids[i] > 0);
        status[i] = -1;
    }
    while (left > 0 && rsd_now_ms() < until) {
        rsd_pollfd fds[4];
        int k = rsd_http_client_pollfds(W.c, fds, 4);
        (void)poll((struct pollfd *)(void *)fds, (nfds_t)(k > 4 ? 4 : k), 20);
        watch_pump(&W);
        for (i = 0; i < 4; i++) {
            int st;
            if (status[i] != -1) continue;
            if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
                status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
                left--;
            }
        }
    }
    for (i = 0; i < 4; i++) {
        FILE *f = fopen(out[i], "r");
        char buf[8192];
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f) fclose(f);
        buf[n] = '\0';
        if (status[i] == -1) kill(pids[i], SIGKILL), waitpid(pids[i], NULL, 0);
        CHECK_EQ_INT(status[i], 0);
        CHECK(strstr(buf, "\"outcome\":\"resident\"") != NULL);
        CHECK(strstr(buf, "\"displaced\":[]") != NULL);
        if (status[i] != 0) printf("  %s: %s\n", models[i], buf);
    }
    CHECK_EQ_INT(W.unloads[0], 0);
    CHECK(W.max_live <= 2);
    CHECK_EQ_INT(listed(S.url, "tiny-a"), RSD_MODEL_LOADED);
}

/* A server stopped for a while (SIGSTOP; a loaded machine looks the same): the probe
   that times out is sent again within the overall deadline instead of giving up. */
static void test_probe_timeout_retried_on_a_stopped_server(void) {
    rsd_ensurer *e = new_ensurer(false);
    rsd_ensure_req q;
    rsd_ensure_result res;
    uint64_t until = rsd_now_ms() + WAIT_MS;
    int rc;
    REQUIRE(e);
    req_init(&q, S.url, "tiny-a");
    q.runtime = RSD_RUNTIME_AUTO;
    q.probe_timeout_ms = 200;
    if (kill(S.pid, SIGSTOP) != 0) {
        CHECK(0);
        rsd_ensurer_destroy(e);
        return;
    }
    rc = rsd_ensurer_begin(e, &q, rsd_now_ms());
    for (;;) { /* until the first probe timed out and went out again */
        rsd_ensurer_query(e, &res);
        if (rc != RSD_OK || res.done || res.requests >= 2 || rsd_now_ms() >= until) break;
        rc = ensure_step_code(e, rsd_now_ms());
        if (rc != RSD_PENDING) break;
        rc = RSD_OK;
        (void)poll(NULL, 0, 10);
    }
    kill(S.pid, SIGCONT);
    CHECK(!res.done);
    CHECK(res.requests >= 2);
    while ((rc = ensure_step_code(e, rsd_now_ms())) == RSD_PENDING && rsd_now_ms() < until + WAIT_MS) (void)poll(NULL, 0, 5);
    rsd_ensurer_query(e, &res);
    CHECK_EQ_INT(rc, RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.runtime, RSD_RUNTIME_LLAMACPP);
    rsd_ensurer_destroy(e);
}

/* ==== router B: no tags, --models-max 2, --sleep-idle-seconds 1 ==================== */
/* --protect with each role: the protected model stays through every swap. */
static void test_every_protect_tier_survives_swaps(void) {
    static const rsd_role roles[4] = {RSD_ROLE_CHAT, RSD_ROLE_MEMORY, RSD_ROLE_WORKER, RSD_ROLE_TARGET_DEFAULT};
    rsd_ensurer *e = new_ensurer(true);
    rsd_ensure_req q;
    rsd_ensure_result res;
    int i;
    REQUIRE(e);
    req_init(&q, S.url, "tiny-a");
    CHECK_EQ_INT(run_ensure(e, &q, &res), RSD_OK);
    req_init(&q, S.url, "tiny-b");
    CHECK_EQ_INT(run_ensure(e, &q, &res), RSD_OK);
    rsd_ensurer_destroy(e);
    for (i = 0; i < 4; i++) {
        rsd_ensurer_desc d;
        rsd_protected_model p;
        const char *want = i % 2 == 0 ? "tiny-c" : "tiny-b";
        int idx = i % 2 == 0 ? 2 : 1, l0 = W.loads[idx];
        memset(&d, 0, sizeof d);
        d.state_dir = STATE;
        d.no_cache = true;
        d.ignore_env = true;
        p.model_id = rsd_str_c("tiny-a");
        p.role = roles[i];
        d.protected_models = &p;
        d.n_protected = 1;
        e = rsd_ensurer_create(&d);
        REQUIRE(e);
        req_init(&q, S.url, want);
        CHECK_EQ_INT(run_ensure(e, &q, &res), RSD_OK);
        CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
        CHECK_EQ_INT(res.n_evicted, 1);
        CHECK(res.n_evicted == 1 && strcmp(res.evicted[0].id, "tiny-a") != 0);
        CHECK_EQ_INT(n_displaced(&res), 0);
        CHECK_EQ_INT(watch_until_loads(&W, idx, l0 + 1), 0);
        CHECK_EQ_INT(W.unloads[0], 0);
        if (W.unloads[0]) printf("  role %s: tiny-a unloaded\n", rsd_role_str(roles[i]));
        rsd_ensurer_destroy(e);
    }
    CHECK(W.max_live <= 2);
    CHECK(rsd_model_state_resident(listed(S.url, "tiny-a")));
}

/* A sleeping model is resident: ensuring it loads nothing; a swap beside it keeps it. */
static void test_sleeping_model(void) {
    rsd_ensurer *e;
    rsd_ensure_req q;
    rsd_ensure_result res;
    uint64_t until = rsd_now_ms() + WAIT_MS;
    const char *other;
    int idx, l0;
    while (listed(S.url, "tiny-a") != RSD_MODEL_SLEEPING && rsd_now_ms() < until) {
        rsd_pollfd fds[4];
        int k = rsd_http_client_pollfds(W.c, fds, 4);
        (void)poll((struct pollfd *)(void *)fds, (nfds_t)(k > 4 ? 4 : k), 100);
        watch_pump(&W);
    }
    REQUIRE(listed(S.url, "tiny-a") == RSD_MODEL_SLEEPING);
    e = new_ensurer(true);
    REQUIRE(e);
    req_init(&q, S.url, "tiny-a");
    q.runtime = RSD_RUNTIME_AUTO;
    q.probe_timeout_ms = 30000; /* a busy machine's retried probe would be one more request */
    CHECK_EQ_INT(run_ensure(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.decision, RSD_DECISION_ALREADY_RESIDENT);
    CHECK(!res.loaded && !res.mutated);
    CHECK_EQ_INT(res.requests, 2);
    other = !rsd_model_state_resident(listed(S.url, "tiny-b")) ? "tiny-b" : "tiny-c";
    idx = other[5] == 'b' ? 1 : 2;
    l0 = W.loads[idx];
    req_init(&q, S.url, other);
    {
        rsd_ensurer_desc d;
        rsd_protected_model p;
        memset(&d, 0, sizeof d);
        d.state_dir = STATE;
        d.no_cache = true;
        d.ignore_env = true;
        p.model_id = rsd_str_c("tiny-a");
        p.role = RSD_ROLE_CHAT;
        d.protected_models = &p;
        d.n_protected = 1;
        rsd_ensurer_destroy(e);
        e = rsd_ensurer_create(&d);
        REQUIRE(e);
    }
    CHECK_EQ_INT(run_ensure(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(n_displaced(&res), 0);
    CHECK_EQ_INT(watch_until_loads(&W, idx, l0 + 1), 0);
    CHECK_EQ_INT(W.unloads[0], 0);
    CHECK(rsd_model_state_resident(listed(S.url, "tiny-a")));
    rsd_ensurer_destroy(e);
}

/* ==== router C: tiny-a pinned, --models-max 1 ======================================= */
static void test_models_max_reached_by_the_pin_declines(void) {
    rsd_ensurer *e = new_ensurer(true);
    rsd_ensure_req q;
    rsd_ensure_result res;
    REQUIRE(e);
    req_init(&q, S.url, "tiny-a");
    CHECK_EQ_INT(run_ensure(e, &q, &res), RSD_OK);
    req_init(&q, S.url, "tiny-b");
    CHECK_EQ_INT(run_ensure(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_DECLINED);
    CHECK(!res.mutated);
    CHECK_EQ_INT(res.n_evicted, 0);
    CHECK_EQ_INT(W.unloads[0], 0);
    CHECK_EQ_INT(listed(S.url, "tiny-a"), RSD_MODEL_LOADED);
    CHECK(!rsd_model_state_resident(listed(S.url, "tiny-b")));
    rsd_ensurer_destroy(e);
}

static bool UP;
/* Runs prog with args (NULL-terminated; rsd-ensure gets --state-dir STATE, and every
   program RESIDENCY_STATE_DIR=STATE), pumping the watcher meanwhile; its output (stdout
   and stderr) into out. The exit status, or -1. */
static int run_prog_in_state(const char *prog, const char *const *args, char *out, size_t cap) {
    const char *argv[24];
    char path[760];
    int n = 0, i, st = -1, got;
    uint64_t until = rsd_now_ms() + 120000;
    pid_t pid;
    FILE *f;
    size_t len;
    argv[n++] = prog;
    for (i = 0; args[i] && n < 20; i++) argv[n++] = args[i];
    if (strstr(prog, "rsd-ensure")) {
        argv[n++] = "--state-dir";
        argv[n++] = STATE;
    }
    argv[n] = NULL;
    snprintf(path, sizeof path, "%s/cli.out", DIR_);
    fflush(stdout);
    pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); close(fd); }
        setenv("RESIDENCY_STATE_DIR", STATE, 1);
        execv(argv[0], (char *const *)(void *)argv);
        _exit(127);
    }
    for (got = 0; !got && rsd_now_ms() < until;) {
        rsd_pollfd fds[4];
        int k = rsd_http_client_pollfds(W.c, fds, 4), ws;
        (void)poll((struct pollfd *)(void *)fds, (nfds_t)(k > 4 ? 4 : k), 20);
        watch_pump(&W);
        if (waitpid(pid, &ws, WNOHANG) == pid) {
            got = 1;
            st = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
        }
    }
    if (!got) kill(pid, SIGKILL), waitpid(pid, NULL, 0);
    f = fopen(path, "r");
    len = f ? fread(out, 1, cap - 1, f) : 0;
    if (f) fclose(f);
    out[len] = '\0';
    return st;
}

static int run_cli(const char *const *args, char *out, size_t cap) {
    return run_prog_in_state("build/bin/rsd-ensure", args, out, cap);
}

/* ==== router D: no tags, --models-max 3 ============================================ */
/* The case on the real router: it holds bravo (tiny-b), charlie (tiny-c) and a
   busy, newest alpha (tiny-a), each ensured by its own rsd-ensure; `rsd-ensure --model
   tiny-d` evicts the least recently used, tiny-b, never tiny-a (by id it was tiny-a).
   The real router lists no last use (status has none), so the figure is the state
   directory's. */
static void test_lru_victim(void) {
    static const char *const order[] = {"tiny-b", "tiny-c", "tiny-a"};
    static char out[16384];
    char url[160];
    pid_t busy;
    int k;
    for (k = 0; k < 3; k++) {
        const char *a[] = {"--url", S.url, "--model", order[k], NULL};
        CHECK_EQ_INT(run_cli(a, out, sizeof out), 0);
    }
    snprintf(url, sizeof url, "%s/v1/chat/completions", S.url);
    fflush(stdout);
    busy = fork(); /* tiny-a busy: a completion in flight while delta is ensured */
    if (busy == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); }
        execl("build/bin/rsd-http", "rsd-http", "-s", "-d",
              "{\"model\":\"tiny-a\",\"max_tokens\":200,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
              url, (char *)NULL);
        _exit(127);
    }
    {
        const char *a[] = {"--url", S.url, "--model", "tiny-d", "--json", NULL};
        CHECK_EQ_INT(run_cli(a, out, sizeof out), 0);
        CHECK(strstr(out, "\"reason\":\"EVICT_LRU\"") != NULL);
        CHECK(strstr(out, "\"evicted\":[\"tiny-b\"]") != NULL);
        CHECK(strstr(out, "evicting residency-loaded model 'tiny-b' (least recently used)") != NULL);
        if (rsdt_cur_failed) printf("  rsd-ensure: %s\n", out);
    }
    if (busy > 0) waitpid(busy, NULL, 0);
    CHECK_EQ_INT(W.unloads[0], 0); /* tiny-a never went, not even for a moment */
    CHECK_EQ_INT(W.unloads[1], 1);
    CHECK_EQ_INT(listed(S.url, "tiny-a"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(listed(S.url, "tiny-c"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(listed(S.url, "tiny-d"), RSD_MODEL_LOADED);
    CHECK(W.max_live <= 3);
}

/* Freeing bytes on the real router, which lists meta.size (238592 bytes per tiny model)
   for loaded models only: with tiny-a, tiny-c and tiny-d resident and used in that
   order, 300000 bytes take tiny-c and tiny-d (least recently used first), never the
   protected tiny-a; --release loads both back. */
static void test_free_bytes_and_release(void) {
    static char out[16384];
    char id[64];
    const char *p;
    size_t n = 0;
    int before_c, before_d, k;
    for (k = 0; k < 3; k++) { /* on their own too (a filtered run): tiny-a, then tiny-c, then tiny-d */
        static const char *const order[] = {"tiny-a", "tiny-c", "tiny-d"};
        const char *a[] = {"--url", S.url, "--model", order[k], NULL};
        CHECK_EQ_INT(run_cli(a, out, sizeof out), 0);
    }
    before_c = W.loads[2];
    before_d = W.loads[3];
    {
        const char *a[] = {"--url", S.url, "--free-bytes", "300000", "--protect", "tiny-a", "--json", NULL};
        CHECK_EQ_INT(run_cli(a, out, sizeof out), 0);
        CHECK(strstr(out, "\"outcome\":\"freed\"") != NULL);
        CHECK(strstr(out, "\"evicted\":[\"tiny-c\",\"tiny-d\"]") != NULL);
        CHECK(strstr(out, "\"freed_bytes\":477184") != NULL);
        if (rsdt_cur_failed) printf("  rsd-ensure: %s\n", out);
    }
    p = strstr(out, "\"lease_id\":\"");
    REQUIRE(p != NULL);
    p += 12;
    while (p[n] && p[n] != '"' && n + 1 < sizeof id) n++;
    memcpy(id, p, n);
    id[n] = '\0';
    CHECK_EQ_INT(listed(S.url, "tiny-c"), RSD_MODEL_UNLOADED);
    CHECK_EQ_INT(listed(S.url, "tiny-d"), RSD_MODEL_UNLOADED);
    CHECK_EQ_INT(listed(S.url, "tiny-a"), RSD_MODEL_LOADED);
    {
        const char *a[] = {"--release", id, NULL};
        CHECK_EQ_INT(run_cli(a, out, sizeof out), 0);
        CHECK(strstr(out, "2 model(s) resident again") != NULL);
        if (rsdt_cur_failed) printf("  rsd-ensure: %s\n", out);
    }
    CHECK_EQ_INT(listed(S.url, "tiny-c"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(listed(S.url, "tiny-d"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(W.loads[2], before_c + 1);
    CHECK_EQ_INT(W.loads[3], before_d + 1);
    CHECK_EQ_INT(W.unloads[0], 0);
}

/* examples/game_loop.c on the real router (same state directory, so tiny-c and tiny-d
   are residency's): the ensure of tiny-a (resident already, now the most recently used), then the cutscene's free
   request of 300000 bytes, a frame at a time -- the router has no /_rsd/lease (404), so
   the free plan unloads tiny-c and tiny-d, the least recently used (tiny-a was just
   used) -- and the step-driven release loads both back. */
static void test_game_loop_real(void) {
    static char out[16384];
    const char *a[] = {S.url, "tiny-a", "300000", NULL};
    int before_c, before_d, before_a, k;
    for (k = 0; k < 3; k++) { /* on their own too (a filtered run): residency's, used in this order */
        static const char *const order[] = {"tiny-a", "tiny-c", "tiny-d"};
        const char *c[] = {"--url", S.url, "--model", order[k], NULL};
        CHECK_EQ_INT(run_cli(c, out, sizeof out), 0);
    }
    before_c = W.loads[2];
    before_d = W.loads[3];
    before_a = W.unloads[0];
    CHECK_EQ_INT(listed(S.url, "tiny-c"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(listed(S.url, "tiny-d"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(run_prog_in_state("build/examples/game_loop", a, out, sizeof out), 0);
    CHECK(strstr(out, "resident: tiny-a") != NULL);
    CHECK(strstr(out, "freed 477184 of 300000 bytes; stopped: tiny-c tiny-d\n") != NULL);
    CHECK(strstr(out, "cutscene plays") != NULL && strstr(out, "released: 2 model(s) back") != NULL);
    CHECK_EQ_INT(listed(S.url, "tiny-c"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(listed(S.url, "tiny-d"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(listed(S.url, "tiny-a"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(W.loads[2], before_c + 1);
    CHECK_EQ_INT(W.loads[3], before_d + 1);
    CHECK_EQ_INT(W.unloads[0], before_a); /* tiny-a, the game's model, never went */
    if (rsdt_cur_failed) printf("  game_loop: %s\n", out);
}

/* ==== router E: 64 presets with long ids and long argument lists ===================== */
#define LONG_ID "unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF-UD-Q4_K_XL-long-model-name-"
static int write_long_presets(const char *path) {
    FILE *f = fopen(path, "w");
    int i;
    if (!f) return -1;
    for (i = 0; i < 64; i++)
        fprintf(f, "[" LONG_ID "%03d]\nmodel = %s/%s.gguf\nctx-size = 256\nbatch-size = 64\nubatch-size = 64\n"
                   "threads = 1\ntemp = 0.7\ntop-k = 40\ntop-p = 0.95\nmin-p = 0.05\nrepeat-penalty = 1.1\n"
                   "tags = pinned:false,team:research-long-tag-name\n\n", i, DIR_, NAMES[i % 5]);
    return fclose(f) == 0 ? 0 : -1;
}

/* The whole listing (about 71 KB: 64 entries of 1.1-1.3 KB) is read through an answers'
   buffer of 8 KiB, the default: detection, the listing, the load and the wait. */
static void test_64_long_presets_through_the_default_buffer(void) {
    rsd_ensurer_desc d;
    rsd_ensurer *e;
    rsd_ensure_req q;
    rsd_ensure_result res;
    memset(&d, 0, sizeof d);
    d.no_state = true;
    d.no_cache = true;
    d.ignore_env = true;
    d.limits.max_body_bytes = 8192; /* the default, spelled out */
    REQUIRE((e = rsd_ensurer_create(&d)) != NULL);
    req_init(&q, S.url, LONG_ID "007");
    q.runtime = RSD_RUNTIME_AUTO;
    q.probe_timeout_ms = 30000;
    CHECK_EQ_INT(run_ensure(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.runtime, RSD_RUNTIME_LLAMACPP);
    CHECK_EQ_INT(res.decision, RSD_DECISION_LOAD);
    if (res.outcome != RSD_OUTCOME_RESIDENT) printf("  %s\n", res.message ? res.message : "");
    CHECK_EQ_INT(e->rc->snap.n, 64);
    CHECK_EQ_INT(e->rc->max_body, 8192);
    CHECK_EQ_INT(listed(S.url, LONG_ID "007"), RSD_MODEL_LOADED);
    req_init(&q, S.url, LONG_ID "007"); /* resident now: its entry is the largest (loaded: args, meta) */
    CHECK_EQ_INT(run_ensure(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.decision, RSD_DECISION_ALREADY_RESIDENT);
    rsd_ensurer_destroy(e);
    { /* the loaded entry (its argv, preset and meta: over 1 KiB) is over a 1 KiB buffer: the flag is named */
        static char out[8192];
        const char *a[] = {"--url", S.url, "--model", LONG_ID "007", "--max-body", "1024", NULL};
        CHECK_EQ_INT(run_cli(a, out, sizeof out), 6);
        CHECK(strstr(out, "listing too large: ") != NULL);
        CHECK(strstr(out, "a list entry is larger than the buffer (1024 bytes; raise max_body_bytes") != NULL);
        CHECK(strstr(out, "\n  --max-body N reads a larger listing entry or answer\n") != NULL);
        if (!strstr(out, "--max-body N")) printf("  %s\n", out);
    }
}

static void test_router_starts(void) {
    CHECK(UP);
    if (!UP) printf("  the router did not start: see %s\n", S.log);
}

int main(int argc, char **argv) {
    static const char *const all[] = {"tiny-a", "tiny-b", "tiny-c", "tiny-d", "tiny-e", "broken"};
    static const char *const abc[] = {"tiny-a", "tiny-b", "tiny-c"};
    RSD_TEST_BEGIN(argc, argv);
    REAL_SKIP_OR_FIND(BIN);
    signal(SIGPIPE, SIG_IGN);
    if (real_models(DIR_, sizeof DIR_) != 0) {
        printf("FAIL cannot make the tiny models\n0 passed, 1 failed\n");
        return 1;
    }
    snprintf(STATE, sizeof STATE, "%s/state", DIR_);
    /* router A: tiny-a pinned by tag, --models-max 2 (one state directory for the group) */
    UP = start_router("a.ini", true, all, 6, "2", NULL) == 0;
    RUN(test_router_starts);
    if (UP) {
        RUN(test_load_beside_then_swap_never_unloads_the_pinned_model);
        RUN(test_resident_model_costs_two_requests);
        RUN(test_context_larger_than_the_model_runs_with);
        RUN(test_failed_load_restores_and_keeps_the_pin);
        RUN(test_four_concurrent_processes);
        RUN(test_probe_timeout_retried_on_a_stopped_server);
        stop_router();
    }
    /* router B: no tags, --models-max 2, idle models sleep after 1 s */
    snprintf(STATE, sizeof STATE, "%s/state-b", DIR_);
    UP = start_router("b.ini", false, abc, 3, "2", "1") == 0;
    RUN(test_router_starts);
    if (UP) {
        RUN(test_every_protect_tier_survives_swaps);
        RUN(test_sleeping_model);
        stop_router();
    }
    /* router C: tiny-a pinned, --models-max 1 */
    snprintf(STATE, sizeof STATE, "%s/state-c", DIR_);
    UP = start_router("c.ini", true, abc, 3, "1", NULL) == 0;
    RUN(test_router_starts);
    if (UP) {
        RUN(test_models_max_reached_by_the_pin_declines);
        stop_router();
    }
    /* router E: 64 presets, long ids and arguments, --models-max 4 */
    {
        char ini[700];
        const char *args[] = {"--models-preset", ini, "--models-max", "4", NULL};
        snprintf(ini, sizeof ini, "%s/e.ini", DIR_);
        UP = write_long_presets(ini) == 0 && real_start(&S, BIN, DIR_, args, 60000) == 0;
        if (UP && watch_start(&W, S.url) != 0) {
            real_stop(&S);
            UP = false;
        }
        RUN(test_router_starts);
        if (UP) {
            RUN(test_64_long_presets_through_the_default_buffer);
            stop_router();
        }
    }
    /* router D: no tags, --models-max 3 */
    snprintf(STATE, sizeof STATE, "%s/state-d", DIR_);
    UP = start_router("d.ini", false, all, 4, "3", NULL) == 0;
    RUN(test_router_starts);
    if (UP) {
        RUN(test_lru_victim);
        RUN(test_free_bytes_and_release);
        RUN(test_game_loop_real);
        stop_router();
    }
    rmtree(DIR_);
    return RSD_TEST_END();
}
