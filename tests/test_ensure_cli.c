/* test_ensure_cli.c -- build/bin/rsd-ensure as a product: --help and --version,
   options named in errors, the exit codes scripts tell apart (unreachable, not a model
   server, observe-only and not resident, an API key wanted), plain words for each,
   --list on every runtime, an unknown model answered with the ids the server serves,
   a line of progress while waiting on someone else's load, and the RESIDENCY typo
   warning (once per ensurer, in the library). Against rsd-sim on port 0, a plain HTTP
   server of our own (404 or 200 HTML for everything, as `python3 -m http.server` answers),
   a closed port, and, when one is found, the real llama-server (tests/real_server.h). */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency_http.h"
#include "rsd_test.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#define SIM_BIN "build/bin/rsd-sim"
#define SIM_RUNTIME "router"
#define ENSURE_BIN "build/bin/rsd-ensure"
#define HTTP_BIN "build/bin/rsd-http"
#include "sim_harness.h"
#include "real_server.h"
#include "state_dir.h"
#include "ensure_code.h"

static char g_out[1 << 15], g_err[1 << 14];

/* Runs rsd-ensure with args (NULL-terminated); env is "NAME=VALUE" or "NAME=" (unset)
   entries applied in the child. Its stdout into g_out, stderr into g_err; the exit
   status, or -1. */
static int prog_env(const char *bin, const char *const *env, const char *const *args) {
    const char *argv[40];
    int o[2], e[2], st = 0, n = 0, i;
    size_t no = 0, ne = 0;
    bool oo = true, eo = true;
    pid_t pid;
    argv[n++] = bin;
    for (i = 0; args[i] && n < 39; i++) argv[n++] = args[i];
    argv[n] = NULL;
    g_out[0] = g_err[0] = '\0';
    if (pipe(o) != 0) return -1;
    if (pipe(e) != 0) { close(o[0]); close(o[1]); return -1; }
    fflush(stdout);
    pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(o[1], 1);
        dup2(e[1], 2);
        close(o[0]); close(o[1]); close(e[0]); close(e[1]);
        for (i = 0; env && env[i]; i++) {
            char name[64];
            const char *eq = strchr(env[i], '=');
            snprintf(name, sizeof name, "%.*s", (int)(eq - env[i]), env[i]);
            if (eq[1]) setenv(name, eq + 1, 1);
            else unsetenv(name);
        }
        execv(argv[0], (char *const *)(void *)argv);
        _exit(127);
    }
    close(o[1]);
    close(e[1]);
    while (oo || eo) {
        struct pollfd p[2];
        int k = 0;
        if (oo) { p[k].fd = o[0]; p[k].events = POLLIN; k++; }
        if (eo) { p[k].fd = e[0]; p[k].events = POLLIN; k++; }
        if (poll(p, (nfds_t)k, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (i = 0; i < k; i++) {
            bool is_out = p[i].fd == o[0];
            char *buf = is_out ? g_out : g_err;
            size_t cap = is_out ? sizeof g_out : sizeof g_err, *got = is_out ? &no : &ne;
            ssize_t r;
            if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            r = read(p[i].fd, buf + *got, *got + 1 < cap ? cap - *got - 1 : 0);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                if (is_out) oo = false;
                else eo = false;
                continue;
            }
            *got += (size_t)r;
            buf[*got] = '\0';
        }
    }
    close(o[0]);
    close(e[0]);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int cli_env(const char *const *env, const char *const *args) { return prog_env(ENSURE_BIN, env, args); }

/* The same with RESIDENCY and RESIDENCY_TOKEN unset. */
static int cli(const char *const *args) {
    static const char *const clean[] = {"RESIDENCY=", "RESIDENCY_TOKEN=", NULL};
    return cli_env(clean, args);
}

static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (; (hay = strstr(hay, needle)) != NULL; hay += strlen(needle)) n++;
    return n;
}

#define SHOW_ON_FAIL() do { if (rsdt_cur_failed) printf("  stdout: %s\n  stderr: %s\n", g_out, g_err); } while (0)

/* ---- a plain HTTP server that is not a model server -------------------------------- */
typedef struct plain_server {
    pid_t pid;
    int port;
    char url[64];
} plain_server;

/* Forks a child serving every request with `status` and a small HTML page (what a
   static file server answers), or, with status 0, a server that is not HTTP at all (it
   greets like sshd and closes); 0 with the port, or -1. */
static int plain_start(plain_server *ps, int status) {
    int fds[2];
    uint16_t port = 0;
    memset(ps, 0, sizeof *ps);
    if (pipe(fds) != 0) return -1;
    fflush(stdout);
    ps->pid = fork();
    if (ps->pid < 0) return -1;
    if (ps->pid == 0 && status == 0) { /* not HTTP at all: a greeting line, then close */
        struct sockaddr_in a;
        socklen_t len = sizeof a;
        int lfd = socket(AF_INET, SOCK_STREAM, 0), cfd;
        static const char hello[] = "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n";
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 16) != 0 ||
            getsockname(lfd, (struct sockaddr *)&a, &len) != 0)
            _exit(1);
        port = ntohs(a.sin_port);
        if (write(fds[1], &port, sizeof port) != (ssize_t)sizeof port) _exit(1);
        close(fds[1]);
        for (;;)
            if ((cfd = accept(lfd, NULL, NULL)) >= 0) {
                if (write(cfd, hello, sizeof hello - 1) < 0) {}
                close(cfd);
            }
    }
    if (ps->pid == 0) {
        rsd_http_server *s = rsd_http_server_create(NULL);
        static const char page[] = "<!DOCTYPE html><html><body><h1>Directory listing</h1></body></html>\n";
        rsd_http_header h;
        close(fds[0]);
        port = s ? rsd_http_server_port(s) : 0;
        if (write(fds[1], &port, sizeof port) != (ssize_t)sizeof port || !s) _exit(1);
        close(fds[1]);
        h.name = rsd_str_c("Content-Type");
        h.value = rsd_str_c("text/html; charset=utf-8");
        for (;;) {
            rsd_pollfd pf[40];
            rsd_http_server_event ev;
            int n = rsd_http_server_pollfds(s, pf, 40);
            if (n > 40) n = 40;
            (void)poll((struct pollfd *)(void *)pf, (nfds_t)n, 1000);
            rsd_http_server_step_polled(s, rsd_now_ms(), pf, n);
            while (rsd_http_server_next_event(s, &ev))
                if (ev.type == RSD_HTTP_SEV_REQUEST)
                    (void)rsd_http_respond(s, ev.req, status, &h, 1, page, sizeof page - 1);
        }
    }
    close(fds[1]);
    if (read(fds[0], &port, sizeof port) != (ssize_t)sizeof port || port == 0) port = 0;
    close(fds[0]);
    ps->port = port;
    snprintf(ps->url, sizeof ps->url, "http://127.0.0.1:%d", (int)port);
    return port ? 0 : -1;
}

static void plain_stop(plain_server *ps) {
    if (ps->pid <= 0) return;
    kill(ps->pid, SIGKILL);
    while (waitpid(ps->pid, NULL, 0) < 0 && errno == EINTR) {}
    ps->pid = 0;
}

/* A loopback port nothing listens on (bound, read back, closed). */
static int closed_port(void) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

/* ---- 11: help, version, errors that name the option --------------------------------- */
static void test_help_version(void) {
    static const char *const h[] = {"--help", NULL}, *const hs[] = {"-h", NULL}, *const v[] = {"--version", NULL};
    CHECK_EQ_INT(cli(h), 0);
    CHECK(strncmp(g_out, "usage: rsd-ensure --url URL --model ID", 38) == 0);
    CHECK(g_err[0] == '\0'); /* the help goes to stdout */
    CHECK(strstr(g_out, "--verbose") != NULL);
    CHECK(strstr(g_out, "--list") != NULL && strstr(g_out, "--version") != NULL);
    /* every exit code is documented */
    CHECK(strstr(g_out, "\n  0   resident") != NULL);
    CHECK(strstr(g_out, "\n  2   declined") != NULL);
    CHECK(strstr(g_out, "\n  3   the load failed") != NULL);
    CHECK(strstr(g_out, "\n  4   observe-only") != NULL);
    CHECK(strstr(g_out, "\n  5   server unreachable") != NULL);
    CHECK(strstr(g_out, "\n  6   not a model server") != NULL);
    CHECK(strstr(g_out, "\n  7   ") != NULL);
    CHECK(strstr(g_out, "\n  64  bad command line") != NULL);
    SHOW_ON_FAIL();
    CHECK_EQ_INT(cli(hs), 0);
    CHECK(strncmp(g_out, "usage: rsd-ensure", 17) == 0);
    CHECK_EQ_INT(cli(v), 0);
    CHECK_EQ_STR(g_out, "rsd-ensure (residency.h) " RSD_VERSION_STRING "\n");
    {   /* the README's exit-code table has a row for each code the help lists */
        static char readme[1 << 17];
        static const char *const codes[] = {"0", "2", "3", "4", "5", "6", "7", "64"};
        FILE *f = fopen("README.md", "rb");
        size_t n = f ? fread(readme, 1, sizeof readme - 1, f) : 0;
        unsigned k;
        if (f) fclose(f);
        readme[n] = '\0';
        CHECK(n > 0);
        CHECK_EQ_INT(cli(h), 0);
        for (k = 0; k < sizeof codes / sizeof codes[0]; k++) {
            char row[16], line[16];
            snprintf(row, sizeof row, "\n| %s | ", codes[k]);
            snprintf(line, sizeof line, "\n  %-3s ", codes[k]);
            CHECK(strstr(readme, row) != NULL);
            CHECK(strstr(g_out, line) != NULL);
            if (rsdt_cur_failed) { printf("  exit code %s\n", codes[k]); break; }
        }
    }
    /* the README starts rsd-sim by hand: its --help is there too */
    CHECK_EQ_INT(prog_env(SIM_BIN, NULL, h), 0);
    CHECK(strncmp(g_out, "usage: rsd-sim", 14) == 0);
    CHECK(strstr(g_out, "--models-max") != NULL && strstr(g_out, "--load-ms") != NULL);
    CHECK(g_err[0] == '\0');
}

static void test_bad_usage(void) {
    static const char *const a1[] = {"--bogus", NULL};
    static const char *const a2[] = {"--model", "m", "--url", NULL};
    static const char *const a3[] = {"--url", "http://127.0.0.1:1", "--model", "m", "--context", "x", NULL};
    static const char *const a4[] = {"--url", "http://127.0.0.1:1", NULL};
    static const char *const a5[] = {"--url", "http://127.0.0.1:1", "--model", "m", "--runtime", "vllm", NULL};
    static const char *const a6[] = {"--model", "m", NULL};
    CHECK_EQ_INT(cli(a1), 64);
    CHECK_EQ_STR(g_err, "rsd-ensure: --bogus: unknown option (see --help)\n");
    CHECK(g_out[0] == '\0');
    CHECK_EQ_INT(cli(a2), 64);
    CHECK_EQ_STR(g_err, "rsd-ensure: --url: needs a value (see --help)\n");
    CHECK_EQ_INT(cli(a3), 64);
    CHECK(strstr(g_err, "--context: ") != NULL);
    CHECK_EQ_INT(cli(a4), 64);
    CHECK(strstr(g_err, "--model: required") != NULL);
    CHECK_EQ_INT(cli(a5), 64);
    CHECK(strstr(g_err, "--runtime: auto, llamacpp, lmstudio or ollama") != NULL);
    CHECK_EQ_INT(cli(a6), 64);
    CHECK(strstr(g_err, "--url: required") != NULL);
    SHOW_ON_FAIL();
}

/* ---- 13, 14: unreachable, and not a model server ------------------------------------ */
static void test_unreachable(void) {
    char url[64], want[128];
    int port = closed_port();
    const char *a[] = {"--url", url, "--model", "m", "--no-state", NULL};
    const char *l[] = {"--url", url, "--list", NULL};
    const char *j[] = {"--url", url, "--model", "m", "--no-state", "--json", NULL};
    REQUIRE(port > 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    snprintf(want, sizeof want, "server unreachable: connection refused (%s)\n", url);
    CHECK_EQ_INT(cli(a), 5);
    CHECK_EQ_STR(g_out, want);
    CHECK(strstr(g_out, "observe") == NULL); /* not "degraded: ... (observe: observe: ...)" */
    CHECK_EQ_INT(cli(l), 5);
    CHECK_EQ_STR(g_out, want);
    CHECK_EQ_INT(cli(j), 5);
    CHECK(strstr(g_out, "\"result\":\"ERR_CONNECT\"") != NULL);
    CHECK(strstr(g_out, "\"exit_code\":5") != NULL);
    SHOW_ON_FAIL();
#ifdef RSD_HTTP_MBEDTLS
    /* mbedTLS is installed (the tests build with it): so are the programs, and an https
       URL is tried, not refused by the build */
    snprintf(url, sizeof url, "https://127.0.0.1:%d", port);
    snprintf(want, sizeof want, "server unreachable: connection refused (%s)\n", url);
    CHECK_EQ_INT(cli(a), 5);
    CHECK_EQ_STR(g_out, want);
    SHOW_ON_FAIL();
#endif
}

static void check_not_server(const char *url, int status) {
    static const char *const rts[] = {NULL, "llamacpp", "ollama", "lmstudio"};
    int i;
    for (i = 0; i < 4; i++) {
        const char *a[] = {"--url", url, "--model", "m", "--no-state", NULL, NULL, NULL};
        const char *l[] = {"--url", url, "--list", NULL, NULL, NULL};
        if (rts[i]) {
            a[5] = l[3] = "--runtime";
            a[6] = l[4] = rts[i];
        }
        CHECK_EQ_INT(cli(a), 6);
        CHECK(strstr(g_out, "not a model server: ") != NULL);
        CHECK(strstr(g_out, "ok (HTTP") == NULL);
        CHECK_EQ_INT(cli(l), 6);
        CHECK(strstr(g_out, "not a model server: ") != NULL);
        CHECK(strstr(g_out, "ok (HTTP") == NULL && strstr(g_out, "resident:") == NULL);
        if (rsdt_cur_failed) {
            printf("  HTTP %d, runtime %s\n", status, rts[i] ? rts[i] : "auto");
            SHOW_ON_FAIL();
            return;
        }
    }
}

static void test_not_a_model_server(void) {
    plain_server p404, p200;
    REQUIRE(plain_start(&p404, 404) == 0);
    REQUIRE(plain_start(&p200, 200) == 0);
    check_not_server(p404.url, 404);
    {   /* detection names what it asked and what came back */
        const char *a[] = {"--url", p404.url, "--model", "m", "--no-state", NULL};
        CHECK_EQ_INT(cli(a), 6);
        CHECK(strstr(g_out, "not as a llama.cpp router, Ollama or LM Studio (GET /props: HTTP 404)") != NULL);
    }
    check_not_server(p200.url, 200);
    plain_stop(&p404);
    plain_stop(&p200);
    {   /* not even HTTP: "not a model server", not "unreachable" */
        plain_server ssh;
        REQUIRE(plain_start(&ssh, 0) == 0);
        {
            const char *a[] = {"--url", ssh.url, "--model", "m", "--no-state", NULL};
            CHECK_EQ_INT(cli(a), 6);
            CHECK(strncmp(g_out, "not a model server: GET ", 24) == 0);
            SHOW_ON_FAIL();
        }
        plain_stop(&ssh);
    }
}

/* ---- 13, 14: observe-only, the flag named as the flag --------------------------------- */
static void test_observe(void) {
    static const char *const args[] = {"--load-ms", "20", "--model", "id=a", "--model", "id=b", NULL};
    static const char *const env_obs[] = {"RESIDENCY=observe", "RESIDENCY_TOKEN=", NULL};
    sim_proc s;
    int base;
    REQUIRE(sim_start(&s, args) == 0);
    {
        const char *a[] = {"--url", s.url, "--model", "a", "--no-state", NULL};
        CHECK_EQ_INT(cli(a), 0);
    }
    base = sim_log(&s);
    {
        const char *a[] = {"--url", s.url, "--model", "b", "--no-state", "--observe", NULL};
        CHECK_EQ_INT(cli(a), 4);
        CHECK(strstr(g_out, "observed: 'b' on ") != NULL);
        CHECK(strstr(g_out, "not resident") != NULL);
        CHECK(strstr(g_out, "observe-only: --observe") != NULL);
        CHECK(strstr(g_out, "RESIDENCY") == NULL);
        SHOW_ON_FAIL();
    }
    {
        const char *a[] = {"--url", s.url, "--model", "b", "--no-state", "--observe", "--json", NULL};
        CHECK_EQ_INT(cli(a), 4);
        CHECK(strstr(g_out, "\"reason_text\":\"observe-only: --observe\"") != NULL);
        CHECK(strstr(g_out, "\"exit_code\":4") != NULL);
        SHOW_ON_FAIL();
    }
    {
        const char *a[] = {"--url", s.url, "--model", "b", "--no-state", NULL};
        CHECK_EQ_INT(cli_env(env_obs, a), 4);
        CHECK(strstr(g_out, "observe-only: RESIDENCY=observe") != NULL);
        SHOW_ON_FAIL();
    }
    {   /* observe-only and already resident: 0 */
        const char *a[] = {"--url", s.url, "--model", "a", "--no-state", "--observe", NULL};
        CHECK_EQ_INT(cli(a), 0);
        CHECK(strstr(g_out, ", resident (") != NULL);
    }
    {   /* nothing was loaded by any of them */
        int n = sim_log(&s);
        CHECK_EQ_INT(log_count(base, n, "POST", NULL, NULL), 0);
    }
    sim_stop(&s);
}

/* ---- 15: RESIDENCY typo ----------------------------------------------------------------- */
static void test_residency_typo_cli(void) {
    static const char *const args[] = {"--model", "id=a", "--model", "id=b", NULL};
    static const char *const typo[] = {"RESIDENCY=obsreve", "RESIDENCY_TOKEN=", NULL};
    static const char *const on[] = {"RESIDENCY=managed", "RESIDENCY_TOKEN=", NULL};
    sim_proc s;
    REQUIRE(sim_start(&s, args) == 0);
    {
        const char *a[] = {"--url", s.url, "--model", "a", "--no-state", NULL};
        CHECK_EQ_INT(cli_env(typo, a), 0); /* a typo still manages ... */
        CHECK_EQ_INT(count_of(g_out, "RESIDENCY='obsreve' is not a value residency knows"), 1); /* ... loudly, once */
        CHECK(strstr(g_out, "observe, off, 0, false, user or user-managed") != NULL);
        CHECK(strstr(g_out, "on, 1, true or managed") != NULL);
        SHOW_ON_FAIL();
    }
    {
        const char *a[] = {"--url", s.url, "--model", "b", "--no-state", "--json", NULL};
        CHECK_EQ_INT(cli_env(typo, a), 0);
        CHECK(strstr(g_out, "\"kind\":\"degraded\",\"level\":\"warning\",\"message\":\"RESIDENCY='obsreve'") != NULL);
        SHOW_ON_FAIL();
    }
    {
        const char *a[] = {"--url", s.url, "--model", "a", "--no-state", NULL};
        CHECK_EQ_INT(cli_env(on, a), 0);
        CHECK(strstr(g_out, "not a value residency knows") == NULL);
        CHECK_EQ_INT(cli(a), 0);
        CHECK(strstr(g_out, "not a value residency knows") == NULL);
    }
    sim_stop(&s);
}

/* The notice is the library's, once per ensurer (not once per ensure); known values and
   --observe say nothing. */
static void test_residency_typo_lib(void) {
    static const char *const args[] = {"--model", "id=a", "--model", "id=b", NULL};
    static const char *const vals[] = {"obsreve", " Managed ", "ON", "1", "true", "off", "", NULL};
    sim_proc s;
    rsd_ensurer_desc d;
    rsd_ensurer *e;
    rsd_ensure_req q;
    rsd_ensure_result res;
    int i, k, warned;
    CHECK(!rsd_env_known("obsreve"));
    CHECK(!rsd_env_known("yes"));
    CHECK(rsd_env_known(NULL) && rsd_env_known("") && rsd_env_known(" on ") && rsd_env_known("MANAGED"));
    CHECK(rsd_env_known("observe") && rsd_env_known("user-managed") && rsd_env_known("0"));
    REQUIRE(sim_start(&s, args) == 0);
    for (k = 0; vals[k]; k++) {
        memset(&d, 0, sizeof d);
        d.no_state = true;
        d.no_cache = true;
        d.residency_env = vals[k];
        e = rsd_ensurer_create(&d);
        REQUIRE(e != NULL);
        warned = 0;
        for (i = 0; i < 3; i++) {
            int j;
            memset(&q, 0, sizeof q);
            q.url = s.url;
            q.model = i == 1 ? "b" : "a";
            (void)rsd_ensurer_sync(e, &q, &res);
            for (j = 0; j < res.n_notices; j++)
                if (res.notices[j].dmsg == RSD_DMSG_ENV_UNKNOWN) {
                    warned++;
                    CHECK_EQ_INT(res.notices[j].notice.level, RSD_LEVEL_WARNING);
                    CHECK(strstr(res.notices[j].text, vals[k]) != NULL);
                }
        }
        CHECK_EQ_INT(warned, k == 0 ? 1 : 0);
        if (rsdt_cur_failed) printf("  RESIDENCY='%s': %d warnings\n", vals[k], warned);
        rsd_ensurer_destroy(e);
    }
    sim_stop(&s);
    {   /* LM Studio's machine says it too */
        static const char *const lms[] = {SIM_BIN, "--runtime", "lmstudio", "--port", "0", "--load-ms", "10",
                                          "--model", "id=a,size=1G", NULL};
        listen_proc l;
        REQUIRE(listen_proc_start(&l, lms, -1) == 0);
        memset(&d, 0, sizeof d);
        d.no_state = true;
        d.residency_env = "obsreve";
        e = rsd_ensurer_create(&d);
        REQUIRE(e != NULL);
        memset(&q, 0, sizeof q);
        q.url = l.url;
        q.model = "a";
        CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
        CHECK_EQ_INT(res.runtime, RSD_RUNTIME_LMSTUDIO);
        CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
        for (warned = 0, i = 0; i < res.n_notices; i++) warned += res.notices[i].dmsg == RSD_DMSG_ENV_UNKNOWN;
        CHECK_EQ_INT(warned, 1);
        rsd_ensurer_destroy(e);
        (void)listen_proc_stop(&l);
    }
}

/* ---- 13: an unknown model, answered with what the server serves ---------------------- */
static void test_unknown_model(void) {
    static const char *const few[] = {"--model", "id=alpha", "--model", "id=beta", NULL};
    static const char *const many[] = {"--model", "id=m1", "--model", "id=m2", "--model", "id=m3", "--model", "id=m4",
                                       "--model", "id=m5", "--model", "id=m6", "--model", "id=m7", NULL};
    sim_proc s;
    REQUIRE(sim_start(&s, few) == 0);
    {
        const char *a[] = {"--url", s.url, "--model", "nope", "--no-state", NULL};
        CHECK_EQ_INT(cli(a), 3);
        CHECK(strstr(g_out, "'nope' is not served there: it serves 2 models: alpha, beta") != NULL);
        SHOW_ON_FAIL();
    }
    sim_stop(&s);
    REQUIRE(sim_start(&s, many) == 0);
    {
        const char *a[] = {"--url", s.url, "--model", "nope", "--no-state", "--json", NULL};
        CHECK_EQ_INT(cli(a), 3);
        CHECK(strstr(g_out, "it serves 7 models: m1, m2, m3, m4, m5 and 2 more") != NULL);
        SHOW_ON_FAIL();
    }
    {   /* a served model that fails to load is not called unknown */
        const char *a[] = {"--url", s.url, "--model", "m1", "--no-state", NULL};
        char body[64];
        rsd_http_client *c = rsd_http_client_create(NULL);
        rsd_http_request q;
        rsd_http_event ev;
        char u[128];
        REQUIRE(c != NULL);
        snprintf(u, sizeof u, "%s/_sim/fail-loads", s.url);
        snprintf(body, sizeof body, "{\"count\":1}");
        memset(&q, 0, sizeof q);
        q.method = "POST";
        q.url = u;
        q.body = body;
        q.body_len = strlen(body);
        q.content_type = "application/json";
        CHECK_EQ_INT(rsd_http_request_sync(c, &q, &ev), RSD_OK);
        rsd_http_client_destroy(c);
        CHECK_EQ_INT(cli(a), 3);
        CHECK(strstr(g_out, "is not served there") == NULL);
        SHOW_ON_FAIL();
    }
    sim_stop(&s);
}

/* ---- 13: progress while waiting on a load someone else started ----------------------- */
static void test_wait_progress(void) {
    /* the other load takes 4 s: rsd-ensure starts and lists long before it ends, however
       busy the machine (it is a spawn and two requests) */
    static const char *const args[] = {"--load-ms", "4000", "--model", "id=a", "--model", "id=b", NULL};
    sim_proc s;
    rsd_http_client *c;
    rsd_http_request q;
    rsd_http_event ev;
    char u[128];
    int n;
    REQUIRE(sim_start(&s, args) == 0);
    c = rsd_http_client_create(NULL);
    REQUIRE(c != NULL);
    snprintf(u, sizeof u, "%s/models/load", s.url);
    memset(&q, 0, sizeof q);
    q.method = "POST";
    q.url = u;
    q.body = "{\"model\":\"b\"}";
    q.body_len = strlen(q.body);
    q.content_type = "application/json";
    CHECK_EQ_INT(rsd_http_request_sync(c, &q, &ev), RSD_OK);
    CHECK_EQ_INT(ev.status, 200);
    rsd_http_client_destroy(c);
    {
        const char *a[] = {"--url", s.url, "--model", "b", "--no-state", NULL};
        CHECK_EQ_INT(cli(a), 0);
        CHECK(strstr(g_out, "waiting for 'b' (being loaded by someone else) ... ") != NULL);
        CHECK(strstr(g_out, "loading 'b'") == NULL);
        CHECK(strstr(g_out, "resident: 'b' on ") != NULL);
        SHOW_ON_FAIL();
    }
    n = sim_log(&s);
    CHECK_EQ_INT(log_count(0, n, "POST", "/models/load", NULL), 1); /* only the other one's */
    sim_stop(&s);
}

/* A later router that answers concurrent cold loads with 500 "model limit reached, try
   again later" (build 11037, rsd-sim --limit-loads): rsd-ensure loads again after a
   backoff and ends resident, with no failure said. */
static void test_cold_load_limit_retried(void) {
    static const char *const args[] = {"--load-ms", "20", "--limit-loads", "2", "--model", "id=b", NULL};
    const char *a[] = {"--url", NULL, "--model", "b", "--no-state", NULL};
    sim_proc s;
    int n;
    g_router_gen = "later";
    REQUIRE(sim_start(&s, args) == 0);
    a[1] = s.url;
    CHECK_EQ_INT(cli(a), 0);
    CHECK(strstr(g_out, "resident: 'b' on ") != NULL);
    CHECK(strstr(g_out, "fail") == NULL);
    SHOW_ON_FAIL();
    n = sim_log(&s);
    CHECK_EQ_INT(log_count(0, n, "POST", "/models/load", NULL), 3); /* two refused, then started */
    CHECK_EQ_INT(log_count(0, n, "POST", "/models/unload", NULL), 0);
    sim_stop(&s);
    g_router_gen = NULL;
}

/* The stage a router's /models/sse names for our load shows on the loading line, from
   July's progress shape ("current") and the later one ("stage", PR #24828) alike. */
static void test_load_stage_progress(void) {
    static const char *const args[] = {"--load-ms", "400", "--model", "id=a", NULL};
    size_t g;
    for (g = 0; g < sizeof g_router_gens / sizeof g_router_gens[0]; g++) {
        const char *a[] = {"--url", NULL, "--model", "a", "--no-state", NULL};
        sim_proc s;
        g_router_gen = g_router_gens[g];
        REQUIRE(sim_start(&s, args) == 0);
        a[1] = s.url;
        CHECK_EQ_INT(cli(a), 0);
        CHECK(strstr(g_out, "loading 'a' ... ") != NULL);
        CHECK(strstr(g_out, " [text_model] ") != NULL); /* the last progress event before loaded */
        CHECK(strstr(g_out, "resident: 'a' on ") != NULL);
        SHOW_ON_FAIL();
        sim_stop(&s);
    }
    g_router_gen = NULL;
}

/* Two rsd-ensure processes on one server and one state directory: the second, which
   must change the server too, waits for the target lock the first holds through its
   load, and says so. */
static void test_lock_wait_progress(void) {
    static const char *const args[] = {"--load-ms", "3000", "--model", "id=a", "--model", "id=b", NULL};
    char dir[] = "/tmp/rsd-test-cli-state.XXXXXX";
    sim_proc s;
    pid_t first;
    int i, n = 0, st = 0;
    REQUIRE(mkdtemp(dir) != NULL);
    REQUIRE(sim_start(&s, args) == 0);
    fflush(stdout);
    first = fork();
    REQUIRE(first >= 0);
    if (first == 0) {
        int nul = open("/dev/null", O_WRONLY);
        if (nul >= 0) { dup2(nul, 1); dup2(nul, 2); }
        execl(ENSURE_BIN, ENSURE_BIN, "--url", s.url, "--model", "b", "--state-dir", dir, (char *)NULL);
        _exit(127);
    }
    /* the first one's load is under way (its POST arrived): it holds the lock */
    for (i = 0; i < 1000; i++) {
        n = sim_log(&s);
        if (n > 0 && log_count(0, n, "POST", "/models/load", "b") > 0) break;
        (void)poll(NULL, 0, 5);
    }
    CHECK(n > 0 && log_count(0, n, "POST", "/models/load", "b") == 1);
    {
        /* 'a' fits beside 'b': a change, so it needs the lock (asking for 'b' too would
           only wait on b's load, which test_wait_progress covers) */
        const char *a[] = {"--url", s.url, "--model", "a", "--state-dir", dir, NULL};
        CHECK_EQ_INT(cli(a), 0);
        CHECK(strstr(g_out, "waiting for the residency lock (another ensure is changing this server) ... ") != NULL);
        CHECK(strstr(g_out, "resident: 'a' on ") != NULL);
        SHOW_ON_FAIL();
    }
    CHECK_EQ_INT(waitpid(first, &st, 0), first);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    n = sim_log(&s);
    CHECK_EQ_INT(log_count(0, n, "POST", "/models/load", "b"), 1);
    CHECK_EQ_INT(log_count(0, n, "POST", "/models/load", "a"), 1);
    sim_stop(&s);
    {   /* the state directory: a few small files, one level deep */
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) printf("  could not remove %s\n", dir);
    }
}

/* ---- 12: --list on every runtime, detected or given ------------------------------------ */
static void test_list_runtimes(void) {
    static const char *const oll[] = {"--runtime", "ollama", "--port", "0", "--model", "id=llama3:8b,loaded=1",
                                      "--model", "id=qwen:7b", NULL};
    static const char *const lms[] = {"--runtime", "lmstudio", "--port", "0", "--api-key", "k1", "--model",
                                      "id=a,size=1G,loaded=1", "--model", "id=c,size=1G", NULL};
    static const char *const rt[] = {"--runtime", "router", "--port", "0", "--load-ms", "20", "--model", "id=x",
                                     "--model", "id=y", NULL};
    const char *argv[16];
    listen_proc o, l, r;
    int i;
    argv[0] = SIM_BIN;
    for (i = 0; oll[i]; i++) argv[i + 1] = oll[i];
    argv[i + 1] = NULL;
    REQUIRE(listen_proc_start(&o, argv, -1) == 0);
    for (i = 0; lms[i]; i++) argv[i + 1] = lms[i];
    argv[i + 1] = NULL;
    REQUIRE(listen_proc_start(&l, argv, -1) == 0);
    for (i = 0; rt[i]; i++) argv[i + 1] = rt[i];
    argv[i + 1] = NULL;
    REQUIRE(listen_proc_start(&r, argv, -1) == 0);
    {
        const char *a[] = {"--url", o.url, "--list", NULL};
        const char *b[] = {"--url", o.url, "--list", "--runtime", "ollama", NULL};
        CHECK_EQ_INT(cli(a), 0);
        CHECK_EQ_STR(g_out, "resident: llama3:8b (loaded)\n");
        CHECK_EQ_INT(cli(b), 0);
        CHECK_EQ_STR(g_out, "resident: llama3:8b (loaded)\n");
        SHOW_ON_FAIL();
    }
    {
        const char *a[] = {"--url", l.url, "--list", "--token", "k1", NULL};
        const char *b[] = {"--url", l.url, "--list", "--runtime", "lmstudio", "--token", "k1", NULL};
        const char *c[] = {"--url", l.url, "--list", NULL};
        const char *d[] = {"--url", l.url, "--list", "--token", "wrong", NULL};
        CHECK_EQ_INT(cli(a), 0);
        CHECK_EQ_STR(g_out, "resident: a (loaded)\n");
        CHECK_EQ_INT(cli(b), 0);
        CHECK_EQ_STR(g_out, "resident: a (loaded)\n");
        CHECK_EQ_INT(cli(c), 7);
        CHECK(strstr(g_out, "asks for an API key") != NULL);
        CHECK_EQ_INT(cli(d), 7);
        CHECK(strstr(g_out, "refused the API key") != NULL);
        CHECK(strstr(g_out, "wrong") == NULL); /* never printed */
        SHOW_ON_FAIL();
    }
    {
        const char *a[] = {"--url", r.url, "--list", NULL};
        const char *b[] = {"--url", r.url, "--list", "--runtime", "llamacpp", NULL};
        const char *e[] = {"--url", r.url, "--model", "x", "--no-state", "--quiet", NULL};
        CHECK_EQ_INT(cli(a), 0);
        CHECK_EQ_STR(g_out, "resident: (nothing)\n");
        CHECK_EQ_INT(cli(e), 0);
        CHECK_EQ_INT(cli(a), 0);
        CHECK_EQ_STR(g_out, "resident: x (loaded)\n");
        CHECK_EQ_INT(cli(b), 0);
        CHECK_EQ_STR(g_out, "resident: x (loaded)\n");
        SHOW_ON_FAIL();
    }
    (void)listen_proc_stop(&o);
    (void)listen_proc_stop(&l);
    (void)listen_proc_stop(&r);
}

/* ---- the real llama.cpp router: an unknown model, --list, observe -------------------- */
static char REAL_BIN[1024];
static bool g_real;

/* A real router (--models-max 2) over a new models directory whose preset.ini preset(f,
   dir) writes; 0, or -1 when it does not start. */
static int real_preset_router(real_server *S, char *dir, size_t cap, void (*preset)(FILE *f, const char *dir)) {
    char ini[700];
    FILE *f;
    const char *args[] = {"--models-preset", ini, "--models-max", "2", NULL};
    if (real_models(dir, cap) != 0) return -1;
    snprintf(ini, sizeof ini, "%s/preset.ini", dir);
    if (!(f = fopen(ini, "w"))) return -1;
    preset(f, dir);
    fclose(f);
    return real_start(S, REAL_BIN, dir, args, 60000);
}

static void preset_ab(FILE *f, const char *dir) {
    fprintf(f, "[tiny-a]\nmodel = %s/tiny-a.gguf\nctx-size = 256\n\n[tiny-b]\nmodel = %s/tiny-b.gguf\nctx-size = 256\n",
            dir, dir);
}

static void test_real_router_words(void) {
    char dir[512];
    real_server S;
    if (!g_real) {
        printf("  real llama-server not found: skipped\n");
        return;
    }
    REQUIRE(real_preset_router(&S, dir, sizeof dir, preset_ab) == 0);
    {
        const char *a[] = {"--url", S.url, "--model", "nope", "--no-state", NULL};
        CHECK_EQ_INT(cli(a), 3);
        CHECK(strstr(g_out, "HTTP 404") != NULL);
        CHECK(strstr(g_out, "'nope' is not served there: it serves 2 models: tiny-a, tiny-b") != NULL);
        SHOW_ON_FAIL();
    }
    {
        const char *a[] = {"--url", S.url, "--model", "tiny-a", "--no-state", "--observe", NULL};
        CHECK_EQ_INT(cli(a), 4);
        CHECK(strstr(g_out, "observe-only: --observe") != NULL);
        SHOW_ON_FAIL();
    }
    {
        const char *a[] = {"--url", S.url, "--model", "tiny-a", "--no-state", NULL};
        const char *l[] = {"--url", S.url, "--list", NULL};
        CHECK_EQ_INT(cli(a), 0);
        CHECK_EQ_INT(cli(l), 0);
        CHECK_EQ_STR(g_out, "resident: tiny-a (loaded)\n");
        SHOW_ON_FAIL();
    }
    real_stop(&S);
    rmtree(dir);
}

/* The real router listing 65 models with 72-byte ids (one over the default 64): said so
   in plain words, exit 6; read with --max-models, the model is loaded. Then its loaded
   entry over --max-tokens 64: said so, with the flag that raises it, and --max-tokens 128
   reads it. */
static void preset_65_long(FILE *f, const char *dir) {
    int i;
    for (i = 0; i < 65; i++)
        fprintf(f, "[unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF-UD-Q4_K_XL-long-model-name-%03d]\n"
                   "model = %s/tiny-a.gguf\nctx-size = 256\n\n", i, dir);
}

static void test_real_router_listing_over_the_default(void) {
    char dir[512];
    real_server S;
    if (!g_real) {
        printf("  real llama-server not found: skipped\n");
        return;
    }
    REQUIRE(real_preset_router(&S, dir, sizeof dir, preset_65_long) == 0);
    {
        const char *a[] = {"--url", S.url, "--model", "unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF-UD-Q4_K_XL-long-model-name-000",
                           "--no-state", NULL};
        CHECK_EQ_INT(cli(a), 6);
        CHECK(strstr(g_out, "listing too large: ") != NULL);
        CHECK(strstr(g_out, "holds 64 models") != NULL);
        CHECK(strstr(g_out, "\n  --max-models N reads a larger listing\n") != NULL);
        CHECK(strstr(g_out, "not a model server") == NULL);
        SHOW_ON_FAIL();
    }
    {
        const char *a[] = {"--url", S.url, "--model", "unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF-UD-Q4_K_XL-long-model-name-000",
                           "--no-state", "--max-models", "65", NULL};
        CHECK_EQ_INT(cli(a), 0);
        SHOW_ON_FAIL();
    }
    {
        const char *a[] = {"--url", S.url, "--model", "m", "--no-state", "--max-models", "0", NULL};
        CHECK_EQ_INT(cli(a), 64);
        CHECK(strstr(g_err, "--max-models") != NULL);
        SHOW_ON_FAIL();
    }
    { /* model 000 is loaded now: its entry (about 66 tokens) and the top level are over 64 */
        const char *a[] = {"--url", S.url, "--model", "unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF-UD-Q4_K_XL-long-model-name-000",
                           "--no-state", "--max-models", "65", "--max-tokens", "64", NULL};
        CHECK_EQ_INT(cli(a), 6);
        CHECK(strstr(g_out, "listing too large: ") != NULL);
        CHECK(strstr(g_out, "max_tokens") != NULL);
        CHECK(strstr(g_out, "\n  --max-tokens N reads a larger listing entry\n") != NULL);
        CHECK(strstr(g_out, "--max-models N") == NULL);
        SHOW_ON_FAIL();
    }
    { /* the flag the hint names reads it */
        const char *a[] = {"--url", S.url, "--model", "unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF-UD-Q4_K_XL-long-model-name-000",
                           "--no-state", "--max-models", "65", "--max-tokens", "128", NULL};
        CHECK_EQ_INT(cli(a), 0);
        SHOW_ON_FAIL();
    }
    {
        const char *a[] = {"--url", S.url, "--model", "m", "--no-state", "--max-tokens", "63", NULL};
        CHECK_EQ_INT(cli(a), 64);
        CHECK(strstr(g_err, "--max-tokens: a number of tokens, 64 to 16777216") != NULL);
        SHOW_ON_FAIL();
    }
    {
        const char *a[] = {"--url", S.url, "--model", "m", "--no-state", "--max-body", "1023", NULL};
        CHECK_EQ_INT(cli(a), 64);
        CHECK(strstr(g_err, "--max-body: a number of bytes, 1024 to 2147483647") != NULL);
        SHOW_ON_FAIL();
    }
    real_stop(&S);
    rmtree(dir);
}

/* Starts `rsd-http -s -d BODY URL` in the background (a request that keeps its model
   busy while the test goes on); its pid, or -1. */
static pid_t busy_request(const char *url, const char *body) {
    pid_t pid;
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) { dup2(devnull, 1); dup2(devnull, 2); }
        execl(HTTP_BIN, HTTP_BIN, "-s", "-d", body, url, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* A state directory named name (RESIDENCY_STATE_DIR=... into env_dir), rsd-sim started
   with sim_args, and the n models of order ensured one by one, each by its own rsd-ensure
   with env; false when the sim did not start. */
static bool sim_with_loads(sim_proc *s, const char *const *sim_args, const char *name, char *env_dir,
                           size_t cap, const char *const *env, const char *const *order, int n) {
    int k;
    make_state_dir(name);
    if (!g_state_dir[0]) return false;
    snprintf(env_dir, cap, "RESIDENCY_STATE_DIR=%s", g_state_dir);
    if (sim_start(s, sim_args) != 0) return false;
    for (k = 0; k < n; k++) {
        const char *a[] = {"--url", s->url, "--model", order[k], NULL};
        CHECK_EQ_INT(cli_env(env, a), 0);
    }
    return true;
}

/* The case as a user tries it: a 3-slot router holding bravo, charlie and a
   busy, newest alpha, each ensured by its own rsd-ensure (one state directory shared);
   `rsd-ensure --model delta` evicts bravo, the least recently used, and says why (by id
   it evicted alpha). An ensure of a model already resident counts as a use too. */
static void test_lru_sim(void) {
    sim_proc s;
    static const char *const sim_args[] = {"--models-max", "3", "--load-ms", "20", "--gen-ms", "3000",
                                           "--model", "id=alpha", "--model", "id=bravo", "--model", "id=charlie",
                                           "--model", "id=delta", NULL};
    static const char *const order[] = {"bravo", "charlie", "alpha"};
    char env_dir[300], url[200];
    const char *env[] = {"RESIDENCY=", "RESIDENCY_TOKEN=", env_dir, NULL};
    pid_t busy;
    int st = 0;
    REQUIRE(sim_with_loads(&s, sim_args, "lru", env_dir, sizeof env_dir, env, order, 3));
    snprintf(url, sizeof url, "%s/v1/chat/completions", s.url);
    busy = busy_request(url, "{\"model\":\"alpha\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
    CHECK(busy > 0);
    {
        const char *a[] = {"--url", s.url, "--model", "delta", "--json", NULL};
        CHECK_EQ_INT(cli_env(env, a), 0);
        CHECK(strstr(g_out, "\"reason\":\"EVICT_LRU\"") != NULL);
        CHECK(strstr(g_out, "\"evicted\":[{\"id\":\"bravo\"") != NULL || strstr(g_out, "\"evicted\":[\"bravo\"") != NULL);
        CHECK(strstr(g_out, "evicting residency-loaded model 'bravo' (least recently used)") != NULL);
        CHECK(strstr(g_out, "alpha\"") == NULL || strstr(g_out, "'alpha'") == NULL);
        SHOW_ON_FAIL();
    }
    { /* charlie is the LRU now, but an ensure of the resident charlie is a use: alpha goes next */
        const char *a[] = {"--url", s.url, "--model", "charlie", NULL};
        const char *b[] = {"--url", s.url, "--model", "bravo", NULL};
        const char *l[] = {"--url", s.url, "--list", NULL};
        CHECK_EQ_INT(cli_env(env, a), 0);
        CHECK_EQ_INT(cli_env(env, b), 0);
        CHECK(strstr(g_out, "'alpha' (least recently used)") != NULL);
        SHOW_ON_FAIL();
        CHECK_EQ_INT(cli_env(env, l), 0);
        CHECK(strstr(g_out, "bravo") && strstr(g_out, "charlie") && strstr(g_out, "delta") && !strstr(g_out, "alpha"));
        SHOW_ON_FAIL();
    }
    if (busy > 0) {
        while (waitpid(busy, &st, 0) < 0 && errno == EINTR) {}
    }
    sim_stop(&s);
    remove_state_dir();
}

/* An attribution record over the default 8 KiB of ids (61 models, 60 of them with
   200-byte ids): rsd-ensure says it in a notice naming attr_arena_bytes and leaves the
   record whole; --max-models 256 (128 bytes of ids each) reads it, and the notice goes. */
static void attr_arena_checks(const sim_proc *s, const char *const *env) {
    static char img[16384], back[16384];
    char raw[160], key[RSD_TARGET_KEY_MAX], name[RSD_STATE_MAX_NAME_BYTES], path[600], id[201];
    FILE *f;
    size_t n = 0, m = 0;
    int i;
    snprintf(raw, sizeof raw, "llamacpp|%s", s->url); /* the record's file, as the state names it */
    REQUIRE(rsd_target_key_normalise(rsd_str_c(raw), key, sizeof key) > 0);
    REQUIRE(rsd_state_file_name(key, name, sizeof name) > 0);
    snprintf(path, sizeof path, "%s/attr/%s.attr", g_state_dir, name);
    REQUIRE((f = fopen(path, "rb")) != NULL); /* alpha's ensure wrote it */
    fclose(f);
    n = (size_t)snprintf(img, sizeof img, "residency-attr 1\nalpha\t\t1\t1\n");
    memset(id, 'x', 200);
    id[200] = '\0';
    for (i = 0; i < 60; i++) {
        id[0] = (char)('A' + i % 26);
        id[1] = (char)('a' + i / 26);
        n += (size_t)snprintf(img + n, sizeof img - n, "%s\t\t1\t1\n", id);
    }
    n += (size_t)snprintf(img + n, sizeof img - n, "end 61\n");
    REQUIRE((f = fopen(path, "wb")) != NULL);
    CHECK_EQ_INT(fwrite(img, 1, n, f), n);
    fclose(f);
    {
        const char *a[] = {"--url", s->url, "--model", "alpha", NULL};
        const char *b[] = {"--url", s->url, "--model", "alpha", "--max-models", "256", NULL};
        CHECK_EQ_INT(cli_env(env, a), 0);
        CHECK(strstr(g_out, "over attr_arena_bytes (8192)") != NULL);
        SHOW_ON_FAIL();
        CHECK_EQ_INT(cli_env(env, b), 0);
        CHECK(strstr(g_out, "attr_arena_bytes") == NULL);
        SHOW_ON_FAIL();
    }
    if ((f = fopen(path, "rb")) != NULL) {
        m = fread(back, 1, sizeof back, f);
        fclose(f);
    }
    CHECK(m == n && memcmp(img, back, n) == 0);
}

static void test_attr_arena_follows_max_models(void) {
    sim_proc s;
    static const char *const sim_args[] = {"--models-max", "2", "--load-ms", "20", "--model", "id=alpha", NULL};
    static const char *const order[] = {"alpha"};
    char env_dir[300];
    const char *env[] = {"RESIDENCY=", "RESIDENCY_TOKEN=", env_dir, NULL};
    REQUIRE(sim_with_loads(&s, sim_args, "arena", env_dir, sizeof env_dir, env, order, 1));
    attr_arena_checks(&s, env); /* its REQUIREs return here: the sim is always stopped */
    sim_stop(&s);
    remove_state_dir();
}

/* The lease id from --json output ("lease_id":"...") into id; false when absent. */
static bool lease_of(const char *out, char *id, size_t cap) {
    const char *p = strstr(out, "\"lease_id\":\"");
    size_t n = 0;
    if (!p) return false;
    p += 12;
    while (p[n] && p[n] != '"' && n + 1 < cap) n++;
    memcpy(id, p, n);
    id[n] = '\0';
    return n > 0;
}

/* POSTs body (JSON) to the sim's path; the status, or -1. */
static int sim_post_json(const sim_proc *s, const char *path, const char *body) {
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_request q;
    rsd_http_event ev;
    char u[160];
    int st = -1;
    snprintf(u, sizeof u, "%s%s", s->url, path);
    memset(&q, 0, sizeof q);
    q.url = u;
    q.method = "POST";
    q.body = body;
    q.body_len = strlen(body);
    if (c && rsd_http_request_sync(c, &q, &ev) == RSD_OK) st = ev.status;
    rsd_http_client_destroy(c);
    return st;
}

/* --free-bytes on a router that lists sizes (rsd-sim size=): the least recently used
   models residency loaded go until enough is freed (never a foreign or protected one),
   a lease id is printed, and --release loads them back; nothing of ours to unload is
   exit 2; a lease released twice is unknown the second time. */
static void test_free_bytes_sim(void) {
    sim_proc s;
    static const char *const sim_args[] = {"--models-max", "5", "--load-ms", "20",
                                           "--model", "id=alpha,size=2G", "--model", "id=bravo,size=2G",
                                           "--model", "id=charlie,size=2G", "--model", "id=guarded,size=2G",
                                           "--model", "id=other,size=8G", NULL};
    static const char *const order[] = {"bravo", "guarded", "charlie", "alpha"};
    char env_dir[300], id[64];
    const char *env[] = {"RESIDENCY=", "RESIDENCY_TOKEN=", env_dir, NULL};
    REQUIRE(sim_with_loads(&s, sim_args, "free", env_dir, sizeof env_dir, env, order, 4));
    CHECK_EQ_INT(sim_post_json(&s, "/models/load", "{\"model\":\"other\"}"), 200); /* someone else's: never ours to unload */
    {
        const char *a[] = {"--url", s.url, "--free-bytes", "3G", "--protect", "guarded", "--json", NULL};
        CHECK_EQ_INT(cli_env(env, a), 0);
        CHECK(strstr(g_out, "\"outcome\":\"freed\"") != NULL);
        CHECK(strstr(g_out, "\"evicted\":[\"bravo\",\"charlie\"]") != NULL);
        CHECK(strstr(g_out, "\"freed_bytes\":4294967296") != NULL);
        CHECK(lease_of(g_out, id, sizeof id));
        /* the router is not rsd-serve: its lease endpoint answered 404 once, then the free plan */
        CHECK_EQ_INT(log_count(0, sim_log(&s), "POST", "/_rsd/lease", NULL), 1);
        SHOW_ON_FAIL();
    }
    {
        const char *l[] = {"--url", s.url, "--list", NULL};
        CHECK_EQ_INT(cli_env(env, l), 0);
        CHECK(strstr(g_out, "alpha") && strstr(g_out, "guarded") && strstr(g_out, "other") && !strstr(g_out, "bravo") &&
              !strstr(g_out, "charlie"));
        SHOW_ON_FAIL();
    }
    { /* only alpha is left of ours (guarded is protected): less than asked, still freed */
        const char *a[] = {"--url", s.url, "--free-bytes", "100G", "--protect", "guarded", NULL};
        const char *r[] = {"--release", "nope", NULL};
        CHECK_EQ_INT(cli_env(env, a), 0);
        CHECK(strstr(g_out, "freed: 2.0 GiB of the 100.0 GiB asked") != NULL);
        CHECK(strstr(g_out, "only 2.0 GiB of the 100.0 GiB asked can be freed") != NULL);
        SHOW_ON_FAIL();
        CHECK_EQ_INT(cli_env(env, a), 2); /* nothing of ours left */
        CHECK_EQ_INT(cli_env(env, r), 2);
    }
    {
        const char *r[] = {"--release", id, NULL};
        const char *l[] = {"--url", s.url, "--list", NULL};
        CHECK_EQ_INT(cli_env(env, r), 0);
        CHECK(strstr(g_out, "2 model(s) resident again") != NULL);
        SHOW_ON_FAIL();
        CHECK_EQ_INT(cli_env(env, l), 0);
        CHECK(strstr(g_out, "bravo") && strstr(g_out, "charlie"));
        CHECK_EQ_INT(cli_env(env, r), 2); /* released already */
    }
    {
        const char *a[] = {"--url", s.url, "--free-bytes", "lots", NULL};
        const char *b[] = {"--url", s.url, "--free-bytes", "1G", "--model", "alpha", NULL};
        CHECK_EQ_INT(cli_env(env, a), 64);
        CHECK_EQ_INT(cli_env(env, b), 64);
    }
    sim_stop(&s);
    remove_state_dir();
}

/* --kv-slots (desc.kv_slots) against rsd-sim's router with --slot-save-path: the slot a
   chat left on alpha is saved before `--model bravo` unloads it ("kv_saved":1) and
   restored by the next `--model alpha` ("kv_restored":1); without the flag neither. */
static void test_kv_slots_cli(void) {
    sim_proc s;
    char dir[300];
    const char *sim_args[] = {"--models-max", "1", "--load-ms", "20", "--model", "id=alpha", "--model", "id=bravo",
                              "--slot-save-path", dir, NULL};
    const char *a[] = {"--url", NULL, "--model", "alpha", "--no-state", "--kv-slots", "--json", NULL};
    const char *b[] = {"--url", NULL, "--model", "bravo", "--no-state", "--kv-slots", "--json", NULL};
    const char *plain[] = {"--url", NULL, "--model", "alpha", "--no-state", "--json", NULL};
    make_state_dir("kvcli");
    REQUIRE(g_state_dir[0] != 0);
    snprintf(dir, sizeof dir, "%s", g_state_dir);
    REQUIRE(sim_start(&s, sim_args) == 0);
    a[1] = b[1] = plain[1] = s.url;
    CHECK_EQ_INT(cli(a), 0);
    CHECK_EQ_INT(sim_post_json(&s, "/v1/chat/completions", "{\"model\":\"alpha\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"), 200);
    CHECK_EQ_INT(cli(b), 0);
    CHECK(strstr(g_out, "\"kv_saved\":1") != NULL);
    SHOW_ON_FAIL();
    CHECK_EQ_INT(cli(a), 0);
    CHECK(strstr(g_out, "\"kv_restored\":1") != NULL);
    SHOW_ON_FAIL();
    CHECK_EQ_INT(sim_post_json(&s, "/models/unload", "{\"model\":\"alpha\"}"), 200);
    CHECK_EQ_INT(cli(plain), 0);
    CHECK(strstr(g_out, "\"outcome\":\"resident\"") != NULL && strstr(g_out, "kv_") == NULL);
    SHOW_ON_FAIL();
    sim_stop(&s);
    remove_state_dir();
}

/* The release tests' router: three 2 GB models ensured in this order, room for four. */
static const char *const release_sim[] = {"--models-max", "4", "--load-ms", "20", "--model", "id=alpha,size=2G",
                                          "--model", "id=bravo,size=2G", "--model", "id=charlie,size=2G", NULL};
static const char *const release_order[] = {"bravo", "charlie", "alpha"};

/* A release where one model cannot come back: the lease unloaded bravo and charlie, then
   bravo left the server's catalog. The release loads charlie back and says the lease is
   incomplete and bravo stays in the lease: a second release tries it again (and only it).
   An observe-only release loads nothing, keeps its lease and says so -- not that there is
   no state directory, as it did. */
static void test_release_keeps_what_failed(void) {
    sim_proc s;
    char env_dir[300], id[64];
    const char *env[] = {"RESIDENCY=", "RESIDENCY_TOKEN=", env_dir, NULL};
    int n, loads;
    REQUIRE(sim_with_loads(&s, release_sim, "release-fail", env_dir, sizeof env_dir, env, release_order, 3));
    {
        const char *a[] = {"--url", s.url, "--free-bytes", "4G", "--json", NULL};
        CHECK_EQ_INT(cli_env(env, a), 0);
        CHECK(strstr(g_out, "\"evicted\":[\"bravo\",\"charlie\"]") != NULL);
        CHECK(lease_of(g_out, id, sizeof id));
        SHOW_ON_FAIL();
    }
    CHECK_EQ_INT(sim_post_json(&s, "/_sim/remove", "{\"model\":\"bravo\"}"), 200);
    {
        const char *r[] = {"--release", id, NULL};
        const char *l[] = {"--url", s.url, "--list", NULL};
        CHECK(cli_env(env, r) != 0);
        CHECK(strstr(g_out, "incomplete") != NULL);
        CHECK(strstr(g_out, "bravo") != NULL); /* the words of the one that failed, not of charlie */
        CHECK(strstr(g_out, "no state directory") == NULL);
        SHOW_ON_FAIL();
        CHECK_EQ_INT(cli_env(env, l), 0);
        CHECK(strstr(g_out, "charlie") != NULL);
        n = sim_log(&s);
        CHECK(n >= 0); /* (never REQUIRE with the sim running: it would outlive the test) */
        loads = log_count(0, n, "POST", "/models/load", "charlie");
        CHECK_EQ_INT(loads, 2); /* its first load, and the release */
        CHECK(cli_env(env, r) != 0); /* bravo is still in the lease */
        CHECK(strstr(g_out, "incomplete") != NULL);
        SHOW_ON_FAIL();
        CHECK_EQ_INT(log_count(0, sim_log(&s), "POST", "/models/load", "charlie"), loads); /* it left the lease */
    }
    { /* observe-only: nothing comes back, the lease stays, and the words say why */
        const char *a[] = {"--url", s.url, "--free-bytes", "2G", "--json", NULL};
        const char *r[] = {"--release", id, "--observe", NULL};
        CHECK_EQ_INT(cli_env(env, a), 0);
        CHECK(lease_of(g_out, id, sizeof id));
        CHECK_EQ_INT(cli_env(env, r), 4);
        CHECK(strstr(g_out, "incomplete: observe-only, nothing was loaded") != NULL);
        SHOW_ON_FAIL();
        r[2] = NULL;
        CHECK_EQ_INT(cli_env(env, r), 0); /* the lease was kept */
        CHECK(strstr(g_out, "1 model(s) resident again") != NULL);
        SHOW_ON_FAIL();
    }
    sim_stop(&s);
    remove_state_dir();
}

/* rsd_ensurer_lease_return_sync in the library, with out NULL (a caller that only wants the count):
   both models come back, leave the lease, and the count is returned; the lease is gone
   after. With out, a failed model's result is the one *out gives. */
static void test_release_lib(void) {
    sim_proc s;
    char env_dir[300], id[64];
    const char *env[] = {"RESIDENCY=", "RESIDENCY_TOKEN=", env_dir, NULL};
    rsd_ensurer_desc d;
    rsd_ensurer *e;
    rsd_ensure_req q;
    rsd_ensure_result res;
    int round, failed = 0;
    REQUIRE(sim_with_loads(&s, release_sim, "release-lib", env_dir, sizeof env_dir, env, release_order, 3));
    memset(&d, 0, sizeof d);
    d.state_dir = g_state_dir;
    d.no_cache = true;
    e = rsd_ensurer_create(&d);
    CHECK(e != NULL);
    for (round = 0; e && round < 2; round++) {
        memset(&q, 0, sizeof q);
        q.url = s.url;
        q.free_bytes = 4ull << 30;
        CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
        CHECK_EQ_INT(res.n_evicted, 2);
        CHECK(res.lease_id && res.lease_id[0]);
        snprintf(id, sizeof id, "%s", res.lease_id ? res.lease_id : "");
        if (round == 0) {
            CHECK_EQ_INT(rsd_ensurer_lease_return_sync(e, NULL, id, NULL), 2);
        } else { /* bravo is gone from the catalog: charlie comes back, *out is bravo's failure */
            CHECK_EQ_INT(sim_post_json(&s, "/_sim/remove", "{\"model\":\"bravo\"}"), 200);
            failed = rsd_ensurer_lease_return_sync(e, NULL, id, &res);
            CHECK(failed < 0);
            CHECK_EQ_INT(res.result, failed);
            CHECK(res.outcome != RSD_OUTCOME_RESIDENT);
            CHECK(res.message && strstr(res.message, "bravo") != NULL);
            CHECK_EQ_INT(res.n_notices, 0);
            if (rsdt_cur_failed) printf("  message: %s\n", res.message ? res.message : "(null)");
        }
        CHECK_EQ_INT(rsd_ensurer_lease_return_sync(e, NULL, id, NULL), round == 0 ? RSD_ERR_NOT_FOUND : failed);
    }
    rsd_ensurer_destroy(e);
    sim_stop(&s);
    remove_state_dir();
}

/* A state-directory lease released step by step (rsd_ensurer_lease_return_begin, then step,
   pollfds, next_deadline): while another holder has the lease record's lock the step
   does not wait for it -- it returns PENDING, wants no socket and names the lock's next
   try as its deadline -- and once the lock is free both models come back, one ensure
   each; meanwhile begin is refused. A second release finds no lease. */
static void test_release_steps(void) {
    sim_proc s;
    char env_dir[300], id[64], key[80];
    const char *env[] = {"RESIDENCY=", "RESIDENCY_TOKEN=", env_dir, NULL};
    rsd_ensurer_desc d;
    rsd_state_desc sd;
    rsd_state *other;
    rsd_state_lock lk;
    rsd_ensurer *e;
    rsd_ensure_req q;
    rsd_ensure_result res;
    rsd_pollfd fds[8];
    uint64_t now;
    int rc, steps = 0;
    REQUIRE(sim_with_loads(&s, release_sim, "release-steps", env_dir, sizeof env_dir, env, release_order, 3));
    memset(&d, 0, sizeof d);
    d.state_dir = g_state_dir;
    d.no_cache = true;
    e = rsd_ensurer_create(&d);
    other = NULL;
    memset(&sd, 0, sizeof sd);
    sd.dir = g_state_dir;
    CHECK(e != NULL && (other = rsd_state_create(&sd, NULL)) != NULL); /* (never REQUIRE with the sim running) */
    if (!e || !other) goto out;
    memset(&q, 0, sizeof q);
    q.url = s.url;
    q.free_bytes = 4ull << 30;
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.n_evicted, 2);
    snprintf(id, sizeof id, "%s", res.lease_id ? res.lease_id : "");
    CHECK(id[0] && strchr(id, ':') == NULL); /* a state-directory lease */
    /* another holder has the record's lock */
    snprintf(key, sizeof key, "lease|%s", id);
    now = rsd_now_ms();
    memset(&lk, 0, sizeof lk);
    CHECK_EQ_INT(rsd_state_attr_lock_begin(other, &lk, key, now, now + 60000), RSD_OK);
    CHECK_EQ_INT(rsd_state_lock_step(other, &lk, now), 1); /* its end waits: taken */
    {
        int end = RSD_PENDING;
        CHECK(rsd_state_lock_next_event(&lk, &end) && end == RSD_OK);
    }
    CHECK_EQ_INT(rsd_ensurer_lease_return_begin(e, NULL, id, rsd_now_ms()), RSD_OK);
    now = rsd_now_ms();
    CHECK_EQ_INT(ensure_step_code(e, now), RSD_PENDING);
    CHECK_EQ_INT(rsd_ensurer_pollfds(e, fds, 8), 0);
    CHECK(rsd_ensurer_next_deadline(e) > now && rsd_ensurer_next_deadline(e) != RSD_NO_DEADLINE);
    CHECK_EQ_INT(rsd_ensurer_begin(e, &q, now), RSD_ERR_STATE); /* a release runs */
    rsd_ensurer_query(e, &res);
    CHECK(!res.done && res.result == RSD_PENDING);
    rsd_state_unlock(other, &lk);
    while ((rc = ensure_step_code(e, rsd_now_ms())) == RSD_PENDING && steps++ < 100000) {
        int n = rsd_ensurer_pollfds(e, fds, 8), t;
        uint64_t dl = rsd_ensurer_next_deadline(e);
        now = rsd_now_ms();
        t = dl == RSD_NO_DEADLINE ? 100 : dl > now ? (int)(dl - now > 100 ? 100 : dl - now) : 0;
        if (t > 0) (void)rsd_poll(fds, n > 8 ? 8 : n, t);
    }
    CHECK_EQ_INT(rc, RSD_OK);
    rsd_ensurer_query(e, &res);
    CHECK_EQ_INT(res.restored, 2);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(log_count(0, sim_log(&s), "POST", "/models/load", "bravo"), 2);   /* its first load, and back */
    CHECK_EQ_INT(log_count(0, sim_log(&s), "POST", "/models/load", "charlie"), 2);
    /* the lease is gone */
    CHECK_EQ_INT(rsd_ensurer_lease_return_begin(e, NULL, id, rsd_now_ms()), RSD_OK);
    while ((rc = ensure_step_code(e, rsd_now_ms())) == RSD_PENDING && steps++ < 200000) {
    }
    CHECK_EQ_INT(rc, RSD_ERR_NOT_FOUND);
    rsd_ensurer_query(e, &res);
    CHECK(res.message && strstr(res.message, "no lease") != NULL);
    CHECK_EQ_INT(res.restored, 0);
out:
    rsd_state_destroy(other);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
    remove_state_dir();
}

int main(int argc, char **argv) {
    char why[256];
    RSD_TEST_BEGIN(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    if (access(ENSURE_BIN, X_OK) != 0 || access(SIM_BIN, X_OK) != 0) {
        printf("%s or %s missing (make apps)\n1 passed, 1 failed\n", ENSURE_BIN, SIM_BIN);
        return 1;
    }
    g_real = real_find(REAL_BIN, sizeof REAL_BIN, why, sizeof why) == 0;
    RUN(test_help_version);
    RUN(test_bad_usage);
    RUN(test_unreachable);
    RUN(test_not_a_model_server);
    RUN(test_observe);
    RUN(test_residency_typo_cli);
    RUN(test_residency_typo_lib);
    RUN(test_unknown_model);
    RUN(test_wait_progress);
    RUN(test_load_stage_progress);
    RUN(test_cold_load_limit_retried);
    RUN(test_lock_wait_progress);
    RUN(test_list_runtimes);
    RUN(test_real_router_words);
    RUN(test_real_router_listing_over_the_default);
    RUN(test_lru_sim);
    RUN(test_attr_arena_follows_max_models);
    RUN(test_free_bytes_sim);
    RUN(test_kv_slots_cli);
    RUN(test_release_keeps_what_failed);
    RUN(test_release_steps);
    RUN(test_release_lib);
    return RSD_TEST_END();
}
