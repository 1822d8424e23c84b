/* Parse throughput of the pure HTTP parsers (bench only; -O2, no sanitizers).
   No peer: picohttpparser is not packaged in Debian, so there is nothing to link
   against in the same run; perf.md section 3.3 has its numbers for this machine. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static volatile size_t sink;

typedef size_t (*bench_fn)(void *ctx);

/* Median seconds per call over 5 runs of n calls; n calibrated to ~0.3 s per run. */
static double measure(bench_fn fn, void *ctx) {
    double t[5], t0;
    size_t n = 1000, i;
    int k;
    for (;;) {
        t0 = now_s();
        for (i = 0; i < n; i++) sink += fn(ctx);
        if (now_s() - t0 > 0.1) break;
        n *= 4;
    }
    n = (size_t)((double)n * 0.3 / (now_s() - t0 + 1e-9)) + 1;
    for (k = 0; k < 5; k++) {
        t0 = now_s();
        for (i = 0; i < n; i++) sink += fn(ctx);
        t[k] = (now_s() - t0) / (double)n;
    }
    qsort(t, 5, sizeof t[0], cmp_d);
    return t[2];
}

static const char resp_head[] =
    "HTTP/1.1 200 OK\r\nContent-Length: 15098\r\nContent-Type: application/json; charset=utf-8\r\n"
    "Keep-Alive: timeout=5, max=100\r\nServer: llama.cpp\r\nAccess-Control-Allow-Origin: \r\n\r\n";
static const char req_head[] =
    "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: residency/0.1\r\n"
    "Content-Type: application/json\r\nContent-Length: 512\r\nAccept: application/json\r\n\r\n";

static size_t b_resp(void *ctx) {
    static rsd_http_response_head h;
    size_t c = 0;
    (void)ctx;
    return rsd_http_parse_response(resp_head, sizeof resp_head - 1, 0, &h, &c) == RSD_OK ? c : 0;
}

static size_t b_req(void *ctx) {
    static rsd_http_request_head h;
    size_t c = 0;
    (void)ctx;
    return rsd_http_parse_request(req_head, sizeof req_head - 1, 0, &h, &c) == RSD_OK ? c : 0;
}

typedef struct chunk_ctx { char *src, *work; size_t n; } chunk_ctx;

static size_t b_dechunk(void *ctx) {
    chunk_ctx *c = (chunk_ctx *)ctx;
    rsd_http_dechunk d;
    size_t l = c->n;
    memset(&d, 0, sizeof d);
    memcpy(c->work, c->src, c->n);
    return rsd_http_dechunk_step(&d, c->work, &l) == RSD_OK ? l : 0;
}

int main(void) {
    chunk_ctx cc;
    size_t i, body = 15098, off = 0;
    double t_resp, t_req, t_dc;
    /* 15098-byte body (the /v1/models payload size) in 4096-byte chunks */
    cc.src = (char *)malloc(body + 256);
    cc.work = (char *)malloc(body + 256);
    if (!cc.src || !cc.work) return 1;
    for (i = 0; i < body; i += 4096) {
        size_t k = body - i < 4096 ? body - i : 4096;
        off += (size_t)sprintf(cc.src + off, "%zx\r\n", k);
        memset(cc.src + off, 'j', k);
        off += k;
        memcpy(cc.src + off, "\r\n", 2);
        off += 2;
    }
    memcpy(cc.src + off, "0\r\n\r\n", 5);
    cc.n = off + 5;
    t_resp = measure(b_resp, NULL);
    t_req = measure(b_req, NULL);
    t_dc = measure(b_dechunk, &cc);
    printf("httpparse (no peer: picohttpparser is not packaged in Debian; perf.md 3.3 has it at 9.6 M heads/s on a 171-byte head)\n");
    printf("  %-34s %6zu B  %8.1f MB/s  %6.2f M/s  %7.3f us\n", "response head (llama-server-like)",
           sizeof resp_head - 1, (double)(sizeof resp_head - 1) / t_resp / 1e6, 1e-6 / t_resp, t_resp * 1e6);
    printf("  %-34s %6zu B  %8.1f MB/s  %6.2f M/s  %7.3f us\n", "request head (POST chat)",
           sizeof req_head - 1, (double)(sizeof req_head - 1) / t_req / 1e6, 1e-6 / t_req, t_req * 1e6);
    printf("  %-34s %6zu B  %8.1f MB/s  %6.2f M/s  %7.3f us  (includes a memcpy of the input)\n",
           "dechunk 15098 B in 4 KiB chunks", cc.n, (double)cc.n / t_dc / 1e6, 1e-6 / t_dc, t_dc * 1e6);
    free(cc.src);
    free(cc.work);
    return 0;
}
