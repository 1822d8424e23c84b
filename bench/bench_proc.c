/* bench_proc: spawn + reap of /bin/true through the supervisor, against plain
   fork+execve+waitpid and plain posix_spawn+waitpid, in the same run.
   ours  = rsd_procs_spawn (port pick, argv template, pipes, pidfd) + poll on the
           supervisor's fds + rsd_procs_step until EXITED + rsd_procs_forget;
   peers = the bare system calls with no pipe, no port, no poll.
   Also with a 256 MiB touched heap in the parent: fork copies page tables, so its
   cost grows with the parent's size; posix_spawn (CLONE_VFORK in glibc) does not.
   Median of 5 rounds of N spawns each, microseconds per spawn+reap. */
#define RESIDENCY_IMPLEMENTATION
#include "residency_http.h"
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

extern char **environ;
enum { N = 200, ROUNDS = 5 };

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}
static uint64_t now_ms(void) { return (uint64_t)(now_us() / 1000.0); }

static char *const true_argv[] = {(char *)"/bin/true", NULL};

static void peer_fork(void) {
    int st;
    pid_t pid = fork();
    if (pid == 0) {
        execve("/bin/true", true_argv, environ);
        _exit(127);
    }
    waitpid(pid, &st, 0);
}

static void peer_spawn(void) {
    int st;
    pid_t pid;
    if (posix_spawn(&pid, "/bin/true", NULL, NULL, true_argv, environ) == 0) waitpid(pid, &st, 0);
}

static rsd_procs *g_p;

static void ours(void) {
    static const char *const args[] = {NULL};
    rsd_proc_spec s;
    rsd_proc_h h;
    rsd_proc_event ev;
    memset(&s, 0, sizeof s);
    s.exe = "/bin/true";
    s.args = args;
    if (rsd_procs_spawn(g_p, &s, now_ms(), &h) != RSD_OK) { fprintf(stderr, "spawn failed\n"); exit(1); }
    for (;;) {
        rsd_pollfd pf[4];
        int n;
        uint64_t t = now_ms(), next;
        (void)rsd_procs_step(g_p, t);
        while (rsd_procs_next_event(g_p, &ev))
            if (ev.kind == RSD_PROC_EV_EXITED) goto done;
        next = rsd_procs_next_deadline(g_p);
        n = rsd_procs_pollfds(g_p, pf, 4);
        rsd_poll(pf, n, next == RSD_NO_DEADLINE ? 1000 : (int)(next > t ? next - t : 0));
    }
done:
    rsd_procs_forget(g_p, h);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double measure(void (*fn)(void), double *mn, double *mx) {
    double r[ROUNDS];
    int k, i;
    for (k = 0; k < ROUNDS; k++) {
        double t0 = now_us();
        for (i = 0; i < N; i++) fn();
        r[k] = (now_us() - t0) / N;
    }
    qsort(r, ROUNDS, sizeof r[0], cmp_d);
    *mn = r[0];
    *mx = r[ROUNDS - 1];
    return r[ROUNDS / 2];
}

static rsd_procs *mk(rsd_proc_spawn_method m) {
    rsd_procs_desc d;
    memset(&d, 0, sizeof d);
    d.max_procs = 2;
    d.spawn = m;
    d.survive_parent = m == RSD_PROC_SPAWN_POSIX;
    return rsd_procs_create(&d);
}

int main(void) {
    double pf, ps, of, op, ov, bpf, bps, bof, bop, bov, mn[10], mx[10];
    rsd_procs *pfork = mk(RSD_PROC_SPAWN_FORK), *pposix = mk(RSD_PROC_SPAWN_POSIX);
    rsd_procs *pvfork = mk(RSD_PROC_SPAWN_VFORK);
    size_t big = (size_t)256 << 20, i;
    char *heap;
    if (!pfork || !pposix || !pvfork) return 1;
    peer_fork(); peer_spawn();                       /* warm up */
    pf = measure(peer_fork, &mn[0], &mx[0]);
    ps = measure(peer_spawn, &mn[1], &mx[1]);
    g_p = pfork;  of = measure(ours, &mn[2], &mx[2]);
    g_p = pposix; op = measure(ours, &mn[3], &mx[3]);
    g_p = pvfork; ov = measure(ours, &mn[8], &mx[8]);
    heap = (char *)malloc(big);
    if (!heap) return 1;
    for (i = 0; i < big; i += 4096) heap[i] = (char)i;  /* touch: real page tables */
    bpf = measure(peer_fork, &mn[4], &mx[4]);
    bps = measure(peer_spawn, &mn[5], &mx[5]);
    g_p = pfork;  bof = measure(ours, &mn[6], &mx[6]);
    g_p = pposix; bop = measure(ours, &mn[7], &mx[7]);
    g_p = pvfork; bov = measure(ours, &mn[9], &mx[9]);
    printf("BENCH proc_spawn ours=%.1f peer=%.1f unit=us ratio=%.2f\n", ov, pf, ov / pf);
    printf("BENCH proc_spawn_fork ours=%.1f peer=%.1f unit=us ratio=%.2f\n", of, pf, of / pf);
    printf("BENCH proc_spawn_posix ours=%.1f peer=%.1f unit=us ratio=%.2f\n", op, ps, op / ps);
    printf("BENCH proc_spawn_256mib ours=%.1f peer=%.1f unit=us ratio=%.2f\n", bov, bpf, bov / bpf);
    printf("BENCH proc_spawn_fork_256mib ours=%.1f peer=%.1f unit=us ratio=%.2f\n", bof, bpf, bof / bpf);
    printf("BENCH proc_spawn_posix_256mib ours=%.1f peer=%.1f unit=us ratio=%.2f\n", bop, bps,
           bop / bps);
    printf("\nspawn + reap of /bin/true, us per process (median of %d x %d; min..max)\n", ROUNDS, N);
    printf("  %-44s %8s %18s\n", "", "small", "256 MiB heap");
    printf("  %-44s %8.1f (%5.1f..%5.1f) %8.1f (%5.1f..%5.1f)\n", "peer fork+execve+waitpid", pf, mn[0], mx[0], bpf, mn[4], mx[4]);
    printf("  %-44s %8.1f (%5.1f..%5.1f) %8.1f (%5.1f..%5.1f)\n", "peer posix_spawn+waitpid", ps, mn[1], mx[1], bps, mn[5], mx[5]);
    printf("  %-44s %8.1f (%5.1f..%5.1f) %8.1f (%5.1f..%5.1f)\n", "ours VFORK (Linux default, PDEATHSIG)", ov, mn[8], mx[8], bov, mn[9], mx[9]);
    printf("  %-44s %8.1f (%5.1f..%5.1f) %8.1f (%5.1f..%5.1f)\n", "ours FORK (PDEATHSIG)", of, mn[2], mx[2], bof, mn[6], mx[6]);
    printf("  %-44s %8.1f (%5.1f..%5.1f) %8.1f (%5.1f..%5.1f)\n", "ours POSIX (survive_parent)", op, mn[3], mx[3], bop, mn[7], mx[7]);
    free(heap);
    rsd_procs_destroy(pfork);
    rsd_procs_destroy(pposix);
    rsd_procs_destroy(pvfork);
    return 0;
}
