/* The harness shared by fuzz_http_request.c and fuzz_http_response.c. Invariants:
   views lie inside the input; a prefix of the input never disagrees with the whole
   (PENDING, or the same result, and a complete head is found at the same length);
   byte-at-a-time with last_len stops at the first prefix whose full parse is not
   PENDING, with the same result.
   The including file defines, then includes this header:
     FZ_HEAD                 the head type (rsd_http_request_head / _response_head)
     FZ_PARSE                the parser (rsd_http_parse_request / _response)
     fz_check_kind(h, b, c)  checks specific to the kind, on a complete head
     FZ_SAME(a, b)           a kind-specific field two complete parses must agree on */
#ifndef FZ_HTTP_HEAD_FUZZ_H
#define FZ_HTTP_HEAD_FUZZ_H
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

static bool fz_inside(rsd_str v, const char *b, size_t n) {
    return v.len == 0 || (v.ptr >= b && v.ptr + v.len <= b + n);
}

static void fz_check_kind(const FZ_HEAD *h, const char *b, size_t c);

static void fz_check_head(const FZ_HEAD *h, const char *b, size_t n, size_t c) {
    size_t i;
    FZ_CHECK(c > 0 && c <= n);
    FZ_CHECK(h->minor_version == 0 || h->minor_version == 1);
    fz_check_kind(h, b, c);
    FZ_CHECK(h->num_headers <= RSD_HTTP_MAX_HEADERS);
    for (i = 0; i < h->num_headers; i++) {
        FZ_CHECK(h->headers[i].name.len > 0);
        FZ_CHECK(fz_inside(h->headers[i].name, b, c));
        FZ_CHECK(fz_inside(h->headers[i].value, b, c));
    }
    FZ_CHECK(h->framing.content_length >= -1);
    FZ_CHECK(!(h->framing.chunked && h->framing.content_length != -1));
}

/* Parses a private exact-size copy so ASan sees any over-read. */
static int fz_parse(const uint8_t *d, size_t n, size_t last_len, FZ_HEAD *h, size_t *c) {
    char *b = (char *)malloc(n ? n : 1);
    int r;
    if (!b) return -999;
    if (n) memcpy(b, d, n);
    r = FZ_PARSE(b, n, last_len, h, c);
    if (r == RSD_OK) fz_check_head(h, b, n, *c);
    free(b);
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FZ_HEAD h, h2;
    size_t c = 0, c2 = 0, i, lim = size < 1024 ? size : 1024;
    int r, r2;
    char *grow;
    r = fz_parse(data, size, 0, &h, &c);
    FZ_CHECK(r == RSD_OK || r == RSD_PENDING || r == RSD_ERR_PROTOCOL || r == RSD_ERR_HEADERS_TOO_LARGE);
    for (i = 0; i < lim; i++) {
        r2 = fz_parse(data, i, 0, &h2, &c2);
        if (r == RSD_OK && i < c) FZ_CHECK(r2 == RSD_PENDING);
        else if (r == RSD_OK) FZ_CHECK(r2 == RSD_OK && c2 == c && h2.num_headers == h.num_headers);
        else FZ_CHECK(r2 == RSD_PENDING || r2 == r);
    }
    /* byte at a time into one growing buffer, with last_len */
    grow = (char *)malloc(size ? size : 1);
    if (!grow) return 0;
    if (size) memcpy(grow, data, size);
    r2 = RSD_PENDING;
    for (i = 1; i <= size && r2 == RSD_PENDING; i++) r2 = FZ_PARSE(grow, i, i - 1, &h2, &c2);
    if (r2 != RSD_PENDING) {
        size_t at = i - 1;
        FZ_HEAD h3;
        size_t c3 = 0;
        int r3 = fz_parse(data, at, 0, &h3, &c3);
        FZ_CHECK(r3 == r2);
        if (r2 == RSD_OK) FZ_CHECK(c3 == c2 && c2 == at);
    }
    if (r == RSD_OK) FZ_CHECK(r2 == RSD_OK && c2 == c && FZ_SAME(h2, h));
    free(grow);
    return 0;
}
#endif
