/* tests/decide_ref.h -- test-only reference: rsd_decide exactly as it was before the
   decideperf rewrite (main at efa612d), renamed refd_*, all static. The unit test
   tests/test_decide_ref.c and the fuzz target fuzz/fuzz_decide.c run it next to the
   library's rsd_decide and require byte-identical plans and notice texts: the
   rewrite may change speed, never a decision. Do not "fix" this copy; it is the
   oracle. Include after the residency.h implementation (uses the public API only:
   rsd_str_eq, rsd_tags_protect, rsd_fit_context). */
#ifndef RSD_TEST_DECIDE_REF_H
#define RSD_TEST_DECIDE_REF_H
#include <string.h>

/* A view is usable: no NULL pointer with a length. */
static bool refd_str_valid(rsd_str s) { return s.ptr != NULL || s.len == 0; }

static bool refd_is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* ASCII whitespace trimmed from both ends. */
static rsd_str refd_str_trim(rsd_str s) {
    if (!s.ptr) { s.len = 0; return s; }
    while (s.len && refd_is_space(s.ptr[0])) { s.ptr++; s.len--; }
    while (s.len && refd_is_space(s.ptr[s.len - 1])) s.len--;
    return s;
}

/* Total order on views: bytes (unsigned), then length. */
static int refd_str_cmp(rsd_str a, rsd_str b) {
    size_t n = a.len < b.len ? a.len : b.len;
    int c = n ? memcmp(a.ptr, b.ptr, n) : 0;
    if (c) return c;
    return a.len < b.len ? -1 : a.len > b.len ? 1 : 0;
}

/* Name k of resident r: 0 = model_id, 1.. = aliases (may be empty = skip). */
static rsd_str refd_res_name(const rsd_resident *r, int k) {
    return k == 0 ? r->model_id : r->aliases[k - 1];
}

/* Role lookup in the protected list (R9): first entry with a known role wins; a
   bare entry counts when no entry for the id carries a role. */
static bool refd_protected_role(const rsd_facts *f, rsd_str name, rsd_role *role) {
    int i;
    bool bare = false;
    if (name.len == 0) return false;
    for (i = 0; i < f->n_protected; i++) {
        rsd_str id = refd_str_trim(f->protected_models[i].model_id);
        if (id.len == 0 || id.len >= RSD_MODEL_ID_MAX || !rsd_str_eq(id, name)) continue;
        if (f->protected_models[i].role != RSD_ROLE_NONE) {
            *role = f->protected_models[i].role;
            return true;
        }
        bare = true;
    }
    if (bare) *role = RSD_ROLE_NONE;
    return bare;
}

/* Checks a model id: non-empty, short enough, valid view. */
static int refd_check_id(rsd_str s, bool allow_empty) {
    if (!refd_str_valid(s)) return RSD_ERR_ARG;
    if (s.len == 0) return allow_empty ? RSD_OK : RSD_ERR_MODEL_ID;
    return s.len < RSD_MODEL_ID_MAX ? RSD_OK : RSD_ERR_MODEL_ID;
}

static int refd_check_facts(const rsd_facts *f) {
    int i, k, r;
    if ((int)f->strategy < 0 || (int)f->strategy >= (int)RSD_STRATEGY_NUM) return RSD_ERR_ARG;
    if ((int)f->optout < 0 || (int)f->optout >= (int)RSD_OPTOUT_NUM) return RSD_ERR_ARG;
    if (f->n_residents < 0 || f->n_protected < 0 || f->n_keep_aliases < 0 || f->n_keep_tags < 0)
        return RSD_ERR_ARG;
    if (f->n_residents > RSD_MAX_RESIDENTS || f->n_protected > RSD_MAX_PROTECTED ||
        f->n_keep_aliases > RSD_MAX_ALIASES || f->n_keep_tags > RSD_MAX_TAGS)
        return RSD_ERR_RESIDENTS_LIMIT;
    if ((f->n_residents && !f->residents) || (f->n_protected && !f->protected_models))
        return RSD_ERR_ARG;
    if (!refd_str_valid(f->target_id) || !refd_str_valid(f->runtime_id)) return RSD_ERR_ARG;
    if ((r = refd_check_id(f->keep, false)) < 0) return r;
    for (k = 0; k < f->n_keep_aliases; k++)
        if ((r = refd_check_id(f->keep_aliases[k], true)) < 0) return r;
    for (k = 0; k < f->n_keep_tags; k++)
        if (!refd_str_valid(f->keep_tags[k])) return RSD_ERR_ARG;
    for (i = 0; i < f->n_protected; i++) {
        int role = (int)f->protected_models[i].role;
        if (!refd_str_valid(f->protected_models[i].model_id)) return RSD_ERR_ARG;
        if (role < 0 || role >= (int)RSD_ROLE_NUM) return RSD_ERR_ARG;
    }
    for (i = 0; i < f->n_residents; i++) {
        const rsd_resident *res = &f->residents[i];
        if (res->n_aliases < 0 || res->n_tags < 0) return RSD_ERR_ARG;
        if (res->n_aliases > RSD_MAX_ALIASES || res->n_tags > RSD_MAX_TAGS)
            return RSD_ERR_RESIDENTS_LIMIT;
        if ((r = refd_check_id(res->model_id, false)) < 0) return r;
        for (k = 0; k < res->n_aliases; k++)
            if ((r = refd_check_id(res->aliases[k], true)) < 0) return r;
        for (k = 0; k < res->n_tags; k++)
            if (!refd_str_valid(res->tags[k])) return RSD_ERR_ARG;
    }
    return RSD_OK;
}

/* Does resident r carry a name of the keep model? */
static bool refd_matches_keep(const rsd_facts *f, const rsd_resident *r) {
    int i, j;
    for (i = 0; i <= r->n_aliases; i++) {
        rsd_str x = refd_res_name(r, i);
        if (!x.len) continue;
        if (rsd_str_eq(x, f->keep)) return true;
        for (j = 0; j < f->n_keep_aliases; j++)
            if (rsd_str_eq(x, f->keep_aliases[j])) return true;
    }
    return false;
}

/* Working state of one refd_decide call (on the stack, ~1.5 KiB). */
typedef struct refd_decide_ws {
    int n;
    int16_t order[RSD_MAX_RESIDENTS];   /* canonical order: (model_id, index) */
    int16_t pos[RSD_MAX_RESIDENTS];     /* position of index i in order */
    int16_t root[RSD_MAX_RESIDENTS];    /* union-find parent */
    uint8_t tag[RSD_MAX_RESIDENTS], cfg[RSD_MAX_RESIDENTS], role[RSD_MAX_RESIDENTS];
    uint8_t gsize[RSD_MAX_RESIDENTS];   /* members, at the representative */
    uint8_t role_set[RSD_MAX_RESIDENTS]; /* group role decided */
    uint32_t hash[RSD_MAX_RESIDENTS][1 + RSD_MAX_ALIASES]; /* FNV-1a of each name, 0 = empty */
    int n_others;                       /* non-keep groups, canonical order */
    int16_t others[RSD_MAX_RESIDENTS];
    int n_unprot, n_config;             /* eviction tiers (R25), ours first */
    int16_t unprot[RSD_MAX_RESIDENTS], config[RSD_MAX_RESIDENTS];
    bool bytes_known;                   /* W12: capacity, keep and every resident sized */
    uint64_t free_bytes, need_bytes;    /* free now; to free for the keep (0 = it fits) */
    uint64_t gbytes[RSD_MAX_RESIDENTS]; /* group footprint, at the representative */
} refd_decide_ws;

/* FNV-1a, never 0 for a non-empty name (0 marks "no name"). */
static uint32_t refd_name_hash(rsd_str s) {
    uint32_t h = 2166136261u;
    size_t i;
    if (!s.len) return 0;
    for (i = 0; i < s.len; i++) h = (h ^ (uint8_t)s.ptr[i]) * 16777619u;
    return h ? h : 1;
}

/* Do residents i and j share a non-empty name? Hashes first, bytes to confirm. */
static bool refd_share_name_h(const refd_decide_ws *w, const rsd_facts *f, int i, int j) {
    const rsd_resident *a = &f->residents[i], *b = &f->residents[j];
    int x, y;
    for (x = 0; x <= a->n_aliases; x++) {
        uint32_t hx = w->hash[i][x];
        if (!hx) continue;
        for (y = 0; y <= b->n_aliases; y++)
            if (w->hash[j][y] == hx && rsd_str_eq(refd_res_name(a, x), refd_res_name(b, y))) return true;
    }
    return false;
}

static int refd_find(refd_decide_ws *w, int i) {
    while (w->root[i] != i) {
        w->root[i] = w->root[w->root[i]];
        i = w->root[i];
    }
    return i;
}

/* Appends a notice; returns it zeroed with kind/level/msg set, or NULL if full. */
static rsd_notice *refd_notice_add(rsd_plan *p, rsd_notice_kind kind, rsd_notice_level level,
                                         rsd_notice_msg msg, int subject) {
    rsd_notice *n;
    if (p->n_notices >= RSD_MAX_NOTICES) return NULL;
    n = &p->notices[p->n_notices++];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->level = level;
    n->msg = msg;
    n->subject = subject;
    n->role = RSD_ROLE_NONE;
    return n;
}

/* Builds tiers: groups with the given protection, ours first, canonical order. */
static int refd_tier(const refd_decide_ws *w, const rsd_plan *p, int protection, int16_t *out) {
    int pass, k, n = 0;
    for (pass = 0; pass < 2; pass++)
        for (k = 0; k < w->n_others; k++) {
            int g = w->others[k];
            if (p->cls[g].protection != protection) continue;
            if ((pass == 0) != (p->cls[g].ours != 0)) continue;
            out[n++] = (int16_t)g;
        }
    return n;
}

static void refd_mark_evict(const refd_decide_ws *w, rsd_plan *p, int g) {
    int i;
    for (i = 0; i < w->n; i++)
        if (p->cls[i].group == g) p->cls[i].evict = 1;
    p->evict[p->n_evict++] = (int16_t)g;
}

/* R31: one notice per planned eviction. */
static void refd_evict_notices(const rsd_facts *f, rsd_plan *p) {
    int k;
    for (k = 0; k < p->n_evict; k++) {
        int g = p->evict[k];
        const rsd_resident *r = &f->residents[g];
        rsd_notice *n;
        if (p->cls[g].protection == RSD_PROTECT_CONFIG) {
            n = refd_notice_add(p, RSD_NOTICE_SWAP, RSD_LEVEL_WARNING, RSD_MSG_EVICT_CONFIG, g);
            if (!n) return;
            n->detail = RSD_DETAIL_SWAPPED_OUT | RSD_DETAIL_CONFIG_PROTECTED;
            n->config_protected = true;
            n->role = (rsd_role)p->cls[g].role;
            if (n->role != RSD_ROLE_NONE) n->detail |= RSD_DETAIL_ROLE;
        } else if (p->cls[g].ours) {
            n = refd_notice_add(p, RSD_NOTICE_ABOUT_TO_EVICT, RSD_LEVEL_INFO, RSD_MSG_EVICT_OURS, g);
            if (!n) return;
        } else {
            n = refd_notice_add(p, RSD_NOTICE_SWAP, RSD_LEVEL_WARNING, RSD_MSG_EVICT_FOREIGN, g);
            if (!n) return;
            n->detail = RSD_DETAIL_SWAPPED_OUT;
        }
        if (p->cls[g].protection != RSD_PROTECT_CONFIG && r->has_size_vram) {
            n->detail |= RSD_DETAIL_FREED_VRAM_BYTES;
            n->freed_vram_bytes = r->size_vram_bytes;
        }
    }
}

/* W12: a resident's footprint: its GPU bytes if given, else its total bytes. */
static bool refd_res_bytes(const rsd_resident *r, uint64_t *b) {
    if (r->has_size_vram) { *b = r->size_vram_bytes; return true; }
    if (r->has_size) { *b = r->size_bytes; return true; }
    return false;
}

static uint64_t refd_add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* W12: choose victims from tier a, then tier b, each tier largest first (ties keep the
   tier order: ours first, then id), until `slots` instances and `bytes` are freed;
   then spare the picked ones, latest first, that the rest make unneeded. Writes the
   picks in order to out; returns their count, or -1 (nothing written) when even all
   candidates do not free enough. */
static int refd_pick_bytes(const refd_decide_ws *w, const int16_t *a, int na, const int16_t *b, int nb,
                                 int64_t slots, uint64_t bytes, int16_t *out) {
    int16_t c[RSD_MAX_RESIDENTS];
    int n = 0, t, i, j, np = 0;
    int64_t fs = 0;
    uint64_t fb = 0;
    for (t = 0; t < 2; t++) {
        const int16_t *src = t ? b : a;
        int ns = t ? nb : na, first = n;
        for (i = 0; i < ns; i++) { /* stable insertion by footprint, descending */
            int16_t g = src[i];
            j = n++;
            while (j > first && w->gbytes[c[j - 1]] < w->gbytes[g]) {
                c[j] = c[j - 1];
                j--;
            }
            c[j] = g;
        }
    }
    for (i = 0; i < n && (fs < slots || fb < bytes); i++) {
        out[np++] = c[i];
        fs += w->gsize[c[i]];
        fb = refd_add_sat(fb, w->gbytes[c[i]]);
    }
    if (fs < slots || fb < bytes) return -1;
    for (i = np - 2; i >= 0; i--) /* the last pick is needed by construction */
        if (fs - w->gsize[out[i]] >= slots && fb - w->gbytes[out[i]] >= bytes) {
            fs -= w->gsize[out[i]];
            fb -= w->gbytes[out[i]];
            for (j = i; j + 1 < np; j++) out[j] = out[j + 1];
            np--;
        }
    return np;
}

/* W12: the keep does not fit even after evicting every candidate: say so (the plan
   then goes on as without sizes). evictable = bytes the candidates hold. */
static void refd_bytes_short(const rsd_facts *f, const refd_decide_ws *w, rsd_plan *p, uint64_t evictable) {
    rsd_notice *n = refd_notice_add(p, RSD_NOTICE_WILL_NOT_FIT, RSD_LEVEL_WARNING, RSD_MSG_BYTES_SHORT, -1);
    if (!n) return;
    n->detail = RSD_DETAIL_KEEP_BYTES | RSD_DETAIL_FREE_BYTES | RSD_DETAIL_CAPACITY_BYTES;
    n->keep_bytes = f->keep_bytes;
    n->free_bytes = refd_add_sat(w->free_bytes, evictable);
    n->capacity_bytes = f->capacity_bytes;
}

/* W12: mark the byte picks (or note the shortfall). Returns true when it planned. */
static bool refd_evict_bytes(const rsd_facts *f, refd_decide_ws *w, rsd_plan *p, const int16_t *a, int na,
                                   const int16_t *b, int nb, int64_t slots) {
    int16_t picks[RSD_MAX_RESIDENTS];
    int np = refd_pick_bytes(w, a, na, b, nb, slots, w->need_bytes, picks), k;
    bool any_config = false;
    if (np < 0) {
        uint64_t all = 0;
        for (k = 0; k < na; k++) all = refd_add_sat(all, w->gbytes[a[k]]);
        for (k = 0; k < nb; k++) all = refd_add_sat(all, w->gbytes[b[k]]);
        refd_bytes_short(f, w, p, all);
        return false;
    }
    for (k = 0; k < np; k++) {
        refd_mark_evict(w, p, picks[k]);
        any_config = any_config || p->cls[picks[k]].protection == RSD_PROTECT_CONFIG;
    }
    p->decision = np ? RSD_DECISION_LOAD_AFTER_EVICT : RSD_DECISION_LOAD;
    p->reason = !np ? RSD_REASON_FITS_BYTES : any_config ? RSD_REASON_EVICT_CONFIG : RSD_REASON_EVICT_BYTES;
    return true;
}

/* Router strategy with known capacity (R30). */
static void refd_router_known(const rsd_facts *f, refd_decide_ws *w, rsd_plan *p,
                                    bool config_evictable) {
    int64_t needed = (int64_t)f->n_residents + 1 - (int64_t)f->max_instances;
    int64_t freed = 0, avail_unprot = 0, avail_config = 0;
    int k;
    bool any_config = false, by_bytes = w->bytes_known && w->need_bytes > 0;
    rsd_notice *n;
    p->slots_needed = needed > 0 ? (int)needed : 0;
    if (needed <= 0 && by_bytes && /* a free slot, but not the memory (W12) */
        refd_evict_bytes(f, w, p, w->unprot, w->n_unprot, w->config, config_evictable ? w->n_config : 0, 0))
        return;
    if (needed <= 0) { /* R30a */
        p->decision = RSD_DECISION_LOAD;
        p->reason = RSD_REASON_FREE_SLOT;
        n = refd_notice_add(p, RSD_NOTICE_CO_RESIDENT, RSD_LEVEL_INFO, RSD_MSG_LOADING_ALONGSIDE, -1);
        if (n) {
            n->detail = RSD_DETAIL_RESIDENT_COUNT | RSD_DETAIL_MAX_INSTANCES;
            n->resident_count = (uint32_t)f->n_residents + 1;
            n->max_instances = f->max_instances;
        }
        return;
    }
    for (k = 0; k < w->n_unprot; k++) avail_unprot += w->gsize[w->unprot[k]];
    for (k = 0; k < w->n_config; k++) avail_config += w->gsize[w->config[k]];
    if (avail_unprot + (config_evictable ? avail_config : 0) < needed) {
        n = refd_notice_add(p, RSD_NOTICE_WILL_NOT_FIT, RSD_LEVEL_ERROR, RSD_MSG_DECLINE_ALL_PINNED, -1);
        p->decision = RSD_DECISION_DECLINE;
        p->reason = RSD_REASON_DECLINE_ALL_PINNED;
        if (!config_evictable && avail_unprot + avail_config >= needed) { /* R30c */
            p->reason = RSD_REASON_DECLINE_PINNED_KEEP;
            for (k = 0; k < w->n_config && freed + avail_unprot < needed; k++) {
                p->blocked[p->n_blocked++] = w->config[k];
                freed += w->gsize[w->config[k]];
            }
            if (n) {
                n->msg = RSD_MSG_DECLINE_PINNED_KEEP;
                n->config_protected = true;
                n->detail |= RSD_DETAIL_CONFIG_PROTECTED;
                if (p->n_blocked && p->cls[p->blocked[0]].role != RSD_ROLE_NONE) {
                    n->role = (rsd_role)p->cls[p->blocked[0]].role;
                    n->detail |= RSD_DETAIL_ROLE;
                }
            }
        }
        if (n) {
            n->detail |= RSD_DETAIL_RESIDENT_COUNT | RSD_DETAIL_MAX_INSTANCES;
            n->resident_count = (uint32_t)f->n_residents;
            n->max_instances = f->max_instances;
        }
        return;
    }
    if (by_bytes &&
        refd_evict_bytes(f, w, p, w->unprot, w->n_unprot, w->config, config_evictable ? w->n_config : 0, needed))
        return;
    for (k = 0; k < w->n_unprot && freed < needed; k++) {
        refd_mark_evict(w, p, w->unprot[k]);
        freed += w->gsize[w->unprot[k]];
    }
    for (k = 0; config_evictable && k < w->n_config && freed < needed; k++) {
        refd_mark_evict(w, p, w->config[k]);
        freed += w->gsize[w->config[k]];
        any_config = true;
    }
    p->decision = RSD_DECISION_LOAD_AFTER_EVICT;
    p->reason = any_config ? RSD_REASON_EVICT_CONFIG : RSD_REASON_EVICT_UNPROTECTED;
}

static int refd_decide(const rsd_facts *f, rsd_plan *p) {
    refd_decide_ws w;
    int i, j, k, r;
    bool keep_pinned, config_evictable;
    if (!p) return RSD_ERR_ARG;
    memset(p, 0, sizeof *p);
    p->keep_index = -1;
    if (!f) return RSD_ERR_ARG;
    if ((r = refd_check_facts(f)) < 0) return r;
    memset(&w, 0, sizeof w);
    w.n = f->n_residents;
    p->resident_count = (uint32_t)w.n;

    /* Canonical order (model_id, then index): insertion sort, n <= 64. */
    for (i = 0; i < w.n; i++) {
        int16_t x = (int16_t)i;
        j = i;
        while (j > 0 && refd_str_cmp(f->residents[w.order[j - 1]].model_id, f->residents[x].model_id) > 0) {
            w.order[j] = w.order[j - 1];
            j--;
        }
        w.order[j] = x;
    }
    for (i = 0; i < w.n; i++) {
        w.pos[w.order[i]] = (int16_t)i;
        w.root[i] = (int16_t)i;
        for (k = 0; k <= f->residents[i].n_aliases; k++)
            w.hash[i][k] = refd_name_hash(refd_res_name(&f->residents[i], k));
    }
    /* Per-entry protection (R8, R10) and identity groups: entries that share any
       id or alias are one model; the root is the canonical-first member. */
    for (i = 0; i < w.n; i++) {
        const rsd_resident *res = &f->residents[i];
        rsd_role role = RSD_ROLE_NONE;
        w.tag[i] = (uint8_t)(res->pinned || rsd_tags_protect(res->tags, res->n_tags));
        for (k = 0; k <= res->n_aliases; k++)
            if (refd_protected_role(f, refd_res_name(res, k), &role)) {
                w.cfg[i] = 1;
                w.role[i] = (uint8_t)role;
                break;
            }
        for (j = 0; j < i; j++)
            if (refd_share_name_h(&w, f, i, j)) {
                int a = refd_find(&w, i), b = refd_find(&w, j);
                if (a != b) {
                    if (w.pos[a] < w.pos[b]) w.root[b] = (int16_t)a;
                    else w.root[a] = (int16_t)b;
                }
            }
    }
    /* Group aggregates at the representative, walked in canonical order. */
    for (i = 0; i < w.n; i++) p->cls[i].group = (uint8_t)refd_find(&w, i);
    for (k = 0; k < w.n; k++) {
        int e = w.order[k], g = p->cls[e].group;
        rsd_resident_class *c = &p->cls[g];
        w.gsize[g]++;
        if (refd_matches_keep(f, &f->residents[e])) c->is_keep = 1;
        if (f->residents[e].loaded_by_us) c->ours = 1;
        if (w.tag[e]) c->protection = RSD_PROTECT_TAG;
        else if (w.cfg[e] && c->protection == RSD_PROTECT_NONE) c->protection = RSD_PROTECT_CONFIG;
        if (w.cfg[e] && !w.role_set[g]) { /* role of the canonical-first configured member */
            c->role = w.role[e];
            w.role_set[g] = 1;
        }
    }
    for (i = 0; i < w.n; i++) { /* spread group facts to members */
        int g = p->cls[i].group;
        if (g != i) {
            p->cls[i].is_keep = p->cls[g].is_keep;
            p->cls[i].ours = p->cls[g].ours;
            p->cls[i].protection = p->cls[g].protection;
            p->cls[i].role = p->cls[g].role;
        }
        if (p->cls[i].is_keep) {
            p->keep_resident = true;
            if (p->keep_index < 0) p->keep_index = i;
        }
    }
    for (k = 0; k < w.n; k++) {
        int e = w.order[k];
        if (p->cls[e].group == e && !p->cls[e].is_keep) w.others[w.n_others++] = (int16_t)e;
    }
    /* W12: byte accounting, only when everything is sized (else exactly as without) */
    w.bytes_known = f->capacity_bytes > 0 && f->keep_bytes > 0;
    {
        uint64_t used = 0, b = 0;
        for (i = 0; i < w.n && w.bytes_known; i++) {
            if (!refd_res_bytes(&f->residents[i], &b)) w.bytes_known = false;
            w.gbytes[p->cls[i].group] = refd_add_sat(w.gbytes[p->cls[i].group], b);
            used = refd_add_sat(used, b);
        }
        w.free_bytes = f->capacity_bytes > used ? f->capacity_bytes - used : 0;
        w.need_bytes = f->keep_bytes > w.free_bytes ? f->keep_bytes - w.free_bytes : 0;
    }

    /* R21: context stress. */
    if (f->context_length && f->model_max_context && f->context_length > f->model_max_context) {
        rsd_notice *n = refd_notice_add(p, RSD_NOTICE_STRESS, RSD_LEVEL_WARNING, RSD_MSG_CONTEXT_OVER_MAX, -1);
        if (n) {
            n->detail = RSD_DETAIL_REQUESTED_CONTEXT | RSD_DETAIL_MODEL_MAX_CONTEXT;
            n->requested_context = f->context_length;
            n->model_max_context = f->model_max_context;
        }
    }
    /* R22: split stress for every resident, keep included, canonical order. */
    for (k = 0; k < w.n; k++) {
        const rsd_resident *res = &f->residents[w.order[k]];
        if (res->has_size && res->has_size_vram && res->size_bytes > res->size_vram_bytes) {
            rsd_notice *n = refd_notice_add(p, RSD_NOTICE_STRESS, RSD_LEVEL_WARNING, RSD_MSG_SPLIT, w.order[k]);
            if (n) {
                n->detail = RSD_DETAIL_RESIDENT_VRAM_BYTES | RSD_DETAIL_RESIDENT_TOTAL_BYTES;
                n->resident_vram_bytes = res->size_vram_bytes;
                n->resident_total_bytes = res->size_bytes;
            }
        }
    }

    keep_pinned = f->keep_pinned || rsd_tags_protect(f->keep_tags, f->n_keep_tags);
    config_evictable = !keep_pinned; /* R26 */
    if (p->keep_resident) { /* R24 */
        p->decision = RSD_DECISION_ALREADY_RESIDENT;
        p->reason = RSD_REASON_KEEP_RESIDENT;
        if (w.n_others) {
            rsd_notice *n;
            if (f->max_instances && (uint32_t)w.n > f->max_instances) {
                n = refd_notice_add(p, RSD_NOTICE_STRESS, RSD_LEVEL_WARNING, RSD_MSG_OVER_CAPACITY, -1);
                if (n) n->detail = RSD_DETAIL_RESIDENT_COUNT | RSD_DETAIL_MAX_INSTANCES;
            } else {
                n = refd_notice_add(p, RSD_NOTICE_CO_RESIDENT, RSD_LEVEL_INFO, RSD_MSG_SERVES_ALONGSIDE, -1);
                if (n) n->detail = RSD_DETAIL_RESIDENT_COUNT | (f->max_instances ? (uint32_t)RSD_DETAIL_MAX_INSTANCES : 0u);
            }
            if (n) {
                n->resident_count = (uint32_t)w.n;
                n->max_instances = f->max_instances;
            }
        }
    } else {
        w.n_unprot = refd_tier(&w, p, RSD_PROTECT_NONE, w.unprot);  /* R25 */
        w.n_config = refd_tier(&w, p, RSD_PROTECT_CONFIG, w.config);
        switch (f->strategy) {
        case RSD_STRATEGY_JIT: /* R27 */
            for (k = 0; k < w.n_unprot; k++) p->fallback[p->n_fallback++] = w.unprot[k];
            for (k = 0; config_evictable && k < w.n_config; k++) p->fallback[p->n_fallback++] = w.config[k];
            p->decision = RSD_DECISION_LOAD;
            p->reason = RSD_REASON_JIT_LOAD;
            break;
        case RSD_STRATEGY_SCHEDULER: { /* R28 */
            int16_t ours[RSD_MAX_RESIDENTS] = {0}; /* zeroed: gcc -O1 cannot see n_ours bound the reads */
            int n_ours = 0;
            for (k = 0; k < w.n_unprot; k++)
                if (p->cls[w.unprot[k]].ours) ours[n_ours++] = w.unprot[k];
            if (w.bytes_known && refd_evict_bytes(f, &w, p, ours, n_ours, NULL, 0, 0)) {
                if (p->n_evict) p->reason = RSD_REASON_SCHEDULER_RELEASE_OURS; /* the fewest of ours (W12) */
                break;
            }
            for (k = 0; k < n_ours; k++) refd_mark_evict(&w, p, ours[k]);
            p->decision = p->n_evict ? RSD_DECISION_LOAD_AFTER_EVICT : RSD_DECISION_LOAD;
            p->reason = p->n_evict ? RSD_REASON_SCHEDULER_RELEASE_OURS : RSD_REASON_SCHEDULER_LOAD;
            break;
        }
        default: /* router */
            if (w.n == 0) {
                p->decision = RSD_DECISION_LOAD;
                p->reason = RSD_REASON_EMPTY_SERVER;
                if (w.bytes_known && w.need_bytes) refd_bytes_short(f, &w, p, 0); /* too big even alone */
            } else if (f->max_instances == 0) { /* R29, improved (W8): evict one */
                if (w.bytes_known && w.need_bytes && refd_evict_bytes(f, &w, p, w.unprot, w.n_unprot, NULL, 0, 0)) {
                    /* W12: as many as the bytes need (one or more); never a configured one. When
                       the bytes fit, W8's one stays: the router limits by count, not bytes */
                } else if (w.n_unprot) {
                    refd_mark_evict(&w, p, w.unprot[0]);
                    p->decision = RSD_DECISION_LOAD_AFTER_EVICT;
                    p->reason = RSD_REASON_CAPACITY_UNKNOWN_EVICT_ONE;
                } else {
                    p->decision = RSD_DECISION_LOAD;
                    p->reason = RSD_REASON_CAPACITY_UNKNOWN_NONE_EVICTABLE;
                }
            } else {
                refd_router_known(f, &w, p, config_evictable);
            }
            break;
        }
        refd_evict_notices(f, p);
    }

    /* S29: clamp the load context while neighbours stay resident. */
    if (f->context_length &&
        (p->decision == RSD_DECISION_LOAD || p->decision == RSD_DECISION_LOAD_AFTER_EVICT)) {
        int neighbours = 0;
        for (k = 0; k < w.n_others; k++)
            if (!p->cls[w.others[k]].evict) neighbours++;
        p->load_context = rsd_fit_context(f->context_length, neighbours, f->context_ceiling);
        if (p->load_context < f->context_length) {
            rsd_notice *n = refd_notice_add(p, RSD_NOTICE_STRESS, RSD_LEVEL_WARNING, RSD_MSG_CONTEXT_CLAMPED, -1);
            if (n) {
                n->detail = RSD_DETAIL_REQUESTED_CONTEXT | RSD_DETAIL_LOAD_CONTEXT;
                n->requested_context = f->context_length;
                n->load_context = p->load_context;
            }
        }
    }

    p->would = p->decision;
    if (f->optout != RSD_OPTOUT_NONE) { /* R23 + W19: observe never mutates */
        p->decision = RSD_DECISION_OBSERVE;
        p->reason = f->optout == RSD_OPTOUT_TARGET ? RSD_REASON_OBSERVE_TARGET : RSD_REASON_OBSERVE_ENV;
        p->n_evict = 0;
        p->n_fallback = 0;
        for (k = 0; k < p->n_notices; k++) {
            rsd_notice_msg m = p->notices[k].msg;
            if (m != RSD_MSG_CONTEXT_OVER_MAX && m != RSD_MSG_SPLIT && m != RSD_MSG_OVER_CAPACITY &&
                m != RSD_MSG_SERVES_ALONGSIDE)
                p->notices[k].observe_only = true;
        }
    }
    return RSD_OK;
}

/* rsd_notice_format and its appender, as they were (the text half of the oracle). */
/* Bounded appender for rsd_notice_format: counts what it could not write. */
typedef struct refd_sb {
    char *buf;
    size_t cap, len;
} refd_sb;

static void refd_sb_put(refd_sb *b, const char *s, size_t n) {
    size_t i;
    for (i = 0; i < n; i++, b->len++)
        if (b->cap && b->len < b->cap - 1) b->buf[b->len] = s[i];
}
static void refd_sb_c(refd_sb *b, const char *s) { refd_sb_put(b, s, strlen(s)); }
/* ids are escaped for a terminal (rsd_text_escape, tested on its own in test_text) */
static void refd_sb_s(refd_sb *b, rsd_str s) {
    static char esc[4 * 4096 + 1];
    size_t n = rsd_text_escape(s, esc, sizeof esc);
    refd_sb_put(b, esc, n < sizeof esc ? n : sizeof esc - 1);
}
static void refd_sb_q(refd_sb *b, rsd_str s) { refd_sb_c(b, "'"); refd_sb_s(b, s); refd_sb_c(b, "'"); }
static void refd_sb_u(refd_sb *b, uint64_t v) {
    char t[24];
    int n = 0;
    do { t[sizeof t - 1 - n++] = (char)('0' + v % 10); v /= 10; } while (v);
    refd_sb_put(b, t + sizeof t - n, (size_t)n);
}
/* bytes / 1024^3 with one decimal, rounded half up, then " GiB" (R19). */
static void refd_sb_gib(refd_sb *b, uint64_t bytes) {
    const uint64_t gib = (uint64_t)1 << 30;
    uint64_t whole = bytes / gib, rem = bytes % gib;
    uint64_t tenth = (rem * 10 + gib / 2) / gib; /* rem < 2^30, no overflow */
    if (tenth >= 10) { whole++; tenth -= 10; }
    refd_sb_u(b, whole);
    refd_sb_c(b, ".");
    refd_sb_u(b, tenth);
    refd_sb_c(b, " GiB");
}

/* Non-keep groups in canonical order; with_roles adds " (role)"; skip_evicted
   leaves out (would-be) evicted ones. */
static void refd_sb_others(refd_sb *b, const rsd_facts *f, const rsd_plan *p, bool with_roles,
                                 bool skip_evicted, bool quoted) {
    int16_t order[RSD_MAX_RESIDENTS];
    int i, j, n = 0, first = 1;
    for (i = 0; i < f->n_residents && i < RSD_MAX_RESIDENTS; i++) {
        if (p->cls[i].group != i || p->cls[i].is_keep || (skip_evicted && p->cls[i].evict)) continue;
        j = n++;
        while (j > 0 && refd_str_cmp(f->residents[order[j - 1]].model_id, f->residents[i].model_id) > 0) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = (int16_t)i;
    }
    for (i = 0; i < n; i++) {
        const rsd_resident_class *c = &p->cls[order[i]];
        if (!first) refd_sb_c(b, ", ");
        first = 0;
        if (quoted) refd_sb_q(b, f->residents[order[i]].model_id);
        else refd_sb_s(b, f->residents[order[i]].model_id);
        if (with_roles && c->protection == RSD_PROTECT_CONFIG && c->role != RSD_ROLE_NONE) {
            refd_sb_c(b, " (");
            refd_sb_c(b, rsd_role_str(c->role));
            refd_sb_c(b, ")");
        }
    }
}

static int refd_notice_format(const rsd_facts *f, const rsd_plan *p, const rsd_notice *n,
                              char *buf, size_t cap) {
    refd_sb b;
    rsd_str keep, target, subj;
    int k;
    if (!f || !p || !n || (!buf && cap)) return RSD_ERR_ARG;
    if (f->n_residents < 0 || f->n_residents > RSD_MAX_RESIDENTS || (f->n_residents && !f->residents))
        return RSD_ERR_ARG;
    if (n->subject >= f->n_residents || n->subject < -1) return RSD_ERR_ARG;
    b.buf = buf;
    b.cap = cap;
    b.len = 0;
    keep = f->keep;
    target = f->target_id;
    subj = n->subject >= 0 ? f->residents[n->subject].model_id : rsd_str_c("");
    if (n->observe_only) refd_sb_c(&b, "observe-only, nothing done: ");
    switch (n->msg) {
    case RSD_MSG_CONTEXT_OVER_MAX:
        refd_sb_c(&b, "context length "); refd_sb_u(&b, n->requested_context);
        refd_sb_c(&b, " exceeds "); refd_sb_s(&b, keep); refd_sb_c(&b, "'s ");
        refd_sb_u(&b, n->model_max_context); refd_sb_c(&b, "-token limit on "); refd_sb_q(&b, target);
        refd_sb_c(&b, "; lower the context window to avoid a truncated or split load.");
        break;
    case RSD_MSG_SPLIT:
        refd_sb_c(&b, "model "); refd_sb_q(&b, subj); refd_sb_c(&b, " on "); refd_sb_q(&b, target);
        refd_sb_c(&b, " is split across CPU and GPU ("); refd_sb_gib(&b, n->resident_vram_bytes);
        refd_sb_c(&b, " of "); refd_sb_gib(&b, n->resident_total_bytes);
        refd_sb_c(&b, " on GPU); expect slow generation.");
        break;
    case RSD_MSG_OVER_CAPACITY:
        refd_sb_q(&b, target); refd_sb_c(&b, " holds "); refd_sb_u(&b, n->resident_count);
        refd_sb_c(&b, " models ("); refd_sb_others(&b, f, p, true, false, false);
        refd_sb_c(&b, " alongside "); refd_sb_q(&b, keep); refd_sb_c(&b, ") above its ");
        refd_sb_u(&b, n->max_instances);
        refd_sb_c(&b, "-instance capacity; unload one or raise the server's limit.");
        break;
    case RSD_MSG_SERVES_ALONGSIDE:
        refd_sb_q(&b, target); refd_sb_c(&b, " serves "); refd_sb_q(&b, keep);
        refd_sb_c(&b, " alongside "); refd_sb_others(&b, f, p, true, false, false);
        refd_sb_c(&b, ". residency leaves co-resident models loaded; keep the setup only while "
                      "weights and KV caches fit in GPU memory.");
        break;
    case RSD_MSG_LOADING_ALONGSIDE:
        refd_sb_c(&b, "loading "); refd_sb_q(&b, keep); refd_sb_c(&b, " alongside ");
        refd_sb_others(&b, f, p, false, false, false); refd_sb_c(&b, " on "); refd_sb_q(&b, target);
        refd_sb_c(&b, " ("); refd_sb_u(&b, n->resident_count); refd_sb_c(&b, "/");
        refd_sb_u(&b, n->max_instances); refd_sb_c(&b, " instances).");
        break;
    case RSD_MSG_DECLINE_PINNED_KEEP:
        refd_sb_c(&b, "cannot load pinned "); refd_sb_q(&b, keep); refd_sb_c(&b, " on ");
        refd_sb_q(&b, target); refd_sb_c(&b, ": it would evict ");
        for (k = 0; k < p->n_blocked && k < RSD_MAX_RESIDENTS; k++) {
            int g = p->blocked[k];
            if (g < 0 || g >= f->n_residents) continue;
            if (k) refd_sb_c(&b, ", ");
            refd_sb_q(&b, f->residents[g].model_id); refd_sb_c(&b, " (");
            refd_sb_c(&b, rsd_role_phrase(p->cls[g].role)); refd_sb_c(&b, ")");
        }
        refd_sb_c(&b, " that settings still reference, and a pinned model is never evicted, so the "
                      "configured model could not return. Unload one manually, unpin ");
        refd_sb_q(&b, keep); refd_sb_c(&b, " on the server, or raise the server's max instances.");
        break;
    case RSD_MSG_DECLINE_ALL_PINNED:
        refd_sb_c(&b, "cannot load "); refd_sb_q(&b, keep); refd_sb_c(&b, " on "); refd_sb_q(&b, target);
        refd_sb_c(&b, ": all "); refd_sb_u(&b, n->max_instances);
        refd_sb_c(&b, " instance slots hold pinned models ("); refd_sb_others(&b, f, p, false, false, false);
        refd_sb_c(&b, "). Unload one manually or raise the server's max instances.");
        break;
    case RSD_MSG_EVICT_CONFIG:
        refd_sb_c(&b, "evicting "); refd_sb_q(&b, subj); refd_sb_c(&b, " from "); refd_sb_q(&b, target);
        refd_sb_c(&b, " to make room for "); refd_sb_q(&b, keep);
        refd_sb_c(&b, " even though settings still reference it as "); refd_sb_c(&b, rsd_role_phrase(n->role));
        refd_sb_c(&b, ": every slot is taken and no unprotected resident is left. Another profile "
                      "pointed at it will reload it.");
        break;
    case RSD_MSG_EVICT_OURS:
        refd_sb_c(&b, "evicting residency-loaded model "); refd_sb_q(&b, subj); refd_sb_c(&b, " from ");
        refd_sb_q(&b, target); refd_sb_c(&b, " to free a slot for "); refd_sb_q(&b, keep); refd_sb_c(&b, ".");
        break;
    case RSD_MSG_EVICT_FOREIGN:
        refd_sb_c(&b, "swapping resident "); refd_sb_q(&b, subj); refd_sb_c(&b, " for requested ");
        refd_sb_q(&b, keep); refd_sb_c(&b, " on "); refd_sb_q(&b, target);
        refd_sb_c(&b, " (residency did not load it; recorded transition instead of a silent unload; set "
                      "RESIDENCY=observe or mark the target user-managed to forbid swaps).");
        break;
    case RSD_MSG_CONTEXT_CLAMPED:
        refd_sb_c(&b, "loading "); refd_sb_q(&b, keep); refd_sb_c(&b, " alongside ");
        refd_sb_others(&b, f, p, false, true, false); refd_sb_c(&b, ": context clamped ");
        refd_sb_u(&b, n->requested_context); refd_sb_c(&b, " to "); refd_sb_u(&b, n->load_context);
        refd_sb_c(&b, " tokens");
        break;
    case RSD_MSG_BYTES_SHORT:
        refd_sb_q(&b, keep); refd_sb_c(&b, " needs "); refd_sb_gib(&b, n->keep_bytes);
        refd_sb_c(&b, " on "); refd_sb_q(&b, target); refd_sb_c(&b, ", and only ");
        refd_sb_gib(&b, n->free_bytes); refd_sb_c(&b, " of "); refd_sb_gib(&b, n->capacity_bytes);
        refd_sb_c(&b, " can be freed without evicting a protected model; residency evicts no more than "
                      "without sizes, and the load may fail or spill to CPU.");
        break;
    case RSD_MSG_NOT_LOADABLE:
        refd_sb_q(&b, target); refd_sb_c(&b, " does not serve "); refd_sb_q(&b, keep);
        refd_sb_c(&b, "; it lists "); refd_sb_u(&b, n->resident_count);
        refd_sb_c(&b, " model(s). Residency left the target untouched. Fix the wire model id in "
                      "settings, or add the preset to the server.");
        break;
    default:
        refd_sb_c(&b, rsd_notice_kind_str(n->kind));
        break;
    }
    if (cap) buf[b.len < cap ? b.len : cap - 1] = '\0';
    return b.len > 0x7fffffff ? 0x7fffffff : (int)b.len;
}
#endif
