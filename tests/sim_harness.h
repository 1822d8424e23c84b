/* sim_harness.h -- the loopback tests' side of build/bin/rsd-sim: start it on port
   0 (its first stdout line names the port; see listen_proc.h), GET from it, and read its
   own request log (GET /_sim/log) so tests count requests instead of timing them.
   Define before including: SIM_BIN (the program) and SIM_RUNTIME ("router",
   "lmstudio", ...); optionally LOG_MAX (entries kept, default 2048). A test file runs
   its router tests once per router generation by setting g_router_gen ("july",
   "later"; NULL = rsd-sim's default): sim_start passes it as --router-gen. */
#ifndef RSD_TESTS_SIM_HARNESS_H
#define RSD_TESTS_SIM_HARNESS_H
#include "listen_proc.h"
#include "http_req.h"

typedef listen_proc sim_proc;

static const char *g_router_gen; /* --router-gen for every sim_start; NULL = none */
static const char *const g_router_gens[] = {"july", "later"};

/* Starts rsd-sim --runtime SIM_RUNTIME --port 0 plus args (NULL-terminated). */
static int sim_start(sim_proc *s, const char *const *args) {
    const char *argv[64];
    int n = 0, i;
    argv[n++] = SIM_BIN;
    argv[n++] = "--runtime";
    argv[n++] = SIM_RUNTIME;
    argv[n++] = "--port";
    argv[n++] = "0";
    if (g_router_gen) {
        argv[n++] = "--router-gen";
        argv[n++] = g_router_gen;
    }
    for (i = 0; args[i] && n < 62; i++) argv[n++] = args[i];
    argv[n] = NULL;
    return listen_proc_start(s, argv, -1);
}

static void sim_stop(sim_proc *s) { (void)listen_proc_stop(s); }

/* For a test's main (portable.h included): return 1 with the suite's "0 passed, 1 failed"
   line when SIM_BIN is not built. */
#define SIM_REQUIRE_BUILT()                                                  \
    do {                                                                     \
        if (!tp_runnable(SIM_BIN)) {                                         \
            printf("%s missing: run make apps first\n", SIM_BIN);        \
            printf("0 passed, 1 failed\n");                                  \
            return 1;                                                        \
        }                                                                    \
    } while (0)
/* One GET on the simulator with a fresh client; the body into buf (NUL-terminated,
   truncated to cap - 1). The status, or -1. */
static int sim_get(const sim_proc *s, const char *path, const char *bearer, char *buf, size_t cap) {
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_request q;
    char url[160];
    int status;
    if (!c) return -1;
    snprintf(url, sizeof url, "%s%s", s->url, path);
    memset(&q, 0, sizeof q);
    q.url = url;
    q.bearer_token = bearer;
    status = http_sync_into(c, &q, buf, cap);
    rsd_http_client_destroy(c);
    return status;
}

/* ---- the simulator's request log -------------------------------------------------- */
#ifndef LOG_MAX
#define LOG_MAX 2048
#endif
typedef struct log_entry {
    char method[8], path[64], model[96];
    int status;
    int64_t t_ms;
} log_entry;
static log_entry g_log[LOG_MAX];
static rsd_json_tok g_toks[LOG_MAX * 14 + 16];

/* Reads the whole log into g_log; returns the entry count or -1. */
static int sim_log(const sim_proc *s) {
    static char body[1 << 20];
    rsd_json_doc doc;
    int n = -1, arr, i, count;
    if (sim_get(s, "/_sim/log", NULL, body, sizeof body) != 200) return -1;
    if (rsd_json_parse(&doc, body, strlen(body), g_toks, (uint32_t)(sizeof g_toks / sizeof g_toks[0])) > 0 &&
        (arr = rsd_json_find(&doc, 0, "entries")) >= 0) {
        count = rsd_json_size(&doc, arr);
        for (i = 0; i < count && i < LOG_MAX; i++) {
            int o = rsd_json_at(&doc, arr, (uint32_t)i), v;
            int64_t x = 0;
            log_entry *e = &g_log[i];
            memset(e, 0, sizeof *e);
            if ((v = rsd_json_find(&doc, o, "method")) >= 0) rsd_json_str(&doc, v, e->method, sizeof e->method, NULL);
            if ((v = rsd_json_find(&doc, o, "path")) >= 0) rsd_json_str(&doc, v, e->path, sizeof e->path, NULL);
            if ((v = rsd_json_find(&doc, o, "model")) >= 0) rsd_json_str(&doc, v, e->model, sizeof e->model, NULL);
            if ((v = rsd_json_find(&doc, o, "status")) >= 0 && rsd_json_int64(&doc, v, &x) == RSD_OK) e->status = (int)x;
            if ((v = rsd_json_find(&doc, o, "t_ms")) >= 0 && rsd_json_int64(&doc, v, &x) == RSD_OK) e->t_ms = x;
        }
        n = i;
    }
    return n;
}

/* Count entries in [from, n) matching method/path/model (NULL = any). */
static int log_count(int from, int n, const char *method, const char *path, const char *model) {
    int i, k = 0;
    for (i = from; i < n; i++)
        if ((!method || !strcmp(g_log[i].method, method)) && (!path || !strcmp(g_log[i].path, path)) &&
            (!model || !strcmp(g_log[i].model, model)))
            k++;
    return k;
}
#endif
