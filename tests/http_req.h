/* http_req.h -- a piece of a blocking request that the tests and the benches share
   (test helper, not part of the library). Include after residency_http.h; needs <string.h>.
     json_post(&q, url, body)           q as a POST of the JSON text body to url (every
                                        other field zero: the caller sets timeouts after) */
#ifndef RSD_TESTS_HTTP_REQ_H
#define RSD_TESTS_HTTP_REQ_H
#include <string.h>

static inline void json_post(rsd_http_request *q, const char *url, const char *body) {
    memset(q, 0, sizeof *q);
    q->method = "POST";
    q->url = url;
    q->content_type = "application/json";
    q->body = body;
    q->body_len = strlen(body);
}
#endif
