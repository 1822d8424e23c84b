/* game_loop.c -- the same ensure as minimal.c, driven one call per frame so it never
   stalls a frame: each frame does its own work, then gives the ensurer the rest of
   its budget to wait on the sockets (poll), then calls rsd_ensurer_step once.
   With a third argument (bytes, "2G") and URL an rsd-serve, a cutscene follows: it
   needs that much VRAM for a while, so it takes a lease from rsd-serve (POST
   /_rsd/lease: idle models are stopped for it; ttl 60 s, so a crashed game gives the
   bytes back; restore, so the models come back afterwards), plays once the lease is
   ready, and releases it (DELETE /_rsd/lease/ID). The frames never wait on it.
   usage: game_loop [URL] [MODEL] [LEASE_BYTES]   (defaults: http://127.0.0.1:8080 default) */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FRAME_MS = 16, MAX_FRAMES = 60 * 60 * 3 };   /* 60 fps, give up after 3 minutes */

static void simulate_and_render(unsigned frame) { (void)frame; /* the game's own work */ }

/* The rest of the frame: wait on fds until frame_end or the deadline dl. */
static void wait_frame(rsd_pollfd *fds, int nfds, uint64_t dl, uint64_t frame_end) {
    uint64_t now = rsd_now_ms();
    int budget;
    if (dl > frame_end) dl = frame_end;
    budget = dl > now ? (int)(dl - now) : 0;
    if (budget > 0) rsd_poll(fds, nfds, budget); /* poll(), or WSAPoll() on Windows */
}

/* The cutscene with a VRAM lease: ask, wait for ready, play CUTSCENE_FRAMES, release. */
enum { CUTSCENE_FRAMES = 120, LEASE_TTL_MS = 60000 };
static int cutscene(const char *url, const char *bytes) {
    rsd_http_client *c = rsd_http_client_create(NULL);
    rsd_http_request q;
    rsd_http_req_h h;
    char target[256], body[128];
    long long id = 0;
    unsigned frame, played = 0;
    enum { ASK, ASKED, CHECK, CHECKING, PLAY, RELEASE, RELEASING, DONE } st = ASK;
    if (!c) return 1;
    for (frame = 0; frame < MAX_FRAMES && st != DONE; frame++) {
        uint64_t frame_end = rsd_now_ms() + FRAME_MS;
        rsd_pollfd fds[8];
        rsd_http_event ev;
        int nfds;
        simulate_and_render(frame);
        if (st == PLAY && ++played >= CUTSCENE_FRAMES) st = RELEASE;
        if (st == ASK || (st == CHECK && frame % 6 == 0) || st == RELEASE) {
            memset(&q, 0, sizeof q);
            q.total_timeout_ms = 10000;
            if (st == ASK) {
                snprintf(target, sizeof target, "%s/_rsd/lease", url);
                snprintf(body, sizeof body, "{\"bytes\":\"%s\",\"ttl_ms\":%d,\"restore\":true}", bytes, LEASE_TTL_MS);
                q.method = "POST";
                q.content_type = "application/json";
                q.body = body;
                q.body_len = strlen(body);
            } else {
                snprintf(target, sizeof target, "%s/_rsd/lease/%lld", url, id);
                q.method = st == CHECK ? "GET" : "DELETE";
            }
            q.url = target;
            if (rsd_http_send(c, &q, rsd_now_ms(), &h) != RSD_OK) break;
            st = st == ASK ? ASKED : st == CHECK ? CHECKING : RELEASING;
        }
        (void)rsd_http_client_step(c, rsd_now_ms());     /* never blocks */
        while (rsd_http_next_event(c, &ev)) {
            char b[2048];
            size_t bn = ev.body.len < sizeof b - 1 ? ev.body.len : sizeof b - 1;
            const char *p;
            if (bn) memcpy(b, ev.body.ptr, bn);
            b[bn] = 0;
            p = strstr(b, "\"id\":");
            if (ev.result != RSD_OK || ev.status != 200) {
                printf("frame %u: lease %s (HTTP %d): %s\n", frame, st == RELEASING ? "release failed" : "refused",
                       ev.status, b);
                st = DONE; /* play without it, or skip the cutscene: the game decides */
            } else if (st == ASKED || st == CHECKING) {
                if (st == ASKED && p) id = atoll(p + 5);
                printf("frame %u: lease %lld: %s\n", frame, id, b);
                st = strstr(b, "\"ready\":true") ? PLAY : CHECK;
                if (st == PLAY) printf("frame %u: cutscene plays (%u frames)\n", frame, (unsigned)CUTSCENE_FRAMES);
            } else if (st == RELEASING) {
                printf("frame %u: lease %lld released; the models it stopped come back\n", frame, id);
                st = DONE;
            }
        }
        nfds = rsd_http_client_pollfds(c, fds, 8);
        if (nfds > 8) nfds = 8;
        wait_frame(fds, nfds, rsd_http_client_next_deadline(c), frame_end);
    }
    rsd_http_client_destroy(c);
    return st == DONE ? 0 : 1;
}

int main(int argc, char **argv) {
    rsd_ensurer *e = rsd_ensurer_create(NULL);
    rsd_ensure_req q;
    rsd_ensure_result res;
    const rsd_reconcile_notice *notes;
    unsigned frame;
    int rc = RSD_PENDING, seen = 0, n;
    if (!e) return 2;
    memset(&q, 0, sizeof q);
    q.url = argc > 1 ? argv[1] : "http://127.0.0.1:8080";
    q.model = argc > 2 ? argv[2] : "default";
    /* Numeric hosts need nothing; a host name must be resolved before the loop
       (blocking, once), because the frame loop never calls getaddrinfo. */
    rsd_ensurer_resolve(e, q.url);
    rsd_ensurer_begin(e, &q, rsd_now_ms());
    for (frame = 0; frame < MAX_FRAMES && rc == RSD_PENDING; frame++) {
        uint64_t frame_end = rsd_now_ms() + FRAME_MS;
        rsd_pollfd fds[8];
        int nfds;
        simulate_and_render(frame);
        /* Sleep for the rest of the frame, but wake early on socket activity or when
           the ensurer has a deadline (its next poll of the server, a lock retry). */
        nfds = rsd_ensurer_pollfds(e, fds, 8);
        if (nfds > 8) nfds = 8;
        wait_frame(fds, nfds, rsd_ensurer_next_deadline(e), frame_end);
        rc = rsd_ensurer_step(e, rsd_now_ms());           /* never blocks */
        n = rsd_ensurer_notices(e, &notes);               /* notices arrive while it runs */
        for (; seen < n; seen++) printf("frame %u: %s\n", frame, notes[seen].text);
    }
    rsd_ensurer_query(e, &res);
    printf("frame %u: %s: %s (%u requests, %llu ms) %s\n", frame, rsd_outcome_str(res.outcome), q.model,
           (unsigned)res.requests, (unsigned long long)res.elapsed_ms, res.message);
    rsd_ensurer_destroy(e);
    if (res.outcome != RSD_OUTCOME_RESIDENT) return 1;
    return argc > 3 ? cutscene(q.url, argv[3]) : 0;
}
