/* bench_serve: what rsd-serve adds to a request. One simulated llama-server child
   (rsd-sim --runtime server --gen-ms 0) behind rsd-serve; the same non-streaming chat
   completion is sent alternately through rsd-serve and straight to the child, each
   over its own kept-alive connection (rsd_http_client, blocking wrapper), in the same
   run. ours = median latency through rsd-serve, peer = median latency direct;
   the added latency is their difference (target <= 0.2 ms).
   usage: bench_serve build/bin/rsd-serve build/bin/rsd-sim */
#define RESIDENCY_IMPLEMENTATION
#include "residency_http.h"
#include "bench_util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { WARMUP = 200, N = 3000 };

static const char g_chat[] = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}],\"max_tokens\":8}";

int main(int argc, char **argv) {
    char cfg_path[] = "/tmp/rsd-bench-serve.XXXXXX", line[256], url_serve[128], url_child[128], base[64], buf[8192];
    const char *sargv[4];
    rsd_http_client *cs, *cd, *cm;
    static double through[N], direct[N];
    double med_t, med_d, p90_t, p90_d;
    int fd, pfd[2], i, port, child_port = 0, st;
    size_t got = 0;
    pid_t pid;
    FILE *f;
    if (argc < 3) { fprintf(stderr, "usage: bench_serve RSD_SERVE RSD_SIM\n"); return 2; }
    signal(SIGPIPE, SIG_IGN);
    fd = mkstemp(cfg_path);
    if (fd < 0 || !(f = fdopen(fd, "w"))) return 1;
    fprintf(f, "listen = 127.0.0.1:0\nmax_models = 1\nllama_server = %s\n"
               "args = --runtime server --load-ms 0 --gen-ms 0\n[model m]\nmodel = /dev/null\n", argv[2]); /* readable: rsd-serve checks */
    fclose(f);
    if (pipe(pfd) != 0) return 1;
    sargv[0] = argv[1];
    sargv[1] = "--config";
    sargv[2] = cfg_path;
    sargv[3] = NULL;
    pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(pfd[1], 1);
        if (null >= 0) dup2(null, 2);
        close(pfd[0]);
        close(pfd[1]);
        execv(argv[1], (char *const *)(void *)sargv);
        _exit(127);
    }
    close(pfd[1]);
    while (got < sizeof line - 1 && read(pfd[0], line + got, 1) == 1 && line[got] != '\n') got++;
    line[got] = 0;
    close(pfd[0]);
    if (!strstr(line, "listening on") || !strrchr(line, ':')) { fprintf(stderr, "rsd-serve did not start: %s\n", line); return 1; }
    port = atoi(strrchr(line, ':') + 1);
    snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
    cs = rsd_http_client_create(NULL);
    cd = rsd_http_client_create(NULL);
    cm = rsd_http_client_create(NULL);
    if (!cs || !cd || !cm) return 1;
    /* load the model and find its child's port */
    snprintf(url_serve, sizeof url_serve, "%s/v1/chat/completions", base);
    if (bench_req(cs, "POST", url_serve, g_chat, 0, buf, sizeof buf) != 200) { fprintf(stderr, "first request failed: %s\n", buf); return 1; }
    snprintf(url_child, sizeof url_child, "%s/status", base);
    if (bench_req(cm, "GET", url_child, NULL, 0, buf, sizeof buf) == 200) {
        const char *p = strstr(buf, "\"port\":");
        if (p) child_port = atoi(p + 7);
    }
    if (child_port <= 0) { fprintf(stderr, "no child port in /status: %s\n", buf); return 1; }
    snprintf(url_child, sizeof url_child, "http://127.0.0.1:%d/v1/chat/completions", child_port);
    for (i = 0; i < WARMUP; i++) {
        if (bench_req(cs, "POST", url_serve, g_chat, 0, NULL, 0) != 200 || bench_req(cd, "POST", url_child, g_chat, 0, NULL, 0) != 200) {
            fprintf(stderr, "warm-up request failed\n");
            return 1;
        }
    }
    for (i = 0; i < N; i++) {
        double t0 = now_us(), t1, t2;
        int a = bench_req(cs, "POST", url_serve, g_chat, 0, NULL, 0);
        t1 = now_us();
        int b = bench_req(cd, "POST", url_child, g_chat, 0, NULL, 0);
        t2 = now_us();
        if (a != 200 || b != 200) { fprintf(stderr, "request %d failed (%d, %d)\n", i, a, b); return 1; }
        through[i] = (t1 - t0) / 1000.0;
        direct[i] = (t2 - t1) / 1000.0;
    }
    med_t = pct(through, N, 0.5);
    med_d = pct(direct, N, 0.5);
    p90_t = pct(through, N, 0.9);
    p90_d = pct(direct, N, 0.9);
    printf("BENCH serve_added_latency_ms ours=%.4f peer=%.4f unit=ms ratio=%.2f\n", med_t, med_d, med_d > 0 ? med_t / med_d : 0.0);
    printf("serve: added median latency %.4f ms per request (target <= 0.2 ms): %s\n", med_t - med_d,
           med_t - med_d <= 0.2 ? "met" : "NOT met");
    printf("  %-28s %10s %10s\n", "non-streaming chat, N=3000", "median ms", "p90 ms");
    printf("  %-28s %10.4f %10.4f\n", "through rsd-serve", med_t, p90_t);
    printf("  %-28s %10.4f %10.4f\n", "direct to the child", med_d, p90_d);
    printf("  %-28s %10.4f %10.4f\n", "added", med_t - med_d, p90_t - p90_d);
    rsd_http_client_destroy(cs);
    rsd_http_client_destroy(cd);
    rsd_http_client_destroy(cm);
    kill(pid, SIGTERM);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    unlink(cfg_path);
    return 0;
}
