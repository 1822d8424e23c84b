/* Fuzz target for the pure reconciler: decodes bytes into rsd_facts, runs
   rsd_decide and checks invariants against an independent oracle:
   - no plan evicts (or lists as fallback) a model sharing any id with a pinned
     model or with the keep; configured models only when the rules allow it;
   - observe never evicts or loads; evictions are residents, without duplicates;
   - router with known capacity: the load fits after the evictions, and the
     evictions are minimal; capacity unknown evicts at most one (W8);
   - the same facts twice, and the residents reversed, give the same plan;
   - W12 bytes: with any size unknown the plan is exactly the plan without sizes;
     with all known and memory short, the evictions free enough bytes and none
     of them could be spared (or a BYTES_SHORT notice says it cannot be done);
   - every notice formats, and truncation is consistent;
   - differential: the slow oracle of tests/decide_ref.h (identity groups,
     classification, the order of the eviction candidates with least recently used)
     agrees with the plan, for the facts and for the residents reversed.
   Then the clamp/env parsers and the decision cache on the remaining bytes.
   The checks and the oracle are left out of the coverage map (fuzz_oracle.h);
   the identity components they need are computed once per input. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include <stdlib.h>
#include <stdio.h>
#include "fuzz_oracle.h"
FZ_ORACLE_BEGIN
#include "../tests/decide_ref.h"
FZ_ORACLE_END

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

#define FAILIF(c) do { if (c) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

typedef struct rd { const uint8_t *d; size_t n, i; } rd;
static uint8_t u8(rd *r) { return r->i < r->n ? r->d[r->i++] : 0; }

static const char *const pool[] = {"a", "b", "c", "d", "e", "f", "keep", "k2", "llama3:latest",
                                   "library/llama3:latest", "qwen", "Qwen", "g", "h", "x y", ""};
static const char *const tag_pool[] = {"pinned:true", "role:scout", "pinned:false", "role:code", "", "PINNED:TRUE",
                                       "pinned:true ", "role:scout"};
static const char *const prot_pool[] = {"a", " b", "c ", "\tkeep", "qwen", "", "   ", "llama3:latest"};

/* Names are either from the pool or raw bytes from the input (stable storage). */
static rsd_str name(rd *r) {
    uint8_t b = u8(r);
    rsd_str s;
    if (b >= 0xF0) {
        size_t len = b & 0x0F;
        if (r->i + len > r->n) len = r->n - r->i;
        s.ptr = (const char *)r->d + r->i;
        s.len = len;
        r->i += len;
        return s;
    }
    return rsd_str_c(pool[b % (sizeof pool / sizeof pool[0])]);
}

static rsd_resident res[RSD_MAX_RESIDENTS + 8], rev[RSD_MAX_RESIDENTS + 8];
static rsd_protected_model prot[16];
static rsd_plan p1, p2, p3;
static rsd_decision_cache cache;

FZ_ORACLE_BEGIN

/* Per-input facts the oracle needs again and again, computed once (n <= 64 here):
   sh[i] bit j = residents i and j share a name; cid[i] = the identity component of i
   (its smallest index); conf/pin/keepn = configured, pinned, a name is the keep. */
typedef struct oracle {
    uint64_t sh[RSD_MAX_RESIDENTS], cmask[RSD_MAX_RESIDENTS];
    uint8_t conf[RSD_MAX_RESIDENTS], pin[RSD_MAX_RESIDENTS], keepn[RSD_MAX_RESIDENTS];
} oracle;
static oracle orc;

static bool is_keep_name(const rsd_facts *f, rsd_str s) {
    int k;
    if (!s.len) return false;
    if (rsd_str_eq(s, f->keep)) return true;
    for (k = 0; k < f->n_keep_aliases; k++)
        if (rsd_str_eq(s, f->keep_aliases[k])) return true;
    return false;
}
static rsd_str rname(const rsd_resident *r, int k) { return k == 0 ? r->model_id : r->aliases[k - 1]; }
static bool share(const rsd_resident *a, const rsd_resident *b) {
    int i, j;
    for (i = 0; i <= a->n_aliases; i++)
        for (j = 0; j <= b->n_aliases; j++)
            if (rname(a, i).len && rsd_str_eq(rname(a, i), rname(b, j))) return true;
    return false;
}
static bool trim_eq(rsd_str p, rsd_str s) {
    while (p.len && (p.ptr[0] == ' ' || p.ptr[0] == '\t' || p.ptr[0] == '\n' || p.ptr[0] == '\r' ||
                     p.ptr[0] == '\v' || p.ptr[0] == '\f')) { p.ptr++; p.len--; }
    while (p.len && (p.ptr[p.len - 1] == ' ' || p.ptr[p.len - 1] == '\t' || p.ptr[p.len - 1] == '\n' ||
                     p.ptr[p.len - 1] == '\r' || p.ptr[p.len - 1] == '\v' || p.ptr[p.len - 1] == '\f')) p.len--;
    return p.len && rsd_str_eq(p, s);
}
static bool configured(const rsd_facts *f, const rsd_resident *r) {
    int i, k;
    for (k = 0; k <= r->n_aliases; k++)
        for (i = 0; i < f->n_protected; i++)
            if (rname(r, k).len && trim_eq(f->protected_models[i].model_id, rname(r, k))) return true;
    return false;
}
static bool pinned(const rsd_resident *r) { return r->pinned || rsd_tags_protect(r->tags, r->n_tags); }

static void oracle_init(const rsd_facts *f) {
    int i, j, k, n = f->n_residents;
    for (i = 0; i < n; i++) {
        const rsd_resident *r = &f->residents[i];
        orc.sh[i] = 0;
        orc.conf[i] = configured(f, r);
        orc.pin[i] = pinned(r);
        orc.keepn[i] = 0;
        for (k = 0; k <= r->n_aliases; k++) orc.keepn[i] |= is_keep_name(f, rname(r, k));
    }
    for (i = 0; i < n; i++)
        for (j = i; j < n; j++)
            if (share(&f->residents[i], &f->residents[j])) {
                orc.sh[i] |= (uint64_t)1 << j;
                orc.sh[j] |= (uint64_t)1 << i;
            }
    for (i = 0; i < n; i++) { /* the transitive closure of sharing, from i */
        uint64_t c = (uint64_t)1 << i, grow;
        do {
            grow = c;
            for (j = 0; j < n; j++)
                if (c >> j & 1) grow |= orc.sh[j];
            if (grow == c) break;
            c = grow;
        } while (1);
        orc.cmask[i] = c;
    }
}
static bool shares(int a, int b) { return (orc.sh[a] >> b & 1) != 0; }
static bool in_comp(int e, int j) { return (orc.cmask[e] >> j & 1) != 0; }

static void check_victim(const rsd_facts *f, int e, bool fallback, bool keep_pinned) {
    int j;
    bool any_config = false, any_ours = false;
    FAILIF(e < 0 || e >= f->n_residents);
    for (j = 0; j < f->n_residents; j++) {
        if (!in_comp(e, j)) continue;
        FAILIF(orc.pin[j]);
        FAILIF(orc.keepn[j]);
        any_config |= orc.conf[j] != 0;
        any_ours |= f->residents[j].loaded_by_us;
    }
    if (any_config) {
        FAILIF(keep_pinned);                                    /* R26 */
        FAILIF(f->strategy == RSD_STRATEGY_SCHEDULER);          /* R28 */
        FAILIF(!fallback && f->strategy == RSD_STRATEGY_ROUTER && f->max_instances == 0); /* R29 */
    }
    if (f->strategy == RSD_STRATEGY_SCHEDULER) FAILIF(!any_ours);
}

static void same_plan(const rsd_plan *a, const rsd_plan *b) {
    int k;
    FAILIF(a->decision != b->decision || a->reason != b->reason || a->would != b->would);
    FAILIF(a->n_evict != b->n_evict || a->n_fallback != b->n_fallback || a->n_notices != b->n_notices);
    FAILIF(a->load_context != b->load_context || a->keep_index != b->keep_index);
    FAILIF(memcmp(a->evict, b->evict, sizeof a->evict) != 0);
    FAILIF(memcmp(a->fallback, b->fallback, sizeof a->fallback) != 0);
    FAILIF(memcmp(a->cls, b->cls, sizeof a->cls) != 0);
    for (k = 0; k < a->n_notices; k++) {
        const rsd_notice *x = &a->notices[k], *y = &b->notices[k];
        FAILIF(x->kind != y->kind || x->level != y->level || x->msg != y->msg || x->subject != y->subject);
        FAILIF(x->detail != y->detail || x->observe_only != y->observe_only || x->role != y->role);
        FAILIF(x->resident_count != y->resident_count || x->freed_vram_bytes != y->freed_vram_bytes);
    }
}

static void check_ids_equal(const rsd_facts *fa, const int16_t *a, const rsd_facts *fb, const int16_t *b, int n) {
    int k;
    for (k = 0; k < n; k++) FAILIF(!rsd_str_eq(fa->residents[a[k]].model_id, fb->residents[b[k]].model_id));
}

static char fmt_a[8192];
static refd_view fview;

/* Differential: the oracle's classification and candidate order agree with the plan. */
static void ref_check(const rsd_facts *f, int rc, const rsd_plan *got) {
    char why[256];
    if (rc < 0) return;
    refd_classify(f, &fview);
    if (refd_check_plan(f, got, &fview, why, sizeof why) != 0) {
        fprintf(stderr, "oracle: %s\n", why);
        abort();
    }
}

/* Freed bytes and slots of the evictions, each component counted once. */
static void evict_sums(const rsd_facts *f, const rsd_plan *p, uint8_t *gone, uint64_t *gb, int *gs) {
    int i, k;
    memset(gone, 0, RSD_MAX_RESIDENTS);
    for (k = 0; k < p->n_evict; k++) {
        gb[k] = 0;
        gs[k] = 0;
        for (i = 0; i < f->n_residents; i++)
            if (in_comp(p->evict[k], i) && !gone[i]) {
                const rsd_resident *r = &f->residents[i];
                gone[i] = 1;
                gs[k]++;
                gb[k] += r->has_size_vram ? r->size_vram_bytes : r->size_bytes;
            }
    }
}

/* Every invariant of a successful plan p1 for the facts f (see the top comment). */
static void check_plan(const rsd_facts *f) {
    const rsd_resident *res_ = f->residents;
    rsd_facts fr;
    int i, k;
    bool keep_pinned, bytes_plan, oracle_keep = false;
    FAILIF(f->n_residents > RSD_MAX_RESIDENTS);
    oracle_init(f);
    keep_pinned = f->keep_pinned || rsd_tags_protect(f->keep_tags, f->n_keep_tags);
    for (i = 0; i < f->n_residents; i++) oracle_keep |= orc.keepn[i] != 0;
    FAILIF(oracle_keep != p1.keep_resident);
    FAILIF(p1.keep_resident && p1.decision != RSD_DECISION_ALREADY_RESIDENT && p1.decision != RSD_DECISION_OBSERVE);
    FAILIF(p1.keep_resident && (p1.n_evict || p1.n_fallback));
    if (f->optout != RSD_OPTOUT_NONE) {
        FAILIF(p1.decision != RSD_DECISION_OBSERVE || p1.n_evict || p1.n_fallback);
    } else {
        FAILIF(p1.decision == RSD_DECISION_OBSERVE || p1.decision == RSD_DECISION_NONE);
        FAILIF((p1.decision == RSD_DECISION_LOAD_AFTER_EVICT) != (p1.n_evict > 0));
        FAILIF(p1.would != p1.decision);
    }
    if (p1.decision == RSD_DECISION_DECLINE) {
        FAILIF(!p1.n_notices || p1.notices[p1.n_notices - 1].kind != RSD_NOTICE_WILL_NOT_FIT);
    }
    FAILIF(p1.n_fallback && f->strategy != RSD_STRATEGY_JIT);
    for (k = 0; k < p1.n_evict; k++) {
        check_victim(f, p1.evict[k], false, keep_pinned);
        for (i = 0; i < k; i++) {
            FAILIF(p1.evict[i] == p1.evict[k]);
            FAILIF(shares(p1.evict[i], p1.evict[k]));
        }
    }
    for (k = 0; k < p1.n_fallback; k++) {
        check_victim(f, p1.fallback[k], true, keep_pinned);
        for (i = 0; i < k; i++) FAILIF(shares(p1.fallback[i], p1.fallback[k]));
    }
    /* W12: the byte oracle */
    {
        bool known = f->capacity_bytes > 0 && f->keep_bytes > 0, short_note = false;
        uint64_t used = 0, free_b, need;
        for (i = 0; i < f->n_residents; i++) {
            if (res_[i].has_size_vram) used += res_[i].size_vram_bytes;
            else if (res_[i].has_size) used += res_[i].size_bytes;
            else known = false;
        }
        for (k = 0; k < p1.n_notices; k++) short_note |= p1.notices[k].msg == RSD_MSG_BYTES_SHORT;
        free_b = f->capacity_bytes > used ? f->capacity_bytes - used : 0;
        need = f->keep_bytes > free_b ? f->keep_bytes - free_b : 0;
        bytes_plan = known && need > 0 && !short_note && !p1.keep_resident &&
                     (p1.decision == RSD_DECISION_LOAD || p1.decision == RSD_DECISION_LOAD_AFTER_EVICT) &&
                     f->strategy != RSD_STRATEGY_JIT && f->optout == RSD_OPTOUT_NONE;
        FAILIF(short_note && (!known || need == 0));
        if (!known && (f->capacity_bytes || f->keep_bytes)) { /* sizes change nothing */
            fr = *f;
            fr.capacity_bytes = 0;
            fr.keep_bytes = 0;
            FAILIF(rsd_decide(&fr, &p2) != RSD_OK);
            same_plan(&p1, &p2);
        }
        if (bytes_plan) {
            uint8_t gone[RSD_MAX_RESIDENTS];
            uint64_t gb[RSD_MAX_RESIDENTS], freed_b = 0;
            int gs[RSD_MAX_RESIDENTS], freed_s = 0, slots = 0, j;
            if ((f->strategy == RSD_STRATEGY_ROUTER || f->strategy == RSD_STRATEGY_DEFAULT) && f->max_instances)
                slots = f->n_residents + 1 - (int)f->max_instances;
            evict_sums(f, &p1, gone, gb, gs);
            for (k = 0; k < p1.n_evict; k++) {
                freed_b += gb[k];
                freed_s += gs[k];
            }
            FAILIF(freed_b < need || freed_s < slots); /* it fits after the evictions */
            for (j = 0; j < p1.n_evict; j++)          /* and no victim could be spared */
                FAILIF(freed_b - gb[j] >= need && freed_s - gs[j] >= slots);
        }
    }
    /* capacity math (R30) and minimality; W8 (count rules: not when bytes decided) */
    if ((f->strategy == RSD_STRATEGY_ROUTER || f->strategy == RSD_STRATEGY_DEFAULT) && !bytes_plan &&
        (p1.decision == RSD_DECISION_LOAD || p1.decision == RSD_DECISION_LOAD_AFTER_EVICT)) {
        if (f->max_instances) {
            uint8_t gone[RSD_MAX_RESIDENTS];
            uint64_t gb[RSD_MAX_RESIDENTS];
            int gs[RSD_MAX_RESIDENTS], freed = 0, freed_last = 0;
            evict_sums(f, &p1, gone, gb, gs);
            for (k = 0; k < p1.n_evict; k++) {
                freed += gs[k];
                freed_last = gs[k];
            }
            FAILIF(f->n_residents - freed + 1 > (int)f->max_instances);
            /* tiers: a configured model goes only after every unprotected one */
            for (k = 0; k < p1.n_evict; k++)
                if (orc.conf[p1.evict[k]] || p1.cls[p1.evict[k]].protection == RSD_PROTECT_CONFIG) {
                    for (i = 0; i < f->n_residents; i++) {
                        int j2, prot_or_keep = 0;
                        for (j2 = 0; j2 < f->n_residents; j2++)
                            if (in_comp(i, j2) && (orc.pin[j2] || orc.conf[j2] || orc.keepn[j2])) prot_or_keep = 1;
                        if (!prot_or_keep) FAILIF(!gone[i]);
                    }
                    break;
                }
            if (p1.n_evict) FAILIF(f->n_residents - (freed - freed_last) + 1 <= (int)f->max_instances);
        } else {
            FAILIF(p1.n_evict > 1);
        }
    }
    if (f->context_length && p1.load_context) FAILIF(p1.load_context > f->context_length);
    /* notices format; truncation is consistent */
    for (k = 0; k < p1.n_notices; k++) {
        char small[16];
        int len = rsd_notice_format(f, &p1, &p1.notices[k], NULL, 0);
        FAILIF(len < 0);
        FAILIF(rsd_notice_format(f, &p1, &p1.notices[k], fmt_a, sizeof fmt_a) != len);
        FAILIF(len < (int)sizeof fmt_a && fmt_a[len] != '\0');
        FAILIF(rsd_notice_format(f, &p1, &p1.notices[k], small, sizeof small) != len);
        FAILIF(strlen(small) >= sizeof small);
    }
    /* determinism: again, and with the residents reversed */
    FAILIF(rsd_decide(f, &p2) != RSD_OK);
    same_plan(&p1, &p2);
    for (i = 0; i < f->n_residents; i++) rev[i] = res_[f->n_residents - 1 - i];
    fr = *f;
    fr.residents = rev;
    FAILIF(rsd_decide(&fr, &p2) != RSD_OK);
    ref_check(&fr, RSD_OK, &p2);
    FAILIF(p1.decision != p2.decision || p1.reason != p2.reason || p1.n_evict != p2.n_evict ||
           p1.n_fallback != p2.n_fallback || p1.n_notices != p2.n_notices || p1.load_context != p2.load_context);
    check_ids_equal(f, p1.evict, &fr, p2.evict, p1.n_evict);
    check_ids_equal(f, p1.fallback, &fr, p2.fallback, p1.n_fallback);
    /* the loadability gate leaves a decline with one will-not-fit notice */
    FAILIF(rsd_plan_decline_unloadable(f, &p2, (uint32_t)f->n_residents) != RSD_OK);
    FAILIF(p2.decision != RSD_DECISION_DECLINE || p2.n_evict || p2.n_fallback || p2.n_notices != 1);
    FAILIF(rsd_notice_format(f, &p2, &p2.notices[0], NULL, 0) <= 0);
}

/* The clamp and env parsers on a string s of length len, and the target-key
   normaliser (idempotent). */
static void check_strings(const char *s, size_t len, uint32_t req) {
    uint32_t c = rsd_fit_ceiling_parse(s);
    char k1[RSD_TARGET_KEY_MAX], k2[RSD_TARGET_KEY_MAX];
    rsd_str v;
    int l1, l2;
    FAILIF(c == 0);
    FAILIF(rsd_fit_context(req, 0, c) != req);
    FAILIF(rsd_fit_context(req, 1, c) > req);
    FAILIF(rsd_fit_context(req, 1, c) != req && rsd_fit_context(req, 1, c) != c);
    (void)rsd_env_observe(s);
    (void)rsd_lifecycle_user_managed(s);
    v.ptr = s;
    v.len = len;
    l1 = rsd_target_key_normalise(v, k1, sizeof k1);
    if (l1 >= 0) { /* idempotent */
        l2 = rsd_target_key_normalise(rsd_str_c(k1), k2, sizeof k2);
        FAILIF(l2 != l1 || strcmp(k1, k2) != 0);
    }
}
FZ_ORACLE_END

static void fuzz_cache(rd *r) {
    int ops = u8(r) % 64, i;
    uint64_t now = 0;
    memset(&cache, 0, sizeof cache);
    cache.ttl_ms = (uint32_t)(u8(r) % 4) * 50;
    for (i = 0; i < ops && r->i < r->n; i++) {
        uint8_t op = u8(r);
        rsd_str key = name(r), model = name(r);
        rsd_cache_hit hit;
        int rc;
        now += u8(r);
        memset(&p3, 0, sizeof p3);
        p3.decision = (rsd_decision)(op % RSD_DECISION_NUM);
        p3.reason = (rsd_reason)((op >> 3) % RSD_REASON_NUM);
        switch ((op >> 6) & 3) {
        case 0:
            rc = rsd_cache_store(&cache, key, model, &p3, (op & 1) != 0, now, 0);
            if (rc == 1) { /* a stored entry hits right away */
                FAILIF(rsd_cache_lookup(&cache, key, model, now, 0, &hit) != 1);
                FAILIF(hit.age_ms != 0);
            }
            if (op & 1) FAILIF(rc == 1); /* W4 */
            break;
        case 1:
            rc = rsd_cache_lookup(&cache, key, model, now, 0, &hit);
            FAILIF(rc > 1);
            if (rc == 1) FAILIF(hit.decision == RSD_DECISION_LOAD || hit.decision == RSD_DECISION_LOAD_AFTER_EVICT ||
                                hit.decision == RSD_DECISION_NONE);
            break;
        default:
            rc = rsd_cache_invalidate(&cache, key, model);
            FAILIF(rc > RSD_DECISION_CACHE_MAX);
            if (rc >= 0) FAILIF(model.len && rsd_cache_lookup(&cache, key, model, now, 0, &hit) == 1);
            break;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    rd r;
    rsd_facts f;
    int i, k, rc;
    uint8_t b;
    r.d = d;
    r.n = n;
    r.i = 0;
    memset(&f, 0, sizeof f);
    f.strategy = (rsd_strategy)(u8(&r) % 4);
    b = u8(&r);
    f.optout = b % 8 == 0 ? RSD_OPTOUT_ENV : b % 8 == 1 ? RSD_OPTOUT_TARGET : RSD_OPTOUT_NONE;
    f.max_instances = u8(&r) % 12;
    b = u8(&r);
    f.keep_pinned = (b & 1) != 0;
    if (b & 2) f.context_length = (uint32_t)(u8(&r) + 1) * 4096u;
    if (b & 4) f.model_max_context = (uint32_t)u8(&r) * 4096u;
    f.context_ceiling = (b & 8) ? RSD_FIT_CEILING_OFF : (b & 16) ? (uint32_t)u8(&r) * 2048u : 0;
    f.target_id = rsd_str_c("t");
    f.keep = name(&r);
    f.n_keep_aliases = u8(&r) % 3;
    for (k = 0; k < f.n_keep_aliases; k++) f.keep_aliases[k] = name(&r);
    f.n_keep_tags = (b >> 5) % 3;
    for (k = 0; k < f.n_keep_tags; k++) f.keep_tags[k] = rsd_str_c(tag_pool[u8(&r) % 8]);
    f.n_residents = u8(&r) % 70;
    for (i = 0; i < f.n_residents; i++) {
        rsd_resident *x = &res[i];
        uint8_t fl;
        memset(x, 0, sizeof *x);
        x->model_id = name(&r);
        fl = u8(&r);
        x->loaded_by_us = (fl & 1) != 0;
        x->pinned = (fl & 2) == 2 && (fl & 0xF0) == 0xF0;
        x->has_size = (fl & 4) != 0;
        x->has_size_vram = (fl & 8) != 0;
        x->n_aliases = (fl >> 4) & 3;
        x->n_tags = (fl >> 6) & 3;
        for (k = 0; k < x->n_aliases; k++) x->aliases[k] = name(&r);
        for (k = 0; k < x->n_tags; k++) x->tags[k] = rsd_str_c(tag_pool[u8(&r) % 8]);
        if (x->has_size) x->size_bytes = (uint64_t)u8(&r) << 28;
        if (x->has_size_vram) x->size_vram_bytes = (uint64_t)u8(&r) << 28;
        if (fl & 0x20) x->last_used_ms = (uint64_t)(u8(&r) % 8) * 1000; /* ties, and 0 = unknown */
    }
    f.residents = res;
    f.n_protected = u8(&r) % 12;
    for (i = 0; i < f.n_protected; i++) {
        b = u8(&r);
        prot[i].model_id = b >= 0xF0 ? name(&r) : rsd_str_c(prot_pool[b % 8]);
        if (b >= 0x80 && b < 0xF0) prot[i].model_id = rsd_str_c(pool[b % 16]);
        prot[i].role = (rsd_role)(u8(&r) % RSD_ROLE_NUM);
    }
    f.protected_models = prot;
    b = u8(&r);
    if (b & 1) { /* W12 */
        f.capacity_bytes = (uint64_t)u8(&r) << 29;
        f.keep_bytes = (uint64_t)u8(&r) << 28;
    }

    memset(&p1, 0xa5, sizeof p1); /* *out is always written */
    rc = rsd_decide(&f, &p1);
    ref_check(&f, rc, &p1);
    if (rc < 0) {
        FAILIF(p1.decision != RSD_DECISION_NONE || p1.n_evict || p1.n_fallback || p1.n_notices);
        FAILIF(f.n_residents <= RSD_MAX_RESIDENTS && rc == RSD_ERR_RESIDENTS_LIMIT);
    } else {
        FAILIF(rc != RSD_OK);
        check_plan(&f);
    }

    /* clamp and env parsing on the remaining bytes as a string */
    {
        char s[64];
        uint32_t req = (uint32_t)u8(&r) << 12;
        size_t len = r.n - r.i < sizeof s - 1 ? r.n - r.i : sizeof s - 1;
        memcpy(s, d + r.i, len);
        s[len] = '\0';
        check_strings(s, len, req);
    }
    fuzz_cache(&r);
    return 0;
}
