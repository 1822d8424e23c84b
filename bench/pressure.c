/* pressure: evictions under another program's moving memory use (issue 26, "no thrash").
   One request trace (4 models of 8, 6, 5 and 3 GiB, at most 3 resident, a 24 GiB device)
   is replayed on a simulated clock (250 ms ticks) while another program's memory walks
   between 20 % and 40 % of the device (30 % +- 10 %, a bounded random walk of up to 1 % a
   second), against two policies:
     ours  the real rsd_pool driven in-process as rsd-serve drives it: the device is read
           (rsd_pool_set_vram with the other program's bytes) when a request comes for a
           model that is not running, and every 250 ms while st.models_foreign_held > 0;
           the pool evicts only inside an admission pass;
     peer  Lemonade's: sample the device every 10 s and evict the least recently used idle
           model while used > 90 % of it; a load evicts LRU idle models until it fits by
           count and by bytes (decided whole, as ours).
   Both load in 3 s, exit in 0.5 s, serve each request 1-6 s, and give up on a request
   that waited 120 s (refused). An eviction is NEEDED when, at the moment it is made, a
   request waits for a model that is not starting or running and that model could not
   start beside what runs (the resident count is at the maximum, or running bytes + the
   other program's bytes now + its bytes exceed the device); every other eviction is
   unneeded. The same test classifies both policies' evictions.
   BENCH pressure_evictions ours=<unneeded> peer=<unneeded>; the lines after it give
   total evictions and requests served / refused. Exit 1 when the replay did not account
   for every request or the pool refused a call. */
#define RESIDENCY_IMPLEMENTATION
#include "residency.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GiB ((uint64_t)1 << 30)
#define NM 4
#define MAXRES 3
#define NREQ 4000
#define TICK 250
#define LOAD_MS 3000
#define EXIT_MS 500
#define GIVEUP_MS 120000
#define POLL_MS 10000

static const uint64_t g_bytes[NM] = {8 * GiB, 6 * GiB, 5 * GiB, 3 * GiB};
static const char *const g_ids[NM] = {"a", "b", "c", "d"};
static const uint64_t g_total = 24 * GiB;

static uint32_t g_rng = 2463534242u;
static uint32_t xs(void) { g_rng ^= g_rng << 13; g_rng ^= g_rng >> 17; g_rng ^= g_rng << 5; return g_rng; }

typedef struct trace_req { uint64_t at, dur; int model; } trace_req;
static trace_req g_trace[NREQ];
static uint64_t *g_foreign; /* per second */
static uint64_t g_end_s;

static void make_trace(void) {
    uint64_t t = 0, f = g_total * 30 / 100, lo = g_total * 20 / 100, hi = g_total * 40 / 100, s;
    int i, m = 0;
    for (i = 0; i < NREQ; i++) {
        uint32_t w = xs() % 100;
        t += 200 + xs() % 5600; /* mean about 3 s apart */
        if (xs() % 100 >= 75) m = w < 40 ? 0 : w < 70 ? 1 : w < 90 ? 2 : 3; /* else the same model again */
        g_trace[i].at = t;
        g_trace[i].dur = 1000 + xs() % 5000;
        g_trace[i].model = m;
    }
    g_end_s = t / 1000 + GIVEUP_MS / 1000 + 60;
    g_foreign = (uint64_t *)malloc((size_t)(g_end_s + 1) * sizeof *g_foreign);
    if (!g_foreign) exit(1);
    for (s = 0; s <= g_end_s; s++) {
        uint64_t step = (uint64_t)(xs() % (g_total / 100 / (1 << 20) + 1)) << 20; /* up to 1 % of the device */
        if (xs() & 1) f = f + step > hi ? hi - (f + step - hi) : f + step;
        else f = f < lo + step ? lo + (lo + step - f) : f - step;
        g_foreign[s] = f;
    }
}

static uint64_t foreign_at(uint64_t ms) { return g_foreign[ms / 1000 > g_end_s ? g_end_s : ms / 1000]; }

/* ---- what both policies share: model states, requests, the classification ---------- */
enum { M_NONE, M_STARTING, M_READY, M_STOPPING };
typedef struct sim {
    int st[NM];
    uint64_t until[NM];   /* STARTING: ready at; STOPPING: gone at */
    uint64_t last_use[NM];
    int in_flight[NM];
    int waiting[NM];      /* requests waiting for the model */
    rsd_pool_proc_h proc[NM];
    uint64_t evictions, unneeded, served, refused, loads;
} sim;

static int live_count(const sim *s) {
    int m, n = 0;
    for (m = 0; m < NM; m++) n += s->st[m] == M_STARTING || s->st[m] == M_READY;
    return n;
}
static uint64_t live_bytes(const sim *s) {
    uint64_t b = 0;
    int m;
    for (m = 0; m < NM; m++) if (s->st[m] == M_STARTING || s->st[m] == M_READY) b += g_bytes[m];
    return b;
}

/* An eviction of a live model now: needed when a waiting start cannot begin beside what
   runs (victim included). Counted, and the victim marked stopping. */
static void evicted(sim *s, int v, uint64_t now) {
    int w;
    bool need = false;
    for (w = 0; w < NM; w++)
        if (s->waiting[w] && (s->st[w] == M_NONE || s->st[w] == M_STOPPING) &&
            (live_count(s) >= MAXRES || live_bytes(s) + foreign_at(now) + g_bytes[w] > g_total))
            need = true;
    s->evictions++;
    if (!need) s->unneeded++;
    s->st[v] = M_STOPPING;
    s->until[v] = now + EXIT_MS;
}

/* ---- ours: the pool ------------------------------------------------------------------ */
typedef struct ours_req { rsd_pool_req_h h; int model; uint64_t at, dur, end; int state; } ours_req; /* 0 wait 1 run 2 done */
static ours_req g_or[NREQ];
static int g_fail;

static void ours_pump(rsd_pool *p, sim *s, uint64_t now) {
    rsd_pool_action a;
    while (rsd_pool_next_action(p, &a)) {
        if (a.kind == RSD_POOL_ACTION_SPAWN) {
            s->st[a.model] = M_STARTING;
            s->until[a.model] = now + LOAD_MS;
            s->proc[a.model] = a.proc;
            s->loads++;
        } else if (a.kind == RSD_POOL_ACTION_STOP) {
            if (a.why == RSD_POOL_WHY_EVICT || a.why == RSD_POOL_WHY_STARVE) evicted(s, a.model, now);
            else { s->st[a.model] = M_STOPPING; s->until[a.model] = now + EXIT_MS; }
        } else if (a.kind == RSD_POOL_ACTION_GRANT) {
            ours_req *r = (ours_req *)a.user;
            r->state = 1;
            r->end = now + r->dur;
            s->waiting[r->model]--;
            s->in_flight[r->model]++;
        } else if (a.kind == RSD_POOL_ACTION_FAIL) {
            ours_req *r = (ours_req *)a.user;
            r->state = 2;
            s->waiting[r->model]--;
            s->refused++;
        }
    }
}

static void run_ours(sim *s) {
    rsd_pool_desc d;
    rsd_pool_model_desc md[NM];
    rsd_pool *p;
    rsd_pool_info st;
    uint64_t now, last_read = 0;
    int m, i, next = 0, slot;
    memset(&d, 0, sizeof d);
    memset(md, 0, sizeof md);
    for (m = 0; m < NM; m++) { md[m].id = g_ids[m]; md[m].reserve_bytes = g_bytes[m]; }
    d.max_slots = MAXRES;
    d.max_requests = NREQ;
    d.vram_budget_bytes = g_total;
    d.models = md;
    d.num_models = NM;
    p = rsd_pool_create(&d);
    if (!p) { g_fail = 1; return; }
    memset(s, 0, sizeof *s);
    for (now = 0; now <= g_end_s * 1000; now += TICK) {
        for (m = 0; m < NM; m++) { /* the processes' own progress */
            if (s->st[m] == M_STARTING && now >= s->until[m]) {
                s->st[m] = M_READY;
                if (rsd_pool_on_started(p, s->proc[m], true, now) != RSD_OK) g_fail = 1;
            } else if (s->st[m] == M_STOPPING && now >= s->until[m]) {
                s->st[m] = M_NONE;
                if (rsd_pool_on_exited(p, s->proc[m], now) != RSD_OK) g_fail = 1;
            }
            ours_pump(p, s, now);
        }
        for (i = 0; i < next; i++) { /* finished and abandoned requests */
            ours_req *r = &g_or[i];
            if (r->state == 1 && now >= r->end) {
                r->state = 2;
                s->in_flight[r->model]--;
                s->served++;
                if (rsd_pool_release(p, r->h, now) != RSD_OK) g_fail = 1;
                ours_pump(p, s, now);
            } else if (r->state == 0 && now >= r->at + GIVEUP_MS) {
                r->state = 2;
                s->waiting[r->model]--;
                s->refused++;
                if (rsd_pool_cancel(p, r->h, now) != RSD_OK) g_fail = 1;
                ours_pump(p, s, now);
            }
        }
        for (; next < NREQ && g_trace[next].at <= now; next++) { /* arrivals */
            ours_req *r = &g_or[next];
            int rc;
            r->model = g_trace[next].model;
            r->at = g_trace[next].at;
            r->dur = g_trace[next].dur;
            if (s->st[r->model] != M_STARTING && s->st[r->model] != M_READY) { /* a start may be admitted */
                (void)rsd_pool_set_vram(p, 0, foreign_at(now), now);
                last_read = now;
                ours_pump(p, s, now);
            }
            s->waiting[r->model]++;
            rc = rsd_pool_acquire(p, r->model, now, r, &r->h, &slot);
            if (rc == RSD_OK) {
                r->state = 1;
                r->end = now + r->dur;
                s->waiting[r->model]--;
                s->in_flight[r->model]++;
            } else if (rc != RSD_PENDING) {
                r->state = 2;
                s->waiting[r->model]--;
                s->refused++;
            }
            ours_pump(p, s, now);
        }
        rsd_pool_query(p, &st); /* a start held only by others' memory: read again */
        if (st.models_foreign_held && now >= last_read + 250) {
            (void)rsd_pool_set_vram(p, 0, foreign_at(now), now);
            last_read = now;
        }
        (void)rsd_pool_step(p, now);
        ours_pump(p, s, now);
    }
    rsd_pool_query(p, &st);
    if (st.evictions + st.starve_drains < s->evictions) g_fail = 1; /* the pool's own count agrees */
    rsd_pool_destroy(p);
}

/* ---- peer: poll every 10 s, evict LRU idle while used > 90 % -------------------------- */
typedef struct peer_req { int model; uint64_t at, end; int state; } peer_req; /* 0 wait 1 run 2 done */
static peer_req g_pr[NREQ];

static int lru_idle(const sim *s) {
    int m, best = -1;
    for (m = 0; m < NM; m++)
        if (s->st[m] == M_READY && s->in_flight[m] == 0 && (best < 0 || s->last_use[m] < s->last_use[best])) best = m;
    return best;
}

/* Load m if it fits by count and bytes, evicting LRU idle models for it (all or none). */
static void peer_try_load(sim *s, int m, uint64_t now) {
    int picked[NM], n = 0, k, v, cnt = live_count(s);
    uint64_t b = live_bytes(s), f = foreign_at(now);
    sim t = *s;
    while ((cnt >= MAXRES || b + f + g_bytes[m] > g_total) && (v = lru_idle(&t)) >= 0) {
        picked[n++] = v;
        t.st[v] = M_STOPPING;
        cnt--;
        b -= g_bytes[v];
    }
    if (cnt >= MAXRES || b + f + g_bytes[m] > g_total) return; /* not now */
    for (k = 0; k < n; k++) evicted(s, picked[k], now);
    s->st[m] = M_STARTING;
    s->until[m] = now + LOAD_MS;
    s->loads++;
}

static void run_peer(sim *s) {
    uint64_t now, next_poll = POLL_MS;
    int m, i, next = 0;
    memset(s, 0, sizeof *s);
    for (now = 0; now <= g_end_s * 1000; now += TICK) {
        for (m = 0; m < NM; m++) {
            if (s->st[m] == M_STARTING && now >= s->until[m]) s->st[m] = M_READY;
            else if (s->st[m] == M_STOPPING && now >= s->until[m]) s->st[m] = M_NONE;
        }
        for (; next < NREQ && g_trace[next].at <= now; next++) {
            g_pr[next].model = g_trace[next].model;
            g_pr[next].at = g_trace[next].at;
            s->waiting[g_pr[next].model]++;
        }
        for (i = 0; i < next; i++) {
            peer_req *r = &g_pr[i];
            if (r->state == 1 && now >= r->end) {
                r->state = 2;
                s->in_flight[r->model]--;
                s->last_use[r->model] = now;
                s->served++;
            } else if (r->state == 0 && now >= r->at + GIVEUP_MS) {
                r->state = 2;
                s->waiting[r->model]--;
                s->refused++;
            } else if (r->state == 0) {
                if (s->st[r->model] == M_NONE) peer_try_load(s, r->model, now);
                if (s->st[r->model] == M_READY) {
                    r->state = 1;
                    r->end = now + g_trace[i].dur;
                    s->waiting[r->model]--;
                    s->in_flight[r->model]++;
                    s->last_use[r->model] = now;
                }
            }
        }
        if (now >= next_poll) { /* the memory monitor */
            next_poll += POLL_MS;
            if ((live_bytes(s) + foreign_at(now)) * 10 > g_total * 9 && (m = lru_idle(s)) >= 0) evicted(s, m, now);
        }
    }
}

int main(void) {
    sim o, p;
    make_trace();
    run_ours(&o);
    run_peer(&p);
    free(g_foreign);
    if (g_fail || o.served + o.refused != NREQ || p.served + p.refused != NREQ) {
        fprintf(stderr, "pressure: the replay failed (pool call refused: %d; ours %llu+%llu, peer %llu+%llu of %d)\n",
                g_fail, (unsigned long long)o.served, (unsigned long long)o.refused, (unsigned long long)p.served,
                (unsigned long long)p.refused, NREQ);
        return 1;
    }
    printf("BENCH pressure_evictions ours=%llu peer=%llu unit=unneeded_evictions ratio=%.3f\n",
           (unsigned long long)o.unneeded, (unsigned long long)p.unneeded,
           p.unneeded ? (double)o.unneeded / (double)p.unneeded : 0.0);
    printf("\n%-34s %10s %10s\n", "pressure (one trace, 4 models)", "ours", "poll-90%");
    printf("%-34s %10llu %10llu\n", "evictions no start needed", (unsigned long long)o.unneeded,
           (unsigned long long)p.unneeded);
    printf("%-34s %10llu %10llu\n", "evictions in all", (unsigned long long)o.evictions,
           (unsigned long long)p.evictions);
    printf("%-34s %10llu %10llu\n", "loads", (unsigned long long)o.loads, (unsigned long long)p.loads);
    printf("%-34s %10llu %10llu\n", "requests served", (unsigned long long)o.served, (unsigned long long)p.served);
    printf("%-34s %10llu %10llu\n", "requests refused (waited 120 s)", (unsigned long long)o.refused,
           (unsigned long long)p.refused);
    return 0;
}
