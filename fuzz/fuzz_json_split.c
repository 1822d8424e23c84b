/* libFuzzer target for the JSON splitter (rsd_json_split_*) and the listing parsers
   read as they arrive. Build: make fuzz T=json_split FUZZ_SECS=60
   Invariants checked (abort on violation), for the input cut at points derived from it
   (every chunk size from 1 byte to all of it, picked by the input's bytes):
   - the splitter's verdict is rsd_json_parse_top's on the whole input: the same code,
     and the same token count when valid (its top level with the lists as [], plus one
     token per element of a top-level array), the same err.offset when not (but for
     RSD_ERR_JSON_TOKENS: the splitter's tokens run out elsewhere);
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

/* data read in pieces through buf by a listing's reader (fn, end): its result. */
static int fz_read(const uint8_t *data, size_t size, char *buf, size_t cap, rsd_json_tok *toks, unsigned seed,
                   rsd_json_split_fn fn, rsdi_pl_end_fn end, void *ctx) {
    rsd_json_split sp;
    rsd_json_doc top;
    size_t at = 0, k = 0;
    rsd_json_split_init(&sp, buf, cap, toks, FZ_TOKS, fn, ctx);
    while (at < size) {
        size_t n = 1 + (size_t)((data[k++ % size] ^ seed) % 61);
        if (n > size - at) n = size - at;
        (void)rsd_json_split_feed(&sp, (const char *)data + at, n);
        at += n;
    }
    return end(ctx, rsd_json_split_end(&sp, &top), &top);
}

static void fz_same_listing(const rsd_listing *a, const rsd_listing *b) {
    int i;
    FZ_CHECK(a->n == b->n && a->n_seen == b->n_seen && a->n_skipped == b->n_skipped);
    FZ_CHECK(a->truncated == b->truncated && a->has_states == b->has_states && a->arena_used == b->arena_used);
    FZ_CHECK(memcmp(a->arena, b->arena, a->arena_used) == 0);
    for (i = 0; i < a->n; i++) {
        FZ_CHECK(rsd_str_eq(a->models[i].id, b->models[i].id) && a->models[i].state == b->models[i].state);
        FZ_CHECK(a->models[i].n_aliases == b->models[i].n_aliases && a->models[i].n_tags == b->models[i].n_tags);
        FZ_CHECK(a->models[i].size_bytes == b->models[i].size_bytes && a->models[i].flags == b->models[i].flags);
        FZ_CHECK(a->models[i].context_length == b->models[i].context_length);
    }
}

/* The listing parsers, whole and read in pieces: the same answer. */
static void fz_listings(const uint8_t *data, size_t size, char *buf) {
    static rsd_json_tok toks[FZ_TOKS];
    static rsd_listed_model m1[16], m2[16];
    static char a1[4096], a2[4096];
    static rsd_lms_catalog c1, c2;
    rsd_listing l1, l2;
    int w, g, k;
    FZ_CHECK(rsd_listing_init(&l1, m1, 16, a1, sizeof a1) == RSD_OK);
    FZ_CHECK(rsd_listing_init(&l2, m2, 16, a2, sizeof a2) == RSD_OK);
    w = rsd_router_parse_models((const char *)data, size, toks, FZ_TOKS, &l1);
    rsdi_listing_reset(&l2);
    g = fz_read(data, size, buf, size + 1, toks, 7, rsdi_router_list_el, rsdi_router_list_end, &l2);
    FZ_CHECK(w == g || (w == RSD_ERR_BODY_TOO_LARGE && g >= 0)); /* whole: the top level in 2 KiB */
    if (w == g) fz_same_listing(&l1, &l2);
    w = rsd_ollama_ps_listing((const char *)data, size, toks, FZ_TOKS, &l1);
    rsdi_listing_reset(&l2);
    g = fz_read(data, size, buf, size + 1, toks, 11, rsdi_ollama_list_el, rsdi_ollama_list_end, &l2);
    FZ_CHECK(w == g || (w == RSD_ERR_BODY_TOO_LARGE && g >= 0));
    if (w == g) fz_same_listing(&l1, &l2);
    w = rsd_lms_parse_models(&c1, (const char *)data, size, toks, FZ_TOKS);
    rsdi_lms_reset(&c2);
    g = fz_read(data, size, buf, size + 1, toks, 13, rsdi_lms_list_el, rsdi_lms_list_end, &c2);
    FZ_CHECK(w == g || (w == RSD_ERR_BODY_TOO_LARGE && g >= 0));
    if (w != g) return;
    FZ_CHECK(c1.tier == c2.tier && c1.n_models == c2.n_models && c1.n_instances == c2.n_instances);
    FZ_CHECK(c1.n_entries == c2.n_entries && c1.n_dropped == c2.n_dropped && c1.truncated == c2.truncated);
    FZ_CHECK(c1.arena_used == c2.arena_used && memcmp(c1.arena, c2.arena, c1.arena_used) == 0);
    for (k = 0; k < c1.n_models; k++) FZ_CHECK(rsd_str_eq(c1.models[k].key, c2.models[k].key));
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
            if (got != RSD_ERR_JSON_TOKENS) FZ_CHECK(top.err.offset == d.err.offset);
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
    fz_listings(data, size, buf);
    /* a small buffer: the same verdict, or over the buffer */
    if (size > 4) {
        memset(&seen, 0, sizeof seen);
        got = fz_split(data, size, buf, size / 2, toks2, FZ_TOKS, &seen, &top, 5);
        FZ_CHECK((got < 0 ? got == want : want >= 0) || got == RSD_ERR_BODY_TOO_LARGE);
    }
    free(buf);
    return 0;
}
