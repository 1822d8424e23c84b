/* bench/affinity.c -- rsd-serve's session affinity and leases, measured.

   1. affinity_reprocessed_tokens: a multi-turn chat, 8 sessions x 10 turns, on ONE real
      llama-server child (-np 4, -c 4096: 1024 tokens a slot) behind rsd-serve, at most 4
      requests in flight; each turn sends the session's whole history (the child's real
      answers included) and a new question, in a fixed pseudo-random order of sessions.
      ours = prompt tokens the child processed (the sum of its timings.prompt_n) with
      session_affinity = true (session_erase off, the default), peer = the same trace without it (the child picks slots
      itself: best prompt similarity, else least recently used); a second line with
      session_erase = true (an erase on every hand-over). Needs llama-server.
   2. lease_ready_ms: rsd-serve with rsd-sim children (budget 8G, two idle 4G models
      loaded): the time from POST /_rsd/lease {"bytes":"4G"} until GET /_rsd/lease/ID
      says ready (the stopped child has exited); peer = the real llama.cpp router: POST
      /models/unload until GET /models lists the model unloaded. Median of 7. A third
      line gives ours with real llama-server children.
   usage: build/bench/affinity [1|2|12]. One "skipped" line per figure without llama-server. */
#define RESIDENCY_IMPLEMENTATION
#include "residency_http.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "../tests/real_server.h"
#include "../tests/listen_proc.h"

enum { SESSIONS = 8, TURNS = 10, IN_FLIGHT = 4, HIST = 16384, LEASE_RUNS = 7 };

static char g_bin[1024], g_dir[512];
static const char *g_serve_bin = "build/bin/rsd-serve", *g_sim_bin = "build/bin/rsd-sim";
static rsd_json_tok g_toks[8192];

static void die(const char *what) {
    fprintf(stderr, "bench-affinity: %s\n", what);
    exit(1);
}

static int write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

static int req(rsd_http_client *c, const char *method, const char *url, const char *body, char *buf, size_t cap) {
    return bench_req(c, method, url, body, 120000, buf, cap);
}

static int start_serve(listen_proc *p, const char *cfg_name, const char *text) {
    char cfg[700], log[700];
    const char *argv[] = {g_serve_bin, "--config", cfg, NULL};
    int fd, r;
    snprintf(cfg, sizeof cfg, "%s/%s.ini", g_dir, cfg_name);
    snprintf(log, sizeof log, "%s/%s.log", g_dir, cfg_name);
    if (write_text(cfg, text) != 0) return -1;
    fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    r = listen_proc_start(p, argv, fd);
    if (fd >= 0) close(fd);
    return r;
}

/* ---- 1: re-processed prompt tokens -------------------------------------------------- */
typedef struct session {
    char hist[HIST];  /* the messages so far, JSON, comma-separated */
    size_t len;
    int turn;         /* turns answered */
    bool busy;
} session;

typedef struct chat_result { long long prompt_n, cache_n; int requests, failed; } chat_result;

static uint32_t g_lcg;
static uint32_t lcg(void) { g_lcg = g_lcg * 1664525u + 1013904223u; return g_lcg >> 8; }

/* Appends {"role":role,"content":text} (escaped) to s's history. */
static void hist_add(session *s, const char *role, const char *text, size_t n) {
    rsd_json_writer w;
    int k;
    char buf[4096];
    rsd_json_w_init(&w, buf, sizeof buf);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "role");
    rsd_json_w_str(&w, role);
    rsd_json_w_key(&w, "content");
    rsd_json_w_strn(&w, text, n);
    rsd_json_w_end_object(&w);
    k = rsd_json_w_finish(&w);
    if (k < 0) { /* not UTF-8 (a tiny model's bytes): a placeholder, the same every time */
        k = snprintf(buf, sizeof buf, "{\"role\":\"%s\",\"content\":\"?\"}", role);
    }
    if (s->len + (size_t)k + 2 >= sizeof s->hist) return;
    if (s->len) s->hist[s->len++] = ',';
    memcpy(s->hist + s->len, buf, (size_t)k);
    s->len += (size_t)k;
    s->hist[s->len] = 0;
}

static chat_result chat_trace(const char *base) {
    static session ss[SESSIONS];
    static char body[HIST + 512];
    rsd_http_client_desc cd;
    rsd_http_client *c;
    rsd_pollfd fds[64];
    chat_result res;
    char url[128];
    rsd_http_req_h hs[SESSIONS];
    int done = 0, inflight = 0, k;
    memset(&res, 0, sizeof res);
    memset(ss, 0, sizeof ss);
    memset(hs, 0, sizeof hs);
    g_lcg = 12345;
    memset(&cd, 0, sizeof cd);
    cd.max_requests = 16;
    cd.max_conns = 16;
    cd.max_body_bytes = 1 << 20;
    cd.max_request_bytes = HIST + 4096;
    c = rsd_http_client_create(&cd);
    if (!c) die("client");
    snprintf(url, sizeof url, "%s/v1/chat/completions", base);
    while (done < SESSIONS * TURNS) {
        rsd_http_event ev;
        uint64_t now = rsd_now_ms(), dl;
        int n, timeout;
        while (inflight < IN_FLIGHT) { /* the next session, pseudo-random, not in flight */
            int pick = -1, tries;
            for (tries = 0; tries < 64 && pick < 0; tries++) {
                int q = (int)(lcg() % SESSIONS);
                if (!ss[q].busy && ss[q].turn < TURNS) pick = q;
            }
            for (k = 0; k < SESSIONS && pick < 0; k++)
                if (!ss[k].busy && ss[k].turn < TURNS) pick = k;
            if (pick < 0) break;
            {
                session *s = &ss[pick];
                rsd_http_request q;
                char question[160];
                int qn = snprintf(question, sizeof question,
                                  "Session %d, turn %d: tell me more about the topic we discussed, with details.", pick,
                                  s->turn);
                hist_add(s, "user", question, (size_t)qn);
                snprintf(body, sizeof body,
                         "{\"model\":\"chat\",\"prompt_cache_key\":\"session-%d\",\"max_tokens\":4,\"temperature\":0,"
                         "\"messages\":[%s]}", pick, s->hist);
                json_post(&q, url, body);
                q.total_timeout_ms = 300000;
                q.user = s;
                if (rsd_http_send(c, &q, now, &hs[pick]) != RSD_OK) die("send");
                s->busy = true;
                inflight++;
            }
        }
        (void)rsd_http_client_step(c, now);
        while (rsd_http_next_event(c, &ev)) {
            session *s = (session *)ev.user;
            rsd_json_doc d;
            int64_t v;
            s->busy = false;
            inflight--;
            done++;
            s->turn++;
            res.requests++;
            if (ev.result != RSD_OK || ev.status != 200 ||
                rsd_json_parse(&d, ev.body.ptr, ev.body.len, g_toks, 8192) <= 0) {
                res.failed++;
                hist_add(s, "assistant", "?", 1);
                continue;
            }
            if (rsd_json_int64(&d, rsd_json_find(&d, rsd_json_find(&d, 0, "timings"), "prompt_n"), &v) == RSD_OK)
                res.prompt_n += v;
            if (rsd_json_int64(&d, rsd_json_find(&d, rsd_json_find(&d, 0, "timings"), "cache_n"), &v) == RSD_OK)
                res.cache_n += v;
            {
                int msg = rsd_json_find(&d, rsd_json_at(&d, rsd_json_find(&d, 0, "choices"), 0), "message");
                char text[2048];
                size_t tl = 0;
                if (rsd_json_str(&d, rsd_json_find(&d, msg, "content"), text, sizeof text, &tl) != RSD_OK) tl = 0;
                hist_add(s, "assistant", text, tl < sizeof text ? tl : 0);
            }
        }
        n = rsd_http_client_pollfds(c, fds, 64);
        if (n > 64) n = 64;
        dl = rsd_http_client_next_deadline(c);
        now = rsd_now_ms();
        timeout = dl == UINT64_MAX ? 100 : dl <= now ? 0 : dl - now > 100 ? 100 : (int)(dl - now);
        if (n > 0) (void)poll((struct pollfd *)(void *)fds, (nfds_t)n, timeout);
    }
    rsd_http_client_destroy(c);
    return res;
}

static void figure1(void) {
    static char text[4096], buf[1 << 16];
    static const char *const name[] = {"with affinity, session_erase = true (erase on hand-over)",
                                       "with affinity (the default: no erase)", "without affinity"};
    static const char *const keys[] = {"session_affinity = true\nsession_erase = true\n", "session_affinity = true\n",
                                       ""};
    chat_result r[3];
    int run;
    rsd_http_client *c = rsd_http_client_create(NULL);
    for (run = 0; run < 3; run++) {
        listen_proc p;
        char url[128], cfg_name[32];
        snprintf(text, sizeof text,
                 "listen = 127.0.0.1:0\nllama_server = %s\nargs = --threads 1\nstart_timeout = 60\nstop_grace = 5\n"
                 "[model chat]\nmodel = %s/tiny-a.gguf\nctx = 4096\nparallel = 4\n%s",
                 g_bin, g_dir, keys[run]);
        snprintf(cfg_name, sizeof cfg_name, "aff-%d", run);
        if (start_serve(&p, cfg_name, text) != 0) die("rsd-serve did not start");
        r[run] = chat_trace(p.url);
        snprintf(url, sizeof url, "%s/_rsd/affinity", p.url);
        if (run < 2 && req(c, "GET", url, NULL, buf, sizeof buf) == 200) {
            char *sl = strstr(buf, ",\"slots\"");
            if (sl) strcpy(sl, "}]}");
            printf("  %s, rsd-serve: %s\n", name[run], buf);
        }
        (void)listen_proc_stop(&p);
        printf("  %s: %d requests (%d failed), prompt tokens processed %lld, reused from the cache %lld\n", name[run],
               r[run].requests, r[run].failed, r[run].prompt_n, r[run].cache_n);
        if (r[run].failed) die("requests failed (see the logs in the bench directory)");
    }
    rsd_http_client_destroy(c);
    printf("BENCH affinity_reprocessed_tokens ours=%lld peer=%lld unit=tokens ratio=%.3f\n", r[1].prompt_n, r[2].prompt_n,
           r[2].prompt_n ? (double)r[1].prompt_n / (double)r[2].prompt_n : 0.0);
    printf("BENCH affinity_reprocessed_tokens_erase ours=%lld peer=%lld unit=tokens ratio=%.3f\n", r[0].prompt_n,
           r[2].prompt_n, r[2].prompt_n ? (double)r[0].prompt_n / (double)r[2].prompt_n : 0.0);
}

/* ---- 2: lease to ready ---------------------------------------------------------------- */
/* ms from POST /_rsd/lease to ready, LEASE_RUNS times (DELETE with restore between). */
static double lease_runs(const char *base, const char *first, const char *second) {
    static char buf[1 << 16];
    double v[LEASE_RUNS];
    char url[160], lurl[200], body[128];
    rsd_http_client *c = rsd_http_client_create(NULL);
    int run, i;
    for (run = 0; run < LEASE_RUNS; run++) {
        double t0;
        long long id;
        char *p;
        /* both idle models resident, the first used least recently */
        snprintf(url, sizeof url, "%s/v1/chat/completions", base);
        snprintf(body, sizeof body, "{\"model\":\"%s\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", first);
        if (req(c, "POST", url, body, buf, sizeof buf) != 200) die("warm-up request (first)");
        snprintf(body, sizeof body, "{\"model\":\"%s\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", second);
        if (req(c, "POST", url, body, buf, sizeof buf) != 200) die("warm-up request (second)");
        snprintf(url, sizeof url, "%s/_rsd/lease", base);
        t0 = now_us();
        if (req(c, "POST", url, "{\"bytes\":\"4G\",\"restore\":false}", buf, sizeof buf) != 200) die(buf);
        p = strstr(buf, "\"id\":");
        id = p ? atoll(p + 5) : 0;
        snprintf(lurl, sizeof lurl, "%s/_rsd/lease/%lld", base, id);
        for (i = 0; !strstr(buf, "\"ready\":true") && i < 100000; i++)
            if (req(c, "GET", lurl, NULL, buf, sizeof buf) != 200) die("lease query");
        v[run] = (now_us() - t0) / 1000.0;
        if (req(c, "DELETE", lurl, NULL, buf, sizeof buf) != 200) die("lease release");
    }
    rsd_http_client_destroy(c);
    return median(v, LEASE_RUNS);
}

/* The router: ms from POST /models/unload until GET /models lists the model unloaded. */
static double router_unload_runs(const char *base) {
    static char buf[1 << 16];
    double v[LEASE_RUNS];
    char url[160], murl[160];
    rsd_http_client *c = rsd_http_client_create(NULL);
    int run, i;
    snprintf(murl, sizeof murl, "%s/models", base);
    for (run = 0; run < LEASE_RUNS; run++) {
        double t0;
        snprintf(url, sizeof url, "%s/models/load", base);
        (void)req(c, "POST", url, "{\"model\":\"tiny-a\"}", buf, sizeof buf);
        for (i = 0; i < 100000; i++) { /* until tiny-a is listed loaded */
            const char *at;
            if (req(c, "GET", murl, NULL, buf, sizeof buf) != 200) die("router listing");
            at = strstr(buf, "\"id\":\"tiny-a\"");
            if (at && strstr(at, "\"value\":\"loaded\"") && strstr(at, "\"value\":\"loaded\"") < strstr(at, "}")) break;
            sleep_ms(2);
        }
        snprintf(url, sizeof url, "%s/models/unload", base);
        t0 = now_us();
        if (req(c, "POST", url, "{\"model\":\"tiny-a\"}", buf, sizeof buf) != 200) die(buf);
        for (i = 0; i < 100000; i++) {
            const char *at;
            if (req(c, "GET", murl, NULL, buf, sizeof buf) != 200) die("router listing");
            at = strstr(buf, "\"id\":\"tiny-a\"");
            if (at && strstr(at, "\"value\":\"unloaded\"") && strstr(at, "\"value\":\"unloaded\"") < strstr(at, "}")) break;
        }
        v[run] = (now_us() - t0) / 1000.0;
    }
    rsd_http_client_destroy(c);
    return median(v, LEASE_RUNS);
}

static void figure2(bool have_real) {
    static char text[4096], ini[700];
    listen_proc p;
    double ours, peer = 0, ours_real = 0;
    char mdir[700];
    snprintf(mdir, sizeof mdir, "%s/sim-a.gguf", g_dir);
    (void)write_text(mdir, "");
    snprintf(mdir, sizeof mdir, "%s/sim-b.gguf", g_dir);
    (void)write_text(mdir, "");
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nmax_models = 2\nvram_budget = 8G\nllama_server = %s\n"
             "args = --runtime server --load-ms 20 --gen-ms 1\nstop_grace = 5\n"
             "[model a]\nmodel = %s/sim-a.gguf\nreserve = 4G\n[model b]\nmodel = %s/sim-b.gguf\nreserve = 4G\n",
             g_sim_bin, g_dir, g_dir);
    if (start_serve(&p, "lease-sim", text) != 0) die("rsd-serve (sim) did not start");
    ours = lease_runs(p.url, "a", "b");
    (void)listen_proc_stop(&p);
    if (have_real) {
        real_server r;
        const char *rargs[] = {"--models-preset", ini, "--models-max", "2", "--threads", "1", NULL};
        snprintf(text, sizeof text,
                 "listen = 127.0.0.1:0\nmax_models = 2\nvram_budget = 8G\nllama_server = %s\nargs = --threads 1\n"
                 "start_timeout = 60\nstop_grace = 5\n[model a]\nmodel = %s/tiny-a.gguf\nctx = 256\nreserve = 4G\n"
                 "[model b]\nmodel = %s/tiny-b.gguf\nctx = 256\nreserve = 4G\n",
                 g_bin, g_dir, g_dir);
        if (start_serve(&p, "lease-real", text) != 0) die("rsd-serve (real) did not start");
        ours_real = lease_runs(p.url, "a", "b");
        (void)listen_proc_stop(&p);
        snprintf(ini, sizeof ini, "%s/router.ini", g_dir);
        snprintf(text, sizeof text, "[tiny-a]\nmodel = %s/tiny-a.gguf\nctx-size = 256\n[tiny-b]\nmodel = %s/tiny-b.gguf\nctx-size = 256\n",
                 g_dir, g_dir);
        if (write_text(ini, text) != 0) die("router preset");
        if (real_start(&r, g_bin, g_dir, rargs, 60000) != 0) die("the router did not start");
        peer = router_unload_runs(r.url);
        (void)real_stop(&r);
        printf("  ours with real llama-server children: %.2f ms from the lease request to ready\n", ours_real);
        printf("BENCH lease_ready_ms ours=%.2f peer=%.2f unit=ms ratio=%.3f\n", ours, peer, peer > 0 ? ours / peer : 0.0);
        printf("BENCH lease_ready_real_children_ms ours=%.2f peer=%.2f unit=ms ratio=%.3f\n", ours_real, peer,
               peer > 0 ? ours_real / peer : 0.0);
    } else {
        printf("  lease_ready_ms: ours %.2f ms (rsd-sim children); peer skipped: no llama-server\n", ours);
    }
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "12";
    char why[512];
    bool have_real;
    signal(SIGPIPE, SIG_IGN);
    if (getenv("RSD_SERVE")) g_serve_bin = getenv("RSD_SERVE");
    if (access(g_serve_bin, X_OK) != 0 || access(g_sim_bin, X_OK) != 0) die("build the programs first (make apps)");
    have_real = real_find(g_bin, sizeof g_bin, why, sizeof why) == 0;
    if (real_models(g_dir, sizeof g_dir) != 0) die("cannot write the tiny models");
    {
        char cache[700];
        snprintf(cache, sizeof cache, "%s/cache", g_dir);
        setenv("LLAMA_CACHE", cache, 1);
    }
    if (strchr(which, '1')) {
        if (have_real) figure1();
        else printf("bench-affinity: affinity_reprocessed_tokens skipped: %s\n", why);
    }
    if (strchr(which, '2')) figure2(have_real);
    real_rmdir(g_dir);
    return 0;
}
