/* test_proc_portable.c -- the process supervisor (>>proc) on every platform it runs on:
   POSIX (make test) and Windows (make test-windows, under wine). The child is this
   binary again, run with --child MODE (RSD_TEST_SELF_EXE, when set, is the program that
   runs it: tests/cross.sh's qemu wrapper). Windows-only cases say so and are skipped on
   POSIX (test_proc covers the POSIX machinery in depth); what wine cannot show is
   printed as a skip with its reason. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include "rsd_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(_WIN32)
#include <windows.h>
#include <shellapi.h> /* CommandLineToArgvW: -lshell32 */
#else
#include <unistd.h>
#endif

static char self_exe[4096];

static void nap(int ms) { (void)rsd_poll(NULL, 0, ms); }

/* ---- child behaviours ------------------------------------------------------- */
static int child_main(int argc, char **argv) {
    const char *mode = argv[2];
    int i;
    if (strcmp(mode, "echo") == 0) {
#if defined(_WIN32)
        /* main()'s argv went through the ANSI code page: the UTF-16 command line is what
           was sent (llama-server reads it the same way) */
        int wn = 0;
        wchar_t **wv = CommandLineToArgvW(GetCommandLineW(), &wn);
        char u[1024];
        for (i = 3; wv && i < wn; i++)
            if (WideCharToMultiByte(CP_UTF8, 0, wv[i], -1, u, (int)sizeof u, NULL, NULL) > 0)
                printf("[%s]\n", u);
        if (wv) LocalFree(wv);
        (void)argc;
#else
        for (i = 3; i < argc; i++) printf("[%s]\n", argv[i]);
#endif
        printf("end\n");
        return 0;
    }
    if (strcmp(mode, "exit") == 0) {
        printf("last words\n");
        return argc > 3 ? atoi(argv[3]) : 3;
    }
    if (strcmp(mode, "env") == 0) {
        const char *v = getenv(argv[3]);
        printf("%s=%s\n", argv[3], v ? v : "(unset)");
        return 0;
    }
    if (strcmp(mode, "sleep") == 0) {
        printf("sleeping\n");
        fflush(stdout);
        for (i = 0; i < 600; i++) nap(100); /* 60 s at most */
        return 0;
    }
    if (strcmp(mode, "chatty") == 0) { /* more than a pipe buffer holds */
        for (i = 0; i < 4000; i++) printf("line %06d ..................................................\n", i);
        printf("done\n");
        return 0;
    }
    fprintf(stderr, "unknown child mode %s\n", mode);
    return 99;
}

/* ---- helpers ------------------------------------------------------------------ */
static rsd_procs *mk(uint32_t grace_ms) {
    rsd_procs_desc d;
    memset(&d, 0, sizeof d);
    d.max_procs = 4;
    d.term_grace_ms = grace_ms;
#if !defined(_WIN32) && defined(__linux__)
    d.spawn = RSD_PROC_SPAWN_AUTO;
#endif
    return rsd_procs_create(&d);
}

/* argv template "--child MODE more..." */
static void spec_for(rsd_proc_spec *s, const char *const *args) {
    memset(s, 0, sizeof *s);
    s->exe = self_exe;
    s->args = args;
}

/* Steps p on the real clock, sleeping until its next deadline (rsd_procs_pollfds is empty
   on Windows; on POSIX the sleep is bounded by 20 ms instead of a poll on them), until
   an event of kind for h arrives or timeout_ms passes. */
static bool pump(rsd_procs *p, rsd_proc_h h, rsd_proc_event_kind kind, uint32_t timeout_ms,
                 rsd_proc_event *out) {
    uint64_t end = rsd_now_ms() + timeout_ms;
    for (;;) {
        uint64_t t = rsd_now_ms(), next;
        rsd_proc_event ev;
        CHECK(rsd_procs_step(p, t) >= 0);
        while (rsd_procs_next_event(p, &ev))
            if (ev.proc.id == h.id && ev.kind == kind) {
                if (out) *out = ev;
                return true;
            }
        next = rsd_procs_next_deadline(p);
        t = rsd_now_ms();
        if (t >= end) return false;
        if (next > end) next = end;
        if (next > t + 20) next = t + 20;
        nap(next > t ? (int)(next - t) : 0);
    }
}

static int tail(rsd_procs *p, rsd_proc_h h, char *buf, size_t cap) {
    return rsd_procs_tail(p, h, 0, buf, cap);
}

/* ---- tests -------------------------------------------------------------------- */
/* The Windows command-line quoting, checked as text on every platform. */
static void test_win_quote_rules(void) {
    static const struct { const char *arg, *want; } t[] = {
        {"plain", "plain"},
        {"", "\"\""},
        {"two words", "\"two words\""},
        {"tab\there", "\"tab\there\""},
        {"say \"hi\"", "\"say \\\"hi\\\"\""},
        {"\"", "\"\\\"\""},
        {"back\\slash", "back\\slash"},                  /* no quotes: backslashes literal */
        {"C:\\Program Files\\x\\", "\"C:\\Program Files\\x\\\\\""}, /* trailing: doubled */
        {"a\\\\\"b", "\"a\\\\\\\\\\\"b\""},                /* 2 before a quote: 5 then it */
        {"end\\\\ x\\\\", "\"end\\\\ x\\\\\\\\\""},
        {"{port}", "{port}"},
    };
    char buf[128];
    size_t i, n;
    for (i = 0; i < sizeof t / sizeof t[0]; i++) {
        n = rsdi_proc_win_quote(t[i].arg, buf, sizeof buf - 1);
        REQUIRE(n < sizeof buf);
        buf[n] = '\0';
        CHECK_EQ_STR(buf, t[i].want);
    }
    n = rsdi_proc_win_quote("two words", buf, 3); /* cut: the length needed all the same */
    CHECK_EQ_INT(n, 11);
    {
        const char *argv[] = {"C:\\a b\\x.exe", "-m", "", "q\"", NULL};
        n = rsdi_proc_win_cmdline(argv, buf, sizeof buf - 1);
        buf[n] = '\0';
        CHECK_EQ_STR(buf, "\"C:\\a b\\x.exe\" -m \"\" \"q\\\"\"");
    }
}

/* Tricky arguments come back to the child's main() unchanged (the quoting on Windows,
   execve on POSIX). */
static void test_args_round_trip(void) {
    static const char *const args[] = {"--child", "echo", "two words", "", "say \"hi\"",
                                       "trail\\", "trail space\\", "a\\\\\"b", "\\\\server\\share",
                                       "tab\tin", "caf\xc3\xa9", NULL};
    static const char *const want =
        "[two words]\n[]\n[say \"hi\"]\n[trail\\]\n[trail space\\]\n[a\\\\\"b]\n"
        "[\\\\server\\share]\n[tab\tin]\n[caf\xc3\xa9]\nend\n";
    rsd_procs *p = mk(0);
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    char buf[1024];
    REQUIRE(p);
    spec_for(&s, args);
    REQUIRE(rsd_procs_spawn(p, &s, rsd_now_ms(), &h) == RSD_OK);
    REQUIRE(pump(p, h, RSD_PROC_EV_EXITED, 30000, &ev));
    CHECK_EQ_INT(ev.exit_code, 0);
    CHECK(tail(p, h, buf, sizeof buf) > 0);
    {   /* Windows' C runtime writes \r\n: drop the \r (shown as '?') */
        char *r = buf, *w = buf;
        for (; *r; r++)
            if (!(r[0] == '?' && r[1] == '\n')) *w++ = *r;
        *w = '\0';
    }
    CHECK_EQ_STR(buf, want);
    rsd_procs_destroy(p);
}

static void test_exit_code_and_output(void) {
    static const char *const args[] = {"--child", "exit", "42", NULL};
    rsd_procs *p = mk(0);
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    rsd_proc_info info;
    char buf[256];
    REQUIRE(p);
    spec_for(&s, args);
    REQUIRE(rsd_procs_spawn(p, &s, rsd_now_ms(), &h) == RSD_OK);
    CHECK(rsd_procs_query_proc(p, h, &info) == RSD_OK && info.pid > 0);
    REQUIRE(pump(p, h, RSD_PROC_EV_EXITED, 30000, &ev));
    CHECK_EQ_INT(ev.exit_code, 42);
    CHECK_EQ_INT(ev.term_signal, 0);
    CHECK(!ev.was_ready);
    CHECK(tail(p, h, buf, sizeof buf) > 0 && strstr(buf, "last words"));
    CHECK(rsd_procs_forget(p, h) == RSD_OK);
    rsd_procs_destroy(p);
}

/* A child writing more than the pipe buffer is drained without blocking it. */
static void test_chatty_child_drained(void) {
    static const char *const args[] = {"--child", "chatty", NULL};
    rsd_procs *p = mk(0);
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    rsd_proc_info info;
    char buf[256];
    REQUIRE(p);
    spec_for(&s, args);
    REQUIRE(rsd_procs_spawn(p, &s, rsd_now_ms(), &h) == RSD_OK);
    REQUIRE(pump(p, h, RSD_PROC_EV_EXITED, 60000, &ev));
    CHECK_EQ_INT(ev.exit_code, 0);
    CHECK(rsd_procs_query_proc(p, h, &info) == RSD_OK);
    CHECK(info.out_lines == 4001);
    CHECK(info.out_bytes > 200000);
    CHECK(rsd_procs_tail(p, h, 1, buf, sizeof buf) > 0 && strstr(buf, "done"));
    rsd_procs_destroy(p);
}

static void test_env_set_and_removed(void) {
    static const char *const args[] = {"--child", "env", "RSD_PT_VAR", NULL};
    static const char *const set[] = {"RSD_PT_VAR=hello there", NULL};
    static const char *const del[] = {"RSD_PT_VAR", NULL};
    rsd_procs *p = mk(0);
    rsd_proc_spec s;
    rsd_proc_h h;
    char buf[256];
    REQUIRE(p);
#if defined(_WIN32)
    (void)SetEnvironmentVariableA("RSD_PT_VAR", "ours");
    (void)_putenv("RSD_PT_VAR=ours");
#else
    (void)setenv("RSD_PT_VAR", "ours", 1);
#endif
    spec_for(&s, args);
    REQUIRE(rsd_procs_spawn(p, &s, rsd_now_ms(), &h) == RSD_OK);  /* inherited */
    REQUIRE(pump(p, h, RSD_PROC_EV_EXITED, 30000, NULL));
    CHECK(tail(p, h, buf, sizeof buf) > 0 && strstr(buf, "RSD_PT_VAR=ours"));
    (void)rsd_procs_forget(p, h);
    s.env = set;
    REQUIRE(rsd_procs_spawn(p, &s, rsd_now_ms(), &h) == RSD_OK);  /* overridden */
    REQUIRE(pump(p, h, RSD_PROC_EV_EXITED, 30000, NULL));
    CHECK(tail(p, h, buf, sizeof buf) > 0 && strstr(buf, "RSD_PT_VAR=hello there"));
    (void)rsd_procs_forget(p, h);
    s.env = del;
    REQUIRE(rsd_procs_spawn(p, &s, rsd_now_ms(), &h) == RSD_OK);  /* removed */
    REQUIRE(pump(p, h, RSD_PROC_EV_EXITED, 30000, NULL));
    CHECK(tail(p, h, buf, sizeof buf) > 0 && strstr(buf, "RSD_PT_VAR=(unset)"));
    rsd_procs_destroy(p);
}

static void test_missing_binary(void) {
    static const char *const args[] = {NULL};
    rsd_procs *p = mk(0);
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    char why[256];
    REQUIRE(p);
    memset(&s, 0, sizeof s);
    s.exe = "rsd-no-such-program-xyz";
    s.args = args;
    CHECK(rsd_procs_check(p, &s, why, sizeof why) == RSD_ERR_SPAWN);
    CHECK(strstr(why, "rsd-no-such-program-xyz") != NULL);
    CHECK(rsd_procs_spawn(p, &s, rsd_now_ms(), &h) == RSD_ERR_SPAWN);
    CHECK(rsd_procs_next_event(p, &ev) && ev.kind == RSD_PROC_EV_SPAWN_FAILED);
    CHECK_EQ_INT(ev.err, ENOENT);
    s.exe = self_exe;
    CHECK(rsd_procs_check(p, &s, why, sizeof why) == RSD_OK);
    /* a bare name found in PATH (Windows: with ".exe" added), and only there */
#if defined(_WIN32)
    s.exe = "cmd";
#else
    s.exe = "sh";
#endif
    CHECK(rsd_procs_check(p, &s, why, sizeof why) == RSD_OK);
    {
        static const char *const nopath[] = {"PATH", NULL};
        s.env = nopath; /* the child's PATH is what is searched */
#if defined(_WIN32)
        CHECK(rsd_procs_check(p, &s, why, sizeof why) == RSD_ERR_SPAWN); /* no PATH: not found */
#else
        CHECK(rsd_procs_check(p, &s, why, sizeof why) == RSD_OK); /* /usr/local/bin:/usr/bin:/bin */
#endif
        s.env = NULL;
    }
    rsd_procs_destroy(p);
}

/* Stop: STOPPED arrives, the process is gone. Windows without a console shared with
   the child (wine here) terminates it at once (killed); with one, CTRL_BREAK first. */
static void test_stop_and_kill(void) {
    static const char *const args[] = {"--child", "sleep", NULL};
    rsd_procs *p = mk(60000);
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    uint64_t t0;
    REQUIRE(p);
    spec_for(&s, args);
    REQUIRE(rsd_procs_spawn(p, &s, rsd_now_ms(), &h) == RSD_OK);
    t0 = rsd_now_ms();
    while (rsd_now_ms() - t0 < 30000) { /* wait for "sleeping": it runs */
        rsd_proc_info info;
        (void)rsd_procs_step(p, rsd_now_ms());
        if (rsd_procs_query_proc(p, h, &info) == RSD_OK && info.out_lines) break;
        nap(10);
    }
    CHECK(rsd_procs_stop(p, h, rsd_now_ms()) == RSD_OK);
    REQUIRE(pump(p, h, RSD_PROC_EV_STOPPED, 30000, &ev));
#if defined(_WIN32)
    if (!GetConsoleWindow()) { /* nothing graceful to send: terminated, reported as SIGKILL */
        CHECK(ev.killed);
        CHECK_EQ_INT(ev.term_signal, 9);
    }
#endif
    CHECK(rsd_procs_live(p, NULL, 0) == 0);
    (void)rsd_procs_forget(p, h);
    REQUIRE(rsd_procs_spawn(p, &s, rsd_now_ms(), &h) == RSD_OK);
    CHECK(rsd_procs_kill(p, h, rsd_now_ms()) == RSD_OK);
    REQUIRE(pump(p, h, RSD_PROC_EV_STOPPED, 30000, &ev));
    CHECK(ev.killed);
    CHECK_EQ_INT(ev.term_signal, 9);
    rsd_procs_destroy(p);
}

/* destroy takes a running child with it (and on Windows closes its job). */
static void test_destroy_ends_children(void) {
    static const char *const args[] = {"--child", "sleep", NULL};
    rsd_procs *p = mk(0);
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_info info;
    int64_t pid;
    REQUIRE(p);
    spec_for(&s, args);
    REQUIRE(rsd_procs_spawn(p, &s, rsd_now_ms(), &h) == RSD_OK);
    REQUIRE(rsd_procs_query_proc(p, h, &info) == RSD_OK);
    pid = info.pid;
    rsd_procs_destroy(p);
#if defined(_WIN32)
    {
        HANDLE ph = OpenProcess(SYNCHRONIZE, FALSE, (DWORD)pid);
        CHECK(!ph || WaitForSingleObject(ph, 10000) == WAIT_OBJECT_0);
        if (ph) CloseHandle(ph);
    }
#else
    CHECK(pid > 0);
#endif
}

int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[1], "--child") == 0) return child_main(argc, argv);
#if defined(_WIN32)
    {
        DWORD n = GetModuleFileNameA(NULL, self_exe, (DWORD)sizeof self_exe);
        if (n == 0 || n >= sizeof self_exe) return 1;
    }
#else
    if (getenv("RSD_TEST_SELF_EXE") && strlen(getenv("RSD_TEST_SELF_EXE")) < sizeof self_exe) {
        strcpy(self_exe, getenv("RSD_TEST_SELF_EXE")); /* tests/cross.sh: the qemu wrapper */
    } else {
        ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
        if (n <= 0) {
            if (strlen(argv[0]) >= sizeof self_exe) return 1;
            strcpy(self_exe, argv[0]);
        } else {
            self_exe[n] = '\0';
        }
    }
#endif
    RSD_TEST_BEGIN(argc, argv);
    RUN(test_win_quote_rules);
    RUN(test_args_round_trip);
    RUN(test_exit_code_and_output);
    RUN(test_chatty_child_drained);
    RUN(test_env_set_and_removed);
    RUN(test_missing_binary);
    RUN(test_stop_and_kill);
    RUN(test_destroy_ends_children);
#if defined(_WIN32)
    if (!GetConsoleWindow())
        printf("skip: the CTRL_BREAK grace path of a stop: this process has no console to "
               "share with its children (wine with no terminal console); stops terminate\n");
#endif
    return RSD_TEST_END();
}
