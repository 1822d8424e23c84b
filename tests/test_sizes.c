/* test_sizes.c -- the reconcile and the listing are sized at create time: the sizes the
   manual states, the allocation each create makes, and the limits enforced with a clear
   error and nothing written past a buffer (the storage here is malloc'd to its exact
   size, so ASan sees any byte past it). */
#define RESIDENCY_IMPLEMENTATION
#include "residency_http.h"
#include "rsd_test.h"
#include "reconcile_mem.h"
#include "counting.h"
#include "portable.h"


/* rsd_state_create's one block for a scratch arena of n bytes. */
static size_t state_block(size_t n) { return rsdi_al8(sizeof(struct rsd_state)) + n; }

/* A router listing of n loaded entries named m0..m<n-1>, ids padded to idlen bytes. */
static char *router_listing(int n, int idlen) {
    size_t cap = (size_t)n * (size_t)(idlen + 64) + 64, o = 0;
    char *b = (char *)malloc(cap);
    int i;
    o += (size_t)snprintf(b + o, cap - o, "{\"data\":[");
    for (i = 0; i < n; i++)
        o += (size_t)snprintf(b + o, cap - o, "%s{\"id\":\"m%0*d\",\"status\":{\"value\":\"loaded\"}}", i ? "," : "",
                              idlen > 1 ? idlen - 1 : 1, i);
    snprintf(b + o, cap - o, "]}");
    return b;
}

/* A /models listing as a real llama.cpp router sends it (wire.md: every field, the child's
   argv and preset, meta), n entries all loaded, each id idlen bytes. */
static char *real_router_listing(int n, int idlen) {
    size_t cap = (size_t)n * (size_t)(5 * idlen + 1200) + 64, o = 0;
    char *b = (char *)malloc(cap);
    int i;
    o += (size_t)snprintf(b + o, cap - o, "{\"data\":[");
    for (i = 0; i < n; i++) {
        char id[RSD_MODEL_ID_MAX];
        snprintf(id, sizeof id, "unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF-%0*d", idlen - 42, i);
        o += (size_t)snprintf(b + o, cap - o,
            "%s{\"id\":\"%s\",\"aliases\":[],\"tags\":[],\"object\":\"model\",\"owned_by\":\"llamacpp\","
            "\"created\":1795993601,\"status\":{\"value\":\"loaded\",\"args\":[\"/usr/local/bin/llama-server\","
            "\"--host\",\"127.0.0.1\",\"--port\",\"46335\",\"--sleep-idle-seconds\",\"4\",\"--alias\",\"%s\","
            "\"--ctx-size\",\"32768\",\"--n-gpu-layers\",\"99\",\"--model\",\"/home/user/.cache/llama.cpp/%s.gguf\"],"
            "\"preset\":\"[%s]\\nsleep-idle-seconds = 4\\nctx-size = 32768\\nn-gpu-layers = 99\\n"
            "model = /home/user/.cache/llama.cpp/%s.gguf\\n\\n\"},\"architecture\":{\"input_modalities\":[\"text\"],"
            "\"output_modalities\":[\"text\"]},\"source\":\"models_dir\",\"can_remove\":false,\"meta\":{\"vocab_type\":1,"
            "\"n_vocab\":151936,\"n_ctx\":32768,\"n_ctx_train\":262144,\"n_embd\":2048,\"n_params\":30532122624,"
            "\"size\":17659826176,\"ftype\":\"Q4_K - Medium\"}}",
            i ? "," : "", id, id, id, id, id);
    }
    snprintf(b + o, cap - o, "],\"object\":\"list\"}");
    return b;
}

/* The figures the manual gives (residency.h, "payload" Storage and "driver" Memory;
   residency_http.h, "ensure", rsd_ensurer_footprint). */
static void test_manual_size_figures(void) {
#if defined(__x86_64__) || defined(_M_X64)
    CHECK(sizeof(rsd_plan) < 16 * 1024);
    CHECK(sizeof(rsd_decision_cache) < 19 * 1024);
    CHECK(sizeof(rsd_facts) < 512);
    CHECK(sizeof(rsd_resident) < 256);
    CHECK(sizeof(rsd_lms_index) < 3 * 1024);
    CHECK(sizeof(rsd_lms_catalog) < 32 * 1024);
    CHECK_EQ_INT(sizeof(rsd_listed_model), 88);
    CHECK(rsd_reconcile_footprint(NULL) <= 134 * 1024);
    CHECK(rsd_ensurer_footprint(NULL) <= 247 * 1024);
    CHECK(rsd_listing_footprint(NULL) <= 17 * 1024);
    {
        rsd_ensurer_desc d;
        rsd_http_client_desc hd;
        rsd_etcd_desc cd;
        size_t scratch;
        memset(&d, 0, sizeof d);
        d.ignore_env = true;
        /* the parts of the defaults' figure */
        hd = rsdi_en_http_desc(&d);
        REQUIRE(rsdi_client_desc_fix(&hd) == 0);
        CHECK(rsdi_client_footprint(&hd) <= 34 * 1024);
        CHECK(sizeof(rsd_ensurer) <= 35 * 1024);
        CHECK(state_block(RSD_STATE_ATTR_ARENA_DEFAULT) <= 17 * 1024);
        scratch = rsdi_al8(sizeof(rsd_attr_set)) + RSD_STATE_ATTR_ARENA_DEFAULT;
        CHECK(scratch <= 10 * 1024 + 512); /* "10 KiB" */
        CHECK((rsdi_al8(sizeof(rsd_detect)) > scratch ? rsdi_al8(sizeof(rsd_detect)) : scratch) <= 12 * 1024);
        CHECK_EQ_INT(rsd_ensurer_footprint(&d), rsd_reconcile_footprint(NULL) + rsdi_client_footprint(&hd) +
                     sizeof(rsd_ensurer) + rsdi_al8(sizeof(rsd_decision_cache)) +
                     rsdi_al8(sizeof(rsd_detect)) + state_block(RSD_STATE_ATTR_ARENA_DEFAULT));
        d.runtime = RSD_RUNTIME_LLAMACPP;
        CHECK(rsd_ensurer_footprint(&d) <= 239 * 1024);
        d.no_state = true;
        CHECK(rsd_ensurer_footprint(&d) <= 212 * 1024);
        d.runtime = RSD_RUNTIME_AUTO;
        CHECK(rsd_ensurer_footprint(&d) <= 239 * 1024);
        CHECK_EQ_INT(rsdi_en_mem_bytes(RSD_STATE_ATTR_ARENA_DEFAULT), 8 * 1024);
        /* a coord: the coordinator */
        cd = rsdi_en_etcd_desc(&d, "etcd://127.0.0.1:9", RSD_STATE_ATTR_ARENA_DEFAULT);
        hd = rsdi_etcd_http_desc(&cd);
        REQUIRE(rsdi_client_desc_fix(&hd) == 0);
        CHECK(rsdi_etcd_footprint(&cd) <= 651 * 1024);
        CHECK(sizeof(rsd_etcd) <= 150 * 1024);
        {
            rsdi_etcd_sizes z;
            rsdi_etcd_sizes_of(&cd, &z);
            CHECK(z.block <= 447 * 1024);
            CHECK_EQ_INT(rsdi_etcd_footprint(&cd), z.block + rsdi_client_footprint(&hd));
        }
        CHECK(rsdi_client_footprint(&hd) <= 205 * 1024);
        CHECK_EQ_INT(hd.max_requests, 3);
        CHECK_EQ_INT(hd.max_conns, 3);
        CHECK_EQ_INT(hd.max_header_bytes, 4096); /* "4 KiB heads and bodies" */
        CHECK_EQ_INT(hd.max_body_bytes, 4096);
    }
#endif
    CHECK(sizeof(rsd_reconcile) <= 51 * 1024);
    CHECK(sizeof(rsd_listing) <= 64);
    CHECK(rsd_reconcile_footprint(NULL) > sizeof(rsd_reconcile));
    printf("  sizeof(rsd_reconcile) %lu, footprint %lu; ensurer footprint %lu; listing %lu\n",
           (unsigned long)sizeof(rsd_reconcile), (unsigned long)rsd_reconcile_footprint(NULL),
           (unsigned long)rsd_ensurer_footprint(NULL), (unsigned long)rsd_listing_footprint(NULL));
}

/* A cache entry's ids share one text: the longest key and model always fit (stored and hit);
   an LM Studio wire id or model key that does not fit beside them is refused, never cut. */
static void test_cache_entry_text_is_never_overrun(void) {
    static rsd_decision_cache c;
    rsd_cache_entry *e;
    rsd_cache_hit hit;
    rsd_plan plan;
    char key[RSD_TARGET_KEY_MAX], model[RSD_MODEL_ID_MAX];
    memset(&c, 0, sizeof c);
    memset(&plan, 0, sizeof plan);
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    memset(model, 'm', sizeof model - 1);
    model[sizeof model - 1] = '\0';
    plan.decision = RSD_DECISION_ALREADY_RESIDENT;
    CHECK_EQ_INT(rsd_cache_store(&c, rsd_str_c(key), rsd_str_c(model), &plan, false, 0, 0), 1);
    CHECK_EQ_INT(rsd_cache_lookup(&c, rsd_str_c(key), rsd_str_c(model), 1, 0, &hit), 1);
    CHECK_EQ_STR(hit.wire_id, "");
    CHECK_EQ_STR(hit.model_key, "");
    e = rsdi_cache_put(&c, key, model, RSD_DECISION_ALREADY_RESIDENT, RSD_REASON_KEEP_RESIDENT, 2, 0);
    REQUIRE(e != NULL);
    CHECK_EQ_INT(e->text_len, sizeof e->text); /* exactly full */
    CHECK(!rsdi_cache_ids(e, "w", ""));
    CHECK(!rsdi_cache_ids(e, "", "k"));
    CHECK(rsdi_cache_ids(e, "", ""));
    e = rsdi_cache_put(&c, "lmstudio|http://h:1234", "qwen", RSD_DECISION_ALREADY_RESIDENT,
                       RSD_REASON_KEEP_RESIDENT, 3, 0);
    REQUIRE(e != NULL);
    CHECK(rsdi_cache_ids(e, "qwen:2", "qwen/qwen3"));
    CHECK_EQ_INT(rsd_cache_lookup(&c, rsd_str_c("lmstudio|http://h:1234"), rsd_str_c("qwen"), 4, 0, &hit), 1);
    CHECK_EQ_STR(hit.wire_id, "qwen:2");
    CHECK_EQ_STR(hit.model_key, "qwen/qwen3");
    CHECK(e->text_len <= sizeof e->text);
}

/* The ensurer's own last uses: 32 of them in RSDI_EN_USE_TEXT bytes of ids; the oldest go
   when either is full, the text is never overrun, and each use keeps its own ids. */
static void test_own_last_uses_fit_their_text(void) {
    rsd_ensurer_desc d;
    rsd_ensurer *e;
    int i, k;
    memset(&d, 0, sizeof d);
    d.no_state = true;
    d.ignore_env = true;
    REQUIRE((e = rsd_ensurer_create(&d)) != NULL);
    for (i = 0; i < 100; i++) { /* short ids: the count is the limit */
        snprintf(e->key, sizeof e->key, "llamacpp|http://h:%d", 8000 + i % 3);
        snprintf(e->model, sizeof e->model, "m%d", i);
        rsdi_en_touch(e);
    }
    CHECK_EQ_INT(e->n_uses, RSDI_EN_USES);
    for (i = 0; i < 100; i++) { /* the longest ids: the text is the limit */
        memset(e->key, 'k', RSD_TARGET_KEY_MAX - 1);
        e->key[RSD_TARGET_KEY_MAX - 1] = '\0';
        memset(e->model, 'a' + i % 26, RSD_MODEL_ID_MAX - 1);
        e->model[RSD_MODEL_ID_MAX - 1] = '\0';
        e->model[0] = (char)('0' + i % 10);
        rsdi_en_touch(e);
        CHECK(e->use_len <= sizeof e->use_text);
        CHECK(e->n_uses >= 1 && e->n_uses <= RSDI_EN_USES);
        /* the newest is there, whole */
        CHECK_EQ_STR(RSDI_EN_USE_MODEL(e, &e->uses[e->n_uses - 1]), e->model);
        CHECK_EQ_STR(RSDI_EN_USE_KEY(e, &e->uses[e->n_uses - 1]), e->key);
    }
    CHECK_EQ_INT(e->n_uses, RSDI_EN_USE_TEXT / (RSD_TARGET_KEY_MAX + RSD_MODEL_ID_MAX));
    for (k = 0; k < e->n_uses; k++) /* every entry's ids are its own, not a neighbour's */
        CHECK(strlen(RSDI_EN_USE_MODEL(e, &e->uses[k])) == RSD_MODEL_ID_MAX - 1 &&
              RSDI_EN_USE_MODEL(e, &e->uses[k]) == RSDI_EN_USE_KEY(e, &e->uses[k]) + RSD_TARGET_KEY_MAX);
    e->key[0] = e->model[0] = '\0';
    rsd_ensurer_destroy(e);
}

/* rsd_reconcile_init makes the reconcile in the caller's memory: the footprint's bytes
   hold the struct and every table (ASan sees the block at its exact size); less is
   RSD_ERR_BUFFER, misaligned memory or bad limits RSD_ERR_ARG. */
static void test_init_in_the_callers_memory(void) {
    static rsd_reconcile *r;
    rsd_reconcile_limits lim;
    unsigned char *mem;
    size_t n;
    memset(&lim, 0, sizeof lim);
    n = rsd_reconcile_footprint(&lim);
    CHECK_EQ_INT(n, rsd_reconcile_footprint(NULL));
    REQUIRE((mem = (unsigned char *)malloc(n + 8)) != NULL);
    CHECK_EQ_INT(rsd_reconcile_init((rsd_reconcile *)(void *)mem, n - 1, &lim), RSD_ERR_BUFFER);
    CHECK_EQ_INT(rsd_reconcile_init((rsd_reconcile *)(void *)(mem + 4), n, &lim), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_reconcile_init(NULL, n, &lim), RSD_ERR_ARG);
    free(mem);
    REQUIRE(rc_init(&r, &lim) == RSD_OK);
    CHECK((char *)r->tables == (char *)r + rsdi_al8(sizeof *r));
    CHECK((char *)(r->toks + r->max_tokens) <= (char *)r + n); /* the last table, inside */
    CHECK(rsd_reconcile_result_of(r) == &r->result);
    lim.max_models = 8;
    REQUIRE(rc_init(&r, &lim) == RSD_OK);
    CHECK(rsd_reconcile_footprint(&lim) < rsd_reconcile_footprint(NULL));
    CHECK_EQ_INT(r->snap.max_models, 8);
    rc_free(&r);
    /* bad limits: an argument error */
    lim.max_models = -1;
    CHECK_EQ_INT(rc_init(&r, &lim), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_reconcile_footprint(&lim), 0);
    CHECK_EQ_INT(rsd_reconcile_limits_fill(&lim), RSD_ERR_ARG);
    lim.max_models = 0;
    lim.max_tokens = 3;
    CHECK_EQ_INT(rc_init(&r, &lim), RSD_ERR_ARG);
    rc_free(&r);
    /* the defaults, filled in */
    memset(&lim, 0, sizeof lim);
    CHECK_EQ_INT(rsd_reconcile_limits_fill(&lim), RSD_OK);
    CHECK_EQ_INT(lim.max_models, RSD_LISTING_DEFAULT_MODELS);
    CHECK_EQ_INT(lim.max_tokens, RSD_RECONCILE_TOKENS);
    CHECK_EQ_INT(lim.max_body_bytes, RSD_RECONCILE_BODY_BYTES);
    CHECK_EQ_INT(lim.max_notices, RSD_RECONCILE_MAX_NOTICES);
    CHECK_EQ_INT(lim.id_arena_bytes, RSD_LISTING_DEFAULT_MODELS * RSD_RECONCILE_IDS_PER_MODEL);
    CHECK_EQ_INT(rsd_reconcile_footprint(&lim), rsd_reconcile_footprint(NULL));
}

/* begin on zeroed memory that init never made a reconcile: a clear error, no crash. */
static void test_begin_without_init_is_a_clear_error(void) {
    rsd_reconcile *r = (rsd_reconcile *)calloc(1, rsd_reconcile_footprint(NULL));
    rsd_reconcile_desc d;
    rsd_step s;
    REQUIRE(r != NULL);
    memset(&d, 0, sizeof d);
    d.base_url = "http://127.0.0.1:8080";
    d.keep = "a";
    CHECK_EQ_INT(rsd_reconcile_begin(r, &d, 1), RSD_ERR_STATE);
    CHECK(strstr(r->result.message, "rsd_reconcile_init") != NULL);
    s = rsd_reconcile_next(r, 1);
    CHECK_EQ_INT(s.kind, RSD_STEP_DONE);
    CHECK_EQ_INT(s.result, RSD_ERR_STATE);
    free(r);
}

/* A desc that keeps keep on a router of max_instances slots with a known capacity. */
static void desc_for(rsd_reconcile_desc *d, const char *keep, int max_instances) {
    memset(d, 0, sizeof *d);
    d->base_url = "http://127.0.0.1:8080";
    d->keep = keep;
    d->capacity_known = true;
    d->max_instances = max_instances;
}

/* One listing answer to a reconcile with limits lim: the result after it. */
static int reconcile_on(const rsd_reconcile_limits *lim, const char *body, const char *keep, rsd_reconcile **rp) {
    rsd_reconcile_desc d;
    rsd_reconcile *r;
    rsd_step s;
    int guard;
    desc_for(&d, keep, 4);
    if (rc_init(rp, lim) != RSD_OK || rsd_reconcile_begin(r = *rp, &d, 1) != RSD_OK) return -999;
    for (guard = 0; guard < 8; guard++) {
        s = rsd_reconcile_next(r, 1);
        if (s.kind != RSD_STEP_HTTP) break;
        if (s.http.op != RSD_OP_LIST) return -998; /* nothing but the listing is expected */
        (void)rsd_reconcile_feed(r, RSD_OK, 200, body, strlen(body), 1);
    }
    return r->result.error;
}

/* A listing over each limit: DEGRADED, nothing sent but the listing, the limit named. */
static void test_listing_over_the_limits_degrades_with_a_clear_error(void) {
    static rsd_reconcile *r;
    rsd_reconcile_limits lim;
    char *big = router_listing(9, 6), *ok = router_listing(3, 6), *real = real_router_listing(3, 120);
    memset(&lim, 0, sizeof lim);
    lim.max_models = 8; /* 9 entries */
    CHECK_EQ_INT(reconcile_on(&lim, big, "m00000", &r), RSD_ERR_LISTING_TRUNCATED);
    CHECK_EQ_INT(r->result.outcome, RSD_OUTCOME_DEGRADED);
    CHECK(strstr(r->result.message, "max_models") != NULL);
    CHECK(!r->result.mutated);
    rc_free(&r);
    lim.max_models = 16; /* room for them, but one entry has more tokens than max_tokens */
    lim.max_tokens = 64;
    CHECK_EQ_INT(reconcile_on(&lim, ok, "m00000", &r), RSD_OK); /* a short entry fits */
    rc_free(&r);
    CHECK_EQ_INT(reconcile_on(&lim, real, "m00000", &r), RSD_ERR_JSON_TOKENS); /* a real router's does not */
    CHECK_EQ_INT(r->result.outcome, RSD_OUTCOME_DEGRADED);
    CHECK(strstr(r->result.message, "max_tokens") != NULL);
    rc_free(&r);
    lim.max_tokens = 0;
    lim.max_models = 9; /* room for 9 entries, not for their names */
    lim.arena_bytes = RSD_MODEL_ID_MAX;
    CHECK_EQ_INT(reconcile_on(&lim, real, "m00000", &r), RSD_ERR_LISTING_TRUNCATED);
    CHECK_EQ_INT(r->result.outcome, RSD_OUTCOME_DEGRADED);
    CHECK(strstr(r->result.message, "arena_bytes") != NULL);
    rc_free(&r);
    lim.arena_bytes = 0;
    lim.max_models = 16; /* one entry over max_body_bytes (the whole listing is read as it arrives) */
    lim.max_body_bytes = 1024;
    CHECK(strlen(big) < 1024 && strlen(real) > 3 * 1024);
    CHECK_EQ_INT(reconcile_on(&lim, big, "m00000", &r), RSD_OK); /* small entries: read */
    rc_free(&r);
    CHECK_EQ_INT(reconcile_on(&lim, real, "m00000", &r), RSD_ERR_TOO_LARGE); /* a real router's entry is not */
    CHECK_EQ_INT(r->result.outcome, RSD_OUTCOME_DEGRADED);
    CHECK(strstr(r->result.message, "max_body_bytes") != NULL);
    CHECK(strstr(r->result.message, "a list entry is larger than the buffer") != NULL);
    CHECK(!r->result.mutated);
    rc_free(&r);
    lim.max_body_bytes = 1023; /* the smallest buffer is 1 KiB */
    CHECK_EQ_INT(rsd_reconcile_footprint(&lim), 0);
    lim.max_body_bytes = 0;
    /* within every limit: decided (already resident) */
    CHECK_EQ_INT(reconcile_on(&lim, ok, "m00000", &r), RSD_OK);
    CHECK_EQ_INT(r->result.outcome, RSD_OUTCOME_RESIDENT);
    rc_free(&r);
    free(big);
    free(ok);
    free(real);
}

/* The defaults hold what a real llama.cpp router sends for 64 models with long ids and
   meta: the answer, its tokens and its strings fit, and the reconcile acts on it. */
static void test_defaults_hold_a_real_router_listing_of_64(void) {
    static rsd_reconcile *r;
    char keep[RSD_MODEL_ID_MAX];
    char *body = real_router_listing(64, 120);
    rsdi_rc_sizes z;
    REQUIRE(rsdi_rc_sizes_of(NULL, &z));
    printf("  a real router listing of 64: %lu bytes (the defaults take %lu), the defaults' tokens %lu\n",
           (unsigned long)strlen(body), (unsigned long)z.body, (unsigned long)z.toks);
    CHECK(strlen(body) > 64 * 1200); /* as long as the real one with these ids */
    snprintf(keep, sizeof keep, "unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF-%0*d", 120 - 42, 0);
    CHECK_EQ_INT(reconcile_on(NULL, body, keep, &r), RSD_OK);
    CHECK_EQ_INT(r->result.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(r->snap.n, 64);
    rc_free(&r);
    free(body);
}

/* The defaults' listing and tokens hold Ollama's /api/ps of 64 models named with 120
   bytes (name and model equal, as Ollama lists them; every wire field). */
static void test_defaults_hold_an_ollama_listing_of_64(void) {
    static char body[64 * 700];
    static rsd_json_tok toks[RSD_RECONCILE_TOKENS];
    rsd_listing *l = rsd_listing_create(NULL);
    size_t o = 0;
    int i;
    REQUIRE(l);
    o += (size_t)snprintf(body + o, sizeof body - o, "{\"models\":[");
    for (i = 0; i < 64; i++)
        o += (size_t)snprintf(body + o, sizeof body - o,
            "%s{\"name\":\"hf.co/unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF-%0*d:Q4_K_M\",\"model\":"
            "\"hf.co/unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF-%0*d:Q4_K_M\",\"size\":6591830464,\"digest\":\"a2af\","
            "\"details\":{\"parent_model\":\"\",\"format\":\"gguf\",\"family\":\"qwen3moe\",\"families\":[\"qwen3moe\"],"
            "\"parameter_size\":\"30.5B\",\"quantization_level\":\"Q4_K_M\"},\"expires_at\":\"2025-10-17T16:47:07.93355-07:00\","
            "\"size_vram\":5333539264,\"context_length\":4096}", i ? "," : "", 120 - 55, i, 120 - 55, i);
    o += (size_t)snprintf(body + o, sizeof body - o, "]}");
    CHECK_EQ_INT(rsd_ollama_ps_listing(body, o, toks, RSD_RECONCILE_TOKENS, l), RSD_OK);
    CHECK_EQ_INT(l->n, 64);
    CHECK(!l->truncated);
    CHECK_EQ_INT(l->models[5].id.len, 120);
    CHECK(l->arena_used <= l->arena_bytes);
    rsd_listing_destroy(l);
}

/* A reconcile made for one runtime without instances has no LM Studio state, and begin
   refuses another runtime naming the limit. */
static void test_runtime_limit_drops_lm_studio_state(void) {
    static rsd_reconcile *r;
    rsd_reconcile_limits lim;
    rsd_reconcile_desc d;
    char *ok = router_listing(3, 6);
    memset(&lim, 0, sizeof lim);
    lim.runtime = rsd_runtime_router();
    { /* the LM Studio state, and the room its catalog needs beyond the listings' storage */
        rsdi_rc_sizes za, zr;
        REQUIRE(rsdi_rc_sizes_of(NULL, &za) && rsdi_rc_sizes_of(&lim, &zr));
        CHECK(za.lists >= rsdi_al8(sizeof(rsd_lms_catalog)));
        CHECK_EQ_INT(rsd_reconcile_footprint(NULL) - rsd_reconcile_footprint(&lim),
                     rsdi_al8(sizeof(rsd_lms_machine)) + (za.lists - zr.lists));
    }
    CHECK_EQ_INT(reconcile_on(&lim, ok, "m00000", &r), RSD_OK); /* the router works on it */
    CHECK(r->lms == NULL);
    memset(&d, 0, sizeof d);
    d.base_url = "http://127.0.0.1:8080";
    d.keep = "a";
    d.runtime = rsd_runtime_ollama();
    CHECK_EQ_INT(rsd_reconcile_begin(r, &d, 1), RSD_ERR_ARG);
    CHECK(strstr(r->result.message, "rsd_reconcile_limits.runtime") != NULL);
    CHECK_EQ_INT(rsd_reconcile_next(r, 1).kind, RSD_STEP_DONE);
    rc_free(&r);
    lim.runtime = rsd_runtime_lmstudio(); /* a runtime with instances keeps it */
    CHECK_EQ_INT(rsd_reconcile_footprint(&lim), rsd_reconcile_footprint(NULL));
    REQUIRE(rc_init(&r, NULL) == RSD_OK); /* its catalog in the storage of the router's listings */
    CHECK((const void *)r->lms->cat == (const void *)r->snap.models);
    rc_free(&r);
    free(ok);
}

/* max_id_bytes bounds an id: ids of exactly the limit work, a longer listed id degrades
   naming the limit, a longer protected id is refused. It costs nothing: the ids live in
   the id arena, sized by id_arena_bytes. */
static void test_id_rows_are_sized_by_the_limits(void) {
    static rsd_reconcile *r;
    static const char body[] = "{\"data\":[{\"id\":\"m00000000000001\",\"status\":{\"value\":\"loaded\"}},"
                               "{\"id\":\"m00000000000002\",\"status\":{\"value\":\"loaded\"}},"
                               "{\"id\":\"keep-this-model\",\"status\":{\"value\":\"unloaded\"}}]}";
    static const char longer[] = "{\"data\":[{\"id\":\"m000000000000001\",\"status\":{\"value\":\"loaded\"}},"
                                 "{\"id\":\"keep-this-model\",\"status\":{\"value\":\"unloaded\"}}]}";
    rsd_reconcile_limits lim;
    rsd_reconcile_desc d;
    rsd_protected_model pm;
    rsd_step s;
    memset(&lim, 0, sizeof lim);
    lim.max_id_bytes = 16; /* ids of 15 bytes */
    CHECK_EQ_INT(rsd_reconcile_footprint(NULL), rsd_reconcile_footprint(&lim));
    REQUIRE(rc_init(&r, &lim) == RSD_OK);
    memset(&d, 0, sizeof d);
    d.base_url = "http://127.0.0.1:8080";
    d.keep = "keep-this-model";
    d.capacity_known = true;
    d.max_instances = 2; /* full: one of the two goes */
    memset(&pm, 0, sizeof pm);
    pm.model_id = rsd_str_c("m00000000000002");
    d.protected_models = &pm;
    d.n_protected = 1;
    REQUIRE(rsd_reconcile_begin(r, &d, 1) == RSD_OK);
    s = rsd_reconcile_next(r, 1);
    REQUIRE(s.kind == RSD_STEP_HTTP && s.http.op == RSD_OP_LIST);
    (void)rsd_reconcile_feed(r, RSD_OK, 200, body, sizeof body - 1, 1);
    s = rsd_reconcile_next(r, 1);
    REQUIRE(s.kind == RSD_STEP_HTTP);
    CHECK_EQ_INT(s.http.op, RSD_OP_UNLOAD);
    CHECK_EQ_STR(s.http.model, "m00000000000001"); /* a full row, copied whole */
    /* a listed id of 16 bytes: DEGRADED, nothing sent, the limit named */
    REQUIRE(rsd_reconcile_begin(r, &d, 2) == RSD_OK);
    s = rsd_reconcile_next(r, 2);
    REQUIRE(s.kind == RSD_STEP_HTTP && s.http.op == RSD_OP_LIST);
    (void)rsd_reconcile_feed(r, RSD_OK, 200, longer, sizeof longer - 1, 2);
    CHECK_EQ_INT(r->result.error, RSD_ERR_MODEL_ID);
    CHECK_EQ_INT(r->result.outcome, RSD_OUTCOME_DEGRADED);
    CHECK(strstr(r->result.message, "max_id_bytes") != NULL);
    CHECK(!r->result.mutated);
    /* a protected id over the rows: refused at begin */
    pm.model_id = rsd_str_c("m000000000000002");
    CHECK_EQ_INT(rsd_reconcile_begin(r, &d, 3), RSD_ERR_MODEL_ID);
    rc_free(&r);
    lim.max_id_bytes = 15;
    CHECK_EQ_INT(rc_init(&r, &lim), RSD_ERR_ARG);
    lim.max_id_bytes = RSD_MODEL_ID_MAX + 1;
    CHECK_EQ_INT(rsd_reconcile_footprint(&lim), 0);
}

/* max_notices sizes the notices; the ones past it are counted, never written. */
static void test_notices_are_sized_by_the_limits(void) {
    static rsd_reconcile *r;
    rsd_reconcile_limits lim;
    char *big = router_listing(9, 6);
    memset(&lim, 0, sizeof lim);
    lim.max_notices = 1;
    CHECK_EQ_INT(rsd_reconcile_footprint(NULL) - rsd_reconcile_footprint(&lim),
                 (RSD_RECONCILE_MAX_NOTICES - 1) * sizeof(rsd_reconcile_notice) +
                     RSD_RECONCILE_MAX_NOTICES * RSD_RECONCILE_NOTICE_TEXT_AVG - 1024); /* the text: 1 KiB at least */
    lim.max_models = 8; /* 9 entries: DEGRADED, one notice */
    CHECK_EQ_INT(reconcile_on(&lim, big, "m00000", &r), RSD_ERR_LISTING_TRUNCATED);
    CHECK_EQ_INT(r->n_notices, 1);
    CHECK_EQ_INT(r->notices[0].notice.kind, RSD_NOTICE_DEGRADED);
    rsd_reconcile_add_notice(r, RSD_DMSG_CONTEXT, RSD_NOTICE_DEGRADED, RSD_LEVEL_INFO, NULL, "one more");
    CHECK_EQ_INT(r->n_notices, 1);
    CHECK_EQ_INT(r->result.notices_dropped, 1);
    rc_free(&r);
    lim.max_notices = -1;
    CHECK_EQ_INT(rsd_reconcile_footprint(&lim), 0);
    free(big);
}

/* A reconcile that lists body (every entry loaded but the keep) and must make room for
   keep on a server holding one model: the steps until the first one that is not the listing. */
static rsd_step reconcile_full(rsd_reconcile *r, const char *body, const char *keep, const char *const *ours, int n_ours) {
    rsd_reconcile_desc d;
    rsd_step s;
    desc_for(&d, keep, 1);
    d.ours = ours;
    d.n_ours = n_ours;
    memset(&s, 0, sizeof s);
    if (rsd_reconcile_begin(r, &d, 1) != RSD_OK) return s;
    s = rsd_reconcile_next(r, 1);
    if (s.kind != RSD_STEP_HTTP || s.http.op != RSD_OP_LIST) return s;
    (void)rsd_reconcile_feed(r, RSD_OK, 200, body, strlen(body), 1);
    return rsd_reconcile_next(r, 1);
}

/* A listing of n loaded entries with ids of idlen bytes (m0..), then the keep "k" unloaded. */
static char *listing_and_keep(int n, int idlen, char ids[][RSD_MODEL_ID_MAX]) {
    char *b = router_listing(n, idlen);
    size_t len = strlen(b);
    int i;
    b = (char *)realloc(b, len + 64);
    snprintf(b + len - 2, 64, ",{\"id\":\"k\",\"status\":{\"value\":\"unloaded\"}}]}");
    for (i = 0; i < n; i++) snprintf(ids[i], RSD_MODEL_ID_MAX, "m%0*d", idlen - 1, i);
    return b;
}

/* The id arena keeps each id once: 63 ids of 120 bytes that are both ours and the
   victims fit the defaults' 8 KiB; the bytes used are exactly one copy of each. */
static void test_id_arena_keeps_each_id_once(void) {
    static rsd_reconcile *r;
    static char ids[63][RSD_MODEL_ID_MAX];
    const char *ours[63];
    char *body = listing_and_keep(63, 120, ids);
    rsd_step s;
    int i;
    for (i = 0; i < 63; i++) ours[i] = ids[i];
    REQUIRE(rc_init(&r, NULL) == RSD_OK);
    CHECK_EQ_INT(r->ids_cap, RSD_LISTING_DEFAULT_MODELS * RSD_RECONCILE_IDS_PER_MODEL);
    s = reconcile_full(r, body, "k", ours, 63);
    CHECK_EQ_INT(s.kind, RSD_STEP_HTTP);
    CHECK_EQ_INT(s.http.op, RSD_OP_UNLOAD);
    CHECK_EQ_INT(r->n_victims, 63);
    CHECK_EQ_INT(r->ids_used, 63 * (120 + 2)); /* ours and victims: one copy (plus length and NUL) */
    CHECK(!r->ids_full);
    for (i = 0; i < 63; i++) { /* each victim is the very string of its ours entry */
        int k, same = 0;
        for (k = 0; k < 63; k++) same += r->victims[i] == r->ours[k];
        CHECK_EQ_INT(same, 1);
    }
    rc_free(&r);
    free(body);
}

/* Ids over the id arena: the victims that do not fit degrade naming the limit, nothing
   unloaded; desc ids that do not fit are refused by begin naming it; the arena is never
   written past its end (ids_used <= ids_cap; ASan sees the block at its exact size). */
static void test_id_arena_over_its_limit_is_a_clear_error(void) {
    static rsd_reconcile *r;
    static char ids[20][RSD_MODEL_ID_MAX];
    rsd_reconcile_limits lim;
    rsd_reconcile_desc d;
    rsd_protected_model pm[RSD_MAX_PROTECTED];
    char pid[RSD_MAX_PROTECTED][40];
    char *body = listing_and_keep(20, 100, ids);
    rsd_step s;
    int i;
    memset(&lim, 0, sizeof lim);
    lim.id_arena_bytes = 1023;
    CHECK_EQ_INT(rsd_reconcile_footprint(&lim), 0);
    lim.id_arena_bytes = 1024;
    CHECK_EQ_INT(rsd_reconcile_footprint(NULL) - rsd_reconcile_footprint(&lim),
                 RSD_LISTING_DEFAULT_MODELS * RSD_RECONCILE_IDS_PER_MODEL - 1024);
    REQUIRE(rc_init(&r, &lim) == RSD_OK);
    s = reconcile_full(r, body, "k", NULL, 0); /* 20 victims of 100 bytes: 2040 bytes */
    CHECK_EQ_INT(s.kind, RSD_STEP_DONE);
    CHECK_EQ_INT(r->result.outcome, RSD_OUTCOME_DEGRADED);
    CHECK_EQ_INT(r->result.error, RSD_ERR_TOO_LARGE);
    CHECK(strstr(r->result.message, "id_arena_bytes") != NULL);
    CHECK(!r->result.mutated);
    CHECK_EQ_INT(r->result.n_evicted, 0);
    CHECK(r->ids_used <= r->ids_cap);
    /* 64 protected ids of 30 bytes: 2048 bytes */
    memset(&d, 0, sizeof d);
    d.base_url = "http://127.0.0.1:8080";
    d.keep = "k";
    for (i = 0; i < RSD_MAX_PROTECTED; i++) {
        snprintf(pid[i], sizeof pid[i], "protected-%020d", i);
        pm[i].model_id = rsd_str_c(pid[i]);
        pm[i].role = RSD_ROLE_NONE;
    }
    d.protected_models = pm;
    d.n_protected = RSD_MAX_PROTECTED;
    CHECK_EQ_INT(rsd_reconcile_begin(r, &d, 2), RSD_ERR_TOO_LARGE);
    CHECK(strstr(r->result.message, "id_arena_bytes") != NULL);
    CHECK_EQ_INT(rsd_reconcile_next(r, 2).kind, RSD_STEP_DONE);
    CHECK(r->ids_used <= r->ids_cap);
    d.n_protected = 30; /* 960 bytes: fits, and the next begin starts the arena afresh */
    CHECK_EQ_INT(rsd_reconcile_begin(r, &d, 3), RSD_OK);
    CHECK_EQ_INT(r->ids_used, 30 * 32);
    CHECK_EQ_INT(rsd_reconcile_begin(r, &d, 4), RSD_OK);
    CHECK_EQ_INT(r->ids_used, 30 * 32);
    { /* the attribution read again under the lock: too many bytes of ids is refused */
        static const char one[] = "{\"data\":[{\"id\":\"k\",\"status\":{\"value\":\"unloaded\"}}]}";
        const char *ours[RSD_MAX_PROTECTED];
        d.lock = true;
        d.n_protected = 0;
        d.capacity_known = true;
        d.max_instances = 4;
        REQUIRE(rsd_reconcile_begin(r, &d, 5) == RSD_OK);
        s = rsd_reconcile_next(r, 5);
        REQUIRE(s.kind == RSD_STEP_HTTP && s.http.op == RSD_OP_LIST);
        (void)rsd_reconcile_feed(r, RSD_OK, 200, one, sizeof one - 1, 5);
        s = rsd_reconcile_next(r, 5);
        REQUIRE(s.kind == RSD_STEP_LOCK);
        for (i = 0; i < RSD_MAX_PROTECTED; i++) ours[i] = pid[i];
        CHECK_EQ_INT(rsd_reconcile_set_ours(r, ours, RSD_MAX_PROTECTED), RSD_ERR_TOO_LARGE);
        CHECK(r->ids_used <= r->ids_cap);
        /* the attribution that did not fit is not acted on: DEGRADED, nothing loaded */
        CHECK_EQ_INT(rsd_reconcile_lock_done(r, true, 0, 5), RSD_OK);
        s = rsd_reconcile_next(r, 5);
        if (s.kind == RSD_STEP_HTTP && s.http.op == RSD_OP_LIST) { /* changed: listed again */
            (void)rsd_reconcile_feed(r, RSD_OK, 200, one, sizeof one - 1, 5);
            s = rsd_reconcile_next(r, 5);
        }
        CHECK_EQ_INT(s.kind, RSD_STEP_UNLOCK);
        CHECK_EQ_INT(r->result.outcome, RSD_OUTCOME_DEGRADED);
        CHECK_EQ_INT(r->result.error, RSD_ERR_TOO_LARGE);
        CHECK(strstr(r->result.message, "id_arena_bytes") != NULL);
        CHECK(!r->result.mutated);
        REQUIRE(rsd_reconcile_begin(r, &d, 6) == RSD_OK); /* the next begin starts afresh */
        s = rsd_reconcile_next(r, 6);
        REQUIRE(s.kind == RSD_STEP_HTTP && s.http.op == RSD_OP_LIST);
        (void)rsd_reconcile_feed(r, RSD_OK, 200, one, sizeof one - 1, 6);
        CHECK_EQ_INT(rsd_reconcile_next(r, 6).kind, RSD_STEP_LOCK);
        CHECK_EQ_INT(rsd_reconcile_set_ours(r, ours, 2), RSD_OK);
        CHECK_EQ_INT(r->cx.n_ours, 2);
        CHECK_EQ_STR(r->ours[1], pid[1]);
    }
    rc_free(&r);
    free(body);
}

/* The notices' text arena: texts kept whole while they fit, the one that finds too little
   room cut (text_cut) to what is left, the next dropped and counted; nothing written past
   the arena. */
static void test_notice_text_arena_cuts_then_drops(void) {
    static rsd_reconcile *r;
    rsd_reconcile_limits lim;
    rsd_reconcile_desc d;
    char line[301];
    int i, base;
    memset(&lim, 0, sizeof lim);
    lim.notice_text_bytes = 1023;
    CHECK_EQ_INT(rsd_reconcile_footprint(&lim), 0);
    lim.notice_text_bytes = 1024;
    REQUIRE(rc_init(&r, &lim) == RSD_OK);
    memset(&d, 0, sizeof d);
    d.base_url = "http://127.0.0.1:8080";
    d.keep = "k";
    REQUIRE(rsd_reconcile_begin(r, &d, 1) == RSD_OK);
    base = r->n_notices;
    CHECK_EQ_INT(base, 0);
    memset(line, 'x', 300);
    line[300] = '\0';
    for (i = 0; i < 3; i++) { /* 3 x 301 bytes, and 3 x 7 of subject "subj-N" */
        char subj[8];
        snprintf(subj, sizeof subj, "subj-%d", i);
        rsd_reconcile_add_notice(r, RSD_DMSG_CONTEXT, RSD_NOTICE_DEGRADED, RSD_LEVEL_INFO, subj, "%d%s", i, line + 1);
        REQUIRE(r->n_notices == i + 1);
        CHECK_EQ_INT(strlen(r->notices[i].text), 300);
        CHECK_EQ_INT(r->notices[i].text[0], '0' + i);
        CHECK_EQ_STR(r->notices[i].subject, subj);
        CHECK(!r->notices[i].text_cut);
    }
    rsd_reconcile_add_notice(r, RSD_DMSG_CONTEXT, RSD_NOTICE_DEGRADED, RSD_LEVEL_INFO, NULL, "%s", line);
    REQUIRE(r->n_notices == 4); /* 1024 - 924 = 100 bytes left: cut to 99 */
    CHECK_EQ_INT(strlen(r->notices[3].text), 99);
    CHECK(strncmp(r->notices[3].text, line, 99) == 0);
    CHECK(r->notices[3].text_cut);
    CHECK_EQ_STR(r->notices[3].subject, "");
    CHECK_EQ_INT(r->ntext_used, r->ntext_cap);
    rsd_reconcile_add_notice(r, RSD_DMSG_CONTEXT, RSD_NOTICE_DEGRADED, RSD_LEVEL_INFO, NULL, "more");
    CHECK_EQ_INT(r->n_notices, 4);
    CHECK_EQ_INT(r->result.notices_dropped, 1);
    for (i = 0; i < r->n_notices; i++)
        CHECK(r->notices[i].text >= r->ntext && r->notices[i].text + strlen(r->notices[i].text) < r->ntext + r->ntext_cap);
    /* the next begin empties it */
    REQUIRE(rsd_reconcile_begin(r, &d, 2) == RSD_OK);
    CHECK_EQ_INT(r->ntext_used, 0);
    rsd_reconcile_add_notice(r, RSD_DMSG_CONTEXT, RSD_NOTICE_DEGRADED, RSD_LEVEL_INFO, NULL, "%s", line);
    CHECK_EQ_INT(strlen(r->notices[0].text), 300);
    rc_free(&r);
}

/* Caller storage of exactly the stated size: ids beyond the arena are cut off (truncated),
   never written past it; more entries than models[] the same. */
static void test_listing_storage_is_never_overrun(void) {
    rsd_listing l;
    rsd_json_tok *toks = (rsd_json_tok *)malloc(4096 * sizeof *toks);
    rsd_listed_model *m = (rsd_listed_model *)malloc(4 * sizeof *m);
    char *arena = (char *)malloc(RSD_MODEL_ID_MAX + 10);
    char *body = router_listing(6, 200);
    int i;
    REQUIRE(toks && m && arena);
    CHECK_EQ_INT(rsd_listing_init(&l, m, 4, arena, 10), RSD_ERR_ARG); /* an arena shorter than one id */
    REQUIRE(rsd_listing_init(&l, m, 4, arena, RSD_MODEL_ID_MAX + 10) == RSD_OK);
    CHECK_EQ_INT(rsd_router_parse_models(body, strlen(body), toks, 4096, &l), RSD_OK);
    CHECK(l.truncated);
    CHECK_EQ_INT(l.n, 1); /* one 200-byte id fits the arena, the second does not */
    CHECK(l.arena_used <= l.arena_bytes);
    for (i = 0; i < l.n; i++) CHECK(l.models[i].id.ptr >= arena && l.models[i].id.ptr + l.models[i].id.len < arena + l.arena_bytes);
    free(body);
    body = router_listing(6, 4);
    CHECK_EQ_INT(rsd_router_parse_models(body, strlen(body), toks, 4096, &l), RSD_OK);
    CHECK(l.truncated);
    CHECK_EQ_INT(l.n, 4); /* models[] holds four */
    CHECK_EQ_INT(l.n_seen, 6);
    {
        static const char ps[] = "{\"models\":[{\"name\":\"a\"},{\"name\":\"b\"},{\"name\":\"c\"},{\"name\":\"d\"},"
                                 "{\"name\":\"e\"}]}";
        CHECK_EQ_INT(rsd_ollama_ps_listing(ps, sizeof ps - 1, toks, 4096, &l), RSD_OK);
    }
    CHECK(l.truncated);
    CHECK_EQ_INT(l.n, 4);
    { /* a listing without storage: an argument error */
        rsd_listing z;
        memset(&z, 0, sizeof z);
        CHECK_EQ_INT(rsd_router_parse_models(body, strlen(body), toks, 4096, &z), RSD_ERR_ARG);
        CHECK_EQ_INT(rsd_ollama_ps_listing("{\"models\":[]}", 13, toks, 4096, &z), RSD_ERR_ARG);
    }
    free(body);
    free(toks);
    free(m);
    free(arena);
}

/* An entry's aliases and tags lie after its id in the arena, each NUL-terminated and
   inside it, also when a protecting tag replaces the last of too many and when the arena
   holds the entry to the byte. */
static void test_listing_names_lie_in_the_arena(void) {
    static const char body[] =
        "{\"data\":[{\"id\":\"m\",\"aliases\":[\"m\",\"a1\",\"a2\"],\"tags\":[\"t1\",\"t2\",\"t3\",\"t4\","
        "\"t5\",\"t6\",\"t7\",\"t8\",\"t9\",\"pinned:true\",\"t11\"],\"status\":{\"value\":\"loaded\"}}]}";
    rsd_json_tok toks[128];
    rsd_listed_model m[1];
    char arena[RSD_MODEL_ID_MAX + 64];
    rsd_listing l;
    size_t need;
    int k;
    memset(arena, '#', sizeof arena);
    REQUIRE(rsd_listing_init(&l, m, 1, arena, sizeof arena) == RSD_OK);
    REQUIRE(rsd_router_parse_models(body, sizeof body - 1, toks, 128, &l) == RSD_OK);
    REQUIRE(l.n == 1);
    CHECK_EQ_INT(m[0].n_aliases, 2); /* the id itself is no alias */
    CHECK_EQ_INT(m[0].n_tags, RSD_MAX_TAGS);
    CHECK(m[0].flags & RSD_LISTED_TAGS_CUT);
    CHECK(rsd_str_eq_c(rsd_listed_alias(&m[0], 1), "a2"));
    CHECK(rsd_str_eq_c(rsd_listed_tag(&m[0], 6), "t7"));
    CHECK(rsd_str_eq_c(rsd_listed_tag(&m[0], RSD_MAX_TAGS - 1), "pinned:true")); /* replaced t8 */
    CHECK_EQ_INT(rsd_listed_tag(&m[0], RSD_MAX_TAGS).len, 0);
    CHECK_EQ_INT(rsd_listed_alias(&m[0], -1).len, 0);
    need = 2 + 3 + 3 + 7 * 3 + 12; /* m a1 a2 t1..t7 pinned:true, each with its NUL */
    CHECK_EQ_INT(l.arena_used, need);
    for (k = 0; k < m[0].n_aliases + m[0].n_tags; k++) {
        rsd_str v = k < m[0].n_aliases ? rsd_listed_alias(&m[0], k) : rsd_listed_tag(&m[0], k - m[0].n_aliases);
        CHECK(v.ptr > arena && v.ptr + v.len < arena + l.arena_used && v.ptr[v.len] == '\0');
    }
    /* an arena that holds the id and all but the last name's NUL: cut off, never overrun */
    memset(arena, '#', sizeof arena);
    REQUIRE(rsd_listing_init(&l, m, 1, arena, RSD_MODEL_ID_MAX) == RSD_OK);
    {
        static char big[4096];
        int o = snprintf(big, sizeof big, "{\"data\":[{\"id\":\"%0200d\",\"aliases\":[\"%055d\"]}]}", 0, 1);
        CHECK_EQ_INT(rsd_router_parse_models(big, (size_t)o, toks, 128, &l), RSD_OK);
        CHECK(l.truncated && l.n == 0);
        CHECK(arena[RSD_MODEL_ID_MAX] == '#');
        o = snprintf(big, sizeof big, "{\"data\":[{\"id\":\"%0200d\",\"aliases\":[\"%054d\"]}]}", 0, 1);
        CHECK_EQ_INT(rsd_router_parse_models(big, (size_t)o, toks, 128, &l), RSD_OK); /* to the byte */
        CHECK(!l.truncated && l.n == 1 && l.arena_used == RSD_MODEL_ID_MAX && m[0].n_aliases == 1);
        CHECK(arena[RSD_MODEL_ID_MAX] == '#');
    }
}

static void test_listing_create_uses_the_allocator(void) {
    counted c;
    rsd_listing_desc d;
    rsd_listing *l;
    memset(&d, 0, sizeof d);
    d.allocator = counting(&c);
    d.max_models = 3;
    REQUIRE((l = rsd_listing_create(&d)) != NULL);
    CHECK_EQ_INT(c.asked, rsd_listing_footprint(&d));
    CHECK_EQ_INT(l->max_models, 3);
    CHECK_EQ_INT(l->arena_bytes, 3 * RSD_LISTING_ARENA_PER_MODEL);
    rsd_listing_destroy(l);
    CHECK_EQ_INT(c.live, 0);
    d.max_models = -2;
    CHECK(rsd_listing_create(&d) == NULL);
    REQUIRE((l = rsd_listing_create(NULL)) != NULL);
    CHECK_EQ_INT(l->max_models, RSD_LISTING_DEFAULT_MODELS);
    rsd_listing_destroy(l);
}

/* The ensurer allocates its reconcile's tables and its client at create, through its allocator. */
static void test_ensurer_allocates_at_create(void) {
    counted c;
    rsd_ensurer_desc d;
    rsd_ensurer *e;
    memset(&d, 0, sizeof d);
    d.allocator = counting(&c);
    d.no_state = true;
    d.ignore_env = true;
    REQUIRE((e = rsd_ensurer_create(&d)) != NULL);
#if !defined(RSD_HTTP_MBEDTLS)
    CHECK_EQ_INT(c.asked, rsd_ensurer_footprint(&d));
#else
    CHECK(c.asked >= rsd_ensurer_footprint(&d)); /* plus TLS's own */
#endif
    rsd_ensurer_destroy(e);
    CHECK_EQ_INT(c.live, 0);
    d.limits.max_models = -1;
    CHECK(rsd_ensurer_create(&d) == NULL);
    CHECK_EQ_INT(rsd_ensurer_footprint(&d), 0);
}

/* rsd_ensurer_footprint is what rsd_ensurer_create allocates in all, its state directory's
   block and etcd's coordinator included: create frees nothing on the way, so what it asked
   is its peak. TLS is off (its configuration is its own). */
static void create_asks_the_footprint(rsd_ensurer_desc *d, const char *what) {
    counted c;
    rsd_ensurer *e;
    d->allocator = counting(&c);
    REQUIRE((e = rsd_ensurer_create(d)) != NULL);
    if (c.asked != rsd_ensurer_footprint(d) || c.live != c.asked)
        printf("  %s: create asked %lu (%lu live), the footprint says %lu\n", what, (unsigned long)c.asked,
               (unsigned long)c.live, (unsigned long)rsd_ensurer_footprint(d));
    CHECK_EQ_INT(c.asked, rsd_ensurer_footprint(d));
    CHECK_EQ_INT(c.live, c.asked);
    CHECK_EQ_INT(rsd_ensurer_has_state(e), !d->no_state);
    rsd_ensurer_destroy(e);
    CHECK_EQ_INT(c.live, 0);
}

static void test_ensurer_footprint_is_all_create_allocates(void) {
    char dir[256], file[300];
    rsd_ensurer_desc d;
    rsd_ensurer *e;
    counted c;
    FILE *f;
    REQUIRE(tp_temp_dir("sizes", dir, sizeof dir) == 0);
    memset(&d, 0, sizeof d);
    d.ignore_env = true;
    d.http.tls_off = true;
    d.state_dir = dir;
    create_asks_the_footprint(&d, "defaults");
    d.runtime = RSD_RUNTIME_LLAMACPP;
    create_asks_the_footprint(&d, "runtime LLAMACPP");
    d.runtime = RSD_RUNTIME_AUTO;
    d.coord = "etcd://127.0.0.1:9/sizes"; /* create sends nothing: no etcd is needed */
    create_asks_the_footprint(&d, "coord");
    d.no_state = true;
    create_asks_the_footprint(&d, "coord, no_state");
    d.coord = NULL;
    create_asks_the_footprint(&d, "no_state");
    d.runtime = RSD_RUNTIME_LLAMACPP;
    create_asks_the_footprint(&d, "no_state, runtime LLAMACPP");
    /* a state directory that cannot be opened (under a regular file: root cannot either):
       create runs without it and, for a runtime with instances, allocates the in-memory
       instance records in place of the state's block, never more than the footprint says */
    snprintf(file, sizeof file, "%s/file", dir);
    REQUIRE((f = fopen(file, "w")) != NULL);
    fclose(f);
    d.no_state = false;
    snprintf(file, sizeof file, "%s/file/state", dir);
    d.state_dir = file;
    {
        static const rsd_runtime_kind kinds[3] = {RSD_RUNTIME_AUTO, RSD_RUNTIME_LMSTUDIO, RSD_RUNTIME_LLAMACPP};
        static const uint32_t arenas[3] = {0, 1024, RSD_STATE_ATTR_ARENA_MAX};
        int k, a;
        for (k = 0; k < 3; k++)
            for (a = 0; a < 3; a++) {
                size_t attr = arenas[a] ? arenas[a] : RSD_STATE_ATTR_ARENA_DEFAULT;
                bool inst = kinds[k] != RSD_RUNTIME_LLAMACPP;
                d.runtime = kinds[k];
                d.attr_arena_bytes = arenas[a];
                d.allocator = counting(&c);
                REQUIRE((e = rsd_ensurer_create(&d)) != NULL);
                CHECK(!rsd_ensurer_has_state(e));
                CHECK(c.asked <= rsd_ensurer_footprint(&d));
                CHECK_EQ_INT(c.asked, rsd_ensurer_footprint(&d) - state_block(attr) +
                                          (inst ? rsdi_en_mem_bytes(attr) : 0));
                CHECK_EQ_INT(e->mem_cap, inst ? attr : 0);
                rsd_ensurer_destroy(e);
                CHECK_EQ_INT(c.live, 0);
            }
        d.runtime = RSD_RUNTIME_AUTO;
        d.attr_arena_bytes = 0;
    }
    tp_remove_tree(dir);
}

/* The coordinator's buffers hold what its sets hold: a record whose ids fill the arena, every
   id byte escaped and the longest numbers, formats into its text, goes into one request and
   twice into the answer's values; the client has a slot for each request in flight. */
static void test_etcd_buffers_hold_what_the_arena_holds(void) {
    static const uint32_t arenas[4] = {1024, RSD_STATE_ATTR_ARENA_DEFAULT, 20000, RSD_STATE_ATTR_ARENA_MAX};
    static char ids[RSD_STATE_ATTR_ARENA_MAX], text[RSD_STATE_MAX_FILE_BYTES + 1];
    int k;
    for (k = 0; k < 4; k++) {
        rsd_etcd_desc cd;
        rsdi_etcd_sizes z;
        rsd_attr_set set;
        rsd_http_client_desc hd;
        char model[RSD_STATE_MAX_ID_BYTES + 1], inst[RSD_STATE_MAX_ID_BYTES + 1];
        size_t per, ml, il, i;
        int r;
        memset(&cd, 0, sizeof cd);
        cd.url = "etcd://127.0.0.1:9";
        cd.attr_arena_bytes = arenas[k];
        rsdi_etcd_sizes_of(&cd, &z);
        CHECK_EQ_INT(z.arena, rsdi_al8(arenas[k]));
        REQUIRE(rsd_attr_set_init(&set, ids, z.arena) == RSD_OK);
        per = z.arena / RSD_STATE_MAX_ATTR; /* each entry's share: a model and an instance with their NULs */
        ml = (per - 2) / 2 > RSD_STATE_MAX_ID_BYTES ? RSD_STATE_MAX_ID_BYTES : (per - 2) / 2;
        il = per - 2 - ml > RSD_STATE_MAX_ID_BYTES ? RSD_STATE_MAX_ID_BYTES : per - 2 - ml;
        for (i = 0; i < RSD_STATE_MAX_ATTR; i++, set.count++) {
            memset(model, 1, ml); /* written \x01 */
            memset(inst, 1, il);
            model[ml] = inst[il] = '\0';
            model[0] = (char)(0x40 + (i & 63)); /* distinct */
            REQUIRE(rsdi_attr_set_put(&set, set.count, model, inst, UINT64_MAX, INT64_MAX));
        }
        CHECK(set.arena_used + RSD_STATE_MAX_ATTR * 2 > z.arena || ml == RSD_STATE_MAX_ID_BYTES);
        r = rsdi_attr_format(&set, text, z.text);
        CHECK(r > 0 && (size_t)r <= z.text);
        CHECK(rsdi_b64_len((size_t)r) + 4096 <= z.req);
        CHECK(2 * (size_t)r <= z.vals);
        CHECK(rsdi_b64_len(z.vals) <= z.body);
        hd = rsdi_etcd_http_desc(&cd);
        CHECK_EQ_INT(hd.max_requests, 3); /* the operation's, a keepalive and a release */
        CHECK(hd.max_request_bytes >= z.req);
    }
}

/* The in-memory instance records (no state directory) hold "key NUL model NUL instance NUL"
   each in attr_arena_bytes: a record is replaced, removed and read back by its key; one that
   does not fit is not remembered, and the others stay whole. */
static void test_ensurer_mem_records(void) {
    rsd_ensurer_desc d;
    rsd_ensurer *e;
    rsd_attr_ref a;
    char model[300], inst[300];
    int i;
    memset(&d, 0, sizeof d);
    d.no_state = true;
    d.ignore_env = true;
    d.runtime = RSD_RUNTIME_LMSTUDIO;
    d.attr_arena_bytes = 1024;
    REQUIRE((e = rsd_ensurer_create(&d)) != NULL);
    REQUIRE(e->mem && e->mem_cap == 1024 && e->mem_used == 0);
    memset(&a, 0, sizeof a);
    a.model = model;
    a.instance = inst;
    strcpy(e->key, "lmstudio|http://h:1");
    for (i = 0; i < 3; i++) {
        snprintf(model, sizeof model, "m%d", i);
        snprintf(inst, sizeof inst, "i%d", i);
        rsdi_en_mem_set(e, &a, true);
    }
    strcpy(e->key, "lmstudio|http://h:2");
    strcpy(model, "other");
    strcpy(inst, "i1"); /* the same instance id on another target: its own record */
    rsdi_en_mem_set(e, &a, true);
    strcpy(e->key, "lmstudio|http://h:1");
    strcpy(model, "m1b"); /* i1 again: replaced */
    rsdi_en_mem_set(e, &a, true);
    strcpy(inst, "i0");
    rsdi_en_mem_set(e, &a, false);
    rsdi_en_read_attr(e);
    REQUIRE(e->n_owned == 2);
    CHECK(strcmp(e->owned[0].model, "m2") == 0 && strcmp(e->owned[0].instance, "i2") == 0);
    CHECK(strcmp(e->owned[1].model, "m1b") == 0 && strcmp(e->owned[1].instance, "i1") == 0);
    /* fill it: what does not fit is dropped whole */
    memset(model, 'x', 250);
    model[250] = '\0';
    for (i = 0; i < 8; i++) {
        snprintf(inst, sizeof inst, "big%d", i);
        rsdi_en_mem_set(e, &a, true);
    }
    CHECK(e->mem_used <= e->mem_cap);
    CHECK(e->mem_used + strlen(e->key) + 1 + 251 + strlen(inst) + 1 > e->mem_cap);
    rsdi_en_read_attr(e);
    CHECK(e->n_owned >= 3 && e->n_owned < 2 + 8);
    for (i = 2; i < e->n_owned; i++) CHECK_EQ_INT(strlen(e->owned[i].model), 250);
    CHECK(strcmp(e->owned[0].model, "m2") == 0 && strcmp(e->owned[1].model, "m1b") == 0);
    strcpy(e->key, "lmstudio|http://h:2");
    rsdi_en_read_attr(e);
    REQUIRE(e->n_owned == 1);
    CHECK(strcmp(e->owned[0].model, "other") == 0 && strcmp(e->owned[0].instance, "i1") == 0);
    rsd_ensurer_destroy(e);
}

/* The ensurer's client is sized for one ensure: its HTTP step and the /models/sse stream;
   the step's answers go to one buffer as large as the reconcile parses. */
static void test_ensurer_client_fits_one_ensure(void) {
    rsd_ensurer_desc d;
    rsd_ensurer *e;
    char *body = real_router_listing(64, 120);
    memset(&d, 0, sizeof d);
    d.no_state = true;
    d.ignore_env = true;
    REQUIRE((e = rsd_ensurer_create(&d)) != NULL);
    CHECK_EQ_INT(rsd_ensurer_http(e)->nreqs, 2);
    CHECK_EQ_INT(rsd_ensurer_http(e)->nconns, 2);
    CHECK_EQ_INT(e->rc->max_body, RSD_RECONCILE_BODY_BYTES); /* the answers' buffer: the reconcile's */
    CHECK(e->ans == e->rc->ans && e->ans_cap == e->rc->max_body);
    CHECK(e->rc->max_body < strlen(body));                    /* a listing is read as it arrives */
    CHECK(rsd_ensurer_http(e)->desc.max_request_bytes >=
          (size_t)RSD_RECONCILE_URL_MAX + RSD_RECONCILE_BEARER_MAX + RSD_RECONCILE_BODY_MAX);
    rsd_ensurer_destroy(e);
    free(body);
}

/* The ensurer's block holds only what its desc asks for: no decision cache with no_cache,
   the protected ids at their own length (copied: the desc's strings may go). */
static void test_ensurer_block_follows_the_desc(void) {
    rsd_ensurer_desc d;
    rsd_ensurer *e;
    rsd_protected_model pm[2];
    char *a = (char *)malloc(8), *b = (char *)malloc(300);
    size_t base, set_region, big_region, det = rsdi_al8(sizeof(rsd_detect));
    memset(&d, 0, sizeof d);
    d.no_state = true;
    d.ignore_env = true;
    base = rsd_ensurer_footprint(&d);
    /* a state directory: the attribution (last uses and a lease go to the state's scratch),
       and no in-memory instance records (those serve only without one) */
    /* detection's state and the attribution (the set, then its arena of attr_arena_bytes)
       share one region, the larger of the two (runtime AUTO detects) */
    set_region = rsdi_al8(sizeof(rsd_attr_set)) + RSD_STATE_ATTR_ARENA_DEFAULT;
    big_region = rsdi_al8(sizeof(rsd_attr_set)) + RSD_STATE_ATTR_ARENA_MAX;
    /* and the state's own block, its scratch set's arena as large as the ensurer's */
    d.no_state = false;
    CHECK_EQ_INT(rsd_ensurer_footprint(&d) + rsdi_en_mem_bytes(RSD_STATE_ATTR_ARENA_DEFAULT) - base,
                 (set_region > det ? set_region - det : 0) + state_block(RSD_STATE_ATTR_ARENA_DEFAULT));
    d.attr_arena_bytes = RSD_STATE_ATTR_ARENA_MAX;
    CHECK_EQ_INT(rsd_ensurer_footprint(&d) + rsdi_en_mem_bytes(RSD_STATE_ATTR_ARENA_DEFAULT) - base,
                 big_region - det + state_block(RSD_STATE_ATTR_ARENA_MAX));
    REQUIRE((e = rsd_ensurer_create(&d)) != NULL);
    CHECK(e->attr_arena == (char *)e->attrs + rsdi_al8(sizeof(rsd_attr_set)));
    CHECK_EQ_INT(e->attr_arena_bytes, RSD_STATE_ATTR_ARENA_MAX);
    rsd_ensurer_destroy(e);
    d.attr_arena_bytes = 0;
    REQUIRE((e = rsd_ensurer_create(&d)) != NULL);
    CHECK(e->attrs && (void *)e->attrs == (void *)e->detect && !e->mem_own);
    CHECK_EQ_INT(e->attr_arena_bytes, RSD_STATE_ATTR_ARENA_DEFAULT);
    rsd_ensurer_destroy(e);
    d.no_state = true;
    REQUIRE((e = rsd_ensurer_create(&d)) != NULL);
    CHECK(!e->attrs && e->detect && e->mem && e->mem_cap == RSD_STATE_ATTR_ARENA_DEFAULT);
    rsd_ensurer_destroy(e);
    d.coord = "etcd://127.0.0.1:9"; /* etcd: the attribution only, and the coordinator's own */
    {
        rsd_etcd_desc cd = rsdi_en_etcd_desc(&d, d.coord, RSD_STATE_ATTR_ARENA_DEFAULT);
        CHECK_EQ_INT(rsd_ensurer_footprint(&d) + rsdi_en_mem_bytes(RSD_STATE_ATTR_ARENA_DEFAULT) - base,
                     (set_region > det ? set_region - det : 0) + rsdi_etcd_footprint(&cd));
    }
    d.coord = NULL;
    d.runtime = RSD_RUNTIME_LLAMACPP; /* no instances: no records */
    CHECK_EQ_INT(rsd_ensurer_footprint(&d) + rsdi_en_mem_bytes(RSD_STATE_ATTR_ARENA_DEFAULT) <= base, 1);
    d.no_state = false; /* one runtime: the region is the attribution's alone, its arena the desc's */
    {
        size_t one = rsd_ensurer_footprint(&d);
        d.attr_arena_bytes = RSD_STATE_ATTR_ARENA_MAX;
        CHECK_EQ_INT(rsd_ensurer_footprint(&d) - one, 2 * (RSD_STATE_ATTR_ARENA_MAX - RSD_STATE_ATTR_ARENA_DEFAULT));
        d.attr_arena_bytes = 0;
    }
    d.no_state = true;
    REQUIRE((e = rsd_ensurer_create(&d)) != NULL);
    CHECK(!e->mem && !e->mem_cap && !e->detect); /* one runtime: never detects */
    rsd_ensurer_destroy(e);
    d.runtime = RSD_RUNTIME_AUTO;
    d.no_cache = true;
    CHECK_EQ_INT(base - rsd_ensurer_footprint(&d), rsdi_al8(sizeof(rsd_decision_cache)));
    REQUIRE((e = rsd_ensurer_create(&d)) != NULL);
    CHECK(e->cache == NULL);
    rsd_ensurer_destroy(e);
    d.no_cache = false;
    strcpy(a, "emb");
    memset(b, 'x', 254);
    b[254] = '\0';
    memset(pm, 0, sizeof pm);
    pm[0].model_id = rsd_str_c(a);
    pm[0].role = RSD_ROLE_MEMORY;
    pm[1].model_id = rsd_str_c(b);
    d.protected_models = pm;
    d.n_protected = 2;
    CHECK_EQ_INT(rsd_ensurer_footprint(&d) - base, 4 + 255);
    REQUIRE((e = rsd_ensurer_create(&d)) != NULL);
    memset(a, 'z', 3);
    memset(b, 'z', 254);
    free(a);
    free(b);
    CHECK_EQ_INT(e->n_protected, 2);
    CHECK(rsd_str_eq(e->prot[0].model_id, rsd_str_c("emb")));
    CHECK_EQ_INT(e->prot[0].role, RSD_ROLE_MEMORY);
    CHECK_EQ_INT(e->prot[1].model_id.len, 254);
    CHECK(e->prot[1].model_id.ptr[0] == 'x' && e->prot[1].model_id.ptr[253] == 'x' && e->prot[1].model_id.ptr[254] == '\0');
    rsd_ensurer_destroy(e);
    d.n_protected = 3; /* more than protected_models holds is the caller's bug; NULL with a count is refused */
    d.protected_models = NULL;
    CHECK_EQ_INT(rsd_ensurer_footprint(&d), 0);
    CHECK(rsd_ensurer_create(&d) == NULL);
}

/* An ensurer for one runtime: no LM Studio state for a router, and a request naming
   another runtime refused with the desc field to change. */
static void test_ensurer_for_one_runtime(void) {
    rsd_ensurer_desc d;
    rsd_ensurer *e;
    rsd_ensure_req q;
    rsd_ensure_result res;
    size_t any;
    memset(&d, 0, sizeof d);
    d.no_state = true;
    d.ignore_env = true;
    any = rsd_ensurer_footprint(&d);
    d.runtime = RSD_RUNTIME_LLAMACPP;
    /* LM Studio's reconcile state, the in-memory instance records and detection's state */
    CHECK_EQ_INT(any - rsd_ensurer_footprint(&d), rsdi_al8(sizeof(rsd_lms_machine)) +
                 rsdi_en_mem_bytes(RSD_STATE_ATTR_ARENA_DEFAULT) + rsdi_al8(sizeof(rsd_detect)));
    REQUIRE((e = rsd_ensurer_create(&d)) != NULL);
    CHECK(e->rc->lms == NULL);
    CHECK(e->mem == NULL);
    memset(&q, 0, sizeof q);
    q.url = "http://127.0.0.1:9";
    q.model = "a";
    q.runtime = RSD_RUNTIME_LMSTUDIO;
    CHECK_EQ_INT(rsd_ensurer_begin(e, &q, 1), RSD_ERR_ARG);
    rsd_ensurer_query(e, &res);
    CHECK(strstr(res.message, "rsd_ensurer_desc.runtime") != NULL);
    rsd_ensurer_destroy(e);
    d.runtime = (rsd_runtime_kind)RSD_RUNTIME_KIND_NUM;
    CHECK(rsd_ensurer_create(&d) == NULL);
    CHECK_EQ_INT(rsd_ensurer_footprint(&d), 0);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    RUN(test_manual_size_figures);
    RUN(test_cache_entry_text_is_never_overrun);
    RUN(test_own_last_uses_fit_their_text);
    RUN(test_init_in_the_callers_memory);
    RUN(test_ensurer_footprint_is_all_create_allocates);
    RUN(test_ensurer_mem_records);
    RUN(test_etcd_buffers_hold_what_the_arena_holds);
    RUN(test_listing_names_lie_in_the_arena);
    RUN(test_defaults_hold_an_ollama_listing_of_64);
    RUN(test_begin_without_init_is_a_clear_error);
    RUN(test_listing_over_the_limits_degrades_with_a_clear_error);
    RUN(test_listing_storage_is_never_overrun);
    RUN(test_listing_create_uses_the_allocator);
    RUN(test_ensurer_allocates_at_create);
    RUN(test_defaults_hold_a_real_router_listing_of_64);
    RUN(test_runtime_limit_drops_lm_studio_state);
    RUN(test_ensurer_client_fits_one_ensure);
    RUN(test_ensurer_for_one_runtime);
    RUN(test_ensurer_block_follows_the_desc);
    RUN(test_id_rows_are_sized_by_the_limits);
    RUN(test_notices_are_sized_by_the_limits);
    RUN(test_id_arena_keeps_each_id_once);
    RUN(test_id_arena_over_its_limit_is_a_clear_error);
    RUN(test_notice_text_arena_cuts_then_drops);
    return RSD_TEST_END();
}
