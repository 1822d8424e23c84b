/* listen_proc.h -- start a program whose first stdout line ends in
   "listening on http://127.0.0.1:PORT" (rsd-sim, rsd-serve), read that line from a
   pipe (a blocking read: no sleep, no polling), stop it with SIGTERM and reap it.
   Shared by the loopback tests and bench/reconcile.c. Needs <errno.h> <signal.h>
   <stdio.h> <stdlib.h> <string.h> <sys/wait.h> <unistd.h>. */
#ifndef RSD_TESTS_LISTEN_PROC_H
#define RSD_TESTS_LISTEN_PROC_H

#if defined(_WIN32)
/* Windows (make test-windows): the library's own supervisor starts the .exe and reads
   its output (stdout and stderr together: the first line that names the port is
   taken); stop is its stop (TerminateJobObject under wine: no console to send
   CTRL_BREAK through), so the exit status is -1 then. Needs residency_http.h with the
   implementation. */
typedef struct listen_proc {
    long pid;
    int port;
    char url[64];   /* "http://127.0.0.1:PORT" */
    char line[256]; /* the first output line that names the port */
    rsd_procs *procs;
    rsd_proc_h h;
} listen_proc;

/* One try of listen_proc_start. 0, -1 (said why on stdout), or -2 when wine itself lost
   the program before its main ran (its only output "wine client error:..."). */
static int listen_proc_try(listen_proc *s, const char *const *argv) {
    rsd_procs_desc d;
    rsd_proc_spec sp;
    rsd_proc_info info;
    uint64_t end = rsd_now_ms() + 60000;
    static char tail[16384];
    const char *why = "no listening line within 60 s";
    memset(s, 0, sizeof *s);
    memset(&d, 0, sizeof d);
    memset(&sp, 0, sizeof sp);
    d.max_procs = 1;
    d.term_grace_ms = 2000;
    d.start_deadline_ms = 3600000; /* the test decides when it is done */
    s->procs = rsd_procs_create(&d);
    if (!s->procs) return -1;
    sp.exe = argv[0];
    sp.args = argv + 1;
    if (rsd_procs_spawn(s->procs, &sp, rsd_now_ms(), &s->h) != RSD_OK) {
        printf("  listen_proc: %s did not start\n", argv[0]);
        return -1;
    }
    if (rsd_procs_query_proc(s->procs, s->h, &info) == RSD_OK) s->pid = (long)info.pid;
    tail[0] = '\0';
    while (rsd_now_ms() < end) { /* bounded wait for the line */
        rsd_proc_event ev;
        const char *at, *nl;
        bool gone = false;
        (void)rsd_procs_step(s->procs, rsd_now_ms());
        while (rsd_procs_next_event(s->procs, &ev))
            if (ev.kind == RSD_PROC_EV_EXITED || ev.kind == RSD_PROC_EV_SPAWN_FAILED) gone = true;
        if (rsd_procs_tail(s->procs, s->h, 0, tail, sizeof tail) > 0 &&
            (at = strstr(tail, "listening on http://127.0.0.1:")) != NULL && (nl = strchr(at, '\n')) != NULL) {
            const char *b = at;
            size_t n;
            while (b > tail && b[-1] != '\n') b--;
            n = (size_t)(nl - b) < sizeof s->line - 1 ? (size_t)(nl - b) : sizeof s->line - 1;
            memcpy(s->line, b, n);
            s->line[n] = '\0';
            if (n && s->line[n - 1] == '?') s->line[n - 1] = '\0'; /* the \r, shown as '?' */
            s->port = atoi(at + strlen("listening on http://127.0.0.1:"));
            snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", s->port);
            return s->port > 0 ? 0 : -1;
        }
        if (gone) {
            why = "it exited before its listening line";
            break;
        }
        (void)rsd_poll(NULL, 0, 5);
    }
    (void)rsd_procs_tail(s->procs, s->h, 0, tail, sizeof tail);
    printf("  listen_proc: %s: %s; its output: %.400s\n", argv[0], why, tail[0] ? tail : "(none)");
    return strstr(tail, "wine client error") ? -2 : -1;
}

/* Runs argv until it names its port; 0, or -1 (the program, if any, is left for
   listen_proc_stop). A program that wine itself lost before its main ran (seen in CI
   under load) is started once more, with a line that says so. */
static int listen_proc_start(listen_proc *s, const char *const *argv, int stderr_fd) {
    int r;
    (void)stderr_fd;
    r = listen_proc_try(s, argv);
    if (r != -2) return r;
    printf("  listen_proc: wine did not start %s; starting it again\n", argv[0]);
    if (s->procs) rsd_procs_destroy(s->procs);
    s->procs = NULL;
    r = listen_proc_try(s, argv);
    return r == 0 ? 0 : -1;
}

static int listen_proc_stop(listen_proc *s) {
    uint64_t end = rsd_now_ms() + 30000;
    int code = -1;
    if (!s->procs) return -1;
    (void)rsd_procs_stop(s->procs, s->h, rsd_now_ms());
    while (rsd_now_ms() < end) {
        rsd_proc_event ev;
        bool done = false;
        (void)rsd_procs_step(s->procs, rsd_now_ms());
        while (rsd_procs_next_event(s->procs, &ev))
            if (ev.kind == RSD_PROC_EV_STOPPED || ev.kind == RSD_PROC_EV_EXITED) {
                code = ev.term_signal ? -1 : ev.exit_code;
                done = true;
            }
        if (done) break;
        (void)rsd_poll(NULL, 0, 5);
    }
    rsd_procs_destroy(s->procs);
    s->procs = NULL;
    s->pid = 0;
    return code;
}
#else
typedef struct listen_proc {
    pid_t pid;
    int port;
    char url[64];   /* "http://127.0.0.1:PORT" */
    char line[256]; /* the first stdout line */
} listen_proc;

/* Runs argv (argv[0] = the program, NULL-terminated); the child's stderr goes to
   stderr_fd when >= 0. 0 when the line names a port, else -1 (the child, if any,
   is left running: call listen_proc_stop). */
static int listen_proc_start(listen_proc *s, const char *const *argv, int stderr_fd) {
    int fds[2];
    size_t got = 0;
    const char *colon;
    memset(s, 0, sizeof *s);
    if (access(argv[0], X_OK) != 0 || pipe(fds) != 0) return -1;
    s->pid = fork();
    if (s->pid < 0) { close(fds[0]); close(fds[1]); s->pid = 0; return -1; }
    if (s->pid == 0) {
        dup2(fds[1], 1);
        if (stderr_fd >= 0) { dup2(stderr_fd, 2); close(stderr_fd); }
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], (char *const *)(void *)argv);
        _exit(127);
    }
    close(fds[1]);
    while (got < sizeof s->line - 1) {
        ssize_t r = read(fds[0], s->line + got, 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0 || s->line[got] == '\n') break;
        got++;
    }
    s->line[got] = '\0';
    close(fds[0]); /* nothing else is read from stdout */
    colon = strrchr(s->line, ':');
    if (!strstr(s->line, "listening on http://127.0.0.1:") || !colon) return -1;
    s->port = atoi(colon + 1);
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", s->port);
    return s->port > 0 ? 0 : -1;
}

/* SIGTERM, reap; the exit status, or -1 when it did not exit normally (or never ran). */
static int listen_proc_stop(listen_proc *s) {
    int st = 0;
    if (s->pid <= 0) return -1;
    kill(s->pid, SIGTERM);
    while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR) {}
    s->pid = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
#endif
#endif
