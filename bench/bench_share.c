/* bench_share: how many model swaps a request trace costs on one process slot.
     ours = rsd_pool (queued requests collated by model, 30 s age bound);
     peer = serving in arrival order, swapping whenever the next request names
            another model (llama-swap before its collation change; the seed's
            pool did the same on one slot).
   Traces: "abcabc" (six requests, three models, arriving together: llama-swap's
   published example, 5 swaps down to 2); "bursty" (6000 requests over 4 models,
   bursts of 1..12 requests every 8 s, each request takes 40 ms, a swap 1500 ms);
   "steady" (the same requests, one every 2 s: nothing to collate). Also the
   longest wait of any request on "bursty", ours and peer (the cost of collation).
   Simulated time; the pool is the real one. Run from the repository root. */
#define RESIDENCY_IMPLEMENTATION
#include "residency.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAXR = 6000, SERVE_MS = 40, SWAP_MS = 1500 };

typedef struct trace { int n; int model[MAXR]; uint64_t at[MAXR]; } trace;

static uint32_t rng = 2463534242u;
static uint32_t xs(void) { rng ^= rng << 13; rng ^= rng >> 17; rng ^= rng << 5; return rng; }

/* Peer: FIFO in arrival order on one slot. */
static void peer_run(const trace *t, int *swaps, uint64_t *max_wait) {
    uint64_t now = 0;
    int i, cur = -1;
    *swaps = 0;
    *max_wait = 0;
    for (i = 0; i < t->n; i++) {
        if (now < t->at[i]) now = t->at[i];
        if (t->model[i] != cur) {
            if (cur >= 0) ++*swaps;
            now += SWAP_MS;
            cur = t->model[i];
        }
        if (now - t->at[i] > *max_wait) *max_wait = now - t->at[i];
        now += SERVE_MS;
    }
}

/* Ours: the pool on one slot, one request at a time per process, driven in simulated
   time: arrivals, loads of SWAP_MS, requests of SERVE_MS. */
static void ours_run(const trace *t, int nmodels, int *swaps, uint64_t *max_wait) {
    static rsd_pool_req_h req[MAXR];
    static uint64_t enq[MAXR];
    rsd_pool_model_desc md[8];
    rsd_pool_desc d;
    rsd_pool *p;
    rsd_pool_action a;
    rsd_pool_proc_h loading = {0}, stopping = {0};
    uint64_t now = 0, load_done = 0, serve_done = 0;
    int next = 0, done = 0, running = -1, spawns = 0, i, slot;
    char ids[8][4];
    memset(&d, 0, sizeof d);
    for (i = 0; i < nmodels; i++) {
        snprintf(ids[i], sizeof ids[i], "m%d", i);
        memset(&md[i], 0, sizeof md[i]);
        md[i].id = ids[i];
        md[i].max_in_flight = 1;
    }
    d.max_slots = 1;
    d.max_requests = MAXR + 16;
    d.models = md;
    d.num_models = nmodels;
    p = rsd_pool_create(&d);
    if (!p) { *swaps = -1; return; }
    *max_wait = 0;
    while (done < t->n) {
        /* the next event: an arrival, a load finishing, a request finishing */
        uint64_t tnext = UINT64_MAX;
        if (next < t->n) tnext = t->at[next];
        if (loading.id && load_done < tnext) tnext = load_done;
        if (running >= 0 && serve_done < tnext) tnext = serve_done;
        if (tnext == UINT64_MAX) break;
        if (tnext > now) now = tnext;
        if (next < t->n && t->at[next] <= now) {
            int r = rsd_pool_acquire(p, t->model[next], now, (void *)(intptr_t)next, &req[next], &slot);
            enq[next] = now;
            if (r == RSD_OK) { running = next; serve_done = now + SERVE_MS; }
            next++;
        } else if (loading.id && load_done <= now) {
            rsd_pool_on_started(p, loading, true, now);
            loading.id = 0;
        } else if (running >= 0 && serve_done <= now) {
            rsd_pool_release(p, req[running], now);
            running = -1;
            done++;
        }
        rsd_pool_step(p, now);
        while (rsd_pool_next_action(p, &a)) {
            if (a.kind == RSD_POOL_ACTION_SPAWN) { spawns++; loading = a.proc; load_done = now + SWAP_MS; }
            if (a.kind == RSD_POOL_ACTION_STOP) { stopping = a.proc; rsd_pool_on_exited(p, stopping, now); }
            if (a.kind == RSD_POOL_ACTION_GRANT) {
                int k = (int)(intptr_t)a.user;
                running = k;
                serve_done = now + SERVE_MS;
                if (now - enq[k] > *max_wait) *max_wait = now - enq[k];
            }
        }
    }
    *swaps = spawns - 1;
    if (done < t->n) *swaps = -1;
    rsd_pool_destroy(p);
}

static void report(const char *name, const trace *t, int nmodels, bool waits) {
    int so, sp;
    uint64_t wo, wp;
    ours_run(t, nmodels, &so, &wo);
    peer_run(t, &sp, &wp);
    printf("BENCH pool_swaps_%s ours=%d peer=%d unit=swaps ratio=%.3f\n", name, so, sp,
           sp ? (double)so / sp : 0.0);
    if (waits)
        printf("BENCH pool_max_wait_%s ours=%llu peer=%llu unit=ms ratio=%.3f\n", name,
               (unsigned long long)wo, (unsigned long long)wp, wp ? (double)wo / (double)wp : 0.0);
}

int main(void) {
    static trace t;
    int i;
    uint64_t at = 0;
    t.n = 6;
    for (i = 0; i < 6; i++) { t.model[i] = i % 3; t.at[i] = 0; }
    report("abcabc", &t, 3, false);
    t.n = 0;
    while (t.n < MAXR) {
        int burst = 1 + (int)(xs() % 12);
        for (i = 0; i < burst && t.n < MAXR; i++) {
            t.model[t.n] = (int)(xs() % 4);
            t.at[t.n++] = at;
        }
        at += 8000;
    }
    report("bursty", &t, 4, true);
    for (i = 0; i < t.n; i++) t.at[i] = (uint64_t)i * 2000u;
    report("steady", &t, 4, false);
    return 0;
}
