/* bench/kv.c -- a swap keeps the conversation (kv_cache_dir) against a REAL llama-server.

   Models written on the spot (tests/tiny_gguf.h); the binary as tests/real_server.h finds
   it; skipped with one line when there is none. Three fronts, each with models kv-a and
   kv-b, one resident at a time, every child -c 8192 -np 1 -t 1:
     kv      rsd-serve with kv_cache_dir (slots saved at the stop, restored at the start)
     plain   rsd-serve without it
     router  the llama.cpp router itself (--models-dir, --models-max 1)
   Per round (a fresh conversation each round): turn 1 on kv-a (about 3,900 prompt
   tokens), one request to kv-b (the swap out: kv-a stops, kv-b starts), then turn 2 on
   kv-a (the swap back). Every request asks for max_tokens 1, so its whole answer time is
   its time to first token. Printed per front and round, then medians: the prompt tokens
   turn 2 processed (timings.prompt_n) beside its new tokens (its prompt less turn 1's:
   what a warm server processes), its cache_n, its time to first token (swap back,
   start, restore, prefill), and the swap itself: the two swapping requests' wall time
   less the time the children report for their own prompt and token (timings.prompt_ms
   + predicted_ms), i.e. the stop of kv-a (with its save), the start of kv-b, its stop,
   and the start of kv-a (with its restore). Wall clock on a possibly shared machine:
   the load average is printed.
     kv [ROUNDS]          tiny models (default 7 rounds, each front once per round, so
                          that the medians stand: one round's swap varies by 2x on a
                          loaded machine; about a minute and a half; make bench-kv)
     kv 0p5b [ROUNDS]     two models of the shape of a real 0.5B one (24 blocks, n_embd
                          896, 14 heads, 2 KV heads, n_ff 4864, vocab 151936, random q8_0
                          weights, about 530 MB each, removed after), where a prefill of
                          3,900 tokens takes minutes (the llama-server here is built
                          without AVX: about 10 tokens/s on one thread), so the rounds go
                          otherwise: on kv, one conversation (its long first turn once)
                          and per round a request to kv-b and the conversation's next
                          turn; on plain, per round a short request to kv-a, kv-b and
                          kv-a again (its swap only: a stop without a save does not
                          depend on what the cache holds; its time to first token is
                          not measured); the router, in a forked process beside them,
                          one conversation and one round (a full re-prefill). Then
                          BENCH kv_0p5b_* lines with the targets (re-processed
                          at most the new tokens + 1 % of the prompt, time to first
                          token at most 0.3x the router's, the swap at most 1.2x the
                          plain one). make bench-kv-0p5b.
     kv 0p5b N swap       the same without the router: kv and plain only (their swaps,
                          interleaved; one prefill in all).
     kv 0p5b 1 plain      plain alone, as the router runs: one conversation and one round
                          (its turn after the swap back prefilled in full), for plain's
                          time to first token beside the others' (two long prefills). */
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

/* The last answer's timings.field (-1 when it has none). */
static double timing(const char *field) {
    rsd_json_doc d;
    double v = -1;
    if (rsd_json_parse(&d, g_body, strlen(g_body), g_toks, 8192) <= 0) return -1;
    if (rsd_json_double(&d, rsd_json_find(&d, rsd_json_find(&d, 0, "timings"), field), &v) != RSD_OK) return -1;
    return v;
}

/* The child's own time for the last answer: its prompt and its token (ms). */
static double child_ms(void) {
    double p = timing("prompt_ms"), t = timing("predicted_ms");
    return (p > 0 ? p : 0) + (t > 0 ? t : 0);
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
    st = bench_req(c, "POST", url, body, 3600000, g_body, sizeof g_body);
    *ms = (now_us() - t0) / 1000.0;
    rsd_http_client_destroy(c);
    return st;
}

typedef struct figures {
    double back_ms[MAX_ROUNDS], swap_ms[MAX_ROUNDS], out_ms[MAX_ROUNDS], prompt_n[MAX_ROUNDS], cache_n[MAX_ROUNDS],
        first_n[MAX_ROUNDS], new_n[MAX_ROUNDS], first_ms[MAX_ROUNDS];
    double prev; /* the 0.5B run: the conversation's prompt so far */
    int n;
} figures;

/* The 0.5B run's conversation on kv-a: round r's long first turn, then turns more
   exchanges ("ok", "and more N"). */
static const char *conv(int turns) {
    static char b[1 << 16];
    size_t n = (size_t)snprintf(b, sizeof b, "%s", chat("kv-a", 0, false));
    int t;
    n -= 2; /* before "]}" */
    for (t = 1; t <= turns && n + 96 < sizeof b; t++)
        n += (size_t)snprintf(b + n, sizeof b - n,
                              ",{\"role\":\"assistant\",\"content\":\"ok\"},{\"role\":\"user\",\"content\":\"and more %d\"}", t);
    snprintf(b + n, sizeof b - n, "]}");
    return b;
}

/* The 0.5B run on a front that keeps its conversation: its long first turn (conv_first),
   then per round kv-b and the next turn on kv-a (conv_round). */
static bool conv_first(int port, figures *f) {
    if (post(port, conv(0), &f->first_ms[0]) != 200) return false;
    f->prev = timing("prompt_n") + (timing("cache_n") > 0 ? timing("cache_n") : 0);
    return true;
}

static bool conv_round(int port, figures *f) {
    double b_own, ms;
    int k = f->n;
    if (k >= MAX_ROUNDS) return false;
    if (post(port, "{\"model\":\"kv-b\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
             &f->out_ms[k]) != 200)
        return false;
    b_own = child_ms();
    if (post(port, conv(k + 1), &ms) != 200) return false;
    f->first_n[k] = f->prev;
    f->back_ms[k] = ms;
    f->prompt_n[k] = timing("prompt_n");
    f->cache_n[k] = timing("cache_n");
    f->prev = f->prompt_n[k] + f->cache_n[k];
    f->new_n[k] = f->prev - f->first_n[k];
    f->swap_ms[k] = f->out_ms[k] - b_own + ms - child_ms();
    f->n++;
    return true;
}

/* The 0.5B run on plain: per round kv-a (short), kv-b, kv-a (short): the swap only. */
static bool swap_round(int port, figures *f) {
    static const char *const a = "{\"model\":\"kv-a\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}";
    double ms, b_own;
    int k = f->n;
    if (k >= MAX_ROUNDS || post(port, a, &f->first_ms[k]) != 200) return false;
    f->first_n[k] = timing("prompt_n");
    if (post(port, "{\"model\":\"kv-b\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
             &f->out_ms[k]) != 200)
        return false;
    b_own = child_ms();
    if (post(port, a, &ms) != 200) return false;
    f->back_ms[k] = ms;
    f->prompt_n[k] = timing("prompt_n");
    f->cache_n[k] = timing("cache_n");
    f->new_n[k] = 0;
    f->swap_ms[k] = f->out_ms[k] - b_own + ms - child_ms();
    f->n++;
    return true;
}

/* One round on the front at port: turn 1 on kv-a, kv-b, turn 2 on kv-a. */
static bool round_on(int port, int r, figures *f) {
    double ms, b_own;
    int k = f->n;
    if (post(port, chat("kv-a", r, false), &f->first_ms[k]) != 200) return false;
    f->first_n[k] = timing("prompt_n") + (timing("cache_n") > 0 ? timing("cache_n") : 0); /* turn 1's prompt */
    if (post(port, "{\"model\":\"kv-b\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
             &f->out_ms[k]) != 200)
        return false;
    b_own = child_ms();
    if (post(port, chat("kv-a", r, true), &ms) != 200) return false;
    f->back_ms[k] = ms;
    f->prompt_n[k] = timing("prompt_n");
    f->cache_n[k] = timing("cache_n");
    f->new_n[k] = f->prompt_n[k] + f->cache_n[k] - f->first_n[k];
    f->swap_ms[k] = f->out_ms[k] - b_own + ms - child_ms();
    f->n++;
    return true;
}

static int serve_start(listen_proc *p, const char *name, bool kv) {
    char ini[700], text[4096], logp[700];
    const char *argv[] = {"build/bin/rsd-serve", "--config", ini, NULL};
    int fd, r;
    FILE *f;
    snprintf(ini, sizeof ini, "%s/%s.ini", g_dir, name);
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nllama_server = %s\nargs = -t 1\nmax_models = 1\nstop_grace = 10\nmax_wait = 600\n%s%s%s"
             "[model kv-a]\nmodel = %s/kv-a.gguf\nctx = 8192\nparallel = 1\n"
             "[model kv-b]\nmodel = %s/kv-b.gguf\nctx = 8192\nparallel = 1\n",
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

/* The 1-minute load average (-1 when unknown). */
static double load1(void) {
    double v = -1;
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fscanf(la, "%lf", &v) != 1) v = -1;
        fclose(la);
    }
    return v;
}

static void print_round(const char *name, const figures *f, int k) {
    printf("  %-6s round %d: turn 1 %5.0f tokens %9.1f ms | turn 2: prompt_n %5.0f (new %3.0f) cache_n %5.0f,"
           " first token %9.1f ms | swap %7.1f ms (out %7.1f ms) | load %.2f\n",
           name, k, f->first_n[k], f->first_ms[k], f->prompt_n[k], f->new_n[k], f->cache_n[k], f->back_ms[k],
           f->swap_ms[k], f->out_ms[k], load1());
}

static void print_fig(const char *name, const figures *f) {
    if (!f->n) { printf("  %-6s no round completed\n", name); return; }
    printf("  %-6s median: turn 2 prompt_n %5.0f (new %3.0f) cache_n %5.0f, first token %8.1f ms (min %.1f max %.1f)"
           " | swap %7.1f ms (min %.1f max %.1f)\n",
           name, median(f->prompt_n, f->n), median(f->new_n, f->n), median(f->cache_n, f->n), median(f->back_ms, f->n),
           vmin(f->back_ms, f->n), vmax(f->back_ms, f->n), median(f->swap_ms, f->n), vmin(f->swap_ms, f->n),
           vmax(f->swap_ms, f->n));
}

/* The BENCH lines of the 0.5B shape (medians); how many targets were missed. */
static int print_bench(const figures *fk, const figures *fp, const figures *fr) {
    double re = median(fk->prompt_n, fk->n), nw = median(fk->new_n, fk->n), conv = re + median(fk->cache_n, fk->n);
    double tk = median(fk->back_ms, fk->n), tr = median(fr->back_ms, fr->n);
    double sk = median(fk->swap_ms, fk->n), sp = median(fp->swap_ms, fp->n), sr = median(fr->swap_ms, fr->n);
    int missed = 0;
    if (!fk->n || !fp->n) return 1;
    if (!fr->n) { /* kv 0p5b N swap: no router */
        printf("BENCH kv_0p5b_swap ours=%.1f peer=%.1f unit=ms ratio=%.3f target=1.2\n", sk, sp, sk / sp);
        return sk > 1.2 * sp;
    }
    printf("BENCH kv_0p5b_reprocessed_tokens ours=%.0f peer=%.0f unit=tokens ratio=%.4f new=%.0f"
           " target=%.0f (new + 1%% of the %.0f-token prompt)\n",
           re, median(fr->prompt_n, fr->n), re / median(fr->prompt_n, fr->n), nw, nw + 0.01 * conv, conv);
    printf("BENCH kv_0p5b_ttft_after_swap ours=%.1f peer=%.1f unit=ms ratio=%.3f target=0.3\n", tk, tr, tk / tr);
    printf("BENCH kv_0p5b_swap ours=%.1f peer=%.1f unit=ms ratio=%.3f target=1.2 router=%.1f\n", sk, sp, sk / sp, sr);
    missed += re > nw + 0.01 * conv;
    missed += tk > 0.3 * tr;
    missed += sk > 1.2 * sp;
    printf("bench-kv-0p5b: %d of 3 targets missed (medians over %d kv, %d plain, %d router rounds)\n", missed, fk->n,
           fp->n, fr->n);
    return missed;
}

int main(int argc, char **argv) {
    static figures fk, fp, fr;
    char why[512], mdir[700], p[800], q[800];
    const char *rargs[] = {"--models-dir", mdir, "--models-max", "1", "-t", "1", "-c", "8192", "-np", "1", NULL};
    const char *const names[2] = {"kv-a", "kv-b"};
    listen_proc kv, plain;
    real_server router;
    bool half = argc > 1 && !strcmp(argv[1], "0p5b"), plain_only = half && argc > 3 && !strcmp(argv[3], "plain");
    bool no_router = plain_only || (half && argc > 3 && !strcmp(argv[3], "swap"));
    int rounds = argc > 1 + half ? atoi(argv[1 + half]) : half ? 3 : 7, r, i, failed = 0;
    if (rounds < 1 || rounds > MAX_ROUNDS) rounds = half ? 3 : 7;
    signal(SIGPIPE, SIG_IGN);
    if (real_find(g_bin, sizeof g_bin, why, sizeof why) != 0) {
        printf("bench kv skipped: %s\n", why);
        return 0;
    }
    if (real_models(g_dir, sizeof g_dir) != 0) { printf("cannot write the tiny models\n"); return 1; }
    snprintf(mdir, sizeof mdir, "%s/router-models", g_dir); /* the router lists a directory: two models only */
    mkdir(mdir, 0700);
    for (i = 0; i < 2; i++) { /* kv-a and kv-b with a training context of 8192 at least (the server caps -c at it) */
        snprintf(p, sizeof p, "%s/%s.gguf", g_dir, names[i]);
        if (half) {
            tg_shape sh;
            tg_shape_0p5b(&sh, names[i]);
            if (tiny_gguf_write_shape(p, &sh, 77u + 7919u * (unsigned)i) != 0) {
                printf("cannot write %s: %s\n", p, strerror(errno));
                real_rmdir(g_dir);
                return 1;
            }
        } else if (tiny_gguf_write(p, names[i], 1000 + 7919 * i, 8192, 0) != 0) {
            return 1;
        }
        snprintf(q, sizeof q, "%s/%s.gguf", mdir, names[i]);
        if (link(p, q) != 0) { printf("link: %s\n", strerror(errno)); return 1; }
    }
    setenv("LLAMA_CACHE", g_dir, 1);
    memset(&router, 0, sizeof router);
    if (serve_start(&kv, "kv", true) != 0 || serve_start(&plain, "plain", false) != 0 ||
        (!no_router && real_start(&router, g_bin, g_dir, rargs, 60000) != 0)) {
        printf("cannot start the fronts (logs in %s)\n", g_dir);
        return 1;
    }
    printf("kv cache across a swap (llama-server %s, %s, -c 8192 -np 1 -t 1; %d rounds%s):\n", g_bin,
           half ? "two 0.5B-shaped q8_0 models" : "tiny models", rounds, !half ? "" : no_router ? " on kv and plain, no router" : " on kv and plain, 1 on the router");
    fflush(stdout);
    if (plain_only) {
        if (!conv_first(plain.port, &fp) || !conv_round(plain.port, &fp)) printf("  plain round failed (%s)\n", g_body);
        else print_round("plain", &fp, fp.n - 1);
        (void)listen_proc_stop(&kv);
        (void)listen_proc_stop(&plain);
        real_rmdir(g_dir);
        return fp.n ? 0 : 1;
    }
    if (half) { /* the router beside (its re-prefill takes minutes), kv then plain here */
        int fds[2];
        pid_t pid;
        ssize_t got = 0, n;
        if (no_router) pid = -1;
        else if (pipe(fds) != 0 || (pid = fork()) < 0) { printf("pipe/fork: %s\n", strerror(errno)); return 1; }
        if (pid == 0) {
            close(fds[0]);
            if (!conv_first(router.port, &fr) || !conv_round(router.port, &fr))
                printf("  router round failed (%s)\n", g_body);
            for (i = 0; i < fr.n; i++) print_round("router", &fr, i);
            fflush(stdout);
            n = write(fds[1], &fr, sizeof fr);
            _exit(n == (ssize_t)sizeof fr ? 0 : 1);
        }
        if (pid > 0) close(fds[1]);
        if (!conv_first(kv.port, &fk)) printf("  kv's first turn failed (%s)\n", g_body);
        for (r = 0; r < rounds; r++) { /* interleaved */
            if (!conv_round(kv.port, &fk)) printf("  kv round %d failed (%s)\n", r, g_body);
            else print_round("kv", &fk, fk.n - 1);
            if (!swap_round(plain.port, &fp)) printf("  plain round %d failed (%s)\n", r, g_body);
            else print_round("plain", &fp, fp.n - 1);
            fflush(stdout);
        }
        while (pid > 0 && got < (ssize_t)sizeof fr && (n = read(fds[0], (char *)&fr + got, sizeof fr - (size_t)got)) > 0)
            got += n;
        if (got != (ssize_t)sizeof fr) memset(&fr, 0, sizeof fr);
        if (pid > 0) {
            close(fds[0]);
            (void)waitpid(pid, NULL, 0);
        }
    } else {
        for (r = 0; r < rounds; r++) { /* interleaved: each front once per round */
            figures *fs[3];
            const int ports[3] = {kv.port, plain.port, router.port};
            const char *const fronts[3] = {"kv", "plain", "router"};
            fs[0] = &fk;
            fs[1] = &fp;
            fs[2] = &fr;
            for (i = 0; i < 3; i++) {
                if (!round_on(ports[i], r, fs[i])) {
                    printf("  %s round %d failed (%s)\n", fronts[i], r, g_body);
                    failed++;
                }
                else print_round(fronts[i], fs[i], fs[i]->n - 1);
                fflush(stdout);
            }
        }
    }
    printf("medians:\n");
    print_fig("kv", &fk);
    print_fig("plain", &fp);
    print_fig("router", &fr);
    if (half) (void)print_bench(&fk, &fp, &fr);
    else if (failed || !fk.n || !fp.n || !fr.n)
        printf("BENCH kv_tiny failed: %d round(s) failed\n", failed);
    else { /* the turn after a swap back: kv against the router (tokens, first token), its swap against plain's */
        double rk = median(fk.prompt_n, fk.n), rr = median(fr.prompt_n, fr.n);
        double tk = median(fk.back_ms, fk.n), tr = median(fr.back_ms, fr.n);
        double sk = median(fk.swap_ms, fk.n), sp = median(fp.swap_ms, fp.n);
        printf("BENCH kv_tiny_reprocessed_tokens ours=%.0f peer=%.0f unit=tokens ratio=%.4f new=%.0f\n", rk, rr,
               rr > 0 ? rk / rr : 0.0, median(fk.new_n, fk.n));
        printf("BENCH kv_tiny_ttft_after_swap ours=%.1f peer=%.1f unit=ms ratio=%.3f\n", tk, tr, tr > 0 ? tk / tr : 0.0);
        printf("BENCH kv_tiny_swap ours=%.1f peer=%.1f unit=ms ratio=%.3f (peer: the plain swap)\n", sk, sp,
               sp > 0 ? sk / sp : 0.0);
    }
    (void)listen_proc_stop(&kv);
    (void)listen_proc_stop(&plain);
    if (!no_router) (void)real_stop(&router);
    real_rmdir(g_dir);
    return failed ? 1 : 0;
}
