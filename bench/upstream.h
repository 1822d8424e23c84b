/* bench/upstream.h -- upstream's (clio's) llama.cpp residency path as C: a model of its
   decision (residency.ts) and a replay of its router adapter's call sequence over HTTP
   (llamacpp-residency.ts: GET /v1/models, GET /props, [POST /models/unload], POST
   /models/load, GET /v1/models every 500 ms until loaded, the pinned-restore pass, the
   state-file lock), with the same HTTP client as ours. up_ensure(u, model) is one
   ensureLlamaCppResidency call; u->requests counts what it sent. Shared by
   bench/reconcile.c (against rsd-sim) and bench/real.c (against a real llama-server).
   Needs residency_http.h, bench_util.h, <fcntl.h> <sys/stat.h> <unistd.h>. */
#ifndef RSD_BENCH_UPSTREAM_H
#define RSD_BENCH_UPSTREAM_H
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include "bench_util.h"

enum { UP_MODELS = 32 }; /* listing entries kept */

/* ---- upstream's decision (residency.ts), a C model --------------------------------- */
/* Faithful to R21-R33 for the router strategy (and keep-resident), text included: the
   upstream plan carries operator messages built with template literals at decide time.
   Lower bound on upstream: fixed arrays instead of JS arrays/objects/Maps, no GC. */
enum { UP_MAX = 64, UP_NAMES = 6144, UP_MSG = UP_NAMES + 512 };
enum { UP_OBSERVE = 0, UP_RECONCILE, UP_DECLINE };
enum { UP_PROT_NONE = 0, UP_PROT_TAG, UP_PROT_CONFIG };
static const char *const up_role_phrase[] = {"a configured model", "the chat model", "the memory model",
                                             "a worker model", "a target default model"};

typedef struct up_res {
    const char *id;
    const char *aliases[4];
    int naliases;
    const char *tags[8];
    int ntags;
    uint64_t vram, size;
    bool has_vram, has_size;
} up_res;

typedef struct up_prot { const char *id; int role; } up_prot;

typedef struct up_facts {
    const char *target, *keep;
    const up_res *res;
    int n;
    const up_prot *prot;  /* the provider's raw list (re-read every reconcile, R9) */
    int nprot;
    const char *const *clio; /* this process's Clio-loaded registry for the target (R13) */
    int nclio;
    int capacity;         /* 0 = unknown */
    bool keep_tag_protected, managed;
} up_facts;

typedef struct up_class {   /* {...entry, loadedByClio, protection, role} */
    up_res r;
    bool clio;
    int protection, role;
} up_class;

typedef struct up_notice {
    int kind;               /* 1 co-resident 2 swap 3 about-to-evict 4 stress 5 will-not-fit */
    int level;
    int resident_count, max_instances;
    char message[UP_MSG];
} up_notice;

typedef struct up_plan {
    int decision;
    bool keep_resident;
    int evict[UP_MAX], nevict;
    int nnotices;
    up_notice notices[8];   /* the bench's inputs need at most 5 (3 split + 1 + 1) */
    up_class cls[UP_MAX];
} up_plan;

static bool up_tag_protected(const char *const *tags, int n) {
    int i;
    for (i = 0; i < n; i++) if (!strcmp(tags[i], "pinned:true") || !strcmp(tags[i], "role:scout")) return true;
    return false;
}

static bool up_matches(const up_res *r, const char *id) {
    int i;
    if (!strcmp(r->id, id)) return true;
    for (i = 0; i < r->naliases; i++) if (!strcmp(r->aliases[i], id)) return true;
    return false;
}

static up_notice *up_add(up_plan *p, int kind, int level) {
    up_notice *n = &p->notices[p->nnotices < 7 ? p->nnotices++ : 7];
    n->kind = kind;
    n->level = level;
    n->resident_count = n->max_instances = 0;
    n->message[0] = 0;
    return n;
}

/* `names` joined by ", ", each "id (role phrase-less role)" when with_roles and config. */
static size_t up_join(char *out, size_t cap, const up_class *const *v, int n, bool with_roles) {
    static const char *const role_names[] = {"", "chat", "memory", "worker", "target-default"};
    size_t len = 0;
    int i;
    out[0] = 0;
    for (i = 0; i < n && len + 1 < cap; i++) {
        int w = with_roles && v[i]->role ? snprintf(out + len, cap - len, "%s%s (%s)", i ? ", " : "", v[i]->r.id, role_names[v[i]->role])
                                        : snprintf(out + len, cap - len, "%s%s", i ? ", " : "", v[i]->r.id);
        if (w < 0) break;
        len += (size_t)w;
        if (len >= cap) len = cap - 1;
    }
    return len;
}

static void up_decide(const up_facts *f, up_plan *p) {
    const char *pid[UP_MAX];
    int prole[UP_MAX], np = 0, i, j, n_others = 0, n_un = 0, n_cf = 0, ncand;
    const up_class *others[UP_MAX], *tier_un[UP_MAX], *tier_cf[UP_MAX], *cand[2 * UP_MAX];
    int idx_un[UP_MAX], idx_cf[UP_MAX], idx_cand[2 * UP_MAX];
    char names[UP_NAMES];
    bool config_evictable = !f->keep_tag_protected;
    p->decision = UP_RECONCILE;
    p->nevict = 0;
    p->nnotices = 0;
    p->keep_resident = false;
    /* R9: the protected map from the provider's list: trim, skip empty, first role wins */
    for (i = 0; i < f->nprot && np < UP_MAX; i++) {
        const char *id = f->prot[i].id;
        while (*id == ' ') id++;
        if (!*id) continue;
        for (j = 0; j < np; j++) if (!strcmp(pid[j], id)) break;
        if (j < np) { if (!prole[j] && f->prot[i].role) prole[j] = f->prot[i].role; continue; }
        pid[np] = id;
        prole[np++] = f->prot[i].role;
    }
    /* R7-R13: classify */
    for (i = 0; i < f->n; i++) {
        up_class *c = &p->cls[i];
        const up_res *r = &f->res[i];
        int k;
        c->r = *r;
        c->clio = false;
        for (k = 0; k < f->nclio && !c->clio; k++) c->clio = up_matches(r, f->clio[k]);
        c->protection = UP_PROT_NONE;
        c->role = 0;
        for (k = 0; k < np; k++) {
            if (!strcmp(r->id, pid[k])) break;
            for (j = 0; j < r->naliases; j++) if (!strcmp(r->aliases[j], pid[k])) break;
            if (j < r->naliases) break;
        }
        if (k < np) { c->protection = UP_PROT_CONFIG; c->role = prole[k]; }
        if (up_tag_protected(r->tags, r->ntags)) c->protection = UP_PROT_TAG;
    }
    /* R22 split stress, every resident in order */
    for (i = 0; i < f->n; i++) {
        const up_res *r = &f->res[i];
        if (r->has_size && r->has_vram && r->size > r->vram) {
            up_notice *n = up_add(p, 4, 2);
            snprintf(n->message, UP_MSG, "model '%s' on '%s' is split across CPU and GPU (%.1f GiB of %.1f GiB on GPU); expect slow generation.",
                     r->id, f->target, (double)r->vram / 1073741824.0, (double)r->size / 1073741824.0);
        }
    }
    for (i = 0; i < f->n; i++) {
        if (up_matches(&f->res[i], f->keep)) p->keep_resident = true;
        else others[n_others++] = &p->cls[i];
    }
    if (!f->managed) { p->decision = UP_OBSERVE; return; }
    if (p->keep_resident) { /* R24 */
        if (n_others) {
            up_notice *n;
            up_join(names, sizeof names, others, n_others, true);
            if (f->capacity && f->n > f->capacity) {
                n = up_add(p, 4, 2);
                snprintf(n->message, UP_MSG, "'%s' holds %d models (%s alongside '%s') above its %d-instance capacity; unload one or raise the server's limit.",
                         f->target, f->n, names, f->keep, f->capacity);
            } else {
                n = up_add(p, 1, 1);
                snprintf(n->message, UP_MSG, "'%s' serves '%s' alongside %s. Clio leaves co-resident models loaded; keep the setup only while weights and KV caches fit in GPU memory.",
                         f->target, f->keep, names);
            }
            n->resident_count = f->n;
            n->max_instances = f->capacity;
        }
        return;
    }
    /* R25: tiers, Clio-loaded first then foreign, stable */
    for (j = 0; j < 2; j++)
        for (i = 0; i < f->n; i++) {
            const up_class *c = &p->cls[i];
            if (up_matches(&c->r, f->keep) || c->clio != (j == 0)) continue;
            if (c->protection == UP_PROT_NONE) { idx_un[n_un] = i; tier_un[n_un++] = c; }
            else if (c->protection == UP_PROT_CONFIG) { idx_cf[n_cf] = i; tier_cf[n_cf++] = c; }
        }
    if (!f->capacity) { /* R29 */
        for (i = 0; i < n_un; i++) p->evict[p->nevict++] = idx_un[i];
    } else {
        int slots = f->n + 1 - f->capacity;
        if (slots <= 0) { /* R30a */
            if (n_others) {
                up_notice *n = up_add(p, 1, 1);
                up_join(names, sizeof names, others, n_others, false);
                snprintf(n->message, UP_MSG, "loading '%s' alongside %s on '%s' (%d/%d instances).", f->keep, names,
                         f->target, f->n + 1, f->capacity);
                n->resident_count = f->n + 1;
                n->max_instances = f->capacity;
            }
            return;
        }
        ncand = 0;
        for (i = 0; i < n_un; i++) { idx_cand[ncand] = idx_un[i]; cand[ncand++] = tier_un[i]; }
        if (config_evictable)
            for (i = 0; i < n_cf; i++) { idx_cand[ncand] = idx_cf[i]; cand[ncand++] = tier_cf[i]; }
        if (ncand < slots) { /* R30c/R30d */
            up_notice *n = up_add(p, 5, 3);
            up_join(names, sizeof names, others, n_others, false);
            snprintf(n->message, UP_MSG, "cannot load '%s' on '%s': all %d instance slots hold pinned models (%s). Unload one manually or raise the server's max instances.",
                     f->keep, f->target, f->capacity, names);
            p->decision = UP_DECLINE;
            return;
        }
        for (i = 0; i < slots; i++) p->evict[p->nevict++] = idx_cand[i];
        (void)cand;
    }
    for (i = 0; i < p->nevict; i++) { /* R31 */
        const up_class *c = &p->cls[p->evict[i]];
        up_notice *n;
        if (c->protection == UP_PROT_CONFIG) {
            n = up_add(p, 2, 2);
            snprintf(n->message, UP_MSG, "evicting '%s' from '%s' to make room for '%s' even though settings still reference it as %s: every slot is taken and no unprotected resident is left. Another profile pointed at it will reload it.",
                     c->r.id, f->target, f->keep, up_role_phrase[c->role]);
        } else if (c->clio) {
            n = up_add(p, 3, 1);
            snprintf(n->message, UP_MSG, "evicting Clio-loaded model '%s' from '%s' to free a slot for '%s'.", c->r.id,
                     f->target, f->keep);
        } else {
            n = up_add(p, 2, 2);
            snprintf(n->message, UP_MSG, "swapping resident '%s' for requested '%s' on '%s' (Clio did not load it; recorded transition instead of a silent unload; set CLIO_CODER_RESIDENCY=observe or lifecycle: user-managed to forbid swaps).",
                     c->r.id, f->keep, f->target);
        }
    }
}

/* ---- upstream's llama.cpp router adapter, replayed over HTTP ------------------------ */
enum { UP_ST_UNKNOWN = 0, UP_ST_LOADED, UP_ST_LOADING, UP_ST_SLEEPING, UP_ST_UNLOADED, UP_ST_FAILED };
typedef struct up_model { char id[96]; int state; char tags[4][32]; int ntags; } up_model;
typedef struct up_listing { up_model m[UP_MODELS]; int n; } up_listing;

typedef struct up_ctx {
    rsd_http_client *c;
    const char *base;         /* baseUrl ".../v1" */
    char root[80];
    const char *state_dir;
    char clio[16][96];        /* the process's Clio-loaded registry (R13) */
    int nclio;
    uint32_t requests;        /* HTTP requests sent (cross-check with the sim's log) */
    int n_evicted;            /* unloads of the last ensure */
    int n_restored;           /* pinned models the last ensure loaded back (the pinned-restore pass) */
    rsd_json_tok toks[8192];
} up_ctx;

/* A context with its own client for the router at root, baseUrl base (root + "/v1", kept by
   the caller while it lives); NULL when out of memory. up_free ends it. */
static up_ctx *up_new(const char *base, const char *root, const char *state_dir) {
    up_ctx *u = (up_ctx *)calloc(1, sizeof *u);
    if (!u) return NULL;
    if (!(u->c = rsd_http_client_create(NULL))) {
        free(u);
        return NULL;
    }
    u->base = base;
    snprintf(u->root, sizeof u->root, "%s", root);
    u->state_dir = state_dir;
    return u;
}

static void up_free(up_ctx *u) {
    rsd_http_client_destroy(u->c);
    free(u);
}

static bool up_resident_state(int s) { return s == UP_ST_LOADED || s == UP_ST_LOADING || s == UP_ST_SLEEPING; }

/* fetchRouterModels: GET models (probe timeout 1500); non-2xx or transport -> error. */
static int up_fetch_models(up_ctx *u, up_listing *out) {
    char url[128];
    rsd_http_request q;
    rsd_http_event ev;
    rsd_json_doc doc;
    int data, e;
    snprintf(url, sizeof url, "%s/models", u->base);
    memset(&q, 0, sizeof q);
    q.url = url;
    q.total_timeout_ms = 1500;
    u->requests++;
    if (rsd_http_request_sync(u->c, &q, &ev) != RSD_OK || ev.status < 200 || ev.status > 299) return -1;
    out->n = 0;
    if (rsd_json_parse(&doc, ev.body.ptr, ev.body.len, u->toks, (uint32_t)(sizeof u->toks / sizeof u->toks[0])) <= 0) return -1;
    if (rsd_json_type_of(&doc, 0) != RSD_JSON_OBJECT || (data = rsd_json_find(&doc, 0, "data")) < 0 ||
        rsd_json_type_of(&doc, data) != RSD_JSON_ARRAY)
        return 0;
    for (e = rsd_json_child(&doc, data); e >= 0 && out->n < UP_MODELS; e = rsd_json_next(&doc, e)) {
        up_model *m = &out->m[out->n];
        int id, st, tags, t;
        if (rsd_json_type_of(&doc, e) != RSD_JSON_OBJECT || (id = rsd_json_find(&doc, e, "id")) < 0 ||
            rsd_json_type_of(&doc, id) != RSD_JSON_STRING)
            continue;
        rsd_json_str(&doc, id, m->id, sizeof m->id, NULL);
        m->state = UP_ST_UNKNOWN;
        if ((st = rsd_json_find(&doc, e, "status")) >= 0) {
            if (rsd_json_type_of(&doc, st) == RSD_JSON_OBJECT) st = rsd_json_find(&doc, st, "value");
            if (st >= 0) {
                if (rsd_json_str_eq(&doc, st, "loaded")) m->state = UP_ST_LOADED;
                else if (rsd_json_str_eq(&doc, st, "loading")) m->state = UP_ST_LOADING;
                else if (rsd_json_str_eq(&doc, st, "sleeping")) m->state = UP_ST_SLEEPING;
                else if (rsd_json_str_eq(&doc, st, "unloaded")) m->state = UP_ST_UNLOADED;
                else if (rsd_json_str_eq(&doc, st, "failed")) m->state = UP_ST_FAILED;
            }
        }
        m->ntags = 0;
        if ((tags = rsd_json_find(&doc, e, "tags")) >= 0 && rsd_json_type_of(&doc, tags) == RSD_JSON_ARRAY)
            for (t = rsd_json_child(&doc, tags); t >= 0 && m->ntags < 4; t = rsd_json_next(&doc, t))
                if (rsd_json_type_of(&doc, t) == RSD_JSON_STRING) rsd_json_str(&doc, t, m->tags[m->ntags++], 32, NULL);
        out->n++;
    }
    return 0;
}

/* fetchRouterProps: GET props; any failure -> unknown (0). */
static int up_fetch_capacity(up_ctx *u) {
    char url[128];
    rsd_http_request q;
    rsd_http_event ev;
    rsd_json_doc doc;
    int k;
    double v = 0;
    snprintf(url, sizeof url, "%s/props", u->root);
    memset(&q, 0, sizeof q);
    q.url = url;
    q.total_timeout_ms = 1500;
    u->requests++;
    if (rsd_http_request_sync(u->c, &q, &ev) != RSD_OK || ev.status < 200 || ev.status > 299) return 0;
    if (rsd_json_parse(&doc, ev.body.ptr, ev.body.len, u->toks, (uint32_t)(sizeof u->toks / sizeof u->toks[0])) <= 0) return 0;
    if ((k = rsd_json_find(&doc, 0, "max_instances")) < 0 || rsd_json_double(&doc, k, &v) != RSD_OK || !(v > 0)) return 0;
    return (int)v;
}

/* postRouterModel: POST {"model": id}, timeout 120 s; non-2xx -> error. */
static int up_post(up_ctx *u, const char *what, const char *id) {
    char url[128], body[160];
    rsd_http_request q;
    rsd_http_event ev;
    snprintf(url, sizeof url, "%s/models/%s", u->root, what);
    snprintf(body, sizeof body, "{\"model\":\"%s\"}", id);
    json_post(&q, url, body);
    q.total_timeout_ms = 120000;
    u->requests++;
    if (rsd_http_request_sync(u->c, &q, &ev) != RSD_OK || ev.status < 200 || ev.status > 299) return -1;
    return 0;
}

static const up_model *up_find(const up_listing *l, const char *id) {
    int i;
    for (i = 0; i < l->n; i++) if (!strcmp(l->m[i].id, id)) return &l->m[i];
    return NULL;
}

/* waitForLoaded: GET models until loaded/sleeping (failed -> error), sleep(500) between. */
static int up_wait_loaded(up_ctx *u, const char *id) {
    double started = now_us();
    up_listing l;
    while (now_us() - started < 120000e3) {
        const up_model *m;
        if (up_fetch_models(u, &l) < 0) return -1;
        m = up_find(&l, id);
        if (m && (m->state == UP_ST_LOADED || m->state == UP_ST_SLEEPING)) return 0;
        if (m && m->state == UP_ST_FAILED) return -1;
        sleep_ms(500); /* POLL_INTERVAL_MS */
    }
    return -1;
}

static int up_ensure_loaded(up_ctx *u, const char *id, int known) {
    if (known == UP_ST_LOADED || known == UP_ST_SLEEPING) return 0;
    if (known != UP_ST_LOADING && up_post(u, "load", id) < 0) return -1;
    return up_wait_loaded(u, id);
}

/* restoreDisplacedPinned(before = snapshot). */
static int up_restore_pinned(up_ctx *u, const up_listing *before, const char *keep) {
    up_listing cur, fin;
    const char *tags[4];
    int i, t, npinned = 0;
    bool changed = false;
    const up_model *pinned[UP_MODELS];
    for (i = 0; i < before->n; i++) {
        const up_model *m = &before->m[i];
        for (t = 0; t < m->ntags; t++) tags[t] = m->tags[t];
        if (up_resident_state(m->state) && strcmp(m->id, keep) && up_tag_protected(tags, m->ntags)) pinned[npinned++] = m;
    }
    if (!npinned) return 0;
    if (up_fetch_models(u, &cur) < 0) return -1;
    for (i = 0; i < npinned; i++) {
        const up_model *m = up_find(&cur, pinned[i]->id);
        if (m && up_resident_state(m->state)) continue;
        changed = true;
        u->n_restored++;
        if (up_ensure_loaded(u, pinned[i]->id, m ? m->state : UP_ST_UNKNOWN) < 0) return -1;
    }
    if (!changed) return 0;
    if (up_fetch_models(u, &fin) < 0) return -1;
    {
        const up_model *k = up_find(&fin, keep);
        if (!k || !up_resident_state(k->state)) return -1;
    }
    return 0;
}

/* K6 lock: mkdir -p, O_CREAT|O_EXCL lock file with {host, pid, birthToken, at}; release
   reads the record back and unlinks when it still names this pid (K12). */
static void up_birth_token(char *out, size_t cap) {
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY), f;
    ssize_t n;
    char *p;
    snprintf(out, cap, "pid-%d", (int)getpid());
    if (fd < 0) return;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return;
    buf[n] = 0;
    p = strrchr(buf, ')');
    for (f = 2; p && *p && f < 22; p++) if (*p == ' ') f++;
    if (p && f == 22) snprintf(out, cap, "%.*s", (int)strcspn(p, " "), p);
}

static int up_lock(up_ctx *u, const char *key, char *path, size_t cap) {
    char dir[512], rec[512], san[256], tok[64], host[128];
    size_t i, k = 0;
    int fd;
    for (i = 0; key[i] && k + 1 < sizeof san; i++) { /* K3 */
        char ch = key[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
        if (ok) san[k++] = ch;
        else if (!k || san[k - 1] != '_') san[k++] = '_';
    }
    san[k] = 0;
    snprintf(dir, sizeof dir, "%s/residency-locks", u->state_dir);
    (void)mkdir(u->state_dir, 0700);
    (void)mkdir(dir, 0700);
    if ((size_t)snprintf(path, cap, "%s/%s.lock", dir, san) >= cap) return -1;
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) return -1; /* never contended here */
    up_birth_token(tok, sizeof tok);
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
    {
        time_t t = time(NULL);
        struct tm tmv;
        char at[40];
        gmtime_r(&t, &tmv);
        strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%S.000Z", &tmv);
        snprintf(rec, sizeof rec, "{\"host\":\"%s\",\"pid\":%d,\"birthToken\":\"%s\",\"at\":\"%s\"}\n", host, (int)getpid(), tok, at);
    }
    if (write(fd, rec, strlen(rec)) < 0) { close(fd); return -1; }
    close(fd);
    return 0;
}

static void up_unlock(const char *path) {
    char rec[512], want[32];
    int fd = open(path, O_RDONLY);
    ssize_t n;
    if (fd < 0) return;
    n = read(fd, rec, sizeof rec - 1);
    close(fd);
    if (n <= 0) return;
    rec[n] = 0;
    snprintf(want, sizeof want, "\"pid\":%d,", (int)getpid());
    if (strstr(rec, want)) unlink(path);
}

/* ensureLlamaCppResidency -> reconcileResidency, one call (no TTL entry: a first turn). */
static int up_ensure(up_ctx *u, const char *keep) {
    up_listing snap;
    up_res res[UP_MODELS];
    const char *clio[16];
    up_facts f;
    static up_plan plan;
    const up_model *km;
    char key[160], lockpath[700];
    int i, t, rc = 0;
    bool any_state = false, locked = false;
    u->requests = 0;
    u->n_evicted = 0;
    u->n_restored = 0;
    snprintf(key, sizeof key, "llamacpp|%s", u->base);
    /* listResident */
    if (up_fetch_models(u, &snap) < 0) return -1; /* -> observe, uncached */
    for (i = 0; i < snap.n; i++) if (snap.m[i].state != UP_ST_UNKNOWN) any_state = true;
    if (!any_state) return -1;
    memset(&f, 0, sizeof f);
    f.n = 0;
    for (i = 0; i < snap.n; i++) {
        up_res *r = &res[f.n];
        if (!up_resident_state(snap.m[i].state)) continue;
        memset(r, 0, sizeof *r);
        r->id = snap.m[i].id;
        for (t = 0; t < snap.m[i].ntags; t++) r->tags[t] = snap.m[i].tags[t];
        r->ntags = snap.m[i].ntags;
        f.n++;
    }
    /* capacity, keepModelTags */
    f.capacity = up_fetch_capacity(u);
    km = up_find(&snap, keep);
    if (km) {
        const char *kt[4];
        for (t = 0; t < km->ntags; t++) kt[t] = km->tags[t];
        f.keep_tag_protected = up_tag_protected(kt, km->ntags);
    }
    for (i = 0; i < u->nclio; i++) clio[i] = u->clio[i];
    f.clio = clio;
    f.nclio = u->nclio;
    f.target = "bench";
    f.keep = keep;
    f.res = res;
    f.managed = true;
    up_decide(&f, &plan);
    if (plan.decision != UP_RECONCILE) return 1;
    if (plan.nevict && !km) return 1; /* assertLoadable from the snapshot: decline */
    /* mutate, under the lock iff evict non-empty or the keep is not resident (R49) */
    if (plan.nevict || !plan.keep_resident) locked = up_lock(u, key, lockpath, sizeof lockpath) == 0;
    for (i = 0; i < plan.nevict; i++) {
        const char *id = res[plan.evict[i]].id;
        u->n_evicted++;
        if (up_post(u, "unload", id) == 0) { /* forget it in the Clio-loaded registry */
            int k;
            for (k = 0; k < u->nclio; k++)
                if (!strcmp(u->clio[k], id)) { memmove(u->clio[k], u->clio[u->nclio - 1], sizeof u->clio[k]); u->nclio--; break; }
        }
    }
    /* load(keep) */
    {
        int st = km ? km->state : UP_ST_UNKNOWN;
        if (!(km && up_resident_state(st) && st != UP_ST_LOADING)) {
            rc = up_ensure_loaded(u, keep, km ? st : UP_ST_UNKNOWN);
            if (rc == 0) rc = up_restore_pinned(u, &snap, keep);
        }
    }
    if (locked) up_unlock(lockpath);
    if (rc < 0) return -1;
    if (!plan.keep_resident && u->nclio < 16) snprintf(u->clio[u->nclio++], sizeof u->clio[0], "%s", keep);
    return 0;
}

/* The common paths (bench/reconcile.c on rsd-sim, bench/real.c on a real router): the
   router (capacity 2; p tagged pinned:true) starts with `before` resident and the ensure
   asks for `keep`; ours must decide `decision` with n_evict evictions. */
enum { UP_PATHS = 4 };
typedef struct up_path {
    const char *name, *label, *keep;
    const char *before[4];
    rsd_decision decision;   /* what ours must decide */
    int n_evict;
} up_path;

static const up_path up_paths[UP_PATHS] = {
    {"keep", "(a) keep: already resident", "a", {"a", NULL, NULL, NULL}, RSD_DECISION_ALREADY_RESIDENT, 0},
    {"free_slot", "(b) free-slot load beside", "b", {"a", NULL, NULL, NULL}, RSD_DECISION_LOAD, 0},
    {"swap", "(c) full router: swap one", "c", {"a", "b", NULL, NULL}, RSD_DECISION_LOAD_AFTER_EVICT, 1},
    {"swap_pinned", "(c') swap beside a pinned", "c", {"p", "a", NULL, NULL}, RSD_DECISION_LOAD_AFTER_EVICT, 1}};
#endif
