/* test_pump.c -- the one pump contract (the manual's "PUMP"), checked on every object that
   runs on the caller's clock: HTTP client and server, process supervisor, pool, fleet,
   ensurer, state-directory lock and etcd coordinator, all driven by one generic loop over a table of step /
   pollfds / next_deadline / next-event / query. Every round checks what the contract says:
   step returns >= 0; a count > 0 means next_deadline is 0 and exactly that many events
   are pulled; pollfds returns the same count whatever room it is given (cap 0 included)
   and that count fits the room; next_deadline is never 0 once everything is pulled
   unless the object has work now; query reads without changing anything (two calls
   give the same info) and takes NULL. The loop runs until each object's part of the
   scenario is over and a round finds nothing waiting. Loopback only: rsd-sim is the
   model server and the child process; etcd takes part when installed. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency_http.h"
#include "rsd_test.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#if !defined(_WIN32)
#include <sys/wait.h>
#include <unistd.h>
#endif

#define SIM_BIN tp_exe("rsd-sim")
#define SIM_RUNTIME "router"
#include "portable.h"
#include "sim_harness.h"
#if !defined(_WIN32)
#include "etcd_harness.h" /* wine cannot run the Linux etcd binary */
#endif

#define PUMP_WAIT_MS 60000u /* bound for the whole scenario (ASan, a loaded machine) */
#define PUMP_MAX_FDS 256
#define PUMP_MAX_EVENTS 64

/* Room for one event of any object. */
typedef union pump_ev {
    rsd_http_event client;
    rsd_http_server_event server;
    rsd_proc_event proc;
    rsd_pool_action action;
    rsd_fleet_event fleet;
    rsd_ensure_result ensure;
    rsd_etcd_info etcd;
    int lock;
} pump_ev;

/* Room for the info of any object (X_query). */
typedef union pump_info {
    rsd_http_client_info client;
    rsd_http_server_info server;
    rsd_procs_info procs;
    rsd_pool_info pool;
    rsd_fleet_info fleet;
    rsd_ensure_result ensure;
    rsd_etcd_info etcd;
    rsd_state_lock_info lock;
} pump_info;

/* One object as the generic loop sees it. */
typedef struct pump {
    const char *name;
    void *obj;
    int (*step)(void *obj, uint64_t now);
    int (*pollfds)(const void *obj, rsd_pollfd *out, int cap); /* NULL: no descriptors (the pool) */
    uint64_t (*next_deadline)(const void *obj);
    bool (*next)(void *obj, pump_ev *ev);
    void (*query)(const void *obj, pump_info *info);
    void (*on_event)(const pump_ev *ev, uint64_t now); /* the scenario's answer */
    bool (*done)(void);                                /* its part of the scenario is over */
    int events;                                        /* pulled so far */
    pump_info last;                                    /* its query after the last round */
} pump;

/* The contract's functions of object X (type T, events pulled with NEXT into member M,
   its query into member Q). */
#define PUMP_CORE(X, T, NEXT, M, Q)                                                             \
    static int X##_step_(void *o, uint64_t now) { return X##_step((T *)o, now); }            \
    static uint64_t X##_deadline_(const void *o) { return X##_next_deadline((const T *)o); } \
    static bool X##_next_(void *o, pump_ev *ev) { return NEXT((T *)o, &ev->M); }             \
    static void X##_query_(const void *o, pump_info *in) { X##_query((const T *)o, &in->Q); }
#define PUMP_FDS(X, T)                                                                          \
    static int X##_pollfds_(const void *o, rsd_pollfd *out, int cap) { return X##_pollfds((const T *)o, out, cap); }

PUMP_CORE(rsd_http_client, rsd_http_client, rsd_http_next_event, client, client)
PUMP_FDS(rsd_http_client, rsd_http_client)
PUMP_CORE(rsd_http_server, rsd_http_server, rsd_http_server_next_event, server, server)
PUMP_FDS(rsd_http_server, rsd_http_server)
PUMP_CORE(rsd_procs, rsd_procs, rsd_procs_next_event, proc, procs)
PUMP_FDS(rsd_procs, rsd_procs)
PUMP_CORE(rsd_pool, rsd_pool, rsd_pool_next_action, action, pool)
PUMP_CORE(rsd_fleet, rsd_fleet, rsd_fleet_next_event, fleet, fleet)
PUMP_FDS(rsd_fleet, rsd_fleet)
PUMP_CORE(rsd_ensurer, rsd_ensurer, rsd_ensurer_next_event, ensure, ensure)
PUMP_FDS(rsd_ensurer, rsd_ensurer)
PUMP_CORE(rsd_etcd, rsd_etcd, rsd_etcd_next_event, etcd, etcd)
PUMP_FDS(rsd_etcd, rsd_etcd)

/* The state lock works on a lock within its state directory: the pair is its object. */
typedef struct pump_lock {
    rsd_state *st;
    rsd_state_lock lk;
} pump_lock;
static int pump_lock_step_(void *o, uint64_t now) { return rsd_state_lock_step(((pump_lock *)o)->st, &((pump_lock *)o)->lk, now); }
static uint64_t pump_lock_deadline_(const void *o) { return rsd_state_lock_next_deadline(&((const pump_lock *)o)->lk); }
static bool pump_lock_next_(void *o, pump_ev *ev) { return rsd_state_lock_next_event(&((pump_lock *)o)->lk, &ev->lock); }
static void pump_lock_query_(const void *o, pump_info *in) {
    rsd_state_lock_query(o ? &((const pump_lock *)o)->lk : NULL, &in->lock);
}

#define PUMP_ENTRY(X, obj, on, done) {#X, (obj), X##_step_, X##_pollfds_, X##_deadline_, X##_next_, X##_query_, (on), (done), 0, {{0}}}

/* X_query reads: two calls give the same bytes (each fills its info whole, from a zeroed
   start), and a NULL object gives an info too. The second is kept for the scenario. */
static void pump_query(pump *o) {
    pump_info a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    o->query(NULL, &a);
    memset(&a, 0, sizeof a);
    o->query(o->obj, &a);
    o->query(o->obj, &b);
    if (memcmp(&a, &b, sizeof a) != 0) printf("  %s: two queries differ\n", o->name);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    o->last = b;
}

/* One round: step, pull and answer every object; then wait on every descriptor until
   the earliest deadline (at most 50 ms). True when every part is over and nothing waited. */
static bool pump_round(pump *o, int n) {
    rsd_pollfd fds[PUMP_MAX_FDS], none[1];
    uint64_t now = rsd_now_ms(), dl = RSD_NO_DEADLINE;
    int i, nfds = 0, waited = 0, timeout;
    bool over = true;
    for (i = 0; i < n; i++) {
        pump_ev evs[PUMP_MAX_EVENTS];
        int k, got = 0, w = o[i].step(o[i].obj, now);
        CHECK(w >= 0);
        if (w < 0) return false;
        if (w > 0) CHECK(o[i].next_deadline(o[i].obj) == 0);
        while (got < PUMP_MAX_EVENTS && o[i].next(o[i].obj, &evs[got])) got++;
        if (got != w) printf("  %s: step said %d waiting, %d pulled\n", o[i].name, w, got);
        CHECK_EQ_INT(got, w);
        o[i].events += got;
        waited += got;
        for (k = 0; k < got; k++) /* answered after the pull: answers may queue more for the next round */
            if (o[i].on_event) o[i].on_event(&evs[k], now);
        pump_query(&o[i]);
    }
    for (i = 0; i < n; i++) {
        uint64_t d = o[i].next_deadline(o[i].obj);
        over = over && o[i].done();
        if (d < dl) dl = d;
        if (o[i].pollfds) {
            int want = o[i].pollfds(o[i].obj, none, 0), got;
            CHECK(want >= 0 && nfds + want <= PUMP_MAX_FDS);
            if (want < 0 || nfds + want > PUMP_MAX_FDS) return false;
            got = o[i].pollfds(o[i].obj, fds + nfds, PUMP_MAX_FDS - nfds);
            CHECK_EQ_INT(got, want);
            nfds += want;
        }
    }
    if (over && !waited) return true;
    now = rsd_now_ms();
    timeout = dl <= now ? 0 : dl - now > 50 ? 50 : (int)(dl - now);
    if (timeout > 0 || nfds > 0) (void)rsd_poll(fds, nfds, timeout);
    return false;
}

/* Runs the table until quiet (every part over, nothing waiting); bounded. */
static bool pump_run(pump *o, int n) {
    uint64_t end = rsd_now_ms() + PUMP_WAIT_MS;
    while (rsd_now_ms() < end)
        if (pump_round(o, n)) return true;
    return false;
}

/* ---- the scenario: one task per object ---------------------------------------------- */
static rsd_http_client *g_client;
static rsd_http_server *g_server;
static rsd_procs *g_procs;
static rsd_pool *g_pool;
static rsd_fleet *g_fleet;
static rsd_ensurer *g_ensurer;
static rsd_etcd *g_etcd_co;
static pump_lock g_lock;
static int g_locked, g_lock_end = RSD_PENDING;
static int g_answered, g_served, g_exited, g_granted, g_pool_done, g_fleet_done, g_ensured, g_etcd_ends;
static rsd_pool_req_h g_fleet_req;
static int g_ensure_result = RSD_PENDING, g_etcd_lock = RSD_PENDING, g_etcd_unlock = RSD_PENDING;

/* client: one GET on the server below, answered 200 */
static void on_client(const pump_ev *ev, uint64_t now) {
    (void)now;
    CHECK_EQ_INT(ev->client.result, RSD_OK);
    CHECK_EQ_INT(ev->client.status, 200);
    g_answered++;
}
static bool client_done(void) { return g_answered == 1; }

static void on_server(const pump_ev *ev, uint64_t now) {
    static const char body[] = "pumped";
    (void)now;
    if (ev->server.type != RSD_HTTP_SEV_REQUEST) return;
    CHECK_EQ_INT(rsd_http_respond(g_server, ev->server.req, 200, NULL, 0, body, sizeof body - 1), RSD_OK);
    g_served++;
}
static bool server_done(void) { return g_served == 1; }

/* procs: a child that exits at once (rsd-sim refuses an unknown flag) */
static void on_proc(const pump_ev *ev, uint64_t now) {
    (void)now;
    if (ev->proc.kind != RSD_PROC_EV_EXITED) return;
    CHECK(ev->proc.exit_code != 0);
    CHECK_EQ_INT(rsd_procs_forget(g_procs, ev->proc.proc), RSD_OK);
    g_exited++;
}
static bool procs_done(void) { return g_exited == 1; }

/* pool: a request starts its model (SPAWN, answered at once), is granted, and released */
static void on_action(const pump_ev *ev, uint64_t now) {
    const rsd_pool_action *a = &ev->action;
    if (a->kind == RSD_POOL_ACTION_SPAWN) CHECK_EQ_INT(rsd_pool_on_started(g_pool, a->proc, true, now), RSD_OK);
    if (a->kind == RSD_POOL_ACTION_GRANT) {
        g_granted++;
        CHECK_EQ_INT(rsd_pool_release(g_pool, a->req, now), RSD_OK);
        g_pool_done = 1;
    }
}
static bool pool_done(void) { return g_pool_done == 1; }

/* fleet: a request starts rsd-sim, is granted, released; then everything stops */
static void on_fleet(const pump_ev *ev, uint64_t now) {
    if (ev->fleet.kind == RSD_FLEET_EV_GRANT && ev->fleet.req.id == g_fleet_req.id) {
        CHECK_EQ_INT(rsd_fleet_release(g_fleet, g_fleet_req, now), RSD_OK);
        CHECK_EQ_INT(rsd_fleet_stop(g_fleet, now), RSD_OK);
        g_fleet_done = 1;
    }
    CHECK(ev->fleet.kind != RSD_FLEET_EV_FAIL);
}
static bool fleet_done(void) { return g_fleet_done == 1 && rsd_fleet_idle(g_fleet); }

/* ensurer: model "a" made resident on rsd-sim; its end is one event */
static void on_ensure(const pump_ev *ev, uint64_t now) {
    (void)now;
    g_ensure_result = ev->ensure.result;
    CHECK_EQ_INT(ev->ensure.outcome, RSD_OUTCOME_RESIDENT);
    g_ensured++;
}
static bool ensure_done(void) { return g_ensured == 1; }

/* state lock: taken (nobody else holds it); given back after the loop (stepping an IDLE
   lock is RSD_ERR_STATE) */
static void on_lock(const pump_ev *ev, uint64_t now) {
    (void)now;
    g_lock_end = ev->lock;
    CHECK(rsd_state_lock_held(&g_lock.lk));
    g_locked++;
}
static bool lock_done(void) { return g_locked == 1; }

/* etcd: take a lock; its end starts the unlock, whose end is the second event */
static void on_etcd(const pump_ev *ev, uint64_t now) {
    if (++g_etcd_ends == 1) {
        g_etcd_lock = ev->etcd.result;
        CHECK(ev->etcd.held);
        CHECK_EQ_INT(rsd_etcd_unlock_begin(g_etcd_co, now), RSD_OK);
    } else {
        g_etcd_unlock = ev->etcd.result;
        CHECK(!ev->etcd.held);
    }
}
static bool etcd_done(void) { return g_etcd_ends == 2; }

static void test_every_object_through_one_loop(void) {
    static const char *const sim_args[] = {"--load-ms", "20", "--model", "id=a", NULL};
    static const char *const bad_flag[] = {"--no-such-flag", NULL};
    static const char *const fleet_extra[] = {"--runtime", "server", "--load-ms", "20", NULL};
    rsd_http_server_desc sd;
    rsd_http_request q;
    rsd_http_req_h h;
    rsd_procs_desc prd;
    rsd_proc_spec ps;
    rsd_proc_h ph;
    rsd_pool_desc pd;
    rsd_pool_model_desc pm;
    rsd_pool_req_h preq;
    rsd_fleet_desc fd;
    rsd_fleet_model_desc fm;
    rsd_ensurer_desc ed;
    rsd_ensure_req eq;
    sim_proc sim;
    rsd_state_desc std;
    char url[96], mdir[300], mpath[400], sdir[300];
    int slot, n = 0, fm_index;
    uint16_t port;
    FILE *fp;
    pump t[8];
#if !defined(_WIN32)
    etcd_proc etcd;
    char bin[512];
    bool with_etcd = etcd_find(bin, sizeof bin);
#endif
    memset(&sim, 0, sizeof sim);
    REQUIRE(sim_start(&sim, sim_args) == 0);

    memset(&sd, 0, sizeof sd);
    REQUIRE((g_server = rsd_http_server_create(&sd)) != NULL);
    port = rsd_http_server_port(g_server);
    REQUIRE((g_client = rsd_http_client_create(NULL)) != NULL);
    snprintf(url, sizeof url, "http://127.0.0.1:%u/pump", (unsigned)port);
    memset(&q, 0, sizeof q);
    q.url = url;
    REQUIRE(rsd_http_send(g_client, &q, rsd_now_ms(), &h) == RSD_OK);

    memset(&prd, 0, sizeof prd);
    REQUIRE((g_procs = rsd_procs_create(&prd)) != NULL);
    memset(&ps, 0, sizeof ps);
    ps.exe = SIM_BIN;
    ps.args = bad_flag;
    REQUIRE(rsd_procs_spawn(g_procs, &ps, rsd_now_ms(), &ph) == RSD_OK);

    memset(&pd, 0, sizeof pd);
    REQUIRE((g_pool = rsd_pool_create(&pd)) != NULL);
    memset(&pm, 0, sizeof pm);
    pm.id = "p";
    REQUIRE(rsd_pool_add_model(g_pool, &pm) == 0);
    REQUIRE(rsd_pool_acquire(g_pool, 0, rsd_now_ms(), NULL, &preq, &slot) == RSD_PENDING);

    REQUIRE(tp_temp_dir("pump", mdir, sizeof mdir) == 0);
    snprintf(mpath, sizeof mpath, "%s/f.gguf", mdir);
    REQUIRE((fp = fopen(mpath, "wb")) != NULL);
    fclose(fp);
    memset(&fd, 0, sizeof fd);
    fd.procs.term_grace_ms = 2000;
    fd.procs.start_deadline_ms = 15000;
    REQUIRE((g_fleet = rsd_fleet_create(&fd)) != NULL);
    memset(&fm, 0, sizeof fm);
    fm.pool.id = "f";
    fm.spec.exe = SIM_BIN;
    fm.spec.model = mpath;
    fm.spec.parallel = 1;
    fm.spec.extra = fleet_extra;
    REQUIRE((fm_index = rsd_fleet_add_model(g_fleet, &fm)) == 0);
    REQUIRE(rsd_fleet_acquire(g_fleet, fm_index, rsd_now_ms(), NULL, &g_fleet_req, &port) == RSD_PENDING);

    memset(&ed, 0, sizeof ed);
    ed.no_state = true;
    ed.ignore_env = true;
    REQUIRE((g_ensurer = rsd_ensurer_create(&ed)) != NULL);
    memset(&eq, 0, sizeof eq);
    eq.url = sim.url;
    eq.model = "a";
    eq.runtime = RSD_RUNTIME_LLAMACPP;
    eq.timeout_ms = 30000;
    REQUIRE(rsd_ensurer_begin(g_ensurer, &eq, rsd_now_ms()) == RSD_OK);
    CHECK_EQ_INT(rsd_ensurer_step(g_ensurer, rsd_now_ms()), 0); /* running: nothing waits yet */

    REQUIRE(tp_temp_dir("pump-state", sdir, sizeof sdir) == 0);
    memset(&std, 0, sizeof std);
    std.dir = sdir;
    REQUIRE((g_lock.st = rsd_state_create(&std, NULL)) != NULL);
    memset(&g_lock.lk, 0, sizeof g_lock.lk);
    REQUIRE(rsd_state_lock_begin(g_lock.st, &g_lock.lk, "pump|key", "test", rsd_now_ms(), 0) == RSD_OK);

    {
        pump rows[8] = {
            PUMP_ENTRY(rsd_http_client, NULL, on_client, client_done),
            PUMP_ENTRY(rsd_http_server, NULL, on_server, server_done),
            PUMP_ENTRY(rsd_procs, NULL, on_proc, procs_done),
            {"rsd_pool", NULL, rsd_pool_step_, NULL, rsd_pool_deadline_, rsd_pool_next_, rsd_pool_query_, on_action, pool_done, 0, {{0}}},
            PUMP_ENTRY(rsd_fleet, NULL, on_fleet, fleet_done),
            PUMP_ENTRY(rsd_ensurer, NULL, on_ensure, ensure_done),
            {"rsd_state_lock", NULL, pump_lock_step_, NULL, pump_lock_deadline_, pump_lock_next_, pump_lock_query_, on_lock, lock_done, 0, {{0}}},
            PUMP_ENTRY(rsd_etcd, NULL, on_etcd, etcd_done),
        };
        memcpy(t, rows, sizeof t);
    }
    t[0].obj = g_client;
    t[1].obj = g_server;
    t[2].obj = g_procs;
    t[3].obj = g_pool;
    t[4].obj = g_fleet;
    t[5].obj = g_ensurer;
    t[6].obj = &g_lock;
    n = 7;
#if !defined(_WIN32)
    if (with_etcd && etcd_start(&etcd, "/pump") == 0) {
        rsd_etcd_desc kd;
        memset(&kd, 0, sizeof kd);
        kd.url = etcd.coord;
        kd.host_id = "pump";
        REQUIRE((g_etcd_co = rsd_etcd_create(&kd)) != NULL);
        REQUIRE(rsd_etcd_lock_begin(g_etcd_co, "pump|key", "test", rsd_now_ms(), 0) == RSD_OK);
        t[7].obj = g_etcd_co;
        n = 8;
    } else if (with_etcd) {
        printf("  etcd did not start: the coordinator is left out\n");
    } else {
        printf("  no etcd binary: the coordinator is left out\n");
    }
#else
    printf("  Windows: the coordinator is left out (wine cannot run etcd)\n");
#endif

    CHECK(pump_run(t, n));
    {
        int i;
        for (i = 0; i < n; i++) printf("  %-16s %d event(s)\n", t[i].name, t[i].events);
    }
    CHECK_EQ_INT(g_answered, 1);
    CHECK_EQ_INT(g_served, 1);
    CHECK_EQ_INT(g_exited, 1);
    CHECK_EQ_INT(g_granted, 1);
    CHECK(g_fleet_done && rsd_fleet_idle(g_fleet));
    CHECK_EQ_INT(g_ensured, 1);
    CHECK_EQ_INT(g_ensure_result, RSD_OK);
    CHECK_EQ_INT(log_count(0, sim_log(&sim), "POST", "/models/load", "a"), 1); /* the ensure loaded it */
    CHECK(t[3].events >= 2);                               /* SPAWN, GRANT */
    CHECK(t[4].events >= 3);                               /* STARTING, READY, GRANT, ... */
    CHECK_EQ_INT(g_locked, 1);
    CHECK_EQ_INT(g_lock_end, RSD_OK);
    if (n == 8) {
        CHECK_EQ_INT(g_etcd_lock, RSD_OK);
        CHECK_EQ_INT(g_etcd_unlock, RSD_OK);
    }
    /* each object's query after the last round tells the same story */
    CHECK(t[0].last.client.requests == 1);
    CHECK(t[1].last.server.requests == 1 && t[1].last.server.responses == 1);
    CHECK_EQ_INT(t[2].last.procs.live, 0);
    CHECK_EQ_INT(t[2].last.procs.exited, 0); /* forgotten */
    CHECK_EQ_INT(t[2].last.procs.events_waiting, 0);
    CHECK(t[2].last.procs.now_ms > 0);
    CHECK(t[3].last.pool.acquires == 1 && t[3].last.pool.releases == 1);
    CHECK_EQ_INT((int)t[3].last.pool.running, 0);
    CHECK(t[4].last.fleet.stopped);
    CHECK_EQ_INT(t[4].last.fleet.models, 1);
    CHECK_EQ_INT(t[4].last.fleet.processes, 0);
    CHECK_EQ_INT(t[4].last.fleet.events_waiting, 0);
    CHECK(t[4].last.fleet.pool.stopped && t[4].last.fleet.pool.spawns == 1);
    CHECK(t[5].last.ensure.done);
    CHECK_EQ_INT(t[5].last.ensure.result, RSD_OK);
    CHECK_EQ_INT(t[6].last.lock.state, RSD_LOCK_HELD);
    CHECK(t[6].last.lock.held && !t[6].last.lock.end_waiting);
    CHECK_EQ_STR(t[6].last.lock.key, "pump|key");
    if (n == 8) CHECK(t[7].last.etcd.result == RSD_OK && !t[7].last.etcd.held);
    /* quiet: once pulled, an end is not told again */
    CHECK_EQ_INT(rsd_ensurer_step(g_ensurer, rsd_now_ms()), 0);
    CHECK_EQ_INT(rsd_pool_step(g_pool, rsd_now_ms()), 0);
    CHECK(rsd_pool_next_deadline(g_pool) == RSD_NO_DEADLINE);

    rsd_etcd_destroy(g_etcd_co);
#if !defined(_WIN32)
    if (n == 8) etcd_stop(&etcd);
#endif
    rsd_ensurer_destroy(g_ensurer);
    rsd_state_unlock(g_lock.st, &g_lock.lk);
    rsd_state_destroy(g_lock.st);
    tp_remove_tree(sdir);
    rsd_fleet_destroy(g_fleet);
    rsd_pool_destroy(g_pool);
    rsd_procs_destroy(g_procs);
    rsd_http_client_destroy(g_client);
    rsd_http_server_destroy(g_server);
    (void)remove(mpath);
    tp_remove_tree(mdir);
    sim_stop(&sim);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
#if !defined(_WIN32)
    signal(SIGPIPE, SIG_IGN);
#endif
    SIM_REQUIRE_BUILT();
    RUN(test_every_object_through_one_loop);
    return RSD_TEST_END();
}
