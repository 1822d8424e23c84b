/* tiny_gguf.h -- tiny random-weight llama GGUF v3 files for the real-server tests, so
   they need nothing but a C compiler (the same model shape as
   ../shared/tools/make_tiny_gguf.py, other random values), and models of any llama
   shape for the memory-estimate tests.

   Default model: architecture llama, 1 block, n_embd 64, 4 heads (head dim 16), n_ff
   128, all F32, tied output (no output.weight). Vocab: SPM ("llama"): <unk> <s> </s>
   (control), the 256 byte tokens <0x00>..<0xFF>, then a few normal pieces (and, in a
   shape, "x<N>" pieces up to its vocab); a plain chat template. About 240 KB;
   llama-server loads one in milliseconds and answers chat with garbage.

   No byte token <0x80>..<0xFF> can be sampled (a lone one is invalid UTF-8, and
   llama-server answers such a completion with 500): their embedding (and output) rows
   are zero, so their logit is exactly 0, and every other row comes in a pair with its
   negation (row 2k+1 = -row 2k among the other tokens), so at every step at least
   half of the other tokens (80 of the default 161) have a logit above 0. The server's
   default sampler keeps the top 40 (top_k) before anything else can widen the choice,
   so a zero logit never reaches the draw, whatever the temperature.

       tiny_gguf_write(path, "tiny-a", seed, ctx, 0)   a model that loads
       tiny_gguf_write(path, "broken", seed, ctx, 1)   a valid header whose tensor data
                                                        stops half-way: the load fails
                                                        ("data is not within the file
                                                        bounds")
       tiny_gguf_write_set(dir)                         tiny-a..tiny-e.gguf (ctx 2048) and
                                                        broken.gguf into an existing dir
       tiny_gguf_write_shape(path, &shape, seed)        any llama shape (tg_shape: layers,
                                                        embd, heads, KV heads, ff, vocab,
                                                        weight type f32/f16/q8_0/q4_0,
                                                        tied or not); the weights are
                                                        streamed to the file, so a 0.5B
                                                        shape needs no more memory than
                                                        its header
   Returns 0, or -1 (errno set by stdio; EINVAL for a shape it cannot write). Needs
   <stdio.h> <stdint.h> <string.h> <stdlib.h>. The files are the same bytes on every
   host (GGUF is little-endian; a big-endian host writes them so too). */
#ifndef RSD_TESTS_TINY_GGUF_H
#define RSD_TESTS_TINY_GGUF_H
#include <errno.h>

enum { TG_EMBD = 64, TG_HEAD = 4, TG_FF = 128, TG_ALIGN = 32, TG_NPIECES = 30 };
enum { TG_T_UINT32 = 4, TG_T_INT32 = 5, TG_T_FLOAT32 = 6, TG_T_BOOL = 7, TG_T_STRING = 8,
       TG_T_ARRAY = 9 };

static const char *const tg_pieces[TG_NPIECES] = {
    "\xe2\x96\x81", "\xe2\x96\x81the", "\xe2\x96\x81" "a", "\xe2\x96\x81hello",
    "\xe2\x96\x81world", "\xe2\x96\x81is", "\xe2\x96\x81of", "\xe2\x96\x81" "and", "e", "t", "a",
    "o", "i", "n", "s", "r", "h", "l", "d", "u", "\xe2\x96\x81I", "\xe2\x96\x81you", "ing", "er",
    "\xe2\x96\x81to", "\xe2\x96\x81in", "!", ".", ",", "?"};

/* A growable byte buffer; tg_buf.bad sticks once an allocation fails. */
typedef struct tg_buf { unsigned char *p; size_t len, cap; int bad; } tg_buf;

static void tg_put(tg_buf *b, const void *src, size_t n) {
    if (b->bad) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        unsigned char *np;
        while (cap < b->len + n) cap *= 2;
        np = (unsigned char *)realloc(b->p, cap);
        if (!np) { b->bad = 1; return; }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}
/* GGUF is little-endian: integers go out byte by byte, whatever the host's order. */
static void tg_le(tg_buf *b, uint64_t v, size_t n) {
    unsigned char le[8];
    size_t i;
    for (i = 0; i < n; i++) le[i] = (unsigned char)(v >> (8 * i));
    tg_put(b, le, n);
}
static void tg_u32(tg_buf *b, uint32_t v) { tg_le(b, v, 4); }
static void tg_u64(tg_buf *b, uint64_t v) { tg_le(b, v, 8); }
static void tg_f32(tg_buf *b, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    tg_le(b, u, 4);
}
static void tg_str(tg_buf *b, const char *s) { tg_u64(b, strlen(s)); tg_put(b, s, strlen(s)); }
static void tg_pad(tg_buf *b) {
    static const unsigned char zero[TG_ALIGN] = {0};
    tg_put(b, zero, (TG_ALIGN - b->len % TG_ALIGN) % TG_ALIGN);
}
static void tg_kv_str(tg_buf *b, const char *k, const char *v) { tg_str(b, k); tg_u32(b, TG_T_STRING); tg_str(b, v); }
static void tg_kv_u32(tg_buf *b, const char *k, uint32_t v) { tg_str(b, k); tg_u32(b, TG_T_UINT32); tg_u32(b, v); }
static void tg_kv_f32(tg_buf *b, const char *k, float v) { tg_str(b, k); tg_u32(b, TG_T_FLOAT32); tg_f32(b, v); }
static void tg_kv_bool(tg_buf *b, const char *k, int v) {
    unsigned char c = (unsigned char)(v != 0);
    tg_str(b, k); tg_u32(b, TG_T_BOOL); tg_put(b, &c, 1);
}
static void tg_arr_head(tg_buf *b, const char *k, uint32_t etype, uint64_t n) {
    tg_str(b, k); tg_u32(b, TG_T_ARRAY); tg_u32(b, etype); tg_u64(b, n);
}

/* xorshift64*: uniform in [-scale, scale]; the values only have to be finite. */
static float tg_rand(uint64_t *s, float scale) {
    uint64_t x = *s;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *s = x;
    return scale * (2.0f * (float)((x * 2685821657736338717ull) >> 40) / 16777216.0f - 1.0f);
}

/* ggml types the writer knows (ggml.h's numbers) */
enum { TG_F32 = 0, TG_F16 = 1, TG_Q4_0 = 2, TG_Q8_0 = 8 };

typedef struct tg_shape {
    const char *name;            /* general.name */
    uint32_t layers, embd, heads, heads_kv, ff;
    uint32_t vocab;              /* 0: 3 + 256 + TG_NPIECES; more: "x<N>" pieces fill it */
    uint32_t wtype;              /* TG_F32, TG_F16, TG_Q8_0 or TG_Q4_0: every 2-D weight */
    uint32_t ctx;                /* llama.context_length */
    int untied;                  /* 1: an output.weight of its own */
    int broken;                  /* 1: the data stops half-way */
} tg_shape;

/* f32 -> f16 bits (round to nearest; the values here are small normals or 0) */
static uint16_t tg_half(float f) {
    uint32_t u, e, m;
    memcpy(&u, &f, 4);
    e = (u >> 23) & 0xff;
    m = u & 0x7fffff;
    if (e < 103) return (uint16_t)((u >> 16) & 0x8000); /* too small: a signed zero */
    if (e < 113) return (uint16_t)(((u >> 16) & 0x8000) | ((m | 0x800000) >> (126 - e))); /* subnormal */
    return (uint16_t)(((u >> 16) & 0x8000) | ((e - 112) << 10) | ((m + 0x1000) >> 13));
}

/* Bytes of a row of n elements of type t (n a multiple of 32 for the quantized ones). */
static uint64_t tg_row_bytes(uint32_t t, uint64_t n) {
    return t == TG_F32 ? n * 4 : t == TG_F16 ? n * 2 : t == TG_Q8_0 ? n / 32 * 34 : n / 32 * 18;
}

/* One row of n random values in [-scale, scale] of type t into out (fill: every value
   fill instead, f32 only; zero: all zero). */
static void tg_row(unsigned char *out, uint32_t t, uint64_t n, uint64_t *rs, float scale, float fill, int zero) {
    uint64_t i, j;
    if (zero) { memset(out, 0, (size_t)tg_row_bytes(t, n)); return; }
    if (t == TG_F32 || t == TG_F16) {
        for (i = 0; i < n; i++) {
            float v = scale > 0 ? tg_rand(rs, scale) : fill;
            uint32_t u;
            if (t == TG_F32) { memcpy(&u, &v, 4); out[4 * i] = (unsigned char)u; out[4 * i + 1] = (unsigned char)(u >> 8);
                               out[4 * i + 2] = (unsigned char)(u >> 16); out[4 * i + 3] = (unsigned char)(u >> 24); }
            else { uint16_t h = tg_half(v); out[2 * i] = (unsigned char)h; out[2 * i + 1] = (unsigned char)(h >> 8); }
        }
        return;
    }
    for (i = 0; i < n / 32; i++) { /* a block: f16 scale, then the quants */
        unsigned char *b = out + i * (t == TG_Q8_0 ? 34 : 18);
        uint16_t d = tg_half(t == TG_Q8_0 ? scale / 127.0f : scale / 7.0f);
        b[0] = (unsigned char)d;
        b[1] = (unsigned char)(d >> 8);
        for (j = 0; j < (t == TG_Q8_0 ? 32u : 16u); j++) {
            float r = tg_rand(rs, 1.0f);
            if (t == TG_Q8_0) b[2 + j] = (unsigned char)(int8_t)(r * 127.0f); /* -127..127 */
            else b[2 + j] = (unsigned char)((1 + (int)((r + 1.0f) * 7.0f)) | ((1 + (int)((1.0f - r) * 7.0f)) << 4)); /* 1..15 each */
        }
    }
}

/* The negation of a row of type t written by tg_row, in place. */
static void tg_row_negate(unsigned char *row, uint32_t t, uint64_t n) {
    uint64_t i, j;
    if (t == TG_F32) { for (i = 0; i < n; i++) row[4 * i + 3] ^= 0x80; return; }
    if (t == TG_F16) { for (i = 0; i < n; i++) row[2 * i + 1] ^= 0x80; return; }
    for (i = 0; i < n / 32; i++) {
        unsigned char *b = row + i * (t == TG_Q8_0 ? 34 : 18);
        for (j = 0; j < (t == TG_Q8_0 ? 32u : 16u); j++)
            if (t == TG_Q8_0) b[2 + j] = (unsigned char)(-(int8_t)b[2 + j]);
            else b[2 + j] = (unsigned char)((16 - (b[2 + j] & 15)) | ((16 - (b[2 + j] >> 4)) << 4)); /* (q-8) -> (8-q) */
    }
}

/* A token row: zero for the byte tokens <0x80>..<0xFF>, else paired with its negation. */
static int tg_tok_zero(uint64_t tok) { return tok >= 3 + 0x80 && tok < 3 + 0x100; }
/* the index of tok among the tokens that are not zero */
static uint64_t tg_tok_rank(uint64_t tok) { return tok < 3 + 0x80 ? tok : tok - 0x80; }

typedef struct tg_tensor { char name[48]; uint32_t nd, type; uint64_t ne[2]; float fill, scale; int vocab_rows; } tg_tensor;

/* The shape of a real 0.5B-parameter model (24 layers, n_embd 896, 14 heads, 2 KV heads,
   n_ff 4864, vocab 151,936, training context 32768), q8_0 weights, named name. */
static inline void tg_shape_0p5b(tg_shape *sh, const char *name) {
    memset(sh, 0, sizeof *sh);
    sh->name = name;
    sh->layers = 24;
    sh->embd = 896;
    sh->heads = 14;
    sh->heads_kv = 2;
    sh->ff = 4864;
    sh->vocab = 151936;
    sh->wtype = TG_Q8_0;
    sh->ctx = 32768;
}

static int tiny_gguf_write_shape(const char *path, const tg_shape *sh, uint64_t seed) {
    enum { MAXT = 3 + 9 * 64 };
    tg_tensor *t;
    tg_buf head = {0, 0, 0, 0};
    char nm[64];
    uint64_t off = 0, rs = seed * 0x9E3779B97F4A7C15ull + 1, nv, i, r, total = 0, keep, written = 0;
    uint32_t nt = 0, hd, kvd, l;
    unsigned char *row = NULL, *prev = NULL;
    size_t rowcap = 0;
    int rc = -1;
    FILE *f = NULL;
    nv = sh->vocab ? sh->vocab : 3 + 256 + TG_NPIECES;
    if (sh->layers == 0 || sh->layers > 64 || !sh->heads || !sh->heads_kv || sh->embd % sh->heads || sh->heads % sh->heads_kv ||
        nv < 3 + 256 + TG_NPIECES || (sh->wtype != TG_F32 && sh->wtype != TG_F16 && sh->wtype != TG_Q8_0 && sh->wtype != TG_Q4_0) ||
        ((sh->wtype == TG_Q8_0 || sh->wtype == TG_Q4_0) && (sh->embd % 32 || sh->ff % 32))) {
        errno = EINVAL;
        return -1;
    }
    t = (tg_tensor *)calloc(MAXT, sizeof *t);
    if (!t) return -1;
    hd = sh->embd / sh->heads;
    kvd = hd * sh->heads_kv;
#define TG_T(nd_, a_, b_, ty_, fill_, scale_, vr_) \
    (t[nt].nd = (nd_), t[nt].ne[0] = (a_), t[nt].ne[1] = (b_), t[nt].type = (ty_), \
     t[nt].fill = (fill_), t[nt].scale = (scale_), t[nt].vocab_rows = (vr_), nt++)
    strcpy(t[nt].name, "token_embd.weight"); TG_T(2, sh->embd, nv, sh->wtype, 0, 0.5f, 1);
    strcpy(t[nt].name, "output_norm.weight"); TG_T(1, sh->embd, 1, TG_F32, 1, 0, 0);
    if (sh->untied) { strcpy(t[nt].name, "output.weight"); TG_T(2, sh->embd, nv, sh->wtype, 0, 0.5f, 1); }
    for (l = 0; l < sh->layers; l++) {
#define TG_L(suf) (snprintf(t[nt].name, sizeof t[nt].name, "blk.%u." suf, (unsigned)l))
        TG_L("attn_norm.weight"); TG_T(1, sh->embd, 1, TG_F32, 1, 0, 0);
        TG_L("attn_q.weight"); TG_T(2, sh->embd, sh->embd, sh->wtype, 0, 0.08f, 0);
        TG_L("attn_k.weight"); TG_T(2, sh->embd, kvd, sh->wtype, 0, 0.08f, 0);
        TG_L("attn_v.weight"); TG_T(2, sh->embd, kvd, sh->wtype, 0, 0.08f, 0);
        TG_L("attn_output.weight"); TG_T(2, sh->embd, sh->embd, sh->wtype, 0, 0.08f, 0);
        TG_L("ffn_norm.weight"); TG_T(1, sh->embd, 1, TG_F32, 1, 0, 0);
        TG_L("ffn_gate.weight"); TG_T(2, sh->embd, sh->ff, sh->wtype, 0, 0.08f, 0);
        TG_L("ffn_up.weight"); TG_T(2, sh->embd, sh->ff, sh->wtype, 0, 0.08f, 0);
        TG_L("ffn_down.weight"); TG_T(2, sh->ff, sh->embd, sh->wtype, 0, 0.08f, 0);
#undef TG_L
    }
#undef TG_T

    tg_put(&head, "GGUF", 4);
    tg_u32(&head, 3);
    tg_u64(&head, (uint64_t)nt);
    tg_u64(&head, 24); /* key-value pairs below */
    tg_kv_str(&head, "general.architecture", "llama");
    tg_kv_str(&head, "general.name", sh->name);
    tg_kv_u32(&head, "general.file_type", sh->wtype == TG_F32 ? 0 : sh->wtype == TG_F16 ? 1 : sh->wtype == TG_Q4_0 ? 2 : 7);
    tg_kv_u32(&head, "general.alignment", TG_ALIGN);
    tg_kv_u32(&head, "llama.context_length", sh->ctx);
    tg_kv_u32(&head, "llama.embedding_length", sh->embd);
    tg_kv_u32(&head, "llama.block_count", sh->layers);
    tg_kv_u32(&head, "llama.feed_forward_length", sh->ff);
    tg_kv_u32(&head, "llama.attention.head_count", sh->heads);
    tg_kv_u32(&head, "llama.attention.head_count_kv", sh->heads_kv);
    tg_kv_f32(&head, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    tg_kv_u32(&head, "llama.rope.dimension_count", hd);
    tg_kv_f32(&head, "llama.rope.freq_base", 10000.0f);
    tg_kv_u32(&head, "llama.vocab_size", (uint32_t)nv);
    tg_kv_str(&head, "tokenizer.ggml.model", "llama");
    tg_arr_head(&head, "tokenizer.ggml.tokens", TG_T_STRING, nv);
    tg_str(&head, "<unk>");
    tg_str(&head, "<s>");
    tg_str(&head, "</s>");
    for (i = 0; i < 256; i++) { snprintf(nm, sizeof nm, "<0x%02X>", (unsigned)i); tg_str(&head, nm); }
    for (i = 0; i < TG_NPIECES; i++) tg_str(&head, tg_pieces[i]);
    for (i = 3 + 256 + TG_NPIECES; i < nv; i++) { snprintf(nm, sizeof nm, "x%u", (unsigned)i); tg_str(&head, nm); }
    tg_arr_head(&head, "tokenizer.ggml.scores", TG_T_FLOAT32, nv);
    for (i = 0; i < 3 + 256; i++) tg_f32(&head, 0.0f);
    for (i = 3 + 256; i < nv; i++) tg_f32(&head, -1.0f - (float)(i - 3 - 256) * 0.01f); /* SPM prefers higher */
    tg_arr_head(&head, "tokenizer.ggml.token_type", TG_T_INT32, nv);
    tg_u32(&head, 2); /* unknown */
    tg_u32(&head, 3); /* control */
    tg_u32(&head, 3);
    for (i = 0; i < 256; i++) tg_u32(&head, 6); /* byte */
    for (i = 3 + 256; i < nv; i++) tg_u32(&head, 1); /* normal */
    tg_kv_u32(&head, "tokenizer.ggml.bos_token_id", 1);
    tg_kv_u32(&head, "tokenizer.ggml.eos_token_id", 2);
    tg_kv_u32(&head, "tokenizer.ggml.unknown_token_id", 0);
    tg_kv_bool(&head, "tokenizer.ggml.add_bos_token", 1);
    tg_kv_bool(&head, "tokenizer.ggml.add_eos_token", 0);
    tg_kv_str(&head, "tokenizer.chat_template",
              "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n"
              "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}");

    for (i = 0; i < nt; i++) {
        uint64_t b = tg_row_bytes(t[i].type, t[i].ne[0]) * t[i].ne[1];
        tg_str(&head, t[i].name);
        tg_u32(&head, t[i].nd);
        for (r = 0; r < t[i].nd; r++) tg_u64(&head, t[i].ne[r]);
        tg_u32(&head, t[i].type);
        tg_u64(&head, off);
        off += b + (TG_ALIGN - b % TG_ALIGN) % TG_ALIGN;
    }
    tg_pad(&head);
    total = off;
    keep = sh->broken ? total / 2 : total;
    if (head.bad || (f = fopen(path, "wb")) == NULL || fwrite(head.p, 1, head.len, f) != head.len) goto done;
    /* the data, streamed a row at a time */
    for (i = 0; i < nt; i++) {
        uint64_t rb = tg_row_bytes(t[i].type, t[i].ne[0]), pad = (TG_ALIGN - rb * t[i].ne[1] % TG_ALIGN) % TG_ALIGN;
        static const unsigned char zero[TG_ALIGN] = {0};
        if (rb > rowcap) {
            free(row);
            free(prev);
            rowcap = (size_t)rb;
            row = (unsigned char *)malloc(rowcap);
            prev = (unsigned char *)malloc(rowcap);
            if (!row || !prev) goto done;
        }
        for (r = 0; r < t[i].ne[1]; r++) {
            size_t n = (size_t)rb;
            if (t[i].vocab_rows && tg_tok_zero(r)) {
                tg_row(row, t[i].type, t[i].ne[0], &rs, 0, 0, 1);
            } else if (t[i].vocab_rows && tg_tok_rank(r) % 2 == 1) { /* the pair's second: the negation */
                memcpy(row, prev, n);
                tg_row_negate(row, t[i].type, t[i].ne[0]);
            } else {
                tg_row(row, t[i].type, t[i].ne[0], &rs, t[i].scale, t[i].fill, 0);
                memcpy(prev, row, n);
            }
            if (written + n > keep) n = (size_t)(keep - written);
            if (n && fwrite(row, 1, n, f) != n) goto done;
            written += n;
        }
        if (written + pad > keep) pad = keep - written;
        if (pad && fwrite(zero, 1, (size_t)pad, f) != pad) goto done;
        written += pad;
    }
    rc = 0;
done:
    if (f && fclose(f) != 0) rc = -1;
    free(head.p);
    free(row);
    free(prev);
    free(t);
    return rc;
}

/* The default shape (1 block, n_embd 64, 4 heads, n_ff 128, F32, tied). */
static int tiny_gguf_write(const char *path, const char *name, uint64_t seed, uint32_t ctx, int broken) {
    tg_shape sh;
    memset(&sh, 0, sizeof sh);
    sh.name = name;
    sh.layers = 1;
    sh.embd = TG_EMBD;
    sh.heads = TG_HEAD;
    sh.heads_kv = TG_HEAD;
    sh.ff = TG_FF;
    sh.wtype = TG_F32;
    sh.ctx = ctx;
    sh.broken = broken;
    return tiny_gguf_write_shape(path, &sh, seed);
}

/* The standard set: tiny-a..tiny-e.gguf (ctx 2048, each its own seed) and broken.gguf,
   written into the existing directory dir. 0, or -1. */
static int tiny_gguf_write_set(const char *dir) {
    static const char *const names[] = {"tiny-a", "tiny-b", "tiny-c", "tiny-d", "tiny-e", "broken"};
    char path[1200];
    size_t i;
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        if ((size_t)snprintf(path, sizeof path, "%s/%s.gguf", dir, names[i]) >= sizeof path) return -1;
        if (tiny_gguf_write(path, names[i], 1000 + i * 7919, 2048, i == 5) != 0) return -1;
    }
    return 0;
}
#endif
