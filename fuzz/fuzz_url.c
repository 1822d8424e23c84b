/* Fuzz rsd_url_parse and the target key (rsd_target_key_normalise) of the URLs it
   accepts. Invariants: views lie inside the input; the key is never longer than the
   input nor than RSD_TARGET_KEY_MAX - 1 bytes (a longer one is RSD_ERR_BUFFER),
   parses, and is a fixed point (key(key) == key) with the same scheme, host kind
   and port; it equals the key built from the parsed fields (scheme, lower-case
   host, the port unless default, the path up to '?' without trailing '/', one "/v1"
   and trailing '/' again); every prefix parses without crashing. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

static bool fz_inside(rsd_str v, const char *b, size_t n) {
    return v.len == 0 || (v.ptr >= b && v.ptr + v.len <= b + n);
}

static int fz_parse(const uint8_t *d, size_t n, rsd_url *u) {
    char *b = (char *)malloc(n ? n : 1);
    int r;
    if (!b) abort();
    if (n) memcpy(b, d, n);
    r = rsd_url_parse(u, b, n);
    FZ_CHECK(r == RSD_OK || r == RSD_ERR_URL);
    if (r == RSD_OK) {
        FZ_CHECK(fz_inside(u->scheme, b, n) && fz_inside(u->host, b, n) && fz_inside(u->path, b, n));
        FZ_CHECK(u->host.len > 0 && u->port > 0);
        FZ_CHECK(u->host_kind > RSD_HOST_INVALID && u->host_kind < RSD_HOST_NUM);
        FZ_CHECK(u->path.len == 0 || u->path.ptr[0] == '/');
    }
    free(b);
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rsd_url u, u2;
    char k[RSD_URL_MAX_BYTES + 16], k2[RSD_URL_MAX_BYTES + 16];
    size_t i;
    int r = fz_parse(data, size, &u), kl, kl2;
    if (size <= 512)
        for (i = 0; i < size; i++) (void)fz_parse(data, i, &u2);
    if (r != RSD_OK) return 0;
    /* u's views point into freed memory now: parse a live copy for the key */
    {
        char *b = (char *)malloc(size);
        if (!b) abort();
        memcpy(b, data, size);
        FZ_CHECK(rsd_url_parse(&u, b, size) == RSD_OK);
        rsd_str bs;
        bs.ptr = b;
        bs.len = size;
        kl = rsd_target_key_normalise(bs, k, sizeof k);
        if (kl == RSD_ERR_BUFFER && size >= RSD_TARGET_KEY_MAX) { /* a key over RSD_TARGET_KEY_MAX */
            free(b);
            return 0;
        }
        FZ_CHECK(kl > 0 && kl < RSD_TARGET_KEY_MAX && (size_t)kl <= size && strlen(k) == (size_t)kl);
        FZ_CHECK(rsd_target_key_normalise(bs, k2, (size_t)kl) == RSD_ERR_BUFFER);
        FZ_CHECK(rsd_url_parse(&u2, k, (size_t)kl) == RSD_OK);
        kl2 = rsd_target_key_normalise(rsd_str_c(k), k2, sizeof k2);
        FZ_CHECK(kl2 == kl && strcmp(k, k2) == 0);
        FZ_CHECK(u2.tls == u.tls && u2.port == u.port && u2.host_kind == u.host_kind);
        FZ_CHECK(u2.host.len == u.host.len);
        { /* the key from the parsed fields */
            char ref[RSD_URL_MAX_BYTES + 16];
            size_t n = 0, j, pl = 0;
            n += (size_t)snprintf(ref, sizeof ref, "%s", u.tls ? "https://" : "http://");
            if (u.host_kind == RSD_HOST_IPV6) ref[n++] = '[';
            for (j = 0; j < u.host.len; j++)
                ref[n++] = (char)(u.host.ptr[j] >= 'A' && u.host.ptr[j] <= 'Z' ? u.host.ptr[j] + 32 : u.host.ptr[j]);
            if (u.host_kind == RSD_HOST_IPV6) ref[n++] = ']';
            if (u.port != (u.tls ? 443 : 80)) n += (size_t)snprintf(ref + n, sizeof ref - n, ":%u", (unsigned)u.port);
            while (pl < u.path.len && u.path.ptr[pl] != '?') pl++;
            while (pl && u.path.ptr[pl - 1] == '/') pl--;
            for (;;) { /* the key's fixed point: every trailing "/v1" */
                if (pl >= 3 && memcmp(u.path.ptr + pl - 3, "/v1", 3) == 0) pl -= 3;
                else break;
                while (pl && u.path.ptr[pl - 1] == '/') pl--;
            }
            memcpy(ref + n, u.path.ptr, pl);
            ref[n + pl] = '\0';
            FZ_CHECK(strcmp(ref, k) == 0);
        }
        free(b);
    }
    return 0;
}
