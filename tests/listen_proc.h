/* listen_proc.h -- start a program whose first stdout line ends in
   "listening on http://127.0.0.1:PORT" (rsd-sim, rsd-serve), read that line from a
   pipe (a blocking read: no sleep, no polling), stop it with SIGTERM and reap it.
   Shared by the loopback tests and bench/reconcile.c. Needs <errno.h> <signal.h>
   <stdio.h> <stdlib.h> <string.h> <sys/wait.h> <unistd.h>. */
#ifndef RSD_TESTS_LISTEN_PROC_H
#define RSD_TESTS_LISTEN_PROC_H

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
