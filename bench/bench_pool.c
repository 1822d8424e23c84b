/* bench_pool: the pool policy against a faithful C model of the upstream TypeScript
   pool's per-event work (otto ModelProcessPool: FIFO array queue, every dispatch
   rescans from the head, slot search by id, splice). There is no peer library; the
   model is a lower bound on upstream cost (no promises, microtasks or GC, integer
   model ids, one pass per settle batch instead of one per settle).
   (a) acquire+release for a resident model, ns/op;
   (b) N waiters over 5 models, max 2 slots, drained through slot churn
       (load, serve, evict LRU idle, next), total ms, for N = 10k and 100k. */
#define RESIDENCY_IMPLEMENTATION
#include "residency.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static uint32_t rng = 2463534242u;
static uint32_t xs(void) { rng ^= rng << 13; rng ^= rng >> 17; rng ^= rng << 5; return rng; }
static volatile uint64_t sink;

/* ---- upstream model ------------------------------------------------------------ */
typedef struct up_slot { int assigned; int pending; uint64_t last; } up_slot;
typedef struct up_pool {
    up_slot slots[16];
    int nslots, max;
    int *queue; size_t qlen;
    uint64_t clock;
    int *running; size_t nrun;
} up_pool;

/* #slotFor: resident, else empty idle, else grow, else evict LRU idle. */
static int up_slot_for(up_pool *p, int model) {
    int s, empty = -1, best = -1;
    for (s = 0; s < p->nslots; s++) if (p->slots[s].assigned == model) return s;
    for (s = 0; s < p->nslots; s++)
        if (p->slots[s].assigned < 0 && p->slots[s].pending == 0) { empty = s; break; }
    if (empty < 0 && p->nslots < p->max) {
        empty = p->nslots++;
        p->slots[empty].assigned = -1;
        p->slots[empty].pending = 0;
        p->slots[empty].last = ++p->clock;
    }
    if (empty >= 0) { p->slots[empty].assigned = model; return empty; }
    for (s = 0; s < p->nslots; s++)
        if (p->slots[s].pending == 0 && (best < 0 || p->slots[s].last < p->slots[best].last)) best = s;
    if (best < 0) return -1;
    p->slots[best].assigned = -1; /* #releaseSlot (the awaited stop is not timed) */
    p->slots[best].last = ++p->clock;
    p->slots[best].assigned = model;
    return best;
}

/* #pass: scan from the head; the first job that gets a slot is spliced out; restart. */
static void up_pass(up_pool *p) {
    for (;;) {
        size_t i;
        int s = -1;
        if (p->nslots > p->max) { /* #trimIdleSlots: never true here */ }
        for (i = 0; i < p->qlen; i++) {
            s = up_slot_for(p, p->queue[i]);
            if (s >= 0) break;
        }
        if (i == p->qlen) return;
        memmove(p->queue + i, p->queue + i + 1, (p->qlen - i - 1) * sizeof(int));
        p->qlen--;
        p->slots[s].pending++;
        p->slots[s].last = ++p->clock;
        if (p->running) p->running[p->nrun++] = s;
    }
}

static void up_settle(up_pool *p, int s) {
    p->slots[s].pending = p->slots[s].pending > 0 ? p->slots[s].pending - 1 : 0;
    p->slots[s].last = ++p->clock;
}

static double peer_acquire_release(int iters) {
    up_pool p;
    int q[4], i, run[4];
    double t0;
    memset(&p, 0, sizeof p);
    p.max = 2;
    p.queue = q;
    p.running = run;
    p.nslots = 1;
    p.slots[0].assigned = 0; /* model 0 resident */
    t0 = now_ns();
    for (i = 0; i < iters; i++) {
        p.queue[p.qlen++] = 0; /* submit */
        up_pass(&p);           /* dispatch */
        p.nrun = 0;
        up_settle(&p, 0);      /* settle */
        up_pass(&p);           /* re-dispatch */
    }
    sink += p.clock;
    return (now_ns() - t0) / iters;
}

static double peer_drain(const int *models, size_t n) {
    up_pool p;
    double t0;
    size_t i;
    memset(&p, 0, sizeof p);
    p.max = 2;
    p.queue = (int *)malloc(n * sizeof(int));
    p.running = (int *)malloc(n * sizeof(int));
    t0 = now_ns();
    for (i = 0; i < n; i++) p.queue[p.qlen++] = models[i];
    while (p.qlen > 0) {
        p.nrun = 0;
        up_pass(&p);
        for (i = 0; i < p.nrun; i++) up_settle(&p, p.running[i]);
    }
    t0 = now_ns() - t0;
    free(p.queue);
    free(p.running);
    return t0 / 1e6;
}

/* ---- ours --------------------------------------------------------------------------- */
static rsd_pool *mk(uint32_t max_requests) {
    static const char *const ids[5] = {"m0", "m1", "m2", "m3", "m4"};
    rsd_pool_model_desc m[5];
    rsd_pool_desc d;
    int i;
    memset(m, 0, sizeof m);
    for (i = 0; i < 5; i++) m[i].id = ids[i];
    memset(&d, 0, sizeof d);
    d.max_slots = 2;
    d.max_requests = max_requests;
    d.models = m;
    d.num_models = 5;
    d.max_wait_ms = RSD_POOL_WAIT_FOREVER;
    return rsd_pool_create(&d);
}

static double ours_acquire_release(int iters) {
    rsd_pool *p = mk(64);
    rsd_pool_action a;
    rsd_pool_req_h r;
    int i, s;
    double t0;
    rsd_pool_acquire(p, 0, 0, NULL, &r, &s);
    while (rsd_pool_next_action(p, &a))
        if (a.kind == RSD_POOL_ACTION_SPAWN) rsd_pool_on_started(p, a.proc, true, 0);
    rsd_pool_release(p, r, 0);
    t0 = now_ns();
    for (i = 0; i < iters; i++) {
        if (rsd_pool_acquire(p, 0, (uint64_t)i, NULL, &r, &s) != RSD_OK) abort();
        rsd_pool_release(p, r, (uint64_t)i);
    }
    t0 = (now_ns() - t0) / iters;
    rsd_pool_destroy(p);
    return t0;
}

static double ours_drain(const int *models, size_t n) {
    rsd_pool *p = mk((uint32_t)n + 64);
    rsd_pool_req_h *run = (rsd_pool_req_h *)malloc(n * sizeof *run), r;
    rsd_pool_action a;
    rsd_pool_info st;
    size_t i, nrun, done = 0;
    int s;
    double t0 = now_ns();
    for (i = 0; i < n; i++) {
        if (rsd_pool_acquire(p, models[i], 0, NULL, &r, &s) == RSD_OK) abort(); /* nothing resident yet at i=0.. */
    }
    for (;;) {
        nrun = 0;
        while (rsd_pool_next_action(p, &a)) {
            if (a.kind == RSD_POOL_ACTION_SPAWN) rsd_pool_on_started(p, a.proc, true, 1);
            else if (a.kind == RSD_POOL_ACTION_STOP) rsd_pool_on_exited(p, a.proc, 1);
            else if (a.kind == RSD_POOL_ACTION_GRANT) run[nrun++] = a.req;
        }
        if (nrun == 0) break;
        for (i = 0; i < nrun; i++) rsd_pool_release(p, run[i], 2);
        done += nrun;
    }
    t0 = now_ns() - t0;
    rsd_pool_query(p, &st);
    if (done != n || st.waiting != 0) { fprintf(stderr, "ours_drain: %zu of %zu\n", done, n); abort(); }
    rsd_pool_destroy(p);
    free(run);
    return t0 / 1e6;
}

static double min2(double a, double b) { return a < b ? a : b; }

int main(void) {
    const int iters = 5000000;
    double o_ar, p_ar, o10, p10, o100, p100;
    int *models;
    size_t i, n;
    o_ar = min2(ours_acquire_release(iters), ours_acquire_release(iters));
    p_ar = min2(peer_acquire_release(iters), peer_acquire_release(iters));
    printf("BENCH pool_acquire_release ours=%.1f peer=%.1f unit=ns ratio=%.2f\n", o_ar, p_ar, o_ar / p_ar);
    n = 100000;
    models = (int *)malloc(n * sizeof(int));
    for (i = 0; i < n; i++) models[i] = (int)(xs() % 5u);
    o10 = min2(ours_drain(models, 10000), ours_drain(models, 10000));
    p10 = min2(peer_drain(models, 10000), peer_drain(models, 10000));
    printf("BENCH pool_dispatch_10k ours=%.3f peer=%.3f unit=ms ratio=%.4f\n", o10, p10, o10 / p10);
    o100 = min2(ours_drain(models, 100000), ours_drain(models, 100000));
    p100 = peer_drain(models, 100000);
    printf("BENCH pool_dispatch_100k ours=%.3f peer=%.3f unit=ms ratio=%.4f\n", o100, p100, o100 / p100);
    printf("\n%-28s %12s %12s\n", "pool (lower is better)", "ours", "upstream-model");
    printf("%-28s %9.1f ns %9.1f ns\n", "acquire+release (resident)", o_ar, p_ar);
    printf("%-28s %9.3f ms %9.3f ms\n", "drain 10k waiters", o10, p10);
    printf("%-28s %9.3f ms %9.3f ms\n", "drain 100k waiters", o100, p100);
    printf("%-28s %12.1fx %12.1fx\n", "100k / 10k scaling", o100 / o10, p100 / p10);
    free(models);
    return (int)(sink & 0);
}
