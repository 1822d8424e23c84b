/* rsd-serve -- several llama-server models behind one port, kept resident by rsd_fleet.

       rsd-serve --config serve.ini
       rsd-serve --listen 127.0.0.1:8080 --max-models 2 \
                 --model chat=/models/chat.gguf --ctx 8192 --pinned \
                 --model coder=/models/coder.gguf --ttl 300

   Configuration: see examples/rsd_serve.h (INI file, flags). `--check` prints the
   configuration as INI and exits 0 (64 when it is bad).

   Endpoints
     OpenAI:  GET /v1/models; POST /v1/chat/completions, /v1/completions,
              /v1/embeddings (and every other POST, as the llama.cpp router does; and
              GETs with ?model=X such as /props?model=X, /slots?model=X) are
              routed by the body's "model" (id or alias) to that model's llama-server,
              started on demand; the least-recently-used idle one is stopped to make
              room (by count and by bytes), a busy one never. The client's
              Authorization header goes along (a model run with --api-key checks
              it). Streaming (SSE) answers
              are passed through as they arrive, chunk by chunk, never buffered whole.
              Unknown model: 404 {"error":{"message":..,"type":"invalid_request_error",
              "param":"model","code":"model_not_found"}}; no "model": 400.
     Router (llama.cpp router mode, so rsd-ensure and router clients can manage it):
              GET /models (= /v1/models: data[] with id, aliases, status.value
              loaded|loading|unloaded, status.args with the values of secret flags
              such as --api-key as ***, failed/exit_code), POST /models/load
              and /models/unload {"model": id}, GET /props {"role":"router",
              "max_instances": max_models, ...}.
     Other:   GET /health (200 {"status":"ok"}), GET /status (= /_rsd/status): every
              model with state, pid, port, in-flight, waiting, reservation, last use,
              ttl, pin, last error, retry_in_ms (backoff); pool counters (evictions,
              backoffs, restores, ...).
   Failures: a client that disconnects releases its place at once; a client that reads
   nothing of its answer for send_timeout (default 30 s; 1 s once its model must make
   room for a request waiting past max_wait, or is unloaded) is disconnected and its
   request cancelled, so it cannot hold a model busy; an upstream hang-up
   or connect failure fails only that request (502, error JSON; after the answer began:
   the connection is cut); a model whose process cannot start fails its waiting
   requests at once with the reason (503, the fleet's message: errno, exit status and
   the last output lines). What can be checked before a start (the binary, the model
   file, the command template) is checked before another model is stopped for it; a
   model evicted for a start that then fails is started again; after a failed start the
   model is not tried again for 1 s, doubling to 60 s per failure in a row: requests
   meanwhile get 503 with the last reason and Retry-After (POST /models/load tries at
   once). An idle upstream connection is dropped before the child's own keep-alive
   timeout, and a request the child closed the socket on before answering is resent
   once. A child is sent at most its own slot count of requests at once (`parallel`,
   or what its GET /props says: llama-server's total_slots); the rest wait here, in
   order, not in the child's accept queue.
   Log (stderr): one line per process event ("rsd-serve: chat: starting pid 123 port
   40211", "... ready", "... stopping (evict)", "... exited"), requests with --verbose.
   Every line is one line: control bytes in it (a child's output quoted in a failure,
   newlines included) are written as \n, \x1b, ... (rsd_text_escape).
   Signals: SIGINT, SIGTERM and SIGQUIT stop every process gracefully (SIGTERM, then
   SIGKILL after stop_grace) and exit 0; a second one kills them at once and exits 1.
   Each model's process leads its own process group, and every signal goes to the
   group, so a wrapper (command = /bin/sh -c "...") takes its children with it; a
   model counts as stopped only once its whole group is gone. On Linux rsd-serve is a
   child subreaper: a wrapper's orphaned children are re-parented to it and reaped.
   After kill -9 of rsd-serve (nothing runs then) the kernel kills only the direct
   children (PR_SET_PDEATHSIG): llama-server itself, or a wrapper, whose own children
   survive. So write wrappers as `/bin/sh -c "exec llama-server ..."`: exec makes the
   server the direct child and it dies with rsd-serve.
   SIGHUP (a closed terminal, an ssh logout) is logged and otherwise ignored: the
   processes keep running and nothing is reloaded. SIGPIPE is ignored.
   Exit codes: 0 stopped by a signal, 1 cannot listen or start, 64 bad flags or
   configuration (the message names file:line), 66 the config file cannot be read. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include "rsd_serve.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

enum {
    EX_OK = 0, EX_FAIL = 1, EX_USAGE = 64, EX_NOINPUT = 66,
    SRV_MAX_CONNS = 64,                  /* downstream connections (= jobs) */
    SRV_MAX_BODY = 1 << 20,              /* request body limit (413 over it) */
    SRV_RESPONSE_BYTES = 256 << 10,      /* per-connection send buffer */
    SRV_UP_READ = 64 << 10,              /* upstream client slot buffer: at most this many
                                            body bytes per on_body call */
    SRV_STASH = SRV_UP_READ,             /* the part of one upstream piece the client's send
                                            buffer could not take; the upstream is paused
                                            until it is out (rsd_http_pause stops the read
                                            loop at once, so one piece is the most) */
    SRV_OUT = 256 << 10,                 /* JSON answers we write ourselves */
    SRV_MAX_FDS = 2 * SRV_MAX_CONNS + 3 * RSD_PROCS_MAX + 64,
    SRV_UPSTREAM_TIMEOUT_MS = 3600000,   /* a proxied request (llama-server's -to default) */
    SRV_STALL_DRAIN_MS = 1000,           /* a stalled client of a model that must make room */
    SRV_CONFIG_MAX = 4 << 20             /* config file size */
};

/* The only globals: counted by the signal handlers, which also write a byte to the
   self-pipe so the loop's poll wakes at once (the work is done in the loop). */
static volatile sig_atomic_t g_signals; /* SIGINT, SIGTERM, SIGQUIT: stop */
static volatile sig_atomic_t g_hangups; /* SIGHUP: reload the configuration */
static int g_wake_fd = -1;              /* the self-pipe's write end */

static void on_signal(int sig) {
    int e = errno;
    if (sig == SIGHUP) g_hangups++;
    else g_signals++;
    if (g_wake_fd >= 0) { ssize_t w = write(g_wake_fd, "", 1); (void)w; }
    errno = e;
}

/* ---- per-model command ------------------------------------------------------------ */
typedef struct srv_model {
    char cmd_buf[RSRV_CMD_MAX];
    const char *cmd_argv[RSRV_MAX_ARGS + 1];
    char env_buf[RSRV_CMD_MAX];
    const char *env[RSRV_MAX_ENV + 2];   /* the model's NAME=VALUE, then the hygiene entry */
    char extra_buf[2 * RSRV_CMD_MAX];
    const char *extra_argv[2 * RSRV_MAX_ARGS + 1];
    rsd_proc_spec spec;
    rsd_fleet_model_desc desc;
} srv_model;

/* ---- one downstream request ------------------------------------------------------ */
typedef enum job_state { JOB_FREE = 0, JOB_WAIT, JOB_PROXY, JOB_DRAIN } job_state;

typedef struct job {
    job_state state;
    struct srv *srv;
    rsd_http_sreq_h sreq;
    int model;
    rsd_pool_req preq;
    bool granted;          /* holds an in-flight place: release or cancel once */
    rsd_http_req_h up;
    bool up_active;        /* the upstream request's event is still to come */
    uint16_t port;
    bool begun;            /* the answer's head went out */
    bool client_gone;
    bool broken;           /* the answer cannot be completed: cut the connection */
    bool up_done;          /* upstream finished OK; end the answer once the stash is out */
    bool paused;           /* upstream reading paused until the stash is out */
    char *stash;
    size_t stash_len;
    uint64_t t0;
    uint64_t stall_since;  /* the stash waits and the client has taken nothing since (0 = not) */
    uint64_t seq;          /* arrival order (queue positions) */
    int queue_pos;         /* its place in its model's queue when it joined (1 = first); 0 = never waited */
    char method[8];
    char path[96];
} job;

typedef struct srv {
    rsrv_config *cfg;
    rsrv_opts opts;
    srv_model *models;
    rsd_http_server *hs;
    rsd_http_client *hc;
    rsd_fleet *fleet;
    job jobs[SRV_MAX_CONNS];
    char *out;
    bool stopping;
    uint64_t now;          /* the loop's clock (for the client's callbacks) */
    uint64_t stop_at;
    char listen_addr[RSRV_HOST_MAX]; /* the listen host, resolved (numeric) */
    uint64_t job_seq;
    uint64_t queue_full;   /* requests refused with 429 (max_queue) */
    int argc;              /* the command line (flags are applied again on a reload) */
    char **argv;
    bool restart[RSRV_MAX_MODELS]; /* changed by a reload while running: load once it stopped */
    uint64_t reloads, reload_failures;
} srv;

static void status_queue(srv *s, rsd_json_writer *w, int m, uint64_t now);
static void answer_reload(srv *s, const rsd_http_server_event *ev, uint64_t now);
static bool model_running(srv *s, int m, uint64_t now);

static void logf_(const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* One log line: "rsd-serve: " and the text with its control bytes made visible
   (rsd_text_escape), so a child's output lines (quoted in failure messages), a
   client's path or an odd id stay on one line and send nothing to a terminal. */
static void log_line(const char *text) {
    static char esc[4 * 4096 + 1];
    (void)rsd_text_escape(rsd_str_c(text), esc, sizeof esc);
    fprintf(stderr, "rsd-serve: %s\n", esc);
    fflush(stderr);
}

static void logf_(const char *fmt, ...) {
    char text[4096];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    log_line(text);
}

static void lib_log(void *user, int level, uint32_t item, const char *msg, const char *where) {
    (void)user;
    (void)where;
    logf_("log %d [%s] %s", level, rsd_log_item_name(item), msg ? msg : "");
}

/* ---- answers we write ourselves ----------------------------------------------------- */
/* retry_after_s > 0 adds "Retry-After: N". */
static void respond_json_retry(srv *s, rsd_http_sreq_h h, int status, const char *body, size_t n,
                               uint32_t retry_after_s) {
    rsd_http_header hd[2];
    char ra[16];
    hd[0].name = rsd_str_c("Content-Type");
    hd[0].value = rsd_str_c("application/json; charset=utf-8");
    snprintf(ra, sizeof ra, "%u", (unsigned)retry_after_s);
    hd[1].name = rsd_str_c("Retry-After");
    hd[1].value = rsd_str_c(ra);
    (void)rsd_http_respond(s->hs, h, status, hd, retry_after_s ? 2 : 1, body, n);
}

static void respond_json(srv *s, rsd_http_sreq_h h, int status, const char *body, size_t n) {
    respond_json_retry(s, h, status, body, n, 0);
}

/* {"error":{"code":C,"message":M,"type":T}} (llama.cpp's envelope, wire.md 1.13), with
   Retry-After when retry_after_s > 0. */
static void respond_error_retry(srv *s, rsd_http_sreq_h h, int status, const char *type, const char *msg,
                                uint32_t retry_after_s) {
    rsd_json_writer w;
    int n;
    rsd_json_w_init(&w, s->out, SRV_OUT);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "error");
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "code");
    rsd_json_w_int(&w, status);
    rsd_json_w_key(&w, "message");
    rsd_json_w_str(&w, msg);
    rsd_json_w_key(&w, "type");
    rsd_json_w_str(&w, type);
    rsd_json_w_end_object(&w);
    rsd_json_w_end_object(&w);
    n = rsd_json_w_finish(&w);
    if (n < 0) { /* a message that is not UTF-8 (child output): say less */
        respond_error_retry(s, h, status, type, "error (message not printable)", retry_after_s);
        return;
    }
    respond_json_retry(s, h, status, s->out, (size_t)n, retry_after_s);
}

static void respond_error(srv *s, rsd_http_sreq_h h, int status, const char *type, const char *msg) {
    respond_error_retry(s, h, status, type, msg, 0);
}

/* 503 for model m that cannot start now: why (the fleet's last reason when NULL), and
   Retry-After while its next start is backed off. */
static void respond_unavailable(srv *s, rsd_http_sreq_h h, int m, uint64_t now, const char *why) {
    rsd_fleet_model_info mi;
    char msg[RSD_FLEET_MESSAGE_MAX + 192];
    uint32_t retry = 0;
    memset(&mi, 0, sizeof mi);
    (void)rsd_fleet_query_model(s->fleet, m, now, &mi);
    if (mi.retry_at_ms > now) retry = (uint32_t)((mi.retry_at_ms - now + 999) / 1000);
    if (!why) why = mi.last_error ? mi.last_error : "model process failed to start";
    if (retry)
        snprintf(msg, sizeof msg, "cannot serve '%s': %s (its start failed; not retried for %u s)",
                 s->cfg->models[m].id, why, (unsigned)retry);
    else
        snprintf(msg, sizeof msg, "cannot serve '%s': %s", s->cfg->models[m].id, why);
    respond_error_retry(s, h, 503, "unavailable_error", msg, retry);
}

static void respond_404(srv *s, rsd_http_sreq_h h) {
    static const char body[] = "{\"error\":{\"message\":\"File Not Found\",\"type\":\"not_found_error\",\"code\":404}}";
    respond_json(s, h, 404, body, sizeof body - 1);
}

static void respond_unknown_model(srv *s, rsd_http_sreq_h h, const char *name) {
    rsd_json_writer w;
    char msg[RSRV_ID_MAX + 64];
    int n;
    snprintf(msg, sizeof msg, "The model '%s' does not exist", name);
    rsd_json_w_init(&w, s->out, SRV_OUT);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "error");
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "message");
    rsd_json_w_str(&w, msg);
    rsd_json_w_key(&w, "type");
    rsd_json_w_str(&w, "invalid_request_error");
    rsd_json_w_key(&w, "param");
    rsd_json_w_str(&w, "model");
    rsd_json_w_key(&w, "code");
    rsd_json_w_str(&w, "model_not_found");
    rsd_json_w_end_object(&w);
    rsd_json_w_end_object(&w);
    n = rsd_json_w_finish(&w);
    if (n < 0) respond_404(s, h);
    else respond_json(s, h, 404, s->out, (size_t)n);
}

/* Router-style state of a model (wire.md 1.4). */
static const char *router_state(const rsd_fleet_model_info *mi) {
    switch (mi->pool.state) {
    case RSD_POOL_SLOT_STARTING: return "loading";
    case RSD_POOL_SLOT_READY:
    case RSD_POOL_SLOT_DRAINING: return "loaded";
    case RSD_POOL_SLOT_EMPTY: return mi->pool.waiting ? "loading" : "unloaded";
    default: return "unloaded"; /* STOPPING, FAILED */
    }
}

/* GET /models, /v1/models: the router's listing. */
static void answer_models(srv *s, rsd_http_sreq_h h, uint64_t now) {
    rsd_json_writer w;
    int i, k, n;
    rsd_json_w_init(&w, s->out, SRV_OUT);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "object");
    rsd_json_w_str(&w, "list");
    rsd_json_w_key(&w, "data");
    rsd_json_w_begin_array(&w);
    for (i = 0; i < s->cfg->nmodels; i++) {
        const rsrv_model *m = &s->cfg->models[i];
        rsd_fleet_model_info mi;
        char buf[RSD_PROC_ARG_BYTES_DEFAULT], arg[RSD_PROC_ARG_BYTES_DEFAULT + 64];
        if (m->retired) continue; /* removed by a reload */
        const char *argv[RSD_PROC_MAX_ARGS];
        rsd_proc_spec spec;
        int argc;
        memset(&mi, 0, sizeof mi);
        (void)rsd_fleet_query_model(s->fleet, i, now, &mi);
        rsd_json_w_begin_object(&w);
        rsd_json_w_key(&w, "id");
        rsd_json_w_str(&w, m->id);
        rsd_json_w_key(&w, "aliases");
        rsd_json_w_begin_array(&w);
        for (k = 0; k < m->naliases; k++) rsd_json_w_str(&w, m->aliases[k]);
        rsd_json_w_end_array(&w);
        rsd_json_w_key(&w, "tags");
        rsd_json_w_begin_array(&w);
        if (m->pinned) rsd_json_w_str(&w, "pinned:true"); /* protected for rsd-ensure (R8) */
        rsd_json_w_end_array(&w);
        rsd_json_w_key(&w, "object");
        rsd_json_w_str(&w, "model");
        rsd_json_w_key(&w, "owned_by");
        rsd_json_w_str(&w, "llamacpp");
        rsd_json_w_key(&w, "created");
        rsd_json_w_int(&w, (int64_t)time(NULL));
        rsd_json_w_key(&w, "status");
        rsd_json_w_begin_object(&w);
        rsd_json_w_key(&w, "value");
        rsd_json_w_str(&w, router_state(&mi));
        rsd_json_w_key(&w, "args");
        rsd_json_w_begin_array(&w);
        spec = s->models[i].spec;
        spec.port = mi.port;
        argc = rsd_procs_expand(&spec, buf, sizeof buf, argv, RSD_PROC_MAX_ARGS);
        for (k = 0; k < argc; k++) { /* secret values as *** */
            (void)rsd_arg_redact(k ? argv[k - 1] : NULL, argv[k], arg, sizeof arg);
            rsd_json_w_str(&w, arg);
        }
        rsd_json_w_end_array(&w);
        if (mi.last_result < 0 && !strcmp(router_state(&mi), "unloaded")) {
            rsd_json_w_key(&w, "failed");
            rsd_json_w_bool(&w, true);
            rsd_json_w_key(&w, "exit_code"); /* its own; 128+N for signal N; 127 never ran */
            rsd_json_w_int(&w, mi.exit_code);
        }
        rsd_json_w_end_object(&w);
        rsd_json_w_end_object(&w);
    }
    rsd_json_w_end_array(&w);
    rsd_json_w_end_object(&w);
    n = rsd_json_w_finish(&w);
    if (n < 0) respond_error(s, h, 500, "server_error", "listing too large");
    else respond_json(s, h, 200, s->out, (size_t)n);
}

/* GET /props: the router's properties (wire.md 1.9). */
static void answer_props(srv *s, rsd_http_sreq_h h) {
    char body[512];
    int n = snprintf(body, sizeof body,
                     "{\"role\":\"router\",\"max_instances\":%d,\"models_autoload\":true,\"model_alias\":\"rsd-serve\","
                     "\"model_path\":\"none\",\"default_generation_settings\":{\"params\":null,\"n_ctx\":0},"
                     "\"ui_settings\":{},\"build_info\":\"rsd-serve\",\"cors_proxy_enabled\":false}",
                     s->cfg->max_models);
    respond_json(s, h, 200, body, (size_t)n);
}

/* GET /status: every model and the pool's counters. */
static void answer_status(srv *s, rsd_http_sreq_h h, uint64_t now) {
    rsd_json_writer w;
    rsd_pool_stats *st = (rsd_pool_stats *)calloc(1, sizeof *st);
    int i, n;
    if (!st) { respond_error(s, h, 500, "server_error", "out of memory"); return; }
    rsd_pool_query_stats(rsd_fleet_pool(s->fleet), st);
    rsd_json_w_init(&w, s->out, SRV_OUT);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "max_models");
    rsd_json_w_int(&w, s->cfg->max_models);
    rsd_json_w_key(&w, "vram_budget_bytes");
    rsd_json_w_int(&w, (int64_t)s->cfg->vram_budget_bytes);
    rsd_json_w_key(&w, "reserved_bytes");
    rsd_json_w_int(&w, (int64_t)st->reserved_bytes);
    rsd_json_w_key(&w, "live");
    rsd_json_w_int(&w, st->live_slots);
    rsd_json_w_key(&w, "running");
    rsd_json_w_int(&w, st->running);
    rsd_json_w_key(&w, "waiting");
    rsd_json_w_int(&w, st->waiting);
    rsd_json_w_key(&w, "stopping");
    rsd_json_w_bool(&w, s->stopping);
    rsd_json_w_key(&w, "max_queue");
    rsd_json_w_int(&w, rsrv_eff_max_queue(s->cfg));
    rsd_json_w_key(&w, "queue_full"); /* requests refused with 429 */
    rsd_json_w_int(&w, (int64_t)s->queue_full);
    rsd_json_w_key(&w, "counters");
    rsd_json_w_begin_object(&w);
#define SRV_COUNTER(name) rsd_json_w_key(&w, #name); rsd_json_w_int(&w, (int64_t)st->name);
    SRV_COUNTER(acquires) SRV_COUNTER(grants_immediate) SRV_COUNTER(grants_queued) SRV_COUNTER(cancels)
    SRV_COUNTER(releases) SRV_COUNTER(spawns) SRV_COUNTER(readies) SRV_COUNTER(load_failures)
    SRV_COUNTER(crashes) SRV_COUNTER(exits) SRV_COUNTER(evictions) SRV_COUNTER(ttl_expiries)
    SRV_COUNTER(unloads) SRV_COUNTER(fails) SRV_COUNTER(starve_drains) SRV_COUNTER(no_fit)
    SRV_COUNTER(backoffs) SRV_COUNTER(restores)
#undef SRV_COUNTER
    rsd_json_w_end_object(&w);
    rsd_json_w_key(&w, "models");
    rsd_json_w_begin_array(&w);
    for (i = 0; i < s->cfg->nmodels; i++) {
        const rsrv_model *m = &s->cfg->models[i];
        rsd_fleet_model_info mi;
        if (m->retired && !model_running(s, i, now)) continue; /* removed by a reload, gone */
        memset(&mi, 0, sizeof mi);
        (void)rsd_fleet_query_model(s->fleet, i, now, &mi);
        rsd_json_w_begin_object(&w);
        rsd_json_w_key(&w, "id");
        rsd_json_w_str(&w, m->id);
        if (m->retired) { /* still draining after a reload removed it */
            rsd_json_w_key(&w, "removed");
            rsd_json_w_bool(&w, true);
        }
        rsd_json_w_key(&w, "state");
        rsd_json_w_str(&w, mi.pool.slot >= 0 ? rsd_pool_slot_state_name(mi.pool.state) : "unloaded");
        rsd_json_w_key(&w, "pid");
        rsd_json_w_int(&w, mi.pid);
        rsd_json_w_key(&w, "port");
        rsd_json_w_int(&w, mi.port);
        rsd_json_w_key(&w, "in_flight");
        rsd_json_w_int(&w, mi.pool.running);
        rsd_json_w_key(&w, "waiting");
        rsd_json_w_int(&w, mi.pool.waiting);
        rsd_json_w_key(&w, "reserve_bytes");
        rsd_json_w_int(&w, (int64_t)mi.pool.reserve_bytes);
        rsd_json_w_key(&w, "pinned");
        rsd_json_w_bool(&w, mi.pool.pinned);
        rsd_json_w_key(&w, "ttl_s");
        rsd_json_w_double(&w, mi.pool.ttl_ms / 1000.0);
        rsd_json_w_key(&w, "last_used_ms_ago");
        if (mi.last_used_ms) rsd_json_w_int(&w, (int64_t)(now - mi.last_used_ms));
        else rsd_json_w_null(&w);
        rsd_json_w_key(&w, "idle_unload_in_ms");
        if (mi.idle_deadline_ms != RSD_POOL_NO_DEADLINE && mi.idle_deadline_ms > 0)
            rsd_json_w_int(&w, mi.idle_deadline_ms > now ? (int64_t)(mi.idle_deadline_ms - now) : 0);
        else rsd_json_w_null(&w);
        rsd_json_w_key(&w, "uptime_ms");
        if (mi.started_ms) rsd_json_w_int(&w, (int64_t)(now - mi.started_ms));
        else rsd_json_w_null(&w);
        rsd_json_w_key(&w, "last_error");
        if (mi.last_result < 0) rsd_json_w_str(&w, rsd_result_str(mi.last_result));
        else rsd_json_w_null(&w);
        rsd_json_w_key(&w, "retry_in_ms"); /* its start failed: no new one before then */
        if (mi.retry_at_ms > now) rsd_json_w_int(&w, (int64_t)(mi.retry_at_ms - now));
        else rsd_json_w_null(&w);
        status_queue(s, &w, i, now);
        rsd_json_w_end_object(&w);
    }
    rsd_json_w_end_array(&w);
    rsd_json_w_end_object(&w);
    free(st);
    n = rsd_json_w_finish(&w);
    if (n < 0) respond_error(s, h, 500, "server_error", "status too large");
    else respond_json(s, h, 200, s->out, (size_t)n);
}

/* The "model" of a management body, as a model index; answers and returns -1 when
   there is none (404 for load as the router, 400 for unload). */
static int body_model_index(srv *s, const rsd_http_server_event *ev, bool load, char *name, size_t cap) {
    size_t len = 0;
    int r = rsrv_body_model(ev->body.ptr, ev->body.len, name, cap, &len), m;
    if (r == -1) {
        respond_error(s, ev->req, 500, "server_error", "request body is not a JSON object");
        return -1;
    }
    m = r == 1 ? rsrv_find(s->cfg, name, len) : -1;
    if (m < 0) {
        if (load) respond_404(s, ev->req);
        else respond_error(s, ev->req, 400, "invalid_request_error", "model is not found");
    }
    return m;
}

static bool model_running(srv *s, int m, uint64_t now) {
    rsd_fleet_model_info mi;
    memset(&mi, 0, sizeof mi);
    if (rsd_fleet_query_model(s->fleet, m, now, &mi) != RSD_OK) return false;
    return mi.pool.slot >= 0 && (mi.pool.state == RSD_POOL_SLOT_STARTING || mi.pool.state == RSD_POOL_SLOT_READY ||
                                 mi.pool.state == RSD_POOL_SLOT_DRAINING);
}

static void answer_load(srv *s, const rsd_http_server_event *ev, uint64_t now) {
    char name[RSRV_ID_MAX];
    static const char ok[] = "{\"success\":true}";
    int m = body_model_index(s, ev, true, name, sizeof name), r;
    if (m < 0) return;
    if (model_running(s, m, now)) {
        respond_error(s, ev->req, 400, "invalid_request_error", "model is already running");
        return;
    }
    r = rsd_fleet_load(s->fleet, m, now);
    if (r < 0) {
        char msg[RSD_FLEET_MESSAGE_MAX + 160];
        rsd_fleet_model_info mi;
        memset(&mi, 0, sizeof mi);
        (void)rsd_fleet_query_model(s->fleet, m, now, &mi);
        snprintf(msg, sizeof msg, "cannot load '%s': %s", s->cfg->models[m].id,
                 r == RSD_ERR_FLEET_START && mi.last_error ? mi.last_error : rsd_result_str(r));
        respond_error(s, ev->req, 500, "server_error", msg);
        return;
    }
    logf_("%s: load requested", s->cfg->models[m].id);
    respond_json(s, ev->req, 200, ok, sizeof ok - 1);
}

static void answer_unload(srv *s, const rsd_http_server_event *ev, uint64_t now) {
    char name[RSRV_ID_MAX];
    static const char ok[] = "{\"success\":true}";
    int m = body_model_index(s, ev, false, name, sizeof name), r;
    if (m < 0) return;
    if (!model_running(s, m, now)) {
        respond_error(s, ev->req, 400, "invalid_request_error", "model is not running");
        return;
    }
    r = rsd_fleet_unload(s->fleet, m, RSD_POOL_UNLOAD_DRAIN, now);
    if (r < 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "cannot unload '%s': %s", s->cfg->models[m].id, rsd_result_str(r));
        respond_error(s, ev->req, 500, "server_error", msg);
        return;
    }
    logf_("%s: unload requested", s->cfg->models[m].id);
    respond_json(s, ev->req, 200, ok, sizeof ok - 1);
}

/* ---- jobs ------------------------------------------------------------------------ */
static job *job_by_sreq(srv *s, rsd_http_sreq_h h) {
    int i;
    for (i = 0; i < SRV_MAX_CONNS; i++)
        if (s->jobs[i].state != JOB_FREE && s->jobs[i].sreq.id == h.id) return &s->jobs[i];
    return NULL;
}

static job *job_new(srv *s) {
    int i;
    for (i = 0; i < SRV_MAX_CONNS; i++)
        if (s->jobs[i].state == JOB_FREE) {
            job *j = &s->jobs[i];
            memset(j, 0, sizeof *j);
            j->srv = s;
            return j;
        }
    return NULL;
}

/* Gives the in-flight place back (once). */
static void job_release(srv *s, job *j, uint64_t now, bool cancel) {
    if (j->granted) {
        if (cancel) (void)rsd_fleet_cancel(s->fleet, j->preq, now);
        else (void)rsd_fleet_release(s->fleet, j->preq, now);
        j->granted = false;
    }
}

static void job_free(srv *s, job *j, uint64_t now) {
    job_release(s, j, now, true);
    if (j->paused && j->up_active) (void)rsd_http_pause(s->hc, j->up, false);
    j->state = JOB_FREE;
    free(j->stash); /* rare (a slow client): give the pages back */
    j->stash = NULL;
    j->stash_len = 0;
    j->sreq.id = 0;
}

static void job_log(srv *s, job *j, int status, uint64_t now) {
    if (s->opts.verbose)
        logf_("%s %s %s %d %.1f ms", j->method, j->path, s->cfg->models[j->model].id, status, (double)(now - j->t0));
}

/* "X-Queue-Position: N" on the answer of a request that waited (its place when it
   joined its model's queue, 1 = first); 1 header written or 0. */
static size_t job_queue_header(const job *j, rsd_http_header *h, char *buf, size_t cap) {
    if (!j->queue_pos) return 0;
    snprintf(buf, cap, "%d", j->queue_pos);
    h->name = rsd_str_c("X-Queue-Position");
    h->value = rsd_str_c(buf);
    return 1;
}

/* Starts the downstream answer with the upstream's status, type and framing (the
   upstream head, read while its body streams). */
static bool job_begin(srv *s, job *j) {
    rsd_http_head_info hd;
    rsd_http_header out[2];
    rsd_str ct;
    size_t nh = 0;
    int r;
    char qp[16];
    if (rsd_http_query_head(s->hc, j->up, &hd) != RSD_OK) return false;
    ct = rsd_http_header_get(hd.headers, hd.num_headers, "Content-Type");
    if (ct.ptr) {
        out[nh].name = rsd_str_c("Content-Type");
        out[nh++].value = ct;
    }
    nh += job_queue_header(j, out + nh, qp, sizeof qp);
    if (hd.framing.chunked) r = rsd_http_stream_begin(s->hs, j->sreq, hd.status, out, nh);
    else r = rsd_http_stream_begin_raw(s->hs, j->sreq, hd.status, out, nh, hd.framing.content_length);
    if (r != RSD_OK) return false;
    j->begun = true;
    return true;
}

/* Upstream body bytes (from inside rsd_http_client_step): forwarded as far as the
   client's send buffer takes them; the rest (at most one piece, SRV_UP_READ) goes to
   the stash and the upstream is paused until jobs_service has sent it. */
static void on_up_body(void *user, const char *data, size_t len) {
    job *j = (job *)user;
    srv *s = j->srv;
    size_t room;
    if (j->broken || j->client_gone || !len) return;
    if (!j->begun && !job_begin(s, j)) { j->broken = true; return; }
    if (j->stash_len) { j->broken = true; return; } /* cannot happen: paused while stashed */
    room = rsd_http_stream_room(s->hs, j->sreq);
    if (room) {
        size_t n = room < len ? room : len;
        if (rsd_http_stream_write(s->hs, j->sreq, data, n) != RSD_OK) { j->broken = true; return; }
        data += n;
        len -= n;
        if (!len) return;
    }
    if (!j->stash) j->stash = (char *)malloc(SRV_STASH);
    if (!j->stash || len > SRV_STASH) { j->broken = true; return; }
    memcpy(j->stash, data, len);
    j->stash_len = len;
    if (!j->stall_since) j->stall_since = s->now;
    if (!j->paused) {
        (void)rsd_http_pause(s->hc, j->up, true);
        j->paused = true;
    }
}

/* Sends a granted job to its model's process. */
static void job_send(srv *s, job *j, uint64_t now) {
    rsd_http_server_event ev;
    rsd_http_request q;
    char url[64 + sizeof j->path + RSD_HTTP_SERVER_DEFAULT_MAX_HEADER_BYTES];
    rsd_str ct, auth;
    rsd_http_header fwd[1];
    char ctype[128];
    int r;
    if (rsd_http_server_query(s->hs, j->sreq, &ev) != RSD_OK) { /* the client went away */
        job_free(s, j, now);
        return;
    }
    snprintf(url, sizeof url, "http://127.0.0.1:%u%.*s", (unsigned)j->port, (int)ev.head->target.len,
             ev.head->target.ptr);
    ct = rsd_http_header_get(ev.head->headers, ev.head->num_headers, "Content-Type");
    memset(&q, 0, sizeof q);
    q.method = j->method;
    q.url = url;
    if (ct.ptr && ct.len > 0 && ct.len < sizeof ctype) rsrv_cpy(ctype, sizeof ctype, ct.ptr, ct.len);
    else rsrv_cpy(ctype, sizeof ctype, "application/json", 16);
    if (ev.body.len) q.content_type = ctype;
    auth = rsd_http_header_get(ev.head->headers, ev.head->num_headers, "Authorization");
    if (auth.ptr) { /* a model run with --api-key checks the client's own key */
        fwd[0].name = rsd_str_c("Authorization");
        fwd[0].value = auth;
        q.headers = fwd;
        q.num_headers = 1;
    }
    if (ev.body.len) {
        q.body = ev.body.ptr;
        q.body_len = ev.body.len;
    }
    q.total_timeout_ms = SRV_UPSTREAM_TIMEOUT_MS;
    q.retry_any_method = true; /* the child closed an idle socket: it never read it */
    q.on_body = on_up_body;
    q.user = j;
    r = rsd_http_send(s->hc, &q, now, &j->up);
    if (r != RSD_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "cannot reach '%s': %s", s->cfg->models[j->model].id, rsd_result_str(r));
        respond_error(s, j->sreq, 503, "unavailable_error", msg);
        job_log(s, j, 503, now);
        job_free(s, j, now);
        return;
    }
    j->up_active = true;
    j->state = JOB_PROXY;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Query parameter `name` (percent-decoded) as rsrv_body_model reports it: 1 found,
   0 absent, -2 too long or badly encoded. */
static int query_param(rsd_str target, const char *name, char *out, size_t cap, size_t *out_len) {
    const char *q = (const char *)memchr(target.ptr, '?', target.len), *end = target.ptr + target.len;
    size_t nl = strlen(name);
    if (!q) return 0;
    for (q++; q < end;) {
        const char *amp = (const char *)memchr(q, '&', (size_t)(end - q)), *e = amp ? amp : end;
        if ((size_t)(e - q) > nl && !memcmp(q, name, nl) && q[nl] == '=') {
            size_t n = 0;
            for (q += nl + 1; q < e; q++) {
                char c = *q;
                if (c == '+') c = ' ';
                else if (c == '%') {
                    int hi = q + 2 < e ? hexval(q[1]) : -1, lo = q + 2 < e ? hexval(q[2]) : -1;
                    if (hi < 0 || lo < 0) return -2;
                    c = (char)(hi * 16 + lo);
                    q += 2;
                }
                if (n + 1 >= cap) return -2;
                out[n++] = c;
            }
            out[n] = 0;
            *out_len = n;
            return 1;
        }
        q = e + 1;
    }
    return 0;
}

static int query_model(rsd_str target, char *out, size_t cap, size_t *out_len) {
    return query_param(target, "model", out, cap, out_len);
}

/* ?autoload=: absent = on (rsd-serve starts models on demand); "true" or "1" = on,
   anything else = off, as the llama.cpp router. */
static bool query_autoload(rsd_str target) {
    char v[16];
    size_t n = 0;
    int r = query_param(target, "autoload", v, sizeof v, &n);
    if (r == 0) return true;
    return r == 1 && (!strcmp(v, "true") || !strcmp(v, "1"));
}

/* With ?autoload=false a request is served only by a model that is ready now: 400
   "model is not loaded" when it is not resident, 503 "Loading model" while it starts
   (what the router and its child answer). true when it answered. */
static bool refuse_no_autoload(srv *s, const rsd_http_server_event *ev, int m, uint64_t now) {
    rsd_fleet_model_info mi;
    memset(&mi, 0, sizeof mi);
    if (query_autoload(ev->head->target)) return false;
    (void)rsd_fleet_query_model(s->fleet, m, now, &mi);
    if (mi.pool.slot >= 0 && mi.pool.state == RSD_POOL_SLOT_READY) return false;
    if (mi.pool.slot >= 0 && mi.pool.state == RSD_POOL_SLOT_STARTING) {
        static const char body[] = "{\"error\":{\"message\":\"Loading model\",\"type\":\"unavailable_error\",\"code\":503}}";
        respond_json(s, ev->req, 503, body, sizeof body - 1);
    } else {
        static const char body[] = "{\"error\":{\"code\":400,\"message\":\"model is not loaded\",\"type\":\"invalid_request_error\"}}";
        respond_json(s, ev->req, 400, body, sizeof body - 1);
    }
    return true;
}

/* ---- bounded queues ------------------------------------------------------------------ */
/* Requests waiting for a process: for model m (-1 = all). */
static int queue_count(const srv *s, int m) {
    int i, n = 0;
    for (i = 0; i < SRV_MAX_CONNS; i++)
        if (s->jobs[i].state == JOB_WAIT && (m < 0 || s->jobs[i].model == m)) n++;
    return n;
}

/* The current place (1 = next) of waiting job j in its model's queue. */
static int queue_place(const srv *s, const job *j) {
    int i, n = 1;
    for (i = 0; i < SRV_MAX_CONNS; i++) {
        const job *o = &s->jobs[i];
        if (o != j && o->state == JOB_WAIT && o->model == j->model && o->seq < j->seq) n++;
    }
    return n;
}

/* 429 with Retry-After when a request for m would wait past max_queue: its model's
   own queue is full, or the queue in all is and m cannot take it now. A model whose
   start is backed off is left to the acquire (503 with the reason). true = answered. */
static bool queue_refuse(srv *s, const rsd_http_server_event *ev, int m, uint64_t now, bool waiting_now) {
    const rsrv_model *md = &s->cfg->models[m];
    int mine = queue_count(s, m) - (waiting_now ? 1 : 0), all = queue_count(s, -1) - (waiting_now ? 1 : 0);
    int lim_m = rsrv_eff_model_queue(s->cfg, md), lim_all = rsrv_eff_max_queue(s->cfg);
    rsd_fleet_model_info mi;
    char msg[RSRV_ID_MAX + 160];
    memset(&mi, 0, sizeof mi);
    (void)rsd_fleet_query_model(s->fleet, m, now, &mi);
    if (mi.retry_at_ms > now) return false;
    if (mine < lim_m && (all < lim_all || (!waiting_now && mi.pool.slot >= 0 && mi.pool.state == RSD_POOL_SLOT_READY)))
        return false;
    if (mine >= lim_m)
        snprintf(msg, sizeof msg, "too many requests waiting for '%s' (max_queue %d); retry later", md->id, lim_m);
    else
        snprintf(msg, sizeof msg, "too many requests waiting (max_queue %d in all); retry later", lim_all);
    s->queue_full++;
    respond_error_retry(s, ev->req, 429, "rate_limit_error", msg, 1);
    if (s->opts.verbose) logf_("%.*s: 429 (%s)", (int)ev->head->target.len, ev->head->target.ptr, msg);
    return true;
}

/* Per-model queue detail for /status: the waiting requests in order. */
static void status_queue(srv *s, rsd_json_writer *w, int m, uint64_t now) {
    int i, k, n = 0, idx[SRV_MAX_CONNS];
    rsd_json_w_key(w, "max_queue");
    rsd_json_w_int(w, rsrv_eff_model_queue(s->cfg, &s->cfg->models[m]));
    for (i = 0; i < SRV_MAX_CONNS; i++)
        if (s->jobs[i].state == JOB_WAIT && s->jobs[i].model == m) idx[n++] = i;
    for (i = 1; i < n; i++) /* by arrival */
        for (k = i; k > 0 && s->jobs[idx[k]].seq < s->jobs[idx[k - 1]].seq; k--) {
            int t = idx[k];
            idx[k] = idx[k - 1];
            idx[k - 1] = t;
        }
    rsd_json_w_key(w, "queue");
    rsd_json_w_begin_array(w);
    for (i = 0; i < n; i++) {
        const job *j = &s->jobs[idx[i]];
        rsd_json_w_begin_object(w);
        rsd_json_w_key(w, "position");
        rsd_json_w_int(w, i + 1);
        rsd_json_w_key(w, "waited_ms");
        rsd_json_w_int(w, (int64_t)(now - j->t0));
        rsd_json_w_key(w, "method");
        rsd_json_w_str(w, j->method);
        rsd_json_w_key(w, "path");
        rsd_json_w_str(w, j->path);
        rsd_json_w_end_object(w);
    }
    rsd_json_w_end_array(w);
}

/* A request for a model (POST: the body's "model"; GET: ?model=): acquire a place, then
   send it to the model's process. */
static void on_inference(srv *s, const rsd_http_server_event *ev, uint64_t now, bool from_query) {
    char name[RSRV_ID_MAX];
    size_t len = 0;
    int r = from_query ? query_model(ev->head->target, name, sizeof name, &len)
                       : rsrv_body_model(ev->body.ptr, ev->body.len, name, sizeof name, &len), m;
    job *j;
    uint16_t port = 0;
    if (r == 0 || r == -1) {
        respond_error(s, ev->req, 400, "invalid_request_error", "model name is missing from the request");
        return;
    }
    m = r == 1 ? rsrv_find(s->cfg, name, len) : -1;
    if (m < 0) {
        respond_unknown_model(s, ev->req, r == 1 ? name : "(too long)");
        return;
    }
    if (refuse_no_autoload(s, ev, m, now)) return;
    if (queue_refuse(s, ev, m, now, false)) return;
    j = job_new(s);
    if (!j) {
        respond_error(s, ev->req, 503, "unavailable_error", "too many requests in progress");
        return;
    }
    j->sreq = ev->req;
    j->model = m;
    j->t0 = now;
    j->seq = ++s->job_seq;
    rsrv_cpy(j->method, sizeof j->method, ev->head->method.ptr, ev->head->method.len);
    rsrv_cpy(j->path, sizeof j->path, ev->head->target.ptr, ev->head->target.len);
    r = rsd_fleet_acquire(s->fleet, m, now, j, &j->preq, &port);
    if (r == RSD_OK) {
        j->granted = true;
        j->port = port;
        job_send(s, j, now);
    } else if (r == RSD_PENDING) {
        j->state = JOB_WAIT;
        if (queue_refuse(s, ev, m, now, true)) { /* it would wait past max_queue */
            j->state = JOB_FREE;
            (void)rsd_fleet_cancel(s->fleet, j->preq, now);
            return;
        }
        j->queue_pos = queue_place(s, j);
    } else if (r == RSD_ERR_POOL_BACKOFF || r == RSD_ERR_FLEET_START) {
        respond_unavailable(s, ev->req, m, now, NULL);
        job_log(s, j, 503, now);
        j->state = JOB_FREE;
    } else {
        char msg[256];
        snprintf(msg, sizeof msg, "cannot serve '%s': %s", s->cfg->models[m].id, rsd_result_str(r));
        respond_error(s, ev->req, 503, "unavailable_error", msg);
        job_log(s, j, 503, now);
        j->state = JOB_FREE;
    }
}

static bool path_is(const rsd_http_server_event *ev, const char *p) {
    size_t n = strlen(p), t = ev->head->target.len;
    const char *q = (const char *)memchr(ev->head->target.ptr, '?', t);
    if (q) t = (size_t)(q - ev->head->target.ptr);
    return t == n && !memcmp(ev->head->target.ptr, p, n);
}

static void on_request(srv *s, const rsd_http_server_event *ev, uint64_t now) {
    bool get = rsd_str_eq_c(ev->head->method, "GET"), post = rsd_str_eq_c(ev->head->method, "POST");
    char name[RSRV_ID_MAX];
    size_t len = 0;
    if (get && (path_is(ev, "/health") || path_is(ev, "/v1/health"))) {
        static const char ok[] = "{\"status\":\"ok\"}";
        respond_json(s, ev->req, 200, ok, sizeof ok - 1);
    } else if (get && (path_is(ev, "/v1/models") || path_is(ev, "/models"))) {
        answer_models(s, ev->req, now);
    } else if (get && path_is(ev, "/props") && query_model(ev->head->target, name, sizeof name, &len) == 0) {
        answer_props(s, ev->req);
    } else if (get && (path_is(ev, "/status") || path_is(ev, "/_rsd/status"))) {
        answer_status(s, ev->req, now);
    } else if (post && path_is(ev, "/models/load")) {
        answer_load(s, ev, now);
    } else if (post && path_is(ev, "/models/unload")) {
        answer_unload(s, ev, now);
    } else if (post && path_is(ev, "/_rsd/reload")) {
        answer_reload(s, ev, now);
    } else if (post && !path_is(ev, "/models")) {
        on_inference(s, ev, now, false);
    } else if (get && memchr(ev->head->target.ptr, '?', ev->head->target.len) &&
               query_model(ev->head->target, name, sizeof name, &len) != 0) {
        on_inference(s, ev, now, true); /* GET /props?model=X, /slots?model=X, ... */
    } else {
        respond_404(s, ev->req);
    }
}

/* The client of a waiting or streaming request went away. */
static void on_closed(srv *s, rsd_http_sreq_h h, uint64_t now) {
    job *j = job_by_sreq(s, h);
    if (!j) return;
    j->client_gone = true;
    if (s->opts.verbose) logf_("%s %s %s: client went away", j->method, j->path, s->cfg->models[j->model].id);
    if (j->state == JOB_WAIT) { /* leaves the queue */
        (void)rsd_fleet_cancel(s->fleet, j->preq, now);
        job_free(s, j, now);
        return;
    }
    job_release(s, j, now, true);
    if (j->up_active) (void)rsd_http_cancel(s->hc, j->up); /* its event frees the job */
    else job_free(s, j, now);
}

/* Ends a proxied answer whose upstream completed and whose stash is out. */
static void job_finish(srv *s, job *j, uint64_t now) {
    if (j->begun) (void)rsd_http_stream_end(s->hs, j->sreq);
    job_free(s, j, now);
}

static void on_upstream(srv *s, const rsd_http_event *ev, uint64_t now) {
    job *j = (job *)ev->user;
    if (!j || j->state == JOB_FREE) return;
    j->up_active = false;
    j->paused = false;
    if (j->client_gone) { job_free(s, j, now); return; }
    if (ev->result != RSD_OK || j->broken) {
        char msg[512];
        if (j->begun) {
            (void)rsd_http_abort(s->hs, j->sreq);
        } else {
            snprintf(msg, sizeof msg, "upstream '%s' (127.0.0.1:%u) failed: %s%s%s", s->cfg->models[j->model].id,
                     (unsigned)j->port, rsd_result_str(ev->result != RSD_OK ? ev->result : RSD_ERR_IO),
                     ev->sys_errno ? " - " : "", ev->sys_errno ? strerror(ev->sys_errno) : "");
            respond_error(s, j->sreq, 502, "server_error", msg);
        }
        logf_("%s %s %s: upstream failed: %s", j->method, j->path, s->cfg->models[j->model].id,
              rsd_result_str(ev->result));
        if (!j->broken) (void)rsd_fleet_report(s->fleet, j->model, j->port, 502, now); /* the watchdog counts it */
        job_release(s, j, now, false);
        job_free(s, j, now);
        return;
    }
    job_release(s, j, now, false);
    job_log(s, j, ev->status, now);
    (void)rsd_fleet_report(s->fleet, j->model, j->port, ev->status, now); /* 5xx in a row: the watchdog */
    if (!j->begun) { /* no body bytes came: answer with the head alone */
        rsd_http_header out[2];
        rsd_str ct = rsd_http_header_get(ev->headers, ev->num_headers, "Content-Type");
        size_t nh = 0;
        char qp[16];
        if (ct.ptr) {
            out[0].name = rsd_str_c("Content-Type");
            out[0].value = ct;
            nh = 1;
        }
        nh += job_queue_header(j, out + nh, qp, sizeof qp);
        (void)rsd_http_respond(s->hs, j->sreq, ev->status, out, nh, "", 0);
        job_free(s, j, now);
        return;
    }
    if (j->stash_len) {
        j->up_done = true;
        j->state = JOB_DRAIN;
        return;
    }
    job_finish(s, j, now);
}

/* A client that stopped reading holds its model's place (the upstream is paused for
   it): it is cut after send_timeout without progress, or after SRV_STALL_DRAIN_MS when
   its model must make room (drained for a request waiting past max_wait, or an
   unload), and its request is cancelled. Returns true when it was cut. */
static bool job_stalled(srv *s, job *j, uint64_t now) {
    uint32_t limit = s->cfg->send_timeout_ms ? s->cfg->send_timeout_ms : RSRV_SEND_TIMEOUT_DEFAULT_MS;
    uint64_t idle = now - j->stall_since;
    bool drain = false;
    if (!j->stall_since || idle < SRV_STALL_DRAIN_MS) return false;
    if (idle < limit) {
        rsd_fleet_model_info mi;
        memset(&mi, 0, sizeof mi);
        drain = rsd_fleet_query_model(s->fleet, j->model, now, &mi) == RSD_OK &&
                mi.pool.state == RSD_POOL_SLOT_DRAINING;
        if (!drain) return false;
    }
    logf_("%s %s %s: the client read nothing for %llu ms%s; disconnected, request cancelled", j->method, j->path,
          s->cfg->models[j->model].id, (unsigned long long)idle, drain ? " while its model must make room" : "");
    (void)rsd_http_abort(s->hs, j->sreq);
    j->client_gone = true;
    job_release(s, j, now, true);
    if (j->up_active) (void)rsd_http_cancel(s->hc, j->up); /* its event frees the job */
    else job_free(s, j, now);
    return true;
}

/* The next time jobs_service has a stalled client to look at (UINT64_MAX = none). */
static uint64_t jobs_deadline(const srv *s) {
    uint32_t limit = s->cfg->send_timeout_ms ? s->cfg->send_timeout_ms : RSRV_SEND_TIMEOUT_DEFAULT_MS;
    uint64_t d = UINT64_MAX;
    int i;
    for (i = 0; i < SRV_MAX_CONNS; i++) {
        const job *j = &s->jobs[i];
        uint64_t t;
        if ((j->state != JOB_PROXY && j->state != JOB_DRAIN) || !j->stall_since || j->client_gone) continue;
        t = j->stall_since + (s->now - j->stall_since < SRV_STALL_DRAIN_MS ? SRV_STALL_DRAIN_MS : limit);
        if (t < d) d = t;
    }
    return d;
}

/* After each client step: stash flushing, broken answers, stalled clients. */
static void jobs_service(srv *s, uint64_t now) {
    int i;
    for (i = 0; i < SRV_MAX_CONNS; i++) {
        job *j = &s->jobs[i];
        if (j->state != JOB_PROXY && j->state != JOB_DRAIN) continue;
        if (j->broken && j->up_active) {
            (void)rsd_http_cancel(s->hc, j->up); /* the event answers (or cuts) */
            continue;
        }
        if (j->stash_len && !j->client_gone) {
            size_t room = rsd_http_stream_room(s->hs, j->sreq), n = j->stash_len;
            if (room == 0) {
                (void)job_stalled(s, j, now);
                continue;
            }
            if (n > room) n = room;
            if (rsd_http_stream_write(s->hs, j->sreq, j->stash, n) != RSD_OK) continue;
            memmove(j->stash, j->stash + n, j->stash_len - n);
            j->stash_len -= n;
            j->stall_since = j->stash_len ? now : 0; /* progress */
            if (!j->stash_len) {
                if (j->state == JOB_DRAIN) job_finish(s, j, now);
                else if (j->paused) {
                    (void)rsd_http_pause(s->hc, j->up, false);
                    j->paused = false;
                }
            }
        }
    }
}

/* ---- fleet events ------------------------------------------------------------------ */
static void on_fleet(srv *s, const rsd_fleet_event *ev, uint64_t now) {
    const char *id = ev->model_id ? ev->model_id : "?";
    switch (ev->kind) {
    case RSD_FLEET_EV_GRANT: {
        job *j = (job *)ev->user;
        if (!j || j->state != JOB_WAIT || j->preq.id != ev->req.id) {
            (void)rsd_fleet_release(s->fleet, ev->req, now);
            return;
        }
        j->granted = true;
        j->port = ev->port;
        job_send(s, j, now);
        break;
    }
    case RSD_FLEET_EV_FAIL: {
        job *j = (job *)ev->user;
        char msg[RSD_FLEET_MESSAGE_MAX + 128];
        snprintf(msg, sizeof msg, "cannot serve '%s': %s", id,
                 ev->message && ev->message[0] ? ev->message : rsd_result_str(ev->result));
        if (j && j->state == JOB_WAIT && j->preq.id == ev->req.id) {
            if (ev->result == RSD_ERR_FLEET_START && ev->model >= 0)
                respond_unavailable(s, j->sreq, ev->model, now, ev->message);
            else
                respond_error(s, j->sreq, 503, "unavailable_error", msg);
            job_log(s, j, 503, now);
            j->granted = false;
            job_free(s, j, now);
        }
        if (!s->stopping) logf_("%s", msg);
        break;
    }
    case RSD_FLEET_EV_STARTING:
        logf_("%s: starting pid %lld port %u", id, (long long)ev->pid, (unsigned)ev->port);
        break;
    case RSD_FLEET_EV_READY: logf_("%s: ready pid %lld port %u", id, (long long)ev->pid, (unsigned)ev->port); break;
    case RSD_FLEET_EV_STOPPING: logf_("%s: stopping pid %lld (%s)", id, (long long)ev->pid, rsd_pool_why_name(ev->why)); break;
    case RSD_FLEET_EV_EXITED:
        logf_("%s: exited pid %lld (code %d%s%s)", id, (long long)ev->pid, ev->exit_code,
              ev->term_signal ? ", signal " : "", ev->term_signal ? strsignal(ev->term_signal) : "");
        if (ev->model >= 0 && ev->model < RSRV_MAX_MODELS && s->restart[ev->model]) {
            s->restart[ev->model] = false; /* changed by a reload while it ran: start it anew */
            if (!s->stopping && !model_running(s, ev->model, now)) {
                logf_("%s: starting again with its new configuration", id);
                (void)rsd_fleet_load(s->fleet, ev->model, now);
            }
        }
        break;
    case RSD_FLEET_EV_CRASHED:
        if (ev->pid)
            logf_("%s: failed pid %lld: %s", id, (long long)ev->pid,
                  ev->message && ev->message[0] ? ev->message : rsd_result_str(ev->result));
        else
            logf_("%s: failed: %s", id, ev->message && ev->message[0] ? ev->message : rsd_result_str(ev->result));
        break;
    default: break;
    }
}

/* ---- setup -------------------------------------------------------------------------- */
static int read_file(const char *path, char **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    size_t n = 0, got;
    char *b;
    if (!f) return -1;
    b = (char *)malloc(SRV_CONFIG_MAX + 1);
    if (!b) { fclose(f); return -1; }
    while ((got = fread(b + n, 1, SRV_CONFIG_MAX + 1 - n, f)) > 0) {
        n += got;
        if (n > SRV_CONFIG_MAX) break;
    }
    fclose(f);
    if (n > SRV_CONFIG_MAX) { free(b); errno = EFBIG; return -1; }
    *out = b;
    *len = n;
    return 0;
}

/* The configuration: the --config file first, then the flags over it (at start and
   on every reload). 0, EX_NOINPUT (the file cannot be read, or is a directory),
   EX_USAGE (a bad line: err is FILE:LINE: message) or -1 (a bad flag), err set. */
static int load_config(rsrv_config *c, rsrv_opts *o, int argc, char **argv, char *err, size_t ecap) {
    int i;
    for (i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--config")) {
            char *text = NULL;
            size_t len = 0;
            struct stat sb;
            if (stat(argv[i + 1], &sb) == 0 && S_ISDIR(sb.st_mode)) {
                snprintf(err, ecap, "%s: is a directory (give the config file)", argv[i + 1]);
                return EX_NOINPUT;
            }
            if (read_file(argv[i + 1], &text, &len) != 0) {
                snprintf(err, ecap, "%s: %s", argv[i + 1], strerror(errno));
                return EX_NOINPUT;
            }
            if (rsrv_parse_ini(c, text, len, argv[i + 1], err, ecap) != 0) {
                free(text);
                return EX_USAGE;
            }
            free(text);
        }
    return rsrv_parse_args(c, o, argc, argv, err, ecap) != 0 ? -1 : 0;
}

/* Builds model m's process spec from configuration c into sm. */
static int build_model(const rsrv_config *c, const rsrv_model *m, srv_model *sm) {
    int n, k;
    size_t used;
    memset(sm, 0, sizeof *sm);
    {
        /* extra = the global args (llama_server models only: a command is a whole
           command line), then the model's */
        n = m->command[0] ? 0 : rsrv_split(c->args, sm->extra_buf, sizeof sm->extra_buf, sm->extra_argv, RSRV_MAX_ARGS + 1);
        if (n < 0) return -1;
        sm->extra_argv[n] = NULL;
        for (used = 0, k = 0; k < n; k++) used += strlen(sm->extra_argv[k]) + 1;
        k = rsrv_split(m->args, sm->extra_buf + used, sizeof sm->extra_buf - used, sm->extra_argv + n, RSRV_MAX_ARGS + 1);
        if (k < 0) return -1;
        sm->spec.extra = sm->extra_argv;
        if (m->command[0]) {
            if (rsrv_split(m->command, sm->cmd_buf, sizeof sm->cmd_buf, sm->cmd_argv, RSRV_MAX_ARGS + 1) < 1) return -1;
            sm->spec.exe = sm->cmd_argv[0];
            sm->spec.args = sm->cmd_argv + 1;
        } else {
            sm->spec.exe = c->llama_server;
            sm->spec.args = NULL; /* the llama-server template */
        }
        sm->spec.model = m->model[0] ? m->model : NULL;
        sm->spec.alias = m->id;
        sm->spec.ctx = m->ctx;
        sm->spec.parallel = m->parallel;
        sm->spec.ngl = m->ngl[0] ? m->ngl : NULL;
        k = rsrv_env_split(m->env, sm->env_buf, sizeof sm->env_buf, sm->env, RSRV_MAX_ENV + 1);
        if (k < 0) return -1;
        sm->env[k] = "LLAMA_SERVER_ROUTER_PORT"; /* wire.md 1.12 hygiene: never inherited */
        sm->env[k + 1] = NULL;
        sm->spec.env = sm->env;
        sm->spec.name = m->id;
        sm->spec.start_deadline_ms = c->start_timeout_ms;
        sm->desc.pool.id = m->id;
        sm->desc.pool.reserve_bytes = m->reserve_bytes;
        sm->desc.pool.ttl_ms = m->ttl_ms;
        sm->desc.pool.max_in_flight = m->parallel > 0 ? (uint32_t)m->parallel : 0;
        sm->desc.pool.pinned = m->pinned;
        sm->desc.spec = sm->spec;
    }
    return 0;
}

static int build_models(srv *s) {
    int i;
    for (i = 0; i < s->cfg->nmodels; i++)
        if (build_model(s->cfg, &s->cfg->models[i], &s->models[i]) != 0) return -1;
    return 0;
}

/* --check's look at the files: each model's program (llama_server or the command's)
   and, for llama_server models, the model file, as a start would check them
   (rsd_procs_check). Problems appended to out as "WHERE: why\n"; their count. */
static int check_files(srv *s, const char *file, char *out, size_t cap) {
    rsd_procs_desc pd;
    rsd_procs *p;
    int i, bad = 0;
    memset(&pd, 0, sizeof pd);
    pd.max_procs = 1;
    p = rsd_procs_create(&pd);
    if (!p) return 0;
    for (i = 0; i < s->cfg->nmodels; i++) {
        const rsrv_model *m = &s->cfg->models[i];
        char why[512], where[RSRV_PATH_MAX + 32];
        size_t o = strlen(out);
        if (rsd_procs_check(p, &s->models[i].spec, why, sizeof why) == RSD_OK) continue;
        if (m->command[0]) rsrv_where(file, m, 1, where, sizeof where);
        else if (strstr(why, "model file")) rsrv_where(file, m, 0, where, sizeof where);
        else if (s->cfg->key_line[2]) snprintf(where, sizeof where, "%s:%d", file ? file : "config", s->cfg->key_line[2]);
        else snprintf(where, sizeof where, "%s", file && !s->cfg->seen ? "--llama-server" : "llama_server");
        snprintf(out + o, o < cap ? cap - o : 0, "%s: model '%s': %s\n", where, m->id, why);
        bad++;
    }
    rsd_procs_destroy(p);
    return bad;
}

/* The listen host as a numeric address: a host name is resolved once, here (the first
   IPv4 or IPv6 address getaddrinfo gives). false with err set. */
static bool resolve_listen(const char *host, char *out, size_t cap, char *err, size_t ecap) {
    struct addrinfo hints, *res = NULL, *ai;
    int r;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    r = getaddrinfo(host, NULL, &hints, &res);
    if (r != 0) {
        snprintf(err, ecap, "listen: cannot resolve '%s': %s", host, gai_strerror(r));
        return false;
    }
    for (ai = res; ai; ai = ai->ai_next)
        if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) &&
            getnameinfo(ai->ai_addr, ai->ai_addrlen, out, (socklen_t)cap, NULL, 0, NI_NUMERICHOST) == 0)
            break;
    freeaddrinfo(res);
    if (!ai) {
        snprintf(err, ecap, "listen: '%s' has no IPv4 or IPv6 address", host);
        return false;
    }
    return true;
}


/* ---- reload (SIGHUP, POST /_rsd/reload) ------------------------------------------- */
typedef struct reload_out {
    char added[2048], removed[2048], changed[2048], updated[2048], unchanged[2048];
    char kept[512];          /* global keys that take effect only at a restart */
    char err[RSRV_ERR_MAX * 8];
} reload_out;

static void list_add(char *list, size_t cap, const char *word) {
    size_t n = strlen(list);
    if (n < cap) snprintf(list + n, cap - n, "%s%s", n ? " " : "", word);
}

/* Index of the model whose id (not alias, retired or not) is id, or -1. */
static int find_id(const rsrv_config *c, const char *id) {
    int i;
    for (i = 0; i < c->nmodels; i++)
        if (!strcmp(c->models[i].id, id)) return i;
    return -1;
}

/* Fails the requests waiting for model m (removed by a reload) with a 503. */
static void fail_waiting(srv *s, int m, uint64_t now) {
    int i;
    char msg[RSRV_ID_MAX + 96];
    snprintf(msg, sizeof msg, "model '%s' was removed from the configuration (reload)", s->cfg->models[m].id);
    for (i = 0; i < SRV_MAX_CONNS; i++) {
        job *j = &s->jobs[i];
        if (j->state != JOB_WAIT || j->model != m) continue;
        (void)rsd_fleet_cancel(s->fleet, j->preq, now);
        respond_error(s, j->sreq, 503, "unavailable_error", msg);
        job_log(s, j, 503, now);
        job_free(s, j, now);
    }
}

/* Reads the configuration again (file, then the command line's flags) and applies the
   difference: new models are added (started when pinned or preload), removed ones
   take no new requests (waiting ones get 503), drain and stop; a model whose process
   would differ is restarted once idle (drained, then started again if it was running);
   one whose ttl, pin, aliases, preload or max_queue changed is updated in place; the
   rest is untouched (same process). A bad file changes nothing: 0, or -1 with ro->err
   ("FILE:LINE: message"). listen, stop_grace, vram_budget and max_wait take effect
   only at a restart (named in ro->kept). Every change forgets the model's backoff. */
static int do_reload(srv *s, uint64_t now, reload_out *ro) {
    rsrv_config *nc = (rsrv_config *)calloc(1, sizeof *nc), *mc = (rsrv_config *)calloc(1, sizeof *mc), *oc = s->cfg;
    rsrv_opts o;
    int rc, i, j, bad;
    memset(ro, 0, sizeof *ro);
    if (!nc || !mc) {
        snprintf(ro->err, sizeof ro->err, "out of memory");
        goto fail;
    }
    if (!s->opts.config_path) {
        snprintf(ro->err, sizeof ro->err, "started without --config: there is no file to reload");
        goto fail;
    }
    rsrv_config_init(nc);
    memset(&o, 0, sizeof o);
    rc = load_config(nc, &o, s->argc, s->argv, ro->err, sizeof ro->err);
    if (rc) goto fail;
    if (nc->nmodels == 0) {
        snprintf(ro->err, sizeof ro->err, "%s: no [model ID] sections", s->opts.config_path);
        goto fail;
    }
    bad = rsrv_check(nc, s->opts.config_path, ro->err, sizeof ro->err);
    if (bad) {
        size_t n = strlen(ro->err);
        while (n && ro->err[n - 1] == '\n') ro->err[--n] = 0;
        goto fail;
    }
    /* the merged table: every old index keeps its model (fleet indices are stable) */
    *mc = *nc;
    for (i = 0; i < oc->nmodels; i++) {
        j = find_id(nc, oc->models[i].id);
        mc->models[i] = j >= 0 ? nc->models[j] : oc->models[i];
        mc->models[i].retired = j < 0;
    }
    mc->nmodels = oc->nmodels;
    for (j = 0; j < nc->nmodels; j++) {
        if (find_id(oc, nc->models[j].id) >= 0) continue;
        if (mc->nmodels >= RSRV_MAX_MODELS) {
            snprintf(ro->err, sizeof ro->err, "more than %d different models over reloads: restart rsd-serve",
                     RSRV_MAX_MODELS);
            goto fail;
        }
        mc->models[mc->nmodels++] = nc->models[j];
    }
    if (strcmp(mc->listen_host, oc->listen_host) || mc->listen_port != oc->listen_port) {
        list_add(ro->kept, sizeof ro->kept, "listen");
        memcpy(mc->listen_host, oc->listen_host, sizeof mc->listen_host);
        mc->listen_port = oc->listen_port;
    }
    if (mc->stop_grace_ms != oc->stop_grace_ms) { list_add(ro->kept, sizeof ro->kept, "stop_grace"); mc->stop_grace_ms = oc->stop_grace_ms; }
    if (mc->vram_budget_bytes != oc->vram_budget_bytes) {
        list_add(ro->kept, sizeof ro->kept, "vram_budget");
        mc->vram_budget_bytes = oc->vram_budget_bytes;
    }
    if (rsrv_eff_max_wait(mc) != rsrv_eff_max_wait(oc)) { list_add(ro->kept, sizeof ro->kept, "max_wait"); mc->max_wait_ms = oc->max_wait_ms; }
    if (mc->watchdog_ms != oc->watchdog_ms || rsrv_eff_wd_failures(mc) != rsrv_eff_wd_failures(oc) ||
        rsrv_eff_wd_errors(mc) != rsrv_eff_wd_errors(oc) || rsrv_eff_wd_restarts(mc) != rsrv_eff_wd_restarts(oc)) {
        list_add(ro->kept, sizeof ro->kept, "watchdog");
        mc->watchdog_ms = oc->watchdog_ms;
        mc->watchdog_failures = oc->watchdog_failures;
        mc->watchdog_errors = oc->watchdog_errors;
        mc->watchdog_restarts = oc->watchdog_restarts;
    }
    /* apply */
    s->cfg = mc;
    for (i = 0; i < mc->nmodels; i++) {
        rsrv_model *m = &mc->models[i];
        const rsrv_model *om = i < oc->nmodels ? &oc->models[i] : NULL;
        srv_model *sm = &s->models[i];
        bool start = false;
        if (build_model(mc, m, sm) != 0) { /* cannot happen: the parser checked the splits */
            m->retired = true;
            continue;
        }
        if (!om) {
            if (rsd_fleet_add_model(s->fleet, &sm->desc) != i) { m->retired = true; continue; }
            list_add(ro->added, sizeof ro->added, m->id);
            start = m->pinned || m->preload;
        } else if (m->retired) {
            if (!om->retired) {
                list_add(ro->removed, sizeof ro->removed, m->id);
                fail_waiting(s, i, now);
                sm->desc.pool.pinned = false;
                (void)rsd_fleet_set_model(s->fleet, i, &sm->desc, now);
                if (model_running(s, i, now)) (void)rsd_fleet_unload(s->fleet, i, RSD_POOL_UNLOAD_DRAIN, now);
            }
            s->restart[i] = false;
            continue;
        } else if (om->retired) {
            (void)rsd_fleet_set_model(s->fleet, i, &sm->desc, now);
            list_add(ro->added, sizeof ro->added, m->id);
            start = m->pinned || m->preload;
        } else if (rsrv_model_process_differs(oc, om, mc, m)) {
            (void)rsd_fleet_set_model(s->fleet, i, &sm->desc, now);
            list_add(ro->changed, sizeof ro->changed, m->id);
            if (model_running(s, i, now)) {
                (void)rsd_fleet_unload(s->fleet, i, RSD_POOL_UNLOAD_DRAIN, now);
                s->restart[i] = true;
            } else {
                start = m->pinned || m->preload;
            }
        } else if (!rsrv_model_equal(oc, om, mc, m)) {
            (void)rsd_fleet_set_model(s->fleet, i, &sm->desc, now);
            list_add(ro->updated, sizeof ro->updated, m->id);
            start = m->pinned && !om->pinned;
        } else {
            list_add(ro->unchanged, sizeof ro->unchanged, m->id);
        }
        if (start && !model_running(s, i, now)) (void)rsd_fleet_load(s->fleet, i, now);
    }
    if (mc->max_models != oc->max_models) (void)rsd_fleet_configure(s->fleet, mc->max_models, now);
    free(oc);
    free(nc);
    s->reloads++;
    return 0;
fail:
    free(nc);
    free(mc);
    s->reload_failures++;
    return -1;
}

/* The reload's outcome as one log line. */
static void reload_log(const reload_out *ro, int r, const char *why) {
    if (r != 0) {
        logf_("%s: the configuration was not reloaded (the old one stays): %s", why, ro->err);
        return;
    }
    logf_("%s: configuration reloaded: added [%s] removed [%s] changed [%s] (restarted once idle) updated [%s] "
          "unchanged [%s]%s%s%s", why, ro->added, ro->removed, ro->changed, ro->updated, ro->unchanged,
          ro->kept[0] ? "; at the next restart only: [" : "", ro->kept, ro->kept[0] ? "]" : "");
}

static void json_list(rsd_json_writer *w, const char *key, const char *list) {
    const char *p = list;
    rsd_json_w_key(w, key);
    rsd_json_w_begin_array(w);
    while (*p) {
        const char *e = strchr(p, ' ');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char word[RSRV_ID_MAX + 16];
        rsrv_cpy(word, sizeof word, p, n);
        rsd_json_w_str(w, word);
        p += n;
        while (*p == ' ') p++;
    }
    rsd_json_w_end_array(w);
}

/* POST /_rsd/reload: 200 {"success":true,"added":[..],"removed":[..],"changed":[..],
   "updated":[..],"unchanged":[..],"restart_needed":[global keys]}, or 400 with the
   FILE:LINE message (the old configuration stays). */
static void answer_reload(srv *s, const rsd_http_server_event *ev, uint64_t now) {
    static reload_out ro;
    rsd_json_writer w;
    int r = do_reload(s, now, &ro), n;
    reload_log(&ro, r, "POST /_rsd/reload");
    if (r != 0) {
        char msg[sizeof ro.err + 64];
        snprintf(msg, sizeof msg, "%s (the old configuration stays)", ro.err);
        respond_error(s, ev->req, 400, "invalid_request_error", msg);
        return;
    }
    rsd_json_w_init(&w, s->out, SRV_OUT);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "success");
    rsd_json_w_bool(&w, true);
    json_list(&w, "added", ro.added);
    json_list(&w, "removed", ro.removed);
    json_list(&w, "changed", ro.changed);
    json_list(&w, "updated", ro.updated);
    json_list(&w, "unchanged", ro.unchanged);
    json_list(&w, "restart_needed", ro.kept);
    rsd_json_w_end_object(&w);
    n = rsd_json_w_finish(&w);
    if (n < 0) respond_error(s, ev->req, 500, "server_error", "answer too large");
    else respond_json(s, ev->req, 200, s->out, (size_t)n);
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: rsd-serve [--config FILE] [--listen HOST:PORT] [--max-models N] [--vram-budget SIZE]\n"
            "                 [--llama-server PATH] [--args \"A B\"] [--start-timeout DUR] [--stop-grace DUR]\n"
            "                 [--max-wait DUR] [--send-timeout DUR] [--check] [--verbose] [--quiet]\n"
            "                 [--model ID=PATH | --command ID=\"CMD\" [--ctx N] [--parallel N] [--ngl X]\n"
            "                  [--reserve SIZE] [--ttl DUR] [--pinned] [--aliases A,B] [--model-args \"A B\"]]...\n"
            "The INI format is described at the top of examples/rsd_serve.h and in README.md.\n"
            "Exit codes: 0 stopped by SIGINT/SIGTERM/SIGQUIT (SIGHUP is ignored), 1 cannot listen or start,\n"
            "64 bad flags or config, 66 config file unreadable.\n");
}

int main(int argc, char **argv) {
    static srv s;
    rsd_http_server_desc hd;
    rsd_http_client_desc cd;
    rsd_fleet_desc fd;
    rsd_fleet_model_desc *mdesc = NULL;
    rsd_pollfd *fds;
    char err[RSRV_ERR_MAX];
    bool check = false;
    int i, rc = EX_OK, argc2 = 0, wake[2] = {-1, -1};
    char **argv2;
    signal(SIGPIPE, SIG_IGN);
#if defined(__linux__) && defined(PR_SET_CHILD_SUBREAPER)
    /* Orphans of a wrapper command (its children, once it exits) come back to us, so the
       supervisor reaps them and a model's process group cannot vanish unseen. */
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1);
#endif
    s.cfg = (rsrv_config *)calloc(1, sizeof *s.cfg);
    s.out = (char *)malloc(SRV_OUT);
    fds = (rsd_pollfd *)calloc(SRV_MAX_FDS, sizeof *fds);
    argv2 = (char **)calloc((size_t)argc + 1, sizeof *argv2);
    if (!s.cfg || !s.out || !fds || !argv2) return EX_FAIL;
    rsrv_config_init(s.cfg);
    /* --check is ours; the rest is rsrv_parse_args' */
    for (i = 0; i < argc; i++) {
        if (i && !strcmp(argv[i], "--check")) check = true;
        else argv2[argc2++] = argv[i];
    }
    s.argc = argc2;
    s.argv = argv2;
    rc = load_config(s.cfg, &s.opts, argc2, argv2, err, sizeof err);
    if (rc) {
        fprintf(stderr, "rsd-serve: %s\n", err);
        if (rc < 0) usage(stderr);
        return rc < 0 ? EX_USAGE : rc;
    }
    if (s.opts.help) { usage(stdout); return EX_OK; }
    if (s.cfg->nmodels == 0) {
        fprintf(stderr, "rsd-serve: no models (give --config FILE with [model ID] sections, or --model ID=PATH)\n");
        usage(stderr);
        return EX_USAGE;
    }
    s.models = (srv_model *)calloc(RSRV_MAX_MODELS, sizeof *s.models);
    mdesc = (rsd_fleet_model_desc *)calloc(RSRV_MAX_MODELS, sizeof *mdesc);
    if (!s.models || !mdesc || build_models(&s) != 0) {
        fprintf(stderr, "rsd-serve: cannot prepare the model commands\n");
        return EX_USAGE;
    }
    {
        /* What parses but cannot work: refused at start; --check also looks at the files. */
        char *probs = (char *)calloc(1, SRV_OUT);
        int bad;
        if (!probs) return EX_FAIL;
        bad = rsrv_check(s.cfg, s.opts.config_path, probs, SRV_OUT);
        if (check) bad += check_files(&s, s.opts.config_path, probs, SRV_OUT);
        if (bad) {
            fprintf(stderr, "%s", probs);
            fprintf(stderr, "rsd-serve: %d problem%s in the configuration\n", bad, bad == 1 ? "" : "s");
            free(probs);
            return EX_USAGE;
        }
        free(probs);
    }
    if (check) {
        int n = rsrv_write_ini(s.cfg, s.out, SRV_OUT);
        if (n < 0) return EX_FAIL;
        fwrite(s.out, 1, (size_t)n, stdout);
        return EX_OK;
    }
    for (i = 0; i < s.cfg->nmodels; i++) mdesc[i] = s.models[i].desc;

    memset(&fd, 0, sizeof fd);
    fd.pool.max_slots = s.cfg->max_models;
    fd.pool.vram_budget_bytes = s.cfg->vram_budget_bytes;
    fd.pool.max_wait_ms = rsrv_eff_max_wait(s.cfg);
    fd.pool.max_requests = 4096;
    fd.procs.max_procs = 2 * s.cfg->max_models + 2 > RSD_PROCS_MAX ? RSD_PROCS_MAX : 2 * s.cfg->max_models + 2;
    fd.procs.term_grace_ms = s.cfg->stop_grace_ms ? s.cfg->stop_grace_ms : 1;
    fd.procs.start_deadline_ms = s.cfg->start_timeout_ms;
    fd.models = mdesc;
    fd.num_models = s.cfg->nmodels;
    fd.watchdog_interval_ms = s.cfg->watchdog_ms;
    fd.watchdog_failures = (uint32_t)rsrv_eff_wd_failures(s.cfg);
    fd.watchdog_errors = s.cfg->watchdog_ms ? (uint32_t)rsrv_eff_wd_errors(s.cfg) : 0;
    fd.watchdog_restarts = (uint32_t)rsrv_eff_wd_restarts(s.cfg);
    if (s.opts.verbose) fd.logger.fn = lib_log;
    s.fleet = rsd_fleet_create(&fd);
    if (!s.fleet) {
        fprintf(stderr, "rsd-serve: cannot create the process pool (see the messages above; --verbose for more)\n");
        return EX_FAIL;
    }

    memset(&hd, 0, sizeof hd);
    if (!resolve_listen(s.cfg->listen_host, s.listen_addr, sizeof s.listen_addr, err, sizeof err)) {
        fprintf(stderr, "rsd-serve: %s\n", err);
        rsd_fleet_destroy(s.fleet);
        return EX_FAIL;
    }
    hd.bind_host = s.listen_addr;
    hd.port = (uint16_t)s.cfg->listen_port;
    hd.max_conns = SRV_MAX_CONNS;
    hd.max_body_bytes = SRV_MAX_BODY;
    hd.max_response_bytes = SRV_RESPONSE_BYTES;
    hd.request_timeout_ms = 60000;
    if (s.opts.verbose) hd.logger.fn = lib_log;
    s.hs = rsd_http_server_create(&hd);
    if (!s.hs) {
        fprintf(stderr, "rsd-serve: cannot listen on %s:%d: %s\n", s.cfg->listen_host, s.cfg->listen_port,
                strerror(errno));
        rsd_fleet_destroy(s.fleet);
        return EX_FAIL;
    }
    memset(&cd, 0, sizeof cd);
    cd.max_requests = SRV_MAX_CONNS;
    cd.max_conns = SRV_MAX_CONNS;
    cd.max_request_bytes = SRV_MAX_BODY + 16384;
    cd.max_body_bytes = SRV_UP_READ;
    cd.total_timeout_ms = SRV_UPSTREAM_TIMEOUT_MS;
    if (s.opts.verbose) cd.logger.fn = lib_log;
    s.hc = rsd_http_client_create(&cd);
    if (!s.hc) {
        fprintf(stderr, "rsd-serve: cannot create the HTTP client\n");
        rsd_http_server_destroy(s.hs);
        rsd_fleet_destroy(s.fleet);
        return EX_FAIL;
    }
    /* Nothing a terminal or an ssh logout sends ends us ungracefully: SIGINT, SIGTERM
       and SIGQUIT stop every process first; SIGHUP reloads the configuration; SIGPIPE
       is ignored (a write to a closed socket or stderr fails with EPIPE instead). The
       handlers only count and write a byte to the self-pipe the loop polls. */
    if (pipe(wake) != 0 || fcntl(wake[0], F_SETFL, O_NONBLOCK) != 0 || fcntl(wake[1], F_SETFL, O_NONBLOCK) != 0 ||
        fcntl(wake[0], F_SETFD, FD_CLOEXEC) != 0 || fcntl(wake[1], F_SETFD, FD_CLOEXEC) != 0) {
        fprintf(stderr, "rsd-serve: cannot create the self-pipe: %s\n", strerror(errno));
        rsd_http_client_destroy(s.hc);
        rsd_http_server_destroy(s.hs);
        rsd_fleet_destroy(s.fleet);
        return EX_FAIL;
    }
    g_wake_fd = wake[1];
    {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        (void)sigaction(SIGINT, &sa, NULL);
        (void)sigaction(SIGTERM, &sa, NULL);
        (void)sigaction(SIGQUIT, &sa, NULL);
        (void)sigaction(SIGHUP, &sa, NULL);
    }

    printf("rsd-serve: listening on http://%s%s%s:%u\n", strchr(s.listen_addr, ':') ? "[" : "",
           s.listen_addr, strchr(s.listen_addr, ':') ? "]" : "", (unsigned)rsd_http_server_port(s.hs));
    fflush(stdout);
    if (!s.opts.quiet)
        logf_("%d model%s, at most %d resident, llama-server: %s", s.cfg->nmodels, s.cfg->nmodels == 1 ? "" : "s",
              s.cfg->max_models, s.cfg->llama_server);
    /* Boot policy (P37): pinned models are loaded at once, then preload ones (not
       pinned: evicted like any other when room is needed). */
    for (i = 0; i < s.cfg->nmodels; i++)
        if (s.cfg->models[i].pinned) (void)rsd_fleet_load(s.fleet, i, rsd_now_ms());
    for (i = 0; i < s.cfg->nmodels; i++)
        if (s.cfg->models[i].preload && !s.cfg->models[i].pinned) (void)rsd_fleet_load(s.fleet, i, rsd_now_ms());

    for (;;) {
        uint64_t now = rsd_now_ms(), dl, d2;
        s.now = now;
        rsd_http_server_event sev;
        rsd_http_event cev;
        rsd_fleet_event fev;
        int n = 0, k, timeout;
        {
            char drain[64]; /* the self-pipe's bytes: they only woke the poll */
            while (read(wake[0], drain, sizeof drain) > 0) {}
        }
        if (g_hangups) {
            static reload_out ro;
            g_hangups = 0;
            if (!s.stopping) reload_log(&ro, do_reload(&s, now, &ro), "SIGHUP");
        }
        if (g_signals && !s.stopping) {
            s.stopping = true;
            s.stop_at = now;
            logf_("stopping: every process gets SIGTERM (SIGKILL after %u ms)", (unsigned)fd.procs.term_grace_ms);
            (void)rsd_fleet_stop(s.fleet, now);
        }
        if (g_signals > 1) {
            logf_("second signal: killing every process now");
            rc = EX_FAIL;
            break;
        }
        (void)rsd_http_server_step(s.hs, now);
        while (rsd_http_server_next_event(s.hs, &sev)) {
            if (sev.type == RSD_HTTP_SEV_REQUEST) on_request(&s, &sev, now);
            else if (sev.type == RSD_HTTP_SEV_CLOSED) on_closed(&s, sev.req, now);
        }
        (void)rsd_fleet_step(s.fleet, now);
        while (rsd_fleet_next_event(s.fleet, &fev)) on_fleet(&s, &fev, now);
        (void)rsd_http_client_step(s.hc, now);
        while (rsd_http_next_event(s.hc, &cev)) on_upstream(&s, &cev, now);
        jobs_service(&s, now);
        /* releases above may have granted waiting requests: pick them up at once */
        (void)rsd_fleet_step(s.fleet, now);
        while (rsd_fleet_next_event(s.fleet, &fev)) on_fleet(&s, &fev, now);
        (void)rsd_http_server_step(s.hs, now); /* flush what was written */
        if (s.stopping && rsd_fleet_idle(s.fleet)) {
            logf_("stopped");
            break;
        }
        if (s.stopping && now - s.stop_at > (uint64_t)fd.procs.term_grace_ms + 10000) {
            logf_("processes did not exit in time; killing them");
            break;
        }
        dl = rsd_http_server_next_deadline(s.hs);
        d2 = rsd_http_client_next_deadline(s.hc);
        if (d2 < dl) dl = d2;
        d2 = rsd_fleet_next_deadline(s.fleet);
        if (d2 < dl) dl = d2;
        d2 = jobs_deadline(&s);
        if (d2 < dl) dl = d2;
        k = rsd_http_server_pollfds(s.hs, fds, SRV_MAX_FDS);
        if (k > 0) n += k > SRV_MAX_FDS ? SRV_MAX_FDS : k;
        k = rsd_http_client_pollfds(s.hc, fds + n, SRV_MAX_FDS - n);
        if (k > 0) n += k > SRV_MAX_FDS - n ? SRV_MAX_FDS - n : k;
        k = rsd_fleet_pollfds(s.fleet, fds + n, SRV_MAX_FDS - n);
        if (k > 0) n += k > SRV_MAX_FDS - n ? SRV_MAX_FDS - n : k;
        if (n < SRV_MAX_FDS) {
            fds[n].fd = wake[0];
            fds[n].events = RSD_POLLIN;
            fds[n++].revents = 0;
        }
        now = rsd_now_ms();
        if (dl == RSD_DEADLINE_NONE || dl == UINT64_MAX) timeout = 1000;
        else if (dl <= now) timeout = 0;
        else timeout = dl - now > 1000 ? 1000 : (int)(dl - now);
        if (poll((struct pollfd *)(void *)fds, (nfds_t)n, timeout) < 0 && errno != EINTR) {
            logf_("poll: %s", strerror(errno));
            rc = EX_FAIL;
            break;
        }
    }
    g_wake_fd = -1;
    close(wake[0]);
    close(wake[1]);
    for (i = 0; i < SRV_MAX_CONNS; i++) free(s.jobs[i].stash);
    rsd_http_client_destroy(s.hc);
    rsd_http_server_destroy(s.hs);
    rsd_fleet_destroy(s.fleet);
    free(mdesc);
    free(s.models);
    free(s.out);
    free(s.cfg);
    free(fds);
    free(argv2);
    return rc;
}
