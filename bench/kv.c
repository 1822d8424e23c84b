/* bench/kv.c -- a swap keeps the conversation (kv_cache_dir) against a REAL llama-server.

   Tiny models (tests/tiny_gguf.h) on the spot; the binary as tests/real_server.h finds it;
   skipped with one line when there is none. Three fronts, each with models tiny-a and
   tiny-b, one resident at a time, every child -c 8192 -np 1 -t 1:
     kv      rsd-serve with kv_cache_dir (slots saved at the stop, restored at the start)
     plain   rsd-serve without it
     router  the llama.cpp router itself (--models-dir, --models-max 1)
   Per round (a fresh conversation each round): turn 1 on tiny-a (about 4,000 prompt
   tokens), one request to tiny-b (the swap out: tiny-a stops, tiny-b starts), then
   turn 2 on tiny-a (the swap back). Every request asks for max_tokens 1, so its whole
   answer time is its time to first token. Printed per front, medians over the rounds:
   the prompt tokens turn 2 processed (timings.prompt_n; the new tokens alone would be
   about 10), its cache_n, the time of turn 2 (swap back, start, restore, prefill) and
   the time of the request to tiny-b (swap out with the save, tiny-b's start). Wall
   clock on a possibly shared machine: the load average is printed.
   usage: kv [ROUNDS]   (default 3) */
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

enum { MAX_ROUNDS = 9, REPS = 320 };

static char g_bin[1024], g_dir[512];
static char g_body[1 << 16];
static rsd_json_tok g_toks[8192];

/* A chat for model: round r's long first turn, with next its second turn too. */
static const char *chat(const char *model, int r, bool next) {
    static char b[1 << 16];
    size_t n = (size_t)snprintf(b, sizeof b,
                                "{\"model\":\"%s\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"round %d:",
                                model, r);
    int i;
    for (i = 0; i < REPS && n + 32 < sizeof b; i++) n += (size_t)snprintf(b + n, sizeof b - n, " hello world");
    snprintf(b + n, sizeof b - n, "\"}%s]}",
             next ? ",{\"role\":\"assistant\",\"content\":\"ok\"},{\"role\":\"user\",\"content\":\"and more\"}" : "");
    return b;
}

static int64_t timing(const char *field) {
    rsd_json_doc d;
    int64_t v = -1;
    if (rsd_json_parse(&d, g_body, strlen(g_body), g_toks, 8192) <= 0) return -1;
    (void)rsd_json_int64(&d, rsd_json_find(&d, rsd_json_find(&d, 0, "timings"), field), &v);
    return v;
}

/* POST /v1/chat/completions on port: the status; *ms its wall time. */
static int post(int port, const char *body, double *ms) {
    rsd_http_client *c = rsd_http_client_create(NULL);
    char url[64];
    double t0;
    int st;
    if (!c) return 0;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", port);
    t0 = now_us();
    st = bench_req(c, "POST", url, body, 300000, g_body, sizeof g_body);
    *ms = (now_us() - t0) / 1000.0;
    rsd_http_client_destroy(c);
    return st;
}

typedef struct figures {
    double back_ms[MAX_ROUNDS], out_ms[MAX_ROUNDS], prompt_n[MAX_ROUNDS], cache_n[MAX_ROUNDS], first_n[MAX_ROUNDS];
    int n;
} figures;

/* One round on the front at port: turn 1 on tiny-a, tiny-b, turn 2 on tiny-a. */
static bool round_on(int port, int r, figures *f) {
    double ms;
    int k = f->n;
    if (post(port, chat("tiny-a", r, false), &ms) != 200) return false;
    f->first_n[k] = (double)timing("prompt_n");
    if (post(port, "{\"model\":\"tiny-b\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
             &f->out_ms[k]) != 200)
        return false;
    if (post(port, chat("tiny-a", r, true), &f->back_ms[k]) != 200) return false;
    f->prompt_n[k] = (double)timing("prompt_n");
    f->cache_n[k] = (double)timing("cache_n");
    f->n++;
    return true;
}

static int serve_start(listen_proc *p, const char *name, bool kv) {
    char ini[700], text[4096], logp[700];
    const char *argv[] = {"build/examples/rsd-serve", "--config", ini, NULL};
    int fd, r;
    FILE *f;
    snprintf(ini, sizeof ini, "%s/%s.ini", g_dir, name);
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nllama_server = %s\nargs = -t 1\nmax_models = 1\nstop_grace = 10\n%s%s%s"
             "[model tiny-a]\nmodel = %s/tiny-a.gguf\nctx = 8192\nparallel = 1\n"
             "[model tiny-b]\nmodel = %s/tiny-b.gguf\nctx = 8192\nparallel = 1\n",
             g_bin, kv ? "kv_cache_dir = " : "", kv ? g_dir : "", kv ? "/kv\n" : "", g_dir, g_dir);
    f = fopen(ini, "w");
    if (!f) return -1;
    fputs(text, f);
    fclose(f);
    snprintf(logp, sizeof logp, "%s/%s.log", g_dir, name);
    fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    r = listen_proc_start(p, argv, fd);
    if (fd >= 0) close(fd);
    return r;
}

static void print_fig(const char *name, const figures *f) {
    if (!f->n) { printf("  %-7s no round completed\n", name); return; }
    printf("  %-7s turn-1 prompt_n %5.0f | turn 2 after the swap: prompt_n %5.0f cache_n %5.0f, %8.1f ms"
           " (min %.1f max %.1f) | swap out (request to tiny-b) %7.1f ms\n",
           name, median(f->first_n, f->n), median(f->prompt_n, f->n), median(f->cache_n, f->n),
           median(f->back_ms, f->n), vmin(f->back_ms, f->n), vmax(f->back_ms, f->n), median(f->out_ms, f->n));
}

int main(int argc, char **argv) {
    static figures fk, fp, fr;
    char why[512], mdir[700];
    const char *rargs[] = {"--models-dir", mdir, "--models-max", "1", "-t", "1", "-c", "8192", "-np", "1", NULL};
    listen_proc kv, plain;
    real_server router;
    int rounds = argc > 1 ? atoi(argv[1]) : 3, r;
    double load[3] = {0, 0, 0};
    FILE *la;
    if (rounds < 1 || rounds > MAX_ROUNDS) rounds = 3;
    signal(SIGPIPE, SIG_IGN);
    if (real_find(g_bin, sizeof g_bin, why, sizeof why) != 0) {
        printf("bench kv skipped: %s\n", why);
        return 0;
    }
    if (real_models(g_dir, sizeof g_dir) != 0) { printf("cannot write the tiny models\n"); return 1; }
    { /* tiny-a and tiny-b again with a training context of 8192 (the server caps -c at it) */
        char p[800];
        snprintf(p, sizeof p, "%s/tiny-a.gguf", g_dir);
        if (tiny_gguf_write(p, "tiny-a", 1000, 8192, 0) != 0) return 1;
        snprintf(p, sizeof p, "%s/tiny-b.gguf", g_dir);
        if (tiny_gguf_write(p, "tiny-b", 1000 + 7919, 8192, 0) != 0) return 1;
    }
    snprintf(mdir, sizeof mdir, "%s/router-models", g_dir); /* the router lists a directory: two models only */
    mkdir(mdir, 0700);
    {
        char a[800], b[800];
        snprintf(a, sizeof a, "%s/tiny-a.gguf", g_dir);
        snprintf(b, sizeof b, "%s/tiny-a.gguf", mdir);
        if (link(a, b) != 0) { printf("link: %s\n", strerror(errno)); return 1; }
        snprintf(a, sizeof a, "%s/tiny-b.gguf", g_dir);
        snprintf(b, sizeof b, "%s/tiny-b.gguf", mdir);
        if (link(a, b) != 0) { printf("link: %s\n", strerror(errno)); return 1; }
    }
    setenv("LLAMA_CACHE", g_dir, 1);
    if (serve_start(&kv, "kv", true) != 0 || serve_start(&plain, "plain", false) != 0 ||
        real_start(&router, g_bin, g_dir, rargs, 60000) != 0) {
        printf("cannot start the fronts (logs in %s)\n", g_dir);
        return 1;
    }
    for (r = 0; r < rounds; r++) { /* interleaved: each front once per round */
        if (!round_on(kv.port, r, &fk)) printf("  kv round %d failed (%s)\n", r, g_body);
        if (!round_on(plain.port, r, &fp)) printf("  plain round %d failed (%s)\n", r, g_body);
        if (!round_on(router.port, r, &fr)) printf("  router round %d failed (%s)\n", r, g_body);
    }
    la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fscanf(la, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
        fclose(la);
    }
    printf("kv cache across a swap (llama-server %s, tiny models, -c 8192 -np 1 -t 1; %d rounds, medians; load %.2f):\n",
           g_bin, rounds, load[0]);
    print_fig("kv", &fk);
    print_fig("plain", &fp);
    print_fig("router", &fr);
    (void)listen_proc_stop(&kv);
    (void)listen_proc_stop(&plain);
    (void)real_stop(&router);
    real_rmdir(g_dir);
    return 0;
}
