/* test_decide_ref.c -- differential check of rsd_decide against the slow, obvious oracle
   of tests/decide_ref.h (identity groups, classification, the order of the eviction
   candidates with least recently used): a seeded PRNG builds tens of thousands of
   random facts (0..65 residents, shared long prefixes, ids that are prefixes of each
   other, bytes >= 0x80 and NUL inside ids, aliases that chain residents into identity
   groups, empty and overlong names, whitespace-padded and duplicated protected entries
   with roles, tags, sizes up to UINT64_MAX, last uses with ties, every strategy/opt-out,
   bad enums, NULL views) and requires, per case:
   - on an error, the zeroed plan whatever the output buffer held before;
   - the oracle's groups, keep, protection, role and ours for every resident;
   - where the lists follow the candidate order (JIT's fallback, the router's count
     evictions, the scheduler's release; bytes unknown): the same lists, the LRU-or-id
     reason and every eviction notice's victim rule and last use;
   - every notice formats, whole and truncated.
   Also a few hand-built facts (the bench's 64-model listing, all ids equal, one long
   alias chain, a listing in every rotation). */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency.h"
#include "rsd_test.h"
#include "decide_ref.h"
#include <stdint.h>

static uint64_t g_rng;
static uint32_t rnd(void) { /* xorshift64* */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (uint32_t)((g_rng * 2685821657736338717ull) >> 32);
}
static uint32_t below(uint32_t n) { return n ? rnd() % n : 0; }
static bool chance(uint32_t pct) { return below(100) < pct; }

/* One random case: facts plus the storage its views point into. */
typedef struct dcase {
    char arena[1 << 16];
    size_t used;
    rsd_resident res[RSD_MAX_RESIDENTS + 1];
    rsd_protected_model prot[RSD_MAX_PROTECTED + 1];
    rsd_facts f;
    rsd_str names[96]; /* the case's name space */
    int n_names;
} dcase;

static rsd_str put(dcase *c, const char *s, size_t n) {
    rsd_str v;
    if (c->used + n > sizeof c->arena) n = 0;
    memcpy(c->arena + c->used, s, n);
    v.ptr = c->arena + c->used;
    v.len = n;
    c->used += n;
    return v;
}

static const char *const fams[] = {"Qwen3-Coder-30B-A3B-Instruct", "gemma-3-27b-it", "gemma-3-4b-it", "gemma-3-1b-it",
                                   "Llama-3.3-70B-Instruct", "gpt-oss-20b", "gpt-oss-120b", "Phi-4-mini"};
static const char *const quants[] = {"Q4_K_M", "Q5_K_M", "Q8_0", "IQ4_XS", "F16", ""};
static const char *const shorts[] = {"a", "b", "ab", "abc", "keep", "k2", "llama3:latest", "library/llama3:latest",
                                     "qwen", "Qwen", "x y", "\xc3\xa9", "\xff", "a\0b", "a\0", "\0"};
static const char *const tag_pool[] = {"pinned:true", "role:scout", "pinned:false", "role:code", "",
                                       "PINNED:TRUE", "pinned:true ", "family:qwen", "ctx:32768"};

/* One random model name. */
static rsd_str gen_name(dcase *c) {
    char buf[300];
    size_t n = 0;
    uint32_t kind = below(10);
    if (kind < 3) { /* short pool, some with NUL bytes (lengths are explicit) */
        uint32_t k = below(sizeof shorts / sizeof shorts[0]);
        size_t len = strlen(shorts[k]);
        if (k == 13) len = 3;
        if (k == 14) len = 2;
        if (k == 15) len = 1;
        return put(c, shorts[k], len);
    }
    if (kind < 8) { /* long ids sharing prefixes, differing late */
        n = (size_t)snprintf(buf, sizeof buf, "%s%s-GGUF:%s-%u", chance(80) ? "unsloth/" : "bartowski/",
                             fams[below(8)], quants[below(6)], below(kind == 7 ? 300 : 12));
        if (chance(10)) n -= below((uint32_t)n); /* a prefix of another id */
        return put(c, buf, n);
    }
    if (kind == 8) { /* random bytes, short */
        size_t len = below(6), i;
        for (i = 0; i < len; i++) buf[i] = (char)(chance(50) ? 'a' + below(3) : below(256));
        return put(c, buf, len);
    }
    /* near the length limit (RSD_MODEL_ID_MAX - 1 is the longest valid id) */
    n = RSD_MODEL_ID_MAX - 3 + below(chance(90) ? 3 : 5);
    memset(buf, 'm', n);
    if (n > 10) buf[n - 1 - below(10)] = (char)('0' + below(3));
    return put(c, buf, n);
}

/* A name from the case's name space (so names repeat), or a fresh one. */
static rsd_str pick(dcase *c) {
    if (c->n_names && chance(85)) return c->names[below((uint32_t)c->n_names)];
    return gen_name(c);
}

static void gen_case(dcase *c) {
    rsd_facts *f = &c->f;
    int i, k, n_res;
    uint32_t mode = below(20);
    memset(f, 0, sizeof *f);
    c->used = 0;
    c->n_names = 2 + (int)below(60);
    for (i = 0; i < c->n_names; i++) c->names[i] = gen_name(c);
    n_res = mode == 0 ? (int)below(3) : mode < 6 ? (int)below(9) : mode < 17 ? (int)below(65) : 64;
    if (chance(1)) n_res = RSD_MAX_RESIDENTS + 1; /* over the limit */
    for (i = 0; i < n_res; i++) {
        rsd_resident *r = &c->res[i];
        memset(r, 0, sizeof *r);
        r->model_id = pick(c);
        if (!r->model_id.len && chance(70)) r->model_id = put(c, "fill", 4);
        r->n_aliases = chance(60) ? 0 : (int)below(RSD_MAX_ALIASES + 1);
        if (chance(1)) r->n_aliases = RSD_MAX_ALIASES + 1;
        for (k = 0; k < r->n_aliases && k < RSD_MAX_ALIASES; k++)
            r->aliases[k] = chance(15) ? put(c, "", 0) : pick(c);
        r->n_tags = (int)below(4);
        for (k = 0; k < r->n_tags; k++) {
            const char *t = chance(8) ? tag_pool[below(2)] : tag_pool[2 + below(7)];
            r->tags[k] = put(c, t, strlen(t));
        }
        r->pinned = chance(5);
        r->loaded_by_us = chance(30);
        r->last_used_ms = chance(40) ? 0 : chance(50) ? (uint64_t)below(4) * 1000 : chance(2) ? UINT64_MAX : below(1000000);
        r->has_size = chance(85);
        r->has_size_vram = chance(75);
        r->size_bytes = chance(3) ? UINT64_MAX - below(3) : (uint64_t)below(40) << 28;
        r->size_vram_bytes = chance(50) ? r->size_bytes : chance(3) ? UINT64_MAX : (uint64_t)below(40) << 28;
    }
    f->residents = c->res;
    f->n_residents = n_res;
    if (chance(1)) f->residents = NULL;
    f->n_protected = chance(30) ? 0 : (int)below(12);
    if (chance(2)) f->n_protected = (int)below(RSD_MAX_PROTECTED + 2);
    for (i = 0; i < f->n_protected; i++) {
        rsd_str s = pick(c);
        char buf[300];
        size_t n = 0;
        if (chance(20)) buf[n++] = chance(50) ? ' ' : '\t';
        if (s.len) memcpy(buf + n, s.ptr, s.len);
        n += s.len;
        if (chance(20)) buf[n++] = chance(50) ? ' ' : '\n';
        c->prot[i].model_id = chance(5) ? put(c, "   ", 3) : put(c, buf, n);
        c->prot[i].role = (rsd_role)below(RSD_ROLE_NUM);
        if (chance(1)) c->prot[i].role = (rsd_role)RSD_ROLE_NUM;
    }
    f->protected_models = c->prot;
    f->keep = chance(60) && n_res ? c->res[below((uint32_t)n_res)].model_id : pick(c);
    if (chance(20) && n_res) { /* keep by an alias of some resident */
        const rsd_resident *r = &c->res[below((uint32_t)n_res)];
        if (r->n_aliases > 0 && r->n_aliases <= RSD_MAX_ALIASES) f->keep = r->aliases[below((uint32_t)r->n_aliases)];
    }
    f->n_keep_aliases = chance(70) ? 0 : (int)below(RSD_MAX_ALIASES + 1);
    for (k = 0; k < f->n_keep_aliases; k++) f->keep_aliases[k] = chance(15) ? put(c, "", 0) : pick(c);
    f->n_keep_tags = (int)below(3);
    for (k = 0; k < f->n_keep_tags; k++) {
        const char *t = tag_pool[below(9)];
        f->keep_tags[k] = put(c, t, strlen(t));
    }
    f->keep_pinned = chance(10);
    if (chance(8)) { /* a free plan: no keep, bytes to free */
        f->keep = put(c, "", 0);
        f->free_bytes = chance(5) ? UINT64_MAX : (uint64_t)below(80) << 28;
    }
    f->strategy = (rsd_strategy)below(RSD_STRATEGY_NUM);
    if (chance(1)) f->strategy = (rsd_strategy)RSD_STRATEGY_NUM;
    f->optout = chance(85) ? RSD_OPTOUT_NONE : (rsd_optout)below(RSD_OPTOUT_NUM + (chance(5) ? 1 : 0));
    f->target_id = put(c, "llamacpp-mini", 13);
    if (chance(1)) f->target_id.ptr = NULL; /* NULL with a length */
    f->runtime_id = put(c, "llamacpp", 8);
    f->max_instances = chance(25) ? 0 : below((uint32_t)n_res + 3);
    if (chance(3)) f->max_instances = UINT32_MAX - below(2);
    f->context_length = chance(50) ? 0 : 1024u << below(9);
    f->model_max_context = chance(50) ? 0 : 1024u << below(9);
    f->context_ceiling = chance(70) ? 0 : 1024u << below(9);
    f->capacity_bytes = chance(40) ? 0 : chance(3) ? UINT64_MAX : (uint64_t)below(200) << 28;
    f->keep_bytes = chance(40) ? 0 : chance(3) ? UINT64_MAX - 1 : (uint64_t)below(60) << 28;
    /* shuffle the listing now and then (canonical order must not depend on it) */
    if (chance(30) && n_res > 1 && n_res <= RSD_MAX_RESIDENTS)
        for (i = n_res - 1; i > 0; i--) {
            int j = (int)below((uint32_t)i + 1);
            rsd_resident t = c->res[i];
            c->res[i] = c->res[j];
            c->res[j] = t;
        }
}

static rsd_plan pa, pb;
static refd_view g_view;
static char tb[8192];
static long g_cases, g_ok_cases, g_notices, g_ordered;

/* Runs rsd_decide and checks it against the oracle; returns false (and prints) on a
   difference. An error leaves the plan zeroed (keep_index -1) whatever it held. */
static bool compare(const rsd_facts *f, const char *what, long id) {
    char why[256];
    int rc, k;
    memset(&pb, 0xa5, sizeof pb);
    rc = rsd_decide(f, &pb);
    g_cases++;
    if (rc < 0) {
        memset(&pa, 0, sizeof pa);
        pa.keep_index = -1;
        if (memcmp(&pa, &pb, sizeof pa) != 0) {
            printf("  %s #%ld: rc %d but the plan is not the zeroed one\n", what, id, rc);
            return false;
        }
        return true;
    }
    g_ok_cases++;
    refd_classify(f, &g_view);
    if (refd_check_plan(f, &pb, &g_view, why, sizeof why) != 0) {
        printf("  %s #%ld: %s (reason %s)\n", what, id, why, rsd_reason_name(pb.reason));
        return false;
    }
    if (pb.reason == RSD_REASON_EVICT_LRU || pb.reason == RSD_REASON_JIT_LOAD ||
        pb.reason == RSD_REASON_EVICT_UNPROTECTED || pb.reason == RSD_REASON_EVICT_CONFIG)
        g_ordered++;
    for (k = 0; k < pb.n_notices; k++) { /* every notice formats; a cut one is a prefix */
        size_t cap = k % 3 == 2 ? (size_t)(k * 7 % 40) : sizeof tb;
        int whole = rsd_notice_format(f, &pb, &pb.notices[k], NULL, 0);
        int cut = rsd_notice_format(f, &pb, &pb.notices[k], tb, cap);
        g_notices++;
        if (whole <= 0 || cut != whole || (cap && strlen(tb) != ((size_t)whole < cap ? (size_t)whole : cap - 1))) {
            printf("  %s #%ld: notice %d formats as %d/%d bytes\n", what, id, k, whole, cut);
            return false;
        }
    }
    return true;
}

static dcase g_case;

/* Random facts, seeded: any difference names the seed and case to replay. */
static void random_facts_agree_with_the_oracle(void) {
    long i, bad = 0, n = getenv("RSD_DECIDE_REF_CASES") ? atol(getenv("RSD_DECIDE_REF_CASES")) : 25000;
    int seen[RSD_REASON_NUM], r, missing = 0;
    memset(seen, 0, sizeof seen);
    g_rng = 0x9e3779b97f4a7c15ull;
    g_cases = g_ok_cases = g_notices = 0;
    for (i = 0; i < n && bad < 5; i++) {
        gen_case(&g_case);
        if (!compare(&g_case.f, "random", i)) bad++;
        else if (pb.decision != RSD_DECISION_NONE) seen[pb.reason] = 1;
        g_case.f.capacity_bytes = 0; /* again managed and without sizes: the lists follow the order */
        g_case.f.optout = RSD_OPTOUT_NONE;
        g_case.f.keep = rsd_str_c("\x7f keep nobody lists");
        g_case.f.n_keep_aliases = 0;
        if (!compare(&g_case.f, "random, managed, no sizes", i)) bad++;
    }
    REQUIRE(bad == 0);
    /* every reason of the decision table is reached (the two driver-only ones aside) */
    for (r = 1; r < (int)RSD_REASON_NUM; r++)
        if (!seen[r] && r != RSD_REASON_DECLINE_NOT_LOADABLE && r != RSD_REASON_PROBE_FAILED) {
            printf("  reason %s never reached\n", rsd_reason_name(r));
            missing++;
        }
    CHECK_EQ_INT(missing, 0);
    /* the generator must reach the interesting paths, not only errors */
    CHECK(g_ok_cases > n / 2);
    CHECK(g_notices > n);
    CHECK(g_ordered > n / 10); /* plans whose lists follow the candidate order */
    if (getenv("RSD_TEST_VERBOSE"))
        printf("  %ld cases, %ld ok, %ld ordered, %ld notices\n", g_cases, g_ok_cases, g_ordered, g_notices);
}

/* The bench's listing (bench/reconcile.c figure 3), keep absent and keep resident,
   in every rotation of the listing. */
static void bench_listing_every_rotation(void) {
    static const char *const fam[] = {"Qwen3-Coder-30B-A3B-Instruct", "gemma-3-27b-it", "Llama-3.3-70B-Instruct",
                                      "Mistral-Small-3.2-24B-Instruct", "gpt-oss-20b", "Phi-4-mini-reasoning",
                                      "DeepSeek-R1-Distill-Qwen-14B", "granite-3.3-8b-instruct"};
    static const char *const quant[] = {"Q4_K_M", "Q5_K_M", "Q8_0", "IQ4_XS"};
    static char ids[64][64], aliases[64][64];
    rsd_resident base[64], rot[64];
    rsd_protected_model prot[6];
    rsd_facts f;
    int i, s, keep, bad = 0;
    memset(base, 0, sizeof base);
    for (i = 0; i < 64; i++) {
        rsd_resident *r = &base[i];
        snprintf(ids[i], sizeof ids[i], "unsloth/%s-GGUF:%s-%02d", fam[i % 8], quant[i % 4], i);
        snprintf(aliases[i], sizeof aliases[i], "%s-%02d", fam[i % 8], i);
        r->model_id = rsd_str_c(ids[i]);
        if (i % 8 == 3) { r->aliases[0] = rsd_str_c(aliases[i]); r->n_aliases = 1; }
        r->tags[0] = rsd_str_c(i % 2 ? "ctx:131072" : "ctx:32768");
        r->n_tags = 1;
        if (i == 5 || i == 21) { r->tags[1] = rsd_str_c("pinned:true"); r->n_tags = 2; }
        if (i == 40) { r->tags[1] = rsd_str_c("role:scout"); r->n_tags = 2; }
        r->size_bytes = (uint64_t)(4 + i % 20) << 30;
        r->size_vram_bytes = i % 17 == 9 ? r->size_bytes - ((uint64_t)1 << 30) : r->size_bytes;
        r->has_size = r->has_size_vram = true;
        r->loaded_by_us = i % 6 == 1;
    }
    for (i = 0; i < 6; i++) {
        prot[i].model_id = rsd_str_c(ids[2 + i * 10]);
        prot[i].role = (rsd_role)(1 + i % 4);
    }
    for (keep = 0; keep < 3; keep++)
        for (s = 0; s < 64; s++) {
            for (i = 0; i < 64; i++) rot[i] = base[(i + s) % 64];
            memset(&f, 0, sizeof f);
            f.target_id = rsd_str_c("llamacpp-mini");
            f.keep = rsd_str_c(keep == 0 ? "unsloth/Qwen3-235B-A22B-Instruct-GGUF:Q2_K" : keep == 1 ? ids[44] : aliases[11]);
            f.residents = rot;
            f.n_residents = 64;
            f.protected_models = prot;
            f.n_protected = 6;
            f.max_instances = 64 - (uint32_t)(s % 3);
            f.context_length = s % 2 ? 65536 : 0;
            if (s % 4 == 3) { f.capacity_bytes = (uint64_t)900 << 30; f.keep_bytes = (uint64_t)40 << 30; }
            if (!compare(&f, "bench", s + 64 * keep)) bad++;
        }
    CHECK_EQ_INT(bad, 0);
}

/* Degenerate identity groups: every id equal; one alias chain linking all 64 in
   reverse canonical order; 64 distinct ids sharing a 250-byte prefix. */
static void degenerate_groups(void) {
    static char names[65][RSD_MODEL_ID_MAX];
    rsd_resident r[64];
    rsd_facts f;
    int i, shape, strat, bad = 0;
    for (shape = 0; shape < 3; shape++)
        for (strat = RSD_STRATEGY_ROUTER; strat <= RSD_STRATEGY_SCHEDULER; strat++) {
            memset(r, 0, sizeof r);
            for (i = 0; i < 65; i++) {
                if (shape == 2) {
                    memset(names[i], 'p', 250);
                    snprintf(names[i] + 250, 6, "%02d", 64 - i % 64);
                } else {
                    snprintf(names[i], sizeof names[i], "chain-%02d", 64 - i);
                }
            }
            for (i = 0; i < 64; i++) {
                r[i].model_id = rsd_str_c(shape == 0 ? "same" : names[i]);
                if (shape == 1) { r[i].aliases[0] = rsd_str_c(names[i + 1]); r[i].n_aliases = 1; }
                r[i].loaded_by_us = i % 3 == 0;
                r[i].pinned = i == 17;
            }
            memset(&f, 0, sizeof f);
            f.strategy = (rsd_strategy)strat;
            f.keep = rsd_str_c("other");
            f.residents = r;
            f.n_residents = 64;
            f.max_instances = 64;
            if (!compare(&f, "degenerate", shape * 10 + strat)) bad++;
        }
    CHECK_EQ_INT(bad, 0);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    RUN(random_facts_agree_with_the_oracle);
    RUN(bench_listing_every_rotation);
    RUN(degenerate_groups);
    return RSD_TEST_END();
}
