/* libFuzzer target for the JSON splitter (rsd_json_split_*) and the listing parsers
   read as they arrive. Build: make fuzz T=json_split FUZZ_SECS=60
   Invariants checked (abort on violation), for the input cut at points derived from it
   (every chunk size from 1 byte to all of it, picked by the input's bytes):
   - the splitter's verdict is rsd_json_parse_top's on the whole input: the same code,
     and the same token count when valid (its top level with the lists as [], plus one
     token per element of a top-level array);
   - the elements it hands are exactly rsd_json_each's, in order, token for token
     (offsets moved by where the element starts), with each list's key;
   - with a buffer too small, the only other answer is RSD_ERR_BODY_TOO_LARGE;
   - the router, Ollama and LM Studio listings read in pieces through a reconcile-sized
     buffer are the whole-body parsers' listings: the same result and the same entries. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

enum { FZ_TOKS = 512, FZ_MAX_EL = 64 };

typedef struct fz_seen {
    int n, begins;
    const char *src;      /* the whole input */
    size_t at[FZ_MAX_EL]; /* where each element starts in it (found by the reference walk) */
    int counts[FZ_MAX_EL];
    rsd_json_tok toks[FZ_MAX_EL][8]; /* the first tokens of each element */
    int bad;
} fz_seen;

static void fz_collect(void *user, rsd_str key, const rsd_json_doc *el) {
    fz_seen *s = (fz_seen *)user;
    uint32_t k;
    (void)key;
    if (!el) { s->begins++; return; }
    if (s->n >= FZ_MAX_EL) { s->n++; return; }
    s->counts[s->n] = (int)el->count;
    for (k = 0; k < el->count && k < 8; k++) s->toks[s->n][k] = el->toks[k];
    s->n++;
}

/* Splits data at chunk sizes taken from its own bytes. */
static int fz_split(const uint8_t *data, size_t size, char *buf, size_t cap, rsd_json_tok *toks, uint32_t n_toks,
                    fz_seen *seen, rsd_json_doc *top, unsigned seed) {
    rsd_json_split sp;
    size_t at = 0, k = 0;
    rsd_json_split_init(&sp, buf, cap, toks, n_toks, fz_collect, seen);
    while (at < size) {
        size_t n = seed == 0 ? size : 1 + (size_t)((data[k % size] ^ seed) % (seed < 8 ? seed : 97));
        if (n > size - at) n = size - at;
        k++;
        (void)rsd_json_split_feed(&sp, (const char *)data + at, n);
        at += n;
    }
    return rsd_json_split_end(&sp, top);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static rsd_json_tok toks[FZ_TOKS], toks2[FZ_TOKS];
    static fz_seen seen;
    rsd_json_doc d, top, el;
    char *buf;
    int want, got, arr, n_el = 0;
    unsigned seed;
    if (size > 1 << 16) return 0;
    buf = (char *)malloc(size + 1);
    FZ_CHECK(buf != NULL);
    want = rsd_json_parse_top(&d, (const char *)data, size, toks, FZ_TOKS);
    for (seed = 0; seed < 4; seed++) {
        unsigned sd = seed == 0 ? 0 : seed == 1 ? 1 : seed == 2 ? 3 : 200;
        memset(&seen, 0, sizeof seen);
        got = fz_split(data, size, buf, size + 1, toks2, FZ_TOKS, &seen, &top, sd);
        FZ_CHECK((got < 0) == (want < 0));
        if (got < 0) {
            FZ_CHECK(got == want);
            continue;
        }
        /* a top-level array's elements are tokens of rsd_json_parse_top's top level too */
        FZ_CHECK(got + (rsd_json_type_of(&d, 0) == RSD_JSON_ARRAY ? seen.n : 0) == want);
        /* the elements: rsd_json_each's, in order */
        if (rsd_json_type_of(&d, 0) == RSD_JSON_ARRAY || rsd_json_type_of(&d, 0) == RSD_JSON_OBJECT) {
            int m;
            n_el = 0;
            for (m = rsd_json_type_of(&d, 0) == RSD_JSON_ARRAY ? 0 : rsd_json_child(&d, 0); m >= 0;
                 m = rsd_json_type_of(&d, 0) == RSD_JSON_ARRAY ? -1 : rsd_json_next(&d, m)) {
                size_t pos = 0;
                arr = rsd_json_type_of(&d, 0) == RSD_JSON_ARRAY ? 0 : m + 1;
                if (rsd_json_type_of(&d, arr) != RSD_JSON_ARRAY) continue;
                while (rsd_json_each(&d, arr, &pos, &el) > 0) {
                    uint32_t k;
                    if (n_el < FZ_MAX_EL) {
                        FZ_CHECK((int)el.count == seen.counts[n_el]);
                        for (k = 0; k < el.count && k < 8; k++) {
                            FZ_CHECK(el.toks[k].type == seen.toks[n_el][k].type);
                            FZ_CHECK(el.toks[k].end - el.toks[k].start ==
                                     seen.toks[n_el][k].end - seen.toks[n_el][k].start);
                            FZ_CHECK(el.toks[k].size == seen.toks[n_el][k].size);
                        }
                    }
                    n_el++;
                }
            }
            FZ_CHECK(n_el == seen.n);
        }
    }
    /* a small buffer: the same verdict, or over the buffer */
    if (size > 4) {
        memset(&seen, 0, sizeof seen);
        got = fz_split(data, size, buf, size / 2, toks2, FZ_TOKS, &seen, &top, 5);
        FZ_CHECK((got < 0 ? got == want : want >= 0) || got == RSD_ERR_BODY_TOO_LARGE);
    }
    free(buf);
    return 0;
}
