/* bench/real.c -- the library against a REAL llama.cpp llama-server (issue 8 part 5).

   Tiny models (tests/tiny_gguf.h) on the spot; the binary as tests/real_server.h finds it
   ($LLAMA_SERVER, ../shared/llama.cpp/bin/llama-server, PATH); skipped with one line when
   there is none. Every figure is ours next to its peer, measured in this one run:

   1. Requests and wall time per ensure on the common paths of a real router
      (--models-preset with tiny models, --models-max 2): keep (already resident), free
      slot, swap, swap beside a pinned model. Ours = rsd_ensurer_sync (state directory, no
      decision cache); peer = the replay of upstream's (clio's) call sequence from
      bench/upstream.h, the same one bench/reconcile.c runs against rsd-sim, on the
      same router. Requests are each side's own count (the router logs none). What is
      resident afterwards is printed too: the path may go wrong on the real router.
   2. Loaded-to-return: the router's SSE "loaded" event for the model (a subscriber of
      GET /models/sse in a forked process of this bench stamps it with CLOCK_MONOTONIC)
      to the ensure returning, over loads from an empty router; ours and upstream's
      replay interleaved load by load.
   3. rsd-serve (build/bin/rsd-serve, the same llama-server as its children, the
      same tiny models, max_models 2) beside the llama.cpp router itself (--models-max 2):
      added latency per non-streaming chat (through the front vs straight to its own
      child for that model, medians, interleaved), time to first byte of a streamed chat
      that needs a cold swap, throughput of 64 concurrent streaming clients (one
      non-blocking rsd_http_client, 64 slots; 3 interleaved rounds, median), and the front
      process's VmRSS under that load (peak of /proc/PID/status samples every 50 ms).
      Beside the cold swaps, the same swaps without a front (bare_swap: stop the older
      child, spawn, read its output until "model loaded", ask it straight), and the cold
      swaps of further rsd-serve builds when $RSD_SERVE lists them (a:b:c).
   Every llama-server runs with --threads 1: with its default thread count on a loaded
   2-core machine a tiny model took ~500 ms per token (spinning threads), with one ~0.05 ms.
   The machine may be shared: these are wall-clock figures; the load average is printed.
   usage: real [FIGURES]   ("3" = figure 3 only; default "123"). rsd-serve is
   $RSD_SERVE or build/bin/rsd-serve ($RSD_SERVE=a:b:c: a, with b and c measured
   beside it in the cold swaps, interleaved swap by swap, to compare builds); its log is
   kept in the run's temp dir and its tail printed when a request through it failed.
   $RSD_SWAPS: cold swaps per side (default 21, at most 201). */
#define RESIDENCY_IMPLEMENTATION
#include "residency_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "upstream.h"
#include "../tests/real_server.h"
#include "../tests/listen_proc.h"

static char g_bin[1024], g_dir[512];
static real_server g_router;   /* stopped by die() */
static listen_proc g_serve;
enum { F3_EXTRA = 7 };         /* further rsd-serve builds ($RSD_SERVE a:b:c): cold swaps only */
static listen_proc g_extra[F3_EXTRA];
static int g_nextra;
static const char *g_extra_bin[F3_EXTRA];
typedef struct bare_child { pid_t pid; int out; int port; } bare_child;
static bare_child g_bare[2];   /* the bare spawn-and-wait's children, oldest first */
static pid_t g_watch;          /* the SSE subscriber */
static rsd_http_client *g_ctl; /* control traffic: no keep-alive (the router closes idle sockets) */
static rsd_json_tok g_toks[16384];

static void stop_all(void) {
    int i;
    if (g_watch > 0) { kill(g_watch, SIGTERM); waitpid(g_watch, NULL, 0); g_watch = 0; }
    if (g_serve.pid > 0) (void)listen_proc_stop(&g_serve);
    for (i = 0; i < g_nextra; i++)
        if (g_extra[i].pid > 0) (void)listen_proc_stop(&g_extra[i]);
    for (i = 0; i < 2; i++)
        if (g_bare[i].pid > 0) {
            kill(g_bare[i].pid, SIGKILL);
            waitpid(g_bare[i].pid, NULL, 0);
            close(g_bare[i].out);
            g_bare[i].pid = 0;
        }
    if (g_router.pid > 0) (void)real_stop(&g_router);
}

/* A hard bound on the whole run: stop the servers (kill and waitpid only) and exit. */
static void on_alarm(int sig) {
    (void)sig;
    stop_all();
    _exit(3);
}

static void die(const char *what) {
    fprintf(stderr, "bench-real: FAILED: %s\n", what);
    stop_all();
    if (g_dir[0]) real_rmdir(g_dir);
    exit(1);
}

static int req(rsd_http_client *c, const char *method, const char *url, const char *body, char *buf, size_t cap) {
    return bench_req(c, method, url, body, 120000, buf, cap);
}

static double loadavg1(void) {
    FILE *f = fopen("/proc/loadavg", "r");
    double v = -1;
    if (f) { if (fscanf(f, "%lf", &v) != 1) v = -1; fclose(f); }
    return v;
}

static long vm_rss_kb(pid_t pid) {
    char path[64], line[256];
    long kb = -1;
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (!(f = fopen(path, "r"))) return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) { kb = atol(line + 6); break; }
    fclose(f);
    return kb;
}

/* ---- the router's listing ------------------------------------------------------------ */
/* The control side of upstream.h's adapter: its listing reader and its POST. */
static up_ctx *g_cu;
static char g_cu_base[96];

static void ctl_bind(const char *url) {
    snprintf(g_cu_base, sizeof g_cu_base, "%s/v1", url);
    g_cu->c = g_ctl;
    g_cu->base = g_cu_base;
    snprintf(g_cu->root, sizeof g_cu->root, "%s", url);
}

/* "a b" of the ids listed loaded/loading/sleeping, in listing order. */
static void resident_str(const char *url, char *out, size_t cap) {
    up_listing l;
    size_t len = 0;
    int i;
    ctl_bind(url);
    out[0] = 0;
    if (up_fetch_models(g_cu, &l) < 0) { snprintf(out, cap, "(listing failed)"); return; }
    for (i = 0; i < l.n; i++)
        if (up_resident_state(l.m[i].state) && len + 1 < cap) {
            int w = snprintf(out + len, cap - len, "%s%s", len ? " " : "", l.m[i].id);
            if (w > 0) len += (size_t)w < cap - len ? (size_t)w : cap - len - 1;
        }
    if (!len) snprintf(out, cap, "(none)");
}

/* Brings the router to exactly `want` loaded: unload the others and wait until they are
   listed unloaded (the July router counts a stopping model against --models-max), then
   load the missing ones one at a time, each waited for. 0, or -1 after 60 s. */
static int real_set(const char *url, const char *const *want) {
    double until = now_us() + 60e6;
    up_listing l;
    double asked[UP_MODELS] = {0}; /* when the unload was sent (listing order is stable: by id) */
    int i, w;
    ctl_bind(url);
    while (now_us() < until) {
        bool settled = true, busy = false;
        const char *load = NULL;
        if (up_fetch_models(g_cu, &l) < 0) return -1;
        for (i = 0; i < l.n; i++) {
            bool wanted = false;
            for (w = 0; want[w]; w++) if (!strcmp(want[w], l.m[i].id)) wanted = true;
            if (!wanted && up_resident_state(l.m[i].state)) {
                settled = false;
                busy = true;
                if (l.m[i].state != UP_ST_LOADING && now_us() - asked[i] > 1e6) { /* again after 1 s */
                    (void)up_post(g_cu, "unload", l.m[i].id);
                    asked[i] = now_us();
                }
            } else if (wanted && l.m[i].state != UP_ST_LOADED) {
                settled = false;
                if (l.m[i].state == UP_ST_LOADING) busy = true;
                else if (!load) load = l.m[i].id;
            }
        }
        if (settled) return 0;
        if (!busy && load) (void)up_post(g_cu, "load", load);
        sleep_ms(5);
    }
    return -1;
}

/* The child port of model id from a router-style listing (status.args "--port" N), or 0. */
static int child_port(const char *url, const char *id) {
    static char body[262144];
    char u[160];
    rsd_json_doc doc;
    int e, data, port = 0;
    snprintf(u, sizeof u, "%s/models", url);
    if (req(g_ctl, "GET", u, NULL, body, sizeof body) != 200) return 0;
    if (rsd_json_parse(&doc, body, strlen(body), g_toks, (uint32_t)(sizeof g_toks / sizeof g_toks[0])) <= 0) return 0;
    if ((data = rsd_json_find(&doc, 0, "data")) < 0) return 0;
    for (e = rsd_json_child(&doc, data); e >= 0; e = rsd_json_next(&doc, e)) {
        int k = rsd_json_find(&doc, e, "id"), st, args, a;
        if (k < 0 || !rsd_json_str_eq(&doc, k, id)) continue;
        if ((st = rsd_json_find(&doc, e, "status")) < 0 || (args = rsd_json_find(&doc, st, "args")) < 0) return 0;
        for (a = rsd_json_child(&doc, args); a >= 0; a = rsd_json_next(&doc, a))
            if (rsd_json_str_eq(&doc, a, "--port") && (a = rsd_json_next(&doc, a)) >= 0) {
                char num[16];
                if (rsd_json_str(&doc, a, num, sizeof num, NULL) == RSD_OK) port = atoi(num);
                break;
            }
        break;
    }
    return port;
}

/* ---- the SSE subscriber: a forked process stamping each status event ---------------- */
/* Lines on the pipe: "ready STATUS" once the stream's head is in, then "T_US MODEL STATUS". */
static int g_watch_out;

static void watch_on_sse(void *user, const rsd_sse_event *ev) {
    static rsd_json_tok t[2048];
    rsd_json_doc doc;
    char model[96] = "", status[32] = "", line[200];
    double t_us = now_us();
    int k, d;
    (void)user;
    if (rsd_json_parse(&doc, ev->data.ptr, ev->data.len, t, (uint32_t)(sizeof t / sizeof t[0])) <= 0) return;
    if ((k = rsd_json_find(&doc, 0, "model")) >= 0) rsd_json_str(&doc, k, model, sizeof model, NULL);
    if ((d = rsd_json_find(&doc, 0, "data")) >= 0 && (k = rsd_json_find(&doc, d, "status")) >= 0)
        rsd_json_str(&doc, k, status, sizeof status, NULL);
    if (!model[0] || !status[0]) return;
    k = snprintf(line, sizeof line, "%.0f %s %s\n", t_us, model, status);
    if (k > 0 && write(g_watch_out, line, (size_t)k) < 0) _exit(1);
}

static void watch_child(const char *url) {
    rsd_http_client_desc cd;
    rsd_http_client *c;
    rsd_http_request q;
    rsd_http_req_h h;
    char u[160];
    bool ready = false;
    memset(&cd, 0, sizeof cd);
    cd.max_requests = 1;
    cd.max_conns = 1;
    c = rsd_http_client_create(&cd);
    snprintf(u, sizeof u, "%s/models/sse", url);
    memset(&q, 0, sizeof q);
    q.url = u;
    q.on_sse = watch_on_sse;
    q.total_timeout_ms = RSD_TIMEOUT_NONE;
    if (!c || rsd_http_send(c, &q, rsd_now_ms(), &h) != RSD_OK) _exit(1);
    for (;;) {
        rsd_pollfd fds[4];
        rsd_http_event ev;
        rsd_http_req_info hi;
        int n = rsd_http_client_pollfds(c, fds, 4);
        uint64_t dl = rsd_http_client_next_deadline(c), now = rsd_now_ms();
        int ms = dl == RSD_NO_DEADLINE ? 1000 : dl <= now ? 0 : (int)(dl - now > 1000 ? 1000 : dl - now);
        (void)poll((struct pollfd *)(void *)fds, (nfds_t)n, ms);
        rsd_http_client_step_polled(c, rsd_now_ms(), fds, n);
        if (!ready && rsd_http_client_query_req(c, h, &hi) == RSD_OK) {
            char line[32];
            int k = snprintf(line, sizeof line, "ready %d\n", hi.status);
            if (write(g_watch_out, line, (size_t)k) < 0) _exit(1);
            ready = true;
        }
        if (rsd_http_next_event(c, &ev)) {
            if (write(g_watch_out, "end\n", 4) < 0) {}
            _exit(0);
        }
    }
}

static int g_watch_in = -1;
static char g_wbuf[65536];
static size_t g_wlen;

/* The next line from the subscriber within timeout_ms (NUL-terminated in out), or -1. */
static int watch_line(char *out, size_t cap, int timeout_ms) {
    double until = now_us() + timeout_ms * 1e3;
    for (;;) {
        char *nl = (char *)memchr(g_wbuf, '\n', g_wlen);
        struct pollfd p;
        ssize_t r;
        double left;
        if (nl) {
            size_t n = (size_t)(nl - g_wbuf);
            snprintf(out, cap, "%.*s", (int)n, g_wbuf);
            memmove(g_wbuf, nl + 1, g_wlen - n - 1);
            g_wlen -= n + 1;
            return 0;
        }
        left = (until - now_us()) / 1e3;
        if (left < 0 || g_wlen == sizeof g_wbuf) return -1;
        p.fd = g_watch_in;
        p.events = POLLIN;
        if (poll(&p, 1, (int)left) <= 0) { if (timeout_ms == 0) return -1; continue; }
        r = read(g_watch_in, g_wbuf + g_wlen, sizeof g_wbuf - g_wlen);
        if (r <= 0) return -1;
        g_wlen += (size_t)r;
    }
}

static int watch_start(const char *url) {
    int fds[2];
    char line[64];
    if (pipe(fds) != 0) return -1;
    fflush(stdout);
    g_watch = fork();
    if (g_watch < 0) { g_watch = 0; return -1; }
    if (g_watch == 0) {
        close(fds[0]);
        g_watch_out = fds[1];
        watch_child(url);
        _exit(0);
    }
    close(fds[1]);
    g_watch_in = fds[0];
    if (watch_line(line, sizeof line, 20000) != 0 || strcmp(line, "ready 200") != 0) return -1;
    return 0;
}

/* Drops what the subscriber has said so far. */
static void watch_drain(void) {
    char line[256];
    while (watch_line(line, sizeof line, 0) == 0) {}
}

/* The stamp (us) of the first "MODEL STATUS" line within timeout_ms, or -1. */
static double watch_wait(const char *model, const char *status, int timeout_ms) {
    double until = now_us() + timeout_ms * 1e3;
    char line[256], m[96], s[32];
    double t;
    while (now_us() < until) {
        if (watch_line(line, sizeof line, (int)((until - now_us()) / 1e3) + 1) != 0) return -1;
        if (sscanf(line, "%lf %95s %31s", &t, m, s) == 3 && !strcmp(m, model) && !strcmp(s, status)) return t;
    }
    return -1;
}

/* ---- ours ------------------------------------------------------------------------------ */
static rsd_ensurer *new_ensurer(const char *state_dir) {
    rsd_ensurer_desc d;
    memset(&d, 0, sizeof d);
    d.state_dir = state_dir;
    d.ignore_env = true;
    d.no_cache = true;
    return rsd_ensurer_create(&d);
}

/* rsd_ensurer_sync on the router (res->requests = what it sent); 0 when the model ends resident. */
static int our_ensure(rsd_ensurer *e, const char *url, const char *model, rsd_ensure_result *res) {
    rsd_ensure_req q;
    int rc;
    memset(&q, 0, sizeof q);
    q.url = url;
    q.model = model;
    q.runtime = RSD_RUNTIME_LLAMACPP;
    q.timeout_ms = 60000;
    rc = rsd_ensurer_sync(e, &q, res);
    if (rc != RSD_OK || res->outcome != RSD_OUTCOME_RESIDENT) {
        fprintf(stderr, "bench-real: ours: ensure %s: %s, outcome %s: %s\n", model, rsd_result_str(rc),
                rsd_outcome_str(res->outcome), res->message);
        return -1;
    }
    return 0;
}

/* ---- figure 1: requests and wall time per path ------------------------------------------ */
enum { F1_RUNS = 5 };
typedef struct f1_result {
    double ours_req[F1_RUNS], peer_req[F1_RUNS], ours_ms[F1_RUNS], peer_ms[F1_RUNS];
    int ours_fail, peer_fail, ours_pinned_lost, peer_pinned_lost;
    int ours_displaced, ours_restored, peer_restored; /* runs where the router pushed a model out itself / it was loaded back */
    char ours_after[96], peer_after[96];  /* resident afterwards (last run) */
} f1_result;

static bool listed(const char *resident, const char *id) {
    const char *p = resident;
    size_t n = strlen(id);
    while ((p = strstr(p, id)) != NULL) {
        if ((p == resident || p[-1] == ' ') && (p[n] == ' ' || !p[n])) return true;
        p += n;
    }
    return false;
}

static void figure1(const char *url, const char *state_dir, f1_result *out) {
    rsd_ensurer *e = new_ensurer(state_dir);
    up_ctx *u;
    char base[96];
    int p, r;
    snprintf(base, sizeof base, "%s/v1", url);
    u = up_new(base, url, state_dir);
    if (!e || !u) die("create failed");
    for (p = 0; p < UP_PATHS; p++) {
        const up_path *path = &up_paths[p];
        bool pinned_before = false;
        int k;
        for (k = 0; path->before[k]; k++) if (!strcmp(path->before[k], "p")) pinned_before = true;
        for (r = 0; r < F1_RUNS; r++) {
            rsd_ensure_result res;
            double w0;
            if (real_set(url, path->before) != 0) die("the router did not settle");
            w0 = now_us();
            if (our_ensure(e, url, path->keep, &res) != 0) out[p].ours_fail++;
            out[p].ours_ms[r] = (now_us() - w0) / 1e3;
            {
                bool displaced = false, restored = false;
                for (k = 0; k < res.n_evicted; k++) {
                    if (res.evicted[k].displaced) displaced = true;
                    if (res.evicted[k].restored) restored = true;
                }
                out[p].ours_displaced += displaced;
                out[p].ours_restored += restored;
            }
            out[p].ours_req[r] = res.requests;
            resident_str(url, out[p].ours_after, sizeof out[p].ours_after);
            if (pinned_before && !listed(out[p].ours_after, "p")) out[p].ours_pinned_lost++;
            if (real_set(url, path->before) != 0) die("the router did not settle");
            w0 = now_us();
            if (up_ensure(u, path->keep) != 0) out[p].peer_fail++;
            out[p].peer_ms[r] = (now_us() - w0) / 1e3;
            out[p].peer_req[r] = u->requests;
            out[p].peer_restored += u->n_restored > 0;
            resident_str(url, out[p].peer_after, sizeof out[p].peer_after);
            if (pinned_before && !listed(out[p].peer_after, "p")) out[p].peer_pinned_lost++;
        }
    }
    up_free(u);
    rsd_ensurer_destroy(e);
}

/* ---- figure 2: loaded event -> ensure returns --------------------------------------------- */
enum { F2_LOADS = 36 };
typedef struct f2_result {
    double ours[F2_LOADS], peer[F2_LOADS], ours_req[F2_LOADS], peer_req[F2_LOADS];
    int n_ours, n_peer, missed;
} f2_result;

static void figure2(const char *url, const char *state_dir, f2_result *out) {
    static const char *const none[] = {NULL};
    static const char *const ids[] = {"a", "b", "c"};
    rsd_ensurer *e = new_ensurer(state_dir);
    up_ctx *u;
    char base[96];
    int i;
    snprintf(base, sizeof base, "%s/v1", url);
    u = up_new(base, url, state_dir);
    if (!e || !u) die("create failed");
    for (i = 0; i < F2_LOADS; i++) {
        const char *id = ids[i % 3];
        rsd_ensure_result res;
        double ret, t;
        /* ours */
        if (real_set(url, none) != 0) die("the router did not settle");
        watch_drain();
        if (our_ensure(e, url, id, &res) == 0) {
            ret = now_us();
            if ((t = watch_wait(id, "loaded", 10000)) < 0) out->missed++;
            else {
                out->ours[out->n_ours] = (ret - t) / 1e3;
                out->ours_req[out->n_ours++] = res.requests;
            }
        }
        /* upstream */
        if (real_set(url, none) != 0) die("the router did not settle");
        watch_drain();
        if (up_ensure(u, id) == 0) {
            ret = now_us();
            if ((t = watch_wait(id, "loaded", 10000)) < 0) out->missed++;
            else {
                out->peer[out->n_peer] = (ret - t) / 1e3;
                out->peer_req[out->n_peer++] = u->requests;
            }
        }
    }
    up_free(u);
    rsd_ensurer_destroy(e);
}

/* ---- figure 3: rsd-serve beside the router --------------------------------------------------- */
enum { F3_LAT = 150, F3_SWAPS_MAX = 201, F3_STREAMS = 64, F3_TOTAL = 256, F3_TOKENS = 16, F3_ROUNDS = 3 };

static int g_swaps = 21; /* cold swaps per side: $RSD_SWAPS (at most F3_SWAPS_MAX) */

static const char *chat_body(char *buf, size_t cap, const char *model, bool stream, int max_tokens) {
    snprintf(buf, cap, "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}],"
                       "\"max_tokens\":%d%s}", model, max_tokens, stream ? ",\"stream\":true" : "");
    return buf;
}

typedef struct f3_side {
    double through[F3_LAT], direct[F3_LAT];
    double ttfb[F3_SWAPS_MAX];
    int n_ttfb, lat_fail, swap_fail;
    /* 64 streams */
    double secs[F3_ROUNDS], tps[F3_ROUNDS], cps[F3_ROUNDS]; /* per round: s, tokens/s, chats/s */
    int rounds;
    long tokens, done_ok, failed, no_done, rss_idle_kb, rss_peak_kb;
    long fail_502, fail_503, fail_transport;
    char first_fail[96];  /* the first stream failure, as "status 502" or a result name */
} f3_side;

/* The time from sending a streamed chat to its first body byte (ms), or -1. */
typedef struct ttfb_ctx { double first_us; } ttfb_ctx;
static void ttfb_on_body(void *user, const char *data, size_t len) {
    ttfb_ctx *t = (ttfb_ctx *)user;
    (void)data;
    if (len && t->first_us == 0) t->first_us = now_us();
}

static double ttfb_once(rsd_http_client *c, const char *url, const char *model) {
    char u[160], body[256];
    rsd_http_request q;
    rsd_http_event ev;
    ttfb_ctx t = {0};
    double t0;
    snprintf(u, sizeof u, "%s/v1/chat/completions", url);
    memset(&q, 0, sizeof q);
    q.method = "POST";
    q.url = u;
    q.content_type = "application/json";
    q.body = chat_body(body, sizeof body, model, true, 4);
    q.body_len = strlen(body);
    q.on_body = ttfb_on_body;
    q.user = &t;
    q.total_timeout_ms = 120000;
    t0 = now_us();
    if (rsd_http_request_sync(c, &q, &ev) != RSD_OK || ev.status != 200 || t.first_us == 0) {
        fprintf(stderr, "bench-real: streamed chat for %s via %s: %s, status %d\n", model, url, rsd_result_str(ev.result), ev.status);
        return -1;
    }
    return (t.first_us - t0) / 1e3;
}

/* The bare spawn-and-wait: the least a front must do for a cold swap, done by the bench
   itself with no front: SIGTERM the older of its two children and reap it, spawn
   llama-server with the arguments rsd-serve gives its children (stdout and stderr on a
   pipe, stdin /dev/null, LLAMA_SERVER_ROUTER_PORT unset), read that pipe until the line
   "model loaded" (llama-server answers from then on), then the streamed chat straight to
   the child on a new connection. Stamps per swap, ms: stop (SIGTERM to reaped), load
   (spawn to the line), ask (the line to the first byte); spawn-and-wait = load + ask,
   swap = stop + load + ask. */
typedef struct bare_side {
    double swap[F3_SWAPS_MAX], wait[F3_SWAPS_MAX], stop[F3_SWAPS_MAX], load[F3_SWAPS_MAX], ask[F3_SWAPS_MAX];
    int n, fail;
} bare_side;

static int free_port(void) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    if (fd < 0) return -1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* Reads what child k wrote so far (its pipe must not fill); true once `line` was seen. */
static bool bare_drain(bare_child *k, const char *line, char *acc, size_t cap, size_t *len) {
    char buf[4096];
    ssize_t r;
    bool seen = false;
    while ((r = read(k->out, buf, sizeof buf)) > 0) {
        size_t n = (size_t)r, keep;
        if (!acc) continue;
        if (*len + n >= cap) { /* keep the tail: the line may straddle two reads */
            keep = cap / 2 < *len ? cap / 2 : *len;
            memmove(acc, acc + *len - keep, keep);
            *len = keep;
        }
        if (n >= cap - *len) n = cap - *len - 1;
        memcpy(acc + *len, buf, n);
        *len += n;
        acc[*len] = 0;
        if (strstr(acc, line)) seen = true;
    }
    return seen;
}

static void bare_stop(bare_child *k) {
    if (k->pid <= 0) return;
    kill(k->pid, SIGTERM);
    waitpid(k->pid, NULL, 0);
    close(k->out);
    k->pid = 0;
}

static int bare_spawn(bare_child *k, const char *model) {
    int p[2];
    char path[700], port[16];
    pid_t pid;
    if ((k->port = free_port()) <= 0 || pipe(p) != 0) return -1;
    snprintf(path, sizeof path, "%s/%s.gguf", g_dir, model);
    snprintf(port, sizeof port, "%d", k->port);
    pid = fork();
    if (pid < 0) { close(p[0]); close(p[1]); return -1; }
    if (pid == 0) {
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) dup2(nul, 0);
        dup2(p[1], 1);
        dup2(p[1], 2);
        close(p[0]);
        unsetenv("LLAMA_SERVER_ROUTER_PORT");
        execl(g_bin, g_bin, "-m", path, "--host", "127.0.0.1", "--port", port, "-c", "512", "-np", "4", "--alias", model,
              "--threads", "1", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    (void)fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
    k->pid = pid;
    k->out = p[0];
    return 0;
}

/* One cold swap of the bare side to `model`: 0 and the stamps, or -1. */
static int bare_swap(rsd_http_client *c, const char *model, bare_side *b) {
    static char acc[16384];
    size_t len = 0;
    char url[64];
    double t0, t1, t2, t3, ask;
    struct pollfd pf;
    int i;
    for (i = 0; i < 2; i++) (void)bare_drain(&g_bare[i], "", NULL, 0, NULL);
    t0 = now_us();
    bare_stop(&g_bare[0]);
    t1 = now_us();
    g_bare[0] = g_bare[1];
    memset(&g_bare[1], 0, sizeof g_bare[1]);
    if (bare_spawn(&g_bare[1], model) != 0) return -1;
    t2 = now_us();
    pf.fd = g_bare[1].out;
    pf.events = POLLIN;
    acc[0] = 0;
    for (;;) {
        if (bare_drain(&g_bare[1], "model loaded", acc, sizeof acc, &len)) break;
        if (poll(&pf, 1, 60000) <= 0 || (pf.revents & (POLLHUP | POLLERR) && !(pf.revents & POLLIN))) return -1;
    }
    t3 = now_us();
    snprintf(url, sizeof url, "http://127.0.0.1:%d", g_bare[1].port);
    if ((ask = ttfb_once(c, url, model)) < 0) return -1;
    b->stop[b->n] = (t1 - t0) / 1e3;
    b->load[b->n] = (t3 - t2) / 1e3;
    b->ask[b->n] = ask;
    b->wait[b->n] = (t3 - t1) / 1e3 + ask;
    b->swap[b->n] = (t3 - t0) / 1e3 + ask;
    b->n++;
    return 0;
}

/* 64 streams */
typedef struct stream_slot { long tokens; bool done_seen; } stream_slot;
static void stream_on_sse(void *user, const rsd_sse_event *ev) {
    stream_slot *s = (stream_slot *)user;
    if (ev->data.len == 6 && !memcmp(ev->data.ptr, "[DONE]", 6)) s->done_seen = true;
    else if (ev->data.len && memchr(ev->data.ptr, '{', ev->data.len)) s->tokens++;
}

static void streams(const char *url, const char *model, pid_t front, f3_side *out) {
    static stream_slot slots[F3_STREAMS];
    rsd_http_client_desc cd;
    rsd_http_client *c;
    rsd_http_request q;
    char u[160], body[256];
    int sent = 0, i, finished = 0;
    double t0, next_sample;
    memset(&cd, 0, sizeof cd);
    cd.max_requests = F3_STREAMS;
    cd.max_conns = F3_STREAMS;
    cd.max_body_bytes = 32768;
    c = rsd_http_client_create(&cd);
    if (!c) die("64-slot client");
    snprintf(u, sizeof u, "%s/v1/chat/completions", url);
    memset(&q, 0, sizeof q);
    q.method = "POST";
    q.url = u;
    q.content_type = "application/json";
    q.body = chat_body(body, sizeof body, model, true, F3_TOKENS);
    q.body_len = strlen(body);
    q.on_sse = stream_on_sse;
    q.total_timeout_ms = 120000;
    long tok0 = out->tokens, ok0 = out->done_ok;
    double secs;
    if (out->rounds == 0) out->rss_peak_kb = out->rss_idle_kb = vm_rss_kb(front);
    memset(slots, 0, sizeof slots);
    t0 = now_us();
    next_sample = t0;
    for (i = 0; i < F3_STREAMS; i++) {
        rsd_http_req_h h;
        q.user = &slots[i];
        if (rsd_http_send(c, &q, rsd_now_ms(), &h) != RSD_OK) die("send of a stream");
        sent++;
    }
    while (finished < F3_TOTAL) {
        static rsd_pollfd fds[F3_STREAMS + 4];
        rsd_http_event ev;
        int n = rsd_http_client_pollfds(c, fds, F3_STREAMS + 4);
        uint64_t dl = rsd_http_client_next_deadline(c), now = rsd_now_ms();
        int ms = dl == RSD_NO_DEADLINE ? 50 : dl <= now ? 0 : (int)(dl - now > 50 ? 50 : dl - now);
        (void)poll((struct pollfd *)(void *)fds, (nfds_t)n, ms);
        rsd_http_client_step_polled(c, rsd_now_ms(), fds, n);
        if (now_us() >= next_sample) {
            long kb = vm_rss_kb(front);
            if (kb > out->rss_peak_kb) out->rss_peak_kb = kb;
            next_sample = now_us() + 50e3;
        }
        while (rsd_http_next_event(c, &ev)) {
            stream_slot *s = (stream_slot *)ev.user;
            finished++;
            out->tokens += s->tokens;
            if (ev.result != RSD_OK || ev.status != 200) {
                out->failed++;
                if (ev.result != RSD_OK) out->fail_transport++;
                else if (ev.status == 502) out->fail_502++;
                else if (ev.status == 503) out->fail_503++;
                if (!out->first_fail[0]) {
                    if (ev.result != RSD_OK) snprintf(out->first_fail, sizeof out->first_fail, "%s", rsd_result_str(ev.result));
                    else snprintf(out->first_fail, sizeof out->first_fail, "status %d", ev.status);
                }
            }
            else if (!s->done_seen) out->no_done++;
            else out->done_ok++;
            memset(s, 0, sizeof *s);
            if (sent < F3_TOTAL) {
                rsd_http_req_h h;
                q.user = s;
                if (rsd_http_send(c, &q, rsd_now_ms(), &h) != RSD_OK) die("send of a stream");
                sent++;
            }
        }
        if (now_us() - t0 > 150e6) { fprintf(stderr, "bench-real: 64 streams: gave up after 150 s\n"); break; }
    }
    secs = (now_us() - t0) / 1e6;
    if (out->rounds < F3_ROUNDS) {
        out->secs[out->rounds] = secs;
        out->tps[out->rounds] = (double)(out->tokens - tok0) / secs;
        out->cps[out->rounds] = (double)(out->done_ok - ok0) / secs;
        out->rounds++;
    }
    rsd_http_client_destroy(c);
}

/* The cold swaps of the further rsd-serve builds, each beside the others in the one loop. */
typedef struct f3_extra { double ttfb[F3_SWAPS_MAX]; int n, fail; } f3_extra;

static void figure3(const char *serve_url, const char *router_url, f3_side *ours, f3_side *peer, f3_extra *ex,
                    bare_side *bare) {
    static const char *const cycle[] = {"tiny-c", "tiny-a", "tiny-b"};
    rsd_http_client *cs = rsd_http_client_create(NULL), *cd = rsd_http_client_create(NULL);
    rsd_http_client *cr = rsd_http_client_create(NULL), *crd = rsd_http_client_create(NULL), *cb, *cx[F3_EXTRA];
    rsd_http_client_desc bd;
    char u_s[160], u_sd[160], u_r[160], u_rd[160], body[256], buf[8192];
    int i, k, sp, rp;
    memset(&bd, 0, sizeof bd);
    bd.no_keepalive = true; /* the bare side asks each child on a new connection, as the router does */
    cb = rsd_http_client_create(&bd);
    if (!cs || !cd || !cr || !crd || !cb) die("client");
    for (k = 0; k < g_nextra; k++)
        if (!(cx[k] = rsd_http_client_create(NULL))) die("client");
    chat_body(body, sizeof body, "tiny-a", false, 4);
    snprintf(u_s, sizeof u_s, "%s/v1/chat/completions", serve_url);
    snprintf(u_r, sizeof u_r, "%s/v1/chat/completions", router_url);
    /* load tiny-a behind each front, find its child */
    if (req(cs, "POST", u_s, body, buf, sizeof buf) != 200) { fprintf(stderr, "%s\n", buf); die("first chat through rsd-serve"); }
    if (req(cr, "POST", u_r, body, buf, sizeof buf) != 200) { fprintf(stderr, "%s\n", buf); die("first chat through the router"); }
    if ((sp = child_port(serve_url, "tiny-a")) <= 0 || (rp = child_port(router_url, "tiny-a")) <= 0) die("no child port in a listing");
    snprintf(u_sd, sizeof u_sd, "http://127.0.0.1:%d/v1/chat/completions", sp);
    snprintf(u_rd, sizeof u_rd, "http://127.0.0.1:%d/v1/chat/completions", rp);
    for (i = 0; i < 20; i++) { /* warm-up */
        (void)req(cs, "POST", u_s, body, NULL, 0);
        (void)req(cd, "POST", u_sd, body, NULL, 0);
        (void)req(cr, "POST", u_r, body, NULL, 0);
        (void)req(crd, "POST", u_rd, body, NULL, 0);
    }
    for (i = 0; i < F3_LAT; i++) {
        double t0 = now_us(), t1, t2, t3, t4;
        int a = req(cs, "POST", u_s, body, NULL, 0);
        t1 = now_us();
        int b = req(cd, "POST", u_sd, body, NULL, 0);
        t2 = now_us();
        int c = req(cr, "POST", u_r, body, NULL, 0);
        t3 = now_us();
        int d = req(crd, "POST", u_rd, body, NULL, 0);
        t4 = now_us();
        if (a != 200 || b != 200) ours->lat_fail++;
        if (c != 200 || d != 200) peer->lat_fail++;
        ours->through[i] = (t1 - t0) / 1e3;
        ours->direct[i] = (t2 - t1) / 1e3;
        peer->through[i] = (t3 - t2) / 1e3;
        peer->direct[i] = (t4 - t3) / 1e3;
    }
    /* cold swaps: tiny-b fills the free slot, then c, a, b, ... each needs one */
    (void)ttfb_once(cs, serve_url, "tiny-b");
    (void)ttfb_once(cr, router_url, "tiny-b");
    for (k = 0; k < g_nextra; k++) {
        (void)ttfb_once(cx[k], g_extra[k].url, "tiny-a");
        (void)ttfb_once(cx[k], g_extra[k].url, "tiny-b");
    }
    if (bare_spawn(&g_bare[0], "tiny-a") != 0 || bare_spawn(&g_bare[1], "tiny-b") != 0) die("bare spawn");
    for (i = 0; i < g_swaps; i++) {
        double t = ttfb_once(cs, serve_url, cycle[i % 3]);
        if (t < 0) ours->swap_fail++;
        else ours->ttfb[ours->n_ttfb++] = t;
        for (k = 0; k < g_nextra; k++) {
            t = ttfb_once(cx[k], g_extra[k].url, cycle[i % 3]);
            if (t < 0) ex[k].fail++;
            else ex[k].ttfb[ex[k].n++] = t;
        }
        t = ttfb_once(cr, router_url, cycle[i % 3]);
        if (t < 0) peer->swap_fail++;
        else peer->ttfb[peer->n_ttfb++] = t;
        if (bare_swap(cb, cycle[i % 3], bare) != 0) bare->fail++;
    }
    for (i = 0; i < 2; i++) bare_stop(&g_bare[i]);
    for (k = 0; k < g_nextra; k++) {
        rsd_http_client_destroy(cx[k]);
        (void)listen_proc_stop(&g_extra[k]);
    }
    rsd_http_client_destroy(cb);
    /* 64 streams on tiny-a, loaded first */
    (void)ttfb_once(cs, serve_url, "tiny-a");
    (void)ttfb_once(cr, router_url, "tiny-a");
    rsd_http_client_destroy(cs);
    rsd_http_client_destroy(cd);
    rsd_http_client_destroy(cr);
    rsd_http_client_destroy(crd);
    for (i = 0; i < F3_ROUNDS; i++) { /* interleaved rounds: the machine's load drifts */
        streams(serve_url, "tiny-a", g_serve.pid, ours);
        streams(router_url, "tiny-a", g_router.pid, peer);
    }
}

/* ---- main ------------------------------------------------------------------------------------ */
static int write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

/* A figure whose measurement failed prints no ratio, only why, and makes the bench exit 1. */
static int g_failed;
static bool bench_ok(const char *name, bool ok, const char *why) {
    if (ok) return true;
    printf("BENCH %s failed: %s\n", name, why);
    g_failed = 1;
    return false;
}

static void print1(const f1_result *f1) {
    int p;
    for (p = 0; p < UP_PATHS; p++) {
        double oq = median(f1[p].ours_req, F1_RUNS), pq = median(f1[p].peer_req, F1_RUNS);
        double om = median(f1[p].ours_ms, F1_RUNS), pm = median(f1[p].peer_ms, F1_RUNS);
        char name[96];
        snprintf(name, sizeof name, "real_wall_%s", up_paths[p].name);
        if (!bench_ok(name, !f1[p].ours_fail && !f1[p].peer_fail, "some ensures failed (see the table)")) continue;
        printf("BENCH real_requests_%s ours=%.0f peer=%.0f unit=requests ratio=%.2f\n", up_paths[p].name, oq, pq, pq > 0 ? oq / pq : 0);
        printf("BENCH real_wall_%s ours=%.2f peer=%.2f unit=ms ratio=%.3f\n", up_paths[p].name, om, pm, pm > 0 ? om / pm : 0);
    }
    printf("\n1. common paths on the real router (--models-max 2, tiny models, p tagged pinned:true), %d runs each,\n"
           "   ours and upstream's replay interleaved; requests as each side counted them\n", F1_RUNS);
    printf("   %-28s %9s %9s %10s %10s  %-6s %-6s  %s\n", "path", "req ours", "upstream", "ms ours", "upstream", "failed", "", "resident after (last run): ours | upstream");
    for (p = 0; p < UP_PATHS; p++) {
        const f1_result *r = &f1[p];
        printf("   %-28s %9.0f %9.0f %10.2f %10.2f  %d/%-4d     %s | %s\n", up_paths[p].label, median(r->ours_req, F1_RUNS),
               median(r->peer_req, F1_RUNS), median(r->ours_ms, F1_RUNS), median(r->peer_ms, F1_RUNS), r->ours_fail, r->peer_fail,
               r->ours_after, r->peer_after);
        if (r->ours_displaced || r->ours_restored || r->peer_restored)
            printf("   %-28s the router pushed a model out itself in %d/%d runs of ours (restored in %d);\n"
                   "   %-28s upstream's pinned-restore pass loaded one back in %d/%d runs\n", "", r->ours_displaced, F1_RUNS,
                   r->ours_restored, "", r->peer_restored, F1_RUNS);
        if (r->ours_pinned_lost || r->peer_pinned_lost)
            printf("   %-28s the pinned p was NOT resident afterwards in %d/%d runs of ours, %d/%d of upstream's\n", "", r->ours_pinned_lost,
                   F1_RUNS, r->peer_pinned_lost, F1_RUNS);
    }
}

static void print2(const f2_result *f2) {
    double om = median(f2->ours, f2->n_ours), pm = median(f2->peer, f2->n_peer);
    double o9 = pct(f2->ours, f2->n_ours, 0.9), p9 = pct(f2->peer, f2->n_peer, 0.9);
    double oq = median(f2->ours_req, f2->n_ours), pq = median(f2->peer_req, f2->n_peer);
    if (bench_ok("real_loaded_to_return", f2->n_ours == F2_LOADS && f2->n_peer == F2_LOADS,
                 "not every ensure gave a sample (ensure failed, or its loaded event was not seen)")) {
        printf("BENCH real_loaded_to_return_median ours=%.2f peer=%.2f unit=ms ratio=%.3f\n", om, pm, pm > 0 ? om / pm : 0);
        printf("BENCH real_loaded_to_return_p90 ours=%.2f peer=%.2f unit=ms ratio=%.3f\n", o9, p9, p9 > 0 ? o9 / p9 : 0);
        printf("BENCH real_load_requests ours=%.0f peer=%.0f unit=requests ratio=%.2f\n", oq, pq, pq > 0 ? oq / pq : 0);
    }
    printf("\n2. SSE \"loaded\" event (stamped by a subscriber process) -> ensure returns, loads from an empty router\n");
    printf("   %-10s %4s %9s %9s %9s %9s   %s\n", "ms", "n", "median", "p90", "min", "max", "requests median");
    if (f2->n_ours)
        printf("   %-10s %4d %9.2f %9.2f %9.2f %9.2f   %.0f\n", "ours", f2->n_ours, om, o9, vmin(f2->ours, f2->n_ours), vmax(f2->ours, f2->n_ours), oq);
    if (f2->n_peer)
        printf("   %-10s %4d %9.2f %9.2f %9.2f %9.2f   %.0f\n", "upstream", f2->n_peer, pm, p9, vmin(f2->peer, f2->n_peer), vmax(f2->peer, f2->n_peer), pq);
    printf("   (%d of %d ensures per side; %d loaded events not seen within 10 s; the subscriber is a separate\n"
           "   process, so on a busy machine its stamp can come late and a figure can be negative)\n",
           f2->n_ours < f2->n_peer ? f2->n_ours : f2->n_peer, F2_LOADS, f2->missed);
}

static void print3(f3_side *o, f3_side *p, f3_extra *ex, bare_side *b) {
    int k;
    double ot = median(o->through, F3_LAT), od = median(o->direct, F3_LAT), pt = median(p->through, F3_LAT), pd = median(p->direct, F3_LAT);
    double oadd = ot - od, padd = pt - pd;
    double ottfb = median(o->ttfb, o->n_ttfb), pttfb = median(p->ttfb, p->n_ttfb);
    double otps = median(o->tps, o->rounds), ptps = median(p->tps, p->rounds);
    if (bench_ok("real_serve_added_latency_ms", !o->lat_fail && !p->lat_fail, "requests failed (see the table)"))
        printf("BENCH real_serve_added_latency_ms ours=%.4f peer=%.4f unit=ms ratio=%.2f\n", oadd, padd, padd != 0 ? oadd / padd : 0);
    if (bench_ok("real_serve_ttfb_cold_swap_ms", !o->swap_fail && !p->swap_fail && o->n_ttfb && p->n_ttfb, "swaps failed (see the table)"))
        printf("BENCH real_serve_ttfb_cold_swap_ms ours=%.2f peer=%.2f unit=ms ratio=%.3f\n", ottfb, pttfb, pttfb > 0 ? ottfb / pttfb : 0);
    if (bench_ok("real_serve_ttfb_cold_swap_vs_bare", !o->swap_fail && !b->fail && o->n_ttfb && b->n, "swaps failed (see the table)")) {
        double bs = median(b->swap, b->n), bw = median(b->wait, b->n);
        printf("BENCH real_serve_ttfb_cold_swap_vs_bare_swap_ms ours=%.2f peer=%.2f unit=ms ratio=%.3f\n", ottfb, bs, bs > 0 ? ottfb / bs : 0);
        printf("BENCH real_serve_ttfb_cold_swap_vs_bare_spawn_ms ours=%.2f peer=%.2f unit=ms ratio=%.3f\n", ottfb, bw, bw > 0 ? ottfb / bw : 0);
    }
    if (bench_ok("real_serve_stream64_tokens_per_s", !o->failed && !p->failed && !o->no_done && !p->no_done && o->rounds && p->rounds,
                 "streams failed or were cut without [DONE] (see the table)"))
        printf("BENCH real_serve_stream64_tokens_per_s ours=%.0f peer=%.0f unit=tok/s ratio=%.3f\n", otps, ptps, ptps > 0 ? otps / ptps : 0);
    if (bench_ok("real_serve_front_rss_peak_kb", o->rss_peak_kb > 0 && p->rss_peak_kb > 0, "no VmRSS read"))
        printf("BENCH real_serve_front_rss_peak_kb ours=%ld peer=%ld unit=KiB ratio=%.3f\n", o->rss_peak_kb, p->rss_peak_kb,
               (double)o->rss_peak_kb / (double)p->rss_peak_kb);
    printf("\n3. rsd-serve (ours) beside the llama.cpp router (peer): the same llama-server children and tiny\n"
           "   models (ctx 512, parallel 4), at most 2 resident\n");
    printf("   %-44s %12s %12s\n", "", "rsd-serve", "router");
    printf("   %-44s %12.4f %12.4f\n", "non-streaming chat through the front, median ms", ot, pt);
    printf("   %-44s %12.4f %12.4f\n", "the same straight to its child, median ms", od, pd);
    printf("   %-44s %12.4f %12.4f\n", "added by the front, ms", oadd, padd);
    printf("   %-44s %5d/%-6d %5d/%-6d\n", "  failed requests (front or direct)/pairs", o->lat_fail, F3_LAT, p->lat_fail, F3_LAT);
    printf("   %-44s %12.2f %12.2f\n", "cold swap: time to first byte, median ms", ottfb, pttfb);
    if (o->n_ttfb && p->n_ttfb)
        printf("   %-44s %5.1f-%-6.1f %5.1f-%-6.1f\n", "  min-max ms", vmin(o->ttfb, o->n_ttfb), vmax(o->ttfb, o->n_ttfb),
               vmin(p->ttfb, p->n_ttfb), vmax(p->ttfb, p->n_ttfb));
    printf("   %-44s %5d/%-6d %5d/%-6d\n", "  failed swaps", o->swap_fail, g_swaps, p->swap_fail, g_swaps);
    printf("   the same cold swaps without a front (bench/real.c bare_swap), median (min-max) ms, %d/%d failed:\n", b->fail, g_swaps);
    if (b->n) {
        printf("   %-44s %6.2f (%.1f-%.1f)\n", "  bare swap: SIGTERM the older child .. first byte", median(b->swap, b->n),
               vmin(b->swap, b->n), vmax(b->swap, b->n));
        printf("   %-44s %6.2f (%.1f-%.1f)\n", "  bare spawn-and-wait: spawn .. first byte", median(b->wait, b->n),
               vmin(b->wait, b->n), vmax(b->wait, b->n));
        printf("   %-44s %6.2f (%.1f-%.1f)\n", "    stop: SIGTERM .. reaped", median(b->stop, b->n), vmin(b->stop, b->n), vmax(b->stop, b->n));
        printf("   %-44s %6.2f (%.1f-%.1f)\n", "    load: spawn .. \"model loaded\" read", median(b->load, b->n), vmin(b->load, b->n),
               vmax(b->load, b->n));
        printf("   %-44s %6.2f (%.1f-%.1f)\n", "    ask: that line .. first byte", median(b->ask, b->n), vmin(b->ask, b->n), vmax(b->ask, b->n));
    }
    for (k = 0; k < g_nextra; k++) {
        char name[64];
        snprintf(name, sizeof name, "real_serve_ttfb_cold_swap_build%d", k + 2);
        if (!bench_ok(name, !ex[k].fail && ex[k].n, "swaps failed")) continue;
        printf("   cold swap through %s: median %.2f ms (%.1f-%.1f), %d/%d failed\n", g_extra_bin[k], median(ex[k].ttfb, ex[k].n),
               vmin(ex[k].ttfb, ex[k].n), vmax(ex[k].ttfb, ex[k].n), ex[k].fail, g_swaps);
        printf("BENCH %s ours=%.2f peer=%.2f unit=ms ratio=%.3f\n", name, median(ex[k].ttfb, ex[k].n), pttfb,
               pttfb > 0 ? median(ex[k].ttfb, ex[k].n) / pttfb : 0);
    }
    printf("   64 streaming clients, 256 chats x 16 tokens a round, %d rounds each (interleaved), medians:\n", F3_ROUNDS);
    printf("   %-44s %12.2f %12.2f\n", "  s per round", median(o->secs, o->rounds), median(p->secs, p->rounds));
    printf("   %-44s %12.0f %12.0f\n", "  tokens (SSE chunks) per s", otps, ptps);
    if (o->rounds && p->rounds)
        printf("   %-44s %5.0f-%-6.0f %5.0f-%-6.0f\n", "    min-max", vmin(o->tps, o->rounds), vmax(o->tps, o->rounds),
               vmin(p->tps, p->rounds), vmax(p->tps, p->rounds));
    printf("   %-44s %12.1f %12.1f\n", "  chats per s", median(o->cps, o->rounds), median(p->cps, p->rounds));
    printf("   %-44s %5ld/%-6ld %5ld/%-6ld\n", "  failed / cut without [DONE], all rounds", o->failed, o->no_done, p->failed, p->no_done);
    if (o->failed || p->failed)
        printf("   %-44s %3ld/%3ld/%-4ld %3ld/%3ld/%-4ld (first: %s | %s)\n", "  failures: 502/503/transport", o->fail_502,
               o->fail_503, o->fail_transport, p->fail_502, p->fail_503, p->fail_transport, o->first_fail[0] ? o->first_fail : "-",
               p->first_fail[0] ? p->first_fail : "-");
    printf("   %-44s %12ld %12ld\n", "front process VmRSS idle, KiB", o->rss_idle_kb, p->rss_idle_kb);
    printf("   %-44s %12ld %12ld\n", "front process VmRSS peak under the 64, KiB", o->rss_peak_kb, p->rss_peak_kb);
}

/* Figure 3: the router (preset at ini) and rsd-serve side by side, tiny-a/b/c behind each. */
static void figure3_run(const char *serve_bin, const char *const *rargs, char *ini, size_t ini_cap) {
    static f3_side s_ours, s_peer;
    static f3_extra s_ex[F3_EXTRA];
    static bare_side s_bare;
    int k;
    char text[4096], serve_cfg[700], log[700];
    /* figure 3: the router and rsd-serve side by side, tiny-a/b/c behind each */
    snprintf(text, sizeof text,
             "[tiny-a]\nmodel = %s/tiny-a.gguf\nctx-size = 512\nparallel = 4\nthreads = 1\n\n"
             "[tiny-b]\nmodel = %s/tiny-b.gguf\nctx-size = 512\nparallel = 4\nthreads = 1\n\n"
             "[tiny-c]\nmodel = %s/tiny-c.gguf\nctx-size = 512\nparallel = 4\nthreads = 1\n", g_dir, g_dir, g_dir);
    snprintf(ini, ini_cap, "%s/serve-peer.ini", g_dir);
    if (write_file(ini, text) != 0) die("preset");
    if (real_start(&g_router, g_bin, g_dir, rargs, 60000) != 0) die("the router did not start");
    snprintf(log, sizeof log, "%s/serve.log", g_dir);
    snprintf(serve_cfg, sizeof serve_cfg, "%s/serve.ini", g_dir);
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nmax_models = 2\nllama_server = %s\nargs = --threads 1\nstart_timeout = 60\nstop_grace = 5\n\n"
             "[model tiny-a]\nmodel = %s/tiny-a.gguf\nctx = 512\nparallel = 4\n\n"
             "[model tiny-b]\nmodel = %s/tiny-b.gguf\nctx = 512\nparallel = 4\n\n"
             "[model tiny-c]\nmodel = %s/tiny-c.gguf\nctx = 512\nparallel = 4\n", g_bin, g_dir, g_dir, g_dir);
    if (write_file(serve_cfg, text) != 0) die("rsd-serve config");
    {
        const char *sargv[] = {serve_bin, "--config", serve_cfg, NULL};
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (listen_proc_start(&g_serve, sargv, fd) != 0) die("rsd-serve did not start");
        if (fd >= 0) close(fd);
    }
    for (k = 0; k < g_nextra; k++) {
        const char *sargv[] = {g_extra_bin[k], "--config", serve_cfg, NULL};
        char xlog[720];
        int fd;
        snprintf(xlog, sizeof xlog, "%s/serve%d.log", g_dir, k + 2);
        fd = open(xlog, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (listen_proc_start(&g_extra[k], sargv, fd) != 0) die("a further rsd-serve build did not start");
        if (fd >= 0) close(fd);
    }
    figure3(g_serve.url, g_router.url, &s_ours, &s_peer, s_ex, &s_bare);
    print3(&s_ours, &s_peer, s_ex, &s_bare);
    stop_all();
    if (s_ours.failed || s_ours.lat_fail || s_ours.swap_fail) {
        char cmd[900];
        fprintf(stderr, "bench-real: requests through rsd-serve failed; the end of its log (%s):\n", log);
        fflush(stderr);
        snprintf(cmd, sizeof cmd, "grep -v ' 200 ' '%s' | tail -n 12 >&2", log);
        if (system(cmd) != 0) {}
    }
}

int main(int argc, char **argv) {
    static f1_result f1[UP_PATHS];
    static f2_result f2;
    static char serve_list[4096];
    const char *serve_bin = "build/bin/rsd-serve";
    const char *which = argc > 1 ? argv[1] : "123";
    char why[512], ini[700], state[700], cache[700], text[4096];
    int k;
    const char *rargs[] = {"--models-preset", ini, "--models-max", "2", NULL};
    double t_start = now_us(), la0 = loadavg1();
    signal(SIGPIPE, SIG_IGN);
    signal(SIGALRM, on_alarm);
    alarm(600);
    if (real_find(g_bin, sizeof g_bin, why, sizeof why) != 0) {
        printf("bench-real: skipped: %s\n", why);
        return 0;
    }
    if (getenv("RSD_SWAPS")) { /* more cold swaps for a steadier median on a loaded machine */
        g_swaps = atoi(getenv("RSD_SWAPS"));
        g_swaps = g_swaps < 3 ? 3 : g_swaps > F3_SWAPS_MAX ? F3_SWAPS_MAX : g_swaps;
    }
    if (getenv("RSD_SERVE")) { /* a:b:c = rsd-serve a, and b and c beside it in figure 3's cold swaps */
        char *colon;
        snprintf(serve_list, sizeof serve_list, "%s", getenv("RSD_SERVE"));
        serve_bin = serve_list;
        for (colon = strchr(serve_list, ':'); colon && g_nextra < F3_EXTRA; colon = strchr(colon + 1, ':')) {
            *colon = 0;
            g_extra_bin[g_nextra++] = colon + 1;
        }
    }
    if (access(serve_bin, X_OK) != 0) { fprintf(stderr, "bench-real: %s not built\n", serve_bin); return 1; }
    for (k = 0; k < g_nextra; k++)
        if (access(g_extra_bin[k], X_OK) != 0) { fprintf(stderr, "bench-real: %s not built\n", g_extra_bin[k]); return 1; }
    if (real_models(g_dir, sizeof g_dir) != 0) die("could not write the tiny models");
    g_ctl = rsd_http_client_create(NULL);
    g_cu = (up_ctx *)calloc(1, sizeof *g_cu);
    {
        rsd_http_client_desc cd;
        memset(&cd, 0, sizeof cd);
        cd.no_keepalive = true;
        cd.max_body_bytes = 1 << 20;
        rsd_http_client_destroy(g_ctl);
        g_ctl = rsd_http_client_create(&cd);
    }
    if (!g_ctl || !g_cu) die("client");
    snprintf(state, sizeof state, "%s/state", g_dir);
    snprintf(cache, sizeof cache, "%s/cache", g_dir);
    setenv("LLAMA_CACHE", cache, 1); /* rsd-serve's children */
    printf("bench-real: %s, load average %.2f at the start\n", g_bin, la0);

    /* figures 1-2: the router with p (pinned), a, b, c */
    snprintf(ini, sizeof ini, "%s/ensure.ini", g_dir);
    snprintf(text, sizeof text,
             "[p]\nmodel = %s/tiny-a.gguf\nctx-size = 256\nthreads = 1\ntags = pinned:true\n\n"
             "[a]\nmodel = %s/tiny-b.gguf\nctx-size = 256\nthreads = 1\n\n"
             "[b]\nmodel = %s/tiny-c.gguf\nctx-size = 256\nthreads = 1\n\n"
             "[c]\nmodel = %s/tiny-d.gguf\nctx-size = 256\nthreads = 1\n", g_dir, g_dir, g_dir, g_dir);
    if (write_file(ini, text) != 0) die("preset");
    if ((strchr(which, '1') || strchr(which, '2')) && real_start(&g_router, g_bin, g_dir, rargs, 60000) != 0)
        die("the router did not start");
    if (strchr(which, '1')) {
        figure1(g_router.url, state, f1);
        print1(f1);
    }
    if (strchr(which, '2')) {
        if (watch_start(g_router.url) != 0) die("no GET /models/sse stream from the router");
        figure2(g_router.url, state, &f2);
        print2(&f2);
    }
    stop_all();
    if (strchr(which, '3')) figure3_run(serve_bin, rargs, ini, sizeof ini);

    rsd_http_client_destroy(g_ctl);
    free(g_cu);
    real_rmdir(g_dir);

    printf("\nbench-real: %.1f s; load average %.2f at the start, %.2f at the end (2 cores, shared)\n",
           (now_us() - t_start) / 1e6, la0, loadavg1());
    if (g_failed) fprintf(stderr, "bench-real: a measurement failed (the BENCH ... failed lines above)\n");
    return g_failed;
}
