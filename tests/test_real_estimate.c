/* test_real_estimate.c -- the start estimate (rsd_gguf_estimate_start) against what a
   real llama-server reports with -lv 4 (read with rsd_llama_log_line): synthetic llama
   models of 8 shapes (layers, embedding, heads, GQA, vocabulary, weights in f32, f16,
   q8_0, q4_0, tied and untied) written by tests/tiny_gguf.h, started with contexts of
   256..32768, -np 1, 4 and auto, KV cache f16 and q8_0. Model and KV bytes must be
   within 1 % or 64 KiB; the context figures (n_ctx, per sequence, sequences) exactly
   what the server took; compute is printed beside them (a model, not a target here).
   RSD_ESTIMATE_TABLE=1 prints every row. Skipped with one line without llama-server. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "residency_http.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "rsd_test.h"
#include "real_server.h"

static char g_bin[1024], g_dir[512];

typedef struct shape_row { const char *name; uint32_t layers, embd, heads, kv, ff, vocab, wtype; int untied; } shape_row;
static const shape_row g_shapes[8] = {
    {"s1-f32", 1, 64, 4, 4, 128, 0, TG_F32, 0},
    {"s2-q8", 2, 128, 4, 2, 256, 400, TG_Q8_0, 0},
    {"s3-f16", 3, 96, 3, 1, 192, 1000, TG_F16, 0},
    {"s4-q4", 4, 256, 8, 8, 512, 2000, TG_Q4_0, 1},
    {"s5-mqa", 2, 192, 6, 1, 384, 600, TG_Q8_0, 0},
    {"s6-f16u", 6, 128, 2, 1, 320, 5000, TG_F16, 1},
    {"s7-wide", 1, 512, 16, 4, 1024, 300, TG_F32, 0},
    {"s8-deep", 8, 64, 2, 1, 96, 3000, TG_Q4_0, 0}};
/* start parameters: ctx, -np (0: not given, the server's auto), cache type */
typedef struct start_row { uint32_t ctx; int np; const char *ct; } start_row;
static const start_row g_starts[6] = {
    {256, 1, "f16"}, {1000, 4, "f16"}, {4096, 0, "q8_0"}, {32768, 1, "f16"}, {2048, 4, "q8_0"}, {8192, 0, "f16"}};

static int within(uint64_t est, uint64_t real) {
    uint64_t d = est > real ? est - real : real - est;
    return d <= 65536 || (double)d <= 0.01 * (double)real;
}

/* Starts the server on path with st, reads its log into lg. 0, or -1. */
static int real_report(const char *path, const start_row *sr, rsd_llama_log *lg) {
    char ctx[16], np[16];
    const char *args[20];
    int n = 0;
    real_server s;
    snprintf(ctx, sizeof ctx, "%u", (unsigned)sr->ctx);
    snprintf(np, sizeof np, "%d", sr->np);
    args[n++] = "-m"; args[n++] = path; args[n++] = "-c"; args[n++] = ctx;
    if (sr->np) { args[n++] = "-np"; args[n++] = np; }
    args[n++] = "-ctk"; args[n++] = sr->ct; args[n++] = "-ctv"; args[n++] = sr->ct;
    args[n++] = "-t"; args[n++] = "1"; args[n++] = "--no-warmup"; args[n++] = "-lv"; args[n++] = "4";
    args[n] = NULL;
    if (real_start(&s, g_bin, g_dir, args, 120000) != 0) return -1;
    /* the figures are printed before "listening": all in the log */
    return real_stop_read_log(&s, lg);
}

static void test_estimate_vs_real(void) {
    static rsd_gguf g;
    char path[700];
    int si, k, rows = 0, bad = 0, table = getenv("RSD_ESTIMATE_TABLE") != NULL;
    if (table) printf("  %-8s %6s %4s %-4s | %9s %9s | %9s %9s | %9s %9s | %9s %9s\n", "model", "ctx", "np", "kv",
                      "model", "real", "kv", "real", "compute", "real", "total", "real");
    for (si = 0; si < 8; si++) {
        const shape_row *r = &g_shapes[si];
        tg_shape sh;
        memset(&sh, 0, sizeof sh);
        sh.name = r->name;
        sh.layers = r->layers;
        sh.embd = r->embd;
        sh.heads = r->heads;
        sh.heads_kv = r->kv;
        sh.ff = r->ff;
        sh.vocab = r->vocab;
        sh.wtype = r->wtype;
        sh.ctx = 2048; /* the training context; 32768 starts go past it (not capped) */
        sh.untied = r->untied;
        snprintf(path, sizeof path, "%s/%s.gguf", g_dir, r->name);
        REQUIRE(tiny_gguf_write_shape(path, &sh, 100 + (uint64_t)si) == 0);
        rsd_gguf_init(&g, NULL);
        REQUIRE(rsd_gguf_read_file(&g, path) == RSD_OK);
        for (k = 0; k < 3; k++) { /* three starts per model, every start on some model */
            const start_row *sr = &g_starts[(si + k * 2) % 6];
            rsd_gguf_start st;
            rsd_gguf_estimate e;
            rsd_llama_log lg;
            uint64_t real_total;
            int ok;
            memset(&st, 0, sizeof st);
            st.n_ctx = sr->ctx;
            st.n_parallel = sr->np;
            st.cache_type_k = st.cache_type_v = sr->ct;
            if (rsd_gguf_estimate_start(&g.info, &st, &e) == RSD_ERR_ARG) {
                /* a q8_0 cache on heads of 16: the server refuses it too */
                CHECK(g.info.embedding_length / g.info.head_count % 32 != 0 && strcmp(sr->ct, "q8_0") == 0);
                CHECK(real_report(path, sr, &lg) != 0);
                if (table) printf("  %-8s %6u %4d %-4s | refused by both (head of %u)\n", r->name, (unsigned)sr->ctx, sr->np,
                                  sr->ct, g.info.embedding_length / g.info.head_count);
                rows++;
                continue;
            }
            REQUIRE(real_report(path, sr, &lg) == 0);
            real_total = lg.model + lg.kv + lg.compute + lg.output;
            ok = lg.lines > 0 && within(e.model, lg.model) && within(e.kv, lg.kv) && e.n_ctx == lg.n_ctx &&
                 e.n_ctx_seq == lg.n_ctx_seq && e.n_seq == lg.n_seq_max && e.n_ubatch == lg.n_ubatch &&
                 e.n_batch == lg.n_batch && (int)e.kv_unified == lg.kv_unified;
            if (table || !ok)
                printf("  %-8s %6u %4d %-4s | %9llu %9llu | %9llu %9llu | %9llu %9llu | %9llu %9llu  ctx %u/%u seq %u/%u x %u/%u%s\n",
                       r->name, (unsigned)sr->ctx, sr->np, sr->ct, (unsigned long long)e.model, (unsigned long long)lg.model,
                       (unsigned long long)e.kv, (unsigned long long)lg.kv, (unsigned long long)e.compute,
                       (unsigned long long)(lg.compute + lg.output), (unsigned long long)e.total,
                       (unsigned long long)real_total, e.n_ctx, lg.n_ctx, e.n_ctx_seq, lg.n_ctx_seq, e.n_seq,
                       lg.n_seq_max, ok ? "" : "  <- off");
            bad += !ok;
            rows++;
        }
    }
    CHECK_EQ_INT(rows, 24);
    CHECK_EQ_INT(bad, 0);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    REAL_SKIP_OR_FIND(g_bin);
    if (real_models(g_dir, sizeof g_dir) != 0) { printf("real_models failed\n1 passed, 1 failed\n"); return 1; }
    RUN(test_estimate_vs_real);
    rmtree(g_dir);
    return RSD_TEST_END();
}
