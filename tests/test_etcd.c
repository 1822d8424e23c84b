/* test_etcd.c -- the lock, the attribution and the generation on a real etcd (v3 JSON
   gateway, Debian's etcd-server 3.4): the coordinator alone (shapes, busy lock, fencing,
   lease expiry), two ensurers acting as two hosts on one rsd-sim router for a few hundred
   rounds, a holder killed with kill -9 mid-swap, etcd stopped mid-run (fail-open and
   fail-closed). Skipped with one line when no etcd binary is found. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include "rsd_test.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIM_BIN "build/bin/rsd-sim"
#define SIM_RUNTIME "router"
#include "sim_harness.h"
#include "etcd_harness.h"
#include "ensure_code.h"

static etcd_proc g_etcd;
static char g_tmp[256];

/* Steps co (real clock, polling its sockets) until its operation is done; bounded. */
static int co_run(rsd_etcd *co) {
    uint64_t end = rsd_now_ms() + 60000;
    int r;
    while (rsd_now_ms() < end) {
        rsd_pollfd fds[8];
        uint64_t now = rsd_now_ms(), dl;
        int n, timeout;
        rsd_etcd_info v;
        r = rsd_etcd_step(co, now);
        if (r < 0) return r;
        if (r > 0) CHECK(rsd_etcd_next_deadline(co) == 0); /* its end waits to be pulled */
        if (rsd_etcd_next_event(co, &v)) return v.result;
        n = rsd_etcd_pollfds(co, fds, 8);
        dl = rsd_etcd_next_deadline(co);
        now = rsd_now_ms();
        timeout = dl == RSD_NO_DEADLINE ? 50 : dl <= now ? 0 : dl - now > 50 ? 50 : (int)(dl - now);
        if (timeout > 0) (void)poll((struct pollfd *)(void *)fds, (nfds_t)(n > 8 ? 8 : n), timeout);
    }
    return RSD_ERR_TIMEOUT;
}

static rsd_etcd *co_new(const char *coord, const char *host, uint32_t ttl_s, bool fail_closed) {
    rsd_etcd_desc d;
    memset(&d, 0, sizeof d);
    d.url = coord;
    d.host_id = host;
    d.lease_ttl_s = ttl_s;
    d.fail_closed = fail_closed;
    d.http.tls_off = true;
    return rsd_etcd_create(&d);
}

/* ---- pure parts: URL, base64, the answer parser ---------------------------------- */
static void test_etcd_url(void) {
    char root[128], prefix[160];
    CHECK_EQ_INT(rsd_etcd_parse_url("etcd://10.0.0.5:2379/studio/a/", root, sizeof root, prefix, sizeof prefix), RSD_OK);
    CHECK_EQ_STR(root, "http://10.0.0.5:2379");
    CHECK_EQ_STR(prefix, "/studio/a");
    CHECK_EQ_INT(rsd_etcd_parse_url("etcd://gpu-box", root, sizeof root, prefix, sizeof prefix), RSD_OK);
    CHECK_EQ_STR(root, "http://gpu-box:2379");
    CHECK_EQ_STR(prefix, "/residency");
    CHECK_EQ_INT(rsd_etcd_parse_url("etcds://h:2379", root, sizeof root, prefix, sizeof prefix), RSD_OK);
    CHECK_EQ_STR(root, "https://h:2379");
    CHECK_EQ_INT(rsd_etcd_parse_url("redis://h", root, sizeof root, prefix, sizeof prefix), RSD_ERR_URL);
    CHECK_EQ_INT(rsd_etcd_parse_url("etcd://", root, sizeof root, prefix, sizeof prefix), RSD_ERR_URL);
    CHECK_EQ_INT(rsd_etcd_parse_url("etcd://h:2379/p?x=1", root, sizeof root, prefix, sizeof prefix), RSD_ERR_URL);
    CHECK_EQ_INT(rsd_etcd_parse_url("etcd://u@h:2379", root, sizeof root, prefix, sizeof prefix), RSD_ERR_URL);
}

static void test_etcd_base64(void) {
    const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *out[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    char b[32], d[32];
    size_t i;
    for (i = 0; i < sizeof in / sizeof in[0]; i++) {
        size_t n = rsdi_b64_encode((const unsigned char *)in[i], strlen(in[i]), b);
        b[n] = '\0';
        CHECK_EQ_STR(b, out[i]);
        CHECK_EQ_INT(rsdi_b64_decode(b, n, d, sizeof d), (long)strlen(in[i]));
        CHECK(memcmp(d, in[i], strlen(in[i])) == 0);
    }
    CHECK_EQ_INT(rsdi_b64_decode("Zm9", 3, d, sizeof d), -1);
    CHECK_EQ_INT(rsdi_b64_decode("Zm=v", 4, d, sizeof d), -1);
    CHECK_EQ_INT(rsdi_b64_decode("Zm9v", 4, d, 2), -1);
    CHECK_EQ_INT(rsdi_b64_decode("Z!9v", 4, d, sizeof d), -1);
}

static char g_vals[1 << 16];
static rsd_json_tok g_etoks[512];

static void test_etcd_parse_answers(void) {
    /* as etcd 3.4.23 answered (a txn that failed has no "succeeded"; a count of 0 no "kvs") */
    const char *txn_ok = "{\"header\":{\"cluster_id\":\"1\",\"member_id\":\"2\",\"revision\":\"7\",\"raft_term\":\"2\"},"
                         "\"succeeded\":true,\"responses\":[{\"response_put\":{\"header\":{\"revision\":\"7\"}}},"
                         "{\"response_range\":{\"header\":{\"revision\":\"7\"},\"kvs\":[{\"key\":\"Zm9v\",\"create_revision\":\"2\","
                         "\"mod_revision\":\"5\",\"version\":\"3\",\"value\":\"YmFy\"}],\"count\":\"1\"}},"
                         "{\"response_range\":{\"header\":{\"revision\":\"7\"}}}]}";
    const char *txn_fail = "{\"header\":{\"revision\":\"9\"},\"responses\":[{\"response_range\":{\"header\":{},"
                           "\"kvs\":[{\"key\":\"bGs=\",\"create_revision\":\"8\",\"mod_revision\":\"8\"}]}}]}";
    const char *grant = "{\"header\":{\"revision\":\"1\"},\"ID\":\"4111120368391667718\",\"TTL\":\"3\"}";
    const char *ka_dead = "{\"result\":{\"header\":{\"revision\":\"4\"},\"ID\":\"4111120368391667724\"}}";
    const char *err = "{\"error\":\"etcdserver: requested lease not found\",\"message\":\"x\",\"code\":5}";
    rsdi_etcd_ans a;
    memset(&a, 0, sizeof a);
    a.vals = g_vals;
    a.vals_cap = sizeof g_vals;
    REQUIRE(rsdi_etcd_parse(txn_ok, strlen(txn_ok), g_etoks, 512, &a) == RSD_OK);
    CHECK(a.succeeded);
    CHECK_EQ_INT(a.revision, 7);
    REQUIRE(a.n_kvs == 1);
    CHECK_EQ_STR(a.kvs[0].key, "foo");
    CHECK_EQ_INT(a.kvs[0].val_len, 3);
    CHECK(memcmp(a.vals + a.kvs[0].val_off, "bar", 3) == 0);
    CHECK_EQ_INT(a.kvs[0].create_rev, 2);
    CHECK_EQ_INT(a.kvs[0].mod_rev, 5);
    REQUIRE(rsdi_etcd_parse(txn_fail, strlen(txn_fail), g_etoks, 512, &a) == RSD_OK);
    CHECK(!a.succeeded);
    CHECK_EQ_INT(a.revision, 9);
    REQUIRE(a.n_kvs == 1);
    CHECK_EQ_STR(a.kvs[0].key, "lk");
    CHECK_EQ_INT(a.kvs[0].val_len, 0);
    REQUIRE(rsdi_etcd_parse(grant, strlen(grant), g_etoks, 512, &a) == RSD_OK);
    CHECK(a.id == 4111120368391667718LL);
    CHECK_EQ_INT(a.ttl, 3);
    REQUIRE(rsdi_etcd_parse(ka_dead, strlen(ka_dead), g_etoks, 512, &a) == RSD_OK);
    CHECK(a.id == 4111120368391667724LL);
    CHECK_EQ_INT(a.ttl, 0);
    REQUIRE(rsdi_etcd_parse(err, strlen(err), g_etoks, 512, &a) == RSD_OK);
    CHECK(a.has_error);
    CHECK_EQ_INT(a.code, 5);
    CHECK(strstr(a.error, "lease not found") != NULL);
    CHECK(rsdi_etcd_parse("[1]", 3, g_etoks, 512, &a) < 0);
    CHECK(rsdi_etcd_parse("{\"kvs\":[{\"key\":\"@@\"}]", 21, g_etoks, 512, &a) < 0);
}

/* An attribution in etcd whose ids do not fit a coordinator's attr_arena_bytes reads as
   empty and marked over (not corrupt), and a commit from it fails naming the limit: the
   record is never rewritten shorter, and a coordinator with the room still reads it whole. */
static void test_etcd_record_over_the_arena(void) {
    rsd_etcd *a = co_new(g_etcd.coord, "host-a", 0, false), *small = NULL;
    rsd_etcd_desc d;
    rsd_attr_change ch[3];
    rsd_etcd_info v;
    char id[3][101];
    const char *key = "router|http://127.0.0.1:1/over-the-arena";
    int i;
    memset(&d, 0, sizeof d);
    d.url = g_etcd.coord;
    d.host_id = "host-small";
    d.http.tls_off = true;
    d.attr_arena_bytes = 200; /* the record needs 303 */
    REQUIRE(a && (small = rsd_etcd_create(&d)) != NULL);
    memset(ch, 0, sizeof ch);
    for (i = 0; i < 3; i++) {
        memset(id[i], 'a' + i, 100);
        id[i][100] = '\0';
        ch[i].model = id[i];
    }
    REQUIRE(rsd_etcd_read_begin(a, key, rsd_now_ms(), 0) == RSD_OK);
    CHECK_EQ_INT(co_run(a), RSD_OK);
    REQUIRE(rsd_etcd_commit_begin(a, ch, 3, 7, rsd_now_ms(), rsd_now_ms() + 10000) == RSD_OK);
    CHECK_EQ_INT(co_run(a), RSD_OK);
    REQUIRE(rsd_etcd_read_begin(small, key, rsd_now_ms(), 0) == RSD_OK);
    CHECK_EQ_INT(co_run(small), RSD_OK);
    rsd_etcd_query(small, &v);
    CHECK(v.attrs->over && v.attrs->count == 0 && !v.attr_corrupt);
    CHECK_EQ_INT(v.attrs->arena_used, 303);
    ch[0].remove = true;
    REQUIRE(rsd_etcd_commit_begin(small, ch, 1, 8, rsd_now_ms(), rsd_now_ms() + 10000) == RSD_OK);
    CHECK_EQ_INT(co_run(small), RSD_ERR_TOO_LARGE);
    rsd_etcd_query(small, &v);
    CHECK(strstr(v.message, "attr_arena_bytes") != NULL);
    REQUIRE(rsd_etcd_read_begin(a, key, rsd_now_ms(), 0) == RSD_OK);
    CHECK_EQ_INT(co_run(a), RSD_OK);
    rsd_etcd_query(a, &v);
    CHECK_EQ_INT(v.attrs->count, 3);
    for (i = 0; i < 3; i++) CHECK(rsd_attr_set_find(v.attrs, id[i], "") == i);
    rsd_etcd_destroy(a);
    rsd_etcd_destroy(small);
}

/* The last warning a coordinator logged that names attr_arena_bytes. */
static char g_over_log[600];
static uint32_t g_over_item;
static void over_log(void *user, int level, uint32_t item, const char *msg, const char *where) {
    (void)user;
    (void)where;
    if (level >= RSD_LOG_WARN && strstr(msg, "attr_arena_bytes")) {
        snprintf(g_over_log, sizeof g_over_log, "%s", msg);
        g_over_item = item;
    }
}

/* An answer larger than a coordinator reads (its buffers follow attr_arena_bytes) fails the
   operation at once with RSD_ERR_TOO_LARGE, logged and in the message with the limit and
   attr_arena_bytes, the attribution unknown (never a value read in part) and never rewritten:
   an attribution whose value does not fit the answer's values, and one whose answer does
   not fit the answer buffer. A coordinator with the room reads both whole. */
static void test_etcd_answer_over_the_buffers(void) {
    static char ids[2][RSD_STATE_MAX_ATTR][2][RSD_STATE_MAX_ID_BYTES + 1];
    static const char *keys[2] = {"router|http://127.0.0.1:1/over-the-values", "router|http://127.0.0.1:1/over-the-answer"};
    rsd_attr_change ch[RSD_STATE_MAX_ATTR];
    rsd_etcd *big = NULL, *small = NULL;
    rsd_etcd_desc d;
    rsd_etcd_info v;
    int k, i, r;
    memset(&d, 0, sizeof d);
    d.url = g_etcd.coord;
    d.http.tls_off = true;
    d.host_id = "host-big";
    d.attr_arena_bytes = RSD_STATE_ATTR_ARENA_MAX;
    REQUIRE((big = rsd_etcd_create(&d)) != NULL);
    d.host_id = "host-small";
    d.attr_arena_bytes = 1024;
    d.logger.fn = over_log;
    REQUIRE((small = rsd_etcd_create(&d)) != NULL);
    for (k = 0; k < 2; k++) {
        /* 64 entries of two 255-byte ids: about 33 KB written plain (over the small one's values),
           about 132 KB with every byte escaped (its answer over the small one's buffer) */
        memset(ch, 0, sizeof ch);
        for (i = 0; i < RSD_STATE_MAX_ATTR; i++) {
            memset(ids[k][i][0], k ? 1 : 'm', RSD_STATE_MAX_ID_BYTES);
            memset(ids[k][i][1], k ? 2 : 'i', RSD_STATE_MAX_ID_BYTES);
            ids[k][i][0][0] = ids[k][i][1][0] = (char)('A' + i);
            ch[i].model = ids[k][i][0];
            ch[i].instance = ids[k][i][1];
        }
        REQUIRE(rsd_etcd_read_begin(big, keys[k], rsd_now_ms(), 0) == RSD_OK);
        CHECK_EQ_INT(co_run(big), RSD_OK);
        REQUIRE(rsd_etcd_commit_begin(big, ch, RSD_STATE_MAX_ATTR, 7, rsd_now_ms(), rsd_now_ms() + 10000) == RSD_OK);
        CHECK_EQ_INT(co_run(big), RSD_OK);
        g_over_log[0] = '\0';
        REQUIRE(rsd_etcd_read_begin(small, keys[k], rsd_now_ms(), 0) == RSD_OK);
        r = co_run(small);
        CHECK_EQ_INT(r, RSD_ERR_TOO_LARGE);
        rsd_etcd_query(small, &v);
        CHECK(v.attrs->count == 0 && !v.attr_corrupt);
        CHECK(strstr(v.message, k ? "an answer over the" : "an answer's values over the") != NULL);
        CHECK(strstr(v.message, "(attr_arena_bytes 1024 sizes it; raise it)") != NULL);
        CHECK(strcmp(g_over_log, v.message) == 0);
        CHECK_EQ_INT(g_over_item, RSD_LOGITEM_ATTR_READ_FAILED);
        printf("  %s\n", v.message);
        /* a commit from it is refused the same way: the record stays whole */
        ch[0].remove = true;
        REQUIRE(rsd_etcd_commit_begin(small, ch, 1, 8, rsd_now_ms(), rsd_now_ms() + 10000) == RSD_OK);
        CHECK_EQ_INT(co_run(small), RSD_ERR_TOO_LARGE);
        ch[0].remove = false;
        /* a lock (fail-open) proceeds unlocked, saying why */
        g_over_log[0] = '\0';
        REQUIRE(rsd_etcd_lock_begin(small, keys[k], "over", rsd_now_ms(), rsd_now_ms() + 10000) == RSD_OK);
        CHECK_EQ_INT(co_run(small), RSD_OK);
        rsd_etcd_query(small, &v);
        CHECK(!v.held && strstr(v.message, "attr_arena_bytes 1024") != NULL);
        CHECK(strstr(g_over_log, "attr_arena_bytes 1024") != NULL);
        REQUIRE(rsd_etcd_read_begin(big, keys[k], rsd_now_ms(), 0) == RSD_OK);
        CHECK_EQ_INT(co_run(big), RSD_OK);
        rsd_etcd_query(big, &v);
        CHECK(!v.attrs->over);
        CHECK_EQ_INT(v.attrs->count, RSD_STATE_MAX_ATTR);
        for (i = 0; i < RSD_STATE_MAX_ATTR; i++) CHECK(rsd_attr_set_find(v.attrs, ids[k][i][0], ids[k][i][1]) >= 0);
    }
    rsd_etcd_destroy(big);
    rsd_etcd_destroy(small);
}

/* ---- the coordinator on the real etcd ---------------------------------------------- */
static void test_etcd_coordinator(void) {
    rsd_etcd *a = co_new(g_etcd.coord, "host-a", 0, false), *b = co_new(g_etcd.coord, "host-b", 0, false),
             *bc = co_new(g_etcd.coord, "host-b", 0, true);
    rsd_attr_change ch[2];
    rsd_etcd_info v;
    uint64_t t;
    const char *key = "router|http://127.0.0.1:1/coordinator";
    REQUIRE(a && b && bc);
    /* an empty target reads empty */
    REQUIRE(rsd_etcd_read_begin(a, key, rsd_now_ms(), 0) == RSD_OK);
    CHECK_EQ_INT(co_run(a), RSD_OK);
    rsd_etcd_query(a, &v);
    CHECK_EQ_INT(v.attrs->count, 0);
    CHECK(v.has_gen);
    CHECK_EQ_INT(v.gen, 0);
    /* a takes the lock */
    REQUIRE(rsd_etcd_lock_begin(a, key, "test", rsd_now_ms(), rsd_now_ms() + 10000) == RSD_OK);
    CHECK_EQ_INT(co_run(a), RSD_OK);
    rsd_etcd_query(a, &v);
    CHECK(v.held);
    CHECK(v.fence > 0);
    /* b waits for it until its deadline, then proceeds without it (fail-open) naming a */
    t = rsd_now_ms();
    REQUIRE(rsd_etcd_lock_begin(b, key, "test", t, t + 300) == RSD_OK);
    CHECK_EQ_INT(co_run(b), RSD_OK);
    rsd_etcd_query(b, &v);
    CHECK(!v.held);
    CHECK(rsd_now_ms() >= t + 300);
    CHECK(strstr(v.owner, "host=host-a") != NULL);
    CHECK(strstr(v.message, "still held") != NULL);
    /* fail-closed: the error */
    t = rsd_now_ms();
    REQUIRE(rsd_etcd_lock_begin(bc, key, "test", t, t + 200) == RSD_OK);
    CHECK_EQ_INT(co_run(bc), RSD_ERR_TIMEOUT);
    rsd_etcd_query(bc, &v);
    CHECK(!v.held);
    /* a commits: the attribution and the generation in one transaction */
    memset(ch, 0, sizeof ch);
    ch[0].model = "qwen";
    ch[1].model = "lms-key";
    ch[1].instance = "lms-key:2";
    REQUIRE(rsd_etcd_commit_begin(a, ch, 2, 1234, rsd_now_ms(), rsd_now_ms() + 10000) == RSD_OK);
    CHECK_EQ_INT(co_run(a), RSD_OK);
    rsd_etcd_query(a, &v);
    CHECK_EQ_INT(v.gen, 1);
    CHECK_EQ_INT(v.attrs->count, 2);
    /* b reads it */
    REQUIRE(rsd_etcd_read_begin(b, key, rsd_now_ms(), 0) == RSD_OK);
    CHECK_EQ_INT(co_run(b), RSD_OK);
    rsd_etcd_query(b, &v);
    CHECK_EQ_INT(v.gen, 1);
    REQUIRE(v.attrs->count == 2);
    CHECK(rsd_attr_set_find(v.attrs, "qwen", "") >= 0);
    CHECK(rsd_attr_set_find(v.attrs, "lms-key", "lms-key:2") >= 0);
    CHECK_EQ_INT(v.attrs->items[rsd_attr_set_find(v.attrs, "qwen", "")].loaded_at_ms, 1234);
    /* a releases; b takes it at once */
    REQUIRE(rsd_etcd_unlock_begin(a, rsd_now_ms()) == RSD_OK);
    CHECK_EQ_INT(co_run(a), RSD_OK);
    t = rsd_now_ms();
    REQUIRE(rsd_etcd_lock_begin(b, key, "test", t, t + 10000) == RSD_OK);
    CHECK_EQ_INT(co_run(b), RSD_OK);
    rsd_etcd_query(b, &v);
    CHECK(v.held);
    /* b removes qwen, unlocked commits (fail-open) rebase on what is there */
    ch[0].remove = true;
    REQUIRE(rsd_etcd_commit_begin(b, ch, 1, 1, rsd_now_ms(), rsd_now_ms() + 10000) == RSD_OK);
    CHECK_EQ_INT(co_run(b), RSD_OK);
    REQUIRE(rsd_etcd_unlock_begin(b, rsd_now_ms()) == RSD_OK);
    CHECK_EQ_INT(co_run(b), RSD_OK);
    REQUIRE(rsd_etcd_read_begin(a, key, rsd_now_ms(), 0) == RSD_OK); /* a's view is old: gen 1 */
    CHECK_EQ_INT(co_run(a), RSD_OK);
    ch[0].model = "extra";
    ch[0].remove = false;
    REQUIRE(rsd_etcd_commit_begin(a, ch, 1, 1, rsd_now_ms(), rsd_now_ms() + 10000) == RSD_OK); /* not held */
    CHECK_EQ_INT(co_run(a), RSD_OK);
    rsd_etcd_query(a, &v);
    CHECK_EQ_INT(v.gen, 3);
    CHECK_EQ_INT(v.attrs->count, 2); /* lms-key:2 and extra; qwen stays removed */
    CHECK(rsd_attr_set_find(v.attrs, "qwen", NULL) < 0);
    rsd_etcd_destroy(a);
    rsd_etcd_destroy(b);
    rsd_etcd_destroy(bc);
}

/* A holder whose lease ran out (revoked here, as etcd does at expiry) cannot commit: the
   fencing revision refuses it, and the next holder's commit goes through. */
static void test_etcd_fencing(void) {
    rsd_etcd *a = co_new(g_etcd.coord, "host-a", 0, false), *b = co_new(g_etcd.coord, "host-b", 0, false);
    rsd_attr_change ch;
    rsd_etcd_info v;
    char body[128], ans[512];
    const char *key = "router|http://127.0.0.1:1/fencing";
    REQUIRE(a && b);
    REQUIRE(rsd_etcd_lock_begin(a, key, "test", rsd_now_ms(), rsd_now_ms() + 10000) == RSD_OK);
    REQUIRE(co_run(a) == RSD_OK);
    rsd_etcd_query(a, &v);
    REQUIRE(v.held);
    snprintf(body, sizeof body, "{\"ID\":\"%lld\"}", (long long)a->lease);
    CHECK_EQ_INT(etcd_post(&g_etcd, "/v3/lease/revoke", body, ans, sizeof ans), 200);
    REQUIRE(rsd_etcd_lock_begin(b, key, "test", rsd_now_ms(), rsd_now_ms() + 10000) == RSD_OK);
    CHECK_EQ_INT(co_run(b), RSD_OK);
    rsd_etcd_query(b, &v);
    CHECK(v.held);
    memset(&ch, 0, sizeof ch);
    ch.model = "stale-write";
    REQUIRE(rsd_etcd_commit_begin(a, &ch, 1, 1, rsd_now_ms(), rsd_now_ms() + 10000) == RSD_OK);
    CHECK_EQ_INT(co_run(a), RSD_ERR_LOCK);
    rsd_etcd_query(a, &v);
    CHECK(v.lost);
    CHECK(!v.held);
    CHECK(strstr(v.message, "no longer ours") != NULL);
    ch.model = "fresh-write";
    REQUIRE(rsd_etcd_commit_begin(b, &ch, 1, 1, rsd_now_ms(), rsd_now_ms() + 10000) == RSD_OK);
    CHECK_EQ_INT(co_run(b), RSD_OK);
    rsd_etcd_query(b, &v);
    CHECK(rsd_attr_set_find(v.attrs, "stale-write", NULL) < 0);
    CHECK(rsd_attr_set_find(v.attrs, "fresh-write", NULL) >= 0);
    rsd_etcd_destroy(a);
    rsd_etcd_destroy(b);
}

/* A holder that stops (no keepalive) loses the lock when its lease expires. */
static void test_etcd_lease_expiry(void) {
    rsd_etcd *a = co_new(g_etcd.coord, "host-a", 2, false), *b = co_new(g_etcd.coord, "host-b", 2, false);
    rsd_etcd_info v;
    uint64_t t;
    const char *key = "router|http://127.0.0.1:1/expiry";
    REQUIRE(a && b);
    REQUIRE(rsd_etcd_lock_begin(a, key, "test", rsd_now_ms(), rsd_now_ms() + 10000) == RSD_OK);
    REQUIRE(co_run(a) == RSD_OK);
    /* a keeps it alive while stepped: b cannot take it for 3 s (longer than the TTL) */
    t = rsd_now_ms();
    REQUIRE(rsd_etcd_lock_begin(b, key, "test", t, t + 3000) == RSD_OK);
    while (rsd_etcd_step(b, rsd_now_ms()) == 0) {
        (void)rsd_etcd_step(a, rsd_now_ms());
        (void)poll(NULL, 0, 10);
    }
    rsd_etcd_query(b, &v);
    CHECK(!v.held);
    /* a stops being stepped (a dead host): b gets it within the TTL plus etcd's expiry sweep */
    t = rsd_now_ms();
    REQUIRE(rsd_etcd_lock_begin(b, key, "test", t, t + 30000) == RSD_OK);
    CHECK_EQ_INT(co_run(b), RSD_OK);
    rsd_etcd_query(b, &v);
    CHECK(v.held);
    printf("  lease expiry: the lock of a stopped holder (TTL 2 s) taken after %llu ms\n",
           (unsigned long long)(rsd_now_ms() - t));
    rsd_etcd_destroy(a);
    rsd_etcd_destroy(b);
}

/* etcd with authentication on (a second etcd): the coordinator logs in with a user and
   password (the token goes raw in the Authorization header, as the gateway wants it; it
   answers 401 to "Bearer <token>"); no or wrong credentials are an auth error, so the lock
   fails open (or closed) saying so. */
static void test_etcd_auth(void) {
    etcd_proc ep;
    char ans[512];
    rsd_etcd_desc d;
    rsd_etcd *good = NULL, *bad = NULL, *none = NULL;
    rsd_etcd_info v;
    const char *key = "router|http://127.0.0.1:1/auth";
    REQUIRE(etcd_start(&ep, "/auth") == 0);
    CHECK_EQ_INT(etcd_post(&ep, "/v3/auth/role/add", "{\"name\":\"root\"}", ans, sizeof ans), 200);
    CHECK_EQ_INT(etcd_post(&ep, "/v3/auth/user/add", "{\"name\":\"root\",\"password\":\"s3cret\"}", ans, sizeof ans), 200);
    CHECK_EQ_INT(etcd_post(&ep, "/v3/auth/user/grant", "{\"user\":\"root\",\"role\":\"root\"}", ans, sizeof ans), 200);
    CHECK_EQ_INT(etcd_post(&ep, "/v3/auth/enable", "{}", ans, sizeof ans), 200);
    memset(&d, 0, sizeof d);
    d.url = ep.coord;
    d.http.tls_off = true;
    d.auth_user = "root";
    d.auth_password = "s3cret";
    REQUIRE((good = rsd_etcd_create(&d)) != NULL);
    d.auth_password = "wrong";
    REQUIRE((bad = rsd_etcd_create(&d)) != NULL);
    d.auth_user = d.auth_password = NULL;
    REQUIRE((none = rsd_etcd_create(&d)) != NULL);
    REQUIRE(rsd_etcd_lock_begin(good, key, "t", rsd_now_ms(), rsd_now_ms() + 10000) == RSD_OK);
    CHECK_EQ_INT(co_run(good), RSD_OK);
    rsd_etcd_query(good, &v);
    CHECK(v.held);
    REQUIRE(rsd_etcd_lock_begin(bad, key, "t", rsd_now_ms(), rsd_now_ms() + 10000) == RSD_OK);
    CHECK_EQ_INT(co_run(bad), RSD_OK); /* fail-open */
    rsd_etcd_query(bad, &v);
    CHECK(!v.held);
    CHECK(strstr(v.message, "refused") != NULL);
    CHECK(strstr(v.message, "s3cret") == NULL && strstr(v.message, "wrong") == NULL);
    REQUIRE(rsd_etcd_read_begin(none, key, rsd_now_ms(), 0) == RSD_OK);
    CHECK_EQ_INT(co_run(none), RSD_ERR_AUTH);
    rsd_etcd_destroy(good);
    rsd_etcd_destroy(bad);
    rsd_etcd_destroy(none);
    etcd_stop(&ep);
}

/* ---- two hosts on one router ---------------------------------------------------------- */
static rsd_ensurer *host_new(const char *coord, const char *host, const char *state, const char *protect,
                             bool fail_closed, uint32_t ttl_s) {
    rsd_ensurer_desc d;
    rsd_protected_model p;
    memset(&d, 0, sizeof d);
    memset(&p, 0, sizeof p);
    d.state_dir = state;
    d.ignore_env = true;
    d.no_sse = true;
    d.coord = coord;
    d.coord_host = host;
    d.coord_lease_ttl_s = ttl_s;
    d.lock_fail_closed = fail_closed;
    d.no_cache = true;
    d.http.tls_off = true;
    if (protect) {
        p.model_id = rsd_str_c(protect);
        d.protected_models = &p;
        d.n_protected = 1;
    }
    return rsd_ensurer_create(&d);
}

static void req_init(rsd_ensure_req *q, const char *url, const char *model) {
    memset(q, 0, sizeof q[0]);
    q->url = url;
    q->model = model;
    q->runtime = RSD_RUNTIME_LLAMACPP;
    q->timeout_ms = 60000;
}

/* The sim's models: state per id ("loaded"...), total loads; n. */
typedef struct sim_model { char id[32], state[16]; long loads; } sim_model;
static int sim_models(const sim_proc *s, sim_model *out, int cap, long *log_total) {
    static char body[1 << 20];
    static rsd_json_tok toks[LOG_MAX * 14 + 64];
    rsd_json_doc doc;
    int arr, i, n = 0;
    int64_t x;
    if (sim_get(s, "/_sim/log", NULL, body, sizeof body) != 200) return -1;
    if (rsd_json_parse(&doc, body, strlen(body), toks, (uint32_t)(sizeof toks / sizeof toks[0])) <= 0) return -1;
    if (log_total && rsd_json_int64(&doc, rsd_json_find(&doc, 0, "total"), &x) == RSD_OK) *log_total = (long)x;
    arr = rsd_json_find(&doc, 0, "models");
    for (i = rsd_json_child(&doc, arr); i >= 0 && n < cap; i = rsd_json_next(&doc, i)) {
        memset(&out[n], 0, sizeof out[n]);
        rsd_json_str(&doc, rsd_json_find(&doc, i, "id"), out[n].id, sizeof out[n].id, NULL);
        rsd_json_str(&doc, rsd_json_find(&doc, i, "state"), out[n].state, sizeof out[n].state, NULL);
        if (rsd_json_int64(&doc, rsd_json_find(&doc, i, "loads"), &x) == RSD_OK) out[n].loads = (long)x;
        n++;
    }
    return n;
}

static bool running(const char *st) { return !strcmp(st, "loaded") || !strcmp(st, "loading") || !strcmp(st, "sleeping"); }

/* Two ensurers with their own state directories and protections (host A protects "pa",
   host B "pb"), one etcd, one router with room for 3: each round both ensure a model
   (stepped alternately, in-process), for a few hundred rounds. Neither ever evicts the
   other's protected model, and the router never has to make room itself (every load found
   a free slot: no model left the running set but by our own unload). Counts, no timing. */
static void two_hosts(const char *coord, int rounds, int *evicted_protected, long *router_evictions) {
    const char *args[] = {"--models-max", "3", "--load-ms", "5", "--unload-ms", "1", "--model", "id=a-prot",
                          "--model", "id=b-prot", "--model", "id=m1", "--model", "id=m2", "--model", "id=m3",
                          "--model", "id=m4", NULL};
    const char *pool_a[] = {"a-prot", "m1", "m2", "m3", "m4"}, *pool_b[] = {"b-prot", "m1", "m2", "m3", "m4"};
    char sa[300], sb[300];
    sim_proc sim;
    rsd_ensurer *a, *b;
    uint32_t rng = 12345;
    long unloads = 0, loads = 0, last_total = 0, total = 0;
    int r, i, n, bad_a = 0, bad_b = 0;
    sim_model ms[16];
    *evicted_protected = 0;
    *router_evictions = 0;
    snprintf(sa, sizeof sa, "%s/host-a-%d", g_tmp, rounds);
    snprintf(sb, sizeof sb, "%s/host-b-%d", g_tmp, rounds);
    if (sim_start(&sim, args) != 0) {
        CHECK(!"rsd-sim did not start");
        sim_stop(&sim);
        return;
    }
    a = host_new(coord, "host-a", sa, "a-prot", false, 0);
    b = host_new(coord, "host-b", sb, "b-prot", false, 0);
    if (!a || !b) {
        CHECK(a && b);
        goto out;
    }
    for (r = 0; r < rounds; r++) {
        rsd_ensure_req qa, qb;
        rsd_ensure_result ra, rb;
        int ca = RSD_PENDING, cb = RSD_PENDING, k;
        uint64_t end = rsd_now_ms() + 120000;
        rng = rng * 1103515245u + 12345u;
        req_init(&qa, sim.url, pool_a[(rng >> 16) % 5]);
        rng = rng * 1103515245u + 12345u;
        req_init(&qb, sim.url, pool_b[(rng >> 16) % 5]);
        REQUIRE(rsd_ensurer_begin(a, &qa, rsd_now_ms()) == RSD_OK);
        REQUIRE(rsd_ensurer_begin(b, &qb, rsd_now_ms()) == RSD_OK);
        while ((ca == RSD_PENDING || cb == RSD_PENDING) && rsd_now_ms() < end) {
            rsd_pollfd fds[32];
            int na, nb;
            if (ca == RSD_PENDING) ca = ensure_step_code(a, rsd_now_ms());
            if (cb == RSD_PENDING) cb = ensure_step_code(b, rsd_now_ms());
            na = ca == RSD_PENDING ? rsd_ensurer_pollfds(a, fds, 16) : 0;
            nb = cb == RSD_PENDING ? rsd_ensurer_pollfds(b, fds + (na > 16 ? 16 : na), 16) : 0;
            (void)poll((struct pollfd *)(void *)fds, (nfds_t)((na > 16 ? 16 : na) + (nb > 16 ? 16 : nb)), 5);
        }
        rsd_ensurer_query(a, &ra);
        rsd_ensurer_query(b, &rb);
        for (k = 0; k < ra.n_evicted; k++) bad_a += !strcmp(ra.evicted[k].id, "b-prot");
        for (k = 0; k < rb.n_evicted; k++) bad_b += !strcmp(rb.evicted[k].id, "a-prot");
        if (r % 10 == 9 || r == rounds - 1) { /* our unloads: the new POST /models/unload in the log */
            int nl, fresh;
            if (sim_models(&sim, ms, 16, &total) < 0 || (nl = sim_log(&sim)) < 0) {
                CHECK(!"GET /_sim/log failed");
                break;
            }
            fresh = (int)(total - last_total);
            CHECK(fresh <= nl);
            for (k = nl - (fresh < nl ? fresh : nl); k < nl; k++)
                unloads += !strcmp(g_log[k].path, "/models/unload") && g_log[k].status == 200;
            last_total = total;
        }
        if (ca != RSD_OK || cb != RSD_OK) {
            printf("  round %d: %s -> %s (%s), %s -> %s (%s)\n", r, qa.model, rsd_result_str(ca), ra.message,
                   qb.model, rsd_result_str(cb), rb.message);
            CHECK(ca == RSD_OK && cb == RSD_OK);
            break;
        }
    }
    n = sim_models(&sim, ms, 16, &total);
    CHECK(n > 0);
    for (i = 0; i < n; i++) {
        loads += ms[i].loads;
        if (!strcmp(ms[i].state, "loaded") || !strcmp(ms[i].state, "sleeping")) loads--; /* has not left */
    }
    /* every departure from the running set (a finished load that is no longer running) was
       one of our unload requests: else the router made room itself */
    *router_evictions = loads - unloads;
    *evicted_protected = bad_a + bad_b;
out:
    rsd_ensurer_destroy(a);
    rsd_ensurer_destroy(b);
    sim_stop(&sim);
}

static void test_etcd_two_hosts(void) {
    int bad;
    long router;
    two_hosts(g_etcd.coord, 300, &bad, &router);
    printf("  two hosts on etcd, 300 rounds: %d protected evictions, %ld router-made evictions\n", bad, router);
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(router, 0);
}

/* The same without etcd (each host only its own state directory): the control that shows
   the two-host test can fail. Not asserted (it depends on the interleaving); run with
   ./test_etcd control. */
static void test_etcd_control_without_etcd(void) {
    int bad;
    long router;
    if (!rsdt_filter || !strstr(rsdt_filter, "control")) return;
    two_hosts(NULL, 300, &bad, &router);
    printf("  two hosts WITHOUT etcd, 300 rounds: %d protected evictions, %ld router-made evictions\n", bad, router);
}

/* ---- a holder killed with kill -9 mid-swap --------------------------------------------- */
static bool sim_has_load(const sim_proc *s, const char *model) {
    int n = sim_log(s), i;
    for (i = 0; i < n; i++)
        if (!strcmp(g_log[i].path, "/models/load") && !strcmp(g_log[i].model, model)) return true;
    return false;
}

static void test_etcd_kill9_mid_swap(void) {
    const char *args[] = {"--models-max", "2", "--load-ms", "5", "--unload-ms", "1", "--model", "id=x,load=60000",
                          "--model", "id=y", "--model", "id=z", "--model", "id=w", NULL};
    char sd[300];
    sim_proc sim;
    pid_t child;
    rsd_ensurer *e;
    rsd_ensure_req q;
    rsd_ensure_result res;
    sim_model ms[8];
    uint64_t t, t_kill;
    int rc, n, i, nrun = 0;
    REQUIRE(sim_start(&sim, args) == 0);
    snprintf(sd, sizeof sd, "%s/kill9", g_tmp);
    /* fill the router: y and z, loaded by this host */
    e = host_new(g_etcd.coord, "host-b", sd, NULL, false, 2);
    REQUIRE(e);
    req_init(&q, sim.url, "y");
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    req_init(&q, sim.url, "z");
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    /* the other host swaps in x (a load that takes a minute) and is killed mid-swap */
    fflush(stdout);
    child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        char sc[300];
        rsd_ensurer *c;
        snprintf(sc, sizeof sc, "%s/kill9-child", g_tmp);
        c = host_new(g_etcd.coord, "host-a", sc, NULL, false, 2);
        req_init(&q, sim.url, "x");
        q.timeout_ms = 120000;
        if (c) (void)rsd_ensurer_sync(c, &q, &res);
        _exit(0);
    }
    t = rsd_now_ms();
    while (!sim_has_load(&sim, "x") && rsd_now_ms() < t + 60000) (void)poll(NULL, 0, 20);
    CHECK(sim_has_load(&sim, "x"));
    { /* the child holds the lock now (it sent the load under it) */
        rsd_etcd_info v;
        REQUIRE(rsd_etcd_lock_begin(e->co, e->key, "probe", rsd_now_ms(), rsd_now_ms() + 100) == RSD_OK);
        CHECK_EQ_INT(co_run(e->co), RSD_OK);
        rsd_etcd_query(e->co, &v);
        CHECK(!v.held);
        CHECK(strstr(v.owner, "host=host-a") != NULL);
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    t_kill = rsd_now_ms();
    /* this host now ensures w: it waits for the dead holder's lease, then takes the lock */
    req_init(&q, sim.url, "w");
    rc = rsd_ensurer_sync(e, &q, &res);
    CHECK_EQ_INT(rc, RSD_OK);
    CHECK(res.lock_held);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    printf("  kill -9 mid-swap: the next holder's ensure ended %llu ms after the kill (lease 2 s)\n",
           (unsigned long long)(rsd_now_ms() - t_kill));
    n = sim_models(&sim, ms, 8, NULL);
    for (i = 0; i < n; i++) {
        nrun += running(ms[i].state);
        if (!strcmp(ms[i].id, "w")) CHECK(running(ms[i].state));
    }
    CHECK(nrun <= 2);
    /* the record says w is ours; the dead host never committed x */
    {
        rsd_etcd_info v;
        rsd_etcd_query(e->co, &v);
        CHECK(rsd_attr_set_find(v.attrs, "w", NULL) >= 0);
        CHECK(rsd_attr_set_find(v.attrs, "x", NULL) < 0);
    }
    rsd_ensurer_destroy(e);
    sim_stop(&sim);
}

/* A stale holder through the ensurer: host A takes the lock and sends a slow load, then
   stalls (not stepped: no keepalive) past its lease; host B takes the lock and swaps; when A
   resumes, its commit is refused by the fencing revision: A's ensure ends with the
   state_error and a warning, and the shared record is B's, not A's. */
static void test_etcd_stale_holder_ensure(void) {
    const char *args[] = {"--models-max", "2", "--load-ms", "5", "--unload-ms", "1", "--model", "id=slow,load=2500",
                          "--model", "id=fast", NULL};
    char sa[300], sb[300];
    sim_proc sim;
    rsd_ensurer *a, *b;
    rsd_ensure_req q;
    rsd_ensure_result res;
    rsd_etcd_info v;
    uint64_t end;
    int rc = RSD_PENDING, i;
    bool warned = false;
    REQUIRE(sim_start(&sim, args) == 0);
    snprintf(sa, sizeof sa, "%s/stale-a", g_tmp);
    snprintf(sb, sizeof sb, "%s/stale-b", g_tmp);
    a = host_new(g_etcd.coord, "host-a", sa, NULL, false, 2);
    b = host_new(g_etcd.coord, "host-b", sb, NULL, false, 2);
    REQUIRE(a && b);
    req_init(&q, sim.url, "slow");
    REQUIRE(rsd_ensurer_begin(a, &q, rsd_now_ms()) == RSD_OK);
    end = rsd_now_ms() + 60000;
    while (!sim_has_load(&sim, "slow") && rsd_now_ms() < end) { /* A: lock, then the load POST */
        rsd_pollfd fds[16];
        int n;
        rc = ensure_step_code(a, rsd_now_ms());
        REQUIRE(rc == RSD_PENDING);
        n = rsd_ensurer_pollfds(a, fds, 16);
        (void)poll((struct pollfd *)(void *)fds, (nfds_t)(n > 16 ? 16 : n), 10);
    }
    rsd_etcd_query(a->co, &v);
    REQUIRE(v.held);
    /* A stalls; B waits for A's lease to run out, takes the lock, loads fast */
    req_init(&q, sim.url, "fast");
    CHECK_EQ_INT(rsd_ensurer_sync(b, &q, &res), RSD_OK);
    CHECK(res.lock_held);
    /* A resumes: its load finishes, its commit is refused */
    end = rsd_now_ms() + 60000;
    while (rc == RSD_PENDING && rsd_now_ms() < end) {
        rsd_pollfd fds[16];
        int n;
        rc = ensure_step_code(a, rsd_now_ms());
        n = rsd_ensurer_pollfds(a, fds, 16);
        if (rc == RSD_PENDING) (void)poll((struct pollfd *)(void *)fds, (nfds_t)(n > 16 ? 16 : n), 10);
    }
    rsd_ensurer_query(a, &res);
    CHECK_EQ_INT(res.state_error, RSD_ERR_LOCK);
    for (i = 0; i < res.n_notices; i++)
        if (res.notices[i].dmsg == RSD_DMSG_STATE_FAILED && strstr(res.notices[i].text, "no longer ours")) warned = true;
    CHECK(warned);
    rsd_etcd_query(b->co, &v);
    REQUIRE(rsd_etcd_read_begin(b->co, b->key, rsd_now_ms(), 0) == RSD_OK);
    CHECK_EQ_INT(co_run(b->co), RSD_OK);
    rsd_etcd_query(b->co, &v);
    CHECK(rsd_attr_set_find(v.attrs, "fast", NULL) >= 0);
    CHECK(rsd_attr_set_find(v.attrs, "slow", NULL) < 0);
    rsd_ensurer_destroy(a);
    rsd_ensurer_destroy(b);
    sim_stop(&sim);
}

/* A corrupt record in etcd (someone wrote garbage under <prefix>/attr/<name>): one warning
   notice per ensure, read as empty (nothing crashes, nothing is trusted), and the next
   change rewrites it as a valid record. */
static void test_etcd_corrupt_record(void) {
    const char *args[] = {"--models-max", "1", "--load-ms", "5", "--unload-ms", "1", "--model", "id=p",
                          "--model", "id=q", NULL};
    char sd[300], name[RSD_STATE_MAX_NAME_BYTES], key[400], body[1024], ans[512];
    sim_proc sim;
    rsd_ensurer *e;
    rsd_ensure_req q;
    rsd_ensure_result res;
    rsd_etcd_info v;
    size_t n;
    int i, told = 0;
    REQUIRE(sim_start(&sim, args) == 0);
    snprintf(sd, sizeof sd, "%s/corrupt", g_tmp);
    e = host_new(g_etcd.coord, "host-c", sd, NULL, false, 0);
    REQUIRE(e);
    req_init(&q, sim.url, "p");
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    REQUIRE(rsd_state_file_name(e->key, name, sizeof name) > 0);
    snprintf(key, sizeof key, "/test/attr/%s", name);
    n = (size_t)snprintf(body, sizeof body, "{\"key\":\"");
    n += rsdi_b64_encode((const unsigned char *)key, strlen(key), body + n);
    n += (size_t)snprintf(body + n, sizeof body - n, "\",\"value\":\"");
    n += rsdi_b64_encode((const unsigned char *)"residency-attr 1\np\t\t1\n", 22, body + n); /* truncated */
    snprintf(body + n, sizeof body - n, "\"}");
    CHECK_EQ_INT(etcd_post(&g_etcd, "/v3/kv/put", body, ans, sizeof ans), 200);
    req_init(&q, sim.url, "q");
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    for (i = 0; i < res.n_notices; i++) told += res.notices[i].dmsg == RSD_DMSG_ATTR_RESET;
    CHECK_EQ_INT(told, 1);
    REQUIRE(rsd_etcd_read_begin(e->co, e->key, rsd_now_ms(), 0) == RSD_OK);
    CHECK_EQ_INT(co_run(e->co), RSD_OK);
    rsd_etcd_query(e->co, &v);
    CHECK(!v.attr_corrupt);
    CHECK(rsd_attr_set_find(v.attrs, "q", NULL) >= 0);
    rsd_ensurer_destroy(e);
    sim_stop(&sim);
}

/* LM Studio through etcd: the owned instances are shared. Host A (protecting "a") loads a,
   host B loads b; then A needs room for c: it unloads B's instance b (loaded by residency,
   so owned by every host on this etcd), never its protected a, and the record shows it. */
static void test_etcd_lmstudio_shared(void) {
    const char *argv[] = {SIM_BIN, "--runtime", "lmstudio", "--port", "0", "--vram", "8G", "--load-ms", "5",
                          "--model", "id=a,size=4G", "--model", "id=b,size=4G", "--model", "id=c,size=4G", NULL};
    char sa[300], sb[300];
    listen_proc sim;
    rsd_ensurer *a, *b;
    rsd_ensure_req q;
    rsd_ensure_result res;
    rsd_etcd_info v;
    REQUIRE(listen_proc_start(&sim, argv, -1) == 0);
    snprintf(sa, sizeof sa, "%s/lms-a", g_tmp);
    snprintf(sb, sizeof sb, "%s/lms-b", g_tmp);
    a = host_new(g_etcd.coord, "lms-host-a", sa, "a", false, 0);
    b = host_new(g_etcd.coord, "lms-host-b", sb, NULL, false, 0);
    REQUIRE(a && b);
    req_init(&q, sim.url, "a");
    q.runtime = RSD_RUNTIME_LMSTUDIO;
    CHECK_EQ_INT(rsd_ensurer_sync(a, &q, &res), RSD_OK);
    CHECK(res.lock_held && res.loaded);
    q.model = "b";
    CHECK_EQ_INT(rsd_ensurer_sync(b, &q, &res), RSD_OK);
    CHECK(res.lock_held && res.loaded);
    rsd_etcd_query(b->co, &v);
    CHECK(rsd_attr_set_find(v.attrs, "a", "a") >= 0);
    CHECK(rsd_attr_set_find(v.attrs, "b", "b") >= 0);
    q.model = "c";
    CHECK_EQ_INT(rsd_ensurer_sync(a, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    REQUIRE(res.n_evicted == 1);
    CHECK_EQ_STR(res.evicted[0].id, "b");
    rsd_etcd_query(a->co, &v);
    CHECK(rsd_attr_set_find(v.attrs, "a", "a") >= 0);
    CHECK(rsd_attr_set_find(v.attrs, "b", NULL) < 0);
    CHECK(rsd_attr_set_find(v.attrs, "c", "c") >= 0);
    rsd_ensurer_destroy(a);
    rsd_ensurer_destroy(b);
    listen_proc_stop(&sim);
}

/* ---- every host's protections, past the first page ---------------------------------------- */
/* "etcd://127.0.0.1:PORT/<prefix>" on the test's etcd: each test its own prefix, so the
   protections the others publish under /test are not in its range. */
static void prot_coord(char *out, size_t cap, const char *prefix) {
    snprintf(out, cap, "etcd://127.0.0.1:%d/%s", g_etcd.client_port, prefix);
}

/* Puts value (n bytes) at key on the test's etcd, as another host would. */
static void etcd_put_raw(const char *key, const char *value, size_t n) {
    static char body[1 << 18];
    char ans[512];
    size_t k = (size_t)snprintf(body, sizeof body, "{\"key\":\"");
    REQUIRE(rsdi_b64_len(strlen(key)) + rsdi_b64_len(n) + 64 < sizeof body);
    k += rsdi_b64_encode((const unsigned char *)key, strlen(key), body + k);
    k += (size_t)snprintf(body + k, sizeof body - k, "\",\"value\":\"");
    k += rsdi_b64_encode((const unsigned char *)value, n, body + k);
    snprintf(body + k, sizeof body - k, "\"}");
    CHECK_EQ_INT(etcd_post(&g_etcd, "/v3/kv/put", body, ans, sizeof ans), 200);
}

/* Publishes host's protections (n models, roles[i] or none) under prefix as its ensurer
   does: the attribution format, instance = the role name. */
static void prot_publish(const char *prefix, const char *host, const char *const *models, const rsd_role *roles,
                         int n) {
    static char ids[RSD_STATE_ATTR_ARENA_MAX], text[RSD_STATE_MAX_FILE_BYTES];
    rsd_attr_set set;
    char key[300];
    int i, len;
    REQUIRE(rsd_attr_set_init(&set, ids, sizeof ids) == RSD_OK);
    for (i = 0; i < n; i++, set.count++)
        REQUIRE(rsdi_attr_set_put(&set, set.count, models[i], roles && roles[i] ? rsd_role_str((int)roles[i]) : "", 0, 0));
    len = rsdi_attr_format(&set, text, sizeof text);
    REQUIRE(len > 0);
    snprintf(key, sizeof key, "/%s/prot/%s", prefix, host);
    etcd_put_raw(key, text, (size_t)len);
}

/* 100 hosts: h000..h098 protect nothing, h099 (past the first answer's 93) protects
   "victim". This host loaded victim, then spare; ensuring "fresh" on a router with room for
   two must evict spare, the least recently used one that no host protects, never victim. */
static void test_etcd_prot_past_the_first_page(void) {
    const char *args[] = {"--models-max", "2", "--load-ms", "5", "--unload-ms", "1", "--model", "id=victim",
                          "--model", "id=spare", "--model", "id=fresh", NULL};
    const char *victim = "victim";
    char coord[96], sd[300], host[16];
    sim_proc sim;
    rsd_ensurer *e;
    rsd_ensure_req q;
    rsd_ensure_result res;
    sim_model ms[8];
    int i, n, k;
    for (i = 0; i < 100; i++) {
        snprintf(host, sizeof host, "h%03d", i);
        prot_publish("pages100", host, &victim, NULL, i == 99 ? 1 : 0);
    }
    prot_coord(coord, sizeof coord, "pages100");
    REQUIRE(sim_start(&sim, args) == 0);
    snprintf(sd, sizeof sd, "%s/pages100", g_tmp);
    e = host_new(coord, "zz-self", sd, NULL, false, 0);
    REQUIRE(e);
    req_init(&q, sim.url, "victim");
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    req_init(&q, sim.url, "spare");
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    req_init(&q, sim.url, "fresh");
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    for (k = 0; k < res.n_evicted; k++) {
        printf("  evicted %s\n", res.evicted[k].id);
        CHECK(strcmp(res.evicted[k].id, "victim") != 0);
    }
    n = sim_models(&sim, ms, 8, NULL);
    for (i = 0; i < n; i++)
        if (!strcmp(ms[i].id, "victim")) CHECK(running(ms[i].state));
    rsd_ensurer_destroy(e);
    sim_stop(&sim);
}

/* An ensurer on coord as host, with the n protected models given and attr_arena_bytes. */
static rsd_ensurer *host_prot(const char *coord, const char *host, const char *state, const char *const *models, int n,
                              uint32_t arena) {
    rsd_ensurer_desc d;
    rsd_protected_model p[RSD_MAX_PROTECTED];
    int i;
    memset(&d, 0, sizeof d);
    memset(p, 0, sizeof p);
    d.state_dir = state;
    d.ignore_env = true;
    d.no_sse = true;
    d.coord = coord;
    d.coord_host = host;
    d.no_cache = true;
    d.http.tls_off = true;
    d.attr_arena_bytes = arena;
    for (i = 0; i < n; i++) p[i].model_id = rsd_str_c(models[i]);
    d.protected_models = n ? p : NULL;
    d.n_protected = n;
    return rsd_ensurer_create(&d);
}

/* The notices of r that say the other hosts' protections are known only in part. */
static int prot_notices(const rsd_ensure_result *r) {
    int i, n = 0;
    for (i = 0; i < r->n_notices; i++)
        n += r->notices[i].dmsg == RSD_DMSG_STATE_FAILED && strstr(r->notices[i].text, "known only in part") != NULL;
    return n;
}

static bool view_protects(const rsd_etcd_info *v, const char *model, rsd_role role) {
    int i;
    for (i = 0; i < v->n_protected; i++)
        if (rsd_str_eq_c(v->protected_models[i].model_id, model)) return v->protected_models[i].role == role;
    return false;
}

/* The coordinator alone over three pages: 200 hosts all protect "shared", h000 also "first",
   h100 "mid" (as its memory model) and h199 "last": a read, a lock, a commit re-applied on a
   changed record and a lock that gives up on a busy key (fail-open) each end with the four,
   each once, nothing unknown. */
static void test_etcd_prot_pages_coordinator(void) {
    const char *models[3];
    rsd_role roles[3] = {RSD_ROLE_NONE, RSD_ROLE_NONE, RSD_ROLE_NONE};
    char coord[96], host[16];
    const char *key = "router|http://127.0.0.1:1/pages";
    rsd_etcd *co, *other;
    rsd_etcd_info v;
    rsd_attr_change ch;
    int i, op;
    for (i = 0; i < 200; i++) {
        int n = 0;
        snprintf(host, sizeof host, "h%03d", i);
        models[n++] = "shared";
        if (i == 0) models[n++] = "first";
        if (i == 100) {
            roles[n] = RSD_ROLE_MEMORY;
            models[n++] = "mid";
        }
        if (i == 199) models[n++] = "last";
        prot_publish("pages200", host, models, roles, n);
        roles[1] = RSD_ROLE_NONE;
    }
    prot_coord(coord, sizeof coord, "pages200");
    co = co_new(coord, "zz-self", 0, false);
    other = co_new(coord, "zz-other", 0, false);
    REQUIRE(co && other);
    for (op = 0; op < 4; op++) {
        if (op == 0) REQUIRE(rsd_etcd_read_begin(co, key, rsd_now_ms(), 0) == RSD_OK);
        if (op == 1) REQUIRE(rsd_etcd_lock_begin(co, key, "pages", rsd_now_ms(), rsd_now_ms() + 10000) == RSD_OK);
        if (op == 2) { /* another host changed the record: an unlocked commit's compare fails, it reads again */
            memset(&ch, 0, sizeof ch);
            ch.model = "x";
            REQUIRE(rsd_etcd_unlock_begin(co, rsd_now_ms()) == RSD_OK);
            CHECK_EQ_INT(co_run(co), RSD_OK);
            REQUIRE(rsd_etcd_read_begin(other, key, rsd_now_ms(), 0) == RSD_OK);
            CHECK_EQ_INT(co_run(other), RSD_OK);
            REQUIRE(rsd_etcd_commit_begin(other, &ch, 1, 1, rsd_now_ms(), rsd_now_ms() + 10000) == RSD_OK);
            CHECK_EQ_INT(co_run(other), RSD_OK);
            ch.model = "y";
            REQUIRE(rsd_etcd_commit_begin(co, &ch, 1, 1, rsd_now_ms(), rsd_now_ms() + 10000) == RSD_OK);
        }
        if (op == 3) {
            REQUIRE(rsd_etcd_lock_begin(other, key, "busy", rsd_now_ms(), rsd_now_ms() + 10000) == RSD_OK);
            CHECK_EQ_INT(co_run(other), RSD_OK);
            REQUIRE(rsd_etcd_lock_begin(co, key, "pages", rsd_now_ms(), rsd_now_ms() + 200) == RSD_OK);
        }
        CHECK_EQ_INT(co_run(co), RSD_OK);
        rsd_etcd_query(co, &v);
        if (v.n_protected != 4) printf("  op %d: %d protected (%s)\n", op, v.n_protected, v.protected_why);
        CHECK_EQ_INT(v.n_protected, 4);
        CHECK(view_protects(&v, "shared", RSD_ROLE_NONE) && view_protects(&v, "first", RSD_ROLE_NONE));
        CHECK(view_protects(&v, "mid", RSD_ROLE_MEMORY) && view_protects(&v, "last", RSD_ROLE_NONE));
        CHECK(!v.protected_incomplete);
        CHECK_EQ_STR(v.protected_why, "");
        if (op == 1) CHECK(v.held);
        if (op == 2) CHECK(rsd_attr_set_find(v.attrs, "x", "") >= 0 && rsd_attr_set_find(v.attrs, "y", "") >= 0);
        if (op == 3) CHECK(!v.held && strstr(v.message, "still held") != NULL && strstr(v.owner, "zz-other") != NULL);
    }
    REQUIRE(rsd_etcd_unlock_begin(other, rsd_now_ms()) == RSD_OK);
    CHECK_EQ_INT(co_run(other), RSD_OK);
    /* a page etcd cannot answer (its revision compacted away): known in part, the read still ends */
    {
        char body[128], ans[4096];
        const char *rp;
        long rev;
        prot_publish("pages200", "h000", models, NULL, 0); /* a newer revision to compact to */
        CHECK_EQ_INT(etcd_post(&g_etcd, "/v3/kv/range", "{\"key\":\"AA==\"}", ans, sizeof ans), 200);
        rp = strstr(ans, "\"revision\":\"");
        REQUIRE(rp);
        rev = atol(rp + 12);
        snprintf(body, sizeof body, "{\"revision\":\"%ld\"}", rev);
        CHECK_EQ_INT(etcd_post(&g_etcd, "/v3/kv/compaction", body, ans, sizeof ans), 200);
        REQUIRE(rsd_etcd_read_begin(co, key, rsd_now_ms(), 0) == RSD_OK);
        co->paging = true; /* as after a first answer that said more, read at an old revision */
        co->pg_end = RSD_OK;
        co->pg_then = RSDI_EP_END;
        co->pg_rev = 2;
        snprintf(co->pg_after, sizeof co->pg_after, "/pages200/prot/h000");
        CHECK_EQ_INT(co_run(co), RSD_OK);
        rsd_etcd_query(co, &v);
        CHECK(v.protected_incomplete);
        CHECK(strstr(v.protected_why, "a page of the protections could not be read") != NULL);
        printf("  %s\n", v.protected_why);
    }
    rsd_etcd_destroy(co);
    rsd_etcd_destroy(other);
}

/* 72 hosts protect 72 distinct models: 64 (RSD_MAX_PROTECTED) are known, the view says the
   rest are not, and an ensure still decides (with those known) and says so once. */
static void test_etcd_prot_too_many_models(void) {
    const char *args[] = {"--models-max", "2", "--load-ms", "5", "--unload-ms", "1", "--model", "id=m",
                          "--model", "id=n", NULL};
    static char names[72][16];
    const char *one;
    char coord[96], sd[300], host[16];
    sim_proc sim;
    rsd_ensurer *e;
    rsd_ensure_req q;
    rsd_ensure_result res;
    rsd_etcd_info v;
    int i;
    for (i = 0; i < 72; i++) {
        snprintf(names[i], sizeof names[i], "p%02d", i);
        snprintf(host, sizeof host, "h%03d", i);
        one = names[i];
        prot_publish("prot72", host, &one, NULL, 1);
    }
    prot_coord(coord, sizeof coord, "prot72");
    REQUIRE(sim_start(&sim, args) == 0);
    snprintf(sd, sizeof sd, "%s/prot72", g_tmp);
    e = host_prot(coord, "zz-self", sd, NULL, 0, 0);
    REQUIRE(e);
    req_init(&q, sim.url, "m");
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK_EQ_INT(prot_notices(&res), 1);
    rsd_etcd_query(e->co, &v);
    CHECK_EQ_INT(v.n_protected, RSD_MAX_PROTECTED);
    CHECK(v.protected_incomplete);
    CHECK(strstr(v.protected_why, "RSD_MAX_PROTECTED") != NULL);
    for (i = 0; i < res.n_notices; i++)
        if (strstr(res.notices[i].text, "known only in part")) printf("  %s\n", res.notices[i].text);
    rsd_ensurer_destroy(e);
    sim_stop(&sim);
}

/* A host's record over this host's attr_arena_bytes, and another's that is not a valid
   list: both unknown (said once per ensure), the valid hosts' protections still hold. */
static void test_etcd_prot_record_over_the_arena(void) {
    const char *args[] = {"--models-max", "2", "--load-ms", "5", "--unload-ms", "1", "--model", "id=keep-me",
                          "--model", "id=spare", "--model", "id=other", NULL};
    const char *order[3] = {"keep-me", "spare", "other"};
    static char ids[3][200];
    const char *big[3], *keep = "keep-me";
    char coord[96], sd[300], key[128];
    sim_proc sim;
    rsd_ensurer *e;
    rsd_ensure_req q;
    rsd_ensure_result res;
    rsd_etcd_info v;
    int i, k, j;
    for (i = 0; i < 3; i++) {
        memset(ids[i], 'a' + i, 199);
        ids[i][199] = '\0';
        big[i] = ids[i];
    }
    prot_publish("protover", "a-big", big, NULL, 3); /* 600 bytes of ids: over 512 */
    prot_publish("protover", "b-keeps", &keep, NULL, 1);
    prot_coord(coord, sizeof coord, "protover");
    REQUIRE(sim_start(&sim, args) == 0);
    snprintf(sd, sizeof sd, "%s/protover", g_tmp);
    e = host_prot(coord, "zz-self", sd, NULL, 0, 512);
    REQUIRE(e);
    for (k = 0; k < 2; k++) {
        if (k == 1) { /* the big one retired; a garbage record instead */
            snprintf(key, sizeof key, "/protover/prot/a-big");
            etcd_put_raw(key, "not a list\n", 11);
        }
        /* keep-me (b-keeps protects it, and it is the least recently used) is never the one evicted */
        for (j = 0; j < 3; j++) {
            req_init(&q, sim.url, order[j]);
            CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
            CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
            CHECK_EQ_INT(prot_notices(&res), 1);
            for (i = 0; i < res.n_evicted; i++) CHECK(strcmp(res.evicted[i].id, "keep-me") != 0);
            rsd_etcd_query(e->co, &v);
            CHECK(v.protected_incomplete);
            CHECK(strstr(v.protected_why, k ? "is not a valid protection list" : "over attr_arena_bytes (512)") != NULL);
            CHECK_EQ_INT(v.n_protected, 1);
            CHECK(view_protects(&v, "keep-me", RSD_ROLE_NONE));
        }
        printf("  %s\n", v.protected_why);
    }
    rsd_ensurer_destroy(e);
    sim_stop(&sim);
}

/* 60 other hosts protect ten models among them (mix0..mix9, one of them as a memory model)
   and this host its own eight (mix0..mix7): ten distinct models, each once, in the view and
   in what the reconcile gets; nothing unknown, no notice. */
static void test_etcd_prot_mix(void) {
    const char *args[] = {"--models-max", "2", "--load-ms", "5", "--unload-ms", "1", "--model", "id=m", NULL};
    static char names[10][8];
    const char *own[8], *one;
    char coord[96], sd[300], host[16];
    rsd_role role;
    sim_proc sim;
    rsd_ensurer *e;
    rsd_ensure_req q;
    rsd_ensure_result res;
    rsd_etcd_info v;
    int i, j, found;
    for (i = 0; i < 10; i++) snprintf(names[i], sizeof names[i], "mix%d", i);
    for (i = 0; i < 8; i++) own[i] = names[i];
    for (i = 0; i < 60; i++) {
        snprintf(host, sizeof host, "h%03d", i);
        one = names[i % 10];
        role = i == 42 ? RSD_ROLE_MEMORY : RSD_ROLE_NONE; /* mix2, once */
        prot_publish("protmix", host, &one, &role, 1);
    }
    prot_coord(coord, sizeof coord, "protmix");
    REQUIRE(sim_start(&sim, args) == 0);
    snprintf(sd, sizeof sd, "%s/protmix", g_tmp);
    e = host_prot(coord, "zz-self", sd, own, 8, 0);
    REQUIRE(e);
    req_init(&q, sim.url, "m");
    CHECK_EQ_INT(rsd_ensurer_sync(e, &q, &res), RSD_OK);
    CHECK_EQ_INT(prot_notices(&res), 0);
    rsd_etcd_query(e->co, &v);
    CHECK(!v.protected_incomplete);
    CHECK_EQ_INT(v.n_protected, 10);
    CHECK(view_protects(&v, "mix2", RSD_ROLE_MEMORY));
    CHECK_EQ_INT(e->n_prot_all, 10);
    CHECK(!e->prot_over);
    for (i = 0; i < 10; i++) {
        for (found = 0, j = 0; j < e->n_prot_all; j++) found += rsd_str_eq_c(e->prot_all[j].model_id, names[i]);
        CHECK_EQ_INT(found, 1);
    }
    rsd_ensurer_destroy(e);
    sim_stop(&sim);
}

/* ---- etcd stopped mid-run ------------------------------------------------------------------ */
static bool has_notice(const rsd_ensure_result *r, rsd_driver_msg m) {
    int i;
    for (i = 0; i < r->n_notices; i++)
        if (r->notices[i].dmsg == m) return true;
    return false;
}

static void test_etcd_stopped_mid_run(void) {
    const char *args[] = {"--models-max", "2", "--load-ms", "5", "--unload-ms", "1", "--model", "id=p",
                          "--model", "id=q", "--model", "id=r", NULL};
    char so[300], sc[300];
    sim_proc sim;
    rsd_ensurer *open_e, *closed_e;
    rsd_ensure_req q;
    rsd_ensure_result res;
    int rc, before;
    REQUIRE(sim_start(&sim, args) == 0);
    snprintf(so, sizeof so, "%s/down-open", g_tmp);
    snprintf(sc, sizeof sc, "%s/down-closed", g_tmp);
    open_e = host_new(g_etcd.coord, "host-open", so, NULL, false, 2);
    closed_e = host_new(g_etcd.coord, "host-closed", sc, NULL, true, 2);
    REQUIRE(open_e && closed_e);
    req_init(&q, sim.url, "p");
    CHECK_EQ_INT(rsd_ensurer_sync(open_e, &q, &res), RSD_OK);
    CHECK(res.lock_held);
    etcd_kill(&g_etcd, SIGKILL);
    /* fail-open: the swap happens, with warnings that say etcd could not be used */
    req_init(&q, sim.url, "q");
    rc = rsd_ensurer_sync(open_e, &q, &res);
    CHECK_EQ_INT(rc, RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK(!res.lock_held);
    CHECK(has_notice(&res, RSD_DMSG_LOCK_UNLOCKED));
    CHECK(has_notice(&res, RSD_DMSG_STATE_FAILED));
    CHECK(res.state_error < 0); /* the commit could not be recorded either */
    /* fail-closed: no load is sent, the ensure fails saying why */
    sim_log(&sim);
    before = sim_log(&sim);
    before = log_count(0, before, "POST", "/models/load", "r");
    req_init(&q, sim.url, "r");
    q.observe = false;
    rc = rsd_ensurer_sync(closed_e, &q, &res);
    CHECK(rc < 0);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_DEGRADED);
    CHECK(strstr(res.message, "lock") != NULL);
    CHECK_EQ_INT(log_count(0, sim_log(&sim), "POST", "/models/load", "r"), before);
    /* etcd back: both work with the lock again */
    REQUIRE(etcd_restart(&g_etcd) == 0);
    req_init(&q, sim.url, "r");
    CHECK_EQ_INT(rsd_ensurer_sync(closed_e, &q, &res), RSD_OK);
    CHECK(res.lock_held);
    rsd_ensurer_destroy(open_e);
    rsd_ensurer_destroy(closed_e);
    sim_stop(&sim);
}

int main(int argc, char **argv) {
    char bin[512];
    RSD_TEST_BEGIN(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    RUN(test_etcd_url);
    RUN(test_etcd_base64);
    RUN(test_etcd_parse_answers);
    if (!etcd_find(bin, sizeof bin)) {
        printf("etcd tests skipped: no etcd binary ($ETCD, /usr/bin/etcd, PATH; Debian: apt-get install etcd-server)\n");
        return RSD_TEST_END();
    }
    if (access(SIM_BIN, X_OK) != 0) {
        printf("%s missing: run make apps first\n", SIM_BIN);
        return 1;
    }
    snprintf(g_tmp, sizeof g_tmp, "%s/rsd-etcd-state-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_tmp) || etcd_start(&g_etcd, "/test") != 0) {
        printf("etcd did not start (%s): see %s/etcd.log\n", bin, g_etcd.dir);
        return 1;
    }
    RUN(test_etcd_coordinator);
    RUN(test_etcd_record_over_the_arena);
    RUN(test_etcd_answer_over_the_buffers);
    RUN(test_etcd_fencing);
    RUN(test_etcd_lease_expiry);
    RUN(test_etcd_auth);
    RUN(test_etcd_two_hosts);
    RUN(test_etcd_control_without_etcd);
    RUN(test_etcd_kill9_mid_swap);
    RUN(test_etcd_stale_holder_ensure);
    RUN(test_etcd_corrupt_record);
    RUN(test_etcd_lmstudio_shared);
    RUN(test_etcd_prot_past_the_first_page);
    RUN(test_etcd_prot_pages_coordinator);
    RUN(test_etcd_prot_too_many_models);
    RUN(test_etcd_prot_record_over_the_arena);
    RUN(test_etcd_prot_mix);
    RUN(test_etcd_stopped_mid_run);
    etcd_stop(&g_etcd);
    {
        char cmd[320];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
        if (system(cmd) != 0) { /* left in TMPDIR */ }
    }
    return RSD_TEST_END();
}
