/* counting.h -- the tests' one counting allocator: counting(&c) zeroes c and returns an
   rsd_allocator over it. It counts bytes live, their peak, bytes asked in all, the first
   and the biggest request, calls (failed ones too), allocs (those that gave memory),
   frees and blocks live; fail_at = N makes the Nth
   call fail (failed says it did), fail_all every call. Each block carries its size in a
   16-byte prefix, so ASan still sees a byte past the caller's n. */
#ifndef RSD_TEST_COUNTING_H
#define RSD_TEST_COUNTING_H
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct counted {
    size_t live, peak, asked, first, biggest;
    long calls, allocs, frees, blocks, fail_at;
    bool fail_all, failed;
} counted;

static void *counted_alloc(size_t n, void *u) {
    counted *c = (counted *)u;
    unsigned char *p;
    c->calls++;
    if (c->fail_all || (c->fail_at && c->calls == c->fail_at)) { c->failed = true; return NULL; }
    if (!(p = (unsigned char *)malloc(n + 16))) return NULL;
    memcpy(p, &n, sizeof n);
    if (c->calls == 1) c->first = n;
    if (n > c->biggest) c->biggest = n;
    c->asked += n;
    c->live += n;
    if (c->live > c->peak) c->peak = c->live;
    c->allocs++;
    c->blocks++;
    return p + 16;
}
static void counted_free(void *q, void *u) {
    counted *c = (counted *)u;
    unsigned char *p = (unsigned char *)q - 16;
    size_t n;
    memcpy(&n, p, sizeof n);
    c->live -= n;
    c->frees++;
    c->blocks--;
    free(p);
}
static rsd_allocator counting(counted *c) {
    rsd_allocator a;
    memset(c, 0, sizeof *c);
    a.alloc_fn = counted_alloc;
    a.free_fn = counted_free;
    a.user = c;
    return a;
}
#endif
