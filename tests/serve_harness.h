/* serve_harness.h -- running build/bin/rsd-serve for the loopback tests (test_serve,
   rsd-sim children) and the real-server tests (test_real_serve, llama-server children):
   start it and read its listening line, stop it, talk HTTP to it, read GET /status, and
   raw sockets for streaming and disconnects. Not part of the library. Include after
   residency_http.h and rsd_test.h; needs <dirent.h> <errno.h> <fcntl.h> <poll.h>
   <signal.h> <stdio.h> <stdlib.h> <string.h> <sys/socket.h> <sys/stat.h> <sys/wait.h>
   <netinet/in.h> <netinet/tcp.h> <arpa/inet.h> <unistd.h>. SERVE_BIN is the program. */
#ifndef RSD_TESTS_SERVE_HARNESS_H
#define RSD_TESTS_SERVE_HARNESS_H
#ifndef SERVE_BIN
#define SERVE_BIN "build/bin/rsd-serve"
#endif
#if defined(__GNUC__) || defined(__clang__)
#define SH_FN static __attribute__((unused)) /* a test file uses what it needs */
#else
#define SH_FN static
#endif
#include "listen_proc.h"
#include "rmtree.h"
typedef struct serve_proc {
    pid_t pid;
    int port;
    char url[64];
    char log_path[256];  /* its stderr */
} serve_proc;

static char g_dir[128];
static int g_logs; /* serve-N.log files made */

SH_FN void make_dir(void) {
    if (!g_dir[0]) {
        char tmpl[] = "/tmp/rsd-test-serve.XXXXXX";
        const char *d = mkdtemp(tmpl);
        if (d) snprintf(g_dir, sizeof g_dir, "%s", d);
    }
}

/* At the end of main: the directory and what the tests wrote there go when everything
   passed (kept to look at otherwise). */
SH_FN void serve_cleanup(void) {
    if (!rsdt_failed) rmtree(g_dir);
}

SH_FN int write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

/* Runs rsd-serve with args (NULL-terminated); stderr into a log file; reads the first
   stdout line ("rsd-serve: listening on http://127.0.0.1:PORT") from a pipe. */
SH_FN int serve_start(serve_proc *s, const char *const *args) {
    static int seq;
    const char *argv[64];
    listen_proc lp;
    int n = 0, i, logfd, r;
    memset(s, 0, sizeof *s);
    make_dir();
    snprintf(s->log_path, sizeof s->log_path, "%s/serve-%d.log", g_dir, ++seq);
    g_logs = seq;
    argv[n++] = SERVE_BIN;
    for (i = 0; args[i] && n < 62; i++) argv[n++] = args[i];
    argv[n] = NULL;
    logfd = open(s->log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (logfd < 0) return -1;
    r = listen_proc_start(&lp, argv, logfd);
    close(logfd);
    s->pid = lp.pid;
    s->port = lp.port;
    memcpy(s->url, lp.url, sizeof s->url);
    return r == 0 && strstr(lp.line, "rsd-serve: ") ? 0 : -1;
}

/* SIGTERM and the exit status (-1 when it did not exit normally). */
SH_FN int serve_stop(serve_proc *s) {
    listen_proc lp;
    memset(&lp, 0, sizeof lp);
    lp.pid = s->pid;
    s->pid = 0;
    return listen_proc_stop(&lp);
}

/* Runs a program to completion; exit status, its stdout (and stderr unless
   stdout_only: then stderr goes to /dev/null) into out. */
SH_FN int run_prog_out(const char *const *argv, char *out, size_t cap, int stdout_only) {
    int fds[2], st = 0;
    size_t got = 0;
    pid_t pid;
    if (pipe(fds) != 0) return -1;
    pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int err = stdout_only ? open("/dev/null", O_WRONLY) : fds[1];
        dup2(fds[1], 1);
        if (err >= 0) dup2(err, 2);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], (char *const *)(void *)argv);
        _exit(127);
    }
    close(fds[1]);
    for (;;) {
        ssize_t r = read(fds[0], out + got, got + 1 < cap ? cap - got - 1 : 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    out[got] = 0;
    close(fds[0]);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs a program to completion; exit status, stderr+stdout into out. */
SH_FN int run_prog(const char *const *argv, char *out, size_t cap) {
    return run_prog_out(argv, out, cap, 0);
}

static char g_body[1 << 16];
static const char *g_bearer; /* sent by http() when set */

/* One request; returns the HTTP status (0 on a transport error), body in g_body. */
SH_FN int http(const serve_proc *s, const char *method, const char *path, const char *body) {
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_request q;
    rsd_http_event ev;
    char url[256];
    int status = 0;
    g_body[0] = 0;
    if (!c) return 0;
    snprintf(url, sizeof url, "%s%s", s->url, path);
    memset(&q, 0, sizeof q);
    q.method = method;
    q.url = url;
    q.total_timeout_ms = 20000;
    q.bearer_token = g_bearer;
    if (body) {
        q.content_type = "application/json";
        q.body = body;
        q.body_len = strlen(body);
    }
    if (rsd_http_request_sync(c, &q, &ev) == RSD_OK) {
        size_t n = ev.body.len < sizeof g_body - 1 ? ev.body.len : sizeof g_body - 1;
        memcpy(g_body, ev.body.ptr, n);
        g_body[n] = 0;
        status = ev.status;
    }
    rsd_http_client_destroy(c);
    return status;
}

static rsd_json_tok g_toks[8192];

/* The last answer's top-level integer member key (-1 when absent or not an integer). */
SH_FN int64_t json_int(const char *key) {
    rsd_json_doc d;
    int64_t v = -1;
    if (rsd_json_parse(&d, g_body, strlen(g_body), g_toks, 8192) <= 0) return -1;
    (void)rsd_json_int64(&d, rsd_json_find(&d, 0, key), &v);
    return v;
}

/* timings.<field> of the last answer (-1 when absent or not an integer). */
SH_FN int64_t timing(const char *field) {
    rsd_json_doc d;
    int64_t v = -1;
    if (rsd_json_parse(&d, g_body, strlen(g_body), g_toks, 8192) <= 0) return -1;
    (void)rsd_json_int64(&d, rsd_json_find(&d, rsd_json_find(&d, 0, "timings"), field), &v);
    return v;
}

/* The /status entry of model id: a field as an integer (-1 when absent or null); "obj.field"
   reads a field of the entry's object obj (e.g. "kv_cache.saves"). */
SH_FN int64_t status_field(const serve_proc *s, const char *id, const char *field) {
    rsd_json_doc d;
    int arr, i, n;
    char sub[64] = "";
    const char *dot = strchr(field, '.');
    if (dot) {
        if ((size_t)(dot - field) >= sizeof sub) return -1;
        memcpy(sub, field, (size_t)(dot - field));
        sub[dot - field] = '\0';
        field = dot + 1;
    }
    if (http(s, "GET", "/status", NULL) != 200) return -1;
    if (rsd_json_parse(&d, g_body, strlen(g_body), g_toks, 8192) <= 0) return -1;
    if (!id) { /* a counter */
        int64_t v = -1;
        int c = rsd_json_find(&d, 0, "counters");
        if (rsd_json_int64(&d, rsd_json_find(&d, c, field), &v) != RSD_OK) return -1;
        return v;
    }
    arr = rsd_json_find(&d, 0, "models");
    n = rsd_json_size(&d, arr);
    for (i = 0; i < n; i++) {
        int o = rsd_json_at(&d, arr, (uint32_t)i);
        if (rsd_json_str_eq(&d, rsd_json_find(&d, o, "id"), id)) {
            int64_t v = -1;
            if (sub[0]) o = rsd_json_find(&d, o, sub);
            if (rsd_json_int64(&d, rsd_json_find(&d, o, field), &v) != RSD_OK) return -1;
            return v;
        }
    }
    return -1;
}

/* The /status state string of model id into out. */
SH_FN void status_state(const serve_proc *s, const char *id, char *out, size_t cap) {
    rsd_json_doc d;
    int arr, i, n;
    out[0] = 0;
    if (http(s, "GET", "/status", NULL) != 200) return;
    if (rsd_json_parse(&d, g_body, strlen(g_body), g_toks, 8192) <= 0) return;
    arr = rsd_json_find(&d, 0, "models");
    n = rsd_json_size(&d, arr);
    for (i = 0; i < n; i++) {
        int o = rsd_json_at(&d, arr, (uint32_t)i);
        if (rsd_json_str_eq(&d, rsd_json_find(&d, o, "id"), id))
            (void)rsd_json_str(&d, rsd_json_find(&d, o, "state"), out, cap, NULL);
    }
}

/* Whether the first 256 KiB of the file at path hold needle. */
SH_FN bool file_has(const char *path, const char *needle) {
    static char buf[1 << 18];
    FILE *f = fopen(path, "rb");
    size_t n;
    if (!f) return false;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, needle) != NULL;
}

SH_FN bool log_has(const serve_proc *s, const char *needle) { return file_has(s->log_path, needle); }

#ifdef SIM_BIN
/* A config at path: rsd-sim (SIM_BIN) single-server children with short load, generation
   and token times (30 ms a streamed chunk), a 2 s stop grace, then text. */
SH_FN void write_cfg(const char *path, const char *text) {
    char full[8192];
    snprintf(full, sizeof full,
             "listen = 127.0.0.1:0\nllama_server = %s\nargs = --runtime server --load-ms 20 --gen-ms 5 --token-ms 30\n"
             "stop_grace = 2\n%s",
             SIM_BIN, text);
    write_file(path, full);
}

/* An INI at path for rsd-serve over rsd-sim children (SIM_BIN run with args): the global
   lines, then the [model] sections in models, where "@/x.gguf" names DIR/m/x.gguf, made
   here as an empty file: rsd-serve checks that a model file is readable before it starts
   one (rsd-sim reads its options from the name: "@/broken.gguf,fail=1"). */
SH_FN void write_sim_ini(const char *path, const char *args, int max_models, const char *globals,
                         const char *models) {
    char text[8192], mdir[192], body[4096];
    const char *p;
    size_t n = 0;
    make_dir();
    snprintf(mdir, sizeof mdir, "%s/m", g_dir);
    (void)mkdir(mdir, 0700);
    for (p = models; *p && n + sizeof mdir < sizeof body; p++) {
        if (p[0] == '@' && p[1] == '/') {
            const char *e = strchr(p, '\n');
            char file[384];
            size_t k = e ? (size_t)(e - p - 1) : strlen(p + 1);
            snprintf(file, sizeof file, "%s%.*s", mdir, (int)k, p + 1);
            write_file(file, "");
            n += (size_t)snprintf(body + n, sizeof body - n, "%s", mdir);
            continue;
        }
        body[n++] = *p;
    }
    body[n] = 0;
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nmax_models = %d\nllama_server = %s\nargs = %s\nstop_grace = 2\n%s\n%s",
             max_models, SIM_BIN, args, globals, body);
    write_file(path, text);
}
#endif

/* An empty model file g_dir/NAME.gguf (rsd-serve checks it is readable); its path, valid
   for the next 7 calls. */
SH_FN const char *model_file(const char *name) {
    static char p[8][256];
    static int i;
    char *out = p[i++ & 7];
    snprintf(out, 256, "%s/%s.gguf", g_dir, name);
    write_file(out, "");
    return out;
}

/* Files in dir ending in ext: their count; *all_0600 whether each has mode 0600; first:
   the path of one of them ("" when none, or when it does not fit cap). */
SH_FN int dir_files(const char *dir, const char *ext, bool *all_0600, char *first, size_t cap) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (all_0600) *all_0600 = true;
    if (first && cap) first[0] = 0;
    if (!d) return 0;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name), el = strlen(ext);
        char p[1200];
        struct stat st;
        if (l <= el || strcmp(e->d_name + l - el, ext)) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (stat(p, &st) == 0 && all_0600 && (st.st_mode & 0777) != 0600) *all_0600 = false;
        if (first && !first[0] && strlen(p) < cap) memcpy(first, p, strlen(p) + 1); /* too long: none */
        n++;
    }
    closedir(d);
    return n;
}

/* The unified binary's spelling (`llama serve`) for server: a wrapper DIR/my bin/llama (a
   directory with a blank), its path into out, that takes the subcommand serve and execs
   server with the rest (any other: exit 2). 0, or -1 when it cannot be written. */
SH_FN int llama_wrapper(const char *dir, const char *server, char *out, size_t cap) {
    char bindir[768], text[4096 + 256];
    snprintf(bindir, sizeof bindir, "%s/my bin", dir);
    (void)mkdir(bindir, 0700);
    snprintf(out, cap, "%s/my bin/llama", dir);
    snprintf(text, sizeof text,
             "#!/bin/sh\n[ \"$1\" = serve ] || { echo \"llama: unknown command '$1'\" >&2; exit 2; }\n"
             "shift\nexec '%s' \"$@\"\n", server);
    if (write_file(out, text) != 0) return -1;
    return chmod(out, 0700);
}

/* A raw loopback connection (for streaming and disconnects). */
SH_FN int raw_connect(int port) {
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd < 0) return -1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { close(fd); return -1; }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

SH_FN int raw_post(int fd, const char *path, const char *body) {
    char req[2048];
    int n = snprintf(req, sizeof req,
                     "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: %d\r\n\r\n%s", path, (int)strlen(body), body);
    return write(fd, req, (size_t)n) == n ? 0 : -1;
}

/* Reads what is there (blocking up to 10 s for the first byte); bytes read, 0 on EOF. */
SH_FN int raw_read(int fd, char *buf, size_t cap) {
    struct pollfd p;
    ssize_t r;
    p.fd = fd;
    p.events = POLLIN;
    p.revents = 0;
    if (poll(&p, 1, 10000) <= 0) return -1;
    r = read(fd, buf, cap);
    return (int)r;
}

/* ---- waiting on GET /_rsd/events -------------------------------------------------- */
/* A raw GET of an event stream (/_rsd/events, /models/sse) with extra header lines
   (each ending in CRLF, or NULL); the socket, -1 on failure. */
SH_FN int sse_open(int port, const char *path, const char *headers) {
    char req[2048];
    int fd = raw_connect(port), n;
    if (fd < 0) return -1;
    n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n", path, headers ? headers : "");
    if (write(fd, req, (size_t)n) != n) { close(fd); return -1; }
    return fd;
}

typedef struct sse_buf {
    int fd;
    char b[1 << 17];
    size_t n;
} sse_buf;

/* Reads until needle appears in what the stream has sent (bounded: 10 s of silence). */
SH_FN bool sse_wait(sse_buf *sb, const char *needle) {
    while (!strstr(sb->b, needle)) {
        int r;
        if (sb->n + 1 >= sizeof sb->b) return false;
        r = raw_read(sb->fd, sb->b + sb->n, sizeof sb->b - sb->n - 1);
        if (r <= 0) {
            printf("  stream ended or silent waiting for %s; got:\n%.2000s\n", needle, sb->b);
            return false;
        }
        sb->n += (size_t)r;
        sb->b[sb->n] = 0;
    }
    return true;
}

/* Waits until pred(s, arg) holds, bounded by ms (the machine may be loaded). It sleeps on
   rsd-serve's GET /_rsd/events between looks: every change of a model's state, pid or
   process comes with an event (start, ready, stop, exit, crash, grant, ...), so a look
   follows each event; a change without one (a request finishing) is seen by the look
   that follows at most 1 s later. Without the stream (refused, closed) it looks every
   100 ms. */
typedef bool (*serve_pred)(const serve_proc *s, const void *arg);
SH_FN bool wait_until(const serve_proc *s, serve_pred pred, const void *arg, int ms) {
    char auth[600];
    int fd;
    uint64_t end = rsd_now_ms() + (uint64_t)ms;
    bool ok = false;
    if (g_bearer) snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", g_bearer);
    fd = sse_open(s->port, "/_rsd/events", g_bearer ? auth : NULL); /* before the first look: no event is lost */
    for (;;) {
        struct pollfd p;
        char buf[4096];
        if (pred(s, arg)) { ok = true; break; }
        if (rsd_now_ms() >= end) break;
        p.fd = fd;
        p.events = POLLIN;
        p.revents = 0;
        if (fd < 0) (void)poll(NULL, 0, 100);
        else if (poll(&p, 1, 1000) > 0 && read(fd, buf, sizeof buf) <= 0) {
            close(fd);
            fd = -1;
        }
    }
    if (fd >= 0) close(fd);
    return ok;
}

typedef struct serve_field_want {
    const char *id, *field, *state;
    int64_t want;
} serve_field_want;
SH_FN bool field_is(const serve_proc *s, const void *arg) {
    const serve_field_want *w = (const serve_field_want *)arg;
    return status_field(s, w->id, w->field) == w->want;
}
SH_FN bool state_is(const serve_proc *s, const void *arg) {
    const serve_field_want *w = (const serve_field_want *)arg;
    char st[32];
    status_state(s, w->id, st, sizeof st);
    return !strcmp(st, w->state);
}

/* Waits until id's /status field equals want (bounded: 30 s). */
SH_FN bool wait_field(const serve_proc *s, const char *id, const char *field, int64_t want) {
    serve_field_want w;
    memset(&w, 0, sizeof w);
    w.id = id;
    w.field = field;
    w.want = want;
    return wait_until(s, field_is, &w, 30000);
}

/* /status models[id].kv_cache.<field> (-1 when absent); wait_kv awaits a value (bounded: 30 s). */
SH_FN int64_t kv_field(const serve_proc *s, const char *id, const char *field) {
    char f[64];
    snprintf(f, sizeof f, "kv_cache.%s", field);
    return status_field(s, id, f);
}
SH_FN bool wait_kv(const serve_proc *s, const char *id, const char *field, int64_t want) {
    char f[64];
    snprintf(f, sizeof f, "kv_cache.%s", field);
    return wait_field(s, id, f, want);
}

/* The counter `field` of the first model in GET /_rsd/affinity (-1 = absent). */
SH_FN int64_t aff_field(const serve_proc *s, const char *field) {
    rsd_json_doc d;
    int64_t v = -1;
    if (http(s, "GET", "/_rsd/affinity", NULL) != 200) return -1;
    if (rsd_json_parse(&d, g_body, strlen(g_body), g_toks, 8192) <= 0) return -1;
    (void)rsd_json_int64(&d, rsd_json_find(&d, rsd_json_at(&d, rsd_json_find(&d, 0, "models"), 0), field), &v);
    return v;
}

/* /status: model id's memory.<fig>.<field> (fig "" = memory.<field>): an integer (-1
   absent or null), or with str the string; wait_mem awaits a value (bounded: 30 s). */
SH_FN int64_t mem_field(const serve_proc *s, const char *id, const char *fig, const char *field, char *str,
                         size_t cap) {
    rsd_json_doc d;
    int arr, i, n;
    if (str) str[0] = 0;
    if (http(s, "GET", "/status", NULL) != 200) return -1;
    if (rsd_json_parse(&d, g_body, strlen(g_body), g_toks, 8192) <= 0) return -1;
    arr = rsd_json_find(&d, 0, "models");
    n = rsd_json_size(&d, arr);
    for (i = 0; i < n; i++) {
        int o = rsd_json_at(&d, arr, (uint32_t)i);
        int64_t v = -1;
        if (!rsd_json_str_eq(&d, rsd_json_find(&d, o, "id"), id)) continue;
        o = rsd_json_find(&d, o, "memory");
        if (fig[0]) o = rsd_json_find(&d, o, fig);
        if (str) {
            (void)rsd_json_str(&d, rsd_json_find(&d, o, field), str, cap, NULL);
            return 0;
        }
        if (rsd_json_int64(&d, rsd_json_find(&d, o, field), &v) != RSD_OK) return -1;
        return v;
    }
    return -1;
}

typedef struct mem_want { const char *id, *fig, *field; int64_t want; } mem_want;
SH_FN bool mem_is(const serve_proc *s, const void *arg) {
    const mem_want *w = (const mem_want *)arg;
    return mem_field(s, w->id, w->fig, w->field, NULL, 0) == w->want;
}
SH_FN bool wait_mem(const serve_proc *s, const char *id, const char *fig, const char *field, int64_t want) {
    mem_want w;
    w.id = id;
    w.fig = fig;
    w.field = field;
    w.want = want;
    if (wait_until(s, mem_is, &w, 30000)) return true;
    printf("  %s memory.%s.%s = %lld, waited for %lld\n", id, fig, field,
           (long long)mem_field(s, id, fig, field, NULL, 0), (long long)want);
    return false;
}

SH_FN bool pid_new(const serve_proc *s, const void *arg) {
    const serve_field_want *w = (const serve_field_want *)arg;
    int64_t p = status_field(s, w->id, "pid");
    return p > 0 && p != w->want;
}

/* Waits until id runs a process whose pid is not old (0: any process); that pid, or -1
   when none came (bounded: 30 s). */
SH_FN int64_t wait_new_pid(const serve_proc *s, const char *id, int64_t old) {
    serve_field_want w;
    memset(&w, 0, sizeof w);
    w.id = id;
    w.want = old;
    return wait_until(s, pid_new, &w, 30000) ? status_field(s, id, "pid") : -1;
}

/* GET path answers 200 with "ready":true (a lease whose stopped processes are gone). */
SH_FN bool path_ready(const serve_proc *s, const void *path) {
    return http(s, "GET", (const char *)path, NULL) == 200 && strstr(g_body, "\"ready\":true") != NULL;
}

/* Waits until id's /status state is want (bounded: 30 s); says what it was otherwise. */
SH_FN bool wait_state(const serve_proc *s, const char *id, const char *want) {
    serve_field_want w;
    char st[32];
    memset(&w, 0, sizeof w);
    w.id = id;
    w.state = want;
    if (wait_until(s, state_is, &w, 30000)) return true;
    status_state(s, id, st, sizeof st);
    printf("  %s: state %s, waited for %s\n", id, st, want);
    return false;
}

SH_FN const char *chat(const char *model, bool stream) {
    static char b[256];
    snprintf(b, sizeof b, "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]%s}", model,
             stream ? ",\"stream\":true" : "");
    return b;
}
#endif
