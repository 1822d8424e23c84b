/* Fuzz target: rsd-serve's lease answer as the ensurer reads it (residency_http.h >>ensure,
   rsdi_en_lease_parse: a free request's POST and GET answers, a release's DELETE answer),
   with the tokens and buffer sizes of the ensurer's defaults and with small ones.
   Invariants (abort on violation):
   1. RSD_OK or RSD_ERR_PAYLOAD, nothing else; with need_id, RSD_OK means id > 0;
   2. 0 <= n_stopped <= max_ev; every stopped id is a usable id (1..RSD_MODEL_ID_MAX-1
      bytes, no NUL inside: a \u0000 would cut it short), lies inside text, is
      NUL-terminated there, the ids follow each other without overlap, and no byte past
      the text's capacity is written (a guard byte after it stays);
   3. the same input read twice gives the same answer (no state kept). */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

enum { FZ_TEXT = 8192, FZ_EV = RSD_MAX_RESIDENTS };
static rsd_json_tok fz_toks[256];
static rsd_evicted fz_ev[FZ_EV], fz_ev2[FZ_EV];
static char fz_text[FZ_TEXT + 1], fz_text2[FZ_TEXT + 1];

static void fz_one(const char *s, size_t n, uint32_t n_toks, bool need_id, int max_ev, size_t cap) {
    rsdi_en_lease_ans a, b;
    size_t used = 0;
    int r, r2, k;
    fz_text[cap] = 0x5a;
    r = rsdi_en_lease_parse(s, n, fz_toks, n_toks, need_id, &a, fz_ev, max_ev, fz_text, cap);
    FZ_CHECK(r == RSD_OK || r == RSD_ERR_PAYLOAD);
    FZ_CHECK(fz_text[cap] == 0x5a);
    if (r != RSD_OK) return;
    FZ_CHECK(!need_id || a.id > 0);
    FZ_CHECK(a.n_stopped >= 0 && a.n_stopped <= max_ev);
    for (k = 0; k < a.n_stopped; k++) {
        size_t len;
        FZ_CHECK(fz_ev[k].id == fz_text + used);
        len = strlen(fz_ev[k].id);
        FZ_CHECK(len > 0 && len < RSD_MODEL_ID_MAX);
        FZ_CHECK(used + len < cap);
        FZ_CHECK(fz_ev[k].model && !fz_ev[k].model[0]);
        used += len + 1;
    }
    r2 = rsdi_en_lease_parse(s, n, fz_toks, n_toks, need_id, &b, fz_ev2, max_ev, fz_text2, cap);
    FZ_CHECK(r2 == r && b.id == a.id && b.granted == a.granted && b.requested == a.requested &&
             b.ready == a.ready && b.restore == a.restore && b.n_stopped == a.n_stopped);
    for (k = 0; k < a.n_stopped; k++) FZ_CHECK(strcmp(fz_ev[k].id, fz_ev2[k].id) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *s = (const char *)data;
    fz_one(s, size, 256, true, FZ_EV, FZ_TEXT);  /* the ensurer's defaults: 256 tokens, 8 KiB */
    fz_one(s, size, 256, false, FZ_EV, FZ_TEXT); /* a DELETE's answer */
    fz_one(s, size, 16, true, 2, 24);            /* small: few tokens, 2 ids, 24 bytes of text */
    fz_one(s, size, 256, false, 1, 0);           /* no room for any id */
    return 0;
}
