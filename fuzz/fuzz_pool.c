/* fuzz_pool: bytes -> a pool configuration and an operation sequence (acquire, release,
   cancel, start ok/failed, exit, crash, time, configure, unload, pin, measured VRAM,
   preload, stop, exclusive acquires, byte leases taken and given back). After every operation the invariants of tests/pool_sim.h must hold: never more
   live processes than max (stopping ones may run beside them: desc.overlap), never over
   the byte budget, no STOP for a busy or pinned slot (except stop/unload), no start
   that breaks a lease, an exclusive request alone on its process, counts consistent with the host's view; at the end, driven to
   quiescence, every request was GRANTed or FAILed. A violation traps.

   Layout: byte 0 max_slots, 1 budget (GiB, 0 = none), 2 model count, 3 max_wait, then
   per model 4 bytes (reserve GiB, ttl, max_in_flight, flags), then 3-byte operations
   (op, arg lo, arg hi). Each operation costs a full check, so inputs are capped at
   1024 bytes (about 330 operations, fuzz/pool.options); the checker (tests/pool_sim.h)
   is left out of the coverage map. */
#define RESIDENCY_IMPLEMENTATION
#include "residency.h"
#include <stddef.h>
#include "fuzz/fuzz_oracle.h"
FZ_ORACLE_BEGIN
#include "tests/pool_sim.h"
FZ_ORACLE_END

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

#define FZ_GiB ((uint64_t)1 << 30)

static void fz_die(const psim *s) {
    fprintf(stderr, "fuzz_pool invariant: %s\n", s->err);
    __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    static psim s;
    static const char *const ids[8] = {"m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"};
    rsd_pool_model_desc m[8];
    rsd_pool_desc desc;
    size_t pos = 4;
    int nm, i, max_slots, cur_max;
    uint64_t budget, measured = 0;
    if (n < 4) return 0;
    { /* zero s, but of its 4096 request entries only those the last run could have
         touched (0..nreq: the next acquire reads entry nreq before writing it) */
        size_t used = (size_t)s.nreq + 1 < PSIM_MAX_REQ ? (size_t)s.nreq + 1 : PSIM_MAX_REQ;
        memset(&s, 0, offsetof(psim, req));
        memset(s.req, 0, used * sizeof s.req[0]);
        memset(&s.nreq, 0, sizeof s - offsetof(psim, nreq));
    }
    memset(&desc, 0, sizeof desc);
    memset(m, 0, sizeof m);
    max_slots = 1 + d[0] % 4;
    budget = (uint64_t)(d[1] % 24) * FZ_GiB;
    nm = 1 + d[2] % 8;
    desc.max_slots = max_slots;
    desc.vram_budget_bytes = budget;
    desc.max_wait_ms = d[3] & 0x80 ? RSD_POOL_WAIT_FOREVER : (uint32_t)(d[3] & 0x7F) * 100u;
    desc.max_requests = 64;
    desc.max_waiting = 48;
    desc.event_log = 16;
    for (i = 0; i < nm; i++) {
        const uint8_t *b = pos + 4 <= n ? d + pos : NULL;
        m[i].id = ids[i];
        if (b) {
            m[i].reserve_bytes = (uint64_t)(b[0] % 16) * FZ_GiB;
            m[i].ttl_ms = (uint32_t)b[1] * 50u;
            m[i].max_in_flight = b[2] % 4;
            m[i].pinned = (b[3] & 3) == 3;
            pos += 4;
        }
    }
    desc.models = m;
    desc.num_models = nm;
    s.pool = rsd_pool_create(&desc);
    if (!s.pool) __builtin_trap();
    s.nmodels = nm;
    cur_max = max_slots;
    s.max_now = max_slots;
    s.overlap = true; /* the default desc.overlap: starts beside stops where the bytes hold */
    s.lease_budget = budget;
    for (; pos + 3 <= n && !s.err[0]; pos += 3) {
        unsigned op = d[pos], arg = (unsigned)d[pos + 1] | ((unsigned)d[pos + 2] << 8);
        if (op >= 0xF0) { /* control operations */
            switch (op & 0x7) {
            case 0: /* configure: occupancy may exceed a lowered max only by busy slots,
                       and no SPAWN may happen above it (checked in psim_pump) */
                s.max_now = 1 + (int)(arg % 4);
                if (s.max_now > cur_max) cur_max = s.max_now;
                rsd_pool_configure(s.pool, s.max_now, s.now);
                break;
            case 1:
                rsd_pool_unload(s.pool, (int)(arg % (unsigned)(nm + 1)) - 1,
                                arg & 0x100 ? RSD_POOL_UNLOAD_DRAIN : 0, s.now);
                break;
            case 2: rsd_pool_set_pinned(s.pool, (int)(arg % (unsigned)nm), (arg & 0x100) != 0, s.now);
                break;
            case 3: measured = (uint64_t)(arg % 32) * FZ_GiB;
                rsd_pool_set_vram(s.pool, measured, (uint64_t)((arg >> 5) % 8) * FZ_GiB, s.now);
                budget = 0; /* the measured figure may shrink below what is reserved */
                s.lease_budget = 0;
                break;
            case 4:
                if ((arg & 0xFF) == 0xAB) rsd_pool_stop(s.pool, s.now);
                break;
            case 5: (void)rsd_pool_preload(s.pool, (int)(arg % (unsigned)nm), s.now); break;
            case 6: if (psim_lease(&s, (arg & 0x4000) == 0, arg) < 0) fz_die(&s); break;
            default: (void)rsd_pool_step(s.pool, s.now); break;
            }
            if (psim_pump(&s) < 0 || psim_check(&s, cur_max, budget) < 0) fz_die(&s);
            continue;
        }
        if (psim_op(&s, op, arg, cur_max, budget) < 0) fz_die(&s);
    }
    /* A request that fits the budget but not beside foreign VRAM use waits for the
       host's next measurement; model that measurement (foreign use gone) before the
       quiescence check. */
    if (!s.err[0]) rsd_pool_set_vram(s.pool, measured, 0, s.now);
    if (!s.err[0] && (psim_pump(&s) < 0 || psim_drain(&s, cur_max, budget) < 0)) fz_die(&s);
    rsd_pool_destroy(s.pool);
    return 0;
}
