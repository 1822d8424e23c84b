/* test_text.c -- residency.h >>text: rsd_text_escape (what reaches a terminal or a log
   line) and rsd_arg_redact (secrets in command lines shown as ***). */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include "rsd_test.h"

static char g_out[1024];

static const char *esc(const char *s, size_t n) {
    rsd_str v;
    v.ptr = s;
    v.len = n;
    (void)rsd_text_escape(v, g_out, sizeof g_out);
    return g_out;
}
#define ESC(lit) esc(lit, sizeof(lit) - 1)

static const char *red(const char *prev, const char *arg) {
    (void)rsd_arg_redact(prev, arg, g_out, sizeof g_out);
    return g_out;
}

static void test_escape_controls(void) {
    /* an id chosen by a server that would recolour the terminal, ring, and forge a line */
    CHECK_EQ_STR(ESC("evil\x1b[31mred\x1b[0m\x07"), "evil\\x1b[31mred\\x1b[0m\\x07");
    CHECK_EQ_STR(ESC("a\r\nrsd-serve: fake line"), "a\\r\\nrsd-serve: fake line");
    CHECK_EQ_STR(ESC("tab\there"), "tab\\there");
    CHECK_EQ_STR(ESC("nul\0x"), "nul\\x00x");
    CHECK_EQ_STR(ESC("del\x7f"), "del\\x7f");
    /* C1 controls (CSI U+009B) and bytes that are not UTF-8 */
    CHECK_EQ_STR(ESC("c1 \xc2\x9b" "31m \xc2\x80"), "c1 \\xc2\\x9b31m \\xc2\\x80");
    CHECK_EQ_STR(ESC("bad \xff \xc3 \xe2\x82"), "bad \\xff \\xc3 \\xe2\\x82");
    CHECK_EQ_STR(ESC("overlong \xc0\xaf"), "overlong \\xc0\\xaf");
    /* printable UTF-8 and plain text pass as they are, backslashes too */
    CHECK_EQ_STR(ESC("caf\xc3\xa9 \xc2\xa0 \xe2\x82\xac \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xc2\xa0 \xe2\x82\xac \xf0\x9f\x98\x80");
    CHECK_EQ_STR(ESC("Qwen3-8B:Q4_K_M a\\b"), "Qwen3-8B:Q4_K_M a\\b");
    CHECK_EQ_STR(ESC(""), "");
}

static void test_escape_bounds(void) {
    char small[6];
    rsd_str v = rsd_str_c("ab\x1b" "cd");
    CHECK_EQ_INT(rsd_text_escape(v, NULL, 0), 8);
    CHECK_EQ_INT(rsd_text_escape(v, small, sizeof small), 8);
    CHECK_EQ_STR(small, "ab\\x1");
    CHECK_EQ_INT(rsd_text_escape(v, small, 1), 8);
    CHECK_EQ_STR(small, "");
    v.ptr = NULL;
    v.len = 5;
    CHECK_EQ_INT(rsd_text_escape(v, small, sizeof small), 0);
    CHECK_EQ_STR(small, "");
}

static void test_redact_flags(void) {
    CHECK_EQ_STR(red("--api-key", "sk-live-123"), "***");
    CHECK_EQ_STR(red(NULL, "--api-key"), "--api-key");
    CHECK_EQ_STR(red("--hf-token", "hf_abc"), "***");
    CHECK_EQ_STR(red("-hft", "hf_abc"), "***");
    CHECK_EQ_STR(red("--api-key-file", "/etc/keys"), "***");
    CHECK_EQ_STR(red("--ssl-key-file", "/etc/k.pem"), "***");
    CHECK_EQ_STR(red("--db-password", "hunter2"), "***");
    CHECK_EQ_STR(red("--client-secret", "s"), "***");
    CHECK_EQ_STR(red("--API-KEY", "x"), "***");
    CHECK_EQ_STR(red("-m", "--api-key=sk-1"), "--api-key=***");
    CHECK_EQ_STR(red(NULL, "--hf-token="), "--hf-token=***");
    CHECK_EQ_STR(red("--api-key=sk-1", "--port"), "--port"); /* the value was inline */
    /* not secrets: counts of tokens, ordinary flags and values */
    CHECK_EQ_STR(red("--image-max-tokens", "256"), "256");
    CHECK_EQ_STR(red("--tts-use-guide-tokens", "--port"), "--port");
    CHECK_EQ_STR(red("--keep", "64"), "64");
    CHECK_EQ_STR(red("--token-ms", "40"), "40");
    CHECK_EQ_STR(red("--apikey", "x"), "***");
    CHECK_EQ_STR(red("--api-keys", "a,b"), "***");
    CHECK_EQ_STR(red("--token-file", "/t"), "***");
    CHECK_EQ_STR(red("--key-path", "/k"), "***");
    CHECK_EQ_STR(red("--file", "/f"), "/f");
    CHECK_EQ_STR(red("--hf_token", "t"), "***");
    CHECK_EQ_STR(red("--override-kv", "tokenizer.ggml.add_bos_token=bool:false"), "tokenizer.ggml.add_bos_token=bool:false");
    CHECK_EQ_STR(red("-m", "/models/monkey-token.gguf"), "/models/monkey-token.gguf");
    CHECK_EQ_STR(red("--port", "8080"), "8080");
    CHECK_EQ_STR(red(NULL, NULL), "");
}

static void test_redact_urls(void) {
    CHECK_EQ_STR(red("-mu", "https://user:pw@example.org/m.gguf"), "https://***@example.org/m.gguf");
    CHECK_EQ_STR(red(NULL, "--model-url=http://tok@h:8080/x?y=1"), "--model-url=http://***@h:8080/x?y=1");
    CHECK_EQ_STR(red(NULL, "a=http://u:p@h,b=https://v@i/"), "a=http://***@h,b=https://***@i/");
    CHECK_EQ_STR(red(NULL, "http://h/path@not-userinfo"), "http://h/path@not-userinfo");
    CHECK_EQ_STR(red(NULL, "http://h?q=a@b"), "http://h?q=a@b");
    CHECK_EQ_STR(red(NULL, "user@example.org"), "user@example.org");
    CHECK_EQ_STR(red(NULL, "://@"), "://***@");
}

static void test_redact_bounds(void) {
    char small[5];
    CHECK_EQ_INT(rsd_arg_redact("--api-key", "0123456789", NULL, 0), 3);
    CHECK_EQ_INT(rsd_arg_redact(NULL, "--api-key=0123456789", small, sizeof small), 13);
    CHECK_EQ_STR(small, "--ap");
}

/* A child's output that echoes a secret argument is scrubbed (white-box: the helper
   rsd_procs_tail and the output logger use). */
static void test_scrub_output(void) {
    static const char args[] = "llama-server\0--api-key\0sk-live-123\0--hf-token=hf_x\0-mu\0"
                               "https://bob:pw@h/m\0--port\0" "8080";
    char text[256];
    size_t n;
    snprintf(text, sizeof text, "error: bad key 'sk-live-123' (sk-live-123), token hf_x, url bob:pw@h, port 8080");
    n = rsdi_text_scrub(text, strlen(text), args, sizeof args);
    text[n] = 0;
    CHECK_EQ_STR(text, "error: bad key '***' (***), token ***, url ***@h, port 8080");
    CHECK_EQ_INT(rsdi_text_scrub(text, 0, args, sizeof args), 0);
    CHECK_EQ_INT(rsdi_text_scrub(text, 5, NULL, 0), 5);
}

/* rsdi_url_redact (the ensurer's error messages): only a URL's user:password hidden, the
   same text rsd_arg_redact gives for a message (which never starts with a flag). */
static void test_url_redact(void) {
    static const char *const msgs[] = {
        "ensure: bad server URL 'http://user:pw@h:8080/v1'",
        "not a model server: GET http://a:b@h/props: HTTP 404, then https://c:d@e",
        "could not take the residency lock for http://h:1: timed out",
        "http://x@y", "no url here", ""};
    char a[128], b[128], small[12];
    size_t i;
    for (i = 0; i < sizeof msgs / sizeof msgs[0]; i++) {
        CHECK_EQ_INT((int)rsdi_url_redact(msgs[i], a, sizeof a), (int)rsd_arg_redact(NULL, msgs[i], b, sizeof b));
        CHECK_EQ_STR(a, b);
    }
    (void)rsdi_url_redact(msgs[0], a, sizeof a);
    CHECK_EQ_STR(a, "ensure: bad server URL 'http://***@h:8080/v1'");
    (void)rsdi_url_redact("--api-key=k http://u:p@h", a, sizeof a); /* no flag rule */
    CHECK_EQ_STR(a, "--api-key=k http://***@h");
    CHECK_EQ_INT((int)rsdi_url_redact(msgs[0], small, sizeof small), (int)rsd_arg_redact(NULL, msgs[0], b, sizeof small));
    CHECK_EQ_STR(small, b);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    RUN(test_escape_controls);
    RUN(test_escape_bounds);
    RUN(test_redact_flags);
    RUN(test_redact_urls);
    RUN(test_redact_bounds);
    RUN(test_scrub_output);
    RUN(test_url_redact);
    return RSD_TEST_END();
}
