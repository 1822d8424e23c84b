/* Fuzz target for the llama.cpp router payload parsers and the reconcile driver.
   Input: the whole input is one payload for the three parsers; then the input
   split at 0xFF bytes is a sequence of server answers fed to a reconcile.
   Invariants:
   - parsers never crash; every kept id, alias and tag is 1..RSD_MODEL_ID_MAX-1
     bytes, NUL-free, inside the listing's arena, NUL-terminated there; n is
     within RSD_LISTING_MAX_MODELS and n + n_skipped <= n_seen; has_states
     matches the entries; the same input parses the same way twice; the parse
     succeeds exactly when a token-count pass does (token budget permitting);
   - props: max_instances <= 0x7FFFFFFF; unlimited only for a router at 0;
   - slots: the same answer twice, with or without room for the rows; ids >= 0,
     n_ctx <= 0x7FFFFFFF, n_prompt_tokens >= 0; invalid JSON is an error;
   - the driver reaches DONE in a bounded number of steps on any answers; every
     LOCK gets one UNLOCK; observe-only never emits a POST or a LOCK; a request
     URL always starts with the root; the notice counter never goes down. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include <stdlib.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

#define FAILIF(c) do { if (c) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

static rsd_json_tok toks[RSD_LISTING_MAX_TOKENS];
static rsd_listing l1, l2;
static rsd_listed_model m1[RSD_LISTING_MAX_MODELS], m2[RSD_LISTING_MAX_MODELS];
static char a1[RSD_LISTING_ARENA_BYTES], a2[RSD_LISTING_ARENA_BYTES];
static rsd_reconcile *rc; /* in rsd_reconcile_footprint(NULL) bytes of the heap, made once */
static rsd_decision_cache cache;

static void check_name(const rsd_listing *l, rsd_str s) {
    FAILIF(s.len == 0 || s.len >= RSD_MODEL_ID_MAX);
    FAILIF(s.ptr < l->arena || s.ptr + s.len >= l->arena + RSD_LISTING_ARENA_BYTES);
    FAILIF(s.ptr[s.len] != '\0');
    FAILIF(memchr(s.ptr, '\0', s.len) != NULL);
}

static void check_listing(const rsd_listing *l) {
    int i, k;
    bool states = false;
    FAILIF(l->n < 0 || l->n > RSD_LISTING_MAX_MODELS);
    FAILIF((uint32_t)l->n + l->n_skipped > l->n_seen);
    FAILIF(l->arena_used > RSD_LISTING_ARENA_BYTES);
    for (i = 0; i < l->n; i++) {
        const rsd_listed_model *m = &l->models[i];
        check_name(l, m->id);
        FAILIF(m->n_aliases < 0 || m->n_aliases > RSD_MAX_ALIASES || m->n_tags < 0 || m->n_tags > RSD_MAX_TAGS);
        for (k = 0; k < m->n_aliases; k++) check_name(l, rsd_listed_alias(m, k));
        for (k = 0; k < m->n_tags; k++) check_name(l, rsd_listed_tag(m, k));
        FAILIF((int)m->state < 0 || (int)m->state >= (int)RSD_MODEL_STATE_NUM);
        if (m->state != RSD_MODEL_UNKNOWN) states = true;
        FAILIF(rsd_listing_find(l, m->id) < 0 || rsd_listing_find(l, m->id) > i);
    }
    if (!l->truncated) FAILIF(states != l->has_states);
}

static bool same_listing(const rsd_listing *a, const rsd_listing *b) {
    int i, k;
    if (a->n != b->n || a->n_seen != b->n_seen || a->n_skipped != b->n_skipped || a->truncated != b->truncated ||
        a->has_states != b->has_states)
        return false;
    for (i = 0; i < a->n; i++) {
        const rsd_listed_model *x = &a->models[i], *y = &b->models[i];
        if (!rsd_str_eq(x->id, y->id) || x->state != y->state || x->n_tags != y->n_tags ||
            x->n_aliases != y->n_aliases || x->exit_code != y->exit_code || x->failed != y->failed)
            return false;
        for (k = 0; k < x->n_tags; k++)
            if (!rsd_str_eq(rsd_listed_tag(x, k), rsd_listed_tag(y, k))) return false;
    }
    return true;
}

static void fuzz_parsers(const char *s, size_t n) {
    rsd_json_doc doc;
    rsd_router_props p;
    rsd_server_error se;
    int count = rsd_json_parse(&doc, s, n, NULL, 0);
    int r1 = rsd_router_parse_models(s, n, toks, RSD_LISTING_MAX_TOKENS, &l1);
    int r2 = rsd_router_parse_models(s, n, toks, RSD_LISTING_MAX_TOKENS, &l2);
    int r;
    FAILIF(r1 != r2);
    check_listing(&l1);
    FAILIF(r1 == RSD_OK && !same_listing(&l1, &l2));
    if (count >= 0 && count <= RSD_LISTING_MAX_TOKENS) FAILIF(r1 != RSD_OK);
    if (count < 0) FAILIF(r1 >= 0);
    r = rsd_router_parse_props(s, n, toks, RSD_LISTING_MAX_TOKENS, &p);
    FAILIF(r != r1 && !(count > RSD_LISTING_MAX_TOKENS));
    FAILIF(p.max_instances > 0x7FFFFFFFu);
    FAILIF(p.unlimited && (!p.is_router || p.max_instances != 0));
    { /* slots: a count or an error, the same twice; ids, contexts and tokens in range */
        rsd_slot a[8], b[8];
        int i, s1 = rsd_router_parse_slots(s, n, toks, RSD_LISTING_MAX_TOKENS, a, 8),
               s2 = rsd_router_parse_slots(s, n, toks, RSD_LISTING_MAX_TOKENS, b, 8);
        FAILIF(s1 != s2);
        if (count < 0) FAILIF(s1 >= 0);
        for (i = 0; i < s1 && i < 8; i++) {
            FAILIF(a[i].id < 0 || a[i].n_ctx > 0x7FFFFFFFu || a[i].n_prompt_tokens < 0);
            FAILIF(a[i].id != b[i].id || a[i].n_ctx != b[i].n_ctx || a[i].n_prompt_tokens != b[i].n_prompt_tokens);
        }
        FAILIF(rsd_router_parse_slots(s, n, toks, RSD_LISTING_MAX_TOKENS, NULL, 0) != s1);
    }
    r = rsd_server_error_parse(&se, s, n, toks, RSD_LISTING_MAX_TOKENS);
    FAILIF(r > 1);
    FAILIF(memchr(se.message, '\0', sizeof se.message) == NULL);
}

/* Feed the answers in d (split at 0xFF; first byte of a chunk picks status/transport). */
static void fuzz_driver(const uint8_t *d, size_t n, bool observe, bool lock) {
    static const int statuses[] = {200, 200, 200, 200, 400, 404, 500, 503, 401, 204};
    rsd_reconcile_desc desc;
    const char *own[2] = {"a", "old"};
    rsd_protected_model prot[1];
    uint64_t now = 1000;
    size_t pos = 0;
    int steps, locks = 0, unlocks = 0, seen = 0;
    memset(&desc, 0, sizeof desc);
    desc.base_url = "http://127.0.0.1:8080/v1";
    desc.keep = "keep";
    desc.cache = &cache;
    desc.lock = lock;
    desc.residency_env = observe ? "observe" : NULL;
    desc.ours = own;
    desc.n_ours = 2;
    prot[0].model_id = rsd_str_c("cfg");
    prot[0].role = RSD_ROLE_MEMORY;
    desc.protected_models = prot;
    desc.n_protected = 1;
    desc.deadline_ms = 3000;
    FAILIF(rsd_reconcile_begin(rc, &desc, now) != RSD_OK);
    for (steps = 0; steps < 2000; steps++) {
        rsd_step s = rsd_reconcile_next(rc, now);
        FAILIF(rc->n_notices < seen);
        seen = rc->n_notices;
        if (s.kind == RSD_STEP_DONE) break;
        if (s.kind == RSD_STEP_WAIT) {
            FAILIF(s.wake_ms < now);
            now = s.wake_ms;
            continue;
        }
        if (s.kind == RSD_STEP_LOCK) {
            locks++;
            FAILIF(observe);
            rsd_reconcile_lock_done(rc, (now & 1) == 0, now & 2, now);
            continue;
        }
        if (s.kind == RSD_STEP_UNLOCK) { unlocks++; continue; }
        if (s.kind == RSD_STEP_COMMIT) { FAILIF(observe); continue; }
        FAILIF(s.kind != RSD_STEP_HTTP);
        FAILIF(strncmp(s.http.url, "http://127.0.0.1:8080/", 22) != 0);
        FAILIF(s.http.timeout_ms < 1);
        if (observe) FAILIF(strcmp(s.http.method, "GET") != 0);
        {
            size_t end = pos;
            uint8_t sel = pos < n ? d[pos] : 0;
            int transport = RSD_OK, status = statuses[sel % 10];
            while (end < n && d[end] != 0xFF) end++;
            if (sel >= 0xF0) transport = (sel & 1) ? RSD_ERR_TIMEOUT : RSD_ERR_CONNECT;
            now += sel & 7;
            rsd_reconcile_feed(rc, transport, status, pos < n ? (const char *)d + pos + 1 : "",
                               end > pos ? end - pos - 1 : 0, now);
            pos = end < n ? end + 1 : n;
        }
    }
    FAILIF(steps >= 2000);
    FAILIF(locks != unlocks);
    FAILIF(rc->result.outcome == RSD_OUTCOME_NONE);
    if (observe) FAILIF(rc->result.mutated);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    static int ready;
    if (!ready) { /* storage for the listings, tables for the reconcile (the defaults) */
        FAILIF(rsd_listing_init(&l1, m1, RSD_LISTING_MAX_MODELS, a1, sizeof a1) != RSD_OK);
        FAILIF(rsd_listing_init(&l2, m2, RSD_LISTING_MAX_MODELS, a2, sizeof a2) != RSD_OK);
        FAILIF(!(rc = (rsd_reconcile *)malloc(rsd_reconcile_footprint(NULL))) ||
               rsd_reconcile_init(rc, rsd_reconcile_footprint(NULL), NULL) != RSD_OK);
        ready = 1;
    }
    fuzz_parsers((const char *)d, n);
    memset(&cache, 0, sizeof cache);
    fuzz_driver(d, n, false, true);
    fuzz_driver(d, n, true, true);
    fuzz_driver(d, n, false, false);
    return 0;
}
