/* libFuzzer target for the Ollama payload parsers (/api/ps into the neutral listing,
   replies).
   Build: make fuzz T=ollama_ps FUZZ_SECS=60
   Invariants checked (abort on violation):
   - a parse with exactly the tokens the count pass reports gives the same result
     as one with plenty; with the top level's tokens alone it is that result or
     RSD_ERR_JSON_TOKENS with nothing kept (never partial);
   - kept + skipped <= seen; at most RSD_LISTING_MAX_MODELS kept; kept + skipped ==
     seen unless truncated;
   - every kept id and alias passes the id rule (1..255 bytes, no NUL byte), lies
     inside the listing's arena and is NUL-terminated there (copied, never a view of
     the body); arena_used <= its size; every entry is LOADED;
   - the listing written back as JSON ({"model": id, "name": alias}) parses to the
     same listing (round trip);
   - every kept id normalises idempotently;
   - rsd_ollama_parse_generate reports SERVER_ERROR exactly when
     rsd_server_error_parse finds an error member on an object root. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

static rsd_listing l1, l2;
static rsd_listed_model m1[RSD_LISTING_MAX_MODELS], m2[RSD_LISTING_MAX_MODELS];
static char a1[RSD_LISTING_ARENA_BYTES], a2[RSD_LISTING_ARENA_BYTES];

static void check_id(const rsd_listing *l, rsd_str s) {
    size_t i;
    FZ_CHECK(s.len > 0 && s.len < RSD_MODEL_ID_MAX);
    FZ_CHECK(s.ptr >= l->arena && s.ptr + s.len < l->arena + l->arena_bytes);
    FZ_CHECK(s.ptr[s.len] == '\0');
    for (i = 0; i < s.len; i++) FZ_CHECK(s.ptr[i] != '\0');
}

static void check_list(const rsd_listing *l) {
    int i, k;
    FZ_CHECK(l->n >= 0 && l->n <= RSD_LISTING_MAX_MODELS);
    FZ_CHECK((uint32_t)l->n + l->n_skipped <= l->n_seen);
    if (!l->truncated) FZ_CHECK((uint32_t)l->n + l->n_skipped == l->n_seen);
    FZ_CHECK(l->arena_used <= l->arena_bytes);
    for (i = 0; i < l->n; i++) {
        const rsd_listed_model *m = &l->models[i];
        check_id(l, m->id);
        FZ_CHECK(m->n_aliases >= 0 && m->n_aliases <= 1);
        for (k = 0; k < m->n_aliases; k++) {
            check_id(l, rsd_listed_alias(m, k));
            FZ_CHECK(!rsd_str_eq(rsd_listed_alias(m, k), m->id));
        }
        FZ_CHECK(m->state == RSD_MODEL_LOADED);
        FZ_CHECK(m->has_size || m->size_bytes == 0);
        FZ_CHECK(m->has_size_vram || m->size_vram_bytes == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *s = (const char *)data;
    rsd_json_doc d;
    rsd_json_tok *toks;
    rsd_server_error e;
    rsd_ollama_reply g;
    rsd_ollama_version v;
    rsd_json_writer w;
    char *out, norm[2 * RSD_MODEL_ID_MAX], norm2[2 * RSD_MODEL_ID_MAX];
    size_t outcap;
    uint32_t cap, need;
    int r, r2, i, er, gr, k, k2;

    if (size > 1 << 16) return 0;
    if (!l1.models) { /* the listings' storage */
        FZ_CHECK(rsd_listing_init(&l1, m1, RSD_LISTING_MAX_MODELS, a1, sizeof a1) == RSD_OK);
        FZ_CHECK(rsd_listing_init(&l2, m2, RSD_LISTING_MAX_MODELS, a2, sizeof a2) == RSD_OK);
    }
    cap = (uint32_t)size + 2;
    toks = (rsd_json_tok *)malloc(cap * sizeof *toks);
    r = rsd_ollama_ps_listing(s, size, toks, cap, &l1);
    need = rsd_json_parse(&d, s, size, NULL, 0) > 0 ? d.count : 0;
    if (need > 0) {
        r2 = rsd_ollama_ps_listing(s, size, toks, need, &l2);
        FZ_CHECK(r2 == r && l2.n == l1.n);
        /* the list is read entry by entry: tokens for the top level alone read no entry, and
           refuse rather than keep part of the list */
        need = (uint32_t)rsd_json_parse_top(&d, s, size, toks, cap);
        r2 = rsd_ollama_ps_listing(s, size, toks, need, &l2);
        FZ_CHECK((r2 == r && l2.n == l1.n) || (r2 == RSD_ERR_JSON_TOKENS && l2.n == 0));
    }
    if (r == RSD_OK) {
        check_list(&l1);
        /* round trip */
        outcap = (size_t)l1.n * (4 * 2 * 6 * RSD_MODEL_ID_MAX + 128) + 64;
        out = (char *)malloc(outcap);
        rsd_json_w_init(&w, out, outcap);
        rsd_json_w_begin_object(&w);
        rsd_json_w_key(&w, "models");
        rsd_json_w_begin_array(&w);
        for (i = 0; i < l1.n; i++) {
            const rsd_listed_model *m = &l1.models[i];
            rsd_json_w_begin_object(&w);
            rsd_json_w_key(&w, "model");
            rsd_json_w_strn(&w, m->id.ptr, m->id.len);
            if (m->n_aliases) {
                rsd_json_w_key(&w, "name");
                rsd_json_w_strn(&w, rsd_listed_alias(m, 0).ptr, rsd_listed_alias(m, 0).len);
            }
            if (m->has_size) { rsd_json_w_key(&w, "size"); rsd_json_w_int(&w, (int64_t)m->size_bytes); }
            if (m->has_size_vram) { rsd_json_w_key(&w, "size_vram"); rsd_json_w_int(&w, (int64_t)m->size_vram_bytes); }
            if (m->context_length) { rsd_json_w_key(&w, "context_length"); rsd_json_w_int(&w, m->context_length); }
            rsd_json_w_end_object(&w);
        }
        rsd_json_w_end_array(&w);
        rsd_json_w_end_object(&w);
        k = rsd_json_w_finish(&w);
        FZ_CHECK(k > 0);
        {
            rsd_json_tok *t2 = (rsd_json_tok *)malloc(((size_t)k + 2) * sizeof *t2);
            r2 = rsd_ollama_ps_listing(out, (size_t)k, t2, (uint32_t)k + 2, &l2);
            FZ_CHECK(r2 == RSD_OK && l2.n == l1.n && l2.n_skipped == 0);
            for (i = 0; i < l2.n; i++) {
                const rsd_listed_model *a = &l1.models[i], *b = &l2.models[i];
                FZ_CHECK(rsd_str_eq(a->id, b->id) && a->n_aliases == b->n_aliases);
                if (a->n_aliases) FZ_CHECK(rsd_str_eq(rsd_listed_alias(a, 0), rsd_listed_alias(b, 0)));
                FZ_CHECK(a->has_size == b->has_size && a->size_bytes == b->size_bytes);
                FZ_CHECK(a->has_size_vram == b->has_size_vram && a->size_vram_bytes == b->size_vram_bytes);
                FZ_CHECK(a->context_length == b->context_length);
            }
            free(t2);
        }
        free(out);
        /* normalisation */
        for (i = 0; i < l1.n; i++) {
            k = rsd_ollama_name_normalise(l1.models[i].id, norm, sizeof norm);
            if (k < 0) continue;
            FZ_CHECK((size_t)k == strlen(norm));
            k2 = rsd_ollama_name_normalise(rsd_str_c(norm), norm2, sizeof norm2);
            FZ_CHECK(k2 == k && strcmp(norm, norm2) == 0);
        }
    } else {
        FZ_CHECK(l1.n == 0);
    }
    /* replies */
    er = rsd_server_error_parse(&e, s, size, toks, cap);
    gr = rsd_ollama_parse_generate(&g, s, size, toks, cap);
    FZ_CHECK(er >= -19 && er <= 1);
    if (er == 1 && rsd_json_parse(&d, s, size, toks, cap) > 0 && rsd_json_type_of(&d, 0) == RSD_JSON_OBJECT)
        FZ_CHECK(gr == RSD_ERR_SERVER_ERROR && strcmp(g.error.message, e.message) == 0);
    if (gr == RSD_ERR_SERVER_ERROR) FZ_CHECK(er == 1);
    FZ_CHECK(strlen(e.message) < sizeof e.message);
    for (i = 0; e.message[i]; i++) FZ_CHECK((unsigned char)e.message[i] >= 0x20 && e.message[i] != 0x7F);
    (void)rsd_ollama_parse_version(&v, s, size, toks, cap);
    FZ_CHECK(strlen(v.text) < sizeof v.text);
    free(toks);
    return 0;
}
