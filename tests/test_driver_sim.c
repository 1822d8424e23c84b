/* test_driver_sim.c -- the llama.cpp router driver against the router simulator
   (apps/rsd-sim/rsd_sim.h), no sockets: every HTTP step goes through rsim_handle, waits
   advance the simulated clock, deferred answers come from rsim_pull. */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency.h"
#include "../apps/rsd-sim/rsd_sim.h"
#include "rsd_test.h"
#include "sim_step.h"

static rsd_decision_cache CACHE;

static int drive(const rsd_reconcile_desc *d) {
    int guard;
    if (rsd_reconcile_begin(R, d, NOW) < 0) return RES->error;
    for (guard = 0; guard < 10000; guard++) {
        rsd_step s = rsd_reconcile_next(R, NOW);
        int tr = RSD_OK, st = 0;
        size_t len = 0;
        switch (s.kind) {
        case RSD_STEP_HTTP:
            sim_http(&s.http, &tr, &st, &len);
            CHECK_EQ_INT(rsd_reconcile_feed(R, tr, st, RB, len, NOW), RSD_OK);
            break;
        case RSD_STEP_WAIT:
            NOW = s.wake_ms;
            rsim_tick(&S, NOW);
            break;
        case RSD_STEP_LOCK:
            rsd_reconcile_lock_done(R, true, 0, NOW);
            break;
        case RSD_STEP_DONE:
            return s.result;
        default:
            break;
        }
    }
    CHECK(0);
    return -999;
}

/* The router generation sim_router sets up (rsim_gen); main runs every test per generation. */
static int GEN = RSIM_GEN_JULY;

static void sim_router(int models_max, const char *const *specs, int n) {
    int i;
    rsim_init(&S, RSIM_RT_ROUTER);
    S.o.router_gen = GEN;
    S.o.models_max = models_max;
    for (i = 0; i < n; i++) REQUIRE(rsim_add_model(&S, specs[i]) >= 0);
    memset(&CACHE, 0, sizeof CACHE);
    NOW = 1000;
    rsim_start(&S, NOW);
    NOW += 1000; /* startup loads finish */
    rsim_tick(&S, NOW);
}

static void desc(rsd_reconcile_desc *d, const char *keep) {
    memset(d, 0, sizeof *d);
    d->base_url = "http://127.0.0.1:8080/v1";
    d->target_id = "sim";
    d->keep = keep;
    d->cache = &CACHE;
    d->lock = true;
}

static int state_of(const char *id) {
    int i = rsim_find(&S, id);
    return i < 0 ? -1 : S.m[i].state;
}

static void test_sim_full_router_evicts_one_and_loads(void) {
    static const char *const m[] = {"id=a,startup=1", "id=b,startup=1", "id=c"};
    rsd_reconcile_desc d;
    uint64_t t0;
    sim_router(2, m, 3);
    REQUIRE(state_of("a") == RSIM_LOADED && state_of("b") == RSIM_LOADED);
    desc(&d, "c");
    t0 = NOW;
    CHECK_EQ_INT(drive(&d), RSD_OK);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(state_of("c"), RSIM_LOADED);
    CHECK_EQ_INT(rsim_log_count(&S, "POST", "/models/unload", NULL, 0), 1);
    CHECK_EQ_INT(rsim_log_count(&S, "POST", "/models/load", "c", 200), 1);
    CHECK((state_of("a") == RSIM_LOADED) != (state_of("b") == RSIM_LOADED)); /* exactly one stayed */
    /* ready after the simulated 300 ms load; DONE within one poll interval of it */
    CHECK(NOW - t0 >= 300 && NOW - t0 <= 300 + 10 + RSD_RECONCILE_POLL_MAX_MS);
    /* TTL: no request at all the second time */
    {
        uint32_t before = S.log_total;
        CHECK_EQ_INT(drive(&d), RSD_OK);
        CHECK(RES->cache_hit);
        CHECK_EQ_INT(S.log_total, before);
    }
}

static void test_sim_free_slot_and_unlimited(void) {
    static const char *const m[] = {"id=a,startup=1", "id=b"};
    rsd_reconcile_desc d;
    sim_router(0, m, 2); /* --models-max 0: unlimited */
    S.o.models_max = 0;
    desc(&d, "b");
    CHECK_EQ_INT(drive(&d), RSD_OK);
    CHECK_EQ_INT(rsim_log_count(&S, "POST", "/models/unload", NULL, 0), 0);
    CHECK_EQ_INT(state_of("a"), RSIM_LOADED);
    CHECK_EQ_INT(state_of("b"), RSIM_LOADED);
}

static void test_sim_pinned_and_configured_protection(void) {
    static const char *const m[] = {"id=scout,startup=1,tags=pinned:true", "id=cfg,startup=1", "id=junk,startup=1",
                                    "id=new"};
    rsd_reconcile_desc d;
    rsd_protected_model p;
    sim_router(3, m, 4);
    desc(&d, "new");
    p.model_id = rsd_str_c("cfg");
    p.role = RSD_ROLE_MEMORY;
    d.protected_models = &p;
    d.n_protected = 1;
    CHECK_EQ_INT(drive(&d), RSD_OK);
    CHECK_EQ_INT(state_of("junk"), RSIM_UNLOADED);
    CHECK_EQ_INT(state_of("scout"), RSIM_LOADED);
    CHECK_EQ_INT(state_of("cfg"), RSIM_LOADED);
    CHECK_EQ_INT(state_of("new"), RSIM_LOADED);
}

static void test_sim_failed_load_restores_evicted(void) {
    static const char *const m[] = {"id=a,startup=1", "id=broken,fail=1"};
    rsd_reconcile_desc d;
    sim_router(1, m, 2);
    desc(&d, "broken");
    CHECK_EQ_INT(drive(&d), RSD_ERR_LOAD_FAILED);
    CHECK(strstr(RES->message, "failed to load (exit code 1)") != NULL);
    CHECK_EQ_INT(state_of("a"), RSIM_LOADED); /* restored */
    CHECK(RES->n_evicted == 1 && RES->evicted[0].restored);
    CHECK(!RES->cached);
}

static void test_sim_sleeping_keep_is_not_reloaded(void) {
    static const char *const m[] = {"id=nap,startup=1"};
    rsd_reconcile_desc d;
    sim_router(1, m, 1);
    S.o.sleep_idle_s = 1;
    NOW += 5000;
    rsim_tick(&S, NOW);
    REQUIRE(state_of("nap") == RSIM_SLEEPING);
    desc(&d, "nap");
    CHECK_EQ_INT(drive(&d), RSD_OK);
    CHECK_EQ_INT(rsim_log_count(&S, "POST", NULL, NULL, 0), 0);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
}

static void test_sim_api_key(void) {
    static const char *const m[] = {"id=a"};
    rsd_reconcile_desc d;
    sim_router(2, m, 1);
    snprintf(S.o.keys[0], sizeof S.o.keys[0], "sekrit");
    S.o.nkeys = 1;
    desc(&d, "a");
    CHECK_EQ_INT(drive(&d), RSD_ERR_HTTP_STATUS); /* 401 without the key: observe only */
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_DEGRADED);
    d.bearer = "sekrit";
    CHECK_EQ_INT(drive(&d), RSD_OK);
    CHECK_EQ_INT(state_of("a"), RSIM_LOADED);
}

static void test_sim_plain_llama_server_is_not_managed(void) {
    rsd_reconcile_desc d;
    rsim_init(&S, RSIM_RT_SERVER);
    REQUIRE(rsim_add_model(&S, "id=/models/m.gguf") >= 0);
    memset(&CACHE, 0, sizeof CACHE);
    NOW = 1000;
    rsim_start(&S, NOW);
    NOW += 2000;
    rsim_tick(&S, NOW);
    desc(&d, "other");
    CHECK_EQ_INT(drive(&d), RSD_ERR_NOT_ROUTER);
    CHECK_EQ_INT(S.log_total, 1);
}

static void test_sim_other_client_evicts_after_listing(void) {
    static const char *const m[] = {"id=a,startup=1", "id=b,startup=1", "id=c"};
    rsd_reconcile_desc d;
    sim_router(2, m, 3);
    snprintf(S.o.evict_after_list, sizeof S.o.evict_after_list, "b");
    desc(&d, "c");
    CHECK_EQ_INT(drive(&d), RSD_OK); /* W1: re-listed under the lock, b was gone: no eviction needed */
    CHECK(RES->redecided);
    CHECK_EQ_INT(rsim_log_count(&S, "POST", "/models/unload", NULL, 0), 0);
    CHECK_EQ_INT(state_of("a"), RSIM_LOADED);
    CHECK_EQ_INT(state_of("c"), RSIM_LOADED);
}

/* wire.md 1.4 "downloading" (rsd-sim: download=MS): the keep downloading is waited
   for read-only; the resident is evicted only once the download is done. */
static void test_sim_downloading_keep_is_waited_for(void) {
    static const char *const m[] = {"id=a,startup=1", "id=big,download=3000"};
    rsd_reconcile_desc d;
    sim_router(1, m, 2);
    REQUIRE(state_of("big") == RSIM_DOWNLOADING);
    desc(&d, "big");
    CHECK_EQ_INT(drive(&d), RSD_OK);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(state_of("big"), RSIM_LOADED);
    CHECK_EQ_INT(state_of("a"), RSIM_UNLOADED);
    CHECK_EQ_INT(rsim_log_count(&S, "POST", "/models/load", "big", 200), 1);
    CHECK_EQ_INT(rsim_log_count(&S, "POST", "/models/load", NULL, 400), 0);
    CHECK_EQ_INT(rsim_log_count(&S, "POST", "/models/unload", "a", 200), 1);
    CHECK(NOW >= 4000); /* nothing loaded before the download ended */
}

/* Optional event-driven wait: a host subscribed to the router's /models/sse feeds each
   event to rsd_reconcile_event, which ends the WAIT at once when the waited model
   changes; the listing is still polled to confirm. The same load with polls alone
   ends at the next poll (20, 40, 80, 160, 320 ms apart). Returns ms from the load's
   POST to DONE; *woke = events that cut a wait short. */
static char SB[8192];
static uint64_t ensure_with_sse(const char *keep, bool use_sse, int *woke) {
    rsd_reconcile_desc d;
    rsim_req q;
    rsim_resp resp;
    uint32_t sse = 0;
    uint64_t posted = 0;
    int guard;
    *woke = 0;
    memset(&q, 0, sizeof q);
    memset(&resp, 0, sizeof resp);
    q.method = "GET";
    q.target = "/models/sse";
    resp.body = SB;
    resp.body_cap = sizeof SB;
    if (use_sse) {
        CHECK_EQ_INT(rsim_handle(&S, &q, NOW, &resp), RSIM_STREAM);
        sse = resp.ticket;
    }
    desc(&d, keep);
    CHECK_EQ_INT(rsd_reconcile_begin(R, &d, NOW), RSD_OK);
    for (guard = 0; guard < 100000; guard++) {
        rsd_step s = rsd_reconcile_next(R, NOW);
        int tr = RSD_OK, st = 0;
        size_t len = 0;
        if (s.kind == RSD_STEP_DONE) break;
        if (s.kind == RSD_STEP_HTTP) {
            if (s.http.op == RSD_OP_LOAD) posted = NOW;
            sim_http(&s.http, &tr, &st, &len);
            CHECK_EQ_INT(rsd_reconcile_feed(R, tr, st, RB, len, NOW), RSD_OK);
        } else if (s.kind == RSD_STEP_WAIT) {
            CHECK(s.wait_model != NULL && s.wait_model[0]);
            if (!use_sse) { NOW = s.wake_ms; rsim_tick(&S, NOW); continue; }
            while (NOW < s.wake_ms) { /* the host's poll(): the socket or the timer, whichever first */
                rsim_resp p;
                bool woke_now = false;
                NOW++;
                memset(&p, 0, sizeof p);
                p.body = SB;
                p.body_cap = sizeof SB;
                while (rsim_pull(&S, NOW, &p) > 0) {
                    if (p.ticket == sse && p.action == RSIM_CHUNK && p.body_len > 8 &&
                        memcmp(p.body, "data: ", 6) == 0 &&
                        rsd_reconcile_event(R, p.body + 6, p.body_len - 8, NOW) == 1) {
                        woke_now = true;
                        (*woke)++;
                    }
                    p.body = SB;
                    p.body_cap = sizeof SB;
                }
                if (woke_now) break;
            }
        } else if (s.kind == RSD_STEP_LOCK) {
            rsd_reconcile_lock_done(R, true, 0, NOW);
        }
    }
    if (use_sse) rsim_cancel(&S, sse, NOW);
    CHECK_EQ_INT(RES->error, RSD_OK);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    return NOW - posted;
}

static void test_sim_sse_event_ends_the_wait(void) {
    static const char *const m[] = {"id=a,startup=1", "id=b,load=350"};
    int woke;
    uint64_t polled, evented;
    sim_router(2, m, 2);
    polled = ensure_with_sse("b", false, &woke);
    CHECK(polled >= 350 + 100); /* the next poll after ready: 20+40+80+160 = 300, then +320 */
    sim_router(2, m, 2);
    evented = ensure_with_sse("b", true, &woke);
    CHECK(evented >= 350 && evented <= 352); /* the status_change "loaded" event, then one GET */
    CHECK_EQ_INT(woke, 1);                   /* loading progress events do not wake */
    CHECK_EQ_INT(state_of("b"), RSIM_LOADED);
    /* events for another model, bad data, or outside a WAIT: ignored */
    {
        const char *ev = "{\"model\":\"b\",\"event\":\"status_change\",\"data\":{\"status\":\"loaded\"}}";
        CHECK_EQ_INT(rsd_reconcile_event(R, ev, strlen(ev), NOW), 0); /* DONE: no wait to end */
    }
    CHECK_EQ_INT(rsd_reconcile_event(R, "not json", 8, NOW), 0);
    CHECK_EQ_INT(rsd_reconcile_event(R, NULL, 3, NOW), RSD_ERR_ARG);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    if (rc_new(NULL) != RSD_OK) return 1; /* its tables, with the defaults */
    for (GEN = 0; GEN < RSIM_GEN_NUM; GEN++) { /* both router generations of the simulator */
        int before = rsdt_failed;
        RUN(test_sim_full_router_evicts_one_and_loads);
        RUN(test_sim_free_slot_and_unlimited);
        RUN(test_sim_pinned_and_configured_protection);
        RUN(test_sim_failed_load_restores_evicted);
        RUN(test_sim_sleeping_keep_is_not_reloaded);
        RUN(test_sim_api_key);
        RUN(test_sim_plain_llama_server_is_not_managed);
        RUN(test_sim_other_client_evicts_after_listing);
        RUN(test_sim_downloading_keep_is_waited_for);
        RUN(test_sim_sse_event_ends_the_wait);
        if (rsdt_failed > before) printf("  (the failures above: router generation %s)\n", GEN ? "later" : "july");
    }
    return RSD_TEST_END();
}
