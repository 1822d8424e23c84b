/* libFuzzer target for the simulators (apps/rsd-sim/rsd_sim.h): the input is a script of
   requests against one runtime.
   Build: make fuzz T=sim FUZZ_SECS=60
   Input: byte 0 picks the runtime (b % 4), option set (b / 4 % 4) and router generation
   (b / 16 % 2: july, later); then records
   separated by '\n': "<c><METHOD> <target>\t<body>" where <c> is one control byte:
   c % 64 = ms to advance before the request, c & 64 = cancel the request if deferred,
   c & 128 = crash model "b" first.
   Invariants (abort on violation):
   - rsim_handle returns an action >= 0 (the 1 MB buffer always fits), status 100..599;
   - every JSON-typed body (other than the plain-text proxy error) parses as JSON;
   - SSE chunks are "data: ...\n\n"; NDJSON chunks are one JSON object and a newline;
   - after the script, running the clock for an hour answers every deferred request:
     only hung requests and SSE subscribers keep tickets, and no model stays in flight;
   - the request log counts add up.
   Inputs are capped at 1024 bytes (fuzz/sim.options); the simulator state and the
   answer buffer are allocated once, not per input. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include "../apps/rsd-sim/rsd_sim.h"
#include "fuzz_oracle.h"
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

enum { FZ_BODY = 1 << 20 };

/* Allocated once: the simulator (about 600 KB; rsim_configure zeroes it) and the
   1 MB answer buffer. */
static rsim fz_sim;
static char fz_body[FZ_BODY];

FZ_ORACLE_BEGIN
static void fz_check_out(const rsim_resp *r) {
    if (r->action == RSIM_RESPOND) {
        rsd_json_doc d;
        FZ_CHECK(r->status >= 100 && r->status <= 599);
        FZ_CHECK(r->body_len < r->body_cap);
        if (!strcmp(r->content_type, RSIM_CT_JSON) && strncmp(r->body, "proxy error", 11))
            FZ_CHECK(rsd_json_parse(&d, r->body, r->body_len, NULL, 0) > 0);
    }
    if (r->action == RSIM_CHUNK && !strcmp(r->content_type, RSIM_CT_SSE)) /* an event, or a keep-alive frame (later) */
        FZ_CHECK((r->body_len == 3 && !memcmp(r->body, ":\n\n", 3)) ||
                 (r->body_len >= 8 && !memcmp(r->body, "data: ", 6) && !memcmp(r->body + r->body_len - 2, "\n\n", 2)));
    if (r->action == RSIM_CHUNK && !strcmp(r->content_type, RSIM_CT_NDJSON)) {
        rsd_json_doc d;
        FZ_CHECK(r->body_len >= 3 && r->body[r->body_len - 1] == '\n');
        FZ_CHECK(rsd_json_parse(&d, r->body, r->body_len - 1, NULL, 0) > 0);
    }
}
FZ_ORACLE_END

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const rts[] = {"router", "server", "ollama", "lmstudio"};
    static const char *const extra[][4] = {
        {"--models-max", "1", "--sleep-idle-seconds", "1"},
        {"--fail-loads", "2", "--no-models-autoload", ""},
        {"--api-key", "k", "--jit-race", ""},
        {"--max-loaded", "1", "--vram", "5G"}};
    char *av[32];
    int ac = 0, i;
    size_t p = 1;
    uint64_t now = 1000;
    rsim *s = &fz_sim;
    rsim_resp r;
    uint32_t answered = 0;
    if (size < 1) return 0;
    av[ac++] = (char *)"fuzz";
    av[ac++] = (char *)"--runtime";
    av[ac++] = (char *)rts[data[0] % 4];
    for (i = 0; i < 4; i++)
        if (extra[data[0] / 4 % 4][i][0]) av[ac++] = (char *)extra[data[0] / 4 % 4][i];
    av[ac++] = (char *)"--router-gen";
    av[ac++] = (char *)(data[0] / 16 % 2 ? "later" : "july");
    av[ac++] = (char *)"--model";
    av[ac++] = (char *)"id=a,alias=x,size=2G";
    av[ac++] = (char *)"--model";
    av[ac++] = (char *)"id=b,size=3G";
    av[ac++] = (char *)"--model";
    av[ac++] = (char *)"id=c,size=1G,loaded=1,startup=1";
    FZ_CHECK(rsim_configure(s, ac, av) == 0);
    rsim_start(s, now);
    memset(&r, 0, sizeof r);
    r.body = fz_body;
    r.body_cap = FZ_BODY;
    while (p < size) {
        const uint8_t *rec = data + p, *nl = (const uint8_t *)memchr(rec, '\n', size - p);
        size_t n = nl ? (size_t)(nl - rec) : size - p;
        char method[16], target[512];
        const char *sp, *tab;
        size_t ml, tl;
        rsim_req q;
        int act;
        uint8_t c;
        p += n + 1;
        if (n < 2) continue;
        c = rec[0];
        now += c % 64;
        if (c & 128) rsim_crash(s, "b", 2, now);
        sp = (const char *)memchr(rec + 1, ' ', n - 1);
        if (!sp) continue;
        ml = (size_t)(sp - (const char *)rec - 1);
        tab = (const char *)memchr(sp + 1, '\t', n - (size_t)(sp + 1 - (const char *)rec));
        tl = (size_t)((tab ? tab : (const char *)rec + n) - (sp + 1));
        if (ml >= sizeof method || tl >= sizeof target || !ml) continue;
        memcpy(method, rec + 1, ml);
        method[ml] = 0;
        memcpy(target, sp + 1, tl);
        target[tl] = 0;
        memset(&q, 0, sizeof q);
        q.method = method;
        q.target = target;
        if (tab) { q.body = tab + 1; q.body_len = n - (size_t)(tab + 1 - (const char *)rec); }
        q.authorization = (c & 32) ? "Bearer k" : NULL;
        act = rsim_handle(s, &q, now, &r);
        FZ_CHECK(act >= 0);
        fz_check_out(&r);
        if (act == RSIM_RESPOND) answered++;
        if ((c & 64) && act == RSIM_DEFER) rsim_cancel(s, r.ticket, now);
        while (rsim_pull(s, now, &r) > 0) {
            fz_check_out(&r);
            if (r.action == RSIM_RESPOND) answered++;
        }
    }
    now += 3600 * 1000;
    for (i = 0; i < 1000000; i++) {
        uint64_t w;
        while (rsim_pull(s, now, &r) > 0) {
            fz_check_out(&r);
            if (r.action == RSIM_RESPOND) answered++;
        }
        w = rsim_next_wake_ms(s);
        if (w == (uint64_t)-1) break;
        now = w > now ? w : now + 1;
    }
    if (getenv("FZ_DEBUG"))
        for (i = 0; i < RSIM_MAX_TICKETS; i++)
            if (s->t[i].id) fprintf(stderr, "ticket %u op %d model %d out %d\n", s->t[i].id, s->t[i].op, s->t[i].r.model, s->t[i].r.out);
    if (getenv("FZ_DEBUG"))
        for (i = 0; i < s->nmodels; i++)
            fprintf(stderr, "model %s state %d q %u inflight %d failed %d\n", s->m[i].id, s->m[i].state, s->m[i].queue_seq, s->m[i].inflight, s->m[i].failed);
    for (i = 0; i < RSIM_MAX_TICKETS; i++)
        FZ_CHECK(!s->t[i].id || s->t[i].op == RSIM_OP_SSE || s->t[i].op == RSIM_OP_HANG);
    for (i = 0; i < s->nmodels; i++) FZ_CHECK(s->m[i].inflight == 0);
    FZ_CHECK(rsim_log_count(s, NULL, NULL, NULL, RSIM_LOG_PENDING) == 0 || s->log_total > RSIM_LOG_MAX);
    FZ_CHECK(rsim_log_count(s, NULL, NULL, NULL, 0) == (int)(s->log_total < RSIM_LOG_MAX ? s->log_total : RSIM_LOG_MAX));
    (void)answered;
    return 0;
}
