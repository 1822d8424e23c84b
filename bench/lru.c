/* bench/lru.c: reloads a replayed request trace costs on a full llama.cpp router, when
   the ensurer evicts the least recently used model (ours: rsd_decide with each
   resident's last use, as the state directory records it) against id order (peer:
   the same decision without last uses, which is what rsd_decide did before; llama.cpp's
   own router picks its LRU too, so id order is the baseline a user of the ensurer had).
   A reload is a request whose model was not resident. The decision is the real one;
   time is the request index (simulated), so the figures are exact and repeatable.
   Traces (seeded, fixed):
     ensure_lru_reloads          8 models on a 3-slot router, 20000 requests: a chat model
                                 every third request, the rest Zipf-distributed (s = 1)
     ensure_lru_reloads_phases   10 models on a 4-slot router, 20000 requests in phases of
                                 400, each phase working on 3 random models besides chat
     ensure_lru_reloads_zipf     8 models on a 3-slot router, plain Zipf (s = 1)
   Run from the repository root. */
#define RESIDENCY_IMPLEMENTATION
#include "residency.h"
#include <stdio.h>
#include <string.h>

enum { NREQ = 20000, MAXM = 16 };

static uint32_t rng;
static uint32_t xs(void) { rng ^= rng << 13; rng ^= rng >> 17; rng ^= rng << 5; return rng; }
static double unit(void) { return (double)(xs() >> 8) / (double)(1u << 24); }

static char names[MAXM][16];
static int trace[NREQ];

/* A model by Zipf weight (s = 1) among n. */
static int zipf(int n) {
    double h = 0, x, acc = 0;
    int k;
    for (k = 1; k <= n; k++) h += 1.0 / k;
    x = unit() * h;
    for (k = 1; k <= n; k++) {
        acc += 1.0 / k;
        if (x < acc) return k - 1;
    }
    return n - 1;
}

/* Replays the trace on a router of `slots` slots; returns the reloads. */
static int replay(int n_models, int slots, bool lru) {
    rsd_resident res[RSD_MAX_RESIDENTS];
    static rsd_plan plan;
    rsd_facts f;
    uint64_t last[MAXM];
    int resident[MAXM], n = 0, i, k, reloads = 0;
    (void)n_models;
    memset(last, 0, sizeof last);
    for (i = 0; i < NREQ; i++) {
        int m = trace[i];
        memset(&f, 0, sizeof f);
        for (k = 0; k < n; k++) {
            memset(&res[k], 0, sizeof res[k]);
            res[k].model_id = rsd_str_c(names[resident[k]]);
            res[k].loaded_by_us = true;
            res[k].last_used_ms = lru ? last[resident[k]] : 0;
        }
        f.strategy = RSD_STRATEGY_ROUTER;
        f.target_id = rsd_str_c("bench");
        f.keep = rsd_str_c(names[m]);
        f.residents = res;
        f.n_residents = n;
        f.max_instances = (uint32_t)slots;
        if (rsd_decide(&f, &plan) != RSD_OK) return -1;
        if (plan.decision != RSD_DECISION_ALREADY_RESIDENT) {
            int keep[MAXM], nk = 0;
            for (k = 0; k < n; k++)
                if (!plan.cls[k].evict) keep[nk++] = resident[k];
            memcpy(resident, keep, sizeof keep);
            n = nk;
            resident[n++] = m;
            reloads++;
        }
        last[m] = 1000 + (uint64_t)i; /* ms since the epoch, in this simulated world */
    }
    return reloads;
}

static void figure(const char *name, int n_models, int slots) {
    int ours = replay(n_models, slots, true), peer = replay(n_models, slots, false);
    printf("BENCH %s ours=%d peer=%d unit=reloads ratio=%.3f\n", name, ours, peer,
           peer > 0 ? (double)ours / (double)peer : 0.0);
}

int main(void) {
    int i, k, set[3];
    for (i = 0; i < MAXM; i++) snprintf(names[i], sizeof names[i], "model-%02d", i);
    rng = 2463534242u; /* chat (model-07: last by id) every third request, the rest Zipf */
    for (i = 0; i < NREQ; i++) trace[i] = i % 3 == 0 ? 7 : zipf(7);
    figure("ensure_lru_reloads", 8, 3);
    rng = 88172645u; /* phases of 400 over 3 models besides chat (model-09) */
    for (i = 0; i < NREQ; i++) {
        if (i % 400 == 0)
            for (k = 0; k < 3; k++) set[k] = (int)(xs() % 9);
        trace[i] = xs() % 4 == 0 ? 9 : set[xs() % 3];
    }
    figure("ensure_lru_reloads_phases", 10, 4);
    rng = 123456789u;
    for (i = 0; i < NREQ; i++) trace[i] = zipf(8);
    figure("ensure_lru_reloads_zipf", 8, 3);
    return 0;
}
