/* rsd-http -- a tiny HTTP client for scripts and `make demo` (curl is not always there).

       rsd-http [-X METHOD] [-d BODY] [-s] URL

   Sends one request (POST when -d is given, else GET; -X overrides), prints the body
   to stdout (streamed as it arrives) and "HTTP <status>" to stderr unless -s.
   Exit codes: 0 for a 2xx answer, 1 for any other status, 2 when no answer came
   (connect error, timeout), 64 usage. Built on rsd_http_request_sync. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"

#include <stdio.h>
#include <string.h>

static void on_body(void *user, const char *data, size_t len) {
    (void)user;
    fwrite(data, 1, len, stdout);
    fflush(stdout);
}

int main(int argc, char **argv) {
    const char *method = NULL, *body = NULL, *url = NULL;
    bool silent = false;
    rsd_http_client_desc d;
    rsd_http_client *c;
    rsd_http_request q;
    rsd_http_event ev;
    int i, r;
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-X") && i + 1 < argc) method = argv[++i];
        else if (!strcmp(argv[i], "-d") && i + 1 < argc) body = argv[++i];
        else if (!strcmp(argv[i], "-s")) silent = true;
        else if (argv[i][0] != '-' && !url) url = argv[i];
        else {
            fprintf(stderr, "usage: rsd-http [-X METHOD] [-d BODY] [-s] URL\n");
            return 64;
        }
    }
    if (!url) {
        fprintf(stderr, "usage: rsd-http [-X METHOD] [-d BODY] [-s] URL\n");
        return 64;
    }
    memset(&d, 0, sizeof d);
    d.total_timeout_ms = 600000;
    d.max_request_bytes = 1 << 20;
    c = rsd_http_client_create(&d);
    if (!c) return 2;
    memset(&q, 0, sizeof q);
    q.method = method ? method : body ? "POST" : "GET";
    q.url = url;
    if (body) {
        q.content_type = "application/json";
        q.body = body;
        q.body_len = strlen(body);
    }
    q.on_body = on_body;
    r = rsd_http_request_sync(c, &q, &ev);
    if (r != RSD_OK) {
        fprintf(stderr, "rsd-http: %s: %s\n", url, rsd_result_str(r));
        rsd_http_client_destroy(c);
        return 2;
    }
    if (!silent) fprintf(stderr, "HTTP %d\n", ev.status);
    r = ev.status >= 200 && ev.status < 300 ? 0 : 1;
    rsd_http_client_destroy(c);
    return r;
}
