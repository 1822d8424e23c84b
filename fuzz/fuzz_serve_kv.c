/* libFuzzer target for rsd-serve's kv cache readers (apps/rsd-serve/rsd_serve_kv.h): the
   sidecar (rsrv_kv_meta_read), the file names (rsrv_kv_parse_name) and the child's
   /slots, save/restore and /props answers (rsrv_kv_cached_slots, rsrv_kv_member_int,
   rsrv_kv_build).
   Build: make fuzz T=serve_kv FUZZ_SECS=60
   Invariants checked (abort on violation):
   - a sidecar read back is written again and reads the same (round trip); its model
     is non-empty, tokens and bytes positive, no field holds a line break;
   - a parsed name is 16 hex digits, '-', a slot under RSRV_KV_MAX_SLOTS, ".meta", and
     rsrv_kv_name writes it back byte for byte;
   - the cached slots are at most the cap, each under RSRV_KV_MAX_SLOTS;
   - build_info is NUL-terminated inside its buffer with no line break. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include "../apps/rsd-serve/rsd_serve.h"
#include "../apps/rsd-serve/rsd_serve_kv.h"
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

static rsd_json_tok toks[1024];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *s = (const char *)data;
    rsrv_kv_meta m, back;
    char text[512], name[256], again[RSRV_KV_NAME_MAX], build[RSRV_KV_BUILD_MAX];
    int ids[8], n, i;
    uint64_t key;
    int slot;
    int64_t v;
    if (rsrv_kv_meta_read(s, size, &m)) {
        FZ_CHECK(m.model[0] && m.tokens > 0 && m.bytes > 0);
        n = rsrv_kv_meta_write(&m, text, sizeof text);
        FZ_CHECK(n > 0);
        FZ_CHECK(rsrv_kv_meta_read(text, (size_t)n, &back));
        FZ_CHECK(!strcmp(back.model, m.model) && !strcmp(back.build, m.build));
        FZ_CHECK(back.tokens == m.tokens && back.bytes == m.bytes);
    }
    if (size < sizeof name) {
        memcpy(name, s, size);
        name[size] = 0;
        if (rsrv_kv_parse_name(name, &key, &slot)) {
            FZ_CHECK(slot >= 0 && slot < RSRV_KV_MAX_SLOTS);
            rsrv_kv_name(again, key, slot, true);
            FZ_CHECK(!strcmp(again, name));
        }
    }
    n = rsrv_kv_cached_slots(s, size, toks, 1024, ids, 8);
    FZ_CHECK(n >= -1 && n <= 8);
    for (i = 0; i < n; i++) FZ_CHECK(ids[i] >= 0 && ids[i] < RSRV_KV_MAX_SLOTS);
    (void)rsrv_kv_member_int(s, size, "n_saved", toks, 1024, &v);
    rsrv_kv_build(s, size, toks, 1024, build, sizeof build);
    FZ_CHECK(memchr(build, 0, sizeof build) != NULL && rsrv_kv_field_ok(build, strlen(build)));
    return 0;
}
