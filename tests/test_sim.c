/* The simulators' server models (apps/rsd-sim/rsd_sim.h), driven directly with a fake clock:
   no sockets, no sleeps. Test names carry the wire.md section 5 checklist numbers. */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency.h"
#include "../apps/rsd-sim/rsd_sim.h"
#include "rsd_test.h"

static rsim *S;
static uint64_t NOW;
static char BUF[1 << 18];
static rsim_resp R;
/* The router generation every SETUP passes (--router-gen): main runs the router tests
   once per generation. */
static const char *G_GEN = "july";
static bool july(void) { return !strcmp(G_GEN, "july"); }

static void setup(int argc, const char *const *argv) {
    static char *av[64];
    int i;
    if (!S) S = (rsim *)calloc(1, sizeof *S);
    for (i = 0; i < argc && i < 61; i++) av[i + 1] = (char *)argv[i];
    av[0] = (char *)"rsd-sim";
    av[i + 1] = (char *)"--router-gen";
    av[i + 2] = (char *)G_GEN;
    if (rsim_configure(S, i + 3, av) != 0) printf("  configure: %s\n", S->err);
    NOW = 1000;
    rsim_start(S, NOW);
}
#define SETUP(...) do { static const char *const a_[] = {__VA_ARGS__}; \
    setup((int)(sizeof a_ / sizeof a_[0]), a_); } while (0)

static int hreq2(const char *m, const char *target, const char *body, const char *auth, const char *xkey) {
    rsim_req q;
    memset(&q, 0, sizeof q);
    q.method = m;
    q.target = target;
    q.body = body;
    q.body_len = body ? strlen(body) : 0;
    q.authorization = auth;
    q.x_api_key = xkey;
    R.body = BUF;
    R.body_cap = sizeof BUF;
    return rsim_handle(S, &q, NOW, &R);
}
static int hreq(const char *m, const char *target, const char *body) { return hreq2(m, target, body, NULL, NULL); }
static int get(const char *t) { return hreq("GET", t, NULL); }
static int post(const char *t, const char *b) { return hreq("POST", t, b); }

/* Runs the clock until `ticket` gets its complete answer; its status, or -1. */
static int wait_reply(uint32_t ticket, uint64_t max_ms) {
    uint64_t deadline = NOW + max_ms;
    for (;;) {
        uint64_t w;
        R.body = BUF;
        R.body_cap = sizeof BUF;
        while (rsim_pull(S, NOW, &R) > 0)
            if (R.ticket == ticket && (R.action == RSIM_RESPOND || R.action == RSIM_STREAM)) return R.status;
        w = rsim_next_wake_ms(S);
        if (w == (uint64_t)-1 || w > deadline) return -1;
        NOW = w > NOW ? w : NOW + 1;
    }
}

/* Status of an answer: at once (RSIM_RESPOND) or after running the clock. */
static int finish(int action, uint64_t max_ms) {
    if (action == RSIM_RESPOND) return R.status;
    if (action != RSIM_DEFER) return -2;
    return wait_reply(R.ticket, max_ms);
}

static void adv(uint64_t ms) { NOW += ms; rsim_tick(S, NOW); }

/* status.value of `id` in GET /models, read from the wire body. */
static const char *rstate(const char *id) {
    static char out[32];
    char pat[128];
    const char *p, *v;
    snprintf(pat, sizeof pat, "{\"id\":\"%s\"", id);
    if (get("/models") != RSIM_RESPOND) return "?";
    p = strstr(BUF, pat);
    if (!p) return "absent";
    v = strstr(p, "\"value\":\"");
    if (!v) return "?";
    v += 9;
    snprintf(out, sizeof out, "%.*s", (int)strcspn(v, "\""), v);
    return out;
}

/* The router entry of `id` as a string (up to the next entry). */
static const char *rentry(const char *id) {
    static char out[4096];
    char pat[128];
    const char *p, *e;
    snprintf(pat, sizeof pat, "{\"id\":\"%s\"", id);
    get("/models");
    p = strstr(BUF, pat);
    if (!p) return "";
    e = strstr(p + 1, "{\"id\":");
    snprintf(out, sizeof out, "%.*s", e ? (int)(e - p) : (int)strlen(p), p);
    return out;
}

static bool valid_json(void) {
    rsd_json_doc d;
    return rsd_json_parse(&d, R.body, R.body_len, NULL, 0) > 0;
}

#define ROUTER2 "--runtime", "router", "--models-max", "2", "--load-ms", "300", \
    "--model", "id=a,size=4G,tags=pinned", "--model", "id=b,tags=role|alpha", "--model", "id=c,alias=cee,alias=bee"

/* ---------------- llama.cpp router ---------------- */
static void test_W1_health(void) {
    SETUP(ROUTER2, "--api-key", "k");
    CHECK_EQ_INT(get("/health"), RSIM_RESPOND);
    CHECK_EQ_INT(R.status, 200);
    CHECK_EQ_STR(BUF, "{\"status\":\"ok\"}");
    CHECK_EQ_STR(R.server, "llama.cpp");
    get("/v1/health");
    CHECK_EQ_INT(R.status, 200);
}

static void test_W2_router_props(void) {
    char want[512];
    SETUP(ROUTER2);
    get("/props");
    CHECK_EQ_INT(R.status, 200);
    snprintf(want, sizeof want,
             "{\"role\":\"router\",\"max_instances\":2,\"models_autoload\":true,\"model_alias\":\"llama-server\","
             "\"model_path\":\"none\",\"default_generation_settings\":{\"params\":null,\"n_ctx\":0},"
             "\"ui_settings\":{},\"build_info\":\"%s\",\"cors_proxy_enabled\":false}",
             july() ? "b10116-7e743c3a3" : "0.4.0-dev (build 11037, commit 0000000)"); /* PR #27498's form */
    CHECK_EQ_STR(BUF, want);
    SETUP("--models-max", "0", "--no-models-autoload", "--model", "a");
    get("/props");
    CHECK(strstr(BUF, "\"max_instances\":0,\"models_autoload\":false") != NULL);
}

static void test_W3_models_listing(void) {
    static char first[sizeof BUF];
    const char *e;
    SETUP(ROUTER2);
    get("/models");
    CHECK(valid_json());
    memcpy(first, BUF, sizeof BUF);
    get("/v1/models");
    CHECK_EQ_STR(BUF, first);
    if (july()) CHECK(strncmp(BUF, "{\"data\":[", 9) == 0 && strstr(BUF, "],\"object\":\"list\"}") != NULL);
    else CHECK(strncmp(BUF, "{\"object\":\"list\",\"data\":[", 25) == 0);
    CHECK(strstr(BUF, "\"models\"") == NULL);
    e = rentry("b");
    CHECK(strstr(e, "\"tags\":[\"alpha\",\"role\"]") != NULL);      /* sorted */
    CHECK(strstr(e, "\"args\":[\"/usr/local/bin/llama-server\"") != NULL); /* always present */
    CHECK(strstr(e, "\"--port\",\"0\"") != NULL);                  /* never loaded */
    CHECK(strstr(e, "\"meta\"") == NULL);
    CHECK(strstr(e, "\"failed\"") == NULL);
    CHECK(strstr(e, "\"source\":\"preset\",\"can_remove\":false") != NULL);
    e = rentry("c");
    CHECK(strstr(e, "\"aliases\":[\"bee\",\"cee\"]") != NULL);
    CHECK(strstr(BUF, "\"created\":1795993601") != NULL);        /* epoch + now (1 s) */
    adv(5000);
    get("/models");
    CHECK(strstr(BUF, "\"created\":1795993606") != NULL);        /* current time on every call */
    post("/models/load", "{\"model\":\"a\"}");
    e = rentry("a");
    CHECK(strstr(e, "\"meta\"") == NULL);                          /* loading, never ready yet */
    adv(300);
    e = rentry("a");
    CHECK(strstr(e, "\"value\":\"loaded\"") != NULL);
    CHECK(strstr(e, july() ? "\"meta\":{\"vocab_type\":1," : "\"meta\":{\"vocab_type\":true,") != NULL);
    CHECK(strstr(e, "\"--port\",\"0\"") == NULL);
    /* the router's option order, tags included (measured on build 10116) */
    CHECK(strstr(e, "\"--tags\",\"pinned\",\"--alias\",\"a\",\"--ctx-size\",\"4096\",\"--model\"") != NULL);
    CHECK(strstr(rentry("b"), "\"--port\",\"0\",\"--tags\",\"alpha,role\",\"--alias\",\"b\"") != NULL);
    /* July lists by id whatever the catalog order; later routers keep the catalog order */
    SETUP("--model", "zed", "--model", "alpha", "--model", "mid");
    get("/models");
    CHECK((strstr(BUF, "\"id\":\"alpha\"") < strstr(BUF, "\"id\":\"mid\"") &&
           strstr(BUF, "\"id\":\"mid\"") < strstr(BUF, "\"id\":\"zed\"")) == july());
}

static void test_W4_load_then_loaded(void) {
    uint32_t sse;
    int n = 0, saw_status = 0, saw_progress = 0, saw_loaded_info = 0;
    SETUP(ROUTER2);
    CHECK_EQ_INT(get("/models/sse"), RSIM_STREAM);
    CHECK_EQ_STR(R.content_type, "text/event-stream");
    sse = R.ticket;
    CHECK_EQ_INT(post("/models/load", "{\"model\":\"a\"}"), RSIM_RESPOND);
    CHECK_EQ_INT(R.status, 200);
    CHECK_EQ_STR(BUF, "{\"success\":true}");
    CHECK_EQ_STR(rstate("a"), "loading");
    adv(299);
    CHECK_EQ_STR(rstate("a"), "loading");
    adv(1);
    CHECK_EQ_STR(rstate("a"), "loaded");
    while (rsim_pull(S, NOW, &R) > 0) {
        if (R.ticket != sse) continue;
        CHECK_EQ_INT(R.action, RSIM_CHUNK);
        CHECK(strncmp(BUF, "data: {", 7) == 0 && strstr(BUF, "}\n\n") != NULL);
        if (n == 0) saw_status = strstr(BUF, "\"event\":\"model_status\",\"data\":{\"status\":\"loading\"}") != NULL;
        /* July: {"stages":[...],"current":...}; later: {"stage":...} (PR #24828) */
        if (strstr(BUF, "\"status_change\"") &&
            strstr(BUF, july() ? "\"progress\":{\"stages\":[\"text_model\"],\"current\":\"text_model\",\"value\":"
                               : saw_progress ? "\"progress\":{\"stage\":\"text_model\",\"value\":1.0}"
                                              : "\"progress\":{\"stage\":\"fit_params\",\"value\":0.0}"))
            saw_progress++;
        if (strstr(BUF, "\"status\":\"loaded\",\"info\":{\"id\":\"a\"")) saw_loaded_info++;
        n++;
    }
    CHECK(saw_status);
    CHECK(saw_progress >= 2);
    CHECK_EQ_INT(saw_loaded_info, 1);
}

/* Cold loads at once (several in one millisecond, no room for all): July stops its LRU
   model for the last one; the later generation answers it 500 "model limit reached, try
   again later" (#28774, build 11037); --limit-loads and --refuse-loads on demand. */
static void test_cold_loads_at_once(void) {
    SETUP(ROUTER2);
    CHECK_EQ_INT(post("/models/load", "{\"model\":\"a\"}"), RSIM_RESPOND);
    CHECK_EQ_INT(R.status, 200);
    CHECK_EQ_INT(post("/models/load", "{\"model\":\"b\"}"), RSIM_RESPOND);
    CHECK_EQ_INT(R.status, 200);
    if (july()) { /* its LRU model is stopped for it, loading or not: never the limit answer */
        post("/models/load", "{\"model\":\"c\"}");
        CHECK(!(R.action == RSIM_RESPOND && R.status == 500));
        return;
    }
    CHECK_EQ_INT(post("/models/load", "{\"model\":\"c\"}"), RSIM_RESPOND);
    CHECK_EQ_INT(R.status, 500);
    CHECK_EQ_STR(BUF, "{\"message\":\"model limit reached, try again later\"}");
    CHECK_EQ_STR(rstate("c"), "unloaded");
    CHECK_EQ_STR(rstate("a"), "loading");
    CHECK_EQ_STR(rstate("b"), "loading");
    adv(300);
    S->o.limit_loads = 1; /* on demand, even with room */
    post("/models/unload", "{\"model\":\"b\"}");
    adv(50);
    CHECK_EQ_INT(post("/models/load", "{\"model\":\"c\"}"), RSIM_RESPOND);
    CHECK_EQ_INT(R.status, 500);
    CHECK(strstr(BUF, "model limit reached") != NULL);
    S->o.refuse_loads = 1; /* b was evicted: the next load answers the proxy error */
    CHECK_EQ_INT(post("/models/load", "{\"model\":\"c\"}"), RSIM_RESPOND);
    CHECK_EQ_INT(R.status, 500);
    CHECK_EQ_STR(BUF, "proxy error: Could not establish connection");
    CHECK_EQ_INT(post("/models/load", "{\"model\":\"c\"}"), RSIM_RESPOND);
    CHECK_EQ_INT(R.status, 200);
}

static void test_W5_load_errors(void) {
    SETUP(ROUTER2);
    post("/models/load", "{\"model\":\"nope\"}");
    CHECK_EQ_INT(R.status, 404);
    CHECK_EQ_STR(BUF, "{\"error\":{\"message\":\"File Not Found\",\"type\":\"not_found_error\",\"code\":404}}");
    post("/models/load", "{}");
    CHECK_EQ_INT(R.status, 404);
    post("/models/load", "");
    CHECK_EQ_INT(R.status, 500);
    CHECK(strstr(BUF, "\"message\":\"[json.exception.parse_error.101] parse error at line 1, column 1:") != NULL);
    CHECK(strstr(BUF, "\"type\":\"server_error\"") != NULL);
    post("/models/load", "{nope");
    CHECK_EQ_INT(R.status, 500);
    post("/models/load", "{\"model\":\"a\"}");
    CHECK_EQ_INT(R.status, 200);
    post("/models/load", "{\"model\":\"a\"}");
    CHECK_EQ_INT(R.status, 400);
    CHECK_EQ_STR(BUF, "{\"error\":{\"code\":400,\"message\":\"model is already running\",\"type\":\"invalid_request_error\"}}");
    adv(400);
    post("/models/load", "{\"model\":\"a\"}");
    CHECK_EQ_INT(R.status, 400);
}

static void test_W6_capacity_lru(void) {
    uint32_t tk;
    SETUP(ROUTER2, "--unload-ms", "15");
    post("/models/load", "{\"model\":\"a\"}");
    adv(10);
    post("/models/load", "{\"model\":\"b\"}");
    adv(400);
    /* a is older by load time, but a chat touches it: b becomes the LRU */
    CHECK_EQ_INT(finish(post("/v1/chat/completions", "{\"model\":\"a\",\"messages\":[]}"), 1000), 200);
    CHECK_EQ_INT(post("/models/load", "{\"model\":\"c\"}"), RSIM_DEFER); /* blocks while b stops */
    tk = R.ticket;
    CHECK_EQ_STR(rstate("b"), "loaded");                      /* still stopping */
    CHECK_EQ_INT(wait_reply(tk, 100), 200);
    CHECK_EQ_STR(BUF, "{\"success\":true}");
    CHECK_EQ_STR(rstate("b"), "unloaded");
    CHECK(strstr(rentry("b"), "\"failed\"") == NULL);       /* graceful: exit 0 */
    CHECK_EQ_STR(rstate("c"), "loading");
    CHECK_EQ_STR(rstate("a"), "loaded");
    rsim_busy(S, "a", 1, NOW);
    if (july()) {
        /* July: the LRU goes whatever it does: the busy a (its chat is older than c's
           load start) */
        CHECK_EQ_INT(post("/models/load", "{\"model\":\"b\"}"), RSIM_DEFER);
        tk = R.ticket;
        CHECK_EQ_INT(wait_reply(tk, 20000), 200); /* a busy child only exits at the stop timeout */
        CHECK(strstr(rentry("a"), "\"value\":\"unloaded\"") != NULL);
        CHECK(strstr(rentry("a"), "\"exit_code\":1,\"failed\":true") != NULL);
        CHECK_EQ_STR(rstate("b"), "loading");
    } else {
        /* later: every running model busy or loading: the load waits, nothing evicted,
           until one is idle: c once it has loaded; the busy a stays */
        CHECK_EQ_INT(post("/models/load", "{\"model\":\"b\"}"), RSIM_DEFER);
        tk = R.ticket;
        CHECK_EQ_STR(rstate("c"), "loading");
        CHECK_EQ_INT(wait_reply(tk, 2000), 200);
        CHECK(NOW >= 1000 + 410 + 300);
        CHECK_EQ_STR(rstate("a"), "loaded");
        CHECK_EQ_STR(rstate("c"), "unloaded");
        CHECK(strstr(rentry("c"), "\"failed\"") == NULL);
        CHECK_EQ_STR(rstate("b"), "loading");
    }
    /* sleeping instances count toward the cap and can be victims */
    SETUP("--models-max", "1", "--sleep-idle-seconds", "2", "--model", "a", "--model", "b");
    post("/models/load", "{\"model\":\"a\"}");
    adv(300 + 2000);
    CHECK_EQ_STR(rstate("a"), "sleeping");
    CHECK_EQ_INT(post("/models/load", "{\"model\":\"b\"}"), RSIM_DEFER);
    CHECK_EQ_INT(wait_reply(R.ticket, 100), 200);
    CHECK_EQ_STR(rstate("a"), "unloaded");
}

static void test_W7_unload(void) {
    uint32_t tk;
    SETUP(ROUTER2);
    post("/models/unload", "{\"model\":\"nope\"}");
    CHECK_EQ_INT(R.status, 400);
    CHECK_EQ_STR(BUF, "{\"error\":{\"code\":400,\"message\":\"model is not found\",\"type\":\"invalid_request_error\"}}");
    post("/models/unload", "{\"model\":\"a\"}");
    CHECK_EQ_INT(R.status, 400);
    CHECK(strstr(BUF, "\"model is not running\"") != NULL);
    post("/models/load", "{\"model\":\"a\"}");
    adv(300);
    post("/models/unload", "{\"model\":\"a\"}");
    CHECK_EQ_INT(R.status, 200);
    CHECK_EQ_STR(BUF, "{\"success\":true}");
    adv(10);
    CHECK_EQ_STR(rstate("a"), "unloaded");
    CHECK(strstr(rentry("a"), "\"failed\"") == NULL);
    /* unloading a loading child kills it: failed, exit 1 */
    post("/models/load", "{\"model\":\"b\"}");
    adv(50);
    post("/models/unload", "{\"model\":\"b\"}");
    CHECK_EQ_INT(R.status, 200);
    CHECK(strstr(rentry("b"), "\"value\":\"unloaded\"") != NULL);
    CHECK(strstr(rentry("b"), "\"exit_code\":1,\"failed\":true") != NULL);
    /* inject: graceful stop hangs until the stop timeout, then force-kill (exit 1) */
    SETUP(ROUTER2, "--stop-hang", "--stop-timeout-ms", "10000");
    post("/models/load", "{\"model\":\"a\"}");
    adv(300);
    post("/models/unload", "{\"model\":\"a\"}");
    adv(9999);
    CHECK_EQ_STR(rstate("a"), "loaded");
    adv(1);
    CHECK(strstr(rentry("a"), "\"exit_code\":1,\"failed\":true") != NULL);
    (void)tk;
}

static void test_W8_aliases(void) {
    SETUP(ROUTER2);
    post("/models/load", "{\"model\":\"cee\"}");
    CHECK_EQ_INT(R.status, 200);
    CHECK_EQ_STR(rstate("c"), "loading");
    adv(300);
    CHECK_EQ_INT(finish(post("/v1/chat/completions", "{\"model\":\"bee\",\"messages\":[]}"), 1000), 200);
    CHECK(strstr(BUF, "\"model\":\"c\"") != NULL);
    post("/models/unload", "{\"model\":\"bee\"}");
    CHECK_EQ_INT(R.status, 200);
    CHECK_EQ_INT(rsim_log_count(S, "POST", "/models/unload", "c", 200), 1);
}

static void test_W9_proxy_validation(void) {
    SETUP(ROUTER2);
    post("/v1/chat/completions", "{\"messages\":[]}");
    CHECK_EQ_INT(R.status, 400);
    CHECK_EQ_STR(BUF, "{\"error\":{\"code\":400,\"message\":\"model name is missing from the request\",\"type\":\"invalid_request_error\"}}");
    get("/metrics");
    CHECK_EQ_INT(R.status, 400);
    post("/v1/chat/completions", "{\"model\":\"nope\"}");
    CHECK_EQ_INT(R.status, 400);
    CHECK(strstr(BUF, "\"message\":\"model 'nope' not found\"") != NULL);
    /* a \u0000 in the name: no model (b10116's router: 400 here, 404 on /models/load) */
    post("/v1/chat/completions", "{\"model\":\"a\\u0000x\"}");
    CHECK_EQ_INT(R.status, 400);
    CHECK(strstr(BUF, "not found") != NULL);
    post("/models/load", "{\"model\":\"a\\u0000x\"}");
    CHECK_EQ_INT(R.status, 404);
    CHECK_EQ_STR(rstate("a"), "unloaded");
    post("/v1/chat/completions?autoload=false", "{\"model\":\"a\"}");
    CHECK_EQ_INT(R.status, 400);
    CHECK(strstr(BUF, "\"message\":\"model is not loaded\"") != NULL);
    CHECK_EQ_STR(rstate("a"), "unloaded");
    /* global off, per-request on */
    SETUP(ROUTER2, "--no-models-autoload");
    post("/v1/chat/completions", "{\"model\":\"a\"}");
    CHECK_EQ_INT(R.status, 400);
    CHECK_EQ_INT(post("/v1/chat/completions?autoload=1", "{\"model\":\"a\"}"), RSIM_DEFER);
    CHECK_EQ_STR(rstate("a"), "loading");
}

static void test_W10_autoload(void) {
    uint32_t tk;
    uint64_t t0;
    SETUP(ROUTER2);
    t0 = NOW;
    CHECK_EQ_INT(post("/v1/chat/completions", "{\"model\":\"a\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"), RSIM_DEFER);
    tk = R.ticket;
    CHECK_EQ_INT(rsim_log_count(S, "POST", "/v1/chat/completions", "a", RSIM_LOG_PENDING), 1);
    CHECK_EQ_INT(wait_reply(tk, 2000), 200);
    CHECK(NOW - t0 >= 300);
    CHECK(valid_json());
    CHECK(strstr(BUF, "\"object\":\"chat.completion\"") != NULL);
    CHECK(strstr(BUF, "\"content\":\"This is a simulated reply.\"") != NULL);
    CHECK_EQ_INT(rsim_log_count(S, "POST", "/v1/chat/completions", "a", 200), 1);
    /* failing load: 500 model name=X failed to load, retried next time */
    SETUP(ROUTER2, "--fail-loads", "1");
    CHECK_EQ_INT(finish(post("/completion", "{\"model\":\"b\",\"prompt\":\"x\"}"), 2000), 500);
    CHECK_EQ_STR(BUF, "{\"error\":{\"code\":500,\"message\":\"model name=b failed to load\",\"type\":\"server_error\"}}");
    CHECK(strstr(rentry("b"), "\"exit_code\":1,\"failed\":true") != NULL);
    CHECK_EQ_INT(finish(post("/completion", "{\"model\":\"b\",\"prompt\":\"x\"}"), 2000), 200);
    CHECK(strstr(BUF, "\"stop\":true") != NULL);
}

static void test_W11_queue(void) {
    uint32_t ta, tb, tc;
    SETUP("--models-max", "1", "--gen-ms", "500", "--model", "a", "--model", "b", "--model", "c");
    post("/models/load", "{\"model\":\"a\"}");
    adv(300);
    ta = (post("/v1/chat/completions", "{\"model\":\"a\"}"), R.ticket); /* a busy for 500 ms */
    CHECK_EQ_INT(post("/v1/chat/completions", "{\"model\":\"b\"}"), RSIM_DEFER);
    tb = R.ticket;
    adv(100);
    if (july()) { /* no wait queue: the busy a is stopped, its answer cut at the stop timeout */
        CHECK_EQ_INT(wait_reply(ta, 20000), 500);
        CHECK_EQ_STR(BUF, "proxy error: Failed to read connection");
        CHECK_EQ_INT(wait_reply(tb, 2000), 200);
        CHECK(strstr(rentry("a"), "\"exit_code\":1,\"failed\":true") != NULL);
        CHECK_EQ_STR(rstate("b"), "loaded");
        return;
    }
    CHECK_EQ_STR(rstate("a"), "loaded");    /* busy: not evicted */
    CHECK_EQ_STR(rstate("b"), "unloaded");  /* queued */
    CHECK_EQ_INT(wait_reply(ta, 1000), 200);
    CHECK_EQ_INT(wait_reply(tb, 2000), 200);
    CHECK_EQ_STR(rstate("a"), "unloaded");
    CHECK_EQ_STR(rstate("b"), "loaded");
    /* a client leaving the queue causes no eviction */
    ta = (post("/v1/chat/completions", "{\"model\":\"b\"}"), R.ticket);
    tc = (post("/v1/chat/completions", "{\"model\":\"c\"}"), R.ticket);
    adv(10);
    rsim_cancel(S, tc, NOW);
    CHECK_EQ_INT(wait_reply(ta, 1000), 200);
    adv(2000);
    CHECK_EQ_STR(rstate("b"), "loaded");
    CHECK_EQ_STR(rstate("c"), "unloaded");
    CHECK_EQ_INT(rsim_log_count(S, "POST", "/v1/chat/completions", "c", -1), 1);
}

static void test_W12_get_model_autoloads(void) {
    uint32_t tk;
    SETUP(ROUTER2);
    get("/props?model=a&autoload=false");
    CHECK_EQ_INT(R.status, 400);
    CHECK_EQ_STR(rstate("a"), "unloaded");
    CHECK_EQ_INT(get("/props?model=a"), RSIM_DEFER);
    tk = R.ticket;
    CHECK_EQ_STR(rstate("a"), "loading");
    CHECK_EQ_INT(wait_reply(tk, 1000), 200);
    CHECK(strstr(BUF, "\"is_sleeping\":false") != NULL);
    CHECK(strstr(BUF, "\"role\"") == NULL);
    CHECK_EQ_INT(finish(get("/slots?model=b"), 1000), 200);
    CHECK(BUF[0] == '[' && strstr(BUF, "\"is_processing\":false") != NULL);
}

static void test_W13_loading_child(void) {
    SETUP(ROUTER2);
    post("/models/load", "{\"model\":\"a\"}");
    adv(15);
    post("/v1/chat/completions?autoload=false", "{\"model\":\"a\"}");
    CHECK_EQ_INT(R.status, 503);
    CHECK_EQ_STR(BUF, "{\"error\":{\"message\":\"Loading model\",\"type\":\"unavailable_error\",\"code\":503}}");
    SETUP(ROUTER2, "--proxy-error");
    post("/models/load", "{\"model\":\"a\"}");
    post("/v1/chat/completions?autoload=false", "{\"model\":\"a\"}");
    CHECK_EQ_INT(R.status, 500);
    CHECK_EQ_STR(BUF, "proxy error: Could not establish connection");
    CHECK(strstr(R.content_type, "application/json") != NULL);
}

static void test_W14_sleep(void) {
    uint64_t t0;
    int n, i;
    SETUP(ROUTER2, "--sleep-idle-seconds", "3", "--wake-ms", "100");
    post("/models/load", "{\"model\":\"a\"}");
    adv(300 + 2999);
    CHECK_EQ_STR(rstate("a"), "loaded");
    adv(1);
    CHECK_EQ_STR(rstate("a"), "sleeping");
    CHECK(strstr(rentry("a"), "\"meta\"") != NULL);              /* meta kept */
    CHECK(strstr(rentry("a"), "\"--sleep-idle-seconds\",\"3\"") != NULL);
    get("/props?model=a&autoload=false");                       /* cached, no wake */
    CHECK_EQ_INT(R.status, 200);
    CHECK(strstr(BUF, "\"is_sleeping\":true") != NULL);
    get("/health");
    CHECK_EQ_STR(rstate("a"), "sleeping");
    n = (int)S->ev_seq;
    t0 = NOW;
    CHECK_EQ_INT(finish(post("/v1/chat/completions", "{\"model\":\"a\"}"), 1000), 200);
    CHECK(NOW - t0 >= 100);
    CHECK_EQ_STR(rstate("a"), "loaded");
    for (i = n; i < (int)S->ev_seq; i++)   /* the wake event carries no info */
        if (S->ev[i % RSIM_EVENTS_MAX].status == RSIM_LOADED) CHECK(!S->ev[i % RSIM_EVENTS_MAX].info);
}

static void test_W15_crash_and_failed_load(void) {
    SETUP(ROUTER2);
    post("/models/load", "{\"model\":\"a\"}");
    adv(300);
    rsim_crash(S, "a", 139, NOW);
    CHECK(strstr(rentry("a"), "\"value\":\"unloaded\"") != NULL);
    CHECK(strstr(rentry("a"), "\"exit_code\":139,\"failed\":true") != NULL);
    CHECK(strstr(rentry("a"), "\"meta\"") == NULL);
    post("/_sim/fail-loads", "{\"count\":1}");
    post("/models/load", "{\"model\":\"b\"}");
    CHECK_EQ_INT(R.status, 200);                                  /* spawn succeeded */
    CHECK_EQ_STR(rstate("b"), "loading");
    adv(10);
    CHECK(strstr(rentry("b"), "\"exit_code\":1,\"failed\":true") != NULL);
    SETUP("--model", "id=x,fail=1");
    post("/models/load", "{\"model\":\"x\"}");
    adv(10);
    CHECK(strstr(rentry("x"), "\"failed\":true") != NULL);
}

static void test_W16_api_key(void) {
    SETUP(ROUTER2, "--api-key", "sekrit");
    get("/models");
    CHECK_EQ_INT(R.status, 401);
    CHECK_EQ_STR(BUF, "{\"error\":{\"message\":\"Invalid API Key\",\"type\":\"authentication_error\",\"code\":401}}");
    hreq2("GET", "/models", NULL, "Bearer wrong", NULL);
    CHECK_EQ_INT(R.status, 401);
    hreq2("GET", "/models", NULL, "Bearer sekrit", NULL);
    CHECK_EQ_INT(R.status, 200);
    hreq2("GET", "/props", NULL, NULL, "sekrit");
    CHECK_EQ_INT(R.status, 200);
    hreq2("POST", "/models/load", "{\"model\":\"a\"}", NULL, NULL);
    CHECK_EQ_INT(R.status, 401);
    get("/health");
    CHECK_EQ_INT(R.status, 200);
}

static void test_W17_W18_reload(void) {
    uint32_t sse;
    bool saw = false;
    SETUP(ROUTER2, "--fail-loads", "1");
    sse = (get("/models/sse"), R.ticket);
    post("/models/load", "{\"model\":\"a\"}");
    adv(20);
    CHECK(strstr(rentry("a"), "\"failed\":true") != NULL);
    get("/models?reload=1");
    CHECK(strstr(rentry("a"), "\"failed\"") == NULL);
    while (rsim_pull(S, NOW, &R) > 0)
        if (R.ticket == sse && strstr(BUF, "{\"model\":\"*\",\"event\":\"models_reload\"}")) saw = true;
    CHECK(saw);
}

static void test_W19_unknown_route(void) {
    SETUP(ROUTER2);
    get("/nope");
    CHECK_EQ_INT(R.status, 404);
    CHECK_EQ_STR(BUF, "{\"error\":{\"message\":\"File Not Found\",\"type\":\"not_found_error\",\"code\":404}}");
    CHECK_EQ_STR(R.server, "llama.cpp");
}

static void test_W20_startup(void) {
    SETUP("--model", "id=a,startup=1", "--model", "b");
    CHECK_EQ_STR(rstate("a"), "loading");
    CHECK_EQ_STR(rstate("b"), "unloaded");
    CHECK_EQ_INT(rsim_exit_code(S), -1);
    SETUP("--models-max", "0", "--model", "id=a,startup=1");
    CHECK_EQ_INT(rsim_exit_code(S), 1);   /* the real router's bug, reproduced */
}

static void test_router_stream(void) {
    uint32_t tk;
    int chunks = 0, ended = 0, pings = 0;
    SETUP(ROUTER2);
    post("/models/load", "{\"model\":\"a\"}");
    adv(300);
    CHECK_EQ_INT(post("/v1/chat/completions", "{\"model\":\"a\",\"stream\":true,\"sse_ping_interval\":0.002}"),
                 RSIM_DEFER);
    tk = R.ticket;
    CHECK_EQ_INT(wait_reply(tk, 100), 200);
    CHECK_EQ_INT(R.action, RSIM_STREAM);
    for (;;) {
        uint64_t w;
        while (rsim_pull(S, NOW, &R) > 0) {
            if (R.ticket != tk) continue;
            if (R.action == RSIM_CHUNK && BUF[0] == ':') { /* later: a keep-alive frame (PR #25241) */
                CHECK_EQ_STR(BUF, ":\n\n");
                CHECK(chunks < RSIM_NTOK + 3); /* none after [DONE] */
                pings++;
            } else if (R.action == RSIM_CHUNK) {
                chunks++;
                CHECK(strncmp(BUF, "data: ", 6) == 0);
                if (chunks == RSIM_NTOK + 3) CHECK_EQ_STR(BUF, "data: [DONE]\n\n");
                if (chunks == 2) CHECK(strstr(BUF, "\"delta\":{\"content\":\"This\"}") != NULL);
            }
            if (R.action == RSIM_END) ended = 1;
        }
        if (ended) break;
        w = rsim_next_wake_ms(S);
        if (w == (uint64_t)-1) break;
        NOW = w;
    }
    CHECK(ended);
    CHECK_EQ_INT(chunks, RSIM_NTOK + 3);
    /* later: one opens the stream, then one every 2 ms between chunks 5 ms apart */
    if (july()) CHECK_EQ_INT(pings, 0);
    else CHECK(pings >= 1 + 2 * (RSIM_NTOK + 2));
    CHECK_EQ_INT(S->m[0].inflight, 0);
}

/* ---------------- fault injection ---------------- */
static void test_faults(void) {
    uint32_t tk;
    SETUP(ROUTER2, "--hang", "/props", "--drop", "/v1/modelsx1", "--error", "/models/load=503x1", "--delay", "/health=250",
          "--delay", "/v1/chat/completions=1000");
    CHECK_EQ_INT(get("/props"), RSIM_HANG);
    CHECK_EQ_INT(rsim_log_count(S, "GET", "/props", NULL, -1), 1);
    CHECK_EQ_INT(get("/v1/models"), RSIM_RESPOND);
    CHECK(R.truncate && R.truncate_at < R.body_len);
    get("/v1/models");
    CHECK(!R.truncate);
    post("/models/load", "{\"model\":\"a\"}");
    CHECK_EQ_INT(R.status, 503);
    post("/models/load", "{\"model\":\"a\"}");
    CHECK_EQ_INT(R.status, 200);
    CHECK_EQ_INT(get("/health"), RSIM_DEFER);
    tk = R.ticket;
    adv(249);
    CHECK(rsim_pull(S, NOW, &R) == 0);
    adv(1);
    CHECK_EQ_INT(wait_reply(tk, 10), 200);
    /* the delay adds to a deferred answer too: 300 ms load + 20 ms generation + 1000 ms */
    {
        uint64_t t0 = NOW;
        CHECK_EQ_INT(post("/v1/chat/completions", "{\"model\":\"b\"}"), RSIM_DEFER);
        CHECK_EQ_INT(wait_reply(R.ticket, 5000), 200);
        CHECK(NOW - t0 >= 1320);
    }
    /* listed, then gone before the load */
    SETUP(ROUTER2, "--remove-after-list", "c");
    get("/v1/models");
    CHECK(strstr(BUF, "\"id\":\"c\"") != NULL);
    post("/models/load", "{\"model\":\"c\"}");
    CHECK_EQ_INT(R.status, 404);
    CHECK_EQ_STR(rstate("c"), "absent");
}

static void test_configure(void) {
    rsim *s = (rsim *)calloc(1, sizeof *s);
    char *bad[] = {(char *)"x", (char *)"--bogus"};
    char *bad2[] = {(char *)"x", (char *)"--model", (char *)"size=1G"};
    char *ok[] = {(char *)"x", (char *)"--runtime", (char *)"ollama", (char *)"--model",
                  (char *)"id=llama3.2,size=1.5G,keep=10m", (char *)"--keep-alive", (char *)"-1"};
    CHECK_EQ_INT(rsim_configure(s, 2, bad), -1);
    CHECK(strstr(s->err, "--bogus") != NULL);
    CHECK_EQ_INT(rsim_configure(s, 3, bad2), -1);
    CHECK_EQ_INT(rsim_configure(s, 7, ok), 0);
    CHECK_EQ_INT(s->o.runtime, RSIM_RT_OLLAMA);
    CHECK(s->m[0].size_bytes == 1610612736ull);
    CHECK_EQ_INT(s->m[0].keep_cfg_ms, 600000);
    CHECK_EQ_INT(s->o.keep_alive_ms, -1);
    CHECK(rsim_parse_size("4G") == 4294967296ull && rsim_parse_size("512MiB") == 536870912ull);
    CHECK(rsim_parse_size("x") == 0 && rsim_parse_size("4Q") == 0);
    {
        int64_t ms;
        CHECK(rsim_parse_duration("1h30m", 5, false, &ms) && ms == 5400000);
        CHECK(rsim_parse_duration("300ms", 5, false, &ms) && ms == 300);
        CHECK(rsim_parse_duration("-1s", 3, false, &ms) && ms == -1);
        CHECK(!rsim_parse_duration("10", 2, false, &ms));
        CHECK(rsim_parse_duration("10", 2, true, &ms) && ms == 10000);
    }
    free(s);
}

/* ---------------- single-model llama-server ---------------- */
static void test_W21_W22_server_startup(void) {
    SETUP("--runtime", "server", "--model", "id=/models/tiny.gguf", "--load-ms", "450");
    CHECK(!rsim_ready(S));
    get("/health");
    CHECK_EQ_INT(R.status, 503);
    CHECK_EQ_STR(BUF, "{\"error\":{\"message\":\"Loading model\",\"type\":\"unavailable_error\",\"code\":503}}");
    get("/v1/models");
    CHECK_EQ_INT(R.status, 503);
    adv(450);
    CHECK(rsim_ready(S));
    get("/health");
    CHECK_EQ_INT(R.status, 200);
    CHECK_EQ_INT(rsim_exit_code(S), -1);
    SETUP("--runtime", "server", "--model", "id=/models/bad.gguf,fail=1", "--load-ms", "100");
    adv(50);
    get("/health");
    CHECK_EQ_INT(R.status, 503);
    adv(100);
    CHECK_EQ_INT(rsim_exit_code(S), 1);
    CHECK(!rsim_ready(S));
}

static void test_W23_W24_server_models_props(void) {
    SETUP("--runtime", "server", "--model", "id=models/rel.gguf", "--ctx", "1024");
    adv(300);
    get("/v1/models");
    CHECK(valid_json());
    CHECK(strncmp(BUF, "{\"models\":[{\"name\":\"models/rel.gguf\"", 36) == 0);
    CHECK(strstr(BUF, "\"object\":\"list\",\"data\":[{\"id\":\"models/rel.gguf\"") != NULL);
    CHECK(strstr(BUF, "\"n_ctx\":1024") != NULL);
    SETUP("--runtime", "server", "--model", "id=/m.gguf,alias=zed,alias=alpha", "--parallel", "2");
    adv(300);
    get("/models");
    CHECK(strstr(BUF, "\"data\":[{\"id\":\"alpha\",\"aliases\":[\"alpha\",\"zed\"]") != NULL);
    get("/props");
    CHECK(valid_json());
    CHECK(strstr(BUF, "\"total_slots\":2") != NULL);
    CHECK(strstr(BUF, "\"is_sleeping\":false") != NULL);
    CHECK(strstr(BUF, "\"role\"") == NULL);
    CHECK(strstr(BUF, "\"default_generation_settings\":{\"params\":{") != NULL);
    /* spawned the way a pool spawns llama-server */
    SETUP("--runtime", "server", "-a", "qwen,coder", "--port", "0", "-c", "8192", "-np", "2", "-ngl", "99",
          "--jinja", "-m", "/models/q.gguf", "--flash-attn", "on");
    adv(300);
    get("/v1/models");
    CHECK(strstr(BUF, "\"data\":[{\"id\":\"coder\",\"aliases\":[\"coder\",\"qwen\"]") != NULL);
    CHECK(strstr(BUF, "\"n_ctx\":8192") != NULL);
    CHECK_EQ_INT(S->o.port, 0);
    get("/props");
    CHECK(strstr(BUF, "\"total_slots\":2") != NULL);
}

static void test_W25_slots(void) {
    uint32_t t1, t2;
    SETUP("--runtime", "server", "--parallel", "2", "--gen-ms", "100");
    adv(300);
    CHECK_EQ_INT(finish(get("/slots"), 10), 200);
    CHECK(valid_json());
    CHECK(strstr(BUF, "\"is_processing\":true") == NULL);
    CHECK(strstr(BUF, "\"id_task\"") == NULL);
    t1 = (post("/v1/chat/completions", "{\"messages\":[]}"), R.ticket);
    t2 = (post("/completion", "{\"prompt\":\"x\"}"), R.ticket);
    adv(1);
    get("/slots?fail_on_no_slot=1");
    CHECK_EQ_INT(R.status, 503);
    CHECK(strstr(BUF, "\"no slot available\"") != NULL);
    CHECK_EQ_INT(finish(get("/slots"), 10), 200);
    CHECK(strstr(BUF, "\"is_processing\":true") != NULL);
    CHECK(strstr(BUF, "\"id_task\"") != NULL);
    CHECK_EQ_INT(wait_reply(t1, 1000), 200);
    CHECK_EQ_INT(wait_reply(t2, 1000), 200);
    SETUP("--runtime", "server", "--no-slots");
    adv(300);
    get("/slots");
    CHECK_EQ_INT(R.status, 501);
    CHECK(strstr(BUF, "\"type\":\"not_supported_error\"") != NULL);
}

static void test_W26_metrics(void) {
    SETUP("--runtime", "server");
    adv(300);
    get("/metrics");
    CHECK_EQ_INT(R.status, 501);
    SETUP("--runtime", "server", "--metrics");
    adv(300);
    get("/metrics");
    CHECK_EQ_INT(R.status, 200);
    CHECK(strstr(R.content_type, "version=0.0.4") != NULL);
    CHECK(strstr(BUF, "llamacpp:prompt_tokens_total") != NULL);
}

static void test_W27_server_sleep(void) {
    uint32_t tk;
    uint64_t t0;
    SETUP("--runtime", "server", "--sleep-idle-seconds", "2", "--wake-ms", "80");
    adv(300 + 2000);
    CHECK_EQ_INT(S->m[0].state, RSIM_SLEEPING);
    get("/health");
    CHECK_EQ_INT(R.status, 200);
    get("/props");
    CHECK(strstr(BUF, "\"is_sleeping\":true") != NULL);
    CHECK_EQ_INT(S->m[0].state, RSIM_SLEEPING);
    t0 = NOW;
    tk = (get("/slots"), R.ticket);  /* /slots is a task: wakes */
    CHECK_EQ_INT(wait_reply(tk, 1000), 200);
    CHECK(NOW - t0 >= 80);
    CHECK_EQ_INT(S->m[0].state, RSIM_LOADED);
}

static void test_W28_server_errors_stream(void) {
    uint32_t tk;
    int chunks = 0, pings = 0;
    SETUP("--runtime", "server");
    adv(300);
    get("/nope");
    CHECK_EQ_INT(R.status, 404);
    post("/completion", "{bad");
    CHECK_EQ_INT(R.status, 500);
    CHECK(strstr(BUF, "parse_error") != NULL);
    CHECK_EQ_INT(post("/completion", "{\"prompt\":\"x\",\"stream\":true}"), RSIM_DEFER);
    tk = R.ticket;
    CHECK_EQ_INT(wait_reply(tk, 10), 200);
    while (NOW < 2000) {
        while (rsim_pull(S, NOW, &R) > 0)
            if (R.ticket == tk && R.action == RSIM_CHUNK && BUF[0] == ':') pings++;
            else if (R.ticket == tk && R.action == RSIM_CHUNK) {
                chunks++;
                if (chunks == RSIM_NTOK + 1) CHECK(strstr(BUF, "\"stop\":true") != NULL);
            }
        NOW++;
    }
    CHECK_EQ_INT(chunks, RSIM_NTOK + 1);
    CHECK_EQ_INT(pings, july() ? 0 : 1); /* later: the one that opens it (a 1 s interval) */
}

/* ---------------- Ollama ---------------- */
#define OLLAMA "--runtime", "ollama", "--load-ms", "200", "--model", "id=llama3.2,size=2G", \
    "--model", "id=qwen3:8b,size=5G", "--model", "id=gemma3,size=6G"

static const char *ps_names(void) {
    static char out[512];
    const char *p = BUF;
    out[0] = 0;
    get("/api/ps");
    while ((p = strstr(p, "{\"name\":\"")) != NULL) {
        p += 9;
        snprintf(out + strlen(out), sizeof out - strlen(out), "%.*s ", (int)strcspn(p, "\""), p);
    }
    return out;
}

static void test_W30_ollama_root(void) {
    SETUP(OLLAMA);
    get("/");
    CHECK_EQ_INT(R.status, 200);
    CHECK_EQ_STR(BUF, "Ollama is running");
    CHECK(R.server == NULL);
    get("/api/version");
    CHECK_EQ_STR(BUF, "{\"version\":\"0.12.6\"}");
}

static void test_W31_tags(void) {
    SETUP(OLLAMA);
    get("/api/tags");
    CHECK(valid_json());
    CHECK(strstr(BUF, "\"name\":\"llama3.2:latest\",\"model\":\"llama3.2:latest\"") != NULL);
    CHECK(strstr(BUF, "\"name\":\"qwen3:8b\"") != NULL);
    CHECK(rsim_find(S, "llama3.2:latest") == rsim_find(S, "llama3.2"));
}

static void test_W32_W33_load_unload(void) {
    uint32_t tk;
    uint64_t t0;
    SETUP(OLLAMA);
    t0 = NOW;
    CHECK_EQ_INT(post("/api/generate", "{\"model\":\"llama3.2\"}"), RSIM_DEFER);
    tk = R.ticket;
    CHECK_EQ_STR(ps_names(), "llama3.2:latest ");        /* listed while loading */
    CHECK_EQ_INT(wait_reply(tk, 1000), 200);
    CHECK(NOW - t0 >= 200);
    CHECK(strstr(BUF, "{\"model\":\"llama3.2\",\"created_at\":\"") == BUF);   /* echoed as sent */
    CHECK(strstr(BUF, "\"response\":\"\",\"done\":true,\"done_reason\":\"load\"}") != NULL);
    get("/api/ps");
    CHECK(valid_json());
    CHECK(strstr(BUF, "\"size_vram\":2147483648,\"context_length\":4096") != NULL);
    CHECK(strstr(BUF, "\"expires_at\":\"2026-11-29T23:11:41.200000000Z\"") != NULL);   /* epoch + 5 min keep-alive */
    /* keep_alive -1: centuries ahead, and sorted first */
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"qwen3:8b\",\"keep_alive\":-1}"), 1000), 200);
    CHECK_EQ_STR(ps_names(), "qwen3:8b llama3.2:latest ");
    CHECK(strstr(BUF, "\"expires_at\":\"2319-") != NULL);
    /* unload: answered at once, lingers briefly, then gone */
    CHECK_EQ_INT(post("/api/generate", "{\"model\":\"llama3.2\",\"keep_alive\":0}"), RSIM_RESPOND);
    CHECK_EQ_INT(R.status, 200);
    CHECK(strstr(BUF, "\"done_reason\":\"unload\"") != NULL);
    CHECK_EQ_STR(ps_names(), "qwen3:8b llama3.2:latest ");
    adv(50);
    CHECK_EQ_STR(ps_names(), "qwen3:8b ");
    post("/api/generate", "{\"model\":\"gemma3\",\"keep_alive\":0}");   /* not loaded: still 200 */
    CHECK_EQ_INT(R.status, 200);
    /* /api/chat with no messages loads too */
    CHECK_EQ_INT(finish(post("/api/chat", "{\"model\":\"gemma3\",\"messages\":[]}"), 1000), 200);
    CHECK(strstr(BUF, "\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true,\"done_reason\":\"load\"") != NULL);
    /* a prompt generates */
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"gemma3\",\"prompt\":\"hi\",\"stream\":false}"), 1000), 200);
    CHECK(strstr(BUF, "\"response\":\"This is a simulated reply.\"") != NULL);
    CHECK(strstr(BUF, "\"done_reason\":\"stop\"") != NULL);
    /* streamed (the default): NDJSON lines, the last one done */
    {
        int lines = 0, done = 0;
        CHECK_EQ_INT(post("/api/chat", "{\"model\":\"gemma3\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"), RSIM_DEFER);
        tk = R.ticket;
        CHECK_EQ_INT(wait_reply(tk, 100), 200);
        CHECK_EQ_INT(R.action, RSIM_STREAM);
        CHECK_EQ_STR(R.content_type, "application/x-ndjson");
        while (!done && NOW < 100000) {
            while (rsim_pull(S, NOW, &R) > 0) {
                if (R.ticket != tk) continue;
                if (R.action == RSIM_END) done = 1;
                if (R.action != RSIM_CHUNK) continue;
                lines++;
                CHECK(R.body_len > 2 && BUF[R.body_len - 1] == '\n' && strchr(BUF, '\n') == BUF + R.body_len - 1);
                if (lines == 1) CHECK(strstr(BUF, "\"message\":{\"role\":\"assistant\",\"content\":\"This\"},\"done\":false}") != NULL);
                if (lines == RSIM_NTOK + 1) CHECK(strstr(BUF, "\"done\":true,\"done_reason\":\"stop\"") != NULL);
            }
            NOW++;
        }
        CHECK(done);
        CHECK_EQ_INT(lines, RSIM_NTOK + 1);
    }
}

static void test_W34_ollama_errors(void) {
    SETUP(OLLAMA, "--fail-loads", "1");
    post("/api/generate", "{\"model\":\"nope\"}");
    CHECK_EQ_INT(R.status, 404);
    CHECK_EQ_STR(BUF, "{\"error\":\"model 'nope' not found\"}");
    post("/api/generate", NULL);
    CHECK_EQ_INT(R.status, 400);
    CHECK_EQ_STR(BUF, "{\"error\":\"missing request body\"}");
    post("/api/generate", "xyz");
    CHECK_EQ_INT(R.status, 400);
    CHECK_EQ_STR(BUF, "{\"error\":\"invalid character 'x' looking for beginning of value\"}");
    post("/api/generate", "{\"model\":\"llama3.2\",\"keep_alive\":\"5 minutes\"}");
    CHECK_EQ_INT(R.status, 400);
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"llama3.2\"}"), 1000), 500);
    CHECK(strstr(BUF, "{\"error\":\"model requires more system memory") == BUF);
    CHECK_EQ_STR(ps_names(), "");
    get("/api/nope");
    CHECK_EQ_INT(R.status, 404);
    SETUP(OLLAMA, "--queue-max", "1");
    post("/api/generate", "{\"model\":\"llama3.2\"}");
    post("/api/generate", "{\"model\":\"gemma3\"}");
    CHECK_EQ_INT(R.status, 503);
    CHECK_EQ_STR(BUF, "{\"error\":\"server busy, please try again.  maximum pending requests exceeded\"}");
}

static void test_W35_keep_alive_num_ctx(void) {
    SETUP(OLLAMA);
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"llama3.2\",\"keep_alive\":\"1m\"}"), 1000), 200);
    adv(59999);
    CHECK_EQ_STR(ps_names(), "llama3.2:latest ");
    adv(1);
    CHECK_EQ_STR(ps_names(), "");
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"llama3.2\",\"keep_alive\":30}"), 1000), 200);
    /* a later request's keep_alive changes the loaded model's expiry */
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"llama3.2\",\"keep_alive\":\"2h\"}"), 1000), 200);
    adv(60000);
    CHECK_EQ_STR(ps_names(), "llama3.2:latest ");
    /* a different num_ctx reloads */
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"llama3.2\",\"options\":{\"num_ctx\":8192}}"), 1000), 200);
    get("/api/ps");
    CHECK(strstr(BUF, "\"context_length\":8192") != NULL);
}

/* Ollama's keep_alive changes only when a request carries it (sched.go useLoadedRunner):
   a request without it leaves an earlier -1 alone; JSON null counts as absent. */
static void test_ollama_keep_alive_sticks(void) {
    SETUP(OLLAMA);
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"llama3.2\",\"keep_alive\":-1}"), 1000), 200);
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"llama3.2\",\"prompt\":\"hi\",\"stream\":false}"), 1000), 200);
    CHECK_EQ_INT(finish(post("/api/chat", "{\"model\":\"llama3.2\",\"keep_alive\":null,\"messages\":[]}"), 1000), 200);
    get("/api/ps");
    CHECK(strstr(BUF, "\"expires_at\":\"2319-") != NULL); /* still forever */
    adv(3600000);
    CHECK_EQ_STR(ps_names(), "llama3.2:latest ");
    /* one that carries it does change it */
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"llama3.2\",\"keep_alive\":\"1m\"}"), 1000), 200);
    adv(60001);
    CHECK_EQ_STR(ps_names(), "");
    /* a fresh load without it takes the default (5 min) */
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"llama3.2\"}"), 1000), 200);
    adv(299000);
    CHECK_EQ_STR(ps_names(), "llama3.2:latest ");
    adv(1001);
    CHECK_EQ_STR(ps_names(), "");
}

/* keep_alive 0 with a prompt on a cold model: the runner loads, answers, then goes
   (Ollama expires a runner only once no request holds or waits for it). rsd-sim unloaded
   it the moment it loaded, before the waiting request was served, and loaded it again
   without end (found by fuzz_sim). */
static void test_ollama_keep_alive_zero_serves_first(void) {
    SETUP(OLLAMA);
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"llama3.2\",\"prompt\":\"hi\",\"stream\":false,\"keep_alive\":0}"),
                        10000), 200);
    CHECK(strstr(BUF, "\"done\":true") != NULL && strstr(BUF, "\"done_reason\":\"stop\"") != NULL);
    CHECK_EQ_STR(ps_names(), "");
    CHECK_EQ_INT(finish(post("/api/chat", "{\"model\":\"llama3.2\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                             "\"stream\":false,\"keep_alive\":\"0s\"}"), 10000), 200);
    CHECK_EQ_STR(ps_names(), "");
}

/* The final generate / chat objects carry api.Metrics in Ollama's order (generate its
   context first); /api/show has modified_at; /api/embed and /api/embeddings answer as
   Ollama's EmbedHandler and EmbeddingsHandler do. */
static void test_ollama_final_fields_embed(void) {
    rsd_json_doc d;
    static rsd_json_tok toks[512];
    int e, k, n;
    int64_t v, load;
    double x, sum;
    SETUP(OLLAMA);
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"llama3.2\",\"prompt\":\"hello there\",\"stream\":false}"), 2000), 200);
    CHECK(strstr(BUF, "\"done\":true,\"done_reason\":\"stop\",\"context\":[") != NULL);
    CHECK(strstr(BUF, "],\"total_duration\":") != NULL);
    REQUIRE(rsd_json_parse(&d, BUF, strlen(BUF), toks, 512) > 0);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, 0, "load_duration"), &load) == RSD_OK && load >= 200000000); /* --load-ms 200 */
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, 0, "total_duration"), &v) == RSD_OK && v > load);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, 0, "prompt_eval_count"), &v) == RSD_OK && v > 0);
    CHECK_EQ_INT(rsd_json_size(&d, rsd_json_find(&d, 0, "context")), v + RSIM_NTOK);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, 0, "prompt_eval_duration"), &v) == RSD_OK && v > 0);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, 0, "eval_count"), &v) == RSD_OK && v == RSIM_NTOK);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, 0, "eval_duration"), &v) == RSD_OK && v > 0);
    /* loaded already: a short load_duration */
    CHECK_EQ_INT(finish(post("/api/chat", "{\"model\":\"llama3.2\",\"stream\":false,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"), 2000), 200);
    CHECK(strstr(BUF, "\"done\":true,\"done_reason\":\"stop\",\"total_duration\":") != NULL);
    CHECK(strstr(BUF, "\"context\"") == NULL);
    REQUIRE(rsd_json_parse(&d, BUF, strlen(BUF), toks, 512) > 0);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, 0, "load_duration"), &v) == RSD_OK && v > 0 && v < 200000000);
    CHECK(rsd_json_find(&d, 0, "prompt_eval_duration") >= 0 && rsd_json_find(&d, 0, "eval_duration") >= 0);
    /* show */
    post("/api/show", "{\"model\":\"llama3.2\"}");
    CHECK_EQ_INT(R.status, 200);
    CHECK(strstr(BUF, "\"modified_at\":\"2026-") != NULL);
    /* /api/embed: a vector of unit length per input, with the durations */
    CHECK_EQ_INT(finish(post("/api/embed", "{\"model\":\"qwen3:8b\",\"input\":[\"a\",\"b c\"]}"), 2000), 200);
    CHECK(strstr(BUF, "{\"model\":\"qwen3:8b\",\"embeddings\":[[") == BUF);
    REQUIRE(rsd_json_parse(&d, BUF, strlen(BUF), toks, 512) > 0);
    e = rsd_json_find(&d, 0, "embeddings");
    CHECK_EQ_INT(rsd_json_size(&d, e), 2);
    n = rsd_json_at(&d, e, 0);
    sum = 0;
    for (k = rsd_json_child(&d, n); k >= 0; k = rsd_json_next(&d, k))
        if (rsd_json_double(&d, k, &x) == RSD_OK) sum += x * x;
    CHECK(sum > 0.999 && sum < 1.001);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, 0, "load_duration"), &v) == RSD_OK && v >= 200000000);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, 0, "total_duration"), &v) == RSD_OK && v > 0);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, 0, "prompt_eval_count"), &v) == RSD_OK && v > 0);
    CHECK(strstr(ps_names(), "qwen3:8b") != NULL); /* it loaded the model */
    CHECK_EQ_INT(finish(post("/api/embed", "{\"model\":\"qwen3:8b\",\"input\":\"a\"}"), 2000), 200);
    REQUIRE(rsd_json_parse(&d, BUF, strlen(BUF), toks, 512) > 0);
    CHECK_EQ_INT(rsd_json_size(&d, rsd_json_find(&d, 0, "embeddings")), 1);
    CHECK_EQ_INT(finish(post("/api/embed", "{\"model\":\"qwen3:8b\",\"input\":[]}"), 2000), 200);
    CHECK_EQ_STR(BUF, "{\"model\":\"qwen3:8b\",\"embeddings\":[]}");
    post("/api/embed", "{\"model\":\"qwen3:8b\",\"input\":[1]}");
    CHECK_EQ_INT(R.status, 400);
    CHECK_EQ_STR(BUF, "{\"error\":\"invalid input type\"}");
    post("/api/embed", "{\"model\":\"nope\",\"input\":\"a\"}");
    CHECK_EQ_INT(R.status, 404);
    CHECK_EQ_STR(BUF, "{\"error\":\"model 'nope' not found\"}");
    /* /api/embeddings: the older one, one vector, no durations */
    CHECK_EQ_INT(finish(post("/api/embeddings", "{\"model\":\"qwen3:8b\",\"prompt\":\"a\"}"), 2000), 200);
    CHECK(strstr(BUF, "{\"embedding\":[") == BUF && strstr(BUF, "duration") == NULL);
    REQUIRE(rsd_json_parse(&d, BUF, strlen(BUF), toks, 512) > 0);
    CHECK_EQ_INT(rsd_json_size(&d, rsd_json_find(&d, 0, "embedding")), 8);
    CHECK_EQ_INT(finish(post("/api/embeddings", "{\"model\":\"qwen3:8b\",\"prompt\":\"\"}"), 2000), 200);
    CHECK_EQ_STR(BUF, "{\"embedding\":[]}");
    post("/api/embeddings", "{\"model\":\"nope\",\"prompt\":\"a\"}");
    CHECK_EQ_INT(R.status, 404);
    CHECK_EQ_STR(BUF, "{\"error\":\"model \\\"nope\\\" not found, try pulling it first\"}");
}

static void test_W36_scheduler(void) {
    SETUP(OLLAMA, "--max-loaded", "2");
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"llama3.2\",\"keep_alive\":\"10m\"}"), 1000), 200);
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"qwen3:8b\",\"keep_alive\":\"1m\"}"), 1000), 200);
    /* full: the idle runner with the shortest keep_alive goes (not LRU) */
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"gemma3\"}"), 1000), 200);
    CHECK(strstr(ps_names(), "qwen3:8b") == NULL);
    CHECK(strstr(ps_names(), "llama3.2:latest") != NULL);
    /* memory budget forces evictions too */
    SETUP(OLLAMA, "--mem-budget", "8G");
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"qwen3:8b\"}"), 1000), 200);
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"gemma3\"}"), 1000), 200);
    CHECK_EQ_STR(ps_names(), "gemma3:latest ");
}

static void test_W37_oom_evicts_all_and_retries(void) {
    SETUP(OLLAMA);
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"llama3.2\"}"), 1000), 200);
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"qwen3:8b\"}"), 1000), 200);
    post("/_sim/fail-loads", "{\"count\":1}");
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"gemma3\"}"), 1000), 200);
    CHECK_EQ_STR(ps_names(), "gemma3:latest ");
    post("/_sim/fail-loads", "{\"count\":2}");   /* the retry fails too: 500 */
    CHECK_EQ_INT(finish(post("/api/generate", "{\"model\":\"llama3.2\"}"), 1000), 500);
    CHECK_EQ_STR(ps_names(), "");
}

static void test_W37_evicted_between(void) {
    SETUP(OLLAMA, "--evict-after-list", "llama3.2");
    post("/api/generate", "{\"model\":\"llama3.2\"}");
    CHECK_EQ_INT(wait_reply(R.ticket, 1000), 200);
    CHECK_EQ_STR(ps_names(), "llama3.2:latest ");  /* the listing shows it ... */
    CHECK_EQ_STR(ps_names(), "");                  /* ... and then it is gone */
}

/* ---------------- LM Studio ---------------- */
#define LMS "--runtime", "lmstudio", "--load-ms", "200", "--model", "id=google/gemma-4,size=10G,ctx=4096", \
    "--model", "id=qwen/coder,size=8G", "--model", "id=nomic/embed,size=1G,embedding=1", \
    "--model", "id=google/gemma-4,host=zbook,loaded=1"

static void test_W38_models(void) {
    const char *e;
    SETUP(LMS);
    get("/api/v1/models");
    CHECK(valid_json());
    CHECK(strncmp(BUF, "{\"models\":[{\"type\":\"llm\",\"publisher\":\"google\",\"key\":\"google/gemma-4\"", 67) == 0);
    e = strstr(BUF, "\"key\":\"nomic/embed\"");
    REQUIRE(e != NULL);
    CHECK(strstr(e, "\"type\":\"embedding\"") == NULL || 1);
    CHECK(strstr(BUF, "{\"type\":\"embedding\",\"publisher\":\"nomic\",\"key\":\"nomic/embed\",\"display_name\":\"nomic/embed\",\"quantization\"") != NULL);
    /* LM Link duplicate: same key twice, the peer's instance listed on the second entry */
    CHECK(strstr(strstr(BUF, "\"key\":\"google/gemma-4\"") + 1, "\"key\":\"google/gemma-4\"") != NULL);
    CHECK(strstr(BUF, "\"loaded_instances\":[{\"id\":\"google/gemma-4-zbook\",\"config\":{\"context_length\":4096") != NULL);
    CHECK(strstr(BUF, "\"loaded_instances\":[]") != NULL);
}

static void test_W39_W40_load(void) {
    uint32_t tk;
    uint64_t t0;
    SETUP(LMS);
    t0 = NOW;
    CHECK_EQ_INT(post("/api/v1/models/load", "{\"model\":\"qwen/coder\",\"context_length\":16384,\"echo_load_config\":true}"), RSIM_DEFER);
    tk = R.ticket;
    CHECK_EQ_INT(wait_reply(tk, 1000), 200);
    CHECK(NOW - t0 >= 200);
    CHECK_EQ_STR(BUF, "{\"type\":\"llm\",\"instance_id\":\"qwen/coder\",\"load_time_seconds\":0.2,\"status\":\"loaded\","
                      "\"load_config\":{\"context_length\":16384,\"eval_batch_size\":512,\"flash_attention\":true,\"offload_kv_cache_to_gpu\":true}}");
    CHECK_EQ_INT(finish(post("/api/v1/models/load", "{\"model\":\"qwen/coder\"}"), 1000), 200);
    CHECK(strstr(BUF, "\"instance_id\":\"qwen/coder:2\"") != NULL);
    CHECK(strstr(BUF, "load_config") == NULL);
    get("/api/v1/models");
    CHECK(strstr(BUF, "{\"id\":\"qwen/coder\",\"config\":{\"context_length\":16384") != NULL);
    CHECK(strstr(BUF, "{\"id\":\"qwen/coder:2\"") != NULL);
    SETUP(LMS, "--idempotent-load", "--legacy-load-shape");
    CHECK_EQ_INT(finish(post("/api/v1/models/load", "{\"model\":\"qwen/coder\"}"), 1000), 200);
    CHECK(strncmp(BUF, "{\"model_instance_id\":\"qwen/coder\",\"load_time_seconds\":", 54) == 0);
    CHECK(strstr(BUF, "\"config\":{\"context_length\":4096") != NULL);
    post("/api/v1/models/load", "{\"model\":\"qwen/coder\"}");
    CHECK_EQ_INT(R.status, 200);
    CHECK(strstr(BUF, "\"model_instance_id\":\"qwen/coder\"") != NULL);
}

static void test_W41_unload(void) {
    SETUP(LMS);
    CHECK_EQ_INT(finish(post("/api/v1/models/load", "{\"model\":\"qwen/coder\"}"), 1000), 200);
    post("/api/v1/models/unload", "{\"instance_id\":\"qwen/coder\"}");
    CHECK_EQ_INT(R.status, 200);
    CHECK_EQ_STR(BUF, "{\"instance_id\":\"qwen/coder\"}");
    get("/api/v1/models");
    CHECK(strstr(BUF, "\"id\":\"qwen/coder\"") == NULL);
    post("/api/v1/models/unload", "{\"instance_id\":\"qwen/coder\"}");
    CHECK_EQ_INT(R.status, 404);
    CHECK(strstr(BUF, "{\"error\":{\"type\":\"model_not_found\",\"message\":") == BUF);
    post("/api/v1/models/unload", "{\"instance_id\":\"google/gemma-4-zbook\"}"); /* a peer's: not ours */
    CHECK_EQ_INT(R.status, 404);
}

static void test_W42_W43_errors(void) {
    SETUP(LMS);
    post("/v1/models/unload", "{}");
    CHECK_EQ_INT(R.status, 200);
    CHECK_EQ_STR(BUF, "{\"error\":\"Unexpected endpoint or method. (POST /v1/models/unload)\"}");
    post("/api/v1/models/load", "{}");
    CHECK_EQ_INT(R.status, 400);
    CHECK_EQ_STR(BUF, "{\"error\":{\"type\":\"invalid_request\",\"message\":\"\\\"model\\\" is required\",\"code\":\"missing_required_parameter\",\"param\":\"model\"}}");
    post("/api/v1/models/load", "{\"model\":\"nope\"}");
    CHECK_EQ_INT(R.status, 404);
    SETUP(LMS, "--unknown-route-404", "--error-string", "--fail-loads", "1");
    get("/nope");
    CHECK_EQ_INT(R.status, 404);
    post("/api/v1/models/load", "{\"model\":\"nope\"}");
    CHECK_EQ_STR(BUF, "{\"error\":\"Model 'nope' not found\"}");
    post("/api/v1/models/load", "{\"model\":\"qwen/coder\"}");
    CHECK_EQ_INT(R.status, 500);
    CHECK_EQ_STR(BUF, "{\"error\":\"Failed to load model\"}");
}

static void test_W44_v0(void) {
    SETUP(LMS);
    get("/api/v0/models");
    CHECK(valid_json());
    CHECK(strstr(BUF, "{\"id\":\"qwen/coder\",\"object\":\"model\",\"type\":\"llm\",\"publisher\":\"qwen\",\"arch\":\"llama\",\"compatibility_type\":\"gguf\",\"quantization\":\"Q4_K_M\",\"state\":\"not-loaded\"") != NULL);
    CHECK_EQ_INT(finish(post("/api/v1/models/load", "{\"model\":\"qwen/coder\",\"context_length\":8192}"), 1000), 200);
    get("/api/v0/models/qwen/coder");
    CHECK(strstr(BUF, "\"state\":\"loaded\"") != NULL && strstr(BUF, "\"loaded_context_length\":8192") != NULL);
    SETUP(LMS, "--tier", "0.3");
    get("/api/v1/models");
    CHECK_EQ_INT(R.status, 200);
    CHECK_EQ_STR(BUF, "{\"error\":\"Unexpected endpoint or method. (GET /api/v1/models)\"}");
    post("/api/v1/models/load", "{\"model\":\"qwen/coder\"}");
    CHECK(strstr(BUF, "Unexpected endpoint") != NULL);
    get("/api/v0/models");
    CHECK(strstr(BUF, "\"data\":[") != NULL);
}

static void test_W45_jit(void) {
    SETUP(LMS, "--gen-ms", "10");
    CHECK_EQ_INT(finish(post("/v1/chat/completions", "{\"model\":\"qwen/coder\",\"ttl\":5}"), 1000), 200);
    CHECK(strstr(BUF, "\"model\":\"qwen/coder\"") != NULL);
    get("/api/v1/models");
    CHECK(strstr(BUF, "{\"id\":\"qwen/coder\"") != NULL);
    /* auto-evict: a new JIT load unloads the earlier JIT model */
    CHECK_EQ_INT(finish(post("/v1/chat/completions", "{\"model\":\"google/gemma-4\"}"), 1000), 200);
    get("/api/v1/models");
    CHECK(strstr(BUF, "{\"id\":\"qwen/coder\"") == NULL);
    CHECK(strstr(BUF, "{\"id\":\"google/gemma-4\",") != NULL);
    /* TTL: 5 s idle removes it; explicit loads have none */
    SETUP(LMS, "--gen-ms", "10");
    CHECK_EQ_INT(finish(post("/api/v1/models/load", "{\"model\":\"google/gemma-4\"}"), 1000), 200);
    CHECK_EQ_INT(finish(post("/api/v1/chat", "{\"model\":\"qwen/coder\",\"ttl\":5,\"input\":\"hi\"}"), 1000), 200);
    CHECK(strstr(BUF, "\"model_instance_id\":\"qwen/coder\"") != NULL);
    adv(4999);
    get("/api/v1/models");
    CHECK(strstr(BUF, "{\"id\":\"qwen/coder\"") != NULL);
    adv(1);
    get("/api/v1/models");
    CHECK(strstr(BUF, "{\"id\":\"qwen/coder\"") == NULL);
    adv(10000000);
    get("/api/v1/models");
    CHECK(strstr(BUF, "{\"id\":\"google/gemma-4\",") != NULL);
}

static void test_W46_auth(void) {
    SETUP(LMS, "--api-key", "tok");
    get("/api/v1/models");
    CHECK_EQ_INT(R.status, 401);
    CHECK(strstr(BUF, "{\"error\":{\"type\":\"invalid_request\",\"message\":") == BUF);
    hreq2("GET", "/api/v1/models", NULL, NULL, "tok");   /* X-Api-Key is a llama.cpp thing */
    CHECK_EQ_INT(R.status, 401);
    hreq2("GET", "/api/v1/models", NULL, "Bearer tok", NULL);
    CHECK_EQ_INT(R.status, 200);
    get("/lmstudio-greeting");
    CHECK_EQ_INT(R.status, 200);
    CHECK_EQ_STR(BUF, "{\"lmstudio\":true}");
    SETUP(LMS, "--no-greeting");
    get("/lmstudio-greeting");
    CHECK_EQ_STR(BUF, "{\"service\":\"not-lmstudio\"}");
}

static void test_W47_jit_race(void) {
    uint32_t t1, t2;
    SETUP(LMS, "--jit-race");
    t1 = (post("/v1/chat/completions", "{\"model\":\"qwen/coder\"}"), R.ticket);
    t2 = (post("/v1/chat/completions", "{\"model\":\"qwen/coder\"}"), R.ticket);
    CHECK_EQ_INT(wait_reply(t1, 1000), 200);
    CHECK_EQ_INT(wait_reply(t2, 1000), 200);
    get("/api/v1/models");
    CHECK(strstr(BUF, "{\"id\":\"qwen/coder\"") != NULL && strstr(BUF, "{\"id\":\"qwen/coder:2\"") != NULL);
    SETUP(LMS);
    t1 = (post("/v1/chat/completions", "{\"model\":\"qwen/coder\"}"), R.ticket);
    t2 = (post("/v1/chat/completions", "{\"model\":\"qwen/coder\"}"), R.ticket);
    CHECK_EQ_INT(wait_reply(t1, 1000), 200);
    CHECK_EQ_INT(wait_reply(t2, 1000), 200);
    get("/api/v1/models");
    CHECK(strstr(BUF, "{\"id\":\"qwen/coder:2\"") == NULL);
}

static void test_lms_vram_507(void) {
    SETUP(LMS, "--vram", "16G");
    CHECK_EQ_INT(finish(post("/api/v1/models/load", "{\"model\":\"google/gemma-4\"}"), 1000), 200);
    post("/api/v1/models/load", "{\"model\":\"qwen/coder\"}");
    CHECK_EQ_INT(R.status, 507);
    CHECK(strstr(BUF, "\"message\":\"insufficient VRAM\"") != NULL);
    post("/api/v1/models/unload", "{\"instance_id\":\"google/gemma-4\"}");
    CHECK_EQ_INT(finish(post("/api/v1/models/load", "{\"model\":\"qwen/coder\"}"), 1000), 200);
    SETUP(LMS, "--fail-loads", "1", "--fail-load-status", "507", "--error-string");
    post("/api/v1/models/load", "{\"model\":\"qwen/coder\"}");
    CHECK_EQ_INT(R.status, 507);
    CHECK_EQ_STR(BUF, "{\"error\":\"insufficient VRAM\"}");
}

static void test_sim_log_and_control(void) {
    SETUP(ROUTER2);
    get("/health");
    post("/models/load", "{\"model\":\"a\"}");
    get("/_sim/log");
    CHECK(valid_json());
    CHECK(strstr(BUF, "{\"total\":2,\"entries\":[{\"method\":\"GET\",\"path\":\"/health\",\"model\":\"\",\"status\":200") == BUF);
    CHECK_EQ_INT(rsim_log_count(S, NULL, NULL, NULL, 0), 2);
    post("/_sim/crash", "{\"model\":\"nope\"}");
    CHECK_EQ_INT(R.status, 404);
    adv(300);
    post("/_sim/busy", "{\"model\":\"a\",\"count\":1}");
    CHECK_EQ_INT(S->m[0].inflight, 1);
    CHECK_EQ_INT(rsim_log_count(S, NULL, NULL, NULL, 0), 2);  /* control routes are not logged */
}

static void test_small_buffer(void) {
    rsim_req q;
    char small[16];
    SETUP(ROUTER2);
    memset(&q, 0, sizeof q);
    q.method = "GET";
    q.target = "/models";
    R.body = small;
    R.body_cap = sizeof small;
    CHECK_EQ_INT(rsim_handle(S, &q, NOW, &R), -1);
    CHECK_EQ_INT(R.status, 500);
    CHECK(R.body_len < sizeof small);
}


/* Random traffic on every runtime: no crash (ASan/UBSan), every deferred request is
   answered, in-flight counts return to zero, tickets are all given back. */
static void test_random_traffic(void) {
    static const char *const paths[] = {
        "/health", "/models", "/v1/models", "/props", "/props?model=a", "/slots", "/slots?model=b&autoload=false",
        "/metrics?model=a", "/models/load", "/models/unload", "/v1/chat/completions", "/completion", "/tokenize",
        "/api/tags", "/api/ps", "/api/generate", "/api/chat", "/api/show", "/api/v1/models", "/api/v1/models/load",
        "/api/v1/models/unload", "/api/v0/models", "/api/v1/chat", "/nope", "/", "/_sim/log"};
    static const char *const bodies[] = {
        NULL, "", "{", "[]", "{}", "{\"model\":\"a\"}", "{\"model\":\"b\",\"stream\":true}", "{\"model\":\"c\"}",
        "{\"model\":\"x\",\"keep_alive\":0}", "{\"model\":\"a\",\"keep_alive\":\"1s\",\"prompt\":\"hi\"}",
        "{\"model\":\"b\",\"options\":{\"num_ctx\":1024}}", "{\"instance_id\":\"a\"}", "{\"instance_id\":\"a:2\"}",
        "{\"model\":\"\\u00e9\\ud83d\\ude00\"}", "{\"model\":\"a\",\"ttl\":1,\"messages\":[{\"role\":\"user\"}]}", "nul",
        "{\"model\":17}", "{\"model\":\"a\",\"echo_load_config\":true,\"context_length\":-5}"};
    static const char *const rts[] = {"router", "server", "ollama", "lmstudio"};
    uint32_t seed = 12345;
    int rt, n, i;
    for (rt = 0; rt < 4; rt++) {
        const char *av[] = {"--runtime", NULL, "--models-max", "2", "--max-loaded", "2", "--sleep-idle-seconds", "1",
                            "--model", "id=a,alias=x", "--model", "b", "--model", "c", "--fail-loads", "3", "--jit-race",
                            "--vram", "9G", "--parallel", "2", "--jit-ttl-s", "2"};
        av[1] = rts[rt];
        if (rt == 1) av[15] = "0"; /* a failed load would end the single server */
        setup((int)(sizeof av / sizeof av[0]), av);
        for (n = 0; n < 3000; n++) {
            int a;
            seed = seed * 1103515245u + 12345u;
            i = (int)((seed >> 8) % 4);
            a = hreq(i == 0 ? "GET" : i == 1 ? "DELETE" : "POST", paths[(seed >> 12) % (sizeof paths / sizeof paths[0])],
                     bodies[(seed >> 20) % (sizeof bodies / sizeof bodies[0])]);
            CHECK(a >= 0);
            if (R.action == RSIM_RESPOND) CHECK(R.status >= 200 && R.status < 600);
            if (R.action == RSIM_RESPOND && !strcmp(R.content_type, RSIM_CT_JSON) && strncmp(BUF, "proxy error", 11))
                CHECK(valid_json());
            if ((seed >> 28) % 3 == 0 && R.action == RSIM_DEFER && (seed & 1)) rsim_cancel(S, R.ticket, NOW);
            if ((seed >> 27) % 5 == 0) rsim_crash(S, "b", 3, NOW);
            NOW += (seed >> 16) % 97;
            R.body = BUF;
            R.body_cap = sizeof BUF;
            while (rsim_pull(S, NOW, &R) > 0) CHECK(R.action != RSIM_RESPOND || (R.status >= 200 && R.status < 600));
        }
        for (n = 0; n < S->nmodels; n++) rsim_busy(S, S->m[n].id, 0, NOW);
        NOW += 3600 * 1000;
        for (n = 0; n < 200000; n++) {
            uint64_t w;
            while (rsim_pull(S, NOW, &R) > 0) {}
            w = rsim_next_wake_ms(S);
            if (w == (uint64_t)-1) break;
            NOW = w > NOW ? w : NOW + 1;
        }
        for (i = 0; i < RSIM_MAX_TICKETS; i++) /* what is left: hung, SSE subscribers only */
            CHECK(!S->t[i].id || S->t[i].op == RSIM_OP_SSE || S->t[i].op == RSIM_OP_HANG);
        for (i = 0; i < S->nmodels; i++) CHECK_EQ_INT(S->m[i].inflight, 0);
        /* the traffic reached the interesting states, not only error paths */
        if (getenv("RSD_TEST_VERBOSE"))
            printf("  %s: 200=%d 400=%d 404=%d 500=%d 503=%d pending=%d\n", rts[rt], rsim_log_count(S, NULL, NULL, NULL, 200),
                   rsim_log_count(S, NULL, NULL, NULL, 400), rsim_log_count(S, NULL, NULL, NULL, 404),
                   rsim_log_count(S, NULL, NULL, NULL, 500), rsim_log_count(S, NULL, NULL, NULL, 503),
                   rsim_log_count(S, NULL, NULL, NULL, RSIM_LOG_PENDING));
        CHECK(rsim_log_count(S, NULL, NULL, NULL, 200) > 50);
        CHECK_EQ_INT(rsim_log_count(S, NULL, NULL, NULL, RSIM_LOG_PENDING), 0);
    }
}

/* upstream-behaviour 2.5 (L26-L28): the reconciler's call sequences, as a client would
   drive them, polling GET /v1/models every 50 ms until loaded. */
static int poll_until_loaded(const char *id, int max_polls) {
    int k;
    for (k = 1; k <= max_polls; k++) {
        const char *st = rstate(id); /* one GET /models */
        if (!strcmp(st, "loaded")) return k;
        if (strstr(rentry(id), "\"failed\":true")) return -k;
        adv(50);
    }
    return 0;
}

static void test_L26_L28_sequences(void) {
    int polls;
    SETUP("--models-max", "2", "--load-ms", "300", "--model", "id=a,tags=pinned", "--model", "b", "--model", "c");
    /* L27 free slot: GET models, GET props, POST load, polls */
    get("/v1/models");
    get("/props");
    CHECK(strstr(BUF, "\"max_instances\":2") != NULL);
    post("/models/load", "{\"model\":\"a\"}");
    CHECK_EQ_INT(R.status, 200);
    polls = poll_until_loaded("a", 100);
    CHECK(polls >= 6 && polls <= 8); /* 300 ms at 50 ms */
    post("/models/load", "{\"model\":\"b\"}");
    CHECK(poll_until_loaded("b", 100) > 0);
    /* L28 full router: unload the victim (not the pinned a), then load, then poll */
    get("/v1/models");
    get("/props");
    post("/models/unload", "{\"model\":\"b\"}");
    CHECK_EQ_INT(R.status, 200);
    CHECK_EQ_INT(post("/models/load", "{\"model\":\"c\"}"), RSIM_DEFER); /* b still stopping: waits */
    CHECK_EQ_INT(wait_reply(R.ticket, 1000), 200);
    CHECK(poll_until_loaded("c", 100) > 0);
    /* July (wire.md 6.1): the stopping b still counts, so the router also unloads its LRU,
       the pinned a; later routers wait for b */
    CHECK_EQ_STR(rstate("a"), july() ? "unloaded" : "loaded");
    CHECK_EQ_INT(rsim_log_count(S, "POST", "/models/load", NULL, 200), 3);
    CHECK_EQ_INT(rsim_log_count(S, "POST", "/models/unload", "b", 200), 1);
    CHECK_EQ_INT(rsim_log_count(S, "GET", "/props", NULL, 200), 2);
    CHECK(rsim_log_count(S, "GET", "/models", NULL, 200) >= 8);
    CHECK_EQ_INT(rsim_log_count(S, "POST", NULL, NULL, 0), 4); /* 3 loads + 1 unload, nothing else */
}

/* July (wire.md 6.2, measured): a load at --models-max stops the LRU even while it
   streams: the stream stalls, the load answers when the child is killed at the stop
   timeout, the stream ends with the proxy error and no [DONE], the victim shows failed.
   Later routers never pick a busy victim: the load waits and the stream completes. */
static void test_gen_stream_victim(void) {
    uint32_t st, ld = 0;
    int chunks = 0, done = 0, proxy_err = 0, ended = 0;
    uint64_t t_load = 0, t_answer = 0, t_last_chunk = 0;
    SETUP("--models-max", "2", "--token-ms", "100", "--stop-timeout-ms", "10000", "--model", "a", "--model", "b",
          "--model", "c");
    post("/models/load", "{\"model\":\"b\"}");
    adv(10);
    post("/models/load", "{\"model\":\"a\"}");
    adv(400);
    CHECK_EQ_INT(post("/v1/chat/completions", "{\"model\":\"b\",\"stream\":true}"), RSIM_DEFER);
    st = R.ticket;
    CHECK_EQ_INT(wait_reply(st, 100), 200);
    CHECK(R.close_after);                  /* proxied: chunked, then the socket closes */
    CHECK(R.keep_alive && !strcmp(R.keep_alive, "timeout=5, max=100"));
    adv(150);
    CHECK_EQ_INT(finish(post("/v1/chat/completions", "{\"model\":\"a\"}"), 1000), 200); /* b is the LRU */
    for (;;) {
        uint64_t w;
        if (!ld && NOW >= 1000 + 410 + 200) {
            t_load = NOW;
            CHECK_EQ_INT(post("/models/load", "{\"model\":\"c\"}"), RSIM_DEFER);
            ld = R.ticket;
        }
        while (rsim_pull(S, NOW, &R) > 0) {
            if (R.ticket == ld && R.action == RSIM_RESPOND) { t_answer = NOW; CHECK_EQ_INT(R.status, 200); }
            if (R.ticket != st) continue;
            if (R.action == RSIM_CHUNK) {
                chunks++;
                if (strstr(BUF, "[DONE]")) done++;
                else if (!strcmp(BUF, "proxy error: Failed to read connection")) proxy_err++;
                else t_last_chunk = NOW;
            }
            if (R.action == RSIM_END) ended = 1;
        }
        if (ended && (t_answer || !ld)) break;
        w = rsim_next_wake_ms(S);
        if (w == (uint64_t)-1 || w > 1000 + 60000) break;
        NOW = w > NOW ? w : NOW + 1;
    }
    CHECK(ended);
    CHECK(t_answer > 0);
    if (july()) {
        CHECK_EQ_INT(done, 0);
        CHECK_EQ_INT(proxy_err, 1);
        CHECK(t_last_chunk <= t_load);           /* stalled from the stop on */
        CHECK(t_answer >= t_load + 10000);      /* answered when the child was killed */
        CHECK(strstr(rentry("b"), "\"value\":\"unloaded\",") != NULL);
        CHECK(strstr(rentry("b"), "\"exit_code\":1,\"failed\":true") != NULL);
    } else {
        CHECK_EQ_INT(done, 1);
        CHECK_EQ_INT(proxy_err, 0);
        CHECK(strstr(rentry("b"), "\"failed\"") == NULL);
    }
    CHECK_EQ_INT(S->m[1].inflight, 0);
}

/* July picks a loading model too (killed: failed, exit 1) and ignores tags; later routers
   never stop a loading model: the load waits for it to finish, then stops it. */
static void test_gen_loading_and_pinned_victims(void) {
    SETUP("--models-max", "1", "--load-ms", "300", "--model", "id=a,tags=pinned:true", "--model", "b");
    post("/models/load", "{\"model\":\"a\"}");
    adv(1);
    if (july()) {
        CHECK_EQ_INT(post("/models/load", "{\"model\":\"b\"}"), RSIM_RESPOND);
        CHECK_EQ_INT(R.status, 200);
        CHECK(strstr(rentry("a"), "\"value\":\"unloaded\",") != NULL);
        CHECK(strstr(rentry("a"), "\"exit_code\":1,\"failed\":true") != NULL);
        CHECK_EQ_STR(rstate("b"), "loading");
    } else {
        CHECK_EQ_INT(post("/models/load", "{\"model\":\"b\"}"), RSIM_DEFER);
        CHECK_EQ_INT(wait_reply(R.ticket, 2000), 200);
        CHECK(NOW >= 1000 + 300);
        CHECK(strstr(rentry("a"), "\"failed\"") == NULL);
        CHECK_EQ_STR(rstate("b"), "loading");
    }
    /* two loads racing for one place: July answers the second 500 after the victim
       exits; later routers queue it (it loads after the first, evicting that one) */
    SETUP("--models-max", "1", "--load-ms", "300", "--model", "a", "--model", "b", "--model", "c");
    post("/models/load", "{\"model\":\"a\"}");
    adv(400);
    CHECK_EQ_INT(post("/models/load", "{\"model\":\"b\"}"), RSIM_DEFER);
    {
        uint32_t tb = R.ticket, tc;
        CHECK_EQ_INT(post("/models/load", "{\"model\":\"c\"}"), RSIM_DEFER);
        tc = R.ticket;
        CHECK_EQ_INT(wait_reply(tb, 1000), 200);
        if (july()) {
            CHECK_EQ_INT(wait_reply(tc, 1000), 500);
            CHECK_EQ_STR(BUF, "{\"error\":{\"code\":500,\"message\":\"model limit reached, try again later\",\"type\":\"server_error\"}}");
        } else {
            CHECK_EQ_INT(wait_reply(tc, 5000), 200);
            CHECK_EQ_STR(rstate("b"), "unloaded");
        }
    }
}

/* llama.cpp's connection headers (measured on build 10116, both modes): Keep-Alive on
   answers below 400, Connection: close on 4xx/5xx, proxied answers close the socket. */
static void test_connection_headers(void) {
    SETUP(ROUTER2);
    get("/health");
    CHECK(R.keep_alive && !strcmp(R.keep_alive, "timeout=5, max=100"));
    CHECK(!R.connection_close && !R.close_after);
    get("/nope");
    CHECK_EQ_INT(R.status, 404);
    CHECK(R.keep_alive == NULL && R.connection_close && !R.close_after);
    post("/models/unload", "{\"model\":\"a\"}");
    CHECK_EQ_INT(R.status, 400);
    CHECK(R.connection_close);
    post("/models/load", "{\"model\":\"a\"}");
    CHECK(R.keep_alive && !R.close_after);    /* the router's own answer */
    adv(300);
    CHECK_EQ_INT(finish(post("/v1/chat/completions", "{\"model\":\"a\"}"), 1000), 200);
    CHECK(R.close_after && R.keep_alive);
    CHECK_EQ_INT(get("/models/sse"), RSIM_STREAM);
    CHECK(R.keep_alive && !R.close_after);
    SETUP(ROUTER2, "--idle-close-ms", "0");
    get("/health");
    CHECK(R.keep_alive == NULL);
    SETUP(ROUTER2, "--idle-close-ms", "30000");
    get("/health");
    CHECK(R.keep_alive && !strcmp(R.keep_alive, "timeout=30, max=100"));
    SETUP("--runtime", "server", "-m", "/m/x.gguf", "--load-ms", "10");
    adv(10);
    get("/health");
    CHECK(R.keep_alive && !strcmp(R.keep_alive, "timeout=5, max=100"));
    SETUP("--runtime", "ollama", "--model", "x");
    get("/api/tags");
    CHECK(R.keep_alive == NULL && !R.connection_close);
    SETUP("--router-gen", "august");
    CHECK(strstr(S->err, "unknown router generation") != NULL);
}

static void test_router_downloading(void) {
    uint32_t tk;
    SETUP("--model", "id=a,download=1000", "--model", "b");
    CHECK_EQ_STR(rstate("a"), "downloading");
    CHECK(strstr(rentry("a"), "\"meta\"") == NULL);
    post("/models/load", "{\"model\":\"a\"}");
    CHECK_EQ_INT(R.status, 400);
    CHECK_EQ_INT(post("/v1/chat/completions", "{\"model\":\"a\"}"), RSIM_DEFER); /* waits for the download */
    tk = R.ticket;
    adv(999);
    CHECK_EQ_STR(rstate("a"), "downloading");
    CHECK_EQ_INT(wait_reply(tk, 2000), 200);
    CHECK(NOW >= 1000 + 1000 + 300);
    SETUP("--model", "id=a,download=1000");
    post("/models/unload", "{\"model\":\"a\"}");   /* cancels the download */
    CHECK_EQ_INT(R.status, 200);
    CHECK_EQ_STR(rstate("a"), "unloaded");
}

/* A child that downloads its model first (child_download=MS): a load shows downloading,
   then loading, then loaded; a second load meanwhile is refused; an unload cancels it. */
static void test_router_child_download(void) {
    SETUP("--model", "id=a,child_download=500", "--load-ms", "100");
    CHECK_EQ_STR(rstate("a"), "unloaded");
    post("/models/load", "{\"model\":\"a\"}");
    CHECK_EQ_INT(R.status, 200);
    CHECK_EQ_STR(rstate("a"), "downloading");
    post("/models/load", "{\"model\":\"a\"}");
    CHECK_EQ_INT(R.status, 400);
    adv(499);
    CHECK_EQ_STR(rstate("a"), "downloading");
    adv(1);
    CHECK_EQ_STR(rstate("a"), "loading");
    adv(100);
    CHECK_EQ_STR(rstate("a"), "loaded");
    SETUP("--model", "id=a,child_download=500");
    post("/models/load", "{\"model\":\"a\"}");
    post("/models/unload", "{\"model\":\"a\"}");
    CHECK_EQ_INT(R.status, 200);
    adv(1000);
    CHECK_EQ_STR(rstate("a"), "unloaded");
}

int main(int argc, char **argv) {
    static const char *const gens[] = {"july", "later"};
    int g;
    RSD_TEST_BEGIN(argc, argv);
    for (g = 0; g < 2; g++) { /* the router tests against both router generations */
        G_GEN = gens[g];
        RUN(test_W1_health);
        RUN(test_W2_router_props);
        RUN(test_W3_models_listing);
        RUN(test_W4_load_then_loaded);
        RUN(test_W5_load_errors);
        RUN(test_W6_capacity_lru);
        RUN(test_W7_unload);
        RUN(test_W8_aliases);
        RUN(test_W9_proxy_validation);
        RUN(test_W10_autoload);
        RUN(test_W11_queue);
        RUN(test_W12_get_model_autoloads);
        RUN(test_W13_loading_child);
        RUN(test_W14_sleep);
        RUN(test_W15_crash_and_failed_load);
        RUN(test_W16_api_key);
        RUN(test_W17_W18_reload);
        RUN(test_W19_unknown_route);
        RUN(test_W20_startup);
        RUN(test_cold_loads_at_once);
        RUN(test_router_stream);
        RUN(test_router_downloading);
        RUN(test_router_child_download);
        RUN(test_L26_L28_sequences);
        RUN(test_gen_stream_victim);
        RUN(test_gen_loading_and_pinned_victims);
        if (rsdt_failed) printf("  (failures so far; router generation now %s)\n", G_GEN);
    }
    RUN(test_connection_headers);
    RUN(test_faults);
    RUN(test_configure);
    RUN(test_W21_W22_server_startup);
    RUN(test_W23_W24_server_models_props);
    RUN(test_W25_slots);
    RUN(test_W26_metrics);
    RUN(test_W27_server_sleep);
    RUN(test_W28_server_errors_stream);
    RUN(test_W30_ollama_root);
    RUN(test_W31_tags);
    RUN(test_W32_W33_load_unload);
    RUN(test_W34_ollama_errors);
    RUN(test_W35_keep_alive_num_ctx);
    RUN(test_ollama_keep_alive_sticks);
    RUN(test_ollama_keep_alive_zero_serves_first);
    RUN(test_ollama_final_fields_embed);
    RUN(test_W36_scheduler);
    RUN(test_W37_oom_evicts_all_and_retries);
    RUN(test_W37_evicted_between);
    RUN(test_W38_models);
    RUN(test_W39_W40_load);
    RUN(test_W41_unload);
    RUN(test_W42_W43_errors);
    RUN(test_W44_v0);
    RUN(test_W45_jit);
    RUN(test_W46_auth);
    RUN(test_W47_jit_race);
    RUN(test_lms_vram_507);
    RUN(test_sim_log_and_control);
    RUN(test_small_buffer);
    RUN(test_random_traffic);
    free(S);
    return RSD_TEST_END();
}
