/* rsd_test.h -- the project's tiny test harness (not part of the library).
   A test file defines RESIDENCY_IMPLEMENTATION itself (white-box access to rsdi_),
   writes `static void test_x(void) { CHECK(...); }` functions and a main:
       int main(int argc, char **argv) { RSD_TEST_BEGIN(argc, argv);
                                         RUN(test_x); ...  return RSD_TEST_END(); }
   `./test_foo name` runs only tests whose name contains `name`. The last line
   printed is "N passed, N failed" (one test = one RUN). A main that sets
   rsdt_before_each has it called before every test that runs (a fresh state directory,
   so that no record an earlier test left under a reused port counts in the next). */
#ifndef RSD_TEST_H
#define RSD_TEST_H
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

static int rsdt_passed, rsdt_failed, rsdt_cur_failed;
static const char *rsdt_filter;
static void (*rsdt_before_each)(void);

#define RSD_TEST_BEGIN(argc, argv) (rsdt_filter = (argc) > 1 ? (argv)[1] : NULL)
#define RSD_TEST_END() \
    (printf("%d passed, %d failed\n", rsdt_passed, rsdt_failed), rsdt_failed ? 1 : 0)

#define RUN(fn) do { \
    if (rsdt_filter && !strstr(#fn, rsdt_filter)) break; \
    rsdt_cur_failed = 0; \
    if (rsdt_before_each) rsdt_before_each(); \
    fn(); \
    if (rsdt_cur_failed) { rsdt_failed++; printf("FAIL %s\n", #fn); } \
    else { rsdt_passed++; if (getenv("RSD_TEST_VERBOSE") || getenv("RSD_TEST_PROGRESS")) printf("ok   %s\n", #fn); } \
    fflush(stdout); \
} while (0)

#define CHECK(c) do { if (!(c)) { \
    printf("  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c); rsdt_cur_failed = 1; } \
} while (0)
#define CHECK_EQ_INT(a, b) do { long long rsdt_a = (long long)(a), rsdt_b = (long long)(b); \
    if (rsdt_a != rsdt_b) { printf("  %s:%d: %s == %s failed: %lld != %lld\n", \
        __FILE__, __LINE__, #a, #b, rsdt_a, rsdt_b); rsdt_cur_failed = 1; } } while (0)
#define CHECK_EQ_STR(a, b) do { const char *rsdt_sa = (a), *rsdt_sb = (b); \
    if (!rsdt_sa || !rsdt_sb || strcmp(rsdt_sa, rsdt_sb) != 0) { \
        printf("  %s:%d: %s == %s failed: \"%s\" != \"%s\"\n", __FILE__, __LINE__, #a, #b, \
            rsdt_sa ? rsdt_sa : "(null)", rsdt_sb ? rsdt_sb : "(null)"); rsdt_cur_failed = 1; } \
} while (0)
/* Stop the current test on failure (for checks later lines depend on). */
#define REQUIRE(c) do { if (!(c)) { \
    printf("  %s:%d: REQUIRE(%s) failed\n", __FILE__, __LINE__, #c); rsdt_cur_failed = 1; return; } \
} while (0)
#endif
