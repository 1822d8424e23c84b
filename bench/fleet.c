/* bench/fleet.c -- readiness overshoot: how long after a model server starts answering
   GET /health with 200 does the fleet report READY (and grant the waiting request)?
   The child is build/bin/rsd-sim in llama-server mode with --print-ready-ms: at
   the instant /health turns 200 it prints that instant (CLOCK_MONOTONIC, the clock the
   fleet runs on; llama-server logs "model loaded" at that moment too). Load times vary
   from run to run (150..1350 ms, fixed pseudo-random sequence), RUNS starts.
     ours = READY pulled from rsd_fleet_next_event - the child's ready instant.
     peer = upstream's supervisor (P44): sleep 1000 ms, GET /health, repeat; its first
            200 comes at the first spawn + k*1000 ms at or after the ready instant,
            computed on the same runs from the same spawn and ready instants.
     also shown: the supervisor's PROBE schedule alone (10 ms doubling to 500 ms),
            computed the same way, i.e. without the output-triggered probe.
   Medians in ms. Run from the repository root (make bench-fleet). */
#define RESIDENCY_IMPLEMENTATION
#include "residency_http.h"
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIM_BIN "build/bin/rsd-sim"
enum { RUNS = 20 };

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}
static uint64_t now_ms(void) { return (uint64_t)(now_us() / 1000.0); }

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Loop the fleet until an event of kind; its pull time in us (0 = not seen). */
static double wait_kind(rsd_fleet *f, rsd_fleet_event_kind kind, rsd_fleet_event *out) {
    double end = now_us() + 30e6;
    while (now_us() < end) {
        rsd_pollfd fds[64];
        rsd_fleet_event ev;
        int n = rsd_fleet_pollfds(f, fds, 64), timeout = 100;
        uint64_t d = rsd_fleet_next_deadline(f), now = now_ms();
        if (n > 64) n = 64;
        if (d <= now) timeout = 0;
        else if (d - now < 100) timeout = (int)(d - now);
        (void)poll((struct pollfd *)(void *)fds, (nfds_t)n, timeout);
        (void)rsd_fleet_step(f, now_ms());
        while (rsd_fleet_next_event(f, &ev))
            if (ev.kind == kind) {
                double t = now_us();
                if (out) *out = ev;
                return t;
            }
    }
    return 0;
}

int main(void) {
    double ours[RUNS], peer[RUNS], sched[RUNS];
    uint32_t seed = 12345;
    int i, n = 0;
    for (i = 0; i < RUNS; i++) {
        rsd_fleet_desc d;
        rsd_fleet_model_desc md;
        rsd_fleet *f;
        rsd_pool_req_h req;
        rsd_fleet_event ev;
        rsd_proc_h h;
        uint16_t port;
        char load[16], tail[4096];
        const char *extra[] = {"--runtime", "server", "--print-ready-ms", "--load-ms", load, NULL};
        const char *at;
        double t_start, t_ready_ev, ready_ms, spawn_ms, since, k, p, pr;
        seed = seed * 1103515245u + 12345u;
        snprintf(load, sizeof load, "%u", 150u + (seed >> 8) % 1200u);
        memset(&d, 0, sizeof d);
        d.pool.max_slots = 1;
        d.procs.term_grace_ms = 2000;
        f = rsd_fleet_create(&d);
        if (!f) return 1;
        memset(&md, 0, sizeof md);
        md.pool.id = "m";
        md.spec.exe = SIM_BIN;
        md.spec.model = "/dev/null"; /* rsd-sim reads nothing; the fleet checks it is readable */
        md.spec.extra = extra;
        if (rsd_fleet_add_model(f, &md) != 0) return 1;
        if (rsd_fleet_acquire(f, 0, now_ms(), NULL, &req, &port) != RSD_PENDING) return 1;
        t_start = wait_kind(f, RSD_FLEET_EV_STARTING, &ev);
        spawn_ms = (double)ev.at_ms;
        t_ready_ev = wait_kind(f, RSD_FLEET_EV_READY, &ev);
        (void)t_start;
        if (t_ready_ev == 0 || rsd_procs_live(rsd_fleet_procs(f), &h, 1) != 1 ||
            rsd_procs_tail(rsd_fleet_procs(f), h, 0, tail, sizeof tail) < 0 ||
            (at = strstr(tail, "ready at monotonic ms ")) == NULL) {
            fprintf(stderr, "bench fleet: run %d: no READY or no ready line\n", i);
            rsd_fleet_destroy(f);
            continue;
        }
        ready_ms = (double)strtoull(at + 22, NULL, 10) + 0.5; /* printed truncated to ms */
        ours[n] = t_ready_ev / 1000.0 - ready_ms;
        since = ready_ms - spawn_ms;
        k = since <= 1000 ? 1 : (double)(long)((since + 999.999) / 1000.0);
        peer[n] = spawn_ms + k * 1000.0 - ready_ms;
        /* the PROBE schedule alone: spawn+10, +20, +40 ... +500, +500 ... */
        for (p = 10, pr = 10; pr < since; p = p * 2 > 500 ? 500 : p * 2, pr += p) {}
        sched[n] = pr - since;
        if (ours[n] < 0) ours[n] = 0;
        n++;
        (void)rsd_fleet_release(f, req, now_ms());
        (void)rsd_fleet_stop(f, now_ms());
        while (!rsd_fleet_idle(f)) (void)wait_kind(f, RSD_FLEET_EV_EXITED, NULL);
        rsd_fleet_destroy(f);
    }
    if (n == 0) return 1;
    {
        double mo, mp, ms, o2[RUNS], p2[RUNS];
        memcpy(o2, ours, sizeof ours);
        memcpy(p2, peer, sizeof peer);
        mo = median(o2, n);
        mp = median(p2, n);
        ms = median(sched, n);
        printf("BENCH fleet_ready_overshoot_ms ours=%.1f peer=%.1f unit=ms ratio=%.4f\n", mo, mp,
               mp > 0 ? mo / mp : 0.0);
        printf("readiness overshoot, %d starts, load 150..1350 ms (median ms; max ms)\n", n);
        qsort(o2, (size_t)n, sizeof *o2, cmp_d);
        qsort(p2, (size_t)n, sizeof *p2, cmp_d);
        printf("  %-46s %8.1f %8.1f\n", "rsd_fleet (PROBE schedule + output trigger)", mo, o2[n - 1]);
        printf("  %-46s %8.1f\n", "PROBE schedule alone (10 ms doubling to 500)", ms);
        printf("  %-46s %8.1f %8.1f\n", "peer: fixed 1 s poll (upstream P44)", mp, p2[n - 1]);
    }
    return 0;
}
