/* Fuzz the device memory probe's parsers: rsd_devmem_parse_meminfo (the "Key: N kB" lines
   of /proc/meminfo and /proc/PID/status, and DRM fdinfo's "Key: N KiB") and rsd_devmem_parse_u64 (a sysfs number). The
   first byte picks the key; the rest is the file. Invariants: only the documented results;
   a value is written only on RSD_OK (else it is 0); an accepted sysfs number prints back
   as its digits without leading zeros; a meminfo value given in kB is a multiple of 1024
   and equals the number on its line times 1024; every prefix parses without crashing. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

static const char *const fz_keys[] = {"MemTotal", "MemAvailable", "MemFree", "VmRSS", "HugePages_Total", "M",
                                      "drm-client-id", "drm-memory-vram"};

static void fz_u64(const char *b, size_t n) {
    uint64_t v = 7;
    int r = rsd_devmem_parse_u64(b, n, &v);
    FZ_CHECK(r == RSD_OK || r == RSD_ERR_PAYLOAD || r == RSD_ERR_OVERFLOW);
    if (r == RSD_OK) {
        char t[32];
        size_t i = 0, d;
        int w = snprintf(t, sizeof t, "%llu", (unsigned long long)v);
        while (i + 1 < n && b[i] == '0' && b[i + 1] >= '0' && b[i + 1] <= '9') i++; /* leading zeros */
        for (d = i; d < n && b[d] >= '0' && b[d] <= '9'; d++) {}
        FZ_CHECK(w > 0 && (size_t)w == d - i && !memcmp(t, b + i, d - i));
    } else {
        FZ_CHECK(v == 0);
    }
}

static void fz_meminfo(const char *b, size_t n, const char *key) {
    uint64_t v = 7;
    int r = rsd_devmem_parse_meminfo(b, n, key, &v);
    FZ_CHECK(r == RSD_OK || r == RSD_ERR_NOT_FOUND || r == RSD_ERR_PAYLOAD || r == RSD_ERR_OVERFLOW);
    if (r != RSD_OK) FZ_CHECK(v == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *key;
    char *b;
    size_t n, i;
    if (size < 1) return 0;
    key = fz_keys[data[0] % (sizeof fz_keys / sizeof fz_keys[0])];
    n = size - 1;
    b = (char *)malloc(n ? n : 1); /* exact size: ASan sees a read past the end */
    if (!b) abort();
    if (n) memcpy(b, data + 1, n);
    fz_u64(b, n);
    fz_meminfo(b, n, key);
    { /* a line of key's own, in kB, with the input's leading digits: the kB rule */
        char line[96];
        size_t d = 0;
        uint64_t v = 0, plain = 0;
        while (d < n && d < 19 && b[d] >= '0' && b[d] <= '9') d++;
        if (d) {
            int w = snprintf(line, sizeof line, "%s:  %.*s kB\n", key, (int)d, b);
            int r = rsd_devmem_parse_meminfo(line, (size_t)w, key, &v);
            FZ_CHECK(rsd_devmem_parse_u64(b, d, &plain) == RSD_OK);
            if (plain > UINT64_MAX / 1024) FZ_CHECK(r == RSD_ERR_OVERFLOW);
            else FZ_CHECK(r == RSD_OK && v == plain * 1024);
        }
    }
    if (n <= 256)
        for (i = 0; i < n; i++) {
            fz_u64(b, i);
            fz_meminfo(b, i, key);
        }
    free(b);
    return 0;
}
