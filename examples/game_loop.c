/* game_loop.c -- the same ensure as minimal.c, driven one call per frame so it never
   stalls a frame: each frame does its own work, then gives the ensurer the rest of
   its budget to wait on the sockets (poll), then calls rsd_ensurer_step once.
   With a third argument (bytes, "2G"), a cutscene follows: it needs that much VRAM for
   a while, so it asks the same ensurer to free it (a free request: model NULL,
   free_bytes). On rsd-serve that is rsd-serve's own lease: idle models are stopped
   for it, ttl 60 s so a crashed game gives the bytes back, and they come back on
   release; on a llama.cpp router, models residency loaded are unloaded and loaded
   back on release. The cutscene plays once the memory is free (the processes have
   exited and, where rsd-serve reads the device, it shows the bytes free), then the
   lease is released the same way. The frames never wait on it.
   usage: game_loop [URL] [MODEL] [LEASE_BYTES]   (defaults: http://127.0.0.1:8080 default) */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FRAME_MS = 16, MAX_FRAMES = 60 * 60 * 3 };   /* 60 fps, give up after 3 minutes */
enum { CUTSCENE_FRAMES = 120, LEASE_TTL_MS = 60000 };

static unsigned g_frame;

static void simulate_and_render(unsigned frame) { (void)frame; /* the game's own work */ }

/* The rest of the frame: wait on fds until frame_end or the deadline dl. */
static void wait_frame(rsd_pollfd *fds, int nfds, uint64_t dl, uint64_t frame_end) {
    uint64_t now = rsd_now_ms();
    int budget;
    if (dl > frame_end) dl = frame_end;
    budget = dl > now ? (int)(dl - now) : 0;
    if (budget > 0) rsd_poll(fds, nfds, budget); /* poll(), or WSAPoll() on Windows */
}

/* Frames until what e runs (an ensure, a free request, a release) is done: each frame
   does its own work, sleeps for the rest of it but wakes early on socket activity or
   when the ensurer has a deadline (its next poll of the server, a lock retry), then
   steps the ensurer once (never blocks). *res: its end (or where it stands after
   MAX_FRAMES). */
static void frames_until_done(rsd_ensurer *e, rsd_ensure_result *res) {
    const rsd_reconcile_notice *notes;
    int waiting = 0, seen = 0, n;
    for (; g_frame < MAX_FRAMES && waiting == 0; g_frame++) {
        uint64_t frame_end = rsd_now_ms() + FRAME_MS;
        rsd_pollfd fds[8]; /* an ensurer made with a zeroed desc waits on 5 sockets at most (2 with no etcd) */
        int nfds;
        simulate_and_render(g_frame);
        nfds = rsd_ensurer_pollfds(e, fds, 8);
        wait_frame(fds, nfds, rsd_ensurer_next_deadline(e), frame_end);
        waiting = rsd_ensurer_step(e, rsd_now_ms()); /* 1 once it has ended */
        n = rsd_ensurer_notices(e, &notes);           /* notices arrive while it runs */
        for (; seen < n; seen++) printf("frame %u: %s\n", g_frame, notes[seen].text);
    }
    if (!rsd_ensurer_next_event(e, res)) rsd_ensurer_query(e, res);
}

/* "2G", "512M", "1000": bytes (binary suffixes); 0 when it is not a size. */
static uint64_t parse_bytes(const char *s) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20 : *end == 'G' || *end == 'g' ? 30
              : *end == 'T' || *end == 't' ? 40 : 0;
    if (end == s || (shift && end[1]) || (!shift && *end) || v > (~0ULL >> shift)) return 0;
    return (uint64_t)v << shift;
}

/* The cutscene with a VRAM lease: free the bytes, play CUTSCENE_FRAMES, release. */
static int cutscene(rsd_ensurer *e, const char *url, const char *bytes) {
    rsd_ensure_req q;
    rsd_ensure_result res;
    char lease[48];
    unsigned played;
    int i;
    memset(&q, 0, sizeof q);
    q.url = url;
    q.free_bytes = parse_bytes(bytes); /* model NULL: a free request */
    q.lease_ttl_ms = LEASE_TTL_MS;
    if (!q.free_bytes) {
        printf("not a size: %s\n", bytes);
        return 2;
    }
    rsd_ensurer_begin(e, &q, rsd_now_ms());
    frames_until_done(e, &res);
    if (res.outcome != RSD_OUTCOME_FREED) { /* play without it, or skip the cutscene: the game decides */
        printf("frame %u: no lease (%s): %s\n", g_frame, rsd_outcome_str(res.outcome), res.message);
        return res.result < 0 ? 1 : 0;
    }
    if (res.message[0]) printf("frame %u: %s\n", g_frame, res.message);
    printf("frame %u: freed %llu of %llu bytes; stopped:", g_frame, (unsigned long long)res.freed_bytes,
           (unsigned long long)q.free_bytes);
    for (i = 0; i < res.n_evicted; i++) printf(" %s", res.evicted[i].id);
    printf("\nframe %u: cutscene plays (%u frames)\n", g_frame, (unsigned)CUTSCENE_FRAMES);
    snprintf(lease, sizeof lease, "%s", res.lease_id); /* the next begin reuses the result's text */
    for (played = 0; played < CUTSCENE_FRAMES; played++, g_frame++) {
        uint64_t frame_end = rsd_now_ms() + FRAME_MS;
        simulate_and_render(g_frame); /* the cutscene has the memory */
        wait_frame(NULL, 0, frame_end, frame_end);
    }
    if (rsd_ensurer_lease_return_begin(e, &q, lease, rsd_now_ms()) != RSD_OK) return 1;
    frames_until_done(e, &res);
    printf("frame %u: lease %s %s: %d model(s) back%s%s\n", g_frame, lease,
           res.result == RSD_OK ? "released" : "release failed", res.restored, res.message[0] ? "; " : "",
           res.message);
    return res.result == RSD_OK ? 0 : 1;
}

int main(int argc, char **argv) {
    rsd_ensurer *e = rsd_ensurer_create(NULL);
    rsd_ensure_req q;
    rsd_ensure_result res;
    int rc;
    if (!e) return 2;
    memset(&q, 0, sizeof q);
    q.url = argc > 1 ? argv[1] : "http://127.0.0.1:8080";
    q.model = argc > 2 ? argv[2] : "default";
    /* Numeric hosts need nothing; a host name must be resolved before the loop
       (blocking, once), because the frame loop never calls getaddrinfo. */
    rsd_ensurer_resolve_sync(e, q.url);
    rsd_ensurer_begin(e, &q, rsd_now_ms());
    frames_until_done(e, &res);
    printf("frame %u: %s: %s (%u requests, %llu ms) %s\n", g_frame, rsd_outcome_str(res.outcome), q.model,
           (unsigned)res.requests, (unsigned long long)res.elapsed_ms, res.message);
    rc = res.outcome != RSD_OUTCOME_RESIDENT ? 1 : argc > 3 ? cutscene(e, q.url, argv[3]) : 0;
    rsd_ensurer_destroy(e);
    return rc;
}
