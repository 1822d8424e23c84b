/* Fuzz target for the SSE line reader (rsd_sse_feed). Invariants: feeding the input whole,
   byte at a time, and split at a data-derived point yields the same event sequence; every
   call consumes at least one byte unless it returns PENDING; views stay inside the
   reader's buffers; data never exceeds cap. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

typedef struct fz_log {
    unsigned long hash;
    int events, errors;
} fz_log;

static void fz_mix(fz_log *l, const rsd_sse_event *ev, int res) {
    size_t i;
    unsigned long h = l->hash * 1099511628211ul + (unsigned long)(res + 7);
    for (i = 0; i < ev->data.len; i++) h = (h ^ (unsigned char)ev->data.ptr[i]) * 16777619ul;
    h ^= 0x9e37u;
    for (i = 0; i < ev->event.len; i++) h = (h ^ (unsigned char)ev->event.ptr[i]) * 16777619ul;
    h ^= 0x7f4au;
    for (i = 0; i < ev->id.len; i++) h = (h ^ (unsigned char)ev->id.ptr[i]) * 16777619ul;
    l->hash = h;
}

/* Feeds p[0..n) in pieces of at most `step` bytes (0 = whole). */
static fz_log fz_run(const char *p, size_t n, size_t step, char *buf, size_t cap) {
    rsd_sse_reader r;
    fz_log l;
    size_t off = 0;
    memset(&l, 0, sizeof l);
    rsd_sse_init(&r, buf, cap);
    while (off < n) {
        size_t piece = step && n - off > step ? step : n - off;
        const char *q = p + off;
        while (piece) {
            rsd_sse_event ev;
            size_t used = 0;
            int res = rsd_sse_feed(&r, q, piece, &used, &ev);
            if (used > piece) abort();
            if (res == RSD_PENDING) {
                if (used != piece) abort();
            } else if (res == RSD_OK || res == RSD_ERR_TOO_LARGE) {
                if (used == 0) abort();
                if (res == RSD_OK) {
                    if (ev.data.len > cap) abort();
                    if (ev.data.len && (ev.data.ptr < buf || ev.data.ptr + ev.data.len > buf + cap)) abort();
                    if (ev.event.len > RSD_SSE_MAX_NAME || ev.id.len > RSD_SSE_MAX_NAME) abort();
                    l.events++;
                } else {
                    l.errors++;
                }
                fz_mix(&l, &ev, res);
            } else {
                abort();
            }
            q += used;
            piece -= used;
            off += used;
        }
    }
    return l;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    char buf[64];
    fz_log a, b, c;
    size_t split;
    if (n == 0) return 0;
    split = 1 + (size_t)d[0] % 17;
    a = fz_run((const char *)d + 1, n - 1, 0, buf, sizeof buf);
    b = fz_run((const char *)d + 1, n - 1, 1, buf, sizeof buf);
    c = fz_run((const char *)d + 1, n - 1, split, buf, sizeof buf);
    if (a.hash != b.hash || a.events != b.events || a.errors != b.errors) abort();
    if (a.hash != c.hash || a.events != c.events || a.errors != c.errors) abort();
    return 0;
}
