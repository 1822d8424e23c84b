/* Process-pool policy: upstream cases (6.11, pool parts of 6.13/6.14), one test per
   weak-spot fix (W21-W29, W34, W35, W37), TTL, pins, bytes, and a seeded property test. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include "rsd_test.h"
#include "pool_sim.h"

#include "pool_host.h"

static rsd_pool *mk_overlap(int max, uint64_t budget, int overlap, const rsd_pool_model_desc *m, int n) {
    rsd_pool_desc d;
    memset(&d, 0, sizeof d);
    d.max_slots = max;
    d.vram_budget_bytes = budget;
    d.overlap = overlap;
    d.models = m;
    d.num_models = n;
    d.event_log = 256;
    return rsd_pool_create(&d);
}

static rsd_pool *mk(int max, uint64_t budget, const rsd_pool_model_desc *m, int n) {
    return mk_overlap(max, budget, RSD_POOL_OVERLAP_BYTES, m, n);
}


/* Acquire and wait for the grant (auto host); returns the request, slot in *slot. */
static rsd_pool_req_h get(host *h, int model, int *slot) {
    rsd_pool_req_h r;
    int s = -1, rc = rsd_pool_acquire(h->p, model, h->now, NULL, &r, &s);
    pump(h);
    if (rc == RSD_PENDING) {
        const rsd_pool_action *g = grant_of(h, r);
        s = g ? g->slot : -1;
    }
    if (slot) *slot = s;
    return r;
}

static rsd_pool_slot_state model_state(rsd_pool *p, int m) {
    rsd_pool_model_info mi;
    rsd_pool_query_model(p, m, &mi);
    return mi.state;
}

/* ---- 6.11 otto process-pool.test.ts ------------------------------------------- */
static void test_serves_different_models_concurrently_in_independent_processes(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h a1, a2, b1;
    int sa = -1, sb = -1, sa2 = -1;
    rsd_pool_info st;
    m[0] = md("a", 0); m[1] = md("b", 0);
    m[0].max_in_flight = m[1].max_in_flight = 2;
    memset(&h, 0, sizeof h);
    h.p = mk(2, 0, m, 2);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    a1 = get(&h, 0, &sa);
    b1 = get(&h, 1, &sb);
    a2 = get(&h, 0, &sa2);
    CHECK(sa >= 0 && sb >= 0 && sa != sb);
    CHECK_EQ_INT(sa2, sa);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.running, 3);
    CHECK_EQ_INT(st.slots[sa].in_flight, 2);
    CHECK_EQ_INT(st.slots[sb].in_flight, 1);
    CHECK_EQ_INT(st.live_slots, 2);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 2);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 0);
    CHECK_EQ_INT(rsd_pool_release(h.p, a1, 1), RSD_OK);
    CHECK_EQ_INT(rsd_pool_release(h.p, a2, 1), RSD_OK);
    CHECK_EQ_INT(rsd_pool_release(h.p, b1, 1), RSD_OK);
    rsd_pool_destroy(h.p);
}

/* last_used_ms: the now_ms of a model's last grant (immediate or queued) or finished
   request; preloads and waiting do not count. */
static void test_model_info_last_used_ms(void) {
    rsd_pool_model_desc m[2];
    rsd_pool_model_info mi;
    host h;
    rsd_pool_req_h r1, r2;
    int s = -1;
    m[0] = md("a", 0); m[1] = md("b", 0);
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, m, 2);
    REQUIRE(h.p);
    h.auto_exit = true;
    rsd_pool_query_model(h.p, 0, &mi);
    CHECK(mi.last_used_ms == 0);
    h.now = 100;
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, h.now, NULL, &r1, &s), RSD_PENDING); /* loads first */
    pump(&h);
    rsd_pool_query_model(h.p, 0, &mi);
    CHECK(mi.last_used_ms == 0);                                /* waiting is not use */
    h.now = 150;
    CHECK_EQ_INT(rsd_pool_on_started(h.p, last(&h, RSD_POOL_ACTION_SPAWN)->proc, true, h.now), RSD_OK);
    pump(&h);
    rsd_pool_query_model(h.p, 0, &mi);
    CHECK(mi.last_used_ms == 150);                              /* queued grant */
    h.now = 200;
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, h.now, NULL, &r2, &s), RSD_OK);
    rsd_pool_query_model(h.p, 0, &mi);
    CHECK(mi.last_used_ms == 200);                              /* immediate grant */
    CHECK_EQ_INT(rsd_pool_release(h.p, r1, 300), RSD_OK);
    CHECK_EQ_INT(rsd_pool_cancel(h.p, r2, 400), RSD_OK);
    rsd_pool_query_model(h.p, 0, &mi);
    CHECK(mi.last_used_ms == 400);                              /* finished (release, cancel) */
    rsd_pool_query_model(h.p, 1, &mi);
    CHECK(mi.last_used_ms == 0);
    rsd_pool_destroy(h.p);
}

static void preload(host *h, int model) {
    rsd_pool_req_h r = get(h, model, NULL);
    rsd_pool_release(h->p, r, h->now);
    pump(h);
}

static void test_evicts_the_least_recently_used_idle_model_when_the_limit_is_full(void) {
    rsd_pool_model_desc m[3];
    host h;
    const rsd_pool_action *stop;
    m[0] = md("a", 0); m[1] = md("b", 0); m[2] = md("c", 0);
    memset(&h, 0, sizeof h);
    h.p = mk(2, 0, m, 3);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    preload(&h, 0);
    preload(&h, 1);
    preload(&h, 2);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 1);
    stop = last(&h, RSD_POOL_ACTION_STOP);
    REQUIRE(stop);
    CHECK_EQ_INT(stop->model, 0);
    CHECK_EQ_INT(stop->why, RSD_POOL_WHY_EVICT);
    CHECK_EQ_INT(model_state(h.p, 0), RSD_POOL_SLOT_EMPTY);
    CHECK_EQ_INT(model_state(h.p, 1), RSD_POOL_SLOT_READY);
    CHECK_EQ_INT(model_state(h.p, 2), RSD_POOL_SLOT_READY);
    rsd_pool_destroy(h.p);
}

static void test_waits_instead_of_evicting_a_process_that_is_still_serving(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h a, b;
    int sb = -1;
    m[0] = md("a", 0); m[1] = md("b", 0);
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, m, 2);
    REQUIRE(h.p);
    h.auto_start = true;
    a = get(&h, 0, NULL);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 1, 5, NULL, &b, &sb), RSD_PENDING);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 0);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 1);
    CHECK(grant_of(&h, b) == NULL);
    CHECK_EQ_INT(rsd_pool_release(h.p, a, 10), RSD_OK);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 1);
    REQUIRE(last(&h, RSD_POOL_ACTION_STOP));
    CHECK_EQ_INT(rsd_pool_on_exited(h.p, last(&h, RSD_POOL_ACTION_STOP)->proc, 11), RSD_OK);
    pump(&h);
    CHECK(grant_of(&h, b) != NULL);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 1);
    rsd_pool_destroy(h.p);
}

static void test_keeps_serving_resident_models_while_an_unloaded_model_waits(void) {
    rsd_pool_model_desc m[3];
    host h;
    rsd_pool_req_h a, b, c, a2;
    int s = -1, sa = -1;
    m[0] = md("a", 0); m[1] = md("b", 0); m[2] = md("c", 0);
    memset(&h, 0, sizeof h);
    h.p = mk(2, 0, m, 3);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    a = get(&h, 0, &sa);
    b = get(&h, 1, NULL);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 2, 0, NULL, &c, &s), RSD_PENDING);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 0, NULL, &a2, &s), RSD_OK);
    CHECK_EQ_INT(s, sa);
    CHECK_EQ_INT(rsd_pool_release(h.p, a2, 1), RSD_OK);
    pump(&h);
    CHECK(grant_of(&h, c) == NULL);
    CHECK_EQ_INT(rsd_pool_release(h.p, b, 2), RSD_OK);
    pump(&h);
    CHECK(grant_of(&h, c) != NULL);
    REQUIRE(last(&h, RSD_POOL_ACTION_STOP));
    CHECK_EQ_INT(last(&h, RSD_POOL_ACTION_STOP)->model, 1);
    CHECK_EQ_INT(model_state(h.p, 0), RSD_POOL_SLOT_READY);
    (void)a;
    rsd_pool_destroy(h.p);
}

/* ---- 6.13 scheduler.test.ts, the parts the pool owns ------------------------------ */
static void test_sched_runs_up_to_parallel_slots_requests_at_once(void) {
    rsd_pool_model_desc m = md("a", 0);
    host h;
    rsd_pool_req_h r[6];
    int i, ok = 0, pend = 0, s;
    rsd_pool_info st;
    m.max_in_flight = 3;
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, &m, 1);
    REQUIRE(h.p);
    h.auto_start = true;
    preload(&h, 0);
    for (i = 0; i < 6; i++) {
        int rc = rsd_pool_acquire(h.p, 0, 1, NULL, &r[i], &s);
        ok += rc == RSD_OK;
        pend += rc == RSD_PENDING;
    }
    CHECK_EQ_INT(ok, 3);
    CHECK_EQ_INT(pend, 3);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.slots[0].in_flight, 3);
    CHECK_EQ_INT(rsd_pool_release(h.p, r[0], 2), RSD_OK);
    pump(&h);
    CHECK(grant_of(&h, r[3]) != NULL);
    CHECK(grant_of(&h, r[4]) == NULL);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.slots[0].in_flight, 3);
    rsd_pool_destroy(h.p);
}

static void test_sched_loads_the_requested_model_when_a_different_one_is_resident(void) {
    rsd_pool_model_desc m[2];
    host h;
    m[0] = md("a", 0); m[1] = md("b", 0);
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, m, 2);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    preload(&h, 0);
    preload(&h, 1);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 2);
    REQUIRE(last(&h, RSD_POOL_ACTION_SPAWN));
    CHECK_EQ_INT(last(&h, RSD_POOL_ACTION_SPAWN)->model, 1);
    CHECK_EQ_INT(model_state(h.p, 1), RSD_POOL_SLOT_READY);
    CHECK_EQ_INT(model_state(h.p, 0), RSD_POOL_SLOT_EMPTY);
    rsd_pool_destroy(h.p);
}

static void test_sched_a_model_that_fails_to_load_rejects_only_its_own_jobs(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h a1, a2, b1;
    int s, i, fails = 0;
    const rsd_pool_action *sp;
    m[0] = md("a", 0); m[1] = md("b", 0);
    memset(&h, 0, sizeof h);
    h.p = mk(2, 0, m, 2);
    REQUIRE(h.p);
    rsd_pool_acquire(h.p, 0, 0, NULL, &a1, &s);
    rsd_pool_acquire(h.p, 0, 0, NULL, &a2, &s);
    rsd_pool_acquire(h.p, 1, 0, NULL, &b1, &s);
    pump(&h);
    REQUIRE(count(&h, RSD_POOL_ACTION_SPAWN) == 2);
    for (i = 0; i < h.nlog; i++) {
        sp = &h.log[i];
        if (sp->kind == RSD_POOL_ACTION_SPAWN)
            CHECK_EQ_INT(rsd_pool_on_started(h.p, sp->proc, sp->model == 1, 1), RSD_OK);
    }
    pump(&h);
    for (i = 0; i < h.nlog; i++)
        if (h.log[i].kind == RSD_POOL_ACTION_FAIL) {
            fails++;
            CHECK_EQ_INT(h.log[i].model, 0);
            CHECK_EQ_INT(h.log[i].result, RSD_ERR_POOL_LOAD_FAILED);
        }
    CHECK_EQ_INT(fails, 2);
    CHECK(grant_of(&h, b1) != NULL);
    CHECK_EQ_INT(rsd_pool_release(h.p, a1, 2), RSD_ERR_POOL_STALE); /* FAIL pulled: handle gone */
    rsd_pool_destroy(h.p);
}

static void test_sched_stats_reports_the_pending_queue_by_model(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h b1, b2;
    rsd_pool_model_info mi;
    rsd_pool_info st;
    int s;
    m[0] = md("a", 0); m[1] = md("Model-B", 0);
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, m, 2);
    REQUIRE(h.p);
    h.auto_start = true;
    (void)get(&h, 0, NULL);
    rsd_pool_acquire(h.p, 1, 0, NULL, &b1, &s);
    rsd_pool_acquire(h.p, 1, 0, NULL, &b2, &s);
    rsd_pool_query_model(h.p, 1, &mi);
    CHECK_EQ_INT(mi.waiting, 2);
    CHECK_EQ_STR(mi.id, "Model-B");
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.waiting, 2);
    CHECK_EQ_INT(st.running, 1);
    CHECK_EQ_INT(st.models_waiting, 1);
    CHECK_EQ_STR(st.slots[0].model_id, "a");
    rsd_pool_destroy(h.p);
}

static void test_sched_a_third_chat_waits_for_a_slot_and_runs_as_soon_as_one_frees(void) {
    rsd_pool_model_desc m = md("a", 0);
    host h;
    rsd_pool_req_h r1, r2, r3;
    rsd_pool_info st;
    int s;
    m.max_in_flight = 2;
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, &m, 1);
    REQUIRE(h.p);
    h.auto_start = true;
    r1 = get(&h, 0, NULL);
    r2 = get(&h, 0, NULL);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 0, NULL, &r3, &s), RSD_PENDING);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.waiting, 1);
    CHECK_EQ_INT(rsd_pool_release(h.p, r2, 3), RSD_OK);
    pump(&h);
    CHECK(grant_of(&h, r3) != NULL);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.waiting, 0);
    CHECK_EQ_INT(st.max_wait_ms, 3);
    (void)r1;
    rsd_pool_destroy(h.p);
}

static void test_sched_a_queued_different_model_gets_its_turn_once_the_open_turn_drains(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h a1, a2, b;
    int s;
    m[0] = md("a", 0); m[1] = md("b", 0);
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, m, 2);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    a1 = get(&h, 0, NULL);
    a2 = get(&h, 0, NULL);
    rsd_pool_acquire(h.p, 1, 0, NULL, &b, &s);
    rsd_pool_release(h.p, a1, 1);
    pump(&h);
    CHECK(grant_of(&h, b) == NULL);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 0);
    rsd_pool_release(h.p, a2, 2);
    pump(&h);
    CHECK(grant_of(&h, b) != NULL);
    rsd_pool_destroy(h.p);
}

static void test_sched_never_dispatches_more_jobs_than_slots_across_a_long_burst(void) {
    rsd_pool_model_desc m = md("a", 0);
    host h;
    rsd_pool_req_h live[64];
    int n = 0, i, s, peak = 0;
    uint32_t seed = 7;
    rsd_pool_info st;
    m.max_in_flight = 4;
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, &m, 1);
    REQUIRE(h.p);
    h.auto_start = true;
    for (i = 0; i < 2000; i++) {
        seed = seed * 1103515245u + 12345u;
        if ((seed >> 16) % 3 != 0 && n < 64) {
            rsd_pool_acquire(h.p, 0, (uint64_t)i, NULL, &live[n++], &s);
        } else if (n > 0) {
            int k = (int)((seed >> 8) % (unsigned)n);
            rsd_pool_cancel(h.p, live[k], (uint64_t)i);
            live[k] = live[--n];
        }
        h.nlog = 0;
        pump(&h);
        rsd_pool_query(h.p, &st);
        if ((int)st.slots[0].in_flight > peak) peak = (int)st.slots[0].in_flight;
        CHECK(st.slots[0].in_flight <= 4);
    }
    CHECK_EQ_INT(peak, 4);
    rsd_pool_destroy(h.p);
}

/* ---- 6.14 router.test.ts, pool-relevant ---------------------------------------------- */
static void test_router_a_client_departure_mid_stream_releases_the_slot(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h a, b;
    int s;
    m[0] = md("a", 0); m[1] = md("b", 0);
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, m, 2);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    a = get(&h, 0, NULL);
    rsd_pool_acquire(h.p, 1, 0, NULL, &b, &s);
    pump(&h);
    CHECK(grant_of(&h, b) == NULL);
    CHECK_EQ_INT(rsd_pool_cancel(h.p, a, 1), RSD_OK);
    pump(&h);
    CHECK(grant_of(&h, b) != NULL);
    CHECK_EQ_INT(rsd_pool_cancel(h.p, a, 1), RSD_ERR_POOL_STALE);
    rsd_pool_destroy(h.p);
}

static void test_router_an_upstream_hang_up_rejects_only_the_dead_request(void) {
    rsd_pool_model_desc m = md("a", 0);
    host h;
    rsd_pool_req_h r1, r2, r3;
    rsd_pool_info st;
    int s;
    m.max_in_flight = 2;
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, &m, 1);
    REQUIRE(h.p);
    h.auto_start = true;
    r1 = get(&h, 0, NULL);
    r2 = get(&h, 0, NULL);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 0, NULL, &r3, &s), RSD_PENDING);
    CHECK_EQ_INT(rsd_pool_cancel(h.p, r1, 1), RSD_OK); /* the hung-up one */
    pump(&h);
    CHECK(grant_of(&h, r3) != NULL);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_FAIL), 0);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.slots[0].in_flight, 2);
    CHECK_EQ_INT(rsd_pool_release(h.p, r2, 2), RSD_OK);
    rsd_pool_destroy(h.p);
}

/* ---- weak-spot fixes ------------------------------------------------------------- */
/* W21: the reservation is taken at claim time, so two concurrent loads cannot overcommit. */
static void test_w21_reserve_at_claim_no_concurrent_overcommit(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h a, b;
    rsd_pool_info st;
    int s;
    m[0] = md("a", 6 * GiB); m[1] = md("b", 6 * GiB);
    memset(&h, 0, sizeof h);
    h.p = mk(2, 10 * GiB, m, 2);
    REQUIRE(h.p);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 0, NULL, &a, &s), RSD_PENDING);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 1, 0, NULL, &b, &s), RSD_PENDING);
    pump(&h); /* neither load has finished */
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 1);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.reserved_bytes, 6 * GiB);
    REQUIRE(last(&h, RSD_POOL_ACTION_SPAWN));
    CHECK_EQ_INT(last(&h, RSD_POOL_ACTION_SPAWN)->reserve_bytes, 6 * GiB);
    rsd_pool_destroy(h.p);
}

/* W22: evict idle residents in LRU order until the bytes fit (not count only). */
static void test_w22_evicts_by_bytes_in_lru_order(void) {
    rsd_pool_model_desc m[4];
    host h;
    rsd_pool_req_h d;
    rsd_pool_info st;
    int i, stops[4] = {0, 0, 0, 0};
    m[0] = md("a", 3 * GiB); m[1] = md("b", 3 * GiB); m[2] = md("c", 3 * GiB); m[3] = md("d", 6 * GiB);
    memset(&h, 0, sizeof h);
    h.p = mk(4, 10 * GiB, m, 4);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    preload(&h, 0); preload(&h, 1); preload(&h, 2);
    d = get(&h, 3, NULL);
    CHECK(grant_of(&h, d) != NULL);
    for (i = 0; i < h.nlog; i++)
        if (h.log[i].kind == RSD_POOL_ACTION_STOP) stops[h.log[i].model]++;
    CHECK_EQ_INT(stops[0], 1);
    CHECK_EQ_INT(stops[1], 1);
    CHECK_EQ_INT(stops[2], 0);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.reserved_bytes, 9 * GiB);
    CHECK_EQ_INT(st.evictions, 2);
    rsd_pool_destroy(h.p);
}

/* W23: a measured figure (total and foreign use) limits admission when no budget is set. */
static void test_w23_measured_vram_and_foreign_use(void) {
    rsd_pool_model_desc m[3];
    host h;
    rsd_pool_req_h r;
    int s;
    m[0] = md("a", 6 * GiB); m[1] = md("b", 6 * GiB); m[2] = md("huge", 20 * GiB);
    memset(&h, 0, sizeof h);
    h.p = mk(4, 0, m, 3);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    CHECK_EQ_INT(rsd_pool_set_vram(h.p, 16 * GiB, 8 * GiB, 0), RSD_OK);
    preload(&h, 0);
    preload(&h, 1);
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_EVICT), 1); /* only 8 GiB are ours to use */
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 2, 0, NULL, &r, &s), RSD_ERR_POOL_NO_FIT);
    CHECK_EQ_INT(r.id, 0);
    rsd_pool_destroy(h.p);
}

/* A start held only by others' memory is counted as such (the host reads the device
   again while one is); one held by a busy resident, or that fits, is not. */
static void test_foreign_held_start(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h r, rb;
    rsd_pool_info st;
    int s;
    m[0] = md("a", 6 * GiB); m[1] = md("b", 6 * GiB);
    memset(&h, 0, sizeof h);
    h.p = mk(2, 10 * GiB, m, 2);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    CHECK_EQ_INT(rsd_pool_set_vram(h.p, 0, 7 * GiB, 0), RSD_OK);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.models_foreign_held, 0); /* nothing waits */
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 1, NULL, &r, &s), RSD_PENDING);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.models_foreign_held, 1);
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_EVICT), 0);
    /* others let go of 3 GiB: a starts */
    CHECK_EQ_INT(rsd_pool_set_vram(h.p, 0, 4 * GiB, 2), RSD_OK);
    pump(&h);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.models_foreign_held, 0);
    CHECK_EQ_INT(st.readies, 1);
    /* b waits behind a (busy), not behind others' memory */
    CHECK_EQ_INT(rsd_pool_set_vram(h.p, 0, 0, 3), RSD_OK);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 1, 3, NULL, &rb, &s), RSD_PENDING);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.models_foreign_held, 0);
    CHECK_EQ_INT(st.models_waiting, 1);
    rsd_pool_destroy(h.p);
}

/* Victims are picked LRU first until the start fits, then every one the others make
   unneeded is spared: a small LRU model picked before a large one that alone makes room
   stays resident (the pressure bench counted it as an eviction no start needed). */
static void test_evicts_no_victim_the_others_make_unneeded(void) {
    rsd_pool_model_desc m[4];
    host h;
    const rsd_pool_action *stop;
    m[0] = md("small", 3 * GiB); m[1] = md("mid", 5 * GiB); m[2] = md("big", 8 * GiB); m[3] = md("new", 6 * GiB);
    memset(&h, 0, sizeof h);
    h.p = mk(3, 18 * GiB, m, 4);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    preload(&h, 0); /* least recently used */
    preload(&h, 1);
    preload(&h, 2);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 0);
    /* new (6) needs a slot and 4 GiB more: small (LRU, 3) alone frees too little, mid (5)
       alone frees enough: only mid stops */
    preload(&h, 3);
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_EVICT), 1);
    stop = last(&h, RSD_POOL_ACTION_STOP);
    REQUIRE(stop);
    CHECK_EQ_INT(stop->model, 1);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 4);
    rsd_pool_destroy(h.p);
}

/* W24: eviction is an action, not a wait: residents keep flowing while a victim stops. */
static void test_w24_eviction_does_not_stall_dispatch(void) {
    rsd_pool_model_desc m[3];
    host h;
    rsd_pool_req_h a, c, a2, b2;
    int s, sa;
    m[0] = md("a", 0); m[1] = md("b", 0); m[2] = md("c", 0);
    memset(&h, 0, sizeof h);
    h.p = mk(2, 0, m, 3);
    REQUIRE(h.p);
    h.auto_start = true;
    a = get(&h, 0, &sa);
    preload(&h, 1);
    rsd_pool_acquire(h.p, 2, 0, NULL, &c, &s);
    pump(&h);
    CHECK_EQ_INT(model_state(h.p, 1), RSD_POOL_SLOT_STOPPING);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 0, NULL, &a2, &s), RSD_OK);
    CHECK_EQ_INT(s, sa);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 1, 0, NULL, &b2, &s), RSD_PENDING); /* reloads later */
    (void)a;
    rsd_pool_destroy(h.p);
}

/* W25: dispatch work per event does not grow with the number of waiters. */
static void test_w25_dispatch_work_independent_of_queue_length(void) {
    rsd_pool_model_desc m[3];
    rsd_pool_desc d;
    host h;
    rsd_pool_req_h a, x;
    int i, s;
    uint64_t w0;
    m[0] = md("a", 0); m[1] = md("b", 0); m[2] = md("c", 0);
    memset(&d, 0, sizeof d);
    d.max_slots = 1;
    d.max_requests = 30000;
    d.models = m;
    d.num_models = 3;
    memset(&h, 0, sizeof h);
    h.p = rsd_pool_create(&d);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    a = get(&h, 0, NULL);
    for (i = 0; i < 20000; i++) rsd_pool_acquire(h.p, 1 + (i & 1), 0, NULL, &x, &s);
    w0 = h.p->work;
    /* 10000 resident requests flow past 20000 waiters without any pass over them */
    for (i = 0; i < 10000; i++) {
        CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 1, NULL, &x, &s), RSD_OK);
        rsd_pool_release(h.p, x, 1);
    }
    CHECK(h.p->work - w0 == 0);
    rsd_pool_release(h.p, a, 2);
    h.nlog = 0;
    {
        rsd_pool_info st;
        rsd_pool_query(h.p, &st);
        w0 = st.grants_queued;
        pump(&h); /* a evicted, b loads and all 10000 b waiters are granted */
        rsd_pool_query(h.p, &st);
        CHECK_EQ_INT(st.grants_queued - w0, 10000);
        w0 = h.p->work - 3;
    }
    CHECK(h.p->work - w0 < 10);
    rsd_pool_destroy(h.p);
}

/* W26: a request waiting past max_wait_ms drains the LRU busy slot (no new admissions). */
static void test_w26_starving_request_drains_its_victim(void) {
    rsd_pool_model_desc m[2];
    rsd_pool_desc d;
    host h;
    rsd_pool_req_h a1, a2, a3, b;
    int s;
    uint64_t next;
    m[0] = md("a", 0); m[1] = md("b", 0);
    memset(&d, 0, sizeof d);
    d.max_slots = 1;
    d.max_wait_ms = 1000;
    d.models = m;
    d.num_models = 2;
    memset(&h, 0, sizeof h);
    h.p = rsd_pool_create(&d);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    a1 = get(&h, 0, NULL);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 1, 100, NULL, &b, &s), RSD_PENDING);
    next = step_next(h.p, 500);
    CHECK_EQ_INT(next, 1100);
    /* steady traffic on a: overlapping requests, a is never idle */
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 600, NULL, &a2, &s), RSD_OK);
    rsd_pool_release(h.p, a1, 700);
    pump(&h);
    CHECK(grant_of(&h, b) == NULL);
    rsd_pool_step(h.p, 1100);
    pump(&h);
    CHECK_EQ_INT(model_state(h.p, 0), RSD_POOL_SLOT_DRAINING);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 1150, NULL, &a3, &s), RSD_PENDING); /* no new work on a */
    rsd_pool_release(h.p, a2, 1200);
    pump(&h);
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_STARVE), 1);
    CHECK(grant_of(&h, b) != NULL);
    rsd_pool_release(h.p, b, 1300);
    pump(&h);
    CHECK(grant_of(&h, a3) != NULL); /* and a comes back for its own waiter */
    rsd_pool_destroy(h.p);
}

/* W27: a failed load and a crash free the slot and the reservation. */
static void test_w27_failed_load_frees_slot_and_reservation(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h a, b;
    rsd_pool_info st;
    const rsd_pool_action *sp, *stop;
    int s;
    m[0] = md("a", 8 * GiB); m[1] = md("b", 8 * GiB);
    memset(&h, 0, sizeof h);
    h.p = mk(1, 10 * GiB, m, 2);
    REQUIRE(h.p);
    rsd_pool_acquire(h.p, 0, 0, NULL, &a, &s);
    rsd_pool_acquire(h.p, 1, 0, NULL, &b, &s);
    pump(&h);
    sp = last(&h, RSD_POOL_ACTION_SPAWN);
    REQUIRE(sp && sp->model == 0);
    CHECK_EQ_INT(rsd_pool_on_started(h.p, sp->proc, false, 5), RSD_OK);
    pump(&h);
    stop = last(&h, RSD_POOL_ACTION_STOP);
    REQUIRE(stop);
    CHECK_EQ_INT(stop->why, RSD_POOL_WHY_LOAD_FAILED);
    CHECK_EQ_INT(model_state(h.p, 0), RSD_POOL_SLOT_EMPTY); /* no longer routes (W37) */
    CHECK_EQ_INT(rsd_pool_on_exited(h.p, stop->proc, 6), RSD_OK);
    pump(&h);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.load_failures, 1);
    sp = last(&h, RSD_POOL_ACTION_SPAWN);
    REQUIRE(sp);
    CHECK_EQ_INT(sp->model, 1);
    CHECK_EQ_INT(st.reserved_bytes, 8 * GiB);
    rsd_pool_destroy(h.p);
}

/* rsd_pool_restart: a start given up by the host stops (why RESTART) and its model is
   started anew for the same waiters, without a load failure or a backoff; the new SPAWN
   waits for room (one slot here: for the old process's exit). Only a STARTING slot. */
static void test_restart_keeps_the_waiters(void) {
    rsd_pool_model_desc m[1];
    host h;
    rsd_pool_req_h a, a2;
    rsd_pool_info st;
    rsd_pool_action sp, sp2;
    const rsd_pool_action *stop;
    int s, i;
    m[0] = md("a", 8 * GiB);
    memset(&h, 0, sizeof h);
    h.p = mk(1, 10 * GiB, m, 1);
    REQUIRE(h.p);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 0, NULL, &a, &s), RSD_PENDING);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 0, NULL, &a2, &s), RSD_PENDING);
    pump(&h);
    REQUIRE(last(&h, RSD_POOL_ACTION_SPAWN) != NULL);
    sp = *last(&h, RSD_POOL_ACTION_SPAWN);
    CHECK_EQ_INT(rsd_pool_restart(h.p, sp.proc, 5), RSD_OK);
    CHECK_EQ_INT(rsd_pool_restart(h.p, sp.proc, 5), RSD_ERR_STATE); /* STOPPING now */
    pump(&h);
    stop = last(&h, RSD_POOL_ACTION_STOP);
    REQUIRE(stop != NULL);
    CHECK(stop->proc.id == sp.proc.id && stop->why == RSD_POOL_WHY_RESTART);
    CHECK_EQ_STR(rsd_pool_why_str(RSD_POOL_WHY_RESTART), "restart");
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_FAIL), 0);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 1); /* no room until it exits */
    CHECK_EQ_INT(model_state(h.p, 0), RSD_POOL_SLOT_EMPTY); /* no longer routes */
    CHECK_EQ_INT(rsd_pool_on_exited(h.p, sp.proc, 6), RSD_OK);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 2);
    sp2 = *last(&h, RSD_POOL_ACTION_SPAWN);
    CHECK(sp2.model == 0 && sp2.proc.id != sp.proc.id);
    CHECK_EQ_INT(rsd_pool_on_started(h.p, sp2.proc, true, 7), RSD_OK);
    pump(&h);
    CHECK(grant_of(&h, a) != NULL && grant_of(&h, a2) != NULL);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.load_failures, 0);
    CHECK_EQ_INT(st.crashes, 0);
    CHECK_EQ_INT(st.reserved_bytes, 8 * GiB);
    CHECK_EQ_INT(rsd_pool_restart(h.p, sp2.proc, 8), RSD_ERR_STATE); /* READY */
    CHECK_EQ_INT(rsd_pool_restart(h.p, sp.proc, 8), RSD_ERR_POOL_STALE);
    CHECK_EQ_INT(rsd_pool_restart(NULL, sp2.proc, 8), RSD_ERR_ARG);
    for (i = 0; i < 2; i++) CHECK_EQ_INT(rsd_pool_release(h.p, i ? a2 : a, 9), RSD_OK);
    rsd_pool_destroy(h.p);
}

/* An unload(DRAIN) that waited for a start rsd_pool_restart makes again waits for the new
   start: it serves the waiter, then stops (why UNLOAD). Without a waiter left, the next
   start does not drain. */
static void test_restart_keeps_a_waiting_unload(void) {
    rsd_pool_model_desc m[1];
    host h;
    rsd_pool_req_h a, b;
    rsd_pool_action sp;
    const rsd_pool_action *stop;
    int s;
    m[0] = md("a", 8 * GiB);
    memset(&h, 0, sizeof h);
    h.p = mk(1, 10 * GiB, m, 1);
    REQUIRE(h.p);
    h.auto_exit = true;
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 0, NULL, &a, &s), RSD_PENDING);
    pump(&h);
    REQUIRE(last(&h, RSD_POOL_ACTION_SPAWN) != NULL);
    sp = *last(&h, RSD_POOL_ACTION_SPAWN);
    CHECK_EQ_INT(rsd_pool_unload(h.p, 0, RSD_POOL_UNLOAD_DRAIN, 1), RSD_PENDING);
    CHECK_EQ_INT(rsd_pool_restart(h.p, sp.proc, 2), RSD_OK);
    pump(&h); /* the STOP, its exit at once, the new SPAWN */
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 2);
    sp = *last(&h, RSD_POOL_ACTION_SPAWN);
    CHECK_EQ_INT(rsd_pool_on_started(h.p, sp.proc, true, 3), RSD_OK);
    pump(&h);
    CHECK(grant_of(&h, a) != NULL);
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_UNLOAD), 0);
    CHECK_EQ_INT(rsd_pool_release(h.p, a, 4), RSD_OK);
    pump(&h);
    stop = last(&h, RSD_POOL_ACTION_STOP);
    CHECK(stop && stop->proc.id == sp.proc.id && stop->why == RSD_POOL_WHY_UNLOAD);
    /* the waiter goes before the new start: nothing drains later */
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 5, NULL, &a, &s), RSD_PENDING);
    pump(&h);
    sp = *last(&h, RSD_POOL_ACTION_SPAWN);
    CHECK_EQ_INT(rsd_pool_unload(h.p, 0, RSD_POOL_UNLOAD_DRAIN, 6), RSD_PENDING);
    h.auto_exit = false;
    CHECK_EQ_INT(rsd_pool_restart(h.p, sp.proc, 7), RSD_OK);
    CHECK_EQ_INT(rsd_pool_cancel(h.p, a, 8), RSD_OK);
    pump(&h);
    CHECK_EQ_INT(rsd_pool_on_exited(h.p, sp.proc, 9), RSD_OK);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 10, NULL, &b, &s), RSD_PENDING);
    pump(&h);
    sp = *last(&h, RSD_POOL_ACTION_SPAWN);
    CHECK_EQ_INT(rsd_pool_on_started(h.p, sp.proc, true, 11), RSD_OK);
    pump(&h);
    CHECK(grant_of(&h, b) != NULL);
    CHECK_EQ_INT(rsd_pool_release(h.p, b, 12), RSD_OK);
    pump(&h);
    CHECK_EQ_INT(model_state(h.p, 0), RSD_POOL_SLOT_READY); /* stays: no drain */
    rsd_pool_destroy(h.p);
}

static void test_w27_crash_frees_slot_and_reservation_at_once(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h a, b;
    rsd_pool_info st;
    int s, sa = -1;
    m[0] = md("a", 8 * GiB); m[1] = md("b", 8 * GiB);
    memset(&h, 0, sizeof h);
    h.p = mk(1, 10 * GiB, m, 2);
    REQUIRE(h.p);
    h.auto_start = true;
    a = get(&h, 0, &sa);
    rsd_pool_acquire(h.p, 1, 0, NULL, &b, &s);
    pump(&h);
    REQUIRE(last(&h, RSD_POOL_ACTION_SPAWN));
    CHECK_EQ_INT(rsd_pool_on_exited(h.p, last(&h, RSD_POOL_ACTION_SPAWN)->proc, 3), RSD_OK); /* crash, busy */
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.crashes, 1);
    pump(&h);
    CHECK(grant_of(&h, b) != NULL); /* b got the freed slot and bytes at once */
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.reserved_bytes, 8 * GiB);
    CHECK_EQ_INT(st.running, 1); /* a's request was orphaned */
    CHECK_EQ_INT(rsd_pool_release(h.p, a, 4), RSD_OK); /* the host's proxy failed; bookkeeping only */
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.slots[sa].in_flight, 1);
    rsd_pool_destroy(h.p);
}

/* W28: stop() fails every request (waiting and running), stops every process, refuses later work. */
static void test_w28_stop_refuses_later_work(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h a, b, c;
    int s, i, stopped_fails = 0;
    m[0] = md("a", 0); m[1] = md("b", 0);
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, m, 2);
    REQUIRE(h.p);
    h.auto_start = true;
    a = get(&h, 0, NULL);
    rsd_pool_acquire(h.p, 1, 0, NULL, &b, &s);
    CHECK_EQ_INT(rsd_pool_stop(h.p, 1), RSD_OK);
    pump(&h);
    for (i = 0; i < h.nlog; i++)
        if (h.log[i].kind == RSD_POOL_ACTION_FAIL) stopped_fails += h.log[i].result == RSD_ERR_POOL_STOPPED;
    CHECK_EQ_INT(stopped_fails, 2);
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_SHUTDOWN), 1);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 2, NULL, &c, &s), RSD_ERR_POOL_STOPPED);
    CHECK_EQ_INT(rsd_pool_unload(h.p, 0, 0, 2), RSD_ERR_POOL_STOPPED);
    CHECK_EQ_INT(rsd_pool_on_exited(h.p, last(&h, RSD_POOL_ACTION_STOP)->proc, 3), RSD_OK);
    h.nlog = 0;
    rsd_pool_step(h.p, 100);
    pump(&h);
    CHECK_EQ_INT(h.nlog, 0); /* nothing respawns */
    CHECK_EQ_INT(rsd_pool_release(h.p, a, 4), RSD_ERR_POOL_STALE);
    rsd_pool_destroy(h.p);
}

/* W29: unload refuses while busy, or drains then unloads. */
static void test_w29_unload_refuses_or_drains(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h a, a2;
    int s;
    m[0] = md("a", 0); m[1] = md("b", 0);
    memset(&h, 0, sizeof h);
    h.p = mk(2, 0, m, 2);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    a = get(&h, 0, NULL);
    preload(&h, 1);
    CHECK_EQ_INT(rsd_pool_unload(h.p, -1, RSD_POOL_UNLOAD_REFUSE_BUSY, 1), RSD_ERR_POOL_BUSY);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 0); /* refused: nothing changed */
    CHECK_EQ_INT(rsd_pool_unload(h.p, 1, 0, 1), RSD_OK); /* idle b: stopped at once */
    pump(&h);
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_UNLOAD), 1);
    CHECK_EQ_INT(rsd_pool_unload(h.p, 0, RSD_POOL_UNLOAD_DRAIN, 2), RSD_PENDING);
    CHECK_EQ_INT(model_state(h.p, 0), RSD_POOL_SLOT_DRAINING);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 3, NULL, &a2, &s), RSD_PENDING);
    pump(&h);
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_UNLOAD), 1);
    rsd_pool_release(h.p, a, 4);
    pump(&h);
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_UNLOAD), 2);
    CHECK(grant_of(&h, a2) != NULL); /* a later request reloads it */
    CHECK_EQ_INT(rsd_pool_unload(h.p, 1, 0, 5), RSD_OK); /* not resident: no-op */
    rsd_pool_destroy(h.p);
}

/* W34: stats are complete (every slot, every counter). */
static void test_w34_stats_complete(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h a;
    rsd_pool_info st;
    int sa;
    m[0] = md("a", 2 * GiB); m[1] = md("b", 3 * GiB);
    m[1].ttl_ms = 9000;
    memset(&h, 0, sizeof h);
    h.p = mk(2, 10 * GiB, m, 2);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    a = get(&h, 0, &sa);
    h.now = 50;
    preload(&h, 1);
    CHECK_EQ_INT(rsd_pool_set_pid(h.p, last(&h, RSD_POOL_ACTION_SPAWN)->proc, 4242), RSD_OK);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.max_slots, 2);
    CHECK_EQ_INT(st.live_slots, 2);
    CHECK_EQ_INT(st.running, 1);
    CHECK_EQ_INT(st.reserved_bytes, 5 * GiB);
    CHECK_EQ_INT(st.budget_bytes, 10 * GiB);
    CHECK_EQ_INT(st.spawns, 2);
    CHECK_EQ_INT(st.readies, 2);
    CHECK_EQ_INT(st.grants_queued, 2);
    CHECK_EQ_INT(st.acquires, 2);
    CHECK_EQ_INT(st.releases, 1);
    CHECK_EQ_INT(st.slots[sa].state, RSD_POOL_SLOT_READY);
    CHECK_EQ_INT(st.slots[sa].in_flight, 1);
    CHECK_EQ_STR(st.slots[1 - sa].model_id, "b");
    CHECK_EQ_INT(st.slots[1 - sa].ttl_ms, 9000);
    CHECK_EQ_INT(st.slots[1 - sa].idle_deadline_ms, 9050);
    CHECK_EQ_INT(st.slots[1 - sa].pid, 4242);
    CHECK(st.slots[1 - sa].last_use > st.slots[sa].last_use);
    CHECK_EQ_STR(rsd_pool_slot_state_str(st.slots[sa].state), "ready");
    CHECK_EQ_STR(rsd_pool_why_str(RSD_POOL_WHY_STARVE), "starve");
    CHECK_EQ_INT(st.slots[5].state, RSD_POOL_SLOT_EMPTY);
    CHECK_EQ_INT(st.slots[5].proc.id, 0);
    (void)a;
    rsd_pool_destroy(h.p);
}

/* #28698: in-flight is counted at admission, so a granted-but-not-yet-proxied
   request keeps its freshly loaded slot from being evicted. */
static void test_inflight_counted_at_admission_not_dispatch(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h a, c;
    rsd_pool_action act;
    int s;
    m[0] = md("a", 0); m[1] = md("c", 0);
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, m, 2);
    REQUIRE(h.p);
    rsd_pool_acquire(h.p, 0, 0, NULL, &a, &s);
    REQUIRE(rsd_pool_next_action(h.p, &act) && act.kind == RSD_POOL_ACTION_SPAWN);
    rsd_pool_acquire(h.p, 1, 0, NULL, &c, &s);
    CHECK_EQ_INT(rsd_pool_on_started(h.p, act.proc, true, 1), RSD_OK);
    /* GRANT for a is not pulled yet, and c is waiting: a must not be evicted */
    rsd_pool_step(h.p, 2);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 0);
    CHECK(grant_of(&h, a) != NULL);
    rsd_pool_destroy(h.p);
}

/* ---- pins, TTL, configure, limits, errors ---------------------------------------------- */
static void test_pinned_model_is_never_evicted_ttl_unloaded_or_trimmed(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h b;
    int s;
    m[0] = md("a", 0); m[1] = md("b", 0);
    m[0].pinned = true;
    m[0].ttl_ms = 10;
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, m, 2);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    preload(&h, 0);
    /* max 1 and a pinned: b could only wait forever, so it is refused with the reason */
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 1, 0, NULL, &b, &s), RSD_ERR_POOL_PINNED);
    CHECK(step_next(h.p, 1000000) == RSD_NO_DEADLINE); /* no TTL for a pin */
    rsd_pool_configure(h.p, 1, 1000000);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 0);
    CHECK_EQ_INT(model_state(h.p, 0), RSD_POOL_SLOT_READY);
    CHECK_EQ_INT(rsd_pool_set_pinned(h.p, 0, false, 1000001), RSD_OK);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 1, 1000001, NULL, &b, &s), RSD_PENDING);
    pump(&h);
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_EVICT), 1);
    CHECK(grant_of(&h, b) != NULL);
    rsd_pool_destroy(h.p);
}

/* rsd_pool_set_model: the new TTL, cap and pin apply; the id cannot change. */
static void test_set_model_changes_ttl_cap_and_pin(void) {
    rsd_pool_model_desc m[1], d;
    rsd_pool_model_info mi;
    host h;
    m[0] = md("a", 0);
    m[0].ttl_ms = 0;
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, m, 1);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    preload(&h, 0);
    CHECK(step_next(h.p, 1000) == RSD_NO_DEADLINE); /* no TTL yet */
    d = m[0];
    d.id = NULL;
    d.ttl_ms = 50;
    d.max_in_flight = 2;
    d.reserve_bytes = 7;
    CHECK_EQ_INT(rsd_pool_set_model(h.p, 0, &d, 1000), RSD_OK);
    REQUIRE(rsd_pool_query_model(h.p, 0, &mi) == RSD_OK);
    CHECK_EQ_INT(mi.ttl_ms, 50);
    CHECK_EQ_INT(mi.max_in_flight, 2);
    CHECK(mi.reserve_bytes == 7);
    CHECK(step_next(h.p, 1001) == 1050); /* the idle model now has a TTL deadline */
    d.id = "b";
    CHECK_EQ_INT(rsd_pool_set_model(h.p, 0, &d, 1000), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_pool_set_model(h.p, 1, &m[0], 1000), RSD_ERR_ARG);
    d.id = "a";
    d.pinned = true;
    CHECK_EQ_INT(rsd_pool_set_model(h.p, 0, &d, 1000), RSD_OK);
    REQUIRE(rsd_pool_query_model(h.p, 0, &mi) == RSD_OK);
    CHECK(mi.pinned);
    rsd_pool_destroy(h.p);
}

static void test_ttl_expiry_counts_from_the_last_request_finished(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h r;
    int s;
    m[0] = md("a", 0); m[1] = md("never", 0);
    m[0].ttl_ms = 5000;
    memset(&h, 0, sizeof h);
    h.p = mk(2, 0, m, 2);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    r = get(&h, 0, NULL);            /* starts at 0 */
    preload(&h, 1);                  /* ttl 0 = never */
    CHECK_EQ_INT(step_next(h.p, 9000), RSD_NO_DEADLINE); /* busy: no timer */
    rsd_pool_release(h.p, r, 10000); /* finished at 10 s */
    CHECK_EQ_INT(step_next(h.p, 14999), 15000);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 0);
    /* a new request resets the idle clock */
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 14999, NULL, &r, &s), RSD_OK);
    rsd_pool_release(h.p, r, 15500);
    CHECK_EQ_INT(step_next(h.p, 15600), 20500);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 0);
    CHECK_EQ_INT(rsd_pool_step(h.p, 20500), 1);    /* the STOP waits to be pulled */
    CHECK(rsd_pool_next_deadline(h.p) == 0);
    pump(&h);
    CHECK_EQ_INT(rsd_pool_step(h.p, 20500), 0);
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_TTL), 1);
    CHECK_EQ_INT(model_state(h.p, 0), RSD_POOL_SLOT_EMPTY);
    CHECK_EQ_INT(step_next(h.p, 99999999), RSD_NO_DEADLINE);
    CHECK_EQ_INT(model_state(h.p, 1), RSD_POOL_SLOT_READY);
    rsd_pool_destroy(h.p);
}

static void test_configure_trims_idle_excess_lru_first_and_busy_later(void) {
    rsd_pool_model_desc m[3];
    host h;
    rsd_pool_req_h a;
    rsd_pool_info st;
    int i, stopped[3] = {0, 0, 0};
    m[0] = md("a", 0); m[1] = md("b", 0); m[2] = md("c", 0);
    memset(&h, 0, sizeof h);
    h.p = mk(3, 0, m, 3);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    a = get(&h, 0, NULL);
    preload(&h, 1);
    preload(&h, 2);
    CHECK_EQ_INT(rsd_pool_configure(h.p, 2, 1), RSD_OK);
    pump(&h);
    for (i = 0; i < h.nlog; i++) if (h.log[i].kind == RSD_POOL_ACTION_STOP) stopped[h.log[i].model]++;
    CHECK_EQ_INT(stopped[1], 1); /* LRU idle */
    CHECK_EQ_INT(stopped[2], 0);
    rsd_pool_configure(h.p, 0, 2); /* normalised to 1: busy a stays, idle c goes */
    pump(&h);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.max_slots, 1);
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_TRIM), 2);
    CHECK_EQ_INT(model_state(h.p, 0), RSD_POOL_SLOT_READY);
    rsd_pool_configure(h.p, 99, 3);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.max_slots, 16);
    rsd_pool_release(h.p, a, 4);
    rsd_pool_destroy(h.p);
}

static void test_p4_max_slots_normalised(void) {
    rsd_pool_desc d;
    rsd_pool *p;
    rsd_pool_info st;
    int v[3] = {0, -5, 100}, want[3] = {1, 1, 16}, i;
    for (i = 0; i < 3; i++) {
        memset(&d, 0, sizeof d);
        d.max_slots = v[i];
        p = rsd_pool_create(&d);
        REQUIRE(p);
        rsd_pool_query(p, &st);
        CHECK_EQ_INT(st.max_slots, want[i]);
        rsd_pool_destroy(p);
    }
}

static void test_model_that_can_never_fit_fails_at_once(void) {
    rsd_pool_model_desc m[3];
    host h;
    rsd_pool_req_h r, mid;
    rsd_pool_info st;
    const rsd_pool_action *f;
    int s;
    m[0] = md("small", 4 * GiB); m[1] = md("big", 24 * GiB); m[2] = md("mid", 3 * GiB);
    memset(&h, 0, sizeof h);
    h.p = mk(1, 16 * GiB, m, 3);
    REQUIRE(h.p);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 1, 0, NULL, &r, &s), RSD_ERR_POOL_NO_FIT);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.no_fit, 1);
    CHECK_EQ_INT(st.waiting, 0);
    /* a waiter whose model stops fitting after a measurement is failed with the reason */
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 0, NULL, &r, &s), RSD_PENDING);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 2, 0, NULL, &mid, &s), RSD_PENDING);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_FAIL), 0);
    CHECK_EQ_INT(rsd_pool_set_vram(h.p, 2 * GiB, 0, 1), RSD_OK);
    pump(&h);
    f = last(&h, RSD_POOL_ACTION_FAIL);
    REQUIRE(f);
    CHECK_EQ_INT(f->req.id, mid.id);
    CHECK_EQ_INT(f->result, RSD_ERR_POOL_NO_FIT);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 2, 2, NULL, &r, &s), RSD_ERR_POOL_NO_FIT);
    rsd_pool_destroy(h.p);
}

static void test_byte_budget_admission_waits_then_fits(void) {
    rsd_pool_model_desc m[3];
    host h;
    rsd_pool_req_h a, b, c;
    rsd_pool_info st;
    int s;
    m[0] = md("a", 5 * GiB); m[1] = md("b", 4 * GiB); m[2] = md("c", 4 * GiB);
    memset(&h, 0, sizeof h);
    h.p = mk(3, 10 * GiB, m, 3);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    a = get(&h, 0, NULL);
    b = get(&h, 1, NULL);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 2, 0, NULL, &c, &s), RSD_PENDING);
    pump(&h);
    CHECK(grant_of(&h, c) == NULL); /* a slot is free, the bytes are not; both busy */
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.live_slots, 2);
    rsd_pool_release(h.p, b, 1);
    pump(&h);
    CHECK(grant_of(&h, c) != NULL);
    rsd_pool_query(h.p, &st);
    CHECK(st.reserved_bytes <= 10 * GiB);
    (void)a;
    rsd_pool_destroy(h.p);
}

/* ---- swaps beside a stop (desc.overlap) ---------------------------------------------- */
/* The pool's event log as one string of letters in order: C claim, R ready, S stop,
   X exited (after a STOP), each followed by its model index. */
static void ev_trace(rsd_pool *p, char *out, size_t cap) {
    rsd_pool_event ev;
    size_t n = 0;
    out[0] = '\0';
    while (rsd_pool_next_event(p, &ev) && n + 3 < cap) {
        char k = ev.kind == RSD_POOL_EV_CLAIM ? 'C' : ev.kind == RSD_POOL_EV_READY ? 'R'
               : ev.kind == RSD_POOL_EV_STOP ? 'S' : ev.kind == RSD_POOL_EV_EXITED ? 'X' : '?';
        out[n++] = k;
        out[n++] = (char)('0' + ev.model);
        out[n] = '\0';
    }
}


/* One slot, a resident idle "a", a request for "b": the pool's actions and events up to the
   moment the host reports a's exit. Returns how many SPAWNs came before that exit. */
static int swap_spawns_before_exit(int overlap, uint64_t budget, uint64_t a_bytes, uint64_t b_bytes,
                                   char *trace, size_t cap) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h ra, rb;
    rsd_pool_info st;
    const rsd_pool_action *stop;
    int s = -1, spawns;
    m[0] = md("a", a_bytes); m[1] = md("b", b_bytes);
    memset(&h, 0, sizeof h);
    h.p = mk_overlap(1, budget, overlap, m, 2);
    if (!h.p) { CHECK(h.p != NULL); return -1; }
    h.auto_start = true; /* loads finish at once; exits only when the test says */
    ra = get(&h, 0, NULL);
    CHECK_EQ_INT(rsd_pool_release(h.p, ra, h.now), RSD_OK);
    h.nlog = 0;
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 1, h.now, NULL, &rb, &s), RSD_PENDING);
    pump(&h);
    stop = last(&h, RSD_POOL_ACTION_STOP);
    CHECK(stop != NULL && h.log[0].kind == RSD_POOL_ACTION_STOP); /* the STOP comes out first */
    spawns = count(&h, RSD_POOL_ACTION_SPAWN);
    rsd_pool_query(h.p, &st);
    CHECK(st.live_slots <= 1);                  /* max_slots bounds the live processes */
    CHECK(st.reserved_bytes == a_bytes + (spawns ? b_bytes : 0)); /* a's bytes held until it exits */
    CHECK(!budget || st.reserved_bytes <= budget);
    CHECK_EQ_INT(spawns ? grant_of(&h, rb) != NULL : grant_of(&h, rb) == NULL, 1);
    if (!stop) { rsd_pool_destroy(h.p); return -1; }
    CHECK_EQ_INT(rsd_pool_on_exited(h.p, stop->proc, h.now), RSD_OK);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 1); /* b starts once either way */
    CHECK(grant_of(&h, rb) != NULL);
    rsd_pool_query(h.p, &st);
    CHECK(st.reserved_bytes == b_bytes && st.occupied_slots == 1);
    ev_trace(h.p, trace, cap);
    CHECK_EQ_INT(rsd_pool_release(h.p, rb, h.now), RSD_OK);
    rsd_pool_destroy(h.p);
    return spawns;
}

static void test_overlap_swap_starts_beside_the_stop_when_the_bytes_hold(void) {
    char t[64];
    /* 4 + 4 GiB fit 10 GiB: b is claimed (and loads) before a has exited */
    CHECK_EQ_INT(swap_spawns_before_exit(RSD_POOL_OVERLAP_BYTES, 10 * GiB, 4 * GiB, 4 * GiB, t, sizeof t), 1);
    CHECK_EQ_STR(t, "C0R0S0C1R1X0");
    /* 6 + 6 GiB do not: b waits for a's exit, as without overlap */
    CHECK_EQ_INT(swap_spawns_before_exit(RSD_POOL_OVERLAP_BYTES, 10 * GiB, 6 * GiB, 6 * GiB, t, sizeof t), 0);
    CHECK_EQ_STR(t, "C0R0S0X0C1R1");
    /* count only: nothing known of memory, the exit first by default; COUNT overlaps */
    CHECK_EQ_INT(swap_spawns_before_exit(RSD_POOL_OVERLAP_BYTES, 0, 4 * GiB, 4 * GiB, t, sizeof t), 0);
    CHECK_EQ_STR(t, "C0R0S0X0C1R1");
    CHECK_EQ_INT(swap_spawns_before_exit(RSD_POOL_OVERLAP_COUNT, 0, 4 * GiB, 4 * GiB, t, sizeof t), 1);
    CHECK_EQ_STR(t, "C0R0S0C1R1X0");
    /* COUNT with a budget still weighs the bytes; OFF never overlaps */
    CHECK_EQ_INT(swap_spawns_before_exit(RSD_POOL_OVERLAP_COUNT, 10 * GiB, 6 * GiB, 6 * GiB, t, sizeof t), 0);
    CHECK_EQ_INT(swap_spawns_before_exit(RSD_POOL_OVERLAP_OFF, 10 * GiB, 4 * GiB, 4 * GiB, t, sizeof t), 0);
    CHECK_EQ_STR(t, "C0R0S0X0C1R1");
    CHECK(mk_overlap(1, 0, 3, NULL, 0) == NULL); /* an unknown mode is a bad desc */
}

/* A busy process drained for a model waiting past the wait bound: its last release
   stops it and, the bytes holding both, the waiting model starts beside that stop. */
static void test_overlap_after_a_starvation_drain(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h ra, rb;
    const rsd_pool_action *stop;
    int s = -1;
    m[0] = md("a", 4 * GiB); m[1] = md("b", 4 * GiB);
    memset(&h, 0, sizeof h);
    h.p = mk_overlap(1, 10 * GiB, RSD_POOL_OVERLAP_BYTES, m, 2);
    REQUIRE(h.p);
    h.auto_start = true;
    ra = get(&h, 0, NULL);                      /* a runs a request */
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 1, h.now, NULL, &rb, &s), RSD_PENDING);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 0);
    h.now = RSD_POOL_DEFAULT_MAX_WAIT_MS + 1;
    (void)step_next(h.p, h.now);               /* b waited past the bound: a drains */
    pump(&h);
    CHECK_EQ_INT(model_state(h.p, 0), RSD_POOL_SLOT_DRAINING);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 1);
    CHECK_EQ_INT(rsd_pool_release(h.p, ra, h.now), RSD_OK);
    pump(&h);
    stop = last(&h, RSD_POOL_ACTION_STOP);
    REQUIRE(stop != NULL);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 2); /* b, before a has exited */
    CHECK(grant_of(&h, rb) != NULL);
    CHECK_EQ_INT(rsd_pool_on_exited(h.p, stop->proc, h.now), RSD_OK);
    CHECK_EQ_INT(rsd_pool_release(h.p, rb, h.now), RSD_OK);
    rsd_pool_destroy(h.p);
}

/* A start that fails beside the stop of the model evicted for it: that model is loaded
   again once it has exited (a restore, as when the start came after the exit). */
static void test_overlap_failed_start_restores_the_stopping_victim(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h ra, rb;
    rsd_pool_action stop_a, spawn_b;
    rsd_pool_info st;
    int s = -1;
    m[0] = md("a", 4 * GiB); m[1] = md("b", 4 * GiB);
    memset(&h, 0, sizeof h);
    h.p = mk_overlap(1, 10 * GiB, RSD_POOL_OVERLAP_BYTES, m, 2);
    REQUIRE(h.p);
    h.auto_start = true;
    ra = get(&h, 0, NULL);
    CHECK_EQ_INT(rsd_pool_release(h.p, ra, h.now), RSD_OK);
    h.auto_start = false;
    h.nlog = 0;
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 1, h.now, NULL, &rb, &s), RSD_PENDING);
    pump(&h);
    REQUIRE(last(&h, RSD_POOL_ACTION_STOP) && last(&h, RSD_POOL_ACTION_SPAWN));
    stop_a = *last(&h, RSD_POOL_ACTION_STOP);
    spawn_b = *last(&h, RSD_POOL_ACTION_SPAWN);
    CHECK_EQ_INT(rsd_pool_on_started(h.p, spawn_b.proc, false, h.now), RSD_OK); /* b fails, a still exiting */
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 1);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.restores, 1);
    CHECK_EQ_INT(rsd_pool_on_exited(h.p, last(&h, RSD_POOL_ACTION_STOP)->proc, h.now), RSD_OK); /* b's */
    CHECK_EQ_INT(rsd_pool_on_exited(h.p, stop_a.proc, h.now), RSD_OK);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 2); /* a again, after its exit */
    CHECK_EQ_INT(last(&h, RSD_POOL_ACTION_SPAWN)->model, 0);
    rsd_pool_destroy(h.p);
}

/* A model never starts beside its own stopping process (it may be saving its slots in
   its stop grace): a -> b overlaps a's stop, b -> a back waits for that exit. */
static void test_overlap_same_model_waits_for_its_own_exit(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h ra, rb, ra2;
    rsd_pool_action stop_a, stop_b;
    int s = -1;
    char t[64];
    m[0] = md("a", 4 * GiB); m[1] = md("b", 4 * GiB);
    memset(&h, 0, sizeof h);
    h.p = mk_overlap(1, 10 * GiB, RSD_POOL_OVERLAP_BYTES, m, 2);
    REQUIRE(h.p);
    h.auto_start = true;
    ra = get(&h, 0, NULL);
    CHECK_EQ_INT(rsd_pool_release(h.p, ra, h.now), RSD_OK);
    rb = get(&h, 1, NULL);                      /* a stops, b starts beside it */
    REQUIRE(last(&h, RSD_POOL_ACTION_STOP));
    stop_a = *last(&h, RSD_POOL_ACTION_STOP);
    CHECK(grant_of(&h, rb) != NULL);
    CHECK_EQ_INT(rsd_pool_release(h.p, rb, h.now), RSD_OK);
    h.nlog = 0;
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, h.now, NULL, &ra2, &s), RSD_PENDING);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 0); /* a is still exiting (saving) */
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 0);  /* and b stays until a may start */
    CHECK_EQ_INT(model_state(h.p, 0), RSD_POOL_SLOT_STOPPING);
    CHECK_EQ_INT(rsd_pool_on_exited(h.p, stop_a.proc, h.now), RSD_OK);
    pump(&h);
    /* now a starts, beside b's stop (4 + 4 GiB fit) */
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 1);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 1);
    CHECK(grant_of(&h, ra2) != NULL);
    REQUIRE(last(&h, RSD_POOL_ACTION_STOP));
    stop_b = *last(&h, RSD_POOL_ACTION_STOP);
    CHECK_EQ_INT(rsd_pool_on_exited(h.p, stop_b.proc, h.now), RSD_OK);
    ev_trace(h.p, t, sizeof t);
    /* a's second claim comes after its exit; b's start before a's exit, a's before b's */
    CHECK_EQ_STR(t, "C0R0S0C1R1X0S1C0R0X1");
    CHECK_EQ_INT(rsd_pool_release(h.p, ra2, h.now), RSD_OK);
    rsd_pool_destroy(h.p);
}

static void test_queue_full_and_handle_errors(void) {
    rsd_pool_model_desc m[2];
    rsd_pool_desc d;
    rsd_pool *p;
    rsd_pool_req_h r1, r2, r3, bogus;
    rsd_pool_proc_h pr;
    int s;
    m[0] = md("a", 0); m[1] = md("b", 0);
    memset(&d, 0, sizeof d);
    d.max_waiting = 2;
    d.models = m;
    d.num_models = 2;
    p = rsd_pool_create(&d);
    REQUIRE(p);
    CHECK_EQ_INT(rsd_pool_acquire(p, 0, 0, NULL, &r1, &s), RSD_PENDING);
    CHECK_EQ_INT(rsd_pool_acquire(p, 1, 0, NULL, &r2, &s), RSD_PENDING);
    CHECK_EQ_INT(rsd_pool_acquire(p, 1, 0, NULL, &r3, &s), RSD_ERR_POOL_QUEUE_FULL);
    CHECK_EQ_INT(rsd_pool_acquire(p, 7, 0, NULL, &r3, &s), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_pool_release(p, r1, 0), RSD_ERR_STATE); /* waiting: cancel, not release */
    bogus.id = r1.id ^ (1u << 20);
    CHECK_EQ_INT(rsd_pool_cancel(p, bogus, 0), RSD_ERR_POOL_STALE);
    bogus.id = 0;
    CHECK_EQ_INT(rsd_pool_cancel(p, bogus, 0), RSD_ERR_POOL_STALE);
    CHECK_EQ_INT(rsd_pool_cancel(p, r1, 0), RSD_OK);
    CHECK_EQ_INT(rsd_pool_cancel(p, r1, 0), RSD_ERR_POOL_STALE);
    pr.id = 0x12345;
    CHECK_EQ_INT(rsd_pool_on_exited(p, pr, 0), RSD_ERR_POOL_STALE);
    CHECK_EQ_INT(rsd_pool_on_started(p, pr, true, 0), RSD_ERR_POOL_STALE);
    CHECK_EQ_INT(rsd_pool_proc_slot(pr), -1);
    CHECK_EQ_INT(rsd_pool_find_model(p, rsd_str_c("b")), 1);
    CHECK_EQ_INT(rsd_pool_find_model(p, rsd_str_c("bb")), RSD_ERR_NOT_FOUND);
    CHECK_EQ_INT(rsd_pool_add_model(p, &m[0]), RSD_ERR_ARG); /* duplicate */
    rsd_pool_destroy(p);
}

static int fail_after;
static void *lim_alloc(size_t n, void *u) { (void)u; return fail_after-- > 0 ? malloc(n) : NULL; }
static void lim_free(void *p, void *u) { (void)u; free(p); }

static void test_create_rejects_bad_desc_and_survives_oom(void) {
    rsd_pool_desc d;
    rsd_pool_model_desc bad = md("", 0), big;
    char longid[200];
    memset(&d, 0, sizeof d);
    d.allocator.alloc_fn = lim_alloc;
    CHECK(rsd_pool_create(&d) == NULL); /* half an allocator */
    d.allocator.free_fn = lim_free;
    fail_after = 0;
    CHECK(rsd_pool_create(&d) == NULL); /* OOM */
    fail_after = 1;
    d.models = &bad;
    d.num_models = 1;
    CHECK(rsd_pool_create(&d) == NULL); /* empty id */
    memset(longid, 'x', sizeof longid - 1);
    longid[sizeof longid - 1] = 0;
    big = md(longid, 0);
    d.models = &big;
    CHECK(rsd_pool_create(&d) == NULL);
    d.models = NULL;
    d.num_models = 0;
    d.max_requests = RSD_POOL_MAX_REQUESTS + 1;
    CHECK(rsd_pool_create(&d) == NULL);
    {
        rsd_pool *p0 = rsd_pool_create(NULL); /* NULL reads as the defaults, as every create */
        CHECK(p0 != NULL);
        rsd_pool_destroy(p0);
    }
}

static void test_unload_drain_while_starting_serves_its_waiters_then_stops(void) {
    rsd_pool_model_desc m = md("a", 0);
    host h;
    rsd_pool_req_h r;
    rsd_pool_action a;
    int s;
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, &m, 1);
    REQUIRE(h.p);
    rsd_pool_acquire(h.p, 0, 0, NULL, &r, &s);
    REQUIRE(rsd_pool_next_action(h.p, &a) && a.kind == RSD_POOL_ACTION_SPAWN);
    CHECK_EQ_INT(rsd_pool_unload(h.p, 0, 0, 1), RSD_ERR_POOL_BUSY); /* loading counts as busy */
    CHECK_EQ_INT(rsd_pool_unload(h.p, 0, RSD_POOL_UNLOAD_DRAIN, 1), RSD_PENDING);
    CHECK_EQ_INT(rsd_pool_on_started(h.p, a.proc, true, 2), RSD_OK);
    pump(&h);
    CHECK(grant_of(&h, r) != NULL);
    CHECK_EQ_INT(model_state(h.p, 0), RSD_POOL_SLOT_DRAINING);
    rsd_pool_release(h.p, r, 3);
    pump(&h);
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_UNLOAD), 1);
    rsd_pool_destroy(h.p);
}

static void test_stop_before_spawn_is_pulled_emits_no_stop(void) {
    rsd_pool_model_desc m = md("a", 5 * GiB);
    host h;
    rsd_pool_req_h r;
    rsd_pool_info st;
    int s;
    memset(&h, 0, sizeof h);
    h.p = mk(1, 8 * GiB, &m, 1);
    REQUIRE(h.p);
    rsd_pool_acquire(h.p, 0, 0, NULL, &r, &s);
    CHECK_EQ_INT(rsd_pool_stop(h.p, 1), RSD_OK);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 0);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 0);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_FAIL), 1);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.occupied_slots, 0);
    CHECK_EQ_INT(st.reserved_bytes, 0);
    CHECK(st.stopped);
    CHECK_EQ_INT(rsd_pool_stop(h.p, 2), RSD_OK); /* idempotent */
    rsd_pool_destroy(h.p);
}

static void test_waiting_models_are_served_fifo_without_thrash(void) {
    rsd_pool_model_desc m[3];
    host h;
    rsd_pool_req_h a, b, c;
    int s, i, spawned_c_before_b = 0, seen_b = 0;
    m[0] = md("a", 0); m[1] = md("b", 0); m[2] = md("c", 0);
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, m, 3);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    a = get(&h, 0, NULL);
    rsd_pool_acquire(h.p, 1, 1, NULL, &b, &s);
    rsd_pool_acquire(h.p, 2, 2, NULL, &c, &s);
    rsd_pool_release(h.p, a, 3);
    pump(&h);
    CHECK(grant_of(&h, b) != NULL);
    CHECK(grant_of(&h, c) == NULL);
    for (i = 0; i < h.nlog; i++) {
        if (h.log[i].kind != RSD_POOL_ACTION_SPAWN) continue;
        if (h.log[i].model == 1) seen_b = 1;
        if (h.log[i].model == 2 && !seen_b) spawned_c_before_b = 1;
    }
    CHECK(!spawned_c_before_b);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 1); /* b's load was not evicted for c */
    rsd_pool_release(h.p, b, 4);
    pump(&h);
    CHECK(grant_of(&h, c) != NULL);
    rsd_pool_destroy(h.p);
}

static uint32_t log_items[64];
static int n_log_items;
static void cap_log(void *u, int level, uint32_t item, const char *msg, const char *where) {
    (void)u; (void)level; (void)msg; (void)where;
    if (n_log_items < 64) log_items[n_log_items++] = item;
}

static int logged(uint32_t item) {
    int i;
    for (i = 0; i < n_log_items; i++) if (log_items[i] == item) return 1;
    return 0;
}

static void test_logger_reports_evictions_failures_and_bad_desc(void) {
    rsd_pool_model_desc m[2];
    rsd_pool_desc d;
    host h;
    rsd_pool_req_h r;
    int s;
    m[0] = md("a", 0); m[1] = md("b", 0);
    memset(&d, 0, sizeof d);
    d.models = m;
    d.num_models = 2;
    d.logger.fn = cap_log;
    n_log_items = 0;
    memset(&h, 0, sizeof h);
    h.p = rsd_pool_create(&d);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    preload(&h, 0);
    preload(&h, 1);
    CHECK(logged(RSD_LOGITEM_POOL_EVICT));
    CHECK(logged(RSD_LOGITEM_POOL_STOP));
    rsd_pool_stop(h.p, 1);
    CHECK(logged(RSD_LOGITEM_POOL_STOPPED));
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 2, NULL, &r, &s), RSD_ERR_POOL_STOPPED);
    rsd_pool_destroy(h.p);
    d.max_requests = RSD_POOL_MAX_REQUESTS + 1;
    CHECK(rsd_pool_create(&d) == NULL);
    CHECK(logged(RSD_LOGITEM_POOL_BAD_DESC));
    CHECK_EQ_STR(rsd_log_item_name(RSD_LOGITEM_POOL_EVICT), "POOL_EVICT");
    CHECK_EQ_STR(rsd_result_name(RSD_ERR_POOL_PINNED), "ERR_POOL_PINNED");
}

static void test_pin_wins_over_a_starvation_drain(void) {
    rsd_pool_model_desc m[2];
    rsd_pool_desc d;
    host h;
    rsd_pool_req_h a, a2, b;
    int s;
    m[0] = md("a", 0); m[1] = md("b", 0);
    memset(&d, 0, sizeof d);
    d.max_slots = 1;
    d.max_wait_ms = 100;
    d.models = m;
    d.num_models = 2;
    memset(&h, 0, sizeof h);
    h.p = rsd_pool_create(&d);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    a = get(&h, 0, NULL);
    rsd_pool_acquire(h.p, 1, 0, NULL, &b, &s);
    rsd_pool_step(h.p, 200);
    CHECK_EQ_INT(model_state(h.p, 0), RSD_POOL_SLOT_DRAINING);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 201, NULL, &a2, &s), RSD_PENDING);
    CHECK_EQ_INT(rsd_pool_set_pinned(h.p, 0, true, 202), RSD_OK);
    pump(&h);
    CHECK_EQ_INT(model_state(h.p, 0), RSD_POOL_SLOT_READY);
    CHECK(grant_of(&h, a2) != NULL); /* the queued request runs again */
    CHECK(grant_of(&h, b) == NULL);
    rsd_pool_release(h.p, a, 203);
    rsd_pool_release(h.p, a2, 203);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 0);
    rsd_pool_destroy(h.p);
}

static void test_release_before_fail_is_pulled_frees_the_handle(void) {
    rsd_pool_model_desc m = md("a", 0);
    host h;
    rsd_pool_req_h r;
    rsd_pool_action a;
    int s;
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, &m, 1);
    REQUIRE(h.p);
    rsd_pool_acquire(h.p, 0, 0, NULL, &r, &s);
    REQUIRE(rsd_pool_next_action(h.p, &a) && a.kind == RSD_POOL_ACTION_SPAWN);
    CHECK_EQ_INT(rsd_pool_on_started(h.p, a.proc, false, 1), RSD_OK);
    CHECK_EQ_INT(rsd_pool_on_started(h.p, a.proc, true, 1), RSD_ERR_STATE);
    CHECK_EQ_INT(rsd_pool_cancel(h.p, r, 2), RSD_OK); /* FAIL not pulled yet */
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_FAIL), 0);
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_LOAD_FAILED), 1);
    rsd_pool_destroy(h.p);
}

static void test_preload_loads_and_leaves_resident_without_a_request(void) {
    rsd_pool_model_desc m[3];
    host h;
    rsd_pool_info st;
    rsd_pool_model_info mi;
    rsd_pool_action a;
    m[0] = md("a", 0); m[1] = md("b", 0); m[2] = md("c", 0);
    m[1].ttl_ms = 1000;
    memset(&h, 0, sizeof h);
    h.p = mk(2, 0, m, 3);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    CHECK_EQ_INT(rsd_pool_preload(h.p, 0, 0), RSD_PENDING);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.preloads, 1);
    CHECK_EQ_INT(st.waiting, 0);
    /* the model's own counts agree: a preload is not a waiting request */
    rsd_pool_query_model(h.p, 0, &mi);
    CHECK_EQ_INT(mi.waiting, 0);
    CHECK_EQ_INT(mi.preloads, 1);
    CHECK_EQ_INT(rsd_pool_preload(h.p, 0, 0), RSD_OK); /* already loading */
    pump(&h);
    CHECK_EQ_INT(rsd_pool_preload(h.p, 0, 1), RSD_OK); /* resident */
    CHECK_EQ_INT(rsd_pool_preload(h.p, 1, 2), RSD_PENDING);
    pump(&h);
    CHECK_EQ_INT(rsd_pool_preload(h.p, 2, 3), RSD_PENDING);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_GRANT), 0);
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_EVICT), 1);
    REQUIRE(last(&h, RSD_POOL_ACTION_STOP));
    CHECK_EQ_INT(last(&h, RSD_POOL_ACTION_STOP)->model, 0);
    CHECK_EQ_INT(model_state(h.p, 1), RSD_POOL_SLOT_READY);
    CHECK_EQ_INT(model_state(h.p, 2), RSD_POOL_SLOT_READY);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.preloads, 0);
    CHECK_EQ_INT(st.running, 0);
    CHECK(step_next(h.p, 3) == 1002); /* b idle since its load finished at 2 */
    /* a preload whose load fails leaves nothing to tell */
    h.auto_start = false;
    h.nlog = 0;
    CHECK_EQ_INT(rsd_pool_unload(h.p, -1, 0, 4), RSD_OK);
    pump(&h);
    CHECK_EQ_INT(rsd_pool_preload(h.p, 0, 5), RSD_PENDING);
    REQUIRE(rsd_pool_next_action(h.p, &a) && a.kind == RSD_POOL_ACTION_SPAWN);
    CHECK_EQ_INT(rsd_pool_on_started(h.p, a.proc, false, 6), RSD_OK);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_FAIL), 0);
    rsd_pool_destroy(h.p);
}

static void test_measured_reservation_replaces_the_estimate(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h b;
    rsd_pool_info st;
    int s;
    m[0] = md("a", 6 * GiB); m[1] = md("b", 6 * GiB);
    memset(&h, 0, sizeof h);
    h.p = mk(2, 10 * GiB, m, 2);
    REQUIRE(h.p);
    h.auto_start = true;
    (void)get(&h, 0, NULL); /* busy, so b cannot evict it */
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 1, 0, NULL, &b, &s), RSD_PENDING);
    pump(&h);
    CHECK(grant_of(&h, b) == NULL);
    REQUIRE(last(&h, RSD_POOL_ACTION_SPAWN));
    CHECK_EQ_INT(rsd_pool_set_reserved(h.p, last(&h, RSD_POOL_ACTION_SPAWN)->proc, 4 * GiB, 1), RSD_OK);
    pump(&h);
    CHECK(grant_of(&h, b) != NULL); /* 4 + 6 fits in 10 */
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.reserved_bytes, 10 * GiB);
    rsd_pool_destroy(h.p);
}

static void test_crash_before_grant_is_pulled_fails_the_request(void) {
    rsd_pool_model_desc m = md("a", 0);
    host h;
    rsd_pool_req_h r1, r2;
    rsd_pool_action a;
    const rsd_pool_action *f;
    int s;
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, &m, 1);
    REQUIRE(h.p);
    rsd_pool_acquire(h.p, 0, 0, NULL, &r1, &s);
    rsd_pool_acquire(h.p, 0, 0, NULL, &r2, &s);
    REQUIRE(rsd_pool_next_action(h.p, &a) && a.kind == RSD_POOL_ACTION_SPAWN);
    CHECK_EQ_INT(rsd_pool_on_started(h.p, a.proc, true, 1), RSD_OK);
    CHECK_EQ_INT(rsd_pool_on_exited(h.p, a.proc, 2), RSD_OK); /* crash; GRANTs not pulled */
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_GRANT), 0);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_FAIL), 2);
    f = last(&h, RSD_POOL_ACTION_FAIL);
    REQUIRE(f);
    CHECK_EQ_INT(f->result, RSD_ERR_POOL_CRASHED);
    CHECK_EQ_INT(f->slot, -1);
    CHECK_EQ_INT(rsd_pool_release(h.p, r1, 3), RSD_ERR_POOL_STALE);
    rsd_pool_destroy(h.p);
}

static void test_w26_drain_is_lifted_when_the_starving_request_leaves(void) {
    rsd_pool_model_desc m[2];
    rsd_pool_desc d;
    host h;
    rsd_pool_req_h a, a2, b;
    int s;
    m[0] = md("a", 0); m[1] = md("b", 0);
    memset(&d, 0, sizeof d);
    d.max_slots = 1;
    d.max_wait_ms = 100;
    d.models = m;
    d.num_models = 2;
    memset(&h, 0, sizeof h);
    h.p = rsd_pool_create(&d);
    REQUIRE(h.p);
    h.auto_start = h.auto_exit = true;
    a = get(&h, 0, NULL);
    rsd_pool_acquire(h.p, 1, 0, NULL, &b, &s);
    rsd_pool_step(h.p, 200);
    CHECK_EQ_INT(model_state(h.p, 0), RSD_POOL_SLOT_DRAINING);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 201, NULL, &a2, &s), RSD_PENDING);
    CHECK_EQ_INT(rsd_pool_cancel(h.p, b, 202), RSD_OK); /* the starving client left */
    pump(&h);
    CHECK_EQ_INT(model_state(h.p, 0), RSD_POOL_SLOT_READY);
    CHECK(grant_of(&h, a2) != NULL);
    rsd_pool_release(h.p, a, 203);
    rsd_pool_release(h.p, a2, 203);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 0);
    rsd_pool_destroy(h.p);
}

/* The process's own concurrency (set_slot_limit, e.g. llama-server's total_slots)
   bounds what is sent to it, beside the model's max_in_flight (the smaller wins); a
   larger limit admits the waiters at once. */
static void test_slot_limit(void) {
    rsd_pool_model_desc m = md("a", 0);
    rsd_pool_info st;
    host h;
    rsd_pool_req_h r[6];
    rsd_pool_action a;
    int s, i, granted = 0;
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, &m, 1);
    REQUIRE(h.p);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 0, NULL, &r[0], &s), RSD_PENDING);
    REQUIRE(rsd_pool_next_action(h.p, &a) && a.kind == RSD_POOL_ACTION_SPAWN);
    CHECK_EQ_INT(rsd_pool_set_slot_limit(h.p, a.proc, 2, 1), RSD_OK); /* before READY */
    CHECK_EQ_INT(rsd_pool_on_started(h.p, a.proc, true, 1), RSD_OK);
    for (i = 1; i < 4; i++) {
        int rc = rsd_pool_acquire(h.p, 0, 2, NULL, &r[i], &s);
        if (rc == RSD_OK) granted++;
        else CHECK_EQ_INT(rc, RSD_PENDING);
    }
    pump(&h);
    CHECK_EQ_INT(granted + count(&h, RSD_POOL_ACTION_GRANT), 2); /* r0 and r1 */
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.running, 2);
    CHECK_EQ_INT(st.waiting, 2);
    CHECK_EQ_INT(st.slots[0].max_in_flight, 2);
    CHECK_EQ_INT(rsd_pool_release(h.p, r[0], 3), RSD_OK); /* one leaves, one goes in */
    pump(&h);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.running, 2);
    CHECK_EQ_INT(st.waiting, 1);
    CHECK_EQ_INT(rsd_pool_set_slot_limit(h.p, a.proc, 8, 4), RSD_OK); /* grows: admitted */
    pump(&h);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.running, 3);
    CHECK_EQ_INT(st.waiting, 0);
    CHECK_EQ_INT(st.slots[0].max_in_flight, 8);
    rsd_pool_destroy(h.p);
    /* with a model limit too, the smaller one applies */
    m.max_in_flight = 3;
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, &m, 1);
    REQUIRE(h.p);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 0, NULL, &r[0], &s), RSD_PENDING);
    REQUIRE(rsd_pool_next_action(h.p, &a) && a.kind == RSD_POOL_ACTION_SPAWN);
    CHECK_EQ_INT(rsd_pool_set_slot_limit(h.p, a.proc, 8, 1), RSD_OK);
    CHECK_EQ_INT(rsd_pool_on_started(h.p, a.proc, true, 1), RSD_OK);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.slots[0].max_in_flight, 3);
    CHECK_EQ_INT(rsd_pool_set_slot_limit(h.p, a.proc, 1, 2), RSD_OK);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.slots[0].max_in_flight, 1);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 3, NULL, &r[1], &s), RSD_PENDING); /* r0 runs */
    a.proc.id ^= 0x100; /* a stale process */
    CHECK_EQ_INT(rsd_pool_set_slot_limit(h.p, a.proc, 4, 3), RSD_ERR_POOL_STALE);
    rsd_pool_destroy(h.p);
}

/* ---- failed starts: backoff and restore ------------------------------------------- */
/* A host whose starts of model `bad` fail: every SPAWN of it gets on_started(false) and
   then on_exited; other SPAWNs start fine; STOPs exit at once. */
static void pump_bad(host *h, int bad) {
    rsd_pool_action a;
    while (rsd_pool_next_action(h->p, &a)) {
        if (h->nlog < 1024) h->log[h->nlog++] = a;
        if (a.kind == RSD_POOL_ACTION_SPAWN) rsd_pool_on_started(h->p, a.proc, a.model != bad, h->now);
        if (a.kind == RSD_POOL_ACTION_STOP) rsd_pool_on_exited(h->p, a.proc, h->now);
    }
}

/* A failed start backs the model off: 1 s, doubling, capped; requests meanwhile are
   refused at once (nothing spawned, nothing queued); a READY, an explicit preload or a
   reset clears it. */
static void test_failed_start_backs_off(void) {
    rsd_pool_model_desc m = md("a", 0);
    rsd_pool_model_info mi;
    rsd_pool_info st;
    rsd_pool_desc d;
    host h;
    rsd_pool_req_h r;
    int s, i;
    memset(&d, 0, sizeof d);
    d.max_slots = 1;
    d.models = &m;
    d.num_models = 1;
    d.start_backoff_max_ms = 8000;
    memset(&h, 0, sizeof h);
    h.p = rsd_pool_create(&d);
    REQUIRE(h.p);
    h.now = 1000;
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, h.now, NULL, &r, &s), RSD_PENDING);
    pump_bad(&h, 0);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_FAIL), 1);
    CHECK_EQ_INT(last(&h, RSD_POOL_ACTION_FAIL)->result, RSD_ERR_POOL_LOAD_FAILED);
    rsd_pool_query_model(h.p, 0, &mi);
    CHECK_EQ_INT(mi.start_failures, 1);
    CHECK_EQ_INT(mi.retry_at_ms, 2000);
    h.now = 1999;
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, h.now, NULL, &r, &s), RSD_ERR_POOL_BACKOFF);
    CHECK_EQ_INT(r.id, 0);
    pump_bad(&h, 0);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 1);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.waiting, 0);
    CHECK_EQ_INT(st.backoffs, 1);
    /* after the backoff it is tried again; failures double the wait up to the cap */
    for (i = 0; i < 5; i++) {
        rsd_pool_query_model(h.p, 0, &mi);
        h.now = mi.retry_at_ms;
        CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, h.now, NULL, &r, &s), RSD_PENDING);
        pump_bad(&h, 0);
    }
    rsd_pool_query_model(h.p, 0, &mi);
    CHECK_EQ_INT(mi.start_failures, 6);
    CHECK_EQ_INT(mi.retry_at_ms - h.now, 8000); /* 1, 2, 4, 8, 8, 8 s */
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 6);
    /* reset: the next request starts it */
    CHECK_EQ_INT(rsd_pool_reset_backoff(h.p, -1), RSD_OK);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, h.now, NULL, &r, &s), RSD_PENDING);
    pump_bad(&h, 0);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 7);
    /* an explicit load ignores the backoff; a READY clears it */
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, h.now, NULL, &r, &s), RSD_ERR_POOL_BACKOFF);
    CHECK_EQ_INT(rsd_pool_preload(h.p, 0, h.now), RSD_PENDING);
    pump_bad(&h, -1);
    rsd_pool_query_model(h.p, 0, &mi);
    CHECK_EQ_INT(mi.state, RSD_POOL_SLOT_READY);
    CHECK_EQ_INT(mi.start_failures, 0);
    CHECK_EQ_INT(mi.retry_at_ms, 0);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, h.now, NULL, &r, &s), RSD_OK);
    CHECK_EQ_INT(rsd_pool_reset_backoff(h.p, 1), RSD_ERR_ARG);
    rsd_pool_destroy(h.p);
}

/* An exit while STARTING is a failed start too (backoff); a crash after READY is not. */
static void test_crash_while_starting_backs_off(void) {
    rsd_pool_model_desc m = md("a", 0);
    rsd_pool_model_info mi;
    rsd_pool_action a;
    host h;
    rsd_pool_req_h r;
    int s;
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, &m, 1);
    REQUIRE(h.p);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 10, NULL, &r, &s), RSD_PENDING);
    REQUIRE(rsd_pool_next_action(h.p, &a) && a.kind == RSD_POOL_ACTION_SPAWN);
    CHECK_EQ_INT(rsd_pool_on_exited(h.p, a.proc, 20), RSD_OK);
    rsd_pool_query_model(h.p, 0, &mi);
    CHECK_EQ_INT(mi.start_failures, 1);
    CHECK_EQ_INT(mi.retry_at_ms, 1020);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 30, NULL, &r, &s), RSD_ERR_POOL_BACKOFF);
    h.now = 1020;
    h.auto_start = true;
    (void)get(&h, 0, &s); /* starts now */
    REQUIRE(s >= 0);
    rsd_pool_query_model(h.p, 0, &mi);
    CHECK_EQ_INT(mi.start_failures, 0);
    CHECK_EQ_INT(rsd_pool_on_exited(h.p, last(&h, RSD_POOL_ACTION_SPAWN)->proc, 1030), RSD_OK); /* crash */
    rsd_pool_query_model(h.p, 0, &mi);
    CHECK_EQ_INT(mi.retry_at_ms, 0);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 1031, NULL, &r, &s), RSD_PENDING); /* respawned at once */
    rsd_pool_destroy(h.p);
}

/* A model that cannot start does not cost a healthy one: the idle model evicted to make
   room for it is loaded again when the start fails, and the requests that follow are
   refused by the backoff instead of evicting it again (one eviction, not three). */
static void test_failed_start_restores_the_evicted_model(void) {
    rsd_pool_model_desc m[2];
    rsd_pool_model_info mi;
    rsd_pool_info st;
    host h;
    rsd_pool_req_h r;
    int s, i;
    m[0] = md("good", 0); m[1] = md("bad", 0);
    memset(&h, 0, sizeof h);
    h.p = mk(1, 0, m, 2);
    REQUIRE(h.p);
    h.now = 100;
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, h.now, NULL, &r, &s), RSD_PENDING);
    pump_bad(&h, 1);
    REQUIRE(grant_of(&h, r));
    CHECK_EQ_INT(rsd_pool_release(h.p, r, h.now), RSD_OK); /* good: ready and idle */
    for (i = 0; i < 3; i++) { /* three requests for the bad model */
        h.now += 10;
        (void)rsd_pool_acquire(h.p, 1, h.now, NULL, &r, &s);
        pump_bad(&h, 1);
    }
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.evictions, 1);
    CHECK_EQ_INT(st.restores, 1);
    CHECK_EQ_INT(st.backoffs, 2);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_FAIL), 1);
    CHECK_EQ_INT(model_state(h.p, 0), RSD_POOL_SLOT_READY); /* good is back */
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 3);     /* good, bad, good again */
    rsd_pool_query_model(h.p, 0, &mi);
    CHECK_EQ_INT(mi.start_failures, 0);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, h.now, NULL, &r, &s), RSD_OK);
    CHECK_EQ_INT(rsd_pool_release(h.p, r, h.now), RSD_OK);
    /* a start that succeeds keeps its eviction */
    h.now += 5000;
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 1, h.now, NULL, &r, &s), RSD_PENDING);
    pump_bad(&h, -1);
    CHECK(grant_of(&h, r) != NULL);
    CHECK_EQ_INT(model_state(h.p, 0), RSD_POOL_SLOT_EMPTY);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.evictions, 2);
    CHECK_EQ_INT(st.restores, 1);
    CHECK_EQ_INT(rsd_pool_release(h.p, r, h.now), RSD_OK);
    rsd_pool_destroy(h.p);
}

/* ---- property test ------------------------------------------------------------------ */
static void test_property_random_operations_keep_invariants(void) {
    rsd_pool_model_desc m[5];
    rsd_pool_desc d;
    static psim s;
    uint32_t seed;
    int run, i;
    for (run = 0; run < 4; run++) {
        rsd_pool_event ev;
        memset(&s, 0, sizeof s);
        m[0] = md("m0", 3 * GiB); m[1] = md("m1", 4 * GiB); m[2] = md("m2", 5 * GiB);
        m[3] = md("m3", 2 * GiB); m[4] = md("m4", 6 * GiB);
        m[0].ttl_ms = 3000; m[2].ttl_ms = 500; m[1].max_in_flight = 2; m[3].max_in_flight = 1;
        m[4].pinned = run & 1;
        memset(&d, 0, sizeof d);
        d.max_slots = 2;
        d.vram_budget_bytes = 10 * GiB;
        d.max_wait_ms = run >= 2 ? 2000 : RSD_POOL_WAIT_FOREVER;
        d.overlap = run == 0 ? RSD_POOL_OVERLAP_OFF : RSD_POOL_OVERLAP_BYTES;
        d.max_requests = 256;
        d.event_log = 64;
        d.models = m;
        d.num_models = 5;
        s.pool = rsd_pool_create(&d);
        REQUIRE(s.pool);
        s.nmodels = 5;
        s.max_now = 2;
        s.overlap = d.overlap != RSD_POOL_OVERLAP_OFF;
        s.lease_budget = 10 * GiB;
        seed = 12345u + (uint32_t)run * 7919u;
        for (i = 0; i < 20000 && !s.err[0]; i++) {
            unsigned op, arg;
            seed ^= seed << 13; seed ^= seed >> 17; seed ^= seed << 5;
            op = seed & 0xFF;
            arg = seed >> 8;
            if ((op & 0xF8) == 0xF8 && run >= 1) { /* now and then a lease taken or given back */
                if (psim_lease(&s, (arg & 1) == 0, arg >> 1) < 0 || psim_pump(&s) < 0 ||
                    psim_check(&s, 2, 10 * GiB) < 0)
                    break;
            } else if (psim_op(&s, op, arg, 2, 10 * GiB) < 0) {
                break;
            }
            while (rsd_pool_next_event(s.pool, &ev)) { /* only idle, unpinned slots were evicted */
                if (ev.kind == RSD_POOL_EV_STOP && (ev.why == RSD_POOL_WHY_EVICT ||
                    ev.why == RSD_POOL_WHY_TTL || ev.why == RSD_POOL_WHY_TRIM ||
                    ev.why == RSD_POOL_WHY_LEASE))
                    if (ev.in_flight != 0 || ev.pinned) psim_fail(&s, "evicted a busy or pinned slot");
            }
        }
        if (!s.err[0]) psim_drain(&s, 2, 10 * GiB);
        if (s.err[0]) printf("  run %d op %d: %s\n", run, i, s.err);
        CHECK(s.err[0] == 0);
        CHECK(s.granted > 1000);
        rsd_pool_destroy(s.pool);
    }
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    RUN(test_serves_different_models_concurrently_in_independent_processes);
    RUN(test_model_info_last_used_ms);
    RUN(test_evicts_the_least_recently_used_idle_model_when_the_limit_is_full);
    RUN(test_waits_instead_of_evicting_a_process_that_is_still_serving);
    RUN(test_keeps_serving_resident_models_while_an_unloaded_model_waits);
    RUN(test_sched_runs_up_to_parallel_slots_requests_at_once);
    RUN(test_sched_loads_the_requested_model_when_a_different_one_is_resident);
    RUN(test_sched_a_model_that_fails_to_load_rejects_only_its_own_jobs);
    RUN(test_sched_stats_reports_the_pending_queue_by_model);
    RUN(test_sched_a_third_chat_waits_for_a_slot_and_runs_as_soon_as_one_frees);
    RUN(test_sched_a_queued_different_model_gets_its_turn_once_the_open_turn_drains);
    RUN(test_sched_never_dispatches_more_jobs_than_slots_across_a_long_burst);
    RUN(test_router_a_client_departure_mid_stream_releases_the_slot);
    RUN(test_router_an_upstream_hang_up_rejects_only_the_dead_request);
    RUN(test_w21_reserve_at_claim_no_concurrent_overcommit);
    RUN(test_w22_evicts_by_bytes_in_lru_order);
    RUN(test_w23_measured_vram_and_foreign_use);
    RUN(test_foreign_held_start);
    RUN(test_evicts_no_victim_the_others_make_unneeded);
    RUN(test_w24_eviction_does_not_stall_dispatch);
    RUN(test_w25_dispatch_work_independent_of_queue_length);
    RUN(test_w26_starving_request_drains_its_victim);
    RUN(test_w27_failed_load_frees_slot_and_reservation);
    RUN(test_w27_crash_frees_slot_and_reservation_at_once);
    RUN(test_restart_keeps_the_waiters);
    RUN(test_restart_keeps_a_waiting_unload);
    RUN(test_w28_stop_refuses_later_work);
    RUN(test_w29_unload_refuses_or_drains);
    RUN(test_w34_stats_complete);
    RUN(test_inflight_counted_at_admission_not_dispatch);
    RUN(test_pinned_model_is_never_evicted_ttl_unloaded_or_trimmed);
    RUN(test_set_model_changes_ttl_cap_and_pin);
    RUN(test_ttl_expiry_counts_from_the_last_request_finished);
    RUN(test_configure_trims_idle_excess_lru_first_and_busy_later);
    RUN(test_p4_max_slots_normalised);
    RUN(test_model_that_can_never_fit_fails_at_once);
    RUN(test_byte_budget_admission_waits_then_fits);
    RUN(test_overlap_swap_starts_beside_the_stop_when_the_bytes_hold);
    RUN(test_overlap_same_model_waits_for_its_own_exit);
    RUN(test_overlap_after_a_starvation_drain);
    RUN(test_overlap_failed_start_restores_the_stopping_victim);
    RUN(test_queue_full_and_handle_errors);
    RUN(test_create_rejects_bad_desc_and_survives_oom);
    RUN(test_unload_drain_while_starting_serves_its_waiters_then_stops);
    RUN(test_stop_before_spawn_is_pulled_emits_no_stop);
    RUN(test_waiting_models_are_served_fifo_without_thrash);
    RUN(test_logger_reports_evictions_failures_and_bad_desc);
    RUN(test_pin_wins_over_a_starvation_drain);
    RUN(test_release_before_fail_is_pulled_frees_the_handle);
    RUN(test_preload_loads_and_leaves_resident_without_a_request);
    RUN(test_measured_reservation_replaces_the_estimate);
    RUN(test_crash_before_grant_is_pulled_fails_the_request);
    RUN(test_w26_drain_is_lifted_when_the_starving_request_leaves);
    RUN(test_slot_limit);
    RUN(test_failed_start_backs_off);
    RUN(test_crash_while_starting_backs_off);
    RUN(test_failed_start_restores_the_evicted_model);
    RUN(test_property_random_operations_keep_invariants);
    return RSD_TEST_END();
}
