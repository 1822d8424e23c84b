/* libFuzzer target: the LM Studio reconcile machine (rsd_reconcile_* with rsd_runtime_lmstudio()) driven
   by fuzz-chosen answers: statuses, transport errors, canned catalogs and
   replies, or raw fuzz bytes as bodies; lock answers and generations.
   Build: make fuzz T=lmstudio_reconcile FUZZ_SECS=60
   Invariants checked (abort on violation):
   - it reaches DONE within a bounded number of steps, with an outcome;
   - LOCK and UNLOCK balance; COMMIT comes iff something was loaded or unloaded;
   - opted out (RESIDENCY=observe or user-managed): no POST at all (W19);
   - an unload names only an owned instance: from the desc or loaded in this
     run (S33); a load names the model key or a model being restored;
   - at most RSD_LMS_LOAD_ATTEMPTS loads of the keep; every timeout in 1..deadline;
   - attr_remove names only owned instances, one per eviction. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

static rsd_reconcile *R; /* in rsd_reconcile_footprint(NULL) bytes of the heap, made once */
static rsd_json_tok TOK[2048];

static const char *const BODIES[] = {
    "{\"models\":[{\"key\":\"k\",\"type\":\"llm\",\"max_context_length\":262144,\"loaded_instances\":[]},"
    "{\"key\":\"a\",\"loaded_instances\":[{\"id\":\"a:clio\",\"config\":{\"context_length\":8192}}]},"
    "{\"key\":\"b\",\"loaded_instances\":[{\"id\":\"b\",\"config\":{\"context_length\":4096}},{\"id\":\"b:clio\"}]}]}",
    "{\"models\":[{\"key\":\"k\",\"loaded_instances\":[{\"id\":\"k:clio\",\"config\":{\"context_length\":4096}}]},"
    "{\"key\":\"a\",\"loaded_instances\":[{\"id\":\"a:clio\"}]}]}",
    "{\"models\":[{\"key\":\"k\",\"loaded_instances\":[{\"id\":\"k:9\"}]}]}",
    "{\"models\":[{\"key\":\"k\",\"loaded_instances\":[]},{\"key\":\"k\",\"loaded_instances\":[{\"id\":\"kk\"}]}]}",
    "{\"models\":[]}",
    "{\"data\":[{\"id\":\"k\",\"state\":\"not-loaded\"},{\"id\":\"a:clio\",\"state\":\"loaded\"}]}",
    "{\"error\":\"Unexpected endpoint or method. (GET /api/v1/models)\"}",
    "{\"type\":\"llm\",\"instance_id\":\"k:clio\",\"status\":\"loaded\",\"load_config\":{\"context_length\":4096}}",
    "{\"model_instance_id\":\"k:2\"}",
    "{\"instance_id\":\"a:clio\"}",
    "{\"error\":\"insufficient VRAM\"}",
    "{\"error\":{\"type\":\"model_not_found\",\"message\":\"nope\"}}",
    "",
    "garbage"};
#define NB ((int)(sizeof BODIES / sizeof BODIES[0]))

static const char *const OWNED_M[3] = {"a", "b", "k"};
static const char *const OWNED_I[3] = {"a:clio", "b:clio", "k:old"};

typedef struct cursor { const uint8_t *p; size_t n; } cursor;
static unsigned take(cursor *c) {
    if (!c->n) return 0;
    c->n--;
    return *c->p++;
}

/* Is id one of the owned instances (desc) or loaded in this run? */
static int owned(const rsd_reconcile_desc *d, const char *id, char loaded[][RSD_MODEL_ID_MAX], int nl) {
    int i;
    for (i = 0; i < d->n_owned; i++)
        if (strcmp(d->owned[i].instance, id) == 0) return 1;
    for (i = 0; i < nl; i++)
        if (strcmp(loaded[i], id) == 0) return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cursor c;
    rsd_reconcile_desc d;
    rsd_owned own[3];
    unsigned flags, steps = 0;
    int locks = 0, unlocks = 0, commits = 0, keep_loads = 0, i, nl = 0;
    bool observe, posted = false;
    uint64_t now = 1000;
    static char loaded[64][RSD_MODEL_ID_MAX];
    static char raw[4096];

    if (!R) /* the struct and its tables, the defaults */
        FZ_CHECK((R = (rsd_reconcile *)malloc(rsd_reconcile_footprint(NULL))) &&
                 rsd_reconcile_init(R, rsd_reconcile_footprint(NULL), NULL) == RSD_OK);
    c.p = data;
    c.n = size;
    flags = take(&c) | (take(&c) << 8);
    memset(&d, 0, sizeof d);
    d.base_url = "http://studio:1234/v1";
    d.target_id = "studio";
    d.runtime = rsd_runtime_lmstudio();
    d.keep = (flags & 3) == 0 ? "k" : (flags & 3) == 1 ? "kk" : (flags & 3) == 2 ? "k:clio" : "zzz";
    d.default_model = (flags & 4) ? "kk" : NULL;
    d.explicit_load = (flags & 8) != 0;
    d.lock = (flags & 16) != 0;
    d.has_generation = (flags & 32) != 0;
    d.generation = (flags >> 12) & 3;
    d.residency_env = (flags & 64) ? "observe" : NULL;
    d.user_managed = (flags & 128) != 0;
    d.context_length = (flags & 256) ? 262144 : 0;
    d.deadline_ms = (flags & 512) ? 3000 : 0;
    d.n_owned = (int)((flags >> 10) & 3);
    for (i = 0; i < d.n_owned; i++) {
        own[i].model = OWNED_M[i];
        own[i].instance = OWNED_I[i];
    }
    d.owned = own;
    observe = d.residency_env || d.user_managed;
    FZ_CHECK(rsd_reconcile_begin(R, &d, now) == RSD_OK);
    for (;;) {
        rsd_step s = rsd_reconcile_next(R, now);
        FZ_CHECK(++steps < 200);
        if (s.kind == RSD_STEP_DONE) break;
        if (s.kind == RSD_STEP_LOCK) {
            unsigned b = take(&c);
            locks++;
            FZ_CHECK(rsd_reconcile_lock_done(R, (b & 1) != 0, (b >> 1) & 3, now) == RSD_OK);
            continue;
        }
        if (s.kind == RSD_STEP_UNLOCK) { unlocks++; continue; }
        if (s.kind == RSD_STEP_COMMIT) { commits++; continue; }
        if (s.kind == RSD_STEP_WAIT) { now = s.wake_ms > now ? s.wake_ms : now; continue; }
        FZ_CHECK(s.kind == RSD_STEP_HTTP);
        FZ_CHECK(s.http.timeout_ms >= 1);
        if (strcmp(s.http.method, "POST") == 0) {
            rsd_json_doc jd;
            char id[RSD_MODEL_ID_MAX];
            FZ_CHECK(!observe);
            posted = true;
            FZ_CHECK(rsd_json_parse(&jd, s.http.body, s.http.body_len, TOK, 2048) > 0);
            if (s.http.op == RSD_OP_UNLOAD) {
                FZ_CHECK(rsd_json_str(&jd, rsd_json_find(&jd, 0, "instance_id"), id, sizeof id, NULL) == RSD_OK);
                FZ_CHECK(owned(&d, id, loaded, nl));
            } else {
                FZ_CHECK(s.http.op == RSD_OP_LOAD);
                FZ_CHECK(rsd_json_str(&jd, rsd_json_find(&jd, 0, "model"), id, sizeof id, NULL) == RSD_OK);
                if (strcmp(id, R->result.model_key) == 0) keep_loads++;
                else {
                    int ok = 0;
                    for (i = 0; i < R->result.n_evicted; i++) ok |= strcmp(R->result.evicted[i].model, id) == 0;
                    FZ_CHECK(ok);
                }
            }
        }
        {
            unsigned b = take(&c);
            int transport = (b & 15) == 15 ? RSD_ERR_TIMEOUT : (b & 15) == 14 ? RSD_ERR_CONNECT : RSD_OK;
            static const int statuses[8] = {200, 200, 200, 200, 401, 404, 500, 507};
            int status = statuses[(b >> 4) & 7];
            unsigned pick = take(&c);
            const char *body;
            size_t len;
            if (pick < 200) {
                body = BODIES[pick % NB];
                len = strlen(body);
            } else {
                size_t n = take(&c);
                if (n > c.n) n = c.n;
                memcpy(raw, c.p, n);
                c.p += n;
                c.n -= n;
                body = raw;
                len = n;
            }
            now += 1 + (b >> 7) * 2000;
            FZ_CHECK(rsd_reconcile_feed(R, transport, status, body, len, now) == RSD_OK);
        }
        for (i = nl = 0; i < R->result.n_attr_add && nl < 64; i++) snprintf(loaded[nl++], RSD_MODEL_ID_MAX, "%s", R->result.attr_add[i].instance);
    }
    FZ_CHECK(R->result.outcome != RSD_OUTCOME_NONE);
    FZ_CHECK(locks == unlocks && locks <= 1);
    FZ_CHECK(commits == (R->result.mutated ? 1 : 0));
    FZ_CHECK(keep_loads <= RSD_LMS_LOAD_ATTEMPTS);
    FZ_CHECK(!observe || !posted);
    FZ_CHECK(R->result.n_attr_remove <= R->result.n_evicted);
    for (i = 0; i < R->result.n_attr_remove; i++) FZ_CHECK(owned(&d, R->result.attr_remove[i].instance, loaded, 0));
    for (i = 0; i < R->result.n_evicted; i++) {
        int j, hit = 0;
        for (j = 0; j < d.n_owned; j++) hit |= strcmp(d.owned[j].instance, R->result.evicted[i].id) == 0;
        FZ_CHECK(hit);
    }
    FZ_CHECK(R->result.wire_id[0] != '\0' || R->result.outcome == RSD_OUTCOME_DEGRADED);
    return 0;
}
