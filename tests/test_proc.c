/* test_proc.c -- child-process supervision (>>proc) with real children.
   The children are this binary itself: RSD_TEST_CHILD=<mode> in the environment
   selects a child behaviour (see child_main), so no extra build rule is needed.
   RSD_TEST_SELF_EXE, when set, is the program that runs this binary, exec'd in its
   place: under qemu-user (tests/cross.sh) a script that runs it through qemu, since
   the host kernel cannot exec a foreign binary without binfmt_misc. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include "rsd_test.h"
#include "portable.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static char self_exe[4096];
static rsd_proc_spawn_method g_method = RSD_PROC_SPAWN_AUTO;

/* Under qemu-user (RSD_TEST_QEMU, set by tests/cross.sh) a few things cannot be had;
   those cases say so and stop. Natively they are never skipped. */
static bool qemu_skip(const char *why) {
    if (!getenv("RSD_TEST_QEMU")) return false;
    printf("  skipped under %s: %s\n", getenv("RSD_TEST_QEMU"), why);
    return true;
}
/* The subreaper tests: qemu-user's prctl emulation answers EINVAL for it. */
#define SUBREAPER_OR_SKIP() \
    do { \
        int sr_ = prctl(PR_SET_CHILD_SUBREAPER, 1); \
        if (sr_ != 0 && qemu_skip("prctl(PR_SET_CHILD_SUBREAPER) is EINVAL in qemu-user")) return; \
        REQUIRE(sr_ == 0); \
    } while (0)

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- child behaviours ------------------------------------------------------- */
static int child_main(const char *mode, int argc, char **argv) {
    int i;
    if (strcmp(mode, "echo-args") == 0) {
        const char *x = getenv("RSD_TEST_X");
        char cwd[512];
        for (i = 1; i < argc; i++) printf("arg %s\n", argv[i]);
        printf("env X=%s HOME=%s\n", x ? x : "(unset)", getenv("HOME") ? "set" : "unset");
        printf("cwd %s\n", getcwd(cwd, sizeof cwd) ? cwd : "?");
        return 0;
    }
    if (strcmp(mode, "bind-port") == 0) {  /* argv: --port N; bind it to prove it is free */
        struct sockaddr_in a;
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        int port = argc > 2 ? atoi(argv[2]) : 0;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons((uint16_t)port);
        if (port > 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 1) == 0)
            printf("bound %d\n", port);
        else
            printf("bind %d failed: %s\n", port, strerror(errno));
        return 0;
    }
    if (strcmp(mode, "chatty") == 0) {  /* argv[1] = bytes to write, in 64-byte lines */
        long total = argc > 1 ? atol(argv[1]) : 1 << 20, n;
        for (n = 0; n < total / 64; n++) printf("line %09ld ................................................\n", n);
        printf("done\n");
        return 0;
    }
    if (strcmp(mode, "exit") == 0) {
        printf("starting\nabout to fail\n");
        fflush(stdout);
        fprintf(stderr, "error: last words\n");
        return argc > 1 ? atoi(argv[1]) : 3;
    }
    if (strcmp(mode, "crash") == 0) {
        struct rlimit rl;
        rl.rlim_cur = rl.rlim_max = 0;
        setrlimit(RLIMIT_CORE, &rl);
        printf("crashing\n");
        fflush(stdout);
        signal(SIGABRT, SIG_DFL);
        raise(SIGABRT);
        return 0;
    }
    if (strcmp(mode, "ignore-term") == 0) {
        signal(SIGTERM, SIG_IGN);
        printf("ignoring\n");
        fflush(stdout);
        for (;;) pause();
    }
    if (strcmp(mode, "sleep") == 0) {
        printf("sleeping\n");
        fflush(stdout);
        for (;;) pause();
    }
    if (strcmp(mode, "fds") == 0) {  /* which descriptors did we inherit? */
        int fd;
        printf("fds:");
        for (fd = 0; fd < 4096; fd++)
            if (fcntl(fd, F_GETFD) >= 0) printf(" %d", fd);
        printf("\n");
        return 0;
    }
    if (strcmp(mode, "middle") == 0) {  /* spawn a sleeping grandchild, report it, die */
        rsd_procs_desc d;
        rsd_procs *p;
        rsd_proc_h h;
        rsd_proc_info info;
        static const char *const env[] = {"RSD_TEST_CHILD=sleep", NULL};
        static const char *const args[] = {NULL};
        rsd_proc_spec s;
        memset(&d, 0, sizeof d);
        memset(&s, 0, sizeof s);
        if (getenv("RSD_TEST_METHOD")) d.spawn = (rsd_proc_spawn_method)atoi(getenv("RSD_TEST_METHOD"));
        s.exe = getenv("RSD_TEST_SELF_EXE") ? getenv("RSD_TEST_SELF_EXE") : argv[0];
        s.args = args;
        s.env = env;
        p = rsd_procs_create(&d);
        if (!p || rsd_procs_spawn(p, &s, 0, &h) != RSD_OK) return 2;
        rsd_procs_query_proc(p, h, &info);
        printf("grandchild %lld\n", (long long)info.pid);
        fflush(stdout);
        _exit(0); /* no destroy: the grandchild must die by PDEATHSIG */
    }
    fprintf(stderr, "unknown child mode %s\n", mode);
    return 99;
}

/* ---- helpers ------------------------------------------------------------------ */
/* Events pump() saw for other processes, handed out later. */
static rsd_proc_event stash[32];
static int stash_n;

static rsd_procs *mk(uint32_t grace_ms, uint32_t ring) {
    rsd_procs_desc d;
    stash_n = 0;
    memset(&d, 0, sizeof d);
    d.max_procs = 4;
    d.term_grace_ms = grace_ms;
    d.ring_bytes = ring;
    d.spawn = g_method;
    d.survive_parent = g_method == RSD_PROC_SPAWN_POSIX;
    return rsd_procs_create(&d);
}

/* A spec running this binary as child `mode` with argv template args. */
static void spec_for(rsd_proc_spec *s, const char *const *env, const char *const *args) {
    memset(s, 0, sizeof *s);
    s->exe = self_exe;
    s->env = env;
    s->args = args;
}


/* Drives p with the real clock, waiting in poll() on its descriptors, until an event
   of kind for h arrives (other events are dropped) or timeout_ms passes. */
static bool pump(rsd_procs *p, rsd_proc_h h, rsd_proc_event_kind kind, uint32_t timeout_ms,
                 rsd_proc_event *out) {
    uint64_t start = now_ms(), end = start + timeout_ms;
    for (;;) {
        uint64_t t = now_ms(), next, wake;
        rsd_proc_event ev;
        rsd_pollfd pf[16];
        int n, i;
        CHECK(rsd_procs_step(p, t) >= 0);
        for (i = 0; i < stash_n; i++)
            if (stash[i].proc.id == h.id && stash[i].kind == kind) {
                if (out) *out = stash[i];
                stash[i] = stash[--stash_n];
                return true;
            }
        while (rsd_procs_next_event(p, &ev)) {
            if (ev.proc.id == h.id && ev.kind == kind) {
                if (out) *out = ev;
                return true;
            }
            if (stash_n < 32) stash[stash_n++] = ev;
        }
        next = rsd_procs_next_deadline(p);
        t = now_ms();
        if (t >= end) return false;
        wake = next < end ? next : end;
        n = rsd_procs_pollfds(p, pf, 16);
        (void)rsd_poll(pf, n, wake > t ? (int)(wake - t) : 0);
    }
}

static bool no_children(void) {
    int st;
    return waitpid(-1, &st, WNOHANG) < 0 && errno == ECHILD;
}

/* ---- tests -------------------------------------------------------------------- */
static void test_expand_default_template(void) {
    rsd_proc_spec s;
    char buf[1024];
    const char *argv[64];
    static const char *const extra[] = {"--jinja", "-fa", "on", NULL};
    int n;
    memset(&s, 0, sizeof s);
    s.exe = "/opt/llama/llama-server";
    s.model = "/m/qwen 7b.gguf";
    s.port = 18081;
    s.ctx = 32768;
    s.parallel = 2;
    s.ngl = "99";
    s.alias = "qwen";
    s.extra = extra;
    n = rsd_procs_expand(&s, buf, sizeof buf, argv, 64);
    REQUIRE(n == 18);
    CHECK_EQ_STR(argv[0], "/opt/llama/llama-server");
    CHECK_EQ_STR(argv[1], "-m");
    CHECK_EQ_STR(argv[2], "/m/qwen 7b.gguf");
    CHECK_EQ_STR(argv[3], "--host");
    CHECK_EQ_STR(argv[4], "127.0.0.1");
    CHECK_EQ_STR(argv[5], "--port");
    CHECK_EQ_STR(argv[6], "18081");
    CHECK_EQ_STR(argv[7], "-c");
    CHECK_EQ_STR(argv[8], "32768");
    CHECK_EQ_STR(argv[9], "-np");
    CHECK_EQ_STR(argv[10], "2");
    CHECK_EQ_STR(argv[11], "-ngl");
    CHECK_EQ_STR(argv[12], "99");
    CHECK_EQ_STR(argv[13], "--alias");
    CHECK_EQ_STR(argv[14], "qwen");
    CHECK_EQ_STR(argv[15], "--jinja");
    CHECK_EQ_STR(argv[17], "on");
    CHECK(argv[18] == NULL);
    /* unset optional values drop their flag too; exe defaults to llama-server */
    s.exe = NULL;
    s.ctx = 0;
    s.parallel = -1;
    s.ngl = "";
    s.alias = NULL;
    s.extra = NULL;
    n = rsd_procs_expand(&s, buf, sizeof buf, argv, 64);
    REQUIRE(n == 7);
    CHECK_EQ_STR(argv[0], "llama-server");
    CHECK_EQ_STR(argv[6], "18081");
    CHECK(argv[7] == NULL);
    /* the model is required by the default template */
    s.model = NULL;
    CHECK_EQ_INT(rsd_procs_expand(&s, buf, sizeof buf, argv, 64), RSD_ERR_PROC_TEMPLATE);
    { /* exe_args: verbatim right after argv[0] (the unified binary's `llama serve`) */
        static const char *const sub[] = {"serve", "{port}", NULL};
        s.exe = "llama";
        s.model = "/m/a.gguf";
        s.exe_args = sub;
        n = rsd_procs_expand(&s, buf, sizeof buf, argv, 64);
        REQUIRE(n == 9);
        CHECK_EQ_STR(argv[0], "llama");
        CHECK_EQ_STR(argv[1], "serve");
        CHECK_EQ_STR(argv[2], "{port}"); /* no placeholders there */
        CHECK_EQ_STR(argv[3], "-m");
        CHECK_EQ_STR(argv[4], "/m/a.gguf");
        CHECK_EQ_STR(argv[8], "18081");
        CHECK(argv[9] == NULL);
    }
}

static void test_expand_custom_template(void) {
    rsd_proc_spec s;
    char buf[256];
    const char *argv[16];
    static const char *const t1[] = {"serve", "--listen={host}:{port}", "{extra}", "??literal",
                                     "{{x}}", "?--chat", "{tmpl}", "?--gone", "{nope}",
                                     "--last", NULL};
    static const char *const extra[] = {"A", "B", NULL};
    rsd_proc_var vars[2];
    int n;
    memset(&s, 0, sizeof s);
    vars[0].name = "tmpl";
    vars[0].value = "chatml";
    vars[1].name = "nope";
    vars[1].value = "";
    s.exe = "srv";
    s.args = t1;
    s.extra = extra;
    s.vars = vars;
    s.num_vars = 2;
    s.host = "::1";
    s.port = 9;
    n = rsd_procs_expand(&s, buf, sizeof buf, argv, 16);
    REQUIRE(n == 10);
    CHECK_EQ_STR(argv[1], "serve");
    CHECK_EQ_STR(argv[2], "--listen=::1:9");
    CHECK_EQ_STR(argv[3], "A");
    CHECK_EQ_STR(argv[4], "B");
    CHECK_EQ_STR(argv[5], "?literal");
    CHECK_EQ_STR(argv[6], "{x}");
    CHECK_EQ_STR(argv[7], "--chat");
    CHECK_EQ_STR(argv[8], "chatml");
    CHECK_EQ_STR(argv[9], "--last");
    /* errors: unknown name, unterminated, empty, stray '}', unset required value */
    {
        static const char *const b1[] = {"{bogus}", NULL};
        static const char *const b2[] = {"{port", NULL};
        static const char *const b3[] = {"{}", NULL};
        static const char *const b4[] = {"a}b", NULL};
        static const char *const b5[] = {"--alias", "{alias}", NULL};
        static const char *const b6[] = {"?--flag", NULL};
        static const char *const *const bad[] = {b1, b2, b3, b4, b5, b6};
        size_t i;
        for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            s.args = bad[i];
            CHECK_EQ_INT(rsd_procs_expand(&s, buf, sizeof buf, argv, 16), RSD_ERR_PROC_TEMPLATE);
        }
    }
    /* capacity: too many args, too many bytes */
    s.args = t1;
    CHECK_EQ_INT(rsd_procs_expand(&s, buf, sizeof buf, argv, 5), RSD_ERR_CAPACITY);
    CHECK_EQ_INT(rsd_procs_expand(&s, buf, 20, argv, 16), RSD_ERR_CAPACITY);
    s.num_vars = RSD_PROC_MAX_VARS + 1;
    CHECK_EQ_INT(rsd_procs_expand(&s, buf, sizeof buf, argv, 16), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_procs_expand(NULL, buf, sizeof buf, argv, 16), RSD_ERR_ARG);
}

static void test_port_free_and_passed(void) {
    static const char *const env[] = {"RSD_TEST_CHILD=bind-port", NULL};
    static const char *const args[] = {"--port", "{port}", NULL};
    rsd_procs *p = mk(0, 0);
    rsd_proc_spec s;
    rsd_proc_h h, h2;
    rsd_proc_info info, info2;
    rsd_proc_event ev;
    char tail[256], want[64];
    REQUIRE(p);
    spec_for(&s, env, args);
    REQUIRE(rsd_procs_spawn(p, &s, now_ms(), &h) == RSD_OK);
    REQUIRE(rsd_procs_spawn(p, &s, now_ms(), &h2) == RSD_OK);
    rsd_procs_query_proc(p, h, &info);
    rsd_procs_query_proc(p, h2, &info2);
    CHECK(info.port > 0);
    CHECK(info2.port > 0 && info2.port != info.port);
    CHECK_EQ_INT(info.state, RSD_PROC_STARTING);
    CHECK_EQ_INT(info.argc, 3);
    REQUIRE(pump(p, h, RSD_PROC_EV_EXITED, 10000, &ev));
    CHECK_EQ_INT(ev.exit_code, 0);
    rsd_procs_tail(p, h, 0, tail, sizeof tail);
    snprintf(want, sizeof want, "bound %u\n", (unsigned)info.port);
    CHECK_EQ_STR(tail, want);
    REQUIRE(pump(p, h2, RSD_PROC_EV_EXITED, 10000, &ev));
    rsd_procs_tail(p, h2, 0, tail, sizeof tail);
    snprintf(want, sizeof want, "bound %u\n", (unsigned)info2.port);
    CHECK_EQ_STR(tail, want);
    rsd_procs_destroy(p);
}

static void test_env_cwd_args(void) {
    static const char *const env[] = {"RSD_TEST_CHILD=echo-args", "RSD_TEST_X=hello", "HOME",
                                      NULL};
    static const char *const args[] = {"-m", "{model}", "{extra}", NULL};
    static const char *const extra[] = {"it's", "a b", NULL};
    rsd_procs *p = mk(0, 0);
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    char tail[1024], cmd[1024];
    REQUIRE(p);
    spec_for(&s, env, args);
    s.model = "/models/x.gguf";
    s.extra = extra;
    s.cwd = "/";
    REQUIRE(rsd_procs_spawn(p, &s, now_ms(), &h) == RSD_OK);
    REQUIRE(pump(p, h, RSD_PROC_EV_EXITED, 10000, &ev));
    CHECK_EQ_INT(ev.exit_code, 0);
    CHECK(!ev.was_ready);
    rsd_procs_tail(p, h, 0, tail, sizeof tail);
    CHECK_EQ_STR(tail, "arg -m\narg /models/x.gguf\narg it's\narg a b\n"
                       "env X=hello HOME=unset\ncwd /\n");
    CHECK(rsd_procs_command(p, h, cmd, sizeof cmd) > 0);
    CHECK(strstr(cmd, " -m /models/x.gguf 'it'\\''s' 'a b'") != NULL);
    CHECK_EQ_INT(rsd_procs_forget(p, h), RSD_OK);
    CHECK_EQ_INT(rsd_procs_forget(p, h), RSD_ERR_PROC_STALE);
    rsd_procs_destroy(p);
}

/* The command line quoted for messages shows secret values as *** (rsd_arg_redact). */
static void test_command_redacts_secrets(void) {
    static const char *const env[] = {"RSD_TEST_CHILD=echo-args", NULL};
    static const char *const args[] = {"--api-key", "sk-live-123", "--hf-token=hf_abc", "-mu",
                                       "https://user:pw@example.org/m.gguf", "--note", "it's", NULL};
    rsd_procs *p = mk(0, 0);
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    char cmd[1024], tail[1024];
    REQUIRE(p);
    spec_for(&s, env, args);
    REQUIRE(rsd_procs_spawn(p, &s, now_ms(), &h) == RSD_OK);
    REQUIRE(pump(p, h, RSD_PROC_EV_EXITED, 10000, &ev));
    rsd_procs_tail(p, h, 0, tail, sizeof tail);
    /* the child's output echoes its arguments: the tail shows the secrets as *** too */
    CHECK(strstr(tail, "arg --api-key\narg ***\narg --hf-token=***\narg -mu\narg https://***@example.org/m.gguf\n") != NULL);
    CHECK(strstr(tail, "sk-live") == NULL && strstr(tail, "hf_abc") == NULL);
    CHECK(rsd_procs_command(p, h, cmd, sizeof cmd) > 0);
    CHECK(strstr(cmd, " --api-key *** --hf-token=*** -mu https://***@example.org/m.gguf --note 'it'\\''s'") != NULL);
    CHECK(strstr(cmd, "sk-live") == NULL && strstr(cmd, "hf_abc") == NULL && strstr(cmd, "pw@") == NULL);
    if (strstr(cmd, "sk-live") || !strstr(cmd, "--api-key ***")) printf("  command: %s\n", cmd);
    rsd_procs_destroy(p);
}

static void test_chatty_ring(void) {
    static const char *const env[] = {"RSD_TEST_CHILD=chatty", NULL};
    static const char *const args[] = {"4194304", NULL};
    rsd_procs *p = mk(0, 4096);
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    rsd_proc_info info;
    char tail[4096];
    REQUIRE(p);
    spec_for(&s, env, args);
    REQUIRE(rsd_procs_spawn(p, &s, now_ms(), &h) == RSD_OK);
    REQUIRE(pump(p, h, RSD_PROC_EV_EXITED, 60000, &ev));  /* it finished: never blocked */
    CHECK_EQ_INT(ev.exit_code, 0);
    rsd_procs_query_proc(p, h, &info);
    CHECK_EQ_INT(info.out_bytes, 4194304 + 5);
    CHECK_EQ_INT(info.out_lines, 4194304 / 64 + 1);
    rsd_procs_tail(p, h, 3, tail, sizeof tail);
    CHECK_EQ_STR(tail, "line 000065534 ................................................\n"
                       "line 000065535 ................................................\ndone\n");
    /* the whole ring: starts at a line boundary, ends with the last line */
    CHECK(rsd_procs_tail(p, h, 0, tail, sizeof tail) > 4096 - 130);
    CHECK(strncmp(tail, "line ", 5) == 0);
    /* a small buffer keeps the end */
    CHECK_EQ_INT(rsd_procs_tail(p, h, 0, tail, 8), 5);
    CHECK_EQ_STR(tail, "done\n");
    /* a buffer that ends up at a line's start keeps that line */
    CHECK_EQ_INT(rsd_procs_tail(p, h, 0, tail, 64 + 5 + 1), 64 + 5);
    CHECK_EQ_STR(tail, "line 000065535 ................................................\ndone\n");
    rsd_procs_destroy(p);
}

/* rsd_procs_check says what a spawn would fail on, without starting anything: a
   template placeholder left unset, a program not found / not executable / a directory,
   and (default llama-server template only) an unreadable model file. */
static void test_check_before_spawn(void) {
    static const char *const needs_ctx[] = {"--ctx", "{ctx}", NULL};
    static const char *const custom[] = {"--model-name", "{model}", NULL};
    rsd_procs *p = mk(0, 0);
    rsd_proc_spec s;
    rsd_proc_h h;
    char why[256];
    REQUIRE(p);
    spec_for(&s, NULL, NULL);
    s.model = self_exe; /* any readable file */
    CHECK_EQ_INT(rsd_procs_check(p, &s, why, sizeof why), RSD_OK);
    CHECK_EQ_STR(why, "");
    s.exe = "sh"; /* found through PATH */
    CHECK_EQ_INT(rsd_procs_check(p, &s, why, sizeof why), RSD_OK);
    s.exe = "rsd-no-such-binary-xyz";
    CHECK_EQ_INT(rsd_procs_check(p, &s, why, sizeof why), RSD_ERR_SPAWN);
    CHECK_EQ_STR(why, "cannot run rsd-no-such-binary-xyz: No such file or directory");
    s.exe = "/nonexistent/llama-server";
    CHECK_EQ_INT(rsd_procs_check(p, &s, why, sizeof why), RSD_ERR_SPAWN);
    CHECK(strstr(why, "/nonexistent/llama-server: No such file or directory") != NULL);
    s.exe = "/tmp";
    CHECK_EQ_INT(rsd_procs_check(p, &s, why, sizeof why), RSD_ERR_SPAWN);
    CHECK(strstr(why, "Is a directory") != NULL);
    s.exe = "/dev/null";
    CHECK_EQ_INT(rsd_procs_check(p, &s, why, sizeof why), RSD_ERR_SPAWN);
    CHECK(strstr(why, "Permission denied") != NULL);
    s.exe = self_exe;
    s.model = "/nonexistent/m.gguf";
    CHECK_EQ_INT(rsd_procs_check(p, &s, why, sizeof why), RSD_ERR_SPAWN);
    CHECK_EQ_STR(why, "cannot read model file /nonexistent/m.gguf: No such file or directory");
    s.model = "/tmp";
    CHECK_EQ_INT(rsd_procs_check(p, &s, why, sizeof why), RSD_ERR_SPAWN);
    s.model = NULL; /* the default template needs {model} */
    CHECK_EQ_INT(rsd_procs_check(p, &s, why, sizeof why), RSD_ERR_PROC_TEMPLATE);
    CHECK(strstr(why, "command template") != NULL);
    s.args = needs_ctx;
    CHECK_EQ_INT(rsd_procs_check(p, &s, why, sizeof why), RSD_ERR_PROC_TEMPLATE);
    s.ctx = 4096;
    CHECK_EQ_INT(rsd_procs_check(p, &s, NULL, 0), RSD_OK);
    s.args = custom; /* {model} of a custom command need not be a file */
    s.model = "qwen3:8b";
    CHECK_EQ_INT(rsd_procs_check(p, &s, why, sizeof why), RSD_OK);
    CHECK_EQ_INT(rsd_procs_check(NULL, &s, why, sizeof why), RSD_ERR_ARG);
    /* nothing was started */
    CHECK_EQ_INT(rsd_procs_live(p, &h, 1), 0);
    CHECK(!rsd_procs_next_event(p, NULL));
    rsd_procs_destroy(p);
}

static void test_spawn_missing_binary(void) {
    static const char *const args[] = {NULL};
    const char *bad[] = {"/nonexistent/rsd-no-such-binary", "rsd-no-such-binary-xyz", "/dev/null"};
    int want[] = {ENOENT, ENOENT, EACCES};
    int i;
    rsd_procs *p;
    if (g_method == RSD_PROC_SPAWN_POSIX &&
        qemu_skip("glibc's posix_spawn reports an exec error through memory its CLONE_VM|CLONE_VFORK "
                  "child shares, and qemu-user runs that clone as a plain fork"))
        return;
    p = mk(0, 0);
    REQUIRE(p);
    for (i = 0; i < 3; i++) {
        rsd_proc_spec s;
        rsd_proc_h h;
        rsd_proc_event ev;
        rsd_proc_info info;
        uint64_t t0 = now_ms();
        spec_for(&s, NULL, args);
        s.exe = bad[i];
        CHECK_EQ_INT(rsd_procs_spawn(p, &s, t0, &h), RSD_ERR_SPAWN);
        REQUIRE(h.id != 0);
        /* the event is queued at once, before any step (W31: no waiting) */
        REQUIRE(rsd_procs_next_event(p, &ev));
        CHECK_EQ_INT(ev.kind, RSD_PROC_EV_SPAWN_FAILED);
        CHECK_EQ_INT(ev.err, want[i]);
        CHECK_EQ_INT(ev.pid, 0);
        CHECK(ev.proc.id == h.id);
        CHECK_EQ_INT(rsd_procs_query_proc(p, h, &info), RSD_OK);
        CHECK_EQ_INT(info.state, RSD_PROC_FAILED);
        CHECK_EQ_INT(rsd_procs_mark_ready(p, h, t0), RSD_ERR_STATE);
        CHECK(no_children());
        CHECK_EQ_INT(rsd_procs_forget(p, h), RSD_OK);
    }
    rsd_procs_destroy(p);
}

static void test_early_exit_and_crash(void) {
    static const char *const env_exit[] = {"RSD_TEST_CHILD=exit", NULL};
    static const char *const env_crash[] = {"RSD_TEST_CHILD=crash", NULL};
    static const char *const args_exit[] = {"7", NULL};
    static const char *const args_none[] = {NULL};
    rsd_procs *p = mk(0, 0);
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    rsd_proc_info info;
    char tail[256];
    REQUIRE(p);
    spec_for(&s, env_exit, args_exit);
    REQUIRE(rsd_procs_spawn(p, &s, now_ms(), &h) == RSD_OK);
    REQUIRE(pump(p, h, RSD_PROC_EV_EXITED, 10000, &ev));
    CHECK_EQ_INT(ev.exit_code, 7);
    CHECK_EQ_INT(ev.term_signal, 0);
    CHECK(!ev.killed && !ev.was_ready);
    rsd_procs_tail(p, h, 2, tail, sizeof tail);
    CHECK(strstr(tail, "error: last words\n") != NULL);  /* stderr lands in the ring */
    CHECK(strstr(tail, "starting") == NULL);           /* only the last 2 lines */
    CHECK_EQ_INT(rsd_procs_query_proc(p, h, &info), RSD_OK);
    CHECK_EQ_INT(info.state, RSD_PROC_EXITED);
    CHECK_EQ_INT(info.exit_code, 7);
    rsd_procs_forget(p, h);

    /* a crash while ready: EXITED with the signal and was_ready */
    spec_for(&s, env_crash, args_none);
    REQUIRE(rsd_procs_spawn(p, &s, now_ms(), &h) == RSD_OK);
    CHECK_EQ_INT(rsd_procs_mark_ready(p, h, now_ms()), RSD_OK);
    CHECK_EQ_INT(rsd_procs_mark_ready(p, h, now_ms()), RSD_ERR_STATE);
    REQUIRE(pump(p, h, RSD_PROC_EV_EXITED, 10000, &ev));
    CHECK_EQ_INT(ev.term_signal, SIGABRT);
    CHECK_EQ_INT(ev.exit_code, -1);
    CHECK(ev.was_ready);
    if (getenv("RSD_TEST_QEMU")) { /* qemu-user adds its own last line for a guest killed by a signal */
        rsd_procs_tail(p, h, 2, tail, sizeof tail);
        CHECK(!strncmp(tail, "crashing\nqemu: uncaught target signal ", 38));
    } else {
        rsd_procs_tail(p, h, 1, tail, sizeof tail);
        CHECK_EQ_STR(tail, "crashing\n");
    }
    rsd_procs_destroy(p);
    CHECK(no_children());
}

/* Also what rsd_procs_query says on the way: the processes by state, the events waiting,
   and the supervisor's clock (the latest now_ms a call gave it), which a running
   process's uptime runs to. */
static void test_stop_graceful(void) {
    static const char *const env[] = {"RSD_TEST_CHILD=sleep", NULL};
    static const char *const args[] = {NULL};
    rsd_procs *p = mk(0, 0);
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    rsd_proc_info info;
    rsd_procs_info pi;
    uint64_t t0 = now_ms(), t1;
    REQUIRE(p);
    rsd_procs_query(NULL, &pi);
    CHECK(pi.max_procs == 0 && pi.live == 0 && pi.now_ms == 0);
    rsd_procs_query(p, &pi);
    CHECK(pi.max_procs == 4 && pi.live == 0);
    spec_for(&s, env, args);
    REQUIRE(rsd_procs_spawn(p, &s, t0, &h) == RSD_OK);
    rsd_procs_query(p, &pi);
    CHECK(pi.live == 1 && pi.starting == 1 && pi.ready == 0 && pi.stopping == 0 && pi.exited == 0);
    CHECK(pi.now_ms == t0);
    t1 = now_ms();
    CHECK_EQ_INT(rsd_procs_mark_ready(p, h, t1), RSD_OK);
    rsd_procs_query(p, &pi);
    CHECK(pi.live == 1 && pi.starting == 0 && pi.ready == 1 && pi.now_ms == t1);
    CHECK_EQ_INT(rsd_procs_query_proc(p, h, &info), RSD_OK);
    CHECK(info.uptime_ms == t1 - t0);
    CHECK_EQ_INT(rsd_procs_stop(p, h, now_ms()), RSD_OK);
    CHECK_EQ_INT(rsd_procs_stop(p, h, now_ms()), RSD_OK);  /* idempotent */
    rsd_procs_query_proc(p, h, &info);
    CHECK_EQ_INT(info.state, RSD_PROC_STOPPING);
    rsd_procs_query(p, &pi);
    CHECK(pi.live == 1 && pi.ready == 0 && pi.stopping == 1);
    CHECK_EQ_INT(rsd_procs_forget(p, h), RSD_ERR_STATE);
    REQUIRE(pump(p, h, RSD_PROC_EV_STOPPED, 10000, &ev));
    CHECK_EQ_INT(ev.term_signal, SIGTERM);
    CHECK(!ev.killed);
    CHECK(ev.was_ready);
    rsd_procs_query(p, &pi);
    CHECK(pi.live == 0 && pi.stopping == 0 && pi.exited == 1);
    CHECK(pi.events_waiting == 0 && pi.events_dropped == 0);
    CHECK_EQ_INT(rsd_procs_stop(p, h, now_ms()), RSD_OK);  /* already gone */
    CHECK_EQ_INT(rsd_procs_forget(p, h), RSD_OK);
    rsd_procs_query(p, &pi);
    CHECK_EQ_INT(pi.exited, 0);
    rsd_procs_destroy(p);
    CHECK(no_children());
}

static void test_stop_escalates_to_sigkill(void) {
    static const char *const env[] = {"RSD_TEST_CHILD=ignore-term", NULL};
    static const char *const args[] = {NULL};
    rsd_procs *p = mk(200, 0);
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    rsd_proc_info info;
    uint64_t t0;
    int guard = 0;
    REQUIRE(p);
    spec_for(&s, env, args);
    REQUIRE(rsd_procs_spawn(p, &s, now_ms(), &h) == RSD_OK);
    /* wait (in poll) until it has installed SIG_IGN and said so */
    do {
        rsd_pollfd pf[4];
        int n = rsd_procs_pollfds(p, pf, 4);
        rsd_poll(pf, n, 100);
        rsd_procs_step(p, now_ms());
        rsd_procs_query_proc(p, h, &info);
    } while (info.out_lines < 1 && ++guard < 200);
    REQUIRE(info.out_lines >= 1);
    t0 = now_ms();
    CHECK_EQ_INT(rsd_procs_stop(p, h, t0), RSD_OK);
    CHECK(rsd_procs_next_deadline(p) <= t0 + 200);
    REQUIRE(pump(p, h, RSD_PROC_EV_STOPPED, 10000, &ev));
    CHECK(ev.killed);
    CHECK_EQ_INT(ev.term_signal, SIGKILL);
    CHECK(ev.at_ms >= t0 + 200);  /* never before the grace period */
    rsd_procs_destroy(p);
    CHECK(no_children());
}

static void test_start_timeout(void) {
    static const char *const env[] = {"RSD_TEST_CHILD=sleep", NULL};
    static const char *const args[] = {NULL};
    rsd_procs *p = mk(0, 0);
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    uint64_t t0 = now_ms();
    REQUIRE(p);
    spec_for(&s, env, args);
    s.start_deadline_ms = 100;
    REQUIRE(rsd_procs_spawn(p, &s, t0, &h) == RSD_OK);
    REQUIRE(pump(p, h, RSD_PROC_EV_START_TIMEOUT, 10000, &ev));
    CHECK(ev.timed_out);
    CHECK(ev.at_ms >= t0 + 100);
    REQUIRE(pump(p, h, RSD_PROC_EV_STOPPED, 10000, &ev));
    CHECK(ev.timed_out);
    CHECK_EQ_INT(ev.term_signal, SIGTERM);
    rsd_procs_destroy(p);
}

static void test_probe_schedule(void) {
    static const char *const env[] = {"RSD_TEST_CHILD=sleep", NULL};
    static const char *const args[] = {NULL};
    rsd_procs *p = mk(0, 0);
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    uint64_t t = 1000, due[16];
    int i, n = 0, timeouts = 0;
    REQUIRE(p);
    spec_for(&s, env, args);
    s.start_deadline_ms = 3000;
    REQUIRE(rsd_procs_spawn(p, &s, t, &h) == RSD_OK);
    CHECK_EQ_INT(rsd_procs_next_deadline(p), 1010);
    CHECK_EQ_INT(rsd_procs_step(p, 1009), 0);
    CHECK_EQ_INT(rsd_procs_next_deadline(p), 1010);
    CHECK(!rsd_procs_next_event(p, &ev));
    CHECK_EQ_INT(rsd_procs_step(p, 1010), 1);     /* the first PROBE waits to be pulled */
    CHECK_EQ_INT(rsd_procs_next_deadline(p), 0);
    /* a fake clock, 1 ms per step: PROBE at 10, 20, 40 ... 500, 500, clamped to 4000 */
    for (t = 1000; t <= 4000; t++) {
        rsd_procs_step(p, t);
        while (rsd_procs_next_event(p, &ev)) {
            if (ev.kind == RSD_PROC_EV_PROBE && n < 16) {
                CHECK(ev.proc.id == h.id);
                due[n++] = ev.at_ms;
            }
            if (ev.kind == RSD_PROC_EV_START_TIMEOUT) timeouts++;
        }
    }
    CHECK_EQ_INT(n, 10);
    CHECK_EQ_INT(due[0], 1010);
    CHECK_EQ_INT(due[1], 1030);
    CHECK_EQ_INT(due[2], 1070);
    CHECK_EQ_INT(due[3], 1150);
    CHECK_EQ_INT(due[4], 1310);
    CHECK_EQ_INT(due[5], 1630);
    CHECK_EQ_INT(due[6], 2130);
    CHECK_EQ_INT(due[7], 2630);
    CHECK_EQ_INT(due[8], 3130);
    CHECK_EQ_INT(due[9], 3630);    /* then 4000 is the start deadline: timeout, no probe */
    CHECK_EQ_INT(timeouts, 1);
    for (i = 0; i < n; i++) CHECK(due[i] < 4000);
    rsd_procs_destroy(p);  /* SIGKILL + reap */
    CHECK(no_children());
    /* a ready process gets no probes; an unpulled probe never piles up */
    p = mk(0, 0);
    REQUIRE(p);
    REQUIRE(rsd_procs_spawn(p, &s, 0, &h) == RSD_OK);
    for (t = 0; t < 200; t++) rsd_procs_step(p, t);
    CHECK_EQ_INT(rsd_procs_step(p, 200), 1);      /* still the one PROBE */
    n = 0;
    while (rsd_procs_next_event(p, &ev)) n += ev.kind == RSD_PROC_EV_PROBE;
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(rsd_procs_mark_ready(p, h, 200), RSD_OK);
    for (t = 200; t < 2000; t += 7) rsd_procs_step(p, t);
    CHECK(!rsd_procs_next_event(p, &ev));
    CHECK(rsd_procs_next_deadline(p) == RSD_NO_DEADLINE || rsd_procs_next_deadline(p) > 2000);
    rsd_procs_destroy(p);
    CHECK(no_children());
}

static void test_no_fd_leak_into_child(void) {
    static const char *const env[] = {"RSD_TEST_CHILD=fds", NULL};
    static const char *const args[] = {NULL};
    rsd_procs *p = mk(0, 0);
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    char tail[512];
    int leak = open("/dev/null", O_RDONLY);  /* a host descriptor without O_CLOEXEC */
    REQUIRE(p);
    spec_for(&s, env, args);
    REQUIRE(rsd_procs_spawn(p, &s, now_ms(), &h) == RSD_OK);
    REQUIRE(pump(p, h, RSD_PROC_EV_EXITED, 10000, &ev));
    rsd_procs_tail(p, h, 0, tail, sizeof tail);
    CHECK_EQ_STR(tail, "fds: 0 1 2\n");
    close(leak);
    rsd_procs_destroy(p);
}

static void test_pdeathsig_grandchild_dies(void) {
    static const char *const env_v[] = {"RSD_TEST_CHILD=middle", "RSD_TEST_METHOD=2", NULL};
    static const char *const env_f[] = {"RSD_TEST_CHILD=middle", "RSD_TEST_METHOD=3", NULL};
    const char *const *env = g_method == RSD_PROC_SPAWN_FORK ? env_f : env_v;
    static const char *const args[] = {NULL};
    rsd_procs *p = mk(0, 0);
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    char tail[256];
    long long g = 0;
    int st = 0, pfd;
    struct pollfd pf;
    REQUIRE(p);
    /* become the subreaper so the orphaned grandchild is re-parented to us and we
       can see how it died */
    SUBREAPER_OR_SKIP();
    spec_for(&s, env, args);
    REQUIRE(rsd_procs_spawn(p, &s, now_ms(), &h) == RSD_OK);
    REQUIRE(pump(p, h, RSD_PROC_EV_EXITED, 10000, &ev));
    CHECK_EQ_INT(ev.exit_code, 0);
    rsd_procs_tail(p, h, 0, tail, sizeof tail);
    CHECK(sscanf(tail, "grandchild %lld", &g) == 1 && g > 0);
    if (g > 0) {
        pfd = (int)syscall(SYS_pidfd_open, (pid_t)g, 0);
        REQUIRE(pfd >= 0);
        pf.fd = pfd;
        pf.events = POLLIN;
        pf.revents = 0;
        if (poll(&pf, 1, 10000) != 1) {  /* it exits (bounded wait) */
            CHECK(!"grandchild still alive 10 s after its parent died");
            kill((pid_t)g, SIGKILL);
        }
        close(pfd);
        CHECK(waitpid((pid_t)g, &st, 0) == (pid_t)g);
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    }
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    rsd_procs_destroy(p);
    CHECK(no_children());
}

static void test_destroy_reaps_and_fds(void) {
    static const char *const env[] = {"RSD_TEST_CHILD=sleep", NULL};
    static const char *const args[] = {NULL};
    int fds0 = tp_open_handles(), i;
    rsd_procs *p = mk(0, 0);
    rsd_proc_spec s;
    rsd_proc_h h[4], extra;
    rsd_proc_h live[8];
    REQUIRE(p);
    spec_for(&s, env, args);
    for (i = 0; i < 4; i++) REQUIRE(rsd_procs_spawn(p, &s, now_ms(), &h[i]) == RSD_OK);
    CHECK_EQ_INT(rsd_procs_spawn(p, &s, now_ms(), &extra), RSD_ERR_CAPACITY);
    CHECK_EQ_INT(rsd_procs_live(p, live, 8), 4);
    CHECK(tp_open_handles() > fds0);
    rsd_procs_destroy(p);
    CHECK(no_children());
    CHECK_EQ_INT(tp_open_handles(), fds0);
}

static void test_bad_args(void) {
    rsd_procs_desc d;
    rsd_proc_h h, stale;
    rsd_proc_info info;
    rsd_procs *p;
    char buf[8];
    memset(&d, 0, sizeof d);
    d.max_procs = RSD_PROCS_MAX + 1;
    CHECK(rsd_procs_create(&d) == NULL);
    d.max_procs = 1;
    d.spawn = RSD_PROC_SPAWN_POSIX;  /* POSIX cannot do PDEATHSIG on Linux */
    CHECK(rsd_procs_create(&d) == NULL);
    d.survive_parent = true;
    p = rsd_procs_create(&d);
    REQUIRE(p);
    stale.id = 12345;
    h.id = 0;
    CHECK_EQ_INT(rsd_procs_spawn(p, NULL, 0, &h), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_procs_stop(p, stale, 0), RSD_ERR_PROC_STALE);
    CHECK_EQ_INT(rsd_procs_query_proc(p, stale, &info), RSD_ERR_PROC_STALE);
    CHECK_EQ_INT(rsd_procs_tail(p, stale, 0, buf, sizeof buf), RSD_ERR_PROC_STALE);
    CHECK_EQ_INT(rsd_procs_mark_ready(p, h, 0), RSD_ERR_PROC_STALE);
    CHECK(rsd_procs_next_deadline(p) == RSD_NO_DEADLINE);
    CHECK(!rsd_procs_next_event(p, NULL));
    CHECK_EQ_STR(rsd_proc_state_str(RSD_PROC_KILLING), "KILLING");
    CHECK_EQ_STR(rsd_proc_event_str(99), "UNKNOWN");
    CHECK_EQ_STR(rsd_result_name(RSD_ERR_SPAWN), "ERR_SPAWN");
    rsd_procs_destroy(p);
    rsd_procs_destroy(NULL);
}

/* Output lines reach the logger (log_output) at DEBUG with item PROC_OUTPUT. */
static char log_lines[1024];
static void log_fn(void *user, int level, uint32_t item, const char *msg, const char *where) {
    (void)user; (void)where;
    if (item == RSD_LOGITEM_PROC_OUTPUT && level == RSD_LOG_DEBUG &&
        strlen(log_lines) + strlen(msg) + 2 < sizeof log_lines) {
        strcat(log_lines, msg);
        strcat(log_lines, "|");
    }
}

static void test_log_output_lines(void) {
    static const char *const env[] = {"RSD_TEST_CHILD=exit", NULL};
    static const char *const args[] = {"0", NULL};
    rsd_procs_desc d;
    rsd_procs *p;
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    memset(&d, 0, sizeof d);
    d.log_output = true;
    d.logger.fn = log_fn;
    d.spawn = g_method;
    d.survive_parent = g_method == RSD_PROC_SPAWN_POSIX;
    log_lines[0] = '\0';
    stash_n = 0;
    p = rsd_procs_create(&d);
    REQUIRE(p);
    spec_for(&s, env, args);
    s.name = "tiny";
    REQUIRE(rsd_procs_spawn(p, &s, now_ms(), &h) == RSD_OK);
    REQUIRE(pump(p, h, RSD_PROC_EV_EXITED, 10000, &ev));
    CHECK(strstr(log_lines, "]: starting|") != NULL);
    CHECK(strstr(log_lines, "tiny[") == log_lines);
    CHECK(strstr(log_lines, "]: error: last words|") != NULL);
    rsd_procs_destroy(p);
}

/* stop signals the whole process group: a shell wrapper's own child dies too */
static void test_stop_reaches_process_group(void) {
    static const char *const args[] = {"-c", "sleep 1000 & echo $!; wait", NULL};
    rsd_procs *p = mk(0, 0);
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    rsd_proc_info info;
    long long g = 0;
    int st = 0, guard = 0, pfd;
    char tail[128];
    REQUIRE(p);
    SUBREAPER_OR_SKIP();
    spec_for(&s, NULL, args);
    s.exe = "sh";  /* found through PATH */
    REQUIRE(rsd_procs_spawn(p, &s, now_ms(), &h) == RSD_OK);
    do {
        rsd_pollfd pf[4];
        int n = rsd_procs_pollfds(p, pf, 4);
        rsd_poll(pf, n, 100);
        rsd_procs_step(p, now_ms());
        rsd_procs_query_proc(p, h, &info);
    } while (info.out_lines < 1 && ++guard < 200);
    rsd_procs_tail(p, h, 1, tail, sizeof tail);
    CHECK(sscanf(tail, "%lld", &g) == 1 && g > 0);
    CHECK_EQ_INT(rsd_procs_stop(p, h, now_ms()), RSD_OK);
    REQUIRE(pump(p, h, RSD_PROC_EV_STOPPED, 10000, &ev));
    CHECK_EQ_INT(ev.term_signal, SIGTERM);
    CHECK(!ev.killed);
    if (g > 0) {  /* the sleep was re-parented to us and died of the same SIGTERM: STOPPED
                     came only once the group was gone, and the supervisor reaped it */
        (void)pfd;
        (void)st;
        CHECK(kill((pid_t)g, 0) != 0 && errno == ESRCH);
        if (kill((pid_t)g, 0) == 0) kill((pid_t)g, SIGKILL), (void)waitpid((pid_t)g, &st, 0);
    }
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    rsd_procs_destroy(p);
    CHECK(no_children());
}

/* Waits (bounded by polls of p) until the child's first output line; its tail then. */
static void first_line(rsd_procs *p, rsd_proc_h h, char *tail, size_t cap) {
    rsd_proc_info info;
    int guard = 0;
    do {
        rsd_pollfd pf[4];
        int n = rsd_procs_pollfds(p, pf, 4);
        rsd_poll(pf, n, 100);
        rsd_procs_step(p, now_ms());
        rsd_procs_query_proc(p, h, &info);
    } while (info.out_lines < 1 && ++guard < 200);
    rsd_procs_tail(p, h, 1, tail, cap);
}

/* A wrapper that dies of the SIGTERM while its child ignores it: STOPPED waits for the
   whole group (the child holds the port and the memory), SIGKILL reaches the child at
   the end of the grace period. Before, STOPPED came with the wrapper's exit and the
   child lived on. */
static void test_stop_waits_for_the_group(void) {
    /* the inner sh says its pid only once it ignores SIGTERM, then becomes the sleep */
    static const char *const args[] = {"-c", "sh -c 'trap \"\" TERM; echo $$; exec sleep 1000' & wait", NULL};
    rsd_procs *p = mk(300, 0);
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    long long g = 0;
    uint64_t t0;
    char tail[128];
    int st;
    REQUIRE(p);
    SUBREAPER_OR_SKIP();
    spec_for(&s, NULL, args);
    s.exe = "sh";
    REQUIRE(rsd_procs_spawn(p, &s, now_ms(), &h) == RSD_OK);
    first_line(p, h, tail, sizeof tail);
    CHECK(sscanf(tail, "%lld", &g) == 1 && g > 0);
    t0 = now_ms();
    CHECK_EQ_INT(rsd_procs_stop(p, h, t0), RSD_OK);
    REQUIRE(pump(p, h, RSD_PROC_EV_STOPPED, 10000, &ev));
    CHECK_EQ_INT(ev.term_signal, SIGTERM); /* the wrapper's own end */
    CHECK(ev.killed);                      /* the group needed SIGKILL */
    CHECK(ev.at_ms >= t0 + 300);
    if (g > 0) {
        CHECK(kill((pid_t)g, 0) != 0 && errno == ESRCH); /* gone (and reaped) by STOPPED */
        if (kill((pid_t)g, 0) == 0) kill((pid_t)g, SIGKILL), (void)waitpid((pid_t)g, &st, 0);
    }
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    rsd_procs_destroy(p);
    CHECK(no_children());
}

/* A wrapper that exits by itself leaves children nobody can use: they get SIGKILL and
   EXITED comes once they are gone. */
static void test_exit_takes_the_group(void) {
    static const char *const args[] = {"-c", "sleep 1000 & echo $!; read x; exit 3", NULL};
    rsd_procs *p = mk(0, 0);
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    long long g = 0;
    char tail[128];
    int st;
    REQUIRE(p);
    SUBREAPER_OR_SKIP();
    spec_for(&s, NULL, args);
    s.exe = "sh"; /* stdin is /dev/null: read fails at once, then exit 3 */
    REQUIRE(rsd_procs_spawn(p, &s, now_ms(), &h) == RSD_OK);
    REQUIRE(pump(p, h, RSD_PROC_EV_EXITED, 10000, &ev));
    CHECK_EQ_INT(ev.exit_code, 3);
    CHECK(!ev.killed);
    rsd_procs_tail(p, h, 1, tail, sizeof tail);
    CHECK(sscanf(tail, "%lld", &g) == 1 && g > 0);
    if (g > 0) {
        CHECK(kill((pid_t)g, 0) != 0 && errno == ESRCH);
        if (kill((pid_t)g, 0) == 0) kill((pid_t)g, SIGKILL), (void)waitpid((pid_t)g, &st, 0);
    }
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    rsd_procs_destroy(p);
    CHECK(no_children());
}

/* rsd_procs_destroy SIGKILLs a wrapper's children too, and reaps them. */
static void test_destroy_takes_the_group(void) {
    static const char *const args[] = {"-c", "sh -c 'trap \"\" TERM; echo $$; exec sleep 1000' & wait", NULL};
    rsd_procs *p = mk(0, 0);
    rsd_proc_spec s;
    rsd_proc_h h;
    long long g = 0;
    char tail[128];
    int st;
    REQUIRE(p);
    SUBREAPER_OR_SKIP();
    spec_for(&s, NULL, args);
    s.exe = "sh";
    REQUIRE(rsd_procs_spawn(p, &s, now_ms(), &h) == RSD_OK);
    first_line(p, h, tail, sizeof tail);
    CHECK(sscanf(tail, "%lld", &g) == 1 && g > 0);
    rsd_procs_destroy(p);
    if (g > 0) {
        CHECK(kill((pid_t)g, 0) != 0 && errno == ESRCH);
        if (kill((pid_t)g, 0) == 0) kill((pid_t)g, SIGKILL), (void)waitpid((pid_t)g, &st, 0);
    }
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    CHECK(no_children());
}

/* Without a pidfd (non-Linux, old kernels) exits are found by polling waitpid:
   white-box, the pidfd is closed right after the spawn. */
static void test_exit_found_without_pidfd(void) {
    static const char *const env[] = {"RSD_TEST_CHILD=exit", NULL};
    static const char *const args[] = {"5", NULL};
    rsd_procs *p = mk(0, 0);
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    rsdi_proc_slot *sl;
    REQUIRE(p);
    spec_for(&s, env, args);
    REQUIRE(rsd_procs_spawn(p, &s, now_ms(), &h) == RSD_OK);
    sl = rsdi_proc_get(p, h);
    REQUIRE(sl);
    if (sl->pid_fd >= 0) { close(sl->pid_fd); sl->pid_fd = -1; }
    CHECK(rsd_procs_next_deadline(p) != RSD_NO_DEADLINE);  /* the slow waitpid poll */
    REQUIRE(pump(p, h, RSD_PROC_EV_EXITED, 10000, &ev));
    CHECK_EQ_INT(ev.exit_code, 5);
    rsd_procs_destroy(p);
    CHECK(no_children());
}

static void run_process_tests(void) {
    RUN(test_port_free_and_passed);
    RUN(test_env_cwd_args);
    RUN(test_command_redacts_secrets);
    RUN(test_chatty_ring);
    RUN(test_check_before_spawn);
    RUN(test_spawn_missing_binary);
    RUN(test_early_exit_and_crash);
    RUN(test_stop_graceful);
    RUN(test_stop_escalates_to_sigkill);
    RUN(test_start_timeout);
    RUN(test_no_fd_leak_into_child);
    RUN(test_destroy_reaps_and_fds);
    RUN(test_log_output_lines);
    RUN(test_stop_reaches_process_group);
    RUN(test_stop_waits_for_the_group);
    RUN(test_exit_takes_the_group);
    RUN(test_destroy_takes_the_group);
    RUN(test_exit_found_without_pidfd);
}

int main(int argc, char **argv) {
    const char *mode = getenv("RSD_TEST_CHILD"), *wrapper = getenv("RSD_TEST_SELF_EXE");
    ssize_t n;
    if (mode) return child_main(mode, argc, argv);
    if (wrapper && *wrapper) {
        n = (ssize_t)snprintf(self_exe, sizeof self_exe, "%s", wrapper);
    } else {
        n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
        if (n > 0) self_exe[n] = '\0';
    }
    if (n <= 0 || n >= (ssize_t)sizeof self_exe) return 1;
    RSD_TEST_BEGIN(argc, argv);
    RUN(test_expand_default_template);
    RUN(test_expand_custom_template);
    RUN(test_bad_args);
    RUN(test_probe_schedule);
    RUN(test_pdeathsig_grandchild_dies);
    g_method = RSD_PROC_SPAWN_AUTO;  /* Linux: vfork + PDEATHSIG */
    run_process_tests();
    g_method = RSD_PROC_SPAWN_FORK;  /* fork + PDEATHSIG */
    RUN(test_pdeathsig_grandchild_dies);
    run_process_tests();
    g_method = RSD_PROC_SPAWN_POSIX; /* posix_spawn */
    run_process_tests();
    return RSD_TEST_END();
}
