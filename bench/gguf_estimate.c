/* bench/gguf_estimate.c -- the start estimate (rsd_gguf_estimate_start) against what the
   real llama-server reports (-lv 4, read with rsd_llama_log_line), for a model of the
   shape of a real 0.5B one (24 blocks, n_embd 896, 14 heads, 2 KV heads, n_ff 4864,
   vocab 151936, tied, random q8_0 weights: about 530 MB written into $TMPDIR, removed
   after) at -c 4096 (4 slots on one cache, the server's default) and -c 8192 -np 2 with
   a q8_0 cache, and one tiny model. Per row: BENCH gguf_estimate_<what> ours=<error %>
   peer=<error %> where the peer is the file's size alone (what a hand-typed reserve
   often is; its kv and compute are 0). Targets: model and kv 1 % (or 64 KiB), the
   0.5B shape's total 10 % (a tiny model's total is mostly the compute model's error).
   One row more, BENCH gguf_header_read_0p5b_c4096 ours=<ms> peer=<ms>: reading that
   file's header (its 151936 token strings included) with rsd_gguf_read_file, the least of
   5 reads, beside llama.cpp's own reader on the same file, timed from the server's -lv 4
   log (the line before "llama_model_loader: loaded meta data" to that line; that interval
   also opens the file and starts the loader, so it is more than the parse alone).
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
#include "bench_util.h"

static char g_bin[1024], g_dir[512];

static double err_pct(uint64_t est, uint64_t real) {
    return real ? 100.0 * ((double)est - (double)real) / (double)real : (est ? 100.0 : 0.0);
}

/* A log line's timestamp ("0.00.011.241 I ...": minutes, seconds, ms, us) in ms; -1 when none. */
static double log_ms(const char *line) {
    unsigned m, sec, ms, us;
    return sscanf(line, "%u.%u.%u.%u", &m, &sec, &ms, &us) == 4 ? (m * 60.0 + sec) * 1000.0 + ms + us / 1000.0 : -1;
}

/* The peer's header read: in the server's log, the time from the line before its model
   loader's "loaded meta data" line to that line (llama.cpp's gguf_init_from_file on the
   same file, for the load itself; the fitting pass before reads it once more). -1 when
   the log has no such pair. */
static double peer_header_ms(const char *log) {
    char line[4096];
    double prev = -1, at = -1;
    FILE *f = fopen(log, "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f)) {
        double t = log_ms(line);
        if (strstr(line, "llama_model_loader: loaded meta data")) {
            at = t >= 0 && prev >= 0 ? t - prev : -1;
            break;
        }
        if (t >= 0) prev = t;
    }
    fclose(f);
    return at;
}

/* The least of 5 reads of path's header by rsd_gguf_read_file, in ms; -1 when one failed. */
static double ours_header_ms(const char *path) {
    static rsd_gguf g;
    double best = -1;
    int i;
    for (i = 0; i < 5; i++) {
        double t0 = now_us(), ms;
        rsd_gguf_init(&g, NULL);
        if (rsd_gguf_read_file(&g, path) != RSD_OK) return -1;
        ms = (now_us() - t0) / 1000.0;
        if (best < 0 || ms < best) best = ms;
    }
    return best;
}

static double g_peer_header_ms = -1; /* from the last report() */

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
    g_peer_header_ms = peer_header_ms(s.log); /* ready: the load's lines are written */
    if (real_stop_read_log(&s, lg) != 0) return -1;
    return lg->lines > 0 && lg->model > 0 ? 0 : -1;
}

/* One row: estimate, start, print. 0, or 1 when the measurement failed. */
static int row(const char *tag, const char *path, const rsd_gguf_start *st, const char *const *extra,
               const char *paramtext, int total_target, int header, int *missed) {
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
    if (header) { /* the time to read the header, beside llama.cpp's own reader on the same file */
        double ours = ours_header_ms(path);
        if (ours < 0 || g_peer_header_ms <= 0) { printf("bench-gguf: %s: the header read was not measured\n", tag); return 1; }
        printf("BENCH gguf_header_read_%s ours=%.2f peer=%.2f unit=ms ratio=%.3f vocab=%u header_bytes=%llu\n", tag, ours,
               g_peer_header_ms, ours / g_peer_header_ms, (unsigned)g.info.vocab_size, (unsigned long long)g.info.header_bytes);
    }
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
    fail |= row("0p5b_c4096", path, &st, a1, "-c 4096, 4 slots unified, f16 cache", 1, 1, &missed);
    st.n_ctx = 8192;
    st.n_parallel = 2;
    st.cache_type_k = st.cache_type_v = "q8_0";
    fail |= row("0p5b_c8192_np2_q8", path, &st, a2, "-c 8192 -np 2, q8_0 cache", 1, 0, &missed);
    snprintf(path, sizeof path, "%s/tiny-a.gguf", g_dir);
    memset(&st, 0, sizeof st);
    st.n_ctx = 1000;
    st.n_parallel = 4;
    fail |= row("tiny_c1000_np4", path, &st, a3, "-c 1000 -np 4", 0, 0, &missed);
    real_rmdir(g_dir);
    printf("bench-gguf: %d figures past their target\n", missed);
    return fail;
}
