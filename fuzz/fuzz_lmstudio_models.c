/* libFuzzer target for the LM Studio payload parsers: catalogs (REST v1
   {"models":[...]} and v0 / OpenAI {"data":[...]}, tier chosen by shape),
   resolution, residents, load/unload replies.
   Build: make fuzz T=lmstudio_models FUZZ_SECS=60
   Invariants checked (abort on violation):
   - the count-pass token number gives the same result as plenty; the top level's
     tokens alone give that result or RSD_ERR_JSON_TOKENS with nothing kept;
   - rsd_lms_catalog_from_response(tier found, 200) agrees with the shape parse,
     and the other tier's URL refuses the body;
   - folded keys are unique and usable, instance ids usable and unique per model,
     every instance names a kept model, per-model counts add up, caps hold,
     every view points into the input or the arena;
   - every key and every instance id resolves (never UNKNOWN), the wire id is
     the request or an instance of the resolved model;
   - rsd_lms_residents gives one resident per model with an instance;
   - the catalog written back as a v1 body parses to the same catalog;
   - rsd_lms_parse_reply returns SERVER_ERROR exactly when an error member is
     present on an object root, and its instance id is trimmed and usable. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include <stdio.h>
#include <stdlib.h>
#include "../tests/lms_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

static rsd_lms_catalog c1, c2;
static rsd_lms_reply rep;

static int inside(rsd_str s, const char *a, size_t n) {
    if (s.len == 0) return 1;
    return s.ptr >= a && s.ptr + s.len <= a + n;
}

/* The id rule (1..255 bytes, no NUL byte; other control bytes and DEL are kept), trimmed
   of spaces as LM Studio's keys and instance ids are. */
static int usable(rsd_str s) {
    if (s.len == 0 || s.len >= RSD_MODEL_ID_MAX || memchr(s.ptr, '\0', s.len)) return 0;
    if (s.ptr[0] == ' ' || s.ptr[s.len - 1] == ' ') return 0;
    return 1;
}

static void check_catalog(const rsd_lms_catalog *c, const char *src, size_t n) {
    int m, i, j, sum = 0, with = 0;
    rsd_lms_resolution r;
    rsd_resident res[RSD_LMS_MAX_INSTANCES];
    FZ_CHECK(c->tier == RSD_LMS_TIER_V1 || c->tier == RSD_LMS_TIER_V0);
    FZ_CHECK(c->n_models >= 0 && c->n_models <= RSD_LMS_MAX_MODELS);
    FZ_CHECK(c->n_instances >= 0 && c->n_instances <= RSD_LMS_MAX_INSTANCES);
    FZ_CHECK(c->arena_used <= sizeof c->arena);
    FZ_CHECK(c->n_models <= c->n_entries);
    for (m = 0; m < c->n_models; m++) {
        FZ_CHECK(usable(c->models[m].key));
        FZ_CHECK(inside(c->models[m].key, src, n) || inside(c->models[m].key, c->arena, c->arena_used));
        for (j = 0; j < m; j++) FZ_CHECK(!rsd_str_eq(c->models[j].key, c->models[m].key));
        sum += c->models[m].n_instances;
        with += c->models[m].n_instances > 0;
    }
    FZ_CHECK(sum == c->n_instances);
    for (i = 0; i < c->n_instances; i++) {
        const rsd_lms_instance *in = &c->instances[i];
        FZ_CHECK(in->model >= 0 && in->model < c->n_models);
        FZ_CHECK(usable(in->id));
        FZ_CHECK(inside(in->id, src, n) || inside(in->id, c->arena, c->arena_used));
        for (j = 0; j < i; j++)
            FZ_CHECK(c->instances[j].model != in->model || !rsd_str_eq(c->instances[j].id, in->id));
        FZ_CHECK(rsd_lms_resolve(c, in->id, rsd_str_c(""), NULL, 0, &r) == RSD_OK);
        FZ_CHECK(r.state != RSD_LMS_UNKNOWN && r.model >= 0 && r.model <= in->model);
    }
    for (m = 0; m < c->n_models; m++) {
        FZ_CHECK(rsd_lms_resolve(c, c->models[m].key, rsd_str_c(""), NULL, 0, &r) == RSD_OK);
        FZ_CHECK(r.state != RSD_LMS_UNKNOWN && r.model >= 0 && r.model <= m);
        if (r.state == RSD_LMS_INSTANCE) {
            FZ_CHECK(r.instance >= 0 && c->instances[r.instance].model == r.model);
            FZ_CHECK(rsd_str_eq(r.wire_id, c->instances[r.instance].id));
        } else {
            FZ_CHECK(r.instance == -1 && c->models[r.model].n_instances == 0);
            FZ_CHECK(rsd_str_eq(r.wire_id, c->models[m].key));
        }
    }
    FZ_CHECK(rsd_lms_residents(c, NULL, 0, res, RSD_LMS_MAX_INSTANCES) == with);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *s = (const char *)data;
    rsd_json_doc d;
    rsd_json_tok *toks;
    rsd_json_writer w;
    rsd_server_error e;
    char *out;
    size_t outcap;
    uint32_t cap, need;
    int r, r2, k, m, i, er, pr;

    if (size > 1 << 16) return 0;
    cap = (uint32_t)size + 2;
    toks = (rsd_json_tok *)malloc(cap * sizeof *toks);
    r = rsd_lms_parse_models(&c1, s, size, toks, cap);
    need = rsd_json_parse(&d, s, size, NULL, 0) > 0 ? d.count : 0;
    if (need > 0) {
        FZ_CHECK(rsd_lms_parse_models(&c2, s, size, toks, need) == r);
        /* entries are read one by one: tokens for the top level alone read no entry, and
           refuse rather than keep part of the catalog */
        need = (uint32_t)rsd_json_parse_top(&d, s, size, toks, cap);
        r2 = rsd_lms_parse_models(&c2, s, size, toks, need);
        FZ_CHECK(r2 == r || (r2 == RSD_ERR_JSON_TOKENS && c2.n_models == 0));
    }
    if (r >= 0) {
        rsd_lms_tier found = c1.tier;
        FZ_CHECK(r == c1.n_models);
        check_catalog(&c1, s, size);
        FZ_CHECK(rsd_lms_catalog_from_response(&c2, found, 200, s, size, toks, cap) == r);
        FZ_CHECK(c2.tier == found && c2.n_instances == c1.n_instances);
        if (found == RSD_LMS_TIER_V0)
            FZ_CHECK(rsd_lms_catalog_from_response(&c2, RSD_LMS_TIER_OPENAI, 200, s, size, toks, cap) == r);
        FZ_CHECK(rsd_lms_catalog_from_response(&c2, found == RSD_LMS_TIER_V1 ? RSD_LMS_TIER_V0 : RSD_LMS_TIER_V1,
                                               200, s, size, toks, cap) < 0);
        /* round trip through a v1 body */
        outcap = size * 2 + 4096 + (size_t)c1.n_models * 512 + (size_t)c1.n_instances * 600;
        out = (char *)malloc(outcap);
        rsd_json_w_init(&w, out, outcap);
        rsd_json_w_begin_object(&w);
        rsd_json_w_key(&w, "models");
        rsd_json_w_begin_array(&w);
        for (m = 0; m < c1.n_models; m++) {
            const rsd_lms_model *mo = &c1.models[m];
            static const char *const types[] = {"", "llm", "vlm", "embedding", "other"};
            rsd_json_w_begin_object(&w);
            rsd_json_w_key(&w, "key");
            rsd_json_w_strn(&w, mo->key.ptr, mo->key.len);
            if (mo->type) { rsd_json_w_key(&w, "type"); rsd_json_w_str(&w, types[mo->type]); }
            if (mo->max_context_length) { rsd_json_w_key(&w, "max_context_length"); rsd_json_w_int(&w, mo->max_context_length); }
            if (mo->has_size) { rsd_json_w_key(&w, "size_bytes"); rsd_json_w_int(&w, (int64_t)mo->size_bytes); }
            rsd_json_w_key(&w, "capabilities");
            rsd_json_w_begin_object(&w);
            rsd_json_w_key(&w, "vision");
            rsd_json_w_bool(&w, mo->vision);
            rsd_json_w_key(&w, "trained_for_tool_use");
            rsd_json_w_bool(&w, mo->tools);
            if (mo->reasoning) { rsd_json_w_key(&w, "reasoning"); rsd_json_w_bool(&w, true); }
            rsd_json_w_end_object(&w);
            rsd_json_w_key(&w, "loaded_instances");
            rsd_json_w_begin_array(&w);
            for (i = 0; i < c1.n_instances; i++) {
                if (c1.instances[i].model != m) continue;
                lms_w_instance(&w, c1.instances[i].id.ptr, c1.instances[i].id.len, c1.instances[i].context_length);
            }
            rsd_json_w_end_array(&w);
            rsd_json_w_end_object(&w);
        }
        rsd_json_w_end_array(&w);
        rsd_json_w_end_object(&w);
        k = rsd_json_w_finish(&w);
        FZ_CHECK(k > 0);
        {
            uint32_t cap2 = (uint32_t)k + 2;
            rsd_json_tok *t2 = (rsd_json_tok *)malloc(cap2 * sizeof *t2);
            r2 = rsd_lms_parse_models(&c2, out, (size_t)k, t2, cap2);
            FZ_CHECK(r2 == r && c2.tier == RSD_LMS_TIER_V1);
            if (c2.n_dropped == 0) {
                /* instances come back grouped by model: compare per model, in order */
                FZ_CHECK(c2.n_instances == c1.n_instances);
                for (m = 0; m < r; m++) {
                    const rsd_lms_model *a = &c1.models[m], *b = &c2.models[m];
                    int ia = 0, ib = 0;
                    FZ_CHECK(rsd_str_eq(a->key, b->key) && a->type == b->type);
                    FZ_CHECK(a->max_context_length == b->max_context_length);
                    FZ_CHECK(a->has_size == b->has_size && a->size_bytes == b->size_bytes);
                    FZ_CHECK(a->vision == b->vision && a->tools == b->tools && a->reasoning == b->reasoning);
                    FZ_CHECK(a->n_instances == b->n_instances);
                    for (;;) {
                        while (ia < c1.n_instances && c1.instances[ia].model != m) ia++;
                        while (ib < c2.n_instances && c2.instances[ib].model != m) ib++;
                        if (ia >= c1.n_instances || ib >= c2.n_instances) break;
                        FZ_CHECK(rsd_str_eq(c1.instances[ia].id, c2.instances[ib].id));
                        FZ_CHECK(c1.instances[ia].context_length == c2.instances[ib].context_length);
                        ia++, ib++;
                    }
                    FZ_CHECK(ia >= c1.n_instances && ib >= c2.n_instances);
                }
            }
            free(t2);
        }
        free(out);
    } else {
        FZ_CHECK(c1.n_models == 0 || r == RSD_ERR_JSON_TOKENS);
        FZ_CHECK(r != RSD_ERR_SERVER_ERROR || c1.error.present);
    }
    /* replies */
    er = rsd_server_error_parse(&e, s, size, toks, cap);
    pr = rsd_lms_parse_reply(&rep, s, size, toks, cap);
    if (pr == RSD_ERR_SERVER_ERROR) FZ_CHECK(er == 1 && strcmp(rep.error.message, e.message) == 0);
    if (pr == RSD_OK) {
        FZ_CHECK(er == 0);
        FZ_CHECK(rep.instance_id.len == 0 || usable(rep.instance_id));
        FZ_CHECK(inside(rep.instance_id, s, size) || inside(rep.instance_id, rep.arena, rep.arena_used));
        FZ_CHECK(rep.arena_used <= sizeof rep.arena);
    }
    free(toks);
    return 0;
}
