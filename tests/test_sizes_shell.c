/* test_sizes_shell.c -- the memory figures the manual gives for the pool, the process
   supervisor, the state, the HTTP client and the fleet, measured: each create is given a
   counting allocator and what it asks for is compared with the manual's words ("about N"
   = within 15 %, "under N" = below it). A figure changed in the code and not in the
   manual, or the other way round, fails here. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include "rsd_test.h"
#include "portable.h"
#include "counting.h"

/* "about want": within 15 %. The manual's figures are x86-64's: on a 32-bit host the
   comparison is skipped (said once, in main). */
static bool about(size_t got, double want) {
    if (sizeof(void *) != 8) return true;
    if (!((double)got >= want * 0.85 && (double)got <= want * 1.15))
        printf("  %lu bytes, the manual says about %.0f\n", (unsigned long)got, want);
    return (double)got >= want * 0.85 && (double)got <= want * 1.15;
}

/* residency.h, rsd_pool_create: "one block of about 17 KiB + 48 bytes per max_requests
   + 48 bytes per event_log entry". */
static void test_pool_block(void) {
    counted c;
    rsd_pool_desc d;
    rsd_pool *p;
    size_t base, per_req, per_log;
    memset(&d, 0, sizeof d);
    d.allocator = counting(&c);
    d.max_requests = 16;
    REQUIRE((p = rsd_pool_create(&d)) != NULL);
    rsd_pool_destroy(p);
    CHECK_EQ_INT(c.calls, 1);
    base = c.asked;
    d.allocator = counting(&c);
    d.max_requests = 16 + 1000;
    REQUIRE((p = rsd_pool_create(&d)) != NULL);
    rsd_pool_destroy(p);
    per_req = (c.asked - base) / 1000;
    d.allocator = counting(&c);
    d.max_requests = 16;
    d.event_log = 1000;
    REQUIRE((p = rsd_pool_create(&d)) != NULL);
    rsd_pool_destroy(p);
    per_log = (c.asked - base) / 1000;
    CHECK(about(base - 16 * per_req, 17 * 1024));
    CHECK(about(per_req, 48));
    CHECK(about(per_log, 48));
}

/* residency_http.h, supervisor limits: "one block of about max_procs x (ring_bytes +
   arg_bytes + 1 KiB) + 14 KiB (defaults: about 410 KB); on Windows about max_procs x
   (ring_bytes + arg_bytes + 2 KiB) + 160 KiB (defaults: about 590 KB)". */
#if defined(_WIN32)
#define PROC_EACH 2048.0
#define PROC_FIXED (160.0 * 1024)
#define PROC_DEFAULT 590e3
#else
#define PROC_EACH 1024.0
#define PROC_FIXED (14.0 * 1024)
#define PROC_DEFAULT 410e3
#endif
static void test_procs_block(void) {
    counted c;
    rsd_procs_desc d;
    rsd_procs *p;
    memset(&d, 0, sizeof d);
    d.allocator = counting(&c);
    REQUIRE((p = rsd_procs_create(&d)) != NULL);
    rsd_procs_destroy(p);
    CHECK_EQ_INT(c.calls, 1);
    CHECK(about(c.asked, PROC_DEFAULT));
    CHECK(about(c.asked, (double)RSD_PROCS_DEFAULT * (RSD_PROC_RING_DEFAULT + RSD_PROC_ARG_BYTES_DEFAULT + PROC_EACH) +
                             PROC_FIXED));
    d.allocator = counting(&c);
    d.max_procs = 4;
    d.ring_bytes = 4096;
    d.arg_bytes = 2048;
    REQUIRE((p = rsd_procs_create(&d)) != NULL);
    rsd_procs_destroy(p);
    CHECK(about(c.asked, 4.0 * (4096 + 2048 + PROC_EACH) + PROC_FIXED));
}

/* residency_http.h, rsd_state_create: "one block of about 17 KB; nothing else allocates"
   (the struct and its scratch set's arena, desc.attr_arena_bytes, 8 KiB by default);
   sizeof(rsd_state_lock) about 2.5 KB, sizeof(rsd_attr_set) about 2 KB. */
static void test_state_block(void) {
    char dir[256];
    counted c;
    rsd_state_desc d;
    rsd_state *st = NULL;
    size_t base;
    REQUIRE(tp_temp_dir("sizes", dir, sizeof dir) == 0);
    memset(&d, 0, sizeof d);
    d.dir = dir;
    d.allocator = counting(&c);
    REQUIRE((st = rsd_state_create(&d, NULL)) != NULL);
    rsd_state_destroy(st);
    CHECK_EQ_INT(c.calls, 1);
    CHECK(about(c.asked, 17e3));
    CHECK(about(sizeof(rsd_state_lock), 2.5e3));
    CHECK(about(sizeof(rsd_attr_set), 2.1e3));
    CHECK_EQ_INT(RSD_STATE_ATTR_ARENA_DEFAULT, 8192);
    base = c.asked;
    d.attr_arena_bytes = RSD_STATE_ATTR_ARENA_MAX; /* the arena is the desc's, the rest stays */
    d.allocator = counting(&c);
    REQUIRE((st = rsd_state_create(&d, NULL)) != NULL);
    rsd_state_destroy(st);
    CHECK_EQ_INT(c.calls, 1);
    CHECK_EQ_INT(c.asked - base, RSD_STATE_ATTR_ARENA_MAX - RSD_STATE_ATTR_ARENA_DEFAULT);
    tp_remove_tree(dir);
}

/* The state's scratch set ends its block and a caller's set may end its arena's: a record
   that fills an arena of exactly its size is read and updated without a byte past it (the
   sanitizers check), and one byte less is RSD_ERR_TOO_LARGE, not a shorter record. */
static void test_state_arena_exact(void) {
    enum { ID = RSD_STATE_MAX_ID_BYTES, NEED = 2 * 2 * (ID + 1) }; /* two entries, both ids at the limit */
    char dir[256], id[4][ID + 1];
    counted c;
    rsd_state_desc d;
    rsd_state *st = NULL;
    rsd_attr_set *set = (rsd_attr_set *)malloc(sizeof *set);
    char *exact = (char *)malloc(NEED), *less = (char *)malloc(NEED - 1);
    int i;
    REQUIRE(set && exact && less);
    REQUIRE(tp_temp_dir("sizes", dir, sizeof dir) == 0);
    for (i = 0; i < 4; i++) {
        memset(id[i], 'a' + i, ID);
        id[i][ID] = '\0';
    }
    memset(&d, 0, sizeof d);
    d.dir = dir;
    d.attr_arena_bytes = NEED;
    d.allocator = counting(&c);
    REQUIRE((st = rsd_state_create(&d, NULL)) != NULL);
    CHECK_EQ_INT(c.calls, 1);
    CHECK_EQ_INT(c.asked, rsdi_al8(sizeof(struct rsd_state)) + NEED);
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, "k", id[0], id[1], 1), RSD_OK);
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, "k", id[2], id[3], 2), RSD_OK); /* the arena full, to its last byte */
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, "k", id[2], id[3], 3), RSD_OK); /* a refresh needs no room */
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, "k", "x", NULL, 4), RSD_ERR_CAPACITY);
    CHECK(strstr(rsd_state_last_error(st), "attr_arena_bytes") != NULL);
    CHECK_EQ_INT(rsd_attr_set_init(set, exact, NEED), RSD_OK);
    CHECK_EQ_INT(rsd_state_attr_load(st, "k", set), 2);
    CHECK_EQ_INT(set->arena_used, NEED);
    CHECK(strcmp(set->items[1].instance, id[3]) == 0 && set->items[1].loaded_at_ms == 3);
    CHECK_EQ_INT(rsd_attr_set_init(set, less, NEED - 1), RSD_OK);
    CHECK_EQ_INT(rsd_state_attr_load(st, "k", set), RSD_ERR_TOO_LARGE);
    CHECK(set->over && set->count == 0 && set->arena_used == NEED && !set->corrupt);
    rsd_state_destroy(st);
    free(set);
    free(exact);
    free(less);
    tp_remove_tree(dir);
}

/* residency_http.h, rsd_http_client_create: "5 blocks: object, connection table, request
   table, poll array, one buffer block of max_requests x (max_request_bytes +
   max_header_bytes + max_body_bytes), by default 8 x 1.08 MiB" (with TLS built in, its
   configuration takes more blocks). */
static void test_client_blocks(void) {
    counted c;
    rsd_http_client_desc d;
    rsd_http_client *h;
    memset(&d, 0, sizeof d);
    d.allocator = counting(&c);
    REQUIRE((h = rsd_http_client_create(&d)) != NULL);
    rsd_http_client_destroy(h);
#if !defined(RSD_HTTP_MBEDTLS)
    CHECK_EQ_INT(c.calls, 5);
#endif
    CHECK_EQ_INT(c.biggest, (size_t)8 * (64 + 16 + 1024) * 1024);
    CHECK(about(c.biggest, 8 * 1.08 * 1024 * 1024));
}

/* residency_http.h, fleet limits: "one block of about 415 KB + 195 bytes per
   max_requests, plus the pool's, the supervisor's (about 400 KB by default) and the probe
   client's (about 2.9 MB by default)": the fleet's own block is its first allocation, the
   pool and the supervisor are measured alone with the same descs, the rest is the probe
   client's. */
static void test_fleet_block(void) {
    counted c, cp, cs;
    rsd_fleet_desc d;
    rsd_fleet *f;
    rsd_pool *p;
    rsd_procs *s;
    size_t a16;
    memset(&d, 0, sizeof d);
    d.allocator = counting(&c);
    d.pool.max_requests = 16;
    REQUIRE((f = rsd_fleet_create(&d)) != NULL);
    rsd_fleet_destroy(f);
    a16 = c.first;
    d.pool.allocator = counting(&cp);
    REQUIRE((p = rsd_pool_create(&d.pool)) != NULL);
    rsd_pool_destroy(p);
    d.procs.allocator = counting(&cs);
    REQUIRE((s = rsd_procs_create(&d.procs)) != NULL);
    rsd_procs_destroy(s);
    CHECK(about(cs.asked, PROC_DEFAULT)); /* "the supervisor's (about 400 KB by default)" */
    REQUIRE(c.asked > a16 + cp.asked + cs.asked);
    CHECK(about(c.asked - a16 - cp.asked - cs.asked, 2.9e6));
    memset(&d.pool.allocator, 0, sizeof d.pool.allocator);
    memset(&d.procs.allocator, 0, sizeof d.procs.allocator);
    d.allocator = counting(&c);
    d.pool.max_requests = 1016;
    REQUIRE((f = rsd_fleet_create(&d)) != NULL);
    rsd_fleet_destroy(f);
    CHECK(about((double)(c.first - a16) / 1000.0, 195));
    CHECK(about((double)a16 - 16.0 * (double)(c.first - a16) / 1000.0, 415e3));
}

/* Every X_footprint(desc) is the bytes X_create(desc) then asks of its allocator, to the
   byte (TLS apart: the clients here have tls_off), for the defaults and for a desc with
   other sizes; 0 for a desc create refuses. */
static void test_footprints(void) {
    char dir[256];
    counted c;
    size_t fp;
    {
        rsd_pool_desc d;
        rsd_pool *p;
        memset(&d, 0, sizeof d);
        CHECK((fp = rsd_pool_footprint(NULL)) > 0 && fp == rsd_pool_footprint(&d));
        d.allocator = counting(&c);
        REQUIRE((p = rsd_pool_create(&d)) != NULL);
        rsd_pool_destroy(p);
        CHECK_EQ_INT(c.asked, fp);
        d.max_requests = 1000;
        d.event_log = 77;
        fp = rsd_pool_footprint(&d);
        d.allocator = counting(&c);
        REQUIRE((p = rsd_pool_create(&d)) != NULL);
        rsd_pool_destroy(p);
        CHECK_EQ_INT(c.asked, fp);
        d.max_requests = RSD_POOL_MAX_REQUESTS + 1;
        CHECK_EQ_INT(rsd_pool_footprint(&d), 0);
    }
    {
        rsd_procs_desc d;
        rsd_procs *p;
        memset(&d, 0, sizeof d);
        CHECK((fp = rsd_procs_footprint(NULL)) > 0 && fp == rsd_procs_footprint(&d));
        d.allocator = counting(&c);
        REQUIRE((p = rsd_procs_create(&d)) != NULL);
        rsd_procs_destroy(p);
        CHECK_EQ_INT(c.asked, fp);
        d.max_procs = 3;
        d.ring_bytes = 5000;
        d.arg_bytes = 1000;
        fp = rsd_procs_footprint(&d);
        d.allocator = counting(&c);
        REQUIRE((p = rsd_procs_create(&d)) != NULL);
        rsd_procs_destroy(p);
        CHECK_EQ_INT(c.asked, fp);
        d.max_procs = RSD_PROCS_MAX + 1;
        CHECK_EQ_INT(rsd_procs_footprint(&d), 0);
    }
    {
        rsd_http_client_desc d;
        rsd_http_client *h;
        memset(&d, 0, sizeof d);
        d.tls_off = true;
        fp = rsd_http_client_footprint(&d);
        CHECK(fp > 0 && fp == rsd_http_client_footprint(NULL));
        d.allocator = counting(&c);
        REQUIRE((h = rsd_http_client_create(&d)) != NULL);
        rsd_http_client_destroy(h);
        CHECK_EQ_INT(c.asked, fp);
        d.max_requests = 3;
        d.max_conns = 2;
        d.max_body_bytes = 100000;
        fp = rsd_http_client_footprint(&d);
        d.allocator = counting(&c);
        REQUIRE((h = rsd_http_client_create(&d)) != NULL);
        rsd_http_client_destroy(h);
        CHECK_EQ_INT(c.asked, fp);
        d.tls_off = false; /* with TLS built in, its state comes on top */
        d.allocator = counting(&c);
        REQUIRE((h = rsd_http_client_create(&d)) != NULL);
        rsd_http_client_destroy(h);
#if defined(RSD_HTTP_MBEDTLS)
        CHECK(c.asked > fp);
#else
        CHECK_EQ_INT(c.asked, fp);
#endif
        d.max_header_bytes = 10;
        CHECK_EQ_INT(rsd_http_client_footprint(&d), 0);
    }
    {
        rsd_http_server_desc d;
        rsd_http_server *h;
        memset(&d, 0, sizeof d);
        CHECK((fp = rsd_http_server_footprint(&d)) > 0 && fp == rsd_http_server_footprint(NULL));
        d.allocator = counting(&c);
        REQUIRE((h = rsd_http_server_create(&d)) != NULL);
        rsd_http_server_destroy(h);
        CHECK_EQ_INT(c.asked, fp);
        CHECK_EQ_INT(c.calls, 3);
        d.max_conns = 5;
        d.max_body_bytes = 12345;
        fp = rsd_http_server_footprint(&d);
        d.allocator = counting(&c);
        REQUIRE((h = rsd_http_server_create(&d)) != NULL);
        rsd_http_server_destroy(h);
        CHECK_EQ_INT(c.asked, fp);
        d.bind_host = "not-an-address";
        CHECK_EQ_INT(rsd_http_server_footprint(&d), 0);
    }
    {
        rsd_fleet_desc d;
        rsd_fleet *f;
        memset(&d, 0, sizeof d);
        CHECK((fp = rsd_fleet_footprint(&d)) > 0 && fp == rsd_fleet_footprint(NULL));
        d.allocator = counting(&c);
        REQUIRE((f = rsd_fleet_create(&d)) != NULL);
        rsd_fleet_destroy(f);
        CHECK_EQ_INT(c.asked, fp);
        d.pool.max_requests = 500;
        d.procs.max_procs = 4;
        fp = rsd_fleet_footprint(&d);
        d.allocator = counting(&c);
        REQUIRE((f = rsd_fleet_create(&d)) != NULL);
        rsd_fleet_destroy(f);
        CHECK_EQ_INT(c.asked, fp);
        d.pool.max_requests = RSD_POOL_MAX_REQUESTS + 1;
        CHECK_EQ_INT(rsd_fleet_footprint(&d), 0);
    }
    {
        rsd_state_desc d;
        rsd_state *st;
        int err = 1;
        REQUIRE(tp_temp_dir("sizes", dir, sizeof dir) == 0);
        memset(&d, 0, sizeof d);
        d.dir = dir;
        fp = rsd_state_footprint(&d);
        CHECK(fp > 0 && fp == rsd_state_footprint(NULL));
        d.allocator = counting(&c);
        REQUIRE((st = rsd_state_create(&d, &err)) != NULL);
        CHECK_EQ_INT(err, RSD_OK);
        rsd_state_destroy(st);
        CHECK_EQ_INT(c.asked, fp);
        d.attr_arena_bytes = 100000;
        fp = rsd_state_footprint(&d);
        d.allocator = counting(&c);
        REQUIRE((st = rsd_state_create(&d, NULL)) != NULL);
        rsd_state_destroy(st);
        CHECK_EQ_INT(c.asked, fp);
        d.allocator.free_fn = NULL;
        CHECK_EQ_INT(rsd_state_footprint(&d), 0);
        tp_remove_tree(dir);
    }
#ifndef RSD_NO_ETCD
    {
        rsd_etcd_desc d;
        rsd_etcd *co;
        memset(&d, 0, sizeof d);
        CHECK_EQ_INT(rsd_etcd_footprint(NULL), 0); /* the url is required */
        CHECK_EQ_INT(rsd_etcd_footprint(&d), 0);
        d.url = "etcd://127.0.0.1:2379/p";
        d.http.tls_off = true;
        fp = rsd_etcd_footprint(&d);
        d.allocator = counting(&c);
        REQUIRE((co = rsd_etcd_create(&d)) != NULL);
        rsd_etcd_destroy(co);
        CHECK_EQ_INT(c.asked, fp);
        d.attr_arena_bytes = 50000;
        fp = rsd_etcd_footprint(&d);
        d.allocator = counting(&c);
        REQUIRE((co = rsd_etcd_create(&d)) != NULL);
        rsd_etcd_destroy(co);
        CHECK_EQ_INT(c.asked, fp);
        d.url = "redis://127.0.0.1:2379"; /* not an etcd URL */
        CHECK_EQ_INT(rsd_etcd_footprint(&d), 0);
        CHECK(rsd_etcd_create(&d) == NULL);
    }
#endif
#ifndef RSD_NO_DEVMEM
    {
        rsd_devmem_desc d;
        rsd_devmem *dm;
        memset(&d, 0, sizeof d);
        d.nvml_path = ""; /* no NVML: the probe's own block only */
        d.ignore_env = true;
        CHECK((fp = rsd_devmem_footprint(&d)) > 0);
        d.allocator = counting(&c);
        REQUIRE((dm = rsd_devmem_create(&d)) != NULL);
        rsd_devmem_destroy(dm);
        CHECK_EQ_INT(c.asked, fp);
        d.allocator.alloc_fn = NULL;
        CHECK_EQ_INT(rsd_devmem_footprint(&d), 0);
    }
#endif
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    if (sizeof(void *) != 8) printf("skip: the manual's memory figures are x86-64's; here only the block counts are checked\n");
    RUN(test_pool_block);
    RUN(test_procs_block);
    RUN(test_state_block);
    RUN(test_state_arena_exact);
    RUN(test_client_blocks);
    RUN(test_fleet_block);
    RUN(test_footprints);
    return RSD_TEST_END();
}
