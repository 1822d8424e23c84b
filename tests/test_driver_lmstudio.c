/* test_driver_lmstudio.c -- the LM Studio reconcile (rsd_reconcile_* with rsd_runtime_lmstudio()) against
   a scripted LM Studio modelled on the upstream fake (F1-F10) and wire.md 4
   (W38-W47); no sockets, fake clock. Upstream cases 6.5 (clamp), 6.6 (REST
   residency), 6.7 (instance resolution) by number, the W fixes (W1, W13-W16,
   W19), and hostile catalogs (degrade, never mutate). */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include "rsd_test.h"
#include <stdarg.h>

enum { FE_MAX = 300, FI_MAX = 8, LOG_MAX = 64 };
typedef struct finst { char id[80]; int ctx; } finst;
typedef struct fentry {
    char key[64];
    char type[16];
    int max_ctx;
    finst inst[FI_MAX];
    int ninst;
} fentry;
typedef struct fake_lms {
    fentry e[FE_MAX];
    int n;
    bool v03;                    /* LM Studio 0.3: no /api/v1 */
    bool v1_200_error;           /* 0.3 answering /api/v1/models 200 + error (S6) */
    const char *token;           /* auth required with this bearer */
    int fail_loads;              /* F5: next loads answer 507 insufficient VRAM */
    int load_timeouts;           /* next loads: the client times out, the load lands */
    int unload_status;           /* != 0: unloads answer this */
    int list_fail_transport;     /* != 0: every GET fails with it */
    const char *list_body;       /* canned body for every GET (hostile catalogs) */
    void (*at_lock)(struct fake_lms *f);
    uint64_t gen;
    char log[LOG_MAX][300];
    int nlog, posts, gets, loads, unloads, locks, unlocks, commits, unauthorized_ok;
    uint32_t load_timeout_ms;
} fake_lms;

static uint64_t NOW;
static rsd_reconcile R;
static rsd_json_tok TOK[4096];
static char BODY[131072];

static fentry *fe_add(fake_lms *f, const char *key, const char *type, int max_ctx) {
    fentry *e = &f->e[f->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->key, sizeof e->key, "%s", key);
    snprintf(e->type, sizeof e->type, "%s", type);
    e->max_ctx = max_ctx;
    return e;
}
static void fe_inst(fentry *e, const char *id, int ctx) {
    snprintf(e->inst[e->ninst].id, sizeof e->inst[0].id, "%.79s", id);
    e->inst[e->ninst++].ctx = ctx;
}
/* F2 with hostIdentity=dynamo: the dynamo duplicate first */
static void fl_init(fake_lms *f) {
    fentry *e;
    memset(f, 0, sizeof *f);
    e = fe_add(f, "qwen3.8-27b", "llm", 131072);
    fe_inst(e, "qwen3.8-27b-dynamo", 131072);
    e = fe_add(f, "qwen3.8-27b", "llm", 262144);
    fe_inst(e, "qwen3.8-27b-zbook", 262144);
    fe_add(f, "coder-unloaded", "llm", 65536);
    fe_add(f, "embedding-model", "embedding", 8192);
}
static void fl_empty(fake_lms *f) {
    memset(f, 0, sizeof *f);
    fe_add(f, "coder-unloaded", "llm", 262144);
}
static fentry *fl_entry(fake_lms *f, const char *key) {
    int i;
    for (i = 0; i < f->n; i++)
        if (strcmp(f->e[i].key, key) == 0) return &f->e[i];
    return NULL;
}
static bool fl_has_inst(fake_lms *f, const char *id) {
    int i, k;
    for (i = 0; i < f->n; i++)
        for (k = 0; k < f->e[i].ninst; k++)
            if (strcmp(f->e[i].inst[k].id, id) == 0) return true;
    return false;
}
static void fo_log(fake_lms *f, const char *fmt, ...) {
    va_list ap;
    if (f->nlog >= LOG_MAX) return;
    va_start(ap, fmt);
    vsnprintf(f->log[f->nlog++], sizeof f->log[0], fmt, ap);
    va_end(ap);
}
static size_t fl_v1(fake_lms *f) {
    size_t n = 0;
    int i, k;
    n += (size_t)snprintf(BODY + n, sizeof BODY - n, "{\"models\":[");
    for (i = 0; i < f->n; i++) {
        fentry *e = &f->e[i];
        n += (size_t)snprintf(BODY + n, sizeof BODY - n, "%s{\"type\":\"%s\",\"key\":\"%s\",\"display_name\":\"x\","
                              "\"max_context_length\":%d,\"loaded_instances\":[", i ? "," : "", e->type, e->key, e->max_ctx);
        for (k = 0; k < e->ninst; k++)
            n += (size_t)snprintf(BODY + n, sizeof BODY - n, "%s{\"id\":\"%s\",\"config\":{\"context_length\":%d}}",
                                  k ? "," : "", e->inst[k].id, e->inst[k].ctx);
        n += (size_t)snprintf(BODY + n, sizeof BODY - n, "]}");
    }
    n += (size_t)snprintf(BODY + n, sizeof BODY - n, "]}");
    return n;
}
static size_t fl_v0(fake_lms *f) {
    size_t n = 0;
    int i, k, rows = 0;
    n += (size_t)snprintf(BODY + n, sizeof BODY - n, "{\"object\":\"list\",\"data\":[");
    for (i = 0; i < f->n; i++) {
        fentry *e = &f->e[i];
        for (k = 0; k < e->ninst; k++)
            n += (size_t)snprintf(BODY + n, sizeof BODY - n, "%s{\"id\":\"%s\",\"object\":\"model\",\"type\":\"%s\","
                                  "\"state\":\"loaded\",\"loaded_context_length\":%d,\"max_context_length\":%d}",
                                  rows++ ? "," : "", e->inst[k].id, e->type, e->inst[k].ctx, e->max_ctx);
        n += (size_t)snprintf(BODY + n, sizeof BODY - n, "%s{\"id\":\"%s\",\"object\":\"model\",\"type\":\"%s\","
                              "\"state\":\"not-loaded\",\"max_context_length\":%d}", rows++ ? "," : "", e->key, e->type,
                              e->max_ctx);
    }
    n += (size_t)snprintf(BODY + n, sizeof BODY - n, "]}");
    return n;
}
#define ANSWER(st, txt) do { *status = (st); *body = (txt); *len = strlen(*body); return; } while (0)

static void fl_http(fake_lms *f, const rsd_step_http *h, int *transport, int *status, const char **body, size_t *len) {
    const char *path = strstr(h->url, "://");
    int i;
    bool authed = !f->token;
    path = path ? strchr(path + 3, '/') : "";
    *transport = RSD_OK;
    for (i = 0; i < h->n_headers; i++)
        if (strcmp(h->headers[i].name, "Authorization") == 0 && f->token) {
            char want[128];
            snprintf(want, sizeof want, "Bearer %s", f->token);
            authed = strcmp(h->headers[i].value, want) == 0;
        }
    if (strcmp(h->method, "GET") == 0) {
        f->gets++;
        fo_log(f, "GET %s", path);
        if (f->list_fail_transport) { *transport = f->list_fail_transport; *status = 0; *body = ""; *len = 0; return; }
        if (!authed) ANSWER(401, "{\"error\":\"Authentication required\"}");
        if (f->list_body) ANSWER(200, f->list_body);
        if (strcmp(path, "/api/v1/models") == 0) {
            if (f->v1_200_error) ANSWER(200, "{\"error\":\"Unexpected endpoint or method. (GET /api/v1/models)\"}");
            if (f->v03) ANSWER(404, "{\"error\":\"Not found\"}");
            *status = 200;
            *len = fl_v1(f);
            *body = BODY;
            return;
        }
        if (strcmp(path, "/api/v0/models") == 0) {
            *status = 200;
            *len = fl_v0(f);
            *body = BODY;
            return;
        }
        ANSWER(200, "{\"error\":\"Unexpected endpoint or method. (GET /v1/models)\"}");
    }
    f->posts++;
    fo_log(f, "POST %s %.*s", path, (int)h->body_len, h->body);
    if (!authed) ANSWER(401, "{\"error\":\"Authentication required\"}");
    {
        rsd_json_doc d;
        char s[128];
        REQUIRE(h->n_headers >= 1 && strcmp(h->headers[0].value, "application/json") == 0);
        REQUIRE(rsd_json_parse(&d, h->body, h->body_len, TOK, 4096) > 0);
        if (strcmp(path, "/api/v1/models/load") == 0 && !f->v03) {
            int64_t ctx = 0;
            fentry *e;
            f->loads++;
            f->load_timeout_ms = h->timeout_ms;
            REQUIRE(rsd_json_str(&d, rsd_json_find(&d, 0, "model"), s, sizeof s, NULL) == RSD_OK);
            (void)rsd_json_int64(&d, rsd_json_find(&d, 0, "context_length"), &ctx);
            if (f->fail_loads > 0) { f->fail_loads--; ANSWER(507, "{\"error\":\"insufficient VRAM\"}"); }
            e = fl_entry(f, s);
            if (!e) ANSWER(404, "{\"error\":\"model not found\"}");
            snprintf(BODY, sizeof BODY, "%s:clio", s);
            fe_inst(e, BODY, ctx ? (int)ctx : e->max_ctx);
            NOW += 3000; /* loads take a while */
            if (f->load_timeouts > 0) { f->load_timeouts--; *transport = RSD_ERR_TIMEOUT; *status = 0; *body = ""; *len = 0; return; }
            *status = 200;
            *len = (size_t)snprintf(BODY, sizeof BODY, "{\"type\":\"llm\",\"instance_id\":\"%s:clio\",\"load_time_seconds\":3.0,"
                                    "\"status\":\"loaded\",\"load_config\":{\"context_length\":%d}}", s, ctx ? (int)ctx : e->max_ctx);
            *body = BODY;
            return;
        }
        if (strcmp(path, "/api/v1/models/unload") == 0 && !f->v03) {
            int k;
            f->unloads++;
            REQUIRE(rsd_json_str(&d, rsd_json_find(&d, 0, "instance_id"), s, sizeof s, NULL) == RSD_OK);
            if (f->unload_status) ANSWER(f->unload_status, "{\"error\":{\"type\":\"internal_error\",\"message\":\"nope\"}}");
            for (i = 0; i < f->n; i++)
                for (k = 0; k < f->e[i].ninst; k++)
                    if (strcmp(f->e[i].inst[k].id, s) == 0) {
                        memmove(&f->e[i].inst[k], &f->e[i].inst[k + 1], (size_t)(f->e[i].ninst - k - 1) * sizeof(finst));
                        f->e[i].ninst--;
                        k--;
                    }
            *status = 200;
            *len = (size_t)snprintf(BODY, sizeof BODY, "{\"unloaded\":\"%s\"}", s);
            *body = BODY;
            return;
        }
        *status = 200;
        *len = (size_t)snprintf(BODY, sizeof BODY, "{\"error\":\"Unexpected endpoint or method. (POST %s)\"}", path);
        *body = BODY;
    }
}

static void desc_init(rsd_reconcile_desc *d, const char *model) {
    memset(d, 0, sizeof *d);
    d->base_url = "http://dynamo:1234/v1";
    d->target_id = "dynamo";
    d->runtime = rsd_runtime_lmstudio();
    d->keep = model;
    d->lock = true;
}
static void explicit_ctx(rsd_reconcile_desc *d, uint32_t ctx) {
    d->explicit_load = true;
    d->context_length = ctx;
}

static int drive(fake_lms *f, const rsd_reconcile_desc *d) {
    int guard, rc;
    f->nlog = f->posts = f->gets = f->loads = f->unloads = f->locks = f->unlocks = f->commits = 0;
    rc = rsd_reconcile_begin(&R, d, NOW);
    if (rc < 0) return rc;
    for (guard = 0; guard < 500; guard++) {
        rsd_step s = rsd_reconcile_next(&R, NOW), again;
        int tr = 0, st = 0;
        const char *body = "";
        size_t len = 0;
        switch (s.kind) {
        case RSD_STEP_HTTP:
            again = rsd_reconcile_next(&R, NOW);
            CHECK(again.kind == RSD_STEP_HTTP && again.http.url == s.http.url);
            CHECK(s.http.timeout_ms >= 1);
            fl_http(f, &s.http, &tr, &st, &body, &len);
            NOW += 1;
            CHECK_EQ_INT(rsd_reconcile_feed(&R, tr, st, body, len, NOW), RSD_OK);
            break;
        case RSD_STEP_WAIT:
            NOW = s.wake_ms > NOW ? s.wake_ms : NOW;
            break;
        case RSD_STEP_LOCK:
            f->locks++;
            fo_log(f, "LOCK");
            if (f->at_lock) f->at_lock(f);
            CHECK_EQ_INT(rsd_reconcile_lock_done(&R, true, f->gen, NOW), RSD_OK);
            break;
        case RSD_STEP_COMMIT:
            f->commits++;
            fo_log(f, "COMMIT");
            break;
        case RSD_STEP_UNLOCK:
            f->unlocks++;
            fo_log(f, "UNLOCK");
            break;
        case RSD_STEP_DONE:
            CHECK_EQ_INT(f->locks, f->unlocks);
            CHECK(R.result.outcome != RSD_OUTCOME_NONE);
            return s.result;
        default:
            CHECK(0);
            return -999;
        }
    }
    CHECK(0);
    return -998;
}
static const char *joined(fake_lms *f) {
    static char buf[16384];
    size_t n = 0;
    int i;
    buf[0] = '\0';
    for (i = 0; i < f->nlog; i++) n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", n ? " | " : "", f->log[i]);
    return buf;
}
/* The kind of the first notice whose text holds s, or -1. */
static int notice_kind_of(const char *s) {
    int i;
    for (i = 0; i < R.n_notices; i++)
        if (strstr(R.notices[i].text, s)) return (int)R.notices[i].notice.kind;
    return -1;
}
static bool any_notice_has(const char *s) { return notice_kind_of(s) >= 0; }
static const char *unloads_of(fake_lms *f) {
    static char buf[2048];
    size_t n = 0;
    int i;
    buf[0] = '\0';
    for (i = 0; i < f->nlog; i++)
        if (strstr(f->log[i], "/unload "))
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", n ? " | " : "", strstr(f->log[i], "{"));
    return buf;
}

/* ---- 6.5: the context-fit clamp through the driver ----------------------- */
static void test_6_5_1_alone_is_never_clamped(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    fl_empty(&f);
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 262144);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(strstr(joined(&f), "\"context_length\":262144") != NULL);
    CHECK_EQ_INT(R.result.load_context, 262144);
    CHECK(!any_notice_has("clamped"));
}
static void test_6_5_2_clamps_beside_another_model(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    fl_init(&f);
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 262144);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(strstr(joined(&f), "{\"model\":\"coder-unloaded\",\"echo_load_config\":true,\"context_length\":131072}") != NULL);
    CHECK(any_notice_has("loading 'coder-unloaded' alongside qwen3.8-27b: context clamped 262144 to 131072 tokens"));
}
static void test_6_5_3_never_raises_a_request_that_fits(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    fl_init(&f);
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 32768);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(strstr(joined(&f), "\"context_length\":32768}") != NULL);
}
static void test_6_5_4_5_ceiling_override_and_off(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    fl_init(&f);
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 262144);
    d.context_ceiling = rsd_fit_ceiling_parse("196608");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(strstr(joined(&f), "\"context_length\":196608}") != NULL);
    fl_init(&f);
    d.context_ceiling = rsd_fit_ceiling_parse("off");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(strstr(joined(&f), "\"context_length\":262144}") != NULL);
}

/* ---- 6.6: REST residency -------------------------------------------------- */
static void test_6_6_11_no_load_settings_keeps_server_jit(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    fl_init(&f);
    desc_init(&d, "coder-unloaded");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.posts, 0);
    CHECK_EQ_INT(R.result.outcome, RSD_OUTCOME_OBSERVED);
    CHECK_EQ_INT(R.result.state, RSD_LMS_JIT);
    CHECK_EQ_STR(R.result.wire_id, "coder-unloaded");
    CHECK_EQ_INT(f.locks, 0);
}
static void test_6_6_12_exact_body_once_with_bearer(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    fl_init(&f);
    f.token = "secret";
    desc_init(&d, "coder-unloaded");
    d.explicit_load = true;
    d.load.flash_attention = RSD_LMS_FLAG_TRUE;
    d.load.eval_batch_size = 512;
    d.bearer = "secret";
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.loads, 1);
    CHECK_EQ_STR(joined(&f), "GET /api/v1/models | LOCK | GET /api/v1/models | "
                             "POST /api/v1/models/load {\"model\":\"coder-unloaded\",\"echo_load_config\":true,"
                             "\"flash_attention\":true,\"eval_batch_size\":512} | COMMIT | UNLOCK");
    CHECK_EQ_STR(R.result.wire_id, "coder-unloaded:clio");
    REQUIRE(R.result.n_attr_add == 1);
    CHECK_EQ_STR(R.result.attr_add[0].model, "coder-unloaded");
    CHECK_EQ_STR(R.result.attr_add[0].instance, "coder-unloaded:clio");
}
static void test_6_6_3_auth_required(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    fl_init(&f);
    f.token = "secret";
    desc_init(&d, "qwen3.8-27b");
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_AUTH);
    CHECK_EQ_INT(R.result.outcome, RSD_OUTCOME_DEGRADED);
    CHECK_EQ_INT(f.gets, 1);             /* 401 stops tier detection */
    CHECK(strstr(R.result.message, "authentication required") != NULL);
    d.bearer = "wrong";
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_AUTH);
    d.bearer = "secret";
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(R.result.wire_id, "qwen3.8-27b-dynamo");
}
static void test_6_6_13_lm_link_same_key_is_observe_only(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    fl_init(&f);
    desc_init(&d, "qwen3.8-27b");
    explicit_ctx(&d, 131072);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.loads + f.unloads, 0);
    CHECK_EQ_INT(R.result.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_STR(R.result.wire_id, "qwen3.8-27b-dynamo");
    CHECK(any_notice_has("LM Studio resolved 'qwen3.8-27b' to loaded instance 'qwen3.8-27b-dynamo' on target 'dynamo'."));
}
static void test_6_6_14_retry_without_releasing_foreign_instances(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    fl_init(&f);
    f.fail_loads = 1;
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 32768);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.loads, 2);
    CHECK_EQ_INT(f.unloads, 0);
    /* W14: a listing between the failure and the retry */
    CHECK(strstr(joined(&f), "insufficient") == NULL);
    CHECK(strstr(joined(&f), "context_length\":32768} | GET /api/v1/models | POST /api/v1/models/load") != NULL);
    CHECK(any_notice_has("insufficient VRAM"));
    CHECK_EQ_STR(R.result.wire_id, "coder-unloaded:clio");
}
static void test_6_6_15_releases_only_an_instance_we_loaded(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    rsd_owned owned[1];
    char om[RSD_MODEL_ID_MAX], oi[RSD_MODEL_ID_MAX];
    fl_init(&f);
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 32768);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    REQUIRE(R.result.n_attr_add == 1);
    snprintf(om, sizeof om, "%s", R.result.attr_add[0].model);  /* persisted by the shell (W16) */
    snprintf(oi, sizeof oi, "%s", R.result.attr_add[0].instance);
    owned[0].model = om;
    owned[0].instance = oi;
    f.fail_loads = 1;
    desc_init(&d, "embedding-model");
    d.explicit_load = true;
    d.owned = owned;
    d.n_owned = 1;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(unloads_of(&f), "{\"instance_id\":\"coder-unloaded:clio\"}");
    CHECK(fl_has_inst(&f, "qwen3.8-27b-dynamo") && fl_has_inst(&f, "qwen3.8-27b-zbook"));
    REQUIRE(R.result.n_attr_remove == 1);
    CHECK_EQ_STR(R.result.attr_remove[0].instance, "coder-unloaded:clio");
    REQUIRE(R.result.n_attr_add == 1);
    CHECK_EQ_STR(R.result.attr_add[0].instance, "embedding-model:clio");
    CHECK_EQ_INT(R.result.n_evicted, 1);
    CHECK(!R.result.evicted[0].restored);
}
static void test_6_6_16_v0_server_is_observe_only(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    fl_init(&f);
    f.v03 = true;
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 32768);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.posts, 0);
    CHECK_EQ_INT(R.result.tier, RSD_LMS_TIER_V0);
    CHECK_EQ_INT(R.result.outcome, RSD_OUTCOME_OBSERVED);
    CHECK_EQ_STR(joined(&f), "GET /api/v1/models | GET /api/v0/models");
}
/* S6: a 0.3 server answers v1 with 200 + error: detection by shape falls through */
static void test_S6_v1_200_with_error_falls_through(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    fl_init(&f);
    f.v1_200_error = true;
    desc_init(&d, "qwen3.8-27b");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(R.result.tier, RSD_LMS_TIER_V0);
    CHECK_EQ_STR(joined(&f), "GET /api/v1/models | GET /api/v0/models");
    /* v0 rows (S11): the bare key row is not loaded, so the key stays JIT */
    CHECK_EQ_STR(R.result.wire_id, "qwen3.8-27b");
    CHECK_EQ_INT(R.result.state, RSD_LMS_JIT);
}

/* ---- 6.7: instance resolution --------------------------------------------- */
static void test_6_7_2_bare_key_resolves_to_host_default_without_loading(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    fl_init(&f);
    desc_init(&d, "qwen3.8-27b");
    d.default_model = "qwen3.8-27b-zbook";
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(R.result.wire_id, "qwen3.8-27b-zbook");
    CHECK_EQ_INT(f.posts, 0);
    d.default_model = "qwen3.8-27b-dynamo";
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(R.result.wire_id, "qwen3.8-27b-dynamo");
}
static void test_6_7_4_catalogued_key_without_instances_keeps_jit(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    fl_init(&f);
    desc_init(&d, "coder-unloaded");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(R.result.wire_id, "coder-unloaded");
    CHECK_EQ_INT(R.result.state, RSD_LMS_JIT);
    CHECK_EQ_INT(f.posts, 0);
}
static void test_6_7_5_cross_host_instance_flagged_as_lm_link_peer(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    rsd_lms_peer peer;
    rsd_str zb[2];
    fl_init(&f);
    zb[0] = rsd_str_c("qwen3.8-27b-zbook");
    zb[1] = rsd_str_c("qwen3.8-27b-dynamo");
    peer.target_id = rsd_str_c("zbook");
    peer.instance_ids = zb;
    peer.n_instance_ids = 2;
    desc_init(&d, "qwen3.8-27b-zbook");
    d.peers = &peer;
    d.n_peers = 1;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(R.result.wire_id, "qwen3.8-27b-zbook");
    CHECK(any_notice_has("LM Studio instance 'qwen3.8-27b-zbook' is also loaded on zbook; this request may be served "
                         "by that LM Link peer."));
}
static void test_6_7_6_unadvertised_model_refused_before_completion(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    fl_init(&f);
    desc_init(&d, "nope");
    explicit_ctx(&d, 4096);
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_NOT_SERVED);
    CHECK_EQ_INT(R.result.outcome, RSD_OUTCOME_DECLINED);
    CHECK(strstr(R.result.message, "Resident instances: qwen3.8-27b-dynamo, qwen3.8-27b-zbook") != NULL);
    CHECK_EQ_INT(f.posts, 0);
}

/* ---- W fixes ---------------------------------------------------------------- */
/* W13: long load timeout; a load that lands after the client gave up is adopted */
static void test_W13_long_load_and_late_landing_adopted(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    fl_init(&f);
    f.load_timeouts = 1;
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 32768);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(f.load_timeout_ms > 250000);
    CHECK_EQ_INT(f.loads, 1);                        /* no second instance */
    CHECK(R.result.adopted);
    CHECK_EQ_STR(R.result.wire_id, "coder-unloaded:clio");
    CHECK_EQ_INT(R.result.n_attr_add, 1);
}
/* W15: free the minimum, one candidate at a time (ours ranked first) */
static void test_W15_unloads_one_candidate_at_a_time(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    rsd_owned owned[2];
    fl_init(&f);
    fe_inst(fe_add(&f, "a-model", "llm", 32768), "a-model:clio", 8192);
    fe_inst(fe_add(&f, "b-model", "llm", 32768), "b-model:clio", 8192);
    owned[0].model = "a-model";
    owned[0].instance = "a-model:clio";
    owned[1].model = "b-model";
    owned[1].instance = "b-model:clio";
    f.fail_loads = 1;
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 32768);
    d.owned = owned;
    d.n_owned = 2;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.unloads, 1);
    CHECK_EQ_STR(unloads_of(&f), "{\"instance_id\":\"a-model:clio\"}");
    CHECK(fl_has_inst(&f, "b-model:clio"));
    CHECK_EQ_INT(f.loads, 2);
}
/* W14: restore what was unloaded when every retry failed */
static void test_W14_restore_after_failed_retries(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    rsd_owned owned[1];
    fl_init(&f);
    fe_inst(fe_add(&f, "a-model", "llm", 32768), "a-model:clio", 8192);
    owned[0].model = "a-model";
    owned[0].instance = "a-model:clio";
    f.fail_loads = 2;
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 32768);
    d.owned = owned;
    d.n_owned = 1;
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_SERVER_ERROR == RSD_ERR_SERVER_ERROR ? R.result.error : 0);
    CHECK_EQ_INT(R.result.outcome, RSD_OUTCOME_LOAD_FAILED);
    CHECK_EQ_STR(R.result.message, "insufficient VRAM");
    CHECK(strstr(joined(&f), "POST /api/v1/models/load {\"model\":\"a-model\",\"echo_load_config\":true,\"context_length\":8192}") != NULL);
    CHECK(fl_has_inst(&f, "a-model:clio"));
    CHECK(R.result.n_evicted == 1 && R.result.evicted[0].restored);
    CHECK(any_notice_has("restored 'a-model'"));
    CHECK_EQ_INT(notice_kind_of("restored 'a-model'"), RSD_NOTICE_RESTORED);
    {
        int i, load_failed = 0;
        for (i = 0; i < R.n_notices; i++)
            if (R.notices[i].notice.kind == RSD_NOTICE_LOAD_FAILED) load_failed++;
        CHECK(load_failed >= 1);
    }
    CHECK(R.result.n_attr_remove == 1 && R.result.n_attr_add == 1);
    CHECK_EQ_STR(R.result.attr_add[0].instance, "a-model:clio");
    CHECK_EQ_INT(f.commits, 1);
}
/* W19: observe never loads, even with explicit load settings (upstream S34 did) */
static void test_W19_observe_never_loads(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    fl_init(&f);
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 262144);
    d.residency_env = "observe";
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.posts, 0);
    CHECK_EQ_INT(f.locks, 0);
    CHECK_EQ_INT(R.result.outcome, RSD_OUTCOME_OBSERVED);
    CHECK_EQ_INT(R.result.decision, RSD_DECISION_OBSERVE);
    CHECK_EQ_STR(R.result.wire_id, "coder-unloaded");
    d.residency_env = NULL;
    d.user_managed = true;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.posts, 0);
}
/* W1: an instance loaded by someone else while we waited for the lock is used */
static void at_lock_other_loads(fake_lms *f) { fe_inst(fl_entry(f, "coder-unloaded"), "coder-unloaded", 4096); f->gen++; }
static void test_W1_relist_under_lock_uses_instance_loaded_meanwhile(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    fl_init(&f);
    f.at_lock = at_lock_other_loads;
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 4096);
    d.has_generation = true;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.loads, 0);
    CHECK(R.result.redecided);
    CHECK_EQ_STR(R.result.wire_id, "coder-unloaded");
    CHECK_EQ_INT(R.result.n_attr_add, 0);             /* not ours */
}
static void test_W1_unchanged_generation_skips_relist(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    fl_init(&f);
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 4096);
    d.has_generation = true;
    d.generation = f.gen;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.gets, 1);
    CHECK_EQ_INT(f.loads, 1);
}
/* unload failures: a warning, the next candidate is tried */
static void test_unload_failure_moves_to_next_candidate(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    rsd_owned owned[2];
    fl_init(&f);
    fe_inst(fe_add(&f, "a-model", "llm", 32768), "a-model:clio", 8192);
    fe_inst(fe_add(&f, "b-model", "llm", 32768), "b-model:clio", 8192);
    owned[0].model = "a-model";
    owned[0].instance = "a-model:clio";
    owned[1].model = "b-model";
    owned[1].instance = "b-model:clio";
    f.fail_loads = 1;
    f.unload_status = 500;
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 32768);
    d.owned = owned;
    d.n_owned = 2;
    (void)drive(&f, &d);
    CHECK(R.result.unload_failed);
    CHECK(any_notice_has("unloading instance 'a-model:clio' of 'a-model' on 'dynamo' failed: nope"));
    CHECK_EQ_INT(f.unloads, 2);                       /* a failed, then b tried */
    CHECK_EQ_INT(R.result.n_attr_remove, 0);
}
/* a dead server costs one request, not three tiers */
static void test_transport_error_stops_detection(void) {
    fake_lms f;
    rsd_reconcile_desc d;
    fl_init(&f);
    f.list_fail_transport = RSD_ERR_CONNECT;
    desc_init(&d, "qwen3.8-27b");
    explicit_ctx(&d, 4096);
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_CONNECT);
    CHECK_EQ_INT(R.result.outcome, RSD_OUTCOME_DEGRADED);
    CHECK_EQ_INT(f.gets, 1);
    CHECK_EQ_INT(f.posts, 0);
}
/* hostile catalogs: degrade with a notice, never mutate */
static void test_hostile_catalogs_degrade_and_never_mutate(void) {
    static char huge[80000];
    const char *bodies[8];
    size_t n = 0;
    int i;
    n += (size_t)snprintf(huge + n, sizeof huge - n, "{\"models\":[");
    for (i = 0; i < 400; i++)
        n += (size_t)snprintf(huge + n, sizeof huge - n, "%s{\"key\":\"m%d\",\"loaded_instances\":[{\"id\":\"m%d\"}]}", i ? "," : "", i, i);
    snprintf(huge + n, sizeof huge - n, "]}");
    bodies[0] = "[]";
    bodies[1] = "{\"models\":{}}";
    bodies[2] = "<html>";
    bodies[3] = "{\"models\":[{\"key\":\"a\"";
    bodies[4] = "{\"error\":{\"type\":\"internal_error\",\"message\":\"x\"}}";
    bodies[5] = "{\"models\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}";
    bodies[6] = huge;   /* more models with instances than RSD_MAX_RESIDENTS */
    bodies[7] = "";
    for (i = 0; i < 8; i++) {
        fake_lms f;
        rsd_reconcile_desc d;
        fl_init(&f);
        f.list_body = bodies[i];
        desc_init(&d, "coder-unloaded");
        explicit_ctx(&d, 4096);
        (void)drive(&f, &d);
        CHECK_EQ_INT(f.posts, 0);
        CHECK_EQ_INT(f.locks, 0);
        if (!(R.result.outcome == RSD_OUTCOME_DEGRADED || R.result.outcome == RSD_OUTCOME_DECLINED) || R.n_notices < 1)
            printf("  hostile body %d: outcome %s, %d notices\n", i, rsd_outcome_str(R.result.outcome), R.n_notices);
        CHECK(R.result.outcome == RSD_OUTCOME_DEGRADED || R.result.outcome == RSD_OUTCOME_DECLINED);
        CHECK(R.n_notices >= 1);
    }
}
static void test_begin_rejects_bad_desc(void) {
    rsd_reconcile_desc d;
    desc_init(&d, "m");
    d.base_url = NULL;
    CHECK_EQ_INT(rsd_reconcile_begin(&R, &d, 0), RSD_ERR_ARG);
    CHECK(rsd_reconcile_next(&R, 0).kind == RSD_STEP_DONE);
    desc_init(&d, "");
    CHECK_EQ_INT(rsd_reconcile_begin(&R, &d, 0), RSD_ERR_MODEL_ID);
    desc_init(&d, "m");
    d.bearer = "a\nb";
    CHECK_EQ_INT(rsd_reconcile_begin(&R, &d, 0), RSD_ERR_ARG);
    desc_init(&d, "m");
    d.base_url = "http://h/?x";
    CHECK_EQ_INT(rsd_reconcile_begin(&R, &d, 0), RSD_ERR_URL);
    desc_init(&d, "m");
    CHECK_EQ_INT(rsd_reconcile_begin(&R, &d, 0), RSD_OK);
    CHECK_EQ_STR(R.key, "lmstudio|http://dynamo:1234");
    CHECK_EQ_INT(rsd_reconcile_feed(&R, RSD_OK, 200, "{}", 2, 0), RSD_OK);
    CHECK_EQ_INT(rsd_reconcile_lock_done(&R, true, 0, 0), RSD_ERR_STATE);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    if (rsd_reconcile_init(&R, NULL) != RSD_OK) return 1; /* its tables, with the defaults */
    NOW = 1000;
    RUN(test_6_5_1_alone_is_never_clamped);
    RUN(test_6_5_2_clamps_beside_another_model);
    RUN(test_6_5_3_never_raises_a_request_that_fits);
    RUN(test_6_5_4_5_ceiling_override_and_off);
    RUN(test_6_6_11_no_load_settings_keeps_server_jit);
    RUN(test_6_6_12_exact_body_once_with_bearer);
    RUN(test_6_6_3_auth_required);
    RUN(test_6_6_13_lm_link_same_key_is_observe_only);
    RUN(test_6_6_14_retry_without_releasing_foreign_instances);
    RUN(test_6_6_15_releases_only_an_instance_we_loaded);
    RUN(test_6_6_16_v0_server_is_observe_only);
    RUN(test_S6_v1_200_with_error_falls_through);
    RUN(test_6_7_2_bare_key_resolves_to_host_default_without_loading);
    RUN(test_6_7_4_catalogued_key_without_instances_keeps_jit);
    RUN(test_6_7_5_cross_host_instance_flagged_as_lm_link_peer);
    RUN(test_6_7_6_unadvertised_model_refused_before_completion);
    RUN(test_W13_long_load_and_late_landing_adopted);
    RUN(test_W15_unloads_one_candidate_at_a_time);
    RUN(test_W14_restore_after_failed_retries);
    RUN(test_W19_observe_never_loads);
    RUN(test_W1_relist_under_lock_uses_instance_loaded_meanwhile);
    RUN(test_W1_unchanged_generation_skips_relist);
    RUN(test_unload_failure_moves_to_next_candidate);
    RUN(test_transport_error_stops_detection);
    RUN(test_hostile_catalogs_degrade_and_never_mutate);
    RUN(test_begin_rejects_bad_desc);
    return RSD_TEST_END();
}
