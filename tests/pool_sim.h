/* pool_sim.h -- shared driver for tests/test_pool.c and fuzz/fuzz_pool.c (not part of
   the library). A fake host around an rsd_pool: it pulls actions, keeps its own view of
   processes and requests, and checks the pool's invariants after every operation.
   Include after residency.h with RESIDENCY_IMPLEMENTATION. */
#ifndef POOL_SIM_H
#define POOL_SIM_H
#include <stdio.h>
#include <string.h>

#define PSIM_MAX_REQ 4096
enum { PSIM_FREE = 0, PSIM_WAIT, PSIM_RUN };

typedef struct psim_req { rsd_pool_req_h h; int state, model, slot; bool excl; } psim_req;
typedef struct psim {
    rsd_pool *pool;
    uint64_t now;
    int nmodels;
    /* host view of processes: 0 none, 1 spawned (SPAWN pulled), 2 ready, 3 stop asked */
    int proc_state[RSD_POOL_MAX_SLOTS];
    rsd_pool_proc_h proc[RSD_POOL_MAX_SLOTS];
    psim_req req[PSIM_MAX_REQ];
    int nreq;
    unsigned long granted, failed, released, cancelled, spawns, stops, evict_busy;
    int max_now;           /* current max_slots: no SPAWN may take occupancy above it */
    bool overlap;          /* the pool may start beside stopping processes (desc.overlap not
                              OFF): then the live processes are bounded by max, not all */
    uint64_t lease_budget; /* the byte budget leases are held in (0 = not checked) */
    rsd_pool_lease_h lease[RSD_POOL_MAX_LEASES];
    char err[256];
} psim;

static int psim_fail(psim *s, const char *what) {
    if (!s->err[0]) snprintf(s->err, sizeof s->err, "%s (now=%llu)", what, (unsigned long long)s->now);
    return -1;
}

static int psim_find(psim *s, rsd_pool_req_h h) {
    int i;
    for (i = 0; i < s->nreq; i++)
        if (s->req[i].state != PSIM_FREE && s->req[i].h.id == h.id) return i;
    return -1;
}

/* Pull every action and mirror it; check what each action may carry. */
static int psim_pump(psim *s) {
    rsd_pool_action a;
    rsd_pool_info st;
    while (rsd_pool_next_action(s->pool, &a)) {
        int i;
        switch (a.kind) {
        case RSD_POOL_ACTION_SPAWN:
            if (a.slot < 0 || a.slot >= RSD_POOL_MAX_SLOTS) return psim_fail(s, "SPAWN bad slot");
            if (s->proc_state[a.slot] != 0) return psim_fail(s, "SPAWN into a live slot");
            rsd_pool_query(s->pool, &st);
            if (s->max_now && (s->overlap ? st.live_slots : st.occupied_slots) > s->max_now)
                return psim_fail(s, "SPAWN above max");
            if (s->lease_budget && st.reserved_bytes + st.leased_bytes > s->lease_budget)
                return psim_fail(s, "SPAWN breaks a lease");
            s->proc_state[a.slot] = 1;
            s->proc[a.slot] = a.proc;
            s->spawns++;
            break;
        case RSD_POOL_ACTION_STOP:
            if (a.slot < 0 || a.slot >= RSD_POOL_MAX_SLOTS) return psim_fail(s, "STOP bad slot");
            rsd_pool_query(s->pool, &st);
            if (st.slots[a.slot].in_flight > 0 && a.why != RSD_POOL_WHY_SHUTDOWN)
                return psim_fail(s, "STOP for a slot with in-flight > 0");
            if (st.slots[a.slot].pinned && a.why != RSD_POOL_WHY_LOAD_FAILED &&
                a.why != RSD_POOL_WHY_UNLOAD && a.why != RSD_POOL_WHY_SHUTDOWN)
                return psim_fail(s, "STOP for a pinned slot");
            if (a.why != RSD_POOL_WHY_LOAD_FAILED && a.why != RSD_POOL_WHY_SHUTDOWN) {
                for (i = 0; i < s->nreq; i++)
                    if (s->req[i].state == PSIM_RUN && s->req[i].slot == a.slot)
                        return psim_fail(s, "STOP while the host still runs a request there");
            }
            if (s->proc_state[a.slot] == 0) return psim_fail(s, "STOP for a slot never spawned");
            s->proc_state[a.slot] = 3;
            s->stops++;
            break;
        case RSD_POOL_ACTION_GRANT:
            i = psim_find(s, a.req);
            if (i < 0 || s->req[i].state != PSIM_WAIT) return psim_fail(s, "GRANT for unknown request");
            if (s->proc_state[a.slot] != 2) return psim_fail(s, "GRANT into a slot not ready");
            rsd_pool_query(s->pool, &st);
            if (s->req[i].excl && st.slots[a.slot].in_flight != 1)
                return psim_fail(s, "exclusive GRANT beside other requests");
            s->req[i].state = PSIM_RUN;
            s->req[i].slot = a.slot;
            s->granted++;
            break;
        case RSD_POOL_ACTION_FAIL:
            i = psim_find(s, a.req);
            if (i < 0) return psim_fail(s, "FAIL for unknown request");
            if (a.result >= 0) return psim_fail(s, "FAIL without a reason");
            s->req[i].state = PSIM_FREE;
            s->failed++;
            break;
        default: return psim_fail(s, "bad action kind");
        }
    }
    return 0;
}

/* Invariants that hold after every operation. */
static int psim_check(psim *s, int max_slots, uint64_t budget) {
    rsd_pool_info st;
    uint64_t bytes = 0;
    int i, live = 0, waiting = 0, running = 0, per_slot[RSD_POOL_MAX_SLOTS];
    rsd_pool_query(s->pool, &st);
    memset(per_slot, 0, sizeof per_slot);
    for (i = 0; i < RSD_POOL_MAX_SLOTS; i++) {
        bytes += st.slots[i].reserve_bytes;
        if (st.slots[i].state == RSD_POOL_SLOT_STARTING || st.slots[i].state == RSD_POOL_SLOT_READY ||
            st.slots[i].state == RSD_POOL_SLOT_DRAINING) live++;
        if (st.slots[i].state == RSD_POOL_SLOT_EMPTY && (st.slots[i].in_flight || st.slots[i].reserve_bytes))
            return psim_fail(s, "empty slot holds work or bytes");
    }
    if ((s->overlap ? st.live_slots : st.occupied_slots) > max_slots)
        return psim_fail(s, "more slots than max");
    if (bytes != st.reserved_bytes) return psim_fail(s, "reserved bytes disagree");
    if (budget && bytes > budget) return psim_fail(s, "over the byte budget");
    if (rsd_pool_next_deadline(s->pool) == 0) return psim_fail(s, "deadline 0 after every action was pulled");
    for (i = 0; i < s->nreq; i++) {
        if (s->req[i].state == PSIM_WAIT) waiting++;
        if (s->req[i].state == PSIM_RUN) { running++; per_slot[s->req[i].slot]++; }
    }
    for (i = 0; i < s->nreq; i++) /* an exclusive request runs alone */
        if (s->req[i].state == PSIM_RUN && s->req[i].excl && per_slot[s->req[i].slot] != 1)
            return psim_fail(s, "exclusive request not alone on its process");
    /* waiting+running in the pool includes grants not yet pulled: pump first */
    if ((int)st.waiting != waiting) return psim_fail(s, "waiting count disagrees");
    if ((int)st.running != running) return psim_fail(s, "running count disagrees");
    for (i = 0; i < RSD_POOL_MAX_SLOTS; i++)
        if ((int)st.slots[i].in_flight != per_slot[i]) return psim_fail(s, "in-flight disagrees");
    for (i = 0; i < s->nmodels; i++) {
        rsd_pool_model_info mi;
        int k;
        bool excl = false; /* an exclusive request, waiting or running, holds the queue */
        for (k = 0; k < s->nreq; k++)
            excl |= s->req[k].state != PSIM_FREE && s->req[k].model == i && s->req[k].excl;
        rsd_pool_query_model(s->pool, i, &mi);
        if (excl) continue;
        if (mi.waiting && mi.state == RSD_POOL_SLOT_READY && mi.max_in_flight == 0)
            return psim_fail(s, "waiter behind a ready model with room");
        if (mi.waiting && mi.state == RSD_POOL_SLOT_READY && mi.running < mi.max_in_flight)
            return psim_fail(s, "waiter behind a ready model with room");
    }
    (void)live;
    return 0;
}

/* One operation decoded from (op, arg). Returns <0 on an invariant failure. An
   operation that finds nothing to do makes no pool call; the pool is then as the
   last check left it, so it is not pumped and checked again. */
static int psim_op(psim *s, unsigned op, unsigned arg, int max_slots, uint64_t budget) {
    int i, r, slot;
    bool called = true;
    switch (op % 8) {
    case 0: case 1: /* acquire */
        for (i = 0; i < s->nreq && s->req[i].state != PSIM_FREE; i++) {}
        if (i == PSIM_MAX_REQ) { called = false; break; }
        s->req[i].excl = (arg & 0xF000) == 0xF000; /* rare: an exclusive request */
        r = rsd_pool_acquire_ex(s->pool, (int)(arg % (unsigned)s->nmodels),
                                s->req[i].excl ? RSD_POOL_ACQUIRE_EXCLUSIVE : 0, s->now, NULL,
                                &s->req[i].h, &slot);
        if (r == RSD_OK) {
            s->req[i].state = PSIM_RUN; s->req[i].slot = slot; s->granted++;
            if (s->proc_state[slot] != 2) return psim_fail(s, "immediate grant into a slot not ready");
        } else if (r == RSD_PENDING) {
            s->req[i].state = PSIM_WAIT;
        } else if (r == RSD_ERR_POOL_BACKOFF) { /* only for a model not resident, backing off */
            rsd_pool_model_info mi;
            if (rsd_pool_query_model(s->pool, (int)(arg % (unsigned)s->nmodels), &mi) != RSD_OK ||
                mi.slot >= 0 || mi.retry_at_ms <= s->now || mi.start_failures == 0)
                return psim_fail(s, "acquire: backoff for a model that is not backing off");
        } else if (r != RSD_ERR_POOL_NO_FIT && r != RSD_ERR_POOL_QUEUE_FULL && r != RSD_ERR_POOL_PINNED &&
                   r != RSD_ERR_CAPACITY && r != RSD_ERR_POOL_STOPPED) {
            return psim_fail(s, "acquire: unexpected error");
        }
        s->req[i].model = (int)(arg % (unsigned)s->nmodels);
        if (i == s->nreq && s->req[i].state != PSIM_FREE) s->nreq++;
        break;
    case 2: case 3: /* release a running request (arg picks which) */
        called = false;
        for (i = 0; i < s->nreq; i++) {
            int k = (int)((arg + (unsigned)i) % (unsigned)s->nreq);
            if (s->req[k].state == PSIM_RUN) {
                if (rsd_pool_release(s->pool, s->req[k].h, s->now) != RSD_OK) return psim_fail(s, "release failed");
                s->req[k].state = PSIM_FREE; s->released++; called = true;
                break;
            }
        }
        break;
    case 4: /* host finishes a process transition: start ok/fail, or exit after STOP, or crash */
        called = false;
        for (i = 0; i < RSD_POOL_MAX_SLOTS; i++) {
            int k = (int)((arg + (unsigned)i) % RSD_POOL_MAX_SLOTS);
            if (s->proc_state[k] == 1) {
                bool ok = (arg & 0x30) != 0x30;
                if (rsd_pool_on_started(s->pool, s->proc[k], ok, s->now) != RSD_OK) return psim_fail(s, "on_started");
                s->proc_state[k] = ok ? 2 : 1; called = true;
                break;
            }
            if (s->proc_state[k] == 3) {
                if (rsd_pool_on_exited(s->pool, s->proc[k], s->now) != RSD_OK) return psim_fail(s, "on_exited");
                s->proc_state[k] = 0; called = true;
                break;
            }
        }
        break;
    case 5: /* time passes, timers run */
        s->now += arg % 4000u;
        i = rsd_pool_step(s->pool, s->now);
        if (i < 0 || (i > 0 && rsd_pool_next_deadline(s->pool) != 0)) return psim_fail(s, "step count");
        break;
    case 6: /* cancel a waiting or running request */
        called = false;
        for (i = 0; i < s->nreq; i++) {
            int k = (int)((arg + (unsigned)i) % (unsigned)s->nreq);
            if (s->req[k].state == PSIM_WAIT || (s->req[k].state == PSIM_RUN && (arg & 1))) {
                if (rsd_pool_cancel(s->pool, s->req[k].h, s->now) != RSD_OK) return psim_fail(s, "cancel failed");
                s->req[k].state = PSIM_FREE; s->cancelled++; called = true;
                break;
            }
        }
        break;
    case 7: /* rare: crash a ready process (arg & 0xF0 == 0xF0), else a step */
        if ((arg & 0xF0) == 0xF0) {
            int k = (int)(arg % RSD_POOL_MAX_SLOTS);
            called = s->proc_state[k] == 2;
            if (called) {
                if (rsd_pool_on_exited(s->pool, s->proc[k], s->now) != RSD_OK) return psim_fail(s, "crash exit");
                s->proc_state[k] = 0;
                for (i = 0; i < s->nreq; i++) /* the host's proxies fail; it releases them */
                    if (s->req[i].state == PSIM_RUN && s->req[i].slot == k) {
                        if (rsd_pool_release(s->pool, s->req[i].h, s->now) != RSD_OK) return psim_fail(s, "orphan release");
                        s->req[i].state = PSIM_FREE;
                    }
            }
        } else {
            (void)rsd_pool_step(s->pool, s->now);
        }
        break;
    }
    if (!called) return 0;
    if (psim_pump(s) < 0) return -1;
    return psim_check(s, max_slots, budget);
}

/* Take (take = true) or give back a lease; arg picks bytes, ttl, restore, which. */
static int psim_lease(psim *s, bool take, unsigned arg) {
    int i = (int)(arg % RSD_POOL_MAX_LEASES), r;
    if (take) {
        rsd_pool_lease_desc d;
        memset(&d, 0, sizeof d);
        d.bytes = (uint64_t)(1 + (arg >> 3) % 12) << 30;
        d.ttl_ms = ((arg >> 7) % 4) * 500u;
        d.restore = (arg & 0x800) != 0;
        if (s->lease[i].id) { /* what the release starts is pulled before the next call */
            (void)rsd_pool_lease_return(s->pool, s->lease[i], s->now);
            s->lease[i].id = 0;
            if (psim_pump(s) < 0) return -1;
        }
        r = rsd_pool_lease_take(s->pool, &d, s->now, &s->lease[i]);
        if (r < 0 && s->lease[i].id) return psim_fail(s, "declined lease with a handle");
        if (r < 0 && r != RSD_ERR_POOL_NO_FIT && r != RSD_ERR_CAPACITY && r != RSD_ERR_POOL_STOPPED)
            return psim_fail(s, "lease: unexpected error");
    } else if (s->lease[i].id) {
        r = rsd_pool_lease_return(s->pool, s->lease[i], s->now);
        if (r != RSD_OK && r != RSD_ERR_POOL_STALE) return psim_fail(s, "lease release");
        s->lease[i].id = 0;
    }
    return 0;
}

/* Drive to quiescence: release everything, finish every start/stop, step time forward.
   Afterwards nothing may be waiting or running: every request was GRANTed or FAILed. */
static int psim_drain(psim *s, int max_slots, uint64_t budget) {
    int round, i;
    for (i = 0; i < RSD_POOL_MAX_LEASES; i++) /* leases hold starts: give them back */
        if (s->lease[i].id) (void)rsd_pool_lease_return(s->pool, s->lease[i], s->now);
    for (round = 0; round < 10000; round++) {
        bool any = false;
        rsd_pool_info st;
        for (i = 0; i < s->nreq; i++)
            if (s->req[i].state == PSIM_RUN) {
                if (rsd_pool_release(s->pool, s->req[i].h, s->now) != RSD_OK) return psim_fail(s, "drain release");
                s->req[i].state = PSIM_FREE; s->released++; any = true;
            }
        for (i = 0; i < RSD_POOL_MAX_SLOTS; i++) {
            if (s->proc_state[i] == 1) {
                if (rsd_pool_on_started(s->pool, s->proc[i], true, s->now) != RSD_OK) return psim_fail(s, "drain start");
                s->proc_state[i] = 2; any = true;
            } else if (s->proc_state[i] == 3) {
                if (rsd_pool_on_exited(s->pool, s->proc[i], s->now) != RSD_OK) return psim_fail(s, "drain exit");
                s->proc_state[i] = 0; any = true;
            }
        }
        s->now += 1000;
        (void)rsd_pool_step(s->pool, s->now);
        if (psim_pump(s) < 0 || psim_check(s, max_slots, budget) < 0) return -1;
        rsd_pool_query(s->pool, &st);
        if (!any && st.waiting == 0 && st.running == 0 && st.preloads == 0) {
            for (i = 0; i < s->nreq; i++)
                if (s->req[i].state != PSIM_FREE) return psim_fail(s, "request neither granted nor failed");
            return 0;
        }
    }
    return psim_fail(s, "did not quiesce");
}
#endif
