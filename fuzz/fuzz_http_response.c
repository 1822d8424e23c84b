/* Fuzz rsd_http_parse_response with the shared head harness (fuzz/http_head_fuzz.h). */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"

#define FZ_HEAD rsd_http_response_head
#define FZ_PARSE rsd_http_parse_response
#define FZ_SAME(a, b) ((a).status == (b).status)
#include "http_head_fuzz.h"

static void fz_check_kind(const rsd_http_response_head *h, const char *b, size_t c) {
    FZ_CHECK(h->status >= 100 && h->status <= 999);
    FZ_CHECK(fz_inside(h->reason, b, c));
}
