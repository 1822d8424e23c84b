/* Bench: the etcd coordinator (residency_http.h >>etcd) next to the flock path it stands
   in for when several hosts share one server. On a real etcd (Debian's etcd-server 3.4,
   started here on loopback in a temporary directory, its default fsync'ing WAL on this
   machine's disk) and rsd-sim:
   1. lock round trip, uncontended:
        ours = rsd_etcd_lock_begin + step to held (a txn: compare create_revision 0, put the
               lease-bound key, read the attribution, generation and protections back), then
               rsd_etcd_unlock_begin + step until the delete txn answered (the lease is reused)
        peer = rsd_state_lock_try + rsd_state_unlock (flock, owner record, truncate)
   2. a whole swap (the router full with one model, ensure the other: unload, load, wait,
      commit), alternating two models, ensurer on etcd vs ensurer on a state directory:
        ours = wall time per swap with RESIDENCY_COORD's backend (read, lock, commit, unlock:
               4 etcd requests, plus a lease grant every half TTL)
        peer = the same ensurer on the state directory (flock, attribution file)
   Figures are medians of 5 runs (1) and of the swaps (2). */
#define RESIDENCY_IMPLEMENTATION
#include "residency_http.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "bench_util.h"
#include "../tests/listen_proc.h"
#include "../tests/etcd_harness.h"

static int co_run(rsd_etcd *co) {
    for (;;) {
        rsd_pollfd fds[8];
        uint64_t now = rsd_now_ms(), dl;
        rsd_etcd_info v;
        int n, r = rsd_etcd_step(co, now), timeout;
        if (r < 0) return r;
        if (rsd_etcd_next_event(co, &v)) return v.result;
        n = rsd_etcd_pollfds(co, fds, 8);
        dl = rsd_etcd_next_deadline(co);
        now = rsd_now_ms();
        timeout = dl == RSD_NO_DEADLINE ? 50 : dl <= now ? 0 : dl - now > 50 ? 50 : (int)(dl - now);
        (void)poll((struct pollfd *)(void *)fds, (nfds_t)(n > 8 ? 8 : n), timeout);
    }
}

static double etcd_lock(rsd_etcd *co, int n) {
    double t0 = now_us();
    int i;
    for (i = 0; i < n; i++) {
        if (rsd_etcd_lock_begin(co, "router|http://127.0.0.1:8080", "bench", rsd_now_ms(), rsd_now_ms() + 10000) != RSD_OK ||
            co_run(co) != RSD_OK)
            return -1;
        (void)rsd_etcd_unlock_begin(co, rsd_now_ms());
        (void)co_run(co);
    }
    return (now_us() - t0) / n;
}

static double flock_lock(rsd_state *st, int n) {
    rsd_state_lock lk;
    double t0 = now_us();
    int i;
    memset(&lk, 0, sizeof lk);
    for (i = 0; i < n; i++) {
        if (rsd_state_lock_try(st, &lk, "router|http://127.0.0.1:8080", "bench") != RSD_OK) return -1;
        rsd_state_unlock(st, &lk);
    }
    return (now_us() - t0) / n;
}

/* ms per swap, median of n swaps (alternating a and b on a router with room for one). */
static double swaps(const char *coord, const char *state, const char *url, int n) {
    rsd_ensurer_desc d;
    rsd_ensurer *e;
    double t[64];
    int i;
    memset(&d, 0, sizeof d);
    d.state_dir = state;
    d.coord = coord;
    d.ignore_env = true;
    d.no_sse = true;
    d.http.tls_off = true;
    if (!(e = rsd_ensurer_create(&d))) return -1;
    for (i = -1; i < n && i < 64; i++) {
        rsd_ensure_req q;
        rsd_ensure_result res;
        double t0 = now_us();
        memset(&q, 0, sizeof q);
        q.url = url;
        q.model = (i & 1) ? "a" : "b";
        q.runtime = RSD_RUNTIME_LLAMACPP;
        if (rsd_ensurer_sync(e, &q, &res) != RSD_OK || (i >= 0 && !res.lock_held)) {
            rsd_ensurer_destroy(e);
            return -1;
        }
        if (i >= 0) t[i] = (now_us() - t0) / 1000.0;
    }
    rsd_ensurer_destroy(e);
    return median(t, n);
}

int main(void) {
    const char *sim_argv[] = {"build/bin/rsd-sim", "--runtime", "router", "--port", "0", "--models-max", "1",
                              "--load-ms", "5", "--unload-ms", "1", "--model", "id=a", "--model", "id=b", NULL};
    char tmp[] = "/tmp/rsd-bench-etcd-XXXXXX", bin[512], sdir[300], cmd[320];
    double el[5], fl[5], a, b, sw_e, sw_f;
    etcd_proc ep;
    listen_proc sim;
    rsd_state_desc sd;
    rsd_state *st = NULL;
    rsd_etcd_desc cd;
    rsd_etcd *co = NULL;
    int k;
    signal(SIGPIPE, SIG_IGN);
    if (!etcd_find(bin, sizeof bin)) {
        printf("bench-etcd skipped: no etcd binary ($ETCD, /usr/bin/etcd, PATH; Debian: etcd-server)\n");
        return 0;
    }
    if (!mkdtemp(tmp) || etcd_start(&ep, "/bench") != 0) {
        printf("bench-etcd: etcd did not start\n");
        return 1;
    }
    snprintf(sdir, sizeof sdir, "%s/state", tmp);
    memset(&sd, 0, sizeof sd);
    sd.dir = sdir;
    memset(&cd, 0, sizeof cd);
    cd.url = ep.coord;
    cd.http.tls_off = true;
    if ((st = rsd_state_create(&sd, NULL)) == NULL || (co = rsd_etcd_create(&cd)) == NULL) return 1;
    (void)etcd_lock(co, 10); /* warm: connection, lease */
    for (k = 0; k < 5; k++) {
        el[k] = etcd_lock(co, 50);
        fl[k] = flock_lock(st, 2000);
    }
    a = median(el, 5);
    b = median(fl, 5);
    rsd_etcd_destroy(co);
    rsd_state_destroy(st);
    if (listen_proc_start(&sim, sim_argv, -1) != 0) {
        printf("bench-etcd: rsd-sim did not start (make apps)\n");
        return 1;
    }
    snprintf(sdir, sizeof sdir, "%s/swap-etcd", tmp);
    sw_e = swaps(ep.coord, sdir, sim.url, 40);
    snprintf(sdir, sizeof sdir, "%s/swap-flock", tmp);
    sw_f = swaps(NULL, sdir, sim.url, 40);
    listen_proc_stop(&sim);
    etcd_stop(&ep);
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd) != 0) { /* left in /tmp */ }
    printf("BENCH etcd_lock ours=%.0f peer=%.1f unit=us ratio=%.1f\n", a, b, a / b);
    printf("BENCH etcd_swap ours=%.2f peer=%.2f unit=ms ratio=%.2f\n", sw_e, sw_f, sw_e / sw_f);
    printf("\n%-26s %12s %12s  %s\n", "etcd bench (median)", "etcd", "flock", "");
    printf("%-26s %10.0f us %10.1f us  %s\n", "lock take + release", a, b, "2 etcd txns vs flock + owner record");
    printf("%-26s %10.2f ms %10.2f ms  %s\n", "whole swap (rsd-sim)", sw_e, sw_f, "unload + load 5 ms + commit, one host");
    return sw_e < 0 || sw_f < 0 || a < 0 || b < 0;
}
