/* test_driver_lmstudio.c -- the LM Studio reconcile (rsd_reconcile_* with rsd_runtime_lmstudio())
   against LM Studio as apps/rsd-sim/rsd_sim.h models it (in-process, no sockets, simulated clock;
   tests/sim_step.h): the context-fit clamp, REST residency, instance resolution, long loads,
   one unload at a time, restores, the re-list under the lock, and hostile catalogs (degrade,
   never mutate). Instance ids are the wire's: a first instance is named by its key, an LM Link
   peer's entry is listed with its own id (rsd_sim.h: "<key>-<host>"). What the network or a
   hostile server does (a transport error, a lost answer, a canned body) is injected at the
   transport, between the machine and the simulator. */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency.h"
#include "../apps/rsd-sim/rsd_sim.h"
#include "rsd_test.h"
#include "sim_step.h"
#include <stdarg.h>

enum { LOG_MAX = 64 };
/* What the test injects at the transport, and what it saw the machine send. */
typedef struct lms_wire {
    int list_fail_transport;     /* != 0: every GET fails with it */
    const char *list_body;       /* canned body for every GET (hostile catalogs) */
    int load_answers_lost;       /* next loads: the load lands, its answer is lost (a client timeout) */
    void (*at_lock)(struct lms_wire *f);
    uint64_t gen;
    char log[LOG_MAX][300];
    int nlog, posts, gets, loads, unloads, locks, unlocks, commits;
    uint32_t load_timeout_ms;
} lms_wire;


/* LM Studio 0.4 with the REST API; loads take 3000 ms. Two LM Link entries share the key
   qwen3.8-27b (hostIdentity dynamo and zbook, each with an instance loaded), and two local
   entries are not loaded. The models are added, the server is started by lm_start. */
static void lm_new(lms_wire *f) {
    memset(f, 0, sizeof *f);
    rsim_init(&S, RSIM_RT_LMSTUDIO);
    S.o.load_ms = 3000;
    S.o.fail_load_status = 507; /* an over-budget load: "insufficient VRAM" */
}
static void lm_model(const char *spec) { REQUIRE(rsim_add_model(&S, spec) >= 0); }
static void lm_start(void) { rsim_start(&S, NOW); }
static void lm_init(lms_wire *f) {
    lm_new(f);
    lm_model("id=qwen3.8-27b,host=dynamo,loaded=1,ctx=131072,ctx_train=131072");
    lm_model("id=qwen3.8-27b,host=zbook,loaded=1,ctx=262144,ctx_train=262144");
    lm_model("id=coder-unloaded,ctx=65536,ctx_train=65536");
    lm_model("id=embedding-model,embedding=1,ctx=8192,ctx_train=8192");
    lm_start();
}
static void lm_empty(lms_wire *f) {
    lm_new(f);
    lm_model("id=coder-unloaded,ctx=262144,ctx_train=262144");
    lm_start();
}
/* A local model with one instance loaded (by an earlier reconcile of ours): its id is the key. */
static void lm_loaded(const char *key, uint32_t ctx) {
    char spec[160];
    int i;
    snprintf(spec, sizeof spec, "id=%s,ctx=32768,ctx_train=32768", key);
    lm_model(spec);
    i = rsim_find(&S, key);
    REQUIRE(i >= 0 && rsim_l_add_inst(&S, i, ctx, false, 0) == 0);
}
static void lm_key(const char *key) { /* requests need "Authorization: Bearer KEY" */
    snprintf(S.o.keys[0], sizeof S.o.keys[0], "%s", key);
    S.o.nkeys = 1;
}
/* Whether an instance with this id is listed (local or an LM Link peer's). */
static bool lm_has_inst(const char *id) {
    int i, k;
    rsim_tick(&S, NOW);
    for (i = 0; i < S.nmodels; i++)
        for (k = 0; k < S.m[i].ninst; k++)
            if (strcmp(S.m[i].inst[k].id, id) == 0) return true;
    return false;
}
static void lm_log(lms_wire *f, const char *fmt, ...) {
    va_list ap;
    if (f->nlog >= LOG_MAX) return;
    va_start(ap, fmt);
    vsnprintf(f->log[f->nlog++], sizeof f->log[0], fmt, ap);
    va_end(ap);
}

/* One HTTP step: logged as the machine sent it, the injections first, else LM Studio's
   answer from the simulator. */
static void lm_http(lms_wire *f, const rsd_step_http *h, int *transport, int *status, const char **body,
                    size_t *len) {
    const char *path = strstr(h->url, "://");
    path = path ? strchr(path + 3, '/') : "";
    *transport = RSD_OK;
    *status = 0;
    *body = RB;
    if (strcmp(h->method, "GET") == 0) {
        f->gets++;
        lm_log(f, "GET %s", path);
        if (f->list_fail_transport) { *transport = f->list_fail_transport; *body = ""; *len = 0; return; }
        if (f->list_body) { *status = 200; *body = f->list_body; *len = strlen(f->list_body); return; }
    } else {
        f->posts++;
        lm_log(f, "POST %s %.*s", path, (int)h->body_len, h->body);
        REQUIRE(h->n_headers >= 1 && strcmp(h->headers[0].value, "application/json") == 0);
        if (strcmp(path, "/api/v1/models/load") == 0) {
            f->loads++;
            f->load_timeout_ms = h->timeout_ms;
        }
        if (strcmp(path, "/api/v1/models/unload") == 0) f->unloads++;
    }
    sim_http(h, transport, status, len);
    NOW -= 1; /* the driver loop adds the millisecond */
    if (f->load_answers_lost > 0 && strcmp(path, "/api/v1/models/load") == 0 && *transport == RSD_OK) {
        f->load_answers_lost--;   /* the server loaded it; the client gave up before the answer */
        *transport = RSD_ERR_TIMEOUT;
        *status = 0;
        *len = 0;
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

static int drive(lms_wire *f, const rsd_reconcile_desc *d) {
    int guard, rc;
    f->nlog = f->posts = f->gets = f->loads = f->unloads = f->locks = f->unlocks = f->commits = 0;
    rc = rsd_reconcile_begin(R, d, NOW);
    if (rc < 0) return rc;
    for (guard = 0; guard < 500; guard++) {
        rsd_step s = rsd_reconcile_next(R, NOW), again;
        int tr = 0, st = 0;
        const char *body = "";
        size_t len = 0;
        switch (s.kind) {
        case RSD_STEP_HTTP:
            again = rsd_reconcile_next(R, NOW);
            CHECK(again.kind == RSD_STEP_HTTP && again.http.url == s.http.url);
            CHECK(s.http.timeout_ms >= 1);
            lm_http(f, &s.http, &tr, &st, &body, &len);
            NOW += 1;
            CHECK_EQ_INT(rsd_reconcile_feed(R, tr, st, body, len, NOW), RSD_OK);
            break;
        case RSD_STEP_WAIT:
            NOW = s.wake_ms > NOW ? s.wake_ms : NOW;
            break;
        case RSD_STEP_LOCK:
            f->locks++;
            lm_log(f, "LOCK");
            if (f->at_lock) f->at_lock(f);
            CHECK_EQ_INT(rsd_reconcile_lock_done(R, true, f->gen, NOW), RSD_OK);
            break;
        case RSD_STEP_COMMIT:
            f->commits++;
            lm_log(f, "COMMIT");
            break;
        case RSD_STEP_UNLOCK:
            f->unlocks++;
            lm_log(f, "UNLOCK");
            break;
        case RSD_STEP_DONE:
            CHECK_EQ_INT(f->locks, f->unlocks);
            CHECK(RES->outcome != RSD_OUTCOME_NONE);
            return s.result;
        default:
            CHECK(0);
            return -999;
        }
    }
    CHECK(0);
    return -998;
}
static const char *joined(lms_wire *f) {
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
    for (i = 0; i < N_NOTICES; i++)
        if (strstr(NOTICES[i].text, s)) return (int)NOTICES[i].notice.kind;
    return -1;
}
static bool any_notice_has(const char *s) { return notice_kind_of(s) >= 0; }
static const char *unloads_of(lms_wire *f) {
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
    lms_wire f;
    rsd_reconcile_desc d;
    lm_empty(&f);
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 262144);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(strstr(joined(&f), "\"context_length\":262144") != NULL);
    CHECK_EQ_INT(RES->load_context, 262144);
    CHECK(!any_notice_has("clamped"));
}
static void test_6_5_2_clamps_beside_another_model(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    lm_init(&f);
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 262144);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(strstr(joined(&f), "{\"model\":\"coder-unloaded\",\"echo_load_config\":true,\"context_length\":131072}") != NULL);
    CHECK(any_notice_has("loading 'coder-unloaded' alongside qwen3.8-27b: context clamped 262144 to 131072 tokens"));
}
static void test_6_5_3_never_raises_a_request_that_fits(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    lm_init(&f);
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 32768);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(strstr(joined(&f), "\"context_length\":32768}") != NULL);
}
static void test_6_5_4_5_ceiling_override_and_off(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    lm_init(&f);
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 262144);
    d.context_ceiling = rsd_fit_ceiling_parse("196608");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(strstr(joined(&f), "\"context_length\":196608}") != NULL);
    lm_init(&f);
    d.context_ceiling = rsd_fit_ceiling_parse("off");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(strstr(joined(&f), "\"context_length\":262144}") != NULL);
}

/* ---- 6.6: REST residency -------------------------------------------------- */
static void test_6_6_11_no_load_settings_keeps_server_jit(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    lm_init(&f);
    desc_init(&d, "coder-unloaded");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.posts, 0);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_OBSERVED);
    CHECK_EQ_INT(RES->state, RSD_LMS_JIT);
    CHECK_EQ_STR(RES->wire_id, "coder-unloaded");
    CHECK_EQ_INT(f.locks, 0);
}
static void test_6_6_12_exact_body_once_with_bearer(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    lm_init(&f);
    lm_key("secret");
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
    CHECK_EQ_STR(RES->wire_id, "coder-unloaded");
    CHECK_EQ_INT(RES->state, RSD_LMS_INSTANCE); /* the instance we loaded, not the JIT key */
    REQUIRE(RES->n_attr_add == 1);
    CHECK_EQ_STR(RES->attr_add[0].model, "coder-unloaded");
    CHECK_EQ_STR(RES->attr_add[0].instance, "coder-unloaded");
}
static void test_6_6_3_auth_required(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    lm_init(&f);
    lm_key("secret");
    desc_init(&d, "qwen3.8-27b");
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_AUTH);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_DEGRADED);
    CHECK_EQ_INT(f.gets, 1);             /* 401 stops tier detection */
    CHECK(strstr(RES->message, "authentication required") != NULL);
    d.bearer = "wrong";
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_AUTH);
    d.bearer = "secret";
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(RES->wire_id, "qwen3.8-27b-dynamo");
}
static void test_6_6_13_lm_link_same_key_is_observe_only(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    lm_init(&f);
    desc_init(&d, "qwen3.8-27b");
    explicit_ctx(&d, 131072);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.loads + f.unloads, 0);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_STR(RES->wire_id, "qwen3.8-27b-dynamo");
    CHECK(any_notice_has("LM Studio resolved 'qwen3.8-27b' to loaded instance 'qwen3.8-27b-dynamo' on target 'dynamo'."));
}
static void test_6_6_14_retry_without_releasing_foreign_instances(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    lm_init(&f);
    S.o.fail_loads = 1;
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 32768);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.loads, 2);
    CHECK_EQ_INT(f.unloads, 0);
    /* W14: a listing between the failure and the retry */
    CHECK(strstr(joined(&f), "insufficient") == NULL);
    CHECK(strstr(joined(&f), "context_length\":32768} | GET /api/v1/models | POST /api/v1/models/load") != NULL);
    CHECK(any_notice_has("insufficient VRAM"));
    CHECK_EQ_STR(RES->wire_id, "coder-unloaded");
}
static void test_6_6_15_releases_only_an_instance_we_loaded(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    rsd_owned owned[1];
    char om[RSD_MODEL_ID_MAX], oi[RSD_MODEL_ID_MAX];
    lm_init(&f);
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 32768);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    REQUIRE(RES->n_attr_add == 1);
    snprintf(om, sizeof om, "%s", RES->attr_add[0].model);  /* persisted by the shell (W16) */
    snprintf(oi, sizeof oi, "%s", RES->attr_add[0].instance);
    owned[0].model = om;
    owned[0].instance = oi;
    S.o.fail_loads = 1;
    desc_init(&d, "embedding-model");
    d.explicit_load = true;
    d.owned = owned;
    d.n_owned = 1;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(unloads_of(&f), "{\"instance_id\":\"coder-unloaded\"}");
    CHECK(lm_has_inst("qwen3.8-27b-dynamo") && lm_has_inst("qwen3.8-27b-zbook"));
    REQUIRE(RES->n_attr_remove == 1);
    CHECK_EQ_STR(RES->attr_remove[0].instance, "coder-unloaded");
    REQUIRE(RES->n_attr_add == 1);
    CHECK_EQ_STR(RES->attr_add[0].instance, "embedding-model");
    CHECK_EQ_INT(RES->n_evicted, 1);
    CHECK(!RES->evicted[0].restored);
}
static void test_6_6_16_v0_server_is_observe_only(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    lm_init(&f);
    S.o.lms_v03 = true; /* a 0.3 server that answers unknown routes 404 */
    S.o.unknown_404 = true;
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 32768);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.posts, 0);
    CHECK_EQ_INT(RES->tier, RSD_LMS_TIER_V0);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_OBSERVED);
    CHECK_EQ_STR(joined(&f), "GET /api/v1/models | GET /api/v0/models");
}
/* S6: a 0.3 server answers v1 with 200 + error: detection by shape falls through */
static void test_S6_v1_200_with_error_falls_through(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    lm_init(&f);
    S.o.lms_v03 = true; /* unknown routes: 200 with an error */
    desc_init(&d, "qwen3.8-27b");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(RES->tier, RSD_LMS_TIER_V0);
    CHECK_EQ_STR(joined(&f), "GET /api/v1/models | GET /api/v0/models");
    /* v0 rows (S11): one row per model, its key as the id; a loaded row is an instance */
    CHECK_EQ_STR(RES->wire_id, "qwen3.8-27b");
    CHECK_EQ_INT(RES->state, RSD_LMS_INSTANCE);
    /* a not-loaded row keeps the key JIT */
    desc_init(&d, "coder-unloaded");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(RES->tier, RSD_LMS_TIER_V0);
    CHECK_EQ_STR(RES->wire_id, "coder-unloaded");
    CHECK_EQ_INT(RES->state, RSD_LMS_JIT);
}

/* ---- 6.7: instance resolution --------------------------------------------- */
static void test_6_7_2_bare_key_resolves_to_host_default_without_loading(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    lm_init(&f);
    desc_init(&d, "qwen3.8-27b");
    d.default_model = "qwen3.8-27b-zbook";
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(RES->wire_id, "qwen3.8-27b-zbook");
    CHECK_EQ_INT(f.posts, 0);
    d.default_model = "qwen3.8-27b-dynamo";
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(RES->wire_id, "qwen3.8-27b-dynamo");
}
static void test_6_7_4_catalogued_key_without_instances_keeps_jit(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    lm_init(&f);
    desc_init(&d, "coder-unloaded");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(RES->wire_id, "coder-unloaded");
    CHECK_EQ_INT(RES->state, RSD_LMS_JIT);
    CHECK_EQ_INT(f.posts, 0);
}
static void test_6_7_5_cross_host_instance_flagged_as_lm_link_peer(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    rsd_lms_peer peer;
    rsd_str zb[2];
    lm_init(&f);
    zb[0] = rsd_str_c("qwen3.8-27b-zbook");
    zb[1] = rsd_str_c("qwen3.8-27b-dynamo");
    peer.target_id = rsd_str_c("zbook");
    peer.instance_ids = zb;
    peer.n_instance_ids = 2;
    desc_init(&d, "qwen3.8-27b-zbook");
    d.peers = &peer;
    d.n_peers = 1;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(RES->wire_id, "qwen3.8-27b-zbook");
    CHECK(any_notice_has("LM Studio instance 'qwen3.8-27b-zbook' is also loaded on zbook; this request may be served "
                         "by that LM Link peer."));
}
static void test_6_7_6_unadvertised_model_refused_before_completion(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    lm_init(&f);
    desc_init(&d, "nope");
    explicit_ctx(&d, 4096);
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_NOT_SERVED);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_DECLINED);
    CHECK(strstr(RES->message, "Resident instances: qwen3.8-27b-dynamo, qwen3.8-27b-zbook") != NULL);
    CHECK_EQ_INT(f.posts, 0);
}

/* ---- W fixes ---------------------------------------------------------------- */
/* W13: long load timeout; a load that lands after the client gave up is adopted */
static void test_W13_long_load_and_late_landing_adopted(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    lm_init(&f);
    f.load_answers_lost = 1;
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 32768);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(f.load_timeout_ms > 250000);
    CHECK_EQ_INT(f.loads, 1);                        /* no second instance */
    CHECK(RES->adopted);
    CHECK_EQ_STR(RES->wire_id, "coder-unloaded");
    CHECK_EQ_INT(RES->n_attr_add, 1);
}
/* Two owned 8K instances loaded; the keep's first load fails: drives the reconcile. */
static int drive_one_candidate_at_a_time(lms_wire *f) {
    rsd_reconcile_desc d;
    rsd_owned owned[2];
    lm_init(f);
    lm_loaded("a-model", 8192);
    lm_loaded("b-model", 8192);
    owned[0].model = "a-model";
    owned[0].instance = "a-model";
    owned[1].model = "b-model";
    owned[1].instance = "b-model";
    S.o.fail_loads = 1;
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 32768);
    d.owned = owned;
    d.n_owned = 2;
    return drive(f, &d);
}
/* W15: free the minimum, one candidate at a time (ours ranked first) */
static void test_W15_unloads_one_candidate_at_a_time(void) {
    lms_wire f;
    CHECK_EQ_INT(drive_one_candidate_at_a_time(&f), RSD_OK);
    CHECK_EQ_INT(f.unloads, 1);
    CHECK_EQ_STR(unloads_of(&f), "{\"instance_id\":\"a-model\"}");
    CHECK(lm_has_inst("b-model"));
    CHECK_EQ_INT(f.loads, 2);
}
/* W14: restore what was unloaded when every retry failed */
static void test_W14_restore_after_failed_retries(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    rsd_owned owned[1];
    lm_init(&f);
    lm_loaded("a-model", 8192);
    owned[0].model = "a-model";
    owned[0].instance = "a-model";
    S.o.fail_loads = 2;
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 32768);
    d.owned = owned;
    d.n_owned = 1;
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_SERVER_ERROR == RSD_ERR_SERVER_ERROR ? RES->error : 0);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_LOAD_FAILED);
    CHECK_EQ_STR(RES->message, "insufficient VRAM");
    CHECK(strstr(joined(&f), "POST /api/v1/models/load {\"model\":\"a-model\",\"echo_load_config\":true,\"context_length\":8192}") != NULL);
    CHECK(lm_has_inst("a-model"));
    CHECK(RES->n_evicted == 1 && RES->evicted[0].restored);
    CHECK(any_notice_has("restored 'a-model'"));
    CHECK_EQ_INT(notice_kind_of("restored 'a-model'"), RSD_NOTICE_RESTORED);
    {
        int i, load_failed = 0;
        for (i = 0; i < N_NOTICES; i++)
            if (NOTICES[i].notice.kind == RSD_NOTICE_LOAD_FAILED) load_failed++;
        CHECK(load_failed >= 1);
    }
    CHECK(RES->n_attr_remove == 1 && RES->n_attr_add == 1);
    CHECK_EQ_STR(RES->attr_add[0].instance, "a-model");
    CHECK_EQ_INT(f.commits, 1);
}
/* W19: observe never loads, even with explicit load settings (upstream S34 did) */
static void test_W19_observe_never_loads(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    lm_init(&f);
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 262144);
    d.residency_env = "observe";
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.posts, 0);
    CHECK_EQ_INT(f.locks, 0);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_OBSERVED);
    CHECK_EQ_INT(RES->decision, RSD_DECISION_OBSERVE);
    CHECK_EQ_STR(RES->wire_id, "coder-unloaded");
    d.residency_env = NULL;
    d.user_managed = true;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.posts, 0);
}
/* W1: an instance loaded by someone else while we waited for the lock is used */
static void at_lock_other_loads(lms_wire *f) {
    REQUIRE(rsim_l_add_inst(&S, rsim_find(&S, "coder-unloaded"), 4096, false, 0) >= 0);
    f->gen++;
}
static void test_W1_relist_under_lock_uses_instance_loaded_meanwhile(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    lm_init(&f);
    f.at_lock = at_lock_other_loads;
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 4096);
    d.has_generation = true;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.loads, 0);
    CHECK(RES->redecided);
    CHECK_EQ_STR(RES->wire_id, "coder-unloaded");
    CHECK_EQ_INT(RES->state, RSD_LMS_INSTANCE); /* the other client's instance */
    CHECK_EQ_INT(RES->n_attr_add, 0);             /* not ours */
}
static void test_W1_unchanged_generation_skips_relist(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    lm_init(&f);
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 4096);
    d.has_generation = true;
    d.generation = f.gen;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.gets, 1);
    CHECK_EQ_INT(f.loads, 1);
}
/* The owned instances read again under the lock need more than the id arena (64 of 200
   bytes, twice: model and instance; the arena is 8 KiB): set_owned refuses them, and the
   reconcile ends DEGRADED naming id_arena_bytes before anything is unloaded or loaded. */
static char g_big_ids[RSD_RECONCILE_MAX_OWNED][200];
static void at_lock_owned_over_the_arena(lms_wire *f) {
    rsd_owned owned[RSD_RECONCILE_MAX_OWNED];
    int i;
    (void)f;
    for (i = 0; i < RSD_RECONCILE_MAX_OWNED; i++) {
        memset(g_big_ids[i], 'a' + i % 26, sizeof g_big_ids[i] - 4);
        snprintf(g_big_ids[i] + sizeof g_big_ids[i] - 4, 4, "%03d", i);
        owned[i].model = g_big_ids[i];
        owned[i].instance = g_big_ids[i];
    }
    CHECK_EQ_INT(rsd_reconcile_set_owned(R, owned, RSD_RECONCILE_MAX_OWNED), RSD_ERR_TOO_LARGE);
}
static void test_owned_over_the_id_arena_degrades_before_any_change(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    lm_init(&f);
    f.at_lock = at_lock_owned_over_the_arena;
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 4096);
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_TOO_LARGE);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_DEGRADED);
    CHECK_EQ_INT(RES->error, RSD_ERR_TOO_LARGE);
    CHECK(strstr(RES->message, "id_arena_bytes") != NULL);
    CHECK(!RES->mutated);
    CHECK_EQ_INT(f.loads, 0);
    CHECK_EQ_INT(f.unloads, 0);
    lm_init(&f); /* the next begin starts afresh: the same ensure without them loads */
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.loads, 1);
}
/* unload failures: a warning, the next candidate is tried */
static void test_unload_failure_moves_to_next_candidate(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    rsd_owned owned[2];
    lm_init(&f);
    lm_loaded("a-model", 8192);
    lm_loaded("b-model", 8192);
    owned[0].model = "a-model";
    owned[0].instance = "a-model";
    owned[1].model = "b-model";
    owned[1].instance = "b-model";
    S.o.fail_loads = 1;
    REQUIRE(rsim_add_fault(&S, RSIM_F_ERROR, "/api/v1/models/unload=500") == 0);
    desc_init(&d, "coder-unloaded");
    explicit_ctx(&d, 32768);
    d.owned = owned;
    d.n_owned = 2;
    (void)drive(&f, &d);
    CHECK(RES->unload_failed);
    CHECK(any_notice_has("unloading instance 'a-model' of 'a-model' on 'dynamo' failed: injected failure"));
    CHECK_EQ_INT(f.unloads, 2);                       /* a failed, then b tried */
    CHECK_EQ_INT(RES->n_attr_remove, 0);
}
/* a dead server costs one request, not three tiers */
static void test_transport_error_stops_detection(void) {
    lms_wire f;
    rsd_reconcile_desc d;
    lm_init(&f);
    f.list_fail_transport = RSD_ERR_CONNECT;
    desc_init(&d, "qwen3.8-27b");
    explicit_ctx(&d, 4096);
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_CONNECT);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_DEGRADED);
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
        lms_wire f;
        rsd_reconcile_desc d;
        lm_init(&f);
        f.list_body = bodies[i];
        desc_init(&d, "coder-unloaded");
        explicit_ctx(&d, 4096);
        (void)drive(&f, &d);
        CHECK_EQ_INT(f.posts, 0);
        CHECK_EQ_INT(f.locks, 0);
        if (!(RES->outcome == RSD_OUTCOME_DEGRADED || RES->outcome == RSD_OUTCOME_DECLINED) || N_NOTICES < 1)
            printf("  hostile body %d: outcome %s, %d notices\n", i, rsd_outcome_str(RES->outcome), N_NOTICES);
        CHECK(RES->outcome == RSD_OUTCOME_DEGRADED || RES->outcome == RSD_OUTCOME_DECLINED);
        CHECK(N_NOTICES >= 1);
    }
}
/* A router reconcile on R (the same tables): "r-keep" is loaded and polled until listed
   loaded, so the poll listing's storage is written. Its outcome. */
static int router_load_on_R(void) {
    static const char unloaded[] = "{\"data\":[{\"id\":\"r-keep\",\"status\":{\"value\":\"unloaded\"}},"
                                   "{\"id\":\"r-other-with-a-longer-id\",\"status\":{\"value\":\"loaded\"}}]}";
    static const char loaded[] = "{\"data\":[{\"id\":\"r-keep\",\"status\":{\"value\":\"loaded\"}},"
                                 "{\"id\":\"r-other-with-a-longer-id\",\"status\":{\"value\":\"loaded\"}}]}";
    rsd_reconcile_desc d;
    bool posted = false;
    int guard;
    memset(&d, 0, sizeof d);
    d.base_url = "http://127.0.0.1:8080";
    d.keep = "r-keep";
    d.capacity_known = true;
    d.max_instances = 4;
    if (rsd_reconcile_begin(R, &d, NOW) != RSD_OK) return -1;
    for (guard = 0; guard < 50; guard++) {
        rsd_step s = rsd_reconcile_next(R, NOW);
        if (s.kind == RSD_STEP_DONE) return RES->outcome;
        if (s.kind == RSD_STEP_WAIT) NOW = s.wake_ms > NOW ? s.wake_ms : NOW;
        if (s.kind != RSD_STEP_HTTP) continue;
        NOW += 1;
        if (s.http.op == RSD_OP_LOAD) {
            posted = true;
            (void)rsd_reconcile_feed(R, RSD_OK, 200, "{\"success\":true}", 16, NOW);
        } else if (s.http.op == RSD_OP_LIST) {
            const char *b = posted ? loaded : unloaded;
            (void)rsd_reconcile_feed(R, RSD_OK, 200, b, strlen(b), NOW);
        } else {
            return -2;
        }
    }
    return -3;
}

/* LM Studio's catalog lives in the storage of the router's listings (a reconcile uses
   one or the other): router and LM Studio reconciles taking turns on one rsd_reconcile
   each see their own state. */
static void test_catalog_shares_the_listings_storage_with_the_router(void) {
    lms_wire f;
    int round;
    for (round = 0; round < 2; round++) {
        CHECK_EQ_INT(router_load_on_R(), RSD_OUTCOME_RESIDENT); /* the storage holds the router's listings */
        CHECK_EQ_STR(RES->wire_id, "r-keep");
        /* then W15 on LM Studio: its catalog over that storage */
        CHECK_EQ_INT(drive_one_candidate_at_a_time(&f), RSD_OK);
        CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
        CHECK_EQ_STR(unloads_of(&f), "{\"instance_id\":\"a-model\"}");
        CHECK_EQ_INT(RES->n_evicted, 1);
        CHECK_EQ_STR(RES->evicted[0].id, "a-model");
        CHECK_EQ_STR(RES->evicted[0].model, "a-model");
        CHECK_EQ_INT(f.loads, 2);
    }
}

static void test_begin_rejects_bad_desc(void) {
    rsd_reconcile_desc d;
    desc_init(&d, "m");
    d.base_url = NULL;
    CHECK_EQ_INT(rsd_reconcile_begin(R, &d, 0), RSD_ERR_ARG);
    CHECK(rsd_reconcile_next(R, 0).kind == RSD_STEP_DONE);
    desc_init(&d, "");
    CHECK_EQ_INT(rsd_reconcile_begin(R, &d, 0), RSD_ERR_MODEL_ID);
    desc_init(&d, "m");
    d.bearer = "a\nb";
    CHECK_EQ_INT(rsd_reconcile_begin(R, &d, 0), RSD_ERR_ARG);
    desc_init(&d, "m");
    d.base_url = "http://h/?x";
    CHECK_EQ_INT(rsd_reconcile_begin(R, &d, 0), RSD_ERR_URL);
    { /* a load-first runtime without one of its four hooks, and the flag on a router */
        rsd_runtime rt = *rsd_runtime_lmstudio();
        desc_init(&d, "m");
        rt.gate = NULL;
        d.runtime = &rt;
        CHECK_EQ_INT(rsd_reconcile_begin(R, &d, 0), RSD_ERR_ARG);
        rt = *rsd_runtime_lmstudio();
        rt.free_room = NULL;
        CHECK_EQ_INT(rsd_reconcile_begin(R, &d, 0), RSD_ERR_ARG);
        rt = *rsd_runtime_router();
        rt.flags |= RSD_RT_LOAD_FIRST;
        CHECK_EQ_INT(rsd_reconcile_begin(R, &d, 0), RSD_ERR_ARG);
    }
    desc_init(&d, "m");
    CHECK_EQ_INT(rsd_reconcile_begin(R, &d, 0), RSD_OK);
    CHECK_EQ_STR(rsd_reconcile_key(R), "lmstudio|http://dynamo:1234");
    CHECK_EQ_INT(rsd_reconcile_feed(R, RSD_OK, 200, "{}", 2, 0), RSD_OK);
    CHECK_EQ_INT(rsd_reconcile_lock_done(R, true, 0, 0), RSD_ERR_STATE);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    if (rc_new(NULL) != RSD_OK) return 1; /* its tables, with the defaults */
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
    RUN(test_owned_over_the_id_arena_degrades_before_any_change);
    RUN(test_unload_failure_moves_to_next_candidate);
    RUN(test_transport_error_stops_detection);
    RUN(test_hostile_catalogs_degrade_and_never_mutate);
    RUN(test_begin_rejects_bad_desc);
    RUN(test_catalog_shares_the_listings_storage_with_the_router);
    return RSD_TEST_END();
}
