/* test_custom_runtime.c -- examples/custom_runtime.c (a runtime added through the
   public hooks only, on the one reconcile machine) runs and does what it prints:
   the eviction of our "b" for "c", in the router order, with the key of its name. */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "residency.h"
#include "rsd_test.h"
#include <stdio.h>
#include <string.h>
#if defined(_WIN32) /* make test-windows (tests/windows.sh): the .exe built there, via cmd */
#include <io.h>
#define EXAMPLE_BIN "build\\win\\bin\\custom_runtime.exe"
#undef X_OK
#define X_OK 0 /* exists: the C runtime's access() has no execute bit */
#define EXITED_0(st) ((st) == 0)
#else
#include <sys/wait.h>
#include <unistd.h>
#define EXAMPLE_BIN "build/examples/custom_runtime"
#define EXITED_0(st) (WIFEXITED(st) && WEXITSTATUS(st) == 0)
#endif

static void test_custom_runtime_example(void) {
    static char out[8192];
    size_t n = 0, got;
    FILE *p;
    int st;
    REQUIRE(access(EXAMPLE_BIN, X_OK) == 0);
    p = popen(EXAMPLE_BIN, "r");
    REQUIRE(p != NULL);
    while (n < sizeof out - 1 && (got = fread(out + n, 1, sizeof out - 1 - n, p)) > 0) n += got;
    out[n] = '\0';
    st = pclose(p);
    CHECK(EXITED_0(st));
    /* list, the plan's notice, stop b, start c, the poll that sees c running */
    CHECK(strstr(out, "GET http://127.0.0.1:9000/api/models -> 200\nnotice: evicting residency-loaded model 'b'") != NULL);
    CHECK(strstr(out, "POST http://127.0.0.1:9000/api/stop {\"model\":\"b\"} -> 200\n"
                      "POST http://127.0.0.1:9000/api/start {\"model\":\"c\"} -> 200\n") != NULL);
    CHECK(strstr(out, "key tinyserve|http://127.0.0.1:9000\n") != NULL);
    CHECK(strstr(out, "outcome resident, ok\nunloaded b\nours now c\n") != NULL);
    CHECK(strstr(out, "/api/stop {\"model\":\"a\"}") == NULL); /* not ours: never touched */
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    RUN(test_custom_runtime_example);
    return RSD_TEST_END();
}
