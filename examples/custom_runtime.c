/* custom_runtime.c -- a runtime the library does not know, added without touching
   the implementation: a table of hooks (rsd_runtime) for a made-up model server
   ("tinyserve": GET /api/models lists {"models":[{"name":..,"running":bool}]},
   POST /api/start and /api/stop take {"model":id}) and the one reconcile machine,
   with its cache, notices, lock and result. The server is simulated in this file
   (two slots, "a" and "b" running), so the program runs anywhere without I/O; a
   real host sends s.http over its HTTP stack instead (residency_http.h's ensurer
   does that for the built-in runtimes).
   Build: cc -std=c99 -I. examples/custom_runtime.c -o custom_runtime
   Prints every request, the notices and the outcome: "b" (ours, loaded earlier)
   is stopped to make room for "c". */
#define RESIDENCY_IMPLEMENTATION
#include "residency.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the runtime: four hooks, each given the reconcile's rsd_runtime_ctx ------------ */
static int ts_request(rsd_runtime_ctx *c, rsd_http_op op, const char *model, rsd_step_http *out) {
    int rc, n = -1;
    const char *path = op == RSD_OP_LOAD ? "/api/start" : op == RSD_OP_UNLOAD ? "/api/stop" : "/api/models";
    if ((rc = rsd_reconcile_set_url(c->r, path)) < 0) return rc; /* c->url = the root + path */
    if ((op == RSD_OP_LOAD || op == RSD_OP_UNLOAD) && (n = rsd_reconcile_model_body(c->r, model)) < 0) return n;
    rsd_reconcile_http_fill(c->r, out, n >= 0 ? "POST" : "GET", n);
    return RSD_OK;
}

/* {"models":[{"name":"a","running":true},...]} into the listing; names are copied into
   its arena (the body is gone after the feed). */
static int ts_parse_list(rsd_runtime_ctx *c, const char *body, size_t len, rsd_listing *out) {
    rsd_json_doc top, doc;
    size_t pos = 0;
    int arr, rc;
    const int e = 0; /* each entry is its own document: c->toks holds the top level and one entry */
    memset(out, 0, offsetof(rsd_listing, models));
    if ((rc = rsd_json_parse_top(&top, body, len, c->toks, c->max_tokens)) < 0) return rc;
    arr = rsd_json_find(&top, 0, "models");
    if (rsd_json_type_of(&top, arr) != RSD_JSON_ARRAY) return RSD_ERR_PAYLOAD;
    while ((rc = rsd_json_each(&top, arr, &pos, &doc)) > 0) {
        rsd_listed_model *m;
        size_t n = 0;
        bool running = false;
        char *dst = out->arena + out->arena_used;
        out->n_seen++;
        if (out->n >= out->max_models) return RSD_ERR_LISTING_TRUNCATED;
        if (rsd_json_str(&doc, rsd_json_find(&doc, e, "name"), dst, out->arena_bytes - out->arena_used, &n) < 0 ||
            n == 0 || n >= RSD_MODEL_ID_MAX) {
            out->n_skipped++;
            continue;
        }
        m = &out->models[out->n++];
        memset(m, 0, sizeof *m);
        m->id.ptr = dst;
        m->id.len = n;
        m->instance = rsd_str_c("");
        (void)rsd_json_bool(&doc, rsd_json_find(&doc, e, "running"), &running);
        m->state = running ? RSD_MODEL_LOADED : RSD_MODEL_UNLOADED;
        out->arena_used += n + 1;
    }
    if (rc < 0) return rc;
    out->has_states = true;
    return RSD_OK;
}

static rsd_load_answer ts_load_answer(rsd_runtime_ctx *c, int status, const char *body, size_t len) {
    (void)c;
    (void)body;
    (void)len;
    return status >= 200 && status <= 299 ? RSD_LOAD_ACCEPTED : RSD_LOAD_REJECTED;
}

static const rsd_runtime tinyserve = {
    "tinyserve", "tinyserve", RSD_STRATEGY_ROUTER, RSD_RT_CATALOG | RSD_RT_LOAD | RSD_RT_WAIT,
    ts_request, ts_parse_list, NULL, ts_load_answer,
    0, 0, 0, NULL,     /* the machine's timeouts; the default root rule */
    NULL, NULL,        /* no list_entry/list_end: a listing is kept whole (max_body_bytes) for ts_parse_list */
    NULL, NULL, NULL, NULL}; /* not load-first: list, decide, unload, load, wait */

/* ---- a simulated tinyserve: a, b, c known; a and b running ------------------------- */
static bool g_running[3] = {true, true, false};
static const char *const g_names[3] = {"a", "b", "c"};

static int sim(const rsd_step_http *h, char *out, size_t cap) {
    int i;
    if (strcmp(h->method, "GET") == 0) {
        size_t n = (size_t)snprintf(out, cap, "{\"models\":[");
        for (i = 0; i < 3; i++)
            n += (size_t)snprintf(out + n, cap - n, "%s{\"name\":\"%s\",\"running\":%s}", i ? "," : "", g_names[i],
                                  g_running[i] ? "true" : "false");
        (void)snprintf(out + n, cap - n, "]}");
        return 200;
    }
    for (i = 0; i < 3; i++) {
        char want[64];
        (void)snprintf(want, sizeof want, "{\"model\":\"%s\"}", g_names[i]);
        if (h->body_len == strlen(want) && memcmp(h->body, want, h->body_len) == 0) {
            g_running[i] = strstr(h->url, "/api/start") != NULL;
            (void)snprintf(out, cap, "{\"ok\":true}");
            return 200;
        }
    }
    (void)snprintf(out, cap, "{\"error\":\"no such model\"}");
    return 404;
}

int main(void) {
    static const char *const ours[] = {"b"}; /* what this library loaded there before */
    size_t size = rsd_reconcile_footprint(NULL); /* the struct and its tables, default limits */
    rsd_reconcile *r = (rsd_reconcile *)malloc(size);
    const rsd_reconcile_result *res;
    const rsd_reconcile_notice *notices;
    rsd_reconcile_desc d;
    char body[1024];
    uint64_t now = 1000;
    int i, seen = 0, ok;

    memset(&d, 0, sizeof d);
    d.runtime = &tinyserve;
    d.base_url = "http://127.0.0.1:9000";
    d.keep = "c";
    d.ours = ours;
    d.n_ours = 1;
    d.capacity_known = true; /* tinyserve has two slots */
    d.max_instances = 2;
    if (!r || rsd_reconcile_init(r, size, NULL) < 0) return 1;
    res = rsd_reconcile_result_of(r);
    if (rsd_reconcile_begin(r, &d, now) < 0) return 1;
    for (;;) {
        rsd_step s = rsd_reconcile_next(r, now);
        int n = rsd_reconcile_notices(r, &notices);
        for (; seen < n; seen++) printf("notice: %s\n", notices[seen].text);
        if (s.kind == RSD_STEP_DONE) break;
        if (s.kind == RSD_STEP_HTTP) {
            int status = sim(&s.http, body, sizeof body);
            printf("%s %s%s%.*s -> %d\n", s.http.method, s.http.url, s.http.body ? " " : "", (int)s.http.body_len,
                   s.http.body ? s.http.body : "", status);
            now += 5;
            (void)rsd_reconcile_feed(r, RSD_OK, status, body, strlen(body), now);
        } else if (s.kind == RSD_STEP_WAIT) {
            now = s.wake_ms;
        }
    }
    printf("key %s\n", rsd_reconcile_key(r));
    printf("outcome %s, %s\n", rsd_outcome_str(res->outcome), rsd_result_str(res->error));
    for (i = 0; i < res->n_evicted; i++) printf("unloaded %s\n", res->evicted[i].id);
    for (i = 0; i < res->n_attr_add; i++) printf("ours now %s\n", res->attr_add[i].model);
    ok = res->outcome == RSD_OUTCOME_RESIDENT;
    free(r); /* the reconcile owns nothing else */
    return ok ? 0 : 1;
}
