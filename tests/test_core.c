/* Core utilities: results, log items, string views, size helpers, allocator rules. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include "rsd_test.h"

static void test_result_strings(void) {
    CHECK_EQ_STR(rsd_result_name(RSD_OK), "OK");
    CHECK_EQ_STR(rsd_result_name(RSD_ERR_TIMEOUT), "ERR_TIMEOUT");
    CHECK_EQ_STR(rsd_result_str(RSD_ERR_ARG), "invalid argument");
    CHECK(rsd_result_str(-9999) != NULL);
    CHECK(rsd_result_str(12345) != NULL);
    CHECK(RSD_PENDING > 0);
}

static void test_log_items(void) {
    CHECK_EQ_STR(rsd_log_item_name(RSD_LOGITEM_ALLOC_FAILED), "ALLOC_FAILED");
    CHECK_EQ_STR(rsd_log_item_name(0xFFFFFFFFu), "UNKNOWN");
}

static void test_str(void) {
    rsd_str a = rsd_str_c("abc"), n = rsd_str_c(NULL);
    CHECK(a.len == 3 && n.len == 0);
    CHECK(rsd_str_eq_c(a, "abc"));
    CHECK(!rsd_str_eq_c(a, "abd"));
    CHECK(!rsd_str_eq_c(a, "ab"));
    CHECK(rsd_str_eq(n, rsd_str_c("")));
}

static void test_sizes(void) {
    size_t out = 7;
    CHECK(rsdi_size_add(1, 2, &out) && out == 3);
    CHECK(!rsdi_size_add((size_t)-1, 1, &out) && out == 3);
    CHECK(rsdi_size_mul(0, (size_t)-1, &out) && out == 0);
    CHECK(!rsdi_size_mul((size_t)-1 / 2 + 1, 2, &out));
}

static int n_alloc, n_free;
static void *cnt_alloc(size_t n, void *u) { (void)u; n_alloc++; return malloc(n); }
static void cnt_free(void *p, void *u) { (void)u; n_free++; free(p); }

static void test_allocator(void) {
    rsd_allocator half = {cnt_alloc, NULL, NULL}, both = {cnt_alloc, cnt_free, NULL}, none = {0};
    void *p;
    CHECK_EQ_INT(rsdi_allocator_check(&half), RSD_ERR_ARG);
    CHECK_EQ_INT(rsdi_allocator_check(&both), RSD_OK);
    CHECK_EQ_INT(rsdi_allocator_check(&none), RSD_OK);
    p = rsdi_malloc(&both, 16);
    rsdi_free(&both, p);
    CHECK(n_alloc == 1 && n_free == 1);
    p = rsdi_malloc(&none, 16);
    CHECK(p != NULL);
    rsdi_free(&none, p);
}

static int logged_level;
static char logged_msg[64];
static void lg_fn(void *u, int level, uint32_t item, const char *msg, const char *where) {
    (void)u; (void)item; (void)where;
    logged_level = level;
    snprintf(logged_msg, sizeof logged_msg, "%s", msg ? msg : "");
}

static void test_logf(void) {
    rsd_logger lg = {lg_fn, NULL}, silent = {0};
    rsdi_logf(&lg, RSD_LOG_WARN, RSD_LOGITEM_OK, RSDI_WHERE, "x=%d", 42);
    CHECK_EQ_INT(logged_level, RSD_LOG_WARN);
    CHECK_EQ_STR(logged_msg, "x=42");
    rsdi_logf(&silent, RSD_LOG_WARN, RSD_LOGITEM_OK, NULL, "nothing");
    rsdi_logf(NULL, RSD_LOG_WARN, RSD_LOGITEM_OK, NULL, "nothing");
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    RUN(test_result_strings);
    RUN(test_log_items);
    RUN(test_str);
    RUN(test_sizes);
    RUN(test_allocator);
    RUN(test_logf);
    return RSD_TEST_END();
}
