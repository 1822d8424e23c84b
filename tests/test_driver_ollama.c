/* test_driver_ollama.c -- the Ollama runtime (rsd_runtime_ollama) on the sans-I/O
   reconcile driver, against Ollama as apps/rsd-sim/rsd_sim.h models it (in-process, no
   sockets, simulated clock; tests/sim_step.h): the listing, releasing only our
   stragglers, keep_alive and num_ctx, observe, timeouts, restores, the re-list under the
   lock, the cache, and hostile /api/ps payloads, which degrade to observe and never
   mutate. What the network or a hostile server does (a transport error, a canned body)
   is injected at the transport, between the machine and the simulator. */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency.h"
#include "../apps/rsd-sim/rsd_sim.h"
#include "rsd_test.h"
#include "sim_step.h"
/* The model the reconcile attributed to us ("" when none). */
#define ATTR_ADD(r) (rsd_reconcile_result_of(r)->n_attr_add ? rsd_reconcile_result_of(r)->attr_add[0].model : "")
#include <stdarg.h>

/* ---- Ollama: the simulator, and what the transport injects -------------------- */
enum { LOG_MAX = 64 };
typedef struct ollama_sim {
    int n_resident;             /* residents added: their sizes are 1000, 1001, ... bytes */
    int load_status;            /* != 0: loads are answered this status (an Ollama error) */
    const char *load_body;
    sim_list_faults list;       /* failed, refused and canned /api/ps (tests/sim_step.h) */
    void (*at_lock)(struct ollama_sim *f);
    uint64_t gen;
    char log[LOG_MAX][256];
    int nlog, posts, gets, locks, unlocks, commits;
    uint32_t list_timeouts[LOG_MAX], post_timeouts[LOG_MAX];
    int n_list_to, n_post_to;
} ollama_sim;

static rsd_decision_cache CACHE;
static rsd_json_tok TOK[4096];

/* A fresh Ollama with nothing installed: loads take 800 ms; no scheduler limit of its
   own (OLLAMA_MAX_LOADED_MODELS large), so only the reconcile unloads. */
static void os_init(ollama_sim *f) {
    memset(f, 0, sizeof *f);
    rsim_init(&S, RSIM_RT_OLLAMA);
    S.o.load_ms = 800;
    S.o.max_loaded = 0;
    rsim_start(&S, NOW);
}
static void os_add(ollama_sim *f, const char *name, bool loaded) {
    char spec[160];
    int i;
    if (loaded) snprintf(spec, sizeof spec, "id=%s,size=%d", name, 1000 + f->n_resident++);
    else snprintf(spec, sizeof spec, "id=%s", name);
    i = rsim_add_model(&S, spec);
    REQUIRE(i >= 0);
    if (loaded) { /* resident now, kept (keep_alive -1), as a model a chat loaded */
        S.m[i].state = RSIM_LOADED;
        S.m[i].forever = true;
        rsim_mark_loaded(&S, &S.m[i]);
    }
}
static void os_install(ollama_sim *f, const char *name) { os_add(f, name, false); }
static void os_resident(ollama_sim *f, const char *name) { os_add(f, name, true); }
/* Whether /api/ps lists name (normalised as Ollama does). */
static int os_find(ollama_sim *f, const char *name) {
    int i = rsim_find(&S, name);
    (void)f;
    rsim_tick(&S, NOW);
    return i >= 0 && (S.m[i].state == RSIM_LOADED || S.m[i].state == RSIM_LOADING) ? i : -1;
}
/* Another client unloads name (POST /api/generate keep_alive 0), and it is gone. */
static void os_unload(ollama_sim *f, const char *name) {
    char body[200];
    (void)f;
    snprintf(body, sizeof body, "{\"model\":\"%s\",\"keep_alive\":0}", name);
    sim_post("/api/generate", body);
    NOW += S.o.linger_ms + 1;
    rsim_tick(&S, NOW);
}
static void os_log(ollama_sim *f, const char *fmt, ...) {
    va_list ap;
    if (f->nlog >= LOG_MAX) return;
    va_start(ap, fmt);
    vsnprintf(f->log[f->nlog++], sizeof f->log[0], fmt, ap);
    va_end(ap);
}

/* One HTTP step: logged as the machine sent it, the injections first, else Ollama's
   answer from the simulator. */
static void os_http(ollama_sim *f, const rsd_step_http *h, int *transport, int *status, const char **body,
                    size_t *len) {
    const char *path = strstr(h->url, "://");
    path = path ? strchr(path + 3, '/') : "";
    *transport = RSD_OK;
    *status = 200;
    if (strcmp(h->method, "GET") == 0) {
        f->gets++;
        if (f->n_list_to < LOG_MAX) f->list_timeouts[f->n_list_to++] = h->timeout_ms;
        os_log(f, "GET %s", path);
        if (sim_list_fault(&f->list, f->posts, transport, status, body, len)) return;
    } else {
        rsd_json_doc d;
        int ka;
        int64_t keep_alive = 300;
        f->posts++;
        if (f->n_post_to < LOG_MAX) f->post_timeouts[f->n_post_to++] = h->timeout_ms;
        os_log(f, "POST %s %.*s", path, (int)h->body_len, h->body);
        REQUIRE(strcmp(path, "/api/generate") == 0);
        REQUIRE(h->n_headers >= 1 && strcmp(h->headers[0].value, "application/json") == 0);
        REQUIRE(rsd_json_parse(&d, h->body, h->body_len, TOK, 4096) > 0);
        ka = rsd_json_find(&d, 0, "keep_alive");
        if (ka >= 0) REQUIRE(rsd_json_int64(&d, ka, &keep_alive) == RSD_OK);
        if (keep_alive != 0 && f->load_status) {
            *status = f->load_status;
            *body = f->load_body ? f->load_body : "{\"error\":\"boom\"}";
            *len = strlen(*body);
            return;
        }
    }
    sim_http(h, transport, status, len);
    NOW -= 1; /* the driver loop adds the millisecond */
    *body = RB;
}

static void desc_init(rsd_reconcile_desc *d, const char *keep) {
    memset(d, 0, sizeof *d);
    d->runtime = rsd_runtime_ollama();
    d->base_url = "http://ollama:11434";
    d->target_id = "box";
    d->keep = keep;
    d->cache = &CACHE;
    d->lock = true;
}

static int drive(ollama_sim *f, const rsd_reconcile_desc *d) {
    int guard, rc;
    f->nlog = f->posts = f->gets = f->locks = f->unlocks = f->commits = 0;
    f->n_list_to = f->n_post_to = 0;
    rc = rsd_reconcile_begin(R, d, NOW);
    if (rc < 0) return rc;
    for (guard = 0; guard < 2000; guard++) {
        rsd_step s = rsd_reconcile_next(R, NOW);
        int tr = 0, st = 0;
        const char *body = "";
        size_t len = 0;
        switch (s.kind) {
        case RSD_STEP_HTTP:
            CHECK(s.http.timeout_ms >= 1);
            os_http(f, &s.http, &tr, &st, &body, &len);
            NOW += 1;
            CHECK_EQ_INT(rsd_reconcile_feed(R, tr, st, body, len, NOW), RSD_OK);
            break;
        case RSD_STEP_WAIT:
            NOW = s.wake_ms > NOW ? s.wake_ms : NOW;
            break;
        case RSD_STEP_LOCK:
            f->locks++;
            os_log(f, "LOCK");
            if (f->at_lock) f->at_lock(f);
            CHECK_EQ_INT(rsd_reconcile_lock_done(R, true, f->gen, NOW), RSD_OK);
            break;
        case RSD_STEP_COMMIT:
            f->commits++;
            os_log(f, "COMMIT");
            break;
        case RSD_STEP_UNLOCK:
            f->unlocks++;
            os_log(f, "UNLOCK");
            break;
        case RSD_STEP_DONE:
            CHECK_EQ_INT(f->locks, f->unlocks);
            return s.result;
        default:
            CHECK(0);
            return -999;
        }
    }
    CHECK(0);
    return -998;
}

static const char *joined(ollama_sim *f) {
    static char buf[8192];
    size_t n = 0;
    int i;
    buf[0] = '\0';
    for (i = 0; i < f->nlog; i++) n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", n ? " | " : "", f->log[i]);
    return buf;
}
static bool any_notice_has(const char *s) {
    int i;
    for (i = 0; i < N_NOTICES; i++)
        if (strstr(NOTICES[i].text, s)) return true;
    return false;
}
static bool removed(const char *id) {
    int i;
    for (i = 0; i < RES->n_attr_remove; i++)
        if (strcmp(RES->attr_remove[i].model, id) == 0) return true;
    return false;
}
static void fresh(void) {
    memset(&CACHE, 0, sizeof CACHE);
    NOW = 1000;
}

/* ---- the listing (O3, resident-models.test.ts 1) -------------------------- */
static void test_O3_ps_listing_maps_ids_aliases_sizes(void) {
    static rsd_listing L;
    static rsd_listed_model L_models[16];
    static char L_arena[4096];
    static const char b[] = "{\"models\":[{\"name\":\"qwen3:8b\",\"model\":\"\",\"size\":100,\"size_vram\":60},"
                            "{\"name\":\"alias:latest\",\"model\":\"real:latest\",\"size\":\"x\",\"context_length\":8192},"
                            "{\"model\":7},{\"name\":\"\"},3]}";
    REQUIRE(rsd_listing_init(&L, L_models, 16, L_arena, sizeof L_arena) == RSD_OK);
    CHECK_EQ_INT(rsd_ollama_ps_listing(b, sizeof b - 1, TOK, 4096, &L), RSD_OK);
    REQUIRE(L.n == 2);
    CHECK(rsd_str_eq_c(L.models[0].id, "qwen3:8b") && L.models[0].n_aliases == 0);
    CHECK(L.models[0].state == RSD_MODEL_LOADED);
    CHECK(L.models[0].has_size && L.models[0].size_bytes == 100 && L.models[0].size_vram_bytes == 60);
    CHECK(rsd_str_eq_c(L.models[1].id, "real:latest") && rsd_str_eq_c(rsd_listed_alias(&L.models[1], 0), "alias:latest"));
    CHECK(!L.models[1].has_size && !L.models[1].has_size_vram && L.models[1].context_length == 8192);
    CHECK_EQ_INT(L.n_seen, 5);
    CHECK_EQ_INT(L.n_skipped, 3);
    CHECK_EQ_INT(rsd_ollama_ps_listing("{\"models\":null}", 15, TOK, 4096, &L), RSD_OK);
    CHECK_EQ_INT(L.n, 0);
    CHECK_EQ_INT(rsd_ollama_ps_listing("{}", 2, TOK, 4096, &L), RSD_ERR_JSON_TYPE);
}

/* ---- O6/O9: a resident keep (by either id, or normalised) is used as is --- */
static void test_O9_keep_resident_by_name_is_not_loaded_nor_attributed(void) {
    ollama_sim f;
    rsd_reconcile_desc d;
    fresh();
    os_init(&f);
    os_resident(&f, "llama3.2");
    os_resident(&f, "other:7b");
    desc_init(&d, "llama3.2"); /* as the user wrote it: no tag */
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(RES->decision, RSD_DECISION_ALREADY_RESIDENT);
    CHECK_EQ_STR(joined(&f), "GET /api/ps");       /* one probe, no lock, no POST */
    CHECK_EQ_STR(ATTR_ADD(R), "");           /* O6/W17: already resident, not ours */
    CHECK(any_notice_has("alongside"));            /* co-resident notice */
}

/* ---- R28/O4/O6/O7: release only our stragglers, then load the keep --------- */
static void test_O4_R28_release_only_our_stragglers_then_load(void) {
    ollama_sim f;
    rsd_reconcile_desc d;
    const char *ours[2] = {"mine:latest", "cfg:latest"};
    rsd_protected_model prot[1];
    fresh();
    os_init(&f);
    os_resident(&f, "mine");     /* ours, unprotected: a straggler */
    os_resident(&f, "foreign");  /* the operator's */
    os_resident(&f, "cfg");      /* ours but configured: protected */
    os_install(&f, "coder:14b");
    desc_init(&d, "coder:14b");
    d.ours = ours;
    d.n_ours = 2;
    prot[0].model_id = rsd_str_c("cfg:latest");
    prot[0].role = RSD_ROLE_MEMORY;
    d.protected_models = prot;
    d.n_protected = 1;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(RES->reason, RSD_REASON_SCHEDULER_RELEASE_OURS);
    CHECK_EQ_STR(joined(&f),
                 "GET /api/ps | LOCK | GET /api/ps | "
                 "POST /api/generate {\"model\":\"mine:latest\",\"keep_alive\":0,\"stream\":false} | "
                 "POST /api/generate {\"model\":\"coder:14b\",\"stream\":false,\"keep_alive\":-1} | "
                 "GET /api/ps | COMMIT | UNLOCK");
    CHECK_EQ_STR(ATTR_ADD(R), "coder:14b");   /* we caused its load (R50) */
    CHECK(removed("mine:latest"));
    CHECK(!removed("cfg:latest"));
    CHECK(os_find(&f, "foreign") >= 0 && os_find(&f, "cfg") >= 0 && os_find(&f, "mine") < 0);
    CHECK(any_notice_has("evicting"));              /* about-to-evict for ours */
}

/* W12: with the VRAM total and the keep's size given, a keep that fits releases none
   of our stragglers (R28 alone would release "mine"); one that does not releases
   the fewest. /api/ps sizes of the fake: 1000, 1001, 1002 bytes. */
static void test_W12_sizes_known_release_only_what_is_needed(void) {
    ollama_sim f;
    rsd_reconcile_desc d;
    const char *ours[2] = {"mine:latest", "mine2:latest"};
    fresh();
    os_init(&f);
    os_resident(&f, "mine");
    os_resident(&f, "mine2");
    os_resident(&f, "foreign");
    os_install(&f, "coder:14b");
    desc_init(&d, "coder:14b");
    d.ours = ours;
    d.n_ours = 2;
    d.capacity_bytes = 5000; /* 3003 used */
    d.keep_bytes = 1500;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(RES->reason, RSD_REASON_FITS_BYTES);
    CHECK_EQ_INT(RES->n_evicted, 0);
    CHECK(os_find(&f, "mine") >= 0 && os_find(&f, "mine2") >= 0);
    /* 2500 needs 503 more: the larger straggler (mine2, 1001 bytes) only */
    fresh();
    os_init(&f);
    os_resident(&f, "mine");
    os_resident(&f, "mine2");
    os_resident(&f, "foreign");
    os_install(&f, "coder:14b");
    d.keep_bytes = 2500;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(RES->reason, RSD_REASON_SCHEDULER_RELEASE_OURS);
    REQUIRE(RES->n_evicted == 1);
    CHECK_EQ_STR(RES->evicted[0].id, "mine2:latest");
    CHECK(os_find(&f, "mine") >= 0 && os_find(&f, "foreign") >= 0);
}

/* O7: nothing of ours to release, keep not resident: lock for the load only */
static void test_O7_load_without_stragglers_locks_once(void) {
    ollama_sim f;
    rsd_reconcile_desc d;
    fresh();
    os_init(&f);
    os_resident(&f, "foreign");
    os_install(&f, "k");
    desc_init(&d, "k");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(RES->reason, RSD_REASON_SCHEDULER_LOAD);
    CHECK_EQ_INT(f.locks, 1);
    CHECK_EQ_INT(f.posts, 1);
    CHECK(os_find(&f, "foreign") >= 0);
    /* the keep as named in the request; it appears in /api/ps as k:latest */
    CHECK_EQ_STR(ATTR_ADD(R), "k");
}

/* O5 + clamp: num_ctx only for the keep, clamped beside residents; restore loads
   carry no num_ctx. */
static void test_O5_keep_alive_forever_and_clamped_num_ctx(void) {
    ollama_sim f;
    rsd_reconcile_desc d;
    fresh();
    os_init(&f);
    os_resident(&f, "gemma3");
    os_install(&f, "qwen3:32b");
    desc_init(&d, "qwen3:32b");
    d.context_length = 262144;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(strstr(joined(&f), "{\"model\":\"qwen3:32b\",\"stream\":false,\"keep_alive\":-1,\"options\":{\"num_ctx\":131072}}"));
    CHECK_EQ_INT(RES->load_context, 131072);
    CHECK(any_notice_has("context clamped 262144 to 131072"));
}

/* W19: observe never mutates (RESIDENCY=observe), even with our stragglers */
static void test_W19_observe_never_mutates(void) {
    ollama_sim f;
    rsd_reconcile_desc d;
    const char *ours[1] = {"mine:latest"};
    fresh();
    os_init(&f);
    os_resident(&f, "mine");
    os_install(&f, "k");
    desc_init(&d, "k");
    d.ours = ours;
    d.n_ours = 1;
    d.residency_env = "observe";
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_OBSERVED);
    CHECK_EQ_INT(f.posts, 0);
    CHECK_EQ_INT(f.locks, 0);
    CHECK(os_find(&f, "mine") >= 0);
    d.residency_env = NULL;
    d.user_managed = true;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_OBSERVED);
    CHECK_EQ_INT(f.posts, 0);
}

/* W17: every request has a timeout; a hung /api/ps degrades to observe */
static void test_W17_hung_ps_degrades_with_probe_timeout(void) {
    ollama_sim f;
    rsd_reconcile_desc d;
    fresh();
    os_init(&f);
    os_install(&f, "k");
    f.list.fail_left = 1;
    f.list.fail_transport = RSD_ERR_TIMEOUT;
    desc_init(&d, "k");
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_TIMEOUT);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_DEGRADED);
    CHECK_EQ_INT(RES->decision, RSD_DECISION_OBSERVE);
    CHECK_EQ_INT(f.posts, 0);
    CHECK_EQ_INT(f.list_timeouts[0], RSD_RECONCILE_PROBE_TIMEOUT_MS);
    CHECK(!RES->cached);
    /* the next turn probes again (R41: not cached) and loads */
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.posts, 1);
    /* load timeout = what is left of the overall deadline (W5), > probe timeout */
    CHECK(f.post_timeouts[0] > RSD_RECONCILE_PROBE_TIMEOUT_MS && f.post_timeouts[0] <= RSD_RECONCILE_DEADLINE_MS);
}

/* W7: a transient failure while waiting for the keep is retried */
static void test_W7_wait_retries_transient_errors(void) {
    ollama_sim f;
    rsd_reconcile_desc d;
    fresh();
    os_init(&f);
    os_install(&f, "k");
    f.list.poll_fail_left = 2;
    desc_init(&d, "k");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(f.gets, 1 + 1 + 3);  /* list, re-list under the lock, 2 failed polls + 1 */
}

/* Unknown model (404): released stragglers are restored (R70), the load's own
   error is reported (R74), nothing is cached (R51). */
static void test_load_404_restores_released_straggler(void) {
    ollama_sim f;
    rsd_reconcile_desc d;
    const char *ours[1] = {"mine:latest"};
    fresh();
    os_init(&f);
    os_resident(&f, "mine");
    desc_init(&d, "nope");
    d.ours = ours;
    d.n_ours = 1;
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_LOAD_REJECTED);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_LOAD_FAILED);
    CHECK(strstr(RES->message, "HTTP 404") != NULL);
    CHECK(strstr(RES->message, "HTTP 404: model") != NULL); /* Ollama's own error text is quoted */
    CHECK_EQ_INT(RES->n_evicted, 1);
    CHECK_EQ_INT(NOTICES[N_NOTICES - 1].notice.kind, RSD_NOTICE_RESTORED);
    CHECK(RES->evicted[0].restored);
    CHECK(os_find(&f, "mine") >= 0);
    CHECK(any_notice_has("restored 'mine:latest'"));
    CHECK(!RES->cached);
    CHECK_EQ_STR(ATTR_ADD(R), "");
    CHECK(!removed("mine:latest"));                 /* restored: still ours */
}

/* 500 (OOM) and 503 (queue full) and a 200 carrying an error are rejections */
static void test_load_errors_rejected(void) {
    static const int st[3] = {500, 503, 200};
    static const char *const bodies[3] = {"{\"error\":\"unable to load full model on GPU\"}",
                                          "{\"error\":\"server busy, please try again.  maximum pending requests exceeded\"}",
                                          "{\"error\":\"odd\"}"};
    int i;
    for (i = 0; i < 3; i++) {
        ollama_sim f;
        rsd_reconcile_desc d;
        fresh();
        os_init(&f);
        os_install(&f, "k");
        f.load_status = st[i];
        f.load_body = bodies[i];
        desc_init(&d, "k");
        CHECK(drive(&f, &d) < 0);
        CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_LOAD_FAILED);
        CHECK_EQ_INT(f.posts, 1);
        CHECK(!RES->cached);
    }
}

/* W1: under the lock the listing is read again; a straggler another process
   already released is not unloaded again. */
static void at_lock_release_mine(ollama_sim *f) { os_unload(f, "mine"); f->gen++; }
static void test_W1_relist_under_lock(void) {
    ollama_sim f;
    rsd_reconcile_desc d;
    const char *ours[1] = {"mine:latest"};
    fresh();
    os_init(&f);
    os_resident(&f, "mine");
    os_install(&f, "k");
    f.at_lock = at_lock_release_mine;
    desc_init(&d, "k");
    d.ours = ours;
    d.n_ours = 1;
    d.has_generation = true;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(RES->redecided);
    CHECK_EQ_INT(f.posts, 1);                       /* the load only */
    CHECK(strstr(joined(&f), "keep_alive\":0") == NULL);
}

/* R40/W2: the TTL cache answers the next turn without any request */
static void test_cache_hit_skips_probe(void) {
    ollama_sim f;
    rsd_reconcile_desc d;
    fresh();
    os_init(&f);
    os_install(&f, "k");
    desc_init(&d, "k");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(RES->cached);
    NOW += 1000;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(RES->cache_hit);
    CHECK_EQ_INT(f.gets + f.posts, 0);
}

/* Hostile /api/ps payloads: degrade to observe with a notice, never mutate */
static void test_hostile_ps_payloads_degrade_and_never_mutate(void) {
    static char huge[40000];
    const char *bodies[9];
    size_t n = 0;
    int i;
    n += (size_t)snprintf(huge + n, sizeof huge - n, "{\"models\":[");
    for (i = 0; i < 300; i++) n += (size_t)snprintf(huge + n, sizeof huge - n, "%s{\"name\":\"m%d:1\"}", i ? "," : "", i);
    snprintf(huge + n, sizeof huge - n, "]}");
    bodies[0] = "[]";
    bodies[1] = "{\"models\":{}}";
    bodies[2] = "Ollama is running";
    bodies[3] = "{\"models\":[{\"name\":\"a:1\"}";
    bodies[4] = "{\"error\":\"boom\"}";
    bodies[5] = "{\"models\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}";
    bodies[6] = huge;                               /* more than RSD_LISTING_MAX_MODELS */
    bodies[7] = "";
    bodies[8] = "{\"models\":\"mine:latest\"}";
    for (i = 0; i < 9; i++) {
        ollama_sim f;
        rsd_reconcile_desc d;
        const char *ours[1] = {"mine:latest"};
        fresh();
        os_init(&f);
        os_resident(&f, "mine");
        os_install(&f, "k");
        f.list.body = bodies[i];
        desc_init(&d, "k");
        d.ours = ours;
        d.n_ours = 1;
        CHECK(drive(&f, &d) < 0);
        CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_DEGRADED);
        CHECK_EQ_INT(RES->decision, RSD_DECISION_OBSERVE);
        CHECK_EQ_INT(f.posts, 0);
        CHECK_EQ_INT(f.locks, 0);
        CHECK(N_NOTICES >= 1);
        CHECK(!RES->cached);
    }
}

/* entries that are not usable are skipped, the rest still drives the plan */
static void test_hostile_entries_skipped_plan_still_safe(void) {
    ollama_sim f;
    rsd_reconcile_desc d;
    const char *ours[1] = {"mine:latest"};
    fresh();
    os_init(&f);
    os_install(&f, "k");
    f.list.body = "{\"models\":[7,{\"name\":\"\"},{\"model\":{}},{\"name\":\"mine:latest\",\"size\":-5},"
                  "{\"name\":\"a\\u0000b\"}]}";
    f.list.body_left = 2; /* the listing and the one under the lock */
    desc_init(&d, "k");
    d.ours = ours;
    d.n_ours = 1;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(strstr(joined(&f), "{\"model\":\"mine:latest\",\"keep_alive\":0,\"stream\":false}") != NULL);
}

/* W5: one overall deadline; a load that never answers ends LOAD_FAILED within it */
static void test_W5_load_bounded_by_the_deadline(void) {
    ollama_sim f;
    rsd_reconcile_desc d;
    uint64_t t0;
    fresh();
    os_init(&f);
    os_install(&f, "k");
    S.o.load_ms = 0;
    desc_init(&d, "k");
    d.deadline_ms = 5000;
    f.load_status = 0;
    t0 = NOW;
    /* transport timeout on the load POST */
    f.load_status = 0;
    f.list.fail_left = 0;
    {
        int guard;
        rsd_step s;
        CHECK_EQ_INT(rsd_reconcile_begin(R, &d, NOW), RSD_OK);
        for (guard = 0; guard < 100; guard++) {
            s = rsd_reconcile_next(R, NOW);
            if (s.kind == RSD_STEP_DONE) break;
            if (s.kind == RSD_STEP_LOCK) { rsd_reconcile_lock_done(R, true, 0, NOW); continue; }
            if (s.kind == RSD_STEP_COMMIT || s.kind == RSD_STEP_UNLOCK) continue;
            if (s.kind == RSD_STEP_WAIT) { NOW = s.wake_ms; continue; }
            if (s.kind == RSD_STEP_HTTP && strcmp(s.http.method, "POST") == 0) {
                CHECK(s.http.timeout_ms <= 5000);
                NOW += s.http.timeout_ms;
                rsd_reconcile_feed(R, RSD_ERR_TIMEOUT, 0, NULL, 0, NOW);
            } else if (s.kind == RSD_STEP_HTTP) {
                int tr, st;
                const char *b;
                size_t len;
                os_http(&f, &s.http, &tr, &st, &b, &len);
                rsd_reconcile_feed(R, tr, st, b, len, NOW);
            }
        }
        CHECK(s.kind == RSD_STEP_DONE);
    }
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_LOAD_FAILED);
    CHECK(NOW - t0 <= 5000 + 10);
}

/* W10: a model attributed under the name we requested ("k") is recognised in
   /api/ps as "k:latest" on a later turn and released as our straggler. */
static void test_W10_attribution_by_requested_name_still_ours(void) {
    ollama_sim f;
    rsd_reconcile_desc d;
    const char *ours[1];
    char attr[RSD_MODEL_ID_MAX];
    fresh();
    os_init(&f);
    os_install(&f, "k");
    os_install(&f, "j");
    desc_init(&d, "k");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(ATTR_ADD(R), "k");
    snprintf(attr, sizeof attr, "%s", ATTR_ADD(R));
    ours[0] = attr;
    desc_init(&d, "j");
    d.ours = ours;
    d.n_ours = 1;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(strstr(joined(&f), "{\"model\":\"k:latest\",\"keep_alive\":0,\"stream\":false}") != NULL);
    CHECK(os_find(&f, "k") < 0 && os_find(&f, "j") >= 0);
    CHECK(removed("k"));                            /* the attribution is dropped */
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    if (rc_new(NULL) != RSD_OK) return 1; /* its tables, with the defaults */
    RUN(test_O3_ps_listing_maps_ids_aliases_sizes);
    RUN(test_O9_keep_resident_by_name_is_not_loaded_nor_attributed);
    RUN(test_O4_R28_release_only_our_stragglers_then_load);
    RUN(test_O7_load_without_stragglers_locks_once);
    RUN(test_O5_keep_alive_forever_and_clamped_num_ctx);
    RUN(test_W19_observe_never_mutates);
    RUN(test_W17_hung_ps_degrades_with_probe_timeout);
    RUN(test_W7_wait_retries_transient_errors);
    RUN(test_load_404_restores_released_straggler);
    RUN(test_W12_sizes_known_release_only_what_is_needed);
    RUN(test_load_errors_rejected);
    RUN(test_W1_relist_under_lock);
    RUN(test_cache_hit_skips_probe);
    RUN(test_hostile_ps_payloads_degrade_and_never_mutate);
    RUN(test_hostile_entries_skipped_plan_still_safe);
    RUN(test_W5_load_bounded_by_the_deadline);
    RUN(test_W10_attribution_by_requested_name_still_ours);
    return RSD_TEST_END();
}
