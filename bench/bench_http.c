/* Keep-alive GET round trips per second on 127.0.0.1 against our server (forked child,
   pinned to CPU 0): our client (rsd_http_request_sync, i.e. the step loop + poll) vs
   libcurl (one reused easy handle) vs a bare blocking write/read loop on one socket
   (the floor). Same-core (client on CPU 0) and cross-core (client on CPU 1) runs are
   reported separately (perf.md 3.4). Also: allocations per steady-state request, and
   the -Os code size (measured by bench/http.mk, passed in argv). Median of 5 runs. */
#define _GNU_SOURCE 1
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <curl/curl.h>

static const char *g_body = "{\"status\":\"ok\"}"; /* 15 bytes, as httpd_tiny's /health */
static char g_url[96];
static uint16_t g_port;

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) perror("sched_setaffinity");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void serve_forever(rsd_http_server *s) {
    rsd_http_header ct;
    ct.name = rsd_str_c("Content-Type");
    ct.value = rsd_str_c("application/json");
    for (;;) {
        rsd_pollfd fds[64];
        rsd_http_server_event ev;
        int n = rsd_http_server_pollfds(s, fds, 64);
        if (n > 64) n = 64;
        (void)poll((struct pollfd *)(void *)fds, (nfds_t)n, 1000);
        (void)rsd_http_server_step_polled(s, rsd_now_ms(), fds, n);
        while (rsd_http_server_next_event(s, &ev))
            if (ev.type == RSD_HTTP_SEV_REQUEST)
                (void)rsd_http_respond(s, ev.req, 200, &ct, 1, g_body, strlen(g_body));
        if (getppid() == 1) _exit(0); /* parent gone */
    }
}

/* ---- counting allocators ---- */
static long g_ours_allocs;
static void *ours_alloc(size_t n, void *u) { (void)u; g_ours_allocs++; return malloc(n); }
static void ours_free(void *p, void *u) { (void)u; free(p); }

static long g_curl_allocs;
static void *cm(size_t n) { g_curl_allocs++; return malloc(n); }
static void cf(void *p) { free(p); }
static void *cr(void *p, size_t n) { g_curl_allocs++; return realloc(p, n); }
static char *cs(const char *s) { g_curl_allocs++; return strdup(s); }
static void *cc(size_t a, size_t b) { g_curl_allocs++; return calloc(a, b); }

/* ---- the three clients: each runs n requests, returns seconds ---- */
static rsd_http_client *g_c;
static double run_ours(int n) {
    rsd_http_request q;
    rsd_http_event resp;
    double t0;
    int i;
    memset(&q, 0, sizeof q);
    q.url = g_url;
    t0 = now_s();
    for (i = 0; i < n; i++)
        if (rsd_http_request_sync(g_c, &q, &resp) != RSD_OK || resp.body.len != 15) {
            fprintf(stderr, "ours: request failed: %s\n", rsd_result_str(resp.result));
            exit(1);
        }
    return now_s() - t0;
}

static size_t sink(char *p, size_t a, size_t b, void *u) { (void)p; (void)u; return a * b; }
static CURL *g_curl;
static double run_curl(int n) {
    double t0 = now_s();
    int i;
    for (i = 0; i < n; i++)
        if (curl_easy_perform(g_curl) != CURLE_OK) {
            fprintf(stderr, "curl: request failed\n");
            exit(1);
        }
    return now_s() - t0;
}

static int g_raw = -1;
static size_t g_raw_resp;
static double run_raw(int n) {
    static const char req[] = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    char buf[4096];
    double t0 = now_s();
    int i;
    for (i = 0; i < n; i++) {
        size_t got = 0;
        if (send(g_raw, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof req - 1)) exit(1);
        while (got < g_raw_resp) {
            ssize_t r = recv(g_raw, buf, sizeof buf, 0);
            if (r <= 0) exit(1);
            got += (size_t)r;
        }
    }
    return now_s() - t0;
}

static int raw_open(void) {
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    char buf[4096];
    ssize_t r;
    static const char req[] = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(g_port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) exit(1);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* learn the response size once (head + 15-byte body arrive in one segment) */
    if (send(fd, req, sizeof req - 1, 0) < 0) exit(1);
    r = recv(fd, buf, sizeof buf, 0);
    if (r <= 0) exit(1);
    g_raw_resp = (size_t)r;
    return fd;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef double (*run_fn)(int);
/* The three clients run interleaved (ours, curl, bare, ours, ...) 5 times after a warm-up,
   so load changes on this shared machine hit all three alike; median req/s, min, max. */
static void rps3(run_fn f[3], int n, double out[3][3]) {
    double v[3][5];
    int i, k;
    for (k = 0; k < 3; k++) (void)f[k](n / 10 + 1);
    for (i = 0; i < 5; i++)
        for (k = 0; k < 3; k++) v[k][i] = (double)n / f[k](n);
    for (k = 0; k < 3; k++) {
        qsort(v[k], 5, sizeof v[k][0], cmp_d);
        out[k][0] = v[k][2];
        out[k][1] = v[k][0];
        out[k][2] = v[k][4];
    }
}

int main(int argc, char **argv) {
    rsd_http_server *s = rsd_http_server_create(NULL);
    rsd_http_client_desc cd;
    pid_t pid;
    int cpu, ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    long text_ours = argc > 1 ? atol(argv[1]) : 0, text_all = argc > 2 ? atol(argv[2]) : 0;
    double table[2][3][3];
    if (!s) return 1;
    g_port = rsd_http_server_port(s);
    snprintf(g_url, sizeof g_url, "http://127.0.0.1:%u/health", (unsigned)g_port);
    pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        pin(0);
        serve_forever(s);
    }
    rsd_http_server_destroy(s); /* the parent's copy: closes its listening socket */

    memset(&cd, 0, sizeof cd);
    cd.allocator.alloc_fn = ours_alloc;
    cd.allocator.free_fn = ours_free;
    g_c = rsd_http_client_create(&cd);
    curl_global_init_mem(CURL_GLOBAL_DEFAULT, cm, cf, cr, cs, cc);
    g_curl = curl_easy_init();
    curl_easy_setopt(g_curl, CURLOPT_URL, g_url);
    curl_easy_setopt(g_curl, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(g_curl, CURLOPT_TCP_NODELAY, 1L);
    g_raw = raw_open();
    if (!g_c || !g_curl) return 1;

    for (cpu = 0; cpu < 2; cpu++) {
        int n = cpu == 0 ? 8000 : 3000;
        if (cpu == 1 && ncpu < 2) break;
        run_fn fs[3];
        fs[0] = run_ours;
        fs[1] = run_curl;
        fs[2] = run_raw;
        pin(cpu);
        rps3(fs, n, table[cpu]);
    }
    /* allocations per steady-state request */
    {
        long a0 = g_ours_allocs, b0;
        double per_ours, per_curl;
        (void)run_ours(1000);
        per_ours = (double)(g_ours_allocs - a0) / 1000.0;
        b0 = g_curl_allocs;
        (void)run_curl(1000);
        per_curl = (double)(g_curl_allocs - b0) / 1000.0;
        printf("BENCH http_allocs_per_request ours=%.2f peer=%.2f unit=allocs/req ratio=%.2f\n",
               per_ours, per_curl, per_curl > 0 ? per_ours / per_curl : 0.0);
    }
    for (cpu = 0; cpu < 2; cpu++) {
        const char *tag = cpu == 0 ? "samecore" : "crosscore";
        if (cpu == 1 && ncpu < 2) break;
        printf("BENCH http_rps_%s_vs_curl ours=%.0f peer=%.0f unit=req/s ratio=%.2f\n", tag,
               table[cpu][0][0], table[cpu][1][0], table[cpu][0][0] / table[cpu][1][0]);
        printf("BENCH http_rps_%s_vs_bare ours=%.0f peer=%.0f unit=req/s ratio=%.2f\n", tag,
               table[cpu][0][0], table[cpu][2][0], table[cpu][0][0] / table[cpu][2][0]);
    }
    if (text_ours > 0)
        printf("BENCH code_size_text ours=%ld peer=65536 unit=bytes ratio=%.2f\n", text_ours,
               (double)text_ours / 65536.0);
    if (text_all > 0)
        printf("BENCH code_size_text_with_parsers ours=%ld peer=65536 unit=bytes ratio=%.2f\n", text_all,
               (double)text_all / 65536.0);
    printf("\nkeep-alive GET /health (15-byte JSON body) on 127.0.0.1, server = rsd_http_server in a\n"
           "forked child pinned to CPU 0; client pinned to CPU 0 (same core) or CPU 1 (cross core).\n"
           "median of 5 interleaved runs [min..max], req/s:\n");
    printf("%-10s %-26s %-26s %-26s\n", "pinning", "ours (request_sync)", "libcurl (reused handle)",
           "bare write/read loop");
    for (cpu = 0; cpu < 2; cpu++) {
        int k;
        if (cpu == 1 && ncpu < 2) break;
        printf("%-10s", cpu == 0 ? "same" : "cross");
        for (k = 0; k < 3; k++) {
            char cell[64];
            snprintf(cell, sizeof cell, "%.0f [%.0f..%.0f]", table[cpu][k][0], table[cpu][k][1], table[cpu][k][2]);
            printf(" %-26s", cell);
        }
        printf("\n");
    }
    printf("code size (-Os .text): client+server+SSE+sockets %ld bytes; with URL+HTTP parsers %ld bytes;\n"
           "peer figure 65536 = the 64 KiB target, not a measured library.\n", text_ours, text_all);
    curl_easy_cleanup(g_curl);
    curl_global_cleanup();
    rsd_http_client_destroy(g_c);
    close(g_raw);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    return 0;
}
