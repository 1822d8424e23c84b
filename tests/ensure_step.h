/* ensure_step.h -- loopback tests drive an rsd_ensurer through its non-blocking API one
   step at a time, so that two ensurers can be interleaved deterministically (one holds
   the lock while the other waits for it). Include after residency_http.h. */
#ifndef RSD_TESTS_ENSURE_STEP_H
#define RSD_TESTS_ENSURE_STEP_H
#include "ensure_code.h"

/* Steps e on the real clock (poll on its sockets, up to its next deadline) until it is
   done or until(e) holds; bounded by 60 s. Returns the last step's code. */
static int drive(rsd_ensurer *e, bool (*until)(rsd_ensurer *)) {
    uint64_t end = rsd_now_ms() + 60000;
    int rc = RSD_PENDING;
    while (rsd_now_ms() < end) {
        rsd_pollfd fds[16];
        uint64_t now = rsd_now_ms(), dl;
        int n, timeout;
        rc = ensure_step_code(e, now);
        if (until && until(e)) return rc;
        if (rc != RSD_PENDING) return rc;
        n = rsd_ensurer_pollfds(e, fds, 16);
        dl = rsd_ensurer_next_deadline(e);
        now = rsd_now_ms();
        timeout = dl == RSD_NO_DEADLINE ? 50 : dl <= now ? 0 : dl - now > 50 ? 50 : (int)(dl - now);
        if (timeout > 0) (void)rsd_poll(fds, n > 16 ? 16 : n, timeout);
    }
    return RSD_ERR_TIMEOUT;
}

/* White-box conditions (the tests instantiate the implementation). */
static bool holds_lock(rsd_ensurer *e) { return rsd_state_lock_held(&e->lk) && e->waiting != RSDI_EN_WAIT_LOCK; }
static bool in_lock_wait(rsd_ensurer *e) { return e->waiting == RSDI_EN_WAIT_LOCK; }
#endif
