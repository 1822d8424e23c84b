/* rsd_serve_affinity.h -- rsd-serve's pure policies beyond routing: the locked host's
   request gate, session affinity and KV ownership of a child's slots, the id_slot
   rewrite of a proxied body, and the lease request body. Pure: no I/O, no clock, no
   allocation. Not part of the library: everything is `static`, prefixed rsrv_, C99.
   Include rsd_serve.h first.

   LOCKED HOST (lock_models = a, b)
       Only the listed models are served and listed. A name in the list that is no
       configured id or alias is skipped. rsrv_lock_gate(cfg, name, n, &model, msg):
       a request naming a locked model (by id or alias) gets it; one naming none gets
       the first locked model; one naming another model gets 409 "model switching is
       disabled on this host; served models: "a", "b""; when no listed name resolves,
       503 "no models are selected on this locked host". Without lock_models the gate
       resolves the name as usual (0, *model = -1 when unknown).

   SESSION AFFINITY (session_affinity = true on a model)
       A request's session is its body's "prompt_cache_key" (or its X-Session-Id
       header); requests without one are keyless. rsd-serve keeps, per model process,
       which session last owned each of the child's slots (rsrv_aff) and, for every
       request it proxies there, samples the child's GET /slots (rsrv_aff_sample: a row
       is busy while is_processing), then rsrv_aff_choose picks the slot:
         1. the idle slot this session owns (warm: no erase);
         2. else an idle slot nobody has used since the process started (fresh: no
            erase);
         3. else the least recently used idle slot another session (or a keyless
            request) owns (a hand-over); with session_erase = true it is erased first
            (POST /slots/ID?action=erase) and the request is sent once the erase has
            answered.
       A slot is never erased when a request finishes, and never for the session that
       owns it. A keyless request never counts as the owner of a slot, so two keyless
       requests do not share KV either. With no idle slot the request is sent without
       a slot (the child picks). The table is cleared when the model's process changes
       (a new pid). The chosen slot goes into the proxied body as "id_slot" (last
       member, so it wins over one the client sent: llama.cpp keeps the last duplicate).
       Erasing needs llama-server's --slot-save-path (without it the erase answers 501
       and rsd-serve adds the flag itself for models run with the llama-server
       template; an erase that fails is logged and the request goes on).
       session_erase is off by default: the pinning stays and no slot is erased. Measured on
       llama-server b10116 (bench/affinity.c: 8 sessions x 10 turns, 4 slots): the
       server keeps a prompt cache in host memory (--cache-ram, 8 GiB by default) and
       restores a session's prefix into whatever slot it lands on, so pinning alone
       re-processes as many tokens as letting the server pick (ratio 1.00), while
       erasing on every hand-over re-processes about 4 times as many (30684 against
       7588 prompt tokens): turn session_erase on only where sessions must not share a
       slot's KV.

   LEASE BODY
       rsrv_lease_body: {"bytes": N or "6G", "ttl_ms": T, "restore": true|false};
       bytes is required (1..RSD_POOL_MAX_BYTES), ttl_ms 0 or absent = until deleted,
       restore default false. */
#ifndef RSD_SERVE_AFFINITY_H_INCLUDED
#define RSD_SERVE_AFFINITY_H_INCLUDED

#ifndef RSD_SERVE_H_INCLUDED
#error "include rsd_serve.h before rsd_serve_affinity.h"
#endif

enum {
    RSRV_AFF_MAX_SLOTS = 64,     /* child slots tracked (llama-server -np up to this) */
    RSRV_GATE_CONFLICT = 409,
    RSRV_GATE_NONE = 503
};

/* ---- locked host ------------------------------------------------------------------ */
/* Model index of lock_models[k], or -1 when it names no configured model. */
RSRV_FN int rsrv_lock_model(const rsrv_config *c, int k) {
    return rsrv_find(c, c->lock_models[k], strlen(c->lock_models[k]));
}

/* Is model m served (listed, routed)? Every model on a host without lock_models. */
RSRV_FN bool rsrv_lock_allows(const rsrv_config *c, int m) {
    int k;
    if (!c->nlock) return true;
    for (k = 0; k < c->nlock; k++)
        if (rsrv_lock_model(c, k) == m) return true;
    return false;
}

/* The gate: 0 with *model (-1 = unknown name on an unlocked host), or 409 / 503 with
   the message in msg. named = the request gave a model name (name[0..n)). */
RSRV_FN int rsrv_lock_gate(const rsrv_config *c, bool named, const char *name, size_t n, int *model, char *msg,
                           size_t cap) {
    int k, first = -1, m = named ? rsrv_find(c, name, n) : -1;
    size_t o;
    *model = m;
    if (cap) msg[0] = 0;
    if (!c->nlock) return 0;
    for (k = 0; k < c->nlock && first < 0; k++) first = rsrv_lock_model(c, k);
    if (first < 0) {
        snprintf(msg, cap, "no models are selected on this locked host");
        return RSRV_GATE_NONE;
    }
    if (!named) { *model = first; return 0; }
    if (m >= 0 && rsrv_lock_allows(c, m)) return 0;
    *model = -1;
    o = (size_t)snprintf(msg, cap, "model switching is disabled on this host; served models: ");
    for (k = 0; k < c->nlock && o < cap; k++) {
        if (rsrv_lock_model(c, k) < 0) continue;
        o += (size_t)snprintf(msg + o, cap - o, "%s\"%s\"", o > 58 ? ", " : "", c->lock_models[k]);
    }
    return RSRV_GATE_CONFLICT;
}

/* ---- session affinity ------------------------------------------------------------ */
typedef struct rsrv_aff_slot {
    uint64_t owner;   /* session hash of the last request that ran here */
    uint64_t used;    /* logical clock of that request (LRU among owned slots) */
    bool owned;       /* a request ran here since the process started or the last erase */
    bool keyless;     /* ... and it had no session */
    bool held;        /* a request of ours runs here now */
    bool busy;        /* the last sample said is_processing */
} rsrv_aff_slot;

typedef struct rsrv_aff {
    int64_t pid;      /* the process the table is about (0 = none yet) */
    int nslots;       /* from the last sample (0 = not sampled) */
    uint64_t clock;
    bool no_erase;    /* the child refused an erase (logged once) */
    rsrv_aff_slot slot[RSRV_AFF_MAX_SLOTS];
} rsrv_aff;

/* A session key's hash (FNV-1a, 64 bit; never 0). */
RSRV_FN uint64_t rsrv_aff_hash(const char *s, size_t n) {
    uint64_t h = 14695981039346656037ull;
    size_t i;
    for (i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h ? h : 1;
}

/* Forget everything (a new process: its KV is empty). */
RSRV_FN void rsrv_aff_reset(rsrv_aff *a, int64_t pid) {
    memset(a, 0, sizeof *a);
    a->pid = pid;
}

/* Reads a GET /slots answer: an array of rows {"id": N, "is_processing": bool} (or a
   numeric "state", busy when not 0; a row without a numeric id is its index). Returns
   the slot count (rows, at most RSRV_AFF_MAX_SLOTS), or -1 when it is not such an
   array or has more tokens than cap (the table is left as it was). A busy
   llama-server row has about 60 tokens. */
RSRV_FN int rsrv_aff_sample(rsrv_aff *a, const char *body, size_t len, rsd_json_tok *toks, uint32_t cap) {
    rsd_json_doc doc;
    bool busy[RSRV_AFF_MAX_SLOTS];
    int ntok = rsd_json_parse(&doc, body, len, toks, cap), row, k, n = 0;
    if (ntok < 1 || rsd_json_type_of(&doc, 0) != RSD_JSON_ARRAY) return -1;
    memset(busy, 0, sizeof busy);
    for (row = rsd_json_child(&doc, 0); row >= 0; row = rsd_json_next(&doc, row), n++) {
        int id = n, v;
        int64_t x;
        bool b = false;
        if (rsd_json_type_of(&doc, row) != RSD_JSON_OBJECT) return -1;
        v = rsd_json_find(&doc, row, "id");
        if (v >= 0 && rsd_json_int64(&doc, v, &x) == RSD_OK && x >= 0 && x < RSRV_AFF_MAX_SLOTS) id = (int)x;
        v = rsd_json_find(&doc, row, "is_processing");
        if (v < 0 || rsd_json_bool(&doc, v, &b) != RSD_OK) {
            v = rsd_json_find(&doc, row, "state");
            b = v >= 0 && rsd_json_int64(&doc, v, &x) == RSD_OK && x != 0;
        }
        if (id < RSRV_AFF_MAX_SLOTS) busy[id] = b;
    }
    if (n > RSRV_AFF_MAX_SLOTS) n = RSRV_AFF_MAX_SLOTS;
    a->nslots = n;
    for (k = 0; k < RSRV_AFF_MAX_SLOTS; k++) a->slot[k].busy = k < n ? busy[k] : false;
    return n;
}

/* Picks the slot for a request (has_session: its session hash is `session`): the
   index, with *erase set when the slot must be erased first; -1 when no slot is idle.
   Takes nothing: call rsrv_aff_take with the answer. */
RSRV_FN int rsrv_aff_choose(const rsrv_aff *a, bool has_session, uint64_t session, bool *erase) {
    int k, fresh = -1, lru = -1;
    *erase = false;
    for (k = 0; k < a->nslots; k++) {
        const rsrv_aff_slot *sl = &a->slot[k];
        if (sl->held || sl->busy) continue;
        if (sl->owned && has_session && !sl->keyless && sl->owner == session) return k; /* warm */
        if (!sl->owned) {
            if (fresh < 0) fresh = k;
        } else if (lru < 0 || sl->used < a->slot[lru].used) {
            lru = k;
        }
    }
    if (fresh >= 0) return fresh;
    if (lru >= 0) *erase = true;
    return lru;
}

/* The request runs on slot k now (its session becomes the owner). */
RSRV_FN void rsrv_aff_take(rsrv_aff *a, int k, bool has_session, uint64_t session) {
    rsrv_aff_slot *sl;
    if (k < 0 || k >= RSRV_AFF_MAX_SLOTS) return;
    sl = &a->slot[k];
    sl->held = true;
    sl->owned = true;
    sl->keyless = !has_session;
    sl->owner = has_session ? session : 0;
    sl->used = ++a->clock;
}

/* The request on slot k finished (its KV stays: finishing never erases). */
RSRV_FN void rsrv_aff_put(rsrv_aff *a, int k) {
    if (k >= 0 && k < RSRV_AFF_MAX_SLOTS) a->slot[k].held = false;
}

/* ---- the proxied body ------------------------------------------------------------ */
/* The JSON object body s[0..n) with "id_slot": slot added as its last member, into out;
   the new length, or -1 (not an object, or cap too small). */
RSRV_FN int rsrv_body_with_slot(const char *s, size_t n, int slot, char *out, size_t cap) {
    size_t end = n, open = 0, k;
    bool empty = true;
    char add[32];
    int an;
    while (open < n && (s[open] == ' ' || s[open] == '\t' || s[open] == '\r' || s[open] == '\n')) open++;
    while (end > open && (s[end - 1] == ' ' || s[end - 1] == '\t' || s[end - 1] == '\r' || s[end - 1] == '\n')) end--;
    if (open >= n || s[open] != '{' || end < open + 2 || s[end - 1] != '}') return -1;
    for (k = open + 1; k < end - 1; k++)
        if (!(s[k] == ' ' || s[k] == '\t' || s[k] == '\r' || s[k] == '\n')) { empty = false; break; }
    an = snprintf(add, sizeof add, "%s\"id_slot\":%d}", empty ? "" : ",", slot);
    if (an < 0 || (end - 1) + (size_t)an > cap) return -1;
    memcpy(out, s, end - 1);
    memcpy(out + end - 1, add, (size_t)an);
    return (int)(end - 1 + (size_t)an);
}

/* ---- lease body -------------------------------------------------------------------- */
/* {"bytes": N or "SIZE", "ttl_ms": T, "restore": B} into d; false with err set. */
RSRV_FN bool rsrv_lease_body(const char *s, size_t n, rsd_pool_lease_desc *d, char *err, size_t ecap) {
    rsd_json_tok toks[64];
    rsd_json_doc doc;
    int v;
    int64_t x;
    memset(d, 0, sizeof *d);
    if (rsd_json_parse(&doc, s, n, toks, 64) < 1 || rsd_json_type_of(&doc, 0) != RSD_JSON_OBJECT) {
        snprintf(err, ecap, "the body must be a JSON object {\"bytes\": N, \"ttl_ms\": T, \"restore\": bool}");
        return false;
    }
    v = rsd_json_find(&doc, 0, "bytes");
    if (v >= 0 && rsd_json_type_of(&doc, v) == RSD_JSON_STRING) {
        char b[32];
        size_t bl = 0;
        if (rsd_json_str(&doc, v, b, sizeof b, &bl) != RSD_OK || !rsrv_parse_size(b, bl, &d->bytes)) d->bytes = 0;
    } else if (v >= 0 && rsd_json_int64(&doc, v, &x) == RSD_OK && x > 0) {
        d->bytes = (uint64_t)x;
    }
    if (!d->bytes || d->bytes > RSD_POOL_MAX_BYTES) {
        snprintf(err, ecap, "\"bytes\" must be a positive number of bytes (or a size such as \"6G\")");
        return false;
    }
    v = rsd_json_find(&doc, 0, "ttl_ms");
    if (v >= 0 && rsd_json_type_of(&doc, v) != RSD_JSON_NULL) {
        if (rsd_json_int64(&doc, v, &x) != RSD_OK || x < 0 || x > 0xFFFFFFFEll) {
            snprintf(err, ecap, "\"ttl_ms\" must be a number of milliseconds (0 = until deleted)");
            return false;
        }
        d->ttl_ms = (uint32_t)x;
    }
    v = rsd_json_find(&doc, 0, "restore");
    if (v >= 0 && rsd_json_type_of(&doc, v) != RSD_JSON_NULL && rsd_json_bool(&doc, v, &d->restore) != RSD_OK) {
        snprintf(err, ecap, "\"restore\" must be true or false");
        return false;
    }
    return true;
}

#endif /* RSD_SERVE_AFFINITY_H_INCLUDED */
