/* test_serve_kv.c -- rsd-serve's kv cache (kv_cache_dir): first the pure parts
   (apps/rsd-serve/rsd_serve_kv.h: the sidecar, the file names, the /slots reading, the
   config keys), then the program with rsd-sim llama-server children
   (build/bin/rsd-sim --runtime server, which saves and restores its slots'
   simulated KV with llama-server's answers): a save before an eviction (0700 directory,
   0600 files), a restore on return (the next turn's timings count only its new
   tokens), a key mismatch, a corrupt and a truncated file, kv_cache_bytes, a save
   slower than kv_save_timeout, one slower than half of stop_grace (the stop keeps to
   its grace), and rsd-sim's own save/restore answers. Waits are on
   events (tests/serve_harness.h). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency_http.h"
#include "../apps/rsd-serve/rsd_serve.h"
#include "../apps/rsd-serve/rsd_serve_kv.h"
#include "rsd_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "serve_harness.h"
#include "slot_names.h"
#include "../apps/rsd-sim/rsd_sim.h"

#define SIM_BIN "build/bin/rsd-sim"

/* ---- pure parts --------------------------------------------------------------------- */
static void test_kv_meta(void) {
    rsrv_kv_meta m, back;
    char text[512];
    int n;
    memset(&m, 0, sizeof m);
    snprintf(m.model, sizeof m.model, "chat-8b");
    snprintf(m.build, sizeof m.build, "b10116-7e743c3a3");
    m.tokens = 500;
    m.bytes = 136056;
    n = rsrv_kv_meta_write(&m, text, sizeof text);
    REQUIRE(n > 0);
    CHECK(rsrv_kv_meta_read(text, (size_t)n, &back));
    CHECK_EQ_STR(back.model, "chat-8b");
    CHECK_EQ_STR(back.build, "b10116-7e743c3a3");
    CHECK_EQ_INT(back.tokens, 500);
    CHECK_EQ_INT(back.bytes, 136056);
    CHECK(!rsrv_kv_meta_read(text, (size_t)n - 12, &back)); /* cut: no bytes line */
    CHECK(!rsrv_kv_meta_read("rsd-kv 2\nmodel a\nbuild b\ntokens 1\nbytes 1\n", 42, &back));
    CHECK(!rsrv_kv_meta_read("rsd-kv 1\nmodel a\nbuild b\ntokens 0\nbytes 1\n", 42, &back));
    CHECK(!rsrv_kv_meta_read("rsd-kv 1\nmodel a\nbuild b\ntokens x\nbytes 1\n", 42, &back));
    CHECK(!rsrv_kv_meta_read("", 0, &back));
    snprintf(m.model, sizeof m.model, "a\nb");
    CHECK_EQ_INT(rsrv_kv_meta_write(&m, text, sizeof text), -1);
}

static void test_kv_names(void) {
    char name[RSRV_KV_NAME_MAX];
    uint64_t key = 0;
    int slot = -1;
    rsrv_kv_name(name, 0xe4d030961928f9fbull, 3, true);
    CHECK_EQ_STR(name, "e4d030961928f9fb-3.meta");
    CHECK(rsrv_kv_parse_name(name, &key, &slot));
    CHECK(key == 0xe4d030961928f9fbull);
    CHECK_EQ_INT(slot, 3);
    rsrv_kv_name(name, 1, 0, false);
    CHECK_EQ_STR(name, "0000000000000001-0.bin");
    CHECK(!rsrv_kv_parse_name(name, &key, &slot)); /* only sidecars are listed */
    CHECK(!rsrv_kv_parse_name("e4d030961928f9fb-64.meta", &key, &slot));
    CHECK(!rsrv_kv_parse_name("E4D030961928F9FB-1.meta", &key, &slot));
    CHECK(!rsrv_kv_parse_name("e4d030961928f9fb-.meta", &key, &slot));
    CHECK(!rsrv_kv_parse_name("e4d030961928f9fb-1.meta.tmp", &key, &slot));
    CHECK(rsrv_kv_key_feed(rsrv_kv_fnv(1, "", 0), "ab", 2) != rsrv_kv_key_feed(rsrv_kv_key_feed(1, "a", 1), "b", 1));
}

static void test_kv_slots_answer(void) {
    static rsd_json_tok toks[512];
    const char *real = "[{\"id\":0,\"n_ctx\":1024,\"is_processing\":false},"
                       "{\"id\":1,\"n_ctx\":1024,\"is_processing\":false,\"id_task\":0,\"n_prompt_tokens\":500}]";
    int ids[4];
    char build[64];
    int64_t v = 0;
    CHECK_EQ_INT(rsrv_kv_cached_slots(real, strlen(real), toks, 512, ids, 4), 1);
    CHECK_EQ_INT(ids[0], 1);
    CHECK_EQ_INT(rsrv_kv_cached_slots("{}", 2, toks, 512, ids, 4), -1);
    CHECK_EQ_INT(rsrv_kv_cached_slots("[1]", 3, toks, 512, ids, 4), -1);
    CHECK_EQ_INT(rsrv_kv_cached_slots("[{\"id\":99,\"n_prompt_tokens\":5}]", 31, toks, 512, ids, 4), 0);
    {
        const char *props = "{\"build_info\":\"b10116-7e743c3a3\",\"total_slots\":2}";
        rsrv_kv_build(props, strlen(props), toks, 512, build, sizeof build);
    }
    CHECK_EQ_STR(build, "b10116-7e743c3a3");
    CHECK_EQ_INT(rsrv_kv_member_int("{\"build_info\":\"b\",\"total_slots\":2}", 34, "total_slots", toks, 512, &v), RSD_OK);
    CHECK_EQ_INT(v, 2);
    rsrv_kv_build("[]", 2, toks, 512, build, sizeof build);
    CHECK_EQ_STR(build, "");
}

static void test_kv_config(void) {
    static rsrv_config c;
    rsrv_opts o;
    char err[512];
    const char *ok = "kv_cache_dir = /tmp/kv\nkv_cache_bytes = 2G\nkv_save_timeout = 250ms\n[model a]\nmodel = /m.gguf\n";
    const char *off = "kv_cache_dir = /tmp/kv\nkv_cache_bytes = off\n[model a]\nmodel = /m.gguf\n";
    memset(&o, 0, sizeof o);
    memset(&c, 0, sizeof c);
    REQUIRE(rsrv_parse_ini(&c, ok, strlen(ok), "x.ini", err, sizeof err) == 0);
    CHECK_EQ_STR(c.kv_cache_dir, "/tmp/kv");
    CHECK(c.kv_cache_bytes == (uint64_t)2 << 30);
    CHECK_EQ_INT(c.kv_save_timeout_ms, 250);
    CHECK(!c.kv_off);
    memset(&c, 0, sizeof c);
    REQUIRE(rsrv_parse_ini(&c, off, strlen(off), "x.ini", err, sizeof err) == 0);
    CHECK(c.kv_off);
    memset(&c, 0, sizeof c);
    CHECK(rsrv_parse_ini(&c, "kv_cache_bytes = lots\n", 22, "x.ini", err, sizeof err) != 0);
    CHECK(strstr(err, "kv_cache_bytes") != NULL);
    memset(&c, 0, sizeof c);
    CHECK(rsrv_parse_ini(&c, "kv_save_timeout = 0\n", 20, "x.ini", err, sizeof err) != 0);
    (void)o;
}

/* ---- rsd-sim's own save and restore (rsd_sim.h, no I/O: the file travels in rsim_resp
   and rsim_req), with the answers llama-server b10116 gives -------------------------- */
static rsim *g_sim;
static char g_sbuf[1 << 16];
static rsim_resp g_sr;

static int sim_req(const char *target, const char *body, const char *file, size_t flen, bool found) {
    rsim_req q;
    memset(&q, 0, sizeof q);
    q.method = "POST";
    q.target = target;
    q.body = body;
    q.body_len = strlen(body);
    q.file_data = file;
    q.file_len = flen;
    q.file_found = found;
    g_sr.body = g_sbuf;
    g_sr.body_cap = sizeof g_sbuf;
    (void)rsim_handle(g_sim, &q, 5000, &g_sr);
    return g_sr.status;
}

static void test_sim_save_restore(void) {
    static char file[RSIM_KV_FILE_MAX];
    char *av[] = {(char *)"rsd-sim", (char *)"--runtime", (char *)"server", (char *)"--model", (char *)"id=/m.gguf",
                  (char *)"--load-ms", (char *)"0", (char *)"-np", (char *)"2", (char *)"--gen-ms", (char *)"0",
                  (char *)"--slot-save-path", (char *)"/d", NULL};
    const char *turn1 = "{\"id_slot\":1,\"messages\":[{\"role\":\"user\",\"content\":\"a long enough first question\"}]}";
    const char *turn2 = "{\"id_slot\":0,\"messages\":[{\"role\":\"user\",\"content\":\"a long enough first question\"},"
                        "{\"role\":\"assistant\",\"content\":\"This is a simulated reply.\"},"
                        "{\"role\":\"user\",\"content\":\"and more\"}]}";
    size_t flen;
    int64_t saved = 0, v = 0, first = 0;
    g_sim = (rsim *)calloc(1, sizeof *g_sim);
    REQUIRE(g_sim != NULL);
    REQUIRE(rsim_configure(g_sim, 13, av) == 0);
    rsim_start(g_sim, 1000);
    CHECK_EQ_INT(sim_req("/v1/chat/completions", turn1, NULL, 0, false), 200);
    {
        const char *p = strstr(g_sbuf, "\"prompt_n\":");
        first = p ? strtoll(p + 11, NULL, 10) : -1;
    }
    CHECK_EQ_INT(sim_req("/slots/1?action=save", "{}", NULL, 0, false), 500); /* no filename */
    CHECK(g_sr.file_name == NULL);
    CHECK_EQ_INT(sim_req("/slots/1?action=save", "{\"filename\":\"../x.bin\"}", NULL, 0, false), 400);
    CHECK(strstr(g_sbuf, "Invalid filename") != NULL);
    { /* llama.cpp's fs_validate_filename: the table test_real_kv checks on b10116 */
        char body[96];
        size_t i;
        for (i = 0; i < sizeof g_slot_names / sizeof g_slot_names[0]; i++) {
            snprintf(body, sizeof body, "{\"filename\":\"%s\"}", g_slot_names[i].name);
            int got = sim_req("/slots/1?action=save", body, NULL, 0, false);
            if (got != g_slot_names[i].status) printf("  filename %s\n", g_slot_names[i].name);
            CHECK_EQ_INT(got, g_slot_names[i].status);
        }
    }
    CHECK_EQ_INT(sim_req("/slots/0?action=save", "{\"filename\":\"e.bin\"}", NULL, 0, false), 200);
    CHECK(strstr(g_sbuf, "\"n_saved\":0") != NULL); /* an empty slot saves nothing, as the real one */
    CHECK_EQ_INT(sim_req("/slots/1?action=save", "{\"filename\":\"s.bin\"}", NULL, 0, false), 200);
    REQUIRE(g_sr.file_name != NULL && !strcmp(g_sr.file_name, "s.bin") && g_sr.file_len < sizeof file);
    memcpy(file, g_sr.file_data, g_sr.file_len);
    flen = g_sr.file_len;
    CHECK_EQ_INT(rsrv_kv_member_int(g_sbuf, strlen(g_sbuf), "n_saved", g_toks, 8192, &saved), RSD_OK);
    CHECK(saved > first);
    CHECK_EQ_INT(rsrv_kv_member_int(g_sbuf, strlen(g_sbuf), "n_written", g_toks, 8192, &v), RSD_OK);
    CHECK_EQ_INT(v, (int64_t)flen);
    CHECK_EQ_INT(sim_req("/slots/0?action=restore", "{\"filename\":\"no.bin\"}", NULL, 0, false), 400);
    CHECK(strstr(g_sbuf, "invalid slot save file") != NULL);
    CHECK_EQ_INT(sim_req("/slots/0?action=restore", "{\"filename\":\"g.bin\"}", "garbage\n", 8, true), 400);
    CHECK_EQ_INT(sim_req("/slots/1?action=restore", "{\"filename\":\"s.bin\"}", file, 5, true), 400);
    CHECK(strstr(g_sbuf, "invalid slot save file") != NULL); /* cut in its head: refused, as the real one */
    CHECK_EQ_INT(g_sim->slots[1].nkv, 0);                    /* and the slot is empty, as the real one's */
    CHECK_EQ_INT(sim_req("/slots/0?action=restore", "{\"filename\":\"s.bin\"}", file, flen, true), 200);
    CHECK_EQ_INT(rsrv_kv_member_int(g_sbuf, strlen(g_sbuf), "n_restored", g_toks, 8192, &v), RSD_OK);
    CHECK_EQ_INT(v, saved);
    CHECK_EQ_INT(sim_req("/v1/chat/completions", turn2, NULL, 0, false), 200); /* slot 0 now holds turn 1 */
    CHECK(strstr(g_sbuf, "\"cache_n\":0") == NULL);
    CHECK_EQ_INT(rsim_exit_code(g_sim), -1);
    /* cut inside its data: the real server aborts; rsd-sim answers nothing and ends (134) */
    (void)sim_req("/slots/0?action=restore", "{\"filename\":\"s.bin\"}", file, flen - 2, true);
    CHECK_EQ_INT(g_sr.action, RSIM_DEFER);
    CHECK_EQ_INT(rsim_exit_code(g_sim), 134);
    free(g_sim);
}

/* ---- rsd-serve with rsd-sim children ------------------------------------------------ */
static char g_kv[400];

static bool log_is(const serve_proc *s, const void *needle) { return log_has(s, (const char *)needle); }

/* Files in g_kv ending in ext (dir_files). */
static int kv_files(const char *ext, bool *all_0600, char *first, size_t cap) {
    return dir_files(g_kv, ext, all_0600, first, cap);
}

/* A body for model: one long user message (first turn), or with next the sim's answer
   and a second message. */
static const char *kv_chat(const char *model, bool next) {
    static char b[4096];
    snprintf(b, sizeof b,
             "{\"model\":\"%s\",\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}%s]}", model,
             "the long first question of this conversation, long enough to hold many tokens of a prompt "
             "that a swap would otherwise have to process again from the first token on",
             next ? ",{\"role\":\"assistant\",\"content\":\"This is a simulated reply.\"},"
                    "{\"role\":\"user\",\"content\":\"and more\"}" : "");
    return b;
}

/* rsd-serve on models a (ctx, 2 slots, a_args) and b with kv_cache_dir DIR/name-kv. */
static int kv_start(serve_proc *s, const char *name, int ctx, const char *global, const char *a_args) {
    char path[300], text[4096];
    const char *args[] = {"--config", path, NULL};
    make_dir();
    snprintf(g_kv, sizeof g_kv, "%s/%s-kv", g_dir, name);
    snprintf(path, sizeof path, "%s/m-a.gguf", g_dir); /* made once: its mtime is in the key */
    if (access(path, F_OK) != 0) write_file(path, "");
    snprintf(path, sizeof path, "%s/m-b.gguf", g_dir);
    if (access(path, F_OK) != 0) write_file(path, "");
    snprintf(path, sizeof path, "%s/%s.ini", g_dir, name);
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nllama_server = %s\nargs = --runtime server --load-ms 20 --gen-ms 5\n"
             "%smax_models = 1\nkv_cache_dir = %s\n%s"
             "[model a]\nmodel = %s/m-a.gguf\nctx = %d\nparallel = 2\nargs = %s\n"
             "[model b]\nmodel = %s/m-b.gguf\n",
             SIM_BIN, strstr(global, "stop_grace") ? "" : "stop_grace = 2\n", g_kv, global, g_dir, ctx, a_args, g_dir);
    if (write_file(path, text) != 0) return -1;
    return serve_start(s, args);
}

static void test_serve_kv_evict_restore(void) {
    serve_proc s;
    struct stat st;
    bool modes = false;
    int64_t first_n;
    REQUIRE(kv_start(&s, "evict", 4096, "", "") == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", kv_chat("a", false)), 200);
    first_n = timing("prompt_n");
    CHECK(first_n > 10);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", kv_chat("b", false)), 200);
    CHECK(wait_kv(&s, "a", "saved_slots", 1));
    CHECK(stat(g_kv, &st) == 0 && (st.st_mode & 0777) == 0700);
    CHECK_EQ_INT(kv_files(".bin", &modes, NULL, 0), 1);
    CHECK(modes); /* rsd-sim writes 0666 less the umask, as llama-server: rsd-serve made it 0600 */
    CHECK_EQ_INT(kv_files(".meta", &modes, NULL, 0), 1);
    CHECK(modes);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", kv_chat("a", true)), 200);
    CHECK(timing("cache_n") >= first_n);
    CHECK(timing("prompt_n") > 0 && timing("prompt_n") < first_n / 2); /* the new messages only */
    CHECK_EQ_INT(kv_field(&s, "a", "restores"), 1);
    CHECK_EQ_INT(kv_field(&s, "a", "misses"), 0);
    CHECK(http(&s, "GET", "/metrics", NULL) == 200 && strstr(g_body, "rsd_serve_kv_restores_total{model=\"a\"} 1"));
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* shutdown saves; another ctx refuses the file; corrupt and truncated files go */
static void test_serve_kv_bad_files(void) {
    serve_proc s;
    char bin[800];
    int round;
    for (round = 0; round < 3; round++) {
        int fd;
        REQUIRE(kv_start(&s, "bad", 4096, "", "") == 0);
        CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", kv_chat("a", false)), 200);
        CHECK_EQ_INT(serve_stop(&s), 0);
        REQUIRE(kv_files(".bin", NULL, bin, sizeof bin) == 1);
        fd = open(bin, O_WRONLY);
        REQUIRE(fd >= 0);
        if (round == 1) CHECK(pwrite(fd, "garbage!!", 9, 0) == 9);
        if (round == 2) CHECK(ftruncate(fd, 20) == 0);
        close(fd);
        REQUIRE(kv_start(&s, "bad", round == 0 ? 2048 : 4096, "", "") == 0);
        CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", kv_chat("a", true)), 200);
        CHECK(timing("cache_n") == 0);
        CHECK_EQ_INT(kv_field(&s, "a", "misses"), 1);
        CHECK(log_has(&s, round == 0 ? "not restored (mismatch" : round == 1 ? "not restored (refused by the child"
                                                                             : "not restored (truncated)"));
        CHECK_EQ_INT(kv_files(".bin", NULL, NULL, 0), 0);
        CHECK_EQ_INT(kv_files(".meta", NULL, NULL, 0), 0);
        CHECK_EQ_INT(serve_stop(&s), 0);
    }
}

/* kv_cache_bytes smaller than a save: gone at once; a save slower than kv_save_timeout
   (rsd-sim --delay on the save): the stop goes on without it. */
static void test_serve_kv_budget_timeout(void) {
    serve_proc s;
    REQUIRE(kv_start(&s, "budget", 4096, "kv_cache_bytes = 10\n", "") == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", kv_chat("a", false)), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", kv_chat("b", false)), 200);
    CHECK(log_has(&s, "kv_cache_bytes is 10"));
    CHECK_EQ_INT(kv_files(".bin", NULL, NULL, 0), 0);
    CHECK_EQ_INT(serve_stop(&s), 0);

    REQUIRE(kv_start(&s, "slow", 4096, "kv_save_timeout = 200ms\n", "--delay /slots/0=5000 --delay /slots/1=5000") == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", kv_chat("a", false)), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", kv_chat("b", false)), 200);
    CHECK(wait_until(&s, log_is, "timed out (kv_save_timeout)", 30000));
    CHECK(kv_field(&s, "a", "save_failures") >= 1);
    CHECK_EQ_INT(kv_files(".meta", NULL, NULL, 0), 0);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* The saves are part of the stop's grace: with stop_grace 1 s, a save that would take
   30 s (rsd-sim --delay) under a kv_save_timeout of 60 s is given up after half the
   grace, the child (which ignores its SIGTERM) is killed when the grace is over, and
   the request that made room is answered (well within its 20 s). */
static void test_serve_kv_save_in_grace(void) {
    serve_proc s;
    REQUIRE(kv_start(&s, "grace", 4096, "stop_grace = 1\nkv_save_timeout = 60s\n",
                     "--ignore-sigterm --delay /slots/0=30000 --delay /slots/1=30000") == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", kv_chat("a", false)), 200);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", kv_chat("b", false)), 200);
    CHECK(wait_until(&s, log_is, "timed out (half of stop_grace)", 30000));
    CHECK(wait_until(&s, log_is, "signal Killed", 30000));
    CHECK(kv_field(&s, "a", "save_failures") >= 1);
    CHECK_EQ_INT(kv_files(".bin", NULL, NULL, 0), 0);
    CHECK_EQ_INT(kv_files(".meta", NULL, NULL, 0), 0);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* Every stop of a ready child saves: an unload through the API, and the idle ttl. */
static void test_serve_kv_unload_ttl(void) {
    serve_proc s;
    REQUIRE(kv_start(&s, "unload", 4096, "", "") == 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", kv_chat("a", false)), 200);
    CHECK_EQ_INT(http(&s, "POST", "/models/unload", "{\"model\":\"a\"}"), 200);
    CHECK(wait_kv(&s, "a", "saved_slots", 1));
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", kv_chat("a", true)), 200);
    CHECK(timing("cache_n") > 0);
    CHECK_EQ_INT(kv_field(&s, "a", "restores"), 1);
    CHECK_EQ_INT(serve_stop(&s), 0);
    REQUIRE(kv_start(&s, "ttl", 4096, "", "\nttl = 1") == 0); /* the idle ttl is what is under test */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", kv_chat("a", false)), 200);
    CHECK(wait_kv(&s, "a", "saved_slots", 1));
    CHECK(log_has(&s, "a: stopping pid") && log_has(&s, "(ttl)"));
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* The slots' restores hold the model's first grants (the fleet's ready_hold_ms): the
   requests that arrive meanwhile wait in the pool, are counted there (/status
   "waiting") and against max_queue (429 past it). The save of slot 0 is renamed slot
   1's, whose restore the child never answers (rsd-sim --hang /slots/1; its bound,
   kv_save_timeout, is far off). */
static void test_serve_kv_restore_queue(void) {
    serve_proc s;
    char bin[800], meta[800], to[800], body[4096];
    const char *a_args = "--hang /slots/1\nmax_queue = 2";
    int fd1, fd2;
    size_t n;
    REQUIRE(kv_start(&s, "queue", 4096, "kv_save_timeout = 600s\n", a_args) == 0);
    snprintf(body, sizeof body, "%s", kv_chat("a", false));
    n = strlen(body);
    REQUIRE(n > 1 && body[n - 1] == '}');
    snprintf(body + n - 1, sizeof body - (n - 1), ",\"id_slot\":0}"); /* saved fast: slot 0 answers */
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", body), 200);
    CHECK_EQ_INT(serve_stop(&s), 0); /* the shutdown saves slot 0 */
    REQUIRE(kv_files(".bin", NULL, bin, sizeof bin) == 1 && kv_files(".meta", NULL, meta, sizeof meta) == 1);
    n = strlen(bin);
    REQUIRE(n > 6 && !strcmp(bin + n - 6, "-0.bin"));
    snprintf(to, sizeof to, "%.*s-1.bin", (int)(n - 6), bin);
    REQUIRE(rename(bin, to) == 0);
    n = strlen(meta);
    REQUIRE(n > 7 && !strcmp(meta + n - 7, "-0.meta"));
    snprintf(to, sizeof to, "%.*s-1.meta", (int)(n - 7), meta);
    REQUIRE(rename(meta, to) == 0);

    REQUIRE(kv_start(&s, "queue", 4096, "kv_save_timeout = 600s\n", a_args) == 0);
    fd1 = raw_connect(s.port);
    REQUIRE(fd1 >= 0);
    REQUIRE(raw_post(fd1, "/v1/chat/completions", kv_chat("a", true)) == 0); /* starts a */
    CHECK(wait_until(&s, log_is, "a: ready pid", 30000)); /* held: its restore runs */
    CHECK(wait_field(&s, "a", "waiting", 1));
    fd2 = raw_connect(s.port);
    REQUIRE(fd2 >= 0);
    REQUIRE(raw_post(fd2, "/v1/chat/completions", kv_chat("a", true)) == 0);
    CHECK(wait_field(&s, "a", "waiting", 2));
    CHECK_EQ_INT(status_field(&s, "a", "in_flight"), 0);
    CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", kv_chat("a", true)), 429);
    CHECK(strstr(g_body, "max_queue 2") != NULL);
    CHECK_EQ_INT(http(&s, "GET", "/status", NULL), 200);
    CHECK(strstr(g_body, "\"queue_full\":1") != NULL);
    CHECK(strstr(g_body, "{\"position\":2,") != NULL);
    CHECK_EQ_INT(kv_field(&s, "a", "restores"), 0);
    close(fd1);
    close(fd2);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

/* A restore that ends the child or hangs it loses no request: the file goes, the child
   is killed and started again without it, and the request that started the model is
   served by the new child, cold. Round 0: the file's head says more entries than it
   holds, at the same size (the sidecar's size check passes it); rsd-sim, as the real
   server, aborts on it (exit 134, no answer). Round 1: the child never answers the
   restore (rsd-sim --hang on the restores only), past kv_save_timeout. */
static void test_serve_kv_restore_lost(void) {
    serve_proc s;
    char bin[800], text[4096];
    int round;
    for (round = 0; round < 2; round++) {
        const char *name = round ? "lost-hang" : "lost";
        const char *global = round ? "kv_save_timeout = 300ms\n" : "";
        const char *a_args = round ? "--hang /slots/0?action=restore --hang /slots/1?action=restore" : "";
        long n;
        size_t i;
        FILE *f;
        REQUIRE(kv_start(&s, name, 4096, global, a_args) == 0);
        CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", kv_chat("a", false)), 200);
        CHECK_EQ_INT(serve_stop(&s), 0); /* the shutdown saves */
        REQUIRE(kv_files(".bin", NULL, bin, sizeof bin) == 1);
        if (round == 0) { /* "rsim-kv 1 N" with N as many 9s: more entries than the file holds */
            REQUIRE((f = fopen(bin, "r+b")) != NULL);
            n = (long)fread(text, 1, sizeof text - 1, f);
            REQUIRE(n > 12 && !strncmp(text, "rsim-kv 1 ", 10));
            for (i = 10; i < (size_t)n && text[i] >= '0' && text[i] <= '9'; i++) text[i] = '9';
            CHECK(fseek(f, 0, SEEK_SET) == 0 && fwrite(text, 1, (size_t)n, f) == (size_t)n);
            CHECK(fclose(f) == 0);
        }
        REQUIRE(kv_start(&s, name, 4096, global, a_args) == 0);
        CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", kv_chat("a", true)), 200);
        CHECK_EQ_INT(timing("cache_n"), 0);
        CHECK_EQ_INT(kv_field(&s, "a", "misses"), 1);
        CHECK_EQ_INT(kv_field(&s, "a", "restores"), 0);
        CHECK(log_has(&s, "while its ready was held"));
        CHECK(log_has(&s, "starting it again for the requests waiting"));
        if (round) CHECK(log_has(&s, "not restored (restore timed out)"));
        CHECK_EQ_INT(kv_files(".bin", NULL, NULL, 0), 0);
        CHECK_EQ_INT(kv_files(".meta", NULL, NULL, 0), 0);
        CHECK_EQ_INT(http(&s, "POST", "/v1/chat/completions", kv_chat("a", true)), 200); /* and it serves on */
        CHECK_EQ_INT(serve_stop(&s), 0);
    }
}

/* An existing kv_cache_dir (0755) becomes 0700; a .bin of ours without its sidecar (a
   save cut short) is deleted at start, a file not of ours is left alone. */
static void test_serve_kv_dir_leftovers(void) {
    serve_proc s;
    struct stat st;
    char p1[800], p2[800];
    make_dir();
    snprintf(g_kv, sizeof g_kv, "%s/left-kv", g_dir);
    REQUIRE(mkdir(g_kv, 0755) == 0 || errno == EEXIST);
    REQUIRE(chmod(g_kv, 0755) == 0);
    snprintf(p1, sizeof p1, "%s/0123456789abcdef-0.bin", g_kv);
    snprintf(p2, sizeof p2, "%s/notes.txt", g_kv);
    REQUIRE(write_file(p1, "half a save") == 0 && write_file(p2, "mine") == 0);
    REQUIRE(kv_start(&s, "left", 4096, "", "") == 0);
    CHECK(stat(g_kv, &st) == 0 && (st.st_mode & 0777) == 0700);
    CHECK(access(p1, F_OK) != 0);
    CHECK(access(p2, F_OK) == 0);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    RUN(test_kv_meta);
    RUN(test_kv_names);
    RUN(test_kv_slots_answer);
    RUN(test_kv_config);
    RUN(test_sim_save_restore);
    RUN(test_serve_kv_evict_restore);
    RUN(test_serve_kv_bad_files);
    RUN(test_serve_kv_budget_timeout);
    RUN(test_serve_kv_save_in_grace);
    RUN(test_serve_kv_dir_leftovers);
    RUN(test_serve_kv_unload_ttl);
    RUN(test_serve_kv_restore_queue);
    RUN(test_serve_kv_restore_lost);
    serve_cleanup();
    return RSD_TEST_END();
}
