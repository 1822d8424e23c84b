/* test_driver_router.c -- the sans-I/O reconcile driver against a llama.cpp router as
   apps/rsd-sim/rsd_sim.h models it (in-process, no sockets, simulated clock; tests/sim_step.h):
   upstream cases 6.2, 6.3, 6.4, the L26-L28 request sequences, and the W fixes. Every
   test runs twice: on build 10116 (the July router measured in wire.md 6) and on the
   later generation (rsd-sim --router-gen later, wire.md 7). The July hazards (an unload
   answered while the child still counts, the router's own LRU unload) do not arise on
   the later one, so there the test_july_* cases only check that the reconcile still
   ends the same way.
   What the network, another client or a hostile server does (a transport error, a canned
   body, an answer of a given status, a load by someone else) is injected at the
   transport, between the machine and the simulator. */
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

enum { LOG_MAX = 96 };
typedef struct frouter {
    /* the router (rsd_sim.h options, applied before every request) */
    int max_instances;         /* --models-max; 0 = unlimited */
    uint32_t load_delay;       /* --load-ms */
    uint32_t stop_ms;          /* --unload-ms: an unloaded child still runs, listed and counted, this long */
    /* injected at the transport */
    int props_status;          /* 200 = the router's answer; else that status */
    bool props_hide_max;       /* props without max_instances (an older build) */
    sim_list_faults list;      /* failed, refused and canned listings (tests/sim_step.h) */
    int load_status;           /* != 0: answer loads of load_only (or all) with this status */
    char load_only[64];
    const char *load_body;
    int load_limit_left;       /* next loads answer 500 model limit reached (a concurrent load took the place) */
    int load_refuse_left;      /* next loads answer 500 plain "proxy error: Could not establish connection" */
    int unload_status;         /* != 0: every unload answers this */
    void (*before_load)(struct frouter *f, const char *model); /* another client acts as our load arrives */
    char displace[64];         /* someone else unloads this model as our next load arrives */
    char displace2[64];        /* then this one as the load after that arrives */
    uint32_t queue_ms;         /* a later router that queues loads: accepted at once, started this much later */
    char queued[64];           /* the queued load's model, until it reaches the router */
    uint64_t queued_at;
    struct { char id[32]; int64_t v; } last_used[4]; /* rsd-serve's status.last_used (> 0, or -1 = null) */
    int n_last_used;
    /* the harness: lock, generation, log */
    bool lock_held;            /* LOCK answers held */
    uint64_t gen;              /* mutation generation (state dir) */
    bool bump_on_commit;
    void (*at_lock)(struct frouter *f); /* another process acts while we wait for the lock */
    char log[LOG_MAX][160];
    int nlog;
    int posts, gets, locks, commits, unlocks;
    uint64_t latency;          /* ms per request */
} frouter;

/* ---- the router's models: rsd_sim.h's, set up as a test needs them ------------ */
static rsim_model *fm_model(const char *id) {
    int i = rsim_find(&S, id);
    return i >= 0 ? &S.m[i] : NULL;
}
/* Put model id in state st now, as if it got there by itself (a loaded child with its
   port and meta; a download running until due_ms). */
static void fm_set(const char *id, rsd_model_state st) {
    rsim_model *m = fm_model(id);
    if (!m) return;
    rsim_tick(&S, NOW);
    m->stopping = m->waking = m->will_fail = false;
    m->failed = false;
    m->exit_code = 0;
    m->queue_seq = 0;
    switch (st) {
    case RSD_MODEL_LOADED:
    case RSD_MODEL_SLEEPING:
        if (!rsim_running(m)) m->port = 40001 + (int)(S.port_seq++ % 20000);
        m->state = st == RSD_MODEL_LOADED ? RSIM_LOADED : RSIM_SLEEPING;
        m->ever_ready = true;
        m->last_used_ms = m->last_task_ms = S.now;
        rsim_mark_loaded(&S, m);
        break;
    case RSD_MODEL_LOADING:
        rsim_r_start_load(&S, (int)(m - S.m));
        break;
    case RSD_MODEL_DOWNLOADING:
        m->state = RSIM_DOWNLOADING;
        m->due_ms = UINT64_MAX;
        break;
    default:
        m->state = RSIM_UNLOADED;
        break;
    }
}
static rsim_model *fm_add(frouter *f, const char *id, rsd_model_state st) {
    char spec[128];
    int i;
    (void)f;
    snprintf(spec, sizeof spec, "id=%s", id);
    i = rsim_add_model(&S, spec);
    if (i < 0) return NULL;
    fm_set(id, st);
    return &S.m[i];
}
static void fm_tag(rsim_model *m, const char *t) { snprintf(m->tags[m->ntags++], RSIM_TAG_MAX, "%s", t); }
static void fm_alias(rsim_model *m, const char *a) { snprintf(m->aliases[m->naliases++], RSIM_NAME_MAX, "%s", a); }
/* The state the router lists for id now. */
static rsd_model_state fm_state(const char *id) {
    rsim_model *m = fm_model(id);
    rsim_tick(&S, NOW);
    if (!m) return RSD_MODEL_UNKNOWN;
    switch (m->state) {
    case RSIM_LOADING: return RSD_MODEL_LOADING;
    case RSIM_LOADED: return RSD_MODEL_LOADED;
    case RSIM_SLEEPING: return RSD_MODEL_SLEEPING;
    case RSIM_DOWNLOADING: return RSD_MODEL_DOWNLOADING;
    default: return RSD_MODEL_UNLOADED;
    }
}
static bool fm_resident(const char *id) { return rsd_model_state_resident(fm_state(id)); }
/* Times the router reported id unloaded (its status_change events). */
static int fm_unloads(const char *id) {
    int i = rsim_find(&S, id), n = 0;
    uint32_t k, first = S.ev_seq > RSIM_EVENTS_MAX ? S.ev_seq - RSIM_EVENTS_MAX : 0;
    for (k = first; k < S.ev_seq; k++) {
        const rsim_event *e = &S.ev[k % RSIM_EVENTS_MAX];
        if (e->model == i && e->kind == RSIM_EV_STATUS_CHANGE && e->status == RSIM_UNLOADED) n++;
    }
    return n;
}

static int g_gen; /* the router generation fr_init sets up (rsim_gen): main runs every test on each */
static void fr_init(frouter *f, int max_instances) {
    memset(f, 0, sizeof *f);
    f->max_instances = max_instances;
    f->props_status = 200;
    f->lock_held = true;
    f->latency = 1;
    rsim_init(&S, RSIM_RT_ROUTER);
    S.o.idle_close_ms = 0;
    S.o.load_ms = 0;
    S.o.unload_ms = 0;
    S.o.models_max = max_instances;
    S.o.router_gen = g_gen;
    rsim_start(&S, NOW);
}
/* The frouter's router options into the simulator. */
static void fr_apply(frouter *f) {
    S.o.models_max = f->max_instances;
    S.o.load_ms = f->load_delay;
    S.o.unload_ms = f->stop_ms;
}

static void fr_log(frouter *f, const char *fmt, ...) {
    va_list ap;
    if (f->nlog >= LOG_MAX) return;
    va_start(ap, fmt);
    vsnprintf(f->log[f->nlog++], sizeof f->log[0], fmt, ap);
    va_end(ap);
}
#define ANSWER(st, txt) do { *status = (st); *body = (txt); *len = strlen(*body); return; } while (0)
static const char LIMIT_BODY[] = "{\"error\":{\"code\":500,\"message\":\"model limit reached, try again later\","
                                 "\"type\":\"server_error\"}}";

/* Another client (or the router's own queue) sends POST path {"model":model} to the router. */
static void sim_post_model(const char *path, const char *model) {
    char b[160];
    snprintf(b, sizeof b, "{\"model\":\"%s\"}", model);
    sim_post(path, b);
}
/* rsd-serve lists the router's listing plus status.last_used: add it to RB's entries. */
static void fr_last_used_in(frouter *f, size_t *len) {
    int k;
    if (*len >= sizeof RB) return;
    RB[*len] = '\0';
    for (k = 0; k < f->n_last_used; k++) {
        char id[48], add[48];
        char *e, *st;
        size_t n;
        snprintf(id, sizeof id, "\"id\":\"%s\"", f->last_used[k].id);
        if (!(e = strstr(RB, id)) || !(st = strstr(e, "\"status\":{"))) continue;
        st += strlen("\"status\":{");
        if (f->last_used[k].v < 0) snprintf(add, sizeof add, "\"last_used\":null,");
        else snprintf(add, sizeof add, "\"last_used\":%lld,", (long long)f->last_used[k].v);
        n = strlen(add);
        if (*len + n >= sizeof RB) return;
        memmove(st + n, st, *len - (size_t)(st - RB) + 1);
        memcpy(st, add, n);
        *len += n;
    }
}
static void fr_set_last_used(frouter *f, const char *id, int64_t v) {
    snprintf(f->last_used[f->n_last_used].id, sizeof f->last_used[0].id, "%s", id);
    f->last_used[f->n_last_used++].v = v;
}

/* Answer one HTTP step: logged as the machine sent it, the injections first, else the
   router's answer from the simulator (which may move NOW on, for an answer it defers). */
static void fr_http(frouter *f, const rsd_step_http *h, uint64_t now, int *transport, int *status,
                    const char **body, size_t *len) {
    const char *path = strstr(h->url, "://");
    path = path ? strchr(path + 3, '/') : NULL;
    if (!path) path = "";
    (void)now;
    *transport = RSD_OK;
    *status = 0;
    *body = "";
    *len = 0;
    fr_apply(f);
    rsim_tick(&S, NOW);
    if (f->queued[0] && NOW >= f->queued_at) { /* the queued load starts */
        sim_post_model("/models/load", f->queued);
        f->queued[0] = '\0';
    }
    if (strcmp(h->method, "GET") == 0) {
        f->gets++;
        fr_log(f, "GET %s", path);
        if (strcmp(path, "/props") == 0) {
            if (f->props_status != 200) ANSWER(f->props_status, "{}");
            if (f->props_hide_max) ANSWER(200, "{\"role\":\"router\"}");
        } else {
            if (sim_list_fault(&f->list, f->posts, transport, status, body, len)) return;
        }
    } else {
        f->posts++;
        fr_log(f, "POST %s %s", path, h->model);
        if (strcmp(path, "/models/unload") == 0 && f->unload_status)
            ANSWER(f->unload_status, "{\"error\":{\"message\":\"boom\"}}");
        if (strcmp(path, "/models/load") == 0) {
            if (f->load_status && fm_model(h->model) && !fm_resident(h->model) &&
                (!f->load_only[0] || strcmp(f->load_only, h->model) == 0))
                ANSWER(f->load_status, f->load_body ? f->load_body : "{}");
            if (f->before_load) f->before_load(f, h->model);
            if (f->displace[0]) {
                sim_post_model("/models/unload", f->displace);
                snprintf(f->displace, sizeof f->displace, "%s", f->displace2);
                f->displace2[0] = '\0';
            }
            if (f->load_limit_left > 0) {
                f->load_limit_left--;
                ANSWER(500, LIMIT_BODY);
            }
            if (f->load_refuse_left > 0) {
                f->load_refuse_left--;
                ANSWER(500, "proxy error: Could not establish connection");
            }
            if (f->queue_ms) {
                snprintf(f->queued, sizeof f->queued, "%s", h->model);
                f->queued_at = NOW + f->queue_ms;
                ANSWER(200, "{\"success\":true}");
            }
        }
    }
    sim_http(h, transport, status, len);
    NOW -= 1; /* the driver adds its latency */
    *body = RB;
    if (f->n_last_used && strcmp(h->method, "GET") == 0 && strcmp(path, "/props") != 0) fr_last_used_in(f, len);
}

/* ---- harness -------------------------------------------------------------- */
static rsd_decision_cache CACHE;
static int max_notices_seen_before_done;

static void desc_init(rsd_reconcile_desc *d, const char *keep) {
    memset(d, 0, sizeof *d);
    d->base_url = "http://mini:8080/v1";
    d->target_id = "mini";
    d->keep = keep;
    d->cache = &CACHE;
}

/* Run one reconcile to DONE; returns result.error. */
static int drive(frouter *f, const rsd_reconcile_desc *d) {
    int guard, rc;
    f->nlog = 0;
    f->posts = f->gets = f->locks = f->commits = f->unlocks = 0;
    rc = rsd_reconcile_begin(R, d, NOW);
    if (rc < 0) return rc;
    max_notices_seen_before_done = 0;
    for (guard = 0; guard < 5000; guard++) {
        rsd_step s = rsd_reconcile_next(R, NOW);
        rsd_step again;
        int tr, st;
        const char *body;
        size_t len;
        switch (s.kind) {
        case RSD_STEP_HTTP:
            again = rsd_reconcile_next(R, NOW); /* idempotent while outstanding */
            CHECK(again.kind == RSD_STEP_HTTP && again.http.url == s.http.url);
            CHECK(s.http.timeout_ms >= 1);
            fr_http(f, &s.http, NOW, &tr, &st, &body, &len);
            NOW += f->latency;
            CHECK_EQ_INT(rsd_reconcile_feed(R, tr, st, body, len, NOW), RSD_OK);
            break;
        case RSD_STEP_WAIT:
            CHECK(s.wake_ms > NOW || s.wake_ms == NOW);
            NOW = s.wake_ms;
            break;
        case RSD_STEP_LOCK:
            f->locks++;
            fr_log(f, "LOCK");
            if (f->at_lock) f->at_lock(f);
            CHECK_EQ_INT(rsd_reconcile_lock_done(R, f->lock_held, f->gen, NOW), RSD_OK);
            break;
        case RSD_STEP_COMMIT:
            f->commits++;
            fr_log(f, "COMMIT");
            if (f->bump_on_commit) CHECK_EQ_INT(rsd_reconcile_commit_done(R, ++f->gen), RSD_OK);
            break;
        case RSD_STEP_UNLOCK:
            f->unlocks++;
            fr_log(f, "UNLOCK");
            break;
        case RSD_STEP_DONE:
            CHECK_EQ_INT(f->locks, f->unlocks);
            return s.result;
        default:
            CHECK(0);
            return -999;
        }
        if (N_NOTICES > max_notices_seen_before_done) max_notices_seen_before_done = N_NOTICES;
    }
    CHECK(0); /* never finished */
    return -998;
}

/* The log joined with " | ", POST/GET only when http_only. */
static const char *joined(frouter *f, bool http_only) {
    static char buf[4096];
    size_t n = 0;
    int i;
    buf[0] = '\0';
    for (i = 0; i < f->nlog; i++) {
        if (http_only && strncmp(f->log[i], "GET", 3) != 0 && strncmp(f->log[i], "POST", 4) != 0) continue;
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", n ? " | " : "", f->log[i]);
    }
    return buf;
}
static const char *posts_of(frouter *f) {
    static char buf[2048];
    size_t n = 0;
    int i;
    buf[0] = '\0';
    for (i = 0; i < f->nlog; i++)
        if (strncmp(f->log[i], "POST", 4) == 0)
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", n ? " | " : "", f->log[i] + 5);
    return buf;
}
static int count_notices(rsd_notice_kind kind, rsd_notice_level level) {
    int i, c = 0;
    for (i = 0; i < N_NOTICES; i++)
        if (NOTICES[i].notice.kind == kind && (level == RSD_LEVEL_NONE || NOTICES[i].notice.level == level)) c++;
    return c;
}
static bool any_notice_has(const char *s) {
    int i;
    for (i = 0; i < N_NOTICES; i++)
        if (strstr(NOTICES[i].text, s)) return true;
    return false;
}
/* A fresh cache; the clock only goes on (the simulator's never goes back). */
static void fresh(void) {
    memset(&CACHE, 0, sizeof CACHE);
    NOW = NOW < 1000000 ? 1000000 : NOW + 1000000;
}

/* ==== 6.2 llamacpp-residency.test.ts ====================================== */
static rsd_json_tok TOKS[RSD_LISTING_MAX_TOKENS];
static rsd_listing L;
static rsd_listed_model L_models[RSD_LISTING_MAX_MODELS];
static char L_arena[RSD_LISTING_ARENA_BYTES];

static int resident_ids(const char *json, char *out, size_t cap) {
    int i, rc = rsd_listing_init(&L, L_models, RSD_LISTING_MAX_MODELS, L_arena, sizeof L_arena);
    if (rc == RSD_OK) rc = rsd_router_parse_models(json, strlen(json), TOKS, RSD_LISTING_MAX_TOKENS, &L);
    size_t n = 0;
    out[0] = '\0';
    if (rc < 0) return rc;
    for (i = 0; i < L.n; i++)
        if (rsd_model_state_resident(L.models[i].state))
            n += (size_t)snprintf(out + n, cap - n, "%s%.*s", n ? "," : "", (int)L.models[i].id.len, L.models[i].id.ptr);
    return L.n;
}

static void test_6_2_1_parses_resident_ids(void) {
    char ids[256];
    const char *j = "{\"data\":[{\"id\":\"a\",\"status\":{\"value\":\"loaded\"}},"
                    "{\"id\":\"b\",\"tags\":[\"pinned:true\",7,\"role:code\"],\"status\":{\"value\":\"loading\"}},"
                    "{\"id\":\"c\",\"status\":{\"value\":\"unloaded\"}}]}";
    CHECK_EQ_INT(resident_ids(j, ids, sizeof ids), 3);
    CHECK_EQ_STR(ids, "a,b");
    CHECK_EQ_INT(L.models[1].n_tags, 2); /* string tags only (L9) */
    CHECK(rsd_str_eq_c(rsd_listed_tag(&L.models[1], 0), "pinned:true"));
    CHECK(L.has_states);
    CHECK_EQ_INT(resident_ids("{}", ids, sizeof ids), 0);
    CHECK_EQ_INT(resident_ids("null", ids, sizeof ids), 0);
    CHECK_EQ_INT(resident_ids("{\"data\":[{\"id\":42}]}", ids, sizeof ids), 0);
    CHECK_EQ_INT(L.n_skipped, 1);
    /* status as a bare string (L10), failed flag, downloading, unknown */
    CHECK_EQ_INT(resident_ids("{\"data\":[{\"id\":\"s\",\"status\":\"sleeping\"},"
                              "{\"id\":\"f\",\"status\":{\"value\":\"unloaded\",\"failed\":true,\"exit_code\":3}},"
                              "{\"id\":\"d\",\"status\":{\"value\":\"downloading\"}},{\"id\":\"u\",\"status\":{\"value\":\"zzz\"}},"
                              "{\"id\":\"x\\u0000y\",\"status\":\"loaded\"}]}", ids, sizeof ids), 4);
    CHECK_EQ_STR(ids, "s");
    CHECK_EQ_INT(L.models[1].state, RSD_MODEL_FAILED);
    CHECK(L.models[1].has_exit_code && L.models[1].exit_code == 3);
    CHECK_EQ_INT(L.models[2].state, RSD_MODEL_DOWNLOADING);
    CHECK_EQ_INT(L.models[3].state, RSD_MODEL_UNKNOWN);
    CHECK_EQ_INT(L.n_skipped, 1); /* an id with a NUL byte */
}

static void test_6_2_2_parses_router_capacity(void) {
    rsd_router_props p;
    const char *cases[] = {"{\"max_instances\":2}", "{\"max_instances\":0}", "{\"max_instances\":\"2\"}",
                           "{\"max_instances\":null}", "{\"max_instances\":-3}", "{\"max_instances\":2.9}", "[]"};
    const int want[] = {2, 0, 0, 0, 0, 2, 0};
    int i;
    for (i = 0; i < 7; i++) {
        CHECK_EQ_INT(rsd_router_parse_props(cases[i], strlen(cases[i]), TOKS, 64, &p), RSD_OK);
        CHECK_EQ_INT(p.max_instances, want[i]);
        CHECK(!p.unlimited);
    }
    {
        const char *j = "{\"role\":\"router\",\"max_instances\":0}";
        CHECK_EQ_INT(rsd_router_parse_props(j, strlen(j), TOKS, 64, &p), RSD_OK);
    }
    CHECK(p.is_router && p.unlimited && p.max_instances == 0);
    CHECK(rsd_router_parse_props("{\"max_instances\":", 17, TOKS, 64, &p) < 0);
    { /* the version is never read: July's bNNNN, the later semantic form, none, junk */
        static const char *const builds[] = {"\"b10116-7e743c3a3\"", "\"0.4.0-dev (build 11037, commit 5d3e1f0)\"",
                                             "null", "42", "\"\""};
        for (i = 0; i < 5; i++) {
            char j[160];
            snprintf(j, sizeof j, "{\"role\":\"router\",\"build_info\":%s,\"max_instances\":3}", builds[i]);
            CHECK_EQ_INT(rsd_router_parse_props(j, strlen(j), TOKS, 64, &p), RSD_OK);
            CHECK(p.is_router && !p.unlimited && p.max_instances == 3);
        }
    }
}

/* GET /slots: b10116's answer (no n_prompt_tokens in a slot that never ran), ids taken
   from the answer or the place, the count beyond the room, and shapes that are errors. */
static void test_parses_slots(void) {
    const char *real = "[{\"id\":0,\"n_ctx\":1024,\"is_processing\":false},"
                       "{\"id\":1,\"n_ctx\":1024,\"is_processing\":false,\"id_task\":0,\"n_prompt_tokens\":500}]";
    const char *odd = "[{\"id\":\"x\",\"n_ctx\":-5,\"n_prompt_tokens\":-2},{\"id\":7},{}]";
    rsd_slot sl[2];
    CHECK_EQ_INT(rsd_router_parse_slots(real, strlen(real), TOKS, 64, sl, 2), 2);
    CHECK(sl[0].id == 0 && sl[0].n_ctx == 1024 && sl[0].n_prompt_tokens == 0);
    CHECK(sl[1].id == 1 && sl[1].n_ctx == 1024 && sl[1].n_prompt_tokens == 500);
    CHECK_EQ_INT(rsd_router_parse_slots(odd, strlen(odd), TOKS, 64, sl, 2), 3); /* the third: no room */
    CHECK(sl[0].id == 0 && sl[0].n_ctx == 0 && sl[0].n_prompt_tokens == 0);
    CHECK(sl[1].id == 7 && sl[1].n_ctx == 0);
    CHECK_EQ_INT(rsd_router_parse_slots("[]", 2, TOKS, 64, sl, 2), 0);
    CHECK_EQ_INT(rsd_router_parse_slots("{}", 2, TOKS, 64, sl, 2), RSD_ERR_PAYLOAD);
    CHECK_EQ_INT(rsd_router_parse_slots("[1]", 3, TOKS, 64, sl, 2), RSD_ERR_PAYLOAD);
    CHECK(rsd_router_parse_slots("[{\"id\":", 7, TOKS, 64, sl, 2) < 0);
    CHECK_EQ_INT(rsd_router_parse_slots(real, strlen(real), TOKS, 64, NULL, 1), RSD_ERR_ARG);
}

/* scout (pinned) + coder resident, capacity 2. */
static void setup_scout_coder(frouter *f) {
    fr_init(f, 2);
    fm_tag(fm_add(f, "scout", RSD_MODEL_LOADED), "pinned:true");
    fm_add(f, "coder", RSD_MODEL_LOADED);
}

static void test_6_2_3_scout_keep_never_evicts_coresident_coder(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    setup_scout_coder(&f);
    desc_init(&d, "scout");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.posts, 0);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(RES->decision, RSD_DECISION_ALREADY_RESIDENT);
}

static void test_6_2_4_coder_keep_leaves_pinned_scout(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    setup_scout_coder(&f);
    desc_init(&d, "coder");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.posts, 0);
    CHECK_EQ_INT(fm_state("scout"), RSD_MODEL_LOADED);
}

static void test_6_2_5_loads_into_free_slot_without_evicting(void) {
    frouter f;
    rsd_reconcile_desc d;
    rsd_step s;
    fresh();
    fr_init(&f, 2);
    fm_tag(fm_add(&f, "scout", RSD_MODEL_LOADED), "pinned:true");
    fm_add(&f, "coder", RSD_MODEL_UNLOADED);
    desc_init(&d, "coder");
    /* the exact load request */
    REQUIRE(rsd_reconcile_begin(R, &d, NOW) == RSD_OK);
    s = rsd_reconcile_next(R, NOW);
    CHECK_EQ_STR(s.http.url, "http://mini:8080/v1/models");
    CHECK_EQ_STR(s.http.method, "GET");
    CHECK(s.http.body == NULL && s.http.n_headers == 0);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(posts_of(&f), "/models/load coder");
    CHECK_EQ_INT(fm_state("scout"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(fm_state("coder"), RSD_MODEL_LOADED);
    REQUIRE(N_NOTICES >= 1);
    CHECK_EQ_INT(NOTICES[0].notice.kind, RSD_NOTICE_CO_RESIDENT);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK(RES->loaded);
    CHECK_EQ_STR(ATTR_ADD(R), "coder");
}

static void test_6_2_5_load_request_shape(void) {
    frouter f;
    rsd_reconcile_desc d;
    rsd_step s;
    int tr, st;
    const char *body;
    size_t len;
    fresh();
    fr_init(&f, 2);
    fm_add(&f, "coder", RSD_MODEL_UNLOADED);
    desc_init(&d, "coder");
    d.bearer = "sk-1";
    REQUIRE(rsd_reconcile_begin(R, &d, NOW) == RSD_OK);
    for (;;) {
        s = rsd_reconcile_next(R, NOW);
        REQUIRE(s.kind == RSD_STEP_HTTP);
        if (s.http.op == RSD_OP_LOAD) break;
        CHECK_EQ_INT(s.http.n_headers, 1);
        CHECK_EQ_STR(s.http.headers[0].value, "Bearer sk-1");
        fr_http(&f, &s.http, NOW, &tr, &st, &body, &len);
        rsd_reconcile_feed(R, tr, st, body, len, NOW);
    }
    CHECK_EQ_STR(s.http.url, "http://mini:8080/models/load");
    CHECK_EQ_STR(s.http.method, "POST");
    CHECK(s.http.body && s.http.body_len == strlen("{\"model\":\"coder\"}") &&
          memcmp(s.http.body, "{\"model\":\"coder\"}", s.http.body_len) == 0);
    CHECK_EQ_INT(s.http.n_headers, 2);
    CHECK_EQ_STR(s.http.headers[0].name, "Content-Type");
    CHECK_EQ_STR(s.http.headers[0].value, "application/json");
    CHECK_EQ_STR(s.http.headers[1].name, "Authorization");
}

static void setup_capacity_full(frouter *f) {
    fr_init(f, 3);
    fm_tag(fm_add(f, "scout", RSD_MODEL_LOADED), "pinned:true");
    fm_add(f, "configured-model", RSD_MODEL_LOADED);
    fm_add(f, "old-scratch", RSD_MODEL_LOADED);
    fm_add(f, "new-code", RSD_MODEL_UNLOADED);
}
static rsd_protected_model PROT[4];
static void protect(rsd_reconcile_desc *d, const char *id, rsd_role role) {
    PROT[d->n_protected].model_id = rsd_str_c(id);
    PROT[d->n_protected].role = role;
    d->protected_models = PROT;
    d->n_protected++;
}

static void test_6_2_6_capacity_full_eviction(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    setup_capacity_full(&f);
    desc_init(&d, "new-code");
    protect(&d, "configured-model", RSD_ROLE_WORKER);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(posts_of(&f), "/models/unload old-scratch | /models/load new-code");
    CHECK_EQ_INT(RES->n_evicted, 1);
    CHECK_EQ_STR(RES->evicted[0].id, "old-scratch");
    CHECK_EQ_INT(RES->n_attr_remove, 0); /* it was not ours */
}

/* Least recently used: the recorded last uses (desc.last_used, the state directory's)
   choose the victim among equals; a last use the listing gives itself (status.last_used,
   as rsd-serve lists it) wins over the record; null reads as unknown. */
static void test_lru_record_and_listing(void) {
    static const rsd_last_use rec[] = {{"alpha", 3000}, {"bravo", 1000}, {"charlie", 2000}, {"", 5}, {"x", 0}};
    static const char *const ours[] = {"alpha", "bravo", "charlie"};
    frouter f;
    rsd_reconcile_desc d;
    int k;
    fresh();
    fr_init(&f, 3);
    fm_add(&f, "alpha", RSD_MODEL_LOADED);
    fm_add(&f, "bravo", RSD_MODEL_LOADED);
    fm_add(&f, "charlie", RSD_MODEL_LOADED);
    fm_add(&f, "delta", RSD_MODEL_UNLOADED);
    desc_init(&d, "delta");
    d.ours = ours;
    d.n_ours = 3;
    d.last_used = rec;
    d.n_last_used = 5;
    d.cache = NULL;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(posts_of(&f), "/models/unload bravo | /models/load delta");
    CHECK_EQ_INT(RES->reason, RSD_REASON_EVICT_LRU);
    CHECK(any_notice_has("'bravo' (least recently used)"));
    /* the listing's own figures: alpha is the oldest there */
    fresh();
    fr_init(&f, 3);
    fm_add(&f, "alpha", RSD_MODEL_LOADED);
    fr_set_last_used(&f, "alpha", 10);
    fm_add(&f, "bravo", RSD_MODEL_LOADED);
    fr_set_last_used(&f, "bravo", 9000);
    fm_add(&f, "charlie", RSD_MODEL_LOADED);
    fr_set_last_used(&f, "charlie", 5000);
    fm_add(&f, "delta", RSD_MODEL_UNLOADED);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(posts_of(&f), "/models/unload alpha | /models/load delta");
    /* null (never used) is unknown: the record decides for it, the listing for the rest */
    fresh();
    fr_init(&f, 3);
    fm_add(&f, "alpha", RSD_MODEL_LOADED);
    fr_set_last_used(&f, "alpha", 10);
    fm_add(&f, "bravo", RSD_MODEL_LOADED);
    fr_set_last_used(&f, "bravo", -1); /* the record: 1000 */
    fm_add(&f, "charlie", RSD_MODEL_LOADED);
    fr_set_last_used(&f, "charlie", 5000);
    fm_add(&f, "delta", RSD_MODEL_UNLOADED);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(posts_of(&f), "/models/unload alpha | /models/load delta");
    /* nothing known anywhere: by id */
    fresh();
    fr_init(&f, 3);
    for (k = 0; k < 3; k++) fm_add(&f, ours[2 - k], RSD_MODEL_LOADED);
    fm_add(&f, "delta", RSD_MODEL_UNLOADED);
    d.n_last_used = 0;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(posts_of(&f), "/models/unload alpha | /models/load delta");
    CHECK_EQ_INT(RES->reason, RSD_REASON_EVICT_UNPROTECTED);
    CHECK(any_notice_has("'alpha' (no last use is known: first by id)"));
    d.n_last_used = -1; /* a bad count */
    CHECK_EQ_INT(rsd_reconcile_begin(R, &d, NOW), RSD_ERR_ARG);
}

/* A free reconcile (no keep, free_bytes): the least recently used models this library
   loaded go until enough is freed, nothing is loaded, nothing cached, the attribution
   loses them; with nothing of ours to unload it declines without a request. */
static void test_free_bytes(void) {
    static const rsd_last_use rec[] = {{"alpha", 3000}, {"bravo", 1000}, {"charlie", 2000}};
    static const char *const ours[] = {"alpha", "bravo", "charlie"};
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 4);
    fm_add(&f, "alpha", RSD_MODEL_LOADED)->size_bytes = 100;
    fm_add(&f, "bravo", RSD_MODEL_LOADED)->size_bytes = 100;
    fm_add(&f, "charlie", RSD_MODEL_LOADED)->size_bytes = 100;
    fm_add(&f, "foreign", RSD_MODEL_LOADED)->size_bytes = 500;
    desc_init(&d, NULL);
    d.free_bytes = 150;
    d.ours = ours;
    d.n_ours = 3;
    d.last_used = rec;
    d.n_last_used = 3;
    d.lock = true;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(posts_of(&f), "/models/unload bravo | /models/unload charlie");
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_FREED);
    CHECK_EQ_INT(RES->decision, RSD_DECISION_FREE);
    CHECK_EQ_INT(RES->reason, RSD_REASON_FREE_BYTES);
    CHECK(RES->freed_bytes == 200);
    CHECK_EQ_INT(RES->n_evicted, 2);
    CHECK_EQ_INT(RES->n_attr_remove, 2);
    CHECK_EQ_INT(f.locks, 1);
    CHECK(!RES->cached);
    CHECK(any_notice_has("unloading residency-loaded model 'bravo' (least recently used)"));
    /* nothing of ours left that is sized: declined, no mutation */
    fresh();
    fr_init(&f, 4);
    fm_add(&f, "foreign", RSD_MODEL_LOADED)->size_bytes = 500;
    f.load_delay = 1000000;
    fr_apply(&f);
    fm_add(&f, "alpha", RSD_MODEL_LOADING); /* ours, but no size listed: its first load has no meta yet */
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(posts_of(&f), "");
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_DECLINED);
    CHECK_EQ_INT(RES->reason, RSD_REASON_FREE_NOTHING);
    CHECK(strstr(RES->message, "only 0 bytes of the 150 bytes asked") != NULL);
    CHECK_EQ_INT(f.locks, 0);
    d.free_bytes = 0; /* neither a keep nor bytes */
    CHECK_EQ_INT(rsd_reconcile_begin(R, &d, NOW), RSD_ERR_ARG);
}

static void test_6_2_7_declines_when_every_slot_pinned(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 2);
    fm_tag(fm_add(&f, "scout", RSD_MODEL_LOADED), "pinned:true");
    fm_tag(fm_add(&f, "scout2", RSD_MODEL_LOADED), "role:scout");
    fm_add(&f, "coder", RSD_MODEL_UNLOADED);
    desc_init(&d, "coder");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.posts, 0);
    CHECK_EQ_INT(f.locks, 0);
    REQUIRE(N_NOTICES >= 1);
    CHECK_EQ_INT(NOTICES[N_NOTICES - 1].notice.kind, RSD_NOTICE_WILL_NOT_FIT);
    CHECK_EQ_INT(NOTICES[N_NOTICES - 1].notice.level, RSD_LEVEL_ERROR);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_DECLINED);
}

static void test_6_2_8_capacity1_declines_pinned_override(void) {
    frouter f;
    rsd_reconcile_desc d;
    const rsd_reconcile_notice *n;
    fresh();
    fr_init(&f, 1);
    fm_add(&f, "Nemo-3.5-Lightning", RSD_MODEL_LOADED);
    fm_tag(fm_add(&f, "scout", RSD_MODEL_UNLOADED), "pinned:true");
    desc_init(&d, "scout");
    protect(&d, "Nemo-3.5-Lightning", RSD_ROLE_WORKER);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.posts, 0);
    REQUIRE(N_NOTICES >= 1);
    n = &NOTICES[N_NOTICES - 1];
    CHECK(n->notice.config_protected && (n->notice.detail & RSD_DETAIL_CONFIG_PROTECTED));
    CHECK(strstr(n->text, "'Nemo-3.5-Lightning' (a worker model)") != NULL);
    /* then ensuring the worker model itself: no POSTs, no will-not-fit */
    desc_init(&d, "Nemo-3.5-Lightning");
    protect(&d, "Nemo-3.5-Lightning", RSD_ROLE_WORKER);
    d.n_protected = 1;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.posts, 0);
    CHECK_EQ_INT(count_notices(RSD_NOTICE_WILL_NOT_FIT, RSD_LEVEL_NONE), 0);
}

static void test_6_2_9_capacity1_pinned_override_displaces_unprotected(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 1);
    fm_add(&f, "scratch", RSD_MODEL_LOADED);
    fm_tag(fm_add(&f, "scout", RSD_MODEL_UNLOADED), "pinned:true");
    desc_init(&d, "scout");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(posts_of(&f), "/models/unload scratch | /models/load scout");
}

static void test_6_2_10_managed_false_observes(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    setup_capacity_full(&f);
    desc_init(&d, "new-code");
    d.user_managed = true;
    d.lock = true;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.posts, 0);
    CHECK_EQ_INT(f.locks, 0);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_OBSERVED);
    CHECK_EQ_INT(RES->decision, RSD_DECISION_OBSERVE);
    CHECK_EQ_INT(RES->would, RSD_DECISION_LOAD_AFTER_EVICT);
    CHECK(RES->cached); /* R52 */
}

static void test_6_2_11_ttl_dedupes_repeat_ensures(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    setup_scout_coder(&f);
    desc_init(&d, "coder");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(f.gets > 0);
    NOW += 100;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.gets + f.posts, 0);
    CHECK(RES->cache_hit);
    CHECK_EQ_INT(RES->requests, 0);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    /* a differently written base URL is the same target (W9) */
    d.base_url = "HTTP://Mini:8080/v1/";
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(RES->cache_hit);
    /* after the TTL: probes again */
    NOW += 60001;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(!RES->cache_hit && f.gets == 2);
}

/* Upstream 6.2.12 reloaded the displaced pinned scout; on a real router whose load
   displaced something the server is full, so that reload would displace the keep
   (W11). Now: capacity unknown = no free slot known -> not reloaded, one swap/warning
   notice, the turn succeeds, and no extra GET (the last poll already shows it). */
static void other_client_fills_the_router(frouter *f, const char *model) {
    (void)model;
    f->before_load = NULL;
    sim_post_model("/models/load", "other");
}
static void test_6_2_12_displaced_pinned_not_reloaded_when_capacity_unknown(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 0);
    f.props_status = 404; /* capacity unknown */
    fm_tag(fm_add(&f, "scout", RSD_MODEL_LOADED), "pinned:true");
    fm_add(&f, "old-code", RSD_MODEL_LOADED);
    fm_add(&f, "new-code", RSD_MODEL_UNLOADED);
    fm_add(&f, "other", RSD_MODEL_UNLOADED);
    f.max_instances = 2; /* the real limit, unknown to the reconcile */
    f.before_load = other_client_fills_the_router; /* so the router's LRU takes the pinned scout */
    desc_init(&d, "new-code");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(fm_state("new-code"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    if (g_gen != RSIM_GEN_JULY) {
        /* a later router does not unload its own LRU for the second of two cold loads at
           once: ours gets "model limit reached" (#28774); the listing after it shows the
           other client's model loaded and no room known: the capacity answer evicts it */
        CHECK_EQ_STR(joined(&f, true), "GET /v1/models | GET /props | POST /models/unload old-code | "
                                       "GET /v1/models | POST /models/load new-code | GET /v1/models | "
                                       "POST /models/unload other | GET /v1/models | POST /models/load new-code | "
                                       "GET /v1/models");
        CHECK_EQ_INT(fm_state("scout"), RSD_MODEL_LOADED);
        CHECK_EQ_INT(count_notices(RSD_NOTICE_LOAD_FAILED, RSD_LEVEL_ERROR), 0);
        REQUIRE(RES->n_evicted == 2);
        CHECK_EQ_STR(RES->evicted[1].id, "other");
        CHECK(!RES->evicted[0].displaced && !RES->evicted[1].displaced);
        return;
    }
    CHECK_EQ_STR(joined(&f, true), "GET /v1/models | GET /props | POST /models/unload old-code | "
                                   "GET /v1/models | POST /models/load new-code | GET /v1/models");
    CHECK_EQ_INT(count_notices(RSD_NOTICE_SWAP, RSD_LEVEL_WARNING), 2); /* old-code's eviction, scout */
    CHECK_EQ_INT(NOTICES[N_NOTICES - 1].dmsg, RSD_DMSG_UNRESTORED);
    CHECK(any_notice_has("displaced pinned 'scout', and residency did not reload it: the server has no free slot"));
    REQUIRE(RES->n_evicted == 2);
    CHECK_EQ_STR(RES->evicted[1].id, "scout");
    CHECK(RES->evicted[1].displaced && !RES->evicted[1].restored);
    CHECK(!RES->evicted[0].displaced);
    CHECK_EQ_STR(NOTICES[N_NOTICES - 1].subject, "scout");
    CHECK(NOTICES[N_NOTICES - 1].notice.detail & RSD_DETAIL_UNRESTORED);
}

/* W11: with a free slot known, the displaced pinned model is reloaded (no extra GET
   before it); a restored/info notice says so. */
static void test_w11_displaced_pinned_reloaded_into_known_free_slot(void) {
    frouter f;
    rsd_reconcile_desc d;
    const char *own[2] = {"scout", "other"};
    fresh();
    fr_init(&f, 3);
    fm_tag(fm_add(&f, "scout", RSD_MODEL_LOADED), "pinned:true");
    fm_add(&f, "new-code", RSD_MODEL_UNLOADED);
    snprintf(f.displace, sizeof f.displace, "scout"); /* someone else's doing: 1 of 3 slots used after */
    desc_init(&d, "new-code");
    d.ours = own;
    d.n_ours = 2;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(joined(&f, true), "GET /v1/models | GET /props | POST /models/load new-code | GET /v1/models | "
                                   "POST /models/load scout | GET /v1/models");
    CHECK_EQ_INT(fm_state("scout"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(count_notices(RSD_NOTICE_RESTORED, RSD_LEVEL_INFO), 1);
    CHECK(any_notice_has("displaced pinned 'scout'; reloaded it into a free slot"));
    REQUIRE(RES->n_evicted == 1);
    CHECK(RES->evicted[0].displaced && RES->evicted[0].restored);
    CHECK_EQ_INT(RES->n_attr_remove, 0); /* back, so still ours */
    /* nothing pinned gone: no pinned request at all */
    fresh();
    fm_set("new-code", RSD_MODEL_UNLOADED);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(joined(&f, true), "GET /v1/models | GET /props | POST /models/load new-code | GET /v1/models");
    CHECK_EQ_INT(RES->n_evicted, 0);
}

/* W11: a reload into the free slot that displaces the keep anyway (a concurrent change
   on the server) never fails the turn: the keep is loaded again, no second pass. */
static void test_w11_pinned_reload_never_leaves_keep_displaced(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 3);
    fm_tag(fm_add(&f, "scout", RSD_MODEL_LOADED), "pinned:true");
    fm_add(&f, "new-code", RSD_MODEL_UNLOADED);
    snprintf(f.displace, sizeof f.displace, "scout");
    snprintf(f.displace2, sizeof f.displace2, "new-code"); /* the scout's reload pushes the keep out */
    desc_init(&d, "new-code");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(posts_of(&f), "/models/load new-code | /models/load scout | /models/load new-code");
    CHECK_EQ_INT(fm_state("new-code"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(count_notices(RSD_NOTICE_LOAD_FAILED, RSD_LEVEL_NONE), 0);
    /* the same when the deadline has passed: reported, not hidden (RSD_ERR_DISPLACED) */
    fresh();
    fm_set("new-code", RSD_MODEL_UNLOADED);
    fm_set("scout", RSD_MODEL_LOADED);
    snprintf(f.displace, sizeof f.displace, "scout");
    snprintf(f.displace2, sizeof f.displace2, "new-code");
    d.deadline_ms = 45; /* the scout's reload wait ends at the deadline */
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_DISPLACED);
    CHECK_EQ_STR(posts_of(&f), "/models/load new-code | /models/load scout");
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_LOAD_FAILED);
    CHECK_EQ_INT(count_notices(RSD_NOTICE_LOAD_FAILED, RSD_LEVEL_ERROR), 1);
}

static void test_6_2_13_does_not_manage_non_router_payloads(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 2);
    rsim_init(&S, RSIM_RT_SERVER); /* a plain llama-server: its listing has no status */
    S.o.idle_close_ms = 0;
    S.o.load_ms = 0;
    REQUIRE(rsim_add_model(&S, "id=model.gguf") == 0);
    rsim_start(&S, NOW);
    desc_init(&d, "other");
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_NOT_ROUTER);
    CHECK_EQ_STR(joined(&f, false), "GET /v1/models");
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_DEGRADED);
    CHECK_EQ_INT(RES->decision, RSD_DECISION_OBSERVE);
    CHECK(!RES->cached);
}

static void test_6_2_14_degrades_fetch_failures_silently(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    setup_scout_coder(&f);
    f.list.fail_left = 2;
    f.list.fail_transport = RSD_ERR_CONNECT;
    desc_init(&d, "coder");
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_CONNECT);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_DEGRADED);
    CHECK_EQ_INT(RES->reason, RSD_REASON_PROBE_FAILED);
    CHECK_EQ_INT(count_notices(RSD_NOTICE_DEGRADED, RSD_LEVEL_INFO), 1); /* info only: nothing loud */
    CHECK_EQ_INT(N_NOTICES, 1);
    CHECK_EQ_INT(f.posts, 0);
    /* R41: not cached, the next call probes again */
    f.list.fail_transport = RSD_OK;
    f.list.fail_status = 503;
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_HTTP_STATUS);
    CHECK_EQ_INT(f.gets, 1);
    CHECK(strstr(RES->message, "HTTP 503") != NULL);
}

/* ==== 6.3 catalog guard (#127) ============================================ */
static void setup_catalog(frouter *f) {
    fr_init(f, 1);
    fm_add(f, "resident", RSD_MODEL_LOADED);
    fm_add(f, "wanted", RSD_MODEL_UNLOADED);
}

static void test_6_3_1_never_unloads_for_unserved_keep(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    setup_catalog(&f);
    desc_init(&d, "absent");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.posts, 0);
    CHECK_EQ_INT(fm_state("resident"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_DECLINED);
    CHECK_EQ_INT(RES->reason, RSD_REASON_DECLINE_NOT_LOADABLE);
}

static void test_6_3_2_reports_why_residency_was_skipped(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    setup_catalog(&f);
    desc_init(&d, "absent");
    drive(&f, &d);
    REQUIRE(N_NOTICES == 1);
    CHECK_EQ_INT(NOTICES[0].notice.kind, RSD_NOTICE_WILL_NOT_FIT);
    CHECK_EQ_INT(NOTICES[0].notice.level, RSD_LEVEL_ERROR);
    CHECK(strstr(NOTICES[0].text, "does not serve") != NULL);
    CHECK(strstr(NOTICES[0].text, "'mini'") != NULL);
    CHECK(strstr(NOTICES[0].text, "'absent'") != NULL);
}

static void test_6_3_3_restores_evicted_when_load_rejected_500(void) {
    frouter f;
    rsd_reconcile_desc d;
    const char *own[1] = {"resident"};
    fresh();
    setup_catalog(&f);
    f.load_status = 500;
    snprintf(f.load_only, sizeof f.load_only, "wanted");
    f.load_body = "{\"error\":{\"code\":500,\"message\":\"failed to spawn server instance\"}}";
    desc_init(&d, "wanted");
    d.ours = own;
    d.n_ours = 1;
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_LOAD_REJECTED);
    CHECK(strstr(RES->message, "HTTP 500") != NULL);
    CHECK_EQ_INT(fm_state("resident"), RSD_MODEL_LOADED);
    CHECK(any_notice_has("restored"));
    CHECK_EQ_INT(count_notices(RSD_NOTICE_ABOUT_TO_EVICT, RSD_LEVEL_INFO), 1); /* ours */
    CHECK_EQ_INT(count_notices(RSD_NOTICE_RESTORED, RSD_LEVEL_WARNING), 1);    /* restored (R72) */
    CHECK_EQ_INT(count_notices(RSD_NOTICE_LOAD_FAILED, RSD_LEVEL_ERROR), 1);
    CHECK_EQ_INT(count_notices(RSD_NOTICE_SWAP, RSD_LEVEL_NONE), 0);
    CHECK_EQ_INT(count_notices(RSD_NOTICE_DEGRADED, RSD_LEVEL_NONE), 0);
    CHECK(NOTICES[N_NOTICES - 1].notice.detail & RSD_DETAIL_RESTORED);
    CHECK_EQ_STR(rsd_notice_kind_str(RSD_NOTICE_RESTORED), "restored");
    CHECK_EQ_STR(rsd_notice_kind_str(RSD_NOTICE_LOAD_FAILED), "load-failed");
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_LOAD_FAILED);
    CHECK(RES->n_evicted == 1 && RES->evicted[0].restored);
    CHECK_EQ_INT(RES->n_attr_remove, 0); /* restored: still ours */
    CHECK_EQ_STR(ATTR_ADD(R), "");
    CHECK(!RES->cached);
}

static void test_6_3_4_restores_evicted_when_load_404s(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    setup_catalog(&f);
    f.load_status = 404; /* TOCTOU: gone after the listing */
    snprintf(f.load_only, sizeof f.load_only, "wanted");
    f.load_body = "{\"error\":{\"message\":\"File Not Found\",\"type\":\"not_found_error\",\"code\":404}}";
    desc_init(&d, "wanted");
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_LOAD_REJECTED);
    CHECK_EQ_INT(fm_state("resident"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(fm_state("wanted"), RSD_MODEL_UNLOADED);
    CHECK_EQ_STR(posts_of(&f), "/models/unload resident | /models/load wanted | /models/load resident");
    /* the server's own words are quoted after the status (rsd_server_error_parse) */
    CHECK_EQ_STR(RES->message, "llama.cpp router rejected http://mini:8080/models/load: HTTP 404: File Not Found");
    CHECK(any_notice_has("failed: llama.cpp router rejected http://mini:8080/models/load: HTTP 404: File Not Found"));
    CHECK(any_notice_has("failed (llama.cpp router rejected http://mini:8080/models/load: HTTP 404: File Not Found); "
                         "restored 'resident'"));
}

/* A rejection without a JSON error body keeps the bare status; a 500 spawn failure
   and a failed unload quote theirs. */
static void test_rejected_load_quotes_server_error(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 2);
    fm_add(&f, "wanted", RSD_MODEL_UNLOADED);
    f.load_status = 500;
    f.load_body = "{\"error\":{\"code\":500,\"message\":\"failed to spawn server instance\",\"type\":\"server_error\"}}";
    desc_init(&d, "wanted");
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_LOAD_REJECTED);
    CHECK_EQ_STR(RES->message,
                 "llama.cpp router rejected http://mini:8080/models/load: HTTP 500: failed to spawn server instance");
    f.load_body = "Internal Server Error"; /* plain text: not JSON */
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_LOAD_REJECTED);
    CHECK_EQ_STR(RES->message, "llama.cpp router rejected http://mini:8080/models/load: HTTP 500");
    /* unload failure notice */
    fresh();
    fr_init(&f, 1);
    fm_add(&f, "old", RSD_MODEL_LOADED);
    fm_add(&f, "wanted", RSD_MODEL_UNLOADED);
    f.unload_status = 500;
    desc_init(&d, "wanted");
    drive(&f, &d);
    CHECK(any_notice_has("unloading 'old' from 'mini' failed (POST http://mini:8080/models/unload: HTTP 500: boom)"));
}

/* rsd_reconcile_event: a /models/sse event for the waited model (by any of its names)
   ends the WAIT at once; progress, other models (an id with a \u0000 in it among them) and
   junk do not. */
static void test_sse_event_wakes_only_for_the_waited_model(void) {
    frouter f;
    rsd_reconcile_desc d;
    rsd_step s;
    int guard, tr, st;
    const char *body;
    size_t len;
    static const char *const ignored[] = {
        "{\"model\":\"other\",\"event\":\"status_change\",\"data\":{\"status\":\"loaded\"}}",
        "{\"model\":\"coder\",\"event\":\"status_change\",\"data\":{\"status\":\"loading\",\"progress\":{\"value\":0.5}}}",
        "{\"model\":\"coder\",\"event\":\"status_change\",\"data\":{\"status\":\"downloading\"}}",
        "{\"model\":\"coder\\u0000x\",\"event\":\"status_change\",\"data\":{\"status\":\"loaded\"}}", /* not coder */
        "{\"model\":42}", "[]", "{\"model\":\"coder\"", ""};
    size_t k;
    const char *stage;
    fresh();
    fr_init(&f, 2);
    fm_alias(fm_add(&f, "coder", RSD_MODEL_UNLOADED), "c-alias");
    f.load_delay = 10000;
    desc_init(&d, "c-alias"); /* requested by its alias; events name the canonical id */
    REQUIRE(rsd_reconcile_begin(R, &d, NOW) == RSD_OK);
    for (guard = 0; guard < 100; guard++) {
        s = rsd_reconcile_next(R, NOW);
        if (s.kind != RSD_STEP_HTTP) break;
        fr_http(&f, &s.http, NOW, &tr, &st, &body, &len);
        NOW += 1;
        CHECK_EQ_INT(rsd_reconcile_feed(R, tr, st, body, len, NOW), RSD_OK);
    }
    REQUIRE(s.kind == RSD_STEP_WAIT);
    CHECK_EQ_STR(s.wait_model, "c-alias");
    for (k = 0; k < sizeof ignored / sizeof ignored[0]; k++)
        CHECK_EQ_INT(rsd_reconcile_event(R, ignored[k], strlen(ignored[k]), NOW), 0);
    CHECK(rsd_reconcile_next(R, NOW).kind == RSD_STEP_WAIT);
    CHECK(rsd_reconcile_progress(R, &stage) == 0.5);
    CHECK_EQ_STR(stage, ""); /* a value without a stage */
    { /* progress of either shape: kept, never a wake; another model's is not ours */
        static const struct { const char *ev, *stage; double v; } pr[] = {
            {"{\"model\":\"coder\",\"event\":\"status_change\",\"data\":{\"status\":\"loading\",\"progress\":"
             "{\"stage\":\"fit_params\",\"value\":0}}}", "fit_params", 0.0},
            {"{\"model\":\"coder\",\"event\":\"status_change\",\"data\":{\"status\":\"loading\",\"progress\":"
             "{\"stage\":\"text_model\",\"value\":0.25}}}", "text_model", 0.25},
            {"{\"model\":\"other\",\"event\":\"status_change\",\"data\":{\"status\":\"loading\",\"progress\":"
             "{\"stage\":\"mmproj_model\",\"value\":0.75}}}", "text_model", 0.25},
            {"{\"model\":\"coder\",\"event\":\"status_change\",\"data\":{\"status\":\"loading\",\"progress\":"
             "{\"stage\":\"mmproj_model\",\"value\":1.0}}}", "mmproj_model", 1.0},
            {"{\"model\":\"coder\",\"event\":\"status_change\",\"data\":{\"status\":\"loading\",\"progress\":"
             "{\"stages\":[\"text_model\"],\"current\":\"text_model\",\"value\":0.0}}}", "text_model", 0.0},
            /* not a plain name, a value out of range: the last good ones stay */
            {"{\"model\":\"coder\",\"event\":\"status_change\",\"data\":{\"status\":\"loading\",\"progress\":"
             "{\"stage\":\"\\u001b[2Jx\",\"value\":7}}}", "text_model", 0.0},
            {"{\"model\":\"coder\",\"event\":\"status_change\",\"data\":{\"status\":\"loading\",\"progress\":"
             "{\"stage\":\"a_stage_name_far_longer_than_thirty_two_bytes\",\"value\":\"x\"}}}", "text_model", 0.0}};
        for (k = 0; k < sizeof pr / sizeof pr[0]; k++) {
            CHECK_EQ_INT(rsd_reconcile_event(R, pr[k].ev, strlen(pr[k].ev), NOW), 0);
            CHECK(rsd_reconcile_progress(R, &stage) == pr[k].v);
            CHECK_EQ_STR(stage, pr[k].stage);
        }
        CHECK(rsd_reconcile_next(R, NOW).kind == RSD_STEP_WAIT);
    }
    {
        const char *ev = "{\"model\":\"coder\",\"event\":\"status_change\",\"data\":"
                         "{\"status\":\"unloaded\",\"exit_code\":1}}";
        CHECK_EQ_INT(rsd_reconcile_event(R, ev, strlen(ev), NOW), 1);
        CHECK_EQ_INT(rsd_reconcile_event(R, ev, strlen(ev), NOW + 5), 1); /* already due: still ends it */
    }
    s = rsd_reconcile_next(R, NOW); /* polls now, not at the old wake time */
    CHECK_EQ_INT(s.kind, RSD_STEP_HTTP);
    CHECK_EQ_INT(s.http.op, RSD_OP_LIST);
}

/* ==== downloading (wire.md 1.4: a status value, not a failure) =============== */

/* The keep is downloading when we look: nothing is evicted for it yet; we wait
   read-only, then decide again on the fresh listing, evict and load. */
static void test_downloading_keep_waits_before_evicting(void) {
    frouter f;
    rsd_reconcile_desc d;
    rsim_model *m;
    fresh();
    fr_init(&f, 1);
    fm_add(&f, "old", RSD_MODEL_LOADED);
    m = fm_add(&f, "big", RSD_MODEL_DOWNLOADING);
    m->due_ms = NOW + 3000;
    f.load_delay = 100;
    desc_init(&d, "big");
    d.lock = true;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(fm_state("big"), RSD_MODEL_LOADED);
    CHECK_EQ_STR(posts_of(&f), "/models/unload old | /models/load big");
    /* the unload came after the download ended (the log: GETs first, then the lock) */
    CHECK(strstr(joined(&f, false), "GET /v1/models | LOCK") != NULL);
    CHECK(f.locks == 1 && f.unlocks == 1);
    CHECK(RES->loaded);
    CHECK_EQ_STR(ATTR_ADD(R), "big");
}

/* The load answers "downloading" (it started between listing and load): keep
   waiting, then load again when the download is done. */
static void download_starts(frouter *f, const char *model) {
    f->before_load = NULL;
    fm_set(model, RSD_MODEL_DOWNLOADING);
    fm_model(model)->due_ms = NOW + 2000;
}
static void test_load_answer_downloading_keeps_waiting_then_loads(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 2);
    fm_add(&f, "big", RSD_MODEL_UNLOADED);
    f.before_load = download_starts;
    desc_init(&d, "big");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_STR(posts_of(&f), "/models/load big | /models/load big");
    CHECK_EQ_INT(count_notices(RSD_NOTICE_LOAD_FAILED, RSD_LEVEL_NONE), 0);
}

/* A child that downloads during its load (downloading -> loading -> loaded): one
   POST, no failure. */
static void test_child_download_during_load_is_waited_for(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 2);
    fm_add(&f, "hf-model", RSD_MODEL_UNLOADED)->child_download_ms = 1500; /* the child reports downloading for 1.5 s */
    f.load_delay = 50;
    desc_init(&d, "hf-model");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(RES->error, RSD_OK);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(f.posts, 1);
    CHECK_EQ_INT(fm_state("hf-model"), RSD_MODEL_LOADED);
}

/* A download longer than the deadline: LOAD_FAILED with a timeout that says so;
   the resident was never evicted for it. */
static void test_downloading_past_deadline_times_out_without_evicting(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 1);
    fm_add(&f, "old", RSD_MODEL_LOADED);
    fm_add(&f, "big", RSD_MODEL_DOWNLOADING)->due_ms = NOW + 600000;
    desc_init(&d, "big");
    d.deadline_ms = 5000;
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_TIMEOUT);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_LOAD_FAILED);
    CHECK_EQ_STR(RES->message, "timed out waiting for 'big' to load (still downloading)");
    CHECK_EQ_INT(f.posts, 0);
    CHECK_EQ_INT(fm_state("old"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(count_notices(RSD_NOTICE_LOAD_FAILED, RSD_LEVEL_ERROR), 1);
    CHECK(!RES->cached);
}

static void test_6_3_5_evicts_and_loads_when_keep_in_catalog(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    setup_catalog(&f);
    desc_init(&d, "wanted");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(fm_state("wanted"), RSD_MODEL_LOADED);
    CHECK(strstr(joined(&f, true), "POST /models/unload resident") != NULL);
}

/* ==== 6.4 sleeping state (#134) =========================================== */
static void test_6_4_1_counts_sleeping_as_resident(void) {
    char ids[64];
    CHECK_EQ_INT(resident_ids("{\"data\":[{\"id\":\"z\",\"status\":{\"value\":\"sleeping\"}}]}", ids, sizeof ids), 1);
    CHECK_EQ_STR(ids, "z");
}

static void test_6_4_2_never_reloads_sleeping_keep(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 2);
    fm_add(&f, "nap", RSD_MODEL_SLEEPING);
    desc_init(&d, "nap");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.posts, 0);
    CHECK_EQ_INT(fm_state("nap"), RSD_MODEL_SLEEPING);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
}

static void test_6_4_3_does_not_evict_sleeping_keep_capacity1(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 1);
    fm_add(&f, "nap", RSD_MODEL_SLEEPING);
    fm_add(&f, "other", RSD_MODEL_UNLOADED);
    desc_init(&d, "nap");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.posts, 0);
}

static void test_6_4_4_frees_slot_when_sleeping_is_not_keep(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 1);
    fm_add(&f, "nap", RSD_MODEL_SLEEPING);
    fm_add(&f, "keep", RSD_MODEL_UNLOADED);
    desc_init(&d, "keep");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(posts_of(&f), "/models/unload nap | /models/load keep");
    CHECK_EQ_INT(fm_state("nap"), RSD_MODEL_UNLOADED);
    CHECK_EQ_INT(fm_state("keep"), RSD_MODEL_LOADED);
}

/* ==== L26-L28: exact request sequences ===================================== */
static void test_L26_keep_resident_capacity_readable(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    setup_scout_coder(&f);
    desc_init(&d, "coder");
    d.lock = true;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(joined(&f, false), "GET /v1/models | GET /props");
    NOW += 59999;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(joined(&f, false), "");
}

static void test_L27_free_slot(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 3);
    fm_add(&f, "a", RSD_MODEL_LOADED);
    fm_add(&f, "coder", RSD_MODEL_UNLOADED);
    desc_init(&d, "coder");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(joined(&f, true), "GET /v1/models | GET /props | POST /models/load coder | GET /v1/models");
    /* with the lock and an unchanged generation: no extra request (W1 proven moot) */
    fm_set("coder", RSD_MODEL_UNLOADED);
    fresh();
    f.gen = 7;
    f.bump_on_commit = true;
    d.lock = true;
    d.has_generation = true;
    d.generation = 7;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(joined(&f, false),
                 "GET /v1/models | GET /props | LOCK | POST /models/load coder | GET /v1/models | COMMIT | UNLOCK");
    CHECK(RES->cached);
    /* cached under the bumped generation: the next ensure makes no request */
    d.generation = f.gen;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(joined(&f, false), "");
    /* with a pinned resident: no extra GET for the pinned pass (upstream made one, W11) */
    fresh();
    fm_set("coder", RSD_MODEL_UNLOADED);
    fm_tag(&S.m[0], "pinned:true");
    d.lock = false;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(joined(&f, false), "GET /v1/models | GET /props | POST /models/load coder | GET /v1/models | COMMIT");
}

static void test_L28_full_router(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    setup_capacity_full(&f);
    desc_init(&d, "new-code");
    protect(&d, "configured-model", RSD_ROLE_WORKER);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(joined(&f, true), "GET /v1/models | GET /props | POST /models/unload old-scratch | "
                                   "GET /v1/models | POST /models/load new-code | GET /v1/models");
    /* upstream L28 + one GET for its pinned pass (W11) + one GET that sees the victim
       listed unloaded before the load (a July router counts a stopping model: wire.md 6.1) */
    CHECK_EQ_INT(RES->requests, 6);
}

/* ==== W fixes ============================================================== */
static void other_process_loads_keep(frouter *f) {
    fm_set("coder", RSD_MODEL_LOADED);
    fm_set("old", RSD_MODEL_UNLOADED);
    f->gen++;
}
static void other_process_loads_x(frouter *f) {
    fm_add(f, "x", RSD_MODEL_LOADED); /* now 'old' and 'x' hold the two slots */
    fm_set("old", RSD_MODEL_UNLOADED);
    fm_set("y", RSD_MODEL_LOADED);
    f->gen++;
}

static void test_W1_redecides_under_lock_when_listing_changed(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 1);
    fm_add(&f, "old", RSD_MODEL_LOADED);
    fm_add(&f, "coder", RSD_MODEL_UNLOADED);
    f.at_lock = other_process_loads_keep;
    desc_init(&d, "coder");
    d.lock = true;
    d.has_generation = true;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    /* the other process loaded the keep meanwhile: nothing to do */
    CHECK_EQ_STR(joined(&f, false), "GET /v1/models | GET /props | LOCK | GET /v1/models | UNLOCK");
    CHECK(RES->redecided);
    CHECK_EQ_INT(RES->decision, RSD_DECISION_ALREADY_RESIDENT);
    CHECK_EQ_INT(f.posts, 0);
    /* a different victim after the change: the fresh plan's victim is unloaded */
    fresh();
    fr_init(&f, 2);
    fm_add(&f, "old", RSD_MODEL_LOADED);
    fm_add(&f, "y", RSD_MODEL_UNLOADED);
    fm_add(&f, "z", RSD_MODEL_LOADED);
    fm_add(&f, "coder", RSD_MODEL_UNLOADED);
    f.at_lock = other_process_loads_x;
    d.has_generation = false; /* no generation known: always re-list */
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(RES->redecided);
    CHECK(strstr(posts_of(&f), "unload old") == NULL);
    CHECK_EQ_INT(RES->n_evicted, 2); /* x, y, z hold 3 slots of 2: two must go */
    CHECK_EQ_INT(fm_state("coder"), RSD_MODEL_LOADED);
}

static void test_W5_one_overall_deadline(void) {
    frouter f;
    rsd_reconcile_desc d;
    uint64_t t0;
    fresh();
    fr_init(&f, 2);
    fm_add(&f, "slow", RSD_MODEL_UNLOADED);
    f.load_delay = 10000000; /* never within the deadline */
    desc_init(&d, "slow");
    d.deadline_ms = 5000;
    t0 = NOW;
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_TIMEOUT);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_LOAD_FAILED);
    CHECK(strstr(RES->message, "timed out waiting for 'slow' to load") != NULL);
    CHECK(NOW - t0 <= 5000 + 2 * f.latency);
    CHECK(RES->elapsed_ms <= 5000 + 2 * f.latency);
    /* a lock granted after the deadline: nothing is mutated */
    fresh();
    fm_set("slow", RSD_MODEL_UNLOADED);
    f.load_delay = 0;
    d.lock = true;
    f.at_lock = NULL;
    f.posts = 0;
    t0 = NOW;
    REQUIRE(rsd_reconcile_begin(R, &d, NOW) == RSD_OK);
    {
        int guard;
        for (guard = 0; guard < 100; guard++) {
            rsd_step s = rsd_reconcile_next(R, NOW);
            int tr, st;
            const char *body;
            size_t len;
            if (s.kind == RSD_STEP_DONE) break;
            if (s.kind == RSD_STEP_HTTP) {
                fr_http(&f, &s.http, NOW, &tr, &st, &body, &len);
                rsd_reconcile_feed(R, tr, st, body, len, NOW);
            } else if (s.kind == RSD_STEP_LOCK) {
                CHECK_EQ_INT(s.deadline_ms, t0 + 5000);
                NOW += 6000;
                rsd_reconcile_lock_done(R, true, 0, NOW);
            }
        }
        CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_DEGRADED);
        CHECK_EQ_INT(RES->error, RSD_ERR_TIMEOUT);
        CHECK_EQ_INT(f.posts, 0);
    }
}

static void test_W7_transient_poll_errors_retried_and_fast_poll(void) {
    frouter f;
    rsd_reconcile_desc d;
    uint64_t ready;
    fresh();
    fr_init(&f, 2);
    fm_add(&f, "m", RSD_MODEL_UNLOADED);
    f.load_delay = 137;
    f.list.poll_fail_left = 2; /* connection refused twice while it loads */
    desc_init(&d, "m");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    ready = fm_model("m")->loaded_at_ms;
    /* DONE within one poll interval of the model becoming ready */
    CHECK(NOW >= ready);
    CHECK(NOW - ready <= 160 + 2 * f.latency);
    /* 5xx during the wait is transient too */
    fresh();
    fm_set("m", RSD_MODEL_UNLOADED);
    f.load_delay = 3000;
    f.list.fail_left = 0;
    f.list.poll_fail_left = 0;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(NOW - fm_model("m")->loaded_at_ms <= RSD_RECONCILE_POLL_MAX_MS + 2 * f.latency);
}

static void test_W7_poll_intervals_double_from_20_to_500(void) {
    frouter f;
    rsd_reconcile_desc d;
    uint64_t last = 0, gaps[16];
    int ng = 0, guard;
    fresh();
    fr_init(&f, 2);
    fm_add(&f, "m", RSD_MODEL_UNLOADED);
    f.load_delay = 2000;
    f.latency = 0;
    desc_init(&d, "m");
    REQUIRE(rsd_reconcile_begin(R, &d, NOW) == RSD_OK);
    for (guard = 0; guard < 200; guard++) {
        rsd_step s = rsd_reconcile_next(R, NOW);
        int tr, st;
        const char *body;
        size_t len;
        if (s.kind == RSD_STEP_DONE) break;
        if (s.kind == RSD_STEP_WAIT) { NOW = s.wake_ms; continue; }
        if (s.kind == RSD_STEP_HTTP) {
            if (s.http.op == RSD_OP_LIST && last && ng < 16) gaps[ng++] = NOW - last;
            if (s.http.op == RSD_OP_LIST || s.http.op == RSD_OP_LOAD) last = NOW;
            fr_http(&f, &s.http, NOW, &tr, &st, &body, &len);
            rsd_reconcile_feed(R, tr, st, body, len, NOW);
        }
    }
    REQUIRE(ng >= 7);
    CHECK_EQ_INT(gaps[0], 20);
    CHECK_EQ_INT(gaps[1], 40);
    CHECK_EQ_INT(gaps[2], 80);
    CHECK_EQ_INT(gaps[3], 160);
    CHECK_EQ_INT(gaps[4], 320);
    CHECK_EQ_INT(gaps[5], 500);
    CHECK_EQ_INT(gaps[6], 500);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
}

static void test_W9_no_cache_after_failed_unload(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 0);
    f.props_status = 500;
    fm_add(&f, "old", RSD_MODEL_LOADED);
    fm_add(&f, "coder", RSD_MODEL_UNLOADED);
    f.unload_status = 500;
    desc_init(&d, "coder");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(RES->unload_failed);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK(!RES->cached);
    CHECK_EQ_INT(count_notices(RSD_NOTICE_DEGRADED, RSD_LEVEL_WARNING), 1);
    NOW += 10;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(!RES->cache_hit && f.gets >= 1); /* probed again: self-heals (R48) */
}

static void test_W19_observe_never_mutates(void) {
    static const char *envs[] = {"observe", " OFF ", "0", "false", "user", "user-managed"};
    frouter f;
    rsd_reconcile_desc d;
    int i, sc;
    for (sc = 0; sc < 3; sc++)
        for (i = 0; i < 6; i++) {
            fresh();
            if (sc == 0) setup_capacity_full(&f);
            else if (sc == 1) { fr_init(&f, 4); fm_add(&f, "new-code", RSD_MODEL_UNLOADED); }
            else { fr_init(&f, 4); fm_add(&f, "new-code", RSD_MODEL_LOADING); }
            desc_init(&d, "new-code");
            d.residency_env = envs[i];
            d.lock = true;
            CHECK_EQ_INT(drive(&f, &d), RSD_OK);
            CHECK_EQ_INT(f.posts, 0);
            CHECK_EQ_INT(f.locks, 0);
            CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_OBSERVED);
            CHECK(!RES->mutated && RES->n_evicted == 0);
        }
}

static void other_client_loads(frouter *f, const char *model) {
    f->before_load = NULL;
    sim_post_model("/models/load", model);
}
static void test_already_running_400_means_resident(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 2);
    fm_add(&f, "m", RSD_MODEL_UNLOADED);
    f.before_load = other_client_loads; /* another client loads it just before our POST lands */
    desc_init(&d, "m");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK(!RES->loaded);
    CHECK_EQ_STR(ATTR_ADD(R), ""); /* not ours: we did not cause the load */
    CHECK_EQ_INT(fm_state("m"), RSD_MODEL_LOADED);
    CHECK(RES->cached);
}

static void test_model_limit_500_relists_and_evicts_one_more(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 2);
    f.props_hide_max = true; /* an older build: capacity unknown (no room known after a refusal) */
    fm_add(&f, "a", RSD_MODEL_LOADED);
    fm_add(&f, "b", RSD_MODEL_LOADED);
    fm_add(&f, "coder", RSD_MODEL_UNLOADED);
    f.load_limit_left = 1;   /* the first load is refused: limit reached */
    desc_init(&d, "coder");
    d.lock = true;
    d.has_generation = true;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    /* one evicted up front; the router still says full and the listing after it shows
       no room known and nothing loading: evict another, load again */
    CHECK_EQ_STR(posts_of(&f), "/models/unload a | /models/load coder | /models/unload b | /models/load coder");
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(RES->n_evicted, 2);
    CHECK_EQ_INT(f.locks, 1);
    CHECK_EQ_INT(f.unlocks, 1);
}

static void test_model_limit_500_nothing_evictable_fails_cleanly(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 0);
    f.props_status = 404;
    fm_tag(fm_add(&f, "p1", RSD_MODEL_LOADED), "pinned:true");
    fm_add(&f, "coder", RSD_MODEL_UNLOADED);
    f.load_limit_left = 5;
    desc_init(&d, "coder");
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_MODEL_LIMIT);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_LOAD_FAILED);
    CHECK(strstr(RES->message, "model limit reached") != NULL);
    CHECK_EQ_INT(fm_state("p1"), RSD_MODEL_LOADED);
    CHECK(!RES->cached);
    CHECK(RES->requests <= 2 + RSD_RECONCILE_LOAD_ATTEMPTS * 2);
}

/* ==== transient load refusals (wire.md 7), on both router generations ===========
   July: injected with the July body (the envelope); later: rsd-sim's --limit-loads and
   --refuse-loads, the build 11037 body and the plain-text proxy error after an eviction. */

/* Concurrent cold loads: "model limit reached" while the listing shows room is the
   router's re-check losing a race (#28774): load again after a backoff, evict nothing. */
static void test_cold_load_limit_retries_with_backoff(void) {
    {
        int gen = g_gen;
        frouter f;
        rsd_reconcile_desc d;
        uint64_t t0;
        fresh();
        fr_init(&f, 2);
        fm_add(&f, "a", RSD_MODEL_LOADED);
        fm_add(&f, "coder", RSD_MODEL_UNLOADED);
        if (gen == RSIM_GEN_JULY) f.load_limit_left = 3;
        else S.o.limit_loads = 3;
        desc_init(&d, "coder");
        t0 = NOW;
        CHECK_EQ_INT(drive(&f, &d), RSD_OK);
        CHECK_EQ_STR(posts_of(&f), "/models/load coder | /models/load coder | /models/load coder | /models/load coder");
        CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
        CHECK_EQ_INT(RES->n_evicted, 0);
        CHECK_EQ_INT(fm_state("a"), RSD_MODEL_LOADED);
        CHECK_EQ_INT(fm_state("coder"), RSD_MODEL_LOADED);
        CHECK_EQ_INT(count_notices(RSD_NOTICE_LOAD_FAILED, RSD_LEVEL_ERROR), 0);
        CHECK_EQ_STR(ATTR_ADD(R), "coder");
        CHECK(NOW - t0 >= 50 + 100 + 200); /* the backoff doubles */
        CHECK_EQ_INT(S.o.limit_loads, 0);
    }
}

/* Refusals that last past the deadline: one failure, a timeout quoting the answer. */
static void test_cold_load_limit_until_deadline_times_out(void) {
    {
        int gen = g_gen;
        frouter f;
        rsd_reconcile_desc d;
        fresh();
        fr_init(&f, 2);
        fm_add(&f, "a", RSD_MODEL_LOADED);
        fm_add(&f, "coder", RSD_MODEL_UNLOADED);
        if (gen == RSIM_GEN_JULY) f.load_limit_left = 1000;
        else S.o.limit_loads = 1000;
        desc_init(&d, "coder");
        d.deadline_ms = 3000;
        CHECK_EQ_INT(drive(&f, &d), RSD_ERR_TIMEOUT);
        CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_LOAD_FAILED);
        CHECK(strstr(RES->message, "the server still refused to load it at the deadline") != NULL);
        CHECK(strstr(RES->message, "model limit reached") != NULL);
        CHECK_EQ_INT(count_notices(RSD_NOTICE_LOAD_FAILED, RSD_LEVEL_ERROR), 1);
        CHECK_EQ_INT(RES->n_evicted, 0);
        CHECK_EQ_INT(fm_state("a"), RSD_MODEL_LOADED);
        CHECK(f.posts >= 5 && f.posts <= 12); /* 50, 100, 200, 400, then every 500 ms */
    }
}

/* Loads sent again after refusals do not use up the load attempts: a download the
   router reports after three refusals is still waited for, and the model loaded. */
static int g_loads_seen;
static void download_on_fourth_load(frouter *f, const char *model) {
    rsim_model *m = fm_model(model);
    (void)f;
    if (++g_loads_seen != 4 || !m) return;
    m->state = RSIM_DOWNLOADING; /* someone's download of it: listed downloading 50 ms, then unloaded */
    m->due_ms = NOW + 50;
}
static void test_refusals_do_not_use_up_load_attempts(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 2);
    fm_add(&f, "coder", RSD_MODEL_UNLOADED);
    if (g_gen == RSIM_GEN_JULY) f.load_limit_left = 3;
    else S.o.limit_loads = 3;
    g_loads_seen = 0;
    f.before_load = download_on_fourth_load;
    desc_init(&d, "coder");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(g_loads_seen, 5); /* 3 refused, 1 "downloading", 1 after the download */
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(fm_state("coder"), RSD_MODEL_LOADED);
}

/* Right after an eviction a router before PR #29217 may answer the load with a plain
   "proxy error: Could not establish connection" (#28698): load again, no restore. */
static void test_proxy_error_after_eviction_retries_without_restore(void) {
    {
        int gen = g_gen;
        frouter f;
        rsd_reconcile_desc d;
        fresh();
        fr_init(&f, 2);
        fm_add(&f, "a", RSD_MODEL_LOADED);
        NOW += 10;
        fm_add(&f, "b", RSD_MODEL_LOADED);
        fm_add(&f, "coder", RSD_MODEL_UNLOADED);
        if (gen == RSIM_GEN_JULY) f.load_refuse_left = 2;
        else S.o.refuse_loads = 2; /* only one comes: one eviction */
        desc_init(&d, "coder");
        CHECK_EQ_INT(drive(&f, &d), RSD_OK);
        CHECK_EQ_STR(posts_of(&f), gen == RSIM_GEN_JULY
                                   ? "/models/unload a | /models/load coder | /models/load coder | /models/load coder"
                                   : "/models/unload a | /models/load coder | /models/load coder");
        CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
        CHECK_EQ_INT(RES->n_evicted, 1);
        CHECK(!RES->evicted[0].restored);
        CHECK_EQ_INT(fm_state("a"), RSD_MODEL_UNLOADED);
        CHECK_EQ_INT(fm_state("b"), RSD_MODEL_LOADED);
        CHECK_EQ_INT(fm_state("coder"), RSD_MODEL_LOADED);
        CHECK_EQ_INT(count_notices(RSD_NOTICE_LOAD_FAILED, RSD_LEVEL_ERROR), 0);
        CHECK_EQ_INT(count_notices(RSD_NOTICE_RESTORED, RSD_LEVEL_INFO), 0);
    }
}

static void test_failed_true_exit_code_ends_wait(void) {
    frouter f;
    rsd_reconcile_desc d;
    uint64_t t0;
    fresh();
    fr_init(&f, 2);
    fm_add(&f, "broken", RSD_MODEL_UNLOADED)->broken = true;
    f.load_delay = 10;
    desc_init(&d, "broken");
    t0 = NOW;
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_LOAD_FAILED);
    CHECK(strstr(RES->message, "llama.cpp router reports 'broken' failed to load (exit code 1)") != NULL);
    CHECK(NOW - t0 < 100); /* ended at once, not at the deadline */
    CHECK_EQ_INT(count_notices(RSD_NOTICE_LOAD_FAILED, RSD_LEVEL_ERROR), 1);
    CHECK_EQ_STR(ATTR_ADD(R), "");
}

static void test_keep_loading_waits_read_only_without_lock(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 2);
    f.load_delay = 300;
    fr_apply(&f);
    fm_add(&f, "m", RSD_MODEL_LOADING); /* ready in 300 ms */
    desc_init(&d, "m");
    d.lock = true;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(f.posts, 0);
    CHECK_EQ_INT(f.locks, 0); /* L25 */
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK(!RES->mutated && ATTR_ADD(R)[0] == '\0');
}

static void test_lock_not_held_warns_and_proceeds(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 2);
    fm_add(&f, "m", RSD_MODEL_UNLOADED);
    f.lock_held = false;
    desc_init(&d, "m");
    d.lock = true;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(count_notices(RSD_NOTICE_DEGRADED, RSD_LEVEL_WARNING), 1);
    CHECK_EQ_INT(f.unlocks, 1);
    CHECK(strstr(joined(&f, false), "LOCK | GET /v1/models | POST") != NULL); /* unlocked: always re-list */
}

static void test_attribution_add_and_remove(void) {
    frouter f;
    rsd_reconcile_desc d;
    const char *own[2] = {"old-alias", "unrelated"};
    fresh();
    fr_init(&f, 1);
    rsim_model *old = fm_add(&f, "old", RSD_MODEL_LOADED);
    fm_alias(old, "old-alias");
    fm_add(&f, "new", RSD_MODEL_UNLOADED);
    desc_init(&d, "new");
    d.ours = own;
    d.n_ours = 2;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(ATTR_ADD(R), "new");
    REQUIRE(RES->n_attr_remove == 1);
    CHECK_EQ_STR(RES->attr_remove[0].model, "old-alias"); /* W10: the alias is the same model */
    CHECK_EQ_INT(f.commits, 1);
    REQUIRE(N_NOTICES >= 1);
    CHECK_EQ_INT(NOTICES[0].notice.kind, RSD_NOTICE_ABOUT_TO_EVICT); /* ours via the alias */
    CHECK_EQ_STR(NOTICES[0].subject, "old");
}

static void test_hostile_payloads_degrade_to_observe(void) {
    static char deep[4096], huge[300000];
    const char *bodies[8];
    frouter f;
    rsd_reconcile_desc d;
    size_t i, n = 0;
    for (i = 0; i < 2000; i++) deep[i] = '[';
    deep[2000] = '\0';
    n += (size_t)snprintf(huge, sizeof huge, "{\"data\":[");
    for (i = 0; i < 300 && n < sizeof huge - 200; i++)
        n += (size_t)snprintf(huge + n, sizeof huge - n, "%s{\"id\":\"m%u\",\"status\":{\"value\":\"loaded\"}}",
                              i ? "," : "", (unsigned)i);
    snprintf(huge + n, sizeof huge - n, "]}");
    bodies[0] = "not json at all";
    bodies[1] = deep;
    bodies[2] = huge; /* 300 models: over RSD_LISTING_MAX_MODELS => truncated */
    bodies[3] = "{\"data\":{\"id\":\"x\"}}";
    bodies[4] = "{\"data\":[1,2,\"x\",null,{\"id\":[]}]}";
    bodies[5] = "{\"data\":[{\"id\":\"a\",\"status\":{\"value\":5}}]}";
    bodies[6] = "{\"data\":[{\"id\":\"a\",\"status\":\"loaded\"}]} trailing";
    bodies[7] = "";
    for (i = 0; i < 8; i++) {
        fresh();
        setup_capacity_full(&f);
        f.list.body = bodies[i];
        desc_init(&d, "new-code");
        d.lock = true;
        CHECK(drive(&f, &d) < 0);
        CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_DEGRADED);
        CHECK_EQ_INT(RES->decision, RSD_DECISION_OBSERVE);
        CHECK_EQ_INT(f.posts, 0);
        CHECK_EQ_INT(f.locks, 0);
        CHECK_EQ_INT(count_notices(RSD_NOTICE_DEGRADED, RSD_LEVEL_INFO), 1);
        CHECK(!RES->cached);
    }
    /* 65 residents: over RSD_MAX_RESIDENTS: degrade, do not act */
    n = (size_t)snprintf(huge, sizeof huge, "{\"data\":[");
    for (i = 0; i < 65; i++)
        n += (size_t)snprintf(huge + n, sizeof huge - n, "%s{\"id\":\"m%u\",\"status\":\"loaded\"}", i ? "," : "", (unsigned)i);
    snprintf(huge + n, sizeof huge - n, "]}");
    fresh();
    setup_capacity_full(&f);
    f.list.body = huge;
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_RESIDENTS_LIMIT);
    CHECK_EQ_INT(f.posts, 0);
}

static void test_determinism_same_inputs_same_steps(void) {
    static char log1[4096];
    static rsd_reconcile_result r1;
    static rsd_reconcile_notice n1[RSD_RECONCILE_MAX_NOTICES];
    frouter f;
    rsd_reconcile_desc d;
    int k, n = 0;
    for (k = 0; k < 2; k++) {
        fresh();
        setup_catalog(&f);
        f.load_status = 500;
        snprintf(f.load_only, sizeof f.load_only, "wanted");
        f.load_delay = 77;
        desc_init(&d, "wanted");
        d.lock = true;
        drive(&f, &d);
        if (k == 0) {
            snprintf(log1, sizeof log1, "%s", joined(&f, false));
            r1 = *RES;
            memcpy(n1, NOTICES, sizeof n1);
            n = N_NOTICES;
        } else {
            CHECK_EQ_STR(joined(&f, false), log1);
            CHECK(memcmp(&r1, (RES), sizeof r1) == 0);
            CHECK_EQ_INT(N_NOTICES, n);
            CHECK(memcmp(n1, NOTICES, sizeof n1[0] * (size_t)n) == 0);
        }
    }
}

static void test_notices_readable_while_running(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    setup_capacity_full(&f);
    f.load_delay = 400;
    desc_init(&d, "new-code");
    protect(&d, "configured-model", RSD_ROLE_WORKER);
    REQUIRE(rsd_reconcile_begin(R, &d, NOW) == RSD_OK);
    {
        int guard, seen_at_unload = -1;
        for (guard = 0; guard < 200; guard++) {
            rsd_step s = rsd_reconcile_next(R, NOW);
            int tr, st;
            const char *body;
            size_t len;
            if (s.kind == RSD_STEP_DONE) break;
            if (s.kind == RSD_STEP_WAIT) { NOW = s.wake_ms; continue; }
            if (s.kind != RSD_STEP_HTTP) continue;
            if (s.http.op == RSD_OP_UNLOAD) seen_at_unload = N_NOTICES;
            fr_http(&f, &s.http, NOW, &tr, &st, &body, &len);
            rsd_reconcile_feed(R, tr, st, body, len, NOW);
        }
        CHECK(seen_at_unload >= 1); /* the swap notice was there before the unload went out */
        CHECK(strstr(NOTICES[0].text, "swapping resident 'old-scratch'") != NULL);
        CHECK_EQ_STR(NOTICES[0].subject, "old-scratch");
    }
}

/* The framework with another runtime table: a JIT runtime (LM Studio-like
   strategy) over the router wire, to check the capacity-retry path takes the
   fallback list one model at a time (W14). */
static rsd_runtime JIT_RT;
static void test_framework_jit_runtime_uses_fallback_one_at_a_time(void) {
    frouter f;
    rsd_reconcile_desc d;
    JIT_RT = *rsd_runtime_router();
    JIT_RT.name = "jit";
    JIT_RT.strategy = RSD_STRATEGY_JIT;
    JIT_RT.flags = RSD_RT_LOAD | RSD_RT_WAIT;
    JIT_RT.parse_capacity = NULL;
    fresh();
    fr_init(&f, 2);
    fm_add(&f, "cfg", RSD_MODEL_LOADED);
    fm_add(&f, "a", RSD_MODEL_LOADED);
    fm_add(&f, "coder", RSD_MODEL_UNLOADED);
    f.load_limit_left = 1; /* the router is full: a concurrent load won the place (wire.md 6.2) */
    desc_init(&d, "coder");
    d.runtime = &JIT_RT;
    protect(&d, "cfg", RSD_ROLE_CHAT);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_STR(posts_of(&f), "/models/load coder | /models/unload a | /models/load coder");
    CHECK_EQ_STR(joined(&f, true), "GET /v1/models | POST /models/load coder | GET /v1/models | "
                                   "POST /models/unload a | POST /models/load coder | GET /v1/models");
    CHECK_EQ_INT(fm_state("cfg"), RSD_MODEL_LOADED);
    CHECK_EQ_STR(rsd_reconcile_key(R), "jit|http://mini:8080"); /* the root: one key for both spellings */
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
}

static void test_begin_rejects_bad_desc(void) {
    rsd_reconcile_desc d;
    rsd_step s;
    desc_init(&d, "m");
    d.bearer = "bad\r\nX-Evil: 1";
    CHECK_EQ_INT(rsd_reconcile_begin(R, &d, 0), RSD_ERR_ARG);
    s = rsd_reconcile_next(R, 0);
    CHECK_EQ_INT(s.kind, RSD_STEP_DONE);
    CHECK_EQ_INT(s.result, RSD_ERR_ARG);
    desc_init(&d, "");
    CHECK_EQ_INT(rsd_reconcile_begin(R, &d, 0), RSD_ERR_MODEL_ID);
    desc_init(&d, "m");
    d.base_url = "http://x/v1?q=1";
    CHECK_EQ_INT(rsd_reconcile_begin(R, &d, 0), RSD_ERR_URL);
    d.base_url = "/";
    CHECK_EQ_INT(rsd_reconcile_begin(R, &d, 0), RSD_ERR_URL);
    CHECK_EQ_INT(rsd_reconcile_begin(NULL, &d, 0), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_reconcile_feed(R, RSD_OK, 200, "", 0, 0), RSD_ERR_STATE);
    CHECK_EQ_INT(rsd_reconcile_lock_done(R, true, 0, 0), RSD_ERR_STATE);
    /* key and URLs of a base without /v1 */
    desc_init(&d, "m");
    d.base_url = "http://Mini:8080/";
    CHECK_EQ_INT(rsd_reconcile_begin(R, &d, 0), RSD_OK);
    CHECK_EQ_STR(rsd_reconcile_key(R), "llamacpp|http://mini:8080");
    s = rsd_reconcile_next(R, 0);
    CHECK_EQ_STR(s.http.url, "http://Mini:8080/v1/models");
    CHECK_EQ_STR(rsd_outcome_str(RSD_OUTCOME_LOAD_FAILED), "load-failed");
    CHECK_EQ_STR(rsd_step_kind_str(99), "unknown");
}

/* ==== the July router (build 10116): wire.md 6.1-6.3 ======================== */
/* a, pinned, and b (ours) fill --models-max 2; the unload of b answers while b still
   runs and counts, so a load sent at once makes this router unload its own LRU (a). */
static void setup_july(frouter *f) {
    fr_init(f, 2);
    f->stop_ms = 30;
    f->load_delay = 40;
    fm_tag(fm_add(f, "a", RSD_MODEL_LOADED), "pinned:true");
    fm_add(f, "b", RSD_MODEL_LOADED);
    fm_add(f, "c", RSD_MODEL_UNLOADED);
}

static void test_july_swap_waits_until_the_victim_is_unloaded(void) {
    frouter f;
    rsd_reconcile_desc d;
    static const char *ours[] = {"b"};
    fresh();
    setup_july(&f);
    desc_init(&d, "c");
    d.ours = ours;
    d.n_ours = 1;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(fm_unloads("a"), 0); /* never unloaded, not even for a moment */
    CHECK_EQ_INT(fm_state("a"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(fm_state("c"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    REQUIRE(RES->n_evicted == 1);
    CHECK_EQ_STR(RES->evicted[0].id, "b");
    CHECK(!RES->evicted[0].displaced);
    CHECK_EQ_STR(posts_of(&f), "/models/unload b | /models/load c");
    CHECK_EQ_INT(fm_unloads("b"), 1);
    CHECK(strstr(joined(&f, true), "POST /models/unload b | GET /v1/models | GET /v1/models") != NULL);
    CHECK_EQ_INT(count_notices(RSD_NOTICE_RESTORED, RSD_LEVEL_NONE), 0);
}

/* The stop outlives the deadline: the load is never sent; b is restored. */
static void test_july_victim_that_never_stops_times_out_before_the_load(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    setup_july(&f);
    f.stop_ms = 1000000;
    desc_init(&d, "c");
    d.deadline_ms = 2000;
    d.restore_ms = 100;
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_TIMEOUT);
    CHECK_EQ_INT(fm_unloads("a"), 0);
    CHECK(strstr(posts_of(&f), "/models/load c") == NULL);
    CHECK(strstr(RES->message, "timed out waiting for 'b' to unload") != NULL);
}

/* A failed load on a router that displaced a caller-protected model: it is found in
   the listing after the failure and loaded back with what we evicted. */
static void test_failed_load_restores_displaced_protected_model(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 2);
    fm_add(&f, "p", RSD_MODEL_LOADED);
    fm_add(&f, "v", RSD_MODEL_LOADED);
    fm_add(&f, "broken", RSD_MODEL_UNLOADED)->broken = true;
    f.load_delay = 10;
    snprintf(f.displace, sizeof f.displace, "p");
    desc_init(&d, "broken");
    protect(&d, "p", RSD_ROLE_CHAT);
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_LOAD_FAILED);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_LOAD_FAILED);
    REQUIRE(RES->n_evicted == 2);
    CHECK_EQ_STR(RES->evicted[0].id, "v");
    CHECK(!RES->evicted[0].displaced && RES->evicted[0].restored);
    CHECK_EQ_STR(RES->evicted[1].id, "p");
    CHECK(RES->evicted[1].displaced && RES->evicted[1].restored);
    CHECK_EQ_INT(fm_state("p"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(fm_state("v"), RSD_MODEL_LOADED);
    CHECK(any_notice_has("restored 'v' so the target keeps serving"));
    CHECK(any_notice_has("displaced protected 'p'; reloaded it"));
}

/* The same with a load rejected outright: no poll saw the server after the POST, so
   one GET of the listing looks for displaced protected models. */
static void test_rejected_load_lists_once_for_displaced_protected(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 2);
    fm_tag(fm_add(&f, "p", RSD_MODEL_LOADED), "pinned:true");
    fm_add(&f, "v", RSD_MODEL_LOADED);
    fm_add(&f, "k", RSD_MODEL_UNLOADED);
    f.load_status = 400;
    snprintf(f.load_only, sizeof f.load_only, "k");
    desc_init(&d, "k");
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_LOAD_REJECTED);
    CHECK_EQ_STR(joined(&f, true), "GET /v1/models | GET /props | POST /models/unload v | GET /v1/models | "
                                   "POST /models/load k | GET /v1/models | POST /models/load v | GET /v1/models");
    REQUIRE(RES->n_evicted == 1);
    CHECK(RES->evicted[0].restored);
    /* without protected residents, no such GET */
    fresh();
    fr_init(&f, 2);
    fm_add(&f, "v", RSD_MODEL_LOADED);
    fm_add(&f, "w", RSD_MODEL_LOADED);
    fm_add(&f, "k", RSD_MODEL_UNLOADED);
    f.load_status = 400;
    snprintf(f.load_only, sizeof f.load_only, "k");
    desc_init(&d, "k");
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_LOAD_REJECTED);
    CHECK_EQ_STR(joined(&f, true), "GET /v1/models | GET /props | POST /models/unload v | GET /v1/models | "
                                   "POST /models/load k | POST /models/load v | GET /v1/models");
}

/* Every protected tier is checked after a successful load, not only tag pins. */
static void test_displaced_caller_protected_model_reloaded(void) {
    frouter f;
    rsd_reconcile_desc d;
    fresh();
    fr_init(&f, 3);
    fm_add(&f, "p", RSD_MODEL_LOADED);
    fm_add(&f, "v", RSD_MODEL_LOADED);
    fm_add(&f, "w", RSD_MODEL_LOADED);
    fm_add(&f, "k", RSD_MODEL_UNLOADED);
    snprintf(f.displace, sizeof f.displace, "p");
    desc_init(&d, "k");
    protect(&d, "p", RSD_ROLE_WORKER);
    protect(&d, "w", RSD_ROLE_MEMORY);
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(fm_state("p"), RSD_MODEL_LOADED);
    CHECK_EQ_INT(fm_state("k"), RSD_MODEL_LOADED);
    REQUIRE(RES->n_evicted == 2);
    CHECK_EQ_STR(RES->evicted[1].id, "p");
    CHECK(RES->evicted[1].displaced && RES->evicted[1].restored);
    CHECK(any_notice_has("loading 'k' on 'mini' displaced protected 'p'; reloaded it into a free slot."));
}

/* wire.md 6.3: failed:true listed before our load (an earlier failure, or an unload
   that timed out) is not this load failing. A later router queues the load, and its
   listing keeps the old entry until the load starts. */
static void test_stale_failed_flag_is_not_a_failed_load(void) {
    frouter f;
    rsd_reconcile_desc d;
    rsim_model *k;
    fresh();
    fr_init(&f, 2);
    fm_add(&f, "a", RSD_MODEL_LOADED);
    k = fm_add(&f, "k", RSD_MODEL_UNLOADED);
    k->failed = true;
    k->exit_code = 1;
    f.queue_ms = 400;
    f.load_delay = 50;
    desc_init(&d, "k");
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(fm_state("k"), RSD_MODEL_LOADED);
    /* a failure that stays as it was listed counts once the grace is over */
    fresh();
    fr_init(&f, 2);
    k = fm_add(&f, "k", RSD_MODEL_UNLOADED);
    k->failed = true;
    k->exit_code = 1;
    f.queue_ms = 1000000;
    desc_init(&d, "k");
    CHECK_EQ_INT(drive(&f, &d), RSD_ERR_LOAD_FAILED);
    CHECK(RES->elapsed_ms >= (uint64_t)RSD_RECONCILE_FAILED_GRACE_MS);
    /* a /models/sse event for the model makes the next failed:true news at once */
    fresh();
    fr_init(&f, 2);
    k = fm_add(&f, "k", RSD_MODEL_UNLOADED);
    k->failed = true;
    k->exit_code = 1;
    k->broken = true;
    f.load_delay = 5;
    desc_init(&d, "k");
    REQUIRE(rsd_reconcile_begin(R, &d, NOW) == RSD_OK);
    {
        int guard;
        for (guard = 0; guard < 200; guard++) {
            rsd_step s = rsd_reconcile_next(R, NOW);
            int tr, st;
            const char *body;
            size_t len;
            if (s.kind == RSD_STEP_DONE) break;
            if (s.kind == RSD_STEP_WAIT) {
                const char *ev = "{\"model\":\"k\",\"event\":\"status_change\",\"data\":{\"status\":\"loading\"}}";
                (void)rsd_reconcile_event(R, ev, strlen(ev), NOW);
                NOW = s.wake_ms;
                continue;
            }
            if (s.kind != RSD_STEP_HTTP) continue; /* COMMIT: done when next() is called again */
            fr_http(&f, &s.http, NOW, &tr, &st, &body, &len);
            NOW += 1;
            rsd_reconcile_feed(R, tr, st, body, len, NOW);
        }
    }
    CHECK_EQ_INT(RES->error, RSD_ERR_LOAD_FAILED);
    CHECK(RES->elapsed_ms < 1000);
}

/* A listing or props probe that times out is sent again with twice the timeout while
   the overall deadline allows (a loaded machine answers late, it is not down). */
static void test_probe_timeout_retried_within_the_deadline(void) {
    frouter f;
    rsd_reconcile_desc d;
    rsd_step s;
    fresh();
    setup_scout_coder(&f);
    desc_init(&d, "coder");
    REQUIRE(rsd_reconcile_begin(R, &d, NOW) == RSD_OK);
    s = rsd_reconcile_next(R, NOW);
    REQUIRE(s.kind == RSD_STEP_HTTP && s.http.op == RSD_OP_LIST);
    CHECK_EQ_INT(s.http.timeout_ms, RSD_RECONCILE_PROBE_TIMEOUT_MS);
    NOW += s.http.timeout_ms;
    CHECK_EQ_INT(rsd_reconcile_feed(R, RSD_ERR_TIMEOUT, 0, NULL, 0, NOW), RSD_OK);
    s = rsd_reconcile_next(R, NOW);
    REQUIRE(s.kind == RSD_STEP_HTTP && s.http.op == RSD_OP_LIST);
    CHECK_EQ_INT(s.http.timeout_ms, 2 * RSD_RECONCILE_PROBE_TIMEOUT_MS);
    {
        int tr, st;
        const char *body;
        size_t len;
        fr_http(&f, &s.http, NOW, &tr, &st, &body, &len);
        CHECK_EQ_INT(rsd_reconcile_feed(R, tr, st, body, len, NOW), RSD_OK);
    }
    s = rsd_reconcile_next(R, NOW);
    REQUIRE(s.kind == RSD_STEP_HTTP && s.http.op == RSD_OP_CAPACITY);
    CHECK_EQ_INT(s.http.timeout_ms, RSD_RECONCILE_PROBE_TIMEOUT_MS); /* answered: back to normal */
    NOW += s.http.timeout_ms;
    CHECK_EQ_INT(rsd_reconcile_feed(R, RSD_ERR_TIMEOUT, 0, NULL, 0, NOW), RSD_OK);
    s = rsd_reconcile_next(R, NOW);
    CHECK(s.kind == RSD_STEP_HTTP && s.http.op == RSD_OP_CAPACITY);
    /* with no time left it degrades as before */
    fresh();
    desc_init(&d, "coder");
    d.deadline_ms = 1000;
    REQUIRE(rsd_reconcile_begin(R, &d, NOW) == RSD_OK);
    s = rsd_reconcile_next(R, NOW);
    CHECK_EQ_INT(s.http.timeout_ms, 1000);
    NOW += 1000;
    CHECK_EQ_INT(rsd_reconcile_feed(R, RSD_ERR_TIMEOUT, 0, NULL, 0, NOW), RSD_OK);
    s = rsd_reconcile_next(R, NOW);
    CHECK_EQ_INT(s.kind, RSD_STEP_DONE);
    CHECK_EQ_INT(RES->outcome, RSD_OUTCOME_DEGRADED);
}

/* The server's preset decides the context; more than it runs with gets a notice. */
static void test_context_above_what_the_model_runs_with_gets_a_notice(void) {
    frouter f;
    rsd_reconcile_desc d;
    int i, hits = 0;
    fresh();
    fr_init(&f, 2);
    fm_add(&f, "k", RSD_MODEL_LOADED)->ctx = 256;
    desc_init(&d, "k");
    d.context_length = 4096;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    for (i = 0; i < N_NOTICES; i++)
        if (NOTICES[i].dmsg == RSD_DMSG_CONTEXT) {
            hits++;
            CHECK_EQ_INT(NOTICES[i].notice.kind, RSD_NOTICE_STRESS);
            CHECK_EQ_INT(NOTICES[i].notice.level, RSD_LEVEL_WARNING);
            CHECK_EQ_STR(NOTICES[i].subject, "k");
        }
    CHECK_EQ_INT(hits, 1);
    CHECK(any_notice_has("runs with a context of 256 tokens, less than the 4096 requested"));
    /* after a load of ours, from the poll that shows it loaded */
    fresh();
    fr_init(&f, 2);
    fm_add(&f, "k", RSD_MODEL_UNLOADED)->ctx = 512;
    desc_init(&d, "k");
    d.context_length = 1024;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(any_notice_has("runs with a context of 512 tokens, less than the 1024 requested"));
    /* enough context, or none asked: no notice */
    fresh();
    d.context_length = 512;
    NOW += 100000;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(!any_notice_has("runs with a context"));
    fresh();
    d.context_length = 0;
    NOW += 100000;
    CHECK_EQ_INT(drive(&f, &d), RSD_OK);
    CHECK(!any_notice_has("runs with a context"));
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    { /* its tables: the defaults, with a listing of 128 (65 residents must reach the residents limit) */
        rsd_reconcile_limits lim;
        memset(&lim, 0, sizeof lim);
        lim.max_models = 2 * RSD_MAX_RESIDENTS;
        if (rc_new(&lim) != RSD_OK) return 1;
    }
    for (g_gen = 0; g_gen < RSIM_GEN_NUM; g_gen++) { /* every test on both router generations */
        RUN(test_july_swap_waits_until_the_victim_is_unloaded);
        RUN(test_july_victim_that_never_stops_times_out_before_the_load);
        RUN(test_failed_load_restores_displaced_protected_model);
        RUN(test_rejected_load_lists_once_for_displaced_protected);
        RUN(test_displaced_caller_protected_model_reloaded);
        RUN(test_stale_failed_flag_is_not_a_failed_load);
        RUN(test_probe_timeout_retried_within_the_deadline);
        RUN(test_context_above_what_the_model_runs_with_gets_a_notice);
        RUN(test_6_2_1_parses_resident_ids);
        RUN(test_6_2_2_parses_router_capacity);
    RUN(test_parses_slots);
        RUN(test_6_2_3_scout_keep_never_evicts_coresident_coder);
        RUN(test_6_2_4_coder_keep_leaves_pinned_scout);
        RUN(test_6_2_5_loads_into_free_slot_without_evicting);
        RUN(test_6_2_5_load_request_shape);
        RUN(test_6_2_6_capacity_full_eviction);
        RUN(test_lru_record_and_listing);
        RUN(test_free_bytes);
        RUN(test_6_2_7_declines_when_every_slot_pinned);
        RUN(test_6_2_8_capacity1_declines_pinned_override);
        RUN(test_6_2_9_capacity1_pinned_override_displaces_unprotected);
        RUN(test_6_2_10_managed_false_observes);
        RUN(test_6_2_11_ttl_dedupes_repeat_ensures);
        RUN(test_6_2_12_displaced_pinned_not_reloaded_when_capacity_unknown);
        RUN(test_rejected_load_quotes_server_error);
        RUN(test_sse_event_wakes_only_for_the_waited_model);
        RUN(test_downloading_keep_waits_before_evicting);
        RUN(test_load_answer_downloading_keeps_waiting_then_loads);
        RUN(test_child_download_during_load_is_waited_for);
        RUN(test_downloading_past_deadline_times_out_without_evicting);
        RUN(test_w11_displaced_pinned_reloaded_into_known_free_slot);
        RUN(test_w11_pinned_reload_never_leaves_keep_displaced);
        RUN(test_6_2_13_does_not_manage_non_router_payloads);
        RUN(test_6_2_14_degrades_fetch_failures_silently);
        RUN(test_6_3_1_never_unloads_for_unserved_keep);
        RUN(test_6_3_2_reports_why_residency_was_skipped);
        RUN(test_6_3_3_restores_evicted_when_load_rejected_500);
        RUN(test_6_3_4_restores_evicted_when_load_404s);
        RUN(test_6_3_5_evicts_and_loads_when_keep_in_catalog);
        RUN(test_6_4_1_counts_sleeping_as_resident);
        RUN(test_6_4_2_never_reloads_sleeping_keep);
        RUN(test_6_4_3_does_not_evict_sleeping_keep_capacity1);
        RUN(test_6_4_4_frees_slot_when_sleeping_is_not_keep);
        RUN(test_L26_keep_resident_capacity_readable);
        RUN(test_L27_free_slot);
        RUN(test_L28_full_router);
        RUN(test_W1_redecides_under_lock_when_listing_changed);
        RUN(test_W5_one_overall_deadline);
        RUN(test_W7_transient_poll_errors_retried_and_fast_poll);
        RUN(test_W7_poll_intervals_double_from_20_to_500);
        RUN(test_W9_no_cache_after_failed_unload);
        RUN(test_W19_observe_never_mutates);
        RUN(test_already_running_400_means_resident);
        RUN(test_model_limit_500_relists_and_evicts_one_more);
        RUN(test_model_limit_500_nothing_evictable_fails_cleanly);
        RUN(test_cold_load_limit_retries_with_backoff);
        RUN(test_cold_load_limit_until_deadline_times_out);
        RUN(test_proxy_error_after_eviction_retries_without_restore);
        RUN(test_refusals_do_not_use_up_load_attempts);
        RUN(test_failed_true_exit_code_ends_wait);
        RUN(test_keep_loading_waits_read_only_without_lock);
        RUN(test_lock_not_held_warns_and_proceeds);
        RUN(test_attribution_add_and_remove);
        RUN(test_hostile_payloads_degrade_to_observe);
        RUN(test_determinism_same_inputs_same_steps);
        RUN(test_notices_readable_while_running);
        RUN(test_framework_jit_runtime_uses_fallback_one_at_a_time);
        RUN(test_begin_rejects_bad_desc);
        if (rsdt_failed) printf("  (failures so far; router generation now %s)\n", g_gen ? "later" : "july");
    }
    return RSD_TEST_END();
}
