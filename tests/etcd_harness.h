/* etcd_harness.h -- a real etcd (Debian's etcd-server, 3.4) for the tests and the bench:
   found as $ETCD, /usr/bin/etcd or on PATH; started on two free loopback ports in a
   temporary data directory (its own process group, output to a log file there), awaited
   until GET /health answers 200 (bounded), stopped with SIGTERM (SIGKILL after a bound) and
   its directory removed. Include after residency_http.h; needs <signal.h> <sys/wait.h>
   <unistd.h> <netinet/in.h> <arpa/inet.h> <sys/socket.h>. */
#ifndef RSD_TESTS_ETCD_HARNESS_H
#define RSD_TESTS_ETCD_HARNESS_H
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <poll.h>
#include "http_req.h"

#if defined(__GNUC__) || defined(__clang__)
#define ETCD_FN static __attribute__((unused))
#else
#define ETCD_FN static
#endif

typedef struct etcd_proc {
    pid_t pid;
    int client_port, peer_port;
    char bin[512];
    char dir[256];                  /* the temporary directory: data/ and etcd.log */
    char url[64];                   /* "http://127.0.0.1:PORT" */
    char coord[96];                 /* "etcd://127.0.0.1:PORT/<prefix>" */
} etcd_proc;

/* The etcd binary: $ETCD, /usr/bin/etcd, else the first "etcd" on PATH. false when none. */
ETCD_FN bool etcd_find(char *out, size_t cap) {
    const char *env = getenv("ETCD"), *path = getenv("PATH");
    if (env && env[0] && access(env, X_OK) == 0) {
        snprintf(out, cap, "%s", env);
        return true;
    }
    if (access("/usr/bin/etcd", X_OK) == 0) {
        snprintf(out, cap, "/usr/bin/etcd");
        return true;
    }
    while (path && *path) {
        const char *c = strchr(path, ':');
        size_t n = c ? (size_t)(c - path) : strlen(path);
        if (n && n + 6 < cap) {
            snprintf(out, cap, "%.*s/etcd", (int)n, path);
            if (access(out, X_OK) == 0) return true;
        }
        path = c ? c + 1 : NULL;
    }
    return false;
}

/* A port the kernel gave to a socket bound on 127.0.0.1:0 (then closed). */
ETCD_FN int etcd_free_port(void) {
    struct sockaddr_in a;
    socklen_t l = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    if (fd < 0) return -1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &l) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* GET url/health answered 200 with "true" in it. */
ETCD_FN bool etcd_healthy(const etcd_proc *p) {
    rsd_http_client_desc cd;
    rsd_http_client *c;
    rsd_http_request q;
    rsd_http_event ev;
    char u[96];
    bool ok = false;
    memset(&cd, 0, sizeof cd);
    cd.tls_off = true;
    if (!(c = rsd_http_client_create(&cd))) return false;
    snprintf(u, sizeof u, "%s/health", p->url);
    memset(&q, 0, sizeof q);
    q.url = u;
    q.total_timeout_ms = q.connect_timeout_ms = 1000;
    if (rsd_http_request_sync(c, &q, &ev) == RSD_OK && ev.status == 200 && ev.body.len < 128) {
        char b[128];
        memcpy(b, ev.body.ptr, ev.body.len);
        b[ev.body.len] = '\0';
        ok = strstr(b, "true") != NULL;
    }
    rsd_http_client_destroy(c);
    return ok;
}

ETCD_FN void etcd_launch(etcd_proc *p) {
    char data[300], log[300], curl[64], purl[64], cluster[96];
    snprintf(data, sizeof data, "%s/data", p->dir);
    snprintf(log, sizeof log, "%s/etcd.log", p->dir);
    snprintf(curl, sizeof curl, "http://127.0.0.1:%d", p->client_port);
    snprintf(purl, sizeof purl, "http://127.0.0.1:%d", p->peer_port);
    snprintf(cluster, sizeof cluster, "default=%s", purl);
    p->pid = fork();
    if (p->pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        setpgid(0, 0);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execl(p->bin, p->bin, "--name", "default", "--data-dir", data, "--listen-client-urls", curl,
              "--advertise-client-urls", curl, "--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
              "--initial-cluster", cluster, "--log-level", "warn", (char *)NULL);
        _exit(127);
    }
    if (p->pid > 0) setpgid(p->pid, p->pid);
}

/* Waits (bounded: 60 s) until /health answers or the process exited. */
ETCD_FN bool etcd_wait_ready(etcd_proc *p) {
    uint64_t end = rsd_now_ms() + 60000;
    while (rsd_now_ms() < end) {
        int st;
        if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
            p->pid = 0;
            return false;
        }
        if (etcd_healthy(p)) return true;
        (void)poll(NULL, 0, 20); /* nothing to wait on but the port: a short bounded retry */
    }
    return false;
}

/* Starts etcd; prefix names this run's keys (coord = etcd://.../prefix). 0 or -1. */
ETCD_FN int etcd_start(etcd_proc *p, const char *prefix) {
    int attempt;
    memset(p, 0, sizeof *p);
    if (!etcd_find(p->bin, sizeof p->bin)) return -1;
    snprintf(p->dir, sizeof p->dir, "%s/rsd-etcd-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(p->dir)) return -1;
    for (attempt = 0; attempt < 3; attempt++) { /* a port taken between probe and bind: again */
        p->client_port = etcd_free_port();
        p->peer_port = etcd_free_port();
        if (p->client_port <= 0 || p->peer_port <= 0 || p->client_port == p->peer_port) continue;
        snprintf(p->url, sizeof p->url, "http://127.0.0.1:%d", p->client_port);
        snprintf(p->coord, sizeof p->coord, "etcd://127.0.0.1:%d%s", p->client_port, prefix ? prefix : "");
        etcd_launch(p);
        if (p->pid > 0 && etcd_wait_ready(p)) return 0;
        if (p->pid > 0) {
            kill(-p->pid, SIGKILL);
            waitpid(p->pid, NULL, 0);
            p->pid = 0;
        }
    }
    return -1;
}

/* Stops the process group (SIGTERM, SIGKILL after 10 s); the data stays (etcd_restart). */
ETCD_FN void etcd_kill(etcd_proc *p, int sig) {
    uint64_t end = rsd_now_ms() + 10000;
    if (p->pid <= 0) return;
    kill(-p->pid, sig);
    for (;;) {
        int st;
        pid_t r = waitpid(p->pid, &st, WNOHANG);
        if (r == p->pid || (r < 0 && errno != EINTR)) break;
        if (rsd_now_ms() >= end) {
            kill(-p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            break;
        }
        (void)poll(NULL, 0, 10);
    }
    p->pid = 0;
}

/* Starts it again on the same ports and data (after etcd_kill). 0 or -1. */
ETCD_FN int etcd_restart(etcd_proc *p) {
    etcd_launch(p);
    return p->pid > 0 && etcd_wait_ready(p) ? 0 : -1;
}

/* Stops it and removes its directory. */
ETCD_FN void etcd_stop(etcd_proc *p) {
    char cmd[320];
    etcd_kill(p, SIGTERM);
    if (p->dir[0] && strstr(p->dir, "rsd-etcd-")) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", p->dir);
        if (system(cmd) != 0) { /* left behind in TMPDIR */ }
    }
    p->dir[0] = '\0';
}

/* POST body to path on the gateway; the status (body into buf), or -1. */
ETCD_FN int etcd_post(const etcd_proc *p, const char *path, const char *body, char *buf, size_t cap) {
    rsd_http_client_desc cd;
    rsd_http_client *c;
    rsd_http_request q;
    char u[160];
    int status;
    memset(&cd, 0, sizeof cd);
    cd.tls_off = true;
    if (!(c = rsd_http_client_create(&cd))) return -1;
    snprintf(u, sizeof u, "%s%s", p->url, path);
    memset(&q, 0, sizeof q);
    q.method = "POST";
    q.url = u;
    q.body = body;
    q.body_len = strlen(body);
    q.total_timeout_ms = q.connect_timeout_ms = 5000;
    status = http_sync_into(c, &q, buf, cap);
    rsd_http_client_destroy(c);
    return status;
}
#endif
