/* libFuzzer target for the Ollama payload parsers (/api/ps, /api/tags, replies).
   Build: make fuzz T=ollama_ps FUZZ_SECS=60
   Invariants checked (abort on violation):
   - a parse with exactly the tokens the count pass reports gives the same result
     as one with plenty, and one token fewer is RSD_ERR_JSON_TOKENS (never partial);
   - kept + dropped == entries; at most RSD_OLLAMA_MAX_MODELS kept; truncated iff
     an entry was dropped for the cap;
   - every kept id is usable (1..255 bytes, no control byte) and every view points
     into the input or the result's arena; arena_used <= its size;
   - rsd_ollama_residents agrees (id = model else name; alias = the other when it
     differs; sizes copied with their has_ flags);
   - the list written back as JSON parses to the same list (round trip);
   - every kept name normalises idempotently and rsd_ollama_tags_has finds it in
     the same body;
   - rsd_ollama_parse_generate reports SERVER_ERROR exactly when
     rsd_server_error_parse finds an error member on an object root. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

static rsd_ollama_list l1, l2;

static int inside(rsd_str s, const char *a, size_t n) {
    if (s.len == 0) return 1;
    return s.ptr >= a && s.ptr + s.len <= a + n;
}

static void check_list(const rsd_ollama_list *l, const char *src, size_t n) {
    int i;
    rsd_resident r[RSD_OLLAMA_MAX_MODELS];
    FZ_CHECK(l->n_models >= 0 && l->n_models <= RSD_OLLAMA_MAX_MODELS);
    FZ_CHECK(l->n_models + l->n_dropped == l->n_entries);
    FZ_CHECK(l->truncated == (l->n_entries > RSD_OLLAMA_MAX_MODELS));
    FZ_CHECK(l->arena_used <= sizeof l->arena);
    FZ_CHECK(rsd_ollama_residents(l, r, RSD_OLLAMA_MAX_MODELS) == l->n_models);
    for (i = 0; i < l->n_models; i++) {
        const rsd_ollama_model *m = &l->models[i];
        FZ_CHECK(m->name.len > 0 || m->model.len > 0);
        FZ_CHECK(m->name.len < RSD_MODEL_ID_MAX && m->model.len < RSD_MODEL_ID_MAX);
        FZ_CHECK(inside(m->name, src, n) || inside(m->name, l->arena, l->arena_used));
        FZ_CHECK(inside(m->model, src, n) || inside(m->model, l->arena, l->arena_used));
        FZ_CHECK(inside(m->digest, src, n) || inside(m->digest, l->arena, l->arena_used));
        FZ_CHECK(inside(m->expires_at, src, n) || inside(m->expires_at, l->arena, l->arena_used));
        FZ_CHECK(!m->expires_forever || m->has_expires);
        FZ_CHECK(m->has_size || m->size_bytes == 0);
        FZ_CHECK(m->has_size_vram || m->size_vram_bytes == 0);
        FZ_CHECK(rsd_str_eq(r[i].model_id, m->model.len ? m->model : m->name));
        FZ_CHECK(r[i].n_aliases == (m->model.len && m->name.len && !rsd_str_eq(m->model, m->name)));
        if (r[i].n_aliases) FZ_CHECK(rsd_str_eq(r[i].aliases[0], m->name));
        FZ_CHECK(r[i].has_size == m->has_size && r[i].size_bytes == m->size_bytes);
        FZ_CHECK(r[i].has_size_vram == m->has_size_vram && r[i].size_vram_bytes == m->size_vram_bytes);
    }
}

static void put_str(rsd_json_writer *w, const char *key, rsd_str v) {
    if (!v.len) return;
    rsd_json_w_key(w, key);
    rsd_json_w_strn(w, v.ptr, v.len);
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
    cap = (uint32_t)size + 2;
    toks = (rsd_json_tok *)malloc(cap * sizeof *toks);
    r = rsd_ollama_parse_ps(&l1, s, size, toks, cap);
    need = rsd_json_parse(&d, s, size, NULL, 0) > 0 ? d.count : 0;
    if (need > 0) {
        r2 = rsd_ollama_parse_tags(&l2, s, size, toks, need);
        FZ_CHECK(r2 == r);
        if (need > 1) FZ_CHECK(rsd_ollama_parse_ps(&l2, s, size, toks, need - 1) == RSD_ERR_JSON_TOKENS);
    }
    if (r >= 0) {
        FZ_CHECK(r == l1.n_models);
        check_list(&l1, s, size);
        /* round trip */
        outcap = size * 2 + 64 * 64 + 256;
        out = (char *)malloc(outcap);
        rsd_json_w_init(&w, out, outcap);
        rsd_json_w_begin_object(&w);
        rsd_json_w_key(&w, "models");
        rsd_json_w_begin_array(&w);
        for (i = 0; i < l1.n_models; i++) {
            const rsd_ollama_model *m = &l1.models[i];
            rsd_json_w_begin_object(&w);
            put_str(&w, "name", m->name);
            put_str(&w, "model", m->model);
            put_str(&w, "digest", m->digest);
            put_str(&w, "expires_at", m->expires_at);
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
            r2 = rsd_ollama_parse_ps(&l2, out, (size_t)k, t2, (uint32_t)k + 2);
            FZ_CHECK(r2 == l1.n_models && l2.n_dropped == 0);
            for (i = 0; i < r2; i++) {
                const rsd_ollama_model *a = &l1.models[i], *b = &l2.models[i];
                FZ_CHECK(rsd_str_eq(a->name, b->name) && rsd_str_eq(a->model, b->model));
                FZ_CHECK(rsd_str_eq(a->digest, b->digest) && rsd_str_eq(a->expires_at, b->expires_at));
                FZ_CHECK(a->has_expires == b->has_expires && a->expires_unix_ms == b->expires_unix_ms);
                FZ_CHECK(a->expires_forever == b->expires_forever);
                FZ_CHECK(a->has_size == b->has_size && a->size_bytes == b->size_bytes);
                FZ_CHECK(a->has_size_vram == b->has_size_vram && a->size_vram_bytes == b->size_vram_bytes);
                FZ_CHECK(a->context_length == b->context_length);
            }
            free(t2);
        }
        free(out);
        /* normalisation and tags lookup */
        for (i = 0; i < l1.n_models; i++) {
            rsd_str nm = l1.models[i].name.len ? l1.models[i].name : l1.models[i].model;
            k = rsd_ollama_name_normalise(nm, norm, sizeof norm);
            if (k < 0) continue;
            FZ_CHECK((size_t)k == strlen(norm));
            k2 = rsd_ollama_name_normalise(rsd_str_c(norm), norm2, sizeof norm2);
            FZ_CHECK(k2 == k && strcmp(norm, norm2) == 0);
            FZ_CHECK(rsd_ollama_tags_has(s, size, toks, cap, nm) == 1);
        }
    } else {
        FZ_CHECK(l1.n_models == 0);
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
