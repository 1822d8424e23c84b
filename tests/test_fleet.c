/* test_fleet.c -- rsd_fleet (the pool running real processes) with real children:
   build/bin/rsd-sim in llama-server mode (/health 503 while loading, then 200;
   /_sim/crash; fail=1 loads exit 1), plus a missing binary and a taken port.
   Time is the real monotonic clock; nothing sleeps: every wait is poll() on
   rsd_fleet_pollfds until the awaited event, with a generous bound (TTL is driven by
   passing a later now_ms). The pure pool cases are in test_pool.c. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include "rsd_test.h"

#include "portable.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#if !defined(_WIN32)
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#endif
#ifndef SIGKILL
#define SIGKILL 9 /* Windows: what a terminated child reads as (the proc manual) */
#endif

#define SIM_BIN tp_exe("rsd-sim")
#define WAIT_MS 20000u /* generous bound for any awaited event (ASan, loaded machine) */

static uint64_t now_ms(void) { return rsd_now_ms(); }
static int count_fds(void) { return tp_open_handles(); }
static bool no_children(void) { return tp_no_children(); }

/* ---- event log: every event pulled, with its message copied ---- */
typedef struct logged {
    rsd_fleet_event ev;
    char msg[RSD_FLEET_MESSAGE_MAX];
} logged;

typedef struct tlog {
    logged e[512];
    int n;
    uint64_t tick; /* a later clock for TTL tests: added to now_ms() */
} tlog;

static tlog g_log; /* test-side only */

static uint64_t tnow(void) { return now_ms() + g_log.tick; }

static void log_reset(void) { memset(&g_log, 0, sizeof g_log); }

static int count_kind(rsd_fleet_event_kind k, int model) {
    int i, n = 0;
    for (i = 0; i < g_log.n; i++)
        if (g_log.e[i].ev.kind == k && (model < 0 || g_log.e[i].ev.model == model)) n++;
    return n;
}

static const logged *find_kind(rsd_fleet_event_kind k, int model, int nth) {
    int i;
    for (i = 0; i < g_log.n; i++)
        if (g_log.e[i].ev.kind == k && (model < 0 || g_log.e[i].ev.model == model) && nth-- == 0)
            return &g_log.e[i];
    return NULL;
}

/* Pull every queued event into the log. */
static void drain(rsd_fleet *f) {
    rsd_fleet_event ev;
    while (rsd_fleet_next_event(f, &ev)) {
        if (g_log.n < (int)(sizeof g_log.e / sizeof g_log.e[0])) {
            logged *l = &g_log.e[g_log.n++];
            l->ev = ev;
            l->msg[0] = 0;
            if (ev.message) snprintf(l->msg, sizeof l->msg, "%s", ev.message);
            l->ev.message = l->msg;
            l->ev.model_id = NULL;
        }
        if (getenv("RSD_TEST_VERBOSE"))
            printf("  ev %-8s model %d slot %d port %u pid %lld result %d why %s%s%s\n",
                   rsd_fleet_event_str(ev.kind), ev.model, ev.slot, (unsigned)ev.port,
                   (long long)ev.pid, ev.result, rsd_pool_why_str(ev.why),
                   ev.message ? " msg: " : "", ev.message ? ev.message : "");
    }
}

/* One round: poll the fleet's descriptors until its deadline (at most 50 ms), step,
   drain. extra (may be NULL) is an HTTP client stepped in the same loop. */
static void round_once(rsd_fleet *f, rsd_http_client *extra) {
    rsd_pollfd fds[96];
    int n = rsd_fleet_pollfds(f, fds, 64), m = 0, timeout = 50, waiting, before;
    uint64_t d = rsd_fleet_next_deadline(f), now = tnow();
    if (n > 64) n = 64;
    if (n < 0) n = 0;
    if (extra) {
        uint64_t d2 = rsd_http_client_next_deadline(extra);
        m = rsd_http_client_pollfds(extra, fds + n, 32);
        if (m > 32) m = 32;
        if (m < 0) m = 0;
        if (d2 < d) d = d2;
    }
    if (d <= now) timeout = 0;
    else if (d - now < 50) timeout = (int)(d - now);
    (void)rsd_poll(fds, n + m, timeout);
    if (extra) (void)rsd_http_client_step(extra, tnow());
    waiting = rsd_fleet_step(f, tnow());
    CHECK(waiting >= 0);
    CHECK(waiting == 0 || rsd_fleet_next_deadline(f) == 0);
    before = g_log.n;
    drain(f);
    if (g_log.n < (int)(sizeof g_log.e / sizeof g_log.e[0])) CHECK_EQ_INT(g_log.n - before, waiting);
}

/* Loop until an event of kind for model (-1 = any) is in the log (nth occurrence). */
static const logged *await(rsd_fleet *f, rsd_fleet_event_kind k, int model, int nth) {
    uint64_t end = now_ms() + WAIT_MS;
    const logged *l;
    drain(f);
    while ((l = find_kind(k, model, nth)) == NULL && now_ms() < end) round_once(f, NULL);
    return l;
}

/* Until the fleet has no process left. */
static bool await_idle(rsd_fleet *f) {
    uint64_t end = now_ms() + WAIT_MS;
    while (!rsd_fleet_idle(f) && now_ms() < end) round_once(f, NULL);
    return rsd_fleet_idle(f);
}

/* ---- models ---- */
static const char *const sim_extra_default[] = {"--runtime", "server", "--load-ms", "40", NULL};

/* The fleet checks that a model file is readable before it starts (or evicts for) it,
   so every model the tests name is an (empty) file in a temporary directory; rsd-sim
   reads its options from the name ("bad.gguf,fail=1"). */
static char g_mdir[300];
static char g_mnames[32][64];
static int g_nmnames;

static const char *model_file(const char *name) {
    static char paths[16][400];
    static int k;
    char *p = paths[k++ % 16];
    int i;
    FILE *fp;
    if (!g_mdir[0]) {
        (void)tp_temp_dir("fleet", g_mdir, sizeof g_mdir);
    }
    snprintf(p, 400, "%s/%s", g_mdir, name);
    for (i = 0; i < g_nmnames && strcmp(g_mnames[i], name); i++) {}
    if (i == g_nmnames && g_nmnames < 32) snprintf(g_mnames[g_nmnames++], 64, "%s", name);
    if ((fp = fopen(p, "ab")) != NULL) fclose(fp);
    return p;
}

static void remove_model_files(void) {
    char p[400];
    int i;
    for (i = 0; i < g_nmnames; i++) {
        snprintf(p, sizeof p, "%.299s/%.63s", g_mdir, g_mnames[i]);
        (void)remove(p);
    }
    if (g_mdir[0]) tp_remove_tree(g_mdir);
}

static void sim_model(rsd_fleet_model_desc *md, const char *id, const char *const *extra) {
    char name[64];
    memset(md, 0, sizeof *md);
    snprintf(name, sizeof name, "%s.gguf", id);
    md->spec.model = model_file(name);
    md->pool.id = id;
    md->spec.exe = SIM_BIN;
    md->spec.parallel = 2;
    md->spec.extra = extra ? extra : sim_extra_default;
}

/* The tests' fleet desc: max_slots, a stop grace (0 = 2 s), starts bounded by 15 s. */
static void fleet_desc(rsd_fleet_desc *d, int max_slots, uint32_t grace_ms) {
    memset(d, 0, sizeof *d);
    d->pool.max_slots = max_slots;
    d->pool.event_log = 256;
    d->procs.term_grace_ms = grace_ms ? grace_ms : 2000;
    d->procs.start_deadline_ms = 15000;
}

static rsd_fleet *mk_fleet(int max_slots, uint32_t grace_ms) {
    rsd_fleet_desc d;
    fleet_desc(&d, max_slots, grace_ms);
    return rsd_fleet_create(&d);
}

static int add(rsd_fleet *f, const char *id, const char *const *extra) {
    rsd_fleet_model_desc md;
    sim_model(&md, id, extra);
    return rsd_fleet_add_model(f, &md);
}

/* A blocking HTTP exchange with a child (the test's own client). */
static int http_status(uint16_t port, const char *method, const char *path, const char *body) {
    rsd_http_client_desc cd;
    rsd_http_client *c;
    rsd_http_request rq;
    rsd_http_event ev;
    char url[128];
    int st = -1;
    memset(&cd, 0, sizeof cd);
    cd.tls_off = true;
    c = rsd_http_client_create(&cd);
    if (!c) return -1;
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)port, path);
    memset(&rq, 0, sizeof rq);
    rq.method = method;
    rq.url = url;
    if (body) {
        rq.body = body;
        rq.body_len = strlen(body);
        rq.content_type = "application/json";
    }
    rq.total_timeout_ms = 10000;
    if (rsd_http_request_sync(c, &rq, &ev) == RSD_OK) st = ev.status;
    rsd_http_client_destroy(c);
    return st;
}

/* Asks the rsd-sim child on port to exit with code (POST /_sim/crash for its model file). */
static void sim_crash(uint16_t port, const char *model_name, int code) {
    char body[900], esc[820];
    const char *m = model_file(model_name);
    size_t k = 0;
    for (; *m && k + 2 < sizeof esc; m++) { /* a JSON string (Windows paths have '\\') */
        if (*m == '\\' || *m == '"') esc[k++] = '\\';
        esc[k++] = *m;
    }
    esc[k] = '\0';
    snprintf(body, sizeof body, "{\"model\":\"%s\",\"exit_code\":%d}", esc, code);
    (void)http_status(port, "POST", "/_sim/crash", body);
}

/* Acquire and wait for the GRANT: returns the port (0 on failure). */
static uint16_t acquire_wait(rsd_fleet *f, int model, rsd_pool_req_h *req) {
    uint16_t port = 0;
    int r = rsd_fleet_acquire(f, model, tnow(), NULL, req, &port), i;
    if (r == RSD_OK) return port;
    if (r != RSD_PENDING) return 0;
    {
        uint64_t end = now_ms() + WAIT_MS;
        while (now_ms() < end) {
            drain(f);
            for (i = 0; i < g_log.n; i++) {
                const rsd_fleet_event *e = &g_log.e[i].ev;
                if (e->req.id == req->id && (e->kind == RSD_FLEET_EV_GRANT || e->kind == RSD_FLEET_EV_FAIL)) {
                    e = &g_log.e[i].ev;
                    if (e->kind == RSD_FLEET_EV_FAIL) return 0;
                    port = e->port;
                    g_log.e[i].ev.req.id = 0; /* consumed */
                    return port;
                }
            }
            round_once(f, NULL);
        }
    }
    return 0;
}

static void finish(rsd_fleet *f) {
    CHECK(rsd_fleet_stop(f, tnow()) >= 0);
    CHECK(await_idle(f));
    rsd_fleet_destroy(f);
}

/* ---- tests ---- */
static void test_grant_flow(void) {
    int fd0 = count_fds();
    rsd_fleet *f;
    rsd_pool_req_h req, req2;
    rsd_fleet_model_info mi;
    rsd_fleet_info fi;
    uint16_t port, port2 = 0;
    int a;
    const logged *l;
    log_reset();
    f = mk_fleet(1, 0);
    REQUIRE(f != NULL);
    a = add(f, "a", NULL);
    CHECK_EQ_INT(a, 0);
    CHECK_EQ_INT(rsd_fleet_find_model(f, rsd_str_c("a")), 0);
    port = acquire_wait(f, a, &req);
    CHECK(port > 0);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STARTING, a), 1);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_READY, a), 1);
    l = find_kind(RSD_FLEET_EV_READY, a, 0);
    CHECK(l && l->ev.port == port && l->ev.pid > 0);
    CHECK_EQ_INT(http_status(port, "GET", "/health", NULL), 200);
    CHECK_EQ_INT(http_status(port, "POST", "/v1/chat/completions",
                             "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"), 200);
    CHECK_EQ_INT(rsd_fleet_query_model(f, a, &mi), RSD_OK);
    CHECK(mi.pid == l->ev.pid && mi.port == port && mi.ready_ms >= mi.started_ms && mi.started_ms > 0);
    CHECK_EQ_INT(mi.pool.running, 1);
    rsd_fleet_query(f, &fi);
    CHECK(fi.models == 1 && fi.processes == 1 && fi.ready == 1 && fi.starting == 0 && fi.stopping == 0);
    CHECK(!fi.stopped && fi.pool.running == 1 && fi.pool.spawns == 1);
    CHECK_EQ_INT(rsd_fleet_release(f, req, tnow()), RSD_OK);
    /* resident now: granted at once */
    CHECK_EQ_INT(rsd_fleet_acquire(f, a, tnow(), NULL, &req2, &port2), RSD_OK);
    CHECK_EQ_INT(port2, port);
    CHECK_EQ_INT(rsd_fleet_release(f, req2, tnow()), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_release(f, req2, tnow()), RSD_ERR_POOL_STALE);
    finish(f);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STOPPING, a), 1);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_EXITED, a), 1);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* An executable file that exec refuses (empty: ENOEXEC): it passes the checks made
   before a start, so the spawn itself fails. */
static const char *noexec_file(void) {
    const char *p = model_file("noexec-server");
    (void)chmod(p, 0755);
    return p;
}

/* What can be checked before a start is checked before anything is stopped for it: a
   missing binary or model file fails the acquire at once (RSD_ERR_FLEET_START, no
   handle, no event), the idle healthy model stays, and query_model says why. */
static void test_missing_binary(void) {
    int fd0 = count_fds();
    rsd_fleet *f;
    rsd_fleet_model_desc md;
    rsd_fleet_model_info mi;
    rsd_pool_req_h req;
    uint16_t port;
    int m, good, nofile;
    log_reset();
    f = mk_fleet(1, 0);
    REQUIRE(f != NULL);
    sim_model(&md, "ghost", NULL);
    md.spec.exe = "/nonexistent/dir/llama-server";
    m = rsd_fleet_add_model(f, &md);
    CHECK_EQ_INT(m, 0);
    good = add(f, "good", NULL);
    sim_model(&md, "nofile", NULL);
    md.spec.model = "/nonexistent/models/nofile.gguf";
    nofile = rsd_fleet_add_model(f, &md);
    REQUIRE(acquire_wait(f, good, &req) > 0);
    CHECK_EQ_INT(rsd_fleet_release(f, req, tnow()), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_acquire(f, m, tnow(), &md, &req, &port), RSD_ERR_FLEET_START);
    CHECK_EQ_INT(req.id, 0);
    CHECK_EQ_INT(rsd_fleet_query_model(f, m, &mi), RSD_OK);
    CHECK_EQ_INT(mi.last_result, RSD_ERR_FLEET_START);
    REQUIRE(mi.last_error != NULL);
    CHECK(strstr(mi.last_error, "No such file or directory") != NULL);
    CHECK(strstr(mi.last_error, "/nonexistent/dir/llama-server") != NULL);
    CHECK(strstr(mi.last_error, "ghost") != NULL);
    CHECK_EQ_INT(rsd_fleet_load(f, m, tnow()), RSD_ERR_FLEET_START);
    CHECK_EQ_INT(rsd_fleet_acquire(f, nofile, tnow(), NULL, &req, &port), RSD_ERR_FLEET_START);
    CHECK_EQ_INT(rsd_fleet_query_model(f, nofile, &mi), RSD_OK);
    REQUIRE(mi.last_error != NULL);
    CHECK(strstr(mi.last_error, "cannot read model file /nonexistent/models/nofile.gguf") != NULL);
    drain(f);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STOPPING, -1), 0);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_CRASHED, -1), 0);
    CHECK_EQ_INT(rsd_fleet_query_model(f, good, &mi), RSD_OK);
    CHECK_EQ_INT(mi.pool.state, RSD_POOL_SLOT_READY);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* A spawn that fails after the checks passed (exec refuses the file) fails the waiting
   request promptly with errno and command, and backs the model off: the next request is
   refused at once (RSD_ERR_POOL_BACKOFF) instead of spawning again; a reset clears it. */
static void test_spawn_failure_backs_off(void) {
    int fd0 = count_fds();
    rsd_fleet *f;
    rsd_fleet_model_desc md;
    rsd_fleet_model_info mi;
    rsd_pool_req_h req;
    uint16_t port;
    const logged *l;
    int m;
    log_reset();
    f = mk_fleet(1, 0);
    REQUIRE(f != NULL);
    sim_model(&md, "noexec", NULL);
    md.spec.exe = noexec_file();
    m = rsd_fleet_add_model(f, &md);
    CHECK_EQ_INT(rsd_fleet_acquire(f, m, tnow(), &md, &req, &port), RSD_PENDING);
    /* promptly: the FAIL is queued by the acquire itself, no step, no deadline */
    drain(f);
    l = find_kind(RSD_FLEET_EV_FAIL, m, 0);
    REQUIRE(l != NULL);
    CHECK_EQ_INT(l->ev.req.id, req.id);
    CHECK(l->ev.user == (void *)&md);
    CHECK_EQ_INT(l->ev.result, RSD_ERR_FLEET_START);
    CHECK(strstr(l->msg, "Exec format error") != NULL);
    CHECK(strstr(l->msg, "noexec-server") != NULL);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_CRASHED, m), 1);
    CHECK(rsd_fleet_idle(f));
    CHECK_EQ_INT(rsd_fleet_query_model(f, m, &mi), RSD_OK);
    CHECK(mi.retry_at_ms > tnow());
    CHECK(mi.last_error && strstr(mi.last_error, "Exec format error"));
    CHECK_EQ_INT(rsd_fleet_acquire(f, m, tnow(), NULL, &req, &port), RSD_ERR_POOL_BACKOFF);
    drain(f);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_CRASHED, m), 1); /* not spawned again */
    CHECK_EQ_INT(rsd_pool_reset_backoff(rsd_fleet_pool(f), m), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_acquire(f, m, tnow(), NULL, &req, &port), RSD_PENDING);
    drain(f);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_FAIL, m), 2); /* nothing stays claimed (W27) */
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* A model that cannot start does not cost a healthy one: the idle model evicted to make
   room is started again when the load fails, and the next requests for the broken model
   are refused by its backoff instead of evicting again (one eviction for three). */
static void test_failed_start_restores_evicted(void) {
    static const char *const failing[] = {"--runtime", "server", "--load-ms", "30", "--fail-ms", "30", NULL};
    int fd0 = count_fds(), good, bad, i, r;
    rsd_fleet *f;
    rsd_fleet_model_desc md;
    rsd_fleet_model_info mi;
    rsd_pool_info st;
    rsd_pool_req_h req;
    uint16_t port;
    log_reset();
    f = mk_fleet(1, 0);
    REQUIRE(f != NULL);
    good = add(f, "good", NULL);
    sim_model(&md, "bad", failing);
    md.spec.model = model_file("bad.gguf,fail=1");
    bad = rsd_fleet_add_model(f, &md);
    REQUIRE(acquire_wait(f, good, &req) > 0);
    CHECK_EQ_INT(rsd_fleet_release(f, req, tnow()), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_acquire(f, bad, tnow(), NULL, &req, &port), RSD_PENDING);
    CHECK(await(f, RSD_FLEET_EV_FAIL, bad, 0) != NULL);
    CHECK(await(f, RSD_FLEET_EV_READY, good, 1) != NULL); /* good is back */
    for (i = 0; i < 2; i++) {
        r = rsd_fleet_acquire(f, bad, tnow(), NULL, &req, &port);
        CHECK_EQ_INT(r, RSD_ERR_POOL_BACKOFF);
    }
    CHECK_EQ_INT(rsd_fleet_query_model(f, bad, &mi), RSD_OK);
    CHECK(mi.last_error && strstr(mi.last_error, "exiting due to model loading error"));
    CHECK(mi.retry_at_ms > 0);
    rsd_pool_query(rsd_fleet_pool(f), &st);
    CHECK_EQ_INT(st.evictions, 1);
    CHECK_EQ_INT(st.restores, 1);
    CHECK_EQ_INT(rsd_fleet_acquire(f, good, tnow(), NULL, &req, &port), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_release(f, req, tnow()), RSD_OK);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* The child's own slot count (GET /props total_slots, here -np 2) bounds the requests
   sent to it when the model sets no max_in_flight: the third waits in the pool (not in
   the child's accept queue) and is granted when one finishes. */
static void test_child_slots_bound_requests(void) {
    int fd0 = count_fds(), a, i, granted = 0;
    rsd_fleet *f;
    rsd_pool_req_h r[3];
    rsd_pool_info st;
    uint16_t port;
    log_reset();
    f = mk_fleet(1, 0);
    REQUIRE(f != NULL);
    a = add(f, "a", NULL); /* spec.parallel = 2, pool max_in_flight 0 */
    REQUIRE(acquire_wait(f, a, &r[0]) > 0);
    rsd_pool_query(rsd_fleet_pool(f), &st);
    CHECK_EQ_INT(st.slots[0].max_in_flight, 2);
    for (i = 1; i < 3; i++) {
        int rc = rsd_fleet_acquire(f, a, tnow(), NULL, &r[i], &port);
        if (rc == RSD_OK) granted++;
        else CHECK_EQ_INT(rc, RSD_PENDING);
    }
    CHECK_EQ_INT(granted, 1);
    rsd_pool_query(rsd_fleet_pool(f), &st);
    CHECK_EQ_INT(st.running, 2);
    CHECK_EQ_INT(st.waiting, 1);
    CHECK_EQ_INT(rsd_fleet_release(f, r[0], tnow()), RSD_OK);
    drain(f);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_GRANT, a), 2); /* r0 (by acquire_wait), then r2 */
    CHECK_EQ_INT(rsd_fleet_release(f, r[1], tnow()), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_release(f, r[2], tnow()), RSD_OK);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* Every STOP the pool decided with why EVICT (or TTL/TRIM) found the slot idle. */
static bool evictions_were_idle(rsd_fleet *f, int *stops) {
    rsd_pool_event pe;
    bool ok = true;
    *stops = 0;
    while (rsd_pool_next_event(rsd_fleet_pool(f), &pe))
        if (pe.kind == RSD_POOL_EV_STOP) {
            (*stops)++;
            if ((pe.why == RSD_POOL_WHY_EVICT || pe.why == RSD_POOL_WHY_TTL ||
                 pe.why == RSD_POOL_WHY_TRIM) && pe.in_flight != 0)
                ok = false;
        }
    return ok;
}

static const logged *stop_of(int model, rsd_pool_why why) {
    int i;
    for (i = 0; i < g_log.n; i++)
        if (g_log.e[i].ev.kind == RSD_FLEET_EV_STOPPING && g_log.e[i].ev.model == model &&
            g_log.e[i].ev.why == why)
            return &g_log.e[i];
    return NULL;
}

/* 6.11.1: two models served at once by independent processes. */
static void test_two_models_concurrently(void) {
    int fd0 = count_fds(), a, b;
    rsd_fleet *f;
    rsd_pool_req_h ra, rb;
    uint16_t pa, pb;
    rsd_fleet_model_info ia, ib;
    log_reset();
    f = mk_fleet(2, 0);
    REQUIRE(f != NULL);
    a = add(f, "a", NULL);
    b = add(f, "b", NULL);
    CHECK_EQ_INT(rsd_fleet_acquire(f, a, tnow(), NULL, &ra, &pa), RSD_PENDING);
    pb = acquire_wait(f, b, &rb);
    pa = acquire_wait(f, a, &ra);
    CHECK(pa > 0 && pb > 0 && pa != pb);
    /* both held at once: each answers */
    CHECK_EQ_INT(http_status(pa, "GET", "/v1/models", NULL), 200);
    CHECK_EQ_INT(http_status(pb, "GET", "/v1/models", NULL), 200);
    CHECK_EQ_INT(rsd_fleet_query_model(f, a, &ia), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_query_model(f, b, &ib), RSD_OK);
    CHECK(ia.pid > 0 && ib.pid > 0 && ia.pid != ib.pid);
    CHECK_EQ_INT(ia.pool.state, RSD_POOL_SLOT_READY);
    CHECK_EQ_INT(ib.pool.state, RSD_POOL_SLOT_READY);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STOPPING, -1), 0);
    CHECK_EQ_INT(rsd_fleet_release(f, ra, tnow()), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_release(f, rb, tnow()), RSD_OK);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* 6.11.2: preload a, b, c with max 2: a (the LRU idle one) is stopped, once. */
static void test_lru_evicts_idle(void) {
    int fd0 = count_fds(), a, b, c, stops;
    rsd_fleet *f;
    rsd_fleet_model_info ia, ib, ic;
    log_reset();
    f = mk_fleet(2, 0);
    REQUIRE(f != NULL);
    a = add(f, "a", NULL);
    b = add(f, "b", NULL);
    c = add(f, "c", NULL);
    CHECK_EQ_INT(rsd_fleet_load(f, a, tnow()), RSD_PENDING);
    CHECK(await(f, RSD_FLEET_EV_READY, a, 0) != NULL);
    CHECK(rsd_fleet_load(f, b, tnow()) >= 0);
    CHECK(await(f, RSD_FLEET_EV_READY, b, 0) != NULL);
    CHECK(rsd_fleet_load(f, c, tnow()) >= 0);
    CHECK(await(f, RSD_FLEET_EV_READY, c, 0) != NULL);
    CHECK(await(f, RSD_FLEET_EV_EXITED, a, 0) != NULL);
    CHECK(stop_of(a, RSD_POOL_WHY_EVICT) != NULL);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STOPPING, -1), 1);
    CHECK_EQ_INT(rsd_fleet_query_model(f, a, &ia), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_query_model(f, b, &ib), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_query_model(f, c, &ic), RSD_OK);
    CHECK(ia.pid == 0 && ia.pool.slot == -1);
    CHECK(ib.pid > 0 && ic.pid > 0);
    CHECK(evictions_were_idle(f, &stops));
    CHECK_EQ_INT(stops, 1);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* 6.11.3 + busy never evicted: max 1, a streaming completion held open on a while b
   is requested; b does not start and nothing is stopped until a is released. */
static void test_busy_streaming_never_evicted(void) {
    static const char *const slow[] = {"--runtime", "server", "--load-ms", "40", "--token-ms", "25", NULL};
    int fd0 = count_fds(), a, b, stops;
    rsd_fleet *f;
    rsd_http_client_desc cd;
    rsd_http_client *c;
    rsd_http_request rq;
    rsd_http_req_h h;
    rsd_http_event hev;
    rsd_pool_req_h ra, rb;
    uint16_t pa, pb;
    char url[128];
    bool done = false;
    uint64_t end;
    const logged *g;
    const char *body = "{\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    log_reset();
    f = mk_fleet(1, 0);
    REQUIRE(f != NULL);
    a = add(f, "a", slow);
    b = add(f, "b", NULL);
    pa = acquire_wait(f, a, &ra);
    REQUIRE(pa > 0);
    memset(&cd, 0, sizeof cd);
    cd.tls_off = true;
    c = rsd_http_client_create(&cd);
    REQUIRE(c != NULL);
    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/chat/completions", (unsigned)pa);
    memset(&rq, 0, sizeof rq);
    rq.method = "POST";
    rq.url = url;
    rq.body = body;
    rq.body_len = strlen(body);
    rq.content_type = "application/json";
    CHECK_EQ_INT(rsd_http_send(c, &rq, tnow(), &h), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_acquire(f, b, tnow(), NULL, &rb, &pb), RSD_PENDING);
    end = now_ms() + WAIT_MS;
    memset(&hev, 0, sizeof hev);
    while (!done && now_ms() < end) {
        round_once(f, c);
        while (rsd_http_next_event(c, &hev)) done = true;
    }
    CHECK(done);
    CHECK_EQ_INT(hev.result, RSD_OK);
    CHECK_EQ_INT(hev.status, 200);
    CHECK(hev.body.len > 100 && strstr(hev.body.ptr, "data: [DONE]") != NULL);
    /* the whole stream ran while b waited: nothing started, nothing stopped */
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STARTING, b), 0);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STOPPING, -1), 0);
    rsd_http_client_destroy(c);
    CHECK_EQ_INT(rsd_fleet_release(f, ra, tnow()), RSD_OK);
    g = await(f, RSD_FLEET_EV_GRANT, b, 0);
    CHECK(g != NULL);
    CHECK(stop_of(a, RSD_POOL_WHY_EVICT) != NULL);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STOPPING, -1), 1);
    if (g) {
        CHECK_EQ_INT(http_status(g->ev.port, "GET", "/health", NULL), 200);
        CHECK_EQ_INT(rsd_fleet_release(f, g->ev.req, tnow()), RSD_OK);
    }
    CHECK(evictions_were_idle(f, &stops));
    CHECK_EQ_INT(stops, 1);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* 6.11.4: max 2, a and b busy: a new request for a completes while c waits; c runs
   after b finishes (b is the one stopped). */
static void test_residents_keep_flowing(void) {
    int fd0 = count_fds(), a, b, c, stops;
    rsd_fleet *f;
    rsd_pool_req_h ra, rb, rc, ra2;
    uint16_t pa, pb, pc, pa2 = 0;
    const logged *g;
    log_reset();
    f = mk_fleet(2, 0);
    REQUIRE(f != NULL);
    a = add(f, "a", NULL);
    b = add(f, "b", NULL);
    c = add(f, "c", NULL);
    pa = acquire_wait(f, a, &ra);
    pb = acquire_wait(f, b, &rb);
    REQUIRE(pa > 0 && pb > 0);
    CHECK_EQ_INT(rsd_fleet_acquire(f, c, tnow(), NULL, &rc, &pc), RSD_PENDING);
    CHECK_EQ_INT(rsd_fleet_acquire(f, a, tnow(), NULL, &ra2, &pa2), RSD_OK);
    CHECK_EQ_INT(pa2, pa);
    CHECK_EQ_INT(http_status(pa2, "POST", "/v1/chat/completions",
                             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}"), 200);
    CHECK_EQ_INT(rsd_fleet_release(f, ra2, tnow()), RSD_OK);
    round_once(f, NULL);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STARTING, c), 0);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STOPPING, -1), 0);
    CHECK_EQ_INT(rsd_fleet_release(f, rb, tnow()), RSD_OK);
    g = await(f, RSD_FLEET_EV_GRANT, c, 0);
    CHECK(g != NULL);
    CHECK(stop_of(b, RSD_POOL_WHY_EVICT) != NULL);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STOPPING, a), 0);
    if (g) CHECK_EQ_INT(rsd_fleet_release(f, g->ev.req, tnow()), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_release(f, ra, tnow()), RSD_OK);
    CHECK(evictions_were_idle(f, &stops));
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* Pins: a pinned model is never the victim; with no room beside it, at once PINNED. */
static void test_pins(void) {
    int fd0 = count_fds(), a, b, c;
    rsd_fleet *f;
    rsd_fleet_model_desc md;
    rsd_pool_req_h r;
    uint16_t port;
    log_reset();
    f = mk_fleet(1, 0);
    REQUIRE(f != NULL);
    sim_model(&md, "a", NULL);
    md.pool.pinned = true;
    a = rsd_fleet_add_model(f, &md);
    b = add(f, "b", NULL);
    c = add(f, "c", NULL);
    CHECK(rsd_fleet_load(f, a, tnow()) >= 0);
    CHECK(await(f, RSD_FLEET_EV_READY, a, 0) != NULL);
    CHECK_EQ_INT(rsd_fleet_acquire(f, b, tnow(), NULL, &r, &port), RSD_ERR_POOL_PINNED);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STARTING, b), 0);
    /* two slots: b and c take turns in the second, a stays */
    CHECK_EQ_INT(rsd_pool_configure(rsd_fleet_pool(f), 2, tnow()), RSD_OK);
    port = acquire_wait(f, b, &r);
    CHECK(port > 0);
    CHECK_EQ_INT(rsd_fleet_release(f, r, tnow()), RSD_OK);
    port = acquire_wait(f, c, &r);
    CHECK(port > 0);
    CHECK_EQ_INT(rsd_fleet_release(f, r, tnow()), RSD_OK);
    CHECK(stop_of(b, RSD_POOL_WHY_EVICT) != NULL);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STOPPING, a), 0);
    /* an explicit unload stops a pinned model too */
    CHECK_EQ_INT(rsd_pool_unload(rsd_fleet_pool(f), a, RSD_POOL_UNLOAD_REFUSE_BUSY, tnow()), RSD_OK);
    CHECK(await(f, RSD_FLEET_EV_EXITED, a, 0) != NULL);
    CHECK(stop_of(a, RSD_POOL_WHY_UNLOAD) != NULL);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* Idle TTL: driven by a later now_ms, no sleeping. */
static void test_ttl_expiry(void) {
    int fd0 = count_fds(), a;
    rsd_fleet *f;
    rsd_fleet_model_desc md;
    rsd_fleet_model_info mi;
    rsd_pool_req_h r;
    uint16_t port;
    uint64_t rel;
    log_reset();
    f = mk_fleet(1, 0);
    REQUIRE(f != NULL);
    sim_model(&md, "a", NULL);
    md.pool.ttl_ms = 60000;
    a = rsd_fleet_add_model(f, &md);
    port = acquire_wait(f, a, &r);
    REQUIRE(port > 0);
    rel = tnow();
    CHECK_EQ_INT(rsd_fleet_release(f, r, rel), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_query_model(f, a, &mi), RSD_OK);
    CHECK_EQ_INT(mi.idle_deadline_ms, rel + 60000);
    CHECK(mi.last_used_ms == rel);
    CHECK(rsd_fleet_next_deadline(f) <= rel + 60000);
    round_once(f, NULL);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STOPPING, a), 0);
    g_log.tick = 61000; /* one minute later */
    CHECK(await(f, RSD_FLEET_EV_EXITED, a, 0) != NULL);
    CHECK(stop_of(a, RSD_POOL_WHY_TTL) != NULL);
    /* and it comes back on the next request */
    port = acquire_wait(f, a, &r);
    CHECK(port > 0);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STARTING, a), 2);
    CHECK_EQ_INT(rsd_fleet_release(f, r, tnow()), RSD_OK);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* Byte budget: a model that can never fit fails at once; two that do not fit together
   take turns even though the count would allow both. */
static void test_byte_budget(void) {
    int fd0 = count_fds(), big, a, b;
    rsd_fleet *f;
    rsd_fleet_desc d;
    rsd_fleet_model_desc md;
    rsd_pool_req_h r;
    uint16_t port;
    log_reset();
    memset(&d, 0, sizeof d);
    d.pool.max_slots = 2;
    d.pool.vram_budget_bytes = 10ull << 30;
    d.procs.term_grace_ms = 2000;
    f = rsd_fleet_create(&d);
    REQUIRE(f != NULL);
    sim_model(&md, "big", NULL);
    md.pool.reserve_bytes = 20ull << 30;
    big = rsd_fleet_add_model(f, &md);
    sim_model(&md, "a", NULL);
    md.pool.reserve_bytes = 6ull << 30;
    a = rsd_fleet_add_model(f, &md);
    sim_model(&md, "b", NULL);
    md.pool.reserve_bytes = 6ull << 30;
    b = rsd_fleet_add_model(f, &md);
    CHECK_EQ_INT(rsd_fleet_acquire(f, big, tnow(), NULL, &r, &port), RSD_ERR_POOL_NO_FIT);
    CHECK_EQ_INT(r.id, 0);
    drain(f);
    CHECK_EQ_INT(g_log.n, 0); /* nothing started, nothing to pull */
    port = acquire_wait(f, a, &r);
    CHECK(port > 0);
    CHECK_EQ_INT(rsd_fleet_release(f, r, tnow()), RSD_OK);
    port = acquire_wait(f, b, &r);
    CHECK(port > 0);
    CHECK_EQ_INT(rsd_fleet_release(f, r, tnow()), RSD_OK);
    CHECK(stop_of(a, RSD_POOL_WHY_EVICT) != NULL);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* A ready process dies: CRASHED with its status and last words; the request running
   there is orphaned; the next request respawns the model. */
static void test_crash_and_respawn(void) {
    int fd0 = count_fds(), a;
    rsd_fleet *f;
    rsd_pool_req_h r;
    uint16_t port;
    const logged *l, *first;
    log_reset();
    f = mk_fleet(1, 0);
    REQUIRE(f != NULL);
    a = add(f, "a", NULL);
    port = acquire_wait(f, a, &r);
    REQUIRE(port > 0);
    first = find_kind(RSD_FLEET_EV_READY, a, 0);
    sim_crash(port, "a.gguf", 3);
    l = await(f, RSD_FLEET_EV_CRASHED, a, 0);
    REQUIRE(l != NULL);
    CHECK_EQ_INT(l->ev.result, RSD_ERR_POOL_CRASHED);
    CHECK_EQ_INT(l->ev.exit_code, 3);
    CHECK(strstr(l->msg, "exited with code 3 while serving") != NULL);
    CHECK(strstr(l->msg, "last output") != NULL);
    CHECK_EQ_INT(rsd_fleet_release(f, r, tnow()), RSD_OK); /* orphaned: bookkeeping */
    CHECK(rsd_fleet_idle(f));
    port = acquire_wait(f, a, &r);
    CHECK(port > 0);
    l = find_kind(RSD_FLEET_EV_READY, a, 1);
    CHECK(l && first && l->ev.pid != first->ev.pid);
    CHECK_EQ_INT(rsd_fleet_release(f, r, tnow()), RSD_OK);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* Stop with a child that ignores SIGTERM: SIGKILL after the grace period. */
static void test_stop_sigkill(void) {
    static const char *const stubborn[] = {"--runtime", "server", "--load-ms", "20", "--ignore-sigterm", NULL};
    int fd0 = count_fds(), a;
    rsd_fleet *f;
    rsd_pool_req_h r;
    uint16_t port;
    const logged *l;
    log_reset();
    f = mk_fleet(1, 150);
    REQUIRE(f != NULL);
    a = add(f, "a", stubborn);
    port = acquire_wait(f, a, &r);
    REQUIRE(port > 0);
    CHECK_EQ_INT(rsd_fleet_release(f, r, tnow()), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_stop(f, tnow()), RSD_OK);
    CHECK(!rsd_fleet_idle(f));
    CHECK(await_idle(f));
    l = find_kind(RSD_FLEET_EV_EXITED, a, 0);
    REQUIRE(l != NULL);
    CHECK_EQ_INT(l->ev.term_signal, SIGKILL);
    CHECK(stop_of(a, RSD_POOL_WHY_SHUTDOWN) != NULL);
    /* stopped: later work is refused */
    CHECK_EQ_INT(rsd_fleet_acquire(f, a, tnow(), NULL, &r, &port), RSD_ERR_POOL_STOPPED);
    rsd_fleet_destroy(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* A load that fails: the child exits 1 while /health says 503 (W31: at once). */
static void test_early_exit_fails_waiters(void) {
    static const char *const failing[] = {"--runtime", "server", "--load-ms", "30", "--fail-ms", "30", NULL};
    int fd0 = count_fds(), a;
    rsd_fleet *f;
    rsd_fleet_model_desc md;
    rsd_pool_req_h r1, r2;
    uint16_t port;
    const logged *l;
    log_reset();
    f = mk_fleet(1, 0);
    REQUIRE(f != NULL);
    sim_model(&md, "bad", failing);
    md.spec.model = model_file("bad.gguf,fail=1");
    a = rsd_fleet_add_model(f, &md);
    CHECK_EQ_INT(rsd_fleet_acquire(f, a, tnow(), NULL, &r1, &port), RSD_PENDING);
    CHECK_EQ_INT(rsd_fleet_acquire(f, a, tnow(), NULL, &r2, &port), RSD_PENDING);
    CHECK(await(f, RSD_FLEET_EV_FAIL, a, 1) != NULL);
    l = find_kind(RSD_FLEET_EV_FAIL, a, 0);
    REQUIRE(l != NULL);
    CHECK_EQ_INT(l->ev.result, RSD_ERR_FLEET_START);
    CHECK(strstr(l->msg, "exited with code 1 before it was ready") != NULL);
    CHECK(strstr(l->msg, "exiting due to model loading error") != NULL);
    CHECK(strstr(l->msg, "command: ") != NULL);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_READY, a), 0);
    l = find_kind(RSD_FLEET_EV_CRASHED, a, 0);
    CHECK(l && l->ev.result == RSD_ERR_FLEET_START && l->ev.exit_code == 1);
    CHECK(rsd_fleet_idle(f));
    {
        rsd_fleet_model_info mi;
        CHECK_EQ_INT(rsd_fleet_query_model(f, a, &mi), RSD_OK);
        CHECK_EQ_INT(mi.last_result, RSD_ERR_FLEET_START);
        CHECK_EQ_INT(mi.pool.slot, -1);
    }
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* No 200 by the start deadline: the waiters fail with the reason, the child is stopped. */
static void test_start_timeout(void) {
    static const char *const slowload[] = {"--runtime", "server", "--load-ms", "600000", NULL};
    int fd0 = count_fds(), a;
    rsd_fleet *f;
    rsd_fleet_model_desc md;
    rsd_pool_req_h r;
    uint16_t port;
    const logged *l;
    log_reset();
    f = mk_fleet(1, 0);
    REQUIRE(f != NULL);
    sim_model(&md, "slow", slowload);
    md.spec.start_deadline_ms = 300;
    a = rsd_fleet_add_model(f, &md);
    CHECK_EQ_INT(rsd_fleet_acquire(f, a, tnow(), NULL, &r, &port), RSD_PENDING);
    l = await(f, RSD_FLEET_EV_FAIL, a, 0);
    REQUIRE(l != NULL);
    CHECK_EQ_INT(l->ev.result, RSD_ERR_FLEET_START);
    CHECK(strstr(l->msg, "not ready within") != NULL);
    CHECK(await(f, RSD_FLEET_EV_CRASHED, a, 0) != NULL);
    CHECK(await_idle(f));
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_READY, a), 0);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* The port is taken (W30 residual race): the child exits at once saying so. */
static void test_bind_failure(void) {
    int fd0 = count_fds(), a, lfd;
    rsd_fleet *f;
    rsd_fleet_model_desc md;
    rsd_pool_req_h r;
    uint16_t port;
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    const logged *l;
    log_reset();
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(lfd >= 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(lfd, 4) == 0);
    CHECK(getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0);
    f = mk_fleet(1, 0);
    REQUIRE(f != NULL);
    sim_model(&md, "clash", NULL);
    md.spec.port = ntohs(sa.sin_port);
    a = rsd_fleet_add_model(f, &md);
    CHECK_EQ_INT(rsd_fleet_acquire(f, a, tnow(), NULL, &r, &port), RSD_PENDING);
    l = await(f, RSD_FLEET_EV_FAIL, a, 0);
    REQUIRE(l != NULL);
    CHECK_EQ_INT(l->ev.result, RSD_ERR_FLEET_START);
    CHECK(strstr(l->msg, "couldn't bind") != NULL);
    finish(f);
    tp_sock_close(lfd);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* A waiting request cancelled: no GRANT for it; the model still loads for the next. */
static void test_cancel_waiting(void) {
    int fd0 = count_fds(), a;
    rsd_fleet *f;
    rsd_pool_req_h r1, r2;
    uint16_t port;
    log_reset();
    f = mk_fleet(1, 0);
    REQUIRE(f != NULL);
    a = add(f, "a", NULL);
    CHECK_EQ_INT(rsd_fleet_acquire(f, a, tnow(), NULL, &r1, &port), RSD_PENDING);
    CHECK_EQ_INT(rsd_fleet_cancel(f, r1, tnow()), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_cancel(f, r1, tnow()), RSD_ERR_POOL_STALE);
    port = acquire_wait(f, a, &r2);
    CHECK(port > 0);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_GRANT, -1), 1);
    CHECK_EQ_INT(rsd_fleet_cancel(f, r2, tnow()), RSD_OK); /* a granted one: released */
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* Destroy without a graceful stop: children killed and reaped, descriptors closed. */
static void test_destroy_kills(void) {
    int fd0 = count_fds(), a, b;
    rsd_fleet *f;
    rsd_pool_req_h r;
    uint16_t port;
    log_reset();
    f = mk_fleet(2, 0);
    REQUIRE(f != NULL);
    a = add(f, "a", NULL);
    b = add(f, "b", NULL);
    port = acquire_wait(f, a, &r);
    CHECK(port > 0);
    CHECK_EQ_INT(rsd_fleet_acquire(f, b, tnow(), NULL, &r, &port), RSD_PENDING); /* starting */
    rsd_fleet_destroy(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

static void test_bad_args(void) {
    rsd_fleet *f;
    rsd_fleet_model_desc md;
    rsd_pool_req_h r;
    uint16_t port;
    static char longs[RSD_FLEET_SPEC_BYTES + 10];
    const char *argsv[3];
    f = mk_fleet(1, 0);
    REQUIRE(f != NULL);
    sim_model(&md, "x", NULL);
    md.health_path = "health";
    CHECK_EQ_INT(rsd_fleet_add_model(f, &md), RSD_ERR_ARG);
    memset(longs, 'x', sizeof longs - 1);
    argsv[0] = longs;
    argsv[1] = NULL;
    sim_model(&md, "x", NULL);
    md.spec.extra = argsv;
    CHECK_EQ_INT(rsd_fleet_add_model(f, &md), RSD_ERR_CAPACITY);
    CHECK_EQ_INT(rsd_fleet_acquire(f, 0, tnow(), NULL, &r, &port), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_fleet_acquire(NULL, 0, tnow(), NULL, &r, &port), RSD_ERR_ARG);
    CHECK(!rsd_fleet_next_event(f, NULL));
    CHECK_EQ_INT(rsd_fleet_step(NULL, 0), RSD_ERR_ARG);
    CHECK(rsd_fleet_idle(f));
    CHECK(rsd_fleet_next_deadline(f) == UINT64_MAX);
    CHECK_EQ_STR(rsd_fleet_event_str(RSD_FLEET_EV_GRANT), "GRANT");
    CHECK_EQ_STR(rsd_fleet_event_str(99), "?");
    rsd_fleet_destroy(f);
    rsd_fleet_destroy(NULL);
}

/* Lowering the maximum stops the LRU idle process (TRIM); unload with DRAIN waits for
   the busy one's last release. */
static void test_configure_and_unload_drain(void) {
    int fd0 = count_fds(), a, b, stops;
    rsd_fleet *f;
    rsd_pool_req_h r;
    uint16_t port;
    log_reset();
    f = mk_fleet(2, 0);
    REQUIRE(f != NULL);
    a = add(f, "a", NULL);
    b = add(f, "b", NULL);
    CHECK(rsd_fleet_load(f, a, tnow()) >= 0);
    CHECK(await(f, RSD_FLEET_EV_READY, a, 0) != NULL);
    port = acquire_wait(f, b, &r);
    REQUIRE(port > 0);
    /* max 1: a is idle (trimmed), b is busy (kept) */
    CHECK_EQ_INT(rsd_pool_configure(rsd_fleet_pool(f), 1, tnow()), RSD_OK);
    CHECK(await(f, RSD_FLEET_EV_EXITED, a, 0) != NULL);
    CHECK(stop_of(a, RSD_POOL_WHY_TRIM) != NULL);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STOPPING, b), 0);
    /* unload b: refused while busy, or drained */
    CHECK_EQ_INT(rsd_pool_unload(rsd_fleet_pool(f), b, RSD_POOL_UNLOAD_REFUSE_BUSY, tnow()),
                 RSD_ERR_POOL_BUSY);
    CHECK_EQ_INT(rsd_pool_unload(rsd_fleet_pool(f), b, RSD_POOL_UNLOAD_DRAIN, tnow()), RSD_PENDING);
    round_once(f, NULL);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STOPPING, b), 0);
    CHECK_EQ_INT(http_status(port, "GET", "/health", NULL), 200); /* still serving it */
    CHECK_EQ_INT(rsd_fleet_release(f, r, tnow()), RSD_OK);
    CHECK(await(f, RSD_FLEET_EV_EXITED, b, 0) != NULL);
    CHECK(stop_of(b, RSD_POOL_WHY_UNLOAD) != NULL);
    CHECK(rsd_fleet_idle(f));
    CHECK(evictions_were_idle(f, &stops));
    CHECK_EQ_INT(stops, 2);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

typedef struct logcap {
    int start_failed, ready, dropped;
    char msg[512];
} logcap;

static void cap_log(void *user, int level, uint32_t item, const char *msg, const char *where) {
    logcap *c = (logcap *)user;
    (void)level;
    (void)where;
    if (item == RSD_LOGITEM_FLEET_START_FAILED) {
        c->start_failed++;
        if (msg) snprintf(c->msg, sizeof c->msg, "%s", msg);
    }
    if (item == RSD_LOGITEM_FLEET_READY) c->ready++;
    if (item == RSD_LOGITEM_FLEET_EVENT_DROPPED) c->dropped++;
}

/* A host that does not pull: the GRANT/FAIL queue (2 x max_requests + 16) drops its
   oldest entries and counts them; the newest are kept, in order. */
static void test_event_queue_bounded(void) {
    rsd_fleet_desc d;
    rsd_fleet_model_desc md;
    rsd_fleet *f;
    rsd_fleet_event ev;
    rsd_fleet_info fi;
    rsd_pool_req_h r[30];
    uint16_t port;
    logcap lc;
    int i, m, fails = 0, first = -1;
    memset(&d, 0, sizeof d);
    memset(&lc, 0, sizeof lc);
    d.pool.max_requests = 4;
    d.logger.fn = cap_log;
    d.logger.user = &lc;
    f = rsd_fleet_create(&d);
    REQUIRE(f != NULL);
    sim_model(&md, "ghost", NULL);
    md.spec.exe = noexec_file();
    m = rsd_fleet_add_model(f, &md);
    for (i = 0; i < 30; i++) {
        CHECK_EQ_INT(rsd_pool_reset_backoff(rsd_fleet_pool(f), m), RSD_OK); /* each fails: no backoff here */
        CHECK_EQ_INT(rsd_fleet_acquire(f, m, tnow(), NULL, &r[i], &port), RSD_PENDING);
    }
    rsd_fleet_query(f, &fi);
    CHECK_EQ_INT(fi.events_dropped, 30 - (2 * 4 + 16));
    CHECK(fi.events_waiting >= 2 * 4 + 16); /* the full GRANT/FAIL queue, and narration */
    CHECK(lc.dropped >= 6);
    CHECK_EQ_INT(lc.start_failed, 30);
    CHECK(strstr(lc.msg, "Exec format error") != NULL);
    CHECK_EQ_INT(rsd_fleet_next_deadline(f), 0);
    while (rsd_fleet_next_event(f, &ev))
        if (ev.kind == RSD_FLEET_EV_FAIL) {
            if (first < 0)
                for (i = 0; i < 30; i++)
                    if (r[i].id == ev.req.id) first = i;
            fails++;
        }
    CHECK_EQ_INT(fails, 2 * 4 + 16);
    CHECK_EQ_INT(first, 6); /* the six oldest were dropped */
    rsd_fleet_query(f, &fi);
    CHECK_EQ_INT(fi.events_waiting, 0);
    CHECK_EQ_INT(fi.processes, 0); /* none ever ran */
    rsd_fleet_destroy(f);
}

/* Cancel after the GRANT was queued but before it was pulled: no GRANT comes later,
   the slot is not held. Same for a queued FAIL. */
static void test_cancel_withdraws_queued_events(void) {
    int fd0 = count_fds(), a, g;
    rsd_fleet *f;
    rsd_fleet_model_desc md;
    rsd_fleet_model_info mi;
    rsd_pool_req_h r;
    uint16_t port;
    uint64_t end;
    log_reset();
    f = mk_fleet(2, 0); /* room for ghost beside a: its spawn runs in the acquire */
    REQUIRE(f != NULL);
    a = add(f, "a", NULL);
    sim_model(&md, "ghost", NULL);
    md.spec.exe = noexec_file(); /* the spawn fails: a FAIL queued at once */
    g = rsd_fleet_add_model(f, &md);
    CHECK_EQ_INT(rsd_fleet_acquire(f, a, tnow(), NULL, &r, &port), RSD_PENDING);
    /* step without pulling until the pool counts it running (the GRANT is queued) */
    end = now_ms() + WAIT_MS;
    do {
        rsd_pollfd fds[64];
        int n = rsd_fleet_pollfds(f, fds, 64);
        (void)rsd_poll(fds, n > 64 ? 64 : n, 10);
        (void)rsd_fleet_step(f, tnow());
        CHECK_EQ_INT(rsd_fleet_query_model(f, a, &mi), RSD_OK);
    } while (mi.pool.running == 0 && now_ms() < end);
    CHECK_EQ_INT(mi.pool.running, 1);
    CHECK_EQ_INT(rsd_fleet_cancel(f, r, tnow()), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_query_model(f, a, &mi), RSD_OK);
    CHECK_EQ_INT(mi.pool.running, 0);
    drain(f);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_READY, a), 1);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_GRANT, -1), 0);
    /* a FAIL queued by the acquire itself, withdrawn */
    CHECK_EQ_INT(rsd_fleet_acquire(f, g, tnow(), NULL, &r, &port), RSD_PENDING);
    CHECK_EQ_INT(rsd_fleet_cancel(f, r, tnow()), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_cancel(f, r, tnow()), RSD_ERR_POOL_STALE);
    drain(f);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_FAIL, -1), 0);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_CRASHED, g), 1);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* READY follows the child's output, not only the PROBE schedule: with the first
   scheduled probe a minute away, the child's "listening" line still brings READY. */
static void test_output_triggers_probe(void) {
    int fd0 = count_fds(), a;
    rsd_fleet *f;
    rsd_fleet_desc d;
    rsd_fleet_model_desc md;
    const logged *st, *rd;
    log_reset();
    memset(&d, 0, sizeof d);
    d.procs.probe_first_ms = 60000;
    d.procs.probe_max_ms = 60000;
    d.procs.start_deadline_ms = 120000;
    f = rsd_fleet_create(&d);
    REQUIRE(f != NULL);
    sim_model(&md, "a", NULL);
    md.health_path = "/v1/health";
    a = rsd_fleet_add_model(f, &md);
    CHECK(rsd_fleet_load(f, a, tnow()) >= 0);
    rd = await(f, RSD_FLEET_EV_READY, a, 0);
    st = find_kind(RSD_FLEET_EV_STARTING, a, 0);
    CHECK(rd != NULL && st != NULL);
    if (rd && st) CHECK(rd->ev.at_ms < st->ev.at_ms + 60000);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* New output that holds "model loaded" (llama-server's line once /health says 200; rsd-sim
   writes it too) is probed at once; other new output waits RSD_FLEET_OUTPUT_PROBE_GAP_MS
   after the last probe. White-box: the slot's probe time and seen-output mark are set by
   hand once the child has written its lines, before any step of the fleet. */
static void test_loaded_line_probes_at_once(void) {
    static const char *const buffers[] = {"--runtime", "server", "--load-ms", "40", "-lv", "4", "--buffers", "1,2,3", NULL};
    int fd0 = count_fds(), a, i;
    rsd_fleet *f;
    rsd_fleet_desc d;
    rsd_fleet_model_desc md;
    rsdi_fleet_slot *s = NULL;
    rsd_proc_info info;
    char tail[512];
    const char *listen, *loaded;
    uint64_t end = now_ms() + WAIT_MS;
    log_reset();
    memset(&d, 0, sizeof d);
    d.procs.probe_first_ms = 60000; /* no scheduled probe meanwhile */
    d.procs.probe_max_ms = 60000;
    d.procs.start_deadline_ms = 120000;
    f = rsd_fleet_create(&d);
    REQUIRE(f != NULL);
    sim_model(&md, "a", buffers); /* three lines before "model loaded", as llama-server has more */
    a = rsd_fleet_add_model(f, &md);
    CHECK(rsd_fleet_load(f, a, tnow()) >= 0);
    for (i = 0; i < RSD_POOL_MAX_SLOTS; i++)
        if (f->slots[i].pp.id && f->slots[i].model == a) s = &f->slots[i];
    REQUIRE(s != NULL);
    while (now_ms() < end) { /* the supervisor alone reads the child's output */
        (void)rsd_procs_step(f->procs, tnow());
        if (rsd_procs_tail(f->procs, s->proc, 0, tail, sizeof tail) > 0 && strstr(tail, "listening on") &&
            strchr(strstr(tail, "listening on"), '\n'))
            break;
        (void)rsd_poll(NULL, 0, 2);
    }
    REQUIRE(strstr(tail, "model loaded") != NULL);
    REQUIRE(rsd_procs_query_proc(f->procs, s->proc, &info) == RSD_OK);
    listen = strstr(tail, "srv  llama_server: listening on");
    REQUIRE(listen != NULL);
    s->probe_sent_ms = 5000;
    s->out_seen = info.out_bytes - strlen(listen); /* only the "listening" line is new */
    CHECK_EQ_INT((int)rsdi_fleet_output_probe_at(f, s), 5000 + RSD_FLEET_OUTPUT_PROBE_GAP_MS);
    /* both lines new, the "model loaded" one first (one write of the child, as
       llama-server's two lines usually arrive): that line starts the new output */
    loaded = strstr(tail, "srv  llama_server: model loaded");
    REQUIRE(loaded != NULL && loaded < listen);
    s->out_seen = info.out_bytes - strlen(loaded);
    CHECK_EQ_INT((int)rsdi_fleet_output_probe_at(f, s), 5000);
    s->out_seen = 0; /* all of the output is new */
    CHECK_EQ_INT((int)rsdi_fleet_output_probe_at(f, s), 5000);
    s->probe_sent_ms = 0; /* never probed: at once all the same (0 means nothing to do) */
    CHECK_EQ_INT((int)rsdi_fleet_output_probe_at(f, s), 1);
    CHECK(await(f, RSD_FLEET_EV_READY, a, 0) != NULL);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* The slot count the spec gives without a GET /props: the llama-server template's -np
   {parallel}, unless an extra argument sets another or the template is the caller's. */
static void test_known_slots(void) {
    static const char *const plain[] = {"--threads", "1", NULL};
    static const char *const np[] = {"-np", "8", NULL};
    static const char *const par[] = {"--parallel=8", NULL};
    static const char *const tmpl[] = {"--port", "{port}", NULL};
    rsd_proc_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.exe = SIM_BIN;
    CHECK_EQ_INT(rsdi_fleet_known_slots(&sp), 0); /* parallel unset: llama-server picks (auto) */
    sp.parallel = 4;
    CHECK_EQ_INT(rsdi_fleet_known_slots(&sp), 4);
    sp.extra = plain;
    CHECK_EQ_INT(rsdi_fleet_known_slots(&sp), 4);
    sp.extra = np;
    CHECK_EQ_INT(rsdi_fleet_known_slots(&sp), 0);
    sp.extra = par;
    CHECK_EQ_INT(rsdi_fleet_known_slots(&sp), 0);
    sp.extra = NULL;
    sp.args = tmpl;
    CHECK_EQ_INT(rsdi_fleet_known_slots(&sp), 0);
}

/* /health never answers: each probe times out (probe_timeout_ms) without wedging the
   next ones; the start deadline ends the wait; no socket is left behind. */
static void test_hanging_health(void) {
    static const char *const hang[] = {"--runtime", "server", "--load-ms", "20", "--hang", "/health", NULL};
    int fd0 = count_fds(), a;
    rsd_fleet *f;
    rsd_fleet_desc d;
    rsd_fleet_model_desc md;
    rsd_pool_req_h r;
    uint16_t port;
    const logged *l;
    log_reset();
    memset(&d, 0, sizeof d);
    d.probe_timeout_ms = 50;
    d.procs.probe_max_ms = 40;
    d.procs.start_deadline_ms = 600;
    d.procs.term_grace_ms = 2000;
    f = rsd_fleet_create(&d);
    REQUIRE(f != NULL);
    sim_model(&md, "h", hang);
    a = rsd_fleet_add_model(f, &md);
    CHECK_EQ_INT(rsd_fleet_acquire(f, a, tnow(), NULL, &r, &port), RSD_PENDING);
    l = await(f, RSD_FLEET_EV_FAIL, a, 0);
    REQUIRE(l != NULL);
    CHECK_EQ_INT(l->ev.result, RSD_ERR_FLEET_START);
    CHECK(strstr(l->msg, "not ready within") != NULL);
    CHECK(strstr(l->msg, "GET /health") != NULL);
    CHECK(await_idle(f));
    {
        rsd_http_client_info cs;
        rsd_http_client_query(f->client, &cs); /* white-box: the probes timed out */
        CHECK(cs.timeouts >= 2);
    }
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* A VRAM lease with real children: the idle, least recently used process is stopped
   (never the busy one), the lease is ready once it has exited, a start that would
   break it waits, and the release restarts what it stopped. */
static void test_lease_stops_idle_and_restores(void) {
    int fd0 = count_fds(), a, b, c;
    rsd_fleet *f;
    rsd_fleet_desc d;
    rsd_fleet_model_desc md;
    rsd_pool_req_h ra, rb, rc;
    rsd_pool_lease_h lease;
    rsd_pool_lease_desc ld;
    rsd_pool_lease_info li;
    uint16_t port = 0;
    log_reset();
    memset(&d, 0, sizeof d);
    d.pool.max_slots = 3;
    d.pool.vram_budget_bytes = 10ull << 30;
    d.procs.term_grace_ms = 2000;
    f = rsd_fleet_create(&d);
    REQUIRE(f != NULL);
    sim_model(&md, "a", NULL);
    md.pool.reserve_bytes = 4ull << 30;
    a = rsd_fleet_add_model(f, &md);
    sim_model(&md, "b", NULL);
    md.pool.reserve_bytes = 4ull << 30;
    b = rsd_fleet_add_model(f, &md);
    sim_model(&md, "c", NULL);
    md.pool.reserve_bytes = 4ull << 30;
    c = rsd_fleet_add_model(f, &md);
    CHECK(acquire_wait(f, a, &ra) > 0);
    CHECK_EQ_INT(rsd_fleet_release(f, ra, tnow()), RSD_OK); /* a idle, least recently used */
    CHECK(acquire_wait(f, b, &rb) > 0);                      /* b busy */
    memset(&ld, 0, sizeof ld);
    ld.bytes = 5ull << 30;
    ld.restore = true;
    CHECK_EQ_INT(rsd_pool_lease_take(rsd_fleet_pool(f), &ld, tnow(), &lease), RSD_PENDING);
    CHECK(await(f, RSD_FLEET_EV_STOPPING, a, 0) != NULL);
    CHECK(stop_of(a, RSD_POOL_WHY_LEASE) != NULL);
    CHECK(stop_of(b, RSD_POOL_WHY_LEASE) == NULL);
    CHECK(await(f, RSD_FLEET_EV_EXITED, a, 0) != NULL);
    CHECK_EQ_INT(rsd_pool_query_lease(rsd_fleet_pool(f), lease, &li), RSD_OK);
    CHECK(li.ready);
    CHECK(li.granted == 5ull << 30);
    CHECK(li.stopped == (1ull << a));
    /* c (4 GiB) does not fit beside b (4) and the lease (5): it waits, it is not failed */
    CHECK_EQ_INT(rsd_fleet_acquire(f, c, tnow(), NULL, &rc, &port), RSD_PENDING);
    round_once(f, NULL); /* a start would be decided and spawned right here */
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STARTING, c), 0);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_FAIL, -1), 0);
    CHECK_EQ_INT(rsd_fleet_cancel(f, rc, tnow()), RSD_OK);
    CHECK_EQ_INT(rsd_pool_lease_return(rsd_fleet_pool(f), lease, tnow()), RSD_OK);
    CHECK(await(f, RSD_FLEET_EV_READY, a, 1) != NULL); /* restored without a request */
    CHECK_EQ_INT(rsd_pool_query_lease(rsd_fleet_pool(f), lease, &li), RSD_ERR_POOL_STALE);
    CHECK_EQ_INT(rsd_fleet_release(f, rb, tnow()), RSD_OK);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* An exclusive request waits for its process to drain and runs alone; the request
   queued behind it runs after it, on the same process (no restart). */
static void test_exclusive_request(void) {
    int fd0 = count_fds(), a;
    rsd_fleet *f;
    rsd_pool_req_h r1, ex, r2;
    uint16_t port = 0, port1;
    const logged *g;
    log_reset();
    f = mk_fleet(1, 0);
    REQUIRE(f != NULL);
    a = add(f, "a", NULL);
    port1 = acquire_wait(f, a, &r1);
    CHECK(port1 > 0);
    CHECK_EQ_INT(rsd_fleet_acquire_ex(f, a, RSD_POOL_ACQUIRE_EXCLUSIVE, tnow(), NULL, &ex, &port), RSD_PENDING);
    CHECK_EQ_INT(rsd_fleet_acquire(f, a, tnow(), NULL, &r2, &port), RSD_PENDING);
    round_once(f, NULL);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_GRANT, a), 1); /* only r1's */
    CHECK_EQ_INT(rsd_fleet_release(f, r1, tnow()), RSD_OK);
    g = await(f, RSD_FLEET_EV_GRANT, a, 1);
    CHECK(g != NULL && g->ev.req.id == ex.id && g->ev.port == port1);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_GRANT, a), 2);
    CHECK_EQ_INT(rsd_fleet_release(f, ex, tnow()), RSD_OK);
    g = await(f, RSD_FLEET_EV_GRANT, a, 2);
    CHECK(g != NULL && g->ev.req.id == r2.id);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STARTING, a), 1);
    CHECK_EQ_INT(rsd_fleet_release(f, r2, tnow()), RSD_OK);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* desc.stop_hold_ms: a ready process's stop is held (STOPPING .held, the process alive
   and answering) until rsd_fleet_stop_go, or until the hold ends by itself. */
static void test_stop_hold(void) {
    int fd0 = count_fds(), a;
    rsd_fleet_desc d;
    rsd_fleet *f;
    rsd_fleet_info fi;
    rsd_pool_req_h r;
    const logged *st;
    uint16_t port;
    uint64_t t0;
    log_reset();
    fleet_desc(&d, 1, 0);
    d.stop_hold_ms = 60000;
    f = rsd_fleet_create(&d);
    REQUIRE(f != NULL);
    a = add(f, "a", NULL);
    port = acquire_wait(f, a, &r);
    REQUIRE(port > 0);
    CHECK_EQ_INT(rsd_fleet_release(f, r, tnow()), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_stop_go(f, a, tnow()), RSD_ERR_NOT_FOUND); /* nothing held yet */
    CHECK_EQ_INT(rsd_pool_unload(rsd_fleet_pool(f), a, 0, tnow()), RSD_OK);
    st = await(f, RSD_FLEET_EV_STOPPING, a, 0);
    REQUIRE(st != NULL);
    CHECK(st->ev.held);
    CHECK_EQ_INT(st->ev.port, port);
    round_once(f, NULL);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_EXITED, a), 0);
    CHECK_EQ_INT(http_status(port, "GET", "/health", NULL), 200); /* still serving its own endpoints */
    CHECK(rsd_fleet_next_deadline(f) <= tnow() + 60000);
    rsd_fleet_query(f, &fi);
    CHECK(fi.processes == 1 && fi.stopping == 1 && fi.held_stops == 1 && fi.ready == 0);
    CHECK_EQ_INT(rsd_fleet_stop_go(f, a, tnow()), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_stop_go(f, a, tnow()), RSD_ERR_NOT_FOUND); /* once */
    rsd_fleet_query(f, &fi);
    CHECK_EQ_INT(fi.held_stops, 0);
    CHECK(await(f, RSD_FLEET_EV_EXITED, a, 0) != NULL);
    /* a hold nobody lets go of ends by itself */
    port = acquire_wait(f, a, &r);
    REQUIRE(port > 0);
    CHECK_EQ_INT(rsd_fleet_release(f, r, tnow()), RSD_OK);
    t0 = tnow();
    CHECK_EQ_INT(rsd_pool_unload(rsd_fleet_pool(f), a, 0, t0), RSD_OK);
    CHECK(await(f, RSD_FLEET_EV_STOPPING, a, 1) != NULL);
    round_once(f, NULL);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_EXITED, a), 1);
    g_log.tick = 61000;
    CHECK(await(f, RSD_FLEET_EV_EXITED, a, 1) != NULL);
    CHECK_EQ_INT(rsd_fleet_stop_go(f, -1, tnow()), RSD_ERR_ARG);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* Swaps beside a stop (rsd_pool_desc.overlap), with a held stop (the host's kv save in
   the grace) keeping the old child alive as long as the test says: with COUNT, b starts and
   serves while a is still held, on its own port; a requested back waits for a's exit. By
   default, count only, b starts only after a has exited. */
static void test_swap_overlaps_the_stop(void) {
    int fd0 = count_fds(), a, b, mode;
    for (mode = 0; mode < 2; mode++) {
        rsd_fleet_desc d;
        rsd_fleet *f;
        rsd_pool_req_h r;
        const logged *st, *x;
        uint16_t pa, pb;
        log_reset();
        fleet_desc(&d, 1, 0);
        d.pool.overlap = mode == 0 ? RSD_POOL_OVERLAP_COUNT : RSD_POOL_OVERLAP_BYTES;
        d.stop_hold_ms = 60000;
        f = rsd_fleet_create(&d);
        REQUIRE(f != NULL);
        a = add(f, "a", NULL);
        b = add(f, "b", NULL);
        pa = acquire_wait(f, a, &r);
        REQUIRE(pa > 0);
        CHECK_EQ_INT(rsd_fleet_release(f, r, tnow()), RSD_OK);
        if (mode == 1) { /* count only: b waits for a's exit */
            CHECK_EQ_INT(rsd_fleet_acquire(f, b, tnow(), NULL, &r, &pb), RSD_PENDING);
            st = await(f, RSD_FLEET_EV_STOPPING, a, 0);
            REQUIRE(st != NULL);
            CHECK(st->ev.held);
            round_once(f, NULL);
            CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STARTING, b), 0);
            CHECK_EQ_INT(rsd_fleet_stop_go(f, a, tnow()), RSD_OK);
            x = await(f, RSD_FLEET_EV_STARTING, b, 0);
            REQUIRE(x != NULL);
            CHECK(find_kind(RSD_FLEET_EV_EXITED, a, 0) != NULL && find_kind(RSD_FLEET_EV_EXITED, a, 0) < x);
            CHECK(rsd_fleet_cancel(f, r, tnow()) >= 0);
            finish(f);
            continue;
        }
        pb = acquire_wait(f, b, &r); /* b loads and serves while a is held */
        REQUIRE(pb > 0);
        CHECK(pb != pa);
        st = find_kind(RSD_FLEET_EV_STOPPING, a, 0);
        REQUIRE(st != NULL);
        CHECK(st->ev.held);
        x = find_kind(RSD_FLEET_EV_STARTING, b, 0);
        CHECK(x != NULL && st < x); /* the STOP first, the start right after it */
        CHECK_EQ_INT(count_kind(RSD_FLEET_EV_EXITED, a), 0);
        CHECK_EQ_INT(http_status(pa, "GET", "/health", NULL), 200); /* a still up, its own port */
        CHECK_EQ_INT(http_status(pb, "GET", "/health", NULL), 200);
        CHECK_EQ_INT(rsd_fleet_release(f, r, tnow()), RSD_OK);
        /* b -> a back while a is held (saving): a does not start beside itself */
        CHECK_EQ_INT(rsd_fleet_acquire(f, a, tnow(), NULL, &r, &pa), RSD_PENDING);
        round_once(f, NULL);
        CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STARTING, a), 1);
        CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STOPPING, b), 0);
        CHECK_EQ_INT(rsd_fleet_stop_go(f, a, tnow()), RSD_OK);
        x = await(f, RSD_FLEET_EV_STARTING, a, 1);
        REQUIRE(x != NULL);
        CHECK(find_kind(RSD_FLEET_EV_EXITED, a, 0) != NULL && find_kind(RSD_FLEET_EV_EXITED, a, 0) < x);
        CHECK(find_kind(RSD_FLEET_EV_STOPPING, b, 0) != NULL); /* b makes room, beside a's start */
        CHECK(rsd_fleet_cancel(f, r, tnow()) >= 0);
        finish(f);
    }
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* The last SIGTERM's "SIGKILL in N ms" (the supervisor's log through the fleet's logger);
   -2 for a stop that terminates at once (Windows without a console). */
static void stop_log(void *user, int level, uint32_t item, const char *msg, const char *where) {
    const char *k = msg ? strstr(msg, "SIGKILL in ") : NULL;
    (void)level;
    (void)where;
    if (item == RSD_LOGITEM_PROC_STOP) *(long *)user = k ? strtol(k + 11, NULL, 10) : -2;
}

/* A held stop is part of the grace: the hold lasts half of term_grace_ms at most, and
   the SIGKILL of a child that ignores its SIGTERM comes term_grace_ms after the STOP,
   not after the hold (the clock is the test's: g_log.tick jumps). */
static void test_stop_hold_in_grace(void) {
    static const char *const stubborn[] = {"--runtime", "server", "--load-ms", "20", "--ignore-sigterm", NULL};
    int fd0 = count_fds(), a;
    rsd_fleet_desc d;
    rsd_fleet *f;
    rsd_pool_req_h r;
    const logged *st, *ex;
    long kill_in = -1;
    uint64_t t0;
    log_reset();
    fleet_desc(&d, 1, 0);
    d.stop_hold_ms = 60000;
    d.logger.fn = stop_log;
    d.logger.user = &kill_in;
    f = rsd_fleet_create(&d);
    REQUIRE(f != NULL);
    a = add(f, "a", stubborn);
    REQUIRE(acquire_wait(f, a, &r) > 0);
    CHECK_EQ_INT(rsd_fleet_release(f, r, tnow()), RSD_OK);
    t0 = tnow();
    CHECK_EQ_INT(rsd_pool_unload(rsd_fleet_pool(f), a, 0, t0), RSD_OK);
    (void)rsd_fleet_step(f, t0); /* the step that carries the stop out: its clock is t0 (the
                                    next round's would be later under qemu) */
    st = await(f, RSD_FLEET_EV_STOPPING, a, 0);
    REQUIRE(st != NULL);
    CHECK(st->ev.held);
    CHECK(rsd_fleet_next_deadline(f) <= t0 + 1000); /* the hold: half the grace, not stop_hold_ms */
    CHECK_EQ_INT(kill_in, -1);                       /* no SIGTERM yet */
    g_log.tick = 1500;                               /* past the hold: the SIGTERM goes */
    round_once(f, NULL);
    CHECK(kill_in != -1 && kill_in <= 500); /* due at t0 + 2000, not 2000 ms after the hold */
#if defined(_WIN32) /* the stop ends the child at once there (no console: nothing to ignore) */
    ex = await(f, RSD_FLEET_EV_EXITED, a, 0);
    REQUIRE(ex != NULL);
#else
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_EXITED, a), 0);
    g_log.tick = 2100;
    ex = await(f, RSD_FLEET_EV_EXITED, a, 0);
    REQUIRE(ex != NULL);
    CHECK_EQ_INT(ex->ev.term_signal, SIGKILL);
#endif
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* A fleet of one slot with desc.ready_hold_ms. */
static rsd_fleet *mk_held_fleet(uint32_t ready_hold_ms) {
    rsd_fleet_desc d;
    fleet_desc(&d, 1, 0);
    d.ready_hold_ms = ready_hold_ms;
    return rsd_fleet_create(&d);
}

/* A fleet with a 60 s ready hold, model "a" added and one request for it waiting while
   its READY is held (*ready: that event); NULL when any of it failed. */
static rsd_fleet *held_one(int *a, rsd_pool_req_h *r, const logged **ready) {
    rsd_fleet *f;
    uint16_t port = 0;
    log_reset();
    if (!(f = mk_held_fleet(60000))) return NULL;
    *a = add(f, "a", NULL);
    *ready = NULL;
    if (rsd_fleet_acquire(f, *a, tnow(), NULL, r, &port) == RSD_PENDING) *ready = await(f, RSD_FLEET_EV_READY, *a, 0);
    if (!*ready || !(*ready)->ev.held) {
        finish(f);
        return NULL;
    }
    return f;
}

/* The GRANT or FAIL of req in the log, or NULL. */
static const logged *answer_of(rsd_pool_req_h req) {
    int i;
    for (i = 0; i < g_log.n; i++)
        if (g_log.e[i].ev.req.id == req.id &&
            (g_log.e[i].ev.kind == RSD_FLEET_EV_GRANT || g_log.e[i].ev.kind == RSD_FLEET_EV_FAIL))
            return &g_log.e[i];
    return NULL;
}

/* desc.ready_hold_ms: READY comes with .held, the process answers, and the requests keep
   waiting in the pool (counted there, the model STARTING) until rsd_fleet_ready_go; then
   they are granted at once. A hold nobody lets go of ends by itself at its deadline. */
static void test_ready_hold(void) {
    int fd0 = count_fds(), a;
    rsd_fleet *f;
    rsd_fleet_info fi;
    rsd_fleet_model_info mi;
    rsd_pool_req_h r1, r2;
    const logged *rd, *g;
    uint16_t port = 0;
    uint64_t t0;
    log_reset();
    f = mk_held_fleet(60000);
    REQUIRE(f != NULL);
    a = add(f, "a", NULL);
    CHECK_EQ_INT(rsd_fleet_ready_go(f, a, tnow()), RSD_ERR_NOT_FOUND); /* nothing held yet */
    CHECK_EQ_INT(rsd_fleet_acquire(f, a, tnow(), NULL, &r1, &port), RSD_PENDING);
    CHECK_EQ_INT(rsd_fleet_acquire(f, a, tnow(), NULL, &r2, &port), RSD_PENDING);
    rd = await(f, RSD_FLEET_EV_READY, a, 0);
    REQUIRE(rd != NULL);
    CHECK(rd->ev.held && rd->ev.port > 0 && rd->ev.pid > 0);
    round_once(f, NULL);
    CHECK(answer_of(r1) == NULL && answer_of(r2) == NULL);
    CHECK_EQ_INT(http_status(rd->ev.port, "GET", "/health", NULL), 200); /* it answers the host */
    CHECK(rsd_fleet_next_deadline(f) <= tnow() + 60000);
    CHECK_EQ_INT(rsd_fleet_query_model(f, a, &mi), RSD_OK);
    CHECK_EQ_INT(mi.pool.state, RSD_POOL_SLOT_STARTING);
    CHECK_EQ_INT(mi.pool.waiting, 2);
    CHECK_EQ_INT(mi.pool.running, 0);
    CHECK(mi.ready_ms > 0 && mi.port == rd->ev.port);
    rsd_fleet_query(f, &fi);
    CHECK(fi.processes == 1 && fi.ready == 1 && fi.held_readies == 1 && fi.starting == 0);
    CHECK(fi.pool.waiting == 2 && fi.pool.running == 0);
    CHECK_EQ_INT(rsd_fleet_ready_go(f, a, tnow()), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_ready_go(f, a, tnow()), RSD_ERR_NOT_FOUND); /* once */
    drain(f); /* the GRANTs are queued when it returns */
    g = answer_of(r1);
    CHECK(g && g->ev.kind == RSD_FLEET_EV_GRANT && g->ev.port == rd->ev.port);
    g = answer_of(r2);
    CHECK(g && g->ev.kind == RSD_FLEET_EV_GRANT);
    rsd_fleet_query(f, &fi);
    CHECK(fi.held_readies == 0 && fi.pool.waiting == 0 && fi.pool.running == 2);
    CHECK_EQ_INT(rsd_fleet_release(f, r1, tnow()), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_release(f, r2, tnow()), RSD_OK);
    /* a hold nobody lets go of: the requests go at its deadline */
    CHECK_EQ_INT(rsd_pool_unload(rsd_fleet_pool(f), a, 0, tnow()), RSD_OK);
    CHECK(await(f, RSD_FLEET_EV_EXITED, a, 0) != NULL);
    CHECK_EQ_INT(rsd_fleet_acquire(f, a, tnow(), NULL, &r1, &port), RSD_PENDING);
    rd = await(f, RSD_FLEET_EV_READY, a, 1);
    REQUIRE(rd != NULL);
    CHECK(rd->ev.held);
    t0 = rd->ev.at_ms;
    round_once(f, NULL);
    CHECK(answer_of(r1) == NULL);
    CHECK(rsd_fleet_next_deadline(f) <= t0 + 60000);
    g_log.tick += 61000; /* past t0 + 60000 */
    round_once(f, NULL);
    g = answer_of(r1);
    CHECK(g && g->ev.kind == RSD_FLEET_EV_GRANT && g->ev.port == rd->ev.port);
    CHECK_EQ_INT(rsd_fleet_ready_go(f, a, tnow()), RSD_ERR_NOT_FOUND);
    CHECK_EQ_INT(rsd_fleet_release(f, r1, tnow()), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_ready_go(f, -1, tnow()), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_fleet_ready_go(NULL, a, tnow()), RSD_ERR_ARG);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* A held process that dies: the model starts again once and its waiting request waits for
   the new process (the host's preparation may have ended it); a second death in a row
   fails the request as a start that failed (the pool never saw it ready), and nothing
   stays held. A later request gets its own start again. */
static void test_ready_hold_exit(void) {
    int fd0 = count_fds(), a;
    rsd_fleet *f;
    rsd_fleet_info fi;
    rsd_pool_req_h r;
    const logged *rd, *rd2, *l;
    uint16_t port = 0;
    REQUIRE((f = held_one(&a, &r, &rd)) != NULL);
    sim_crash(rd->ev.port, "a.gguf", 3);
    rd2 = await(f, RSD_FLEET_EV_READY, a, 1);
    REQUIRE(rd2 != NULL);
    CHECK(rd2->ev.held && rd2->ev.pid != rd->ev.pid);
    l = find_kind(RSD_FLEET_EV_CRASHED, a, 0);
    CHECK(l && l->ev.result == RSD_ERR_POOL_CRASHED && l->ev.exit_code == 3);
    CHECK(l && strstr(l->msg, "exited with code 3 while its ready was held; starting it again") != NULL);
    CHECK(answer_of(r) == NULL); /* still waiting */
    rsd_fleet_query(f, &fi);
    CHECK(fi.held_readies == 1 && fi.processes == 1 && fi.pool.waiting == 1);
    sim_crash(rd2->ev.port, "a.gguf", 4); /* the second in a row */
    l = await(f, RSD_FLEET_EV_FAIL, a, 0);
    REQUIRE(l != NULL);
    CHECK(l->ev.req.id == r.id);
    CHECK_EQ_INT(l->ev.result, RSD_ERR_FLEET_START);
    CHECK(strstr(l->msg, "exited with code 4 while its ready was held") != NULL);
    l = find_kind(RSD_FLEET_EV_CRASHED, a, 1);
    CHECK(l && l->ev.result == RSD_ERR_FLEET_START && l->ev.exit_code == 4);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_GRANT, a), 0);
    CHECK(rsd_fleet_idle(f));
    rsd_fleet_query(f, &fi);
    CHECK(fi.held_readies == 0 && fi.processes == 0 && fi.pool.waiting == 0);
    CHECK_EQ_INT(rsd_fleet_ready_go(f, a, tnow()), RSD_ERR_NOT_FOUND);
    /* a new request: its held process dies once, and the next one serves it */
    CHECK_EQ_INT(rsd_pool_reset_backoff(rsd_fleet_pool(f), a), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_acquire(f, a, tnow(), NULL, &r, &port), RSD_PENDING);
    rd = await(f, RSD_FLEET_EV_READY, a, 2);
    REQUIRE(rd != NULL && rd->ev.held);
    sim_crash(rd->ev.port, "a.gguf", 5);
    rd = await(f, RSD_FLEET_EV_READY, a, 3);
    REQUIRE(rd != NULL && rd->ev.held);
    CHECK(answer_of(r) == NULL);
    CHECK_EQ_INT(rsd_fleet_ready_go(f, a, tnow()), RSD_OK);
    drain(f);
    l = answer_of(r);
    CHECK(l && l->ev.kind == RSD_FLEET_EV_GRANT && l->ev.port == rd->ev.port);
    CHECK_EQ_INT(rsd_fleet_release(f, r, tnow()), RSD_OK);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* rsd_fleet_ready_restart: the host gives a held ready up (its restore failed): the
   process is killed, the model starts again, and the waiting request is granted on the
   new process. Given up twice in a row, the request fails quoting the host's reason. */
static void test_ready_restart(void) {
    int fd0 = count_fds(), a;
    rsd_fleet *f;
    rsd_fleet_info fi;
    rsd_pool_req_h r;
    const logged *rd, *rd2, *l;
    REQUIRE((f = held_one(&a, &r, &rd)) != NULL);
    CHECK_EQ_INT(rsd_fleet_ready_restart(f, -1, "x", tnow()), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_fleet_ready_restart(NULL, a, "x", tnow()), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_fleet_ready_restart(f, a, "test: its restore got no answer", tnow()), RSD_OK);
    CHECK_EQ_INT(rsd_fleet_ready_restart(f, a, "again", tnow()), RSD_ERR_NOT_FOUND); /* nothing held now */
    CHECK_EQ_INT(rsd_fleet_ready_go(f, a, tnow()), RSD_ERR_NOT_FOUND);
    rd2 = await(f, RSD_FLEET_EV_READY, a, 1);
    REQUIRE(rd2 != NULL);
    CHECK(rd2->ev.held && rd2->ev.pid != rd->ev.pid);
    l = find_kind(RSD_FLEET_EV_CRASHED, a, 0);
    REQUIRE(l != NULL);
    CHECK(l->ev.pid == rd->ev.pid && l->ev.result == RSD_ERR_POOL_CRASHED);
#if !defined(_WIN32)
    CHECK_EQ_INT(l->ev.term_signal, SIGKILL);
#endif
    CHECK(strstr(l->msg, "while its ready was held: test: its restore got no answer; starting it again") != NULL);
    CHECK(answer_of(r) == NULL);
    CHECK_EQ_INT(rsd_fleet_ready_go(f, a, tnow()), RSD_OK);
    drain(f);
    l = answer_of(r);
    CHECK(l && l->ev.kind == RSD_FLEET_EV_GRANT && l->ev.port == rd2->ev.port);
    CHECK_EQ_INT(rsd_fleet_release(f, r, tnow()), RSD_OK);
    finish(f);
    /* twice in a row: the request fails with the reason */
    REQUIRE((f = held_one(&a, &r, &rd)) != NULL);
    CHECK_EQ_INT(rsd_fleet_ready_restart(f, a, "first", tnow()), RSD_OK);
    rd = await(f, RSD_FLEET_EV_READY, a, 1);
    REQUIRE(rd != NULL && rd->ev.held);
    CHECK_EQ_INT(rsd_fleet_ready_restart(f, a, "second", tnow()), RSD_OK);
    l = await(f, RSD_FLEET_EV_FAIL, a, 0);
    REQUIRE(l != NULL);
    CHECK(l->ev.req.id == r.id && l->ev.result == RSD_ERR_FLEET_START);
    CHECK(strstr(l->msg, "while its ready was held: second") != NULL);
    CHECK(await_idle(f));
    rsd_fleet_query(f, &fi);
    CHECK(fi.held_readies == 0 && fi.processes == 0 && fi.pool.waiting == 0);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_GRANT, a), 0);
    finish(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

/* Stopped while held: the hold ends with the STOP (no GRANT ever, the waiting request
   FAILs with the stop, go finds nothing), and the process exits. An unload that drains
   waits for the hold (the pool drains a process once it started). */
static void test_ready_hold_stop(void) {
    int fd0 = count_fds(), a;
    rsd_fleet *f;
    rsd_fleet_info fi;
    rsd_pool_req_h r;
    const logged *rd, *l;
    uint16_t port = 0;
    /* unload (drain) while held: it waits for the go, then serves and drains */
    REQUIRE((f = held_one(&a, &r, &rd)) != NULL);
    CHECK_EQ_INT(rsd_pool_unload(rsd_fleet_pool(f), a, RSD_POOL_UNLOAD_DRAIN, tnow()), RSD_PENDING);
    round_once(f, NULL);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_STOPPING, a), 0);
    CHECK_EQ_INT(rsd_fleet_ready_go(f, a, tnow()), RSD_OK);
    drain(f);
    l = answer_of(r);
    CHECK(l && l->ev.kind == RSD_FLEET_EV_GRANT);
    CHECK_EQ_INT(rsd_fleet_release(f, r, tnow()), RSD_OK);
    CHECK(await(f, RSD_FLEET_EV_EXITED, a, 0) != NULL);
    /* the fleet stops while held */
    CHECK_EQ_INT(rsd_fleet_acquire(f, a, tnow(), NULL, &r, &port), RSD_PENDING);
    rd = await(f, RSD_FLEET_EV_READY, a, 1);
    REQUIRE(rd != NULL && rd->ev.held);
    CHECK_EQ_INT(rsd_fleet_stop(f, tnow()), RSD_OK);
    rsd_fleet_query(f, &fi);
    CHECK(fi.held_readies == 0 && fi.stopping == 1);
    CHECK_EQ_INT(rsd_fleet_ready_go(f, a, tnow()), RSD_ERR_NOT_FOUND);
    CHECK(await(f, RSD_FLEET_EV_EXITED, a, 1) != NULL);
    l = answer_of(r);
    CHECK(l && l->ev.kind == RSD_FLEET_EV_FAIL && l->ev.result == RSD_ERR_POOL_STOPPED);
    CHECK_EQ_INT(count_kind(RSD_FLEET_EV_GRANT, a), 1);
    CHECK(await_idle(f));
    rsd_fleet_destroy(f);
    CHECK_EQ_INT(count_fds(), fd0);
    CHECK(no_children());
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
#if !defined(_WIN32)
    signal(SIGPIPE, SIG_IGN);
#endif
    tp_net_init();
    if (!tp_runnable(SIM_BIN)) {
        printf("  %s missing: run `make apps` first\n", SIM_BIN);
        rsdt_failed++;
        return RSD_TEST_END();
    }
    RUN(test_bad_args);
    RUN(test_grant_flow);
    RUN(test_missing_binary);
    RUN(test_spawn_failure_backs_off);
    RUN(test_failed_start_restores_evicted);
    RUN(test_child_slots_bound_requests);
    RUN(test_two_models_concurrently);
    RUN(test_lru_evicts_idle);
    RUN(test_busy_streaming_never_evicted);
    RUN(test_residents_keep_flowing);
    RUN(test_pins);
    RUN(test_ttl_expiry);
    RUN(test_byte_budget);
    RUN(test_crash_and_respawn);
    RUN(test_stop_sigkill);
    RUN(test_early_exit_fails_waiters);
    RUN(test_start_timeout);
    RUN(test_bind_failure);
    RUN(test_cancel_waiting);
    RUN(test_destroy_kills);
    RUN(test_configure_and_unload_drain);
    RUN(test_event_queue_bounded);
    RUN(test_cancel_withdraws_queued_events);
    RUN(test_output_triggers_probe);
    RUN(test_loaded_line_probes_at_once);
    RUN(test_known_slots);
    RUN(test_hanging_health);
    RUN(test_lease_stops_idle_and_restores);
    RUN(test_exclusive_request);
    RUN(test_stop_hold);
    RUN(test_swap_overlaps_the_stop);
    RUN(test_stop_hold_in_grace);
    RUN(test_ready_hold);
    RUN(test_ready_hold_exit);
    RUN(test_ready_restart);
    RUN(test_ready_hold_stop);
    remove_model_files();
    return RSD_TEST_END();
}
