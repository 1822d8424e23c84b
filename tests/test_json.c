/* JSON: strict parser (JSONTestSuite-style y/n/t cases, every input right before a
   PROT_NONE page), truncation, count pass, tree links, limits, accessors, writer. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include "rsd_test.h"
#include "guard_page.h"
#include <math.h>
#if !defined(_WIN32)
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

/* ---- guard page: input ends exactly where an unreadable page begins ---- */
static unsigned char *g_pages;
static size_t g_page;

static const char *guarded(const char *s, size_t n) {
    if (!g_pages && !(g_pages = rsdt_guard(1, &g_page))) return NULL;
    if (n > g_page) return NULL;
    memcpy(g_pages + g_page - n, s, n);
    return (const char *)(g_pages + g_page - n);
}

/* Structural invariants of a successful parse; returns 1 when all hold. */
static int tree_ok(const rsd_json_doc *d) {
    uint32_t i;
    const rsd_json_tok *t = d->toks;
    for (i = 0; i < d->count; i++) {
        int c, kids = 0, last = -1;
        if (t[i].type == RSD_JSON_INVALID || t[i].type >= RSD_JSON_TYPE_NUM) return 0;
        if (t[i].start > t[i].end || t[i].end > d->len) return 0;
        if (i == 0 ? t[i].parent != -1 : (t[i].parent < 0 || t[i].parent >= (int32_t)i)) return 0;
        if (t[i].next <= (int32_t)i || t[i].next > (int32_t)d->count) return 0;
        if (t[i].parent >= 0 && t[i].next > t[t[i].parent].next) return 0;
        if (t[i].type == RSD_JSON_STRING) {
            if (t[i].start == 0 || d->src[t[i].start - 1] != '"' || d->src[t[i].end] != '"') return 0;
            if ((t[i].flags & RSD_JSON_F_KEY) &&
                (t[i].size != 1 || t[t[i].parent].type != RSD_JSON_OBJECT)) return 0;
        }
        if (t[i].type == RSD_JSON_ARRAY || t[i].type == RSD_JSON_OBJECT) {
            char open = t[i].type == RSD_JSON_ARRAY ? '[' : '{';
            if (d->src[t[i].start] != open || d->src[t[i].end - 1] != open + 2) return 0;
        }
        if (t[i].type == RSD_JSON_OBJECT || t[i].type == RSD_JSON_ARRAY ||
            (t[i].flags & RSD_JSON_F_KEY)) {
            for (c = rsd_json_child(d, (int)i); c >= 0; c = rsd_json_next(d, c)) {
                if (t[c].parent != (int32_t)i) return 0;
                if (t[i].type == RSD_JSON_OBJECT && !(t[c].flags & RSD_JSON_F_KEY)) return 0;
                kids++;
                last = c;
            }
            if ((uint32_t)kids != t[i].size) return 0;
            if (kids ? t[last].next != t[i].next : t[i].next != (int32_t)i + 1) return 0;
        } else if (t[i].size != 0 || t[i].next != (int32_t)i + 1) return 0;
    }
    return d->count > 0 && t[0].next == (int32_t)d->count;
}

/* ---- JSONTestSuite-style cases ---- */
typedef struct jcase { const char *s; size_t n; int want; } jcase;
#define Y(s) {s, sizeof(s) - 1, RSD_OK}
#define N(s) {s, sizeof(s) - 1, RSD_ERR_JSON}
#define T(s) {s, sizeof(s) - 1, RSD_ERR_TRUNCATED}

static const jcase cases[] = {
    /* y_: accepted */
    Y("[]"), Y("{}"), Y("[[]]"), Y(" [1] "), Y("\"a\""), Y("0"), Y("-0"), Y("1.5e10"),
    Y("-1E-2"), Y("1e+2"), Y("true"), Y("false"), Y("null"), Y(" \t\r\n[ \t\r\n] \t\r\n"),
    Y("{\"a\":1,\"b\":[true,false,null]}"), Y("\"\\u00e9\""), Y("\"\\uD83D\\uDE00\""),
    Y("\"\xC3\xA9\""), Y("\"\xE2\x82\xAC\""), Y("\"\xF0\x9F\x98\x80\""), Y("\"\xF4\x8F\xBF\xBF\""),
    Y("\"\xEF\xBF\xBF\""), Y("\"\xED\x9F\xBF\""), Y("\"\xEE\x80\x80\""), Y("\"\\u0000\""),
    Y("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\""), Y("[1,2,3]"), Y("{\"\":0}"), Y("\"\x7F\""),
    Y("[-0.0e-0]"), Y("123456789012345678901234567890"), Y("{\"a\":{\"b\":{\"c\":[]}}}"),
    Y("\"\\uDBFF\\uDFFF\""), Y("\"\\uFFFF\""), Y("[\"\"]"), Y("\"\\u002F\""), Y("[1e999]"),
    Y("[0.5,-0.5,0e0,0E+1,10,1e-0]"), Y("{\"a\":[],\"b\":{}}"), Y("\"\\uD834\\uDD1E x\""),
    Y("[\"a\\u0041b\"]"), Y("{\"k\" : \"v\" , \"k2\" :\t[ ]\n}"),
    /* n_: rejected (RSD_ERR_JSON) */
    N("[1,]"), N("{\"a\":1,}"), N("[,1]"), N("[1,,2]"), N("01"), N("-01"), N("00"), N("[1.]"),
    N(".5"), N("+1"), N("[1e]"), N("[1e+]"), N("NaN"), N("Infinity"), N("-Infinity"),
    N("[NaN]"), N("\"\x01\""), N("\"\t\""), N("\"\x1F\""), N("\"\\x\""), N("\"\\u12\""),
    N("\"\\uD800\""), N("\"\\uDC00\""), N("\"\\uDC00\\uD800\""), N("\"\\uD800\\u0041\""),
    N("\"\\uD800x\""), N("\"\\uD800\\n\""), N("\"\xC0\x80\""), N("\"\xC1\xBF\""),
    N("\"\xE0\x80\x80\""), N("\"\xE0\x9F\xBF\""), N("\"\xF0\x80\x80\x80\""),
    N("\"\xF0\x8F\xBF\xBF\""), N("\"\xED\xA0\x80\""), N("\"\xED\xBF\xBF\""),
    N("\"\xF4\x90\x80\x80\""), N("\"\xF5\x80\x80\x80\""), N("\"\xFF\""), N("\"\x80\""),
    N("\"\xC3\""), N("\"\xE2\x82\""), N("\"\xC3\x28\""), N("[1 2]"), N("{\"a\" 1}"),
    N("{\"a\":}"), N("{1:2}"), N("{'a':1}"), N("['a']"), N("[1]x"), N("[1] [2]"), N("trux"),
    N("True"), N("]"), N("}"), N("[}"), N("{]"), N("{\"a\":1]"), N("[1}"), N("\"a\"b"),
    N("1 2"), N("\0"), N("[1]\0"), N("/* */[]"), N("[0x1]"), N("[1.e1]"), N("[-]"), N("[-a]"),
    N("[--1]"), N("{\"a\":1 \"b\":2}"), N("\xEF\xBB\xBF[]"), N("{,}"), N("[\x0C]"),
    N("[\xC2\xA0]"), N("[\"\\u00G0\"]"), N("\"\\uD83D\\uDE0\""), N("[.1]"), N("[1.2.3]"),
    N("[1e1.5]"), N("[1e-+1]"), N("[Inf]"), N("{\"a\":1}}"), N("[\"a\",]"), N("{\"a\"}"),
    N("{\"a\":1:2}"), N("[\"\\'\"]"), N("[\"\\U0041\"]"), N("[\"\\\0\"]"), N("nulll"),
    N("[true false]"), N("{\"a\":1,\"a\"}"), N("[1,]   "),
    /* t_: input ends early (RSD_ERR_TRUNCATED) */
    T(""), T("   "), T("["), T("{"), T("[1"), T("[1,"), T("{\"a\""), T("{\"a\":"),
    T("{\"a\":1"), T("\"a"), T("\"\\"), T("\"\\u12"), T("\"\\uD83D"), T("\"\\uD83D\\"),
    T("\"\\uD83D\\u"), T("\"\\uD83D\\uDE"), T("tru"), T("nul"), T("f"), T("-"), T("1."),
    T("1e"), T("1e+"), T("\"\xC3"), T("\"\xE2\x82"), T("\"\xF0\x9F\x98"), T("[[[]]"),
    T("{\"a\":[1,{\"b\":"),
};

static int expect_ok(int r, int want) { return want == RSD_OK ? r > 0 : r == want; }

static void test_cases(void) {
    size_t i, ny = 0, nn = 0, nt = 0;
    rsd_json_tok toks[256];
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const jcase *c = &cases[i];
        const char *s = guarded(c->s, c->n);
        rsd_json_doc d, dc;
        int r, rc;
        REQUIRE(s != NULL);
        r = rsd_json_parse(&d, s, c->n, toks, 256);
        rc = rsd_json_parse(&dc, s, c->n, NULL, 0);
        if (!expect_ok(r, c->want)) {
            printf("  case %u \"%.*s\": got %s (%s at %u:%u), want %s\n", (unsigned)i, (int)c->n,
                   c->s, rsd_result_name(r), d.err.what, d.err.line, d.err.col,
                   rsd_result_name(c->want));
            rsdt_cur_failed = 1;
            continue;
        }
        CHECK_EQ_INT(rc, r);
        if (r > 0) {
            CHECK(tree_ok(&d));
            CHECK_EQ_INT(d.err.code, RSD_OK);
            CHECK_EQ_INT(toks[r].type, RSD_JSON_INVALID); /* sentinel */
            ny++;
        } else {
            CHECK_EQ_INT(d.err.code, r);
            CHECK(d.err.offset <= c->n);
            CHECK(d.err.what != NULL && d.err.line >= 1 && d.err.col >= 1);
            CHECK_EQ_INT(dc.err.offset, d.err.offset);
            if (r == RSD_ERR_TRUNCATED) { CHECK_EQ_INT(d.err.offset, c->n); nt++; }
            else {
                /* the input before the error byte is a valid prefix; through it, the same error */
                size_t off = d.err.offset;
                int rp = rsd_json_parse(&dc, guarded(c->s, off), off, toks, 256);
                CHECK(rp == RSD_ERR_TRUNCATED || rp > 0);
                CHECK_EQ_INT(rsd_json_parse(&dc, guarded(c->s, off + 1), off + 1, toks, 256), r);
                CHECK_EQ_INT(dc.err.offset, off);
                nn++;
            }
        }
    }
    CHECK(ny >= 40 && nn >= 80 && nt >= 20);
}

/* Valid documents whose every strict prefix is a truncation. */
static const char *const whole_docs[] = {
    "{\"object\":\"list\",\"data\":[{\"id\":\"org/m-1-Q4_K_M.gguf\",\"object\":\"model\","
    "\"created\":1760000000,\"status\":{\"value\":\"loaded\",\"args\":[\"--port\",\"50001\"]},"
    "\"tags\":[],\"failed\":true,\"x\":null,\"y\":-1.5e-3}]}",
    "[\"\\uD83D\\uDE00\\u00e9\\n\",\"\xF0\x9F\x98\x80\xE2\x82\xAC\xC3\xA9\",false,null,{}]",
    "\"a string with \\\"escapes\\\" and \xE2\x82\xAC\"",
    "[[[[[[[[0]]]]]]]]",
    "{ \"spaced\" : [ 1 , 2 ] , \"z\" : { } }",
    "true", "false", "null",
};

static void test_truncated_prefixes(void) {
    size_t i, k;
    rsd_json_tok toks[128];
    for (i = 0; i < sizeof whole_docs / sizeof whole_docs[0]; i++) {
        const char *doc = whole_docs[i];
        size_t n = strlen(doc);
        rsd_json_doc d;
        const char *s = guarded(doc, n);
        REQUIRE(s != NULL);
        CHECK(rsd_json_parse(&d, s, n, toks, 128) > 0);
        for (k = 0; k < n; k++) {
            int r;
            s = guarded(doc, k);
            r = rsd_json_parse(&d, s, k, toks, 128);
            if (r != RSD_ERR_TRUNCATED) {
                printf("  doc %u prefix %u: %s\n", (unsigned)i, (unsigned)k, rsd_result_name(r));
                rsdt_cur_failed = 1;
            }
            CHECK_EQ_INT(rsd_json_parse(&d, s, k, NULL, 0), RSD_ERR_TRUNCATED);
        }
    }
}

static void test_tree_and_iteration(void) {
    static const char src[] = "{\"a\":[1,[2,3],{\"x\":4}],\"b\":{\"c\":\"d\",\"e\":[]},\"f\":5}";
    rsd_json_tok toks[64];
    rsd_json_doc d;
    int r = rsd_json_parse(&d, src, sizeof src - 1, toks, 64), a, b, k, e, n = 0;
    int64_t v = 0;
    REQUIRE(r == 18);
    CHECK(tree_ok(&d));
    CHECK_EQ_INT(rsd_json_type_of(&d, 0), RSD_JSON_OBJECT);
    CHECK_EQ_INT(rsd_json_size(&d, 0), 3);
    a = rsd_json_find(&d, 0, "a");
    b = rsd_json_find(&d, 0, "b");
    CHECK_EQ_INT(rsd_json_type_of(&d, a), RSD_JSON_ARRAY);
    CHECK_EQ_INT(rsd_json_size(&d, a), 3);
    /* skipping subtrees: elements of a are 1, [2,3], {"x":4} */
    e = rsd_json_child(&d, a);
    CHECK(rsd_json_int64(&d, e, &v) == RSD_OK && v == 1);
    e = rsd_json_next(&d, e);
    CHECK_EQ_INT(rsd_json_type_of(&d, e), RSD_JSON_ARRAY);
    e = rsd_json_next(&d, e);
    CHECK_EQ_INT(rsd_json_type_of(&d, e), RSD_JSON_OBJECT);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, e, "x"), &v) == RSD_OK && v == 4);
    CHECK_EQ_INT(rsd_json_next(&d, e), -1);
    CHECK_EQ_INT(rsd_json_at(&d, a, 2), e);
    CHECK_EQ_INT(rsd_json_at(&d, a, 3), -1);
    CHECK_EQ_INT(rsd_json_type_of(&d, rsd_json_find(&d, b, "e")), RSD_JSON_ARRAY);
    CHECK_EQ_INT(rsd_json_child(&d, rsd_json_find(&d, b, "e")), -1);
    CHECK(rsd_json_str_eq(&d, rsd_json_find(&d, b, "c"), "d"));
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, 0, "f"), &v) == RSD_OK && v == 5);
    CHECK_EQ_INT(rsd_json_find(&d, 0, "g"), -1);
    CHECK_EQ_INT(rsd_json_find(&d, a, "a"), -1); /* not an object */
    /* key iteration and parents */
    for (k = rsd_json_child(&d, 0); k >= 0; k = rsd_json_next(&d, k)) {
        CHECK_EQ_INT(rsd_json_parent(&d, k), 0);
        CHECK_EQ_INT(rsd_json_parent(&d, rsd_json_child(&d, k)), k);
        n++;
    }
    CHECK_EQ_INT(n, 3);
    CHECK(rsd_json_view(&d, a).len == 17 && memcmp(rsd_json_view(&d, a).ptr, "[1,[2,3],", 9) == 0);
    /* out of range indices are harmless */
    CHECK_EQ_INT(rsd_json_type_of(&d, -1), RSD_JSON_INVALID);
    CHECK_EQ_INT(rsd_json_type_of(&d, r), RSD_JSON_INVALID);
    CHECK_EQ_INT(rsd_json_next(&d, 0), -1);
    CHECK_EQ_INT(rsd_json_child(&d, 99), -1);
    CHECK(rsd_json_view(&d, 99).len == 0);
}

/* The top level alone, then its members and elements one at a time: a list far longer
   than the tokens held parses entry by entry; the whole input is still validated; an
   element over the tokens left is RSD_ERR_JSON_TOKENS. */
static void test_top_level_and_entries(void) {
    static char big[64 * 80 + 64];
    rsd_json_tok toks[24];
    rsd_json_doc top, el, sub;
    size_t pos = 0, o = 0;
    int i, n, r, arr, seen = 0;
    bool b = false;
    o += (size_t)snprintf(big + o, sizeof big - o, "{\"data\" : [ ");
    for (i = 0; i < 64; i++)
        o += (size_t)snprintf(big + o, sizeof big - o, "%s{\"id\":\"m%d\",\"st\":{\"v\":[1,2,{\"x\":true}]}}", i ? " , " : "", i);
    o += (size_t)snprintf(big + o, sizeof big - o, "],\"object\":\"list\",\"e\":{\"message\":\"m\"},\"s\":\"str\",\"n\":-1.5e3}");
    CHECK(rsd_json_parse(&top, big, o, toks, 24) == RSD_ERR_JSON_TOKENS); /* all of it does not fit */
    n = rsd_json_parse_top(&top, big, o, toks, 24);
    CHECK_EQ_INT(n, 11); /* root, five keys, five values */
    CHECK(tree_ok(&top));
    arr = rsd_json_find(&top, 0, "data");
    CHECK_EQ_INT(rsd_json_type_of(&top, arr), RSD_JSON_ARRAY);
    CHECK_EQ_INT(rsd_json_child(&top, arr), -1); /* kept without its elements */
    CHECK(rsd_json_str_eq(&top, rsd_json_find(&top, 0, "object"), "list"));
    while ((r = rsd_json_each(&top, arr, &pos, &el)) > 0) {
        char id[16];
        size_t len = 0;
        CHECK_EQ_INT(el.count, 12);
        CHECK(tree_ok(&el));
        CHECK(el.toks == toks + n);
        CHECK_EQ_INT(rsd_json_str(&el, rsd_json_find(&el, 0, "id"), id, sizeof id, &len), RSD_OK);
        CHECK(atoi(id + 1) == seen);
        CHECK_EQ_INT(rsd_json_bool(&el, rsd_json_find(&el, rsd_json_at(&el, rsd_json_find(&el, rsd_json_find(&el, 0, "st"), "v"), 2), "x"), &b), RSD_OK);
        CHECK(b);
        seen++;
    }
    CHECK_EQ_INT(r, 0);
    CHECK_EQ_INT(seen, 64);
    CHECK_EQ_INT(rsd_json_each(&top, arr, &pos, &el), 0); /* stays at the end */
    CHECK_EQ_INT(rsd_json_expand(&top, rsd_json_find(&top, 0, "e"), &sub), RSD_OK);
    CHECK(rsd_json_str_eq(&sub, rsd_json_find(&sub, 0, "message"), "m"));
    CHECK_EQ_INT(rsd_json_expand(&top, rsd_json_find(&top, 0, "s"), &sub), RSD_OK); /* a scalar too */
    CHECK(rsd_json_str_eq(&sub, 0, "str"));
    CHECK_EQ_INT(rsd_json_expand(&top, rsd_json_find(&top, 0, "n"), &sub), RSD_OK);
    CHECK_EQ_INT(rsd_json_type_of(&sub, 0), RSD_JSON_NUMBER);
    { /* the tokens after cap are never written, by the top level, an element or an expansion */
        rsd_json_tok guard[32];
        uint32_t c;
        for (c = 11; c <= 24; c++) {
            size_t g;
            memset(guard, 0xA5, sizeof guard);
            if (rsd_json_parse_top(&top, big, o, guard, c) < 0) { CHECK(c < 11); continue; }
            pos = 0;
            while (rsd_json_each(&top, rsd_json_find(&top, 0, "data"), &pos, &el) > 0) {}
            (void)rsd_json_expand(&top, rsd_json_find(&top, 0, "e"), &sub);
            for (g = (size_t)c * sizeof(rsd_json_tok); g < sizeof guard; g++) CHECK(((unsigned char *)guard)[g] == 0xA5);
        }
    }
    /* an element needing more tokens than remain */
    n = rsd_json_parse_top(&top, big, o, toks, 20);
    CHECK_EQ_INT(n, 11);
    pos = 0;
    CHECK_EQ_INT(rsd_json_each(&top, rsd_json_find(&top, 0, "data"), &pos, &el), RSD_ERR_JSON_TOKENS);
    /* still strict: a bad byte deep inside is found by the top-level parse */
    big[40] = '\x01';
    CHECK_EQ_INT(rsd_json_parse_top(&top, big, o, toks, 24), RSD_ERR_JSON);
    CHECK_EQ_INT(rsd_json_parse_top(&top, big, 30, toks, 24), RSD_ERR_TRUNCATED);
    /* empty arrays, bad arguments */
    CHECK_EQ_INT(rsd_json_parse_top(&top, "{\"a\":[ ]}", 9, toks, 24), 3);
    pos = 0;
    CHECK_EQ_INT(rsd_json_each(&top, 2, &pos, &el), 0);
    CHECK_EQ_INT(rsd_json_each(&top, 0, &pos, &el), RSD_ERR_ARG); /* not an array */
    CHECK_EQ_INT(rsd_json_parse_top(&top, "[]", 2, NULL, 0), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_json_parse_top(&top, "[1,[2,[3]],4]", 13, toks, 24), 4);
    CHECK_EQ_INT(rsd_json_size(&top, 0), 3);
    pos = 0;
    n = 0;
    while (rsd_json_each(&top, 0, &pos, &el) > 0) n += (int)el.count;
    CHECK_EQ_INT(n, 6); /* 1, [2,[3]] (4 tokens), 4 */
}

static void test_depth_limit(void) {
    char buf[2 * RSD_JSON_DEPTH_CAP + 8];
    rsd_json_tok toks[RSD_JSON_DEPTH_CAP + 1];
    rsd_json_doc d;
    rsd_json_desc desc;
    int i;
    for (i = 0; i < RSD_JSON_MAX_DEPTH; i++) { buf[i] = '['; buf[2 * RSD_JSON_MAX_DEPTH - 1 - i] = ']'; }
    CHECK_EQ_INT(rsd_json_parse(&d, buf, 2 * RSD_JSON_MAX_DEPTH, toks, 100), RSD_JSON_MAX_DEPTH);
    for (i = 0; i <= RSD_JSON_MAX_DEPTH; i++) { buf[i] = '['; buf[2 * RSD_JSON_MAX_DEPTH + 1 - i] = ']'; }
    CHECK_EQ_INT(rsd_json_parse(&d, buf, 2 * RSD_JSON_MAX_DEPTH + 2, toks, 100), RSD_ERR_JSON_DEPTH);
    CHECK_EQ_INT(d.err.offset, RSD_JSON_MAX_DEPTH);
    CHECK_EQ_INT(rsd_json_parse(&d, buf, 2 * RSD_JSON_MAX_DEPTH + 2, NULL, 0), RSD_ERR_JSON_DEPTH);
    memset(&desc, 0, sizeof desc);
    desc.max_depth = 2;
    CHECK(rsd_json_parse_ex(&d, "[{}]", 4, toks, 8, &desc) == 2);
    CHECK_EQ_INT(rsd_json_parse_ex(&d, "[[[]]]", 6, toks, 8, &desc), RSD_ERR_JSON_DEPTH);
    CHECK_EQ_INT(rsd_json_parse_ex(&d, "{\"a\":{\"b\":{}}}", 14, toks, 8, &desc), RSD_ERR_JSON_DEPTH);
    desc.max_depth = RSD_JSON_DEPTH_CAP + 1;
    CHECK_EQ_INT(rsd_json_parse_ex(&d, "[]", 2, toks, 8, &desc), RSD_ERR_ARG);
    desc.max_depth = RSD_JSON_DEPTH_CAP;
    for (i = 0; i < RSD_JSON_DEPTH_CAP; i++) { buf[i] = '['; buf[2 * RSD_JSON_DEPTH_CAP - 1 - i] = ']'; }
    CHECK_EQ_INT(rsd_json_parse_ex(&d, buf, 2 * RSD_JSON_DEPTH_CAP, toks, RSD_JSON_DEPTH_CAP + 1, &desc),
                 RSD_JSON_DEPTH_CAP);
    CHECK(tree_ok(&d));
    /* byte limit */
    memset(&desc, 0, sizeof desc);
    desc.max_bytes = 3;
    CHECK_EQ_INT(rsd_json_parse_ex(&d, "[1]", 3, toks, 8, &desc), 2);
    CHECK_EQ_INT(rsd_json_parse_ex(&d, "[10]", 4, toks, 8, &desc), RSD_ERR_TOO_LARGE);
    CHECK_EQ_INT(rsd_json_parse(&d, NULL, 1, toks, 8), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_json_parse(&d, NULL, 0, toks, 8), RSD_ERR_TRUNCATED);
    CHECK_EQ_INT(rsd_json_parse(NULL, "1", 1, toks, 8), RSD_ERR_ARG);
}

/* An input over the byte limit is refused without reading it: a 2 GiB + 1 mapping
   that is all PROT_NONE (touching any byte would crash; run in a child so a crash
   is a failure, not the end of this program). */
static void test_too_large_unread(void) {
    size_t len = (size_t)RSD_JSON_MAX_BYTES + 1;
#if defined(_WIN32) /* reserved, never committed: a touch faults and ends this program */
    void *m = VirtualAlloc(NULL, len, MEM_RESERVE, PAGE_NOACCESS);
    REQUIRE(m != NULL);
    {
#else
    void *m = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    pid_t pid;
    int st = -1;
    REQUIRE(m != MAP_FAILED);
    pid = fork();
    if (pid == 0) {
#endif
        rsd_json_doc d;
        rsd_json_tok toks[4];
        rsd_json_desc desc;
        int ok = rsd_json_parse(&d, (const char *)m, len, toks, 4) == RSD_ERR_TOO_LARGE &&
                 d.err.offset == (size_t)RSD_JSON_MAX_BYTES && d.err.line == 0 && d.err.col == 0 &&
                 rsd_json_parse(&d, (const char *)m, len, NULL, 0) == RSD_ERR_TOO_LARGE;
        memset(&desc, 0, sizeof desc);
        desc.max_bytes = 4096;
        ok = ok && rsd_json_parse_ex(&d, (const char *)m, 4097, toks, 4, &desc) == RSD_ERR_TOO_LARGE &&
             d.err.offset == 4096 && d.err.line == 0 && d.count == 0;
#if defined(_WIN32)
        CHECK(ok);
    }
    (void)VirtualFree(m, 0, MEM_RELEASE);
#else
        _exit(ok ? 0 : 1);
    }
    REQUIRE(pid > 0);
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    munmap(m, len);
#endif
}

static void test_token_cap(void) {
    static const char src[] = "{\"a\":[1,2,{\"b\":[true,null]}],\"c\":\"x\"}";
    rsd_json_tok toks[32];
    rsd_json_doc d;
    int need = rsd_json_parse(&d, src, sizeof src - 1, NULL, 0), cap;
    REQUIRE(need == 12);
    CHECK(d.toks == NULL && d.count == 12);
    for (cap = 0; cap < need; cap++)
        CHECK_EQ_INT(rsd_json_parse(&d, src, sizeof src - 1, toks, (uint32_t)cap), RSD_ERR_JSON_TOKENS);
    memset(toks, 0x5A, sizeof toks);
    CHECK_EQ_INT(rsd_json_parse(&d, src, sizeof src - 1, toks, (uint32_t)need), need);
    CHECK_EQ_INT(toks[need].type, 0x5A); /* no sentinel written without room */
    CHECK(tree_ok(&d));
    CHECK_EQ_INT(rsd_json_parse(&d, src, sizeof src - 1, toks, (uint32_t)need + 1), need);
    CHECK_EQ_INT(toks[need].type, RSD_JSON_INVALID);
}

static void test_error_position(void) {
    static const char src[] = "{\n  \"a\": [1,\n   2,]\n}";
    rsd_json_doc d;
    rsd_json_tok toks[16];
    CHECK_EQ_INT(rsd_json_parse(&d, src, sizeof src - 1, toks, 16), RSD_ERR_JSON);
    CHECK_EQ_INT(d.err.line, 3);
    CHECK_EQ_INT(d.err.col, 6);
    CHECK_EQ_INT(d.err.offset, 18);
    CHECK_EQ_STR(d.err.what, "trailing comma");
    CHECK_EQ_INT(rsd_json_parse(&d, "[1,\n\"\x01\"]", 8, toks, 16), RSD_ERR_JSON);
    CHECK_EQ_INT(d.err.line, 2);
    CHECK_EQ_INT(d.err.col, 2);
    CHECK_EQ_STR(d.err.what, "control character in string");
    CHECK_EQ_INT(rsd_json_parse(&d, "[\"ab\n", 5, toks, 16), RSD_ERR_JSON);
    CHECK_EQ_INT(d.err.offset, 4);
    CHECK_EQ_INT(rsd_json_parse(&d, "[1,\n2", 5, toks, 16), RSD_ERR_TRUNCATED);
    CHECK_EQ_INT(d.err.line, 2);
    CHECK_EQ_INT(d.err.col, 2);
    CHECK_EQ_INT(rsd_json_parse(&d, "[01]", 4, toks, 16), RSD_ERR_JSON);
    CHECK_EQ_STR(d.err.what, "leading zero");
    CHECK_EQ_INT(d.err.offset, 2);
}

static void test_unescape(void) {
    static const char src[] =
        "[\"plain\",\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\",\"\\u00e9\\u20AC\\uD83D\\uDE00\\u0041\","
        "\"\\u0000x\",\"\xF0\x9F\x98\x80\"]";
    rsd_json_tok toks[16];
    rsd_json_doc d;
    char buf[64];
    size_t len = 0, cap;
    REQUIRE(rsd_json_parse(&d, src, sizeof src - 1, toks, 16) == 6);
    CHECK(rsd_json_str(&d, 1, buf, sizeof buf, &len) == RSD_OK && len == 5);
    CHECK_EQ_STR(buf, "plain");
    CHECK(!(toks[1].flags & RSD_JSON_F_ESCAPED) && (toks[2].flags & RSD_JSON_F_ESCAPED));
    CHECK(rsd_json_str(&d, 2, buf, sizeof buf, &len) == RSD_OK);
    CHECK_EQ_STR(buf, "a\"b\\c/d\b\f\n\r\t");
    CHECK(rsd_json_str(&d, 3, buf, sizeof buf, &len) == RSD_OK);
    CHECK_EQ_STR(buf, "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80" "A");
    CHECK_EQ_INT(len, 10);
    CHECK(rsd_json_str_eq(&d, 3, "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80" "A"));
    CHECK(!rsd_json_str_eq(&d, 3, "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));
    CHECK(!rsd_json_str_eq(&d, 3, "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80" "AB"));
    CHECK(rsd_json_str_eq(&d, 5, "\xF0\x9F\x98\x80"));
    CHECK(rsd_json_str(&d, 4, buf, sizeof buf, &len) == RSD_OK && len == 2 && buf[0] == 0 && buf[1] == 'x');
    CHECK(!rsd_json_str_eq(&d, 4, "")); /* a C string cannot hold the NUL */
    CHECK(!rsd_json_str_eq(&d, 0, "plain"));
    /* every short buffer: RSD_ERR_BUFFER, the exact need reported, always terminated */
    for (cap = 0; cap <= 10; cap++) {
        memset(buf, 'Z', sizeof buf);
        CHECK_EQ_INT(rsd_json_str(&d, 3, buf, cap, &len), RSD_ERR_BUFFER);
        CHECK_EQ_INT(len, 10);
        if (cap) CHECK_EQ_INT(buf[cap - 1], 0);
        CHECK_EQ_INT(buf[cap], 'Z');
    }
    CHECK_EQ_INT(rsd_json_str(&d, 3, buf, 11, &len), RSD_OK);
    CHECK_EQ_INT(rsd_json_str(&d, 0, buf, sizeof buf, &len), RSD_ERR_JSON_TYPE);
    CHECK_EQ_INT(rsd_json_str(&d, 3, NULL, 0, &len), RSD_ERR_BUFFER);
    CHECK_EQ_INT(len, 10);
}

static void test_find_escaped_keys(void) {
    static const char src[] = "{\"m\\u006fdel\":\"org/\\u004d-1\",\"i\\\"d\":2,\"id\":3,\"\xC3\xA9\":4,\"\\u00e9t\":5}";
    rsd_json_tok toks[16];
    rsd_json_doc d;
    int64_t v = 0;
    REQUIRE(rsd_json_parse(&d, src, sizeof src - 1, toks, 16) == 11);
    CHECK(rsd_json_str_eq(&d, rsd_json_find(&d, 0, "model"), "org/M-1"));
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, 0, "i\"d"), &v) == RSD_OK && v == 2);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, 0, "id"), &v) == RSD_OK && v == 3);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, 0, "\xC3\xA9"), &v) == RSD_OK && v == 4);
    CHECK(rsd_json_int64(&d, rsd_json_find(&d, 0, "\xC3\xA9t"), &v) == RSD_OK && v == 5);
    CHECK_EQ_INT(rsd_json_find(&d, 0, "mode"), -1);
    CHECK_EQ_INT(rsd_json_find(&d, 0, "modell"), -1);
    CHECK_EQ_INT(rsd_json_find(&d, 0, ""), -1);
    CHECK_EQ_INT(rsd_json_find(&d, 0, NULL), -1);
}

static int num(const char *s, double *dv, int64_t *iv, int *ri) {
    rsd_json_tok toks[4];
    rsd_json_doc d;
    int r = rsd_json_parse(&d, s, strlen(s), toks, 4);
    if (r != 1) return -100;
    *ri = rsd_json_int64(&d, 0, iv);
    return rsd_json_double(&d, 0, dv);
}

static void test_numbers(void) {
    double dv = 0;
    int64_t iv = 0;
    int ri = 0;
    char big[1200];
    bool b = false;
    rsd_json_tok toks[4];
    rsd_json_doc d;
    CHECK(num("9223372036854775807", &dv, &iv, &ri) == RSD_OK && ri == RSD_OK && iv == INT64_MAX);
    CHECK(num("-9223372036854775808", &dv, &iv, &ri) == RSD_OK && ri == RSD_OK && iv == INT64_MIN);
    CHECK(num("9223372036854775808", &dv, &iv, &ri) == RSD_OK && ri == RSD_ERR_JSON_RANGE);
    CHECK(num("-9223372036854775809", &dv, &iv, &ri) == RSD_OK && ri == RSD_ERR_JSON_RANGE);
    CHECK(num("99999999999999999999999", &dv, &iv, &ri) == RSD_OK && ri == RSD_ERR_JSON_RANGE);
    CHECK(num("-0", &dv, &iv, &ri) == RSD_OK && ri == RSD_OK && iv == 0 && dv == 0 && signbit(dv));
    CHECK(num("0", &dv, &iv, &ri) == RSD_OK && !signbit(dv) && iv == 0);
    CHECK(num("1.0", &dv, &iv, &ri) == RSD_OK && ri == RSD_ERR_JSON_TYPE && dv == 1.0);
    CHECK(num("1e2", &dv, &iv, &ri) == RSD_OK && ri == RSD_ERR_JSON_TYPE && dv == 100.0);
    CHECK(num("0.1", &dv, &iv, &ri) == RSD_OK && dv == 0.1);
    CHECK(num("-1.5E-3", &dv, &iv, &ri) == RSD_OK && dv == -1.5e-3);
    CHECK(num("1e23", &dv, &iv, &ri) == RSD_OK && dv == 1e23);
    CHECK(num("8.98846567431158e307", &dv, &iv, &ri) == RSD_OK && dv == 8.98846567431158e307);
    CHECK(num("1.7976931348623157e308", &dv, &iv, &ri) == RSD_OK && dv == DBL_MAX);
    CHECK(num("1.7976931348623159e308", &dv, &iv, &ri) == RSD_ERR_JSON_RANGE);
    CHECK(num("1e309", &dv, &iv, &ri) == RSD_ERR_JSON_RANGE);
    CHECK(num("-1e309", &dv, &iv, &ri) == RSD_ERR_JSON_RANGE);
    CHECK(num("1e99999999999999999999", &dv, &iv, &ri) == RSD_ERR_JSON_RANGE);
    CHECK(num("1e-99999999999999999999", &dv, &iv, &ri) == RSD_OK && dv == 0);
    CHECK(num("0e99999999999", &dv, &iv, &ri) == RSD_OK && dv == 0);
    CHECK(num("1e-400", &dv, &iv, &ri) == RSD_OK && dv == 0);
    CHECK(num("4.9406564584124654e-324", &dv, &iv, &ri) == RSD_OK && dv == 4.9406564584124654e-324);
    CHECK(num("2.2250738585072011e-308", &dv, &iv, &ri) == RSD_OK && dv == 2.2250738585072011e-308);
    CHECK(num("9007199254740993", &dv, &iv, &ri) == RSD_OK && dv == 9007199254740992.0 && iv == 9007199254740993LL);
    CHECK(num("0.000001234", &dv, &iv, &ri) == RSD_OK && dv == 0.000001234);
    CHECK(num("123456789012345678901234567890", &dv, &iv, &ri) == RSD_OK && dv == 123456789012345678901234567890.0);
    /* more digits than RSD_JSON_NUM_MAX_DIGITS: the sticky digit keeps rounding right.
       2^-1074 * 1.5 written out exactly rounds up only because of a trailing 1. */
    memset(big, '0', sizeof big);
    memcpy(big, "1.", 2);
    big[1100] = '1';
    big[1101] = '\0';
    CHECK(num(big, &dv, &iv, &ri) == RSD_OK && dv == 1.0);
    memcpy(big, "0.", 2);
    memset(big + 2, '9', 1000);
    big[1002] = '\0';
    CHECK(num(big, &dv, &iv, &ri) == RSD_OK && dv == 1.0);
    /* halfway case: 1 + 2^-53 exactly is a tie (rounds to even = 1.0); plus anything goes up */
    strcpy(big, "1.00000000000000011102230246251565404236316680908203125");
    CHECK(num(big, &dv, &iv, &ri) == RSD_OK && dv == 1.0);
    strcpy(big, "1.00000000000000011102230246251565404236316680908203125");
    memset(big + strlen(big), '0', 900);
    strcpy(big + 56 + 900, "1");
    CHECK_EQ_INT(strlen(big), 56 + 900 + 1);
    CHECK(num(big, &dv, &iv, &ri) == RSD_OK && dv == 1.0000000000000002);
    /* types */
    CHECK(rsd_json_parse(&d, "true", 4, toks, 4) == 1 && rsd_json_bool(&d, 0, &b) == RSD_OK && b);
    CHECK(rsd_json_parse(&d, "false", 5, toks, 4) == 1 && rsd_json_bool(&d, 0, &b) == RSD_OK && !b);
    CHECK_EQ_INT(rsd_json_int64(&d, 0, &iv), RSD_ERR_JSON_TYPE);
    CHECK_EQ_INT(rsd_json_double(&d, 0, &dv), RSD_ERR_JSON_TYPE);
    CHECK(rsd_json_parse(&d, "\"1\"", 3, toks, 4) == 1);
    CHECK_EQ_INT(rsd_json_int64(&d, 0, &iv), RSD_ERR_JSON_TYPE);
    CHECK_EQ_INT(rsd_json_bool(&d, 0, &b), RSD_ERR_JSON_TYPE);
}

/* ---- writer ---- */
static const char hostile[] = "q\"b\\s/\x01\x02\x1f\x7f\t\n\r\b\f end \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF";

static int write_doc(char *buf, size_t cap) {
    rsd_json_writer w;
    char ctl[33];
    int i;
    for (i = 0; i < 32; i++) ctl[i] = (char)(i + 1 > 31 ? 31 : i + 1);
    ctl[32] = 0;
    rsd_json_w_init(&w, buf, cap);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "model");
    rsd_json_w_str(&w, "org/Qwen2.5-7B-Instruct-Q4_K_M.gguf");
    rsd_json_w_key(&w, hostile);
    rsd_json_w_str(&w, hostile);
    rsd_json_w_key(&w, "ctl");
    rsd_json_w_strn(&w, "\0a\0", 3);
    rsd_json_w_keyn(&w, "k\0", 2);
    rsd_json_w_null(&w);
    rsd_json_w_key(&w, "all");
    rsd_json_w_str(&w, ctl);
    rsd_json_w_key(&w, "n");
    rsd_json_w_begin_array(&w);
    rsd_json_w_int(&w, INT64_MIN);
    rsd_json_w_int(&w, INT64_MAX);
    rsd_json_w_int(&w, 0);
    rsd_json_w_double(&w, 0.1);
    rsd_json_w_double(&w, -0.0);
    rsd_json_w_double(&w, 1e300);
    rsd_json_w_double(&w, 4.9406564584124654e-324);
    rsd_json_w_bool(&w, true);
    rsd_json_w_bool(&w, false);
    rsd_json_w_null(&w);
    rsd_json_w_begin_array(&w);
    rsd_json_w_end_array(&w);
    rsd_json_w_begin_object(&w);
    rsd_json_w_end_object(&w);
    rsd_json_w_raw(&w, "{\"r\":1}", 7);
    rsd_json_w_end_array(&w);
    rsd_json_w_end_object(&w);
    return rsd_json_w_finish(&w);
}

static void test_writer_roundtrip(void) {
    char buf[1024], s[256], ctl[33];
    rsd_json_tok toks[64];
    rsd_json_doc d;
    size_t len = 0;
    int n = write_doc(buf, sizeof buf), v, i;
    double dv = 0;
    int64_t iv = 0;
    for (i = 0; i < 32; i++) ctl[i] = (char)(i + 1 > 31 ? 31 : i + 1);
    ctl[32] = 0;
    REQUIRE(n > 0);
    CHECK_EQ_INT(buf[n], 0);
    REQUIRE(rsd_json_parse(&d, buf, (size_t)n, toks, 64) > 0);
    CHECK(tree_ok(&d));
    CHECK(rsd_json_str_eq(&d, rsd_json_find(&d, 0, "model"), "org/Qwen2.5-7B-Instruct-Q4_K_M.gguf"));
    v = rsd_json_find(&d, 0, hostile);
    CHECK(v > 0 && rsd_json_str(&d, v, s, sizeof s, &len) == RSD_OK && len == sizeof hostile - 1 &&
          memcmp(s, hostile, len) == 0);
    v = rsd_json_find(&d, 0, "ctl");
    CHECK(rsd_json_str(&d, v, s, sizeof s, &len) == RSD_OK && len == 3 && memcmp(s, "\0a\0", 3) == 0);
    CHECK(rsd_json_str_eq(&d, rsd_json_find(&d, 0, "all"), ctl));
    v = rsd_json_find(&d, 0, "ctl") + 1; /* the key after the value of "ctl" is "k\0" */
    CHECK(rsd_json_str(&d, v, s, sizeof s, &len) == RSD_OK && len == 2 && memcmp(s, "k\0", 2) == 0);
    v = rsd_json_find(&d, 0, "n");
    CHECK(rsd_json_int64(&d, rsd_json_at(&d, v, 0), &iv) == RSD_OK && iv == INT64_MIN);
    CHECK(rsd_json_int64(&d, rsd_json_at(&d, v, 1), &iv) == RSD_OK && iv == INT64_MAX);
    CHECK(rsd_json_view(&d, rsd_json_at(&d, v, 3)).len == 3); /* "0.1": shortest form */
    CHECK(rsd_json_double(&d, rsd_json_at(&d, v, 3), &dv) == RSD_OK && dv == 0.1);
    CHECK(rsd_json_double(&d, rsd_json_at(&d, v, 4), &dv) == RSD_OK && dv == 0 && signbit(dv));
    CHECK(rsd_json_double(&d, rsd_json_at(&d, v, 5), &dv) == RSD_OK && dv == 1e300);
    CHECK(rsd_json_double(&d, rsd_json_at(&d, v, 6), &dv) == RSD_OK && dv == 4.9406564584124654e-324);
    CHECK_EQ_INT(rsd_json_type_of(&d, rsd_json_at(&d, v, 9)), RSD_JSON_NULL);
    CHECK_EQ_INT(rsd_json_size(&d, rsd_json_at(&d, v, 12)), 1);
    /* no raw control bytes in the output */
    for (i = 0; i < n; i++) CHECK((unsigned char)buf[i] >= 0x20);
}

static void test_writer_doubles(void) {
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int i, bad = 0;
    for (i = 0; i < 20000; i++) {
        double v, back = -1;
        char buf[64];
        rsd_json_writer w;
        rsd_json_tok t[2];
        rsd_json_doc d;
        int n;
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        memcpy(&v, &x, sizeof v);
        if (v != v || v > DBL_MAX || v < -DBL_MAX) continue;
        rsd_json_w_init(&w, buf, sizeof buf);
        rsd_json_w_double(&w, v);
        n = rsd_json_w_finish(&w);
        if (n <= 0 || rsd_json_parse(&d, buf, (size_t)n, t, 2) != 1 ||
            rsd_json_double(&d, 0, &back) != RSD_OK || memcmp(&back, &v, sizeof v) != 0) bad++;
    }
    CHECK_EQ_INT(bad, 0);
}

static void test_writer_small_buffers(void) {
    char full[1024], buf[1100];
    int n = write_doc(full, sizeof full), cap;
    REQUIRE(n > 0);
    for (cap = 0; cap <= n + 1; cap++) {
        int r;
        memset(buf, 0x7E, sizeof buf);
        r = write_doc(buf, (size_t)cap);
        if (cap < n) CHECK_EQ_INT(r, RSD_ERR_BUFFER);
        else {
            CHECK_EQ_INT(r, n);
            CHECK(memcmp(buf, full, (size_t)n) == 0);
        }
        CHECK_EQ_INT((unsigned char)buf[cap], 0x7E);
        CHECK_EQ_INT((unsigned char)buf[cap + 1], 0x7E);
    }
}

static void test_writer_errors(void) {
    char buf[128];
    rsd_json_writer w;
    rsd_json_w_init(&w, buf, sizeof buf);
    CHECK_EQ_INT(rsd_json_w_str(&w, "ok\xC3"), RSD_ERR_ARG); /* truncated UTF-8 */
    CHECK_EQ_INT(rsd_json_w_finish(&w), RSD_ERR_ARG);          /* sticky */
    rsd_json_w_init(&w, buf, sizeof buf);
    rsd_json_w_begin_array(&w);
    CHECK_EQ_INT(rsd_json_w_str(&w, "a\xED\xA0\x80"), RSD_ERR_ARG); /* UTF-8 surrogate */
    rsd_json_w_init(&w, buf, sizeof buf);
    CHECK_EQ_INT(rsd_json_w_str(&w, "\xC0\xAF"), RSD_ERR_ARG); /* overlong */
    rsd_json_w_init(&w, buf, sizeof buf);
    rsd_json_w_begin_object(&w);
    CHECK_EQ_INT(rsd_json_w_key(&w, "\xFF"), RSD_ERR_ARG);
    rsd_json_w_init(&w, buf, sizeof buf);
    CHECK_EQ_INT(rsd_json_w_double(&w, NAN), RSD_ERR_ARG);
    rsd_json_w_init(&w, buf, sizeof buf);
    CHECK_EQ_INT(rsd_json_w_double(&w, -INFINITY), RSD_ERR_ARG);
    /* state errors */
    rsd_json_w_init(&w, buf, sizeof buf);
    rsd_json_w_begin_array(&w);
    CHECK_EQ_INT(rsd_json_w_key(&w, "k"), RSD_ERR_STATE);
    rsd_json_w_init(&w, buf, sizeof buf);
    rsd_json_w_begin_object(&w);
    CHECK_EQ_INT(rsd_json_w_int(&w, 1), RSD_ERR_STATE);
    rsd_json_w_init(&w, buf, sizeof buf);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "k");
    CHECK_EQ_INT(rsd_json_w_end_object(&w), RSD_ERR_STATE);
    rsd_json_w_init(&w, buf, sizeof buf);
    rsd_json_w_begin_object(&w);
    CHECK_EQ_INT(rsd_json_w_end_array(&w), RSD_ERR_STATE);
    rsd_json_w_init(&w, buf, sizeof buf);
    rsd_json_w_int(&w, 1);
    CHECK_EQ_INT(rsd_json_w_int(&w, 2), RSD_ERR_STATE);
    rsd_json_w_init(&w, buf, sizeof buf);
    rsd_json_w_begin_array(&w);
    CHECK_EQ_INT(rsd_json_w_finish(&w), RSD_ERR_STATE);
    rsd_json_w_init(&w, buf, sizeof buf);
    CHECK_EQ_INT(rsd_json_w_finish(&w), RSD_ERR_STATE);
    CHECK_EQ_INT(rsd_json_w_end_array(NULL), RSD_ERR_ARG);
    /* top-level scalar and exact output */
    rsd_json_w_init(&w, buf, sizeof buf);
    rsd_json_w_str(&w, "a\"\\\x01");
    CHECK_EQ_INT(rsd_json_w_finish(&w), 13);
    CHECK_EQ_STR(buf, "\"a\\\"\\\\\\u0001\"");
    rsd_json_w_init(&w, buf, sizeof buf);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "a");
    rsd_json_w_int(&w, -12);
    rsd_json_w_key(&w, "b");
    rsd_json_w_begin_array(&w);
    rsd_json_w_double(&w, 1.5);
    rsd_json_w_double(&w, 1e21);
    rsd_json_w_end_array(&w);
    rsd_json_w_end_object(&w);
    CHECK(rsd_json_w_finish(&w) > 0);
    CHECK_EQ_STR(buf, "{\"a\":-12,\"b\":[1.5,1e+21]}");
    /* depth limit */
    {
        int i, r = RSD_OK;
        rsd_json_w_init(&w, buf, sizeof buf);
        for (i = 0; i <= RSD_JSON_WRITER_MAX_DEPTH && r == RSD_OK; i++) r = rsd_json_w_begin_array(&w);
        CHECK_EQ_INT(r, RSD_ERR_JSON_DEPTH);
        CHECK_EQ_INT(i, RSD_JSON_WRITER_MAX_DEPTH + 1);
    }
}

/* The manual's example, verbatim in spirit: router payload -> ids and states. */
static void test_manual_example(void) {
    static const char body[] =
        "{\"object\":\"list\",\"data\":[{\"id\":\"org/a-Q4_K_M.gguf\",\"status\":{\"value\":\"loaded\","
        "\"args\":[\"--port\",\"50001\"]},\"tags\":[]},{\"i\\u0064\":\"org/b\",\"status\":{\"value\":\"unloaded\"}},"
        "{\"id\":7}]}";
    rsd_json_tok toks[512];
    rsd_json_doc doc;
    int n = rsd_json_parse(&doc, body, sizeof body - 1, toks, 512), data, m, seen = 0, loaded = 0;
    char ids[3][256];
    REQUIRE(n > 0);
    data = rsd_json_find(&doc, 0, "data");
    for (m = rsd_json_child(&doc, data); m >= 0; m = rsd_json_next(&doc, m)) {
        char id[256];
        size_t id_len;
        int st;
        if (rsd_json_str(&doc, rsd_json_find(&doc, m, "id"), id, sizeof id, &id_len) < 0) continue;
        memcpy(ids[seen++], id, id_len + 1);
        st = rsd_json_find(&doc, m, "status");
        loaded += rsd_json_str_eq(&doc, rsd_json_find(&doc, st, "value"), "loaded");
    }
    CHECK_EQ_INT(seen, 2);
    CHECK_EQ_INT(loaded, 1);
    CHECK_EQ_STR(ids[0], "org/a-Q4_K_M.gguf");
    CHECK_EQ_STR(ids[1], "org/b");
}

/* The manual's writer example. */
static void test_manual_writer(void) {
    rsd_json_writer w;
    char body[512];
    int len;
    rsd_json_w_init(&w, body, sizeof body);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "model"); rsd_json_w_str(&w, "org/a \"b\"");
    rsd_json_w_key(&w, "n_ctx"); rsd_json_w_int(&w, 8192);
    rsd_json_w_end_object(&w);
    len = rsd_json_w_finish(&w);
    CHECK_EQ_INT(len, (int)strlen("{\"model\":\"org/a \\\"b\\\"\",\"n_ctx\":8192}"));
    CHECK_EQ_STR(body, "{\"model\":\"org/a \\\"b\\\"\",\"n_ctx\":8192}");
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    RUN(test_cases);
    RUN(test_truncated_prefixes);
    RUN(test_tree_and_iteration);
    RUN(test_top_level_and_entries);
    RUN(test_depth_limit);
    RUN(test_token_cap);
    RUN(test_error_position);
    RUN(test_unescape);
    RUN(test_find_escaped_keys);
    RUN(test_numbers);
    RUN(test_writer_roundtrip);
    RUN(test_writer_doubles);
    RUN(test_writer_small_buffers);
    RUN(test_writer_errors);
    RUN(test_manual_example);
    RUN(test_manual_writer);
    RUN(test_too_large_unread);
    return RSD_TEST_END();
}
