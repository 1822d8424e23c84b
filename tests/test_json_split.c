/* The JSON splitter (rsd_json_split_*): a document read as it arrives gives the whole
   parse's verdict and rsd_json_each's elements whatever its split; the listing parsers,
   the reconcile and detection read their answers through it, in pieces. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include "rsd_test.h"
#include "reconcile_mem.h"

#define J(lit) lit, strlen(lit)

typedef struct seen {
    int n, begins;
    char keys[512];         /* "key:" per begin, "key" per element, joined */
    char els[4096];         /* each element's bytes, joined with '|' */
} seen;

static void on_el(void *user, rsd_str key, const rsd_json_doc *el) {
    seen *s = (seen *)user;
    size_t k = strlen(s->keys), e = strlen(s->els);
    if (!el) {
        s->begins++;
        snprintf(s->keys + k, sizeof s->keys - k, "%.*s:", (int)key.len, key.ptr);
        return;
    }
    s->n++;
    snprintf(s->keys + k, sizeof s->keys - k, "%.*s,", (int)key.len, key.ptr);
    snprintf(s->els + e, sizeof s->els - e, "%s%.*s", e ? "|" : "", (int)el->len, el->src);
    CHECK(el->toks[0].parent == -1);
}

/* doc fed in two pieces cut at `at` (or whole when at >= len), through a buffer of cap. */
static int split2(const char *doc, size_t at, size_t cap, seen *s, rsd_json_doc *top) {
    static char buf[1 << 16];
    static rsd_json_tok toks[512];
    rsd_json_split sp;
    size_t len = strlen(doc);
    memset(s, 0, sizeof *s);
    rsd_json_split_init(&sp, buf, cap, toks, 512, on_el, s);
    if (at > len) at = len;
    (void)rsd_json_split_feed(&sp, doc, at);
    (void)rsd_json_split_feed(&sp, doc + at, len - at);
    return rsd_json_split_end(&sp, top);
}

/* Every cut of every document: the same verdict, elements and top level as fed whole. */
static void test_every_cut_gives_the_whole_verdict(void) {
    static const char *const docs[] = {
        "{\"data\":[{\"id\":\"a\",\"v\":[1,2,{\"x\":\"]}\"}]},{\"id\":\"b\\\"]}[{\"}],\"object\":\"list\"}",
        "[1,\"two\",[3],{\"f\":4},true,null,-5.5e3]",
        "{\"a\":{\"b\":[1,2]},\"l\":[ \"x\" , \"y\" ],\"s\":\"[not a list]\"}",
        "{\"d\\u0061ta\":[{}],\"e\":[]}",
        "{\"data\":[{\"id\":\"\\u00e9\\n\"}] , \"n\" : 1 }",
        "  {\"data\" :\n[\n{\"id\":1}\n,\n{\"id\":2}\n]\n}  ",
        "\"a string\"", "42", "[]", "{}",
    };
    static const char *const bad[] = { /* with the code and offset the whole parse gives */
        "{\"data\":[1,]}", "{\"data\":[,1]}", "{\"data\":[1 2]}", "{\"data\":[1,,2]}", "{\"data\":[tru]}",
        "{\"data\":[1.]}", "{\"data\":[{\"a\":}]}", "{\"data\":[{]}", "{\"data\":[1}", "{\"data\":[1]]",
        "{\"a\" 1,\"data\":[x]}", "{\"data\":[\"\x01\"]}", "{\"data\":[1]", "{\"data\":[{\"a\":1}", "{\"data\":[\"ab",
        "[1,2", "{\"data\":[-]}", "{\"data\":[01]}", "{\"data\":[1x]}", "{\"data\":[1] x}",
        /* in the kept top level after lists, between them, or where a list is not one */
        "{\"data\":[1,2,3],\"n\" 1}", "{\"a\":[10,20],\"b\":[30] \"c\":1}", "{\"a\":[1],\"b\" [2],\"c\":[3]}",
        "{\"a\":[ 1 , 2 ],\"b\":{\"c\":[3,4],}}", "[1,2,3] x", "{\"a\":[1],\"b\":[2],\"c\":[3],,}",
        "{\"a\":[1],\"b\":[2,[3,[4]]],\"c\":[5],\"d\":[6]}}",
    };
    static rsd_json_tok wt[512];
    size_t i, at;
    for (i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        seen whole, cut;
        rsd_json_doc top, t2, ref;
        int want = split2(docs[i], (size_t)-1, 1 << 16, &whole, &top);
        int ref_rc = rsd_json_parse_top(&ref, docs[i], strlen(docs[i]), wt, 512);
        CHECK(want > 0);
        CHECK_EQ_INT(want + (rsd_json_type_of(&ref, 0) == RSD_JSON_ARRAY ? whole.n : 0), ref_rc);
        for (at = 0; at <= strlen(docs[i]); at++) {
            int got = split2(docs[i], at, 1 << 16, &cut, &t2);
            CHECK_EQ_INT(got, want);
            CHECK_EQ_STR(cut.els, whole.els);
            CHECK_EQ_STR(cut.keys, whole.keys);
            CHECK(t2.len == top.len && memcmp(t2.src, top.src, top.len) == 0);
        }
    }
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        seen s;
        rsd_json_doc top, ref;
        int want = rsd_json_parse_top(&ref, bad[i], strlen(bad[i]), wt, 512);
        CHECK(want < 0);
        for (at = 0; at <= strlen(bad[i]); at++) {
            int got = split2(bad[i], at, 1 << 16, &s, &top);
            if (got != want || top.err.offset != ref.err.offset)
                printf("  %s cut at %u: %d at %u, the whole parse %d at %u\n", bad[i], (unsigned)at, got,
                       (unsigned)top.err.offset, want, (unsigned)ref.err.offset);
            CHECK_EQ_INT(got, want);
            CHECK_EQ_INT(top.err.offset, ref.err.offset); /* the offending byte in the whole document */
        }
    }
}

/* What the splitter keeps: the top level with its lists as []; keys are raw; a later list
   of the same key begins again (the last wins for the readers). */
static void test_kept_top_level_and_keys(void) {
    seen s;
    rsd_json_doc top;
    CHECK(split2("{\"data\":[1],\"x\":{\"y\":[2]},\"data\":[{\"id\":\"b\"}]}", 5, 4096, &s, &top) > 0);
    CHECK(top.len == strlen("{\"data\":[],\"x\":{\"y\":[2]},\"data\":[]}") &&
          memcmp(top.src, "{\"data\":[],\"x\":{\"y\":[2]},\"data\":[]}", top.len) == 0);
    CHECK_EQ_STR(s.keys, "data:data,data:data,");
    CHECK_EQ_STR(s.els, "1|{\"id\":\"b\"}");
    CHECK_EQ_INT(s.begins, 2);
    CHECK(split2("[{\"a\":1},[2]]", 3, 4096, &s, &top) > 0);
    CHECK_EQ_STR(s.keys, ":,,"); /* a top-level array: an empty key */
    CHECK(split2("{\"d\\u0061ta\":[3]}", 4, 4096, &s, &top) > 0);
    CHECK_EQ_STR(s.keys, "d\\u0061ta:d\\u0061ta,"); /* raw */
}

/* Over the buffer: an element, or the top level, is a clear error, never cut. */
static void test_over_the_buffer(void) {
    static char buf[64];
    static rsd_json_tok toks[64];
    rsd_json_split sp;
    rsd_json_doc top;
    const char *el = "{\"data\":[{\"id\":\"0123456789012345678901234567890123456789012345678901234567890\"}]}";
    const char *tl = "{\"pad\":\"0123456789012345678901234567890123456789012345678901234567890\",\"data\":[]}";
    size_t i;
    for (i = 0; i < 2; i++) { /* in one piece and byte by byte */
        const char *d = i ? tl : el;
        size_t k, n = strlen(d);
        rsd_json_split_init(&sp, buf, sizeof buf, toks, 64, NULL, NULL);
        if (i) for (k = 0; k < n; k++) (void)rsd_json_split_feed(&sp, d + k, 1);
        else (void)rsd_json_split_feed(&sp, d, n);
        CHECK_EQ_INT(rsd_json_split_end(&sp, &top), RSD_ERR_BODY_TOO_LARGE);
        CHECK_EQ_STR(top.err.what, i ? "the top level is larger than the buffer" : "a list entry is larger than the buffer");
    }
    rsd_json_split_init(&sp, buf, sizeof buf, toks, 64, NULL, NULL); /* fits: 20 small entries in 64 bytes */
    for (i = 0; i < 20; i++) (void)rsd_json_split_feed(&sp, i ? ",{\"id\":12345}" : "{\"data\":[{\"id\":12345}", i ? 13 : 21);
    (void)rsd_json_split_feed(&sp, "]}", 2);
    CHECK(rsd_json_split_end(&sp, &top) > 0);
}

/* A real router's listing of 64 entries (1.1-1.3 KB each, 71 KB) through 8 KiB, in pieces
   of every size: the same listing as rsd_router_parse_models of the whole body. */
static void test_router_listing_of_64_through_8_kib(void) {
    static char body[80000], arena1[16384], arena2[16384], buf[8192];
    static rsd_listed_model m1[64], m2[64];
    static rsd_json_tok toks[256];
    rsd_listing a, b;
    rsd_json_split sp;
    rsd_json_doc top;
    size_t o = 0, step;
    int i;
    o += (size_t)snprintf(body + o, sizeof body - o, "{\"data\":[");
    for (i = 0; i < 64; i++)
        o += (size_t)snprintf(body + o, sizeof body - o,
            "%s{\"id\":\"unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF-UD-Q4_K_XL-long-model-name-%03d\","
            "\"aliases\":[],\"tags\":[\"pinned:false\",\"team:research-long-tag-name\"],\"object\":\"model\","
            "\"owned_by\":\"llamacpp\",\"created\":1796169133,\"status\":{\"value\":\"%s\",\"args\":["
            "\"/work/shared/llama.cpp/bin/llama-server\",\"--host\",\"127.0.0.1\",\"--min-p\",\"0.05\",\"--port\","
            "\"37565\",\"--repeat-penalty\",\"1.1\",\"--tags\",\"pinned:false,team:research-long-tag-name\","
            "\"--temperature\",\"0.7\",\"--top-k\",\"40\",\"--top-p\",\"0.95\",\"--batch-size\",\"64\",\"--ctx-size\","
            "\"256\",\"--model\",\"/tmp/stm/tiny-a.gguf\",\"--threads\",\"1\",\"--ubatch-size\",\"64\"],\"preset\":"
            "\"[x]\\nmin-p = 0.05\\nrepeat-penalty = 1.1\\ntemperature = 0.7\\ntop-k = 40\\ntop-p = 0.95\\n"
            "batch-size = 64\\nctx-size = 256\\nmodel = /tmp/stm/tiny-a.gguf\\nthreads = 1\\nubatch-size = 64\\n\\n\"},"
            "\"architecture\":{\"input_modalities\":[\"text\"],\"output_modalities\":[\"text\"]},\"source\":\"preset\","
            "\"can_remove\":false,\"meta\":{\"vocab_type\":1,\"n_vocab\":289,\"n_ctx\":256,\"n_ctx_train\":2048,"
            "\"n_embd\":64,\"n_params\":59648,\"size\":238592,\"ftype\":\"all F32\"}}",
            i ? "," : "", i, i % 3 ? "unloaded" : "loaded");
    o += (size_t)snprintf(body + o, sizeof body - o, "],\"object\":\"list\"}");
    CHECK(o > 64 * 1000); /* every entry over 1000 bytes, as a real one */
    REQUIRE(rsd_listing_init(&a, m1, 64, arena1, sizeof arena1) == RSD_OK);
    REQUIRE(rsd_listing_init(&b, m2, 64, arena2, sizeof arena2) == RSD_OK);
    CHECK_EQ_INT(rsd_router_parse_models(body, o, toks, 256, &a), RSD_OK);
    CHECK_EQ_INT(a.n, 64);
    for (step = 1; step <= 8192; step = step * 3 + 1) {
        size_t at;
        rsdi_listing_reset(&b);
        rsd_json_split_init(&sp, buf, sizeof buf, toks, 256, rsdi_router_list_el, &b);
        for (at = 0; at < o; at += step) (void)rsd_json_split_feed(&sp, body + at, o - at < step ? o - at : step);
        CHECK_EQ_INT(rsdi_router_list_end(&b, rsd_json_split_end(&sp, &top), &top), RSD_OK);
        CHECK_EQ_INT(b.n, a.n);
        CHECK(b.arena_used == a.arena_used && memcmp(arena1, arena2, a.arena_used) == 0);
        for (i = 0; i < a.n && i < b.n; i++) {
            CHECK(rsd_str_eq(a.models[i].id, b.models[i].id));
            CHECK_EQ_INT(a.models[i].state, b.models[i].state);
            CHECK_EQ_INT(a.models[i].n_tags, b.models[i].n_tags);
            CHECK_EQ_INT(a.models[i].size_bytes, b.models[i].size_bytes);
        }
    }
}

/* Duplicate lists: the last wins in every listing parser, whatever comes between. */
static void test_duplicate_lists_the_last_wins(void) {
    static char arena[4096];
    static rsd_listed_model m[8];
    static rsd_json_tok toks[256];
    static rsd_lms_catalog cat;
    rsd_listing l;
    REQUIRE(rsd_listing_init(&l, m, 8, arena, sizeof arena) == RSD_OK);
    CHECK_EQ_INT(rsd_router_parse_models(J("{\"data\":[{\"id\":\"a\",\"status\":{\"value\":\"loaded\"}}],"
                                         "\"data\":[{\"id\":\"b\",\"status\":{\"value\":\"loaded\"}}]}"), toks, 256, &l), RSD_OK);
    CHECK_EQ_INT(l.n, 1);
    CHECK(l.n == 1 && rsd_str_eq_c(l.models[0].id, "b"));
    CHECK_EQ_INT(rsd_router_parse_models(J("{\"data\":[{\"id\":\"a\",\"status\":{\"value\":\"loaded\"}}],\"data\":5}"),
                                         toks, 256, &l), RSD_OK);
    CHECK_EQ_INT(l.n, 0); /* the last "data" is no list */
    CHECK_EQ_INT(rsd_ollama_ps_listing(J("{\"models\":[{\"name\":\"a\"}],\"models\":[{\"name\":\"b\"},{\"name\":\"c\"}]}"),
                                       toks, 256, &l), RSD_OK);
    CHECK_EQ_INT(l.n, 2);
    CHECK_EQ_INT(rsd_ollama_ps_listing(J("{\"models\":[{\"name\":\"a\"}],\"models\":null}"), toks, 256, &l), RSD_OK);
    CHECK_EQ_INT(l.n, 0);
    /* LM Studio: a "models" list wins over "data" in either order */
    CHECK_EQ_INT(rsd_lms_parse_models(&cat, J("{\"data\":[{\"id\":\"x\"}],\"models\":[{\"key\":\"k\",\"type\":\"llm\"}]}"),
                                      toks, 256), 1);
    CHECK_EQ_INT(cat.tier, RSD_LMS_TIER_V1);
    CHECK_EQ_INT(rsd_lms_parse_models(&cat, J("{\"models\":[{\"key\":\"k\",\"type\":\"llm\"}],\"data\":[{\"id\":\"x\"}]}"),
                                      toks, 256), 1);
    CHECK_EQ_INT(cat.tier, RSD_LMS_TIER_V1);
    CHECK_EQ_INT(rsd_lms_parse_models(&cat, J("{\"data\":[{\"id\":\"x\"}],\"data\":[{\"id\":\"y\"},{\"id\":\"z\"}]}"),
                                      toks, 256), 2);
    CHECK_EQ_INT(cat.tier, RSD_LMS_TIER_V0);
}

/* A reconcile given its listing in pieces (rsd_reconcile_body, then the feed) acts as one
   given it whole; an error body is kept whole for its reader. */
static void test_reconcile_takes_pieces(void) {
    static rsd_reconcile *r;
    rsd_reconcile_desc d;
    rsd_step s;
    const char *body = "{\"data\":[{\"id\":\"a\",\"status\":{\"value\":\"loaded\"}},{\"id\":\"b\",\"status\":{\"value\":\"unloaded\"}}],"
                       "\"object\":\"list\"}";
    size_t k, n = strlen(body);
    memset(&d, 0, sizeof d);
    d.base_url = "http://127.0.0.1:8080";
    d.keep = "a";
    d.capacity_known = true;
    d.max_instances = 4;
    REQUIRE(rc_init(&r, NULL) == RSD_OK);
    REQUIRE(rsd_reconcile_begin(r, &d, 1) == RSD_OK);
    s = rsd_reconcile_next(r, 1);
    REQUIRE(s.kind == RSD_STEP_HTTP && s.http.op == RSD_OP_LIST);
    for (k = 0; k < n; k++) CHECK_EQ_INT(rsd_reconcile_body(r, 200, body + k, 1), RSD_OK);
    CHECK_EQ_INT(rsd_reconcile_feed(r, RSD_OK, 200, NULL, 0, 1), RSD_OK);
    CHECK_EQ_INT(r->result.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(r->snap.n, 2);
    rc_free(&r);
    /* a 500 answer, in pieces: its error message is quoted */
    REQUIRE(rc_init(&r, NULL) == RSD_OK);
    REQUIRE(rsd_reconcile_begin(r, &d, 1) == RSD_OK);
    s = rsd_reconcile_next(r, 1);
    REQUIRE(s.kind == RSD_STEP_HTTP);
    CHECK_EQ_INT(rsd_reconcile_body(r, 500, "{\"error\":{\"mess", 15), RSD_OK);
    CHECK_EQ_INT(rsd_reconcile_body(r, 500, "age\":\"boom\"}}", 13), RSD_OK);
    CHECK_EQ_INT(rsd_reconcile_feed(r, RSD_OK, 500, NULL, 0, 1), RSD_OK);
    CHECK_EQ_INT(r->result.outcome, RSD_OUTCOME_DEGRADED);
    CHECK(strstr(r->result.message, "HTTP 500") != NULL);
    CHECK_EQ_INT(rsd_reconcile_body(r, 200, "x", 1), RSD_ERR_STATE); /* no step outstanding */
    rc_free(&r);
}

/* A listing answer cut off after its first entries were read (the transport fails after
   the head): the listing it went into is empty, never partial, and not the last read. */
static void test_cut_listing_is_never_partial(void) {
    static rsd_reconcile *r;
    rsd_reconcile_desc d;
    rsd_step s;
    const char *list = "{\"data\":[{\"id\":\"a\",\"status\":{\"value\":\"loaded\"}},{\"id\":\"b\",\"status\":{\"value\":\"unloaded\"}}]}";
    static char cut[4096];
    rsd_reconcile_limits lim;
    uint64_t now = 1;
    int guard, polls = 0, i;
    size_t o = 0;
    o += (size_t)snprintf(cut + o, sizeof cut - o, "{\"data\":[");
    for (i = 0; i < 40; i++) /* 40 entries, over the 1 KiB buffer: read as they arrive, then cut */
        o += (size_t)snprintf(cut + o, sizeof cut - o, "{\"id\":\"m%02d\",\"status\":{\"value\":\"loaded\"}},", i);
    o += (size_t)snprintf(cut + o, sizeof cut - o, "{\"id\":\"b\",\"sta");
    memset(&lim, 0, sizeof lim);
    lim.max_body_bytes = 1024;
    memset(&d, 0, sizeof d);
    d.base_url = "http://127.0.0.1:8080";
    d.keep = "b";
    d.capacity_known = true;
    d.max_instances = 4;
    REQUIRE(rc_init(&r, &lim) == RSD_OK);
    REQUIRE(rsd_reconcile_begin(r, &d, now) == RSD_OK);
    for (guard = 0; guard < 20 && !polls; guard++) {
        s = rsd_reconcile_next(r, now);
        if (s.kind == RSD_STEP_WAIT) { now = s.wake_ms > now ? s.wake_ms : now + 1; continue; }
        REQUIRE(s.kind == RSD_STEP_HTTP);
        if (s.http.op == RSD_OP_LOAD) { (void)rsd_reconcile_feed(r, RSD_OK, 200, "{\"success\":true}", 16, now); continue; }
        REQUIRE(s.http.op == RSD_OP_LIST);
        if (r->phase == RSDI_PH_LIST) { (void)rsd_reconcile_feed(r, RSD_OK, 200, list, strlen(list), now); continue; }
        polls++; /* the wait's poll: its answer breaks off after entry a */
        CHECK_EQ_INT(rsd_reconcile_body(r, 200, cut, o), RSD_OK);
        CHECK_EQ_INT(r->poll.n, 40); /* read as it arrived */
        CHECK_EQ_INT(rsd_reconcile_feed(r, RSD_ERR_CLOSED, 200, NULL, 0, now), RSD_OK);
        CHECK_EQ_INT(r->poll.n, 0);
        CHECK(r->last_list != &r->poll);
    }
    CHECK_EQ_INT(polls, 1);
    rc_free(&r);
}

/* Detection: a 2xx answer over its buffer that is no listing (a single-model server's
   /props with a long chat template) matches nothing and the probes go on; a listing over
   it is read as it arrives. */
static void test_detection_over_the_buffer(void) {
    static rsd_json_tok toks[256];
    static char buf[1024], big[4096];
    static rsd_detect d;
    rsd_step s;
    size_t o = 0;
    int i;
    memset(&d, 0, sizeof d);
    d.toks = toks;
    d.n_toks = 256;
    d.buf = buf;
    d.buf_cap = sizeof buf;
    REQUIRE(rsd_detect_begin(&d, "http://127.0.0.1:1", NULL, 0, 100000, 1) == RSD_OK);
    s = rsd_detect_next(&d, 1); /* /props: a long chat template */
    REQUIRE(s.kind == RSD_STEP_HTTP && strstr(s.http.url, "/props"));
    o += (size_t)snprintf(big + o, sizeof big - o, "{\"chat_template\":\"");
    for (i = 0; i < 2000; i++) big[o++] = 'x';
    o += (size_t)snprintf(big + o, sizeof big - o, "\",\"role\":\"router\"}");
    CHECK_EQ_INT(rsd_detect_body(&d, 200, big, o), RSD_OK);
    CHECK_EQ_INT(rsd_detect_feed(&d, RSD_OK, 200, NULL, 0, NULL, 1), RSD_OK);
    s = rsd_detect_next(&d, 1);
    REQUIRE(s.kind == RSD_STEP_HTTP && strstr(s.http.url, "/api/version")); /* the next probe */
    CHECK_EQ_INT(rsd_detect_feed(&d, RSD_OK, 404, NULL, 0, NULL, 1), RSD_OK);
    s = rsd_detect_next(&d, 1);
    REQUIRE(s.kind == RSD_STEP_HTTP && strstr(s.http.url, "/api/v1/models"));
    o = 0;
    o += (size_t)snprintf(big + o, sizeof big - o, "{\"models\":[");
    for (i = 0; i < 40; i++) o += (size_t)snprintf(big + o, sizeof big - o, "%s{\"key\":\"model-%02d\",\"type\":\"llm\"}", i ? "," : "", i);
    o += (size_t)snprintf(big + o, sizeof big - o, "]}");
    CHECK(o > sizeof buf);
    for (i = 0; i < (int)o; i += 100) CHECK_EQ_INT(rsd_detect_body(&d, 200, big + i, o - (size_t)i < 100 ? o - (size_t)i : 100), RSD_OK);
    CHECK_EQ_INT(rsd_detect_feed(&d, RSD_OK, 200, NULL, 0, NULL, 1), RSD_OK);
    s = rsd_detect_next(&d, 1);
    CHECK_EQ_INT(s.kind, RSD_STEP_DONE);
    CHECK(d.runtime == rsd_runtime_lmstudio());
    CHECK(!d.first_listing); /* read as it arrived: not kept for the reconcile */
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    RUN(test_every_cut_gives_the_whole_verdict);
    RUN(test_kept_top_level_and_keys);
    RUN(test_over_the_buffer);
    RUN(test_router_listing_of_64_through_8_kib);
    RUN(test_duplicate_lists_the_last_wins);
    RUN(test_reconcile_takes_pieces);
    RUN(test_cut_listing_is_never_partial);
    RUN(test_detection_over_the_buffer);
    return RSD_TEST_END();
}
