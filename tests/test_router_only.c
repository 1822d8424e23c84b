/* test_router_only.c -- the ensurer built as bench/size.sh's router-only program is
   (RSD_NO_LMSTUDIO, RSD_NO_OLLAMA, RSD_NO_ETCD, RSD_NO_HTTP_SERVER, RSD_NO_PROC,
   RSD_NO_DETECT, RSD_NO_DEVMEM, RSD_NO_SERVE_LEASE), over loopback against build/bin/rsd-sim as a
   llama.cpp router:
   what those macros leave out is refused in plain words, and what they keep (the load,
   the swap of a model it loaded itself, the attribution in the state directory, the
   decision cache) works as in the full build. Requests are counted in the simulator's
   own log, never timed. */
#define RSD_NO_LMSTUDIO
#define RSD_NO_OLLAMA
#define RSD_NO_ETCD
#define RSD_NO_HTTP_SERVER
#if !defined(_WIN32) /* Windows starts rsd-sim with the library's own supervisor (listen_proc.h) */
#define RSD_NO_PROC
#endif
#define RSD_NO_DETECT
#define RSD_NO_DEVMEM
#define RSD_NO_SERVE_LEASE
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include "rsd_test.h"
#include "state_dir.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if !defined(_WIN32)
#include <sys/wait.h>
#include <unistd.h>
#endif

#define SIM_BIN tp_exe("rsd-sim")
#define SIM_RUNTIME "router"
#include "sim_harness.h"

static rsd_ensurer *new_ensurer(bool with_state) {
    rsd_ensurer_desc d;
    memset(&d, 0, sizeof d);
    d.state_dir = g_state_dir;
    d.no_state = !with_state;
    d.ignore_env = true;
    return rsd_ensurer_create(&d);
}

static int ensure(rsd_ensurer *e, const sim_proc *s, const char *model, rsd_runtime_kind rt, rsd_ensure_result *res) {
    rsd_ensure_req q;
    memset(&q, 0, sizeof q);
    q.url = s->url;
    q.model = model;
    q.runtime = rt;
    q.timeout_ms = 20000;
    return rsd_ensurer_sync(e, &q, res);
}

static bool has_notice(const rsd_ensure_result *res, const char *text) {
    int i;
    for (i = 0; i < res->n_notices; i++)
        if (strstr(res->notices[i].text, text)) return true;
    return false;
}

/* Runtime AUTO: no detection in this build, so nothing is sent and the answer says why;
   the other runtimes are answered "no ... driver in this build". */
static void test_what_is_left_out_says_so(void) {
    static const char *const args[] = {"--models-max", "2", "--model", "id=a", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *e;
    int base;
    REQUIRE(sim_start(&s, args) == 0);
    e = new_ensurer(false);
    REQUIRE(e);
    base = sim_log(&s);
    REQUIRE(base >= 0);
    CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_AUTO, &res), RSD_ERR_NOT_FOUND);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_DEGRADED);
    CHECK_EQ_INT(res.requests, 0);
    CHECK(strstr(res.message, "no runtime detection in this build") != NULL);
    CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_OLLAMA, &res), RSD_ERR_NOT_FOUND);
    CHECK(strstr(res.message, "no ollama driver in this build") != NULL);
    CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_LMSTUDIO, &res), RSD_ERR_NOT_FOUND);
    CHECK(strstr(res.message, "no lmstudio driver in this build") != NULL);
    CHECK_EQ_INT(sim_log(&s), base);
    rsd_ensurer_destroy(e);
    sim_stop(&s);
    { /* nor does it keep room for detection's state: AUTO costs what LLAMACPP does */
        rsd_ensurer_desc d;
        size_t router;
        memset(&d, 0, sizeof d);
        d.no_state = true;
        d.runtime = RSD_RUNTIME_LLAMACPP;
        router = rsd_ensurer_footprint(&d);
        d.runtime = RSD_RUNTIME_AUTO;
        CHECK(router > 0);
        CHECK_EQ_INT(rsd_ensurer_footprint(&d), router);
    }
}

/* One slot: load a, then b swaps a out. The state directory says a was loaded by
   residency, so the eviction is of its own model; b again is a cache hit. */
static void test_load_swap_ours_and_cache(void) {
    static const char *const args[] = {"--models-max", "1", "--load-ms", "50", "--model", "id=a", "--model", "id=b", NULL};
    sim_proc s;
    rsd_ensure_result res;
    rsd_ensurer *e, *other;
    int base, n;
    REQUIRE(sim_start(&s, args) == 0);
    e = new_ensurer(true);
    other = new_ensurer(true); /* another process: only the state directory is shared */
    REQUIRE(e && other);
    CHECK_EQ_INT(ensure(e, &s, "a", RSD_RUNTIME_LLAMACPP, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK(res.loaded);
    CHECK_EQ_INT(res.runtime, RSD_RUNTIME_LLAMACPP);
    base = sim_log(&s);
    REQUIRE(base > 0);
    CHECK_EQ_INT(ensure(other, &s, "b", RSD_RUNTIME_LLAMACPP, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK(res.loaded);
    CHECK_EQ_INT(res.decision, RSD_DECISION_LOAD_AFTER_EVICT);
    CHECK_EQ_INT(res.n_evicted, 1);
    CHECK(res.n_evicted == 1 && !strcmp(res.evicted[0].id, "a"));
    CHECK(has_notice(&res, "evicting residency-loaded model 'a'"));
    n = sim_log(&s);
    CHECK_EQ_INT(log_count(base, n, "POST", "/models/unload", "a"), 1);
    CHECK_EQ_INT(log_count(base, n, "POST", "/models/load", "b"), 1);
    CHECK_EQ_INT(ensure(other, &s, "b", RSD_RUNTIME_LLAMACPP, &res), RSD_OK);
    CHECK_EQ_INT(res.outcome, RSD_OUTCOME_RESIDENT);
    CHECK(res.cache_hit);
    CHECK_EQ_INT(res.requests, 0);
    CHECK_EQ_INT(sim_log(&s), n);
    rsd_ensurer_destroy(e);
    rsd_ensurer_destroy(other);
    sim_stop(&s);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    SIM_REQUIRE_BUILT();
    make_state_dir("router-only");
    RUN(test_what_is_left_out_says_so);
    RUN(test_load_swap_ours_and_cache);
    remove_state_dir();
    return RSD_TEST_END();
}
