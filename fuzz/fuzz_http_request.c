/* Fuzz rsd_http_parse_request with the shared head harness (fuzz/http_head_fuzz.h). */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"

#define FZ_HEAD rsd_http_request_head
#define FZ_PARSE rsd_http_parse_request
#define FZ_SAME(a, b) ((a).target.len == (b).target.len)
#include "http_head_fuzz.h"

static void fz_check_kind(const rsd_http_request_head *h, const char *b, size_t c) {
    FZ_CHECK(h->method.len > 0 && fz_inside(h->method, b, c));
    FZ_CHECK(h->target.len > 0 && fz_inside(h->target, b, c));
    FZ_CHECK(!h->expect_continue || h->minor_version == 1);
    { /* Host: one in HTTP/1.1, at most one in 1.0 */
        size_t i, hosts = 0;
        for (i = 0; i < h->num_headers; i++)
            hosts += h->headers[i].name.len == 4 && rsdi_ieq_lit(h->headers[i].name.ptr, 4, "host");
        FZ_CHECK(hosts == 1 || (hosts == 0 && h->minor_version == 0));
    }
}
