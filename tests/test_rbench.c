/* test_rbench.c -- what bench/reconcile.c relies on in the simulator (apps/rsd-sim/rsd_sim.h):
   GET /_sim/log lists every model with the instant it last became loaded ("models":
   [{id, state, loads, loaded_ms}]), on the clock the adapter passes. Driven with a fake
   clock: no sockets, no sleeps. */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency.h"
#include "../apps/rsd-sim/rsd_sim.h"
#include "rsd_test.h"

static rsim *S;
static char BUF[1 << 18];
static rsd_json_tok TOK[8192];

static void setup(const char *const *args, int n, uint64_t now) {
    char *av[32];
    int i;
    if (!S) S = (rsim *)calloc(1, sizeof *S);
    memset(S, 0, sizeof *S);
    av[0] = (char *)"rsd-sim";
    for (i = 0; i < n && i < 30; i++) av[i + 1] = (char *)args[i];
    REQUIRE(rsim_configure(S, n + 1, av) == 0);
    rsim_start(S, now);
}

static int handle(const char *method, const char *target, const char *body, uint64_t now, rsim_resp *r) {
    rsim_req q;
    memset(&q, 0, sizeof q);
    memset(r, 0, sizeof *r);
    q.method = method;
    q.target = target;
    q.body = body;
    q.body_len = body ? strlen(body) : 0;
    r->body = BUF;
    r->body_cap = sizeof BUF;
    return rsim_handle(S, &q, now, r);
}

/* Reads /_sim/log at `now`; loads and loaded_ms of model `id` (loaded_ms -2: absent). */
static void sim_model(const char *id, uint64_t now, int64_t *loads, int64_t *loaded_ms, char *state, size_t cap) {
    rsim_resp r;
    rsd_json_doc doc;
    int arr, i, n;
    *loads = -2;
    *loaded_ms = -2;
    state[0] = 0;
    REQUIRE(handle("GET", "/_sim/log", NULL, now, &r) == RSIM_RESPOND);
    CHECK_EQ_INT(r.status, 200);
    REQUIRE(rsd_json_parse(&doc, r.body, r.body_len, TOK, (uint32_t)(sizeof TOK / sizeof TOK[0])) > 0);
    arr = rsd_json_find(&doc, 0, "models");
    REQUIRE(arr >= 0);
    n = rsd_json_size(&doc, arr);
    for (i = 0; i < n; i++) {
        int o = rsd_json_at(&doc, arr, (uint32_t)i), v;
        char got[96];
        if ((v = rsd_json_find(&doc, o, "id")) < 0) continue;
        rsd_json_str(&doc, v, got, sizeof got, NULL);
        if (strcmp(got, id)) continue;
        if ((v = rsd_json_find(&doc, o, "loads")) >= 0) rsd_json_int64(&doc, v, loads);
        if ((v = rsd_json_find(&doc, o, "loaded_ms")) >= 0) rsd_json_int64(&doc, v, loaded_ms);
        if ((v = rsd_json_find(&doc, o, "state")) >= 0) rsd_json_str(&doc, v, state, cap, NULL);
    }
}

/* Runs the clock one wake at a time until nothing is due before `until`. */
static uint64_t run_until(uint64_t now, uint64_t until) {
    rsim_resp r;
    for (;;) {
        uint64_t w = rsim_next_wake_ms(S);
        memset(&r, 0, sizeof r);
        r.body = BUF;
        r.body_cap = sizeof BUF;
        while (rsim_pull(S, now, &r) > 0) {}
        if (w == (uint64_t)-1 || w > until) break;
        now = w > now ? w : now + 1;
        rsim_tick(S, now);
    }
    rsim_tick(S, until);
    return until;
}

/* Router: the instant a load finishes is recorded (not the instant it was asked, not the
   instant someone next looked); a second load overwrites it; never loaded = -1. */
static void test_router_loaded_ms(void) {
    static const char *const args[] = {"--runtime", "router", "--load-ms", "70", "--models-max", "2",
                                       "--model", "id=a", "--model", "id=b"};
    rsim_resp r;
    int64_t loads, at;
    char st[32];
    setup(args, (int)(sizeof args / sizeof args[0]), 5000);
    sim_model("a", 5000, &loads, &at, st, sizeof st);
    CHECK_EQ_INT(loads, 0);
    CHECK_EQ_INT(at, -1);
    CHECK_EQ_STR(st, "unloaded");
    handle("POST", "/models/load", "{\"model\":\"a\"}", 5003, &r);
    sim_model("a", 5010, &loads, &at, st, sizeof st);
    CHECK_EQ_STR(st, "loading");
    CHECK_EQ_INT(at, -1);
    run_until(5003, 5500); /* the load is due at 5073; the clock then sits idle until 5500 */
    sim_model("a", 5500, &loads, &at, st, sizeof st);
    CHECK_EQ_STR(st, "loaded");
    CHECK_EQ_INT(loads, 1);
    CHECK_EQ_INT(at, 5073);
    sim_model("b", 5500, &loads, &at, st, sizeof st);
    CHECK_EQ_INT(at, -1);
    /* unload, load again: the newer instant wins, the count goes up */
    handle("POST", "/models/unload", "{\"model\":\"a\"}", 5600, &r);
    run_until(5600, 6000);
    handle("POST", "/models/load", "{\"model\":\"a\"}", 6000, &r);
    run_until(6000, 7000);
    sim_model("a", 7000, &loads, &at, st, sizeof st);
    CHECK_EQ_STR(st, "loaded");
    CHECK_EQ_INT(loads, 2);
    CHECK_EQ_INT(at, 6070);
}

/* A failed load is not a load: loaded_ms stays -1. */
static void test_router_failed_load_not_marked(void) {
    static const char *const args[] = {"--runtime", "router", "--load-ms", "70", "--fail-ms", "20",
                                       "--model", "id=a,fail=1"};
    rsim_resp r;
    int64_t loads, at;
    char st[32];
    setup(args, (int)(sizeof args / sizeof args[0]), 100);
    handle("POST", "/models/load", "{\"model\":\"a\"}", 100, &r);
    run_until(100, 1000);
    sim_model("a", 1000, &loads, &at, st, sizeof st);
    CHECK_EQ_INT(loads, 0);
    CHECK_EQ_INT(at, -1);
    CHECK_EQ_STR(st, "unloaded");
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    RUN(test_router_loaded_ms);
    RUN(test_router_failed_load_not_marked);
    free(S);
    return RSD_TEST_END();
}
