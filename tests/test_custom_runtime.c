/* test_custom_runtime.c -- examples/custom_runtime.c (a runtime added through the
   public hooks only, on the one reconcile machine) runs and does what it prints:
   the eviction of our "b" for "c", in the router order, with the key of its name.
   And a load-first runtime (RSD_RT_LOAD_FIRST) written here with the public API only,
   driven against LM Studio as apps/rsd-sim/rsd_sim.h models it (in-process, no sockets,
   simulated clock; tests/sim_step.h): its gate ends the reconcile early (resident,
   observed, declined), its keep loads, and after a failed load free_room names our
   instance to unload, the result of each as the hooks set it. The desc's part of the
   facts arrives filled (its gate adds the catalog's): an opt-out observes, a protected
   model stays. */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "residency.h"
#include "apps/rsd-sim/rsd_sim.h"
#include "rsd_test.h"
#include "sim_step.h"
#include <stdio.h>
#include <string.h>
#if defined(_WIN32) /* make test-windows (tests/windows.sh): the .exe built there, via cmd */
#include <io.h>
#define EXAMPLE_BIN "build\\win\\bin\\custom_runtime.exe"
#undef X_OK
#define X_OK 0 /* exists: the C runtime's access() has no execute bit */
#define EXITED_0(st) ((st) == 0)
#else
#include <sys/wait.h>
#include <unistd.h>
#define EXAMPLE_BIN "build/examples/custom_runtime"
#define EXITED_0(st) (WIFEXITED(st) && WEXITSTATUS(st) == 0)
#endif

static void test_custom_runtime_example(void) {
    static char out[8192];
    size_t n = 0, got;
    FILE *p;
    int st;
    REQUIRE(access(EXAMPLE_BIN, X_OK) == 0);
    p = popen(EXAMPLE_BIN, "r");
    REQUIRE(p != NULL);
    while (n < sizeof out - 1 && (got = fread(out + n, 1, sizeof out - 1 - n, p)) > 0) n += got;
    out[n] = '\0';
    st = pclose(p);
    CHECK(EXITED_0(st));
    /* list, the plan's notice, stop b, start c, the poll that sees c running */
    CHECK(strstr(out, "GET http://127.0.0.1:9000/api/models -> 200\nnotice: evicting residency-loaded model 'b'") != NULL);
    CHECK(strstr(out, "POST http://127.0.0.1:9000/api/stop {\"model\":\"b\"} -> 200\n"
                      "POST http://127.0.0.1:9000/api/start {\"model\":\"c\"} -> 200\n") != NULL);
    CHECK(strstr(out, "key tinyserve|http://127.0.0.1:9000\n") != NULL);
    CHECK(strstr(out, "outcome resident, ok\nunloaded b\nours now c\n") != NULL);
    CHECK(strstr(out, "/api/stop {\"model\":\"a\"}") == NULL); /* not ours: never touched */
}

/* ---- a load-first runtime from outside the library ------------------------------------
   LM Studio's REST API (GET /api/v1/models; POST /api/v1/models/load {"model":key} and
   /unload {"instance_id":id}), read with the public JSON calls. Its catalog (every key
   and its loaded instances) is the runtime's own: here in this file, read again at each
   listing; what one reconcile remembers (the candidates, the keep's instances before the
   load, the free_room cursor) lives in c->data, which begin zeroes. Ours are the
   instances in c->owned; without c->explicit_load the server loads on first use. */
enum { LF_MODELS = 8, LF_INST = 4, LF_ID = 64 };
typedef struct lf_model {
    char key[LF_ID];
    int n_inst;
    char inst[LF_INST][LF_ID];
    uint32_t ctx[LF_INST];
} lf_model;
static struct {
    int n;
    lf_model m[LF_MODELS];
    rsd_resident res[LF_MODELS]; /* the facts' residents (views into m) */
} LF;
typedef struct lf_run {          /* in c->data */
    int n_cand, ci, n_before;
    char cand[LF_MODELS][LF_ID]; /* our residents in the plan's fallback order */
    char before[LF_INST][LF_ID]; /* the keep's instances before the load */
} lf_run;
typedef char lf_run_fits[sizeof(lf_run) <= RSD_RECONCILE_RT_DATA ? 1 : -1];

static lf_model *lf_find(const char *key) {
    int i;
    for (i = 0; i < LF.n; i++)
        if (strcmp(LF.m[i].key, key) == 0) return &LF.m[i];
    return NULL;
}

/* inst is one of ours: c->owned (desc.owned, kept current by the lifecycle). */
static bool lf_owned(const rsd_runtime_ctx *c, const char *inst) {
    int j;
    for (j = 0; j < c->n_owned; j++)
        if (strcmp(c->owned[j].instance, inst) == 0) return true;
    return false;
}

static int lf_request(rsd_runtime_ctx *c, rsd_http_op op, const char *model, rsd_step_http *out) {
    rsd_json_writer w;
    int rc, n = -1;
    const char *path = op == RSD_OP_LOAD ? "/api/v1/models/load" : op == RSD_OP_UNLOAD ? "/api/v1/models/unload"
                                                                                       : "/api/v1/models";
    if ((rc = rsd_reconcile_set_url(c->r, path)) < 0) return rc;
    if (op == RSD_OP_LOAD && (n = rsd_reconcile_model_body(c->r, model)) < 0) return n;
    if (op == RSD_OP_UNLOAD) { /* model is the instance free_room named */
        rsd_json_w_init(&w, c->body, RSD_RECONCILE_BODY_MAX);
        (void)rsd_json_w_begin_object(&w);
        (void)rsd_json_w_key(&w, "instance_id");
        (void)rsd_json_w_str(&w, model);
        (void)rsd_json_w_end_object(&w);
        if ((n = rsd_json_w_finish(&w)) < 0) return n;
    }
    rsd_reconcile_http_fill(c->r, out, n >= 0 ? "POST" : "GET", n);
    return RSD_OK;
}

/* A 2xx is done (the instance it made: c->made_instance); else the server's words to c->why. */
static rsd_load_answer lf_load_answer(rsd_runtime_ctx *c, int status, const char *body, size_t len) {
    rsd_json_doc doc;
    rsd_server_error e;
    size_t n = 0;
    if (status < 200 || status > 299) {
        if (rsd_server_error_parse(&e, body, len, c->toks, c->max_tokens) == 1 && e.message[0])
            (void)snprintf(c->why, RSD_RECONCILE_TEXT_MAX, "%s", e.message);
        return RSD_LOAD_REJECTED;
    }
    if (rsd_json_parse_top(&doc, body, len, c->toks, c->max_tokens) > 0 &&
        rsd_json_str(&doc, rsd_json_find(&doc, 0, "instance_id"), c->made_instance, RSD_MODEL_ID_MAX, &n) < 0)
        c->made_instance[0] = '\0';
    return RSD_LOAD_ACCEPTED;
}

/* {"models":[{"key":..,"loaded_instances":[{"id":..,"config":{"context_length":n}}]}]} */
static int lf_catalog(rsd_runtime_ctx *c, bool first, int status, const char *body, size_t len) {
    rsd_json_doc top, el, in;
    size_t pos = 0, ipos, n;
    int arr, rc, ia;
    (void)status;
    LF.n = 0;
    if (rsd_json_parse_top(&top, body, len, c->toks, c->max_tokens) <= 0 ||
        rsd_json_type_of(&top, arr = rsd_json_find(&top, 0, "models")) != RSD_JSON_ARRAY) {
        (void)snprintf(c->why, RSD_RECONCILE_TEXT_MAX, "not an LM Studio catalog");
        return RSD_ERR_PAYLOAD;
    }
    while ((rc = rsd_json_each(&top, arr, &pos, &el)) > 0 && LF.n < LF_MODELS) {
        lf_model *m = &LF.m[LF.n];
        memset(m, 0, sizeof *m);
        if (rsd_json_str(&el, rsd_json_find(&el, 0, "key"), m->key, sizeof m->key, &n) < 0 || !n) continue;
        ia = rsd_json_find(&el, 0, "loaded_instances");
        for (ipos = 0; ia >= 0 && m->n_inst < LF_INST && rsd_json_each(&el, ia, &ipos, &in) > 0;) {
            int64_t ctx = 0;
            int cfg = rsd_json_find(&in, 0, "config");
            if (rsd_json_str(&in, rsd_json_find(&in, 0, "id"), m->inst[m->n_inst], LF_ID, &n) < 0 || !n) continue;
            if (cfg >= 0) (void)rsd_json_int64(&in, rsd_json_find(&in, cfg, "context_length"), &ctx);
            m->ctx[m->n_inst++] = ctx > 0 ? (uint32_t)ctx : 0;
        }
        LF.n++;
    }
    /* every entry read: the answer may be cached; the first listing found the v1 tier */
    rsd_reconcile_set_catalog(c->r, first ? RSD_LMS_TIER_V1 : RSD_LMS_TIER_NONE, rc == 0);
    return rc < 0 ? rc : RSD_OK;
}

/* Resolve the keep; end early (not served, an instance loaded, no explicit load) or decide
   on the facts the lifecycle filled from the desc plus the catalog's residents. */
static int lf_gate(rsd_runtime_ctx *c, bool under_lock) {
    lf_run *run = (lf_run *)c->data;
    lf_model *k = lf_find(c->keep);
    const rsd_plan *p;
    rsd_facts *f;
    char msg[RSD_RECONCILE_TEXT_MAX];
    int i, j, rc;
    if (!k) {
        (void)rsd_reconcile_set_model(c->r, c->keep, c->keep, RSD_LMS_UNKNOWN);
        (void)snprintf(msg, sizeof msg, "'%s' is not in the catalog of '%s'", c->keep, c->target_id);
        rsd_reconcile_set_decision(c->r, RSD_DECISION_DECLINE, RSD_REASON_DECLINE_NOT_LOADABLE, false);
        rsd_reconcile_set_outcome(c->r, RSD_OUTCOME_DECLINED, RSD_ERR_NOT_SERVED, msg);
        return 1;
    }
    if (k->n_inst > 0) { /* requests go to the instance */
        (void)rsd_reconcile_set_model(c->r, k->key, k->inst[0], RSD_LMS_INSTANCE);
        rsd_reconcile_set_decision(c->r, RSD_DECISION_ALREADY_RESIDENT, RSD_REASON_KEEP_RESIDENT, !under_lock);
        rsd_reconcile_set_outcome(c->r, RSD_OUTCOME_RESIDENT, RSD_OK, NULL);
        return 1;
    }
    (void)rsd_reconcile_set_model(c->r, k->key, k->key, RSD_LMS_JIT);
    if (!c->explicit_load) {
        rsd_reconcile_set_outcome(c->r, RSD_OUTCOME_OBSERVED, RSD_OK, NULL);
        return 1;
    }
    f = rsd_reconcile_facts(c->r); /* the desc's part is filled; a resident per loaded key */
    f->residents = LF.res;
    for (i = 0; i < LF.n; i++) {
        rsd_resident *res = &LF.res[f->n_residents];
        if (LF.m[i].n_inst == 0) continue;
        memset(res, 0, sizeof *res);
        res->model_id = rsd_str_c(LF.m[i].key);
        for (j = 0; j < LF.m[i].n_inst; j++) res->loaded_by_us |= lf_owned(c, LF.m[i].inst[j]);
        f->n_residents++;
    }
    if ((rc = rsd_reconcile_decide(c->r, true)) < 0) {
        (void)snprintf(c->why, RSD_RECONCILE_TEXT_MAX, "the catalog cannot be decided on");
        return rc;
    }
    p = rsd_reconcile_plan(c->r);
    if (p->decision != RSD_DECISION_LOAD && p->decision != RSD_DECISION_LOAD_AFTER_EVICT) {
        rsd_reconcile_set_outcome(c->r, RSD_OUTCOME_OBSERVED, RSD_OK, NULL);
        return 1;
    }
    run->n_cand = run->ci = 0; /* what free_room may unload, ours only */
    for (i = 0; i < p->n_fallback; i++)
        if (f->residents[p->fallback[i]].loaded_by_us)
            (void)snprintf(run->cand[run->n_cand++], LF_ID, "%.*s", (int)f->residents[p->fallback[i]].model_id.len,
                           f->residents[p->fallback[i]].model_id.ptr);
    for (run->n_before = 0; run->n_before < k->n_inst; run->n_before++)
        (void)snprintf(run->before[run->n_before], LF_ID, "%s", k->inst[run->n_before]);
    return 0;
}

/* An instance of the keep that was not there before our load landed late: ours. */
static bool lf_adopt(rsd_runtime_ctx *c) {
    const lf_run *run = (const lf_run *)c->data;
    const lf_model *k = lf_find(rsd_reconcile_result_of(c->r)->model_key);
    int i, j;
    for (i = 0; k && i < k->n_inst; i++) {
        bool seen = false;
        for (j = 0; j < run->n_before; j++) seen |= strcmp(run->before[j], k->inst[i]) == 0;
        if (!seen) return rsd_reconcile_set_model(c->r, NULL, k->inst[i], RSD_LMS_INSTANCE) == RSD_OK;
    }
    return false;
}

/* The next candidate with owned instances listed now: each named to unload. */
static int lf_free_room(rsd_runtime_ctx *c) {
    lf_run *run = (lf_run *)c->data;
    int i, n = 0;
    for (; run->ci < run->n_cand && n == 0; run->ci++) {
        const lf_model *m = lf_find(run->cand[run->ci]);
        for (i = 0; m && i < m->n_inst; i++)
            if (lf_owned(c, m->inst[i]) && rsd_reconcile_unload(c->r, m->inst[i], m->key, m->ctx[i]) == RSD_OK) n++;
    }
    return n;
}

static const rsd_runtime lf_rt = {
    "lfrt", "load-first runtime", RSD_STRATEGY_JIT, RSD_RT_LOAD | RSD_RT_INSTANCES | RSD_RT_LOAD_FIRST,
    lf_request, NULL, NULL, lf_load_answer, 0, 0, 0, NULL,
    NULL, NULL, lf_catalog, lf_gate, lf_adopt, lf_free_room};

/* Every step against the simulator (S on the clock NOW): the requests logged as sent. */
static char LOG[4096];
static int lf_drive(const rsd_reconcile_desc *d) {
    int guard, rc;
    size_t at = 0;
    LOG[0] = '\0';
    if ((rc = rsd_reconcile_begin(R, d, NOW)) < 0) return rc;
    for (guard = 0; guard < 200; guard++) {
        rsd_step s = rsd_reconcile_next(R, NOW);
        int tr = RSD_OK, st = 0;
        size_t len = 0;
        switch (s.kind) {
        case RSD_STEP_HTTP: {
            const char *path = strstr(s.http.url, "/api/");
            at += (size_t)snprintf(LOG + at, sizeof LOG - at, "%s%s %s%s%.*s", at ? " | " : "", s.http.method,
                                   path ? path : s.http.url, s.http.body ? " " : "", (int)s.http.body_len,
                                   s.http.body ? s.http.body : "");
            if (at >= sizeof LOG) at = sizeof LOG - 1;
            sim_http(&s.http, &tr, &st, &len);
            CHECK_EQ_INT(rsd_reconcile_feed(R, tr, st, RB, len, NOW), RSD_OK);
            break;
        }
        case RSD_STEP_WAIT: NOW = s.wake_ms > NOW ? s.wake_ms : NOW; break;
        case RSD_STEP_LOCK: CHECK_EQ_INT(rsd_reconcile_lock_done(R, true, 0, NOW), RSD_OK); break;
        case RSD_STEP_COMMIT: case RSD_STEP_UNLOCK: break;
        case RSD_STEP_DONE: return s.result;
        default: CHECK(0); return -999;
        }
    }
    CHECK(0);
    return -998;
}

/* LM Studio 0.4 with 6 GiB of VRAM: "a" (4 GiB, its instance "a") loaded by us earlier,
   "b" and "c" (4 GiB each) known. Loads take 200 ms; loads are explicit. */
static bool lf_setup(rsd_reconcile_desc *d, const char *keep) {
    static const rsd_owned owned[] = {{"a", "a"}};
    memset(&LF, 0, sizeof LF);
    if (!rsd_runtime_lmstudio()) { /* the load-first lifecycle is compiled out (RSD_NO_LMSTUDIO) */
        printf("  skip: RSD_NO_LMSTUDIO\n");
        return false;
    }
    if (!R && rc_new(NULL) < 0) return false;
    rsim_init(&S, RSIM_RT_LMSTUDIO);
    S.o.load_ms = 200;
    S.o.vram_budget = 6ull << 30;
    if (rsim_add_model(&S, "id=a,size=4g,ctx=8192,ctx_train=8192") < 0 ||
        rsim_add_model(&S, "id=b,size=4g,ctx=8192,ctx_train=8192") < 0 ||
        rsim_add_model(&S, "id=c,size=4g,ctx=8192,ctx_train=8192") < 0)
        return false;
    rsim_start(&S, NOW);
    if (rsim_l_add_inst(&S, rsim_find(&S, "a"), 8192, false, 0) != 0) return false;
    memset(d, 0, sizeof *d);
    d->runtime = &lf_rt;
    d->base_url = "http://127.0.0.1:1234";
    d->target_id = "studio";
    d->keep = keep;
    d->owned = owned;
    d->n_owned = 1;
    d->explicit_load = true;
    return true;
}

static bool has_notice(const char *text) {
    const rsd_reconcile_notice *n;
    int i, k = rsd_reconcile_notices(R, &n);
    for (i = 0; i < k; i++)
        if (strstr(n[i].text, text)) return true;
    return false;
}

/* The gate ends it at the first listing: an instance of the keep is loaded. */
static void test_lf_gate_resident(void) {
    rsd_reconcile_desc d;
    if (!lf_setup(&d, "a")) return;
    CHECK_EQ_INT(lf_drive(&d), RSD_OK);
    CHECK_EQ_STR(LOG, "GET /api/v1/models");
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(RES->error, RSD_OK);
    CHECK_EQ_INT(RES->decision, RSD_DECISION_ALREADY_RESIDENT);
    CHECK_EQ_INT(RES->reason, RSD_REASON_KEEP_RESIDENT);
    CHECK(RES->keep_resident && !RES->loaded && !RES->mutated && !RES->redecided);
    CHECK_EQ_INT(RES->state, RSD_LMS_INSTANCE);
    CHECK_EQ_INT(RES->tier, RSD_LMS_TIER_V1);
    CHECK_EQ_STR(RES->wire_id, "a");
    CHECK_EQ_STR(RES->model_key, "a");
}

/* The gate ends it: the runtime never loads (observed), or the catalog lacks the keep. */
static void test_lf_gate_observed_declined(void) {
    rsd_reconcile_desc d;
    if (!lf_setup(&d, "b")) return;
    d.explicit_load = false;
    CHECK_EQ_INT(lf_drive(&d), RSD_OK);
    CHECK_EQ_STR(LOG, "GET /api/v1/models");
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_OBSERVED);
    CHECK_EQ_INT(RES->error, RSD_OK);
    CHECK_EQ_INT(RES->state, RSD_LMS_JIT);
    CHECK(!RES->keep_resident && !RES->loaded);
    if (!lf_setup(&d, "nope")) return;
    CHECK_EQ_INT(lf_drive(&d), RSD_ERR_NOT_SERVED);
    CHECK_EQ_STR(LOG, "GET /api/v1/models");
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_DECLINED);
    CHECK_EQ_INT(RES->error, RSD_ERR_NOT_SERVED);
    CHECK_EQ_INT(RES->decision, RSD_DECISION_DECLINE);
    CHECK_EQ_INT(RES->reason, RSD_REASON_DECLINE_NOT_LOADABLE);
    CHECK_EQ_INT(RES->state, RSD_LMS_UNKNOWN);
    CHECK_EQ_STR(RES->message, "'nope' is not in the catalog of 'studio'");
}

/* Room for the keep: loaded at once, under the lock (decided again on the listing there). */
static void test_lf_load(void) {
    rsd_reconcile_desc d;
    if (!lf_setup(&d, "b")) return;
    S.o.vram_budget = 0; /* room for all */
    d.lock = true;
    CHECK_EQ_INT(lf_drive(&d), RSD_OK);
    CHECK_EQ_STR(LOG, "GET /api/v1/models | GET /api/v1/models | POST /api/v1/models/load {\"model\":\"b\"}");
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(RES->error, RSD_OK);
    CHECK_EQ_INT(RES->decision, RSD_DECISION_LOAD);
    CHECK(RES->loaded && RES->mutated && RES->redecided && RES->lock_held && !RES->keep_resident);
    CHECK_EQ_INT(RES->load_attempts, 1);
    CHECK_EQ_INT(RES->n_evicted, 0);
    CHECK_EQ_STR(RES->wire_id, "b"); /* the instance the load made */
    REQUIRE(RES->n_attr_add == 1);
    CHECK_EQ_STR(RES->attr_add[0].model, "b");
    CHECK_EQ_STR(RES->attr_add[0].instance, "b");
}

/* The load fails (no VRAM left): listed again, our "a" unloaded (free_room), loaded again. */
static void test_lf_free_room_after_failed_load(void) {
    rsd_reconcile_desc d;
    if (!lf_setup(&d, "b")) return;
    CHECK_EQ_INT(lf_drive(&d), RSD_OK);
    CHECK_EQ_STR(LOG, "GET /api/v1/models | POST /api/v1/models/load {\"model\":\"b\"} | GET /api/v1/models | "
                      "POST /api/v1/models/unload {\"instance_id\":\"a\"} | POST /api/v1/models/load {\"model\":\"b\"}");
    CHECK(has_notice("loading 'b' on 'studio' failed (insufficient VRAM)")); /* lf_load_answer's c->why */
    CHECK(has_notice("unloaded our instance 'a' of 'a' on 'studio' to make room for 'b'."));
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(RES->error, RSD_OK);
    CHECK(RES->loaded && RES->mutated && !RES->adopted);
    CHECK_EQ_INT(RES->load_attempts, 2);
    REQUIRE(RES->n_evicted == 1);
    CHECK_EQ_STR(RES->evicted[0].id, "a");
    CHECK_EQ_STR(RES->evicted[0].model, "a");
    CHECK_EQ_INT(RES->evicted[0].context_length, 8192);
    REQUIRE(RES->n_attr_remove == 1);
    CHECK_EQ_STR(RES->attr_remove[0].instance, "a");
    REQUIRE(RES->n_attr_add == 1);
    CHECK_EQ_STR(RES->attr_add[0].instance, "b");
    CHECK_EQ_STR(RES->wire_id, "b");
    /* the server agrees: b runs, a does not */
    rsim_tick(&S, NOW);
    CHECK_EQ_INT(S.m[rsim_find(&S, "a")].ninst, 0);
    CHECK_EQ_INT(S.m[rsim_find(&S, "b")].ninst, 1);
    /* nothing of ours left to free: the second failure ends it, LOAD_FAILED with the server's words */
    if (!lf_setup(&d, "b")) return;
    d.n_owned = 0;
    CHECK(lf_drive(&d) < 0);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_LOAD_FAILED);
    CHECK_EQ_STR(RES->message, "insufficient VRAM");
    CHECK_EQ_INT(RES->n_evicted, 0);
    CHECK(strstr(LOG, "unload") == NULL);
}

/* The desc's part of the facts reaches the gate filled: RESIDENCY=off observes (nothing
   loaded), and a configured model is no candidate for a pinned keep (the failed load is
   not followed by its unload; JIT's fallback holds configured models otherwise). */
static void test_lf_optout_protected(void) {
    rsd_reconcile_desc d;
    rsd_protected_model pm;
    if (!lf_setup(&d, "b")) return;
    d.residency_env = "off";
    CHECK_EQ_INT(lf_drive(&d), RSD_OK);
    CHECK_EQ_STR(LOG, "GET /api/v1/models");
    CHECK_EQ_INT(RES->decision, RSD_DECISION_OBSERVE);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_OBSERVED);
    CHECK(!RES->loaded && !RES->mutated);
    CHECK_EQ_INT(rsd_reconcile_facts(R)->optout, RSD_OPTOUT_ENV);
    if (!lf_setup(&d, "b")) return;
    memset(&pm, 0, sizeof pm);
    pm.model_id = rsd_str_c("a");
    d.protected_models = &pm;
    d.n_protected = 1;
    d.keep_pinned = true;
    CHECK(lf_drive(&d) < 0);
    CHECK_EQ_STR(LOG, "GET /api/v1/models | POST /api/v1/models/load {\"model\":\"b\"} | GET /api/v1/models");
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_LOAD_FAILED);
    CHECK_EQ_STR(RES->message, "insufficient VRAM");
    CHECK_EQ_INT(rsd_reconcile_plan(R)->n_fallback, 0);
    CHECK_EQ_INT(RES->n_evicted, 0);
    rsim_tick(&S, NOW);
    CHECK_EQ_INT(S.m[rsim_find(&S, "a")].ninst, 1); /* still loaded */
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    RUN(test_custom_runtime_example);
    RUN(test_lf_gate_resident);
    RUN(test_lf_gate_observed_declined);
    RUN(test_lf_load);
    RUN(test_lf_free_room_after_failed_load);
    RUN(test_lf_optout_protected);
    free(R);
    return RSD_TEST_END();
}
