/* pool_host.h -- the fake host of the pure pool tests (test_pool.c, test_pool_share.c;
   not part of the library): it pulls every action into a log and, when asked, finishes
   starts and stops at once. Include after residency.h with RESIDENCY_IMPLEMENTATION. */
#ifndef POOL_HOST_H
#define POOL_HOST_H
#include <string.h>

#define GiB ((uint64_t)1 << 30)

typedef struct host {
    rsd_pool *p;
    rsd_pool_action log[1024];
    int nlog;
    bool auto_start, auto_exit;
    uint64_t now;
} host;

/* Pull every action into the log; optionally finish starts and stops at once. */
static void pump(host *h) {
    rsd_pool_action a;
    while (rsd_pool_next_action(h->p, &a)) {
        if (h->nlog < 1024) h->log[h->nlog++] = a;
        if (a.kind == RSD_POOL_ACTION_SPAWN && h->auto_start) rsd_pool_on_started(h->p, a.proc, true, h->now);
        if (a.kind == RSD_POOL_ACTION_STOP && h->auto_exit) rsd_pool_on_exited(h->p, a.proc, h->now);
    }
}

/* Run the pool's timers at now; what rsd_pool_next_deadline says after (0: actions wait). */
static uint64_t step_next(rsd_pool *p, uint64_t now) {
    CHECK(rsd_pool_step(p, now) >= 0);
    return rsd_pool_next_deadline(p);
}

static int count(const host *h, rsd_pool_action_kind k) {
    int i, n = 0;
    for (i = 0; i < h->nlog; i++) n += h->log[i].kind == k;
    return n;
}

static int count_why(const host *h, rsd_pool_why why) {
    int i, n = 0;
    for (i = 0; i < h->nlog; i++) n += h->log[i].kind == RSD_POOL_ACTION_STOP && h->log[i].why == why;
    return n;
}

static const rsd_pool_action *last(const host *h, rsd_pool_action_kind k) {
    int i;
    for (i = h->nlog - 1; i >= 0; i--) if (h->log[i].kind == k) return &h->log[i];
    return NULL;
}

static const rsd_pool_action *grant_of(const host *h, rsd_pool_req_h r) {
    int i;
    for (i = 0; i < h->nlog; i++)
        if (h->log[i].kind == RSD_POOL_ACTION_GRANT && h->log[i].req.id == r.id) return &h->log[i];
    return NULL;
}

static rsd_pool_model_desc md(const char *id, uint64_t bytes) {
    rsd_pool_model_desc m;
    memset(&m, 0, sizeof m);
    m.id = id;
    m.reserve_bytes = bytes;
    return m;
}
#endif
