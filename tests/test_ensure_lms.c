/* test_ensure_lms.c -- LM Studio through the drive module (rsd_ensurer) and the rsd-ensure
   program, over loopback against build/bin/rsd-sim --runtime lmstudio (spawned with
   --port 0; its first stdout line names the port). Request sequences are read from the
   simulator's own log (GET /_sim/log), never from wall-clock speed; nothing sleeps: the
   tests wait on pipes, sockets (poll inside rsd_ensurer_sync) and waitpid. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include "rsd_test.h"
#include "state_dir.h"
#include "attr_set.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#if !defined(_WIN32)
#include <sys/wait.h>
#include <unistd.h>
#endif

#define SIM_BIN tp_exe("rsd-sim")
#define ENSURE_BIN tp_exe("rsd-ensure")

#define SIM_RUNTIME "lmstudio"
#define LOG_MAX 512
#include "sim_harness.h"
#include "ensure_step.h"

#define LOAD "/api/v1/models/load"
#define UNLOAD "/api/v1/models/unload"

/* The loaded instances of model key on the simulator now (ids into out, contexts). */
static int sim_instances(const sim_proc *s, const char *bearer, const char *key, char out[][64], uint32_t *ctx,
                         int cap) {
    static char body[1 << 18];
    static rsd_lms_catalog cat;
    static rsd_json_tok toks[8192];
    int i, n = 0;
    if (sim_get(s, "/api/v1/models", bearer, body, sizeof body) != 200) return -1;
    if (rsd_lms_parse_models(&cat, body, strlen(body), toks, 8192) < 0) return -1;
    for (i = 0; i < cat.n_instances && n < cap; i++) {
        if (!rsd_str_eq_c(cat.models[cat.instances[i].model].key, key)) continue;
        snprintf(out[n], 64, "%.*s", (int)cat.instances[i].id.len, cat.instances[i].id.ptr);
        if (ctx) ctx[n] = cat.instances[i].context_length;
        n++;
    }
    return n;
}

/* ---- helpers ------------------------------------------------------------------------ */
static rsd_ensurer *new_ensurer(bool with_state, const rsd_protected_model *prot, int n_prot) {
    rsd_ensurer_desc d;
    memset(&d, 0, sizeof d);
    d.state_dir = g_state_dir;
    d.no_state = !with_state;
    d.ignore_env = true;
    d.protected_models = prot;
    d.n_protected = n_prot;
    return rsd_ensurer_create(&d);
}

static int ensure_ex(rsd_ensurer *e, const sim_proc *s, const char *model, rsd_runtime_kind rt, bool observe,
                     uint32_t ctx, const char *bearer, rsd_ensure_result *res) {
    rsd_ensure_req q;
    memset(&q, 0, sizeof q);
    q.url = s->url;
    q.model = model;
    q.runtime = rt;
    q.observe = observe;
    q.context_length = ctx;
    q.bearer = bearer;
    q.timeout_ms = 20000;
    return rsd_ensurer_sync(e, &q, res);
}

static int ensure(rsd_ensurer *e, const sim_proc *s, const char *model, rsd_ensure_result *res) {
    return ensure_ex(e, s, model, RSD_RUNTIME_LMSTUDIO, false, 0, NULL, res);
}

/* The persisted attribution of this simulator's LM Studio key. */
static int state_attrs(const sim_proc *s, rsd_attr_set *set) {
    rsd_state *st = NULL;
    rsd_state_desc sd;
    char key[RSD_TARGET_KEY_MAX], raw[128];
    int n;
    memset(&sd, 0, sizeof sd);
    sd.dir = g_state_dir;
    snprintf(raw, sizeof raw, "lmstudio|%s", s->url);
    if ((st = rsd_state_create(&sd, NULL)) == NULL) return -1;
    if (rsd_target_key_normalise(rsd_str_c(raw), key, sizeof key) <= 0) n = -1;
    else n = rsd_state_attr_load(st, key, set);
    rsd_state_destroy(st);
    return n;
}

/* A port can come back in a later test: forget what an earlier simulator on it owned. */
static void state_forget(const sim_proc *s) {
    rsd_state *st = NULL;
    rsd_state_desc sd;
    rsd_attr_set *set = new_attr_set();
    char key[RSD_TARGET_KEY_MAX], raw[128];
    size_t k;
    memset(&sd, 0, sizeof sd);
    sd.dir = g_state_dir;
    snprintf(raw, sizeof raw, "lmstudio|%s", s->url);
    if (set && (st = rsd_state_create(&sd, NULL)) != NULL && rsd_target_key_normalise(rsd_str_c(raw), key, sizeof key) > 0 &&
        rsd_state_attr_load(st, key, set) > 0)
        for (k = 0; k < set->count; k++) (void)rsd_state_attr_remove_sync(st, key, set->items[k].model, NULL);
    rsd_state_destroy(st);
    free(set);
}

static int sim_start_clean(sim_proc *s, const char *const *args) {
    if (sim_start(s, args) != 0) return -1;
    state_forget(s);
    return 0;
}
#define sim_start sim_start_clean

/* ---- tests ---------------------------------------------------------------------------- */

/* Already loaded (not by us): one GET, RESIDENT, nothing mutated; then the TTL hit answers
   with no request at all and the same wire id. */
static void test_lms_resident_then_ttl_hit(void) {
    static const char *const args[] = {"--model", "id=a,size=4G,loaded=1", "--model", "id=b,size=4G", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *e;
    int n;
    REQUIRE(sim_start(&s, args) == 0);
    e = new_ensurer(true, NULL, 0);
    REQUIRE(e);
    CHECK_EQ_INT(ensure(e, &s, "a", &res), RSD_OK);
    CHECK_EQ_INT(res.runtime, RSD_RUNTIME_LMSTUDIO);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.decision, RSD_DECISION_ALREADY_RESIDENT);
    CHECK(res.keep_resident && !res.mutated && !res.loaded && !res.cache_hit);
    CHECK_EQ_INT(res.lms_tier, RSD_LMS_TIER_V1);
    CHECK_EQ_STR(res.wire_id, "a");
    CHECK_EQ_INT(res.requests, 1);
    n = sim_log(&s);
    CHECK_EQ_INT(n, 1);
    CHECK(!strcmp(g_log[0].method, "GET") && !strcmp(g_log[0].path, "/api/v1/models"));
    /* the TTL hit */
    CHECK_EQ_INT(ensure(e, &s, "a", &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK(res.cache_hit && !res.mutated);
    CHECK_EQ_INT(res.requests, 0);
    CHECK_EQ_STR(res.wire_id, "a");
    CHECK_EQ_INT(sim_log(&s), n);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* Room left: one POST load beside the resident, nothing unloaded, the requested context
   in the load body, the new instance owned and persisted (W16). */
static void test_lms_load_beside(void) {
    static const char *const args[] = {"--vram", "10G", "--load-ms", "30", "--model", "id=a,size=4G,loaded=1",
                                       "--model", "id=b,size=4G", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *e;
    rsd_attr_set *set = new_attr_set();
    char ids[4][64];
    uint32_t ctx[4];
    int n;
    REQUIRE(set && sim_start(&s, args) == 0);
    e = new_ensurer(true, NULL, 0);
    REQUIRE(e);
    CHECK_EQ_INT(ensure_ex(e, &s, "b", RSD_RUNTIME_LMSTUDIO, false, 8192, NULL, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.decision, RSD_DECISION_LOAD);
    CHECK(res.loaded && res.mutated && !res.keep_resident && res.lock_held);
    CHECK_EQ_INT(res.n_evicted, 0);
    CHECK_EQ_STR(res.wire_id, "b");
    n = sim_log(&s);
    CHECK_EQ_INT(res.requests, n);
    CHECK_EQ_INT(log_count(0, n, "POST", LOAD, "b"), 1);
    CHECK_EQ_INT(log_count(0, n, "POST", NULL, NULL), 1);
    CHECK_EQ_INT(sim_instances(&s, NULL, "b", ids, ctx, 4), 1);
    CHECK_EQ_INT(ctx[0], 8192); /* --context reached the load body */
    CHECK_EQ_INT(state_attrs(&s, set), 1);
    CHECK(rsd_attr_set_find(set, "b", "b") >= 0);
    /* the mutation bumped the generation and dropped the key's cache entries; the stored
       answer is a hit under the new generation */
    CHECK_EQ_INT(ensure(e, &s, "b", &res), RSD_OK);
    CHECK(res.cache_hit);
    CHECK_EQ_INT(res.requests, 0);
    free(set);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* 507 insufficient VRAM: relist, unload one owned candidate, load again -- the minimum:
   one instance for 'c'; two, one at a time with a failed load between, for 'd'. The
   foreign instance is never unloaded; a protected one neither. */
static void test_lms_fallback_unloads_minimum(void) {
    static const char *const args[] = {"--vram", "12G", "--load-ms", "20", "--model", "id=x,size=2G,loaded=1",
                                       "--model", "id=a,size=4G", "--model", "id=b,size=4G",
                                       "--model", "id=c,size=4G", "--model", "id=d,size=9G", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *e;
    int base, n, i, first_unload = -1, loads_between = 0, unload_at[4], nu = 0;
    REQUIRE(sim_start(&s, args) == 0);
    e = new_ensurer(true, NULL, 0);
    REQUIRE(e);
    CHECK_EQ_INT(ensure(e, &s, "a", &res), RSD_OK);
    CHECK_EQ_INT(ensure(e, &s, "b", &res), RSD_OK); /* 2 + 4 + 4 = 10 of 12 */
    base = sim_log(&s);
    CHECK_EQ_INT(ensure(e, &s, "c", &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK(res.loaded);
    CHECK_EQ_INT(res.n_evicted, 1);
    CHECK(res.n_evicted == 1 && (!strcmp(res.evicted[0].id, "a") || !strcmp(res.evicted[0].id, "b")));
    CHECK(res.n_notices >= 2); /* load failed, unloaded ours */
    n = sim_log(&s);
    CHECK_EQ_INT(res.requests, n - base);
    CHECK_EQ_INT(log_count(base, n, "POST", UNLOAD, NULL), 1);
    CHECK_EQ_INT(log_count(base, n, "POST", LOAD, "c"), 2);
    CHECK_EQ_INT(log_count(base, n, "POST", UNLOAD, "x"), 0);
    for (i = base; i < n; i++)
        if (!strcmp(g_log[i].path, UNLOAD)) first_unload = i;
    CHECK(first_unload > base);
    CHECK(first_unload > base && !strcmp(g_log[first_unload - 1].method, "GET")); /* re-listed before (W14) */
    /* d (9G) beside x (2G): both remaining owned instances must go, one per failed load */
    base = n;
    CHECK_EQ_INT(ensure(e, &s, "d", &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.n_evicted, 2);
    n = sim_log(&s);
    CHECK_EQ_INT(log_count(base, n, "POST", UNLOAD, NULL), 2);
    CHECK_EQ_INT(log_count(base, n, "POST", UNLOAD, "x"), 0);
    CHECK_EQ_INT(log_count(base, n, "POST", LOAD, "d"), 3);
    for (i = base; i < n; i++)
        if (!strcmp(g_log[i].path, UNLOAD) && nu < 4) unload_at[nu++] = i;
    REQUIRE(nu == 2);
    for (i = unload_at[0]; i < unload_at[1]; i++)
        if (!strcmp(g_log[i].path, LOAD)) loads_between++;
    CHECK_EQ_INT(loads_between, 1); /* one candidate at a time: a load between the unloads */
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* A config-protected owned instance is the last candidate (R25, R27): the unprotected
   owned one goes first, and only it, since that frees enough. */
static void test_lms_protected_last(void) {
    static const char *const args[] = {"--vram", "10G", "--load-ms", "20", "--model", "id=a,size=4G",
                                       "--model", "id=b,size=4G", "--model", "id=c,size=5G", NULL};
    rsd_protected_model prot[1];
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *e;
    int base, n;
    prot[0].model_id = rsd_str_c("a");
    prot[0].role = RSD_ROLE_CHAT;
    REQUIRE(sim_start(&s, args) == 0);
    e = new_ensurer(true, prot, 1);
    REQUIRE(e);
    CHECK_EQ_INT(ensure(e, &s, "a", &res), RSD_OK);
    CHECK_EQ_INT(ensure(e, &s, "b", &res), RSD_OK);
    base = sim_log(&s);
    CHECK_EQ_INT(ensure(e, &s, "c", &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    REQUIRE(res.n_evicted == 1);
    CHECK_EQ_STR(res.evicted[0].id, "b");
    n = sim_log(&s);
    CHECK_EQ_INT(log_count(base, n, "POST", UNLOAD, NULL), 1);
    CHECK_EQ_INT(log_count(base, n, "POST", UNLOAD, "a"), 0);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* Every retry fails: the unloaded instance is loaded again (restored), LOAD_FAILED, and it
   stays ours in the state directory. */
static void test_lms_restore_after_failed_retry(void) {
    static const char *const args[] = {"--vram", "8G", "--load-ms", "20", "--model", "id=a,size=4G",
                                       "--model", "id=c,size=4G,fail=1", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *e;
    rsd_attr_set *set = new_attr_set();
    int base, n;
    REQUIRE(set && sim_start(&s, args) == 0);
    e = new_ensurer(true, NULL, 0);
    REQUIRE(e);
    CHECK_EQ_INT(ensure(e, &s, "a", &res), RSD_OK);
    base = sim_log(&s);
    CHECK_EQ_INT(ensure(e, &s, "c", &res), RSD_ERR_LOAD_REJECTED);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_LOAD_FAILED);
    REQUIRE(res.n_evicted == 1);
    CHECK_EQ_STR(res.evicted[0].id, "a");
    CHECK(res.evicted[0].restored);
    CHECK(res.message[0] != '\0');
    n = sim_log(&s);
    CHECK_EQ_INT(log_count(base, n, "POST", UNLOAD, "a"), 1);
    CHECK_EQ_INT(log_count(base, n, "POST", LOAD, "c"), 2);
    CHECK_EQ_INT(log_count(base, n, "POST", LOAD, "a"), 1); /* the restore */
    CHECK(!strcmp(g_log[n - 1].path, LOAD) && !strcmp(g_log[n - 1].model, "a"));
    CHECK_EQ_INT(state_attrs(&s, set), 1);
    CHECK(set->count == 1 && !strcmp(set->items[0].model, "a") && set->items[0].instance[0]);
    /* a failed load is never cached: the next ensure asks the server again */
    CHECK(ensure(e, &s, "c", &res) < 0);
    CHECK(!res.cache_hit && res.requests > 0);
    free(set);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* Observe never mutates (W19): forced observe, and RESIDENCY given in the desc; a load is
   needed and a candidate is ours, yet no POST is sent. */
static void test_lms_observe_never_mutates(void) {
    static const char *const args[] = {"--vram", "8G", "--load-ms", "20", "--model", "id=a,size=4G",
                                       "--model", "id=c,size=6G", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *e, *env_e;
    rsd_ensurer_desc d;
    int base, n;
    REQUIRE(sim_start(&s, args) == 0);
    e = new_ensurer(true, NULL, 0);
    memset(&d, 0, sizeof d);
    d.no_state = true;
    d.residency_env = "observe";
    env_e = rsd_ensurer_create(&d);
    REQUIRE(e && env_e);
    CHECK_EQ_INT(ensure(e, &s, "a", &res), RSD_OK);
    base = sim_log(&s);
    CHECK_EQ_INT(ensure_ex(e, &s, "c", RSD_RUNTIME_LMSTUDIO, true, 0, NULL, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_OBSERVED);
    CHECK_EQ_INT(res.decision, RSD_DECISION_OBSERVE);
    CHECK(!res.mutated && !res.loaded && res.n_evicted == 0 && !res.keep_resident);
    CHECK_EQ_INT(ensure_ex(env_e, &s, "c", RSD_RUNTIME_AUTO, false, 0, NULL, &res), RSD_OK);
    CHECK_EQ_INT(res.runtime, RSD_RUNTIME_LMSTUDIO);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_OBSERVED);
    CHECK_EQ_INT(res.reason, RSD_REASON_OBSERVE_ENV);
    n = sim_log(&s);
    CHECK(n > base);
    CHECK_EQ_INT(log_count(base, n, "POST", NULL, NULL), 0);
    rsd_ensurer_destroy(e);
    rsd_ensurer_destroy(env_e);
    sim_stop(&s);
}

/* A server with an API key: no bearer -> DEGRADED RSD_ERR_AUTH (explicit runtime and auto);
   with the key -> loaded; the key is on every request. */
static void test_lms_auth(void) {
    static const char *const args[] = {"--api-key", "sekret", "--load-ms", "20", "--model", "id=a,size=4G", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *e;
    int n;
    REQUIRE(sim_start(&s, args) == 0);
    e = new_ensurer(false, NULL, 0);
    REQUIRE(e);
    CHECK_EQ_INT(ensure(e, &s, "a", &res), RSD_ERR_AUTH);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_DEGRADED);
    CHECK(!res.mutated);
    CHECK_EQ_INT(ensure_ex(e, &s, "a", RSD_RUNTIME_AUTO, false, 0, NULL, &res), RSD_ERR_AUTH);
    CHECK_EQ_INT(ensure_ex(e, &s, "a", RSD_RUNTIME_LMSTUDIO, false, 0, "wrong", &res), RSD_ERR_AUTH);
    CHECK_EQ_INT(ensure_ex(e, &s, "a", RSD_RUNTIME_LMSTUDIO, false, 0, "sekret", &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK(res.loaded);
    n = sim_log(&s);
    CHECK_EQ_INT(log_count(0, n, "POST", LOAD, "a"), 1);
    {
        int i, last_401 = -1, load_at = -1;
        for (i = 0; i < n; i++) {
            if (g_log[i].status == 401) last_401 = i;
            if (!strcmp(g_log[i].path, LOAD)) load_at = i;
        }
        /* the keyed ensure: every one of its requests passed (listing, load) */
        CHECK(load_at > last_401 && last_401 >= 0);
        CHECK(g_log[load_at].status == 200 && g_log[last_401 + 1].status == 200);
    }
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* LM Studio 0.3 (REST v0 only): a loaded model is RESIDENT; an unloaded one is OBSERVED
   (no load API), nothing mutated; auto-detection recognises it too. */
static void test_lms_tier_03(void) {
    static const char *const args[] = {"--tier", "0.3", "--model", "id=a,size=4G,loaded=1", "--model", "id=b,size=4G", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *e;
    int n;
    REQUIRE(sim_start(&s, args) == 0);
    e = new_ensurer(false, NULL, 0);
    REQUIRE(e);
    CHECK_EQ_INT(ensure(e, &s, "a", &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.lms_tier, RSD_LMS_TIER_V0);
    CHECK_EQ_STR(res.wire_id, "a");
    CHECK_EQ_INT(res.requests, 2); /* v1 (200 + error body), v0 */
    CHECK_EQ_INT(ensure(e, &s, "b", &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_OBSERVED);
    CHECK(!res.keep_resident && !res.mutated);
    CHECK_EQ_INT(ensure_ex(e, &s, "b", RSD_RUNTIME_AUTO, false, 0, NULL, &res), RSD_OK);
    CHECK_EQ_INT(res.runtime, RSD_RUNTIME_LMSTUDIO);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_OBSERVED);
    n = sim_log(&s);
    CHECK_EQ_INT(log_count(0, n, "POST", NULL, NULL), 0);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* Auto-detection: /props and /api/version do not match, /api/v1/models does, and its
   answer is the machine's first listing (no second GET); the next ensure probes nothing. */
static void test_lms_auto_detect(void) {
    static const char *const args[] = {"--load-ms", "20", "--model", "id=a,size=4G,loaded=1", "--model", "id=b,size=4G", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer_desc d;
    rsd_ensurer *e;
    int n, base;
    REQUIRE(sim_start(&s, args) == 0);
    memset(&d, 0, sizeof d);
    d.no_state = true;
    d.no_cache = true;
    d.ignore_env = true;
    e = rsd_ensurer_create(&d);
    REQUIRE(e);
    CHECK_EQ_INT(ensure_ex(e, &s, "a", RSD_RUNTIME_AUTO, false, 0, NULL, &res), RSD_OK);
    CHECK_EQ_INT(res.runtime, RSD_RUNTIME_LMSTUDIO);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    n = sim_log(&s);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(res.requests, n);
    CHECK(!strcmp(g_log[0].path, "/props") && !strcmp(g_log[1].path, "/api/version"));
    CHECK(!strcmp(g_log[2].path, "/api/v1/models"));
    base = n;
    CHECK_EQ_INT(ensure_ex(e, &s, "b", RSD_RUNTIME_AUTO, false, 0, NULL, &res), RSD_OK);
    CHECK_EQ_INT(res.runtime, RSD_RUNTIME_LMSTUDIO);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK(res.loaded);
    n = sim_log(&s);
    CHECK_EQ_INT(res.requests, n - base);
    CHECK(!strcmp(g_log[base].path, "/api/v1/models")); /* no probe */
    CHECK_EQ_INT(log_count(base, n, "POST", LOAD, "b"), 1);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* Ownership survives the ensurer (W16): one loads 'a' and goes away; a new ensurer on the
   same state directory unloads it to make room, never the foreign 'x'. Without a state
   directory an ensurer remembers only its own loads (in memory). */
static void test_lms_ownership_persists(void) {
    static const char *const args[] = {"--vram", "8G", "--load-ms", "20", "--model", "id=x,size=4G,loaded=1",
                                       "--model", "id=a,size=4G", "--model", "id=c,size=4G", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *e;
    rsd_attr_set *set = new_attr_set();
    int base, n;
    REQUIRE(set && sim_start(&s, args) == 0);
    e = new_ensurer(true, NULL, 0);
    REQUIRE(e);
    CHECK_EQ_INT(ensure(e, &s, "a", &res), RSD_OK);
    CHECK(res.loaded);
    rsd_ensurer_destroy(e);
    e = new_ensurer(true, NULL, 0);
    REQUIRE(e);
    base = sim_log(&s);
    CHECK_EQ_INT(ensure(e, &s, "c", &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    REQUIRE(res.n_evicted == 1);
    CHECK_EQ_STR(res.evicted[0].id, "a");
    n = sim_log(&s);
    CHECK_EQ_INT(log_count(base, n, "POST", UNLOAD, "a"), 1);
    CHECK_EQ_INT(log_count(base, n, "POST", UNLOAD, "x"), 0);
    CHECK_EQ_INT(state_attrs(&s, set), 1);
    CHECK(rsd_attr_set_find(set, "c", NULL) >= 0 && rsd_attr_set_find(set, "a", NULL) < 0);
    rsd_ensurer_destroy(e);
    /* no state directory: a fresh ensurer owns nothing, so 'c' (ours, persisted elsewhere)
       and 'x' are both foreign to it: the load fails, nothing unloaded */
    e = new_ensurer(false, NULL, 0);
    REQUIRE(e);
    base = sim_log(&s);
    CHECK(ensure(e, &s, "a", &res) < 0);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_LOAD_FAILED);
    n = sim_log(&s);
    CHECK_EQ_INT(log_count(base, n, "POST", UNLOAD, NULL), 0);
    rsd_ensurer_destroy(e);
    free(set);
    sim_stop(&s);
}

/* An ensurer without state records on an 8G server: it loads a and b, then c evicts one of
   its own (it remembered them). */
static void remembers_own_loads(rsd_ensurer *e, sim_proc *s) {
    rsd_ensure_result res;
    int base, n;
    CHECK(!rsd_ensurer_has_state(e));
    CHECK_EQ_INT(ensure(e, s, "a", &res), RSD_OK);
    CHECK_EQ_INT(ensure(e, s, "b", &res), RSD_OK);
    base = sim_log(s);
    CHECK_EQ_INT(ensure(e, s, "c", &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(res.n_evicted, 1);
    n = sim_log(s);
    CHECK_EQ_INT(log_count(base, n, "POST", UNLOAD, NULL), 1);
}

static const char *const g_three_of_4g[] = {"--vram", "8G", "--load-ms", "20", "--model", "id=a,size=4G",
                                            "--model", "id=b,size=4G", "--model", "id=c,size=4G", NULL};

/* Without a state directory the ensurer remembers its own loads for its lifetime. */
static void test_lms_memory_ownership_without_state(void) {
    sim_proc s;
    rsd_ensurer *e;
    REQUIRE(sim_start(&s, g_three_of_4g) == 0);
    e = new_ensurer(false, NULL, 0);
    REQUIRE(e);
    remembers_own_loads(e, &s);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* A state directory that cannot be opened: the ensurer fails open and remembers its own
   loads in memory, as without one (those records are allocated at create then). */
static void test_lms_memory_ownership_state_unopenable(void) {
    sim_proc s;
    rsd_ensurer_desc d;
    rsd_ensurer *e;
    char dir[400];
    FILE *f;
    snprintf(dir, sizeof dir, "%s/a-file", g_state_dir);
    REQUIRE((f = fopen(dir, "w")) != NULL);
    fclose(f);
    snprintf(dir, sizeof dir, "%s/a-file/state", g_state_dir); /* under a regular file: never a directory */
    memset(&d, 0, sizeof d);
    d.state_dir = dir;
    d.ignore_env = true;
    e = rsd_ensurer_create(&d);
    REQUIRE(e);
    if (sim_start(&s, g_three_of_4g) != 0) {
        rsd_ensurer_destroy(e);
        REQUIRE(!"rsd-sim started");
    }
    remembers_own_loads(e, &s);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* The lock (same key for ".../v1" and the bare URL): held elsewhere past the deadline ->
   DEGRADED RSD_ERR_TIMEOUT, nothing mutated; released -> loaded under the lock. */
static void test_lms_lock_held_elsewhere(void) {
    static const char *const args[] = {"--load-ms", "20", "--model", "id=a,size=4G", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *e;
    rsd_state *st = NULL;
    rsd_state_desc sd;
    rsd_state_lock lk;
    rsd_ensure_req q;
    char key[RSD_TARGET_KEY_MAX], raw[128], url[96];
    int base, n;
    REQUIRE(sim_start(&s, args) == 0);
    memset(&sd, 0, sizeof sd);
    sd.dir = g_state_dir;
    memset(&lk, 0, sizeof lk);
    REQUIRE((st = rsd_state_create(&sd, NULL)) != NULL);
    snprintf(raw, sizeof raw, "lmstudio|%s", s.url);
    REQUIRE(rsd_target_key_normalise(rsd_str_c(raw), key, sizeof key) > 0);
    REQUIRE(rsd_state_lock_try(st, &lk, key, "test") == RSD_OK);
    e = new_ensurer(true, NULL, 0);
    REQUIRE(e);
    base = sim_log(&s);
    snprintf(url, sizeof url, "%s/v1/", s.url);
    memset(&q, 0, sizeof q);
    q.url = url;
    q.model = "a";
    q.runtime = RSD_RUNTIME_LMSTUDIO;
    q.timeout_ms = 300;
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_ERR_TIMEOUT);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_DEGRADED);
    CHECK(!res.mutated && !res.lock_held);
    n = sim_log(&s);
    CHECK_EQ_INT(log_count(base, n, "POST", NULL, NULL), 0);
    rsd_state_unlock(st, &lk);
    q.timeout_ms = 20000;
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK(res.lock_held && res.loaded);
    rsd_state_destroy(st);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

#if !defined(_WIN32) /* fork() */
/* 4 processes ensure 4 models at once on one LM Studio (room for two beside a foreign
   instance), sharing the state directory: the lock serialises them, the foreign instance
   is never unloaded, every result is coherent, and afterwards the persisted ownership
   names exactly the owned instances the server still has. */
static void test_lms_multi_process(void) {
    static const char *const args[] = {"--vram", "12G", "--load-ms", "40", "--model", "id=x,size=4G,loaded=1",
                                       "--model", "id=m0,size=4G", "--model", "id=m1,size=4G",
                                       "--model", "id=m2,size=4G", "--model", "id=m3,size=4G", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_attr_set *set = new_attr_set();
    pid_t kids[4];
    int pipes[4][2], i, n, resident = 0;
    char names[4][8], ids[4][64];
    REQUIRE(set && sim_start(&s, args) == 0);
    fflush(stdout);
    for (i = 0; i < 4; i++) {
        snprintf(names[i], sizeof names[i], "m%d", i);
        REQUIRE(pipe(pipes[i]) == 0);
        kids[i] = fork();
        REQUIRE(kids[i] >= 0);
        if (kids[i] == 0) {
            rsd_ensurer *e = new_ensurer(true, NULL, 0);
            int msg[2] = {-1, -1};
            close(pipes[i][0]);
            if (e) {
                msg[1] = ensure(e, &s, names[i], &res);
                msg[0] = (int)res.outcome;
                rsd_ensurer_destroy(e);
            }
            if (write(pipes[i][1], msg, sizeof msg) != (ssize_t)sizeof msg) _exit(3);
            _exit(0);
        }
        close(pipes[i][1]);
    }
    for (i = 0; i < 4; i++) {
        int msg[2] = {-1, -1}, st = 0;
        ssize_t got = read(pipes[i][0], msg, sizeof msg); /* blocks until the child answers */
        close(pipes[i][0]);
        while (waitpid(kids[i], &st, 0) < 0 && errno == EINTR) {}
        CHECK(got == (ssize_t)sizeof msg && WIFEXITED(st) && WEXITSTATUS(st) == 0);
        CHECK(msg[0] == RSD_OUTCOME_RESIDENT || msg[0] == RSD_OUTCOME_LOAD_FAILED);
        if (msg[0] == RSD_OUTCOME_RESIDENT) {
            CHECK_EQ_INT(msg[1], RSD_OK);
            resident++;
        } else {
            CHECK(msg[1] < 0);
        }
    }
    CHECK(resident >= 1);
    n = sim_log(&s);
    CHECK_EQ_INT(log_count(0, n, "POST", UNLOAD, "x"), 0);
    CHECK_EQ_INT(sim_instances(&s, NULL, "x", ids, NULL, 4), 1);
    /* persisted ownership == the owned instances still loaded */
    REQUIRE(state_attrs(&s, set) >= 0);
    {
        size_t k;
        int loaded = 0;
        for (i = 0; i < 4; i++) {
            int ni = sim_instances(&s, NULL, names[i], ids, NULL, 4), j;
            for (j = 0; j < ni; j++) {
                CHECK(rsd_attr_set_find(set, names[i], ids[j]) >= 0);
                loaded++;
            }
        }
        for (k = 0; k < set->count; k++) {
            int ni = sim_instances(&s, NULL, set->items[k].model, ids, NULL, 4), j, found = 0;
            for (j = 0; j < ni; j++) found |= !strcmp(ids[j], set->items[k].instance);
            CHECK(found);
        }
        CHECK_EQ_INT((int)set->count, loaded);
        CHECK(loaded >= 1 && loaded <= 2);
    }
    free(set);
    sim_stop(&s);
}
#endif

/* A model the server does not advertise: DECLINED with RSD_ERR_NOT_SERVED, no POST. */
static void test_lms_not_served(void) {
    static const char *const args[] = {"--model", "id=a,size=4G,loaded=1", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *e;
    REQUIRE(sim_start(&s, args) == 0);
    e = new_ensurer(false, NULL, 0);
    REQUIRE(e);
    CHECK_EQ_INT(ensure(e, &s, "nope", &res), RSD_ERR_NOT_SERVED);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_DECLINED);
    CHECK(strstr(res.message, "does not advertise") != NULL);
    CHECK_EQ_INT(log_count(0, sim_log(&s), "POST", NULL, NULL), 0);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* The non-blocking API: notices are readable while it runs, the result fields fill. */
static void test_lms_nonblocking_notices(void) {
    static const char *const args[] = {"--vram", "8G", "--load-ms", "40", "--model", "id=a,size=4G",
                                       "--model", "id=c,size=6G", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *e;
    rsd_ensure_req q;
    const rsd_reconcile_notice *nt;
    int rc, steps = 0, seen_load_op = 0, live_notices = 0;
    REQUIRE(sim_start(&s, args) == 0);
    e = new_ensurer(false, NULL, 0);
    REQUIRE(e);
    CHECK_EQ_INT(ensure(e, &s, "a", &res), RSD_OK);
    memset(&q, 0, sizeof q);
    q.url = s.url;
    q.model = "c";
    q.runtime = RSD_RUNTIME_LMSTUDIO;
    q.timeout_ms = 20000;
    CHECK_EQ_INT(rsd_ensurer_begin(e, &q, rsd_now_ms()), RSD_OK);
    while ((rc = ensure_step_code(e, rsd_now_ms())) == RSD_PENDING && steps++ < 100000) {
        rsd_pollfd fds[8];
        int n = rsd_ensurer_pollfds(e, fds, 8);
        uint64_t dl = rsd_ensurer_next_deadline(e), now = rsd_now_ms();
        int timeout = dl == RSD_NO_DEADLINE ? 100 : dl <= now ? 0 : (int)(dl - now > 100 ? 100 : dl - now);
        rsd_ensurer_query(e, &res);
        if (res.op == RSD_OP_LOAD) seen_load_op = 1;
        if (rsd_ensurer_notices(e, &nt) > 0) live_notices = 1;
        if (timeout) (void)rsd_poll(fds, n > 8 ? 8 : n, timeout);
    }
    CHECK_EQ_INT(rc, RSD_OK);
    rsd_ensurer_query(e, &res);
    CHECK(res.done && res.outcome == RSD_OUTCOME_RESIDENT && res.n_evicted == 1);
    CHECK(seen_load_op && live_notices);
    CHECK(rsd_ensurer_notices(e, &nt) == res.n_notices && nt == res.notices);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
}

/* ---- the rsd-ensure program ----------------------------------------------------------- */
static int run_cli(const char *args, char *out, size_t cap) {
    char cmd[1024];
    FILE *f;
    size_t n = 0;
    int st;
    snprintf(cmd, sizeof cmd, "%s %s 2>" TP_DEVNULL, tp_exe_cmd("rsd-ensure"), args);
    f = popen(cmd, "r");
    if (!f) return -1;
    while (n < cap - 1) {
        size_t r = fread(out + n, 1, cap - 1 - n, f);
        if (r == 0) break;
        n += r;
    }
    out[n] = '\0';
    st = pclose(f);
    return tp_pclose_code(st);
}

static bool json_str_is(const char *body, const char *key, const char *want) {
    rsd_json_doc doc;
    char v[256];
    int i;
    if (rsd_json_parse(&doc, body, strlen(body), g_toks, (uint32_t)(sizeof g_toks / sizeof g_toks[0])) <= 0) return false;
    i = rsd_json_find(&doc, 0, key);
    return i >= 0 && rsd_json_str(&doc, i, v, sizeof v, NULL) == RSD_OK && !strcmp(v, want);
}

static void test_lms_cli(void) {
    static const char *const args[] = {"--api-key", "k1", "--vram", "8G", "--load-ms", "20", "--tier", "0.4",
                                       "--model", "id=a,size=4G", "--model", "id=c,size=6G", NULL};
    sim_proc s;
    char a[512], out[1 << 14], ids[2][64];
    uint32_t ctx[2];
    REQUIRE(tp_runnable(ENSURE_BIN));
    REQUIRE(sim_start(&s, args) == 0);
    snprintf(a, sizeof a, "--url %s/v1 --model a --runtime lmstudio --no-state --token k1 --context 4096 --json", s.url);
    CHECK_EQ_INT(run_cli(a, out, sizeof out), 0);
    CHECK(json_str_is(out, "runtime", "lmstudio"));
    CHECK(json_str_is(out, "outcome", "resident"));
    CHECK(json_str_is(out, "decision", "load"));
    CHECK(json_str_is(out, "wire_id", "a"));
    CHECK(strstr(out, "\"evicted\":[],\"displaced\":[],\"restored\":[]") != NULL);
    CHECK(strstr(out, "k1") == NULL); /* the token is never printed */
    CHECK_EQ_INT(sim_instances(&s, "k1", "a", ids, ctx, 2), 1);
    CHECK_EQ_INT(ctx[0], 4096);
    /* auto-detection through the program, already resident */
    snprintf(a, sizeof a, "--url %s --model a --no-state --token k1 --json", s.url);
    CHECK_EQ_INT(run_cli(a, out, sizeof out), 0);
    CHECK(json_str_is(out, "runtime", "lmstudio"));
    /* observe-only and not resident: 4 */
    snprintf(a, sizeof a, "--url %s --model c --runtime lmstudio --no-state --token k1 --observe --json", s.url);
    CHECK_EQ_INT(run_cli(a, out, sizeof out), 4);
    CHECK(json_str_is(out, "outcome", "observed"));
    /* no token: the server asks for an API key, 7 */
    snprintf(a, sizeof a, "--url %s --model a --runtime lmstudio --no-state --quiet", s.url);
    CHECK_EQ_INT(run_cli(a, out, sizeof out), 7);
    /* c does not fit beside a, and a is not ours (no state): the load fails, 3 */
    snprintf(a, sizeof a, "--url %s --model c --runtime lmstudio --no-state --token k1", s.url);
    CHECK_EQ_INT(run_cli(a, out, sizeof out), 3);
    CHECK(strstr(out, "load-failed") != NULL);
    /* --list shows the loaded instances */
    snprintf(a, sizeof a, "--url %s --runtime lmstudio --token k1 --list", s.url);
    CHECK_EQ_INT(run_cli(a, out, sizeof out), 0);
    CHECK(strncmp(out, "resident: a (loaded)", 20) == 0);
    /* not advertised: declined, 2; usage: 64 */
    snprintf(a, sizeof a, "--url %s --model nope --runtime lmstudio --no-state --token k1 --quiet", s.url);
    CHECK_EQ_INT(run_cli(a, out, sizeof out), 2);
    snprintf(a, sizeof a, "--url %s --model a --runtime lmstudio --context x", s.url);
    CHECK_EQ_INT(run_cli(a, out, sizeof out), 64);
    sim_stop(&s);
}

/* Two ensures at once sharing a state directory, 8G with a foreign 'x' (4G) loaded: the
   first loads 'a' beside it; the second ('c') waited for the lock meanwhile and, under
   it, reads the owned instances again, so it may unload 'a' (residency's now) to make
   room -- with the set read before the wait 'a' looked foreign and nothing could go. */
static void test_lms_owned_read_under_lock(void) {
    static const char *const args[] = {"--vram", "8G", "--load-ms", "60", "--model", "id=x,size=4G,loaded=1",
                                       "--model", "id=a,size=4G", "--model", "id=c,size=4G", NULL};
    sim_proc s;
    rsd_ensurer *e1, *e2;
    rsd_ensure_req q1, q2;
    rsd_ensure_result res;
    int base, n;
    REQUIRE(sim_start(&s, args) == 0);
    e1 = new_ensurer(true, NULL, 0);
    e2 = new_ensurer(true, NULL, 0);
    REQUIRE(e1 && e2);
    memset(&q1, 0, sizeof q1);
    q1.url = s.url;
    q1.runtime = RSD_RUNTIME_LMSTUDIO;
    q1.timeout_ms = 60000;
    q2 = q1;
    q1.model = "a";
    q2.model = "c";
    base = sim_log(&s);
    REQUIRE(rsd_ensurer_begin(e1, &q1, rsd_now_ms()) == RSD_OK);
    REQUIRE(rsd_ensurer_begin(e2, &q2, rsd_now_ms()) == RSD_OK);
    CHECK_EQ_INT(drive(e1, holds_lock), RSD_PENDING);
    REQUIRE(holds_lock(e1));
    CHECK_EQ_INT(drive(e2, in_lock_wait), RSD_PENDING);
    REQUIRE(in_lock_wait(e2));
    CHECK_EQ_INT(drive(e1, NULL), RSD_OK);
    rsd_ensurer_query(e1, &res);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(drive(e2, NULL), RSD_OK);
    rsd_ensurer_query(e2, &res);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK(res.n_evicted == 1 && !strcmp(res.evicted[0].id, "a"));
    n = sim_log(&s);
    CHECK_EQ_INT(log_count(base, n, "POST", UNLOAD, "x"), 0); /* the foreign one never */
    rsd_ensurer_destroy(e1);
    rsd_ensurer_destroy(e2);
    sim_stop(&s);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    SIM_REQUIRE_BUILT();
    make_state_dir("ensure-lms");
    rsdt_before_each = empty_state_dir; /* records are keyed by the sim's port, which comes round again */
    RUN(test_lms_resident_then_ttl_hit);
    RUN(test_lms_load_beside);
    RUN(test_lms_fallback_unloads_minimum);
    RUN(test_lms_protected_last);
    RUN(test_lms_restore_after_failed_retry);
    RUN(test_lms_observe_never_mutates);
    RUN(test_lms_auth);
    RUN(test_lms_tier_03);
    RUN(test_lms_auto_detect);
    RUN(test_lms_ownership_persists);
    RUN(test_lms_memory_ownership_without_state);
    RUN(test_lms_memory_ownership_state_unopenable);
    RUN(test_lms_lock_held_elsewhere);
#if !defined(_WIN32)
    RUN(test_lms_multi_process);
#endif
    RUN(test_lms_owned_read_under_lock);
    RUN(test_lms_not_served);
    RUN(test_lms_nonblocking_notices);
    RUN(test_lms_cli);
#if defined(_WIN32)
    printf("skip: test_lms_multi_process: 4 ensuring processes by fork(); no fork on Windows\n");
#endif
    remove_state_dir();
    return RSD_TEST_END();
}
