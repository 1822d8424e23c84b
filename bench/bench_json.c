/* JSON parse throughput: residency.h vs cJSON, jsmn and simdjson, same process, same bytes.
   Payloads: (a) bench/data/models64.json, the llama.cpp router /v1/models payload of
   perf.md §3.1 (15,098 bytes, generator in bench/data/gen_models.py), and (b) a ~1 MB
   mixed document generated here deterministically (objects, long and short strings with
   escapes and UTF-8, ints, doubles, bools, nulls, nested arrays, some whitespace).
   Peers: cJSON (parse + delete), jsmn 1.1.0 tokens only with JSMN_STRICT and
   JSMN_PARENT_LINKS (the strict, linear configuration), simdjson DOM with the parser
   reused and the input padded once outside the timing. Ours: tokens into a
   preallocated array (the count pass is not timed, as jsmn's is not).
   Each figure: median of R runs of N iterations, N calibrated to ~T seconds per run;
   all parsers are measured round-robin inside each run index.
   Usage: bench_json [-r runs] [-t seconds] [models64.json] */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <cjson/cJSON.h>
#define JSMN_STATIC
#define JSMN_STRICT
#define JSMN_PARENT_LINKS
#include <jsmn.h>

void *bench_simd_new(const char *s, size_t n);
void bench_simd_free(void *p);
int bench_simd_parse(void *p);
long bench_simd_extract(void *p);

typedef struct input {
    const char *name;
    char *s;
    size_t n;
    rsd_json_tok *toks;
    uint32_t ntoks;
    jsmntok_t *jtoks;
    int njtoks;
    void *simd;
} input;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: robust to a shared, loaded machine */
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the parsers, one iteration each; return nonzero on failure ---- */
static int p_ours(input *in) {
    rsd_json_doc d;
    return rsd_json_parse(&d, in->s, in->n, in->toks, in->ntoks + 1) != (int)in->ntoks;
}
static int p_cjson(input *in) {
    cJSON *j = cJSON_ParseWithLength(in->s, in->n);
    if (!j) return 1;
    cJSON_Delete(j);
    return 0;
}
static int p_jsmn(input *in) {
    jsmn_parser p;
    jsmn_init(&p);
    return jsmn_parse(&p, in->s, in->n, in->jtoks, (unsigned)in->njtoks) != in->njtoks;
}
static int p_simd(input *in) { return bench_simd_parse(in->simd); }

/* ---- parse + extract what a reconciler needs: id, status.value, --port, tag count ---- */
static long x_ours(input *in) {
    rsd_json_doc d;
    long sum = 0;
    int data, m, a;
    char id[256];
    size_t len;
    if (rsd_json_parse(&d, in->s, in->n, in->toks, in->ntoks + 1) <= 0) return -1;
    data = rsd_json_find(&d, 0, "data");
    for (m = rsd_json_child(&d, data); m >= 0; m = rsd_json_next(&d, m)) {
        int obj = m, st, args;
        if (rsd_json_str(&d, rsd_json_find(&d, obj, "id"), id, sizeof id, &len) == RSD_OK) sum += (long)len;
        st = rsd_json_find(&d, obj, "status");
        sum += (long)rsd_json_view(&d, rsd_json_find(&d, st, "value")).len;
        args = rsd_json_find(&d, st, "args");
        for (a = rsd_json_child(&d, args); a >= 0; a = rsd_json_next(&d, a)) {
            if (rsd_json_str_eq(&d, a, "--port")) {
                rsd_str v = rsd_json_view(&d, rsd_json_next(&d, a));
                long port = 0;
                size_t k;
                for (k = 0; k < v.len; k++) port = port * 10 + (v.ptr[k] - '0');
                sum += port;
                break;
            }
        }
        sum += rsd_json_size(&d, rsd_json_find(&d, obj, "tags"));
    }
    return sum;
}
static long x_simd(input *in) { return bench_simd_extract(in->simd); }
static long x_cjson(input *in) {
    cJSON *j = cJSON_ParseWithLength(in->s, in->n), *m, *a;
    long sum = 0;
    if (!j) return -1;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(j, "data")) {
        cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "id");
        cJSON *st = cJSON_GetObjectItemCaseSensitive(m, "status");
        cJSON *val = cJSON_GetObjectItemCaseSensitive(st, "value");
        if (cJSON_IsString(id)) sum += (long)strlen(id->valuestring);
        if (cJSON_IsString(val)) sum += (long)strlen(val->valuestring);
        cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(st, "args")) {
            if (cJSON_IsString(a) && strcmp(a->valuestring, "--port") == 0 && a->next) {
                sum += atol(a->next->valuestring);
                break;
            }
        }
        sum += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(m, "tags"));
    }
    cJSON_Delete(j);
    return sum;
}

/* ---- deterministic ~1 MB mixed document ---- */
static uint64_t rng = 0x243F6A8885A308D3ull;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng % n);
}
static char *gen_mixed(size_t target, size_t *out_n) {
    static const char *const words[] = {"alpha", "beta", "gamma", "delta", "model", "server",
        "resident", "\\\"quoted\\\"", "caf\xC3\xA9", "\xE2\x82\xAC" "42", "line\\nbreak",
        "tab\\there", "\\u00e9t\\u00e9", "path\\/to", "\xF0\x9F\x98\x80", "na\xC3\xAFve"};
    size_t cap = target + 4096, n = 0;
    char *s = (char *)malloc(cap);
    int rec = 0, k, nw;
    n += (size_t)sprintf(s + n, "{\"generated\":\"bench\",\"records\":[\n");
    while (n < target) {
        if (rec++) n += (size_t)sprintf(s + n, rnd(4) ? "," : ",\n  ");
        n += (size_t)sprintf(s + n, "{\"id\":%u,\"name\":\"user_%u %s\",\"score\":%d.%03ue%d,"
                             "\"ratio\":%u.%u,\"active\":%s,\"parent\":null,\"tags\":[",
                             rnd(1000000), rnd(100000), words[rnd(16)], (int)rnd(2000) - 1000,
                             rnd(1000), (int)rnd(20) - 10, rnd(100), rnd(1000000),
                             rnd(2) ? "true" : "false");
        nw = (int)rnd(5);
        for (k = 0; k < nw; k++) n += (size_t)sprintf(s + n, "%s\"%s\"", k ? "," : "", words[rnd(16)]);
        n += (size_t)sprintf(s + n, "],\"geo\":{\"lat\": %d.%06u, \"lon\": %d.%06u},\"matrix\":[[%u,%u],[%u,%u]],"
                             "\"text\":\"", (int)rnd(180) - 90, rnd(1000000), (int)rnd(360) - 180,
                             rnd(1000000), rnd(10), rnd(100), rnd(1000), rnd(10000));
        nw = 4 + (int)rnd(30);
        for (k = 0; k < nw; k++) n += (size_t)sprintf(s + n, "%s%s", k ? " " : "", words[rnd(16)]);
        n += (size_t)sprintf(s + n, "\",\"big\":%u%09u,\"neg\":-%u}", 1 + rnd(9), rnd(1000000000), rnd(100000));
    }
    n += (size_t)sprintf(s + n, "\n]}\n");
    *out_n = n;
    return s;
}

/* ---- timing ---- */
enum { MAXR = 15, NP = 4 };
typedef struct peer {
    const char *name;
    int (*fn)(input *);
    long n_iter;
    double mbps[MAXR];
} peer;

static double time_n(peer *p, input *in, long n) {
    double t0 = now_s();
    long i;
    for (i = 0; i < n; i++)
        if (p->fn(in)) { fprintf(stderr, "%s failed on %s\n", p->name, in->name); exit(1); }
    return now_s() - t0;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int r, double *mn, double *mx) {
    double t[MAXR];
    memcpy(t, v, sizeof(double) * (size_t)r);
    qsort(t, (size_t)r, sizeof t[0], cmp_d);
    *mn = t[0];
    *mx = t[r - 1];
    return r % 2 ? t[r / 2] : (t[r / 2 - 1] + t[r / 2]) / 2;
}

static void prepare(input *in) {
    rsd_json_doc d;
    jsmn_parser jp;
    int r = rsd_json_parse(&d, in->s, in->n, NULL, 0);
    if (r <= 0) { fprintf(stderr, "%s: ours rejects it: %s at %u:%u\n", in->name, d.err.what, d.err.line, d.err.col); exit(1); }
    in->ntoks = (uint32_t)r;
    in->toks = (rsd_json_tok *)malloc(sizeof *in->toks * (size_t)(r + 1));
    jsmn_init(&jp);
    in->njtoks = jsmn_parse(&jp, in->s, in->n, NULL, 0);
    if (in->njtoks <= 0) { fprintf(stderr, "%s: jsmn rejects it\n", in->name); exit(1); }
    in->jtoks = (jsmntok_t *)malloc(sizeof *in->jtoks * (size_t)in->njtoks);
    in->simd = bench_simd_new(in->s, in->n);
    if (bench_simd_parse(in->simd) || p_cjson(in) || p_jsmn(in) || p_ours(in)) {
        fprintf(stderr, "%s: a parser failed\n", in->name);
        exit(1);
    }
}

static void bench_input(input *in, const char *tag, int runs, double secs, double out[NP][3]) {
    peer ps[NP] = {{"residency.h", p_ours, 0, {0}}, {"cJSON", p_cjson, 0, {0}},
                   {"jsmn", p_jsmn, 0, {0}}, {"simdjson", p_simd, 0, {0}}};
    int i, r;
    for (i = 0; i < NP; i++) {
        long n = 1;
        double t;
        while ((t = time_n(&ps[i], in, n)) < secs / 8) n *= 2;
        ps[i].n_iter = (long)((double)n * secs / t) + 1;
    }
    for (r = 0; r < runs; r++)
        for (i = 0; i < NP; i++)
            ps[i].mbps[r] = (double)in->n * (double)ps[i].n_iter / time_n(&ps[i], in, ps[i].n_iter) / 1e6;
    for (i = 0; i < NP; i++) out[i][0] = median(ps[i].mbps, runs, &out[i][1], &out[i][2]);
    for (i = 1; i < NP; i++)
        printf("BENCH json_%s_vs_%s ours=%.1f peer=%.1f unit=MB/s ratio=%.3f\n", tag,
               i == 1 ? "cjson" : i == 2 ? "jsmn" : "simdjson", out[0][0], out[i][0], out[0][0] / out[i][0]);
    fflush(stdout);
}

static double bench_extract(input *in, long (*fn)(input *), double secs, int runs, long *sum, double *mn, double *mx) {
    double v[MAXR], t, t0;
    long n = 1, i;
    int r;
    *sum = fn(in);
    for (;;) {
        t0 = now_s();
        for (i = 0; i < n; i++) fn(in);
        t = now_s() - t0;
        if (t >= secs / 8) break;
        n *= 2;
    }
    n = (long)((double)n * secs / t) + 1;
    for (r = 0; r < runs; r++) {
        t0 = now_s();
        for (i = 0; i < n; i++)
            if (fn(in) != *sum) { fprintf(stderr, "extract checksum changed\n"); exit(1); }
        v[r] = (now_s() - t0) / (double)n * 1e6;
    }
    return median(v, runs, mn, mx);
}

int main(int argc, char **argv) {
    const char *path = "bench/data/models64.json";
    int runs = 5, i, k;
    double secs = 0.2, res[2][NP][3], xo, xc, xs, mn[3], mx[3];
    input in[2];
    long so, sc, ss;
    FILE *f;
    static const char *const names[NP] = {"residency.h", "cJSON 1.7.15", "jsmn 1.1.0 strict+links", "simdjson 3.0.1 DOM"};
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-r") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) secs = atof(argv[++i]);
        else path = argv[i];
    }
    if (runs < 1) runs = 1;
    if (runs > MAXR) runs = MAXR;
    memset(in, 0, sizeof in);
    f = fopen(path, "rb");
    if (!f) { perror(path); return 1; }
    in[0].name = "models64";
    in[0].s = (char *)malloc(1 << 20);
    in[0].n = fread(in[0].s, 1, 1 << 20, f);
    fclose(f);
    in[1].name = "mixed1m";
    in[1].s = gen_mixed(1000000, &in[1].n);
    for (i = 0; i < 2; i++) prepare(&in[i]);
    printf("# json bench: %d runs x ~%.2fs, median; models64 %u bytes %u tokens; mixed1m %u bytes %u tokens\n",
           runs, secs, (unsigned)in[0].n, in[0].ntoks, (unsigned)in[1].n, in[1].ntoks);
    bench_input(&in[0], "models64", runs, secs, res[0]);
    bench_input(&in[1], "mixed1m", runs, secs, res[1]);

    xo = bench_extract(&in[0], x_ours, secs, runs, &so, &mn[0], &mx[0]);
    xc = bench_extract(&in[0], x_cjson, secs, runs, &sc, &mn[1], &mx[1]);
    xs = bench_extract(&in[0], x_simd, secs, runs, &ss, &mn[2], &mx[2]);
    if (so != sc || so != ss) { fprintf(stderr, "extract checksums differ: %ld %ld %ld\n", so, sc, ss); return 1; }
    printf("BENCH json_models64_extract_vs_cjson ours=%.1f peer=%.1f unit=MB/s ratio=%.3f\n",
           (double)in[0].n / xo, (double)in[0].n / xc, xc / xo);
    printf("BENCH json_models64_extract_vs_simdjson ours=%.1f peer=%.1f unit=MB/s ratio=%.3f\n",
           (double)in[0].n / xo, (double)in[0].n / xs, xs / xo);

    printf("\n| payload | parser | MB/s median | min | max | ours / this |\n|---|---|---|---|---|---|\n");
    for (k = 0; k < 2; k++)
        for (i = 0; i < NP; i++)
            printf("| %s | %s | %.1f | %.1f | %.1f | %.2f |\n", in[k].name, names[i], res[k][i][0],
                   res[k][i][1], res[k][i][2], res[k][0][0] / res[k][i][0]);
    printf("\n| models64 parse + extract (id, status.value, --port, tag count; checksum %ld) | us median | min | max | ours / this (speed) |\n|---|---|---|---|---|\n", so);
    printf("| residency.h | %.2f | %.2f | %.2f | 1.00 |\n", xo, mn[0], mx[0]);
    printf("| cJSON | %.2f | %.2f | %.2f | %.2f |\n", xc, mn[1], mx[1], xc / xo);
    printf("| simdjson DOM | %.2f | %.2f | %.2f | %.2f |\n", xs, mn[2], mx[2], xs / xo);
    for (i = 0; i < 2; i++) { free(in[i].s); free(in[i].toks); free(in[i].jtoks); bench_simd_free(in[i].simd); }
    return 0;
}
