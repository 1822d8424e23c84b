/* rsd-ensure -- make a model resident on a local inference server, from the shell.

       rsd-ensure --url URL --model ID [OPTION]...
       rsd-ensure --url URL --list [--runtime R] [--token T]
       rsd-ensure --url URL --free-bytes N[K|M|G|T] [OPTION]...
       rsd-ensure --release ID [--url URL] [OPTION]...
       rsd-ensure --help | --version

   `rsd-ensure --help` is the manual (options, environment, exit codes); this comment
   says how the program works.

   It drives the non-blocking API (rsd_ensurer_begin / rsd_ensurer_step / poll) so it
   can print notices as they arrive; rsd_ensurer_sync() would do the same loop silently.
   While a load runs it prints "loading 'x' ..." and, when it ends, the time it took;
   while it waits on a load someone else started (the model is listed as loading) it
   prints "waiting for 'x' (being loaded by someone else) ..." (each stage a llama.cpp
   router's /models/sse names for that load is added as it comes: " [fit_params]
   [text_model]", rsd_ensure_result.load_stage), and while another ensure
   holds the target lock (it is changing the same server) "waiting for the residency
   lock ..." (rsd_ensure_result.lock_waiting). The last line is the
   result; --json prints one JSON object instead (with "wire_id": the id to send
   requests with -- LM Studio may resolve the model to a loaded instance such as
   "qwen:2" -- and "lmstudio_tier" on LM Studio; "evicted" lists what we unloaded,
   "displaced" pinned models the server's own LRU pushed out while we loaded,
   "restored" those loaded back; "state_error" is null, or why the change could not be
   recorded in the state directory, e.g. "ERR_STATE_IO" on a full disk, with a warning
   notice saying what failed; the exit code still says whether the model is resident).

   --list is an observe-only ensure (which finds and recognises the server with the
   library's own probes and words: "server unreachable: ...", "not a model server: ...")
   followed by one GET of the runtime's listing: GET /v1/models on a llama.cpp router,
   GET /api/ps on Ollama, GET /api/v1/models (or /api/v0/models) on LM Studio.

   The bearer token comes from --token or $RESIDENCY_TOKEN and is never printed; nor
   is a password in the URL (user:password@ shows as ***@). Ids and messages a server
   chose are printed with their control bytes made visible (\x1b, \r, \n: no
   terminal escape sequence or forged line gets through); --json writes them
   JSON-escaped instead.
   RESIDENCY_COORD=etcd://host:2379[/prefix] keeps the lock and attribution on etcd
   instead of the state directory, shared by every host that uses the same server
   (RESIDENCY_COORD_USER / _PASSWORD / _TOKEN to log in). */
#define RESIDENCY_IMPLEMENTATION
#include "../../residency_http.h"
#include "../rsd_app.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exit codes (the help text lists them; keep the README and residency.h's in step). */
enum {
    EX_RESIDENT = 0,     /* resident (also: observe-only and already resident) */
    EX_FAIL = 1,         /* internal: the ensurer could not be created */
    EX_DECLINED = 2,     /* declined: it would evict a protected model; LM Studio: not advertised */
    EX_LOAD_FAILED = 3,  /* the load failed */
    EX_OBSERVED = 4,     /* observe-only and not resident: nothing was done */
    EX_UNREACHABLE = 5,  /* server unreachable: no connection, timed out, name not resolved */
    EX_NOT_SERVER = 6,   /* it answers, but not as a model server this library can read */
    EX_AUTH = 7,         /* the server asks for an API key, or refused the one given */
    EX_USAGE = 64        /* bad command line */
};

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

static void help(void) {
    printf("usage: rsd-ensure --url URL --model ID [OPTION]...\n"
           "       rsd-ensure --url URL --list [--runtime R] [--token T]\n"
           "       rsd-ensure --url URL --free-bytes N [OPTION]...\n"
           "       rsd-ensure --release ID [--url URL] [OPTION]...\n"
           "Makes model ID resident on the inference server at URL (a llama.cpp router, LM Studio\n"
           "or Ollama; rsd-serve too), evicting an unprotected model when the server is full.\n"
           "\n"
           "  --url URL            the server, http://HOST:PORT (or .../v1)\n"
           "  --model ID           the model to make resident\n"
           "  --list               print what the server has resident and exit\n"
           "  --free-bytes N       instead of a model: free N bytes (K/M/G/T suffixes, binary) by\n"
           "                       unloading models residency loaded there, least recently used\n"
           "                       first, never a protected one (the server must list sizes: the\n"
           "                       llama.cpp router does for loaded models); prints a lease ID.\n"
           "                       On rsd-serve: its own lease (POST /_rsd/lease, ttl 10 min),\n"
           "                       done once the stopped processes have exited (and, on\n"
           "                       vram_budget = auto, the device shows the memory free)\n"
           "  --release ID         load back what --free-bytes unloaded under lease ID (an\n"
           "                       rsd-serve:N lease needs --url: rsd-serve starts them again)\n"
           "  --runtime R          auto (default: detected), llamacpp, lmstudio or ollama\n"
           "  --observe            observe-only: report what it would do, load or unload nothing\n"
           "  --protect ID[=ROLE]  never evict ID (repeatable); ROLE: chat, memory, worker,\n"
           "                       target-default\n"
           "  --context N          context length of the load (LM Studio; clamped beside others)\n"
           "  --timeout-ms N       the whole ensure, lock wait and load included (default 120000,\n"
           "                       LM Studio 300000)\n"
           "  --max-models N       the largest listing it reads, in models (default 64; its bytes\n"
           "                       grow with it, and so does the room for the ids of the record\n"
           "                       of what residency loaded, attr_arena_bytes: 128 per model)\n"
           "  --max-tokens N       JSON tokens it holds at once: the listing's top level and its\n"
           "                       largest entry (default 256, at least 64)\n"
           "  --max-body N         bytes of an answer it holds at once: a listing's top level and\n"
           "                       one entry (a listing is read as it arrives), or a whole other\n"
           "                       answer (default 8192, at least 1024)\n"
           "  --state-dir DIR      lock and attribution files (default $RESIDENCY_STATE_DIR,\n"
           "                       $XDG_STATE_HOME/residency, ~/.local/state/residency)\n"
           "  --no-state           no state directory: no lock, nothing recorded\n"
           "  --kv-slots           llama.cpp router started with --slot-save-path: save a model's\n"
           "                       slots before an unload this makes, restore them after a load\n"
           "  --token T            bearer token (API key); default $RESIDENCY_TOKEN; never printed\n"
           "  --json               print one JSON object instead of the lines\n"
           "  --quiet              print nothing; the exit code says it all\n"
           "  --verbose            the library's log lines and the step loop on stderr\n"
           "  --help, --version    this text; the version\n");
    printf("\n"
           "Environment: RESIDENCY=observe (or off, 0, false, user, user-managed) makes every run\n"
           "observe-only; on, 1, true or managed (or unset) manage; any other value manages too\n"
           "and is warned about. RESIDENCY_TOKEN, RESIDENCY_STATE_DIR as above.\n"
           "\n"
           "Exit codes:\n"
           "  0   resident (also: observe-only and already resident; --list printed; --free-bytes\n"
           "      freed memory, perhaps less than asked; --release loaded everything back)\n"
           "  2   declined: making room would evict a protected model (LM Studio: the model\n"
           "      is not advertised; --free-bytes: nothing residency loaded can be unloaded;\n"
           "      --release: no such lease)\n"
           "  3   the load failed\n"
           "  4   observe-only (--observe, RESIDENCY, or a server that cannot load) and the\n"
           "      model is not resident: nothing was done\n"
           "  5   server unreachable: connection refused, timed out, name not resolved\n"
           "  6   not a model server: it answers, but not as a llama.cpp router, Ollama or\n"
           "      LM Studio (or its listing cannot be read)\n"
           "  7   the server asks for an API key (--token), or refused the one given\n"
           "  64  bad command line\n");
}

/* "--bogus: unknown option (see --help)" on stderr; the usage exit code. */
static int bad_usage(const char *opt, const char *why) {
    fprintf(stderr, "rsd-ensure: %s%s%s (see --help)\n", opt ? term(opt) : "", opt ? ": " : "", why);
    return EX_USAGE;
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

static int degraded_code(int result);

/* 1536 -> "1.5 KiB", 3 << 30 -> "3.0 GiB", 100 -> "100 bytes". */
static const char *human_bytes(uint64_t b, char *buf, size_t cap) {
    static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB"};
    int u = -1;
    double v = (double)b;
    while (v >= 1024.0 && u < 3) { v /= 1024.0; u++; }
    if (u < 0) snprintf(buf, cap, "%llu bytes", (unsigned long long)b);
    else snprintf(buf, cap, "%.1f %s", v, unit[u]);
    return buf;
}

/* --release ID: rsd_ensurer_lease_return_sync, one line per model back. */
static int release_cmd(rsd_ensurer *e, const rsd_ensure_req *q, const char *id, bool quiet) {
    rsd_ensure_result res;
    int n = rsd_ensurer_lease_return_sync(e, q, id, &res);
    if (n >= 0 && strncmp(id, "rsd-serve:", 10) == 0) {
        if (!quiet) printf("%s\n", term(res.message));
        return EX_RESIDENT;
    }
    if (n == RSD_ERR_ARG && strncmp(id, "rsd-serve:", 10) == 0 && !q->url) {
        if (!quiet) printf("releasing rsd-serve lease '%s' needs --url (the rsd-serve it came from)\n", term(id));
        return EX_USAGE;
    }
    if (n == RSD_ERR_NOT_FOUND || n == RSD_ERR_ARG) {
        if (!quiet) printf("no lease '%s' here (it was released, or made with another state directory)\n", term(id));
        return EX_DECLINED;
    }
    if (n == RSD_ERR_STATE && !rsd_ensurer_has_state(e)) {
        if (!quiet) printf("no state directory: leases are kept there (--state-dir)\n");
        return EX_USAGE;
    }
    if (n < 0) {
        bool observed = res.outcome == RSD_OUTCOME_OBSERVED && !res.keep_resident;
        if (!quiet) printf("release of '%s' incomplete: %s (what did not come back stays in the lease)\n", term(id),
                           observed ? "observe-only, nothing was loaded"
                           : res.message && res.message[0] ? term(res.message) : rsd_result_str(n));
        return res.outcome == RSD_OUTCOME_DEGRADED ? degraded_code(res.result) : observed ? EX_OBSERVED : EX_LOAD_FAILED;
    }
    if (!quiet) printf("released '%s': %d model(s) resident again\n", term(id), n);
    return EX_RESIDENT;
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

/* Why an ensure could not read the server, as an exit code: unreachable, not a model
   server, or an API key wanted. */
static int degraded_code(int result) {
    switch (result) {
    case RSD_ERR_CONNECT: case RSD_ERR_TIMEOUT: case RSD_ERR_RESOLVE: case RSD_ERR_CLOSED:
    case RSD_ERR_IO: case RSD_ERR_TLS: case RSD_ERR_TLS_VERIFY:
        return EX_UNREACHABLE;
    case RSD_ERR_AUTH: return EX_AUTH;
    case RSD_ERR_TLS_UNAVAILABLE: return EX_USAGE; /* an https URL, and this build has no TLS */
    default: return EX_NOT_SERVER;
    }
}

static int exit_code_of(const rsd_ensure_result *r) {
    switch (r->outcome) {
    case RSD_OUTCOME_RESIDENT: return EX_RESIDENT;
    case RSD_OUTCOME_FREED: return EX_RESIDENT;
    case RSD_OUTCOME_DECLINED: return EX_DECLINED;
    case RSD_OUTCOME_LOAD_FAILED: return EX_LOAD_FAILED;
    case RSD_OUTCOME_OBSERVED: return r->keep_resident ? EX_RESIDENT : EX_OBSERVED;
    default: return degraded_code(r->result);
    }
}

/* The line for an ensure that could not read the server: the library's message, which
   starts "server unreachable: " or "not a model server: " when the ensurer found that
   out itself; a listing that failed later is given the same first words here. */
static void print_degraded(const rsd_ensure_result *r, int code) {
    const char *m = r->message && r->message[0] ? r->message : rsd_result_str(r->result);
    const char *head = code == EX_UNREACHABLE ? "server unreachable: " : code == EX_NOT_SERVER ? "not a model server: " : "";
    bool entry = r->result == RSD_ERR_JSON_TOKENS; /* one listing entry over max_tokens */
    bool body = r->result == RSD_ERR_TOO_LARGE && strstr(m, "max_body_bytes"); /* an entry or answer over max_body_bytes */
    bool over = entry || r->result == RSD_ERR_LISTING_TRUNCATED ||
                r->result == RSD_ERR_TOO_LARGE; /* a model server whose listing is over the limits */
    if (over) head = "listing too large: ";
    if (head[0] && strncmp(m, head, strlen(head)) == 0) head = "";
    printf("%s%s\n", head, term(m));
    if (code == EX_AUTH) printf("  the API key goes in --token or $RESIDENCY_TOKEN\n");
    if (entry) printf("  --max-tokens N reads a larger listing entry\n");
    else if (body) printf("  --max-body N reads a larger listing entry or answer\n");
    else if (over) printf("  --max-models N reads a larger listing\n");
}

/* The body of a --list answer (a listing as large as the client's default limit). */
static char list_body[RSD_HTTP_DEFAULT_MAX_BODY_BYTES];

/* GET <root>path (u gets the URL) into list_body: the ensurer's client keeps small slots.
   RSD_OK (the answer in *ev) or the request's error. */
static int list_get(rsd_ensurer *e, const char *root, const char *path, const char *token, char *u, size_t cap,
                    rsd_http_event *ev) {
    rsd_http_request q;
    snprintf(u, cap, "%s%s", root, path);
    memset(&q, 0, sizeof q);
    q.url = u;
    q.bearer_token = token;
    q.total_timeout_ms = 5000;
    q.body_buf = list_body;
    q.body_cap = sizeof list_body;
    return rsd_http_request_sync(rsd_ensurer_http(e), &q, ev);
}

/* --list on LM Studio: GET <root>/api/v1/models (else /api/v0/models), print the loaded
   instances "resident: a (loaded), q:2 (loaded, instance of q)". */

static int list_lmstudio(rsd_ensurer *e, const char *url, const char *token) {
    static rsd_json_tok toks[RSD_LISTING_MAX_TOKENS];
    static rsd_lms_catalog cat;
    static const char *const paths[2] = {"/api/v1/models", "/api/v0/models"};
    char root[2048], u[2200];
    rsd_http_event ev;
    int t, i, rc = RSD_ERR_NOT_FOUND;
    if (rsd_root_url(rsd_str_c(url), root, sizeof root) < 0) return EX_USAGE;
    for (t = 0; t < 2; t++) {
        if ((rc = list_get(e, root, paths[t], token, u, sizeof u, &ev)) != RSD_OK) break;
        rc = rsd_lms_catalog_from_response(&cat, t ? RSD_LMS_TIER_V0 : RSD_LMS_TIER_V1, ev.status, ev.body.ptr,
                                           ev.body.len, toks, RSD_LISTING_MAX_TOKENS);
        if (rc >= 0 || rc == RSD_ERR_AUTH) break;
    }
    if (rc < 0) {
        printf("GET %s: %s\n", term_url(u), rc == RSD_ERR_AUTH ? "LM Studio asks for an API key (--token or $RESIDENCY_TOKEN)" : rsd_result_str(rc));
        return rc == RSD_ERR_AUTH ? EX_AUTH : degraded_code(rc);
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

/* --list on a llama.cpp router (GET <root>/v1/models) or Ollama (GET <root>/api/ps): print
   "resident: a (loaded), b (loading)". */
static int list_models(rsd_ensurer *e, const char *url, const char *token, bool ollama) {
    static rsd_json_tok toks[RSD_LISTING_MAX_TOKENS];
    static rsd_listed_model lm[RSD_LISTING_MAX_MODELS];
    static char arena[RSD_LISTING_ARENA_BYTES];
    static rsd_listing l;
    char root[2048], u[2200];
    rsd_http_event ev;
    int i, shown = 0, rc;
    if (rsd_root_url(rsd_str_c(url), root, sizeof root) < 0) return EX_USAGE;
    rc = list_get(e, root, ollama ? "/api/ps" : "/v1/models", token, u, sizeof u, &ev);
    if (rc != RSD_OK) {
        printf("server unreachable: GET %s: %s\n", term_url(u), rsd_result_str(rc));
        return EX_UNREACHABLE;
    }
    if (ev.status == 401 || ev.status == 403) {
        printf("GET %s: HTTP %d: the server asks for an API key (--token or $RESIDENCY_TOKEN)\n", term_url(u), ev.status);
        return EX_AUTH;
    }
    (void)rsd_listing_init(&l, lm, RSD_LISTING_MAX_MODELS, arena, sizeof arena);
    rc = ev.status != 200 ? RSD_ERR_HTTP_STATUS
       : ollama ? rsd_ollama_ps_listing(ev.body.ptr, ev.body.len, toks, RSD_LISTING_MAX_TOKENS, &l)
                : rsd_router_parse_models(ev.body.ptr, ev.body.len, toks, RSD_LISTING_MAX_TOKENS, &l);
    if (rc != RSD_OK) {
        if (ev.status != 200) printf("not a model server: GET %s: HTTP %d\n", term_url(u), ev.status);
        else printf("not a model server: GET %s: unreadable listing (%s)\n", term_url(u), rsd_result_str(rc));
        return EX_NOT_SERVER;
    }
    printf("resident:");
    for (i = 0; i < l.n; i++) {
        const rsd_listed_model *m = &l.models[i];
        rsd_str tags[RSD_MAX_TAGS];
        int k;
        bool pinned;
        for (k = 0; k < m->n_tags; k++) tags[k] = rsd_listed_tag(m, k);
        pinned = rsd_tags_protect(tags, m->n_tags);
        if (!rsd_model_state_resident(m->state)) continue;
        printf("%s %s (%s%s", shown ? "," : "", term_n(m->id.ptr, m->id.len), rsd_model_state_str(m->state),
               pinned ? ", pinned" : "");
        printf(")");
        shown++;
    }
    printf("%s\n", shown ? "" : " (nothing)");
    return 0;
}

/* --list: an observe-only ensure finds and recognises the server (the same probes, and
   the same words when it cannot), then the runtime's own listing is printed. */
static int list_cmd(rsd_ensurer *e, const char *url, const char *token, rsd_runtime_kind runtime) {
    rsd_ensure_req q;
    rsd_ensure_result res;
    int code;
    memset(&q, 0, sizeof q);
    q.url = url;
    q.model = "rsd-ensure--list"; /* observe-only: never loaded, only looked up */
    q.runtime = runtime;
    q.observe = true;
    q.bearer = token;
    (void)rsd_ensurer_sync(e, &q, &res);
    if (res.outcome == RSD_OUTCOME_DEGRADED) {
        code = exit_code_of(&res);
        print_degraded(&res, code);
        return code;
    }
    if (res.runtime == RSD_RUNTIME_LMSTUDIO) return list_lmstudio(e, url, token);
    return list_models(e, url, token, res.runtime == RSD_RUNTIME_OLLAMA);
}

static const char *reason_text(const rsd_ensure_result *r, bool observe_flag);

static void json_result(const rsd_ensure_result *r, const char *model, int code, bool observe_flag, uint64_t free_bytes) {
    static char buf[1 << 17];
    rsd_json_writer w;
    int i, n;
    rsd_json_w_init(&w, buf, sizeof buf);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "model");
    if (model) rsd_json_w_str(&w, model);
    else rsd_json_w_null(&w);
    if (free_bytes) {
        rsd_json_w_key(&w, "free_bytes"); rsd_json_w_int(&w, (int64_t)free_bytes);
        rsd_json_w_key(&w, "freed_bytes"); rsd_json_w_int(&w, (int64_t)r->freed_bytes);
        rsd_json_w_key(&w, "lease_id");
        if (r->lease_id && r->lease_id[0]) rsd_json_w_str(&w, r->lease_id);
        else rsd_json_w_null(&w);
    }
    if (r->kv_saved || r->kv_restored) {
        rsd_json_w_key(&w, "kv_saved"); rsd_json_w_int(&w, r->kv_saved);
        rsd_json_w_key(&w, "kv_restored"); rsd_json_w_int(&w, r->kv_restored);
    }
    rsd_json_w_key(&w, "runtime"); rsd_json_w_str(&w, rsd_runtime_kind_str(r->runtime));
    rsd_json_w_key(&w, "outcome"); rsd_json_w_str(&w, rsd_outcome_str(r->outcome));
    rsd_json_w_key(&w, "decision"); rsd_json_w_str(&w, rsd_decision_str(r->decision));
    rsd_json_w_key(&w, "reason"); rsd_json_w_str(&w, rsd_reason_name(r->reason));
    rsd_json_w_key(&w, "reason_text"); rsd_json_w_str(&w, reason_text(r, observe_flag));
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

/* The reason part of the result line: the observe-only cause in the user's words
   (--observe is the flag, not RESIDENCY). */
static const char *reason_text(const rsd_ensure_result *r, bool observe_flag) {
    static char b[160];
    if (r->reason == RSD_REASON_OBSERVE_ENV) {
        const char *v = getenv("RESIDENCY");
        if (observe_flag) return "observe-only: --observe";
        snprintf(b, sizeof b, "observe-only: RESIDENCY=%s", term(v ? v : ""));
        return b;
    }
    return rsd_reason_str(r->reason);
}

int main(int argc, char **argv) {
    static rsd_protected_model prot[RSD_MAX_PROTECTED];
    rsd_ensurer_desc d;
    rsd_ensure_req q;
    rsd_ensure_result res;
    rsd_ensurer *e;
    const char *url = NULL, *model = NULL, *token = getenv("RESIDENCY_TOKEN"), *release = NULL;
    bool json = false, list = false, quiet = false;
    char shown_stage[RSD_RECONCILE_STAGE_MAX] = "";
    int i, rc, code, n_prot = 0, seen = 0;
    char load_model[RSD_MODEL_ID_MAX] = "";
    uint64_t load_t0 = 0;
    bool loading = false, line_open = false, show, loaded_by_us = false, locked_out = false;
    uint64_t lock_t0 = 0;

    memset(&d, 0, sizeof d);
    memset(&q, 0, sizeof q);
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDV() do { if (!v) return bad_usage(a, "needs a value"); i++; } while (0)
        if (!strcmp(a, "--url")) { NEEDV(); url = v; }
        else if (!strcmp(a, "--model")) { NEEDV(); model = v; }
        else if (!strcmp(a, "--runtime")) {
            NEEDV();
            if ((rc = rsd_runtime_kind_parse(v)) < 0) return bad_usage(a, "auto, llamacpp, lmstudio or ollama");
            q.runtime = (rsd_runtime_kind)rc;
        }
        else if (!strcmp(a, "--observe")) q.observe = true;
        else if (!strcmp(a, "--protect")) {
            char *eq;
            NEEDV();
            if (n_prot >= RSD_MAX_PROTECTED) return bad_usage(a, "given too often");
            prot[n_prot].role = RSD_ROLE_NONE;
            eq = strchr(argv[i], '=');
            if (eq) {
                *eq = '\0';
                if (parse_role(eq + 1, &prot[n_prot].role) < 0)
                    return bad_usage(a, "bad role (chat, memory, worker, target-default)");
            }
            if (!argv[i][0]) return bad_usage(a, "empty model id");
            prot[n_prot].model_id = rsd_str_c(argv[i]);
            n_prot++;
        }
        else if (!strcmp(a, "--context")) { NEEDV(); if (parse_u32(v, &q.context_length)) return bad_usage(a, "not a number"); }
        else if (!strcmp(a, "--timeout-ms")) { NEEDV(); if (parse_u32(v, &q.timeout_ms)) return bad_usage(a, "not a number"); }
        else if (!strcmp(a, "--state-dir")) { NEEDV(); d.state_dir = v; }
        else if (!strcmp(a, "--max-models")) {
            uint32_t n;
            NEEDV();
            if (parse_u32(v, &n) || n < 1 || n > 1048576) return bad_usage(a, "a number of models, 1 to 1048576");
            d.limits.max_models = (int)n;
        }
        else if (!strcmp(a, "--max-tokens")) {
            uint32_t n;
            NEEDV();
            if (parse_u32(v, &n) || n < 64 || n > 16777216) return bad_usage(a, "a number of tokens, 64 to 16777216");
            d.limits.max_tokens = n;
        }
        else if (!strcmp(a, "--max-body")) {
            uint32_t n;
            NEEDV();
            if (parse_u32(v, &n) || n < 1024 || n > 0x7FFFFFFFu) return bad_usage(a, "a number of bytes, 1024 to 2147483647");
            d.limits.max_body_bytes = n;
        }
        else if (!strcmp(a, "--no-state")) d.no_state = true;
        else if (!strcmp(a, "--kv-slots")) d.kv_slots = true;
        else if (!strcmp(a, "--token")) { NEEDV(); token = v; }
        else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--quiet")) quiet = true;
        else if (!strcmp(a, "--verbose")) g_verbose = 1;
        else if (!strcmp(a, "--list")) list = true;
        else if (!strcmp(a, "--free-bytes")) { NEEDV(); if (!rapp_parse_size(v, strlen(v), UINT64_MAX, &q.free_bytes) || !q.free_bytes) return bad_usage(a, "not a byte count (N, or N with K, M, G or T)"); }
        else if (!strcmp(a, "--release")) { NEEDV(); release = v; }
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { help(); return 0; }
        else if (!strcmp(a, "--version")) { printf("rsd-ensure (residency.h) %s\n", RSD_VERSION_STRING); return 0; }
        else return bad_usage(a, "unknown option");
#undef NEEDV
    }
    if (!url && !release) return bad_usage("--url", "required");
    if (!list && !model && !q.free_bytes && !release) return bad_usage("--model", "required (or --list, --free-bytes, --release)");
    if ((model ? 1 : 0) + (q.free_bytes ? 1 : 0) + (release ? 1 : 0) + (list ? 1 : 0) > 1)
        return bad_usage(NULL, "one of --model, --list, --free-bytes and --release");
    d.protected_models = prot;
    d.n_protected = n_prot;
    d.no_state = d.no_state || list;
    if (g_verbose) d.logger.fn = log_stderr;
    e = rsd_ensurer_create(&d);
    if (!e && getenv("RESIDENCY_COORD") && getenv("RESIDENCY_COORD")[0]) {
        char root[320], prefix[160];
        if (rsd_etcd_parse_url(getenv("RESIDENCY_COORD"), root, sizeof root, prefix, sizeof prefix) != RSD_OK) {
            fprintf(stderr, "rsd-ensure: bad RESIDENCY_COORD '%s' (etcd://host:2379[/prefix])\n",
                    term(getenv("RESIDENCY_COORD")));
            return EX_USAGE;
        }
    }
    if (!e) { fprintf(stderr, "rsd-ensure: cannot create the ensurer\n"); return EX_FAIL; }
    if (list) {
        code = list_cmd(e, url, token && *token ? token : NULL, q.runtime);
        rsd_ensurer_destroy(e);
        return code;
    }
    if (release) {
        q.url = url;
        q.bearer = token && *token ? token : NULL;
        code = release_cmd(e, &q, release, quiet || json);
        rsd_ensurer_destroy(e);
        return code;
    }
    q.url = url;
    q.model = model;
    q.bearer = token && *token ? token : NULL;
    (void)rsd_ensurer_resolve_sync(e, url);
    rc = rsd_ensurer_begin(e, &q, rsd_now_ms());
    if (rc == RSD_ERR_ARG || rc == RSD_ERR_URL || rc == RSD_ERR_MODEL_ID) {
        rsd_ensurer_query(e, &res);
        code = bad_usage(rc == RSD_ERR_URL ? "--url" : rc == RSD_ERR_MODEL_ID ? "--model" : NULL, term(res.message));
        rsd_ensurer_destroy(e);
        return code;
    }
    for (;;) {
        rsd_pollfd fds[16];
        const rsd_reconcile_notice *nt;
        uint64_t now = rsd_now_ms(), dl;
        int n, timeout;
        rc = rsd_ensurer_step(e, now) == 0 ? RSD_PENDING : RSD_OK; /* 1: it has ended (query below) */
        n = rsd_ensurer_notices(e, &nt);
        rsd_ensurer_query(e, &res);
        show = !json && !quiet;
        /* the stage a router's /models/sse gives for the load waited for, when it changes */
        if (loading && line_open && show && res.load_stage[0] && strcmp(res.load_stage, shown_stage) != 0) {
            printf(" [%s]", term(res.load_stage));
            snprintf(shown_stage, sizeof shown_stage, "%s", res.load_stage);
        }
        /* a load (or a wait on one) ends when the ensure moves on to anything but polling
           for it (a listing request naming the model is a poll) */
        if (loading && (rc != RSD_PENDING || !(res.op == RSD_OP_LIST || res.op == RSD_OP_POLL || res.op == RSD_OP_LOAD) ||
                        strcmp(res.op_model, load_model) != 0)) {
            if (show) {
                if (!line_open) printf("%s '%s' ...", loaded_by_us ? "loading" : "waiting for", term(load_model));
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
        /* the target lock is held by another ensure (another rsd-ensure changing this server) */
        if (locked_out && !res.lock_waiting) {
            if (show) {
                if (!line_open) printf("waiting for the residency lock ...");
                printf(" %llu ms\n", (unsigned long long)(now - lock_t0));
            }
            locked_out = line_open = false;
        }
        if (!locked_out && !loading && rc == RSD_PENDING && res.lock_waiting) {
            locked_out = true;
            lock_t0 = now;
            if (show) {
                if (line_open) printf("\n");
                printf("waiting for the residency lock (another ensure is changing this server) ...");
                line_open = true;
            }
        }
        /* our load, or a poll for the keep before any load of ours: someone else is loading it */
        if (!loading && rc == RSD_PENDING &&
            (res.op == RSD_OP_LOAD || ((res.op == RSD_OP_LIST || res.op == RSD_OP_POLL) && !loaded_by_us && model &&
                                       strcmp(res.op_model, model ? model : "") == 0))) {
            snprintf(load_model, sizeof load_model, "%s", res.op_model);
            shown_stage[0] = '\0';
            load_t0 = now;
            loading = true;
            loaded_by_us = res.op == RSD_OP_LOAD;
            if (show) {
                if (loaded_by_us) printf("loading '%s' ...", term(load_model));
                else printf("waiting for '%s' (being loaded by someone else) ...", term(load_model));
                line_open = true;
            }
        }
        fflush(stdout);
        if (rc != RSD_PENDING) break;
        n = rsd_ensurer_pollfds(e, fds, 16);
        if (n > 16) n = 16;
        dl = rsd_ensurer_next_deadline(e);
        now = rsd_now_ms();
        if (dl == RSD_NO_DEADLINE) timeout = n ? 1000 : 10;
        else timeout = dl <= now ? 0 : dl - now > 1000 ? 1000 : (int)(dl - now);
        if (g_verbose)
            fprintf(stderr, "rsd-ensure: %llu step op=%s model=%s requests=%u fds=%d timeout=%d\n",
                    (unsigned long long)(now % 1000000u), rsd_http_op_str(res.op), term(res.op_model),
                    (unsigned)res.requests, n, timeout);
        if (timeout > 0 && rsd_poll(fds, n, timeout) < 0 && errno != EINTR) break;
    }
    rsd_ensurer_query(e, &res);
    code = exit_code_of(&res);
    if (json) {
        json_result(&res, model, code, q.observe, q.free_bytes);
    } else if (!quiet && res.outcome == RSD_OUTCOME_DEGRADED) {
        print_degraded(&res, code);
    } else if (!quiet && q.free_bytes) { /* --free-bytes */
        char got[32], asked[32];
        printf("%s: %s of the %s asked on %s (%s: %s), %llu ms\n", rsd_outcome_str(res.outcome),
               human_bytes(res.freed_bytes, got, sizeof got), human_bytes(q.free_bytes, asked, sizeof asked), term_url(url),
               rsd_decision_str(res.decision), reason_text(&res, q.observe), (unsigned long long)res.elapsed_ms);
        for (i = 0; i < res.n_evicted; i++)
            if (!res.evicted[i].displaced) printf("  unloaded '%s'\n", term(res.evicted[i].id));
        if (res.lease_id && strncmp(res.lease_id, "rsd-serve:", 10) == 0) /* rsd-serve's own lease */
            printf("  lease %s: rsd-ensure --release %s --url %s gives it back (or its ttl, 10 min)\n",
                   res.lease_id, res.lease_id, term_url(url));
        else if (res.lease_id && res.lease_id[0])
            printf("  lease %s: rsd-ensure --release %s loads them back\n", res.lease_id, res.lease_id);
        else if (res.n_evicted)
            printf("  no state directory: nothing recorded to load back\n");
    } else if (!quiet) {
        printf("%s: '%s' on %s%s (%s: %s), %llu ms, %u requests%s\n", rsd_outcome_str(res.outcome), term(model),
               term_url(url), res.outcome == RSD_OUTCOME_OBSERVED ? (res.keep_resident ? ", resident" : ", not resident") : "",
               rsd_decision_str(res.decision), reason_text(&res, q.observe), (unsigned long long)res.elapsed_ms,
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
