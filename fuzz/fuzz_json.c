/* libFuzzer target for the JSON tokenizer, accessors and writer.
   Build: make fuzz T=json FUZZ_SECS=60   (clang -fsanitize=fuzzer,address,undefined)
   Invariants checked (abort on violation):
   - the count pass (toks == NULL) returns exactly what the real pass returns, and
     fails at the same offset with the same code;
   - a token array one short gives RSD_ERR_JSON_TOKENS;
   - rsd_json_parse_top keeps the root and its members, and each member expanded (a root
     array: each element from rsd_json_each) has exactly the full parse's tokens;
   - every token range is inside the input, parent < self, next/size/child links agree;
   - TRUNCATED errors point at the end of the input; other errors inside it;
   - a valid container document minus its last byte is TRUNCATED;
   - every string unescapes, and every key is found again by rsd_json_find;
   - the whole document re-serialized with the writer (strings re-escaped from their
     unescaped bytes) parses again to the same token types and the same string bytes;
   - numbers convert without crashing; finite doubles survive writer -> parser. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

/* Writes token i (and its subtree) with the writer; returns the index after it. */
static int emit(const rsd_json_doc *d, int i, rsd_json_writer *w, char *tmp, size_t tmpcap) {
    const rsd_json_tok *t = &d->toks[i];
    rsd_str v = rsd_json_view(d, i);
    size_t n = 0;
    int c;
    switch (t->type) {
    case RSD_JSON_STRING:
        FZ_CHECK(rsd_json_str(d, i, tmp, tmpcap, &n) == RSD_OK);
        if (t->flags & RSD_JSON_F_KEY) {
            if (memchr(tmp, 0, n) == NULL) rsd_json_w_key(w, tmp);
            else rsd_json_w_keyn(w, tmp, n);
            c = rsd_json_child(d, i);
            FZ_CHECK(c == i + 1);
            return emit(d, c, w, tmp, tmpcap);
        }
        rsd_json_w_strn(w, tmp, n);
        return t->next;
    case RSD_JSON_NUMBER:
    case RSD_JSON_BOOL:
    case RSD_JSON_NULL:
        rsd_json_w_raw(w, v.ptr, v.len);
        return t->next;
    case RSD_JSON_ARRAY:
    case RSD_JSON_OBJECT:
        if (t->type == RSD_JSON_ARRAY) rsd_json_w_begin_array(w);
        else rsd_json_w_begin_object(w);
        for (c = rsd_json_child(d, i); c >= 0; c = rsd_json_next(d, c))
            if (emit(d, c, w, tmp, tmpcap) < 0) return -1;
        if (t->type == RSD_JSON_ARRAY) rsd_json_w_end_array(w);
        else rsd_json_w_end_object(w);
        return t->next;
    default:
        FZ_CHECK(0);
    }
    return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *s = (const char *)data;
    rsd_json_doc d, dc, d2;
    rsd_json_tok *toks, *toks2;
    rsd_json_writer w;
    char *tmp, *tmp2, *out;
    size_t tmpcap, outcap, n, n2;
    uint32_t cap;
    int r, rc, i, k, len;

    if (size > 1 << 16) return 0;
    cap = (uint32_t)size + 2;
    toks = (rsd_json_tok *)malloc(cap * sizeof *toks);
    if (size) {
        /* a small depth limit chosen by the first byte: both passes agree on it too */
        rsd_json_desc desc;
        memset(&desc, 0, sizeof desc);
        desc.max_depth = 1u + data[0] % 8u;
        r = rsd_json_parse_ex(&d, s, size, toks, cap, &desc);
        rc = rsd_json_parse_ex(&dc, s, size, NULL, 0, &desc);
        FZ_CHECK(r == rc && (r > 0 || d.err.offset == dc.err.offset));
    }
    r = rsd_json_parse(&d, s, size, toks, cap);
    rc = rsd_json_parse(&dc, s, size, NULL, 0);
    FZ_CHECK(r == rc);
    FZ_CHECK(r != 0 && r != RSD_ERR_JSON_TOKENS);
    if (r < 0) {
        FZ_CHECK(d.err.code == r && dc.err.code == r && d.err.offset == dc.err.offset);
        FZ_CHECK(d.err.offset <= size && d.err.line >= 1 && d.err.col >= 1 && d.err.what);
        if (r == RSD_ERR_TRUNCATED) FZ_CHECK(d.err.offset == size);
        else FZ_CHECK(d.err.offset < size || r != RSD_ERR_JSON);
        if (r == RSD_ERR_JSON || r == RSD_ERR_JSON_DEPTH) {
            /* the error byte is the first one with no valid continuation: the input
               before it is a valid prefix, and the input through it fails the same way */
            size_t off = d.err.offset;
            int rp = rsd_json_parse(&d2, s, off, NULL, 0);
            FZ_CHECK(rp == RSD_ERR_TRUNCATED || rp > 0);
            FZ_CHECK(rsd_json_parse(&d2, s, off + 1, NULL, 0) == r && d2.err.offset == off);
        }
        free(toks);
        return 0;
    }
    FZ_CHECK((uint32_t)r <= size && d.count == (uint32_t)r && dc.count == (uint32_t)r);
    FZ_CHECK(toks[r].type == RSD_JSON_INVALID);
    if (r > 1) FZ_CHECK(rsd_json_parse(&d2, s, size, toks, (uint32_t)r - 1) == RSD_ERR_JSON_TOKENS);
    r = rsd_json_parse(&d, s, size, toks, cap);
    { /* the top level and its members expanded, or a root array's elements one by one,
         give the full parse's tokens (offsets moved by where the value starts) */
        rsd_json_tok *tt = (rsd_json_tok *)malloc(((size_t)r + 2) * sizeof *tt);
        rsd_json_doc top, el;
        int nt = rsd_json_parse_top(&top, s, size, tt, (uint32_t)r + 2), m, j, at = 1;
        size_t pos = 0;
        FZ_CHECK(nt > 0 && nt <= r && tt[0].type == toks[0].type && tt[0].end == toks[0].end);
        for (m = 1; m < nt; m = top.toks[m].next) {
            int full = at, ok, base, x;
            FZ_CHECK(tt[m].type == toks[full].type && tt[m].start == toks[full].start && tt[m].end == toks[full].end);
            if (toks[0].type == RSD_JSON_ARRAY) ok = rsd_json_each(&top, 0, &pos, &el);
            else ok = rsd_json_expand(&top, m + 1 < nt && (tt[m].flags & RSD_JSON_F_KEY) ? m + 1 : m, &el);
            FZ_CHECK(ok >= 0);
            if (toks[0].type == RSD_JSON_OBJECT) full++; /* the key's value */
            base = (int)toks[full].start - (toks[full].type == RSD_JSON_STRING ? 1 : 0);
            FZ_CHECK((int)el.count == toks[full].next - full);
            for (j = 0; j < (int)el.count; j++) {
                x = full + j;
                FZ_CHECK(el.toks[j].type == toks[x].type && el.toks[j].flags == toks[x].flags &&
                         (int)el.toks[j].start + base == (int)toks[x].start && (int)el.toks[j].end + base == (int)toks[x].end &&
                         el.toks[j].size == toks[x].size && el.toks[j].next + full == toks[x].next);
            }
            at = toks[at].next;
            if (toks[0].type == RSD_JSON_OBJECT) m++; /* past the key: m is the value, its next the next key */
        }
        if (toks[0].type == RSD_JSON_ARRAY) FZ_CHECK(rsd_json_each(&top, 0, &pos, &el) == 0);
        free(tt);
    }

    /* structure */
    for (i = 0; i < r; i++) {
        const rsd_json_tok *t = &toks[i];
        int kids = 0, last = -1, c;
        FZ_CHECK(t->type > RSD_JSON_INVALID && t->type < RSD_JSON_TYPE_NUM);
        FZ_CHECK(t->start <= t->end && t->end <= size);
        FZ_CHECK(i == 0 ? t->parent == -1 : (t->parent >= 0 && t->parent < i));
        FZ_CHECK(t->next > i && t->next <= r);
        if (t->parent >= 0) FZ_CHECK(t->next <= toks[t->parent].next);
        for (c = rsd_json_child(&d, i); c >= 0; c = rsd_json_next(&d, c)) {
            FZ_CHECK(toks[c].parent == i);
            kids++;
            last = c;
        }
        FZ_CHECK((uint32_t)kids == t->size);
        FZ_CHECK(kids ? toks[last].next == t->next : t->next == i + 1);
        if (t->flags & RSD_JSON_F_KEY) FZ_CHECK(t->size == 1 && toks[t->parent].type == RSD_JSON_OBJECT);
        if (t->type == RSD_JSON_NUMBER) {
            int64_t iv;
            double dv;
            int ri = rsd_json_int64(&d, i, &iv), rd = rsd_json_double(&d, i, &dv);
            FZ_CHECK(ri == RSD_OK || ri == RSD_ERR_JSON_RANGE || ri == RSD_ERR_JSON_TYPE);
            FZ_CHECK(ri != RSD_ERR_JSON_TYPE || !(t->flags & RSD_JSON_F_INT));
            FZ_CHECK(rd == RSD_OK || rd == RSD_ERR_JSON_RANGE);
            if (rd == RSD_OK) {
                char nb[64];
                rsd_json_tok nt[2];
                rsd_json_doc nd;
                double back = 0;
                rsd_json_w_init(&w, nb, sizeof nb);
                rsd_json_w_double(&w, dv);
                len = rsd_json_w_finish(&w);
                FZ_CHECK(len > 0);
                FZ_CHECK(rsd_json_parse(&nd, nb, (size_t)len, nt, 2) == 1);
                FZ_CHECK(rsd_json_double(&nd, 0, &back) == RSD_OK && memcmp(&back, &dv, sizeof dv) == 0);
            }
            if (ri == RSD_OK) FZ_CHECK(rd == RSD_OK);
        }
    }
    /* a container document cut by one byte is a truncation */
    if (toks[0].type == RSD_JSON_ARRAY || toks[0].type == RSD_JSON_OBJECT) {
        size_t end = toks[0].end;
        FZ_CHECK(rsd_json_parse(&d2, s, end - 1, NULL, 0) == RSD_ERR_TRUNCATED);
    }

    /* strings unescape; keys are found again */
    tmpcap = size + 1;
    tmp = (char *)malloc(tmpcap);
    tmp2 = (char *)malloc(tmpcap);
    for (i = 0; i < r; i++) {
        if (toks[i].type != RSD_JSON_STRING) continue;
        FZ_CHECK(rsd_json_str(&d, i, tmp, tmpcap, &n) == RSD_OK && n <= size);
        if (toks[i].flags & RSD_JSON_F_KEY) {
            if (memchr(tmp, 0, n) == NULL) {
                int f = rsd_json_find(&d, toks[i].parent, tmp);
                FZ_CHECK(f >= 0 && rsd_json_str_eq(&d, f - 1, tmp));
            }
        } else if (memchr(tmp, 0, n) == NULL) {
            FZ_CHECK(rsd_json_str_eq(&d, i, tmp));
        }
    }

    /* re-serialize, reparse, compare */
    outcap = 6 * size + 16;
    out = (char *)malloc(outcap);
    rsd_json_w_init(&w, out, outcap);
    if (emit(&d, 0, &w, tmp, tmpcap) >= 0) {
        len = rsd_json_w_finish(&w);
        FZ_CHECK(len > 0);
        toks2 = (rsd_json_tok *)malloc(cap * sizeof *toks2);
        FZ_CHECK(rsd_json_parse(&d2, out, (size_t)len, toks2, cap) == r);
        for (k = 0; k < r; k++) {
            FZ_CHECK(toks2[k].type == toks[k].type && toks2[k].size == toks[k].size);
            FZ_CHECK(toks2[k].parent == toks[k].parent && toks2[k].next == toks[k].next);
            if (toks[k].type == RSD_JSON_STRING) {
                FZ_CHECK(rsd_json_str(&d, k, tmp, tmpcap, &n) == RSD_OK);
                FZ_CHECK(rsd_json_str(&d2, k, tmp2, tmpcap, &n2) == RSD_OK);
                FZ_CHECK(n == n2 && memcmp(tmp, tmp2, n) == 0);
            } else if (toks[k].type != RSD_JSON_ARRAY && toks[k].type != RSD_JSON_OBJECT) {
                rsd_str a = rsd_json_view(&d, k), b = rsd_json_view(&d2, k);
                FZ_CHECK(rsd_str_eq(a, b));
            }
        }
        free(toks2);
    }
    free(out);
    free(tmp);
    free(tmp2);
    free(toks);
    return 0;
}
