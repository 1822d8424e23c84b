/* rsd-ensure -- make a model resident on a local inference server, from the shell.

       rsd-ensure --url URL --model ID [--runtime auto|llamacpp|lmstudio|ollama]
                  [--observe] [--protect ID[=role]]... [--context N] [--timeout-ms N]
                  [--state-dir DIR | --no-state] [--token T] [--json] [--quiet]
       rsd-ensure --url URL --list [--runtime lmstudio]   (print what the server has resident)

   Prints the reconcile's notices while it runs (and "loading 'x' ... 312 ms" when a
   load finishes), then one result line; --json prints one JSON object instead (with
   "wire_id": the id to send requests with -- LM Studio may resolve the model to a
   loaded instance such as "qwen:2" -- and "lmstudio_tier" on LM Studio; "evicted"
   lists what we unloaded, "displaced" pinned models the server's own LRU pushed out
   while we loaded, "restored" those loaded back; "state_error" is null, or why the change
   could not be recorded in the state directory, e.g. "ERR_STATE_IO" on a full disk,
   with a warning notice saying what failed; the exit code still says whether the model
   is resident).
   LM Studio (--runtime lmstudio, or detected): --context N is the load's
   context_length (clamped beside other residents); an unloaded model on a 0.3 server
   (no load API) is observe-only (exit 4); a model the server does not advertise is
   declined (exit 2); only instances this library loaded (persisted in the state
   directory) are ever unloaded to make room.
   The bearer token comes from --token or $RESIDENCY_TOKEN and is never printed; nor
   is a password in the URL (user:password@ shows as ***@). Ids and messages a server
   chose are printed with their control bytes made visible (\x1b, \r, \n: no
   terminal escape sequence or forged line gets through); --json writes them
   JSON-escaped instead.
   RESIDENCY=observe (or --observe) makes it observe-only: nothing is loaded or
   unloaded. The state directory (lock, attribution) defaults to
   $RESIDENCY_STATE_DIR, $XDG_STATE_HOME/residency, ~/.local/state/residency.

   Exit codes: 0 resident (also: observe-only and already resident), 2 declined
   (it would evict a protected model; LM Studio: the model is not advertised), 3 the
   load failed, 4 the server was
   unreachable or is not manageable (observe-only and not resident, unknown
   runtime), 64 usage error.

   It drives the non-blocking API (rsd_ensure_begin / rsd_ensure_step / poll) so it
   can print notices as they arrive; rsd_ensure() would do the same loop silently. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EX_RESIDENT = 0, EX_DECLINED = 2, EX_LOAD_FAILED = 3, EX_UNREACHABLE = 4, EX_USAGE = 64 };

static int g_verbose; /* --verbose: library log lines and loop trace on stderr */

/* Text a server chose (ids, messages) and the URL, as they may meet a terminal:
   control bytes made visible (rsd_text_escape), a URL's user:password@ as ***@
   (rsd_arg_redact). Four rotating buffers, so one printf can hold several. */
static const char *term(const char *s) {
    static char bufs[4][4 * RSD_MODEL_ID_MAX + 1024];
    static int k;
    char *b = bufs[k++ & 3];
    (void)rsd_text_escape(rsd_str_c(s), b, sizeof bufs[0]);
    return b;
}
static const char *term_n(const char *s, size_t n) {
    rsd_str v;
    static char bufs[2][4 * RSD_MODEL_ID_MAX + 16];
    static int k;
    char *b = bufs[k++ & 1];
    v.ptr = s;
    v.len = n;
    (void)rsd_text_escape(v, b, sizeof bufs[0]);
    return b;
}
static const char *term_url(const char *url) {
    static char b[4096];
    (void)rsd_arg_redact(NULL, url, b, sizeof b);
    return term(b);
}

static void log_stderr(void *user, int level, uint32_t item, const char *msg, const char *where) {
    (void)user;
    (void)where;
    fprintf(stderr, "rsd-ensure: %llu log %d %s %s\n", (unsigned long long)(rsd_now_ms() % 1000000u), level,
            rsd_log_item_name(item), msg ? term(msg) : "");
}

static void usage(const char *why) {
    if (why) fprintf(stderr, "rsd-ensure: %s\n", term(why));
    fprintf(stderr,
            "usage: rsd-ensure --url URL --model ID [--runtime auto|llamacpp|lmstudio|ollama]\n"
            "                  [--observe] [--protect ID[=role]]... [--context N] [--timeout-ms N]\n"
            "                  [--state-dir DIR | --no-state] [--token T] [--json] [--quiet]\n"
            "       rsd-ensure --url URL --list [--runtime lmstudio]\n"
            "roles: chat, memory, worker, target-default; token also from $RESIDENCY_TOKEN\n");
}

static int parse_u32(const char *s, uint32_t *out) {
    char *end;
    unsigned long v;
    if (!s || !*s) return -1;
    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno || *end || v > 0xFFFFFFFFul || s[0] == '-') return -1;
    *out = (uint32_t)v;
    return 0;
}

static int parse_role(const char *s, rsd_role *out) {
    int r;
    for (r = 0; r < (int)RSD_ROLE_NUM; r++)
        if (strcmp(s, rsd_role_str(r)) == 0) {
            *out = (rsd_role)r;
            return 0;
        }
    return -1;
}

static int exit_code_of(const rsd_ensure_result *r) {
    switch (r->outcome) {
    case RSD_OUTCOME_RESIDENT: return EX_RESIDENT;
    case RSD_OUTCOME_DECLINED: return EX_DECLINED;
    case RSD_OUTCOME_LOAD_FAILED: return EX_LOAD_FAILED;
    case RSD_OUTCOME_OBSERVED: return r->keep_resident ? EX_RESIDENT : EX_UNREACHABLE;
    default: return EX_UNREACHABLE;
    }
}

/* --list on LM Studio: GET <root>/api/v1/models (else /api/v0/models), print the loaded
   instances "resident: a (loaded), q:2 (loaded, instance of q)". */
static int list_lmstudio(rsd_ensurer *e, const char *url, const char *token) {
    static rsd_json_tok toks[RSD_LISTING_MAX_TOKENS];
    static rsd_lms_catalog cat;
    static const char *const paths[2] = {"/api/v1/models", "/api/v0/models"};
    char root[2048], u[2200];
    rsd_http_request q;
    rsd_http_event ev;
    int t, i, rc = RSD_ERR_NOT_FOUND;
    if (rsd_lms_root_url(rsd_str_c(url), root, sizeof root) < 0) return EX_USAGE;
    for (t = 0; t < 2; t++) {
        snprintf(u, sizeof u, "%s%s", root, paths[t]);
        memset(&q, 0, sizeof q);
        q.url = u;
        q.bearer_token = token;
        q.total_timeout_ms = 5000;
        rc = rsd_http_request_sync(rsd_ensurer_http(e), &q, &ev);
        if (rc != RSD_OK) break;
        rc = rsd_lms_catalog_from_response(&cat, t ? RSD_LMS_TIER_V0 : RSD_LMS_TIER_V1, ev.status, ev.body.ptr,
                                           ev.body.len, toks, RSD_LISTING_MAX_TOKENS);
        if (rc >= 0 || rc == RSD_ERR_AUTH) break;
    }
    if (rc < 0) {
        fprintf(stderr, "rsd-ensure: GET %s: %s\n", term_url(u), rc == RSD_ERR_AUTH ? "LM Studio authentication required" : rsd_result_str(rc));
        return EX_UNREACHABLE;
    }
    printf("resident:");
    for (i = 0; i < cat.n_instances; i++) {
        rsd_str key = cat.models[cat.instances[i].model].key, id = cat.instances[i].id;
        printf("%s %s (loaded", i ? "," : "", term_n(id.ptr, id.len));
        if (!rsd_str_eq(key, id)) printf(", instance of %s", term_n(key.ptr, key.len));
        printf(")");
    }
    printf("%s\n", cat.n_instances ? "" : " (nothing)");
    return 0;
}

/* --list: GET <root>/v1/models, print "resident: a (loaded), b (loading)". */
static int list_models(rsd_ensurer *e, const char *url, const char *token) {
    static rsd_json_tok toks[RSD_LISTING_MAX_TOKENS];
    static rsd_listing l;
    char u[2200];
    size_t n = strlen(url);
    rsd_http_request q;
    rsd_http_event ev;
    int i, shown = 0, rc;
    while (n && url[n - 1] == '/') n--;
    if (n >= 3 && memcmp(url + n - 3, "/v1", 3) == 0) n -= 3;
    if (n + 16 > sizeof u) return EX_USAGE;
    memcpy(u, url, n);
    memcpy(u + n, "/v1/models", 11);
    memset(&q, 0, sizeof q);
    q.url = u;
    q.bearer_token = token;
    q.total_timeout_ms = 5000;
    rc = rsd_http_request_sync(rsd_ensurer_http(e), &q, &ev);
    if (rc != RSD_OK || ev.status != 200) {
        fprintf(stderr, "rsd-ensure: GET %s: %s (HTTP %d)\n", term_url(u), rsd_result_str(rc), ev.status);
        return EX_UNREACHABLE;
    }
    if (rsd_router_parse_models(ev.body.ptr, ev.body.len, toks, RSD_LISTING_MAX_TOKENS, &l) != RSD_OK) {
        fprintf(stderr, "rsd-ensure: GET %s: unreadable listing\n", term_url(u));
        return EX_UNREACHABLE;
    }
    printf("resident:");
    for (i = 0; i < l.n; i++) {
        const rsd_listed_model *m = &l.models[i];
        bool pinned = rsd_tags_protect(m->tags, m->n_tags);
        if (!rsd_model_state_resident(m->state)) continue;
        printf("%s %s (%s%s", shown ? "," : "", term_n(m->id.ptr, m->id.len), rsd_model_state_str(m->state),
               pinned ? ", pinned" : "");
        printf(")");
        shown++;
    }
    printf("%s\n", shown ? "" : " (nothing)");
    return 0;
}

static void json_result(const rsd_ensure_result *r, const char *model, int code) {
    static char buf[1 << 17];
    rsd_json_writer w;
    int i, n;
    rsd_json_w_init(&w, buf, sizeof buf);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "model"); rsd_json_w_str(&w, model);
    rsd_json_w_key(&w, "runtime"); rsd_json_w_str(&w, rsd_runtime_kind_str(r->runtime));
    rsd_json_w_key(&w, "outcome"); rsd_json_w_str(&w, rsd_outcome_str(r->outcome));
    rsd_json_w_key(&w, "decision"); rsd_json_w_str(&w, rsd_decision_str(r->decision));
    rsd_json_w_key(&w, "reason"); rsd_json_w_str(&w, rsd_reason_name(r->reason));
    rsd_json_w_key(&w, "reason_text"); rsd_json_w_str(&w, rsd_reason_str(r->reason));
    rsd_json_w_key(&w, "result"); rsd_json_w_str(&w, rsd_result_name(r->result));
    rsd_json_w_key(&w, "message"); rsd_json_w_str(&w, r->message);
    rsd_json_w_key(&w, "wire_id"); rsd_json_w_str(&w, r->wire_id);
    if (r->runtime == RSD_RUNTIME_LMSTUDIO) { rsd_json_w_key(&w, "lmstudio_tier"); rsd_json_w_str(&w, rsd_lms_tier_str(r->lms_tier)); }
    rsd_json_w_key(&w, "evicted");
    rsd_json_w_begin_array(&w);
    for (i = 0; i < r->n_evicted; i++)
        if (!r->evicted[i].displaced) rsd_json_w_str(&w, r->evicted[i].id);
    rsd_json_w_end_array(&w);
    rsd_json_w_key(&w, "displaced"); /* pushed out by the server itself (W11), not by us */
    rsd_json_w_begin_array(&w);
    for (i = 0; i < r->n_evicted; i++)
        if (r->evicted[i].displaced) rsd_json_w_str(&w, r->evicted[i].id);
    rsd_json_w_end_array(&w);
    rsd_json_w_key(&w, "restored");
    rsd_json_w_begin_array(&w);
    for (i = 0; i < r->n_evicted; i++)
        if (r->evicted[i].restored) rsd_json_w_str(&w, r->evicted[i].id);
    rsd_json_w_end_array(&w);
    rsd_json_w_key(&w, "notices");
    rsd_json_w_begin_array(&w);
    for (i = 0; i < r->n_notices; i++) {
        const rsd_reconcile_notice *nt = &r->notices[i];
        rsd_json_w_begin_object(&w);
        rsd_json_w_key(&w, "kind"); rsd_json_w_str(&w, rsd_notice_kind_str(nt->notice.kind));
        rsd_json_w_key(&w, "level"); rsd_json_w_str(&w, rsd_notice_level_str(nt->notice.level));
        rsd_json_w_key(&w, "message"); rsd_json_w_str(&w, nt->text);
        rsd_json_w_end_object(&w);
    }
    rsd_json_w_end_array(&w);
    rsd_json_w_key(&w, "state_error"); /* the change could not be recorded in the state directory */
    if (r->state_error < 0) rsd_json_w_str(&w, rsd_result_name(r->state_error));
    else rsd_json_w_null(&w);
    rsd_json_w_key(&w, "cache_hit"); rsd_json_w_bool(&w, r->cache_hit);
    rsd_json_w_key(&w, "requests"); rsd_json_w_int(&w, r->requests);
    rsd_json_w_key(&w, "elapsed_ms"); rsd_json_w_int(&w, (int64_t)r->elapsed_ms);
    rsd_json_w_key(&w, "exit_code"); rsd_json_w_int(&w, code);
    rsd_json_w_end_object(&w);
    n = rsd_json_w_finish(&w);
    if (n < 0) printf("{\"error\":\"%s\"}\n", rsd_result_name(n));
    else printf("%s\n", buf);
}

int main(int argc, char **argv) {
    static rsd_protected_model prot[RSD_MAX_PROTECTED];
    rsd_ensurer_desc d;
    rsd_ensure_req q;
    rsd_ensure_result res;
    rsd_ensurer *e;
    const char *url = NULL, *model = NULL, *token = getenv("RESIDENCY_TOKEN");
    bool json = false, list = false, quiet = false;
    int i, rc, code, n_prot = 0, seen = 0;
    char load_model[RSD_MODEL_ID_MAX] = "";
    uint64_t load_t0 = 0;
    bool loading = false, line_open = false, show;

    memset(&d, 0, sizeof d);
    memset(&q, 0, sizeof q);
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDV() do { if (!v) { usage("missing value"); return EX_USAGE; } i++; } while (0)
        if (!strcmp(a, "--url")) { NEEDV(); url = v; }
        else if (!strcmp(a, "--model")) { NEEDV(); model = v; }
        else if (!strcmp(a, "--runtime")) {
            NEEDV();
            if ((rc = rsd_runtime_kind_parse(v)) < 0) { usage("bad --runtime"); return EX_USAGE; }
            q.runtime = (rsd_runtime_kind)rc;
        }
        else if (!strcmp(a, "--observe")) q.observe = true;
        else if (!strcmp(a, "--protect")) {
            char *eq;
            NEEDV();
            if (n_prot >= RSD_MAX_PROTECTED) { usage("too many --protect"); return EX_USAGE; }
            prot[n_prot].role = RSD_ROLE_NONE;
            eq = strchr(argv[i], '=');
            if (eq) {
                *eq = '\0';
                if (parse_role(eq + 1, &prot[n_prot].role) < 0) { usage("bad role in --protect"); return EX_USAGE; }
            }
            if (!argv[i][0]) { usage("empty --protect id"); return EX_USAGE; }
            prot[n_prot].model_id = rsd_str_c(argv[i]);
            n_prot++;
        }
        else if (!strcmp(a, "--context")) { NEEDV(); if (parse_u32(v, &q.context_length)) { usage("bad --context"); return EX_USAGE; } }
        else if (!strcmp(a, "--timeout-ms")) { NEEDV(); if (parse_u32(v, &q.timeout_ms)) { usage("bad --timeout-ms"); return EX_USAGE; } }
        else if (!strcmp(a, "--state-dir")) { NEEDV(); d.state_dir = v; }
        else if (!strcmp(a, "--no-state")) d.no_state = true;
        else if (!strcmp(a, "--token")) { NEEDV(); token = v; }
        else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--quiet")) quiet = true;
        else if (!strcmp(a, "--verbose")) g_verbose = 1;
        else if (!strcmp(a, "--list")) list = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(NULL); return 0; }
        else { usage("unknown option"); return EX_USAGE; }
#undef NEEDV
    }
    if (!url || (!list && !model)) { usage("--url and --model are required"); return EX_USAGE; }
    d.protected_models = prot;
    d.n_protected = n_prot;
    d.no_state = d.no_state || list;
    if (g_verbose) d.logger.fn = log_stderr;
    e = rsd_ensurer_create(&d);
    if (!e) { fprintf(stderr, "rsd-ensure: cannot create the ensurer\n"); return EX_UNREACHABLE; }
    if (list) {
        (void)rsd_ensurer_resolve(e, url);
        if (q.runtime == RSD_RUNTIME_LMSTUDIO) code = list_lmstudio(e, url, token && *token ? token : NULL);
        else code = list_models(e, url, token && *token ? token : NULL);
        rsd_ensurer_destroy(e);
        return code;
    }
    q.url = url;
    q.model = model;
    q.bearer = token && *token ? token : NULL;
    (void)rsd_ensurer_resolve(e, url);
    rc = rsd_ensure_begin(e, &q, rsd_now_ms());
    if (rc == RSD_ERR_ARG || rc == RSD_ERR_URL || rc == RSD_ERR_MODEL_ID) {
        rsd_ensure_query(e, &res);
        usage(res.message);
        rsd_ensurer_destroy(e);
        return EX_USAGE;
    }
    for (;;) {
        rsd_pollfd fds[16];
        const rsd_reconcile_notice *nt;
        uint64_t now = rsd_now_ms(), dl;
        int n, timeout;
        rc = rsd_ensure_step(e, now);
        n = rsd_ensure_notices(e, &nt);
        rsd_ensure_query(e, &res);
        show = !json && !quiet;
        /* a load ends when the ensure moves on to anything but polling for it (a listing
           request naming the model is a poll) */
        if (loading && (rc != RSD_PENDING || !(res.op == RSD_OP_LIST || res.op == RSD_OP_POLL || res.op == RSD_OP_LOAD) ||
                        strcmp(res.op_model, load_model) != 0)) {
            if (show) {
                if (!line_open) printf("loading '%s' ...", term(load_model));
                printf(" %llu ms\n", (unsigned long long)(now - load_t0));
            }
            loading = line_open = false;
        }
        for (; seen < n; seen++) {
            if (!show) continue;
            if (line_open) { printf("\n"); line_open = false; }
            printf("  %-14s %-7s %s\n", rsd_notice_kind_str(nt[seen].notice.kind),
                   rsd_notice_level_str(nt[seen].notice.level), nt[seen].text);
        }
        if (!loading && rc == RSD_PENDING && res.op == RSD_OP_LOAD) {
            snprintf(load_model, sizeof load_model, "%s", res.op_model);
            load_t0 = now;
            loading = true;
            if (show) { printf("loading '%s' ...", term(load_model)); line_open = true; }
        }
        fflush(stdout);
        if (rc != RSD_PENDING) break;
        n = rsd_ensure_pollfds(e, fds, 16);
        if (n > 16) n = 16;
        dl = rsd_ensure_next_deadline(e);
        now = rsd_now_ms();
        if (dl == RSD_DEADLINE_NONE) timeout = n ? 1000 : 10;
        else timeout = dl <= now ? 0 : dl - now > 1000 ? 1000 : (int)(dl - now);
        if (g_verbose)
            fprintf(stderr, "rsd-ensure: %llu step op=%s model=%s requests=%u fds=%d timeout=%d\n",
                    (unsigned long long)(now % 1000000u), rsd_http_op_str(res.op), term(res.op_model),
                    (unsigned)res.requests, n, timeout);
        if (timeout > 0 && rsd_poll(fds, n, timeout) < 0 && errno != EINTR) break;
    }
    rsd_ensure_query(e, &res);
    code = exit_code_of(&res);
    if (json) {
        json_result(&res, model, code);
    } else if (!quiet) {
        printf("%s: '%s' on %s (%s: %s), %llu ms, %u requests%s\n", rsd_outcome_str(res.outcome), term(model), term_url(url),
               rsd_decision_str(res.decision), rsd_reason_str(res.reason), (unsigned long long)res.elapsed_ms,
               (unsigned)res.requests, res.cache_hit ? ", cached decision" : "");
        for (i = 0; i < res.n_evicted; i++)
            printf("  %s '%s'%s\n", res.evicted[i].displaced ? "displaced by the server" : "evicted",
                   term(res.evicted[i].id), res.evicted[i].restored ? " (restored)" : "");
        if (res.wire_id[0] && strcmp(res.wire_id, model) != 0) printf("  send requests as '%s'\n", term(res.wire_id));
        if (res.message[0] && res.outcome != RSD_OUTCOME_RESIDENT && res.outcome != RSD_OUTCOME_DECLINED) printf("  %s\n", term(res.message));
    }
    rsd_ensurer_destroy(e);
    return code;
}
