/* test_app_parse.c -- apps/rsd_app.h, what rsd-serve, rsd-ensure and rsd-sim read alike:
   sizes, durations, percent-encoded text. Each program read its own grammar before; every
   form one of them took is taken here with the same value, and what all three refused
   (a sign, junk, overflow) is still refused. Then the programs' wrappers, which add their
   own limits (rsd-serve: RSD_POOL_MAX_BYTES, 32-bit ms; rsd-sim: a sign means forever). */
/* The public API only: linked with the implementation built once (tests/impl.sh). */
#include "../residency.h"
#include "../apps/rsd-serve/rsd_serve.h"
#include "../apps/rsd-sim/rsd_sim.h"
#include "rsd_test.h"

#define GIB ((uint64_t)1 << 30)

static bool size_is(const char *s, uint64_t max, uint64_t want) {
    uint64_t v = 12345;
    return rapp_parse_size(s, strlen(s), max, &v) && v == want;
}
static bool size_bad(const char *s) {
    uint64_t v = 12345;
    return !rapp_parse_size(s, strlen(s), UINT64_MAX, &v) && v == 12345;
}
static bool dur_is(const char *s, bool bare, uint64_t max, uint64_t want) {
    uint64_t v = 12345;
    return rapp_parse_duration(s, strlen(s), bare, max, &v) && v == want;
}
static bool dur_bad(const char *s, bool bare) {
    uint64_t v = 12345;
    return !rapp_parse_duration(s, strlen(s), bare, UINT64_MAX, &v) && v == 12345;
}

/* rsd-serve's old grammar (digits, K/M/G/T, optional i, optional B) and rsd-ensure's
   (digits, K/M/G/T) */
static void test_size_integer_forms(void) {
    CHECK(size_is("0", UINT64_MAX, 0));
    CHECK(size_is("512", UINT64_MAX, 512));
    CHECK(size_is("4K", UINT64_MAX, 4096) && size_is("4k", UINT64_MAX, 4096));
    CHECK(size_is("4KB", UINT64_MAX, 4096) && size_is("4kb", UINT64_MAX, 4096));
    CHECK(size_is("4KiB", UINT64_MAX, 4096) && size_is("4Ki", UINT64_MAX, 4096));
    CHECK(size_is("3MiB", UINT64_MAX, (uint64_t)3 << 20) && size_is("3m", UINT64_MAX, (uint64_t)3 << 20));
    CHECK(size_is("2gb", UINT64_MAX, 2 * GIB) && size_is("6G", UINT64_MAX, 6 * GIB));
    CHECK(size_is("1T", UINT64_MAX, (uint64_t)1 << 40) && size_is("1t", UINT64_MAX, (uint64_t)1 << 40));
    CHECK(size_is("7B", UINT64_MAX, 7) && size_is("7b", UINT64_MAX, 7));
    CHECK(size_is("18446744073709551615", UINT64_MAX, UINT64_MAX));
    CHECK(size_is("16777215T", UINT64_MAX, (uint64_t)16777215 << 40));
}

/* rsd-sim's old grammar added fractions ("1.5GB"); now every program takes them */
static void test_size_fractions(void) {
    CHECK(size_is("1.5G", UINT64_MAX, 3 * GIB / 2));
    CHECK(size_is("1.5GB", UINT64_MAX, 3 * GIB / 2) && size_is("1.5GiB", UINT64_MAX, 3 * GIB / 2));
    CHECK(size_is("512MiB", UINT64_MAX, (uint64_t)512 << 20));
    CHECK(size_is(".5M", UINT64_MAX, (uint64_t)1 << 19));
    CHECK(size_is("2.", UINT64_MAX, 2));
    CHECK(size_is("1.5", UINT64_MAX, 1));   /* cut to whole bytes */
    CHECK(size_is("0.1", UINT64_MAX, 0));
    CHECK(size_is("0.25K", UINT64_MAX, 256));
}

static void test_size_rejects(void) {
    CHECK(size_bad("") && size_bad("G") && size_bad(".") && size_bad("KB"));
    CHECK(size_bad("-1") && size_bad("-1G") && size_bad("+1"));                 /* a sign */
    CHECK(size_bad(" 1") && size_bad("1 ") && size_bad("4 G"));                 /* a blank */
    CHECK(size_bad("4Q") && size_bad("lots") && size_bad("x") && size_bad("4KiBx"));
    CHECK(size_bad("4iB") && size_bad("4BB") && size_bad("1..5G") && size_bad("1.5.G"));
    CHECK(size_bad("1e3") && size_bad("0x10") && size_bad("4P"));
    CHECK(size_bad("18446744073709551616"));                                   /* 2^64 */
    CHECK(size_bad("99999999999999999999999"));
    CHECK(size_bad("16777216T") && size_bad("16777216.5T"));                   /* past 2^64 */
    CHECK(!size_is("1025", 1024, 1025) && size_is("1K", 1024, 1024));          /* max */
    CHECK(!size_is("1.01K", 1024, 1034));
    {   /* n bounds the string: what follows is not read */
        uint64_t v = 0;
        CHECK(rapp_parse_size("4Gx", 2, UINT64_MAX, &v) && v == 4 * GIB);
    }
}

/* rsd-serve's old grammar: a number alone is seconds, or digits with ms/s/m/h */
static void test_duration_serve_forms(void) {
    CHECK(dur_is("0", true, 0xFFFFFFFEu, 0));
    CHECK(dur_is("30", true, 0xFFFFFFFEu, 30000));
    CHECK(dur_is("250ms", true, 0xFFFFFFFEu, 250));
    CHECK(dur_is("10s", true, 0xFFFFFFFEu, 10000));
    CHECK(dur_is("5m", true, 0xFFFFFFFEu, 300000));
    CHECK(dur_is("2h", true, 0xFFFFFFFEu, 7200000));
    CHECK(dur_is("4294967s", true, 0xFFFFFFFEu, 4294967000u));
    CHECK(!dur_is("4294968s", true, 0xFFFFFFFEu, 4294968000u));                 /* past max */
    CHECK(!dur_is("5000000", true, 0xFFFFFFFEu, 5000000000u));
    CHECK(dur_is("1.5", true, 0xFFFFFFFEu, 1500));                            /* now: fractions */
    CHECK(dur_is("1h30m", true, 0xFFFFFFFEu, 5400000));                       /* and Go's forms */
}

/* rsd-sim's old grammar: Go durations, "0" without a unit, a number alone only when asked */
static void test_duration_go_forms(void) {
    CHECK(dur_is("0", false, UINT64_MAX, 0));
    CHECK(dur_is("1h30m", false, UINT64_MAX, 5400000));
    CHECK(dur_is("300ms", false, UINT64_MAX, 300));
    CHECK(dur_is("1.5s", false, UINT64_MAX, 1500) && dur_is(".5m", false, UINT64_MAX, 30000));
    CHECK(dur_is("1h0.5m", false, UINT64_MAX, 3630000));
    CHECK(dur_is("10us", false, UINT64_MAX, 0) && dur_is("1500us", false, UINT64_MAX, 1));
    CHECK(dur_is("2000000ns", false, UINT64_MAX, 2));
    CHECK(dur_is("1m1s1ms", false, UINT64_MAX, 61001));
    CHECK(dur_is("5124095h", false, UINT64_MAX, (uint64_t)5124095 * 3600000));
    CHECK(dur_is("10", true, UINT64_MAX, 10000));
}

static void test_duration_rejects(void) {
    CHECK(dur_bad("", true) && dur_bad("s", true) && dur_bad("ms", true) && dur_bad(".s", true));
    CHECK(dur_bad("10", false) && dur_bad("1.5", false));                       /* no unit */
    CHECK(dur_bad("1h30", true) && dur_bad("1h30", false));                     /* unit missing after one */
    CHECK(dur_bad("-1", true) && dur_bad("-1s", false) && dur_bad("+1s", false)); /* a sign */
    CHECK(dur_bad("2d", true) && dur_bad("1x", false) && dur_bad("1hh", false) && dur_bad("1S", false));
    CHECK(dur_bad("30 s", true) && dur_bad(" 30", true) && dur_bad("1h 30m", false));
    CHECK(dur_bad("5124096h", false));                                         /* past 2^64 ns */
    CHECK(dur_bad("18446744073709551616ns", false) && dur_bad("99999999999999999999999", true));
    CHECK(!dur_is("2s", false, 1999, 2000) && dur_is("1999ms", false, 1999, 1999)); /* max */
}

static bool pct_is(const char *s, bool plus, size_t cap, const char *want) {
    char out[64];
    int n = rapp_pct_decode(s, strlen(s), plus, out, cap);
    return n == (int)strlen(want) && !strcmp(out, want);
}
static bool pct_bad(const char *s, size_t cap) {
    char out[64];
    return rapp_pct_decode(s, strlen(s), true, out, cap) == -1;
}

/* rsd-serve's old decoder (strict), which rsd-sim's query reading now uses as well */
static void test_pct_decode(void) {
    char out[8];
    CHECK(pct_is("", true, 64, "") && pct_is("abc", true, 64, "abc"));
    CHECK(pct_is("a%20b", true, 64, "a b") && pct_is("%41%62", false, 64, "Ab"));
    CHECK(pct_is("%2f%2F", false, 64, "//"));
    CHECK(pct_is("a+b", true, 64, "a b") && pct_is("a+b", false, 64, "a+b"));
    CHECK(pct_is("%2B", true, 64, "+"));                                       /* an escaped + stays */
    CHECK(pct_is("chat%3A8b", false, 64, "chat:8b"));
    CHECK(pct_bad("%", 64) && pct_bad("%4", 64) && pct_bad("a%4", 64));       /* cut short */
    CHECK(pct_bad("%zz", 64) && pct_bad("%4g", 64) && pct_bad("%g4", 64));    /* not hex */
    CHECK(pct_is("abc", true, 4, "abc") && pct_bad("abc", 3) && pct_bad("", 0)); /* cap, NUL included */
    CHECK(pct_is("%41%42%43", true, 4, "ABC") && pct_bad("%41%42%43%44", 4));
    CHECK(rapp_pct_decode("a%00b", 5, false, out, sizeof out) == 3 && out[1] == 0 && out[2] == 'b');
    CHECK(rapp_pct_decode("%41zz", 3, false, out, sizeof out) == 1 && !strcmp(out, "A")); /* n bounds it */
}

/* The programs' wrappers: the same grammar under each one's own limits */
static void test_program_wrappers(void) {
    uint64_t b = 0;
    uint32_t ms = 0;
    int64_t sms = 0;
    CHECK(rsrv_parse_size("1.5G", 4, &b) && b == 3 * GIB / 2);
    CHECK(!rsrv_parse_size("300000T", 7, &b));                                 /* RSD_POOL_MAX_BYTES */
    CHECK(rsrv_parse_duration("250ms", 5, &ms) && ms == 250);
    CHECK(rsrv_parse_duration("1h30m", 5, &ms) && ms == 5400000);
    CHECK(rsrv_parse_duration("1193h", 5, &ms) && !rsrv_parse_duration("1194h", 5, &ms)); /* 32-bit ms */
    CHECK(rsim_parse_size("1.5GB") == 3 * GIB / 2 && rsim_parse_size("2KiB") == 2048);
    CHECK(rsim_parse_size("5iB") == 0 && rsim_parse_size("-1G") == 0);
    CHECK(rsim_parse_duration("-1s", 3, false, &sms) && sms == -1);            /* negative: forever */
    CHECK(rsim_parse_duration("-5m", 3, false, &sms) && sms == -1);
    CHECK(rsim_parse_duration("-0", 2, false, &sms) && sms == 0);
    CHECK(rsim_parse_duration("+5s", 3, false, &sms) && sms == 5000);
    CHECK(!rsim_parse_duration("-", 1, true, &sms) && !rsim_parse_duration("--1s", 4, false, &sms));
    CHECK(rsim_parse_duration("30", 2, true, &sms) && sms == 30000 && !rsim_parse_duration("30", 2, false, &sms));
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    RUN(test_size_integer_forms);
    RUN(test_size_fractions);
    RUN(test_size_rejects);
    RUN(test_duration_serve_forms);
    RUN(test_duration_go_forms);
    RUN(test_duration_rejects);
    RUN(test_pct_decode);
    RUN(test_program_wrappers);
    return RSD_TEST_END();
}
