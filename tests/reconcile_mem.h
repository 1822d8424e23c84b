/* reconcile_mem.h -- a reconcile in the heap for tests (test helper, not part of the
   library; include it after residency.h). The reconcile is opaque: it lives in
   rsd_reconcile_footprint(lim) bytes of the caller's memory and owns nothing else.
     static rsd_reconcile *r;  rc_init(&r, lim);  ...  rc_free(&r);
   rc_init frees what *r held, and returns rsd_reconcile_init's result (RSD_ERR_ARG for
   limits out of range, where the footprint is 0). */
#ifndef RSD_TEST_RECONCILE_MEM_H
#define RSD_TEST_RECONCILE_MEM_H
#include <stdlib.h>

static inline void rc_free(rsd_reconcile **r) {
    free(*r);
    *r = NULL;
}

static inline int rc_init(rsd_reconcile **r, const rsd_reconcile_limits *lim) {
    size_t n = rsd_reconcile_footprint(lim);
    rc_free(r);
    if (!(*r = (rsd_reconcile *)malloc(n ? n : sizeof(uint64_t)))) return RSD_ERR_NOMEM;
    return rsd_reconcile_init(*r, n, lim);
}
#endif
