/* ensure_code.h -- rsd_ensurer_step read the way most ensure tests want it: RSD_PENDING
   while the ensure runs, then (once) the code it ended with, pulled with
   rsd_ensurer_next_event. Include after residency_http.h. */
#ifndef RSD_TESTS_ENSURE_CODE_H
#define RSD_TESTS_ENSURE_CODE_H

static inline int ensure_step_code(rsd_ensurer *e, uint64_t now) {
    rsd_ensure_result res;
    int n = rsd_ensurer_step(e, now);
    if (n < 0) return n;
    return rsd_ensurer_next_event(e, &res) ? res.result : RSD_PENDING;
}
#endif
