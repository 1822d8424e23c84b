/* Fuzz rsd_http_dechunk_step. Invariants: output is never longer than the input;
   decoding in one call, byte at a time, and split at two input-derived points all
   give the same result, the same decoded bytes and the same leftover bytes; the
   leftover bytes are the input's tail, unchanged. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

typedef struct fz_out {
    int r;
    size_t out_len;   /* decoded bytes */
    size_t rest;      /* leftover bytes after the body (on RSD_OK) */
    uint64_t total;
} fz_out;

/* Decodes data in pieces ending at cuts[0..ncuts) (the last cut is size); out gets
   the concatenated decoded bytes, tail the leftover bytes. */
static fz_out fz_decode(const uint8_t *data, size_t size, const size_t *cuts, size_t ncuts,
                        char *out, char *tail) {
    rsd_http_dechunk d;
    fz_out o;
    size_t k, prev = 0;
    memset(&d, 0, sizeof d);
    memset(&o, 0, sizeof o);
    o.r = RSD_PENDING;
    for (k = 0; k < ncuts; k++) {
        size_t piece = cuts[k] - prev, l = piece;
        char *buf = (char *)malloc(piece ? piece : 1); /* exact size: ASan sees over-reads */
        if (!buf) abort();
        if (piece) memcpy(buf, data + prev, piece);
        o.r = rsd_http_dechunk_step(&d, buf, &l);
        FZ_CHECK(l <= piece);
        memcpy(out + o.out_len, buf, l);
        o.out_len += l;
        if (o.r == RSD_OK) {
            FZ_CHECK(l + d.rest <= piece);
            memcpy(tail, buf + l, d.rest);
            memcpy(tail + d.rest, data + cuts[k], size - cuts[k]);
            o.rest = d.rest + (size - cuts[k]);
            free(buf);
            break;
        }
        free(buf);
        if (o.r != RSD_PENDING) break;
        prev = cuts[k];
    }
    FZ_CHECK(o.r == RSD_OK || o.r == RSD_PENDING || o.r == RSD_ERR_PROTOCOL);
    FZ_CHECK(d.total == o.out_len);
    FZ_CHECK(o.out_len + o.rest <= size);
    if (o.r != RSD_ERR_PROTOCOL) FZ_CHECK(d.overhead + d.total + o.rest == size ||
                                           o.r == RSD_PENDING);
    o.total = d.total;
    return o;
}

static void fz_same(const fz_out *a, const char *oa, const char *ta, const fz_out *b,
                    const char *ob, const char *tb) {
    FZ_CHECK(a->r == b->r);
    FZ_CHECK(a->out_len == b->out_len);
    FZ_CHECK(memcmp(oa, ob, a->out_len) == 0);
    if (a->r == RSD_OK) {
        FZ_CHECK(a->rest == b->rest);
        FZ_CHECK(memcmp(ta, tb, a->rest) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *o1, *o2, *t1, *t2;
    size_t *cuts, i, ncuts;
    fz_out a, b;
    if (size > 65536) return 0;
    o1 = (char *)malloc(size + 1); o2 = (char *)malloc(size + 1);
    t1 = (char *)malloc(size + 1); t2 = (char *)malloc(size + 1);
    cuts = (size_t *)malloc((size + 1) * sizeof *cuts);
    if (!o1 || !o2 || !t1 || !t2 || !cuts) abort();
    /* whole */
    cuts[0] = size;
    a = fz_decode(data, size, cuts, 1, o1, t1);
    if (a.r == RSD_OK) FZ_CHECK(memcmp(t1, data + size - a.rest, a.rest) == 0);
    /* byte at a time */
    for (i = 0; i < size; i++) cuts[i] = i + 1;
    ncuts = size ? size : 1;
    if (!size) cuts[0] = 0;
    b = fz_decode(data, size, cuts, ncuts, o2, t2);
    fz_same(&a, o1, t1, &b, o2, t2);
    /* two cuts derived from the input */
    if (size >= 2) {
        size_t x = (size_t)data[0] * 7919u % size, y = (size_t)data[size - 1] * 104729u % size;
        cuts[0] = x < y ? x : y;
        cuts[1] = x < y ? y : x;
        cuts[2] = size;
        b = fz_decode(data, size, cuts, 3, o2, t2);
        fz_same(&a, o1, t1, &b, o2, t2);
    }
    free(o1); free(o2); free(t1); free(t2); free(cuts);
    return 0;
}
