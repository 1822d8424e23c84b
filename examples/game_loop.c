/* game_loop.c -- the same ensure as minimal.c, driven one call per frame so it never
   stalls a frame: each frame does its own work, then gives the ensurer the rest of
   its budget to wait on the sockets (poll), then calls rsd_ensure_step once.
   usage: game_loop [URL] [MODEL]   (defaults: http://127.0.0.1:8080 default) */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include <stdio.h>
#include <string.h>

enum { FRAME_MS = 16, MAX_FRAMES = 60 * 60 * 3 };   /* 60 fps, give up after 3 minutes */

static void simulate_and_render(unsigned frame) { (void)frame; /* the game's own work */ }

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
    rsd_ensure_begin(e, &q, rsd_now_ms());
    for (frame = 0; frame < MAX_FRAMES && rc == RSD_PENDING; frame++) {
        uint64_t frame_end = rsd_now_ms() + FRAME_MS, dl, now;
        rsd_pollfd fds[8];
        int nfds, budget;
        simulate_and_render(frame);
        /* Sleep for the rest of the frame, but wake early on socket activity or when
           the ensurer has a deadline (its next poll of the server, a lock retry). */
        nfds = rsd_ensure_pollfds(e, fds, 8);
        if (nfds > 8) nfds = 8;
        dl = rsd_ensure_next_deadline(e);
        now = rsd_now_ms();
        if (dl > frame_end) dl = frame_end;
        budget = dl > now ? (int)(dl - now) : 0;
        if (budget > 0) rsd_poll(fds, nfds, budget); /* poll(), or WSAPoll() on Windows */
        rc = rsd_ensure_step(e, rsd_now_ms());           /* never blocks */
        n = rsd_ensure_notices(e, &notes);               /* notices arrive while it runs */
        for (; seen < n; seen++) printf("frame %u: %s\n", frame, notes[seen].text);
    }
    rsd_ensure_query(e, &res);
    printf("frame %u: %s: %s (%u requests, %llu ms) %s\n", frame, rsd_outcome_str(res.outcome), q.model,
           (unsigned)res.requests, (unsigned long long)res.elapsed_ms, res.message);
    rsd_ensurer_destroy(e);
    return res.outcome == RSD_OUTCOME_RESIDENT ? 0 : 1;
}
