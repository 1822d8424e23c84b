/* libFuzzer target, differential (W20): the indexed LM Studio lookups against the plain
   scans they replaced (tests/lms_scan_ref.h). The input is a catalog body (v1, v0 or
   OpenAI shape, LM Link duplicates, shared ids ...); then:
   - every folded key, every instance id, "" and an unknown id are resolved with no
     default, with each instance id as the default, and with peers made from the
     catalog's own instance ids (up to RSD_LMS_MAX_PEERS, target ids repeating): state,
     model, instance, wire id and peer mask equal the reference's;
   - rsd_lms_residents with owned ids taken from the instances equals the reference;
   - the parser's index covers the catalog, and the same catalog with its index
     cleared (indexed on the fly) answers the same.
   Build: make fuzz T=lms_index FUZZ_SECS=60 */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include "../tests/lms_scan_ref.h"
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

static rsd_lms_catalog cat, bare;
static rsd_json_tok toks[1 << 14];
static rsd_lms_peer peers[RSD_LMS_MAX_PEERS];
static rsd_str peer_ids[RSD_LMS_MAX_PEERS][RSD_LMS_MAX_INSTANCES];
static rsd_str queries[RSD_LMS_MAX_MODELS + RSD_LMS_MAX_INSTANCES + 2];
static rsd_resident ra[RSD_LMS_MAX_MODELS], rb[RSD_LMS_MAX_MODELS];

static void same(const rsd_lms_catalog *c, rsd_str q, rsd_str def, int n_peers) {
    rsd_lms_resolution x, y;
    FZ_CHECK(rsd_lms_resolve(c, q, def, n_peers ? peers : NULL, n_peers, &x) == RSD_OK);
    ref_resolve(c, q, def, n_peers ? peers : NULL, n_peers, &y);
    FZ_CHECK(x.state == y.state && x.model == y.model && x.instance == y.instance);
    FZ_CHECK(rsd_str_eq(x.wire_id, y.wire_id) && x.peer_mask == y.peer_mask);
}

static void check(const rsd_lms_catalog *c, int nq, int n_peers) {
    int q, i, na, nb;
    rsd_str owned[RSD_LMS_MAX_INSTANCES];
    int n_owned = 0;
    for (q = 0; q < nq; q++) {
        same(c, queries[q], rsd_str_c(""), 0);
        same(c, queries[q], rsd_str_c(""), n_peers);
        for (i = 0; i < c->n_instances && i < 8; i++) same(c, queries[q], c->instances[i].id, n_peers);
    }
    for (i = 0; i < c->n_instances; i += 2) owned[n_owned++] = c->instances[i].id;
    na = rsd_lms_residents(c, owned, n_owned, ra, RSD_LMS_MAX_MODELS);
    nb = ref_residents(c, owned, n_owned, rb, RSD_LMS_MAX_MODELS);
    FZ_CHECK(na == nb);
    for (i = 0; i < na; i++)
        FZ_CHECK(rsd_str_eq(ra[i].model_id, rb[i].model_id) && ra[i].loaded_by_us == rb[i].loaded_by_us);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int nq = 0, m, i, p, n_peers;
    if (rsd_lms_parse_models(&cat, (const char *)data, size, toks, (uint32_t)(sizeof toks / sizeof toks[0])) < 0)
        return 0;
    FZ_CHECK(cat.index.n_models == cat.n_models && cat.index.n_instances == cat.n_instances);
    for (m = 0; m < cat.n_models; m++) queries[nq++] = cat.models[m].key;
    for (i = 0; i < cat.n_instances; i++) queries[nq++] = cat.instances[i].id;
    queries[nq++] = rsd_str_c("");
    queries[nq++] = rsd_str_c("no such model");
    /* peers from the catalog's own ids: peer p lists every (p+1)-th instance id */
    n_peers = cat.n_instances < RSD_LMS_MAX_PEERS ? cat.n_instances : RSD_LMS_MAX_PEERS;
    for (p = 0; p < n_peers; p++) {
        static char names[RSD_LMS_MAX_PEERS][8];
        int k = 0;
        snprintf(names[p], sizeof names[p], "t%d", p % 5);
        peers[p].target_id = rsd_str_c(names[p]);
        for (i = p % 3; i < cat.n_instances; i += p + 1) peer_ids[p][k++] = cat.instances[i].id;
        peers[p].instance_ids = (p % 7 == 6) ? NULL : peer_ids[p];
        peers[p].n_instance_ids = k;
    }
    check(&cat, nq, n_peers);
    /* the same catalog without its index: indexed on the fly, same answers */
    bare = cat;
    memset(&bare.index, 0, sizeof bare.index);
    if (bare.n_models || bare.n_instances) check(&bare, nq, n_peers);
    return 0;
}
