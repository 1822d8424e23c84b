/* sim_step.h -- the reconciler tests' one fake server: apps/rsd-sim/rsd_sim.h in-process, no
   sockets. sim_http answers one HTTP step of the reconcile with the simulator S on the
   simulated clock NOW: a deferred answer (a load that takes load_ms, a load waiting for
   its victim to stop) advances NOW to when the simulator gives it, or to the step's
   timeout (then RSD_ERR_TIMEOUT); a hung one is a timeout too. The body is in RB.
   sim_post sends S a POST of another client (or of a test's world), whose answer nobody
   reads. sim_list_fault injects a test's faults into the listing GETs.
   Include after residency.h, apps/rsd-sim/rsd_sim.h and rsd_test.h. Not part of the library. */
#ifndef RSD_TESTS_SIM_STEP_H
#define RSD_TESTS_SIM_STEP_H

static rsim S;
static char RB[262144];
static uint64_t NOW;

/* The reconcile under test (opaque): rc_new puts it in rsd_reconcile_footprint(lim) bytes
   of the heap (kept to the end: it owns nothing else). RES is its result, NOTICES and
   N_NOTICES its notices. */
static rsd_reconcile *R;
#define RES rsd_reconcile_result_of(R)
#define N_NOTICES rsd_reconcile_notices(R, NULL)
#define NOTICES rc_notices()
static int rc_new(const rsd_reconcile_limits *lim) {
    size_t n = rsd_reconcile_footprint(lim);
    void *mem = n ? malloc(n) : NULL;
    if (!mem) return RSD_ERR_NOMEM;
    free(R);
    R = (rsd_reconcile *)mem;
    return rsd_reconcile_init(R, n, lim);
}
static inline const rsd_reconcile_notice *rc_notices(void) {
    const rsd_reconcile_notice *n;
    (void)rsd_reconcile_notices(R, &n);
    return n;
}

/* Perform one HTTP step against the simulator: transport, status, body (RB, len). */
static void sim_http(const rsd_step_http *h, int *transport, int *status, size_t *len) {
    const char *path = strstr(h->url, "://");
    rsim_req q;
    rsim_resp resp;
    uint64_t t0 = NOW;
    int i;
    path = path ? strchr(path + 3, '/') : NULL;
    memset(&q, 0, sizeof q);
    memset(&resp, 0, sizeof resp);
    q.method = h->method;
    q.target = path ? path : "/";
    q.body = h->body;
    q.body_len = h->body_len;
    for (i = 0; i < h->n_headers; i++)
        if (strcmp(h->headers[i].name, "Authorization") == 0) q.authorization = h->headers[i].value;
    resp.body = RB;
    resp.body_cap = sizeof RB;
    rsim_tick(&S, NOW);
    rsim_handle(&S, &q, NOW, &resp);
    *transport = RSD_OK;
    if (resp.action == RSIM_DEFER) { /* e.g. a load waiting for its victim to stop */
        uint32_t ticket = resp.ticket;
        for (;;) {
            uint64_t wake = rsim_next_wake_ms(&S);
            rsim_resp p;
            bool got = false;
            if (wake == UINT64_MAX || wake - t0 > h->timeout_ms) {
                NOW = t0 + h->timeout_ms;
                rsim_cancel(&S, ticket, NOW);
                *transport = RSD_ERR_TIMEOUT;
                *len = 0;
                return;
            }
            if (wake > NOW) NOW = wake;
            rsim_tick(&S, NOW);
            memset(&p, 0, sizeof p);
            p.body = RB;
            p.body_cap = sizeof RB;
            while (rsim_pull(&S, NOW, &p) > 0) {
                if (p.ticket == ticket && p.action == RSIM_RESPOND) {
                    resp = p;
                    got = true;
                    break;
                }
                p.body = RB;
                p.body_cap = sizeof RB;
            }
            if (got) break;
        }
    } else if (resp.action == RSIM_HANG) {
        NOW += h->timeout_ms;
        rsim_cancel(&S, resp.ticket, NOW);
        *transport = RSD_ERR_TIMEOUT;
        *len = 0;
        return;
    }
    *status = resp.status;
    *len = resp.body_len;
    NOW += 1;
}

/* Faults a test injects at the transport into the listing GETs (the router's /models,
   Ollama's /api/ps), applied before the simulator answers: the next fail_left listings
   fail with fail_transport (RSD_OK: answered fail_status, empty); after the first POST
   (posts > 0), the next poll_fail_left fail with RSD_ERR_CONNECT; a canned body (a
   hostile server) answers every listing, or only the next body_left when that is > 0. */
typedef struct sim_list_faults {
    int fail_left, fail_transport, fail_status;
    int poll_fail_left;
    const char *body;
    int body_left;
} sim_list_faults;

/* true when a fault answered the listing (transport, status, body, len set) */
RSIM_FN bool sim_list_fault(sim_list_faults *lf, int posts, int *transport, int *status, const char **body,
                            size_t *len) {
    if (lf->fail_left > 0) {
        lf->fail_left--;
        *transport = lf->fail_transport;
        if (lf->fail_status) *status = lf->fail_status;
    } else if (lf->poll_fail_left > 0 && posts > 0) {
        lf->poll_fail_left--;
        *transport = RSD_ERR_CONNECT;
    } else if (lf->body && lf->body_left >= 0) {
        if (lf->body_left > 0 && --lf->body_left == 0) lf->body_left = -1;
        *status = 200;
        *body = lf->body;
        *len = strlen(lf->body);
        return true;
    } else {
        return false;
    }
    *body = "";
    *len = 0;
    return true;
}

/* Another client POSTs body to path now (its answer, deferred or not, is dropped). RSIM_FN:
   a test that does not use it still compiles. */
RSIM_FN void sim_post(const char *path, const char *body) {
    rsim_req q;
    rsim_resp resp;
    memset(&q, 0, sizeof q);
    memset(&resp, 0, sizeof resp);
    q.method = "POST";
    q.target = path;
    q.body = body;
    q.body_len = strlen(body);
    resp.body = RB;
    resp.body_cap = sizeof RB;
    rsim_tick(&S, NOW);
    rsim_handle(&S, &q, NOW, &resp);
    rsim_tick(&S, NOW);
}
#endif
