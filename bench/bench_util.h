/* bench/bench_util.h -- the benches' clock, sleep, order statistics and one blocking request (shared by
   the bench programs). median and pct sort a copy (on the heap above 256 values; 0 when
   that fails). Needs <errno.h> <stdlib.h> <time.h>. */
#ifndef RSD_BENCH_UTIL_H
#define RSD_BENCH_UTIL_H
#include <errno.h>
#include <stdlib.h>
#include <time.h>

static inline double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* CPU time of this process (user + system): the pure figures (3, 4) are timed with it so
   that preemption by other jobs on the shared vCPU does not count. */
static inline double cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline void sleep_ms(double ms) {
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1000.0);
    ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1000.0) * 1e6);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* v[0..n) sorted into a copy: stack when it fits, else the heap (NULL when that fails) */
static inline double *bench_sorted(const double *v, int n, double *stack) {
    double *t = n <= 256 ? stack : (double *)malloc((size_t)n * sizeof *t);
    int i;
    if (!t) return NULL;
    for (i = 0; i < n; i++) t[i] = v[i];
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    return t;
}

static inline double median(const double *v, int n) {
    double s[256], *t, m;
    if (n <= 0 || !(t = bench_sorted(v, n, s))) return 0;
    m = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
    if (t != s) free(t);
    return m;
}

static inline double pct(const double *v, int n, double p) {
    double s[256], *t, m;
    if (n <= 0 || !(t = bench_sorted(v, n, s))) return 0;
    m = t[(int)(p * (n - 1) + 0.5)];
    if (t != s) free(t);
    return m;
}

static inline double vmin(const double *v, int n) { double m = v[0]; int i; for (i = 1; i < n; i++) if (v[i] < m) m = v[i]; return m; }
static inline double vmax(const double *v, int n) { double m = v[0]; int i; for (i = 1; i < n; i++) if (v[i] > m) m = v[i]; return m; }
#ifdef RESIDENCY_HTTP_H_INCLUDED
#include "../tests/http_req.h"
/* One blocking request on c: the status (0 on a transport error), the body copied into
   buf (NUL-terminated, cut to cap - 1) when buf is given; timeout_ms 0 = the client's. */
static inline int bench_req(rsd_http_client *c, const char *method, const char *url, const char *body,
                            uint32_t timeout_ms, char *buf, size_t cap) {
    rsd_http_request q;
    int st;
    if (body) {
        json_post(&q, url, body);
    } else {
        memset(&q, 0, sizeof q);
        q.url = url;
    }
    q.method = method;
    q.total_timeout_ms = timeout_ms;
    if (buf && cap) buf[0] = 0;
    st = http_sync_into(c, &q, buf, cap);
    return st < 0 ? 0 : st;
}
#endif

#endif
