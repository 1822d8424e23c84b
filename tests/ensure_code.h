/* ensure_code.h -- rsd_ensurer_step read the way most ensure tests want it: RSD_PENDING
   while the ensure runs, then (once) the code it ended with, pulled with
   rsd_ensurer_next_event; and a begun ensure run to its end that way. Include after
   residency_http.h. */
#ifndef RSD_TESTS_ENSURE_CODE_H
#define RSD_TESTS_ENSURE_CODE_H

static inline int ensure_step_code(rsd_ensurer *e, uint64_t now) {
    rsd_ensure_result res;
    int n = rsd_ensurer_step(e, now);
    if (n < 0) return n;
    return rsd_ensurer_next_event(e, &res) ? res.result : RSD_PENDING;
}

/* Steps what e has begun to its end (polling its sockets between steps, up to its next
   deadline, 1 s at most): the code it ended with, its result in res. */
static inline int ensure_to_end(rsd_ensurer *e, rsd_ensure_result *res) {
    int rc;
    while ((rc = ensure_step_code(e, rsd_now_ms())) == RSD_PENDING) {
        rsd_pollfd fds[8];
        int n = rsd_ensurer_pollfds(e, fds, 8);
        uint64_t dl = rsd_ensurer_next_deadline(e), now = rsd_now_ms();
        int t = dl == RSD_NO_DEADLINE ? 1000 : dl > now ? (int)(dl - now) : 0;
        (void)rsd_poll(fds, n > 8 ? 8 : n, t > 1000 ? 1000 : t);
    }
    rsd_ensurer_query(e, res);
    return rc;
}
#endif
