/* libFuzzer target for what the programs read alike (apps/rsd_app.h): the input is one
   size, one duration and one percent-encoded string at once.
   Build: make fuzz T=app_parse FUZZ_SECS=60
   Invariants checked (abort on violation):
   - a size or duration read is within the max it was read under, a smaller max gives the
     same value or a refusal, and the value written back as plain digits ("N", "Nms")
     reads the same;
   - every duration read without bare seconds reads the same with them;
   - a decoded string is NUL-terminated within cap, the same under a larger cap, and its
     bytes encoded again as %XX decode to themselves. */
#include "../apps/rsd_app.h"
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

static char out[64], big[4096], enc[3 * sizeof out], back[sizeof out];

static void sizes(const char *s, size_t n) {
    uint64_t v, w;
    char t[32];
    if (!rapp_parse_size(s, n, UINT64_MAX, &v)) return;
    if (rapp_parse_size(s, n, (uint64_t)1 << 40, &w)) FZ_CHECK(w == v && w <= (uint64_t)1 << 40);
    else FZ_CHECK(v > (uint64_t)1 << 40);
    snprintf(t, sizeof t, "%llu", (unsigned long long)v);
    FZ_CHECK(rapp_parse_size(t, strlen(t), UINT64_MAX, &w) && w == v);
}

static void durations(const char *s, size_t n) {
    uint64_t v, w;
    char t[32];
    if (rapp_parse_duration(s, n, false, UINT64_MAX, &v))
        FZ_CHECK(rapp_parse_duration(s, n, true, UINT64_MAX, &w) && w == v);
    if (!rapp_parse_duration(s, n, true, UINT64_MAX, &v)) return;
    if (rapp_parse_duration(s, n, true, 0xFFFFFFFEu, &w)) FZ_CHECK(w == v && w <= 0xFFFFFFFEu);
    else FZ_CHECK(v > 0xFFFFFFFEu);
    snprintf(t, sizeof t, "%llums", (unsigned long long)v);
    FZ_CHECK(rapp_parse_duration(t, strlen(t), false, UINT64_MAX, &w) && w == v);
}

static void decoding(const char *s, size_t n) {
    int k = rapp_pct_decode(s, n, true, out, sizeof out), b = rapp_pct_decode(s, n, true, big, sizeof big), i;
    if (k < 0) { FZ_CHECK(b < 0 || b >= (int)sizeof out - 1); return; }
    FZ_CHECK(k < (int)sizeof out && out[k] == 0 && b == k && !memcmp(out, big, (size_t)k));
    for (i = 0; i < k; i++) snprintf(enc + 3 * i, 4, "%%%02X", (unsigned char)out[i]);
    FZ_CHECK(rapp_pct_decode(enc, (size_t)(3 * k), false, back, sizeof back) == k && !memcmp(back, out, (size_t)k));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *s = (const char *)data;
    sizes(s, size);
    durations(s, size);
    decoding(s, size);
    return 0;
}
