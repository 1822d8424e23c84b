/* rsd_serve_kv.h -- rsd-serve's pure parts of "a swap keeps the conversation": the
   key of a model's saved slots, the names and the sidecar of the files, and the
   readings of llama-server's /slots, /props and save/restore answers. Pure: no I/O,
   no clock, no allocation (rsd-serve.c's "kv cache" section does the files and the
   requests). Not part of the library: everything is `static`, prefixed rsrv_kv_, C99.
   Include rsd_serve.h first.

   FILES (in kv_cache_dir, which is the children's --slot-save-path)
       KEY-SLOT.bin    what llama-server wrote for POST /slots/SLOT?action=save
       KEY-SLOT.meta   the sidecar, written by rsd-serve after the save answered:
                           rsd-kv 1
                           model ID
                           build BUILD_INFO      (the child's /props build_info)
                           tokens N              (the answer's n_saved)
                           bytes B               (its n_written: the .bin's size)
   KEY is 16 hex digits, a 64-bit FNV-1a hash over the model id, the model file's
   path, size, mtime and a hash of its first 64 KiB, ctx, parallel, the global and the
   model's args and the llama_server path (rsrv_kv_key_feed takes them in that order).
   A file is restored only into a child whose key and build are the same, whose slot
   count covers SLOT, and when the .bin has B bytes and the restore answers
   n_restored = N; anything else deletes it. */
#ifndef RSD_SERVE_KV_H_INCLUDED
#define RSD_SERVE_KV_H_INCLUDED

#ifndef RSD_SERVE_H_INCLUDED
#error "include rsd_serve.h before rsd_serve_kv.h"
#endif

enum {
    RSRV_KV_HEAD_BYTES = 65536, /* the model file's first bytes in its key */
    RSRV_KV_BUILD_MAX = 96,     /* build_info kept (with the NUL) */
    RSRV_KV_MAX_SLOTS = 64,     /* child slots saved at most */
    RSRV_KV_NAME_MAX = 40       /* "KEY-SLOT.meta" with the NUL */
};

/* One sidecar. */
typedef struct rsrv_kv_meta {
    char model[RSRV_ID_MAX];
    char build[RSRV_KV_BUILD_MAX];
    int64_t tokens, bytes;
} rsrv_kv_meta;

/* FNV-1a 64 of n bytes, continuing from h (start: 14695981039346656037). */
RSRV_FN uint64_t rsrv_kv_fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    size_t i;
    for (i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Feeds one part of the key (its bytes and a separator, so "ab","c" != "a","bc"). */
RSRV_FN uint64_t rsrv_kv_key_feed(uint64_t h, const void *p, size_t n) {
    unsigned char sep = 0x1f;
    h = rsrv_kv_fnv(h, p, n);
    return rsrv_kv_fnv(h, &sep, 1);
}

/* "KEY-SLOT.bin" / "KEY-SLOT.meta" into out (RSRV_KV_NAME_MAX bytes). */
RSRV_FN void rsrv_kv_name(char *out, uint64_t key, int slot, bool meta) {
    snprintf(out, RSRV_KV_NAME_MAX, "%016llx-%d.%s", (unsigned long long)key, slot, meta ? "meta" : "bin");
}

/* Reads a file name "KEY-SLOT.meta": true with *key and *slot. */
RSRV_FN bool rsrv_kv_parse_name(const char *name, uint64_t *key, int *slot) {
    uint64_t k = 0;
    int i, sl = 0, d = 0;
    for (i = 0; i < 16; i++) {
        char c = name[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0) return false;
        k = k << 4 | (uint64_t)v;
    }
    if (name[16] != '-') return false;
    for (i = 17; name[i] >= '0' && name[i] <= '9' && d < 3; i++, d++) sl = sl * 10 + (name[i] - '0');
    if (!d || sl >= RSRV_KV_MAX_SLOTS || strcmp(name + i, ".meta")) return false;
    *key = k;
    *slot = sl;
    return true;
}

/* A sidecar field: no control byte (a line break, a NUL) in s[0..n). */
RSRV_FN bool rsrv_kv_field_ok(const char *s, size_t n) {
    size_t i;
    for (i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return false;
    return true;
}

/* The sidecar's text for m into out (cap bytes): its length, or -1 when it does not fit
   or a field holds a line break. */
RSRV_FN int rsrv_kv_meta_write(const rsrv_kv_meta *m, char *out, size_t cap) {
    int n;
    if (!rsrv_kv_field_ok(m->model, strlen(m->model)) || !rsrv_kv_field_ok(m->build, strlen(m->build))) return -1;
    n = snprintf(out, cap, "rsd-kv 1\nmodel %s\nbuild %s\ntokens %lld\nbytes %lld\n", m->model, m->build,
                 (long long)m->tokens, (long long)m->bytes);
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

/* Reads a sidecar (text[0..n)): true with *m filled when every line is there and sane
   (tokens and bytes positive, model and build without control bytes). */
RSRV_FN bool rsrv_kv_meta_read(const char *text, size_t n, rsrv_kv_meta *m) {
    size_t i = 0;
    int seen = 0;
    memset(m, 0, sizeof *m);
    while (i < n) {
        size_t j = i, ln;
        const char *line = text + i, *v;
        uint64_t x;
        while (j < n && text[j] != '\n') j++;
        ln = j - i;
        v = (const char *)memchr(line, ' ', ln);
        i = j + 1;
        if (!v) return false;
        if ((size_t)(v - line) == 6 && !memcmp(line, "rsd-kv", 6)) {
            if (ln != 8 || line[7] != '1') return false;
            seen |= 1;
        } else if ((size_t)(v - line) == 5 && !memcmp(line, "model", 5)) {
            if (ln - 6 >= RSRV_ID_MAX || !rsrv_kv_field_ok(v + 1, ln - 6)) return false;
            rsrv_cpy(m->model, sizeof m->model, v + 1, ln - 6);
            seen |= 2;
        } else if ((size_t)(v - line) == 5 && !memcmp(line, "build", 5)) {
            if (ln - 6 >= RSRV_KV_BUILD_MAX || !rsrv_kv_field_ok(v + 1, ln - 6)) return false;
            rsrv_cpy(m->build, sizeof m->build, v + 1, ln - 6);
            seen |= 4;
        } else if ((size_t)(v - line) == 6 && !memcmp(line, "tokens", 6)) {
            if (!rsrv_parse_u64(v + 1, ln - 7, (uint64_t)1 << 40, &x) || !x) return false;
            m->tokens = (int64_t)x;
            seen |= 8;
        } else if ((size_t)(v - line) == 5 && !memcmp(line, "bytes", 5)) {
            if (!rsrv_parse_u64(v + 1, ln - 6, (uint64_t)1 << 50, &x) || !x) return false;
            m->bytes = (int64_t)x;
            seen |= 16;
        } else {
            return false;
        }
    }
    return seen == 31 && m->model[0];
}

/* A GET /slots answer (rsd_router_parse_slots): the ids of the slots that hold a prompt
   ("n_prompt_tokens" > 0) into ids[]. Their count (at most cap), or -1 when it is no array
   of objects or has more than ntoks tokens. */
RSRV_FN int rsrv_kv_cached_slots(const char *body, size_t len, rsd_json_tok *toks, uint32_t ntoks, int *ids,
                                 int cap) {
    rsd_slot sl[RSRV_KV_MAX_SLOTS];
    int i, n = 0, total = rsd_router_parse_slots(body, len, toks, ntoks, sl, RSRV_KV_MAX_SLOTS);
    if (total < 0) return -1;
    for (i = 0; i < total && i < RSRV_KV_MAX_SLOTS; i++)
        if (sl[i].n_prompt_tokens > 0 && sl[i].id < RSRV_KV_MAX_SLOTS && n < cap) ids[n++] = sl[i].id;
    return n;
}

/* One integer member of a JSON object answer (n_saved, n_written, n_restored,
   total_slots): RSD_OK with *out, or <0. */
RSRV_FN int rsrv_kv_member_int(const char *body, size_t len, const char *key, rsd_json_tok *toks, uint32_t ntoks,
                               int64_t *out) {
    rsd_json_doc doc;
    int v;
    if (rsd_json_parse(&doc, body, len, toks, ntoks) < 1 || rsd_json_type_of(&doc, 0) != RSD_JSON_OBJECT)
        return RSD_ERR_JSON;
    v = rsd_json_find(&doc, 0, key);
    if (v < 0) return RSD_ERR_NOT_FOUND;
    return rsd_json_int64(&doc, v, out);
}

/* The build_info of a /props answer into out (cap bytes; "" when it has none). */
RSRV_FN void rsrv_kv_build(const char *body, size_t len, rsd_json_tok *toks, uint32_t ntoks, char *out, size_t cap) {
    rsd_json_doc doc;
    int v;
    size_t n = 0;
    out[0] = 0;
    if (rsd_json_parse(&doc, body, len, toks, ntoks) < 1 || rsd_json_type_of(&doc, 0) != RSD_JSON_OBJECT) return;
    v = rsd_json_find(&doc, 0, "build_info");
    if (v < 0 || rsd_json_str(&doc, v, out, cap, &n) != RSD_OK || !rsrv_kv_field_ok(out, n)) out[0] = 0;
}
#endif
