/* test_fleet_soak.c -- rsd_fleet under load with real children: N requests (default
   10,000; RSD_FLEET_SOAK_N overrides) across 5 models with 2 resident processes
   (build/bin/rsd-sim in llama-server mode), 8 requests in flight at once. Each
   request: rsd_fleet_acquire -> GRANT -> one HTTP exchange with the child over
   loopback (rsd_http_client) -> rsd_fleet_release. Models change in bursts so
   processes are evicted and respawned many times. Checks: every request ends in
   exactly one completed exchange (no FAIL, no error), no zombie, the descriptor
   count is back to its start, and every STOP the pool decided with why EVICT found
   the slot idle (in_flight == 0, from the pool's event log). Prints time and counts. */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency_http.h"
#include "rsd_test.h"

#include "portable.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_BIN tp_exe("rsd-sim")
enum { NMODELS = 5, CLIENTS = 8, SOAK_DEFAULT = 10000, BOUND_MS = 240000 };

static uint64_t now_ms(void) { return rsd_now_ms(); }
static int count_fds(void) { return tp_open_handles(); }

typedef enum { C_IDLE = 0, C_WAITING, C_HTTP } cstate;

typedef struct client {
    cstate st;
    int model;
    long id;            /* request number */
    rsd_pool_req_h req;
    rsd_http_req_h h;
    char url[128];
} client;

typedef struct soak {
    rsd_fleet *f;
    rsd_http_client *http;
    client c[CLIENTS];
    long next, total, done, failed, http_errors, bad_status, grants, evict_stops, busy_evicts;
    long stops, spawns, crashes;
    char first_error[512];
} soak;

/* Model of request i: bursts of 150 on one model, the clients split in two groups
   that walk the models at different speeds, so two or three models are wanted at once. */
static int model_of(long i, int k) {
    return k % 2 ? (int)((i / 150) % NMODELS) : (int)((i / 230 + 2) % NMODELS);
}

static void note_err(soak *s, const char *what, int code, const char *msg) {
    if (!s->first_error[0])
        snprintf(s->first_error, sizeof s->first_error, "%s: %d %s", what, code, msg ? msg : "");
}

static void send_http(soak *s, client *c, uint16_t port) {
    rsd_http_request rq;
    static const char body[] = "{\"prompt\":\"hi\",\"n_predict\":4}";
    memset(&rq, 0, sizeof rq);
    snprintf(c->url, sizeof c->url, "http://127.0.0.1:%u%s", (unsigned)port,
             c->id % 10 == 0 ? "/completion" : c->id % 2 ? "/v1/models" : "/slots");
    rq.url = c->url;
    rq.user = c;
    rq.total_timeout_ms = 20000;
    if (c->id % 10 == 0) {
        rq.method = "POST";
        rq.body = body;
        rq.body_len = sizeof body - 1;
        rq.content_type = "application/json";
    }
    if (rsd_http_send(s->http, &rq, now_ms(), &c->h) != RSD_OK) {
        s->http_errors++;
        note_err(s, "send", -1, c->url);
        (void)rsd_fleet_release(s->f, c->req, now_ms());
        c->st = C_IDLE;
        s->done++;
        return;
    }
    c->st = C_HTTP;
}

static void start_requests(soak *s) {
    int k;
    for (k = 0; k < CLIENTS; k++) {
        client *c = &s->c[k];
        uint16_t port = 0;
        int r;
        if (c->st != C_IDLE || s->next >= s->total) continue;
        c->id = s->next++;
        c->model = model_of(c->id, k);
        r = rsd_fleet_acquire(s->f, c->model, now_ms(), c, &c->req, &port);
        if (r == RSD_OK) { s->grants++; send_http(s, c, port); }
        else if (r == RSD_PENDING) c->st = C_WAITING;
        else { s->failed++; s->done++; note_err(s, "acquire", r, rsd_result_str(r)); }
    }
}

static void pump(soak *s) {
    rsd_pollfd fds[96];
    rsd_fleet_event ev;
    rsd_http_event he;
    rsd_pool_event pe;
    int n = rsd_fleet_pollfds(s->f, fds, 64), m, timeout = 100;
    uint64_t d = rsd_fleet_next_deadline(s->f), d2 = rsd_http_client_next_deadline(s->http), now;
    if (n > 64) n = 64;
    m = rsd_http_client_pollfds(s->http, fds + n, 32);
    if (m > 32) m = 32;
    if (d2 < d) d = d2;
    now = now_ms();
    if (d <= now) timeout = 0;
    else if (d - now < 100) timeout = (int)(d - now);
    (void)rsd_poll(fds, n + m, timeout);
    (void)rsd_http_client_step(s->http, now_ms());
    while (rsd_http_next_event(s->http, &he)) {
        client *c = (client *)he.user;
        if (!c || c->st != C_HTTP) continue;
        if (he.result != RSD_OK) { s->http_errors++; note_err(s, "http", he.result, c->url); }
        else if (he.status != 200) { s->bad_status++; note_err(s, "status", he.status, c->url); }
        (void)rsd_fleet_release(s->f, c->req, now_ms());
        c->st = C_IDLE;
        s->done++;
    }
    (void)rsd_fleet_step(s->f, now_ms());
    while (rsd_fleet_next_event(s->f, &ev)) {
        client *c = (client *)ev.user;
        if (ev.kind == RSD_FLEET_EV_STARTING) s->spawns++;
        if (ev.kind == RSD_FLEET_EV_CRASHED) { s->crashes++; note_err(s, "crashed", ev.result, ev.message); }
        if (ev.kind == RSD_FLEET_EV_GRANT && c && c->st == C_WAITING && c->req.id == ev.req.id) {
            s->grants++;
            send_http(s, c, ev.port);
        } else if (ev.kind == RSD_FLEET_EV_FAIL && c && c->st == C_WAITING && c->req.id == ev.req.id) {
            s->failed++;
            s->done++;
            c->st = C_IDLE;
            note_err(s, "fail", ev.result, ev.message);
        }
    }
    while (rsd_pool_next_event(rsd_fleet_pool(s->f), &pe)) {
        if (pe.kind != RSD_POOL_EV_STOP) continue;
        s->stops++;
        if (pe.why == RSD_POOL_WHY_EVICT) {
            s->evict_stops++;
            if (pe.in_flight != 0) s->busy_evicts++;
        }
    }
}

static void test_soak(void) {
    static soak s;
    rsd_fleet_desc d;
    rsd_fleet_model_desc md;
    rsd_http_client_desc cd;
    static const char *const extra[] = {"--runtime", "server", "--load-ms", "10", "--gen-ms", "1", NULL};
    static char paths[NMODELS][400];
    char dir[300];
    static char ids[NMODELS][8];
    const char *env = getenv("RSD_FLEET_SOAK_N");
    int fd0 = count_fds(), k;
    uint64_t t0 = now_ms(), end;
    memset(&s, 0, sizeof s);
    s.total = env && atol(env) > 0 ? atol(env) : SOAK_DEFAULT;
    memset(&d, 0, sizeof d);
    d.pool.max_slots = 2;
    d.pool.event_log = 4096;
    d.procs.term_grace_ms = 5000;
    d.procs.start_deadline_ms = 30000;
    s.f = rsd_fleet_create(&d);
    REQUIRE(s.f != NULL);
    REQUIRE(tp_temp_dir("soak", dir, sizeof dir) == 0); /* the model files must exist: the fleet checks them */
    for (k = 0; k < NMODELS; k++) {
        FILE *fp;
        memset(&md, 0, sizeof md);
        snprintf(ids[k], sizeof ids[k], "m%d", k);
        snprintf(paths[k], sizeof paths[k], "%s/m%d.gguf", dir, k);
        if ((fp = fopen(paths[k], "wb")) != NULL) fclose(fp);
        md.pool.id = ids[k];
        md.pool.max_in_flight = 4;
        md.spec.exe = SIM_BIN;
        md.spec.model = paths[k];
        md.spec.parallel = 4;
        md.spec.extra = extra;
        CHECK_EQ_INT(rsd_fleet_add_model(s.f, &md), k);
    }
    memset(&cd, 0, sizeof cd);
    cd.max_requests = 32;
    cd.max_conns = 32;
    cd.tls_off = true;
    s.http = rsd_http_client_create(&cd);
    REQUIRE(s.http != NULL);
    end = now_ms() + BOUND_MS;
    while (s.done < s.total && now_ms() < end) {
        start_requests(&s);
        pump(&s);
    }
    CHECK_EQ_INT(s.done, s.total);
    CHECK_EQ_INT(s.failed, 0);
    CHECK_EQ_INT(s.http_errors, 0);
    CHECK_EQ_INT(s.bad_status, 0);
    CHECK_EQ_INT(s.crashes, 0);
    CHECK_EQ_INT(s.grants, s.total);
    CHECK_EQ_INT(s.busy_evicts, 0);
    CHECK(s.evict_stops >= s.total / 1000); /* the pattern really swaps models */
    if (s.first_error[0]) printf("  first error: %s\n", s.first_error);
    CHECK(rsd_fleet_stop(s.f, now_ms()) >= 0);
    end = now_ms() + 30000;
    while (!rsd_fleet_idle(s.f) && now_ms() < end) pump(&s);
    CHECK(rsd_fleet_idle(s.f));
    {
        rsd_pool_info ps;
        rsd_pool_query(rsd_fleet_pool(s.f), &ps);
        CHECK_EQ_INT(ps.running, 0);
        CHECK_EQ_INT(ps.waiting, 0);
        CHECK_EQ_INT(ps.releases, (uint64_t)s.total);
        CHECK_EQ_INT(ps.events_dropped, 0);
    }
    rsd_http_client_destroy(s.http);
    rsd_fleet_destroy(s.f);
    for (k = 0; k < NMODELS; k++) (void)remove(paths[k]);
    tp_remove_tree(dir);
    CHECK(tp_no_children());
    CHECK_EQ_INT(count_fds(), fd0);
    printf("  soak: %ld requests, 5 models, 2 slots, %d in flight: %llu ms, %ld spawns, "
           "%ld stops (%ld evictions, 0 busy), fds %d -> %d\n",
           s.total, CLIENTS, (unsigned long long)(now_ms() - t0), s.spawns, s.stops,
           s.evict_stops, fd0, count_fds());
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
#if !defined(_WIN32)
    signal(SIGPIPE, SIG_IGN);
#endif
    if (!tp_runnable(SIM_BIN)) {
        printf("  %s missing: run `make apps` first\n", SIM_BIN);
        rsdt_failed++;
        return RSD_TEST_END();
    }
    RUN(test_soak);
    return RSD_TEST_END();
}
