/* Process-pool sharing policy: exclusive requests, collation of queued requests by
   model (ABCABC served as AABBCC) with the age bound, several loads started at once,
   and byte leases (room in the VRAM budget for a workload outside the pool). */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency.h"
#include "rsd_test.h"

#include "pool_host.h"

static void start(host *h, int max_slots, uint64_t budget, const rsd_pool_model_desc *m, int n,
                  uint32_t max_wait_ms) {
    rsd_pool_desc d;
    memset(h, 0, sizeof *h);
    memset(&d, 0, sizeof d);
    d.max_slots = max_slots;
    d.vram_budget_bytes = budget;
    d.models = m;
    d.num_models = n;
    d.max_wait_ms = max_wait_ms;
    h->p = rsd_pool_create(&d);
    h->auto_start = h->auto_exit = true;
}

static uint32_t in_flight(rsd_pool *p, int model) {
    rsd_pool_model_info mi;
    rsd_pool_query_model(p, model, &mi);
    return mi.running;
}

static rsd_pool_slot_state state_of(rsd_pool *p, int model) {
    rsd_pool_model_info mi;
    rsd_pool_query_model(p, model, &mi);
    return mi.state;
}

/* ---- exclusive requests ------------------------------------------------------ */
static void test_exclusive_waits_for_the_drain_and_runs_alone(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h a1, a2, ex, a3, b1;
    rsd_pool_info st;
    int s = -1;
    m[0] = md("a", 0); m[1] = md("b", 0);
    m[0].max_in_flight = 4;
    start(&h, 2, 0, m, 2, RSD_POOL_WAIT_FOREVER);
    REQUIRE(h.p);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 1, NULL, &a1, &s), RSD_PENDING);
    pump(&h);
    CHECK((grant_of(&h, a1) != NULL));
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 2, NULL, &a2, &s), RSD_OK);
    /* The exclusive one waits for a1 and a2; a3 arrives later and queues behind it. */
    CHECK_EQ_INT(rsd_pool_acquire_ex(h.p, 0, RSD_POOL_ACQUIRE_EXCLUSIVE, 3, NULL, &ex, &s), RSD_PENDING);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 4, NULL, &a3, &s), RSD_PENDING);
    pump(&h);
    CHECK(!(grant_of(&h, ex) != NULL));
    CHECK(!(grant_of(&h, a3) != NULL));
    /* Other models keep flowing. */
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 1, 5, NULL, &b1, &s), RSD_PENDING);
    pump(&h);
    CHECK((grant_of(&h, b1) != NULL));
    CHECK_EQ_INT(rsd_pool_release(h.p, a1, 6), RSD_OK);
    pump(&h);
    CHECK(!(grant_of(&h, ex) != NULL));
    CHECK_EQ_INT(rsd_pool_release(h.p, a2, 7), RSD_OK);
    pump(&h);
    CHECK((grant_of(&h, ex) != NULL));
    CHECK(!(grant_of(&h, a3) != NULL));
    CHECK_EQ_INT(in_flight(h.p, 0), 1);
    rsd_pool_query(h.p, &st);
    CHECK(st.slots[last(&h, RSD_POOL_ACTION_GRANT)->slot].exclusive);
    CHECK_EQ_INT(rsd_pool_release(h.p, ex, 8), RSD_OK);
    pump(&h);
    CHECK((grant_of(&h, a3) != NULL));
    rsd_pool_query(h.p, &st);
    CHECK(!st.slots[last(&h, RSD_POOL_ACTION_GRANT)->slot].exclusive);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 0); /* a drain, not a restart */
    rsd_pool_release(h.p, a3, 9);
    rsd_pool_release(h.p, b1, 9);
    rsd_pool_destroy(h.p);
}

static void test_exclusive_on_an_idle_process_is_granted_at_once(void) {
    rsd_pool_model_desc m[1];
    host h;
    rsd_pool_req_h a1, ex, a2;
    int s = -1;
    m[0] = md("a", 0);
    start(&h, 1, 0, m, 1, RSD_POOL_WAIT_FOREVER);
    REQUIRE(h.p);
    rsd_pool_acquire(h.p, 0, 1, NULL, &a1, &s);
    pump(&h);
    rsd_pool_release(h.p, a1, 2);
    CHECK_EQ_INT(rsd_pool_acquire_ex(h.p, 0, RSD_POOL_ACQUIRE_EXCLUSIVE, 3, NULL, &ex, &s), RSD_OK);
    /* unlimited concurrency, yet nothing is admitted beside it */
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 4, NULL, &a2, &s), RSD_PENDING);
    pump(&h);
    CHECK(!(grant_of(&h, a2) != NULL));
    CHECK_EQ_INT(rsd_pool_cancel(h.p, ex, 5), RSD_OK); /* a cancel ends it as a release does */
    pump(&h);
    CHECK((grant_of(&h, a2) != NULL));
    CHECK_EQ_INT(rsd_pool_acquire_ex(h.p, 0, 2, 6, NULL, &ex, &s), RSD_ERR_ARG);
    rsd_pool_release(h.p, a2, 7);
    rsd_pool_destroy(h.p);
}

static void test_exclusive_flag_dies_with_its_process(void) {
    rsd_pool_model_desc m[1];
    host h;
    rsd_pool_req_h ex, a;
    rsd_pool_proc_h proc;
    int s = -1;
    m[0] = md("a", 0);
    start(&h, 1, 0, m, 1, RSD_POOL_WAIT_FOREVER);
    REQUIRE(h.p);
    CHECK_EQ_INT(rsd_pool_acquire_ex(h.p, 0, RSD_POOL_ACQUIRE_EXCLUSIVE, 1, NULL, &ex, &s), RSD_PENDING);
    pump(&h);
    CHECK((grant_of(&h, ex) != NULL));
    proc = last(&h, RSD_POOL_ACTION_SPAWN)->proc;
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 2, NULL, &a, &s), RSD_PENDING);
    CHECK_EQ_INT(rsd_pool_on_exited(h.p, proc, 3), RSD_OK); /* crash */
    pump(&h);
    CHECK((grant_of(&h, a) != NULL)); /* restarted, and the new process is not exclusive */
    rsd_pool_release(h.p, ex, 4);
    rsd_pool_release(h.p, a, 4);
    rsd_pool_destroy(h.p);
}

/* An exclusive request waiting at the head of the queue holds those behind it; when
   its client goes away, they are granted at once (not at the next release). */
static void test_cancelled_exclusive_waiter_lets_the_queue_go(void) {
    rsd_pool_model_desc m[1];
    host h;
    rsd_pool_req_h a1, ex, a2;
    int s = -1;
    m[0] = md("a", 0);
    start(&h, 1, 0, m, 1, RSD_POOL_WAIT_FOREVER);
    REQUIRE(h.p);
    rsd_pool_acquire(h.p, 0, 1, NULL, &a1, &s);
    pump(&h);
    CHECK_EQ_INT(rsd_pool_acquire_ex(h.p, 0, RSD_POOL_ACQUIRE_EXCLUSIVE, 2, NULL, &ex, &s), RSD_PENDING);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 3, NULL, &a2, &s), RSD_PENDING);
    pump(&h);
    CHECK(!(grant_of(&h, a2) != NULL));
    CHECK_EQ_INT(rsd_pool_cancel(h.p, ex, 4), RSD_OK);
    pump(&h);
    CHECK((grant_of(&h, a2) != NULL)); /* beside a1: the model takes any number at once */
    rsd_pool_release(h.p, a1, 5);
    rsd_pool_release(h.p, a2, 5);
    rsd_pool_destroy(h.p);
}

/* ---- collation --------------------------------------------------------------- */
/* One slot, six requests A B C A B C: each model's queued requests are served
   together, so the trace costs 3 loads (2 swaps), not 6 (5 swaps), both when the
   requests arrive at once and when they arrive while A already serves. */
static void collate(bool burst) {
    rsd_pool_model_desc m[3];
    host h;
    rsd_pool_req_h r[6];
    int order[6], norder = 0, i, k, s;
    m[0] = md("A", 0); m[1] = md("B", 0); m[2] = md("C", 0);
    m[0].max_in_flight = m[1].max_in_flight = m[2].max_in_flight = 1;
    start(&h, 1, 0, m, 3, RSD_POOL_WAIT_FOREVER);
    REQUIRE(h.p);
    h.auto_start = !burst;
    for (i = 0; i < 6; i++) rsd_pool_acquire(h.p, i % 3, (uint64_t)i, &r[i], &r[i], &s);
    pump(&h);
    if (burst) { /* the first load finishes after every request arrived */
        h.auto_start = true;
        rsd_pool_on_started(h.p, last(&h, RSD_POOL_ACTION_SPAWN)->proc, true, 10);
        pump(&h);
    }
    /* Serve: release whatever is granted, in grant order, until all six ran. */
    for (k = 0; k < 64 && norder < 6; k++) {
        for (i = 0; i < 6; i++) {
            int j, seen = 0;
            for (j = 0; j < norder; j++) seen |= order[j] == i;
            if (seen || !(grant_of(&h, r[i]) != NULL)) continue;
            order[norder++] = i;
            rsd_pool_release(h.p, r[i], 20 + (uint64_t)k);
            pump(&h);
        }
    }
    CHECK_EQ_INT(norder, 6);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 3);
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_EVICT), 2);
    for (i = 0; i + 1 < norder; i += 2) CHECK_EQ_INT(order[i] % 3, order[i + 1] % 3); /* AABBCC */
    rsd_pool_destroy(h.p);
}
static void test_abcabc_is_served_aabbcc_in_a_burst(void) { collate(true); }
static void test_abcabc_is_served_aabbcc_while_serving(void) { collate(false); }

/* The age bound: A never goes idle (a new A request always arrives before the last
   one ends), yet B, waiting past max_wait_ms, gets the process next; A's requests
   that arrive meanwhile wait and are served after B. */
static void test_a_busy_model_yields_after_max_wait(void) {
    rsd_pool_model_desc m[2];
    host h;
    rsd_pool_req_h a_cur, a_next, b;
    uint64_t t;
    int s = -1;
    m[0] = md("A", 0); m[1] = md("B", 0);
    start(&h, 1, 0, m, 2, 1000);
    REQUIRE(h.p);
    rsd_pool_acquire(h.p, 0, 0, NULL, &a_cur, &s);
    pump(&h);
    CHECK((grant_of(&h, a_cur) != NULL));
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 1, 1, NULL, &b, &s), RSD_PENDING);
    for (t = 100; t <= 2000; t += 100) {
        rsd_pool_step(h.p, t);
        pump(&h);
        if ((grant_of(&h, b) != NULL)) break;
        rsd_pool_acquire(h.p, 0, t, NULL, &a_next, &s); /* the next A overlaps the current */
        rsd_pool_release(h.p, a_cur, t);
        pump(&h);
        a_cur = a_next;
        if ((grant_of(&h, b) != NULL)) break;
    }
    /* a_cur is either still running on the draining A process or queued for A. */
    if (!(grant_of(&h, b) != NULL)) {
        rsd_pool_release(h.p, a_cur, t);
        pump(&h);
    }
    CHECK((grant_of(&h, b) != NULL));
    CHECK(t <= 1200);      /* within the bound plus one step */
    CHECK(t >= 1000);      /* and not before it: A was never idle */
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_STARVE), 1);
    rsd_pool_release(h.p, b, t + 1);
    pump(&h);
    CHECK_EQ_INT(state_of(h.p, 0), RSD_POOL_SLOT_READY); /* A came back after B */
    rsd_pool_destroy(h.p);
}

/* When one stop frees room for two waiting models, both loads start in the same pass. */
static void test_k_freed_slots_start_k_loads(void) {
    rsd_pool_model_desc m[3];
    host h;
    rsd_pool_req_h x, c, d;
    int s = -1, spawns;
    m[0] = md("X", 8 * GiB); m[1] = md("C", 4 * GiB); m[2] = md("D", 4 * GiB);
    start(&h, 3, 10 * GiB, m, 3, RSD_POOL_WAIT_FOREVER);
    REQUIRE(h.p);
    h.auto_exit = false;
    rsd_pool_acquire(h.p, 0, 1, NULL, &x, &s);
    pump(&h);
    CHECK((grant_of(&h, x) != NULL));
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 1, 2, NULL, &c, &s), RSD_PENDING);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 2, 3, NULL, &d, &s), RSD_PENDING);
    pump(&h);
    spawns = count(&h, RSD_POOL_ACTION_SPAWN);
    rsd_pool_release(h.p, x, 4); /* X idle: evicted for C */
    pump(&h);
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_EVICT), 1);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), spawns);
    rsd_pool_on_exited(h.p, last(&h, RSD_POOL_ACTION_STOP)->proc, 5);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), spawns + 2);
    CHECK((grant_of(&h, c) != NULL) && (grant_of(&h, d) != NULL));
    rsd_pool_release(h.p, c, 6);
    rsd_pool_release(h.p, d, 6);
    rsd_pool_destroy(h.p);
}

/* ---- leases ------------------------------------------------------------------ */
/* 10 GiB: A (4, idle, least recently used), C (2, idle), B (3, busy), P (1, pinned).
   A 6 GiB lease stops A, then C, never B or P; 10 - 3 - 1 = 6 granted in full. */
static void lease_fixture(host *h, rsd_pool_req_h *busy) {
    static rsd_pool_model_desc m[4];
    rsd_pool_req_h r;
    int s = -1;
    m[0] = md("A", 4 * GiB); m[1] = md("B", 3 * GiB); m[2] = md("C", 2 * GiB); m[3] = md("P", 1 * GiB);
    m[3].pinned = true;
    start(h, 4, 10 * GiB, m, 4, RSD_POOL_WAIT_FOREVER);
    rsd_pool_acquire(h->p, 0, 1, NULL, &r, &s); pump(h); rsd_pool_release(h->p, r, 2);
    rsd_pool_acquire(h->p, 2, 3, NULL, &r, &s); pump(h); rsd_pool_release(h->p, r, 4);
    rsd_pool_acquire(h->p, 3, 5, NULL, &r, &s); pump(h); rsd_pool_release(h->p, r, 6);
    rsd_pool_acquire(h->p, 1, 7, NULL, busy, &s); pump(h);
    h->nlog = 0;
}

static void test_lease_stops_idle_lru_first_never_busy_or_pinned(void) {
    host h;
    rsd_pool_req_h busy;
    rsd_pool_lease_h l;
    rsd_pool_lease_desc ld;
    rsd_pool_lease_info li;
    rsd_pool_info st;
    lease_fixture(&h, &busy);
    REQUIRE(h.p);
    h.auto_exit = false;
    memset(&ld, 0, sizeof ld);
    ld.bytes = 5 * GiB; /* nothing is free; A (4) alone is not enough, A and C (6) are */
    CHECK_EQ_INT(rsd_pool_lease_take(h.p, &ld, 10, &l), RSD_PENDING);
    pump(&h);
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_LEASE), 2); /* A then C: LRU order */
    CHECK_EQ_INT(h.log[0].model, 0);
    CHECK_EQ_INT(h.log[1].model, 2);
    CHECK_EQ_INT(rsd_pool_query_lease(h.p, l, &li), RSD_OK);
    CHECK(li.granted == 5 * GiB && li.requested == 5 * GiB);
    CHECK(!li.ready);
    CHECK_EQ_INT(li.num_stopped, 2);
    CHECK(li.stopped == ((1u << 0) | (1u << 2)));
    rsd_pool_on_exited(h.p, h.log[0].proc, 11);
    rsd_pool_query_lease(h.p, l, &li);
    CHECK(!li.ready);
    rsd_pool_on_exited(h.p, h.log[1].proc, 12);
    rsd_pool_query_lease(h.p, l, &li);
    CHECK(li.ready);
    rsd_pool_query(h.p, &st);
    CHECK(st.leased_bytes == 5 * GiB);
    CHECK_EQ_INT(state_of(h.p, 1), RSD_POOL_SLOT_READY); /* busy B untouched */
    CHECK_EQ_INT(state_of(h.p, 3), RSD_POOL_SLOT_READY); /* pinned P untouched */
    CHECK_EQ_INT(rsd_pool_lease_return(h.p, l, 13), RSD_OK);
    CHECK_EQ_INT(rsd_pool_query_lease(h.p, l, &li), RSD_ERR_POOL_STALE);
    CHECK_EQ_INT(rsd_pool_lease_return(h.p, l, 13), RSD_ERR_POOL_STALE);
    rsd_pool_release(h.p, busy, 14);
    rsd_pool_destroy(h.p);
}

static void test_lease_partial_when_busy_and_pinned_hold_the_rest(void) {
    host h;
    rsd_pool_req_h busy;
    rsd_pool_lease_h l;
    rsd_pool_lease_desc ld;
    rsd_pool_lease_info li;
    lease_fixture(&h, &busy);
    REQUIRE(h.p);
    memset(&ld, 0, sizeof ld);
    ld.bytes = 8 * GiB;
    CHECK_EQ_INT(rsd_pool_lease_take(h.p, &ld, 10, &l), RSD_PENDING); /* A and C still exit */
    pump(&h);
    CHECK_EQ_INT(rsd_pool_query_lease(h.p, l, &li), RSD_OK);
    CHECK(li.granted == 6 * GiB); /* 10 - B 3 - P 1 */
    CHECK(li.requested == 8 * GiB);
    CHECK(li.ready);
    rsd_pool_lease_return(h.p, l, 11);
    rsd_pool_release(h.p, busy, 12);
    rsd_pool_destroy(h.p);
}

static void test_lease_declined_stops_nothing(void) {
    rsd_pool_model_desc m[1];
    host h;
    rsd_pool_req_h r;
    rsd_pool_lease_h l;
    rsd_pool_lease_desc ld;
    rsd_pool_info st;
    int s = -1;
    m[0] = md("A", 10 * GiB);
    start(&h, 1, 10 * GiB, m, 1, RSD_POOL_WAIT_FOREVER);
    REQUIRE(h.p);
    rsd_pool_acquire(h.p, 0, 1, NULL, &r, &s);
    pump(&h);
    h.nlog = 0;
    memset(&ld, 0, sizeof ld);
    ld.bytes = GiB;
    CHECK_EQ_INT(rsd_pool_lease_take(h.p, &ld, 2, &l), RSD_ERR_POOL_NO_FIT); /* A is busy */
    CHECK_EQ_INT(l.id, 0);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_STOP), 0);
    rsd_pool_query(h.p, &st);
    CHECK(st.leased_bytes == 0);
    CHECK_EQ_INT(st.leases_declined, 1);
    ld.bytes = 0;
    CHECK_EQ_INT(rsd_pool_lease_take(h.p, &ld, 2, &l), RSD_ERR_ARG);
    rsd_pool_release(h.p, r, 3);
    rsd_pool_destroy(h.p);
    /* no byte budget: nothing to lease */
    start(&h, 1, 0, m, 1, RSD_POOL_WAIT_FOREVER);
    ld.bytes = GiB;
    CHECK_EQ_INT(rsd_pool_lease_take(h.p, &ld, 1, &l), RSD_ERR_POOL_NO_FIT);
    rsd_pool_destroy(h.p);
}

/* While a lease holds bytes, a start that would break it waits (it is not failed, even
   for a model that fits the budget but not beside the lease); the release lets it go. */
static void test_lease_holds_starts_and_release_lets_them_go(void) {
    rsd_pool_model_desc m[1];
    host h;
    rsd_pool_req_h r;
    rsd_pool_lease_h l;
    rsd_pool_lease_desc ld;
    int s = -1;
    m[0] = md("A", 8 * GiB);
    start(&h, 1, 10 * GiB, m, 1, RSD_POOL_WAIT_FOREVER);
    REQUIRE(h.p);
    memset(&ld, 0, sizeof ld);
    ld.bytes = 4 * GiB;
    CHECK_EQ_INT(rsd_pool_lease_take(h.p, &ld, 1, &l), RSD_OK);
    CHECK_EQ_INT(rsd_pool_acquire(h.p, 0, 2, NULL, &r, &s), RSD_PENDING);
    rsd_pool_step(h.p, 3);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 0);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_FAIL), 0);
    CHECK_EQ_INT(rsd_pool_lease_return(h.p, l, 4), RSD_OK);
    pump(&h);
    CHECK((grant_of(&h, r) != NULL));
    rsd_pool_release(h.p, r, 5);
    rsd_pool_destroy(h.p);
}

static void test_lease_ttl_and_restore(void) {
    host h;
    rsd_pool_req_h busy;
    rsd_pool_lease_h l;
    rsd_pool_lease_desc ld;
    rsd_pool_lease_info li;
    rsd_pool_info st;
    uint64_t next;
    lease_fixture(&h, &busy);
    REQUIRE(h.p);
    memset(&ld, 0, sizeof ld);
    ld.bytes = 5 * GiB;
    ld.ttl_ms = 500;
    ld.restore = true;
    CHECK_EQ_INT(rsd_pool_lease_take(h.p, &ld, 100, &l), RSD_PENDING);
    pump(&h);
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_LEASE), 2);
    CHECK_EQ_INT(rsd_pool_query_lease(h.p, l, &li), RSD_OK);
    CHECK(li.expires_ms == 600 && li.restore);
    next = step_next(h.p, 200);
    CHECK(next == 600);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 0);
    rsd_pool_step(h.p, 600);
    pump(&h);
    CHECK_EQ_INT(rsd_pool_query_lease(h.p, l, &li), RSD_ERR_POOL_STALE);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 2); /* A and C come back without a request */
    CHECK_EQ_INT(state_of(h.p, 0), RSD_POOL_SLOT_READY);
    CHECK_EQ_INT(state_of(h.p, 2), RSD_POOL_SLOT_READY);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.lease_expiries, 1);
    CHECK(st.leased_bytes == 0);
    rsd_pool_release(h.p, busy, 700);
    rsd_pool_destroy(h.p);
}

/* Released (with restore) before its victims have exited: they start again once they
   have, not never (the preload waits for the stopping slot to be vacated). */
static void test_lease_released_before_its_victims_exit_still_restores(void) {
    host h;
    rsd_pool_req_h busy;
    rsd_pool_lease_h l;
    rsd_pool_lease_desc ld;
    rsd_pool_info st;
    lease_fixture(&h, &busy);
    REQUIRE(h.p);
    h.auto_exit = false;
    memset(&ld, 0, sizeof ld);
    ld.bytes = 5 * GiB;
    ld.restore = true;
    CHECK_EQ_INT(rsd_pool_lease_take(h.p, &ld, 10, &l), RSD_PENDING);
    pump(&h);
    CHECK_EQ_INT(count_why(&h, RSD_POOL_WHY_LEASE), 2);
    CHECK_EQ_INT(state_of(h.p, 0), RSD_POOL_SLOT_STOPPING);
    CHECK_EQ_INT(rsd_pool_lease_return(h.p, l, 11), RSD_OK);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 0); /* not while they still run */
    rsd_pool_on_exited(h.p, h.log[0].proc, 12);
    rsd_pool_on_exited(h.p, h.log[1].proc, 12);
    pump(&h);
    CHECK_EQ_INT(count(&h, RSD_POOL_ACTION_SPAWN), 2); /* A and C come back */
    CHECK_EQ_INT(state_of(h.p, 0), RSD_POOL_SLOT_READY);
    CHECK_EQ_INT(state_of(h.p, 2), RSD_POOL_SLOT_READY);
    rsd_pool_query(h.p, &st);
    CHECK_EQ_INT(st.restores, 2);
    rsd_pool_release(h.p, busy, 13);
    rsd_pool_destroy(h.p);
}

static void test_lease_capacity_and_stale_handles(void) {
    rsd_pool_model_desc m[1];
    host h;
    rsd_pool_lease_h l[RSD_POOL_MAX_LEASES + 1], bogus;
    rsd_pool_lease_desc ld;
    rsd_pool_lease_info li;
    int i;
    m[0] = md("A", 1);
    start(&h, 1, 100, m, 1, RSD_POOL_WAIT_FOREVER);
    REQUIRE(h.p);
    memset(&ld, 0, sizeof ld);
    ld.bytes = 1;
    for (i = 0; i < RSD_POOL_MAX_LEASES; i++) CHECK_EQ_INT(rsd_pool_lease_take(h.p, &ld, 1, &l[i]), RSD_OK);
    CHECK_EQ_INT(rsd_pool_lease_take(h.p, &ld, 1, &l[i]), RSD_ERR_CAPACITY);
    rsd_pool_lease_return(h.p, l[0], 2);
    CHECK_EQ_INT(rsd_pool_lease_take(h.p, &ld, 3, &l[0]), RSD_OK); /* entry reused */
    bogus.id = 0;
    CHECK_EQ_INT(rsd_pool_query_lease(h.p, bogus, &li), RSD_ERR_POOL_STALE);
    bogus.id = l[1].id + 16; /* next generation of entry 1 */
    CHECK_EQ_INT(rsd_pool_lease_return(h.p, bogus, 4), RSD_ERR_POOL_STALE);
    for (i = 0; i < RSD_POOL_MAX_LEASES; i++) CHECK_EQ_INT(rsd_pool_lease_return(h.p, l[i], 5), RSD_OK);
    rsd_pool_destroy(h.p);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    RUN(test_exclusive_waits_for_the_drain_and_runs_alone);
    RUN(test_exclusive_on_an_idle_process_is_granted_at_once);
    RUN(test_exclusive_flag_dies_with_its_process);
    RUN(test_cancelled_exclusive_waiter_lets_the_queue_go);
    RUN(test_abcabc_is_served_aabbcc_in_a_burst);
    RUN(test_abcabc_is_served_aabbcc_while_serving);
    RUN(test_a_busy_model_yields_after_max_wait);
    RUN(test_k_freed_slots_start_k_loads);
    RUN(test_lease_stops_idle_lru_first_never_busy_or_pinned);
    RUN(test_lease_partial_when_busy_and_pinned_hold_the_rest);
    RUN(test_lease_declined_stops_nothing);
    RUN(test_lease_holds_starts_and_release_lets_them_go);
    RUN(test_lease_ttl_and_restore);
    RUN(test_lease_released_before_its_victims_exit_still_restores);
    RUN(test_lease_capacity_and_stale_handles);
    return RSD_TEST_END();
}
