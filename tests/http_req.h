/* http_req.h -- the two pieces of a blocking request that the tests, their harnesses and
   the benches share (test helper, not part of the library). Include after
   residency_http.h; needs <string.h>.
     json_post(&q, url, body)           q as a POST of the JSON text body to url (every
                                        other field zero: the caller sets timeouts after)
     http_sync_into(c, &q, buf, cap)    q on c, blocking: the status, and the body copied
                                        into buf (NUL-terminated, cut to cap - 1) when buf
                                        is given; -1 on a transport error (buf untouched) */
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

static inline int http_sync_into(rsd_http_client *c, const rsd_http_request *q, char *buf, size_t cap) {
    rsd_http_event ev;
    if (rsd_http_request_sync(c, q, &ev) != RSD_OK) return -1;
    if (buf && cap) {
        size_t n = ev.body.len < cap - 1 ? ev.body.len : cap - 1;
        memcpy(buf, ev.body.ptr, n);
        buf[n] = '\0';
    }
    return ev.status;
}
#endif
