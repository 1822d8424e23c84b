/* Fuzz target: the etcd v3 gateway answers (residency_http.h >>etcd): the answer parser,
   base64, and what the coordinator takes from an answer (attribution, generation, the
   hosts' protections, the lock record) for each operation, as if etcd had sent the input
   with status 200 (and, from the first byte, 404 or 401).
   Invariants:
   1. the parser stays in bounds: every kv's key is NUL-terminated inside its buffer, every
      value lies inside the decoded-values buffer, n_kvs <= RSD_ETCD_MAX_KVS;
   2. base64: decode(encode(x)) == x for the input bytes; a decodable input re-encodes to
      something that decodes to the same bytes;
   3. the coordinator's view after any answer is bounded (attribution <= RSD_STATE_MAX_ATTR,
      protections <= RSD_MAX_PROTECTED, owner NUL-terminated) and an operation either ends
      or waits for its next request: never a held lock from an answer that did not say
      "succeeded";
   4. the protections: each model once; a further page is asked for only after a key
      greater than the last one (paging always ends), and protected_why is set exactly when
      protected_incomplete is. Each answer is also read as such a further page. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

static rsd_etcd *fz_co;
static char fz_vals[1 << 18], fz_b[1 << 18], fz_b2[1 << 18];
static rsd_json_tok fz_toks[4096];
static rsdi_etcd_ans fz_a;

static void fz_check(int ok) {
    if (!ok) abort();
}

static void fz_answer(int op, int status, const uint8_t *d, size_t n, bool page) {
    rsd_http_event ev;
    rsd_etcd_info v;
    uint64_t now = 1000;
    char after[RSD_ETCD_MAX_KEY_BYTES];
    int i, j;
    memset(&ev, 0, sizeof ev);
    ev.result = RSD_OK;
    ev.status = status;
    ev.body.ptr = (const char *)d;
    ev.body.len = n;
    fz_co->held = false;
    fz_co->op = op;
    fz_co->sub = RSDI_ES_TXN;
    fz_co->inflight = true;
    fz_co->deadline = now + 10;
    fz_co->err_since = fz_co->down_at = 0;
    fz_co->n_chg = 0;
    if (op == RSDI_EO_COMMIT) {
        fz_co->held = (d[0] & 1) != 0;
        fz_co->fence = 9;
    }
    fz_co->paging = fz_co->pg_more = false;
    if (page) { /* as after a first answer that said more: known so far, one model */
        fz_co->paging = true;
        fz_co->pg_end = RSD_OK;
        fz_co->pg_then = RSDI_EP_END;
        fz_co->n_rprot = 1;
        memcpy(fz_co->rprot_ids[0], "chat-8b", sizeof "chat-8b");
        fz_co->rprot[0].model_id = rsd_str_c(fz_co->rprot_ids[0]);
        fz_co->rprot[0].role = RSD_ROLE_NONE;
        fz_co->prot_incomplete = false;
        fz_co->prot_why[0] = '\0';
        memcpy(fz_co->pg_after, "/fz/prot/host-a", sizeof "/fz/prot/host-a");
    }
    memcpy(after, fz_co->pg_after, sizeof after);
    rsdi_etcd_answer(fz_co, &ev, now);
    rsd_etcd_query(fz_co, &v);
    fz_check(v.attrs->count <= RSD_STATE_MAX_ATTR);
    fz_check(v.n_protected >= 0 && v.n_protected <= RSD_MAX_PROTECTED);
    for (i = 0; i < v.n_protected; i++)
        for (j = 0; j < i; j++) fz_check(!rsd_str_eq(v.protected_models[i].model_id, v.protected_models[j].model_id));
    fz_check(v.protected_incomplete == (v.protected_why[0] != '\0'));
    if (fz_co->paging && fz_co->pg_more) {
        fz_check(memchr(fz_co->pg_after, '\0', sizeof fz_co->pg_after) != NULL);
        fz_check(strcmp(fz_co->pg_after, page ? after : "") > 0);
        fz_check(strncmp(fz_co->pg_after, fz_co->k_prot, strlen(fz_co->k_prot)) == 0);
    }
    fz_check(strlen(v.owner) < RSDI_ETCD_OWNER_BYTES && strlen(v.message) < sizeof fz_co->message);
    if (op == RSDI_EO_LOCK && v.held) fz_check(fz_co->ans.succeeded && status == 200);
    fz_co->op = RSDI_EO_NONE;
    fz_co->inflight = false;
    fz_co->held = false;
    fz_co->paging = fz_co->pg_more = false;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    size_t i;
    long m;
    if (!fz_co) {
        rsd_etcd_desc cd;
        memset(&cd, 0, sizeof cd);
        cd.url = "etcd://127.0.0.1:1/fz";
        cd.host_id = "self";
        cd.http.tls_off = true;
        fz_check((fz_co = rsd_etcd_create(&cd)) != NULL);
        /* the keys of the seeds (captured from etcd 3.4 with these names) */
        memcpy(fz_co->k_lock, "/fz/lock/x", sizeof "/fz/lock/x");
        memcpy(fz_co->k_attr, "/fz/attr/x", sizeof "/fz/attr/x");
        memcpy(fz_co->k_gen, "/fz/gen/x", sizeof "/fz/gen/x");
        memcpy(fz_co->tkey, "x", 2);
    }
    /* 1. the parser */
    memset(&fz_a, 0, sizeof fz_a);
    fz_a.vals = fz_vals;
    fz_a.vals_cap = sizeof fz_vals;
    if (rsdi_etcd_parse((const char *)d, n, fz_toks, 4096, &fz_a) == RSD_OK) {
        fz_check(fz_a.n_kvs >= 0 && fz_a.n_kvs <= RSD_ETCD_MAX_KVS);
        fz_check(fz_a.vals_len <= fz_a.vals_cap);
        fz_check(fz_a.skipped >= 0 && fz_a.after >= -1 && fz_a.after < fz_a.n_kvs);
        fz_check(fz_a.more || fz_a.after == -1);
        for (i = 0; i < (size_t)fz_a.n_kvs; i++) {
            fz_check(memchr(fz_a.kvs[i].key, '\0', sizeof fz_a.kvs[i].key) != NULL);
            fz_check(fz_a.kvs[i].val_off + fz_a.kvs[i].val_len <= fz_a.vals_len);
        }
    }
    /* 2. base64 */
    if (n <= sizeof fz_b / 2) {
        size_t e = rsdi_b64_encode(d, n, fz_b);
        fz_check(e == rsdi_b64_len(n));
        fz_check(rsdi_b64_decode(fz_b, e, fz_b2, sizeof fz_b2) == (long)n);
        fz_check(n == 0 || memcmp(fz_b2, d, n) == 0);
        m = rsdi_b64_decode((const char *)d, n, fz_b2, sizeof fz_b2);
        if (m >= 0) {
            size_t e2 = rsdi_b64_encode((const unsigned char *)fz_b2, (size_t)m, fz_b);
            fz_check(rsdi_b64_decode(fz_b, e2, fz_b2 + sizeof fz_b2 / 2, sizeof fz_b2 / 2) == m);
            fz_check(m == 0 || memcmp(fz_b2, fz_b2 + sizeof fz_b2 / 2, (size_t)m) == 0);
        }
    }
    /* 3. the coordinator's reading of it, per operation */
    if (n > 0) {
        int status = d[0] == '4' ? 404 : d[0] == '!' ? 401 : 200;
        fz_answer(RSDI_EO_READ, status, d, n, false);
        fz_answer(RSDI_EO_LOCK, status, d, n, false);
        fz_answer(RSDI_EO_COMMIT, status, d, n, false);
        fz_answer(RSDI_EO_READ, status, d, n, true);
        fz_answer(RSDI_EO_LOCK, status, d, n, true);
        fz_co->sub = RSDI_ES_GRANT;
        fz_co->op = RSDI_EO_LOCK;
        {
            rsd_http_event ev;
            memset(&ev, 0, sizeof ev);
            ev.status = 200;
            ev.body.ptr = (const char *)d;
            ev.body.len = n;
            fz_co->inflight = true;
            rsdi_etcd_answer(fz_co, &ev, 1000);
            fz_co->ka_inflight = true;
            fz_co->ka_h = ev.req;
            rsdi_etcd_ka_answer(fz_co, &ev);
        }
        fz_co->op = RSDI_EO_NONE;
        fz_co->inflight = false;
    }
    return 0;
}
