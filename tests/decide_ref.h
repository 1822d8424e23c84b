/* tests/decide_ref.h -- test-only oracle for the part of rsd_decide that is easy to get
   subtly wrong when made fast: identity groups, classification and the order of the
   eviction candidates (now with least recently used). Written the slow, obvious way
   (pairwise name comparisons, a transitive closure, insertion sorts), with no code
   shared with residency.h; tests/test_decide_ref.c and fuzz/fuzz_decide.c run it next
   to rsd_decide on the same facts. The rest of the decision (the decision table,
   notices, bytes) is checked by the hand-written cases of tests/test_decide.c and the
   fuzzer's invariants. Include after the residency.h implementation (public API only).

       refd_view v;
       if (rsd_decide(&f, &plan) == RSD_OK) {
           refd_classify(&f, &v);
           if (refd_check_plan(&f, &plan, &v, why, sizeof why) != 0) puts(why);
       }
*/
#ifndef RSD_TEST_DECIDE_REF_H
#define RSD_TEST_DECIDE_REF_H
#include <stdio.h>
#include <string.h>

typedef struct refd_view {
    int n;
    int group[RSD_MAX_RESIDENTS];          /* the canonical-first member of i's identity group */
    uint8_t is_keep[RSD_MAX_RESIDENTS], protection[RSD_MAX_RESIDENTS], role[RSD_MAX_RESIDENTS];
    uint8_t ours[RSD_MAX_RESIDENTS];
    uint64_t last[RSD_MAX_RESIDENTS];      /* the group's latest last_used_ms */
    int n_unprot, n_config;                /* eviction candidates, in order, by representative */
    int unprot[RSD_MAX_RESIDENTS], config[RSD_MAX_RESIDENTS];
    bool keep_pinned, bytes_known;
} refd_view;

static rsd_str refd_trim(rsd_str s) {
    while (s.len && strchr(" \t\n\r\v\f", s.ptr[0]) && s.ptr[0]) { s.ptr++; s.len--; }
    while (s.len && strchr(" \t\n\r\v\f", s.ptr[s.len - 1]) && s.ptr[s.len - 1]) s.len--;
    return s;
}
static rsd_str refd_name(const rsd_resident *r, int k) { return k == 0 ? r->model_id : r->aliases[k - 1]; }

/* Canonical order: id bytes (unsigned), then length, then listing index. */
static bool refd_before(const rsd_facts *f, int a, int b) {
    rsd_str x = f->residents[a].model_id, y = f->residents[b].model_id;
    size_t n = x.len < y.len ? x.len : y.len;
    int c = n ? memcmp(x.ptr, y.ptr, n) : 0;
    if (c) return c < 0;
    if (x.len != y.len) return x.len < y.len;
    return a < b;
}

/* How the protected list names s: 0 not, 1 bare, 2 with a role (the first entry with one). */
static int refd_listed(const rsd_facts *f, rsd_str s, uint8_t *role) {
    int i, got = 0;
    for (i = 0; i < f->n_protected; i++) {
        rsd_str id = refd_trim(f->protected_models[i].model_id);
        if (!id.len || id.len >= RSD_MODEL_ID_MAX || !rsd_str_eq(id, s)) continue;
        if (f->protected_models[i].role != RSD_ROLE_NONE) {
            *role = (uint8_t)f->protected_models[i].role;
            return 2;
        }
        got = 1;
    }
    if (got) *role = (uint8_t)RSD_ROLE_NONE;
    return got;
}

static bool refd_share(const rsd_resident *a, const rsd_resident *b) {
    int i, j;
    for (i = 0; i <= a->n_aliases; i++)
        for (j = 0; j <= b->n_aliases; j++)
            if (refd_name(a, i).len && rsd_str_eq(refd_name(a, i), refd_name(b, j))) return true;
    return false;
}

/* Candidate order inside a tier: ours first, then the least recent last use (0 first),
   then canonical order of the representatives. */
static bool refd_goes_first(const rsd_facts *f, const refd_view *v, int a, int b) {
    if (v->ours[a] != v->ours[b]) return v->ours[a] > v->ours[b];
    if (v->last[a] != v->last[b]) return v->last[a] < v->last[b];
    return refd_before(f, a, b);
}

/* Classifies valid facts (rsd_decide returned RSD_OK for them). */
static void refd_classify(const rsd_facts *f, refd_view *v) {
    int n = f->n_residents, i, j, k, g;
    static int comp[RSD_MAX_RESIDENTS];
    memset(v, 0, sizeof *v);
    v->n = n;
    for (i = 0; i < n; i++) comp[i] = i;
    for (;;) { /* components: relabel to the smallest label of any sharing pair until stable */
        bool changed = false;
        for (i = 0; i < n; i++)
            for (j = 0; j < n; j++)
                if (comp[j] < comp[i] && refd_share(&f->residents[i], &f->residents[j])) {
                    int from = comp[i], to = comp[j];
                    for (k = 0; k < n; k++)
                        if (comp[k] == from) comp[k] = to;
                    changed = true;
                }
        if (!changed) break;
    }
    for (i = 0; i < n; i++) { /* representative: the canonical-first member */
        g = i;
        for (j = 0; j < n; j++)
            if (comp[j] == comp[i] && refd_before(f, j, g)) g = j;
        v->group[i] = g;
    }
    for (g = 0; g < n; g++) {
        int best_cfg = -1;
        bool tag = false, cfg = false;
        uint8_t role = (uint8_t)RSD_ROLE_NONE;
        if (v->group[g] != g) continue;
        for (i = 0; i < n; i++) {
            const rsd_resident *r = &f->residents[i];
            uint8_t rrole = (uint8_t)RSD_ROLE_NONE;
            bool listed = false;
            if (v->group[i] != g) continue;
            for (k = 0; k <= r->n_aliases; k++) {
                rsd_str s = refd_name(r, k);
                if (!s.len) continue;
                if (rsd_str_eq(s, f->keep)) v->is_keep[g] = 1;
                for (j = 0; j < f->n_keep_aliases; j++)
                    if (f->keep_aliases[j].len && rsd_str_eq(s, f->keep_aliases[j])) v->is_keep[g] = 1;
                if (!listed && refd_listed(f, s, &rrole)) listed = true; /* the id, else the first listed alias */
            }
            if (r->loaded_by_us) v->ours[g] = 1;
            if (r->last_used_ms > v->last[g]) v->last[g] = r->last_used_ms;
            if (r->pinned || rsd_tags_protect(r->tags, r->n_tags)) tag = true;
            if (listed) {
                cfg = true;
                if (best_cfg < 0 || refd_before(f, i, best_cfg)) {
                    best_cfg = i;
                    role = rrole;
                }
            }
        }
        v->protection[g] = (uint8_t)(tag ? RSD_PROTECT_TAG : cfg ? RSD_PROTECT_CONFIG : RSD_PROTECT_NONE);
        v->role[g] = cfg ? role : (uint8_t)RSD_ROLE_NONE;
    }
    for (i = 0; i < n; i++) {
        g = v->group[i];
        v->is_keep[i] = v->is_keep[g];
        v->protection[i] = v->protection[g];
        v->role[i] = v->role[g];
        v->ours[i] = v->ours[g];
        v->last[i] = v->last[g];
    }
    for (g = 0; g < n; g++) { /* the two tiers, each by insertion */
        int *list, *cnt;
        if (v->group[g] != g || v->is_keep[g] || v->protection[g] == RSD_PROTECT_TAG) continue;
        list = v->protection[g] == RSD_PROTECT_NONE ? v->unprot : v->config;
        cnt = v->protection[g] == RSD_PROTECT_NONE ? &v->n_unprot : &v->n_config;
        for (j = (*cnt)++; j > 0 && refd_goes_first(f, v, g, list[j - 1]); j--) list[j] = list[j - 1];
        list[j] = g;
    }
    v->keep_pinned = f->keep_pinned || rsd_tags_protect(f->keep_tags, f->n_keep_tags);
    v->bytes_known = f->capacity_bytes > 0 && f->keep_bytes > 0;
    for (i = 0; i < n; i++)
        if (!f->residents[i].has_size && !f->residents[i].has_size_vram) v->bytes_known = false;
}

/* The victim rule the oracle expects for candidate g (order-chosen victims). */
static rsd_victim_rule refd_rule(const refd_view *v, int g) {
    int k;
    if (v->last[g]) return RSD_VICTIM_LRU;
    for (k = 0; k < v->n; k++)
        if (v->group[k] == k && !v->is_keep[k] && v->protection[k] == v->protection[g] && v->last[k])
            return RSD_VICTIM_UNUSED;
    return RSD_VICTIM_BY_ID;
}

#define REFD_FAIL(...) do { snprintf(why, cap, __VA_ARGS__); return -1; } while (0)

/* Compares a plan of rsd_decide with the oracle: the classification of every resident,
   and where the plan's lists follow the candidate order (no bytes involved), the lists
   themselves, the reason's LRU-or-id choice and each eviction notice's victim rule.
   0 = agrees, -1 with why. */
static int refd_check_plan(const rsd_facts *f, const rsd_plan *p, const refd_view *v, char *why, size_t cap) {
    int order[2 * RSD_MAX_RESIDENTS], no = 0, i, k;
    bool by_order = !v->bytes_known, any_last = false;
    for (i = 0; i < v->n; i++) {
        const rsd_resident_class *c = &p->cls[i];
        if (c->group != v->group[i] || c->is_keep != v->is_keep[i] || c->protection != v->protection[i] ||
            c->ours != v->ours[i] || (c->protection == RSD_PROTECT_CONFIG && c->role != v->role[i]))
            REFD_FAIL("resident %d: group %d/%d keep %d/%d protection %d/%d ours %d/%d role %d/%d (plan/oracle)", i,
                      c->group, v->group[i], c->is_keep, v->is_keep[i], c->protection, v->protection[i], c->ours,
                      v->ours[i], c->role, v->role[i]);
    }
    if (!f->keep.len && f->optout == RSD_OPTOUT_NONE) { /* a free plan: ours of known size, in order */
        uint64_t freed = 0;
        int m = 0;
        for (k = 0; k < v->n_unprot; k++) {
            int g = v->unprot[k];
            uint64_t b = 0;
            bool sized = v->ours[g] != 0;
            for (i = 0; i < v->n && sized; i++) {
                const rsd_resident *r = &f->residents[i];
                if (v->group[i] != g) continue;
                sized = r->has_size_vram || r->has_size;
                b += r->has_size_vram ? r->size_vram_bytes : r->size_bytes;
                if (b < (r->has_size_vram ? r->size_vram_bytes : r->size_bytes)) b = UINT64_MAX; /* saturate */
            }
            if (!sized || !b || freed >= f->free_bytes) continue;
            if (m >= p->n_evict || p->evict[m] != g) REFD_FAIL("free: eviction %d is not %d", m, g);
            m++;
            freed = freed > UINT64_MAX - b ? UINT64_MAX : freed + b;
        }
        if (m != p->n_evict) REFD_FAIL("free: %d evictions, oracle %d", p->n_evict, m);
        if (p->decision != RSD_DECISION_FREE || p->freed_bytes != freed) REFD_FAIL("free: decision or bytes");
        return 0;
    }
    if (p->keep_resident || f->optout != RSD_OPTOUT_NONE) return 0;
    for (k = 0; k < v->n_unprot; k++) {
        order[no++] = v->unprot[k];
        any_last = any_last || v->last[v->unprot[k]];
    }
    for (k = 0; k < v->n_config && !(v->keep_pinned && f->strategy != RSD_STRATEGY_SCHEDULER); k++)
        order[no++] = v->config[k];
    if (f->strategy == RSD_STRATEGY_JIT) {
        if (p->n_fallback != no) REFD_FAIL("jit: %d fallbacks, oracle %d", p->n_fallback, no);
        for (k = 0; k < no; k++)
            if (p->fallback[k] != order[k]) REFD_FAIL("jit: fallback %d is %d, oracle %d", k, p->fallback[k], order[k]);
        return 0;
    }
    if (!by_order) return 0;
    if (f->strategy == RSD_STRATEGY_SCHEDULER) { /* ours of the unprotected tier, in order */
        int m = 0;
        for (k = 0; k < v->n_unprot; k++)
            if (v->ours[v->unprot[k]]) {
                if (m >= p->n_evict || p->evict[m] != v->unprot[k])
                    REFD_FAIL("scheduler: release %d is not %d", m, v->unprot[k]);
                m++;
            }
        if (m != p->n_evict) REFD_FAIL("scheduler: %d releases, oracle %d", p->n_evict, m);
    } else if (p->reason == RSD_REASON_EVICT_UNPROTECTED || p->reason == RSD_REASON_EVICT_LRU ||
               p->reason == RSD_REASON_EVICT_CONFIG || p->reason == RSD_REASON_CAPACITY_UNKNOWN_EVICT_ONE) {
        if (p->n_evict > no) REFD_FAIL("router: %d evictions, %d candidates", p->n_evict, no);
        for (k = 0; k < p->n_evict; k++)
            if (p->evict[k] != order[k]) REFD_FAIL("router: eviction %d is %d, oracle %d", k, p->evict[k], order[k]);
        if ((p->reason == RSD_REASON_EVICT_LRU) != (p->reason != RSD_REASON_EVICT_CONFIG &&
                                                    p->reason != RSD_REASON_CAPACITY_UNKNOWN_EVICT_ONE && any_last))
            REFD_FAIL("router: reason %s, a last use %s known", rsd_reason_name(p->reason), any_last ? "is" : "is not");
    }
    for (i = 0; i < v->n; i++) { /* every member of a victim's group carries its rule, nobody else one */
        int want = p->cls[v->group[i]].evict ? (int)refd_rule(v, v->group[i]) : (int)RSD_VICTIM_NONE;
        if (p->cls[i].victim_rule != want)
            REFD_FAIL("resident %d: victim rule %d, oracle %d", i, (int)p->cls[i].victim_rule, want);
    }
    return 0;
}
#undef REFD_FAIL

#endif
