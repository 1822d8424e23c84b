/* bench/gguf_estimate.c -- the start estimate (rsd_gguf_estimate_start) against what the
   real llama-server reports (-lv 4, read with rsd_llama_log_line), for a model of the
   shape of a real 0.5B one (24 blocks, n_embd 896, 14 heads, 2 KV heads, n_ff 4864,
   vocab 151936, tied, random q8_0 weights: about 530 MB written into $TMPDIR, removed
   after) at -c 4096 (4 slots on one cache, the server's default) and -c 8192 -np 2 with
   a q8_0 cache, and one tiny model. Per row: BENCH gguf_estimate_<what> ours=<error %>
   peer=<error %> where the peer is the file's size alone (what a hand-typed reserve
   often is; its kv and compute are 0). Targets: model and kv 1 % (or 64 KiB), the
   0.5B shape's total 10 % (a tiny model's total is mostly the compute model's error).
   Skipped with one line without llama-server; exits 1 when a measurement failed. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#define RESIDENCY_IMPLEMENTATION
#include "residency_http.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../tests/real_server.h"

static char g_bin[1024], g_dir[512];

static double err_pct(uint64_t est, uint64_t real) {
    return real ? 100.0 * ((double)est - (double)real) / (double)real : (est ? 100.0 : 0.0);
}

/* Starts the server on path with args (after -m path), reads its log into lg. 0 or -1. */
static int report(const char *path, const char *const *extra, rsd_llama_log *lg) {
    const char *args[24];
    int n = 0, i;
    real_server s;
    args[n++] = "-m";
    args[n++] = path;
    for (i = 0; extra[i] && n < 18; i++) args[n++] = extra[i];
    args[n++] = "-t"; args[n++] = "1"; args[n++] = "--no-warmup"; args[n++] = "-lv"; args[n++] = "4";
    args[n] = NULL;
    if (real_start(&s, g_bin, g_dir, args, 300000) != 0) return -1;
    if (real_stop_read_log(&s, lg) != 0) return -1;
    return lg->lines > 0 && lg->model > 0 ? 0 : -1;
}

/* One row: estimate, start, print. 0, or 1 when the measurement failed. */
static int row(const char *tag, const char *path, const rsd_gguf_start *st, const char *const *extra,
               const char *paramtext, int total_target, int *missed) {
    static rsd_gguf g;
    rsd_gguf_estimate e;
    rsd_llama_log lg;
    uint64_t real_total, file_bytes;
    double em, ek, ec, et, pt;
    rsd_gguf_init(&g, NULL);
    if (rsd_gguf_read_file(&g, path) != RSD_OK) { printf("bench-gguf: %s: %s\n", path, rsd_gguf_error(&g)); return 1; }
    if (rsd_gguf_estimate_start(&g.info, st, &e) != RSD_OK) { printf("bench-gguf: %s: no estimate\n", tag); return 1; }
    if (report(path, extra, &lg) != 0) { printf("bench-gguf: %s: the server reported no figures\n", tag); return 1; }
    file_bytes = g.info.data_offset + g.info.data_bytes;
    real_total = lg.model + lg.kv + lg.compute + lg.output;
    em = err_pct(e.model, lg.model);
    ek = err_pct(e.kv, lg.kv);
    ec = err_pct(e.compute, lg.compute + lg.output);
    et = err_pct(e.total, real_total);
    pt = err_pct(file_bytes, real_total);
    printf("BENCH gguf_estimate_%s_model ours=%.2f peer=%.2f unit=%% target=1 est=%llu real=%llu (%s)\n", tag, em,
           err_pct(file_bytes, lg.model), (unsigned long long)e.model, (unsigned long long)lg.model, paramtext);
    printf("BENCH gguf_estimate_%s_kv ours=%.2f peer=-100.00 unit=%% target=1 est=%llu real=%llu\n", tag, ek,
           (unsigned long long)e.kv, (unsigned long long)lg.kv);
    printf("BENCH gguf_estimate_%s_compute ours=%.2f peer=-100.00 unit=%% est=%llu real=%llu\n", tag, ec,
           (unsigned long long)e.compute, (unsigned long long)(lg.compute + lg.output));
    printf("BENCH gguf_estimate_%s_total ours=%.2f peer=%.2f unit=%%%s est=%llu real=%llu\n", tag, et, pt,
           total_target ? " target=10" : "", (unsigned long long)e.total, (unsigned long long)real_total);
    *missed += (em > 1 || em < -1) && (e.model > lg.model ? e.model - lg.model : lg.model - e.model) > 65536;
    *missed += (ek > 1 || ek < -1) && (e.kv > lg.kv ? e.kv - lg.kv : lg.kv - e.kv) > 65536;
    *missed += total_target && (et > 10 || et < -10);
    return 0;
}

int main(void) {
    char why[512], path[700];
    tg_shape sh;
    rsd_gguf_start st;
    int fail = 0, missed = 0;
    static const char *const a1[] = {"-c", "4096", NULL};
    static const char *const a2[] = {"-c", "8192", "-np", "2", "-ctk", "q8_0", "-ctv", "q8_0", NULL};
    static const char *const a3[] = {"-c", "1000", "-np", "4", NULL};
    signal(SIGPIPE, SIG_IGN);
    if (real_find(g_bin, sizeof g_bin, why, sizeof why) != 0) {
        printf("bench-gguf: skipped: %s\n", why);
        return 0;
    }
    if (real_models(g_dir, sizeof g_dir) != 0) { printf("bench-gguf: could not write the models\n"); return 1; }
    tg_shape_0p5b(&sh, "qwen-0.5b-shape");
    snprintf(path, sizeof path, "%s/half-b.gguf", g_dir);
    if (tiny_gguf_write_shape(path, &sh, 77) != 0) {
        printf("bench-gguf: could not write %s: %s\n", path, strerror(errno));
        real_rmdir(g_dir);
        return 1;
    }
    memset(&st, 0, sizeof st);
    st.n_ctx = 4096;
    fail |= row("0p5b_c4096", path, &st, a1, "-c 4096, 4 slots unified, f16 cache", 1, &missed);
    st.n_ctx = 8192;
    st.n_parallel = 2;
    st.cache_type_k = st.cache_type_v = "q8_0";
    fail |= row("0p5b_c8192_np2_q8", path, &st, a2, "-c 8192 -np 2, q8_0 cache", 1, &missed);
    snprintf(path, sizeof path, "%s/tiny-a.gguf", g_dir);
    memset(&st, 0, sizeof st);
    st.n_ctx = 1000;
    st.n_parallel = 4;
    fail |= row("tiny_c1000_np4", path, &st, a3, "-c 1000 -np 4", 0, &missed);
    real_rmdir(g_dir);
    printf("bench-gguf: %d figures past their target\n", missed);
    return fail;
}
