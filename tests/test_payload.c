/* Server payloads: Ollama /api/ps, /api/tags, /api/version, /api/generate and
   LM Studio /api/v1/models, /api/v0/models, /v1/models, load/unload replies and
   request bodies. Canned bodies come from spec/wire.md (3, 4) and the upstream
   fake server (F2-F10); hostile payloads must degrade to an error or a smaller
   result, never a crash, never an over-full array. */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency.h"
#include "rsd_test.h"

#define NTOK 65536
static rsd_json_tok toks[NTOK];
static rsd_listing ol;
static rsd_listed_model ol_models[RSD_LISTING_MAX_MODELS];
static char ol_arena[RSD_LISTING_ARENA_BYTES];
static rsd_lms_catalog cat;
static char big[1 << 20];

static int S(rsd_str s, const char *c) { return rsd_str_eq_c(s, c); }
/* A view of n bytes (may hold a NUL). */
static rsd_str SN(const char *p, size_t n) {
    rsd_str s;
    s.ptr = p;
    s.len = n;
    return s;
}
/* A string literal and its length. */
#define SL(lit) lit, (sizeof lit - 1)

/* ---------------------------------------------------------------- Ollama ---- */
static const char PS_WIRE[] =
    "{\"models\":[{\"name\":\"gemma3:latest\",\"model\":\"gemma3:latest\",\"size\":6591830464,"
    "\"digest\":\"a2af\",\"details\":{\"parent_model\":\"\",\"format\":\"gguf\",\"family\":\"gemma3\","
    "\"families\":[\"gemma3\"],\"parameter_size\":\"4.3B\",\"quantization_level\":\"Q4_K_M\"},"
    "\"expires_at\":\"2025-10-17T16:47:07.93355-07:00\",\"size_vram\":5333539264,\"context_length\":4096}]}";

static void test_ollama_ps_wire_example(void) {
    CHECK_EQ_INT(rsd_ollama_ps_listing(PS_WIRE, sizeof PS_WIRE - 1, toks, NTOK, &ol), RSD_OK);
    CHECK_EQ_INT(ol.n, 1);
    CHECK(S(ol.models[0].id, "gemma3:latest") && ol.models[0].n_aliases == 0); /* name == model */
    CHECK(ol.models[0].state == RSD_MODEL_LOADED);
    CHECK(ol.models[0].has_size && ol.models[0].size_bytes == 6591830464ull);
    CHECK(ol.models[0].has_size_vram && ol.models[0].size_vram_bytes == 5333539264ull);
    CHECK_EQ_INT(ol.models[0].context_length, 4096);
    CHECK_EQ_INT(ol.n_skipped, 0);
    CHECK(!ol.truncated);
}

/* upstream resident-models.test.ts 1: VRAM and total preserved; model "" falls back to name */
static void test_ollama_ps_maps_sizes_and_name_fallback(void) {
    static const char b[] =
        "{\"models\":[{\"name\":\"qwen3:8b\",\"model\":\"\",\"size\":100,\"size_vram\":60},"
        "{\"name\":\"llama3.2:latest\",\"model\":\"llama3.2:latest\"},"
        "{\"name\":\"alias:latest\",\"model\":\"real:latest\",\"size\":\"big\",\"size_vram\":-1}]}";
    CHECK_EQ_INT(rsd_ollama_ps_listing(b, sizeof b - 1, toks, NTOK, &ol), RSD_OK);
    REQUIRE(ol.n == 3);
    CHECK(S(ol.models[0].id, "qwen3:8b") && ol.models[0].n_aliases == 0);
    CHECK(ol.models[0].has_size && ol.models[0].size_bytes == 100);
    CHECK(ol.models[0].has_size_vram && ol.models[0].size_vram_bytes == 60);
    CHECK(S(ol.models[1].id, "llama3.2:latest") && ol.models[1].n_aliases == 0); /* same id: no alias */
    CHECK(!ol.models[1].has_size && !ol.models[1].has_size_vram);                /* absent is never zero */
    CHECK(S(ol.models[2].id, "real:latest") && ol.models[2].n_aliases == 1 &&
          S(rsd_listed_alias(&ol.models[2], 0), "alias:latest"));
    CHECK(!ol.models[2].has_size && !ol.models[2].has_size_vram);                /* wrong type, negative */
}

/* O9 + W17: keep "llama3.2" matches "llama3.2:latest" once normalised; the
   resident then counts as the keep in rsd_decide (never evicted). */
static void test_ollama_keep_matches_by_alias_and_normalised_name(void) {
    static const char b[] = "{\"models\":[{\"name\":\"mine:latest\",\"model\":\"llama3.2:latest\"},"
                            "{\"name\":\"other:7b\",\"model\":\"other:7b\"}]}";
    rsd_resident r[4];
    rsd_facts f;
    static rsd_plan p;
    char norm[RSD_MODEL_ID_MAX];
    int i;
    REQUIRE(rsd_ollama_ps_listing(b, sizeof b - 1, toks, NTOK, &ol) == RSD_OK && ol.n == 2);
    memset(r, 0, sizeof r);
    for (i = 0; i < 2; i++) {
        r[i].model_id = ol.models[i].id;
        r[i].n_aliases = ol.models[i].n_aliases;
        if (r[i].n_aliases) r[i].aliases[0] = rsd_listed_alias(&ol.models[i], 0);
        r[i].loaded_by_us = true;
    }
    memset(&f, 0, sizeof f);
    f.strategy = RSD_STRATEGY_SCHEDULER;
    f.keep = rsd_str_c("mine");
    REQUIRE(rsd_ollama_name_normalise(f.keep, norm, sizeof norm) == 11);
    f.keep_aliases[0] = rsd_str_c(norm);
    f.n_keep_aliases = 1;
    f.residents = r;
    f.n_residents = 2;
    REQUIRE(rsd_decide(&f, &p) == RSD_OK);
    CHECK_EQ_INT(p.decision, RSD_DECISION_ALREADY_RESIDENT); /* matched through the name alias */
    CHECK_EQ_INT(p.n_evict, 0);
}

static void test_ollama_name_normalise(void) {
    char o[64];
    CHECK_EQ_INT(rsd_ollama_name_normalise(rsd_str_c("llama3.2"), o, sizeof o), 15);
    CHECK_EQ_STR(o, "llama3.2:latest");
    CHECK(rsd_ollama_name_normalise(rsd_str_c("llama3.2:8b"), o, sizeof o) > 0);
    CHECK_EQ_STR(o, "llama3.2:8b");
    CHECK(rsd_ollama_name_normalise(rsd_str_c("registry.ollama.ai/library/qwen3"), o, sizeof o) > 0);
    CHECK_EQ_STR(o, "qwen3:latest");
    CHECK(rsd_ollama_name_normalise(rsd_str_c("hf.co/ns/model"), o, sizeof o) > 0);
    CHECK_EQ_STR(o, "hf.co/ns/model:latest");
    CHECK(rsd_ollama_name_normalise(rsd_str_c("host:5000/ns/m"), o, sizeof o) > 0); /* port is no tag */
    CHECK_EQ_STR(o, "host:5000/ns/m:latest");
    CHECK(rsd_ollama_name_normalise(rsd_str_c("  ns/m:q4  "), o, sizeof o) > 0);
    CHECK_EQ_STR(o, "ns/m:q4");
    CHECK_EQ_INT(rsd_ollama_name_normalise(rsd_str_c(""), o, sizeof o), RSD_ERR_MODEL_ID);
    CHECK_EQ_INT(rsd_ollama_name_normalise(rsd_str_c("ns/"), o, sizeof o), RSD_ERR_MODEL_ID);
    CHECK_EQ_INT(rsd_ollama_name_normalise(rsd_str_c("llama3.2"), o, 15), RSD_ERR_BUFFER);
    CHECK_EQ_INT(rsd_ollama_name_normalise(rsd_str_c("llama3.2"), o, 16), 15);
    /* idempotent */
    CHECK(rsd_ollama_name_normalise(rsd_str_c("qwen3:latest"), o, sizeof o) == 12);
    /* a space after a dropped part is trimmed in the same pass (fuzz_ollama_ps) */
    CHECK_EQ_INT(rsd_ollama_name_normalise(rsd_str_c("registry.ollama.ai/ library/m"), o, sizeof o), 8);
    CHECK_EQ_STR(o, "m:latest");
    CHECK_EQ_INT(rsd_ollama_name_normalise(rsd_str_c("library/ m"), o, sizeof o), 8);
    CHECK_EQ_STR(o, "m:latest");
}

static void test_ollama_ps_empty_null_and_bad_shapes(void) {
    CHECK_EQ_INT(rsd_ollama_ps_listing(SL("{\"models\":[]}"), toks, NTOK, &ol), RSD_OK);
    CHECK_EQ_INT(ol.n, 0);
    CHECK_EQ_INT(rsd_ollama_ps_listing(SL("{\"models\":null}"), toks, NTOK, &ol), RSD_OK);
    CHECK_EQ_INT(ol.n, 0);
    CHECK_EQ_INT(rsd_ollama_ps_listing(SL("{}"), toks, NTOK, &ol), RSD_ERR_JSON_TYPE);
    CHECK_EQ_INT(rsd_ollama_ps_listing(SL("[]"), toks, NTOK, &ol), RSD_ERR_JSON_TYPE);
    /* the count pass's tokens (2) give the verdict plenty gives (fuzz_ollama_ps) */
    CHECK_EQ_INT(rsd_ollama_ps_listing(SL("[3]"), toks, 2, &ol), RSD_ERR_JSON_TYPE);
    CHECK_EQ_INT(rsd_lms_parse_models(&cat, SL("[[]]"), toks, 2), RSD_ERR_JSON_TYPE);
    CHECK_EQ_INT(rsd_ollama_ps_listing(SL("{\"models\":{}}"), toks, NTOK, &ol), RSD_ERR_JSON_TYPE);
    CHECK_EQ_INT(rsd_ollama_ps_listing(SL("{\"models\":\"x\"}"), toks, NTOK, &ol), RSD_ERR_JSON_TYPE);
    CHECK_EQ_INT(rsd_ollama_ps_listing(SL("{\"models\":["), toks, NTOK, &ol), RSD_ERR_TRUNCATED);
    CHECK_EQ_INT(rsd_ollama_ps_listing(SL("Ollama is running"), toks, NTOK, &ol), RSD_ERR_JSON);
    CHECK_EQ_INT(rsd_ollama_ps_listing(SL(""), toks, NTOK, &ol), RSD_ERR_TRUNCATED);
    CHECK_EQ_INT(rsd_ollama_ps_listing(SL("{}"), NULL, 0, &ol), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_ollama_ps_listing(SL("{}"), toks, NTOK, NULL), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_ollama_ps_listing(NULL, 3, toks, NTOK, &ol), RSD_ERR_ARG);
    /* too few tokens is an error, never a partial list */
    CHECK_EQ_INT(rsd_ollama_ps_listing(PS_WIRE, sizeof PS_WIRE - 1, toks, 8, &ol), RSD_ERR_JSON_TOKENS);
    CHECK_EQ_INT(ol.n, 0);
}

static void test_ollama_ps_hostile_entries_dropped(void) {
    static char b[4096];
    char longid[300];
    int n;
    memset(longid, 'x', 256);
    longid[256] = '\0';
    n = snprintf(b, sizeof b,
                 "{\"models\":[1,\"s\",null,[],{},{\"name\":7,\"model\":false},"
                 "{\"name\":\"\",\"model\":\"\"},{\"name\":\"%s\"},{\"name\":\"a\\u0000b\"},"
                 "{\"name\":\"tab\\tname\"},{\"name\":\"ok:1\",\"model\":{\"x\":1}},"
                 "{\"name\":\"dup:1\",\"name\":\"dup:2\"},"
                 "{\"name\":\"esc\\u002Fname:1\",\"model\":\"\\u00e9t\\u00e9:1\"}]}",
                 longid);
    REQUIRE(n > 0 && n < (int)sizeof b);
    CHECK_EQ_INT(rsd_ollama_ps_listing(b, (size_t)n, toks, NTOK, &ol), RSD_OK);
    CHECK_EQ_INT(ol.n, 4);
    CHECK_EQ_INT(ol.n_seen, 13);
    CHECK_EQ_INT(ol.n_skipped, 9);
    CHECK(!ol.truncated);
    CHECK(S(ol.models[0].id, "tab\tname"));                    /* a control byte is kept (not NUL) */
    CHECK(S(ol.models[1].id, "ok:1") && ol.models[1].n_aliases == 0);
    CHECK(S(ol.models[2].id, "dup:2"));                         /* last duplicate wins */
    CHECK(S(ol.models[3].id, "\xc3\xa9t\xc3\xa9:1"));          /* decoded into the arena */
    CHECK(ol.models[3].n_aliases == 1 && S(rsd_listed_alias(&ol.models[3], 0), "esc/name:1"));
    CHECK(ol.models[3].id.ptr >= ol.arena && ol.models[3].id.ptr < ol.arena + ol.arena_bytes);
}

static void test_ollama_ps_huge_array_capped(void) {
    size_t n = 0;
    int i;
    n += (size_t)snprintf(big + n, sizeof big - n, "{\"models\":[");
    for (i = 0; i < 1000; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "%s{\"name\":\"m%d:latest\",\"size\":%d}", i ? "," : "", i, i);
    n += (size_t)snprintf(big + n, sizeof big - n, "]}");
    CHECK_EQ_INT(rsd_ollama_ps_listing(big, n, toks, NTOK, &ol), RSD_OK);
    CHECK_EQ_INT(ol.n, RSD_LISTING_MAX_MODELS);
    CHECK_EQ_INT(ol.n_seen, 1000);
    CHECK(ol.truncated);
    CHECK(S(ol.models[63].id, "m63:latest"));
}

static void test_ollama_ps_arena_exhaustion(void) {
    size_t n = 0;
    int i;
    /* 200 entries, each an escaped name and model of 240 bytes: 96 KB of decoded text
       > the 64 KiB arena */
    n += (size_t)snprintf(big + n, sizeof big - n, "{\"models\":[");
    for (i = 0; i < 200; i++) {
        int k;
        n += (size_t)snprintf(big + n, sizeof big - n, "%s{\"name\":\"\\u0041%03d", i ? "," : "", i);
        for (k = 0; k < 236; k++) big[n++] = 'z';
        n += (size_t)snprintf(big + n, sizeof big - n, "\",\"model\":\"\\u0042%03d", i);
        for (k = 0; k < 236; k++) big[n++] = 'z';
        n += (size_t)snprintf(big + n, sizeof big - n, "\"}");
    }
    n += (size_t)snprintf(big + n, sizeof big - n, "]}");
    CHECK_EQ_INT(rsd_ollama_ps_listing(big, n, toks, NTOK, &ol), RSD_OK);
    CHECK(ol.n > 0 && ol.n < 200);
    CHECK(ol.truncated); /* a cut listing is never acted on */
    CHECK(ol.arena_used <= ol.arena_bytes);
    for (i = 0; i < ol.n; i++)
        CHECK(ol.models[i].id.len == 240 && ol.models[i].id.ptr[0] == 'B' && ol.models[i].n_aliases == 1);
}

static void test_ollama_deep_nesting_is_an_error(void) {
    size_t n = 0;
    int i;
    n += (size_t)snprintf(big, sizeof big, "{\"models\":[{\"name\":\"a:1\",\"details\":");
    for (i = 0; i < 200; i++) big[n++] = '[';
    for (i = 0; i < 200; i++) big[n++] = ']';
    n += (size_t)snprintf(big + n, sizeof big - n, "}]}");
    CHECK_EQ_INT(rsd_ollama_ps_listing(big, n, toks, NTOK, &ol), RSD_ERR_JSON_DEPTH);
}

static void test_ollama_tags_wire_example(void) {
    static const char b[] =
        "{\"models\":[{\"name\":\"llama3.2:latest\",\"model\":\"llama3.2:latest\","
        "\"modified_at\":\"2025-05-04T17:37:44.7-07:00\",\"size\":2019393189,\"digest\":\"a80c\","
        "\"details\":{\"parent_model\":\"\",\"format\":\"gguf\",\"family\":\"llama\",\"families\":[\"llama\"],"
        "\"parameter_size\":\"3.2B\",\"quantization_level\":\"Q4_K_M\"}},"
        "{\"name\":\"gpt-oss:120b-cloud\",\"model\":\"gpt-oss:120b-cloud\",\"remote_model\":\"gpt-oss:120b\","
        "\"remote_host\":\"https://ollama.com:443\",\"capabilities\":[\"completion\"]}]}";
    CHECK_EQ_INT(rsd_ollama_ps_listing(b, sizeof b - 1, toks, NTOK, &ol), RSD_OK);
    CHECK_EQ_INT(ol.n, 2);
    CHECK(ol.models[0].has_size && ol.models[0].size_bytes == 2019393189ull);
    CHECK(S(ol.models[1].id, "gpt-oss:120b-cloud"));
    CHECK_EQ_INT(rsd_listing_find(&ol, rsd_str_c("llama3.2:latest")), 0);
    CHECK_EQ_INT(rsd_listing_find(&ol, rsd_str_c("llama3.2:8b")), -1);
    CHECK_EQ_INT(rsd_listing_find(&ol, rsd_str_c("")), -1);
    CHECK_EQ_INT(rsd_ollama_ps_listing(SL("{\"error\":\"x\"}"), toks, NTOK, &ol), RSD_ERR_JSON_TYPE);
}

static void test_ollama_version(void) {
    rsd_ollama_version v;
    CHECK_EQ_INT(rsd_ollama_parse_version(&v, SL("{\"version\":\"0.12.6\"}"), toks, NTOK), RSD_OK);
    CHECK_EQ_STR(v.text, "0.12.6");
    CHECK(v.major == 0 && v.minor == 12 && v.patch == 6);
    CHECK_EQ_INT(rsd_ollama_parse_version(&v, SL("{\"version\":\"0.13.0-rc1\"}"), toks, NTOK), RSD_OK);
    CHECK(v.major == 0 && v.minor == 13 && v.patch == 0);
    CHECK_EQ_INT(rsd_ollama_parse_version(&v, SL("{\"version\":\"dev\"}"), toks, NTOK), RSD_OK);
    CHECK(v.major == -1 && v.minor == -1 && v.patch == -1);
    CHECK_EQ_INT(rsd_ollama_parse_version(&v, SL("{\"version\":12}"), toks, NTOK), RSD_ERR_JSON_TYPE);
    CHECK_EQ_INT(rsd_ollama_parse_version(&v, SL("[1]"), toks, NTOK), RSD_ERR_JSON_TYPE);
}

static void test_ollama_generate_replies(void) {
    rsd_ollama_reply g;
    static const char load[] = "{\"model\":\"llama3.2\",\"created_at\":\"2025-01-01T00:00:00Z\","
                               "\"response\":\"\",\"done\":true,\"done_reason\":\"load\"}";
    static const char unload[] = "{\"model\":\"llama3.2\",\"created_at\":\"x\",\"response\":\"\","
                                 "\"done\":true,\"done_reason\":\"unload\"}";
    static const char old[] = "{\"model\":\"llama3.2\",\"created_at\":\"x\",\"response\":\"\",\"done\":true}";
    static const char busy[] = "{\"error\":\"server busy, please try again.  maximum pending requests exceeded\"}";
    static const char nf[] = "{\"error\":\"model 'foo' not found\"}";
    CHECK_EQ_INT(rsd_ollama_parse_generate(&g, load, sizeof load - 1, toks, NTOK), RSD_OK);
    CHECK(g.done && g.reason == RSD_OLLAMA_DONE_LOAD && !g.error.present);
    CHECK_EQ_INT(rsd_ollama_parse_generate(&g, unload, sizeof unload - 1, toks, NTOK), RSD_OK);
    CHECK(g.done && g.reason == RSD_OLLAMA_DONE_UNLOAD);
    CHECK_EQ_INT(rsd_ollama_parse_generate(&g, old, sizeof old - 1, toks, NTOK), RSD_OK);
    CHECK(g.done && g.reason == RSD_OLLAMA_DONE_NONE);
    CHECK_EQ_INT(rsd_ollama_parse_generate(&g, busy, sizeof busy - 1, toks, NTOK), RSD_ERR_SERVER_ERROR);
    CHECK_EQ_STR(g.error.message, "server busy, please try again.  maximum pending requests exceeded");
    CHECK_EQ_INT(rsd_ollama_parse_generate(&g, nf, sizeof nf - 1, toks, NTOK), RSD_ERR_SERVER_ERROR);
    CHECK_EQ_STR(g.error.message, "model 'foo' not found");
    CHECK_EQ_INT(rsd_ollama_parse_generate(&g, SL("{\"done\":\"yes\",\"done_reason\":\"odd\"}"), toks, NTOK), RSD_OK);
    CHECK(!g.done && g.reason == RSD_OLLAMA_DONE_OTHER);
    /* NDJSON stream (two objects) is not one reply */
    CHECK(rsd_ollama_parse_generate(&g, SL("{\"done\":false}\n{\"done\":true}"), toks, NTOK) < 0);
}

static void test_ollama_request_bodies(void) {
    char b[256];
    rsd_ollama_load_opts o;
    memset(&o, 0, sizeof o);
    CHECK(rsd_ollama_load_body(b, sizeof b, rsd_str_c("llama3.2"), NULL) > 0);
    CHECK_EQ_STR(b, "{\"model\":\"llama3.2\",\"stream\":false}");
    o.set_keep_alive = true;
    o.keep_alive_s = -5;
    o.num_ctx = 8192;
    CHECK(rsd_ollama_load_body(b, sizeof b, rsd_str_c("llama3.2"), &o) > 0);
    CHECK_EQ_STR(b, "{\"model\":\"llama3.2\",\"stream\":false,\"keep_alive\":-1,\"options\":{\"num_ctx\":8192}}");
    o.keep_alive_s = 300;
    o.num_ctx = 0;
    CHECK(rsd_ollama_load_body(b, sizeof b, rsd_str_c("q\"x"), &o) > 0);
    CHECK_EQ_STR(b, "{\"model\":\"q\\\"x\",\"stream\":false,\"keep_alive\":300}");
    CHECK(rsd_ollama_unload_body(b, sizeof b, rsd_str_c("llama3.2:latest")) > 0);
    CHECK_EQ_STR(b, "{\"model\":\"llama3.2:latest\",\"keep_alive\":0,\"stream\":false}");
    CHECK_EQ_INT(rsd_ollama_unload_body(b, sizeof b, rsd_str_c("")), RSD_ERR_MODEL_ID);
    CHECK_EQ_INT(rsd_ollama_unload_body(b, 10, rsd_str_c("llama3.2")), RSD_ERR_BUFFER);
    CHECK(rsd_ollama_unload_body(b, sizeof b, rsd_str_c("a\nb")) > 0); /* the id rule: only NUL is refused */
    CHECK_EQ_STR(b, "{\"model\":\"a\\nb\",\"keep_alive\":0,\"stream\":false}");
    CHECK_EQ_INT(rsd_ollama_unload_body(b, sizeof b, SN("a\0b", 3)), RSD_ERR_MODEL_ID);
}

static void test_server_error_forms(void) {
    rsd_server_error e;
    static const char obj[] = "{\"error\":{\"type\":\"invalid_request\",\"message\":\"\\\"model\\\" is required\","
                              "\"code\":\"missing_required_parameter\",\"param\":\"model\"}}";
    CHECK_EQ_INT(rsd_server_error_parse(&e, obj, sizeof obj - 1, toks, NTOK), 1);
    CHECK_EQ_STR(e.message, "\"model\" is required");
    CHECK_EQ_STR(e.type, "invalid_request");
    CHECK_EQ_STR(e.code, "missing_required_parameter");
    CHECK_EQ_INT(rsd_server_error_parse(&e, SL("{\"error\":\"a\\nb\"}"), toks, NTOK), 1);
    CHECK_EQ_STR(e.message, "a b");                                   /* control bytes neutralised */
    CHECK_EQ_INT(rsd_server_error_parse(&e, SL("{\"error\":{\"code\":507}}"), toks, NTOK), 1);
    CHECK_EQ_STR(e.code, "507");
    CHECK(e.message[0] == '\0');
    CHECK_EQ_INT(rsd_server_error_parse(&e, SL("{\"error\":null}"), toks, NTOK), 0);
    CHECK_EQ_INT(rsd_server_error_parse(&e, SL("{\"error\":\"\"}"), toks, NTOK), 0);
    CHECK_EQ_INT(rsd_server_error_parse(&e, SL("{\"error\":false}"), toks, NTOK), 0);
    CHECK_EQ_INT(rsd_server_error_parse(&e, SL("{\"error\":true}"), toks, NTOK), 1);
    CHECK_EQ_INT(rsd_server_error_parse(&e, SL("[\"error\"]"), toks, NTOK), 0);
    CHECK_EQ_INT(rsd_server_error_parse(&e, SL("<html>"), toks, NTOK), RSD_ERR_JSON);
}

static void test_server_error_truncates_on_utf8_boundary(void) {
    size_t n = 0;
    int i;
    rsd_server_error e;
    n += (size_t)snprintf(big, sizeof big, "{\"error\":\"");
    for (i = 0; i < 254; i++) big[n++] = 'a';
    big[n++] = '\xe2', big[n++] = '\x82', big[n++] = '\xac'; /* euro sign straddles byte 255 */
    n += (size_t)snprintf(big + n, sizeof big - n, "tail\"}");
    CHECK_EQ_INT(rsd_server_error_parse(&e, big, n, toks, NTOK), 1);
    CHECK_EQ_INT(strlen(e.message), 254);
}

/* ------------------------------------------------ one rule for every runtime ---- */
static rsd_listing rl;
static rsd_listed_model rl_models[RSD_LISTING_MAX_MODELS];
static char rl_arena[RSD_LISTING_ARENA_BYTES];

/* A duplicate key: the last one wins in every parser (llama.cpp's reader, JSON.parse
   and Go agree), for the id and for every other member. */
static void test_every_parser_duplicate_key_last_wins(void) {
    static const char router[] = "{\"data\":[{\"id\":\"first\",\"status\":{\"value\":\"loaded\"},"
                                 "\"id\":\"second\",\"status\":{\"value\":\"unloaded\"}}],\"data\":[{\"id\":\"third\"}]}";
    static const char ps[] = "{\"models\":[{\"model\":\"first\",\"size\":1,\"model\":\"second\",\"size\":2}]}";
    static const char v1[] = "{\"models\":[{\"key\":\"first\",\"max_context_length\":1,\"key\":\"second\","
                             "\"max_context_length\":2}]}";
    static const char v0[] = "{\"data\":[{\"id\":\"first\",\"state\":\"loaded\",\"id\":\"second\"}]}";
    rsd_lms_reply rep;
    rsd_json_doc d;
    CHECK_EQ_INT(rsd_router_parse_models(router, sizeof router - 1, toks, NTOK, &rl), RSD_OK);
    REQUIRE(rl.n == 1);
    CHECK(S(rl.models[0].id, "third")); /* the last "data" */
    CHECK_EQ_INT(rsd_router_parse_models(SL("{\"data\":[{\"id\":\"first\",\"status\":{\"value\":\"loaded\"},"
                                            "\"id\":\"second\",\"status\":{\"value\":\"unloaded\"}}]}"),
                                         toks, NTOK, &rl), RSD_OK);
    REQUIRE(rl.n == 1);
    CHECK(S(rl.models[0].id, "second") && rl.models[0].state == RSD_MODEL_UNLOADED);
    CHECK_EQ_INT(rsd_ollama_ps_listing(ps, sizeof ps - 1, toks, NTOK, &ol), RSD_OK);
    REQUIRE(ol.n == 1);
    CHECK(S(ol.models[0].id, "second") && ol.models[0].size_bytes == 2);
    CHECK_EQ_INT(rsd_lms_parse_models(&cat, v1, sizeof v1 - 1, toks, NTOK), 1);
    CHECK(S(cat.models[0].key, "second") && cat.models[0].max_context_length == 2);
    CHECK_EQ_INT(rsd_lms_parse_models(&cat, v0, sizeof v0 - 1, toks, NTOK), 1);
    CHECK(S(cat.models[0].key, "second") && cat.n_instances == 1 && S(cat.instances[0].id, "second"));
    CHECK_EQ_INT(rsd_lms_parse_reply(&rep, SL("{\"instance_id\":\"a\",\"instance_id\":\"b\"}"), toks, NTOK), RSD_OK);
    CHECK(S(rep.instance_id, "b"));
    /* and the JSON accessor the parsers stand on */
    REQUIRE(rsd_json_parse(&d, SL("{\"k\":1,\"k\":2}"), toks, NTOK) == 5);
    CHECK_EQ_INT(rsd_json_find(&d, 0, "k"), 4);
}

/* One id rule: an id holding a control byte (here a decoded \u0001) is kept by every
   parser, and an id holding a NUL (a decoded \u0000) is dropped by every parser and
   counted; the same for aliases, tags and instance ids. */
static void test_every_parser_same_id_rule(void) {
    static const char router[] = "{\"data\":[{\"id\":\"a\\u0001b\"},{\"id\":\"ok\",\"aliases\":[\"x\\u0000\",\"al\\u0001\"],"
                                 "\"tags\":[\"\\u0000\",\"t\\u0001\"]},{\"id\":\"nul\\u0000\"}]}";
    static const char ps[] = "{\"models\":[{\"model\":\"a\\u0001b\"},{\"name\":\"a\\u0000b\",\"model\":\"\"},"
                             "{\"name\":\"x\\u0000\",\"model\":\"m\"}]}";
    static const char v1[] = "{\"models\":[{\"key\":\"a\\u0001b\"},{\"key\":\"k\\u0000\"},{\"key\":\"ok\",\"loaded_instances\":"
                             "[{\"id\":\"i\\u0000\"},{\"id\":\"ok\\u0001\"}]}]}";
    static const char v0[] = "{\"data\":[{\"id\":\"a\\u0001b\",\"state\":\"loaded\"},{\"id\":\"n\\u0000\"}]}";
    char b[128];
    CHECK_EQ_INT(rsd_router_parse_models(router, sizeof router - 1, toks, NTOK, &rl), RSD_OK);
    REQUIRE(rl.n == 2);
    CHECK(S(rl.models[0].id, "a\x01" "b") && S(rl.models[1].id, "ok") && rl.n_skipped == 1);
    CHECK(rl.models[1].n_aliases == 1 && S(rsd_listed_alias(&rl.models[1], 0), "al\x01"));
    CHECK(rl.models[1].n_tags == 1 && S(rsd_listed_tag(&rl.models[1], 0), "t\x01"));
    CHECK_EQ_INT(rsd_ollama_ps_listing(ps, sizeof ps - 1, toks, NTOK, &ol), RSD_OK);
    REQUIRE(ol.n == 2);
    CHECK(S(ol.models[0].id, "a\x01" "b") && S(ol.models[1].id, "m") && ol.models[1].n_aliases == 0);
    CHECK_EQ_INT(ol.n_skipped, 1);
    CHECK_EQ_INT(rsd_lms_parse_models(&cat, v1, sizeof v1 - 1, toks, NTOK), 2);
    CHECK(S(cat.models[0].key, "a\x01" "b") && S(cat.models[1].key, "ok"));
    CHECK(cat.n_instances == 1 && S(cat.instances[0].id, "ok\x01"));
    CHECK_EQ_INT(cat.n_dropped, 2);
    CHECK_EQ_INT(rsd_lms_parse_models(&cat, v0, sizeof v0 - 1, toks, NTOK), 1);
    CHECK(S(cat.models[0].key, "a\x01" "b") && cat.n_instances == 1 && cat.n_dropped == 1);
    /* what a parser keeps, the request bodies can name */
    CHECK(rsd_ollama_unload_body(b, sizeof b, rsd_str_c("a\x01" "b")) > 0);
    CHECK(rsd_lms_unload_body(b, sizeof b, rsd_str_c("a\x01" "b")) > 0);
    CHECK_EQ_STR(b, "{\"instance_id\":\"a\\u0001b\"}");
    CHECK_EQ_INT(rsd_lms_load_body(b, sizeof b, SN("a\0b", 3), NULL), RSD_ERR_MODEL_ID);
}

/* Parsed strings are copies: the results stay whole when the body is gone. */
static void test_every_parser_copies_its_strings(void) {
    static char body[256];
    int n;
    n = snprintf(body, sizeof body, "{\"data\":[{\"id\":\"plain\",\"aliases\":[\"al\"]}]}");
    REQUIRE(rsd_router_parse_models(body, (size_t)n, toks, NTOK, &rl) == RSD_OK && rl.n == 1);
    n = snprintf(body, sizeof body, "{\"models\":[{\"name\":\"n:1\",\"model\":\"m:1\"}]}");
    REQUIRE(rsd_ollama_ps_listing(body, (size_t)n, toks, NTOK, &ol) == RSD_OK && ol.n == 1);
    n = snprintf(body, sizeof body, "{\"models\":[{\"key\":\"k\",\"loaded_instances\":[{\"id\":\"k:2\"}]}]}");
    REQUIRE(rsd_lms_parse_models(&cat, body, (size_t)n, toks, NTOK) == 1);
    memset(body, '#', sizeof body);
    CHECK(S(rl.models[0].id, "plain") && S(rsd_listed_alias(&rl.models[0], 0), "al"));
    CHECK(S(ol.models[0].id, "m:1") && S(rsd_listed_alias(&ol.models[0], 0), "n:1"));
    CHECK(S(cat.models[0].key, "k") && S(cat.instances[0].id, "k:2"));
}

/* Every listing parser reads its list entry by entry: 64 realistic entries (a real
   router's with argv, preset and meta; Ollama's /api/ps; LM Studio's v1 with an
   instance) parse with RSD_RECONCILE_TOKENS tokens, far fewer than the whole body
   needs; a single entry over the tokens is RSD_ERR_JSON_TOKENS and nothing is kept. */
static void test_listings_parse_entry_by_entry(void) {
    static char id[96];
    uint32_t cap = RSD_RECONCILE_TOKENS;
    rsd_json_doc d;
    size_t o;
    int i, all;
    for (int rt = 0; rt < 3; rt++) {
        o = (size_t)snprintf(big, sizeof big, rt == 0 ? "{\"data\":[" : "{\"models\":[");
        for (i = 0; i < 64; i++) {
            snprintf(id, sizeof id, "unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF-%030d", i);
            if (rt == 0)
                o += (size_t)snprintf(big + o, sizeof big - o,
                    "%s{\"id\":\"%s\",\"aliases\":[\"%s-a\"],\"tags\":[\"pinned:true\"],\"object\":\"model\",\"owned_by\":\"llamacpp\","
                    "\"created\":1795993601,\"status\":{\"value\":\"loaded\",\"args\":[\"/usr/local/bin/llama-server\","
                    "\"--host\",\"127.0.0.1\",\"--port\",\"46335\",\"--alias\",\"%s\",\"--ctx-size\",\"32768\","
                    "\"--n-gpu-layers\",\"99\",\"--model\",\"/m/%s.gguf\"],\"preset\":\"[%s]\\nctx-size = 32768\\n\"},"
                    "\"architecture\":{\"input_modalities\":[\"text\"],\"output_modalities\":[\"text\"]},\"source\":\"models_dir\","
                    "\"can_remove\":false,\"meta\":{\"vocab_type\":1,\"n_vocab\":151936,\"n_ctx\":32768,\"n_ctx_train\":262144,"
                    "\"n_embd\":2048,\"n_params\":30532122624,\"size\":17659826176,\"ftype\":\"Q4_K - Medium\"}}",
                    i ? "," : "", id, id, id, id, id);
            else if (rt == 1)
                o += (size_t)snprintf(big + o, sizeof big - o,
                    "%s{\"name\":\"%s:latest\",\"model\":\"%s:latest\",\"size\":6591830464,\"digest\":\"a2af\","
                    "\"details\":{\"parent_model\":\"\",\"format\":\"gguf\",\"family\":\"gemma3\",\"families\":[\"gemma3\"],"
                    "\"parameter_size\":\"4.3B\",\"quantization_level\":\"Q4_K_M\"},\"expires_at\":\"2025-10-17T16:47:07.93355-07:00\","
                    "\"size_vram\":5333539264,\"context_length\":4096}", i ? "," : "", id, id);
            else
                o += (size_t)snprintf(big + o, sizeof big - o,
                    "%s{\"type\":\"llm\",\"publisher\":\"google\",\"key\":\"%s\",\"display_name\":\"Gemma\",\"architecture\":\"gemma4\","
                    "\"quantization\":{\"name\":\"Q4_K_M\",\"bits_per_weight\":4},\"size_bytes\":17990911801,\"params_string\":\"26B\","
                    "\"loaded_instances\":[{\"id\":\"%s\",\"config\":{\"context_length\":4096,\"eval_batch_size\":512,\"parallel\":4,"
                    "\"flash_attention\":true,\"num_experts\":8,\"offload_kv_cache_to_gpu\":true}}],\"max_context_length\":262144,"
                    "\"format\":\"gguf\",\"capabilities\":{\"vision\":true,\"trained_for_tool_use\":true}}", i ? "," : "", id, id);
        }
        o += (size_t)snprintf(big + o, sizeof big - o, "]}");
        all = rsd_json_parse(&d, big, o, NULL, 0);
        CHECK(all > 4 * (int)cap); /* the whole body needs 6 to 18 times more */
        if (rt == 0) {
            CHECK_EQ_INT(rsd_router_parse_models(big, o, toks, cap, &ol), RSD_OK);
            CHECK_EQ_INT(ol.n, 64);
            CHECK(!ol.truncated && ol.has_states);
            CHECK(rsd_str_eq_c(rsd_listed_alias(&ol.models[63], 0), "unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF-000000000000000000000000000063-a"));
            CHECK(ol.models[63].context_length == 32768 && ol.models[63].size_bytes == 17659826176ull);
            CHECK_EQ_INT(rsd_router_parse_models(big, o, toks, 40, &ol), RSD_ERR_JSON_TOKENS); /* an entry is 66 */
            CHECK_EQ_INT(ol.n, 0);
        } else if (rt == 1) {
            CHECK_EQ_INT(rsd_ollama_ps_listing(big, o, toks, cap, &ol), RSD_OK);
            CHECK_EQ_INT(ol.n, 64);
            CHECK(ol.models[10].size_vram_bytes == 5333539264ull && ol.models[10].context_length == 4096);
            CHECK_EQ_INT(rsd_ollama_ps_listing(big, o, toks, 20, &ol), RSD_ERR_JSON_TOKENS);
            CHECK_EQ_INT(ol.n, 0);
        } else {
            CHECK_EQ_INT(rsd_lms_parse_models(&cat, big, o, toks, cap), 64);
            CHECK_EQ_INT(cat.n_instances, 64);
            CHECK(cat.instances[63].context_length == 4096 && cat.models[63].vision);
            CHECK_EQ_INT(rsd_lms_parse_models(&cat, big, o, toks, 20), RSD_ERR_JSON_TOKENS);
            CHECK_EQ_INT(cat.n_models, 0);
        }
        big[o - 3] = ' '; /* a broken last entry: the whole answer is refused */
        CHECK(rsd_router_parse_models(big, o, toks, cap, &ol) == RSD_ERR_JSON && ol.n == 0);
        CHECK(rsd_ollama_ps_listing(big, o, toks, cap, &ol) == RSD_ERR_JSON && ol.n == 0);
        CHECK(rsd_lms_parse_models(&cat, big, o, toks, cap) == RSD_ERR_JSON && cat.n_models == 0);
    }
}

/* ------------------------------------------------------------- LM Studio ---- */
static const char V1_WIRE[] =
    "{\"models\":[{\"type\":\"llm\",\"publisher\":\"google\",\"key\":\"google/gemma-4-26b-a4b\","
    "\"display_name\":\"Gemma 4 26B A4B\",\"architecture\":\"gemma4\",\"quantization\":{\"name\":\"Q4_K_M\","
    "\"bits_per_weight\":4},\"size_bytes\":17990911801,\"params_string\":\"26B-A4B\","
    "\"loaded_instances\":[{\"id\":\"google/gemma-4-26b-a4b\",\"config\":{\"context_length\":4096,"
    "\"eval_batch_size\":512,\"parallel\":4,\"flash_attention\":true,\"num_experts\":8,"
    "\"offload_kv_cache_to_gpu\":true}}],\"max_context_length\":262144,\"format\":\"gguf\","
    "\"capabilities\":{\"vision\":true,\"trained_for_tool_use\":true}},"
    "{\"type\":\"embedding\",\"publisher\":\"nomic\",\"key\":\"text-embedding-nomic\",\"size_bytes\":84106624,"
    "\"loaded_instances\":[],\"max_context_length\":2048,\"format\":\"gguf\"}]}";

/* The upstream fake (F2): LM Link duplicates of qwen3.8-27b (zbook then dynamo),
   coder-unloaded and embedding-model, both without instances. */
static const char F2_ZBOOK_FIRST[] =
    "{\"models\":["
    "{\"key\":\"qwen3.8-27b\",\"type\":\"llm\",\"max_context_length\":262144,"
    "\"capabilities\":{\"vision\":false,\"trained_for_tool_use\":true,\"reasoning\":{\"allowed_options\":[\"off\",\"on\"],\"default\":\"on\"}},"
    "\"loaded_instances\":[{\"id\":\"qwen3.8-27b-zbook\",\"config\":{\"context_length\":262144}}]},"
    "{\"key\":\"qwen3.8-27b\",\"type\":\"llm\",\"max_context_length\":131072,"
    "\"loaded_instances\":[{\"id\":\"qwen3.8-27b-dynamo\",\"config\":{\"context_length\":131072}}]},"
    "{\"key\":\"coder-unloaded\",\"type\":\"llm\",\"max_context_length\":65536,"
    "\"capabilities\":{\"trained_for_tool_use\":false,\"reasoning\":{\"allowed_options\":[\"off\",\"on\"]}},\"loaded_instances\":[]},"
    "{\"key\":\"embedding-model\",\"type\":\"embedding\",\"max_context_length\":8192,\"loaded_instances\":[]}]}";
static const char F2_DYNAMO_FIRST[] =
    "{\"models\":["
    "{\"key\":\"qwen3.8-27b\",\"type\":\"llm\",\"max_context_length\":131072,"
    "\"loaded_instances\":[{\"id\":\"qwen3.8-27b-dynamo\",\"config\":{\"context_length\":131072}}]},"
    "{\"key\":\"qwen3.8-27b\",\"type\":\"llm\",\"max_context_length\":262144,"
    "\"capabilities\":{\"vision\":false,\"trained_for_tool_use\":true,\"reasoning\":{\"allowed_options\":[\"off\",\"on\"]}},"
    "\"loaded_instances\":[{\"id\":\"qwen3.8-27b-zbook\",\"config\":{\"context_length\":262144}}]},"
    "{\"key\":\"coder-unloaded\",\"type\":\"llm\",\"max_context_length\":65536,\"loaded_instances\":[]},"
    "{\"key\":\"embedding-model\",\"type\":\"embedding\",\"max_context_length\":8192,\"loaded_instances\":[]}]}";
/* F7: v0 listing of the same state */
static const char F7_V0[] =
    "{\"object\":\"list\",\"data\":["
    "{\"id\":\"qwen3.8-27b-dynamo\",\"object\":\"model\",\"type\":\"llm\",\"state\":\"loaded\",\"loaded_context_length\":131072,"
    "\"compatibility_type\":\"gguf\",\"max_context_length\":131072,\"capabilities\":[\"tool_use\"]},"
    "{\"id\":\"qwen3.8-27b-zbook\",\"object\":\"model\",\"type\":\"llm\",\"state\":\"loaded\",\"loaded_context_length\":262144,"
    "\"compatibility_type\":\"gguf\",\"max_context_length\":262144,\"capabilities\":[\"tool_use\"]},"
    "{\"id\":\"qwen3.8-27b\",\"object\":\"model\",\"type\":\"llm\",\"state\":\"not-loaded\",\"compatibility_type\":\"gguf\",\"max_context_length\":262144},"
    "{\"id\":\"coder-unloaded\",\"object\":\"model\",\"type\":\"llm\",\"state\":\"not-loaded\",\"max_context_length\":65536},"
    "{\"id\":\"embedding-model\",\"object\":\"model\",\"type\":\"embeddings\",\"state\":\"not-loaded\",\"max_context_length\":8192}]}";

static void test_lms_v1_wire_example(void) {
    int n = rsd_lms_parse_models(&cat, V1_WIRE, sizeof V1_WIRE - 1, toks, NTOK);
    REQUIRE(n == 2);
    CHECK_EQ_INT(cat.tier, RSD_LMS_TIER_V1);
    CHECK(S(cat.models[0].key, "google/gemma-4-26b-a4b"));
    CHECK_EQ_INT(cat.models[0].type, RSD_LMS_TYPE_LLM);
    CHECK_EQ_INT(cat.models[0].max_context_length, 262144);
    CHECK(cat.models[0].has_size && cat.models[0].size_bytes == 17990911801ull);
    CHECK(cat.models[0].vision && cat.models[0].tools && !cat.models[0].reasoning);
    CHECK_EQ_INT(cat.models[0].n_instances, 1);
    CHECK_EQ_INT(cat.n_instances, 1);
    CHECK(S(cat.instances[0].id, "google/gemma-4-26b-a4b") && cat.instances[0].model == 0);
    CHECK_EQ_INT(cat.instances[0].context_length, 4096);
    CHECK_EQ_INT(cat.models[1].type, RSD_LMS_TYPE_EMBEDDING);
    CHECK_EQ_INT(cat.models[1].n_instances, 0);
    CHECK(!cat.models[1].vision && !cat.models[1].tools);
}

/* lmstudio.test.ts 1 (probe side, residency facts only) and S10 folding */
static void test_lms_v1_lm_link_duplicates_fold(void) {
    int n = rsd_lms_parse_models(&cat, F2_ZBOOK_FIRST, sizeof F2_ZBOOK_FIRST - 1, toks, NTOK);
    REQUIRE(n == 3);
    CHECK_EQ_INT(cat.n_entries, 4);
    CHECK(S(cat.models[0].key, "qwen3.8-27b"));
    CHECK_EQ_INT(cat.models[0].max_context_length, 262144);     /* first entry wins */
    CHECK(cat.models[0].reasoning && cat.models[0].tools);
    CHECK_EQ_INT(cat.models[0].n_instances, 2);
    CHECK(S(cat.instances[0].id, "qwen3.8-27b-zbook") && cat.instances[0].context_length == 262144);
    CHECK(S(cat.instances[1].id, "qwen3.8-27b-dynamo") && cat.instances[1].context_length == 131072);
    CHECK(S(cat.models[1].key, "coder-unloaded") && cat.models[1].reasoning && !cat.models[1].tools);
    /* dynamo first: scalars of entry 1 win, missing caps are filled from entry 2 */
    n = rsd_lms_parse_models(&cat, F2_DYNAMO_FIRST, sizeof F2_DYNAMO_FIRST - 1, toks, NTOK);
    REQUIRE(n == 3);
    CHECK_EQ_INT(cat.models[0].max_context_length, 131072);
    CHECK(cat.models[0].reasoning && cat.models[0].tools);
    CHECK(S(cat.instances[0].id, "qwen3.8-27b-dynamo"));
}

static void test_lms_v1_duplicate_instance_ids_dedupe(void) {
    static const char b[] =
        "{\"models\":[{\"key\":\"k\",\"loaded_instances\":[{\"id\":\"k\"},{\"id\":\"k:2\"},{\"id\":\"k\"}]},"
        "{\"key\":\"k\",\"loaded_instances\":[{\"id\":\"k:2\"},{\"id\":\"k:3\"},{\"id\":\"  \"},{\"nope\":1},7]}]}";
    REQUIRE(rsd_lms_parse_models(&cat, b, sizeof b - 1, toks, NTOK) == 1);
    CHECK_EQ_INT(cat.n_instances, 3);
    CHECK_EQ_INT(cat.models[0].n_instances, 3);
    CHECK(S(cat.instances[2].id, "k:3"));
    CHECK_EQ_INT(cat.n_dropped, 3);
}

/* lmstudio-instance-resolution.test.ts 1: the LM Link v0 listing */
static void test_lms_v0_lm_link_listing(void) {
    int n = rsd_lms_parse_models(&cat, F7_V0, sizeof F7_V0 - 1, toks, NTOK);
    REQUIRE(n == 5);
    CHECK_EQ_INT(cat.tier, RSD_LMS_TIER_V0);
    CHECK(S(cat.models[0].key, "qwen3.8-27b-dynamo") && cat.models[0].n_instances == 1);
    CHECK(S(cat.models[1].key, "qwen3.8-27b-zbook") && cat.models[1].n_instances == 1);
    CHECK(S(cat.models[2].key, "qwen3.8-27b") && cat.models[2].n_instances == 0);
    CHECK_EQ_INT(cat.n_instances, 2);
    CHECK(S(cat.instances[0].id, "qwen3.8-27b-dynamo") && cat.instances[0].context_length == 131072);
    CHECK(cat.models[0].tools && !cat.models[3].tools);
    CHECK_EQ_INT(cat.models[4].type, RSD_LMS_TYPE_EMBEDDING);
}

static void test_lms_v0_state_variants(void) {
    static const char b[] =
        "{\"data\":[{\"id\":\"a\",\"state\":\"loaded\"},{\"id\":\"b\",\"state\":\"not-loaded\",\"loaded_context_length\":4096},"
        "{\"id\":\"c\",\"state\":\"not-loaded\",\"loaded_context_length\":0},{\"id\":\"c\",\"state\":\"loaded\"},"
        "{\"id\":\"d\",\"state\":\"LOADED\"},{\"id\":\"v\",\"type\":\"vlm\",\"state\":7}]}";
    REQUIRE(rsd_lms_parse_models(&cat, b, sizeof b - 1, toks, NTOK) == 5);
    CHECK_EQ_INT(cat.n_instances, 3); /* a, b (positive loaded context), c (second row) */
    CHECK(S(cat.instances[0].id, "a") && cat.instances[0].context_length == 0);
    CHECK(S(cat.instances[1].id, "b") && cat.instances[1].context_length == 4096);
    CHECK(S(cat.instances[2].id, "c"));
    CHECK(cat.models[4].vision && cat.models[4].type == RSD_LMS_TYPE_VLM);
}

/* F8: /v1/models, id only */
static void test_lms_openai_list(void) {
    static const char b[] = "{\"object\":\"list\",\"data\":[{\"id\":\"qwen3.8-27b\",\"object\":\"model\"},"
                            "{\"id\":\"qwen3.8-27b-zbook\",\"object\":\"model\"}]}";
    CHECK_EQ_INT(rsd_lms_catalog_from_response(&cat, RSD_LMS_TIER_OPENAI, 200, b, sizeof b - 1, toks, NTOK), 2);
    CHECK_EQ_INT(cat.tier, RSD_LMS_TIER_OPENAI);
    CHECK_EQ_INT(cat.n_instances, 0);
}

/* S4-S6: tier detection step by step, including the 0.3 server's 200-with-error on v1 */
static void test_lms_tier_detection(void) {
    static const char unexpected[] = "{\"error\":\"Unexpected endpoint or method. (GET /api/v1/models)\"}";
    static const char auth[] = "{\"error\":\"Authentication required\"}";
    CHECK_EQ_INT(rsd_lms_catalog_from_response(&cat, RSD_LMS_TIER_V1, 200, V1_WIRE, sizeof V1_WIRE - 1, toks, NTOK), 2);
    CHECK_EQ_INT(cat.tier, RSD_LMS_TIER_V1);
    /* S6: 200 + error body on v1 falls through (no models array) */
    CHECK_EQ_INT(rsd_lms_catalog_from_response(&cat, RSD_LMS_TIER_V1, 200, unexpected, sizeof unexpected - 1, toks, NTOK),
                 RSD_ERR_SERVER_ERROR);
    CHECK_EQ_STR(cat.error.message, "Unexpected endpoint or method. (GET /api/v1/models)");
    CHECK_EQ_INT(cat.n_models, 0);
    CHECK_EQ_INT(cat.tier, RSD_LMS_TIER_NONE);
    /* F10 in 0.3 mode: 404 {error:"Not found"} */
    CHECK_EQ_INT(rsd_lms_catalog_from_response(&cat, RSD_LMS_TIER_V1, 404, SL("{\"error\":\"Not found\"}"), toks, NTOK),
                 RSD_ERR_HTTP_STATUS);
    CHECK_EQ_STR(cat.error.message, "Not found");
    CHECK_EQ_INT(rsd_lms_catalog_from_response(&cat, RSD_LMS_TIER_V1, 500, SL("oops"), toks, NTOK), RSD_ERR_HTTP_STATUS);
    CHECK_EQ_STR(cat.error.message, "HTTP 500");
    /* v1 shape asked from v0 (or the reverse) is not that tier */
    CHECK_EQ_INT(rsd_lms_catalog_from_response(&cat, RSD_LMS_TIER_V0, 200, V1_WIRE, sizeof V1_WIRE - 1, toks, NTOK),
                 RSD_ERR_JSON_TYPE);
    CHECK_EQ_INT(rsd_lms_catalog_from_response(&cat, RSD_LMS_TIER_V1, 200, F7_V0, sizeof F7_V0 - 1, toks, NTOK),
                 RSD_ERR_JSON_TYPE);
    CHECK_EQ_INT(cat.n_models, 0);
    CHECK_EQ_INT(rsd_lms_catalog_from_response(&cat, RSD_LMS_TIER_V0, 200, F7_V0, sizeof F7_V0 - 1, toks, NTOK), 5);
    CHECK_EQ_INT(cat.tier, RSD_LMS_TIER_V0);
    /* S5 / F3 / W46: 401 and 403 stop detection */
    CHECK_EQ_INT(rsd_lms_catalog_from_response(&cat, RSD_LMS_TIER_V1, 401, auth, sizeof auth - 1, toks, NTOK), RSD_ERR_AUTH);
    CHECK_EQ_STR(cat.error.message, "Authentication required");
    CHECK_EQ_INT(rsd_lms_catalog_from_response(&cat, RSD_LMS_TIER_V0, 403, SL(""), toks, NTOK), RSD_ERR_AUTH);
    CHECK_EQ_STR(cat.error.message, "LM Studio authentication required");
    CHECK_EQ_INT(rsd_lms_catalog_from_response(&cat, RSD_LMS_TIER_V1, 401,
                 SL("{\"error\":{\"type\":\"invalid_request\",\"message\":\"bad token\"}}"), toks, NTOK), RSD_ERR_AUTH);
    CHECK_EQ_STR(cat.error.message, "bad token");
    CHECK_EQ_INT(rsd_lms_catalog_from_response(&cat, RSD_LMS_TIER_NONE, 200, SL("{}"), toks, NTOK), RSD_ERR_ARG);
    CHECK_EQ_STR(rsd_lms_tier_str(RSD_LMS_TIER_V1), "0.4+");
    CHECK_EQ_STR(rsd_lms_tier_str(99), "none");
}

static void test_lms_bad_shapes(void) {
    CHECK_EQ_INT(rsd_lms_parse_models(&cat, SL("{}"), toks, NTOK), RSD_ERR_JSON_TYPE);
    CHECK_EQ_INT(rsd_lms_parse_models(&cat, SL("[]"), toks, NTOK), RSD_ERR_JSON_TYPE);
    CHECK_EQ_INT(rsd_lms_parse_models(&cat, SL("{\"models\":null}"), toks, NTOK), RSD_ERR_JSON_TYPE);
    CHECK_EQ_INT(rsd_lms_parse_models(&cat, SL("{\"models\":{},\"data\":[]}"), toks, NTOK), 0);
    CHECK_EQ_INT(cat.tier, RSD_LMS_TIER_V0);
    CHECK_EQ_INT(rsd_lms_parse_models(&cat, SL("{\"models\":[],\"data\":[{\"id\":\"x\"}]}"), toks, NTOK), 0);
    CHECK_EQ_INT(cat.tier, RSD_LMS_TIER_V1);
    CHECK_EQ_INT(rsd_lms_parse_models(&cat, SL("{\"models\":[{\"key\":1},{\"key\":\"\"},{\"key\":\" \\t \"},{\"type\":\"llm\"},"
                                             "{\"key\":\"ok\",\"loaded_instances\":{\"id\":\"x\"},\"capabilities\":[1],"
                                             "\"max_context_length\":-4,\"size_bytes\":1.5}]}"), toks, NTOK), 1);
    CHECK_EQ_INT(cat.n_dropped, 4);
    CHECK(!cat.models[0].has_size && cat.models[0].max_context_length == 0 && cat.n_instances == 0);
    CHECK_EQ_INT(rsd_lms_parse_models(&cat, SL("{\"models\":["), toks, NTOK), RSD_ERR_TRUNCATED);
    CHECK_EQ_INT(rsd_lms_parse_models(NULL, SL("{}"), toks, NTOK), RSD_ERR_ARG);
}

static void test_lms_huge_catalog_capped(void) {
    size_t n = 0;
    int i, r;
    rsd_lms_resolution res;
    n += (size_t)snprintf(big + n, sizeof big - n, "{\"models\":[");
    for (i = 0; i < 600; i++)
        n += (size_t)snprintf(big + n, sizeof big - n,
                              "%s{\"key\":\"m%d\",\"loaded_instances\":[{\"id\":\"m%d\"},{\"id\":\"m%d:2\"}]}",
                              i ? "," : "", i, i, i);
    n += (size_t)snprintf(big + n, sizeof big - n, "]}");
    r = rsd_lms_parse_models(&cat, big, n, toks, NTOK);
    CHECK_EQ_INT(r, RSD_LMS_MAX_MODELS);
    CHECK_EQ_INT(cat.n_instances, RSD_LMS_MAX_INSTANCES);
    CHECK(cat.truncated);
    CHECK_EQ_INT(cat.n_entries, 600);
    CHECK_EQ_INT(cat.n_dropped, (600 - 256) + (2 * 256 - 64));
    CHECK(rsd_lms_resolve(&cat, rsd_str_c("m599"), rsd_str_c(""), NULL, 0, &res) == RSD_OK);
    CHECK_EQ_INT(res.state, RSD_LMS_UNKNOWN); /* truncated: the caller must not refuse on it */
    CHECK(rsd_lms_resolve(&cat, rsd_str_c("m200"), rsd_str_c(""), NULL, 0, &res) == RSD_OK);
    CHECK_EQ_INT(res.state, RSD_LMS_JIT); /* kept as a model, its instances were over the cap */
}

static void test_lms_escaped_keys(void) {
    static const char b[] = "{\"models\":[{\"key\":\"pub\\/m\\u00e9\",\"loaded_instances\":[{\"id\":\"pub\\/m\\u00e9:2\"}]},"
                            "{\"key\":\"pub/m\xc3\xa9\",\"loaded_instances\":[{\"id\":\"x\\u0000y\"}]}]}";
    REQUIRE(rsd_lms_parse_models(&cat, b, sizeof b - 1, toks, NTOK) == 1); /* folded: same decoded key */
    CHECK(S(cat.models[0].key, "pub/m\xc3\xa9"));
    CHECK_EQ_INT(cat.n_instances, 1);
    CHECK(S(cat.instances[0].id, "pub/m\xc3\xa9:2"));
    CHECK_EQ_INT(cat.n_dropped, 1);
}

/* lmstudio-instance-resolution.test.ts 2-6 and S15-S17 */
static void test_lms_resolve_cases(void) {
    rsd_lms_resolution r;
    rsd_str zbook_ids[2], dyn_ids[2];
    rsd_lms_peer peers[3];
    REQUIRE(rsd_lms_parse_models(&cat, F2_DYNAMO_FIRST, sizeof F2_DYNAMO_FIRST - 1, toks, NTOK) == 3);
    /* 2: a bare key resolves to this host's default without loading */
    CHECK_EQ_INT(rsd_lms_resolve(&cat, rsd_str_c("qwen3.8-27b"), rsd_str_c("qwen3.8-27b-dynamo"), NULL, 0, &r), RSD_OK);
    CHECK(r.state == RSD_LMS_INSTANCE && S(r.wire_id, "qwen3.8-27b-dynamo") && r.model == 0);
    CHECK_EQ_INT(rsd_lms_resolve(&cat, rsd_str_c("qwen3.8-27b"), rsd_str_c("qwen3.8-27b-zbook"), NULL, 0, &r), RSD_OK);
    CHECK(r.state == RSD_LMS_INSTANCE && S(r.wire_id, "qwen3.8-27b-zbook"));
    /* no default, no peers: the first instance */
    CHECK_EQ_INT(rsd_lms_resolve(&cat, rsd_str_c("qwen3.8-27b"), rsd_str_c(""), NULL, 0, &r), RSD_OK);
    CHECK(S(r.wire_id, "qwen3.8-27b-dynamo") && r.peer_mask == 0);
    /* the first instance with no LM Link peer: zbook's listing also has dynamo loaded */
    dyn_ids[0] = rsd_str_c("qwen3.8-27b-dynamo");
    peers[0].target_id = rsd_str_c("zbook");
    peers[0].instance_ids = dyn_ids;
    peers[0].n_instance_ids = 1;
    CHECK_EQ_INT(rsd_lms_resolve(&cat, rsd_str_c("qwen3.8-27b"), rsd_str_c(""), peers, 1, &r), RSD_OK);
    CHECK(S(r.wire_id, "qwen3.8-27b-zbook") && r.peer_mask == 0);
    /* 4: a catalogued key with no instances keeps server JIT */
    CHECK_EQ_INT(rsd_lms_resolve(&cat, rsd_str_c("coder-unloaded"), rsd_str_c(""), NULL, 0, &r), RSD_OK);
    CHECK(r.state == RSD_LMS_JIT && S(r.wire_id, "coder-unloaded") && r.model == 1 && r.instance < 0);
    /* 5: an explicitly selected cross-host instance is flagged as an LM Link peer */
    zbook_ids[0] = rsd_str_c("other");
    zbook_ids[1] = rsd_str_c("qwen3.8-27b-zbook");
    peers[0].instance_ids = zbook_ids;
    peers[0].n_instance_ids = 2;
    peers[1] = peers[0];                       /* the same target listed twice counts once */
    peers[2].target_id = rsd_str_c("third");
    peers[2].instance_ids = zbook_ids + 1;
    peers[2].n_instance_ids = 1;
    CHECK_EQ_INT(rsd_lms_resolve(&cat, rsd_str_c("qwen3.8-27b-zbook"), rsd_str_c(""), peers, 3, &r), RSD_OK);
    CHECK(r.state == RSD_LMS_INSTANCE && S(r.wire_id, "qwen3.8-27b-zbook"));
    CHECK_EQ_INT(r.peer_mask, 5);
    /* 6: unadvertised -> UNKNOWN, wire id = requested */
    CHECK_EQ_INT(rsd_lms_resolve(&cat, rsd_str_c("nope"), rsd_str_c(""), NULL, 0, &r), RSD_OK);
    CHECK(r.state == RSD_LMS_UNKNOWN && S(r.wire_id, "nope") && r.model == -1 && r.instance == -1);
    /* bad arguments */
    CHECK_EQ_INT(rsd_lms_resolve(&cat, rsd_str_c("x"), rsd_str_c(""), NULL, 1, &r), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_lms_resolve(&cat, rsd_str_c("x"), rsd_str_c(""), peers, RSD_LMS_MAX_PEERS + 1, &r), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_lms_resolve(NULL, rsd_str_c("x"), rsd_str_c(""), NULL, 0, &r), RSD_ERR_ARG);
}

/* S15: per model, an instance id match is tried before the key; the walk stops at
   the first model that matches either way. */
static void test_lms_resolve_walk_order(void) {
    static const char b[] = "{\"models\":[{\"key\":\"x\",\"loaded_instances\":[]},"
                            "{\"key\":\"y\",\"loaded_instances\":[{\"id\":\"x\"}]}]}";
    rsd_lms_resolution r;
    REQUIRE(rsd_lms_parse_models(&cat, b, sizeof b - 1, toks, NTOK) == 2);
    CHECK_EQ_INT(rsd_lms_resolve(&cat, rsd_str_c("x"), rsd_str_c(""), NULL, 0, &r), RSD_OK);
    CHECK(r.state == RSD_LMS_JIT && r.model == 0);
}

/* S27: residents are distinct keys with instances; ownership by instance id */
static void test_lms_residents_and_ownership(void) {
    static const char b[] =
        "{\"models\":[{\"key\":\"a\",\"size_bytes\":10,\"loaded_instances\":[{\"id\":\"a\"},{\"id\":\"a:clio\"}]},"
        "{\"key\":\"b\",\"loaded_instances\":[]},{\"key\":\"c\",\"loaded_instances\":[{\"id\":\"c\"}]},"
        "{\"key\":\"a\",\"loaded_instances\":[{\"id\":\"a:3\"}]}]}";
    rsd_resident r[4];
    rsd_str owned[1];
    owned[0] = rsd_str_c("a:clio");
    REQUIRE(rsd_lms_parse_models(&cat, b, sizeof b - 1, toks, NTOK) == 3);
    CHECK_EQ_INT(rsd_lms_residents(&cat, owned, 1, r, 4), 2);
    CHECK(S(r[0].model_id, "a") && r[0].loaded_by_us && r[0].has_size && r[0].size_bytes == 10);
    CHECK(S(r[1].model_id, "c") && !r[1].loaded_by_us && !r[1].has_size);
    CHECK_EQ_INT(rsd_lms_residents(&cat, NULL, 0, r, 1), RSD_ERR_BUFFER);
    CHECK_EQ_INT(rsd_lms_residents(&cat, NULL, 1, r, 4), RSD_ERR_ARG);
}

/* S31, W39: load replies, current and legacy shape; unload reply; errors */
static void test_lms_replies(void) {
    static rsd_lms_reply r;
    static const char load[] =
        "{\"type\":\"llm\",\"instance_id\":\"openai/gpt-oss-20b\",\"load_time_seconds\":9.099,\"status\":\"loaded\","
        "\"load_config\":{\"context_length\":16384,\"eval_batch_size\":512,\"flash_attention\":true,"
        "\"offload_kv_cache_to_gpu\":true,\"num_experts\":4}}";
    static const char legacy[] = "{\"model_instance_id\":\" m:2 \",\"config\":{\"context_length\":8192},\"load_time_seconds\":3}";
    static const char vram[] = "{\"error\":\"insufficient VRAM\"}";
    static const char nf[] = "{\"error\":{\"type\":\"model_not_found\",\"message\":\"Model 'x' not found\"}}";
    CHECK_EQ_INT(rsd_lms_parse_reply(&r, load, sizeof load - 1, toks, NTOK), RSD_OK);
    CHECK(S(r.instance_id, "openai/gpt-oss-20b") && S(r.status, "loaded") && r.type == RSD_LMS_TYPE_LLM);
    CHECK_EQ_INT(r.context_length, 16384);
    CHECK(r.has_load_time && r.load_time_ms == 9099);
    CHECK_EQ_INT(rsd_lms_parse_reply(&r, legacy, sizeof legacy - 1, toks, NTOK), RSD_OK);
    CHECK(S(r.instance_id, "m:2") && r.context_length == 8192 && r.load_time_ms == 3000);
    CHECK_EQ_INT(rsd_lms_parse_reply(&r, SL("{\"instance_id\":\"openai/gpt-oss-20b\"}"), toks, NTOK), RSD_OK);
    CHECK(S(r.instance_id, "openai/gpt-oss-20b") && !r.has_load_time && r.status.len == 0);
    CHECK_EQ_INT(rsd_lms_parse_reply(&r, SL("{\"unloaded\":\"k:clio\"}"), toks, NTOK), RSD_OK); /* F6 */
    CHECK(r.instance_id.len == 0);
    CHECK_EQ_INT(rsd_lms_parse_reply(&r, vram, sizeof vram - 1, toks, NTOK), RSD_ERR_SERVER_ERROR);
    CHECK_EQ_STR(r.error.message, "insufficient VRAM");
    CHECK_EQ_INT(rsd_lms_parse_reply(&r, nf, sizeof nf - 1, toks, NTOK), RSD_ERR_SERVER_ERROR);
    CHECK_EQ_STR(r.error.type, "model_not_found");
    CHECK_EQ_STR(r.error.message, "Model 'x' not found");
    CHECK_EQ_INT(rsd_lms_parse_reply(&r, SL("{\"instance_id\":5,\"load_time_seconds\":-1}"), toks, NTOK), RSD_OK);
    CHECK(r.instance_id.len == 0 && !r.has_load_time);
    CHECK_EQ_INT(rsd_lms_parse_reply(&r, SL("\"loaded\""), toks, NTOK), RSD_ERR_JSON_TYPE);
}

/* lmstudio.test.ts 12: the exact load body, only explicit fields */
static void test_lms_load_body_exact(void) {
    char b[512];
    rsd_lms_load_opts o;
    memset(&o, 0, sizeof o);
    CHECK(rsd_lms_load_body(b, sizeof b, rsd_str_c("coder-unloaded"), NULL) > 0);
    CHECK_EQ_STR(b, "{\"model\":\"coder-unloaded\",\"echo_load_config\":true}");
    CHECK(rsd_lms_load_body(b, sizeof b, rsd_str_c("coder-unloaded"), &o) > 0);
    CHECK_EQ_STR(b, "{\"model\":\"coder-unloaded\",\"echo_load_config\":true}");
    o.context_length = 32768;
    o.flash_attention = RSD_LMS_FLAG_TRUE;
    CHECK(rsd_lms_load_body(b, sizeof b, rsd_str_c("coder-unloaded"), &o) > 0);
    CHECK_EQ_STR(b, "{\"model\":\"coder-unloaded\",\"echo_load_config\":true,\"context_length\":32768,\"flash_attention\":true}");
    o.eval_batch_size = 512;
    o.num_experts = 4;
    o.offload_kv_cache_to_gpu = RSD_LMS_FLAG_FALSE;
    CHECK(rsd_lms_load_body(b, sizeof b, rsd_str_c("m"), &o) > 0);
    CHECK_EQ_STR(b, "{\"model\":\"m\",\"echo_load_config\":true,\"context_length\":32768,\"flash_attention\":true,"
                    "\"eval_batch_size\":512,\"num_experts\":4,\"offload_kv_cache_to_gpu\":false}");
    CHECK_EQ_INT(rsd_lms_load_body(b, 20, rsd_str_c("m"), &o), RSD_ERR_BUFFER);
    CHECK_EQ_INT(rsd_lms_load_body(b, sizeof b, rsd_str_c(""), &o), RSD_ERR_MODEL_ID);
    CHECK(rsd_lms_unload_body(b, sizeof b, rsd_str_c("coder-unloaded:clio")) > 0);
    CHECK_EQ_STR(b, "{\"instance_id\":\"coder-unloaded:clio\"}");
}

/* S1 */
static void test_lms_root_url(void) {
    char o[64];
    CHECK(rsd_root_url(rsd_str_c("http://h:1234/v1/"), o, sizeof o) == 13);
    CHECK_EQ_STR(o, "http://h:1234");
    CHECK(rsd_root_url(rsd_str_c("http://h:1234/v1"), o, sizeof o) > 0);
    CHECK_EQ_STR(o, "http://h:1234");
    CHECK(rsd_root_url(rsd_str_c("http://h:1234/"), o, sizeof o) > 0);
    CHECK_EQ_STR(o, "http://h:1234");
    CHECK(rsd_root_url(rsd_str_c("ws://h:1234"), o, sizeof o) > 0);
    CHECK_EQ_STR(o, "http://h:1234");
    CHECK(rsd_root_url(rsd_str_c("wss://h/v1/"), o, sizeof o) > 0);
    CHECK_EQ_STR(o, "https://h");
    CHECK(rsd_root_url(rsd_str_c("http://h/v1/v1"), o, sizeof o) > 0); /* one /v1 only */
    CHECK_EQ_STR(o, "http://h/v1");
    CHECK_EQ_INT(rsd_root_url(rsd_str_c("http://h:1234"), o, 13), RSD_ERR_BUFFER);
    CHECK_EQ_INT(rsd_root_url(rsd_str_c("http://h:1234"), NULL, 4), RSD_ERR_ARG);
    /* the one rule for every runtime: all trailing '/' around the "/v1", spaces, errors */
    CHECK(rsd_root_url(rsd_str_c(" http://h:8080//v1// "), o, sizeof o) > 0);
    CHECK_EQ_STR(o, "http://h:8080");
    CHECK_EQ_INT(rsd_root_url(rsd_str_c("http://h/?x"), o, sizeof o), RSD_ERR_URL);
    CHECK_EQ_INT(rsd_root_url(rsd_str_c("/v1/"), o, sizeof o), RSD_ERR_URL);
    CHECK_EQ_INT(rsd_root_url(rsd_str_c(""), o, sizeof o), RSD_ERR_URL);
}

/* rsd_decide on LM Studio facts (S27 + R27): JIT plans never evict up front;
   the fallback ranks our own keys first; the clamp sees the neighbours (6.5 1-3). */
static void test_lms_facts_into_decide(void) {
    static const char b[] =
        "{\"models\":[{\"key\":\"gemma\",\"loaded_instances\":[{\"id\":\"gemma\"}]},"
        "{\"key\":\"mine\",\"loaded_instances\":[{\"id\":\"mine:clio\"}]},"
        "{\"key\":\"qwen\",\"max_context_length\":262144,\"loaded_instances\":[]}]}";
    rsd_resident r[8];
    rsd_str owned[1];
    rsd_facts f;
    static rsd_plan p;
    int n;
    owned[0] = rsd_str_c("mine:clio");
    REQUIRE(rsd_lms_parse_models(&cat, b, sizeof b - 1, toks, NTOK) == 3);
    n = rsd_lms_residents(&cat, owned, 1, r, 8);
    REQUIRE(n == 2);
    memset(&f, 0, sizeof f);
    f.strategy = RSD_STRATEGY_JIT;
    f.keep = rsd_str_c("qwen");
    f.residents = r;
    f.n_residents = n;
    f.context_length = 262144;
    f.model_max_context = cat.models[2].max_context_length;
    REQUIRE(rsd_decide(&f, &p) == RSD_OK);
    CHECK_EQ_INT(p.decision, RSD_DECISION_LOAD);
    CHECK_EQ_INT(p.n_evict, 0);
    CHECK_EQ_INT(p.n_fallback, 2);
    CHECK(S(r[p.fallback[0]].model_id, "mine"));   /* ours first */
    CHECK_EQ_INT(p.load_context, 131072);            /* clamped beside gemma/mine */
    f.n_residents = 0;
    REQUIRE(rsd_decide(&f, &p) == RSD_OK);
    CHECK_EQ_INT(p.load_context, 262144);            /* alone: never clamped */
    f.context_length = 32768;
    f.n_residents = n;
    REQUIRE(rsd_decide(&f, &p) == RSD_OK);
    CHECK_EQ_INT(p.load_context, 32768);             /* never raised */
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    if (rsd_listing_init(&ol, ol_models, RSD_LISTING_MAX_MODELS, ol_arena, sizeof ol_arena) != RSD_OK) return 1;
    if (rsd_listing_init(&rl, rl_models, RSD_LISTING_MAX_MODELS, rl_arena, sizeof rl_arena) != RSD_OK) return 1;
    RUN(test_ollama_ps_wire_example);
    RUN(test_ollama_ps_maps_sizes_and_name_fallback);
    RUN(test_ollama_keep_matches_by_alias_and_normalised_name);
    RUN(test_ollama_name_normalise);
    RUN(test_ollama_ps_empty_null_and_bad_shapes);
    RUN(test_ollama_ps_hostile_entries_dropped);
    RUN(test_ollama_ps_huge_array_capped);
    RUN(test_ollama_ps_arena_exhaustion);
    RUN(test_ollama_deep_nesting_is_an_error);
    RUN(test_ollama_tags_wire_example);
    RUN(test_ollama_version);
    RUN(test_ollama_generate_replies);
    RUN(test_ollama_request_bodies);
    RUN(test_every_parser_duplicate_key_last_wins);
    RUN(test_every_parser_same_id_rule);
    RUN(test_every_parser_copies_its_strings);
    RUN(test_server_error_forms);
    RUN(test_server_error_truncates_on_utf8_boundary);
    RUN(test_lms_v1_wire_example);
    RUN(test_lms_v1_lm_link_duplicates_fold);
    RUN(test_lms_v1_duplicate_instance_ids_dedupe);
    RUN(test_lms_v0_lm_link_listing);
    RUN(test_lms_v0_state_variants);
    RUN(test_lms_openai_list);
    RUN(test_lms_tier_detection);
    RUN(test_lms_bad_shapes);
    RUN(test_lms_huge_catalog_capped);
    RUN(test_lms_escaped_keys);
    RUN(test_lms_resolve_cases);
    RUN(test_lms_resolve_walk_order);
    RUN(test_lms_residents_and_ownership);
    RUN(test_lms_replies);
    RUN(test_lms_load_body_exact);
    RUN(test_lms_root_url);
    RUN(test_lms_facts_into_decide);
    RUN(test_listings_parse_entry_by_entry);
    return RSD_TEST_END();
}
