/* test_lms_index.c -- W20: LM Studio catalog lookups without quadratic scans. The parser
   indexes the catalog as it folds (hashes of keys and instance ids, per-model instance
   chains); rsd_lms_resolve, rsd_lms_residents and the reconcile's fallback filtering use
   that index. These tests compare them with the straightforward scans they replaced (kept
   below as the reference) on many generated catalogs, up to the RSD_LMS_* limits, with LM
   Link duplicates, ids shared across models, peers and owned ids; and run a reconcile on
   the largest catalog. */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency.h"
#include "rsd_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lms_scan_ref.h"
#include "lms_json.h"

/* ---- generated catalogs ------------------------------------------------------------- */
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return n ? (uint32_t)(g_rng % n) : 0;
}

static char g_json[1 << 20];
static rsd_json_tok g_toks[1 << 16];
static rsd_lms_catalog g_cat;
static char g_ids[512][48]; /* the id pool queries and peers draw from */
static int g_nids;

static void pool_add(const char *id) {
    int i;
    for (i = 0; i < g_nids; i++)
        if (!strcmp(g_ids[i], id)) return;
    if (g_nids < 512) snprintf(g_ids[g_nids++], sizeof g_ids[0], "%s", id);
}

/* A v1 catalog: n_entries entries over n_keys keys (duplicates = LM Link hosts), instances
   named after their key, key:N, or another model's key (ids shared across models). */
static size_t gen_catalog(int n_entries, int n_keys, int inst_per_entry) {
    rsd_json_writer w;
    int e, k;
    char id[48];
    g_nids = 0;
    rsd_json_w_init(&w, g_json, sizeof g_json);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "models");
    rsd_json_w_begin_array(&w);
    for (e = 0; e < n_entries; e++) {
        int key = e < n_keys ? e : (int)rnd((uint32_t)n_keys), n_inst = (int)rnd((uint32_t)inst_per_entry + 1);
        snprintf(id, sizeof id, "m%d", key);
        pool_add(id);
        rsd_json_w_begin_object(&w);
        rsd_json_w_key(&w, "key");
        rsd_json_w_str(&w, id);
        rsd_json_w_key(&w, "type");
        rsd_json_w_str(&w, "llm");
        rsd_json_w_key(&w, "size_bytes");
        rsd_json_w_int(&w, 1000 + key);
        rsd_json_w_key(&w, "loaded_instances");
        rsd_json_w_begin_array(&w);
        for (k = 0; k < n_inst; k++) {
            char iid[48];
            uint32_t how = rnd(4);
            if (how == 0) snprintf(iid, sizeof iid, "m%d", key);
            else if (how == 1) snprintf(iid, sizeof iid, "m%d", (int)rnd((uint32_t)n_keys)); /* another key */
            else snprintf(iid, sizeof iid, "m%d:%d", key, 2 + (int)rnd(3));
            pool_add(iid);
            lms_w_instance(&w, iid, strlen(iid), 4096 * (1 + (int)rnd(8)));
        }
        rsd_json_w_end_array(&w);
        rsd_json_w_end_object(&w);
    }
    rsd_json_w_end_array(&w);
    rsd_json_w_end_object(&w);
    pool_add("nope");
    pool_add("");
    return (size_t)rsd_json_w_finish(&w);
}

static bool same_res(const rsd_lms_resolution *a, const rsd_lms_resolution *b) {
    return a->state == b->state && a->model == b->model && a->instance == b->instance &&
           rsd_str_eq(a->wire_id, b->wire_id) && a->peer_mask == b->peer_mask;
}

/* Peers drawn from the pool: up to 32, target ids with duplicates. */
typedef struct peer_set {
    int n;
    rsd_lms_peer p[RSD_LMS_MAX_PEERS];
    rsd_str ids[RSD_LMS_MAX_PEERS][24];
    char targets[RSD_LMS_MAX_PEERS][16];
} peer_set;

static void gen_peers(peer_set *ps) {
    int p, j;
    ps->n = (int)rnd(RSD_LMS_MAX_PEERS + 1);
    for (p = 0; p < ps->n; p++) {
        snprintf(ps->targets[p], sizeof ps->targets[p], "host%d", (int)rnd(6));
        ps->p[p].target_id = rsd_str_c(ps->targets[p]);
        ps->p[p].n_instance_ids = (int)rnd(24);
        for (j = 0; j < ps->p[p].n_instance_ids; j++) ps->ids[p][j] = rsd_str_c(g_ids[rnd((uint32_t)g_nids)]);
        ps->p[p].instance_ids = rnd(8) ? ps->ids[p] : NULL;
    }
}

/* Every pool id, with and without a default and peers: resolve and residents agree with
   the reference. Returns the number of disagreements. */
static int compare_all(const rsd_lms_catalog *cat, int rounds) {
    static peer_set ps;
    static rsd_resident a[RSD_MAX_RESIDENTS * 4], b[RSD_MAX_RESIDENTS * 4];
    rsd_str owned[40];
    int bad = 0, r, q, i, na, nb, n_owned;
    for (r = 0; r < rounds; r++) {
        rsd_str def = rnd(3) ? rsd_str_c(g_ids[rnd((uint32_t)g_nids)]) : rsd_str_c("");
        gen_peers(&ps);
        for (q = 0; q < g_nids; q++) {
            rsd_lms_resolution x, y;
            rsd_str req = rsd_str_c(g_ids[q]);
            if (rsd_lms_resolve(cat, req, def, ps.n ? ps.p : NULL, ps.n, &x) != RSD_OK) bad++;
            ref_resolve(cat, req, def, ps.n ? ps.p : NULL, ps.n, &y);
            if (!same_res(&x, &y)) {
                if (bad < 5)
                    printf("  resolve '%s' default '%.*s' peers %d: state %d/%d model %d/%d inst %d/%d mask %x/%x\n",
                           g_ids[q], (int)def.len, def.ptr, ps.n, x.state, y.state, x.model, y.model, x.instance,
                           y.instance, x.peer_mask, y.peer_mask);
                bad++;
            }
        }
        n_owned = (int)rnd(40);
        for (i = 0; i < n_owned; i++) owned[i] = rsd_str_c(g_ids[rnd((uint32_t)g_nids)]);
        na = rsd_lms_residents(cat, owned, n_owned, a, RSD_MAX_RESIDENTS * 4);
        nb = ref_residents(cat, owned, n_owned, b, RSD_MAX_RESIDENTS * 4);
        if (na != nb) bad++;
        for (i = 0; i < na && i < nb; i++)
            if (!rsd_str_eq(a[i].model_id, b[i].model_id) || a[i].loaded_by_us != b[i].loaded_by_us ||
                a[i].size_bytes != b[i].size_bytes)
                bad++;
    }
    return bad;
}

static void test_index_agrees_with_scans(void) {
    int t, bad = 0;
    for (t = 0; t < 60; t++) {
        int n_keys = 1 + (int)rnd(t < 30 ? 12 : RSD_LMS_MAX_MODELS);
        int n_entries = n_keys + (int)rnd((uint32_t)n_keys + 1); /* LM Link duplicates */
        size_t len = gen_catalog(n_entries, n_keys, t < 30 ? 3 : 1);
        REQUIRE(len > 0 && len < sizeof g_json);
        REQUIRE(rsd_lms_parse_models(&g_cat, g_json, len, g_toks, (uint32_t)(sizeof g_toks / sizeof g_toks[0])) >= 0);
        bad += compare_all(&g_cat, 4);
    }
    CHECK_EQ_INT(bad, 0);
}

/* The largest catalog: 256 folded models (300 entries), 64 instances, more dropped. */
static void test_index_max_catalog(void) {
    rsd_lms_resolution x;
    size_t len;
    int m, bad = 0;
    char key[16];
    len = gen_catalog(300, RSD_LMS_MAX_MODELS, 2);
    REQUIRE(len > 0);
    CHECK_EQ_INT(rsd_lms_parse_models(&g_cat, g_json, len, g_toks, (uint32_t)(sizeof g_toks / sizeof g_toks[0])),
                 RSD_LMS_MAX_MODELS);
    CHECK_EQ_INT(g_cat.n_instances, RSD_LMS_MAX_INSTANCES);
    CHECK(g_cat.truncated);
    CHECK_EQ_INT(g_cat.index.n_models, RSD_LMS_MAX_MODELS);
    CHECK_EQ_INT(g_cat.index.n_instances, RSD_LMS_MAX_INSTANCES);
    for (m = 0; m < RSD_LMS_MAX_MODELS; m++) { /* every key resolves to its own model */
        snprintf(key, sizeof key, "m%d", m);
        if (rsd_lms_resolve(&g_cat, rsd_str_c(key), rsd_str_c(""), NULL, 0, &x) != RSD_OK || x.model < 0 ||
            (!rsd_str_eq_c(g_cat.models[x.model].key, key) && x.state != RSD_LMS_INSTANCE))
            bad++;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(compare_all(&g_cat, 6), 0);
    /* a 257th distinct key is dropped and unknown */
    CHECK_EQ_INT(rsd_lms_resolve(&g_cat, rsd_str_c("m256"), rsd_str_c(""), NULL, 0, &x), RSD_OK);
    CHECK_EQ_INT(x.state, RSD_LMS_UNKNOWN);
}

/* A catalog filled by hand (its index does not cover it) is indexed on the fly. */
static void test_index_hand_filled(void) {
    static rsd_lms_catalog cat;
    rsd_lms_resolution x, y;
    rsd_resident a[8], b[8];
    rsd_str owned[1];
    memset(&cat, 0, sizeof cat);
    cat.n_models = 3;
    cat.models[0].key = rsd_str_c("k0");
    cat.models[1].key = rsd_str_c("k1");
    cat.models[2].key = rsd_str_c("k2");
    cat.n_instances = 3;
    cat.instances[0].id = rsd_str_c("k1");
    cat.instances[0].model = 1;
    cat.instances[1].id = rsd_str_c("k2:2");
    cat.instances[1].model = 2;
    cat.instances[2].id = rsd_str_c("k1:2");
    cat.instances[2].model = 1;
    CHECK_EQ_INT(rsd_lms_resolve(&cat, rsd_str_c("k1"), rsd_str_c("k1:2"), NULL, 0, &x), RSD_OK);
    ref_resolve(&cat, rsd_str_c("k1"), rsd_str_c("k1:2"), NULL, 0, &y);
    CHECK(same_res(&x, &y) && x.state == RSD_LMS_INSTANCE && x.instance == 0);
    CHECK_EQ_INT(rsd_lms_resolve(&cat, rsd_str_c("k2"), rsd_str_c(""), NULL, 0, &x), RSD_OK);
    CHECK(x.state == RSD_LMS_INSTANCE && x.instance == 1 && rsd_str_eq_c(x.wire_id, "k2:2"));
    CHECK_EQ_INT(rsd_lms_resolve(&cat, rsd_str_c("k0"), rsd_str_c(""), NULL, 0, &x), RSD_OK);
    CHECK(x.state == RSD_LMS_JIT && x.model == 0);
    owned[0] = rsd_str_c("k1:2");
    CHECK_EQ_INT(rsd_lms_residents(&cat, owned, 1, a, 8), 2);
    CHECK_EQ_INT(ref_residents(&cat, owned, 1, b, 8), 2);
    CHECK(a[0].loaded_by_us && !a[1].loaded_by_us && rsd_str_eq_c(a[1].model_id, "k2"));
    cat.instances[1].model = 7; /* out of range: an argument error, as before */
    CHECK_EQ_INT(rsd_lms_residents(&cat, owned, 1, a, 8), RSD_ERR_ARG);
}

/* A reconcile (opaque) in rsd_reconcile_footprint(lim) bytes of the heap, kept to the end
   (it owns nothing else); NULL when it cannot be made. */
static rsd_reconcile *new_reconcile(const rsd_reconcile_limits *lim) {
    size_t n = rsd_reconcile_footprint(lim);
    rsd_reconcile *r = n ? (rsd_reconcile *)malloc(n) : NULL;
    if (r && rsd_reconcile_init(r, n, lim) == RSD_OK) return r;
    free(r);
    return NULL;
}

/* A reconcile on the largest catalog: the requested key is the last one, the fallback
   after a 507 unloads the owned instance of the first candidate only. */
static void test_index_reconcile_max_catalog(void) {
    static rsd_reconcile *r;
    static char body[1 << 20];
    rsd_json_writer w;
    rsd_reconcile_desc d;
    rsd_owned own[2];
    rsd_step s;
    int m, len, n_unload = 0;
    uint64_t now = 1000;
    /* 256 models, 64 of them loaded (one instance each: "m<k>"), the keep m255 not loaded */
    if (!r) { /* tables for the largest catalog's answer */
        rsd_reconcile_limits lim;
        memset(&lim, 0, sizeof lim);
        lim.max_tokens = RSD_LISTING_MAX_TOKENS;
        lim.max_body_bytes = sizeof body;
        REQUIRE((r = new_reconcile(&lim)) != NULL);
    }
    rsd_json_w_init(&w, body, sizeof body);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "models");
    rsd_json_w_begin_array(&w);
    for (m = 0; m < RSD_LMS_MAX_MODELS; m++) {
        char key[16];
        snprintf(key, sizeof key, "m%d", m);
        rsd_json_w_begin_object(&w);
        rsd_json_w_key(&w, "key");
        rsd_json_w_str(&w, key);
        rsd_json_w_key(&w, "loaded_instances");
        rsd_json_w_begin_array(&w);
        if (m >= 150 && m < 150 + RSD_LMS_MAX_INSTANCES) {
            rsd_json_w_begin_object(&w);
            rsd_json_w_key(&w, "id");
            rsd_json_w_str(&w, key);
            rsd_json_w_end_object(&w);
        }
        rsd_json_w_end_array(&w);
        rsd_json_w_end_object(&w);
    }
    rsd_json_w_end_array(&w);
    rsd_json_w_end_object(&w);
    len = rsd_json_w_finish(&w);
    REQUIRE(len > 0);
    memset(&d, 0, sizeof d);
    d.runtime = rsd_runtime_lmstudio();
    d.base_url = "http://127.0.0.1:1234/v1";
    d.keep = "m255";
    d.explicit_load = true;
    own[0].model = "m213";
    own[0].instance = "m213";
    own[1].model = "m160";
    own[1].instance = "m160";
    d.owned = own;
    d.n_owned = 2;
    REQUIRE(rsd_reconcile_begin(r, &d, now) == RSD_OK);
    s = rsd_reconcile_next(r, now);
    REQUIRE(s.kind == RSD_STEP_HTTP && s.http.op == RSD_OP_LIST);
    CHECK_EQ_INT(rsd_reconcile_feed(r, RSD_OK, 200, body, (size_t)len, now), RSD_OK);
    CHECK_EQ_STR(rsd_reconcile_result_of(r)->model_key, "m255"); /* the last of the catalog's 256: read whole, not truncated */
    s = rsd_reconcile_next(r, now);
    REQUIRE(s.kind == RSD_STEP_HTTP && s.http.op == RSD_OP_LOAD);
    CHECK_EQ_INT(rsd_reconcile_feed(r, RSD_OK, 507, "{\"error\":\"insufficient VRAM\"}", 29, now), RSD_OK);
    s = rsd_reconcile_next(r, now);
    REQUIRE(s.kind == RSD_STEP_HTTP && s.http.op == RSD_OP_LIST); /* W14: list again */
    CHECK_EQ_INT(rsd_reconcile_feed(r, RSD_OK, 200, body, (size_t)len, now), RSD_OK);
    for (;;) {
        s = rsd_reconcile_next(r, now);
        if (s.kind != RSD_STEP_HTTP || s.http.op != RSD_OP_UNLOAD) break;
        CHECK(!strcmp(s.http.model, "m160") || !strcmp(s.http.model, "m213"));
        n_unload++;
        CHECK_EQ_INT(rsd_reconcile_feed(r, RSD_OK, 200, "{\"instance_id\":\"x\"}", 19, now), RSD_OK);
    }
    CHECK_EQ_INT(n_unload, 1); /* the minimum: one candidate */
    REQUIRE(s.kind == RSD_STEP_HTTP && s.http.op == RSD_OP_LOAD);
    CHECK_EQ_INT(rsd_reconcile_feed(r, RSD_OK, 200, "{\"instance_id\":\"m255\"}", 22, now), RSD_OK);
    CHECK_EQ_INT(rsd_reconcile_result_of(r)->outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_STR(rsd_reconcile_result_of(r)->wire_id, "m255");
    CHECK_EQ_INT(rsd_reconcile_result_of(r)->n_evicted, 1);
    CHECK_EQ_INT(rsd_reconcile_result_of(r)->n_attr_add, 1);
    CHECK_EQ_INT(rsd_reconcile_result_of(r)->n_attr_remove, 1);
}

/* The TTL cache of the machine (sans I/O): a hit makes no request and keeps the wire id;
   a mutation is stored under the generation given by commit_done. */
static void test_lms_machine_cache(void) {
    static rsd_reconcile *r;
    static rsd_decision_cache c;
    static const char cat_body[] = "{\"models\":[{\"key\":\"q\",\"loaded_instances\":[{\"id\":\"q:2\"}]},{\"key\":\"z\"}]}";
    rsd_reconcile_desc d;
    rsd_step s;
    memset(&c, 0, sizeof c);
    memset(&d, 0, sizeof d);
    if (!r) REQUIRE((r = new_reconcile(NULL)) != NULL);
    d.runtime = rsd_runtime_lmstudio();
    d.base_url = "http://127.0.0.1:1234";
    d.keep = "q";
    d.explicit_load = true;
    d.cache = &c;
    d.has_generation = true;
    d.generation = 5;
    REQUIRE(rsd_reconcile_begin(r, &d, 1000) == RSD_OK);
    s = rsd_reconcile_next(r, 1000);
    REQUIRE(s.kind == RSD_STEP_HTTP);
    rsd_reconcile_feed(r, RSD_OK, 200, cat_body, sizeof cat_body - 1, 1001);
    s = rsd_reconcile_next(r, 1001);
    CHECK_EQ_INT(s.kind, RSD_STEP_DONE);
    CHECK(rsd_reconcile_result_of(r)->cached && !rsd_reconcile_result_of(r)->cache_hit);
    CHECK_EQ_STR(rsd_reconcile_result_of(r)->wire_id, "q:2");
    REQUIRE(rsd_reconcile_begin(r, &d, 2000) == RSD_OK);
    s = rsd_reconcile_next(r, 2000);
    CHECK_EQ_INT(s.kind, RSD_STEP_DONE);
    CHECK(rsd_reconcile_result_of(r)->cache_hit && rsd_reconcile_result_of(r)->requests == 0);
    CHECK_EQ_STR(rsd_reconcile_result_of(r)->wire_id, "q:2");
    CHECK_EQ_INT(rsd_reconcile_result_of(r)->outcome, RSD_OUTCOME_RESIDENT);
    /* another generation or past the TTL: a miss */
    d.generation = 6;
    REQUIRE(rsd_reconcile_begin(r, &d, 3000) == RSD_OK);
    CHECK_EQ_INT(rsd_reconcile_next(r, 3000).kind, RSD_STEP_HTTP);
    d.generation = 5;
    REQUIRE(rsd_reconcile_begin(r, &d, 1000 + RSD_DECISION_CACHE_TTL_MS + 1) == RSD_OK);
    CHECK_EQ_INT(rsd_reconcile_next(r, 1000 + RSD_DECISION_CACHE_TTL_MS + 1).kind, RSD_STEP_HTTP);
    /* a load: COMMIT, commit_done(9): cached under 9 */
    d.keep = "z";
    REQUIRE(rsd_reconcile_begin(r, &d, 5000) == RSD_OK);
    (void)rsd_reconcile_next(r, 5000);
    rsd_reconcile_feed(r, RSD_OK, 200, cat_body, sizeof cat_body - 1, 5000);
    s = rsd_reconcile_next(r, 5000);
    REQUIRE(s.kind == RSD_STEP_HTTP && s.http.op == RSD_OP_LOAD);
    rsd_reconcile_feed(r, RSD_OK, 200, "{\"instance_id\":\"z\"}", 18, 5001);
    s = rsd_reconcile_next(r, 5001);
    REQUIRE(s.kind == RSD_STEP_COMMIT);
    CHECK_EQ_INT(rsd_reconcile_commit_done(r, 9), RSD_OK);
    s = rsd_reconcile_next(r, 5002);
    CHECK_EQ_INT(s.kind, RSD_STEP_DONE);
    CHECK(rsd_reconcile_result_of(r)->cached);
    d.generation = 9;
    REQUIRE(rsd_reconcile_begin(r, &d, 6000) == RSD_OK);
    CHECK(rsd_reconcile_result_of(r)->cache_hit);
    CHECK_EQ_STR(rsd_reconcile_result_of(r)->wire_id, "z");
    d.keep = "q"; /* the mutation dropped the key's other entries */
    REQUIRE(rsd_reconcile_begin(r, &d, 6000) == RSD_OK);
    CHECK(!rsd_reconcile_result_of(r)->cache_hit);
    CHECK_EQ_INT(rsd_reconcile_commit_done(r, 1), RSD_ERR_STATE);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    RUN(test_index_agrees_with_scans);
    RUN(test_index_max_catalog);
    RUN(test_index_hand_filled);
    RUN(test_index_reconcile_max_catalog);
    RUN(test_lms_machine_cache);
    return RSD_TEST_END();
}
