/* Fuzz target for the sans-I/O llama.cpp router reconcile (rsd_reconcile_*): the input
   scripts a hostile router. Every HTTP step gets an answer chosen by the input (a
   listing of five models in input-chosen states, props, 2xx, 400 "already running",
   400 "downloading", 404, 500 model limit (July's envelope, build 11037's flat
   object), 500 with an error body, 500 plain "proxy error", junk, transport errors),
   LOCK answers held or not, WAIT steps are cut short by input-built /models/sse events
   (loading progress in July's and the later shape among them), the clock jumps.
   A WAIT without wait_model is a backoff (no event for it). Invariants:
   - the machine ends (DONE) within a bounded number of steps, LOCK/UNLOCK balance;
   - "pin" is tag-pinned in every listing: it is never unloaded; the keep is never
     unloaded; observe-only (RESIDENCY=off) never sends a POST;
   - outcome and error agree (RESIDENT/OBSERVED/DECLINED: RSD_OK; LOAD_FAILED and
     DEGRADED: < 0); evicted[] restored/displaced flags are consistent;
   - notices are NUL-terminated and within their limits; every step's URL is too. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

#define FAILIF(c) do { if (c) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

typedef struct rd { const uint8_t *d; size_t n, i; } rd;
static uint8_t u8(rd *r) { return r->i < r->n ? r->d[r->i++] : 0; }

static rsd_reconcile *R; /* in rsd_reconcile_footprint(NULL) bytes of the heap, made once */
static char body[4096];
static const char *const names[5] = {"keep", "a", "b", "pin", "other"};
static const char *const states[7] = {"unloaded", "loading", "loaded", "sleeping", "downloading", "failed", ""};

static size_t listing(rd *r) {
    size_t n = 0;
    int i, first = 1;
    n += (size_t)snprintf(body + n, sizeof body - n, "{\"object\":\"list\",\"data\":[");
    for (i = 0; i < 5; i++) {
        uint8_t s = u8(r) % 7;
        if (s == 6) continue; /* absent */
        n += (size_t)snprintf(body + n, sizeof body - n, "%s{\"id\":\"%s\",\"aliases\":[],\"tags\":[%s],\"status\":",
                              first ? "" : ",", names[i], i == 3 ? "\"pinned:true\"" : "");
        if (s == 5)
            n += (size_t)snprintf(body + n, sizeof body - n, "{\"value\":\"unloaded\",\"failed\":true,\"exit_code\":1}}");
        else
            n += (size_t)snprintf(body + n, sizeof body - n, "{\"value\":\"%s\"}}", states[s]);
        first = 0;
    }
    n += (size_t)snprintf(body + n, sizeof body - n, "]}");
    return n;
}

static size_t event(rd *r) {
    static const char *const st[5] = {"loaded", "loading", "unloaded", "downloading", "sleeping"};
    uint8_t b = u8(r);
    if (b % 7 == 0) return (size_t)snprintf(body, sizeof body, "{\"model\":\"*\",\"event\":\"models_reload\"}");
    if (b % 7 == 1) return (size_t)snprintf(body, sizeof body, "{\"model\":");
    if (b % 7 == 2) { /* loading progress: later routers (PR #24828), else July's */
        static const char *const stage[4] = {"fit_params", "text_model", "mmproj_model", "\\u001b"};
        uint8_t c = u8(r);
        if (c & 1)
            return (size_t)snprintf(body, sizeof body, "{\"model\":\"%s\",\"event\":\"status_change\",\"data\":{\"status\":"
                                    "\"loading\",\"progress\":{\"stage\":\"%s\",\"value\":%d.%d}}}",
                                    names[(b >> 3) % 5], stage[(c >> 1) & 3], (c >> 3) & 1, (c >> 4) % 10);
        return (size_t)snprintf(body, sizeof body, "{\"model\":\"%s\",\"event\":\"status_change\",\"data\":{\"status\":"
                                "\"loading\",\"progress\":{\"stages\":[\"text_model\"],\"current\":\"%s\",\"value\":%d}}}",
                                names[(b >> 3) % 5], stage[(c >> 1) & 3], (c >> 3) & 1);
    }
    return (size_t)snprintf(body, sizeof body, "{\"model\":\"%s\",\"event\":\"status_change\",\"data\":{\"status\":\"%s\"}}",
                            names[(b >> 3) % 5], st[u8(r) % 5]);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    rd r;
    rsd_reconcile_desc desc;
    uint8_t flags;
    uint64_t now = 1000;
    int guard, locks = 0, unlocks = 0, posts = 0, i;
    bool done = false;
    if (!R) /* the struct and its tables, the defaults */
        FAILIF(!(R = (rsd_reconcile *)malloc(rsd_reconcile_footprint(NULL))) ||
               rsd_reconcile_init(R, rsd_reconcile_footprint(NULL), NULL) != RSD_OK);
    r.d = d;
    r.n = n;
    r.i = 0;
    flags = u8(&r);
    memset(&desc, 0, sizeof desc);
    desc.base_url = "http://127.0.0.1:8080/v1";
    desc.keep = "keep";
    desc.residency_env = (flags & 1) ? "off" : NULL;
    desc.lock = (flags & 2) != 0;
    desc.has_generation = (flags & 4) != 0;
    desc.keep_pinned = (flags & 8) != 0;
    desc.deadline_ms = 1000u + (uint32_t)u8(&r) * 40u;
    desc.restore_ms = 500;
    if (flags & 16) {
        desc.capacity_bytes = (uint64_t)u8(&r) << 28;
        desc.keep_bytes = (uint64_t)u8(&r) << 27;
    }
    FAILIF(rsd_reconcile_begin(R, &desc, now) != RSD_OK);
    for (guard = 0; guard < 4000 && !done; guard++) {
        rsd_step s = rsd_reconcile_next(R, now);
        uint8_t b;
        size_t len = 0;
        int st = 200, tr = RSD_OK;
        switch (s.kind) {
        case RSD_STEP_HTTP:
            FAILIF(!s.http.url || strlen(s.http.url) >= RSD_RECONCILE_URL_MAX || s.http.timeout_ms < 1);
            if (strcmp(s.http.method, "POST") == 0) {
                posts++;
                FAILIF(flags & 1); /* W19 */
                if (s.http.op == RSD_OP_UNLOAD) {
                    FAILIF(strcmp(s.http.model, "pin") == 0);
                    FAILIF(strcmp(s.http.model, "keep") == 0);
                }
            }
            b = u8(&r);
            now += b % 64;
            switch (b >> 5) {
            case 0: tr = (b & 1) ? RSD_ERR_TIMEOUT : RSD_ERR_CONNECT; break;
            case 1: st = 500; len = (size_t)snprintf(body, sizeof body, (b & 1) ? "{\"message\":\"model limit reached, try again later\"}" : "{\"error\":{\"code\":500,\"message\":\"model limit reached, try again later\"}}"); break;
            case 2: st = 400; len = (size_t)snprintf(body, sizeof body, (b & 1) ? "{\"error\":{\"message\":\"model is already running\"}}" : "{\"error\":{\"message\":\"model is downloading\"}}"); break;
            case 3: st = (b & 1) ? 404 : 500; len = (size_t)snprintf(body, sizeof body, (b & 2) ? "proxy error: Could not establish connection" : "{\"error\":{\"message\":\"File Not Found\"}}"); break;
            case 4: st = 200; len = (size_t)snprintf(body, sizeof body, "{\"data\":[{\"id\":"); break;
            default:
                if (s.http.op == RSD_OP_CAPACITY)
                    len = (size_t)snprintf(body, sizeof body, "{\"role\":\"router\",\"max_instances\":%d}", u8(&r) % 5);
                else if (strcmp(s.http.method, "GET") == 0) len = listing(&r);
                else len = (size_t)snprintf(body, sizeof body, "{\"success\":true}");
                break;
            }
            FAILIF(rsd_reconcile_feed(R, tr, st, body, len, now) != RSD_OK);
            break;
        case RSD_STEP_WAIT:
            FAILIF(s.wait_model && !s.wait_model[0]);
            b = u8(&r);
            if ((b & 1) && s.wait_model && s.wake_ms > now + 1) { /* an SSE event arrives first */
                now += 1;
                len = event(&r);
                i = rsd_reconcile_event(R, body, len, now);
                FAILIF(i < 0 || i > 1);
                if (i == 1) FAILIF(rsd_reconcile_next(R, now).kind != RSD_STEP_HTTP);
            } else {
                now = s.wake_ms;
            }
            break;
        case RSD_STEP_LOCK:
            locks++;
            b = u8(&r);
            now += b % 8;
            FAILIF(rsd_reconcile_lock_done(R, (b & 8) == 0, b >> 4, now) != RSD_OK);
            break;
        case RSD_STEP_COMMIT:
            break;
        case RSD_STEP_UNLOCK:
            unlocks++;
            break;
        case RSD_STEP_DONE:
            done = true;
            break;
        default:
            FAILIF(1);
        }
    }
    FAILIF(!done);
    FAILIF(locks != unlocks);
    switch (R->result.outcome) {
    case RSD_OUTCOME_RESIDENT:
    case RSD_OUTCOME_OBSERVED:
    case RSD_OUTCOME_DECLINED: FAILIF(R->result.error != RSD_OK); break;
    case RSD_OUTCOME_LOAD_FAILED:
    case RSD_OUTCOME_DEGRADED: FAILIF(R->result.error >= 0); break;
    default: FAILIF(1);
    }
    if (flags & 1) FAILIF(posts != 0 || R->result.mutated);
    FAILIF(R->n_notices < 0 || R->n_notices > RSD_RECONCILE_MAX_NOTICES);
    for (i = 0; i < R->n_notices; i++) {
        FAILIF(strlen(R->notices[i].text) >= RSD_RECONCILE_NOTICE_TEXT_MAX);
        FAILIF((int)R->notices[i].notice.kind <= 0 || (int)R->notices[i].notice.kind >= (int)RSD_NOTICE_KIND_NUM);
    }
    FAILIF(R->result.n_evicted < 0 || R->result.n_evicted > RSD_MAX_RESIDENTS);
    for (i = 0; i < R->result.n_evicted; i++) {
        FAILIF(strcmp(R->result.evicted[i].id, "keep") == 0);
        if (R->result.evicted[i].displaced) FAILIF(strcmp(R->result.evicted[i].id, "pin") != 0);
        else FAILIF(strcmp(R->result.evicted[i].id, "pin") == 0);
    }
    return 0;
}
