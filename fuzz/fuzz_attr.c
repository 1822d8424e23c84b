/* Fuzz target: the attribution file parser (residency_http.h >>state).
   Invariants:
   1. parse(input) either fails with an empty set, or succeeds, and then
      format(set) -> parse gives the same set, and format again gives the same bytes;
   2. every proper prefix of a formatted file is rejected (truncation is detected);
   3. the input split at NUL bytes into (model, instance) ids, however hostile,
      survives format -> parse unchanged (escaping round-trips). */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include <stdlib.h>
#include "../tests/attr_set.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

static rsd_attr_set fz_a, fz_b;
static char fz_ids_a[RSD_STATE_ATTR_ARENA_MAX], fz_ids_b[RSD_STATE_ATTR_ARENA_MAX];
static char fz_buf[RSD_STATE_MAX_FILE_BYTES + 1], fz_buf2[RSD_STATE_MAX_FILE_BYTES + 1];

static void fz_check(int ok) {
    if (!ok) abort();
}

/* format x, parse it back, compare; also the prefix and idempotence checks. */
static void fz_roundtrip(const rsd_attr_set *x) {
    int m = rsdi_attr_format(x, fz_buf, RSD_STATE_MAX_FILE_BYTES), m2;
    fz_check(m > 0);
    fz_check(rsdi_attr_parse(fz_buf, (size_t)m, &fz_b) == RSD_OK);
    fz_check(attr_items_same(x, &fz_b));
    m2 = rsdi_attr_format(&fz_b, fz_buf2, RSD_STATE_MAX_FILE_BYTES);
    fz_check(m2 == m && memcmp(fz_buf, fz_buf2, (size_t)m) == 0);
    fz_check(rsdi_attr_parse(fz_buf, (size_t)m - 1, &fz_b) < 0 && fz_b.count == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    size_t i, start = 0, piece = 0;
    char model[RSD_STATE_MAX_ID_BYTES + 1] = "", inst[RSD_STATE_MAX_ID_BYTES + 1];
    /* 0. the input as a lock owner record (tolerant parser; must stay in bounds) */
    {
        rsd_lock_owner o;
        (void)rsdi_state_parse_owner((const char *)d, n, &o);
        fz_check(strlen(o.host) <= RSD_STATE_MAX_HOST_BYTES);
        fz_check(strlen(o.purpose) <= RSD_STATE_MAX_PURPOSE_BYTES);
    }
    /* 1. the input as a file image: into a set that holds any record, and into a small
       one, which reads it whole or not at all (RSD_ERR_TOO_LARGE, empty) */
    (void)rsd_attr_set_init(&fz_a, fz_ids_a, sizeof fz_ids_a);
    (void)rsd_attr_set_init(&fz_b, fz_ids_b, sizeof fz_ids_b);
    if (rsdi_attr_parse((const char *)d, n, &fz_a) == RSD_OK) {
        size_t need = fz_a.arena_used;
        (void)rsd_attr_set_init(&fz_b, fz_ids_b, 300);
        if (need <= 300) {
            fz_check(rsdi_attr_parse((const char *)d, n, &fz_b) == RSD_OK && attr_items_same(&fz_a, &fz_b));
        } else {
            fz_check(rsdi_attr_parse((const char *)d, n, &fz_b) == RSD_ERR_TOO_LARGE);
            fz_check(fz_b.count == 0 && fz_b.over && fz_b.arena_used == need);
        }
        (void)rsd_attr_set_init(&fz_b, fz_ids_b, sizeof fz_ids_b);
        fz_roundtrip(&fz_a);
    } else {
        fz_check(fz_a.count == 0);
    }
    /* 3. the input as NUL-separated ids: model, instance, model, instance, ... */
    (void)rsd_attr_set_init(&fz_a, fz_ids_a, sizeof fz_ids_a);
    for (i = 0; i <= n && fz_a.count < RSD_STATE_MAX_ATTR; i++) {
        if (i < n && d[i] != 0) continue;
        {
            size_t len = i - start;
            if (len > RSD_STATE_MAX_ID_BYTES) len = RSD_STATE_MAX_ID_BYTES;
            if (piece % 2 == 0) {
                memcpy(model, d + start, len);
                model[len] = '\0';
            } else {
                memcpy(inst, d + start, len);
                inst[len] = '\0';
                if (model[0] && rsd_attr_set_find(&fz_a, model, inst) < 0) {
                    fz_check(rsdi_attr_set_put(&fz_a, fz_a.count, model, inst, (uint64_t)n * 1000003u + i,
                                               (int64_t)piece - 1));
                    fz_a.count++;
                }
            }
        }
        piece++;
        start = i + 1;
    }
    fz_roundtrip(&fz_a);
    return 0;
}
